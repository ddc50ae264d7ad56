/* ort_execute.c - one ORT Run per batch.
 *
 * Inputs: a batch of one request runs on OrtValues that point straight at the request's
 * bytes (zero copy) unless they are misaligned for the element type; a batch of several
 * is gathered, input by input, into one contiguous buffer owned by the instance and
 * reused from batch to batch. STRING inputs are parsed from the length-prefixed form into
 * an ORT string tensor (bytes kept whole, NULs included).
 * Outputs: ORT allocates them; each request gets a view into the OrtValue (its rows of
 * the batch), kept alive by an nr_hold_t whose refcount is the number of views and whose
 * release frees the OrtValue, on whatever thread drops the last view. STRING outputs are
 * serialized per request into a malloc'd buffer with its own hold.
 * Threads: called on the instance's thread, one call at a time per instance; touches only
 * the instance's state and the model's read-only tables.
 */
#include "ort_int.h"

#include "../../common/alloc.h"

#include <stdlib.h>
#include <string.h>

static const char *model_name(const nr__ort_inst_t *in) { return in->model->cfg->name; }

static nr_status_t *scratch_reserve(nr__ort_scratch_t *s, size_t size)
{
    if (s->cap >= size)
        return NULL;
    void *p = realloc(s->p, size);
    if (p == NULL)
        return nr_status_new(NR_INTERNAL, "failed to allocate %zu bytes for a batch", size);
    s->p = p;
    s->cap = size;
    return NULL;
}

static bool tensor_count(const nr_tensor_t *t, uint64_t *count)
{
    return nr_shape_count(t->dims, t->ndim, count);
}

/* ---- input shapes ---- */

/* The shape ORT sees for input `t`: the first item's dims with the batch dimension set to
 * the batch total; a config reshape replaces the non-batch dims, its -1s taking the
 * request's values at the config dims' -1s (as Triton's core does); a ragged input is
 * the 1-D concatenation of every item. */
static nr_status_t *input_shape(const nr__ort_inst_t *in, const nr__ort_tensor_t *t, size_t idx,
                                const nr_batch_t *batch, int64_t *shape, size_t *ndim)
{
    const nr_tensor_t *first = &batch->items[0]->inputs[idx];
    if (t->ragged) {
        uint64_t total = 0, c;
        for (size_t i = 0; i < batch->n; i++)
            if (!tensor_count(&batch->items[i]->inputs[idx], &c) || nr_add_overflow(total, c, &total))
                return nr_status_new(NR_INVALID_ARG, "input '%s' is too large", t->name);
        shape[0] = (int64_t)total;
        *ndim = 1;
        return NULL;
    }
    const size_t off = in->model->batching ? 1 : 0;
    if (t->model_ndim == 0 && !off) { /* a scalar model input: config dims are all 1 */
        *ndim = 0;
        return NULL;
    }
    if (first->ndim < off || first->ndim > NR_MAX_DIMS)
        return nr_status_new(NR_INTERNAL, "unexpected rank %zu for input '%s' of model '%s'",
                             first->ndim, t->name, model_name(in));
    memcpy(shape, first->dims, first->ndim * sizeof(int64_t));
    *ndim = first->ndim;
    if (t->has_reshape) {
        size_t var = off, n = off;
        for (size_t k = 0; k < t->reshape->n && n < NR_MAX_DIMS; k++) {
            int64_t d = t->reshape->v[k];
            if (d == -1) { /* next request value at a config -1 */
                while (var < first->ndim && var - off < t->dims->n && t->dims->v[var - off] != -1)
                    var++;
                d = var < first->ndim ? first->dims[var++] : 1;
            }
            shape[n++] = d;
        }
        *ndim = n;
    }
    if (off)
        shape[0] = (int64_t)batch->total_batch_size;
    return NULL;
}

/* ---- STRING inputs ---- */

static uint32_t le32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Writes one request's `count` serialized strings into elements [first, first+count) of
 * `v`. Wording is Triton's ValidateStringBuffer. Elements not written stay "". */
