/* main.c - nereid: parse Triton's flags, load the model repositories, print
 * the status tables, start the HTTP frontend once every model finished
 * loading, then wait for SIGINT/SIGTERM and drain in-flight requests.
 */
#include "backends/backend.h"
#include "common/alloc.h"
#include "common/cli.h"
#include "common/cpus.h"
#include "common/limits.h"
#include "common/log.h"
#include "common/net.h"
#include "config/model_config.h"
#include "core/host_policy.h"
#include "core/repository.h"
#include "core/server.h"
#include "frontends/grpc/grpc_server.h"
#include "frontends/http/http_server.h"
#include "frontends/metrics/metrics_server.h"
#include "version.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <limits.h>
#include <sched.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

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
    bool autocomplete, exit_on_error, strict_readiness, allow_http, allow_grpc, inline_execution;
    nr_grpc_options_t grpc;
    bool allow_metrics, allow_gpu_metrics;
    nr_metrics_options_t metrics;
    int exit_timeout_secs;
    const char *id;
    const char *model_config_name;
    const char *control_mode;
    const char **load_models; /* --load-model */
    size_t n_load_models;
    int poll_secs;            /* --repository-poll-secs */
    const char *log_file;
    bool log_info, log_warn, log_error; /* copied into nr_log_settings once parsed */
    int log_verbose;
} opts_t;

/* ---- the flags: one table (common/cli.h) gives the parser, the known flags and --help ---- */

#define OPT(field) offsetof(opts_t, field)

static const nr_cli_opt_t *flags(size_t *n);

static void usage_print(FILE *f)
{
    size_t n;
    const nr_cli_opt_t *t = flags(&n);
    fputs("Usage: nereid [options]\n", f);
    nr_cli_usage(f, t, n);
}

static void usage_exit(int code)
{
    usage_print(code == 0 ? stdout : stderr);
    exit(code);
}

/* Triton's answer to a flag it cannot use: the usage text, then what is wrong (exit 2). */
static void bad_option(const char *flag, const char *what)
{
    usage_print(stderr);
    fprintf(stderr, "Bad option: \"--%s\".\n%s\n", flag, what);
    exit(2);
}

static void bad_value(const char *flag, const char *v)
{
    char *what = nr_asprintf("Invalid option value. Got %s", v);
    bad_option(flag, what);
}

static void set_help(void *o, const nr_cli_opt_t *f, const char *v)
{
    usage_exit(0);
}

static void set_no_autocomplete(void *o, const nr_cli_opt_t *f, const char *v)
{
    ((opts_t *)o)->autocomplete = false;
}

static void add_repository(void *o, const nr_cli_opt_t *f, const char *v)
{
    opts_t *op = o;
    op->repos = nr_realloc(op->repos, (op->n_repos + 1) * sizeof(char *));
    op->repos[op->n_repos++] = v;
}

static void add_load_model(void *o, const nr_cli_opt_t *f, const char *v)
{
    opts_t *op = o;
    op->load_models = nr_realloc(op->load_models, (op->n_load_models + 1) * sizeof(char *));
    op->load_models[op->n_load_models++] = v;
}

static void set_strict_model_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    bool b;
    if (!nr_cli_bool(v, &b))
        bad_value(f->name, v);
    fprintf(stderr, "Warning: '--strict-model-config' has been deprecated! Please use "
                    "'--disable-auto-complete-config' instead.\n");
    ((opts_t *)o)->autocomplete = !b;
}

static void set_compression(void *o, const nr_cli_opt_t *f, const char *v)
{
    static const char *const levels[] = {"none", "low", "medium", "high"};
    for (size_t i = 0; i < 4; i++)
        if (!strcasecmp(v, levels[i])) {
            ((opts_t *)o)->grpc.compression = (nr_grpc_compression_t)i;
            return;
        }
    bad_option(f->name, "invalid argument for --grpc_infer_response_compression_level");
}

/* Accepted so that Triton command lines are understood, and ignored: forwarded headers
 * would become request parameters, which no nereid backend reads. */
