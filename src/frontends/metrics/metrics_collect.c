/* metrics_collect.c - one scrape's view of the core: every model version of
 * the repository in its order (nr_kserve_versions), READY ones filled from
 * the statistics snapshot GET /v2/models/stats reports too (so the two always
 * agree), the queued count, and the quantiles of the recent observations.
 * Runs on the metrics thread; the request path never waits for it (snapshots
 * take the statistics' group lock, which an execution holds only while it
 * adds its counters).
 */
#include "metrics_int.h"

#include "../../common/alloc.h"
#include "../../core/kserve.h"
#include "../../core/request.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

double nr_metrics_quantile_of(const uint32_t *sorted, size_t n, double q)
{
    if (n == 0)
        return NAN;
    double rank = ceil(q * (double)n); /* nearest rank, 1-based */
    size_t i = rank <= 1 ? 0 : rank >= (double)n ? n - 1 : (size_t)rank - 1;
    return (double)sorted[i];
}

static int cmp_u32(const void *a, const void *b)
{
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    return (x > y) - (x < y);
}

typedef struct {
    nr_metrics_view_t *v;
    size_t cap;                /* rows allocated */
    uint32_t *scratch[NR_OBS_N];
    size_t scratch_cap;
    uint64_t since_ns;
} collect_t;

static void fill_quantiles(collect_t *c, nr_metrics_row_t *r, nr_obs_t *obs)
{
    const nr_metrics_view_t *v = c->v;
    r->quantile = nr_calloc((size_t)NR_OBS_N * v->n_quantiles + 1, sizeof(double));
    size_t n = 0;
    if (obs != NULL) {
        size_t cap = nr_obs_cap(obs);
        if (cap > c->scratch_cap) {
            for (int k = 0; k < NR_OBS_N; k++)
                c->scratch[k] = nr_realloc(c->scratch[k], cap * sizeof(uint32_t));
            c->scratch_cap = cap;
        }
        n = nr_obs_collect(obs, c->since_ns, c->scratch);
    }
    for (int k = 0; k < NR_OBS_N; k++) {
        if (n > 1)
            qsort(c->scratch[k], n, sizeof(uint32_t), cmp_u32);
        for (size_t i = 0; i < v->n_quantiles; i++)
            r->quantile[(size_t)k * v->n_quantiles + i] =
                nr_metrics_quantile_of(c->scratch[k], n, v->quantiles[i].q);
    }
}

/* With --model-namespacing one name can be in several repositories: their versions share
 * Triton's labels (model, version), and so one series, as prometheus-cpp shares it. The
 * last row joins an earlier one of the same labels (the same name's rows are adjacent):
 * counts add up; the quantiles stay the earlier row's. */
static void merge_last(nr_metrics_view_t *v)
{
    nr_metrics_row_t *r = &v->rows[v->n_rows - 1];
    for (size_t k = v->n_rows - 1; k-- > 0 && !strcmp(v->rows[k].model, r->model);) {
        nr_metrics_row_t *a = &v->rows[k];
        if (strcmp(a->version, r->version) != 0)
            continue;
        if (!a->ready && r->ready) { /* keep the serving one's quantiles */
            nr_metrics_row_t t = *a;
            *a = *r;
            *r = t;
        }
        a->ready |= r->ready;
        a->cached |= r->cached;
        a->success += r->success;
        a->inferences += r->inferences;
        a->executions += r->executions;
        a->pending += r->pending;
        a->cache_hits += r->cache_hits;
        a->cache_misses += r->cache_misses;
        a->cache_hit_us += r->cache_hit_us;
        a->cache_miss_us += r->cache_miss_us;
        for (int f = 0; f < NR_FAIL_N; f++)
            a->failure[f] += r->failure[f];
        for (int o = 0; o < NR_OBS_N; o++)
            a->us[o] += r->us[o];
        free(r->model);
        free(r->version);
        free(r->quantile);
        v->n_rows--;
        return;
    }
}

