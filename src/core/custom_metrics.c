/* custom_metrics.c - the process's registry of custom metric families (custom_metrics.h): a
 * list of families in the order they were made, each with its metrics in the order they were
 * made, under one mutex. A scrape copies what it shows (nr_cmetrics_snapshot) and formats it
 * outside the lock (frontends/metrics). */
#include "custom_metrics.h"

#include "../common/alloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct nr_cmetric_s {
    nr_cfamily_t *f;
    nr_cmetric_t *next;
    int refs;
    char **labels; /* 2 * n_labels, sorted by key */
    size_t n_labels;
    double value, sum;
    uint64_t count;
    double *bounds;
    uint64_t *counts; /* n_buckets + 1 per-bucket counts (the last: above every bound) */
    size_t n_buckets;
};

struct nr_cfamily_s {
    nr_cfamily_t *next;
    char *name, *help;
    int kind;
    int refs;
    nr_cmetric_t *metrics;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static nr_cfamily_t *g_families; /* oldest first */

static const char *const kind_names[] = {"COUNTER", "GAUGE", "HISTOGRAM"};

/* Prometheus' rules: [a-zA-Z_:][a-zA-Z0-9_:]* for a metric, [a-zA-Z_][a-zA-Z0-9_]* for a label,
 * and neither may start with "__" (reserved). */
static bool valid_name(const char *s, bool metric)
{
    if (s == NULL || s[0] == '\0' || (s[0] == '_' && s[1] == '_'))
        return false;
    for (size_t i = 0; s[i] != '\0'; i++) {
        char c = s[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                  (metric && c == ':') || (i > 0 && c >= '0' && c <= '9');
        if (!ok)
            return false;
    }
    return true;
}

nr_status_t *nr_cfamily_new(const char *name, const char *help, int kind, nr_cfamily_t **out)
{
    if (kind < NR_CMETRIC_COUNTER || kind > NR_CMETRIC_HISTOGRAM)
        return nr_status_new(NR_INVALID_ARG, "Unsupported kind passed to MetricFamily "
                             "constructor.");
    if (!valid_name(name, true))
        return nr_status_new(NR_INVALID_ARG, "Invalid metric name");
    pthread_mutex_lock(&g_mu);
    nr_cfamily_t **pp = &g_families;
    for (; *pp != NULL; pp = &(*pp)->next)
        if (strcmp((*pp)->name, name) == 0)
            break;
    nr_cfamily_t *f = *pp;
    if (f != NULL && f->kind != kind) {
        pthread_mutex_unlock(&g_mu);
        return nr_status_new(NR_INVALID_ARG, "Family name already exists with different type");
    }
    if (f == NULL) { /* appended: families show in the order they were made */
        f = nr_calloc(1, sizeof(*f));
        f->name = nr_strdup(name);
        f->help = nr_strdup(help != NULL ? help : "");
        f->kind = kind;
        *pp = f;
    }
    f->refs++;
    pthread_mutex_unlock(&g_mu);
    *out = f;
    return NULL;
}

int nr_cfamily_kind(const nr_cfamily_t *f)
{
    return f->kind;
}

/* Unlinks and frees f when nothing holds it any more. g_mu held. */
static void family_drop_if_unused(nr_cfamily_t *f)
{
    if (f->refs > 0 || f->metrics != NULL)
        return;
    for (nr_cfamily_t **pp = &g_families; *pp != NULL; pp = &(*pp)->next)
        if (*pp == f) {
            *pp = f->next;
            break;
        }
    free(f->name);
    free(f->help);
    free(f);
}

void nr_cfamily_delete(nr_cfamily_t *f)
{
    if (f == NULL)
        return;
    pthread_mutex_lock(&g_mu);
    f->refs--;
    family_drop_if_unused(f);
    pthread_mutex_unlock(&g_mu);
}

static int cmp_label(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool same_labels(const nr_cmetric_t *m, char **sorted, size_t n)
{
    if (m->n_labels != n)
        return false;
    for (size_t i = 0; i < 2 * n; i++)
        if (strcmp(m->labels[i], sorted[i]) != 0)
            return false;
    return true;
}

static void free_labels(char **l, size_t n)
{
    for (size_t i = 0; i < 2 * n; i++)
        free(l[i]);
    free(l);
}

nr_status_t *nr_cmetric_new(nr_cfamily_t *f, const char *const *labels, size_t n_labels,
                            const double *buckets, size_t n_buckets, bool has_buckets,
                            nr_cmetric_t **out)
{
    if (f->kind == NR_CMETRIC_HISTOGRAM && !has_buckets)
        return nr_status_new(NR_INVALID_ARG, "Bucket Boundaries not found in Metric args.");
    if (f->kind != NR_CMETRIC_HISTOGRAM && has_buckets)
        return nr_status_new(NR_INVALID_ARG, "Unexpected args found in %s Metric constructor.",
                             f->kind == NR_CMETRIC_COUNTER ? "counter" : "gauge");
    for (size_t i = 1; i < n_buckets; i++)
        if (!(buckets[i - 1] < buckets[i]))
            return nr_status_new(NR_INVALID_ARG, "Bucket Boundaries must be strictly sorted");
    /* sorted (key, value) pairs, so that the same labels in any order are one metric */
    char **sorted = nr_calloc(2 * n_labels + 1, sizeof(char *));
    for (size_t i = 0; i < n_labels; i++) {
        const char *k = labels[2 * i], *v = labels[2 * i + 1];
        if (!valid_name(k, false) || (f->kind == NR_CMETRIC_HISTOGRAM && strcmp(k, "le") == 0)) {
            free_labels(sorted, n_labels);
            return nr_status_new(NR_INVALID_ARG, "Invalid label name");
        }
        sorted[2 * i] = nr_strdup(k);
        sorted[2 * i + 1] = nr_strdup(v != NULL ? v : "");
    }
    /* pairs sort by key: each pair moves as one 2-pointer element */
    qsort(sorted, n_labels, 2 * sizeof(char *), cmp_label);
    for (size_t i = 1; i < n_labels; i++)
        if (strcmp(sorted[2 * i - 2], sorted[2 * i]) == 0) {
            free_labels(sorted, n_labels);
            return nr_status_new(NR_INVALID_ARG, "Duplicate label name '%s'", sorted[2 * i]);
        }
    pthread_mutex_lock(&g_mu);
    nr_cmetric_t **pp = &f->metrics;
    for (; *pp != NULL; pp = &(*pp)->next)
        if (same_labels(*pp, sorted, n_labels))
            break;
    nr_cmetric_t *m = *pp;
    if (m == NULL) { /* the first buckets win, as Prometheus keeps the first series */
        m = nr_calloc(1, sizeof(*m));
        m->f = f;
        m->labels = sorted;
        m->n_labels = n_labels;
        m->n_buckets = n_buckets;
        if (f->kind == NR_CMETRIC_HISTOGRAM) {
            m->bounds = nr_malloc((n_buckets ? n_buckets : 1) * sizeof(double));
            if (n_buckets)
                memcpy(m->bounds, buckets, n_buckets * sizeof(double));
            m->counts = nr_calloc(n_buckets + 1, sizeof(uint64_t));
        }
        *pp = m;
        sorted = NULL;
    }
    m->refs++;
    pthread_mutex_unlock(&g_mu);
    if (sorted != NULL)
        free_labels(sorted, n_labels);
    *out = m;
    return NULL;
}

void nr_cmetric_delete(nr_cmetric_t *m)
{
    if (m == NULL)
        return;
    pthread_mutex_lock(&g_mu);
    if (--m->refs == 0) {
        nr_cfamily_t *f = m->f;
        for (nr_cmetric_t **pp = &f->metrics; *pp != NULL; pp = &(*pp)->next)
            if (*pp == m) {
                *pp = m->next;
                break;
            }
        free_labels(m->labels, m->n_labels);
        free(m->bounds);
        free(m->counts);
        free(m);
        family_drop_if_unused(f);
    }
    pthread_mutex_unlock(&g_mu);
}

nr_status_t *nr_cmetric_op(nr_cmetric_t *m, nr_cmetric_op_t op, double v, double *out)
{
    static const char *const op_names[] = {"Increment", "Set", "Observe", "Value"};
    int kind = m->f->kind; /* a family's kind never changes */
    bool ok = kind == NR_CMETRIC_HISTOGRAM ? op == NR_CMETRIC_OBSERVE
              : kind == NR_CMETRIC_COUNTER ? op == NR_CMETRIC_INCREMENT || op == NR_CMETRIC_VALUE
                                           : op != NR_CMETRIC_OBSERVE;
    if (!ok)
        return nr_status_new(NR_UNSUPPORTED, "TRITONSERVER_METRIC_KIND_%s does not support %s",
                             kind_names[kind], op_names[op]);
    if (kind == NR_CMETRIC_COUNTER && op == NR_CMETRIC_INCREMENT && v < 0)
        return nr_status_new(NR_INVALID_ARG, "TRITONSERVER_METRIC_KIND_COUNTER can only be "
                             "incremented monotonically by non-negative values.");
    pthread_mutex_lock(&g_mu);
    switch (op) {
    case NR_CMETRIC_INCREMENT: m->value += v; break;
    case NR_CMETRIC_SET: m->value = v; break;
    case NR_CMETRIC_VALUE: *out = m->value; break;
    case NR_CMETRIC_OBSERVE: {
        size_t b = 0;
        while (b < m->n_buckets && v > m->bounds[b]) /* le: v <= bound */
            b++;
        m->counts[b]++;
        m->sum += v;
        m->count++;
        break;
    }
    }
    pthread_mutex_unlock(&g_mu);
    return NULL;
}

void nr_cmetrics_snapshot(nr_cfamily_snap_t **out, size_t *n)
{
    pthread_mutex_lock(&g_mu);
    size_t nf = 0;
    for (nr_cfamily_t *f = g_families; f != NULL; f = f->next)
        nf += f->metrics != NULL;
    nr_cfamily_snap_t *s = nr_calloc(nf ? nf : 1, sizeof(*s));
    size_t k = 0;
    for (nr_cfamily_t *f = g_families; f != NULL; f = f->next) {
        if (f->metrics == NULL)
            continue;
        nr_cfamily_snap_t *fs = &s[k++];
        fs->name = nr_strdup(f->name);
        fs->help = nr_strdup(f->help);
        fs->kind = f->kind;
        for (nr_cmetric_t *m = f->metrics; m != NULL; m = m->next)
            fs->n_series++;
        fs->series = nr_calloc(fs->n_series, sizeof(*fs->series));
        size_t i = 0;
        for (nr_cmetric_t *m = f->metrics; m != NULL; m = m->next, i++) {
            nr_cmetric_snap_t *ms = &fs->series[i];
            ms->labels = nr_calloc(2 * m->n_labels + 1, sizeof(char *));
            for (size_t j = 0; j < 2 * m->n_labels; j++)
                ms->labels[j] = nr_strdup(m->labels[j]);
            ms->n_labels = m->n_labels;
            ms->value = m->value;
            ms->sum = m->sum;
            ms->count = m->count;
            if (f->kind == NR_CMETRIC_HISTOGRAM) {
                ms->n_buckets = m->n_buckets;
                ms->bounds = nr_malloc((m->n_buckets ? m->n_buckets : 1) * sizeof(double));
                if (m->n_buckets)
                    memcpy(ms->bounds, m->bounds, m->n_buckets * sizeof(double));
                ms->cumulative = nr_malloc((m->n_buckets + 1) * sizeof(uint64_t));
                uint64_t c = 0;
                for (size_t b = 0; b <= m->n_buckets; b++)
                    ms->cumulative[b] = c += m->counts[b];
            }
        }
    }
    pthread_mutex_unlock(&g_mu);
    *out = s;
    *n = nf;
}

void nr_cmetrics_snapshot_free(nr_cfamily_snap_t *s, size_t n)
{
    for (size_t k = 0; k < n; k++) {
        for (size_t i = 0; i < s[k].n_series; i++) {
            nr_cmetric_snap_t *ms = &s[k].series[i];
            free_labels(ms->labels, ms->n_labels);
            free(ms->bounds);
            free(ms->cumulative);
        }
        free(s[k].series);
        free(s[k].name);
        free(s[k].help);
    }
    free(s);
}
