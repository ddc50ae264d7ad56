/* test_metrics.c - the Prometheus metrics: the text (Triton 2.51's recorded
 * body, byte for byte, from the same numbers), number formatting, summaries,
 * the observation ring (also under concurrent writers), --metrics-config
 * texts, the /proc parsers, the counters the core keeps by failure reason and
 * the pending count (through the test backend: queue full, queue timeout, a
 * request-level backend failure), and a scrape of a real repository over the
 * metrics port (a READY model and one that failed to load).
 */
#include "../../src/common/alloc.h"
#include "../../src/core/kserve.h"
#include "../../src/core/scheduler.h"
#include "../../src/frontends/metrics/metrics_int.h"
#include "nr_test.h"
#include "test_backend.h"

#include <arpa/inet.h>
#include <math.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- helpers ---- */

/* Compares two texts; on a difference prints the first differing line. */
static bool same_text(const char *got, const char *want, int line)
{
    if (strcmp(got, want) == 0)
        return true;
    size_t i = 0, ls = 0;
    while (got[i] && got[i] == want[i]) {
        if (got[i] == '\n')
            ls = i + 1;
        i++;
    }
    const char *ge = strchr(got + ls, '\n'), *we = strchr(want + ls, '\n');
    return nr_test_fail(__FILE__, line, "text differs at byte %zu:\n got  %.*s\n want %.*s", i,
                        ge ? (int)(ge - got - ls) : (int)strlen(got + ls), got + ls,
                        we ? (int)(we - want - ls) : (int)strlen(want + ls), want + ls);
}
#define EXPECT_TEXT(got, want) same_text((got), (want), __LINE__)

static char *render(const nr_metrics_view_t *v)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_metrics_render(&b, v);
    nr_buf_putc(&b, '\0');
    return b.data;
}

static char *fmt(double d)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_metrics_put_double(&b, d);
    nr_buf_putc(&b, '\0');
    return b.data;
}

static size_t count_lines(const char *text, const char *needle)
{
    size_t n = 0;
    for (const char *p = text; (p = strstr(p, needle)) != NULL; p++)
        n++;
    return n;
}

/* ---- the text ---- */

/* metrics.txt section A.2 (a fresh Triton after 3 simple + 1 identity_fp32
 * batch-2 successes and one BACKEND failure on identity_bytes), with the
 * series in nereid's order (models by name, reasons REJECTED, CANCELED,
 * BACKEND, OTHER; Triton's order is a hash map's). Every other byte is the
 * recording's. */
static const char RECORDED_A2[] =
    "# HELP nv_inference_request_success Number of successful inference requests, all batch sizes\n"
    "# TYPE nv_inference_request_success counter\n"
    "nv_inference_request_success{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_request_success{model=\"identity_fp32\",version=\"1\"} 1\n"
    "nv_inference_request_success{model=\"simple\",version=\"1\"} 3\n"
    "# HELP nv_inference_request_failure Number of failed inference requests, all batch sizes\n"
    "# TYPE nv_inference_request_failure counter\n"
    "nv_inference_request_failure{model=\"identity_bytes\",reason=\"REJECTED\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"identity_bytes\",reason=\"CANCELED\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"identity_bytes\",reason=\"BACKEND\",version=\"1\"} 1\n"
    "nv_inference_request_failure{model=\"identity_bytes\",reason=\"OTHER\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"identity_fp32\",reason=\"REJECTED\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"identity_fp32\",reason=\"CANCELED\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"identity_fp32\",reason=\"BACKEND\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"identity_fp32\",reason=\"OTHER\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"simple\",reason=\"REJECTED\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"simple\",reason=\"CANCELED\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"simple\",reason=\"BACKEND\",version=\"1\"} 0\n"
    "nv_inference_request_failure{model=\"simple\",reason=\"OTHER\",version=\"1\"} 0\n"
    "# HELP nv_inference_count Number of inferences performed (does not include cached requests)\n"
    "# TYPE nv_inference_count counter\n"
    "nv_inference_count{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_count{model=\"identity_fp32\",version=\"1\"} 2\n"
    "nv_inference_count{model=\"simple\",version=\"1\"} 3\n"
    "# HELP nv_inference_exec_count Number of model executions performed (does not include cached requests)\n"
    "# TYPE nv_inference_exec_count counter\n"
    "nv_inference_exec_count{model=\"identity_bytes\",version=\"1\"} 1\n"
    "nv_inference_exec_count{model=\"identity_fp32\",version=\"1\"} 1\n"
    "nv_inference_exec_count{model=\"simple\",version=\"1\"} 3\n"
    "# HELP nv_inference_request_duration_us Cumulative inference request duration in microseconds (includes cached requests)\n"
    "# TYPE nv_inference_request_duration_us counter\n"
    "nv_inference_request_duration_us{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_request_duration_us{model=\"identity_fp32\",version=\"1\"} 107\n"
    "nv_inference_request_duration_us{model=\"simple\",version=\"1\"} 446\n"
    "# HELP nv_inference_queue_duration_us Cumulative inference queuing duration in microseconds (includes cached requests)\n"
    "# TYPE nv_inference_queue_duration_us counter\n"
    "nv_inference_queue_duration_us{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_queue_duration_us{model=\"identity_fp32\",version=\"1\"} 41\n"
    "nv_inference_queue_duration_us{model=\"simple\",version=\"1\"} 144\n"
    "# HELP nv_inference_compute_input_duration_us Cumulative compute input duration in microseconds (does not include cached requests)\n"
    "# TYPE nv_inference_compute_input_duration_us counter\n"
    "nv_inference_compute_input_duration_us{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_compute_input_duration_us{model=\"identity_fp32\",version=\"1\"} 6\n"
    "nv_inference_compute_input_duration_us{model=\"simple\",version=\"1\"} 59\n"
    "# HELP nv_inference_compute_infer_duration_us Cumulative compute inference duration in microseconds (does not include cached requests)\n"
    "# TYPE nv_inference_compute_infer_duration_us counter\n"
    "nv_inference_compute_infer_duration_us{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_compute_infer_duration_us{model=\"identity_fp32\",version=\"1\"} 33\n"
    "nv_inference_compute_infer_duration_us{model=\"simple\",version=\"1\"} 127\n"
    "# HELP nv_inference_compute_output_duration_us Cumulative inference compute output duration in microseconds (does not include cached requests)\n"
    "# TYPE nv_inference_compute_output_duration_us counter\n"
    "nv_inference_compute_output_duration_us{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_compute_output_duration_us{model=\"identity_fp32\",version=\"1\"} 2\n"
    "nv_inference_compute_output_duration_us{model=\"simple\",version=\"1\"} 27\n"
    "# HELP nv_inference_pending_request_count Instantaneous number of pending requests awaiting execution per-model.\n"
    "# TYPE nv_inference_pending_request_count gauge\n"
    "nv_inference_pending_request_count{model=\"identity_bytes\",version=\"1\"} 0\n"
    "nv_inference_pending_request_count{model=\"identity_fp32\",version=\"1\"} 0\n"
    "nv_inference_pending_request_count{model=\"simple\",version=\"1\"} 0\n"
    "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory size, in bytes\n"
    "# TYPE nv_pinned_memory_pool_total_bytes gauge\n"
    "nv_pinned_memory_pool_total_bytes 268435456\n"
    "# HELP nv_pinned_memory_pool_used_bytes Pinned memory pool used memory size, in bytes\n"
    "# TYPE nv_pinned_memory_pool_used_bytes gauge\n"
    "nv_pinned_memory_pool_used_bytes 0\n"
    "# HELP nv_cpu_utilization CPU utilization rate [0.0 - 1.0]\n"
    "# TYPE nv_cpu_utilization gauge\n"
    "nv_cpu_utilization 0.005\n"
    "# HELP nv_cpu_memory_total_bytes CPU total memory (RAM), in bytes\n"
    "# TYPE nv_cpu_memory_total_bytes gauge\n"
    "nv_cpu_memory_total_bytes 25275973632\n"
    "# HELP nv_cpu_memory_used_bytes CPU used memory (RAM), in bytes\n"
    "# TYPE nv_cpu_memory_used_bytes gauge\n"
    "nv_cpu_memory_used_bytes 580681728\n"
