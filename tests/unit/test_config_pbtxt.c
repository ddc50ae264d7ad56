/* test_config_pbtxt.c - nr_cfg_to_pbtxt: a config written back as config.pbtxt.
 *
 * The exact text is checked for small configs (layout, field order, escapes,
 * numbers), so that a change of format shows. The round trip
 * nr_cfg_parse -> nr_cfg_to_pbtxt -> nr_cfg_parse must give the same config:
 * the same nr_cfg_to_json and nr_cfg_to_pb bytes, and the second text equal
 * to the first. It runs over a config that sets every kind of field, over
 * examples/model_repository and over every config the unit tests use (the
 * fuzz seed corpus tests/fuzz/corpus/config/, which make_seeds.py fills with
 * them and with the e2e configs), each as parsed and again after the load
 * pipeline. Run from the repository root (as `make unit` does).
 */
#include "nr_test.h"
#include "config_dirs.h"

#include "../../src/common/alloc.h"
#include "../../src/config/model_config.h"


/* ---- helpers -------------------------------------------------------------- */

/* The config.pbtxt nereid writes for text; NULL, failing the test, when the
 * text does not parse. */
static char *pbtxt_of(const char *text)
{
    nr_model_config_t *cfg = NULL;
    if (!EXPECT_OK(nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg)))
        return NULL;
    size_t len;
    char *out = nr_cfg_to_pbtxt(cfg, &len);
    EXPECT_EQ_U64(len, strlen(out));
    nr_cfg_free(cfg);
    return out;
}

/* Compares and frees; NULL (a parse error) fails too. */
static void check_pbtxt(char *got, const char *expected, int line)
{
    if (got == NULL)
        nr_test_fail(__FILE__, line, "no text (parse failed)");
    else if (strcmp(got, expected) != 0)
        nr_test_fail(__FILE__, line, "text differs:\n--- got:\n%s--- expected:\n%s---", got,
                     expected);
    free(got);
}
#define CHECK_PBTXT(text, expected) check_pbtxt(pbtxt_of(text), (expected), __LINE__)

/* Both renderings (r 0: JSON, 1: protobuf) of a and b are the same bytes. */
static bool same_rendering(const nr_model_config_t *a, const nr_model_config_t *b, int r,
                           const char *what)
{
    size_t la, lb;
    char *ra = r ? nr_cfg_to_pb(a, &la) : nr_cfg_to_json(a, &la);
    char *rb = r ? nr_cfg_to_pb(b, &lb) : nr_cfg_to_json(b, &lb);
    bool ok = la == lb && memcmp(ra, rb, la) == 0;
    if (!ok)
        nr_test_fail(__FILE__, __LINE__, "%s: the %s differs after the round trip%s%s%s%s",
                     what, r ? "protobuf" : "JSON", r ? "" : ":\n  before: ", r ? "" : ra,
                     r ? "" : "\n  after:  ", r ? "" : rb);
    free(ra);
    free(rb);
    return ok;
}

/* cfg (taken) -> pbtxt -> nr_cfg_parse: the same config, and the text a
 * fixed point; then the same after the load pipeline (normalize, instance
 * groups), which is what a tool deriving a config from a loaded model has.
 * 1 when it round-trips, -1 (the test failed) when not. */
static int round_trip(nr_model_config_t *cfg, const char *what)
{
    int rc = 1;
    for (int pass = 0; pass < 2 && rc == 1; pass++) {
        if (pass == 1) {
            nr_cfg_normalize(cfg);
            nr_cfg_fill_instance_groups(cfg, 2, 0);
        }
        size_t n;
        char *text = nr_cfg_to_pbtxt(cfg, &n);
        nr_model_config_t *back = NULL;
        nr_status_t *st = nr_cfg_parse(text, n, "written.pbtxt", &back);
        if (st != NULL) {
            nr_test_fail(__FILE__, __LINE__, "%s (pass %d): the text does not parse: %s\n%s",
                         what, pass, st->msg, text);
            nr_status_free(st);
            rc = -1;
        } else {
            char *again = nr_cfg_to_pbtxt(back, NULL);
            if (!same_rendering(cfg, back, 0, what) || !same_rendering(cfg, back, 1, what)) {
                rc = -1;
            } else if (strcmp(text, again) != 0) {
                nr_test_fail(__FILE__, __LINE__,
                             "%s (pass %d): written twice, the text differs:\n%s---\n%s", what,
                             pass, text, again);
                rc = -1;
            }
            free(again);
        }
        nr_cfg_free(back);
        free(text);
    }
    nr_cfg_free(cfg);
    return rc;
}

