/* frontend.h - a frontend as main() runs it, one small interface (like Redis's ConnectionType
 * or an h2o handler): start it over the core with its options, ask which port it bound, stop
 * it taking new work when the server stops (quiesce: what it has in hand goes on), then stop
 * it. Each frontend exports one (nr_grpc_frontend, nr_http_frontend, nr_metrics_frontend);
 * main.c iterates them in Triton's order. The core never calls these: the interface lives
 * here because every frontend and main see the core, and no frontend sees another.
 *
 * Context: main's thread, one call at a time; start and stop block while threads start and
 * end.
 */
#ifndef NR_FRONTEND_H
#define NR_FRONTEND_H

#include "../common/status.h"
#include "server.h"

typedef struct {
    const char *service; /* Triton's log name: "Started <service> at <address>:<port>" */
    const char *kind;    /* "failed to start <kind> service: <why>" */
    /* Binds and starts serving with its options struct; *state is what the other calls take.
     * The core must outlive the frontend. */
    NR_MUST_CHECK nr_status_t *(*start)(const void *opts, nr_server_t *core, void **state);
    int (*port)(const void *state);   /* the bound port (useful with port 0) */
    void (*quiesce)(void *state);     /* no new connections or calls; NULL state is fine */
    void (*stop)(void *state);        /* stops and frees; NULL state is fine */
} nr_frontend_t;

#endif
