/* http_infer.c - POST /v2/models/<m>[/versions/<v>]/infer, request side:
 * the body (JSON header + binary chunks, or a raw binary body) becomes an
 * nr_req_t, which is submitted; the HTTP worker parks the connection until
 * done() (or, without a server, the calling thread waits for it).
 *
 * Binary inputs are views into the request body, which the request keeps
 * until it is freed; JSON `data` is converted once into a buffer per input.
 * Every size from the wire is checked before anything is allocated: element
 * counts go through nr_shape_count, and a JSON input can only need as many
 * elements as its JSON text has bytes. Error texts are Triton's HTTP-layer
 * texts (no "[request id: ...]" prefix); the core adds its own for model
 * validation. Nothing here takes a lock except the per-request done() event
 * of the waiting (serverless) path.
 */
#include "http_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char empty_data[1];

#define T_SHAPE "Shape does not match true shape of 'data' field"

static nr_status_t *bad(const char *field, const char *what)
{
    return nr_status_new(NR_INVALID_ARG, "Unable to parse '%s': %s", field, what);
}

static nr_status_t *missing(const char *field)
{
    return nr_status_new(NR_INVALID_ARG, "Unable to parse '%s': " NR_TJ_MISSING, field, field);
}

#define member nr_jv_get

/* A required string member: "Unable to parse '<key>': ..." otherwise. */
static nr_status_t *get_str(const nr_jv_t *obj, const char *key, const char **s, size_t *len)
{
    const nr_jv_t *v = member(obj, key);
    if (v == NULL)
        return missing(key);
    if (v->type != NR_JV_STRING)
        return bad(key, NR_TJ_STRING);
    *s = v->u.str;
    *len = v->n;
    return NULL;
}

/* ---- request parameters ------------------------------------------------- */

/* rapidjson's IsUint64 */
static bool is_uint(const nr_param_t *p)
{
    return p->type == NR_PARAM_UINT64 || (p->type == NR_PARAM_INT64 && p->v.i >= 0);
}

/* The TritonJson accessor's text for a parameter of the wrong type. */
static nr_status_t *bad_param(const nr_param_t *p, const char *what)
{
    return nr_status_new(NR_INVALID_ARG, "Unable to parse '%.*s': %s", (int)p->key_len, p->key,
                         what);
}

nr_status_t *nr_http_check_param(nr_infer_t *inf, const nr_param_t *p)
{
    if (nr_param_is(p, "sequence_id")) {
        if (!is_uint(p) && p->type != NR_PARAM_STRING)
            return bad_param(p, NR_TJ_STRING);
    } else if (nr_param_is(p, "sequence_start") || nr_param_is(p, "sequence_end")) {
        if (p->type != NR_PARAM_BOOL)
            return bad_param(p, NR_TJ_BOOL);
    } else if (nr_param_is(p, "priority") || nr_param_is(p, "timeout")) {
        if (!is_uint(p))
            return bad_param(p, NR_TJ_UINT);
    } else if (p->key_len >= 7 && memcmp(p->key, "triton_", 7) == 0) {
        return nr_status_new(NR_INVALID_ARG,
                             "parameter keys starting with 'triton_' are reserved for Triton "
                             "usage and should not be specified.");
    } else if (p->type == NR_PARAM_OTHER) {
        return nr_status_new(NR_INVALID_ARG,
                             "parameter '%.*s' has invalid type. It should be either 'int', "
                             "'bool', or 'string'.",
                             (int)p->key_len, p->key);
    }
    nr_infer_param(inf, p);
    return NULL;
}

static bool key_is(const nr_jv_member_t *m, const char *k)
{
    size_t n = strlen(k);
    return m->key_len == n && memcmp(m->key, k, n) == 0;
}

/* Request parameters: binary_data_output is HTTP's own (binary framing); the
 * rest are the core's (priority, timeout, sequence_*, triton_*, custom). */
static nr_status_t *parse_params(nr_http_infer_t *inf, const nr_jv_t *root)
{
    const nr_jv_t *params = member(root, "parameters");
    if (params == NULL)
        return NULL;
    if (params->type != NR_JV_OBJECT)
        return nr_status_new(NR_INVALID_ARG, "failed to get request params.: attempt to access "
                                             "JSON non-object as object");
    for (size_t i = 0; i < params->n; i++) {
        const nr_jv_member_t *m = &params->u.members[i];
        if (key_is(m, "binary_data_output")) {
            if (!nr_jv_is_bool(&m->val))
                return bad("binary_data_output", NR_TJ_BOOL);
            inf->default_binary = m->val.type == NR_JV_TRUE;
            continue;
        }
        nr_param_t p = nr_http_param(m->key, m->key_len, &m->val);
        nr_status_t *st = nr_http_check_param(&inf->base, &p);
        if (st != NULL)
            return st;
    }
    return NULL;
}

