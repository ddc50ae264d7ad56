/* ort_options.c - the ORT backend's config `parameters` and execution accelerators,
 * turned into OrtSessionOptions for one instance, with Triton's keys and error texts.
 *
 * Model-level values are parsed once at load (nr__ort_opts_parse) so that bad values fail
 * the load; session options are built per instance (they depend on the instance's kind,
 * device and thread budget). Spinning is off by default (spec/anchors.md §5): parameter
 * `allow_spinning` (bool, nereid's own key) turns ORT's intra- and inter-op spinning on.
 * Runs on the loading thread; reads only the immutable config.
 *
 * Thread sizing (docs/performance.md, "CPU sizing"): by default each instance's session
 * gets its share of the cores (cores / instances of the model, at least 1), so that the
 * instances together fit the cores: the best throughput under load. nereid's own key
 * `intra_op_worker_nice` (0..19, default 0) trades some of it for latency at low load:
 * above 0, every session gets a pool over all cores whose workers run at that nice value,
 * while the thread that calls Run keeps normal priority. One request in flight then runs
 * on all cores; with as many requests as instances the callers own the cores and the
 * workers get what is left. `intra_op_thread_count` overrides the size in both modes.
 */
#include "ort_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

const char *nr__ort_param(const nr_model_config_t *cfg, const char *key)
{
    const char *found = NULL; /* map semantics: the last entry wins */
    for (size_t i = 0; i < cfg->n_parameters; i++)
        if (strcmp(cfg->parameters[i].key, key) == 0)
            found = cfg->parameters[i].value ? cfg->parameters[i].value : "";
    return found;
}

nr_status_t *nr__ort_parse_bool(const char *s, bool *out)
{
    static const char *const yes[] = {"true", "on", "1"}, *const no[] = {"false", "off", "0"};
    for (size_t i = 0; i < 3; i++) {
        if (strcasecmp(s, yes[i]) == 0) {
            *out = true;
            return NULL;
        }
        if (strcasecmp(s, no[i]) == 0) {
            *out = false;
            return NULL;
        }
    }
    return nr_status_new(NR_INVALID_ARG, "failed to convert '%s' to boolean", s);
}

/* std::stoi: leading spaces, sign, digits; trailing text ignored. Triton crashes on an
 * out-of-range value (uncaught std::out_of_range); we report it like a bad number. */
nr_status_t *nr__ort_parse_int(const char *s, int *out)
{
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    const char *digits = (*p == '+' || *p == '-') ? p + 1 : p;
    if (!isdigit((unsigned char)*digits))
        return nr_status_new(NR_INVALID_ARG, "failed to convert '%s' to integral number", s);
    errno = 0;
    long v = strtol(p, NULL, 10);
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX)
        return nr_status_new(NR_INVALID_ARG, "failed to convert '%s' to integral number", s);
    *out = (int)v;
    return NULL;
}

static nr_status_t *parse_ull(const char *s)
{
    const char *p = s;
    while (isspace((unsigned char)*p))
        p++;
    const char *digits = (*p == '+' || *p == '-') ? p + 1 : p;
    if (!isdigit((unsigned char)*digits))
        return nr_status_new(NR_INVALID_ARG,
                             "failed to convert '%s' to unsigned long long integral number", s);
    return NULL;
}

/* TryParseModelStringParameter: absent -> dflt. */
static nr_status_t *param_int(const nr_model_config_t *cfg, const char *key, int dflt, int *out)
{
    const char *v = nr__ort_param(cfg, key);
    *out = dflt;
    return v ? nr__ort_parse_int(v, out) : NULL;
}

/* -1 when absent. */
static nr_status_t *param_tri(const nr_model_config_t *cfg, const char *key, int *out)
{
    const char *v = nr__ort_param(cfg, key);
    bool b = false;
    *out = -1;
    if (v == NULL)
        return NULL;
    nr_status_t *st = nr__ort_parse_bool(v, &b);
    if (!st)
        *out = b ? 1 : 0;
    return st;
}

