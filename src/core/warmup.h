/* warmup.h - model_warmup: before a model version is READY, each of its
 * instances runs every warmup sample of its config, as Triton does, so the
 * first real request does not pay for lazy initialisation (memory arenas,
 * kernel selection, an execution provider's compilation).
 */
#ifndef NR_WARMUP_H
#define NR_WARMUP_H

#include "model.h"

/* Runs the samples of m->cfg->model_warmup on every instance of m, whose
 * threads have not started (the calling thread executes them). A sample
 * with batch_size 0 is skipped; one runs max(count, 1) times, each a batch of
 * batch_size requests of batch 1 built from its inputs: zero_data, random_data
 * (zeros for TYPE_STRING) or input_data_file read from <model_dir>/warmup/
 * (TYPE_STRING: the file as serialized strings, 4-byte lengths; others at
 * least the tensor's bytes, the first of them used). The executions count in
 * the model's statistics, as in Triton. `--log-verbose=1` logs each run as
 * Triton does. Returns the first failure (a file missing or too short, a
 * request the model refuses, an execution error): the model does not load. */
NR_MUST_CHECK nr_status_t *nr_warmup_run(nr_model_t *m, const char *model_dir);

#endif
