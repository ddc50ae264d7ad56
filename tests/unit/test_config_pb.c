/* test_config_pb.c - nr_cfg_to_pb (ModelConfig in protobuf binary) and the
 * field numbers of the schema tables it walks.
 *
 * Each case parses a small config.pbtxt (no pipeline steps unless named) and
 * compares the bytes with the wire encoding worked out by hand from the proto3
 * rules; the last case compares with the bytes protobuf's own serializer
 * writes for Triton's recorded config of the same model.
 */
#include "nr_test.h"

#include "../../src/config/cfg_int.h"
#include "../../src/config/model_config.h"

/* Parses text and serializes it; NULL on a parse error. */
static char *pb_of(const char *text, size_t *len)
{
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "parse: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    char *pb = nr_cfg_to_pb(cfg, len);
    nr_cfg_free(cfg);
    return pb;
}

static void print_hex(const char *what, const unsigned char *p, size_t n)
{
    fprintf(stderr, "  %s (%zu):", what, n);
    for (size_t i = 0; i < n; i++)
        fprintf(stderr, " %02x", p[i]);
    fputc('\n', stderr);
}

/* Compares got (freed here) with hex bytes such as "0a 01 6d". */
static void check_hex(char *got, size_t len, const char *hex, int line)
{
    unsigned char want[1024];
    size_t n = 0;
    for (const char *h = hex; *h;) {
        if (*h == ' ') {
            h++;
            continue;
        }
        unsigned v;
        if (n == sizeof(want) || sscanf(h, "%2x", &v) != 1)
            break;
        want[n++] = (unsigned char)v;
        h += 2;
    }
    if (got == NULL) {
        nr_test_fail(__FILE__, line, "no bytes (parse failed)");
        return;
    }
    if (len != n || memcmp(got, want, n) != 0) {
        nr_test_fail(__FILE__, line, "protobuf bytes differ");
        print_hex("got", (const unsigned char *)got, len);
        print_hex("expected", want, n);
    }
    free(got);
}

#define CHECK_PB(text, hex)                     \
    do {                                        \
        size_t len_ = 0;                        \
        char *pb_ = pb_of((text), &len_);       \
        check_hex(pb_, len_, (hex), __LINE__);  \
    } while (0)

/* ---- the tables ----------------------------------------------------------- */

typedef struct {
    const nr__cfg_msg_t *seen[128];
    size_t n;
} walk_t;

static void check_msg_numbers(walk_t *w, const nr__cfg_msg_t *m, bool is_map_entry)
{
    for (size_t i = 0; i < w->n; i++)
        if (w->seen[i] == m)
            return;
    ASSERT_TRUE(w->n < sizeof(w->seen) / sizeof(w->seen[0]));
    w->seen[w->n++] = m;
    if (is_map_entry) {
        /* A map entry is {key = 1, value = 2}; config_pb.c writes them in table order. */
        EXPECT_EQ_INT(m->n_fields, 2);
        if (m->n_fields == 2) {
            EXPECT_EQ_INT(m->fields[0].num, 1);
            EXPECT_STREQ(m->fields[0].name, "key");
            EXPECT_EQ_INT(m->fields[1].num, 2);
            EXPECT_STREQ(m->fields[1].name, "value");
        }
    }
    for (size_t i = 0; i < m->n_fields; i++) {
        const nr__cfg_field_t *f = &m->fields[i];
        if (f->flags & NR__FL_ALIAS) {
            if (f->num != 0)
                nr_test_fail(__FILE__, __LINE__, "%s.%s: alias with number %u", m->type_name,
                             f->name, f->num);
            continue;
        }
        /* 1..2^29-1, without protobuf's reserved 19000-19999 */
        if (f->num < 1 || f->num > 536870911u || (f->num >= 19000 && f->num <= 19999))
            nr_test_fail(__FILE__, __LINE__, "%s.%s: no valid field number (%u)", m->type_name,
                         f->name, f->num);
        for (size_t k = 0; k < i; k++)
            if (m->fields[k].num == f->num && !(m->fields[k].flags & NR__FL_ALIAS))
                nr_test_fail(__FILE__, __LINE__, "%s: %s and %s share number %u", m->type_name,
                             m->fields[k].name, f->name, f->num);
        if (f->type == NR__F_MSG)
            check_msg_numbers(w, f->sub, (f->flags & NR__FL_MAP) != 0);
        else if (f->type == NR__F_SHAPEMAP)
            check_msg_numbers(w, &nr__cfg_shape_entry_msg, true);
    }
}

NR_TEST(every_field_has_a_unique_number)
{
    walk_t w = {.n = 0};
    check_msg_numbers(&w, &nr__cfg_model_config_msg, false);
    /* All 51 tables of cfg_fields.c are reachable from ModelConfig. */
    EXPECT_EQ_INT(w.n, 51);
}

