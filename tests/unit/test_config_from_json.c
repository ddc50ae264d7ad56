/* test_config_from_json.c - nr_cfg_parse_json: a ModelConfig in protobuf's
 * JSON mapping (Triton's model-load "config" parameter).
 *
 * The parsed struct is compared with what nr_cfg_parse builds from the same
 * config in config.pbtxt, field by field through the schema tables (strings
 * NULL and "" alike), and through both renderings (nr_cfg_to_json and
 * nr_cfg_to_pb). The round trip pbtxt -> nr_cfg_to_json -> nr_cfg_parse_json
 * runs over every config.pbtxt the unit tests use (the fuzz seed corpus
 * tests/fuzz/corpus/config/, which make_seeds.py fills with them and with
 * the e2e and example configs) and examples/model_repository. Run from the
 * repository root (as `make unit` does).
 */
#include "nr_test.h"
#include "config_dirs.h"

#include "../../src/common/alloc.h"
#include "../../src/config/cfg_int.h"
#include "../../src/config/model_config.h"

#include <math.h>

/* ---- helpers -------------------------------------------------------------- */

/* The config of a text; NULL, failing the test, on an error. */
static nr_model_config_t *from_pbtxt(const char *text)
{
    nr_model_config_t *cfg = NULL;
    EXPECT_OK(nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg));
    return cfg;
}

static nr_model_config_t *from_json(const char *text)
{
    nr_model_config_t *cfg = NULL;
    EXPECT_OK(nr_cfg_parse_json(text, strlen(text), &cfg));
    return cfg;
}

/* Field-by-field equality of two messages of type m; reports the first
 * difference with its path. Strings: NULL equals "". */
static bool msg_equal(const nr__cfg_msg_t *m, const void *a, const void *b, const char *path);

static bool strs_equal(const char *x, const char *y)
{
    return strcmp(x ? x : "", y ? y : "") == 0;
}

static bool values_equal(const nr__cfg_field_t *f, const void *x, const void *y, const char *path)
{
    if (f->type == NR__F_MSG)
        return msg_equal(f->sub, x, y, path);
    if (f->type == NR__F_STRING)
        return strs_equal(*(char *const *)x, *(char *const *)y);
    return memcmp(x, y, nr__cfg_elem_size(f)) == 0;
}

static bool field_equal(const nr__cfg_field_t *f, const void *a, const void *b, const char *path)
{
    if (f->flags & NR__FL_ALIAS)
        return true;
    if (f->off_aux != NR__CFG_NONE && f->type == NR__F_MSG &&
        *NR__CAT(a, f->off_aux, bool) != *NR__CAT(b, f->off_aux, bool))
        return false;
    if (f->oneof != NULL && *NR__CAT(a, f->off_oneof, int) != *NR__CAT(b, f->off_oneof, int))
        return false;
    if (f->rep == NR__R_ONE && f->type != NR__F_SHAPEMAP)
        return values_equal(f, NR__CAT(a, f->off, char), NR__CAT(b, f->off, char), path);
    size_t n = *NR__CAT(a, f->off_n, size_t);
    if (n != *NR__CAT(b, f->off_n, size_t))
        return false;
    if (f->type == NR__F_SHAPEMAP) {
        typedef char **strv_t;
        char *const *na = *NR__CAT(a, f->off, strv_t), *const *nb = *NR__CAT(b, f->off, strv_t);
        const nr_cfg_dims_t *da = *NR__CAT(a, f->off_aux, nr_cfg_dims_t *);
        const nr_cfg_dims_t *db = *NR__CAT(b, f->off_aux, nr_cfg_dims_t *);
        for (size_t i = 0; i < n; i++)
            if (!strs_equal(na[i], nb[i]) || da[i].n != db[i].n ||
                (da[i].n && memcmp(da[i].v, db[i].v, da[i].n * sizeof(int64_t)) != 0))
                return false;
        return true;
    }
    const char *xa = f->rep == NR__R_FIX2 ? NR__CAT(a, f->off, char) : *NR__CAT(a, f->off, char *);
    const char *xb = f->rep == NR__R_FIX2 ? NR__CAT(b, f->off, char) : *NR__CAT(b, f->off, char *);
    size_t es = nr__cfg_elem_size(f);
    for (size_t i = 0; i < (f->rep == NR__R_FIX2 && n > 2 ? 2 : n); i++) {
        char sub[512];
        snprintf(sub, sizeof(sub), "%.400s[%zu]", path, i);
        if (!values_equal(f, xa + i * es, xb + i * es, sub))
            return false;
    }
    return true;
}

static bool msg_equal(const nr__cfg_msg_t *m, const void *a, const void *b, const char *path)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const nr__cfg_field_t *f = &m->fields[i];
        char sub[512];
        snprintf(sub, sizeof(sub), "%.400s%s%.100s", path, *path ? "." : "", f->name);
        if (!field_equal(f, a, b, sub)) {
            fprintf(stderr, "  configs differ at %s\n", sub); /* innermost first */
            return false;
        }
    }
    return true;
}

/* The same struct, the same JSON bytes and the same protobuf bytes. */
static bool same_config(const nr_model_config_t *a, const nr_model_config_t *b)
{
    if (a == NULL || b == NULL)
        return false;
    bool ok = msg_equal(&nr__cfg_model_config_msg, a, b, "");
    for (int pb = 0; pb < 2; pb++) {
        size_t la, lb;
        char *ra = pb ? nr_cfg_to_pb(a, &la) : nr_cfg_to_json(a, &la);
        char *rb = pb ? nr_cfg_to_pb(b, &lb) : nr_cfg_to_json(b, &lb);
        if (la != lb || memcmp(ra, rb, la) != 0) {
            fprintf(stderr, "  %s differs (%zu, %zu bytes)%s%s%s%s\n",
                    pb ? "the protobuf" : "the JSON", la, lb, pb ? "" : ":\n    ",
                    pb ? "" : ra, pb ? "" : "\n    ", pb ? "" : rb);
            ok = false;
        }
        free(ra);
        free(rb);
    }
    return ok;
}

