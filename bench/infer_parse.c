/* infer_parse.c - micro-benchmark of the JSON infer request parser
 * (nr_http_infer_parse, the JSON reader and the conversion of `data` into the
 * tensor) against identity_fp32 without a backend: the median time of one
 * parse, over interleaved rounds, for bench/run.py's small request (16
 * floats 0.0, 0.1, ... 1.5 as json.dumps prints them), 150,000 random
 * doubles (17 digits, as json.dumps prints them), 150,000 zeros "0.0, " and
 * 150,000 zeros "0,". Built by `make build/bin/bench-infer-parse`; prints
 * figures, asserts nothing. Against another build (a baseline), compile this
 * file against that tree's libnereid.a and run both alternately.
 *
 *   build/bin/bench-infer-parse [rounds=15] [ms_per_round=200]
 */
#include "../src/frontends/http/http_int.h"
#include "../tests/unit/fake_model.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const char *IDENT =
    "name: \"identity_fp32\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef enum { TENTHS, RANDOM, ZEROS, COMPACT_ZEROS } kind_t;

/* {"inputs":[{"name":"INPUT0","datatype":"FP32","shape":[1,n],"data":[...]}]} */
static char *request(size_t n, kind_t kind, size_t *len)
{
    size_t cap = 128 + n * 24, l = 0;
    char *b = malloc(cap);
    l += (size_t)sprintf(b, "{\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\","
                            "\"shape\":[1,%zu],\"data\":[", n);
    unsigned long long x = 88172645463325252ull; /* xorshift64 */
    for (size_t i = 0; i < n; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        const char *sep = i == 0 ? "" : kind == COMPACT_ZEROS ? "," : ", ";
        switch (kind) {
        case TENTHS: l += (size_t)sprintf(b + l, "%s%.1f", sep, (double)i / 10); break;
        case RANDOM:
            l += (size_t)sprintf(b + l, "%s%.17g", sep, (double)(x >> 11) / 9007199254740992.0);
            break;
        case ZEROS: l += (size_t)sprintf(b + l, "%s0.0", sep); break;
        case COMPACT_ZEROS: l += (size_t)sprintf(b + l, "%s0", sep); break;
        }
    }
    l += (size_t)sprintf(b + l, "]}]}");
    *len = l;
    return b;
}

/* One round: parses for about `ms`, returns ns per parse. */
static double round_ns(nr_model_t *m, const char *body, size_t len, double ms)
{
    size_t n = 0;
    double t0 = now_s(), t;
    do {
        for (int k = 0; k < 8; k++) {
            nr_http_infer_t *inf = nr_calloc(1, sizeof(*inf));
            char *copy = nr_malloc(len);
            memcpy(copy, body, len);
            nr_status_t *st = nr_http_infer_parse(inf, NULL, m, copy, len, NULL);
            if (st != NULL) {
                fprintf(stderr, "parse: %s\n", st->msg);
                exit(1);
            }
            nr_http_infer_free(inf);
        }
        n += 8;
        t = now_s();
    } while ((t - t0) * 1e3 < ms);
    return (t - t0) * 1e9 / (double)n;
}

static int cmp(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    int rounds = argc > 1 ? atoi(argv[1]) : 15;
    double ms = argc > 2 ? atof(argv[2]) : 200;
    nr_model_t *m = nr_fake_model(IDENT, true);
    if (m == NULL || rounds < 1 || rounds > 1000)
        return 1;
    struct { const char *what; size_t n; kind_t kind; char *body; size_t len; double *ns; } c[] = {
        {"16 floats", 16, TENTHS, NULL, 0, NULL},
        {"150k random floats", 150000, RANDOM, NULL, 0, NULL},
        {"150k zeros 0.0", 150000, ZEROS, NULL, 0, NULL},
        {"150k zeros 0", 150000, COMPACT_ZEROS, NULL, 0, NULL},
    };
    size_t nc = sizeof(c) / sizeof(c[0]);
    for (size_t i = 0; i < nc; i++) {
        c[i].body = request(c[i].n, c[i].kind, &c[i].len);
        c[i].ns = calloc((size_t)rounds, sizeof(double));
    }
    for (int r = 0; r < rounds; r++) /* the cases interleaved round by round */
        for (size_t i = 0; i < nc; i++)
            c[i].ns[r] = round_ns(m, c[i].body, c[i].len, ms);
    for (size_t i = 0; i < nc; i++) {
        qsort(c[i].ns, (size_t)rounds, sizeof(double), cmp);
        double med = c[i].ns[rounds / 2];
        printf("%-18s %8zu bytes  median %12.0f ns/parse  %8.1f MB/s  (min %.0f, max %.0f)\n",
               c[i].what, c[i].len, med, (double)c[i].len / med * 1e3, c[i].ns[0],
               c[i].ns[rounds - 1]);
        free(c[i].body);
        free(c[i].ns);
    }
    nr_fake_model_free(m);
    return 0;
}
