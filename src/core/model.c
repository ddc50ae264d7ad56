/* model.c - loading one model version (backend state, instances, queue,
 * labels) and submitting requests to it. Load and unload run on the
 * repository's threads; submit runs on frontend threads and takes only the
 * queue lock.
 */
#include "model.h"

#include "../common/alloc.h"
#include "../common/log.h"
#include "cache.h"
#include "ensemble.h"
#include "host.h"
#include "instance.h"
#include "scheduler.h"
#include "warmup.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int cmp_output_name(const void *a, const void *b, void *arg)
{
    const nr_model_config_t *cfg = arg;
    return strcmp(cfg->output[*(const uint32_t *)a].name, cfg->output[*(const uint32_t *)b].name);
}

void nr_model_index(nr_model_t *m)
{
    const nr_model_config_t *cfg = m->cfg;
    m->outputs_by_name = nr_calloc(cfg->n_output ? cfg->n_output : 1, sizeof(uint32_t));
    for (size_t i = 0; i < cfg->n_output; i++)
        m->outputs_by_name[i] = (uint32_t)i;
    qsort_r(m->outputs_by_name, cfg->n_output, sizeof(uint32_t), cmp_output_name, (void *)cfg);
    /* a name listed twice (refused by validation) resolves to its first index */
    nr_strmap_reserve(&m->input_index, cfg->n_input);
    for (size_t i = 0; i < cfg->n_input; i++)
        nr_strmap_put(&m->input_index, cfg->input[i].name, strlen(cfg->input[i].name),
                      (uint32_t)i, NULL);
    nr_strmap_reserve(&m->output_index, cfg->n_output);
    for (size_t i = 0; i < cfg->n_output; i++)
        nr_strmap_put(&m->output_index, cfg->output[i].name, strlen(cfg->output[i].name),
                      (uint32_t)i, NULL);
}

void nr_model_index_free(nr_model_t *m)
{
    free(m->outputs_by_name);
    m->outputs_by_name = NULL;
    nr_strmap_free(&m->input_index);
    nr_strmap_free(&m->output_index);
}

int nr_model_input_index(const nr_model_t *m, const char *name, size_t len)
{
    uint32_t i;
    return nr_strmap_get(&m->input_index, name, len, &i) ? (int)i : -1;
}

int nr_model_output_index(const nr_model_t *m, const char *name, size_t len)
{
    uint32_t i;
    return nr_strmap_get(&m->output_index, name, len, &i) ? (int)i : -1;
}

static size_t count_instances(const nr_model_config_t *cfg)
{
    size_t n = 0;
    for (size_t g = 0; g < cfg->n_instance_group; g++) {
        const nr_cfg_instance_group_t *ig = &cfg->instance_group[g];
        size_t per = ig->count > 0 ? (size_t)ig->count : 1;
        n += ig->kind == NR_KIND_GPU && ig->n_gpus ? per * ig->n_gpus : per;
    }
    return n;
}

/* Each instance's share of the cores when all of them run at once. */
static int intra_share(const nr_model_config_t *cfg, int cpus)
{
    size_t n = count_instances(cfg);
    int t = n > 0 ? cpus / (int)n : cpus;
    return t < 1 ? 1 : t;
}

