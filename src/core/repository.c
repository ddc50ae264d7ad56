/* repository.c - scanning model repositories and loading every model at
 * startup (model-control-mode none). Runs on the main thread; afterwards the
 * repository is read-only, so lookups from frontend threads take no lock.
 */
#include "repository.h"

#include "../common/alloc.h"
#include "../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

struct nr_repo_s {
    nr_repo_entry_t *entries;
    size_t n;
};

static bool is_dir(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0 && S_ISDIR(sb.st_mode);
}

static bool exists(const char *path)
{
    struct stat sb;
    return stat(path, &sb) == 0;
}

static int cmp_entry(const void *a, const void *b)
{
    return strcmp(((const nr_repo_entry_t *)a)->name, ((const nr_repo_entry_t *)b)->name);
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Version directories: "0" or [1-9][0-9]*; others are ignored with a warning. */
static size_t list_versions(const char *dir, const char *model, int64_t **out)
{
    DIR *d = opendir(dir);
    size_t n = 0, cap = 8;
    int64_t *v = nr_malloc(cap * sizeof(int64_t));
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        const char *s = de->d_name;
        if (s[0] == '.')
            continue;
        char *path = nr_asprintf("%s/%s", dir, s);
        bool sub = is_dir(path);
        free(path);
        if (!sub || !strcmp(s, "warmup") || !strcmp(s, "initial_state") || !strcmp(s, "configs"))
            continue;
        bool numeric = s[0] != '\0' && strspn(s, "0123456789") == strlen(s) &&
                       (s[0] != '0' || s[1] == '\0') && strlen(s) <= 18;
        if (!numeric) {
            NR_LOG_WARN("ignore version directory '%s' which fails to convert to integral number",
                        s);
            continue;
        }
        if (n == cap)
            v = nr_realloc(v, (cap *= 2) * sizeof(int64_t));
        v[n++] = strtoll(s, NULL, 10);
    }
    if (d)
        closedir(d);
    (void)model;
    qsort(v, n, sizeof(int64_t), cmp_i64);
    *out = v;
    return n;
}

/* Applies the version policy to the ascending list; returns the kept count. */
static size_t apply_policy(const nr_model_config_t *cfg, int64_t *v, size_t n)
{
    const nr_cfg_version_policy_t *p = &cfg->version_policy;
    if (p->kind == NR_POLICY_ALL)
        return n;
    if (p->kind == NR_POLICY_LATEST) {
        size_t keep = p->latest_num_versions < n ? p->latest_num_versions : n;
        memmove(v, v + (n - keep), keep * sizeof(int64_t));
        return keep;
    }
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        for (size_t j = 0; j < p->n_specific_versions; j++)
            if (v[i] == p->specific_versions[j]) {
                v[k++] = v[i];
                break;
            }
    return k;
}

/* Server-side autofill (Triton's AutoCompleteBackendFields for ONNX). */
static void autofill_backend(nr_model_config_t *cfg, const char *dir_name)
{
    if (!cfg->name || !cfg->name[0]) {
        free(cfg->name);
        cfg->name = nr_strdup(dir_name);
    }
    bool is_ort_platform = cfg->platform && !strcmp(cfg->platform, "onnxruntime_onnx");
    bool is_ort_backend = cfg->backend && !strcmp(cfg->backend, "onnxruntime");
    bool no_backend = !cfg->backend || !cfg->backend[0];
    bool no_platform = !cfg->platform || !cfg->platform[0];
    if (no_backend && no_platform && cfg->default_model_filename &&
        strlen(cfg->default_model_filename) > 5 &&
        !strcmp(cfg->default_model_filename + strlen(cfg->default_model_filename) - 5, ".onnx"))
        is_ort_platform = true;
    if (is_ort_platform && no_backend) {
        free(cfg->backend);
        cfg->backend = nr_strdup("onnxruntime");
        is_ort_backend = true;
    }
    if (is_ort_backend && no_platform) {
        free(cfg->platform);
        cfg->platform = nr_strdup("onnxruntime_onnx");
    }
    if (is_ort_backend && (!cfg->default_model_filename || !cfg->default_model_filename[0])) {
        free(cfg->default_model_filename);
        cfg->default_model_filename = nr_strdup("model.onnx");
    }
}

