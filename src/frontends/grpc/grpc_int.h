/* grpc_int.h - internals shared by the gRPC frontend's files (not a public API).
 *
 *   grpc_server.c    gRPC C core server, completion-queue threads, the method
 *                    table, unary calls (request in, one reply or a status out)
 *   grpc_infer.c     ModelInferRequest -> the core's request; the response
 *                    (raw outputs sent from the backend's buffers, uncopied)
 *   grpc_stream.c    ModelStreamInfer: many requests in flight on one call,
 *                    responses in request order, errors in the stream
 *   grpc_control.c   every other RPC (health, metadata, config, statistics,
 *                    repository, shared memory, trace, logging)
 *
 * Messages are protobuf-c's, generated at build time from the files in src/proto/.
 * What is not gRPC (parameters, shared memory, classification, metadata and
 * statistics as data, errors) is the core's, shared with HTTP.
 *
 * Threads: each thread waits on its own completion queue, and a call stays on
 * the queue it arrived on; every event's tag is an nr_grpc_tag_t whose fn runs
 * on that thread. A reply may also start from an instance thread (the
 * request's done).
 */
#ifndef NR_GRPC_INT_H
#define NR_GRPC_INT_H

#include "../../common/arena.h"
#include "../../common/buf.h"
#include "../../common/status.h"
#include "../../core/infer.h"
#include "../../core/kserve.h"
#include "../../core/server.h"
#include "grpc_server.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include "proto/grpc_service.pb-c.h"
#include "proto/health.pb-c.h"

/* Every tag handed to gRPC: fn(tag, ok) runs when its event completes.
 * nr_grpc_arm publishes the state the event's handler reads (release) and the
 * completion-queue thread takes it (acquire) before fn: gRPC orders the two
 * inside its own code, which ThreadSanitizer does not see. */
typedef struct nr_grpc_tag_s {
    void (*fn)(struct nr_grpc_tag_s *tag, bool ok);
    atomic_uint armed;
} nr_grpc_tag_t;

static inline nr_grpc_tag_t *nr_grpc_arm(nr_grpc_tag_t *t)
{
    atomic_fetch_add_explicit(&t->armed, 1, memory_order_release);
    return t;
}

/* NR_GRPC_CONTROL: a unary call that may take as long as a model load: it runs on a thread of
 * its own (as the HTTP frontend runs model control), so that the completion-queue thread goes
 * on serving every other call meanwhile. */
typedef enum { NR_GRPC_UNARY, NR_GRPC_INFER, NR_GRPC_STREAM, NR_GRPC_CONTROL } nr_grpc_kind_t;

typedef struct nr_grpc_call_s nr_grpc_call_t;

/* A unary handler: req is the unpacked request; it packs its response into
 * out, or returns the error the call ends with (no message then). */
typedef nr_status_t *(*nr_grpc_unary_fn)(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                         nr_buf_t *out);

typedef struct {
    const char *path; /* "/inference.GRPCInferenceService/ServerLive" */
    nr_grpc_kind_t kind;
    const ProtobufCMessageDescriptor *req; /* unary: the request type */
    nr_grpc_unary_fn fn;                   /* unary only */
    nr_api_t api;                          /* its restricted API group (core/restrict.h) */
} nr_grpc_method_t;

struct nr_grpc_server_s {
    nr_grpc_options_t opts; /* strings are owned copies */
    nr_server_t *core;
    grpc_server *server;
    grpc_completion_queue **cqs; /* one per thread: a call stays on the thread that took it */
    void **handles;          /* registered method handles, by method index */
    pthread_t *threads;
    int n_threads;
    int port;
    _Atomic bool shutting_down;   /* no new calls are requested */
    atomic_int calls;             /* calls in progress */
    nr_grpc_tag_t shutdown_tag;
    _Atomic bool shutdown_done;
    nr_header_fwd_t *fwd;         /* --grpc-header-forward-pattern, or NULL */
};