static GraphOptimizationLevel graph_level(const nr_model_config_t *cfg)
{
    if (!cfg->has_optimization || !cfg->optimization.has_graph)
        return ORT_ENABLE_ALL;
    switch (cfg->optimization.graph_level) {
    case -1: return ORT_ENABLE_BASIC;
    case 1: return ORT_ENABLE_EXTENDED;
    case 2: return ORT_DISABLE_ALL;
    default: return ORT_ENABLE_ALL;
    }
}

static nr_status_t *unknown_accelerator(const char *name)
{
    return nr_status_new(NR_INVALID_ARG, "unknown Execution Accelerator '%s' is requested", name);
}

/* A provider the library loaded lacks: what asked for it, the library, the build that has it. */
static nr_status_t *no_provider(const char *what, const char *provider, const char *build,
                                const char *how)
{
    return nr_status_new(NR_INVALID_ARG,
                         "%s is requested, but the ONNX Runtime library loaded (%s) has no %s "
                         "provider; the %s build has it (%s)",
                         what, nr__ort_library_version(), provider, build, how);
}

/* The same for the GPU providers, which the onnxruntime-gpu build has. */
static nr_status_t *no_gpu_provider(const char *what, const char *provider)
{
    return no_provider(what, provider, "onnxruntime-gpu",
                       "make gpu-backend, then --backend-directory=.deps/backends-gpu");
}

/* A GPU provider that ONNX Runtime has but cannot set up (its libraries, the driver, an
 * option it refuses): ORT's text without its source location, after what failed. */
static nr_status_t *provider_failed(const char *provider, int device_id, OrtStatus *ost)
{
    nr_status_t *st = nr__ort_status(ost);
    if (st == NULL)
        return NULL;
    const char *m = st->msg, *p = strstr(m, "[ONNXRuntimeError] : ");
    if (p) /* "... [ONNXRuntimeError] : 1 : FAIL : <text>" */
        for (int colons = 0; *p && colons < 3; p++)
            colons += *p == ':';
    if (p == NULL)
        p = m;
    p += *p == ' ';
    int len = (int)strlen(p);
    while (len > 0 && (p[len - 1] == '\n' || p[len - 1] == ' '))
        len--; /* ORT's texts may end in a newline, which would break the model table */
    nr_status_t *out = nr_status_new(NR_INTERNAL, "the %s provider of %s failed for GPU %d: %.*s",
                                     provider, nr__ort_library_version(), device_id, len, p);
    nr_status_free(st);
    return out;
}

/* The OpenVINO provider options ONNX Runtime 1.24 takes (its provider_options keys). */
static const char *const openvino_keys[] = {
    "device_type", "precision", "num_of_threads", "num_streams", "cache_dir", "load_config",
    "enable_qdq_optimizer", "disable_dynamic_shapes", "model_priority",
    "enable_opencl_throttling", "context", "reshape_input", "layout",
};

/* cpu_execution_accelerator is read for every instance kind, so it is checked at load:
 * an unknown name or parameter, or a provider the loaded library lacks, fails the load. */
static nr_status_t *parse_cpu_accelerators(const nr_model_config_t *cfg, nr__ort_opts_t *o)
{
    if (!cfg->has_optimization)
        return NULL;
    for (size_t i = 0; i < cfg->optimization.n_cpu_execution_accelerator; i++) {
        const nr_cfg_accelerator_t *ea = &cfg->optimization.cpu_execution_accelerator[i];
        const char *name = ea->name ? ea->name : "";
        if (strcmp(name, "openvino") != 0)
            return unknown_accelerator(name);
        if (!nr__ort_has_provider("OpenVINOExecutionProvider"))
            return no_provider("Execution Accelerator 'openvino'", "OpenVINO",
                               "onnxruntime-openvino", "scripts/setup.sh installs it");
        for (size_t k = 0; k < ea->n_parameters; k++) {
            bool known = false;
            for (size_t j = 0; j < sizeof(openvino_keys) / sizeof(openvino_keys[0]); j++)
                known |= !strcmp(ea->parameters[k].key, openvino_keys[j]);
            if (!known)
                return nr_status_new(NR_INVALID_ARG,
                                     "unknown parameter '%s' for Execution Accelerator "
                                     "'openvino'",
                                     ea->parameters[k].key);
        }
        o->cpu_openvino = ea;
    }
    return NULL;
}

