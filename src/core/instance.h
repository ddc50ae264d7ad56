/* instance.h - model instances: one thread each, named after the instance
 * (e.g. "simple_0_0", truncated to 15 characters for the OS), taking batches
 * from the model's queue and running them on the backend. An instance runs one batch at a
 * time, but not always on its own thread: a submitting frontend thread that borrowed it
 * while idle runs requests on it inline, and warmup runs on the loading thread before the
 * thread starts (backend.h, "Threads"; asserted in the debug builds).
 */
#ifndef NR_INSTANCE_H
#define NR_INSTANCE_H

#include "host_policy.h"
#include "rate_limit.h"
#include "model.h"

/* The backend's instance_create for model m (not started).
 * Context: the loading thread; blocks on the backend. */
NR_MUST_CHECK nr_status_t *nr_inst_create(nr_model_t *m, const nr_instance_info_t *info,
                                          nr_instance_t **out);
/* A passive instance (instance_group passive: true) is loaded but never
 * started: it takes no requests. Call before nr_inst_start.
 * Context: the loading thread, before nr_inst_start. */
void nr_inst_set_passive(nr_instance_t *inst, bool passive);
/* The host policy its thread applies when it starts (NULL: none). Call
 * before nr_inst_start. Context: the loading thread, before nr_inst_start. */
void nr_inst_set_policy(nr_instance_t *inst, const nr_host_policy_t *policy);
/* The rate limiter's claim it executes with (core/rate_limit.h; NULL: none); the instance
 * owns it. Context: the loading thread, before nr_inst_start. */
void nr_inst_set_claim(nr_instance_t *inst, nr_rl_claim_t *claim);
/* Context: any thread (the policy does not change once the instance started). */
const nr_host_policy_t *nr_inst_policy(const nr_instance_t *inst);
/* Starts the thread; the instance then serves until the queue stops. A
 * thread that cannot start is an error (INTERNAL, with the system's reason):
 * the model must not be READY with an instance that never takes requests.
 * Context: the loading thread. */
NR_MUST_CHECK nr_status_t *nr_inst_start(nr_instance_t *inst);
/* Joins the thread (call after nr_sched_stop) and destroys the backend state.
 * Context: the unloading thread (the reaper, or the loading thread after a failed load);
 * blocks until the instance's thread has drained the queue and ended. */
void nr_inst_destroy(nr_instance_t *inst);
/* Context: any thread. */
const char *nr_inst_name(const nr_instance_t *inst);
/* Runs one request on this instance from the calling thread, while the
 * scheduler has it borrowed (nr_sched_submit); completes the request (its done runs here).
 * Context: the frontend thread that borrowed the instance (asserted in the debug builds);
 * no lock held; blocks in the backend's execute. */
void nr_inst_run_inline(nr_instance_t *inst, nr_req_t *req);
/* The final response of a request its backend answered after execute (item.later) has gone:
 * the request ends (done, through the scheduler when it came through it) once its batch's
 * execute has returned too. Context: the thread that sent the final response. */
void nr_inst_later_final(nr_req_t *r);
/* Runs validated requests that never went through the queue (warmup) on
 * this instance from the calling thread, before its thread starts: in
 * batches of at most the instance's batch capacity, each completed by its
 * done; counted in the statistics as any execution.
 * Context: the loading thread, before nr_inst_start; blocks in execute. */
void nr_inst_run_direct(nr_instance_t *inst, nr_req_t **reqs, size_t n);

#endif
