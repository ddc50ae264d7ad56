/* instance.c - instance threads: dequeue a batch, execute it on the backend
 * with no lock held, record statistics, complete each request.
 *
 * run_batch is the one place a batch executes, whichever thread holds the instance: its own
 * thread (inst_main), a frontend thread that borrowed it (nr_inst_run_inline) or the loading
 * thread (nr_inst_run_direct, warmup). That thread owns the batch's requests and the
 * instance's scratch arrays from dequeue until it has called their done() callbacks; after
 * done() it never touches the requests again. The debug builds assert that no two threads
 * are ever inside run_batch for one instance.
 */
#include "instance.h"

#include "../common/alloc.h"
#include "../common/debug.h"
#include "../common/log.h"
#include "cache.h"
#include "rate_limit.h"
#include "scheduler.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nr_instance_s {
    nr_model_t *model;
    char *name;
    void *state; /* backend instance state */
    pthread_t thread;
    bool started;
    bool passive; /* loaded, never takes requests */
    const nr_host_policy_t *policy; /* applied to its thread, or NULL */
    nr_rl_claim_t *claim;  /* the rate limiter's resources it runs with, or NULL */
    nr_req_t **reqs;       /* batch scratch, max_batch entries */
    nr_batch_item_t **items;
    size_t cap;
    nr_sched_waiter_t waiter; /* its place on the scheduler's idle stack */
#ifdef NR_DEBUG
    _Atomic bool running; /* inside run_batch: one execution at a time, whatever the thread */
#endif
};

nr_status_t *nr_inst_create(nr_model_t *m, const nr_instance_info_t *info, nr_instance_t **out)
{
    nr_instance_t *inst = nr_calloc(1, sizeof(*inst));
    inst->waiter.owner = inst;
    inst->model = m;
    inst->name = nr_strdup(info->name);
    inst->cap = m->cfg->max_batch_size > 0 ? (size_t)m->cfg->max_batch_size : 1;
    inst->reqs = nr_calloc(inst->cap, sizeof(nr_req_t *));
    inst->items = nr_calloc(inst->cap, sizeof(nr_batch_item_t *));
    nr_status_t *st = m->backend->instance_create(m->backend_state, info, &inst->state);
    if (st) {
        free(inst->reqs);
        free(inst->items);
        free(inst->name);
        free(inst);
        return st;
    }
    *out = inst;
    return NULL;
}

const char *nr_inst_name(const nr_instance_t *inst)
{
    return inst->name;
}

/* Adds one execution to the statistics; the caller holds the stats' group
 * lock. `executed`: the backend ran the batch (it did not fail as a whole).
 * As in Triton, an execution counts (execution_count, batch_stats) even when
 * every request in it failed on its own (a request-level backend error);
 * only successful requests add to inference_count. Failures here are BACKEND. */
static void add_execution(nr_stats_t *s, nr_req_t **reqs, size_t n, const nr_batch_t *b,
                          uint64_t t_exec, uint64_t t_end, bool executed)
{
    uint64_t in_ns = b->input_end_ns - t_exec, infer_ns = b->infer_end_ns - b->input_end_ns;
    uint64_t out_ns = t_end - b->infer_end_ns;
    for (size_t i = 0; i < n; i++) {
        nr_req_t *r = reqs[i];
        if (r->status) {
            nr_stat_fail(s, NR_FAIL_BACKEND, t_end - r->t_start_ns);
            continue;
        }
        nr_stat_add(&s->success, t_end - r->t_start_ns);
        nr_stat_add(&s->queue, t_exec - r->t_queue_ns);
        nr_stat_add(&s->compute_input, in_ns);
        nr_stat_add(&s->compute_infer, infer_ns);
        nr_stat_add(&s->compute_output, out_ns);
        atomic_fetch_add_explicit(&s->inference_count, r->batch_size, memory_order_relaxed);
    }
    if (!executed)
        return;
    atomic_fetch_add_explicit(&s->execution_count, 1, memory_order_relaxed);
    atomic_store_explicit(&s->last_inference_ms, nr_wall_ms(), memory_order_relaxed);
    if (b->total_batch_size < s->n_batch) {
        nr_stat_batch_t *bs = &s->batch[b->total_batch_size];
        nr_stat_add(&bs->compute_input, in_ns);
        nr_stat_add(&bs->compute_infer, infer_ns);
        nr_stat_add(&bs->compute_output, out_ns);
    }
}

/* With latency summaries on: each successful request's durations, in whole
 * microseconds as Triton observes them, into the model's ring (no lock). */
