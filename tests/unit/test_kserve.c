/* test_kserve.c - the protocol-neutral server core: the server (readiness,
 * quiesce), KServe semantics as data (versions, statistics and index errors,
 * refused model control and CUDA shared memory, log setting updates) and one
 * inference request
 * (parameters with each protocol's texts, outputs named twice or unknown,
 * reply order, classification, a request error passed on).
 */
#include "../../src/common/alloc.h"
#include "../../src/common/buf.h"
#include "../../src/common/log.h"
#include "../../src/core/infer.h"
#include "fake_model.h"
#include "nr_test.h"
#include "params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* A model without a backend: outputs declared B, A (A sorts first). */
static const char *CFG =
    "name: \"m\"\nbackend: \"onnxruntime\"\nmax_batch_size: 4\n"
    "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n"
    "output [ { name: \"B\" data_type: TYPE_FP32 dims: [ 3 ] },"
    " { name: \"A\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n";

static nr_model_t *fake_model(void)
{
    return nr_fake_model(CFG, false);
}

static void fake_free(nr_model_t *m)
{
    nr_fake_model_free(m);
}

NR_TEST(version_strings)
{
    int64_t v;
    EXPECT_OK(nr_kserve_parse_version("", 0, NR_VERSION_STOL, &v));
    EXPECT_EQ_INT(v, -1);
    EXPECT_OK(nr_kserve_parse_version("7", 1, NR_VERSION_STOL, &v));
    EXPECT_EQ_INT(v, 7);
    EXPECT_OK(nr_kserve_parse_version("3x", 2, NR_VERSION_STOL, &v)); /* std::stol stops there */
    EXPECT_EQ_INT(v, 3);
    EXPECT_STATUS(nr_kserve_parse_version("abc", 3, NR_VERSION_STOL, &v), NR_INVALID_ARG,
                  "failed to get model version from specified version string 'abc' (details: "
                  "stol), version should be an integral value > 0");
    EXPECT_STATUS(nr_kserve_parse_version("99999999999999999999", 20, NR_VERSION_STOLL, &v),
                  NR_INVALID_ARG,
                  "failed to get model version from specified version string "
                  "'99999999999999999999' (details: stoll), version should be an integral value "
                  "> 0");
}

NR_TEST(params_applied_to_the_request)
{
    nr_model_t *m = fake_model();
    ASSERT_NOT_NULL(m);
    nr_infer_t inf = {0};
    nr_infer_init(&inf, NULL, m, NULL);
    nr_param_t p = p_int("priority", 3);
    nr_infer_param(&inf, &p);
    EXPECT_EQ_INT(inf.req->priority, 3);
    p = p_uint("priority", UINT64_MAX); /* clamped to the core's range */
    nr_infer_param(&inf, &p);
    EXPECT_EQ_U64(inf.req->priority, UINT32_MAX);
    p = p_int("timeout", 99);
    nr_infer_param(&inf, &p);
    EXPECT_EQ_U64(inf.req->timeout_us, 99);
    p = p_int("timeout", -5); /* Triton: a huge unsigned timeout, i.e. none */
    nr_infer_param(&inf, &p);
    EXPECT_EQ_U64(inf.req->timeout_us, 0);
    p = p_str("custom", "x"); /* kept by nobody */
    nr_infer_param(&inf, &p);
    EXPECT_EQ_INT(inf.req->priority, UINT32_MAX);
    nr_infer_release(&inf);
    fake_free(m);
}

/* Gives output slot i the tensor values v (3 floats, batch 1). */
static void set_out(nr_req_t *req, size_t i, uint32_t c, const float *v)
{
    nr_tensor_t *t = &req->outputs[i];
    memset(t, 0, sizeof(*t));
    t->name = req->model->cfg->output[c].name;
    t->dtype = NR_TYPE_FP32;
    t->ndim = 2;
    t->dims[0] = 1;
    t->dims[1] = 3;
    t->data = v;
    t->size = 12;
}

