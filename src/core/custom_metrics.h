/* custom_metrics.h - metric families a model defines (Triton's custom metrics: the Python
 * backend's pb_utils.MetricFamily / Metric, TRITONSERVER_MetricFamilyNew and friends), shown on
 * the metrics endpoint beside nereid's own.
 *
 * One registry for the process, as Triton's (one Prometheus registry): a family is found by
 * its name, so families of the same name and kind made by several instances or models are one
 * family (the first description stays), and a metric is found by its labels, so two metrics
 * with the same labels share their value. Families and metrics are reference counted: each
 * nr_cmetric_family_new / nr_cmetric_new takes a reference its caller gives back with the
 * matching delete; a metric leaves the registry with its last reference, a family once it has
 * no reference and no metric. Values are doubles; a histogram keeps its bucket counts, sum and
 * count.
 *
 * Threads: any; one mutex guards the registry and every value (taken briefly, never across a
 * call out).
 */
#ifndef NR_CUSTOM_METRICS_H
#define NR_CUSTOM_METRICS_H

#include "../common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* pb_utils.MetricFamily.COUNTER, GAUGE, HISTOGRAM */
typedef enum {
    NR_CMETRIC_COUNTER = 0,
    NR_CMETRIC_GAUGE = 1,
    NR_CMETRIC_HISTOGRAM = 2,
} nr_cmetric_kind_t;
typedef enum {
    NR_CMETRIC_INCREMENT,
    NR_CMETRIC_SET,
    NR_CMETRIC_OBSERVE,
    NR_CMETRIC_VALUE,
} nr_cmetric_op_t;

typedef struct nr_cfamily_s nr_cfamily_t;
typedef struct nr_cmetric_s nr_cmetric_t;

/* The family `name` (made when new). INVALID_ARG for a name Prometheus refuses ("Invalid metric
 * name"), a kind out of range ("Unsupported kind passed to MetricFamily constructor."), or a
 * name already used by a family of another kind ("Family name already exists with different
 * type"). */
NR_MUST_CHECK nr_status_t *nr_cfamily_new(const char *name, const char *help, int kind,
                                          nr_cfamily_t **out);
void nr_cfamily_delete(nr_cfamily_t *f);
int nr_cfamily_kind(const nr_cfamily_t *f);

/* The metric of family f with these labels (labels[2i] = key, labels[2i + 1] = value; any
 * order): made when new, else shared. A histogram needs `buckets` (strictly increasing, may be
 * empty); the others take none. Texts: Triton's core's and prometheus-cpp's. */
NR_MUST_CHECK nr_status_t *nr_cmetric_new(nr_cfamily_t *f, const char *const *labels,
                                          size_t n_labels, const double *buckets,
                                          size_t n_buckets, bool has_buckets, nr_cmetric_t **out);
void nr_cmetric_delete(nr_cmetric_t *m);
/* increment / set / observe `v`, or read the value into *out (VALUE); the kind's rules in
 * Triton's words (a counter only grows, a histogram is only observed, ...). */
NR_MUST_CHECK nr_status_t *nr_cmetric_op(nr_cmetric_t *m, nr_cmetric_op_t op, double v,
                                         double *out);

/* ---- what a scrape shows ---------------------------------------------------------------- */
typedef struct {
    char **labels; /* 2 * n_labels strings, sorted by key */
    size_t n_labels;
    double value;          /* counter, gauge */
    double sum;            /* histogram */
    uint64_t count;
    double *bounds;        /* n_buckets upper bounds */
    uint64_t *cumulative;  /* n_buckets + 1 cumulative counts (the last: +Inf) */
    size_t n_buckets;
} nr_cmetric_snap_t;

typedef struct {
    char *name, *help;
    int kind;
    nr_cmetric_snap_t *series;
    size_t n_series;
} nr_cfamily_snap_t;

/* The families that hold at least one metric, in the order they were made. */
void nr_cmetrics_snapshot(nr_cfamily_snap_t **out, size_t *n);
void nr_cmetrics_snapshot_free(nr_cfamily_snap_t *s, size_t n);

#endif
