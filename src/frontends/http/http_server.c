/* http_server.c - the HTTP/REST daemon: libmicrohttpd with one thread per
 * connection (so the infer handler may block until its request is done),
 * a routing table (method + path pattern -> handler), request bodies
 * accumulated into one buffer sized from Content-Length and checked against
 * --http-max-input-size before anything is allocated, and nr_http_resp_t ->
 * MHD_Response (JSON buffers, or iovecs over output tensors without a copy).
 *
 * Routes (query strings are ignored; paths are exact and case-sensitive):
 *   GET  /v2                                    server metadata
 *   GET  /v2/health/live | /v2/health/ready     200 / 400, empty
 *   GET  /v2/models/stats                       every model's statistics
 *   GET  /v2/models/<m>[/versions/<v>]          model metadata
 *   GET  .../ready | .../config | .../stats
 *   POST .../infer
 *   POST .../generate                          (http_generate.c); .../generate_stream 501
 *   POST /v2/repository[/<r>]/index
 *   POST /v2/repository[/<r>]/models/<m>/load | unload
 *   GET  /v2/systemsharedmemory[/region/<r>]/status     (http_shm.c; the same
 *   POST /v2/systemsharedmemory/region/<r>/register      under cudasharedmemory)
 *   POST /v2/systemsharedmemory[/region/<r>]/unregister
 *   GET | POST /v2/logging                      log settings (POST: update them)
 *   GET | POST /v2[/models/<m>]/trace/setting   trace settings (tracing is not built yet)
 * A known path with the wrong method answers 405, anything else 404.
 */
#include "http_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"
#include "../../common/net.h"
#include "../mhd/mhd.h"
#include "http_conn.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

typedef void (*handler_fn)(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);

typedef enum {
    R_NONE,
    R_SERVER_META,
    R_LIVE,
    R_READY,
    R_ALL_STATS,
    R_MODEL_META,
    R_MODEL_READY,
    R_MODEL_CONFIG,
    R_MODEL_STATS,
    R_INFER,
    R_GENERATE,
    R_REPO_INDEX,
    R_REPO_CONTROL,
    R_SHM_STATUS,
    R_SHM_REGISTER,
    R_SHM_UNREGISTER,
    R_CUDA_STATUS,
    R_CUDA_REGISTER,
    R_CUDA_UNREGISTER,
    R_LOGGING,
    R_TRACE,
} route_id_t;

