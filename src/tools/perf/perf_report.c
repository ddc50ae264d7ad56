/* perf_report.c - perf_analyzer's console output, summary and CSV, line for line (perf.h;
 * the format is perf_analyzer 2.51's: ../shared/spec/perf_tools.md, A3 and A4), an
 * ensemble's composing models included. Latencies print as truncated microseconds, rates as
 * iostream's default (%g).
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define US(ns) ((unsigned long long)((ns) / 1000))

static double seconds(const perf_window_t *w)
{
    return (double)(w->end_ns - w->start_ns) / 1e9;
}

double perf_throughput(const perf_opts_t *o, const perf_window_t *w)
{
    double s = seconds(w);
    return s > 0 ? (double)w->count * o->batch / s : 0;
}

uint64_t perf_stab_latency(const perf_opts_t *o, const perf_window_t *w)
{
    return o->percentile > 0 ? perf_hist_percentile(&w->lat, o->percentile)
                             : (uint64_t)perf_hist_mean(&w->lat);
}

void perf_print_settings(const perf_opts_t *o)
{
    printf("*** Measurement Settings ***\n");
    printf("  Batch size: %d\n", o->batch);
    printf("  Service Kind: TRITON\n");
    if (o->request_total) { /* perf_analyzer's block for --request-count: no windows, limits */
        printf("  Sending %llu benchmark requests\n", (unsigned long long)o->request_total);
        if (o->rate_mode)
            printf("  Using %s distribution on request generation\n",
                   o->poisson ? "poisson" : "uniform");
        printf("  Using %s calls for inference\n", o->async ? "asynchronous" : "synchronous");
        if (o->decoupled)
            printf("  Detected decoupled model, using the first response for measuring latency\n");
        printf("\n");
        return;
    }
    printf("  Using \"%s\" mode for stabilization\n", o->count_windows ? "count_windows" : "time_windows");
    if (o->percentile > 0)
        printf("  Stabilizing using p%dlatency and throughput\n", o->percentile);
    else if (o->async)
        printf("  Stabilizing using average throughput\n");
    else
        printf("  Stabilizing using average latency and throughput\n");
    if (o->count_windows)
        printf("  Minimum number of samples in each window: %llu\n",
               (unsigned long long)o->request_count);
    else
        printf("  Measurement window: %llu msec\n", (unsigned long long)o->interval_ms);
    /* the limits only when the range's end was written, as perf_analyzer */
    if (o->rate_mode && o->n_intervals == 0) { /* no rate lines for --request-intervals */
        if (o->range_end_given) {
            printf("  Latency limit: %llu msec\n", (unsigned long long)o->latency_limit_ms);
            printf("  Request Rate limit: %g requests per seconds\n",
                   o->rate_start > o->rate_end ? o->rate_start : o->rate_end);
        }
        printf("  Using %s distribution on request generation\n",
               o->poisson ? "poisson" : "uniform");
    } else if (o->conc_given && o->range_end_given) {
        printf("  Latency limit: %llu msec\n", (unsigned long long)o->latency_limit_ms);
        printf("  Concurrency limit: %llu concurrent requests\n",
               (unsigned long long)(o->conc_start > o->conc_end ? o->conc_start : o->conc_end));
    }
    printf("  Using %s calls for inference\n", o->async ? "asynchronous" : "synchronous");
    if (o->decoupled)
        printf("  Detected decoupled model, using the first response for measuring latency\n");
    printf("\n");
}

/* p50, p90, p95, p99 and --percentile's, in numeric order, each once. */
static size_t percentiles(const perf_opts_t *o, int *out)
{
    static const int base[] = {50, 90, 95, 99};
    size_t n = 0;
    bool extra = o->percentile > 0;
    for (size_t i = 0; i < 4; i++) {
        if (extra && o->percentile < base[i]) {
            out[n++] = o->percentile;
            extra = false;
        }
        if (extra && o->percentile == base[i])
            extra = false;
        out[n++] = base[i];
    }
    if (extra)
        out[n++] = o->percentile;
    return n;
}

typedef struct {
    uint64_t request, queue, compute, input, infer, output, overhead; /* us */
    double queue_ns, compute_ns;                                       /* averages */
} server_avg_t;