/* The JSON text and the pbtxt text give the same config. */
static void check_same(const char *json, const char *pbtxt, int line)
{
    nr_model_config_t *a = from_json(json), *b = from_pbtxt(pbtxt);
    if (!same_config(a, b))
        nr_test_fail(__FILE__, line, "JSON %s\n  and pbtxt %s\n  give different configs", json,
                     pbtxt);
    nr_cfg_free(a);
    nr_cfg_free(b);
}
#define CHECK_SAME(json, pbtxt) check_same((json), (pbtxt), __LINE__)

/* Expects INVALID_ARG with exactly this message, and *out left NULL. */
static void check_error(const char *json, size_t len, const char *msg, int line)
{
    nr_model_config_t *cfg = (nr_model_config_t *)1;
    nr_status_t *st = nr_cfg_parse_json(json, len, &cfg);
    if (cfg != NULL)
        nr_test_fail(__FILE__, line, "*out is not NULL after an error");
    if (st == NULL) {
        nr_test_fail(__FILE__, line, "%s parsed, expected: %s", json, msg);
        if (cfg != (nr_model_config_t *)1)
            nr_cfg_free(cfg);
        return;
    }
    if (st->code != NR_INVALID_ARG || strcmp(st->msg, msg) != 0)
        nr_test_fail(__FILE__, line, "%s:\n  got:      [%d] %s\n  expected: %s", json,
                     (int)st->code, st->msg, msg);
    nr_status_free(st);
}
#define CHECK_ERROR(json, msg) check_error((json), strlen(json), (msg), __LINE__)

/* ---- Model Analyzer's form ------------------------------------------------ */

static const char *const analyzer_json =
    "{\"name\":\"m\",\"platform\":\"onnxruntime_onnx\",\"max_batch_size\":8,"
    "\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"16\"]}],"
    "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[\"16\"]}],"
    "\"instance_group\":[{\"count\":1,\"kind\":\"KIND_CPU\"}],"
    "\"dynamic_batching\":{\"max_queue_delay_microseconds\":\"100\","
    "\"preferred_batch_size\":[4,8]}}";

#define ANALYZER_STRUCT                                                                   \
    "{\"name\":\"m\",\"platform\":\"onnxruntime_onnx\",\"backend\":\"\",\"runtime\":\"\","         \
    "\"max_batch_size\":8,\"input\":[{\"name\":\"INPUT0\",\"data_type\":\"TYPE_FP32\","           \
    "\"format\":\"FORMAT_NONE\",\"dims\":[16],\"is_shape_tensor\":false,"                         \
    "\"allow_ragged_batch\":false,\"optional\":false,\"is_non_linear_format_io\":false}],"          \
    "\"output\":[{\"name\":\"OUTPUT0\",\"data_type\":\"TYPE_FP32\",\"dims\":[16],"                \
    "\"label_filename\":\"\",\"is_shape_tensor\":false,\"is_non_linear_format_io\":false}],"        \
    "\"batch_input\":[],\"batch_output\":[],\"dynamic_batching\":{\"preferred_batch_size\":[4,8]," \
    "\"max_queue_delay_microseconds\":100,\"preserve_ordering\":false,\"priority_levels\":0,"      \
    "\"default_priority_level\":0,\"priority_queue_policy\":{}},\"instance_group\":[{\"name\":\"\"," \
    "\"kind\":\"KIND_CPU\",\"count\":1,\"gpus\":[],\"secondary_devices\":[],\"profile\":[],"        \
    "\"passive\":false,\"host_policy\":\"\"}],\"default_model_filename\":\"\","                    \
    "\"cc_model_filenames\":{},\"metric_tags\":{},\"parameters\":{},\"model_warmup\":[]}"

NR_TEST(model_analyzer_example)
{
    nr_model_config_t *cfg = from_json(analyzer_json);
    ASSERT_NOT_NULL(cfg);
    /* The struct, as all of it prints (an unset string prints as ""). */
    char *json = nr_cfg_to_json(cfg, NULL);
    EXPECT_STREQ(json, ANALYZER_STRUCT);
    free(json);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DYNAMIC);
    EXPECT_EQ_U64(cfg->dynamic_batching.max_queue_delay_microseconds, 100);
    EXPECT_FALSE(cfg->has_version_policy || cfg->has_optimization);
    nr_cfg_free(cfg);

    CHECK_SAME(analyzer_json,
               "name: \"m\" platform: \"onnxruntime_onnx\" max_batch_size: 8\n"
               "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n"
               "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n"
               "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
               "dynamic_batching { max_queue_delay_microseconds: 100 preferred_batch_size: [4, 8] }\n");
}