nr_status_t *nr__ort_opts_parse(const nr_model_config_t *cfg, nr__ort_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->graph_level = graph_level(cfg);
    nr_status_t *st = param_int(cfg, "execution_mode", 0, &o->execution_mode);
    if (st)
        return st;
    if (o->execution_mode != 0 && o->execution_mode != 1)
        return nr_status_new(NR_INVALID_ARG,
                             "Invalid configuration value provided. Expected values for  "
                             "execution_mode are 0 or 1 but got %d .",
                             o->execution_mode);
    st = param_int(cfg, "intra_op_thread_count", 0, &o->intra_op_threads);
    if (!st)
        st = param_int(cfg, "inter_op_thread_count", 0, &o->inter_op_threads);
    if (!st)
        st = param_int(cfg, "intra_op_worker_nice", 0, &o->worker_nice);
    if (!st && (o->worker_nice < 0 || o->worker_nice > 19))
        return nr_status_new(NR_INVALID_ARG,
                             "intra_op_worker_nice must be between 0 and 19, got %d",
                             o->worker_nice);
    o->device_alloc_for_init = nr__ort_param(cfg, "session.use_device_allocator_for_initializers");
    o->arena_shrinkage = nr__ort_param(cfg, "memory.enable_memory_arena_shrinkage");
    if (!st)
        st = param_tri(cfg, "enable_mem_arena", &o->mem_arena);
    if (!st)
        st = param_tri(cfg, "enable_mem_pattern", &o->mem_pattern);
    int share = -1, spin = -1;
    if (!st)
        st = param_tri(cfg, "share_session_between_instances", &share);
    if (!st)
        st = param_tri(cfg, "allow_spinning", &spin);
    if (st)
        return st;
    o->allow_spinning = spin == 1;
    if (share == 1)
        NR_LOG_WARN("'share_session_between_instances' is ignored for '%s': each instance of an "
                    "ONNX Runtime model has its own session", cfg->name);
    return parse_cpu_accelerators(cfg, o);
}

/* ---- TensorRT (GPU instances of a TensorRT-enabled build) ---- */

typedef enum { K_PREC, K_ULL, K_INT, K_BOOL, K_STR } trt_kind_t;

static const struct {
    const char *key;
    trt_kind_t kind;
    const char *ort_key;
} trt_keys[] = {
    {"precision_mode", K_PREC, NULL},
    {"max_workspace_size_bytes", K_ULL, "trt_max_workspace_size"},
    {"trt_max_partition_iterations", K_INT, NULL},
    {"trt_min_subgraph_size", K_INT, NULL},
    {"int8_calibration_table_name", K_STR, "trt_int8_calibration_table_name"},
    {"int8_use_native_calibration_table", K_BOOL, "trt_int8_use_native_calibration_table"},
    {"trt_dla_enable", K_BOOL, NULL},
    {"trt_dla_core", K_INT, NULL},
    {"trt_engine_cache_enable", K_BOOL, NULL},
    {"trt_engine_cache_path", K_STR, NULL},
    {"trt_engine_cache_prefix", K_STR, NULL},
    {"trt_dump_subgraphs", K_BOOL, NULL},
    {"trt_force_sequential_engine_build", K_BOOL, NULL},
    {"trt_context_memory_sharing_enable", K_BOOL, NULL},
    {"trt_layer_norm_fp32_fallback", K_BOOL, NULL},
    {"trt_timing_cache_enable", K_BOOL, NULL},
    {"trt_timing_cache_path", K_STR, NULL},
    {"trt_force_timing_cache", K_BOOL, NULL},
    {"trt_detailed_build_log", K_BOOL, NULL},
    {"trt_build_heuristics_enable", K_BOOL, NULL},
    {"trt_sparsity_enable", K_BOOL, NULL},
    {"trt_builder_optimization_level", K_INT, NULL},
    {"trt_auxiliary_streams", K_INT, NULL},
    {"trt_tactic_sources", K_STR, NULL},
    {"trt_extra_plugin_lib_paths", K_STR, NULL},
    {"trt_profile_min_shapes", K_STR, NULL},
    {"trt_profile_max_shapes", K_STR, NULL},
    {"trt_profile_opt_shapes", K_STR, NULL},
    {"trt_cuda_graph_enable", K_BOOL, NULL},
    {"trt_dump_ep_context_model", K_BOOL, NULL},
    {"trt_ep_context_file_path", K_STR, NULL},
    {"trt_ep_context_embed_mode", K_INT, NULL},
};

