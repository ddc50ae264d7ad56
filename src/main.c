/* main.c - nereid: parse Triton's flags, load the model repositories, print
 * the status tables, start the HTTP frontend once every model finished
 * loading, then wait for SIGINT/SIGTERM and drain in-flight requests.
 */
#include "backends/backend.h"
#include "common/alloc.h"
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

static const char usage_text[] =
    "Usage: nereid [options]\n"
    "  --model-repository=<path>        Model repository (repeatable; alias --model-store)\n"
    "  --http-port=<int>                HTTP port (default 8000)\n"
    "  --http-address=<addr>            HTTP bind address (default 0.0.0.0)\n"
    "  --http-thread-count=<int>        HTTP threads (default: one per CPU, at most 8)\n"
    "  --http-max-input-size=<int>      Largest request body in bytes (default 67108864)\n"
    "  --http-max-connections=<int>     Open HTTP connections; more get 503 (default: what\n"
    "                                   the fd limit allows, at most 65536; 0: no limit)\n"
    "  --http-idle-timeout-secs=<int>   Close connections silent this long (default 300; 0: never)\n"
    "  --http-request-timeout-secs=<int>\n"
    "                                   Close a connection whose request body is not all in\n"
    "                                   this long after its header (default 300; 0: never)\n"
    "  --http-body-memory-limit=<int>   Request body bytes held at once; past it 503 (default:\n"
    "                                   a quarter of the machine's memory)\n"
    "  --allow-http=<bool>              Serve HTTP (default true)\n"
    "  --grpc-port=<int>                gRPC port (default 8001)\n"
    "  --grpc-address=<addr>            gRPC bind address (default 0.0.0.0)\n"
    "  --allow-grpc=<bool>              Serve gRPC (default true)\n"
    "  --reuse-grpc-port=<bool>         Let other processes bind the gRPC port (default false)\n"
    "  --grpc-infer-allocation-pool-size=<int>\n"
    "                                   ModelInfer calls accepted ahead of clients (default 8)\n"
    "  --grpc-infer-thread-count=<int>  gRPC threads, each serving its own calls (default 1)\n"
    "  --grpc-infer-response-compression-level=none|low|medium|high\n"
    "                                   Compression of ModelInfer responses (default none)\n"
    "  --grpc-use-ssl=<bool> --grpc-use-ssl-mutual=<bool>\n"
    "  --grpc-server-cert=<pem> --grpc-server-key=<pem> --grpc-root-cert=<pem>\n"
    "                                   TLS for gRPC (mutual: clients need a certificate)\n"
    "  --grpc-keepalive-time=<ms> --grpc-keepalive-timeout=<ms>\n"
    "  --grpc-keepalive-permit-without-calls=<bool> --grpc-http2-max-pings-without-data=<int>\n"
    "  --grpc-http2-min-recv-ping-interval-without-data=<ms> --grpc-http2-max-ping-strikes=<int>\n"
    "  --grpc-max-connection-age=<ms> --grpc-max-connection-age-grace=<ms>\n"
    "                                   gRPC keepalive and HTTP/2 settings (Triton's defaults)\n"
    "  --grpc-header-forward-pattern=<re>\n"
    "                                   Accepted: forwarded headers would become request\n"
    "                                   parameters, which no nereid backend reads\n"
    "  --disable-auto-complete-config   Require complete config.pbtxt files\n"
    "  --strict-model-config=<bool>     Deprecated: use --disable-auto-complete-config\n"
    "  --model-config-name=<name>       Use <model>/configs/<name>.pbtxt when present\n"
    "  --exit-on-error=<bool>           Exit if any model fails to load (default true)\n"
    "  --strict-readiness=<bool>        Ready only when every model is ready (default true)\n"
    "  --exit-timeout-secs=<int>        Seconds to wait for in-flight requests at exit (default 30)\n"
    "  --model-control-mode=none|poll|explicit\n"
    "                                   none: load every model at start, fixed after;\n"
    "                                   poll: follow the repository's changes; explicit:\n"
    "                                   load/unload through the repository API (default none)\n"
    "  --repository-poll-secs=<int>     Seconds between polls in poll mode (default 15)\n"
    "  --load-model=<name>              Explicit mode: load at start (repeatable; * alone: all)\n"
    "  --id=<string>                    Server identifier (default triton)\n"
    "  --inline-execution=<bool>        nereid: run a request on its HTTP/gRPC thread when an\n"
    "                                   instance is idle, nothing is queued and the model is\n"
    "                                   quick (default true)\n"
    "  --log-verbose=<int>              Verbose log level (default 0)\n"
    "  --log-info=<bool> --log-warning=<bool> --log-error=<bool>\n"
    "  --log-format=default|ISO8601     Log line format\n"
    "  --log-file=<path>                Write the log to a file\n"
    "  --allow-metrics=<bool>           Serve Prometheus metrics (default true)\n"
    "  --allow-cpu-metrics=<bool>       CPU utilization and memory metrics (default true)\n"
    "  --allow-gpu-metrics=<bool>       Accepted; no GPU metrics without GPUs (default true)\n"
    "  --metrics-port=<int>             Metrics port (default 8002)\n"
    "  --metrics-address=<addr>         Metrics bind address (default: the HTTP address)\n"
    "  --metrics-interval-ms=<int>      How often CPU metrics are polled (default 2000)\n"
    "  --metrics-config <setting>=<value>\n"
    "                                   summary_latencies=true, summary_quantiles=<q>:<e>,...,\n"
    "                                   counter_latencies=false (repeatable)\n"
    "  --host-policy=<name>,<setting>=<value>\n"
    "                                   Settings numa-node=<id>, cpu-cores=<list> (0-3,8-11) for\n"
    "                                   the instances of that policy (instance_group host_policy;\n"
    "                                   default names cpu, gpu_<id>, model); repeatable\n"
    "  --backend-directory=<dir>        Use <dir>/onnxruntime/libonnxruntime.so when there, e.g.\n"
    "                                   the onnxruntime-gpu build (default: the one make setup\n"
    "                                   installed; docs/optimization.md)\n"
    "  --help                           This text\n";

