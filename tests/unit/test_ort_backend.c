/* test_ort_backend.c - the ONNX Runtime backend through its vtable: load, execute
 * (batch of one and of several, zero-copy and gathered, STRING/FP16/BOOL, reshape),
 * auto-complete (incl. Triton's std::unordered_map order) and every error text.
 *
 * Models: tests/unit/models/ (written by tests/unit/gen_test_models.py) or
 * $NR_TEST_ORT_MODELS; `simple` is examples/model_repository/simple/1/model.onnx when
 * `make models` has run ($NR_TEST_SIMPLE_MODEL overrides). Run from the repository root.
 */
#include "../../src/backends/backend.h"
#include "../../src/backends/onnxruntime/ort_int.h"
#include "../../src/common/alloc.h"
#include "../../src/common/log.h"
#include "nr_test.h"

#include <dirent.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

extern const nr_backend_t nr_ort_backend;
static const nr_backend_t *const B = &nr_ort_backend;

/* ---- helpers ---- */

static char *model_file(const char *name)
{
    const char *dir = getenv("NR_TEST_ORT_MODELS");
    return nr_asprintf("%s/%s.onnx", dir ? dir : "tests/unit/models", name);
}

static char *simple_file(void)
{
    struct stat sb;
    const char *env = getenv("NR_TEST_SIMPLE_MODEL");
    if (env)
        return nr_strdup(env);
    if (stat("examples/model_repository/simple/1/model.onnx", &sb) == 0)
        return nr_strdup("examples/model_repository/simple/1/model.onnx");
    return model_file("simple");
}

static nr_model_config_t *cfg_of(const char *text)
{
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg);
    if (st) {
        fprintf(stderr, "config: %s\n", st->msg);
        nr_status_free(st);
    }
    return cfg;
}

static bool is_err_prefix(nr_status_t *st, nr_code_t code, const char *prefix)
{
    bool ok = st && st->code == code && strncmp(st->msg, prefix, strlen(prefix)) == 0;
    if (!ok)
        fprintf(stderr, "  got %s: %s\n  want prefix: %s\n", st ? nr_status_code_name(st->code) : "OK",
                st ? st->msg : "", prefix);
    nr_status_free(st);
    return ok;
}

typedef struct {
    nr_model_config_t *cfg;
    void *model;
    void *inst;
} loaded_t;

static nr_status_t *load_kind(const char *cfg_text, const char *path, int kind, loaded_t *l)
{
    memset(l, 0, sizeof(*l));
    l->cfg = cfg_of(cfg_text);
    if (l->cfg == NULL)
        return nr_status_new(NR_INTERNAL, "bad test config");
    nr_status_t *st = B->model_load(l->cfg, NULL, path, &l->model);
    if (st)
        return st;
    nr_instance_info_t info = {.name = "test_0", .kind = kind, .intra_op_threads = 1,
                               .cpu_count = 3, .host_policy = "cpu"};
    return B->instance_create(l->model, &info, &l->inst);
}

static nr_status_t *load(const char *cfg_text, const char *path, loaded_t *l)
{
    return load_kind(cfg_text, path, NR_KIND_CPU, l);
}

static void unload(loaded_t *l)
{
    if (l->inst)
        B->instance_destroy(l->inst);
    if (l->model)
        B->model_unload(l->model);
    nr_cfg_free(l->cfg);
    memset(l, 0, sizeof(*l));
}

typedef struct {
    nr_batch_item_t item;
    nr_tensor_t in[4];
    uint32_t want[4];
    nr_tensor_t out[4];
} titem_t;

static void titem(titem_t *t, uint64_t batch_size, size_t n_in, size_t n_want, const uint32_t *want)
{
    memset(t, 0, sizeof(*t));
    t->item.inputs = t->in;
    t->item.n_inputs = n_in;
    t->item.want = t->want;
    t->item.n_want = n_want;
    t->item.outputs = t->out;
    t->item.batch_size = batch_size;
    if (n_want)
        memcpy(t->want, want, n_want * sizeof(uint32_t));
}

static void tin(titem_t *t, size_t i, const char *name, nr_dtype_t dt, int64_t d0, int64_t d1,
                const void *data, size_t size)
{
    nr_tensor_t *x = &t->in[i];
    x->name = name;
    x->dtype = dt;
    x->ndim = d1 >= 0 ? 2 : 1;
    x->dims[0] = d0;
    x->dims[1] = d1;
    x->data = data;
    x->size = size;
}

static nr_status_t *run(void *inst, titem_t **items, size_t n, nr_batch_t *batch)
{
    static nr_batch_item_t *ptrs[16];
    memset(batch, 0, sizeof(*batch));
    for (size_t i = 0; i < n; i++) {
        ptrs[i] = &items[i]->item;
        batch->total_batch_size += items[i]->item.batch_size;
    }
    batch->items = ptrs;
    batch->n = n;
    return B->execute(inst, batch);
}

static void done(titem_t *t)
{
    for (size_t j = 0; j < t->item.n_want; j++)
        nr_hold_unref(t->out[j].hold);
    nr_status_free(t->item.status);
}

static size_t ser_strings(unsigned char *buf, const char *const *s, const size_t *len, size_t n)
{
    size_t off = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t l = (uint32_t)len[i];
        memcpy(buf + off, &l, 4);
        memcpy(buf + off + 4, s[i], len[i]);
        off += 4 + len[i];
    }
    return off;
}

static const char SIMPLE_CFG[] =
    "name: \"simple\" backend: \"onnxruntime\" max_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";

#define IDENTITY_CFG(name, type)                                                       \
    "name: \"" name "\" backend: \"onnxruntime\" max_batch_size: 8\n"                  \
    "input [ { name: \"INPUT0\" data_type: " type " dims: [ -1 ] } ]\n"                \
    "output [ { name: \"OUTPUT0\" data_type: " type " dims: [ -1 ] } ]\n"

/* ---- registry ---- */

NR_TEST(registry_finds_backends_by_name)
{
    EXPECT_TRUE(nr_backend_find("onnxruntime") == &nr_ort_backend);
    EXPECT_TRUE(nr_backend_find("onnxruntime_onnx") == NULL); /* a platform, not a backend */
    EXPECT_TRUE(nr_backend_find("python") != NULL);
    EXPECT_STREQ(nr_backend_find("python")->name, "python");
    EXPECT_TRUE(nr_backend_find("pytorch") == NULL);
    EXPECT_STREQ(nr_ort_backend.name, "onnxruntime");
    EXPECT_EQ_INT(nr_ort_backend.abi_version, NR_BACKEND_ABI_VERSION);
}

