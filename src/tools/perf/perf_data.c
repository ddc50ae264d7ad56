/* perf_data.c - --input-data <file.json> or <directory>: perf_analyzer's real data (perf.h).
 *
 * A directory holds one file per input, named as the input: its raw little-endian bytes for
 * one batch-1 request, or for BYTES one string per line; it makes one request.
 *
 * {"data": [ {<input>: <value>, ...}, ... ]}: each entry is one batch-1 request; a value is a
 * flat or nested row-major array (numbers, true/false for BOOL, strings for BYTES),
 * {"b64": "..."} (the tensor's raw little-endian bytes; BYTES as 4-byte length + bytes), or
 * {"content": <array or b64 object>, "shape": [...]}, whose shape replaces --shape and the
 * model's dims for that entry. Every input of the model must be in every entry. With -b n
 * the entry's data is repeated n times as one batch. "validation_data" is not read (nereid-perf
 * does not check outputs). Values are converted to the input's datatype as written; FP16 and
 * BF16 are rounded to nearest even.
 */
#include "perf.h"

#include "../../common/alloc.h"
#include "../../common/json.h"

#include <errno.h>
#include <openssl/evp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

typedef struct {
    const char *path;
    size_t entry;
    const char *input;
} where_t;

static nr_status_t *bad(const where_t *w, const char *what)
{
    return nr_status_new(NR_INVALID_ARG, "--input-data %s: data entry %zu, input '%s': %s",
                         w->path, w->entry, w->input, what);
}

static uint16_t to_fp16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    uint32_t sign = (x >> 16) & 0x8000u, mant = x & 0x7fffffu;
    int exp = (int)((x >> 23) & 0xff);
    if (exp == 0xff) /* inf, nan */
        return (uint16_t)(sign | 0x7c00u | (mant ? 0x200u : 0));
    int e = exp - 127 + 15;
    if (e >= 0x1f)
        return (uint16_t)(sign | 0x7c00u);
    if (e <= 0) { /* subnormal or zero */
        if (e < -10)
            return (uint16_t)sign;
        mant |= 0x800000u;
        uint32_t shift = (uint32_t)(14 - e), half = mant >> shift, rest = mant & ((1u << shift) - 1);
        uint32_t mid = 1u << (shift - 1);
        if (rest > mid || (rest == mid && (half & 1)))
            half++;
        return (uint16_t)(sign | half);
    }
    uint32_t half = ((uint32_t)e << 10) | (mant >> 13), rest = mant & 0x1fffu;
    if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
        half++; /* a carry into the exponent is still right */
    return (uint16_t)(sign | half);
}

static uint16_t to_bf16(float f)
{
    uint32_t x;
    memcpy(&x, &f, 4);
    if ((x & 0x7fffffffu) > 0x7f800000u) /* nan */
        return (uint16_t)((x >> 16) | 0x40);
    x += 0x7fffu + ((x >> 16) & 1);
    return (uint16_t)(x >> 16);
}

