/* test_model_config.c - config.pbtxt -> nr_model_config_t (src/config/model_config.c).
 *
 * Parses the configs from Triton's docs and checks the typed values; every
 * schema error (unknown field, wrong kind, range, enum, repeated singular,
 * oneof) is checked with its full message including file:line:col and field.
 * Also nr_cfg_parse_file, the dtype helpers, and a mutation fuzz loop.
 */
#include "nr_test.h"

#include "../../src/common/limits.h"
#include "../../src/config/model_config.h"

#include <math.h>
#include <unistd.h>

static nr_model_config_t *parse(const char *text)
{
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "m/config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "unexpected parse error: %s\n", st->msg);
        nr_status_free(st);
    }
    return cfg;
}

#define PREFIX "failed to read text proto from m/config.pbtxt: m/config.pbtxt:"

/* Expects nr_cfg_parse to fail with PREFIX + where_and_what. */
static bool parse_fails(const char *text, const char *where_and_what)
{
    char want[1024];
    snprintf(want, sizeof(want), "%s%s", PREFIX, where_and_what);
    nr_model_config_t *cfg = (nr_model_config_t *)1;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "m/config.pbtxt", &cfg);
    bool ok = EXPECT_NULL(cfg);
    if (cfg != NULL && cfg != (nr_model_config_t *)1)
        nr_cfg_free(cfg);
    return EXPECT_STATUS(st, NR_INTERNAL, want) && ok;
}

/* ---- typed values from Triton's docs -------------------------------------- */

NR_TEST(simple_model)
{
    nr_model_config_t *c = parse(
        "name: \"simple\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },\n"
        "        { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
        "instance_group [ { kind: KIND_CPU, count: 1 } ]\n");
    ASSERT_NOT_NULL(c);
    EXPECT_STREQ(c->name, "simple");
    EXPECT_STREQ(c->backend, "onnxruntime");
    EXPECT_NULL(c->platform);
    EXPECT_EQ_INT(c->max_batch_size, 8);
    ASSERT_EQ_INT(c->n_input, 2);
    EXPECT_STREQ(c->input[1].name, "INPUT1");
    EXPECT_EQ_INT(c->input[1].data_type, NR_TYPE_INT32);
    ASSERT_EQ_INT(c->input[1].dims.n, 1);
    EXPECT_EQ_INT(c->input[1].dims.v[0], 16);
    EXPECT_EQ_INT(c->n_output, 1);
    ASSERT_EQ_INT(c->n_instance_group, 1);
    EXPECT_EQ_INT(c->instance_group[0].kind, NR_KIND_CPU);
    EXPECT_EQ_INT(c->instance_group[0].count, 1);
    EXPECT_NULL(c->instance_group[0].name);
    EXPECT_FALSE(c->has_version_policy);
    EXPECT_EQ_INT(c->scheduling_choice, NR_SCHED_DEFAULT);
    nr_cfg_free(c);
}

NR_TEST(seed_doc_snippets)
{
    nr_model_config_t *c = parse("dynamic_batching { }\ninstance_group [ { count: 2 } ]");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->scheduling_choice, NR_SCHED_DYNAMIC);
    EXPECT_EQ_INT(c->dynamic_batching.n_preferred_batch_size, 0);
    ASSERT_EQ_INT(c->n_instance_group, 1);
    EXPECT_EQ_INT(c->instance_group[0].count, 2);
    EXPECT_EQ_INT(c->instance_group[0].kind, NR_KIND_AUTO);
    nr_cfg_free(c);
}

NR_TEST(tensorrt_accelerator_block)
{
    nr_model_config_t *c = parse(
        "optimization { execution_accelerators {\n"
        "  gpu_execution_accelerator : [ {\n"
        "    name : \"tensorrt\"\n"
        "    parameters { key: \"precision_mode\" value: \"FP16\" }\n"
        "    parameters { key: \"max_workspace_size_bytes\" value: \"1073741824\" }\n"
        "  } ]\n"
        "} }\n");
    ASSERT_NOT_NULL(c);
    EXPECT_TRUE(c->has_optimization);
    EXPECT_TRUE(c->optimization.has_execution_accelerators);
    ASSERT_EQ_INT(c->optimization.n_gpu_execution_accelerator, 1);
    EXPECT_EQ_INT(c->optimization.n_cpu_execution_accelerator, 0);
    const nr_cfg_accelerator_t *a = &c->optimization.gpu_execution_accelerator[0];
    EXPECT_STREQ(a->name, "tensorrt");
    ASSERT_EQ_INT(a->n_parameters, 2);
    EXPECT_STREQ(a->parameters[0].key, "precision_mode");
    EXPECT_STREQ(a->parameters[0].value, "FP16");
    EXPECT_STREQ(a->parameters[1].key, "max_workspace_size_bytes");
    EXPECT_STREQ(a->parameters[1].value, "1073741824");
    EXPECT_FALSE(c->optimization.has_input_pinned_memory);
    nr_cfg_free(c);
}

NR_TEST(openvino_accelerator_block)
{
    nr_model_config_t *c = parse("optimization { execution_accelerators { "
                                 "cpu_execution_accelerator : [ { name : \"openvino\" } ] } }");
    ASSERT_NOT_NULL(c);
    ASSERT_EQ_INT(c->optimization.n_cpu_execution_accelerator, 1);
    EXPECT_STREQ(c->optimization.cpu_execution_accelerator[0].name, "openvino");
    EXPECT_EQ_INT(c->optimization.cpu_execution_accelerator[0].n_parameters, 0);
    nr_cfg_free(c);
}

