/* analyzer_run.c - one variant measured (analyzer.h).
 *
 * Load (with the variant's config as the override), then concurrency 1, 2, 4, ... up to
 * --run-config-search-max-concurrency, each level measured by nereid-perf's engine
 * (perf_measure) in this process: perf_analyzer's windows and stability rules, count windows
 * by default as Model Analyzer asks for them. A level that does not settle is kept (its
 * windows merged, as nereid-perf --report-unstable does) and marked unstable instead of
 * failing the run. Model Analyzer's early exit ends the sweep: four levels in a row that gain
 * no more than 5 % over the first of them; so does a level over --latency-budget. Then unload.
 * Around each level: the server's CPU time and its peak resident memory (VmHWM, reset through
 * /proc/<pid>/clear_refs).
 */
#include "analyzer.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static double ms(double ns)
{
    return ns / 1e6;
}

static double avg_ms(uint64_t ns, uint64_t count)
{
    return count ? ms((double)ns / (double)count) : 0;
}

static void point_of(const perf_opts_t *po, const perf_step_t *s, az_point_t *p)
{
    const perf_window_t *w = &s->merged;
    p->concurrency = s->value;
    p->throughput = perf_throughput(po, w);
    p->avg_ms = ms(perf_hist_mean(&w->lat));
    p->p50_ms = ms((double)perf_hist_percentile(&w->lat, 50));
    p->p90_ms = ms((double)perf_hist_percentile(&w->lat, 90));
    p->p95_ms = ms((double)perf_hist_percentile(&w->lat, 95));
    p->p99_ms = ms((double)perf_hist_percentile(&w->lat, 99));
    const perf_server_stats_t *v = &w->server;
    p->queue_ms = avg_ms(v->queue_ns, v->queue_count);
    p->input_ms = avg_ms(v->input_ns, v->input_count);
    p->infer_ms = avg_ms(v->infer_ns, v->infer_count);
    p->output_ms = avg_ms(v->output_ns, v->output_count);
    uint64_t n = w->count ? w->count : 1;
    double wait = (double)w->lib_ns / (double)n - (double)(w->send_ns + w->recv_ns) / (double)n;
    p->wait_ms = wait > 0 ? ms(wait) : 0;
}

static void set_error(az_run_t *r, const char *what, const char *msg)
{
    size_t n = strlen(what) + strlen(msg) + 3;
    r->error = nr_malloc(n);
    snprintf(r->error, n, "%s%s%s", what, *what ? ": " : "", msg);
}

/* Model Analyzer's early exit: the last four levels gain at most 5 % over the first of them. */
static bool plateau(const az_run_t *r)
{
    if (r->n_pts < 4)
        return false;
    double first = r->pts[r->n_pts - 4].throughput;
    for (size_t i = r->n_pts - 3; i < r->n_pts; i++)
        if (r->pts[i].throughput > first * 1.05)
            return false;
    return true;
}

static void sweep(const az_opts_t *o, az_server_t *s, const char *model, az_run_t *r)
{
    perf_opts_t po;
    perf_opts_defaults(&po);
    po.model = model;
    po.url = s->url;
    po.grpc = strcmp(o->protocol, "grpc") == 0;
    po.protocol = o->protocol;
    po.batch = o->batch;
    po.count_windows = o->interval_ms == 0;
    if (o->interval_ms)
        po.interval_ms = o->interval_ms;
    po.request_count = o->request_count;
    po.max_trials = o->max_trials;
    po.stability = o->stability;
    po.report_unstable = true;
    perf_ctl_t ctl = {.grpc = po.grpc};
    ctl.http.fd = -1;
    perf_model_t m;
    nr_status_t *st = po.grpc ? perf_grpc_open(&ctl.g, po.url) : perf_conn_init(&ctl.http, po.url);
    if (st == NULL)
        st = po.grpc ? perf_grpc_model_load(&ctl.g, &po, &m) : perf_model_load(&ctl.http, &po, &m);
    else
        perf_model_init(&m, &po);
    if (st) {
        set_error(r, "", st->msg);
        nr_status_free(st);
        goto out;
    }
    for (uint64_t c = r->min_conc; c <= r->max_conc; c *= 2) {
        perf_step_t step = {.value = c, .threads = c};
        perf_step_result_t res;
        char why[1024] = "";
        az_server_reset_peak(s);
        uint64_t cpu0 = az_server_cpu_ns(s), t0 = perf_now_ns();
        int e = perf_measure(&ctl, &po, &m, &step, &res, why, sizeof(why));
        uint64_t cpu1 = az_server_cpu_ns(s), t1 = perf_now_ns();
        if (e >= 0) {
            set_error(r, "", why);
            break;
        }
        r->pts = nr_realloc(r->pts, (r->n_pts + 1) * sizeof(*r->pts));
        az_point_t *p = &r->pts[r->n_pts++];
        memset(p, 0, sizeof(*p));
        point_of(&po, &step, p);
        perf_window_free(&step.merged);
        p->stable = res == PERF_STEP_STABLE;
        p->cpu_util = cpu1 > cpu0 && t1 > t0 ? (double)(cpu1 - cpu0) / (double)(t1 - t0) : 0;
        uint64_t peak = az_server_peak_rss(s);
        p->mem_mb = peak ? (double)peak / 1e6 : 0;
        if (o->verbose || isatty(2))
            fprintf(stderr, "  concurrency %llu: %.1f infer/sec, p99 %.2f ms%s\n",
                    (unsigned long long)c, p->throughput, p->p99_ms,
                    p->stable ? "" : " (not stable)");
        if (plateau(r) || (o->latency_budget_ms > 0 && p->p99_ms > o->latency_budget_ms))
            break;
    }
out:
    perf_model_free(&m);
    if (po.grpc)
        perf_grpc_close(&ctl.g);
    else
        perf_conn_close(&ctl.http);
}

void az_run_variant(const az_opts_t *o, az_server_t *s, const char *model,
                    const az_variant_t *v, size_t index, uint64_t min_conc, uint64_t max_conc,
                    az_run_t *r)
{
    memset(r, 0, sizeof(*r));
    r->variant = index;
    r->min_conc = min_conc;
    r->max_conc = max_conc;
    r->load_mb = -1;
    uint64_t t0 = perf_now_ns();
    nr_status_t *st = az_server_load(s, model, v->is_default ? NULL : v->config_json);
    r->load_s = (double)(perf_now_ns() - t0) / 1e9;
    if (st) {
        set_error(r, "", st->msg);
        nr_status_free(st);
        return;
    }
    uint64_t loaded = az_server_rss(s);
    sweep(o, s, model, r);
    if ((st = az_server_unload(s, model)) != NULL) {
        if (r->error == NULL)
            set_error(r, "", st->msg);
        nr_status_free(st);
        return;
    }
    /* The model's memory: what the unload gave back. Measured against the server before the
     * load, it would also count ONNX Runtime's own start (about 48 MB, paid by a server's
     * first load and kept after it). */
    uint64_t unloaded = az_server_rss(s);
    if (loaded && unloaded)
        r->load_mb = loaded > unloaded ? (double)(loaded - unloaded) / 1e6 : 0;
}

double az_run_peak(const az_run_t *r)
{
    double best = 0;
    for (size_t i = 0; i < r->n_pts; i++)
        best = r->pts[i].throughput > best ? r->pts[i].throughput : best;
    return best;
}

void az_run_free(az_run_t *r)
{
    free(r->pts);
    free(r->error);
    memset(r, 0, sizeof(*r));
}
