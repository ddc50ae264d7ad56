/* perf.h - nereid-perf, perf_analyzer's drop-in (issue #19): what its files share.
 *
 *   perf_main.c     flags (perf_analyzer's names, defaults and checks), the sweep, exit codes
 *   perf_http.c     over HTTP: a blocking HTTP/1.1 client (keep-alive), the server and model
 *                   queries perf_analyzer makes, the infer request (binary tensors)
 *   perf_grpc.c     the same over gRPC (gRPC's C core, protobuf-c)
 *   perf_model.c    the model whatever the protocol: request shapes and data
 *   perf_stats.c    server statistics: snapshots, an ensemble's composing models, each
 *                   window's figures from two snapshots, as perf_analyzer reads them
 *   perf_shm.c      --shared-memory system: the regions, registered over either protocol
 *   perf_profile.c  --profile-export-file: every reported request, perf_analyzer's format
 *   perf_metrics.c  --collect-metrics: the server's GPU series from its Prometheus endpoint
 *   perf_load.c     the load (one thread per concurrency slot) and its windows
 *   perf_measure.c  one level measured: windows until stable, perf_analyzer's rules
 *   perf_hist.c     the latency histogram (log-linear, 3 significant digits, no sample cap)
 *   perf_report.c   perf_analyzer's console blocks, summary and CSV
 *   perf_export.c   nereid-perf's own outputs: the JSON report, the SVG plot
 *
 * Data flows one way: options -> model -> load -> windows -> report. Each worker owns its
 * connection and its window accumulator (a mutex the main thread takes only to swap it out at
 * a window boundary), so memory and work per request are constant whatever the rate.
 */
#ifndef NR_PERF_H
#define NR_PERF_H

#include "../../common/buf.h"
#include "../../common/status.h"

#include <pthread.h>
#include <sys/socket.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* the perf_analyzer whose flags, output and files nereid-perf follows */
#define PERF_PA_VERSION "2.51.0"

/* perf_analyzer's exit codes */
#define PERF_EXIT_OK 0
#define PERF_EXIT_UNSTABLE 2
#define PERF_EXIT_NO_REQUESTS 3
#define PERF_EXIT_ERROR 99

typedef struct {
    char *name;
    int64_t *dims;
    size_t n_dims;
} perf_shape_t;

typedef struct {
    char *name, *value; /* -H Name:Value */
} perf_header_t;

typedef struct {
    const char *model, *version, *url, *protocol, *csv, *input_data;
    const char *json, *plot; /* nereid-perf's --json report and --plot SVG */
    const char *profile_export; /* --profile-export-file */
    bool report_unstable;    /* a level not stable in -r windows: report them all merged */
    int trials; /* --interleaved-trials: each level measured this often, in turn, median */
    bool collect_metrics;
    const char *metrics_url; /* NULL: <-u's host>:8002/metrics */
    uint64_t metrics_interval_ms;
    int batch;
    uint64_t conc_start, conc_end, conc_step;
    bool conc_given;
    bool range_end_given; /* the range's end written: perf_analyzer then prints its limits */
    double rate_start, rate_end, rate_step; /* --request-rate-range: rate mode when given */
    bool rate_mode, poisson;
    bool binary_search; /* --binary-search between the range's start and end */
    /* --request-intervals <file>: the gaps between sends (ns), in turn and looped; rate mode at
     * their mean rate, one level */
    uint64_t *intervals_ns;
    size_t n_intervals;
    uint64_t max_threads; /* 0: the default (16) */
    uint64_t interval_ms;
    bool count_windows;
    uint64_t request_count; /* --measurement-request-count */
    uint64_t request_total; /* --request-count: exactly that many requests, one window */
    double stability;       /* fraction: 0.10 */
    int max_trials;
    uint64_t latency_limit_ms;
    int percentile; /* -1: average */
    bool async, verbose_csv, verbose;
    bool streaming; /* --streaming (gRPC): every request over the worker's own stream */
    bool decoupled; /* the model is decoupled (set once it is loaded): a request's answer is
                       every response up to its final one */
    bool grpc; /* -i grpc */
    uint64_t warmup;
    int string_length;
    bool shm_system;          /* --shared-memory system */
    uint64_t output_shm_size; /* --output-shared-memory-size: per output of variable size */
    perf_shape_t *shapes;
    size_t n_shapes;
    perf_header_t *headers;
    size_t n_headers;
    /* --trace-level (repeatable), --trace-rate, --trace-count, --log-frequency: the server's
     * global trace settings, changed before the run as perf_analyzer does (NULL: not given) */
    const char **trace_levels;
    size_t n_trace_levels;
    const char *trace_rate, *trace_count, *log_frequency;
} perf_opts_t;

