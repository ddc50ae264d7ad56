/* perf_measure.c - one level of load measured as perf_analyzer measures it (perf.h).
 *
 * Windows of 1.2 x --measurement-interval (time_windows) or of at least
 * --measurement-request-count requests (count_windows, checked every second), until the last
 * three agree within --stability-percentage on throughput and on the stabilizing latency (the
 * average, or p<--percentile>), or --max-trials windows passed, or one of the last three reached
 * --latency-threshold. The reported figures merge the last three windows. Server statistics are
 * read before the first window and after each one; their differences are the Server block.
 * nereid-perf's sweep and nereid-analyzer's runs both measure through perf_measure.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

void perf_opts_defaults(perf_opts_t *o)
{
    memset(o, 0, sizeof(*o));
    o->url = NULL; /* localhost:8000, or localhost:8001 with -i grpc */
    o->protocol = "http";
    o->batch = 1;
    o->conc_start = o->conc_end = o->conc_step = 1;
    o->interval_ms = 5000;
    o->request_count = 50;
    o->stability = 0.10;
    o->max_trials = 10;
    o->percentile = -1;
    o->string_length = 128;
    o->input_data = "random";
    o->metrics_interval_ms = 1000;
}

static bool window_ok(const perf_window_t *w)
{
    return w->count > 0 && w->errors == 0;
}

/* max/min of throughput and of the stabilizing latency over three windows (0 if one is 0). */
static void spread(const perf_opts_t *o, perf_window_t *const *last, double *thr, double *lat)
{
    double tmin = 0, tmax = 0, lmin = 0, lmax = 0;
    for (int i = 0; i < 3; i++) {
        double t = perf_throughput(o, last[i]), l = (double)perf_stab_latency(o, last[i]);
        tmin = i == 0 || t < tmin ? t : tmin;
        tmax = i == 0 || t > tmax ? t : tmax;
        lmin = i == 0 || l < lmin ? l : lmin;
        lmax = i == 0 || l > lmax ? l : lmax;
    }
    *thr = tmin > 0 ? tmax / tmin : 0;
    *lat = lmin > 0 ? lmax / lmin : 0;
}

static bool stable(const perf_opts_t *o, perf_window_t *const *last)
{
    for (int i = 0; i < 3; i++)
        if (!window_ok(last[i]))
            return false;
    double thr, lat;
    spread(o, last, &thr, &lat);
    return thr > 0 && thr <= 1 + o->stability && (o->async || (lat > 0 && lat <= 1 + o->stability));
}

/* Why the last windows are not stable, for the line nereid-perf adds to perf_analyzer's. */
static void explain(const perf_opts_t *o, perf_window_t *const *last, int n, char *why,
                    size_t len)
{
    if (n < 3) {
        snprintf(why, len, "nereid-perf: %d window%s measured, 3 needed (--max-trials %d)", n,
                 n == 1 ? "" : "s", o->max_trials);
        return;
    }
    double thr, lat;
    spread(o, last, &thr, &lat);
    char name[16] = "average";
    if (o->percentile > 0)
        snprintf(name, sizeof(name), "p%d", o->percentile);
    snprintf(why, len, "nereid-perf: over the last 3 windows throughput varied by %.1f%% and %s "
             "latency by %.1f%% (max/min; --stability-percentage %.0f allows %.0f%%)",
             thr > 0 ? 100 * (thr - 1) : 100.0, name, lat > 0 ? 100 * (lat - 1) : 100.0,
             100 * o->stability, 100 * o->stability);
}


/* A fatal error's text into why, as perf_analyzer prints it. */
static int fail(nr_status_t *st, char *why, size_t len)
{
    snprintf(why, len, "error: %s", st->msg);
    nr_status_free(st);
    return PERF_EXIT_ERROR;
}

static void sleep_ms(uint64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}


/* Sleeps ms; with --collect-metrics, scraping every --metrics-interval into *gpus meanwhile. */
static void wait_window(perf_ctl_t *c, const perf_opts_t *o, uint64_t ms, perf_gpus_t *gpus)
{
    if (!o->collect_metrics) {
        sleep_ms(ms);
        return;
    }
    for (uint64_t left = ms; left > 0;) {
        uint64_t step = left < o->metrics_interval_ms ? left : o->metrics_interval_ms;
        sleep_ms(step);
        left -= step;
        perf_metrics_poll(&c->metrics, gpus);
    }
}

static nr_status_t *ctl_stats(perf_ctl_t *c, const perf_opts_t *o, perf_server_stats_t *s)
{
    return c->grpc ? perf_grpc_server_stats(&c->g, o, s) : perf_server_stats(&c->http, o, s);
}

