/* metrics_render.c - the Prometheus text of one scrape, as Triton 2.51
 * (prometheus-cpp 1.x) writes it: "# HELP" and "# TYPE" per family, then one
 * line per series; families in registration order within each type, and the
 * types in the order prometheus-cpp collects them (counters, gauges, histograms,
 * summaries), the models' own families (custom_metrics.h) after nereid's of their type; a
 * family without series is not written at all. Labels are
 * printed sorted (model < reason < version); a summary's quantile label comes
 * last. Values are doubles printed shortest-round-trip (std::to_chars).
 */
#include "metrics_int.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- numbers ------------------------------------------------------------------ */

/* The shortest "%.*e" digits of v that read back as v: digits (no point) and
 * the decimal exponent of the first one. v finite and > 0. */
static size_t shortest_digits(double v, char *digits, int *exp10)
{
    char tmp[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(tmp, sizeof(tmp), "%.*e", p - 1, v);
        if (strtod(tmp, NULL) == v || p == 17)
            break;
    }
    size_t n = 0;
    const char *s = tmp;
    for (; *s && *s != 'e'; s++)
        if (*s >= '0' && *s <= '9')
            digits[n++] = *s;
    *exp10 = *s == 'e' ? atoi(s + 1) : 0;
    while (n > 1 && digits[n - 1] == '0') /* "%.0e" never pads, but 17 digits may */
        n--;
    digits[n] = '\0';
    return n;
}

