/* scheduler.c - the per-model queue and batch formation.
 *
 * One mutex + condvar per model. Instances wait on the condvar; a producer
 * signals one waiter per request. Lock rules: the queue lock is never held
 * across a backend call, I/O or logging.
 */
#include "scheduler.h"

#include "../common/alloc.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct nr_sched_s {
    const nr_model_config_t *cfg;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    nr_req_t *head, *tail;
    size_t queued;
    uint64_t executing;
    bool stopped;
    bool dynamic;
    uint32_t max_batch;      /* cap on batch size (1 when not batching) */
    uint64_t max_delay_ns;
    uint32_t max_preferred;  /* largest preferred batch size */
    uint32_t max_queue_size; /* 0 = unbounded */
};

nr_sched_t *nr_sched_create(const nr_model_config_t *cfg)
{
    nr_sched_t *s = nr_calloc(1, sizeof(*s));
    s->cfg = cfg;
    pthread_mutex_init(&s->mu, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&s->cv, &ca);
    pthread_condattr_destroy(&ca);
    s->dynamic = cfg->scheduling_choice == NR_SCHED_DYNAMIC;
    s->max_batch = (s->dynamic && cfg->max_batch_size > 0) ? (uint32_t)cfg->max_batch_size : 1;
    if (s->dynamic) {
        const nr_cfg_dynamic_batching_t *db = &cfg->dynamic_batching;
        s->max_delay_ns = db->max_queue_delay_microseconds * 1000ull;
        for (size_t i = 0; i < db->n_preferred_batch_size; i++)
            if ((uint32_t)db->preferred_batch_size[i] > s->max_preferred)
                s->max_preferred = (uint32_t)db->preferred_batch_size[i];
        if (db->has_default_queue_policy)
            s->max_queue_size = db->default_queue_policy.max_queue_size;
    }
    if (s->max_preferred == 0)
        s->max_preferred = s->max_batch;
    return s;
}

void nr_sched_destroy(nr_sched_t *s)
{
    if (!s)
        return;
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

nr_status_t *nr_sched_enqueue(nr_sched_t *s, nr_req_t *req)
{
    req->next = NULL;
    pthread_mutex_lock(&s->mu);
    if (s->stopped) {
        pthread_mutex_unlock(&s->mu);
        return nr_req_error(req, NR_UNAVAILABLE, "Server is stopping");
    }
    if (s->max_queue_size && s->queued >= s->max_queue_size) {
        pthread_mutex_unlock(&s->mu);
        return nr_req_error(req, NR_UNAVAILABLE, "Exceeds maximum queue size");
    }
    req->t_queue_ns = nr_now_ns();
    if (s->tail)
        s->tail->next = req;
    else
        s->head = req;
    s->tail = req;
    s->queued++;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return NULL;
}

/* Same non-batch shape on every input: required to execute as one batch. */
static bool compatible(const nr_req_t *a, const nr_req_t *b)
{
    for (size_t i = 0; i < a->item.n_inputs; i++) {
        const nr_tensor_t *x = &a->inputs[i], *y = &b->inputs[i];
        if (a->present[i] != b->present[i] || x->ndim != y->ndim)
            return false;
        if (x->ndim > 1 && memcmp(x->dims + 1, y->dims + 1, (x->ndim - 1) * sizeof(int64_t)))
            return false;
    }
    return true;
}

/* How many queued requests, from the head, fit in one batch; *total gets their batch sum. */
static size_t batch_extent(nr_sched_t *s, size_t cap, uint64_t *total)
{
    size_t n = 0;
    uint64_t sum = 0;
    for (nr_req_t *r = s->head; r && n < cap; r = r->next) {
        uint64_t bs = r->batch_size ? r->batch_size : 1;
        if (n > 0 && (sum + bs > s->max_batch || !compatible(s->head, r)))
            break;
        sum += bs;
        n++;
        if (!s->dynamic)
            break;
    }
    *total = sum;
    return n;
}

size_t nr_sched_next_batch(nr_sched_t *s, nr_req_t **out, size_t cap)
{
    pthread_mutex_lock(&s->mu);
    for (;;) {
        while (s->head == NULL && !s->stopped)
            pthread_cond_wait(&s->cv, &s->mu);
        if (s->head == NULL) {
            pthread_mutex_unlock(&s->mu);
            return 0;
        }
        uint64_t total;
        size_t n = batch_extent(s, cap, &total);
        bool cut = n < s->queued;
        if (s->dynamic && s->max_delay_ns && total < s->max_preferred && !cut && !s->stopped) {
            uint64_t deadline = s->head->t_queue_ns + s->max_delay_ns;
            uint64_t now = nr_now_ns();
            if (now < deadline) {
                struct timespec ts = {(time_t)(deadline / 1000000000ull),
                                      (long)(deadline % 1000000000ull)};
                pthread_cond_timedwait(&s->cv, &s->mu, &ts);
                continue;
            }
        }
        for (size_t i = 0; i < n; i++) {
            out[i] = s->head;
            s->head = s->head->next;
        }
        if (s->head == NULL)
            s->tail = NULL;
        s->queued -= n;
        s->executing += n;
        bool more = s->head != NULL;
        pthread_mutex_unlock(&s->mu);
        if (more) /* another idle instance can start on the rest */
            pthread_cond_signal(&s->cv);
        return n;
    }
}

void nr_sched_finished(nr_sched_t *s, size_t n)
{
    pthread_mutex_lock(&s->mu);
    s->executing -= n;
    pthread_mutex_unlock(&s->mu);
}

void nr_sched_stop(nr_sched_t *s)
{
    pthread_mutex_lock(&s->mu);
    s->stopped = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

uint64_t nr_sched_inflight(nr_sched_t *s)
{
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->queued + s->executing;
    pthread_mutex_unlock(&s->mu);
    return n;
}