static void ignore(void *o, const nr_cli_opt_t *f, const char *v)
{
}

static void ignore_with_warning(void *o, const nr_cli_opt_t *f, const char *v)
{
    NR_LOG_WARN("--%s is accepted for compatibility and ignored", f->name);
}

static void set_control_mode(void *o, const nr_cli_opt_t *f, const char *v)
{
    if (strcmp(v, "none") && strcmp(v, "poll") && strcmp(v, "explicit"))
        bad_value(f->name, v);
    ((opts_t *)o)->control_mode = v;
}

static void set_log_format(void *o, const nr_cli_opt_t *f, const char *v)
{
    if (strcmp(v, "default") && strcmp(v, "ISO8601"))
        bad_value(f->name, v);
    nr_log_settings.iso8601 = !strcmp(v, "ISO8601");
}

static void set_metrics_config(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_status_t *st = nr_metrics_config_set(&((opts_t *)o)->metrics, v);
    if (st) {
        char *what = nr_asprintf("%s\n", st->msg);
        nr_status_free(st);
        bad_option(f->name, what);
    }
}

static void set_backend_directory(void *o, const nr_cli_opt_t *f, const char *v)
{
    nr_backend_set_directory(v);
}

static void add_host_policy(void *o, const nr_cli_opt_t *f, const char *v)
{
    bool usage = false;
    nr_status_t *st = nr_host_policy_add(v, &usage);
    if (st == NULL)
        return;
    if (usage) { /* Triton's option error: the usage text, then what is wrong */
        usage_print(stderr);
        fprintf(stderr, "\nBad option: \"--%s\".\n%s\n\n", f->name, st->msg);
    } else if (st->code == NR_UNSUPPORTED) {
        fprintf(stderr, "Failed to build Triton option:\nerror: setting host policy: %s - %s\n",
                nr_status_code_name(st->code), st->msg);
    } else { /* nereid checks the values at start (Triton: when an instance is created) */
        fprintf(stderr, "error: creating server: %s - %s\n", nr_status_code_name(st->code),
                st->msg);
    }
    nr_status_free(st);
    exit(1);
}

static void not_implemented(void *o, const nr_cli_opt_t *f, const char *v)
{
    fprintf(stderr, "error: --%s is not implemented yet\n", f->name);
    exit(2);
}

#define INT(name, field, lo, hi, arg, help) {name, NR_CLI_INT, OPT(field), lo, hi, NULL, arg, help}
#define U64(name, field, lo, hi, arg, help) {name, NR_CLI_U64, OPT(field), lo, hi, NULL, arg, help}
#define BOOL(name, field, arg, help) {name, NR_CLI_BOOL, OPT(field), 0, 0, NULL, arg, help}
#define STR(name, field, arg, help) {name, NR_CLI_STR, OPT(field), 0, 0, NULL, arg, help}
#define FN(name, fn, arg, help) {name, NR_CLI_FN, 0, 0, 0, fn, arg, help}
#define FLAG(name, fn, help) {name, NR_CLI_FLAG, 0, 0, 0, fn, NULL, help}

