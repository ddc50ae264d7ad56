/* test_grpc_proto.c - the gRPC frontend's messages, generated at build time by protoc-c from
 * src/proto/{grpc_service,health}.proto into build/gen/proto/.
 *
 * Packs and unpacks a ModelInferRequest built in C (maps, oneofs, nested tensors, raw bytes);
 * decodes byte strings serialized by the official Python runtime (tritonclient 2.51's
 * service_pb2 under protobuf 7) and packs them again to the same bytes, which proves the field
 * numbers and types match Triton's; and checks that ModelConfigResponse.config, declared as bytes,
 * carries an encoded ModelConfig byte-identically to Triton's embedded message.
 */
#include "nr_test.h"

#include "proto/grpc_service.pb-c.h"
#include "proto/health.pb-c.h"

/* ---- bytes from the official Python runtime ------------------------------------------------ */
/* Produced in the project venv (tritonclient 2.51.0, protobuf 7.36.2) by:
 *
 *   from tritonclient.grpc import service_pb2 as s, model_config_pb2 as mc
 *   r = s.ModelInferRequest(model_name="simple", model_version="1", id="req-42")
 *   r.parameters["sequence_id"].int64_param = -7
 *   r.parameters["priority"].uint64_param = 18446744073709551615
 *   r.parameters["sequence_start"].bool_param = False
 *   i0 = r.inputs.add(name="INPUT0", datatype="INT32", shape=[1, 16])
 *   i1 = r.inputs.add(name="TEXT", datatype="BYTES", shape=[-1, 2])
 *   i1.parameters["binary_data_size"].int64_param = 300
 *   i2 = r.inputs.add(name="F", datatype="FP32", shape=[3])
 *   i2.contents.fp32_contents.extend([1.5, -2.25, 1e-3])
 *   o = r.outputs.add(name="OUTPUT0")
 *   o.parameters["binary_data"].bool_param = True
 *   o.parameters["classification"].double_param = 0.5
 *   r.raw_input_contents.append(bytes(range(64)))
 *   r.raw_input_contents.append(b"\x02\x00\x00\x00hi\x00\x00\x00\x00")
 *   py_infer_request = r.SerializeToString(deterministic=True)
 */
static const uint8_t py_infer_request[335] = {
    0x0a, 0x06, 0x73, 0x69, 0x6d, 0x70, 0x6c, 0x65, 0x12, 0x01, 0x31, 0x1a, 0x06, 0x72, 0x65, 0x71,
    0x2d, 0x34, 0x32, 0x22, 0x17, 0x0a, 0x08, 0x70, 0x72, 0x69, 0x6f, 0x72, 0x69, 0x74, 0x79, 0x12,
    0x0b, 0x28, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x22, 0x1a, 0x0a, 0x0b,
    0x73, 0x65, 0x71, 0x75, 0x65, 0x6e, 0x63, 0x65, 0x5f, 0x69, 0x64, 0x12, 0x0b, 0x10, 0xf9, 0xff,
    0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x22, 0x14, 0x0a, 0x0e, 0x73, 0x65, 0x71, 0x75,
    0x65, 0x6e, 0x63, 0x65, 0x5f, 0x73, 0x74, 0x61, 0x72, 0x74, 0x12, 0x02, 0x08, 0x00, 0x2a, 0x13,
    0x0a, 0x06, 0x49, 0x4e, 0x50, 0x55, 0x54, 0x30, 0x12, 0x05, 0x49, 0x4e, 0x54, 0x33, 0x32, 0x1a,
    0x02, 0x01, 0x10, 0x2a, 0x33, 0x0a, 0x04, 0x54, 0x45, 0x58, 0x54, 0x12, 0x05, 0x42, 0x59, 0x54,
    0x45, 0x53, 0x1a, 0x0b, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01, 0x02, 0x22,
    0x17, 0x0a, 0x10, 0x62, 0x69, 0x6e, 0x61, 0x72, 0x79, 0x5f, 0x64, 0x61, 0x74, 0x61, 0x5f, 0x73,
    0x69, 0x7a, 0x65, 0x12, 0x03, 0x10, 0xac, 0x02, 0x2a, 0x1c, 0x0a, 0x01, 0x46, 0x12, 0x04, 0x46,
    0x50, 0x33, 0x32, 0x1a, 0x01, 0x03, 0x2a, 0x0e, 0x32, 0x0c, 0x00, 0x00, 0xc0, 0x3f, 0x00, 0x00,
    0x10, 0xc0, 0x6f, 0x12, 0x83, 0x3a, 0x32, 0x39, 0x0a, 0x07, 0x4f, 0x55, 0x54, 0x50, 0x55, 0x54,
    0x30, 0x12, 0x11, 0x0a, 0x0b, 0x62, 0x69, 0x6e, 0x61, 0x72, 0x79, 0x5f, 0x64, 0x61, 0x74, 0x61,
    0x12, 0x02, 0x08, 0x01, 0x12, 0x1b, 0x0a, 0x0e, 0x63, 0x6c, 0x61, 0x73, 0x73, 0x69, 0x66, 0x69,
    0x63, 0x61, 0x74, 0x69, 0x6f, 0x6e, 0x12, 0x09, 0x21, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0xe0,
    0x3f, 0x3a, 0x40, 0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c,
    0x0d, 0x0e, 0x0f, 0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c,
    0x1d, 0x1e, 0x1f, 0x20, 0x21, 0x22, 0x23, 0x24, 0x25, 0x26, 0x27, 0x28, 0x29, 0x2a, 0x2b, 0x2c,
    0x2d, 0x2e, 0x2f, 0x30, 0x31, 0x32, 0x33, 0x34, 0x35, 0x36, 0x37, 0x38, 0x39, 0x3a, 0x3b, 0x3c,
    0x3d, 0x3e, 0x3f, 0x3a, 0x0a, 0x02, 0x00, 0x00, 0x00, 0x68, 0x69, 0x00, 0x00, 0x00, 0x00,
};