/* ---- JSON tensor data --------------------------------------------------- */

typedef struct {
    nr_dtype_t dt;
    char *out;
    uint64_t n, expected;
} fill_t;

/* Integer ranges per dtype. Triton narrows silently; nereid refuses values
 * that do not fit (a documented departure). */
static nr_status_t *int_leaf(fill_t *f, const nr_jv_t *v, uint64_t i)
{
    int64_t lo = 0;
    uint64_t hi = 0;
    bool is_unsigned = false;
    switch (f->dt) {
    case NR_TYPE_INT8: lo = INT8_MIN; hi = INT8_MAX; break;
    case NR_TYPE_INT16: lo = INT16_MIN; hi = INT16_MAX; break;
    case NR_TYPE_INT32: lo = INT32_MIN; hi = INT32_MAX; break;
    case NR_TYPE_INT64: lo = INT64_MIN; hi = INT64_MAX; break;
    case NR_TYPE_UINT8: hi = UINT8_MAX; is_unsigned = true; break;
    case NR_TYPE_UINT16: hi = UINT16_MAX; is_unsigned = true; break;
    case NR_TYPE_UINT32: hi = UINT32_MAX; is_unsigned = true; break;
    default: hi = UINT64_MAX; is_unsigned = true; break;
    }
    if (is_unsigned ? !nr_jv_is_uint(v) : v->type != NR_JV_INT && v->type != NR_JV_UINT)
        return bad("data", is_unsigned ? NR_TJ_UINT : NR_TJ_INT);
    bool fits = v->type == NR_JV_UINT ? hi == UINT64_MAX
                                      : (v->u.i >= lo && (v->u.i < 0 || (uint64_t)v->u.i <= hi));
    if (!fits) {
        char num[32];
        if (v->type == NR_JV_UINT)
            snprintf(num, sizeof(num), "%llu", (unsigned long long)(uint64_t)v->u.i);
        else
            snprintf(num, sizeof(num), "%lld", (long long)v->u.i);
        return nr_status_new(NR_INVALID_ARG, "Unable to parse 'data': value %s is out of range "
                                             "for %s",
                             num, nr_dtype_kserve_name(f->dt));
    }
    uint64_t u = (uint64_t)v->u.i;
    size_t es = nr_dtype_size(f->dt);
    memcpy(f->out + i * es, &u, es); /* little-endian host: the low bytes */
    return NULL;
}

static nr_status_t *fill_leaf(fill_t *f, const nr_jv_t *v)
{
    if (f->n >= f->expected)
        return bad("data", T_SHAPE);
    uint64_t i = f->n++;
    switch (f->dt) {
    case NR_TYPE_BOOL:
        if (!nr_jv_is_bool(v))
            return bad("data", NR_TJ_BOOL);
        ((uint8_t *)f->out)[i] = v->type == NR_JV_TRUE;
        return NULL;
    case NR_TYPE_FP32: {
        if (!nr_jv_is_number(v))
            return bad("data", NR_TJ_DOUBLE);
        float x = (float)nr_jv_number(v);
        memcpy(f->out + i * 4, &x, 4);
        return NULL;
    }
    case NR_TYPE_FP64: {
        if (!nr_jv_is_number(v))
            return bad("data", NR_TJ_DOUBLE);
        double d = nr_jv_number(v);
        memcpy(f->out + i * 8, &d, 8);
        return NULL;
    }
    default:
        return int_leaf(f, v, i);
    }
}

/* The leaves of `data` (a span: nested arrays flattened) in order. */
static nr_status_t *fill(fill_t *f, const nr_jv_t *span)
{
    nr_json_leaves_t it;
    nr_jv_t v;
    nr_json_leaves_init(&it, span);
    while (nr_json_leaves_next(&it, &v)) {
        nr_status_t *st = fill_leaf(f, &v);
        if (st != NULL)
            return st;
    }
    return NULL;
}

