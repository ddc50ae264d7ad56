/* test_validate.c - nr_cfg_normalize, nr_cfg_fill_instance_groups and
 * nr_cfg_validate (src/config/validate*.c).
 *
 * Normalization and instance-group defaults are checked field by field; every
 * validation error is checked with its exact (Triton) wording.
 */
#include "nr_test.h"

#include "../../src/config/model_config.h"

static nr_model_config_t *parse(const char *text)
{
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "unexpected parse error: %s\n", st->msg);
        nr_status_free(st);
    }
    return cfg;
}

/* An ONNX Runtime model as the server's autofill leaves it. */
#define ORT "name: \"m\" backend: \"onnxruntime\" platform: \"onnxruntime_onnx\" "
#define IO                                                                  \
    "input [ { name: \"I\" data_type: TYPE_FP32 dims: [ 4 ] } ] "            \
    "output [ { name: \"O\" data_type: TYPE_FP32 dims: [ 4 ] } ] "

/* Runs the full pipeline (normalize, fill with 2 CPU / gpus GPUs, validate). */
static nr_status_t *run(const char *text, const char *dir, int gpus)
{
    nr_model_config_t *cfg = parse(text);
    if (cfg == NULL)
        return nr_status_new(NR_UNKNOWN, "parse failed");
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 2, gpus);
    nr_status_t *st = nr_cfg_validate(cfg, dir);
    nr_cfg_free(cfg);
    return st;
}

/* Validates without normalize/fill. */
static nr_status_t *run_raw(const char *text)
{
    nr_model_config_t *cfg = parse(text);
    if (cfg == NULL)
        return nr_status_new(NR_UNKNOWN, "parse failed");
    nr_status_t *st = nr_cfg_validate(cfg, NULL);
    nr_cfg_free(cfg);
    return st;
}

#define INVALID(text, msg) EXPECT_STATUS(run((text), "m", 0), NR_INVALID_ARG, (msg))

/* ---- normalize ------------------------------------------------------------ */

NR_TEST(normalize_defaults)
{
    nr_model_config_t *c = parse(ORT "max_batch_size: 8 dynamic_batching { }");
    ASSERT_NOT_NULL(c);
    nr_cfg_normalize(c);
    EXPECT_TRUE(c->has_version_policy);
    EXPECT_TRUE(c->version_policy.has_choice);
    EXPECT_EQ_INT(c->version_policy.kind, NR_POLICY_LATEST);
    EXPECT_EQ_INT(c->version_policy.latest_num_versions, 1);
    ASSERT_EQ_INT(c->dynamic_batching.n_preferred_batch_size, 1);
    EXPECT_EQ_INT(c->dynamic_batching.preferred_batch_size[0], 8);
    EXPECT_TRUE(c->has_optimization);
    EXPECT_TRUE(c->optimization.has_input_pinned_memory && c->optimization.input_pinned_memory);
    EXPECT_TRUE(c->optimization.has_output_pinned_memory && c->optimization.output_pinned_memory);
    nr_cfg_normalize(c); /* idempotent */
    EXPECT_EQ_INT(c->dynamic_batching.n_preferred_batch_size, 1);
    nr_cfg_free(c);
}

NR_TEST(normalize_keeps_given_values)
{
    nr_model_config_t *c = parse(ORT "max_batch_size: 8 version_policy { all { } }\n"
                                 "dynamic_batching { preferred_batch_size: [ 2, 4 ] }\n"
                                 "optimization { output_pinned_memory { enable: false } }");
    ASSERT_NOT_NULL(c);
    nr_cfg_normalize(c);
    EXPECT_EQ_INT(c->version_policy.kind, NR_POLICY_ALL);
    EXPECT_EQ_INT(c->dynamic_batching.n_preferred_batch_size, 2);
    EXPECT_TRUE(c->optimization.input_pinned_memory);
    EXPECT_TRUE(c->optimization.has_output_pinned_memory);
    EXPECT_FALSE(c->optimization.output_pinned_memory);
    nr_cfg_free(c);
}

