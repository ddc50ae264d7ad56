/* http_stream.c - a reply sent while it is being made (server-sent events: generate_stream).
 *
 * The producer (a request's response callback, on an instance thread) appends to a buffer
 * under the stream's mutex; libmicrohttpd pulls from it with a content-reader callback
 * (chunked transfer encoding). When nothing is waiting, the reader suspends the connection
 * (libmicrohttpd allows it from the reader) and the producer's next write or the end resumes
 * it, so no thread polls and none waits. The stream is shared by the producer and the reply:
 * whichever lets go last frees it; once the reply is gone (the client left, or the server
 * dropped it) `gone` is set, which the request reads as cancelled, and writes are dropped.
 * A stream counts among the server's parked connections until its end: libmicrohttpd may not
 * stop with a connection suspended, so the server's stop waits for it, as for a parked one.
 * With more than NR_STREAM_BACKLOG_MAX bytes waiting the producer waits for the client; one
 * that takes nothing for NR_STREAM_STALL_NS ends the stream (infer.h): the buffer is freed, the
 * request reads as cancelled, the connection is closed.
 */
#include "http_conn.h"
#include "http_int.h"

#include "../../common/alloc.h"

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct nr_http_stream_s {
    pthread_mutex_t mu;
    nr_buf_t buf;               /* waiting to be sent: [sent, len) */
    size_t sent;
    bool ended;                 /* no more writes */
    bool overrun;               /* the client took nothing for too long: the reply ends */
    pthread_cond_t drained;     /* signalled when the reader takes bytes or the reply goes */
    bool suspended;             /* the reader suspended conn waiting for data */
    struct MHD_Connection *conn; /* set once the reply is queued */
    atomic_bool gone;           /* the reply was dropped: the client is not reading */
    int refs;                   /* the producer's and the reply's */
    atomic_int *open;           /* the server's count, which its stop waits to see at 0 */
};

nr_http_stream_t *nr_http_stream_new(atomic_int *open)
{
    nr_http_stream_t *st = nr_calloc(1, sizeof(*st));
    st->open = open;
    atomic_fetch_add(open, 1);
    pthread_mutex_init(&st->mu, NULL);
    nr_cond_init_monotonic(&st->drained);
    nr_buf_init(&st->buf);
    atomic_init(&st->gone, false);
    st->refs = 2;
    return st;
}

static void unref(nr_http_stream_t *st)
{
    pthread_mutex_lock(&st->mu);
    bool last = --st->refs == 0;
    pthread_mutex_unlock(&st->mu);
    if (!last)
        return;
    nr_buf_free(&st->buf);
    pthread_mutex_destroy(&st->mu);
    pthread_cond_destroy(&st->drained);
    free(st);
}

/* Wakes a reader that waits for data. mu held. */
static void resume_locked(nr_http_stream_t *st)
{
    if (st->suspended) {
        st->suspended = false;
        MHD_resume_connection(st->conn);
    }
}

void nr_http_stream_write(nr_http_stream_t *st, const char *p, size_t n)
{
    if (atomic_load(&st->gone))
        return;
    pthread_mutex_lock(&st->mu);
    struct timespec until = nr_timespec_of(nr_now_ns() + NR_STREAM_STALL_NS);
    bool stalled = false; /* too much waits: the producer waits for the client (infer.h) */
    while (st->buf.len - st->sent > NR_STREAM_BACKLOG_MAX && !st->overrun &&
           !atomic_load(&st->gone) && !stalled)
        stalled = pthread_cond_timedwait(&st->drained, &st->mu, &until) == ETIMEDOUT &&
                  st->buf.len - st->sent > NR_STREAM_BACKLOG_MAX;
    if (!st->ended && !st->overrun && !atomic_load(&st->gone)) {
        if (stalled) { /* the client took nothing for too long */
            st->overrun = true;
            atomic_store(&st->gone, true);
            nr_buf_free(&st->buf);
            nr_buf_init(&st->buf);
            st->sent = 0;
        } else {
            if (st->sent > 0 && st->sent >= st->buf.len / 2) { /* what left goes: amortized */
                memmove(st->buf.data, st->buf.data + st->sent, st->buf.len - st->sent);
                st->buf.len -= st->sent;
                st->sent = 0;
            }
            nr_buf_append(&st->buf, p, n);
        }
        resume_locked(st);
    }
    pthread_mutex_unlock(&st->mu);
}

void nr_http_stream_end(nr_http_stream_t *st)
{
    pthread_mutex_lock(&st->mu);
    st->ended = true;
    resume_locked(st);
    atomic_fetch_sub(st->open, 1); /* no longer suspended for good: the server may stop */
    pthread_mutex_unlock(&st->mu);
    unref(st); /* the producer's reference */
}

void nr_http_stream_drop(nr_http_stream_t *st)
{
    atomic_store(&st->gone, true);
    unref(st); /* the reply's: it was never made */
}

const atomic_bool *nr_http_stream_gone(const nr_http_stream_t *st)
{
    return &st->gone;
}

static ssize_t reader(void *cls, uint64_t pos, char *out, size_t max)
{
    nr_http_stream_t *st = cls;
    (void)pos;
    pthread_mutex_lock(&st->mu);
    if (st->overrun) {
        pthread_mutex_unlock(&st->mu);
        return MHD_CONTENT_READER_END_WITH_ERROR; /* the connection is closed */
    }
    size_t avail = st->buf.len - st->sent;
    if (avail > 0) {
        size_t n = avail < max ? avail : max;
        memcpy(out, st->buf.data + st->sent, n);
        st->sent += n;
        pthread_cond_broadcast(&st->drained);
        if (st->sent == st->buf.len) /* all out: the buffer starts over */
            st->buf.len = st->sent = 0;
        pthread_mutex_unlock(&st->mu);
        return (ssize_t)n;
    }
    if (st->ended) {
        pthread_mutex_unlock(&st->mu);
        return MHD_CONTENT_READER_END_OF_STREAM;
    }
    st->suspended = true; /* the next write or the end resumes it */
    MHD_suspend_connection(st->conn);
    pthread_mutex_unlock(&st->mu);
    return 0;
}

static void reply_gone(void *cls)
{
    nr_http_stream_t *st = cls;
    atomic_store(&st->gone, true);
    pthread_mutex_lock(&st->mu);
    pthread_cond_broadcast(&st->drained);
    pthread_mutex_unlock(&st->mu);
    unref(st); /* the reply's reference */
}

struct MHD_Response *nr_http_stream_response(nr_http_stream_t *st, struct MHD_Connection *c)
{
    pthread_mutex_lock(&st->mu);
    st->conn = c;
    pthread_mutex_unlock(&st->mu);
    struct MHD_Response *mr = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, reader,
                                                                st, reply_gone);
    if (mr == NULL)
        nr_http_stream_drop(st);
    return mr;
}