static void usage_exit(int code)
{
    fputs(usage_text, code == 0 ? stdout : stderr);
    exit(code);
}

static bool parse_bool(const char *v, bool *out)
{
    static const char *const yes[] = {"true", "on", "1", "True", "TRUE", "ON"};
    static const char *const no[] = {"false", "off", "0", "False", "FALSE", "OFF"};
    for (size_t i = 0; i < sizeof(yes) / sizeof(yes[0]); i++)
        if (!strcmp(v, yes[i]))
            return *out = true, true;
    for (size_t i = 0; i < sizeof(no) / sizeof(no[0]); i++)
        if (!strcmp(v, no[i]))
            return *out = false, true;
    return false;
}

static bool parse_int(const char *v, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long x = strtoll(v, &end, 10);
    if (errno || end == v || *end || x < lo || x > hi)
        return false;
    *out = x;
    return true;
}

static void bad_value(const char *flag, const char *v)
{
    fprintf(stderr, "%sBad option: \"--%s\".\nInvalid option value. Got %s\n", usage_text, flag, v);
    exit(2);
}

static const char *const known_flags[] = {
    "model-repository", "model-store", "http-port", "http-address", "http-thread-count",
    "http-max-input-size", "http-max-connections", "http-idle-timeout-secs",
    "http-request-timeout-secs", "http-body-memory-limit", "allow-http",
    "disable-auto-complete-config", "strict-model-config",
    "model-config-name", "exit-on-error", "strict-readiness", "exit-timeout-secs",
    "model-control-mode", "id", "log-verbose", "log-info", "log-warning", "log-error",
    "log-format", "log-file", "allow-grpc", "allow-metrics", "allow-gpu-metrics",
    "allow-cpu-metrics", "grpc-port", "metrics-port", "grpc-address", "metrics-address",
    "metrics-interval-ms", "metrics-config",
    "backend-directory", "repository-poll-secs", "cache-directory", "host-policy", "load-model",
    "inline-execution", "help", "reuse-grpc-port", "grpc-header-forward-pattern",
    "grpc-infer-allocation-pool-size", "grpc-infer-thread-count", "grpc-use-ssl",
    "grpc-use-ssl-mutual", "grpc-server-cert", "grpc-server-key", "grpc-root-cert",
    "grpc-infer-response-compression-level",
    "grpc-keepalive-time", "grpc-keepalive-timeout", "grpc-keepalive-permit-without-calls",
    "grpc-http2-max-pings-without-data", "grpc-http2-min-recv-ping-interval-without-data",
    "grpc-http2-max-ping-strikes", "grpc-max-connection-age", "grpc-max-connection-age-grace",
    "grpc-restricted-protocol",
};

