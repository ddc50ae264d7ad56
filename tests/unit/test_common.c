/* test_common.c - the fallible side of common/: allocations a request sizes
 * (nr_arena_try_alloc, nr_buf_try_reserve) fail as values, never abort, and
 * an error message quoting a name of any length is whole when memory allows,
 * else NR_MAX_ERROR_MSG bytes.
 */
#include "../../src/common/arena.h"
#include "../../src/common/buf.h"
#include "../../src/common/cli.h"
#include "../../src/common/debug.h"
#include "../../src/common/limits.h"
#include "../../src/common/status.h"
#include "nr_test.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>
#include <sys/wait.h>
#include <unistd.h>

NR_TEST(arena_try_alloc_fails_as_null)
{
    nr_arena_t a = nr_arena_init(256);
    char *p = nr_arena_try_alloc(&a, 100);
    ASSERT_NOT_NULL(p);
    memset(p, 1, 100);
    EXPECT_NULL(nr_arena_try_alloc(&a, SIZE_MAX));
    EXPECT_NULL(nr_arena_try_alloc(&a, SIZE_MAX - 8)); /* refused before malloc (ASan) */
    char *q = nr_arena_try_alloc(&a, 1000); /* the arena still works */
    ASSERT_NOT_NULL(q);
    EXPECT_TRUE(((uintptr_t)q & 15) == 0 && p[99] == 1);
    nr_arena_free(&a);
}

NR_TEST(buf_try_reserve_fails_and_keeps_the_buffer)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_puts(&b, "kept");
    EXPECT_FALSE(nr_buf_try_reserve(&b, SIZE_MAX - 2));
    EXPECT_FALSE(nr_buf_try_reserve(&b, (size_t)1 << 62)); /* refused before realloc */
    EXPECT_TRUE(b.len == 4 && strcmp(b.data, "kept") == 0);
    EXPECT_TRUE(nr_buf_try_reserve(&b, 5000));
    EXPECT_TRUE(b.cap >= 5005 && strcmp(b.data, "kept") == 0);
    size_t cap = b.cap;
    EXPECT_TRUE(nr_buf_try_reserve(&b, cap - b.len - 1)); /* fits: nothing moves */
    EXPECT_EQ_U64(b.cap, cap);
    nr_buf_free(&b);
}

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) /* gcc */
#define SANITIZED 1
#elif defined(__has_feature) /* clang */
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SANITIZED 1
#endif
#endif
#ifndef SANITIZED
#define SANITIZED 0
#endif

/* In a child whose address space is limited to what it maps now plus a
 * little: an error quoting a 64 MiB name cannot have its whole text. Exits 0
 * when the message fell back to NR_MAX_ERROR_MSG bytes ending in "...". */
__attribute__((unused)) static int short_of_memory_child(void)
{
    size_t n = (size_t)64 << 20;
    char *name = malloc(n);
    if (name == NULL)
        return 2;
    memset(name, 'x', n);
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    unsigned long long vm_kb = 0;
    while (f != NULL && fgets(line, sizeof(line), f) != NULL)
        if (sscanf(line, "VmSize: %llu kB", &vm_kb) == 1)
            break;
    if (f != NULL)
        fclose(f);
    struct rlimit rl = {(rlim_t)(vm_kb << 10) + (8u << 20), (rlim_t)(vm_kb << 10) + (8u << 20)};
    if (vm_kb == 0 || setrlimit(RLIMIT_AS, &rl) != 0)
        return 3;
    nr_status_t *st = nr_status_new(NR_INVALID_ARG, "input '%.*s' is unknown", (int)n, name);
    size_t len = strlen(st->msg);
    bool ok = len == NR_MAX_ERROR_MSG && strncmp(st->msg, "input 'xxx", 10) == 0 &&
              strcmp(st->msg + len - 4, "x...") == 0;
    return ok ? 0 : 1;
}

