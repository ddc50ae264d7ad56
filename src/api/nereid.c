/* nereid.c - the public C API (include/nereid.h) over the core, the way the frontends use it:
 * options through api/options.h, a server brought up and down by api/boot.h, requests as the
 * core's nr_req_t submitted to nr_model_submit, answers from core/kserve.h. An error is the
 * core's nr_status_t itself (the public codes are the core's, in its order).
 */
#include "../../include/nereid.h"

#include "../common/alloc.h"
#include "../core/kserve.h"
#include "boot.h"
#include "options.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(NEREID_ERROR_CANCELLED == (int)NR_CANCELLED &&
                   NEREID_ERROR_INVALID_ARG == (int)NR_INVALID_ARG,
               "the public error codes are the core's");

#define ERR(st) ((nereid_error_t *)(st))
#define ST(e) ((const nr_status_t *)(e))

/* ---- errors ---- */

nereid_error_code_t nereid_error_code(const nereid_error_t *e)
{
    return (nereid_error_code_t)ST(e)->code;
}

const char *nereid_error_code_name(const nereid_error_t *e)
{
    return nr_status_code_name(ST(e)->code);
}

const char *nereid_error_message(const nereid_error_t *e)
{
    return ST(e)->msg;
}

void nereid_error_delete(nereid_error_t *e)
{
    nr_status_free((nr_status_t *)e);
}

static nereid_error_t *invalid(const char *fmt, const char *arg)
{
    return ERR(nr_status_new(NR_INVALID_ARG, fmt, arg));
}

/* ---- options ---- */

/* Flags that act on the process when they are set (api/options.c): applied once, by
 * nereid_options_set, never replayed by nereid_server_new. */
static bool process_wide(const char *flag)
{
    static const char *const f[] = {"host-policy", "backend-directory", "log-format",
                                    "cache-directory"};
    for (size_t i = 0; i < sizeof(f) / sizeof(f[0]); i++)
        if (!strcmp(flag, f[i]))
            return true;
    return false;
}

struct nereid_options {
    nr_opts_t o;
    char **flags, **values; /* what was set, in order (owned copies), to replay */
    size_t n;
};

static void set_in_process_defaults(nr_opts_t *o)
{
    nr_opts_init(o);
    o->allow_http = o->allow_grpc = o->allow_metrics = false;
}

nereid_error_t *nereid_options_new(nereid_options_t **out)
{
    nereid_options_t *op = nr_calloc(1, sizeof(*op));
    set_in_process_defaults(&op->o);
    *out = op;
    return NULL;
}

/* One flag on o: the command line's rules, with its errors as the API reports them. */
static nr_status_t *apply(nr_opts_t *o, const char *flag, const char *value)
{
    size_t n;
    const nr_cli_opt_t *t = nr_opts_flags(&n);
    const nr_cli_opt_t *f = nr_cli_find(t, n, flag, strlen(flag));
    if (f == NULL)
        return nr_status_new(NR_NOT_FOUND, "unrecognized option '--%s'", flag);
    if (!strcmp(flag, "help"))
        return nr_status_new(NR_INVALID_ARG, "--help is for the command line");
    if (f->kind == NR_CLI_FLAG && value != NULL)
        return nr_status_new(NR_INVALID_ARG, "option '--%s' doesn't allow an argument", flag);
    if (f->kind != NR_CLI_FLAG && value == NULL)
        return nr_status_new(NR_INVALID_ARG, "option '--%s' requires an argument", flag);
    nr_status_t *st = nr_opts_set(o, flag, strlen(flag), value);
    if (st != NULL && st->code != NR_INVALID_ARG && st->code != NR_UNSUPPORTED) {
        nr_status_t *w = nr_status_new(NR_INVALID_ARG, "%s", st->msg); /* a bad value */
        nr_status_free(st);
        st = w;
    }
    return st;
}

nereid_error_t *nereid_options_set(nereid_options_t *op, const char *flag, const char *value)
{
    if (op == NULL || flag == NULL)
        return invalid("%s", "options and flag must be given");
    char *v = value ? nr_strdup(value) : NULL;
    nr_status_t *st = apply(&op->o, flag, v);
    if (st != NULL) {
        free(v);
        return ERR(st);
    }
    op->flags = nr_grow(op->flags, op->n, sizeof(char *));
    op->values = nr_grow(op->values, op->n, sizeof(char *));
    op->flags[op->n] = nr_strdup(flag);
    op->values[op->n++] = v;
    return NULL;
}