NR_TEST(normalize_no_preferred_without_batching)
{
    nr_model_config_t *c = parse(ORT "max_batch_size: 0 dynamic_batching { }");
    ASSERT_NOT_NULL(c);
    nr_cfg_normalize(c);
    EXPECT_EQ_INT(c->dynamic_batching.n_preferred_batch_size, 0);
    nr_cfg_free(c);
}

NR_TEST(normalize_sequence_and_ensemble)
{
    nr_model_config_t *c = parse(ORT "max_batch_size: 4 sequence_batching { oldest { } }");
    ASSERT_NOT_NULL(c);
    nr_cfg_normalize(c);
    EXPECT_EQ_U64(c->sequence_batching.max_sequence_idle_microseconds, 1000000);
    ASSERT_EQ_INT(c->sequence_batching.n_oldest_preferred_batch_size, 1);
    EXPECT_EQ_INT(c->sequence_batching.oldest_preferred_batch_size[0], 4);
    nr_cfg_free(c);
    c = parse(ORT "max_batch_size: 4 sequence_batching { max_sequence_idle_microseconds: 7 }");
    ASSERT_NOT_NULL(c);
    nr_cfg_normalize(c);
    EXPECT_EQ_U64(c->sequence_batching.max_sequence_idle_microseconds, 7);
    EXPECT_EQ_INT(c->sequence_batching.n_oldest_preferred_batch_size, 0);
    nr_cfg_free(c);
    c = parse("name: \"e\" platform: \"ensemble\" ensemble_scheduling { }");
    ASSERT_NOT_NULL(c);
    nr_cfg_normalize(c);
    EXPECT_FALSE(c->has_optimization);
    nr_cfg_fill_instance_groups(c, 2, 0);
    EXPECT_EQ_INT(c->n_instance_group, 0);
    nr_cfg_free(c);
}

/* ---- instance groups ------------------------------------------------------ */

NR_TEST(fill_default_group)
{
    nr_model_config_t *c = parse(ORT);
    ASSERT_NOT_NULL(c);
    nr_cfg_fill_instance_groups(c, 2, 0);
    ASSERT_EQ_INT(c->n_instance_group, 1);
    EXPECT_STREQ(c->instance_group[0].name, "m");
    EXPECT_EQ_INT(c->instance_group[0].kind, NR_KIND_CPU);
    EXPECT_EQ_INT(c->instance_group[0].count, 2);
    EXPECT_EQ_INT(c->instance_group[0].n_gpus, 0);
    nr_cfg_free(c);
    c = parse(ORT);
    ASSERT_NOT_NULL(c);
    nr_cfg_fill_instance_groups(c, 2, 2); /* GPUs present: AUTO -> GPU on all of them */
    EXPECT_EQ_INT(c->instance_group[0].kind, NR_KIND_GPU);
    EXPECT_EQ_INT(c->instance_group[0].count, 1);
    ASSERT_EQ_INT(c->instance_group[0].n_gpus, 2);
    EXPECT_EQ_INT(c->instance_group[0].gpus[1], 1);
    nr_cfg_free(c);
}

NR_TEST(fill_names_kinds_counts)
{
    nr_model_config_t *c = parse(ORT "instance_group [ { count: 2 }, { name: \"own\" kind: KIND_CPU },\n"
                                 "{ kind: KIND_AUTO gpus: [ 3 ] count: -1 }, { kind: KIND_MODEL },\n"
                                 "{ name: \"\" kind: KIND_AUTO gpus: [ 0 ] } ]");
    ASSERT_NOT_NULL(c);
    nr_cfg_fill_instance_groups(c, 3, 1);
    ASSERT_EQ_INT(c->n_instance_group, 5);
    EXPECT_STREQ(c->instance_group[0].name, "m_0");
    EXPECT_EQ_INT(c->instance_group[0].kind, NR_KIND_GPU);
    EXPECT_EQ_INT(c->instance_group[0].count, 2);
    EXPECT_EQ_INT(c->instance_group[0].n_gpus, 1);
    EXPECT_STREQ(c->instance_group[1].name, "own");
    EXPECT_EQ_INT(c->instance_group[1].count, 3); /* default_cpu_count for ORT on CPU */
    EXPECT_STREQ(c->instance_group[2].name, "m_2");
    EXPECT_EQ_INT(c->instance_group[2].kind, NR_KIND_CPU); /* gpu 3 does not exist */
    EXPECT_EQ_INT(c->instance_group[2].count, 3);
    EXPECT_EQ_INT(c->instance_group[3].kind, NR_KIND_MODEL);
    EXPECT_EQ_INT(c->instance_group[3].count, 1);
    EXPECT_STREQ(c->instance_group[4].name, "m_4");
    EXPECT_EQ_INT(c->instance_group[4].kind, NR_KIND_GPU);
    EXPECT_EQ_INT(c->instance_group[4].n_gpus, 1);
    nr_cfg_free(c);
}

