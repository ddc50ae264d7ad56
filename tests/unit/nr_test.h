/* nr_test.h - the unit-test harness: NR_TEST(name) defines and registers a
 * test, ASSERT_* report file:line and return from the test, EXPECT_* report
 * and continue. NR_TEST_MAIN() supplies main(): it runs every test (or those
 * whose name contains argv[1]) in source order and ends with the line
 * "<binary>: N passed, N failed"; exit status 1 if any failed.
 * Include it in exactly one .c file per test binary.
 */
#ifndef NR_TEST_H
#define NR_TEST_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../../src/common/status.h"

typedef struct nr_test_s {
    const char *name;
    void (*fn)(void);
    int line;
    struct nr_test_s *next;
} nr_test_t;

static nr_test_t *nr_test_list;
static int nr_test_failures; /* failed checks in the current test */

#define NR_TEST(name)                                                                 \
    static void nr_test_fn_##name(void);                                              \
    static nr_test_t nr_test_rec_##name = {#name, nr_test_fn_##name, __LINE__, NULL}; \
    __attribute__((constructor)) static void nr_test_reg_##name(void)                 \
    {                                                                                 \
        nr_test_rec_##name.next = nr_test_list;                                       \
        nr_test_list = &nr_test_rec_##name;                                           \
    }                                                                                 \
    static void nr_test_fn_##name(void)

/* ---- check helpers: print and count a failure, return whether it passed --- */

