/* repository.c - the model repositories and the life cycle of their models
 * (repository.h).
 *
 * Each model is an entry (sorted by name, then namespace; never removed before
 * destroy) holding one record per version: its state, reason and, while it
 * serves, the model (the repository's reference). A load builds a new
 * generation (one parsed config shared by the versions loaded with it),
 * loads its versions without any lock, then publishes them under the write
 * lock; versions it replaces or drops are retired: out of the record, their
 * reference released. The last release of a model hands it to the reaper
 * thread, which unloads it (joining its instance threads) and marks its
 * record UNAVAILABLE "unloaded" if nothing replaced it. Loads, unloads and
 * polls run one at a time (control_mu).
 *
 * A model is known by its namespace and its name (Triton's ModelIdentifier):
 * with --model-namespacing the namespace is its repository path, so one name
 * may be in several repositories; without it every namespace is "". A request
 * naming a model alone resolves to the one entry of that name still known
 * (resolve); an ensemble's step to the model of its own namespace first, else
 * to the one model of that name (step_ns, step_target).
 */
#include "repository.h"

#include "cache.h"
#include "ensemble.h"
#include "gpu.h"
#include "objstore.h"

#include "../common/alloc.h"
#include "../common/debug.h"
#include "../common/fs.h"
#include "../common/log.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#ifdef __GLIBC__
#include <malloc.h>
#endif
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

typedef struct nr_repo_s nr_repo_t;

/* One parsed config, shared by the versions loaded with it (each model's owner). */
typedef struct {
    nr_model_config_t *cfg;
    char *json; /* its rendering, to tell a changed config from the same one */
    nr_repo_t *repo;
    _Atomic uint32_t refs;
} gen_t;

typedef struct {
    int64_t version;
    char version_str[24];
    nr_model_state_t state;
    char *reason;
    nr_model_t *model;    /* READY: serving (the repository's reference) */
    nr_model_t *retiring; /* UNLOADING: the model whose last reference is awaited */
    int64_t stamp;        /* the version directory's modification time at load */
} ver_t;

typedef struct {
    char *name;
    const char *ns; /* its namespace: a repository as given (repo->names) or NO_NS */
    char *id;     /* how Triton shows it: "<ns>::<name>", or the name when ns is "" */
    char *dir;    /* where it was loaded from (a temporary one for sent files) */
    char *tmpdir; /* a directory of sent files to remove, or NULL */
    char *reason; /* the model failed before any version existed */
    ver_t *v; size_t n; /* ascending by version */
    int64_t stamp;      /* the directory's modification time at the last load; 0: reload */
    int64_t failed_stamp; /* ... at the last failed load: a poll retries once it changes */
    char *cfg_json;     /* the serving generation's config rendering */
    bool implicit;      /* loaded only because an ensemble's load needed it (Triton's
                         * !explicitly_load_): an unload with dependents takes it too */
} entry_t;

struct nr_repo_s {
    nr_repo_options_t opts;
    char **paths;            /* [n_paths]: the directories read (an object store's mirror) */
    char **names;            /* [n_paths]: the repositories as given (a path or a URL) */
    nr_objstore_t **stores;  /* [n_paths]: the object store of a URL, else NULL */
    pthread_rwlock_t lock;   /* entries and their records */
    entry_t **e; size_t n;   /* sorted by name */
    nr_lock_t control_mu;    /* one load / unload / poll at a time */
    size_t obs_cap;          /* latency observations for new loads (0: none) */
    /* the reaper: unloads models whose last reference went */
    pthread_mutex_t reap_mu;
    pthread_cond_t reap_cv;
    nr_model_t **reap; size_t n_reap;
    size_t outstanding;      /* published models not yet unloaded */
    bool stopping;
    pthread_t reaper;
    /* the poller (POLL mode with poll_secs > 0) */
    pthread_t poller;
    bool polling;
    pthread_mutex_t poll_mu;
    pthread_cond_t poll_cv;
    /* the models being loaded (their ids), outermost first: an ensemble loads its composing
     * models first (load_dependencies), and a model met again is a cycle (control_mu) */
    const char **chain; size_t n_chain;
    /* "<p>/<name>": the object-store models dir_in brought up to date during this load,
     * unload or poll (control_mu; emptied by control_lock), so that the checks and the load
     * of one model list its bucket once */
    char **synced; size_t n_synced;
};

/* ---- files ----------------------------------------------------------------- */

static const char NO_NS[] = "";

static char *id_of(const char *ns, const char *name)
{
    return ns[0] ? nr_asprintf("%s::%s", ns, name) : nr_strdup(name);
}

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

static int64_t ns_of(struct timespec t)
{
    return (int64_t)t.tv_sec * 1000000000 + t.tv_nsec;
}

/* Calls fn(path/name, arg) for each entry of directory path but . and .. */
static void each_entry(const char *path, void (*fn)(const char *sub, void *arg), void *arg)
{
    DIR *d = opendir(path);
    struct dirent *de;
    while (d && (de = readdir(d)) != NULL) {
        if (!strcmp(de->d_name, ".") || !strcmp(de->d_name, ".."))
            continue;
        char *sub = nr_asprintf("%s/%s", path, de->d_name);
        fn(sub, arg);
        free(sub);
    }
    if (d)
        closedir(d);
}

typedef struct {
    int64_t t;
    int depth;
} stamp_walk_t;

static void stamp_entry(const char *sub, void *arg);

/* The latest modification (or status change) under path, recursively, as
 * Triton's GetDetailedModifiedTime: any file written, added or removed moves it. */
static int64_t stamp_of(const char *path, int depth)
{
    struct stat sb;
    if (stat(path, &sb) != 0)
        return 0;
    stamp_walk_t w = {ns_of(sb.st_mtim) > ns_of(sb.st_ctim) ? ns_of(sb.st_mtim)
                                                              : ns_of(sb.st_ctim),
                      depth};
    if (S_ISDIR(sb.st_mode) && depth <= 16)
        each_entry(path, stamp_entry, &w);
    return w.t;
}

static void stamp_entry(const char *sub, void *arg)
{
    stamp_walk_t *w = arg;
    int64_t s = stamp_of(sub, w->depth + 1);
    if (s > w->t)
        w->t = s;
}

static int cmp_i64(const void *a, const void *b)
{
    int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
    return x < y ? -1 : x > y;
}

/* Version directories: "0" or [1-9][0-9]*; others are ignored with a warning. */
static size_t list_versions(const char *dir, int64_t **out)
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
    qsort(v, n, sizeof(int64_t), cmp_i64);
    *out = v;
    return n;
}

/* A model directory found in the repositories: its namespace (the repository
 * path with namespacing, else NO_NS) and its name. */
typedef struct {
    const char *ns;
    char *name;
} mid_t;

static int cmp_mid(const void *a, const void *b)
{
    const mid_t *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : strcmp(x->ns, y->ns);
}

/* The model directories under every repository path, sorted by name, then namespace
 * (without namespacing a name in two paths is listed twice, alike). *complete (when not NULL):
 * false when a bucket could not be listed (its models are missing from the list). */
static size_t list_models(const nr_repo_t *repo, mid_t **out, bool *complete)
{
    if (complete != NULL)
        *complete = true;
    mid_t *ids = NULL;
    size_t n = 0;
    for (size_t p = 0; p < repo->opts.n_paths; p++) {
        const char *ns = repo->opts.namespacing ? repo->names[p] : NO_NS;
        if (repo->stores[p] != NULL) { /* the bucket's, not the mirror's */
            char **names = NULL;
            size_t k = 0;
            nr_status_t *st = nr_objstore_models(repo->stores[p], &names, &k);
            if (st != NULL) {
                NR_LOG_ERROR("failed to poll model repository '%s': %s", repo->names[p],
                             st->msg);
                nr_status_free(st);
                if (complete != NULL)
                    *complete = false;
            }
            for (size_t i = 0; i < k; i++) {
                ids = nr_grow(ids, n, sizeof(mid_t));
                ids[n++] = (mid_t){ns, names[i]};
            }
            free(names);
            continue;
        }
        DIR *d = opendir(repo->paths[p]);
        struct dirent *de;
        while (d && (de = readdir(d)) != NULL) {
            if (de->d_name[0] == '.')
                continue;
            char *dir = nr_asprintf("%s/%s", repo->paths[p], de->d_name);
            if (is_dir(dir)) {
                ids = nr_grow(ids, n, sizeof(mid_t));
                ids[n++] = (mid_t){ns, nr_strdup(de->d_name)};
            }
            free(dir);
        }
        if (d)
            closedir(d);
    }
    if (n)
        qsort(ids, n, sizeof(mid_t), cmp_mid);
    *out = ids;
    return n;
}

static void free_mids(mid_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(ids[i].name);
    free(ids);
}


/* Brings model `name` of object store p up to date, once in a control operation (synced);
 * false when that fails. */
static bool sync_once(nr_repo_t *repo, size_t p, const char *name)
{
    char *key = nr_asprintf("%zu/%s", p, name);
    for (size_t i = 0; i < repo->n_synced; i++)
        if (!strcmp(repo->synced[i], key)) {
            free(key);
            return true;
        }
    nr_status_t *st = nr_objstore_sync(repo->stores[p], name);
    if (st != NULL) {
        NR_LOG_ERROR("failed to poll model '%s' from '%s': %s", name, repo->names[p], st->msg);
        nr_status_free(st);
        free(key);
        return false;
    }
    repo->synced = nr_grow(repo->synced, repo->n_synced, sizeof(char *));
    repo->synced[repo->n_synced++] = key;
    return true;
}

/* The directory of model `name` in repository p, or NULL when it has none. An object
 * store's model is brought up to date first (objstore.h), so what loads is the bucket's now;
 * NULL too when that fails (a partial copy is not loaded: the load fails as a poll that could
 * not finish, and what serves keeps serving). control_mu held. */
static char *dir_in(nr_repo_t *repo, size_t p, const char *name)
{
    if (repo->stores[p] != NULL && !sync_once(repo, p, name))
        return NULL;
    char *dir = nr_asprintf("%s/%s", repo->paths[p], name);
    if (!is_dir(dir)) {
        free(dir);
        return NULL;
    }
    return dir;
}

/* The directory of model `name`: NULL with *dup set when two repositories
 * hold it, NULL when none does. */
static char *find_dir(nr_repo_t *repo, const char *name, char **dup)
{
    char *found = NULL;
    size_t at = 0;
    *dup = NULL;
    for (size_t p = 0; p < repo->opts.n_paths && *dup == NULL; p++) {
        char *dir = dir_in(repo, p, name);
        if (dir != NULL && found == NULL) {
            found = dir;
            at = p;
        } else if (dir != NULL) {
            *dup = nr_asprintf("model '%s' exists in multiple model repositories: %s/%s and "
                               "%s/%s",
                               name, repo->names[at], name, repo->names[p], name);
            free(dir);
            free(found);
            found = NULL;
        }
    }
    return found;
}