/* Serialized size of a (nested) BYTES array: 4 + len per string. */
static nr_status_t *bytes_size(const nr_jv_t *span, uint64_t *size)
{
    nr_json_leaves_t it;
    nr_jv_t v;
    nr_json_leaves_init(&it, span);
    while (nr_json_leaves_next(&it, &v)) {
        if (v.type != NR_JV_STRING)
            return nr_status_new(NR_INVALID_ARG,
                                 "Unable to parse JSON bytes array: " NR_TJ_STRING);
        size_t len = it.escaped ? nr_json_unescape(v.u.str, v.n, NULL) : v.n;
        if (len > UINT32_MAX)
            return nr_status_new(NR_INVALID_ARG,
                                 "Unable to parse JSON bytes array: element too long");
        *size += 4 + len;
    }
    return NULL;
}

static void bytes_fill(const nr_jv_t *span, char *p)
{
    nr_json_leaves_t it;
    nr_jv_t v;
    nr_json_leaves_init(&it, span);
    while (nr_json_leaves_next(&it, &v)) {
        uint32_t len = (uint32_t)v.n;
        if (it.escaped)
            len = (uint32_t)nr_json_unescape(v.u.str, v.n, p + 4);
        else if (v.n)
            memcpy(p + 4, v.u.str, v.n);
        memcpy(p, &len, 4);
        p += 4 + len;
    }
}

/* A buffer the request keeps, sized by the wire: NULL when it cannot be had. */
static char *keep(nr_http_infer_t *inf, size_t size)
{
    char *buf = malloc(size ? size : 1);
    return buf != NULL ? nr_infer_keep(&inf->base, buf) : NULL;
}

static nr_status_t *no_memory(size_t size, const char *name, size_t name_len)
{
    return nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes for input '%.*s'", size,
                         (int)name_len, name);
}

/* Converts `data` of one input, a span the JSON reader left as text, straight
 * into the tensor's buffer. json_len bounds the element count: every element
 * takes at least one byte of JSON text. */
static nr_status_t *json_data(nr_http_infer_t *inf, const nr_jv_t *in, const char *name,
                              size_t name_len, nr_dtype_t dt, const int64_t *dims, size_t ndim,
                              size_t json_len, const void **data, size_t *size)
{
    uint64_t count;
    if (!nr_shape_count(dims, ndim, &count))
        return bad("data", T_SHAPE);
    if (count == 0) {
        *data = empty_data;
        *size = 0;
        return NULL;
    }
    const nr_jv_t *d = member(in, "data");
    if (d == NULL || d->type != NR_JV_SPAN) /* an array is always a span here */
        return bad("data", NR_TJ_ARRAY);
    if (dt == NR_TYPE_FP16 || dt == NR_TYPE_BF16)
        return nr_status_new(NR_INVALID_ARG,
                             "receiving %s data via JSON is not supported. Please use the binary "
                             "data format for input %.*s",
                             nr_dtype_kserve_name(dt), (int)name_len, name);
    if (dt == NR_TYPE_STRING) {
        /* the element count is the core's to check (Triton's wording) */
        uint64_t bytes = 0;
        nr_status_t *st = bytes_size(d, &bytes);
        if (st != NULL)
            return st;
        char *buf = keep(inf, bytes);
        if (buf == NULL)
            return no_memory(bytes, name, name_len);
        bytes_fill(d, buf);
        *data = buf;
        *size = bytes;
        return NULL;
    }
    size_t es = nr_dtype_size(dt);
    if (count > json_len || es == 0)
        return bad("data", T_SHAPE);
    fill_t f = {dt, keep(inf, count * es), 0, count};
    if (f.out == NULL)
        return no_memory(count * es, name, name_len);
    nr_status_t *st = fill(&f, d);
    if (st == NULL && f.n != count)
        st = bad("data", T_SHAPE);
    if (st != NULL)
        return st;
    *data = f.out;
    *size = count * es;
    return NULL;
}

/* ---- inputs / outputs --------------------------------------------------- */

typedef struct {
    const char *bin; /* binary chunks after the JSON header */
    size_t bin_len, off;
    size_t json_len;
} chunks_t;

static nr_status_t *content_check(const nr_jv_t *in, const nr_jv_t **bds, const nr_jv_t **shm)
{
    const nr_jv_t *params = member(in, "parameters");
    bool has_data = member(in, "data") != NULL;
    *bds = member(params, "binary_data_size");
    *shm = member(params, "shared_memory_region");
    int set = (int)has_data + (*bds != NULL) + (*shm != NULL);
    if (set == 1)
        return NULL;
    return nr_status_new(NR_INVALID_ARG,
                         "Input must set only one of the following fields: 'data', "
                         "'binary_data_size' in 'parameters', 'shared_memory_region' in "
                         "'parameters'. But%s%s%s%s",
                         set == 0 ? " no field is set" : " set", has_data ? " 'data'" : "",
                         *bds ? " 'binary_data_size'" : "", *shm ? " 'shared_memory_region'" : "");
}

