/* instance.h - model instances: one thread each, named after the instance
 * (e.g. "simple_0_0", truncated to 15 characters for the OS), taking batches
 * from the model's queue and running them on the backend.
 */
#ifndef NR_INSTANCE_H
#define NR_INSTANCE_H

#include "host_policy.h"
#include "model.h"

NR_MUST_CHECK nr_status_t *nr_inst_create(nr_model_t *m, const nr_instance_info_t *info,
                                          nr_instance_t **out);
/* A passive instance (instance_group passive: true) is loaded but never
 * started: it takes no requests. Call before nr_inst_start. */
void nr_inst_set_passive(nr_instance_t *inst, bool passive);
/* The host policy its thread applies when it starts (NULL: none). Call
 * before nr_inst_start. */
void nr_inst_set_policy(nr_instance_t *inst, const nr_host_policy_t *policy);
const nr_host_policy_t *nr_inst_policy(const nr_instance_t *inst);
/* Starts the thread; the instance then serves until the queue stops. A
 * thread that cannot start is an error (INTERNAL, with the system's reason):
 * the model must not be READY with an instance that never takes requests. */
NR_MUST_CHECK nr_status_t *nr_inst_start(nr_instance_t *inst);
/* Joins the thread (call after nr_sched_stop) and destroys the backend state. */
void nr_inst_destroy(nr_instance_t *inst);
const char *nr_inst_name(const nr_instance_t *inst);
/* Runs one request on this instance from the calling thread, while the
 * scheduler has it borrowed (nr_sched_submit); completes the request. */
void nr_inst_run_inline(nr_instance_t *inst, nr_req_t *req);
/* Runs validated requests that never went through the queue (warmup) on
 * this instance from the calling thread, before its thread starts: in
 * batches of at most the instance's batch capacity, each completed by its
 * done; counted in the statistics as any execution. */
void nr_inst_run_direct(nr_instance_t *inst, nr_req_t **reqs, size_t n);

#endif