void nereid_options_delete(nereid_options_t *op)
{
    if (op == NULL)
        return;
    for (size_t i = 0; i < op->n; i++) {
        free(op->flags[i]);
        free(op->values[i]);
    }
    free(op->flags);
    free(op->values);
    nr_opts_free(&op->o);
    free(op);
}

/* ---- the server ---- */

struct nereid_server {
    nr_opts_t o;    /* its own, replayed from the caller's options */
    char **values;  /* the copies o points into */
    size_t n_values;
    nr_boot_t *boot;
};

static void server_free(nereid_server_t *s)
{
    for (size_t i = 0; i < s->n_values; i++)
        free(s->values[i]);
    free(s->values);
    nr_opts_free(&s->o);
    free(s);
}

nereid_error_t *nereid_server_new(const nereid_options_t *op, nereid_server_t **out)
{
    if (op == NULL || out == NULL)
        return invalid("%s", "options and server must be given");
    nereid_server_t *s = nr_calloc(1, sizeof(*s));
    set_in_process_defaults(&s->o);
    s->values = nr_calloc(op->n + 1, sizeof(char *));
    nr_status_t *st = NULL;
    for (size_t i = 0; i < op->n && st == NULL; i++) {
        if (process_wide(op->flags[i]))
            continue;
        char *v = op->values[i] ? nr_strdup(op->values[i]) : NULL;
        s->values[s->n_values++] = v;
        st = apply(&s->o, op->flags[i], v);
    }
    if (st == NULL)
        st = nr_opts_finish(&s->o);
    if (st == NULL)
        st = nr_opts_apply_log(&s->o); /* process-wide, as on the command line */
    bool frontend_failed;
    if (st == NULL)
        st = nr_boot_start(&s->o, &frontend_failed, &s->boot);
    if (st != NULL) {
        server_free(s);
        return ERR(st);
    }
    *out = s;
    return NULL;
}

void nereid_server_delete(nereid_server_t *s)
{
    if (s == NULL)
        return;
    nr_boot_stop(s->boot);
    server_free(s);
}

static nr_server_t *core(nereid_server_t *s)
{
    return nr_boot_core(s->boot);
}

bool nereid_server_is_live(nereid_server_t *s)
{
    return nr_server_live(core(s));
}

bool nereid_server_is_ready(nereid_server_t *s)
{
    return nr_server_ready(core(s));
}

bool nereid_model_is_ready(nereid_server_t *s, const char *model, int64_t version)
{
    return model != NULL && nr_kserve_model_ready(core(s), model, strlen(model), version);
}

nereid_error_t *nereid_server_load_model(nereid_server_t *s, const char *model)
{
    if (model == NULL)
        return invalid("%s", "a model name must be given");
    return ERR(nr_kserve_repo_load(core(s), model, strlen(model), NULL));
}

static nereid_error_t *unload(nereid_server_t *s, const char *model, bool dependents)
{
    if (model == NULL)
        return invalid("%s", "a model name must be given");
    return ERR(nr_kserve_repo_unload(core(s), model, strlen(model), dependents));
}

nereid_error_t *nereid_server_unload_model(nereid_server_t *s, const char *model)
{
    return unload(s, model, false);
}

nereid_error_t *nereid_server_unload_model_and_dependents(nereid_server_t *s, const char *model)
{
    return unload(s, model, true);
}

typedef struct {
    nereid_model_fn fn;
    void *arg;
} index_cb_t;

static void on_index(const nr_index_entry_t *e, void *arg)
{
    const index_cb_t *cb = arg;
    cb->fn(cb->arg, e->name, e->version, e->state, e->reason);
}

void nereid_server_models(nereid_server_t *s, nereid_model_fn fn, void *arg)
{
    index_cb_t cb = {fn, arg};
    nr_kserve_repo_index(core(s), false, on_index, &cb);
}