/*   st = s.ModelStatisticsResponse()
 *   m = st.model_stats.add(name="simple", version="1", last_inference=1733241600123,
 *                          inference_count=1000, execution_count=250)
 *   D = s.StatisticDuration
 *   m.inference_stats.success.CopyFrom(D(count=1000, ns=123456789))
 *   m.inference_stats.fail.CopyFrom(D(count=2, ns=5000))
 *   m.inference_stats.queue.CopyFrom(D(count=1000, ns=4000000))
 *   m.inference_stats.compute_infer.CopyFrom(D(count=250, ns=90000000))
 *   m.inference_stats.cache_miss.CopyFrom(D())   # present but empty
 *   m.batch_stats.add(batch_size=4, compute_infer=D(count=250, ns=90000000))
 *   m.memory_usage.add(type="CPU", id=-1, byte_size=4096)
 *   m.response_stats["0"].success.CopyFrom(D(count=3, ns=3000))
 *   st.model_stats.add(name="identity_fp32", version="2")
 *   py_stats_response = st.SerializeToString(deterministic=True)
 */
static const uint8_t py_stats_response[136] = {
    0x0a, 0x72, 0x0a, 0x06, 0x73, 0x69, 0x6d, 0x70, 0x6c, 0x65, 0x12, 0x01, 0x31, 0x18, 0xfb, 0xf0,
    0xff, 0xe9, 0xb8, 0x32, 0x20, 0xe8, 0x07, 0x28, 0xfa, 0x01, 0x32, 0x27, 0x0a, 0x08, 0x08, 0xe8,
    0x07, 0x10, 0x95, 0x9a, 0xef, 0x3a, 0x12, 0x05, 0x08, 0x02, 0x10, 0x88, 0x27, 0x1a, 0x08, 0x08,
    0xe8, 0x07, 0x10, 0x80, 0x92, 0xf4, 0x01, 0x2a, 0x08, 0x08, 0xfa, 0x01, 0x10, 0x80, 0x95, 0xf5,
    0x2a, 0x42, 0x00, 0x3a, 0x0c, 0x08, 0x04, 0x1a, 0x08, 0x08, 0xfa, 0x01, 0x10, 0x80, 0x95, 0xf5,
    0x2a, 0x42, 0x13, 0x0a, 0x03, 0x43, 0x50, 0x55, 0x10, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    0xff, 0xff, 0x01, 0x18, 0x80, 0x20, 0x4a, 0x0c, 0x0a, 0x01, 0x30, 0x12, 0x07, 0x1a, 0x05, 0x08,
    0x03, 0x10, 0xb8, 0x17, 0x0a, 0x12, 0x0a, 0x0d, 0x69, 0x64, 0x65, 0x6e, 0x74, 0x69, 0x74, 0x79,
    0x5f, 0x66, 0x70, 0x33, 0x32, 0x12, 0x01, 0x32,
};

/*   cfg = mc.ModelConfig(name="simple", platform="onnxruntime_onnx", max_batch_size=8)
 *   cfg.input.add(name="INPUT0", data_type=mc.TYPE_INT32, dims=[16])
 *   cfg.output.add(name="OUTPUT0", data_type=mc.TYPE_INT32, dims=[16])
 *   cfg.instance_group.add(kind=mc.ModelInstanceGroup.KIND_CPU, count=2)
 *   cfg.dynamic_batching.preferred_batch_size.extend([4, 8])
 *   py_model_config = cfg.SerializeToString(deterministic=True)
 */
