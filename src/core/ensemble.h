/* ensemble.h - Triton's ensemble models (platform "ensemble"): a request runs through the
 * steps of the config's ensemble_scheduling, each a request to a composing model, as a
 * graph: a step starts as soon as every ensemble tensor it reads exists, so independent
 * steps run at once, and every step goes through its model's own scheduler (a composing
 * model's dynamic batcher batches ensemble and direct traffic together).
 *
 * Tensors flow between steps without a copy: a step's outputs stay in the buffers their
 * backend produced (their holds taken over by the ensemble request), the next step's request
 * reads them in place, and the ensemble's outputs point into them too; all of it is released
 * with the ensemble request's outputs (nr_req_free). Composing models are looked up at each
 * request (the highest READY version, or the step's model_version), so a composing model
 * reloaded under load serves the next requests while the old version finishes its own.
 *
 * Threads: nr_ensemble_submit runs on the submitting thread; a step's completion may run on
 * any thread (request.h, "Which thread calls done") and starts the steps it made ready there,
 * outside the run's lock; the ensemble request's done runs on the thread that finished its
 * last step.
 */
#ifndef NR_ENSEMBLE_H
#define NR_ENSEMBLE_H

#include "../common/status.h"
#include "model.h"

#include <stdint.h>

/* nr_ensemble_t and nr_model_lookup_fn: model.h */

/* Triton's checks of an ensemble against its composing models' configs (step_cfg[s]: the
 * config of step s's model, the version it runs on), in Triton's order and words: batch sizes,
 * the maps' tensor names, each ensemble tensor's data type and shape (full, with -1 in front
 * for a batching side; -1 matches anything) the same wherever it is used, and no step (nor
 * the outputs) reading tensors that come from different decoupled steps. INVALID_ARG.
 * *decoupled: whether a step's model is decoupled, which makes the ensemble decoupled (Triton
 * sets its model_transaction_policy so, whatever the config says). Context: the loading
 * thread. */
NR_MUST_CHECK nr_status_t *nr_ensemble_validate(const nr_model_config_t *ens,
                                                const nr_model_config_t *const *step_cfg,
                                                bool *decoupled);
/* The plan of ensemble model m (its config's steps, validated by nr_cfg_validate and
 * nr_ensemble_validate). Context: the loading thread. */
NR_MUST_CHECK nr_status_t *nr_ensemble_create(nr_model_t *m, nr_model_lookup_fn lookup,
                                              void *lookup_arg, nr_ensemble_t **out);
/* Context: the unloading thread, once no request of the ensemble is left. */
void nr_ensemble_destroy(nr_ensemble_t *e);
/* Runs a validated request through the steps; req->done runs once, when the last step that
 * started has finished, with the ensemble's requested outputs or the first failing step's
 * status. A decoupled ensemble (a step's model is) answers through req->on_response instead,
 * once per iteration of the steps after a decoupled one (ensemble.c). Never fails itself: a composing model that cannot be found fails the request.
 * Context: a frontend thread (nr_model_submit); may run steps inline. */
void nr_ensemble_submit(nr_ensemble_t *e, nr_req_t *req);
/* Ensemble requests started and not yet done (the drain at shutdown). Context: any thread. */
uint64_t nr_ensemble_inflight(const nr_ensemble_t *e);

#endif