NR_TEST(model_parameters_map)
{
    nr_model_config_t *c = parse(
        "parameters { key: \"k\" value: { string_value: \"v\" } }\n"
        "parameters: { key: \"intra_op_thread_count\", value: { string_value: \"2\" } }\n"
        "parameters [ { value { string_value: \"no key\" } }, { key: \"k\" value {} } ]\n");
    ASSERT_NOT_NULL(c);
    ASSERT_EQ_INT(c->n_parameters, 3);
    EXPECT_STREQ(c->parameters[0].key, "k"); /* duplicate key: last wins, first position */
    EXPECT_NULL(c->parameters[0].value);
    EXPECT_STREQ(c->parameters[1].key, "intra_op_thread_count");
    EXPECT_STREQ(c->parameters[1].value, "2");
    EXPECT_NULL(c->parameters[2].key); /* missing key = "" */
    EXPECT_STREQ(c->parameters[2].value, "no key");
    nr_cfg_free(c);
}

NR_TEST(model_warmup)
{
    nr_model_config_t *c = parse(
        "model_warmup [ {\n"
        "  name: \"sample\" batch_size: 4 count: 3\n"
        "  inputs { key: \"A\" value: { data_type: TYPE_FP32 dims: [ 2, 3 ] random_data: true } }\n"
        "  inputs { key: \"B\" value: { data_type: TYPE_STRING dims: 1 input_data_file: \"b.bin\" } }\n"
        "  inputs { key: \"C\" value: { data_type: TYPE_INT8 dims: [1] zero_data: false } }\n"
        "} ]\n");
    ASSERT_NOT_NULL(c);
    ASSERT_EQ_INT(c->n_model_warmup, 1);
    const nr_cfg_warmup_t *w = &c->model_warmup[0];
    EXPECT_STREQ(w->name, "sample");
    EXPECT_EQ_INT(w->batch_size, 4);
    EXPECT_EQ_INT(w->count, 3);
    ASSERT_EQ_INT(w->n_inputs, 3);
    EXPECT_STREQ(w->inputs[0].key, "A");
    EXPECT_EQ_INT(w->inputs[0].data, NR_WARMUP_RANDOM);
    EXPECT_TRUE(w->inputs[0].data_flag);
    EXPECT_EQ_INT(w->inputs[0].dims.n, 2);
    EXPECT_EQ_INT(w->inputs[1].data, NR_WARMUP_FILE);
    EXPECT_STREQ(w->inputs[1].input_data_file, "b.bin");
    EXPECT_EQ_INT(w->inputs[1].data_type, NR_TYPE_STRING);
    EXPECT_EQ_INT(w->inputs[2].data, NR_WARMUP_ZERO); /* presence selects, value ignored */
    EXPECT_FALSE(w->inputs[2].data_flag);
    nr_cfg_free(c);
}

NR_TEST(priority_queue_policy_uint64_keys)
{
    nr_model_config_t *c = parse(
        "max_batch_size: 4\n"
        "dynamic_batching {\n"
        "  preferred_batch_size: [ 2, 4 ] max_queue_delay_microseconds: 18446744073709551615\n"
        "  preserve_ordering: true priority_levels: 3 default_priority_level: 2\n"
        "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 10 }\n"
        "  priority_queue_policy { key: 1 value { timeout_action: 1 max_queue_size: 4294967295 } }\n"
        "  priority_queue_policy { key: 0x3 value { allow_timeout_override: t } }\n"
        "  priority_queue_policy { key: 1 value { max_queue_size: 7 } }\n"
        "}\n");
    ASSERT_NOT_NULL(c);
    const nr_cfg_dynamic_batching_t *db = &c->dynamic_batching;
    ASSERT_EQ_INT(db->n_preferred_batch_size, 2);
    EXPECT_EQ_INT(db->preferred_batch_size[1], 4);
    EXPECT_EQ_U64(db->max_queue_delay_microseconds, UINT64_MAX);
    EXPECT_TRUE(db->preserve_ordering);
    EXPECT_EQ_U64(db->priority_levels, 3);
    EXPECT_EQ_U64(db->default_priority_level, 2);
    EXPECT_TRUE(db->has_default_queue_policy);
    EXPECT_EQ_INT(db->default_queue_policy.timeout_action, NR_TIMEOUT_DELAY);
    EXPECT_EQ_U64(db->default_queue_policy.default_timeout_microseconds, 10);
    ASSERT_EQ_INT(db->n_priority_queue_policy, 2);
    EXPECT_EQ_U64(db->priority_queue_policy[0].key, 1);
    EXPECT_EQ_INT(db->priority_queue_policy[0].value.max_queue_size, 7); /* replaced */
    EXPECT_EQ_INT(db->priority_queue_policy[0].value.timeout_action, NR_TIMEOUT_REJECT);
    EXPECT_EQ_U64(db->priority_queue_policy[1].key, 3);
    EXPECT_TRUE(db->priority_queue_policy[1].value.allow_timeout_override);
    nr_cfg_free(c);
}

NR_TEST(version_policies)
{
    nr_model_config_t *c = parse("version_policy: { all {} }");
    ASSERT_NOT_NULL(c);
    EXPECT_TRUE(c->has_version_policy);
    EXPECT_TRUE(c->version_policy.has_choice);
    EXPECT_EQ_INT(c->version_policy.kind, NR_POLICY_ALL);
    nr_cfg_free(c);
    c = parse("version_policy { specific { versions: [ 1, 3 ] versions: 0x10 } }");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->version_policy.kind, NR_POLICY_SPECIFIC);
    ASSERT_EQ_INT(c->version_policy.n_specific_versions, 3);
    EXPECT_EQ_INT(c->version_policy.specific_versions[2], 16);
    nr_cfg_free(c);
    c = parse("version_policy < latest < num_versions: 2 > >");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->version_policy.kind, NR_POLICY_LATEST);
    EXPECT_EQ_INT(c->version_policy.latest_num_versions, 2);
    nr_cfg_free(c);
}