;

static nr_metrics_row_t row(const char *model, uint64_t success, uint64_t inferences,
                            uint64_t execs, const uint64_t us[5])
{
    nr_metrics_row_t r = {.model = (char *)model, .version = (char *)"1", .ready = true, .success = success,
                          .inferences = inferences, .executions = execs};
    memcpy(r.us, us, sizeof(r.us));
    return r;
}

NR_TEST(render_matches_recorded_body)
{
    nr_metrics_row_t rows[3] = {
        row("identity_bytes", 0, 0, 1, (uint64_t[5]){0, 0, 0, 0, 0}),
        row("identity_fp32", 1, 2, 1, (uint64_t[5]){107, 41, 6, 33, 2}),
        row("simple", 3, 3, 3, (uint64_t[5]){446, 144, 59, 127, 27}),
    };
    rows[0].failure[NR_FAIL_BACKEND] = 1;
    nr_metrics_view_t v = {.rows = rows, .n_rows = 3, .counters = true,
                           .pinned_total = NR_METRICS_PINNED_TOTAL, .cpu = true,
                           .cpu_util = 0.005, .mem_total = 25275973632ull,
                           .mem_used = 580681728ull};
    char *text = render(&v);
    EXPECT_TEXT(text, RECORDED_A2);
    free(text);
}

NR_TEST(render_failed_version_is_only_in_failure_family)
{
    uint64_t us[5] = {1, 2, 3, 4, 5};
    nr_metrics_row_t rows[2] = {row("broken", 0, 0, 0, us), row("simple", 2, 2, 2, us)};
    rows[0].ready = false;
    rows[0].failure[NR_FAIL_OTHER] = 7; /* never read for a version that is not READY */
    nr_metrics_view_t v = {.rows = rows, .n_rows = 2, .counters = true};
    char *text = render(&v);
    EXPECT_EQ_U64(count_lines(text, "model=\"broken\""), 4);
    EXPECT_NOT_NULL(strstr(text, "nv_inference_request_failure{model=\"broken\",reason=\"REJECTED\","
                                 "version=\"1\"} 0\n"
                                 "nv_inference_request_failure{model=\"broken\",reason=\"CANCELED\","
                                 "version=\"1\"} 0\n"
                                 "nv_inference_request_failure{model=\"broken\",reason=\"BACKEND\","
                                 "version=\"1\"} 0\n"
                                 "nv_inference_request_failure{model=\"broken\",reason=\"OTHER\","
                                 "version=\"1\"} 0\n"));
    EXPECT_EQ_U64(count_lines(text, "model=\"simple\""), 4 + 3 + 5 + 1);
    EXPECT_NULL(strstr(text, "nv_cpu_")); /* no CPU metrics asked for */
    free(text);
    /* only a failed model: the per-model families have no series and are left out */
    v.rows = rows;
    v.n_rows = 1;
    text = render(&v);
    EXPECT_NULL(strstr(text, "nv_inference_request_success"));
    EXPECT_NULL(strstr(text, "nv_inference_pending_request_count"));
    EXPECT_NOT_NULL(strstr(text, "# TYPE nv_inference_request_failure counter\n"));
    EXPECT_NOT_NULL(strstr(text, "nv_pinned_memory_pool_total_bytes 0\n"));
    free(text);
}

