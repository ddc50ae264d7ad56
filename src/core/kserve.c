/* kserve.c - protocol-neutral KServe v2 semantics (kserve.h). */
#include "kserve.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/log.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

nr_status_t *nr_kserve_model(nr_server_t *s, const char *name, size_t len, int64_t version,
                             nr_model_t **out)
{
    return nr_repo_get(nr_server_repo(s), name, len, version, out);
}

bool nr_kserve_model_ready(nr_server_t *s, const char *name, size_t len, int64_t version)
{
    nr_model_t *m = NULL;
    nr_status_t *st = nr_kserve_model(s, name, len, version, &m);
    nr_status_free(st);
    nr_model_release(m);
    return st == NULL;
}

nr_status_t *nr_kserve_parse_version(const char *s, size_t n, nr_version_syntax_t syntax,
                                     int64_t *out)
{
    *out = -1;
    if (n == 0)
        return NULL;
    char buf[64];
    bool ok = n < sizeof(buf);
    if (ok) {
        memcpy(buf, s, n);
        buf[n] = '\0';
        char *end;
        errno = 0;
        long long v = strtoll(buf, &end, 10);
        /* std::stol: leading blanks and a sign allowed, trailing text ignored */
        ok = end != buf && errno != ERANGE && (syntax == NR_VERSION_STOL || *end == '\0');
        if (ok && v < 0)
            return nr_status_new(NR_INVALID_ARG,
                                 "invalid model version specified '%s' , version should be an "
                                 "integral value > 0",
                                 buf);
        if (ok)
            *out = v;
    }
    if (ok)
        return NULL;
    return nr_status_new(NR_INVALID_ARG,
                         "failed to get model version from specified version string '%.*s' "
                         "(details: %s), version should be an integral value > 0",
                         (int)n, s, syntax == NR_VERSION_STOL ? "stol" : "stoll");
}

/* ---- metadata ---------------------------------------------------------------- */

/* The READY versions' strings, appended to a list being built. */
typedef struct {
    const char **v;
    size_t n;
    nr_buf_t text; /* the strings, NUL-separated (offsets in v until fixed up) */
} ver_list_t;

static void add_ready_version(const nr_repo_version_t *rv, void *arg)
{
    ver_list_t *l = arg;
    if (rv->state != NR_MODEL_READY)
        return;
    l->v = nr_grow(l->v, l->n, sizeof(char *));
    l->v[l->n++] = (const char *)(uintptr_t)l->text.len;
    nr_buf_append(&l->text, rv->version_str, strlen(rv->version_str) + 1);
}

nr_status_t *nr_kserve_model_metadata(nr_server_t *s, const char *name, size_t len,
                                      int64_t version, nr_model_meta_t *out)
{
    memset(out, 0, sizeof(*out));
    nr_model_t *m = NULL;
    nr_status_t *st = nr_kserve_model(s, name, len, version, &m);
    if (st != NULL)
        return st;
    const nr_model_config_t *cfg = m->cfg;
    out->model = m;
    out->platform = cfg->platform && cfg->platform[0] ? cfg->platform : cfg->backend;
    if (out->platform == NULL)
        out->platform = "";
    ver_list_t l = {NULL, 0, {0}};
    nr_buf_init(&l.text);
    if (version >= 0) {
        nr_repo_version_t rv = {.state = NR_MODEL_READY, .version_str = m->version_str};
        add_ready_version(&rv, &l);
    } else {
        nr_repo_visit(nr_server_repo(s), name, len, add_ready_version, &l);
    }
    out->text = nr_buf_steal(&l.text, NULL);
    for (size_t i = 0; i < l.n; i++)
        l.v[i] = out->text + (uintptr_t)l.v[i];
    out->versions = l.v;
    out->n_versions = l.n;
    return NULL;
}

void nr_kserve_model_meta_free(nr_model_meta_t *m)
{
    free(m->versions);
    free(m->text);
    nr_model_release(m->model);
    memset(m, 0, sizeof(*m));
}

size_t nr_kserve_meta_shape(const nr_model_config_t *cfg, const nr_cfg_dims_t *dims,
                            int64_t *out)
{
    size_t n = 0;
    if (cfg->max_batch_size > 0)
        out[n++] = -1;
    for (size_t i = 0; i < dims->n && n < NR_MAX_DIMS + 1; i++)
        out[n++] = dims->v[i];
    return n;
}

/* ---- statistics ---------------------------------------------------------------- */

typedef struct {
    int64_t version;
    nr_kserve_stats_fn fn;
    void *arg;
    size_t n;
} stats_walk_t;