static nr_status_t *fill_strings(OrtValue *v, uint64_t first, uint64_t count, const nr_tensor_t *t,
                                 const char *name)
{
    const OrtApi *api = nr__ort_api();
    const unsigned char *p = t->data;
    size_t left = t->data ? t->size : 0;
    uint64_t e = 0;
    for (; left >= 4; e++) {
        if (e >= count)
            return nr_status_new(NR_INVALID_ARG, "unexpected number of string elements %llu for "
                                 "inference input '%s', expecting %llu", (unsigned long long)e + 1,
                                 name, (unsigned long long)count);
        uint32_t len = le32(p);
        p += 4, left -= 4;
        if (left < len)
            return nr_status_new(NR_INVALID_ARG, "incomplete string data for inference input '%s', "
                                 "expecting string of length %u but only %zu bytes available",
                                 name, len, left);
        char *dst = NULL;
        nr_status_t *st = nr__ort_status(
            api->GetResizedStringTensorElementBuffer(v, (size_t)(first + e), len, &dst));
        if (st)
            return st;
        if (len)
            memcpy(dst, p, len);
        p += len, left -= len;
    }
    if (e != count)
        return nr_status_new(NR_INVALID_ARG, "expected %llu strings for inference input '%s', got %llu",
                             (unsigned long long)count, name, (unsigned long long)e);
    return NULL;
}

static nr_status_t *string_input(nr__ort_inst_t *in, const nr__ort_tensor_t *t, size_t idx,
                                 nr_batch_t *batch, const int64_t *shape, size_t ndim)
{
    const OrtApi *api = nr__ort_api();
    OrtAllocator *alloc;
    nr_status_t *st = nr__ort_status(api->GetAllocatorWithDefaultOptions(&alloc));
    if (!st)
        st = nr__ort_status(api->CreateTensorAsOrtValue(alloc, shape, ndim,
                                                        ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING,
                                                        &in->in_vals[idx]));
    uint64_t first = 0, count;
    for (size_t i = 0; !st && i < batch->n; i++) {
        nr_batch_item_t *item = batch->items[i];
        if (!tensor_count(&item->inputs[idx], &count))
            return nr_status_new(NR_INTERNAL, "bad shape for input '%s'", t->name);
        nr_status_t *ist = fill_strings(in->in_vals[idx], first, count, &item->inputs[idx], t->name);
        if (ist && ist->code == NR_INTERNAL)
            st = ist; /* ORT failed: the whole batch */
        else if (ist && item->status == NULL)
            item->status = ist; /* this request alone; its elements run as "" */
        else
            nr_status_free(ist);
        first += count;
    }
    return st;
}

/* ---- fixed-size inputs ---- */

/* Bytes the request's shape calls for; false on overflow. */
static bool expected_bytes(const nr__ort_tensor_t *t, const nr_tensor_t *x, uint64_t *bytes)
{
    uint64_t count = 0;
    return tensor_count(x, &count) && !nr_mul_overflow(count, t->elem_size, bytes) &&
           *bytes <= NR_MAX_TENSOR_BYTES;
}

/* Checks one request's byte size against its shape; a mismatch fails that request only. */
static bool item_bytes_ok(nr__ort_inst_t *in, const nr__ort_tensor_t *t, nr_batch_item_t *item,
                          size_t idx, uint64_t bytes)
{
    const nr_tensor_t *x = &item->inputs[idx];
    if (bytes == x->size)
        return true;
    if (item->status == NULL)
        item->status = nr_status_new(NR_INVALID_ARG, "input byte size mismatch for input '%s' for "
                                     "model '%s'. Expected %llu, got %zu", t->name, model_name(in),
                                     (unsigned long long)bytes, x->size);
    return false;
}

/* Copies every request's rows into the instance's buffer for this input; a request whose
 * bytes do not match its shape fails alone and its rows run as zeros. */
