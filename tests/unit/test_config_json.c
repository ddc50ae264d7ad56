/* test_config_json.c - nr_cfg_to_json against Triton's recorded config bodies.
 *
 * The golden strings are the exact bodies Triton 2.51.0 answered for
 * GET /v2/models/<m>/config (spec/triton-answers/http.jsonl). Each test runs
 * the README's config.pbtxt through nr_cfg_parse -> nr_cfg_normalize ->
 * nr_cfg_fill_instance_groups(cfg, 2, 0) and compares byte for byte.
 */
#include "nr_test.h"

#include "../../src/config/model_config.h"

/* Triton's server-side autofill (AutoCompleteBackendFields) derives
 * platform "onnxruntime_onnx" and default_model_filename "model.onnx" from
 * backend "onnxruntime"; that step is not part of src/config's pipeline
 * (normalize / fill / validate), so the tests apply it by hand, as the
 * autocomplete step of the loader does. Nothing else in the recorded bodies
 * comes from the ORT backend for these configs (their inputs and outputs are
 * given, so backend auto-complete changes nothing). */
static void autofill_ort(nr_model_config_t *cfg)
{
    cfg->platform = strdup("onnxruntime_onnx");
    cfg->default_model_filename = strdup("model.onnx");
}

/* Parses, runs the load pipeline and renders; NULL on a parse error. */
static char *pipeline_json(const char *text, bool autofill)
{
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "parse: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    if (autofill)
        autofill_ort(cfg);
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 2, 0);
    nr_status_t *vst = nr_cfg_validate(cfg, NULL);
    if (vst != NULL) {
        fprintf(stderr, "validate: %s\n", vst->msg);
        nr_status_free(vst);
    }
    size_t len;
    char *json = nr_cfg_to_json(cfg, &len);
    if (strlen(json) != len)
        fprintf(stderr, "length mismatch\n");
    nr_cfg_free(cfg);
    return json;
}

/* Renders a parsed config with no pipeline steps. */
static char *raw_json(const char *text)
{
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "parse: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    char *json = nr_cfg_to_json(cfg, NULL);
    nr_cfg_free(cfg);
    return json;
}

/* Compares and frees; a NULL json (parse failure) fails the check. */
static void check_json(char *json, const char *expected)
{
    EXPECT_NOT_NULL(json);
    if (json != NULL)
        EXPECT_STREQ(json, expected);
    free(json);
}

/* ---- recorded bodies ------------------------------------------------------ */

/* Recorded: "model config simple" (GET /v2/models/simple/config) */
static const char *const golden_simple =
    "{\"name\":\"simple\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
    "\"runtime\":\"\",\"version_policy\":{\"latest\":{\"num_versions\":1}},\"max_batch_size\":8,"
    "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_INT32\",\"format\":\"FORMAT_NONE\","
    "\"dims\":[16],\"is_shape_tensor\":false,\"allow_ragged_batch\":false,"
    "\"optional\":false,\"is_non_linear_format_io\":false},{\"name\":\"INPUT1\","
    "\"data_type\":\"TYPE_INT32\",\"format\":\"FORMAT_NONE\",\"dims\":[16],\"is_shape_tensor\":false,"
    "\"allow_ragged_batch\":false,\"optional\":false,\"is_non_linear_format_io\":false}],"
    "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_INT32\",\"dims\":[16],"
    "\"label_filename\":\"\",\"is_shape_tensor\":false,\"is_non_linear_format_io\":false},"
    "{\"name\":\"OUTPUT1\",\"data_type\":\"TYPE_INT32\",\"dims\":[16],\"label_filename\":\"\","
    "\"is_shape_tensor\":false,\"is_non_linear_format_io\":false}],\"batch_input\":[],"
    "\"batch_output\":[],\"optimization\":{\"priority\":\"PRIORITY_DEFAULT\","
    "\"input_pinned_memory\":{\"enable\":true},\"output_pinned_memory\":{\"enable\":true},"
    "\"gather_kernel_buffer_threshold\":0,\"eager_batching\":false},\"instance_group\":[{\"name\":\"simple_0\","
    "\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],\"secondary_devices\":[],"
    "\"profile\":[],\"passive\":false,\"host_policy\":\"\"}],\"default_model_filename\":\"model.onnx\","
    "\"cc_model_filenames\":{},\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"
    ;

