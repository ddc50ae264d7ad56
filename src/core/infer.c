/* infer.c - one protocol-neutral inference request (infer.h). */
#include "infer.h"

#include "../common/alloc.h"
#include "classify.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nr_infer_init(nr_infer_t *inf, nr_server_t *srv, nr_model_t *m, void *frontend)
{
    size_t n_out = m->cfg->n_output ? m->cfg->n_output : 1;
    inf->srv = srv;
    inf->model = m;
    inf->req = nr_req_new(m);
    inf->req->frontend = frontend;
    /* one allocation: class_n[n_out], then listed[n_out] */
    inf->class_n = nr_calloc(n_out, sizeof(uint64_t) + sizeof(bool));
    inf->listed = (bool *)(inf->class_n + n_out);
}

void nr_infer_release(nr_infer_t *inf)
{
    if (inf->req != NULL)
        nr_req_free(inf->req); /* drops the output holds */
    inf->req = NULL;
    for (size_t i = 0; i < inf->n_owned; i++)
        free(inf->owned[i]);
    free(inf->owned);
    if (inf->shm_out != NULL)
        for (size_t i = 0; i < inf->model->cfg->n_output; i++)
            nr_shm_put(inf->shm_out[i].region);
    free(inf->shm_out);
    for (size_t i = 0; i < inf->n_shm_in; i++)
        nr_shm_put(inf->shm_in[i]);
    free(inf->shm_in);
    free(inf->class_n); /* and listed */
    free(inf->outs);
    free(inf->class_t);
    nr_model_release(inf->model); /* last: the request's outputs came from it */
    memset(inf, 0, sizeof(*inf));
}

char *nr_infer_keep(nr_infer_t *inf, char *buf)
{
    inf->owned = nr_grow(inf->owned, inf->n_owned, sizeof(char *));
    inf->owned[inf->n_owned++] = buf;
    return buf;
}

/* ---- parameters ----------------------------------------------------------------- */

static uint64_t uint_value(const nr_param_t *p)
{
    return p->type == NR_PARAM_UINT64 ? p->v.u : p->v.i > 0 ? (uint64_t)p->v.i : 0;
}

void nr_infer_param(nr_infer_t *inf, const nr_param_t *p)
{
    nr_req_t *req = inf->req;
    if (nr_param_is(p, "priority")) {
        uint64_t pr = uint_value(p);
        req->priority = pr > UINT32_MAX ? UINT32_MAX : (uint32_t)pr;
    } else if (nr_param_is(p, "timeout")) {
        req->timeout_us = uint_value(p);
    } else if (nr_param_is(p, "triton_enable_empty_final_response")) {
        inf->empty_final = p->type == NR_PARAM_BOOL && p->v.b;
    } else if (!nr_param_is(p, "sequence_id") && !nr_param_is(p, "sequence_start") &&
               !nr_param_is(p, "sequence_end")) { /* a custom key: the backend's */
        char num[32];
        nr_buf_t str;
        const char *v = num;
        int n = 0;
        nr_buf_init(&str);
        switch (p->type) {
        case NR_PARAM_BOOL: v = p->v.b ? "true" : "false"; n = (int)strlen(v); break;
        case NR_PARAM_INT64: n = snprintf(num, sizeof(num), "%" PRId64, p->v.i); break;
        case NR_PARAM_UINT64: n = snprintf(num, sizeof(num), "%" PRIu64, p->v.u); break;
        case NR_PARAM_DOUBLE: /* JSON has no NaN nor infinities */
            n = isfinite(p->v.d) ? snprintf(num, sizeof(num), "%.17g", p->v.d) : 0;
            if (n == 0)
                v = "null", n = 4;
            break;
        case NR_PARAM_STRING:
            nr_buf_json_str(&str, p->v.s.p, p->v.s.n);
            v = str.data, n = (int)str.len;
            break;
        default: v = "null", n = 4; break;
        }
        nr_req_add_param(req, p->key, p->key_len, v, (size_t)n);
        nr_buf_free(&str);
    }
    /* sequence_id, sequence_start, sequence_end: nereid has no sequence batcher, and Triton
     * ignores them too for a model without one */
}