static nr_status_t *gather(nr__ort_inst_t *in, const nr__ort_tensor_t *t, size_t idx,
                           nr_batch_t *batch, void **data, size_t *size)
{
    uint64_t total = 0, bytes = 0;
    for (size_t i = 0; i < batch->n; i++)
        if (!expected_bytes(t, &batch->items[i]->inputs[idx], &bytes) ||
            nr_add_overflow(total, bytes, &total) || total > NR_MAX_TENSOR_BYTES)
            return nr_status_new(NR_INVALID_ARG, "batch for input '%s' is too large", t->name);
    nr_status_t *st = scratch_reserve(&in->gather[idx], total ? total : 1);
    if (st)
        return st;
    unsigned char *dst = in->gather[idx].p;
    for (size_t i = 0; i < batch->n; i++) {
        nr_batch_item_t *item = batch->items[i];
        (void)expected_bytes(t, &item->inputs[idx], &bytes);
        if (item_bytes_ok(in, t, item, idx, bytes) && bytes)
            memcpy(dst, item->inputs[idx].data, bytes);
        else if (bytes)
            memset(dst, 0, bytes);
        dst += bytes;
    }
    *data = in->gather[idx].p;
    *size = total;
    return NULL;
}

static nr_status_t *fixed_input(nr__ort_inst_t *in, const nr__ort_tensor_t *t, size_t idx,
                                nr_batch_t *batch, const int64_t *shape, size_t ndim)
{
    static unsigned char empty[8];
    const nr_tensor_t *x = &batch->items[0]->inputs[idx];
    void *data = (void *)x->data;
    size_t size = x->size;
    uint64_t bytes;
    bool aligned = ((uintptr_t)x->data % t->elem_size) == 0;
    if (batch->n == 1 && aligned) {
        if (!expected_bytes(t, x, &bytes))
            return nr_status_new(NR_INVALID_ARG, "input '%s' is too large", t->name);
        if (!item_bytes_ok(in, t, batch->items[0], idx, bytes))
            return NULL; /* the only request failed: nothing to run */
    } else {
        nr_status_t *st = gather(in, t, idx, batch, &data, &size);
        if (st)
            return st;
    }
    if (size == 0)
        data = empty;
    return nr__ort_status(nr__ort_api()->CreateTensorWithDataAsOrtValue(
        nr__ort_cpu_info(), data, size, shape, ndim, t->ort_type, &in->in_vals[idx]));
}

static bool all_failed(const nr_batch_t *batch)
{
    for (size_t i = 0; i < batch->n; i++)
        if (batch->items[i]->status == NULL)
            return false;
    return true;
}

/* Creates the OrtValues for every present input; *n_run counts them (names in order). */
static nr_status_t *set_inputs(nr__ort_inst_t *in, nr_batch_t *batch, size_t *n_run)
{
    const nr__ort_model_t *m = in->model;
    *n_run = 0;
    for (size_t i = 0; i < m->n_in; i++) {
        const nr__ort_tensor_t *t = &m->in[i];
        bool present = batch->items[0]->inputs[i].data != NULL;
        for (size_t k = 1; k < batch->n; k++)
            if ((batch->items[k]->inputs[i].data != NULL) != present)
                return nr_status_new(NR_INTERNAL, "optional input '%s' is present in only part of a "
                                     "batch for model '%s'", t->name, model_name(in));
        if (!present)
            continue; /* an absent optional input is left out of the Run */
        int64_t shape[NR_MAX_DIMS];
        size_t ndim = 0;
        nr_status_t *st = input_shape(in, t, i, batch, shape, &ndim);
        if (!st)
            st = t->dtype == NR_TYPE_STRING ? string_input(in, t, i, batch, shape, ndim)
                                            : fixed_input(in, t, i, batch, shape, ndim);
        if (st)
            return st;
        if (all_failed(batch))
            return NULL;
        in->in_names[*n_run] = t->name;
        if (*n_run != i) { /* keep the Run arrays dense */
            in->in_vals[*n_run] = in->in_vals[i];
            in->in_vals[i] = NULL;
        }
        (*n_run)++;
    }
    return NULL;
}

/* ---- outputs ---- */

typedef struct {
    nr_hold_t hold;
    OrtValue *value;
} value_hold_t;

