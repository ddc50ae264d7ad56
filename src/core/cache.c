/* cache.c - the response cache (cache.h): a hash table of entries over an LRU list, under
 * one mutex; keys are compared byte for byte, so a hit is an exact match. */
#include "cache.h"

#include "../common/alloc.h"
#include "../common/cli.h"
#include "../common/clock.h"
#include "model.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    bool present;
    nr_dtype_t dtype;
    size_t ndim;
    int64_t dims[NR_MAX_DIMS];
    size_t size, off; /* bytes, at data + off */
} out_t;

typedef struct entry_s {
    nr_hold_t hold;              /* the cache's reference while listed, and one per view */
    struct entry_s *hnext;       /* hash chain */
    struct entry_s *prev, *next; /* LRU list, the most recently used first */
    uint64_t hash, owner;
    unsigned char *key;          /* owned */
    size_t key_len;
    size_t bytes;                /* what it counts against the size */
    size_t n_out;
    out_t *outs;                 /* [n_out], in the request's order */
    unsigned char *data;         /* the outputs' bytes (one block after outs) */
} entry_t;

static struct {
    pthread_mutex_t mu;
    bool on;
    size_t size, used, n;
    uint64_t evictions;
    entry_t **buckets;
    size_t n_buckets; /* a power of two */
    entry_t *head, *tail;
    _Atomic uint64_t next_owner;
} c = {.mu = PTHREAD_MUTEX_INITIALIZER, .next_owner = 1};

nr_status_t *nr_cache_config(const char *spec)
{
    /* local,size=<bytes> (Triton's other local key, enable_stats, ... are not taken) */
    const char *comma = strchr(spec, ',');
    if (comma == NULL || strchr(comma + 1, '=') == NULL)
        return nr_status_new(NR_INVALID_ARG, "--cache-config option format is '<cache "
                             "name>,<setting>=<value>'. Got %s", spec);
    if ((size_t)(comma - spec) != 5 || strncmp(spec, "local", 5))
        return nr_status_new(NR_INVALID_ARG, "--cache-config: nereid has the 'local' cache "
                             "only, got '%.*s'", (int)(comma - spec), spec);
    const char *eq = strchr(comma + 1, '=');
    uint64_t size;
    if ((size_t)(eq - comma - 1) != 4 || strncmp(comma + 1, "size", 4) ||
        !nr_cli_u64(eq + 1, &size))
        return nr_status_new(NR_INVALID_ARG, "--cache-config=local: the setting is "
                             "size=<bytes>, got '%s'", comma + 1);
    pthread_mutex_lock(&c.mu);
    c.on = true;
    c.size = (size_t)size;
    pthread_mutex_unlock(&c.mu);
    return NULL;
}

bool nr_cache_enabled(void) { return c.on; }

uint64_t nr_cache_new_owner(void) { return atomic_fetch_add(&c.next_owner, 1); }

static void entry_release(nr_hold_t *h)
{
    entry_t *e = (entry_t *)h; /* hold is its first member */
    free(e->key);
    free(e);
}

/* ---- the table and the list (lock held) ---- */