/* The load pipeline treats both forms the same. */
NR_TEST(pipeline_sees_the_same_config)
{
    nr_model_config_t *a = from_json(analyzer_json);
    nr_model_config_t *b = from_pbtxt(
        "name: \"m\" platform: \"onnxruntime_onnx\" max_batch_size: 8\n"
        "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n"
        "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ 16 ] } ]\n"
        "instance_group [ { count: 1 kind: KIND_CPU } ]\n"
        "dynamic_batching { max_queue_delay_microseconds: 100 preferred_batch_size: [4, 8] }\n");
    ASSERT_NOT_NULL(a);
    ASSERT_NOT_NULL(b);
    nr_model_config_t *both[2] = {a, b};
    for (int i = 0; i < 2; i++) {
        both[i]->backend = nr_strdup("onnxruntime"); /* the server's autofill */
        nr_cfg_normalize(both[i]);
        nr_cfg_fill_instance_groups(both[i], 2, 0);
        EXPECT_OK(nr_cfg_validate(both[i], "m"));
    }
    EXPECT_TRUE(same_config(a, b));
    nr_cfg_free(a);
    nr_cfg_free(b);
}

/* ---- names, values, presence ---------------------------------------------- */

NR_TEST(camel_case_names)
{
    CHECK_SAME("{\"name\":\"m\",\"maxBatchSize\":4,\"defaultModelFilename\":\"x.onnx\","
               "\"input\":[{\"name\":\"I\",\"dataType\":\"TYPE_INT32\",\"dims\":[2],"
               "\"isShapeTensor\":true,\"allowRaggedBatch\":true,\"isNonLinearFormatIo\":false}],"
               "\"output\":[{\"name\":\"O\",\"dataType\":\"TYPE_INT32\",\"dims\":[2],"
               "\"labelFilename\":\"l\"}],"
               "\"instanceGroup\":[{\"kind\":\"KIND_GPU\",\"gpus\":[0],\"hostPolicy\":\"h\","
               "\"secondaryDevices\":[{\"kind\":\"KIND_NVDLA\",\"deviceId\":\"3\"}],"
               "\"rateLimiter\":{\"resources\":[{\"name\":\"R\",\"count\":2}]}}],"
               "\"ccModelFilenames\":{\"8.0\":\"a\"},\"metricTags\":{\"t\":\"v\"},"
               "\"modelWarmup\":[{\"name\":\"w\",\"batchSize\":1,\"inputs\":{\"I\":{"
               "\"dataType\":\"TYPE_INT32\",\"dims\":[2],\"randomData\":true}}}],"
               "\"modelTransactionPolicy\":{\"decoupled\":true},\"responseCache\":{\"enable\":true},"
               "\"sequenceBatching\":{\"maxSequenceIdleMicroseconds\":\"5\","
               "\"oldest\":{\"maxCandidateSequences\":3,\"preserveOrdering\":true},"
               "\"controlInput\":[{\"name\":\"S\",\"control\":[{\"kind\":\"CONTROL_SEQUENCE_START\","
               "\"int32FalseTrue\":[0,1]}]}],\"state\":[{\"inputName\":\"a\",\"outputName\":\"b\","
               "\"initialState\":[{\"dataType\":\"TYPE_INT32\",\"dims\":[\"1\"],\"zeroData\":true}],"
               "\"useSameBufferForInputOutput\":true}]},"
               "\"optimization\":{\"inputPinnedMemory\":{\"enable\":false},"
               "\"gatherKernelBufferThreshold\":7,\"cuda\":{\"graphSpec\":[{\"batchSize\":1,"
               "\"input\":{\"I\":{\"dim\":[\"2\"]}},\"graphLowerBound\":{\"batchSize\":1}}],"
               "\"busyWaitEvents\":true},\"executionAccelerators\":{\"cpuExecutionAccelerator\":"
               "[{\"name\":\"openvino\"}]}}}",
               "name: \"m\" max_batch_size: 4 default_model_filename: \"x.onnx\"\n"
               "input [ { name: \"I\" data_type: TYPE_INT32 dims: [2] is_shape_tensor: true\n"
               "  allow_ragged_batch: true is_non_linear_format_io: false } ]\n"
               "output [ { name: \"O\" data_type: TYPE_INT32 dims: [2] label_filename: \"l\" } ]\n"
               "instance_group [ { kind: KIND_GPU gpus: [0] host_policy: \"h\"\n"
               "  secondary_devices [ { kind: KIND_NVDLA device_id: 3 } ]\n"
               "  rate_limiter { resources [ { name: \"R\" count: 2 } ] } } ]\n"
               "cc_model_filenames { key: \"8.0\" value: \"a\" }\n"
               "metric_tags { key: \"t\" value: \"v\" }\n"
               "model_warmup [ { name: \"w\" batch_size: 1 inputs { key: \"I\" value {\n"
               "  data_type: TYPE_INT32 dims: [2] random_data: true } } } ]\n"
               "model_transaction_policy { decoupled: true } response_cache { enable: true }\n"
               "sequence_batching { max_sequence_idle_microseconds: 5\n"
               "  oldest { max_candidate_sequences: 3 preserve_ordering: true }\n"
               "  control_input [ { name: \"S\" control [ { kind: CONTROL_SEQUENCE_START\n"
               "    int32_false_true: [0, 1] } ] } ]\n"
               "  state [ { input_name: \"a\" output_name: \"b\" initial_state [ {\n"
               "    data_type: TYPE_INT32 dims: [1] zero_data: true } ]\n"
               "    use_same_buffer_for_input_output: true } ] }\n"
               "optimization { input_pinned_memory { enable: false }\n"
               "  gather_kernel_buffer_threshold: 7 cuda { graph_spec [ { batch_size: 1\n"
               "    input { key: \"I\" value { dim: [2] } } graph_lower_bound { batch_size: 1 } } ]\n"
               "    busy_wait_events: true }\n"
               "  execution_accelerators { cpu_execution_accelerator [ { name: \"openvino\" } ] } }\n");
    /* The other ensemble field name, either spelling. */
    CHECK_SAME("{\"ensembleScheduling\":{\"maxInflightResponses\":3}}",
               "ensemble_scheduling { max_inflight_requests: 3 }");
    CHECK_SAME("{\"ensemble_scheduling\":{\"max_inflight_responses\":3}}",
               "ensemble_scheduling { max_inflight_responses: 3 }");
}