static bool is_known(const char *name)
{
    for (size_t i = 0; i < sizeof(known_flags) / sizeof(known_flags[0]); i++)
        if (!strcmp(name, known_flags[i]))
            return true;
    return false;
}

/* Flags that take no value. */
static bool is_flag_only(const char *name)
{
    return !strcmp(name, "disable-auto-complete-config") || !strcmp(name, "help");
}

/* Typed flags, table-driven (special cases are handled below). */
typedef struct {
    const char *name;
    enum { OPT_INT, OPT_BOOL, OPT_STR } kind;
    void *dst; /* int *, uint64_t * (when big), bool * or const char ** (argv's string) */
    long long lo, hi;
    bool big;
} opt_def_t;

static bool set_typed(const opt_def_t *defs, size_t n, const char *name, const char *v)
{
    for (size_t i = 0; i < n; i++) {
        const opt_def_t *d = &defs[i];
        if (strcmp(name, d->name))
            continue;
        long long x;
        bool b;
        if (d->kind == OPT_STR) {
            *(const char **)d->dst = v;
        } else if (d->kind == OPT_BOOL) {
            if (!parse_bool(v, &b))
                bad_value(name, v);
            *(bool *)d->dst = b;
        } else {
            if (!parse_int(v, d->lo, d->hi, &x))
                bad_value(name, v);
            if (d->big)
                *(uint64_t *)d->dst = (uint64_t)x;
            else
                *(int *)d->dst = (int)x;
        }
        return true;
    }
    return false;
}

