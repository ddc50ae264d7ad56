/* grpc_server.c - the gRPC frontend's server (grpc_server.h): gRPC's C core
 * with one completion queue per thread (one thread by default), every method
 * of the table registered so that its request arrives with the call, a few
 * calls of each method always requested in advance on every queue
 * (ModelInfer: the allocation pool size), and unary calls answered with one
 * batch (initial metadata, message, status, close). Unknown methods are
 * answered UNIMPLEMENTED.
 *
 * Channel arguments follow Triton's: messages up to INT32_MAX bytes both
 * ways, its keepalive and HTTP/2 ping settings, SO_REUSEPORT only when asked,
 * and the infer response compression level set per call on ModelInfer and
 * ModelStreamInfer only. Requests compressed with gzip or deflate are
 * inflated by the library.
 */
#include "grpc_int.h"

#include "../../common/alloc.h"
#include "../../proto/grpc_lib.h"
#include "../../common/log.h"
#include "../../common/net.h"

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <limits.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define CONTAINER(p, T, m) ((T *)((char *)(p) - offsetof(T, m)))

void nr_grpc_options_default(nr_grpc_options_t *o)
{
    memset(o, 0, sizeof(*o));
    o->address = "0.0.0.0";
    o->port = 8001;
    o->infer_pool = 8;
    o->keepalive_time_ms = 7200000;
    o->keepalive_timeout_ms = 20000;
    o->http2_max_pings_without_data = 2;
    o->http2_min_recv_ping_interval_ms = 300000;
    o->http2_max_ping_strikes = 2;
}

/* ---- helpers ------------------------------------------------------------------ */

static void *arena_alloc(void *data, size_t size)
{
    nr_grpc_alloc_t *a = data;
    void *p = nr_arena_try_alloc(a->arena, size ? size : 1);
    if (p == NULL && a->failed == 0)
        a->failed = size ? size : 1;
    return p;
}

static void arena_free(void *data, void *p)
{
    (void)data, (void)p; /* everything goes with the arena */
}

ProtobufCAllocator nr_grpc_arena_allocator(nr_grpc_alloc_t *a)
{
    ProtobufCAllocator al = {arena_alloc, arena_free, a};
    return al;
}

nr_status_t *nr_grpc_payload(grpc_byte_buffer *bb, grpc_slice *out)
{
    *out = grpc_empty_slice();
    grpc_byte_buffer_reader r;
    if (bb == NULL || !grpc_byte_buffer_reader_init(&r, bb))
        return NULL;
    grpc_slice *s;
    size_t total = 0, n = 0;
    while (grpc_byte_buffer_reader_peek(&r, &s)) {
        if (n++ == 0)
            *out = grpc_slice_ref(*s);
        total += GRPC_SLICE_LENGTH(*s);
    }
    grpc_byte_buffer_reader_destroy(&r);
    if (n <= 1)
        return NULL;
    grpc_slice_unref(*out);
    *out = grpc_empty_slice();
    /* not grpc_byte_buffer_reader_readall: gRPC's allocator aborts on failure */
    char *p = malloc(total);
    if (p == NULL)
        return nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes for the request message",
                             total);
    size_t off = 0;
    if (grpc_byte_buffer_reader_init(&r, bb)) {
        while (grpc_byte_buffer_reader_peek(&r, &s) && off + GRPC_SLICE_LENGTH(*s) <= total) {
            memcpy(p + off, GRPC_SLICE_START_PTR(*s), GRPC_SLICE_LENGTH(*s));
            off += GRPC_SLICE_LENGTH(*s);
        }
        grpc_byte_buffer_reader_destroy(&r);
    }
    *out = grpc_slice_new(p, off, free);
    return NULL;
}

void nr_grpc_pack(const ProtobufCMessage *msg, nr_buf_t *out)
{
    size_t n = protobuf_c_message_get_packed_size(msg);
    nr_buf_reserve(out, n);
    protobuf_c_message_pack(msg, (uint8_t *)out->data + out->len);
    out->len += n;
}