static nr_status_t *create_instances(nr_model_t *m, int cpu_count)
{
    const nr_model_config_t *cfg = m->cfg;
    m->instances = nr_calloc(count_instances(cfg) + 1, sizeof(nr_instance_t *));
    for (size_t g = 0; g < cfg->n_instance_group; g++) {
        const nr_cfg_instance_group_t *ig = &cfg->instance_group[g];
        size_t ndev = ig->kind == NR_KIND_GPU && ig->n_gpus ? ig->n_gpus : 1;
        for (size_t d = 0; d < ndev; d++) {
            int dev = ig->kind == NR_KIND_GPU && ig->n_gpus ? ig->gpus[d] : 0;
            char default_policy[32]; /* Triton's names: cpu, gpu_<id>, model */
            snprintf(default_policy, sizeof(default_policy),
                     ig->kind == NR_KIND_GPU ? "gpu_%d" : ig->kind == NR_KIND_MODEL ? "model" : "cpu",
                     dev);
            const char *policy_name =
                ig->host_policy && ig->host_policy[0] ? ig->host_policy : default_policy;
            const nr_host_policy_t *policy = nr_host_policy_find(policy_name);
            if (!nr_host_policy_binds(policy))
                policy = NULL;
            for (int32_t c = 0; c < (ig->count > 0 ? ig->count : 1); c++) {
                char name[512];
                snprintf(name, sizeof(name), "%s_%d", ig->name, c);
                nr_instance_info_t info = {
                    .name = name,
                    .kind = ig->kind,
                    .device_id = dev,
                    .intra_op_threads = intra_share(cfg, cpu_count),
                    .cpu_count = cpu_count,
                    .host_policy = policy_name,
                    .host = &m->host,
                };
                /* the session's threads start now and inherit the loading thread's
                 * affinity and memory policy: give them the instance's for the while */
                nr_host_policy_saved_t *saved = NULL;
                nr_status_t *st = policy ? nr_host_policy_apply(policy, &saved) : NULL;
                nr_instance_t *inst = NULL;
                if (st == NULL)
                    st = nr_inst_create(m, &info, &inst);
                nr_host_policy_restore(saved);
                if (st)
                    return st;
                nr_inst_set_policy(inst, policy);
                if (policy != NULL) /* its work runs on its own (pinned) threads only */
                    m->allow_inline = false;
                nr_rl_claim_t *claim = NULL;
                st = nr_rl_claim_new(ig, dev, name, &claim);
                if (st) {
                    nr_inst_destroy(inst);
                    return st;
                }
                if (claim != NULL) { /* waits for its resources on its own thread only */
                    nr_inst_set_claim(inst, claim);
                    m->allow_inline = false;
                }
                NR_LOG_VERBOSE(1, "created instance %s on %s device %d for '%s' version %s",
                               name, ig->kind == NR_KIND_GPU ? "GPU" : "CPU", info.device_id,
                               m->name, m->version_str);
                nr_inst_set_passive(inst, ig->passive); /* loaded but never scheduled */
                m->instances[m->n_instances++] = inst;
            }
        }
    }
    return NULL;
}

/* Stops and frees what loading built, in order: the queue (instance threads
 * leave once it stops), the instances (joined), the backend state. */
static void teardown(nr_model_t *m)
{
    nr_ensemble_destroy(m->ensemble);
    m->ensemble = NULL;
    if (m->sched)
        nr_sched_stop(m->sched);
    for (size_t i = 0; i < m->n_instances; i++)
        nr_inst_destroy(m->instances[i]);
    free(m->instances);
    m->instances = NULL;
    m->n_instances = 0;
    if (m->backend_state)
        m->backend->model_unload(m->backend_state);
    m->backend_state = NULL;
    nr_sched_destroy(m->sched);
    m->sched = NULL;
}

nr_status_t *nr_model_load(nr_model_t *m, const char *model_dir, const char *model_path,
                           int cpu_count)
{
    snprintf(m->version_str, sizeof(m->version_str), "%lld", (long long)m->version);
    m->name = m->cfg->name;
    nr_model_index(m);
    nr_stats_init(&m->stats, m->cfg->max_batch_size > 0 ? (uint32_t)m->cfg->max_batch_size : 1);
    /* The scheduler has no sequence batcher: such a model would load and then
     * fail every request in the backend (its control inputs never filled). */
    if (m->cfg->scheduling_choice == NR_SCHED_SEQUENCE)
        return nr_status_new(NR_UNSUPPORTED, "sequence batching is not supported by nereid "
                                             "(the model configuration sets 'sequence_batching')");
    nr_labels_load(&m->labels, m->cfg, model_dir);
    nr_status_t *st;
    if (m->backend == NULL) { /* an ensemble: its steps run on the composing models */
        st = nr_ensemble_create(m, m->lookup, m->lookup_arg, &m->ensemble);
        goto cache;
    }
    st = m->backend->model_load(m->cfg, model_dir, model_path, &m->backend_state);
    if (st)
        return st;
    nr_host_bind(m);
    st = create_instances(m, cpu_count > 0 ? cpu_count : 1);
    if (st == NULL) {
        m->sched = nr_sched_create(m->cfg);
        st = nr_warmup_run(m, model_dir); /* before the threads: no request can come yet */
    }
    if (st == NULL) {
        /* every instance must serve: a queue no thread takes from would hold its
         * requests for ever */
        for (size_t i = 0; i < m->n_instances && st == NULL; i++)
            st = nr_inst_start(m->instances[i]);
    }
    if (st)
        teardown(m);
cache: /* an ensemble's whole answer is cached as a model's (Triton's ensemble caching) */
    if (st == NULL && m->cfg->response_cache_enable && nr_cache_enabled() &&
        !m->cfg->decoupled) {
        m->cached = true;
        m->cache_owner = nr_cache_new_owner();
    }
    return st;
}

