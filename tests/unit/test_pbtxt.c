/* test_pbtxt.c - the protobuf text-format tokenizer and parser (src/config/pbtxt.c).
 *
 * Every syntax form of model_config.md §8 builds the expected tree, and every
 * error path reports its exact "<path>:<line>:<col>: [<field>: ]<problem>"
 * text. Ends with a short random/mutation fuzz loop (no crash, no leak).
 */
#include "nr_test.h"

#include "../../src/config/pbtxt.h"

static nr_pbtxt_tree_t *parse(const char *text)
{
    nr_pbtxt_tree_t *t = NULL;
    nr_status_t *st = nr_pbtxt_parse(text, strlen(text), "c.pbtxt", &t);
    if (st != NULL) {
        fprintf(stderr, "unexpected parse error: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    return t;
}

/* The i-th child of a node (NULL past the end). */
static const nr_pbtxt_node_t *nth(const nr_pbtxt_node_t *n, size_t i)
{
    const nr_pbtxt_node_t *c = n ? n->child : NULL;
    while (c && i--)
        c = c->next;
    return c;
}

/* Expects a parse error with this exact message. */
static bool parse_error(const char *text, size_t len, const char *msg)
{
    nr_pbtxt_tree_t *t = (nr_pbtxt_tree_t *)1;
    nr_status_t *st = nr_pbtxt_parse(text, len, "c.pbtxt", &t);
    bool ok = EXPECT_NULL(t);
    return EXPECT_STATUS(st, NR_INTERNAL, msg) && ok;
}
#define ERR(text, msg) parse_error((text), strlen(text), (msg))

/* ---- forms ---------------------------------------------------------------- */

NR_TEST(empty_and_comments)
{
    nr_pbtxt_tree_t *t = parse("");
    ASSERT_NOT_NULL(t);
    EXPECT_EQ_INT(nr_pbtxt_root(t)->n_child, 0);
    EXPECT_EQ_INT(nr_pbtxt_root(t)->kind, NR_PBTXT_MESSAGE);
    nr_pbtxt_free(t);
    t = parse("# only a comment\n   \t\r\n# another");
    ASSERT_NOT_NULL(t);
    EXPECT_EQ_INT(nr_pbtxt_root(t)->n_child, 0);
    nr_pbtxt_free(t);
}

NR_TEST(scalar_field_with_positions)
{
    nr_pbtxt_tree_t *t = parse("# c\n  name: \"simple\" # trailing\nmax_batch_size: 8");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *root = nr_pbtxt_root(t);
    ASSERT_EQ_INT(root->n_child, 2);
    const nr_pbtxt_node_t *a = nth(root, 0), *b = nth(root, 1);
    EXPECT_STREQ(a->name, "name");
    EXPECT_EQ_INT(a->kind, NR_PBTXT_SCALAR);
    EXPECT_EQ_INT(a->tok, NR_PBTXT_STRING);
    EXPECT_STREQ(a->text, "simple");
    EXPECT_EQ_INT(a->len, 6);
    EXPECT_EQ_INT(a->line, 2);
    EXPECT_EQ_INT(a->col, 3);
    EXPECT_EQ_INT(a->vline, 2);
    EXPECT_EQ_INT(a->vcol, 9);
    EXPECT_TRUE(a->colon);
    EXPECT_STREQ(b->name, "max_batch_size");
    EXPECT_EQ_INT(b->tok, NR_PBTXT_INT);
    EXPECT_STREQ(b->text, "8");
    EXPECT_EQ_INT(b->line, 3);
    EXPECT_EQ_INT(b->col, 1);
    nr_pbtxt_free(t);
}

NR_TEST(message_forms)
{
    const char *forms[] = {"a { b: 1 }", "a: { b: 1 }", "a < b: 1 >", "a: < b: 1 >"};
    for (size_t i = 0; i < 4; i++) {
        nr_pbtxt_tree_t *t = parse(forms[i]);
        ASSERT_NOT_NULL(t);
        const nr_pbtxt_node_t *a = nth(nr_pbtxt_root(t), 0);
        EXPECT_EQ_INT(a->kind, NR_PBTXT_MESSAGE);
        EXPECT_EQ_INT(a->n_child, 1);
        EXPECT_STREQ(nth(a, 0)->name, "b");
        EXPECT_STREQ(nth(a, 0)->text, "1");
        nr_pbtxt_free(t);
    }
    nr_pbtxt_tree_t *t = parse("dynamic_batching { }");
    ASSERT_NOT_NULL(t);
    EXPECT_EQ_INT(nth(nr_pbtxt_root(t), 0)->kind, NR_PBTXT_MESSAGE);
    EXPECT_EQ_INT(nth(nr_pbtxt_root(t), 0)->n_child, 0);
    EXPECT_FALSE(nth(nr_pbtxt_root(t), 0)->colon);
    nr_pbtxt_free(t);
}

NR_TEST(list_forms)
{
    nr_pbtxt_tree_t *t = parse("dims: [ 16, -1 ] e: [] m [ { x: 1 }, < y: 2 > ] n: [ {} ]");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *root = nr_pbtxt_root(t);
    ASSERT_EQ_INT(root->n_child, 4);
    const nr_pbtxt_node_t *d = nth(root, 0);
    EXPECT_EQ_INT(d->kind, NR_PBTXT_LIST);
    ASSERT_EQ_INT(d->n_child, 2);
    EXPECT_STREQ(nth(d, 0)->name, "dims");
    EXPECT_STREQ(nth(d, 0)->text, "16");
    EXPECT_FALSE(nth(d, 0)->neg);
    EXPECT_STREQ(nth(d, 1)->text, "1");
    EXPECT_TRUE(nth(d, 1)->neg);
    EXPECT_EQ_INT(nth(d, 1)->vcol, 13);
    EXPECT_EQ_INT(nth(root, 1)->kind, NR_PBTXT_LIST);
    EXPECT_EQ_INT(nth(root, 1)->n_child, 0);
    const nr_pbtxt_node_t *m = nth(root, 2);
    EXPECT_EQ_INT(m->kind, NR_PBTXT_LIST);
    ASSERT_EQ_INT(m->n_child, 2);
    EXPECT_EQ_INT(nth(m, 0)->kind, NR_PBTXT_MESSAGE);
    EXPECT_STREQ(nth(nth(m, 1), 0)->name, "y");
    EXPECT_EQ_INT(nth(root, 3)->n_child, 1);
    nr_pbtxt_free(t);
}

NR_TEST(separators_after_fields)
{
    nr_pbtxt_tree_t *t = parse("a: 1; b: 2, c { d: 3; e: 4, } f: [ { g: 1, }, { h: 2; } ];");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *root = nr_pbtxt_root(t);
    EXPECT_EQ_INT(root->n_child, 4);
    EXPECT_EQ_INT(nth(root, 2)->n_child, 2);
    EXPECT_EQ_INT(nth(root, 3)->n_child, 2);
    nr_pbtxt_free(t);
}

NR_TEST(strings_escapes_and_concatenation)
{
    nr_pbtxt_tree_t *t = parse(
        "a: 'single \"q\"' b: \"x\" 'y' \"z\" c: \"\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\'\\\"\"\n"
        "d: \"\\101\\0\\7x\\x41\\x4a\" e: \"\\u00e9\\U0001F600\\ud83d\\ude00\" f: \"\" g: \"\\xff\"");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *root = nr_pbtxt_root(t);
    EXPECT_STREQ(nth(root, 0)->text, "single \"q\"");
    EXPECT_STREQ(nth(root, 1)->text, "xyz");
    EXPECT_STREQ(nth(root, 2)->text, "\a\b\f\n\r\t\v\\?'\"");
    const nr_pbtxt_node_t *d = nth(root, 3);
    EXPECT_EQ_INT(d->len, 6);
    EXPECT_TRUE(memcmp(d->text, "A\0\007xAJ", 6) == 0);
    EXPECT_STREQ(nth(root, 4)->text, "\xc3\xa9\xf0\x9f\x98\x80\xf0\x9f\x98\x80");
    EXPECT_EQ_INT(nth(root, 5)->len, 0);
    EXPECT_EQ_INT(nth(root, 5)->tok, NR_PBTXT_STRING);
    EXPECT_STREQ(nth(root, 6)->text, "\xff");
    nr_pbtxt_free(t);
}

NR_TEST(lone_surrogate_is_kept_as_three_bytes)
{
    nr_pbtxt_tree_t *t = parse("a: \"\\ud800x\"");
    ASSERT_NOT_NULL(t);
    EXPECT_STREQ(nth(nr_pbtxt_root(t), 0)->text, "\xed\xa0\x80x");
    nr_pbtxt_free(t);
}

NR_TEST(number_tokens)
{
    nr_pbtxt_tree_t *t = parse("a: 0x1F b: 010 c: 0 d: 1.5 e: 1e5 f: 2.5f g: 1F h: .5 i: 1. "
                               "j: -inf k: nan l: - 7 m: 1E-3 n: 00");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *r = nr_pbtxt_root(t);
    static const struct { const char *text; int tok; bool neg; } want[] = {
        {"0x1F", NR_PBTXT_INT, false},  {"010", NR_PBTXT_INT, false},
        {"0", NR_PBTXT_INT, false},     {"1.5", NR_PBTXT_FLOAT, false},
        {"1e5", NR_PBTXT_FLOAT, false}, {"2.5f", NR_PBTXT_FLOAT, false},
        {"1F", NR_PBTXT_FLOAT, false},  {".5", NR_PBTXT_FLOAT, false},
        {"1.", NR_PBTXT_FLOAT, false},  {"inf", NR_PBTXT_IDENT, true},
        {"nan", NR_PBTXT_IDENT, false}, {"7", NR_PBTXT_INT, true},
        {"1E-3", NR_PBTXT_FLOAT, false}, {"00", NR_PBTXT_INT, false},
    };
    ASSERT_EQ_INT(r->n_child, sizeof(want) / sizeof(want[0]));
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        EXPECT_STREQ(nth(r, i)->text, want[i].text);
        EXPECT_EQ_INT(nth(r, i)->tok, want[i].tok);
        EXPECT_EQ_INT(nth(r, i)->neg, want[i].neg);
    }
    nr_pbtxt_free(t);
}

NR_TEST(identifiers_and_whitespace)
{
    nr_pbtxt_tree_t *t = parse("data_type:TYPE_FP32\tkind :KIND_CPU\r\n\v\fb_2: True");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *r = nr_pbtxt_root(t);
    ASSERT_EQ_INT(r->n_child, 3);
    EXPECT_EQ_INT(nth(r, 0)->tok, NR_PBTXT_IDENT);
    EXPECT_STREQ(nth(r, 0)->text, "TYPE_FP32");
    EXPECT_STREQ(nth(r, 1)->text, "KIND_CPU");
    EXPECT_STREQ(nth(r, 2)->name, "b_2");
    EXPECT_EQ_INT(nth(r, 2)->line, 2); /* \v and \f are not line breaks */
    nr_pbtxt_free(t);
}

NR_TEST(triton_doc_examples_parse)
{
    const char *docs[] = {
        "dynamic_batching { }",
        "instance_group [ { count: 2 } ]",
        ("optimization { execution_accelerators { gpu_execution_accelerator : [ { name : "
         "\"tensorrt\" parameters { key: \"precision_mode\" value: \"FP16\" } parameters { key: "
         "\"max_workspace_size_bytes\" value: \"1073741824\" } } ] } }"),
        ("optimization { execution_accelerators { cpu_execution_accelerator : [ { name : "
         "\"openvino\" } ] } }"),
        "parameters { key: \"k\" value: { string_value: \"v\" } }",
    };
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        nr_pbtxt_tree_t *t = parse(docs[i]);
        EXPECT_NOT_NULL(t);
        nr_pbtxt_free(t);
    }
}