/* ---- execute ---- */

NR_TEST(simple_batch_of_one_zero_copy)
{
    char *path = simple_file();
    loaded_t l;
    ASSERT_OK(load(SIMPLE_CFG, path, &l));
    int32_t a[16], b[16];
    for (int i = 0; i < 16; i++)
        a[i] = i, b[i] = 1;
    titem_t t, *items[] = {&t};
    titem(&t, 1, 2, 2, (uint32_t[]){0, 1});
    tin(&t, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a, sizeof(a));
    tin(&t, 1, "INPUT1", NR_TYPE_INT32, 1, 16, b, sizeof(b));
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    EXPECT_TRUE(batch.input_end_ns > 0 && batch.infer_end_ns >= batch.input_end_ns);
    EXPECT_STREQ(t.out[0].name, "OUTPUT0");
    EXPECT_STREQ(t.out[1].name, "OUTPUT1");
    EXPECT_EQ_INT(t.out[0].dtype, NR_TYPE_INT32);
    EXPECT_EQ_INT(t.out[0].ndim, 2);
    EXPECT_EQ_INT(t.out[0].dims[0], 1);
    EXPECT_EQ_INT(t.out[0].dims[1], 16);
    EXPECT_EQ_INT(t.out[0].size, 64);
    ASSERT_TRUE(t.out[0].data && t.out[1].data && t.out[0].hold && t.out[1].hold);
    const int32_t *sum = t.out[0].data, *diff = t.out[1].data;
    for (int i = 0; i < 16; i++) {
        EXPECT_EQ_INT(sum[i], i + 1);
        EXPECT_EQ_INT(diff[i], i - 1);
    }
    done(&t);
    unload(&l);
    free(path);
}

NR_TEST(simple_batch_of_three_gathered_and_sliced)
{
    char *path = simple_file();
    loaded_t l;
    ASSERT_OK(load(SIMPLE_CFG, path, &l));
    int32_t a0[16], b0[16], a1[32], b1[32], a2[16], b2[16];
    for (int i = 0; i < 16; i++) {
        a0[i] = i, b0[i] = 100;
        a1[i] = 1000 + i, b1[i] = 1, a1[16 + i] = 2000 + i, b1[16 + i] = 2;
        a2[i] = -i, b2[i] = 7;
    }
    titem_t t0, t1, t2, *items[] = {&t0, &t1, &t2};
    titem(&t0, 1, 2, 2, (uint32_t[]){0, 1});
    titem(&t1, 2, 2, 1, (uint32_t[]){1}); /* only OUTPUT1 */
    titem(&t2, 1, 2, 2, (uint32_t[]){1, 0});
    tin(&t0, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a0, sizeof(a0));
    tin(&t0, 1, "INPUT1", NR_TYPE_INT32, 1, 16, b0, sizeof(b0));
    tin(&t1, 0, "INPUT0", NR_TYPE_INT32, 2, 16, a1, sizeof(a1));
    tin(&t1, 1, "INPUT1", NR_TYPE_INT32, 2, 16, b1, sizeof(b1));
    tin(&t2, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a2, sizeof(a2));
    tin(&t2, 1, "INPUT1", NR_TYPE_INT32, 1, 16, b2, sizeof(b2));
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 3, &batch));
    ASSERT_OK(t0.item.status);
    ASSERT_OK(t1.item.status);
    ASSERT_OK(t2.item.status);
    const int32_t *s0 = t0.out[0].data, *d0 = t0.out[1].data, *d1 = t1.out[0].data;
    const int32_t *d2 = t2.out[0].data, *s2 = t2.out[1].data;
    EXPECT_EQ_INT(t1.out[0].dims[0], 2);
    EXPECT_EQ_INT(t1.out[0].size, 128);
    EXPECT_STREQ(t2.out[0].name, "OUTPUT1");
    EXPECT_TRUE(t0.out[1].hold == t1.out[0].hold && t1.out[0].hold == t2.out[0].hold);
    EXPECT_EQ_INT(atomic_load(&t0.out[1].hold->refs), 3);
    EXPECT_EQ_INT(atomic_load(&t0.out[0].hold->refs), 2);
    for (int i = 0; i < 16; i++) {
        EXPECT_EQ_INT(s0[i], i + 100);
        EXPECT_EQ_INT(d0[i], i - 100);
        EXPECT_EQ_INT(d1[i], 1000 + i - 1);
        EXPECT_EQ_INT(d1[16 + i], 2000 + i - 2);
        EXPECT_EQ_INT(d2[i], -i - 7);
        EXPECT_EQ_INT(s2[i], -i + 7);
    }
    done(&t0);
    done(&t1);
    /* the instance's buffers are reused: run again with the first request alone */
    titem(&t0, 1, 2, 1, (uint32_t[]){0});
    tin(&t0, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a1 + 16, 64);
    tin(&t0, 1, "INPUT1", NR_TYPE_INT32, 1, 16, b1 + 16, 64);
    ASSERT_OK(run(l.inst, items, 1, &batch));
    EXPECT_EQ_INT(((const int32_t *)t0.out[0].data)[3], 2005);
    EXPECT_EQ_INT(((const int32_t *)t2.out[1].data)[3], 4); /* earlier views stay valid */
    done(&t0);
    done(&t2);
    unload(&l);
    free(path);
}

NR_TEST(misaligned_input_is_copied)
{
    char *path = model_file("identity_fp32");
    loaded_t l;
    ASSERT_OK(load(IDENTITY_CFG("identity_fp32", "TYPE_FP32"), path, &l));
    unsigned char raw[4 * 5 + 1];
    float v[5] = {1.5f, -2, 3, 4, 1e-7f};
    memcpy(raw + 1, v, sizeof(v));
    titem_t t, *items[] = {&t};
    titem(&t, 1, 1, 1, (uint32_t[]){0});
    tin(&t, 0, "INPUT0", NR_TYPE_FP32, 1, 5, raw + 1, sizeof(v));
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    EXPECT_EQ_INT(t.out[0].dims[1], 5);
    EXPECT_TRUE(memcmp(t.out[0].data, v, sizeof(v)) == 0);
    done(&t);
    unload(&l);
    free(path);
}

