/* shm.c - the shared-memory region registry (see shm.h): an array sorted by
 * name under one mutex. A lookup is a binary search (a request may name
 * regions once per input and output, and up to NR_MAX_SHM_REGIONS may be
 * registered), holding the mutex only to find the name and take a reference;
 * registering and unregistering, once per region, shift the array.
 *
 * A client can shrink its object after registering it; the kernel then
 * raises SIGBUS on the next access to the pages past the new end, in whatever
 * thread touches them (ONNX Runtime reading an input in place, the encoder
 * writing an output). A SIGBUS handler catches faults inside a registered
 * mapping, puts anonymous zero pages over the rest of that mapping so the
 * access completes, and marks the region broken: the request that was using
 * it and every later one that names it get an error instead of a crash.
 * Faults anywhere else keep their default effect.
 */
#include "shm.h"

#include "../common/alloc.h"
#include "../common/limits.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct nr_shm_region_s {
    char *name, *key;
    size_t name_len;
    uint64_t offset, byte_size;
    void *map;        /* mmap'd from offset rounded down to a page; NULL until then */
    size_t map_len;
    char *addr;       /* map + (offset - that page) = the region's first byte */
    atomic_int refs;  /* the registry's one, plus one per request using it */
    int slot;         /* in guard[], -1 before mapping */
};

/* ---- the SIGBUS guard ------------------------------------------------------ */

/* Every live mapping of every registry, read by the signal handler without a
 * lock: a slot is filled after mmap and cleared before munmap, and no access
 * to a mapping can fault once it is unmapped (no request holds it then). */
static struct {
    _Atomic uintptr_t start, end; /* 0, 0 = free */
    atomic_bool broken;
} guard[NR_MAX_SHM_REGIONS];
static pthread_mutex_t guard_mu = PTHREAD_MUTEX_INITIALIZER; /* slot allocation */
static pthread_once_t guard_once = PTHREAD_ONCE_INIT;
static uintptr_t page_size;

static void on_sigbus(int sig, siginfo_t *si, void *ctx)
{
    (void)ctx;
    uintptr_t a = (uintptr_t)si->si_addr;
    for (size_t i = 0; i < NR_MAX_SHM_REGIONS; i++) {
        uintptr_t s = atomic_load(&guard[i].start), e = atomic_load(&guard[i].end);
        if (s == 0 || a < s || a >= e)
            continue;
        uintptr_t from = a & ~(page_size - 1);
        /* mmap is a plain system call here: safe in a handler on Linux */
        if (mmap((void *)from, e - from, PROT_READ | PROT_WRITE,
                 MAP_FIXED | MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) != MAP_FAILED) {
            atomic_store(&guard[i].broken, true);
            return; /* the faulting access is retried on the new pages */
        }
        break;
    }
    signal(sig, SIG_DFL); /* not ours: the retried access ends the process as before */
}

static void guard_install(void)
{
    page_size = (uintptr_t)sysconf(_SC_PAGESIZE);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_sigaction = on_sigbus;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGBUS, &sa, NULL);
}

/* After guard_install (map_region runs it before the first mmap). */
static int guard_add(uintptr_t start, uintptr_t end)
{
    int slot = -1;
    pthread_mutex_lock(&guard_mu);
    for (int i = 0; i < NR_MAX_SHM_REGIONS && slot < 0; i++)
        if (atomic_load(&guard[i].start) == 0) {
            slot = i;
            atomic_store(&guard[i].broken, false);
            atomic_store(&guard[i].end, end);
            atomic_store(&guard[i].start, start);
        }
    pthread_mutex_unlock(&guard_mu);
    return slot;
}

static void guard_remove(int slot)
{
    if (slot < 0)
        return;
    pthread_mutex_lock(&guard_mu);
    atomic_store(&guard[slot].start, 0);
    atomic_store(&guard[slot].end, 0);
    pthread_mutex_unlock(&guard_mu);
}

bool nr_shm_broken(const nr_shm_region_t *r)
{
    return r != NULL && r->slot >= 0 && atomic_load(&guard[r->slot].broken);
}

nr_status_t *nr_shm_check(const nr_shm_region_t *r)
{
    if (!nr_shm_broken(r))
        return NULL;
    return nr_status_new(NR_INTERNAL,
                         "shared memory region '%s' was truncated by its owner after it was "
                         "registered; unregister it and register it again",
                         r->name);
}

/* ---- the registry ---------------------------------------------------------- */

struct nr_shm_s {
    pthread_mutex_t mu;
    nr_shm_region_t **v; /* [n], sorted by name, as Triton's status lists them */
    size_t n, cap;
};