/* The shared_memory_* parameters of an input or output: the region's name, and
 * a byte size and offset that default to 0 (Triton does not require them). */
static nr_status_t *shm_params(const nr_jv_t *params, const nr_jv_t *region, uint64_t *byte_size,
                               uint64_t *offset)
{
    if (region->type != NR_JV_STRING)
        return bad("shared_memory_region", NR_TJ_STRING);
    const nr_jv_t *bs = member(params, "shared_memory_byte_size");
    const nr_jv_t *off = member(params, "shared_memory_offset");
    if (bs != NULL && !nr_jv_is_uint(bs))
        return bad("shared_memory_byte_size", NR_TJ_UINT);
    if (off != NULL && !nr_jv_is_uint(off))
        return bad("shared_memory_offset", NR_TJ_UINT);
    *byte_size = bs != NULL ? (uint64_t)bs->u.i : 0;
    *offset = off != NULL ? (uint64_t)off->u.i : 0;
    return NULL;
}

static nr_status_t *shm_input(nr_http_infer_t *inf, const nr_jv_t *in, const nr_jv_t *region,
                              const void **data, size_t *size)
{
    uint64_t byte_size, offset;
    nr_status_t *st = shm_params(member(in, "parameters"), region, &byte_size, &offset);
    if (st != NULL)
        return st;
    return nr_infer_shm_input(&inf->base, region->u.str, region->n, offset, byte_size, data,
                              size);
}

static nr_status_t *parse_input(nr_http_infer_t *inf, const nr_jv_t *in, chunks_t *ck)
{
    const nr_jv_t *bds, *shm;
    nr_status_t *st = content_check(in, &bds, &shm);
    if (st != NULL)
        return st;
    const char *name, *dts;
    size_t name_len, dts_len;
    if ((st = get_str(in, "name", &name, &name_len)) != NULL)
        return st;
    if ((st = get_str(in, "datatype", &dts, &dts_len)) != NULL)
        return st;
    nr_dtype_t dt = nr_dtype_from_kserve(dts, dts_len);
    if (dt == NR_TYPE_INVALID)
        return nr_status_new(NR_INVALID_ARG, "invalid datatype for input %.*s", (int)name_len,
                             name);
    const nr_jv_t *shape = member(in, "shape");
    if (shape == NULL)
        return missing("shape");
    if (shape->type != NR_JV_ARRAY)
        return bad("shape", NR_TJ_ARRAY);
    size_t ndim = shape->n;
    int64_t dims[NR_MAX_DIMS];
    for (size_t i = 0; i < ndim; i++) {
        const nr_jv_t *d = &shape->u.items[i];
        if (!nr_jv_is_uint(d))
            return bad("shape", NR_TJ_UINT);
        if (i >= NR_MAX_DIMS)
            return nr_status_new(NR_INVALID_ARG,
                                 "Unable to parse 'shape': input '%.*s' has %zu dimensions, more "
                                 "than the supported %d",
                                 (int)name_len, name, ndim, NR_MAX_DIMS);
        if (d->type == NR_JV_UINT) /* > INT64_MAX: no tensor can have it */
            return nr_status_new(NR_INVALID_ARG,
                                 "Unable to parse 'shape': dimension %llu of input '%.*s' is too "
                                 "large",
                                 (unsigned long long)(uint64_t)d->u.i, (int)name_len, name);
        dims[i] = d->u.i;
    }
    const void *data = empty_data;
    size_t size = 0;
    if (bds != NULL) {
        if (!nr_jv_is_uint(bds))
            return bad("binary_data_size", NR_TJ_UINT);
        uint64_t want = (uint64_t)bds->u.i;
        size_t avail = ck->bin_len - ck->off;
        if (want > avail) {
            ck->off = ck->bin_len;
            return nr_status_new(NR_INVALID_ARG,
                                 "unexpected size for input '%.*s', expecting %llu additional "
                                 "bytes for model '%s'",
                                 (int)name_len, name, (unsigned long long)(want - avail),
                                 inf->base.model->name);
        }
        if (want > 0)
            data = ck->bin + ck->off;
        size = (size_t)want;
        ck->off += size;
    } else if (shm != NULL) {
        if ((st = shm_input(inf, in, shm, &data, &size)) != NULL)
            return st;
    } else {
        st = json_data(inf, in, name, name_len, dt, dims, ndim, ck->json_len, &data, &size);
        if (st != NULL)
            return st;
    }
    return nr_req_add_input(inf->base.req, name, name_len, dt, dims, ndim, data, size);
}

