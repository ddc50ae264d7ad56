/* request.c - building and validating nr_req_t against its model's config,
 * with Triton's error texts. Runs on the frontend thread that owns the request;
 * touches no shared state.
 */
#include "request.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "model.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

static size_t align_up(size_t n)
{
    const size_t a = _Alignof(max_align_t);
    return (n + a - 1) / a * a;
}

/* One allocation per request for the request and its per-config arrays, laid out as
 * req | inputs[n_input] | outputs[n_output] | want[n_output] | present[n_input],
 * wanted[n_output] (five callocs before: the request path's malloc/free pairs are a
 * measurable part of a small request's cost, docs/performance.md). */
nr_req_t *nr_req_new(nr_model_t *model)
{
    const nr_model_config_t *cfg = model->cfg;
    size_t n_in = cfg->n_input ? cfg->n_input : 1, n_out = cfg->n_output ? cfg->n_output : 1;
    size_t at_inputs = align_up(sizeof(nr_req_t));
    size_t at_outputs = at_inputs + align_up(n_in * sizeof(nr_tensor_t));
    size_t at_want = at_outputs + align_up(n_out * sizeof(nr_tensor_t));
    size_t at_present = at_want + align_up(n_out * sizeof(uint32_t));
    char *block = nr_calloc(1, at_present + cfg->n_input + cfg->n_output + 1);
    nr_req_t *req = (nr_req_t *)block;
    req->model = model;
    req->inputs = (nr_tensor_t *)(block + at_inputs);
    req->outputs = (nr_tensor_t *)(block + at_outputs);
    req->want = (uint32_t *)(block + at_want);
    req->present = (bool *)(block + at_present);
    req->wanted = req->present + cfg->n_input;
    req->t_start_ns = nr_now_ns();
    return req;
}

/* A copy of a name or id from the wire: NULL when it cannot be had. */
static char *wire_strndup(const char *s, size_t n)
{
    char *d = n < SIZE_MAX ? malloc(n + 1) : NULL;
    if (d != NULL) {
        memcpy(d, s, n);
        d[n] = '\0';
    }
    return d;
}

static nr_status_t *no_memory(size_t size, const char *what)
{
    return nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes for the request's %s",
                         size, what);
}

nr_status_t *nr_req_set_id(nr_req_t *req, const char *id, size_t len)
{
    free(req->id);
    req->id = NULL;
    if (len > 0 && (req->id = wire_strndup(id, len)) == NULL)
        return no_memory(len + 1, "id");
    return NULL;
}

nr_status_t *nr_req_error(const nr_req_t *req, nr_code_t code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nr_status_t *st = nr_status_newv(code, fmt, ap);
    va_end(ap);
    return nr_status_prefix(st, "[request id: %s] ",
                            req->id && req->id[0] ? req->id : "<id_unknown>");
}

int nr_req_input_index(const nr_req_t *req, const char *name, size_t len)
{
    return nr_model_input_index(req->model, name, len);
}

nr_status_t *nr_req_add_input(nr_req_t *req, const char *name, size_t name_len, nr_dtype_t dtype,
                              const int64_t *dims, size_t ndim, const void *data, size_t size)
{
    if (ndim > NR_MAX_DIMS)
        return nr_req_error(req, NR_INVALID_ARG, "input '%.*s' has %zu dimensions, more than %d",
                            (int)name_len, name, ndim, NR_MAX_DIMS);
    int idx = nr_req_input_index(req, name, name_len);
    if (idx >= 0 && req->present[idx])
        return nr_req_error(req, NR_INVALID_ARG, "input '%.*s' already exists in request",
                            (int)name_len, name);
    if (idx < 0) {
        /* unknown names are kept for the error text; the map spots one given twice */
        char *copy = wire_strndup(name, name_len);
        if (copy == NULL)
            return no_memory(name_len + 1, "input name");
        if (!nr_strmap_put(&req->extra_index, copy, name_len, (uint32_t)req->n_extra, NULL)) {
            free(copy);
            return nr_req_error(req, NR_INVALID_ARG, "input '%.*s' already exists in request",
                                (int)name_len, name);
        }
        req->extra_names = nr_grow(req->extra_names, req->n_extra, sizeof(char *));
        req->extra_names[req->n_extra++] = copy;
    }
    req->order = nr_grow(req->order, req->n_order, sizeof(uint32_t));
    req->order[req->n_order++] = idx < 0 ? NR_REQ_EXTRA + (uint32_t)(req->n_extra - 1)
                                         : (uint32_t)idx;
    req->n_given++;
    if (idx < 0)
        return NULL;
    nr_tensor_t *t = &req->inputs[idx];
    t->name = req->model->cfg->input[idx].name;
    t->dtype = dtype;
    t->ndim = ndim;
    if (ndim > 0) /* gRPC's empty shape is a NULL array */
        memcpy(t->dims, dims, ndim * sizeof(int64_t));
    t->data = data;
    t->size = size;
    req->present[idx] = true;
    return NULL;
}