nereid_error_t *nereid_model_metadata(nereid_server_t *s, const char *model, int64_t version,
                                      char **platform, nereid_tensor_fn fn, void *arg)
{
    if (model == NULL)
        return invalid("%s", "a model name must be given");
    nr_model_meta_t meta;
    nr_status_t *st = nr_kserve_model_metadata(core(s), model, strlen(model), version, &meta);
    if (st != NULL)
        return ERR(st);
    const nr_model_config_t *cfg = meta.model->cfg;
    if (platform != NULL)
        *platform = nr_strdup(meta.platform ? meta.platform : "");
    int64_t shape[NR_MAX_DIMS + 1];
    for (size_t i = 0; fn != NULL && i < cfg->n_input; i++) {
        size_t n = nr_kserve_meta_shape(cfg, &cfg->input[i].dims, shape);
        fn(arg, true, cfg->input[i].name, nr_dtype_kserve_name(cfg->input[i].data_type), shape,
           n);
    }
    for (size_t i = 0; fn != NULL && i < cfg->n_output; i++) {
        size_t n = nr_kserve_meta_shape(cfg, &cfg->output[i].dims, shape);
        fn(arg, false, cfg->output[i].name, nr_dtype_kserve_name(cfg->output[i].data_type),
           shape, n);
    }
    nr_kserve_model_meta_free(&meta);
    return NULL;
}

nereid_error_t *nereid_model_config(nereid_server_t *s, const char *model, int64_t version,
                                    char **json)
{
    if (model == NULL || json == NULL)
        return invalid("%s", "a model name and a result must be given");
    nr_model_t *m;
    nr_status_t *st = nr_kserve_model(core(s), model, strlen(model), version, &m);
    if (st != NULL)
        return ERR(st);
    *json = nr_cfg_to_json(m->cfg, NULL);
    nr_model_release(m);
    return NULL;
}

void nereid_string_delete(char *str)
{
    free(str);
}

typedef struct {
    nereid_statistics_t *out;
    int64_t version; /* of what *out holds; -1: nothing yet */
} stats_cb_t;

static void on_stats(const nr_model_t *m, const nr_stats_snap_t *sn, void *arg)
{
    stats_cb_t *cb = arg;
    if (m->version < cb->version) /* version < 0 asked: the highest READY one */
        return;
    cb->version = m->version;
    *cb->out = (nereid_statistics_t){
        .inference_count = sn->inference_count,
        .execution_count = sn->execution_count,
        .success_count = sn->success.count,
        .success_ns = sn->success.ns,
        .fail_count = sn->fail.count,
        .fail_ns = sn->fail.ns,
        .queue_count = sn->queue.count,
        .queue_ns = sn->queue.ns,
        .compute_input_ns = sn->compute_input.ns,
        .compute_infer_ns = sn->compute_infer.ns,
        .compute_output_ns = sn->compute_output.ns,
        .last_inference_ms = sn->last_inference_ms,
    };
}

nereid_error_t *nereid_model_statistics(nereid_server_t *s, const char *model, int64_t version,
                                        nereid_statistics_t *out)
{
    if (model == NULL || out == NULL)
        return invalid("%s", "a model name and a result must be given");
    stats_cb_t cb = {out, -1};
    return ERR(nr_kserve_stats(core(s), model, strlen(model), version, on_stats, &cb));
}

/* ---- inference ---- */

/* A request, and from its completion on the response: the same object. */
struct nereid_request {
    nr_model_t *model; /* a reference, released with the response */
    nr_req_t *req;
    char **names;      /* the input names (the request borrows them) */
    size_t n_names;
    nereid_alloc_fn alloc;
    void *alloc_arg;
    nereid_complete_fn complete;
    void *complete_arg;
    atomic_bool cancelled; /* nereid_request_cancel */
};

nereid_error_t *nereid_request_new(nereid_server_t *s, const char *model, int64_t version,
                                   nereid_request_t **out)
{
    if (model == NULL || out == NULL)
        return invalid("%s", "a model name and a result must be given");
    nr_model_t *m;
    nr_status_t *st = nr_kserve_model(core(s), model, strlen(model), version, &m);
    if (st != NULL)
        return ERR(st);
    nereid_request_t *r = nr_calloc(1, sizeof(*r));
    r->model = m;
    r->req = nr_req_new(m);
    r->req->frontend = r;
    r->req->cancelled = &r->cancelled;
    *out = r;
    return NULL;
}

nereid_error_t *nereid_request_set_id(nereid_request_t *r, const char *id)
{
    return ERR(nr_req_set_id(r->req, id ? id : "", id ? strlen(id) : 0));
}