/* One leaf value as the datatype's bytes. */
static nr_status_t *put_leaf(const where_t *w, const char *dt, const nr_jv_t *v, nr_buf_t *out)
{
    if (strcmp(dt, "BYTES") == 0) {
        if (v->type != NR_JV_STRING)
            return bad(w, "a BYTES input takes strings");
        uint32_t n = (uint32_t)v->n;
        nr_buf_append(out, &n, 4);
        nr_buf_append(out, v->u.str, v->n);
        return NULL;
    }
    bool is_bool = v->type == NR_JV_TRUE || v->type == NR_JV_FALSE;
    if (!is_bool && !nr_jv_is_number(v))
        return bad(w, "expected a number");
    double d = is_bool ? (v->type == NR_JV_TRUE) : nr_jv_number(v);
    bool integral = v->type == NR_JV_INT || v->type == NR_JV_UINT || is_bool;
    int64_t i = v->type == NR_JV_INT ? v->u.i : (int64_t)d;
    uint64_t u = v->type == NR_JV_UINT || v->type == NR_JV_INT ? (uint64_t)v->u.i : (uint64_t)d;
    union {
        uint8_t u8;
        int8_t i8;
        uint16_t u16;
        int16_t i16;
        uint32_t u32;
        int32_t i32;
        uint64_t u64;
        int64_t i64;
        float f;
        double g;
    } x;
    size_t n;
    if (strcmp(dt, "BOOL") == 0)
        x.u8 = d != 0, n = 1;
    else if (strcmp(dt, "FP32") == 0)
        x.f = (float)d, n = 4;
    else if (strcmp(dt, "FP64") == 0)
        x.g = d, n = 8;
    else if (strcmp(dt, "FP16") == 0)
        x.u16 = to_fp16((float)d), n = 2;
    else if (strcmp(dt, "BF16") == 0)
        x.u16 = to_bf16((float)d), n = 2;
    else if (!integral)
        return bad(w, "an integer input takes integers");
    else if (strcmp(dt, "INT8") == 0)
        x.i8 = (int8_t)i, n = 1;
    else if (strcmp(dt, "INT16") == 0)
        x.i16 = (int16_t)i, n = 2;
    else if (strcmp(dt, "INT32") == 0)
        x.i32 = (int32_t)i, n = 4;
    else if (strcmp(dt, "INT64") == 0)
        x.i64 = i, n = 8;
    else if (strcmp(dt, "UINT8") == 0)
        x.u8 = (uint8_t)u, n = 1;
    else if (strcmp(dt, "UINT16") == 0)
        x.u16 = (uint16_t)u, n = 2;
    else if (strcmp(dt, "UINT32") == 0)
        x.u32 = (uint32_t)u, n = 4;
    else if (strcmp(dt, "UINT64") == 0)
        x.u64 = u, n = 8;
    else
        return bad(w, "unsupported datatype");
    nr_buf_append(out, &x, n);
    return NULL;
}

/* A nested array's leaves in row-major order; *count elements. */
static nr_status_t *put_array(const where_t *w, const char *dt, const nr_jv_t *v, nr_buf_t *out,
                              size_t *count, int depth)
{
    if (v->type != NR_JV_ARRAY) {
        (*count)++;
        return put_leaf(w, dt, v, out);
    }
    if (depth > 32)
        return bad(w, "arrays nested too deep");
    for (size_t k = 0; k < v->n; k++) {
        nr_status_t *st = put_array(w, dt, &v->u.items[k], out, count, depth + 1);
        if (st)
            return st;
    }
    return NULL;
}

/* {"b64": "..."}: the decoded bytes appended. */
static nr_status_t *put_b64(const where_t *w, const nr_jv_t *s, nr_buf_t *out)
{
    if (s == NULL || s->type != NR_JV_STRING || s->n % 4 != 0)
        return bad(w, "\"b64\" must be a base64 string");
    nr_buf_reserve(out, s->n / 4 * 3 + 3);
    int n = EVP_DecodeBlock((unsigned char *)out->data + out->len, (const unsigned char *)s->u.str,
                            (int)s->n);
    if (n < 0)
        return bad(w, "\"b64\" is not valid base64");
    for (size_t k = s->n; k > 0 && s->u.str[k - 1] == '=' && n > 0; k--)
        n--; /* EVP_DecodeBlock counts the padding as bytes */
    out->len += (size_t)n;
    return NULL;
}

/* The number of BYTES elements in raw serialized bytes, or -1 when they do not parse. */
static long bytes_elements(const char *p, size_t n)
{
    long count = 0;
    for (size_t at = 0; at < n; count++) {
        uint32_t len;
        if (n - at < 4)
            return -1;
        memcpy(&len, p + at, 4);
        if (len > n - at - 4)
            return -1;
        at += 4 + len;
    }
    return count;
}

