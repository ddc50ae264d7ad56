/* grpc_stream.c - ModelStreamInfer: the client writes requests on one call
 * and reads one response per request, several in flight at once. As in
 * Triton (stream_infer_handler.cc):
 *   - responses go out in request order, errors included (a request that
 *     finishes early waits for the ones before it; the responses of a decoupled
 *     model's request wait for every response of the requests before it);
 *   - an error is a ModelStreamInferResponse with error_message set and the
 *     stream goes on: before the request reached a model only the id is
 *     echoed, after it also the model name and version as sent and
 *     triton_final_response;
 *   - every response carries triton_final_response: true for a non-decoupled model; a
 *     decoupled model's responses go out as it sends them (false on all but the last), and
 *     its end without a response becomes an empty final response only when the request
 *     asked for one (triton_enable_empty_final_response);
 *   - once the client half-closes and the last response is written, the
 *     call ends with OK (CANCELLED when a write failed).
 *
 * gRPC allows one read and one write in flight per call: responses leave one
 * at a time from the head of the request list, and the next read is posted
 * once a message has been handed to the core. The list is under the stream's
 * mutex; gRPC batches are started after it is released.
 *
 * A request answered while its message was being handled (a model that runs
 * on the gRPC thread) whose response is the only one outstanding goes out in
 * one batch with the next read. gRPC 1.51 answers every read posted after a
 * message was consumed with a stream WINDOW_UPDATE written at once; alone,
 * that is a second sendmsg per request (and a second wake-up of the client),
 * in one batch it leaves in the response's write. The batch completes when
 * the next message arrives, so it is only used when no other response waits
 * behind it: a client waiting for several responses before it writes again
 * cannot be held up by it.
 */
#include "grpc_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define CONTAINER(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))

typedef struct stream_s stream_t;

/* A response ready to be written. */
typedef struct msg_s {
    struct msg_s *next;
    grpc_byte_buffer *bb;
    size_t len;
} msg_t;

/* One request of the stream, from its arrival to its last response leaving. */
typedef struct entry_s {
    struct entry_s *next;
    stream_t *s;
    msg_t *first, *last; /* its responses ready to go, in order */
    bool finished;       /* the last of them is among them (or it ends without one) */
} entry_t;

struct stream_s {
    nr_grpc_call_t *c;
    nr_grpc_tag_t on_meta, on_recv, on_send, on_sendrecv, on_status, on_close;
    grpc_byte_buffer *recv;  /* the message RECV_MESSAGE delivers */
    uint64_t t_read_ns;      /* when that read was asked for (tracing; 0: not taken) */
    grpc_byte_buffer *sent;  /* the response being written */
    pthread_mutex_t mu;
    entry_t *head, *tail;    /* requests in arrival order */
    bool sending;            /* a write is in flight */
    bool handling;           /* on_recv is handing a message to the core */
    bool read_done;          /* the client half-closed or the call broke */
    bool failed;             /* a write failed: end with CANCELLED */
    bool status_sent;
    int cancelled;           /* RECV_CLOSE_ON_SERVER */
    atomic_bool gone;        /* the client cancelled the call: its requests' `cancelled` */
    size_t backlog;          /* bytes of responses waiting (NR_STREAM_BACKLOG_MAX) */
    pthread_cond_t drained;  /* signalled when the backlog shrinks or the call fails */
    atomic_int refs;         /* one per batch in flight, one per request running */
    grpc_slice details;
};

/* The entry's next response, taken off its list (NULL: none ready). s->mu held, or the
 * stream going. */
static grpc_byte_buffer *take_msg(entry_t *e)
{
    msg_t *m = e->first;
    if (m == NULL)
        return NULL;
    e->first = m->next;
    if (e->first == NULL)
        e->last = NULL;
    grpc_byte_buffer *bb = m->bb;
    e->s->backlog -= m->len;
    if (m->len > 0)
        pthread_cond_broadcast(&e->s->drained);
    free(m);
    return bb;
}