static const nr_cli_opt_t flag_table[] = {
    FN("model-repository", add_repository, "=<path>", "Model repository (repeatable)"),
    FN("model-store", add_repository, "=<path>", "The same as --model-repository"),
    INT("http-port", http_port, 0, 65535, "=<int>", "HTTP port (default 8000)"),
    STR("http-address", http_address, "=<addr>", "HTTP bind address (default 0.0.0.0)"),
    INT("http-thread-count", http_threads, 1, 1024, "=<int>",
        "HTTP threads (default: one per CPU, at most 8)"),
    U64("http-max-input-size", http_max_input, 1, 1ll << 40, "=<int>",
        "Largest request body in bytes (default 67108864)"),
    INT("http-max-connections", http_max_conns, 0, 1 << 24, "=<int>",
        "Open HTTP connections; more get 503 (default: what\n"
        "the fd limit allows, at most 65536; 0: no limit)"),
    INT("http-idle-timeout-secs", http_idle_timeout, 0, 1 << 30, "=<int>",
        "Close connections silent this long (default 300;\n0: never)"),
    INT("http-request-timeout-secs", http_request_timeout, 0, 1 << 30, "=<int>",
        "Close a connection whose request body is not all in\n"
        "this long after its header (default 300; 0: never)"),
    U64("http-body-memory-limit", http_body_memory, 1, 1ll << 50, "=<int>",
        "Request body bytes held at once; past it 503 (default:\n"
        "a quarter of the machine's memory)"),
    BOOL("allow-http", allow_http, "=<bool>", "Serve HTTP (default true)"),
    INT("grpc-port", grpc.port, 0, 65535, "=<int>", "gRPC port (default 8001)"),
    STR("grpc-address", grpc.address, "=<addr>", "gRPC bind address (default 0.0.0.0)"),
    BOOL("allow-grpc", allow_grpc, "=<bool>", "Serve gRPC (default true)"),
    BOOL("reuse-grpc-port", grpc.reuse_port, "=<bool>",
         "Let other processes bind the gRPC port (default false)"),
    INT("grpc-infer-allocation-pool-size", grpc.infer_pool, 1, 1 << 16, "=<int>",
        "ModelInfer calls accepted ahead of clients (default 8)"),
    INT("grpc-infer-thread-count", grpc.threads, 1, 256, "=<int>",
        "gRPC threads, each serving its own calls (default 1)"),
    FN("grpc-infer-response-compression-level", set_compression, "=none|low|medium|high",
       "Compression of ModelInfer responses (default none)"),
    BOOL("grpc-use-ssl", grpc.use_ssl, "=<bool>", "TLS for gRPC"),
    BOOL("grpc-use-ssl-mutual", grpc.use_ssl_mutual, "=<bool>",
         "TLS for gRPC, clients need a certificate too"),
    STR("grpc-server-cert", grpc.server_cert, "=<pem>", "The server's certificate (TLS)"),
    STR("grpc-server-key", grpc.server_key, "=<pem>", "The server's key (TLS)"),
    STR("grpc-root-cert", grpc.root_cert, "=<pem>", "The clients' root certificate (mutual TLS)"),
    INT("grpc-keepalive-time", grpc.keepalive_time_ms, 0, INT_MAX, "=<ms>",
        "gRPC keepalive and HTTP/2 settings (Triton's defaults)"),
    INT("grpc-keepalive-timeout", grpc.keepalive_timeout_ms, 0, INT_MAX, "=<ms>", ""),
    BOOL("grpc-keepalive-permit-without-calls", grpc.keepalive_permit_without_calls, "=<bool>",
         ""),
    INT("grpc-http2-max-pings-without-data", grpc.http2_max_pings_without_data, 0, INT_MAX,
        "=<int>", ""),
    INT("grpc-http2-min-recv-ping-interval-without-data", grpc.http2_min_recv_ping_interval_ms,
        0, INT_MAX, "=<ms>", ""),
    INT("grpc-http2-max-ping-strikes", grpc.http2_max_ping_strikes, 0, INT_MAX, "=<int>", ""),
    INT("grpc-max-connection-age", grpc.max_connection_age_ms, 0, INT_MAX, "=<ms>", ""),
    INT("grpc-max-connection-age-grace", grpc.max_connection_age_grace_ms, 0, INT_MAX, "=<ms>",
        ""),
    FN("grpc-header-forward-pattern", ignore, "=<re>",
       "Accepted: forwarded headers would become request\n"
       "parameters, which no nereid backend reads"),
    FN("grpc-restricted-protocol", not_implemented, "=<protocols>:<key>=<value>",
       "Not implemented yet: refused"),
    FLAG("disable-auto-complete-config", set_no_autocomplete,
         "Require complete config.pbtxt files"),
    FN("strict-model-config", set_strict_model_config, "=<bool>",
       "Deprecated: use --disable-auto-complete-config"),
    STR("model-config-name", model_config_name, "=<name>",
        "Use <model>/configs/<name>.pbtxt when present"),
    BOOL("exit-on-error", exit_on_error, "=<bool>",
         "Exit if any model fails to load (default true)"),
    BOOL("strict-readiness", strict_readiness, "=<bool>",
         "Ready only when every model is ready (default true)"),
    INT("exit-timeout-secs", exit_timeout_secs, 0, 1 << 30, "=<int>",
        "Seconds to wait for in-flight requests at exit\n(default 30)"),
    FN("model-control-mode", set_control_mode, "=none|poll|explicit",
       "none: load every model at start, fixed after;\n"
       "poll: follow the repository's changes; explicit:\n"
       "load/unload through the repository API (default none)"),
    INT("repository-poll-secs", poll_secs, 0, INT_MAX, "=<int>",
        "Seconds between polls in poll mode (default 15)"),
    FN("load-model", add_load_model, "=<name>",
       "Explicit mode: load at start (repeatable; * alone: all)"),
    STR("id", id, "=<string>", "Server identifier (default triton)"),
    BOOL("inline-execution", inline_execution, "=<bool>",
         "nereid: run a request on its HTTP/gRPC thread when an\n"
         "instance is idle, nothing is queued and the model is\n"
         "quick (default true)"),
    INT("log-verbose", log_verbose, 0, 1 << 20, "=<int>", "Verbose log level (default 0)"),
    BOOL("log-info", log_info, "=<bool>", "Info log lines (default true)"),
    BOOL("log-warning", log_warn, "=<bool>", "Warning log lines (default true)"),
    BOOL("log-error", log_error, "=<bool>", "Error log lines (default true)"),
    FN("log-format", set_log_format, "=default|ISO8601", "Log line format"),
    STR("log-file", log_file, "=<path>", "Write the log to a file"),
    BOOL("allow-metrics", allow_metrics, "=<bool>", "Serve Prometheus metrics (default true)"),
    BOOL("allow-cpu-metrics", metrics.cpu, "=<bool>",
         "CPU utilization and memory metrics (default true)"),
    BOOL("allow-gpu-metrics", allow_gpu_metrics, "=<bool>",
         "Accepted; no GPU metrics without GPUs (default true)"),
    INT("metrics-port", metrics.port, 0, 65535, "=<int>", "Metrics port (default 8002)"),
    STR("metrics-address", metrics.address, "=<addr>",
        "Metrics bind address (default: the HTTP address)"),
    INT("metrics-interval-ms", metrics.interval_ms, 0, INT_MAX, "=<int>",
        "How often CPU metrics are polled (default 2000)"),
    FN("metrics-config", set_metrics_config, " <setting>=<value>",
       "summary_latencies=true, summary_quantiles=<q>:<e>,...,\n"
       "counter_latencies=false (repeatable)"),
    FN("host-policy", add_host_policy, "=<name>,<setting>=<value>",
       "Settings numa-node=<id>, cpu-cores=<list> (0-3,8-11) for\n"
       "the instances of that policy (instance_group host_policy;\n"
       "default names cpu, gpu_<id>, model); repeatable"),
    FN("backend-directory", set_backend_directory, "=<dir>",
       "Use <dir>/onnxruntime/libonnxruntime.so when there, e.g.\n"
       "the onnxruntime-gpu build (default: the one make setup\n"
       "installed; docs/optimization.md)"),
    FN("cache-directory", ignore_with_warning, "=<dir>", "Accepted and ignored"),
    FLAG("help", set_help, "This text"),
};