/* One entry's value for input `in` into e (its shape, offset and bytes). */
static nr_status_t *read_input(const where_t *w, const perf_opts_t *o, const perf_model_t *m,
                               size_t i, const nr_jv_t *v, perf_entry_t *e)
{
    const perf_input_t *in = &m->inputs[i];
    const nr_jv_t *content = v, *shape = NULL;
    if (v->type == NR_JV_OBJECT && nr_jv_get(v, "content")) {
        content = nr_jv_get(v, "content");
        shape = nr_jv_get(v, "shape");
        if (shape && shape->type != NR_JV_ARRAY)
            return bad(w, "\"shape\" must be an array");
    }
    size_t batched = m->max_batch_size > 0 ? 1 : 0; /* the batch dimension, -b, first */
    size_t nd = shape ? shape->n + batched : in->n_shape;
    int64_t *dims = nr_calloc(nd + 1, sizeof(int64_t));
    e->shapes[i] = dims;
    e->n_shapes[i] = nd;
    if (shape) {
        if (batched)
            dims[0] = o->batch;
        for (size_t k = 0; k < shape->n; k++) {
            const nr_jv_t *d = &shape->u.items[k];
            if (d->type != NR_JV_INT || d->u.i < 0)
                return bad(w, "\"shape\" must hold non-negative integers");
            dims[batched + k] = d->u.i;
        }
    } else {
        if (in->variable)
            return bad(w, "the model gives it a variable dimension: give its shape in the entry "
                          "({\"content\": [...], \"shape\": [...]}) or with --shape");
        memcpy(dims, in->shape, nd * sizeof(int64_t));
    }
    size_t want = 1; /* one batch-1 request's elements */
    for (size_t k = batched ? 1 : 0; k < nd; k++)
        want *= (size_t)dims[k];
    size_t at = e->data.len, got = 0;
    nr_status_t *st;
    bool raw = content->type == NR_JV_OBJECT;
    if (raw)
        st = put_b64(w, nr_jv_get(content, "b64"), &e->data);
    else if (content->type == NR_JV_ARRAY)
        st = put_array(w, in->datatype, content, &e->data, &got, 0);
    else
        st = bad(w, "expected an array, {\"b64\": ...} or {\"content\": ..., \"shape\": ...}");
    if (st)
        return st;
    size_t len = e->data.len - at;
    if (raw && in->elem_size == 0) {
        long k = bytes_elements(e->data.data + at, len);
        if (k < 0)
            return bad(w, "the b64 bytes are not serialized strings (4-byte length, bytes)");
        got = (size_t)k;
    } else if (raw) {
        if (len % (size_t)in->elem_size != 0)
            return bad(w, "the b64 bytes are not a whole number of elements");
        got = len / (size_t)in->elem_size;
    }
    if (got != want) {
        char msg[160];
        snprintf(msg, sizeof(msg), "%zu elements, where its shape needs %zu", got, want);
        return bad(w, msg);
    }
    for (int b = 1; b < o->batch; b++) { /* -b n: the same data n times */
        nr_buf_reserve(&e->data, len); /* may move the data: copy after */
        memcpy(e->data.data + e->data.len, e->data.data + at, len);
        e->data.len += len;
    }
    e->offsets[i] = at;
    e->bytes[i] = e->data.len - at;
    return NULL;
}

static perf_entry_t *new_entry(const perf_model_t *m, perf_entry_t **out, size_t *n)
{
    *out = nr_realloc(*out, (*n + 1) * sizeof(**out));
    perf_entry_t *e = &(*out)[(*n)++];
    memset(e, 0, sizeof(*e));
    nr_buf_init(&e->data);
    e->shapes = nr_calloc(m->n_inputs + 1, sizeof(*e->shapes));
    e->n_shapes = nr_calloc(m->n_inputs + 1, sizeof(*e->n_shapes));
    e->offsets = nr_calloc(m->n_inputs + 1, sizeof(*e->offsets));
    e->bytes = nr_calloc(m->n_inputs + 1, sizeof(*e->bytes));
    return e;
}

/* The directory's file for input i into e, with perf_analyzer's errors. */
static nr_status_t *read_raw(const char *dir, const perf_opts_t *o, const perf_model_t *m,
                             size_t i, perf_entry_t *e)
{
    const perf_input_t *in = &m->inputs[i];
    if (in->variable)
        return nr_status_new(NR_INVALID_ARG, "Failed to init manager inputs: input %s contains "
                             "dynamic shape, provide shapes to send along with the request",
                             in->name);
    e->n_shapes[i] = in->n_shape;
    e->shapes[i] = nr_calloc(in->n_shape + 1, sizeof(int64_t));
    memcpy(e->shapes[i], in->shape, in->n_shape * sizeof(int64_t));
    size_t want = 1; /* one batch-1 request's elements */
    for (size_t k = m->max_batch_size > 0 ? 1 : 0; k < in->n_shape; k++)
        want *= (size_t)in->shape[k];
    char *path = nr_asprintf("%s/%s", dir, in->name);
    nr_buf_t file;
    nr_buf_init(&file);
    nr_status_t *st = NULL;
    size_t at = e->data.len;
    if (nr_buf_read_file(&file, path, (size_t)1 << 31) != 0) {
        st = nr_status_new(NR_INVALID_ARG, "Failed to init manager inputs: failed to open file "
                           "'%s'", path);
    } else if (in->elem_size == 0) { /* one string a line, each as 4-byte length + bytes */
        size_t got = 0;
        for (size_t p = 0; p < file.len; got++) {
            const char *nl = memchr(file.data + p, '\n', file.len - p);
            size_t end = nl ? (size_t)(nl - file.data) : file.len;
            uint32_t len = (uint32_t)(end - p);
            nr_buf_append(&e->data, &len, 4);
            nr_buf_append(&e->data, file.data + p, len);
            p = end + 1;
        }
        if (got != want)
            st = nr_status_new(NR_INVALID_ARG, "Failed to init manager inputs: provided data for "
                               "input %s has %zu strings, expect %zu", in->name, got, want);
    } else if (file.len != want * (size_t)in->elem_size) {
        st = nr_status_new(NR_INVALID_ARG, "Failed to init manager inputs: provided data for "
                           "input %s has byte size %zu, expect %zu", in->name, file.len,
                           want * (size_t)in->elem_size);
    } else {
        nr_buf_append(&e->data, file.data, file.len);
    }
    size_t len = e->data.len - at;
    for (int b = 1; st == NULL && b < o->batch; b++) { /* -b n: the same data n times */
        nr_buf_reserve(&e->data, len);
        memcpy(e->data.data + e->data.len, e->data.data + at, len);
        e->data.len += len;
    }
    e->offsets[i] = at;
    e->bytes[i] = e->data.len - at;
    nr_buf_free(&file);
    free(path);
    return st;
}