/* The index of repository ns (a repo->names pointer), or n_paths. */
static size_t repo_index(const nr_repo_t *repo, const char *ns)
{
    size_t p = 0;
    while (p < repo->opts.n_paths && repo->names[p] != ns)
        p++;
    return p;
}

/* The directory of model (ns, name): with namespacing the one in repository ns (none for
 * NO_NS: a model of sent files), else find_dir's. */
static char *model_dir(nr_repo_t *repo, const char *ns, const char *name, char **dup)
{
    if (!repo->opts.namespacing)
        return find_dir(repo, name, dup);
    *dup = NULL;
    size_t p = repo_index(repo, ns);
    return p < repo->opts.n_paths ? dir_in(repo, p, name) : NULL;
}

/* ---- configs --------------------------------------------------------------- */

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

/* Server-side autofill (Triton's AutoCompleteBackendFields for ONNX; a Python model's file is
 * model.py). */
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
    bool no_file = !cfg->default_model_filename || !cfg->default_model_filename[0];
    if (no_file && (is_ort_backend || (cfg->backend && !strcmp(cfg->backend, "python")))) {
        free(cfg->default_model_filename);
        cfg->default_model_filename = nr_strdup(is_ort_backend ? "model.onnx" : "model.py");
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

/* A config's `runtime` nereid cannot use: its backends are built in, so a library is only
 * looked for where Triton looks (<model>/<version>, <model>, <backend dir>/<backend>) to
 * answer as Triton does: not found, or a name that climbs out of the directory it was found
 * in; a library that is there cannot be loaded by nereid. */
static nr_status_t *runtime_refused(const nr_model_config_t *cfg, const char *dir,
                                    int64_t version)
{
    const char *be = cfg->backend ? cfg->backend : "";
    const char *bdir = nr_backend_directory() ? nr_backend_directory()
                                              : "/opt/tritonserver/backends";
    char *paths[3] = {nr_asprintf("%s/%" PRId64, dir, version), nr_strdup(dir),
                      nr_asprintf("%s/%s", bdir, be)};
    nr_status_t *st = NULL;
    for (int i = 0; i < 3 && st == NULL; i++) {
        char *full = nr_asprintf("%s/%s", paths[i], cfg->runtime);
        char *rf = exists(full) ? realpath(full, NULL) : NULL, *rd = realpath(paths[i], NULL);
        if (rf != NULL && rd != NULL) {
            size_t n = strlen(rd);
            if (strncmp(rf, rd, n) != 0 || rf[n] != '/')
                st = nr_status_new(NR_INVALID_ARG, "backend library name '%s' escapes backend "
                                   "directory '%s', for model '%s', check model config runtime "
                                   "field", cfg->runtime, paths[i], cfg->name);
            else
                st = nr_status_new(NR_UNSUPPORTED, "backend library '%s' for model '%s' cannot "
                                   "be loaded: nereid's backends are built in (onnxruntime, "
                                   "python)", full, cfg->name);
        }
        free(rf);
        free(rd);
        free(full);
    }
    if (st == NULL)
        st = nr_status_new(NR_INVALID_ARG, "unable to find backend library '%s' for model '%s', "
                           "searched: '%s' '%s' '%s' ", cfg->runtime, cfg->name, paths[0],
                           paths[1], paths[2]);
    for (int i = 0; i < 3; i++)
        free(paths[i]);
    return st;
}

/* Reads (or takes from the override), completes and validates the config of
 * model `name` in dir; *backend gets its backend. */
static bool is_ensemble(const nr_model_config_t *cfg);

/* Config sections a Triton user expects to do something that nereid does not do (yet): said
 * once per load, never ignored silently. */
static void warn_without_effect(const nr_model_config_t *cfg)
{
    if (cfg->response_cache_enable && !nr_cache_enabled())
        NR_LOG_WARN("model '%s': response_cache { enable: true } has no effect: no cache is "
                    "configured (--cache-config=local,size=<bytes>)", cfg->name);
    if (cfg->has_model_repository_agents)
        NR_LOG_WARN("model '%s': model_repository_agents has no effect: nereid runs no "
                    "repository agents", cfg->name);
}

static nr_status_t *prepare_config(const nr_repo_t *repo, const char *name, const char *dir,
                                   const nr_repo_load_params_t *p, const int64_t *v, size_t nv,
                                   nr_model_config_t **out, const nr_backend_t **backend)
{
    const nr_repo_options_t *opts = &repo->opts;
    nr_status_t *st = NULL;
    nr_model_config_t *cfg = NULL;
    if (p != NULL && p->config != NULL) {
        st = nr_cfg_parse_json(p->config, p->config_len, &cfg);
        if (st != NULL) {
            nr_status_t *w = nr_status_new(NR_INVALID_ARG, "Invalid config override: %s", st->msg);
            nr_status_free(st);
            return w;
        }
    } else {
        char *path = NULL;
        if (opts->model_config_name && opts->model_config_name[0]) {
            path = nr_asprintf("%s/configs/%s.pbtxt", dir, opts->model_config_name);
            if (!exists(path)) {
                free(path);
                path = NULL;
            }
        }
        if (!path)
            path = nr_asprintf("%s/config.pbtxt", dir);
        if (exists(path)) {
            st = nr_cfg_parse_file(path, &cfg);
        } else if (opts->autocomplete) {
            cfg = nr_cfg_new();
        } else {
            st = nr_status_new(NR_INVALID_ARG,
                               "model configuration file '%s' is missing, and auto-complete is "
                               "disabled (--disable-auto-complete-config)",
                               path);
        }
        free(path);
        if (st)
            return st;
    }
    *out = cfg;
    guess_backend(cfg, dir, v, nv);
    autofill_backend(cfg, name);
    const nr_backend_t *(*find)(const char *) =
        opts->find_backend ? opts->find_backend : nr_backend_find;
    bool ensemble = cfg->platform && !strcmp(cfg->platform, "ensemble") &&
                    (!cfg->backend || !cfg->backend[0]);
    *backend = ensemble ? NULL : cfg->backend ? find(cfg->backend) : NULL;
    if (*backend == NULL && !ensemble) { /* an ensemble runs on its composing models */
        if (cfg->runtime != NULL && cfg->runtime[0] != '\0')
            return runtime_refused(cfg, dir, nv > 0 ? v[nv - 1] : 1);
        return nr_status_new(NR_INVALID_ARG, "unable to find backend library for backend '%s', "
                             "try specifying runtime on the model configuration.",
                             cfg->backend ? cfg->backend : "");
    }
    if (!ensemble && cfg->runtime != NULL && cfg->runtime[0] != '\0') {
        char *builtin = nr_asprintf("libtriton_%s.so", (*backend)->name);
        bool same = !strcmp(cfg->runtime, builtin); /* the backend nereid has built in */
        free(builtin);
        if (!same)
            return runtime_refused(cfg, dir, nv > 0 ? v[nv - 1] : 1);
    }
    nr_cfg_normalize(cfg);
    if (!ensemble && opts->autocomplete && (*backend)->model_autocomplete && nv > 0) {
        char *mp = nr_asprintf("%s/%" PRId64 "/%s", dir, v[nv - 1], cfg->default_model_filename);
        st = (*backend)->model_autocomplete(cfg, mp);
        free(mp);
        if (st)
            return st;
        nr_cfg_normalize(cfg);
    }
    nr_cfg_fill_instance_groups(cfg, 2, nr_gpu_count());
    st = nr_cfg_validate(cfg, name);
    if (st == NULL)
        st = nr_gpu_check_config(cfg);
    if (st == NULL && strcmp(cfg->name, name) != 0)
        st = nr_status_new(NR_INVALID_ARG,
                           "unexpected directory name '%s' for model '%s', directory name must "
                           "equal model name",
                           name, cfg->name);
    if (st == NULL)
        warn_without_effect(cfg);
    return st;
}

static void gen_release(gen_t *g)
{
    if (g != NULL && atomic_fetch_sub(&g->refs, 1) == 1) {
        nr_cfg_free(g->cfg);
        free(g->json);
        free(g);
    }
}

/* ---- entries and records ----------------------------------------------------------- */

/* The entry of model (ns, name), or NULL; *pos: its index, or where it would go. */
static entry_t *find_entry(const nr_repo_t *repo, const char *ns, const char *name, size_t len,
                           size_t *pos)
{
    size_t lo = 0, hi = repo->n;
    while (lo < hi) { /* entries are sorted by name, then namespace */
        size_t mid = (lo + hi) / 2;
        const char *s = repo->e[mid]->name;
        size_t sl = strlen(s);
        int c = memcmp(s, name, sl < len ? sl : len);
        if (c == 0)
            c = sl < len ? -1 : sl > len;
        if (c == 0)
            c = strcmp(repo->e[mid]->ns, ns);
        if (c == 0) {
            if (pos)
                *pos = mid;
            return repo->e[mid];
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (pos)
        *pos = lo;
    return NULL;
}

/* The entry of model (ns, name), added if new. Write lock held. */
static entry_t *entry_for(nr_repo_t *repo, const char *ns, const char *name)
{
    size_t pos = 0;
    entry_t *e = find_entry(repo, ns, name, strlen(name), &pos);
    if (e != NULL)
        return e;
    e = nr_calloc(1, sizeof(*e));
    e->name = nr_strdup(name);
    e->ns = ns;
    e->id = id_of(ns, name);
    e->failed_stamp = INT64_MIN;
    repo->e = nr_grow(repo->e, repo->n, sizeof(entry_t *));
    memmove(&repo->e[pos + 1], &repo->e[pos], (repo->n - pos) * sizeof(entry_t *));
    repo->e[pos] = e;
    repo->n++;
    return e;
}

/* The lowest serving version of e, or NULL (its config is the entry's serving one). */
static const nr_model_t *serving_model(const entry_t *e)
{
    for (size_t i = 0; e != NULL && i < e->n; i++)
        if (e->v[i].model != NULL)
            return e->v[i].model;
    return NULL;
}

/* Whether any version of e serves. */
static bool serving(const entry_t *e)
{
    return serving_model(e) != NULL;
}

/* Whether e is still known (in Triton's global map): it failed, or has a version not
 * unloaded on purpose. */
static bool known(const entry_t *e)
{
    if (e->reason != NULL)
        return true;
    for (size_t k = 0; k < e->n; k++)
        if (!nr_repo_unloaded(e->v[k].state, e->v[k].reason))
            return true;
    return false;
}

/* How many entries are named `name`; the index of the first in *first. Lock held. */
static size_t entries_named(const nr_repo_t *repo, const char *name, size_t len, size_t *first)
{
    size_t pos = 0, n = 0;
    find_entry(repo, NO_NS, name, len, &pos); /* NO_NS sorts first */
    while (pos + n < repo->n && strlen(repo->e[pos + n]->name) == len &&
           memcmp(repo->e[pos + n]->name, name, len) == 0)
        n++;
    *first = pos;
    return n;
}

/* The entry a request naming `name` alone means (Triton's FindModelIdentifier): without
 * namespacing the one of that name; with it the one of that name still known, NULL when
 * none or several are (*n_known: how many). Lock held. */
static entry_t *resolve(const nr_repo_t *repo, const char *name, size_t len, size_t *n_known)
{
    if (!repo->opts.namespacing) {
        entry_t *e = find_entry(repo, NO_NS, name, len, NULL);
        *n_known = e != NULL;
        return e;
    }
    size_t first, n = entries_named(repo, name, len, &first);
    entry_t *only = NULL;
    *n_known = 0;
    for (size_t i = first; i < first + n; i++)
        if (known(repo->e[i])) {
            only = repo->e[i];
            (*n_known)++;
        }
    return *n_known == 1 ? only : NULL;
}

static nr_status_t *ambiguous(size_t n, const char *name, size_t len)
{
    return nr_status_new(NR_INVALID_ARG,
                         "There are %zu identifiers of model '%.*s' in global map, model "
                         "namespace must be provided to resolve ambiguity.",
                         n, (int)len, name);
}

/* The entry an ensemble of namespace ns runs for its step `name`: the model of that name in
 * ns, else the one known anywhere; NULL when none or several are (*n_known > 1). Lock held. */
static entry_t *step_target(const nr_repo_t *repo, const char *ns, const char *name,
                            size_t len, size_t *n_known)
{
    entry_t *e = find_entry(repo, ns, name, len, NULL);
    *n_known = e != NULL;
    if (e != NULL && (known(e) || !repo->opts.namespacing))
        return e;
    return resolve(repo, name, len, n_known);
}

/* The namespace an ensemble of namespace ns loads its step `name` from (Triton's FindNode
 * with fuzzy matching, over what its polling chain finds): ns itself when the model is
 * known there or in its repository, else the one namespace where it is; NULL when none or
 * several are (*several). control_mu held. */
static const char *step_ns(nr_repo_t *repo, const char *ns, const char *name, bool *several)
{
    *several = false;
    if (!repo->opts.namespacing)
        return NO_NS;
    const char *pick = NULL;
    size_t n = 0;
    for (size_t p = 0; p <= repo->opts.n_paths; p++) {
        const char *c = p == 0 ? NO_NS : repo->names[p - 1];
        pthread_rwlock_rdlock(&repo->lock);
        entry_t *e = find_entry(repo, c, name, strlen(name), NULL);
        bool has = e != NULL && known(e);
        pthread_rwlock_unlock(&repo->lock);
        if (!has && p > 0) {
            char *d = dir_in(repo, p - 1, name);
            has = d != NULL;
            free(d);
        }
        if (has && !strcmp(c, ns))
            return c;
        if (has) {
            pick = c;
            n++;
        }
    }
    *several = n > 1;
    return n == 1 ? pick : NULL;
}

static ver_t *find_ver(entry_t *e, int64_t version)
{
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i].version == version)
            return &e->v[i];
    return NULL;
}

/* The record of `version`, added (UNKNOWN) if new. Write lock held. */
static ver_t *ver_for(entry_t *e, int64_t version)
{
    ver_t *r = find_ver(e, version);
    if (r != NULL)
        return r;
    size_t pos = 0;
    while (pos < e->n && e->v[pos].version < version)
        pos++;
    e->v = nr_grow(e->v, e->n, sizeof(ver_t));
    memmove(&e->v[pos + 1], &e->v[pos], (e->n - pos) * sizeof(ver_t));
    r = &e->v[pos];
    memset(r, 0, sizeof(*r));
    r->version = version;
    snprintf(r->version_str, sizeof(r->version_str), "%" PRId64, version);
    e->n++;
    return r;
}

/* A new state for r: a model still retiring from it no longer marks it. */
static void set_state(ver_t *r, nr_model_state_t st, const char *reason)
{
    r->retiring = NULL;
    r->state = st;
    free(r->reason);
    r->reason = reason ? nr_strdup(reason) : NULL;
}

/* Takes the serving model out of record r, which becomes UNLOADING until
 * the reaper unloads it; the caller releases the returned reference after
 * unlocking. Write lock held. */
static nr_model_t *retire(ver_t *r)
{
    nr_model_t *m = r->model;
    r->model = NULL;
    if (m != NULL) {
        set_state(r, NR_MODEL_UNLOADING, NULL);
        r->retiring = m;
    }
    return m;
}

/* ---- the reaper --------------------------------------------------------------------- */

/* on_last_release of a published model: hand it to the reaper. */
static void to_reaper(nr_model_t *m)
{
    nr_repo_t *repo = ((gen_t *)m->owner)->repo;
    pthread_mutex_lock(&repo->reap_mu);
    repo->reap = nr_grow(repo->reap, repo->n_reap, sizeof(nr_model_t *));
    repo->reap[repo->n_reap++] = m;
    pthread_cond_signal(&repo->reap_cv);
    pthread_mutex_unlock(&repo->reap_mu);
}

/* Frees a model (loaded, failed, or never published) and its generation. */
static void free_model(nr_model_t *m)
{
    gen_t *g = m->owner;
    nr_model_unload(m);
    free(m->reason);
    free(m);
    gen_release(g);
}

static void *reaper_main(void *arg)
{
    nr_repo_t *repo = arg;
    pthread_mutex_lock(&repo->reap_mu);
    for (;;) {
        while (repo->n_reap == 0 && !(repo->stopping && repo->outstanding == 0))
            pthread_cond_wait(&repo->reap_cv, &repo->reap_mu);
        if (repo->n_reap == 0)
            break;
        nr_model_t *m = repo->reap[--repo->n_reap];
        pthread_mutex_unlock(&repo->reap_mu);
        nr_model_unload(m); /* its config (and name) stay until free_model */
#ifdef __GLIBC__
        /* glibc keeps what the sessions freed (weights, arenas) for later allocations;
         * give it back before the model shows as unloaded, so that its memory has left
         * the process by then (nereid-analyzer measures the next load from there) */
        malloc_trim(0);
#endif
        pthread_rwlock_wrlock(&repo->lock);
        entry_t *e = find_entry(repo, m->ns, m->name, strlen(m->name), NULL);
        ver_t *r = e ? find_ver(e, m->version) : NULL;
        if (r != NULL && r->retiring == m)
            set_state(r, NR_MODEL_UNAVAILABLE, NR_REASON_UNLOADED);
        pthread_rwlock_unlock(&repo->lock);
        /* (an entry, and its id, stays until destroy) */
        NR_LOG_INFO("successfully unloaded '%s' version %" PRId64, e ? e->id : m->name,
                    m->version);
        free_model(m);
        pthread_mutex_lock(&repo->reap_mu);
        repo->outstanding--;
        pthread_cond_broadcast(&repo->reap_cv);
    }
    pthread_mutex_unlock(&repo->reap_mu);
    return NULL;
}

/* ---- loading ------------------------------------------------------------------------ */

/* Writes the files sent with a load into a new temporary model directory. */
static nr_status_t *write_files(const nr_repo_load_params_t *p, char **out)
{
    char tmpl[] = "/tmp/nereid-model-XXXXXX";
    if (mkdtemp(tmpl) == NULL)
        return nr_status_new(NR_INTERNAL, "failed to create a temporary model directory: %s",
                             strerror(errno));
    *out = nr_strdup(tmpl);
    for (size_t i = 0; i < p->n_files; i++) {
        const nr_repo_file_t *f = &p->files[i];
        char *rel = nr_strndup(f->path, f->path_len);
        /* relative, inside the directory, each component a possible file name */
        bool bad = rel[0] == '\0' || rel[0] == '/' || strstr(rel, "..") != NULL ||
                   strlen(rel) != f->path_len;
        for (const char *c = rel; !bad && *c; c += strcspn(c, "/") + (c[strcspn(c, "/")] != 0))
            bad = strcspn(c, "/") == 0 || strcspn(c, "/") > NAME_MAX;
        if (bad) {
            nr_status_t *st = nr_status_new(
                NR_INVALID_ARG, "Invalid file path 'file:%.200s' in load parameters", rel);
            free(rel);
            return st;
        }
        char *path = nr_asprintf("%s/%s", *out, rel);
        free(rel);
        for (char *s = path + strlen(*out) + 1; (s = strchr(s, '/')) != NULL; s++) {
            *s = '\0';
            mkdir(path, 0700);
            *s = '/';
        }
        int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
        bool ok = fd >= 0;
        for (size_t off = 0; ok && off < f->len;) {
            ssize_t w = write(fd, (const char *)f->data + off, f->len - off);
            ok = w > 0;
            off += ok ? (size_t)w : 0;
        }
        if (fd >= 0 && close(fd) != 0)
            ok = false;
        nr_status_t *st =
            ok ? NULL : nr_status_new(NR_INTERNAL, "failed to write '%s': %s", path, strerror(errno));
        free(path);
        if (st)
            return st;
    }
    return NULL;
}

/* Removes and frees a directory of sent files (NULL: nothing). */
static void drop_tmpdir(char *dir)
{
    if (dir != NULL)
        nr_remove_tree(dir);
    free(dir);
}

/* A model that failed before any version existed: record why (unless
 * versions serve) and build the caller's error. */
static nr_status_t *config_failed(nr_repo_t *repo, const char *ns, const char *name,
                                  int64_t stamp, nr_status_t *st)
{
    char *reason = status_reason(st);
    pthread_rwlock_wrlock(&repo->lock);
    entry_t *e = entry_for(repo, ns, name);
    NR_LOG_ERROR("failed to load '%s': %s", e->id, reason);
    e->failed_stamp = stamp;
    if (!serving(e)) {
        free(e->reason);
        e->reason = nr_strdup(reason);
    }
    pthread_rwlock_unlock(&repo->lock);
    st = nr_status_new(NR_INTERNAL, "failed to load '%s', failed to poll from model repository: %s",
                       name, reason);
    free(reason);
    return st;
}

#define NO_VERSION_TEXT \
    "at least one version must be available under the version policy of model '%s'"

/* One new version being loaded. */
typedef struct {
    nr_model_t *m;   /* NULL when reused */
    bool reused;     /* the serving version stays (same config, same files) */
    int64_t stamp;   /* its directory's modification time */
} pending_t;

/* An ensemble's lookup of its composing models (model.h, nr_model_lookup_fn). */
/* The thread holds control_mu (a load, an unload, a poll): a backend asking for a load from
 * inside one (a model's initialize) would wait for itself. */
static _Thread_local bool t_controlling;

static void control_lock(nr_repo_t *repo)
{
    nr_lock(&repo->control_mu);
    t_controlling = true;
    for (size_t i = 0; i < repo->n_synced; i++) /* a new operation sees the buckets anew */
        free(repo->synced[i]);
    repo->n_synced = 0;
}

static void control_unlock(nr_repo_t *repo)
{
    t_controlling = false;
    nr_unlock(&repo->control_mu);
}

bool nr_repo_controlling(void)
{
    return t_controlling;
}

static nr_status_t *get_from(nr_repo_t *repo, const char *ns, const char *name, size_t len,
                             int64_t version, nr_model_t **out);

/* How a model finds another (model.h): an ensemble's step, a BLS request; arg is the model,
 * whose namespace is looked in first. */
static nr_status_t *repo_lookup(void *arg, const char *name, int64_t version, nr_model_t **out)
{
    const nr_model_t *self = arg;
    return get_from(self->repo, self->ns, name, strlen(name), version, out);
}

static nr_model_t *new_model(nr_repo_t *repo, const char *ns, gen_t *g,
                             const nr_backend_t *backend, int64_t version)
{
    nr_model_t *m = nr_calloc(1, sizeof(*m));
    atomic_fetch_add(&g->refs, 1);
    m->owner = g;
    m->cfg = g->cfg;
    m->version = version;
    m->backend = backend;
    /* a decoupled model's execute lasts until its last response: never on a frontend's thread */
    m->allow_inline = repo->opts.inline_execution && !g->cfg->decoupled;
    m->state = NR_MODEL_LOADING;
    m->on_last_release = to_reaper;
    m->lookup = repo_lookup;
    m->lookup_arg = m;
    m->repo = repo;
    m->ns = ns;
    atomic_init(&m->refs, 1);
    return m;
}

/* One load of one model, carried through its phases (load_model). */
typedef struct {
    const char *ns;     /* the model's namespace (entry_t) */
    const char *name;
    char *id;           /* as Triton shows it in its messages (entry_t) */
    const nr_repo_load_params_t *p;
    bool polling;       /* a poll: skip a model that failed and has not changed since */
    bool override;      /* a config or files sent with the request */
    char *dir;          /* where it loads from; moved into the entry when published */
    char *tmpdir;       /* a directory of sent files to remove at the end (the new one, or
                         * once published the one it replaced) */
    int64_t stamp;      /* the directory's modification time (0: sent) */
    int64_t *v; size_t nv; /* the versions to load, ascending (after the version policy) */
    gen_t *g;           /* the new generation: config and its rendering */
    const nr_backend_t *backend;
    pending_t *pv;      /* [nv] */
    bool failed;        /* a version failed to load: nothing is published */
    char *error;        /* the failed versions' reasons, in Triton's text */
    nr_model_t **retired; size_t n_retired; /* what publishing took out of service */
    const char **step_ns; /* an ensemble's: the namespace of each step's model */
} load_t;

/* Phase 1, resolve: the directory to load from: the files sent with the request, written to
 * a new temporary directory, or the model's directory in the repositories. */
static nr_status_t *load_resolve(nr_repo_t *repo, load_t *L)
{
    const nr_repo_load_params_t *p = L->p;
    if (p != NULL && p->n_files > 0) {
        if (p->config == NULL)
            return nr_status_new(NR_INVALID_ARG,
                                 "failed to load '%s', the model configuration must be given "
                                 "('config' parameter) with its files",
                                 L->name);
        nr_status_t *st = write_files(p, &L->tmpdir);
        if (st)
            return st;
        L->dir = nr_strdup(L->tmpdir);
    } else {
        char *dup = NULL;
        L->dir = model_dir(repo, L->ns, L->name, &dup);
        if (L->dir == NULL) {
            NR_LOG_ERROR("failed to poll model '%s': %s", L->name,
                         dup ? "not unique across all model repositories"
                             : "model not found in any model repository.");
            free(dup);
            return nr_status_new(NR_INTERNAL,
                                 "failed to load '%s', failed to poll from model repository",
                                 L->name);
        }
    }
    L->stamp = L->override ? 0 : stamp_of(L->dir, 0);
    return NULL;
}

/* Phase 2, the unchanged check: the serving versions came from this very directory as it is
 * now (or, polling, it failed as it is: logged once, tried again when it changes). */
static bool load_unchanged(nr_repo_t *repo, const load_t *L)
{
    pthread_rwlock_rdlock(&repo->lock);
    entry_t *e = find_entry(repo, L->ns, L->name, strlen(L->name), NULL);
    bool unchanged = serving(e) && !L->override && e->stamp == L->stamp &&
                     e->tmpdir == NULL && !strcmp(e->dir, L->dir);
    if (L->polling && e != NULL && e->failed_stamp == L->stamp)
        unchanged = true;
    pthread_rwlock_unlock(&repo->lock);
    return unchanged;
}

/* Phase 3, prepare: the versions on disk, the config (read, completed, validated) and the
 * version policy. A failure, or no version to load, is recorded on the entry (its serving
 * versions stay) and returned. */
static nr_status_t *load_prepare(nr_repo_t *repo, load_t *L)
{
    L->nv = list_versions(L->dir, &L->v);
    L->g = nr_calloc(1, sizeof(*L->g));
    L->g->repo = repo;
    atomic_init(&L->g->refs, 1);
    nr_status_t *st =
        prepare_config(repo, L->name, L->dir, L->p, L->v, L->nv, &L->g->cfg, &L->backend);
    if (st != NULL)
        return config_failed(repo, L->ns, L->name, L->stamp, st);
    L->g->json = nr_cfg_to_json(L->g->cfg, NULL);
    L->nv = apply_policy(L->g->cfg, L->v, L->nv);
    if (L->nv > 0)
        return NULL;
    nr_status_free(config_failed(repo, L->ns, L->name, L->stamp,
                                 nr_status_new(NR_INVALID_ARG, NO_VERSION_TEXT, L->name)));
    return nr_status_new(NR_INVALID_ARG, "load failed for model '%s': " NO_VERSION_TEXT "\n",
                         L->id, L->name);
}

static nr_status_t *load_model(nr_repo_t *repo, const char *ns, const char *name,
                               const nr_repo_load_params_t *p, bool polling);

static bool is_ensemble(const nr_model_config_t *cfg)
{
    return cfg->scheduling_choice == NR_SCHED_ENSEMBLE;
}

/* Whether a version of model (ns, name) serves: `version` < 0 any. Context: control_mu held. */
static bool serves(nr_repo_t *repo, const char *ns, const char *name, int64_t version)
{
    pthread_rwlock_rdlock(&repo->lock);
    entry_t *e = find_entry(repo, ns, name, strlen(name), NULL);
    bool ok = false;
    for (size_t i = 0; e != NULL && i < e->n && !ok; i++)
        ok = e->v[i].model != NULL && (version < 0 || e->v[i].version == version);
    pthread_rwlock_unlock(&repo->lock);
    return ok;
}

/* Why `name` does not serve, as Triton words the failure of a composing model: the reason a
 * load failed before any version existed (the config), else each failed version's. */
static char *dependency_failure(nr_repo_t *repo, const char *ens, const char *ns,
                                const char *dep)
{
    pthread_rwlock_rdlock(&repo->lock);
    entry_t *e = find_entry(repo, ns, dep, strlen(dep), NULL);
    char *name = id_of(ns, dep);
    char *why = NULL;
    if (e != NULL && e->reason != NULL) {
        why = nr_asprintf("ensemble '%s' depends on '%s' which is not valid. Model '%s' failed "
                          "with error: %s",
                          ens, name, name, e->reason);
    } else {
        nr_buf_t b;
        nr_buf_init(&b);
        for (size_t i = 0; e != NULL && i < e->n; i++)
            if (e->v[i].state == NR_MODEL_UNAVAILABLE && e->v[i].reason != NULL &&
                strcmp(e->v[i].reason, NR_REASON_UNLOADED) != 0)
                nr_buf_printf(&b, "version %" PRId64 " is at UNAVAILABLE state: %s;",
                              e->v[i].version, e->v[i].reason);
        if (b.len > 0)
            why = nr_asprintf("ensemble '%s' depends on '%s' which has no loaded version. Model "
                              "'%s' loading failed with error: %s",
                              ens, name, name, b.data);
        else
            why = nr_asprintf("ensemble '%s' depends on '%s' which has no loaded version.", ens,
                              name);
        nr_buf_free(&b);
    }
    pthread_rwlock_unlock(&repo->lock);
    free(name);
    return why;
}

static int cmp_cstr(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Triton's dependency checks of an ensemble (its stage B): every composing model found,
 * loaded first when it does not serve yet (so loading an ensemble loads what it needs, and
 * at start-up composing models load before the ensembles that use them), no cycle, the
 * versions it names loaded. *st gets the message; *poll_failed when a model is in no
 * repository (then the load fails as a poll that could not finish). */
static char *check_dependencies(nr_repo_t *repo, load_t *L, bool *poll_failed)
{
    const nr_cfg_ensemble_t *es = &L->g->cfg->ensemble_scheduling;
    bool *several = nr_calloc(es->n_step + 1, sizeof(bool));
    L->step_ns = nr_calloc(es->n_step + 1, sizeof(char *));
    char *why = NULL;
    for (size_t s = 0; s < es->n_step; s++) { /* which model each step is */
        const char *dep = es->step[s].model_name;
        L->step_ns[s] = step_ns(repo, L->ns, dep, &several[s]);
        char *did = L->step_ns[s] != NULL ? id_of(L->step_ns[s], dep) : NULL;
        for (size_t i = 0; did != NULL && why == NULL && i < repo->n_chain; i++)
            if (strcmp(repo->chain[i], did) == 0)
                why = nr_asprintf("circular dependency between ensembles: %s -> ... -> %s -> %s",
                                  repo->chain[i], L->id, repo->chain[i]);
        free(did);
    }
    if (why != NULL) {
        free(several);
        return why;
    }
    const char **missing = nr_calloc(es->n_step + 1, sizeof(char *));
    size_t n_missing = 0;
    repo->chain = nr_grow(repo->chain, repo->n_chain, sizeof(char *));
    repo->chain[repo->n_chain++] = L->id;
    for (size_t s = 0; s < es->n_step && why == NULL; s++) {
        const char *dep = es->step[s].model_name;
        const char *dns = L->step_ns[s];
        if (dns != NULL && serves(repo, dns, dep, -1))
            continue;
        char *dup = NULL, *dir = dns != NULL ? model_dir(repo, dns, dep, &dup) : NULL;
        free(dup);
        if (dir == NULL) {
            if (!several[s])
                NR_LOG_ERROR("failed to poll model '%s': model not found in any model "
                             "repository.",
                             dep);
            bool listed = false;
            for (size_t k = 0; k < n_missing && !listed; k++)
                listed = strcmp(missing[k], dep) == 0;
            if (!listed)
                missing[n_missing++] = dep;
            continue;
        }
        free(dir);
        nr_status_t *st = load_model(repo, dns, dep, NULL, L->polling);
        pthread_rwlock_wrlock(&repo->lock);
        entry_t *de = find_entry(repo, dns, dep, strlen(dep), NULL);
        if (de != NULL)
            de->implicit = true; /* until a load names it */
        pthread_rwlock_unlock(&repo->lock);
        if (st != NULL && strstr(st->msg, "circular dependency between ensembles") != NULL) {
            char *did = id_of(dns, dep);
            why = nr_asprintf("circular dependency between ensembles: %s -> ... -> %s -> %s",
                              L->id, did, L->id); /* the cycle, seen from here */
            free(did);
        }
        nr_status_free(st);
    }
    repo->n_chain--;
    free(several);
    if (why == NULL && n_missing > 0) {
        qsort(missing, n_missing, sizeof(char *), cmp_cstr);
        nr_buf_t b;
        nr_buf_init(&b);
        for (size_t k = 0; k < n_missing; k++)
            nr_buf_printf(&b, "%s%s", k ? ", " : "", missing[k]);
        why = nr_asprintf("ensemble %s contains models that are not available or ambiguous: %s",
                          L->id, b.data);
        nr_buf_free(&b);
        *poll_failed = true;
    }
    free(missing);
    for (size_t s = 0; s < es->n_step && why == NULL; s++) {
        const nr_cfg_ensemble_step_t *step = &es->step[s];
        const char *dns = L->step_ns[s];
        if (!serves(repo, dns, step->model_name, -1)) {
            why = dependency_failure(repo, L->id, dns, step->model_name);
        } else if (step->model_version >= 0 &&
                   !serves(repo, dns, step->model_name, step->model_version)) {
            char *dep = id_of(dns, step->model_name);
            why = nr_asprintf("ensemble '%s' depends on '%s' whose required version %" PRId64
                              " is not loaded.",
                              L->id, dep, step->model_version);
            free(dep);
        }
    }
    return why;
}

/* Triton's checks of an ensemble against its composing models' configs (stage C). */
static char *check_against_steps(nr_repo_t *repo, load_t *L)
{
    const nr_cfg_ensemble_t *es = &L->g->cfg->ensemble_scheduling;
    nr_model_t **m = nr_calloc(es->n_step + 1, sizeof(nr_model_t *));
    const nr_model_config_t **cfgs = nr_calloc(es->n_step + 1, sizeof(nr_model_config_t *));
    char *why = NULL;
    for (size_t s = 0; s < es->n_step && why == NULL; s++) {
        const char *dep = es->step[s].model_name;
        nr_status_t *st =
            get_from(repo, L->step_ns[s], dep, strlen(dep), es->step[s].model_version, &m[s]);
        if (st != NULL)
            why = nr_asprintf("%s", st->msg);
        else
            cfgs[s] = m[s]->cfg;
        nr_status_free(st);
    }
    if (why == NULL) {
        bool decoupled = false;
        nr_status_t *st = nr_ensemble_validate(L->g->cfg, cfgs, &decoupled);
        if (st != NULL)
            why = nr_asprintf("%s", st->msg);
        nr_status_free(st);
        if (why == NULL && L->g->cfg->decoupled != decoupled) { /* as Triton sets it */
            L->g->cfg->decoupled = decoupled;
            L->g->cfg->has_model_transaction_policy |= decoupled;
            free(L->g->json);
            L->g->json = nr_cfg_to_json(L->g->cfg, NULL);
        }
    }
    for (size_t s = 0; s < es->n_step; s++)
        nr_model_release(m[s]);
    free(m);
    free(cfgs);
    return why;
}

/* Phase 3b, an ensemble's dependencies: its composing models loaded (first, when they do not
 * serve yet) and checked (ensemble.h). A failure is recorded like a config's and returned in
 * Triton's words: INVALID_ARG "load failed for model '<e>': <why>\n", or, when a composing
 * model is in no repository, the poll failure. */
static nr_status_t *load_dependencies(nr_repo_t *repo, load_t *L)
{
    if (!is_ensemble(L->g->cfg))
        return NULL;
    bool poll_failed = false;
    char *why = check_dependencies(repo, L, &poll_failed);
    if (why == NULL)
        why = check_against_steps(repo, L);
    if (why == NULL)
        return NULL;
    NR_LOG_ERROR("Invalid argument: %s", why);
    pthread_rwlock_wrlock(&repo->lock);
    entry_t *e = entry_for(repo, L->ns, L->name);
    e->failed_stamp = L->stamp;
    if (!serving(e)) {
        free(e->reason);
        e->reason = nr_asprintf("Invalid argument: %s", why);
    }
    pthread_rwlock_unlock(&repo->lock);
    nr_status_t *st =
        poll_failed ? nr_status_new(NR_INTERNAL,
                                    "failed to load '%s', failed to poll from model repository",
                                    L->name)
                    : nr_status_new(NR_INVALID_ARG, "load failed for model '%s': %s\n", L->id,
                                    why);
    free(why);
    return st;
}

/* Phase 4, stage: a record per version; a serving version with the same config and files
 * stays as it is (reused), the others get a new model to load beside it (or in its place
 * when it does not serve, shown LOADING). */
static void load_stage(nr_repo_t *repo, load_t *L)
{
    L->pv = nr_calloc(L->nv, sizeof(*L->pv));
    for (size_t i = 0; i < L->nv; i++) { /* file system walks: before the lock */
        char *vdir = nr_asprintf("%s/%" PRId64, L->dir, L->v[i]);
        L->pv[i].stamp = stamp_of(vdir, 0);
        free(vdir);
    }
    pthread_rwlock_wrlock(&repo->lock);
    entry_t *e = entry_for(repo, L->ns, L->name);
    bool same_cfg = e->cfg_json != NULL && !strcmp(e->cfg_json, L->g->json) && !L->override &&
                    e->tmpdir == NULL && e->dir != NULL && !strcmp(e->dir, L->dir);
    for (size_t i = 0; i < L->nv; i++) {
        ver_t *r = ver_for(e, L->v[i]);
        L->pv[i].reused = same_cfg && r->model != NULL && r->stamp == L->pv[i].stamp;
        if (L->pv[i].reused)
            continue;
        L->pv[i].m = new_model(repo, L->ns, L->g, L->backend, L->v[i]);
        if (r->model == NULL)
            set_state(r, NR_MODEL_LOADING, NULL);
    }
    /* room for every version the publish may retire (e only grows under control_mu) */
    L->retired = nr_calloc(L->nv + e->n + 1, sizeof(*L->retired));
    pthread_rwlock_unlock(&repo->lock);
}

/* Phase 5, load: each new version, without any lock (the serving versions keep serving). */
static void load_unlocked(nr_repo_t *repo, load_t *L)
{
    for (size_t i = 0; i < L->nv; i++) {
        if (L->pv[i].reused)
            continue;
        nr_model_t *m = L->pv[i].m;
        NR_LOG_INFO("loading: %s:%" PRId64, L->id, L->v[i]);
        uint64_t t_load = nr_now_ns();
        char *mp = nr_asprintf("%s/%" PRId64 "/%s", L->dir, L->v[i],
                               L->g->cfg->default_model_filename);
        nr_status_t *st = nr_model_load(m, L->dir, mp, repo->opts.cpu_count);
        /* --model-load-retry-count: a failed version is loaded afresh, as many times more */
        for (int k = 1; st != NULL && k <= repo->opts.load_retries; k++) {
            NR_LOG_INFO("failed to load '%s' version %" PRId64 ": %s; retrying (%d of %d)",
                        L->id, L->v[i], st->msg, k, repo->opts.load_retries);
            nr_status_free(st);
            free_model(m);
            m = L->pv[i].m = new_model(repo, L->ns, L->g, L->backend, L->v[i]);
            st = nr_model_load(m, L->dir, mp, repo->opts.cpu_count);
        }
        free(mp);
        if (st) {
            m->reason = status_reason(st);
            m->state = NR_MODEL_UNAVAILABLE;
            NR_LOG_ERROR("failed to load '%s' version %" PRId64 ": %s", L->id, L->v[i],
                         m->reason);
            L->failed = true;
        } else {
            /* Triton logs no duration; the guide's slow start-ups (OpenVINO compiling,
             * TensorRT engines, warmup) are worth seeing at the default level */
            NR_LOG_INFO("'%s' version %" PRId64 " loaded in %.1f ms (session, instances and "
                        "warmup)", L->id, L->v[i], (double)(nr_now_ns() - t_load) / 1e6);
            m->state = NR_MODEL_READY;
            if (repo->obs_cap)
                nr_stats_enable_obs(&m->stats, repo->obs_cap);
        }
    }
}

/* Phase 6a, a failed load publishes nothing: the failures show on the versions nothing
 * serves, and are gathered into the error. Write lock held. */
static void publish_failure(entry_t *e, load_t *L)
{
    for (size_t i = 0; i < L->nv; i++) {
        nr_model_t *m = L->pv[i].m;
        if (m == NULL)
            continue;
        ver_t *r = find_ver(e, L->v[i]);
        if (m->state != NR_MODEL_READY) {
            char *part = nr_asprintf("%sversion %" PRId64 " is at UNAVAILABLE state: %s;",
                                     L->error ? L->error : "", L->v[i], m->reason);
            free(L->error);
            L->error = part;
        }
        if (r->model == NULL) /* nothing serves it: the failure shows */
            set_state(r, NR_MODEL_UNAVAILABLE,
                      m->state == NR_MODEL_READY ? NR_REASON_UNLOADED : m->reason);
    }
}

/* Phase 6b, every version loaded: the new set replaces the serving one at once; versions it
 * drops and versions it replaces are retired. Write lock held. */
static void publish_success(entry_t *e, load_t *L)
{
    for (size_t k = 0; k < e->n; k++) { /* versions the new set drops */
        bool kept = false;
        for (size_t i = 0; i < L->nv && !kept; i++)
            kept = e->v[k].version == L->v[i];
        if (!kept && e->v[k].model != NULL)
            L->retired[L->n_retired++] = retire(&e->v[k]);
    }
    for (size_t i = 0; i < L->nv; i++) {
        if (L->pv[i].reused)
            continue;
        ver_t *r = find_ver(e, L->v[i]);
        if (r->model != NULL)
            L->retired[L->n_retired++] = r->model;
        r->model = L->pv[i].m;
        r->stamp = L->pv[i].stamp;
        set_state(r, NR_MODEL_READY, NULL);
        L->pv[i].m = NULL; /* published */
    }
    free(e->reason);
    e->reason = NULL;
    e->stamp = L->stamp;
    free(e->cfg_json);
    e->cfg_json = nr_strdup(L->g->json);
    char *old_tmp = e->tmpdir;
    free(e->dir);
    e->dir = L->dir;
    L->dir = NULL;
    e->tmpdir = L->tmpdir;
    L->tmpdir = old_tmp; /* the previous one goes once its versions are unloaded */
}

/* Phase 6, publish: all or nothing, under the write lock. */
static void load_publish(nr_repo_t *repo, load_t *L)
{
    pthread_rwlock_wrlock(&repo->lock);
    entry_t *e = entry_for(repo, L->ns, L->name);
    e->failed_stamp = L->failed ? L->stamp : INT64_MIN;
    if (L->failed)
        publish_failure(e, L);
    else
        publish_success(e, L);
    pthread_rwlock_unlock(&repo->lock);
    if (!L->failed) {
        pthread_mutex_lock(&repo->reap_mu);
        for (size_t i = 0; i < L->nv; i++)
            repo->outstanding += !L->pv[i].reused;
        pthread_mutex_unlock(&repo->reap_mu);
    }
}

/* Phase 7, clean up, whichever phase the load ended in: what was not published is freed,
 * what was retired released (the reaper unloads it once its requests are done), the
 * temporary directory left over removed; returns st, or the failed versions' error. */
static nr_status_t *load_clean_up(load_t *L, nr_status_t *st)
{
    for (size_t i = 0; L->pv != NULL && i < L->nv; i++) /* what was not published */
        if (L->pv[i].m != NULL)
            free_model(L->pv[i].m);
    for (size_t i = 0; i < L->n_retired; i++)
        nr_model_release(L->retired[i]);
    free(L->retired);
    free(L->pv);
    free(L->v);
    free(L->dir);
    /* the old versions read their files while loading only (the backend
     * holds what it needs), so the old temporary directory can go */
    drop_tmpdir(L->tmpdir);
    gen_release(L->g);
    if (L->failed) {
        NR_LOG_INFO("failed to load '%s'", L->id);
        st = nr_status_new(NR_INVALID_ARG, "load failed for model '%s': %s\n", L->id,
                           L->error ? L->error : "");
    } else if (L->pv != NULL) {
        NR_LOG_INFO("successfully loaded '%s'", L->id);
    }
    free(L->error);
    free(L->step_ns);
    free(L->id);
    return st;
}

/* Loads model `name` (repository.h: nr_repo_load) in seven phases, as SQLite splits a
 * commit into its phases: resolve, the unchanged check, prepare (for an ensemble, then its
 * dependencies), stage, load without the lock, publish all or nothing, clean up.
 * Context: control_mu held; blocks on the backends. */
static nr_status_t *load_model(nr_repo_t *repo, const char *ns, const char *name,
                               const nr_repo_load_params_t *p, bool polling)
{
    NR_DEBUG_ASSERT(nr_lock_held(&repo->control_mu));
    load_t L = {.ns = ns, .name = name, .id = id_of(ns, name), .p = p, .polling = polling,
                .override = p != NULL && (p->config != NULL || p->n_files > 0)};
    nr_status_t *st = load_resolve(repo, &L);
    if (repo->n_chain == 0) { /* named by the load itself, not needed by an ensemble */
        pthread_rwlock_wrlock(&repo->lock);
        entry_t *e = find_entry(repo, ns, name, strlen(name), NULL);
        if (e != NULL)
            e->implicit = false;
        pthread_rwlock_unlock(&repo->lock);
    }
    if (st == NULL && !load_unchanged(repo, &L)) {
        st = load_prepare(repo, &L);
        if (st == NULL)
            st = load_dependencies(repo, &L);
        if (st == NULL) {
            load_stage(repo, &L);
            load_unlocked(repo, &L);
            load_publish(repo, &L);
        }
    }
    return load_clean_up(&L, st);
}

/* ---- loading several models at once (--model-load-thread-count) ---- */

typedef struct {
    nr_repo_t *repo;
    load_t **ls;
    size_t n;
    atomic_size_t next;
} load_pool_t;

static void *load_worker(void *arg)
{
    load_pool_t *p = arg;
    t_controlling = true; /* on behalf of the thread that holds control_mu */
    for (size_t i; (i = atomic_fetch_add(&p->next, 1)) < p->n;)
        load_unlocked(p->repo, p->ls[i]);
    t_controlling = false;
    return NULL;
}

/* Phase 5 of every staged load, on up to `threads` threads (the calling one among them). */
static void load_parallel(nr_repo_t *repo, load_t **ls, size_t n, int threads)
{
    load_pool_t p = {.repo = repo, .ls = ls, .n = n};
    atomic_init(&p.next, 0);
    size_t extra = threads > 1 ? (size_t)threads - 1 : 0;
    if (extra > n)
        extra = n > 0 ? n - 1 : 0;
    pthread_t *t = nr_calloc(extra + 1, sizeof(*t));
    size_t started = 0;
    for (; started < extra; started++)
        if (pthread_create(&t[started], NULL, load_worker, &p) != 0)
            break; /* fewer threads: the loads still all happen */
    load_worker(&p);
    t_controlling = true; /* (the caller holds control_mu) */
    for (size_t i = 0; i < started; i++)
        pthread_join(t[i], NULL);
    free(t);
}

/* Loads models `names` (repository.h: the startup loads) as load_model does one, but with
 * the slow phase (the backends' sessions, instances and warmup) of up to
 * --model-load-thread-count models at once; ensembles follow, one at a time, once the models
 * they use are published. Returns each model's status (NULL: loaded or unchanged), to free.
 * Context: control_mu held. */
static nr_status_t **load_many(nr_repo_t *repo, const mid_t *ids, size_t n, int threads)
{
    NR_DEBUG_ASSERT(nr_lock_held(&repo->control_mu));
    nr_status_t **st = nr_calloc(n ? n : 1, sizeof(*st));
    load_t *ls = nr_calloc(n ? n : 1, sizeof(*ls));
    load_t **staged = nr_calloc(n ? n : 1, sizeof(*staged));
    bool *ensemble = nr_calloc(n ? n : 1, sizeof(*ensemble));
    size_t n_staged = 0;
    for (size_t i = 0; i < n; i++) { /* phases 1-4, one by one */
        load_t *L = &ls[i];
        *L = (load_t){.ns = ids[i].ns, .name = ids[i].name, .id = id_of(ids[i].ns, ids[i].name)};
        st[i] = load_resolve(repo, L);
        pthread_rwlock_wrlock(&repo->lock); /* named by the load itself */
        entry_t *e = find_entry(repo, L->ns, L->name, strlen(L->name), NULL);
        if (e != NULL)
            e->implicit = false;
        pthread_rwlock_unlock(&repo->lock);
        if (st[i] != NULL || load_unchanged(repo, L))
            continue;
        st[i] = load_prepare(repo, L);
        if (st[i] != NULL)
            continue;
        ensemble[i] = is_ensemble(L->g->cfg);
        if (!ensemble[i]) {
            load_stage(repo, L);
            staged[n_staged++] = L;
        }
    }
    load_parallel(repo, staged, n_staged, threads);
    for (size_t k = 0; k < n_staged; k++)
        load_publish(repo, staged[k]);
    for (size_t i = 0; i < n; i++)
        if (!ensemble[i])
            st[i] = load_clean_up(&ls[i], st[i]);
    for (size_t i = 0; i < n; i++) { /* the ensembles, over published models */
        if (!ensemble[i])
            continue;
        load_t *L = &ls[i];
        if (load_unchanged(repo, L)) { /* loaded meanwhile as a step of another ensemble */
            st[i] = load_clean_up(L, NULL);
            continue;
        }
        st[i] = load_dependencies(repo, L);
        if (st[i] == NULL) {
            load_stage(repo, L);
            load_unlocked(repo, L);
            load_publish(repo, L);
        }
        st[i] = load_clean_up(L, st[i]);
    }
    free(ensemble);
    free(staged);
    free(ls);
    return st;
}

/* How many serving ensembles have a step on model t (their step resolves to it); those
 * entries in *users (to free) unless users is NULL. Lock held. */
static size_t users_of(const nr_repo_t *repo, const entry_t *t, entry_t ***users)
{
    size_t n = 0, len = strlen(t->name), n_known;
    if (users != NULL)
        *users = NULL;
    for (size_t i = 0; i < repo->n; i++) {
        entry_t *u = repo->e[i];
        const nr_model_t *um = serving_model(u);
        if (um == NULL || !is_ensemble(um->cfg))
            continue;
        const nr_cfg_ensemble_t *es = &um->cfg->ensemble_scheduling;
        bool uses = false;
        for (size_t s = 0; s < es->n_step && !uses; s++)
            uses = !strcmp(es->step[s].model_name, t->name) &&
                   step_target(repo, u->ns, t->name, len, &n_known) == t;
        if (uses && users != NULL) {
            *users = nr_grow(*users, n, sizeof(entry_t *));
            (*users)[n] = u;
        }
        n += uses;
    }
    return n;
}

/* The entries of the composing models of e's serving ensemble config (an array to free).
 * Lock held. */
static size_t steps_of(const nr_repo_t *repo, const entry_t *e, entry_t ***steps)
{
    const nr_model_t *m = serving_model(e);
    size_t n = 0, n_known;
    *steps = NULL;
    if (m == NULL || !is_ensemble(m->cfg))
        return 0;
    const nr_cfg_ensemble_t *es = &m->cfg->ensemble_scheduling;
    *steps = nr_calloc(es->n_step + 1, sizeof(entry_t *));
    for (size_t s = 0; s < es->n_step; s++) {
        const char *name = es->step[s].model_name;
        entry_t *d = step_target(repo, e->ns, name, strlen(name), &n_known);
        bool seen = d == NULL;
        for (size_t k = 0; k < n && !seen; k++)
            seen = (*steps)[k] == d;
        if (!seen)
            (*steps)[n++] = d;
    }
    return n;
}

/* Unloads every serving version of model e, and the ensembles that use it, as Triton
 * unloads them. With dependents, an ensemble's composing models go too when only its load
 * brought them in and no other serving ensemble uses them (Triton's cascading removal),
 * nested ensembles followed. control_mu held (entries stay where they are). */
static void unload_model(nr_repo_t *repo, entry_t *e, bool dependents)
{
    NR_DEBUG_ASSERT(nr_lock_held(&repo->control_mu));
    pthread_rwlock_wrlock(&repo->lock);
    entry_t **steps = NULL;
    size_t n_steps = dependents ? steps_of(repo, e, &steps) : 0;
    entry_t **users = NULL;
    size_t n_users = users_of(repo, e, &users); /* before e stops serving */
    nr_model_t **retired = nr_calloc(e->n + 1, sizeof(*retired));
    size_t k = 0;
    for (size_t i = 0; i < e->n; i++)
        if (e->v[i].model != NULL)
            retired[k++] = retire(&e->v[i]);
    e->stamp = 0; /* a later load loads it again */
    free(e->cfg_json);
    e->cfg_json = NULL;
    pthread_rwlock_unlock(&repo->lock);
    for (size_t i = 0; i < k; i++)
        nr_model_release(retired[i]);
    free(retired);
    for (size_t i = 0; i < n_users; i++) {
        NR_LOG_ERROR("Invalid argument: ensemble %s contains models that are not available or "
                     "ambiguous: %s",
                     users[i]->id, e->name);
        unload_model(repo, users[i], false);
    }
    free(users);
    for (size_t i = 0; i < n_steps; i++) {
        pthread_rwlock_rdlock(&repo->lock);
        const entry_t *d = steps[i];
        bool go = d->implicit && serving(d) && users_of(repo, d, NULL) == 0;
        pthread_rwlock_unlock(&repo->lock);
        if (go)
            unload_model(repo, steps[i], true);
    }
    free(steps);
}

/* Unloads every model named `name` (in each namespace). control_mu held. */
static void unload_named(nr_repo_t *repo, const char *name, size_t len, bool dependents)
{
    pthread_rwlock_rdlock(&repo->lock);
    size_t first, n = entries_named(repo, name, len, &first);
    entry_t **es = nr_calloc(n + 1, sizeof(entry_t *));
    memcpy(es, &repo->e[first], n * sizeof(entry_t *));
    pthread_rwlock_unlock(&repo->lock);
    for (size_t i = 0; i < n; i++)
        unload_model(repo, es[i], dependents);
    free(es);
}

/* ---- polling ------------------------------------------------------------------------ */

static void poll_once(nr_repo_t *repo)
{
    mid_t *ids;
    bool complete;
    size_t n = list_models(repo, &ids, &complete);
    for (size_t i = 0; i < n; i++) {
        if (i + 1 < n && !cmp_mid(&ids[i], &ids[i + 1])) { /* in two repositories */
            NR_LOG_ERROR("failed to poll model '%s': not unique across all model repositories",
                         ids[i].name);
            unload_named(repo, ids[i].name, strlen(ids[i].name), false);
            while (i + 1 < n && !cmp_mid(&ids[i], &ids[i + 1]))
                i++;
            continue;
        }
        nr_status_free(load_model(repo, ids[i].ns, ids[i].name, NULL, true));
    }
    /* models whose directory went: unloaded (not when a bucket could not be listed: its
     * models are not gone, the listing is; they stay until a poll sees the bucket again) */
    if (!complete) {
        free_mids(ids, n);
        return;
    }
    pthread_rwlock_rdlock(&repo->lock);
    size_t ne = repo->n;
    entry_t **gone = nr_calloc(ne + 1, sizeof(entry_t *));
    size_t ng = 0;
    for (size_t k = 0; k < ne; k++) {
        entry_t *e = repo->e[k];
        mid_t key = {e->ns, e->name};
        bool found = bsearch(&key, ids, n, sizeof(mid_t), cmp_mid) != NULL;
        if (!found && e->tmpdir == NULL)
            gone[ng++] = e;
    }
    pthread_rwlock_unlock(&repo->lock);
    for (size_t k = 0; k < ng; k++)
        unload_model(repo, gone[k], false);
    free(gone);
    free_mids(ids, n);
}

static void *poller_main(void *arg)
{
    nr_repo_t *repo = arg;
    pthread_mutex_lock(&repo->poll_mu);
    while (repo->polling) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += repo->opts.poll_secs;
        while (repo->polling &&
               pthread_cond_timedwait(&repo->poll_cv, &repo->poll_mu, &until) != ETIMEDOUT)
            ;
        if (!repo->polling)
            break;
        pthread_mutex_unlock(&repo->poll_mu);
        nr_repo_poll(repo);
        pthread_mutex_lock(&repo->poll_mu);
    }
    pthread_mutex_unlock(&repo->poll_mu);
    return NULL;
}

/* ---- the repository ----------------------------------------------------------------- */

/* The models a load of `name` means: with namespacing the model of that name in each
 * repository that has it (Triton polls every one); else, or when none has it, the one
 * model (NO_NS, name). Appended to ids[*n] (names owned). */
static mid_t *named_ids(nr_repo_t *repo, const char *name, mid_t *ids, size_t *n)
{
    size_t n0 = *n;
    for (size_t p = 0; repo->opts.namespacing && p < repo->opts.n_paths; p++) {
        char *dir = dir_in(repo, p, name);
        if (dir != NULL) {
            ids = nr_grow(ids, *n, sizeof(mid_t));
            ids[(*n)++] = (mid_t){repo->names[p], nr_strdup(name)};
        }
        free(dir);
    }
    if (*n == n0) {
        ids = nr_grow(ids, *n, sizeof(mid_t));
        ids[(*n)++] = (mid_t){NO_NS, nr_strdup(name)};
    }
    return ids;
}

/* --load-model's models (named_ids of each). */
static mid_t *startup_ids(nr_repo_t *repo, const char *const *names, size_t n,
                          size_t *out_n)
{
    mid_t *ids = NULL;
    *out_n = 0;
    for (size_t i = 0; i < n; i++)
        ids = named_ids(repo, names[i], ids, out_n);
    return ids;
}

nr_status_t *nr_repo_create(const nr_repo_options_t *opts, nr_repo_t **out)
{
    nr_repo_t *repo = nr_calloc(1, sizeof(*repo));
    repo->opts = *opts;
    repo->paths = nr_calloc(opts->n_paths + 1, sizeof(char *));
    repo->names = nr_calloc(opts->n_paths + 1, sizeof(char *));
    repo->stores = nr_calloc(opts->n_paths + 1, sizeof(nr_objstore_t *));
    for (size_t p = 0; p < opts->n_paths; p++) {
        repo->names[p] = nr_strdup(opts->paths[p]);
        repo->paths[p] = nr_strdup(opts->paths[p]);
    }
    repo->opts.paths = (const char *const *)repo->names;
    repo->opts.startup_models = NULL;
    repo->opts.n_startup_models = 0;
    pthread_rwlockattr_t ra;
    pthread_rwlockattr_init(&ra);
    /* a reload's publish must not wait behind a stream of lookups */
    pthread_rwlockattr_setkind_np(&ra, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
    pthread_rwlock_init(&repo->lock, &ra);
    pthread_rwlockattr_destroy(&ra);
    nr_lock_init(&repo->control_mu);
    pthread_mutex_init(&repo->reap_mu, NULL);
    pthread_cond_init(&repo->reap_cv, NULL);
    pthread_mutex_init(&repo->poll_mu, NULL);
    pthread_cond_init(&repo->poll_cv, NULL);
    if (pthread_create(&repo->reaper, NULL, reaper_main, repo) != 0) {
        for (size_t p = 0; p < opts->n_paths; p++) {
            free(repo->paths[p]);
            free(repo->names[p]);
        }
        free(repo->paths);
        free(repo->names);
        free(repo->stores);
        free(repo);
        return nr_status_new(NR_INTERNAL, "unable to start the model unloading thread");
    }
    for (size_t p = 0; p < opts->n_paths; p++) {
        nr_status_t *st = NULL;
        if (nr_objstore_is_url(opts->paths[p])) { /* read through a local mirror */
            st = nr_objstore_open(opts->paths[p], &repo->stores[p]);
            if (st == NULL) {
                free(repo->paths[p]);
                repo->paths[p] = nr_strdup(nr_objstore_dir(repo->stores[p]));
            }
        } else if (!is_dir(opts->paths[p])) {
            st = nr_status_new(NR_INTERNAL, "failed to stat file %s", opts->paths[p]);
        }
        if (st != NULL) {
            nr_repo_destroy(repo);
            return st;
        }
    }
    mid_t *ids;
    size_t n = list_models(repo, &ids, NULL);
    for (size_t i = 0; i + 1 < n; i++)
        if (!cmp_mid(&ids[i], &ids[i + 1])) {
            char *dup;
            free(find_dir(repo, ids[i].name, &dup));
            nr_status_t *st = nr_status_new(NR_INVALID_ARG, "%s", dup);
            free(dup);
            free_mids(ids, n);
            nr_repo_destroy(repo);
            return st;
        }
    bool all = opts->mode != NR_CONTROL_EXPLICIT ||
               (opts->n_startup_models == 1 && !strcmp(opts->startup_models[0], "*"));
    control_lock(repo);
    int threads = opts->load_threads > 0 ? opts->load_threads : 1;
    if (all) {
        nr_status_t **st = load_many(repo, ids, n, threads);
        for (size_t i = 0; i < n; i++)
            nr_status_free(st[i]);
        free(st);
    } else {
        size_t n_sm = 0;
        mid_t *sm = startup_ids(repo, opts->startup_models, opts->n_startup_models, &n_sm);
        nr_status_t **sts = load_many(repo, sm, n_sm, threads);
        for (size_t i = 0; i < n_sm; i++) {
            nr_status_t *st = sts[i];
            if (st != NULL) { /* a model not found still counts against readiness */
                pthread_rwlock_wrlock(&repo->lock);
                entry_t *e = entry_for(repo, sm[i].ns, sm[i].name);
                if (e->n == 0 && e->reason == NULL)
                    e->reason = status_reason(st);
                else
                    nr_status_free(st);
                pthread_rwlock_unlock(&repo->lock);
            }
        }
        free(sts);
        free_mids(sm, n_sm);
    }
    control_unlock(repo);
    free_mids(ids, n);
    if (opts->mode == NR_CONTROL_POLL && opts->poll_secs > 0) {
        repo->polling = true;
        if (pthread_create(&repo->poller, NULL, poller_main, repo) != 0)
            repo->polling = false;
    }
    *out = repo;
    return NULL;
}

void nr_repo_destroy(nr_repo_t *repo)
{
    if (!repo)
        return;
    if (repo->polling) {
        pthread_mutex_lock(&repo->poll_mu);
        repo->polling = false;
        pthread_cond_signal(&repo->poll_cv);
        pthread_mutex_unlock(&repo->poll_mu);
        pthread_join(repo->poller, NULL);
    }
    control_lock(repo);
    for (size_t i = 0; i < repo->n; i++)
        unload_model(repo, repo->e[i], false);
    control_unlock(repo);
    pthread_mutex_lock(&repo->reap_mu);
    repo->stopping = true;
    pthread_cond_broadcast(&repo->reap_cv);
    pthread_mutex_unlock(&repo->reap_mu);
    pthread_join(repo->reaper, NULL); /* returns once every model is unloaded */
    for (size_t i = 0; i < repo->n; i++) {
        entry_t *e = repo->e[i];
        for (size_t k = 0; k < e->n; k++)
            free(e->v[k].reason);
        free(e->v);
        drop_tmpdir(e->tmpdir);
        free(e->reason);
        free(e->name);
        free(e->id);
        free(e->dir);
        free(e->cfg_json);
        free(e);
    }
    free(repo->e);
    free(repo->reap);
    for (size_t p = 0; p < repo->opts.n_paths; p++) {
        nr_objstore_close(repo->stores[p]);
        free(repo->paths[p]);
        free(repo->names[p]);
    }
    free(repo->paths);
    free(repo->names);
    free(repo->stores);
    pthread_rwlock_destroy(&repo->lock);
    nr_lock_destroy(&repo->control_mu);
    pthread_mutex_destroy(&repo->reap_mu);
    pthread_cond_destroy(&repo->reap_cv);
    pthread_mutex_destroy(&repo->poll_mu);
    pthread_cond_destroy(&repo->poll_cv);
    free(repo->chain);
    for (size_t i = 0; i < repo->n_synced; i++)
        free(repo->synced[i]);
    free(repo->synced);
    free(repo);
}

nr_status_t *nr_repo_control_allowed(const nr_repo_t *repo)
{
    if (repo->opts.mode == NR_CONTROL_EXPLICIT)
        return NULL;
    return nr_status_new(NR_UNAVAILABLE,
                         "explicit model load / unload is not allowed if polling is enabled");
}

nr_control_mode_t nr_repo_mode(const nr_repo_t *repo)
{
    return repo->opts.mode;
}

/* A READY version of e (repository.h: nr_repo_get's errors). Lock held. */
static nr_status_t *get_version(const nr_repo_t *repo, entry_t *e, const char *name, size_t len,
                                int64_t version, nr_model_t **out)
{
    if (e == NULL || e->n == 0)
        return nr_status_new(repo->opts.namespacing && e == NULL ? NR_INVALID_ARG : NR_NOT_FOUND,
                             "Request for unknown model: '%.*s' is not found", (int)len, name);
    if (version < 0) {
        nr_model_t *m = NULL;
        for (size_t k = e->n; k-- > 0 && m == NULL;)
            m = e->v[k].model;
        if (m == NULL)
            return nr_status_new(NR_NOT_FOUND,
                                 "Request for unknown model: '%s' has no available versions",
                                 e->name);
        nr_model_ref(m);
        *out = m;
        return NULL;
    }
    ver_t *r = find_ver(e, version);
    if (r == NULL)
        return nr_status_new(NR_NOT_FOUND,
                             "Request for unknown model: '%s' version %" PRId64 " is not found",
                             e->name, version);
    if (r->model == NULL)
        return nr_status_new(NR_UNAVAILABLE,
                             "Request for unknown model: '%s' version %" PRId64
                             " is not at ready state",
                             e->name, version);
    nr_model_ref(r->model);
    *out = r->model;
    return NULL;
}

nr_status_t *nr_repo_get(nr_repo_t *repo, const char *name, size_t len, int64_t version,
                         nr_model_t **out)
{
    size_t n_known;
    pthread_rwlock_rdlock(&repo->lock);
    entry_t *e = resolve(repo, name, len, &n_known);
    nr_status_t *st =
        n_known > 1 ? ambiguous(n_known, name, len) : get_version(repo, e, name, len, version, out);
    pthread_rwlock_unlock(&repo->lock);
    return st;
}

/* nr_repo_get for a model of namespace ns (repo_lookup: an ensemble's steps, BLS): the
 * model of that name in ns first. */
static nr_status_t *get_from(nr_repo_t *repo, const char *ns, const char *name, size_t len,
                             int64_t version, nr_model_t **out)
{
    size_t n_known;
    pthread_rwlock_rdlock(&repo->lock);
    entry_t *e = step_target(repo, ns, name, len, &n_known);
    nr_status_t *st =
        n_known > 1 ? ambiguous(n_known, name, len) : get_version(repo, e, name, len, version, out);
    pthread_rwlock_unlock(&repo->lock);
    return st;
}

nr_status_t *nr_repo_ambiguity(nr_repo_t *repo, const char *name, size_t len)
{
    size_t n_known;
    pthread_rwlock_rdlock(&repo->lock);
    resolve(repo, name, len, &n_known);
    pthread_rwlock_unlock(&repo->lock);
    return n_known > 1 ? ambiguous(n_known, name, len) : NULL;
}

/* Calls fn for each record of e (or its one version-less record). */
static void visit_entry(const entry_t *e, bool ready_only, nr_repo_visit_fn fn, void *arg)
{
    if (e->n == 0) {
        if (!ready_only) {
            nr_repo_version_t rv = {e->name, -1, NULL,
                                    e->reason ? NR_MODEL_UNAVAILABLE : NR_MODEL_UNKNOWN,
                                    e->reason, NULL};
            fn(&rv, arg);
        }
        return;
    }
    for (size_t k = 0; k < e->n; k++) {
        const ver_t *r = &e->v[k];
        if (ready_only && r->state != NR_MODEL_READY)
            continue;
        nr_repo_version_t rv = {e->name, r->version, r->version_str, r->state, r->reason,
                                r->model};
        fn(&rv, arg);
    }
}

size_t nr_repo_visit(nr_repo_t *repo, const char *name, size_t len, nr_repo_visit_fn fn,
                     void *arg)
{
    size_t n = 0;
    pthread_rwlock_rdlock(&repo->lock);
    if (name == NULL) {
        for (size_t i = 0; i < repo->n; i++)
            visit_entry(repo->e[i], false, fn, arg);
        n = repo->n;
    } else {
        size_t n_known;
        entry_t *e = resolve(repo, name, len, &n_known);
        if (e != NULL)
            visit_entry(e, false, fn, arg);
        n = e != NULL;
    }
    pthread_rwlock_unlock(&repo->lock);
    return n;
}

void nr_repo_index(nr_repo_t *repo, bool ready_only, nr_repo_visit_fn fn, void *arg)
{
    mid_t *ids;
    size_t n = list_models(repo, &ids, NULL);
    pthread_rwlock_rdlock(&repo->lock);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && !cmp_mid(&ids[i], &ids[i - 1]))
            continue;
        entry_t *e = find_entry(repo, ids[i].ns, ids[i].name, strlen(ids[i].name), NULL);
        if (e != NULL) {
            visit_entry(e, ready_only, fn, arg);
        } else if (!ready_only) {
            nr_repo_version_t rv = {ids[i].name, -1, NULL, NR_MODEL_UNKNOWN, NULL, NULL};
            fn(&rv, arg);
        }
    }
    pthread_rwlock_unlock(&repo->lock);
    free_mids(ids, n);
}

