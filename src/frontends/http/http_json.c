/* http_json.c - the JSON answers that are not inference: error bodies, server
 * and model metadata, model config, readiness, statistics, the repository
 * index and model control, in Triton's exact key order and formatting
 * (compact, no spaces). What they say comes from the core (kserve.h); this
 * file only writes it as JSON.
 *
 * These are control-plane answers (perf_analyzer asks each once per run), so
 * they are rendered on demand; only GET /v2 is rendered once at start.
 * Nothing here locks.
 */
#include "http_int.h"

#include <openssl/evp.h>
#include <pthread.h>

#include "../../common/alloc.h"
#include "../../common/limits.h"

#include <openssl/evp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- generic bodies ----------------------------------------------------- */

nr_param_t nr_http_param(const char *key, size_t key_len, const nr_jv_t *v)
{
    nr_param_t p = {.key = key, .key_len = key_len, .type = NR_PARAM_OTHER};
    switch (v->type) {
    case NR_JV_TRUE: case NR_JV_FALSE: p.type = NR_PARAM_BOOL; p.v.b = v->type == NR_JV_TRUE; break;
    case NR_JV_INT: p.type = NR_PARAM_INT64; p.v.i = v->u.i; break;
    case NR_JV_UINT: p.type = NR_PARAM_UINT64; p.v.u = (uint64_t)v->u.i; break;
    case NR_JV_REAL: p.type = NR_PARAM_DOUBLE; p.v.d = v->u.d; break;
    case NR_JV_STRING: p.type = NR_PARAM_STRING; p.v.s.p = v->u.str; p.v.s.n = v->n; break;
    default: break;
    }
    return p;
}

void nr_http_error_msg(nr_http_resp_t *r, int status, const char *msg)
{
    nr_buf_reset(&r->body);
    /* a message quoting a huge name escapes to up to 6 bytes a byte: when that
     * cannot be had, its first NR_MAX_ERROR_MSG bytes are sent */
    size_t len = strlen(msg);
    if (!nr_buf_try_reserve(&r->body, 6 * len + 16) && len > NR_MAX_ERROR_MSG)
        len = NR_MAX_ERROR_MSG;
    nr_buf_puts(&r->body, "{\"error\":");
    nr_buf_json_str(&r->body, msg, len);
    nr_buf_putc(&r->body, '}');
    r->status = status;
    r->content_type = "application/json";
}

void nr_http_error(nr_http_resp_t *r, nr_status_t *st)
{
    nr_http_error_msg(r, nr_status_http(st), nr_status_msg(st));
    nr_status_free(st);
}

void nr_http_json_ok(nr_http_resp_t *r)
{
    r->status = 200;
    r->content_type = "application/json";
}

void nr_http_empty(nr_http_resp_t *r, int status)
{
    nr_buf_reset(&r->body);
    r->status = status;
    r->content_type = "text/plain";
}

char *nr_http_server_meta_render(const nr_server_t *core, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    const char *id = nr_server_id(core), *ver = nr_server_version(core);
    nr_buf_puts(&b, "{\"name\":");
    nr_buf_json_str(&b, id, strlen(id));
    nr_buf_puts(&b, ",\"version\":");
    nr_buf_json_str(&b, ver, strlen(ver));
    nr_buf_puts(&b, ",\"extensions\":[");
    const char *const *ext;
    size_t n = nr_server_extensions(&ext);
    for (size_t i = 0; i < n; i++) {
        if (i)
            nr_buf_putc(&b, ',');
        nr_buf_json_str(&b, ext[i], strlen(ext[i]));
    }
    nr_buf_puts(&b, "]}");
    return nr_buf_steal(&b, len);
}

/* ---- model metadata / config / ready ------------------------------------ */

static void put_str(nr_buf_t *b, const char *s)
{
    nr_buf_json_str(b, s ? s : "", s ? strlen(s) : 0);
}