static const nr_cli_opt_t *flags(size_t *n)
{
    *n = sizeof(flag_table) / sizeof(flag_table[0]);
    return flag_table;
}

static void unrecognized(const char *arg)
{
    fprintf(stderr, "nereid: unrecognized option '%s'\n", arg);
    usage_print(stderr);
    exit(2);
}

static void parse_args(int argc, char **argv, opts_t *o)
{
    size_t n;
    const nr_cli_opt_t *t = flags(&n);
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "nereid: unexpected argument '%s'\n", a);
            usage_print(stderr);
            exit(2);
        }
        a += 2;
        const char *eq = strchr(a, '=');
        const nr_cli_opt_t *f = nr_cli_find(t, n, a, eq ? (size_t)(eq - a) : strlen(a));
        if (f == NULL)
            unrecognized(argv[i]);
        const char *v = eq ? eq + 1 : NULL;
        if (f->kind == NR_CLI_FLAG) {
            if (eq) {
                fprintf(stderr, "nereid: option '--%s' doesn't allow an argument\n", f->name);
                usage_print(stderr);
                exit(2);
            }
        } else if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nereid: option '--%s' requires an argument\n", f->name);
                usage_print(stderr);
                exit(2);
            }
            v = argv[++i];
        }
        if (!nr_cli_set(f, o, v))
            bad_value(f->name, v);
    }
}