/* One call of a method, from the moment a client's call is matched to the
 * final status. Unary calls carry their request payload. */
struct nr_grpc_call_s {
    nr_grpc_tag_t on_new;   /* the call arrived (request_registered_call) */
    nr_grpc_tag_t on_done;  /* the reply batch completed */
    nr_grpc_server_t *srv;
    int method;             /* index into the method table; -1: unknown method */
    int cq;                 /* the completion queue (thread) the call is bound to */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    uint64_t t_wait_ns;     /* when it began waiting for its client (tracing; 0: not taken) */
    grpc_call_details details; /* unknown methods only */
    int cancelled;          /* RECV_CLOSE_ON_SERVER */
    /* ModelInfer: RECV_CLOSE_ON_SERVER is asked for when the call starts (nr_grpc_watch_close),
     * so a client that cancels (or whose deadline passes) is seen while its request runs:
     * `gone` is the request's `cancelled`. The call is freed once both that and the reply's
     * batch have completed (`pending`). */
    nr_grpc_tag_t on_close;
    bool close_armed;
    atomic_bool gone;
    atomic_int pending;
    grpc_slice status_details;
    grpc_byte_buffer *reply;
    void *state;            /* ModelInfer / ModelStreamInfer state */
};

/* The method table (grpc_control.c) and its size. */
extern const nr_grpc_method_t nr_grpc_methods[];
extern const size_t nr_grpc_n_methods;

/* ---- grpc_server.c ------------------------------------------------------------ */

/* Asks for the call's close now (ModelInfer: the client's cancel is seen while the request
 * runs, through c->gone); false when gRPC refused (c->gone then stays false). Context: the
 * call's completion-queue thread, before the reply. */
bool nr_grpc_watch_close(nr_grpc_call_t *c);

/* The payload as one contiguous slice in *out (a reference when it already
 * is one; several slices are joined in memory of our own). UNAVAILABLE when
 * that memory cannot be had (*out is then empty). */
NR_MUST_CHECK nr_status_t *nr_grpc_payload(grpc_byte_buffer *bb, grpc_slice *out);

/* A protobuf-c allocator over an arena (frees are no-ops). Sizes come from
 * the wire: an allocation that cannot be had returns NULL, which fails the
 * unpack, and is recorded in `failed` (its size) to be told apart from a
 * malformed message. */
typedef struct {
    nr_arena_t *arena;
    size_t failed;
} nr_grpc_alloc_t;
ProtobufCAllocator nr_grpc_arena_allocator(nr_grpc_alloc_t *a);
/* Ends a unary call: the reply (taken; NULL with an error) and the status
 * from st (taken; NULL = OK); `compress` applies the response compression
 * level. Frees the call once gRPC is done with it. Any thread. */
void nr_grpc_finish(nr_grpc_call_t *c, grpc_byte_buffer *reply, nr_status_t *st, bool compress);
/* Frees a call once gRPC is done with it (its final batch completed). */
void nr_grpc_call_free(nr_grpc_call_t *c);
/* The gRPC compression level of --grpc-infer-response-compression-level. */
grpc_compression_level nr_grpc_level(nr_grpc_compression_t c);
/* Packs a protobuf-c message into out. */
void nr_grpc_pack(const ProtobufCMessage *msg, nr_buf_t *out);
/* A slice over memory lent to gRPC (no copy): done(arg) runs once gRPC has
 * dropped it, on any thread (ordered after the lending thread's writes). */
grpc_slice nr_grpc_slice_lend(void *p, size_t len, void (*done)(void *arg), void *arg);
/* A byte buffer that owns buf's memory (no copy); buf is left empty. */
grpc_byte_buffer *nr_grpc_buffer_take(nr_buf_t *buf);
grpc_status_code nr_grpc_code(const nr_status_t *st);

/* ---- grpc_infer.c ------------------------------------------------------------- */

/* Starts a ModelInfer call: parse, submit; the reply goes when it is done. */
void nr_grpc_infer_start(nr_grpc_call_t *c);

