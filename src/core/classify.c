/* classify.c - Triton's classification extension (classify.h): an output
 * requested with a classification count k is answered as BYTES [batch, k]
 * (just [k] without batching) holding the top-k elements of each batch item
 * as "<value>:<index>[:<label>]". Values print like C++ std::to_string
 * ("%f" for floats, plain integers otherwise); ties keep the lower index; k
 * is clipped to the element count. NaN ranks below every number (-inf
 * included), NaNs among themselves by index: the order is a strict weak one,
 * so the top-k is sorted and reproducible. (Triton sorts with `a > b`, which
 * NaN breaks: std::sort's result is then unspecified.) Labels come from the
 * output's label_filename in the model directory, read when the model version
 * loads (so they load and unload with it).
 */
#include "classify.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/limits.h"
#include "../common/log.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- labels --------------------------------------------------------------- */

static void load_one(nr_label_set_t *s, const nr_model_config_t *cfg, const char *dir,
                     uint32_t o)
{
    const char *fn = cfg->output[o].label_filename;
    char *path = nr_asprintf("%s/%s", dir, fn);
    nr_buf_t b;
    nr_buf_init(&b);
    int e = nr_buf_read_file(&b, path, NR_MAX_CONFIG_BYTES * 4); /* a longer file: cut there */
    if (e != 0 && e != EFBIG) {
        NR_LOG_WARN("unable to read labels '%s' of model '%s'", path, cfg->name);
        nr_buf_free(&b);
        free(path);
        return;
    }
    free(path);
    size_t len = 0;
    char *text = nr_buf_steal(&b, &len);
    s->v = nr_realloc(s->v, (s->n + 1) * sizeof(*s->v));
    nr_labels_t *l = &s->v[s->n++];
    l->output = o;
    l->text = text;
    l->lines = NULL;
    l->n_lines = 0;
    /* one label per line, as std::getline splits (no empty last line) */
    size_t start = 0;
    for (size_t i = 0; i <= len; i++) {
        if (i < len && text[i] != '\n')
            continue;
        if (i == len && start == len)
            break;
        text[i] = '\0';
        l->lines = nr_realloc(l->lines, (l->n_lines + 1) * sizeof(char *));
        l->lines[l->n_lines++] = text + start;
        start = i + 1;
    }
}

void nr_labels_load(nr_label_set_t *s, const nr_model_config_t *cfg, const char *dir)
{
    for (size_t o = 0; o < cfg->n_output; o++) {
        const char *fn = cfg->output[o].label_filename;
        if (fn != NULL && fn[0] != '\0')
            load_one(s, cfg, dir, (uint32_t)o);
    }
}

void nr_labels_adopt(nr_label_set_t *s, uint32_t output, const nr_labels_t *src)
{
    size_t len = 0;
    for (size_t i = 0; i < src->n_lines; i++)
        len += strlen(src->lines[i]) + 1;
    s->v = nr_realloc(s->v, (s->n + 1) * sizeof(*s->v));
    nr_labels_t *l = &s->v[s->n++];
    l->output = output;
    l->text = nr_malloc(len + 1);
    l->lines = nr_calloc(src->n_lines + 1, sizeof(char *));
    l->n_lines = src->n_lines;
    char *at = l->text;
    for (size_t i = 0; i < src->n_lines; i++) {
        size_t n = strlen(src->lines[i]) + 1;
        memcpy(at, src->lines[i], n);
        l->lines[i] = at;
        at += n;
    }
}

