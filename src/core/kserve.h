/* kserve.h - the KServe v2 semantics that belong to no one protocol: model
 * lookup and readiness, metadata, configuration, statistics and the
 * repository index as data, version strings, and the answers of what nereid
 * refuses (model control in MODE_NONE, CUDA shared memory without GPUs).
 * Each frontend renders the data in its own encoding (JSON, protobuf); the
 * texts and codes of the errors are Triton's and live here once.
 * Per-request inference semantics are in infer.h.
 *
 * Any thread; the repository locks what it walks.
 */
#ifndef NR_KSERVE_H
#define NR_KSERVE_H

#include "../common/buf.h"
#include "../common/status.h"
#include "model.h"
#include "server.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

/* A parameter as the protocols carry them (request parameters, settings). */
typedef enum {
    NR_PARAM_BOOL,
    NR_PARAM_INT64,  /* HTTP: a JSON integer that fits int64; gRPC: int64_param */
    NR_PARAM_UINT64, /* HTTP: a JSON integer above INT64_MAX; gRPC: uint64_param */
    NR_PARAM_DOUBLE,
    NR_PARAM_STRING,
    NR_PARAM_OTHER,  /* anything else (HTTP: null, array, object; gRPC: no value) */
} nr_param_type_t;

typedef struct {
    const char *key;
    size_t key_len;
    nr_param_type_t type;
    union {
        bool b;
        int64_t i;
        uint64_t u;
        double d;
        struct { const char *p; size_t n; } s;
    } v;
} nr_param_t;

/* Whether p's key is k. */
static inline bool nr_param_is(const nr_param_t *p, const char *k)
{
    size_t n = strlen(k);
    return p->key_len == n && memcmp(p->key, k, n) == 0;
}

/* A READY model version, with a reference the caller gives back with
 * nr_model_release (nr_infer_init takes it over): `version` < 0 means the
 * highest READY one. Errors are Triton's (NOT_FOUND "Request for unknown
 * model: ..."). */
NR_MUST_CHECK nr_status_t *nr_kserve_model(nr_server_t *s, const char *name, size_t len,
                                           int64_t version, nr_model_t **out);
bool nr_kserve_model_ready(nr_server_t *s, const char *name, size_t len, int64_t version);

/* How a frontend reads a version number, as Triton's do: HTTP routes only [0-9]+ here and
 * reads them with std::stoll (int64 overflow fails); gRPC takes any string as std::stol reads
 * it (leading blanks and a sign allowed, trailing text ignored). */
typedef enum { NR_VERSION_STOLL, NR_VERSION_STOL } nr_version_syntax_t;
/* A version given as text ("" = none: -1), read as `syntax` says. INVALID_ARG "failed to get
 * model version from specified version string '<s>' (details: stol[l]), ...". */
NR_MUST_CHECK nr_status_t *nr_kserve_parse_version(const char *s, size_t n,
                                                   nr_version_syntax_t syntax, int64_t *out);

/* ---- metadata --------------------------------------------------------------- */

typedef struct {
    nr_model_t *model;       /* the version asked for, or the highest READY one (held) */
    const char *platform;    /* the config's platform, or its backend when that is empty */
    const char **versions;   /* the version asked for, or every READY version (owned array) */
    size_t n_versions;
    char *text;              /* what versions point into */
} nr_model_meta_t;

NR_MUST_CHECK nr_status_t *nr_kserve_model_metadata(nr_server_t *s, const char *name,
                                                    size_t len, int64_t version,
                                                    nr_model_meta_t *out);
void nr_kserve_model_meta_free(nr_model_meta_t *m);
/* A tensor's shape as metadata reports it, into out[NR_MAX_DIMS + 1]: the
 * config dims with -1 prepended when the model batches. Returns the count. */
size_t nr_kserve_meta_shape(const nr_model_config_t *cfg, const nr_cfg_dims_t *dims,
                            int64_t *out);

/* ---- statistics ---------------------------------------------------------------- */

typedef void (*nr_kserve_stats_fn)(const nr_model_t *m, const nr_stats_snap_t *sn, void *arg);
/* Calls fn for every READY version of every model (name NULL), of one model,
 * or one version of it. INVALID_ARG "requested model '<m>' is not available"
 * (or "requested model version is not available for model '<m>'") when
 * nothing matches; fn is then not called. */
NR_MUST_CHECK nr_status_t *nr_kserve_stats(nr_server_t *s, const char *name, size_t len,
                                           int64_t version, nr_kserve_stats_fn fn, void *arg);

/* Every version record of every model, READY or not, in the repository's
 * order (name, then version); the frontend reads, never keeps, and calls
 * nothing of the repository from fn. */
void nr_kserve_versions(nr_server_t *s, nr_repo_visit_fn fn, void *arg);

/* ---- repository ------------------------------------------------------------------ */

