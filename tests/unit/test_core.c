/* test_core.c - the core without HTTP or ONNX Runtime: request validation
 * texts, the scheduler's batching, instance threads and statistics, driven by
 * a test backend whose execution the test can hold and release.
 */
#include "../../src/common/alloc.h"
#include "../../src/common/buf.h"
#include "../../src/core/model.h"
#include "nr_test.h"
#include "test_backend.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ---- helpers ---- */
static nr_model_t *load_model(const char *pbtxt)
{
    return tb_load_model_text(pbtxt);
}

static const char SIMPLE[] =
    "name: \"simple\"\nbackend: \"onnxruntime\"\nplatform: \"onnxruntime_onnx\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 16 ] },"
    "         { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";

static int32_t zeros[8 * 16];

static nr_status_t *add(nr_req_t *r, const char *name, nr_dtype_t dt, int64_t b, int64_t n,
                        size_t size)
{
    int64_t dims[2] = {b, n};
    return nr_req_add_input(r, name, strlen(name), dt, dims, 2, zeros, size);
}

static char *submit_error(nr_model_t *m, nr_req_t *r)
{
    nr_status_t *st = nr_model_submit(m, r);
    char *msg = st ? nr_strdup(st->msg) : NULL;
    nr_status_free(st);
    return msg;
}

/* ---- validation texts (Triton 2.51's wording) ---- */
NR_TEST(validate_missing_input)
{
    nr_model_t *m = load_model(SIMPLE);
    ASSERT_TRUE(m != NULL);
    nr_req_t *r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 1, 16, 64));
    char *msg = submit_error(m, r);
    EXPECT_STREQ(msg, "[request id: <id_unknown>] expected 2 inputs but got 1 inputs for model "
                      "'simple'. Got input(s) ['INPUT0'], but missing required input(s) "
                      "['INPUT1']. Please provide all required input(s).");
    free(msg);
    nr_req_free(r);
    unload_model(m);
}

NR_TEST(validate_extra_input_and_id)
{
    nr_model_t *m = load_model(SIMPLE);
    ASSERT_TRUE(m != NULL);
    nr_req_t *r = nr_req_new(m);
    EXPECT_OK(nr_req_set_id(r, "abc-1", 5));
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 1, 16, 64));
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 1, 16, 64));
    ASSERT_NULL(add(r, "INPUT2", NR_TYPE_INT32, 1, 16, 64));
    char *msg = submit_error(m, r);
    EXPECT_STREQ(msg, "[request id: abc-1] expected 2 inputs but got 3 inputs for model 'simple'. "
                      "Got input(s) ['INPUT2','INPUT1','INPUT0'], but missing required input(s) ]. "
                      "Please provide all required input(s).");
    free(msg);
    nr_req_free(r);
    unload_model(m);
}

NR_TEST(validate_duplicate_dtype_shape_batch)
{
    nr_model_t *m = load_model(SIMPLE);
    ASSERT_TRUE(m != NULL);
    nr_req_t *r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 1, 16, 64));
    nr_status_t *st = add(r, "INPUT0", NR_TYPE_INT32, 1, 16, 64);
    ASSERT_TRUE(st != NULL);
    EXPECT_STREQ(st->msg, "[request id: <id_unknown>] input 'INPUT0' already exists in request");
    nr_status_free(st);
    nr_req_free(r);

    r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_FP32, 1, 16, 64));
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 1, 16, 64));
    char *msg = submit_error(m, r);
    EXPECT_STREQ(msg, "[request id: <id_unknown>] inference input 'INPUT0' data-type is 'FP32', "
                      "but model 'simple' expects 'INT32'");
    free(msg);
    nr_req_free(r);

    r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 1, 15, 60));
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 1, 16, 64));
    msg = submit_error(m, r);
    EXPECT_TRUE(msg && strstr(msg, "[request id: <id_unknown>] unexpected shape for input 'INPUT0' "
                                   "for model 'simple'. Expected [-1,16], got [1,15]. NOTE: ") == msg);
    free(msg);
    nr_req_free(r);

    r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 9, 16, 9 * 64));
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 9, 16, 9 * 64));
    msg = submit_error(m, r);
    EXPECT_STREQ(msg, "[request id: <id_unknown>] inference request batch-size must be <= 8 for "
                      "'simple'");
    free(msg);
    nr_req_free(r);

    r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 1, 16, 64));
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 2, 16, 128));
    msg = submit_error(m, r);
    EXPECT_STREQ(msg, "[request id: <id_unknown>] input 'INPUT0' batch size does not match other "
                      "inputs for 'simple'");
    free(msg);
    nr_req_free(r);

    r = nr_req_new(m);
    ASSERT_NULL(add(r, "INPUT0", NR_TYPE_INT32, 1, 16, 64));
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 1, 16, 68));
    msg = submit_error(m, r);
    EXPECT_STREQ(msg, "[request id: <id_unknown>] input byte size mismatch for input 'INPUT1' for "
                      "model 'simple'. Expected 64, got 68");
    free(msg);
    nr_req_free(r);

    r = nr_req_new(m);
    st = nr_req_add_output(r, "OUTPUT9", 7);
    ASSERT_TRUE(st != NULL);
    EXPECT_STREQ(st->msg, "unexpected inference output 'OUTPUT9' for model 'simple'");
    nr_status_free(st);
    nr_req_free(r);
    unload_model(m);
}

