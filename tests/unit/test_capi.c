/* test_capi.c - the public C API (include/nereid.h) as a program embedding nereid uses it: two
 * servers in one process, each over its own repository (simple in one, identity_fp32 in the
 * other), loaded with ONNX Runtime, serving requests from several threads at once with no
 * socket open; outputs in the backend's buffers or in the caller's; the options' errors, a
 * refused request, explicit load and unload, the index, metadata, config and statistics.
 * Run under ASan and TSan too (make asan-unit, make tsan).
 */
#include "../../include/nereid.h"
#include "../../src/common/buf.h"
#include "fs_util.h"
#include "nr_test.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static bool copy_model(const char *root, const char *name, const char *onnx, const char *cfg)
{
    const char *models = getenv("NR_TEST_ORT_MODELS");
    char *from = nr_asprintf("%s/%s.onnx", models ? models : "tests/unit/models", onnx);
    FILE *f = fopen(from, "rb");
    free(from);
    if (f == NULL)
        return false;
    nr_buf_t b;
    nr_buf_init(&b);
    char chunk[65536];
    size_t n;
    while ((n = fread(chunk, 1, sizeof(chunk), f)) > 0)
        nr_buf_append(&b, chunk, n);
    fclose(f);
    char *rel = nr_asprintf("%s/1/model.onnx", name);
    put_file(root, rel, ""); /* the folders */
    char *path = nr_asprintf("%s/%s", root, rel);
    FILE *o = fopen(path, "wb");
    bool ok = o != NULL && fwrite(b.data, 1, b.len, o) == b.len;
    if (o != NULL)
        fclose(o);
    char *cfg_rel = nr_asprintf("%s/config.pbtxt", name);
    put_file(root, cfg_rel, cfg);
    free(cfg_rel);
    free(path);
    free(rel);
    nr_buf_free(&b);
    return ok;
}

static const char *SIMPLE_CFG =
    "name: \"simple\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "instance_group [ { count: 2 kind: KIND_CPU } ]\n";
static const char *IDENT_CFG =
    "name: \"identity_fp32\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

/* An error, its text checked and deleted. */
static bool error_is(nereid_error_t *e, nereid_error_code_t code, const char *msg)
{
    bool ok = e != NULL && nereid_error_code(e) == code && !strcmp(nereid_error_message(e), msg);
    if (!ok)
        fprintf(stderr, "got %s\n", e ? nereid_error_message(e) : "no error");
    nereid_error_delete(e);
    return ok;
}

static nereid_server_t *server_over(const char *root, const char *mode)
{
    nereid_options_t *o;
    nereid_error_t *e = nereid_options_new(&o);
    if (e == NULL)
        e = nereid_options_set(o, "model-repository", root);
    if (e == NULL)
        e = nereid_options_set(o, "model-control-mode", mode);
    if (e == NULL)
        e = nereid_options_set(o, "log-info", "false");
    nereid_server_t *s = NULL;
    if (e == NULL)
        e = nereid_server_new(o, &s);
    nereid_options_delete(o);
    if (e != NULL) {
        fprintf(stderr, "server: %s\n", nereid_error_message(e));
        nereid_error_delete(e);
    }
    return s;
}

/* ---- one request, waited for ---- */

typedef struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    nereid_response_t *resp;
} waiter_t;

static void complete(void *arg, nereid_response_t *resp)
{
    waiter_t *w = arg;
    pthread_mutex_lock(&w->mu);
    w->resp = resp;
    pthread_cond_signal(&w->cv);
    pthread_mutex_unlock(&w->mu);
}

static nereid_response_t *wait_response(waiter_t *w)
{
    pthread_mutex_lock(&w->mu);
    while (w->resp == NULL)
        pthread_cond_wait(&w->cv, &w->mu);
    pthread_mutex_unlock(&w->mu);
    return w->resp;
}

/* The caller's own buffer for the output: arg, 64 floats of the calling test's stack. */
static void *into_caller(void *arg, const char *name, size_t byte_size)
{
    return byte_size <= 64 * sizeof(float) ? arg : NULL;
}

