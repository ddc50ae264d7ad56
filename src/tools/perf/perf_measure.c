/* perf_measure.c - one level of load measured as perf_analyzer measures it (perf.h).
 *
 * Windows of 1.2 x --measurement-interval (time_windows) or of at least
 * --measurement-request-count requests (count_windows, checked every second), until the last
 * three agree within --stability-percentage on throughput and on the stabilizing latency (the
 * average, or p<--percentile>), or --max-trials windows passed, or one of the last three reached
 * --latency-threshold. The reported figures merge the last three windows. Server statistics are
 * read before the first window and after each one; their differences (perf_stats.c) are the
 * Server block, an ensemble's composing models included.
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
    o->output_shm_size = 102400;
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

/* The server's statistics now: -m's, or for an ensemble every model's (perf_analyzer's
 * GetServerSideStatus), its composing models being reported too. */
static nr_status_t *ctl_stats(perf_ctl_t *c, const perf_opts_t *o, const perf_model_t *m,
                              perf_snapshot_t *s)
{
    bool all = m->n_edges > 0;
    return c->grpc ? perf_grpc_server_stats(&c->g, o, all, s)
                   : perf_server_stats(&c->http, o, all, s);
}

/* One part's state across the windows. */
typedef struct {
    perf_load_t *load;
    perf_snapshot_t prev; /* the statistics at the last window's end */
    perf_window_t wins[3], all;
    double *thr; /* throughput per window */
} part_state_t;

/* The window just cut from part p's load: its statistics, its errors (a fatal code, with why),
 * and whether its last three windows are stable now (p->res). */
static int part_window(perf_ctl_t *conn, perf_part_t *p, part_state_t *ps, int done, int trial,
                       const perf_gpus_t *gpus, char *why, size_t why_len)
{
    const perf_opts_t *o = p->o;
    perf_window_t *w = &ps->wins[(done - 1) % 3]; /* window done - 1, counted from 0 */
    perf_window_free(w);
    perf_load_cut(ps->load, w);
    w->gpus = *gpus;
    nr_status_t *version_err = NULL; /* perf_analyzer's, after its checks of the requests */
    if (p->m->has_stats) {
        perf_snapshot_t now;
        nr_status_t *st = ctl_stats(conn, o, p->m, &now);
        if (st)
            return fail(st, why, why_len);
        version_err = perf_stats_window(o, p->m, &ps->prev, &now, w);
        perf_snapshot_free(&ps->prev);
        ps->prev = now;
    }
    if (w->errors) { /* perf_analyzer's words for a failed request */
        nr_status_free(version_err);
        snprintf(why, why_len, "Failed to maintain requested inference load. Worker thread(s) "
                 "failed to generate concurrent requests.\nThread [0] had error: %s",
                 w->error ? w->error : "inference failed");
        return PERF_EXIT_ERROR;
    }
    if (w->count == 0) {
        nr_status_free(version_err);
        snprintf(why, why_len, "No valid requests recorded within time interval. Please use a "
                 "larger time window.");
        return PERF_EXIT_NO_REQUESTS;
    }
    if (version_err) { /* printed as perf_analyzer prints it, without "error: " */
        snprintf(why, why_len, "%s", version_err->msg);
        nr_status_free(version_err);
        return PERF_EXIT_ERROR;
    }
    ps->thr[done - 1] = perf_throughput(o, w);
    if (o->report_unstable) /* kept only for that flag: a level's every window */
        perf_window_merge(&ps->all, w);
    if (o->verbose) {
        double t = ps->thr[done - 1];
        if (o->percentile > 0)
            printf("  Pass [%d] throughput: %g infer/sec. p%d latency: %llu usec\n", trial + 1,
                   t, o->percentile, (unsigned long long)(perf_stab_latency(o, w) / 1000));
        else
            printf("  Pass [%d] throughput: %g infer/sec. Avg latency: %llu usec (std %llu "
                   "usec). \n", trial + 1, t, (unsigned long long)(perf_hist_mean(&w->lat) / 1000),
                   (unsigned long long)(perf_hist_stddev(&w->lat) / 1000));
    }
    p->res = o->request_total ? PERF_STEP_STABLE : PERF_STEP_UNSTABLE; /* one window, as asked */
    if (done >= 3 && !o->request_total) {
        perf_window_t *last[3] = {&ps->wins[(done - 3) % 3], &ps->wins[(done - 2) % 3],
                                  &ps->wins[(done - 1) % 3]};
        if (stable(o, last)) {
            p->res = PERF_STEP_STABLE;
        } else {
            bool over = false;
            for (int i = 0; i < 3 && o->latency_limit_ms; i++)
                over |= perf_stab_latency(o, last[i]) >= o->latency_limit_ms * 1000000ull;
            if (over)
                p->res = PERF_STEP_OVER_LIMIT;
        }
    }
    return -1;
}

/* After the last window: part p's figures (its last three windows merged, or with
 * --report-unstable every window of a level that did not settle) and its result. */