static void log_options(const opts_t *o)
{
    char **owned = nr_calloc(o->n_repos + o->n_load_models + 4, sizeof(char *));
    const char *cells[2 * 16];
    int r = 0;
    cells[2 * r] = "server_id", cells[2 * r + 1] = o->id, r++;
    cells[2 * r] = "server_version", cells[2 * r + 1] = NR_VERSION, r++;
    cells[2 * r] = "server_extensions";
    const char *const *ext;
    size_t n_ext = nr_server_extensions(&ext);
    char ext_line[512] = "";
    for (size_t i = 0; i < n_ext; i++)
        snprintf(ext_line + strlen(ext_line), sizeof(ext_line) - strlen(ext_line), "%s%s",
                 i ? " " : "", ext[i]);
    cells[2 * r + 1] = ext_line;
    r++;
    for (size_t i = 0; i < o->n_repos && r < 12; i++) {
        owned[i] = nr_asprintf("model_repository_path[%zu]", i);
        cells[2 * r] = owned[i], cells[2 * r + 1] = o->repos[i], r++;
    }
    cells[2 * r] = "model_control_mode";
    cells[2 * r + 1] = !strcmp(o->control_mode, "poll")       ? "MODE_POLL"
                       : !strcmp(o->control_mode, "explicit") ? "MODE_EXPLICIT"
                                                              : "MODE_NONE";
    r++;
    for (size_t i = 0; i < o->n_load_models && r < 12; i++) {
        owned[o->n_repos + i] = nr_asprintf("startup_models_%zu", i);
        cells[2 * r] = owned[o->n_repos + i], cells[2 * r + 1] = o->load_models[i], r++;
    }
    cells[2 * r] = "strict_model_config", cells[2 * r + 1] = o->autocomplete ? "0" : "1", r++;
    cells[2 * r] = "model_config_name";
    cells[2 * r + 1] = o->model_config_name ? o->model_config_name : "";
    r++;
    cells[2 * r] = "strict_readiness", cells[2 * r + 1] = o->strict_readiness ? "1" : "0", r++;
    char timeout[24];
    snprintf(timeout, sizeof(timeout), "%d", o->exit_timeout_secs);
    cells[2 * r] = "exit_timeout", cells[2 * r + 1] = timeout, r++;
    static const char *const header[] = {"Option", "Value"};
    NR_LOG_TABLE(2, header, r, cells);
    for (size_t i = 0; i < o->n_repos + o->n_load_models; i++)
        free(owned[i]);
    free(owned);
}

/* The frontends in Triton's start order (gRPC, HTTP, metrics), each as core/frontend.h's
 * interface over its options; state NULL until started. */
typedef struct {
    const nr_frontend_t *fe;
    const void *opts;
    const char *address; /* for the log line */
    bool enabled;
    void *state;
} frontend_run_t;

enum { N_FRONTENDS = 3 };

static void frontends_of(opts_t *o, nr_http_options_t *ho, frontend_run_t *run)
{
    if (o->metrics.address == NULL) /* --metrics-address defaults to the HTTP address */
        o->metrics.address = o->http_address;
    run[0] = (frontend_run_t){&nr_grpc_frontend, &o->grpc, o->grpc.address, o->allow_grpc};
    run[1] = (frontend_run_t){&nr_http_frontend, ho, o->http_address, o->allow_http};
    run[2] = (frontend_run_t){&nr_metrics_frontend, &o->metrics, o->metrics.address,
                              o->allow_metrics};
}