/* ---- scalars, strings, field order ---------------------------------------- */

NR_TEST(empty_config_is_zero_bytes)
{
    nr_model_config_t *cfg = nr_cfg_new();
    size_t len = 99;
    char *pb = nr_cfg_to_pb(cfg, &len);
    EXPECT_NOT_NULL(pb);
    EXPECT_EQ_INT(len, 0);
    free(pb);
    nr_cfg_free(cfg);
}

NR_TEST(minimal_model_in_field_number_order)
{
    CHECK_PB("name: \"m\"", "0a 01 6d");
    /* backend is field 17 (two-byte tag) and follows max_batch_size (4). */
    CHECK_PB("name: \"m\" backend: \"be\" max_batch_size: 8 platform: \"p\"",
             "0a 01 6d 12 01 70 20 08 8a 01 02 62 65");
    /* zero and empty scalars are left out */
    CHECK_PB("name: \"\" max_batch_size: 0 runtime: \"r\"", "ca 01 01 72");
}

NR_TEST(negative_int32_is_ten_bytes)
{
    CHECK_PB("max_batch_size: -1", "20 ff ff ff ff ff ff ff ff ff 01");
}

NR_TEST(input_dims_packed_with_negative_and_enums)
{
    /* FORMAT_NONE (0) is left out; dims packed, -1 as a 10-byte varint. */
    CHECK_PB("input [ { name: \"I\" data_type: TYPE_FP32 dims: [ -1, 16 ] } ]",
             "2a 12 0a 01 49 10 0b 22 0b ff ff ff ff ff ff ff ff ff 01 10");
    CHECK_PB("input [ { name: \"I\" data_type: TYPE_FP32 format: FORMAT_NCHW dims: [ -1, 16 ] } ]",
             "2a 14 0a 01 49 10 0b 18 02 22 0b ff ff ff ff ff ff ff ff ff 01 10");
    /* ModelOutput: label_filename (4) is written before reshape (5). */
    CHECK_PB("output [ { name: \"O\" reshape { shape: [ 2 ] } label_filename: \"l\" } ]",
             "32 0b 0a 01 4f 22 01 6c 2a 03 0a 01 02");
}

NR_TEST(long_lengths_take_two_bytes)
{
    char text[300], hex[1024];
    char name[201];
    memset(name, 'x', 200);
    name[200] = '\0';
    snprintf(text, sizeof(text), "input [ { name: \"%s\" } ]", name);
    int n = snprintf(hex, sizeof(hex), "2a cb 01 0a c8 01");
    for (int i = 0; i < 200; i++)
        n += snprintf(hex + n, sizeof(hex) - (size_t)n, " 78");
    CHECK_PB(text, hex);
}

/* ---- maps, oneofs, messages ----------------------------------------------- */

NR_TEST(maps_write_key_and_value_always)
{
    /* metric_tags (10) before parameters (14); an entry of empty strings is
     * still {key: "", value: ""}; an empty ModelParameter is value {}. */
    CHECK_PB("parameters { key: \"k\" value { string_value: \"v\" } }\n"
             "parameters { key: \"e\" value { } }\n"
             "metric_tags { key: \"\" value: \"\" }",
             "52 04 0a 00 12 00 "
             "72 08 0a 01 6b 12 03 0a 01 76 "
             "72 05 0a 01 65 12 00");
}

NR_TEST(version_policy_oneof)
{
    CHECK_PB("version_policy { specific { versions: [ 1, 3 ] } }", "1a 06 1a 04 0a 02 01 03");
    CHECK_PB("version_policy { all { } }", "1a 02 12 00"); /* empty present message */
    CHECK_PB("version_policy { latest { } }", "1a 02 0a 00");
    CHECK_PB("version_policy { latest { num_versions: 2 } }", "1a 04 0a 02 08 02");
}

NR_TEST(dynamic_batching_priority_queue_policy_uint64_keys)
{
    CHECK_PB("dynamic_batching {\n"
             "  preferred_batch_size: [ 4, 8 ] max_queue_delay_microseconds: 100\n"
             "  priority_levels: 2 default_priority_level: 1\n"
             "  default_queue_policy { timeout_action: DELAY }\n"
             "  priority_queue_policy { key: 1 value { max_queue_size: 3 } }\n"
             "  priority_queue_policy { key: 300 value { } }\n"
             "  priority_queue_policy { key: 0 value { } }\n"
             "  priority_queue_policy { key: 18446744073709551615\n"
             "                          value { default_timeout_microseconds: 5 } }\n"
             "}",
             "5a 34 0a 02 04 08 10 64 20 02 28 01 32 02 08 01 "
             "3a 06 08 01 12 02 20 03 "
             "3a 05 08 ac 02 12 00 "
             "3a 04 08 00 12 00 "
             "3a 0f 08 ff ff ff ff ff ff ff ff ff 01 12 02 10 05");
}