static void stats_version(const nr_repo_version_t *rv, void *arg)
{
    stats_walk_t *w = arg;
    if (rv->model == NULL || (w->version >= 0 && rv->version != w->version))
        return;
    nr_stats_snap_t sn;
    nr_stats_snapshot(&rv->model->stats, &sn);
    w->fn(rv->model, &sn, w->arg);
    nr_stats_snap_free(&sn);
    w->n++;
}

nr_status_t *nr_kserve_stats(nr_server_t *s, const char *name, size_t len, int64_t version,
                             nr_kserve_stats_fn fn, void *arg)
{
    stats_walk_t w = {version, fn, arg, 0};
    size_t found = nr_repo_visit(nr_server_repo(s), name, len, stats_version, &w);
    if (name == NULL || w.n > 0)
        return NULL;
    if (found > 0 && version >= 0)
        return nr_status_new(NR_INVALID_ARG,
                             "requested model version is not available for model '%.*s'",
                             (int)len, name);
    return nr_status_new(NR_INVALID_ARG, "requested model '%.*s' is not available", (int)len,
                         name);
}

void nr_kserve_versions(nr_server_t *s, nr_repo_visit_fn fn, void *arg)
{
    nr_repo_visit(nr_server_repo(s), NULL, 0, fn, arg);
}

/* ---- repository ------------------------------------------------------------------ */

static const char *state_name(nr_model_state_t st)
{
    switch (st) {
    case NR_MODEL_UNKNOWN: return "UNKNOWN";
    case NR_MODEL_READY: return "READY";
    case NR_MODEL_UNAVAILABLE: return "UNAVAILABLE";
    case NR_MODEL_LOADING: return "LOADING";
    case NR_MODEL_UNLOADING: return "UNLOADING";
    }
    return "UNKNOWN";
}

typedef struct {
    nr_kserve_index_fn fn;
    void *arg;
} index_walk_t;

static void index_version(const nr_repo_version_t *rv, void *arg)
{
    index_walk_t *w = arg;
    /* a model directory never loaded: its name alone, as Triton lists it */
    bool name_only = rv->state == NR_MODEL_UNKNOWN && rv->version < 0;
    nr_index_entry_t ie = {rv->name, rv->version_str, name_only ? NULL : state_name(rv->state),
                           rv->reason};
    w->fn(&ie, w->arg);
}

void nr_kserve_repo_index(nr_server_t *s, bool ready_only, nr_kserve_index_fn fn, void *arg)
{
    index_walk_t w = {fn, arg};
    nr_repo_index(nr_server_repo(s), ready_only, index_version, &w);
}

nr_status_t *nr_kserve_repo_load(nr_server_t *s, const char *model, size_t len,
                                 const nr_repo_load_params_t *p)
{
    nr_status_t *st = nr_repo_control_allowed(nr_server_repo(s));
    return st ? st : nr_repo_load(nr_server_repo(s), model, len, p);
}

nr_status_t *nr_kserve_repo_unload(nr_server_t *s, const char *model, size_t len,
                                   bool dependents)
{
    nr_status_t *st = nr_repo_control_allowed(nr_server_repo(s));
    return st ? st : nr_repo_unload(nr_server_repo(s), model, len, dependents);
}

nr_status_t *nr_kserve_repo_named(void)
{
    return nr_status_new(NR_UNSUPPORTED, "'repository_name' specification is not supported");
}

/* ---- CUDA shared memory ---------------------------------------------------------- */

nr_status_t *nr_kserve_cuda_status(const char *region, size_t len)
{
    return nr_status_new(NR_NOT_FOUND, "Unable to find cuda shared memory region: '%.*s'",
                         (int)len, region);
}

nr_status_t *nr_kserve_cuda_register(const char *region, size_t len)
{
    if (region == NULL)
        return nr_status_new(NR_INVALID_ARG,
                             "'region name' is necessary to register cuda shared memory region");
    return nr_status_new(NR_INVALID_ARG,
                         "failed to register CUDA shared memory region: '%.*s', GPUs not "
                         "supported",
                         (int)len, region);
}

/* ---- logging -------------------------------------------------------------------- */

static bool text_is(const nr_param_t *p, const char *s)
{
    return p->v.s.n == strlen(s) && memcmp(p->v.s.p, s, p->v.s.n) == 0;
}