NR_TEST(fill_cpu_count_only_for_ort_and_tf)
{
    nr_model_config_t *c = parse("name: \"p\" backend: \"python\" instance_group { kind: KIND_CPU }");
    ASSERT_NOT_NULL(c);
    nr_cfg_fill_instance_groups(c, 2, 0);
    EXPECT_EQ_INT(c->instance_group[0].count, 1);
    nr_cfg_free(c);
    c = parse("name: \"t\" backend: \"tensorflow\"");
    ASSERT_NOT_NULL(c);
    nr_cfg_fill_instance_groups(c, 4, 0);
    EXPECT_EQ_INT(c->instance_group[0].count, 4);
    nr_cfg_free(c);
}

/* ---- valid configs -------------------------------------------------------- */

NR_TEST(valid_configs_pass)
{
    EXPECT_OK(run(ORT "max_batch_size: 8 " IO "dynamic_batching { }", "m", 0));
    EXPECT_OK(run(ORT "max_batch_size: 8 " IO "instance_group { kind: KIND_GPU }", "m", 1));
    EXPECT_OK(run(ORT IO, NULL, 0));
    EXPECT_OK(run("name: \"m\" backend: \"python\"", "m", 0));
    EXPECT_OK(run(ORT "max_batch_size: 4 input { name: \"I\" data_type: TYPE_FP32 dims: [ 2, 4, -1, 6 ]\n"
                  "reshape { shape: [ 8, -1, 1, 6 ] } }\n"
                  "output { name: \"O\" data_type: TYPE_INT8 dims: [ 1 ] reshape { shape: [ ] } }",
                  "m", 0));
    EXPECT_OK(run(ORT "max_batch_size: 4 " IO
                  "sequence_batching { control_input [ { name: \"S\" control [ { kind: "
                  "CONTROL_SEQUENCE_START int32_false_true: [ 0, 1 ] } ] }, { name: \"C\" control "
                  "{ kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_STRING } } ] direct { "
                  "minimum_slot_utilization: 1.0 } }", "m", 0));
    EXPECT_OK(run(ORT "max_batch_size: 4 " IO
                  "model_warmup { batch_size: 1 inputs { key: \"I\" value { data_type: TYPE_FP32 "
                  "dims: [ 4 ] zero_data: true } } }\n"
                  "model_warmup { batch_size: 0 inputs { key: \"I\" value { dims: [ -1 ] } } }",
                  "m", 0));
    EXPECT_OK(run("name: \"e\" platform: \"ensemble\"\n"
                  "input { name: \"IN\" data_type: TYPE_FP32 dims: 1 }\n"
                  "output { name: \"OUT\" data_type: TYPE_FP32 dims: 1 }\n"
                  "ensemble_scheduling { step [\n"
                  "  { model_name: \"a\" input_map { key: \"x\" value: \"IN\" } output_map { key: \"y\" value: \"mid\" } },\n"
                  "  { model_name: \"b\" input_map { key: \"x\" value: \"mid\" } output_map { key: \"y\" value: \"OUT\" } } ] }",
                  "e", 0));
}

/* ---- ValidateModelConfig -------------------------------------------------- */