static void observe(nr_obs_t *obs, nr_req_t **reqs, size_t n, const nr_batch_t *b,
                    uint64_t t_exec, uint64_t t_end)
{
    uint32_t us[NR_OBS_N];
    us[NR_OBS_COMPUTE_INPUT] = (uint32_t)((b->input_end_ns - t_exec) / 1000);
    us[NR_OBS_COMPUTE_INFER] = (uint32_t)((b->infer_end_ns - b->input_end_ns) / 1000);
    us[NR_OBS_COMPUTE_OUTPUT] = (uint32_t)((t_end - b->infer_end_ns) / 1000);
    for (size_t i = 0; i < n; i++) {
        nr_req_t *r = reqs[i];
        if (r->status)
            continue;
        us[NR_OBS_REQUEST] = (uint32_t)((t_end - r->t_start_ns) / 1000);
        us[NR_OBS_QUEUE] = (uint32_t)((t_exec - r->t_queue_ns) / 1000);
        nr_obs_record(obs, t_end, us);
    }
}

static void record(nr_model_t *m, nr_req_t **reqs, size_t n, const nr_batch_t *b, uint64_t t_exec,
                   uint64_t t_end, bool executed)
{
    pthread_mutex_lock(&m->stats.group);
    add_execution(&m->stats, reqs, n, b, t_exec, t_end, executed);
    pthread_mutex_unlock(&m->stats.group);
    nr_obs_t *obs = atomic_load_explicit(&m->stats.obs, memory_order_acquire);
    if (obs != NULL)
        observe(obs, reqs, n, b, t_exec, t_end);
}

/* Runs inst->reqs[0..n) as one batch; completes them through the queue
 * (ordering, in-flight count) or, for requests that never went through it
 * (warmup), by calling their done directly. */
static void run_batch(nr_instance_t *inst, size_t n, bool queued)
{
    nr_model_t *m = inst->model;
    NR_DEBUG_ASSERT(!atomic_exchange(&inst->running, true));
    nr_batch_t b = {.items = inst->items, .n = n};
    if (inst->claim != NULL) /* --rate-limit: its resources first (the wait is queue time) */
        nr_rl_acquire(inst->claim);
    uint64_t t_exec = nr_now_ns();
    for (size_t i = 0; i < n; i++) {
        nr_req_t *r = inst->reqs[i];
        r->t_exec_ns = t_exec;
        r->item.status = NULL;
        r->item.later = false;
        r->queued = queued;
        atomic_store_explicit(&r->later_refs, 2, memory_order_relaxed);
        inst->items[i] = &r->item;
        b.total_batch_size += r->batch_size;
    }
    nr_status_t *st = m->backend->execute(inst->state, &b);
    if (inst->claim != NULL)
        nr_rl_release(inst->claim);
    uint64_t t_end = nr_now_ns();
    bool decoupled = m->cfg->decoupled;
    if (b.input_end_ns < t_exec || b.input_end_ns > t_end)
        b.input_end_ns = t_exec;
    if (b.infer_end_ns < b.input_end_ns || b.infer_end_ns > t_end)
        b.infer_end_ns = t_end;
    size_t n_later = 0;
    for (size_t i = 0; i < n; i++) {
        nr_req_t *r = inst->reqs[i];
        if (r->item.later) { /* answered later, from another thread: its item, outputs
                                and responses are the backend's until its final one */
            n_later++;
        } else if (st) {
            r->status = nr_status_new(st->code, "%s", st->msg);
            nr_status_free(r->item.status);
            r->item.status = NULL;
        } else {
            r->status = r->item.status;
            r->item.status = NULL;
            if (decoupled && r->status == NULL && !r->final_sent)
                nr_req_respond(r, NULL, NR_RESPONSE_FINAL); /* answered as a plain model is */
        }
        if (r->status) { /* never hand out partial outputs */
            for (size_t k = 0; k < r->n_want; k++) {
                nr_hold_unref(r->outputs[k].hold);
                memset(&r->outputs[k], 0, sizeof(r->outputs[k]));
            }
        }
        r->t_input_end_ns = b.input_end_ns;
        r->t_infer_end_ns = b.infer_end_ns;
        r->t_end_ns = t_end;
    }
    record(m, inst->reqs, n, &b, t_exec, t_end, st == NULL);
    nr_status_free(st);
    for (size_t i = 0; i < n; i++) { /* response cache: what missed and succeeded is kept */
        nr_req_t *r = inst->reqs[i];
        if (r->cache_key == NULL)
            continue;
        uint64_t ns = r->cache_ns;
        if (r->status == NULL && !r->item.later)
            ns += nr_cache_insert(r);
        nr_stat_add(&m->stats.cache_miss, ns);
    }
    /* the requests still open (item.later) leave the batch; each ends with its final response
     * or here, whichever comes second (nr_inst_later_final) */
    size_t k = n_later == 0 ? n : 0;
    for (size_t i = 0; i < n && n_later > 0; i++) {
        nr_req_t *r = inst->reqs[i];
        if (!r->item.later)
            inst->reqs[k++] = r;
        else if (atomic_fetch_sub_explicit(&r->later_refs, 1, memory_order_acq_rel) == 1)
            inst->reqs[k++] = r; /* its final response came first */
    }
    if (queued) {
        nr_sched_complete(m->sched, inst->reqs, k);
    } else {
        for (size_t i = 0; i < k; i++)
            nr_req_done(inst->reqs[i]);
    }
    /* the scratch arrays (reqs, items) are free again */
    NR_DEBUG_ONLY(atomic_store(&inst->running, false);)
}