nr_shm_t *nr_shm_new(void)
{
    nr_shm_t *shm = nr_calloc(1, sizeof(*shm));
    pthread_mutex_init(&shm->mu, NULL);
    return shm;
}

static void region_free(nr_shm_region_t *r)
{
    guard_remove(r->slot);
    if (r->map != NULL)
        munmap(r->map, r->map_len);
    free(r->name);
    free(r->key);
    free(r);
}

void nr_shm_put(nr_shm_region_t *r)
{
    if (r != NULL && atomic_fetch_sub_explicit(&r->refs, 1, memory_order_acq_rel) == 1)
        region_free(r);
}

void nr_shm_free(nr_shm_t *shm)
{
    if (shm == NULL)
        return;
    nr_shm_unregister(shm, NULL, 0);
    pthread_mutex_destroy(&shm->mu);
    free(shm->v);
    free(shm);
}

/* Where the region named so is in v (*found), or where it would go. Names
 * order as bytes, a prefix first (strcmp's order for names without NUL).
 * Under mu. */
static size_t search(const nr_shm_t *shm, const char *name, size_t len, bool *found)
{
    size_t lo = 0, hi = shm->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const nr_shm_region_t *r = shm->v[mid];
        size_t common = r->name_len < len ? r->name_len : len;
        int c = common ? memcmp(r->name, name, common) : 0;
        if (c == 0)
            c = r->name_len < len ? -1 : r->name_len > len;
        if (c == 0) {
            *found = true;
            return mid;
        }
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    *found = false;
    return lo;
}

/* The region named so, or NULL. Under mu. */
static nr_shm_region_t *find(const nr_shm_t *shm, const char *name, size_t len)
{
    bool found;
    size_t i = search(shm, name, len, &found);
    return found ? shm->v[i] : NULL;
}

/* Takes v[i] out. Under mu. */
static nr_shm_region_t *remove_at(nr_shm_t *shm, size_t i)
{
    nr_shm_region_t *r = shm->v[i];
    memmove(&shm->v[i], &shm->v[i + 1], (shm->n - i - 1) * sizeof(*shm->v));
    shm->n--;
    return r;
}

/* Adds r, whose name is not registered. Under mu. */
static void insert_sorted(nr_shm_t *shm, nr_shm_region_t *r)
{
    bool found;
    size_t i = search(shm, r->name, r->name_len, &found);
    if (shm->n == shm->cap) {
        shm->cap = shm->cap ? 2 * shm->cap : 16;
        shm->v = nr_realloc(shm->v, shm->cap * sizeof(*shm->v));
    }
    memmove(&shm->v[i + 1], &shm->v[i], (shm->n - i) * sizeof(*shm->v));
    shm->v[i] = r;
    shm->n++;
}

/* Opens and maps; the mutex is not held (shm_open and mmap are syscalls). */
static nr_status_t *map_region(nr_shm_region_t *r)
{
    int fd = shm_open(r->key, O_RDWR, S_IRUSR | S_IWUSR);
    if (fd < 0)
        return nr_status_new(NR_INTERNAL, "Unable to open shared memory region: '%s'", r->key);
    pthread_once(&guard_once, guard_install); /* sets page_size */
    struct stat st;
    uint64_t end;
    nr_status_t *err = NULL;
    if (fstat(fd, &st) != 0 || st.st_size < 0) {
        err = nr_status_new(NR_INTERNAL, "Invalid shared memory region: '%s'", r->key);
    } else if (r->byte_size == 0 || nr_add_overflow(r->offset, r->byte_size, &end) ||
               end > (uint64_t)st.st_size || end > SIZE_MAX) {
        /* a region of 0 bytes cannot be mapped and holds no tensor */
        err = nr_status_new(NR_INVALID_ARG,
                            "failed to register shared memory region '%s': invalid args",
                            r->name);
    } else {
        uint64_t start = r->offset - r->offset % page_size;
        size_t len = (size_t)(end - start);
        void *map = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, (off_t)start);
        if (map == MAP_FAILED) {
            err = nr_status_new(NR_INVALID_ARG,
                                "failed to register shared memory region '%s': unable to "
                                "process address space: %s",
                                r->name, strerror(errno));
        } else {
            r->map = map;
            r->map_len = len;
            r->addr = (char *)map + (r->offset - start);
            r->slot = guard_add((uintptr_t)map, (uintptr_t)map + len);
            if (r->slot < 0)
                err = nr_status_new(NR_UNAVAILABLE,
                                    "failed to register shared memory region '%s': %d regions "
                                    "are registered already",
                                    r->name, NR_MAX_SHM_REGIONS);
        }
    }
    close(fd);
    return err;
}