static nr_status_t *parse_output(nr_http_infer_t *inf, const nr_jv_t *o)
{
    const nr_jv_t *params = member(o, "parameters");
    const nr_jv_t *cls = member(params, "classification");
    const nr_jv_t *shm = member(params, "shared_memory_region");
    if (cls != NULL && shm != NULL)
        return nr_status_new(NR_INVALID_ARG,
                             "Output can't set both 'shared_memory_region' and 'classification'");
    const char *name;
    size_t len;
    int idx;
    nr_status_t *st = get_str(o, "name", &name, &len);
    if (st == NULL)
        st = nr_infer_output(&inf->base, name, len, &idx);
    if (st != NULL)
        return st;
    if (cls != NULL) {
        if (!nr_jv_is_uint(cls))
            return nr_status_new(NR_INVALID_ARG, "Unable to set 'classification': " NR_TJ_UINT);
        nr_infer_output_classify(&inf->base, idx, (uint64_t)cls->u.i);
    }
    const nr_jv_t *bin = member(params, "binary_data");
    if (bin != NULL && !nr_jv_is_bool(bin))
        return bad("binary_data", NR_TJ_BOOL);
    bool b = bin != NULL && bin->type == NR_JV_TRUE;
    if (shm != NULL && b)
        return nr_status_new(NR_INVALID_ARG,
                             "Output can't set both 'shared_memory_region' and 'binary_data'");
    if (idx >= 0)
        inf->binary[idx] = b;
    if (shm == NULL)
        return NULL;
    uint64_t byte_size, offset;
    if ((st = shm_params(params, shm, &byte_size, &offset)) != NULL)
        return st;
    return nr_infer_output_shm(&inf->base, idx, shm->u.str, shm->n, offset, byte_size);
}

static nr_status_t *parse_json(nr_http_infer_t *inf, size_t hlen)
{
    static const nr_json_opts_t spans = {"inputs", "data"}; /* converted by json_data */
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse_opts(inf->body, hlen, &spans, &inf->doc, &root);
    if (st != NULL)
        return st;
    const nr_jv_t *id = member(root, "id");
    if (id != NULL) {
        if (id->type != NR_JV_STRING)
            return bad("id", NR_TJ_STRING);
        if ((st = nr_req_set_id(inf->base.req, id->u.str, id->n)) != NULL)
            return st;
    }
    if ((st = parse_params(inf, root)) != NULL)
        return st;
    const nr_jv_t *inputs = member(root, "inputs");
    if (inputs == NULL)
        return missing("inputs");
    if (inputs->type != NR_JV_ARRAY)
        return bad("inputs", NR_TJ_ARRAY);
    chunks_t ck = {inf->body + hlen, inf->body_len - hlen, 0, hlen};
    for (size_t i = 0; i < inputs->n; i++)
        if ((st = parse_input(inf, &inputs->u.items[i], &ck)) != NULL)
            return st;
    if (ck.off != ck.bin_len)
        return nr_status_new(NR_INVALID_ARG, "unexpected additional input data for model '%s'",
                             inf->base.model->name);
    const nr_jv_t *outputs = member(root, "outputs");
    if (outputs == NULL)
        return NULL;
    if (outputs->type != NR_JV_ARRAY)
        return bad("outputs", NR_TJ_ARRAY);
    for (size_t i = 0; i < outputs->n; i++)
        if ((st = parse_output(inf, &outputs->u.items[i])) != NULL)
            return st;
    return NULL;
}

/* Header length 0: the whole body is the only input of a one-input model,
 * with batch 1 prepended; outputs default to binary (Triton's raw request).
 * The shape is the config's, in Triton's order of checks: at most one
 * variable-size dimension, whose size the body's length gives; a BYTES input
 * must have exactly one element (the body, behind its 4-byte length). */