NR_TEST(string_identity_keeps_bytes_whole)
{
    char *path = model_file("identity_string");
    loaded_t l;
    ASSERT_OK(load(IDENTITY_CFG("identity_string", "TYPE_STRING"), path, &l));
    const char *s0[] = {"hello", "", "a\0b"};
    const size_t n0[] = {5, 0, 3};
    const char *s1[] = {"xyz", "longer string", "\xff\xfe", "4", "five", "six"};
    const size_t n1[] = {3, 13, 2, 1, 4, 3};
    unsigned char b0[64], b1[128], bad[16];
    size_t z0 = ser_strings(b0, s0, n0, 3), z1 = ser_strings(b1, s1, n1, 6);
    uint32_t huge = 100;
    memcpy(bad, &huge, 4);
    memcpy(bad + 4, "abc", 3);
    titem_t t0, t1, t2, *items[] = {&t0, &t1, &t2};
    titem(&t0, 1, 1, 1, (uint32_t[]){0});
    titem(&t1, 2, 1, 1, (uint32_t[]){0});
    titem(&t2, 1, 1, 1, (uint32_t[]){0});
    tin(&t0, 0, "INPUT0", NR_TYPE_STRING, 1, 3, b0, z0);
    tin(&t1, 0, "INPUT0", NR_TYPE_STRING, 2, 3, b1, z1);
    tin(&t2, 0, "INPUT0", NR_TYPE_STRING, 1, 3, bad, 7);
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 3, &batch));
    ASSERT_OK(t0.item.status);
    ASSERT_OK(t1.item.status);
    EXPECT_STATUS(t2.item.status, NR_INVALID_ARG, "incomplete string data for inference input "
                       "'INPUT0', expecting string of length 100 but only 3 bytes available");
    t2.item.status = NULL;
    EXPECT_TRUE(t2.out[0].hold == NULL);
    EXPECT_EQ_INT(t0.out[0].size, z0);
    EXPECT_TRUE(memcmp(t0.out[0].data, b0, z0) == 0);
    EXPECT_EQ_INT(t1.out[0].size, z1);
    EXPECT_TRUE(memcmp(t1.out[0].data, b1, z1) == 0);
    EXPECT_EQ_INT(t1.out[0].dims[0], 2);
    EXPECT_EQ_INT(t1.out[0].dims[1], 3);
    done(&t0);
    done(&t1);
    done(&t2);
    /* too many elements for the shape */
    titem(&t0, 1, 1, 1, (uint32_t[]){0});
    tin(&t0, 0, "INPUT0", NR_TYPE_STRING, 1, 2, b0, z0);
    ASSERT_OK(run(l.inst, items, 1, &batch));
    EXPECT_STATUS(t0.item.status, NR_INVALID_ARG, "unexpected number of string elements 3 for "
                       "inference input 'INPUT0', expecting 2");
    t0.item.status = NULL;
    unload(&l);
    free(path);
}

NR_TEST(fp16_and_bool_identity)
{
    static const struct { const char *model, *cfg; nr_dtype_t dt; } cases[] = {
        {"identity_fp16", IDENTITY_CFG("identity_fp16", "TYPE_FP16"), NR_TYPE_FP16},
        {"identity_bool", IDENTITY_CFG("identity_bool", "TYPE_BOOL"), NR_TYPE_BOOL},
    };
    for (size_t c = 0; c < 2; c++) {
        char *path = model_file(cases[c].model);
        loaded_t l;
        ASSERT_OK(load(cases[c].cfg, path, &l));
        uint16_t h0[3] = {0x3c00, 0xc000, 0x7bff}, h1[6] = {1, 2, 3, 0x8000, 5, 6};
        uint8_t q0[3] = {1, 0, 1}, q1[6] = {0, 0, 1, 1, 0, 1};
        const bool fp16 = cases[c].dt == NR_TYPE_FP16;
        const void *p0 = fp16 ? (const void *)h0 : q0, *p1 = fp16 ? (const void *)h1 : q1;
        size_t z0 = fp16 ? sizeof(h0) : sizeof(q0), z1 = fp16 ? sizeof(h1) : sizeof(q1);
        titem_t t0, t1, *items[] = {&t0, &t1};
        titem(&t0, 1, 1, 1, (uint32_t[]){0});
        titem(&t1, 2, 1, 1, (uint32_t[]){0});
        tin(&t0, 0, "INPUT0", cases[c].dt, 1, 3, p0, z0);
        tin(&t1, 0, "INPUT0", cases[c].dt, 2, 3, p1, z1);
        nr_batch_t batch;
        ASSERT_OK(run(l.inst, items, 2, &batch));
        ASSERT_OK(t0.item.status);
        ASSERT_OK(t1.item.status);
        EXPECT_EQ_INT(t0.out[0].dtype, cases[c].dt);
        EXPECT_EQ_INT(t0.out[0].size, z0);
        EXPECT_TRUE(memcmp(t0.out[0].data, p0, z0) == 0);
        EXPECT_EQ_INT(t1.out[0].size, z1);
        EXPECT_TRUE(memcmp(t1.out[0].data, p1, z1) == 0);
        /* outputs never alias the instance's gather buffer: a second batch leaves them be */
        titem_t u0, u1, *again[] = {&u0, &u1};
        uint8_t zeros[12] = {0};
        titem(&u0, 1, 1, 1, (uint32_t[]){0});
        titem(&u1, 2, 1, 1, (uint32_t[]){0});
        tin(&u0, 0, "INPUT0", cases[c].dt, 1, 3, zeros, z0);
        tin(&u1, 0, "INPUT0", cases[c].dt, 2, 3, zeros, z1);
        ASSERT_OK(run(l.inst, again, 2, &batch));
        EXPECT_TRUE(memcmp(t0.out[0].data, p0, z0) == 0);
        EXPECT_TRUE(memcmp(t1.out[0].data, p1, z1) == 0);
        done(&u0);
        done(&u1);
        done(&t0);
        done(&t1);
        unload(&l);
        free(path);
    }
}