static void unlink_lru(entry_t *e)
{
    if (e->prev) e->prev->next = e->next; else c.head = e->next;
    if (e->next) e->next->prev = e->prev; else c.tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(entry_t *e)
{
    e->prev = NULL;
    e->next = c.head;
    if (c.head) c.head->prev = e; else c.tail = e;
    c.head = e;
}

static void remove_entry(entry_t *e)
{
    entry_t **p = &c.buckets[e->hash & (c.n_buckets - 1)];
    while (*p != e)
        p = &(*p)->hnext;
    *p = e->hnext;
    unlink_lru(e);
    c.used -= e->bytes;
    c.n--;
    nr_hold_unref(&e->hold); /* freed now, or by the last reply made from it */
}

static void grow(void)
{
    size_t nb = c.n_buckets ? c.n_buckets * 2 : 1024;
    entry_t **b = nr_calloc(nb, sizeof(*b));
    for (size_t i = 0; i < c.n_buckets; i++)
        for (entry_t *e = c.buckets[i], *next; e; e = next) {
            next = e->hnext;
            e->hnext = b[e->hash & (nb - 1)];
            b[e->hash & (nb - 1)] = e;
        }
    free(c.buckets);
    c.buckets = b;
    c.n_buckets = nb;
}

static entry_t *find(uint64_t hash, const unsigned char *key, size_t len)
{
    if (c.n_buckets == 0)
        return NULL;
    for (entry_t *e = c.buckets[hash & (c.n_buckets - 1)]; e; e = e->hnext)
        if (e->hash == hash && e->key_len == len && !memcmp(e->key, key, len))
            return e;
    return NULL;
}

void nr_cache_drop_owner(uint64_t owner)
{
    pthread_mutex_lock(&c.mu);
    for (entry_t *e = c.head, *next; e; e = next) {
        next = e->next;
        if (e->owner == owner)
            remove_entry(e);
    }
    pthread_mutex_unlock(&c.mu);
}

void nr_cache_clear(void)
{
    pthread_mutex_lock(&c.mu);
    while (c.head)
        remove_entry(c.head);
    free(c.buckets);
    c.buckets = NULL;
    c.n_buckets = 0;
    c.on = false;
    c.size = c.used = c.n = 0;
    c.evictions = 0;
    pthread_mutex_unlock(&c.mu);
}

void nr_cache_usage(size_t *entries, size_t *bytes, uint64_t *evictions)
{
    pthread_mutex_lock(&c.mu);
    *entries = c.n;
    *bytes = c.used;
    *evictions = c.evictions;
    pthread_mutex_unlock(&c.mu);
}

/* ---- keys ---- */

/* 64 bits of the key, eight bytes at a time (a multiply-xorshift mix); equal keys are then
 * compared in full. */
static uint64_t hash_of(const unsigned char *p, size_t n)
{
    uint64_t h = 0x9e3779b97f4a7c15ull ^ n;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) {
        uint64_t w;
        memcpy(&w, p + i, 8);
        h = (h ^ w) * 0xff51afd7ed558ccdull;
        h ^= h >> 32;
    }
    uint64_t tail = 0;
    memcpy(&tail, p + i, n - i);
    h = (h ^ tail) * 0xc4ceb9fe1a85ec53ull;
    return h ^ (h >> 29);
}

static void put(nr_buf_t *b, const void *p, size_t n)
{
    nr_buf_append(b, (const char *)p, n);
}

/* owner | outputs wanted | each config input: present, dtype, shape, bytes */
static void build_key(nr_req_t *req, uint64_t owner, nr_buf_t *b)
{
    const nr_model_config_t *cfg = req->model->cfg;
    size_t len = 2 * sizeof(uint64_t) + req->n_want * sizeof(*req->want) + cfg->n_input;
    for (size_t i = 0; i < cfg->n_input; i++) /* one allocation of the exact size */
        if (req->present[i])
            len += sizeof(uint32_t) + 2 * sizeof(uint64_t) +
                   req->inputs[i].ndim * sizeof(int64_t) + req->inputs[i].size;
    nr_buf_reserve(b, len);
    put(b, &owner, sizeof(owner));
    uint64_t nw = req->n_want;
    put(b, &nw, sizeof(nw));
    put(b, req->want, req->n_want * sizeof(*req->want));
    for (size_t i = 0; i < cfg->n_input; i++) {
        unsigned char present = req->present[i];
        put(b, &present, 1);
        if (!present)
            continue;
        const nr_tensor_t *t = &req->inputs[i];
        uint32_t dt = (uint32_t)t->dtype;
        uint64_t nd = t->ndim, size = t->size;
        put(b, &dt, sizeof(dt));
        put(b, &nd, sizeof(nd));
        put(b, t->dims, t->ndim * sizeof(int64_t));
        put(b, &size, sizeof(size));
        if (t->size)
            put(b, t->data, t->size);
    }
}