/* Guesses the backend of a config-less model from the files present. */
static void guess_backend(nr_model_config_t *cfg, const char *dir, const int64_t *v, size_t n)
{
    if ((cfg->backend && cfg->backend[0]) || (cfg->platform && cfg->platform[0]))
        return;
    for (size_t i = 0; i < n; i++) {
        char *p = nr_asprintf("%s/%" PRId64 "/model.onnx", dir, v[i]);
        bool found = exists(p);
        free(p);
        if (found) {
            free(cfg->backend);
            cfg->backend = nr_strdup("onnxruntime");
            return;
        }
    }
}

static char *status_reason(nr_status_t *st)
{
    char *r = nr_asprintf("%s: %s", nr_status_code_name(st->code), st->msg);
    nr_status_free(st);
    return r;
}

/* Reads, completes and validates the config of one model directory. */
static nr_status_t *prepare_config(nr_repo_entry_t *e, const nr_repo_options_t *opts,
                                   const int64_t *v, size_t nv, const nr_backend_t **backend)
{
    char *path = NULL;
    if (opts->model_config_name && opts->model_config_name[0]) {
        path = nr_asprintf("%s/configs/%s.pbtxt", e->dir, opts->model_config_name);
        if (!exists(path)) {
            free(path);
            path = NULL;
        }
    }
    if (!path)
        path = nr_asprintf("%s/config.pbtxt", e->dir);
    nr_status_t *st = NULL;
    if (exists(path)) {
        st = nr_cfg_parse_file(path, &e->cfg);
    } else if (opts->autocomplete) {
        e->cfg = nr_cfg_new();
    } else {
        st = nr_status_new(NR_INVALID_ARG,
                           "model configuration file '%s' is missing, and auto-complete is "
                           "disabled (--disable-auto-complete-config)",
                           path);
    }
    free(path);
    if (st)
        return st;
    guess_backend(e->cfg, e->dir, v, nv);
    autofill_backend(e->cfg, e->name);
    *backend = e->cfg->backend ? nr_backend_find(e->cfg->backend) : NULL;
    if (*backend == NULL)
        return nr_status_new(NR_INVALID_ARG, "unable to find backend '%s' for model '%s'",
                             e->cfg->backend ? e->cfg->backend : "", e->name);
    nr_cfg_normalize(e->cfg);
    if (opts->autocomplete && (*backend)->model_autocomplete && nv > 0) {
        char *mp = nr_asprintf("%s/%" PRId64 "/%s", e->dir, v[nv - 1],
                               e->cfg->default_model_filename);
        st = (*backend)->model_autocomplete(e->cfg, mp);
        free(mp);
        if (st)
            return st;
        nr_cfg_normalize(e->cfg);
    }
    nr_cfg_fill_instance_groups(e->cfg, 2, 0);
    return nr_cfg_validate(e->cfg, e->name);
}

static void load_entry(nr_repo_entry_t *e, const nr_repo_options_t *opts)
{
    int64_t *v;
    size_t nv = list_versions(e->dir, e->name, &v);
    const nr_backend_t *backend = NULL;
    nr_status_t *st = prepare_config(e, opts, v, nv, &backend);
    if (st == NULL) {
        nv = apply_policy(e->cfg, v, nv);
        if (nv == 0)
            st = nr_status_new(NR_INVALID_ARG,
                               "at least one version must be available under the version policy "
                               "of model '%s'",
                               e->name);
    }
    if (st) {
        e->reason = status_reason(st);
        NR_LOG_ERROR("failed to load '%s': %s", e->name, e->reason);
        free(v);
        return;
    }
    e->versions = nr_calloc(nv, sizeof(nr_model_t *));
    for (size_t i = 0; i < nv; i++) {
        nr_model_t *m = nr_calloc(1, sizeof(*m));
        m->cfg = e->cfg;
        m->version = v[i];
        m->backend = backend;
        m->allow_inline = opts->inline_execution;
        m->state = NR_MODEL_LOADING;
        e->versions[e->n_versions++] = m;
        NR_LOG_INFO("loading: %s:%" PRId64, e->name, v[i]);
        char *mp = nr_asprintf("%s/%" PRId64 "/%s", e->dir, v[i], e->cfg->default_model_filename);
        st = nr_model_load(m, e->dir, mp, opts->cpu_count);
        free(mp);
        if (st) {
            m->reason = status_reason(st);
            m->state = NR_MODEL_UNAVAILABLE;
            NR_LOG_ERROR("failed to load '%s' version %" PRId64 ": %s", e->name, v[i], m->reason);
        } else {
            m->state = NR_MODEL_READY;
            NR_LOG_INFO("successfully loaded '%s' version %" PRId64, e->name, v[i]);
        }
    }
    free(v);
}