nr_status_t *nr_req_add_output(nr_req_t *req, const char *name, size_t name_len)
{
    int i = nr_model_output_index(req->model, name, name_len);
    if (i < 0)
        return nr_status_new(NR_INVALID_ARG, "unexpected inference output '%.*s' for model '%s'",
                             (int)name_len, name, req->model->cfg->name);
    if (!req->wanted[i]) {
        req->wanted[i] = true;
        req->want[req->n_want++] = (uint32_t)i;
    }
    return NULL;
}

void nr_req_free(nr_req_t *req)
{
    if (req == NULL)
        return;
    if (req->trace != NULL) /* first: it reads the tensors */
        nr_trace_end(req->trace, req);
    for (size_t i = 0; i < req->n_want; i++)
        nr_hold_unref(req->outputs[i].hold);
    free(req->cache_key);
    for (size_t i = 0; i < req->n_extra; i++)
        free(req->extra_names[i]);
    free(req->extra_names);
    nr_strmap_free(&req->extra_index);
    nr_status_free(req->status);
    free(req->id);
    nr_buf_free(&req->params);
    free(req->order);
    free(req); /* and its arrays, allocated with it */
}

static void dims_str(nr_buf_t *b, const int64_t *dims, size_t ndim, bool batch_prefix)
{
    nr_buf_putc(b, '[');
    if (batch_prefix)
        nr_buf_puts(b, ndim ? "-1," : "-1");
    for (size_t i = 0; i < ndim; i++) {
        if (i)
            nr_buf_putc(b, ',');
        nr_buf_i64(b, dims[i]);
    }
    nr_buf_putc(b, ']');
}

/* Triton's "expected N inputs but got M inputs" text, with its quirks: the
 * given names in reverse order, and "]" alone when nothing is missing. */
static nr_status_t *input_count_error(nr_req_t *req)
{
    const nr_model_config_t *cfg = req->model->cfg;
    nr_buf_t got, missing;
    nr_buf_init(&got);
    nr_buf_init(&missing);
    nr_buf_putc(&got, '[');
    for (size_t k = req->n_order; k-- > 0;) {
        uint32_t o = req->order[k];
        const char *name = o >= NR_REQ_EXTRA ? req->extra_names[o - NR_REQ_EXTRA] : cfg->input[o].name;
        nr_buf_printf(&got, "%s'%s'", k + 1 == req->n_order ? "" : ",", name);
    }
    nr_buf_putc(&got, ']');
    nr_buf_putc(&missing, '[');
    for (size_t i = 0; i < cfg->n_input; i++)
        if (!req->present[i] && !cfg->input[i].optional)
            nr_buf_printf(&missing, "'%s',", cfg->input[i].name);
    missing.data[missing.len - 1] = ']';
    size_t required = 0;
    for (size_t i = 0; i < cfg->n_input; i++)
        required += !cfg->input[i].optional;
    nr_status_t *st = nr_req_error(
        req, NR_INVALID_ARG,
        "expected %zu inputs but got %zu inputs for model '%s'. Got input(s) %s, but missing "
        "required input(s) %s. Please provide all required input(s).",
        required, req->n_given, cfg->name, got.data, missing.data);
    nr_buf_free(&got);
    nr_buf_free(&missing);
    return st;
}

static nr_status_t *shape_error(nr_req_t *req, size_t i)
{
    const nr_model_config_t *cfg = req->model->cfg;
    const nr_cfg_input_t *in = &cfg->input[i];
    const nr_tensor_t *t = &req->inputs[i];
    nr_buf_t exp, got;
    nr_buf_init(&exp);
    nr_buf_init(&got);
    dims_str(&exp, in->dims.v, in->dims.n, cfg->max_batch_size > 0);
    dims_str(&got, t->dims, t->ndim, false);
    nr_status_t *st = nr_req_error(
        req, NR_INVALID_ARG, "unexpected shape for input '%s' for model '%s'. Expected %s, got %s. %s",
        in->name, cfg->name, exp.data, got.data,
        cfg->max_batch_size > 0
            ? "NOTE: Setting a non-zero max_batch_size in the model config requires a batch "
              "dimension to be prepended to each input shape. If you want to specify the full "
              "shape including the batch dim in your input dims config, try setting "
              "max_batch_size to zero. See the model configuration docs for more info on "
              "max_batch_size."
            : "");
    nr_buf_free(&exp);
    nr_buf_free(&got);
    return st;
}