static const uint8_t py_model_config[71] = {
    0x0a, 0x06, 0x73, 0x69, 0x6d, 0x70, 0x6c, 0x65, 0x12, 0x10, 0x6f, 0x6e, 0x6e, 0x78, 0x72, 0x75,
    0x6e, 0x74, 0x69, 0x6d, 0x65, 0x5f, 0x6f, 0x6e, 0x6e, 0x78, 0x20, 0x08, 0x2a, 0x0d, 0x0a, 0x06,
    0x49, 0x4e, 0x50, 0x55, 0x54, 0x30, 0x10, 0x08, 0x22, 0x01, 0x10, 0x32, 0x0e, 0x0a, 0x07, 0x4f,
    0x55, 0x54, 0x50, 0x55, 0x54, 0x30, 0x10, 0x08, 0x1a, 0x01, 0x10, 0x3a, 0x04, 0x10, 0x02, 0x20,
    0x02, 0x5a, 0x04, 0x0a, 0x02, 0x04, 0x08,
};

/*   py_config_response = s.ModelConfigResponse(config=cfg).SerializeToString(deterministic=True)
 *   (Triton's declaration: field 1 is the embedded message ModelConfig.)
 */
static const uint8_t py_config_response[73] = {
    0x0a, 0x47, 0x0a, 0x06, 0x73, 0x69, 0x6d, 0x70, 0x6c, 0x65, 0x12, 0x10, 0x6f, 0x6e, 0x6e, 0x78,
    0x72, 0x75, 0x6e, 0x74, 0x69, 0x6d, 0x65, 0x5f, 0x6f, 0x6e, 0x6e, 0x78, 0x20, 0x08, 0x2a, 0x0d,
    0x0a, 0x06, 0x49, 0x4e, 0x50, 0x55, 0x54, 0x30, 0x10, 0x08, 0x22, 0x01, 0x10, 0x32, 0x0e, 0x0a,
    0x07, 0x4f, 0x55, 0x54, 0x50, 0x55, 0x54, 0x30, 0x10, 0x08, 0x1a, 0x01, 0x10, 0x3a, 0x04, 0x10,
    0x02, 0x20, 0x02, 0x5a, 0x04, 0x0a, 0x02, 0x04, 0x08,
};

/* ---- helpers ----------------------------------------------------------------------------- */

static bool bytes_eq(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    if (na != nb) {
        fprintf(stderr, "length %zu != %zu\n", na, nb);
        return false;
    }
    for (size_t i = 0; i < na; i++)
        if (a[i] != b[i]) {
            fprintf(stderr, "first difference at byte %zu: 0x%02x != 0x%02x\n", i, a[i], b[i]);
            return false;
        }
    return true;
}

static bool bin_eq(ProtobufCBinaryData d, const void *p, size_t n)
{
    return d.len == n && (n == 0 || memcmp(d.data, p, n) == 0);
}

/* p = the value of key k in a map<string, InferParameter> (protobuf-c: an array of entries), or
 * NULL. A macro so that it works on each tensor's own entry type. */
#define FIND_PARAM(p, entries, n, k)                                \
    do {                                                            \
        (p) = NULL;                                                 \
        for (size_t i_ = 0; i_ < (n); i_++)                         \
            if (strcmp((entries)[i_]->key, (k)) == 0)               \
                (p) = (entries)[i_]->value;                         \
    } while (0)

/* ---- a request built in C -------------------------------------------------------------------- */