static nr_status_t *data_dir(const char *dir, const perf_opts_t *o, const perf_model_t *m,
                             perf_entry_t **out, size_t *n)
{
    perf_entry_t *e = new_entry(m, out, n);
    nr_status_t *st = NULL;
    for (size_t i = 0; st == NULL && i < m->n_inputs; i++)
        st = read_raw(dir, o, m, i, e);
    return st;
}

nr_status_t *perf_data_json(const char *path, const perf_opts_t *o, const perf_model_t *m,
                            perf_entry_t **out, size_t *n)
{
    *out = NULL;
    *n = 0;
    struct stat sb;
    if (stat(path, &sb) == 0 && S_ISDIR(sb.st_mode))
        return data_dir(path, o, m, out, n);
    nr_buf_t text;
    nr_buf_init(&text);
    if (nr_buf_read_file(&text, path, (size_t)1 << 31) != 0) {
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "--input-data %s: cannot read it: %s",
                                        path, strerror(errno));
        nr_buf_free(&text);
        return st;
    }
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(text.data, text.len, &doc, &root);
    if (st) {
        nr_status_t *named = nr_status_new(NR_INVALID_ARG, "--input-data %s: %s", path, st->msg);
        nr_status_free(st);
        nr_buf_free(&text);
        return named;
    }
    const nr_jv_t *data = nr_jv_get(root, "data");
    if (data == NULL || data->type != NR_JV_ARRAY || data->n == 0)
        st = nr_status_new(NR_INVALID_ARG, "--input-data %s: expected {\"data\": [ {<input>: "
                           "<value>, ...}, ... ]} with at least one entry", path);
    for (size_t k = 0; st == NULL && k < data->n; k++) {
        const nr_jv_t *entry = &data->u.items[k];
        perf_entry_t *e = new_entry(m, out, n);
        where_t w = {.path = path, .entry = k, .input = ""};
        if (entry->type != NR_JV_OBJECT) {
            st = bad(&w, "the entry is not an object (sequences of steps are not supported)");
            break;
        }
        for (size_t i = 0; st == NULL && i < m->n_inputs; i++) {
            w.input = m->inputs[i].name;
            const nr_jv_t *v = nr_jv_get(entry, m->inputs[i].name);
            st = v ? read_input(&w, o, m, i, v, e) : bad(&w, "missing from the entry");
        }
    }
    nr_json_free(doc);
    nr_buf_free(&text);
    return st;
}

bool perf_data_is_dir(const perf_opts_t *o)
{
    struct stat sb;
    return perf_data_is_file(o) && stat(o->input_data, &sb) == 0 && S_ISDIR(sb.st_mode);
}

void perf_entries_free(perf_entry_t *e, size_t n, size_t n_inputs)
{
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < n_inputs; i++)
            free(e[k].shapes[i]);
        free(e[k].shapes);
        free(e[k].n_shapes);
        free(e[k].offsets);
        free(e[k].bytes);
        nr_buf_free(&e[k].data);
    }
    free(e);
}
