/* test_perf_hist.c - nereid-perf's latency histogram (src/tools/perf/perf_hist.c) against the
 * exact answer: perf_analyzer's percentile (the sorted list at index (size_t)(p/100*(n-1)+0.5))
 * over the same samples, for spreads from nanoseconds to minutes.
 */
#include "nr_test.h"

#include "../../src/tools/perf/perf.h"

#include <math.h>
#include <stdlib.h>

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void check(uint64_t *v, size_t n)
{
    perf_hist_t h = {0};
    double sum = 0;
    for (size_t i = 0; i < n; i++) {
        perf_hist_record(&h, v[i]);
        sum += (double)v[i];
    }
    qsort(v, n, sizeof(*v), cmp_u64);
    static const double ps[] = {1, 50, 90, 95, 99, 99.9, 100};
    for (size_t k = 0; k < sizeof(ps) / sizeof(ps[0]); k++) {
        uint64_t want = v[(size_t)(ps[k] / 100.0 * (double)(n - 1) + 0.5)];
        uint64_t got = perf_hist_percentile(&h, ps[k]);
        double err = fabs((double)got - (double)want) / (double)(want ? want : 1);
        if (!EXPECT_TRUE(err <= 0.0005 || (want < 2048 && got == want)))
            fprintf(stderr, "  p%g: got %llu, want %llu\n", ps[k], (unsigned long long)got,
                    (unsigned long long)want);
    }
    EXPECT_EQ_U64(h.count, n);
    EXPECT_TRUE(fabs(perf_hist_mean(&h) - sum / (double)n) < 1e-6 * sum / (double)n + 1e-9);
    EXPECT_EQ_U64(perf_hist_percentile(&h, 0), v[0]);
    EXPECT_EQ_U64(perf_hist_percentile(&h, 100), v[n - 1]);
    perf_hist_free(&h);
}

NR_TEST(percentiles_within_three_significant_digits)
{
    size_t n = 100000;
    uint64_t *v = malloc(n * sizeof(*v)), seed = 88172645463325252ull;
    for (int spread = 0; spread < 4; spread++) {
        for (size_t i = 0; i < n; i++) {
            seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
            /* log-uniform over 2^(8..20+8*spread) ns: sub-us up to minutes */
            double e = 8 + (double)(seed % 100000) / 100000.0 * (12 + 8 * spread);
            v[i] = (uint64_t)exp2(e);
        }
        check(v, n);
    }
    free(v);
}

NR_TEST(small_exact_values_and_one_sample)
{
    uint64_t v[] = {5, 5, 7, 1000, 2047};
    check(v, 5);
    uint64_t one[] = {123456789};
    check(one, 1);
}

NR_TEST(merge_equals_recording_both)
{
    perf_hist_t a = {0}, b = {0}, all = {0};
    for (uint64_t i = 1; i < 5000; i++) {
        perf_hist_record(i % 2 ? &a : &b, i * 977);
        perf_hist_record(&all, i * 977);
    }
    perf_hist_merge(&a, &b);
    EXPECT_EQ_U64(a.count, all.count);
    EXPECT_EQ_U64(a.min, all.min);
    EXPECT_EQ_U64(a.max, all.max);
    for (int p = 0; p <= 100; p += 5)
        EXPECT_EQ_U64(perf_hist_percentile(&a, p), perf_hist_percentile(&all, p));
    EXPECT_TRUE(fabs(perf_hist_stddev(&a) - perf_hist_stddev(&all)) < 1e-6 * perf_hist_stddev(&all));
    perf_hist_free(&a);
    perf_hist_free(&b);
    perf_hist_free(&all);
}

NR_TEST_MAIN()