NR_TEST(render_without_duration_counters)
{
    uint64_t us[5] = {1, 2, 3, 4, 5};
    nr_metrics_row_t r = row("m", 1, 1, 1, us);
    nr_metrics_view_t v = {.rows = &r, .n_rows = 1, .counters = false};
    char *text = render(&v);
    EXPECT_NULL(strstr(text, "_duration_us"));
    EXPECT_NOT_NULL(strstr(text, "nv_inference_exec_count{model=\"m\",version=\"1\"} 1\n"
                                 "# HELP nv_inference_pending_request_count "));
    free(text);
}

/* The models' own families (core/custom_metrics.c): one per name, one series per label set
 * whatever the labels' order, reference counted; Triton's texts for each misuse; rendered
 * after nereid's families of their type, histograms with cumulative buckets. */
NR_TEST(custom_metrics_registry_and_text)
{
    nr_cfamily_t *c1, *c2, *h;
    nr_cmetric_t *m1, *m2, *hm;
    ASSERT_OK(nr_cfamily_new("req_total", "requests", NR_CMETRIC_COUNTER, &c1));
    ASSERT_OK(nr_cfamily_new("req_total", "other text", NR_CMETRIC_COUNTER, &c2));
    EXPECT_TRUE(c1 == c2);
    EXPECT_STATUS(nr_cfamily_new("req_total", "", NR_CMETRIC_GAUGE, &h), NR_INVALID_ARG,
                  "Family name already exists with different type");
    EXPECT_STATUS(nr_cfamily_new("1x", "", NR_CMETRIC_GAUGE, &h), NR_INVALID_ARG,
                  "Invalid metric name");
    EXPECT_STATUS(nr_cfamily_new("x", "", 7, &h), NR_INVALID_ARG,
                  "Unsupported kind passed to MetricFamily constructor.");
    const char *ab[] = {"b", "2", "a", "1"}, *ba[] = {"a", "1", "b", "2"};
    ASSERT_OK(nr_cmetric_new(c1, ab, 2, NULL, 0, false, &m1));
    ASSERT_OK(nr_cmetric_new(c2, ba, 2, NULL, 0, false, &m2));
    EXPECT_TRUE(m1 == m2);
    EXPECT_STATUS(nr_cmetric_new(c1, ab, 2, (double[]){1}, 1, true, &hm), NR_INVALID_ARG,
                  "Unexpected args found in counter Metric constructor.");
    double v = -1;
    ASSERT_OK(nr_cmetric_op(m1, NR_CMETRIC_INCREMENT, 2, NULL));
    ASSERT_OK(nr_cmetric_op(m2, NR_CMETRIC_VALUE, 0, &v));
    EXPECT_EQ_DBL(v, 2);
    EXPECT_STATUS(nr_cmetric_op(m1, NR_CMETRIC_SET, 1, NULL), NR_UNSUPPORTED,
                  "TRITONSERVER_METRIC_KIND_COUNTER does not support Set");
    EXPECT_STATUS(nr_cmetric_op(m1, NR_CMETRIC_INCREMENT, -1, NULL), NR_INVALID_ARG,
                  "TRITONSERVER_METRIC_KIND_COUNTER can only be incremented monotonically by "
                  "non-negative values.");
    ASSERT_OK(nr_cfamily_new("lat", "", NR_CMETRIC_HISTOGRAM, &h));
    EXPECT_STATUS(nr_cmetric_new(h, NULL, 0, NULL, 0, false, &hm), NR_INVALID_ARG,
                  "Bucket Boundaries not found in Metric args.");
    EXPECT_STATUS(nr_cmetric_new(h, NULL, 0, (double[]){2, 1}, 2, true, &hm), NR_INVALID_ARG,
                  "Bucket Boundaries must be strictly sorted");
    const char *le[] = {"le", "x"};
    EXPECT_STATUS(nr_cmetric_new(h, le, 1, (double[]){1}, 1, true, &hm), NR_INVALID_ARG,
                  "Invalid label name");
    ASSERT_OK(nr_cmetric_new(h, NULL, 0, (double[]){1, 2.5}, 2, true, &hm));
    for (double x = 0.5; x < 4; x += 1) /* 0.5, 1.5, 2.5, 3.5 */
        ASSERT_OK(nr_cmetric_op(hm, NR_CMETRIC_OBSERVE, x, NULL));
    EXPECT_STATUS(nr_cmetric_op(hm, NR_CMETRIC_VALUE, 0, &v), NR_UNSUPPORTED,
                  "TRITONSERVER_METRIC_KIND_HISTOGRAM does not support Value");

    nr_metrics_view_t view = {0};
    nr_cmetrics_snapshot(&view.custom, &view.n_custom);
    char *text = render(&view);
    EXPECT_STREQ(text, "# HELP req_total requests\n# TYPE req_total counter\n"
                       "req_total{a=\"1\",b=\"2\"} 2\n"
                       "# HELP nv_pinned_memory_pool_total_bytes Pinned memory pool total memory "
                       "size, in bytes\n# TYPE nv_pinned_memory_pool_total_bytes gauge\n"
                       "nv_pinned_memory_pool_total_bytes 0\n"
                       "# HELP nv_pinned_memory_pool_used_bytes Pinned memory pool used memory "
                       "size, in bytes\n# TYPE nv_pinned_memory_pool_used_bytes gauge\n"
                       "nv_pinned_memory_pool_used_bytes 0\n"
                       "# TYPE lat histogram\nlat_count 4\nlat_sum 8\nlat_bucket{le=\"1\"} 1\n"
                       "lat_bucket{le=\"2.5\"} 3\nlat_bucket{le=\"+Inf\"} 4\n");
    free(text);
    nr_cmetrics_snapshot_free(view.custom, view.n_custom);

    nr_cmetric_delete(m1); /* m2 still holds the series */
    nr_cmetrics_snapshot(&view.custom, &view.n_custom);
    EXPECT_EQ_U64(view.n_custom, 2);
    nr_cmetrics_snapshot_free(view.custom, view.n_custom);
    nr_cmetric_delete(m2);
    nr_cmetric_delete(hm);
    nr_cmetrics_snapshot(&view.custom, &view.n_custom);
    EXPECT_EQ_U64(view.n_custom, 0); /* families without a series are not shown */
    nr_cmetrics_snapshot_free(view.custom, view.n_custom);
    nr_cfamily_delete(c1);
    nr_cfamily_delete(c2);
    nr_cfamily_delete(h);
}