static nr_status_t *scan_path(const char *root, nr_repo_t *repo)
{
    DIR *d = opendir(root);
    if (!d)
        return nr_status_new(NR_INTERNAL, "failed to stat file %s", root);
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (de->d_name[0] == '.')
            continue;
        char *dir = nr_asprintf("%s/%s", root, de->d_name);
        if (!is_dir(dir)) {
            free(dir);
            continue;
        }
        for (size_t i = 0; i < repo->n; i++)
            if (!strcmp(repo->entries[i].name, de->d_name)) {
                closedir(d);
                char *other = nr_strdup(repo->entries[i].dir);
                nr_status_t *st = nr_status_new(
                    NR_INVALID_ARG, "model '%s' exists in multiple model repositories: %s and %s",
                    de->d_name, other, dir);
                free(other);
                free(dir);
                return st;
            }
        repo->entries = nr_realloc(repo->entries, (repo->n + 1) * sizeof(nr_repo_entry_t));
        nr_repo_entry_t *e = &repo->entries[repo->n++];
        memset(e, 0, sizeof(*e));
        e->name = nr_strdup(de->d_name);
        e->dir = dir;
    }
    closedir(d);
    return NULL;
}

nr_status_t *nr_repo_create(const nr_repo_options_t *opts, nr_repo_t **out)
{
    nr_repo_t *repo = nr_calloc(1, sizeof(*repo));
    for (size_t p = 0; p < opts->n_paths; p++) {
        nr_status_t *st = scan_path(opts->paths[p], repo);
        if (st) {
            nr_repo_destroy(repo);
            return st;
        }
    }
    if (repo->n)
        qsort(repo->entries, repo->n, sizeof(nr_repo_entry_t), cmp_entry);
    for (size_t i = 0; i < repo->n; i++)
        load_entry(&repo->entries[i], opts);
    *out = repo;
    return NULL;
}

void nr_repo_destroy(nr_repo_t *repo)
{
    if (!repo)
        return;
    for (size_t i = 0; i < repo->n; i++) {
        nr_repo_entry_t *e = &repo->entries[i];
        for (size_t k = 0; k < e->n_versions; k++) {
            nr_model_t *m = e->versions[k];
            if (m->state == NR_MODEL_READY) {
                nr_model_unload(m);
                NR_LOG_INFO("successfully unloaded '%s' version %s", e->name, m->version_str);
            } else {
                nr_stats_destroy(&m->stats);
                nr_model_index_free(m);
            }
            free(m->reason);
            free(m);
        }
        free(e->versions);
        nr_cfg_free(e->cfg);
        free(e->reason);
        free(e->name);
        free(e->dir);
    }
    free(repo->entries);
    free(repo);
}

size_t nr_repo_count(const nr_repo_t *repo)
{
    return repo->n;
}

const nr_repo_entry_t *nr_repo_entry_at(const nr_repo_t *repo, size_t i)
{
    return i < repo->n ? &repo->entries[i] : NULL;
}