/* ---- perf_http.c ---- */

typedef struct {
    char host[256];
    int port;
    struct sockaddr_storage addr; /* resolved once, at perf_conn_init */
    socklen_t addr_len;
    int fd;
    nr_buf_t in; /* bytes read, not yet consumed */
    size_t used; /* bytes of `in` the last response took */
} perf_conn_t;

typedef struct {
    int status;
    const char *body; /* into conn->in, valid until the next exchange */
    size_t body_len;
    uint64_t send_ns, recv_ns; /* writing the request; reading the response after its first byte */
    const char *head; /* the response's header block (into conn->in), head_len bytes */
    size_t head_len;
    uint32_t responses; /* a decoupled model's: the responses with outputs it sent */
} perf_resp_t;

/* "host:port" (default port 8000) into c; no connection yet. */
NR_MUST_CHECK nr_status_t *perf_conn_init(perf_conn_t *c, const char *url);
void perf_conn_close(perf_conn_t *c);
/* One exchange; reconnects when the connection was closed. Errors name curl's texts where
 * perf_analyzer shows them ("HTTP client failed: Couldn't connect to server"). */
NR_MUST_CHECK nr_status_t *perf_exchange(perf_conn_t *c, const char *method, const char *path,
                                         const nr_buf_t *head, const void *body, size_t len,
                                         perf_resp_t *r);
/* --profile-export-file: the outputs of an infer response as one JSON object (a tensor the
 * response carries no data of, with --shared-memory, left out). */
void perf_http_outputs(const perf_resp_t *r, nr_buf_t *out);

/* A failed response's text: the server's {"error": ...}, else "HTTP <status>: <body>". */
char *perf_error_text(const perf_resp_t *r);
/* GET path: the body of a 200 answer (the caller frees *text); otherwise the server's
 * {"error": ...} becomes the status's text. */
NR_MUST_CHECK nr_status_t *perf_get_body(perf_conn_t *c, const char *path, char **text,
                                         size_t *len);

typedef struct {
    char *name, *datatype;
    int elem_size;  /* bytes per element; 0 for BYTES */
    int64_t *shape; /* the request's shape, batch dimension included when batching */
    size_t n_shape;
    size_t offset, bytes; /* its data in the request's data buffer */
    bool variable;        /* a -1 dim without --shape: the --input-data file gives the shape */
    char *region; /* --shared-memory system: the region holding the request being built */
} perf_input_t;

typedef struct {
    char *name;
    char *region; /* --shared-memory system: its region (the output's name), shm_bytes long */
    size_t shm_bytes;
} perf_output_t;

/* One step of an ensemble as perf_analyzer maps them: the ensemble's name, the step's model
 * and its version ("" for -1: whichever version the server picks). A nested ensemble's steps
 * are edges under its own name. */
typedef struct {
    char *parent, *name, *version;
} perf_edge_t;

/* --shared-memory system: a region nereid-perf created, /dev/shm/<name> (key "/<name>") */
typedef struct {
    char *name;
    size_t bytes;
} perf_region_t;

typedef struct {
    char *version;     /* as asked (-x) or "" */
    int max_batch_size;
    bool decoupled;    /* model_transaction_policy { decoupled: true } */
    bool has_stats;    /* server metadata lists "statistics" */
    perf_input_t *inputs;
    size_t n_inputs;
    perf_output_t *outputs;
    size_t n_outputs;
    perf_region_t *regions; /* --shared-memory system: the outputs', then each request's */
    size_t n_regions;       /* inputs' (<input>_0_<request>), as perf_analyzer names them */
    nr_buf_t *requests; /* every infer request built (HTTP: headers and body; gRPC: the */
    size_t n_requests;  /* serialized message): one, or one per --input-data entry; each
                         * worker sends them in turn */
    char *path;        /* /v2/models/<m>[/versions/<v>]/infer */
    nr_buf_t *profile_inputs; /* --profile-export-file: each request's "request_inputs" */
    perf_edge_t *edges; /* an ensemble's composing models (perf_stats.c); none otherwise */
    size_t n_edges;
} perf_model_t;