static void put_io(nr_buf_t *b, const nr_model_config_t *cfg, const char *name, nr_dtype_t dt,
                   const nr_cfg_dims_t *dims)
{
    nr_buf_puts(b, "{\"name\":");
    put_str(b, name);
    nr_buf_puts(b, ",\"datatype\":");
    put_str(b, nr_dtype_kserve_name(dt));
    nr_buf_puts(b, ",\"shape\":[");
    int64_t shape[NR_MAX_DIMS + 1];
    size_t n = nr_kserve_meta_shape(cfg, dims, shape);
    for (size_t i = 0; i < n; i++) {
        if (i)
            nr_buf_putc(b, ',');
        nr_buf_i64(b, shape[i]);
    }
    nr_buf_puts(b, "]}");
}

void nr_http_model_metadata(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_model_meta_t meta;
    nr_status_t *st = nr_kserve_model_metadata(s->core, q->model, q->model_len, q->version, &meta);
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    const nr_model_config_t *cfg = meta.model->cfg;
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_buf_puts(b, "{\"name\":");
    put_str(b, meta.model->name);
    nr_buf_puts(b, ",\"versions\":[");
    for (size_t i = 0; i < meta.n_versions; i++) {
        if (i)
            nr_buf_putc(b, ',');
        put_str(b, meta.versions[i]);
    }
    nr_buf_puts(b, "],\"platform\":");
    put_str(b, meta.platform);
    nr_buf_puts(b, ",\"inputs\":[");
    for (size_t i = 0; i < cfg->n_input; i++) {
        if (i)
            nr_buf_putc(b, ',');
        put_io(b, cfg, cfg->input[i].name, cfg->input[i].data_type, &cfg->input[i].dims);
    }
    nr_buf_puts(b, "],\"outputs\":[");
    for (size_t i = 0; i < cfg->n_output; i++) {
        if (i)
            nr_buf_putc(b, ',');
        put_io(b, cfg, cfg->output[i].name, cfg->output[i].data_type, &cfg->output[i].dims);
    }
    nr_buf_puts(b, "]}");
    nr_kserve_model_meta_free(&meta);
    nr_http_json_ok(r);
}

void nr_http_model_config(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_model_t *m = NULL;
    nr_status_t *st = nr_kserve_model(s->core, q->model, q->model_len, q->version, &m);
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    size_t len = 0;
    char *json = nr_cfg_to_json(m->cfg, &len);
    nr_model_release(m);
    nr_buf_reset(&r->body);
    nr_buf_append(&r->body, json, len);
    free(json);
    nr_http_json_ok(r);
}

void nr_http_model_ready(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    if (!nr_kserve_model_ready(s->core, q->model, q->model_len, q->version)) {
        nr_http_error_msg(r, 400, "Model version not ready");
        return;
    }
    nr_http_empty(r, 200);
}

/* ---- statistics ----------------------------------------------------------- */

static void put_dur(nr_buf_t *b, const char *key, const nr_dur_snap_t *d)
{
    nr_buf_putc(b, '"');
    nr_buf_puts(b, key);
    nr_buf_puts(b, "\":{\"count\":");
    nr_buf_u64(b, d->count);
    nr_buf_puts(b, ",\"ns\":");
    nr_buf_u64(b, d->ns);
    nr_buf_putc(b, '}');
}

/* One model version's statistics object (Triton's layout), after a comma
 * when it is not the first. */
