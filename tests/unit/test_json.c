/* test_json.c - the JSON reader's spans (common/json.h): an array kept as
 * text is checked exactly as a built one is (the same rapidjson errors at the
 * same offsets, nesting limit included), and its leaves read back as the DOM
 * would hold them: nested arrays flattened, strings raw or unescaped, objects
 * and literals by type, every number form (the fast paths against strtod).
 */
#include "../../src/common/json.h"
#include "nr_test.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const nr_json_opts_t SPANS = {"inputs", "data"};

/* Parses s with spans; *data is inputs[0].data of the document. */
static nr_status_t *parse_spans(const char *s, nr_json_doc_t **doc, const nr_jv_t **data)
{
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse_opts(s, strlen(s), &SPANS, doc, &root);
    *data = NULL;
    if (st == NULL) {
        const nr_jv_t *in = nr_jv_get(root, "inputs");
        if (in != NULL && in->type == NR_JV_ARRAY && in->n > 0)
            *data = nr_jv_get(&in->u.items[0], "data");
    }
    return st;
}

/* The same text with and without spans: the same outcome, to the byte. */
static void same_outcome(const char *s)
{
    nr_json_doc_t *d1, *d2;
    const nr_jv_t *r1, *data;
    nr_status_t *a = nr_json_parse(s, strlen(s), &d1, &r1);
    nr_status_t *b = parse_spans(s, &d2, &data);
    if ((a == NULL) != (b == NULL) || (a && b && strcmp(a->msg, b->msg) != 0))
        nr_test_fail(__FILE__, __LINE__, "%s:\n  DOM:   %s\n  spans: %s", s,
                     a ? a->msg : "ok", b ? b->msg : "ok");
    nr_status_free(a);
    nr_status_free(b);
    nr_json_free(d1);
    nr_json_free(d2);
}

NR_TEST(span_errors_are_the_doms)
{
    static const char *const cases[] = {
        "{\"inputs\":[{\"data\":[1,2,x]}]}",
        "{\"inputs\":[{\"data\":[1,2}]}",
        "{\"inputs\":[{\"data\":[1 2]}]}",
        "{\"inputs\":[{\"data\":[1,,2]}]}",
        "{\"inputs\":[{\"data\":[1,]}]}",
        "{\"inputs\":[{\"data\":[1.]}]}",
        "{\"inputs\":[{\"data\":[1e]}]}",
        "{\"inputs\":[{\"data\":[-]}]}",
        "{\"inputs\":[{\"data\":[01]}]}",
        "{\"inputs\":[{\"data\":[1e400]}]}",
        "{\"inputs\":[{\"data\":[-1e309, 0]}]}",
        "{\"inputs\":[{\"data\":[1.7976931348623157e308, 1.8e308]}]}",
        "{\"inputs\":[{\"data\":[0.0000000000000000000000000001e330]}]}",
        "{\"inputs\":[{\"data\":[Infinit]}]}",
        "{\"inputs\":[{\"data\":[\"a\\x\"]}]}",
        "{\"inputs\":[{\"data\":[\"\\ud800\"]}]}",
        "{\"inputs\":[{\"data\":[\"\\u12g4\"]}]}",
        "{\"inputs\":[{\"data\":[\"abc]}]}",
        "{\"inputs\":[{\"data\":[{\"a\" 1}]}]}",
        "{\"inputs\":[{\"data\":[{1:2}]}]}",
        "{\"inputs\":[{\"data\":[tru]}]}",
        "{\"inputs\":[{\"data\":[[1,2],[3,4]]} x]}",
        "{\"inputs\":[{\"data\":[[1,2],[3,4]]}]} x",
        "{\"inputs\":[{\"data\":[1,2]",
        "{\"id\":5,\"inputs\":[{\"data\":[1,2,x]}]}",
        "{\"inputs\":[{\"data\":[1,2]}],\"outputs\":[{\"data\":[x]}]}",
    };
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++)
        same_outcome(cases[i]);
    /* the nesting limit counts the levels inside a span as well */
    for (int depth = 250; depth <= 256; depth++) {
        char s[1200];
        int n = snprintf(s, sizeof(s), "{\"inputs\":[{\"data\":");
        for (int k = 0; k < depth; k++)
            s[n++] = '[';
        s[n++] = '1';
        for (int k = 0; k < depth; k++)
            s[n++] = ']';
        snprintf(s + n, sizeof(s) - (size_t)n, "}]}");
        same_outcome(s);
    }
    nr_json_doc_t *d;
    const nr_jv_t *data;
    EXPECT_STATUS(parse_spans("{\"inputs\":[{\"data\":[1,2,x]}]}", &d, &data), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Invalid value. at 24");
    nr_json_free(d);
}

