/* model.h - one loaded version of one model: config, backend state, its
 * instances and their queue, statistics and classification labels. Created
 * by the repository and reference counted: the repository holds one
 * reference while the version serves, every request one from lookup until
 * its response is released; when the last goes, the repository unloads it
 * (on its own thread: the last release may come from an instance thread).
 *
 * Threads: a model is loaded and unloaded by one thread at a time (the repository's); once
 * READY, it is shared read-only by every thread that holds a reference, and only the
 * scheduler (its own locks), the statistics (atomics and their group lock) and the
 * reference count change.
 */
#ifndef NR_MODEL_H
#define NR_MODEL_H

#include "../backends/backend.h"
#include "../common/debug.h"
#include "../common/strmap.h"
#include "../config/model_config.h"
#include "classify.h"
#include "request.h"
#include "stats.h"

/* Triton's ModelReadyState, in its order. */
typedef enum {
    NR_MODEL_UNKNOWN,
    NR_MODEL_READY,
    NR_MODEL_UNAVAILABLE,
    NR_MODEL_LOADING,
    NR_MODEL_UNLOADING,
} nr_model_state_t;

typedef struct nr_sched_s nr_sched_t;
typedef struct nr_instance_s nr_instance_t;
typedef struct nr_ensemble_s nr_ensemble_t;
/* How a model finds another (an ensemble's steps): a READY version of `name` with a
 * reference (version < 0: the highest READY one), or the repository's error. */
typedef nr_status_t *(*nr_model_lookup_fn)(void *arg, const char *name, int64_t version,
                                           nr_model_t **out);

struct nr_model_s {
    const char *name;              /* = cfg->name */
    int64_t version;
    char version_str[24];          /* "1" */
    const nr_model_config_t *cfg;  /* shared by the versions of one model; immutable */
    const nr_backend_t *backend;
    void *backend_state;
    nr_model_state_t state;        /* LOADING until loaded, then READY (or UNAVAILABLE) */
    char *reason;                  /* why UNAVAILABLE ("Internal: ...") */
    nr_label_set_t labels;         /* the outputs' label files, read at load */
    /* References (see above). When they reach 0, on_last_release(m) runs on
     * the releasing thread; it must not unload m there. */
    _Atomic uint32_t refs;
    void (*on_last_release)(nr_model_t *m);
    void *owner;                   /* the repository's record of this load */
    nr_instance_t **instances;
    size_t n_instances;
    nr_sched_t *sched;
    /* platform "ensemble": the plan its requests run through (ensemble.h); such a model has
     * no backend, instances or queue of its own */
    nr_ensemble_t *ensemble;
    nr_model_lookup_fn lookup; /* set by the repository before nr_model_load */
    void *lookup_arg;
    struct nr_repo_s *repo;    /* the repository that loads it (its backend's model control,
                                  host.c); NULL outside one */
    const char *ns;            /* its namespace in the repository ("" without namespacing) */
    nr_host_t host; /* what its backend's instances may ask of the server (host.c) */
    nr_stats_t stats;
    /* precomputed at load (nr_model_index): the config outputs' indices in
     * name order, and name -> config index for inputs and outputs, so that a
     * request's names resolve in O(1) each whatever the model's size */
    uint32_t *outputs_by_name;
    nr_strmap_t input_index, output_index; /* keys: the config's names */
    /* Run a request on the submitting thread when an instance is idle and
     * nothing is queued (set by the repository; tests that hold instance
     * threads leave it off). */
    bool allow_inline;
    /* response_cache { enable: true } with a cache configured (cache.h): its requests are
     * looked up at submit; cache_owner names this load's entries */
    bool cached;
    uint64_t cache_owner;
};

/* Loads a version: backend model_load, instances (threads named after them),
 * scheduler. On failure returns the error; the caller marks it UNAVAILABLE.
 * Refuses what the core cannot serve (UNSUPPORTED): sequence batching.
 * Context: the loading thread (repository.h); blocks on the backend and warmup; no
 * repository lock held. */
NR_MUST_CHECK nr_status_t *nr_model_load(nr_model_t *m, const char *model_dir,
                                         const char *model_path, int cpu_count);
/* Stops instance threads (after the queue drains) and unloads the backend.
 * Context: the repository's reaper (or the loading thread, for a version that failed or was
 * never published), once no reference is left; blocks until the instance threads end. */
void nr_model_unload(nr_model_t *m);

/* Takes one more reference on m; drops one (see on_last_release; the debug builds assert
 * that no release comes without its reference). Context: any thread; never blocks. */
static inline void nr_model_ref(nr_model_t *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
}
static inline void nr_model_release(nr_model_t *m)
{
    if (m == NULL)
        return;
    uint32_t refs = atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel);
    NR_DEBUG_ASSERT(refs > 0); /* a release without its reference */
    if (refs == 1)
        m->on_last_release(m);
}
/* The labels of config output `output`, or NULL. Context: any thread holding a reference. */
const nr_labels_t *nr_model_labels(const nr_model_t *m, uint32_t output);

/* The name indexes above, from m->cfg (nr_model_load builds them; a model
 * assembled without loading calls this itself). Context: the loading thread. */
void nr_model_index(nr_model_t *m);
/* Frees what nr_model_index built (safe when it never ran). Context: the unloading thread. */
void nr_model_index_free(nr_model_t *m);
/* Config index of the input / output named so, or -1. Context: any thread holding a
 * reference; no lock. */
int nr_model_input_index(const nr_model_t *m, const char *name, size_t len);
int nr_model_output_index(const nr_model_t *m, const char *name, size_t len);

/* Validates `req` and queues it. On success the model owns the request until
 * req->done runs, which may happen before this returns (inline execution on
 * the calling thread). On failure returns the error (nothing queued, done not
 * called). A decoupled model takes only requests with an on_response (UNSUPPORTED otherwise)
 * and never runs them inline. With inline execution the calling thread may also run, and call
 * done() for, up to 8 requests other threads queued meanwhile (NR_MODEL_DRAIN_MAX, model.c;
 * request.h).
 * Context: a frontend thread holding a reference on m, no lock held (done() may run here);
 * may block for as long as the model executes when it runs inline (only while the model's
 * mean execution is under the request's inline limit). */
NR_MUST_CHECK nr_status_t *nr_model_submit(nr_model_t *m, nr_req_t *req);
/* Requests queued or executing, for shutdown draining. Context: any thread; takes the
 * queue's lock briefly. */
uint64_t nr_model_inflight(nr_model_t *m);
/* Whether a request's `cancelled` can change what it does (an ensemble's next steps, a backend
 * whose models ask): frontends need not watch for a client's cancel otherwise.
 * Context: any thread holding a reference. */
bool nr_model_sees_cancellation(const nr_model_t *m);
/* Requests queued and not yet executing (the metrics' pending count). Context: any thread;
 * takes the queue's lock briefly. */
uint64_t nr_model_queued(nr_model_t *m);

#endif
