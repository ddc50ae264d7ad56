/* test_ensemble.c - the ensemble's graph scheduler (core/ensemble.c) on a real repository of
 * test-backend models, whose executions the test holds at a gate (test_backend.h): a diamond
 * fans out (its two middle steps run at once) and in (the last step starts only once both
 * are done), a step's failure ends the request with Triton's prefix and stops what depends on
 * it, only the steps the requested outputs need run, and with inline execution the whole graph
 * runs on the submitting thread.
 */
#include "../../src/common/alloc.h"
#include "../../src/core/repository.h"
#include "fs_util.h"
#include "nr_test.h"
#include "test_backend.h"

#include <stdlib.h>
#include <string.h>

/* ---- the backend: the gated test backend, failing in the models named by fail_model ---- */

static const char *fail_model; /* its executions fail each request ("step failed") */

static nr_status_t *ens_exec(void *is, nr_batch_t *b)
{
    nr_status_t *st = tb_exec(is, b);
    const tb_inst_t *ti = is;
    if (st == NULL && fail_model != NULL && strncmp(ti->name, fail_model, strlen(fail_model)) == 0)
        for (size_t i = 0; i < b->n; i++) {
            nr_batch_item_t *it = b->items[i];
            for (size_t k = 0; k < it->n_want; k++) {
                nr_hold_unref(it->outputs[k].hold);
                memset(&it->outputs[k], 0, sizeof(it->outputs[k]));
            }
            it->status = nr_status_new(NR_INTERNAL, "step failed in %s", ti->name);
        }
    return st;
}

static const nr_backend_t ens_backend = {"test", NR_BACKEND_ABI_VERSION, NULL, tb_load, tb_inst,
                                         ens_exec, tb_inst_destroy, tb_unload};

static const nr_backend_t *find_backend(const char *name)
{
    return strcmp(name, "test") == 0 ? &ens_backend : NULL;
}

/* ---- the repository ---- */

/* A test-backend model: identity of IN (and IN2, ignored) to OUT, one instance. */
#define STEP_MODEL(name, extra_input)                                                        \
    "name: \"" name "\"\nbackend: \"test\"\ndefault_model_filename: \"model.test\"\n"        \
    "max_batch_size: 0\ninput [ { name: \"IN\" data_type: TYPE_INT32 dims: [ 1 ] }" extra_input \
    " ]\noutput [ { name: \"OUT\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"                    \
    "instance_group [ { count: 1 kind: KIND_CPU } ]\n"

#define STEP(model, in, out)                                                                  \
    "{ model_name: \"" model "\" model_version: -1 " in " output_map { key: \"OUT\" value: \"" \
    out "\" } }"
#define IN(key, value) "input_map { key: \"" key "\" value: \"" value "\" } "

/* a -> (b, c) -> d, and a second output straight from b */
static const char *DIAMOND =
    "name: \"diamond\"\nplatform: \"ensemble\"\nmax_batch_size: 0\n"
    "input [ { name: \"E_IN\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
    "output [ { name: \"E_OUT\" data_type: TYPE_INT32 dims: [ 1 ] },"
    " { name: \"E_B\" data_type: TYPE_INT32 dims: [ 1 ] } ]\n"
    "ensemble_scheduling { step [ " STEP("m_a", IN("IN", "E_IN"), "t") ", "
    "{ model_name: \"m_b\" model_version: -1 " IN("IN", "t")
    "output_map { key: \"OUT\" value: \"u\" } }, " STEP("m_c", IN("IN", "t"), "v") ", "
    STEP("m_d", IN("IN", "u") IN("IN2", "v"), "E_OUT") ", "
    STEP("m_e", IN("IN", "u"), "E_B") " ] }\n";

typedef struct {
    char root[64];
    nr_repo_t *repo;
    nr_model_t *ens;
} fixture_t;