static server_avg_t server_avg(const perf_server_stats_t *s)
{
    server_avg_t a = {0};
    if (s->success_count)
        a.request = s->success_ns / (s->success_count * 1000);
    if (s->queue_count) {
        a.queue = s->queue_ns / (s->queue_count * 1000);
        a.queue_ns = (double)s->queue_ns / (double)s->queue_count;
    }
    if (s->input_count) {
        uint64_t c = s->input_ns + s->infer_ns + s->output_ns;
        a.compute = c / (s->input_count * 1000);
        a.compute_ns = (double)c / (double)s->input_count;
        a.input = s->input_ns / (s->input_count * 1000);
    }
    if (s->infer_count)
        a.infer = s->infer_ns / (s->infer_count * 1000);
    if (s->output_count)
        a.output = s->output_ns / (s->output_count * 1000);
    a.overhead = a.request > a.queue + a.compute ? a.request - a.queue - a.compute : 0;
    return a;
}

/* --collect-metrics: perf_analyzer's block, after the step's blank line. */
static void print_gpus(const perf_gpus_t *g)
{
    printf("  Server Prometheus Metrics: \n    Avg GPU Utilization:\n");
    for (size_t i = 0; i < g->n; i++)
        if (g->gpu[i].util_n)
            printf("      %s : %g%%\n", g->gpu[i].uuid,
                   100 * g->gpu[i].util_sum / (double)g->gpu[i].util_n);
    printf("    Avg GPU Power Usage:\n");
    for (size_t i = 0; i < g->n; i++)
        if (g->gpu[i].power_n)
            printf("      %s : %g watts\n", g->gpu[i].uuid,
                   g->gpu[i].power_sum / (double)g->gpu[i].power_n);
    printf("    Max GPU Memory Usage:\n");
    for (size_t i = 0; i < g->n; i++)
        printf("      %s : %.0f bytes\n", g->gpu[i].uuid, g->gpu[i].mem_used);
    printf("    Total GPU Memory:\n");
    for (size_t i = 0; i < g->n; i++)
        printf("      %s : %.0f bytes\n", g->gpu[i].uuid, g->gpu[i].mem_total);
}

/* An ensemble's queue and compute times (us): perf_analyzer's sums over its composing models
 * (a nested ensemble's own composing models in its place) of each one's averages. */
static void ensemble_times(const perf_comp_t *c, size_t n, uint64_t *queue, uint64_t *compute)
{
    for (size_t i = 0; i < n; i += 1 + c[i].n_desc) {
        if (c[i].n_desc) {
            ensemble_times(&c[i + 1], c[i].n_desc, queue, compute);
            continue;
        }
        server_avg_t a = server_avg(&c[i].s);
        *queue += a.queue;
        *compute += a.compute;
    }
}

/* perf_analyzer's server block at nesting `level` (the model's is 1, its composing models' 2,
 * ...: two more spaces each): the counts, then the average request latency with its parts
 * and a blank line; an ensemble's parts are its composing models' queue and compute, which
 * follow, each with its own block. No requests: one line, and no blank one. */
static void print_server(const perf_server_stats_t *s, const perf_comp_t *comp, size_t n_comp,
                         int level)
{
    int ind = 2 * level;
    if (s->success_count == 0) {
        printf("%*s  Request count: 0\n", ind, "");
        return;
    }
    server_avg_t a = server_avg(s);
    printf("%*s  Inference count: %llu\n", ind, "", (unsigned long long)s->inference_count);
    printf("%*s  Execution count: %llu\n", ind, "", (unsigned long long)s->execution_count);
    printf("%*s  Successful request count: %llu\n", ind, "",
           (unsigned long long)s->success_count);
    printf("%*s  Avg request latency: %llu usec", ind, "", (unsigned long long)a.request);
    if (n_comp == 0) {
        printf(" (overhead %llu usec + queue %llu usec + compute input %llu usec + compute infer "
               "%llu usec + compute output %llu usec)\n\n", (unsigned long long)a.overhead,
               (unsigned long long)a.queue, (unsigned long long)a.input,
               (unsigned long long)a.infer, (unsigned long long)a.output);
        return;
    }
    uint64_t queue = 0, compute = 0;
    ensemble_times(comp, n_comp, &queue, &compute);
    printf(" (overhead %llu usec + queue %llu usec + compute %llu usec)\n\n",
           (unsigned long long)(a.request > queue + compute ? a.request - queue - compute : 0),
           (unsigned long long)queue, (unsigned long long)compute);
    printf("%*sComposing models: \n", ind, "");
    for (size_t i = 0; i < n_comp; i += 1 + comp[i].n_desc) {
        printf("%*s%s, version: %s\n", ind, "", comp[i].name, comp[i].version);
        print_server(&comp[i].s, &comp[i + 1], comp[i].n_desc, level + 1);
    }
}

