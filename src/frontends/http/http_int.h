/* http_int.h - internals shared by the HTTP frontend's files (not a public API).
 *
 *   http_server.c    daemon (libmicrohttpd), routing table, body accumulation,
 *                    turning an nr_http_resp_t into bytes on the wire
 *   http_conn.c      the open connections: limit, refusal, sweeper
 *   http_infer.c     POST .../infer: body -> nr_req_t (JSON + binary + raw)
 *   http_bulk.c      large inference requests run on a pool, off the workers
 *   http_encode.c    finished request -> JSON header + binary chunks
 *   http_json.c      metadata, config, stats, repository index, logging, error bodies
 *   http_shm.c       the shared-memory extension's endpoints
 *   http_compress.c  request inflate and response gzip/deflate (zlib)
 *
 * What is not HTTP lives in the core and is shared with the other frontends:
 * the server (core/server.h), metadata/statistics/index as data
 * (core/kserve.h), request parameters, shared memory, classification and
 * output order (core/infer.h), the JSON reader (common/json.h).
 *
 * Handlers never see libmicrohttpd: they get an nr_http_req_t (views of the
 * request) and fill an nr_http_resp_t, so each of them can be driven without
 * sockets (unit tests, fuzzers).
 */
#ifndef NR_HTTP_INT_H
#define NR_HTTP_INT_H

#include "../../common/buf.h"
#include "../../common/json.h"
#include "../../common/status.h"
#include "../../core/infer.h"
#include "../../core/kserve.h"
#include "../../core/server.h"
#include "../mhd/mhd.h"
#include "http_server.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

/* How a handler that cannot answer at once (inference) hands its answer back
 * later: the server passes one in nr_http_req_t.async; the handler fills
 * nr_http_resp_t.finish and makes sure wake(async) is called exactly once,
 * from any thread, when the work is done. The server then parks the
 * connection (no thread waits for it) and, once woken, calls
 * finish(finish_arg, r) on one of its own threads to fill the response. */
typedef struct nr_http_async_s nr_http_async_t;
struct nr_http_async_s {
    void (*wake)(nr_http_async_t *a);
};

/* Request as a handler sees it. Views stay valid until the response is sent. */
typedef struct {
    const char *method;
    const char *model; size_t model_len; /* route's <m>, URL-decoded; NULL if none */
    int64_t version;                     /* route's <v>; -1 if none */
    bool has_repo;                       /* /v2/repository/<r>/...: a repository name */
    bool load;                           /* .../load (not .../unload) */
    bool generate_stream;                /* .../generate_stream (not .../generate) */
    const char *region; size_t region_len; /* .../region/<r>/...; NULL if none */
    const char *body; size_t body_len;   /* the body as received (not inflated) */
    char *body_owned;  /* malloc'd block holding body (which may start inside it) or NULL;
                          a handler may take it (set NULL) */
    const char *content_encoding;        /* header values or NULL */
    const char *accept_encoding;
    const char *infer_header_len;        /* Inference-Header-Content-Length */
    const struct nr_http_headers_s *headers; /* all of them (nr_http_headers_t) */
    uint64_t recv_ns[2];    /* when it began and finished arriving (tracing; 0: not taken) */
    nr_http_async_t *async; /* NULL: the handler answers before it returns */
} nr_http_req_t;

/* A reply that is sent while it is being made (http_stream.c: server-sent events). Made with
 * two references: the producer's (given back by nr_http_stream_end) and the reply's (taken by
 * the response that sends it, or given back by nr_http_stream_drop when none will). */
typedef struct nr_http_stream_s nr_http_stream_t;
/* `open`: the server's parked count, held until the end (its stop waits for it). */
nr_http_stream_t *nr_http_stream_new(atomic_int *open);
/* Appends bytes to send (dropped once the client is gone). Any thread. */
void nr_http_stream_write(nr_http_stream_t *st, const char *p, size_t n);
/* The last write: the reply ends once what is written has gone. Any thread. */
void nr_http_stream_end(nr_http_stream_t *st);
void nr_http_stream_drop(nr_http_stream_t *st);
/* Set once the reply is gone (the client left): a request reads it as cancelled. */
const atomic_bool *nr_http_stream_gone(const nr_http_stream_t *st);

/* A response before it becomes an MHD_Response. Either `body` (owned buffer)
 * or `iov` (views kept alive until free_fn(free_arg) runs) carries the bytes, or `stream`. */