NR_TEST(render_summaries)
{
    uint64_t us[5] = {600, 60, 6, 300, 3};
    nr_metrics_row_t r = row("a\"b\\c\nd", 3, 3, 3, us);
    nr_metrics_quantile_t q[2] = {{0.5, 0.05}, {0.99, 0.001}};
    double vals[10];
    for (int i = 0; i < 10; i++)
        vals[i] = i == 9 ? NAN : 10.0 * i;
    r.quantile = vals;
    nr_metrics_view_t v = {.rows = &r, .n_rows = 1, .counters = true, .summaries = true,
                           .quantiles = q, .n_quantiles = 2};
    char *text = render(&v);
    const char *want =
        "# HELP nv_inference_request_summary_us Summary of inference request duration in "
        "microseconds (includes cached requests)\n"
        "# TYPE nv_inference_request_summary_us summary\n"
        "nv_inference_request_summary_us_count{model=\"a\\\"b\\\\c\\nd\",version=\"1\"} 3\n"
        "nv_inference_request_summary_us_sum{model=\"a\\\"b\\\\c\\nd\",version=\"1\"} 600\n"
        "nv_inference_request_summary_us{model=\"a\\\"b\\\\c\\nd\",version=\"1\",quantile=\"0.5\"} 0\n"
        "nv_inference_request_summary_us{model=\"a\\\"b\\\\c\\nd\",version=\"1\",quantile=\"0.99\"} "
        "10\n"
        "# HELP nv_inference_queue_summary_us ";
    const char *at = strstr(text, "# HELP nv_inference_request_summary_us");
    ASSERT_NOT_NULL(at);
    EXPECT_TRUE(strncmp(at, want, strlen(want)) == 0);
    /* summaries come after every gauge, in Triton's order, compute ones with the counters' HELP */
    EXPECT_TRUE(strstr(text, "nv_pinned_memory_pool_used_bytes") < at);
    const char *names[] = {"request", "queue", "compute_input", "compute_infer",
                           "compute_output"};
    const char *prev = at;
    for (int k = 1; k < 5; k++) {
        char h[128];
        snprintf(h, sizeof(h), "# TYPE nv_inference_%s_summary_us summary\n", names[k]);
        const char *p = strstr(text, h);
        EXPECT_TRUE(p != NULL && p > prev);
        prev = p ? p : prev;
    }
    EXPECT_NOT_NULL(strstr(text, "# HELP nv_inference_compute_infer_summary_us Cumulative compute "
                                 "inference duration in microseconds (does not include cached "
                                 "requests)\n"));
    EXPECT_NOT_NULL(strstr(text, "nv_inference_compute_output_summary_us{model=\"a\\\"b\\\\c\\nd\","
                                 "version=\"1\",quantile=\"0.99\"} Nan\n"));
    free(text);
}

NR_TEST(number_formatting)
{
    static const struct {
        double v;
        const char *want;
    } cases[] = {
        {0, "0"}, {0.005, "0.005"}, {0.02255639097744361, "0.02255639097744361"},
        {25275973632.0, "25275973632"}, {268435456, "268435456"}, {100000, "1e+05"},
        {120000, "120000"}, {1e21, "1e+21"}, {1.2345e-7, "1.2345e-07"}, {0.1, "0.1"},
        {0.0001, "1e-04"}, {0.001, "0.001"}, {1e15, "1e+15"}, {0.999, "0.999"}, {9.5, "9.5"},
        {12345678901234567890.0, "12345678901234567168"}, {5e-324, "5e-324"},
        {1.7976931348623157e308, "1.7976931348623157e+308"}, {-2.5, "-2.5"}, {-0.0, "-0"},
        {NAN, "Nan"}, {INFINITY, "+Inf"}, {-INFINITY, "-Inf"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char *s = fmt(cases[i].v);
        EXPECT_STREQ(s, cases[i].want);
        free(s);
    }
}

NR_TEST(quantile_nearest_rank)
{
    uint32_t v[4] = {10, 20, 30, 40};
    EXPECT_EQ_DBL(nr_metrics_quantile_of(v, 4, 0.5), 20);
    EXPECT_EQ_DBL(nr_metrics_quantile_of(v, 4, 0.9), 40);
    EXPECT_EQ_DBL(nr_metrics_quantile_of(v, 4, 0.25), 10);
    EXPECT_EQ_DBL(nr_metrics_quantile_of(v, 4, 0), 10);
    EXPECT_EQ_DBL(nr_metrics_quantile_of(v, 4, 1.5), 40);
    EXPECT_TRUE(isnan(nr_metrics_quantile_of(v, 0, 0.5)));
}

/* ---- the observation ring ---- */

NR_TEST(obs_ring_keeps_the_latest)
{
    nr_obs_t *o = nr_obs_new(5);
    ASSERT_EQ_U64(nr_obs_cap(o), 8);
    uint32_t a[NR_OBS_N][8];
    uint32_t *out[NR_OBS_N] = {a[0], a[1], a[2], a[3], a[4]};
    EXPECT_EQ_U64(nr_obs_collect(o, 0, out), 0);
    for (uint32_t i = 1; i <= 11; i++) {
        uint32_t us[NR_OBS_N] = {i, i + 100, i + 200, i + 300, i + 400};
        nr_obs_record(o, 1000 * i, us);
    }
    size_t n = nr_obs_collect(o, 0, out);
    ASSERT_EQ_U64(n, 8); /* 4..11 */
    uint32_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        sum += a[0][i];
        for (int k = 1; k < NR_OBS_N; k++)
            EXPECT_EQ_U64(a[k][i], a[0][i] + 100u * (uint32_t)k);
    }
    EXPECT_EQ_U64(sum, 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11);
    EXPECT_EQ_U64(nr_obs_collect(o, 9000, out), 3); /* completed at 9000 or later */
    nr_obs_free(o);
}