NR_TEST(input_is_not_nul_terminated)
{
    char buf[] = {'a', ':', ' ', '1', '2', '3'}; /* no NUL; "123" must stop at len */
    nr_pbtxt_tree_t *t = NULL;
    ASSERT_OK(nr_pbtxt_parse(buf, 5, "c", &t));
    EXPECT_STREQ(nth(nr_pbtxt_root(t), 0)->text, "12");
    nr_pbtxt_free(t);
    ASSERT_OK(nr_pbtxt_parse(NULL, 0, "c", &t));
    EXPECT_EQ_INT(nr_pbtxt_root(t)->n_child, 0);
    nr_pbtxt_free(t);
}

NR_TEST(describe_values)
{
    nr_pbtxt_tree_t *t = parse("a: \"x\\ny\" b: -3 c {} d: [] e: TYPE_X");
    ASSERT_NOT_NULL(t);
    const nr_pbtxt_node_t *r = nr_pbtxt_root(t);
    char d[64];
    nr_pbtxt_describe(nth(r, 0), d, sizeof(d));
    EXPECT_STREQ(d, "\"x?y\"");
    nr_pbtxt_describe(nth(r, 1), d, sizeof(d));
    EXPECT_STREQ(d, "-3");
    nr_pbtxt_describe(nth(r, 2), d, sizeof(d));
    EXPECT_STREQ(d, "a message");
    nr_pbtxt_describe(nth(r, 3), d, sizeof(d));
    EXPECT_STREQ(d, "a list");
    nr_pbtxt_describe(nth(r, 4), d, 4);
    EXPECT_STREQ(d, "TYP");
    nr_pbtxt_free(t);
}