/* Memory lent to gRPC in a slice: done(arg) runs on whichever thread gRPC drops
 * the slice. The gate orders what the lending thread did before (filling the
 * memory, setting up what done releases) with done, for ThreadSanitizer,
 * which cannot see gRPC's own synchronisation. */
typedef struct {
    atomic_int gate;
    void (*done)(void *arg);
    void *arg;
} lent_t;

static void slice_dropped(void *p)
{
    lent_t *l = p;
    atomic_load_explicit(&l->gate, memory_order_acquire);
    l->done(l->arg);
    free(l);
}

grpc_slice nr_grpc_slice_lend(void *p, size_t len, void (*done)(void *arg), void *arg)
{
    lent_t *l = nr_malloc(sizeof(*l));
    l->done = done;
    l->arg = arg;
    atomic_init(&l->gate, 0);
    atomic_store_explicit(&l->gate, 1, memory_order_release); /* l is not touched after */
    return grpc_slice_new_with_user_data(p, len, slice_dropped, l);
}

grpc_byte_buffer *nr_grpc_buffer_take(nr_buf_t *buf)
{
    size_t len = buf->len;
    char *p = nr_buf_steal(buf, NULL);
    grpc_slice s = nr_grpc_slice_lend(p, len, free, p);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

grpc_status_code nr_grpc_code(const nr_status_t *st)
{
    return (grpc_status_code)nr_status_grpc(st);
}

/* ---- calls ---------------------------------------------------------------------- */

static void request_call(nr_grpc_server_t *s, int method, int cq);

void nr_grpc_call_free(nr_grpc_call_t *c)
{
    grpc_metadata_array_destroy(&c->md);
    if (c->payload != NULL)
        grpc_byte_buffer_destroy(c->payload);
    if (c->reply != NULL)
        grpc_byte_buffer_destroy(c->reply);
    if (c->method < 0)
        grpc_call_details_destroy(&c->details);
    grpc_slice_unref(c->status_details);
    if (c->call != NULL) {
        grpc_call_unref(c->call);
        atomic_fetch_sub(&c->srv->calls, 1);
    }
    free(c);
}

/* One of the call's last two events (the reply's batch, the close when watched). */
static void call_release(nr_grpc_call_t *c)
{
    if (atomic_fetch_sub_explicit(&c->pending, 1, memory_order_acq_rel) == 1)
        nr_grpc_call_free(c);
}

static void on_finished(nr_grpc_tag_t *t, bool ok)
{
    (void)ok; /* a client that went away: nothing more to do either way */
    call_release(CONTAINER(t, nr_grpc_call_t, on_done));
}

static void on_closed(nr_grpc_tag_t *t, bool ok)
{
    nr_grpc_call_t *c = CONTAINER(t, nr_grpc_call_t, on_close);
    if (ok && c->cancelled) /* the client cancelled, or its deadline passed */
        atomic_store(&c->gone, true);
    call_release(c);
}

bool nr_grpc_watch_close(nr_grpc_call_t *c)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &c->cancelled;
    c->on_close.fn = on_closed;
    atomic_fetch_add(&c->pending, 1);
    if (grpc_call_start_batch(c->call, &op, 1, nr_grpc_arm(&c->on_close), NULL) == GRPC_CALL_OK)
        return c->close_armed = true;
    atomic_fetch_sub(&c->pending, 1);
    return false;
}

grpc_compression_level nr_grpc_level(nr_grpc_compression_t c)
{
    switch (c) {
    case NR_GRPC_COMPRESS_LOW: return GRPC_COMPRESS_LEVEL_LOW;
    case NR_GRPC_COMPRESS_MEDIUM: return GRPC_COMPRESS_LEVEL_MED;
    case NR_GRPC_COMPRESS_HIGH: return GRPC_COMPRESS_LEVEL_HIGH;
    default: return GRPC_COMPRESS_LEVEL_NONE;
    }
}

