/* obs.h - recent per-request observations (nr_obs_t), for Triton's latency
 * summaries (nv_inference_*_summary_us): a fixed ring of the latest requests'
 * request, queue and compute durations in whole microseconds, each with the
 * time it completed, written by the threads that finish requests and read by
 * the metrics scrape. Only allocated when summaries are enabled.
 *
 * Lock-free: a writer claims the next slot with one atomic add on the ring's
 * head, then owns the slot through a per-slot sequence word (odd while it is
 * written, even once published), so two writers never mix one slot; a reader
 * copies a slot and keeps it only when the sequence was even and unchanged
 * around the copy (a seqlock per slot). Every shared word is an atomic, so a
 * torn read is detected, never undefined. A writer that finds its slot still
 * being written (the ring wrapped around a writer stalled for `cap`
 * observations) drops its observation.
 */
#ifndef NR_OBS_H
#define NR_OBS_H

#include <stddef.h>
#include <stdint.h>

/* What one observation holds, in this order. */
typedef enum {
    NR_OBS_REQUEST,
    NR_OBS_QUEUE,
    NR_OBS_COMPUTE_INPUT,
    NR_OBS_COMPUTE_INFER,
    NR_OBS_COMPUTE_OUTPUT,
    NR_OBS_N
} nr_obs_kind_t;

typedef struct nr_obs_s nr_obs_t;

/* A ring of `cap` observations (rounded up to a power of two, at least 2). */
nr_obs_t *nr_obs_new(size_t cap);
void nr_obs_free(nr_obs_t *o);
size_t nr_obs_cap(const nr_obs_t *o);
/* Records one request that completed at t_ns (CLOCK_MONOTONIC) with the
 * durations us[NR_OBS_N]. Any thread. */
void nr_obs_record(nr_obs_t *o, uint64_t t_ns, const uint32_t us[NR_OBS_N]);
/* Copies the observations that completed at or after since_ns into
 * out[k][0..n) (each out[k] has room for nr_obs_cap values), one array per
 * kind; returns n. Any thread, concurrently with writers. */
size_t nr_obs_collect(const nr_obs_t *o, uint64_t since_ns, uint32_t *const out[NR_OBS_N]);

#endif