NR_TEST(identity_errors)
{
    EXPECT_STATUS(run("backend: \"onnxruntime\"", NULL, 0), NR_INVALID_ARG,
                  "model configuration must specify 'name'");
    EXPECT_STATUS(run(ORT, "other", 0), NR_INVALID_ARG,
                  "unexpected directory name 'other' for model 'm', directory name must equal "
                  "model name");
    INVALID("name: \"m\" platform: \"onnxruntime_onnx\"",
            "unexpected platform type 'onnxruntime_onnx' for m");
    INVALID("name: \"m\"", "unexpected platform type '' for m");
    INVALID("name: \"m\" platform: \"ensemble\" backend: \"python\"",
            "Ensemble model 'm' must have platform type 'ensemble' and empty backend type");
    INVALID("name: \"m\" platform: \"tensorrt_plan\" backend: \"onnxruntime\"",
            "unexpected 'platform' and 'backend' pair, got:tensorrt_plan, onnxruntime");
    INVALID("name: \"m\" backend: \"onnxruntime\"",
            "unexpected 'platform' and 'backend' pair, got:, onnxruntime");
    INVALID(ORT "max_batch_size: -1", "'max_batch_size' must be non-negative value for m");
    EXPECT_STATUS(run_raw(ORT), NR_INVALID_ARG, "must specify 'version policy' for m");
    INVALID("name: \"m\" platform: \"ensemble\"",
            "ensemble scheduling must be set for ensemble m whose platform is ensemble");
    INVALID(ORT "model_transaction_policy { decoupled: true } response_cache { enable: true }",
            "Response Cache does not currently support model m with 'decoupled' transaction "
            "policy. Please disable the response cache.");
}

NR_TEST(dynamic_batching_errors)
{
    INVALID(ORT "max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 4, 0 ] }",
            "dynamic batching preferred size must be positive for m");
    INVALID(ORT "max_batch_size: 8 dynamic_batching { preferred_batch_size: [ 16 ] }",
            "dynamic batching preferred size must be <= max batch size for m");
    INVALID(ORT "dynamic_batching { priority_levels: 2 }",
            "default priority level must be in range [1, 2] for m");
    INVALID(ORT "dynamic_batching { priority_levels: 2 default_priority_level: 3 }",
            "default priority level must be in range [1, 2] for m");
    INVALID(ORT "dynamic_batching { priority_levels: 2 default_priority_level: 1\n"
            "priority_queue_policy { key: 3 value { } } }",
            "priority queue policy must have priority level in range [1, 2] for m");
    INVALID(ORT "dynamic_batching { priority_levels: 2 default_priority_level: 1\n"
            "priority_queue_policy { key: 0 value { } } }",
            "priority queue policy must have priority level in range [1, 2] for m");
    INVALID(ORT "dynamic_batching { preserve_ordering: true priority_levels: 2 "
            "default_priority_level: 1 }",
            "Only one priority level is allowed when 'preserve_ordering' is true for m");
    INVALID(ORT "dynamic_batching { preserve_ordering: true default_queue_policy { "
            "timeout_action: DELAY default_timeout_microseconds: 5 } }",
            "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true "
            "for m");
    INVALID(ORT "dynamic_batching { preserve_ordering: true priority_levels: 1 "
            "default_priority_level: 1 priority_queue_policy { key: 1 value { timeout_action: "
            "DELAY default_timeout_microseconds: 5 } } }",
            "Queue policy can not have DELAY as timeout action when 'preserve_ordering' is true "
            "for m");
    EXPECT_OK(run(ORT "dynamic_batching { preserve_ordering: true default_queue_policy { "
                  "timeout_action: DELAY } }", "m", 0));
}

NR_TEST(metrics_errors)
{
    INVALID(ORT "model_metrics { metric_control { histogram_options { buckets: 1 } } }",
            "metric control must specify 'metric_identifier'");
    INVALID(ORT "model_metrics { metric_control { metric_identifier { } } }",
            "metric identifier must specify non-empty 'family'");
    INVALID(ORT "model_metrics { metric_control { metric_identifier { family: \"f\" } } }",
            "metric control must specify 'histogram_options'");
    INVALID(ORT "model_metrics { metric_control { metric_identifier { family: \"f\" } "
            "histogram_options { } } }",
            "histogram options must specify non-empty 'buckets'");
}