NR_TEST(reshape_maps_shapes_both_ways)
{
    char *path = model_file("identity_fp32");
    loaded_t l;
    /* fixed: request [1,2,3] runs as [1,6] (outputs are compared exactly, so -1 there) */
    ASSERT_OK(load("name: \"r\" backend: \"onnxruntime\" max_batch_size: 4\n"
                     "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2, 3 ] reshape { shape: [ 6 ] } } ]\n"
                     "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n",
                     path, &l));
    float v[6] = {1, 2, 3, 4, 5, 6};
    titem_t t, *items[] = {&t};
    titem(&t, 1, 1, 1, (uint32_t[]){0});
    tin(&t, 0, "INPUT0", NR_TYPE_FP32, 1, 2, v, sizeof(v));
    t.in[0].ndim = 3, t.in[0].dims[2] = 3;
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    EXPECT_EQ_INT(t.out[0].ndim, 2);
    EXPECT_EQ_INT(t.out[0].dims[0], 1);
    EXPECT_EQ_INT(t.out[0].dims[1], 6);
    EXPECT_EQ_INT(t.out[0].size, sizeof(v));
    EXPECT_TRUE(memcmp(t.out[0].data, v, sizeof(v)) == 0);
    done(&t);
    unload(&l);
    /* variable: dims [1,-1] <-> reshape [-1]; request [2,1,3] runs as [2,3], reports [2,1,3] */
    ASSERT_OK(load("name: \"r\" backend: \"onnxruntime\" max_batch_size: 4\n"
                     "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 1, -1 ] reshape { shape: [ -1 ] } } ]\n"
                     "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 1, -1 ] reshape { shape: [ -1 ] } } ]\n",
                     path, &l));
    titem(&t, 2, 1, 1, (uint32_t[]){0});
    tin(&t, 0, "INPUT0", NR_TYPE_FP32, 2, 1, v, sizeof(v));
    t.in[0].ndim = 3, t.in[0].dims[2] = 3;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    EXPECT_EQ_INT(t.out[0].ndim, 3);
    EXPECT_EQ_INT(t.out[0].dims[0], 2);
    EXPECT_EQ_INT(t.out[0].dims[1], 1);
    EXPECT_EQ_INT(t.out[0].dims[2], 3);
    EXPECT_TRUE(memcmp(t.out[0].data, v, sizeof(v)) == 0);
    done(&t);
    unload(&l);
    free(path);
}

NR_TEST(output_batch_dim_checked)
{
    char *path = model_file("bad_batch");
    loaded_t l;
    ASSERT_OK(load(IDENTITY_CFG("bad_batch", "TYPE_FP32"), path, &l));
    float a[2] = {1, 2}, b[4] = {3, 4, 5, 6}; /* [3,2] transposed is [2,3] */
    titem_t t0, t1, *items[] = {&t0, &t1};
    titem(&t0, 1, 1, 1, (uint32_t[]){0});
    titem(&t1, 2, 1, 1, (uint32_t[]){0});
    tin(&t0, 0, "INPUT0", NR_TYPE_FP32, 1, 2, a, sizeof(a));
    tin(&t1, 0, "INPUT0", NR_TYPE_FP32, 2, 2, b, sizeof(b));
    nr_batch_t batch;
    nr_log_settings.warn = false; /* ORT warns that the shape differs from the declared one */
    EXPECT_STATUS(run(l.inst, items, 2, &batch), NR_INTERNAL,
                       "output 'OUTPUT0' of model 'bad_batch' has batch size 2, expected 3");
    nr_log_settings.warn = true;
    EXPECT_TRUE(t0.out[0].hold == NULL && t1.out[0].hold == NULL);
    unload(&l);
    free(path);
}

NR_TEST(no_wanted_output_skips_run)
{
    char *path = simple_file();
    loaded_t l;
    ASSERT_OK(load(SIMPLE_CFG, path, &l));
    int32_t a[16] = {0};
    titem_t t, *items[] = {&t};
    titem(&t, 1, 2, 0, NULL);
    tin(&t, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a, sizeof(a));
    tin(&t, 1, "INPUT1", NR_TYPE_INT32, 1, 16, a, sizeof(a));
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    unload(&l);
    free(path);
}

NR_TEST(wrong_byte_size_fails_that_request)
{
    char *path = simple_file();
    loaded_t l;
    ASSERT_OK(load(SIMPLE_CFG, path, &l));
    int32_t a[32] = {0};
    titem_t t0, t1, *items[] = {&t0, &t1};
    titem(&t0, 1, 2, 1, (uint32_t[]){0});
    titem(&t1, 1, 2, 1, (uint32_t[]){0});
    tin(&t0, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a, 60);
    tin(&t0, 1, "INPUT1", NR_TYPE_INT32, 1, 16, a, 64);
    tin(&t1, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a, 64);
    tin(&t1, 1, "INPUT1", NR_TYPE_INT32, 1, 16, a, 64);
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 2, &batch));
    EXPECT_STATUS(t0.item.status, NR_INVALID_ARG, "input byte size mismatch for input 'INPUT0' "
                       "for model 'simple'. Expected 64, got 60");
    t0.item.status = NULL;
    ASSERT_OK(t1.item.status);
    EXPECT_TRUE(t1.out[0].data != NULL);
    done(&t1);
    unload(&l);
    free(path);
}

NR_TEST(optional_input_absent_or_given)
{
    char *path = model_file("optional_bias");
    loaded_t l;
    nr_log_settings.warn = false; /* ORT warns that BIAS is an overridable initializer */
    nr_status_t *lst = load("name: \"ob\" backend: \"onnxruntime\"\n"
                     "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 3 ] },"
                     " { name: \"BIAS\" data_type: TYPE_FP32 dims: [ 3 ] optional: true } ]\n"
                     "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 3 ] } ]\n",
                     path, &l);
    nr_log_settings.warn = true;
    ASSERT_OK(lst);
    float x[3] = {1, 2, 3}, bias[3] = {100, 200, 300};
    titem_t t, *items[] = {&t};
    titem(&t, 1, 2, 1, (uint32_t[]){0});
    tin(&t, 0, "INPUT0", NR_TYPE_FP32, 3, -1, x, sizeof(x));
    tin(&t, 1, "BIAS", NR_TYPE_FP32, 3, -1, NULL, 0); /* absent: the initializer is used */
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    EXPECT_EQ_INT(t.out[0].ndim, 1);
    EXPECT_TRUE(((const float *)t.out[0].data)[2] == 33.0f);
    done(&t);
    tin(&t, 1, "BIAS", NR_TYPE_FP32, 3, -1, bias, sizeof(bias));
    ASSERT_OK(run(l.inst, items, 1, &batch));
    EXPECT_TRUE(((const float *)t.out[0].data)[2] == 303.0f);
    done(&t);
    unload(&l);
    free(path);
}