static bool fixture_start(fixture_t *f, bool inline_execution)
{
    snprintf(f->root, sizeof(f->root), "/tmp/nereid-test-ens-XXXXXX");
    if (mkdtemp(f->root) == NULL)
        return false;
    static const char *const names[] = {"m_a", "m_b", "m_c", "m_e"};
    for (size_t i = 0; i < 4; i++) {
        char *cfg = nr_asprintf(STEP_MODEL("%s", ""), names[i]);
        char *rel = nr_asprintf("%s/config.pbtxt", names[i]);
        char *ver = nr_asprintf("%s/1/model.test", names[i]);
        put_file(f->root, rel, cfg);
        put_file(f->root, ver, "");
        free(cfg);
        free(rel);
        free(ver);
    }
    put_file(f->root, "m_d/config.pbtxt",
             STEP_MODEL("m_d", ", { name: \"IN2\" data_type: TYPE_INT32 dims: [ 1 ] }"));
    put_file(f->root, "m_d/1/model.test", "");
    put_file(f->root, "diamond/config.pbtxt", DIAMOND);
    put_file(f->root, "diamond/1/.keep", ""); /* an ensemble has an empty version directory */
    const char *paths[] = {f->root};
    nr_repo_options_t ro = {.paths = paths, .n_paths = 1, .autocomplete = true, .cpu_count = 1,
                            .mode = NR_CONTROL_NONE, .inline_execution = inline_execution,
                            .find_backend = find_backend};
    nr_status_t *st = nr_repo_create(&ro, &f->repo);
    if (st == NULL)
        st = nr_repo_get(f->repo, "diamond", 7, -1, &f->ens);
    if (st != NULL) {
        fprintf(stderr, "start: %s\n", st->msg);
        nr_status_free(st);
        return false;
    }
    return true;
}

static void fixture_stop(fixture_t *f)
{
    nr_model_release(f->ens);
    if (f->repo != NULL)
        nr_repo_destroy(f->repo);
    remove_tree(f->root);
}

/* ---- requests ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    pthread_t thread; /* that called done */
    int32_t in;
} call_t;

static void on_done(nr_req_t *req, void *arg)
{
    call_t *c = arg;
    pthread_mutex_lock(&c->mu);
    c->done = true;
    c->thread = pthread_self();
    pthread_cond_broadcast(&c->cv);
    pthread_mutex_unlock(&c->mu);
}

/* Submits E_IN = c->in asking for `out` (NULL: every output); `cancelled`, when given, is the
 * request's flag (request.h). */
static nr_req_t *submit_flag(fixture_t *f, call_t *c, const char *out, const atomic_bool *flag);

static nr_req_t *submit(fixture_t *f, call_t *c, const char *out)
{
    return submit_flag(f, c, out, NULL);
}

static nr_req_t *submit_flag(fixture_t *f, call_t *c, const char *out, const atomic_bool *flag)
{
    pthread_mutex_init(&c->mu, NULL);
    pthread_cond_init(&c->cv, NULL);
    nr_req_t *req = nr_req_new(f->ens);
    int64_t dims[1] = {1};
    nr_status_t *st = nr_req_add_input(req, "E_IN", 4, NR_TYPE_INT32, dims, 1, &c->in, 4);
    if (st == NULL && out != NULL)
        st = nr_req_add_output(req, out, strlen(out));
    req->done = on_done;
    req->done_arg = c;
    req->cancelled = flag;
    if (st == NULL)
        st = nr_model_submit(f->ens, req);
    if (st != NULL) {
        fprintf(stderr, "submit: %s\n", st->msg);
        nr_status_free(st);
        nr_req_free(req);
        return NULL;
    }
    return req;
}

static void wait_done(call_t *c)
{
    pthread_mutex_lock(&c->mu);
    while (!c->done)
        pthread_cond_wait(&c->cv, &c->mu);
    pthread_mutex_unlock(&c->mu);
}

static int32_t output_of(const nr_req_t *req, const char *name)
{
    for (size_t k = 0; k < req->n_want; k++)
        if (req->outputs[k].name && !strcmp(req->outputs[k].name, name) && req->outputs[k].data)
            return *(const int32_t *)req->outputs[k].data;
    return -1;
}

static bool inst_is(int e, const char *model)
{
    return strncmp(tb_exec_log[e].inst, model, strlen(model)) == 0;
}

NR_TEST(a_diamond_fans_out_and_in)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f, false));
    fail_model = NULL;
    gate_reset(true);
    call_t c = {.in = 7};
    nr_req_t *req = submit(&f, &c, "E_OUT");
    ASSERT_NOT_NULL(req);
    wait_execs(1, 1);
    EXPECT_TRUE(inst_is(0, "m_a"));
    gate_open(0);
    wait_execs(3, 2); /* b and c inside execute at once: the fan-out */
    EXPECT_TRUE((inst_is(1, "m_b") && inst_is(2, "m_c")) ||
                (inst_is(1, "m_c") && inst_is(2, "m_b")));
    gate_open(1);
    wait_execs(3, 1);
    EXPECT_EQ_INT(tb_count(), 3); /* d waits for the other one */
    gate_open(2);
    wait_execs(4, 1); /* the fan-in: d runs once both are done */
    EXPECT_TRUE(inst_is(3, "m_d"));
    EXPECT_EQ_INT(tb_exec_log[3].first[0], 7);
    gate_open(3);
    wait_done(&c);
    EXPECT_NULL(req->status);
    EXPECT_EQ_INT(output_of(req, "E_OUT"), 7);
    EXPECT_EQ_INT(tb_count(), 4); /* m_e, for the output not asked for, never ran */
    nr_req_free(req);
    gate_open_all();
    fixture_stop(&f);
}