static void free_entry(entry_t *e)
{
    grpc_byte_buffer *bb;
    while ((bb = take_msg(e)) != NULL)
        grpc_byte_buffer_destroy(bb);
    free(e);
}

static void stream_unref(stream_t *s)
{
    if (atomic_fetch_sub(&s->refs, 1) != 1)
        return;
    for (entry_t *e = s->head, *next; e != NULL; e = next) {
        next = e->next;
        free_entry(e);
    }
    if (s->sent != NULL)
        grpc_byte_buffer_destroy(s->sent);
    if (s->recv != NULL)
        grpc_byte_buffer_destroy(s->recv);
    grpc_slice_unref(s->details);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->drained);
    nr_grpc_call_t *c = s->c;
    free(s);
    nr_grpc_call_free(c);
}

static bool start(stream_t *s, grpc_op *ops, size_t n, nr_grpc_tag_t *tag)
{
    atomic_fetch_add(&s->refs, 1);
    grpc_call_error err = grpc_call_start_batch(s->c->call, ops, n, nr_grpc_arm(tag), NULL);
    if (err == GRPC_CALL_OK)
        return true;
    NR_LOG_VERBOSE(1, "gRPC stream: cannot start a batch (call error %d)", (int)err);
    stream_unref(s);
    return false;
}

static void post_read(stream_t *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv;
    s->t_read_ns = nr_trace_armed() ? nr_now_ns() : 0;
    if (!start(s, &op, 1, &s->on_recv)) {
        pthread_mutex_lock(&s->mu);
        s->read_done = true;
        pthread_mutex_unlock(&s->mu);
    }
}

/* What to start once the lock is released: the next response, or the status. */
typedef struct {
    grpc_byte_buffer *send;
    bool status;
    bool ok;
} next_t;

static next_t next_locked(stream_t *s)
{
    next_t n = {NULL, false, true};
    if (s->sending || s->status_sent || s->handling)
        return n; /* on_send, or on_recv once it has handled its message, comes back */
    while (s->head != NULL) {
        entry_t *e = s->head;
        grpc_byte_buffer *bb = take_msg(e);
        if (bb != NULL && s->failed) { /* nothing more is written; drop what is ready */
            grpc_byte_buffer_destroy(bb);
            continue;
        }
        if (bb == NULL && e->finished) { /* all its responses have left */
            s->head = e->next;
            if (s->head == NULL)
                s->tail = NULL;
            free(e);
            continue;
        }
        if (bb != NULL) {
            n.send = bb;
            s->sending = true;
            s->sent = bb;
            return n;
        }
        break; /* the head's next response is not ready */
    }
    if (s->head == NULL && s->read_done) {
        s->status_sent = true;
        n.status = true;
        n.ok = !s->failed;
    }
    return n;
}

/* A batch with a write could not be started: the call is over, nothing more is
 * written (read_too: the batch held the read as well, so nothing more comes
 * in). Returns what to do next: end the call, once nothing else runs. */
static next_t write_failed(stream_t *s, bool read_too)
{
    pthread_mutex_lock(&s->mu);
    s->sending = false;
    s->failed = true;
    if (read_too)
        s->read_done = true;
    next_t n = next_locked(s);
    pthread_mutex_unlock(&s->mu);
    return n;
}

static void run_next(stream_t *s, next_t n)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    if (n.send != NULL) {
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = n.send;
        if (!start(s, &op, 1, &s->on_send))
            run_next(s, write_failed(s, false));
    } else if (n.status) {
        op.op = GRPC_OP_SEND_STATUS_FROM_SERVER;
        op.data.send_status_from_server.status = n.ok ? GRPC_STATUS_OK : GRPC_STATUS_CANCELLED;
        if (!n.ok) {
            s->details = grpc_slice_from_static_string("a response could not be written");
            op.data.send_status_from_server.status_details = &s->details;
        }
        start(s, &op, 1, &s->on_status);
    }
}