/* identity_fp32 on n floats starting at `base`: true when the answer is the input. */
static bool ident_ok(nereid_server_t *s, float base, size_t n, bool own_buffer)
{
    float in[64], out[64];
    for (size_t i = 0; i < n; i++)
        in[i] = base + (float)i;
    int64_t shape[2] = {1, (int64_t)n};
    nereid_request_t *r;
    nereid_error_t *e = nereid_request_new(s, "identity_fp32", -1, &r);
    if (e == NULL)
        e = nereid_request_add_input(r, "INPUT0", "FP32", shape, 2, in, n * sizeof(float));
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    if (e == NULL && own_buffer)
        nereid_request_set_allocator(r, into_caller, out);
    if (e == NULL)
        e = nereid_infer_async(r, complete, &w);
    if (e != NULL) {
        fprintf(stderr, "ident: %s\n", nereid_error_message(e));
        nereid_error_delete(e);
        nereid_request_delete(r);
        return false;
    }
    nereid_response_t *resp = wait_response(&w);
    const void *data = NULL;
    size_t size = 0, nd = 0;
    const int64_t *dims = NULL;
    bool ok = nereid_response_error(resp) == NULL && nereid_response_output_count(resp) == 1;
    e = ok ? nereid_response_output(resp, 0, NULL, NULL, &dims, &nd, &data, &size) : NULL;
    ok = ok && e == NULL && size == n * sizeof(float) && nd == 2 && dims[1] == (int64_t)n &&
         memcmp(data, in, size) == 0 && (!own_buffer || data == out);
    nereid_error_delete(e);
    nereid_response_delete(resp);
    return ok;
}

/* simple: OUTPUT0 = a + b, OUTPUT1 = a - b. */
static bool simple_ok(nereid_server_t *s, int32_t base)
{
    int32_t a[16], b[16];
    for (int i = 0; i < 16; i++)
        a[i] = base + i, b[i] = 2;
    int64_t shape[2] = {1, 16};
    nereid_request_t *r;
    nereid_error_t *e = nereid_request_new(s, "simple", -1, &r);
    if (e == NULL)
        e = nereid_request_add_input(r, "INPUT0", "INT32", shape, 2, a, sizeof(a));
    if (e == NULL)
        e = nereid_request_add_input(r, "INPUT1", "INT32", shape, 2, b, sizeof(b));
    if (e == NULL)
        e = nereid_request_add_output(r, "OUTPUT1");
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    if (e == NULL)
        e = nereid_infer_async(r, complete, &w);
    if (e != NULL) {
        nereid_error_delete(e);
        nereid_request_delete(r);
        return false;
    }
    nereid_response_t *resp = wait_response(&w);
    const char *name = NULL, *dt = NULL;
    const void *data = NULL;
    bool ok = nereid_response_output_count(resp) == 1 &&
              nereid_response_output(resp, 0, &name, &dt, NULL, NULL, &data, NULL) == NULL &&
              !strcmp(name, "OUTPUT1") && !strcmp(dt, "INT32");
    for (int i = 0; ok && i < 16; i++)
        ok = ((const int32_t *)data)[i] == a[i] - b[i];
    nereid_response_delete(resp);
    return ok;
}

typedef struct {
    nereid_server_t *a, *b;
    int id;
    bool ok;
} load_t;

static void *load_both(void *arg)
{
    load_t *l = arg;
    l->ok = true;
    for (int k = 0; k < 50 && l->ok; k++)
        l->ok = simple_ok(l->a, l->id * 1000 + k) &&
                ident_ok(l->b, (float)(l->id * 1000 + k), 4 + (size_t)(k % 8), k % 2 == 0);
    return NULL;
}

