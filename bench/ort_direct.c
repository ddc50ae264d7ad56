/* ort_direct.c - the compute baseline for `make bench`: runs an ONNX model
 * through ONNX Runtime's C API directly, in-process, with the session options
 * nereid's ORT backend uses by default (sequential execution, spinning off,
 * intra-op threads as given), from N threads each owning one session, in a
 * closed loop; the timed loops start together, once every session is loaded
 * and has run three warm-up inferences. Prints one line: "infer_per_sec=<x>
 * p50_us=<y> p99_us=<z> cpu_us_per_infer=<w>", w being the process's CPU time
 * over the timed loops divided by the inferences they ran.
 * POOL "global" gives every session one process-wide intra-op pool of INTRA_OP
 * threads (ORT's global thread pools) instead of a pool per session; "nice"
 * keeps a pool per session whose workers run at nice 19, as nereid's
 * `intra_op_worker_nice: 19` does. SPIN "spin" turns ORT's spinning on.
 *
 * usage: ort_direct MODEL.onnx THREADS INTRA_OP SECONDS BATCH [session|global|nice [spin|nospin]]
 */
#include <onnxruntime_c_api.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static const OrtApi *ort;
static OrtEnv *env;
static const char *model_path;
static int intra_op, batch, global_pool, spin, nice_workers;

typedef struct {
    OrtThreadWorkerFn fn;
    void *param;
    pthread_t th;
} worker_t;

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 19);
    w->fn(w->param);
    return NULL;
}

static OrtCustomThreadHandle create_worker(void *opts, OrtThreadWorkerFn fn, void *param)
{
    worker_t *w = calloc(1, sizeof(*w));
    w->fn = fn;
    w->param = param;
    pthread_create(&w->th, NULL, worker_main, w);
    return (OrtCustomThreadHandle)w;
}

static void join_worker(OrtCustomThreadHandle h)
{
    worker_t *w = (worker_t *)h;
    pthread_join(w->th, NULL);
    free(w);
}
static double seconds;
static pthread_barrier_t loaded;

typedef struct {
    double *lat_us;
    size_t n, cap;
} result_t;