/* ---- ValidateInstanceGroup ------------------------------------------------ */

NR_TEST(instance_group_errors)
{
    EXPECT_STATUS(run_raw(ORT "version_policy { latest { num_versions: 1 } }"), NR_INVALID_ARG,
                  "must specify one or more 'instance group's for m");
    INVALID(ORT "instance_group { kind: KIND_MODEL gpus: 0 }",
            "instance group m_0 of model m has kind KIND_MODEL but specifies one or more GPUs");
    INVALID(ORT "instance_group { kind: KIND_GPU }",
            "instance group m_0 of model m has kind KIND_GPU but no GPUs are available");
    INVALID(ORT "instance_group { name: \"g\" kind: KIND_CPU gpus: [ 0 ] }",
            "instance group g of model m has kind KIND_CPU but specifies one or more GPUs");
    EXPECT_STATUS(run_raw(ORT "version_policy { all { } } instance_group { name: \"g\" }"),
                  NR_INTERNAL, "instance group g of model m has unexpected kind KIND_AUTO");
    INVALID(ORT "instance_group { kind: KIND_CPU profile: \"0\" }",
            "instance group m_0 of model m and platform onnxruntime_onnxspecifies profile field "
            "which is only supported for TensorRT models");
    INVALID("name: \"m\" backend: \"tensorrt\" platform: \"tensorrt_plan\" instance_group { "
            "kind: KIND_CPU profile: [ \"0\", \"x\" ] }",
            "instance group m_0 of model m and platform tensorrt_plan specifies invalid profile "
            "x. The field should contain the string representation of a non-negative integer.");
    EXPECT_STATUS(run_raw(ORT "version_policy { all { } } instance_group { name: \"g\" "
                          "kind: KIND_CPU count: 0 }"),
                  NR_INVALID_ARG, "instance group g of model m has count 0; it must be at least 1");
}

/* ---- warmup --------------------------------------------------------------- */

NR_TEST(warmup_errors)
{
    INVALID(ORT IO "model_warmup { name: \"w\" batch_size: 1 inputs { key: \"I\" value { "
            "data_type: TYPE_FP32 dims: [ -1 ] zero_data: true } } }",
            "warmup setting expects all variable-size dimensions are specified for input 'I'");
    INVALID(ORT IO "model_warmup { name: \"w\" batch_size: 1 inputs { key: \"I\" value { "
            "data_type: TYPE_FP32 dims: [ 4 ] } } }",
            "warmup setting expects input 'I' to have input_data_type set");
}

/* ---- ValidateModelIOConfig ------------------------------------------------ */

NR_TEST(io_shape_errors)
{
    INVALID(ORT "input { data_type: TYPE_FP32 dims: 1 }", "model input must specify 'name' for m");
    INVALID(ORT "output { name: \"O\" dims: 1 }",
            "model output 'O' must specify 'data_type' for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 }",
            "model input 'I' must specify 'dims' for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: 1 reshape { } }",
            "model input 'I' cannot have empty reshape for non-batching model as scalar tensors "
            "are not supported for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: [ 2, 0 ] }",
            "model input 'I' dimension must be integer >= 1, or -1 to indicate a variable-size "
            "dimension for m");
    INVALID(ORT "output { name: \"O\" data_type: TYPE_FP32 dims: [ -2 ] }",
            "model output 'O' dimension must be integer >= 1, or -1 to indicate a variable-size "
            "dimension for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: 4 reshape { shape: [ 2, 0 ] } }",
            "model input 'I' reshape dimensions must be integer >= 1, or -1 to indicate a "
            "variable-size dimension for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: [ 4294967296, 4294967296 ] "
            "reshape { shape: [ 1 ] } }",
            "model input 'I' has an element count that overflows int64 for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: [ 4 ] reshape { shape: [ 2, 3 ] } }",
            "model input 'I' has different size for dims and reshape for m");
    INVALID(ORT "max_batch_size: 2 input { name: \"I\" data_type: TYPE_FP32 dims: [ 2 ] "
            "reshape { shape: [ ] } }",
            "model input 'I' has different size for dims and reshape for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: [ -1, 2 ] reshape { shape: [ -1, "
            "-1, 2 ] } }",
            "model input 'I' has different number of variable-size dimensions for dims and "
            "reshape for m");
    INVALID(ORT "output { name: \"O\" data_type: TYPE_FP32 dims: [ 2, -1, 3 ] reshape { shape: [ "
            "3, -1, 2 ] } }",
            "model output 'O' has different size for dims and reshape for m");
}