NR_TEST(scalar_model_uses_config_dims)
{
    char *path = model_file("scalar_fp32");
    loaded_t l;
    ASSERT_OK(load("name: \"sc\" backend: \"onnxruntime\"\n"
                   "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n"
                   "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n", path, &l));
    float x = 2.5f;
    titem_t t, *items[] = {&t};
    titem(&t, 1, 1, 1, (uint32_t[]){0});
    tin(&t, 0, "INPUT0", NR_TYPE_FP32, 1, -1, &x, sizeof(x));
    nr_batch_t batch;
    ASSERT_OK(run(l.inst, items, 1, &batch));
    ASSERT_OK(t.item.status);
    EXPECT_EQ_INT(t.out[0].ndim, 1);
    EXPECT_EQ_INT(t.out[0].dims[0], 1);
    EXPECT_EQ_INT(t.out[0].size, 4);
    EXPECT_TRUE(*(const float *)t.out[0].data == 2.5f);
    done(&t);
    unload(&l);
    EXPECT_STATUS(load("name: \"sc\" backend: \"onnxruntime\"\n"
                       "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 2 ] } ]\n"
                       "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 1 ] } ]\n", path, &l),
                  NR_INVALID_ARG, "unable to load model 'sc', scalar tensor 'INPUT0', should only "
                  "provide 1 in the model configuration when the model doesn't support batching. "
                  "Model configuration provided: [2].");
    unload(&l);
    free(path);
}

/* Two instances of one model executing at the same time, each on its own thread. */
typedef struct {
    void *inst;
    int base;
    int failures;
} worker_t;

static void *worker(void *arg)
{
    worker_t *w = arg;
    for (int iter = 0; iter < 200; iter++) {
        int32_t a[32], b[32];
        for (int i = 0; i < 32; i++)
            a[i] = w->base + iter * 100 + i, b[i] = iter;
        titem_t t0, t1;
        titem(&t0, 1, 2, 2, (uint32_t[]){0, 1});
        titem(&t1, 1, 2, 1, (uint32_t[]){0});
        tin(&t0, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a, 64);
        tin(&t0, 1, "INPUT1", NR_TYPE_INT32, 1, 16, b, 64);
        tin(&t1, 0, "INPUT0", NR_TYPE_INT32, 1, 16, a + 16, 64);
        tin(&t1, 1, "INPUT1", NR_TYPE_INT32, 1, 16, b + 16, 64);
        nr_batch_item_t *ptrs[2] = {&t0.item, &t1.item};
        nr_batch_t batch = {.items = ptrs, .n = iter % 2 ? 2 : 1, .total_batch_size = iter % 2 ? 2 : 1};
        nr_status_t *st = B->execute(w->inst, &batch);
        const int32_t *s0 = t0.out[0].data, *s1 = t1.out[0].data;
        if (st || !s0 || s0[5] != a[5] + iter || (batch.n == 2 && (!s1 || s1[7] != a[23] + iter)))
            w->failures++;
        nr_status_free(st);
        done(&t0);
        if (batch.n == 2)
            done(&t1);
    }
    return NULL;
}

NR_TEST(instances_execute_concurrently)
{
    char *path = simple_file();
    loaded_t l;
    ASSERT_OK(load(SIMPLE_CFG, path, &l));
    void *second = NULL;
    nr_instance_info_t info = {.name = "simple_0_1", .kind = NR_KIND_CPU, .intra_op_threads = 1};
    ASSERT_OK(B->instance_create(l.model, &info, &second));
    worker_t w[2] = {{.inst = l.inst, .base = 0}, {.inst = second, .base = 1000000}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, &w[i]);
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    EXPECT_EQ_INT(w[0].failures, 0);
    EXPECT_EQ_INT(w[1].failures, 0);
    B->instance_destroy(second);
    unload(&l);
    free(path);
}

/* The example repository's models with their own config.pbtxt (when `make models` ran). */
static nr_status_t *load_example(const char *name, loaded_t *l, bool *present)
{
    struct stat sb;
    char *cfg_path = nr_asprintf("examples/model_repository/%s/config.pbtxt", name);
    char *path = nr_asprintf("examples/model_repository/%s/1/model.onnx", name);
    nr_status_t *st = NULL;
    memset(l, 0, sizeof(*l));
    *present = stat(path, &sb) == 0;
    if (*present)
        st = nr_cfg_parse_file(cfg_path, &l->cfg);
    if (*present && !st)
        st = B->model_load(l->cfg, NULL, path, &l->model);
    nr_instance_info_t info = {.name = "ex_0", .kind = NR_KIND_CPU, .intra_op_threads = 1};
    if (*present && !st)
        st = B->instance_create(l->model, &info, &l->inst);
    free(cfg_path);
    free(path);
    return st;
}

NR_TEST(examples_load_and_run)
{
    static const char *const names[] = {"simple", "identity_fp32", "inception_onnx", "densenet_onnx"};
    for (size_t i = 0; i < 4; i++) {
        loaded_t l;
        bool present;
        ASSERT_OK(load_example(names[i], &l, &present));
        if (present && strcmp(names[i], "densenet_onnx") == 0) {
            /* max_batch_size 0 with reshapes: [3,224,224] runs as [1,3,224,224]; the model's
             * [1,1000,1,1] comes back as the config's [1000] */
            float *img = nr_calloc(3 * 224 * 224, sizeof(float));
            titem_t t, *items[] = {&t};
            titem(&t, 1, 1, 1, (uint32_t[]){0});
            tin(&t, 0, "data_0", NR_TYPE_FP32, 3, 224, img, 3 * 224 * 224 * sizeof(float));
            t.in[0].ndim = 3, t.in[0].dims[2] = 224;
            nr_batch_t batch;
            EXPECT_OK(run(l.inst, items, 1, &batch));
            EXPECT_OK(t.item.status);
            t.item.status = NULL;
            EXPECT_EQ_INT(t.out[0].ndim, 1);
            EXPECT_EQ_INT(t.out[0].dims[0], 1000);
            EXPECT_EQ_INT(t.out[0].size, 4000);
            done(&t);
            free(img);
        }
        unload(&l);
    }
}

/* ---- auto-complete ---- */

static nr_model_config_t *autocompleted(const char *text, const char *path, nr_status_t **st)
{
    nr_model_config_t *cfg = cfg_of(text);
    *st = cfg ? B->model_autocomplete(cfg, path) : nr_status_new(NR_INTERNAL, "bad config");
    return cfg;
}

NR_TEST(autocomplete_simple_like_triton)
{
    char *path = simple_file();
    nr_status_t *st;
    nr_log_settings.warn = false;
    nr_model_config_t *cfg = autocompleted("name: \"simple_noconfig\"", path, &st);
    nr_log_settings.warn = true;
    ASSERT_OK(st);
    EXPECT_EQ_INT(cfg->max_batch_size, 4);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DYNAMIC);
    ASSERT_TRUE(cfg->n_input == 2 && cfg->n_output == 2);
    EXPECT_STREQ(cfg->input[0].name, "INPUT1"); /* Triton 2.51 lists INPUT1, INPUT0 */
    EXPECT_STREQ(cfg->input[1].name, "INPUT0");
    EXPECT_STREQ(cfg->output[0].name, "OUTPUT1");
    EXPECT_STREQ(cfg->output[1].name, "OUTPUT0");
    EXPECT_EQ_INT(cfg->input[0].data_type, NR_TYPE_INT32);
    EXPECT_EQ_INT(cfg->output[1].data_type, NR_TYPE_INT32);
    ASSERT_TRUE(cfg->input[0].dims.n == 1);
    EXPECT_EQ_INT(cfg->input[0].dims.v[0], 16);
    EXPECT_TRUE(!cfg->input[0].has_reshape);
    /* the completed config loads */
    void *model = NULL;
    ASSERT_OK(B->model_load(cfg, NULL, path, &model));
    B->model_unload(model);
    nr_cfg_free(cfg);
    free(path);
}