NR_TEST(empty_messages_are_present)
{
    CHECK_SAME("{\"dynamic_batching\":{}}", "dynamic_batching { }");
    CHECK_SAME("{\"sequence_batching\":{}}", "sequence_batching { }");
    CHECK_SAME("{\"ensemble_scheduling\":{}}", "ensemble_scheduling { }");
    CHECK_SAME("{\"version_policy\":{}}", "version_policy { }");
    CHECK_SAME("{\"version_policy\":{\"all\":{}}}", "version_policy { all { } }");
    CHECK_SAME("{\"version_policy\":{\"latest\":{}}}", "version_policy { latest { } }");
    CHECK_SAME("{\"optimization\":{\"cuda\":{}}}", "optimization { cuda { } }");
    CHECK_SAME("{\"output\":[{\"reshape\":{}}]}", "output [ { reshape { } } ]");
    CHECK_SAME("{\"sequence_batching\":{\"direct\":{}}}", "sequence_batching { direct { } }");
    CHECK_SAME("{\"model_metrics\":{\"metric_control\":[{\"histogram_options\":{}}]}}",
               "model_metrics { metric_control [ { histogram_options { } } ] }");
    nr_model_config_t *cfg = from_json("{\"dynamic_batching\":{}}");
    ASSERT_NOT_NULL(cfg);
    EXPECT_EQ_INT(cfg->scheduling_choice, NR_SCHED_DYNAMIC);
    nr_cfg_free(cfg);
    /* An all-default config is one too. */
    CHECK_SAME("{}", "");
    CHECK_SAME(" { \"name\" : \"\" , \"max_batch_size\" : 0 } ", "");
}

NR_TEST(null_leaves_the_default)
{
    CHECK_SAME("{\"name\":null,\"max_batch_size\":null,\"input\":null,\"parameters\":null,"
               "\"dynamic_batching\":null,\"version_policy\":null,\"optimization\":{\"priority\":null}}",
               "optimization { }");
    /* A null member of a oneof does not count as given; a null field may be given again. */
    CHECK_SAME("{\"dynamic_batching\":null,\"sequence_batching\":{},\"name\":null,\"name\":\"a\"}",
               "sequence_batching { } name: \"a\"");
    CHECK_SAME("{\"name\":\"a\",\"name\":null}", "name: \"a\"");
    /* An empty list gives no value: the field may come again. */
    CHECK_SAME("{\"input\":[{\"dims\":[],\"dims\":[2]}]}", "input [ { dims: [2] } ]");
    /* A null map value is the default value. */
    CHECK_SAME("{\"parameters\":{\"k\":null},\"metric_tags\":{\"t\":null}}",
               "parameters { key: \"k\" value { } } metric_tags { key: \"t\" }");
}

NR_TEST(integers)
{
    CHECK_SAME("{\"max_batch_size\":\"8\",\"input\":[{\"dims\":[-1,\"-1\",2.0,\"3.0\",\"4e0\",\"+5\"]}]}",
               "max_batch_size: 8 input [ { dims: [-1, -1, 2, 3, 4, 5] } ]");
    CHECK_SAME("{\"max_batch_size\":-2147483648}", "max_batch_size: -2147483648");
    CHECK_SAME("{\"max_batch_size\":2147483647}", "max_batch_size: 2147483647");
    CHECK_SAME("{\"dynamic_batching\":{\"max_queue_delay_microseconds\":18446744073709551615,"
               "\"priority_levels\":\"18446744073709551615\",\"default_priority_level\":-0}}",
               "dynamic_batching { max_queue_delay_microseconds: 18446744073709551615\n"
               "  priority_levels: 18446744073709551615 }");
    CHECK_SAME("{\"ensemble_scheduling\":{\"step\":[{\"model_version\":-9223372036854775808}]}}",
               "ensemble_scheduling { step [ { model_version: -9223372036854775808 } ] }");
    CHECK_SAME("{\"ensemble_scheduling\":{\"step\":[{\"model_version\":\"9223372036854775807\"}]}}",
               "ensemble_scheduling { step [ { model_version: 9223372036854775807 } ] }");
    /* A real is read as protobuf reads it: within +-2^53, no fraction. */
    CHECK_SAME("{\"version_policy\":{\"specific\":{\"versions\":[9007199254740992.0,1e3]}}}",
               "version_policy { specific { versions: [9007199254740992, 1000] } }");
}

NR_TEST(reals)
{
    CHECK_SAME("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":\"0.5\"}},"
               "\"model_metrics\":{\"metric_control\":[{\"histogram_options\":{\"buckets\":"
               "[1,\"2\",0.25,\"1e-7\",\"NaN\",\"Infinity\",\"-Infinity\",1e308]}}]}}",
               "sequence_batching { direct { minimum_slot_utilization: 0.5 } }\n"
               "model_metrics { metric_control [ { histogram_options { buckets: [1, 2, 0.25,\n"
               "  1e-7, nan, inf, -inf, 1e308] } } ] }");
    /* Strings as absl's SimpleAtod reads them: white space around, '+', inf
     * and nan in any case, infinite beyond the range of a double. */
    CHECK_SAME("{\"model_metrics\":{\"metric_control\":[{\"histogram_options\":{\"buckets\":"
               "[\" 1.5 \",\"+2\",\"nan\",\"-INF\",\"infinity\",\"1e999\",\".5\",\"5.\"]}}]}}",
               "model_metrics { metric_control [ { histogram_options { buckets: [1.5, 2, nan,\n"
               "  -inf, inf, inf, 0.5, 5] } } ] }");
    CHECK_SAME("{\"sequence_batching\":{\"control_input\":[{\"control\":[{"
               "\"fp32_false_true\":[0,1.5,3],\"bool_false_true\":[false,true]}]}]}}",
               "sequence_batching { control_input [ { control [ {\n"
               "  fp32_false_true: [0, 1.5, 3] bool_false_true: [false, true] } ] } ] }");
}