static void put_stats(const nr_model_t *m, const nr_stats_snap_t *sn, void *arg)
{
    nr_buf_t *b = arg;
    if (b->data[b->len - 1] != '[')
        nr_buf_putc(b, ',');
    nr_buf_puts(b, "{\"name\":");
    put_str(b, m->name);
    nr_buf_puts(b, ",\"version\":");
    put_str(b, m->version_str);
    nr_buf_puts(b, ",\"last_inference\":");
    nr_buf_u64(b, sn->last_inference_ms);
    nr_buf_puts(b, ",\"inference_count\":");
    nr_buf_u64(b, sn->inference_count);
    nr_buf_puts(b, ",\"execution_count\":");
    nr_buf_u64(b, sn->execution_count);
    nr_buf_puts(b, ",\"inference_stats\":{");
    put_dur(b, "success", &sn->success);
    nr_buf_putc(b, ',');
    put_dur(b, "fail", &sn->fail);
    nr_buf_putc(b, ',');
    put_dur(b, "queue", &sn->queue);
    nr_buf_putc(b, ',');
    put_dur(b, "compute_input", &sn->compute_input);
    nr_buf_putc(b, ',');
    put_dur(b, "compute_infer", &sn->compute_infer);
    nr_buf_putc(b, ',');
    put_dur(b, "compute_output", &sn->compute_output);
    nr_buf_putc(b, ',');
    put_dur(b, "cache_hit", &sn->cache_hit);
    nr_buf_putc(b, ',');
    put_dur(b, "cache_miss", &sn->cache_miss);
    nr_buf_puts(b, "},\"response_stats\":{"); /* a decoupled model's, by response index */
    for (uint32_t i = 0; i < sn->n_resp; i++) {
        const struct nr_resp_snap_s *r = &sn->resp[i];
        nr_buf_printf(b, "%s\"%u\":{", i ? "," : "", i);
        put_dur(b, "compute_infer", &r->compute_infer);
        nr_buf_putc(b, ',');
        put_dur(b, "compute_output", &r->compute_output);
        nr_buf_putc(b, ',');
        put_dur(b, "success", &r->success);
        nr_buf_putc(b, ',');
        put_dur(b, "fail", &r->fail);
        nr_buf_putc(b, ',');
        put_dur(b, "empty_response", &r->empty_response);
        nr_buf_putc(b, ',');
        put_dur(b, "cancel", &r->cancel);
        nr_buf_putc(b, '}');
    }
    nr_buf_puts(b, "},\"batch_stats\":[");
    for (uint32_t i = 0; i < sn->n_batch; i++) {
        const nr_batch_snap_t *bs = &sn->batch[i];
        if (i)
            nr_buf_putc(b, ',');
        nr_buf_puts(b, "{\"batch_size\":");
        nr_buf_u64(b, bs->batch_size);
        nr_buf_putc(b, ',');
        put_dur(b, "compute_input", &bs->compute_input);
        nr_buf_putc(b, ',');
        put_dur(b, "compute_infer", &bs->compute_infer);
        nr_buf_putc(b, ',');
        put_dur(b, "compute_output", &bs->compute_output);
        nr_buf_putc(b, '}');
    }
    nr_buf_puts(b, "],\"memory_usage\":[]}");
}

void nr_http_model_stats(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_buf_puts(b, "{\"model_stats\":[");
    nr_status_t *st = nr_kserve_stats(s->core, q->model, q->model_len, q->version, put_stats, b);
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    nr_buf_puts(b, "]}");
    nr_http_json_ok(r);
}

/* ---- repository ------------------------------------------------------------- */

static void put_index_entry(const nr_index_entry_t *e, void *arg)
{
    nr_buf_t *b = arg;
    if (b->len > 1)
        nr_buf_putc(b, ',');
    nr_buf_puts(b, "{\"name\":");
    put_str(b, e->name);
    if (e->version != NULL) {
        nr_buf_puts(b, ",\"version\":");
        put_str(b, e->version);
    }
    if (e->state != NULL) {
        nr_buf_puts(b, ",\"state\":");
        put_str(b, e->state);
    }
    if (e->reason != NULL) {
        nr_buf_puts(b, ",\"reason\":");
        put_str(b, e->reason);
    }
    nr_buf_putc(b, '}');
}

void nr_http_repo_index(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    bool ready_only = false;
    if (q->body_len > 0) {
        nr_json_doc_t *doc;
        const nr_jv_t *root;
        nr_status_t *st = nr_json_parse(q->body, q->body_len, &doc, &root);
        if (st != NULL) {
            nr_http_error(r, st);
            return;
        }
        const nr_jv_t *rj = nr_jv_get(root, "ready");
        if (rj != NULL && !nr_jv_is_bool(rj)) {
            nr_json_free(doc);
            nr_http_error_msg(r, 400, NR_TJ_BOOL);
            return;
        }
        ready_only = rj != NULL && rj->type == NR_JV_TRUE;
        nr_json_free(doc);
    }
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_buf_putc(b, '[');
    nr_kserve_repo_index(s->core, ready_only, put_index_entry, b);
    nr_buf_putc(b, ']');
    nr_http_json_ok(r);
}