static void part_finish(perf_part_t *p, part_state_t *ps, int done, int rc, char *why,
                        size_t why_len)
{
    const perf_opts_t *o = p->o;
    perf_step_t *s = p->s;
    if (rc < 0 && p->res == PERF_STEP_UNSTABLE) {
        perf_window_t *last[3] = {&ps->wins[(done + 0) % 3], &ps->wins[(done + 1) % 3],
                                  &ps->wins[(done + 2) % 3]};
        explain(o, last, done, why, why_len);
    }
    memset(&s->merged, 0, sizeof(s->merged));
    if (rc < 0 && p->res == PERF_STEP_UNSTABLE && o->report_unstable && done > 0) {
        qsort(ps->thr, (size_t)done, sizeof(double), cmp_double);
        size_t at = strlen(why);
        snprintf(why + at, why_len - at, "\nnereid-perf: reporting all %d windows of the level "
                 "merged (--report-unstable); throughput per window: min %g, median %g, max %g "
                 "infer/sec", done, ps->thr[0], ps->thr[done / 2], ps->thr[done - 1]);
        s->merged = ps->all; /* moved */
        memset(&ps->all, 0, sizeof(ps->all));
        p->res = PERF_STEP_ALL;
    } else {
        for (int i = done > 3 ? done - 3 : 0; i < done; i++)
            perf_window_merge(&s->merged, &ps->wins[i % 3]);
    }
    if (rc < 0 && (p->res == PERF_STEP_STABLE || p->res == PERF_STEP_ALL) && o->latency_limit_ms &&
        perf_stab_latency(o, &s->merged) >= o->latency_limit_ms * 1000000ull)
        p->res = PERF_STEP_OVER_LIMIT;
}

int perf_measure_parts(perf_ctl_t *conn, perf_part_t *parts, size_t n, char *why, size_t why_len)
{
    const perf_opts_t *o = parts[0].o; /* the windows' length and number */
    part_state_t *ps = nr_calloc(n, sizeof(*ps));
    nr_status_t *st = NULL;
    int rc = -1, done = 0;
    size_t started = 0;
    if (why_len)
        why[0] = '\0';
    for (; started < n && st == NULL; started++) {
        perf_part_t *p = &parts[started];
        p->res = PERF_STEP_UNSTABLE;
        ps[started].thr = nr_calloc((size_t)o->max_trials + 1, sizeof(double));
        /* --request-count: every request sent is counted, so the statistics come first */
        if (o->request_total && p->m->has_stats)
            st = ctl_stats(conn, p->o, p->m, &ps[started].prev);
        if (st == NULL)
            st = perf_load_start(p->o, p->m, p->s->value, p->o->rate_mode ? p->s->rate : 0,
                                 &ps[started].load);
        if (st == NULL && p->m->has_stats && !o->request_total)
            st = ctl_stats(conn, p->o, p->m, &ps[started].prev);
    }
    if (st)
        rc = fail(st, why, why_len);
    for (size_t i = 0; i < n && rc < 0 && !o->request_total; i++) { /* ramp-up: not counted */
        perf_window_t skip;
        perf_load_cut(ps[i].load, &skip);
        perf_window_free(&skip);
    }
    for (int trial = 0; rc < 0 && trial < o->max_trials; trial++) {
        perf_gpus_t gpus = {.n = 0};
        if (o->count_windows) {
            for (size_t i = 0; i < n; i++)
                while (perf_load_pending_count(ps[i].load) < parts[i].o->request_count)
                    wait_window(conn, o, 1000, &gpus);
        } else {
            wait_window(conn, o, o->interval_ms * 6 / 5, &gpus);
        }
        done++;
        bool settled = true;
        for (size_t i = 0; i < n && rc < 0; i++) {
            rc = part_window(conn, &parts[i], &ps[i], done, trial, &gpus, why, why_len);
            settled &= parts[i].res != PERF_STEP_UNSTABLE;
        }
        if (settled)
            break;
    }
    for (size_t i = 0; i < started; i++)
        if (ps[i].load)
            perf_load_stop(ps[i].load);
    char other[1024];
    for (size_t i = 0; i < n; i++) { /* why explains the first part that did not settle */
        if (i < started)
            part_finish(&parts[i], &ps[i], done, rc, *why ? other : why,
                        *why ? sizeof(other) : why_len);
        else
            memset(&parts[i].s->merged, 0, sizeof(parts[i].s->merged));
        perf_window_free(&ps[i].all);
        perf_snapshot_free(&ps[i].prev);
        free(ps[i].thr);
        for (int k = 0; k < 3; k++)
            perf_window_free(&ps[i].wins[k]);
    }
    free(ps);
    return rc;
}

int perf_measure(perf_ctl_t *conn, const perf_opts_t *o, const perf_model_t *m,
                 perf_step_t *s, perf_step_result_t *res, char *why, size_t why_len)
{
    perf_part_t part = {.o = o, .m = m, .s = s};
    int rc = perf_measure_parts(conn, &part, 1, why, why_len);
    *res = part.res;
    return rc;
}
