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

/* The measuring client of one model: perf options and the model's metadata. */
typedef struct {
    perf_opts_t po;
    perf_model_t m;
    perf_step_t step;
    bool have_model; /* m to be freed: its load was tried (it starts by initializing m) */
} client_t;

static void client_opts(const az_opts_t *o, const az_server_t *s, const char *model,
                        perf_opts_t *po)
{
    perf_opts_defaults(po);
    po->model = model;
    po->url = s->url;
    po->grpc = strcmp(o->protocol, "grpc") == 0;
    po->protocol = o->protocol;
    po->batch = o->batch;
    po->count_windows = o->interval_ms == 0;
    if (o->interval_ms)
        po->interval_ms = o->interval_ms;
    po->request_count = o->request_count;
    po->max_trials = o->max_trials;
    po->stability = o->stability;
    po->report_unstable = true;
}

static void set_all_errors(az_run_t *runs, size_t n, const char *what, const char *msg)
{
    for (size_t i = 0; i < n; i++)
        if (runs[i].error == NULL)
            set_error(&runs[i], what, msg);
}

/* Concurrency min_conc, 2 x min_conc, ... for every model at once (each model gets that many
 * requests in flight, all measured over the same windows), until every run's throughput
 * levels off or a model's p99 passes the latency budget. */
static void sweep(const az_opts_t *o, az_server_t *s, char *const *models, size_t n,
                  az_run_t *runs)
{
    client_t *cl = nr_calloc(n, sizeof(*cl));
    perf_part_t *parts = nr_calloc(n, sizeof(*parts));
    perf_ctl_t ctl = {.grpc = strcmp(o->protocol, "grpc") == 0};
    ctl.http.fd = -1;
    nr_status_t *st = NULL;
    for (size_t i = 0; i < n; i++)
        client_opts(o, s, models[i], &cl[i].po);
    st = ctl.grpc ? perf_grpc_open(&ctl.g, s->url) : perf_conn_init(&ctl.http, s->url);
    const char *what = "";
    for (size_t i = 0; i < n && st == NULL; i++) {
        what = n > 1 ? models[i] : "";
        cl[i].have_model = true;
        st = ctl.grpc ? perf_grpc_model_load(&ctl.g, &cl[i].po, &cl[i].m)
                      : perf_model_load(&ctl.http, &cl[i].po, &cl[i].m);
    }
    if (st) {
        set_all_errors(runs, n, what, st->msg);
        nr_status_free(st);
        goto out;
    }
    for (uint64_t c = runs[0].min_conc; c <= runs[0].max_conc; c *= 2) {
        char why[1024] = "";
        for (size_t i = 0; i < n; i++) {
            cl[i].step = (perf_step_t){.value = c, .threads = c};
            parts[i] = (perf_part_t){.o = &cl[i].po, .m = &cl[i].m, .s = &cl[i].step};
        }
        az_server_reset_peak(s);
        uint64_t cpu0 = az_server_cpu_ns(s), t0 = perf_now_ns();
        int e = perf_measure_parts(&ctl, parts, n, why, sizeof(why));
        uint64_t cpu1 = az_server_cpu_ns(s), t1 = perf_now_ns();
        uint64_t peak = az_server_peak_rss(s);
        bool stop = true, over = false;
        for (size_t i = 0; i < n; i++) {
            az_run_t *r = &runs[i];
            if (e < 0) {
                r->pts = nr_realloc(r->pts, (r->n_pts + 1) * sizeof(*r->pts));
                az_point_t *p = &r->pts[r->n_pts++];
                memset(p, 0, sizeof(*p));
                point_of(&cl[i].po, &cl[i].step, p);
                p->stable = parts[i].res == PERF_STEP_STABLE;
                p->cpu_util = cpu1 > cpu0 && t1 > t0 ? (double)(cpu1 - cpu0) / (double)(t1 - t0)
                                                     : 0;
                p->mem_mb = peak ? (double)peak / 1e6 : 0;
                if (o->verbose || isatty(2))
                    fprintf(stderr, "  %s%sconcurrency %llu: %.1f infer/sec, p99 %.2f ms%s\n",
                            n > 1 ? models[i] : "", n > 1 ? ": " : "", (unsigned long long)c,
                            p->throughput, p->p99_ms, p->stable ? "" : " (not stable)");
                stop &= plateau(r);
                over |= o->latency_budget_ms > 0 && p->p99_ms > o->latency_budget_ms;
            }
            perf_window_free(&cl[i].step.merged);
        }
        if (e >= 0) {
            set_all_errors(runs, n, "", why);
            break;
        }
        if (stop || over)
            break;
    }
out:
    for (size_t i = 0; i < n; i++)
        if (cl[i].have_model)
            perf_model_free(&cl[i].m);
    if (ctl.grpc)
        perf_grpc_close(&ctl.g);
    else
        perf_conn_close(&ctl.http);
    free(parts);
    free(cl);
}

void az_run_together(const az_opts_t *o, az_server_t *s, char *const *models,
                     const az_variant_t *const *vs, size_t n, uint64_t min_conc,
                     uint64_t max_conc, az_run_t *runs)
{
    for (size_t i = 0; i < n; i++) {
        az_run_t *r = &runs[i];
        size_t variant = r->variant;
        memset(r, 0, sizeof(*r));
        r->variant = variant;
        r->min_conc = min_conc;
        r->max_conc = max_conc;
        r->load_mb = -1;
    }
    uint64_t t0 = perf_now_ns();
    size_t loaded_n = 0;
    for (; loaded_n < n; loaded_n++) {
        const az_variant_t *v = vs[loaded_n];
        nr_status_t *st = az_server_load(s, models[loaded_n], v->is_default ? NULL
                                                                           : v->config_json);
        if (st) {
            set_all_errors(runs, n, n > 1 ? models[loaded_n] : "", st->msg);
            nr_status_free(st);
            break;
        }
    }
    double load_s = (double)(perf_now_ns() - t0) / 1e9;
    uint64_t loaded = az_server_rss(s);
    if (loaded_n == n)
        sweep(o, s, models, n, runs);
    bool unloaded_all = true;
    for (size_t i = 0; i < loaded_n; i++) {
        nr_status_t *st = az_server_unload(s, models[i]);
        if (st) {
            set_all_errors(runs, n, n > 1 ? models[i] : "", st->msg);
            nr_status_free(st);
            unloaded_all = false;
        }
    }
    /* The models' memory: what the unload gave back. Measured against the server before the
     * load, it would also count ONNX Runtime's own start (about 48 MB, paid by a server's
     * first load and kept after it). Served together, the figure is all of theirs. */
    uint64_t unloaded = az_server_rss(s);
    for (size_t i = 0; i < n; i++) {
        runs[i].load_s = load_s;
        if (loaded_n == n && unloaded_all && loaded && unloaded)
            runs[i].load_mb = loaded > unloaded ? (double)(loaded - unloaded) / 1e6 : 0;
    }
}

void az_run_variant(const az_opts_t *o, az_server_t *s, const char *model,
                    const az_variant_t *v, size_t index, uint64_t min_conc, uint64_t max_conc,
                    az_run_t *r)
{
    char *models[1] = {(char *)model};
    r->variant = index;
    az_run_together(o, s, models, &v, 1, min_conc, max_conc, r);
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