NR_TEST(depth_limit_is_exact)
{
    char ok[64 * 4 + 8], deep[65 * 4 + 8];
    size_t n = 0;
    for (int i = 0; i < 64; i++)
        n += (size_t)sprintf(ok + n, "a{");
    for (int i = 0; i < 64; i++)
        n += (size_t)sprintf(ok + n, "}");
    nr_pbtxt_tree_t *t = parse(ok);
    EXPECT_NOT_NULL(t);
    nr_pbtxt_free(t);
    n = 0;
    for (int i = 0; i < 65; i++)
        n += (size_t)sprintf(deep + n, "a{");
    ERR(deep, "c.pbtxt:1:130: a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a."
              "a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a.a: message nesting "
              "deeper than 64 levels");
}

/* "a: [1,1,...,1]" with `items` values; returns its length. */
static size_t list_of_ones(char *txt, size_t items)
{
    size_t k = (size_t)sprintf(txt, "a: [");
    for (size_t i = 0; i < items; i++) {
        txt[k++] = '1';
        txt[k++] = i + 1 < items ? ',' : ']';
    }
    return k;
}

NR_TEST(node_limit)
{
    size_t limit = 1u << 20; /* nodes: the list itself plus its items */
    char *txt = malloc(2 * limit + 16);
    ASSERT_NOT_NULL(txt);
    size_t k = list_of_ones(txt, limit);
    parse_error(txt, k, "c.pbtxt:1:2097155: a: more than 1048576 fields and values in one file");
    k = list_of_ones(txt, limit - 1);
    nr_pbtxt_tree_t *t = NULL;
    EXPECT_OK(nr_pbtxt_parse(txt, k, "c", &t));
    nr_pbtxt_free(t);
    free(txt);
}

