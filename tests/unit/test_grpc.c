/* test_grpc.c - the gRPC frontend without sockets: the hand-written part of
 * the reply encoding (raw_output_contents appended after protobuf-c's header,
 * the ModelStreamInferResponse wrapper around it, slices over the backend's
 * buffers for large outputs) decoded again with protobuf-c, the stream's
 * error messages, and the request side's joining of a message's slices and
 * allocation failures during the unpack.
 */
#include "../../src/common/alloc.h"
#include "../../src/common/log.h"
#include "../../src/frontends/grpc/grpc_int.h"
#include "fake_model.h"
#include "nr_test.h"
#include "params.h"

#include <stdlib.h>
#include <string.h>

static const char *CFG =
    "name: \"m\"\nbackend: \"onnxruntime\"\nmax_batch_size: 4\n"
    "input [ { name: \"IN\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
    "output [ { name: \"B\" data_type: TYPE_FP32 dims: [ -1 ] },"
    " { name: \"A\" data_type: TYPE_INT32 dims: [ -1 ] } ]\n";

static nr_model_t *fake_model(void)
{
    nr_model_t *m = nr_fake_model(CFG, false);
    if (m != NULL) {
        m->version = 3;
        strcpy(m->version_str, "3");
    }
    return m;
}

/* A backend buffer kept alive by a hold, as the ONNX Runtime backend's outputs are. */
typedef struct {
    nr_hold_t hold;
    int *released;
    char *data;
} buf_hold_t;

static void release(nr_hold_t *h)
{
    buf_hold_t *b = (buf_hold_t *)h;
    (*b->released)++;
    free(b->data);
    free(b);
}

static void set_out(nr_req_t *req, size_t i, uint32_t c, size_t n_elem, int *released)
{
    buf_hold_t *b = nr_calloc(1, sizeof(*b));
    atomic_init(&b->hold.refs, 1);
    b->hold.release = release;
    b->released = released;
    b->data = nr_malloc(n_elem * 4);
    for (size_t k = 0; k < n_elem; k++) {
        int32_t v = (int32_t)(k + 100 * c);
        memcpy(b->data + 4 * k, &v, 4);
    }
    nr_tensor_t *t = &req->outputs[i];
    memset(t, 0, sizeof(*t));
    t->name = req->model->cfg->output[c].name;
    t->dtype = c == 0 ? NR_TYPE_FP32 : NR_TYPE_INT32;
    t->ndim = 2;
    t->dims[0] = 1;
    t->dims[1] = (int64_t)n_elem;
    t->data = b->data;
    t->size = n_elem * 4;
    t->hold = &b->hold;
}

/* A request with both outputs requested and filled with n_elem elements each. */
static nr_grpc_infer_t *finished(nr_model_t *m, size_t n_elem, int *released)
{
    nr_grpc_infer_t *inf = nr_calloc(1, sizeof(*inf));
    inf->arena = nr_arena_init(4096);
    nr_infer_init(&inf->base, NULL, m, inf);
    EXPECT_OK(nr_req_set_id(inf->base.req, "id-7", 4));
    int idx;
    nr_status_t *st = nr_infer_output(&inf->base, "B", 1, &idx);
    nr_status_free(st);
    st = nr_infer_output(&inf->base, "A", 1, &idx);
    nr_status_free(st);
    set_out(inf->base.req, 0, 0, n_elem, released);
    set_out(inf->base.req, 1, 1, n_elem, released);
    return inf;
}

static Inference__ModelInferResponse *decode(grpc_byte_buffer *bb, bool stream,
                                             Inference__ModelStreamInferResponse **outer)
{
    grpc_slice s;
    nr_status_t *st = nr_grpc_payload(bb, &s);
    EXPECT_OK(st);
    Inference__ModelInferResponse *r = NULL;
    *outer = NULL;
    if (stream) {
        *outer = inference__model_stream_infer_response__unpack(NULL, GRPC_SLICE_LENGTH(s),
                                                                GRPC_SLICE_START_PTR(s));
        r = *outer ? (*outer)->infer_response : NULL;
    } else {
        r = inference__model_infer_response__unpack(NULL, GRPC_SLICE_LENGTH(s),
                                                    GRPC_SLICE_START_PTR(s));
    }
    grpc_slice_unref(s);
    return r;
}