static int round_trip_text(const char *text)
{
    nr_model_config_t *cfg = NULL;
    if (!EXPECT_OK(nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg)))
        return -1;
    return round_trip(cfg, text);
}

/* ---- the exact text --------------------------------------------------------- */

NR_TEST(small_config_exact)
{
    /* Fields come out in number order (backend = 17 last), each repeated
     * value on its line, a present empty message as an open and a close. */
    CHECK_PBTXT("backend: \"onnxruntime\"\n"
                "name: \"small\"\n"
                "max_batch_size: 8\n"
                "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 3, -1 ] } ]\n"
                "instance_group [ { kind: KIND_CPU count: 2 } ]\n"
                "dynamic_batching { }\n",
                "name: \"small\"\n"
                "max_batch_size: 8\n"
                "input {\n"
                "  name: \"INPUT0\"\n"
                "  data_type: TYPE_FP32\n"
                "  dims: 3\n"
                "  dims: -1\n"
                "}\n"
                "instance_group {\n"
                "  count: 2\n"
                "  kind: KIND_CPU\n"
                "}\n"
                "dynamic_batching {\n"
                "}\n"
                "backend: \"onnxruntime\"\n");
}

NR_TEST(all_default_is_empty)
{
    CHECK_PBTXT("", "");
    /* Zero scalars given explicitly are left out, as protobuf leaves them. */
    CHECK_PBTXT("name: \"\" max_batch_size: 0 input [ ] instance_group [ ]", "");
    nr_model_config_t *cfg = nr_cfg_new();
    size_t len = 99;
    char *text = nr_cfg_to_pbtxt(cfg, &len);
    EXPECT_NOT_NULL(text);
    EXPECT_EQ_U64(len, 0);
    if (text != NULL)
        EXPECT_STREQ(text, "");
    free(text);
    nr_cfg_free(cfg);
}

NR_TEST(presence_exact)
{
    /* Zero scalars inside messages go; present messages stay, even empty;
     * a oneof member is written even at zero. */
    CHECK_PBTXT("input [ { name: \"\" dims: [ ] reshape { } optional: false } ]\n"
                "version_policy { all { } }\n"
                "optimization { input_pinned_memory { enable: false } }\n"
                "sequence_batching { direct { } }\n"
                "model_warmup [ { name: \"w\" batch_size: 0\n"
                "  inputs { key: \"a\" value { zero_data: false } }\n"
                "  inputs { key: \"b\" value { input_data_file: \"\" } } } ]\n",
                "version_policy {\n"
                "  all {\n"
                "  }\n"
                "}\n"
                "input {\n"
                "  reshape {\n"
                "  }\n"
                "}\n"
                "optimization {\n"
                "  input_pinned_memory {\n"
                "  }\n"
                "}\n"
                "sequence_batching {\n"
                "  direct {\n"
                "  }\n"
                "}\n"
                "model_warmup {\n"
                "  name: \"w\"\n"
                "  inputs {\n"
                "    key: \"a\"\n"
                "    value {\n"
                "      zero_data: false\n"
                "    }\n"
                "  }\n"
                "  inputs {\n"
                "    key: \"b\"\n"
                "    value {\n"
                "      input_data_file: \"\"\n"
                "    }\n"
                "  }\n"
                "}\n");
}

NR_TEST(maps_exact)
{
    /* Key and value are always written; entries keep the config's order,
     * a repeated key keeping the later value. */
    CHECK_PBTXT("parameters { key: \"z\" value { string_value: \"1\" } }\n"
                "parameters { key: \"a\" value { } }\n"
                "metric_tags { key: \"\" value: \"\" }\n"
                "parameters { key: \"z\" value { string_value: \"2\" } }\n"
                "dynamic_batching { priority_queue_policy { key: 3 value { max_queue_size: 4 } } }\n"
                "optimization { cuda { graph_spec [ { input { key: \"I\" value { dim: [ 2, 4 ] } }\n"
                "  input { key: \"J\" value { } } } ] } }\n",
                "metric_tags {\n"
                "  key: \"\"\n"
                "  value: \"\"\n"
                "}\n"
                "dynamic_batching {\n"
                "  priority_queue_policy {\n"
                "    key: 3\n"
                "    value {\n"
                "      max_queue_size: 4\n"
                "    }\n"
                "  }\n"
                "}\n"
                "optimization {\n"
                "  cuda {\n"
                "    graph_spec {\n"
                "      input {\n"
                "        key: \"I\"\n"
                "        value {\n"
                "          dim: 2\n"
                "          dim: 4\n"
                "        }\n"
                "      }\n"
                "      input {\n"
                "        key: \"J\"\n"
                "        value {\n"
                "        }\n"
                "      }\n"
                "    }\n"
                "  }\n"
                "}\n"
                "parameters {\n"
                "  key: \"z\"\n"
                "  value {\n"
                "    string_value: \"2\"\n"
                "  }\n"
                "}\n"
                "parameters {\n"
                "  key: \"a\"\n"
                "  value {\n"
                "  }\n"
                "}\n");
}