static void pump(stream_t *s)
{
    pthread_mutex_lock(&s->mu);
    next_t n = next_locked(s);
    pthread_mutex_unlock(&s->mu);
    run_next(s, n);
}

/* A response of entry e is ready (msg NULL: none, only the end); `last`: e has no more. */
static void complete(entry_t *e, grpc_byte_buffer *msg, bool last)
{
    stream_t *s = e->s;
    msg_t *m = NULL;
    if (msg != NULL) {
        m = nr_malloc(sizeof(*m));
        *m = (msg_t){NULL, msg, grpc_byte_buffer_length(msg)};
    }
    pthread_mutex_lock(&s->mu);
    if (m != NULL && s->failed) { /* nothing more is written: none kept */
        grpc_byte_buffer_destroy(m->bb);
        free(m);
    } else if (m != NULL) {
        if (e->last != NULL)
            e->last->next = m;
        else
            e->first = m;
        e->last = m;
        s->backlog += m->len;
    }
    e->finished = last;
    next_t n = next_locked(s);
    pthread_mutex_unlock(&s->mu);
    run_next(s, n);
    if (last)
        stream_unref(s); /* the request's reference */
}

/* Before a decoupled model's next response (infer.h, NR_STREAM_BACKLOG_MAX): while too much
 * waits for the client, the model waits; a client that takes nothing for NR_STREAM_STALL_NS
 * ends the call (RESOURCE_EXHAUSTED), what waited is freed and its requests read as
 * cancelled. Never on a completion-queue thread (decoupled models do not run inline). */
static void wait_for_client(stream_t *s)
{
    bool overrun = false;
    pthread_mutex_lock(&s->mu);
    struct timespec until = nr_timespec_of(nr_now_ns() + NR_STREAM_STALL_NS);
    while (s->backlog > NR_STREAM_BACKLOG_MAX && !s->failed && !overrun)
        overrun = pthread_cond_timedwait(&s->drained, &s->mu, &until) == ETIMEDOUT &&
                  s->backlog > NR_STREAM_BACKLOG_MAX && !s->failed;
    if (overrun) {
        s->failed = true;
        atomic_store(&s->gone, true);
        for (entry_t *x = s->head; x != NULL; x = x->next) {
            grpc_byte_buffer *bb;
            while ((bb = take_msg(x)) != NULL)
                grpc_byte_buffer_destroy(bb);
        }
    }
    pthread_mutex_unlock(&s->mu);
    if (overrun) {
        NR_LOG_VERBOSE(1, "gRPC stream: the client took no response for %llu s with more "
                          "than %zu bytes waiting: the call ends",
                       NR_STREAM_STALL_NS / 1000000000ull, NR_STREAM_BACKLOG_MAX);
        grpc_call_cancel_with_status(s->c->call, GRPC_STATUS_RESOURCE_EXHAUSTED,
                                     "the client took no response for too long while too many "
                                     "waited to be sent", NULL);
    }
}

/* A decoupled model's response: out now, in the request's place (responses leave in request
 * order, as every response of the stream does). */
static void request_response(nr_grpc_infer_t *inf, const nr_status_t *err, unsigned flags)
{
    wait_for_client(((entry_t *)inf->owner)->s);
    bool final = flags & NR_RESPONSE_FINAL;
    grpc_byte_buffer *bb = NULL;
    if (err != NULL) {
        bb = nr_grpc_stream_error(inf, true, final, err);
    } else if (flags & NR_RESPONSE_NONE) {
        if (final && inf->base.empty_final)
            bb = nr_grpc_stream_empty_final(inf);
    } else {
        nr_status_t *st = nr_grpc_infer_reply(inf, true, final, &bb);
        if (st != NULL) {
            bb = nr_grpc_stream_error(inf, true, final, st);
            nr_status_free(st);
        }
    }
    if (bb != NULL)
        complete(inf->owner, bb, false);
}

