/* options.h - the server's options, Triton's command-line flags as one table (common/cli.h):
 * the command line (main.c) and the in-process API (nereid.h) set them through nr_opts_set,
 * and --help is printed from the same table.
 *
 * How a refused value is reported is the caller's: nr_opts_set returns a status whose code
 * says which of Triton's command-line forms it takes (main.c prints them):
 *   NR_NOT_FOUND     no such option;
 *   NR_INVALID_ARG   "Bad option: "--<flag>"." and the message, after the usage (exit 2);
 *   NR_UNKNOWN       the same with Triton's host-policy spacing (exit 1);
 *   NR_UNSUPPORTED   the message alone (exit 2): an option nereid refuses;
 *   NR_UNAVAILABLE   the message alone (exit 1): host-policy values refused at start.
 */
#ifndef NR_API_OPTIONS_H
#define NR_API_OPTIONS_H

#include "../common/cli.h"
#include "../common/status.h"
#include "../core/trace.h"
#include "../frontends/grpc/grpc_server.h"
#include "../frontends/metrics/metrics_server.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *flag; /* the table's name */
    char *text;       /* owned */
} nr_opts_note_t;

typedef struct {
    const char **repos;
    size_t n_repos;
    const char *http_address;
    int http_port;
    int http_threads;
    uint64_t http_max_input;
    int http_max_conns;        /* -1: as many as the fd limit allows */
    int http_idle_timeout, http_request_timeout;
    uint64_t http_body_memory; /* 0: a quarter of the machine's memory */
    bool autocomplete, exit_on_error, strict_readiness, model_namespacing, allow_http, allow_grpc, inline_execution;
    nr_grpc_options_t grpc;
    bool allow_metrics, allow_gpu_metrics;
    nr_metrics_options_t metrics;
    int exit_timeout_secs;
    int drain_quiet_ms;       /* --drain-quiet-ms */
    const char *id;
    const char *model_config_name;
    const char *control_mode;
    const char **load_models; /* --load-model */
    size_t n_load_models;
    int poll_secs;            /* --repository-poll-secs */
    int model_load_retries;   /* --model-load-retry-count */
    int model_load_threads;   /* --model-load-thread-count */
    bool http_reuse_port;     /* --reuse-http-port */
    const char *http_header_forward; /* --http-header-forward-pattern (NULL: none) */
    nr_restrict_t http_restricted;   /* --http-restricted-api (owned) */
    /* Flags accepted without their effect here (no GPU, a part nereid does not have, or one
     * not built yet): a warning line each, once per flag, printed at start (nr_boot_start). */
    nr_opts_note_t *notes;
    size_t n_notes;
    struct { /* flags whose meaning depends on others (nr_opts_finish) */
        bool no_autocomplete, cache_config, cache_byte_size;
        int strict_model_config; /* -1: not given, else its value */
        /* tracing: the deprecated --trace-* flags given, a level of OFF among them, and the
         * --trace-config values (checked when given, applied over the deprecated flags) */
        bool trace_level, trace_rate, trace_count, trace_file, trace_log_frequency, trace_off;
        const char **trace_config;
        size_t n_trace_config;
        const char **trace_otel; /* mode opentelemetry's "<key>=<value>" (trace.otel) */
        size_t n_trace_otel;
        char *trace_otel_owned[3]; /* the bsp_* defaults among them */
    } given;
    nr_trace_config_t trace; /* what tracing starts with (complete after nr_opts_finish) */
    const char *log_file;
    bool log_info, log_warn, log_error; /* copied into nr_log_settings once parsed */
    int log_verbose;
} nr_opts_t;

/* ---- the flags: one table (common/cli.h) gives the parser, the known flags and --help ---- */

/* Triton's defaults for every option. */
void nr_opts_init(nr_opts_t *o);
/* Frees what the options own (the repository and --load-model lists, the notes; strings are
 * borrowed). */
void nr_opts_free(nr_opts_t *o);
/* The table (usage order). */
const nr_cli_opt_t *nr_opts_flags(size_t *n);
/* Sets option name[0, len) to value (NULL for a flag that takes none). The value is borrowed
 * and must outlive the options. See above for the errors. */
NR_MUST_CHECK nr_status_t *nr_opts_set(nr_opts_t *o, const char *name, size_t len,
                                       const char *value);
/* Triton's checks once every flag is read: --disable-auto-complete-config wins over
 * --strict-model-config=false whatever their order (with Triton's warning on stderr);
 * --response-cache-byte-size with --cache-config is refused (INVALID_ARG, Triton's text);
 * the --trace-config settings are applied over the deprecated --trace-* flags (Triton's
 * "Bad option: "--trace-config rate"." for a bad value). */
NR_MUST_CHECK nr_status_t *nr_opts_finish(nr_opts_t *o);
/* "Usage: nereid [options]" and a line per option. */
void nr_opts_usage(FILE *f);
/* The log settings the options ask for, process-wide (common/log.h): the levels, and
 * --log-file opened for appending. INVALID_ARG "cannot open log file <path>: <why>". */
NR_MUST_CHECK nr_status_t *nr_opts_apply_log(const nr_opts_t *o);

#endif