NR_TEST(autocomplete_order_matches_libstdcxx)
{
    /* expected orders printed by a g++ 12 std::unordered_map<std::string,int> */
    static const char *const want_in[] = {
        "in_tau", "in_sigma", "in_rho", "in_pi", "in_omicron", "in_xi", "in_alpha",
        "in_zeta", "in_gamma", "in_beta", "in_eta", "in_mu", "in_delta", "in_kappa",
        "in_lambda", "in_upsilon", "in_theta", "in_iota", "in_epsilon", "in_nu"};
    static const char *const want_out[] = {
        "out_upsilon", "out_tau", "out_sigma", "out_rho", "out_pi", "out_omicron",
        "out_xi", "out_alpha", "out_theta", "out_beta", "out_zeta", "out_lambda",
        "out_iota", "out_kappa", "out_delta", "out_eta", "out_mu", "out_gamma",
        "out_epsilon", "out_nu"};
    char *path = model_file("many_io");
    nr_status_t *st;
    nr_model_config_t *cfg = autocompleted("name: \"m\" max_batch_size: 2", path, &st);
    ASSERT_OK(st);
    ASSERT_TRUE(cfg->n_input == 20 && cfg->n_output == 20);
    for (size_t i = 0; i < 20; i++) {
        EXPECT_STREQ(cfg->input[i].name, want_in[i]);
        EXPECT_STREQ(cfg->output[i].name, want_out[i]);
    }
    EXPECT_EQ_INT(cfg->max_batch_size, 2);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DYNAMIC);
    nr_cfg_free(cfg);
    free(path);
    const char *const two[] = {"INPUT0", "INPUT1"};
    size_t order[2];
    nr__ort_stdmap_order(two, 2, order);
    EXPECT_EQ_INT(order[0], 1);
    EXPECT_EQ_INT(order[1], 0);
}

NR_TEST(autocomplete_not_batchable_and_scalar)
{
    char *path = model_file("fixed_fp32");
    nr_status_t *st;
    nr_model_config_t *cfg = autocompleted("name: \"f\"", path, &st);
    ASSERT_OK(st);
    EXPECT_EQ_INT(cfg->max_batch_size, 0);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DEFAULT);
    ASSERT_TRUE(cfg->n_input == 1 && cfg->input[0].dims.n == 2);
    EXPECT_EQ_INT(cfg->input[0].dims.v[0], 2);
    EXPECT_EQ_INT(cfg->input[0].dims.v[1], 3);
    nr_cfg_free(cfg);
    cfg = autocompleted("name: \"f\" max_batch_size: 8", path, &st);
    EXPECT_STATUS(st, NR_INVALID_ARG, "autofill failed for model 'f': model does not support "
                       "batching while non-zero max_batch_size is specified");
    nr_cfg_free(cfg);
    free(path);
    path = model_file("scalar_fp32");
    cfg = autocompleted("name: \"s\"", path, &st);
    ASSERT_OK(st);
    ASSERT_TRUE(cfg->n_output == 1 && cfg->output[0].dims.n == 1);
    EXPECT_EQ_INT(cfg->output[0].dims.v[0], 1);
    EXPECT_TRUE(!cfg->output[0].has_reshape);
    nr_cfg_free(cfg);
    free(path);
}

NR_TEST(autocomplete_partial_and_skip)
{
    char *path = model_file("identity_fp32");
    nr_status_t *st;
    /* outputs missing: only they are filled; the given max_batch_size stays */
    nr_model_config_t *cfg = autocompleted(
        "name: \"p\" max_batch_size: 8 input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]",
        path, &st);
    ASSERT_OK(st);
    EXPECT_EQ_INT(cfg->max_batch_size, 8);
    ASSERT_TRUE(cfg->n_input == 1 && cfg->n_output == 1);
    EXPECT_STREQ(cfg->output[0].name, "OUTPUT0");
    EXPECT_EQ_INT(cfg->output[0].dims.v[0], -1);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DYNAMIC);
    nr_cfg_free(cfg);
    /* both given: nothing changes, max_batch_size stays 0 (an INFO line says so) */
    nr_log_settings.info = false;
    cfg = autocompleted("name: \"q\" input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]"
                        " output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1, -1 ] } ]",
                        path, &st);
    nr_log_settings.info = true;
    ASSERT_OK(st);
    EXPECT_EQ_INT(cfg->max_batch_size, 0);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DEFAULT);
    nr_cfg_free(cfg);
    free(path);
}

/* ---- load errors ---- */

static nr_status_t *load_only(const char *text, const char *path)
{
    loaded_t l;
    nr_status_t *st = load(text, path, &l);
    unload(&l);
    return st;
}

NR_TEST(error_missing_file_and_dir)
{
    EXPECT_STATUS(load_only(SIMPLE_CFG, "/nonexistent/1/model.onnx"), NR_INTERNAL,
                       "failed to stat file /nonexistent/1/model.onnx");
    char dir[] = "/tmp/nr_ort_testXXXXXX";
    ASSERT_TRUE(mkdtemp(dir) != NULL);
    char *want = nr_asprintf("unable to find '%s/model.onnx' for model instance 'simple'", dir);
    EXPECT_STATUS(load_only(SIMPLE_CFG, dir), NR_UNAVAILABLE, want);
    free(want);
    rmdir(dir);
}

NR_TEST(error_corrupt_model)
{
    char *path = model_file("broken");
    char *want = nr_asprintf("onnx runtime error 7: Load model from %s failed:Protobuf parsing failed.",
                             path);
    EXPECT_STATUS(load_only(IDENTITY_CFG("broken", "TYPE_FP32"), path), NR_INTERNAL, want);
    free(want);
    free(path);
}