NR_TEST(pack_unpack_infer_request)
{
    Inference__InferParameter seq = INFERENCE__INFER_PARAMETER__INIT;
    seq.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
    seq.int64_param = -1234567890123LL;
    Inference__ModelInferRequest__ParametersEntry seq_e =
        INFERENCE__MODEL_INFER_REQUEST__PARAMETERS_ENTRY__INIT;
    seq_e.key = "sequence_id";
    seq_e.value = &seq;
    Inference__ModelInferRequest__ParametersEntry *params[] = {&seq_e};

    int64_t shape0[] = {1, 16}, shape1[] = {-1, 4, 2};
    Inference__ModelInferRequest__InferInputTensor in0 =
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    in0.name = "INPUT0";
    in0.datatype = "INT32";
    in0.n_shape = 2;
    in0.shape = shape0;
    Inference__ModelInferRequest__InferInputTensor in1 =
        INFERENCE__MODEL_INFER_REQUEST__INFER_INPUT_TENSOR__INIT;
    in1.name = "INPUT1";
    in1.datatype = "FP32";
    in1.n_shape = 3;
    in1.shape = shape1;
    Inference__ModelInferRequest__InferInputTensor *inputs[] = {&in0, &in1};

    Inference__ModelInferRequest__InferRequestedOutputTensor out =
        INFERENCE__MODEL_INFER_REQUEST__INFER_REQUESTED_OUTPUT_TENSOR__INIT;
    out.name = "OUTPUT0";
    Inference__ModelInferRequest__InferRequestedOutputTensor *outputs[] = {&out};

    int32_t raw0[16];
    for (int i = 0; i < 16; i++)
        raw0[i] = i * 1000 - 3;
    float raw1[8] = {0.5f, -1.0f, 3.25f, 0.0f, 1e-6f, -0.0f, 100.0f, 7.0f};
    ProtobufCBinaryData raw[] = {{sizeof(raw0), (uint8_t *)raw0}, {sizeof(raw1), (uint8_t *)raw1}};

    Inference__ModelInferRequest req = INFERENCE__MODEL_INFER_REQUEST__INIT;
    req.model_name = "simple";
    req.model_version = "3";
    req.id = "abc";
    req.n_parameters = 1;
    req.parameters = params;
    req.n_inputs = 2;
    req.inputs = inputs;
    req.n_outputs = 1;
    req.outputs = outputs;
    req.n_raw_input_contents = 2;
    req.raw_input_contents = raw;

    size_t n = inference__model_infer_request__get_packed_size(&req);
    ASSERT_TRUE(n > sizeof(raw0) + sizeof(raw1));
    uint8_t *buf = malloc(n);
    ASSERT_NOT_NULL(buf);
    ASSERT_EQ_U64(inference__model_infer_request__pack(&req, buf), n);

    Inference__ModelInferRequest *r = inference__model_infer_request__unpack(NULL, n, buf);
    free(buf);
    ASSERT_NOT_NULL(r);
    EXPECT_STREQ(r->model_name, "simple");
    EXPECT_STREQ(r->model_version, "3");
    EXPECT_STREQ(r->id, "abc");
    if (EXPECT_EQ_U64(r->n_parameters, 1)) {
        EXPECT_STREQ(r->parameters[0]->key, "sequence_id");
        const Inference__InferParameter *p = r->parameters[0]->value;
        if (EXPECT_NOT_NULL(p)) {
            EXPECT_EQ_INT(p->parameter_choice_case,
                          INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM);
            EXPECT_EQ_INT(p->int64_param, -1234567890123LL);
        }
    }
    if (EXPECT_EQ_U64(r->n_inputs, 2)) {
        const Inference__ModelInferRequest__InferInputTensor *a = r->inputs[0], *b = r->inputs[1];
        EXPECT_STREQ(a->name, "INPUT0");
        EXPECT_STREQ(a->datatype, "INT32");
        if (EXPECT_EQ_U64(a->n_shape, 2)) {
            EXPECT_EQ_INT(a->shape[0], 1);
            EXPECT_EQ_INT(a->shape[1], 16);
        }
        EXPECT_EQ_U64(a->n_parameters, 0);
        EXPECT_NULL(a->contents);
        EXPECT_STREQ(b->name, "INPUT1");
        EXPECT_STREQ(b->datatype, "FP32");
        if (EXPECT_EQ_U64(b->n_shape, 3)) {
            EXPECT_EQ_INT(b->shape[0], -1);
            EXPECT_EQ_INT(b->shape[1], 4);
            EXPECT_EQ_INT(b->shape[2], 2);
        }
        EXPECT_EQ_U64(b->n_parameters, 0);
        EXPECT_NULL(b->contents);
    }
    if (EXPECT_EQ_U64(r->n_outputs, 1)) {
        EXPECT_STREQ(r->outputs[0]->name, "OUTPUT0");
        EXPECT_EQ_U64(r->outputs[0]->n_parameters, 0);
    }
    if (EXPECT_EQ_U64(r->n_raw_input_contents, 2)) {
        EXPECT_TRUE(bin_eq(r->raw_input_contents[0], raw0, sizeof(raw0)));
        EXPECT_TRUE(bin_eq(r->raw_input_contents[1], raw1, sizeof(raw1)));
    }
    inference__model_infer_request__free_unpacked(r, NULL);
}

/* ---- wire compatibility with the official runtime ------------------------------------------- */

