/* perf_main.c - nereid-perf: perf_analyzer's flags, the sweep over --concurrency-range or
 * --request-rate-range (each level measured by perf_measure.c), its outputs and exit codes
 * (perf.h).
 */
#include "perf.h"

#include "../../common/alloc.h"
#include "../../common/cli.h"
#include "../../proto/grpc_lib.h"

#include <errno.h>
#include <getopt.h>
#include <grpc/grpc.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PERF_VERSION PERF_PA_VERSION " (nereid-perf)"

static const char usage_text[] =
    "Usage: nereid-perf [options]\n"
    "==== SYNOPSIS ====\n"
    "\n"
    "  -m <model name> [-x <model version>] [-u <url>] [-i http|grpc] [-b <batch size>]\n"
    "  [--concurrency-range <start:end:step>] [-p|--measurement-interval <ms>]\n"
    "  [--measurement-mode time_windows|count_windows] [--measurement-request-count <n>]\n"
    "  [-s|--stability-percentage <pct>] [-r|--max-trials <n>] [-l|--latency-threshold <ms>]\n"
    "  [--percentile <1..99>] [--sync|-a|--async] [--max-threads <n>] [--streaming]\n"
    "  [--input-data zero|random|<file.json>|<dir>] [--shape <name>:<d1>,<d2>...]\n"
    "  [--string-length <n>] [--string-data <s>] [-H <name>:<value>] [-f <csv>] [--verbose-csv]\n"
    "  [--warmup-request-count <n>] [--request-count <n>] [--collect-metrics]\n"
    "  [--shared-memory none|system] [--output-shared-memory-size <bytes>]\n"
    "  [--profile-export-file <file.json>]\n"
    "  [--metrics-url <url>]\n"
    "  [--metrics-interval <ms>] [-v] [--version]\n"
    "  [--trace-level OFF|TIMESTAMPS|TENSORS] [--trace-rate <n>] [--trace-count <n>]\n"
    "  [--log-frequency <n>] (the server's trace settings, changed before the run)\n"
    "\n"
    "  [--request-rate-range <start:end:step>] [--request-distribution constant|poisson]\n"
    "  [--request-intervals <file of microseconds, one per line>] [--binary-search]\n"
    "  nereid-perf's own: [--json <report.json>] [--plot <sweep.svg>] [--report-unstable]\n"
    "  [--interleaved-trials <n>]\n"
    "\n"
    "perf_analyzer's flags, defaults and output (docs/perf.md). Not yet supported, refused:\n"
    "--shared-memory cuda, sequence data.\n";