typedef struct nr_http_resp_s nr_http_resp_t;
struct nr_http_resp_s {
    int status;
    const char *content_type;  /* static string; NULL = none */
    nr_buf_t body;
    struct iovec *iov; size_t n_iov; /* owned array (malloc'd); data are views */
    void (*free_fn)(void *arg);  /* releases what iov points into */
    void *free_arg;
    const char *content_encoding; /* "gzip" / "deflate" / NULL */
    bool has_infer_header_len;
    uint64_t infer_header_len;
    bool accept_encoding_hint;   /* "Accept-Encoding: gzip, deflate" (501) */
    /* Set by a handler that deferred its answer (see nr_http_async_t): fills
     * this response once the request's async was woken; takes finish_arg. */
    void (*finish)(void *finish_arg, nr_http_resp_t *r);
    void *finish_arg;
    /* Set while the server runs finish for a connection still open: finish
     * may defer once more (set r->finish again, async woken when done). */
    bool may_defer;
    nr_http_stream_t *stream; /* the body is sent as it is written (the reply's reference) */
};

void nr_http_resp_init(nr_http_resp_t *r);
/* Releases whatever the response still owns (used when it is never sent). */
void nr_http_resp_release(nr_http_resp_t *r);

/* ---- http_conn.c: the open connections ---------------------------------- */

typedef struct nr_http_conn_s nr_http_conn_t;

/* Every open connection, counted against --http-max-connections, and the
 * sweeper thread that closes the ones whose client has gone. */
typedef struct {
    pthread_mutex_t mu;   /* guards the list; a connection's fd stays open while listed */
    nr_http_conn_t *head;
    atomic_int open;      /* connections open, refused ones included */
    atomic_bool refusing; /* the last connection was refused (a burst) */
    atomic_ullong refused; /* refused in this burst */
    pthread_t sweeper;
    bool sweeping;        /* the sweeper runs; stop: set false under mu, signal cv */
    pthread_cond_t cv;
} nr_http_conns_t;

struct nr_http_server_s;
void nr_http_conns_init(struct nr_http_server_s *s);
void nr_http_conns_free(struct nr_http_server_s *s);
/* (http_conn.h has the two calls that take libmicrohttpd's types.) */
void nr_http_sweeper_start(struct nr_http_server_s *s);
void nr_http_sweeper_stop(struct nr_http_server_s *s);

/* ---- http_bulk.c: large requests off the workers --------------------------- */

struct job_s;
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    struct job_s *head, *tail; /* waiting, in arrival order */
    pthread_t *threads;
    int n;                     /* threads running; 0: no pool (requests stay inline) */
    bool stop;
} nr_http_bulk_t;

struct nr_http_server_s;
/* Starts the pool's threads (mu and cv initialized by nr_http_server_new). */
void nr_http_bulk_start(nr_http_bulk_t *b);
/* Joins the threads; nothing may be waiting (every parked request is done). */
void nr_http_bulk_stop(nr_http_bulk_t *b);

/* ---- http_server.c: server state read by the handlers -------------------- */

struct nr_http_server_s {
    nr_http_options_t opts; /* address is an owned copy */
    nr_server_t *core;
    struct MHD_Daemon *daemon;
    nr_mhd_quiesce_t quiesce;
    int port;                  /* bound port */
    nr_http_conns_t conns;     /* the open connections (http_conn.c) */
    atomic_ullong body_bytes;  /* request body bytes held (--http-body-memory-limit) */
    atomic_int parked;         /* connections suspended while their request runs */
    char *server_meta;         /* GET /v2 body, rendered once */
    size_t server_meta_len;
    nr_http_bulk_t bulk;       /* large inference requests (http_bulk.c) */
    nr_header_fwd_t *fwd;      /* --http-header-forward-pattern, or NULL */
};

/* The headers a handler reads (values or NULL), and every header through `each` and `lookup`
 * (NULL when the caller has none to give): fn(arg, name, value) for each, in the order
 * received; lookup(ctx, name) one (case-insensitive name) or NULL. */
typedef struct nr_http_headers_s {
    const char *content_encoding;
    const char *accept_encoding;
    const char *infer_header_len; /* Inference-Header-Content-Length */
    void (*each)(void *ctx, void (*fn)(void *arg, const char *name, const char *value),
                 void *arg);
    const char *(*lookup)(void *ctx, const char *name); /* one by name, or NULL */
    void *ctx;
    uint64_t recv_ns[2]; /* not a header: when the request began and finished arriving, taken
                            while tracing may sample (trace.h), else 0 */
} nr_http_headers_t;

/* A server without a daemon: options copied, metadata rendered.
 * nr_http_start adds the daemon; fuzzers and tests use it as is. */
nr_http_server_t *nr_http_server_new(const nr_http_options_t *opts, nr_server_t *core);
void nr_http_server_free(nr_http_server_t *s);