NR_TEST(io_format_and_tensorrt_only_errors)
{
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 format: FORMAT_NHWC dims: [ 2, 2 ] }",
            "model input NHWC/NCHW require 3 dims for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_INT32 dims: 1 is_shape_tensor: true }",
            "shape tensors are only supported for TensorRT platform for m");
    INVALID(ORT "output { name: \"O\" data_type: TYPE_INT32 dims: 1 is_shape_tensor: true }",
            "shape tensors are only supported for TensorRT platform for m");
    INVALID(ORT "input { name: \"I\" data_type: TYPE_FP32 dims: [1,2,3] is_non_linear_format_io: true }",
            "Non-linear IO format is only supported for the TensorRT platform for m");
    INVALID(ORT "output { name: \"O\" data_type: TYPE_FP32 dims: 1 is_non_linear_format_io: true }",
            "Non-linear IO format is only supported for the TensorRT platform for m");
#define TRT "name: \"m\" backend: \"tensorrt\" platform: \"tensorrt_plan\" "
    INVALID(TRT "input { name: \"I\" data_type: TYPE_FP32 dims: 1 is_non_linear_format_io: true }",
            "Non-linear IO format input requires 3 dims for m");
    INVALID(TRT "output { name: \"O\" data_type: TYPE_FP32 dims: 1 is_non_linear_format_io: true }",
            "Non-linear IO format output requires 3 dims for m");
    EXPECT_OK(run(TRT "input { name: \"I\" data_type: TYPE_INT32 dims: [1,2,3] is_shape_tensor: true "
                  "is_non_linear_format_io: true }", "m", 0));
}

NR_TEST(io_duplicate_names)
{
    INVALID(ORT "input [ { name: \"I\" data_type: TYPE_FP32 dims: 1 }, { name: \"I\" data_type: "
            "TYPE_FP32 dims: 1 } ]",
            "model input 'I' is specified more than once for m");
    INVALID(ORT "output [ { name: \"O\" data_type: TYPE_FP32 dims: 1 }, { name: \"O\" data_type: "
            "TYPE_FP32 dims: 1 } ]",
            "model output 'O' is specified more than once for m");
}

NR_TEST(batch_io_errors)
{
    INVALID(ORT IO "batch_input { kind: 9 source_input: \"I\" data_type: TYPE_FP32 }",
            "unknown batch input kind '' for m");
    INVALID(ORT IO "batch_input { kind: BATCH_ITEM_SHAPE data_type: TYPE_FP32 }",
            "batch input kind 'BATCH_ITEM_SHAPE' expects 1 source input, got 0 for m");
    INVALID(ORT IO "batch_input { source_input: \"I\" data_type: TYPE_INT64 }",
            "batch input data type must be TYPE_INT32 or TYPE_FP32 for m");
    INVALID(ORT IO "batch_input { source_input: \"X\" data_type: TYPE_INT32 }",
            "unknown source input name 'X' for m");
    INVALID(ORT IO "batch_output { kind: 1 source_input: \"I\" }",
            "unknown batch output kind '' for m");
    INVALID(ORT IO "batch_output { source_input: [ \"I\", \"I\" ] }",
            "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' expects 1 source input, got 2 "
            "for m");
    INVALID(ORT IO "batch_output { source_input: \"Z\" }", "unknown source input name 'Z' for m");
    INVALID(ORT IO "batch_output { source_input: \"I\" target_name: \"Q\" }",
            "unknown target output name 'Q' for m");
    INVALID(ORT IO "batch_output { source_input: \"I\" target_name: [ \"O\", \"O\" ] }",
            "target output name 'O' can only be specified once for m");
    EXPECT_OK(run(ORT IO "batch_input { kind: BATCH_ELEMENT_COUNT target_name: \"n\" data_type: "
                  "TYPE_INT32 source_input: \"I\" } batch_output { source_input: \"I\" target_name: "
                  "\"O\" }", "m", 0));
}

