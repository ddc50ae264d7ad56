/* test_shm.c - the shared-memory region registry (core/shm.c) over real POSIX
 * shared-memory objects: register / status / lookup / unregister, Triton's
 * error texts, offsets that are not page-aligned, and a region unregistered
 * while a request still holds it (its memory must stay mapped until then).
 */
#include "../../src/common/limits.h"
#include "../../src/core/shm.h"
#include "nr_test.h"

#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#define SZ 12288 /* three pages */

/* Creates /dev/shm/<key> of SZ bytes, byte i = i % 251; returns the key. */
static const char *make_object(char *key, size_t n, const char *tag)
{
    snprintf(key, n, "/nereid_test_%s_%d", tag, (int)getpid());
    int fd = shm_open(key, O_RDWR | O_CREAT | O_TRUNC, 0600);
    if (fd < 0 || ftruncate(fd, SZ) != 0)
        return NULL;
    unsigned char buf[SZ];
    for (size_t i = 0; i < SZ; i++)
        buf[i] = (unsigned char)(i % 251);
    ssize_t w = write(fd, buf, SZ);
    close(fd);
    return w == SZ ? key : NULL;
}

static nr_status_t *reg(nr_shm_t *s, const char *name, const char *key, uint64_t off,
                        uint64_t size)
{
    return nr_shm_register(s, name, strlen(name), key, strlen(key), off, size);
}

static void collect(const nr_shm_info_t *info, void *arg)
{
    char *out = arg;
    char line[256];
    snprintf(line, sizeof(line), "%s=%s@%llu+%llu;", info->name, info->key,
             (unsigned long long)info->offset, (unsigned long long)info->byte_size);
    strcat(out, line);
}

NR_TEST(register_lookup_and_status)
{
    char key[64];
    ASSERT_TRUE(make_object(key, sizeof(key), "a") != NULL);
    nr_shm_t *s = nr_shm_new();
    EXPECT_OK(reg(s, "zeta", key, 0, SZ));
    EXPECT_OK(reg(s, "alpha", key, 5000, 100)); /* not page-aligned */
    char all[512] = "";
    EXPECT_OK(nr_shm_visit(s, NULL, 0, collect, all));
    char want[512];
    snprintf(want, sizeof(want), "alpha=%s@5000+100;zeta=%s@0+%d;", key, key, SZ);
    EXPECT_STREQ(all, want); /* sorted by name, as Triton lists them */
    char one[256] = "";
    EXPECT_OK(nr_shm_visit(s, "zeta", 4, collect, one));
    EXPECT_TRUE(strncmp(one, "zeta=", 5) == 0);
    EXPECT_STATUS(nr_shm_visit(s, "nope", 4, collect, one), NR_NOT_FOUND,
                  "Unable to find system shared memory region: 'nope'");

    nr_shm_region_t *r;
    void *addr;
    EXPECT_OK(nr_shm_get(s, "alpha", 5, 10, 20, &r, &addr));
    ASSERT_TRUE(addr != NULL);
    EXPECT_EQ_INT(((unsigned char *)addr)[0], (5000 + 10) % 251); /* region offset + request offset */
    nr_shm_put(r);
    EXPECT_OK(nr_shm_get(s, "zeta", 4, SZ - 1, 1, &r, &addr));
    EXPECT_EQ_INT(((unsigned char *)addr)[0], (SZ - 1) % 251);
    nr_shm_put(r);
    EXPECT_STATUS(nr_shm_get(s, "alpha", 5, 100, 0, &r, &addr), NR_INVALID_ARG,
                  "Invalid offset for shared memory region: 'alpha'");
    EXPECT_STATUS(nr_shm_get(s, "alpha", 5, 50, 51, &r, &addr), NR_INVALID_ARG,
                  "Invalid offset + byte size for shared memory region: 'alpha'");
    EXPECT_STATUS(nr_shm_get(s, "alpha", 5, 1, UINT64_MAX, &r, &addr), NR_INVALID_ARG,
                  "Invalid offset + byte size for shared memory region: 'alpha'");
    EXPECT_TRUE(r == NULL && addr == NULL);
    EXPECT_STATUS(nr_shm_get(s, "beta", 4, 0, 1, &r, &addr), NR_NOT_FOUND,
                  "Unable to find shared memory region: 'beta'");
    nr_shm_free(s);
    shm_unlink(key);
}

/* Every region the registry holds at once (NR_MAX_SHM_REGIONS), registered
 * in an order unlike their names': each found by name (a binary search, so
 * a request naming regions costs O(log n) per name; a list walk cost 2.5 s
 * of CPU for 100,000 names against 4,096 regions), listed sorted, and gone
 * once unregistered while its neighbours stay. */