static void on_version(const nr_repo_version_t *rv, void *arg)
{
    nr_model_t *m = rv->model;
    /* series exist for serving versions and for versions that failed to load (their
     * failure counters, as Triton); an unloaded or loading version has none */
    if (rv->version < 0 || (m == NULL && (rv->state != NR_MODEL_UNAVAILABLE ||
                                          nr_repo_unloaded(rv->state, rv->reason))))
        return;
    collect_t *c = arg;
    nr_metrics_view_t *v = c->v;
    if (v->n_rows == c->cap) {
        c->cap = c->cap ? 2 * c->cap : 16;
        v->rows = nr_realloc(v->rows, c->cap * sizeof(*v->rows));
    }
    nr_metrics_row_t *r = &v->rows[v->n_rows++];
    memset(r, 0, sizeof(*r));
    r->model = nr_strdup(rv->name); /* the repository may change once the walk ends */
    /* Triton's ensemble scheduler reports under version "1" whatever its directory is */
    bool ensemble = m != NULL && m->ensemble != NULL;
    r->version = nr_strdup(ensemble ? "1" : rv->version_str);
    if (m == NULL) { /* not serving: only its failure series */
        merge_last(v);
        return;
    }
    nr_stats_snap_t sn;
    nr_stats_snapshot(&m->stats, &sn);
    r->ready = true;
    r->success = sn.success.count;
    r->inferences = sn.inference_count;
    r->executions = sn.execution_count;
    r->cached = m->cached;
    r->cache_hits = sn.cache_hit.count;
    r->cache_misses = sn.cache_miss.count;
    r->cache_hit_us = sn.cache_hit.ns / 1000;
    r->cache_miss_us = sn.cache_miss.ns / 1000;
    memcpy(r->failure, sn.failure, sizeof(r->failure));
    /* The sum of every request's ns, divided once: Triton adds whole us per
     * request, so its figure can be lower by up to 1 us per request. */
    r->us[NR_OBS_REQUEST] = sn.success.ns / 1000;
    r->us[NR_OBS_QUEUE] = sn.queue.ns / 1000;
    r->us[NR_OBS_COMPUTE_INPUT] = sn.compute_input.ns / 1000;
    r->us[NR_OBS_COMPUTE_INFER] = sn.compute_infer.ns / 1000;
    r->us[NR_OBS_COMPUTE_OUTPUT] = sn.compute_output.ns / 1000;
    nr_stats_snap_free(&sn);
    r->pending = nr_model_queued(m);
    if (v->summaries)
        fill_quantiles(c, r, atomic_load_explicit(&m->stats.obs, memory_order_acquire));
    merge_last(v);
}

void nr_metrics_collect(nr_server_t *core, bool summaries, const nr_metrics_quantile_t *q,
                        size_t nq, nr_metrics_view_t *v)
{
    memset(v, 0, sizeof(*v));
    v->summaries = summaries;
    v->quantiles = q;
    v->n_quantiles = nq;
    collect_t c = {.v = v};
    uint64_t now = nr_now_ns();
    c.since_ns = now > NR_METRICS_SUMMARY_WINDOW_NS ? now - NR_METRICS_SUMMARY_WINDOW_NS : 0;
    nr_kserve_versions(core, on_version, &c);
    for (int k = 0; k < NR_OBS_N; k++)
        free(c.scratch[k]);
    nr_cmetrics_snapshot(&v->custom, &v->n_custom);
}

void nr_metrics_view_free(nr_metrics_view_t *v)
{
    for (size_t i = 0; i < v->n_rows; i++) {
        free(v->rows[i].quantile);
        free(v->rows[i].model);
        free(v->rows[i].version);
    }
    free(v->rows);
    nr_cmetrics_snapshot_free(v->custom, v->n_custom);
    memset(v, 0, sizeof(*v));
}