/* Recorded: "model config identity_fp32" (GET /v2/models/identity_fp32/config) */
static const char *const golden_identity_fp32 =
    "{\"name\":\"identity_fp32\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
    "\"runtime\":\"\",\"version_policy\":{\"latest\":{\"num_versions\":1}},\"max_batch_size\":8,"
    "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\",\"format\":\"FORMAT_NONE\","
    "\"dims\":[-1],\"is_shape_tensor\":false,\"allow_ragged_batch\":false,"
    "\"optional\":false,\"is_non_linear_format_io\":false}],\"output\":[{\"name\":\"OUTPUT0\","
    "\"data_type\":\"TYPE_FP32\",\"dims\":[-1],\"label_filename\":\"\",\"is_shape_tensor\":false,"
    "\"is_non_linear_format_io\":false}],\"batch_input\":[],\"batch_output\":[],"
    "\"optimization\":{\"priority\":\"PRIORITY_DEFAULT\",\"input_pinned_memory\":{\"enable\":true},"
    "\"output_pinned_memory\":{\"enable\":true},\"gather_kernel_buffer_threshold\":0,"
    "\"eager_batching\":false},\"instance_group\":[{\"name\":\"identity_fp32_0\","
    "\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],\"secondary_devices\":[],"
    "\"profile\":[],\"passive\":false,\"host_policy\":\"\"}],\"default_model_filename\":\"model.onnx\","
    "\"cc_model_filenames\":{},\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"
    ;

/* Recorded: "model config identity_bytes" (GET /v2/models/identity_bytes/config) */
static const char *const golden_identity_bytes =
    "{\"name\":\"identity_bytes\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
    "\"runtime\":\"\",\"version_policy\":{\"latest\":{\"num_versions\":1}},\"max_batch_size\":8,"
    "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_STRING\",\"format\":\"FORMAT_NONE\","
    "\"dims\":[-1],\"is_shape_tensor\":false,\"allow_ragged_batch\":false,"
    "\"optional\":false,\"is_non_linear_format_io\":false}],\"output\":[{\"name\":\"OUTPUT0\","
    "\"data_type\":\"TYPE_STRING\",\"dims\":[-1],\"label_filename\":\"\",\"is_shape_tensor\":false,"
    "\"is_non_linear_format_io\":false}],\"batch_input\":[],\"batch_output\":[],"
    "\"optimization\":{\"priority\":\"PRIORITY_DEFAULT\",\"input_pinned_memory\":{\"enable\":true},"
    "\"output_pinned_memory\":{\"enable\":true},\"gather_kernel_buffer_threshold\":0,"
    "\"eager_batching\":false},\"instance_group\":[{\"name\":\"identity_bytes_0\","
    "\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],\"secondary_devices\":[],"
    "\"profile\":[],\"passive\":false,\"host_policy\":\"\"}],\"default_model_filename\":\"model.onnx\","
    "\"cc_model_filenames\":{},\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"
    ;