/* ---- sequence batching ---------------------------------------------------- */

#define SEQ(body) ORT "max_batch_size: 4 " IO "sequence_batching { " body " }"

NR_TEST(sequence_errors)
{
    INVALID(SEQ("") " response_cache { enable: true }",
            "Response Cache does not currently support model m with sequence batching scheduler. "
            "Please disable the response cache.");
    INVALID(SEQ("control_input { }"), "sequence batching control tensor must have a name for m");
    INVALID(SEQ("control_input [ { name: \"A\" }, { name: \"A\" } ]"),
            "sequence batching control tensor 'A' is specified for multiple control kinds for m");
    INVALID(SEQ("control_input [ { name: \"A\" control { int32_false_true: [0, 1] } }, { name: "
                "\"B\" control { int32_false_true: [0, 1] } } ]"),
            "sequence batching specifies multiple CONTROL_SEQUENCE_START tensors for m");
    INVALID(SEQ("control_input { name: \"A\" control { kind: CONTROL_SEQUENCE_END } }"),
            "sequence batching must specify either 'int32_false_true', 'fp32_false_true' or "
            "'bool_false_true' for CONTROL_SEQUENCE_END for m");
    INVALID(SEQ("control_input { name: \"A\" control { kind: CONTROL_SEQUENCE_READY "
                "int32_false_true: [0, 1] bool_false_true: [false, true] } }"),
            "sequence batching specifies more than one from 'int32_false_true', "
            "'fp32_false_true' and 'bool_false_true' for CONTROL_SEQUENCE_READY for m");
    INVALID(SEQ("control_input { name: \"A\" control { int32_false_true: [1] } }"),
            "sequence batching control 'int32_false_true' must have exactly 2 entries for "
            "CONTROL_SEQUENCE_START for m");
    INVALID(SEQ("control_input { name: \"A\" control { fp32_false_true: [0, 1, 2] } }"),
            "sequence batching control 'fp32_false_true' must have exactly 2 entries for "
            "CONTROL_SEQUENCE_START for m");
    INVALID(SEQ("control_input { name: \"A\" control { bool_false_true: [true] } }"),
            "sequence batching control 'bool_false_true' must have exactly 2 entries for "
            "CONTROL_SEQUENCE_START for m");
    INVALID(SEQ("control_input { name: \"C\" control { kind: CONTROL_SEQUENCE_CORRID "
                "int32_false_true: [0, 1] data_type: TYPE_INT32 } }"),
            "sequence batching must not specify either 'int32_false_true', 'fp32_false_true' or "
            "'bool_false_true' for CONTROL_SEQUENCE_CORRID for m");
    INVALID(SEQ("control_input { name: \"C\" control { kind: CONTROL_SEQUENCE_CORRID "
                "data_type: TYPE_FP32 } }"),
            "unexpected data type for control CONTROL_SEQUENCE_CORRID for m. Allowed data types "
            "are TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING");
    INVALID(SEQ("oldest { preferred_batch_size: [ 0 ] }"),
            "sequence batching preferred batch size must be positive for m");
    INVALID(SEQ("oldest { preferred_batch_size: [ 5 ] }"),
            "sequence batching preferred batch size must be <= max batch size for m");
    INVALID(SEQ("direct { minimum_slot_utilization: 1.5 }"),
            "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m");
    INVALID(SEQ("direct { minimum_slot_utilization: -0.1 }"),
            "sequence batching minimum slot utilization must be in range (0.0, 1.0] for m");
}