NR_TEST(python_infer_request)
{
    Inference__ModelInferRequest *r =
        inference__model_infer_request__unpack(NULL, sizeof(py_infer_request), py_infer_request);
    ASSERT_NOT_NULL(r);
    EXPECT_STREQ(r->model_name, "simple");
    EXPECT_STREQ(r->model_version, "1");
    EXPECT_STREQ(r->id, "req-42");

    ASSERT_EQ_U64(r->n_parameters, 3);
    const Inference__InferParameter *p;
    FIND_PARAM(p, r->parameters, r->n_parameters, "sequence_id");
    if (EXPECT_NOT_NULL(p)) {
        EXPECT_EQ_INT(p->parameter_choice_case,
                      INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM);
        EXPECT_EQ_INT(p->int64_param, -7);
    }
    FIND_PARAM(p, r->parameters, r->n_parameters, "priority");
    if (EXPECT_NOT_NULL(p)) {
        EXPECT_EQ_INT(p->parameter_choice_case,
                      INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM);
        EXPECT_EQ_U64(p->uint64_param, UINT64_MAX);
    }
    FIND_PARAM(p, r->parameters, r->n_parameters, "sequence_start");
    if (EXPECT_NOT_NULL(p)) { /* a oneof member set to false is still set */
        EXPECT_EQ_INT(p->parameter_choice_case,
                      INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM);
        EXPECT_FALSE(p->bool_param);
    }

    ASSERT_EQ_U64(r->n_inputs, 3);
    const Inference__ModelInferRequest__InferInputTensor *in = r->inputs[0];
    EXPECT_STREQ(in->name, "INPUT0");
    EXPECT_STREQ(in->datatype, "INT32");
    if (EXPECT_EQ_U64(in->n_shape, 2)) {
        EXPECT_EQ_INT(in->shape[0], 1);
        EXPECT_EQ_INT(in->shape[1], 16);
    }
    EXPECT_EQ_U64(in->n_parameters, 0);
    EXPECT_NULL(in->contents);

    in = r->inputs[1];
    EXPECT_STREQ(in->name, "TEXT");
    EXPECT_STREQ(in->datatype, "BYTES");
    if (EXPECT_EQ_U64(in->n_shape, 2)) {
        EXPECT_EQ_INT(in->shape[0], -1);
        EXPECT_EQ_INT(in->shape[1], 2);
    }
    FIND_PARAM(p, in->parameters, in->n_parameters, "binary_data_size");
    if (EXPECT_EQ_U64(in->n_parameters, 1) && EXPECT_NOT_NULL(p)) {
        EXPECT_EQ_INT(p->parameter_choice_case,
                      INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM);
        EXPECT_EQ_INT(p->int64_param, 300);
    }
    EXPECT_NULL(in->contents);

    in = r->inputs[2];
    EXPECT_STREQ(in->name, "F");
    EXPECT_STREQ(in->datatype, "FP32");
    if (EXPECT_EQ_U64(in->n_shape, 1))
        EXPECT_EQ_INT(in->shape[0], 3);
    if (EXPECT_NOT_NULL(in->contents) && EXPECT_EQ_U64(in->contents->n_fp32_contents, 3)) {
        EXPECT_EQ_DBL(in->contents->fp32_contents[0], 1.5f);
        EXPECT_EQ_DBL(in->contents->fp32_contents[1], -2.25f);
        EXPECT_EQ_DBL(in->contents->fp32_contents[2], 1e-3f);
        EXPECT_EQ_U64(in->contents->n_int_contents, 0);
        EXPECT_EQ_U64(in->contents->n_bytes_contents, 0);
    }

    ASSERT_EQ_U64(r->n_outputs, 1);
    const Inference__ModelInferRequest__InferRequestedOutputTensor *out = r->outputs[0];
    EXPECT_STREQ(out->name, "OUTPUT0");
    EXPECT_EQ_U64(out->n_parameters, 2);
    FIND_PARAM(p, out->parameters, out->n_parameters, "binary_data");
    if (EXPECT_NOT_NULL(p)) {
        EXPECT_EQ_INT(p->parameter_choice_case,
                      INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM);
        EXPECT_TRUE(p->bool_param);
    }
    FIND_PARAM(p, out->parameters, out->n_parameters, "classification");
    if (EXPECT_NOT_NULL(p)) {
        EXPECT_EQ_INT(p->parameter_choice_case,
                      INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM);
        EXPECT_EQ_DBL(p->double_param, 0.5);
    }

    if (EXPECT_EQ_U64(r->n_raw_input_contents, 2)) {
        uint8_t seq[64];
        for (int i = 0; i < 64; i++)
            seq[i] = (uint8_t)i;
        EXPECT_TRUE(bin_eq(r->raw_input_contents[0], seq, 64));
        EXPECT_TRUE(bin_eq(r->raw_input_contents[1], "\x02\x00\x00\x00hi\x00\x00\x00\x00", 10));
    }

    /* Packed again, it is the same bytes: same numbers, wire types, packing and field order. */
    size_t n = inference__model_infer_request__get_packed_size(r);
    uint8_t *buf = malloc(n);
    if (EXPECT_NOT_NULL(buf)) {
        EXPECT_EQ_U64(inference__model_infer_request__pack(r, buf), n);
        EXPECT_TRUE(bytes_eq(buf, n, py_infer_request, sizeof(py_infer_request)));
        free(buf);
    }
    inference__model_infer_request__free_unpacked(r, NULL);
}

static bool dur_eq(const Inference__StatisticDuration *d, uint64_t count, uint64_t ns)
{
    return EXPECT_NOT_NULL(d) && EXPECT_EQ_U64(d->count, count) && EXPECT_EQ_U64(d->ns, ns);
}

