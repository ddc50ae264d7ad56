/* ort_backend.c - the "onnxruntime" backend: process env, status conversion, model
 * load/validate/unload and instance create/destroy (execute is in ort_execute.c).
 *
 * Ownership: model_load returns an nr__ort_model_t that borrows the config (the core
 * keeps the config alive until model_unload) and owns its resolved path and tensor
 * tables. Each instance owns one OrtSession, its run options and its scratch buffers.
 *
 * The library: ONNX Runtime is opened with dlopen on first use (it exports one entry point,
 * OrtGetApiBase; everything else goes through the OrtApi table), so one nereid binary runs
 * with any build of it: <backend-directory>/onnxruntime/libonnxruntime.so when
 * --backend-directory names a folder holding one (Triton keeps its ONNX Runtime there too),
 * else the one `make setup` installed (found through the binary's RUNPATH or
 * LD_LIBRARY_PATH). It is never closed.
 *
 * Threads: the library handle, OrtEnv, OrtApi pointer, CPU OrtMemoryInfo and provider list
 * are created once (pthread_once) and never change or get freed; they are the only globals. Load,
 * instance create/destroy and unload run on the loading thread; the model state is
 * read-only after load, so instances of one model may execute concurrently.
 */
#include "ort_int.h"

#include "../../common/alloc.h"
#include "../../common/cli.h"
#include "../../common/log.h"

#include <dlfcn.h>
#include <limits.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- process-wide state: written once inside pthread_once, read-only afterwards ---- */

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static char g_library[PATH_MAX + 64]; /* "ONNX Runtime <version> at <path>" once loaded */
static const OrtApi *g_api;
static OrtEnv *g_env;
static OrtMemoryInfo *g_cpu_info;
static char **g_providers;
static int g_n_providers;
static char g_init_error[PATH_MAX + 640]; /* non-empty if initialisation failed */

/* ORT's own log lines (warning and above) go to nereid's log. */
static void ort_log(void *param, OrtLoggingLevel severity, const char *category,
                    const char *logid, const char *code_location, const char *message)
{
    (void)param, (void)category, (void)logid, (void)code_location;
    if (severity >= ORT_LOGGING_LEVEL_ERROR)
        NR_LOG_ERROR("onnxruntime: %s", message);
    else if (severity == ORT_LOGGING_LEVEL_WARNING)
        NR_LOG_WARN("onnxruntime: %s", message);
    else
        NR_LOG_VERBOSE(1, "onnxruntime: %s", message);
}

static void init_fail(OrtStatus *st, const char *what)
{
    snprintf(g_init_error, sizeof(g_init_error), "%s: %s", what,
             st ? g_api->GetErrorMessage(st) : "failed");
    if (st)
        g_api->ReleaseStatus(st);
}

/* Opens the library (see the top of the file) and finds OrtGetApiBase; NULL and
 * g_init_error set when that fails. */
static const OrtApiBase *open_library(void)
{
    char path[PATH_MAX];
    const char *dir = nr_backend_directory(), *name = "libonnxruntime.so.1";
    if (dir && snprintf(path, sizeof(path), "%s/onnxruntime/libonnxruntime.so", dir) <
                   (int)sizeof(path) && access(path, F_OK) == 0)
        name = path;
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (h == NULL && name != path)
        h = dlopen("libonnxruntime.so", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        snprintf(g_init_error, sizeof(g_init_error),
                 "unable to load the ONNX Runtime library: %s", dlerror());
        return NULL;
    }
    const OrtApiBase *(*get_base)(void);
    void *sym = dlsym(h, "OrtGetApiBase");
    memcpy(&get_base, &sym, sizeof(get_base)); /* object -> function pointer, as POSIX allows */
    struct link_map *lm = NULL;
    (void)dlinfo(h, RTLD_DI_LINKMAP, &lm);
    const char *where = lm && lm->l_name[0] ? lm->l_name : name;
    const OrtApiBase *base = get_base ? get_base() : NULL;
    if (base == NULL) {
        snprintf(g_init_error, sizeof(g_init_error),
                 "%s is no ONNX Runtime library: it has no OrtGetApiBase", where);
        return NULL;
    }
    snprintf(g_library, sizeof(g_library), "ONNX Runtime %s at %s", base->GetVersionString(),
             where);
    NR_LOG_INFO("loaded %s", g_library);
    return base;
}

/* --backend-config=onnxruntime,<key>=<value>: an integer setting (Triton's ParseIntValue), or
 * def when not given or not a number (said once, at init). */
