/* host.h - what the core offers backends (backends/backend.h, nr_host_t): requests from one
 * model to another, as Triton's backends make them through TRITONSERVER_ServerInferAsync
 * (the Python backend's Business Logic Scripting), and the responses of decoupled models
 * (TRITONBACKEND_ResponseSend with its flags).
 *
 * Threads: infer runs on the backend's executing thread; the answer comes on the thread that
 * finishes the request (see request.h), possibly the caller's own before infer returns.
 */
#ifndef NR_HOST_H
#define NR_HOST_H

#include "model.h"

/* Fills m->host for m's instances: its lookups go through m->lookup (the repository). Context:
 * the loading thread, before the instances are created. */
void nr_host_bind(nr_model_t *m);

#endif