NR_TEST(many_regions_found_by_name)
{
    char key[64];
    ASSERT_TRUE(make_object(key, sizeof(key), "many") != NULL);
    nr_shm_t *s = nr_shm_new();
    enum { N = NR_MAX_SHM_REGIONS };
    char name[32];
    for (unsigned i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "r%u", (i * 2654435761u) % N); /* a permutation of 0..N-1 */
        ASSERT_OK(reg(s, name, key, i % 100, 1));
    }
    EXPECT_STATUS(reg(s, "r77", key, 0, 1), NR_ALREADY_EXISTS,
                  "shared memory region 'r77' already in manager");
    size_t bad = 0;
    for (unsigned k = 0; k < N; k++) {
        nr_shm_region_t *r;
        void *addr;
        snprintf(name, sizeof(name), "r%u", k);
        nr_status_t *st = nr_shm_get(s, name, strlen(name), 0, 1, &r, &addr);
        bad += st != NULL;
        nr_status_free(st);
        nr_shm_put(r);
    }
    EXPECT_EQ_U64(bad, 0);
    char *all = calloc(N, 64);
    EXPECT_OK(nr_shm_visit(s, NULL, 0, collect, all));
    char prev[32] = "", *p = all;
    size_t listed = 0, unsorted = 0;
    for (char *e; (e = strchr(p, '=')) != NULL; p = strchr(e, ';') + 1) {
        snprintf(name, sizeof(name), "%.*s", (int)(e - p), p);
        unsorted += strcmp(prev, name) >= 0;
        strcpy(prev, name);
        listed++;
    }
    EXPECT_EQ_U64(listed, N);
    EXPECT_EQ_U64(unsorted, 0);
    free(all);
    nr_shm_unregister(s, "r1000", 5);
    nr_shm_unregister(s, "r1000", 5); /* unknown now: not an error */
    nr_shm_region_t *r;
    void *addr;
    EXPECT_STATUS(nr_shm_get(s, "r1000", 5, 0, 1, &r, &addr), NR_NOT_FOUND,
                  "Unable to find shared memory region: 'r1000'");
    EXPECT_OK(nr_shm_get(s, "r100", 4, 0, 1, &r, &addr)); /* its prefix */
    nr_shm_put(r);
    EXPECT_OK(nr_shm_get(s, "r1001", 5, 0, 1, &r, &addr));
    nr_shm_put(r);
    EXPECT_STATUS(nr_shm_get(s, "r", 1, 0, 1, &r, &addr), NR_NOT_FOUND,
                  "Unable to find shared memory region: 'r'");
    nr_shm_free(s);
    shm_unlink(key);
}

NR_TEST(register_errors)
{
    char key[64];
    ASSERT_TRUE(make_object(key, sizeof(key), "b") != NULL);
    nr_shm_t *s = nr_shm_new();
    EXPECT_OK(reg(s, "r", key, 0, 64));
    EXPECT_STATUS(reg(s, "r", key, 0, 64), NR_ALREADY_EXISTS,
                  "shared memory region 'r' already in manager");
    EXPECT_STATUS(reg(s, "x", "/nereid_test_no_such_object", 0, 64), NR_INTERNAL,
                  "Unable to open shared memory region: '/nereid_test_no_such_object'");
    EXPECT_STATUS(reg(s, "x", key, 0, SZ + 1), NR_INVALID_ARG,
                  "failed to register shared memory region 'x': invalid args");
    EXPECT_STATUS(reg(s, "x", key, SZ, 1), NR_INVALID_ARG,
                  "failed to register shared memory region 'x': invalid args");
    EXPECT_STATUS(reg(s, "x", key, UINT64_MAX, 2), NR_INVALID_ARG,
                  "failed to register shared memory region 'x': invalid args");
    EXPECT_STATUS(reg(s, "x", key, 0, 0), NR_INVALID_ARG,
                  "failed to register shared memory region 'x': invalid args");
    char all[512] = "";
    EXPECT_OK(nr_shm_visit(s, NULL, 0, collect, all));
    EXPECT_TRUE(strncmp(all, "r=", 2) == 0 && strchr(all, ';') == all + strlen(all) - 1);
    nr_shm_unregister(s, "unknown", 7); /* not an error */
    nr_shm_unregister(s, "r", 1);
    EXPECT_OK(reg(s, "r", key, 0, 64)); /* the name is free again */
    nr_shm_free(s);
    shm_unlink(key);
}

