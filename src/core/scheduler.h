/* scheduler.h - one queue per model version, shared by its instances, and
 * Triton's dynamic batcher.
 *
 * Producers (frontend threads) enqueue; each idle instance thread forms its
 * next batch under the queue lock (no batcher thread, no extra hop) and then
 * executes it with no lock held, so while one instance executes, the next
 * idle one is already forming the following batch. Without a batcher, a producer that finds
 * nothing queued and an instance idle borrows that instance instead of queuing
 * (nr_sched_submit), runs its request on it on its own thread, then the requests that queued
 * behind it meanwhile (nr_sched_take_next), and gives it back (nr_sched_give_back); the
 * instance's thread sleeps while its instance is borrowed. Without dynamic_batching
 * a batch is one request; with it, queued requests are combined following
 * Triton's rules (preferred sizes, max_queue_delay_microseconds, priority
 * levels, queue policies with timeouts, equal shapes unless ragged), and
 * preserve_ordering hands responses back in arrival order.
 *
 * Locks: `mu` guards the queues, the idle stack and the waiters' flags; `ord_mu` guards the
 * completion reorder buffer (preserve_ordering only). No thread holds both, and neither is
 * held across a backend call, a done() callback, I/O or logging; no function here is called
 * with either held. The debug builds assert it (common/debug.h).
 */
#ifndef NR_SCHEDULER_H
#define NR_SCHEDULER_H

#include "../config/model_config.h"
#include "request.h"

#include <pthread.h>

#include <stddef.h>

typedef struct nr_sched_s nr_sched_t;

/* An instance thread's place in the scheduler: idle instances wait on a stack
 * so that a submitting thread can borrow one and run its request inline (no
 * thread hop) when nothing is queued. Owned by the instance; its flags are read and written
 * under mu. idle and borrowed are never both true; while borrowed, only the borrower runs
 * batches on the instance. */
typedef struct nr_sched_waiter_s {
    void *owner;   /* the instance */
    bool idle;     /* on the idle stack */
    bool borrowed; /* a submitting thread is running a request on it */
    struct nr_sched_waiter_s *next_idle;
#ifdef NR_DEBUG
    pthread_t borrower; /* the thread that borrowed it (borrowed only) */
#endif
} nr_sched_waiter_t;

/* Context: the loading thread. */
nr_sched_t *nr_sched_create(const nr_model_config_t *cfg);
/* Context: the unloading thread, after every instance thread has been joined. */
void nr_sched_destroy(nr_sched_t *s);
/* Queues a validated request at its priority level. On success takes
 * ownership of req until nr_sched_complete hands it back through req->done.
 * On failure nothing is queued, req stays the caller's, and the error is
 * UNAVAILABLE: "[request id: <id>] Exceeds maximum queue size" when the level's
 * queue holds max_queue_size requests, or "Server is stopping".
 * Context: any thread (a frontend's, warmup's); takes mu briefly; never blocks otherwise. */
NR_MUST_CHECK nr_status_t *nr_sched_enqueue(nr_sched_t *s, nr_req_t *req);
/* Like nr_sched_enqueue, but when `allow_inline`, nothing is queued, an
 * instance is idle and the model's policy dispatches at once (no queue delay,
 * no preserve_ordering), the request is not queued: the idle instance is
 * borrowed and returned in *borrowed. The caller then runs req on
 * (*borrowed)->owner and gives it back with nr_sched_give_back.
 * Context: a frontend thread (nr_model_submit); takes mu briefly. */
NR_MUST_CHECK nr_status_t *nr_sched_submit(nr_sched_t *s, nr_req_t *req, bool allow_inline,
                                           nr_sched_waiter_t **borrowed);
/* Returns a borrowed instance: idle again, its thread woken if work queued meanwhile.
 * Context: the thread that borrowed w (asserted in the debug builds); takes mu briefly. */
void nr_sched_give_back(nr_sched_t *s, nr_sched_waiter_t *w);
/* For the thread that borrowed an instance (nr_sched_submit): the oldest
 * queued request, taken as an instance thread would take it, to run next on
 * that instance (it queued because the instance was busy; running it here
 * saves waking the instance's thread for it), or NULL when nothing waits, the
 * model batches, it is stopping, or deadline_ns (0: none) has passed. The
 * clock is read only when a request waits.
 * Context: the thread that borrowed an instance of s, before giving it back; takes mu briefly. */
nr_req_t *nr_sched_take_next(nr_sched_t *s, uint64_t deadline_ns);
/* Blocks until an idle instance has work. Returns n > 0 with out[0..n) the
 * next batch (n <= cap), in arrival order within priority order. Returns 0
 * with *expired != NULL: requests whose queue timeout expired under
 * timeout_action REJECT, linked through ->next; the caller sets their status
 * ("Request timeout expired") and passes them to nr_sched_complete, never to
 * the backend. Returns 0 with *expired == NULL once stopped and drained.
 * The caller owns what it gets until nr_sched_complete.
 * Context: the instance thread that owns `self`; blocks on the queue's condition variable
 * (mu released while waiting), also while its instance is borrowed. */
size_t nr_sched_next_batch(nr_sched_t *s, nr_req_t **out, size_t cap, nr_req_t **expired,
                           nr_sched_waiter_t *self);
/* Hands n finished requests back: calls each req->done exactly once, outside
 * every lock; with preserve_ordering in arrival order across all instances
 * (a request waits in the reorder buffer until every earlier one is done).
 * Takes ownership of the requests; the caller must not touch them after.
 * Context: the thread that executed them (an instance's, or its borrower); takes mu and
 * ord_mu briefly, never across a done(); with preserve_ordering the done() of requests that
 * other instances finished may run here. */
void nr_sched_complete(nr_sched_t *s, nr_req_t **reqs, size_t n);
/* After this, next_batch sends what is queued without waiting, then returns 0.
 * Context: the unloading thread; takes mu briefly. */
void nr_sched_stop(nr_sched_t *s);
/* Queued requests plus requests handed out and not yet completed.
 * Context: any thread (the drain, statistics); takes mu briefly. */
uint64_t nr_sched_inflight(nr_sched_t *s);
/* Requests waiting in the queues (all levels, delayed ones included): the
 * pending request count of the metrics (queued, not yet executing).
 * Context: any thread (a metrics scrape); takes mu briefly. */
uint64_t nr_sched_queued(nr_sched_t *s);
/* Whether nr_sched_stop was called (it stays so): a refused submit was then
 * "Server is stopping", not a full queue. Context: any thread; takes mu briefly. */
bool nr_sched_stopped(nr_sched_t *s);

#endif