NR_TEST(error_messages_whole_or_cut_short_of_memory)
{
    size_t n = 3 * NR_MAX_ERROR_MSG; /* memory there is: the whole text, as Triton's */
    char *name = malloc(n);
    ASSERT_NOT_NULL(name);
    memset(name, 'x', n);
    nr_status_t *st = nr_status_new(NR_INVALID_ARG, "input '%.*s' is unknown", (int)n, name);
    EXPECT_EQ_U64(strlen(st->msg), n + 19);
    st = nr_status_prefix(st, "[request id: %.*s] ", (int)n, name);
    EXPECT_EQ_U64(strlen(st->msg), 2 * n + 19 + 15);
    nr_status_free(st);
    free(name);
    EXPECT_STATUS(nr_status_prefix(nr_status_new(NR_UNAVAILABLE, "b %d", 7), "a "),
                  NR_UNAVAILABLE, "a b 7");
#if SANITIZED
    /* a sanitizer's allocator and shadow memory do not fit such a limit */
#else
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0)
        _exit(short_of_memory_child());
    int wst;
    ASSERT_TRUE(waitpid(pid, &wst, 0) == pid);
    EXPECT_TRUE(WIFEXITED(wst));
    EXPECT_EQ_INT(WEXITSTATUS(wst), 0);
#endif
}

/* ---- cli: the value readers and an option table ---- */

NR_TEST(cli_values)
{
    bool b = false;
    EXPECT_TRUE(nr_cli_bool("ON", &b) && b);
    EXPECT_TRUE(nr_cli_bool("0", &b) && !b);
    EXPECT_FALSE(nr_cli_bool("yes", &b));
    EXPECT_FALSE(nr_cli_bool(NULL, &b));
    long long x = 0;
    EXPECT_TRUE(nr_cli_int("-7", -10, 10, &x) && x == -7);
    EXPECT_FALSE(nr_cli_int("11", -10, 10, &x));
    EXPECT_FALSE(nr_cli_int("3x", 0, 10, &x));
    EXPECT_FALSE(nr_cli_int("", 0, 10, &x));
    EXPECT_FALSE(nr_cli_int("99999999999999999999", 0, INT64_MAX, &x));
    uint64_t u = 0;
    EXPECT_TRUE(nr_cli_u64("18446744073709551615", &u) && u == UINT64_MAX);
    EXPECT_FALSE(nr_cli_u64("18446744073709551616", &u)); /* overflow */
    EXPECT_FALSE(nr_cli_u64("-1", &u));
    EXPECT_FALSE(nr_cli_u64("", &u));
    EXPECT_FALSE(nr_cli_u64("5 ", &u));
    double d = 0;
    EXPECT_TRUE(nr_cli_double("2.5", 0, &d) && d == 2.5);
    EXPECT_FALSE(nr_cli_double("-1", 0, &d));
    EXPECT_FALSE(nr_cli_double("nan", 0, &d));
    EXPECT_FALSE(nr_cli_double("1e999", 0, &d));
    EXPECT_FALSE(nr_cli_double("1x", 0, &d));
}

typedef struct {
    int n;
    bool on;
    uint64_t big;
    const char *s;
    int custom;
} cli_opts_t;

static nr_status_t *cli_custom(void *o, const nr_cli_opt_t *f, const char *v)
{
    if (v != NULL && atoi(v) < 0)
        return nr_status_new(NR_INVALID_ARG, "negative: %s", v);
    ((cli_opts_t *)o)->custom += v == NULL ? 100 : atoi(v);
    return NULL;
}

