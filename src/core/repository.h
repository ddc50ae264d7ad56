/* repository.h - the model repositories and the life cycle of the models in
 * them: scans <repo>/<model>/config.pbtxt and version directories, applies
 * version policies, loads and unloads versions (at startup, on explicit
 * load/unload requests, or as the directories change when polling), and
 * answers lookups by name and version.
 *
 * Versions are reference counted (model.h): a lookup returns a held
 * reference; a version being unloaded or replaced stops taking new requests,
 * finishes the ones it has, and is unloaded on the repository's own thread
 * when its last reference goes. A reload loads the new versions beside the
 * serving ones and swaps only once all of them loaded: a failed load leaves
 * the serving versions as they were.
 *
 * Threads: lookups and the read-only calls take a read lock; load, unload
 * and poll are serialized among themselves and take the write lock only to
 * publish their result (loading itself runs without it).
 */
#ifndef NR_REPOSITORY_H
#define NR_REPOSITORY_H

#include "model.h"

#include <stdbool.h>
#include <string.h>

/* --model-control-mode */
typedef enum { NR_CONTROL_NONE, NR_CONTROL_POLL, NR_CONTROL_EXPLICIT } nr_control_mode_t;

typedef struct {
    const char *const *paths; size_t n_paths;
    bool autocomplete;        /* !--disable-auto-complete-config */
    int cpu_count;
    const char *model_config_name; /* --model-config-name, may be NULL */
    bool inline_execution; /* run on the submitting thread when an instance is idle */
    nr_control_mode_t mode;
    /* EXPLICIT: the models loaded at startup (--load-model; "*" alone: all) */
    const char *const *startup_models; size_t n_startup_models;
    int poll_secs;         /* POLL: seconds between scans (0: no polling thread) */
    int load_retries;      /* --model-load-retry-count: more tries for a version that failed */
    int load_threads;      /* --model-load-thread-count: models loading at once at startup */
    /* --model-namespacing: a model is known by its repository path and its name (Triton's
     * ModelIdentifier), so one name may be in several repositories; a request by name alone
     * needs the name to be unique, and an ensemble's steps resolve in its own repository
     * first. Off: every model's namespace is "" and a name in two repositories fails. */
    bool namespacing;
    /* The backend of a config's `backend` name: NULL means nr_backend_find (the server's
     * backends); the repository's unit tests give their own. */
    const nr_backend_t *(*find_backend)(const char *name);
} nr_repo_options_t;

typedef struct nr_repo_s nr_repo_t;

/* Scans and loads what the mode loads at startup; never fails for a bad
 * model (it is recorded as UNAVAILABLE with its reason). Fails only for an
 * unusable repository path or a model found in two of them. */
NR_MUST_CHECK nr_status_t *nr_repo_create(const nr_repo_options_t *opts, nr_repo_t **out);
/* Stops polling, unloads every version and waits for each to be unloaded
 * (the caller has stopped the frontends: no request holds a version). */
void nr_repo_destroy(nr_repo_t *repo);

nr_control_mode_t nr_repo_mode(const nr_repo_t *repo);
/* NULL in explicit model control mode, else Triton's refusal of an explicit load or unload
 * (UNAVAILABLE "explicit model load / unload is not allowed if polling is enabled", in
 * MODE_NONE too): what the repository endpoints and a backend's load_model answer. */
nr_status_t *nr_repo_control_allowed(const nr_repo_t *repo);

/* Finds a READY model version for serving and takes a reference on it
 * (nr_model_release gives it back); version < 0 = highest READY version.
 * Errors are Triton's: NOT_FOUND "Request for unknown model: 'm' is not found",
 * "... 'm' version N is not found", "... 'm' has no available versions",
 * UNAVAILABLE "... 'm' version N is not at ready state". With namespacing the name must
 * be that of one model still known: else INVALID_ARG "There are N identifiers of model 'm'
 * in global map, model namespace must be provided to resolve ambiguity.", or INVALID_ARG
 * "Request for unknown model: 'm' is not found" (Triton's FindModelIdentifier). */
NR_MUST_CHECK nr_status_t *nr_repo_get(nr_repo_t *repo, const char *name, size_t len,
                                       int64_t version, nr_model_t **out);