NR_TEST(strings_exact)
{
    /* protobuf's CEscape: \n \r \t \" \' \\ by name, every other byte outside
     * 0x20..0x7e (UTF-8 too) as three octal digits. */
    CHECK_PBTXT("name: 'a\"b\\\\c\\n\\t\\r\\'\\001\\x7f\\a\\303\\251 ?#{'\n"
                "instance_group [ { profile: [ \"\", \"\\\\\" ] host_policy: \"\\u00e9\" } ]\n",
                "name: \"a\\\"b\\\\c\\n\\t\\r\\'\\001\\177\\007\\303\\251 ?#{\"\n"
                "instance_group {\n"
                "  profile: \"\"\n"
                "  profile: \"\\\\\"\n"
                "  host_policy: \"\\303\\251\"\n"
                "}\n");
}

NR_TEST(numbers_exact)
{
    /* Integers in decimal at their limits, unknown enum numbers as numbers,
     * floats as protobuf's SimpleFtoa/SimpleDtoa, inf/-inf/nan by name. */
    CHECK_PBTXT("version_policy { specific { versions: [ -9223372036854775808, 0x7fffffffffffffff ] } }\n"
                "max_batch_size: -2147483648\n"
                "input [ { data_type: 99 format: -3 } ]\n"
                "instance_group [ { count: -1 gpus: [ 0, 2147483647 ] kind: KIND_GPU } ]\n"
                "sequence_batching { direct { minimum_slot_utilization: 0.333333343 }\n"
                "  max_sequence_idle_microseconds: 18446744073709551615\n"
                "  control_input [ { control [ { fp32_false_true: [ 0.1, 3.4028235e38 ] } ] } ] }\n"
                "model_metrics { metric_control [ { histogram_options { buckets: [ 0.1, 1, 1.0,\n"
                "  -2.5e-10, 1e100, 16777217, 0.30000000000000004, -0, inf, -inf, nan, -Infinity ] } } ] }\n",
                "version_policy {\n"
                "  specific {\n"
                "    versions: -9223372036854775808\n"
                "    versions: 9223372036854775807\n"
                "  }\n"
                "}\n"
                "max_batch_size: -2147483648\n"
                "input {\n"
                "  data_type: 99\n"
                "  format: -3\n"
                "}\n"
                "instance_group {\n"
                "  count: -1\n"
                "  gpus: 0\n"
                "  gpus: 2147483647\n"
                "  kind: KIND_GPU\n"
                "}\n"
                "sequence_batching {\n"
                "  max_sequence_idle_microseconds: 18446744073709551615\n"
                "  control_input {\n"
                "    control {\n"
                "      fp32_false_true: 0.1\n"
                "      fp32_false_true: 3.40282347e+38\n"
                "    }\n"
                "  }\n"
                "  direct {\n"
                "    minimum_slot_utilization: 0.333333343\n"
                "  }\n"
                "}\n"
                "model_metrics {\n"
                "  metric_control {\n"
                "    histogram_options {\n"
                "      buckets: 0.1\n"
                "      buckets: 1\n"
                "      buckets: 1\n"
                "      buckets: -2.5e-10\n"
                "      buckets: 1e+100\n"
                "      buckets: 16777217\n"
                "      buckets: 0.30000000000000004\n"
                "      buckets: -0\n"
                "      buckets: inf\n"
                "      buckets: -inf\n"
                "      buckets: nan\n"
                "      buckets: -inf\n"
                "    }\n"
                "  }\n"
                "}\n");
}