static bool dims_match(const nr_cfg_input_t *in, const int64_t *dims, size_t ndim)
{
    const int64_t *cd = in->dims.v;
    size_t cn = in->dims.n;
    if (in->has_reshape && in->reshape.n == 0 && cn == 1 && cd[0] == 1 && ndim == 0)
        return true;
    if (cn != ndim)
        return false;
    for (size_t k = 0; k < cn; k++)
        if (cd[k] != -1 && cd[k] != dims[k])
            return false;
    return true;
}

/* Byte size check: STRING tensors are validated element by element. */
static nr_status_t *check_size(nr_req_t *req, size_t i)
{
    const nr_model_config_t *cfg = req->model->cfg;
    const nr_tensor_t *t = &req->inputs[i];
    uint64_t count;
    if (!nr_shape_count(t->dims, t->ndim, &count))
        return nr_req_error(req, NR_INVALID_ARG, "input '%s' for model '%s' has an invalid shape",
                            t->name, cfg->name);
    if (t->dtype == NR_TYPE_STRING) {
        const unsigned char *p = t->data;
        size_t off = 0;
        uint64_t elems = 0;
        while (off < t->size) {
            if (t->size - off < 4)
                return nr_status_new(NR_INVALID_ARG,
                                     "incomplete string length indicator for inference input "
                                     "'%s', expecting 4 bytes but only %zu bytes available",
                                     t->name, t->size - off);
            uint32_t n = (uint32_t)p[off] | (uint32_t)p[off + 1] << 8 |
                         (uint32_t)p[off + 2] << 16 | (uint32_t)p[off + 3] << 24;
            off += 4;
            elems++;
            /* An element cut short by the end of the data counts as one, as in
             * Triton's ValidateBytesInputs: the backend then fails the request
             * ("incomplete string data ...") and it counts as a BACKEND failure. */
            off += t->size - off < n ? t->size - off : n;
        }
        if (elems != count)
            return nr_req_error(req, NR_INVALID_ARG,
                                "unexpected number of string elements %" PRIu64
                                " for inference input '%s' for model '%s', expecting %" PRIu64,
                                elems, t->name, cfg->name, count);
        return NULL;
    }
    uint64_t bytes;
    if (__builtin_mul_overflow(count, (uint64_t)nr_dtype_size(t->dtype), &bytes) ||
        bytes > NR_MAX_TENSOR_BYTES)
        return nr_req_error(req, NR_INVALID_ARG, "input '%s' for model '%s' is too large",
                            t->name, cfg->name);
    if (bytes != t->size)
        return nr_req_error(req, NR_INVALID_ARG,
                            "input byte size mismatch for input '%s' for model '%s'. Expected %" PRIu64
                            ", got %zu",
                            t->name, cfg->name, bytes, t->size);
    return NULL;
}

