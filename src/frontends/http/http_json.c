/* http_json.c - the JSON answers that are not inference: error bodies, server
 * and model metadata, model config, readiness, statistics and the repository
 * index, in Triton's exact key order and formatting (compact, no spaces).
 *
 * These are control-plane answers (perf_analyzer asks each once per run), so
 * they are rendered on demand from the immutable configs and the stats
 * counters; only GET /v2 is rendered once at start. Nothing here locks.
 */
#include "http_int.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Triton 2.51 lists: classification, sequence, model_repository,
 * model_repository(unload_dependents), schedule_policy, model_configuration,
 * system_shared_memory, cuda_shared_memory, binary_tensor_data, parameters,
 * statistics, trace, logging. nereid lists only what it really serves, in
 * Triton's order. Left out: sequence (no sequence batcher yet),
 * model_repository(unload_dependents) (no explicit model control),
 * schedule_policy (priority/timeout are passed to the core but the HTTP layer
 * cannot promise the policy semantics), cuda_shared_memory (no GPU: its
 * endpoints answer, registering is refused), parameters (custom request
 * parameters are accepted but not forwarded to backends), trace and logging
 * (no such endpoints).
 * perf_analyzer only looks for "statistics". */
static const char *const extensions[] = {
    "classification", "model_repository", "model_configuration", "system_shared_memory",
    "binary_tensor_data", "statistics",
};

size_t nr_http_extensions(const char *const **out)
{
    *out = extensions;
    return sizeof(extensions) / sizeof(extensions[0]);
}

/* ---- generic bodies ----------------------------------------------------- */