static void value_release(nr_hold_t *h)
{
    value_hold_t *vh = (value_hold_t *)h;
    nr__ort_api()->ReleaseValue(vh->value);
    free(vh);
}

typedef struct {
    nr_hold_t hold;
    unsigned char bytes[];
} bytes_hold_t;

static void bytes_release(nr_hold_t *h)
{
    free(h);
}

/* The union of the outputs the batch's requests want, in config order. */
static size_t wanted_outputs(nr__ort_inst_t *in, const nr_batch_t *batch)
{
    const nr__ort_model_t *m = in->model;
    size_t n = 0;
    for (uint32_t ci = 0; ci < m->n_out; ci++) {
        bool want = false;
        for (size_t i = 0; i < batch->n && !want; i++)
            for (size_t j = 0; j < batch->items[i]->n_want && !want; j++)
                want = batch->items[i]->want[j] == ci;
        if (want) {
            in->out_idx[n] = ci;
            in->out_names[n] = m->out[ci].name;
            in->out_vals[n++] = NULL;
        }
    }
    return n;
}

/* Dims reported to one request: ORT's shape with its own batch size; a config reshape
 * maps back to [batch] + config dims (the -1s take ORT's values at the reshape's -1s);
 * a scalar ORT output of a non-batching model reports the config dims. */
static void output_dims(const nr__ort_model_t *m, const nr__ort_tensor_t *t, const int64_t *odims,
                        size_t ondim, uint64_t item_batch, nr_tensor_t *out)
{
    const size_t off = m->batching ? 1 : 0;
    if (!t->has_reshape && (ondim > 0 || m->batching)) {
        memcpy(out->dims, odims, ondim * sizeof(int64_t));
        out->ndim = ondim;
    } else {
        int64_t vars[NR_MAX_DIMS];
        size_t nv = 0, used = 0, n = 0;
        for (size_t k = 0; t->has_reshape && k < t->reshape->n && k + off < ondim; k++)
            if (t->reshape->v[k] == -1)
                vars[nv++] = odims[k + off];
        if (off)
            out->dims[n++] = 0;
        for (size_t k = 0; k < t->dims->n && n < NR_MAX_DIMS; k++)
            out->dims[n++] = t->dims->v[k] == -1 ? (used < nv ? vars[used++] : 0) : t->dims->v[k];
        out->ndim = n;
    }
    if (off && out->ndim > 0)
        out->dims[0] = (int64_t)item_batch;
}

/* Per-request row range of an output: elements per batch row and the item's first row. */
typedef struct {
    OrtValue *value;
    const nr__ort_tensor_t *t;
    uint32_t ci;
    int64_t dims[NR_MAX_DIMS];
    size_t ndim;
    uint64_t count;       /* elements in the whole output */
    uint64_t row_count;   /* elements per batch row (whole output when n == 1) */
} out_info_t;

static nr_status_t *read_output(nr__ort_inst_t *in, const nr_batch_t *batch, out_info_t *o)
{
    const OrtApi *api = nr__ort_api();
    OrtTensorTypeAndShapeInfo *tsi = NULL;
    nr_status_t *st = nr__ort_status(api->GetTensorTypeAndShape(o->value, &tsi));
    if (!st)
        st = nr__ort_status(api->GetDimensionsCount(tsi, &o->ndim));
    if (!st && o->ndim > NR_MAX_DIMS)
        st = nr_status_new(NR_INTERNAL, "output '%s' has %zu dimensions", o->t->name, o->ndim);
    if (!st)
        st = nr__ort_status(api->GetDimensions(tsi, o->dims, o->ndim));
    if (tsi)
        api->ReleaseTensorTypeAndShapeInfo(tsi);
    if (st)
        return st;
    if (!nr_shape_count(o->dims, o->ndim, &o->count))
        return nr_status_new(NR_INTERNAL, "output '%s' has an invalid shape", o->t->name);
    o->row_count = o->count;
    if (!in->model->batching)
        return NULL;
    if (o->ndim == 0 || o->dims[0] != (int64_t)batch->total_batch_size)
        return nr_status_new(NR_INTERNAL, "output '%s' of model '%s' has batch size %lld, expected %llu",
                             o->t->name, model_name(in), o->ndim ? (long long)o->dims[0] : 0LL,
                             (unsigned long long)batch->total_batch_size);
    o->row_count = o->dims[0] ? o->count / (uint64_t)o->dims[0] : 0;
    return NULL;
}