void nr_metrics_put_double(nr_buf_t *out, double v)
{
    if (isnan(v)) {
        nr_buf_puts(out, "Nan");
        return;
    }
    if (isinf(v)) {
        nr_buf_puts(out, v > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (signbit(v)) {
        nr_buf_putc(out, '-');
        v = -v;
    }
    if (v == 0) {
        nr_buf_putc(out, '0');
        return;
    }
    char d[24];
    int e;
    size_t n = shortest_digits(v, d, &e);
    /* fixed notation */
    char fixed[400];
    size_t f = 0;
    if (e >= (int)n - 1) { /* an integer: to_chars writes its exact digits (e + 1 of them) */
        f = (size_t)snprintf(fixed, sizeof(fixed), "%.0f", v);
    } else if (e >= 0) {
        memcpy(fixed, d, (size_t)e + 1);
        f = (size_t)e + 1;
        fixed[f++] = '.';
        memcpy(fixed + f, d + e + 1, n - (size_t)e - 1);
        f += n - (size_t)e - 1;
    } else {
        fixed[f++] = '0';
        fixed[f++] = '.';
        for (int z = 0; z < -e - 1; z++)
            fixed[f++] = '0';
        memcpy(fixed + f, d, n);
        f += n;
    }
    /* exponent notation, as printf's %e writes the exponent (two digits at least) */
    char sci[48];
    size_t k = 0;
    sci[k++] = d[0];
    if (n > 1) {
        sci[k++] = '.';
        memcpy(sci + k, d + 1, n - 1);
        k += n - 1;
    }
    k += (size_t)snprintf(sci + k, sizeof(sci) - k, "e%c%02d", e < 0 ? '-' : '+', abs(e));
    if (k < f) /* a tie goes to fixed notation */
        nr_buf_append(out, sci, k);
    else
        nr_buf_append(out, fixed, f);
}

static void put_u64(nr_buf_t *out, uint64_t v)
{
    nr_metrics_put_double(out, (double)v); /* Triton's counters are doubles */
}

/* ---- labels and lines ------------------------------------------------------------ */

static void put_label(nr_buf_t *out, const char *name, const char *value, bool first)
{
    if (!first)
        nr_buf_putc(out, ',');
    nr_buf_puts(out, name);
    nr_buf_puts(out, "=\"");
    for (const char *p = value; *p; p++) {
        if (*p == '\\')
            nr_buf_puts(out, "\\\\");
        else if (*p == '"')
            nr_buf_puts(out, "\\\"");
        else if (*p == '\n')
            nr_buf_puts(out, "\\n");
        else
            nr_buf_putc(out, *p);
    }
    nr_buf_putc(out, '"');
}

static void family(nr_buf_t *out, const char *name, const char *type, const char *help)
{
    nr_buf_printf(out, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

/* name[suffix]{model=..[,reason=..],version=..[,quantile=q]} */
static void series(nr_buf_t *out, const char *name, const char *suffix, const nr_metrics_row_t *r,
                   const char *reason, const double *quantile)
{
    nr_buf_puts(out, name);
    if (suffix)
        nr_buf_puts(out, suffix);
    nr_buf_putc(out, '{');
    put_label(out, "model", r->model, true);
    if (reason)
        put_label(out, "reason", reason, false);
    put_label(out, "version", r->version, false);
    if (quantile) {
        nr_buf_puts(out, ",quantile=\"");
        nr_metrics_put_double(out, *quantile);
        nr_buf_putc(out, '"');
    }
    nr_buf_puts(out, "} ");
}

static bool any_ready(const nr_metrics_view_t *v)
{
    for (size_t i = 0; i < v->n_rows; i++)
        if (v->rows[i].ready)
            return true;
    return false;
}

/* ---- the models' own families (custom_metrics.h) ---------------------------------- */

/* name[suffix]{labels[,le="bound"]} (no braces without a label) */
static void custom_series(nr_buf_t *out, const char *name, const char *suffix,
                          const nr_cmetric_snap_t *m, const double *le, bool inf)
{
    nr_buf_puts(out, name);
    nr_buf_puts(out, suffix);
    if (m->n_labels > 0 || le != NULL || inf) {
        nr_buf_putc(out, '{');
        for (size_t i = 0; i < m->n_labels; i++)
            put_label(out, m->labels[2 * i], m->labels[2 * i + 1], i == 0);
        if (le != NULL || inf) {
            nr_buf_puts(out, m->n_labels > 0 ? ",le=\"" : "le=\"");
            if (inf)
                nr_buf_puts(out, "+Inf");
            else
                nr_metrics_put_double(out, *le);
            nr_buf_putc(out, '"');
        }
        nr_buf_putc(out, '}');
    }
    nr_buf_putc(out, ' ');
}

/* Every custom family of `kind`, as prometheus-cpp writes it: HELP only when there is a
 * description; a histogram's series as _count, _sum, then its cumulative buckets. */
static void custom_families(nr_buf_t *out, const nr_metrics_view_t *v, int kind)
{
    static const char *const types[] = {"counter", "gauge", "histogram"};
    for (size_t k = 0; k < v->n_custom; k++) {
        const nr_cfamily_snap_t *f = &v->custom[k];
        if (f->kind != kind)
            continue;
        if (f->help[0] != '\0')
            nr_buf_printf(out, "# HELP %s %s\n", f->name, f->help);
        nr_buf_printf(out, "# TYPE %s %s\n", f->name, types[kind]);
        for (size_t i = 0; i < f->n_series; i++) {
            const nr_cmetric_snap_t *m = &f->series[i];
            if (kind != NR_CMETRIC_HISTOGRAM) {
                custom_series(out, f->name, "", m, NULL, false);
                nr_metrics_put_double(out, m->value);
                nr_buf_putc(out, '\n');
                continue;
            }
            custom_series(out, f->name, "_count", m, NULL, false);
            put_u64(out, m->count);
            nr_buf_putc(out, '\n');
            custom_series(out, f->name, "_sum", m, NULL, false);
            nr_metrics_put_double(out, m->sum);
            nr_buf_putc(out, '\n');
            for (size_t b = 0; b <= m->n_buckets; b++) {
                custom_series(out, f->name, "_bucket", m, b < m->n_buckets ? &m->bounds[b] : NULL,
                              b == m->n_buckets);
                put_u64(out, m->cumulative[b]);
                nr_buf_putc(out, '\n');
            }
        }
    }
}

/* ---- families ------------------------------------------------------------------- */

typedef enum {
    F_SUCCESS, F_COUNT, F_EXEC, F_PENDING, F_DURATION,
    F_CACHE_HITS, F_CACHE_MISSES, F_CACHE_HIT_US, F_CACHE_MISS_US, /* cached rows only */
} field_t;

static uint64_t field(const nr_metrics_row_t *r, field_t f, int k)
{
    switch (f) {
    case F_SUCCESS: return r->success;
    case F_COUNT: return r->inferences;
    case F_EXEC: return r->executions;
    case F_PENDING: return r->pending;
    case F_DURATION: return r->us[k];
    case F_CACHE_HITS: return r->cache_hits;
    case F_CACHE_MISSES: return r->cache_misses;
    case F_CACHE_HIT_US: return r->cache_hit_us;
    case F_CACHE_MISS_US: return r->cache_miss_us;
    }
    return 0;
}

/* A per-model family over the READY versions. */
static void model_family(nr_buf_t *out, const nr_metrics_view_t *v, const char *name,
                         const char *type, const char *help, field_t f, int k)
{
    bool cache = f >= F_CACHE_HITS, any = false;
    for (size_t i = 0; i < v->n_rows && !any; i++)
        any = v->rows[i].ready && (!cache || v->rows[i].cached);
    if (!any)
        return;
    family(out, name, type, help);
    for (size_t i = 0; i < v->n_rows; i++) {
        const nr_metrics_row_t *r = &v->rows[i];
        if (!r->ready || (cache && !r->cached))
            continue;
        series(out, name, NULL, r, NULL, NULL);
        put_u64(out, field(r, f, k));
        nr_buf_putc(out, '\n');
    }
}

/* Failures: every version whose load was attempted, READY or not, four
 * reasons each (Triton creates them with the version and never removes them). */
static void failure_family(nr_buf_t *out, const nr_metrics_view_t *v)
{
    static const char name[] = "nv_inference_request_failure";
    if (v->n_rows == 0)
        return;
    family(out, name, "counter", "Number of failed inference requests, all batch sizes");
    for (size_t i = 0; i < v->n_rows; i++) {
        const nr_metrics_row_t *r = &v->rows[i];
        for (int reason = 0; reason < NR_FAIL_N; reason++) {
            series(out, name, NULL, r, nr_fail_reason_name((nr_fail_reason_t)reason), NULL);
            put_u64(out, r->ready ? r->failure[reason] : 0);
            nr_buf_putc(out, '\n');
        }
    }
}

static void gauge(nr_buf_t *out, const char *name, const char *help, double value)
{
    family(out, name, "gauge", help);
    nr_buf_puts(out, name);
    nr_buf_putc(out, ' ');
    nr_metrics_put_double(out, value);
    nr_buf_putc(out, '\n');
}

static const struct {
    const char *counter, *counter_help, *summary, *summary_help;
} durations[NR_OBS_N] = {
    [NR_OBS_REQUEST] = {"nv_inference_request_duration_us",
                        "Cumulative inference request duration in microseconds (includes cached "
                        "requests)",
                        "nv_inference_request_summary_us",
                        "Summary of inference request duration in microseconds (includes cached "
                        "requests)"},
    [NR_OBS_QUEUE] = {"nv_inference_queue_duration_us",
                      "Cumulative inference queuing duration in microseconds (includes cached "
                      "requests)",
                      "nv_inference_queue_summary_us",
                      "Summary of inference queuing duration in microseconds (includes cached "
                      "requests)"},
    /* Triton's compute summaries repeat the counters' HELP texts (sic) */
    [NR_OBS_COMPUTE_INPUT] = {"nv_inference_compute_input_duration_us",
                              "Cumulative compute input duration in microseconds (does not "
                              "include cached requests)",
                              "nv_inference_compute_input_summary_us",
                              "Cumulative compute input duration in microseconds (does not "
                              "include cached requests)"},
    [NR_OBS_COMPUTE_INFER] = {"nv_inference_compute_infer_duration_us",
                              "Cumulative compute inference duration in microseconds (does not "
                              "include cached requests)",
                              "nv_inference_compute_infer_summary_us",
                              "Cumulative compute inference duration in microseconds (does not "
                              "include cached requests)"},
    [NR_OBS_COMPUTE_OUTPUT] = {"nv_inference_compute_output_duration_us",
                               "Cumulative inference compute output duration in microseconds "
                               "(does not include cached requests)",
                               "nv_inference_compute_output_summary_us",
                               "Cumulative inference compute output duration in microseconds "
                               "(does not include cached requests)"},
};

/* A summary: _count and _sum (cumulative: the success count and the duration
 * counter), then one line per quantile over the recent observations. */
static void summary_family(nr_buf_t *out, const nr_metrics_view_t *v, int k)
{
    const char *name = durations[k].summary;
    if (!any_ready(v))
        return;
    family(out, name, "summary", durations[k].summary_help);
    for (size_t i = 0; i < v->n_rows; i++) {
        const nr_metrics_row_t *r = &v->rows[i];
        if (!r->ready)
            continue;
        series(out, name, "_count", r, NULL, NULL);
        nr_buf_u64(out, r->success);
        nr_buf_putc(out, '\n');
        series(out, name, "_sum", r, NULL, NULL);
        put_u64(out, r->us[k]);
        nr_buf_putc(out, '\n');
        for (size_t q = 0; q < v->n_quantiles; q++) {
            series(out, name, NULL, r, NULL, &v->quantiles[q].q);
            nr_metrics_put_double(out, r->quantile ? r->quantile[(size_t)k * v->n_quantiles + q]
                                                   : NAN);
            nr_buf_putc(out, '\n');
        }
    }
}

void nr_metrics_render(nr_buf_t *out, const nr_metrics_view_t *v)
{
    model_family(out, v, "nv_inference_request_success", "counter",
                 "Number of successful inference requests, all batch sizes", F_SUCCESS, 0);
    failure_family(out, v);
    model_family(out, v, "nv_inference_count", "counter",
                 "Number of inferences performed (does not include cached requests)", F_COUNT, 0);
    model_family(out, v, "nv_inference_exec_count", "counter",
                 "Number of model executions performed (does not include cached requests)",
                 F_EXEC, 0);
    for (int k = 0; v->counters && k < NR_OBS_N; k++)
        model_family(out, v, durations[k].counter, "counter", durations[k].counter_help,
                     F_DURATION, k);
    /* the response cache's, for the models that use it (Triton's names) */
    model_family(out, v, "nv_cache_num_hits_per_model", "counter",
                 "Number of cache hits per model", F_CACHE_HITS, 0);
    model_family(out, v, "nv_cache_num_misses_per_model", "counter",
                 "Number of cache misses per model", F_CACHE_MISSES, 0);
    model_family(out, v, "nv_cache_hit_duration_per_model", "counter",
                 "Total cache hit duration per model, in microseconds", F_CACHE_HIT_US, 0);
    model_family(out, v, "nv_cache_miss_duration_per_model", "counter",
                 "Total cache miss (insert+lookup) duration per model, in microseconds",
                 F_CACHE_MISS_US, 0);
    custom_families(out, v, NR_CMETRIC_COUNTER);
    model_family(out, v, "nv_inference_pending_request_count", "gauge",
                 "Instantaneous number of pending requests awaiting execution per-model.",
                 F_PENDING, 0);
    gauge(out, "nv_pinned_memory_pool_total_bytes", "Pinned memory pool total memory size, in bytes",
          (double)v->pinned_total);
    gauge(out, "nv_pinned_memory_pool_used_bytes", "Pinned memory pool used memory size, in bytes",
          (double)v->pinned_used);
    if (v->cpu) {
        gauge(out, "nv_cpu_utilization", "CPU utilization rate [0.0 - 1.0]", v->cpu_util);
        gauge(out, "nv_cpu_memory_total_bytes", "CPU total memory (RAM), in bytes",
              (double)v->mem_total);
        gauge(out, "nv_cpu_memory_used_bytes", "CPU used memory (RAM), in bytes",
              (double)v->mem_used);
    }
    custom_families(out, v, NR_CMETRIC_GAUGE);
    custom_families(out, v, NR_CMETRIC_HISTOGRAM);
    for (int k = 0; v->summaries && k < NR_OBS_N; k++)
        summary_family(out, v, k);
}