/* One accelerator parameter -> (ORT key, value); *key NULL when nothing is passed on. */
static nr_status_t *trt_key(const char *k, const char *v, const char **key, const char **val)
{
    *key = NULL;
    *val = v;
    for (size_t i = 0; i < sizeof(trt_keys) / sizeof(trt_keys[0]); i++) {
        if (strcmp(trt_keys[i].key, k) != 0)
            continue;
        bool b;
        int n;
        nr_status_t *st = NULL;
        switch (trt_keys[i].kind) {
        case K_PREC:
            *val = "1";
            if (strcmp(v, "FP16") == 0)
                *key = "trt_fp16_enable";
            else if (strcmp(v, "BF16") == 0)
                *key = "trt_bf16_enable";
            else if (strcmp(v, "INT8") == 0)
                *key = "trt_int8_enable";
            else if (strcmp(v, "FP32") != 0)
                return nr_status_new(NR_INVALID_ARG, "unsupported precision mode '%s' is requested", v);
            return NULL;
        case K_ULL: st = parse_ull(v); break;
        case K_INT: st = nr__ort_parse_int(v, &n); break;
        case K_BOOL: st = nr__ort_parse_bool(v, &b); break;
        case K_STR: break;
        }
        if (st)
            return st;
        *key = trt_keys[i].ort_key ? trt_keys[i].ort_key : trt_keys[i].key;
        if (*v == '\0')
            *key = NULL; /* Triton passes only non-empty values */
        return NULL;
    }
    return nr_status_new(NR_INVALID_ARG,
                         "unknown parameter '%s' is provided for TensorRT Execution Accelerator", k);
}

static nr_status_t *append_tensorrt(OrtSessionOptions *so, const nr_cfg_accelerator_t *ea,
                                    int device_id)
{
    const OrtApi *api = nr__ort_api();
    size_t n = 0;
    const char **keys = nr_calloc(ea->n_parameters + 1, sizeof(*keys));
    const char **vals = nr_calloc(ea->n_parameters + 1, sizeof(*vals));
    char dev[24];
    nr_status_t *st = NULL;
    for (size_t i = 0; i < ea->n_parameters && !st; i++) {
        const char *v = ea->parameters[i].value ? ea->parameters[i].value : "";
        st = trt_key(ea->parameters[i].key, v, &keys[n], &vals[n]);
        if (!st && keys[n])
            n++;
    }
    OrtTensorRTProviderOptionsV2 *trt = NULL;
    if (!st && !nr__ort_has_provider("TensorrtExecutionProvider"))
        st = no_gpu_provider("Execution Accelerator 'tensorrt'", "TensorRT");
    if (!st) {
        snprintf(dev, sizeof(dev), "%d", device_id); /* the EP runs on the instance's GPU */
        keys[n] = "device_id";
        vals[n++] = dev;
        OrtStatus *o = api->CreateTensorRTProviderOptions(&trt);
        if (!o)
            o = api->UpdateTensorRTProviderOptions(trt, keys, vals, n);
        if (!o)
            o = api->SessionOptionsAppendExecutionProvider_TensorRT_V2(so, trt);
        st = provider_failed("TensorRT", device_id, o);
    }
    if (trt)
        api->ReleaseTensorRTProviderOptions(trt);
    free(keys);
    free(vals);
    return st;
}