/* A load or unload, run on its own thread (a load may take seconds: the
 * server's thread goes on serving its other connections meanwhile). */
typedef struct {
    nr_http_server_t *s;
    nr_http_async_t *async;
    char *model;
    bool load;
    bool dependents;              /* unload: "unload_dependents" true */
    nr_repo_load_params_t p;
    char *config;                 /* the "config" parameter, NUL-terminated */
    nr_repo_file_t *files;        /* "file:<path>" parameters, decoded */
    nr_status_t *st;
} control_t;

static void control_free(control_t *c)
{
    for (size_t i = 0; i < c->p.n_files; i++) {
        free((char *)c->files[i].path);
        free((void *)c->files[i].data);
    }
    free(c->files);
    free(c->config);
    free(c->model);
    nr_status_free(c->st);
    free(c);
}

static void control_run(control_t *c)
{
    size_t len = strlen(c->model);
    c->st = c->load ? nr_kserve_repo_load(c->s->core, c->model, len, &c->p)
                    : nr_kserve_repo_unload(c->s->core, c->model, len, c->dependents);
}

static void *control_thread(void *arg)
{
    control_t *c = arg;
    control_run(c);
    c->async->wake(c->async);
    return NULL;
}

static void control_finish(void *arg, nr_http_resp_t *r)
{
    control_t *c = arg;
    if (c->st != NULL) {
        nr_http_error(r, c->st);
        c->st = NULL;
    } else {
        nr_http_empty(r, 200);
    }
    control_free(c);
}

/* A JSON type as Triton names a load parameter's (TRITONSERVER_ParameterTypeString). */
static const char *param_type(const nr_jv_t *v)
{
    return v->type == NR_JV_STRING ? "STRING" : nr_jv_is_bool(v) ? "BOOL" : "INT";
}

/* The body's "parameters": load's config and files (base64), unload's
 * unload_dependents. */
static nr_status_t *control_params(control_t *c, const char *body, size_t len)
{
    if (len == 0)
        return NULL;
    nr_json_doc_t *doc;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(body, len, &doc, &root);
    if (st != NULL)
        return st;
    const nr_jv_t *params = root->type == NR_JV_OBJECT ? nr_jv_get(root, "parameters") : NULL;
    if (root->type != NR_JV_OBJECT || (params != NULL && params->type != NR_JV_OBJECT))
        st = nr_status_new(NR_INVALID_ARG, "%s", NR_TJ_OBJECT); /* TritonJson's text */
    for (size_t i = 0; params && params->type == NR_JV_OBJECT && i < params->n && !st; i++) {
        const nr_jv_member_t *mb = &params->u.members[i];
        const nr_jv_t *v = &mb->val;
        bool is_file = mb->key_len > 5 && !memcmp(mb->key, "file:", 5);
        if (!c->load) {
            if (mb->key_len == 17 && !memcmp(mb->key, "unload_dependents", 17)) {
                if (!nr_jv_is_bool(v))
                    st = nr_status_new(NR_INVALID_ARG, "%s", NR_TJ_BOOL);
                else
                    c->dependents = v->type == NR_JV_TRUE;
            }
        } else if (mb->key_len == 6 && !memcmp(mb->key, "config", 6) && v->type == NR_JV_STRING) {
            free(c->config);
            c->config = nr_strndup(v->u.str, v->n);
            c->p.config = c->config;
            c->p.config_len = v->n;
        } else if (is_file && v->type == NR_JV_STRING) {
            /* OpenSSL's decoder (linked for gRPC's TLS): 3 bytes per 4 characters,
             * padding included, which is taken off after */
            unsigned char *out = nr_malloc(v->n / 4 * 3 + 3);
            int n = v->n % 4 == 0 ? EVP_DecodeBlock(out, (const unsigned char *)v->u.str,
                                                   (int)v->n)
                                  : -1;
            if (n < 0) {
                free(out);
                st = nr_status_new(NR_INVALID_ARG, "failed to decode base64 for load parameter "
                                                   "'%.*s'",
                                   (int)mb->key_len, mb->key);
                break;
            }
            for (size_t k = v->n; k > 0 && v->u.str[k - 1] == '=' && n > 0; k--)
                n--;
            c->files = nr_grow(c->files, c->p.n_files, sizeof(*c->files));
            c->files[c->p.n_files++] = (nr_repo_file_t){
                nr_strndup(mb->key + 5, mb->key_len - 5), mb->key_len - 5, out, (size_t)n};
            c->p.files = c->files;
        } else {
            st = nr_status_new(NR_INVALID_ARG, "Unrecognized load parameter '%.*s' with type '%s'",
                               (int)mb->key_len, mb->key, param_type(v));
        }
    }
    nr_json_free(doc);
    return st;
}