NR_TEST(empty_containers_first)
{
    /* an empty array or object before any other: the build stacks are still NULL */
    static const char *const docs[] = {"[]", "{}", "[[],{}]", "{\"a\":[],\"b\":{}}"};
    for (size_t i = 0; i < sizeof(docs) / sizeof(docs[0]); i++) {
        nr_json_doc_t *d;
        const nr_jv_t *r;
        ASSERT_OK(nr_json_parse(docs[i], strlen(docs[i]), &d, &r));
        EXPECT_TRUE(r->type == NR_JV_ARRAY || r->type == NR_JV_OBJECT);
        EXPECT_TRUE(r->n == 0 || r->n == 2);
        nr_json_free(d);
    }
}

NR_TEST(spans_are_kept_where_asked)
{
    const char *s = "{\"inputs\":[{\"name\":\"a\",\"data\":[1, 2]},{\"d\\u0061ta\":[3]},"
                    "{\"data\":5},{\"parameters\":{\"data\":[6]}}],"
                    "\"data\":[7],\"x\":{\"inputs\":[{\"data\":[8]}]}}";
    nr_json_doc_t *d;
    const nr_jv_t *root;
    ASSERT_OK(nr_json_parse_opts(s, strlen(s), &SPANS, &d, &root));
    const nr_jv_t *in = nr_jv_get(root, "inputs");
    ASSERT_TRUE(in != NULL && in->type == NR_JV_ARRAY && in->n == 4);
    const nr_jv_t *d0 = nr_jv_get(&in->u.items[0], "data");
    ASSERT_TRUE(d0 != NULL && d0->type == NR_JV_SPAN);
    EXPECT_TRUE(d0->n == 6 && memcmp(d0->u.str, "[1, 2]", 6) == 0);
    const nr_jv_t *d1 = nr_jv_get(&in->u.items[1], "data"); /* the key unescaped */
    EXPECT_TRUE(d1 != NULL && d1->type == NR_JV_SPAN);
    EXPECT_EQ_INT(nr_jv_get(&in->u.items[2], "data")->type, NR_JV_INT); /* not an array */
    const nr_jv_t *p = nr_jv_get(&in->u.items[3], "parameters");
    EXPECT_EQ_INT(nr_jv_get(p, "data")->type, NR_JV_ARRAY);
    EXPECT_EQ_INT(nr_jv_get(root, "data")->type, NR_JV_ARRAY);
    const nr_jv_t *x = nr_jv_get(nr_jv_get(root, "x"), "inputs");
    EXPECT_EQ_INT(nr_jv_get(&x->u.items[0], "data")->type, NR_JV_ARRAY);
    nr_json_free(d);
}

NR_TEST(leaves_in_document_order)
{
    const char *s = "{\"inputs\":[{\"data\":[[1, -2], [], [[3.5]], \"s\", \"e\\\"\\u00e9\\n\","
                    " {\"k\":[\"]\"],\"j\":{}}, true, false, null, NaN, -Infinity, Inf, "
                    "18446744073709551615, -9223372036854775808, 9223372036854775808, "
                    "-9223372036854775809, 123456789012345678901234, 1e2, [ 7 ] ]}]}";
    nr_json_doc_t *d;
    const nr_jv_t *data;
    ASSERT_OK(parse_spans(s, &d, &data));
    ASSERT_TRUE(data != NULL && data->type == NR_JV_SPAN);
    nr_json_leaves_t it;
    nr_jv_t v;
    nr_json_leaves_init(&it, data);
    const int types[] = {NR_JV_INT,  NR_JV_INT,  NR_JV_REAL, NR_JV_STRING, NR_JV_STRING,
                         NR_JV_OBJECT, NR_JV_TRUE, NR_JV_FALSE, NR_JV_NULL, NR_JV_REAL,
                         NR_JV_REAL, NR_JV_REAL, NR_JV_UINT, NR_JV_INT,    NR_JV_UINT,
                         NR_JV_REAL, NR_JV_REAL, NR_JV_REAL, NR_JV_INT};
    size_t k = 0;
    char buf[16];
    while (nr_json_leaves_next(&it, &v)) {
        ASSERT_TRUE(k < sizeof(types) / sizeof(types[0]));
        EXPECT_EQ_INT(v.type, types[k]);
        switch (k) {
        case 0: EXPECT_EQ_INT(v.u.i, 1); break;
        case 1: EXPECT_EQ_INT(v.u.i, -2); break;
        case 2: EXPECT_EQ_DBL(v.u.d, 3.5); break;
        case 3: EXPECT_TRUE(v.n == 1 && v.u.str[0] == 's' && !it.escaped); break;
        case 4:
            EXPECT_TRUE(it.escaped);
            EXPECT_EQ_INT(nr_json_unescape(v.u.str, v.n, NULL), 5);
            EXPECT_EQ_INT(nr_json_unescape(v.u.str, v.n, buf), 5);
            EXPECT_TRUE(memcmp(buf, "e\"\xc3\xa9\n", 5) == 0);
            break;
        case 9: EXPECT_TRUE(isnan(v.u.d)); break;
        case 10: EXPECT_TRUE(isinf(v.u.d) && v.u.d < 0); break;
        case 11: EXPECT_TRUE(isinf(v.u.d) && v.u.d > 0); break;
        case 12: EXPECT_EQ_U64((uint64_t)v.u.i, UINT64_MAX); break;
        case 13: EXPECT_EQ_INT(v.u.i, INT64_MIN); break;
        case 14: EXPECT_EQ_U64((uint64_t)v.u.i, 9223372036854775808ull); break;
        case 15: EXPECT_EQ_DBL(v.u.d, -9223372036854775809.0); break;
        case 16: EXPECT_EQ_DBL(v.u.d, 123456789012345678901234.0); break;
        case 17: EXPECT_EQ_DBL(v.u.d, 100.0); break;
        case 18: EXPECT_EQ_INT(v.u.i, 7); break;
        default: break;
        }
        k++;
    }
    EXPECT_EQ_INT(k, sizeof(types) / sizeof(types[0]));
    EXPECT_FALSE(nr_json_leaves_next(&it, &v)); /* stays at the end */
    nr_json_free(d);
}