NR_TEST(false_true_pairs_exact)
{
    /* Control's *_false_true hold two values; more given are counted (for
     * validation to reject) but not kept, so two are written, as in JSON. */
    CHECK_PBTXT("sequence_batching { control_input [ { name: \"S\" control [ {\n"
                "  kind: CONTROL_SEQUENCE_START int32_false_true: [ 0, 1, 7 ] } ] } ] }\n",
                "sequence_batching {\n"
                "  control_input {\n"
                "    name: \"S\"\n"
                "    control {\n"
                "      int32_false_true: 0\n"
                "      int32_false_true: 1\n"
                "    }\n"
                "  }\n"
                "}\n");
}

/* ---- round trips ------------------------------------------------------------ */

/* Every kind of field set to something not default; the scheduling oneof
 * takes one member per config. */
static const char *const every_field =
    "name: \"every \\\"one\\\"\\n\\tq'\\\\\\001\\303\\251\" platform: \"p\" backend: \"b\"\n"
    "runtime: \"r\"\n"
    "version_policy { specific { versions: [1, -3, 9223372036854775807] } }\n"
    "max_batch_size: 16\n"
    "input [ { name: \"I\" data_type: TYPE_FP16 format: FORMAT_NHWC dims: [2, -1]\n"
    "  reshape { shape: [2, -1] } is_shape_tensor: true allow_ragged_batch: true\n"
    "  optional: true is_non_linear_format_io: true },\n"
    "  { name: \"J\" data_type: 77 format: -2 dims: [ ] reshape { } } ]\n"
    "output [ { name: \"O\" data_type: TYPE_BF16 dims: [3] reshape { shape: [3, 1] }\n"
    "  label_filename: \"l\" is_shape_tensor: true is_non_linear_format_io: true } ]\n"
    "batch_input [ { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: [\"t\", \"u\"]\n"
    "  data_type: TYPE_INT64 source_input: [\"I\"] } ]\n"
    "batch_output [ { target_name: [\"O\"] kind: BATCH_SCATTER_WITH_INPUT_SHAPE\n"
    "  source_input: [\"I\"] } ]\n"
    "optimization { graph { level: -2 } priority: PRIORITY_MIN\n"
    "  cuda { graphs: true busy_wait_events: true output_copy_stream: true\n"
    "    graph_spec [ { batch_size: 2 input { key: \"I\" value { dim: [2, -4] } }\n"
    "      input { key: \"\" value { } }\n"
    "      graph_lower_bound { batch_size: 1 input { key: \"I\" value { dim: [1] } } } } ] }\n"
    "  execution_accelerators {\n"
    "    gpu_execution_accelerator [ { name: \"tensorrt\"\n"
    "      parameters { key: \"precision_mode\" value: \"FP16\" }\n"
    "      parameters { key: \"max_workspace_size_bytes\" value: \"1073741824\" } } ]\n"
    "    cpu_execution_accelerator [ { name: \"openvino\" } ] }\n"
    "  input_pinned_memory { enable: true } output_pinned_memory { enable: false }\n"
    "  gather_kernel_buffer_threshold: 9 eager_batching: true }\n"
    "dynamic_batching { preferred_batch_size: [2, 4, 8] max_queue_delay_microseconds: 100\n"
    "  preserve_ordering: true priority_levels: 3 default_priority_level: 2\n"
    "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 9\n"
    "    allow_timeout_override: true max_queue_size: 4 }\n"
    "  priority_queue_policy { key: 1 value { max_queue_size: 2 } }\n"
    "  priority_queue_policy { key: 18446744073709551615 value { } }\n"
    "  priority_queue_policy { key: 0 value { timeout_action: REJECT } } }\n"
    "instance_group [ { name: \"g\" kind: KIND_GPU count: 3\n"
    "  rate_limiter { resources [ { name: \"R\" global: true count: 2 } ] priority: 5 }\n"
    "  gpus: [0, 2] secondary_devices [ { kind: KIND_NVDLA device_id: -4 } ]\n"
    "  profile: [\"p0\", \"\"] passive: true host_policy: \"numa \\\"0\\\"\" },\n"
    "  { kind: KIND_CPU count: -1 rate_limiter { } } ]\n"
    "default_model_filename: \"m.onnx\"\n"
    "cc_model_filenames { key: \"8.6\" value: \"a.plan\" }\n"
    "metric_tags { key: \"k\" value: \"\" }\n"
    "parameters { key: \"p\" value { string_value: \"q\\nr\" } }\n"
    "parameters { key: \"empty\" value { } }\n"
    "model_warmup [ { name: \"w\" batch_size: 2 count: 3\n"
    "  inputs { key: \"I\" value { data_type: TYPE_FP16 dims: [2, 2] input_data_file: \"d\" } }\n"
    "  inputs { key: \"J\" value { data_type: TYPE_FP32 dims: [1] zero_data: true } }\n"
    "  inputs { key: \"K\" value { data_type: TYPE_INT8 random_data: false } } },\n"
    "  { name: \"none\" inputs { key: \"L\" value { dims: [-1] } } } ]\n"
    "model_operations { op_library_filename: [\"libop.so\", \"b.so\"] }\n"
    "model_transaction_policy { decoupled: true }\n"
    "model_repository_agents { agents [ { name: \"checksum\"\n"
    "  parameters { key: \"MD5:x\" value: \"y\" } } ] }\n"
    "response_cache { enable: true }\n"
    "model_metrics { metric_control [ { metric_identifier { family: \"f\" }\n"
    "  histogram_options { buckets: [0.5, 1, 2.5e10, -0.1, 1e-300,\n"
    "  3.141592653589793, 0.30000000000000004, 4.9e-324, inf, -inf, nan] } },\n"
    "  { metric_identifier { } } ] }\n";