/* Reads the server and model metadata and config, checks -b against max_batch_size, applies
 * --shape, and builds the one request every worker sends. */
NR_MUST_CHECK nr_status_t *perf_model_load(perf_conn_t *c, const perf_opts_t *o, perf_model_t *m);

/* POST /v2/systemsharedmemory/region/<name>/register {"key":"/<name>","offset":0,
 * "byte_size":bytes}; name NULL: POST /v2/systemsharedmemory/unregister (every region). */
NR_MUST_CHECK nr_status_t *perf_http_shm(perf_conn_t *c, const char *name, size_t bytes);
/* POST /v2/trace/setting with the --trace-* flags given. */
NR_MUST_CHECK nr_status_t *perf_http_trace(perf_conn_t *c, const perf_opts_t *o);

/* ---- perf_model.c: the model whatever the protocol ---- */

uint64_t perf_now_ns(void);
void perf_model_init(perf_model_t *m, const perf_opts_t *o);
void perf_model_free(perf_model_t *m);
/* perf_analyzer's refusal of -b > 1 for a model without batching. */
NR_MUST_CHECK nr_status_t *perf_model_check_batch(const perf_model_t *m, const perf_opts_t *o);
/* One input from its metadata (dims as the server lists them, -1 for a variable one): the
 * request shape with -b in front when the model batches, --shape for the rest when given. */
NR_MUST_CHECK nr_status_t *perf_input_init(perf_input_t *in, const char *name,
                                           const char *datatype, const int64_t *dims, size_t nd,
                                           int mbs, const perf_opts_t *o);
/* One output from its metadata: its size per batch when fixed, its region with shm. */
void perf_output_init(perf_output_t *out, const char *name, const char *datatype,
                      const int64_t *dims, size_t nd, int mbs, const perf_opts_t *o);
/* Builds one request into *request from the inputs' shapes, offsets and bytes in data (or,
 * with --shared-memory system, their regions: in->region and each output's). */
typedef nr_status_t *(*perf_build_fn)(void *ctx, const perf_model_t *m, const nr_buf_t *data,
                                      nr_buf_t *request);
/* m->requests: with --input-data zero|random one request of generated data; with a JSON file
 * (perf_data.c) one per "data" entry, each input's shape from the entry, --shape or the
 * model. */
NR_MUST_CHECK nr_status_t *perf_model_requests(perf_model_t *m, const perf_opts_t *o,
                                               perf_build_fn build, void *ctx);

/* ---- perf_shm.c: --shared-memory system ---- */

/* Creates /dev/shm/<name> holding size bytes (data, or zeros when NULL); in m->regions. */
NR_MUST_CHECK nr_status_t *perf_shm_create(perf_model_t *m, const char *name, const void *data,
                                           size_t size);
/* Removes m's regions from /dev/shm. */
void perf_shm_free(perf_model_t *m);

/* ---- perf_profile.c: --profile-export-file ---- */

/* "<name>":[values] for a tensor of that datatype (BYTES as strings, FP16/BF16 as numbers),
 * at most max_elems of them. */
void perf_json_tensor(nr_buf_t *out, const char *name, size_t name_len, const char *datatype,
                      size_t dt_len, const void *data, size_t bytes, size_t max_elems);
/* A request's "request_inputs" object from the data it is built from (one batch element,
 * as perf_analyzer writes it). */
void perf_profile_inputs(const perf_model_t *m, const nr_buf_t *data, nr_buf_t *out);
/* Appends one request's record (sent and answered in ns since the epoch; outputs as
 * perf_http_outputs renders them) to records. */
void perf_profile_record(nr_buf_t *records, const perf_model_t *m, size_t request,
                         uint64_t sent_ns, uint64_t answered_ns, const nr_buf_t *outputs);

/* ---- perf_data.c: --input-data <file.json>, perf_analyzer's format ---- */

/* One "data" entry: per input (in m->inputs' order) its shape and its bytes in data. */
typedef struct {
    int64_t **shapes;
    size_t *n_shapes;
    size_t *offsets, *bytes;
    nr_buf_t data;
} perf_entry_t;
/* Reads the file's "data" entries for m's inputs (each a flat or nested array, {"b64": ...}
 * or {"content": ..., "shape": [...]}); with -b n each entry's data is sent n times as one
 * batch. Errors name the file, the entry and the input. */