NR_TEST(python_statistics_response)
{
    Inference__ModelStatisticsResponse *r = inference__model_statistics_response__unpack(
        NULL, sizeof(py_stats_response), py_stats_response);
    ASSERT_NOT_NULL(r);
    ASSERT_EQ_U64(r->n_model_stats, 2);

    const Inference__ModelStatistics *m = r->model_stats[0];
    EXPECT_STREQ(m->name, "simple");
    EXPECT_STREQ(m->version, "1");
    EXPECT_EQ_U64(m->last_inference, 1733241600123ULL);
    EXPECT_EQ_U64(m->inference_count, 1000);
    EXPECT_EQ_U64(m->execution_count, 250);
    const Inference__InferStatistics *is = m->inference_stats;
    if (EXPECT_NOT_NULL(is)) {
        dur_eq(is->success, 1000, 123456789);
        dur_eq(is->fail, 2, 5000);
        dur_eq(is->queue, 1000, 4000000);
        EXPECT_NULL(is->compute_input);
        dur_eq(is->compute_infer, 250, 90000000);
        EXPECT_NULL(is->compute_output);
        EXPECT_NULL(is->cache_hit);
        dur_eq(is->cache_miss, 0, 0); /* present, empty */
    }
    if (EXPECT_EQ_U64(m->n_batch_stats, 1)) {
        const Inference__InferBatchStatistics *b = m->batch_stats[0];
        EXPECT_EQ_U64(b->batch_size, 4);
        EXPECT_NULL(b->compute_input);
        dur_eq(b->compute_infer, 250, 90000000);
        EXPECT_NULL(b->compute_output);
    }
    if (EXPECT_EQ_U64(m->n_memory_usage, 1)) {
        EXPECT_STREQ(m->memory_usage[0]->type, "CPU");
        EXPECT_EQ_INT(m->memory_usage[0]->id, -1);
        EXPECT_EQ_U64(m->memory_usage[0]->byte_size, 4096);
    }
    if (EXPECT_EQ_U64(m->n_response_stats, 1)) {
        EXPECT_STREQ(m->response_stats[0]->key, "0");
        const Inference__InferResponseStatistics *rs = m->response_stats[0]->value;
        if (EXPECT_NOT_NULL(rs)) {
            dur_eq(rs->success, 3, 3000);
            EXPECT_NULL(rs->compute_infer);
            EXPECT_NULL(rs->fail);
            EXPECT_NULL(rs->cancel);
        }
    }

    m = r->model_stats[1];
    EXPECT_STREQ(m->name, "identity_fp32");
    EXPECT_STREQ(m->version, "2");
    EXPECT_EQ_U64(m->last_inference, 0);
    EXPECT_NULL(m->inference_stats);
    EXPECT_EQ_U64(m->n_batch_stats, 0);
    EXPECT_EQ_U64(m->n_memory_usage, 0);
    EXPECT_EQ_U64(m->n_response_stats, 0);

    size_t n = inference__model_statistics_response__get_packed_size(r);
    uint8_t *buf = malloc(n);
    if (EXPECT_NOT_NULL(buf)) {
        EXPECT_EQ_U64(inference__model_statistics_response__pack(r, buf), n);
        EXPECT_TRUE(bytes_eq(buf, n, py_stats_response, sizeof(py_stats_response)));
        free(buf);
    }
    inference__model_statistics_response__free_unpacked(r, NULL);
}

/* config is bytes here and an embedded ModelConfig in Triton's declaration: same bytes. */
NR_TEST(model_config_response_is_an_embedded_message)
{
    Inference__ModelConfigResponse resp = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    resp.config.data = (uint8_t *)py_model_config;
    resp.config.len = sizeof(py_model_config);
    uint8_t buf[sizeof(py_config_response)];
    ASSERT_EQ_U64(inference__model_config_response__get_packed_size(&resp), sizeof(buf));
    ASSERT_EQ_U64(inference__model_config_response__pack(&resp, buf), sizeof(buf));
    EXPECT_TRUE(bytes_eq(buf, sizeof(buf), py_config_response, sizeof(py_config_response)));

    Inference__ModelConfigResponse *r = inference__model_config_response__unpack(
        NULL, sizeof(py_config_response), py_config_response);
    ASSERT_NOT_NULL(r);
    EXPECT_TRUE(bin_eq(r->config, py_model_config, sizeof(py_model_config)));
    inference__model_config_response__free_unpacked(r, NULL);
}