void perf_print_step(const perf_opts_t *o, const perf_step_t *st)
{
    const perf_window_t *w = &st->merged;
    const perf_hist_t *h = &w->lat;
    uint64_t n = w->count ? w->count : 1;
    printf("  Client: \n");
    printf("    Request count: %llu\n", (unsigned long long)w->count);
    if (w->delayed) /* perf_analyzer shows the rate it sent at when it fell behind */
        printf("    Avg send request rate: %.2f infer/sec\n", perf_throughput(o, w));
    if (w->delayed)
        printf("    [WARNING] Perf Analyzer was not able to keep up with the desired request rate. "
               "%.2f%% of the requests were delayed. \n", 100.0 * (double)w->delayed /
               (double)(w->count ? w->count : 1));
    printf("    Throughput: %g infer/sec\n", perf_throughput(o, w));
    if (o->decoupled) { /* every response of the requests counted */
        double s = seconds(w);
        printf("    Response Throughput: %g infer/sec\n",
               s > 0 ? (double)w->responses * o->batch / s : 0);
    }
    uint64_t send = w->send_ns / n, recv = w->recv_ns / n, lib = w->lib_ns / n;
    if (o->verbose) { /* the share of the threads' time not spent waiting for the server */
        double total = (double)(w->end_ns - w->start_ns) * (double)st->threads;
        double work = (double)(w->send_ns + w->recv_ns);
        printf("    Avg client overhead: %.2f%%\n", total > 0 ? 100.0 * work / total : 0.0);
    }
    if (o->percentile <= 0)
        printf("    Avg latency: %llu usec (standard deviation %llu usec)\n",
               US(perf_hist_mean(h)), US(perf_hist_stddev(h)));
    int ps[5];
    size_t np = percentiles(o, ps);
    for (size_t i = 0; i < np; i++)
        printf("    p%d latency: %llu usec\n", ps[i], US(perf_hist_percentile(h, ps[i])));
    uint64_t wait = lib > send + recv ? lib - send - recv : 0;
    if (o->decoupled) /* perf_analyzer has no client-library time for them: its line is blank */
        printf("    \n");
    else if (o->grpc && o->verbose)
        printf("    Avg gRPC time: %llu usec (marshal %llu usec + response wait %llu usec + "
               "unmarshal %llu usec)\n", US(lib), US(send), US(wait), US(recv));
    else if (o->grpc)
        printf("    Avg gRPC time: %llu usec ((un)marshal request/response %llu usec + response "
               "wait %llu usec)\n", US(lib), US(send + recv), US(wait));
    else if (o->verbose)
        printf("    Avg HTTP time: %llu usec (send %llu usec + response wait %llu usec + receive "
               "%llu usec)\n", US(lib), US(send), US(wait), US(recv));
    else
        printf("    Avg HTTP time: %llu usec (send/recv %llu usec + response wait %llu usec)\n",
               US(lib), US(send + recv), US(wait));
    if (w->have_server) { /* perf_analyzer's blank line ends this block, when it prints */
        printf("  Server: \n");
        print_server(&w->server, w->comp, w->n_comp, 1);
    }
    if (o->collect_metrics)
        print_gpus(&w->gpus);
}

void perf_print_summary(const perf_opts_t *o, const perf_step_t *steps, size_t n)
{
    if (o->percentile > 0)
        printf("Inferences/Second vs. Client p%d Batch Latency\n", o->percentile);
    else
        printf("Inferences/Second vs. Client Average Batch Latency\n");
    for (size_t i = 0; i < n; i++) {
        if (o->rate_mode)
            printf("Request Rate: %g, ", steps[i].rate);
        else
            printf("Concurrency: %llu, ", (unsigned long long)steps[i].value);
        const perf_window_t *w = &steps[i].merged;
        printf("throughput: %g infer/sec, latency %llu usec\n", perf_throughput(o, w),
               US(perf_stab_latency(o, w)));
    }
}

