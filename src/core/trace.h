/* trace.h - request tracing in Triton's "triton" mode (--trace-config, the trace extension's
 * settings): a sampled request's timestamps, and at level TENSORS its input and output tensors,
 * written as Triton writes them into its JSON trace file.
 *
 * Settings, as Triton keeps them: one global setting (from the command line, changed at run time
 * through /v2/trace/setting or TraceSetting) and per-model settings whose unspecified fields
 * follow the global one. Each setting counts the requests it sees and samples every rate-th
 * while its count (-1: no limit) lasts. A sampled request's trace is kept in memory until the
 * request is released, then appended to its setting's stream; the stream goes to the file
 *   - <file>.<n> (n = 0, 1, ...) each time log_frequency traces have been collected, or once
 *     `count` traces were asked for and all of them are in;
 *   - otherwise to <file> itself, one JSON array, when the setting is replaced or at exit (and,
 *     for a setting with no count, each time 1 MiB of traces has piled up: Triton keeps them
 *     all in memory until then; the file ends the same).
 *
 * A trace has an id (process-wide, from 1); an ensemble's steps are child traces with their own
 * ids and parent_id, written with their parent's. Timestamps are CLOCK_MONOTONIC ns (Triton's
 * steady clock).
 *
 * Cost: a request seen while no setting can sample pays one relaxed atomic load
 * (nr_trace_armed); while one can, it takes two uncontended locks to be counted.
 *
 * Threads: every call may come from any thread; a trace itself is used by one thread at a time
 * (the request's owner), its children's ends lock their parent.
 */
#ifndef NR_TRACE_H
#define NR_TRACE_H

#include "../common/status.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nr_req_s nr_req_t;
typedef struct nr_trace_s nr_trace_t;

enum { NR_TRACE_TIMESTAMPS = 1, NR_TRACE_TENSORS = 2 }; /* level bits; 0 = OFF */
typedef enum { NR_TRACE_MODE_TRITON, NR_TRACE_MODE_OPENTELEMETRY } nr_trace_mode_t;
typedef enum { NR_TRACE_HTTP, NR_TRACE_GRPC } nr_trace_proto_t;

typedef struct {
    unsigned level;         /* NR_TRACE_* bits */
    uint32_t rate;          /* every rate-th request; 0 samples none */
    int32_t count;          /* traces still to take; -1: no limit */
    uint32_t log_frequency; /* traces per <file>.<n>; 0: all into <file> */
    const char *file;       /* "" or NULL: none (then nothing is sampled in triton mode) */
    nr_trace_mode_t mode;
    /* mode opentelemetry: its settings as "<key>=<value>" in the order given (url, resource,
     * bsp_max_queue_size, bsp_schedule_delay, bsp_max_export_batch_size: the exporter's,
     * frontends/otlp), which the trace extension lists too */
    const char *const *otel;
    size_t n_otel;
} nr_trace_config_t;

/* ---- mode opentelemetry: spans, and who sends them ------------------------------------ */

typedef struct {
    const char *name;
    uint64_t ns; /* CLOCK_MONOTONIC; 0: not taken (left out) */
} nr_trace_event_t;

typedef struct {
    const char *key;
    const char *str; /* a string value, or NULL: the integer */
    int64_t num;
} nr_trace_attr_t;

/* One span (kind SERVER, as Triton's). */
typedef struct {
    const uint8_t *trace_id;       /* 16 bytes */
    const uint8_t *span_id;        /* 8 bytes */
    const uint8_t *parent_span_id; /* 8 bytes, or NULL: a root span */
    const char *name;
    uint64_t start_ns, end_ns;     /* CLOCK_MONOTONIC */
    const nr_trace_attr_t *attrs;
    size_t n_attrs;
    const nr_trace_event_t *events;
    size_t n_events;
} nr_trace_span_t;

/* What sends the spans (frontends/otlp registers itself before nr_trace_start). `span` is
 * called on the thread that releases a traced request and must not wait; the data it gets is
 * valid during the call only. NULL: none (mode opentelemetry then samples nothing). */
typedef struct {
    void (*span)(void *ctx, const nr_trace_span_t *s);
    void *ctx;
} nr_trace_exporter_t;
void nr_trace_set_exporter(const nr_trace_exporter_t *e);

/* n random bytes, never all zero (trace and span ids). */
void nr_trace_random_id(uint8_t *out, size_t n);

/* ---- process-wide state ---------------------------------------------------------------- */

/* Starts tracing with the command line's settings (replacing any earlier ones). */
void nr_trace_start(const nr_trace_config_t *c);
/* Writes what every setting has collected and closes the file. Requests still holding a trace
 * finish writing into it when they are released. */
void nr_trace_stop(void);
/* Why the global setting samples nothing though tracing was asked for (a level without a file,
 * a rate of 0), or NULL. */
const char *nr_trace_idle_reason(void);

extern atomic_bool nr_trace_armed_flag;
/* Whether any setting may sample: false means no request is traced. */
static inline bool nr_trace_armed(void)
{
    return atomic_load_explicit(&nr_trace_armed_flag, memory_order_relaxed);
}

/* ---- one trace ------------------------------------------------------------------------- */


/* Counts a request for model `model` and returns its trace when it is sampled, else NULL.
 * `traceparent`: the request's W3C trace context header value, or NULL; in mode opentelemetry a
 * valid one is always traced (whatever rate and count say, as Triton does) and its spans
 * continue that trace. */
nr_trace_t *nr_trace_sample(const char *model, const char *traceparent);
/* A child of `parent` (an ensemble step's request). */
nr_trace_t *nr_trace_child(nr_trace_t *parent);
/* The frontend's receive times (0: not taken). */
void nr_trace_recv(nr_trace_t *t, nr_trace_proto_t proto, uint64_t start_ns, uint64_t end_ns);
/* The frontend starts (end false) or has finished (end true) sending the reply: now. */
void nr_trace_send(nr_trace_t *t, bool end);
/* The core has handed the request back (its response is complete): now. */
void nr_trace_done(nr_trace_t *t);
/* A decoupled model's request has sent a response: its INFER_RESPONSE_COMPLETE is the first
 * one's, as Triton's stream handler captures it (on its first callback); other models' is
 * the request's completion. Called from the thread that sends the request's responses (they
 * are sent one at a time). */
void nr_trace_response(nr_trace_t *t);
/* The request is being released: its trace is written (from req's model, id, times, tensors)
 * into its parent's or its setting's stream, and t freed. */
void nr_trace_end(nr_trace_t *t, const nr_req_t *req);

/* ---- settings (the trace extension) ---------------------------------------------------- */

/* A change: for each field, set it (has_*) or clear it (clear_*: a model's field follows the
 * global one again, the global one goes back to the command line's). */
typedef struct {
    bool has_level, has_rate, has_count, has_log_frequency;
    bool clear_level, clear_rate, clear_count, clear_log_frequency;
    unsigned level;
    uint32_t rate;
    int32_t count;
    uint32_t log_frequency;
} nr_trace_update_t;

/* Applies u to the global setting (model NULL or "") or to model's. INVALID_ARG "Attempting
 * to set invalid trace setting :<why>" when the result would trace nothing for a reason other
 * than its level being OFF. */
NR_MUST_CHECK nr_status_t *nr_trace_update(const char *model, const nr_trace_update_t *u);
/* The setting in force for model (NULL or "": the global one); c->file stays valid until
 * nr_trace_stop. */
void nr_trace_get(const char *model, nr_trace_config_t *c);

#endif
