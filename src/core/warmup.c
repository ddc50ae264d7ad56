/* warmup.c - model_warmup (warmup.h). Runs on the loading thread, before the
 * instance threads start: the instances are idle, so each sample's batch is
 * handed to an instance directly (nr_inst_run_direct), never to the queue.
 * The loading thread takes each instance's host policy while it warms that
 * instance up, so a pinned instance warms up on its own cores and memory node.
 */
#include "warmup.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/limits.h"
#include "../common/log.h"
#include "instance.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* One input of a sample: its tensor, shared by the sample's requests. */
typedef struct {
    const nr_cfg_warmup_input_t *in;
    int64_t dims[NR_MAX_DIMS + 1];
    size_t ndim;
    char *data;
    size_t size;
} sample_input_t;

static nr_status_t *read_file(const char *path, char **out, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    int e = nr_buf_read_file(&b, path, NR_MAX_TENSOR_BYTES);
    if (e != 0) {
        nr_buf_free(&b);
        return nr_status_new(NR_INVALID_ARG, "failed to open text file for read %s: %s", path,
                             strerror(e));
    }
    *out = nr_buf_steal(&b, len);
    return NULL;
}

/* The tensor of one warmup input (batch 1 when the model batches). */
static nr_status_t *build_input(const nr_model_t *m, const char *model_dir,
                                const nr_cfg_warmup_input_t *in, sample_input_t *si)
{
    si->in = in;
    uint64_t count = 1;
    if (m->cfg->max_batch_size > 0)
        si->dims[si->ndim++] = 1;
    for (size_t d = 0; d < in->dims.n && si->ndim <= NR_MAX_DIMS; d++) {
        si->dims[si->ndim++] = in->dims.v[d];
        if (nr_mul_overflow(count, (uint64_t)in->dims.v[d], &count))
            count = UINT64_MAX;
    }
    size_t esize = nr_dtype_size(in->data_type);
    uint64_t bytes; /* TYPE_STRING: that many empty strings (4-byte lengths of 0) */
    if (in->dims.n > NR_MAX_DIMS || nr_mul_overflow(count, esize ? esize : 4, &bytes) ||
        bytes > NR_MAX_TENSOR_BYTES)
        return nr_status_new(NR_INVALID_ARG, "warmup input '%s' is too large", in->key);
    bool string = in->data_type == NR_TYPE_STRING;
    if (in->data == NR_WARMUP_FILE) {
        char *path = nr_asprintf("%s/warmup/%s", model_dir, in->input_data_file);
        size_t len = 0;
        nr_status_t *st = read_file(path, &si->data, &len);
        free(path);
        if (st)
            return st;
        if (!string && len < bytes) /* Triton's text, its missing space included */
            return nr_status_new(NR_INVALID_ARG,
                                 "warmup setting expects %llu bytes, but the data provided from "
                                 "%sonly has %zu bytes",
                                 (unsigned long long)bytes, in->input_data_file, len);
        si->size = string ? len : (size_t)bytes;
        return NULL;
    }
    si->size = (size_t)bytes;
    si->data = calloc(si->size ? si->size : 1, 1); /* sized by the config: may fail */
    if (si->data == NULL)
        return nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes for warmup input '%s'",
                             si->size, in->key);
    if (in->data == NR_WARMUP_RANDOM && !string)
        for (size_t i = 0; i < si->size; i++)
            si->data[i] = (char)rand();
    return NULL;
}

static void warmup_done(nr_req_t *req, void *arg)
{
    (void)req, (void)arg; /* the loading thread reads req->status after the batch */
}

/* Runs one sample once on inst: batch_size requests, one batch. */
static nr_status_t *run_once(nr_model_t *m, nr_instance_t *inst, const nr_cfg_warmup_t *w,
                             const sample_input_t *si)
{
    nr_req_t **reqs = nr_calloc(w->batch_size, sizeof(*reqs));
    nr_status_t *st = NULL;
    size_t n = 0;
    for (; n < w->batch_size && st == NULL; n++) {
        nr_req_t *r = reqs[n] = nr_req_new(m);
        r->done = warmup_done;
        r->t_start_ns = r->t_queue_ns = nr_now_ns();
        for (size_t k = 0; k < w->n_inputs && st == NULL; k++)
            st = nr_req_add_input(r, si[k].in->key, strlen(si[k].in->key), si[k].in->data_type,
                                  si[k].dims, si[k].ndim, si[k].data, si[k].size);
        if (st == NULL)
            st = nr_req_validate(r);
    }
    if (st == NULL) {
        nr_inst_run_direct(inst, reqs, n);
        for (size_t i = 0; i < n && st == NULL; i++)
            if (reqs[i]->status != NULL)
                st = nr_status_new(reqs[i]->status->code, "%s", reqs[i]->status->msg);
    }
    for (size_t i = 0; i < n; i++)
        nr_req_free(reqs[i]);
    free(reqs);
    return st;
}

nr_status_t *nr_warmup_run(nr_model_t *m, const char *model_dir)
{
    const nr_model_config_t *cfg = m->cfg;
    nr_status_t *st = NULL;
    for (size_t s = 0; s < cfg->n_model_warmup && st == NULL; s++) {
        const nr_cfg_warmup_t *w = &cfg->model_warmup[s];
        if (w->batch_size == 0) {
            NR_LOG_VERBOSE(1, "Skipping batch 0 warmup sample '%s'", w->name);
            continue;
        }
        NR_LOG_VERBOSE(1, "Generating warmup sample data for '%s'", w->name);
        sample_input_t *si = nr_calloc(w->n_inputs + 1, sizeof(*si));
        for (size_t k = 0; k < w->n_inputs && st == NULL; k++)
            st = build_input(m, model_dir, &w->inputs[k], &si[k]);
        uint32_t iterations = w->count > 0 ? w->count : 1;
        for (size_t i = 0; i < m->n_instances && st == NULL; i++) {
            const nr_host_policy_t *policy = nr_inst_policy(m->instances[i]);
            nr_host_policy_saved_t *saved = NULL;
            st = policy ? nr_host_policy_apply(policy, &saved) : NULL;
            for (uint32_t it = 1; it <= iterations && st == NULL; it++) {
                NR_LOG_VERBOSE(1,
                               "model '%s' instance %s is running warmup sample '%s' for "
                               "iteration %u",
                               m->name, nr_inst_name(m->instances[i]), w->name, it);
                st = run_once(m, m->instances[i], w, si);
            }
            nr_host_policy_restore(saved);
        }
        for (size_t k = 0; k < w->n_inputs; k++)
            free(si[k].data);
        free(si);
        if (st != NULL) {
            nr_status_t *wrapped = nr_status_new(st->code, "failed to run warmup sample '%s': %s",
                                                 w->name, st->msg);
            nr_status_free(st);
            st = wrapped;
        }
    }
    return st;
}