static int by_throughput(const void *a, const void *b, void *ctx)
{
    const perf_opts_t *o = ctx;
    double x = perf_throughput(o, &((const perf_step_t *)a)->merged);
    double y = perf_throughput(o, &((const perf_step_t *)b)->merged);
    return (x > y) - (x < y);
}

/* The entry of composing model c (its name and version) among window w's own. */
static const perf_comp_t *find_comp(const perf_window_t *w, const perf_comp_t *c)
{
    for (size_t i = 0; i < w->n_comp; i += 1 + w->comp[i].n_desc)
        if (strcmp(w->comp[i].name, c->name) == 0 && strcmp(w->comp[i].version, c->version) == 0)
            return &w->comp[i];
    return NULL;
}

/* perf_analyzer's CSV of one composing model of an ensemble, <name>_v<version>.<the -f file>:
 * a row per step in the main CSV's order, its throughput the ensemble's scaled by the
 * composing model's share of the successful requests, no client times (0), its own overhead
 * in the Network+Server column, and the server's times (integer ns averages, then us).
 * perf_analyzer puts the prefix in front of the -f argument as written, so a path with a
 * directory names a directory that does not exist and its files are lost; here the prefix
 * goes on the file name, in the -f file's directory. */
static nr_status_t *write_composing_csv(const perf_opts_t *o, const perf_step_t *sorted,
                                        size_t n, const perf_comp_t *c)
{
    const char *base = strrchr(o->csv, '/');
    base = base ? base + 1 : o->csv;
    char *path = nr_asprintf("%.*s%s_v%s.%s", (int)(base - o->csv), o->csv, c->name, c->version,
                             base);
    FILE *f = fopen(path, "w");
    if (f == NULL) {
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "failed to open file '%s': %s", path,
                                        strerror(errno));
        free(path);
        return st;
    }
    fprintf(f, "%s,Inferences/Second,Client Send,Network+Server Send/Recv,Server Queue,Server "
               "Compute Input,Server Compute Infer,Server Compute Output,Client Recv\n",
            o->rate_mode ? "Request Rate" : "Concurrency");
    for (size_t i = 0; i < n; i++) {
        const perf_window_t *w = &sorted[i].merged;
        const perf_comp_t *e = find_comp(w, c);
        perf_server_stats_t zero = {0};
        const perf_server_stats_t *s = e ? &e->s : &zero;
        uint64_t queue = s->queue_count ? s->queue_ns / s->queue_count : 0;
        uint64_t input = s->input_count ? s->input_ns / s->input_count : 0;
        uint64_t infer = s->infer_count ? s->infer_ns / s->infer_count : 0;
        uint64_t output = s->output_count ? s->output_ns / s->output_count : 0;
        uint64_t compute = s->input_count ? (s->input_ns + s->infer_ns + s->output_ns) /
                                                s->input_count : 0;
        uint64_t request = s->success_count ? s->success_ns / s->success_count : 0;
        uint64_t overhead = request > queue + compute ? request - queue - compute : 0;
        if (overhead == 0) /* perf_analyzer's words, though no client time is involved here */
            fprintf(stderr, "Server average accounted time was larger than client average "
                    "wait time due to small sample size. Increase the measurement interval "
                    "with `--measurement-interval`.\n");
        double ratio = w->server.success_count
                           ? (double)s->success_count / (double)w->server.success_count
                           : 0.0;
        if (o->rate_mode)
            fprintf(f, "%g,", sorted[i].rate);
        else
            fprintf(f, "%llu,", (unsigned long long)sorted[i].value);
        fprintf(f, "%g,0,%llu,%llu,%llu,%llu,%llu,0\n", ratio * perf_throughput(o, w),
                US(overhead), US(queue), US(input), US(infer), US(output));
    }
    nr_status_t *st = NULL;
    if (fclose(f) != 0)
        st = nr_status_new(NR_INVALID_ARG, "failed to write '%s': %s", path, strerror(errno));
    free(path);
    return st;
}

