/* test_scheduler.c - the dynamic batcher and model instances, deterministically:
 * a test backend whose executions are gated (each execution waits until the
 * test opens it), so the queue's contents are known whenever a batch forms.
 * Nothing here asserts on time; sleeps only make a queue timeout certainly
 * expire before the instance looks again.
 */
#include "../../src/common/alloc.h"
#include "../../src/core/instance.h"
#include "../../src/core/model.h"
#include "../../src/core/scheduler.h"
#include "nr_test.h"
#include "test_backend.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* ---- models and requests ---- */
static const char INPUT[] = "input [ { name: \"I\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n";
static const char RAGGED[] =
    "input [ { name: \"I\" data_type: TYPE_INT32 dims: [ -1 ] allow_ragged_batch: true } ]\n";

static nr_model_t *load_model_io(const char *input, const char *extra)
{
    char text[2048];
    snprintf(text, sizeof(text),
             "name: \"m\" backend: \"onnxruntime\" platform: \"onnxruntime_onnx\"\n%s%s"
             "output [ { name: \"O\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n%s",
             strstr(extra, "max_batch_size") ? "" : "max_batch_size: 8\n", input, extra);
    return tb_load_model_text(text);
}

static nr_model_t *load_model(const char *extra)
{
    return load_model_io(INPUT, extra);
}

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
    int order[64]; /* request tags in completion order */
} waiter_t;
#define WAITER {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0, {0}}

typedef struct {
    nr_req_t *req;
    waiter_t *w;
    int32_t data[64];
    int tag;
} treq_t;

static void on_done(nr_req_t *r, void *arg)
{
    treq_t *t = arg;
    pthread_mutex_lock(&t->w->mu);
    t->w->order[t->w->done++ % 64] = t->tag;
    pthread_cond_broadcast(&t->w->cv);
    pthread_mutex_unlock(&t->w->mu);
}

