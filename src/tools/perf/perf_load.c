/* perf_load.c - the load (perf.h). Concurrency mode is a closed loop: one thread per slot, each
 * with its own keep-alive connection, sending the model's request again as soon as the last
 * answer arrived, so exactly N requests are in flight. Rate mode is an open loop: a pool of
 * such threads takes the scheduled send times in order, each waiting for its time; a request
 * whose thread was busy past its time goes out late and counts as delayed, and its latency runs
 * from the scheduled time, so a slow server cannot hide its backlog (no coordinated omission:
 * perf_analyzer counts from the actual send). Each worker adds what it measured to its
 * own accumulator under its own mutex; the main thread takes every mutex once per window to
 * move the accumulators out (perf_load_cut), so a request belongs to the window in which it
 * ended, and nothing per request is kept.
 */
#include "perf.h"

#include "../../common/alloc.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    pthread_t tid;
    pthread_mutex_t mu;
    perf_conn_t conn; /* HTTP */
    perf_grpc_t grpc; /* gRPC */
    nr_buf_t scratch; /* gRPC: the last response */
    perf_window_t acc; /* the current window's share of this worker */
    perf_load_t *load;
    size_t next;      /* the model's request it sends next (they are taken in turn) */
    /* gRPC in concurrency mode: this thread's slots on one completion queue */
    perf_grpc_pool_t pool;
    size_t n_slots;
    uint64_t *slot_t0; /* each slot's call: when it was started */
    nr_buf_t outputs; /* --profile-export-file: the last response's outputs, rendered */
} worker_t;

#define PERF_SLOTS_PER_THREAD 8

struct perf_load_s {
    const perf_model_t *model;
    bool grpc;
    atomic_bool stop;
    /* rate mode: the schedule, taken in order under mu */
    double rate;
    bool poisson;
    const uint64_t *intervals; /* --request-intervals, taken in turn */
    size_t n_intervals, next_interval;
    pthread_mutex_t mu;
    uint64_t next_ns, rng;
    uint64_t win_start;
    worker_t *w;
    size_t n;
    uint64_t budget;         /* --request-count: requests to send in all (0: no limit) */
    bool profile;            /* --profile-export-file: each request recorded */
    uint64_t epoch_ns;       /* CLOCK_REALTIME - CLOCK_MONOTONIC, for its timestamps */
    atomic_uint_fast64_t sent;
};

/* The next scheduled send time (rate mode). */
static uint64_t next_send(perf_load_t *l)
{
    pthread_mutex_lock(&l->mu);
    uint64_t t = l->next_ns;
    double gap = 1e9 / l->rate;
    if (l->n_intervals) {
        gap = (double)l->intervals[l->next_interval++];
        l->next_interval %= l->n_intervals;
    } else if (l->poisson) { /* exponential gaps: -ln(U)/rate, U uniform in (0, 1] */
        l->rng ^= l->rng << 13, l->rng ^= l->rng >> 7, l->rng ^= l->rng << 17;
        gap *= -log((double)((l->rng >> 11) + 1) / 9007199254740992.0);
    }
    l->next_ns += (uint64_t)gap;
    pthread_mutex_unlock(&l->mu);
    return t;
}

/* Sleeps until t (rate mode), waking at least every 50 ms to see a stop; false on a stop. */
static bool wait_until(perf_load_t *l, uint64_t t)
{
    for (uint64_t now; (now = perf_now_ns()) < t;) {
        if (atomic_load_explicit(&l->stop, memory_order_relaxed))
            return false;
        uint64_t d = t - now < 50000000ull ? t - now : 50000000ull;
        struct timespec ts = {(time_t)(d / 1000000000ull), (long)(d % 1000000000ull)};
        nanosleep(&ts, NULL);
    }
    return true;
}