static int int_setting(const char *key, int lo, int def)
{
    const char *v = nr_backend_config("onnxruntime", key);
    long long n;
    if (v == NULL)
        return def;
    if (!nr_cli_int(v, lo, INT_MAX, &n)) {
        NR_LOG_WARN("--backend-config=onnxruntime,%s=%s is not an integer of at least %d: "
                    "%d is used", key, v, lo, def);
        return def;
    }
    return (int)n;
}

static bool g_global_threads;
static int g_default_max_batch = NR_ORT_DEFAULT_MAX_BATCH_SIZE;

/* The environment, with the global thread pools when asked for (Triton's ONNX Runtime
 * backend's enable-global-threadpool, intra_op_thread_count, inter_op_thread_count). */
static OrtStatus *create_env(void)
{
    g_default_max_batch = int_setting("default-max-batch-size", 0,
                                      NR_ORT_DEFAULT_MAX_BATCH_SIZE);
    const char *g = nr_backend_config("onnxruntime", "enable-global-threadpool");
    bool global = false;
    if (g != NULL && !nr_cli_bool(g, &global))
        NR_LOG_WARN("--backend-config=onnxruntime,enable-global-threadpool=%s is not a boolean: "
                    "each session keeps its own threads", g);
    if (!global)
        return g_api->CreateEnvWithCustomLogger(ort_log, NULL, ORT_LOGGING_LEVEL_WARNING,
                                                "nereid", &g_env);
    int intra = int_setting("intra_op_thread_count", 0, 0);
    int inter = int_setting("inter_op_thread_count", 0, 0);
    OrtThreadingOptions *tp = NULL;
    OrtStatus *st = g_api->CreateThreadingOptions(&tp);
    if (!st)
        st = g_api->SetGlobalIntraOpNumThreads(tp, intra);
    if (!st)
        st = g_api->SetGlobalInterOpNumThreads(tp, inter);
    if (!st) /* as nereid's sessions by default: a worker sleeps when it has nothing to do */
        st = g_api->SetGlobalSpinControl(tp, 0);
    if (!st)
        st = g_api->CreateEnvWithCustomLoggerAndGlobalThreadPools(
            ort_log, NULL, ORT_LOGGING_LEVEL_WARNING, "nereid", tp, &g_env);
    if (tp != NULL)
        g_api->ReleaseThreadingOptions(tp);
    if (!st) {
        g_global_threads = true;
        NR_LOG_INFO("ONNX Runtime: one global thread pool for every session (intra-op %d, "
                    "inter-op %d threads; 0: ONNX Runtime's default)", intra, inter);
    }
    return st;
}

bool nr__ort_global_threads(void) { return g_global_threads; }
int nr__ort_default_max_batch(void) { return g_default_max_batch; }

static void init_once(void)
{
    const OrtApiBase *base = open_library();
    if (base == NULL)
        return;
    g_api = base->GetApi(ORT_API_VERSION);
    if (g_api == NULL) {
        snprintf(g_init_error, sizeof(g_init_error),
                 "the ONNX Runtime library loaded, %s, does not provide API version %d "
                 "(ONNX Runtime 1.%d or later does)",
                 g_library, ORT_API_VERSION, ORT_API_VERSION);
        return;
    }
    OrtStatus *st = create_env();
    if (st) {
        init_fail(st, "creating the ONNX Runtime environment");
        return;
    }
    st = g_api->CreateCpuMemoryInfo(OrtDeviceAllocator, OrtMemTypeDefault, &g_cpu_info);
    if (!st)
        st = g_api->GetAvailableProviders(&g_providers, &g_n_providers);
    if (st)
        init_fail(st, "initialising ONNX Runtime");
}

nr_status_t *nr__ort_init(void)
{
    pthread_once(&g_once, init_once);
    if (g_init_error[0])
        return nr_status_new(NR_INTERNAL, "%s", g_init_error);
    return NULL;
}

const OrtApi *nr__ort_api(void) { return g_api; }
OrtEnv *nr__ort_env(void) { return g_env; }
const OrtMemoryInfo *nr__ort_cpu_info(void) { return g_cpu_info; }

nr_status_t *nr__ort_status(OrtStatus *st)
{
    if (st == NULL)
        return NULL;
    nr_status_t *s = nr_status_new(NR_INTERNAL, "onnx runtime error %d: %s",
                                   (int)g_api->GetErrorCode(st), g_api->GetErrorMessage(st));
    g_api->ReleaseStatus(st);
    return s;
}