nr_status_t *perf_write_csv(const perf_opts_t *o, const perf_step_t *steps, size_t n)
{
    FILE *f = fopen(o->csv, "w");
    if (f == NULL)
        return nr_status_new(NR_INVALID_ARG, "failed to open file '%s': %s", o->csv, strerror(errno));
    bool server = n > 0 && steps[0].merged.have_server;
    int ps[5];
    size_t np = percentiles(o, ps);
    fprintf(f, "%s,Inferences/Second,Client Send,", o->rate_mode ? "Request Rate" : "Concurrency");
    if (server)
        fprintf(f, "Network+Server Send/Recv,Server Queue,Server Compute Input,Server Compute "
                   "Infer,Server Compute Output,");
    fprintf(f, "Client Recv");
    for (size_t i = 0; i < np; i++)
        fprintf(f, ",p%d latency", ps[i]);
    if (o->verbose_csv)
        fprintf(f, "%s,request/response,response wait", o->percentile > 0 ? "" : ",Avg latency");
    if (o->verbose_csv && o->collect_metrics)
        fprintf(f, ",Avg GPU Utilization,Avg GPU Power Usage,Max GPU Memory Usage,Total GPU "
                   "Memory");
    fprintf(f, "\n");
    perf_step_t *sorted = nr_malloc((n ? n : 1) * sizeof(*sorted));
    memcpy(sorted, steps, n * sizeof(*sorted));
    qsort_r(sorted, n, sizeof(*sorted), by_throughput, (void *)o);
    for (size_t i = 0; i < n; i++) {
        const perf_window_t *w = &sorted[i].merged;
        uint64_t c = w->count ? w->count : 1;
        double avg = perf_hist_mean(&w->lat), lib = (double)w->lib_ns / (double)c;
        uint64_t send = w->send_ns / c, recv = w->recv_ns / c;
        if (o->rate_mode)
            fprintf(f, "%g,", sorted[i].rate);
        else
            fprintf(f, "%llu,", (unsigned long long)sorted[i].value);
        fprintf(f, "%g,%llu,", perf_throughput(o, w), US(send));
        if (server) {
            server_avg_t a = server_avg(&w->server);
            double net = avg - (double)send - (double)recv - a.queue_ns - a.compute_ns;
            if (net <= 0)
                fprintf(stderr, "Server average accounted time was larger than client average "
                        "wait time due to small sample size. Increase the measurement interval "
                        "with `--measurement-interval`.\n");
            fprintf(f, "%llu,%llu,%llu,%llu,%llu,", net > 0 ? US(net) : 0ull,
                    (unsigned long long)a.queue, (unsigned long long)a.input,
                    (unsigned long long)a.infer, (unsigned long long)a.output);
        }
        fprintf(f, "%llu", US(recv));
        for (size_t k = 0; k < np; k++)
            fprintf(f, ",%llu", US(perf_hist_percentile(&w->lat, ps[k])));
        if (o->verbose_csv) {
            if (o->percentile <= 0)
                fprintf(f, ",%llu", US(avg));
            double waitv = lib - (double)send - (double)recv;
            fprintf(f, ",%llu,%llu", US(send + recv), waitv > 0 ? US(waitv) : 0ull);
        }
        if (o->verbose_csv && o->collect_metrics) { /* "<uuid>:<value>;" per GPU, raw units */
            const perf_gpus_t *g = &w->gpus;
            fputc(',', f);
            for (size_t k = 0; k < g->n; k++)
                if (g->gpu[k].util_n)
                    fprintf(f, "%s:%g;", g->gpu[k].uuid, g->gpu[k].util_sum / (double)g->gpu[k].util_n);
            fputc(',', f);
            for (size_t k = 0; k < g->n; k++)
                if (g->gpu[k].power_n)
                    fprintf(f, "%s:%g;", g->gpu[k].uuid, g->gpu[k].power_sum / (double)g->gpu[k].power_n);
            fputc(',', f);
            for (size_t k = 0; k < g->n; k++)
                fprintf(f, "%s:%.0f;", g->gpu[k].uuid, g->gpu[k].mem_used);
            fputc(',', f);
            for (size_t k = 0; k < g->n; k++)
                fprintf(f, "%s:%.0f;", g->gpu[k].uuid, g->gpu[k].mem_total);
        }
        fprintf(f, "\n");
    }
    nr_status_t *st = NULL;
    if (fclose(f) != 0)
        st = nr_status_new(NR_INVALID_ARG, "failed to write '%s': %s", o->csv, strerror(errno));
    /* an ensemble: one more file per composing model the first row lists */
    const perf_window_t *first = n > 0 ? &sorted[0].merged : NULL;
    for (size_t i = 0; st == NULL && server && first && i < first->n_comp;
         i += 1 + first->comp[i].n_desc)
        st = write_composing_csv(o, sorted, n, &first->comp[i]);
    free(sorted);
    return st;
}
