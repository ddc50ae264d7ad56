/* stats.h - per-model-version statistics (Triton's statistics extension).
 * Counters are atomics updated by instance threads and the submitting thread
 * with relaxed ordering. The counters one execution adds (success, queue, the
 * three compute durations, inference and execution counts, the batch entry)
 * are added under `group` and snapshots read under it too, so a reader never
 * sees a request's compute_infer counted without its compute_output:
 * perf_analyzer aborts on unequal compute counts ("Server side statistics
 * compute counts must be the same"). A failure outside an execution needs no lock.
 */
#ifndef NR_STATS_H
#define NR_STATS_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

typedef struct { atomic_uint_fast64_t count, ns; } nr_stat_dur_t;

typedef struct {
    nr_stat_dur_t compute_input, compute_infer, compute_output;
} nr_stat_batch_t;

typedef struct nr_stats_s {
    atomic_uint_fast64_t last_inference_ms;
    atomic_uint_fast64_t inference_count; /* sum of batch sizes of successful requests */
    atomic_uint_fast64_t execution_count; /* backend executions */
    nr_stat_dur_t success, fail, queue, compute_input, compute_infer, compute_output;
    nr_stat_dur_t cache_hit, cache_miss;
    nr_stat_batch_t *batch; /* [max_batch_size + 1], indexed by batch size */
    uint32_t n_batch;
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
    nr_batch_snap_t *batch; /* only sizes that executed, ascending; owned by snapshot */
    uint32_t n_batch;
} nr_stats_snap_t;

void nr_stats_init(nr_stats_t *s, uint32_t max_batch_size);
void nr_stats_destroy(nr_stats_t *s);
/* Reads the counters; takes `group` (the lock is not part of the value, hence const). */
void nr_stats_snapshot(const nr_stats_t *s, nr_stats_snap_t *out);
void nr_stats_snap_free(nr_stats_snap_t *snap);

static inline void nr_stat_add(nr_stat_dur_t *d, uint64_t ns)
{
    atomic_fetch_add_explicit(&d->count, 1, memory_order_relaxed);
    atomic_fetch_add_explicit(&d->ns, ns, memory_order_relaxed);
}

#endif