/* nr_repo_get's INVALID_ARG when `name` means several models (namespacing), else NULL. */
NR_MUST_CHECK nr_status_t *nr_repo_ambiguity(nr_repo_t *repo, const char *name, size_t len);

/* The reason of a version unloaded on purpose (Triton's); such a version
 * does not count against readiness and has no metrics series. */
#define NR_REASON_UNLOADED "unloaded"
static inline bool nr_repo_unloaded(nr_model_state_t state, const char *reason)
{
    return state == NR_MODEL_UNLOADING ||
           (state == NR_MODEL_UNAVAILABLE && reason != NULL && !strcmp(reason, NR_REASON_UNLOADED));
}

/* One version record of a model as the repository knows it. */
typedef struct {
    const char *name;        /* the model's */
    int64_t version;         /* -1: the model has no version (reason says why) */
    const char *version_str; /* NULL when version is -1 */
    nr_model_state_t state;  /* UNKNOWN: a model directory never loaded (index only) */
    const char *reason;      /* NULL if none */
    nr_model_t *model;       /* READY: the serving version, valid during the call */
} nr_repo_version_t;
typedef void (*nr_repo_visit_fn)(const nr_repo_version_t *v, void *arg);

/* Calls fn for every version record of model `name` (name NULL: of every
 * model, by name then version), under the read lock: fn must not call into
 * the repository. A model whose load failed before any version existed is
 * one record with version -1. Returns how many models matched. */
size_t nr_repo_visit(nr_repo_t *repo, const char *name, size_t len, nr_repo_visit_fn fn,
                     void *arg);
/* The repository index as Triton builds it: every model directory in the
 * repositories now (sorted by name), with its version records, or its name
 * alone (state UNKNOWN) if it was never loaded; ready_only: READY ones. */
void nr_repo_index(nr_repo_t *repo, bool ready_only, nr_repo_visit_fn fn, void *arg);

/* Whether every model and version known is READY (strict readiness). */
bool nr_repo_all_ready(nr_repo_t *repo);
/* Prints the Model | Version | Status table. */
void nr_repo_log_table(nr_repo_t *repo);
/* Total requests queued or executing over all serving versions. */
uint64_t nr_repo_inflight(nr_repo_t *repo);
/* Every serving version, and each one loaded later, records observations
 * (for latency summaries) in a ring of cap. */
void nr_repo_enable_obs(nr_repo_t *repo, size_t cap);

/* ---- model control ------------------------------------------------------------- */

/* A model file sent with a load request ("file:<path>" parameter). */
typedef struct {
    const char *path; size_t path_len; /* relative to the model directory, e.g. "1/model.onnx" */
    const void *data; size_t len;
} nr_repo_file_t;

typedef struct {
    const char *config; size_t config_len; /* "config": a JSON ModelConfig, or NULL */
    const nr_repo_file_t *files; size_t n_files;
} nr_repo_load_params_t;

/* Loads (or reloads) model `name` as Triton's explicit load does, and
 * returns once it is READY or failed: a model already serving and
 * unchanged on disk is left as it is; a changed one is loaded beside the
 * serving versions and swapped in once every version loaded. Errors are
 * Triton's: INTERNAL "failed to load 'm', failed to poll from model
 * repository" (nereid adds ": <reason>" when the config was the cause),
 * INVALID_ARG "load failed for model 'm': version N is at UNAVAILABLE state:
 * <reason>;\n". p may be NULL. Any thread; loads are serialized. */
NR_MUST_CHECK nr_status_t *nr_repo_load(nr_repo_t *repo, const char *name, size_t len,
                                        const nr_repo_load_params_t *p);
/* Unloads every version of model `name`: they stop taking requests now
 * (UNLOADING) and unload once their requests finish (UNAVAILABLE
 * "unloaded"); the ensembles that use it go too. With dependents
 * (unload_dependents), so do the composing models of an ensemble that only
 * its load brought in and no other ensemble uses. An unknown model is no
 * error. */
NR_MUST_CHECK nr_status_t *nr_repo_unload(nr_repo_t *repo, const char *name, size_t len,
                                          bool dependents);
/* Whether the calling thread is inside a load, unload or poll (a model's initialize runs
 * there): it may not start another. */
bool nr_repo_controlling(void);
/* One polling pass: loads added and changed models, unloads removed ones. */
void nr_repo_poll(nr_repo_t *repo);

#endif