static void request_done(nr_grpc_infer_t *inf)
{
    entry_t *e = inf->owner;
    grpc_byte_buffer *bb = NULL;
    const nr_req_t *req = inf->base.req;
    if (!inf->base.model->cfg->decoupled) {
        nr_status_t *st = nr_grpc_infer_reply(inf, true, true, &bb);
        if (st != NULL) {
            bb = nr_grpc_stream_error(inf, true, true, st);
            nr_status_free(st);
        }
    } else if (req->status != NULL) { /* it failed before its last response */
        bb = nr_grpc_stream_error(inf, true, true, req->status);
    } /* else: its responses have gone out through request_response */
    nr_grpc_infer_free(inf);
    complete(e, bb, true);
}

/* A request arrived: queue its place in the response order and submit it. */
static void handle(stream_t *s, grpc_byte_buffer *payload)
{
    uint64_t t_read_end = s->t_read_ns ? nr_now_ns() : 0;
    entry_t *e = nr_calloc(1, sizeof(*e));
    e->s = s;
    atomic_fetch_add(&s->refs, 1); /* released by complete() */
    pthread_mutex_lock(&s->mu);
    if (s->tail != NULL)
        s->tail->next = e;
    else
        s->head = e;
    s->tail = e;
    pthread_mutex_unlock(&s->mu);
    grpc_slice in;
    nr_status_t *st = nr_grpc_payload(payload, &in);
    grpc_byte_buffer_destroy(payload);
    nr_grpc_infer_t *inf = NULL;
    if (st == NULL)
        st = nr_grpc_infer_parse(s->c->srv->core, GRPC_SLICE_START_PTR(in),
                                 GRPC_SLICE_LENGTH(in), true, &inf);
    grpc_slice_unref(in);
    if (st == NULL) {
        nr_grpc_infer_headers(inf, s->c); /* the stream's metadata, for each of its requests */
        nr_grpc_infer_trace_recv(inf, s->t_read_ns, t_read_end);
        inf->owner = e;
        inf->on_done = request_done;
        inf->on_response = request_response;
        inf->base.req->cancelled = &s->gone; /* the stream outlives its requests (refs) */
        st = nr_grpc_infer_submit(inf);
        if (st == NULL)
            return; /* request_done completes it, maybe already has */
    }
    grpc_byte_buffer *bb = nr_grpc_stream_error(inf, false, true, st);
    nr_status_free(st);
    nr_grpc_infer_free(inf);
    complete(e, bb, true);
}

/* What the last read delivered: a message, or NULL once the client half-closed
 * or the call broke. */
static void received(stream_t *s, grpc_byte_buffer *payload)
{
    if (payload == NULL) {
        pthread_mutex_lock(&s->mu);
        s->read_done = true;
        pthread_mutex_unlock(&s->mu);
        pump(s);
        return;
    }
    pthread_mutex_lock(&s->mu);
    s->handling = true;
    pthread_mutex_unlock(&s->mu);
    handle(s, payload);
    pthread_mutex_lock(&s->mu);
    s->handling = false;
    grpc_byte_buffer *with_read = NULL;
    entry_t *e = s->head;
    if (!s->sending && !s->status_sent && !s->failed && e != NULL && e->next == NULL &&
        e->finished && e->first != NULL && e->first == e->last) {
        with_read = take_msg(e);
        s->head = s->tail = NULL;
        free(e);
        s->sending = true;
        s->sent = with_read;
    }
    next_t n = with_read == NULL ? next_locked(s) : (next_t){NULL, false, true};
    pthread_mutex_unlock(&s->mu);
    if (with_read != NULL) {
        grpc_op ops[2];
        memset(ops, 0, sizeof(ops));
        ops[0].op = GRPC_OP_SEND_MESSAGE;
        ops[0].data.send_message.send_message = with_read;
        ops[1].op = GRPC_OP_RECV_MESSAGE;
        ops[1].data.recv_message.recv_message = &s->recv;
        s->t_read_ns = nr_trace_armed() ? nr_now_ns() : 0;
        if (start(s, ops, 2, &s->on_sendrecv))
            return;
        n = write_failed(s, true);
    } else {
        post_read(s);
    }
    run_next(s, n);
}