static void set_option(opts_t *o, const char *name, const char *v)
{
    const opt_def_t defs[] = {
        {"http-port", OPT_INT, &o->http_port, 0, 65535, false},
        {"http-thread-count", OPT_INT, &o->http_threads, 1, 1024, false},
        {"http-max-input-size", OPT_INT, &o->http_max_input, 1, 1ll << 40, true},
        {"http-max-connections", OPT_INT, &o->http_max_conns, 0, 1 << 24, false},
        {"http-idle-timeout-secs", OPT_INT, &o->http_idle_timeout, 0, 1 << 30, false},
        {"http-request-timeout-secs", OPT_INT, &o->http_request_timeout, 0, 1 << 30, false},
        {"http-body-memory-limit", OPT_INT, &o->http_body_memory, 1, 1ll << 50, true},
        {"exit-timeout-secs", OPT_INT, &o->exit_timeout_secs, 0, 1 << 30, false},
        {"log-verbose", OPT_INT, &o->log_verbose, 0, 1 << 20, false},
        {"exit-on-error", OPT_BOOL, &o->exit_on_error, 0, 0, false},
        {"strict-readiness", OPT_BOOL, &o->strict_readiness, 0, 0, false},
        {"allow-http", OPT_BOOL, &o->allow_http, 0, 0, false},
        {"allow-grpc", OPT_BOOL, &o->allow_grpc, 0, 0, false},
        {"grpc-port", OPT_INT, &o->grpc.port, 0, 65535, false},
        {"reuse-grpc-port", OPT_BOOL, &o->grpc.reuse_port, 0, 0, false},
        {"grpc-infer-allocation-pool-size", OPT_INT, &o->grpc.infer_pool, 1, 1 << 16, false},
        {"grpc-infer-thread-count", OPT_INT, &o->grpc.threads, 1, 256, false},
        {"grpc-use-ssl", OPT_BOOL, &o->grpc.use_ssl, 0, 0, false},
        {"grpc-use-ssl-mutual", OPT_BOOL, &o->grpc.use_ssl_mutual, 0, 0, false},
        {"grpc-keepalive-time", OPT_INT, &o->grpc.keepalive_time_ms, 0, INT_MAX, false},
        {"grpc-keepalive-timeout", OPT_INT, &o->grpc.keepalive_timeout_ms, 0, INT_MAX, false},
        {"grpc-keepalive-permit-without-calls", OPT_BOOL,
         &o->grpc.keepalive_permit_without_calls, 0, 0, false},
        {"grpc-http2-max-pings-without-data", OPT_INT, &o->grpc.http2_max_pings_without_data, 0,
         INT_MAX, false},
        {"grpc-http2-min-recv-ping-interval-without-data", OPT_INT,
         &o->grpc.http2_min_recv_ping_interval_ms, 0, INT_MAX, false},
        {"grpc-http2-max-ping-strikes", OPT_INT, &o->grpc.http2_max_ping_strikes, 0, INT_MAX,
         false},
        {"grpc-max-connection-age", OPT_INT, &o->grpc.max_connection_age_ms, 0, INT_MAX, false},
        {"grpc-max-connection-age-grace", OPT_INT, &o->grpc.max_connection_age_grace_ms, 0,
         INT_MAX, false},
        {"inline-execution", OPT_BOOL, &o->inline_execution, 0, 0, false},
        {"allow-metrics", OPT_BOOL, &o->allow_metrics, 0, 0, false},
        {"allow-gpu-metrics", OPT_BOOL, &o->allow_gpu_metrics, 0, 0, false},
        {"allow-cpu-metrics", OPT_BOOL, &o->metrics.cpu, 0, 0, false},
        {"metrics-port", OPT_INT, &o->metrics.port, 0, 65535, false},
        {"metrics-interval-ms", OPT_INT, &o->metrics.interval_ms, 0, INT_MAX, false},
        {"repository-poll-secs", OPT_INT, &o->poll_secs, 0, INT_MAX, false},
        {"log-info", OPT_BOOL, &o->log_info, 0, 0, false},
        {"log-warning", OPT_BOOL, &o->log_warn, 0, 0, false},
        {"log-error", OPT_BOOL, &o->log_error, 0, 0, false},
        {"http-address", OPT_STR, &o->http_address, 0, 0, false},
        {"id", OPT_STR, &o->id, 0, 0, false},
        {"model-config-name", OPT_STR, &o->model_config_name, 0, 0, false},
        {"log-file", OPT_STR, &o->log_file, 0, 0, false},
        {"grpc-address", OPT_STR, &o->grpc.address, 0, 0, false},
        {"grpc-server-cert", OPT_STR, &o->grpc.server_cert, 0, 0, false},
        {"grpc-server-key", OPT_STR, &o->grpc.server_key, 0, 0, false},
        {"grpc-root-cert", OPT_STR, &o->grpc.root_cert, 0, 0, false},
        {"metrics-address", OPT_STR, &o->metrics.address, 0, 0, false},
    };
    bool b;
    if (set_typed(defs, sizeof(defs) / sizeof(defs[0]), name, v))
        return;
    if (!strcmp(name, "model-repository") || !strcmp(name, "model-store")) {
        o->repos = nr_realloc(o->repos, (o->n_repos + 1) * sizeof(char *));
        o->repos[o->n_repos++] = v;
        return;
    }
    if (!strcmp(name, "strict-model-config")) {
        if (!parse_bool(v, &b))
            bad_value(name, v);
        fprintf(stderr, "Warning: '--strict-model-config' has been deprecated! Please use "
                        "'--disable-auto-complete-config' instead.\n");
        o->autocomplete = !b;
        return;
    }
    if (!strcmp(name, "grpc-infer-response-compression-level")) {
        static const char *const levels[] = {"none", "low", "medium", "high"};
        for (size_t i = 0; i < 4; i++)
            if (!strcasecmp(v, levels[i])) {
                o->grpc.compression = (nr_grpc_compression_t)i;
                return;
            }
        fprintf(stderr, "%sBad option: \"--%s\".\ninvalid argument for "
                        "--grpc_infer_response_compression_level\n",
                usage_text, name);
        exit(2);
    }
    if (!strcmp(name, "grpc-header-forward-pattern"))
        return; /* forwarded headers would be request parameters, which no backend reads */
    if (!strcmp(name, "model-control-mode")) {
        if (strcmp(v, "none") && strcmp(v, "poll") && strcmp(v, "explicit"))
            bad_value(name, v);
        o->control_mode = v;
        return;
    }
    if (!strcmp(name, "log-format")) {
        if (strcmp(v, "default") && strcmp(v, "ISO8601"))
            bad_value(name, v);
        nr_log_settings.iso8601 = !strcmp(v, "ISO8601");
        return;
    }
    /* Parsed so that Triton command lines are understood; what nereid does not
     * do yet is refused with a clear message or, where harmless, ignored. */
    if (!strcmp(name, "metrics-config")) {
        nr_status_t *st = nr_metrics_config_set(&o->metrics, v);
        if (st) {
            fprintf(stderr, "%sBad option: \"--%s\".\n%s\n\n", usage_text, name, st->msg);
            nr_status_free(st);
            exit(2);
        }
        return;
    }
    if (!strcmp(name, "load-model")) {
        o->load_models = nr_realloc(o->load_models, (o->n_load_models + 1) * sizeof(char *));
        o->load_models[o->n_load_models++] = v;
        return;
    }
    if (!strcmp(name, "backend-directory")) {
        nr_backend_set_directory(v);
        return;
    }
    if (!strcmp(name, "cache-directory")) {
        NR_LOG_WARN("--%s is accepted for compatibility and ignored", name);
        return;
    }
    if (!strcmp(name, "host-policy")) {
        bool usage = false;
        nr_status_t *st = nr_host_policy_add(v, &usage);
        if (st == NULL)
            return;
        if (usage) /* Triton's option error: the usage text, then what is wrong */
            fprintf(stderr, "%s\nBad option: \"--%s\".\n%s\n\n", usage_text, name, st->msg);
        else if (st->code == NR_UNSUPPORTED)
            fprintf(stderr, "Failed to build Triton option:\nerror: setting host policy: %s - %s\n",
                    nr_status_code_name(st->code), st->msg);
        else /* nereid checks the values at start (Triton: when an instance is created) */
            fprintf(stderr, "error: creating server: %s - %s\n", nr_status_code_name(st->code),
                    st->msg);
        nr_status_free(st);
        exit(1);
    }
    if (!strcmp(name, "grpc-restricted-protocol")) {
        fprintf(stderr, "error: --%s is not implemented yet\n", name);
        exit(2);
    }
    fprintf(stderr, "nereid: unrecognized option '--%s'\n%s", name, usage_text);
    exit(2);
}