/* ---- errors --------------------------------------------------------------- */

NR_TEST(string_errors)
{
    ERR("name: \"abc", "c.pbtxt:1:11: name: unexpected end of input inside a string literal");
    ERR("name: \"ab\ncd\"", "c.pbtxt:1:10: name: string literals cannot cross line boundaries");
    ERR("a: \"\\q\"", "c.pbtxt:1:5: a: invalid escape sequence in string literal");
    ERR("a: \"\\x\"", "c.pbtxt:1:5: a: invalid escape sequence in string literal");
    ERR("a: \"\\u12\"", "c.pbtxt:1:5: a: invalid escape sequence in string literal");
    ERR("a: \"\\U00110000\"", "c.pbtxt:1:5: a: invalid escape sequence in string literal");
    ERR("a: \"ok\\", "c.pbtxt:1:7: a: invalid escape sequence in string literal");
    parse_error("a: \"x\0y\"", 8, "c.pbtxt:1:6: a: invalid NUL byte inside a string literal");
}

NR_TEST(number_errors)
{
    ERR("a: 0x", "c.pbtxt:1:4: a: \"0x\" must be followed by hex digits");
    ERR("a: 09", "c.pbtxt:1:4: a: numbers starting with leading zero must be in octal");
    ERR("a: 1e", "c.pbtxt:1:4: a: \"e\" must be followed by exponent");
    ERR("a: 1e+x", "c.pbtxt:1:4: a: \"e\" must be followed by exponent");
    ERR("a: 10abc", "c.pbtxt:1:4: a: need space between number and identifier");
    ERR("a: 0x1g", "c.pbtxt:1:4: a: need space between number and identifier");
    ERR("a: 1.2.3", "c.pbtxt:1:4: a: unexpected \".\" after number");
    ERR("a: 1.5fx", "c.pbtxt:1:4: a: need space between number and identifier");
}

NR_TEST(character_errors)
{
    ERR("a: 1\x01", "c.pbtxt:1:5: a: invalid control character 0x01");
    parse_error("\0", 1, "c.pbtxt:1:1: invalid control character 0x00");
    ERR("\xc3\xa9: 1", "c.pbtxt:1:1: unexpected byte 0xc3");
    ERR("a: @", "c.pbtxt:1:4: a: unexpected character '@'");
    ERR("a: 1\x7f", "c.pbtxt:1:5: a: invalid control character 0x7f");
}

