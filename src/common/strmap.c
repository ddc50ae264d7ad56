/* strmap.c - the hash map of strmap.h and its SipHash-1-3. */
#include "strmap.h"

#include "alloc.h"

#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

/* ---- SipHash (Aumasson and Bernstein), c compression and d finalization rounds ---- */

static inline uint64_t rotl(uint64_t x, int b)
{
    return (x << b) | (x >> (64 - b));
}

static inline void sip_round(uint64_t v[4])
{
    v[0] += v[1]; v[1] = rotl(v[1], 13); v[1] ^= v[0]; v[0] = rotl(v[0], 32);
    v[2] += v[3]; v[3] = rotl(v[3], 16); v[3] ^= v[2];
    v[0] += v[3]; v[3] = rotl(v[3], 21); v[3] ^= v[0];
    v[2] += v[1]; v[1] = rotl(v[1], 17); v[1] ^= v[2]; v[2] = rotl(v[2], 32);
}

static inline uint64_t load_le64(const unsigned char *p)
{
    uint64_t x;
    memcpy(&x, p, 8); /* little-endian host */
    return x;
}

static uint64_t siphash(int c, int d, uint64_t k0, uint64_t k1, const void *data, size_t len)
{
    const unsigned char *p = data;
    uint64_t v[4] = {k0 ^ 0x736f6d6570736575ull, k1 ^ 0x646f72616e646f6dull,
                     k0 ^ 0x6c7967656e657261ull, k1 ^ 0x7465646279746573ull};
    size_t whole = len & ~(size_t)7;
    for (size_t i = 0; i < whole; i += 8) {
        uint64_t m = load_le64(p + i);
        v[3] ^= m;
        for (int r = 0; r < c; r++)
            sip_round(v);
        v[0] ^= m;
    }
    uint64_t b = (uint64_t)len << 56;
    for (size_t i = whole; i < len; i++)
        b |= (uint64_t)p[i] << (8 * (i - whole));
    v[3] ^= b;
    for (int r = 0; r < c; r++)
        sip_round(v);
    v[0] ^= b;
    v[2] ^= 0xff;
    for (int r = 0; r < d; r++)
        sip_round(v);
    return v[0] ^ v[1] ^ v[2] ^ v[3];
}

uint64_t nr_siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len)
{
    return siphash(1, 3, k0, k1, data, len);
}

/* ---- the table ---------------------------------------------------------------------- */

#define MIN_CAP 16

/* A random key per map; should getrandom fail, something no client can see. */
static void draw_key(nr_strmap_t *m)
{
    uint64_t k[2];
    if (getrandom(k, sizeof(k), GRND_NONBLOCK) != (ssize_t)sizeof(k)) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        k[0] = nr_siphash13((uint64_t)(uintptr_t)m, (uint64_t)ts.tv_nsec, &ts, sizeof(ts));
        k[1] = nr_siphash13(k[0], (uint64_t)(uintptr_t)&ts, &k[0], sizeof(k[0]));
    }
    m->k0 = k[0];
    m->k1 = k[1];
}

static inline uint64_t hash(const nr_strmap_t *m, const char *key, size_t len)
{
    return nr_siphash13(m->k0, m->k1, key, len);
}

/* The slot holding key, or the empty slot where it would go. */
static nr_strmap_slot_t *find(const nr_strmap_t *m, const char *key, size_t len, uint64_t h)
{
    size_t mask = m->cap - 1;
    uint32_t tag = (uint32_t)(h >> 32);
    for (size_t i = (size_t)h & mask;; i = (i + 1) & mask) {
        nr_strmap_slot_t *s = &m->slots[i];
        if (s->key == NULL)
            return s;
        if (s->tag == tag && s->len == len && memcmp(s->key, key, len) == 0)
            return s;
    }
}

static void resize(nr_strmap_t *m, size_t cap)
{
    nr_strmap_slot_t *old = m->slots;
    size_t old_cap = m->cap;
    if (old == NULL)
        draw_key(m);
    m->slots = nr_calloc(cap, sizeof(*m->slots));
    m->cap = cap;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].key == NULL)
            continue;
        uint64_t h = hash(m, old[i].key, old[i].len);
        *find(m, old[i].key, old[i].len, h) = old[i];
    }
    free(old);
}

void nr_strmap_reserve(nr_strmap_t *m, size_t n)
{
    size_t cap = m->cap ? m->cap : MIN_CAP;
    while (cap / 2 < n)
        cap *= 2;
    if (cap != m->cap)
        resize(m, cap);
}

bool nr_strmap_put(nr_strmap_t *m, const char *key, size_t len, uint32_t val, uint32_t *old)
{
    static const char empty[1];
    if (key == NULL) /* an empty name given as NULL */
        key = empty;
    if (m->cap / 2 < m->n + 1)
        nr_strmap_reserve(m, m->n + 1);
    uint64_t h = hash(m, key, len);
    nr_strmap_slot_t *s = find(m, key, len, h);
    if (s->key != NULL) {
        if (old != NULL)
            *old = s->val;
        return false;
    }
    *s = (nr_strmap_slot_t){key, len, val, (uint32_t)(h >> 32)};
    m->n++;
    return true;
}

bool nr_strmap_get(const nr_strmap_t *m, const char *key, size_t len, uint32_t *val)
{
    if (m->n == 0)
        return false;
    if (key == NULL)
        key = "";
    const nr_strmap_slot_t *s = find(m, key, len, hash(m, key, len));
    if (s->key == NULL)
        return false;
    *val = s->val;
    return true;
}

void nr_strmap_free(nr_strmap_t *m)
{
    free(m->slots);
    memset(m, 0, sizeof(*m));
}
