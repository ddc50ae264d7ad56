/* boot.h - a running server from its options, the one way main.c and the in-process API
 * (nereid.h) bring one up and down: the HTTP limits the machine allows, the repository loaded
 * as the control mode says, Triton's status tables, the core, and the frontends the options
 * allow (gRPC, HTTP, metrics, in Triton's order, each a core/frontend.h interface); then
 * quiesce, drain and stop.
 *
 * Context: one thread at a time per server (main's, or the API caller's).
 */
#ifndef NR_API_BOOT_H
#define NR_API_BOOT_H

#include "../core/server.h"
#include "options.h"

typedef struct nr_boot_s nr_boot_t;

/* Brings a server up. The options are completed in place (HTTP limits) and must outlive the
 * server. On failure *started_frontends says whether the failure was a frontend's (already
 * logged, as Triton logs it) rather than the server's creation ("error: creating server: ..."
 * on Triton's command line). */
NR_MUST_CHECK nr_status_t *nr_boot_start(nr_opts_t *o, bool *frontend_failed, nr_boot_t **out);
/* The core the frontends serve (readiness, repository, statistics). */
nr_server_t *nr_boot_core(nr_boot_t *b);
/* Not ready from here; serving goes on until nothing is in flight and no inference request
 * arrived for --drain-quiet-ms, at most --exit-timeout-secs; then no new connection or call.
 * False when requests are still in flight then (a process exits at once, as Triton's does:
 * stopping would wait for them). */
bool nr_boot_drain(nr_boot_t *b);
/* Drains (unless nr_boot_drain did), stops the frontends and frees the server (its
 * repository's models unloaded): it waits for every request in flight. */
void nr_boot_stop(nr_boot_t *b);

#endif