typedef struct {
    nr_obs_t *o;
    uint32_t base;
    atomic_bool *stop;
    size_t bad, seen;
} obs_thread_t;

static void *obs_writer(void *arg)
{
    obs_thread_t *t = arg;
    for (uint32_t i = 0; i < 20000; i++) {
        uint32_t id = t->base + i;
        uint32_t us[NR_OBS_N] = {id, id ^ 1u, id ^ 2u, id ^ 3u, id ^ 4u};
        nr_obs_record(t->o, 1 + id, us);
    }
    return NULL;
}

static void *obs_reader(void *arg)
{
    obs_thread_t *t = arg;
    size_t cap = nr_obs_cap(t->o);
    uint32_t *out[NR_OBS_N];
    for (int k = 0; k < NR_OBS_N; k++)
        out[k] = nr_calloc(cap, sizeof(uint32_t));
    while (!atomic_load(t->stop)) {
        size_t n = nr_obs_collect(t->o, 0, out);
        t->seen += n;
        for (size_t i = 0; i < n; i++)
            for (uint32_t k = 1; k < NR_OBS_N; k++)
                t->bad += out[k][i] != (out[0][i] ^ k);
    }
    for (int k = 0; k < NR_OBS_N; k++)
        free(out[k]);
    return NULL;
}

/* Writers on four threads and a reader: every observation read is whole. */
NR_TEST(obs_ring_concurrent_reads_are_whole)
{
    nr_obs_t *o = nr_obs_new(256);
    atomic_bool stop = false;
    obs_thread_t w[4], r = {.o = o, .stop = &stop};
    pthread_t tw[4], tr;
    pthread_create(&tr, NULL, obs_reader, &r);
    for (int i = 0; i < 4; i++) {
        w[i] = (obs_thread_t){.o = o, .base = (uint32_t)i << 20, .stop = &stop};
        pthread_create(&tw[i], NULL, obs_writer, &w[i]);
    }
    for (int i = 0; i < 4; i++)
        pthread_join(tw[i], NULL);
    atomic_store(&stop, true);
    pthread_join(tr, NULL);
    EXPECT_EQ_U64(r.bad, 0);
    uint32_t *out[NR_OBS_N];
    for (int k = 0; k < NR_OBS_N; k++)
        out[k] = nr_calloc(256, sizeof(uint32_t));
    EXPECT_EQ_U64(nr_obs_collect(o, 0, out), 256); /* every slot published at the end */
    for (int k = 0; k < NR_OBS_N; k++)
        free(out[k]);
    nr_obs_free(o);
}

/* ---- configuration ---- */

NR_TEST(metrics_config_texts)
{
    nr_metrics_options_t o;
    nr_metrics_options_default(&o);
    EXPECT_EQ_INT(o.port, 8002);
    EXPECT_EQ_INT(o.interval_ms, 2000);
    EXPECT_TRUE(o.cpu && o.counters && !o.summaries);
    const char *bad[] = {"summary_latencies", "=true", "summary_latencies=", "a,b=c", ""};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        char want[128];
        snprintf(want, sizeof(want),
                 "--metrics-config option format is <setting>=<value>. Got %s", bad[i]);
        EXPECT_STATUS(nr_metrics_config_set(&o, bad[i]), NR_INVALID_ARG, want);
    }
    EXPECT_OK(nr_metrics_config_set(&o, "summary_latencies=true"));
    EXPECT_TRUE(o.summaries);
    EXPECT_OK(nr_metrics_config_set(&o, "summary_latencies=True")); /* exact "true" only */
    EXPECT_FALSE(o.summaries);
    EXPECT_OK(nr_metrics_config_set(&o, "counter_latencies=0")); /* exact "false" only */
    EXPECT_TRUE(o.counters);
    EXPECT_OK(nr_metrics_config_set(&o, "counter_latencies=false"));
    EXPECT_FALSE(o.counters);
    EXPECT_OK(nr_metrics_config_set(&o, "histogram_latencies=true")); /* not in 2.51: ignored */
    EXPECT_OK(nr_metrics_config_set(&o, "summary_quantiles=0.1:0.01,x=y"));
    EXPECT_STREQ(o.quantiles, "0.1:0.01,x=y");
}