void nr_grpc_finish(nr_grpc_call_t *c, grpc_byte_buffer *reply, nr_status_t *st, bool compress)
{
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (compress && c->srv->opts.compression != NR_GRPC_COMPRESS_NONE) {
        ops[n].data.send_initial_metadata.maybe_compression_level.is_set = 1;
        ops[n].data.send_initial_metadata.maybe_compression_level.level =
            nr_grpc_level(c->srv->opts.compression);
    }
    n++;
    c->reply = reply;
    if (reply != NULL) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = reply;
        n++;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = nr_grpc_code(st);
    if (st != NULL) {
        c->status_details = grpc_slice_from_copied_string(nr_status_msg(st));
        ops[n].data.send_status_from_server.status_details = &c->status_details;
    }
    n++;
    if (!c->close_armed) {
        ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
        ops[n].data.recv_close_on_server.cancelled = &c->cancelled;
        n++;
    }
    nr_status_free(st);
    c->on_done.fn = on_finished;
    grpc_call_error err = grpc_call_start_batch(c->call, ops, n, nr_grpc_arm(&c->on_done), NULL);
    if (err != GRPC_CALL_OK) {
        NR_LOG_VERBOSE(1, "gRPC: cannot send a reply (call error %d)", (int)err);
        call_release(c);
    }
}

/* A unary call: unpack, handle, reply. */
static void run_unary(nr_grpc_call_t *c, const nr_grpc_method_t *m)
{
    nr_arena_t arena = nr_arena_init(4096);
    nr_grpc_alloc_t alloc = {&arena, 0};
    ProtobufCAllocator al = nr_grpc_arena_allocator(&alloc);
    grpc_slice in;
    nr_status_t *st = nr_grpc_payload(c->payload, &in);
    ProtobufCMessage *req = NULL;
    if (st == NULL)
        req = protobuf_c_message_unpack(m->req, &al, GRPC_SLICE_LENGTH(in),
                                        GRPC_SLICE_START_PTR(in));
    grpc_slice_unref(in);
    nr_buf_t out;
    nr_buf_init(&out);
    if (st == NULL && req == NULL && alloc.failed > 0)
        st = nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes for the request "
                                           "message (%s)",
                           alloc.failed, m->req->name);
    else if (st == NULL && req == NULL)
        st = nr_status_new(NR_INVALID_ARG, "failed to parse the request message (%s)",
                           m->req->name);
    else if (st == NULL)
        st = m->fn(c->srv, req, &out);
    nr_arena_free(&arena);
    grpc_byte_buffer *reply = st == NULL ? nr_grpc_buffer_take(&out) : NULL;
    nr_buf_free(&out);
    nr_grpc_finish(c, reply, st, false);
}

/* A control call on a thread of its own (NR_GRPC_CONTROL). nr_grpc_stop waits for every call
 * to be freed, this one's reply included, before the server and its queues go. */
static void *control_main(void *arg)
{
    nr_grpc_call_t *c = arg;
    run_unary(c, &nr_grpc_methods[c->method]);
    return NULL;
}

static void run_control(nr_grpc_call_t *c, const nr_grpc_method_t *m)
{
    pthread_t t;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    if (pthread_create(&t, &attr, control_main, c) != 0)
        run_unary(c, m); /* no thread to be had: here, as before */
    pthread_attr_destroy(&attr);
}

/* --grpc-restricted-protocol: whether the call's metadata has its group's key and value */
static bool restriction_met(const nr_grpc_server_t *s, const nr_grpc_call_t *c, nr_api_t api)
{
    const char *key = nr_restrict_key(&s->opts.restricted, api);
    if (key == NULL)
        return true;
    size_t klen = strlen(key);
    for (size_t i = 0; i < c->md.count; i++) {
        const grpc_metadata *md = &c->md.metadata[i];
        if (GRPC_SLICE_LENGTH(md->key) == klen &&
            !memcmp(GRPC_SLICE_START_PTR(md->key), key, klen))
            return nr_restrict_allows(&s->opts.restricted, api,
                                      (const char *)GRPC_SLICE_START_PTR(md->value),
                                      GRPC_SLICE_LENGTH(md->value));
    }
    return nr_restrict_allows(&s->opts.restricted, api, NULL, 0);
}