const nr_repo_entry_t *nr_repo_entry(const nr_repo_t *repo, const char *name, size_t len)
{
    size_t lo = 0, hi = repo->n;
    while (lo < hi) { /* entries are sorted by name */
        size_t mid = (lo + hi) / 2;
        const char *s = repo->entries[mid].name;
        size_t sl = strlen(s);
        int c = memcmp(s, name, sl < len ? sl : len);
        if (c == 0)
            c = sl < len ? -1 : sl > len;
        if (c == 0)
            return &repo->entries[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

bool nr_repo_all_ready(const nr_repo_t *repo)
{
    for (size_t i = 0; i < repo->n; i++) {
        const nr_repo_entry_t *e = &repo->entries[i];
        if (e->reason)
            return false;
        for (size_t k = 0; k < e->n_versions; k++)
            if (e->versions[k]->state != NR_MODEL_READY)
                return false;
    }
    return true;
}

nr_status_t *nr_repo_get(const nr_repo_t *repo, const char *name, size_t len, int64_t version,
                         nr_model_t **out)
{
    const nr_repo_entry_t *e = nr_repo_entry(repo, name, len);
    if (!e)
        return nr_status_new(NR_NOT_FOUND, "Request for unknown model: '%.*s' is not found",
                             (int)len, name);
    if (version < 0) {
        for (size_t k = e->n_versions; k-- > 0;)
            if (e->versions[k]->state == NR_MODEL_READY) {
                *out = e->versions[k];
                return NULL;
            }
        return nr_status_new(NR_NOT_FOUND,
                             "Request for unknown model: '%s' has no available versions", e->name);
    }
    for (size_t k = 0; k < e->n_versions; k++) {
        if (e->versions[k]->version != version)
            continue;
        if (e->versions[k]->state != NR_MODEL_READY)
            return nr_status_new(NR_UNAVAILABLE,
                                 "Request for unknown model: '%s' version %" PRId64
                                 " is not at ready state",
                                 e->name, version);
        *out = e->versions[k];
        return NULL;
    }
    return nr_status_new(NR_NOT_FOUND, "Request for unknown model: '%s' version %" PRId64
                                       " is not found",
                         e->name, version);
}

void nr_repo_log_table(const nr_repo_t *repo)
{
    size_t rows = 0;
    for (size_t i = 0; i < repo->n; i++)
        rows += repo->entries[i].n_versions ? repo->entries[i].n_versions : 1;
    const char **cells = nr_calloc(rows * 3 + 1, sizeof(char *));
    char **owned = nr_calloc(rows * 2 + 1, sizeof(char *));
    size_t r = 0, o = 0;
    for (size_t i = 0; i < repo->n; i++) {
        const nr_repo_entry_t *e = &repo->entries[i];
        if (e->n_versions == 0) {
            cells[r * 3] = e->name;
            cells[r * 3 + 1] = "-";
            cells[r * 3 + 2] = owned[o++] = nr_asprintf(
                "UNAVAILABLE: %s", e->reason ? e->reason : "Not loaded: No model version was found");
            r++;
            continue;
        }
        for (size_t k = 0; k < e->n_versions; k++, r++) {
            const nr_model_t *m = e->versions[k];
            cells[r * 3] = e->name;
            cells[r * 3 + 1] = m->version_str;
            cells[r * 3 + 2] = m->state == NR_MODEL_READY
                                   ? "READY"
                                   : (owned[o++] = nr_asprintf("UNAVAILABLE: %s", m->reason));
        }
    }
    static const char *const header[] = {"Model", "Version", "Status"};
    NR_LOG_TABLE(3, header, (int)rows, cells);
    for (size_t i = 0; i < o; i++)
        free(owned[i]);
    free(owned);
    free(cells);
}

uint64_t nr_repo_inflight(const nr_repo_t *repo)
{
    uint64_t n = 0;
    for (size_t i = 0; i < repo->n; i++)
        for (size_t k = 0; k < repo->entries[i].n_versions; k++)
            if (repo->entries[i].versions[k]->state == NR_MODEL_READY)
                n += nr_model_inflight(repo->entries[i].versions[k]);
    return n;
}