NR_TEST(two_servers_in_one_process_serve_at_once)
{
    char ra[] = "/tmp/nereid-test-capi-a-XXXXXX", rb[] = "/tmp/nereid-test-capi-b-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(ra));
    ASSERT_NOT_NULL(mkdtemp(rb));
    ASSERT_TRUE(copy_model(ra, "simple", "simple", SIMPLE_CFG));
    ASSERT_TRUE(copy_model(rb, "identity_fp32", "identity_fp32", IDENT_CFG));
    nereid_server_t *a = server_over(ra, "none"), *b = server_over(rb, "none");
    ASSERT_TRUE(a != NULL && b != NULL);
    EXPECT_TRUE(nereid_server_is_live(a) && nereid_server_is_ready(a));
    EXPECT_TRUE(nereid_model_is_ready(a, "simple", -1));
    EXPECT_FALSE(nereid_model_is_ready(b, "simple", -1)); /* each its own repository */
    pthread_t t[4];
    load_t l[4];
    for (int i = 0; i < 4; i++) {
        l[i] = (load_t){a, b, i, false};
        pthread_create(&t[i], NULL, load_both, &l[i]);
    }
    for (int i = 0; i < 4; i++) {
        pthread_join(t[i], NULL);
        EXPECT_TRUE(l[i].ok);
    }
    nereid_statistics_t st;
    EXPECT_NULL(nereid_model_statistics(a, "simple", -1, &st));
    EXPECT_EQ_U64(st.success_count, 200);
    EXPECT_EQ_U64(st.inference_count, 200);
    EXPECT_NULL(nereid_model_statistics(b, "identity_fp32", 1, &st));
    EXPECT_EQ_U64(st.success_count, 200);
    EXPECT_TRUE(error_is(nereid_model_statistics(b, "simple", -1, &st),
                         NEREID_ERROR_INVALID_ARG, "requested model 'simple' is not available"));
    nereid_server_delete(a);
    nereid_server_delete(b);
    remove_tree(ra);
    remove_tree(rb);
}

NR_TEST(options_and_requests_are_refused_with_the_servers_words)
{
    nereid_options_t *o;
    ASSERT_NULL(nereid_options_new(&o));
    EXPECT_TRUE(error_is(nereid_options_set(o, "no-such-flag", "1"), NEREID_ERROR_NOT_FOUND,
                         "unrecognized option '--no-such-flag'"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "http-port", "x"), NEREID_ERROR_INVALID_ARG,
                         "Invalid option value. Got x"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "model-control-mode", "sometimes"),
                         NEREID_ERROR_INVALID_ARG, "Invalid option value. Got sometimes"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "disable-auto-complete-config", "1"),
                         NEREID_ERROR_INVALID_ARG,
                         "option '--disable-auto-complete-config' doesn't allow an argument"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "exit-timeout-secs", NULL),
                         NEREID_ERROR_INVALID_ARG,
                         "option '--exit-timeout-secs' requires an argument"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "grpc-restricted-protocol", "x"),
                         NEREID_ERROR_INVALID_ARG,
                         "restricted api option format is '<api>[,<api>...]:<key>=<value>', "
                         "got 'x'"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "http-restricted-api", "nosuch:k=v"),
                         NEREID_ERROR_INVALID_ARG,
                         "unknown restricted api 'nosuch' (allowed: health, metadata, "
                         "inference, shared-memory, model-config, model-repository, "
                         "statistics, trace, logging)"));
    EXPECT_NULL(nereid_options_set(o, "http-restricted-api", "inference,health:k=v"));
    EXPECT_TRUE(error_is(nereid_options_set(o, "http-restricted-api", "metadata,health:k2=v"),
                         NEREID_ERROR_INVALID_ARG,
                         "restricted api 'health' is given more than once (an api can be in "
                         "one group only)"));
    nereid_server_t *s = NULL;
    EXPECT_TRUE(error_is(nereid_server_new(o, &s), NEREID_ERROR_INVALID_ARG,
                         "--model-repository must be specified"));
    EXPECT_NULL(nereid_options_set(o, "model-repository", "/nonexistent-nereid-repo"));
    EXPECT_TRUE(error_is(nereid_server_new(o, &s), NEREID_ERROR_INTERNAL,
                         "failed to stat file /nonexistent-nereid-repo"));
    nereid_options_delete(o);

    char root[] = "/tmp/nereid-test-capi-c-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(root));
    ASSERT_TRUE(copy_model(root, "identity_fp32", "identity_fp32", IDENT_CFG));
    s = server_over(root, "explicit");
    ASSERT_NOT_NULL(s);
    nereid_request_t *r = NULL;
    EXPECT_TRUE(error_is(nereid_request_new(s, "identity_fp32", -1, &r), NEREID_ERROR_NOT_FOUND,
                         "Request for unknown model: 'identity_fp32' is not found"));
    EXPECT_NULL(nereid_server_load_model(s, "identity_fp32"));
    EXPECT_TRUE(ident_ok(s, 1.5f, 3, false));
    ASSERT_NULL(nereid_request_new(s, "identity_fp32", -1, &r));
    int64_t shape[2] = {1, 3};
    float three[3] = {1, 2, 3};
    EXPECT_TRUE(error_is(nereid_request_add_input(r, "INPUT0", "FP33", shape, 2, three, 12),
                         NEREID_ERROR_INVALID_ARG, "invalid datatype 'FP33' for input 'INPUT0'"));
    ASSERT_NULL(nereid_request_add_input(r, "INPUT0", "INT32", shape, 2, three, 12));
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    EXPECT_TRUE(error_is(nereid_infer_async(r, complete, &w), NEREID_ERROR_INVALID_ARG,
                         "[request id: <id_unknown>] inference input 'INPUT0' data-type is "
                         "'INT32', but model 'identity_fp32' expects 'FP32'"));
    nereid_request_delete(r); /* refused: still the caller's */
    char *platform = NULL;
    EXPECT_NULL(nereid_model_metadata(s, "identity_fp32", -1, &platform, NULL, NULL));
    EXPECT_STREQ(platform, "onnxruntime_onnx");
    nereid_string_delete(platform);
    char *json = NULL;
    EXPECT_NULL(nereid_model_config(s, "identity_fp32", 1, &json));
    EXPECT_TRUE(json != NULL && strstr(json, "\"max_batch_size\":8") != NULL);
    nereid_string_delete(json);
    EXPECT_TRUE(error_is(nereid_server_unload_model_and_dependents(s, NULL),
                         NEREID_ERROR_INVALID_ARG, "a model name must be given"));
    EXPECT_NULL(nereid_server_unload_model_and_dependents(s, "identity_fp32"));
    EXPECT_FALSE(nereid_model_is_ready(s, "identity_fp32", -1));
    nereid_server_delete(s);
    remove_tree(root);
}

