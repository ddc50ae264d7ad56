/* ort_int.h - internals shared by the ONNX Runtime backend's files (not a public header).
 *
 *   ort_backend.c       process env (pthread_once), OrtStatus -> nr_status_t, the vtable,
 *                       model load/validate/unload, instance create/destroy
 *   ort_execute.c       execute: inputs -> OrtValues, one Run per batch, output views
 *   ort_types.c         ONNX <-> nr_dtype table, reading a session's I/O metadata
 *   ort_options.c       config `parameters` and execution accelerators -> session options
 *   ort_autocomplete.c  Triton's auto-complete, incl. libstdc++ unordered_map order
 *
 * Threads: everything except execute runs on the loading thread. execute runs on the
 * instance's thread, one call at a time per instance; instances of one model run
 * concurrently and share only the immutable model state.
 */
#ifndef NR_ORT_INT_H
#define NR_ORT_INT_H

#include "../../common/clock.h"
#include "../../common/limits.h"
#include "../../common/status.h"
#include "../../config/model_config.h"
#include "../backend.h"

#include <onnxruntime_c_api.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Triton's `--backend-config=onnxruntime,default-max-batch-size` default. */
#define NR_ORT_DEFAULT_MAX_BATCH_SIZE 4

/* ---- ort_backend.c: process-wide, initialised once, immutable afterwards ---- */

/* Triton's model-file lookup: stat (INTERNAL "failed to stat file <p>" when missing); a
 * directory means <dir>/model.onnx (UNAVAILABLE "unable to find ..." when missing). */
NR_MUST_CHECK nr_status_t *nr__ort_resolve_path(const nr_model_config_t *cfg, const char *model_path,
                                                char **out);

/* Initialises the OrtEnv, the OrtApi pointer and the CPU OrtMemoryInfo once per
 * process; returns the (sticky) failure if that failed. Call before any other nr__ort_*. */
NR_MUST_CHECK nr_status_t *nr__ort_init(void);
const OrtApi *nr__ort_api(void);
OrtEnv *nr__ort_env(void);
const OrtMemoryInfo *nr__ort_cpu_info(void);
/* --backend-config=onnxruntime,enable-global-threadpool=1: one intra-op and one inter-op pool
 * (intra_op_thread_count, inter_op_thread_count) shared by every session, made with the env;
 * sessions then run without threads of their own (DisablePerSessionThreads). */
bool nr__ort_global_threads(void);
/* --backend-config=onnxruntime,default-max-batch-size (Triton's, for autocomplete; 4). */
int nr__ort_default_max_batch(void);
/* Converts and releases `st` ("onnx runtime error <code>: <msg>", INTERNAL). NULL -> NULL. */
NR_MUST_CHECK nr_status_t *nr__ort_status(OrtStatus *st);
/* true if `provider` (e.g. "OpenVINOExecutionProvider") is in this ORT build. */
bool nr__ort_has_provider(const char *provider);
/* "ONNX Runtime <version> at <path>": the library loaded, for messages. */
const char *nr__ort_library_version(void);

/* ---- ort_types.c ---- */

/* nr_dtype_t for an ONNX element type; NR_TYPE_INVALID when nereid does not serve it. */
nr_dtype_t nr__ort_to_dtype(ONNXTensorElementDataType t);
ONNXTensorElementDataType nr__ort_from_dtype(nr_dtype_t t);
const char *nr__ort_type_name(ONNXTensorElementDataType t); /* "FLOAT", "STRING", ... */

/* One graph input/output as the session reports it (symbolic dims are -1). */
typedef struct {
    char *name;
    ONNXTensorElementDataType type;
    size_t ndim;
    int64_t dims[NR_MAX_DIMS];
} nr__ort_io_t;

typedef struct {
    nr__ort_io_t *in;
    size_t n_in;
    nr__ort_io_t *out;
    size_t n_out;
    nr__ort_io_t *init; /* overridable initializers: allowed as request inputs */
    size_t n_init;
} nr__ort_ios_t;

NR_MUST_CHECK nr_status_t *nr__ort_read_ios(OrtSession *session, nr__ort_ios_t *ios);
void nr__ort_ios_free(nr__ort_ios_t *ios);
const nr__ort_io_t *nr__ort_io_find(const nr__ort_io_t *v, size_t n, const char *name);
/* A cheap session for metadata only: no graph optimisation, one thread, no spinning. */
NR_MUST_CHECK nr_status_t *nr__ort_meta_session(const char *path, OrtSession **out);
/* "[1,-1,3]" into buf (Triton's ShapeToString). Returns buf. */
char *nr__ort_shape_str(const int64_t *dims, size_t ndim, char *buf, size_t cap);

/* ---- ort_options.c ---- */