NR_TEST(structure_errors)
{
    ERR("a: -\"x\"", "c.pbtxt:1:5: a: expected a number after '-', got '\"x\"'");
    ERR("a: -", "c.pbtxt:1:5: a: expected a number after '-', got end of input");
    ERR("a: }", "c.pbtxt:1:4: a: expected a value, got '}'");
    ERR("a: ", "c.pbtxt:1:4: a: expected a value, got end of input");
    ERR("dims [1]", "c.pbtxt:1:7: dims: expected '{' or ':' before a list value, got '1'");
    ERR("a: [1 2]", "c.pbtxt:1:7: a: expected ',' or ']' in list, got '2'");
    ERR("a: [1, ]", "c.pbtxt:1:8: a: expected a value, got ']'");
    ERR("a: [1", "c.pbtxt:1:6: a: expected ',' or ']' in list, got end of input");
    ERR("a 5", "c.pbtxt:1:3: a: expected ':' or '{' after field name, got '5'");
    ERR("a", "c.pbtxt:1:2: a: expected ':' or '{' after field name, got end of input");
    ERR("a {\n b: 1\n", "c.pbtxt:3:1: a: unexpected end of input, expected '}'");
    ERR("a < b: 1 }", "c.pbtxt:1:10: a: expected a field name or '>', got '}'");
    ERR("a { : }", "c.pbtxt:1:5: a: expected a field name or '}', got ':'");
    ERR("}", "c.pbtxt:1:1: expected a field name, got '}'");
    ERR("a: 1;;", "c.pbtxt:1:6: expected a field name, got ';'");
    ERR("[ext.field]: 1", "c.pbtxt:1:1: expected a field name, got '['");
    ERR("a { b { c: } }", "c.pbtxt:1:12: a.b.c: expected a value, got '}'");
    ERR("1: 2", "c.pbtxt:1:1: expected a field name, got '1'");
}

NR_TEST(long_tokens_are_shortened_in_messages)
{
    ERR("a: [1 \"0123456789012345678901234567890123456789XYZ\"]",
        "c.pbtxt:1:7: a: expected ',' or ']' in list, got "
        "'\"012345678901234567890123456789012345678...'");
}

/* ---- fuzz ----------------------------------------------------------------- */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

NR_TEST(fuzz_random_and_mutated_inputs)
{
    static const char seed[] =
        "name: \"m\" max_batch_size: 8 input [ { name: \"I\" data_type: TYPE_FP32 dims: [ -1, 3 ] "
        "reshape { shape: [ 3 ] } } ] dynamic_batching { preferred_batch_size: [ 4 ] "
        "priority_queue_policy { key: 1 value < max_queue_size: 0x10 > } } "
        "parameters: { key: 'k' value: { string_value: \"\\x41\\u00e9\" } } # c\n";
    static const char alphabet[] = "{}<>[]:;,-\"'\\#\n 0x1e.fabcAZ_\t";
    char buf[sizeof(seed) + 64];
    for (int iter = 0; iter < 20000; iter++) {
        size_t len;
        if (iter % 4 == 0) { /* random bytes */
            len = rnd() % sizeof(buf);
            for (size_t i = 0; i < len; i++)
                buf[i] = iter % 8 == 0 ? (char)rnd() : alphabet[rnd() % (sizeof(alphabet) - 1)];
        } else { /* mutate the seed */
            len = sizeof(seed) - 1;
            memcpy(buf, seed, len);
            int edits = 1 + (int)(rnd() % 4);
            for (int e = 0; e < edits && len > 0; e++) {
                size_t at = rnd() % len;
                switch (rnd() % 3) {
                case 0: buf[at] = alphabet[rnd() % (sizeof(alphabet) - 1)]; break;
                case 1: buf[at] = (char)rnd(); break;
                default: len = at; break; /* truncate */
                }
            }
        }
        nr_pbtxt_tree_t *t = NULL;
        nr_status_t *st = nr_pbtxt_parse(buf, len, "f", &t);
        EXPECT_TRUE((st == NULL) != (t == NULL));
        nr_status_free(st);
        nr_pbtxt_free(t);
    }
}

NR_TEST_MAIN()