static nr_status_t *parse_raw(nr_http_infer_t *inf)
{
    const nr_model_config_t *cfg = inf->base.model->cfg;
    nr_req_t *req = inf->base.req;
    inf->raw = true;
    inf->default_binary = true;
    if (cfg->n_input != 1)
        return nr_req_error(req, NR_INVALID_ARG,
                            "Raw request must only have 1 input (found 1) to be deduced but got "
                            "%zu inputs in '%s' model configuration",
                            cfg->n_input, inf->base.model->name);
    const nr_cfg_input_t *in = &cfg->input[0];
    size_t wild = SIZE_MAX; /* the variable-size dimension, if any */
    uint64_t known = 1;     /* product of the others; 0 if it overflows */
    for (size_t i = 0; i < in->dims.n; i++) {
        if (in->dims.v[i] < 0) {
            if (wild != SIZE_MAX)
                return nr_req_error(req, NR_INVALID_ARG,
                                    "The shape of the raw input '%s' can not be deduced because "
                                    "there are more than one variable-sized dimension",
                                    in->name);
            wild = i;
        } else if (nr_mul_overflow(known, (uint64_t)in->dims.v[i], &known)) {
            known = 0;
        }
    }
    if (in->data_type == NR_TYPE_STRING && (wild != SIZE_MAX || known != 1))
        return nr_req_error(req, NR_INVALID_ARG,
                            "For BYTE datatype raw input '%s', the model must have input "
                            "shape [1]",
                            in->name);
    size_t es = nr_dtype_size(in->data_type);
    size_t nd = cfg->max_batch_size > 0 ? 1 : 0;
    if ((es == 0 && in->data_type != NR_TYPE_STRING) || nd + in->dims.n > NR_MAX_DIMS)
        return nr_req_error(req, NR_INVALID_ARG, "unsupported raw input for model '%s'",
                            inf->base.model->name);
    int64_t dims[NR_MAX_DIMS];
    dims[0] = 1; /* the batch dimension, when the model has one */
    for (size_t i = 0; i < in->dims.n; i++)
        dims[nd + i] = in->dims.v[i];
    nd += in->dims.n;
    const void *data = inf->body_len ? inf->body : empty_data;
    size_t size = inf->body_len;
    if (in->data_type == NR_TYPE_STRING) {
        if (inf->body_len > UINT32_MAX)
            return nr_req_error(req, NR_INVALID_ARG, "raw BYTES input larger than 4 GiB");
        char *buf = keep(inf, inf->body_len + 4);
        if (buf == NULL)
            return no_memory(inf->body_len + 4, in->name, strlen(in->name));
        uint32_t l = (uint32_t)inf->body_len;
        memcpy(buf, &l, 4);
        if (inf->body_len)
            memcpy(buf + 4, inf->body, inf->body_len);
        data = buf;
        size = inf->body_len + 4;
    } else {
        if (wild != SIZE_MAX)
            dims[nd - in->dims.n + wild] = known ? (int64_t)(inf->body_len / es / known) : 0;
        uint64_t cnt, expect;
        bool sized = nr_shape_count(dims, nd, &cnt) && !nr_mul_overflow(cnt, es, &expect);
        if (!sized || expect != inf->body_len)
            return nr_req_error(req, NR_INVALID_ARG,
                                "input byte size mismatch for input 'raw_input' for model '%s'. "
                                "Expected %llu, got %zu",
                                inf->base.model->name, (unsigned long long)(sized ? expect : 0),
                                inf->body_len);
    }
    return nr_req_add_input(req, in->name, strlen(in->name), in->data_type, dims, nd, data, size);
}

nr_status_t *nr_http_infer_parse(nr_http_infer_t *inf, nr_server_t *core, nr_model_t *model,
                                 char *body, size_t body_len, const char *ihcl)
{
    size_t n_out = model->cfg->n_output;
    nr_infer_init(&inf->base, core, model, inf);
    inf->body = body;
    inf->body_len = body_len;
    inf->binary = nr_calloc(n_out ? n_out : 1, sizeof(bool));
    size_t hlen = body_len;
    if (ihcl != NULL) {
        /* atoi semantics as Triton: garbage reads as 0 (a raw request) */
        char *end;
        errno = 0;
        long long v = strtoll(ihcl, &end, 10);
        if (end == ihcl)
            v = 0;
        if (errno == ERANGE || v < 0 || (unsigned long long)v > body_len)
            return nr_status_new(NR_INVALID_ARG,
                                 "inference header size should be in range (0, %zu), got: %s",
                                 body_len, ihcl);
        hlen = (size_t)v;
    }
    if (hlen == 0)
        return parse_raw(inf);
    return parse_json(inf, hlen);
}

void nr_http_infer_free(nr_http_infer_t *inf)
{
    if (inf == NULL)
        return;
    nr_infer_trace_send(&inf->base, true); /* (a reply sent from views: it has gone now) */
    nr_infer_release(&inf->base);
    nr_json_free(inf->doc);
    free(inf->body_mem ? inf->body_mem : inf->body);
    free(inf->binary);
    nr_buf_free(&inf->header);
    nr_buf_free(&inf->gen);
    nr_status_free(inf->gen_failed);
    if (inf->sync_init) {
        pthread_mutex_destroy(&inf->mu);
        pthread_cond_destroy(&inf->cv);
    }
    free(inf);
}

