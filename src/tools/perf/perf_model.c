/* perf_model.c - what nereid-perf knows of the model whatever the protocol (perf.h): each
 * input's request shape (--shape, -b) and data (--input-data zero|random, --string-length),
 * and perf_analyzer's batch check. perf_http.c and perf_grpc.c read the metadata and build
 * their request from this.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

uint64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static const struct {
    const char *name;
    int size;
} g_types[] = {{"BOOL", 1},  {"UINT8", 1}, {"UINT16", 2}, {"UINT32", 4}, {"UINT64", 8},
               {"INT8", 1},  {"INT16", 2}, {"INT32", 4},  {"INT64", 8},  {"FP16", 2},
               {"FP32", 4},  {"FP64", 8},  {"BF16", 2},   {"BYTES", 0}};

static int type_size(const char *dt)
{
    for (size_t i = 0; i < sizeof(g_types) / sizeof(g_types[0]); i++)
        if (strcmp(g_types[i].name, dt) == 0)
            return g_types[i].size;
    return -1;
}

void perf_model_init(perf_model_t *m, const perf_opts_t *o)
{
    memset(m, 0, sizeof(*m));
    m->version = nr_strdup(o->version ? o->version : "");
}

nr_status_t *perf_model_check_batch(const perf_model_t *m, const perf_opts_t *o)
{
    if (m->max_batch_size == 0 && o->batch > 1)
        return nr_status_new(NR_INVALID_ARG, "can not specify batch size > 1 as the model does "
                             "not support batching");
    return NULL;
}

nr_status_t *perf_input_init(perf_input_t *in, const char *name, const char *datatype,
                             const int64_t *dims, size_t nd, int mbs, const perf_opts_t *o)
{
    in->name = nr_strdup(name);
    in->datatype = nr_strdup(datatype);
    in->elem_size = type_size(datatype);
    if (in->elem_size < 0)
        return nr_status_new(NR_INVALID_ARG, "unsupported datatype '%s' for input '%s'",
                             datatype, name);
    const perf_shape_t *given = NULL;
    for (size_t i = 0; i < o->n_shapes; i++)
        if (strcmp(o->shapes[i].name, name) == 0)
            given = &o->shapes[i];
    size_t skip = mbs > 0 && nd > 0 ? 1 : 0; /* the batch dimension */
    in->shape = nr_calloc(nd + (given ? given->n_dims : 0) + 1, sizeof(int64_t));
    if (skip)
        in->shape[in->n_shape++] = o->batch;
    if (given) {
        for (size_t k = 0; k < given->n_dims; k++)
            in->shape[in->n_shape++] = given->dims[k];
        return NULL;
    }
    for (size_t k = skip; k < nd; k++) {
        if (dims[k] < 0 && perf_data_is_file(o)) /* the file gives it */
            in->variable = true;
        else if (dims[k] < 0)
            return nr_status_new(NR_INVALID_ARG, "Failed to init manager inputs: input %s "
                                 "contains dynamic shape, provide shapes to send along with the "
                                 "request", name);
        in->shape[in->n_shape++] = dims[k];
    }
    return NULL;
}

void perf_output_init(perf_output_t *out, const char *name, const char *datatype,
                      const int64_t *dims, size_t nd, int mbs, const perf_opts_t *o)
{
    memset(out, 0, sizeof(*out));
    out->name = nr_strdup(name);
    int size = type_size(datatype);
    size_t bytes = size > 0 ? (size_t)size * (size_t)o->batch : 0;
    for (size_t k = mbs > 0 && nd > 0 ? 1 : 0; k < nd; k++)
        bytes = dims[k] < 0 ? 0 : bytes * (size_t)dims[k];
    if (o->shm_system) { /* perf_analyzer's sizes: the output's, else the option's per batch */
        out->region = nr_strdup(name);
        out->shm_bytes = bytes ? bytes : (size_t)o->output_shm_size * (size_t)o->batch;
    }
}

static uint64_t next(uint64_t *s)
{
    *s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
    return *s;
}

static size_t input_elems(const perf_input_t *in)
{
    size_t elems = 1;
    for (size_t k = 0; k < in->n_shape; k++)
        elems *= (size_t)in->shape[k];
    return elems;
}

/* Every input's bytes into *data (initialised here); sets each input's offset and bytes.
 * As perf_analyzer: the fixed-size inputs share one buffer, the largest one's size, of zeros
 * or of uniform random bytes (any float, NaN and Inf included: a CNN's compute time depends on
 * the values, so both tools must send the same kind), each input reading its own prefix; a
 * BYTES input gets --string-length letters per element after it. */
static void model_data(perf_model_t *m, const perf_opts_t *o, nr_buf_t *data)
{
    bool zero = o->input_data && strcmp(o->input_data, "zero") == 0;
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t shared = 0;
    for (size_t i = 0; i < m->n_inputs; i++) {
        perf_input_t *in = &m->inputs[i];
        in->bytes = input_elems(in) * (size_t)in->elem_size;
        in->offset = 0;
        if (in->bytes > shared)
            shared = in->bytes;
    }
    nr_buf_init(data);
    nr_buf_reserve(data, shared);
    for (size_t k = 0; k < shared; k += 8) {
        uint64_t r = zero ? 0 : next(&seed);
        memcpy(data->data + k, &r, shared - k < 8 ? shared - k : 8);
    }
    data->len = shared;
    data->data[shared] = '\0';
    for (size_t i = 0; i < m->n_inputs; i++) {
        perf_input_t *in = &m->inputs[i];
        if (in->elem_size != 0)
            continue;
        size_t elems = input_elems(in);
        in->offset = data->len;
        for (size_t e = 0; e < elems; e++) { /* 4-byte length, then the letters */
            uint32_t n = (uint32_t)o->string_length;
            nr_buf_append(data, &n, 4);
            for (uint32_t k = 0; k < n; k++)
                nr_buf_putc(data, zero ? '0' : (char)('a' + next(&seed) % 26));
        }
        in->bytes = data->len - in->offset;
    }
}

