/* server.h - the server core every frontend talks to (nr_server_t): the
 * model repository, the shared-memory registry, readiness and quiesce
 * (draining at shutdown), and the server's identity and extensions. Frontends (HTTP, gRPC, metrics) get
 * an nr_server_t * and nothing else; protocol-neutral request semantics live
 * in kserve.h and infer.h.
 *
 * Threads: created and freed on the main thread; everything else may be
 * called from any thread (readiness is an atomic, the registry and the
 * repository lock themselves, the rest is immutable after nr_server_new).
 */
#ifndef NR_SERVER_H
#define NR_SERVER_H

#include "repository.h"
#include "shm.h"

#include <stdbool.h>
#include <stddef.h>

typedef struct {
    const char *id;        /* --id ("triton") */
    const char *version;   /* what GET /v2 and ServerMetadata report */
    bool strict_readiness; /* --strict-readiness: ready only when every model is */
} nr_server_options_t;

typedef struct nr_server_s nr_server_t;

/* Takes ownership of repo (nr_server_free destroys it); copies the strings. */
nr_server_t *nr_server_new(const nr_server_options_t *opts, nr_repo_t *repo);
void nr_server_free(nr_server_t *s);

nr_repo_t *nr_server_repo(const nr_server_t *s);
nr_shm_t *nr_server_shm(const nr_server_t *s);
const char *nr_server_id(const nr_server_t *s);
const char *nr_server_version(const nr_server_t *s);
/* The protocol extensions the server reports (a static table, Triton's
 * names in Triton's order); returns the count. */
size_t nr_server_extensions(const char *const **out);

/* Live as long as the process serves; ready unless quiesced and, with
 * strict readiness, only when every model is ready. */
bool nr_server_live(const nr_server_t *s);
bool nr_server_ready(const nr_server_t *s);
/* From now on readiness answers "not ready" (shutdown has begun); the frontends keep serving
 * (a load balancer that has not yet seen the answer still sends requests) and close each
 * HTTP connection after its next answer. */
void nr_server_quiesce(nr_server_t *s);
bool nr_server_quiesced(const nr_server_t *s);
/* An inference request arrived (nr_infer_submit): after quiesce it postpones the drain's end. */
void nr_server_touch(nr_server_t *s);
/* Waits until no request is queued or executing and none arrived for quiet_ms (--drain-quiet-ms,
 * 1000 by default: a load balancer checking readiness every second or faster has stopped
 * sending by then; an idle server exits that long after the signal, as Triton's shutdown
 * takes about a second), at most timeout_secs, logging Triton's "Timeout N: Found M in-flight
 * inference requests". Returns how many are still in flight (0: drained). */
uint64_t nr_server_drain(nr_server_t *s, int timeout_secs, uint64_t quiet_ms);

/* Every serving model version, and each loaded later, records its requests
 * for latency summaries (a ring of cap observations). */
void nr_server_enable_obs(nr_server_t *s, size_t cap);

#endif
