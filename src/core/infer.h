/* infer.h - one KServe v2 inference request as every frontend builds it
 * (nr_infer_t): the core request (nr_req_t) plus what the protocol adds
 * around it and is the same over HTTP and gRPC: request parameters and
 * their validation, inputs read from shared-memory regions (a reference held
 * per region), outputs written into regions, classification, and the
 * outputs of the reply in Triton's order (sorted by name). A frontend parses
 * its encoding into these calls, submits, and renders nr_infer_outputs.
 *
 * Ownership: a frontend embeds an nr_infer_t in its per-request state,
 * initialises it for a model, and releases it once the reply no longer
 * points into the outputs (nr_infer_release drops the request, its output
 * holds and the region references). One thread at a time; nothing here
 * locks except the shared-memory registry inside its own calls.
 */
#ifndef NR_INFER_H
#define NR_INFER_H

#include "headers.h"
#include "kserve.h"
#include "model.h"
#include "server.h"
#include "shm.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* An output the request asked to have written into a shared-memory region. */
typedef struct {
    nr_shm_region_t *region; /* a reference, released with the request */
    void *addr;
    uint64_t byte_size;
} nr_infer_shm_out_t;

/* One output of the reply, in reply order. */
typedef struct {
    uint32_t index;        /* the config output */
    const char *name;
    const nr_tensor_t *t;  /* what to send: the backend's tensor, or its classification */
    bool in_shm;           /* already written into its region: the reply names it only */
} nr_infer_out_t;

/* A stream (a gRPC ModelStreamInfer call, an HTTP generate_stream reply) whose client reads
 * slower than its decoupled model answers: past NR_STREAM_BACKLOG_MAX bytes waiting, the
 * model's next response waits for the client to take some (the model is slowed to the
 * client's pace, as the Python stub's own backlog slows a model down); a client that takes
 * nothing for NR_STREAM_STALL_NS ends the stream (gRPC RESOURCE_EXHAUSTED; the HTTP
 * connection is closed), what waited is freed and its requests read as cancelled. Memory
 * follows what the client takes; Triton keeps everything. */
#define NR_STREAM_BACKLOG_MAX ((size_t)64 << 20)
#define NR_STREAM_STALL_NS (10 * 1000000000ull)

typedef struct nr_infer_s {
    nr_server_t *srv;    /* shared-memory registry and labels; NULL when parsing alone */
    nr_model_t *model;
    nr_req_t *req;
    bool *listed;        /* [cfg n_output]: named in the request's outputs */
    uint64_t *class_n;   /* [cfg n_output]: classification count, 0 = none */
    nr_infer_shm_out_t *shm_out;                /* [cfg n_output] or NULL */
    nr_shm_region_t **shm_in; size_t n_shm_in;  /* regions the inputs read */
    char **owned; size_t n_owned;               /* buffers the request keeps */
    nr_infer_out_t *outs; size_t n_outs;        /* nr_infer_outputs' result */
    nr_tensor_t *class_t;  /* [n_want]: classified outputs; NULL until one is classified */
    bool empty_final;      /* triton_enable_empty_final_response: a decoupled model's end
                              without a response is sent as an empty final response */
    /* tracing (trace.h): the frontend's protocol and when the request began and finished
     * arriving, taken while nr_trace_armed() (0: not taken) */
    nr_trace_proto_t proto;
    uint64_t t_recv_ns[2];
    char traceparent[56]; /* its W3C traceparent header (55 characters), or "" */
} nr_infer_t;

/* Starts a request for model m (srv may be NULL); req->frontend = frontend.
 * inf takes over the caller's reference on m (nr_infer_release drops it). */
void nr_infer_init(nr_infer_t *inf, nr_server_t *srv, nr_model_t *m, void *frontend);
/* Frees everything inf owns (not inf itself); safe on a zeroed inf. */
void nr_infer_release(nr_infer_t *inf);
/* inf takes buf (malloc'd) and frees it with the request; returns buf. */
char *nr_infer_keep(nr_infer_t *inf, char *buf);

/* ---- parameters ----------------------------------------------------------------- */

/* One request-level parameter, after its frontend has checked it by its protocol's rules
 * (each frontend's Triton texts for a wrong type or a reserved triton_* key): priority and
 * timeout, which must then be NR_PARAM_UINT64 or NR_PARAM_INT64 (a negative timeout is
 * none, as Triton takes it), are applied to the request; triton_enable_empty_final_response
 * (bool) sets empty_final; custom keys go to the request's JSON parameters (nr_req_add_param)
 * for the backend; sequence_id, sequence_start, sequence_end are kept by nobody (no sequence
 * batcher). */
void nr_infer_param(nr_infer_t *inf, const nr_param_t *p);
/* A header of the request: a string parameter of that name when fwd matches it
 * (core/headers.h; fwd NULL: no forwarding, nothing happens). */
void nr_infer_header(nr_infer_t *inf, const nr_header_fwd_t *fwd, const char *name,
                     size_t name_len, const char *value, size_t value_len);

/* The request's W3C "traceparent" header value, kept for tracing (trace.h; a value that is not
 * 55 characters long is not one). */
void nr_infer_traceparent(nr_infer_t *inf, const char *value, size_t len);

/* The reply starts (end false) or has finished (end true) going out: a traced request's
 * SEND timestamps. */
static inline void nr_infer_trace_send(nr_infer_t *inf, bool end)
{
    if (inf->req != NULL && inf->req->trace != NULL)
        nr_trace_send(inf->req->trace, end);
}

/* ---- inputs and outputs ------------------------------------------------------------ */

/* The bytes [offset, offset + byte_size) of a registered region as an input's
 * data; the request holds the region until it is released. */
NR_MUST_CHECK nr_status_t *nr_infer_shm_input(nr_infer_t *inf, const char *region, size_t len,
                                              uint64_t offset, uint64_t byte_size,
                                              const void **data, size_t *size);

/* The request names output `name` (unknown: Triton's error). *index is its
 * config index the first time it is named, -1 when named again (the first
 * listing counts, as in Triton). */
NR_MUST_CHECK nr_status_t *nr_infer_output(nr_infer_t *inf, const char *name, size_t len,
                                           int *index);
/* Output `index` is answered as its top-k classification (k = 0: plainly). */
void nr_infer_output_classify(nr_infer_t *inf, int index, uint64_t k);
/* Output `index` is written into [offset, offset + byte_size) of a region,
 * which the request holds until it is released. With index -1 (an output
 * named again) the region is checked and not kept. */
NR_MUST_CHECK nr_status_t *nr_infer_output_shm(nr_infer_t *inf, int index, const char *region,
                                               size_t len, uint64_t offset, uint64_t byte_size);

/* Validates and queues the request (nr_model_submit); done(req, arg) runs
 * once it has finished, possibly before this returns. On error nothing was
 * queued and done is not called. A request the trace settings sample gets its trace here
 * (req->trace), written when inf is released. */
NR_MUST_CHECK nr_status_t *nr_infer_submit(nr_infer_t *inf, nr_req_done_fn done, void *arg);

/* After done: the request's result as the reply's outputs, in reply order
 * (by output name), classification applied and shared-memory outputs
 * written. *outs stays valid until nr_infer_release. Returns the request's
 * error, a region's error (truncated by its owner, too small for an output),
 * or a classification error. */
NR_MUST_CHECK nr_status_t *nr_infer_outputs(nr_infer_t *inf, const nr_infer_out_t **outs,
                                            size_t *n);

#endif