static void record(worker_t *w, char *err, uint64_t lat_ns, uint64_t lib_ns,
                   const perf_resp_t *r);

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    perf_load_t *l = w->load;
    const perf_model_t *m = l->model;
    while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
        perf_resp_t r = {0}; /* responses stays 0 but for a decoupled model's stream */
        uint64_t sched = 0;
        if (l->budget && atomic_fetch_add(&l->sent, 1) >= l->budget)
            break; /* --request-count: all sent */
        if (l->rate > 0 && !wait_until(l, sched = next_send(l)))
            break;
        size_t k = w->next++ % m->n_requests;
        const nr_buf_t *req = &m->requests[k];
        uint64_t t0 = perf_now_ns();
        nr_status_t *st = l->grpc ? perf_grpc_infer(&w->grpc, req, &w->scratch, &r)
                                  : perf_exchange(&w->conn, "POST", m->path, req, NULL, 0, &r);
        uint64_t t1 = l->profile ? 0 : perf_now_ns();
        char *err = NULL;
        if (st)
            err = nr_strdup(st->msg);
        else if (!l->grpc && r.status != 200)
            err = perf_error_text(&r);
        nr_status_free(st);
        pthread_mutex_lock(&w->mu);
        /* --profile-export-file: the response time taken under the lock perf_load_cut takes,
         * so that a record's window and its time agree (the window ends after the cut) */
        if (l->profile)
            t1 = perf_now_ns();
        bool ok = err == NULL;
        record(w, err, t1 - (sched ? sched : t0), t1 - t0, &r);
        if (ok) {
            w->acc.delayed += sched && t0 > sched + 1000000ull;
            if (l->profile) {
                nr_buf_reset(&w->outputs);
                if (l->grpc)
                    perf_grpc_outputs(&w->scratch, &w->outputs);
                else
                    perf_http_outputs(&r, &w->outputs);
                perf_profile_record(&w->acc.records, m, k, t0 + l->epoch_ns, t1 + l->epoch_ns,
                                    &w->outputs);
            }
        }
        pthread_mutex_unlock(&w->mu);
        if (err) /* do not spin on a server that refuses: one try per millisecond at most */
            usleep(1000);
    }
    return NULL;
}

/* The window's share of one answer (under the worker's lock). */
static void record(worker_t *w, char *err, uint64_t lat_ns, uint64_t lib_ns, const perf_resp_t *r)
{
    if (err) {
        w->acc.errors++;
        if (w->acc.error == NULL)
            w->acc.error = err;
        else
            free(err);
        return;
    }
    w->acc.count++;
    w->acc.responses += r->responses;
    perf_hist_record(&w->acc.lat, lat_ns);
    w->acc.send_ns += r->send_ns;
    w->acc.lib_ns += lib_ns;
    w->acc.recv_ns += r->recv_ns;
}

/* gRPC, concurrency mode: this thread keeps its slots' calls in flight, each answer starting
 * the slot's next request; at a stop the calls in flight are cancelled. */
static void *pool_main(void *arg)
{
    worker_t *w = arg;
    perf_load_t *l = w->load;
    const perf_model_t *m = l->model;
    size_t busy = 0;
    bool failed = false;
    for (size_t i = 0; i < w->n_slots; i++) {
        if (l->budget && atomic_fetch_add(&l->sent, 1) >= l->budget)
            break;
        w->slot_t0[i] = perf_now_ns();
        nr_status_t *st = perf_grpc_pool_start(&w->pool, i,
                                               &m->requests[w->next++ % m->n_requests]);
        if (st) {
            nr_status_free(st);
            failed = true;
            break;
        }
        busy++;
    }
    while (busy > 0 && !failed) {
        nr_status_t *st;
        size_t i = perf_grpc_pool_next(&w->pool, &st);
        if (i == SIZE_MAX) {
            if (atomic_load_explicit(&l->stop, memory_order_relaxed))
                break;
            continue;
        }
        busy--;
        uint64_t t1 = perf_now_ns();
        perf_resp_t r = {.send_ns = 0, .recv_ns = 0};
        char *err = st ? nr_strdup(st->msg) : NULL;
        nr_status_free(st);
        pthread_mutex_lock(&w->mu);
        record(w, err, t1 - w->slot_t0[i], t1 - w->slot_t0[i], &r);
        pthread_mutex_unlock(&w->mu);
        if (err) /* do not spin on a server that refuses */
            usleep(1000);
        if (atomic_load_explicit(&l->stop, memory_order_relaxed) ||
            (l->budget && atomic_fetch_add(&l->sent, 1) >= l->budget))
            continue;
        w->slot_t0[i] = perf_now_ns();
        if ((st = perf_grpc_pool_start(&w->pool, i,
                                       &m->requests[w->next++ % m->n_requests])) != NULL) {
            nr_status_free(st);
            continue;
        }
        busy++;
    }
    return NULL;
}