const char *nr__ort_library_version(void)
{
    return g_library[0] ? g_library : "ONNX Runtime (not loaded)";
}

bool nr__ort_has_provider(const char *provider)
{
    for (int i = 0; i < g_n_providers; i++)
        if (strcmp(g_providers[i], provider) == 0)
            return true;
    return false;
}

/* ---- model load ---- */

/* Triton's order: stat (a missing path fails here), a directory means <dir>/model.onnx,
 * which must then exist. */
nr_status_t *nr__ort_resolve_path(const nr_model_config_t *cfg, const char *model_path, char **out)
{
    struct stat sb;
    *out = NULL;
    if (model_path == NULL)
        return nr_status_new(NR_INTERNAL, "no model file given for model '%s'", cfg->name);
    if (stat(model_path, &sb) != 0)
        return nr_status_new(NR_INTERNAL, "failed to stat file %s", model_path);
    if (!S_ISDIR(sb.st_mode)) {
        *out = nr_strdup(model_path);
        return NULL;
    }
    char *path = nr_asprintf("%s%smodel.onnx", model_path,
                             model_path[strlen(model_path) - 1] == '/' ? "" : "/");
    if (stat(path, &sb) != 0) {
        nr_status_t *st = nr_status_new(NR_UNAVAILABLE, "unable to find '%s' for model instance '%s'",
                                        path, cfg->name);
        free(path);
        return st;
    }
    *out = path;
    return NULL;
}

static void fill_tensor(nr__ort_tensor_t *t, const char *name, nr_dtype_t dt,
                        const nr_cfg_dims_t *dims, bool has_reshape, const nr_cfg_dims_t *reshape)
{
    t->name = name;
    t->dtype = dt;
    t->ort_type = nr__ort_from_dtype(dt);
    t->elem_size = nr_dtype_size(dt);
    t->dims = dims;
    t->has_reshape = has_reshape;
    t->reshape = reshape;
}

static void build_tensors(nr__ort_model_t *m)
{
    const nr_model_config_t *cfg = m->cfg;
    m->n_in = cfg->n_input;
    m->n_out = cfg->n_output;
    m->in = nr_calloc(m->n_in, sizeof(*m->in));
    m->out = nr_calloc(m->n_out, sizeof(*m->out));
    for (size_t i = 0; i < m->n_in; i++) {
        const nr_cfg_input_t *ci = &cfg->input[i];
        fill_tensor(&m->in[i], ci->name, ci->data_type, &ci->dims, ci->has_reshape, &ci->reshape);
        m->in[i].optional = ci->optional;
        m->in[i].ragged = ci->allow_ragged_batch;
    }
    for (size_t i = 0; i < m->n_out; i++) {
        const nr_cfg_output_t *co = &cfg->output[i];
        fill_tensor(&m->out[i], co->name, co->data_type, &co->dims, co->has_reshape, &co->reshape);
    }
}

static void model_free(nr__ort_model_t *m)
{
    if (m == NULL)
        return;
    free(m->path);
    free(m->in);
    free(m->out);
    free(m);
}

/* Triton's ValidateInputs / ValidateOutputs, below. */
static nr_status_t *validate_model(nr__ort_model_t *m, const nr__ort_ios_t *ios);

static nr_status_t *ort_model_load(const nr_model_config_t *cfg, const char *model_dir,
                                   const char *model_path, void **model_state)
{
    (void)model_dir;
    *model_state = NULL;
    nr_status_t *st = nr__ort_init();
    if (st)
        return st;
    if (cfg->n_batch_input > 0 || cfg->n_batch_output > 0)
        return nr_status_new(NR_UNSUPPORTED, "model '%s': batch_input and batch_output are not "
                                             "supported by the onnxruntime backend", cfg->name);
    nr__ort_model_t *m = nr_calloc(1, sizeof(*m));
    m->cfg = cfg;
    m->batching = cfg->max_batch_size > 0;
    build_tensors(m);
    st = nr__ort_resolve_path(cfg, model_path, &m->path);
    if (!st)
        st = nr__ort_opts_parse(cfg, &m->opts);
    OrtSession *session = NULL;
    nr__ort_ios_t ios = {0};
    if (!st)
        st = nr__ort_meta_session(m->path, &session);
    if (!st)
        st = nr__ort_read_ios(session, &ios);
    if (!st)
        st = validate_model(m, &ios);
    nr__ort_ios_free(&ios);
    if (session)
        nr__ort_api()->ReleaseSession(session);
    if (st) {
        model_free(m);
        return st;
    }
    *model_state = m;
    return NULL;
}

