/* ort_autocomplete.c - Triton's ONNX Runtime auto-complete: fills max_batch_size,
 * dynamic_batching, inputs and outputs from the model file when the config lacks them.
 *
 * Triton collects the model's I/O in a std::unordered_map<std::string, ...> and emits
 * them in that map's iteration order (simple_noconfig shows INPUT1, INPUT0 for a graph
 * with INPUT0, INPUT1). nr__ort_stdmap_order reproduces libstdc++'s order: its string
 * hash (_Hash_bytes, seed 0xc70f6907), its prime bucket counts and its bucket-list
 * insertion and rehash rules, so metadata and config JSON list tensors exactly as Triton.
 *
 * Runs on the loading thread; writes only the config it is given (which the core owns;
 * every string and array added here is malloc'd, for nr_cfg_free).
 */
#include "ort_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <stdlib.h>
#include <string.h>

/* ---- libstdc++ std::unordered_map<std::string, T> iteration order ---- */

static uint64_t shift_mix(uint64_t v) { return v ^ (v >> 47); }

/* std::hash<std::string> on LP64 libstdc++ (_Hash_bytes). */
static uint64_t std_string_hash(const char *s, size_t len)
{
    const uint64_t mul = ((uint64_t)0xc6a4a793u << 32) + 0x5bd1e995u;
    const unsigned char *buf = (const unsigned char *)s;
    const size_t aligned = len & ~(size_t)7;
    uint64_t hash = 0xc70f6907u ^ ((uint64_t)len * mul);
    for (size_t i = 0; i < aligned; i += 8) {
        uint64_t data = 0;
        for (int b = 7; b >= 0; b--) /* little-endian load */
            data = (data << 8) | buf[i + (size_t)b];
        hash ^= shift_mix(data * mul) * mul;
        hash *= mul;
    }
    if (len & 7) {
        uint64_t data = 0;
        for (size_t b = len & 7; b-- > 0;)
            data = (data << 8) | buf[aligned + b];
        hash ^= data;
        hash *= mul;
    }
    hash = shift_mix(hash) * mul;
    return shift_mix(hash);
}

/* Bucket counts a map goes through when filled one element at a time: 13 on the first
 * insert, then the next at the insert that would exceed load factor 1. */
static const size_t stdmap_buckets[] = {13, 29, 59, 127, 257, 541, 1109, 2357, 5087, 10273,
                                        20753, 42043, 85229, 172933, 351061};
#define N_BUCKET_STEPS (sizeof(stdmap_buckets) / sizeof(stdmap_buckets[0]))

typedef struct {
    size_t n;        /* nodes; index n is the list head (_M_before_begin) */
    long *next;      /* [n + 1], -1 = end */
    long *bucket;    /* [nb], node before the bucket's first node, -1 = empty */
    uint64_t *hash;  /* [n] */
    size_t nb;
} stdmap_t;

static void stdmap_rehash(stdmap_t *m, size_t nb)
{
    const long head = (long)m->n;
    free(m->bucket);
    m->bucket = nr_malloc(nb * sizeof(long));
    for (size_t b = 0; b < nb; b++)
        m->bucket[b] = -1;
    m->nb = nb;
    long p = m->next[head];
    m->next[head] = -1;
    size_t begin_bkt = 0;
    while (p != -1) {
        const long nxt = m->next[p];
        const size_t b = m->hash[p] % nb;
        if (m->bucket[b] == -1) {
            m->next[p] = m->next[head];
            m->next[head] = p;
            m->bucket[b] = head;
            if (m->next[p] != -1)
                m->bucket[begin_bkt] = p;
            begin_bkt = b;
        } else {
            m->next[p] = m->next[m->bucket[b]];
            m->next[m->bucket[b]] = p;
        }
        p = nxt;
    }
}

static void stdmap_insert(stdmap_t *m, long x)
{
    const long head = (long)m->n;
    const size_t b = m->hash[x] % m->nb;
    if (m->bucket[b] != -1) {
        m->next[x] = m->next[m->bucket[b]];
        m->next[m->bucket[b]] = x;
        return;
    }
    m->next[x] = m->next[head];
    m->next[head] = x;
    if (m->next[x] != -1)
        m->bucket[m->hash[m->next[x]] % m->nb] = x;
    m->bucket[b] = head;
}

/* Graph I/O names are unique (ORT rejects a model otherwise), so every name is a node. */
void nr__ort_stdmap_order(const char *const *names, size_t n, size_t *order)
{
    if (n > stdmap_buckets[N_BUCKET_STEPS - 1]) { /* beyond any real model: keep graph order */
        for (size_t i = 0; i < n; i++)
            order[i] = i;
        return;
    }
    stdmap_t m = {.n = n};
    m.next = nr_malloc((n + 1) * sizeof(long));
    m.hash = nr_malloc((n ? n : 1) * sizeof(uint64_t));
    m.next[n] = -1;
    size_t step = 0;
    for (size_t i = 0; i < n; i++) {
        m.hash[i] = std_string_hash(names[i], strlen(names[i]));
        if (i == 0)
            stdmap_rehash(&m, stdmap_buckets[0]);
        else if (i + 1 > m.nb)
            stdmap_rehash(&m, stdmap_buckets[++step]);
        stdmap_insert(&m, (long)i);
    }
    size_t k = 0;
    for (long p = m.next[n]; p != -1 && k < n; p = m.next[p])
        order[k++] = (size_t)p;
    free(m.next);
    free(m.bucket);
    free(m.hash);
}

