/* server.c - nr_server_t (server.h): what every frontend shares. */
#include "server.h"

#include "../common/alloc.h"
#include "../common/log.h"

#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>

struct nr_server_s {
    char *id, *version;
    bool strict_readiness;
    nr_repo_t *repo;
    nr_shm_t *shm;
    _Atomic bool quiesced;
    _Atomic uint64_t last_request_ns; /* after quiesce: the last inference request's arrival */
};

/* Triton 2.51 lists: classification, sequence, model_repository,
 * model_repository(unload_dependents), schedule_policy, model_configuration,
 * system_shared_memory, cuda_shared_memory, binary_tensor_data, parameters,
 * statistics, trace, logging. nereid lists only what it really serves, in
 * Triton's order. Left out: sequence (no sequence batcher yet),
 * model_repository(unload_dependents) (no explicit model control),
 * schedule_policy (priority/timeout are passed to the core but the frontends
 * cannot promise the policy semantics), cuda_shared_memory (no GPU: its
 * endpoints answer, registering is refused) and trace (no
 * tracing: gRPC's TraceSetting answers with tracing off, HTTP has no
 * /v2/trace/setting).
 * parameters: custom request parameters reach the backends that read them (Python models'
 * request.parameters()). perf_analyzer only looks for "statistics". */
static const char *const extensions[] = {
    "classification", "model_repository", "model_configuration", "system_shared_memory",
    "binary_tensor_data", "parameters", "statistics", "logging",
};

size_t nr_server_extensions(const char *const **out)
{
    *out = extensions;
    return sizeof(extensions) / sizeof(extensions[0]);
}

nr_server_t *nr_server_new(const nr_server_options_t *o, nr_repo_t *repo)
{
    nr_server_t *s = nr_calloc(1, sizeof(*s));
    s->id = nr_strdup(o->id ? o->id : "triton");
    s->version = nr_strdup(o->version ? o->version : "");
    s->strict_readiness = o->strict_readiness;
    s->repo = repo;
    s->shm = nr_shm_new();
    atomic_init(&s->quiesced, false);
    atomic_init(&s->last_request_ns, 0);
    return s;
}

void nr_server_free(nr_server_t *s)
{
    if (s == NULL)
        return;
    nr_shm_free(s->shm);
    nr_repo_destroy(s->repo);
    free(s->id);
    free(s->version);
    free(s);
}

nr_repo_t *nr_server_repo(const nr_server_t *s)
{
    return s->repo;
}

nr_shm_t *nr_server_shm(const nr_server_t *s)
{
    return s->shm;
}

const char *nr_server_id(const nr_server_t *s)
{
    return s->id;
}

const char *nr_server_version(const nr_server_t *s)
{
    return s->version;
}

bool nr_server_live(const nr_server_t *s)
{
    (void)s;
    return true;
}

bool nr_server_ready(const nr_server_t *s)
{
    return !atomic_load(&s->quiesced) && (!s->strict_readiness || nr_repo_all_ready(s->repo));
}

void nr_server_quiesce(nr_server_t *s)
{
    atomic_store(&s->last_request_ns, nr_now_ns());
    atomic_store(&s->quiesced, true);
}

bool nr_server_quiesced(const nr_server_t *s)
{
    return atomic_load_explicit(&s->quiesced, memory_order_relaxed);
}

void nr_server_touch(nr_server_t *s)
{
    if (atomic_load_explicit(&s->quiesced, memory_order_relaxed)) /* (a request pays this) */
        atomic_store_explicit(&s->last_request_ns, nr_now_ns(), memory_order_relaxed);
}

uint64_t nr_server_drain(nr_server_t *s, int timeout_secs, uint64_t quiet_ms)
{
    for (int waited_ms = 0;; waited_ms += 10) {
        uint64_t n = nr_repo_inflight(s->repo);
        if (waited_ms % 1000 == 0)
            NR_LOG_INFO("Timeout %d: Found %llu in-flight inference requests",
                        timeout_secs - waited_ms / 1000, (unsigned long long)n);
        uint64_t quiet_ns = nr_now_ns() - atomic_load(&s->last_request_ns);
        if ((n == 0 && quiet_ns >= quiet_ms * 1000000) || waited_ms >= timeout_secs * 1000)
            return n;
        struct timespec ts = {0, 10 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
}

void nr_server_enable_obs(nr_server_t *s, size_t cap)
{
    nr_repo_enable_obs(s->repo, cap);
}
