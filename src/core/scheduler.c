/* scheduler.c - the per-model queue and Triton's dynamic batcher.
 *
 * One mutex + condvar per model. Each priority level has its own FIFO, plus a
 * second FIFO for requests whose timeout expired under timeout_action DELAY
 * (they stay queued, behind the unexpired requests of their level). Idle
 * instance threads wait on the condvar; a producer signals one waiter per
 * request, and an instance that leaves work behind signals the next. Without a batcher, a
 * producer may take an idle instance off the idle stack instead (borrowed: its thread keeps
 * sleeping until it is given back) and run its request itself (scheduler.h). Helpers that
 * need mu say so ("Context: mu held") and assert it in the debug builds.
 *
 * Batch formation (Triton's GetDynamicBatch): scan in priority order, arrival
 * order within a level, counting each request as max(1, its batch). The scan
 * stops before a request that would exceed max_batch_size or whose shapes
 * differ from the first request's on an enforced input; it marks each total
 * that is a preferred size, and the total before the largest preferred size
 * would be exceeded. Then: a mark and the oldest scanned request younger than
 * max_queue_delay -> send up to the mark; the scan was cut, the total reached
 * the largest preferred size, the delay is 0 or passed -> send all scanned;
 * else wait for the delay, the nearest queue timeout or a new arrival.
 *
 * Timeouts are applied lazily: only when the clock passes the earliest known
 * deadline does a pass over the queues move expired requests (to the delayed
 * FIFO, or out as rejected); the waiting instance wakes for that deadline.
 */
#include "scheduler.h"

#include "../common/alloc.h"
#include "../common/debug.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

typedef struct {
    nr_req_t *head, *tail;   /* waiting, not expired, arrival order */
    nr_req_t *dhead, *dtail; /* expired under DELAY, arrival order */
    size_t n;                /* both lists: what max_queue_size counts */
    uint64_t timeout_us;     /* default_timeout_microseconds, 0 = none */
    bool allow_override;
    bool delay;              /* timeout_action DELAY */
    uint32_t max_size;       /* 0 = unbounded */
} level_t;

struct nr_sched_s {
    const nr_model_config_t *cfg;
    nr_lock_t mu;
    pthread_cond_t cv;
    level_t *levels;
    size_t n_levels;
    size_t default_level; /* index used for priority 0 or out of range */
    size_t queued;
    uint64_t executing;   /* handed out, not yet completed */
    uint64_t next_deadline; /* no unexpired queued request has an earlier one */
    uint64_t seq;
    bool stopped;
    bool dynamic;
    uint32_t max_batch;      /* cap on batch size (1 when not batching) */
    uint64_t max_delay_ns;
    uint32_t max_preferred;  /* largest preferred batch size */
    bool *preferred;         /* [max_batch + 1]: is this total a preferred size */
    bool check_inputs;       /* some input is enforced or optional */
    bool *enforce;           /* per config input: equal shape within a batch */
    bool *shape_tensor;      /* per config input: equal values too */
    /* preserve_ordering: completions wait in `pending` (sorted by seq) until
     * every earlier arrival is done; one thread at a time delivers. */
    bool ordered;
    /* idle instances that may be borrowed for inline execution */
    nr_sched_waiter_t *idle;
    size_t n_borrowed;
    bool inline_ok; /* no batcher: a request is dispatched alone and at once */
    nr_lock_t ord_mu;
    nr_req_t *pending;
    uint64_t next_out;
    bool delivering;
};

static const nr_cfg_queue_policy_t *level_policy(const nr_cfg_dynamic_batching_t *db, uint64_t key)
{
    for (size_t i = 0; i < db->n_priority_queue_policy; i++)
        if (db->priority_queue_policy[i].key == key)
            return &db->priority_queue_policy[i].value;
    return &db->default_queue_policy;
}

static bool has_wildcard(const nr_cfg_input_t *in)
{
    for (size_t k = 0; k < in->dims.n; k++)
        if (in->dims.v[k] < 0)
            return true;
    return false;
}