NR_TEST(enums)
{
    /* Names in any case (Triton's case_insensitive_enum_parsing), numbers,
     * numbers in strings; unknown numbers are kept. */
    CHECK_SAME("{\"input\":[{\"data_type\":\"type_fp32\",\"format\":\"Format_NCHW\"},"
               "{\"data_type\":11,\"format\":\" +2 \"},{\"data_type\":99,\"format\":-3}]}",
               "input [ { data_type: TYPE_FP32 format: FORMAT_NCHW },\n"
               "  { data_type: TYPE_FP32 format: FORMAT_NCHW }, { data_type: 99 format: -3 } ]");
}

NR_TEST(maps)
{
    CHECK_SAME("{\"parameters\":{\"b\":{\"string_value\":\"1\"},\"a\":{\"stringValue\":\"2\"}},"
               "\"dynamic_batching\":{\"priority_queue_policy\":{\"2\":{\"max_queue_size\":3},"
               "\"1\":{}}}}",
               "parameters { key: \"b\" value { string_value: \"1\" } }\n"
               "parameters { key: \"a\" value { string_value: \"2\" } }\n"
               "dynamic_batching { priority_queue_policy { key: 2 value { max_queue_size: 3 } }\n"
               "  priority_queue_policy { key: 1 value { } } }");
    /* "01" and " 1" are one uint64 key: the later entry wins, as in protobuf's map. */
    CHECK_SAME("{\"dynamic_batching\":{\"priority_queue_policy\":{\"1\":{\"max_queue_size\":3},"
               "\" 01\":{\"max_queue_size\":4}}}}",
               "dynamic_batching { priority_queue_policy { key: 1 value { max_queue_size: 4 } } }");
    CHECK_SAME("{\"optimization\":{\"cuda\":{\"graph_spec\":[{\"input\":{\"x\":{\"dim\":[1,\"2\"]},"
               "\"y\":{}}}]}}}",
               "optimization { cuda { graph_spec [ { input { key: \"x\" value { dim: [1, 2] } }\n"
               "  input { key: \"y\" value { } } } ] } }");
}

NR_TEST(strings)
{
    CHECK_SAME("{\"name\":\"a\\\"b\\\\c\\n\\u00e9\\ud83d\\ude00\"}",
               "name: \"a\\\"b\\\\c\\n\\303\\251\\360\\237\\230\\200\"");
}

/* ---- the round trip over every config the tests use ------------------------ */

/* cfg (taken) -> JSON -> nr_cfg_parse_json must give the same config
 * (struct, JSON bytes, protobuf bytes); then the same after the load
 * pipeline, which is what GET .../config serves. 1 when it round-trips. */
static int round_trip(nr_model_config_t *cfg, const char *what)
{
    int rc = 1;
    for (int pass = 0; pass < 2 && rc == 1; pass++) {
        if (pass == 1) {
            nr_cfg_normalize(cfg);
            nr_cfg_fill_instance_groups(cfg, 2, 0);
        }
        size_t n;
        char *json = nr_cfg_to_json(cfg, &n);
        nr_model_config_t *back = NULL;
        nr_status_t *st = nr_cfg_parse_json(json, n, &back);
        if (n == 0) { /* the all-default config prints as no text, which is no JSON */
            EXPECT_NOT_NULL(st);
            nr_status_free(st);
        } else if (st != NULL) {
            nr_test_fail(__FILE__, __LINE__, "%s (pass %d): %s\n  JSON: %s", what, pass, st->msg,
                         json);
            nr_status_free(st);
            rc = -1;
        } else if (!same_config(cfg, back)) {
            nr_test_fail(__FILE__, __LINE__, "%s (pass %d) does not round-trip", what, pass);
            rc = -1;
        }
        nr_cfg_free(back);
        free(json);
    }
    nr_cfg_free(cfg);
    return rc;
}

static int round_trip_text(const char *text)
{
    nr_model_config_t *cfg = from_pbtxt(text);
    return cfg != NULL ? round_trip(cfg, text) : -1;
}

NR_TEST(round_trip_test_configs)
{
    int n = nr_test_config_dir("tests/fuzz/corpus/config", NULL, round_trip);
    fprintf(stderr, "round trip: %d configs of tests/fuzz/corpus/config\n", n);
    EXPECT_TRUE(n >= 160);
}

NR_TEST(round_trip_example_repository)
{
    EXPECT_EQ_INT(
        nr_test_config_dir("examples/model_repository", "config.pbtxt", round_trip), 4);
}