typedef struct {
    const char *name;
    const char *version; /* NULL for a model that has no version */
    const char *state;   /* "READY", "UNAVAILABLE", "LOADING", ...; NULL: never loaded
                            (Triton lists the name alone) */
    const char *reason;  /* NULL unless there is one ("unloaded", a load error) */
} nr_index_entry_t;
typedef void (*nr_kserve_index_fn)(const nr_index_entry_t *e, void *arg);
/* Every model version, sorted by name then version (ready_only: READY ones). */
void nr_kserve_repo_index(nr_server_t *s, bool ready_only, nr_kserve_index_fn fn, void *arg);
/* Load and unload (repository.h: nr_repo_load, nr_repo_unload), refused
 * unless the model control mode is explicit: UNAVAILABLE "explicit model load
 * / unload is not allowed if polling is enabled", as Triton words it (in
 * MODE_NONE too). Load blocks until the model is loaded or failed. */
NR_MUST_CHECK nr_status_t *nr_kserve_repo_load(nr_server_t *s, const char *model, size_t len,
                                               const nr_repo_load_params_t *p);
NR_MUST_CHECK nr_status_t *nr_kserve_repo_unload(nr_server_t *s, const char *model, size_t len,
                                                 bool dependents);
/* A repository name in a load/unload/index request: UNSUPPORTED
 * "'repository_name' specification is not supported". */
NR_MUST_CHECK nr_status_t *nr_kserve_repo_named(void);

/* ---- logging (the logging extension) ----------------------------------------------- */

/* How a frontend reads a log settings update: `find` looks setting `key` up in the request
 * (false when the request does not set it: over HTTP a JSON null does not; *out gets its
 * value, key fields not needed); `wrong_type` and `bad_format` are the frontend's Triton texts
 * for a setting of the wrong type (`want`: NR_PARAM_BOOL, NR_PARAM_UINT64 or
 * NR_PARAM_STRING) and for a log_format that is neither "default" nor "ISO8601". */
typedef struct {
    bool (*find)(const char *key, nr_param_t *out, void *arg);
    nr_status_t *(*wrong_type)(const char *key, nr_param_type_t want);
    nr_status_t *(*bad_format)(const char *value, size_t len);
} nr_kserve_log_reader_t;
/* Applies an update as Triton does: log_file, log_info, log_warning, log_error (bool),
 * log_verbose_level (unsigned), log_format ("default" | "ISO8601") are looked up in that order
 * and each applied before the next is looked at (an error leaves the earlier ones applied);
 * other keys are ignored. log_file is refused (UNSUPPORTED "log file location can not be
 * updated through network protocol"). */
NR_MUST_CHECK nr_status_t *nr_kserve_log_update(const nr_kserve_log_reader_t *rd, void *arg);
typedef void (*nr_kserve_setting_fn)(const nr_param_t *p, void *arg);
/* The current settings, in Triton's order: log_file (string, "" = the
 * console), log_info, log_warning, log_error, log_verbose_level, log_format. */
void nr_kserve_log_settings(nr_kserve_setting_fn fn, void *arg);

/* ---- CUDA shared memory, on a server without GPUs --------------------------------- */

/* Status of one region (none exists): NOT_FOUND. */
NR_MUST_CHECK nr_status_t *nr_kserve_cuda_status(const char *region, size_t len);
/* Registering is refused: INVALID_ARG "failed to register CUDA shared memory
 * region: '<r>', GPUs not supported" (or the missing-name text for NULL). */
NR_MUST_CHECK nr_status_t *nr_kserve_cuda_register(const char *region, size_t len);

/* ---- trace settings (the trace extension; core/trace.h keeps them) ------------------- */

/* One setting of an update as its frontend read it: a list of strings (HTTP: a string is a list
 * of one), or null / an empty list (cleared), or a value of another type (not_string). */
typedef struct {
    const char *key;
    size_t key_len;
    const nr_view_t *values;
    size_t n;
    bool null;       /* HTTP null, gRPC no value: the field is cleared */
    bool not_string; /* HTTP: a value that is not a string (an array for trace_level) */
} nr_kserve_trace_item_t;

/* Applies an update of model's settings (NULL or "": the global ones), its items read in
 * Triton's order (trace_file, trace_level, trace_rate, trace_count, log_frequency; other keys
 * are ignored) with Triton's texts, which differ a little between the protocols (grpc):
 * UNSUPPORTED "trace file location can not be updated through network protocol",
 * INVALID_ARG "Unable to parse 'trace_rate', got: x", "... value is out of range [ 0,
 * 4294967295 ], got: x", "Expect only one trace level 'OFF' is specified", ... Nothing
 * changes when one is refused. */
NR_MUST_CHECK nr_status_t *nr_kserve_trace_change(const char *model,
                                                  const nr_kserve_trace_item_t *items, size_t n,
                                                  bool grpc);
/* The settings in force for model (NULL or "": the global ones), in Triton's order: fn once per
 * key with its values (trace_level: one or two; the others one). */
typedef void (*nr_kserve_trace_fn)(void *arg, const char *key, const char *const *values,
                                   size_t n);
void nr_kserve_trace_settings(const char *model, nr_kserve_trace_fn fn, void *arg);

#endif