bool nr_repo_all_ready(nr_repo_t *repo)
{
    bool ready = true;
    pthread_rwlock_rdlock(&repo->lock);
    for (size_t i = 0; i < repo->n && ready; i++) {
        const entry_t *e = repo->e[i];
        ready = e->reason == NULL;
        for (size_t k = 0; k < e->n && ready; k++) /* unloaded on purpose is fine */
            ready = e->v[k].state == NR_MODEL_READY ||
                    nr_repo_unloaded(e->v[k].state, e->v[k].reason);
    }
    pthread_rwlock_unlock(&repo->lock);
    return ready;
}

void nr_repo_log_table(nr_repo_t *repo)
{
    pthread_rwlock_rdlock(&repo->lock);
    size_t rows = 0;
    for (size_t i = 0; i < repo->n; i++)
        rows += repo->e[i]->n ? repo->e[i]->n : 1;
    const char **cells = nr_calloc(rows * 3 + 1, sizeof(char *));
    char **owned = nr_calloc(rows * 2 + 1, sizeof(char *));
    size_t r = 0, o = 0;
    for (size_t i = 0; i < repo->n; i++) {
        const entry_t *e = repo->e[i];
        if (e->n == 0) {
            cells[r * 3] = e->id;
            cells[r * 3 + 1] = "-";
            cells[r * 3 + 2] = owned[o++] = nr_asprintf(
                "UNAVAILABLE: %s", e->reason ? e->reason : "Not loaded: No model version was found");
            r++;
            continue;
        }
        for (size_t k = 0; k < e->n; k++, r++) {
            const ver_t *v = &e->v[k];
            cells[r * 3] = e->id;
            cells[r * 3 + 1] = v->version_str;
            cells[r * 3 + 2] = v->state == NR_MODEL_READY
                                   ? "READY"
                                   : (owned[o++] = nr_asprintf("UNAVAILABLE: %s",
                                                               v->reason ? v->reason : ""));
        }
    }
    static const char *const header[] = {"Model", "Version", "Status"};
    if (rows > 0)
        NR_LOG_TABLE(3, header, (int)rows, cells);
    pthread_rwlock_unlock(&repo->lock);
    for (size_t i = 0; i < o; i++)
        free(owned[i]);
    free(owned);
    free(cells);
}