/* Model-level settings parsed once from the config's `parameters`. */
typedef struct {
    int intra_op_threads; /* 0 = the server's choice (see nr__ort_intra_threads) */
    int worker_nice;      /* `intra_op_worker_nice`: nice of the intra-op workers, 0..19 */
    int inter_op_threads; /* 0 = ORT default */
    int execution_mode;   /* 0 sequential, 1 parallel */
    int mem_arena;        /* -1 unset, 0, 1 */
    int mem_pattern;      /* -1 unset, 0, 1 */
    bool allow_spinning;  /* `allow_spinning` parameter; default false */
    GraphOptimizationLevel graph_level;
    const char *device_alloc_for_init; /* borrowed from cfg; NULL if unset */
    const char *arena_shrinkage;       /* run option; borrowed; NULL if unset */
    const nr_cfg_accelerator_t *cpu_openvino; /* cpu_execution_accelerator openvino, or NULL */
} nr__ort_opts_t;

NR_MUST_CHECK nr_status_t *nr__ort_opts_parse(const nr_model_config_t *cfg, nr__ort_opts_t *o);
/* Intra-op threads of one instance's session: the `intra_op_thread_count` parameter, else
 * all cores when the workers run at background priority, else the instance's share. */
int nr__ort_intra_threads(const nr__ort_opts_t *o, const nr_instance_info_t *info);
/* Session options for one instance: threads, spinning, arenas, graph level, EPs (GPU
 * accelerators + CUDA EP for KIND_GPU, then CPU accelerators), custom-op libraries. */
NR_MUST_CHECK nr_status_t *nr__ort_session_options(const nr_model_config_t *cfg,
                                                   const nr__ort_opts_t *o,
                                                   const nr_instance_info_t *info,
                                                   OrtSessionOptions **out);
/* Triton's ParseBoolValue / ParseIntValue (std::stoi) with their error texts. */
NR_MUST_CHECK nr_status_t *nr__ort_parse_bool(const char *s, bool *out);
NR_MUST_CHECK nr_status_t *nr__ort_parse_int(const char *s, int *out);
const char *nr__ort_param(const nr_model_config_t *cfg, const char *key); /* NULL if absent */

/* ---- ort_autocomplete.c ---- */

NR_MUST_CHECK nr_status_t *nr__ort_autocomplete(nr_model_config_t *cfg, const char *model_path);
/* The iteration order of a libstdc++ std::unordered_map<std::string,...> after
 * emplacing names[0..n-1] in that order: order[k] = index of the k-th name visited. */
void nr__ort_stdmap_order(const char *const *names, size_t n, size_t *order);

/* ---- ort_backend.c / ort_execute.c: model and instance state ---- */

/* Per config input / output, resolved once at load. */
typedef struct {
    const char *name;     /* borrowed from cfg */
    nr_dtype_t dtype;
    ONNXTensorElementDataType ort_type;
    size_t elem_size;     /* 0 for STRING */
    bool optional;
    bool ragged;          /* allow_ragged_batch: the batch is concatenated 1-D */
    size_t model_ndim;    /* rank the model declares (0 = scalar: fed as a rank-0 tensor) */
    bool has_reshape;
    const nr_cfg_dims_t *dims;    /* config dims (no batch dim) */
    const nr_cfg_dims_t *reshape; /* valid if has_reshape */
} nr__ort_tensor_t;

typedef struct {
    const nr_model_config_t *cfg; /* borrowed: the core keeps it alive until model_unload */
    char *path;                   /* resolved model file */
    nr__ort_opts_t opts;
    bool batching;                /* max_batch_size > 0 */
    nr__ort_tensor_t *in;
    size_t n_in;
    nr__ort_tensor_t *out;
    size_t n_out;
} nr__ort_model_t;

typedef struct {
    void *p;
    size_t cap;
} nr__ort_scratch_t;

typedef struct {
    const nr__ort_model_t *model;
    OrtSession *session;
    OrtRunOptions *run_opts;
    /* per-execute scratch, reused across batches (one thread at a time) */
    nr__ort_scratch_t *gather;  /* [n_in] contiguous batch inputs */
    OrtValue **in_vals;         /* [n_in] */
    const char **in_names;      /* [n_in] */
    OrtValue **out_vals;        /* [n_out] */
    const char **out_names;     /* [n_out] */
    uint32_t *out_idx;          /* [n_out] config index per requested output */
    nr__ort_scratch_t strbuf;   /* STRING element offsets / contents */
    nr__ort_scratch_t outinfo;  /* per-output bookkeeping of one execute */
} nr__ort_inst_t;

NR_MUST_CHECK nr_status_t *nr__ort_execute(void *inst_state, nr_batch_t *batch);

#endif