void nr_inst_later_final(nr_req_t *r)
{
    if (atomic_fetch_sub_explicit(&r->later_refs, 1, memory_order_acq_rel) != 1)
        return; /* execute has not returned yet: run_batch ends it */
    if (r->queued)
        nr_sched_complete(r->model->sched, &r, 1);
    else
        nr_req_done(r);
}

/* Requests whose queue timeout expired (REJECT): never executed, answered
 * UNAVAILABLE with Triton's text, counted as failures (REJECTED). */
static void reject_expired(nr_instance_t *inst, nr_req_t *list)
{
    nr_model_t *m = inst->model;
    uint64_t now = nr_now_ns();
    while (list) {
        size_t n = 0;
        for (; list && n < inst->cap; list = list->next) {
            nr_req_t *r = list;
            r->status = nr_status_new(NR_UNAVAILABLE, "Request timeout expired");
            r->t_end_ns = now;
            nr_stat_fail(&m->stats, NR_FAIL_REJECTED, now - r->t_start_ns);
            inst->reqs[n++] = r;
        }
        nr_sched_complete(m->sched, inst->reqs, n);
    }
}

static void *inst_main(void *arg)
{
    nr_instance_t *inst = arg;
    char tname[16];
    snprintf(tname, sizeof(tname), "%s", inst->name);
    pthread_setname_np(pthread_self(), tname);
    if (inst->policy != NULL) { /* checked on the loading thread: cannot fail here */
        nr_status_t *st = nr_host_policy_apply(inst->policy, NULL);
        if (st != NULL)
            NR_LOG_ERROR("instance %s: %s", inst->name, st->msg);
        nr_status_free(st);
    }
    for (;;) {
        nr_req_t *expired;
        size_t n = nr_sched_next_batch(inst->model->sched, inst->reqs, inst->cap, &expired,
                                       &inst->waiter);
        if (expired) {
            reject_expired(inst, expired);
            continue;
        }
        if (n == 0)
            break;
        run_batch(inst, n, true);
    }
    return NULL;
}

void nr_inst_run_inline(nr_instance_t *inst, nr_req_t *req)
{
    inst->reqs[0] = req;
    run_batch(inst, 1, true);
}

void nr_inst_run_direct(nr_instance_t *inst, nr_req_t **reqs, size_t n)
{
    for (size_t done = 0; done < n;) {
        size_t k = n - done < inst->cap ? n - done : inst->cap;
        memcpy(inst->reqs, reqs + done, k * sizeof(*reqs));
        run_batch(inst, k, false);
        done += k;
    }
}

void nr_inst_set_passive(nr_instance_t *inst, bool passive)
{
    inst->passive = passive;
}

void nr_inst_set_policy(nr_instance_t *inst, const nr_host_policy_t *policy)
{
    inst->policy = policy;
}

void nr_inst_set_claim(nr_instance_t *inst, nr_rl_claim_t *claim)
{
    inst->claim = claim;
}

const nr_host_policy_t *nr_inst_policy(const nr_instance_t *inst)
{
    return inst->policy;
}

nr_status_t *nr_inst_start(nr_instance_t *inst)
{
    if (inst->passive)
        return NULL;
    int rc = pthread_create(&inst->thread, NULL, inst_main, inst);
    if (rc != 0) {
        char why[128];
        return nr_status_new(NR_INTERNAL, "failed to start the thread of instance '%s': %s",
                             inst->name, strerror_r(rc, why, sizeof(why)));
    }
    inst->started = true;
    return NULL;
}

void nr_inst_destroy(nr_instance_t *inst)
{
    if (!inst)
        return;
    if (inst->started)
        pthread_join(inst->thread, NULL);
    inst->model->backend->instance_destroy(inst->state);
    nr_rl_claim_free(inst->claim);
    free(inst->reqs);
    free(inst->items);
    free(inst->name);
    free(inst);
}
