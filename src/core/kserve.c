/* kserve.c - protocol-neutral KServe v2 semantics (kserve.h). */
#include "kserve.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/log.h"
#include "trace.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
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
    nr_status_t *st = name != NULL ? nr_repo_ambiguity(nr_server_repo(s), name, len) : NULL;
    if (st != NULL)
        return st;
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

static bool key_is(const char *key, size_t len, const char *want)
{
    return strlen(want) == len && !memcmp(key, want, len);
}

static const nr_kserve_trace_item_t *find_item(const nr_kserve_trace_item_t *items, size_t n,
                                               const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (key_is(items[i].key, items[i].key_len, key))
            return &items[i];
    return NULL;
}

/* std::stoi as Triton calls it: leading blanks, a sign, then at least one digit (what follows
 * is ignored); -1 no number, 1 beyond int, 0 fine. */
static int parse_stoi(const nr_view_t *v, long long *out)
{
    size_t i = 0, n = v->len;
    const char *p = v->data;
    while (i < n && (p[i] == ' ' || (p[i] >= '\t' && p[i] <= '\r')))
        i++;
    bool neg = false;
    if (i < n && (p[i] == '+' || p[i] == '-'))
        neg = p[i++] == '-';
    if (i >= n || p[i] < '0' || p[i] > '9')
        return -1;
    long long x = 0;
    bool big = false;
    for (; i < n && p[i] >= '0' && p[i] <= '9'; i++) {
        if (x < 10000000000LL)
            x = x * 10 + (p[i] - '0');
        else
            big = true;
    }
    x = neg ? -x : x;
    if (big || x < INT32_MIN || x > INT32_MAX)
        return 1;
    *out = x;
    return 0;
}

/* One integer setting (trace_rate, trace_count, log_frequency) into *has / *clear / *val. */
static nr_status_t *int_item(const nr_kserve_trace_item_t *it, bool grpc, const char *name,
                             long long lo, long long hi, bool *has, bool *clear, long long *val)
{
    if (it == NULL)
        return NULL;
    if (it->null) {
        *clear = true;
        return NULL;
    }
    if (it->not_string)
        return nr_status_new(NR_INVALID_ARG, "attempt to access JSON non-string as string");
    if (grpc && it->n != 1)
        return nr_status_new(NR_INVALID_ARG, "expect only 1 value for '%s'", name);
    const nr_view_t *v = &it->values[0];
    int r = parse_stoi(v, val);
    if (r < 0)
        return nr_status_new(NR_INVALID_ARG, "Unable to parse '%s', got: %.*s", name,
                             (int)v->len, v->data);
    if (r > 0)
        return nr_status_new(NR_INVALID_ARG, "Unable to parse '%s', value is out of range "
                             "[ %lld, %lld ], got: %.*s", name, lo, hi, (int)v->len, v->data);
    if (*val < lo && lo == -1) /* trace_count */
        return nr_status_new(NR_INVALID_ARG, "Unable to parse '%s'. Expecting value >= -1, "
                             "got:%s%.*s", name, grpc ? " " : "", (int)v->len, v->data);
    *has = true;
    return NULL;
}

nr_status_t *nr_kserve_trace_change(const char *model, const nr_kserve_trace_item_t *items,
                                    size_t n, bool grpc)
{
    if (find_item(items, n, "trace_file") != NULL)
        return nr_status_new(NR_UNSUPPORTED, "trace file location can not be updated through "
                                             "network protocol");
    nr_trace_update_t u = {0};
    const nr_kserve_trace_item_t *it = find_item(items, n, "trace_level");
    if (it != NULL && it->null) {
        u.clear_level = true;
    } else if (it != NULL && it->not_string) {
        return nr_status_new(NR_INVALID_ARG, "attempt to access JSON non-array as array");
    } else if (it != NULL) {
        for (size_t i = 0; i < it->n; i++) {
            const nr_view_t *v = &it->values[i];
            if (key_is(v->data, v->len, "OFF")) {
                if (it->n != 1)
                    return nr_status_new(NR_INVALID_ARG,
                                         "Expect only one trace level 'OFF' is specified");
                u.level = 0;
                u.has_level = true;
            } else if (key_is(v->data, v->len, "TIMESTAMPS")) {
                u.level |= NR_TRACE_TIMESTAMPS;
                u.has_level = true;
            } else if (key_is(v->data, v->len, "TENSORS")) {
                u.level |= NR_TRACE_TENSORS;
                u.has_level = true;
            } /* Triton ignores any other word */
        }
    }
    long long rate = 0, count = 0, freq = 0;
    nr_status_t *st = int_item(find_item(items, n, "trace_rate"), grpc, "trace_rate", 0,
                               UINT32_MAX, &u.has_rate, &u.clear_rate, &rate);
    if (st == NULL)
        st = int_item(find_item(items, n, "trace_count"), grpc, "trace_count", -1, INT32_MAX,
                      &u.has_count, &u.clear_count, &count);
    if (st == NULL)
        st = int_item(find_item(items, n, "log_frequency"), grpc, "log_frequency", 0,
                      UINT32_MAX, &u.has_log_frequency, &u.clear_log_frequency, &freq);
    if (st != NULL)
        return st;
    u.rate = (uint32_t)rate; /* Triton stores stoi's int: a negative rate wraps */
    u.count = (int32_t)count;
    u.log_frequency = (uint32_t)freq;
    return nr_trace_update(model, &u);
}

void nr_kserve_trace_settings(const char *model, nr_kserve_trace_fn fn, void *arg)
{
    nr_trace_config_t c;
    nr_trace_get(model, &c);
    const char *levels[2];
    size_t nl = 0;
    if (c.level == 0)
        levels[nl++] = "OFF";
    if (c.level & NR_TRACE_TIMESTAMPS)
        levels[nl++] = "TIMESTAMPS";
    if (c.level & NR_TRACE_TENSORS)
        levels[nl++] = "TENSORS";
    fn(arg, "trace_level", levels, nl);
    char num[3][24];
    const char *v[1];
    snprintf(num[0], sizeof(num[0]), "%" PRIu32, c.rate);
    snprintf(num[1], sizeof(num[1]), "%" PRId32, c.count);
    snprintf(num[2], sizeof(num[2]), "%" PRIu32, c.log_frequency);
    fn(arg, "trace_rate", (v[0] = num[0], v), 1);
    fn(arg, "trace_count", (v[0] = num[1], v), 1);
    bool triton = c.mode == NR_TRACE_MODE_TRITON;
    if (triton) {
        fn(arg, "log_frequency", (v[0] = num[2], v), 1);
        fn(arg, "trace_file", (v[0] = c.file, v), 1);
    }
    fn(arg, "trace_mode", (v[0] = triton ? "triton" : "opentelemetry", v), 1);
    for (size_t i = 0; !triton && i < c.n_otel; i++) { /* Triton lists the mode's settings */
        const char *eq = strchr(c.otel[i], '=');
        char *key = nr_strndup(c.otel[i], (size_t)(eq - c.otel[i]));
        fn(arg, key, (v[0] = eq + 1, v), 1);
        free(key);
    }
}