NR_TEST(validate_overflowing_shape)
{
    nr_model_t *m = load_model("name: \"id\" backend: \"onnxruntime\" platform: \"onnxruntime_onnx\" max_batch_size: 8 input [{name: \"I\" data_type: "
                               "TYPE_FP32 dims: [-1]}] output [{name: \"O\" data_type: TYPE_FP32 "
                               "dims: [-1]}]");
    ASSERT_TRUE(m != NULL);
    int64_t shapes[][2] = {{1, 4294967296LL},
                           {1, INT64_MAX}, {1, 1LL << 62}};
    for (size_t i = 0; i < 3; i++) {
        nr_req_t *r = nr_req_new(m);
        ASSERT_NULL(nr_req_add_input(r, "I", 1, NR_TYPE_FP32, shapes[i], 2, zeros, 4));
        char *msg = submit_error(m, r);
        EXPECT_TRUE(msg != NULL);
        free(msg);
        nr_req_free(r);
    }
    unload_model(m);
}

/* ---- name lookups: O(1) each, so a request costs O(its size) ---- */

/* 200,000 unknown input names: each is looked up and checked against the
 * others as it arrives. Pairwise matching made this minutes of CPU; now the
 * whole test takes a fraction of a second. Texts as for a handful. */
NR_TEST(many_unknown_inputs_cost_linear_time)
{
    enum { N = 200000 };
    nr_model_t *m = load_model(SIMPLE);
    ASSERT_TRUE(m != NULL);
    nr_req_t *r = nr_req_new(m);
    char name[16];
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "X%d", i);
        ASSERT_NULL(add(r, name, NR_TYPE_INT32, 1, 16, 64));
    }
    ASSERT_NULL(add(r, "INPUT1", NR_TYPE_INT32, 1, 16, 64));
    nr_status_t *st = add(r, "X123456", NR_TYPE_INT32, 1, 16, 64); /* unknown, given before */
    ASSERT_TRUE(st != NULL);
    EXPECT_STREQ(st->msg, "[request id: <id_unknown>] input 'X123456' already exists in request");
    nr_status_free(st);
    st = add(r, "INPUT1", NR_TYPE_INT32, 1, 16, 64); /* known, given before */
    ASSERT_TRUE(st != NULL);
    EXPECT_STREQ(st->msg, "[request id: <id_unknown>] input 'INPUT1' already exists in request");
    nr_status_free(st);
    char *msg = submit_error(m, r);
    ASSERT_TRUE(msg != NULL);
    const char *head = "[request id: <id_unknown>] expected 2 inputs but got 200001 inputs for "
                       "model 'simple'. Got input(s) ['INPUT1','X199999','X199998',";
    const char *tail = ",'X1','X0'], but missing required input(s) ['INPUT0']. Please provide "
                       "all required input(s).";
    EXPECT_TRUE(strncmp(msg, head, strlen(head)) == 0);
    EXPECT_TRUE(strlen(msg) > strlen(tail) &&
                strcmp(msg + strlen(msg) - strlen(tail), tail) == 0);
    free(msg);
    nr_req_free(r);
    unload_model(m);
}