NR_TEST(inputs_outputs_all_fields)
{
    nr_model_config_t *c = parse(
        "input [ { name: \"I\" data_type: TYPE_UINT8 format: FORMAT_NCHW dims: [3, 224, 224]\n"
        "  reshape: { shape: [ 1, 3, 224, 224 ] } is_shape_tensor: false allow_ragged_batch: 1\n"
        "  optional: True is_non_linear_format_io: f } ]\n"
        "output { name: \"O\" data_type: TYPE_BF16 dims: -1 reshape {} label_filename: \"l\"\n"
        "  is_shape_tensor: true is_non_linear_format_io: 0 }\n"
        "batch_input [ { kind: BATCH_ACCUMULATED_ELEMENT_COUNT target_name: \"T\"\n"
        "  data_type: TYPE_FP32 source_input: [ \"I\" ] } ]\n"
        "batch_output { target_name: [ \"O\" ] kind: BATCH_SCATTER_WITH_INPUT_SHAPE source_input: \"I\" }\n");
    ASSERT_NOT_NULL(c);
    const nr_cfg_input_t *in = &c->input[0];
    EXPECT_EQ_INT(in->format, NR_FORMAT_NCHW);
    EXPECT_EQ_INT(in->dims.n, 3);
    EXPECT_TRUE(in->has_reshape);
    EXPECT_EQ_INT(in->reshape.n, 4);
    EXPECT_TRUE(in->allow_ragged_batch);
    EXPECT_TRUE(in->optional);
    EXPECT_FALSE(in->is_non_linear_format_io);
    const nr_cfg_output_t *out = &c->output[0];
    EXPECT_EQ_INT(out->data_type, NR_TYPE_BF16);
    EXPECT_EQ_INT(out->dims.v[0], -1);
    EXPECT_TRUE(out->has_reshape);
    EXPECT_EQ_INT(out->reshape.n, 0);
    EXPECT_STREQ(out->label_filename, "l");
    EXPECT_TRUE(out->is_shape_tensor);
    EXPECT_EQ_INT(c->batch_input[0].kind, 1);
    EXPECT_STREQ(c->batch_input[0].target_name[0], "T");
    EXPECT_EQ_INT(c->batch_input[0].n_source_input, 1);
    EXPECT_EQ_INT(c->batch_output[0].n_target_name, 1);
    nr_cfg_free(c);
}

NR_TEST(sequence_batching_fields)
{
    nr_model_config_t *c = parse(
        "sequence_batching {\n"
        "  max_sequence_idle_microseconds: 5000000\n"
        "  oldest { max_candidate_sequences: 4 preferred_batch_size: [ 2 ]\n"
        "           max_queue_delay_microseconds: 7 preserve_ordering: true }\n"
        "  control_input [ { name: \"START\" control [ { kind: CONTROL_SEQUENCE_START\n"
        "      int32_false_true: [ 0, 1 ] } ] },\n"
        "    { name: \"CORRID\" control { kind: CONTROL_SEQUENCE_CORRID data_type: TYPE_UINT64 } },\n"
        "    { name: \"READY\" control { kind: CONTROL_SEQUENCE_READY bool_false_true: [ false, true, true ] } } ]\n"
        "  state { input_name: \"si\" output_name: \"so\" data_type: TYPE_FP32 dims: [ 4 ]\n"
        "    initial_state { data_type: TYPE_FP32 dims: 4 data_file: \"init.bin\" name: \"i0\" }\n"
        "    use_same_buffer_for_input_output: true use_growable_memory: true }\n"
        "  iterative_sequence: true\n"
        "}\n");
    ASSERT_NOT_NULL(c);
    const nr_cfg_sequence_batching_t *sb = &c->sequence_batching;
    EXPECT_EQ_INT(c->scheduling_choice, NR_SCHED_SEQUENCE);
    EXPECT_EQ_INT(sb->strategy, 2);
    EXPECT_EQ_INT(sb->oldest_max_candidate_sequences, 4);
    EXPECT_EQ_INT(sb->oldest_preferred_batch_size[0], 2);
    EXPECT_EQ_U64(sb->oldest_max_queue_delay_microseconds, 7);
    EXPECT_TRUE(sb->oldest_preserve_ordering);
    EXPECT_EQ_U64(sb->max_sequence_idle_microseconds, 5000000);
    ASSERT_EQ_INT(sb->n_control_input, 3);
    EXPECT_EQ_INT(sb->control_input[0].control[0].n_int32_false_true, 2);
    EXPECT_EQ_INT(sb->control_input[0].control[0].int32_false_true[1], 1);
    EXPECT_EQ_INT(sb->control_input[1].control[0].kind, 3);
    EXPECT_EQ_INT(sb->control_input[1].control[0].data_type, NR_TYPE_UINT64);
    EXPECT_EQ_INT(sb->control_input[2].control[0].n_bool_false_true, 3); /* counted past 2 */
    EXPECT_TRUE(sb->control_input[2].control[0].bool_false_true[1]);
    ASSERT_EQ_INT(sb->n_state, 1);
    EXPECT_EQ_INT(sb->state[0].initial_state[0].data_choice, 2);
    EXPECT_STREQ(sb->state[0].initial_state[0].data_file, "init.bin");
    EXPECT_TRUE(sb->state[0].use_growable_memory);
    EXPECT_TRUE(sb->iterative_sequence);
    nr_cfg_free(c);
    c = parse("sequence_batching { direct { max_queue_delay_microseconds: 3 "
              "minimum_slot_utilization: 0.25 } control_input { control { fp32_false_true: "
              "[-1.5e0, inf] } } }");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->sequence_batching.strategy, 1);
    EXPECT_EQ_DBL(c->sequence_batching.direct_minimum_slot_utilization, 0.25);
    EXPECT_EQ_DBL(c->sequence_batching.control_input[0].control[0].fp32_false_true[0], -1.5);
    EXPECT_TRUE(isinf(c->sequence_batching.control_input[0].control[0].fp32_false_true[1]));
    nr_cfg_free(c);
}