static bool name_taken(nr_shm_t *shm, const char *name, size_t len)
{
    pthread_mutex_lock(&shm->mu);
    bool taken = find(shm, name, len) != NULL;
    pthread_mutex_unlock(&shm->mu);
    return taken;
}

nr_status_t *nr_shm_register(nr_shm_t *shm, const char *name, size_t name_len, const char *key,
                             size_t key_len, uint64_t offset, uint64_t byte_size)
{
    nr_shm_region_t *r = nr_calloc(1, sizeof(*r));
    r->name = nr_strndup(name, name_len);
    r->name_len = strlen(r->name);
    r->key = nr_strndup(key, key_len);
    r->offset = offset;
    r->byte_size = byte_size;
    r->slot = -1;
    atomic_init(&r->refs, 1);
    nr_status_t *err;
    /* the name first, as Triton, so a taken name costs no system call */
    if (name_taken(shm, name, name_len))
        err = nr_status_new(NR_ALREADY_EXISTS, "shared memory region '%s' already in manager",
                            r->name);
    else if (memchr(key, '\0', key_len) != NULL) /* no object has such a name */
        err = nr_status_new(NR_INTERNAL, "Unable to open shared memory region: '%s'", r->key);
    else
        err = map_region(r);
    if (err == NULL) {
        pthread_mutex_lock(&shm->mu);
        if (find(shm, name, name_len) != NULL) /* registered while this one was mapped */
            err = nr_status_new(NR_ALREADY_EXISTS,
                                "shared memory region '%s' already in manager", r->name);
        else
            insert_sorted(shm, r);
        pthread_mutex_unlock(&shm->mu);
    }
    if (err != NULL)
        region_free(r);
    return err;
}

void nr_shm_unregister(nr_shm_t *shm, const char *name, size_t name_len)
{
    for (;;) {
        pthread_mutex_lock(&shm->mu);
        nr_shm_region_t *r = NULL;
        if (name == NULL) {
            if (shm->n > 0)
                r = remove_at(shm, shm->n - 1);
        } else {
            bool found;
            size_t i = search(shm, name, name_len, &found);
            if (found)
                r = remove_at(shm, i);
        }
        pthread_mutex_unlock(&shm->mu);
        if (r == NULL)
            return;
        nr_shm_put(r); /* unmapped now, or by the last request using it */
        if (name != NULL)
            return;
    }
}

nr_status_t *nr_shm_visit(nr_shm_t *shm, const char *name, size_t name_len, nr_shm_visit_fn fn,
                          void *arg)
{
    nr_status_t *err = NULL;
    pthread_mutex_lock(&shm->mu);
    if (name != NULL) {
        nr_shm_region_t *r = find(shm, name, name_len);
        if (r == NULL)
            err = nr_status_new(NR_NOT_FOUND,
                                "Unable to find system shared memory region: '%.*s'",
                                (int)name_len, name);
        else
            fn(&(nr_shm_info_t){r->name, r->key, r->offset, r->byte_size}, arg);
    } else {
        for (size_t i = 0; i < shm->n; i++) {
            const nr_shm_region_t *r = shm->v[i];
            fn(&(nr_shm_info_t){r->name, r->key, r->offset, r->byte_size}, arg);
        }
    }
    pthread_mutex_unlock(&shm->mu);
    return err;
}

nr_status_t *nr_shm_get(nr_shm_t *shm, const char *name, size_t name_len, uint64_t offset,
                        uint64_t byte_size, nr_shm_region_t **region, void **addr)
{
    *region = NULL;
    *addr = NULL;
    pthread_mutex_lock(&shm->mu);
    nr_shm_region_t *r = find(shm, name, name_len);
    if (r != NULL)
        atomic_fetch_add_explicit(&r->refs, 1, memory_order_relaxed);
    pthread_mutex_unlock(&shm->mu);
    if (r == NULL)
        return nr_status_new(NR_NOT_FOUND, "Unable to find shared memory region: '%.*s'",
                             (int)name_len, name);
    uint64_t end;
    nr_status_t *err = NULL;
    if (offset >= r->byte_size)
        err = nr_status_new(NR_INVALID_ARG, "Invalid offset for shared memory region: '%s'",
                            r->name);
    else if (nr_add_overflow(offset, byte_size, &end) || end > r->byte_size)
        err = nr_status_new(NR_INVALID_ARG,
                            "Invalid offset + byte size for shared memory region: '%s'", r->name);
    else
        err = nr_shm_check(r);
    if (err != NULL) {
        nr_shm_put(r);
        return err;
    }
    *region = r;
    *addr = r->addr + offset;
    return NULL;
}