static void ort_model_unload(void *model_state)
{
    model_free(model_state);
}

/* ---- validation against the model (Triton's ValidateInputs / ValidateOutputs) ---- */

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* The allowed names as Triton prints them: a sorted std::set joined by ", ". */
static char *allowed_names(const nr__ort_io_t *a, size_t na, const nr__ort_io_t *b, size_t nb)
{
    const char **v = nr_calloc(na + nb, sizeof(*v));
    size_t n = 0, len = 1;
    for (size_t i = 0; i < na; i++)
        v[n++] = a[i].name;
    for (size_t i = 0; i < nb; i++)
        v[n++] = b[i].name;
    qsort(v, n, sizeof(*v), cmp_str);
    for (size_t i = 0; i < n; i++)
        len += strlen(v[i]) + 2;
    char *s = nr_calloc(1, len);
    for (size_t i = 0; i < n; i++) {
        if (i > 0 && strcmp(v[i], v[i - 1]) == 0)
            continue;
        if (s[0])
            strcat(s, ", ");
        strcat(s, v[i]);
    }
    free(v);
    return s;
}

static nr_status_t *compare_dims(const char *model, const char *tensor, const nr__ort_io_t *io,
                                 const nr_cfg_dims_t *dims, bool batching, bool exact)
{
    char ms[NR_MAX_DIMS * 21 + 3], cs[(NR_MAX_DIMS + 1) * 21 + 3];
    int64_t full[NR_MAX_DIMS + 1];
    size_t nfull = 0;
    if (batching) {
        if (io->ndim == 0 || io->dims[0] != -1)
            return nr_status_new(NR_INVALID_ARG,
                                 "model '%s', tensor '%s': for the model to support batching the "
                                 "shape should have at least 1 dimension and the first dimension "
                                 "must be -1; but shape expected by the model is %s",
                                 model, tensor, nr__ort_shape_str(io->dims, io->ndim, ms, sizeof(ms)));
        full[nfull++] = -1;
    }
    for (size_t i = 0; i < dims->n && nfull <= NR_MAX_DIMS; i++)
        full[nfull++] = dims->v[i];
    bool ok = io->ndim == nfull && nfull == (batching ? 1 : 0) + dims->n;
    for (size_t i = 0; ok && i < nfull; i++)
        if (exact || io->dims[i] != -1)
            ok = io->dims[i] == full[i];
    if (ok)
        return NULL;
    nr__ort_shape_str(io->dims, io->ndim, ms, sizeof(ms));
    nr__ort_shape_str(full, nfull, cs, sizeof(cs));
    if (batching)
        return nr_status_new(NR_INVALID_ARG,
                             "model '%s', tensor '%s': the model expects %zu dimensions (shape %s) but "
                             "the model configuration specifies %zu dimensions (an initial batch "
                             "dimension because max_batch_size > 0 followed by the explicit tensor "
                             "shape, making complete shape %s)",
                             model, tensor, io->ndim, ms, nfull, cs);
    return nr_status_new(NR_INVALID_ARG,
                         "model '%s', tensor '%s': the model expects %zu dimensions (shape %s) but "
                         "the model configuration specifies %zu dimensions (shape %s)",
                         model, tensor, io->ndim, ms, nfull, cs);
}

static nr_status_t *check_scalar(const char *model, const char *tensor, const nr_cfg_dims_t *dims)
{
    char cs[NR_MAX_DIMS * 21 + 3];
    for (size_t i = 0; i < dims->n; i++)
        if (dims->v[i] != 1)
            return nr_status_new(NR_INVALID_ARG,
                                 "unable to load model '%s', scalar tensor '%s', should only provide 1 "
                                 "in the model configuration when the model doesn't support "
                                 "batching. Model configuration provided: %s.",
                                 model, tensor, nr__ort_shape_str(dims->v, dims->n, cs, sizeof(cs)));
    return NULL;
}

/* Triton's "TYPE_" + DataTypeString: TYPE_STRING is spelled TYPE_BYTES there. */
static const char *triton_type_name(nr_dtype_t t)
{
    return t == NR_TYPE_STRING ? "TYPE_BYTES" : nr_dtype_enum_name(t);
}