void nr_labels_free(nr_label_set_t *s)
{
    for (size_t i = 0; i < s->n; i++) {
        free(s->v[i].text);
        free(s->v[i].lines);
    }
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

const nr_labels_t *nr_labels_find(const nr_label_set_t *s, uint32_t output)
{
    if (s == NULL)
        return NULL;
    for (size_t i = 0; i < s->n; i++)
        if (s->v[i].output == output)
            return &s->v[i];
    return NULL;
}

/* ---- top-k ---------------------------------------------------------------- */

typedef struct {
    nr_dtype_t dt;
    const char *base; /* first element of the batch item */
    size_t es;
} cmp_ctx_t;

/* A total preorder on doubles: NaN (any sign, any payload) below every
 * number, all NaNs equal. */
static int float_cmp(double x, double y)
{
    bool nx = isnan(x), ny = isnan(y);
    if (nx || ny)
        return nx == ny ? 0 : nx ? -1 : 1;
    return x > y ? 1 : x < y ? -1 : 0;
}

static int elem_cmp(const cmp_ctx_t *c, size_t a, size_t b)
{
    const char *pa = c->base + a * c->es, *pb = c->base + b * c->es;
    switch (c->dt) {
    case NR_TYPE_FP32: {
        float x, y;
        memcpy(&x, pa, 4);
        memcpy(&y, pb, 4);
        return float_cmp(x, y);
    }
    case NR_TYPE_FP64: {
        double x, y;
        memcpy(&x, pa, 8);
        memcpy(&y, pb, 8);
        return float_cmp(x, y);
    }
    case NR_TYPE_UINT8: case NR_TYPE_UINT16: case NR_TYPE_UINT32: case NR_TYPE_UINT64: {
        uint64_t x = 0, y = 0;
        memcpy(&x, pa, c->es); /* little-endian host */
        memcpy(&y, pb, c->es);
        return x > y ? 1 : x < y ? -1 : 0;
    }
    default: {
        int64_t x = 0, y = 0;
        if (c->es == 1) { int8_t v; memcpy(&v, pa, 1); x = v; memcpy(&v, pb, 1); y = v; }
        else if (c->es == 2) { int16_t v; memcpy(&v, pa, 2); x = v; memcpy(&v, pb, 2); y = v; }
        else if (c->es == 4) { int32_t v; memcpy(&v, pa, 4); x = v; memcpy(&v, pb, 4); y = v; }
        else { memcpy(&x, pa, 8); memcpy(&y, pb, 8); }
        return x > y ? 1 : x < y ? -1 : 0;
    }
    }
}

/* Descending by value (NaN last), ascending index on ties. */
static int idx_cmp(const void *a, const void *b, void *arg)
{
    size_t ia = *(const size_t *)a, ib = *(const size_t *)b;
    int c = elem_cmp(arg, ia, ib);
    if (c != 0)
        return -c;
    return ia < ib ? -1 : ia > ib;
}

static void put_value(nr_buf_t *b, nr_dtype_t dt, const char *p)
{
    switch (dt) {
    case NR_TYPE_FP32: { float v; memcpy(&v, p, 4); nr_buf_printf(b, "%f", (double)v); break; }
    case NR_TYPE_FP64: { double v; memcpy(&v, p, 8); nr_buf_printf(b, "%f", v); break; }
    case NR_TYPE_UINT8: nr_buf_u64(b, *(const uint8_t *)p); break;
    case NR_TYPE_INT8: nr_buf_i64(b, *(const int8_t *)p); break;
    case NR_TYPE_UINT16: { uint16_t v; memcpy(&v, p, 2); nr_buf_u64(b, v); break; }
    case NR_TYPE_INT16: { int16_t v; memcpy(&v, p, 2); nr_buf_i64(b, v); break; }
    case NR_TYPE_UINT32: { uint32_t v; memcpy(&v, p, 4); nr_buf_u64(b, v); break; }
    case NR_TYPE_INT32: { int32_t v; memcpy(&v, p, 4); nr_buf_i64(b, v); break; }
    case NR_TYPE_UINT64: { uint64_t v; memcpy(&v, p, 8); nr_buf_u64(b, v); break; }
    default: { int64_t v; memcpy(&v, p, 8); nr_buf_i64(b, v); break; }
    }
}

nr_status_t *nr_classify(const nr_tensor_t *t, bool batching, uint64_t k,
                         const nr_labels_t *labels, nr_tensor_t *out, char **buf)
{
    *buf = NULL;
    nr_dtype_t dt = t->dtype;
    size_t es = nr_dtype_size(dt);
    if (dt == NR_TYPE_BOOL || dt == NR_TYPE_FP16 || dt == NR_TYPE_BF16 || es == 0)
        return nr_status_new(NR_INVALID_ARG,
                             "class result not available for output due to unsupported type '%s'",
                             nr_dtype_kserve_name(dt) ? nr_dtype_kserve_name(dt) : "INVALID");
    uint64_t count;
    if (!nr_shape_count(t->dims, t->ndim, &count) || count > t->size / es)
        return nr_status_new(NR_INTERNAL, "classification: output has fewer bytes than its shape");
    uint64_t batch = batching && t->ndim > 0 ? (uint64_t)t->dims[0] : 1;
    uint64_t per = batch ? count / batch : 0;
    uint64_t kk = k < per ? k : per;
    size_t *idx = nr_malloc((per ? per : 1) * sizeof(size_t));
    nr_buf_t b;
    nr_buf_init(&b);
    for (uint64_t bi = 0; per > 0 && bi < batch; bi++) { /* empty outputs may have no data */
        cmp_ctx_t c = {dt, (const char *)t->data + bi * per * es, es};
        for (uint64_t i = 0; i < per; i++)
            idx[i] = i;
        qsort_r(idx, per, sizeof(size_t), idx_cmp, &c);
        for (uint64_t j = 0; j < kk; j++) {
            size_t at = b.len;
            uint32_t len = 0;
            nr_buf_append(&b, &len, 4);
            put_value(&b, dt, c.base + idx[j] * es);
            nr_buf_printf(&b, ":%zu", idx[j]);
            if (labels != NULL && idx[j] < labels->n_lines) {
                nr_buf_putc(&b, ':');
                nr_buf_puts(&b, labels->lines[idx[j]]);
            }
            len = (uint32_t)(b.len - at - 4);
            memcpy(b.data + at, &len, 4);
        }
    }
    free(idx);
    memset(out, 0, sizeof(*out));
    out->name = t->name;
    out->dtype = NR_TYPE_STRING;
    if (batching) {
        out->ndim = 2;
        out->dims[0] = (int64_t)batch;
        out->dims[1] = (int64_t)kk;
    } else {
        out->ndim = 1;
        out->dims[0] = (int64_t)kk;
    }
    out->data = b.data;
    out->size = b.len;
    *buf = nr_buf_steal(&b, NULL);
    out->data = *buf;
    return NULL;
}