NR_TEST(health_messages)
{
    Grpc__Health__V1__HealthCheckResponse resp = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    resp.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    uint8_t buf[8];
    ASSERT_EQ_U64(grpc__health__v1__health_check_response__pack(&resp, buf), 2);
    EXPECT_TRUE(bytes_eq(buf, 2, (const uint8_t *)"\x08\x01", 2));
    EXPECT_EQ_INT(GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING, 2);
    EXPECT_EQ_INT(GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN, 3);

    static const uint8_t req_bytes[] = {0x0a, 0x03, 'a', 'b', 'c'}; /* service = "abc" */
    Grpc__Health__V1__HealthCheckRequest *req =
        grpc__health__v1__health_check_request__unpack(NULL, sizeof(req_bytes), req_bytes);
    ASSERT_NOT_NULL(req);
    EXPECT_STREQ(req->service, "abc");
    grpc__health__v1__health_check_request__free_unpacked(req, NULL);
    req = grpc__health__v1__health_check_request__unpack(NULL, 0, req_bytes);
    ASSERT_NOT_NULL(req);
    EXPECT_STREQ(req->service, ""); /* an empty message is the default one */
    grpc__health__v1__health_check_request__free_unpacked(req, NULL);
}

/* The service descriptors name every method (the frontend routes "/<service>/<method>"). */
NR_TEST(service_descriptors)
{
    static const char *const rpcs[] = {
        "ServerLive", "ServerReady", "ModelReady", "ServerMetadata", "ModelMetadata",
        "ModelInfer", "ModelStreamInfer", "ModelConfig", "ModelStatistics", "RepositoryIndex",
        "RepositoryModelLoad", "RepositoryModelUnload", "SystemSharedMemoryStatus",
        "SystemSharedMemoryRegister", "SystemSharedMemoryUnregister", "CudaSharedMemoryStatus",
        "CudaSharedMemoryRegister", "CudaSharedMemoryUnregister", "TraceSetting", "LogSettings",
    };
    const ProtobufCServiceDescriptor *d = &inference__grpcinference_service__descriptor;
    EXPECT_STREQ(d->name, "inference.GRPCInferenceService");
    ASSERT_EQ_U64(d->n_methods, sizeof(rpcs) / sizeof(rpcs[0]));
    for (unsigned i = 0; i < d->n_methods; i++)
        EXPECT_STREQ(d->methods[i].name, rpcs[i]);
    EXPECT_TRUE(d->methods[5].input == &inference__model_infer_request__descriptor);
    EXPECT_TRUE(d->methods[6].output == &inference__model_stream_infer_response__descriptor);

    d = &grpc__health__v1__health__descriptor;
    EXPECT_STREQ(d->name, "grpc.health.v1.Health");
    ASSERT_EQ_U64(d->n_methods, 1);
    EXPECT_STREQ(d->methods[0].name, "Check");
}

/* ---- the schema as a whole against the official descriptors -------------------------------- */
/* One line per field of every message the service reaches, sorted by message name and field
 * number: "<message>.<field>=<number> <single|repeated> <type>[ <message/enum type>][ oneof]".
 * Wire tests cannot tell int64 from uint64 or a message from bytes; this can. The listing of
 * Triton's own descriptors, with ModelConfigResponse.config as bytes (nereid's departure), has
 * 73 messages, 175 fields and FNV-1a-64 0x8ade72653bda3baf, computed in the project venv by:
 *
 *   from tritonclient.grpc import service_pb2 as s
 *   from google.protobuf.descriptor import FieldDescriptor as F
 *   T = {v: k[5:].lower() for k, v in vars(F).items() if k.startswith("TYPE_")}
 *   seen = {}
 *   def visit(m):
 *       if m.full_name not in seen:
 *           seen[m.full_name] = m
 *           for f in m.fields:
 *               if f.message_type and m.full_name != "inference.ModelConfigResponse":
 *                   visit(f.message_type)
 *   for me in s.DESCRIPTOR.services_by_name["GRPCInferenceService"].methods:
 *       visit(me.input_type); visit(me.output_type)
 *   out = ""
 *   for name in sorted(seen):
 *       for f in sorted(seen[name].fields, key=lambda f: f.number):
 *           t = T[f.type]
 *           sub = (f.message_type or f.enum_type).full_name if t in ("message", "enum") else ""
 *           if (name, f.name) == ("inference.ModelConfigResponse", "config"):
 *               t, sub = "bytes", ""  # nereid's one departure
 *           out += "%s.%s=%d %s %s%s%s\n" % (name, f.name, f.number,
 *               "repeated" if f.is_repeated else "single", t, " " + sub if sub else "",
 *               " oneof" if f.containing_oneof else "")
 *   h = 0xcbf29ce484222325
 *   for b in out.encode():
 *       h = ((h ^ b) * 0x100000001b3) % 2**64
 *
 * On a mismatch the test prints its listing: diff it against that `out`.
 */
#define OFFICIAL_MESSAGES 73
#define OFFICIAL_FIELDS 175
#define OFFICIAL_FNV 0x8ade72653bda3bafULL

