/* main.c - nereid: parse Triton's flags, load the model repositories, print
 * the status tables, start the HTTP frontend once every model finished
 * loading, then wait for SIGINT/SIGTERM and drain in-flight requests.
 */
#include "common/alloc.h"
#include "common/limits.h"
#include "common/log.h"
#include "config/model_config.h"
#include "core/repository.h"
#include "core/server.h"
#include "frontends/http/http_server.h"
#include "version.h"

#include <errno.h>
#include <pthread.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    const char **repos;
    size_t n_repos;
    const char *http_address;
    int http_port;
    int http_threads;
    uint64_t http_max_input;
    bool autocomplete, exit_on_error, strict_readiness, allow_http, inline_execution;
    int exit_timeout_secs;
    const char *id;
    const char *model_config_name;
    const char *control_mode;
    const char *log_file;
} opts_t;

static const char usage_text[] =
    "Usage: nereid [options]\n"
    "  --model-repository=<path>        Model repository (repeatable; alias --model-store)\n"
    "  --http-port=<int>                HTTP port (default 8000)\n"
    "  --http-address=<addr>            HTTP bind address (default 0.0.0.0)\n"
    "  --http-thread-count=<int>        HTTP threads (default 8)\n"
    "  --http-max-input-size=<int>      Largest request body in bytes (default 67108864)\n"
    "  --allow-http=<bool>              Serve HTTP (default true)\n"
    "  --disable-auto-complete-config   Require complete config.pbtxt files\n"
    "  --strict-model-config=<bool>     Deprecated: use --disable-auto-complete-config\n"
    "  --model-config-name=<name>       Use <model>/configs/<name>.pbtxt when present\n"
    "  --exit-on-error=<bool>           Exit if any model fails to load (default true)\n"
    "  --strict-readiness=<bool>        Ready only when every model is ready (default true)\n"
    "  --exit-timeout-secs=<int>        Seconds to wait for in-flight requests at exit (default 30)\n"
    "  --model-control-mode=none        Only 'none' is implemented\n"
    "  --id=<string>                    Server identifier (default triton)\n"
    "  --inline-execution=<bool>        nereid: run a request on its connection thread when\n"
    "                                   an instance is idle and nothing is queued (default true)\n"
    "  --log-verbose=<int>              Verbose log level (default 0)\n"
    "  --log-info=<bool> --log-warning=<bool> --log-error=<bool>\n"
    "  --log-format=default|ISO8601     Log line format\n"
    "  --log-file=<path>                Write the log to a file\n"
    "  --grpc-port, --metrics-port, --allow-grpc, --allow-metrics, --host-policy:\n"
    "                                   not implemented yet (refused unless disabled)\n"
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
    "http-max-input-size", "allow-http", "disable-auto-complete-config", "strict-model-config",
    "model-config-name", "exit-on-error", "strict-readiness", "exit-timeout-secs",
    "model-control-mode", "id", "log-verbose", "log-info", "log-warning", "log-error",
    "log-format", "log-file", "allow-grpc", "allow-metrics", "allow-gpu-metrics",
    "allow-cpu-metrics", "grpc-port", "metrics-port", "grpc-address", "metrics-address",
    "backend-directory", "repository-poll-secs", "cache-directory", "host-policy", "load-model",
    "inline-execution", "help",
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