/* ---- CUDA (always appended for GPU instances) ---- */

typedef struct {
    const char *keys[64];
    const char *vals[64];
    size_t n;
} kv_list_t;

static void kv_set(kv_list_t *l, const char *k, const char *v)
{
    for (size_t i = 0; i < l->n; i++)
        if (strcmp(l->keys[i], k) == 0) {
            l->vals[i] = v;
            return;
        }
    if (l->n < sizeof(l->keys) / sizeof(l->keys[0])) {
        l->keys[l->n] = k;
        l->vals[l->n++] = v;
    }
}

/* `cuda` accelerator parameters go to the CUDA EP unchanged (two are bool-checked). */
static nr_status_t *collect_cuda_params(const nr_cfg_accelerator_t *ea, kv_list_t *l)
{
    for (size_t i = 0; i < ea->n_parameters; i++) {
        const char *k = ea->parameters[i].key, *v = ea->parameters[i].value;
        bool b;
        if (v == NULL || *v == '\0')
            continue;
        if (strcmp(k, "do_copy_in_default_stream") == 0 ||
            strcmp(k, "use_ep_level_unified_stream") == 0) {
            nr_status_t *st = nr__ort_parse_bool(v, &b);
            if (st)
                return st;
        }
        kv_set(l, k, v);
    }
    return NULL;
}

/* The deprecated CUDA keys in the model `parameters` (Triton fills them only when the
 * config has a parameters map at all). */
static nr_status_t *legacy_cuda_params(const nr_model_config_t *cfg, kv_list_t *l)
{
    static const char *const algo[] = {"EXHAUSTIVE", "HEURISTIC", "DEFAULT"};
    static const char *const arena[] = {"kNextPowerOfTwo", "kSameAsRequested"};
    if (cfg->n_parameters == 0)
        return NULL;
    int a = 0, s = 0;
    nr_status_t *st = param_int(cfg, "cudnn_conv_algo_search", 0, &a);
    if (st)
        return st;
    if (a < 0 || a > 2)
        return nr_status_new(NR_INVALID_ARG,
                             "unsupported cudnn_conv_algo_search value '%d' is requested", a);
    st = param_int(cfg, "arena_extend_strategy", 0, &s);
    if (st)
        return st;
    if (s < 0 || s > 1)
        return nr_status_new(NR_INVALID_ARG,
                             "unsupported arena_extend_strategy value '%d' is requested", s);
    const char *mem = nr__ort_param(cfg, "gpu_mem_limit");
    const char *copy = nr__ort_param(cfg, "do_copy_in_default_stream");
    kv_set(l, "cudnn_conv_algo_search", algo[a]);
    kv_set(l, "gpu_mem_limit", mem ? mem : "18446744073709551615");
    kv_set(l, "arena_extend_strategy", arena[s]);
    kv_set(l, "do_copy_in_default_stream", copy ? copy : "1");
    return NULL;
}

static nr_status_t *append_cuda(OrtSessionOptions *so, const nr_model_config_t *cfg,
                                kv_list_t *l, int device_id)
{
    const OrtApi *api = nr__ort_api();
    char dev[24];
    snprintf(dev, sizeof(dev), "%d", device_id);
    kv_set(l, "device_id", dev);
    kv_set(l, "has_user_compute_stream", "0");
    nr_status_t *st = legacy_cuda_params(cfg, l);
    if (!st && !nr__ort_has_provider("CUDAExecutionProvider"))
        st = no_gpu_provider("A KIND_GPU instance", "CUDA");
    OrtCUDAProviderOptionsV2 *cuda = NULL;
    if (!st) {
        OrtStatus *o = api->CreateCUDAProviderOptions(&cuda);
        if (!o)
            o = api->UpdateCUDAProviderOptions(cuda, l->keys, l->vals, l->n);
        if (!o)
            o = api->SessionOptionsAppendExecutionProvider_CUDA_V2(so, cuda);
        st = provider_failed("CUDA", device_id, o);
    }
    if (cuda)
        api->ReleaseCUDAProviderOptions(cuda);
    return st;
}