static void init_dynamic(nr_sched_t *s, const nr_model_config_t *cfg)
{
    const nr_cfg_dynamic_batching_t *db = &cfg->dynamic_batching;
    s->max_delay_ns = db->max_queue_delay_microseconds * 1000ull;
    for (size_t i = 0; i < db->n_preferred_batch_size; i++) {
        int32_t p = db->preferred_batch_size[i];
        if (p > 0 && (uint32_t)p <= s->max_batch) {
            s->preferred[p] = true;
            if ((uint32_t)p > s->max_preferred)
                s->max_preferred = (uint32_t)p;
        }
    }
    s->n_levels = db->priority_levels > 0 ? (size_t)db->priority_levels : 1;
    s->default_level = db->priority_levels > 0 ? (size_t)db->default_priority_level - 1 : 0;
    s->levels = nr_calloc(s->n_levels, sizeof(level_t));
    for (size_t l = 0; l < s->n_levels; l++) {
        const nr_cfg_queue_policy_t *q =
            db->priority_levels > 0 ? level_policy(db, l + 1) : &db->default_queue_policy;
        s->levels[l].timeout_us = q->default_timeout_microseconds;
        s->levels[l].allow_override = q->allow_timeout_override;
        s->levels[l].delay = q->timeout_action == NR_TIMEOUT_DELAY;
        s->levels[l].max_size = q->max_queue_size;
    }
    s->ordered = db->preserve_ordering;
    size_t n_in = cfg->n_input ? cfg->n_input : 1;
    s->enforce = nr_calloc(n_in, sizeof(bool));
    s->shape_tensor = nr_calloc(n_in, sizeof(bool));
    for (size_t i = 0; i < cfg->n_input; i++) {
        const nr_cfg_input_t *in = &cfg->input[i];
        s->shape_tensor[i] = in->is_shape_tensor;
        s->enforce[i] = in->is_shape_tensor || (has_wildcard(in) && !in->allow_ragged_batch);
        s->check_inputs |= s->enforce[i] || in->optional;
    }
}

nr_sched_t *nr_sched_create(const nr_model_config_t *cfg)
{
    nr_sched_t *s = nr_calloc(1, sizeof(*s));
    s->cfg = cfg;
    nr_lock_init(&s->mu);
    nr_lock_init(&s->ord_mu);
    nr_cond_init_monotonic(&s->cv);
    s->next_deadline = UINT64_MAX;
    s->dynamic = cfg->scheduling_choice == NR_SCHED_DYNAMIC;
    s->max_batch = (s->dynamic && cfg->max_batch_size > 0) ? (uint32_t)cfg->max_batch_size : 1;
    s->preferred = nr_calloc(s->max_batch + 1, sizeof(bool));
    if (s->dynamic) {
        init_dynamic(s, cfg);
    } else {
        s->n_levels = 1;
        s->levels = nr_calloc(1, sizeof(level_t));
    }
    if (s->max_preferred == 0)
        s->max_preferred = s->max_batch;
    /* A dynamic batcher never runs a request inline, even without a delay: a connection
     * thread busy running one request cannot read the next, so with one HTTP worker
     * (--http-thread-count=1) every request ran alone and no batch ever formed (an MLP at
     * c=16: dynamic batching 1.03-1.14x the default config's throughput inline, over 1.3x
     * queued), and it is what the user asked for by configuring the batcher */
    s->inline_ok = !s->dynamic;
    return s;
}

void nr_sched_destroy(nr_sched_t *s)
{
    if (!s)
        return;
    nr_lock_destroy(&s->mu);
    nr_lock_destroy(&s->ord_mu);
    pthread_cond_destroy(&s->cv);
    free(s->levels);
    free(s->preferred);
    free(s->enforce);
    free(s->shape_tensor);
    free(s);
}

static void push(nr_req_t **head, nr_req_t **tail, nr_req_t *r)
{
    r->next = NULL;
    if (*tail)
        (*tail)->next = r;
    else
        *head = r;
    *tail = r;
}

/* Context: mu held. */
static void idle_remove(nr_sched_t *s, nr_sched_waiter_t *w)
{
    NR_DEBUG_ASSERT(nr_lock_held(&s->mu));
    NR_DEBUG_ASSERT(w->idle && !w->borrowed);
    for (nr_sched_waiter_t **p = &s->idle; *p; p = &(*p)->next_idle)
        if (*p == w) {
            *p = w->next_idle;
            break;
        }
    w->idle = false;
    w->next_idle = NULL;
}

nr_status_t *nr_sched_enqueue(nr_sched_t *s, nr_req_t *req)
{
    return nr_sched_submit(s, req, false, NULL);
}