__attribute__((unused)) static bool nr_test_fail(const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
__attribute__((unused)) static bool nr_test_fail(const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s:%d: ", file, line);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    nr_test_failures++;
    return false;
}

__attribute__((unused)) static bool nr_test_true(bool v, const char *expr, const char *file,
                                                 int line)
{
    return v ? true : nr_test_fail(file, line, "expected true: %s", expr);
}

__attribute__((unused)) static bool nr_test_eq_int(long long a, long long b, const char *ea,
                                                   const char *eb, const char *file, int line)
{
    return a == b ? true
                  : nr_test_fail(file, line, "%s == %s failed: %lld != %lld", ea, eb, a, b);
}

__attribute__((unused)) static bool nr_test_eq_u64(uint64_t a, uint64_t b, const char *ea,
                                                   const char *eb, const char *file, int line)
{
    return a == b ? true
                  : nr_test_fail(file, line, "%s == %s failed: %" PRIu64 " != %" PRIu64, ea, eb,
                                 a, b);
}

__attribute__((unused)) static bool nr_test_eq_dbl(double a, double b, const char *ea,
                                                   const char *eb, const char *file, int line)
{
    return a == b ? true : nr_test_fail(file, line, "%s == %s failed: %.17g != %.17g", ea, eb, a, b);
}

__attribute__((unused)) static bool nr_test_streq(const char *a, const char *b, const char *ea,
                                                  const char *eb, const char *file, int line)
{
    if ((a == NULL && b == NULL) || (a != NULL && b != NULL && strcmp(a, b) == 0))
        return true;
    return nr_test_fail(file, line, "%s == %s failed:\n  got:      %s%s%s\n  expected: %s%s%s", ea,
                        eb, a ? "\"" : "", a ? a : "NULL", a ? "\"" : "", b ? "\"" : "",
                        b ? b : "NULL", b ? "\"" : "");
}

/* Status checks take ownership of the status and free it. */
__attribute__((unused)) static bool nr_test_ok(nr_status_t *st, const char *expr, const char *file,
                                               int line)
{
    if (st == NULL)
        return true;
    nr_test_fail(file, line, "%s failed: [%d] %s", expr, (int)st->code, st->msg);
    nr_status_free(st);
    return false;
}

__attribute__((unused)) static bool nr_test_status(nr_status_t *st, int code, const char *msg,
                                                   const char *expr, const char *file, int line)
{
    if (st == NULL)
        return nr_test_fail(file, line, "%s succeeded, expected error [%d] %s", expr, code, msg);
    bool ok = (int)st->code == code && (msg == NULL || strcmp(st->msg, msg) == 0);
    if (!ok)
        nr_test_fail(file, line, "%s:\n  got:      [%d] %s\n  expected: [%d] %s", expr,
                     (int)st->code, st->msg, code, msg ? msg : "(any message)");
    nr_status_free(st);
    return ok;
}

/* ---- the macros ----------------------------------------------------------- */

#define EXPECT_TRUE(e) nr_test_true((e), #e, __FILE__, __LINE__)
#define EXPECT_FALSE(e) nr_test_true(!(e), "!(" #e ")", __FILE__, __LINE__)
#define EXPECT_EQ_INT(a, b) nr_test_eq_int((long long)(a), (long long)(b), #a, #b, __FILE__, __LINE__)
#define EXPECT_EQ_U64(a, b) nr_test_eq_u64((uint64_t)(a), (uint64_t)(b), #a, #b, __FILE__, __LINE__)
#define EXPECT_EQ_DBL(a, b) nr_test_eq_dbl((double)(a), (double)(b), #a, #b, __FILE__, __LINE__)
#define EXPECT_STREQ(a, b) nr_test_streq((a), (b), #a, #b, __FILE__, __LINE__)
#define EXPECT_NULL(p) nr_test_true((p) == NULL, #p " == NULL", __FILE__, __LINE__)
#define EXPECT_NOT_NULL(p) nr_test_true((p) != NULL, #p " != NULL", __FILE__, __LINE__)
#define EXPECT_OK(st) nr_test_ok((st), #st, __FILE__, __LINE__)
/* Expects an error with this code (NR_INVALID_ARG, ...) and exact message (NULL: any). */
#define EXPECT_STATUS(st, code, msg) nr_test_status((st), (code), (msg), #st, __FILE__, __LINE__)

#define ASSERT_TRUE(e) do { if (!EXPECT_TRUE(e)) return; } while (0)
#define ASSERT_FALSE(e) do { if (!EXPECT_FALSE(e)) return; } while (0)
#define ASSERT_EQ_INT(a, b) do { if (!EXPECT_EQ_INT(a, b)) return; } while (0)
#define ASSERT_EQ_U64(a, b) do { if (!EXPECT_EQ_U64(a, b)) return; } while (0)
#define ASSERT_EQ_DBL(a, b) do { if (!EXPECT_EQ_DBL(a, b)) return; } while (0)
#define ASSERT_STREQ(a, b) do { if (!EXPECT_STREQ(a, b)) return; } while (0)
#define ASSERT_NULL(p) do { if (!EXPECT_NULL(p)) return; } while (0)
#define ASSERT_NOT_NULL(p) do { if (!EXPECT_NOT_NULL(p)) return; } while (0)
#define ASSERT_OK(st) do { if (!EXPECT_OK(st)) return; } while (0)
#define ASSERT_STATUS(st, code, msg) do { if (!EXPECT_STATUS(st, code, msg)) return; } while (0)

/* ---- main ----------------------------------------------------------------- */

__attribute__((unused)) static int nr_test_by_line(const void *a, const void *b)
{
    const nr_test_t *x = *(const nr_test_t *const *)a, *y = *(const nr_test_t *const *)b;
    return (x->line > y->line) - (x->line < y->line);
}

__attribute__((unused)) static int nr_test_run_all(int argc, char **argv)
{
    const char *bin = strrchr(argv[0], '/') ? strrchr(argv[0], '/') + 1 : argv[0];
    const char *filter = argc > 1 ? argv[1] : NULL;
    size_t n = 0;
    for (nr_test_t *t = nr_test_list; t; t = t->next)
        n++;
    nr_test_t **order = calloc(n ? n : 1, sizeof(*order));
    n = 0;
    for (nr_test_t *t = nr_test_list; t; t = t->next)
        order[n++] = t;
    qsort(order, n, sizeof(*order), nr_test_by_line);
    int passed = 0, failed = 0;
    for (size_t i = 0; i < n; i++) {
        if (filter && strstr(order[i]->name, filter) == NULL)
            continue;
        nr_test_failures = 0;
        order[i]->fn();
        if (nr_test_failures) {
            fprintf(stderr, "FAIL %s\n", order[i]->name);
            failed++;
        } else {
            passed++;
        }
    }
    free(order);
    fflush(stderr);
    printf("%s: %d passed, %d failed\n", bin, passed, failed);
    return failed ? 1 : 0;
}

#define NR_TEST_MAIN() \
    int main(int argc, char **argv) { return nr_test_run_all(argc, argv); }

#endif
