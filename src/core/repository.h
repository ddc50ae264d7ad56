/* repository.h - the model repositories: scans <repo>/<model>/config.pbtxt
 * and version directories, applies version policies, loads every model at
 * startup and answers lookups by name and version.
 *
 * With --model-control-mode=none the set of models is fixed after load, so
 * lookups take no lock and models live until nr_repo_destroy.
 */
#ifndef NR_REPOSITORY_H
#define NR_REPOSITORY_H

#include "model.h"

#include <stdbool.h>

typedef struct {
    const char *const *paths; size_t n_paths;
    bool autocomplete;        /* !--disable-auto-complete-config */
    int cpu_count;
    const char *model_config_name; /* --model-config-name, may be NULL */
    bool inline_execution; /* run on the submitting thread when an instance is idle */
} nr_repo_options_t;

/* One model directory: its config (NULL if it failed to parse) and versions. */
typedef struct {
    char *name;
    char *dir;
    nr_model_config_t *cfg;
    nr_model_t **versions; size_t n_versions; /* ascending by version */
    char *reason; /* set when the model failed before any version existed */
} nr_repo_entry_t;

typedef struct nr_repo_s nr_repo_t;

/* Scans and loads everything; never fails for a bad model (it is recorded as
 * UNAVAILABLE with its reason). Fails only for an unusable repository path. */
NR_MUST_CHECK nr_status_t *nr_repo_create(const nr_repo_options_t *opts, nr_repo_t **out);
void nr_repo_destroy(nr_repo_t *repo);

size_t nr_repo_count(const nr_repo_t *repo);
const nr_repo_entry_t *nr_repo_entry_at(const nr_repo_t *repo, size_t i); /* sorted by name */
const nr_repo_entry_t *nr_repo_entry(const nr_repo_t *repo, const char *name, size_t len);
bool nr_repo_all_ready(const nr_repo_t *repo);

/* Finds a READY model version for serving; version < 0 = highest READY version.
 * Errors are Triton's: NOT_FOUND "Request for unknown model: 'm' is not found",
 * "... 'm' version N is not found", "... 'm' has no available versions",
 * UNAVAILABLE "... 'm' version N is not at ready state". */
NR_MUST_CHECK nr_status_t *nr_repo_get(const nr_repo_t *repo, const char *name, size_t len,
                                       int64_t version, nr_model_t **out);
/* Prints the Model | Version | Status table. */
void nr_repo_log_table(const nr_repo_t *repo);
/* Total requests queued or executing over all models. */
uint64_t nr_repo_inflight(const nr_repo_t *repo);

#endif