static void parse_args(int argc, char **argv, opts_t *o)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strncmp(a, "--", 2) != 0) {
            fprintf(stderr, "nereid: unexpected argument '%s'\n%s", a, usage_text);
            exit(2);
        }
        a += 2;
        const char *eq = strchr(a, '=');
        char name[128];
        size_t nl = eq ? (size_t)(eq - a) : strlen(a);
        if (nl >= sizeof(name)) {
            fprintf(stderr, "nereid: unrecognized option '%s'\n%s", argv[i], usage_text);
            exit(2);
        }
        memcpy(name, a, nl);
        name[nl] = '\0';
        if (!is_known(name)) {
            fprintf(stderr, "nereid: unrecognized option '%s'\n%s", argv[i], usage_text);
            exit(2);
        }
        if (is_flag_only(name)) {
            if (!strcmp(name, "help"))
                usage_exit(0);
            if (eq) {
                fprintf(stderr, "nereid: option '--%s' doesn't allow an argument\n%s", name, usage_text);
                exit(2);
            }
            o->autocomplete = false;
            continue;
        }
        const char *v = eq ? eq + 1 : NULL;
        if (!v) {
            if (i + 1 >= argc) {
                fprintf(stderr, "nereid: option '--%s' requires an argument\n%s", name, usage_text);
                exit(2);
            }
            v = argv[++i];
        }
        set_option(o, name, v);
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