static const nr_cli_opt_t cli_table[] = {
    {"n", NR_CLI_INT, offsetof(cli_opts_t, n), 1, 9, NULL, "=<int>", "A number"},
    {"on", NR_CLI_BOOL, offsetof(cli_opts_t, on), 0, 0, NULL, "=<bool>", "A switch"},
    {"a-rather-long-option-name", NR_CLI_U64, offsetof(cli_opts_t, big), 0, 1000, NULL,
     "=<int>", "Two lines\nof help"},
    {"s", NR_CLI_STR, offsetof(cli_opts_t, s), 0, 0, NULL, "=<s>", ""},
    {"c", NR_CLI_FN, 0, 0, 0, cli_custom, "=<int>", NULL},
    {"f", NR_CLI_FLAG, 0, 0, 0, cli_custom, NULL, "A flag"},
};

NR_TEST(cli_table)
{
    const size_t n = sizeof(cli_table) / sizeof(cli_table[0]);
    cli_opts_t o = {0};
    EXPECT_NULL(nr_cli_find(cli_table, n, "o", 1)); /* whole names only */
    EXPECT_OK(nr_cli_set(nr_cli_find(cli_table, n, "n=3", 1), &o, "3"));
    EXPECT_EQ_INT(o.n, 3);
    EXPECT_STATUS(nr_cli_set(nr_cli_find(cli_table, n, "n", 1), &o, "10"), NR_INVALID_ARG,
                  "Invalid option value. Got 10"); /* above hi */
    EXPECT_EQ_INT(o.n, 3);
    EXPECT_OK(nr_cli_set(nr_cli_find(cli_table, n, "on", 2), &o, "true"));
    EXPECT_TRUE(o.on);
    EXPECT_STATUS(nr_cli_set(nr_cli_find(cli_table, n, "a-rather-long-option-name", 25), &o,
                             "1001"),
                  NR_INVALID_ARG, "Invalid option value. Got 1001");
    EXPECT_OK(nr_cli_set(nr_cli_find(cli_table, n, "s", 1), &o, "text"));
    EXPECT_STREQ(o.s, "text");
    EXPECT_OK(nr_cli_set(nr_cli_find(cli_table, n, "c", 1), &o, "5"));
    EXPECT_STATUS(nr_cli_set(nr_cli_find(cli_table, n, "c", 1), &o, "-1"), NR_INVALID_ARG,
                  "negative: -1"); /* a setter's own refusal */
    EXPECT_OK(nr_cli_set(nr_cli_find(cli_table, n, "f", 1), &o, NULL));
    EXPECT_EQ_INT(o.custom, 105);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    nr_cli_usage(f, cli_table, n);
    fclose(f);
    EXPECT_STREQ(text, "  --n=<int>                        A number\n"
                       "  --on=<bool>                      A switch\n"
                       "  --a-rather-long-option-name=<int>\n"
                       "                                   Two lines\n"
                       "                                   of help\n"
                       "  --s=<s>\n"
                       "  --f                              A flag\n");
    free(text);
}

#ifdef NR_DEBUG
/* The debug builds' lock ownership (common/debug.h): what the threading contract's
 * assertions rest on. A release build compiles it away (and this test with it). */
static void *held_elsewhere(void *arg)
{
    return nr_lock_held(arg) ? arg : NULL;
}

NR_TEST(debug_lock_ownership_is_asserted)
{
    nr_lock_t l;
    nr_lock_init(&l);
    EXPECT_FALSE(nr_lock_held(&l));
    nr_lock(&l);
    EXPECT_TRUE(nr_lock_held(&l));
    pthread_t t;
    void *r = &l;
    ASSERT_EQ_INT(pthread_create(&t, NULL, held_elsewhere, &l), 0);
    pthread_join(t, &r);
    EXPECT_NULL(r); /* held, but not by that thread */
    nr_unlock(&l);
    EXPECT_FALSE(nr_lock_held(&l));
    /* unlocking a lock the thread does not hold trips the assertion (in a child) */
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        nr_unlock(&l);
        _exit(0);
    }
    int ws = 0;
    waitpid(pid, &ws, 0);
    EXPECT_TRUE(WIFSIGNALED(ws) && WTERMSIG(ws) == SIGABRT);
    nr_lock_destroy(&l);
}
#endif

NR_TEST_MAIN()