/* A model with 2,000 inputs and 2,000 outputs, every one of them named by a
 * request (outputs in reverse, some twice): found by name, the outputs
 * reported sorted by name, in time linear in the request. */
NR_TEST(wide_model_names_resolve_by_index)
{
    enum { N = 2000 };
    nr_buf_t cfg;
    nr_buf_init(&cfg);
    nr_buf_puts(&cfg, "name: \"wide\" backend: \"onnxruntime\" platform: \"onnxruntime_onnx\" "
                      "max_batch_size: 0 input [");
    for (int i = 0; i < N; i++)
        nr_buf_printf(&cfg, "%s{name: \"I%d\" data_type: TYPE_INT32 dims: [1]}", i ? "," : "", i);
    nr_buf_puts(&cfg, "] output [");
    for (int i = 0; i < N; i++)
        nr_buf_printf(&cfg, "%s{name: \"O%d\" data_type: TYPE_INT32 dims: [1]}", i ? "," : "", i);
    nr_buf_puts(&cfg, "]");
    nr_model_t *m = load_model(cfg.data);
    nr_buf_free(&cfg);
    ASSERT_TRUE(m != NULL);
    nr_req_t *r = nr_req_new(m);
    char name[16];
    int64_t one = 1;
    for (int i = 0; i < N; i++) {
        snprintf(name, sizeof(name), "I%d", i);
        ASSERT_NULL(nr_req_add_input(r, name, strlen(name), NR_TYPE_INT32, &one, 1, zeros, 4));
    }
    for (int i = N; i-- > 0;) {
        snprintf(name, sizeof(name), "O%d", i);
        ASSERT_NULL(nr_req_add_output(r, name, strlen(name)));
        if (i % 3 == 0)
            ASSERT_NULL(nr_req_add_output(r, name, strlen(name))); /* reported once */
    }
    ASSERT_OK(nr_req_validate(r));
    ASSERT_EQ_U64(r->n_want, N);
    size_t unsorted = 0;
    for (size_t k = 1; k < r->n_want; k++)
        unsorted += strcmp(m->cfg->output[r->want[k - 1]].name, m->cfg->output[r->want[k]].name) >= 0;
    EXPECT_EQ_U64(unsorted, 0);
    EXPECT_EQ_INT(nr_req_input_index(r, "I1999", 5), 1999);
    EXPECT_EQ_INT(nr_req_input_index(r, "I2000", 5), -1);
    EXPECT_EQ_INT(nr_model_output_index(m, "O7", 2), 7);
    nr_req_free(r);
    unload_model(m);
}

/* ---- execution through instances ---- */
typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int done;
} waiter_t;