nr_status_t *nr_req_validate(nr_req_t *req)
{
    const nr_model_config_t *cfg = req->model->cfg;
    size_t given_known = 0, required = 0;
    for (size_t i = 0; i < cfg->n_input; i++) {
        given_known += req->present[i];
        required += !cfg->input[i].optional;
    }
    bool missing = false;
    for (size_t i = 0; i < cfg->n_input; i++)
        missing |= !req->present[i] && !cfg->input[i].optional;
    if (req->n_extra || missing)
        return input_count_error(req);
    (void)given_known;
    (void)required;

    /* batch size: the first dim of every input must agree */
    /* Triton checks inputs in the reverse of their order in the request; so do
     * we, so that a request with two faults names the same input. */
    req->batch_size = 1;
    bool have_batch = false;
    for (size_t k = req->n_order; k-- > 0;) {
        size_t i = req->order[k];
        const nr_tensor_t *t = &req->inputs[i];
        if (cfg->max_batch_size > 0) {
            if (t->ndim == 0)
                return nr_req_error(req, NR_INVALID_ARG,
                                    "input '%s' has no shape but model requires batch dimension "
                                    "for '%s'",
                                    t->name, cfg->name);
            if (!have_batch) {
                if (t->dims[0] < 0 || (uint64_t)t->dims[0] > (uint64_t)cfg->max_batch_size)
                    return nr_req_error(req, NR_INVALID_ARG,
                                        "inference request batch-size must be <= %d for '%s'",
                                        cfg->max_batch_size, cfg->name);
                req->batch_size = (uint64_t)t->dims[0];
                have_batch = true;
            } else if ((uint64_t)t->dims[0] != req->batch_size) {
                return nr_req_error(req, NR_INVALID_ARG,
                                    "input '%s' batch size does not match other inputs for '%s'",
                                    t->name, cfg->name);
            }
        }
    }
    for (size_t k = req->n_order; k-- > 0;) {
        size_t i = req->order[k];
        const nr_tensor_t *t = &req->inputs[i];
        const nr_cfg_input_t *in = &cfg->input[i];
        if (have_batch && req->batch_size == 0 && nr_dtype_size(in->data_type) > 0) {
            /* Triton sizes an empty batch as a batch of one and reports the mismatch */
            uint64_t per = nr_dtype_size(in->data_type), c;
            if (!nr_shape_count(t->dims + 1, t->ndim - 1, &c) || __builtin_mul_overflow(c, per, &per))
                per = 0;
            return nr_req_error(req, NR_INVALID_ARG,
                                "input byte size mismatch for input '%s' for model '%s'. Expected %" PRIu64
                                ", got %zu",
                                t->name, cfg->name, per, t->size);
        }
        if (t->dtype != in->data_type)
            return nr_req_error(req, NR_INVALID_ARG,
                                "inference input '%s' data-type is '%s', but model '%s' expects '%s'",
                                t->name,
                                nr_dtype_kserve_name(t->dtype) ? nr_dtype_kserve_name(t->dtype)
                                                               : "<invalid>",
                                cfg->name,
                                nr_dtype_kserve_name(in->data_type));
        size_t skip = cfg->max_batch_size > 0 ? 1 : 0;
        if (!dims_match(in, t->dims + skip, t->ndim - skip))
            return shape_error(req, i);
        nr_status_t *st = check_size(req, i);
        if (st)
            return st;
    }
    if (req->n_want == 0) {
        for (size_t i = 0; i < cfg->n_output; i++)
            req->want[i] = req->model->outputs_by_name[i];
        req->n_want = cfg->n_output;
    } else { /* report in Triton's order: sorted by output name */
        size_t n = 0;
        for (size_t k = 0; k < cfg->n_output; k++)
            if (req->wanted[req->model->outputs_by_name[k]])
                req->want[n++] = req->model->outputs_by_name[k];
    }
    req->item.inputs = req->inputs;
    req->item.n_inputs = cfg->n_input;
    req->item.want = req->want;
    req->item.n_want = req->n_want;
    req->item.outputs = req->outputs;
    req->item.batch_size = req->batch_size;
    req->item.status = NULL;
    req->item.id = req->id;
    if (req->params.len > 0 && req->item.params == NULL) {
        nr_buf_putc(&req->params, '}');
        req->item.params = req->params.data;
        req->item.params_len = req->params.len;
    }
    return NULL;
}

void nr_req_set_params(nr_req_t *req, const char *json, size_t len)
{
    nr_buf_reset(&req->params);
    if (len > 2 && json[0] == '{' && json[len - 1] == '}') /* validation closes it */
        nr_buf_append(&req->params, json, len - 1);
}

void nr_req_add_param(nr_req_t *req, const char *key, size_t key_len, const char *value,
                      size_t value_len)
{
    nr_buf_putc(&req->params, req->params.len == 0 ? '{' : ',');
    nr_buf_json_str(&req->params, key, key_len);
    nr_buf_putc(&req->params, ':');
    nr_buf_append(&req->params, value, value_len);
}

void nr_req_respond(nr_req_t *req, const nr_status_t *err, unsigned flags)
{
    if (!req->final_sent) {
        if (flags & NR_RESPONSE_FINAL)
            req->final_sent = true;
        if (req->on_response != NULL) {
            uint64_t t0 = req->t_last_response_ns ? req->t_last_response_ns : req->t_exec_ns;
            uint64_t t1 = nr_now_ns();
            req->on_response(req, err, flags, req->done_arg);
            uint64_t t2 = nr_now_ns();
            if (req->trace != NULL && req->model->cfg->decoupled)
                nr_trace_response(req->trace);
            nr_resp_kind_t kind = err != NULL ? NR_RESP_FAIL
                                  : (flags & NR_RESPONSE_NONE) ? NR_RESP_EMPTY : NR_RESP_SUCCESS;
            nr_stats_response(&req->model->stats, req->n_responses++, t1 - t0, t2 - t1, kind);
            req->t_last_response_ns = t2;
        }
    }
    for (size_t k = 0; k < req->n_want; k++) {
        nr_hold_unref(req->outputs[k].hold);
        memset(&req->outputs[k], 0, sizeof(req->outputs[k]));
    }
}
