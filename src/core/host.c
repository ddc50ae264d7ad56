/* host.c - what the core does for backends (host.h).
 *
 * Requests to other models: the model is looked up as an ensemble step's is (a READY version,
 * a reference held until the answer), the request is an ordinary nr_req_t through
 * nr_model_submit, so the callee's own scheduler, batching and statistics apply, and the
 * answer is handed to the backend's callback and freed after it.
 *
 * Responses of decoupled models: handed to the request's frontend (req->on_response) as they
 * come; the request itself ends as every request does, when its batch has executed. */
#include "host.h"

#include "../common/alloc.h"
#include "custom_metrics.h"
#include "instance.h"
#include "repository.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    nr_model_t *m; /* the callee, a reference */
    nr_host_done_fn done;
    void (*on_response)(void *arg, const nr_status_t *err, const nr_tensor_t *outputs,
                        size_t n_outputs, unsigned flags);
    void *arg;
} call_t;

static void call_response(nr_req_t *req, const nr_status_t *err, unsigned flags, void *arg)
{
    call_t *c = arg;
    c->on_response(c->arg, err, err == NULL ? req->outputs : NULL, err == NULL ? req->n_want : 0,
                   flags);
}

static void call_done(nr_req_t *req, void *arg)
{
    call_t *c = arg;
    c->done(c->arg, req->status, req->status == NULL ? req->outputs : NULL,
            req->status == NULL ? req->n_want : 0);
    nr_req_free(req);
    nr_model_release(c->m);
    free(c);
}

/* The request an item belongs to (request.h: the item lives inside it). */
static nr_req_t *item_req(const nr_batch_item_t *item)
{
    return (nr_req_t *)((char *)item - offsetof(nr_req_t, item));
}

static nr_status_t *host_infer(void *ctx, const nr_host_req_t *r, nr_host_done_fn done, void *arg)
{
    nr_model_t *caller = ctx, *m = NULL;
    if (caller->lookup == NULL)
        return nr_status_new(NR_UNAVAILABLE, "model '%s' cannot reach other models", caller->name);
    nr_status_t *st = caller->lookup(caller->lookup_arg, r->model, r->version, &m);
    if (st != NULL)
        return st;
    if (m->cfg->decoupled && r->on_response == NULL) { /* Triton's Python backend's words */
        st = nr_status_new(NR_INTERNAL, "Model %s - Error when running inference: Model %s is "
                           "using the decoupled. The current BLS request call doesn't support "
                           "models using the decoupled transaction policy. Please use "
                           "'decoupled=True' argument to the 'exec' or 'async_exec' calls for "
                           "decoupled models.'", m->name, m->name);
        nr_model_release(m);
        return st;
    }
    nr_req_t *req = nr_req_new(m);
    if (r->parent != NULL && item_req(r->parent)->trace != NULL) /* a child of its trace */
        req->trace = nr_trace_child(item_req(r->parent)->trace);
    if (r->id != NULL && r->id[0] != '\0')
        st = nr_req_set_id(req, r->id, strlen(r->id));
    if (st == NULL && r->params_len > 0)
        nr_req_set_params(req, r->params, r->params_len);
    for (size_t i = 0; st == NULL && i < r->n_inputs; i++) {
        const nr_tensor_t *t = &r->inputs[i];
        st = nr_req_add_input(req, t->name, strlen(t->name), t->dtype, t->dims, t->ndim, t->data,
                              t->size);
    }
    for (size_t i = 0; st == NULL && i < r->n_outputs; i++)
        st = nr_req_add_output(req, r->outputs[i], strlen(r->outputs[i]));
    call_t *c = NULL;
    if (st == NULL) {
        c = nr_malloc(sizeof(*c));
        *c = (call_t){.m = m, .done = done, .on_response = r->on_response, .arg = arg};
        req->timeout_us = r->timeout_us;
        req->done = call_done;
        req->done_arg = c;
        if (r->on_response != NULL)
            req->on_response = call_response;
        st = nr_model_submit(m, req);
    }
    if (st != NULL) { /* nothing queued: done will not run */
        nr_req_free(req);
        nr_model_release(m);
        free(c);
    }
    return st;
}