static void on_done(nr_req_t *r, void *arg)
{
    waiter_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->done++;
    pthread_cond_broadcast(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static void wait_done(waiter_t *w, int n)
{
    pthread_mutex_lock(&w->mu);
    while (w->done < n)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
}

static nr_req_t *good_req(nr_model_t *m, waiter_t *w, int32_t *buf)
{
    nr_req_t *r = nr_req_new(m);
    int64_t dims[2] = {1, 16};
    if (nr_req_add_input(r, "INPUT0", 6, NR_TYPE_INT32, dims, 2, buf, 64) ||
        nr_req_add_input(r, "INPUT1", 6, NR_TYPE_INT32, dims, 2, buf, 64))
        abort();
    r->done = on_done;
    r->done_arg = w;
    return r;
}

static void run_held(const char *pbtxt, int n, uint64_t *first, uint64_t *second, int *nexec)
{
    nr_model_t *m = load_model(pbtxt);
    if (!m)
        abort();
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int32_t bufs[16][16];
    nr_req_t *reqs[16];
    gate_reset(true);
    for (int i = 0; i < n; i++) {
        for (int k = 0; k < 16; k++)
            bufs[i][k] = i * 100 + k;
        reqs[i] = good_req(m, &w, bufs[i]);
        nr_status_t *st = nr_model_submit(m, reqs[i]);
        if (st)
            abort();
        if (i == 0)
            wait_execs(1, 1); /* the instance holds request 0; the rest queue up */
    }
    gate_open_all();
    wait_done(&w, n);
    *first = tb_exec_log[0].size;
    *second = tb_exec_log[1].size;
    *nexec = tb_count();
    for (int i = 0; i < n; i++) {
        /* every response carries its own request's data, in name order */
        nr_req_t *r = reqs[i];
        if (r->status || r->n_want != 2 || strcmp(r->outputs[0].name, "OUTPUT0") ||
            memcmp(r->outputs[0].data, bufs[i], 64))
            abort();
        nr_req_free(r);
    }
    nr_stats_snap_t s;
    nr_stats_snapshot(&m->stats, &s);
    if (s.success.count != (uint64_t)n || s.inference_count != (uint64_t)n ||
        s.execution_count != (uint64_t)*nexec)
        abort();
    nr_stats_snap_free(&s);
    unload_model(m);
}

NR_TEST(default_scheduler_runs_one_request_per_execution)
{
    uint64_t a, b;
    int nexec;
    run_held(SIMPLE, 5, &a, &b, &nexec);
    EXPECT_EQ_INT(nexec, 5);
    EXPECT_EQ_INT(a, 1);
    EXPECT_EQ_INT(b, 1);
}

NR_TEST(dynamic_batching_combines_queued_requests)
{
    char cfg[1024];
    snprintf(cfg, sizeof(cfg), "%s dynamic_batching { }", SIMPLE);
    uint64_t a, b;
    int nexec;
    run_held(cfg, 7, &a, &b, &nexec);
    EXPECT_EQ_INT(nexec, 2);
    EXPECT_EQ_INT(a, 1);
    EXPECT_EQ_INT(b, 6);
}

NR_TEST(dynamic_batching_caps_at_max_batch_size)
{
    char cfg[1024];
    snprintf(cfg, sizeof(cfg), "%s dynamic_batching { }", SIMPLE);
    uint64_t a, b;
    int nexec;
    run_held(cfg, 12, &a, &b, &nexec); /* 1 held, then 8, then 3 */
    EXPECT_EQ_INT(nexec, 3);
    EXPECT_EQ_INT(b, 8);
    EXPECT_EQ_INT(tb_exec_log[2].size, 3);
}

/* With allow_inline, a request submitted while an instance is idle and nothing
 * is queued runs on the submitting thread and is done when submit returns. */
/* An instance whose thread cannot start fails the load (INTERNAL, the
 * system's reason) and leaves nothing behind: no queue, no instance, the
 * backend state unloaded. Before, the model was READY with no thread, and a
 * queued request waited for ever. pthread_create is made to fail by a
 * default stack size no address space holds (mmap: ENOMEM, so EAGAIN). */
NR_TEST(instance_thread_failure_fails_the_load)
{
    nr_model_config_t *cfg;
    ASSERT_OK(nr_cfg_parse(SIMPLE, strlen(SIMPLE), "test/config.pbtxt", &cfg));
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 2, 0);
    ASSERT_OK(nr_cfg_validate(cfg, cfg->name));
    nr_model_t *m = nr_calloc(1, sizeof(*m));
    atomic_init(&m->refs, 1u << 30); /* never released to 0: freed by the test */
    m->cfg = cfg;
    m->version = 1;
    m->backend = &test_backend;
    pthread_attr_t saved, huge;
    ASSERT_TRUE(pthread_getattr_default_np(&saved) == 0);
    pthread_attr_init(&huge);
    ASSERT_TRUE(pthread_attr_setstacksize(&huge, (size_t)1 << 50) == 0);
    ASSERT_TRUE(pthread_setattr_default_np(&huge) == 0);
    nr_status_t *st = nr_model_load(m, "dir", "dir/1/model", 1);
    pthread_setattr_default_np(&saved);
    pthread_attr_destroy(&huge);
    pthread_attr_destroy(&saved);
    EXPECT_STATUS(st, NR_INTERNAL,
                  "failed to start the thread of instance 'simple_0': Resource temporarily "
                  "unavailable");
    EXPECT_NULL(m->sched);
    EXPECT_NULL(m->instances);
    EXPECT_EQ_U64(m->n_instances, 0);
    EXPECT_NULL(m->backend_state);
    /* what the repository frees of a version that failed to load */
    nr_stats_destroy(&m->stats);
    nr_model_index_free(m);
    /* threads start again: the same model loads and serves */
    ASSERT_OK(nr_model_load(m, "dir", "dir/1/model", 1));
    EXPECT_EQ_U64(m->n_instances, 2);
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int32_t buf[16] = {7};
    gate_reset(false);
    m->allow_inline = false; /* through the queue and an instance thread */
    nr_req_t *r = good_req(m, &w, buf);
    ASSERT_OK(nr_model_submit(m, r));
    wait_done(&w, 1);
    EXPECT_NULL(r->status);
    nr_req_free(r);
    unload_model(m);
}

/* Submits requests (gate open) until one is done when submit returns, having run
 * on this thread: the instance thread parks on the idle stack shortly after
 * start, and is idle again afterwards. False if none did in 2,000 tries. */
static bool submit_until_inline(nr_model_t *m)
{
    int32_t buf[16] = {0};
    for (int attempt = 0; attempt < 2000; attempt++) {
        waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        nr_req_t *r = good_req(m, &w, buf);
        if (nr_model_submit(m, r))
            abort();
        pthread_mutex_lock(&w.mu);
        bool done_at_return = w.done == 1;
        pthread_mutex_unlock(&w.mu);
        wait_done(&w, 1);
        bool ran_inline = done_at_return &&
                          pthread_equal(tb_exec_log[(tb_count() - 1) % MAX_EXEC].tid, pthread_self());
        bool ok = r->status == NULL;
        nr_req_free(r);
        if (!ok)
            return false;
        if (ran_inline)
            return true;
        usleep(1000);
    }
    return false;
}

NR_TEST(inline_execution_on_idle_instance)
{
    nr_model_t *m = load_model(SIMPLE);
    ASSERT_TRUE(m != NULL);
    m->allow_inline = true;
    gate_open_all();
    EXPECT_TRUE(submit_until_inline(m));
    nr_stats_snap_t s;
    nr_stats_snapshot(&m->stats, &s);
    EXPECT_EQ_INT(s.success.count, s.execution_count);
    nr_stats_snap_free(&s);
    EXPECT_EQ_INT(nr_model_inflight(m), 0);
    unload_model(m);
}

/* Requests that queue while a submitting thread runs one inline on the only
 * instance run on that thread next, instead of waking the instance's thread
 * for each (at most a few: NR_MODEL_DRAIN_MAX). */
typedef struct {
    nr_model_t *m;
    nr_req_t *r;
    pthread_t tid;
} submitter_t;

static void *submit_one(void *arg)
{
    submitter_t *sb = arg;
    sb->tid = pthread_self();
    if (nr_model_submit(sb->m, sb->r))
        abort();
    return NULL;
}

/* The first of three requests runs inline on a thread of its own, with
 * inline_max_ns = limit, held at the gate for hold_us while the other two
 * queue behind it. Returns how many of the two ran on that thread after it. */
static int queued_behind_inline(uint64_t limit, useconds_t hold_us)
{
    nr_model_t *m = load_model(SIMPLE);
    if (m == NULL)
        abort();
    m->allow_inline = true;
    gate_open_all();
    if (!submit_until_inline(m)) /* the instance is idle: the next one borrows it */
        abort();
    gate_reset(true);
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
    int32_t vals[3][16] = {{1}, {2}, {3}};
    nr_req_t *r[3];
    for (int i = 0; i < 3; i++)
        r[i] = good_req(m, &w, vals[i]);
    r[0]->inline_max_ns = limit;
    submitter_t sb = {m, r[0]};
    pthread_t t;
    if (pthread_create(&t, NULL, submit_one, &sb) != 0)
        abort();
    wait_execs(1, 1); /* the first runs inline on t, held at the gate */
    EXPECT_TRUE(pthread_equal(tb_exec_log[0].tid, sb.tid));
    EXPECT_NULL(nr_model_submit(m, r[1])); /* the instance is borrowed: both queue */
    EXPECT_NULL(nr_model_submit(m, r[2]));
    EXPECT_EQ_INT(nr_model_queued(m), 2);
    usleep(hold_us);
    gate_open_all();
    pthread_join(t, NULL);
    wait_done(&w, 3);
    EXPECT_EQ_INT(tb_count(), 3);
    int on_t = 0;
    for (int e = 0; e < 3; e++) {
        EXPECT_EQ_INT(tb_exec_log[e].first[0], e + 1); /* in arrival order */
        on_t += e > 0 && pthread_equal(tb_exec_log[e].tid, sb.tid);
    }
    for (int i = 0; i < 3; i++) {
        EXPECT_NULL(r[i]->status);
        nr_req_free(r[i]);
    }
    EXPECT_EQ_INT(nr_model_inflight(m), 0);
    unload_model(m);
    return on_t;
}

NR_TEST(requests_queued_behind_an_inline_run_run_on_its_thread)
{
    EXPECT_EQ_INT(queued_behind_inline(0, 0), 2); /* no limit */
    /* within a 60 s limit (the test backend's mean is microseconds, so it runs inline) */
    EXPECT_EQ_INT(queued_behind_inline(60ull * 1000 * 1000 * 1000, 0), 2);
}

NR_TEST(a_borrower_past_its_inline_limit_leaves_the_queue_to_the_instance)
{
    /* held 50 ms at the gate against a 5 ms limit: the instance's thread runs the rest */
    EXPECT_EQ_INT(queued_behind_inline(5ull * 1000 * 1000, 50 * 1000), 0);
}

/* A snapshot never splits one execution's counters: perf_analyzer aborts when the
 * compute counts it reads differ. A reader snapshots in a loop while two threads
 * keep requests running on two instances. */
typedef struct {
    nr_model_t *m;
    atomic_bool stop;
    long snapshots, split;
} snap_reader_t;

static void *snap_loop(void *arg)
{
    snap_reader_t *rd = arg;
    while (!atomic_load(&rd->stop)) {
        nr_stats_snap_t s;
        nr_stats_snapshot(&rd->m->stats, &s);
        uint64_t in_batches = 0;
        for (uint32_t b = 0; b < s.n_batch; b++)
            in_batches += s.batch[b].compute_infer.count;
        if (s.compute_input.count != s.compute_infer.count ||
            s.compute_infer.count != s.compute_output.count ||
            s.success.count != s.compute_infer.count || s.inference_count != s.success.count ||
            in_batches != s.execution_count)
            rd->split++;
        rd->snapshots++;
        nr_stats_snap_free(&s);
    }
    return NULL;
}

static void *submit_loop(void *arg)
{
    nr_model_t *m = arg;
    int32_t buf[16] = {0};
    for (int i = 0; i < 3000; i++) {
        waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
        nr_req_t *r = good_req(m, &w, buf);
        if (nr_model_submit(m, r))
            abort();
        wait_done(&w, 1);
        nr_req_free(r);
    }
    return NULL;
}

NR_TEST(statistics_snapshot_is_consistent_under_load)
{
    char cfg[1024];
    snprintf(cfg, sizeof(cfg), "%s instance_group [ { count: 2 kind: KIND_CPU } ]", SIMPLE);
    nr_model_t *m = load_model(cfg);
    ASSERT_TRUE(m != NULL);
    gate_open_all();
    snap_reader_t rd = {.m = m};
    pthread_t reader, sub[2];
    pthread_create(&reader, NULL, snap_loop, &rd);
    for (int i = 0; i < 2; i++)
        pthread_create(&sub[i], NULL, submit_loop, m);
    for (int i = 0; i < 2; i++)
        pthread_join(sub[i], NULL);
    atomic_store(&rd.stop, true);
    pthread_join(reader, NULL);
    EXPECT_TRUE(rd.snapshots > 0);
    EXPECT_EQ_INT(rd.split, 0);
    nr_stats_snap_t s;
    nr_stats_snapshot(&m->stats, &s);
    EXPECT_EQ_INT(s.success.count, 6000);
    nr_stats_snap_free(&s);
    unload_model(m);
}

NR_TEST_MAIN()
