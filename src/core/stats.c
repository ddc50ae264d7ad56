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
    free(s->resp);
    s->resp = NULL;
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
    if (s->n_resp > 0) {
        o->resp = nr_calloc(s->n_resp, sizeof(*o->resp));
        o->n_resp = s->n_resp;
        for (uint32_t i = 0; i < s->n_resp; i++) {
            const nr_stat_resp_t *r = &s->resp[i];
            o->resp[i] = (struct nr_resp_snap_s){snap(&r->compute_infer), snap(&r->compute_output),
                                                  snap(&r->success), snap(&r->fail),
                                                  snap(&r->empty_response), snap(&r->cancel)};
        }
    }
    pthread_mutex_unlock(group);
}

void nr_stats_response(nr_stats_t *s, uint32_t index, uint64_t infer_ns, uint64_t output_ns,
                       nr_resp_kind_t kind)
{
    pthread_mutex_lock(&s->group);
    if (index >= s->n_resp) {
        s->resp = nr_realloc(s->resp, ((size_t)index + 1) * sizeof(*s->resp));
        memset(s->resp + s->n_resp, 0, (index + 1 - s->n_resp) * sizeof(*s->resp));
        s->n_resp = index + 1;
    }
    nr_stat_resp_t *r = &s->resp[index];
    nr_stat_add(&r->compute_infer, infer_ns);
    nr_stat_add(&r->compute_output, output_ns);
    nr_stat_add(kind == NR_RESP_SUCCESS ? &r->success
                : kind == NR_RESP_FAIL  ? &r->fail
                                        : &r->empty_response,
                infer_ns + output_ns);
    pthread_mutex_unlock(&s->group);
}

void nr_stats_snap_free(nr_stats_snap_t *snap)
{
    free(snap->batch);
    snap->batch = NULL;
    free(snap->resp);
    snap->resp = NULL;
}