/* One complete request, without sockets: routes (method, url) and runs the
 * handler, which fills r. *mem is NULL or a malloc'd block holding `lead`
 * unused bytes and then the body (see nr_http_body_lead); when the handler
 * takes it *mem becomes NULL, otherwise the caller still owns it. The body
 * size limit (--http-max-input-size) is enforced before this, while the body
 * is received. `async` NULL: every handler answers before this returns;
 * otherwise one may defer (r->finish set; see nr_http_async_t). */
void nr_http_handle(nr_http_server_t *s, const char *method, const char *url,
                    const nr_http_headers_t *h, char **mem, size_t lead, size_t body_len,
                    nr_http_async_t *async, nr_http_resp_t *r);

/* Bytes to leave unused before a body whose Inference-Header-Content-Length is
 * `ihcl` (NULL: none), so that its binary data, which follows the JSON header,
 * starts 16-byte aligned in a malloc'd block: ONNX Runtime can then read a
 * tensor in place instead of the backend copying it to an aligned buffer. */
size_t nr_http_body_lead(const char *ihcl);

/* ---- http_json.c -------------------------------------------------------- */

/* How Triton's HTTP frontend reads a logging update (a JSON object: find's arg), its texts. */
extern const nr_kserve_log_reader_t nr_http_log_reader;

/* A JSON value as the core's protocol-neutral parameter (a view into v). */
nr_param_t nr_http_param(const char *key, size_t key_len, const nr_jv_t *v);
/* {"error":"<msg>"} as application/json with the status' HTTP code. Takes st. */
void nr_http_error(nr_http_resp_t *r, nr_status_t *st);
void nr_http_error_msg(nr_http_resp_t *r, int status, const char *msg);
void nr_http_json_ok(nr_http_resp_t *r); /* 200 application/json, body already set */
void nr_http_empty(nr_http_resp_t *r, int status); /* empty text/plain */

char *nr_http_server_meta_render(const nr_server_t *core, size_t *len);