nr_status_t *nr_sched_submit(nr_sched_t *s, nr_req_t *req, bool allow_inline,
                             nr_sched_waiter_t **borrowed)
{
    if (borrowed)
        *borrowed = NULL;
    size_t li = 0;
    if (s->dynamic && s->cfg->dynamic_batching.priority_levels > 0)
        li = req->priority == 0 || req->priority > s->n_levels ? s->default_level
                                                               : (size_t)req->priority - 1;
    level_t *L = &s->levels[li];
    nr_lock(&s->mu);
    if (s->stopped) {
        nr_unlock(&s->mu);
        return nr_req_error(req, NR_UNAVAILABLE, "Server is stopping");
    }
    if (L->max_size && L->n >= L->max_size) {
        nr_unlock(&s->mu);
        return nr_req_error(req, NR_UNAVAILABLE, "Exceeds maximum queue size");
    }
    uint64_t now = nr_now_ns();
    /* Triton: a request's own timeout only shortens the level's default one */
    uint64_t timeout_us = L->timeout_us;
    if (L->allow_override && req->timeout_us != 0 && req->timeout_us < timeout_us)
        timeout_us = req->timeout_us;
    req->t_queue_ns = now;
    req->level = (uint32_t)li;
    req->seq = s->seq++;
    req->deadline_ns = timeout_us ? now + timeout_us * 1000ull : 0;
    if (allow_inline && s->inline_ok && s->queued == 0 && s->idle != NULL) {
        nr_sched_waiter_t *w = s->idle;
        idle_remove(s, w);
        w->borrowed = true;
        NR_DEBUG_ONLY(w->borrower = pthread_self();)
        s->n_borrowed++;
        s->executing++;
        nr_unlock(&s->mu);
        *borrowed = w;
        return NULL;
    }
    if (req->deadline_ns && req->deadline_ns < s->next_deadline)
        s->next_deadline = req->deadline_ns;
    push(&L->head, &L->tail, req);
    L->n++;
    s->queued++;
    /* Without a batcher only an idle instance's thread needs waking: one that
     * is executing takes the request when it is done, and a borrowed one's
     * borrower runs it or wakes it (nr_sched_give_back). A batcher's threads
     * may be waiting out a queue delay, off the idle stack: wake them. */
    if (!s->inline_ok || s->idle != NULL) {
        if (s->n_borrowed) /* a borrowed waiter that wakes cannot take it: wake them all */
            pthread_cond_broadcast(&s->cv);
        else
            pthread_cond_signal(&s->cv);
    }
    nr_unlock(&s->mu);
    return NULL;
}

void nr_sched_give_back(nr_sched_t *s, nr_sched_waiter_t *w)
{
    nr_lock(&s->mu);
    NR_DEBUG_ASSERT(w->borrowed && !w->idle && pthread_equal(w->borrower, pthread_self()));
    w->borrowed = false;
    s->n_borrowed--;
    /* its thread still sleeps in next_batch: it is idle again, unless work
     * arrived meanwhile, which it (or another) must now take */
    w->idle = true;
    w->next_idle = s->idle;
    s->idle = w;
    if (s->queued || s->stopped)
        pthread_cond_broadcast(&s->cv);
    nr_unlock(&s->mu);
}

/* Moves every expired request: to its level's delayed FIFO (DELAY) or onto
 * *expired (REJECT, counted as executing until completed). Recomputes the
 * earliest remaining deadline. */
static void apply_timeouts(nr_sched_t *s, uint64_t now, nr_req_t **expired, nr_req_t **etail)
{
    NR_DEBUG_ASSERT(nr_lock_held(&s->mu));
    uint64_t next = UINT64_MAX;
    for (size_t l = 0; l < s->n_levels; l++) {
        level_t *L = &s->levels[l];
        nr_req_t *prev = NULL, *r = L->head;
        while (r) {
            nr_req_t *nx = r->next;
            if (r->deadline_ns == 0 || r->deadline_ns > now) {
                if (r->deadline_ns && r->deadline_ns < next)
                    next = r->deadline_ns;
                prev = r;
                r = nx;
                continue;
            }
            if (prev)
                prev->next = nx;
            else
                L->head = nx;
            if (L->tail == r)
                L->tail = prev;
            r->deadline_ns = 0;
            if (L->delay) {
                push(&L->dhead, &L->dtail, r);
            } else {
                L->n--;
                s->queued--;
                s->executing++;
                push(expired, etail, r);
            }
            r = nx;
        }
    }
    s->next_deadline = next;
}

/* Same shape (and, for shape tensors, values) on every enforced input, and
 * the same set of inputs: required to execute as one batch. */