void perf_model_free(perf_model_t *m)
{
    for (size_t i = 0; i < m->n_inputs; i++) {
        free(m->inputs[i].name);
        free(m->inputs[i].datatype);
        free(m->inputs[i].shape);
    }
    for (size_t i = 0; i < m->n_outputs; i++) {
        free(m->outputs[i].name);
        free(m->outputs[i].region);
    }
    free(m->inputs);
    free(m->outputs);
    free(m->version);
    free(m->path);
    for (size_t i = 0; i < m->n_requests; i++) {
        nr_buf_free(&m->requests[i]);
        if (m->profile_inputs)
            nr_buf_free(&m->profile_inputs[i]);
    }
    free(m->requests);
    free(m->profile_inputs);
    for (size_t i = 0; i < m->n_edges; i++) {
        free(m->edges[i].parent);
        free(m->edges[i].name);
        free(m->edges[i].version);
    }
    free(m->edges);
    perf_shm_free(m);
}

bool perf_data_is_file(const perf_opts_t *o)
{
    return o->input_data && strcmp(o->input_data, "zero") != 0 &&
           strcmp(o->input_data, "random") != 0;
}

static nr_buf_t *next_request(perf_model_t *m)
{
    m->requests = nr_realloc(m->requests, (m->n_requests + 1) * sizeof(*m->requests));
    nr_buf_t *r = &m->requests[m->n_requests++];
    nr_buf_init(r);
    return r;
}

/* Request `step` built from data: with --shared-memory system each input's bytes first go
 * to its own region, <input>_0_<step> as perf_analyzer names it (one stream). */
static nr_status_t *build_step(perf_model_t *m, const perf_opts_t *o, size_t step,
                               const nr_buf_t *data, perf_build_fn build, void *ctx)
{
    nr_status_t *st = NULL;
    for (size_t i = 0; o->shm_system && st == NULL && i < m->n_inputs; i++) {
        perf_input_t *in = &m->inputs[i];
        free(in->region);
        in->region = nr_asprintf("%s_0_%zu", in->name, step);
        st = perf_shm_create(m, in->region, data->data + in->offset, in->bytes);
    }
    if (st == NULL)
        st = build(ctx, m, data, next_request(m));
    if (st == NULL && o->profile_export) {
        m->profile_inputs = nr_realloc(m->profile_inputs, m->n_requests * sizeof(nr_buf_t));
        nr_buf_t *in = &m->profile_inputs[m->n_requests - 1];
        nr_buf_init(in);
        perf_profile_inputs(m, data, in);
    }
    for (size_t i = 0; i < m->n_inputs; i++) {
        free(m->inputs[i].region);
        m->inputs[i].region = NULL;
    }
    return st;
}

nr_status_t *perf_model_requests(perf_model_t *m, const perf_opts_t *o, perf_build_fn build,
                                 void *ctx)
{
    nr_buf_t data;
    nr_status_t *st = NULL;
    for (size_t i = 0; o->shm_system && st == NULL && i < m->n_outputs; i++)
        st = perf_shm_create(m, m->outputs[i].region, NULL, m->outputs[i].shm_bytes);
    if (st)
        return st;
    if (!perf_data_is_file(o)) {
        model_data(m, o, &data);
        st = build_step(m, o, 0, &data, build, ctx);
        nr_buf_free(&data);
        return st;
    }
    perf_entry_t *es = NULL;
    size_t n = 0;
    st = perf_data_json(o->input_data, o, m, &es, &n);
    /* each entry's shapes in place of the inputs' for its request, then theirs back */
    int64_t **shapes = nr_calloc(m->n_inputs + 1, sizeof(*shapes));
    size_t *n_shapes = nr_calloc(m->n_inputs + 1, sizeof(*n_shapes));
    for (size_t i = 0; i < m->n_inputs; i++) {
        shapes[i] = m->inputs[i].shape;
        n_shapes[i] = m->inputs[i].n_shape;
    }
    for (size_t e = 0; st == NULL && e < n; e++) {
        for (size_t i = 0; i < m->n_inputs; i++) {
            perf_input_t *in = &m->inputs[i];
            in->shape = es[e].shapes[i];
            in->n_shape = es[e].n_shapes[i];
            in->offset = es[e].offsets[i];
            in->bytes = es[e].bytes[i];
        }
        st = build_step(m, o, e, &es[e].data, build, ctx);
    }
    for (size_t i = 0; i < m->n_inputs; i++) {
        m->inputs[i].shape = shapes[i];
        m->inputs[i].n_shape = n_shapes[i];
    }
    free(shapes);
    free(n_shapes);
    perf_entries_free(es, n, m->n_inputs);
    return st;
}