/* Recorded: "model config add_fp16" (GET /v2/models/add_fp16/config) */
static const char *const golden_add_fp16 =
    "{\"name\":\"add_fp16\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
    "\"runtime\":\"\",\"version_policy\":{\"latest\":{\"num_versions\":1}},\"max_batch_size\":0,"
    "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP16\",\"format\":\"FORMAT_NONE\","
    "\"dims\":[4],\"is_shape_tensor\":false,\"allow_ragged_batch\":false,"
    "\"optional\":false,\"is_non_linear_format_io\":false},{\"name\":\"INPUT1\","
    "\"data_type\":\"TYPE_FP16\",\"format\":\"FORMAT_NONE\",\"dims\":[4],\"is_shape_tensor\":false,"
    "\"allow_ragged_batch\":false,\"optional\":false,\"is_non_linear_format_io\":false}],"
    "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP16\",\"dims\":[4],"
    "\"label_filename\":\"\",\"is_shape_tensor\":false,\"is_non_linear_format_io\":false}],"
    "\"batch_input\":[],\"batch_output\":[],\"optimization\":{\"priority\":\"PRIORITY_DEFAULT\","
    "\"input_pinned_memory\":{\"enable\":true},\"output_pinned_memory\":{\"enable\":true},"
    "\"gather_kernel_buffer_threshold\":0,\"eager_batching\":false},\"instance_group\":[{\"name\":\"add_fp16_0\","
    "\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],\"secondary_devices\":[],"
    "\"profile\":[],\"passive\":false,\"host_policy\":\"\"}],\"default_model_filename\":\"model.onnx\","
    "\"cc_model_filenames\":{},\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"
    ;

/* Recorded: "model config two_versions" (GET /v2/models/two_versions/config) */
static const char *const golden_two_versions =
    "{\"name\":\"two_versions\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
    "\"runtime\":\"\",\"version_policy\":{\"all\":{}},\"max_batch_size\":8,\"input\":[{\"name\":\"INPUT0\","
    "\"data_type\":\"TYPE_FP32\",\"format\":\"FORMAT_NONE\",\"dims\":[-1],\"is_shape_tensor\":false,"
    "\"allow_ragged_batch\":false,\"optional\":false,\"is_non_linear_format_io\":false}],"
    "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[-1],"
    "\"label_filename\":\"\",\"is_shape_tensor\":false,\"is_non_linear_format_io\":false}],"
    "\"batch_input\":[],\"batch_output\":[],\"optimization\":{\"priority\":\"PRIORITY_DEFAULT\","
    "\"input_pinned_memory\":{\"enable\":true},\"output_pinned_memory\":{\"enable\":true},"
    "\"gather_kernel_buffer_threshold\":0,\"eager_batching\":false},\"instance_group\":[{\"name\":\"two_versions_0\","
    "\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],\"secondary_devices\":[],"
    "\"profile\":[],\"passive\":false,\"host_policy\":\"\"}],\"default_model_filename\":\"model.onnx\","
    "\"cc_model_filenames\":{},\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"
    ;

/* Recorded: "model config dyn_batch" (GET /v2/models/dyn_batch/config) */
static const char *const golden_dyn_batch =
    "{\"name\":\"dyn_batch\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"onnxruntime\","
    "\"runtime\":\"\",\"version_policy\":{\"latest\":{\"num_versions\":1}},\"max_batch_size\":8,"
    "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\",\"format\":\"FORMAT_NONE\","
    "\"dims\":[-1],\"is_shape_tensor\":false,\"allow_ragged_batch\":false,"
    "\"optional\":false,\"is_non_linear_format_io\":false}],\"output\":[{\"name\":\"OUTPUT0\","
    "\"data_type\":\"TYPE_FP32\",\"dims\":[-1],\"label_filename\":\"\",\"is_shape_tensor\":false,"
    "\"is_non_linear_format_io\":false}],\"batch_input\":[],\"batch_output\":[],"
    "\"optimization\":{\"priority\":\"PRIORITY_DEFAULT\",\"input_pinned_memory\":{\"enable\":true},"
    "\"output_pinned_memory\":{\"enable\":true},\"gather_kernel_buffer_threshold\":0,"
    "\"eager_batching\":false},\"dynamic_batching\":{\"preferred_batch_size\":[4],"
    "\"max_queue_delay_microseconds\":100,\"preserve_ordering\":false,"
    "\"priority_levels\":0,\"default_priority_level\":0,\"priority_queue_policy\":{}},"
    "\"instance_group\":[{\"name\":\"dyn_batch_0\",\"kind\":\"KIND_CPU\",\"count\":2,"
    "\"gpus\":[],\"secondary_devices\":[],\"profile\":[],\"passive\":false,"
    "\"host_policy\":\"\"}],\"default_model_filename\":\"model.onnx\",\"cc_model_filenames\":{},"
    "\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"
    ;


