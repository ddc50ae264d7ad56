/* backend.h - the backend interface: a small versioned vtable (like an nginx
 * module or SQLite's vfs). New members are only appended, behind abi_version.
 *
 * A backend sees configs and tensors only, never HTTP, JSON, protobuf or the
 * repository. Every function returns nr_status_t * (NULL = OK).
 *
 * Threads. model_autocomplete, model_load, instance_create, instance_destroy and
 * model_unload run on the thread that loads or unloads the model: the main thread at start-up,
 * a model-control request's thread (HTTP: a thread of its own; gRPC: the completion-queue
 * thread), the repository's poller, or its reaper thread for an unload. execute runs one call
 * at a time per instance (never two at once on one inst_state) but not always on one thread:
 * on the instance's own thread; on a frontend thread that borrowed the idle instance to run a
 * request inline (an HTTP worker, the HTTP large-request pool, a gRPC completion-queue thread;
 * --inline-execution, docs/architecture.md "One request"); or on the loading thread, for
 * model_warmup, before the instance's thread starts. So a backend keeps no per-thread state
 * for an instance (thread-locals, thread affinity of its own) and must not block in execute
 * on something only another execute of the same model can release.
 */
#ifndef NR_BACKEND_H
#define NR_BACKEND_H

#include "../common/status.h"
#include "../config/model_config.h"
#include "../common/tensor.h"

#define NR_BACKEND_ABI_VERSION 1

/* One request inside a batch, seen by the backend. */
typedef struct {
    const nr_tensor_t *inputs; /* [n_inputs], in config input order; data NULL = absent optional */
    size_t n_inputs;
    const uint32_t *want; /* config output indices this request asked for */
    size_t n_want;
    nr_tensor_t *outputs; /* [n_want]: the backend fills name, dtype, dims, data, size, hold */
    uint64_t batch_size;  /* this request's batch (dims[0]); 1 when max_batch_size == 0 */
    nr_status_t *status;  /* the backend sets this on a failure of this request alone */
    const char *id;       /* the request's id; NULL or "" when it has none */
    const char *params;   /* its custom parameters as a JSON object; NULL when it has none */
    size_t params_len;
    /* Set by the backend during execute (decoupled models only): this request stays open after
     * execute returns, and its final response comes later through nr_host_t.respond, from
     * any thread (Triton's decoupled model: the instance takes its next batch meanwhile). The
     * request stays in flight (its model loaded, its memory valid) until then. */
    bool later;
} nr_batch_item_t;

typedef struct {
    nr_batch_item_t **items;
    size_t n;
    uint64_t total_batch_size; /* sum of items' batch_size */
    /* filled by execute (CLOCK_MONOTONIC ns) for statistics */
    uint64_t input_end_ns; /* inputs gathered, run starting */
    uint64_t infer_end_ns; /* run finished, outputs about to be scattered */
} nr_batch_t;

/* ---- what a backend may ask of the server (Triton's TRITONSERVER_* calls from a backend) ---- */

/* A request to another model the server serves (Triton's Business Logic Scripting). */
typedef struct {
    const char *model;
    int64_t version;            /* -1: the highest ready version */
    const char *id;             /* NULL or "": none */
    const nr_tensor_t *inputs;  /* name, dtype, dims, data, size: borrowed until done runs */
    size_t n_inputs;
    const char *const *outputs; /* requested output names; none = all */
    size_t n_outputs;
    uint64_t timeout_us;        /* 0: none */
    const char *params;         /* custom parameters, a JSON object's text; NULL: none */
    size_t params_len;
    /* the request (of the batch being executed, or answered later) whose trace this one
     * continues (Triton's InferenceRequest(trace=request.trace())), or NULL: none. Read during
     * the infer call only. */
    const nr_batch_item_t *parent;
    /* NULL: a decoupled model refuses the request. Else each response of a decoupled model
     * (outputs as for done, or err; flags NR_RESPONSE_*), on the thread executing it, before
     * done; done then carries only an error (or no outputs at all) */
    void (*on_response)(void *arg, const nr_status_t *err, const nr_tensor_t *outputs,
                        size_t n_outputs, unsigned flags);
} nr_host_req_t;

/* Its answer: status NULL and the outputs (one per requested output, name NULL for one the
 * model did not return), or the error. Both are valid during the call only. Runs on whichever
 * thread finished the request: the caller's own, inside infer, when it ran inline. */
typedef void (*nr_host_done_fn)(void *arg, const nr_status_t *status, const nr_tensor_t *outputs,
                                size_t n_outputs);

/* A file sent with a load (nr_host_t.load_model). */
typedef struct {
    const char *path; /* relative to the model directory */
    const void *data;
    size_t len;
} nr_host_file_t;

/* respond's flags: the last response of a request; no response, only the end (Triton's
 * TRITONSERVER_RESPONSE_COMPLETE_FINAL sent without a response). */
#define NR_RESPONSE_FINAL 1u
#define NR_RESPONSE_NONE 2u