/* One setting of an update (see nr_kserve_log_update). */
static nr_status_t *log_apply(const nr_kserve_log_reader_t *rd, const char *key,
                              const nr_param_t *p)
{
    if (!strcmp(key, "log_file"))
        return nr_status_new(NR_UNSUPPORTED,
                             "log file location can not be updated through network protocol");
    _Atomic bool *flag = !strcmp(key, "log_info")      ? &nr_log_settings.info
                         : !strcmp(key, "log_warning") ? &nr_log_settings.warn
                         : !strcmp(key, "log_error")   ? &nr_log_settings.error
                                                       : NULL;
    if (flag != NULL) {
        if (p->type != NR_PARAM_BOOL)
            return rd->wrong_type(key, NR_PARAM_BOOL);
        *flag = p->v.b;
    } else if (!strcmp(key, "log_verbose_level")) {
        /* gRPC: a uint32_param; HTTP: any unsigned JSON integer (Triton casts
         * it to int32; nereid keeps the largest int32 instead) */
        bool ok = p->type == NR_PARAM_UINT64 || (p->type == NR_PARAM_INT64 && p->v.i >= 0);
        if (!ok)
            return rd->wrong_type(key, NR_PARAM_UINT64);
        uint64_t v = p->type == NR_PARAM_UINT64 ? p->v.u : (uint64_t)p->v.i;
        nr_log_settings.verbose = v > INT32_MAX ? INT32_MAX : (int)v;
    } else if (!strcmp(key, "log_format")) {
        if (p->type != NR_PARAM_STRING)
            return rd->wrong_type(key, NR_PARAM_STRING);
        bool iso = text_is(p, "ISO8601");
        if (!iso && !text_is(p, "default"))
            return rd->bad_format(p->v.s.p, p->v.s.n);
        nr_log_settings.iso8601 = iso;
    }
    return NULL;
}

nr_status_t *nr_kserve_log_update(const nr_kserve_log_reader_t *rd, void *arg)
{
    static const char *const keys[] = {"log_file",  "log_info",          "log_warning",
                                       "log_error", "log_verbose_level", "log_format"};
    for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++) {
        nr_param_t p = {.type = NR_PARAM_OTHER};
        if (!rd->find(keys[i], &p, arg))
            continue;
        nr_status_t *st = log_apply(rd, keys[i], &p);
        if (st != NULL)
            return st;
    }
    return NULL;
}

/* Hands fn one setting: p's value under key k. */
static void setting(nr_kserve_setting_fn fn, void *arg, const char *k, nr_param_t p)
{
    p.key = k;
    p.key_len = strlen(k);
    fn(&p, arg);
}

static nr_param_t str_value(const char *s)
{
    return (nr_param_t){.type = NR_PARAM_STRING, .v.s = {s, strlen(s)}};
}

static nr_param_t bool_value(bool b)
{
    return (nr_param_t){.type = NR_PARAM_BOOL, .v.b = b};
}

void nr_kserve_log_settings(nr_kserve_setting_fn fn, void *arg)
{
    setting(fn, arg, "log_file", str_value(nr_log_settings.file ? nr_log_settings.file : ""));
    setting(fn, arg, "log_info", bool_value(nr_log_settings.info));
    setting(fn, arg, "log_warning", bool_value(nr_log_settings.warn));
    setting(fn, arg, "log_error", bool_value(nr_log_settings.error));
    setting(fn, arg, "log_verbose_level",
            (nr_param_t){.type = NR_PARAM_UINT64, .v.u = (uint64_t)nr_log_settings.verbose});
    setting(fn, arg, "log_format", str_value(nr_log_settings.iso8601 ? "ISO8601" : "default"));
}

/* ---- trace settings ---------------------------------------------------------------- */

static const char *const trace_keys[] = {"trace_level", "trace_rate",  "trace_count",
                                         "log_frequency", "trace_file", "trace_mode"};
static const char *const trace_values[] = {"OFF", "1000", "-1", "0", "", "triton"};

size_t nr_kserve_trace_settings(const char *const **keys, const char *const **values)
{
    *keys = trace_keys;
    *values = trace_values;
    return sizeof(trace_keys) / sizeof(trace_keys[0]);
}

static bool key_is(const char *key, size_t len, const char *want)
{
    return strlen(want) == len && !memcmp(key, want, len);
}

nr_status_t *nr_kserve_trace_update(const char *key, size_t key_len, const nr_view_t *values,
                                    size_t n)
{
    if (key_is(key, key_len, "trace_file"))
        return nr_status_new(NR_UNSUPPORTED, "trace file location can not be updated through "
                                             "network protocol");
    if (key_is(key, key_len, "trace_level") &&
        !(n == 0 || (n == 1 && values[0].len == 3 && !memcmp(values[0].data, "OFF", 3))))
        return nr_status_new(NR_UNSUPPORTED, "tracing is not supported by this server: "
                                             "'trace_level' can only be OFF");
    return NULL;
}