void nr_http_model_metadata(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_model_config(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_model_ready(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_model_stats(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_repo_index(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_repo_control(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
/* GET /v2/logging: the settings; POST: updates them first (the logging extension). */
void nr_http_logging(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_trace(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);

/* ---- http_compress.c ---------------------------------------------------- */

typedef enum { NR_ENC_IDENTITY = 0, NR_ENC_GZIP, NR_ENC_DEFLATE, NR_ENC_UNKNOWN } nr_http_enc_t;

/* Content-Encoding of a request: exact, case-sensitive names as Triton. */
nr_http_enc_t nr_http_request_encoding(const char *content_encoding);
/* Accept-Encoding with q-weights: the best of identity / gzip / deflate. */
nr_http_enc_t nr_http_response_encoding(const char *accept_encoding);
/* Inflates gzip or zlib data (auto-detected); the result is at most `max`
 * bytes and starts `lead` bytes into the malloc'd block *out (see
 * nr_http_body_lead). On failure returns INVALID_ARG and *out is NULL. */
NR_MUST_CHECK nr_status_t *nr_http_inflate(const char *in, size_t n, uint64_t max, size_t lead,
                                           char **out, size_t *out_len);
/* Compresses the concatenation of iov[] into out (gzip or zlib). */
NR_MUST_CHECK nr_status_t *nr_http_deflate(nr_http_enc_t enc, const struct iovec *iov,
                                           size_t n_iov, nr_buf_t *out);

/* ---- http_infer.c / http_encode.c --------------------------------------- */

/* Everything one inference request owns on the HTTP side. */
typedef struct nr_http_infer_s {
    nr_infer_t base;     /* the request as the core sees it (model, req, shm, outputs) */
    nr_json_doc_t *doc;  /* the JSON header: input names may be views into it */
    char *body;          /* the body (inflated or as received); binary inputs view it */
    size_t body_len;
    char *body_mem;      /* owned allocation that holds body, or NULL: body itself is */
    bool raw;            /* header length 0: the body is the single input */
    bool default_binary; /* for outputs not listed: binary_data_output / raw */
    bool *binary;        /* [cfg n_output]: a listed output asked for binary_data */
    /* response side */
    nr_buf_t header;     /* JSON header */
    const char *accept_encoding; /* for the reply; valid until it is sent */
    nr_http_async_t *async;      /* done() wakes the server; NULL: the event below */
    nr_http_server_t *srv;       /* its pool builds a large reply */
    /* done() event: the calling thread waits, an instance thread signals */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool sync_init, finished;
    /* POST .../generate (http_generate.c): the answer's JSON, rendered from the outputs once
     * done, or from a decoupled model's response as it comes (it must send exactly one) */
    bool generate;
    nr_buf_t gen;
    unsigned gen_responses;
    nr_status_t *gen_failed; /* that response was an error, or could not be rendered */
    nr_http_stream_t *sse;   /* generate_stream: each response an event (the producer's) */
} nr_http_infer_t;

/* Parses an infer body into inf->base.req (not yet submitted). Takes ownership
 * of `body` (malloc'd; binary inputs are views into it), or of inf->body_mem,
 * the malloc'd block that holds `body`, when the caller has set it. `ihcl` is
 * the Inference-Header-Content-Length header value or NULL. `core` gives the
 * shared-memory regions and labels; NULL parses without them. Works without a
 * socket: this is the fuzzing entry point (bytes + headers in -> nr_req_t or
 * error). On error inf may be partly filled; nr_http_infer_free(inf) cleans
 * up either way. inf must be zeroed by the caller. */
NR_MUST_CHECK nr_status_t *nr_http_infer_parse(nr_http_infer_t *inf, nr_server_t *core,
                                               nr_model_t *model, char *body, size_t body_len,
                                               const char *ihcl);
void nr_http_infer_free(nr_http_infer_t *inf);

/* POST /v2/models/<m>[/versions/<v>]/infer: parse, submit, then (deferred
 * when q->async is set, else after waiting) encode. */
void nr_http_infer(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
/* Hands a large inference request (see http_bulk.c) that may defer to the
 * pool, taking its body and setting r->finish; false: not one for the pool,
 * q and r untouched. */
bool nr_http_bulk_post(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
/* From a finish that may defer (r->may_defer): when the reply is large (its
 * JSON text estimated at json_bytes, or deflate_bytes to compress), queues
 * fn(arg, ...) to build it on the pool, which wakes async once it is built, and
 * sets r->finish; false: small (or no pool), nothing done. */
bool nr_http_bulk_reply(nr_http_server_t *s, nr_http_async_t *async, size_t json_bytes,
                        size_t deflate_bytes, void (*fn)(void *, nr_http_resp_t *), void *arg,
                        nr_http_resp_t *r);

/* A request parameter checked by the rules of Triton's HTTP frontend (its texts for a wrong
 * type, a reserved triton_* key), then given to the core (nr_infer_param). */
NR_MUST_CHECK nr_status_t *nr_http_check_param(nr_infer_t *inf, const nr_param_t *p);
/* After done(): builds the response from the request's outputs: r->iov = [JSON header,
 * binary outputs...] (views into inf and the outputs), content type and
 * Inference-Header-Content-Length. The caller then makes the response own
 * inf (free_fn = nr_http_infer_free) or frees it after copying. */
NR_MUST_CHECK nr_status_t *nr_http_infer_encode(nr_http_infer_t *inf, nr_http_resp_t *r);
/* The flat JSON array of t's elements (Triton's output texts for FP16/BF16). */
NR_MUST_CHECK nr_status_t *nr_http_put_data(nr_buf_t *b, const nr_tensor_t *t, const char *name);

/* ---- http_generate.c: POST .../generate (Triton's generate extension) -------------------- */
/* The request: its body translated to an infer request and run as one (nr_http_infer). */
void nr_http_generate(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
/* A generate body (a JSON object: members named after inputs are their data, "parameters"
 * holds more, anything else is a request parameter) as KServe's infer JSON for model m:
 * *out malloc'd. Shapes come from the model's dims (Triton's rules). */
NR_MUST_CHECK nr_status_t *nr_http_generate_translate(const nr_model_t *m, const char *body,
                                                      size_t len, char **out, size_t *out_len);
/* A decoupled model's response to a generate request (request.h nr_req_response_fn). */
void nr_http_generate_response(nr_req_t *req, const nr_status_t *err, unsigned flags,
                               void *arg);
/* generate_stream: each response of a decoupled model as an event "data: {...}\n\n", and
 * the request's end (an error event when it failed; a non-decoupled model's one answer). */
void nr_http_generate_sse_response(nr_req_t *req, const nr_status_t *err, unsigned flags,
                                   void *arg);
void nr_http_generate_sse_done(nr_req_t *req, void *arg);
/* The finished request's answer: {"model_name", "model_version", "id", outputs...}. */
NR_MUST_CHECK nr_status_t *nr_http_generate_encode(nr_http_infer_t *inf, nr_http_resp_t *r);
/* After done(), before encoding: an estimate of the reply's JSON text (outputs
 * sent as JSON, at 3 bytes of text a tensor byte) and its binary outputs' bytes,
 * to decide where to encode it (nr_http_bulk_reply). */
void nr_http_infer_reply_size(const nr_http_infer_t *inf, size_t *json_bytes,
                              size_t *binary_bytes);

/* ---- http_shm.c: the system (and cuda) shared-memory extension ---------- */

void nr_http_shm_status(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_shm_register(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_shm_unregister(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_cuda_status(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_cuda_register(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);
void nr_http_cuda_unregister(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r);

#endif