NR_TEST(empty_present_messages)
{
    CHECK_PB("dynamic_batching { }", "5a 00");
    CHECK_PB("response_cache { enable: true } model_transaction_policy { }\n"
             "optimization { output_pinned_memory { } }",
             "62 02 32 00 9a 01 00 c2 01 02 08 01");
}

NR_TEST(instance_group_numbers_out_of_declaration_order)
{
    /* kind (4) after gpus (3); rate_limiter (6) is a flattened message. */
    CHECK_PB("instance_group [ { name: \"g\" kind: KIND_CPU count: 2 gpus: [ 0, 1 ]\n"
             "  profile: [ \"a\", \"b\" ] rate_limiter { priority: 1 } } ]",
             "3a 15 0a 01 67 10 02 1a 02 00 01 20 02 2a 01 61 2a 01 62 32 02 10 01");
}

NR_TEST(selected_oneof_scalars_written_even_when_zero)
{
    CHECK_PB("model_warmup [ { name: \"w\" batch_size: 1\n"
             "  inputs { key: \"I\" value { data_type: TYPE_FP32 dims: [ 2 ] zero_data: false } }\n"
             "  inputs { key: \"J\" value { input_data_file: \"\" } } } ]",
             "82 01 1c 0a 01 77 10 01 "
             "1a 0c 0a 01 49 12 07 08 0b 12 01 02 18 00 "
             "1a 07 0a 01 4a 12 02 2a 00");
}

NR_TEST(floats_doubles_and_oneof_order)
{
    /* control_input (2) before the direct strategy (3); fp32 packed fixed32. */
    CHECK_PB("sequence_batching { direct { minimum_slot_utilization: 0.5 }\n"
             "  control_input [ { name: \"S\" control [ { kind: CONTROL_SEQUENCE_START\n"
             "    fp32_false_true: [ 0, 1 ] } ] } ] }",
             "6a 18 12 0f 0a 01 53 12 0a 1a 08 00 00 00 00 00 00 80 3f "
             "1a 05 15 00 00 00 3f");
    CHECK_PB("model_metrics { metric_control [ { metric_identifier { family: \"f\" }\n"
             "  histogram_options { buckets: [ 1, 2.5 ] } } ] }",
             "d2 01 1b 0a 19 0a 03 0a 01 66 12 12 0a 10 "
             "00 00 00 00 00 00 f0 3f 00 00 00 00 00 00 04 40");
}

NR_TEST(ensemble_int64_and_alias_written_once)
{
    CHECK_PB("ensemble_scheduling { step [ { model_name: \"a\" model_version: -1 } ]\n"
             "  max_inflight_responses: 3 }",
             "7a 12 0a 0e 0a 01 61 10 ff ff ff ff ff ff ff ff ff 01 10 03");
}

/* ---- against protobuf's serializer ---------------------------------------- */

NR_TEST(identity_fp32_matches_protobuf_serializer)
{
    /* Expected: Triton 2.51's recorded GET /v2/models/identity_fp32/config
     * body (test_config_json.c) read with protobuf's json_format.Parse into
     * tritonclient's inference.ModelConfig, then SerializeToString(). */
    const char *text = "name: \"identity_fp32\"\n"
                       "backend: \"onnxruntime\"\n"
                       "max_batch_size: 8\n"
                       "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                       "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
                       "instance_group [ { kind: KIND_CPU count: 1 } ]\n";
    nr_model_config_t *cfg;
    ASSERT_OK(nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg));
    cfg->platform = strdup("onnxruntime_onnx"); /* the loader's autofill, as in test_config_json.c */
    cfg->default_model_filename = strdup("model.onnx");
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 2, 0);
    size_t len;
    char *pb = nr_cfg_to_pb(cfg, &len);
    nr_cfg_free(cfg);
    check_hex(pb, len,
              "0a 0d 69 64 65 6e 74 69 74 79 5f 66 70 33 32 12 10 6f 6e 6e 78 72 75 6e"
              "74 69 6d 65 5f 6f 6e 6e 78 1a 04 0a 02 08 01 20 08 2a 16 0a 06 49 4e 50"
              "55 54 30 10 0b 22 0a ff ff ff ff ff ff ff ff ff 01 32 17 0a 07 4f 55 54"
              "50 55 54 30 10 0b 1a 0a ff ff ff ff ff ff ff ff ff 01 3a 15 0a 0f 69 64"
              "65 6e 74 69 74 79 5f 66 70 33 32 5f 30 10 01 20 02 42 0a 6d 6f 64 65 6c"
              "2e 6f 6e 6e 78 62 08 2a 02 08 01 32 02 08 01 8a 01 0b 6f 6e 6e 78 72 75"
              "6e 74 69 6d 65",
              __LINE__);
}

NR_TEST_MAIN()