uint64_t nr_repo_inflight(nr_repo_t *repo)
{
    uint64_t n = 0;
    pthread_rwlock_rdlock(&repo->lock);
    for (size_t i = 0; i < repo->n; i++)
        for (size_t k = 0; k < repo->e[i]->n; k++)
            if (repo->e[i]->v[k].model != NULL)
                n += nr_model_inflight(repo->e[i]->v[k].model);
    pthread_rwlock_unlock(&repo->lock);
    return n;
}

void nr_repo_enable_obs(nr_repo_t *repo, size_t cap)
{
    control_lock(repo); /* no load publishes meanwhile */
    repo->obs_cap = cap;
    pthread_rwlock_rdlock(&repo->lock);
    for (size_t i = 0; i < repo->n; i++)
        for (size_t k = 0; k < repo->e[i]->n; k++)
            if (repo->e[i]->v[k].model != NULL)
                nr_stats_enable_obs(&repo->e[i]->v[k].model->stats, cap);
    pthread_rwlock_unlock(&repo->lock);
    control_unlock(repo);
}

/* ---- model control ------------------------------------------------------------------ */

/* The error of a load of several models (one name in several namespaces): Triton's failed
 * loads, a line each, or the first other error. */
static nr_status_t *joined(nr_status_t *a, nr_status_t *b)
{
    if (a == NULL || b == NULL)
        return a != NULL ? a : b;
    if (a->code == NR_INVALID_ARG && b->code == NR_INVALID_ARG) {
        nr_status_t *j = nr_status_new(NR_INVALID_ARG, "%s%s", a->msg, b->msg);
        nr_status_free(a);
        a = j;
    }
    nr_status_free(b);
    return a;
}