static bool host_is_cancelled(void *ctx, const nr_batch_item_t *item)
{
    (void)ctx;
    const nr_req_t *req = item_req(item);
    return req->cancelled != NULL && atomic_load(req->cancelled);
}

static void host_respond(void *ctx, nr_batch_item_t *item, const nr_status_t *err,
                         unsigned flags)
{
    (void)ctx;
    nr_req_t *req = item_req(item);
    bool end = item->later && !req->final_sent && (flags & NR_RESPONSE_FINAL);
    nr_req_respond(req, err, flags);
    if (end)
        nr_inst_later_final(req);
}

/* ---- custom metrics: the core's registry (custom_metrics.h) behind opaque handles ---- */

static nr_status_t *family_new(const char *name, const char *help, int kind, void **out)
{
    return nr_cfamily_new(name, help, kind, (nr_cfamily_t **)out);
}

static void family_delete(void *f)
{
    nr_cfamily_delete(f);
}

static nr_status_t *metric_new(void *f, const char *const *labels, size_t n_labels,
                               const double *buckets, size_t n_buckets, bool has_buckets,
                               void **out)
{
    return nr_cmetric_new(f, labels, n_labels, buckets, n_buckets, has_buckets,
                          (nr_cmetric_t **)out);
}

static void metric_delete(void *m)
{
    nr_cmetric_delete(m);
}

static nr_status_t *metric_op(void *m, int op, double v, double *out)
{
    if (op < NR_CMETRIC_INCREMENT || op > NR_CMETRIC_VALUE)
        return nr_status_new(NR_INVALID_ARG, "unknown metric operation %d", op);
    return nr_cmetric_op(m, (nr_cmetric_op_t)op, v, out);
}

/* ---- model control: the repository's explicit load and unload ---- */

static nr_status_t *control_refused(const nr_model_t *caller)
{
    if (caller->repo == NULL)
        return nr_status_new(NR_UNAVAILABLE, "model '%s' cannot reach the model repository",
                             caller->name);
    nr_status_t *st = nr_repo_control_allowed(caller->repo);
    if (st != NULL)
        return st;
    if (nr_repo_controlling())
        return nr_status_new(NR_UNAVAILABLE, "a model cannot be loaded or unloaded while "
                             "another one loads (from a model's initialize)");
    return NULL;
}

static nr_status_t *host_load(void *ctx, const char *name, const char *config,
                              const nr_host_file_t *files, size_t n_files)
{
    nr_model_t *caller = ctx;
    nr_status_t *st = control_refused(caller);
    if (st != NULL)
        return st;
    nr_repo_file_t *rf = nr_calloc(n_files ? n_files : 1, sizeof(*rf));
    for (size_t i = 0; i < n_files; i++)
        rf[i] = (nr_repo_file_t){.path = files[i].path, .path_len = strlen(files[i].path),
                                 .data = files[i].data, .len = files[i].len};
    nr_repo_load_params_t p = {.config = config, .config_len = config ? strlen(config) : 0,
                               .files = rf, .n_files = n_files};
    st = nr_repo_load(caller->repo, name, strlen(name), &p);
    free(rf);
    return st;
}

static nr_status_t *host_unload(void *ctx, const char *name, bool dependents)
{
    nr_model_t *caller = ctx;
    nr_status_t *st = control_refused(caller);
    return st ? st : nr_repo_unload(caller->repo, name, strlen(name), dependents);
}

static bool host_ready(void *ctx, const char *name, int64_t version)
{
    nr_model_t *caller = ctx, *m = NULL;
    if (caller->lookup == NULL)
        return false;
    nr_status_t *st = caller->lookup(caller->lookup_arg, name, version, &m);
    bool ready = st == NULL;
    nr_status_free(st);
    if (m != NULL)
        nr_model_release(m);
    return ready;
}

void nr_host_bind(nr_model_t *m)
{
    m->host.infer = host_infer;
    m->host.respond = host_respond;
    m->host.is_cancelled = host_is_cancelled;
    m->host.metric_family_new = family_new;
    m->host.metric_family_delete = family_delete;
    m->host.metric_new = metric_new;
    m->host.metric_delete = metric_delete;
    m->host.metric_op = metric_op;
    m->host.load_model = host_load;
    m->host.unload_model = host_unload;
    m->host.model_ready = host_ready;
    m->host.ctx = m;
}