static bool compatible(const nr_sched_t *s, const nr_req_t *a, const nr_req_t *b)
{
    if (!s->check_inputs)
        return true;
    for (size_t i = 0; i < s->cfg->n_input; i++) {
        if (a->present[i] != b->present[i])
            return false;
        if (!a->present[i] || !s->enforce[i])
            continue;
        const nr_tensor_t *x = &a->inputs[i], *y = &b->inputs[i];
        if (x->ndim != y->ndim)
            return false;
        if (x->ndim > 1 && memcmp(x->dims + 1, y->dims + 1, (x->ndim - 1) * sizeof(int64_t)))
            return false;
        if (s->shape_tensor[i] && (x->size != y->size || memcmp(x->data, y->data, x->size)))
            return false;
    }
    return true;
}

typedef struct {
    size_t n;        /* requests scanned into the pending batch */
    uint64_t total;  /* their batch sum */
    size_t mark;     /* requests up to the best preferred size; 0 = none */
    bool cut;        /* stopped before a request that cannot join */
    uint64_t oldest; /* earliest enqueue time among the scanned */
} scan_t;

/* One step of the scan; returns false when `r` cannot join the batch. */
static bool scan_one(nr_sched_t *s, scan_t *sc, const nr_req_t *first, const nr_req_t *r)
{
    uint64_t bs = r->batch_size ? r->batch_size : 1;
    if (sc->n > 0) {
        if (!s->dynamic)
            return false;
        if (sc->total + bs > s->max_preferred && sc->mark == 0)
            sc->mark = sc->n;
        if (sc->total + bs > s->max_batch || !compatible(s, first, r))
            return false;
    }
    sc->total += bs;
    sc->n++;
    if (r->t_queue_ns < sc->oldest)
        sc->oldest = r->t_queue_ns;
    if (sc->total <= s->max_batch && s->preferred[sc->total])
        sc->mark = sc->n;
    return true;
}

static void scan(nr_sched_t *s, scan_t *sc)
{
    NR_DEBUG_ASSERT(nr_lock_held(&s->mu));
    memset(sc, 0, sizeof(*sc));
    sc->oldest = UINT64_MAX;
    const nr_req_t *first = NULL;
    for (size_t l = 0; l < s->n_levels; l++) {
        for (int d = 0; d < 2; d++) {
            for (nr_req_t *r = d ? s->levels[l].dhead : s->levels[l].head; r; r = r->next) {
                if (first == NULL)
                    first = r;
                if (!scan_one(s, sc, first, r)) {
                    sc->cut = true;
                    return;
                }
            }
        }
    }
}

/* How many requests to send now; 0 = wait until *until (CLOCK_MONOTONIC ns). */
static size_t plan(nr_sched_t *s, uint64_t now, uint64_t *until)
{
    scan_t sc;
    scan(s, &sc);
    bool delay_passed = s->max_delay_ns && now - sc.oldest >= s->max_delay_ns;
    if (sc.mark && !delay_passed)
        return sc.mark;
    if (sc.cut || sc.total >= s->max_preferred || s->stopped || delay_passed ||
        s->max_delay_ns == 0)
        return sc.n;
    *until = sc.oldest + s->max_delay_ns;
    if (s->next_deadline < *until)
        *until = s->next_deadline;
    return 0;
}

/* Pops the first n requests in scan order. Context: mu held. */
static void take(nr_sched_t *s, nr_req_t **out, size_t n)
{
    NR_DEBUG_ASSERT(nr_lock_held(&s->mu) && n <= s->queued);
    size_t k = 0;
    for (size_t l = 0; l < s->n_levels && k < n; l++) {
        level_t *L = &s->levels[l];
        while (k < n && L->head) {
            out[k++] = L->head;
            L->head = L->head->next;
            L->n--;
        }
        if (!L->head)
            L->tail = NULL;
        while (k < n && L->dhead) {
            out[k++] = L->dhead;
            L->dhead = L->dhead->next;
            L->n--;
        }
        if (!L->dhead)
            L->dtail = NULL;
    }
    for (size_t i = 0; i < n; i++)
        out[i]->next = NULL;
    s->queued -= n;
    s->executing += n;
}

nr_req_t *nr_sched_take_next(nr_sched_t *s, uint64_t deadline_ns)
{
    nr_req_t *r = NULL;
    nr_lock(&s->mu);
    if (s->inline_ok && s->queued > 0 && !s->stopped &&
        (deadline_ns == 0 || nr_now_ns() < deadline_ns))
        take(s, &r, 1);
    nr_unlock(&s->mu);
    return r;
}