static void h_server_meta(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
static void h_live(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
static void h_ready(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
static void h_generate(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);

/* The routing table: which method each path pattern takes (`post_too`: POST
 * as well), who answers it, whether its body is read (others are drained and
 * dropped), and its restricted API group (--http-restricted-api). */
static const struct {
    const char *method;
    handler_fn fn;
    bool body;
    bool post_too;
    nr_api_t api;
} routes[] = {
    [R_NONE] = {NULL, NULL, false, false, NR_API_NONE},
    [R_SERVER_META] = {"GET", h_server_meta, false, false, NR_API_METADATA},
    [R_LIVE] = {"GET", h_live, false, false, NR_API_HEALTH},
    [R_READY] = {"GET", h_ready, false, false, NR_API_HEALTH},
    [R_ALL_STATS] = {"GET", nr_http_model_stats, false, false, NR_API_STATISTICS},
    [R_MODEL_META] = {"GET", nr_http_model_metadata, false, false, NR_API_METADATA},
    [R_MODEL_READY] = {"GET", nr_http_model_ready, false, false, NR_API_HEALTH},
    [R_MODEL_CONFIG] = {"GET", nr_http_model_config, false, false, NR_API_MODEL_CONFIG},
    [R_MODEL_STATS] = {"GET", nr_http_model_stats, false, false, NR_API_STATISTICS},
    [R_INFER] = {"POST", nr_http_infer, true, false, NR_API_INFERENCE},
    [R_GENERATE] = {"POST", h_generate, true, false, NR_API_INFERENCE},
    [R_REPO_INDEX] = {"POST", nr_http_repo_index, true, false, NR_API_MODEL_REPOSITORY},
    [R_REPO_CONTROL] = {"POST", nr_http_repo_control, true, false, NR_API_MODEL_REPOSITORY},
    [R_SHM_STATUS] = {"GET", nr_http_shm_status, false, false, NR_API_SHARED_MEMORY},
    [R_SHM_REGISTER] = {"POST", nr_http_shm_register, true, false, NR_API_SHARED_MEMORY},
    [R_SHM_UNREGISTER] = {"POST", nr_http_shm_unregister, false, false, NR_API_SHARED_MEMORY},
    [R_CUDA_STATUS] = {"GET", nr_http_cuda_status, false, false, NR_API_SHARED_MEMORY},
    [R_CUDA_REGISTER] = {"POST", nr_http_cuda_register, false, false, NR_API_SHARED_MEMORY},
    [R_CUDA_UNREGISTER] = {"POST", nr_http_cuda_unregister, false, false,
                           NR_API_SHARED_MEMORY},
    [R_LOGGING] = {"GET", nr_http_logging, true, true, NR_API_LOGGING},
    [R_TRACE] = {"GET", nr_http_trace, true, true, NR_API_TRACE},
};

static bool allowed(route_id_t id, const char *method)
{
    return strcmp(method, routes[id].method) == 0 ||
           (routes[id].post_too && strcmp(method, "POST") == 0);
}

/* What the path says, besides the route. */
typedef struct {
    route_id_t id;
    const char *model; size_t model_len;
    int64_t version;
    bool bad_version;          /* [0-9]+ beyond int64 */
    const char *vstr; size_t vlen;
    bool has_repo; /* /v2/repository/<r>/... */
    bool load;     /* .../models/<m>/load (not unload) */
    bool stream;   /* .../generate_stream (not generate) */
    const char *region; size_t region_len; /* .../sharedmemory/region/<r>/... */
} match_t;

/* Where a request stands (conn_req_t.state); see park(). */
enum { ST_RECEIVING, ST_RUNNING, ST_PARKED, ST_DONE };

/* Per HTTP request state (MHD's con_cls). */
typedef struct {
    nr_http_async_t async; /* handed to a deferring handler; see park() */
    struct MHD_Connection *conn;
    _Atomic int state;
    nr_http_resp_t resp;   /* a deferred answer while parked */
    bool parked;        /* suspended until its request is done */
    bool body_wanted;
    bool chunked;       /* no Content-Length */
    bool responded;     /* a response is already queued */
    uint64_t refused;   /* bytes seen once the body was refused (too large, or the
                           server's body memory was spent); 0 = fine */
    int refused_status; /* 400 too large, 503 no memory */
    uint64_t t0_ms;     /* when its header was complete (the request deadline) */
    uint64_t t_recv_ns; /* the same in ns, while tracing may sample (0: not taken) */
    uint64_t charged;   /* body bytes counted in srv->body_bytes */
    const char *ihcl;   /* Inference-Header-Content-Length, looked up once (MHD keeps it) */
    char *mem;          /* malloc'd: lead unused bytes, then the body */
    size_t lead;        /* nr_http_body_lead(ihcl) */
    size_t len, cap;    /* body bytes received and room for them (after lead) */
} conn_req_t;

/* ---- routing ---------------------------------------------------------------- */

static bool take(const char **p, const char *lit)
{
    size_t n = strlen(lit);
    if (strncmp(*p, lit, n) != 0)
        return false;
    *p += n;
    return true;
}

/* Takes "<segment>" up to the next '/' or the end; false if empty. */
static bool segment(const char **p, const char **seg, size_t *len)
{
    const char *s = *p;
    const char *e = strchr(s, '/');
    size_t n = e ? (size_t)(e - s) : strlen(s);
    if (n == 0)
        return false;
    *seg = s;
    *len = n;
    *p = s + n;
    return true;
}

/* [0-9]+; *overflow when it does not fit an int64 (Triton's stoll fails) */
static bool digits(const char *s, size_t n, int64_t *out, bool *overflow)
{
    if (n == 0)
        return false;
    int64_t v = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9')
            return false;
        int d = s[i] - '0';
        if (v > (INT64_MAX - d) / 10)
            *overflow = true;
        else
            v = v * 10 + d;
    }
    *out = v;
    return true;
}

static void route_models(const char *p, match_t *m)
{
    if (strcmp(p, "stats") == 0) {
        m->id = R_ALL_STATS;
        return;
    }
    if (!segment(&p, &m->model, &m->model_len))
        return;
    if (take(&p, "/versions/")) {
        const char *v;
        size_t vn;
        if (!segment(&p, &v, &vn) || !digits(v, vn, &m->version, &m->bad_version))
            return;
        m->vstr = v;
        m->vlen = vn;
    }
    if (*p == '\0')
        m->id = R_MODEL_META;
    else if (strcmp(p, "/ready") == 0)
        m->id = R_MODEL_READY;
    else if (strcmp(p, "/config") == 0)
        m->id = R_MODEL_CONFIG;
    else if (strcmp(p, "/stats") == 0)
        m->id = R_MODEL_STATS;
    else if (strcmp(p, "/infer") == 0)
        m->id = R_INFER;
    else if (strcmp(p, "/trace/setting") == 0)
        m->id = R_TRACE;
    else if (strcmp(p, "/generate") == 0 || strcmp(p, "/generate_stream") == 0) {
        m->id = R_GENERATE;
        m->stream = p[9] == '_';
    }
}

static void route_repository(const char *p, match_t *m)
{
    /* "[<r>/]index" or "[<r>/]models/<m>/(load|unload)" */
    const char *q = p;
    const char *seg;
    size_t n;
    if (strcmp(q, "index") != 0 && strncmp(q, "models/", 7) != 0) {
        if (!segment(&q, &seg, &n) || *q != '/')
            return;
        q++;
        m->has_repo = true;
    }
    if (strcmp(q, "index") == 0) {
        m->id = R_REPO_INDEX;
        return;
    }
    if (!take(&q, "models/") || !segment(&q, &m->model, &m->model_len))
        return;
    m->load = strcmp(q, "/load") == 0;
    if (m->load || strcmp(q, "/unload") == 0)
        m->id = R_REPO_CONTROL;
}

/* "[region/<r>/](status|register|unregister)"; `first` is the status route of
 * the system or cuda group, the other two follow it in route_id_t. */
static void route_shm(const char *p, route_id_t first, match_t *m)
{
    if (take(&p, "region/")) {
        if (!segment(&p, &m->region, &m->region_len) || *p++ != '/')
            return;
    }
    if (strcmp(p, "status") == 0)
        m->id = first;
    else if (strcmp(p, "register") == 0)
        m->id = first + 1;
    else if (strcmp(p, "unregister") == 0)
        m->id = first + 2;
}

static match_t route(const char *url)
{
    match_t m = {R_NONE, NULL, 0, -1, false, NULL, 0, false, false, NULL, 0};
    const char *p = url;
    if (strcmp(p, "/v2") == 0)
        m.id = R_SERVER_META;
    else if (strcmp(p, "/v2/health/live") == 0)
        m.id = R_LIVE;
    else if (strcmp(p, "/v2/health/ready") == 0)
        m.id = R_READY;
    else if (strcmp(p, "/v2/logging") == 0)
        m.id = R_LOGGING;
    else if (strcmp(p, "/v2/trace/setting") == 0)
        m.id = R_TRACE;
    else if (take(&p, "/v2/models/"))
        route_models(p, &m);
    else if (take(&p, "/v2/repository/"))
        route_repository(p, &m);
    else if (take(&p, "/v2/systemsharedmemory/"))
        route_shm(p, R_SHM_STATUS, &m);
    else if (take(&p, "/v2/cudasharedmemory/"))
        route_shm(p, R_CUDA_STATUS, &m);
    if (m.id == R_NONE)
        m.model = NULL, m.model_len = 0, m.version = -1, m.region = NULL, m.region_len = 0;
    return m;
}

/* ---- small handlers --------------------------------------------------------- */

static void h_server_meta(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_buf_reset(&r->body);
    nr_buf_append(&r->body, s->server_meta, s->server_meta_len);
    nr_http_json_ok(r);
}

static void h_live(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_http_empty(r, 200);
}

static void h_ready(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_http_empty(r, nr_server_ready(s->core) ? 200 : 400);
}

static void h_generate(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_http_generate(s, q, r); /* .../generate and .../generate_stream */
}

/* ---- responses ---------------------------------------------------------------- */

void nr_http_resp_init(nr_http_resp_t *r)
{
    memset(r, 0, sizeof(*r));
    nr_buf_init(&r->body);
    r->status = 500;
}

/* Drops the iovec and releases what it pointed into. */
static void release_iov(nr_http_resp_t *r)
{
    free(r->iov);
    r->iov = NULL;
    r->n_iov = 0;
    if (r->free_fn != NULL)
        r->free_fn(r->free_arg);
    r->free_fn = NULL;
}

void nr_http_resp_release(nr_http_resp_t *r)
{
    nr_buf_free(&r->body);
    release_iov(r);
    if (r->stream != NULL)
        nr_http_stream_drop(r->stream);
    r->stream = NULL;
}

/* libmicrohttpd sends an iovec response's header and body with two system
 * calls (sendto, then sendmsg: two TCP segments), a buffer response with one
 * sendmsg. So a reply in one piece (every JSON reply) becomes a buffer
 * response over that piece, uncopied; a reply in several pieces of up to
 * COALESCE_MAX bytes in all is copied into one buffer, which costs less than
 * the second send (binary identity_fp32 replies of 215 B, old vs new build
 * interleaved 6 times: +18% requests/s at 16 connections, -8% p50 at 1);
 * larger ones are sent from where they are (ONNX Runtime's output buffers). */
#define COALESCE_MAX (64u << 10)

/* Copies a small reply in several pieces into r->body. */
static void coalesce(nr_http_resp_t *r)
{
    size_t total = 0;
    for (size_t i = 0; i < r->n_iov; i++)
        total += r->iov[i].iov_len;
    if (total > COALESCE_MAX)
        return;
    nr_buf_reset(&r->body);
    nr_buf_reserve(&r->body, total);
    for (size_t i = 0; i < r->n_iov; i++)
        nr_buf_append(&r->body, r->iov[i].iov_base, r->iov[i].iov_len);
    release_iov(r);
}

/* An MHD response over r->iov's pieces; on success it owns what they point into. */
static struct MHD_Response *iov_response(nr_http_resp_t *r)
{
    struct MHD_Response *mr;
    if (r->n_iov == 1) {
        mr = MHD_create_response_from_buffer_with_free_callback_cls(
            r->iov[0].iov_len, r->iov[0].iov_base, r->free_fn, r->free_arg);
    } else {
        struct MHD_IoVec small[8] = {{0}};
        struct MHD_IoVec *mv = r->n_iov <= 8 ? small : nr_malloc(r->n_iov * sizeof(*mv));
        for (size_t i = 0; i < r->n_iov; i++) {
            mv[i].iov_base = r->iov[i].iov_base;
            mv[i].iov_len = r->iov[i].iov_len;
        }
        mr = MHD_create_response_from_iovec(mv, (unsigned)r->n_iov, r->free_fn, r->free_arg);
        if (mv != small)
            free(mv);
    }
    if (mr != NULL)
        r->free_fn = NULL; /* the response owns it now */
    return mr;
}

static enum MHD_Result send_resp(nr_http_server_t *s, struct MHD_Connection *c, nr_http_resp_t *r)
{
    struct MHD_Response *mr;
    if (r->iov != NULL && r->n_iov > 1)
        coalesce(r);
    if (r->stream != NULL) { /* chunked, sent as it is written */
        mr = nr_http_stream_response(r->stream, c);
        r->stream = NULL;
    } else if (r->iov != NULL) {
        mr = iov_response(r);
    } else {
        size_t len = r->body.len;
        char *data = nr_buf_steal(&r->body, NULL);
        mr = MHD_create_response_from_buffer(len, data, MHD_RESPMEM_MUST_FREE);
        if (mr == NULL)
            free(data);
    }
    nr_http_resp_release(r);
    if (mr == NULL)
        return MHD_NO;
    if (r->content_type != NULL)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_TYPE, r->content_type);
    if (r->has_infer_header_len) {
        char tmp[24];
        snprintf(tmp, sizeof(tmp), "%llu", (unsigned long long)r->infer_header_len);
        MHD_add_response_header(mr, "Inference-Header-Content-Length", tmp);
    }
    if (r->content_encoding != NULL)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONTENT_ENCODING, r->content_encoding);
    if (r->accept_encoding_hint)
        MHD_add_response_header(mr, MHD_HTTP_HEADER_ACCEPT_ENCODING, "gzip, deflate");
    /* Shutting down (nr_server_quiesce): each connection closes after its answer, so that a
     * load balancer opens its next one to a replica that stays instead of reusing this one
     * as it closes (docs/architecture.md, "Shutdown"). */
    if (nr_server_quiesced(s->core))
        MHD_add_response_header(mr, MHD_HTTP_HEADER_CONNECTION, "close");
    enum MHD_Result ret = MHD_queue_response(c, (unsigned)r->status, mr);
    MHD_destroy_response(mr);
    return ret;
}