NR_TEST(ensemble_fields)
{
    nr_model_config_t *c = parse(
        "platform: \"ensemble\"\n"
        "ensemble_scheduling { step [ { model_name: \"pre\" model_version: -1\n"
        "  input_map { key: \"RAW\" value: \"IN\" } output_map { key: \"OUT\" value: \"mid\" } },\n"
        "  { model_name: \"net\" model_version: 2 input_map { key: \"X\" value: \"mid\" }\n"
        "    output_map { key: \"Y\" value: \"OUT\" } model_namespace: \"ns\" } ]\n"
        "  max_inflight_responses: 3 }\n");
    ASSERT_NOT_NULL(c);
    const nr_cfg_ensemble_t *e = &c->ensemble_scheduling;
    EXPECT_EQ_INT(c->scheduling_choice, NR_SCHED_ENSEMBLE);
    ASSERT_EQ_INT(e->n_step, 2);
    EXPECT_EQ_INT(e->step[0].model_version, -1);
    EXPECT_STREQ(e->step[0].input_map[0].key, "RAW");
    EXPECT_STREQ(e->step[1].output_map[0].value, "OUT");
    EXPECT_STREQ(e->step[1].model_namespace, "ns");
    EXPECT_EQ_INT(e->max_inflight_requests, 3);
    nr_cfg_free(c);
}

NR_TEST(instance_group_fields)
{
    nr_model_config_t *c = parse(
        "instance_group [ { name: \"g\" kind: KIND_GPU count: 3 gpus: [ 0, 1 ]\n"
        "  rate_limiter { resources [ { name: \"R\" global: true count: 2 } ] priority: 2 }\n"
        "  secondary_devices [ { kind: KIND_NVDLA device_id: -5 } ] profile: [ \"0\", \"1\" ]\n"
        "  passive: true host_policy: \"numa0\" },\n"
        "  { kind: KIND_MODEL } ]\n");
    ASSERT_NOT_NULL(c);
    ASSERT_EQ_INT(c->n_instance_group, 2);
    const nr_cfg_instance_group_t *g = &c->instance_group[0];
    EXPECT_EQ_INT(g->kind, NR_KIND_GPU);
    EXPECT_EQ_INT(g->n_gpus, 2);
    EXPECT_TRUE(g->has_rate_limiter);
    EXPECT_EQ_INT(g->rl_priority, 2);
    EXPECT_TRUE(g->rl_resources[0].global);
    EXPECT_EQ_INT(g->rl_resources[0].count, 2);
    EXPECT_EQ_INT(g->secondary_devices[0].device_id, -5);
    EXPECT_STREQ(g->profile[1], "1");
    EXPECT_TRUE(g->passive);
    EXPECT_STREQ(g->host_policy, "numa0");
    EXPECT_EQ_INT(c->instance_group[1].kind, NR_KIND_MODEL);
    nr_cfg_free(c);
}

NR_TEST(remaining_top_level_fields)
{
    nr_model_config_t *c = parse(
        "runtime: \"model.py\" default_model_filename: \"m.onnx\"\n"
        "cc_model_filenames [ { key: \"8.0\" value: \"a\" }, { key: \"7.5\" value: \"b\" } ]\n"
        "metric_tags { key: \"team\" value: \"x\" }\n"
        "model_operations { op_library_filename: [ \"a.so\", \"b.so\" ] }\n"
        "model_transaction_policy { decoupled: true }\n"
        "model_repository_agents { agents [ { name: \"checksum\" parameters { key: \"MD5\" value: \"x\" } } ] }\n"
        "response_cache { enable: true }\n"
        "model_metrics { metric_control [ { metric_identifier { family: \"nv_inference_request_duration\" }\n"
        "  histogram_options { buckets: [ -5.0, 0, 3.5, 5 ] } } ] }\n"
        "optimization { graph { level: 1 } priority: PRIORITY_MIN cuda { graphs: true busy_wait_events: 1\n"
        "  output_copy_stream: true graph_spec { batch_size: 2 input { key: \"x\" value { dim: [ 3 ] } }\n"
        "  input { key: \"x\" value { dim: [ 4, 5 ] } } } }\n"
        "  gather_kernel_buffer_threshold: 4 eager_batching: true output_pinned_memory { enable: false } }\n");
    ASSERT_NOT_NULL(c);
    EXPECT_STREQ(c->runtime, "model.py");
    EXPECT_STREQ(c->default_model_filename, "m.onnx");
    EXPECT_EQ_INT(c->n_cc_model_filenames, 2);
    EXPECT_STREQ(c->metric_tags[0].value, "x");
    EXPECT_TRUE(c->has_model_operations);
    EXPECT_EQ_INT(c->n_op_library_filename, 2);
    EXPECT_TRUE(c->has_model_transaction_policy);
    EXPECT_TRUE(c->decoupled);
    EXPECT_TRUE(c->has_model_repository_agents);
    EXPECT_STREQ(c->agents[0].parameters[0].key, "MD5");
    EXPECT_TRUE(c->has_response_cache && c->response_cache_enable);
    EXPECT_TRUE(c->has_model_metrics);
    EXPECT_TRUE(c->metric_control[0].has_metric_identifier);
    EXPECT_TRUE(c->metric_control[0].has_histogram_options);
    EXPECT_EQ_DBL(c->metric_control[0].buckets[0], -5.0);
    EXPECT_EQ_INT(c->metric_control[0].n_buckets, 4);
    const nr_cfg_optimization_t *o = &c->optimization;
    EXPECT_TRUE(o->has_graph);
    EXPECT_EQ_INT(o->graph_level, 1);
    EXPECT_EQ_INT(o->priority, 2);
    EXPECT_TRUE(o->has_cuda && o->cuda_graphs && o->cuda_busy_wait_events && o->cuda_output_copy_stream);
    ASSERT_EQ_INT(o->n_cuda_graph_spec, 1);
    ASSERT_EQ_INT(o->cuda_graph_spec[0].n_input, 1); /* map: the second "x" replaced the first */
    EXPECT_STREQ(o->cuda_graph_spec[0].input_names[0], "x");
    EXPECT_EQ_INT(o->cuda_graph_spec[0].input_dims[0].n, 2);
    EXPECT_EQ_INT(o->gather_kernel_buffer_threshold, 4);
    EXPECT_TRUE(o->eager_batching);
    EXPECT_TRUE(o->has_output_pinned_memory);
    EXPECT_FALSE(o->output_pinned_memory);
    nr_cfg_free(c);
}