NR_TEST(a_request_cancelled_through_the_api_starts_no_more_steps)
{
    char root[] = "/tmp/nereid-test-capi-d-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(root));
    ASSERT_TRUE(copy_model(root, "identity_fp32", "identity_fp32", IDENT_CFG));
    ASSERT_TRUE(copy_model(root, "slow", "identity_fp32",
                           "name: \"slow\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
                           "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                           "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                           "dynamic_batching { max_queue_delay_microseconds: 2000000 }\n"));
    put_file(root, "chain/config.pbtxt",
             "name: \"chain\"\nplatform: \"ensemble\"\nmax_batch_size: 8\n"
             "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
             "output [ { name: \"OUT\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
             "ensemble_scheduling { step [ { model_name: \"slow\" model_version: -1 "
             "input_map { key: \"INPUT0\" value: \"IN\" } output_map { key: \"OUTPUT0\" "
             "value: \"mid\" } }, { model_name: \"identity_fp32\" model_version: -1 "
             "input_map { key: \"INPUT0\" value: \"mid\" } output_map { key: \"OUTPUT0\" "
             "value: \"OUT\" } } ] }\n");
    put_file(root, "chain/1/.keep", "");
    nereid_server_t *s = server_over(root, "none");
    ASSERT_NOT_NULL(s);
    nereid_request_t *r;
    ASSERT_NULL(nereid_request_new(s, "chain", -1, &r));
    float in[2] = {1, 2};
    int64_t shape[2] = {1, 2};
    ASSERT_NULL(nereid_request_add_input(r, "IN", "FP32", shape, 2, in, sizeof(in)));
    waiter_t w = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, NULL};
    ASSERT_NULL(nereid_infer_async(r, complete, &w));
    nereid_request_cancel(r); /* while the first step waits out its 2 s queue delay */
    nereid_response_t *resp = wait_response(&w);
    const nereid_error_t *e = nereid_response_error(resp);
    ASSERT_NOT_NULL(e);
    EXPECT_EQ_INT(nereid_error_code(e), NEREID_ERROR_CANCELLED);
    EXPECT_STREQ(nereid_error_message(e),
                 "in ensemble 'chain', [request id: <id_unknown>] Request was cancelled");
    nereid_response_delete(resp);
    nereid_statistics_t st;
    EXPECT_NULL(nereid_model_statistics(s, "slow", -1, &st));
    EXPECT_EQ_U64(st.success_count, 1); /* the step that had started ended */
    EXPECT_NULL(nereid_model_statistics(s, "identity_fp32", -1, &st));
    EXPECT_EQ_U64(st.success_count, 0); /* the next never started */
    nereid_server_delete(s);
    remove_tree(root);
}

NR_TEST_MAIN()
