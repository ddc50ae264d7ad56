/* metrics_cpu.c - the CPU metrics poller (Triton's "Collecting CPU metrics"):
 * a thread that reads /proc/stat and /proc/meminfo every --metrics-interval-ms
 * and publishes utilization since the previous poll and memory total/used as
 * atomics, which a scrape reads without waiting for the poller.
 */
#include "metrics_int.h"

#include "../../common/alloc.h"
#include "../../common/clock.h"
#include "../../common/log.h"

#include <fcntl.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

struct nr_metrics_cpu_s {
    int interval_ms;
    uint64_t busy, idle; /* the previous poll (poller thread only) */
    atomic_uint_fast64_t util_bits, mem_total, mem_used; /* util: a double's bits */
    pthread_t thread;
    pthread_mutex_t mu; /* guards stop, for the condvar the poller sleeps on */
    pthread_cond_t cv;
    bool stop;
};

bool nr_metrics_parse_stat(const char *text, uint64_t *busy, uint64_t *idle)
{
    *busy = *idle = 0;
    const char *p = text;
    while (p && strncmp(p, "cpu ", 4) != 0) {
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    if (p == NULL)
        return false;
    unsigned long long f[8] = {0}; /* user nice system idle iowait irq softirq steal */
    if (sscanf(p + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3],
               &f[4], &f[5], &f[6], &f[7]) < 4)
        return false;
    *busy = f[0] + f[1] + f[2] + f[5] + f[6] + f[7];
    *idle = f[3] + f[4];
    return true;
}

static bool meminfo_kb(const char *text, const char *key, uint64_t *kb)
{
    size_t n = strlen(key);
    for (const char *p = text; p && *p;) {
        if (strncmp(p, key, n) == 0 && p[n] == ':') {
            unsigned long long v;
            if (sscanf(p + n + 1, "%llu", &v) != 1)
                return false;
            *kb = v;
            return true;
        }
        p = strchr(p, '\n');
        p = p ? p + 1 : NULL;
    }
    return false;
}

bool nr_metrics_parse_meminfo(const char *text, uint64_t *total, uint64_t *used)
{
    uint64_t t = 0, avail = 0;
    *total = *used = 0;
    if (!meminfo_kb(text, "MemTotal", &t) || !meminfo_kb(text, "MemAvailable", &avail))
        return false;
    *total = t * 1024;
    *used = (t > avail ? t - avail : 0) * 1024;
    return true;
}

double nr_metrics_cpu_util(uint64_t busy0, uint64_t idle0, uint64_t busy1, uint64_t idle1)
{
    double db = busy1 > busy0 ? (double)(busy1 - busy0) : 0;
    double di = idle1 > idle0 ? (double)(idle1 - idle0) : 0;
    return db / (db + di); /* NaN when nothing elapsed, as Triton */
}

/* The whole of a small /proc file, NUL-terminated, into buf. */
static bool read_proc(const char *path, char *buf, size_t cap)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    size_t n = 0;
    ssize_t r;
    while (n + 1 < cap && (r = read(fd, buf + n, cap - 1 - n)) > 0)
        n += (size_t)r;
    close(fd);
    buf[n] = '\0';
    return n > 0;
}

static void store_double(atomic_uint_fast64_t *a, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, sizeof(bits));
    atomic_store_explicit(a, bits, memory_order_relaxed);
}

/* One poll; `first` only takes the CPU baseline (utilization stays 0). */
static void poll_once(nr_metrics_cpu_t *c, bool first)
{
    char buf[8192];
    uint64_t busy, idle, total, used;
    if (read_proc("/proc/stat", buf, sizeof(buf)) && nr_metrics_parse_stat(buf, &busy, &idle)) {
        if (!first)
            store_double(&c->util_bits, nr_metrics_cpu_util(c->busy, c->idle, busy, idle));
        c->busy = busy;
        c->idle = idle;
    }
    if (!read_proc("/proc/meminfo", buf, sizeof(buf)))
        buf[0] = '\0';
    nr_metrics_parse_meminfo(buf, &total, &used); /* 0 and 0 when it does not parse */
    atomic_store_explicit(&c->mem_total, total, memory_order_relaxed);
    atomic_store_explicit(&c->mem_used, used, memory_order_relaxed);
}

static void *poller_main(void *arg)
{
    nr_metrics_cpu_t *c = arg;
    pthread_setname_np(pthread_self(), "metrics-cpu");
    pthread_mutex_lock(&c->mu);
    while (!c->stop) {
        struct timespec ts = nr_timespec_of(nr_now_ns() + (uint64_t)c->interval_ms * 1000000ull);
        while (!c->stop && pthread_cond_timedwait(&c->cv, &c->mu, &ts) == 0) {
        }
        if (c->stop)
            break;
        pthread_mutex_unlock(&c->mu);
        poll_once(c, false); /* no lock held while reading /proc */
        pthread_mutex_lock(&c->mu);
    }
    pthread_mutex_unlock(&c->mu);
    return NULL;
}

nr_metrics_cpu_t *nr_metrics_cpu_start(int interval_ms)
{
    nr_metrics_cpu_t *c = nr_calloc(1, sizeof(*c));
    c->interval_ms = interval_ms > 0 ? interval_ms : 1;
    store_double(&c->util_bits, 0.0);
    pthread_mutex_init(&c->mu, NULL);
    nr_cond_init_monotonic(&c->cv);
    NR_LOG_INFO("Collecting CPU metrics");
    poll_once(c, true);
    if (pthread_create(&c->thread, NULL, poller_main, c) != 0) {
        NR_LOG_ERROR("failed to start the CPU metrics thread");
        c->stop = true; /* values stay those of the first poll */
    }
    return c;
}

void nr_metrics_cpu_stop(nr_metrics_cpu_t *c)
{
    if (c == NULL)
        return;
    pthread_mutex_lock(&c->mu);
    bool started = !c->stop;
    c->stop = true;
    pthread_cond_signal(&c->cv);
    pthread_mutex_unlock(&c->mu);
    if (started)
        pthread_join(c->thread, NULL);
    pthread_mutex_destroy(&c->mu);
    pthread_cond_destroy(&c->cv);
    free(c);
}

void nr_metrics_cpu_read(const nr_metrics_cpu_t *c, double *util, uint64_t *mem_total,
                         uint64_t *mem_used)
{
    uint64_t bits = atomic_load_explicit(&c->util_bits, memory_order_relaxed);
    memcpy(util, &bits, sizeof(*util));
    *mem_total = atomic_load_explicit(&c->mem_total, memory_order_relaxed);
    *mem_used = atomic_load_explicit(&c->mem_used, memory_order_relaxed);
}