static void check(OrtStatus *st)
{
    if (st) {
        fprintf(stderr, "ort_direct: %s\n", ort->GetErrorMessage(st));
        exit(1);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *runner(void *arg)
{
    result_t *res = arg;
    OrtSessionOptions *so;
    check(ort->CreateSessionOptions(&so));
    if (global_pool) {
        check(ort->DisablePerSessionThreads(so));
    } else {
        check(ort->SetIntraOpNumThreads(so, intra_op));
        check(ort->SetInterOpNumThreads(so, 1));
        if (nice_workers) {
            check(ort->SessionOptionsSetCustomCreateThreadFn(so, create_worker));
            check(ort->SessionOptionsSetCustomJoinThreadFn(so, join_worker));
        }
        check(ort->AddSessionConfigEntry(so, "session.intra_op.allow_spinning", spin ? "1" : "0"));
        check(ort->AddSessionConfigEntry(so, "session.inter_op.allow_spinning", spin ? "1" : "0"));
    }
    check(ort->SetSessionExecutionMode(so, ORT_SEQUENTIAL));
    OrtSession *sess;
    check(ort->CreateSession(env, model_path, so, &sess));
    OrtAllocator *alloc;
    check(ort->GetAllocatorWithDefaultOptions(&alloc));
    char *in_name, *out_name;
    check(ort->SessionGetInputName(sess, 0, alloc, &in_name));
    check(ort->SessionGetOutputName(sess, 0, alloc, &out_name));
    OrtTypeInfo *ti;
    check(ort->SessionGetInputTypeInfo(sess, 0, &ti));
    const OrtTensorTypeAndShapeInfo *tsi;
    check(ort->CastTypeInfoToTensorInfo(ti, &tsi));
    size_t nd;
    check(ort->GetDimensionsCount(tsi, &nd));
    int64_t dims[16];
    check(ort->GetDimensions(tsi, dims, nd));
    size_t count = 1;
    for (size_t i = 0; i < nd; i++) {
        if (dims[i] < 0)
            dims[i] = i == 0 ? batch : 1;
        count *= (size_t)dims[i];
    }
    ort->ReleaseTypeInfo(ti);
    float *data = malloc(count * sizeof(float));
    for (size_t i = 0; i < count; i++)
        data[i] = (float)(rand() % 1000) / 1000.0f;
    OrtMemoryInfo *mi;
    check(ort->CreateCpuMemoryInfo(OrtArenaAllocator, OrtMemTypeDefault, &mi));
    OrtValue *in;
    check(ort->CreateTensorWithDataAsOrtValue(mi, data, count * sizeof(float), dims, nd,
                                              ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT, &in));
    const char *in_names[] = {in_name}, *out_names[] = {out_name};
    for (int warm = 0; warm < 3; warm++) {
        OrtValue *out = NULL;
        check(ort->Run(sess, NULL, in_names, (const OrtValue *const *)&in, 1, out_names, 1, &out));
        ort->ReleaseValue(out);
    }
    /* every session loaded and warm: the timed loops start together */
    pthread_barrier_wait(&loaded);
    double end = now_s() + seconds;
    while (now_s() < end) {
        double t0 = now_s();
        OrtValue *out = NULL;
        check(ort->Run(sess, NULL, in_names, (const OrtValue *const *)&in, 1, out_names, 1, &out));
        ort->ReleaseValue(out);
        if (res->n == res->cap)
            res->lat_us = realloc(res->lat_us, (res->cap = res->cap * 2 + 1024) * sizeof(double));
        res->lat_us[res->n++] = (now_s() - t0) * 1e6;
    }
    ort->ReleaseValue(in);
    ort->ReleaseMemoryInfo(mi);
    free(data);
    alloc->Free(alloc, in_name);
    alloc->Free(alloc, out_name);
    ort->ReleaseSession(sess);
    ort->ReleaseSessionOptions(so);
    return NULL;
}

static int cmp_d(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    if (argc < 6 || argc > 8) {
        fprintf(stderr, "usage: ort_direct MODEL.onnx THREADS INTRA_OP SECONDS BATCH "
                        "[session|global|nice [spin|nospin]]\n");
        return 2;
    }
    model_path = argv[1];
    int threads = atoi(argv[2]);
    intra_op = atoi(argv[3]);
    seconds = atof(argv[4]);
    batch = atoi(argv[5]);
    global_pool = argc > 6 && strcmp(argv[6], "global") == 0;
    nice_workers = argc > 6 && strcmp(argv[6], "nice") == 0;
    spin = argc > 7 && strcmp(argv[7], "spin") == 0;
    ort = OrtGetApiBase()->GetApi(ORT_API_VERSION);
    if (global_pool) {
        OrtThreadingOptions *to;
        check(ort->CreateThreadingOptions(&to));
        check(ort->SetGlobalIntraOpNumThreads(to, intra_op));
        check(ort->SetGlobalInterOpNumThreads(to, 1));
        check(ort->SetGlobalSpinControl(to, spin));
        check(ort->CreateEnvWithGlobalThreadPools(ORT_LOGGING_LEVEL_WARNING, "ort_direct", to, &env));
        ort->ReleaseThreadingOptions(to);
    } else {
        check(ort->CreateEnv(ORT_LOGGING_LEVEL_WARNING, "ort_direct", &env));
    }
    pthread_t th[64];
    result_t res[64];
    memset(res, 0, sizeof(res));
    if (threads > 64)
        threads = 64;
    pthread_barrier_init(&loaded, NULL, (unsigned)threads + 1);
    for (int i = 0; i < threads; i++)
        pthread_create(&th[i], NULL, runner, &res[i]);
    pthread_barrier_wait(&loaded);
    struct timespec c0, c1;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c0);
    size_t total = 0;
    for (int i = 0; i < threads; i++) {
        pthread_join(th[i], NULL);
        total += res[i].n;
    }
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &c1);
    double cpu_us = (c1.tv_sec - c0.tv_sec) * 1e6 + (c1.tv_nsec - c0.tv_nsec) / 1e3;
    double *all = malloc((total + 1) * sizeof(double));
    size_t k = 0;
    for (int i = 0; i < threads; i++) {
        memcpy(all + k, res[i].lat_us, res[i].n * sizeof(double));
        k += res[i].n;
        free(res[i].lat_us);
    }
    qsort(all, total, sizeof(double), cmp_d);
    printf("infer_per_sec=%.2f p50_us=%.0f p99_us=%.0f cpu_us_per_infer=%.0f\n",
           total * batch / seconds, total ? all[total / 2] : 0.0,
           total ? all[(size_t)(total * 0.99)] : 0.0, total ? cpu_us / (total * batch) : 0.0);
    free(all);
    ort->ReleaseEnv(env);
    return 0;
}