NR_TEST(summary_quantiles)
{
    size_t n;
    nr_metrics_quantile_t *q = nr_metrics_parse_quantiles(NULL, &n);
    ASSERT_EQ_U64(n, 5);
    EXPECT_EQ_DBL(q[0].q, 0.5);
    EXPECT_EQ_DBL(q[0].err, 0.05);
    EXPECT_EQ_DBL(q[4].q, 0.999);
    EXPECT_EQ_DBL(q[4].err, 0.001);
    free(q);
    q = nr_metrics_parse_quantiles("0.25:0.1,bad,0.75:x, 0.9:0.01", &n);
    ASSERT_EQ_U64(n, 2);
    EXPECT_EQ_DBL(q[0].q, 0.25);
    EXPECT_EQ_DBL(q[1].q, 0.9);
    EXPECT_EQ_DBL(q[1].err, 0.01);
    free(q);
    q = nr_metrics_parse_quantiles("nothing", &n); /* no valid pair: the defaults */
    EXPECT_EQ_U64(n, 5);
    free(q);
}

/* ---- CPU ---- */

NR_TEST(proc_parsers)
{
    uint64_t busy, idle, total, used;
    const char *stat = "cpu  100 20 30 1000 50 5 6 7 0 0\ncpu0 1 2 3 4 5 6 7 8 0 0\nintr 1\n";
    ASSERT_TRUE(nr_metrics_parse_stat(stat, &busy, &idle));
    EXPECT_EQ_U64(busy, 100 + 20 + 30 + 5 + 6 + 7);
    EXPECT_EQ_U64(idle, 1000 + 50);
    EXPECT_FALSE(nr_metrics_parse_stat("cpu0 1 2 3 4\n", &busy, &idle));
    EXPECT_EQ_U64(busy, 0);
    const char *mem = "MemTotal:       24683568 kB\nMemFree:        1 kB\n"
                      "MemAvailable:   24110000 kB\n";
    ASSERT_TRUE(nr_metrics_parse_meminfo(mem, &total, &used));
    EXPECT_EQ_U64(total, 24683568ull * 1024);
    EXPECT_EQ_U64(used, (24683568ull - 24110000ull) * 1024);
    EXPECT_FALSE(nr_metrics_parse_meminfo("MemTotal: 5 kB\n", &total, &used));
    EXPECT_EQ_U64(total, 0);
    EXPECT_EQ_DBL(nr_metrics_cpu_util(100, 900, 110, 990), 0.1);
    EXPECT_EQ_DBL(nr_metrics_cpu_util(100, 900, 90, 990), 0); /* a counter going back: 0 */
    EXPECT_TRUE(isnan(nr_metrics_cpu_util(100, 900, 100, 900)));
    /* the poller's first read: memory now, utilization 0 */
    nr_metrics_cpu_t *c = nr_metrics_cpu_start(5);
    double util;
    nr_metrics_cpu_read(c, &util, &total, &used);
    EXPECT_TRUE(total > 0 && used > 0 && used <= total);
    EXPECT_EQ_DBL(util, 0);
    usleep(30000);
    nr_metrics_cpu_read(c, &util, &total, &used);
    EXPECT_TRUE(isnan(util) || (util >= 0 && util <= 1));
    nr_metrics_cpu_stop(c);
}

/* ---- what the core counts (test backend) ---- */

static const char ID_CFG[] =
    "name: \"m\"\nbackend: \"onnxruntime\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} done_t;

static void on_done(nr_req_t *r, void *arg)
{
    done_t *d = arg;
    pthread_mutex_lock(&d->mu);
    d->done++;
    pthread_cond_broadcast(&d->cv);
    pthread_mutex_unlock(&d->mu);
}

static void wait_done(done_t *d, int n)
{
    pthread_mutex_lock(&d->mu);
    while (d->done < n)
        pthread_cond_wait(&d->cv, &d->mu);
    pthread_mutex_unlock(&d->mu);
}

static int32_t data[8 * 16];

static nr_req_t *req(nr_model_t *m, done_t *d, int64_t batch)
{
    nr_req_t *r = nr_req_new(m);
    int64_t dims[2] = {batch, 16};
    if (nr_req_add_input(r, "INPUT0", 6, NR_TYPE_INT32, dims, 2, data, (size_t)batch * 64))
        abort();
    r->batch_size = (uint64_t)batch;
    r->t_start_ns = nr_now_ns();
    r->done = on_done;
    r->done_arg = d;
    return r;
}

static nr_stats_snap_t snap(nr_model_t *m)
{
    nr_stats_snap_t s;
    nr_stats_snapshot(&m->stats, &s);
    nr_stats_snap_free(&s);
    return s;
}

/* Queue full (REJECTED, nothing else moves), the pending count while
 * requests wait, a request-level backend failure (BACKEND, an execution
 * without inferences), and failures always summing to `fail`. */