static void set_view(const nr__ort_inst_t *in, const out_info_t *o, nr_batch_item_t *item,
                     nr_tensor_t *out, const void *data, size_t size, nr_hold_t *hold)
{
    out->name = o->t->name;
    out->dtype = o->t->dtype;
    output_dims(in->model, o->t, o->dims, o->ndim, item->batch_size, out);
    out->data = data;
    out->size = size;
    out->hold = hold;
}

static size_t fixed_output(nr__ort_inst_t *in, const nr_batch_t *batch, out_info_t *o, void *base)
{
    value_hold_t *vh = nr_malloc(sizeof(*vh));
    vh->hold.release = value_release;
    vh->value = o->value;
    size_t views = 0;
    const size_t row_bytes = o->row_count * o->t->elem_size;
    uint64_t row = 0;
    for (size_t i = 0; i < batch->n; i++) {
        nr_batch_item_t *item = batch->items[i];
        const uint64_t rows = in->model->batching ? item->batch_size : 1;
        for (size_t j = 0; item->status == NULL && j < item->n_want; j++)
            if (item->want[j] == o->ci) {
                /* an empty output has no buffer: base is NULL (no offset on NULL) */
                const char *p = base != NULL ? (char *)base + row * row_bytes : NULL;
                set_view(in, o, item, &item->outputs[j], p, rows * row_bytes, &vh->hold);
                views++;
            }
        row += rows;
    }
    atomic_init(&vh->hold.refs, (int)views);
    if (views == 0) {
        nr__ort_api()->ReleaseValue(vh->value);
        free(vh);
    }
    o->value = NULL; /* owned by the hold now */
    return views;
}

/* Serializes elements [e0, e0+n) from ORT's flat content into a new length-prefixed buffer. */
static bytes_hold_t *serialize(const char *content, const size_t *offs, uint64_t total_len,
                               uint64_t count, uint64_t e0, uint64_t n, size_t *size)
{
    const uint64_t end = e0 + n < count ? offs[e0 + n] : total_len;
    const uint64_t begin = n ? offs[e0] : end;
    *size = (size_t)(4 * n + (end - begin));
    bytes_hold_t *bh = nr_malloc(sizeof(*bh) + *size);
    bh->hold.release = bytes_release;
    atomic_init(&bh->hold.refs, 1);
    unsigned char *p = bh->bytes;
    for (uint64_t e = e0; e < e0 + n; e++) {
        const uint64_t a = offs[e], b = e + 1 < count ? offs[e + 1] : total_len;
        const uint32_t len = (uint32_t)(b - a);
        p[0] = (unsigned char)len, p[1] = (unsigned char)(len >> 8);
        p[2] = (unsigned char)(len >> 16), p[3] = (unsigned char)(len >> 24);
        memcpy(p + 4, content + a, len);
        p += 4 + len;
    }
    return bh;
}

static nr_status_t *string_output(nr__ort_inst_t *in, const nr_batch_t *batch, out_info_t *o)
{
    const OrtApi *api = nr__ort_api();
    size_t total_len = 0;
    nr_status_t *st = nr__ort_status(api->GetStringTensorDataLength(o->value, &total_len));
    uint64_t offs_bytes;
    if (!st && (nr_mul_overflow(o->count, sizeof(size_t), &offs_bytes) ||
                offs_bytes + total_len > NR_MAX_TENSOR_BYTES))
        st = nr_status_new(NR_INTERNAL, "output '%s' is too large", o->t->name);
    if (!st)
        st = scratch_reserve(&in->strbuf, offs_bytes + total_len + 1);
    if (st)
        return st;
    size_t *offs = in->strbuf.p;
    char *content = (char *)in->strbuf.p + offs_bytes;
    st = nr__ort_status(api->GetStringTensorContent(o->value, content, total_len, offs, o->count));
    if (st)
        return st;
    uint64_t e0 = 0;
    for (size_t i = 0; i < batch->n; i++) {
        nr_batch_item_t *item = batch->items[i];
        const uint64_t n = in->model->batching ? item->batch_size * o->row_count : o->count;
        for (size_t j = 0; item->status == NULL && j < item->n_want; j++)
            if (item->want[j] == o->ci) {
                size_t size;
                bytes_hold_t *bh = serialize(content, offs, total_len, o->count, e0, n, &size);
                set_view(in, o, item, &item->outputs[j], bh->bytes, size, &bh->hold);
            }
        e0 += n;
    }
    return NULL;
}