NR_TEST(error_config_vs_model)
{
    char *path = simple_file();
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 16 ] }, { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "unable to load model 'simple', configuration expects datatype TYPE_FP32 for input 'INPUT0', "
        "model provides TYPE_INT32");
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "unable to load model 'simple', configuration expects 1 inputs, model provides 2");
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"X\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "unexpected inference input 'X', allowed inputs are: INPUT0, INPUT1");
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 4, 4 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "model 'simple', tensor 'INPUT1': the model expects 2 dimensions (shape [-1,16]) but the model "
        "configuration specifies 3 dimensions (an initial batch dimension because max_batch_size > 0 "
        "followed by the explicit tensor shape, making complete shape [-1,4,4])");
    EXPECT_STATUS(load_only(
        "name: \"simple\"\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "model 'simple', tensor 'INPUT0': the model expects 2 dimensions (shape [-1,16]) but the model "
        "configuration specifies 1 dimensions (shape [16])");
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] optional: true }, { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "unable to load model 'simple', configuration expects 1 inputs, model provides 2");
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT9\" data_type: TYPE_INT32 dims: [ 16 ] } ]", path), NR_INVALID_ARG,
        "unexpected inference output 'OUTPUT9', allowed outputs are: OUTPUT0, OUTPUT1");
    free(path);
    path = model_file("identity_string");
    EXPECT_STATUS(load_only(IDENTITY_CFG("s", "TYPE_FP32"), path), NR_INVALID_ARG,
                       "unable to load model 's', configuration expects datatype TYPE_FP32 for input "
                       "'INPUT0', model provides TYPE_BYTES");
    free(path);
}

NR_TEST(error_optional_with_batching)
{
    char *path = model_file("many_io");
    nr_status_t *st;
    nr_model_config_t *cfg = autocompleted("name: \"o\" max_batch_size: 2", path, &st);
    ASSERT_OK(st);
    cfg->input[0].optional = true;
    cfg->n_input = 1; /* count would fail first otherwise; optional ones are not counted */
    void *model = NULL;
    EXPECT_TRUE(is_err_prefix(B->model_load(cfg, NULL, path, &model), NR_INVALID_ARG,
                              "unable to load model 'o', configuration expects 0 inputs"));
    cfg->n_input = 20;
    EXPECT_STATUS(B->model_load(cfg, NULL, path, &model), NR_INVALID_ARG,
                       "unable to load model 'o', configuration expects 19 inputs, model provides 20");
    nr_cfg_free(cfg);
    /* not counted, then rejected for batching */
    char *p2 = simple_file();
    EXPECT_STATUS(load_only(
        "name: \"simple\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] },"
        " { name: \"INPUT2\" data_type: TYPE_INT32 dims: [ 16 ] optional: true } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]", p2), NR_INVALID_ARG,
        "unable to load model 'simple', optional input 'INPUT2' is not supported for models that "
        "support batching");
    free(p2);
    free(path);
}

/* Runs one [1,2] FP32 request through a loaded identity_fp32 and checks the echo. */
static void expect_identity_echo(loaded_t *l, float a, float b)
{
    float v[2] = {a, b};
    titem_t t, *items[] = {&t};
    titem(&t, 1, 1, 1, (uint32_t[]){0});
    tin(&t, 0, "INPUT0", NR_TYPE_FP32, 1, 2, v, sizeof(v));
    nr_batch_t batch;
    ASSERT_OK(run(l->inst, items, 1, &batch));
    EXPECT_TRUE(memcmp(t.out[0].data, v, sizeof(v)) == 0);
    done(&t);
}

NR_TEST(error_parameters)
{
    char *path = model_file("identity_fp32");
    EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                 "parameters { key: \"execution_mode\" value { string_value: \"2\" } }",
                                 path), NR_INVALID_ARG,
                       "Invalid configuration value provided. Expected values for  execution_mode are 0 "
                       "or 1 but got 2 .");
    EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                 "parameters { key: \"intra_op_thread_count\" value { string_value: \"abc\" } }",
                                 path), NR_INVALID_ARG, "failed to convert 'abc' to integral number");
    EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                 "parameters { key: \"enable_mem_arena\" value { string_value: \"maybe\" } }",
                                 path), NR_INVALID_ARG, "failed to convert 'maybe' to boolean");
    /* valid settings load and run */
    loaded_t l;
    ASSERT_OK(load(IDENTITY_CFG("i", "TYPE_FP32")
                     "parameters [ { key: \"intra_op_thread_count\" value { string_value: \"2\" } },"
                     " { key: \"inter_op_thread_count\" value { string_value: \"1\" } },"
                     " { key: \"execution_mode\" value { string_value: \"1\" } },"
                     " { key: \"enable_mem_arena\" value { string_value: \"On\" } },"
                     " { key: \"enable_mem_pattern\" value { string_value: \"true\" } },"
                     " { key: \"allow_spinning\" value { string_value: \"1\" } },"
                     " { key: \"memory.enable_memory_arena_shrinkage\" value { string_value: \"cpu:0\" } } ]\n"
                     "optimization { graph { level: 2 } }",
                     path, &l));
    expect_identity_echo(&l, 7, 8);
    unload(&l);
    free(path);
}

/* Threads of this process named "ort-intra" (the background-priority intra-op workers);
 * *all_nice is set false when one of them does not run at nice `nice`. */
static int count_workers(int nice, bool *all_nice)
{
    int n = 0;
    *all_nice = true;
    DIR *d = opendir("/proc/self/task");
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[300], buf[512] = "";
        snprintf(p, sizeof(p), "/proc/self/task/%s/stat", e->d_name);
        FILE *f = fopen(p, "r");
        if (f == NULL)
            continue;
        size_t len = fread(buf, 1, sizeof(buf) - 1, f);
        fclose(f);
        buf[len] = 0;
        char *close = strrchr(buf, ')');
        if (strstr(buf, "(ort-intra)") == NULL || close == NULL)
            continue;
        n++;
        /* after "comm)": state ppid pgrp session tty tpgid flags minflt cminflt majflt
         * cmajflt utime stime cutime cstime priority nice */
        long v = 0;
        char *s = close + 2;
        for (int field = 3; field <= 19 && s; field++) {
            if (field == 19)
                v = strtol(s, NULL, 10);
            s = strchr(s, ' ');
            s = s ? s + 1 : NULL;
        }
        if (v != nice)
            *all_nice = false;
    }
    if (d)
        closedir(d);
    return n;
}