NR_TEST(core_counts_by_reason)
{
    char cfg[1024];
    snprintf(cfg, sizeof(cfg), "%sdynamic_batching { default_queue_policy { max_queue_size: 2 } }",
             ID_CFG);
    nr_model_t *m = tb_load_model_text(cfg);
    ASSERT_NOT_NULL(m);
    nr_stats_enable_obs(&m->stats, 64);
    nr_stats_enable_obs(&m->stats, 64); /* once */
    done_t d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    gate_reset(true);
    nr_req_t *r[5];
    r[0] = req(m, &d, 2);
    ASSERT_OK(nr_model_submit(m, r[0]));
    wait_execs(1, 1); /* r0 executes, held */
    r[1] = req(m, &d, 1);
    r[2] = req(m, &d, 3);
    ASSERT_OK(nr_model_submit(m, r[1]));
    ASSERT_OK(nr_model_submit(m, r[2]));
    EXPECT_EQ_U64(nr_sched_queued(m->sched), 2); /* the pending count */
    r[3] = req(m, &d, 1);
    EXPECT_STATUS(nr_model_submit(m, r[3]), NR_UNAVAILABLE,
                  "[request id: <id_unknown>] Exceeds maximum queue size");
    nr_stats_snap_t s = snap(m);
    EXPECT_EQ_U64(s.failure[NR_FAIL_REJECTED], 1);
    EXPECT_EQ_U64(s.fail.count, 1);
    EXPECT_EQ_U64(s.execution_count, 0);
    gate_open_all();
    wait_done(&d, 3);
    EXPECT_EQ_U64(nr_sched_queued(m->sched), 0);
    s = snap(m);
    EXPECT_EQ_U64(s.success.count, 3);
    EXPECT_EQ_U64(s.inference_count, 6);
    EXPECT_EQ_U64(s.execution_count, 2); /* r0, then r1 + r2 batched */
    /* a request-level failure in the backend: executed, not inferred */
    pthread_mutex_lock(&tb_mu);
    tb_fail_items = true;
    pthread_mutex_unlock(&tb_mu);
    r[4] = req(m, &d, 2);
    ASSERT_OK(nr_model_submit(m, r[4]));
    wait_done(&d, 4);
    pthread_mutex_lock(&tb_mu);
    tb_fail_items = false;
    pthread_mutex_unlock(&tb_mu);
    EXPECT_STATUS(r[4]->status, NR_INVALID_ARG, "test backend failure");
    r[4]->status = NULL;
    s = snap(m);
    EXPECT_EQ_U64(s.failure[NR_FAIL_BACKEND], 1);
    EXPECT_EQ_U64(s.failure[NR_FAIL_REJECTED], 1);
    EXPECT_EQ_U64(s.failure[NR_FAIL_CANCELED] + s.failure[NR_FAIL_OTHER], 0);
    EXPECT_EQ_U64(s.fail.count, 2);
    EXPECT_EQ_U64(s.execution_count, 3);
    EXPECT_EQ_U64(s.inference_count, 6);
    EXPECT_EQ_U64(s.success.count, 3);
    /* the observations: one per successful request */
    nr_obs_t *obs = atomic_load(&m->stats.obs);
    uint32_t a[NR_OBS_N][64];
    uint32_t *out[NR_OBS_N] = {a[0], a[1], a[2], a[3], a[4]};
    EXPECT_EQ_U64(nr_obs_collect(obs, 0, out), 3);
    for (int i = 0; i < 5; i++)
        nr_req_free(r[i]);
    unload_model(m);
}

/* A queue timeout under REJECT: "Request timeout expired", REJECTED. */
NR_TEST(core_counts_queue_timeout)
{
    char cfg[1024];
    snprintf(cfg, sizeof(cfg),
             "%sdynamic_batching { default_queue_policy { timeout_action: REJECT "
             "default_timeout_microseconds: 1000 } }",
             ID_CFG);
    nr_model_t *m;
    done_t d;
    nr_req_t *r0, *r1;
    for (int attempt = 0;; attempt++) {
        m = tb_load_model_text(cfg);
        ASSERT_NOT_NULL(m);
        d = (done_t){PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        gate_reset(true);
        r0 = req(m, &d, 1);
        r1 = req(m, &d, 1);
        ASSERT_OK(nr_model_submit(m, r0));
        /* r0 has the 1 ms timeout too: on a busy machine the instance may pick it up too late
         * and reject it (a hang here before); then again, on a fresh model */
        for (;;) {
            pthread_mutex_lock(&d.mu);
            int done = d.done;
            pthread_mutex_unlock(&d.mu);
            if (nexec() > 0 || done > 0)
                break;
            usleep(200);
        }
        if (nexec() > 0)
            break;
        nr_req_free(r0);
        nr_req_free(r1);
        unload_model(m);
        ASSERT_TRUE(attempt < 100);
    }
    wait_execs(1, 1);
    ASSERT_OK(nr_model_submit(m, r1));
    usleep(5000); /* r1's timeout passes while r0 runs */
    gate_open_all();
    wait_done(&d, 2);
    EXPECT_STATUS(r1->status, NR_UNAVAILABLE, "Request timeout expired");
    r1->status = NULL;
    nr_stats_snap_t s = snap(m);
    EXPECT_EQ_U64(s.failure[NR_FAIL_REJECTED], 1);
    EXPECT_EQ_U64(s.fail.count, 1);
    EXPECT_EQ_U64(s.success.count, 1);
    EXPECT_EQ_U64(s.execution_count, 1);
    nr_req_free(r0);
    nr_req_free(r1);
    unload_model(m);
}

/* ---- a real repository over the metrics port ---- */

static bool copy_file(const char *from, const char *to)
{
    FILE *in = fopen(from, "rb"), *out = in ? fopen(to, "wb") : NULL;
    char buf[65536];
    size_t n;
    bool ok = in && out;
    while (ok && (n = fread(buf, 1, sizeof(buf), in)) > 0)
        ok = fwrite(buf, 1, n, out) == n;
    if (in)
        fclose(in);
    if (out)
        fclose(out);
    return ok;
}

static void write_model(const char *root, const char *name, const char *onnx)
{
    char *dir = nr_asprintf("%s/%s/1", root, name);
    char *parent = nr_asprintf("%s/%s", root, name);
    mkdir(parent, 0755);
    mkdir(dir, 0755);
    char *cfg = nr_asprintf("%s/config.pbtxt", parent);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "name: \"%s\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
               "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
               "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n",
            name);
    fclose(f);
    const char *models = getenv("NR_TEST_ORT_MODELS");
    char *from = nr_asprintf("%s/%s.onnx", models ? models : "tests/unit/models", onnx);
    char *to = nr_asprintf("%s/model.onnx", dir);
    if (!copy_file(from, to))
        fprintf(stderr, "cannot copy %s\n", from);
    free(from), free(to), free(cfg), free(dir), free(parent);
}

