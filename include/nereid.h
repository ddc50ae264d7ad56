/* nereid.h - nereid as a library: an inference server in the calling process, created from the
 * same options as the command line, serving requests that never touch a socket (and, when
 * the options allow, its HTTP, gRPC and metrics ports as well).
 *
 * Link with libnereid.so (pkg-config nereid). Every type is opaque. Every call that can fail
 * returns a nereid_error_t (NULL: success) that the caller deletes; its code is one of the
 * NEREID_ERROR_* below and its message is Triton's text where Triton has one.
 *
 * Threads. Unless a function says otherwise it may be called from any thread, several at a
 * time, on one server or on several: two servers may live in one process (each its own
 * repository, models and threads). What is process-wide, as on the command line: the log
 * settings (log-* options, the last server created sets them), host policies (host-policy)
 * and the backend directory (backend-directory).
 *
 * Requests. A request names its inputs by reference: their bytes must stay valid and
 * unchanged until its completion callback has run. The completion callback runs once per
 * request that nereid_infer_async accepted, on whichever thread finished it: an instance's
 * thread, or the calling thread itself before nereid_infer_async returns (when an instance was
 * idle the request runs at once, with no thread hop), or another thread that was running
 * requests of the same model. It must not block for long nor delete the server. Outputs are
 * views into the backend's buffers (no copy) valid until the response is deleted, or copied
 * once into memory the caller's allocator gives (nereid_request_set_allocator).
 */
#ifndef NEREID_H
#define NEREID_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define NEREID_API __attribute__((visibility("default")))

/* ---- errors ---- */

typedef enum {
    NEREID_ERROR_UNKNOWN = 0,
    NEREID_ERROR_INTERNAL,
    NEREID_ERROR_NOT_FOUND,
    NEREID_ERROR_INVALID_ARG,
    NEREID_ERROR_UNAVAILABLE,
    NEREID_ERROR_UNSUPPORTED,
    NEREID_ERROR_ALREADY_EXISTS,
    NEREID_ERROR_CANCELLED,
} nereid_error_code_t;

typedef struct nereid_error nereid_error_t;

NEREID_API nereid_error_code_t nereid_error_code(const nereid_error_t *e);
/* "Invalid argument", ... (Triton's names of the codes). */
NEREID_API const char *nereid_error_code_name(const nereid_error_t *e);
NEREID_API const char *nereid_error_message(const nereid_error_t *e);
NEREID_API void nereid_error_delete(nereid_error_t *e);

/* ---- options: the command line's flags, without the leading "--" ---- */

typedef struct nereid_options nereid_options_t;

/* The command line's defaults, but for the ports: allow-http, allow-grpc and allow-metrics
 * start false (set them "true" to serve them too). */
NEREID_API nereid_error_t *nereid_options_new(nereid_options_t **out);
/* One flag ("model-repository", "/models"); value NULL for a flag that takes none
 * ("disable-auto-complete-config"). The value is copied. Repeatable flags add a value each
 * time. INVALID_ARG for a value the flag refuses, NOT_FOUND for an unknown flag. */
NEREID_API nereid_error_t *nereid_options_set(nereid_options_t *o, const char *flag,
                                              const char *value);
NEREID_API void nereid_options_delete(nereid_options_t *o);

/* ---- the server ---- */

typedef struct nereid_server nereid_server_t;

/* Creates a server: loads the repositories as the model control mode says, then starts the
 * ports the options allow. Blocks until every model to load at start has loaded or failed;
 * fails as the command line does (e.g. INTERNAL "failed to load all models" unless
 * exit-on-error is false). The options may be deleted afterwards. */
NEREID_API nereid_error_t *nereid_server_new(const nereid_options_t *o, nereid_server_t **out);
/* Stops taking requests, waits up to exit-timeout-secs for those in flight, stops its
 * threads and ports and frees it. Call it once, when no other call on it is in progress and
 * no completion callback of it is still to run, from a thread that is not one of its own. */
NEREID_API void nereid_server_delete(nereid_server_t *s);
NEREID_API bool nereid_server_is_live(nereid_server_t *s);
/* Ready as the KServe protocol says: with strict-readiness, every model loaded. */
NEREID_API bool nereid_server_is_ready(nereid_server_t *s);
/* Whether a version of a model is READY (version < 0: the highest one). */
NEREID_API bool nereid_model_is_ready(nereid_server_t *s, const char *model, int64_t version);
/* Explicit model control (model-control-mode=explicit): loads or reloads a model (and the
 * models an ensemble needs), blocking until it is READY or failed; unloads one (and the
 * ensembles that use it). ..._and_dependents also unloads the composing models that only an
 * ensemble's load brought in and no other ensemble uses (Triton's
 * TRITONSERVER_ServerUnloadModelAndDependents). Triton's errors. */
NEREID_API nereid_error_t *nereid_server_load_model(nereid_server_t *s, const char *model);
NEREID_API nereid_error_t *nereid_server_unload_model(nereid_server_t *s, const char *model);
NEREID_API nereid_error_t *nereid_server_unload_model_and_dependents(nereid_server_t *s,
                                                                     const char *model);