NR_TEST(outputs_named_twice_unknown_and_in_reply_order)
{
    nr_model_t *m = fake_model();
    ASSERT_NOT_NULL(m);
    nr_infer_t inf = {0};
    nr_infer_init(&inf, NULL, m, NULL);
    int idx;
    EXPECT_OK(nr_infer_output(&inf, "B", 1, &idx));
    EXPECT_EQ_INT(idx, 0);
    EXPECT_OK(nr_infer_output(&inf, "A", 1, &idx));
    EXPECT_EQ_INT(idx, 1);
    nr_infer_output_classify(&inf, idx, 2);
    EXPECT_OK(nr_infer_output(&inf, "B", 1, &idx)); /* again: the first listing counts */
    EXPECT_EQ_INT(idx, -1);
    EXPECT_STATUS(nr_infer_output(&inf, "C", 1, &idx), NR_INVALID_ARG,
                  "unexpected inference output 'C' for model 'm'");
    EXPECT_STATUS(nr_infer_output_shm(&inf, 0, "r", 1, 0, 12), NR_NOT_FOUND,
                  "Unable to find shared memory region: 'r'");
    EXPECT_EQ_INT(inf.req->n_want, 2);
    float b[3] = {1, 2, 3}, a[3] = {0.5f, 0.25f, 0.75f};
    set_out(inf.req, 0, 0, b);
    set_out(inf.req, 1, 1, a);
    const nr_infer_out_t *outs;
    size_t n;
    ASSERT_OK(nr_infer_outputs(&inf, &outs, &n));
    ASSERT_EQ_U64(n, 2);
    EXPECT_STREQ(outs[0].name, "A"); /* by name, whatever the request's order */
    EXPECT_EQ_INT(outs[0].t->dtype, NR_TYPE_STRING); /* classified: top 2 */
    EXPECT_EQ_INT(outs[0].t->dims[1], 2);
    EXPECT_TRUE(memcmp((const char *)outs[0].t->data + 4, "0.750000:2", 10) == 0);
    EXPECT_STREQ(outs[1].name, "B");
    EXPECT_TRUE(outs[1].t->data == b);
    EXPECT_FALSE(outs[1].in_shm);
    inf.req->status = nr_status_new(NR_INTERNAL, "backend failed");
    EXPECT_STATUS(nr_infer_outputs(&inf, &outs, &n), NR_INTERNAL, "backend failed");
    nr_infer_release(&inf);
    fake_free(m);
}

NR_TEST(server_readiness_and_empty_repository)
{
    char dir[] = "/tmp/nereid-test-kserve-XXXXXX";
    ASSERT_NOT_NULL(mkdtemp(dir));
    const char *paths[] = {dir};
    nr_repo_options_t ro = {.paths = paths, .n_paths = 1, .autocomplete = true, .cpu_count = 1};
    nr_repo_t *repo = NULL;
    ASSERT_OK(nr_repo_create(&ro, &repo));
    nr_server_options_t so = {.id = "nereid-test", .version = "9", .strict_readiness = true};
    nr_server_t *s = nr_server_new(&so, repo);
    EXPECT_STREQ(nr_server_id(s), "nereid-test");
    EXPECT_STREQ(nr_server_version(s), "9");
    EXPECT_TRUE(nr_server_live(s));
    EXPECT_TRUE(nr_server_ready(s));
    EXPECT_STATUS(nr_kserve_stats(s, "x", 1, -1, NULL, NULL), NR_INVALID_ARG,
                  "requested model 'x' is not available");
    EXPECT_OK(nr_kserve_stats(s, NULL, 0, -1, NULL, NULL));
    EXPECT_FALSE(nr_kserve_model_ready(s, "x", 1, -1));
    nr_model_meta_t meta;
    EXPECT_STATUS(nr_kserve_model_metadata(s, "x", 1, -1, &meta), NR_NOT_FOUND,
                  "Request for unknown model: 'x' is not found");
    EXPECT_STATUS(nr_kserve_repo_load(s, "x", 1, NULL), NR_UNAVAILABLE,
                  "explicit model load / unload is not allowed if polling is enabled");
    EXPECT_STATUS(nr_kserve_repo_unload(s, "x", 1, false), NR_UNAVAILABLE,
                  "explicit model load / unload is not allowed if polling is enabled");
    EXPECT_STATUS(nr_kserve_repo_named(), NR_UNSUPPORTED,
                  "'repository_name' specification is not supported");
    EXPECT_STATUS(nr_kserve_cuda_register("g", 1), NR_INVALID_ARG,
                  "failed to register CUDA shared memory region: 'g', GPUs not supported");
    EXPECT_STATUS(nr_kserve_cuda_status("g", 1), NR_NOT_FOUND,
                  "Unable to find cuda shared memory region: 'g'");
    nr_server_drain(s, 1, 0); /* nothing in flight: returns at once */
    nr_server_quiesce(s);
    EXPECT_FALSE(nr_server_ready(s));
    EXPECT_TRUE(nr_server_live(s));
    nr_server_free(s);
    rmdir(dir);
}

