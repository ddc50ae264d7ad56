/* otlp.h - the OpenTelemetry exporter behind Triton's trace mode "opentelemetry": spans packed as
 * OTLP protobuf (src/proto/otlp_trace.proto) as their traces end, queued, and sent in batches by
 * one thread of its own as OTLP/HTTP (POST <url>, Content-Type application/x-protobuf, libcurl),
 * the batch span processor Triton configures:
 *   - the queue holds at most bsp_max_queue_size spans: a span that finds it full is dropped
 *     (counted, and said in the log once per run of drops), so a collector that is down or slow
 *     never makes a request wait or the server's memory grow;
 *   - a batch leaves when bsp_max_export_batch_size spans wait, or bsp_schedule_delay ms after
 *     the last export, whichever comes first;
 *   - an export that fails (no connection, an HTTP status other than 2xx, 10 s without an
 *     answer) drops its batch; the log says when exports start failing and when they work again.
 * At stop the spans still queued are sent once more, with 2 s to do it.
 *
 * Times: spans take CLOCK_MONOTONIC ns (the request's stamps) and are sent in Unix time, the
 * offset between the two clocks taken at start (Triton's time_offset_).
 */
#ifndef NR_OTLP_H
#define NR_OTLP_H

#include "../../common/status.h"
#include "../../core/trace.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Starts the exporter thread from mode opentelemetry's settings ("<key>=<value>": url, resource
 * (repeatable; after OTEL_RESOURCE_ATTRIBUTES' "k=v,k=v"), bsp_max_queue_size,
 * bsp_schedule_delay, bsp_max_export_batch_size; checked by the options) and registers it as the
 * core's trace exporter (core/trace.h), replacing a running one. UNAVAILABLE when libcurl or the
 * thread cannot be had. */
NR_MUST_CHECK nr_status_t *nr_otlp_start(const char *const *settings, size_t n);
/* Unregisters the exporter, sends what is queued (2 s at most) and stops. */
void nr_otlp_stop(void);

#endif