static void worker_close(worker_t *w)
{
    if (w->n_slots)
        perf_grpc_pool_close(&w->pool);
    else if (w->load->grpc)
        perf_grpc_close(&w->grpc);
    else
        perf_conn_close(&w->conn);
    nr_buf_free(&w->scratch);
    nr_buf_free(&w->outputs);
    free(w->slot_t0);
    perf_window_free(&w->acc);
    pthread_mutex_destroy(&w->mu);
}

nr_status_t *perf_load_start(const perf_opts_t *o, const perf_model_t *m, uint64_t conc,
                             double rate, perf_load_t **out)
{
    perf_load_t *l = nr_calloc(1, sizeof(*l));
    l->model = m;
    l->grpc = o->grpc;
    atomic_init(&l->stop, false);
    atomic_init(&l->sent, 0);
    l->budget = o->request_total;
    l->profile = o->profile_export != NULL;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    l->epoch_ns = (uint64_t)rt.tv_sec * 1000000000ull + (uint64_t)rt.tv_nsec - perf_now_ns();
    pthread_mutex_init(&l->mu, NULL);
    l->rate = rate;
    l->poisson = o->poisson;
    l->intervals = o->intervals_ns;
    l->n_intervals = o->intervals_ns ? o->n_intervals : 0;
    l->rng = 0x2545f4914f6cdd1dull; /* the same schedule every run, as perf_analyzer's */
    l->next_ns = perf_now_ns();
    /* gRPC in concurrency mode: slots driven PERF_SLOTS_PER_THREAD to a thread on one
     * completion queue (half the client CPU per request of a thread per slot); streaming and
     * --profile-export-file keep a thread per slot */
    size_t threads = conc, per = 1;
    bool pool = o->grpc && rate <= 0 && !o->streaming && !o->profile_export;
    if (pool) {
        threads = (conc + PERF_SLOTS_PER_THREAD - 1) / PERF_SLOTS_PER_THREAD;
        per = conc / threads;
    }
    if (rate > 0)
        threads = o->max_threads ? o->max_threads : 16;
    l->w = nr_calloc(threads, sizeof(worker_t));
    l->win_start = perf_now_ns();
    nr_status_t *st = NULL;
    for (size_t i = 0; i < threads && !st; i++) {
        worker_t *w = &l->w[i];
        w->load = l;
        w->next = i * per; /* the workers start on different requests */
        pthread_mutex_init(&w->mu, NULL);
        nr_buf_init(&w->scratch);
        if (pool) { /* conc spread as evenly as it goes */
            w->n_slots = per + (i < conc % threads ? 1 : 0);
            w->slot_t0 = nr_calloc(w->n_slots, sizeof(uint64_t));
            st = perf_grpc_pool_open(&w->pool, o->url, w->n_slots);
        } else {
            st = o->grpc ? perf_grpc_open(&w->grpc, o->url) : perf_conn_init(&w->conn, o->url);
            w->grpc.streaming = o->streaming;
            w->grpc.decoupled = o->decoupled;
        }
        if (st == NULL && pthread_create(&w->tid, NULL, pool ? pool_main : worker_main, w) != 0)
            st = nr_status_new(NR_INTERNAL, "cannot start a load thread");
        if (st) {
            worker_close(w);
            break;
        }
        l->n++;
    }
    if (st) {
        perf_load_stop(l);
        return st;
    }
    *out = l;
    return NULL;
}

