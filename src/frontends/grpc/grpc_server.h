/* grpc_server.h - the KServe v2 gRPC frontend: Triton's
 * inference.GRPCInferenceService (every RPC, ModelStreamInfer included) and
 * grpc.health.v1.Health/Check, on gRPC's C core with protobuf-c messages.
 * Started by main() after every model finished loading, before HTTP.
 */
#ifndef NR_GRPC_SERVER_H
#define NR_GRPC_SERVER_H

#include "../../common/status.h"
#include "../../core/frontend.h"
#include "../../core/restrict.h"
#include "../../core/server.h"

#include <stdbool.h>
#include <stdint.h>

typedef enum {
    NR_GRPC_COMPRESS_NONE,
    NR_GRPC_COMPRESS_LOW,
    NR_GRPC_COMPRESS_MEDIUM,
    NR_GRPC_COMPRESS_HIGH,
} nr_grpc_compression_t;

typedef struct {
    const char *address;     /* --grpc-address, "0.0.0.0" */
    int port;                /* --grpc-port, 8001 (0: any free port) */
    int infer_pool;          /* --grpc-infer-allocation-pool-size, 8: ModelInfer calls
                                waiting for a client at once */
    int threads;             /* --grpc-infer-thread-count: threads, each with its own
                                completion queue (0: one) */
    bool reuse_port;         /* --reuse-grpc-port */
    const char *header_forward; /* --grpc-header-forward-pattern (NULL: none) */
    nr_restrict_t restricted; /* --grpc-restricted-protocol (the server keeps a copy) */
    nr_grpc_compression_t compression; /* --grpc-infer-response-compression-level */
    /* --grpc-keepalive-* and --grpc-http2-*, Triton's defaults when zeroed by
     * nr_grpc_options_default */
    int keepalive_time_ms, keepalive_timeout_ms;
    bool keepalive_permit_without_calls;
    int http2_max_pings_without_data, http2_min_recv_ping_interval_ms, http2_max_ping_strikes;
    int max_connection_age_ms, max_connection_age_grace_ms; /* 0: not set */
    /* TLS: --grpc-use-ssl, --grpc-use-ssl-mutual and the PEM files */
    bool use_ssl, use_ssl_mutual;
    const char *server_cert, *server_key, *root_cert;
} nr_grpc_options_t;

typedef struct nr_grpc_server_s nr_grpc_server_t;

/* Triton's defaults for every option. */
void nr_grpc_options_default(nr_grpc_options_t *o);

/* Binds and starts serving; the core must outlive the frontend. UNAVAILABLE
 * "Socket '<addr>:<port>' already in use " when it cannot bind. */
NR_MUST_CHECK nr_status_t *nr_grpc_start(const nr_grpc_options_t *opts, nr_server_t *core,
                                         nr_grpc_server_t **out);
/* Stops taking new calls; calls in progress (open streams too) go on. */
void nr_grpc_quiesce(nr_grpc_server_t *s);
/* Cancels what is left, stops the threads and frees the frontend. */
void nr_grpc_stop(nr_grpc_server_t *s);
/* The bound port (useful with port 0). */
int nr_grpc_port(const nr_grpc_server_t *s);

/* This frontend as main() runs it (core/frontend.h). */
extern const nr_frontend_t nr_grpc_frontend;

#endif