static void check_reply(size_t n_elem, bool stream)
{
    nr_model_t *m = fake_model();
    ASSERT_NOT_NULL(m);
    int released = 0;
    nr_grpc_infer_t *inf = finished(m, n_elem, &released);
    grpc_byte_buffer *bb = NULL;
    ASSERT_OK(nr_grpc_infer_reply(inf, stream, true, &bb));
    size_t slices = bb->data.raw.slice_buffer.count;
    nr_grpc_infer_free(inf);
    /* large outputs are slices that still hold the backend's buffers */
    EXPECT_EQ_INT(released, n_elem * 4 > (64u << 10) ? 0 : 2);
    EXPECT_TRUE(n_elem * 4 > (64u << 10) ? slices > 1 : slices == 1);
    Inference__ModelStreamInferResponse *outer;
    Inference__ModelInferResponse *r = decode(bb, stream, &outer);
    ASSERT_NOT_NULL(r);
    EXPECT_STREQ(r->model_name, "m");
    EXPECT_STREQ(r->model_version, "3");
    EXPECT_STREQ(r->id, "id-7");
    ASSERT_EQ_U64(r->n_outputs, 2);
    EXPECT_STREQ(r->outputs[0]->name, "A"); /* by name */
    EXPECT_STREQ(r->outputs[0]->datatype, "INT32");
    EXPECT_STREQ(r->outputs[1]->name, "B");
    EXPECT_EQ_U64(r->outputs[1]->n_shape, 2);
    EXPECT_EQ_INT(r->outputs[1]->shape[1], (int64_t)n_elem);
    ASSERT_EQ_U64(r->n_raw_output_contents, 2);
    for (size_t o = 0; o < 2; o++) {
        ASSERT_EQ_U64(r->raw_output_contents[o].len, n_elem * 4);
        int32_t last;
        memcpy(&last, r->raw_output_contents[o].data + 4 * (n_elem - 1), 4);
        EXPECT_EQ_INT(last, (int32_t)(n_elem - 1 + 100 * (o == 0 ? 1 : 0)));
    }
    EXPECT_EQ_U64(r->n_parameters, stream ? 1 : 0);
    if (stream) {
        EXPECT_STREQ(r->parameters[0]->key, "triton_final_response");
        EXPECT_TRUE(r->parameters[0]->value->bool_param);
        EXPECT_STREQ(outer->error_message, "");
        inference__model_stream_infer_response__free_unpacked(outer, NULL);
    } else {
        inference__model_infer_response__free_unpacked(r, NULL);
    }
    grpc_byte_buffer_destroy(bb);
    EXPECT_EQ_INT(released, 2); /* the reply gone, so are the holds */
    nr_fake_model_free(m);
}

NR_TEST(reply_small_is_one_copy)
{
    check_reply(16, false);
}

NR_TEST(reply_large_is_slices_over_backend_buffers)
{
    check_reply(100000, false);
}

NR_TEST(stream_reply_wraps_the_response)
{
    check_reply(16, true);
    check_reply(100000, true);
}

NR_TEST(stream_errors)
{
    nr_status_t *st = nr_status_new(NR_INVALID_ARG, "bad thing");
    Inference__ModelStreamInferResponse *outer;
    grpc_byte_buffer *bb = nr_grpc_stream_error(NULL, false, true, st);
    Inference__ModelInferResponse *r = decode(bb, true, &outer);
    grpc_byte_buffer_destroy(bb);
    ASSERT_NOT_NULL(outer);
    EXPECT_STREQ(outer->error_message, "bad thing");
    ASSERT_NOT_NULL(r); /* present and empty, as Triton sends it */
    EXPECT_STREQ(r->id, "");
    inference__model_stream_infer_response__free_unpacked(outer, NULL);
    nr_status_free(st);
}