void nr_infer_header(nr_infer_t *inf, const nr_header_fwd_t *fwd, const char *name,
                     size_t name_len, const char *value, size_t value_len)
{
    if (fwd == NULL || !nr_header_fwd_match(fwd, name, name_len))
        return;
    nr_buf_t str;
    nr_buf_init(&str);
    nr_buf_json_str(&str, value, value_len);
    nr_req_add_param(inf->req, name, name_len, str.data, str.len);
    nr_buf_free(&str);
}

void nr_infer_traceparent(nr_infer_t *inf, const char *value, size_t len)
{
    if (len != sizeof(inf->traceparent) - 1)
        return;
    memcpy(inf->traceparent, value, len);
    inf->traceparent[len] = '\0';
}

/* ---- inputs and outputs ------------------------------------------------------------ */

static nr_status_t *shm_lookup(nr_infer_t *inf, const char *region, size_t len, uint64_t offset,
                               uint64_t byte_size, nr_shm_region_t **ref, void **addr)
{
    if (inf->srv == NULL) /* parsed without a server */
        return nr_status_new(NR_NOT_FOUND, "Unable to find shared memory region: '%.*s'",
                             (int)len, region);
    return nr_shm_get(nr_server_shm(inf->srv), region, len, offset, byte_size, ref, addr);
}

static const char empty_data[1];

nr_status_t *nr_infer_shm_input(nr_infer_t *inf, const char *region, size_t len,
                                uint64_t offset, uint64_t byte_size, const void **data,
                                size_t *size)
{
    nr_shm_region_t *ref;
    void *addr;
    nr_status_t *st = shm_lookup(inf, region, len, offset, byte_size, &ref, &addr);
    if (st != NULL)
        return st;
    inf->shm_in = nr_grow(inf->shm_in, inf->n_shm_in, sizeof(*inf->shm_in));
    inf->shm_in[inf->n_shm_in++] = ref;
    *data = byte_size > 0 ? addr : empty_data;
    *size = (size_t)byte_size;
    return NULL;
}

nr_status_t *nr_infer_output(nr_infer_t *inf, const char *name, size_t len, int *index)
{
    *index = -1;
    nr_status_t *st = nr_req_add_output(inf->req, name, len);
    if (st != NULL)
        return st;
    int idx = nr_model_output_index(inf->model, name, len);
    if (idx >= 0 && !inf->listed[idx]) {
        inf->listed[idx] = true;
        *index = idx;
    }
    return NULL;
}

void nr_infer_output_classify(nr_infer_t *inf, int index, uint64_t k)
{
    if (index >= 0)
        inf->class_n[index] = k;
}

nr_status_t *nr_infer_output_shm(nr_infer_t *inf, int index, const char *region, size_t len,
                                 uint64_t offset, uint64_t byte_size)
{
    nr_infer_shm_out_t so = {NULL, NULL, byte_size};
    nr_status_t *st = shm_lookup(inf, region, len, offset, byte_size, &so.region, &so.addr);
    if (st != NULL)
        return st;
    if (index < 0) {
        nr_shm_put(so.region);
        return NULL;
    }
    if (inf->shm_out == NULL)
        inf->shm_out = nr_calloc(inf->model->cfg->n_output, sizeof(*inf->shm_out));
    nr_shm_put(inf->shm_out[index].region);
    inf->shm_out[index] = so;
    return NULL;
}

nr_status_t *nr_infer_submit(nr_infer_t *inf, nr_req_done_fn done, void *arg)
{
    inf->req->done = done;
    inf->req->done_arg = arg;
    if (inf->srv != NULL)
        nr_server_touch(inf->srv);
    if (nr_trace_armed() && inf->req->trace == NULL) {
        nr_trace_t *t = nr_trace_sample(inf->model->name,
                                         inf->traceparent[0] ? inf->traceparent : NULL);
        if (t != NULL)
            nr_trace_recv(t, inf->proto, inf->t_recv_ns[0], inf->t_recv_ns[1]);
        inf->req->trace = t;
    }
    return nr_model_submit(inf->model, inf->req);
}

/* ---- the result ------------------------------------------------------------------- */

/* Order of req->outputs[] entries in the reply: by output name. Validation
 * already lists want[] so (distinct config indices); placing each entry at its
 * output's rank keeps this O(outputs) whatever order it gets. An index out of
 * range (the caller reports it) or listed twice goes last. */