/* Config texts from spec/triton-answers/README.md. */
static const char *const simple_pbtxt =
    "name: \"simple\"\n"
    "backend: \"onnxruntime\"\n"
    "max_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"INPUT1\" "
    "data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] }, { name: \"OUTPUT1\" "
    "data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "instance_group [ { kind: KIND_CPU, count: 1 } ]\n";

#define IDENTITY_BODY(dtype)                                                   \
    "backend: \"onnxruntime\"\n"                                               \
    "max_batch_size: 8\n"                                                      \
    "input [ { name: \"INPUT0\" data_type: " dtype " dims: [ -1 ] } ]\n"       \
    "output [ { name: \"OUTPUT0\" data_type: " dtype " dims: [ -1 ] } ]\n"

static const char *const identity_fp32_pbtxt =
    "name: \"identity_fp32\"\n" IDENTITY_BODY("TYPE_FP32")
    "instance_group [ { kind: KIND_CPU, count: 1 } ]\n";

static const char *const identity_bytes_pbtxt =
    "name: \"identity_bytes\"\n" IDENTITY_BODY("TYPE_STRING")
    "instance_group [ { kind: KIND_CPU, count: 1 } ]\n";

static const char *const add_fp16_pbtxt =
    "name: \"add_fp16\"\n"
    "backend: \"onnxruntime\"\n"
    "max_batch_size: 0\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP16 dims: [ 4 ] }, { name: \"INPUT1\" "
    "data_type: TYPE_FP16 dims: [ 4 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP16 dims: [ 4 ] } ]\n"
    "instance_group [ { kind: KIND_CPU, count: 1 } ]\n";

static const char *const two_versions_pbtxt =
    "name: \"two_versions\"\n" IDENTITY_BODY("TYPE_FP32")
    "instance_group [ { kind: KIND_CPU, count: 1 } ]\n"
    "version_policy: { all {} }\n";

static const char *const dyn_batch_pbtxt =
    "name: \"dyn_batch\"\n" IDENTITY_BODY("TYPE_FP32")
    "dynamic_batching { preferred_batch_size: [ 4 ] max_queue_delay_microseconds: 100 }\n"
    "instance_group [ { count: 2, kind: KIND_CPU } ]\n";

NR_TEST(golden_simple)
{
    check_json(pipeline_json(simple_pbtxt, true), golden_simple);
}

NR_TEST(golden_identity_fp32)
{
    check_json(pipeline_json(identity_fp32_pbtxt, true), golden_identity_fp32);
}

NR_TEST(golden_identity_bytes)
{
    check_json(pipeline_json(identity_bytes_pbtxt, true), golden_identity_bytes);
}

NR_TEST(golden_add_fp16)
{
    check_json(pipeline_json(add_fp16_pbtxt, true), golden_add_fp16);
}

NR_TEST(golden_two_versions)
{
    check_json(pipeline_json(two_versions_pbtxt, true), golden_two_versions);
}

NR_TEST(golden_dyn_batch)
{
    check_json(pipeline_json(dyn_batch_pbtxt, true), golden_dyn_batch);
}

NR_TEST(pipeline_is_idempotent)
{
    nr_model_config_t *cfg;
    ASSERT_OK(nr_cfg_parse(dyn_batch_pbtxt, strlen(dyn_batch_pbtxt), "c", &cfg));
    autofill_ort(cfg);
    for (int i = 0; i < 3; i++) {
        nr_cfg_normalize(cfg);
        nr_cfg_fill_instance_groups(cfg, 2, 0);
    }
    char *json = nr_cfg_to_json(cfg, NULL);
    nr_cfg_free(cfg);
    check_json(json, golden_dyn_batch);
}