/* A request runs on its HTTP worker itself (no hand-off to the instance
 * thread) only if its model's mean execution is shorter than this: a worker
 * serves its share of every connection, so a model that computes for
 * milliseconds must not hold it (for a 15 ms CNN the hand-off is 0.2%). */
#define NR_HTTP_INLINE_MAX_NS (1000u * 1000u)

/* ---- submit, then answer when done ---------------------------------------- */

static void on_done(nr_req_t *req, void *arg)
{
    nr_http_infer_t *inf = arg;
    (void)req;
    if (inf->async != NULL) {
        inf->async->wake(inf->async);
        return;
    }
    pthread_mutex_lock(&inf->mu);
    inf->finished = true;
    pthread_cond_signal(&inf->cv);
    pthread_mutex_unlock(&inf->mu);
}

static void free_cb(void *arg)
{
    nr_http_infer_free(arg);
}

/* The request is done: its reply, compressed as the client accepts. Takes inf. */
static void encode(void *arg, nr_http_resp_t *r)
{
    nr_http_infer_t *inf = arg;
    if (inf->generate) { /* a body of its own: nothing points into the request */
        nr_status_t *gst = nr_http_generate_encode(inf, r);
        nr_http_infer_free(inf);
        if (gst != NULL)
            nr_http_error(r, gst);
        return;
    }
    nr_infer_trace_send(&inf->base, false);
    nr_status_t *st = nr_http_infer_encode(inf, r);
    if (st != NULL) {
        nr_http_infer_free(inf);
        nr_http_error(r, st);
        return;
    }
    r->free_fn = free_cb;
    r->free_arg = inf;
    nr_http_enc_t out_enc = nr_http_response_encoding(inf->accept_encoding);
    if (out_enc == NR_ENC_IDENTITY)
        return;
    nr_buf_t z;
    nr_buf_init(&z);
    st = nr_http_deflate(out_enc, r->iov, r->n_iov, &z);
    if (st != NULL) {
        /* send it uncompressed rather than fail the inference */
        NR_LOG_VERBOSE(1, "response compression failed: %s", nr_status_msg(st));
        nr_status_free(st);
        nr_buf_free(&z);
        return;
    }
    free(r->iov);
    r->iov = NULL;
    r->n_iov = 0;
    r->free_fn = NULL;
    r->free_arg = NULL;
    nr_http_infer_free(inf);
    nr_buf_free(&r->body);
    r->body = z;
    r->content_encoding = out_enc == NR_ENC_GZIP ? "gzip" : "deflate";
}

/* On the worker, once the request is done: a large reply is encoded on the
 * bulk pool (the connection parks again), a small one here. */
static void finish(void *arg, nr_http_resp_t *r)
{
    nr_http_infer_t *inf = arg;
    if (r->may_defer && !inf->generate) {
        size_t json, binary;
        nr_http_infer_reply_size(inf, &json, &binary);
        size_t deflate = nr_http_response_encoding(inf->accept_encoding) == NR_ENC_IDENTITY
                             ? 0 : json + binary;
        if (nr_http_bulk_reply(inf->srv, inf->async, json, deflate, encode, inf, r))
            return;
    }
    encode(inf, r);
}

static void run(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r, nr_model_t *m,
                char *body, char *mem, size_t len, bool generate);

void nr_http_generate(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_model_t *m = NULL;
    char *body = NULL;
    size_t len = 0;
    nr_status_t *st = nr_kserve_model(s->core, q->model, q->model_len, q->version, &m);
    if (st == NULL)
        st = nr_http_generate_translate(m, q->body, q->body_len, &body, &len);
    if (st != NULL) {
        if (m != NULL)
            nr_model_release(m);
        nr_http_error(r, st);
        return;
    }
    run(s, q, r, m, body, NULL, len, true);
}

