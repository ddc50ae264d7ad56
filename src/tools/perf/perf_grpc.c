/* perf_grpc.c - nereid-perf over gRPC (perf.h): blocking unary calls on gRPC's C core (one
 * channel with its own connection and its own completion queue per thread), the queries
 * perf_analyzer makes (ModelMetadata, ModelConfig, ServerMetadata, ModelStatistics) read with
 * protobuf-c from nereid's .proto description, and ModelInfer with the inputs as
 * raw_input_contents, serialized once and sent by every worker as it is.
 */
#include "perf.h"

#include "../../common/alloc.h"
#include "../../common/varint.h"
#include "proto/grpc_service.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>
#include <stdlib.h>
#include <string.h>

#define METHOD(m) "/inference.GRPCInferenceService/" m

nr_status_t *perf_grpc_open(perf_grpc_t *g, const char *url)
{
    memset(g, 0, sizeof(*g));
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    /* a private subchannel pool: every channel its own connection, as every HTTP worker has */
    grpc_arg a[2] = {
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, {.integer = 1}},
        {GRPC_ARG_INTEGER, (char *)GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, {.integer = -1}},
    };
    grpc_channel_args ca = {2, a};
    g->ch = grpc_channel_create(url, creds, &ca);
    grpc_channel_credentials_release(creds);
    g->cq = grpc_completion_queue_create_for_pluck(NULL);
    return g->ch && g->cq ? NULL : nr_status_new(NR_UNAVAILABLE, "cannot create a gRPC channel "
                                                 "to '%s'", url);
}

static void stream_close(perf_grpc_t *g);

void perf_grpc_close(perf_grpc_t *g)
{
    stream_close(g);
    if (g->ch)
        grpc_channel_destroy(g->ch);
    if (g->cq) {
        grpc_completion_queue_shutdown(g->cq);
        grpc_completion_queue_destroy(g->cq);
    }
    memset(g, 0, sizeof(*g));
}

/* One unary call's state: the six operations of its one batch and what they fill. */
typedef struct {
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array md, trailers;
    grpc_status_code status;
    grpc_slice details;
    grpc_op ops[6];
} unary_t;

static void unary_init(unary_t *u, grpc_byte_buffer *send)
{
    memset(u, 0, sizeof(*u));
    u->send = send;
    grpc_metadata_array_init(&u->md);
    grpc_metadata_array_init(&u->trailers);
    u->status = GRPC_STATUS_UNKNOWN;
    u->details = grpc_empty_slice();
    u->ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    u->ops[1].op = GRPC_OP_SEND_MESSAGE;
    u->ops[1].data.send_message.send_message = send;
    u->ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    u->ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    u->ops[3].data.recv_initial_metadata.recv_initial_metadata = &u->md;
    u->ops[4].op = GRPC_OP_RECV_MESSAGE;
    u->ops[4].data.recv_message.recv_message = &u->recv;
    u->ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    u->ops[5].data.recv_status_on_client.trailing_metadata = &u->trailers;
    u->ops[5].data.recv_status_on_client.status = &u->status;
    u->ops[5].data.recv_status_on_client.status_details = &u->details;
}

/* The call's error from its status (NULL when OK). */
static nr_status_t *unary_error(const unary_t *u)
{
    if (u->status == GRPC_STATUS_OK)
        return NULL;
    char *d = grpc_slice_to_c_string(u->details);
    nr_status_t *st = nr_status_new(NR_UNAVAILABLE, "%s", d);
    gpr_free(d);
    return st;
}

static void unary_free(unary_t *u)
{
    if (u->recv)
        grpc_byte_buffer_destroy(u->recv);
    if (u->send)
        grpc_byte_buffer_destroy(u->send);
    grpc_slice_unref(u->details);
    grpc_metadata_array_destroy(&u->md);
    grpc_metadata_array_destroy(&u->trailers);
    u->send = u->recv = NULL;
}

/* One unary call; the response's bytes into *out (reset first). r (may be NULL) gets the time
 * spent building the request's buffer (send_ns) and reading the response's (recv_ns). */
