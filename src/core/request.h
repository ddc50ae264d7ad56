/* request.h - an inference request as the core sees it (nr_req_t).
 *
 * Life of a request (one owner at a time):
 *   frontend: nr_req_new -> nr_req_add_input / nr_req_add_output -> nr_model_submit
 *   core:     validates, then either refuses it (nr_model_submit returns the error; done is
 *             never called and the request stays the frontend's), or owns it until it calls
 *             req->done(req, arg) exactly once;
 *   frontend: in done, or after it: reads req->status / outputs, encodes the reply,
 *             nr_req_free.
 * Which thread calls done: the one that executed the request, or the one that delivers it in
 * order (preserve_ordering hands a request finished on one instance to the thread that
 * finishes the request before it). That is an instance thread; or, with inline execution
 * (docs/architecture.md, "One request"), the submitting thread itself, before
 * nr_model_submit returns; or another frontend thread that borrowed the idle instance for a
 * request of its own and ran this queued one after it (nr_sched_take_next); or the loading
 * thread, for warmup requests. So done must not assume its own frontend's thread, nor take a
 * lock its submitter may hold across nr_model_submit. Input bytes are borrowed views: they
 * must stay valid until done runs.
 */
#ifndef NR_REQUEST_H
#define NR_REQUEST_H

#include "../backends/backend.h"
#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/debug.h"
#include "../common/strmap.h"
#include "../common/tensor.h"
#include "trace.h"

#include <stdbool.h>
#include <stdint.h>

#define NR_REQ_EXTRA 0x80000000u

typedef struct nr_model_s nr_model_t;
typedef struct nr_req_s nr_req_t;
typedef void (*nr_req_done_fn)(nr_req_t *req, void *arg);
/* One response of a decoupled model: req->outputs as the backend filled them (valid during the
 * call only: a frontend that keeps them takes a hold reference, or takes the hold over by
 * setting it NULL) or err; flags NR_RESPONSE_*
 * (backend.h). Runs on the executing thread, before done. */
typedef void (*nr_req_response_fn)(nr_req_t *req, const nr_status_t *err, unsigned flags,
                                   void *arg);

struct nr_req_s {
    nr_model_t *model; /* borrowed; models live until the server stops */
    char *id;          /* owned; NULL or "" = no id */
    /* Inputs in config order; `present[i]` says whether the request gave it. */
    nr_tensor_t *inputs;
    bool *present;
    size_t n_given; /* inputs the request named, duplicates and unknown ones included */
    /* Arrival order of the named inputs: a config index, or NR_REQ_EXTRA + i
     * for extra_names[i]. Validation only runs over it when no extra exists. */
    uint32_t *order;
    size_t n_order;
    char **extra_names; size_t n_extra; /* unknown input names (owned), for the error text */
    nr_strmap_t extra_index;            /* extra_names -> position: a name given twice */
    /* Requested outputs as config indices, in the order they are reported
     * (Triton: sorted by output name). Empty at submit = all outputs. */
    uint32_t *want;
    size_t n_want;
    bool *wanted; /* [cfg n_output]: named among the requested outputs */
    nr_tensor_t *outputs; /* [n_want], filled by the backend */
    nr_batch_item_t item; /* the backend's view of this request */
    uint64_t batch_size;
    uint32_t priority;   /* request parameter "priority": 0 = the model's default level */
    /* the parameters the server does not consume (custom keys), as a JSON object for backends
     * (Triton's request parameters, request.parameters() in a Python model): members while
     * they are added, closed by validation; empty when none */
    nr_buf_t params;
    uint64_t timeout_us; /* request parameter "timeout" (us): 0 = none */
    /* set by the scheduler at enqueue, under its lock */
    uint32_t level;       /* priority-level queue index (0 = highest) */
    uint64_t seq;         /* arrival number, for preserve_ordering */
    uint64_t deadline_ns; /* queue timeout (CLOCK_MONOTONIC), 0 = none */
    /* CLOCK_MONOTONIC ns */
    uint64_t t_start_ns, t_queue_ns, t_exec_ns, t_input_end_ns, t_infer_end_ns, t_end_ns;
    nr_status_t *status; /* result once done() runs; owned by the request */
    nr_req_done_fn done;
    void *done_arg;
    /* Set by a frontend that delivers several responses per request (a gRPC stream): the
     * responses of a decoupled model, with done_arg; done follows the final one. NULL: a
     * decoupled model refuses the request. */
    nr_req_response_fn on_response;
    bool final_sent; /* the final response has been delivered (decoupled models) */
    /* an item the backend answers after execute (item.later): its end is owned by whichever
     * of run_batch's end and the final response comes second (instance.c) */
    atomic_uint later_refs;
    bool queued; /* it came through the scheduler (completed through it) */
    uint32_t n_responses;        /* delivered so far (response statistics) */
    uint64_t t_last_response_ns; /* when the last one was (0: none yet) */
    void *frontend; /* frontend's per-request state (not touched by core) */
    /* Run on the submitting thread (inline) only when the model's mean
     * execution so far is shorter than this; 0 = no limit. A frontend whose
     * thread serves many clients sets it (gRPC), so a slow model never blocks it. */
    uint64_t inline_max_ns;
    /* Set by the frontend once the client has gone (NULL: it cannot tell); read by what may
     * still start work for the request (an ensemble's next steps). Valid until done runs. */
    const atomic_bool *cancelled;
    /* response cache (cache.h): the key of a request that missed, kept for the insert after
     * it has run (owned), and the lookup's cost so far */
    char *cache_key;
    size_t cache_key_len;
    uint64_t cache_hash, cache_owner, cache_ns;
    /* its trace when it was sampled (trace.h), written when the request is freed; NULL: none */
    nr_trace_t *trace;
    nr_req_t *next; /* queue link, owned by the scheduler while queued */
#ifdef NR_DEBUG
    bool completed; /* done has been called (it must be, exactly once) */
#endif
};