/* ---- rules of the JSON form --------------------------------------------- */

NR_TEST(all_default_config_is_empty_body)
{
    nr_model_config_t *cfg = nr_cfg_new();
    size_t len = 99;
    char *json = nr_cfg_to_json(cfg, &len);
    EXPECT_EQ_INT(len, 0);
    EXPECT_STREQ(json, "");
    free(json);
    nr_cfg_free(cfg);
    check_json(raw_json("# nothing\n"), "");
    check_json(raw_json("max_batch_size: 0 name: \"\""), "");
}

/* The skeleton every raw (un-normalized) config prints around its fields. */
#define HEAD(name) "{\"name\":\"" name "\",\"platform\":\"\",\"backend\":\"\",\"runtime\":\"\","
#define MID "\"input\":[],\"output\":[],\"batch_input\":[],\"batch_output\":[],"
#define TAIL                                                                        \
    "\"instance_group\":[],\"default_model_filename\":\"\",\"cc_model_filenames\":{}," \
    "\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"

NR_TEST(unset_messages_are_left_out)
{
    check_json(raw_json("name: \"m\""), HEAD("m") "\"max_batch_size\":0," MID TAIL);
}

NR_TEST(version_policy_forms)
{
    check_json(raw_json("name: \"m\" version_policy { specific { versions: [1, 3] } }"),
               HEAD("m") "\"version_policy\":{\"specific\":{\"versions\":[1,3]}},"
                         "\"max_batch_size\":0," MID TAIL);
    check_json(raw_json("name: \"m\" version_policy { latest { } }"),
               HEAD("m") "\"version_policy\":{\"latest\":{\"num_versions\":0}},"
                         "\"max_batch_size\":0," MID TAIL);
    check_json(raw_json("name: \"m\" version_policy { }"),
               HEAD("m") "\"version_policy\":{},\"max_batch_size\":0," MID TAIL);
}

NR_TEST(dynamic_batching_queue_policies)
{
    const char *txt =
        "name: \"m\" max_batch_size: 8\n"
        "dynamic_batching {\n"
        "  priority_levels: 2 default_priority_level: 1\n"
        "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 100 }\n"
        "  priority_queue_policy { key: 2 value { max_queue_size: 5 allow_timeout_override: true } }\n"
        "  priority_queue_policy [ { key: 1 value: { } } ]\n"
        "}\n";
    check_json(raw_json(txt),
               HEAD("m") "\"max_batch_size\":8," MID
               "\"dynamic_batching\":{\"preferred_batch_size\":[],"
               "\"max_queue_delay_microseconds\":0,\"preserve_ordering\":false,"
               "\"priority_levels\":2,\"default_priority_level\":1,"
               "\"default_queue_policy\":{\"timeout_action\":\"DELAY\","
               "\"default_timeout_microseconds\":100,\"allow_timeout_override\":false,"
               "\"max_queue_size\":0},"
               "\"priority_queue_policy\":{\"2\":{\"timeout_action\":\"REJECT\","
               "\"default_timeout_microseconds\":0,\"allow_timeout_override\":true,"
               "\"max_queue_size\":5},\"1\":{\"timeout_action\":\"REJECT\","
               "\"default_timeout_microseconds\":0,\"allow_timeout_override\":false,"
               "\"max_queue_size\":0}}}," TAIL);
}