bool nr_cache_lookup(nr_req_t *req, uint64_t owner, uint64_t *ns)
{
    uint64_t t0 = nr_now_ns();
    nr_buf_t b;
    nr_buf_init(&b);
    build_key(req, owner, &b);
    uint64_t hash = hash_of((const unsigned char *)b.data, b.len);
    pthread_mutex_lock(&c.mu);
    entry_t *e = find(hash, (const unsigned char *)b.data, b.len);
    if (e != NULL) {
        unlink_lru(e);
        push_front(e);
        atomic_fetch_add_explicit(&e->hold.refs, (int)e->n_out, memory_order_relaxed);
    }
    pthread_mutex_unlock(&c.mu);
    if (e == NULL) { /* kept for the insert after the model has run */
        req->cache_key = b.data;
        req->cache_key_len = b.len;
        req->cache_hash = hash;
        req->cache_owner = owner;
        *ns = nr_now_ns() - t0;
        return false;
    }
    nr_buf_free(&b);
    const nr_model_config_t *cfg = req->model->cfg;
    for (size_t k = 0; k < e->n_out && k < req->n_want; k++) {
        const out_t *o = &e->outs[k];
        nr_tensor_t *t = &req->outputs[k];
        if (!o->present) {
            nr_hold_unref(&e->hold);
            continue;
        }
        t->name = cfg->output[req->want[k]].name;
        t->dtype = o->dtype;
        t->ndim = o->ndim;
        memcpy(t->dims, o->dims, o->ndim * sizeof(int64_t));
        t->data = e->data + o->off;
        t->size = o->size;
        t->hold = &e->hold;
    }
    *ns = nr_now_ns() - t0;
    return true;
}

uint64_t nr_cache_insert(nr_req_t *req)
{
    uint64_t t0 = nr_now_ns();
    size_t n = req->n_want, data = 0;
    for (size_t k = 0; k < n; k++)
        if (req->outputs[k].name != NULL)
            data += (req->outputs[k].size + 15) & ~(size_t)15;
    size_t head = sizeof(entry_t) + n * sizeof(out_t);
    size_t bytes = head + data + req->cache_key_len;
    if (bytes > c.size) { /* it could never fit */
        free(req->cache_key);
        req->cache_key = NULL;
        return nr_now_ns() - t0;
    }
    entry_t *e = malloc(head + data);
    if (e == NULL) { /* no room for it: the answer is not kept */
        free(req->cache_key);
        req->cache_key = NULL;
        return nr_now_ns() - t0;
    }
    *e = (entry_t){.hash = req->cache_hash, .owner = req->cache_owner,
                   .key = (unsigned char *)req->cache_key,
                   .key_len = req->cache_key_len, .bytes = bytes, .n_out = n};
    atomic_init(&e->hold.refs, 1);
    e->hold.release = entry_release;
    req->cache_key = NULL; /* the entry's now */
    e->outs = (out_t *)(e + 1);
    e->data = (unsigned char *)(e->outs + n);
    size_t off = 0;
    for (size_t k = 0; k < n; k++) {
        const nr_tensor_t *t = &req->outputs[k];
        out_t *o = &e->outs[k];
        *o = (out_t){.present = t->name != NULL};
        if (!o->present)
            continue;
        o->dtype = t->dtype;
        o->ndim = t->ndim;
        memcpy(o->dims, t->dims, t->ndim * sizeof(int64_t));
        o->size = t->size;
        o->off = off;
        if (t->size)
            memcpy(e->data + off, t->data, t->size);
        off += (t->size + 15) & ~(size_t)15;
    }
    pthread_mutex_lock(&c.mu);
    if (!c.on || find(e->hash, e->key, e->key_len) != NULL) { /* another miss kept it first */
        pthread_mutex_unlock(&c.mu);
        nr_hold_unref(&e->hold);
        return nr_now_ns() - t0;
    }
    while (c.used + e->bytes > c.size && c.tail != NULL) { /* the least recently used go */
        remove_entry(c.tail);
        c.evictions++;
    }
    if (c.n + 1 > 2 * c.n_buckets)
        grow();
    entry_t **slot = &c.buckets[e->hash & (c.n_buckets - 1)];
    e->hnext = *slot;
    *slot = e;
    push_front(e);
    c.used += e->bytes;
    c.n++;
    pthread_mutex_unlock(&c.mu);
    return nr_now_ns() - t0;
}