static void on_recv(nr_grpc_tag_t *t, bool ok)
{
    stream_t *s = CONTAINER(t, stream_t, on_recv);
    grpc_byte_buffer *payload = ok ? s->recv : NULL;
    s->recv = NULL;
    received(s, payload);
    stream_unref(s);
}

/* The response written with the read has left, or the call broke. */
static void sent(stream_t *s, bool ok)
{
    pthread_mutex_lock(&s->mu);
    grpc_byte_buffer_destroy(s->sent);
    s->sent = NULL;
    s->sending = false;
    if (!ok)
        s->failed = true;
    next_t n = next_locked(s);
    pthread_mutex_unlock(&s->mu);
    run_next(s, n);
}

static void on_send(nr_grpc_tag_t *t, bool ok)
{
    stream_t *s = CONTAINER(t, stream_t, on_send);
    sent(s, ok);
    stream_unref(s);
}

/* A batch of a response and the next read: both are done. A failed batch is
 * a broken call: the write counts as failed and the read as the end. */
static void on_sendrecv(nr_grpc_tag_t *t, bool ok)
{
    stream_t *s = CONTAINER(t, stream_t, on_sendrecv);
    grpc_byte_buffer *payload = s->recv;
    s->recv = NULL;
    if (!ok && payload != NULL) {
        grpc_byte_buffer_destroy(payload);
        payload = NULL;
    }
    sent(s, ok); /* nothing else waits: no read was posted since */
    received(s, payload);
    stream_unref(s);
}

static void on_meta(nr_grpc_tag_t *t, bool ok)
{
    (void)ok;
    stream_unref(CONTAINER(t, stream_t, on_meta));
}

static void on_status(nr_grpc_tag_t *t, bool ok)
{
    (void)ok;
    stream_unref(CONTAINER(t, stream_t, on_status));
}

static void on_close(nr_grpc_tag_t *t, bool ok)
{
    (void)ok;
    stream_t *s = CONTAINER(t, stream_t, on_close);
    if (s->cancelled) { /* the client went away: nothing more will be written */
        atomic_store(&s->gone, true); /* nor started for its requests (request.h) */
        pthread_mutex_lock(&s->mu);
        s->failed = true;
        s->read_done = true;
        pthread_mutex_unlock(&s->mu);
    }
    stream_unref(s);
}

void nr_grpc_stream_start(nr_grpc_call_t *c)
{
    stream_t *s = nr_calloc(1, sizeof(*s));
    s->c = c;
    c->state = s;
    s->on_meta.fn = on_meta;
    s->on_recv.fn = on_recv;
    s->on_send.fn = on_send;
    s->on_sendrecv.fn = on_sendrecv;
    s->on_status.fn = on_status;
    s->on_close.fn = on_close;
    s->details = grpc_empty_slice();
    pthread_mutex_init(&s->mu, NULL);
    nr_cond_init_monotonic(&s->drained);
    atomic_init(&s->refs, 1); /* ours, until the first batches are posted */
    grpc_op ops[1];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    nr_grpc_compression_t cl = c->srv->opts.compression;
    if (cl != NR_GRPC_COMPRESS_NONE) {
        ops[0].data.send_initial_metadata.maybe_compression_level.is_set = 1;
        ops[0].data.send_initial_metadata.maybe_compression_level.level = nr_grpc_level(cl);
    }
    start(s, ops, 1, &s->on_meta);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[0].data.recv_close_on_server.cancelled = &s->cancelled;
    start(s, ops, 1, &s->on_close);
    post_read(s);
    stream_unref(s);
}
