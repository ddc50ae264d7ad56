/* boot.c - a running server from its options (boot.h). */
#include "boot.h"

#include "../common/alloc.h"
#include "../common/cpus.h"
#include "../common/log.h"
#include "../common/net.h"
#include "../core/rate_limit.h"
#include "../core/repository.h"
#include "../core/trace.h"
#include "../frontends/http/http_server.h"
#include "../frontends/otlp/otlp.h"
#include "../common/version.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static void log_options(const nr_opts_t *o)
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

static void frontends_of(nr_opts_t *o, nr_http_options_t *ho, frontend_run_t *run)
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
static void http_limits(nr_opts_t *o)
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

struct nr_boot_s {
    nr_opts_t *o;
    nr_server_t *core;
    bool drained;
    nr_http_options_t ho;
    frontend_run_t fe[N_FRONTENDS];
};

static nr_control_mode_t mode_of(const char *m)
{
    return !strcmp(m, "poll")       ? NR_CONTROL_POLL
           : !strcmp(m, "explicit") ? NR_CONTROL_EXPLICIT
                                    : NR_CONTROL_NONE;
}

/* The checks Triton makes of the options before it creates the server. */
static nr_status_t *check_options(const nr_opts_t *o)
{
    if (o->n_load_models > 0 && mode_of(o->control_mode) != NR_CONTROL_EXPLICIT)
        return nr_status_new(NR_INVALID_ARG, "--load-model can only be used with "
                                             "--model-control-mode=explicit");
    for (size_t i = 0; i < o->n_load_models; i++)
        if (!strcmp(o->load_models[i], "*") && o->n_load_models > 1)
            return nr_status_new(NR_INVALID_ARG, "Wildcard model name '*' must be the ONLY "
                                                 "startup model if specified at all.");
    if (o->n_repos == 0)
        return nr_status_new(NR_INVALID_ARG, "--model-repository must be specified");
    return NULL;
}

nr_status_t *nr_boot_start(nr_opts_t *o, bool *frontend_failed, nr_boot_t **out)
{
    *frontend_failed = false;
    for (size_t i = 0; i < o->n_notes; i++)
        NR_LOG_WARN("%s", o->notes[i].text);
    nr_backend_config_check();
    if (nr_rl_has_resources() && !nr_rl_enabled())
        NR_LOG_WARN("--rate-limit-resource has no effect: the rate limiter is off "
                    "(--rate-limit=execution_count turns it on)");
    http_limits(o);
    nr_status_t *st = check_options(o);
    if (st != NULL)
        return st;
    nr_control_mode_t mode = mode_of(o->control_mode);
    nr_repo_options_t ro = {
        .paths = o->repos,
        .n_paths = o->n_repos,
        .autocomplete = o->autocomplete,
        .cpu_count = nr_cpu_count(),
        .model_config_name = o->model_config_name,
        .inline_execution = o->inline_execution,
        .mode = mode,
        .startup_models = o->load_models,
        .n_startup_models = o->n_load_models,
        .poll_secs = mode == NR_CONTROL_POLL ? o->poll_secs : 0, /* as Triton: 0 unless polling */
        .load_retries = o->model_load_retries,
        .namespacing = o->model_namespacing,
        .load_threads = o->model_load_threads,
    };
    nr_repo_t *repo;
    st = nr_repo_create(&ro, &repo);
    if (st != NULL)
        return st;
    nr_repo_log_table(repo);
    log_options(o);
    if (!nr_repo_all_ready(repo) && o->exit_on_error) {
        NR_LOG_ERROR("Internal: failed to load all models");
        nr_repo_destroy(repo);
        return nr_status_new(NR_INTERNAL, "failed to load all models");
    }
    nr_server_options_t so = {
        .id = o->id,
        .version = NR_VERSION,
        .strict_readiness = o->strict_readiness,
    };
    if (o->trace.mode == NR_TRACE_MODE_OPENTELEMETRY) { /* the spans' way out, first */
        nr_status_t *ost = nr_otlp_start(o->trace.otel, o->trace.n_otel);
        if (ost != NULL) {
            NR_LOG_ERROR("%s", ost->msg);
            nr_status_free(ost);
        }
    }
    nr_trace_start(&o->trace); /* process-wide, as the cache; stopped with the server */
    const char *idle = nr_trace_idle_reason();
    if (idle != NULL)
        NR_LOG_WARN("--trace-config asks for tracing, but no request will be traced: %s", idle);
    nr_boot_t *b = nr_calloc(1, sizeof(*b));
    b->o = o;
    b->core = nr_server_new(&so, repo); /* owns repo from here */
    b->ho = (nr_http_options_t){
        .address = o->http_address,
        .port = o->http_port,
        .thread_count = o->http_threads,
        .max_input_size = o->http_max_input,
        .max_connections = o->http_max_conns,
        .idle_timeout_secs = o->http_idle_timeout,
        .request_timeout_secs = o->http_request_timeout,
        .body_memory_limit = o->http_body_memory,
        .reuse_port = o->http_reuse_port,
        .header_forward = o->http_header_forward,
        .restricted = o->http_restricted, /* copied by the frontend */
    };
    frontends_of(o, &b->ho, b->fe);
    if (!start_frontends(b->fe, b->core)) {
        stop_frontends(b->fe);
        nr_server_free(b->core);
        nr_trace_stop();
        nr_otlp_stop();
        free(b);
        *frontend_failed = true;
        return nr_status_new(NR_UNAVAILABLE, "a frontend could not start");
    }
    *out = b;
    return NULL;
}

nr_server_t *nr_boot_core(nr_boot_t *b)
{
    return b->core;
}

/* Readiness turns "not ready" at once; the frontends keep accepting and serving (HTTP closes
 * each connection after its answer) until nothing is in flight and nothing arrived for
 * --drain-quiet-ms, so that a load balancer has stopped sending before the listeners close;
 * then they quiesce (stop listening). */
bool nr_boot_drain(nr_boot_t *b)
{
    nr_server_quiesce(b->core);
    b->drained = true;
    bool drained =
        nr_server_drain(b->core, b->o->exit_timeout_secs, (uint64_t)b->o->drain_quiet_ms) == 0;
    quiesce_frontends(b->fe);
    return drained;
}

void nr_boot_stop(nr_boot_t *b)
{
    if (b == NULL)
        return;
    if (!b->drained)
        (void)nr_boot_drain(b);
    stop_frontends(b->fe);
    nr_server_free(b->core);
    nr_trace_stop(); /* every request is done: what was traced is written (or queued) */
    nr_otlp_stop();
    free(b);
}