/* One request as both ModelInfer and ModelStreamInfer build it. */
typedef struct nr_grpc_infer_s {
    nr_infer_t base;              /* the core's request (model, req, shm, outputs) */
    nr_arena_t arena;             /* the unpacked message and converted inputs */
    Inference__ModelInferRequest *msg;
    void (*on_done)(struct nr_grpc_infer_s *inf); /* runs when the core is done */
    /* a stream's: each response of a decoupled model (request.h, nr_req_response_fn) */
    void (*on_response)(struct nr_grpc_infer_s *inf, const nr_status_t *err, unsigned flags);
    void *owner;                  /* the unary call or the stream entry */
} nr_grpc_infer_t;

/* Parses a serialized ModelInferRequest into a new request (*out, also on
 * error: the stream's error reply needs its id). Triton's order: version,
 * model, parameters, inputs, outputs. Not submitted. Outside a `stream`, a decoupled model
 * is refused once found (UNIMPLEMENTED, Triton's text). */
NR_MUST_CHECK nr_status_t *nr_grpc_infer_parse(nr_server_t *core, const uint8_t *data,
                                               size_t len, bool stream, nr_grpc_infer_t **out);
/* The call's metadata whose keys match --grpc-header-forward-pattern become the parsed
 * request's string parameters (core/headers.h); nothing without the flag. */
void nr_grpc_infer_headers(nr_grpc_infer_t *inf, const nr_grpc_call_t *c);
/* When the request was waited for and read (tracing: GRPC_WAITREAD_START/END; 0: not taken). */
void nr_grpc_infer_trace_recv(nr_grpc_infer_t *inf, uint64_t start_ns, uint64_t end_ns);
/* Submits a parsed request; inf->on_done(inf) runs when it finished. */
NR_MUST_CHECK nr_status_t *nr_grpc_infer_submit(nr_grpc_infer_t *inf);
/* The serialized reply for a finished request: a ModelInferResponse, or a
 * ModelStreamInferResponse carrying it with triton_final_response = `final` when
 * `stream` (a decoupled model's response: the outputs the request holds now). Large raw
 * outputs are slices over the backend's buffers, each holding the buffer (nr_hold_t): inf
 * may be freed once this returns. */
NR_MUST_CHECK nr_status_t *nr_grpc_infer_reply(nr_grpc_infer_t *inf, bool stream, bool final,
                                               grpc_byte_buffer **out);
/* A ModelStreamInferResponse carrying an error (Triton's layout: the id, and
 * after the request reached the core also its model name, version and
 * triton_final_response = final). inf may be NULL. */
grpc_byte_buffer *nr_grpc_stream_error(const nr_grpc_infer_t *inf, bool issued, bool final,
                                       const nr_status_t *st);
/* The empty final response a decoupled model's end without a response becomes when the
 * request asked for it (triton_enable_empty_final_response): id, model and version as the
 * request named them, triton_final_response = true, no outputs. */
grpc_byte_buffer *nr_grpc_stream_empty_final(const nr_grpc_infer_t *inf);
void nr_grpc_infer_free(nr_grpc_infer_t *inf);
/* A request parameter checked by the rules of Triton's gRPC frontend (its texts for a wrong
 * type, a negative priority, a reserved triton_* key), then given to the core
 * (nr_infer_param). */
NR_MUST_CHECK nr_status_t *nr_grpc_check_param(nr_infer_t *inf, const nr_param_t *p);

/* ---- grpc_stream.c ------------------------------------------------------------ */

/* Starts a ModelStreamInfer call: reads requests until the client closes,
 * answers each in request order, then ends with OK. */
void nr_grpc_stream_start(nr_grpc_call_t *c);

/* ---- grpc_control.c ----------------------------------------------------------- */

/* How Triton's gRPC frontend reads a LogSettingsRequest (find's arg), its texts. */
extern const nr_kserve_log_reader_t nr_grpc_log_reader;

#endif