void nr_http_infer(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    if (nr_http_bulk_post(s, q, r))
        return; /* a pool thread runs it and wakes the connection */
    nr_model_t *m = NULL;
    nr_status_t *st = nr_kserve_model(s->core, q->model, q->model_len, q->version, &m);
    if (st == NULL && m->cfg->decoupled) { /* 501, as Triton */
        nr_model_release(m);
        st = nr_status_new(NR_UNSUPPORTED, "HTTP end point doesn't support models with "
                           "decoupled transaction policy");
    }
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    nr_http_enc_t enc = nr_http_request_encoding(q->content_encoding);
    if (enc == NR_ENC_UNKNOWN) {
        nr_model_release(m);
        nr_http_error_msg(r, 501, "Unsupported compression type");
        r->accept_encoding_hint = true;
        return;
    }
    char *body, *mem = NULL;
    size_t len;
    if (enc == NR_ENC_IDENTITY) {
        mem = q->body_owned; /* holds q->body, aligned by nr_http_body_lead */
        body = (char *)q->body;
        len = q->body_len;
        q->body_owned = NULL;
        if (mem == NULL) {
            body = nr_malloc(len ? len : 1);
            if (len)
                memcpy(body, q->body, len);
        }
    } else {
        size_t lead = nr_http_body_lead(q->infer_header_len);
        st = nr_http_inflate(q->body, q->body_len, s->opts.max_input_size, lead, &mem, &len);
        if (st != NULL) {
            nr_model_release(m);
            nr_http_error(r, st);
            return;
        }
        body = mem + lead;
    }
    run(s, q, r, m, body, mem, len, false);
}

/* Parses, submits and answers (now, or once woken) the request in body (owned: mem when not
 * NULL, else body itself), in KServe's JSON or, for generate, translated to it. */
static void forward_header(void *arg, const char *name, const char *value)
{
    nr_http_infer_t *inf = arg;
    nr_infer_header(&inf->base, inf->srv->fwd, name, strlen(name), value, strlen(value));
}

static void run(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r, nr_model_t *m,
                char *body, char *mem, size_t len, bool generate)
{
    nr_http_infer_t *inf = nr_calloc(1, sizeof(*inf));
    inf->generate = generate;
    inf->body_mem = mem;
    inf->accept_encoding = q->accept_encoding;
    inf->async = q->async;
    inf->srv = s;
    nr_status_t *st = nr_http_infer_parse(inf, s->core, m, body, len,
                                          generate ? NULL : q->infer_header_len);
    if (st == NULL && s->fwd != NULL && q->headers != NULL && q->headers->each != NULL)
        q->headers->each(q->headers->ctx, forward_header, inf);
    inf->base.proto = NR_TRACE_HTTP;
    inf->base.t_recv_ns[0] = q->recv_ns[0];
    inf->base.t_recv_ns[1] = q->recv_ns[1];
    if (st == NULL && nr_trace_armed() && q->headers != NULL && q->headers->lookup != NULL) {
        const char *tp = q->headers->lookup(q->headers->ctx, "traceparent");
        if (tp != NULL)
            nr_infer_traceparent(&inf->base, tp, strlen(tp));
    }
    if (st == NULL && generate && q->generate_stream) { /* answered now, sent as it comes */
        nr_http_stream_t *sse = inf->sse = nr_http_stream_new(&s->parked);
        inf->base.req->on_response = nr_http_generate_sse_response;
        inf->base.req->cancelled = nr_http_stream_gone(sse); /* the client left */
        st = nr_infer_submit(&inf->base, nr_http_generate_sse_done, inf);
        if (st == NULL) { /* inf is the request's now (it may be gone already) */
            r->status = 200;
            r->content_type = "text/event-stream; charset=utf-8";
            r->stream = sse;
            return;
        }
        nr_http_stream_drop(sse);
        nr_http_stream_end(sse);
        inf->sse = NULL;
        nr_http_infer_free(inf);
        nr_http_error(r, st);
        return;
    }
    if (st == NULL && generate && m->cfg->decoupled) /* its one response is kept as it comes */
        inf->base.req->on_response = nr_http_generate_response;
    if (st == NULL && inf->async != NULL)
        inf->base.req->inline_max_ns = NR_HTTP_INLINE_MAX_NS;
    if (st == NULL && inf->async == NULL) {
        pthread_mutex_init(&inf->mu, NULL);
        pthread_cond_init(&inf->cv, NULL);
        inf->sync_init = true;
    }
    if (st == NULL) {
        if (inf->async != NULL) { /* done() may run before this returns */
            r->finish = finish;
            r->finish_arg = inf;
        }
        st = nr_infer_submit(&inf->base, on_done, inf);
    }
    if (st != NULL) {
        r->finish = NULL;
        r->finish_arg = NULL;
        nr_http_infer_free(inf);
        nr_http_error(r, st);
        return;
    }
    if (inf->async != NULL)
        return;
    pthread_mutex_lock(&inf->mu);
    while (!inf->finished)
        pthread_cond_wait(&inf->cv, &inf->mu);
    pthread_mutex_unlock(&inf->mu);
    finish(inf, r);
}