/* Starts what the flags allow, in order, with Triton's log lines; false (logged) when one
 * cannot start. */
static bool start_frontends(frontend_run_t *run, nr_server_t *core)
{
    for (int i = 0; i < N_FRONTENDS; i++) {
        if (!run[i].enabled)
            continue;
        nr_status_t *st = run[i].fe->start(run[i].opts, core, &run[i].state);
        if (st != NULL) {
            NR_LOG_ERROR("failed to start %s service: %s", run[i].fe->kind, st->msg);
            nr_status_free(st);
            return false;
        }
        NR_LOG_INFO("Started %s at %s:%d", run[i].fe->service, run[i].address,
                    run[i].fe->port(run[i].state));
    }
    return true;
}

static void quiesce_frontends(frontend_run_t *run)
{
    for (int i = 0; i < N_FRONTENDS; i++)
        run[i].fe->quiesce(run[i].state);
}

static void stop_frontends(frontend_run_t *run)
{
    for (int i = 0; i < N_FRONTENDS; i++)
        run[i].fe->stop(run[i].state);
}

/* fds kept for what is not an HTTP connection: models, gRPC, metrics, logs */
#define FD_RESERVE 1024

/* The HTTP limits the machine allows: the fd limit raised to its hard cap
 * (each connection is an fd) and the connections below it; request bodies a
 * quarter of the memory. */
static void http_limits(opts_t *o)
{
    long fds = nr_net_raise_fd_limit();
    long room = fds > 2 * FD_RESERVE ? fds - FD_RESERVE : fds / 2;
    if (o->http_max_conns < 0)
        o->http_max_conns = (int)(room < 65536 ? room : 65536);
    else if (o->http_max_conns == 0 || o->http_max_conns > room)
        NR_LOG_WARN("--http-max-connections=%d: the open-file limit (%ld) allows about %ld; "
                       "connections past it are closed without an answer",
                       o->http_max_conns, fds, room);
    /* The workers are event loops that parse and run small requests themselves
     * (large ones go to http_bulk.c's pool): more of them than CPUs only adds
     * context switches (docs/architecture.md, "HTTP connections"). */
    if (o->http_threads == 0) {
        int cpus = nr_cpu_count();
        o->http_threads = cpus < 8 ? cpus : 8;
    }
    if (o->http_body_memory == 0) {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        o->http_body_memory = pages > 0 && page > 0 ? (uint64_t)pages * (uint64_t)page / 4
                                                    : (uint64_t)1 << 30;
    }
    NR_LOG_VERBOSE(1, "HTTP limits: %d connections (open-file limit %ld), %llu body bytes, "
                      "%d worker threads",
                   o->http_max_conns, fds, (unsigned long long)o->http_body_memory,
                   o->http_threads);
}