NR_TEST(numbers_enums_and_bools)
{
    nr_model_config_t *c = parse(
        "max_batch_size: 0x7fffffff\n"
        "input { data_type: 11 dims: [ -9223372036854775808, 9223372036854775807, 010 ] }\n"
        "input { data_type: 200 format: -1 }\n"
        "version_policy { latest { num_versions: 4294967295 } }\n");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->max_batch_size, INT32_MAX);
    EXPECT_EQ_INT(c->input[0].data_type, NR_TYPE_FP32);
    EXPECT_TRUE(c->input[0].dims.v[0] == INT64_MIN);
    EXPECT_EQ_INT(c->input[0].dims.v[1], INT64_MAX);
    EXPECT_EQ_INT(c->input[0].dims.v[2], 8);
    EXPECT_EQ_INT(c->input[1].data_type, 200); /* open enum */
    EXPECT_EQ_INT(c->input[1].format, -1);
    EXPECT_EQ_U64(c->version_policy.latest_num_versions, UINT32_MAX);
    nr_cfg_free(c);
    c = parse("max_batch_size: -2147483648");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->max_batch_size, INT32_MIN);
    nr_cfg_free(c);
}

NR_TEST(long_float_literal)
{
    char txt[400];
    int n = snprintf(txt, sizeof(txt), "model_metrics { metric_control { histogram_options { "
                                       "buckets: 0.");
    for (int i = 0; i < 199; i++)
        txt[n++] = '0';
    snprintf(txt + n, sizeof(txt) - (size_t)n, "25e199f } } }");
    nr_model_config_t *c = parse(txt);
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_DBL(c->metric_control[0].buckets[0], 0.25);
    nr_cfg_free(c);
}

NR_TEST(singular_scalar_may_repeat_while_default)
{
    nr_model_config_t *c = parse("max_batch_size: 0 max_batch_size: 4 name: \"\" name: \"x\"");
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->max_batch_size, 4);
    EXPECT_STREQ(c->name, "x");
    nr_cfg_free(c);
}

NR_TEST(repeated_fields_mix_forms)
{
    nr_model_config_t *c = parse("input { dims: 1 dims: [ 2, 3 ] dims: [] dims: 4 }");
    ASSERT_NOT_NULL(c);
    ASSERT_EQ_INT(c->input[0].dims.n, 4);
    EXPECT_EQ_INT(c->input[0].dims.v[3], 4);
    nr_cfg_free(c);
}

/* ---- errors --------------------------------------------------------------- */

NR_TEST(unknown_fields)
{
    parse_fails("foo: 1", "1:1: foo: Message type \"inference.ModelConfig\" has no field named \"foo\"");
    parse_fails("name: \"m\"\ninput [ { name: \"a\" },\n  { nme: \"x\" } ]",
                "3:5: input.nme: Message type \"inference.ModelInput\" has no field named \"nme\"");
    parse_fails("Name: \"m\"", "1:1: Name: Message type \"inference.ModelConfig\" has no field "
                               "named \"Name\"");
    parse_fails("parameters { key: \"a\" val: \"b\" }",
                "1:23: parameters.val: Message type \"inference.ModelConfig.ParametersEntry\" has "
                "no field named \"val\"");
    parse_fails("dynamic_batching { priority_queue_policy { value { foo: 1 } } }",
                "1:52: dynamic_batching.priority_queue_policy.value.foo: Message type "
                "\"inference.ModelQueuePolicy\" has no field named \"foo\"");
}

NR_TEST(wrong_value_kinds)
{
    parse_fails("max_batch_size: \"8\"", "1:17: max_batch_size: expected an integer, got \"8\"");
    parse_fails("max_batch_size: eight", "1:17: max_batch_size: expected an integer, got eight");
    parse_fails("max_batch_size { }", "1:16: max_batch_size: expected an integer, got a message");
    parse_fails("name { }", "1:6: name: expected a string, got a message");
    parse_fails("name: 5", "1:7: name: expected a string, got 5");
    parse_fails("name: simple", "1:7: name: expected a string, got simple");
    parse_fails("dynamic_batching: 5", "1:19: dynamic_batching: expected a message ('{'), got 5");
    parse_fails("input: [ 1 ]", "1:10: input: expected a message ('{'), got 1");
    parse_fails("input [ { dims: [ \"1\" ] } ]", "1:19: input.dims: expected an integer, got \"1\"");
    parse_fails("version_policy { latest { num_versions: x } }",
                "1:41: version_policy.latest.num_versions: expected an unsigned integer, got x");
    parse_fails("input { data_type: \"TYPE_FP32\" }",
                "1:20: input.data_type: expected an enum value, got \"TYPE_FP32\"");
    parse_fails("input { data_type: 1.0 }", "1:20: input.data_type: expected an enum value, got 1.0");
    parse_fails("input { optional: \"true\" }", "1:19: input.optional: expected a boolean, got \"true\"");
    parse_fails("sequence_batching { direct { minimum_slot_utilization: \"0.5\" } }",
                "1:56: sequence_batching.direct.minimum_slot_utilization: expected a number, got "
                "\"0.5\"");
    parse_fails("sequence_batching { direct { minimum_slot_utilization: half } }",
                "1:56: sequence_batching.direct.minimum_slot_utilization: expected a number, got "
                "half");
}