nr_status_t *nr_repo_load(nr_repo_t *repo, const char *name, size_t len,
                          const nr_repo_load_params_t *p)
{
    char *n = nr_strndup(name, len);
    nr_status_t *st;
    if (n[0] == '\0' || strchr(n, '/') != NULL || !strcmp(n, ".") || !strcmp(n, "..")) {
        NR_LOG_ERROR("failed to poll model '%s': model not found in any model repository.", n);
        st = nr_status_new(NR_INTERNAL, "failed to load '%s', failed to poll from model repository",
                           n);
    } else {
        /* sent files make a model of no repository (Triton's override: namespace "") */
        size_t k = 0;
        mid_t *ids = NULL;
        control_lock(repo);
        if (p != NULL && p->n_files > 0) {
            ids = nr_calloc(1, sizeof(mid_t));
            ids[k++] = (mid_t){NO_NS, nr_strdup(n)};
        } else {
            ids = named_ids(repo, n, NULL, &k);
        }
        st = NULL;
        for (size_t i = 0; i < k; i++) /* each namespace's; the failures, one line each */
            st = joined(st, load_model(repo, ids[i].ns, ids[i].name, p, false));
        control_unlock(repo);
        free_mids(ids, k);
    }
    free(n);
    return st;
}

nr_status_t *nr_repo_unload(nr_repo_t *repo, const char *name, size_t len, bool dependents)
{
    control_lock(repo);
    unload_named(repo, name, len, dependents);
    control_unlock(repo);
    return NULL;
}

void nr_repo_poll(nr_repo_t *repo)
{
    control_lock(repo);
    poll_once(repo);
    control_unlock(repo);
}