/* A decimal text in one of the forms tensor data takes. */
static void random_number(unsigned long long *x, char *out, size_t cap)
{
    *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
    unsigned long long r = *x;
    double d = (double)(r >> 11) / 9007199254740992.0;
    const char *sign = r & 1 ? "-" : "";
    switch ((r >> 1) % 8) {
    case 0: snprintf(out, cap, "%s%.17g", sign, d); break;                      /* strtod */
    case 1: snprintf(out, cap, "%s%.*f", sign, (int)(r >> 4) % 8, d * 1000); break;
    case 2: snprintf(out, cap, "%s%.*g", sign, 1 + (int)((r >> 4) % 16), d); break;
    case 3: snprintf(out, cap, "%s%.*e", sign, (int)((r >> 4) % 17), d * 1e30); break;
    case 4: snprintf(out, cap, "%s%llu", sign, r >> (r % 64)); break;         /* integers */
    case 5: snprintf(out, cap, "%s%lluE%+d", sign, (r >> 40), (int)((r >> 8) % 60) - 30); break;
    case 6: snprintf(out, cap, "%s0.%016llu", sign, (r >> 8) % 10000000000000000ull); break;
    default: snprintf(out, cap, "%s%llu.%llu", sign, (r >> 50), (r >> 20) % 100000); break;
    }
}

NR_TEST(leaf_numbers_are_strtods)
{
    enum { N = 20000 };
    size_t cap = (size_t)N * 40 + 64, len = 0;
    char *s = malloc(cap);
    char (*texts)[40] = malloc((size_t)N * sizeof(*texts));
    ASSERT_TRUE(s != NULL && texts != NULL);
    len += (size_t)snprintf(s, cap, "{\"inputs\":[{\"data\":[");
    unsigned long long x = 0x9E3779B97F4A7C15ull;
    for (size_t i = 0; i < N; i++) {
        random_number(&x, texts[i], sizeof(texts[i]));
        len += (size_t)snprintf(s + len, cap - len, "%s%s", i ? (i % 3 ? "," : ", ") : "",
                                texts[i]);
    }
    len += (size_t)snprintf(s + len, cap - len, "]}]}");
    nr_json_doc_t *d;
    const nr_jv_t *data;
    nr_status_t *st = parse_spans(s, &d, &data);
    if (EXPECT_OK(st) && EXPECT_NOT_NULL(data)) {
        nr_json_leaves_t it;
        nr_jv_t v;
        nr_json_leaves_init(&it, data);
        size_t k = 0, bad = 0;
        for (; k < N && nr_json_leaves_next(&it, &v); k++) {
            double want = strtod(texts[k], NULL);
            double got = v.type == NR_JV_REAL ? v.u.d
                         : v.type == NR_JV_UINT ? (double)(uint64_t)v.u.i
                                                : (double)v.u.i;
            bool is_int = strpbrk(texts[k], ".eE") == NULL;
            bool same = v.type == NR_JV_REAL ? memcmp(&want, &got, sizeof(double)) == 0
                                             : want == got; /* "-0" is the integer 0 */
            if ((is_int && v.type == NR_JV_REAL && fabs(want) < 9e18) || !same) {
                if (bad++ < 5)
                    nr_test_fail(__FILE__, __LINE__, "%s: got %.17g (type %d), strtod %.17g",
                                 texts[k], got, v.type, want);
            }
        }
        EXPECT_EQ_INT(k, N);
        EXPECT_EQ_INT(bad, 0);
    }
    nr_json_free(d);
    free(texts);
    free(s);
}

NR_TEST_MAIN()