static nr_status_t *call(perf_grpc_t *g, const char *method, const void *req, size_t len,
                         nr_buf_t *out, perf_resp_t *r)
{
    /* marshal: gRPC gets its own copy (its threads may still read it after the call returns,
     * through synchronisation ThreadSanitizer cannot see in the uninstrumented library) */
    uint64_t t0 = perf_now_ns();
    grpc_slice s = grpc_slice_from_copied_buffer(req, len);
    unary_t u;
    unary_init(&u, grpc_raw_byte_buffer_create(&s, 1));
    grpc_slice_unref(s);
    uint64_t t1 = perf_now_ns();
    grpc_call *c = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, g->cq,
                                            grpc_slice_from_static_string(method), NULL,
                                            gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    nr_status_t *st = NULL;
    if (grpc_call_start_batch(c, u.ops, 6, c, NULL) != GRPC_CALL_OK)
        st = nr_status_new(NR_INTERNAL, "cannot start a gRPC call");
    else
        (void)grpc_completion_queue_pluck(g->cq, c, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    uint64_t t2 = perf_now_ns();
    if (st == NULL)
        st = unary_error(&u);
    nr_buf_reset(out);
    if (st == NULL && u.recv) {
        grpc_byte_buffer_reader rd;
        if (grpc_byte_buffer_reader_init(&rd, u.recv)) {
            grpc_slice all = grpc_byte_buffer_reader_readall(&rd);
            nr_buf_append(out, GRPC_SLICE_START_PTR(all), GRPC_SLICE_LENGTH(all));
            grpc_slice_unref(all);
            grpc_byte_buffer_reader_destroy(&rd);
        }
    }
    if (r) {
        r->status = st ? (int)u.status : 0;
        r->send_ns = t1 - t0;
        r->recv_ns = perf_now_ns() - t2;
    }
    unary_free(&u);
    grpc_call_unref(c);
    return st;
}

/* ---- the pool: many calls in flight on one completion queue ---- */

struct perf_grpc_slot {
    grpc_channel *ch;
    grpc_call *call; /* NULL when idle */
    unary_t u;
};

nr_status_t *perf_grpc_pool_open(perf_grpc_pool_t *p, const char *url, size_t n)
{
    memset(p, 0, sizeof(*p));
    p->cq = grpc_completion_queue_create_for_next(NULL);
    p->slots = nr_calloc(n + 1, sizeof(*p->slots));
    for (; p->n < n; p->n++) {
        perf_grpc_t g;
        nr_status_t *st = perf_grpc_open(&g, url); /* the same channel settings */
        if (g.cq) {
            grpc_completion_queue_shutdown(g.cq);
            grpc_completion_queue_destroy(g.cq);
        }
        p->slots[p->n].ch = g.ch;
        if (st)
            return st;
    }
    return NULL;
}

static nr_status_t *slot_end(perf_grpc_slot_t *s);

nr_status_t *perf_grpc_pool_start(perf_grpc_pool_t *p, size_t i, const nr_buf_t *request)
{
    perf_grpc_slot_t *s = &p->slots[i];
    grpc_slice sl = grpc_slice_from_static_buffer(request->data, request->len);
    unary_init(&s->u, grpc_raw_byte_buffer_create(&sl, 1));
    s->call = grpc_channel_create_call(s->ch, NULL, GRPC_PROPAGATE_DEFAULTS, p->cq,
                                       grpc_slice_from_static_string(METHOD("ModelInfer")),
                                       NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    if (s->call && grpc_call_start_batch(s->call, s->u.ops, 6, s, NULL) == GRPC_CALL_OK)
        return NULL;
    s->u.status = GRPC_STATUS_OK;
    nr_status_free(slot_end(s)); /* idle again */
    return nr_status_new(NR_INTERNAL, "cannot start a gRPC call");
}

/* Slot s's call is over: its error, and the slot idle again. */
static nr_status_t *slot_end(perf_grpc_slot_t *s)
{
    nr_status_t *st = unary_error(&s->u);
    unary_free(&s->u);
    if (s->call)
        grpc_call_unref(s->call);
    s->call = NULL;
    return st;
}

size_t perf_grpc_pool_next(perf_grpc_pool_t *p, nr_status_t **err)
{
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(50, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(p->cq, deadline, NULL);
    *err = NULL;
    if (ev.type != GRPC_OP_COMPLETE)
        return SIZE_MAX;
    perf_grpc_slot_t *s = ev.tag;
    *err = slot_end(s);
    return (size_t)(s - p->slots);
}

void perf_grpc_pool_close(perf_grpc_pool_t *p)
{
    size_t busy = 0;
    for (size_t i = 0; i < p->n; i++)
        if (p->slots[i].call) {
            grpc_call_cancel(p->slots[i].call, NULL);
            busy++;
        }
    while (busy > 0) {
        grpc_event ev = grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME),
                                                   NULL);
        if (ev.type != GRPC_OP_COMPLETE)
            break;
        nr_status_free(slot_end(ev.tag));
        busy--;
    }
    for (size_t i = 0; i < p->n; i++)
        if (p->slots[i].ch)
            grpc_channel_destroy(p->slots[i].ch);
    if (p->cq) {
        grpc_completion_queue_shutdown(p->cq);
        while (grpc_completion_queue_next(p->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(p->cq);
    }
    free(p->slots);
    memset(p, 0, sizeof(*p));
}

/* ModelConfig comes as bytes in nereid's .proto description (its schema is config/'s): the
 * few fields nereid-perf reads are walked by hand, as are a streamed response's parameters. */
typedef struct {
    const uint8_t *p;
    size_t n, at;
    uint32_t field;
    uint64_t v;         /* a varint's value */
    const uint8_t *buf; /* a length-delimited field's bytes, len long */
    size_t len;
} pb_reader_t;

/* The next field into r (field, and v or buf/len by its wire type); false at the end or on
 * bytes that do not parse. */
static bool pb_next(pb_reader_t *r)
{
    uint64_t tag;
    size_t k = nr_varint_get(r->p + r->at, r->n - r->at, &tag);
    if (k == 0)
        return false;
    r->at += k;
    r->field = (uint32_t)(tag >> 3);
    r->buf = NULL;
    switch (tag & 7) {
    case 0:
        k = nr_varint_get(r->p + r->at, r->n - r->at, &r->v);
        break;
    case 1: k = 8; break;
    case 5: k = 4; break;
    case 2:
        if ((k = nr_varint_get(r->p + r->at, r->n - r->at, &r->len)) == 0 ||
            r->len > r->n - r->at - k)
            return false;
        r->buf = r->p + r->at + k;
        k += r->len;
        break;
    default: return false;
    }
    if (k == 0 || k > r->n - r->at)
        return false;
    r->at += k;
    return true;
}

/* ---- --streaming: ModelStreamInfer, one request and its answer at a time ---- */

static bool run_batch(perf_grpc_t *g, grpc_call *c, const grpc_op *ops, size_t n)
{
    if (grpc_call_start_batch(c, ops, n, (void *)ops, NULL) != GRPC_CALL_OK)
        return false;
    grpc_event ev = grpc_completion_queue_pluck(g->cq, (void *)ops,
                                                gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

/* Ends the stream: half-close, then its status (details into *why when asked). */
static void stream_end(perf_grpc_t *g, nr_buf_t *why)
{
    grpc_metadata_array trailers;
    grpc_metadata_array_init(&trailers);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[1].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[1].data.recv_status_on_client.trailing_metadata = &trailers;
    ops[1].data.recv_status_on_client.status = &status;
    ops[1].data.recv_status_on_client.status_details = &details;
    if (!run_batch(g, g->stream, ops, 2)) /* the half-close may fail on a broken stream */
        (void)run_batch(g, g->stream, ops + 1, 1);
    if (why) {
        char *d = grpc_slice_to_c_string(details);
        nr_buf_printf(why, "%s", *d ? d : "the ModelStreamInfer stream ended");
        gpr_free(d);
    }
    grpc_slice_unref(details);
    grpc_metadata_array_destroy(&trailers);
    grpc_call_unref(g->stream);
    g->stream = NULL;
    g->stream_md = false;
}

static void stream_close(perf_grpc_t *g)
{
    if (g->stream)
        stream_end(g, NULL);
}

static nr_status_t *stream_open(perf_grpc_t *g)
{
    g->stream = grpc_channel_create_call(g->ch, NULL, GRPC_PROPAGATE_DEFAULTS, g->cq,
                                         grpc_slice_from_static_string(
                                             METHOD("ModelStreamInfer")),
                                         NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    if (g->stream && run_batch(g, g->stream, &op, 1))
        return NULL;
    if (g->stream) {
        grpc_call_cancel(g->stream, NULL);
        grpc_call_unref(g->stream);
        g->stream = NULL;
    }
    return nr_status_new(NR_UNAVAILABLE, "cannot open a ModelStreamInfer stream");
}

/* ModelStreamInferResponse: error_message (1) and infer_response (2), read in place. */
static bool stream_fields(const uint8_t *p, size_t n, const uint8_t **err, size_t *err_len,
                          const uint8_t **resp, size_t *resp_len)
{
    *err = *resp = NULL;
    *err_len = *resp_len = 0;
    for (size_t i = 0; i < n;) {
        uint64_t tag, len;
        size_t k = nr_varint_get(p + i, n - i, &tag);
        if (k == 0 || (tag & 7) != 2)
            return false;
        i += k;
        if ((k = nr_varint_get(p + i, n - i, &len)) == 0 || len > n - i - k)
            return false;
        i += k;
        if (tag >> 3 == 1)
            *err = p + i, *err_len = (size_t)len;
        else if (tag >> 3 == 2)
            *resp = p + i, *resp_len = (size_t)len;
        i += (size_t)len;
    }
    return true;
}

/* Whether a ModelInferResponse carries triton_final_response = true (parameters: field 4,
 * entries of key (1) and InferParameter (2) whose bool_param is field 1); without it, yes. */
static bool final_response(const uint8_t *p, size_t n)
{
    pb_reader_t r = {.p = p, .n = n};
    while (pb_next(&r)) {
        if (r.field != 4 || r.buf == NULL)
            continue;
        pb_reader_t e = {.p = r.buf, .n = r.len};
        bool is_final_key = false;
        const uint8_t *val = NULL;
        size_t val_len = 0;
        while (pb_next(&e)) {
            if (e.field == 1 && e.buf)
                is_final_key = e.len == 21 && memcmp(e.buf, "triton_final_response", 21) == 0;
            else if (e.field == 2 && e.buf)
                val = e.buf, val_len = e.len;
        }
        if (!is_final_key || val == NULL)
            continue;
        pb_reader_t v = {.p = val, .n = val_len};
        while (pb_next(&v))
            if (v.field == 1 && v.buf == NULL)
                return v.v != 0;
    }
    return true;
}

/* Whether a ModelInferResponse holds outputs (field 5): the empty final response has none. */
static bool has_outputs(const uint8_t *p, size_t n)
{
    pb_reader_t r = {.p = p, .n = n};
    while (pb_next(&r))
        if (r.field == 5)
            return true;
    return false;
}

/* The stream's next message into *all (false: the stream ended; its reason in *st). */
static bool stream_recv(perf_grpc_t *g, grpc_op *ops, size_t n, nr_buf_t *all,
                        nr_status_t **st)
{
    grpc_byte_buffer *recv = NULL;
    ops[n - 1].op = GRPC_OP_RECV_MESSAGE;
    ops[n - 1].data.recv_message.recv_message = &recv;
    bool ok = run_batch(g, g->stream, ops, n);
    if (!ok || recv == NULL) { /* the stream ended: its status says why */
        nr_buf_t why;
        nr_buf_init(&why);
        stream_end(g, &why);
        *st = nr_status_new(NR_UNAVAILABLE, "%.*s", (int)why.len, why.data);
        nr_buf_free(&why);
        if (recv)
            grpc_byte_buffer_destroy(recv);
        return false;
    }
    grpc_byte_buffer_reader rd;
    if (grpc_byte_buffer_reader_init(&rd, recv)) {
        grpc_slice sl = grpc_byte_buffer_reader_readall(&rd);
        nr_buf_append(all, GRPC_SLICE_START_PTR(sl), GRPC_SLICE_LENGTH(sl));
        grpc_slice_unref(sl);
        grpc_byte_buffer_reader_destroy(&rd);
    }
    grpc_byte_buffer_destroy(recv);
    return true;
}

static nr_status_t *stream_infer(perf_grpc_t *g, const nr_buf_t *request, nr_buf_t *scratch,
                                 perf_resp_t *r)
{
    nr_status_t *st;
    if (g->stream == NULL && (st = stream_open(g)) != NULL)
        return st;
    uint64_t t0 = perf_now_ns();
    grpc_slice s = grpc_slice_from_copied_buffer(request->data, request->len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    uint64_t t1 = perf_now_ns();
    grpc_metadata_array md;
    grpc_metadata_array_init(&md);
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    if (!g->stream_md) { /* the server's initial metadata comes with its first answer */
        ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
        ops[n++].data.recv_initial_metadata.recv_initial_metadata = &md;
        g->stream_md = true;
    }
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = send;
    n++; /* the receive */
    nr_buf_t all;
    nr_buf_init(&all);
    st = NULL;
    uint64_t t2 = 0;
    if (r)
        r->responses = 0;
    /* a decoupled model's answer: every response up to the final one (the request ends with
     * its last, as perf_analyzer counts it) */
    for (bool more = true; more;) {
        nr_buf_reset(&all);
        nr_status_t *rst = NULL;
        bool got = stream_recv(g, ops, n, &all, &rst);
        t2 = perf_now_ns();
        n = 1; /* the next ones: the receive alone */
        memset(ops, 0, sizeof(ops));
        if (!got) { /* the stream ended */
            nr_status_free(st);
            st = rst;
            break;
        }
        const uint8_t *err, *resp;
        size_t err_len, resp_len;
        bool ok = stream_fields((const uint8_t *)all.data, all.len, &err, &err_len, &resp,
                                &resp_len);
        if (!ok) {
            nr_status_free(st);
            st = nr_status_new(NR_INTERNAL, "unreadable ModelStreamInferResponse");
            break;
        }
        if (err_len && st == NULL) /* the request's error; a decoupled one's end still comes */
            st = nr_status_new(NR_INVALID_ARG, "%.*s", (int)err_len, (const char *)err);
        more = g->decoupled && !final_response(resp, resp_len);
        if (!err_len && r && g->decoupled) /* not the empty final one */
            r->responses += has_outputs(resp, resp_len);
        if (st == NULL && !more) {
            nr_buf_reset(scratch);
            nr_buf_append(scratch, resp, resp_len);
        }
    }
    nr_buf_free(&all);
    grpc_byte_buffer_destroy(send);
    grpc_metadata_array_destroy(&md);
    if (r) {
        r->status = st ? 1 : 0;
        r->send_ns = t1 - t0;
        r->recv_ns = perf_now_ns() - t2;
    }
    return st;
}

nr_status_t *perf_grpc_infer(perf_grpc_t *g, const nr_buf_t *request, nr_buf_t *scratch,
                             perf_resp_t *r)
{
    if (g->streaming)
        return stream_infer(g, request, scratch, r);
    return call(g, METHOD("ModelInfer"), request->data, request->len, scratch, r);
}

/* Packs `req` and calls; the response's bytes into *out. */
static nr_status_t *call_msg(perf_grpc_t *g, const char *method, const ProtobufCMessage *req,
                             nr_buf_t *out)
{
    size_t len = protobuf_c_message_get_packed_size(req);
    uint8_t *buf = nr_malloc(len ? len : 1);
    protobuf_c_message_pack(req, buf);
    nr_status_t *st = call(g, method, buf, len, out, NULL);
    free(buf);
    return st;
}

/* A query: call_msg; errors "failed to get <what>: ". */
static nr_status_t *query(perf_grpc_t *g, const char *what, const char *method,
                          const ProtobufCMessage *req, nr_buf_t *out)
{
    nr_status_t *st = call_msg(g, method, req, out);
    if (st) {
        nr_status_t *e = nr_status_new(st->code, "failed to get %s: %s", what, st->msg);
        nr_status_free(st);
        return e;
    }
    return NULL;
}


/* ModelConfig's max_batch_size (field 4, a varint). */
static int max_batch_size(const uint8_t *p, size_t n)
{
    pb_reader_t r = {.p = p, .n = n};
    while (pb_next(&r))
        if (r.field == 4 && r.buf == NULL)
            return (int)r.v;
    return 0;
}

/* ModelConfig's model_transaction_policy (field 19) decoupled (1). */
static bool decoupled(const uint8_t *p, size_t n)
{
    pb_reader_t r = {.p = p, .n = n};
    while (pb_next(&r))
        if (r.field == 19 && r.buf != NULL) {
            pb_reader_t t = {.p = r.buf, .n = r.len};
            while (pb_next(&t))
                if (t.field == 1 && t.buf == NULL)
                    return t.v != 0;
        }
    return false;
}

/* A ModelConfig's name (field 1), whether its platform (2) is "ensemble", and its
 * ensemble_scheduling's (15) steps (1): model_name (1) and model_version (2, an int64: -1 is
 * ten bytes). */
static void grpc_config(const uint8_t *p, size_t n, perf_config_t *out)
{
    memset(out, 0, sizeof(*out));
    pb_reader_t r = {.p = p, .n = n}, sched = {0};
    while (pb_next(&r)) {
        if (r.field == 1 && r.buf && out->name == NULL)
            out->name = nr_strndup((const char *)r.buf, r.len);
        else if (r.field == 2 && r.buf)
            out->ensemble = r.len == 8 && memcmp(r.buf, "ensemble", 8) == 0;
        else if (r.field == 15 && r.buf)
            sched = (pb_reader_t){.p = r.buf, .n = r.len};
    }
    if (out->name == NULL)
        out->name = nr_strdup("");
    while (out->ensemble && sched.p && pb_next(&sched)) {
        if (sched.field != 1 || sched.buf == NULL)
            continue;
        out->step_models = nr_realloc(out->step_models, (out->n_steps + 1) * sizeof(char *));
        out->step_versions = nr_realloc(out->step_versions,
                                        (out->n_steps + 1) * sizeof(int64_t));
        char *name = NULL;
        int64_t version = 0;
        pb_reader_t step = {.p = sched.buf, .n = sched.len};
        while (pb_next(&step)) {
            if (step.field == 1 && step.buf && name == NULL)
                name = nr_strndup((const char *)step.buf, step.len);
            else if (step.field == 2 && step.buf == NULL)
                version = (int64_t)step.v;
        }
        out->step_models[out->n_steps] = name ? name : nr_strdup("");
        out->step_versions[out->n_steps++] = version;
    }
}

/* perf_config_fn over gRPC: ModelConfig; an error in perf_analyzer's words for a composing
 * model's config. */
static nr_status_t *grpc_fetch_config(void *ctx, const char *name, const char *version,
                                      perf_config_t *out)
{
    nr_buf_t resp;
    nr_buf_init(&resp);
    Inference__ModelConfigRequest req = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    req.name = (char *)name, req.version = (char *)version;
    nr_status_t *st = call_msg(ctx, METHOD("ModelConfig"), &req.base, &resp);
    Inference__ModelConfigResponse *cfg = NULL;
    if (st == NULL && (cfg = inference__model_config_response__unpack(
                           NULL, resp.len, (const uint8_t *)resp.data)) == NULL)
        st = nr_status_new(NR_INTERNAL, "unreadable response");
    if (st == NULL)
        grpc_config(cfg->config.data, cfg->config.len, out);
    if (cfg)
        inference__model_config_response__free_unpacked(cfg, NULL);
    nr_buf_free(&resp);
    return st ? nr_status_prefix(st, "failed to create model parser: ") : NULL;
}

/* --shared-memory system: a tensor's two parameters, shared_memory_region and
 * shared_memory_byte_size, as an input's map entries or an output's. */
typedef struct {
    Inference__InferParameter region, size;
    Inference__ModelInferRequest__InferInputTensor__ParametersEntry in[2], *inp[2];
    Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry out[2], *outp[2];
} shm_params_t;

static void shm_params(shm_params_t *p, const char *region, size_t bytes)
{
    Inference__InferParameter v = INFERENCE__INFER_PARAMETER__INIT;
    p->region = v, p->size = v;
    p->region.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM;
    p->region.string_param = (char *)region;
    p->size.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    p->size.int64_param = (int64_t)bytes;
    Inference__ModelInferRequest__InferInputTensor__ParametersEntry ie =
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__PARAMETERS_ENTRY__INIT;
    Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry oe =
        INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__PARAMETERS_ENTRY__INIT;
    const char *keys[2] = {"shared_memory_region", "shared_memory_byte_size"};
    Inference__InferParameter *vals[2] = {&p->region, &p->size};
    for (int k = 0; k < 2; k++) {
        p->in[k] = ie, p->out[k] = oe;
        p->in[k].key = p->out[k].key = (char *)keys[k];
        p->in[k].value = p->out[k].value = vals[k];
        p->inp[k] = &p->in[k], p->outp[k] = &p->out[k];
    }
}

/* One ModelInfer request, serialized: the inputs with their shapes and raw contents, every
 * output asked for; with --shared-memory system, the regions instead of contents. */
static nr_status_t *grpc_request(void *arg, const perf_model_t *m, const nr_buf_t *data,
                                 nr_buf_t *out)
{
    const perf_opts_t *o = arg;
    Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
    req.model_name = (char *)o->model;
    req.model_version = (char *)(o->version ? o->version : "");
    Inference__ModelInferRequest__InferInputTensor *ins = nr_calloc(m->n_inputs + 1, sizeof(*ins));
    Inference__ModelInferRequest__InferInputTensor **inp = nr_calloc(m->n_inputs + 1, sizeof(*inp));
    ProtobufCBinaryData *raw = nr_calloc(m->n_inputs + 1, sizeof(*raw));
    shm_params_t *sp = nr_calloc(m->n_inputs + m->n_outputs + 1, sizeof(*sp));
    size_t n_raw = 0;
    for (size_t i = 0; i < m->n_inputs; i++) {
        Inference__ModelInferRequest__InferInputTensor init =
            INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
        ins[i] = init;
        ins[i].name = m->inputs[i].name, ins[i].datatype = m->inputs[i].datatype;
        ins[i].shape = m->inputs[i].shape, ins[i].n_shape = m->inputs[i].n_shape;
        inp[i] = &ins[i];
        if (m->inputs[i].region) {
            shm_params(&sp[i], m->inputs[i].region, m->inputs[i].bytes);
            ins[i].parameters = sp[i].inp, ins[i].n_parameters = 2;
            continue;
        }
        raw[n_raw].data = (uint8_t *)data->data + m->inputs[i].offset;
        raw[n_raw++].len = m->inputs[i].bytes;
    }
    Inference__ModelInferRequest__InferRequestedOutputTensor *outs =
        nr_calloc(m->n_outputs + 1, sizeof(*outs));
    Inference__ModelInferRequest__InferRequestedOutputTensor **outp =
        nr_calloc(m->n_outputs + 1, sizeof(*outp));
    for (size_t i = 0; i < m->n_outputs; i++) {
        Inference__ModelInferRequest__InferRequestedOutputTensor init =
            INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
        outs[i] = init;
        outs[i].name = m->outputs[i].name;
        outp[i] = &outs[i];
        if (m->outputs[i].region) {
            shm_params_t *p = &sp[m->n_inputs + i];
            shm_params(p, m->outputs[i].region, m->outputs[i].shm_bytes);
            outs[i].parameters = p->outp, outs[i].n_parameters = 2;
        }
    }
    req.inputs = inp, req.n_inputs = m->n_inputs;
    req.raw_input_contents = raw, req.n_raw_input_contents = n_raw;
    /* every streamed request asks for the empty final response, as perf_analyzer's do: a
     * decoupled model's end is then always seen */
    Inference__InferParameter fin = INFERENCE__INFER_PARAMETER__INIT;
    fin.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    fin.bool_param = 1;
    Inference__ModelInferRequest__ParametersEntry fe =
        INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT, *fep = &fe;
    fe.key = "triton_enable_empty_final_response";
    fe.value = &fin;
    if (o->streaming)
        req.parameters = &fep, req.n_parameters = 1;
    req.outputs = outp, req.n_outputs = m->n_outputs;
    size_t len = inference__model_infer_request__get_packed_size(&req);
    nr_buf_reserve(out, len);
    out->len = inference__model_infer_request__pack(&req, (uint8_t *)out->data);
    free(ins);
    free(inp);
    free(raw);
    free(sp);
    free(outs);
    free(outp);
    return NULL;
}

nr_status_t *perf_grpc_model_load(perf_grpc_t *g, const perf_opts_t *o, perf_model_t *m)
{
    perf_model_init(m, o);
    nr_buf_t resp;
    nr_buf_init(&resp);
    char *version = (char *)(o->version ? o->version : "");
    Inference__ModelMetadataRequest mreq = INFERENCE__MODEL_METADATA_REQUEST__INIT;
    mreq.name = (char *)o->model, mreq.version = version;
    Inference__ModelMetadataResponse *meta = NULL;
    Inference__ModelConfigResponse *cfg = NULL;
    Inference__ServerMetadataResponse *server = NULL;
    nr_status_t *st = query(g, "model metadata", METHOD("ModelMetadata"), &mreq.base, &resp);
    if (st == NULL && (meta = inference__model_metadata_response__unpack(
                           NULL, resp.len, (const uint8_t *)resp.data)) == NULL)
        st = nr_status_new(NR_INTERNAL, "failed to get model metadata: unreadable response");
    Inference__ModelConfigRequest creq = INFERENCE__MODEL_CONFIG_REQUEST__INIT;
    creq.name = (char *)o->model, creq.version = version;
    if (st == NULL)
        st = query(g, "model config", METHOD("ModelConfig"), &creq.base, &resp);
    if (st == NULL && (cfg = inference__model_config_response__unpack(
                           NULL, resp.len, (const uint8_t *)resp.data)) == NULL)
        st = nr_status_new(NR_INTERNAL, "failed to get model config: unreadable response");
    if (st == NULL) { /* an ensemble: its composing models, as perf_analyzer's parser */
        perf_config_t top;
        grpc_config(cfg->config.data, cfg->config.len, &top);
        st = perf_composing_load(m, &top, grpc_fetch_config, g);
        perf_config_free(&top);
    }
    Inference__ServerMetadataRequest sreq = INFERENCE__SERVER_METADATA_REQUEST__INIT;
    if (st == NULL)
        st = query(g, "server metadata", METHOD("ServerMetadata"), &sreq.base, &resp);
    if (st == NULL && (server = inference__server_metadata_response__unpack(
                           NULL, resp.len, (const uint8_t *)resp.data)) == NULL)
        st = nr_status_new(NR_INTERNAL, "failed to get server metadata: unreadable response");
    if (st == NULL) {
        for (size_t i = 0; i < server->n_extensions; i++)
            m->has_stats |= strcmp(server->extensions[i], "statistics") == 0;
        m->max_batch_size = max_batch_size(cfg->config.data, cfg->config.len);
        m->decoupled = decoupled(cfg->config.data, cfg->config.len);
        st = perf_model_check_batch(m, o);
    }
    if (st == NULL) {
        m->inputs = nr_calloc(meta->n_inputs + 1, sizeof(perf_input_t));
        for (size_t i = 0; i < meta->n_inputs && !st; i++, m->n_inputs++) {
            const Inference__ModelMetadataResponse__TensorMetadata *t = meta->inputs[i];
            st = perf_input_init(&m->inputs[i], t->name, t->datatype, t->shape, t->n_shape,
                                 m->max_batch_size, o);
        }
        m->outputs = nr_calloc(meta->n_outputs + 1, sizeof(perf_output_t));
        for (; m->n_outputs < meta->n_outputs; m->n_outputs++) {
            const Inference__ModelMetadataResponse__TensorMetadata *t =
                meta->outputs[m->n_outputs];
            perf_output_init(&m->outputs[m->n_outputs], t->name, t->datatype, t->shape,
                             t->n_shape, m->max_batch_size, o);
        }
    }
    if (st == NULL) /* ModelInfer, serialized once per request */
        st = perf_model_requests(m, o, grpc_request, (void *)o);
    if (meta)
        inference__model_metadata_response__free_unpacked(meta, NULL);
    if (cfg)
        inference__model_config_response__free_unpacked(cfg, NULL);
    if (server)
        inference__server_metadata_response__free_unpacked(server, NULL);
    nr_buf_free(&resp);
    return st;
}

nr_status_t *perf_grpc_shm(perf_grpc_t *g, const char *name, size_t bytes)
{
    nr_buf_t resp;
    nr_buf_init(&resp);
    nr_status_t *st;
    if (name) {
        Inference__SystemSharedMemoryRegisterRequest req =
            INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_REQUEST__INIT;
        char *key = nr_asprintf("/%s", name);
        req.name = (char *)name, req.key = key, req.byte_size = bytes;
        st = call_msg(g, METHOD("SystemSharedMemoryRegister"), &req.base, &resp);
        free(key);
    } else {
        Inference__SystemSharedMemoryUnregisterRequest req =
            INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_REQUEST__INIT;
        st = call_msg(g, METHOD("SystemSharedMemoryUnregister"), &req.base, &resp);
    }
    nr_buf_free(&resp);
    return st;
}

nr_status_t *perf_grpc_trace(perf_grpc_t *g, const perf_opts_t *o)
{
    const char *keys[4] = {"trace_level", "trace_rate", "trace_count", "log_frequency"};
    const char *one[3] = {o->trace_rate, o->trace_count, o->log_frequency};
    Inference__TraceSettingRequest__SettingValue v[4];
    Inference__TraceSettingRequest__SettingsEntry e[4], *ep[4];
    size_t n = 0;
    for (size_t k = 0; k < 4; k++) {
        if (k == 0 ? o->n_trace_levels == 0 : one[k - 1] == NULL)
            continue;
        inference__trace_setting_request__setting_value__init(&v[n]);
        v[n].n_value = k == 0 ? o->n_trace_levels : 1;
        v[n].value = k == 0 ? (char **)o->trace_levels : (char **)&one[k - 1];
        inference__trace_setting_request__settings_entry__init(&e[n]);
        e[n].key = (char *)keys[k];
        e[n].value = &v[n];
        ep[n] = &e[n];
        n++;
    }
    Inference__TraceSettingRequest req = INFERENCE__TRACE_SETTING_REQUEST__INIT;
    req.n_settings = n;
    req.settings = ep;
    nr_buf_t resp;
    nr_buf_init(&resp);
    nr_status_t *st = call_msg(g, METHOD("TraceSetting"), &req.base, &resp);
    nr_buf_free(&resp);
    return st;
}

void perf_grpc_outputs(const nr_buf_t *resp, nr_buf_t *out)
{
    Inference__ModelInferResponse *r = inference__model_infer_response__unpack(
        NULL, resp->len, (const uint8_t *)resp->data);
    nr_buf_putc(out, '{');
    for (size_t i = 0, n = 0; r && i < r->n_outputs && i < r->n_raw_output_contents; i++) {
        const Inference__ModelInferResponse__InferOutputTensor *t = r->outputs[i];
        if (n++)
            nr_buf_putc(out, ',');
        perf_json_tensor(out, t->name, strlen(t->name), t->datatype, strlen(t->datatype),
                         r->raw_output_contents[i].data, r->raw_output_contents[i].len,
                         SIZE_MAX);
    }
    nr_buf_putc(out, '}');
    if (r)
        inference__model_infer_response__free_unpacked(r, NULL);
}

static void add_duration(uint64_t *count, uint64_t *ns, const Inference__StatisticDuration *d)
{
    if (d)
        *count += d->count, *ns += d->ns;
}

nr_status_t *perf_grpc_server_stats(perf_grpc_t *g, const perf_opts_t *o, bool all,
                                    perf_snapshot_t *snap)
{
    nr_buf_t resp;
    nr_buf_init(&resp);
    Inference__ModelStatisticsRequest req = INFERENCE__MODEL_STATISTICS_REQUEST__INIT;
    req.name = (char *)(all ? "" : o->model); /* "": every model */
    req.version = (char *)(!all && o->version ? o->version : "");
    memset(snap, 0, sizeof(*snap));
    nr_status_t *st = query(g, "model statistics", METHOD("ModelStatistics"), &req.base, &resp);
    Inference__ModelStatisticsResponse *r = NULL;
    if (st == NULL && (r = inference__model_statistics_response__unpack(
                           NULL, resp.len, (const uint8_t *)resp.data)) == NULL)
        st = nr_status_new(NR_INTERNAL, "failed to get model statistics: unreadable response");
    for (size_t i = 0; r && i < r->n_model_stats; i++) {
        const Inference__ModelStatistics *e = r->model_stats[i];
        const Inference__InferStatistics *is = e->inference_stats;
        perf_server_stats_t *s =
            &perf_snapshot_add(snap, e->name, strlen(e->name), e->version, strlen(e->version))->s;
        s->inference_count = e->inference_count;
        s->execution_count = e->execution_count;
        if (is == NULL)
            continue;
        add_duration(&s->success_count, &s->success_ns, is->success);
        add_duration(&s->queue_count, &s->queue_ns, is->queue);
        add_duration(&s->input_count, &s->input_ns, is->compute_input);
        add_duration(&s->infer_count, &s->infer_ns, is->compute_infer);
        add_duration(&s->output_count, &s->output_ns, is->compute_output);
    }
    if (r)
        inference__model_statistics_response__free_unpacked(r, NULL);
    nr_buf_free(&resp);
    return st;
}