static void on_new_call(nr_grpc_tag_t *t, bool ok)
{
    nr_grpc_call_t *c = CONTAINER(t, nr_grpc_call_t, on_new);
    nr_grpc_server_t *s = c->srv;
    if (!ok) { /* shutting down: the request was never matched */
        nr_grpc_call_free(c);
        return;
    }
    atomic_fetch_add(&s->calls, 1);
    if (!atomic_load(&s->shutting_down))
        request_call(s, c->method, c->cq); /* the next client of this method */
    if (c->method < 0) {
        nr_grpc_finish(c, NULL, nr_status_new(NR_UNSUPPORTED, "unknown method"), false);
        return;
    }
    const nr_grpc_method_t *m = &nr_grpc_methods[c->method];
    if (!restriction_met(s, c, m->api)) {
        nr_grpc_finish(c, NULL, nr_restrict_refusal(&s->opts.restricted, m->api, true), false);
        return;
    }
    switch (m->kind) {
    case NR_GRPC_UNARY: run_unary(c, m); break;
    case NR_GRPC_CONTROL: run_control(c, m); break;
    case NR_GRPC_INFER: nr_grpc_infer_start(c); break;
    case NR_GRPC_STREAM: nr_grpc_stream_start(c); break;
    }
}

/* Asks gRPC for the next call of a method (-1: of any unknown method) on
 * completion queue `cq`. */
static void request_call(nr_grpc_server_t *s, int method, int cq)
{
    nr_grpc_call_t *c = nr_calloc(1, sizeof(*c));
    atomic_init(&c->pending, 1); /* the reply's batch */
    grpc_completion_queue *q = s->cqs[cq];
    c->srv = s;
    c->method = method;
    c->cq = cq;
    c->on_new.fn = on_new_call;
    c->status_details = grpc_empty_slice();
    if (nr_trace_armed()) /* Triton's GRPC_WAITREAD_START: the wait is in it */
        c->t_wait_ns = nr_now_ns();
    grpc_metadata_array_init(&c->md);
    grpc_call_error err;
    if (method < 0) {
        grpc_call_details_init(&c->details);
        err = grpc_server_request_call(s->server, &c->call, &c->details, &c->md, q, q,
                                       nr_grpc_arm(&c->on_new));
    } else {
        bool payload = nr_grpc_methods[method].kind != NR_GRPC_STREAM;
        err = grpc_server_request_registered_call(s->server, s->handles[method], &c->call,
                                                  &c->deadline, &c->md,
                                                  payload ? &c->payload : NULL, q, q,
                                                  nr_grpc_arm(&c->on_new));
    }
    if (err != GRPC_CALL_OK) { /* the server is shutting down */
        c->call = NULL;
        nr_grpc_call_free(c);
    }
}

/* ---- threads and lifecycle --------------------------------------------------------- */

typedef struct {
    nr_grpc_server_t *s;
    int i;
} thread_arg_t;

static void *cq_thread(void *arg)
{
    thread_arg_t *ta = arg;
    grpc_completion_queue *cq = ta->s->cqs[ta->i];
    free(ta);
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            return NULL;
        if (ev.type == GRPC_OP_COMPLETE) {
            nr_grpc_tag_t *t = ev.tag;
            atomic_load_explicit(&t->armed, memory_order_acquire); /* see nr_grpc_arm */
            t->fn(t, ev.success != 0);
        }
    }
}

static void on_shutdown(nr_grpc_tag_t *t, bool ok)
{
    (void)ok;
    atomic_store(&CONTAINER(t, nr_grpc_server_t, shutdown_tag)->shutdown_done, true);
}

