/* http_generate.c - POST /v2/models/<m>[/versions/<v>]/generate, Triton's generate extension:
 * a flat JSON object in, a flat JSON object out, for clients that speak neither KServe's
 * tensors nor its binary framing (LLM front ends).
 *
 * As Triton does it, the body is translated into an infer request and runs as one
 * (http_infer.c): a member named after an input is that input's data, its shape the model's
 * dims with the innermost variable one taking the element count and any other (the batch
 * dimension too) 1; "parameters" holds more of both; every other member is a request
 * parameter ("id" also names the request). The answer: "model_name", "model_version", "id"
 * when there is one and each output, one element as a bare value, more as a flat array, the
 * keys sorted. A decoupled model may answer a generate request only with exactly one
 * response (.../generate_stream is the streaming form; not served yet).
 */
#include "http_int.h"

#include "../../common/alloc.h"
#include "../../common/dtype.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- request -------------------------------------------------------------------- */

/* One input of the infer request: {"name", "datatype", "shape", "data"}. */
static nr_status_t *put_input(nr_buf_t *b, const nr_model_t *m, int index, const nr_jv_t *v)
{
    const nr_model_config_t *cfg = m->cfg;
    const nr_cfg_input_t *in = &cfg->input[index];
    uint64_t count = v->type == NR_JV_ARRAY ? v->n : 1;
    int64_t dims[NR_MAX_DIMS + 1];
    size_t nd = 0, wild = SIZE_MAX;
    if (cfg->max_batch_size > 0)
        dims[nd++] = 1;
    for (size_t i = 0; i < in->dims.n && nd < NR_MAX_DIMS + 1; i++) {
        dims[nd] = in->dims.v[i];
        if (dims[nd] < 0) { /* the innermost variable one takes the count */
            if (wild != SIZE_MAX)
                dims[wild] = 1;
            wild = nd;
        }
        nd++;
    }
    uint64_t fixed = 1;
    for (size_t i = 0; i < nd; i++)
        if (i != wild)
            fixed *= (uint64_t)dims[i];
    if (wild != SIZE_MAX && fixed > 0 && count % fixed == 0)
        dims[wild] = (int64_t)(count / fixed);
    else if (wild != SIZE_MAX || fixed != count)
        return nr_status_new(NR_INVALID_ARG, "The schema can not convert input '%s' to tensor "
                             "with proper shape", in->name);
    if (b->data[b->len - 1] != '[')
        nr_buf_putc(b, ',');
    nr_buf_puts(b, "{\"name\":");
    nr_buf_json_str(b, in->name, strlen(in->name));
    nr_buf_printf(b, ",\"datatype\":\"%s\",\"shape\":[", nr_dtype_kserve_name(in->data_type));
    for (size_t i = 0; i < nd; i++)
        nr_buf_printf(b, "%s%" PRId64, i ? "," : "", dims[i]);
    nr_buf_puts(b, "],\"data\":");
    if (v->type != NR_JV_ARRAY) /* a scalar is one element */
        nr_buf_putc(b, '[');
    nr_json_write(b, v);
    if (v->type != NR_JV_ARRAY)
        nr_buf_putc(b, ']');
    nr_buf_putc(b, '}');
    return NULL;
}

static void put_param(nr_buf_t *b, const nr_jv_member_t *p)
{
    if (b->data[b->len - 1] != '{')
        nr_buf_putc(b, ',');
    nr_buf_json_str(b, p->key, p->key_len);
    nr_buf_putc(b, ':');
    nr_json_write(b, &p->val);
}

/* A member of the body or of its "parameters": an input's data, or a parameter. */
static nr_status_t *member(nr_buf_t *ins, nr_buf_t *params, const nr_model_t *m,
                           const nr_jv_member_t *p)
{
    int index = nr_model_input_index(m, p->key, p->key_len);
    if (index >= 0)
        return put_input(ins, m, index, &p->val);
    put_param(params, p);
    return NULL;
}