void perf_window_merge(perf_window_t *into, const perf_window_t *from)
{
    if (into->start_ns == 0 || (from->start_ns && from->start_ns < into->start_ns))
        into->start_ns = from->start_ns;
    if (from->end_ns > into->end_ns)
        into->end_ns = from->end_ns;
    into->count += from->count;
    into->responses += from->responses;
    into->errors += from->errors;
    into->delayed += from->delayed;
    perf_hist_merge(&into->lat, &from->lat);
    into->send_ns += from->send_ns;
    into->lib_ns += from->lib_ns;
    into->recv_ns += from->recv_ns;
    if (from->have_server) {
        perf_stats_add(&into->server, &from->server);
        into->have_server = true;
        perf_comp_merge(into, from);
    }
    perf_gpus_merge(&into->gpus, &from->gpus);
    if (into->error == NULL && from->error)
        into->error = nr_strdup(from->error);
    if (from->records.len) {
        if (into->records.len)
            nr_buf_putc(&into->records, ',');
        nr_buf_append(&into->records, from->records.data, from->records.len);
    }
    /* the boundaries: the first window's start, then each window's end */
    size_t skip = into->n_bounds && from->n_bounds ? 1 : 0;
    if (from->n_bounds > skip) {
        into->bounds = nr_realloc(into->bounds, (into->n_bounds + from->n_bounds - skip) *
                                                    sizeof(uint64_t));
        memcpy(into->bounds + into->n_bounds, from->bounds + skip,
               (from->n_bounds - skip) * sizeof(uint64_t));
        into->n_bounds += from->n_bounds - skip;
    }
}

void perf_window_free(perf_window_t *w)
{
    perf_hist_free(&w->lat);
    free(w->error);
    nr_buf_free(&w->records);
    free(w->bounds);
    perf_comp_free(w->comp, w->n_comp);
    memset(w, 0, sizeof(*w));
}

void perf_load_cut(perf_load_t *l, perf_window_t *w)
{
    uint64_t now = perf_now_ns();
    memset(w, 0, sizeof(*w));
    for (size_t i = 0; i < l->n; i++) {
        worker_t *k = &l->w[i];
        pthread_mutex_lock(&k->mu);
        perf_window_merge(w, &k->acc);
        perf_hist_reset(&k->acc.lat);
        perf_hist_t keep = k->acc.lat;
        free(k->acc.error);
        nr_buf_free(&k->acc.records);
        memset(&k->acc, 0, sizeof(k->acc));
        k->acc.lat = keep;
        pthread_mutex_unlock(&k->mu);
    }
    w->start_ns = l->win_start;
    w->end_ns = now;
    if (l->profile) { /* every record in it answered before the end, after the start */
        w->bounds = nr_calloc(2, sizeof(uint64_t));
        w->bounds[0] = l->win_start + l->epoch_ns;
        w->bounds[1] = perf_now_ns() + l->epoch_ns;
        w->n_bounds = 2;
    }
    l->win_start = now;
}

uint64_t perf_load_pending_count(perf_load_t *l)
{
    uint64_t n = 0;
    for (size_t i = 0; i < l->n; i++) {
        pthread_mutex_lock(&l->w[i].mu);
        n += l->w[i].acc.count + l->w[i].acc.errors;
        pthread_mutex_unlock(&l->w[i].mu);
    }
    return n;
}

void perf_load_stop(perf_load_t *l)
{
    atomic_store(&l->stop, true);
    for (size_t i = 0; i < l->n; i++) {
        pthread_join(l->w[i].tid, NULL);
        worker_close(&l->w[i]);
    }
    free(l->w);
    pthread_mutex_destroy(&l->mu);
    free(l);
}