static nr_status_t *check_dtype(const char *model, const char *kind, const nr__ort_tensor_t *t,
                                const nr__ort_io_t *io)
{
    if (t->ort_type == ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED)
        return nr_status_new(NR_INTERNAL, "unsupported datatype %s for %s '%s' for model '%s'",
                             nr_dtype_enum_name(t->dtype), kind, t->name, model);
    if (t->ort_type != io->type)
        return nr_status_new(NR_INVALID_ARG,
                             "unable to load model '%s', configuration expects datatype %s for %s "
                             "'%s', model provides %s",
                             model, nr_dtype_enum_name(t->dtype), kind, t->name,
                             triton_type_name(nr__ort_to_dtype(io->type)));
    return NULL;
}

/* Inputs the model must have beyond the config's: sequence controls and states. */
static size_t sequence_inputs(const nr_model_config_t *cfg)
{
    if (cfg->scheduling_choice != NR_SCHED_SEQUENCE)
        return 0;
    unsigned kinds = 0;
    const nr_cfg_sequence_batching_t *sb = &cfg->sequence_batching;
    for (size_t i = 0; i < sb->n_control_input; i++)
        for (size_t j = 0; j < sb->control_input[i].n_control; j++)
            kinds |= 1u << (sb->control_input[i].control[j].kind & 7);
    return (size_t)__builtin_popcount(kinds) + sb->n_state;
}

static nr_status_t *validate_input(const nr__ort_model_t *m, nr__ort_tensor_t *t,
                                   const nr__ort_ios_t *ios)
{
    const char *model = m->cfg->name;
    if (t->optional && m->cfg->max_batch_size != 0)
        return nr_status_new(NR_INVALID_ARG, "unable to load model '%s', optional input '%s' is not "
                                             "supported for models that support batching", model, t->name);
    const nr__ort_io_t *io = nr__ort_io_find(ios->in, ios->n_in, t->name);
    if (io == NULL)
        io = nr__ort_io_find(ios->init, ios->n_init, t->name);
    if (io == NULL) {
        char *names = allowed_names(ios->in, ios->n_in, ios->init, ios->n_init);
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "unexpected inference input '%s', allowed "
                                                        "inputs are: %s", t->name, names);
        free(names);
        return st;
    }
    nr_status_t *st = check_dtype(model, "input", t, io);
    if (st)
        return st;
    t->model_ndim = io->ndim;
    const nr_cfg_dims_t *dims = t->has_reshape ? t->reshape : t->dims;
    if (t->optional && t->ragged)
        return nr_status_new(NR_INVALID_ARG, "unable to load model '%s', configuration expects model "
                             "provides input with shape [-1] for ragged input '%s', which is not "
                             "supported for optional input", model, t->name);
    if (t->ragged) {
        char ms[NR_MAX_DIMS * 21 + 3];
        if (io->ndim != 1 || io->dims[0] != -1)
            return nr_status_new(NR_INVALID_ARG, "unable to load model '%s', configuration expects "
                                 "model provides input with shape [-1]  for ragged input '%s', model "
                                 "provides %s", model, t->name,
                                 nr__ort_shape_str(io->dims, io->ndim, ms, sizeof(ms)));
        return NULL;
    }
    if (io->ndim == 0)
        return check_scalar(model, t->name, dims);
    return compare_dims(model, t->name, io, dims, m->batching, false);
}

static nr_status_t *validate_output(const nr__ort_model_t *m, nr__ort_tensor_t *t,
                                    const nr__ort_ios_t *ios)
{
    const char *model = m->cfg->name;
    const nr__ort_io_t *io = nr__ort_io_find(ios->out, ios->n_out, t->name);
    if (io == NULL) {
        char *names = allowed_names(ios->out, ios->n_out, NULL, 0);
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "unexpected inference output '%s', allowed "
                                                        "outputs are: %s", t->name, names);
        free(names);
        return st;
    }
    nr_status_t *st = check_dtype(model, "output", t, io);
    if (st)
        return st;
    t->model_ndim = io->ndim;
    const nr_cfg_dims_t *dims = t->has_reshape ? t->reshape : t->dims;
    if (io->ndim == 0)
        return check_scalar(model, t->name, dims);
    return compare_dims(model, t->name, io, dims, m->batching, true);
}

static nr_status_t *validate_model(nr__ort_model_t *m, const nr__ort_ios_t *ios)
{
    const nr_model_config_t *cfg = m->cfg;
    size_t expected = sequence_inputs(cfg) + cfg->n_batch_input;
    for (size_t i = 0; i < m->n_in; i++)
        expected += m->in[i].optional ? 0 : 1;
    if (ios->n_in != expected)
        return nr_status_new(NR_INVALID_ARG, "unable to load model '%s', configuration expects %zu "
                                             "inputs, model provides %zu", cfg->name, expected, ios->n_in);
    for (size_t i = 0; i < m->n_in; i++) {
        nr_status_t *st = validate_input(m, &m->in[i], ios);
        if (st)
            return st;
    }
    for (size_t i = 0; i < m->n_out; i++) {
        nr_status_t *st = validate_output(m, &m->out[i], ios);
        if (st)
            return st;
    }
    return NULL;
}