NR_TEST(classification)
{
    float v[8] = {0.1f, 0.9f, 0.5f, 0.3f, 4, 3, 3, 1};
    nr_tensor_t t = {.dtype = NR_TYPE_FP32, .ndim = 2, .dims = {2, 4}, .data = v, .size = 32};
    const char *lines[] = {"zero", "one", "two", "three"};
    nr_labels_t labels = {.lines = lines, .n_lines = 4};
    nr_tensor_t out;
    char *buf;
    ASSERT_OK(nr_classify(&t, true, 2, &labels, &out, &buf));
    EXPECT_EQ_INT(out.dtype, NR_TYPE_STRING);
    EXPECT_EQ_INT(out.ndim, 2);
    EXPECT_EQ_INT(out.dims[0], 2);
    EXPECT_EQ_INT(out.dims[1], 2);
    const char *want[4] = {"0.900000:1:one", "0.500000:2:two", "4.000000:0:zero",
                           "3.000000:1:one"}; /* ties: the lower index first */
    size_t off = 0;
    for (int i = 0; i < 4; i++) {
        uint32_t l;
        memcpy(&l, buf + off, 4);
        EXPECT_EQ_U64(l, strlen(want[i]));
        EXPECT_TRUE(memcmp(buf + off + 4, want[i], l) == 0);
        off += 4 + l;
    }
    EXPECT_EQ_U64(off, out.size);
    free(buf);
    int32_t iv[3] = {16, 3, 15};
    nr_tensor_t ti = {.dtype = NR_TYPE_INT32, .ndim = 1, .dims = {3}, .data = iv, .size = 12};
    ASSERT_OK(nr_classify(&ti, false, 10, NULL, &out, &buf));
    EXPECT_EQ_INT(out.ndim, 1);
    EXPECT_EQ_INT(out.dims[0], 3);
    EXPECT_TRUE(memcmp(buf + 4, "16:0", 4) == 0);
    free(buf);
}

/* The classification's elements, "<value>:<index>" each, joined with spaces. */
static char *class_strings(const char *buf, size_t size)
{
    nr_buf_t b;
    nr_buf_init(&b);
    for (size_t off = 0; off + 4 <= size;) {
        uint32_t l;
        memcpy(&l, buf + off, 4);
        nr_buf_printf(&b, "%s%.*s", b.len ? " " : "", (int)l, buf + off + 4);
        off += 4 + l;
    }
    return nr_buf_steal(&b, NULL);
}

/* NaN ranks below every number, -inf included, and NaNs among themselves by
 * index: a strict weak order, so the top-k is sorted and the same every time
 * (Triton sorts with `a > b`, which NaN breaks: its order is unspecified). */