nr_status_t *nr_http_generate_translate(const nr_model_t *m, const char *body, size_t len,
                                        char **out, size_t *out_len)
{
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(body, len, &doc, &root);
    if (st != NULL) { /* Triton classes it as internal: 500 */
        nr_status_t *w = nr_status_new(NR_INTERNAL, "%s", st->msg);
        nr_status_free(st);
        return w;
    }
    if (root->type != NR_JV_OBJECT) {
        nr_json_free(doc);
        return nr_status_new(NR_INVALID_ARG, "the generate request must be a JSON object");
    }
    nr_buf_t ins, params, o;
    nr_buf_init(&ins);
    nr_buf_init(&params);
    nr_buf_init(&o);
    nr_buf_putc(&ins, '[');
    nr_buf_putc(&params, '{');
    const nr_jv_t *id = NULL;
    for (size_t i = 0; i < root->n && st == NULL; i++) {
        const nr_jv_member_t *p = &root->u.members[i];
        bool is_params = p->key_len == 10 && memcmp(p->key, "parameters", 10) == 0;
        if (is_params && p->val.type == NR_JV_OBJECT && nr_model_input_index(m, p->key,
                                                                           p->key_len) < 0) {
            for (size_t k = 0; k < p->val.n && st == NULL; k++)
                st = member(&ins, &params, m, &p->val.u.members[k]);
            continue;
        }
        if (p->key_len == 2 && memcmp(p->key, "id", 2) == 0 && p->val.type == NR_JV_STRING)
            id = &p->val; /* the request's id, and a parameter as well */
        st = member(&ins, &params, m, p);
    }
    if (st == NULL) {
        nr_buf_puts(&o, "{");
        if (id != NULL) {
            nr_buf_puts(&o, "\"id\":");
            nr_json_write(&o, id);
            nr_buf_putc(&o, ',');
        }
        nr_buf_puts(&o, "\"inputs\":");
        nr_buf_append(&o, ins.data, ins.len);
        nr_buf_puts(&o, "]");
        if (params.len > 1) {
            nr_buf_puts(&o, ",\"parameters\":");
            nr_buf_append(&o, params.data, params.len);
            nr_buf_putc(&o, '}');
        }
        nr_buf_putc(&o, '}');
        *out_len = o.len;
        *out = nr_buf_steal(&o, NULL);
    }
    nr_buf_free(&ins);
    nr_buf_free(&params);
    nr_buf_free(&o);
    nr_json_free(doc);
    return st;
}

/* ---- response ------------------------------------------------------------------- */

typedef struct {
    const char *key;
    size_t off, len; /* the value's JSON in the values buffer */
} entry_t;

static int by_key(const void *a, const void *b)
{
    return strcmp(((const entry_t *)a)->key, ((const entry_t *)b)->key);
}

/* The answer's object from the request's outputs as they are now. */
static nr_status_t *render(nr_http_infer_t *inf, nr_buf_t *out)
{
    const nr_infer_out_t *outs;
    size_t n;
    nr_status_t *st = nr_infer_outputs(&inf->base, &outs, &n);
    if (st != NULL)
        return st;
    const nr_model_t *m = inf->base.model;
    const nr_req_t *req = inf->base.req;
    entry_t *e = nr_calloc(n + 3, sizeof(*e));
    nr_buf_t vals;
    nr_buf_init(&vals);
    size_t k = 0;
    const char *fixed[][2] = {{"model_name", m->name}, {"model_version", m->version_str},
                              {"id", req->id}};
    for (size_t i = 0; i < 3; i++) {
        if (fixed[i][1] == NULL || fixed[i][1][0] == '\0')
            continue;
        e[k] = (entry_t){fixed[i][0], vals.len, 0};
        nr_buf_json_str(&vals, fixed[i][1], strlen(fixed[i][1]));
        e[k].len = vals.len - e[k].off;
        k++;
    }
    for (size_t i = 0; i < n && st == NULL; i++) {
        const nr_tensor_t *t = outs[i].t;
        size_t at = vals.len;
        st = nr_http_put_data(&vals, t, outs[i].name);
        if (st != NULL)
            break;
        uint64_t count = 0;
        e[k] = (entry_t){outs[i].name, at, vals.len - at};
        if (nr_shape_count(t->dims, t->ndim, &count) && count == 1) { /* a bare value */
            e[k].off++;
            e[k].len -= 2;
        }
        k++;
    }
    if (st == NULL) {
        qsort(e, k, sizeof(*e), by_key);
        nr_buf_putc(out, '{');
        for (size_t i = 0; i < k; i++) {
            if (i)
                nr_buf_putc(out, ',');
            nr_buf_json_str(out, e[i].key, strlen(e[i].key));
            nr_buf_putc(out, ':');
            nr_buf_append(out, vals.data + e[i].off, e[i].len);
        }
        nr_buf_putc(out, '}');
    }
    nr_buf_free(&vals);
    free(e);
    return st;
}