static void output_order(const nr_infer_t *inf, size_t *ord)
{
    const nr_req_t *req = inf->req;
    size_t n_cfg = inf->model->cfg->n_output;
    const uint32_t *by_name = inf->model->outputs_by_name;
    size_t small[2 * 64];
    size_t *rank = n_cfg <= 64 ? small : nr_malloc(2 * n_cfg * sizeof(size_t));
    size_t *at = rank + n_cfg; /* by rank: the want[] entry naming that output, or SIZE_MAX */
    for (size_t j = 0; j < n_cfg; j++) {
        rank[j] = j;
        at[j] = SIZE_MAX;
    }
    if (by_name != NULL)
        for (size_t j = 0; j < n_cfg; j++)
            if (by_name[j] < n_cfg)
                rank[by_name[j]] = j;
    for (size_t i = 0; i < req->n_want; i++)
        if (req->want[i] < n_cfg)
            at[rank[req->want[i]]] = i;
    size_t n = 0;
    for (size_t r = 0; r < n_cfg; r++)
        if (at[r] != SIZE_MAX)
            ord[n++] = at[r];
    for (size_t i = 0; i < req->n_want; i++)
        if (req->want[i] >= n_cfg || at[rank[req->want[i]]] != i)
            ord[n++] = i;
    if (rank != small)
        free(rank);
}

/* Copies an output into the region the request named for it. */
static nr_status_t *write_shm(const nr_infer_shm_out_t *so, const nr_tensor_t *t,
                              const char *name)
{
    if (t->size > so->byte_size)
        return nr_status_new(NR_INTERNAL,
                             "shared memory size specified with the request for output '%s' "
                             "(%llu bytes) should be at least %zu bytes to hold the results",
                             name, (unsigned long long)so->byte_size, t->size);
    if (t->size > 0)
        memcpy(so->addr, t->data, t->size);
    return nr_shm_check(so->region);
}

nr_status_t *nr_infer_outputs(nr_infer_t *inf, const nr_infer_out_t **outs, size_t *n_outs)
{
    *outs = NULL;
    *n_outs = 0;
    nr_req_t *req = inf->req;
    if (req->status != NULL)
        return nr_status_new(req->status->code, "%s", nr_status_msg(req->status));
    for (size_t i = 0; i < inf->n_shm_in; i++) { /* inputs read from a truncated object */
        nr_status_t *st = nr_shm_check(inf->shm_in[i]);
        if (st != NULL)
            return st;
    }
    const nr_model_config_t *cfg = inf->model->cfg;
    size_t n = req->n_want;
    free(inf->outs);
    inf->outs = nr_calloc(n ? n : 1, sizeof(*inf->outs));
    inf->n_outs = 0;
    size_t ord_small[16];
    size_t *ord = n <= 16 ? ord_small : nr_malloc(n * sizeof(size_t));
    output_order(inf, ord);
    nr_status_t *st = NULL;
    size_t m = 0; /* outputs in the reply */
    for (size_t j = 0; j < n && st == NULL; j++) {
        size_t i = ord[j];
        uint32_t c = req->want[i];
        if (c >= cfg->n_output) {
            st = nr_status_new(NR_INTERNAL, "output index %u out of range", c);
            break;
        }
        if (req->outputs[i].name == NULL) /* the backend did not return it (backend.h) */
            continue;
        size_t k = m++;
        nr_infer_out_t *o = &inf->outs[k];
        o->index = c;
        o->name = cfg->output[c].name;
        o->t = &req->outputs[i];
        if (inf->class_n[c] > 0) {
            if (inf->class_t == NULL) /* [n_want]: only a classifying request has them */
                inf->class_t = nr_calloc(n, sizeof(*inf->class_t));
            char *buf = NULL;
            st = nr_classify(o->t, cfg->max_batch_size > 0, inf->class_n[c],
                             nr_model_labels(inf->model, c), &inf->class_t[k], &buf);
            if (buf != NULL)
                nr_infer_keep(inf, buf);
            if (st != NULL)
                break;
            o->t = &inf->class_t[k];
        }
        const nr_infer_shm_out_t *so = inf->shm_out ? &inf->shm_out[c] : NULL;
        if (so != NULL && so->region != NULL) {
            if ((st = write_shm(so, o->t, o->name)) != NULL)
                break;
            o->in_shm = true;
        }
    }
    if (ord != ord_small)
        free(ord);
    if (st != NULL)
        return st;
    inf->n_outs = m;
    *outs = inf->outs;
    *n_outs = m;
    return NULL;
}