static enum MHD_Result send_error(nr_http_server_t *s, struct MHD_Connection *c, int status,
                                  const char *msg)
{
    nr_http_resp_t r;
    nr_http_resp_init(&r);
    nr_http_error_msg(&r, status, msg);
    return send_resp(s, c, &r);
}

/* A body refused while it arrives (too large, or no memory for it) is
 * dropped from there on and answered at its end: MHD cannot queue an answer
 * while a body is being received. */
static void refuse_body(nr_http_server_t *s, conn_req_t *rq, int status, uint64_t seen)
{
    rq->refused = seen ? seen : 1;
    rq->refused_status = status;
    free(rq->mem);
    rq->mem = NULL;
    rq->len = rq->cap = 0;
    atomic_fetch_sub(&s->body_bytes, rq->charged);
    rq->charged = 0;
}

static enum MHD_Result send_refusal(nr_http_server_t *s, struct MHD_Connection *c,
                                    conn_req_t *rq)
{
    char msg[200];
    if (rq->refused_status == 503)
        snprintf(msg, sizeof(msg),
                 "the server's memory for request bodies (%llu bytes, --http-body-memory-limit) "
                 "is in use; try again later",
                 (unsigned long long)s->opts.body_memory_limit);
    else
        snprintf(msg, sizeof(msg),
                 "request body size of %llu bytes exceeds the maximum allowed value of %llu "
                 "bytes (--http-max-input-size)",
                 (unsigned long long)rq->refused, (unsigned long long)s->opts.max_input_size);
    rq->responded = true;
    return send_error(s, c, rq->refused_status, msg);
}