NR_MUST_CHECK nr_status_t *perf_data_json(const char *path, const perf_opts_t *o,
                                          const perf_model_t *m, perf_entry_t **out, size_t *n);
void perf_entries_free(perf_entry_t *e, size_t n, size_t n_inputs);
/* True when --input-data names a file or a directory (neither zero nor random). */
bool perf_data_is_file(const perf_opts_t *o);
/* True when --input-data names a directory. */
bool perf_data_is_dir(const perf_opts_t *o);

/* ---- perf_stats.c: server statistics ---- */

typedef struct {
    uint64_t inference_count, execution_count, success_count, success_ns;
    uint64_t queue_count, queue_ns, input_count, input_ns, infer_count, infer_ns;
    uint64_t output_count, output_ns;
} perf_server_stats_t;

/* a += b, and d = now - prev, field by field (every field is a uint64_t counter). */
void perf_stats_add(perf_server_stats_t *a, const perf_server_stats_t *b);
void perf_stats_diff(perf_server_stats_t *d, const perf_server_stats_t *now,
                     const perf_server_stats_t *prev);

/* The statistics the server listed at one moment: one entry per model version. */
typedef struct {
    char *name, *version;
    perf_server_stats_t s;
} perf_stats_entry_t;

typedef struct {
    perf_stats_entry_t *e;
    size_t n;
} perf_snapshot_t;

/* Appends an entry (its counters zero) and returns it. */
perf_stats_entry_t *perf_snapshot_add(perf_snapshot_t *snap, const char *name, size_t name_len,
                                      const char *version, size_t version_len);
void perf_snapshot_free(perf_snapshot_t *snap);

/* A model's config as far as perf_analyzer reads it for its composing models: its name and,
 * for an ensemble (platform "ensemble"), each step's model and version. */
typedef struct {
    char *name;
    bool ensemble;
    char **step_models;
    int64_t *step_versions; /* -1: any */
    size_t n_steps;
} perf_config_t;

void perf_config_free(perf_config_t *c);
/* Fetches the config of model `name` at `version` ("" for the server's choice). */
typedef nr_status_t *(*perf_config_fn)(void *ctx, const char *name, const char *version,
                                       perf_config_t *out);
/* m->edges from the model's own config, as perf_analyzer builds its composing-model map: each
 * ensemble step, and the steps of every step model that is itself an ensemble (its config
 * fetched, once per model and version). Nothing for any other model. */
NR_MUST_CHECK nr_status_t *perf_composing_load(perf_model_t *m, const perf_config_t *top,
                                               perf_config_fn fetch, void *ctx);

/* A composing model's statistics over a window, in a pre-order list of the ensemble's tree:
 * the model, the version its statistics are of, its counters, and how many entries after it
 * are its own composing models (a nested ensemble's). */
typedef struct {
    char *name, *version;
    perf_server_stats_t s;
    size_t n_desc;
} perf_comp_t;

void perf_comp_free(perf_comp_t *c, size_t n);

/* perf_http.c: */
/* GET /v2/models/<m>[/versions/<v>]/stats, or with all /v2/models/stats (every model's). */
NR_MUST_CHECK nr_status_t *perf_server_stats(perf_conn_t *c, const perf_opts_t *o, bool all,
                                             perf_snapshot_t *snap);

/* ---- perf_grpc.c (nr_grpc_lib_init() first) ---- */

typedef struct grpc_channel grpc_channel;
typedef struct grpc_completion_queue grpc_completion_queue;
typedef struct grpc_call grpc_call;
typedef struct {
    grpc_channel *ch;
    grpc_completion_queue *cq;
    bool streaming;    /* --streaming: ModelInfer over this channel's ModelStreamInfer stream */
    bool decoupled;    /* streaming: a request's answer ends with its final response */
    grpc_call *stream; /* open once, for every request after it */
    bool stream_md;    /* its initial metadata asked for (with its first answer) */
} perf_grpc_t;

NR_MUST_CHECK nr_status_t *perf_grpc_open(perf_grpc_t *g, const char *url);
void perf_grpc_close(perf_grpc_t *g);
/* perf_model_load over gRPC: m->request is the serialized ModelInferRequest. */
NR_MUST_CHECK nr_status_t *perf_grpc_model_load(perf_grpc_t *g, const perf_opts_t *o,
                                                perf_model_t *m);