NR_TEST(round_trip_every_field)
{
    /* Every field of the schema set to something not default. */
    static const char *const text =
        "name: \"every\" platform: \"p\" backend: \"b\" runtime: \"r\"\n"
        "version_policy { specific { versions: [1, 3] } }\n"
        "max_batch_size: 16\n"
        "input [ { name: \"I\" data_type: TYPE_FP16 format: FORMAT_NHWC dims: [2, -1]\n"
        "  reshape { shape: [2, -1] } is_shape_tensor: true allow_ragged_batch: true\n"
        "  optional: true is_non_linear_format_io: true } ]\n"
        "output [ { name: \"O\" data_type: TYPE_BF16 dims: [3] reshape { shape: [3, 1] }\n"
        "  label_filename: \"l\" is_shape_tensor: true is_non_linear_format_io: true } ]\n"
        "batch_input [ { kind: BATCH_ITEM_SHAPE_FLATTEN target_name: [\"t\", \"u\"]\n"
        "  data_type: TYPE_INT64 source_input: [\"I\"] } ]\n"
        "batch_output [ { target_name: [\"O\"] kind: BATCH_SCATTER_WITH_INPUT_SHAPE\n"
        "  source_input: [\"I\"] } ]\n"
        "optimization { graph { level: 2 } priority: PRIORITY_MIN\n"
        "  cuda { graphs: true busy_wait_events: true output_copy_stream: true\n"
        "    graph_spec [ { batch_size: 2 input { key: \"I\" value { dim: [2, 4] } }\n"
        "      graph_lower_bound { batch_size: 1 input { key: \"I\" value { dim: [1] } } } } ] }\n"
        "  execution_accelerators {\n"
        "    gpu_execution_accelerator [ { name: \"tensorrt\" parameters { key: \"a\" value: \"b\" } } ]\n"
        "    cpu_execution_accelerator [ { name: \"openvino\" } ] }\n"
        "  input_pinned_memory { enable: true } output_pinned_memory { enable: false }\n"
        "  gather_kernel_buffer_threshold: 9 eager_batching: true }\n"
        "sequence_batching { oldest { max_candidate_sequences: 4 preferred_batch_size: [2, 4]\n"
        "    max_queue_delay_microseconds: 7 preserve_ordering: true }\n"
        "  max_sequence_idle_microseconds: 1000000\n"
        "  control_input [ { name: \"C\" control [ { kind: CONTROL_SEQUENCE_READY\n"
        "    int32_false_true: [0, 1] fp32_false_true: [0.5, 1.5] bool_false_true: [false, true]\n"
        "    data_type: TYPE_INT32 } ] } ]\n"
        "  state [ { input_name: \"si\" output_name: \"so\" data_type: TYPE_FP32 dims: [4]\n"
        "    initial_state [ { data_type: TYPE_FP32 dims: [4] data_file: \"f\" name: \"n\" } ]\n"
        "    use_same_buffer_for_input_output: true use_growable_memory: true } ]\n"
        "  iterative_sequence: true }\n"
        "instance_group [ { name: \"g\" kind: KIND_MODEL count: 3\n"
        "  rate_limiter { resources [ { name: \"R\" global: true count: 2 } ] priority: 5 }\n"
        "  gpus: [0, 2] secondary_devices [ { kind: KIND_NVDLA device_id: -4 } ]\n"
        "  profile: [\"p0\"] passive: true host_policy: \"hp\" } ]\n"
        "default_model_filename: \"m.onnx\"\n"
        "cc_model_filenames { key: \"8.6\" value: \"a.plan\" }\n"
        "metric_tags { key: \"k\" value: \"v\" }\n"
        "parameters { key: \"p\" value { string_value: \"q\" } }\n"
        "model_warmup [ { name: \"w\" batch_size: 2 count: 3\n"
        "  inputs { key: \"I\" value { data_type: TYPE_FP16 dims: [2, 2] input_data_file: \"d\" } } } ]\n"
        "model_operations { op_library_filename: [\"libop.so\"] }\n"
        "model_transaction_policy { decoupled: true }\n"
        "model_repository_agents { agents [ { name: \"checksum\" parameters { key: \"MD5:x\" value: \"y\" } } ] }\n"
        "response_cache { enable: true }\n"
        "model_metrics { metric_control [ { metric_identifier { family: \"f\" }\n"
        "  histogram_options { buckets: [0.5, 1, 2.5e10] } } ] }\n";
    EXPECT_EQ_INT(round_trip_text(text), 1);
    static const char *const others[] = {
        "dynamic_batching { preferred_batch_size: [2] max_queue_delay_microseconds: 5\n"
        "  preserve_ordering: true priority_levels: 3 default_priority_level: 2\n"
        "  default_queue_policy { timeout_action: DELAY default_timeout_microseconds: 9\n"
        "    allow_timeout_override: true max_queue_size: 4 }\n"
        "  priority_queue_policy { key: 1 value { max_queue_size: 2 } } }\n"
        "version_policy { latest { num_versions: 2 } }",
        "ensemble_scheduling { step [ { model_name: \"a\" model_version: -1\n"
        "  input_map { key: \"x\" value: \"y\" } output_map { key: \"z\" value: \"w\" }\n"
        "  model_namespace: \"ns\" } ] max_inflight_requests: 8 } version_policy { all { } }",
        "sequence_batching { direct { max_queue_delay_microseconds: 3 minimum_slot_utilization: 0.25 }\n"
        "  state [ { initial_state [ { zero_data: false } ] } ] }\n"
        "model_warmup [ { inputs { key: \"a\" value { zero_data: false } }\n"
        "  inputs { key: \"b\" value { random_data: false } } } ]",
        "input [ { data_type: 77 format: 9 } ] optimization { priority: 12 }",
    };
    for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++)
        EXPECT_EQ_INT(round_trip_text(others[i]), 1);
}

/* ---- errors --------------------------------------------------------------- */