static void wait_until(nr_sched_t *s, uint64_t until)
{
    if (until == UINT64_MAX) {
        nr_lock_wait(&s->mu, &s->cv, NULL);
        return;
    }
    struct timespec ts = nr_timespec_of(until);
    nr_lock_wait(&s->mu, &s->cv, &ts);
}

size_t nr_sched_next_batch(nr_sched_t *s, nr_req_t **out, size_t cap, nr_req_t **expired,
                           nr_sched_waiter_t *self)
{
    nr_req_t *etail = NULL;
    *expired = NULL;
    nr_lock(&s->mu);
    for (;;) {
        if (self && self->borrowed) { /* a submitting thread runs on us */
            wait_until(s, UINT64_MAX);
            continue;
        }
        if (self && self->idle)
            idle_remove(s, self);
        uint64_t now = nr_now_ns();
        if (now >= s->next_deadline)
            apply_timeouts(s, now, expired, &etail);
        if (*expired) {
            nr_unlock(&s->mu);
            return 0;
        }
        if (s->queued == 0) {
            if (s->stopped) {
                nr_unlock(&s->mu);
                return 0;
            }
            if (self) {
                self->idle = true;
                self->next_idle = s->idle;
                s->idle = self;
            }
            wait_until(s, UINT64_MAX);
            continue;
        }
        uint64_t until = UINT64_MAX;
        size_t n = plan(s, now, &until);
        if (n == 0) {
            wait_until(s, until);
            continue;
        }
        if (n > cap)
            n = cap;
        take(s, out, n);
        bool more = s->queued > 0;
        nr_unlock(&s->mu);
        if (more) /* another idle instance can start on the rest */
            pthread_cond_signal(&s->cv);
        return n;
    }
}

static void finished(nr_sched_t *s, size_t n)
{
    nr_lock(&s->mu);
    s->executing -= n;
    nr_unlock(&s->mu);
}

/* Inserts r into the reorder buffer, kept sorted by arrival number. Context: ord_mu held. */
static void pending_insert(nr_sched_t *s, nr_req_t *r)
{
    NR_DEBUG_ASSERT(nr_lock_held(&s->ord_mu));
    nr_req_t **p = &s->pending;
    while (*p && (*p)->seq < r->seq)
        p = &(*p)->next;
    r->next = *p;
    *p = r;
}

void nr_sched_complete(nr_sched_t *s, nr_req_t **reqs, size_t n)
{
    NR_DEBUG_ASSERT(!nr_lock_held(&s->mu) && !nr_lock_held(&s->ord_mu));
    if (!s->ordered) {
        finished(s, n);
        for (size_t i = 0; i < n; i++)
            nr_req_done(reqs[i]);
        return;
    }
    nr_lock(&s->ord_mu);
    for (size_t i = 0; i < n; i++)
        pending_insert(s, reqs[i]);
    if (s->delivering) { /* the delivering thread will pick them up */
        nr_unlock(&s->ord_mu);
        return;
    }
    s->delivering = true;
    for (;;) {
        nr_req_t *chain = NULL, **end = &chain;
        size_t k = 0;
        while (s->pending && s->pending->seq == s->next_out) {
            nr_req_t *r = s->pending;
            s->pending = r->next;
            *end = r;
            end = &r->next;
            s->next_out++;
            k++;
        }
        *end = NULL;
        if (k == 0) {
            s->delivering = false;
            nr_unlock(&s->ord_mu);
            return;
        }
        nr_unlock(&s->ord_mu);
        finished(s, k);
        while (chain) {
            nr_req_t *r = chain;
            chain = r->next;
            r->next = NULL;
            nr_req_done(r);
        }
        nr_lock(&s->ord_mu);
    }
}

void nr_sched_stop(nr_sched_t *s)
{
    nr_lock(&s->mu);
    s->stopped = true;
    pthread_cond_broadcast(&s->cv);
    nr_unlock(&s->mu);
}

uint64_t nr_sched_inflight(nr_sched_t *s)
{
    nr_lock(&s->mu);
    uint64_t n = s->queued + s->executing;
    nr_unlock(&s->mu);
    return n;
}

uint64_t nr_sched_queued(nr_sched_t *s)
{
    nr_lock(&s->mu);
    uint64_t n = s->queued;
    nr_unlock(&s->mu);
    return n;
}

bool nr_sched_stopped(nr_sched_t *s)
{
    nr_lock(&s->mu);
    bool stopped = s->stopped;
    nr_unlock(&s->mu);
    return stopped;
}