/* Counts n more body bytes against --http-body-memory-limit; false (nothing
 * counted) when they do not fit. */
static bool charge(nr_http_server_t *s, conn_req_t *rq, uint64_t n)
{
    unsigned long long cur = atomic_load(&s->body_bytes); /* the atomic's own type */
    do {
        if (n > s->opts.body_memory_limit - (cur < s->opts.body_memory_limit
                                                 ? cur : s->opts.body_memory_limit))
            return false;
    } while (!atomic_compare_exchange_weak(&s->body_bytes, &cur, cur + n));
    rq->charged += n;
    return true;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_COARSE, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* ---- the access handler ---------------------------------------------------- */

static const char *header(struct MHD_Connection *c, const char *name)
{
    return MHD_lookup_connection_value(c, MHD_HEADER_KIND, name);
}

typedef struct {
    void (*fn)(void *arg, const char *name, const char *value);
    void *arg;
} each_header_t;

static enum MHD_Result each_header_one(void *cls, enum MHD_ValueKind kind, const char *key,
                                       const char *value)
{
    each_header_t *e = cls;
    e->fn(e->arg, key, value ? value : "");
    return MHD_YES;
}

/* nr_http_headers_t.lookup: a request header of the connection (names case-insensitive) */
static const char *lookup_header(void *ctx, const char *name)
{
    return header(ctx, name);
}

/* nr_http_headers_t.each over a connection's request headers */
static void each_header(void *ctx, void (*fn)(void *arg, const char *name, const char *value),
                        void *arg)
{
    each_header_t e = {fn, arg};
    MHD_get_connection_values(ctx, MHD_HEADER_KIND, each_header_one, &e);
}

/* The header is complete. A body's memory is reserved from its
 * Content-Length (the pages are touched only as bytes arrive; large blocks
 * are mmap'd by malloc) but counted against the server's body memory as it
 * arrives, so a client that promises much and sends little holds little. */
static enum MHD_Result first_call(nr_http_server_t *s, struct MHD_Connection *c, conn_req_t *rq,
                                  const char *url, const char *method)
{
    match_t m = route(url);
    rq->t0_ms = now_ms();
    if (nr_trace_armed())
        rq->t_recv_ns = nr_now_ns();
    rq->body_wanted = m.id != R_NONE && allowed(m.id, method) && routes[m.id].body;
    if (rq->body_wanted) { /* only routes with a body read the header */
        rq->ihcl = header(c, "Inference-Header-Content-Length");
        rq->lead = nr_http_body_lead(rq->ihcl);
    }
    const char *cl = header(c, MHD_HTTP_HEADER_CONTENT_LENGTH);
    if (cl == NULL ? header(c, MHD_HTTP_HEADER_TRANSFER_ENCODING) == NULL
                   : strtoull(cl, NULL, 10) == 0)
        nr_http_conn_busy(c, true); /* the request is complete: see upload() */
    if (cl != NULL) {
        unsigned long long n = strtoull(cl, NULL, 10);
        if (n > s->opts.max_input_size) {
            refuse_body(s, rq, 400, n);
            return send_refusal(s, c, rq);
        }
        if (rq->body_wanted && n > 0) {
            rq->mem = malloc(rq->lead + (size_t)n);
            if (rq->mem == NULL) {
                refuse_body(s, rq, 503, n);
                return send_refusal(s, c, rq);
            }
            rq->cap = (size_t)n;
        }
    } else {
        rq->chunked = true;
    }
    return MHD_YES;
}

/* Body bytes as they arrive. A body that grows past the limit (chunked, or
 * longer than its Content-Length) or past the server's body memory is
 * dropped from there on and refused at its end; one that arrives slower than
 * --http-request-timeout-secs allows closes the connection. */
static enum MHD_Result upload(nr_http_server_t *s, struct MHD_Connection *c, conn_req_t *rq,
                              const char *data, size_t n)
{
    if (s->opts.request_timeout_secs > 0 &&
        now_ms() - rq->t0_ms > (uint64_t)s->opts.request_timeout_secs * 1000) {
        NR_LOG_VERBOSE(1, "HTTP: closing a connection whose request body took longer than %d s "
                       "(--http-request-timeout-secs)", s->opts.request_timeout_secs);
        return MHD_NO;
    }
    if (rq->responded || !rq->body_wanted)
        return MHD_YES;
    if (rq->refused > 0) {
        rq->refused += n;
        return MHD_YES;
    }
    if (n > s->opts.max_input_size - rq->len) {
        refuse_body(s, rq, 400, rq->len + n);
        return MHD_YES;
    }
    if (!charge(s, rq, n)) {
        refuse_body(s, rq, 503, rq->len + n);
        return MHD_YES;
    }
    if (rq->len + n > rq->cap) { /* chunked, or more than Content-Length said */
        size_t cap = rq->cap ? rq->cap : 4096;
        while (cap < rq->len + n)
            cap *= 2;
        if (cap > s->opts.max_input_size)
            cap = (size_t)s->opts.max_input_size;
        char *nb = realloc(rq->mem, rq->lead + cap); /* keeps malloc's 16-byte alignment */
        if (nb == NULL) {
            refuse_body(s, rq, 503, rq->len + n);
            return MHD_YES;
        }
        rq->mem = nb;
        rq->cap = cap;
    }
    memcpy(rq->mem + rq->lead + rq->len, data, n);
    rq->len += n;
    /* The whole body is in: the request is being answered from here on, and the
     * sweeper must leave it alone even if the client half-closes now (a body cut
     * short and closed, by contrast, is the sweeper's). */
    if (rq->len == rq->cap && !rq->chunked)
        nr_http_conn_busy(c, true);
    return MHD_YES;
}

/* See http_int.h. malloc's blocks are 16-byte aligned, realloc's too. */
size_t nr_http_body_lead(const char *ihcl)
{
    if (ihcl == NULL)
        return 0;
    unsigned long long v = strtoull(ihcl, NULL, 10); /* garbage: 0, refused by the handler */
    return (size_t)((16 - v % 16) % 16);
}

/* Routes one complete request and runs its handler; see http_int.h. */
void nr_http_handle(nr_http_server_t *s, const char *method, const char *url,
                    const nr_http_headers_t *h, char **mem, size_t lead, size_t body_len,
                    nr_http_async_t *async, nr_http_resp_t *r)
{
    match_t m = route(url);
    if (m.id == R_NONE) {
        nr_http_error_msg(r, 404, "Not Found");
        return;
    }
    if (!allowed(m.id, method)) {
        nr_http_error_msg(r, 405, "Method Not Allowed");
        return;
    }
    const char *key = nr_restrict_key(&s->opts.restricted, routes[m.id].api);
    if (key != NULL) { /* --http-restricted-api: Triton's 403 without the group's header */
        const char *v = h->lookup != NULL ? h->lookup(h->ctx, key) : NULL;
        if (!nr_restrict_allows(&s->opts.restricted, routes[m.id].api, v, v ? strlen(v) : 0)) {
            nr_status_t *st = nr_restrict_refusal(&s->opts.restricted, routes[m.id].api, false);
            nr_http_error_msg(r, 403, st->msg);
            nr_status_free(st);
            return;
        }
    }
    if (m.bad_version) {
        int64_t v;
        nr_http_error(r, nr_kserve_parse_version(m.vstr, m.vlen, NR_VERSION_STOLL, &v));
        return;
    }
    nr_http_req_t q = {0};
    q.method = method;
    q.model = m.model;
    q.model_len = m.model_len;
    q.version = m.version;
    q.has_repo = m.has_repo;
    q.generate_stream = m.stream;
    q.load = m.load;
    q.region = m.region;
    q.region_len = m.region_len;
    q.body = *mem ? *mem + lead : "";
    q.body_len = body_len;
    q.body_owned = *mem;
    q.content_encoding = h->content_encoding;
    q.accept_encoding = h->accept_encoding;
    q.infer_header_len = h->infer_header_len;
    q.headers = h;
    q.recv_ns[0] = h->recv_ns[0];
    q.recv_ns[1] = h->recv_ns[1];
    q.async = async;
    routes[m.id].fn(s, &q, r);
    if (q.body_owned == NULL) /* the handler took the body */
        *mem = NULL;
}

/* ---- parking: no thread waits for a request in flight ------------------------
 * A handler that defers (inference) leaves the connection suspended until the
 * request is done; its wake(), on an instance thread, resumes it and MHD calls
 * on_access again, which sends the answer. wake() may run before the
 * connection is suspended, even before the handler returns: the state says
 * which of the two came first, and the later one resumes. */

static void wake(nr_http_async_t *a)
{
    conn_req_t *rq = (conn_req_t *)a; /* async is its first member */
    int expect = ST_RUNNING;
    if (atomic_compare_exchange_strong(&rq->state, &expect, ST_DONE))
        return; /* the server thread has not parked it yet and will see DONE */
    atomic_store(&rq->state, ST_DONE);
    MHD_resume_connection(rq->conn);
}

static void park(nr_http_server_t *s, struct MHD_Connection *c, conn_req_t *rq)
{
    rq->parked = true;
    atomic_fetch_add(&s->parked, 1);
    MHD_suspend_connection(c);
    int expect = ST_RUNNING;
    if (!atomic_compare_exchange_strong(&rq->state, &expect, ST_PARKED))
        MHD_resume_connection(c); /* done already */
}

static void unpark(nr_http_server_t *s)
{
    atomic_fetch_sub(&s->parked, 1);
}

/* A deferred answer, once its request is done. Filling it may defer once more
 * (a large reply is encoded on the bulk pool): the connection parks again. */
static enum MHD_Result finish(nr_http_server_t *s, struct MHD_Connection *c, conn_req_t *rq)
{
    nr_http_resp_t *r = &rq->resp;
    for (;;) {
        void (*fn)(void *, nr_http_resp_t *) = r->finish;
        r->finish = NULL;
        r->may_defer = true;
        atomic_store(&rq->state, ST_RUNNING); /* before fn: what it defers may wake at once */
        fn(r->finish_arg, r);
        r->may_defer = false;
        if (r->finish == NULL)
            return send_resp(s, c, r);
        if (atomic_load(&rq->state) != ST_DONE) {
            park(s, c, rq);
            return MHD_YES;
        }
    }
}

/* The body is complete: route again (the views point into this call's url)
 * and run the handler. */
static enum MHD_Result dispatch(nr_http_server_t *s, struct MHD_Connection *c, conn_req_t *rq,
                                const char *url, const char *method)
{
    nr_http_resp_t *r = &rq->resp;
    nr_http_resp_init(r);
    nr_http_headers_t h = {
        .content_encoding = header(c, MHD_HTTP_HEADER_CONTENT_ENCODING),
        .accept_encoding = header(c, MHD_HTTP_HEADER_ACCEPT_ENCODING),
        .infer_header_len = rq->ihcl,
        .each = each_header,
        .lookup = lookup_header,
        .ctx = c,
        .recv_ns = {rq->t_recv_ns, rq->t_recv_ns ? nr_now_ns() : 0},
    };
    atomic_store(&rq->state, ST_RUNNING);
    nr_http_conn_busy(c, true); /* (already, when its Content-Length was met) */
    nr_http_handle(s, method, url, &h, &rq->mem, rq->lead, rq->len, &rq->async, r);
    if (rq->mem == NULL)
        rq->len = rq->cap = 0;
    if (r->finish == NULL)
        return send_resp(s, c, r);
    if (atomic_load(&rq->state) != ST_DONE) {
        park(s, c, rq);
        return MHD_YES;
    }
    return finish(s, c, rq);
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version, const char *upload_data,
                                 size_t *upload_data_size, void **con_cls)
{
    nr_http_server_t *s = cls;
    conn_req_t *rq = *con_cls;
    if (rq == NULL) {
        rq = nr_calloc(1, sizeof(*rq));
        rq->async.wake = wake;
        rq->conn = c;
        *con_cls = rq;
        return first_call(s, c, rq, url, method);
    }
    if (*upload_data_size > 0) {
        size_t n = *upload_data_size;
        *upload_data_size = 0;
        return upload(s, c, rq, upload_data, n);
    }
    if (rq->parked) { /* resumed: its request is done */
        rq->parked = false;
        unpark(s);
        return finish(s, c, rq);
    }
    if (rq->responded)
        return MHD_YES;
    if (rq->refused > 0)
        return send_refusal(s, c, rq);
    rq->responded = true;
    return dispatch(s, c, rq, url, method);
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    nr_http_server_t *s = cls;
    conn_req_t *rq = *con_cls;
    if (rq == NULL)
        return;
    if (rq->parked) { /* resumed, but the client had gone: drop the answer */
        rq->parked = false;
        rq->resp.finish(rq->resp.finish_arg, &rq->resp);
        nr_http_resp_release(&rq->resp);
        unpark(s);
    }
    atomic_fetch_sub(&s->body_bytes, rq->charged);
    nr_http_conn_busy(c, false);
    free(rq->mem);
    free(rq);
    *con_cls = NULL;
}

/* ---- lifecycle ------------------------------------------------------------------ */

void nr_http_server_free(nr_http_server_t *s)
{
    nr_http_conns_free(s);
    pthread_mutex_destroy(&s->bulk.mu);
    pthread_cond_destroy(&s->bulk.cv);
    free(s->server_meta);
    free((char *)s->opts.address);
    nr_header_fwd_free(s->fwd);
    nr_restrict_free(&s->opts.restricted);
    free(s);
}

nr_http_server_t *nr_http_server_new(const nr_http_options_t *opts, nr_server_t *core)
{
    nr_http_server_t *s = nr_calloc(1, sizeof(*s));
    s->opts = *opts;
    s->opts.address = nr_strdup(opts->address ? opts->address : "0.0.0.0");
    nr_restrict_copy(&s->opts.restricted, &opts->restricted);
    if (s->opts.max_input_size == 0)
        s->opts.max_input_size = NR_DEFAULT_HTTP_MAX_INPUT;
    if (s->opts.body_memory_limit == 0)
        s->opts.body_memory_limit = UINT64_MAX;
    if (s->opts.max_connections <= 0)
        s->opts.max_connections = INT32_MAX;
    if (s->opts.thread_count <= 0)
        s->opts.thread_count = 1;
    s->core = core;
    nr_mhd_quiesce_init(&s->quiesce);
    pthread_mutex_init(&s->bulk.mu, NULL);
    pthread_cond_init(&s->bulk.cv, NULL);
    atomic_init(&s->body_bytes, 0);
    nr_http_conns_init(s);
    atomic_init(&s->parked, 0);
    s->server_meta = nr_http_server_meta_render(core, &s->server_meta_len);
    return s;
}

nr_status_t *nr_http_start(const nr_http_options_t *opts, nr_server_t *core,
                           nr_http_server_t **out)
{
    *out = NULL;
    nr_http_server_t *s = nr_http_server_new(opts, core);
    if (opts->header_forward != NULL && opts->header_forward[0] != '\0') {
        nr_status_t *st = nr_header_fwd_new("http-header-forward-pattern",
                                            opts->header_forward, &s->fwd);
        if (st != NULL) {
            nr_http_server_free(s);
            return st;
        }
    }

    struct sockaddr_storage ss;
    bool v6 = false;
    if (!nr_net_resolve(s->opts.address, opts->port, &ss, &v6)) {
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "invalid --http-address '%s'",
                                        s->opts.address);
        nr_http_server_free(s);
        return st;
    }
    /* --http-thread-count threads, each with its own epoll set over its share of
     * the connections; a request in flight parks its connection (suspend/resume)
     * instead of holding a thread, so threads stay bounded whatever the number of
     * connections (docs/architecture.md has the measurements behind the choice).
     * MHD's own connection limit is a backstop above ours: it closes silently.
     * The connection memory limit is MHD's default, 32 KiB: MHD zeroes the whole
     * connection pool between two requests of a keep-alive connection, so the pool
     * size is paid on every request (256 KiB cost 12% of requests/s at 16
     * connections, docs/performance.md). Bodies do not live in the pool: on_access
     * copies them out as they arrive, so large tensors are not limited by it.
     * The read buffer grows in 16 KiB steps instead of MHD's 1 KiB, so a large body
     * arrives in fewer, larger reads: 8 us less server CPU per 602 KB request
     * (123 vs 131 us, sink model, wrk c=1, 4 rounds) at no cost to small requests.
     * Smaller pools were measured again (2026-12-06): 16 KiB / 8 KiB steps and 8 KiB /
     * 4 KiB cut the zeroing of a 16-float JSON request from 49k to 25k and 12k counted
     * instructions, but cost 0-14% and 30% more server CPU per 600 KB binary request
     * (296 us at 32 KiB, wrk c=1, 3 rounds): kept.
     * No Date header: Triton sends none (content-type and content-length only), and
     * libmicrohttpd's costs a clock read and a gmtime per reply. */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME |
                     MHD_USE_ERROR_LOG | MHD_USE_SUPPRESS_DATE_NO_CLOCK | (v6 ? MHD_USE_IPv6 : 0);
    unsigned backstop = s->opts.max_connections > INT32_MAX - 4096
                            ? (unsigned)INT32_MAX
                            : (unsigned)s->opts.max_connections + 64u * (unsigned)s->opts.thread_count;
    nr_http_bulk_start(&s->bulk); /* before a worker can post to it */
    /* --reuse-http-port: SO_REUSEPORT, so servers started with it share the port. Only then:
     * MHD reads the option given as 0 as "disallow reuse" and then leaves out the SO_REUSEADDR
     * it sets by default, so a server restarted on its port while connections it closed are
     * in TIME_WAIT (a rolling restart behind a load balancer) failed with "already in use". */
    struct MHD_OptionItem reuse[] = {
        {s->opts.reuse_port ? MHD_OPTION_LISTENING_ADDRESS_REUSE : MHD_OPTION_END, 1, NULL},
        {MHD_OPTION_END, 0, NULL}};
    s->daemon = MHD_start_daemon(
        flags, (uint16_t)opts->port, NULL, NULL, on_access, s,
        MHD_OPTION_EXTERNAL_LOGGER, nr_mhd_log, (void *)"HTTP",
        MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
        MHD_OPTION_NOTIFY_CONNECTION, nr_http_on_connection, s,
        MHD_OPTION_THREAD_POOL_SIZE, (unsigned)s->opts.thread_count,
        MHD_OPTION_CONNECTION_LIMIT, backstop,
        MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)(32 * 1024),
        MHD_OPTION_CONNECTION_MEMORY_INCREMENT, (size_t)(16 * 1024),
        MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)1024,
        MHD_OPTION_ARRAY, reuse,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->opts.idle_timeout_secs, MHD_OPTION_END);
    nr_status_t *st = nr_mhd_started(s->daemon, s->opts.address, opts->port, &s->port);
    if (st != NULL) {
        nr_http_bulk_stop(&s->bulk);
        nr_http_server_free(s);
        return st;
    }
    nr_http_sweeper_start(s);
    *out = s;
    return NULL;
}