/* Typed flags, table-driven (strings and special cases are handled below). */
typedef struct {
    const char *name;
    enum { OPT_INT, OPT_BOOL } kind;
    void *dst; /* int *, uint64_t * (when big) or bool * */
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
        if (d->kind == OPT_BOOL) {
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
        {"exit-timeout-secs", OPT_INT, &o->exit_timeout_secs, 0, 1 << 30, false},
        {"log-verbose", OPT_INT, &nr_log_settings.verbose, 0, 1 << 20, false},
        {"exit-on-error", OPT_BOOL, &o->exit_on_error, 0, 0, false},
        {"strict-readiness", OPT_BOOL, &o->strict_readiness, 0, 0, false},
        {"allow-http", OPT_BOOL, &o->allow_http, 0, 0, false},
        {"inline-execution", OPT_BOOL, &o->inline_execution, 0, 0, false},
        {"log-info", OPT_BOOL, &nr_log_settings.info, 0, 0, false},
        {"log-warning", OPT_BOOL, &nr_log_settings.warn, 0, 0, false},
        {"log-error", OPT_BOOL, &nr_log_settings.error, 0, 0, false},
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
    if (!strcmp(name, "http-address")) {
        o->http_address = v;
        return;
    }
    if (!strcmp(name, "id")) {
        o->id = v;
        return;
    }
    if (!strcmp(name, "model-config-name")) {
        o->model_config_name = v;
        return;
    }
    if (!strcmp(name, "log-file")) {
        o->log_file = v;
        return;
    }
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
    if (!strcmp(name, "allow-grpc") || !strcmp(name, "allow-metrics") ||
        !strcmp(name, "allow-gpu-metrics") || !strcmp(name, "allow-cpu-metrics")) {
        if (!parse_bool(v, &b))
            bad_value(name, v);
        return;
    }
    if (!strcmp(name, "grpc-port") || !strcmp(name, "metrics-port") ||
        !strcmp(name, "grpc-address") || !strcmp(name, "metrics-address") ||
        !strcmp(name, "backend-directory") || !strcmp(name, "repository-poll-secs") ||
        !strcmp(name, "cache-directory")) {
        NR_LOG_WARN("--%s is accepted for compatibility; nereid serves no gRPC or metrics "
                    "endpoint yet",
                    name);
        return;
    }
    if (!strcmp(name, "host-policy") || !strcmp(name, "load-model")) {
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

static int cpu_count(void)
{
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof(set), &set) == 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void log_options(const opts_t *o)
{
    char **owned = nr_calloc(o->n_repos + 4, sizeof(char *));
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
    cells[2 * r] = "model_control_mode", cells[2 * r + 1] = "MODE_NONE", r++;
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
    for (size_t i = 0; i < o->n_repos; i++)
        free(owned[i]);
    free(owned);
}

int main(int argc, char **argv)
{
    opts_t o = {
        .http_address = "0.0.0.0",
        .http_port = 8000,
        .http_threads = 8,
        .http_max_input = NR_DEFAULT_HTTP_MAX_INPUT,
        .autocomplete = true,
        .exit_on_error = true,
        .strict_readiness = true,
        .allow_http = true,
        .inline_execution = true,
        .exit_timeout_secs = 30,
        .id = "triton",
        .control_mode = "none",
    };
    parse_args(argc, argv, &o);
    if (o.log_file) {
        int fd = open(o.log_file, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (fd < 0) {
            fprintf(stderr, "error: cannot open log file %s: %s\n", o.log_file, strerror(errno));
            goto fail;
        }
        nr_log_settings.fd = fd;
    }
    if (strcmp(o.control_mode, "none") != 0) {
        fprintf(stderr, "error: creating server: Unsupported - --model-control-mode=%s is not "
                        "implemented yet; only 'none' is\n",
                o.control_mode);
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
        .cpu_count = cpu_count(),
        .model_config_name = o.model_config_name,
        .inline_execution = o.inline_execution,
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
    nr_http_server_t *http = NULL;
    if (o.allow_http) {
        nr_http_options_t ho = {
            .address = o.http_address,
            .port = o.http_port,
            .thread_count = o.http_threads,
            .max_input_size = o.http_max_input,
        };
        st = nr_http_start(&ho, core, &http);
        if (st) {
            NR_LOG_ERROR("failed to start HTTP service: %s", st->msg);
            nr_status_free(st);
            nr_server_free(core);
            goto fail;
        }
        NR_LOG_INFO("Started HTTPService at %s:%d", o.http_address, nr_http_port(http));
    }
    int sig = 0;
    sigwait(&stop, &sig);
    NR_LOG_INFO("Signal (%d) received.", sig);
    nr_server_quiesce(core);
    if (http)
        nr_http_quiesce(http);
    nr_server_drain(core, o.exit_timeout_secs);
    if (http)
        nr_http_stop(http);
    nr_server_free(core);
    free(o.repos);
    return 0;
fail: /* o.repos is the only allocation the early exits still hold */
    free(o.repos);
    return 1;
}