nr_req_t *nr_req_new(nr_model_t *model);
/* Borrows name/data; dims copied. Fails (Triton's texts) for a duplicate input
 * ("input 'X' already exists in request") or too many dims. An unknown name is
 * remembered and reported by nr_model_submit's validation, as Triton does. */
NR_MUST_CHECK nr_status_t *nr_req_add_input(nr_req_t *req, const char *name, size_t name_len,
                                            nr_dtype_t dtype, const int64_t *dims, size_t ndim,
                                            const void *data, size_t size);
/* Unknown output -> "unexpected inference output 'X' for model 'm'". A name
 * given twice is reported once. */
NR_MUST_CHECK nr_status_t *nr_req_add_output(nr_req_t *req, const char *name, size_t name_len);
/* Adds a custom parameter: `value` is its JSON text (a number, true/false, a quoted string). */
void nr_req_add_param(nr_req_t *req, const char *key, size_t key_len, const char *value,
                      size_t value_len);
/* All its custom parameters at once, as a JSON object's text (copied; "{}" or text that is
 * not an object: none). */
void nr_req_set_params(nr_req_t *req, const char *json, size_t len);
/* The request's id (copied); UNAVAILABLE when the copy cannot be had. */
NR_MUST_CHECK nr_status_t *nr_req_set_id(nr_req_t *req, const char *id, size_t len);
/* Config index of the input named so, or -1. */
int nr_req_input_index(const nr_req_t *req, const char *name, size_t len);
/* "[request id: <id>] " / "[request id: <id_unknown>] " prefix Triton puts on core errors. */
nr_status_t *nr_req_error(const nr_req_t *req, nr_code_t code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Releases output holds too, and writes the request's trace when it has one. */
void nr_req_free(nr_req_t *req);

/* Hands a finished request back to its frontend: req->done, exactly once (asserted in the
 * debug builds). Context: the executing or delivering thread, no core lock held. */
static inline void nr_req_done(nr_req_t *req)
{
    NR_DEBUG_ASSERT(!req->completed);
    NR_DEBUG_ONLY(req->completed = true;)
    if (req->trace != NULL)
        nr_trace_done(req->trace);
    req->done(req, req->done_arg);
}

/* One response of a decoupled model's request (backend.h, nr_host_t.respond): to the
 * frontend's on_response unless the final one has gone (a warmup request has none), then the
 * outputs are released and cleared for the next. Context: the executing thread. */
void nr_req_respond(nr_req_t *req, const nr_status_t *err, unsigned flags);

/* Validation of the request against its model (inputs present, dtypes, shapes,
 * byte sizes, batch size); called by nr_model_submit. */
NR_MUST_CHECK nr_status_t *nr_req_validate(nr_req_t *req);

#endif
