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
    nr_buf_t outputs; /* --profile-export-file: the last response's outputs, rendered */
} worker_t;

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

static void *worker_main(void *arg)
{
    worker_t *w = arg;
    perf_load_t *l = w->load;
    const perf_model_t *m = l->model;
    while (!atomic_load_explicit(&l->stop, memory_order_relaxed)) {
        perf_resp_t r;
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
        if (err) {
            w->acc.errors++;
            if (w->acc.error == NULL)
                w->acc.error = err;
            else
                free(err);
        } else {
            w->acc.count++;
            w->acc.delayed += sched && t0 > sched + 1000000ull;
            perf_hist_record(&w->acc.lat, t1 - (sched ? sched : t0));
            w->acc.send_ns += r.send_ns;
            w->acc.lib_ns += t1 - t0;
            w->acc.recv_ns += r.recv_ns;
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

static void worker_close(worker_t *w)
{
    if (w->load->grpc)
        perf_grpc_close(&w->grpc);
    else
        perf_conn_close(&w->conn);
    nr_buf_free(&w->scratch);
    nr_buf_free(&w->outputs);
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
    if (rate > 0)
        conc = o->max_threads ? o->max_threads : 16;
    l->w = nr_calloc(conc, sizeof(worker_t));
    l->win_start = perf_now_ns();
    nr_status_t *st = NULL;
    for (size_t i = 0; i < conc && !st; i++) {
        worker_t *w = &l->w[i];
        w->load = l;
        w->next = i; /* the workers start on different requests */
        pthread_mutex_init(&w->mu, NULL);
        nr_buf_init(&w->scratch);
        st = o->grpc ? perf_grpc_open(&w->grpc, o->url) : perf_conn_init(&w->conn, o->url);
        w->grpc.streaming = o->streaming;
        if (st == NULL && pthread_create(&w->tid, NULL, worker_main, w) != 0)
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
    into->errors += from->errors;
    into->delayed += from->delayed;
    perf_hist_merge(&into->lat, &from->lat);
    into->send_ns += from->send_ns;
    into->lib_ns += from->lib_ns;
    into->recv_ns += from->recv_ns;
    if (from->have_server) {
        perf_stats_add(&into->server, &from->server);
        into->have_server = true;
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