NR_TEST(classification_nan_last)
{
    float v[16] = {NAN, 0.5f, -NAN, 2.0f, -INFINITY, 1.0f, NAN, -1.0f,
                   NAN, NAN, 3.0f, NAN, 0.25f, NAN, INFINITY, NAN};
    nr_tensor_t t = {.dtype = NR_TYPE_FP32, .ndim = 1, .dims = {16}, .data = v, .size = 64};
    nr_tensor_t out;
    char *buf;
    ASSERT_OK(nr_classify(&t, false, 16, NULL, &out, &buf));
    char *got = class_strings(buf, out.size);
    EXPECT_STREQ(got, "inf:14 3.000000:10 2.000000:3 1.000000:5 0.500000:1 0.250000:12 "
                      "-1.000000:7 -inf:4 nan:0 -nan:2 nan:6 nan:8 nan:9 nan:11 nan:13 nan:15");
    free(got);
    free(buf);
    ASSERT_OK(nr_classify(&t, false, 3, NULL, &out, &buf)); /* top 3: no NaN */
    got = class_strings(buf, out.size);
    EXPECT_STREQ(got, "inf:14 3.000000:10 2.000000:3");
    free(got);
    free(buf);
    double d[6] = {NAN, NAN, -2.0, NAN, 7.5, NAN};
    nr_tensor_t td = {.dtype = NR_TYPE_FP64, .ndim = 2, .dims = {2, 3}, .data = d, .size = 48};
    ASSERT_OK(nr_classify(&td, true, 2, NULL, &out, &buf));
    got = class_strings(buf, out.size);
    EXPECT_STREQ(got, "-2.000000:2 nan:0 7.500000:1 nan:0"); /* per batch item */
    free(got);
    free(buf);
}

static nr_status_t *test_wrong_type(const char *key, nr_param_type_t want)
{
    return nr_status_new(NR_INVALID_ARG, "wrong type %d for %s", (int)want, key);
}

static nr_status_t *test_bad_format(const char *v, size_t n)
{
    return nr_status_new(NR_INVALID_ARG, "bad format %.*s", (int)n, v);
}

static const nr_kserve_log_reader_t reader = {nr_test_find_update, test_wrong_type,
                                              test_bad_format};

static nr_status_t *log_update(const nr_param_t *p, size_t n)
{
    nr_test_updates_t u = {p, n};
    return nr_kserve_log_update(&reader, &u);
}

NR_TEST(log_update_order)
{
    nr_log_settings_t saved;
    memcpy(&saved, &nr_log_settings, sizeof(saved));
    /* Triton's order, not the request's: log_info is applied, then log_format fails */
    nr_param_t a[] = {p_str("log_format", "xml"), p_bool("log_info", false)};
    EXPECT_STATUS(log_update(a, 2), NR_INVALID_ARG, "bad format xml");
    EXPECT_TRUE(!nr_log_settings.info);
    nr_param_t b[] = {p_str("log_warning", "no")};
    char want[64];
    snprintf(want, sizeof(want), "wrong type %d for log_warning", (int)NR_PARAM_BOOL);
    EXPECT_STATUS(log_update(b, 1), NR_INVALID_ARG, want);
    nr_param_t c[] = {p_int("log_verbose_level", -3)};
    snprintf(want, sizeof(want), "wrong type %d for log_verbose_level", (int)NR_PARAM_UINT64);
    EXPECT_STATUS(log_update(c, 1), NR_INVALID_ARG, want);
    nr_param_t d[] = {p_str("log_file", "/tmp/x"), p_uint("log_verbose_level", 2)};
    EXPECT_STATUS(log_update(d, 2), NR_UNSUPPORTED,
                  "log file location can not be updated through network protocol");
    EXPECT_EQ_INT(nr_log_settings.verbose, saved.verbose); /* log_file comes first */
    nr_param_t e[] = {p_uint("log_verbose_level", 1ull << 40), p_str("log_format", "ISO8601"),
                      p_str("other", "ignored")};
    EXPECT_OK(log_update(e, 3));
    EXPECT_EQ_INT(nr_log_settings.verbose, INT32_MAX);
    EXPECT_TRUE(nr_log_settings.iso8601);
    memcpy(&nr_log_settings, &saved, sizeof(saved));
}

NR_TEST_MAIN()