typedef struct {
    /* Queues r; done runs exactly once unless an error is returned (then never). A request to
     * the calling instance's own model waits behind the batch that sends it. */
    nr_status_t *(*infer)(void *ctx, const nr_host_req_t *r, nr_host_done_fn done, void *arg);
    /* Decoupled models (model_transaction_policy { decoupled: true }) answer through this
     * instead of the item's outputs at the end of execute: one response of `item` to its
     * client, made of item->outputs as filled now (as for an ordinary answer: name, dtype,
     * dims, data, size, hold; name NULL = absent) or of err when err is not NULL; flags:
     * NR_RESPONSE_FINAL on the last, NR_RESPONSE_NONE | NR_RESPONSE_FINAL to end the request
     * without a response. After the call the outputs are released (holds dropped, cleared).
     * Nothing is sent after a final one; an item that leaves execute without its final
     * response ends with its status, or without one, with its outputs as its final response
     * (a backend that never calls respond, onnxruntime's, answers each request once).
     * Context: the thread running execute, during the call, for items of that batch; for an
     * item marked `later`, any thread until its final response, one call at a time. */
    void (*respond)(void *ctx, nr_batch_item_t *item, const nr_status_t *err, unsigned flags);
    /* Whether the item's client has gone (a cancelled gRPC stream, a C API cancel): the model
     * may stop working on it. Context: as respond's. */
    bool (*is_cancelled)(void *ctx, const nr_batch_item_t *item);
    /* Custom metrics (Triton's TRITONSERVER_MetricFamily* / TRITONSERVER_Metric*), shown on the
     * metrics endpoint: families by name (kind 0 counter, 1 gauge, 2 histogram), metrics by
     * labels (2 * n_labels strings: key, value), each handle a reference the backend gives
     * back with the matching delete; op 0 increment, 1 set, 2 observe, 3 value (into *out).
     * Errors in Triton's words. Context: any thread, at any time. */
    nr_status_t *(*metric_family_new)(const char *name, const char *help, int kind, void **out);
    void (*metric_family_delete)(void *family);
    nr_status_t *(*metric_new)(void *family, const char *const *labels, size_t n_labels,
                               const double *buckets, size_t n_buckets, bool has_buckets,
                               void **out);
    void (*metric_delete)(void *metric);
    nr_status_t *(*metric_op)(void *metric, int op, double value, double *out);
    /* Model control (Triton's TRITONSERVER_ServerLoadModelWithParameters / UnloadModel /
     * ModelIsReady): as the repository endpoints do it, in explicit model control mode only;
     * load blocks until the model is loaded or failed; config: a JSON ModelConfig or NULL;
     * files: paths relative to the model directory ("1/model.onnx") with their bytes. Refused
     * while the calling thread is itself loading a model (initialize). Context: any thread. */
    nr_status_t *(*load_model)(void *ctx, const char *name, const char *config,
                               const nr_host_file_t *files, size_t n_files);
    nr_status_t *(*unload_model)(void *ctx, const char *name, bool dependents);
    bool (*model_ready)(void *ctx, const char *name, int64_t version);
    void *ctx;
} nr_host_t;

typedef struct {
    const char *name;        /* "simple_0_0" */
    int kind;                /* nr_instance_kind_t, resolved (never AUTO) */
    int device_id;           /* GPU id for KIND_GPU, else 0 */
    int intra_op_threads;    /* this instance's share of the cores: cores / instances (>= 1) */
    int cpu_count;           /* cores this process may run on (>= 1) */
    const char *host_policy; /* policy name */
    const nr_host_t *host;   /* the server's services, for as long as the instance lives */
} nr_instance_info_t;

typedef struct nr_backend_s {
    const char *name; /* "onnxruntime" */
    int abi_version;
    /* Fill inputs/outputs/max_batch_size (and dynamic_batching) from the model
     * file when the config lacks them, as Triton's backend does. `model_path` is
     * the default model file of the first version. May be NULL (no autocomplete). */
    nr_status_t *(*model_autocomplete)(nr_model_config_t *cfg, const char *model_path);
    /* Load one version: `model_path` is <repo>/<model>/<version>/<default_model_filename>. */
    nr_status_t *(*model_load)(const nr_model_config_t *cfg, const char *model_dir,
                               const char *model_path, void **model_state);
    nr_status_t *(*instance_create)(void *model_state, const nr_instance_info_t *info,
                                    void **inst_state);
    /* Runs a batch. The return value is for a failure of the whole batch only
     * (then every item fails with it). Outputs must be filled for each item
     * whose status stays NULL; one whose name stays NULL is absent from the reply (a Python
     * model may leave out an output it was asked for, as on Triton). */
    nr_status_t *(*execute)(void *inst_state, nr_batch_t *batch);
    void (*instance_destroy)(void *inst_state);
    void (*model_unload)(void *model_state);
    /* Its models may ask whether a request's client has gone (nr_host_t.is_cancelled): a
     * frontend then watches for it where that costs (a gRPC unary call's close). */
    bool sees_cancellation;
    /* The --backend-config keys it reads (NULL-terminated): any other is said to be ignored
     * when the server starts (nr_backend_config_check). */
    const char *const *config_keys;
} nr_backend_t;

/* registry.c: the static list of backends. */
const nr_backend_t *nr_backend_find(const char *name);
/* --backend-directory: where backends look for their libraries (<dir>/<backend>/...), as in
 * Triton. Set once at start, before any model loads (the string must outlive the server);
 * NULL when not given. */
void nr_backend_set_directory(const char *dir);
const char *nr_backend_directory(void);
/* --backend-config=<backend>,<setting>=<value> (or <setting>=<value> for every backend), as
 * Triton takes it: kept for the backends to read (nr_backend_config: the backend's own value,
 * else the global one, else NULL). Set at start, before any model loads. */
NR_MUST_CHECK nr_status_t *nr_backend_config_add(const char *arg);
const char *nr_backend_config(const char *backend, const char *key);
/* One warning line for each --backend-config setting no backend reads (an unknown backend, or
 * a key its backend does not have): such a setting is ignored, and says so. At start. */
void nr_backend_config_check(void);

#endif
