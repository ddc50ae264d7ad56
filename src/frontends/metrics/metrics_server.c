/* metrics_server.c - the metrics port: a libmicrohttpd daemon with one
 * internal thread (scrapes are rare and short), the CPU poller, and the
 * observation rings the summaries need.
 *
 *   GET /metrics, GET /metrics/   200 text/plain; charset=utf-8 (query ignored)
 *   GET <anything else>           404 {"error":"Not Found"} (Triton: 200, empty;
 *                                 nereid's deliberate departure)
 *   any other method              405 {"error":"Method Not Allowed"}
 */
#include "metrics_int.h"

#include "../../common/alloc.h"
#include "../../common/net.h"
#include "../../core/kserve.h"
#include "../mhd/mhd.h"

#include <microhttpd.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

struct nr_metrics_server_s {
    nr_server_t *core;
    nr_metrics_options_t opts; /* address owned */
    nr_metrics_quantile_t *quantiles;
    size_t n_quantiles;
    nr_metrics_cpu_t *cpu; /* NULL without CPU metrics */
    struct MHD_Daemon *daemon;
    int port;
    nr_mhd_quiesce_t quiesce;
};

static const char ctype_text[] = "text/plain; charset=utf-8";

/* The scrape: the view of the core, rendered. */
static char *scrape(nr_metrics_server_t *s, size_t *len)
{
    nr_metrics_view_t v;
    nr_metrics_collect(s->core, s->opts.summaries, s->quantiles, s->n_quantiles, &v);
    v.counters = s->opts.counters;
    v.pinned_total = NR_METRICS_PINNED_TOTAL;
    v.pinned_used = 0;
    v.cpu = s->cpu != NULL;
    if (v.cpu)
        nr_metrics_cpu_read(s->cpu, &v.cpu_util, &v.mem_total, &v.mem_used);
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_reserve(&b, 4096 + v.n_rows * 2048);
    nr_metrics_render(&b, &v);
    nr_metrics_view_free(&v);
    return nr_buf_steal(&b, len);
}

static enum MHD_Result reply(struct MHD_Connection *c, unsigned status, char *body, size_t len,
                             const char *ctype)
{
    struct MHD_Response *r = MHD_create_response_from_buffer(len, body, MHD_RESPMEM_MUST_FREE);
    if (r == NULL) {
        free(body);
        return MHD_NO;
    }
    MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, ctype);
    enum MHD_Result ret = MHD_queue_response(c, status, r);
    MHD_destroy_response(r);
    return ret;
}

static enum MHD_Result reply_error(struct MHD_Connection *c, unsigned status, const char *msg)
{
    char *body = nr_asprintf("{\"error\":\"%s\"}", msg);
    return reply(c, status, body, strlen(body), "application/json");
}

static enum MHD_Result on_access(void *cls, struct MHD_Connection *c, const char *url,
                                 const char *method, const char *version,
                                 const char *upload_data, size_t *upload_data_size,
                                 void **con_cls)
{
    nr_metrics_server_t *s = cls;
    if (*con_cls == NULL) { /* headers only: MHD calls again for the body */
        *con_cls = s;
        return MHD_YES;
    }
    if (*upload_data_size > 0) { /* a body is read and dropped */
        *upload_data_size = 0;
        return MHD_YES;
    }
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0)
        return reply_error(c, MHD_HTTP_METHOD_NOT_ALLOWED, "Method Not Allowed");
    if (strcmp(url, "/metrics") != 0 && strcmp(url, "/metrics/") != 0)
        return reply_error(c, MHD_HTTP_NOT_FOUND, "Not Found");
    size_t len;
    char *body = scrape(s, &len);
    return reply(c, MHD_HTTP_OK, body, len, ctype_text);
}

static void server_free(nr_metrics_server_t *s)
{
    nr_metrics_cpu_stop(s->cpu);
    free(s->quantiles);
    free((char *)s->opts.address);
    free(s);
}

nr_status_t *nr_metrics_start(const nr_metrics_options_t *o, nr_server_t *core,
                              nr_metrics_server_t **out)
{
    *out = NULL;
    nr_metrics_server_t *s = nr_calloc(1, sizeof(*s));
    s->core = core;
    s->opts = *o;
    s->opts.address = nr_strdup(o->address ? o->address : "0.0.0.0");
    s->opts.quantiles = NULL; /* parsed below; the text is not kept */
    nr_mhd_quiesce_init(&s->quiesce);
    struct sockaddr_storage ss;
    bool v6 = false;
    if (!nr_net_resolve(s->opts.address, o->port, &ss, &v6)) {
        nr_status_t *st = nr_status_new(NR_INVALID_ARG, "invalid --metrics-address '%s'",
                                        s->opts.address);
        server_free(s);
        return st;
    }
    if (o->summaries) {
        s->quantiles = nr_metrics_parse_quantiles(o->quantiles, &s->n_quantiles);
        nr_server_enable_obs(core, NR_METRICS_SUMMARY_OBS); /* models loaded later too */
    }
    if (o->cpu)
        s->cpu = nr_metrics_cpu_start(o->interval_ms);
    /* One epoll thread: scrapes are rare and small. A scraper keeps its connection
     * between scrapes (Prometheus: 15-60 s), so idle ones are closed after 5
     * minutes, and at most 1024 are open at once (more are closed). */
    unsigned flags = MHD_USE_EPOLL_INTERNAL_THREAD | MHD_USE_ITC | MHD_USE_ERROR_LOG |
                     (v6 ? MHD_USE_IPv6 : 0);
    s->daemon = MHD_start_daemon(flags, (uint16_t)o->port, NULL, NULL, on_access, s,
                                 MHD_OPTION_EXTERNAL_LOGGER, nr_mhd_log, (void *)"metrics HTTP",
                                 MHD_OPTION_SOCK_ADDR, (struct sockaddr *)&ss,
                                 MHD_OPTION_CONNECTION_LIMIT, (unsigned)1024,
                                 MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)300, MHD_OPTION_END);
    nr_status_t *st = nr_mhd_started(s->daemon, s->opts.address, o->port, &s->port);
    if (st != NULL) {
        server_free(s);
        return st;
    }
    *out = s;
    return NULL;
}

int nr_metrics_port(const nr_metrics_server_t *s)
{
    return s->port;
}

void nr_metrics_quiesce(nr_metrics_server_t *s)
{
    if (s != NULL)
        nr_mhd_quiesce(s->daemon, &s->quiesce);
}

void nr_metrics_stop(nr_metrics_server_t *s)
{
    if (s == NULL)
        return;
    nr_metrics_quiesce(s);
    nr_mhd_stop(s->daemon, &s->quiesce);
    server_free(s);
}

/* ---- the frontend interface (core/frontend.h) ---- */

static nr_status_t *fe_start(const void *opts, nr_server_t *core, void **state)
{
    return nr_metrics_start(opts, core, (nr_metrics_server_t **)state);
}

static int fe_port(const void *state)
{
    return nr_metrics_port(state);
}

static void fe_quiesce(void *state)
{
    nr_metrics_quiesce(state);
}

static void fe_stop(void *state)
{
    nr_metrics_stop(state);
}

const nr_frontend_t nr_metrics_frontend = {
    "Metrics Service", "Metrics", fe_start, fe_port, fe_quiesce, fe_stop,
};