/* ModelStatistics: every version of -m (-x's only, when given), or with all every model's. */
NR_MUST_CHECK nr_status_t *perf_grpc_server_stats(perf_grpc_t *g, const perf_opts_t *o, bool all,
                                                  perf_snapshot_t *snap);
/* SystemSharedMemoryRegister (key "/<name>", offset 0); name NULL: SystemSharedMemoryUnregister
 * of every region. */
NR_MUST_CHECK nr_status_t *perf_grpc_shm(perf_grpc_t *g, const char *name, size_t bytes);
/* TraceSetting (the global settings) with the --trace-* flags given. */
NR_MUST_CHECK nr_status_t *perf_grpc_trace(perf_grpc_t *g, const perf_opts_t *o);
/* Many ModelInfer calls in flight from one thread: slot i has its own channel (its own
 * connection, as every HTTP worker has) and at most one call at a time; every completion comes
 * through one completion queue. The concurrency mode's gRPC load (perf_load.c): one thread
 * waking once per answer drives many slots, where a thread per slot blocked in its own queue
 * cost twice the client CPU per request. */
typedef struct perf_grpc_slot perf_grpc_slot_t;
typedef struct {
    grpc_completion_queue *cq;
    perf_grpc_slot_t *slots;
    size_t n;
} perf_grpc_pool_t;
NR_MUST_CHECK nr_status_t *perf_grpc_pool_open(perf_grpc_pool_t *p, const char *url, size_t n);
/* Starts slot i's call of request (a model's built request, read in place until it ends). */
NR_MUST_CHECK nr_status_t *perf_grpc_pool_start(perf_grpc_pool_t *p, size_t i,
                                                const nr_buf_t *request);
/* Waits up to 50 ms for a call to end: its slot, its error in *err (NULL when it succeeded);
 * SIZE_MAX when none ended. */
size_t perf_grpc_pool_next(perf_grpc_pool_t *p, nr_status_t **err);
/* Cancels the calls still in flight, waits for them, closes everything. */
void perf_grpc_pool_close(perf_grpc_pool_t *p);

/* perf_http_outputs for a serialized ModelInferResponse. */
void perf_grpc_outputs(const nr_buf_t *resp, nr_buf_t *out);
/* One ModelInfer; the response's bytes land in *scratch. r gets the (un)marshal times. With
 * g->streaming the request goes as a message of the channel's ModelStreamInfer stream (opened
 * on the first one, again after an error ended it) and its answer is the next message; its
 * ModelInferResponse lands in *scratch, its error_message is the error. */
NR_MUST_CHECK nr_status_t *perf_grpc_infer(perf_grpc_t *g, const nr_buf_t *request,
                                           nr_buf_t *scratch, perf_resp_t *r);

/* ---- perf_hist.c ---- */

#define PERF_HIST_SUB 1024 /* sub-buckets per power of two: 3 significant digits */
#define PERF_HIST_BUCKETS (2 * PERF_HIST_SUB + 53 * PERF_HIST_SUB)

typedef struct {
    uint64_t count;
    uint64_t min, max;
    double sum, sumsq; /* ns, ns^2 */
    uint32_t *counts;  /* PERF_HIST_BUCKETS, allocated on first record */
} perf_hist_t;

void perf_hist_record(perf_hist_t *h, uint64_t ns);
/* The values [lo, hi] (ns) that bucket idx holds. */
void perf_hist_bucket(size_t idx, uint64_t *lo, uint64_t *hi);
void perf_hist_merge(perf_hist_t *into, const perf_hist_t *from);
/* The value of rank (size_t)(p/100*(n-1)+0.5) in sorted order (perf_analyzer's index), as the
 * middle of its bucket: within 0.05 % of the recorded value. */
uint64_t perf_hist_percentile(const perf_hist_t *h, double p);
double perf_hist_mean(const perf_hist_t *h);
double perf_hist_stddev(const perf_hist_t *h); /* sample (n-1) */
void perf_hist_reset(perf_hist_t *h);
void perf_hist_free(perf_hist_t *h);

/* ---- perf_load.c ---- */

/* --collect-metrics: the GPU series of one window (or of three merged), per gpu_uuid. */
#define PERF_MAX_GPUS 16
typedef struct {
    char uuid[96];
    double util_sum, power_sum; /* over util_n / power_n polls */
    uint64_t util_n, power_n;
    double mem_used, mem_total; /* the maximum; the first value */
} perf_gpu_t;

