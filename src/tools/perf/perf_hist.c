/* perf_hist.c - the latency histogram (perf.h): values in ns, exact below 2048 ns, above
 * that 1024 buckets per power of two (a bucket's width is at most 1/1024 of its value, so a
 * reported value is within 0.05 % of the recorded one: 3 significant digits). Counts only:
 * memory is fixed (220 KiB, allocated on the first record) whatever the number of samples.
 * Mean and standard deviation come from exact sums, not from the buckets.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static size_t bucket_of(uint64_t v)
{
    if (v < 2 * PERF_HIST_SUB)
        return (size_t)v;
    int m = 63 - __builtin_clzll(v); /* >= 11 */
    uint64_t sub = v >> (m - 10);     /* 1024 .. 2047 */
    return 2 * PERF_HIST_SUB + (size_t)(m - 11) * PERF_HIST_SUB + (size_t)(sub - PERF_HIST_SUB);
}


static uint64_t bucket_mid(size_t idx)
{
    uint64_t lo, hi;
    perf_hist_bucket(idx, &lo, &hi);
    return lo + (hi - lo + 1) / 2;
}

void perf_hist_bucket(size_t idx, uint64_t *lo, uint64_t *hi)
{
    if (idx < 2 * PERF_HIST_SUB) {
        *lo = *hi = idx;
        return;
    }
    size_t k = idx - 2 * PERF_HIST_SUB;
    int m = 11 + (int)(k / PERF_HIST_SUB);
    uint64_t sub = PERF_HIST_SUB + k % PERF_HIST_SUB;
    *lo = sub << (m - 10);
    *hi = *lo + (1ull << (m - 10)) - 1;
}

void perf_hist_record(perf_hist_t *h, uint64_t ns)
{
    if (h->counts == NULL)
        h->counts = nr_calloc(PERF_HIST_BUCKETS, sizeof(uint32_t));
    h->counts[bucket_of(ns)]++;
    if (h->count == 0 || ns < h->min)
        h->min = ns;
    if (ns > h->max)
        h->max = ns;
    h->count++;
    h->sum += (double)ns;
    h->sumsq += (double)ns * (double)ns;
}

void perf_hist_merge(perf_hist_t *into, const perf_hist_t *from)
{
    if (from->count == 0)
        return;
    if (into->counts == NULL)
        into->counts = nr_calloc(PERF_HIST_BUCKETS, sizeof(uint32_t));
    for (size_t i = 0; i < PERF_HIST_BUCKETS; i++)
        into->counts[i] += from->counts[i];
    if (into->count == 0 || from->min < into->min)
        into->min = from->min;
    if (from->max > into->max)
        into->max = from->max;
    into->count += from->count;
    into->sum += from->sum;
    into->sumsq += from->sumsq;
}

uint64_t perf_hist_percentile(const perf_hist_t *h, double p)
{
    if (h->count == 0)
        return 0;
    uint64_t rank = (uint64_t)(p / 100.0 * (double)(h->count - 1) + 0.5), seen = 0;
    if (rank == 0)
        return h->min; /* the extremes are kept exactly */
    if (rank >= h->count - 1)
        return h->max;
    for (size_t i = 0; i < PERF_HIST_BUCKETS; i++) {
        seen += h->counts[i];
        if (seen > rank) {
            uint64_t v = bucket_mid(i);
            return v < h->min ? h->min : v > h->max ? h->max : v;
        }
    }
    return h->max;
}

double perf_hist_mean(const perf_hist_t *h)
{
    return h->count ? h->sum / (double)h->count : 0;
}

double perf_hist_stddev(const perf_hist_t *h)
{
    if (h->count < 2)
        return 0;
    double n = (double)h->count, var = (h->sumsq - h->sum * h->sum / n) / (n - 1);
    return var > 0 ? sqrt(var) : 0;
}

void perf_hist_reset(perf_hist_t *h)
{
    uint32_t *c = h->counts;
    if (c)
        memset(c, 0, PERF_HIST_BUCKETS * sizeof(uint32_t));
    memset(h, 0, sizeof(*h));
    h->counts = c;
}

void perf_hist_free(perf_hist_t *h)
{
    free(h->counts);
    memset(h, 0, sizeof(*h));
}