NR_TEST(error_unknown_field)
{
    CHECK_ERROR("{\"name\":\"m\",\"foo\":1}",
                "message type \"inference.ModelConfig\" has no field named \"foo\"");
    CHECK_ERROR("{\"input\":[{\"name\":\"a\"},{\"nmae\":\"b\"}]}",
                "input[1]: message type \"inference.ModelInput\" has no field named \"nmae\"");
    CHECK_ERROR("{\"version_policy\":{\"all\":{\"x\":null}}}",
                "version_policy.all: message type \"inference.ModelVersionPolicy.All\" has no "
                "field named \"x\"");
    /* Neither a map entry's key/value form nor a field's odd spelling is a name. */
    CHECK_ERROR("{\"parameters\":{\"k\":{\"value\":\"v\"}}}",
                "parameters[\"k\"]: message type \"inference.ModelParameter\" has no field named "
                "\"value\"");
    CHECK_ERROR("{\"MaxBatchSize\":1}",
                "message type \"inference.ModelConfig\" has no field named \"MaxBatchSize\"");
    CHECK_ERROR("{\"max_batchSize\":1}",
                "message type \"inference.ModelConfig\" has no field named \"max_batchSize\"");
}

NR_TEST(error_wrong_type)
{
    CHECK_ERROR("{\"input\":[{\"dims\":[1,\"x\"]}]}", "input[0].dims[1]: expected an integer, got \"x\"");
    CHECK_ERROR("{\"max_batch_size\":1.5}", "max_batch_size: expected an integer, got 1.5");
    CHECK_ERROR("{\"max_batch_size\":\"1.5\"}", "max_batch_size: expected an integer, got \"1.5\"");
    CHECK_ERROR("{\"max_batch_size\":\" 1\"}", "max_batch_size: expected an integer, got \" 1\"");
    CHECK_ERROR("{\"max_batch_size\":true}", "max_batch_size: expected an integer, got true");
    CHECK_ERROR("{\"max_batch_size\":[1]}", "max_batch_size: expected an integer, got an array");
    CHECK_ERROR("{\"name\":5}", "name: expected a string, got 5");
    CHECK_ERROR("{\"input\":[{\"optional\":\"true\"}]}",
                "input[0].optional: expected true or false, got \"true\"");
    CHECK_ERROR("{\"input\":[{\"optional\":1}]}", "input[0].optional: expected true or false, got 1");
    CHECK_ERROR("{\"dynamic_batching\":[]}", "dynamic_batching: expected an object, got an array");
    CHECK_ERROR("{\"dynamic_batching\":true}", "dynamic_batching: expected an object, got true");
    CHECK_ERROR("{\"input\":{}}", "input: expected an array, got an object");
    CHECK_ERROR("{\"input\":[1]}", "input[0]: expected an object, got 1");
    CHECK_ERROR("{\"input\":[null]}", "input[0]: null is not allowed in a repeated field");
    CHECK_ERROR("{\"parameters\":[]}", "parameters: expected an object, got an array");
    CHECK_ERROR("{\"metric_tags\":{\"a\":1}}", "metric_tags[\"a\"]: expected a string, got 1");
    CHECK_ERROR("{\"input\":[{\"data_type\":true}]}",
                "input[0].data_type: expected an enumeration value name or number, got true");
    CHECK_ERROR("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":\"half\"}}}",
                "sequence_batching.direct.minimum_slot_utilization: expected a number, got \"half\"");
    CHECK_ERROR("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":\"0x1p3\"}}}",
                "sequence_batching.direct.minimum_slot_utilization: expected a number, got \"0x1p3\"");
    CHECK_ERROR("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":\"+-1\"}}}",
                "sequence_batching.direct.minimum_slot_utilization: expected a number, got \"+-1\"");
    CHECK_ERROR("{\"max_batch_size\":\"inf\"}", "max_batch_size: expected an integer, got \"inf\"");
    CHECK_ERROR("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":NaN}}}",
                "sequence_batching.direct.minimum_slot_utilization: expected a number (NaN and "
                "Infinity are written as strings), got NaN");
    CHECK_ERROR("{\"optimization\":{\"cuda\":{\"graph_spec\":[{\"input\":{\"x\":{\"dim\":[\"a\"]}}}]}}}",
                "optimization.cuda.graph_spec[0].input[\"x\"].dim[0]: expected an integer, got \"a\"");
    CHECK_ERROR("{\"name\":\"a\\u0000b\"}", "name: strings with NUL bytes are not supported");
    CHECK_ERROR("{\"name\":\"\xff\"}", "name: invalid UTF-8 in a string");
    CHECK_ERROR("{\"metric_tags\":{\"\xc3(\":\"v\"}}", "metric_tags[\"?(\"]: invalid UTF-8 in a string");
}

