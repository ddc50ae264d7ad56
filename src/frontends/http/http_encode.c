/* http_encode.c - POST .../infer, response side: a finished nr_req_t becomes
 * Triton's response, a compact JSON header
 *   {"id"?,"model_name","model_version","outputs":[{"name","datatype","shape",
 *    "data":[...] | "parameters":{"binary_data_size":N}}]}
 * followed by the binary outputs in the same order. The outputs, their order
 * (sorted by name), classification and shared-memory writes come from the
 * core (nr_infer_outputs); an output the request placed in a shared-memory
 * region has neither "data" nor "parameters" (as Triton answers it).
 *
 * Binary outputs are not copied: the response is an iovec over the backend's
 * output buffers, which stay alive (their holds) until the response is freed.
 * Numbers are printed as Triton/rapidjson prints them (nr_buf_double;
 * FP32 is widened to double first). No locks.
 */
#include "http_int.h"

#include "../../common/alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* The JSON text of an output is sized by the request: its buffer grows with
 * nr_buf_try_reserve, and memory that cannot be had is 503, not an abort. */
static nr_status_t *no_memory(const char *name)
{
    return nr_status_new(NR_UNAVAILABLE, "unable to allocate memory for output '%s'", name);
}

static nr_status_t *put_bytes_json(nr_buf_t *b, const nr_tensor_t *t, const char *name)
{
    const char *p = t->data;
    size_t off = 0;
    bool first = true;
    while (off < t->size) {
        uint32_t len;
        if (t->size - off < 4)
            return nr_status_new(NR_INTERNAL, "malformed BYTES data in output '%s'", name);
        memcpy(&len, p + off, 4);
        off += 4;
        if (t->size - off < len)
            return nr_status_new(NR_INTERNAL, "malformed BYTES data in output '%s'", name);
        if (!nr_buf_try_reserve(b, 6 * (size_t)len + 8))
            return no_memory(name); /* \u00XX: 6 bytes a byte at most */
        if (!first)
            nr_buf_putc(b, ',');
        nr_buf_json_str(b, p + off, len);
        off += len;
        first = false;
    }
    return NULL;
}

nr_status_t *nr_http_put_data(nr_buf_t *b, const nr_tensor_t *t, const char *name)
{
    nr_dtype_t dt = t->dtype;
    if (dt == NR_TYPE_FP16 || dt == NR_TYPE_BF16)
        return nr_status_new(NR_INVALID_ARG,
                             "sending %s data via JSON is not supported. Please use the binary "
                             "data format for output",
                             nr_dtype_kserve_name(dt));
    nr_buf_putc(b, '[');
    if (dt == NR_TYPE_STRING) {
        nr_status_t *st = put_bytes_json(b, t, name);
        if (st != NULL)
            return st;
        nr_buf_putc(b, ']');
        return NULL;
    }
    uint64_t count;
    size_t es = nr_dtype_size(dt);
    if (es == 0 || !nr_shape_count(t->dims, t->ndim, &count) || count > t->size / es)
        return nr_status_new(NR_INTERNAL, "output '%s' has %zu bytes, less than its shape needs",
                             name, t->size);
    const char *p = t->data;
    if (dt == NR_TYPE_FP32 || dt == NR_TYPE_FP64) { /* written in place, room made once */
        if (count > (SIZE_MAX / 2 - b->len) / (NR_DTOA_MAX + 1) ||
            !nr_buf_try_reserve(b, count * (NR_DTOA_MAX + 1) + 2))
            return no_memory(name);
        char *o = b->data + b->len;
        for (uint64_t i = 0; i < count; i++) {
            if (i)
                *o++ = ',';
            double v;
            if (dt == NR_TYPE_FP32) {
                float f;
                memcpy(&f, p + i * es, sizeof(f));
                v = f;
            } else {
                memcpy(&v, p + i * es, sizeof(v));
            }
            o = nr_dtoa(o, v);
        }
        b->len = (size_t)(o - b->data);
        nr_buf_putc(b, ']');
        return NULL;
    }
    if (!nr_buf_try_reserve(b, count * 4))
        return no_memory(name);
    for (uint64_t i = 0; i < count; i++) {
        if (b->cap - b->len < 32 && !nr_buf_try_reserve(b, b->len)) /* an element is < 30 */
            return no_memory(name);
        if (i)
            nr_buf_putc(b, ',');
        if (!nr_dtype_json_elem(b, dt, p + i * es))
            return nr_status_new(NR_INTERNAL, "output '%s' has an unsupported datatype", name);
    }
    nr_buf_putc(b, ']');
    return NULL;
}