NR_TEST(round_trip_every_field)
{
    EXPECT_EQ_INT(round_trip_text(every_field), 1);
    static const char *const others[] = {
        /* sequence batching, each strategy of the oneof and none */
        "sequence_batching { oldest { max_candidate_sequences: 4 preferred_batch_size: [2, 4]\n"
        "    max_queue_delay_microseconds: 7 preserve_ordering: true }\n"
        "  max_sequence_idle_microseconds: 18446744073709551615\n"
        "  control_input [ { name: \"C\" control [ { kind: CONTROL_SEQUENCE_READY\n"
        "    int32_false_true: [0, -1] fp32_false_true: [0.1, 3.4028235e38]\n"
        "    bool_false_true: [false, true] data_type: TYPE_INT32 } ] },\n"
        "    { name: \"S\" control [ { kind: CONTROL_SEQUENCE_START fp32_false_true: [-0, 1e-40] } ] } ]\n"
        "  state [ { input_name: \"si\" output_name: \"so\" data_type: TYPE_FP32 dims: [4, -1]\n"
        "    initial_state [ { data_type: TYPE_FP32 dims: [4] data_file: \"f\" name: \"n\" },\n"
        "      { name: \"z\" zero_data: false } ]\n"
        "    use_same_buffer_for_input_output: true use_growable_memory: true } ]\n"
        "  iterative_sequence: true }\n",
        "sequence_batching { direct { max_queue_delay_microseconds: 5\n"
        "  minimum_slot_utilization: 0.333333343 } }\n",
        "sequence_batching { direct { } control_input [ { name: \"E\"\n"
        "  control [ { kind: CONTROL_SEQUENCE_END int32_false_true: [1, 2, 3] } ] } ] }\n",
        "sequence_batching { }\n",
        /* ensembles; max_inflight_responses is an alias written by its first name */
        "name: \"ens\" platform: \"ensemble\" max_batch_size: 4\n"
        "ensemble_scheduling { step [ { model_name: \"a\" model_version: -1\n"
        "    input_map { key: \"x\" value: \"IN\" } input_map { key: \"y\" value: \"\" }\n"
        "    output_map { key: \"o\" value: \"t\" } model_namespace: \"ns\" },\n"
        "  { model_name: \"b\" model_version: 9223372036854775807 } ]\n"
        "  max_inflight_responses: 4294967295 }\n",
        "ensemble_scheduling { }\n",
        /* the other version policies */
        "version_policy { latest { num_versions: 4294967295 } }\n",
        "version_policy { latest { } }\n",
        "version_policy { all { } }\n",
        "version_policy { }\n",
        "dynamic_batching { }\n",
        "dynamic_batching { default_queue_policy { } }\n",
        "model_operations { } model_transaction_policy { } model_repository_agents { }\n"
        "response_cache { } model_metrics { } optimization { cuda { } execution_accelerators { } }\n",
    };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        EXPECT_EQ_INT(round_trip_text(others[i]), 1);
}

NR_TEST(round_trip_example_repository)
{
    EXPECT_EQ_INT(
        nr_test_config_dir("examples/model_repository", "config.pbtxt", round_trip), 4);
}

NR_TEST(round_trip_test_configs)
{
    int n = nr_test_config_dir("tests/fuzz/corpus/config", NULL, round_trip);
    fprintf(stderr, "round trip: %d configs of tests/fuzz/corpus/config\n", n);
    EXPECT_TRUE(n >= 160);
}

NR_TEST_MAIN()