void nr_http_generate_response(nr_req_t *req, const nr_status_t *err, unsigned flags, void *arg)
{
    nr_http_infer_t *inf = arg;
    (void)req;
    if (flags & NR_RESPONSE_NONE)
        return; /* the end alone */
    if (inf->gen_responses++ > 0)
        return; /* one too many: the answer is the error below */
    if (err != NULL) {
        inf->gen_failed = nr_status_new(err->code, "%s", err->msg);
        return;
    }
    nr_status_t *st = render(inf, &inf->gen);
    if (st != NULL)
        inf->gen_failed = st;
}

nr_status_t *nr_http_generate_encode(nr_http_infer_t *inf, nr_http_resp_t *r)
{
    nr_buf_t *out = &r->body;
    nr_buf_reset(out);
    if (inf->base.model->cfg->decoupled) {
        nr_status_t *st = NULL;
        if (inf->base.req->status != NULL)
            st = nr_status_new(inf->base.req->status->code, "%s", inf->base.req->status->msg);
        else if (inf->gen_responses != 1)
            st = nr_status_new(NR_INVALID_ARG, "generate expects model to produce exactly 1 "
                               "response, use generate stream for model that generates "
                               "various number of responses");
        else if (inf->gen_failed != NULL)
            st = nr_status_new(inf->gen_failed->code, "%s", inf->gen_failed->msg);
        if (st != NULL)
            return st;
        nr_buf_append(out, inf->gen.data, inf->gen.len);
    } else {
        nr_status_t *st = render(inf, out);
        if (st != NULL)
            return st;
    }
    nr_http_json_ok(r);
    return NULL;
}

/* ---- generate_stream: server-sent events ---------------------------------------------- */

static void event(nr_http_stream_t *sse, const nr_buf_t *json)
{
    nr_buf_t e;
    nr_buf_init(&e);
    nr_buf_puts(&e, "data: ");
    nr_buf_append(&e, json->data, json->len);
    nr_buf_puts(&e, "\n\n");
    nr_http_stream_write(sse, e.data, e.len);
    nr_buf_free(&e);
}

static void error_event(nr_http_stream_t *sse, const nr_status_t *err)
{
    nr_buf_t j;
    nr_buf_init(&j);
    nr_buf_puts(&j, "{\"error\":");
    const char *msg = nr_status_msg(err);
    nr_buf_json_str(&j, msg, strlen(msg));
    nr_buf_putc(&j, '}');
    event(sse, &j);
    nr_buf_free(&j);
}

/* One response as an event: its outputs, or its error. */
static void response_event(nr_http_infer_t *inf, const nr_status_t *err)
{
    if (err != NULL) {
        error_event(inf->sse, err);
        return;
    }
    nr_buf_t j;
    nr_buf_init(&j);
    nr_status_t *st = render(inf, &j);
    if (st != NULL)
        error_event(inf->sse, st);
    else
        event(inf->sse, &j);
    nr_status_free(st);
    nr_buf_free(&j);
}

void nr_http_generate_sse_response(nr_req_t *req, const nr_status_t *err, unsigned flags,
                                   void *arg)
{
    (void)req;
    if (!(flags & NR_RESPONSE_NONE) || err != NULL)
        response_event(arg, err);
}

void nr_http_generate_sse_done(nr_req_t *req, void *arg)
{
    nr_http_infer_t *inf = arg;
    if (req->status != NULL)
        error_event(inf->sse, req->status);
    else if (!inf->base.model->cfg->decoupled) /* its one answer */
        response_event(inf, NULL);
    nr_http_stream_end(inf->sse);
    inf->sse = NULL;
    nr_http_infer_free(inf); /* done is the last the core does with the request */
}