static const char *type_name(ProtobufCType t)
{
    switch (t) {
    case PROTOBUF_C_TYPE_INT32: return "int32";
    case PROTOBUF_C_TYPE_SINT32: return "sint32";
    case PROTOBUF_C_TYPE_SFIXED32: return "sfixed32";
    case PROTOBUF_C_TYPE_INT64: return "int64";
    case PROTOBUF_C_TYPE_SINT64: return "sint64";
    case PROTOBUF_C_TYPE_SFIXED64: return "sfixed64";
    case PROTOBUF_C_TYPE_UINT32: return "uint32";
    case PROTOBUF_C_TYPE_FIXED32: return "fixed32";
    case PROTOBUF_C_TYPE_UINT64: return "uint64";
    case PROTOBUF_C_TYPE_FIXED64: return "fixed64";
    case PROTOBUF_C_TYPE_FLOAT: return "float";
    case PROTOBUF_C_TYPE_DOUBLE: return "double";
    case PROTOBUF_C_TYPE_BOOL: return "bool";
    case PROTOBUF_C_TYPE_ENUM: return "enum";
    case PROTOBUF_C_TYPE_STRING: return "string";
    case PROTOBUF_C_TYPE_BYTES: return "bytes";
    case PROTOBUF_C_TYPE_MESSAGE: return "message";
    }
    return "?";
}

typedef struct {
    const ProtobufCMessageDescriptor *msg[128];
    size_t n;
} reach_t;

static void reach(reach_t *r, const ProtobufCMessageDescriptor *m)
{
    for (size_t i = 0; i < r->n; i++)
        if (r->msg[i] == m)
            return;
    if (r->n == sizeof(r->msg) / sizeof(r->msg[0]))
        return;
    r->msg[r->n++] = m;
    for (unsigned i = 0; i < m->n_fields; i++)
        if (m->fields[i].type == PROTOBUF_C_TYPE_MESSAGE)
            reach(r, m->fields[i].descriptor);
}

static int by_name(const void *a, const void *b)
{
    return strcmp((*(const ProtobufCMessageDescriptor *const *)a)->name,
                  (*(const ProtobufCMessageDescriptor *const *)b)->name);
}

NR_TEST(schema_matches_official_descriptors)
{
    const ProtobufCServiceDescriptor *svc = &inference__grpcinference_service__descriptor;
    reach_t r = {.n = 0};
    for (unsigned i = 0; i < svc->n_methods; i++) {
        reach(&r, svc->methods[i].input);
        reach(&r, svc->methods[i].output);
    }
    qsort(r.msg, r.n, sizeof(r.msg[0]), by_name);

    size_t cap = 1 << 16, len = 0, fields = 0;
    char *out = malloc(cap);
    ASSERT_NOT_NULL(out);
    for (size_t i = 0; i < r.n; i++) {
        const ProtobufCMessageDescriptor *m = r.msg[i];
        for (uint32_t num = 1, done = 0; done < m->n_fields; num++) { /* by field number */
            const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field(m, num);
            if (f == NULL)
                continue;
            done++;
            fields++;
            const char *sub = f->type == PROTOBUF_C_TYPE_MESSAGE
                                  ? ((const ProtobufCMessageDescriptor *)f->descriptor)->name
                              : f->type == PROTOBUF_C_TYPE_ENUM
                                  ? ((const ProtobufCEnumDescriptor *)f->descriptor)->name
                                  : NULL;
            int w = snprintf(out + len, cap - len, "%s.%s=%u %s %s%s%s%s\n", m->name, f->name,
                             f->id, f->label == PROTOBUF_C_LABEL_REPEATED ? "repeated" : "single",
                             type_name(f->type), sub ? " " : "", sub ? sub : "",
                             (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) ? " oneof" : "");
            ASSERT_TRUE(w > 0 && (size_t)w < cap - len);
            len += (size_t)w;
        }
    }
    uint64_t h = 0xcbf29ce484222325ULL;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (uint8_t)out[i]) * 0x100000001b3ULL;
    EXPECT_EQ_U64(r.n, OFFICIAL_MESSAGES);
    EXPECT_EQ_U64(fields, OFFICIAL_FIELDS);
    if (!EXPECT_EQ_U64(h, OFFICIAL_FNV))
        fprintf(stderr, "nereid's listing:\n%.*s", (int)len, out);
    free(out);
}

/* Malformed input is refused, not crashed on. */
NR_TEST(truncated_input_is_refused)
{
    for (size_t n = 1; n < sizeof(py_infer_request); n++) {
        Inference__ModelInferRequest *r =
            inference__model_infer_request__unpack(NULL, n, py_infer_request);
        if (r != NULL) /* a prefix that ends on a field boundary is a valid message */
            inference__model_infer_request__free_unpacked(r, NULL);
    }
    /* A length that runs past the end. */
    static const uint8_t bad[] = {0x0a, 0x10, 's', 'i'};
    EXPECT_NULL(inference__model_infer_request__unpack(NULL, sizeof(bad), bad));
}

NR_TEST_MAIN()