nereid_error_t *nereid_request_add_input(nereid_request_t *r, const char *name,
                                         const char *datatype, const int64_t *shape,
                                         size_t ndim, const void *data, size_t byte_size)
{
    if (name == NULL || datatype == NULL || (shape == NULL && ndim > 0))
        return invalid("%s", "an input needs a name, a datatype and a shape");
    nr_dtype_t dt = nr_dtype_from_kserve(datatype, strlen(datatype));
    if (dt == NR_TYPE_INVALID)
        return ERR(nr_status_new(NR_INVALID_ARG, "invalid datatype '%s' for input '%s'",
                                 datatype, name));
    char *copy = nr_strdup(name);
    nr_status_t *st =
        nr_req_add_input(r->req, copy, strlen(copy), dt, shape, ndim, data, byte_size);
    if (st != NULL) {
        free(copy);
        return ERR(st);
    }
    r->names = nr_grow(r->names, r->n_names, sizeof(char *));
    r->names[r->n_names++] = copy;
    return NULL;
}

nereid_error_t *nereid_request_add_output(nereid_request_t *r, const char *name)
{
    if (name == NULL)
        return invalid("%s", "an output needs a name");
    return ERR(nr_req_add_output(r->req, name, strlen(name)));
}

void nereid_request_set_allocator(nereid_request_t *r, nereid_alloc_fn fn, void *arg)
{
    r->alloc = fn;
    r->alloc_arg = arg;
}

void nereid_request_delete(nereid_request_t *r)
{
    if (r == NULL)
        return;
    nr_req_free(r->req); /* releases the output holds, before the model they came from */
    for (size_t i = 0; i < r->n_names; i++)
        free(r->names[i]);
    free(r->names);
    nr_model_release(r->model);
    free(r);
}

/* The request is done (on the thread that finished it): outputs copied where the caller's
 * allocator says, then the caller's callback. */
static void on_done(nr_req_t *req, void *arg)
{
    nereid_request_t *r = arg;
    for (size_t k = 0; r->alloc != NULL && req->status == NULL && k < req->n_want; k++) {
        nr_tensor_t *t = &req->outputs[k];
        if (t->name == NULL) /* not returned by the backend */
            continue;
        void *buf = r->alloc(r->alloc_arg, t->name, t->size);
        if (buf == NULL)
            continue;
        if (t->size > 0)
            memcpy(buf, t->data, t->size);
        t->data = buf;
        nr_hold_unref(t->hold); /* the backend's buffer is no longer needed */
        t->hold = NULL;
    }
    r->complete(r->complete_arg, (nereid_response_t *)r);
}

nereid_error_t *nereid_infer_async(nereid_request_t *r, nereid_complete_fn complete, void *arg)
{
    if (r == NULL || complete == NULL)
        return invalid("%s", "a request and a completion callback must be given");
    r->complete = complete;
    r->complete_arg = arg;
    r->req->done = on_done;
    r->req->done_arg = r;
    return ERR(nr_model_submit(r->model, r->req));
}

void nereid_request_cancel(nereid_request_t *r)
{
    atomic_store(&r->cancelled, true);
}

const nereid_error_t *nereid_response_error(const nereid_response_t *resp)
{
    return (const nereid_error_t *)((const nereid_request_t *)resp)->req->status;
}

const char *nereid_response_id(const nereid_response_t *resp)
{
    const char *id = ((const nereid_request_t *)resp)->req->id;
    return id ? id : "";
}

size_t nereid_response_output_count(const nereid_response_t *resp)
{
    const nr_req_t *req = ((const nereid_request_t *)resp)->req;
    return req->status == NULL ? req->n_want : 0;
}

nereid_error_t *nereid_response_output(const nereid_response_t *resp, size_t i,
                                       const char **name, const char **datatype,
                                       const int64_t **shape, size_t *ndim, const void **data,
                                       size_t *byte_size)
{
    const nr_req_t *req = ((const nereid_request_t *)resp)->req;
    if (req->status != NULL || i >= req->n_want)
        return ERR(nr_status_new(NR_INVALID_ARG, "no output %zu in the response", i));
    const nr_tensor_t *t = &req->outputs[i];
    if (name)
        *name = t->name;
    if (datatype)
        *datatype = nr_dtype_kserve_name(t->dtype);
    if (shape)
        *shape = t->dims;
    if (ndim)
        *ndim = t->ndim;
    if (data)
        *data = t->data;
    if (byte_size)
        *byte_size = t->size;
    return NULL;
}

void nereid_response_delete(nereid_response_t *resp)
{
    nereid_request_delete((nereid_request_t *)resp);
}