/* ---- instances ----
 * One OrtSession per instance, as Triton does by default. A session owns its intra-op
 * thread pool, so each instance gets its own, sized by ort_options.c (by default the
 * instance's share of the cores), and instances never contend inside one pool.
 * The alternative, one session shared by all instances (ORT's Run is thread-safe), loads
 * the weights once instead of N times but makes every instance's Run compete for one
 * pool, so a slow batch stalls the others; we pay memory for isolation and predictable
 * latency. Revisit with a prepacked-weights container if memory matters.
 */

static void inst_free(nr__ort_inst_t *in)
{
    if (in == NULL)
        return;
    const OrtApi *api = nr__ort_api();
    if (in->session)
        api->ReleaseSession(in->session);
    if (in->run_opts)
        api->ReleaseRunOptions(in->run_opts);
    for (size_t i = 0; in->gather && i < in->model->n_in; i++)
        free(in->gather[i].p);
    free(in->gather);
    free(in->in_vals);
    free(in->in_names);
    free(in->out_vals);
    free(in->out_names);
    free(in->out_idx);
    free(in->strbuf.p);
    free(in->outinfo.p);
    free(in);
}

static nr_status_t *ort_instance_create(void *model_state, const nr_instance_info_t *info,
                                        void **inst_state)
{
    const nr__ort_model_t *m = model_state;
    const OrtApi *api = nr__ort_api();
    nr__ort_inst_t *in = nr_calloc(1, sizeof(*in));
    in->model = m;
    in->gather = nr_calloc(m->n_in, sizeof(*in->gather));
    in->in_vals = nr_calloc(m->n_in, sizeof(*in->in_vals));
    in->in_names = nr_calloc(m->n_in, sizeof(*in->in_names));
    in->out_vals = nr_calloc(m->n_out, sizeof(*in->out_vals));
    in->out_names = nr_calloc(m->n_out, sizeof(*in->out_names));
    in->out_idx = nr_calloc(m->n_out, sizeof(*in->out_idx));
    *inst_state = NULL;
    OrtSessionOptions *so = NULL;
    nr_status_t *st = nr__ort_session_options(m->cfg, &m->opts, info, &so);
    if (!st)
        st = nr__ort_status(api->CreateSession(nr__ort_env(), m->path, so, &in->session));
    if (!st)
        st = nr__ort_status(api->CreateRunOptions(&in->run_opts));
    if (!st && m->opts.arena_shrinkage)
        st = nr__ort_status(api->AddRunConfigEntry(in->run_opts, "memory.enable_memory_arena_shrinkage",
                                                   m->opts.arena_shrinkage));
    if (so)
        api->ReleaseSessionOptions(so);
    if (st) {
        inst_free(in);
        return st;
    }
    NR_LOG_VERBOSE(1, "onnxruntime: created session for instance %s (%d intra-op threads, "
                      "workers at nice %d)",
                   info->name ? info->name : "?", nr__ort_intra_threads(&m->opts, info),
                   m->opts.worker_nice);
    *inst_state = in;
    return NULL;
}

static void ort_instance_destroy(void *inst_state)
{
    inst_free(inst_state);
}

static nr_status_t *ort_autocomplete(nr_model_config_t *cfg, const char *model_path)
{
    nr_status_t *st = nr__ort_init();
    return st ? st : nr__ort_autocomplete(cfg, model_path);
}

/* Triton's ONNX Runtime backend's --backend-config keys */
static const char *const ort_config_keys[] = {
    "default-max-batch-size", "enable-global-threadpool", "intra_op_thread_count",
    "inter_op_thread_count", NULL};

const nr_backend_t nr_ort_backend = {
    .name = "onnxruntime",
    .abi_version = NR_BACKEND_ABI_VERSION,
    .model_autocomplete = ort_autocomplete,
    .model_load = ort_model_load,
    .instance_create = ort_instance_create,
    .execute = nr__ort_execute,
    .instance_destroy = ort_instance_destroy,
    .model_unload = ort_model_unload,
    .config_keys = ort_config_keys,
};
