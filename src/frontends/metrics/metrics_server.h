/* metrics_server.h - Triton's Prometheus metrics endpoint: GET /metrics (and
 * /metrics/) on its own port (--metrics-port, 8002) answers the text format
 * with Triton 2.51's families, HELP texts, labels and number formatting: the
 * per-model request counters and durations (the statistics API's counters,
 * read at scrape time), failures by reason, the pending request count, the
 * optional latency summaries, pinned memory and CPU utilization and memory
 * (polled every --metrics-interval-ms). Started by main() after HTTP.
 *
 * Threads: one libmicrohttpd thread answers scrapes, one polls /proc; neither
 * touches the request path, which only bumps the core's atomic counters.
 */
#ifndef NR_METRICS_SERVER_H
#define NR_METRICS_SERVER_H

#include "../../common/status.h"
#include "../../core/frontend.h"
#include "../../core/server.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *address; /* --metrics-address; NULL = the HTTP address (main fills it) */
    int port;            /* --metrics-port, 8002 */
    int interval_ms;     /* --metrics-interval-ms, 2000: how often CPU metrics are polled */
    bool cpu;            /* --allow-cpu-metrics, true */
    /* --metrics-config <setting>=<value>, compared as Triton does (exact strings) */
    bool summaries;             /* summary_latencies=true */
    bool counters;              /* counter_latencies=false turns the duration counters off */
    const char *quantiles;      /* summary_quantiles=<q>:<err>,... (NULL = Triton's defaults) */
} nr_metrics_options_t;

typedef struct nr_metrics_server_s nr_metrics_server_t;

void nr_metrics_options_default(nr_metrics_options_t *o);
/* One --metrics-config argument "<setting>=<value>" (borrowed; must outlive
 * the options). Unknown settings are accepted and ignored, as in Triton 2.51
 * (histogram_latencies included). A malformed argument is INVALID_ARG with
 * Triton's text: "--metrics-config option format is <setting>=<value>. Got <arg>". */
NR_MUST_CHECK nr_status_t *nr_metrics_config_set(nr_metrics_options_t *o, const char *arg);

/* Starts CPU polling (logging "Collecting CPU metrics") when o->cpu, binds
 * and starts serving; the core must outlive the server. UNAVAILABLE
 * "Socket '<addr>:<port>' already in use " when the port cannot be bound. */
NR_MUST_CHECK nr_status_t *nr_metrics_start(const nr_metrics_options_t *o, nr_server_t *core,
                                            nr_metrics_server_t **out);
/* Stops accepting connections (scrapes already received still complete). */
void nr_metrics_quiesce(nr_metrics_server_t *s);
/* Stops everything and frees the server; NULL is fine. */
void nr_metrics_stop(nr_metrics_server_t *s);
/* The bound port (useful with --metrics-port=0). */
int nr_metrics_port(const nr_metrics_server_t *s);

/* This frontend as main() runs it (core/frontend.h). */
extern const nr_frontend_t nr_metrics_frontend;

#endif
