/* metrics_int.h - what the metrics frontend's files share: the view a scrape
 * renders (metrics_collect.c builds it from the core, metrics_render.c turns
 * it into text), the summary quantiles (metrics_config.c), and the CPU poller
 * (metrics_cpu.c). Nothing here is seen outside frontends/metrics/.
 */
#ifndef NR_METRICS_INT_H
#define NR_METRICS_INT_H

#include "../../common/buf.h"
#include "../../core/custom_metrics.h"
#include "../../core/stats.h"
#include "metrics_server.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Observations kept per model version for the summaries: quantiles cover the
 * last 60 s, or the last this many requests when more arrived (320 KiB of
 * ring per READY version, allocated only with summary_latencies=true). */
#define NR_METRICS_SUMMARY_OBS 8192
#define NR_METRICS_SUMMARY_WINDOW_NS (60ull * 1000000000ull)
/* --pinned-memory-pool-byte-size's default, reported as Triton reports it
 * without a GPU (nereid has no pinned pool: nothing is ever used from it). */
#define NR_METRICS_PINNED_TOTAL 268435456ull

typedef struct {
    double q, err;
} nr_metrics_quantile_t;

/* One model version's series. */
typedef struct {
    char *model, *version; /* label values as they are (escaped when printed); owned */
    bool ready;                  /* false: failed to load; only its failure series exist */
    uint64_t success, inferences, executions, pending;
    bool cached; /* response_cache on: the four nv_cache_*_per_model series */
    uint64_t cache_hits, cache_misses, cache_hit_us, cache_miss_us;
    uint64_t failure[NR_FAIL_N];
    uint64_t us[NR_OBS_N]; /* cumulative durations in us: the statistics' ns sums / 1000 */
    /* with summaries: [k * n_quantiles + i] = quantile i of kind k (NaN = no
     * observation in the window); owned by the view */
    double *quantile;
} nr_metrics_row_t;

/* Everything one scrape prints. */
typedef struct {
    nr_metrics_row_t *rows;
    size_t n_rows;
    bool counters;  /* the five cumulative duration counters */
    bool summaries; /* the five summaries */
    const nr_metrics_quantile_t *quantiles;
    size_t n_quantiles;
    uint64_t pinned_total, pinned_used;
    bool cpu; /* the three nv_cpu_* families */
    double cpu_util;
    uint64_t mem_total, mem_used;
    nr_cfamily_snap_t *custom; /* the models' own families (custom_metrics.h) */
    size_t n_custom;
} nr_metrics_view_t;

/* ---- metrics_render.c ------------------------------------------------------ */

/* Appends the Prometheus text of `v`: families in Triton's order (counters,
 * then gauges, then summaries), a family without series left out entirely. */
void nr_metrics_render(nr_buf_t *out, const nr_metrics_view_t *v);
/* A value as prometheus-cpp prints it (std::to_chars, shortest round trip,
 * fixed or exponent notation whichever is shorter): 0, 0.005, 25275973632,
 * 1e+05, 1.2345e-07; NaN "Nan", infinities "+Inf" / "-Inf". */
void nr_metrics_put_double(nr_buf_t *out, double v);

/* ---- metrics_config.c ------------------------------------------------------- */

/* summary_quantiles text -> quantiles (owned array, *n entries). Pairs
 * without ':' or with a non-number are skipped with Triton's LOG_ERROR; when
 * none is left (or text is NULL) Triton's defaults: 0.5:0.05, 0.9:0.01,
 * 0.95:0.001, 0.99:0.001, 0.999:0.001. */
nr_metrics_quantile_t *nr_metrics_parse_quantiles(const char *text, size_t *n);

/* ---- metrics_collect.c ------------------------------------------------------ */

/* The view of every model version of the repository, in repository order
 * (name, then version): READY versions with their statistics snapshot, the
 * queued count and, with summaries, the quantiles of their recent
 * observations; versions that failed to load as failure-only rows. */
void nr_metrics_collect(nr_server_t *core, bool summaries, const nr_metrics_quantile_t *q,
                        size_t nq, nr_metrics_view_t *out);
void nr_metrics_view_free(nr_metrics_view_t *v);
/* Quantile q of sorted[0..n) by nearest rank; NaN when n == 0. */
double nr_metrics_quantile_of(const uint32_t *sorted, size_t n, double q);

/* ---- metrics_cpu.c ------------------------------------------------------------ */

typedef struct nr_metrics_cpu_s nr_metrics_cpu_t;

/* Reads /proc once (memory now, the CPU baseline) and starts the thread that
 * polls every interval_ms. */
nr_metrics_cpu_t *nr_metrics_cpu_start(int interval_ms);
void nr_metrics_cpu_stop(nr_metrics_cpu_t *c);
/* The latest values (utilization 0 until the second poll). */
void nr_metrics_cpu_read(const nr_metrics_cpu_t *c, double *util, uint64_t *mem_total,
                         uint64_t *mem_used);

/* The parsers behind it, on the text of /proc/stat and /proc/meminfo.
 * busy = user+nice+system+irq+softirq+steal, idle = idle+iowait (Triton's
 * split) from the first "cpu " line; total = MemTotal, used = MemTotal -
 * MemAvailable, in bytes. false (values 0) when the text does not parse. */
bool nr_metrics_parse_stat(const char *text, uint64_t *busy, uint64_t *idle);
bool nr_metrics_parse_meminfo(const char *text, uint64_t *total, uint64_t *used);
/* Utilization between two polls: dbusy / (dbusy + didle), each delta
 * clamped at 0; NaN when nothing elapsed (0/0, as Triton). */
double nr_metrics_cpu_util(uint64_t busy0, uint64_t idle0, uint64_t busy1, uint64_t idle1);

#endif