void nr_http_error_msg(nr_http_resp_t *r, int status, const char *msg)
{
    nr_buf_reset(&r->body);
    nr_buf_puts(&r->body, "{\"error\":");
    nr_buf_json_str(&r->body, msg, strlen(msg));
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

char *nr_http_server_meta_render(const nr_http_options_t *o, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    const char *id = o->server_id ? o->server_id : "triton";
    const char *ver = o->server_version ? o->server_version : "";
    nr_buf_puts(&b, "{\"name\":");
    nr_buf_json_str(&b, id, strlen(id));
    nr_buf_puts(&b, ",\"version\":");
    nr_buf_json_str(&b, ver, strlen(ver));
    nr_buf_puts(&b, ",\"extensions\":[");
    const char *const *ext;
    size_t n = nr_http_extensions(&ext);
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

static void put_io(nr_buf_t *b, const char *name, nr_dtype_t dt, const nr_cfg_dims_t *dims,
                   bool batching)
{
    nr_buf_puts(b, "{\"name\":");
    put_str(b, name);
    nr_buf_puts(b, ",\"datatype\":");
    put_str(b, nr_dtype_kserve_name(dt));
    nr_buf_puts(b, ",\"shape\":[");
    bool first = true;
    if (batching) {
        nr_buf_puts(b, "-1");
        first = false;
    }
    for (size_t i = 0; i < dims->n; i++) {
        if (!first)
            nr_buf_putc(b, ',');
        nr_buf_i64(b, dims->v[i]);
        first = false;
    }
    nr_buf_puts(b, "]}");
}

void nr_http_model_metadata(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_model_t *m = NULL;
    nr_status_t *st = nr_repo_get(s->repo, q->model, q->model_len, q->version, &m);
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    const nr_model_config_t *cfg = m->cfg;
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_buf_puts(b, "{\"name\":");
    put_str(b, m->name);
    nr_buf_puts(b, ",\"versions\":[");
    if (q->version >= 0) {
        put_str(b, m->version_str);
    } else {
        const nr_repo_entry_t *e = nr_repo_entry(s->repo, q->model, q->model_len);
        bool first = true;
        for (size_t i = 0; e != NULL && i < e->n_versions; i++) {
            if (e->versions[i]->state != NR_MODEL_READY)
                continue;
            if (!first)
                nr_buf_putc(b, ',');
            put_str(b, e->versions[i]->version_str);
            first = false;
        }
    }
    nr_buf_puts(b, "],\"platform\":");
    put_str(b, cfg->platform && cfg->platform[0] ? cfg->platform : cfg->backend);
    bool batching = cfg->max_batch_size > 0;
    nr_buf_puts(b, ",\"inputs\":[");
    for (size_t i = 0; i < cfg->n_input; i++) {
        if (i)
            nr_buf_putc(b, ',');
        put_io(b, cfg->input[i].name, cfg->input[i].data_type, &cfg->input[i].dims, batching);
    }
    nr_buf_puts(b, "],\"outputs\":[");
    for (size_t i = 0; i < cfg->n_output; i++) {
        if (i)
            nr_buf_putc(b, ',');
        put_io(b, cfg->output[i].name, cfg->output[i].data_type, &cfg->output[i].dims, batching);
    }
    nr_buf_puts(b, "]}");
    nr_http_json_ok(r);
}

void nr_http_model_config(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_model_t *m = NULL;
    nr_status_t *st = nr_repo_get(s->repo, q->model, q->model_len, q->version, &m);
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    size_t len = 0;
    char *json = nr_cfg_to_json(m->cfg, &len);
    nr_buf_reset(&r->body);
    nr_buf_append(&r->body, json, len);
    free(json);
    nr_http_json_ok(r);
}

void nr_http_model_ready(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_model_t *m = NULL;
    nr_status_t *st = nr_repo_get(s->repo, q->model, q->model_len, q->version, &m);
    if (st != NULL) {
        nr_status_free(st);
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

void nr_http_stats_one(nr_buf_t *b, const nr_model_t *m)
{
    nr_stats_snap_t sn;
    nr_stats_snapshot(&m->stats, &sn);
    nr_buf_puts(b, "{\"name\":");
    put_str(b, m->name);
    nr_buf_puts(b, ",\"version\":");
    put_str(b, m->version_str);
    nr_buf_puts(b, ",\"last_inference\":");
    nr_buf_u64(b, sn.last_inference_ms);
    nr_buf_puts(b, ",\"inference_count\":");
    nr_buf_u64(b, sn.inference_count);
    nr_buf_puts(b, ",\"execution_count\":");
    nr_buf_u64(b, sn.execution_count);
    nr_buf_puts(b, ",\"inference_stats\":{");
    put_dur(b, "success", &sn.success);
    nr_buf_putc(b, ',');
    put_dur(b, "fail", &sn.fail);
    nr_buf_putc(b, ',');
    put_dur(b, "queue", &sn.queue);
    nr_buf_putc(b, ',');
    put_dur(b, "compute_input", &sn.compute_input);
    nr_buf_putc(b, ',');
    put_dur(b, "compute_infer", &sn.compute_infer);
    nr_buf_putc(b, ',');
    put_dur(b, "compute_output", &sn.compute_output);
    nr_buf_putc(b, ',');
    put_dur(b, "cache_hit", &sn.cache_hit);
    nr_buf_putc(b, ',');
    put_dur(b, "cache_miss", &sn.cache_miss);
    nr_buf_puts(b, "},\"response_stats\":{},\"batch_stats\":[");
    for (uint32_t i = 0; i < sn.n_batch; i++) {
        const nr_batch_snap_t *bs = &sn.batch[i];
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
    nr_stats_snap_free(&sn);
}

/* Appends every READY version of e (or only `version`); returns how many. */
static size_t stats_entry(nr_buf_t *b, const nr_repo_entry_t *e, int64_t version, size_t done)
{
    size_t n = 0;
    for (size_t i = 0; i < e->n_versions; i++) {
        const nr_model_t *m = e->versions[i];
        if (m->state != NR_MODEL_READY || (version >= 0 && m->version != version))
            continue;
        if (done + n > 0)
            nr_buf_putc(b, ',');
        nr_http_stats_one(b, m);
        n++;
    }
    return n;
}

void nr_http_model_stats(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_buf_puts(b, "{\"model_stats\":[");
    if (q->model == NULL) {
        size_t done = 0;
        for (size_t i = 0; i < nr_repo_count(s->repo); i++)
            done += stats_entry(b, nr_repo_entry_at(s->repo, i), -1, done);
    } else {
        const nr_repo_entry_t *e = nr_repo_entry(s->repo, q->model, q->model_len);
        size_t n = e ? stats_entry(b, e, q->version, 0) : 0;
        if (n == 0) {
            char *msg;
            if (e != NULL && q->version >= 0) {
                msg = nr_asprintf("requested model version is not available for model '%.*s'",
                                  (int)q->model_len, q->model);
            } else {
                msg = nr_asprintf("requested model '%.*s' is not available", (int)q->model_len,
                                  q->model);
            }
            nr_http_error_msg(r, 400, msg);
            free(msg);
            return;
        }
    }
    nr_buf_puts(b, "]}");
    nr_http_json_ok(r);
}

/* ---- repository index ----------------------------------------------------- */

static const char *state_name(nr_model_state_t st)
{
    switch (st) {
    case NR_MODEL_LOADING: return "LOADING";
    case NR_MODEL_READY: return "READY";
    case NR_MODEL_UNAVAILABLE: return "UNAVAILABLE";
    }
    return "UNKNOWN";
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
            nr_http_error_msg(r, 400, T_BOOL);
            return;
        }
        ready_only = rj != NULL && rj->type == NR_JV_TRUE;
        nr_json_free(doc);
    }
    nr_buf_t *b = &r->body;
    nr_buf_reset(b);
    nr_buf_putc(b, '[');
    bool first = true;
    for (size_t i = 0; i < nr_repo_count(s->repo); i++) {
        const nr_repo_entry_t *e = nr_repo_entry_at(s->repo, i);
        if (e->n_versions == 0) {
            if (ready_only)
                continue;
            if (!first)
                nr_buf_putc(b, ',');
            first = false;
            nr_buf_puts(b, "{\"name\":");
            put_str(b, e->name);
            nr_buf_puts(b, ",\"state\":\"UNAVAILABLE\"");
            if (e->reason != NULL) {
                nr_buf_puts(b, ",\"reason\":");
                put_str(b, e->reason);
            }
            nr_buf_putc(b, '}');
            continue;
        }
        for (size_t v = 0; v < e->n_versions; v++) {
            const nr_model_t *m = e->versions[v];
            if (ready_only && m->state != NR_MODEL_READY)
                continue;
            if (!first)
                nr_buf_putc(b, ',');
            first = false;
            nr_buf_puts(b, "{\"name\":");
            put_str(b, e->name);
            nr_buf_puts(b, ",\"version\":");
            put_str(b, m->version_str);
            nr_buf_puts(b, ",\"state\":\"");
            nr_buf_puts(b, state_name(m->state));
            nr_buf_putc(b, '"');
            if (m->state == NR_MODEL_UNAVAILABLE && m->reason != NULL) {
                nr_buf_puts(b, ",\"reason\":");
                put_str(b, m->reason);
            }
            nr_buf_putc(b, '}');
        }
    }
    nr_buf_putc(b, ']');
    nr_http_json_ok(r);
}