/* The frontends, each NULL when not started. */
typedef struct {
    nr_grpc_server_t *grpc;
    nr_http_server_t *http;
    nr_metrics_server_t *metrics;
} frontends_t;

/* Starts what the flags allow, in Triton's order (gRPC, HTTP, metrics), with
 * Triton's log lines; false (logged) when one cannot start. */
static bool start_frontends(opts_t *o, nr_server_t *core, frontends_t *fe)
{
    nr_status_t *st = NULL;
    if (o->allow_grpc) {
        if ((st = nr_grpc_start(&o->grpc, core, &fe->grpc)) != NULL) {
            NR_LOG_ERROR("failed to start GRPC service: %s", st->msg);
            nr_status_free(st);
            return false;
        }
        NR_LOG_INFO("Started GRPCInferenceService at %s:%d", o->grpc.address,
                    nr_grpc_port(fe->grpc));
    }
    if (o->allow_http) {
        nr_http_options_t ho = {
            .address = o->http_address,
            .port = o->http_port,
            .thread_count = o->http_threads,
            .max_input_size = o->http_max_input,
            .max_connections = o->http_max_conns,
            .idle_timeout_secs = o->http_idle_timeout,
            .request_timeout_secs = o->http_request_timeout,
            .body_memory_limit = o->http_body_memory,
        };
        if ((st = nr_http_start(&ho, core, &fe->http)) != NULL) {
            NR_LOG_ERROR("failed to start HTTP service: %s", st->msg);
            nr_status_free(st);
            return false;
        }
        NR_LOG_INFO("Started HTTPService at %s:%d", o->http_address, nr_http_port(fe->http));
    }
    if (o->allow_metrics) { /* --metrics-address defaults to the HTTP address, as in Triton */
        if (o->metrics.address == NULL)
            o->metrics.address = o->http_address;
        if ((st = nr_metrics_start(&o->metrics, core, &fe->metrics)) != NULL) {
            NR_LOG_ERROR("failed to start Metrics service: %s", st->msg);
            nr_status_free(st);
            return false;
        }
        NR_LOG_INFO("Started Metrics Service at %s:%d", o->metrics.address,
                    nr_metrics_port(fe->metrics));
    }
    return true;
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

static void stop_frontends(frontends_t *fe)
{
    nr_grpc_stop(fe->grpc);
    nr_http_stop(fe->http);
    nr_metrics_stop(fe->metrics);
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
    frontends_t fe = {NULL, NULL, NULL};
    if (!start_frontends(&o, core, &fe)) {
        stop_frontends(&fe);
        nr_server_free(core);
        goto fail;
    }
    int sig = 0;
    sigwait(&stop, &sig);
    NR_LOG_INFO("Signal (%d) received.", sig);
    nr_server_quiesce(core); /* readiness answers "not ready" from here */
    nr_grpc_quiesce(fe.grpc);
    nr_http_quiesce(fe.http);
    nr_metrics_quiesce(fe.metrics);
    nr_server_drain(core, o.exit_timeout_secs);
    stop_frontends(&fe);
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