NR_TEST(unregister_waits_for_the_last_request)
{
    char key[64];
    ASSERT_TRUE(make_object(key, sizeof(key), "c") != NULL);
    nr_shm_t *s = nr_shm_new();
    EXPECT_OK(reg(s, "in", key, 4096, 8192));
    nr_shm_region_t *r1, *r2, *r3;
    void *a1, *a2, *a3;
    EXPECT_OK(nr_shm_get(s, "in", 2, 0, 8192, &r1, &a1));
    EXPECT_OK(nr_shm_get(s, "in", 2, 100, 8, &r2, &a2));
    nr_shm_unregister(s, NULL, 0); /* every region */
    EXPECT_STATUS(nr_shm_get(s, "in", 2, 0, 1, &r3, &a3), NR_NOT_FOUND,
                  "Unable to find shared memory region: 'in'");
    /* the requests' views are still mapped: reading them must not fault */
    EXPECT_EQ_INT(((unsigned char *)a2)[0], (4096 + 100) % 251);
    ((unsigned char *)a2)[1] = 7; /* and writable (outputs) */
    nr_shm_put(r2);
    EXPECT_EQ_INT(((unsigned char *)a1)[8191], (4096 + 8191) % 251);
    nr_shm_free(s); /* the registry can go before the last holder */
    EXPECT_EQ_INT(((unsigned char *)a1)[101], 7);
    nr_shm_put(r1); /* unmapped here */
    shm_unlink(key);
}

NR_TEST(truncated_object_breaks_the_region_not_the_process)
{
    char key[64];
    ASSERT_TRUE(make_object(key, sizeof(key), "d") != NULL);
    nr_shm_t *s = nr_shm_new();
    EXPECT_OK(reg(s, "t", key, 0, SZ));
    nr_shm_region_t *r;
    void *a;
    EXPECT_OK(nr_shm_get(s, "t", 1, 0, SZ, &r, &a));
    EXPECT_FALSE(nr_shm_broken(r));
    int fd = shm_open(key, O_RDWR, 0);
    ASSERT_TRUE(fd >= 0);
    EXPECT_EQ_INT(ftruncate(fd, 4096), 0); /* the owner shrinks it under a request */
    close(fd);
    volatile unsigned char *p = a;
    EXPECT_EQ_INT(p[100], 100 % 251); /* the first page is still the object's */
    EXPECT_EQ_INT(p[SZ - 1], 0);      /* faulted, answered from zero pages */
    p[SZ - 2] = 9;                    /* writes complete too */
    EXPECT_TRUE(nr_shm_broken(r));
    EXPECT_STATUS(nr_shm_check(r), NR_INTERNAL,
                  "shared memory region 't' was truncated by its owner after it was "
                  "registered; unregister it and register it again");
    nr_shm_region_t *r2;
    void *a2;
    EXPECT_STATUS(nr_shm_get(s, "t", 1, 0, 1, &r2, &a2), NR_INTERNAL,
                  "shared memory region 't' was truncated by its owner after it was "
                  "registered; unregister it and register it again");
    nr_shm_put(r);
    nr_shm_unregister(s, "t", 1);
    ASSERT_TRUE(make_object(key, sizeof(key), "d") != NULL); /* registered again: whole */
    EXPECT_OK(reg(s, "t", key, 0, SZ));
    EXPECT_OK(nr_shm_get(s, "t", 1, SZ - 1, 1, &r, &a));
    EXPECT_FALSE(nr_shm_broken(r));
    EXPECT_EQ_INT(*(unsigned char *)a, (SZ - 1) % 251);
    nr_shm_put(r);

    /* a SIGBUS outside every region still ends the process */
    pid_t pid = fork();
    ASSERT_TRUE(pid >= 0);
    if (pid == 0) {
        char other[64];
        if (make_object(other, sizeof(other), "e") == NULL)
            _exit(2);
        int ofd = shm_open(other, O_RDWR, 0);
        volatile unsigned char *q = mmap(NULL, SZ, PROT_READ, MAP_SHARED, ofd, 0);
        shm_unlink(other);
        if (q == MAP_FAILED || ftruncate(ofd, 0) != 0)
            _exit(3);
        (void)q[SZ - 1];
        _exit(0);
    }
    int wst = 0;
    waitpid(pid, &wst, 0);
    EXPECT_TRUE(WIFSIGNALED(wst) && WTERMSIG(wst) == SIGBUS);
    nr_shm_free(s);
    shm_unlink(key);
}

NR_TEST_MAIN()