static void usage_error(const char *fmt, const char *arg)
{
    fputs(usage_text, stderr);
    fprintf(stderr, "Error: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, "\n");
    exit(PERF_EXIT_ERROR);
}

static uint64_t parse_u64(const char *flag, const char *v)
{
    uint64_t x;
    if (!nr_cli_u64(v, &x)) /* perf_analyzer's std::stoull: no sign, the whole text */
        usage_error("failed to parse %s", flag);
    return x;
}

/* "start[:end[:step]]" into r (end defaults to start, step to 1): perf_analyzer's range
 * syntax, integers for --concurrency-range, numbers >= 0 for --request-rate-range. `option`
 * names it in the too-many-elements message. */
/* Returns how many of start:end:step were written. */
static int parse_range(const char *flag, const char *option, const char *v, bool integer,
                       double r[3])
{
    r[0] = r[1] = r[2] = 1;
    char *s = nr_strdup(v), *save = NULL;
    int i = 0;
    for (char *t = strtok_r(s, ":", &save); t; t = strtok_r(NULL, ":", &save), i++) {
        if (i > 2)
            usage_error("option %s can have maximum of three elements", option);
        if (integer)
            r[i] = (double)parse_u64(flag, t);
        else if (!nr_cli_double(t, 0, &r[i]))
            usage_error("failed to parse %s", nr_asprintf("%s '%s'", flag, v));
    }
    free(s);
    if (i == 1)
        r[1] = r[0];
    return i;
}

static void parse_shape(perf_opts_t *o, const char *v)
{
    const char *colon = strrchr(v, ':');
    if (colon == NULL || colon == v)
        usage_error("failed to parse input shape. There must be a colon after input name.", NULL);
    o->shapes = nr_realloc(o->shapes, (o->n_shapes + 1) * sizeof(perf_shape_t));
    perf_shape_t *s = &o->shapes[o->n_shapes++];
    s->name = nr_strndup(v, (size_t)(colon - v));
    s->dims = NULL;
    s->n_dims = 0;
    char *dims = nr_strdup(colon + 1), *save = NULL;
    for (char *t = strtok_r(dims, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
        s->dims = nr_realloc(s->dims, (s->n_dims + 1) * sizeof(int64_t));
        s->dims[s->n_dims++] = (int64_t)parse_u64("shape", t);
    }
    free(dims);
}

enum {
    OPT_CONC = 1000, OPT_MEAS_MODE, OPT_MEAS_COUNT, OPT_PERCENTILE, OPT_SYNC, OPT_MAX_THREADS,
    OPT_INPUT_DATA, OPT_SHAPE, OPT_STRING_LENGTH, OPT_STRING_DATA, OPT_VERBOSE_CSV,
    OPT_WARMUP, OPT_COLLECT, OPT_METRICS_URL, OPT_METRICS_INTERVAL, OPT_VERSION, OPT_SHM,
    OPT_OUT_SHM, OPT_RATE, OPT_DIST, OPT_INTERVALS, OPT_STREAMING, OPT_EXPORT, OPT_BINARY,
    OPT_SERVICE, OPT_REQUEST_COUNT, OPT_IN_FORMAT, OPT_OUT_FORMAT, OPT_JSON, OPT_PLOT,
    OPT_REPORT_UNSTABLE, OPT_TRIALS, OPT_TRACE_LEVEL, OPT_TRACE_RATE, OPT_TRACE_COUNT,
    OPT_LOG_FREQUENCY,
};

static const struct option long_opts[] = {
    {"concurrency-range", required_argument, NULL, OPT_CONC},
    {"measurement-interval", required_argument, NULL, 'p'},
    {"measurement-mode", required_argument, NULL, OPT_MEAS_MODE},
    {"measurement-request-count", required_argument, NULL, OPT_MEAS_COUNT},
    {"stability-percentage", required_argument, NULL, 's'},
    {"max-trials", required_argument, NULL, 'r'},
    {"latency-threshold", required_argument, NULL, 'l'},
    {"percentile", required_argument, NULL, OPT_PERCENTILE},
    {"async", no_argument, NULL, 'a'},
    {"sync", no_argument, NULL, OPT_SYNC},
    {"max-threads", required_argument, NULL, OPT_MAX_THREADS},
    {"input-data", required_argument, NULL, OPT_INPUT_DATA},
    {"shape", required_argument, NULL, OPT_SHAPE},
    {"string-length", required_argument, NULL, OPT_STRING_LENGTH},
    {"string-data", required_argument, NULL, OPT_STRING_DATA},
    {"verbose-csv", no_argument, NULL, OPT_VERBOSE_CSV},
    {"warmup-request-count", required_argument, NULL, OPT_WARMUP},
    {"collect-metrics", no_argument, NULL, OPT_COLLECT},
    {"metrics-url", required_argument, NULL, OPT_METRICS_URL},
    {"metrics-interval", required_argument, NULL, OPT_METRICS_INTERVAL},
    {"version", no_argument, NULL, OPT_VERSION},
    {"shared-memory", required_argument, NULL, OPT_SHM},
    {"output-shared-memory-size", required_argument, NULL, OPT_OUT_SHM},
    {"request-rate-range", required_argument, NULL, OPT_RATE},
    {"request-distribution", required_argument, NULL, OPT_DIST},
    {"request-intervals", required_argument, NULL, OPT_INTERVALS},
    {"streaming", no_argument, NULL, OPT_STREAMING},
    {"profile-export-file", required_argument, NULL, OPT_EXPORT},
    {"binary-search", no_argument, NULL, OPT_BINARY},
    {"service-kind", required_argument, NULL, OPT_SERVICE},
    {"request-count", required_argument, NULL, OPT_REQUEST_COUNT},
    {"input-tensor-format", required_argument, NULL, OPT_IN_FORMAT},
    {"output-tensor-format", required_argument, NULL, OPT_OUT_FORMAT},
    {"json", required_argument, NULL, OPT_JSON},
    {"report-unstable", no_argument, NULL, OPT_REPORT_UNSTABLE},
    {"interleaved-trials", required_argument, NULL, OPT_TRIALS},
    {"trace-level", required_argument, NULL, OPT_TRACE_LEVEL},
    {"trace-rate", required_argument, NULL, OPT_TRACE_RATE},
    {"trace-count", required_argument, NULL, OPT_TRACE_COUNT},
    {"log-frequency", required_argument, NULL, OPT_LOG_FREQUENCY},
    {"plot", required_argument, NULL, OPT_PLOT},
    {"model-name", required_argument, NULL, 'm'},
    {"model-version", required_argument, NULL, 'x'},
    {"url", required_argument, NULL, 'u'},
    {"protocol", required_argument, NULL, 'i'},
    {"batch-size", required_argument, NULL, 'b'},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

/* --request-intervals: one gap in microseconds per line (blank lines skipped), sent in turn
 * and looped; the level is their mean rate, truncated as perf_analyzer shows it. */
static void read_intervals(perf_opts_t *o, const char *path)
{
    FILE *f = fopen(path, "r");
    if (f == NULL)
        usage_error("Failed to parse --request-intervals. The value must be a valid file path",
                    NULL);
    char line[256];
    uint64_t sum = 0;
    for (size_t n = 1; fgets(line, sizeof(line), f); n++) {
        char *p = line, *end;
        while (*p == ' ' || *p == '\t')
            p++;
        if (*p == '\n' || *p == '\r' || *p == '\0')
            continue;
        errno = 0;
        unsigned long long us = strtoull(p, &end, 10);
        while (*end == ' ' || *end == '\t' || *end == '\r' || *end == '\n')
            end++;
        if (errno || end == p || *end || *p == '-' || us > UINT64_MAX / 1000 - sum) {
            fprintf(stderr, "Error: --request-intervals %s: line %zu: '%.*s' is not a number of "
                    "microseconds\n", path, n, (int)strcspn(p, "\r\n"), p);
            exit(PERF_EXIT_ERROR);
        }
        o->intervals_ns = nr_realloc(o->intervals_ns, (o->n_intervals + 1) * sizeof(uint64_t));
        o->intervals_ns[o->n_intervals++] = us * 1000;
        sum += us * 1000;
    }
    fclose(f);
    if (o->n_intervals == 0 || sum == 0) {
        fprintf(stderr, o->n_intervals ? "Error: --request-intervals %s: the intervals add up "
                "to 0\n" : "file '%s' is empty\n", path);
        exit(PERF_EXIT_ERROR);
    }
    o->rate_mode = true;
    o->rate_start = o->rate_end = floor(1e9 * (double)o->n_intervals / (double)sum);
    o->rate_step = 1;
    if (o->rate_start < 1) /* slower than one a second: the rate itself, not 0 */
        o->rate_start = o->rate_end = 1e9 * (double)o->n_intervals / (double)sum;
}

static void parse_args(int argc, char **argv, perf_opts_t *o)
{
    perf_opts_defaults(o);
    const char *intervals = NULL;
    int c;
    while ((c = getopt_long(argc, argv, "vdazc:u:m:x:b:t:p:i:H:l:r:s:f:h", long_opts, NULL)) != -1) {
        switch (c) {
        case 'm': o->model = optarg; break;
        case 'x': o->version = optarg; break;
        case 'u': o->url = optarg; break;
        case 'i':
            if (strcasecmp(optarg, "http") != 0 && strcasecmp(optarg, "grpc") != 0)
                usage_error("unsupported protocol '%s'", optarg);
            o->protocol = optarg;
            break;
        case 'b': o->batch = (int)parse_u64("-b (batch size)", optarg); break;
        case 'p': o->interval_ms = parse_u64("measurement-interval", optarg); break;
        case 's': o->stability = (double)parse_u64("stability-percentage", optarg) / 100.0; break;
        case 'r': o->max_trials = (int)parse_u64("max-trials", optarg); break;
        case 'l': o->latency_limit_ms = parse_u64("latency-threshold", optarg); break;
        case 'f': o->csv = optarg; break;
        case 'v': o->verbose = true; break;
        case 'a': o->async = true; break;
        case OPT_SYNC: o->async = false; break;
        case 't': /* deprecated: -t n = the concurrency start */
            fprintf(stderr, "Warning: -t is deprecated. Use --concurrency-range instead.\n");
            o->conc_start = parse_u64("-t", optarg);
            if (o->conc_end < o->conc_start)
                o->conc_end = o->conc_start;
            break;
        case 'c':
            fprintf(stderr, "Warning: -c is deprecated. Use --concurrency-range instead.\n");
            o->conc_end = parse_u64("-c", optarg);
            o->conc_given = o->range_end_given = true;
            break;
        case 'd': fprintf(stderr, "Warning: -d is deprecated. Use --concurrency-range instead.\n"); break;
        case 'z':
            fprintf(stderr, "Warning: -z is deprecated. Use --input-data zero instead.\n");
            o->input_data = "zero";
            break;
        case OPT_CONC: {
            double r[3];
            o->range_end_given = parse_range("concurrency-range", "concurrency-range", optarg,
                                             true, r) > 1;
            o->conc_start = (uint64_t)r[0], o->conc_end = (uint64_t)r[1];
            o->conc_step = (uint64_t)r[2];
            o->conc_given = true;
            break;
        }
        case OPT_MEAS_MODE:
            if (strcmp(optarg, "time_windows") == 0)
                o->count_windows = false;
            else if (strcmp(optarg, "count_windows") == 0)
                o->count_windows = true;
            else
                usage_error("unsupported measurement mode '%s'", optarg);
            break;
        case OPT_MEAS_COUNT: o->request_count = parse_u64("measurement-request-count", optarg); break;
        case OPT_PERCENTILE: {
            uint64_t p = parse_u64("percentile", optarg);
            if (p < 1 || p > 99)
                usage_error("percentile must be > 0 and < 100", NULL);
            o->percentile = (int)p;
            break;
        }
        case OPT_MAX_THREADS: o->max_threads = parse_u64("max-threads", optarg); break;
        case OPT_RATE: {
            double r[3];
            o->range_end_given = parse_range("request-rate-range", "request_rate_range", optarg,
                                             false, r) > 1;
            o->rate_start = r[0], o->rate_end = r[1], o->rate_step = r[2];
            o->rate_mode = true;
            break;
        }
        case OPT_DIST:
            if (strcmp(optarg, "poisson") == 0)
                o->poisson = true;
            else if (strcmp(optarg, "constant") == 0)
                o->poisson = false;
            else
                usage_error("unsupported request distribution '%s'", optarg);
            break;
        case OPT_INPUT_DATA:
            if (strcmp(optarg, "zero") != 0 && strcmp(optarg, "random") != 0) {
                struct stat sb;
                if (stat(optarg, &sb) != 0)
                    usage_error("--input-data '%s': no such file or directory (zero, random, a "
                                "JSON file or a directory of raw files)", optarg);
            }
            o->input_data = optarg;
            break;
        case OPT_SHAPE: parse_shape(o, optarg); break;
        case OPT_STRING_LENGTH: o->string_length = (int)parse_u64("string-length", optarg); break;
        case OPT_STRING_DATA: o->string_length = (int)strlen(optarg); break;
        case OPT_VERBOSE_CSV: o->verbose_csv = true; break;
        case OPT_JSON: o->json = optarg; break;
        case OPT_REPORT_UNSTABLE: o->report_unstable = true; break;
        case OPT_TRIALS: {
            uint64_t n = parse_u64("interleaved-trials", optarg);
            if (n < 2 || n > 1000)
                usage_error("--interleaved-trials takes 2 to 1000 trials (got %s)", optarg);
            o->trials = (int)n;
            break;
        }
        case OPT_PLOT: {
            size_t l = strlen(optarg);
            if (l < 4 || strcmp(optarg + l - 4, ".svg") != 0)
                usage_error("--plot writes SVG: name a .svg file (got '%s')", optarg);
            o->plot = optarg;
            break;
        }
        case OPT_WARMUP: o->warmup = parse_u64("warmup-request-count", optarg); break;
        case OPT_REQUEST_COUNT: o->request_total = parse_u64("request-count", optarg); break;
        case OPT_TRACE_LEVEL:
            o->trace_levels = nr_realloc(o->trace_levels,
                                         (o->n_trace_levels + 1) * sizeof(char *));
            o->trace_levels[o->n_trace_levels++] = optarg;
            break;
        case OPT_TRACE_RATE: o->trace_rate = optarg; break;
        case OPT_TRACE_COUNT: o->trace_count = optarg; break;
        case OPT_LOG_FREQUENCY: o->log_frequency = optarg; break;
        case OPT_COLLECT: o->collect_metrics = true; break;
        case OPT_METRICS_URL: o->metrics_url = optarg; break;
        case OPT_METRICS_INTERVAL:
            o->metrics_interval_ms = parse_u64("metrics-interval", optarg);
            if (o->metrics_interval_ms == 0)
                usage_error("metrics-interval must be > 0", NULL);
            break;
        case OPT_OUT_SHM:
            o->output_shm_size = parse_u64("output-shared-memory-size", optarg);
            break;
        case OPT_SHM:
            if (strcmp(optarg, "cuda") == 0)
                usage_error("--shared-memory cuda is not supported by nereid-perf (a GPU build "
                            "of perf_analyzer has it)", NULL);
            else if (strcmp(optarg, "system") != 0 && strcmp(optarg, "none") != 0)
                usage_error("unsupported shared memory type '%s' (none, system or cuda)",
                            optarg);
            o->shm_system = strcmp(optarg, "system") == 0;
            break;
        case OPT_SERVICE:
            if (strcmp(optarg, "triton") != 0)
                usage_error("--service-kind %s is not supported by nereid-perf", optarg);
            break;
        case OPT_IN_FORMAT: case OPT_OUT_FORMAT:
            if (strcmp(optarg, "binary") != 0)
                usage_error("only the binary tensor format is supported by nereid-perf yet (%s)",
                            optarg);
            break;
        case 'H': {
            const char *colon = strchr(optarg, ':');
            if (colon == NULL)
                usage_error("header '%s' must be <name>:<value>", optarg);
            o->headers = nr_realloc(o->headers, (o->n_headers + 1) * sizeof(perf_header_t));
            o->headers[o->n_headers].name = nr_strndup(optarg, (size_t)(colon - optarg));
            o->headers[o->n_headers++].value = nr_strdup(colon + 1);
            break;
        }
        case OPT_VERSION:
            printf("perf_analyzer %s\n", PERF_VERSION);
            exit(0);
        case 'h':
            fputs(usage_text, stdout);
            exit(0);
        case OPT_INTERVALS: intervals = optarg; break;
        case OPT_EXPORT: o->profile_export = optarg; break;
        case OPT_BINARY: o->binary_search = true; break;
        case OPT_STREAMING: o->streaming = true; break;
        default: /* getopt said which option */
            fputs(usage_text, stderr);
            exit(PERF_EXIT_ERROR);
        }
    }
    if (optind < argc)
        usage_error("unexpected argument '%s'", argv[optind]);
    if (o->model == NULL)
        usage_error("-m flag must be specified", NULL);
    o->grpc = strcasecmp(o->protocol, "grpc") == 0;
    if (o->url == NULL)
        o->url = o->grpc ? "localhost:8001" : "localhost:8000";
    if (o->streaming && !o->grpc)
        usage_error("Streaming is only allowed with gRPC protocol and Triton C API.", NULL);
    if (o->streaming) /* perf_analyzer: --streaming forces async */
        o->async = true;
    if (o->grpc && o->n_headers)
        usage_error("-H is only for HTTP (perf_analyzer: headers are an HTTP feature)", NULL);
    if (o->batch < 1)
        usage_error("batch size must be > 0", NULL);
    if (o->rate_mode + o->conc_given + (intervals != NULL) > 1)
        usage_error("Cannot specify more then one inference load mode. Please choose only one "
                    "of the following modes: --concurrency-range, --periodic-concurrency-range, "
                    "--request-rate-range, or --request-intervals.", NULL);
    if (intervals)
        read_intervals(o, intervals);
    if (o->trials && (o->binary_search || o->request_total || o->report_unstable))
        usage_error("--interleaved-trials measures every level of the range in turn: not with "
                    "--binary-search, --request-count or --report-unstable", NULL);
    if (o->trials && (o->rate_mode ? o->rate_end == 0 : o->conc_end == 0))
        usage_error("--interleaved-trials needs the end of the range", NULL);
    if (o->binary_search && o->latency_limit_ms == 0)
        usage_error("The --latency-threshold cannot be 0 for binary search mode.", NULL);
    if (o->binary_search && (o->rate_mode ? o->rate_end == 0 : o->conc_end == 0))
        usage_error("The end of the range can not be 0 (or 0.0) for binary search mode.", NULL);
    if (o->request_total) { /* one window of exactly that many requests */
        if (o->rate_mode ? o->rate_end != 0 && o->rate_end != o->rate_start
                         : o->conc_end != 0 && o->conc_end != o->conc_start)
            usage_error("request-count not supported with multiple %s values in one run",
                        o->rate_mode ? "request-rate" : "concurrency");
        if (o->rate_mode && (double)o->request_total < o->rate_start)
            usage_error("request-count can not be less than request-rate", NULL);
        o->count_windows = true;
        o->request_count = o->request_total;
        o->max_trials = 1;
    }
    if (o->rate_mode) {
        if (o->rate_start <= 0 || o->rate_step <= 0)
            usage_error("request-rate-range start and step must be > 0", NULL);
        if (o->rate_end == 0 && o->latency_limit_ms == 0)
            usage_error("The end of the search range and the latency limit can not be both 0 "
                        "(or 0.0) simultaneously", NULL);
        if (o->rate_end != 0 && o->rate_end < o->rate_start)
            usage_error("The end of the search range can not be less than the start", NULL);
        return;
    }
    if (o->conc_start < 1 || o->conc_step < 1)
        usage_error("concurrency-range start and step must be > 0", NULL);
    if (o->conc_end == 0 && o->latency_limit_ms == 0)
        usage_error("The end of the search range and the latency limit can not be both 0 (or "
                    "0.0) simultaneously", NULL);
    if (o->conc_end != 0 && o->conc_end < o->conc_start)
        usage_error("The end of the search range can not be less than the start", NULL);
}

static int fail(const char *what, nr_status_t *st)
{
    fprintf(stderr, "error: %s%s%s\n", what ? what : "", what ? ": " : "", st->msg);
    nr_status_free(st);
    return PERF_EXIT_ERROR;
}

static void opts_free(perf_opts_t *o)
{
    for (size_t i = 0; i < o->n_shapes; i++) {
        free(o->shapes[i].name);
        free(o->shapes[i].dims);
    }
    free(o->shapes);
    for (size_t i = 0; i < o->n_headers; i++) {
        free(o->headers[i].name);
        free(o->headers[i].value);
    }
    free(o->headers);
    free(o->intervals_ns);
    free(o->trace_levels);
}

typedef enum { LEVEL_OK, LEVEL_OVER, LEVEL_STOP } level_t;

/* One level measured, printed and kept in (*steps)[*n] when it passes; LEVEL_OVER when its
 * latency went over -l (dropped), LEVEL_STOP when the sweep must end (*rc set where it
 * fails the run). */
static level_t measure_level(perf_ctl_t *conn, const perf_opts_t *o, const perf_model_t *m,
                             uint64_t c, double rate, perf_step_t **steps, size_t *n, int *rc)
{
    if (o->n_intervals) /* perf_analyzer names no level */
        ;
    else if (o->rate_mode)
        printf("Request Rate: %g inference requests per seconds\n", rate);
    else
        printf("Request concurrency: %llu\n", (unsigned long long)c);
    fflush(stdout);
    *steps = nr_realloc(*steps, (*n + 1) * sizeof(**steps));
    perf_step_t *s = &(*steps)[*n];
    s->value = c;
    s->rate = rate;
    s->threads = o->rate_mode ? (o->max_threads ? o->max_threads : 16) : c;
    perf_step_result_t res;
    char why[1024] = "";
    int e = perf_measure(conn, o, m, s, &res, why, sizeof(why));
    if (e >= 0) {
        fprintf(stderr, "%s\n", why);
        perf_window_free(&s->merged);
        *rc = e;
        return LEVEL_STOP;
    }
    if (res == PERF_STEP_UNSTABLE) {
        if (o->rate_mode)
            fprintf(stderr, "Failed to obtain stable measurement.\n");
        else
            fprintf(stderr, "Failed to obtain stable measurement within %d measurement "
                    "windows for concurrency %llu. Please try to increase the %s.\n",
                    o->max_trials, (unsigned long long)c,
                    o->count_windows ? "--measurement-request-count" : "--measurement-interval");
        fprintf(stderr, "%s\n", why);
        perf_window_free(&s->merged);
        if (*n == 0) {
            fprintf(stderr, "Failed to obtain stable measurement.\n");
            *rc = PERF_EXIT_UNSTABLE;
        }
        return LEVEL_STOP;
    }
    if (res == PERF_STEP_ALL)
        fprintf(stderr, "%s\n", why);
    if (res == PERF_STEP_OVER_LIMIT) { /* dropped, unprinted */
        fprintf(stderr, "Measured latency went over the set limit of %llu msec. \n",
                (unsigned long long)o->latency_limit_ms);
        perf_window_free(&s->merged);
        return LEVEL_OVER;
    }
    perf_print_step(o, s);
    (*n)++;
    fflush(stdout);
    return LEVEL_OK;
}

/* --binary-search, as perf_analyzer: the start (the search ends if it fails), the end (it
 * ends if that passes), then the middle of the two while they are more than the step apart,
 * moving the bound on its side. The levels that passed are reported in the order measured. */
static void binary_search(perf_ctl_t *conn, const perf_opts_t *o, const perf_model_t *m,
                          perf_step_t **steps, size_t *n, int *rc)
{
    double lo = o->rate_mode ? o->rate_start : (double)o->conc_start;
    double hi = o->rate_mode ? o->rate_end : (double)o->conc_end;
    double step = o->rate_mode ? o->rate_step : (double)o->conc_step;
    level_t r = measure_level(conn, o, m, (uint64_t)lo, lo, steps, n, rc);
    if (r != LEVEL_OK || hi <= lo)
        return;
    if ((r = measure_level(conn, o, m, (uint64_t)hi, hi, steps, n, rc)) != LEVEL_OVER)
        return;
    while (hi - lo > step) {
        double mid = o->rate_mode ? (lo + hi) / 2 : (double)(((uint64_t)lo + (uint64_t)hi) / 2);
        if ((r = measure_level(conn, o, m, (uint64_t)mid, mid, steps, n, rc)) == LEVEL_STOP)
            return;
        if (r == LEVEL_OK)
            lo = mid;
        else
            hi = mid;
    }
}

static const perf_opts_t *g_cmp_opts; /* for cmp_trial: qsort has no context argument */

static int cmp_trial(const void *a, const void *b)
{
    double x = perf_throughput(g_cmp_opts, &(*(perf_step_t *const *)a)->merged);
    double y = perf_throughput(g_cmp_opts, &(*(perf_step_t *const *)b)->merged);
    return x < y ? -1 : x > y;
}

/* --interleaved-trials, measured as nereid's benches measure: every level of the range once
 * per round, round after round, so that a drift of a busy machine falls on all levels alike
 * instead of on the last ones; each visit a ramp-up and one window, no stability check. A
 * level reports its median trial (by throughput), its spread over the trials on stderr; a
 * level whose median trial goes over -l is dropped and ends the report, as in the linear
 * sweep. */
static void interleaved(perf_ctl_t *conn, const perf_opts_t *o, const perf_model_t *m,
                        perf_step_t **steps, size_t *n, int *rc)
{
    perf_opts_t one = *o;
    one.max_trials = 1;
    size_t nl = 0;
    while (o->rate_mode ? o->rate_start + (double)nl * o->rate_step <= o->rate_end * (1 + 1e-9)
                        : o->conc_start + nl * o->conc_step <= o->conc_end)
        nl++;
    size_t nt = (size_t)o->trials;
    perf_step_t *all = nr_calloc(nl * nt + 1, sizeof(*all));
    for (size_t t = 0; t < nt && *rc == PERF_EXIT_OK; t++) {
        for (size_t l = 0; l < nl && *rc == PERF_EXIT_OK; l++) {
            perf_step_t *s = &all[l * nt + t];
            s->value = o->conc_start + l * o->conc_step;
            s->rate = o->rate_start + (double)l * o->rate_step;
            s->threads = o->rate_mode ? (o->max_threads ? o->max_threads : 16) : s->value;
            if (o->verbose)
                fprintf(stderr, "nereid-perf: trial %zu of %zu, %s %g\n", t + 1, nt,
                        o->rate_mode ? "request rate" : "concurrency",
                        o->rate_mode ? s->rate : (double)s->value);
            perf_step_result_t res;
            char why[1024] = "";
            int e = perf_measure(conn, &one, m, s, &res, why, sizeof(why));
            if (e >= 0) {
                fprintf(stderr, "%s\n", why);
                *rc = e;
            }
        }
    }
    perf_step_t **order = nr_calloc(nt, sizeof(*order));
    g_cmp_opts = o;
    for (size_t l = 0; l < nl && *rc == PERF_EXIT_OK; l++) {
        for (size_t t = 0; t < nt; t++)
            order[t] = &all[l * nt + t];
        qsort(order, nt, sizeof(*order), cmp_trial);
        perf_step_t *med = order[nt / 2];
        uint64_t lat_min = UINT64_MAX, lat_max = 0;
        for (size_t t = 0; t < nt; t++) {
            uint64_t v = perf_stab_latency(o, &order[t]->merged);
            lat_min = v < lat_min ? v : lat_min;
            lat_max = v > lat_max ? v : lat_max;
        }
        if (o->rate_mode)
            printf("Request Rate: %g inference requests per seconds\n", med->rate);
        else
            printf("Request concurrency: %llu\n", (unsigned long long)med->value);
        fprintf(stderr, "nereid-perf: %zu interleaved trials: throughput median %g infer/sec "
                "(min %g, max %g), %s latency %llu usec (min %llu, max %llu); the median trial "
                "is reported\n", nt, perf_throughput(o, &med->merged),
                perf_throughput(o, &order[0]->merged), perf_throughput(o, &order[nt - 1]->merged),
                o->percentile > 0 ? "stabilizing" : "average",
                (unsigned long long)(perf_stab_latency(o, &med->merged) / 1000),
                (unsigned long long)(lat_min / 1000), (unsigned long long)(lat_max / 1000));
        if (o->latency_limit_ms &&
            perf_stab_latency(o, &med->merged) >= o->latency_limit_ms * 1000000ull) {
            fprintf(stderr, "Measured latency went over the set limit of %llu msec. \n",
                    (unsigned long long)o->latency_limit_ms);
            break;
        }
        perf_print_step(o, med);
        fflush(stdout);
        *steps = nr_realloc(*steps, (*n + 1) * sizeof(**steps));
        (*steps)[(*n)++] = *med; /* moved */
        memset(&med->merged, 0, sizeof(med->merged));
    }
    for (size_t i = 0; i < nl * nt; i++)
        perf_window_free(&all[i].merged);
    free(order);
    free(all);
}

/* The sweep over --concurrency-range or --request-rate-range; returns the exit code. */
static int sweep(perf_ctl_t *conn, const perf_opts_t *o, const perf_model_t *m)
{
    perf_step_t *steps = NULL;
    size_t n = 0;
    int rc = PERF_EXIT_OK;
    nr_status_t *st;
    if (o->binary_search)
        binary_search(conn, o, m, &steps, &n, &rc);
    else if (o->trials)
        interleaved(conn, o, m, &steps, &n, &rc);
    for (uint64_t i = 0; !o->binary_search && !o->trials; i++) { /* linear: until one fails or the end */
        uint64_t c = o->conc_start + i * o->conc_step;
        double rate = o->rate_start + (double)i * o->rate_step;
        if (o->rate_mode ? o->rate_end != 0 && rate > o->rate_end * (1 + 1e-9)
                         : o->conc_end != 0 && c > o->conc_end)
            break;
        if (measure_level(conn, o, m, c, rate, &steps, &n, &rc) != LEVEL_OK)
            break;
    }
    if (rc == PERF_EXIT_OK && n > 0) {
        perf_print_summary(o, steps, n);
        if (o->csv && (st = perf_write_csv(o, steps, n)) != NULL)
            rc = fail(NULL, st);
        if (o->json && (st = perf_write_json(o, steps, n)) != NULL)
            rc = fail(NULL, st);
        if (o->plot && (st = perf_write_plot(o, steps, n)) != NULL)
            rc = fail(NULL, st);
        if (o->profile_export && (st = perf_write_profile(o, steps, n)) != NULL)
            rc = fail(NULL, st);
    }
    for (size_t i = 0; i < n; i++)
        perf_window_free(&steps[i].merged);
    free(steps);
    return rc;
}

int main(int argc, char **argv)
{
    perf_opts_t o;
    parse_args(argc, argv, &o);
    perf_ctl_t c = {.grpc = o.grpc};
    perf_model_t m;
    nr_buf_t scratch;
    nr_buf_init(&scratch);
    int rc = PERF_EXIT_OK;
    nr_status_t *st;
    if (o.grpc) {
        nr_grpc_lib_init();
        st = perf_grpc_open(&c.g, o.url);
        c.g.streaming = o.streaming; /* the warmup's requests too */
    } else {
        st = perf_conn_init(&c.http, o.url);
    }
    if (st) {
        rc = fail("failed to get model metadata", st);
        goto out;
    }
    if (o.collect_metrics && (st = perf_metrics_init(&c.metrics, &o)) != NULL) {
        rc = fail("metrics-url", st);
        goto out;
    }
    st = o.grpc ? perf_grpc_model_load(&c.g, &o, &m) : perf_model_load(&c.http, &o, &m);
    if (st) {
        rc = fail(NULL, st);
        goto out_model;
    }
    if (o.n_trace_levels > 0 || o.trace_rate || o.trace_count || o.log_frequency) {
        st = o.grpc ? perf_grpc_trace(&c.g, &o) : perf_http_trace(&c.http, &o);
        if (st) {
            rc = fail("failed to update the trace settings", st);
            goto out_model;
        }
    }
    o.decoupled = c.g.decoupled = m.decoupled;
    if (m.decoupled && !(o.async && o.streaming && o.grpc)) { /* perf_analyzer's words */
        fprintf(stderr, "Decoupled models must be run with `--async` and `--streaming` and "
                        "either `-i grpc` or `--service-kind=triton_c_api`\n");
        rc = PERF_EXIT_ERROR;
        goto out_model;
    }
    if (o.shm_system && (st = perf_shm_register(&c, &m)) != NULL) {
        rc = fail(NULL, st);
        goto out_shm;
    }
    if (perf_data_is_file(&o) && !perf_data_is_dir(&o)) /* perf_analyzer's, its space too */
        printf(" Successfully read data for 1 stream/streams with %zu step/steps.\n",
               m.n_requests);
    for (uint64_t i = 0; i < o.warmup && rc == PERF_EXIT_OK; i++) {
        perf_resp_t r;
        const nr_buf_t *req = &m.requests[i % m.n_requests];
        st = o.grpc ? perf_grpc_infer(&c.g, req, &scratch, &r)
                    : perf_exchange(&c.http, "POST", m.path, req, NULL, 0, &r);
        if (st)
            rc = fail("warmup", st);
    }
    if (rc == PERF_EXIT_OK) {
        perf_print_settings(&o);
        fflush(stdout);
        rc = sweep(&c, &o, &m);
    }
out_shm:
    if (o.shm_system && (st = perf_shm_unregister(&c)) != NULL) {
        if (rc == PERF_EXIT_OK)
            rc = fail(NULL, st);
        else
            nr_status_free(st);
    }
out_model:
    perf_model_free(&m);
out:
    if (o.grpc) {
        perf_grpc_close(&c.g);
        grpc_shutdown_blocking(); /* its threads joined before exit */
    } else {
        perf_conn_close(&c.http);
    }
    perf_metrics_close(&c.metrics);
    nr_buf_free(&scratch);
    opts_free(&o);
    return rc;
}