NR_TEST(maps_parameters_and_warmup)
{
    const char *txt =
        "name: \"m\"\n"
        "cc_model_filenames { key: \"8.0\" value: \"a.onnx\" }\n"
        "metric_tags: [ { key: \"team\", value: \"x\" } ]\n"
        "parameters { key: \"k\" value: { string_value: \"v\" } }\n"
        "parameters { key: \"k\" value: { string_value: \"w\" } }\n"
        "model_warmup [ { name: \"s\" batch_size: 1 count: 2 inputs { key: \"IN\" value: {\n"
        "  data_type: TYPE_FP32 dims: [ 2, 3 ] zero_data: true } } } ]\n";
    check_json(raw_json(txt),
               HEAD("m") "\"max_batch_size\":0," MID
               "\"instance_group\":[],\"default_model_filename\":\"\","
               "\"cc_model_filenames\":{\"8.0\":\"a.onnx\"},\"metric_tags\":{\"team\":\"x\"},"
               "\"parameters\":{\"k\":{\"string_value\":\"w\"}},"
               "\"model_warmup\":[{\"name\":\"s\",\"batch_size\":1,\"inputs\":{\"IN\":"
               "{\"data_type\":\"TYPE_FP32\",\"dims\":[2,3],\"zero_data\":true}},\"count\":2}]}");
}

NR_TEST(instance_group_details_and_strings_for_int64)
{
    const char *txt =
        "name: \"m\"\n"
        "instance_group [ { name: \"g\" kind: KIND_GPU count: 1 gpus: [0, 1]\n"
        "  rate_limiter { resources [ { name: \"R\" global: true count: 2 } ] priority: 3 }\n"
        "  secondary_devices [ { kind: KIND_NVDLA device_id: 7 } ] profile: [\"0\"]\n"
        "  passive: true host_policy: \"p\" } ]\n";
    check_json(raw_json(txt),
               HEAD("m") "\"max_batch_size\":0," MID
               "\"instance_group\":[{\"name\":\"g\",\"kind\":\"KIND_GPU\",\"count\":1,"
               "\"rate_limiter\":{\"resources\":[{\"name\":\"R\",\"global\":true,\"count\":2}],"
               "\"priority\":3},\"gpus\":[0,1],"
               "\"secondary_devices\":[{\"kind\":\"KIND_NVDLA\",\"device_id\":\"7\"}],"
               "\"profile\":[\"0\"],\"passive\":true,\"host_policy\":\"p\"}],"
               "\"default_model_filename\":\"\",\"cc_model_filenames\":{},\"metric_tags\":{},"
               "\"parameters\":{},\"model_warmup\":[]}");
}

NR_TEST(optimization_accelerators_and_cuda)
{
    const char *txt =
        "name: \"m\"\n"
        "optimization { graph { level: -1 } priority: PRIORITY_MAX\n"
        "  cuda { graphs: true graph_spec [ { batch_size: 4 input { key: \"x\" value { dim: [2, -1] } }\n"
        "    graph_lower_bound { batch_size: 1 input { key: \"x\" value { dim: [1] } } } } ] }\n"
        "  execution_accelerators { gpu_execution_accelerator : [ { name : \"tensorrt\"\n"
        "    parameters { key: \"precision_mode\" value: \"FP16\" } } ] }\n"
        "  input_pinned_memory { enable: false } }\n";
    check_json(raw_json(txt),
               HEAD("m") "\"max_batch_size\":0," MID
               "\"optimization\":{\"graph\":{\"level\":-1},\"priority\":\"PRIORITY_MAX\","
               "\"cuda\":{\"graphs\":true,\"busy_wait_events\":false,\"graph_spec\":[{"
               "\"batch_size\":4,\"input\":{\"x\":{\"dim\":[\"2\",\"-1\"]}},"
               "\"graph_lower_bound\":{\"batch_size\":1,\"input\":{\"x\":{\"dim\":[\"1\"]}}}}],"
               "\"output_copy_stream\":false},"
               "\"execution_accelerators\":{\"gpu_execution_accelerator\":[{\"name\":\"tensorrt\","
               "\"parameters\":{\"precision_mode\":\"FP16\"}}],\"cpu_execution_accelerator\":[]},"
               "\"input_pinned_memory\":{\"enable\":false},"
               "\"gather_kernel_buffer_threshold\":0,\"eager_batching\":false}," TAIL);
}