NR_TEST(parse_refuses_garbage)
{
    nr_grpc_infer_t *inf;
    const uint8_t junk[] = {0xff, 0xff, 0xff};
    EXPECT_STATUS(nr_grpc_infer_parse(NULL, junk, sizeof(junk), false, &inf), NR_INVALID_ARG,
                  "failed to parse the ModelInferRequest message");
    nr_grpc_infer_free(inf);
}

/* nr_grpc_arena_allocator's bookkeeping, with an allocation that always fails. */
static void *refuse(void *data, size_t size)
{
    nr_grpc_alloc_t *a = data;
    if (a->failed == 0)
        a->failed = size;
    return NULL;
}

NR_TEST(payload_of_several_slices_is_joined)
{
    grpc_slice parts[3] = {grpc_slice_from_copied_string("abc"), grpc_empty_slice(),
                           grpc_slice_from_copied_string("defgh")};
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(parts, 3);
    grpc_slice s;
    ASSERT_OK(nr_grpc_payload(bb, &s));
    EXPECT_TRUE(GRPC_SLICE_LENGTH(s) == 8 && memcmp(GRPC_SLICE_START_PTR(s), "abcdefgh", 8) == 0);
    grpc_slice_unref(s);
    grpc_byte_buffer_destroy(bb);
    /* one slice (big enough not to be inlined): that slice itself, no copy */
    char big[256];
    memset(big, 'x', sizeof(big));
    grpc_slice one = grpc_slice_from_copied_buffer(big, sizeof(big));
    bb = grpc_raw_byte_buffer_create(&one, 1);
    ASSERT_OK(nr_grpc_payload(bb, &s));
    EXPECT_TRUE(GRPC_SLICE_START_PTR(s) == GRPC_SLICE_START_PTR(one));
    grpc_slice_unref(s);
    grpc_slice_unref(one);
    grpc_byte_buffer_destroy(bb);
    ASSERT_OK(nr_grpc_payload(NULL, &s)); /* no message: empty */
    EXPECT_EQ_INT(GRPC_SLICE_LENGTH(s), 0);
    for (int i = 0; i < 3; i++)
        grpc_slice_unref(parts[i]);
}

NR_TEST(unpack_fails_when_the_allocator_does)
{
    /* protobuf-c gives up (no crash) when an allocation returns NULL, as
     * nr_grpc_arena_allocator's does when memory cannot be had */
    uint8_t msg[64];
    Inference__ModelInferRequest r = INFERENCE__MODEL_INFER_REQUEST__INIT;
    r.model_name = "m";
    size_t len = inference__model_infer_request__pack(&r, msg);
    nr_arena_t arena = nr_arena_init(1);
    nr_grpc_alloc_t alloc = {&arena, 0};
    ProtobufCAllocator al = nr_grpc_arena_allocator(&alloc);
    al.alloc = refuse;
    EXPECT_NULL(inference__model_infer_request__unpack(&al, len, msg));
    EXPECT_TRUE(alloc.failed > 0);
    nr_arena_free(&arena);
}