NR_TEST(list_on_singular_field)
{
    parse_fails("max_batch_size: [ 1 ]", "1:1: max_batch_size: list syntax '[...]' used for "
                                         "non-repeated field \"max_batch_size\"");
    parse_fails("optimization: [ { } ]", "1:1: optimization: list syntax '[...]' used for "
                                         "non-repeated field \"optimization\"");
    parse_fails("name: []", "1:1: name: list syntax '[...]' used for non-repeated field \"name\"");
}

NR_TEST(integer_ranges)
{
    parse_fails("max_batch_size: 2147483648", "1:17: max_batch_size: integer out of range (2147483648)");
    parse_fails("max_batch_size: -2147483649", "1:17: max_batch_size: integer out of range (-2147483649)");
    parse_fails("max_batch_size: 0x100000000", "1:17: max_batch_size: integer out of range (0x100000000)");
    parse_fails("input { dims: 9223372036854775808 }",
                "1:15: input.dims: integer out of range (9223372036854775808)");
    parse_fails("input { dims: -9223372036854775809 }",
                "1:15: input.dims: integer out of range (-9223372036854775809)");
    parse_fails("version_policy { latest { num_versions: 4294967296 } }",
                "1:41: version_policy.latest.num_versions: integer out of range (4294967296)");
    parse_fails("dynamic_batching { priority_levels: 18446744073709551616 }",
                "1:37: dynamic_batching.priority_levels: integer out of range "
                "(18446744073709551616)");
    parse_fails("dynamic_batching { priority_levels: 99999999999999999999999 }",
                "1:37: dynamic_batching.priority_levels: integer out of range "
                "(99999999999999999999999)");
    parse_fails("input { data_type: 2147483648 }",
                "1:20: input.data_type: integer out of range (2147483648)");
}

NR_TEST(negative_unsigned_values)
{
    parse_fails("version_policy { latest { num_versions: -1 } }",
                "1:41: version_policy.latest.num_versions: negative value -1 for an unsigned field");
    parse_fails("dynamic_batching { max_queue_delay_microseconds: -0 }",
                "1:50: dynamic_batching.max_queue_delay_microseconds: negative value -0 for an "
                "unsigned field");
    parse_fails("dynamic_batching { priority_queue_policy { key: -1 } }",
                "1:49: dynamic_batching.priority_queue_policy.key: negative value -1 for an "
                "unsigned field");
}

NR_TEST(float_in_int_field)
{
    parse_fails("max_batch_size: 1.5", "1:17: max_batch_size: expected an integer, got 1.5");
    parse_fails("max_batch_size: 8f", "1:17: max_batch_size: expected an integer, got 8f");
    parse_fails("input { dims: [ 1e3 ] }", "1:17: input.dims: expected an integer, got 1e3");
    parse_fails("max_batch_size: inf", "1:17: max_batch_size: expected an integer, got inf");
}

NR_TEST(float_fields_need_decimal)
{
    parse_fails("sequence_batching { direct { minimum_slot_utilization: 0x1 } }",
                "1:56: sequence_batching.direct.minimum_slot_utilization: expected a decimal "
                "number, got 0x1");
    parse_fails("model_metrics { metric_control { histogram_options { buckets: 010 } } }",
                "1:63: model_metrics.metric_control.histogram_options.buckets: expected a decimal "
                "number, got 010");
}

NR_TEST(bad_enum_names)
{
    parse_fails("input { data_type: TYPE_FOO }",
                "1:20: input.data_type: unknown enumeration value \"TYPE_FOO\" for inference.DataType");
    parse_fails("input { data_type: type_fp32 }",
                "1:20: input.data_type: unknown enumeration value \"type_fp32\" for inference.DataType");
    parse_fails("instance_group { kind: CPU }",
                "1:24: instance_group.kind: unknown enumeration value \"CPU\" for "
                "inference.ModelInstanceGroup.Kind");
    parse_fails("input { data_type: -TYPE_FP32 }",
                "1:20: input.data_type: expected an enum value, got -TYPE_FP32");
}

NR_TEST(bad_bools)
{
    parse_fails("input { optional: yes }", "1:19: input.optional: invalid value for a boolean field: yes");
    parse_fails("input { optional: TRUE }", "1:19: input.optional: invalid value for a boolean field: TRUE");
    parse_fails("input { optional: 2 }", "1:19: input.optional: invalid value for a boolean field: 2");
    parse_fails("input { optional: -1 }", "1:19: input.optional: invalid value for a boolean field: -1");
    parse_fails("input { optional: 1.0 }", "1:19: input.optional: invalid value for a boolean field: 1.0");
}

NR_TEST(singular_field_twice)
{
    parse_fails("max_batch_size: 8\nmax_batch_size: 4",
                "2:1: max_batch_size: Non-repeated field \"max_batch_size\" is specified multiple times");
    parse_fails("name: \"a\" name: \"a\"",
                "1:11: name: Non-repeated field \"name\" is specified multiple times");
    parse_fails("dynamic_batching { } dynamic_batching { }",
                "1:22: dynamic_batching: Non-repeated field \"dynamic_batching\" is specified "
                "multiple times");
    parse_fails("input { reshape { } reshape { } }",
                "1:21: input.reshape: Non-repeated field \"reshape\" is specified multiple times");
    parse_fails("parameters { key: \"a\" key: \"b\" }",
                "1:23: parameters.key: Non-repeated field \"key\" is specified multiple times");
    parse_fails("model_warmup { inputs { value { zero_data: false zero_data: false } } }",
                "1:50: model_warmup.inputs.value.zero_data: Non-repeated field \"zero_data\" is "
                "specified multiple times");
    parse_fails("ensemble_scheduling { max_inflight_requests: 1 max_inflight_responses: 2 }",
                "1:48: ensemble_scheduling.max_inflight_responses: Non-repeated field "
                "\"max_inflight_responses\" is specified multiple times");
}