void nr_http_repo_control(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    if (q->has_repo) {
        nr_http_error(r, nr_kserve_repo_named());
        return;
    }
    control_t *c = nr_calloc(1, sizeof(*c));
    c->s = s;
    c->model = nr_strndup(q->model, q->model_len);
    c->load = q->load;
    nr_status_t *st = control_params(c, q->body, q->body_len);
    if (st != NULL) {
        control_free(c);
        nr_http_error(r, st);
        return;
    }
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    c->async = q->async;
    if (c->async != NULL) { /* the thread may finish before this returns */
        r->finish = control_finish;
        r->finish_arg = c;
    }
    if (c->async == NULL || pthread_create(&t, &attr, control_thread, c) != 0) {
        r->finish = NULL; /* no thread: answer from here */
        r->finish_arg = NULL;
        control_run(c);
        control_finish(c, r);
    }
    pthread_attr_destroy(&attr);
}

/* ---- logging ----------------------------------------------------------------- */

/* A member of the update object; null sets nothing, as in Triton. */
static bool find_json_setting(const char *key, nr_param_t *p, void *arg)
{
    const nr_jv_t *v = nr_jv_get(arg, key);
    if (v == NULL || v->type == NR_JV_NULL)
        return false;
    *p = nr_http_param(key, strlen(key), v);
    return true;
}

/* The TritonJson accessor's texts, which Triton's HTTP frontend reports as INTERNAL. */
static nr_status_t *log_wrong_type(const char *key, nr_param_type_t want)
{
    return nr_status_new(NR_INTERNAL, "%s",
                         want == NR_PARAM_BOOL     ? NR_TJ_BOOL
                         : want == NR_PARAM_STRING ? NR_TJ_STRING
                                                   : NR_TJ_UINT);
}

static nr_status_t *log_bad_format(const char *value, size_t len)
{
    return nr_status_new(NR_UNAVAILABLE, "invalid argument for --log_format, got: %.*s", (int)len,
                         value);
}

const nr_kserve_log_reader_t nr_http_log_reader = {find_json_setting, log_wrong_type,
                                                   log_bad_format};

static void put_log_setting(const nr_param_t *p, void *arg)
{
    nr_buf_t *b = arg;
    nr_buf_putc(b, b->len > 1 ? ',' : '{');
    nr_buf_json_str(b, p->key, p->key_len);
    nr_buf_putc(b, ':');
    if (p->type == NR_PARAM_BOOL)
        nr_buf_puts(b, p->v.b ? "true" : "false");
    else if (p->type == NR_PARAM_UINT64)
        nr_buf_u64(b, p->v.u);
    else
        nr_buf_json_str(b, p->v.s.p, p->v.s.n);
}

void nr_http_logging(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    if (strcmp(q->method, "POST") == 0) {
        nr_json_doc_t *doc;
        const nr_jv_t *root;
        nr_status_t *st = nr_json_parse(q->body, q->body_len, &doc, &root);
        if (st == NULL) {
            st = nr_kserve_log_update(&nr_http_log_reader, (void *)root);
            nr_json_free(doc);
        }
        if (st != NULL) {
            nr_http_error(r, st);
            return;
        }
    }
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_kserve_log_settings(put_log_setting, b);
    nr_buf_putc(b, '}');
    nr_http_json_ok(r);
}