/* ---- ensembles ------------------------------------------------------------ */

#define ENS_IO "name: \"e\" platform: \"ensemble\" input { name: \"IN\" data_type: TYPE_FP32 " \
               "dims: 1 } output { name: \"OUT\" data_type: TYPE_FP32 dims: 1 } "
#define STEP(model, in, out) \
    "{ model_name: \"" model "\" input_map { key: \"x\" value: \"" in "\" } output_map { key: " \
    "\"y\" value: \"" out "\" } }"
#define ENS_INVALID(text, msg) EXPECT_STATUS(run((text), "e", 0), NR_INVALID_ARG, (msg))

NR_TEST(ensemble_errors)
{
    INVALID(ORT "ensemble_scheduling { }",
            "ensemble scheduling cannot be set for model 'm' whose platform is not ensemble");
    ENS_INVALID(ENS_IO "instance_group { } ensemble_scheduling { }",
                "instance group should not be specified for ensemble 'e'");
    ENS_INVALID(ENS_IO "optimization { } ensemble_scheduling { }",
                "optimization should not be specified for ensemble 'e'");
    ENS_INVALID(ENS_IO "model_warmup { } ensemble_scheduling { }",
                "model_warmup can not be specified for ensemble 'e'");
    ENS_INVALID(ENS_IO "ensemble_scheduling { }", "must specify 'step' for ensemble 'e'");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step { } }",
                "must specify 'model_name' in step 0 of ensemble 'e'");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step [ " STEP("a", "IN", "OUT") ", { model_name: "
                "\"b\" } ] }",
                "must specify 'input_map' in step 1 of ensemble 'e'");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step { model_name: \"a\" input_map { key: \"x\" "
                "value: \"IN\" } } }",
                "must specify 'output_map' in step 0 of ensemble 'e'");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step [ " STEP("a", "IN", "OUT") ", "
                STEP("b", "IN", "OUT") " ] }",
                "ensemble tensor 'OUT' can appear in an output map only once for ensemble 'e' "
                "step 1");
    ENS_INVALID("name: \"e\" platform: \"ensemble\" input { name: \"X\" data_type: TYPE_FP32 dims: 1 } "
                "ensemble_scheduling { step [ " STEP("a", "IN", "OUT") " ] }",
                "ensemble input 'X' for ensemble e' is not used");
    ENS_INVALID(ENS_IO "output { name: \"O2\" data_type: TYPE_FP32 dims: 1 } "
                "ensemble_scheduling { step [ " STEP("a", "IN", "OUT") " ] }",
                "ensemble output 'O2' for ensemble e' is not used");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step [ " STEP("a", "OTHER", "OUT") " ] }",
                "ensemble input 'IN' for ensemble e' is not used");
    ENS_INVALID("name: \"e\" platform: \"ensemble\" output { name: \"OUT\" data_type: TYPE_FP32 "
                "dims: 1 } ensemble_scheduling { step [ " STEP("a", "IN", "OUT") " ] }",
                "output 'OUT' for ensemble 'e' is not written: at least one of its depending "
                "tensors, 'IN', is not connected");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step [ " STEP("a", "IN", "mid") ", "
                STEP("b", "mid2", "OUT") " ] }",
                "output 'OUT' for ensemble 'e' is not written: at least one of its depending "
                "tensors, 'mid2', is not connected");
    ENS_INVALID(ENS_IO "ensemble_scheduling { step [ " STEP("a", "IN", "OUT") ", "
                STEP("b", "IN", "dangling") " ] }",
                "ensemble tensor 'dangling' is unused in ensemble 'e'");
}

NR_TEST(ensemble_cycle_is_not_written)
{
    ENS_INVALID(ENS_IO "ensemble_scheduling { step [ " STEP("a", "OUT", "OUT") ", "
                STEP("b", "IN", "Z") " ] }",
                "output 'OUT' for ensemble 'e' is not written");
}

NR_TEST_MAIN()
