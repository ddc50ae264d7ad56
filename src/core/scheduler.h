/* scheduler.h - one queue per model version, shared by its instances.
 *
 * Producers (frontend threads) enqueue; each idle instance thread forms its
 * next batch under the queue lock (no batcher thread, no extra hop) and then
 * executes it with no lock held. Without dynamic_batching a batch is one
 * request; with it, queued requests are combined up to max_batch_size.
 */
#ifndef NR_SCHEDULER_H
#define NR_SCHEDULER_H

#include "../config/model_config.h"
#include "request.h"

#include <stddef.h>

typedef struct nr_sched_s nr_sched_t;

nr_sched_t *nr_sched_create(const nr_model_config_t *cfg);
void nr_sched_destroy(nr_sched_t *s);
/* Takes ownership of req until it is handed to an instance. */
NR_MUST_CHECK nr_status_t *nr_sched_enqueue(nr_sched_t *s, nr_req_t *req);
/* Blocks until a batch is ready; fills out[0..n) and returns n, or 0 once the
 * scheduler is stopped and empty. */
size_t nr_sched_next_batch(nr_sched_t *s, nr_req_t **out, size_t cap);
/* After this, next_batch drains what is queued and then returns 0. */
void nr_sched_stop(nr_sched_t *s);
/* Queued requests plus requests handed out and not yet finished. */
uint64_t nr_sched_inflight(nr_sched_t *s);
void nr_sched_finished(nr_sched_t *s, size_t n); /* n requests of a batch completed */

#endif