NR_TEST(two_oneof_members)
{
    parse_fails("dynamic_batching { }\nsequence_batching { }",
                "2:1: sequence_batching: Field \"sequence_batching\" is specified along with field "
                "\"dynamic_batching\", another member of oneof \"scheduling_choice\"");
    parse_fails("version_policy { latest { } all { } }",
                "1:29: version_policy.all: Field \"all\" is specified along with field \"latest\", "
                "another member of oneof \"policy_choice\"");
    parse_fails("sequence_batching { oldest { } direct { } }",
                "1:32: sequence_batching.direct: Field \"direct\" is specified along with field "
                "\"oldest\", another member of oneof \"strategy_choice\"");
    parse_fails("model_warmup { inputs { value { zero_data: true random_data: true } } }",
                "1:49: model_warmup.inputs.value.random_data: Field \"random_data\" is specified "
                "along with field \"zero_data\", another member of oneof \"input_data_type\"");
    parse_fails("sequence_batching { state { initial_state { zero_data: true data_file: \"x\" } } }",
                "1:61: sequence_batching.state.initial_state.data_file: Field \"data_file\" is "
                "specified along with field \"zero_data\", another member of oneof \"state_data\"");
}

NR_TEST(repeated_field_limit)
{
    size_t cap = 16384 * 3 + 64;
    char *txt = malloc(cap);
    ASSERT_NOT_NULL(txt);
    size_t n = (size_t)sprintf(txt, "input { dims: [ ");
    for (int i = 0; i < 16384; i++)
        n += (size_t)sprintf(txt + n, "1,");
    sprintf(txt + n, "2 ] }");
    bool ok = parse_fails(txt, "1:32785: input.dims: more than 16384 values for a repeated field");
    sprintf(txt + n - 2, "2 ] }"); /* one value fewer: exactly 16384 is fine */
    nr_model_config_t *c = parse(txt);
    free(txt);
    ASSERT_TRUE(ok);
    ASSERT_NOT_NULL(c);
    EXPECT_EQ_INT(c->input[0].dims.n, 16384);
    nr_cfg_free(c);
}

NR_TEST(nul_in_string_field)
{
    parse_fails("name: \"a\\0b\"", "1:7: name: strings with NUL bytes are not supported");
}

NR_TEST(syntax_errors_are_wrapped)
{
    parse_fails("name: \"x", "1:9: name: unexpected end of input inside a string literal");
    parse_fails("input [ { dims: [ 1, ] } ]", "1:22: input.dims: expected a value, got ']'");
}

NR_TEST(null_path_and_text)
{
    nr_model_config_t *c = NULL;
    nr_status_t *st = nr_cfg_parse("x: 1", 4, NULL, &c);
    EXPECT_STATUS(st, NR_INTERNAL, "failed to read text proto from config.pbtxt: config.pbtxt:1:1: "
                                   "x: Message type \"inference.ModelConfig\" has no field named \"x\"");
    ASSERT_OK(nr_cfg_parse(NULL, 0, "p", &c));
    EXPECT_NULL(c->name);
    nr_cfg_free(c);
    nr_cfg_free(NULL);
}

/* ---- files ---------------------------------------------------------------- */

static char *tmp_file(const char *content, size_t len)
{
    char *path = strdup("/tmp/nr_test_cfg_XXXXXX");
    int fd = mkstemp(path);
    if (fd < 0) {
        free(path);
        return NULL;
    }
    if (len && write(fd, content, len) != (ssize_t)len)
        len = 0;
    close(fd);
    return path;
}

NR_TEST(parse_file_ok_and_errors)
{
    char *p = tmp_file("name: \"f\"\nmax_batch_size: 2\n", 27);
    ASSERT_NOT_NULL(p);
    nr_model_config_t *c = NULL;
    ASSERT_OK(nr_cfg_parse_file(p, &c));
    EXPECT_STREQ(c->name, "f");
    EXPECT_EQ_INT(c->max_batch_size, 2);
    nr_cfg_free(c);
    unlink(p);
    free(p);

    p = tmp_file("name: 1", 7);
    ASSERT_NOT_NULL(p);
    char want[256];
    snprintf(want, sizeof(want), "failed to read text proto from %s: %s:1:7: name: expected a "
             "string, got 1", p, p);
    EXPECT_STATUS(nr_cfg_parse_file(p, &c), NR_INTERNAL, want);
    EXPECT_NULL(c);
    unlink(p);
    free(p);

    EXPECT_STATUS(nr_cfg_parse_file("/nonexistent/dir/config.pbtxt", &c), NR_NOT_FOUND,
                  "failed to open text file for read /nonexistent/dir/config.pbtxt: No such file "
                  "or directory");
    EXPECT_NULL(c);
    EXPECT_STATUS(nr_cfg_parse_file("/tmp", &c), NR_INTERNAL,
                  "failed to read text file /tmp: Is a directory");
}

NR_TEST(parse_file_size_limit)
{
    size_t n = (size_t)NR_MAX_CONFIG_BYTES + 1;
    char *big = malloc(n);
    ASSERT_NOT_NULL(big);
    memset(big, '#', n); /* one long comment */
    char *p = tmp_file(big, n);
    free(big);
    ASSERT_NOT_NULL(p);
    nr_model_config_t *c = NULL;
    char want[256];
    snprintf(want, sizeof(want), "model configuration file %s is larger than 16777216 bytes", p);
    EXPECT_STATUS(nr_cfg_parse_file(p, &c), NR_INVALID_ARG, want);
    EXPECT_NULL(c);
    unlink(p);
    free(p);
}