int perf_measure(perf_ctl_t *conn, const perf_opts_t *o, const perf_model_t *m,
                   perf_step_t *s, perf_step_result_t *res, char *why, size_t why_len)
{
    perf_load_t *load;
    nr_status_t *st = perf_load_start(o, m, s->value, o->rate_mode ? s->rate : 0, &load);
    if (st)
        return fail(st, why, why_len);
    perf_server_stats_t prev = {0}, now;
    if (m->has_stats && (st = ctl_stats(conn, o, &prev)) != NULL) {
        perf_load_stop(load);
        return fail(st, why, why_len);
    }
    perf_window_t wins[3], all;
    memset(wins, 0, sizeof(wins));
    memset(&all, 0, sizeof(all));
    double *thr = nr_calloc((size_t)o->max_trials + 1, sizeof(double)); /* per window */
    int done = 0, rc = -1;
    *res = PERF_STEP_UNSTABLE;
    perf_window_t skip; /* the first window starts now: what came before is ramp-up */
    perf_load_cut(load, &skip);
    perf_window_free(&skip);
    for (int trial = 0; trial < o->max_trials; trial++) {
        perf_gpus_t gpus = {.n = 0};
        if (o->count_windows) {
            do
                wait_window(conn, o, 1000, &gpus);
            while (perf_load_pending_count(load) < o->request_count);
        } else {
            wait_window(conn, o, o->interval_ms * 6 / 5, &gpus);
        }
        perf_window_t *w = &wins[done % 3];
        perf_window_free(w);
        perf_load_cut(load, w);
        w->gpus = gpus;
        done++;
        if (m->has_stats) {
            if ((st = ctl_stats(conn, o, &now)) != NULL) {
                rc = fail(st, why, why_len);
                break;
            }
            perf_stats_diff(&w->server, &now, &prev);
            w->have_server = true;
            prev = now;
        }
        if (w->errors) { /* perf_analyzer's words for a failed request */
            snprintf(why, why_len, "Failed to maintain requested inference load. Worker thread(s) "
                     "failed to generate concurrent requests.\nThread [0] had error: %s",
                    w->error ? w->error : "inference failed");
            rc = PERF_EXIT_ERROR;
            break;
        }
        if (w->count == 0) {
            snprintf(why, why_len, "No valid requests recorded within time interval. Please use a "
                     "larger time window.");
            rc = PERF_EXIT_NO_REQUESTS;
            break;
        }
        thr[done - 1] = perf_throughput(o, w);
        if (o->report_unstable) /* kept only for that flag: a level's every window */
            perf_window_merge(&all, w);
        if (o->verbose) {
            double t = thr[done - 1];
            if (o->percentile > 0)
                printf("  Pass [%d] throughput: %g infer/sec. p%d latency: %llu usec\n",
                       trial + 1, t, o->percentile,
                       (unsigned long long)(perf_stab_latency(o, w) / 1000));
            else
                printf("  Pass [%d] throughput: %g infer/sec. Avg latency: %llu usec (std %llu "
                       "usec). \n", trial + 1, t, (unsigned long long)(perf_hist_mean(&w->lat) / 1000),
                       (unsigned long long)(perf_hist_stddev(&w->lat) / 1000));
        }
        if (done >= 3) {
            perf_window_t *last[3] = {&wins[(done - 3) % 3], &wins[(done - 2) % 3],
                                      &wins[(done - 1) % 3]};
            if (stable(o, last)) {
                *res = PERF_STEP_STABLE;
                break;
            }
            bool over = false;
            for (int i = 0; i < 3 && o->latency_limit_ms; i++)
                over |= perf_stab_latency(o, last[i]) >= o->latency_limit_ms * 1000000ull;
            if (over) {
                *res = PERF_STEP_OVER_LIMIT;
                break;
            }
        }
    }
    perf_load_stop(load);
    if (rc < 0 && *res == PERF_STEP_UNSTABLE) {
        perf_window_t *last[3] = {&wins[(done + 0) % 3], &wins[(done + 1) % 3],
                                  &wins[(done + 2) % 3]};
        explain(o, last, done, why, why_len);
    }
    memset(&s->merged, 0, sizeof(s->merged));
    if (rc < 0 && *res == PERF_STEP_UNSTABLE && o->report_unstable && done > 0) {
        qsort(thr, (size_t)done, sizeof(double), cmp_double);
        size_t at = strlen(why);
        snprintf(why + at, why_len - at, "\nnereid-perf: reporting all %d windows of the level "
                 "merged (--report-unstable); throughput per window: min %g, median %g, max %g "
                 "infer/sec", done, thr[0], thr[done / 2], thr[done - 1]);
        s->merged = all; /* moved */
        memset(&all, 0, sizeof(all));
        *res = PERF_STEP_ALL;
    } else {
        for (int i = done > 3 ? done - 3 : 0; i < done; i++)
            perf_window_merge(&s->merged, &wins[i % 3]);
    }
    perf_window_free(&all);
    free(thr);
    for (int i = 0; i < 3; i++)
        perf_window_free(&wins[i]);
    if (rc < 0 && (*res == PERF_STEP_STABLE || *res == PERF_STEP_ALL) && o->latency_limit_ms &&
        perf_stab_latency(o, &s->merged) >= o->latency_limit_ms * 1000000ull)
        *res = PERF_STEP_OVER_LIMIT;
    return rc;
}