void nr_model_unload(nr_model_t *m)
{
    if (m->cached)
        nr_cache_drop_owner(m->cache_owner);
    teardown(m);
    nr_stats_destroy(&m->stats);
    nr_model_index_free(m);
    nr_labels_free(&m->labels);
}

const nr_labels_t *nr_model_labels(const nr_model_t *m, uint32_t output)
{
    return nr_labels_find(&m->labels, output);
}

/* Whether the model's mean execution so far is within the request's inline
 * limit (an unknown mean is not). */
static bool inline_fits(const nr_model_t *m, const nr_req_t *req)
{
    if (req->inline_max_ns == 0)
        return true;
    uint64_t n = atomic_load_explicit(&m->stats.compute_infer.count, memory_order_relaxed);
    uint64_t ns = atomic_load_explicit(&m->stats.compute_infer.ns, memory_order_relaxed);
    return n > 0 && ns / n < req->inline_max_ns;
}

/* Queued requests a borrowing thread runs after its own before it gives the
 * instance back: enough to drain what the other frontend threads queued
 * meanwhile (one request each, typically), few enough that its own clients
 * wait little; it also stops once the caller's inline limit (inline_max_ns)
 * has passed since its own request started. */
#define NR_MODEL_DRAIN_MAX 8

nr_status_t *nr_model_submit(nr_model_t *m, nr_req_t *req)
{
    if (m->cfg->decoupled && req->on_response == NULL) /* frontends refuse first, in their words */
        return nr_req_error(req, NR_UNSUPPORTED, "model '%s' is decoupled: its responses need a "
                            "stream", m->name);
    nr_status_t *st = nr_req_validate(req);
    if (st) /* a request the model refuses is not counted (as in Triton) */
        return st;
    if (m->cached) { /* response_cache: a hit is answered now, counted as Triton counts it */
        uint64_t ns;
        if (nr_cache_lookup(req, m->cache_owner, &ns)) {
            uint64_t now = nr_now_ns();
            nr_stat_add(&m->stats.cache_hit, ns);
            nr_stat_add(&m->stats.success, now - req->t_start_ns);
            req->t_exec_ns = req->t_input_end_ns = req->t_infer_end_ns = req->t_end_ns = now;
            nr_req_done(req);
            return NULL;
        }
        req->cache_ns = ns;
    }
    /* done may run before this returns (here, inline, or on an instance) and
     * release the caller's reference, possibly the last: keep m until the end */
    nr_model_ref(m);
    if (m->ensemble != NULL) { /* its steps go to their models' schedulers */
        nr_ensemble_submit(m->ensemble, req);
        nr_model_release(m);
        return NULL;
    }
    nr_sched_waiter_t *borrowed;
    st = nr_sched_submit(m->sched, req, m->allow_inline && inline_fits(m, req), &borrowed);
    if (st) { /* queue full (REJECTED) or stopping (OTHER): a failed inference */
        nr_stat_fail(&m->stats, nr_sched_stopped(m->sched) ? NR_FAIL_OTHER : NR_FAIL_REJECTED,
                     nr_now_ns() - req->t_start_ns);
    } else if (borrowed) { /* an idle instance and nothing queued: run here, no hop */
        /* req may be gone once it has run */
        uint64_t deadline = req->inline_max_ns ? req->t_start_ns + req->inline_max_ns : 0;
        nr_inst_run_inline(borrowed->owner, req);
        /* what queued for this instance meanwhile runs here too instead of waking the
         * instance's thread: a few at most, within the caller's inline limit (this
         * thread has clients of its own) */
        nr_req_t *next;
        for (int k = 0; k < NR_MODEL_DRAIN_MAX &&
                        (next = nr_sched_take_next(m->sched, deadline)) != NULL; k++)
            nr_inst_run_inline(borrowed->owner, next);
        nr_sched_give_back(m->sched, borrowed);
    }
    nr_model_release(m);
    return st;
}

uint64_t nr_model_queued(nr_model_t *m)
{
    return m->sched ? nr_sched_queued(m->sched) : 0;
}

bool nr_model_sees_cancellation(const nr_model_t *m)
{
    return m->ensemble != NULL || (m->backend != NULL && m->backend->sees_cancellation);
}

uint64_t nr_model_inflight(nr_model_t *m)
{
    if (m->ensemble != NULL)
        return nr_ensemble_inflight(m->ensemble);
    return m->sched ? nr_sched_inflight(m->sched) : 0;
}