int main(int argc, char **argv)
{
    opts_t o = {
        .http_address = "0.0.0.0",
        .http_port = 8000,
        .http_threads = 0, /* one per CPU, at most Triton's 8: http_limits */
        .http_max_input = NR_DEFAULT_HTTP_MAX_INPUT,
        .http_max_conns = -1,
        .http_idle_timeout = 300,
        .http_request_timeout = 300,
        .autocomplete = true,
        .exit_on_error = true,
        .strict_readiness = true,
        .allow_http = true,
        .allow_grpc = true,
        .inline_execution = true,
        .exit_timeout_secs = 30,
        .id = "triton",
        .control_mode = "none",
        .poll_secs = 15,
        .log_info = true,
        .log_warn = true,
        .log_error = true,
        .allow_metrics = true,
        .allow_gpu_metrics = true,
    };
    nr_grpc_options_default(&o.grpc);
    nr_metrics_options_default(&o.metrics);
    parse_args(argc, argv, &o);
    nr_log_settings.info = o.log_info;
    nr_log_settings.warn = o.log_warn;
    nr_log_settings.error = o.log_error;
    nr_log_settings.verbose = o.log_verbose;
    nr_log_settings.file = o.log_file;
    if (o.log_file) {
        int fd = open(o.log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "error: cannot open log file %s: %s\n", o.log_file, strerror(errno));
            goto fail;
        }
        nr_log_settings.fd = fd;
    }
    http_limits(&o);
    nr_control_mode_t mode = !strcmp(o.control_mode, "poll")       ? NR_CONTROL_POLL
                             : !strcmp(o.control_mode, "explicit") ? NR_CONTROL_EXPLICIT
                                                                   : NR_CONTROL_NONE;
    if (o.n_load_models > 0 && mode != NR_CONTROL_EXPLICIT) {
        fprintf(stderr, "error: creating server: Invalid argument - --load-model can only be used "
                        "with --model-control-mode=explicit\n");
        goto fail;
    }
    for (size_t i = 0; i < o.n_load_models; i++)
        if (!strcmp(o.load_models[i], "*") && o.n_load_models > 1) {
            fprintf(stderr, "error: creating server: Invalid argument - Wildcard model name '*' "
                            "must be the ONLY startup model if specified at all.\n");
            goto fail;
        }
    if (o.n_repos == 0) {
        fprintf(stderr, "error: creating server: Invalid argument - --model-repository must be "
                        "specified\n");
        goto fail;
    }
    /* Block the stop signals before any thread starts so that only sigwait sees them. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    signal(SIGPIPE, SIG_IGN);

    nr_repo_options_t ro = {
        .paths = o.repos,
        .n_paths = o.n_repos,
        .autocomplete = o.autocomplete,
        .cpu_count = nr_cpu_count(),
        .model_config_name = o.model_config_name,
        .inline_execution = o.inline_execution,
        .mode = mode,
        .startup_models = o.load_models,
        .n_startup_models = o.n_load_models,
        .poll_secs = mode == NR_CONTROL_POLL ? o.poll_secs : 0, /* as Triton: 0 unless polling */
    };
    nr_repo_t *repo;
    nr_status_t *st = nr_repo_create(&ro, &repo);
    if (st) {
        fprintf(stderr, "error: creating server: %s - %s\n", nr_status_code_name(st->code), st->msg);
        nr_status_free(st);
        goto fail;
    }
    nr_repo_log_table(repo);
    log_options(&o);
    if (!nr_repo_all_ready(repo) && o.exit_on_error) {
        NR_LOG_ERROR("Internal: failed to load all models");
        nr_repo_destroy(repo);
        fprintf(stderr, "error: creating server: Internal - failed to load all models\n");
        goto fail;
    }
    nr_server_options_t so = {
        .id = o.id,
        .version = NR_VERSION,
        .strict_readiness = o.strict_readiness,
    };
    nr_server_t *core = nr_server_new(&so, repo); /* owns repo from here */
    nr_http_options_t ho = {
        .address = o.http_address,
        .port = o.http_port,
        .thread_count = o.http_threads,
        .max_input_size = o.http_max_input,
        .max_connections = o.http_max_conns,
        .idle_timeout_secs = o.http_idle_timeout,
        .request_timeout_secs = o.http_request_timeout,
        .body_memory_limit = o.http_body_memory,
    };
    frontend_run_t fe[N_FRONTENDS];
    frontends_of(&o, &ho, fe);
    if (!start_frontends(fe, core)) {
        stop_frontends(fe);
        nr_server_free(core);
        goto fail;
    }
    int sig = 0;
    sigwait(&stop, &sig);
    NR_LOG_INFO("Signal (%d) received.", sig);
    nr_server_quiesce(core); /* readiness answers "not ready" from here */
    quiesce_frontends(fe);
    nr_server_drain(core, o.exit_timeout_secs);
    stop_frontends(fe);
    nr_server_free(core);
    free(o.repos);
    free(o.load_models);
    nr_host_policy_clear();
    return 0;
fail: /* o.repos, o.load_models and the host policies: what the early exits still hold */
    free(o.repos);
    free(o.load_models);
    nr_host_policy_clear();
    return 1;
}