NR_TEST(intra_op_worker_nice)
{
    char *path = model_file("identity_fp32");
    EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                 "parameters { key: \"intra_op_worker_nice\" value { string_value: \"20\" } }",
                                 path), NR_INVALID_ARG,
                       "intra_op_worker_nice must be between 0 and 19, got 20");
    /* sizing: explicit count, else all cores with background workers, else the share */
    nr_instance_info_t info = {.intra_op_threads = 2, .cpu_count = 8};
    nr__ort_opts_t o = {.worker_nice = 0};
    EXPECT_EQ_INT(nr__ort_intra_threads(&o, &info), 2);
    o.worker_nice = 19;
    EXPECT_EQ_INT(nr__ort_intra_threads(&o, &info), 8);
    o.intra_op_threads = 3;
    EXPECT_EQ_INT(nr__ort_intra_threads(&o, &info), 3);
    /* default: one intra-op thread (the share of load_kind's info), no workers */
    bool all_nice;
    loaded_t l;
    ASSERT_OK(load(IDENTITY_CFG("i", "TYPE_FP32"), path, &l));
    EXPECT_EQ_INT(count_workers(19, &all_nice), 0);
    unload(&l);
    /* nice 19: a pool over the 3 cores, i.e. 2 workers beside the caller, both at nice 19,
     * and they are joined when the session goes */
    ASSERT_OK(load(IDENTITY_CFG("i", "TYPE_FP32")
                     "parameters { key: \"intra_op_worker_nice\" value { string_value: \"19\" } }",
                     path, &l));
    /* each worker lowers its own priority once it starts running: wait for that */
    int workers = 0;
    for (int i = 0; i < 500 && !(workers == 2 && all_nice); i++) {
        workers = count_workers(19, &all_nice);
        if (!(workers == 2 && all_nice))
            usleep(10000);
    }
    EXPECT_EQ_INT(workers, 2);
    EXPECT_TRUE(all_nice);
    expect_identity_echo(&l, 1, 2);
    unload(&l);
    /* joined: a thread that has just exited may stay listed in /proc for a moment */
    for (int i = 0; i < 500 && (workers = count_workers(19, &all_nice)) != 0; i++)
        usleep(10000);
    EXPECT_EQ_INT(workers, 0);
    free(path);
}

NR_TEST(error_accelerators)
{
    char *path = model_file("identity_fp32");
    if (!nr__ort_has_provider("OpenVINOExecutionProvider")) {
        char *want = nr_asprintf("Execution Accelerator 'openvino' is requested, but the ONNX "
                                 "Runtime library loaded (%s) has no OpenVINO provider; the "
                                 "onnxruntime-openvino build has it (scripts/setup.sh installs it)",
                                 nr__ort_library_version());
        EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                     "optimization { execution_accelerators { cpu_execution_accelerator"
                                     " [ { name: \"openvino\" } ] } }", path),
                           NR_INVALID_ARG, want);
        free(want);
    } else { /* a parameter OpenVINO does not take names itself */
        EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                     "optimization { execution_accelerators { cpu_execution_accelerator"
                                     " [ { name: \"openvino\" parameters { key: \"num_streamz\""
                                     " value: \"2\" } } ] } }", path),
                           NR_INVALID_ARG,
                           "unknown parameter 'num_streamz' for Execution Accelerator 'openvino'");
    }
    EXPECT_STATUS(load_only(IDENTITY_CFG("i", "TYPE_FP32")
                                 "optimization { execution_accelerators { cpu_execution_accelerator"
                                 " [ { name: \"fastcpu\" } ] } }", path),
                       NR_INVALID_ARG, "unknown Execution Accelerator 'fastcpu' is requested");
    /* GPU accelerators are read only for GPU instances: a CPU instance ignores them */
    loaded_t l;
    const char *gpu_cfg = IDENTITY_CFG("i", "TYPE_FP32")
        "optimization { execution_accelerators { gpu_execution_accelerator [ { name: \"tensorrt\""
        " parameters { key: \"precision_mode\" value: \"FP8\" } } ] } }";
    ASSERT_OK(load(gpu_cfg, path, &l));
    unload(&l);
    EXPECT_STATUS(load_kind(gpu_cfg, path, NR_KIND_GPU, &l), NR_INVALID_ARG,
                       "unsupported precision mode 'FP8' is requested");
    unload(&l);
    EXPECT_STATUS(load_kind(IDENTITY_CFG("i", "TYPE_FP32")
                                 "optimization { execution_accelerators { gpu_execution_accelerator [ {"
                                 " name: \"tensorrt\" parameters { key: \"bogus\" value: \"1\" } } ] } }",
                                 path, NR_KIND_GPU, &l), NR_INVALID_ARG,
                       "unknown parameter 'bogus' is provided for TensorRT Execution Accelerator");
    unload(&l);
    EXPECT_STATUS(load_kind(IDENTITY_CFG("i", "TYPE_FP32")
                                 "optimization { execution_accelerators { gpu_execution_accelerator [ {"
                                 " name: \"warp\" } ] } }", path, NR_KIND_GPU, &l), NR_INVALID_ARG,
                       "unknown Execution Accelerator 'warp' is requested");
    unload(&l);
    if (!nr__ort_has_provider("TensorrtExecutionProvider")) {
        char *want = nr_asprintf("Execution Accelerator 'tensorrt' is requested, but the ONNX "
                                 "Runtime library loaded (%s) has no TensorRT provider; the "
                                 "onnxruntime-gpu build has it (make gpu-backend, then "
                                 "--backend-directory=.deps/backends-gpu)",
                                 nr__ort_library_version());
        EXPECT_STATUS(load_kind(IDENTITY_CFG("i", "TYPE_FP32")
                                     "optimization { execution_accelerators { gpu_execution_accelerator [ {"
                                     " name: \"tensorrt\" parameters { key: \"precision_mode\" value: \"FP16\" } } ] } }",
                                     path, NR_KIND_GPU, &l), NR_INVALID_ARG, want);
        unload(&l);
        free(want);
    }
    free(path);
}

NR_TEST(error_kind_gpu_without_cuda)
{
    if (nr__ort_has_provider("CUDAExecutionProvider"))
        return; /* a CUDA build: covered on GPU machines */
    char *path = model_file("identity_fp32");
    loaded_t l;
    char *want = nr_asprintf("A KIND_GPU instance is requested, but the ONNX Runtime library "
                             "loaded (%s) has no CUDA provider; the onnxruntime-gpu build has it "
                             "(make gpu-backend, then --backend-directory=.deps/backends-gpu)",
                             nr__ort_library_version());
    EXPECT_STATUS(load_kind(IDENTITY_CFG("i", "TYPE_FP32"), path, NR_KIND_GPU, &l), NR_INVALID_ARG,
                  want);
    free(want);
    unload(&l);
    free(path);
}

NR_TEST_MAIN()
