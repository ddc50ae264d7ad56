/* http_server.h - the KServe v2 HTTP/REST frontend with Triton's extensions
 * (binary tensors, compression, model config, statistics, repository index).
 * Started by main() after every model finished loading.
 */
#ifndef NR_HTTP_SERVER_H
#define NR_HTTP_SERVER_H

#include "../../common/status.h"
#include "../../core/frontend.h"
#include "../../core/restrict.h"
#include "../../core/server.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *address;     /* --http-address, "0.0.0.0" */
    int port;                /* --http-port, 8000 */
    int thread_count;        /* --http-thread-count, 8 */
    uint64_t max_input_size; /* --http-max-input-size, 64 MiB */
    int max_connections;     /* --http-max-connections; 0: no limit */
    int idle_timeout_secs;   /* --http-idle-timeout-secs; 0: never */
    int request_timeout_secs; /* --http-request-timeout-secs: header to whole body; 0: never */
    uint64_t body_memory_limit; /* --http-body-memory-limit: bodies held; 0: no limit */
    bool reuse_port;         /* --reuse-http-port */
    const char *header_forward; /* --http-header-forward-pattern (NULL: none) */
    nr_restrict_t restricted; /* --http-restricted-api (the server keeps a copy) */
} nr_http_options_t;

typedef struct nr_http_server_s nr_http_server_t;

/* Binds and starts serving; the core must outlive the frontend. */
NR_MUST_CHECK nr_status_t *nr_http_start(const nr_http_options_t *opts, nr_server_t *core,
                                         nr_http_server_t **out);
/* Stops accepting new connections; requests already received still complete
 * (readiness is the core's: nr_server_quiesce). */
void nr_http_quiesce(nr_http_server_t *srv);
/* Stops everything and frees the server. */
void nr_http_stop(nr_http_server_t *srv);

/* The bound port (useful with --http-port=0). */
int nr_http_port(const nr_http_server_t *srv);

/* This frontend as main() runs it (core/frontend.h). */
extern const nr_frontend_t nr_http_frontend;

#endif