int nr_http_port(const nr_http_server_t *srv)
{
    return srv->port;
}

void nr_http_quiesce(nr_http_server_t *srv)
{
    if (srv != NULL)
        nr_mhd_quiesce(srv->daemon, &srv->quiesce);
}

void nr_http_stop(nr_http_server_t *srv)
{
    if (srv == NULL)
        return;
    nr_http_quiesce(srv);
    /* MHD must not stop with a connection suspended: let every request in
     * flight finish and its connection be resumed first. */
    while (atomic_load(&srv->parked) > 0) {
        struct timespec ts = {0, 5 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    nr_http_sweeper_stop(srv);
    nr_mhd_stop(srv->daemon, &srv->quiesce);
    /* After the workers, which may post to it until they stop; idle by now: every
     * request it ran has woken its connection. */
    nr_http_bulk_stop(&srv->bulk);
    nr_http_server_free(srv);
}

/* ---- the frontend interface (core/frontend.h) ---- */

static nr_status_t *fe_start(const void *opts, nr_server_t *core, void **state)
{
    return nr_http_start(opts, core, (nr_http_server_t **)state);
}

static int fe_port(const void *state)
{
    return nr_http_port(state);
}

static void fe_quiesce(void *state)
{
    nr_http_quiesce(state);
}

static void fe_stop(void *state)
{
    nr_http_stop(state);
}

const nr_frontend_t nr_http_frontend = {
    "HTTPService", "HTTP", fe_start, fe_port, fe_quiesce, fe_stop,
};