typedef struct {
    perf_gpu_t gpu[PERF_MAX_GPUS];
    size_t n;
} perf_gpus_t;

/* What one window (or the merge of three) measured. */
typedef struct {
    uint64_t start_ns, end_ns;
    uint64_t count, errors;
    uint64_t responses; /* a decoupled model's responses (Response Throughput) */
    uint64_t delayed; /* rate mode: sent more than 1 ms after their scheduled time */
    perf_hist_t lat;  /* concurrency mode: from the send; rate mode: from the scheduled time */
    uint64_t send_ns, recv_ns; /* sums over count */
    uint64_t lib_ns;           /* sum over count of the exchanges' own time (send to answer) */
    perf_server_stats_t server; /* delta over the window */
    bool have_server;
    perf_comp_t *comp; /* an ensemble's composing models over the window (perf_stats.c) */
    size_t n_comp;
    perf_gpus_t gpus; /* --collect-metrics */
    char *error; /* the first failed request's message */
    nr_buf_t records;  /* --profile-export-file: its requests, JSON objects joined by commas */
    uint64_t *bounds;  /* its start and end (merged: each window's end), ns since the epoch; */
    size_t n_bounds;   /* only with --profile-export-file */
} perf_window_t;

typedef struct perf_load_s perf_load_t;

/* Concurrency mode (rate 0): `conc` workers sending m->request back to back over their own
 * connection. Rate mode: a pool of workers (--max-threads, default 16) sending on a schedule
 * of `rate` requests per second (constant gaps, or exponential with --request-distribution
 * poisson), each at its scheduled time or as soon as a worker is free. */
NR_MUST_CHECK nr_status_t *perf_load_start(const perf_opts_t *o, const perf_model_t *m,
                                           uint64_t conc, double rate, perf_load_t **out);
/* Ends the current window now: its measurements move into *w (which the caller frees with
 * perf_window_free) and the next window starts. */
void perf_load_cut(perf_load_t *l, perf_window_t *w);
/* Requests completed in the current window so far, failed ones included (a window of
 * failures ends, and says so). */
uint64_t perf_load_pending_count(perf_load_t *l);
void perf_load_stop(perf_load_t *l);
void perf_window_merge(perf_window_t *into, const perf_window_t *from);
void perf_window_free(perf_window_t *w);

/* perf_stats.c: a window's server figures from the snapshots before and after it: -m's (-x's
 * version, else the highest the server lists) into w->server, and an ensemble's composing
 * models into w->comp as perf_analyzer summarizes them (a step without a version: the highest
 * version whose queue count grew, with perf_analyzer's warning when several did). The error
 * is perf_analyzer's ("failed to find the requested model version"). */
NR_MUST_CHECK nr_status_t *perf_stats_window(const perf_opts_t *o, const perf_model_t *m,
                                             const perf_snapshot_t *prev,
                                             const perf_snapshot_t *now, perf_window_t *w);
/* into->comp += from->comp, entry by entry; the first window merged gives the tree, as
 * perf_analyzer merges the composing models the first of the windows lists. */
void perf_comp_merge(perf_window_t *into, const perf_window_t *from);

/* ---- perf_metrics.c: --collect-metrics ---- */

typedef struct {
    perf_conn_t conn;
    char *path;
    bool warned; /* perf_analyzer's "Unable to parse" warnings are printed once */
} perf_metrics_t;

NR_MUST_CHECK nr_status_t *perf_metrics_init(perf_metrics_t *mt, const perf_opts_t *o);
void perf_metrics_close(perf_metrics_t *mt);
/* One scrape: the GPU series into *acc. */
void perf_metrics_poll(perf_metrics_t *mt, perf_gpus_t *acc);
void perf_gpus_merge(perf_gpus_t *into, const perf_gpus_t *from);

/* ---- perf_report.c ---- */

typedef struct {
    uint64_t value; /* concurrency */
    double rate;    /* rate mode: requests per second */
    uint64_t threads; /* the load's threads */
    perf_window_t merged;
} perf_step_t;

void perf_print_settings(const perf_opts_t *o);
void perf_print_step(const perf_opts_t *o, const perf_step_t *s);
void perf_print_summary(const perf_opts_t *o, const perf_step_t *steps, size_t n);
NR_MUST_CHECK nr_status_t *perf_write_csv(const perf_opts_t *o, const perf_step_t *steps,
                                          size_t n);
