/* stats.h - per-model-version statistics (Triton's statistics extension).
 * Counters are atomics updated by instance threads and the submitting thread
 * with relaxed ordering. The counters one execution adds (success, queue, the
 * three compute durations, inference and execution counts, the batch entry)
 * are added under `group` and snapshots read under it too, so a reader never
 * sees a request's compute_infer counted without its compute_output:
 * perf_analyzer aborts on unequal compute counts ("Server side statistics
 * compute counts must be the same"). A failure outside an execution needs no lock.
 *
 * The same counters feed the Prometheus metrics (frontends/metrics): every
 * failure is also counted under Triton's reason (nr_stat_fail), and with
 * latency summaries enabled each successful request is also recorded in a
 * ring of recent observations (obs.h), published through an atomic pointer so
 * that the request path pays one load and a branch while summaries are off.
 */
#ifndef NR_STATS_H
#define NR_STATS_H

#include "obs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

/* Why a request failed, as Triton's nv_inference_request_failure labels it:
 * REJECTED (queue full, queue timeout), CANCELED, BACKEND (failed in an
 * execution), OTHER (anything else in the core). Requests refused by
 * validation before they are queued are not failures at all. */
typedef enum {
    NR_FAIL_REJECTED,
    NR_FAIL_CANCELED,
    NR_FAIL_BACKEND,
    NR_FAIL_OTHER,
    NR_FAIL_N
} nr_fail_reason_t;

typedef struct { atomic_uint_fast64_t count, ns; } nr_stat_dur_t;

typedef struct {
    nr_stat_dur_t compute_input, compute_infer, compute_output;
} nr_stat_batch_t;

/* Per response index of a decoupled model's requests (Triton's response_stats): the time
 * since the request's execution or its previous response, the time its frontend took, and
 * the response's outcome with their sum. */
typedef struct {
    nr_stat_dur_t compute_infer, compute_output, success, fail, empty_response, cancel;
} nr_stat_resp_t;
typedef enum { NR_RESP_SUCCESS, NR_RESP_FAIL, NR_RESP_EMPTY } nr_resp_kind_t;

typedef struct nr_stats_s {
    atomic_uint_fast64_t last_inference_ms;
    atomic_uint_fast64_t inference_count; /* sum of batch sizes of successful requests */
    atomic_uint_fast64_t execution_count; /* backend executions */
    nr_stat_dur_t success, fail, queue, compute_input, compute_infer, compute_output;
    nr_stat_dur_t cache_hit, cache_miss;
    atomic_uint_fast64_t failure[NR_FAIL_N]; /* fail.count split by reason */
    _Atomic(nr_obs_t *) obs; /* recent requests, for summaries; NULL = not recorded */
    nr_stat_batch_t *batch; /* [max_batch_size + 1], indexed by batch size */
    uint32_t n_batch;
    nr_stat_resp_t *resp;   /* [n_resp] by response index; grown and read under group */
    uint32_t n_resp;
    pthread_mutex_t group; /* one execution's additions vs. a snapshot */
} nr_stats_t;

typedef struct { uint64_t count, ns; } nr_dur_snap_t;
typedef struct {
    uint64_t batch_size;
    nr_dur_snap_t compute_input, compute_infer, compute_output;
} nr_batch_snap_t;
typedef struct {
    uint64_t last_inference_ms, inference_count, execution_count;
    nr_dur_snap_t success, fail, queue, compute_input, compute_infer, compute_output, cache_hit,
        cache_miss;
    uint64_t failure[NR_FAIL_N];
    nr_batch_snap_t *batch; /* only sizes that executed, ascending; owned by snapshot */
    uint32_t n_batch;
    struct nr_resp_snap_s {
        nr_dur_snap_t compute_infer, compute_output, success, fail, empty_response, cancel;
    } *resp; /* [n_resp] by response index; owned by the snapshot */
    uint32_t n_resp;
} nr_stats_snap_t;

void nr_stats_init(nr_stats_t *s, uint32_t max_batch_size);
void nr_stats_destroy(nr_stats_t *s);
/* Reads the counters; takes `group` (the lock is not part of the value, hence const). */
void nr_stats_snapshot(const nr_stats_t *s, nr_stats_snap_t *out);
void nr_stats_snap_free(nr_stats_snap_t *snap);
/* Starts recording observations in a ring of `cap` (once; later calls keep
 * the first ring). Any thread, also while requests run. */
void nr_stats_enable_obs(nr_stats_t *s, size_t cap);
/* One response of a decoupled model's request, the index-th of it. Takes `group`. */
void nr_stats_response(nr_stats_t *s, uint32_t index, uint64_t infer_ns, uint64_t output_ns,
                       nr_resp_kind_t kind);
/* The "BACKEND" ... label of a reason. */
const char *nr_fail_reason_name(nr_fail_reason_t r);

static inline void nr_stat_add(nr_stat_dur_t *d, uint64_t ns)
{
    atomic_fetch_add_explicit(&d->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->ns, ns, memory_order_relaxed);
}

/* One failed request: `fail` and its reason. */
static inline void nr_stat_fail(nr_stats_t *s, nr_fail_reason_t r, uint64_t ns)
{
    atomic_fetch_add_explicit(&s->failure[r], 1, memory_order_relaxed);
    nr_stat_add(&s->fail, ns);
}

#endif