/* One member of a trace settings update as the core reads it (core/kserve.h): a string (a list
 * of one), a list of strings, null; anything else is not_string. */
static void trace_item(const nr_jv_member_t *m, nr_kserve_trace_item_t *it, nr_view_t *vals)
{
    const nr_jv_t *v = &m->val;
    *it = (nr_kserve_trace_item_t){.key = m->key, .key_len = m->key_len, .values = vals};
    bool list = v->type == NR_JV_ARRAY;
    bool level = m->key_len == 11 && !memcmp(m->key, "trace_level", 11);
    if (v->type == NR_JV_NULL) {
        it->null = true;
    } else if (level != list || (v->type != NR_JV_ARRAY && v->type != NR_JV_STRING)) {
        it->not_string = true; /* trace_level must be a list, the others strings */
    } else if (!list) {
        vals[0] = (nr_view_t){v->u.str, v->n};
        it->n = 1;
    } else {
        for (size_t i = 0; i < v->n && !it->not_string; i++) {
            const nr_jv_t *e = &v->u.items[i];
            it->not_string = e->type != NR_JV_STRING;
            vals[i] = (nr_view_t){e->u.str, e->n};
        }
        it->n = v->n;
    }
}

/* The values a member can give trace_item: an array's elements, else one. */
static size_t value_slots(const nr_jv_member_t *m)
{
    return m->val.type == NR_JV_ARRAY ? m->val.n : 1;
}

static void put_trace_setting(void *arg, const char *key, const char *const *values, size_t n)
{
    nr_buf_t *b = arg;
    bool list = !strcmp(key, "trace_level"); /* Triton's: the level a list, the others strings */
    nr_buf_putc(b, b->len ? ',' : '{');
    nr_buf_json_str(b, key, strlen(key));
    nr_buf_putc(b, ':');
    if (list)
        nr_buf_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            nr_buf_putc(b, ',');
        nr_buf_json_str(b, values[i], strlen(values[i]));
    }
    if (list)
        nr_buf_putc(b, ']');
}

void nr_http_trace(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    if (q->model != NULL && !nr_kserve_model_ready(s->core, q->model, q->model_len, -1)) {
        nr_http_error(r, nr_status_new(NR_INVALID_ARG, "Request for unknown model : %.*s",
                                       (int)q->model_len, q->model));
        return;
    }
    char *model = q->model != NULL ? nr_strndup(q->model, q->model_len) : NULL;
    if (strcmp(q->method, "POST") == 0) {
        nr_json_doc_t *doc;
        const nr_jv_t *root;
        nr_status_t *st = nr_json_parse(q->body, q->body_len, &doc, &root);
        if (st == NULL) {
            if (root->type != NR_JV_OBJECT) {
                st = nr_status_new(NR_INVALID_ARG, "trace settings must be a JSON object");
            } else {
                size_t n = root->n, nv = 0;
                for (size_t i = 0; i < n; i++)
                    nv += value_slots(&root->u.members[i]);
                nr_kserve_trace_item_t *items = nr_calloc(n ? n : 1, sizeof(*items));
                nr_view_t *vals = nr_calloc(nv ? nv : 1, sizeof(*vals));
                for (size_t i = 0, at = 0; i < n; i++) {
                    trace_item(&root->u.members[i], &items[i], vals + at);
                    at += value_slots(&root->u.members[i]);
                }
                st = nr_kserve_trace_change(model, items, n, false);
                free(items);
                free(vals);
            }
            nr_json_free(doc);
        }
        if (st != NULL) {
            free(model);
            nr_http_error(r, st);
            return;
        }
    }
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_kserve_trace_settings(model, put_trace_setting, b);
    free(model);
    nr_buf_putc(b, '}');
    nr_http_json_ok(r);
}