NR_TEST(sequence_batching_and_floats)
{
    const char *txt =
        "name: \"m\" max_batch_size: 4\n"
        "sequence_batching { direct { max_queue_delay_microseconds: 5 minimum_slot_utilization: 0.5 }\n"
        "  control_input [ { name: \"S\" control [ { kind: CONTROL_SEQUENCE_START\n"
        "    fp32_false_true: [ 0, 1.5f ] } ] } ]\n"
        "  state [ { input_name: \"i\" output_name: \"o\" data_type: TYPE_INT32 dims: [ 2 ]\n"
        "    initial_state [ { data_type: TYPE_INT32 dims: [ 2 ] zero_data: false name: \"z\" } ] } ] }\n";
    check_json(raw_json(txt),
               HEAD("m") "\"max_batch_size\":4," MID
               "\"sequence_batching\":{\"direct\":{\"max_queue_delay_microseconds\":5,"
               "\"minimum_slot_utilization\":0.5},\"max_sequence_idle_microseconds\":0,"
               "\"control_input\":[{\"name\":\"S\",\"control\":[{\"kind\":\"CONTROL_SEQUENCE_START\","
               "\"int32_false_true\":[],\"fp32_false_true\":[0,1.5],\"bool_false_true\":[],"
               "\"data_type\":\"TYPE_INVALID\"}]}],"
               "\"state\":[{\"input_name\":\"i\",\"output_name\":\"o\",\"data_type\":\"TYPE_INT32\","
               "\"dims\":[2],\"initial_state\":[{\"data_type\":\"TYPE_INT32\",\"dims\":[\"2\"],"
               "\"zero_data\":false,\"name\":\"z\"}],\"use_same_buffer_for_input_output\":false,"
               "\"use_growable_memory\":false}],\"iterative_sequence\":false}," TAIL);
}

/* Floats go protobuf (%g, FLT_DIG) -> rapidjson: integers stay integers,
 * others print as the shortest double of that text. */
NR_TEST(float_formatting)
{
    static const struct { const char *in, *out; } cases[] = {
        {"0", "0"},           {"0.5", "0.5"},      {"0.1", "0.1"},
        {"1", "1"},           {"-2.25", "-2.25"},  {"1e10", "10000000000.0"},
        {"123456", "123456"}, {"1234567", "1234567"}, {"0.333333343", "0.333333343"},
        {"1e-7", "1e-7"},     {"inf", "\"Infinity\""}, {"-inf", "\"-Infinity\""},
        {"nan", "\"NaN\""},   {"3.4028235e38", "3.40282347e38"},
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        char txt[200], want[1024];
        snprintf(txt, sizeof(txt),
                 "sequence_batching { direct { minimum_slot_utilization: %s } }", cases[i].in);
        snprintf(want, sizeof(want),
                 "{\"name\":\"\",\"platform\":\"\",\"backend\":\"\",\"runtime\":\"\","
                 "\"max_batch_size\":0," MID
                 "\"sequence_batching\":{\"direct\":{\"max_queue_delay_microseconds\":0,"
                 "\"minimum_slot_utilization\":%s},\"max_sequence_idle_microseconds\":0,"
                 "\"control_input\":[],\"state\":[],\"iterative_sequence\":false}," TAIL,
                 cases[i].out);
        check_json(raw_json(txt), want);
    }
}

NR_TEST(double_buckets_and_metrics)
{
    const char *txt = "model_metrics { metric_control [ { metric_identifier { family: \"f\" }\n"
                      "  histogram_options { buckets: [ 0.1, 5, 1e-7, 2.5e20 ] } } ] }";
    /* model_metrics is the last field, after model_warmup. */
    char *j = raw_json(txt);
    ASSERT_NOT_NULL(j);
    EXPECT_NOT_NULL(strstr(j, "\"model_warmup\":[],\"model_metrics\":{\"metric_control\":[{"
                              "\"metric_identifier\":{\"family\":\"f\"},\"histogram_options\":{"
                              "\"buckets\":[0.1,5,1e-7,250000000000000000000.0]}}]}}"));
    free(j);
}