NR_TEST(a_failing_step_ends_the_request_and_what_depends_on_it)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f, false));
    fail_model = "m_b";
    gate_reset(false);
    call_t c = {.in = 3};
    nr_req_t *req = submit(&f, &c, NULL);
    ASSERT_NOT_NULL(req);
    wait_done(&c);
    EXPECT_STATUS(nr_status_new(req->status->code, "%s", req->status->msg), NR_INTERNAL,
                  "in ensemble 'diamond', step failed in m_b_0_0");
    EXPECT_EQ_INT(tb_count(), 3); /* a, b, c; neither d nor e, which read b's output */
    nr_req_free(req);
    fail_model = NULL;
    fixture_stop(&f);
}

NR_TEST(every_output_asked_for_runs_every_step)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f, false));
    gate_reset(false);
    call_t c = {.in = 11};
    nr_req_t *req = submit(&f, &c, NULL);
    ASSERT_NOT_NULL(req);
    wait_done(&c);
    EXPECT_NULL(req->status);
    EXPECT_EQ_INT(output_of(req, "E_OUT"), 11);
    EXPECT_EQ_INT(output_of(req, "E_B"), 11);
    EXPECT_EQ_INT(tb_count(), 5);
    nr_req_free(req);
    fixture_stop(&f);
}

NR_TEST(with_inline_execution_the_graph_runs_on_the_submitting_thread)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f, true));
    gate_reset(false);
    /* the instances' threads reach their idle stacks in their own time after the load: until
     * then a step queues (and runs on its instance's thread) */
    call_t c = {.in = 5};
    nr_req_t *req = NULL;
    for (int tries = 0; tries < 1000; tries++) {
        c = (call_t){.in = 5};
        int before = tb_count();
        req = submit(&f, &c, NULL);
        ASSERT_NOT_NULL(req);
        if (c.done) { /* done before nr_model_submit returned */
            EXPECT_TRUE(pthread_equal(c.thread, pthread_self()));
            EXPECT_EQ_INT(tb_count() - before, 5);
            for (int e = before; e < tb_count(); e++)
                EXPECT_TRUE(pthread_equal(tb_exec_log[e % MAX_EXEC].tid, pthread_self()));
            break;
        }
        wait_done(&c);
        nr_req_free(req);
        req = NULL;
        gate_reset(false);
    }
    ASSERT_NOT_NULL(req);
    EXPECT_EQ_INT(output_of(req, "E_OUT"), 5);
    EXPECT_EQ_INT(output_of(req, "E_B"), 5);
    nr_req_free(req);
    fixture_stop(&f);
}

NR_TEST(a_cancelled_request_starts_no_more_steps)
{
    fixture_t f = {0};
    ASSERT_TRUE(fixture_start(&f, false));
    gate_reset(true);
    atomic_bool gone = false;
    call_t c = {.in = 9};
    nr_req_t *req = submit_flag(&f, &c, NULL, &gone);
    ASSERT_NOT_NULL(req);
    wait_execs(1, 1); /* the first step runs */
    atomic_store(&gone, true); /* the client goes away */
    gate_open(0);
    wait_done(&c);
    ASSERT_NOT_NULL(req->status);
    EXPECT_STATUS(nr_status_new(req->status->code, "%s", req->status->msg), NR_CANCELLED,
                  "in ensemble 'diamond', [request id: <id_unknown>] Request was cancelled");
    EXPECT_EQ_INT(tb_count(), 1); /* nothing after the step that was running */
    nr_stats_snap_t sn;
    nr_stats_snapshot(&f.ens->stats, &sn);
    EXPECT_EQ_U64(sn.failure[NR_FAIL_CANCELED], 1);
    nr_stats_snap_free(&sn);
    nr_req_free(req);
    gate_open_all();
    fixture_stop(&f);
}

NR_TEST_MAIN()