/* ---- dtypes --------------------------------------------------------------- */

NR_TEST(dtype_helpers)
{
    EXPECT_STREQ(nr_dtype_kserve_name(NR_TYPE_FP32), "FP32");
    EXPECT_STREQ(nr_dtype_kserve_name(NR_TYPE_STRING), "BYTES");
    EXPECT_STREQ(nr_dtype_kserve_name(NR_TYPE_BF16), "BF16");
    EXPECT_NULL(nr_dtype_kserve_name(NR_TYPE_INVALID));
    EXPECT_EQ_INT(nr_dtype_from_kserve("BYTES", 5), NR_TYPE_STRING);
    EXPECT_EQ_INT(nr_dtype_from_kserve("INT64xx", 5), NR_TYPE_INT64);
    EXPECT_EQ_INT(nr_dtype_from_kserve("STRING", 6), NR_TYPE_INVALID);
    EXPECT_EQ_INT(nr_dtype_from_kserve("fp32", 4), NR_TYPE_INVALID);
    EXPECT_EQ_INT(nr_dtype_from_kserve(NULL, 0), NR_TYPE_INVALID);
    EXPECT_STREQ(nr_dtype_enum_name(NR_TYPE_STRING), "TYPE_STRING");
    EXPECT_STREQ(nr_dtype_enum_name(NR_TYPE_UINT16), "TYPE_UINT16");
    EXPECT_STREQ(nr_dtype_enum_name(NR_TYPE_INVALID), "TYPE_INVALID");
    EXPECT_EQ_INT(nr_dtype_size(NR_TYPE_FP16), 2);
    EXPECT_EQ_INT(nr_dtype_size(NR_TYPE_UINT64), 8);
    EXPECT_EQ_INT(nr_dtype_size(NR_TYPE_BOOL), 1);
    EXPECT_EQ_INT(nr_dtype_size(NR_TYPE_STRING), 0);
    EXPECT_EQ_INT(nr_dtype_size(NR_TYPE_INVALID), 0);
    for (int t = NR_TYPE_BOOL; t <= NR_TYPE_BF16; t++) {
        const char *k = nr_dtype_kserve_name((nr_dtype_t)t);
        ASSERT_NOT_NULL(k);
        EXPECT_EQ_INT(nr_dtype_from_kserve(k, strlen(k)), t);
    }
}

/* ---- fuzz ----------------------------------------------------------------- */

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

NR_TEST(fuzz_mutated_configs)
{
    static const char *const seeds[] = {
        "name: \"m\" backend: \"onnxruntime\" max_batch_size: 8 input [ { name: \"I\" data_type: "
        "TYPE_FP32 dims: [ -1 ] reshape { shape: [ 1 ] } } ] output { name: \"O\" data_type: 11 "
        "dims: 1 } dynamic_batching { preferred_batch_size: [ 4 ] priority_levels: 2 "
        "priority_queue_policy { key: 1 value { max_queue_size: 3 } } }",
        "sequence_batching { oldest { preferred_batch_size: 2 } control_input { name: \"S\" "
        "control { kind: CONTROL_SEQUENCE_START fp32_false_true: [ 0, 1 ] } } state { dims: 2 "
        "initial_state { zero_data: true } } } model_warmup { inputs { key: \"I\" value { "
        "random_data: true dims: 3 } } }",
        "optimization { cuda { graph_spec { input { key: \"x\" value { dim: 1 } } "
        "graph_lower_bound { input { key: \"x\" value { dim: 2 } } } } } execution_accelerators { "
        "gpu_execution_accelerator { name: \"t\" parameters { key: \"a\" value: \"b\" } } } } "
        "version_policy { specific { versions: [ 1, 2 ] } } model_metrics { metric_control { "
        "histogram_options { buckets: 1.5 } } } ensemble_scheduling { step { input_map { key: "
        "\"a\" value: \"b\" } } }",
    };
    static const char alphabet[] = "{}<>[]:;,-\"'#\n 0x1e.f_aZ";
    char buf[1024];
    for (int iter = 0; iter < 30000; iter++) {
        const char *seed = seeds[rnd() % 3];
        size_t len = strlen(seed);
        memcpy(buf, seed, len);
        int edits = 1 + (int)(rnd() % 3);
        for (int e = 0; e < edits && len > 0; e++) {
            size_t at = rnd() % len;
            switch (rnd() % 4) {
            case 0: buf[at] = alphabet[rnd() % (sizeof(alphabet) - 1)]; break;
            case 1: buf[at] = (char)rnd(); break;
            case 2: /* duplicate a slice: repeats fields and nesting */
                if (len + 40 < sizeof(buf)) {
                    size_t n = rnd() % 40;
                    if (at + n > len)
                        n = len - at;
                    memmove(buf + at + n, buf + at, len - at);
                    len += n;
                }
                break;
            default: len = at; break;
            }
        }
        nr_model_config_t *c = NULL;
        nr_status_t *st = nr_cfg_parse(buf, len, "fz", &c);
        EXPECT_TRUE((st == NULL) != (c == NULL));
        if (c != NULL) {
            char *j = nr_cfg_to_json(c, NULL);
            free(j);
            nr_cfg_normalize(c);
            nr_cfg_fill_instance_groups(c, 2, (int)(rnd() % 3));
            nr_status_free(nr_cfg_validate(c, "m"));
            j = nr_cfg_to_json(c, NULL);
            free(j);
        }
        nr_status_free(st);
        nr_cfg_free(c);
    }
}

NR_TEST_MAIN()
