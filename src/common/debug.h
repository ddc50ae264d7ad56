/* debug.h - assertions of invariants and of who holds which lock, compiled into the debug
 * builds only (-DNR_DEBUG: the ASan+UBSan and TSan builds of `make test`), as SQLite asserts
 * sqlite3_mutex_held(): they state the threading contract where it is relied on, and the
 * sanitizer runs check it. A release build compiles them to nothing; nothing a client or a
 * config file can cause may trip one (those are errors with a status).
 *
 * nr_lock_t is a pthread mutex whose debug builds also record the owning thread, so that a
 * function documented "Context: <lock> held" can assert it with NR_DEBUG_ASSERT(nr_lock_held).
 */
#ifndef NR_DEBUG_H
#define NR_DEBUG_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <time.h>

#ifdef NR_DEBUG
#define NR_DEBUG_ASSERT(cond) \
    ((cond) ? (void)0 : nr_debug_fail(#cond, __FILE__, __LINE__, __func__))
#define NR_DEBUG_ONLY(...) __VA_ARGS__
#else
#define NR_DEBUG_ASSERT(cond) ((void)0)
#define NR_DEBUG_ONLY(...)
#endif

/* Logs "<func>: assertion failed: <cond>" at file:line (Triton's log format) and aborts. */
_Noreturn void nr_debug_fail(const char *cond, const char *file, int line, const char *func);

typedef struct {
    pthread_mutex_t mu;
#ifdef NR_DEBUG
    /* atomic, so that a thread may ask whether it holds the lock while another does: the
     * owner is stored before `held` and read after it */
    _Atomic pthread_t owner;
    _Atomic bool held;
#endif
} nr_lock_t;

static inline void nr_lock_init(nr_lock_t *l)
{
    pthread_mutex_init(&l->mu, NULL);
    NR_DEBUG_ONLY(l->held = false;)
}

static inline void nr_lock_destroy(nr_lock_t *l)
{
    NR_DEBUG_ASSERT(!l->held);
    pthread_mutex_destroy(&l->mu);
}

static inline void nr_lock(nr_lock_t *l)
{
    pthread_mutex_lock(&l->mu);
    NR_DEBUG_ONLY(l->owner = pthread_self(); l->held = true;)
}

static inline void nr_unlock(nr_lock_t *l)
{
    NR_DEBUG_ASSERT(l->held && pthread_equal(l->owner, pthread_self()));
    NR_DEBUG_ONLY(l->held = false;)
    pthread_mutex_unlock(&l->mu);
}

/* pthread_cond_wait / pthread_cond_timedwait (abstime NULL: no limit) on l, which the caller
 * holds; it is held again on return. */
static inline void nr_lock_wait(nr_lock_t *l, pthread_cond_t *cv, const struct timespec *abstime)
{
    NR_DEBUG_ASSERT(l->held && pthread_equal(l->owner, pthread_self()));
    NR_DEBUG_ONLY(l->held = false;)
    if (abstime != NULL)
        pthread_cond_timedwait(cv, &l->mu, abstime);
    else
        pthread_cond_wait(cv, &l->mu);
    NR_DEBUG_ONLY(l->owner = pthread_self(); l->held = true;)
}

#ifdef NR_DEBUG
/* Whether the calling thread holds l (debug builds only: use inside NR_DEBUG_ASSERT). */
static inline bool nr_lock_held(const nr_lock_t *l)
{
    return l->held && pthread_equal(l->owner, pthread_self());
}
#endif

#endif