/* ---- perf_measure.c ---- */

/* The main thread's connections: the model's queries and the statistics, over either
 * protocol, and the metrics endpoint with --collect-metrics. */
typedef struct {
    bool grpc;
    perf_conn_t http;
    perf_grpc_t g;
    perf_metrics_t metrics;
} perf_ctl_t;

/* perf_shm.c, with the server: as perf_analyzer, every system region the server holds is
 * unregistered first, then m's are registered (outputs first); and all again at the end. */
NR_MUST_CHECK nr_status_t *perf_shm_register(perf_ctl_t *c, const perf_model_t *m);
NR_MUST_CHECK nr_status_t *perf_shm_unregister(perf_ctl_t *c);

/* PERF_STEP_ALL: not stable, and --report-unstable reports every window of the level merged. */
typedef enum {
    PERF_STEP_STABLE,
    PERF_STEP_UNSTABLE,
    PERF_STEP_OVER_LIMIT,
    PERF_STEP_ALL
} perf_step_result_t;

/* perf_analyzer's defaults (-b 1, concurrency 1, 5000 ms windows, 50-request count windows,
 * 10 % stability, 10 trials, random data, HTTP). */
void perf_opts_defaults(perf_opts_t *o);

/* Measures one level (s->value requests in flight, or s->rate per second in rate mode) into
 * s->merged. Returns an exit code on a fatal error (its text, as perf_analyzer prints it, in
 * why), else -1 with *res; an unstable level's reason is in why. */
int perf_measure(perf_ctl_t *ctl, const perf_opts_t *o, const perf_model_t *m, perf_step_t *s,
                 perf_step_result_t *res, char *why, size_t why_len);
/* Several loads measured over the same windows (nereid-analyzer's models served together):
 * the windows end when every part's last three are stable (or over its limit) at once, or
 * after the first part's --max-trials; the first part's options set the windows. A fatal
 * error ends all (its exit code returned, its text in why); else -1, each part's result in
 * its res and why explaining the first part that did not settle. perf_measure is one part. */
typedef struct {
    const perf_opts_t *o;
    const perf_model_t *m;
    perf_step_t *s;
    perf_step_result_t res;
} perf_part_t;
int perf_measure_parts(perf_ctl_t *ctl, perf_part_t *parts, size_t n, char *why,
                       size_t why_len);

/* perf_export.c: the --json report (each step with its histogram) and the --plot SVG. */
NR_MUST_CHECK nr_status_t *perf_write_json(const perf_opts_t *o, const perf_step_t *steps,
                                           size_t n);
NR_MUST_CHECK nr_status_t *perf_write_plot(const perf_opts_t *o, const perf_step_t *steps,
                                           size_t n);
/* perf_profile.c: the --profile-export-file, one experiment per step. */
NR_MUST_CHECK nr_status_t *perf_write_profile(const perf_opts_t *o, const perf_step_t *steps,
                                              size_t n);
/* Writes b to path (perf_analyzer's "failed to open file" on an error). */
NR_MUST_CHECK nr_status_t *perf_write_file(const char *path, const nr_buf_t *b);
/* An SVG plot's frame (also nereid-analyzer's report): the canvas W x H with margins
 * L, R, T, B; perf_svg_frame draws the grid, the ticks and the axis labels for values up to
 * about xmax, ymax (rounded up to a tick) and sets f->xmax, f->ymax; perf_svg_x/_y map a
 * value to a coordinate. perf_svg_xml appends text escaped for XML and HTML. */
typedef struct {
    double W, H, L, R, T, B;
    double xmax, ymax;
} perf_svg_t;
void perf_svg_frame(nr_buf_t *b, perf_svg_t *f, double xmax, double ymax, const char *xlabel,
                    const char *ylabel);
double perf_svg_x(const perf_svg_t *f, double v);
double perf_svg_y(const perf_svg_t *f, double v);
void perf_svg_xml(nr_buf_t *b, const char *text);
/* Inferences per second of a window: requests x -b over its wall time. */
double perf_throughput(const perf_opts_t *o, const perf_window_t *w);
/* The stabilizing latency of a window in ns: p<P> with --percentile, else the mean. */
uint64_t perf_stab_latency(const perf_opts_t *o, const perf_window_t *w);

#endif