NR_TEST(error_out_of_range)
{
    CHECK_ERROR("{\"max_batch_size\":2147483648}",
                "max_batch_size: value out of range for int32: 2147483648");
    CHECK_ERROR("{\"max_batch_size\":\"-2147483649\"}",
                "max_batch_size: value out of range for int32: \"-2147483649\"");
    CHECK_ERROR("{\"model_warmup\":[{\"batch_size\":4294967296}]}",
                "model_warmup[0].batch_size: value out of range for uint32: 4294967296");
    CHECK_ERROR("{\"model_warmup\":[{\"count\":-1}]}",
                "model_warmup[0].count: value out of range for uint32: -1");
    CHECK_ERROR("{\"dynamic_batching\":{\"max_queue_delay_microseconds\":\"-1\"}}",
                "dynamic_batching.max_queue_delay_microseconds: value out of range for uint64: \"-1\"");
    CHECK_ERROR("{\"dynamic_batching\":{\"max_queue_delay_microseconds\":18446744073709551616}}",
                "dynamic_batching.max_queue_delay_microseconds: value out of range for uint64: "
                "18446744073709553000.0");
    CHECK_ERROR("{\"input\":[{\"dims\":[9223372036854775808]}]}",
                "input[0].dims[0]: value out of range for int64: 9223372036854775808");
    /* Reals beyond 2^53 are refused even where the type would hold them (protobuf). */
    CHECK_ERROR("{\"input\":[{\"dims\":[1e16]}]}",
                "input[0].dims[0]: value out of range for int64: 10000000000000000.0");
    CHECK_ERROR("{\"input\":[{\"data_type\":2147483648}]}",
                "input[0].data_type: value out of range for int32: 2147483648");
    CHECK_ERROR("{\"sequence_batching\":{\"direct\":{\"minimum_slot_utilization\":1e39}}}",
                "sequence_batching.direct.minimum_slot_utilization: value out of range for float: "
                "1e39");
    CHECK_ERROR("{\"dynamic_batching\":{\"priority_queue_policy\":{\"x\":{}}}}",
                "dynamic_batching.priority_queue_policy[\"x\"]: map key must be an unsigned integer");
    CHECK_ERROR("{\"dynamic_batching\":{\"priority_queue_policy\":{\"-1\":{}}}}",
                "dynamic_batching.priority_queue_policy[\"-1\"]: map key must be an unsigned integer");
}

NR_TEST(error_bad_enum_name)
{
    CHECK_ERROR("{\"input\":[{\"name\":\"I\",\"data_type\":\"FP32\"}]}",
                "input[0].data_type: unknown enumeration value \"FP32\" for inference.DataType");
    CHECK_ERROR("{\"instance_group\":[{\"kind\":\"CPU\"}]}",
                "instance_group[0].kind: unknown enumeration value \"CPU\" for "
                "inference.ModelInstanceGroup.Kind");
    CHECK_ERROR("{\"input\":[{\"data_type\":\"2147483648\"}]}",
                "input[0].data_type: unknown enumeration value \"2147483648\" for inference.DataType");
}

NR_TEST(error_oneof_and_repeats)
{
    CHECK_ERROR("{\"dynamic_batching\":{},\"sequence_batching\":{}}",
                "sequence_batching: given along with \"dynamic_batching\", another member of oneof "
                "\"scheduling_choice\"");
    CHECK_ERROR("{\"ensembleScheduling\":{},\"dynamicBatching\":{}}",
                "dynamicBatching: given along with \"ensemble_scheduling\", another member of "
                "oneof \"scheduling_choice\"");
    CHECK_ERROR("{\"version_policy\":{\"latest\":{},\"specific\":{}}}",
                "version_policy.specific: given along with \"latest\", another member of oneof "
                "\"policy_choice\"");
    CHECK_ERROR("{\"sequence_batching\":{\"direct\":{},\"oldest\":{}}}",
                "sequence_batching.oldest: given along with \"direct\", another member of oneof "
                "\"strategy_choice\"");
    CHECK_ERROR("{\"model_warmup\":[{\"inputs\":{\"a\":{\"zero_data\":true,\"random_data\":false}}}]}",
                "model_warmup[0].inputs[\"a\"].random_data: given along with \"zero_data\", another "
                "member of oneof \"input_data_type\"");
    CHECK_ERROR("{\"dynamic_batching\":{},\"dynamic_batching\":{}}",
                "dynamic_batching: field given more than once");
    CHECK_ERROR("{\"max_batch_size\":1,\"maxBatchSize\":1}", "maxBatchSize: field given more than once");
    CHECK_ERROR("{\"input\":[{\"dims\":[1],\"dims\":[2]}]}", "input[0].dims: field given more than once");
    CHECK_ERROR("{\"ensemble_scheduling\":{\"max_inflight_requests\":1,\"max_inflight_responses\":2}}",
                "ensemble_scheduling.max_inflight_responses: field given more than once");
    CHECK_ERROR("{\"parameters\":{\"k\":{\"string_value\":\"a\"},\"k\":{\"string_value\":\"b\"}}}",
                "parameters[\"k\"]: map key given more than once");
}

NR_TEST(error_invalid_json)
{
    CHECK_ERROR("{\"name\":", "invalid JSON: Invalid value. at 8");
    CHECK_ERROR("{\"name\":\"m\"} x", "invalid JSON: The document root must not be followed by "
                                     "other values. at 13");
    CHECK_ERROR("", "invalid JSON: The document is empty. at 0");
    check_error(NULL, 0, "invalid JSON: The document is empty. at 0", __LINE__);
    CHECK_ERROR("[]", "expected a JSON object (a ModelConfig), got an array");
    CHECK_ERROR("null", "expected a JSON object (a ModelConfig), got null");
    CHECK_ERROR("\"name\"", "expected a JSON object (a ModelConfig), got \"name\"");
    /* Bytes past len are not read. */
    check_error("{\"name\":\"m\"}", 5, "invalid JSON: Missing a closing quotation mark in string. at 5",
                __LINE__);
}

NR_TEST(error_long_and_odd_names_in_paths)
{
    CHECK_ERROR("{\"metric_tags\":{\"a\\\"b\":5}}", "metric_tags[\"a\"b\"]: expected a string, got 5");
    CHECK_ERROR("{\"metric_tags\":{\"0123456789012345678901234567890123456789xyz\":5}}",
                "metric_tags[\"0123456789012345678901234567890123456789...\"]: expected a string, "
                "got 5");
    CHECK_ERROR("{\"a b\":5}", "message type \"inference.ModelConfig\" has no field named \"a b\"");
}

NR_TEST_MAIN()