static char *read_pem(const char *flag, const char *path, nr_status_t **st)
{
    FILE *f = path != NULL && path[0] ? fopen(path, "rb") : NULL;
    if (f == NULL) {
        *st = nr_status_new(NR_INVALID_ARG, "unable to read the %s file '%s'", flag,
                            path ? path : "");
        return NULL;
    }
    nr_buf_t b;
    nr_buf_init(&b);
    char tmp[4096];
    size_t n;
    while ((n = fread(tmp, 1, sizeof(tmp), f)) > 0 && b.len < (1u << 20))
        nr_buf_append(&b, tmp, n);
    fclose(f);
    return nr_buf_steal(&b, NULL);
}

static grpc_server_credentials *credentials(const nr_grpc_options_t *o, nr_status_t **st)
{
    *st = NULL;
    if (!o->use_ssl && !o->use_ssl_mutual)
        return grpc_insecure_server_credentials_create();
    char *cert = read_pem("--grpc-server-cert", o->server_cert, st);
    char *key = *st ? NULL : read_pem("--grpc-server-key", o->server_key, st);
    char *root = NULL;
    if (*st == NULL && (o->use_ssl_mutual || (o->root_cert && o->root_cert[0])))
        root = read_pem("--grpc-root-cert", o->root_cert, st);
    grpc_server_credentials *creds = NULL;
    if (*st == NULL) {
        grpc_ssl_pem_key_cert_pair pair = {key, cert};
        creds = grpc_ssl_server_credentials_create_ex(
            root, &pair, 1,
            o->use_ssl_mutual ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                              : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    }
    free(cert);
    free(key);
    free(root);
    return creds;
}

static void log_keepalive(const nr_grpc_options_t *o)
{
    if (nr_log_settings.verbose < 1)
        return;
    char v[8][24];
    const char *cells[16];
    int r = 0;
    const struct { const char *name; int value; } rows[] = {
        {"keepalive_time_ms", o->keepalive_time_ms},
        {"keepalive_timeout_ms", o->keepalive_timeout_ms},
        {"keepalive_permit_without_calls", o->keepalive_permit_without_calls},
        {"http2_max_pings_without_data", o->http2_max_pings_without_data},
        {"http2_min_recv_ping_interval_without_data_ms", o->http2_min_recv_ping_interval_ms},
        {"http2_max_ping_strikes", o->http2_max_ping_strikes},
        {"max_connection_age_ms", o->max_connection_age_ms},
        {"max_connection_age_grace_ms", o->max_connection_age_grace_ms},
    };
    for (size_t i = 0; i < 8; i++) {
        if (i >= 6 && rows[i].value == 0)
            continue;
        snprintf(v[r], sizeof(v[r]), "%d", rows[i].value);
        cells[2 * r] = rows[i].name;
        cells[2 * r + 1] = v[r];
        r++;
    }
    static const char *const header[] = {"GRPC KeepAlive Option", "Value"};
    NR_LOG_TABLE(2, header, r, cells);
}

/* Shuts down and drains the queues when no thread runs on them. */
static void shutdown_queues(nr_grpc_server_t *s)
{
    for (int i = 0; i < s->n_threads; i++) {
        grpc_completion_queue_shutdown(s->cqs[i]);
        while (grpc_completion_queue_next(s->cqs[i], gpr_inf_future(GPR_CLOCK_REALTIME), NULL)
                   .type != GRPC_QUEUE_SHUTDOWN)
            ;
        grpc_completion_queue_destroy(s->cqs[i]);
    }
}

static void free_server(nr_grpc_server_t *s)
{
    free((char *)s->opts.address);
    free((char *)s->opts.server_cert);
    free((char *)s->opts.server_key);
    free((char *)s->opts.root_cert);
    free(s->handles);
    free(s->threads);
    free(s->cqs);
    nr_header_fwd_free(s->fwd);
    nr_restrict_free(&s->opts.restricted);
    free(s);
}

static char *dup_or_null(const char *p)
{
    return p ? nr_strdup(p) : NULL;
}

nr_status_t *nr_grpc_start(const nr_grpc_options_t *opts, nr_server_t *core,
                           nr_grpc_server_t **out)
{
    *out = NULL;
    nr_grpc_server_t *s = nr_calloc(1, sizeof(*s));
    s->opts = *opts;
    s->opts.address = nr_strdup(opts->address ? opts->address : "0.0.0.0");
    s->opts.server_cert = dup_or_null(opts->server_cert);
    s->opts.server_key = dup_or_null(opts->server_key);
    s->opts.root_cert = dup_or_null(opts->root_cert);
    nr_restrict_copy(&s->opts.restricted, &opts->restricted);
    if (s->opts.infer_pool < 1)
        s->opts.infer_pool = 1;
    s->core = core;
    atomic_init(&s->calls, 0);
    atomic_init(&s->shutting_down, false);
    atomic_init(&s->shutdown_done, false);
    s->shutdown_tag.fn = on_shutdown;

    nr_status_t *st = NULL;
    if (opts->header_forward != NULL && opts->header_forward[0] != '\0')
        st = nr_header_fwd_new("grpc-header-forward-pattern", opts->header_forward, &s->fwd);
    if (st != NULL) {
        free_server(s);
        return st;
    }
    grpc_server_credentials *creds = credentials(&s->opts, &st);
    if (st != NULL) {
        free_server(s);
        return st;
    }
    if (nr_grpc_lib_init())
        NR_LOG_VERBOSE(1, "gRPC: abseil's mutex deadlock detection turned off");
    grpc_arg args[12];
    size_t na = 0;
#define INT_ARG(k, v) args[na++] = (grpc_arg){GRPC_ARG_INTEGER, (char *)(k), {.integer = (v)}}
    INT_ARG(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, INT_MAX);
    INT_ARG(GRPC_ARG_MAX_SEND_MESSAGE_LENGTH, INT_MAX);
    INT_ARG(GRPC_ARG_ALLOW_REUSEPORT, s->opts.reuse_port);
    INT_ARG(GRPC_ARG_KEEPALIVE_TIME_MS, s->opts.keepalive_time_ms);
    INT_ARG(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, s->opts.keepalive_timeout_ms);
    INT_ARG(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, s->opts.keepalive_permit_without_calls);
    INT_ARG(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, s->opts.http2_max_pings_without_data);
    INT_ARG(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS,
            s->opts.http2_min_recv_ping_interval_ms);
    INT_ARG(GRPC_ARG_HTTP2_MAX_PING_STRIKES, s->opts.http2_max_ping_strikes);
    if (s->opts.max_connection_age_ms > 0)
        INT_ARG(GRPC_ARG_MAX_CONNECTION_AGE_MS, s->opts.max_connection_age_ms);
    if (s->opts.max_connection_age_grace_ms > 0)
        INT_ARG(GRPC_ARG_MAX_CONNECTION_AGE_GRACE_MS, s->opts.max_connection_age_grace_ms);
#undef INT_ARG
    grpc_channel_args ca = {na, args};
    log_keepalive(&s->opts);
    s->server = grpc_server_create(&ca, NULL);
    /* One completion queue per thread, so every event of a call is handled by
     * the thread that took the call; one thread by default (--grpc-infer-thread-count):
     * gRPC's poller hands events between threads with futex wake-ups, and on this
     * machine class one thread served identity_fp32 at 47-49k requests/s at 16
     * connections where two served 22-27k (docs/performance.md, "gRPC"). */
    s->n_threads = s->opts.threads > 0 ? s->opts.threads : 1;
    s->cqs = nr_calloc((size_t)s->n_threads, sizeof(*s->cqs));
    for (int i = 0; i < s->n_threads; i++) {
        s->cqs[i] = grpc_completion_queue_create_for_next(NULL);
        grpc_server_register_completion_queue(s->server, s->cqs[i], NULL);
    }
    s->handles = nr_calloc(nr_grpc_n_methods, sizeof(void *));
    for (size_t i = 0; i < nr_grpc_n_methods; i++) {
        bool payload = nr_grpc_methods[i].kind != NR_GRPC_STREAM;
        s->handles[i] = grpc_server_register_method(
            s->server, nr_grpc_methods[i].path, NULL,
            payload ? GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER : GRPC_SRM_PAYLOAD_NONE, 0);
    }
    char *addr = strchr(s->opts.address, ':') != NULL
                     ? nr_asprintf("[%s]:%d", s->opts.address, s->opts.port)
                     : nr_asprintf("%s:%d", s->opts.address, s->opts.port);
    s->port = grpc_server_add_http2_port(s->server, addr, creds);
    grpc_server_credentials_release(creds);
    free(addr);
    if (s->port <= 0) {
        st = nr_net_in_use(s->opts.address, s->opts.port);
        grpc_server_destroy(s->server);
        shutdown_queues(s);
        grpc_shutdown();
        free_server(s);
        return st;
    }
    grpc_server_start(s->server);
    for (int q = 0; q < s->n_threads; q++) {
        for (size_t i = 0; i < nr_grpc_n_methods; i++) {
            int k = nr_grpc_methods[i].kind == NR_GRPC_INFER ? s->opts.infer_pool : 2;
            for (int j = 0; j < k; j++)
                request_call(s, (int)i, q);
        }
        request_call(s, -1, q);
    }
    s->threads = nr_calloc((size_t)s->n_threads, sizeof(pthread_t));
    for (int i = 0; i < s->n_threads; i++) {
        thread_arg_t *ta = nr_malloc(sizeof(*ta));
        ta->s = s;
        ta->i = i;
        pthread_create(&s->threads[i], NULL, cq_thread, ta);
        pthread_setname_np(s->threads[i], "grpc-cq");
    }
    *out = s;
    return NULL;
}

int nr_grpc_port(const nr_grpc_server_t *s)
{
    return s->port;
}

void nr_grpc_quiesce(nr_grpc_server_t *s)
{
    if (s == NULL || atomic_exchange(&s->shutting_down, true))
        return;
    grpc_server_shutdown_and_notify(s->server, s->cqs[0], nr_grpc_arm(&s->shutdown_tag));
}

void nr_grpc_stop(nr_grpc_server_t *s)
{
    if (s == NULL)
        return;
    nr_grpc_quiesce(s);
    grpc_server_cancel_all_calls(s->server); /* open streams, clients that never read */
    /* A call still running a model (past --exit-timeout-secs) answers from its
     * instance thread: wait for it, as the HTTP frontend waits for its
     * connection threads, before the server and its queues go. */
    while (!atomic_load(&s->shutdown_done) || atomic_load(&s->calls) > 0) {
        struct timespec ts = {0, 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    grpc_server_destroy(s->server);
    for (int i = 0; i < s->n_threads; i++)
        grpc_completion_queue_shutdown(s->cqs[i]);
    for (int i = 0; i < s->n_threads; i++) {
        pthread_join(s->threads[i], NULL);
        grpc_completion_queue_destroy(s->cqs[i]);
    }
    grpc_shutdown();
    free_server(s);
}

/* ---- the frontend interface (core/frontend.h) ---- */

static nr_status_t *fe_start(const void *opts, nr_server_t *core, void **state)
{
    return nr_grpc_start(opts, core, (nr_grpc_server_t **)state);
}

static int fe_port(const void *state)
{
    return nr_grpc_port(state);
}

static void fe_quiesce(void *state)
{
    nr_grpc_quiesce(state);
}

static void fe_stop(void *state)
{
    nr_grpc_stop(state);
}

const nr_frontend_t nr_grpc_frontend = {
    "GRPCInferenceService", "GRPC", fe_start, fe_port, fe_quiesce, fe_stop,
};