/* The repository index: fn is called for every model version (version NULL for a model never
 * loaded or that has no version; state NULL when never loaded), sorted by name then version.
 * fn must not call into the server. */
typedef void (*nereid_model_fn)(void *arg, const char *model, const char *version,
                                const char *state, const char *reason);
NEREID_API void nereid_server_models(nereid_server_t *s, nereid_model_fn fn, void *arg);

/* A model's metadata: its platform (*platform, if given: a copy to free with
 * nereid_string_delete), and per input and output its name, datatype ("FP32") and shape (-1
 * in front when the model batches), of the version asked for (or the highest READY one). fn,
 * if given, is called once per tensor, inputs first. */
typedef void (*nereid_tensor_fn)(void *arg, bool is_input, const char *name,
                                 const char *datatype, const int64_t *shape, size_t ndim);
NEREID_API nereid_error_t *nereid_model_metadata(nereid_server_t *s, const char *model,
                                                 int64_t version, char **platform,
                                                 nereid_tensor_fn fn, void *arg);
/* The model's configuration as Triton's JSON (free it with nereid_string_delete). */
NEREID_API nereid_error_t *nereid_model_config(nereid_server_t *s, const char *model,
                                               int64_t version, char **json);
NEREID_API void nereid_string_delete(char *s);

/* The statistics extension's figures of one version (version < 0: the highest READY). */
typedef struct {
    uint64_t inference_count, execution_count;
    uint64_t success_count, success_ns;
    uint64_t fail_count, fail_ns;
    uint64_t queue_count, queue_ns;
    uint64_t compute_input_ns, compute_infer_ns, compute_output_ns;
    uint64_t last_inference_ms;
} nereid_statistics_t;
NEREID_API nereid_error_t *nereid_model_statistics(nereid_server_t *s, const char *model,
                                                   int64_t version, nereid_statistics_t *out);

/* ---- inference ---- */

typedef struct nereid_request nereid_request_t;
typedef struct nereid_response nereid_response_t;

/* A request for a version of a model (version < 0: the highest READY one); NOT_FOUND or
 * UNAVAILABLE with Triton's texts when there is none. */
NEREID_API nereid_error_t *nereid_request_new(nereid_server_t *s, const char *model,
                                              int64_t version, nereid_request_t **out);
NEREID_API nereid_error_t *nereid_request_set_id(nereid_request_t *r, const char *id);
/* An input, by reference: shape is copied, the bytes are not (see "Requests" above). BYTES
 * elements are each a 4-byte little-endian length and the bytes, one after the other. */
NEREID_API nereid_error_t *nereid_request_add_input(nereid_request_t *r, const char *name,
                                                    const char *datatype, const int64_t *shape,
                                                    size_t ndim, const void *data,
                                                    size_t byte_size);
/* Asks for this output only (none asked: every output). */
NEREID_API nereid_error_t *nereid_request_add_output(nereid_request_t *r, const char *name);
/* Where outputs go: fn returns a buffer of byte_size bytes for output `name` (NULL: keep the
 * backend's buffer), into which nereid copies the output once before the completion callback
 * runs; the response's output then points there. Called on the completing thread. */
typedef void *(*nereid_alloc_fn)(void *arg, const char *name, size_t byte_size);
NEREID_API void nereid_request_set_allocator(nereid_request_t *r, nereid_alloc_fn fn,
                                             void *arg);
/* A request that was never submitted. */
NEREID_API void nereid_request_delete(nereid_request_t *r);

/* Runs the request asynchronously: complete(arg, response) is called once, on the thread
 * that finished it (see "Requests" above); the response, which the callee deletes, owns the
 * request from then. On an error returned here (the request refused as Triton refuses it) the
 * callback is not called and the request is still the caller's. */
typedef void (*nereid_complete_fn)(void *arg, nereid_response_t *response);
NEREID_API nereid_error_t *nereid_infer_async(nereid_request_t *r, nereid_complete_fn complete,
                                              void *arg);

/* Asks that what the request has not started yet not start (an ensemble's remaining steps);
 * the request then ends with CANCELLED "Request was cancelled" unless it finished first. Valid
 * from nereid_infer_async until the response is deleted, from any thread. */
NEREID_API void nereid_request_cancel(nereid_request_t *r);

/* The request's failure (owned by the response), or NULL. */
NEREID_API const nereid_error_t *nereid_response_error(const nereid_response_t *resp);
NEREID_API const char *nereid_response_id(const nereid_response_t *resp);
NEREID_API size_t nereid_response_output_count(const nereid_response_t *resp);
/* Output i (in Triton's order: by name): its name, datatype, shape and bytes, valid until the
 * response is deleted. */
NEREID_API nereid_error_t *nereid_response_output(const nereid_response_t *resp, size_t i,
                                                  const char **name, const char **datatype,
                                                  const int64_t **shape, size_t *ndim,
                                                  const void **data, size_t *byte_size);
/* Releases the outputs, the request and the model version they came from. */
NEREID_API void nereid_response_delete(nereid_response_t *resp);

#ifdef __cplusplus
}
#endif

#endif