void nr_http_infer_reply_size(const nr_http_infer_t *inf, size_t *json_bytes,
                              size_t *binary_bytes)
{
    *json_bytes = *binary_bytes = 0;
    const nr_req_t *req = inf->base.req;
    if (req->status != NULL || req->outputs == NULL)
        return; /* an error message */
    for (size_t i = 0; i < req->n_want; i++) {
        uint32_t c = req->want[i];
        size_t size = req->outputs[i].size;
        if ((inf->base.shm_out != NULL && inf->base.shm_out[c].region != NULL) ||
            inf->base.class_n[c] > 0)
            continue; /* not in the reply, or a few labels */
        if (inf->base.listed[c] ? inf->binary[c] : inf->default_binary)
            *binary_bytes += size;
        else /* text: "-1.2345678," is 11 characters for 4 bytes; an INT8 up to 5 a byte */
            *json_bytes += size > SIZE_MAX / 4 ? SIZE_MAX / 4 : 3 * size;
    }
}

nr_status_t *nr_http_infer_encode(nr_http_infer_t *inf, nr_http_resp_t *r)
{
    const nr_infer_out_t *outs;
    size_t n;
    nr_status_t *st = nr_infer_outputs(&inf->base, &outs, &n);
    if (st != NULL)
        return st;
    const nr_req_t *req = inf->base.req;
    const nr_model_t *m = inf->base.model;
    struct iovec *iov = nr_malloc((n + 1) * sizeof(struct iovec));
    size_t n_iov = 1;
    bool any_binary = false;
    nr_buf_t *h = &inf->header;
    nr_buf_reset(h);
    nr_buf_putc(h, '{');
    if (req->id != NULL && req->id[0] != '\0') {
        if (!nr_buf_try_reserve(h, 6 * strlen(req->id) + 16)) { /* the id, escaped */
            free(iov);
            return nr_status_new(NR_UNAVAILABLE, "unable to allocate memory for the reply");
        }
        nr_buf_puts(h, "\"id\":");
        nr_buf_json_str(h, req->id, strlen(req->id));
        nr_buf_putc(h, ',');
    }
    nr_buf_puts(h, "\"model_name\":");
    nr_buf_json_str(h, m->name, strlen(m->name));
    nr_buf_puts(h, ",\"model_version\":");
    nr_buf_json_str(h, m->version_str, strlen(m->version_str));
    nr_buf_puts(h, ",\"outputs\":[");
    for (size_t k = 0; k < n && st == NULL; k++) {
        const nr_infer_out_t *o = &outs[k];
        const nr_tensor_t *t = o->t;
        bool binary = inf->base.listed[o->index] ? inf->binary[o->index] : inf->default_binary;
        if (k)
            nr_buf_putc(h, ',');
        nr_buf_puts(h, "{\"name\":");
        nr_buf_json_str(h, o->name, strlen(o->name));
        nr_buf_puts(h, ",\"datatype\":\"");
        const char *dts = nr_dtype_kserve_name(t->dtype);
        nr_buf_puts(h, dts ? dts : "");
        nr_buf_puts(h, "\",\"shape\":[");
        for (size_t d = 0; d < t->ndim && d < NR_MAX_DIMS; d++) {
            if (d)
                nr_buf_putc(h, ',');
            nr_buf_i64(h, t->dims[d]);
        }
        nr_buf_putc(h, ']');
        if (o->in_shm) { /* written there; the reply only names it */
            nr_buf_putc(h, '}');
        } else if (binary) {
            nr_buf_puts(h, ",\"parameters\":{\"binary_data_size\":");
            nr_buf_u64(h, t->size);
            nr_buf_puts(h, "}}");
            if (t->size > 0) {
                iov[n_iov].iov_base = (void *)t->data;
                iov[n_iov].iov_len = t->size;
                n_iov++;
                any_binary = true;
            }
        } else {
            nr_buf_puts(h, ",\"data\":");
            st = nr_http_put_data(h, t, o->name);
            nr_buf_putc(h, '}');
        }
    }
    if (st != NULL) {
        free(iov);
        return st;
    }
    nr_buf_puts(h, "]}");
    iov[0].iov_base = h->data;
    iov[0].iov_len = h->len;
    r->status = 200;
    r->iov = iov;
    r->n_iov = n_iov;
    if (any_binary) {
        r->content_type = "application/octet-stream";
        r->has_infer_header_len = true;
        r->infer_header_len = h->len;
    } else {
        r->content_type = "application/json";
    }
    return NULL;
}