static nr_status_t *append_gpu_providers(OrtSessionOptions *so, const nr_model_config_t *cfg,
                                         int device_id)
{
    kv_list_t cuda_opts = {.n = 0};
    size_t n = cfg->has_optimization ? cfg->optimization.n_gpu_execution_accelerator : 0;
    for (size_t i = 0; i < n; i++) {
        const nr_cfg_accelerator_t *ea = &cfg->optimization.gpu_execution_accelerator[i];
        const char *name = ea->name ? ea->name : "";
        nr_status_t *st;
        if (strcmp(name, "tensorrt") == 0)
            st = append_tensorrt(so, ea, device_id);
        else if (strcmp(name, "cuda") == 0)
            st = collect_cuda_params(ea, &cuda_opts);
        else
            st = unknown_accelerator(name);
        if (st)
            return st;
    }
    return append_cuda(so, cfg, &cuda_opts, device_id);
}

/* OpenVINO on the CPU: the accelerator's parameters as provider options, device_type CPU
 * unless given. OpenVINO sizes its own threads (num_of_threads, num_streams): capping them at
 * the instance's share of the cores, as the CPU provider's are, measured slower at
 * concurrency 1 and no faster at 2 (docs/optimization.md, "Execution accelerators"). */
static nr_status_t *append_cpu_providers(OrtSessionOptions *so, const nr__ort_opts_t *o)
{
    const nr_cfg_accelerator_t *ea = o->cpu_openvino;
    if (ea == NULL)
        return NULL;
    const char **keys = nr_calloc(ea->n_parameters + 1, sizeof(char *));
    const char **vals = nr_calloc(ea->n_parameters + 1, sizeof(char *));
    size_t n = 0;
    bool device = false;
    for (size_t k = 0; k < ea->n_parameters; k++) {
        keys[n] = ea->parameters[k].key;
        vals[n++] = ea->parameters[k].value;
        device |= !strcmp(ea->parameters[k].key, "device_type");
    }
    if (!device)
        keys[n] = "device_type", vals[n++] = "CPU";
    nr_status_t *st = nr__ort_status(
        nr__ort_api()->SessionOptionsAppendExecutionProvider(so, "OpenVINO", keys, vals, n));
    free(keys);
    free(vals);
    return st;
}

/* ---- intra-op workers at background priority ---- */

typedef struct {
    OrtThreadWorkerFn fn;
    void *param;
    int nice;
    pthread_t thread;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    /* Linux keeps a nice value per thread; raising it needs no privilege. */
    if (setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), w->nice) != 0)
        NR_LOG_WARN("could not lower the priority of an intra-op thread: %s", strerror(errno));
    w->fn(w->param);
    return NULL;
}

/* ORT calls these from the loading thread when it builds (and tears down) a session's
 * intra-op pool; returning NULL makes ORT fail the session with an error. */
static OrtCustomThreadHandle create_worker(void *opts, OrtThreadWorkerFn fn, void *param)
{
    worker_t *w = nr_calloc(1, sizeof(*w));
    w->fn = fn;
    w->param = param;
    w->nice = (int)(intptr_t)opts;
    if (pthread_create(&w->thread, NULL, worker_main, w) != 0) {
        free(w);
        return NULL;
    }
    pthread_setname_np(w->thread, "ort-intra");
    return (OrtCustomThreadHandle)w;
}