static void wait_done(waiter_t *w, int n)
{
    pthread_mutex_lock(&w->mu);
    while (w->done < n)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static int done_count(waiter_t *w)
{
    pthread_mutex_lock(&w->mu);
    int n = w->done;
    pthread_mutex_unlock(&w->mu);
    return n;
}

/* A request of `batch` rows of `width` values, every value tag*1000+k;
 * priority/timeout as the HTTP parameters would set them. */
static nr_req_t *make_req(nr_model_t *m, treq_t *t, waiter_t *w, int tag, int64_t batch,
                          int64_t width, uint32_t priority, uint64_t timeout_us)
{
    t->w = w;
    t->tag = tag;
    for (int k = 0; k < 64; k++)
        t->data[k] = tag * 1000 + k;
    nr_req_t *r = nr_req_new(m);
    int64_t dims[2] = {batch, width};
    if (nr_req_add_input(r, "I", 1, NR_TYPE_INT32, dims, 2, t->data,
                         (size_t)(batch * width) * sizeof(int32_t)))
        abort();
    r->priority = priority;
    r->timeout_us = timeout_us;
    r->done = on_done;
    r->done_arg = t;
    t->req = r;
    return r;
}

/* Submits; returns the error (NULL = queued). */
static nr_status_t *submit(nr_model_t *m, treq_t *t, waiter_t *w, int tag, int64_t batch,
                           int64_t width, uint32_t priority, uint64_t timeout_us)
{
    nr_req_t *r = make_req(m, t, w, tag, batch, width, priority, timeout_us);
    nr_status_t *st = nr_model_submit(m, r);
    if (st) {
        nr_req_free(r);
        t->req = NULL;
    }
    return st;
}

static void wait_queued(nr_model_t *m, uint64_t n)
{
    while (nr_sched_queued(m->sched) != n)
        usleep(200);
}

/* Every successful response carries exactly its own request's data. */
static bool own_data(const treq_t *t)
{
    const nr_req_t *r = t->req;
    if (r->status || r->n_want != 1)
        return false;
    const nr_tensor_t *in = &r->inputs[0], *out = &r->outputs[0];
    return out->size == in->size && memcmp(out->data, t->data, in->size) == 0 &&
           out->dims[0] == in->dims[0];
}

static void free_reqs(treq_t *t, int n)
{
    for (int i = 0; i < n; i++) {
        nr_req_free(t[i].req);
        t[i].req = NULL;
    }
}

static uint64_t batch_count(nr_model_t *m, uint64_t size)
{
    nr_stats_snap_t s;
    nr_stats_snapshot(&m->stats, &s);
    uint64_t n = 0;
    for (uint32_t i = 0; i < s.n_batch; i++)
        if (s.batch[i].batch_size == size)
            n = s.batch[i].compute_infer.count;
    nr_stats_snap_free(&s);
    return n;
}

static void snapshot(nr_model_t *m, nr_stats_snap_t *s)
{
    nr_stats_snapshot(&m->stats, s);
    nr_stats_snap_free(s); /* only the scalar counters are read */
}

/* ---- batch formation ---- */

NR_TEST(eight_requests_long_delay_run_as_one_batch_of_8)
{
    gate_reset(false);
    nr_model_t *m = load_model("dynamic_batching { max_queue_delay_microseconds: 60000000 }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[8];
    for (int i = 0; i < 8; i++)
        ASSERT_OK(submit(m, &t[i], &w, i, 1, 4, 0, 0));
    wait_done(&w, 8);
    EXPECT_EQ_INT(nexec(), 1);
    EXPECT_EQ_U64(tb_exec_log[0].size, 8);
    for (int i = 0; i < 8; i++) {
        EXPECT_TRUE(own_data(&t[i]));
        EXPECT_EQ_INT(tb_exec_log[0].first[i], i * 1000); /* arrival order */
    }
    nr_stats_snap_t s;
    snapshot(m, &s);
    EXPECT_EQ_U64(s.execution_count, 1);
    EXPECT_EQ_U64(s.inference_count, 8);
    EXPECT_EQ_U64(s.success.count, 8);
    EXPECT_EQ_U64(s.queue.count, 8);
    EXPECT_EQ_U64(batch_count(m, 8), 1);
    EXPECT_EQ_U64(batch_count(m, 1), 0);
    free_reqs(t, 8);
    unload_model(m);
}

/* Instance busy with request 0; `n` more requests of batch `bs` queue; then it
 * is released. Returns the model (still loaded) for more checks. */
static nr_model_t *held_then_released(const char *cfg, treq_t *t, waiter_t *w, int n, int64_t bs,
                                      int64_t bs0)
{
    gate_reset(true);
    nr_model_t *m = load_model(cfg);
    if (!m)
        abort();
    if (submit(m, &t[0], w, 0, bs0, 4, 0, 0))
        abort();
    wait_execs(1, 1);
    for (int i = 1; i <= n; i++)
        if (submit(m, &t[i], w, i, bs, 4, 0, 0))
            abort();
    wait_queued(m, (uint64_t)n);
    gate_open_all();
    return m;
}

NR_TEST(preferred_sizes_4_8_with_6_waiting_send_4_then_2)
{
    waiter_t w = WAITER;
    treq_t t[7];
    nr_model_t *m = held_then_released("dynamic_batching { preferred_batch_size: [ 4, 8 ] }\n"
                                       "instance_group [ { count: 1 kind: KIND_CPU } ]",
                                       t, &w, 6, 1, 1);
    wait_done(&w, 7);
    ASSERT_EQ_INT(nexec(), 3);
    EXPECT_EQ_U64(tb_exec_log[0].size, 1);
    EXPECT_EQ_U64(tb_exec_log[1].size, 4); /* the largest preferred size reachable */
    EXPECT_EQ_U64(tb_exec_log[2].size, 2); /* delay 0: the rest at once */
    EXPECT_EQ_INT(tb_exec_log[1].first[0], 1000);
    EXPECT_EQ_INT(tb_exec_log[2].first[0], 5000);
    for (int i = 0; i < 7; i++)
        EXPECT_TRUE(own_data(&t[i]));
    EXPECT_EQ_U64(batch_count(m, 4), 1);
    EXPECT_EQ_U64(batch_count(m, 2), 1);
    free_reqs(t, 7);
    unload_model(m);
}

NR_TEST(preferred_size_with_long_delay_waits_for_the_rest)
{
    waiter_t w = WAITER;
    treq_t t[9];
    nr_model_t *m = held_then_released("dynamic_batching { preferred_batch_size: [ 4, 8 ] "
                                       "max_queue_delay_microseconds: 60000000 }\n"
                                       "instance_group [ { count: 1 kind: KIND_CPU } ]",
                                       t, &w, 6, 1, 4); /* 4: preferred, sent at once */
    wait_done(&w, 5);
    wait_queued(m, 2); /* 2 left: below every preferred size, delay not passed */
    EXPECT_EQ_INT(nexec(), 2);
    EXPECT_EQ_INT(done_count(&w), 5);
    ASSERT_OK(submit(m, &t[7], &w, 7, 1, 4, 0, 0));
    ASSERT_OK(submit(m, &t[8], &w, 8, 1, 4, 0, 0)); /* 4 waiting = preferred: sent */
    wait_done(&w, 9);
    EXPECT_EQ_INT(nexec(), 3);
    EXPECT_EQ_U64(tb_exec_log[2].size, 4);
    for (int i = 0; i < 9; i++)
        EXPECT_TRUE(own_data(&t[i]));
    free_reqs(t, 9);
    unload_model(m);
}

NR_TEST(max_batch_size_caps_batches_and_requests_count_their_batch)
{
    waiter_t w = WAITER;
    treq_t t[6];
    /* 5 requests of batch 3 waiting, max_batch_size 8: 3+3 (9 would exceed), 3+3, 3 */
    nr_model_t *m = held_then_released("dynamic_batching { }\n"
                                       "instance_group [ { count: 1 kind: KIND_CPU } ]",
                                       t, &w, 5, 3, 1);
    wait_done(&w, 6);
    ASSERT_EQ_INT(nexec(), 4);
    EXPECT_EQ_U64(tb_exec_log[0].size, 1);
    EXPECT_EQ_U64(tb_exec_log[1].size, 6);
    EXPECT_EQ_INT(tb_exec_log[1].n, 2);
    EXPECT_EQ_U64(tb_exec_log[2].size, 6);
    EXPECT_EQ_U64(tb_exec_log[3].size, 3);
    for (int i = 0; i < 6; i++)
        EXPECT_TRUE(own_data(&t[i]));
    nr_stats_snap_t s;
    snapshot(m, &s);
    EXPECT_EQ_U64(s.inference_count, 16);
    EXPECT_EQ_U64(s.execution_count, 4);
    EXPECT_EQ_U64(batch_count(m, 6), 2);
    free_reqs(t, 6);
    unload_model(m);
}

static void mixed_shapes(const char *input, const char *cfg, int expect_execs)
{
    gate_reset(true);
    nr_model_t *m = load_model_io(input, cfg);
    if (!m)
        abort();
    waiter_t w = WAITER;
    treq_t t[5];
    static const int64_t widths[5] = {4, 4, 4, 5, 4};
    for (int i = 0; i < 5; i++) {
        if (submit(m, &t[i], &w, i, 1, widths[i], 0, 0))
            abort();
        if (i == 0)
            wait_execs(1, 1);
    }
    wait_queued(m, 4);
    gate_open_all();
    wait_done(&w, 5);
    EXPECT_EQ_INT(nexec(), expect_execs);
    for (int i = 0; i < 5; i++)
        EXPECT_TRUE(own_data(&t[i]));
    free_reqs(t, 5);
    unload_model(m);
}

NR_TEST(differing_shapes_are_not_batched_together)
{
    /* [1,4] [1,4] | [1,5] | [1,4]: the scan stops at the odd one, never skips it */
    mixed_shapes(INPUT, "dynamic_batching { }\ninstance_group [ { count: 1 kind: KIND_CPU } ]", 4);
    EXPECT_EQ_U64(tb_exec_log[1].size, 2);
    EXPECT_EQ_INT(tb_exec_log[2].first[0], 3000);
    EXPECT_EQ_U64(tb_exec_log[2].size, 1);
    EXPECT_EQ_INT(tb_exec_log[3].first[0], 4000);
}

NR_TEST(ragged_inputs_batch_across_shapes)
{
    mixed_shapes(RAGGED, "dynamic_batching { }\ninstance_group [ { count: 1 kind: KIND_CPU } ]", 2);
    EXPECT_EQ_U64(tb_exec_log[1].size, 4);
}

NR_TEST(priority_levels_serve_highest_first_fifo_within_a_level)
{
    gate_reset(true);
    nr_model_t *m = load_model("max_batch_size: 2\n"
                               "dynamic_batching { priority_levels: 3 default_priority_level: 2 }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[7];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0));
    wait_execs(1, 1);
    /* tag: priority. 0 and out-of-range priorities use the default level 2 */
    static const uint32_t prio[7] = {0, 3, 0, 1, 9, 1, 2};
    for (int i = 1; i < 7; i++)
        ASSERT_OK(submit(m, &t[i], &w, i, 1, 4, prio[i], 0));
    wait_queued(m, 6);
    gate_open_all();
    wait_done(&w, 7);
    ASSERT_EQ_INT(nexec(), 4);
    /* level 1: 3, 5; level 2: 2, 4, 6; level 3: 1 */
    static const int expect[4][2] = {{3, 5}, {2, 4}, {6, 1}};
    for (int e = 0; e < 3; e++)
        for (int k = 0; k < 2; k++)
            EXPECT_EQ_INT(tb_exec_log[e + 1].first[k], expect[e][k] * 1000);
    for (int i = 0; i < 7; i++)
        EXPECT_TRUE(own_data(&t[i]));
    free_reqs(t, 7);
    unload_model(m);
}

/* ---- queue policies ---- */

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0) {
    }
}

NR_TEST(queue_timeout_reject_fails_expired_requests_without_running_them)
{
    gate_reset(true);
    /* level 1 has no timeout (request 0 must reach the backend); level 2: 1 ms */
    nr_model_t *m = load_model("dynamic_batching { priority_levels: 2 default_priority_level: 2 "
                               "default_queue_policy { timeout_action: REJECT "
                               "default_timeout_microseconds: 1000 } "
                               "priority_queue_policy { key: 1 value { } } }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[3];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 1, 0));
    wait_execs(1, 1);
    ASSERT_OK(submit(m, &t[1], &w, 1, 1, 4, 0, 0));
    ASSERT_OK(submit(m, &t[2], &w, 2, 1, 4, 0, 0));
    sleep_ms(20); /* both are now past their 1 ms */
    gate_open_all();
    wait_done(&w, 3);
    EXPECT_EQ_INT(nexec(), 1);
    EXPECT_NULL(t[0].req->status);
    for (int i = 1; i < 3; i++) {
        ASSERT_NOT_NULL(t[i].req->status);
        EXPECT_EQ_INT(t[i].req->status->code, NR_UNAVAILABLE);
        EXPECT_STREQ(t[i].req->status->msg, "Request timeout expired");
        EXPECT_EQ_INT(nr_status_http(t[i].req->status), 503);
    }
    nr_stats_snap_t s;
    snapshot(m, &s);
    EXPECT_EQ_U64(s.success.count, 1);
    EXPECT_EQ_U64(s.fail.count, 2);
    EXPECT_EQ_U64(s.execution_count, 1);
    EXPECT_EQ_U64(s.inference_count, 1);
    EXPECT_EQ_U64(nr_model_inflight(m), 0);
    free_reqs(t, 3);
    unload_model(m);
}

NR_TEST(queue_timeout_wakes_an_idle_instance_waiting_for_the_delay)
{
    gate_reset(false);
    nr_model_t *m = load_model("dynamic_batching { max_queue_delay_microseconds: 60000000 "
                               "default_queue_policy { default_timeout_microseconds: 2000 } }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[1];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0));
    wait_done(&w, 1); /* long before the 60 s delay */
    ASSERT_NOT_NULL(t[0].req->status);
    EXPECT_STREQ(t[0].req->status->msg, "Request timeout expired");
    EXPECT_EQ_INT(nexec(), 0);
    free_reqs(t, 1);
    unload_model(m);
}

NR_TEST(queue_timeout_delay_moves_expired_requests_behind_the_others)
{
    gate_reset(true);
    /* level default 60 s; request 1 overrides to 1 ms (allowed, shorter) */
    nr_model_t *m = load_model("max_batch_size: 2\n"
                               "dynamic_batching { default_queue_policy { timeout_action: DELAY "
                               "default_timeout_microseconds: 60000000 allow_timeout_override: true } }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[4];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0));
    wait_execs(1, 1);
    ASSERT_OK(submit(m, &t[1], &w, 1, 1, 4, 0, 1000));
    ASSERT_OK(submit(m, &t[2], &w, 2, 1, 4, 0, 0));
    ASSERT_OK(submit(m, &t[3], &w, 3, 1, 4, 0, 0));
    sleep_ms(20);
    gate_open_all();
    wait_done(&w, 4);
    ASSERT_EQ_INT(nexec(), 3);
    EXPECT_EQ_INT(tb_exec_log[1].first[0], 2000);
    EXPECT_EQ_INT(tb_exec_log[1].first[1], 3000);
    EXPECT_EQ_INT(tb_exec_log[2].first[0], 1000); /* delayed, still executed */
    for (int i = 0; i < 4; i++)
        EXPECT_TRUE(own_data(&t[i]));
    free_reqs(t, 4);
    unload_model(m);
}

static void override_case(const char *policy, bool expect_rejected)
{
    char cfg[512];
    snprintf(cfg, sizeof(cfg), "dynamic_batching { default_queue_policy { %s } }\n"
             "instance_group [ { count: 1 kind: KIND_CPU } ]", policy);
    gate_reset(true);
    nr_model_t *m = load_model(cfg);
    if (!m)
        abort();
    waiter_t w = WAITER;
    treq_t t[3];
    if (submit(m, &t[0], &w, 0, 1, 4, 0, 0))
        abort();
    wait_execs(1, 1);
    if (submit(m, &t[1], &w, 1, 1, 4, 0, 1000) || submit(m, &t[2], &w, 2, 1, 4, 0, 0))
        abort();
    sleep_ms(20);
    gate_open_all();
    wait_done(&w, 3);
    EXPECT_EQ_INT(t[1].req->status != NULL, expect_rejected);
    if (t[1].req->status)
        EXPECT_STREQ(t[1].req->status->msg, "Request timeout expired");
    EXPECT_TRUE(own_data(&t[2]));
    free_reqs(t, 3);
    unload_model(m);
}

NR_TEST(allow_timeout_override_uses_a_shorter_request_timeout)
{
    override_case("default_timeout_microseconds: 60000000 allow_timeout_override: true", true);
    /* not allowed: the request's timeout is ignored */
    override_case("default_timeout_microseconds: 60000000", false);
    /* Triton: with no default timeout the override has no effect */
    override_case("allow_timeout_override: true", false);
}

NR_TEST(max_queue_size_rejects_exactly_the_excess)
{
    gate_reset(true);
    nr_model_t *m = load_model("dynamic_batching { default_queue_policy { max_queue_size: 3 } }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[6];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0)); /* executing: not in the queue */
    wait_execs(1, 1);
    for (int i = 1; i <= 3; i++)
        ASSERT_OK(submit(m, &t[i], &w, i, 1, 4, 0, 0));
    nr_req_t *r = make_req(m, &t[4], &w, 4, 1, 4, 0, 0);
    EXPECT_OK(nr_req_set_id(r, "x-4", 3));
    nr_status_t *st = nr_model_submit(m, r);
    ASSERT_NOT_NULL(st);
    EXPECT_EQ_INT(nr_status_http(st), 503);
    EXPECT_STATUS(st, NR_UNAVAILABLE, "[request id: x-4] Exceeds maximum queue size");
    nr_req_free(r);
    EXPECT_STATUS(submit(m, &t[5], &w, 5, 1, 4, 0, 0), NR_UNAVAILABLE,
                  "[request id: <id_unknown>] Exceeds maximum queue size");
    gate_open_all();
    wait_done(&w, 4);
    for (int i = 0; i < 4; i++)
        EXPECT_TRUE(own_data(&t[i]));
    nr_stats_snap_t s;
    snapshot(m, &s);
    EXPECT_EQ_U64(s.success.count, 4);
    EXPECT_EQ_U64(s.fail.count, 2);
    free_reqs(t, 4);
    unload_model(m);
}

NR_TEST(max_queue_size_is_per_priority_level)
{
    gate_reset(true);
    nr_model_t *m = load_model("dynamic_batching { priority_levels: 2 default_priority_level: 2 "
                               "default_queue_policy { max_queue_size: 1 } "
                               "priority_queue_policy { key: 1 value { max_queue_size: 2 } } }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[6];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0));
    wait_execs(1, 1);
    ASSERT_OK(submit(m, &t[1], &w, 1, 1, 4, 2, 0));
    EXPECT_STATUS(submit(m, &t[2], &w, 2, 1, 4, 2, 0), NR_UNAVAILABLE, NULL);
    ASSERT_OK(submit(m, &t[3], &w, 3, 1, 4, 1, 0));
    ASSERT_OK(submit(m, &t[4], &w, 4, 1, 4, 1, 0));
    EXPECT_STATUS(submit(m, &t[5], &w, 5, 1, 4, 1, 0), NR_UNAVAILABLE, NULL);
    gate_open_all();
    wait_done(&w, 4);
    ASSERT_EQ_INT(nexec(), 2);
    EXPECT_EQ_INT(tb_exec_log[1].first[0], 3000);
    EXPECT_EQ_INT(tb_exec_log[1].first[2], 1000);
    nr_req_free(t[0].req);
    nr_req_free(t[1].req);
    nr_req_free(t[3].req);
    nr_req_free(t[4].req);
    unload_model(m);
}

/* ---- instances ---- */

NR_TEST(two_instances_execute_two_batches_at_once)
{
    gate_reset(true);
    nr_model_t *m = load_model("dynamic_batching { }\n"
                               "instance_group [ { name: \"g\" count: 2 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[4];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0));
    wait_execs(1, 1);
    for (int i = 1; i < 4; i++)
        ASSERT_OK(submit(m, &t[i], &w, i, 1, 4, 0, 0));
    /* the second instance forms the next batch while the first still executes;
     * it may take 1..3 of them, depending on when it wakes: wait until all 3 are
     * executing or queued behind a running second batch */
    wait_execs(2, 2);
    EXPECT_TRUE(strcmp(tb_exec_log[0].inst, tb_exec_log[1].inst) != 0);
    gate_open_all();
    wait_done(&w, 4);
    for (int i = 0; i < 4; i++)
        EXPECT_TRUE(own_data(&t[i]));
    /* instance threads carry the instance names */
    for (int e = 0; e < nexec(); e++) {
        EXPECT_TRUE(strcmp(tb_exec_log[e].inst, "g_0") == 0 || strcmp(tb_exec_log[e].inst, "g_1") == 0);
        EXPECT_STREQ(tb_exec_log[e].thread, tb_exec_log[e].inst);
    }
    free_reqs(t, 4);
    unload_model(m);
}

NR_TEST(several_groups_and_passive_instances_take_no_requests)
{
    gate_reset(false);
    nr_model_t *m = load_model("dynamic_batching { }\n"
                               "instance_group [ { name: \"a\" count: 2 kind: KIND_CPU },"
                               " { name: \"p\" count: 1 kind: KIND_CPU passive: true },"
                               " { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    ASSERT_EQ_INT(m->n_instances, 4);
    EXPECT_STREQ(nr_inst_name(m->instances[0]), "a_0");
    EXPECT_STREQ(nr_inst_name(m->instances[2]), "p_0");
    EXPECT_STREQ(nr_inst_name(m->instances[3]), "m_2_0");
    waiter_t w = WAITER;
    treq_t t[32];
    for (int i = 0; i < 32; i++)
        ASSERT_OK(submit(m, &t[i], &w, i, 1, 4, 0, 0));
    wait_done(&w, 32);
    for (int e = 0; e < nexec() && e < MAX_EXEC; e++)
        EXPECT_TRUE(strcmp(tb_exec_log[e].inst, "p_0") != 0);
    for (int i = 0; i < 32; i++)
        EXPECT_TRUE(own_data(&t[i]));
    free_reqs(t, 32);
    unload_model(m);
}

/* ---- preserve_ordering ---- */

static void ordering_case(bool preserve)
{
    char cfg[512];
    snprintf(cfg, sizeof(cfg), "dynamic_batching { preserve_ordering: %s }\n"
             "instance_group [ { count: 2 kind: KIND_CPU } ]", preserve ? "true" : "false");
    gate_reset(true);
    nr_model_t *m = load_model(cfg);
    if (!m)
        abort();
    waiter_t w = WAITER;
    treq_t t[3];
    if (submit(m, &t[0], &w, 0, 1, 4, 0, 0))
        abort();
    wait_execs(1, 1); /* instance X runs [0] */
    if (submit(m, &t[1], &w, 1, 1, 4, 0, 0))
        abort();
    wait_execs(2, 2); /* instance Y runs [1] */
    gate_open(1);     /* Y finishes first */
    if (submit(m, &t[2], &w, 2, 1, 4, 0, 0))
        abort();
    wait_execs(3, 2); /* Y has handed [1] back and now runs [2]: X still holds [0] */
    if (preserve) {
        EXPECT_EQ_INT(done_count(&w), 0); /* 1 waits for 0 */
    } else {
        wait_done(&w, 1);
        EXPECT_EQ_INT(w.order[0], 1);
    }
    gate_open(0);
    gate_open(2);
    wait_done(&w, 3);
    if (preserve)
        for (int i = 0; i < 3; i++)
            EXPECT_EQ_INT(w.order[i], i);
    for (int i = 0; i < 3; i++)
        EXPECT_TRUE(own_data(&t[i]));
    free_reqs(t, 3);
    unload_model(m);
}

NR_TEST(preserve_ordering_returns_responses_in_arrival_order)
{
    ordering_case(true);
}

NR_TEST(without_preserve_ordering_a_later_batch_can_answer_first)
{
    ordering_case(false);
}

NR_TEST(preserve_ordering_keeps_rejected_requests_in_order)
{
    gate_reset(true);
    nr_model_t *m = load_model("dynamic_batching { preserve_ordering: true default_queue_policy { "
                               "default_timeout_microseconds: 60000000 allow_timeout_override: true } }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[3];
    ASSERT_OK(submit(m, &t[0], &w, 0, 1, 4, 0, 0));
    wait_execs(1, 1);
    ASSERT_OK(submit(m, &t[1], &w, 1, 1, 4, 0, 1000));
    sleep_ms(20);
    gate_open_all();
    wait_done(&w, 2);
    EXPECT_EQ_INT(w.order[0], 0);
    EXPECT_EQ_INT(w.order[1], 1);
    EXPECT_NOT_NULL(t[1].req->status);
    free_reqs(t, 2);
    unload_model(m);
}

NR_TEST(stop_drains_the_queue_without_waiting_for_the_delay)
{
    gate_reset(false);
    nr_model_t *m = load_model("dynamic_batching { max_queue_delay_microseconds: 60000000 }\n"
                               "instance_group [ { count: 1 kind: KIND_CPU } ]");
    ASSERT_NOT_NULL(m);
    waiter_t w = WAITER;
    treq_t t[3];
    for (int i = 0; i < 3; i++)
        ASSERT_OK(submit(m, &t[i], &w, i, 1, 4, 0, 0));
    nr_sched_stop(m->sched);
    wait_done(&w, 3);
    EXPECT_EQ_INT(nexec(), 1);
    for (int i = 0; i < 3; i++)
        EXPECT_TRUE(own_data(&t[i]));
    treq_t late;
    EXPECT_STATUS(submit(m, &late, &w, 9, 1, 4, 0, 0), NR_UNAVAILABLE,
                  "[request id: <id_unknown>] Server is stopping");
    for (int i = 0; i < 3; i++)
        nr_req_free(t[i].req);
    unload_model(m);
}

NR_TEST_MAIN()