/* Drops every view handed out so far (a later output failed, so the batch fails). */
static void unwind_outputs(const nr_batch_t *batch)
{
    for (size_t i = 0; i < batch->n; i++)
        for (size_t j = 0; j < batch->items[i]->n_want; j++) {
            nr_tensor_t *out = &batch->items[i]->outputs[j];
            nr_hold_unref(out->hold);
            memset(out, 0, sizeof(*out));
        }
}

/* Hands every Run output to the requests that want it: first every output is checked,
 * then views are made. Fixed-size OrtValues move into their holds (out_vals[k] = NULL);
 * the rest stay in out_vals for the caller to release. */
static nr_status_t *scatter_outputs(nr__ort_inst_t *in, const nr_batch_t *batch, size_t n_out)
{
    nr_status_t *st = scratch_reserve(&in->outinfo, n_out * (sizeof(out_info_t) + sizeof(void *)) + 1);
    if (st)
        return st;
    out_info_t *info = in->outinfo.p;
    void **base = (void **)(info + n_out);
    for (size_t k = 0; k < n_out; k++) {
        out_info_t *o = &info[k];
        *o = (out_info_t){.value = in->out_vals[k], .ci = in->out_idx[k]};
        o->t = &in->model->out[o->ci];
        base[k] = NULL;
        st = read_output(in, batch, o);
        if (!st && o->t->dtype != NR_TYPE_STRING)
            st = nr__ort_status(nr__ort_api()->GetTensorMutableData(o->value, &base[k]));
        if (st)
            return st;
    }
    for (size_t k = 0; k < n_out; k++) {
        if (info[k].t->dtype != NR_TYPE_STRING) {
            fixed_output(in, batch, &info[k], base[k]);
            in->out_vals[k] = NULL;
            continue;
        }
        st = string_output(in, batch, &info[k]);
        if (st) {
            unwind_outputs(batch);
            return st;
        }
    }
    return NULL;
}

static void release_values(OrtValue **v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (v[i]) {
            nr__ort_api()->ReleaseValue(v[i]);
            v[i] = NULL;
        }
}

nr_status_t *nr__ort_execute(void *inst_state, nr_batch_t *batch)
{
    nr__ort_inst_t *in = inst_state;
    const nr__ort_model_t *m = in->model;
    if (batch->n == 0)
        return NULL;
    if (batch->n > 1 && !m->batching)
        return nr_status_new(NR_INTERNAL, "batch of %zu requests for '%s', which does not support "
                             "batching", batch->n, model_name(in));
    size_t n_in = 0, n_out = wanted_outputs(in, batch);
    nr_status_t *st = set_inputs(in, batch, &n_in);
    batch->input_end_ns = nr_now_ns();
    const bool run = !st && n_out > 0 && !all_failed(batch);
    if (run)
        st = nr__ort_status(nr__ort_api()->Run(in->session, in->run_opts, in->in_names,
                                               (const OrtValue *const *)in->in_vals, n_in,
                                               in->out_names, n_out, in->out_vals));
    batch->infer_end_ns = nr_now_ns();
    release_values(in->in_vals, m->n_in);
    if (run && !st)
        st = scatter_outputs(in, batch, n_out);
    release_values(in->out_vals, n_out);
    return st;
}