/* One HTTP/1.0 exchange with 127.0.0.1:port; returns the whole answer. */
static char *http(int port, const char *method, const char *path)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return nr_strdup("");
    }
    char *q = nr_asprintf("%s %s HTTP/1.0\r\nHost: x\r\n\r\n", method, path);
    if (write(fd, q, strlen(q)) < 0)
        q[0] = '\0';
    free(q);
    nr_buf_t b;
    nr_buf_init(&b);
    char buf[4096];
    ssize_t n;
    while ((n = read(fd, buf, sizeof(buf))) > 0)
        nr_buf_append(&b, buf, (size_t)n);
    close(fd);
    nr_buf_putc(&b, '\0');
    return b.data;
}

NR_TEST(scrape_of_a_repository)
{
    char root[] = "/tmp/nereid-test-metrics-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(root));
    write_model(root, "good", "identity_fp32");
    write_model(root, "broken", "broken");
    const char *paths[] = {root};
    nr_repo_options_t ro = {.paths = paths, .n_paths = 1, .autocomplete = true, .cpu_count = 1};
    nr_repo_t *repo = NULL;
    ASSERT_OK(nr_repo_create(&ro, &repo));
    nr_server_options_t so = {.id = "triton", .version = "2.51.0", .strict_readiness = true};
    nr_server_t *core = nr_server_new(&so, repo);
    nr_metrics_options_t o;
    nr_metrics_options_default(&o);
    o.address = "127.0.0.1";
    o.port = 0;
    o.cpu = false;
    ASSERT_OK(nr_metrics_config_set(&o, "summary_latencies=true"));
    nr_metrics_server_t *ms = NULL;
    ASSERT_OK(nr_metrics_start(&o, core, &ms));
    int port = nr_metrics_port(ms);
    EXPECT_TRUE(port > 0);
    char *ans = http(port, "GET", "/metrics");
    EXPECT_TRUE(strncmp(ans, "HTTP/1.0 200", 12) == 0 || strncmp(ans, "HTTP/1.1 200", 12) == 0);
    EXPECT_NOT_NULL(strstr(ans, "Content-Type: text/plain; charset=utf-8\r\n"));
    EXPECT_NOT_NULL(strstr(ans, "\r\n\r\n# HELP nv_inference_request_success "));
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_request_success{model=\"good\",version=\"1\"} 0\n"));
    EXPECT_EQ_U64(count_lines(ans, "model=\"broken\""), 4);
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_request_failure{model=\"broken\",reason=\"OTHER\","
                                "version=\"1\"} 0\n"));
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_pending_request_count{model=\"good\",version=\"1\"} 0"));
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_request_summary_us{model=\"good\",version=\"1\","
                                "quantile=\"0.999\"} Nan\n"));
    EXPECT_NULL(strstr(ans, "nv_cpu_utilization"));
    free(ans);
    ans = http(port, "GET", "/metrics/?name=x");
    EXPECT_NOT_NULL(strstr(ans, " 200 "));
    free(ans);
    ans = http(port, "GET", "/metricsx");
    EXPECT_NOT_NULL(strstr(ans, " 404 "));
    EXPECT_NOT_NULL(strstr(ans, "\r\n\r\n{\"error\":\"Not Found\"}"));
    free(ans);
    ans = http(port, "POST", "/metrics");
    EXPECT_NOT_NULL(strstr(ans, " 405 "));
    EXPECT_NOT_NULL(strstr(ans, "\r\n\r\n{\"error\":\"Method Not Allowed\"}"));
    free(ans);
    /* the same counters as the statistics API: one inference moves both */
    nr_model_t *m = NULL;
    ASSERT_OK(nr_kserve_model(core, "good", 4, -1, &m));
    float x[6] = {1, 2, 3, 4, 5, 6};
    int64_t dims[2] = {2, 3};
    nr_req_t *r = nr_req_new(m);
    ASSERT_OK(nr_req_add_input(r, "INPUT0", 6, NR_TYPE_FP32, dims, 2, x, sizeof(x)));
    done_t d = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    r->t_start_ns = nr_now_ns();
    r->done = on_done;
    r->done_arg = &d;
    ASSERT_OK(nr_model_submit(m, r));
    wait_done(&d, 1);
    ASSERT_NULL(r->status);
    nr_req_free(r);
    nr_model_release(m); /* the lookup's reference: the server can unload it at the end */
    ans = http(port, "GET", "/metrics");
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_request_success{model=\"good\",version=\"1\"} 1\n"));
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_count{model=\"good\",version=\"1\"} 2\n"));
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_exec_count{model=\"good\",version=\"1\"} 1\n"));
    EXPECT_NOT_NULL(strstr(ans, "nv_inference_request_summary_us_count{model=\"good\",version=\"1\"} 1\n"));
    EXPECT_NULL(strstr(ans, "nv_inference_request_summary_us{model=\"good\",version=\"1\","
                            "quantile=\"0.5\"} Nan"));
    free(ans);
    nr_metrics_quiesce(ms);
    nr_metrics_stop(ms);
    nr_server_free(core);
    char *cmd = nr_asprintf("rm -rf '%s'", root);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", root);
    free(cmd);
}

NR_TEST_MAIN()
