/* stats.c - statistics counters: init, snapshot for readers, the observation
 * ring for latency summaries. */
#include "stats.h"

#include "../common/alloc.h"

#include <stdlib.h>
#include <string.h>

void nr_stats_init(nr_stats_t *s, uint32_t max_batch_size)
{
    memset(s, 0, sizeof(*s));
    s->n_batch = max_batch_size + 1;
    s->batch = nr_calloc(s->n_batch, sizeof(nr_stat_batch_t));
    atomic_init(&s->obs, NULL);
    pthread_mutex_init(&s->group, NULL);
}

void nr_stats_destroy(nr_stats_t *s)
{
    free(s->batch);
    s->batch = NULL;
    nr_obs_free(atomic_exchange(&s->obs, NULL));
    pthread_mutex_destroy(&s->group);
}

void nr_stats_enable_obs(nr_stats_t *s, size_t cap)
{
    nr_obs_t *ring = nr_obs_new(cap), *none = NULL;
    /* release: a thread that loads the pointer sees the ring initialized */
    if (!atomic_compare_exchange_strong_explicit(&s->obs, &none, ring, memory_order_acq_rel,
                                                 memory_order_acquire))
        nr_obs_free(ring);
}

const char *nr_fail_reason_name(nr_fail_reason_t r)
{
    static const char *const names[NR_FAIL_N] = {"REJECTED", "CANCELED", "BACKEND", "OTHER"};
    return (unsigned)r < NR_FAIL_N ? names[r] : "OTHER";
}

static nr_dur_snap_t snap(const nr_stat_dur_t *d)
{
    nr_dur_snap_t r = {atomic_load_explicit(&d->count, memory_order_relaxed),
                       atomic_load_explicit(&d->ns, memory_order_relaxed)};
    return r;
}

void nr_stats_snapshot(const nr_stats_t *s, nr_stats_snap_t *o)
{
    pthread_mutex_t *group = (pthread_mutex_t *)&s->group;
    memset(o, 0, sizeof(*o));
    o->batch = nr_calloc(s->n_batch, sizeof(nr_batch_snap_t));
    pthread_mutex_lock(group);
    o->last_inference_ms = atomic_load_explicit(&s->last_inference_ms, memory_order_relaxed);
    o->inference_count = atomic_load_explicit(&s->inference_count, memory_order_relaxed);
    o->execution_count = atomic_load_explicit(&s->execution_count, memory_order_relaxed);
    o->success = snap(&s->success);
    o->fail = snap(&s->fail);
    o->queue = snap(&s->queue);
    o->compute_input = snap(&s->compute_input);
    o->compute_infer = snap(&s->compute_infer);
    o->compute_output = snap(&s->compute_output);
    o->cache_hit = snap(&s->cache_hit);
    o->cache_miss = snap(&s->cache_miss);
    for (int r = 0; r < NR_FAIL_N; r++)
        o->failure[r] = atomic_load_explicit(&s->failure[r], memory_order_relaxed);
    for (uint32_t b = 0; b < s->n_batch; b++) {
        nr_batch_snap_t bs = {b, snap(&s->batch[b].compute_input), snap(&s->batch[b].compute_infer),
                              snap(&s->batch[b].compute_output)};
        if (bs.compute_infer.count)
            o->batch[o->n_batch++] = bs;
    }
    pthread_mutex_unlock(group);
}

void nr_stats_snap_free(nr_stats_snap_t *snap)
{
    free(snap->batch);
    snap->batch = NULL;
}