NR_TEST(optional_messages_at_the_end)
{
    const char *txt = "model_operations { op_library_filename: \"libx.so\" }\n"
                      "model_transaction_policy { decoupled: true }\n"
                      "model_repository_agents { agents [ { name: \"a\" parameters { key: \"k\" value: \"v\" } } ] }\n"
                      "response_cache { enable: true }\n";
    char *j = raw_json(txt);
    ASSERT_NOT_NULL(j);
    EXPECT_NOT_NULL(strstr(j, "\"model_warmup\":[],\"model_operations\":{\"op_library_filename\":"
                              "[\"libx.so\"]},\"model_transaction_policy\":{\"decoupled\":true},"
                              "\"model_repository_agents\":{\"agents\":[{\"name\":\"a\","
                              "\"parameters\":{\"k\":\"v\"}}]},\"response_cache\":{\"enable\":true}}"));
    free(j);
}

NR_TEST(ensemble_and_batch_io)
{
    const char *txt =
        "name: \"e\" platform: \"ensemble\"\n"
        "batch_input [ { kind: BATCH_ITEM_SHAPE target_name: \"t\" data_type: TYPE_FP32 source_input: \"s\" } ]\n"
        "batch_output [ { target_name: [\"o\"] source_input: \"s\" } ]\n"
        "ensemble_scheduling { step [ { model_name: \"a\" model_version: -1\n"
        "  input_map { key: \"x\" value: \"IN\" } output_map { key: \"y\" value: \"OUT\" } } ] }\n";
    check_json(raw_json(txt),
               "{\"name\":\"e\",\"platform\":\"ensemble\",\"backend\":\"\",\"runtime\":\"\","
               "\"max_batch_size\":0,\"input\":[],\"output\":[],"
               "\"batch_input\":[{\"kind\":\"BATCH_ITEM_SHAPE\",\"target_name\":[\"t\"],"
               "\"data_type\":\"TYPE_FP32\",\"source_input\":[\"s\"]}],"
               "\"batch_output\":[{\"target_name\":[\"o\"],\"kind\":\"BATCH_SCATTER_WITH_INPUT_SHAPE\","
               "\"source_input\":[\"s\"]}],"
               "\"ensemble_scheduling\":{\"step\":[{\"model_name\":\"a\",\"model_version\":-1,"
               "\"input_map\":{\"x\":\"IN\"},\"output_map\":{\"y\":\"OUT\"},\"model_namespace\":\"\"}],"
               "\"max_inflight_requests\":0}," TAIL);
}

NR_TEST(strings_are_escaped_and_unknown_enums_are_numbers)
{
    check_json(raw_json("name: \"a\\\"b\\\\c\\n\" input [ { data_type: 99 format: 7 } ]"),
               HEAD("a\\\"b\\\\c\\n") "\"max_batch_size\":0,"
               "\"input\":[{\"name\":\"\",\"data_type\":99,\"format\":7,\"dims\":[],"
               "\"is_shape_tensor\":false,\"allow_ragged_batch\":false,\"optional\":false,"
               "\"is_non_linear_format_io\":false}],"
               "\"output\":[],\"batch_input\":[],\"batch_output\":[]," TAIL);
}

NR_TEST(reshape_and_empty_reshape)
{
    check_json(raw_json("output [ { name: \"o\" data_type: TYPE_INT8 dims: [1] reshape { } "
                        "label_filename: \"l.txt\" } ]"),
               HEAD("") "\"max_batch_size\":0,\"input\":[],"
               "\"output\":[{\"name\":\"o\",\"data_type\":\"TYPE_INT8\",\"dims\":[1],"
               "\"reshape\":{\"shape\":[]},\"label_filename\":\"l.txt\",\"is_shape_tensor\":false,"
               "\"is_non_linear_format_io\":false}],\"batch_input\":[],\"batch_output\":[]," TAIL);
}

NR_TEST_MAIN()