NR_TEST(params_grpc_texts)
{
    nr_model_t *m = fake_model();
    ASSERT_NOT_NULL(m);
    nr_infer_t inf = {0};
    nr_infer_init(&inf, NULL, m, NULL);
    nr_param_t p = p_uint("priority", 2);
    EXPECT_OK(nr_grpc_check_param(&inf, &p));
    EXPECT_EQ_INT(inf.req->priority, 2);
    p = p_int("timeout", 1000000);
    EXPECT_OK(nr_grpc_check_param(&inf, &p));
    EXPECT_EQ_U64(inf.req->timeout_us, 1000000);
    p = p_bool("triton_enable_empty_final_response", true); /* what perf_analyzer sends */
    EXPECT_OK(nr_grpc_check_param(&inf, &p));
    p = p_int("triton_x", 1);
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "parameter keys starting with 'triton_' are reserved for Triton usage. Only "
                  "the following keys starting with 'triton_' are allowed: "
                  "triton_enable_empty_final_response");
    p = p_str("priority", "1");
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "invalid value type for 'priority' parameter, expected int64_param or "
                  "uint64_param.");
    p = p_int("priority", -1);
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "invalid value for 'priority', expected value >= 0.");
    p = p_uint("timeout", 1);
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "invalid value type for 'timeout' parameter, expected int64_param.");
    p = p_bool("sequence_id", true);
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "invalid value type for 'sequence_id' parameter, expected int64_param or "
                  "string_param.");
    p = p_other("custom");
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "invalid value type for 'custom' parameter, expected int64_param, bool_param, "
                  "or string_param.");
    p = (nr_param_t){.key = "custom", .key_len = 6, .type = NR_PARAM_DOUBLE, .v.d = 0.5};
    EXPECT_OK(nr_grpc_check_param(&inf, &p));
    p = p_bool("triton_enable_empty_final_response", false);
    p.type = NR_PARAM_INT64;
    EXPECT_STATUS(nr_grpc_check_param(&inf, &p), NR_INVALID_ARG,
                  "invalid value type for 'triton_enable_empty_final_response' parameter, "
                  "expected bool_param.");
    nr_infer_release(&inf);
    nr_fake_model_free(m);
}

/* A LogSettingsRequest of one setting, read by the gRPC frontend's reader. */
static nr_status_t *log_update_one(const char *key, Inference__LogSettingsRequest__SettingValue v)
{
    Inference__LogSettingsRequest__SettingsEntry e =
        INFERENCE__LOG_SETTINGS_REQUEST__SETTINGS_ENTRY__INIT;
    e.key = (char *)key;
    e.value = &v;
    Inference__LogSettingsRequest__SettingsEntry *ep = &e;
    Inference__LogSettingsRequest q = INFERENCE__LOG_SETTINGS_REQUEST__INIT;
    q.n_settings = 1;
    q.settings = &ep;
    return nr_kserve_log_update(&nr_grpc_log_reader, &q);
}

static Inference__LogSettingsRequest__SettingValue str_setting(const char *s)
{
    Inference__LogSettingsRequest__SettingValue v =
        INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__INIT;
    v.parameter_choice_case =
        INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
    v.string_param = (char *)s;
    return v;
}

NR_TEST(log_update_texts_grpc)
{
    nr_log_settings_t saved;
    memcpy(&saved, &nr_log_settings, sizeof(saved));
    EXPECT_STATUS(log_update_one("log_format", str_setting("xml")), NR_INVALID_ARG,
                  "invalid argument for log_format, got: xml");
    EXPECT_STATUS(log_update_one("log_warning", str_setting("no")), NR_INVALID_ARG,
                  "expect boolean for 'log_warning'");
    EXPECT_STATUS(log_update_one("log_verbose_level", str_setting("3")), NR_INVALID_ARG,
                  "expect int32 for 'log_verbose_level'");
    Inference__LogSettingsRequest__SettingValue none =
        INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__INIT; /* no value: the wrong type */
    EXPECT_STATUS(log_update_one("log_format", none), NR_INVALID_ARG,
                  "expect string for 'log_format'");
    Inference__LogSettingsRequest__SettingValue two =
        INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__INIT;
    two.parameter_choice_case =
        INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM;
    two.uint32_param = 2;
    EXPECT_OK(log_update_one("log_verbose_level", two));
    EXPECT_EQ_INT(nr_log_settings.verbose, 2);
    memcpy(&nr_log_settings, &saved, sizeof(saved));
}

NR_TEST_MAIN()