static void join_worker(OrtCustomThreadHandle h)
{
    worker_t *w = (worker_t *)h;
    pthread_join(w->thread, NULL);
    free(w);
}

int nr__ort_intra_threads(const nr__ort_opts_t *o, const nr_instance_info_t *info)
{
    if (o->intra_op_threads > 0)
        return o->intra_op_threads;
    return o->worker_nice > 0 && info->cpu_count > 0 ? info->cpu_count : info->intra_op_threads;
}

static nr_status_t *set_threads_and_memory(OrtSessionOptions *so, const nr__ort_opts_t *o,
                                           const nr_instance_info_t *info)
{
    const OrtApi *api = nr__ort_api();
    const char *spin = o->allow_spinning ? "1" : "0";
    int intra = nr__ort_intra_threads(o, info);
    nr_status_t *st = nr__ort_status(api->SetSessionGraphOptimizationLevel(so, o->graph_level));
    if (!st)
        st = nr__ort_status(api->SetSessionExecutionMode(
            so, o->execution_mode == 0 ? ORT_SEQUENTIAL : ORT_PARALLEL));
    if (!st && nr__ort_global_threads()) /* the env's pools serve every session */
        st = nr__ort_status(api->DisablePerSessionThreads(so));
    else if (!st && intra > 0)
        st = nr__ort_status(api->SetIntraOpNumThreads(so, intra));
    if (!st && o->worker_nice > 0 && intra > 1 && !nr__ort_global_threads()) {
        st = nr__ort_status(api->SessionOptionsSetCustomCreateThreadFn(so, create_worker));
        if (!st)
            st = nr__ort_status(api->SessionOptionsSetCustomThreadCreationOptions(
                so, (void *)(intptr_t)o->worker_nice));
        if (!st)
            st = nr__ort_status(api->SessionOptionsSetCustomJoinThreadFn(so, join_worker));
    }
    if (!st && o->inter_op_threads > 0 && !nr__ort_global_threads())
        st = nr__ort_status(api->SetInterOpNumThreads(so, o->inter_op_threads));
    if (!st)
        st = nr__ort_status(api->AddSessionConfigEntry(so, "session.intra_op.allow_spinning", spin));
    if (!st)
        st = nr__ort_status(api->AddSessionConfigEntry(so, "session.inter_op.allow_spinning", spin));
    if (!st && o->device_alloc_for_init)
        st = nr__ort_status(api->AddSessionConfigEntry(
            so, "session.use_device_allocator_for_initializers", o->device_alloc_for_init));
    if (!st && o->mem_arena >= 0)
        st = nr__ort_status(o->mem_arena ? api->EnableCpuMemArena(so) : api->DisableCpuMemArena(so));
    if (!st && o->mem_pattern >= 0)
        st = nr__ort_status(o->mem_pattern ? api->EnableMemPattern(so) : api->DisableMemPattern(so));
    return st;
}

nr_status_t *nr__ort_session_options(const nr_model_config_t *cfg, const nr__ort_opts_t *o,
                                     const nr_instance_info_t *info, OrtSessionOptions **out)
{
    const OrtApi *api = nr__ort_api();
    OrtSessionOptions *so = NULL;
    nr_status_t *st = nr__ort_status(api->CreateSessionOptions(&so));
    if (!st)
        st = set_threads_and_memory(so, o, info);
    /* EP priority as in Triton: GPU accelerators, CUDA, CPU accelerators, default CPU. */
    if (!st && info->kind == NR_KIND_GPU)
        st = append_gpu_providers(so, cfg, info->device_id);
    if (!st)
        st = append_cpu_providers(so, o);
    for (size_t i = 0; !st && i < cfg->n_op_library_filename; i++)
        st = nr__ort_status(api->RegisterCustomOpsLibrary_V2(so, cfg->op_library_filename[i]));
    if (st && so) {
        api->ReleaseSessionOptions(so);
        so = NULL;
    }
    *out = so;
    return st;
}