/* ---- auto-complete ---- */

static bool batchable(const nr__ort_ios_t *ios)
{
    for (size_t i = 0; i < ios->n_in; i++)
        if (ios->in[i].ndim == 0 || ios->in[i].dims[0] != -1)
            return false;
    for (size_t i = 0; i < ios->n_out; i++)
        if (ios->out[i].ndim == 0 || ios->out[i].dims[0] != -1)
            return false;
    return true;
}

static nr_status_t *complete_max_batch(nr_model_config_t *cfg, const nr__ort_ios_t *ios)
{
    if (!batchable(ios)) {
        if (cfg->max_batch_size != 0)
            return nr_status_new(NR_INVALID_ARG, "autofill failed for model '%s': model does not "
                                 "support batching while non-zero max_batch_size is specified",
                                 cfg->name);
        return NULL;
    }
    if (cfg->max_batch_size == 0) {
        cfg->max_batch_size = nr__ort_default_max_batch();
        NR_LOG_WARN("autofilled max_batch_size to %d for model '%s' since batching is supporrted "
                    "but no max_batch_size is specified in model configuration. Must specify "
                    "max_batch_size to utilize autofill with a larger max batch size",
                    cfg->max_batch_size, cfg->name);
    }
    if (cfg->max_batch_size > 1 && cfg->scheduling_choice == NR_SCHED_DEFAULT) {
        cfg->scheduling_choice = NR_SCHED_DYNAMIC; /* dynamic_batching {}; normalize fills it */
        memset(&cfg->dynamic_batching, 0, sizeof(cfg->dynamic_batching));
    }
    return NULL;
}

/* Config dims for one model tensor: the model's dims minus the batch dim; a scalar gets
 * dims [1] (plus an empty reshape when batching). */
static void complete_dims(const nr_model_config_t *cfg, const nr__ort_io_t *io, nr_cfg_dims_t *dims,
                          bool *has_reshape)
{
    const size_t from = cfg->max_batch_size > 0 ? 1 : 0;
    const size_t n = io->ndim > from ? io->ndim - from : 0;
    dims->v = nr_calloc(n ? n : 1, sizeof(int64_t));
    dims->n = n ? n : 1;
    if (n)
        memcpy(dims->v, io->dims + from, n * sizeof(int64_t));
    else
        dims->v[0] = 1;
    *has_reshape = n == 0 && cfg->max_batch_size > 0;
}

static size_t *io_order(const nr__ort_io_t *v, size_t n)
{
    const char **names = nr_calloc(n ? n : 1, sizeof(*names));
    size_t *order = nr_calloc(n ? n : 1, sizeof(*order));
    for (size_t i = 0; i < n; i++)
        names[i] = v[i].name;
    nr__ort_stdmap_order(names, n, order);
    free(names);
    return order;
}

static void complete_inputs(nr_model_config_t *cfg, const nr__ort_ios_t *ios)
{
    size_t *order = io_order(ios->in, ios->n_in);
    free(cfg->input);
    cfg->input = nr_calloc(ios->n_in ? ios->n_in : 1, sizeof(*cfg->input));
    cfg->n_input = ios->n_in;
    for (size_t k = 0; k < ios->n_in; k++) {
        const nr__ort_io_t *io = &ios->in[order[k]];
        nr_cfg_input_t *ci = &cfg->input[k];
        ci->name = nr_strdup(io->name);
        ci->data_type = nr__ort_to_dtype(io->type);
        complete_dims(cfg, io, &ci->dims, &ci->has_reshape);
    }
    free(order);
}

static void complete_outputs(nr_model_config_t *cfg, const nr__ort_ios_t *ios)
{
    size_t *order = io_order(ios->out, ios->n_out);
    free(cfg->output);
    cfg->output = nr_calloc(ios->n_out ? ios->n_out : 1, sizeof(*cfg->output));
    cfg->n_output = ios->n_out;
    for (size_t k = 0; k < ios->n_out; k++) {
        const nr__ort_io_t *io = &ios->out[order[k]];
        nr_cfg_output_t *co = &cfg->output[k];
        co->name = nr_strdup(io->name);
        co->data_type = nr__ort_to_dtype(io->type);
        co->label_filename = nr_strdup("");
        complete_dims(cfg, io, &co->dims, &co->has_reshape);
    }
    free(order);
}

nr_status_t *nr__ort_autocomplete(nr_model_config_t *cfg, const char *model_path)
{
    const size_t n_in = cfg->n_input + cfg->n_batch_input, n_out = cfg->n_output;
    if (n_in > 0 && n_out > 0) {
        NR_LOG_INFO("skipping model configuration auto-complete for '%s': inputs and outputs "
                    "already specified", cfg->name);
        return NULL;
    }
    char *path = NULL;
    OrtSession *session = NULL;
    nr__ort_ios_t ios = {0};
    nr_status_t *st = nr__ort_resolve_path(cfg, model_path, &path);
    if (!st)
        st = nr__ort_meta_session(path, &session);
    if (!st)
        st = nr__ort_read_ios(session, &ios);
    if (!st)
        st = complete_max_batch(cfg, &ios);
    if (!st && n_in == 0)
        complete_inputs(cfg, &ios);
    if (!st && n_out == 0)
        complete_outputs(cfg, &ios);
    nr__ort_ios_free(&ios);
    if (session)
        nr__ort_api()->ReleaseSession(session);
    free(path);
    return st;
}
