/* test_http.c - the HTTP frontend without sockets: the request JSON reader
 * (rapidjson's messages), infer bodies -> nr_req_t (JSON, binary, raw) with
 * Triton's error texts, the response encoder (key order, number formatting,
 * binary layout), classification, and compression.
 */
#include "../../src/common/alloc.h"
#include "../../src/common/log.h"
#include "../../src/frontends/http/http_int.h"
#include "fake_model.h"
#include "nr_test.h"
#include "params.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

/* ---- a model without a backend: only what parsing and encoding read ---- */

static const char *SIMPLE =
    "name: \"simple\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n";

static const char *IDENT =
    "name: \"identity_fp32\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n";

static nr_model_t *fake_model(const char *pbtxt)
{
    return nr_fake_model(pbtxt, false);
}

static void fake_free(nr_model_t *m)
{
    nr_fake_model_free(m);
}

/* Parses body (copied) with an optional Inference-Header-Content-Length. */
static nr_status_t *parse(nr_model_t *m, const char *body, size_t len, const char *ihcl,
                          nr_http_infer_t **out)
{
    nr_http_infer_t *inf = nr_calloc(1, sizeof(*inf));
    char *copy = nr_malloc(len ? len : 1);
    memcpy(copy, body, len);
    *out = inf;
    return nr_http_infer_parse(inf, NULL, m, copy, len, ihcl);
}

static nr_status_t *parse_str(nr_model_t *m, const char *json)
{
    nr_http_infer_t *inf;
    nr_status_t *st = parse(m, json, strlen(json), NULL, &inf);
    nr_http_infer_free(inf);
    return st;
}

#define GOOD_IN0 "{\"name\":\"INPUT0\",\"shape\":[1,16],\"datatype\":\"INT32\",\"data\":[0,1,2,3,4,5,6,7,8,9,10,11,12,13,14,15]}"
#define GOOD_IN1 "{\"name\":\"INPUT1\",\"shape\":[1,16],\"datatype\":\"INT32\",\"data\":[1,1,1,1,1,1,1,1,1,1,1,1,1,1,1,1]}"

/* ---- the JSON reader ---------------------------------------------------- */

static nr_status_t *jparse(const char *s)
{
    nr_json_doc_t *d;
    const nr_jv_t *r;
    nr_status_t *st = nr_json_parse(s, strlen(s), &d, &r);
    nr_json_free(d);
    return st;
}

NR_TEST(json_errors_are_rapidjsons)
{
    EXPECT_STATUS(jparse("{\"ready\":"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Invalid value. at 9");
    EXPECT_STATUS(jparse("{\"inputs\": ["), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Invalid value. at 12");
    EXPECT_STATUS(jparse("hello"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Invalid value. at 0");
    EXPECT_STATUS(jparse("{\"inputs\":[{\"name\":\"I"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Missing a closing quotation mark in "
                  "string. at 21");
    EXPECT_STATUS(jparse("  "), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: The document is empty. at 2");
    EXPECT_STATUS(jparse("{} x"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: The document root must not be "
                  "followed by other values. at 3");
    EXPECT_STATUS(jparse("{\"a\" 1}"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Missing a colon after a name of "
                  "object member. at 5");
    EXPECT_STATUS(jparse("[1 2]"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Missing a comma or ']' after an "
                  "array element. at 3");
    EXPECT_STATUS(jparse("{\"a\":1 \"b\":2}"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Missing a comma or '}' after an "
                  "object member. at 7");
    EXPECT_STATUS(jparse("{1:2}"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Missing a name for object member. at 1");
    EXPECT_STATUS(jparse("[1.]"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Miss fraction part in number. at 3");
    EXPECT_STATUS(jparse("[1e+]"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Miss exponent in number. at 4");
    EXPECT_STATUS(jparse("[\"\\x\"]"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Invalid escape character in string. at 2");
    EXPECT_STATUS(jparse("[1e400]"), NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Number too big to be stored in "
                  "double. at 1");
    char deep[1200];
    memset(deep, '[', sizeof(deep) - 1);
    deep[sizeof(deep) - 1] = '\0';
    EXPECT_STATUS(jparse(deep), NR_INVALID_ARG, NULL);
}

NR_TEST(json_values)
{
    const char *s = "{\"a\":[NaN,-Infinity,Inf,18446744073709551615,-9223372036854775808,"
                    "1.5,\"x\\u00e9\\ud83d\\ude00\\u0000y\",true,null],\"a\":2,\"k\\\"\":{}}";
    nr_json_doc_t *d;
    const nr_jv_t *r;
    ASSERT_OK(nr_json_parse(s, strlen(s), &d, &r));
    const nr_jv_t *a = nr_jv_get(r, "a"); /* the first of duplicates */
    ASSERT_TRUE(a != NULL && a->type == NR_JV_ARRAY && a->n == 9);
    EXPECT_TRUE(isnan(a->u.items[0].u.d));
    EXPECT_TRUE(isinf(a->u.items[1].u.d) && a->u.items[1].u.d < 0);
    EXPECT_TRUE(isinf(a->u.items[2].u.d) && a->u.items[2].u.d > 0);
    EXPECT_EQ_INT(a->u.items[3].type, NR_JV_UINT);
    EXPECT_EQ_U64((uint64_t)a->u.items[3].u.i, UINT64_MAX);
    EXPECT_TRUE(nr_jv_is_uint(&a->u.items[3]));
    EXPECT_EQ_INT(a->u.items[4].type, NR_JV_INT);
    EXPECT_EQ_INT(a->u.items[4].u.i, INT64_MIN);
    EXPECT_FALSE(nr_jv_is_uint(&a->u.items[4]));
    EXPECT_EQ_DBL(a->u.items[5].u.d, 1.5);
    EXPECT_EQ_INT(a->u.items[6].n, 9); /* x + 2 + 4 + NUL + y */
    EXPECT_TRUE(memcmp(a->u.items[6].u.str, "x\xc3\xa9\xf0\x9f\x98\x80\0y", 9) == 0);
    EXPECT_EQ_INT(a->u.items[7].type, NR_JV_TRUE);
    EXPECT_EQ_INT(a->u.items[8].type, NR_JV_NULL);
    EXPECT_NOT_NULL(nr_jv_get(r, "k\""));
    EXPECT_NULL(nr_jv_get(a, "a"));
    nr_json_free(d);
}

/* ---- infer request parsing ------------------------------------------------ */

NR_TEST(infer_json_inputs)
{
    nr_model_t *m = fake_model(SIMPLE);
    ASSERT_NOT_NULL(m);
    const char *b = "{\"id\":\"r7\",\"parameters\":{\"priority\":3,\"timeout\":99,\"x\":1.5},"
                    "\"inputs\":[" GOOD_IN1 "," GOOD_IN0 "],"
                    "\"outputs\":[{\"name\":\"OUTPUT1\",\"parameters\":{\"binary_data\":true}}]}";
    nr_http_infer_t *inf;
    EXPECT_OK(parse(m, b, strlen(b), NULL, &inf));
    nr_req_t *req = inf->base.req;
    EXPECT_STREQ(req->id, "r7");
    EXPECT_EQ_INT(req->priority, 3);
    EXPECT_EQ_U64(req->timeout_us, 99);
    ASSERT_TRUE(req->present[0] && req->present[1]);
    EXPECT_EQ_INT(req->inputs[0].size, 64);
    int32_t v;
    memcpy(&v, (const char *)req->inputs[0].data + 15 * 4, 4);
    EXPECT_EQ_INT(v, 15);
    EXPECT_EQ_INT(req->n_want, 1);
    EXPECT_TRUE(inf->base.listed[0] && inf->binary[0]);
    EXPECT_TRUE(!inf->base.listed[1] && !inf->binary[1]);
    nr_http_infer_free(inf);
    fake_free(m);
}

NR_TEST(infer_binary_inputs_are_views)
{
    nr_model_t *m = fake_model(SIMPLE);
    ASSERT_NOT_NULL(m);
    const char *h = "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],\"datatype\":\"INT32\","
                    "\"parameters\":{\"binary_data_size\":64}}," GOOD_IN1 "],"
                    "\"parameters\":{\"binary_data_output\":true}}";
    size_t hl = strlen(h);
    char body[1024];
    memcpy(body, h, hl);
    for (int i = 0; i < 16; i++) {
        int32_t x = 100 + i;
        memcpy(body + hl + i * 4, &x, 4);
    }
    char ihcl[16];
    snprintf(ihcl, sizeof(ihcl), "%zu", hl);
    nr_http_infer_t *inf;
    ASSERT_OK(parse(m, body, hl + 64, ihcl, &inf));
    EXPECT_TRUE(inf->base.req->inputs[0].data == inf->body + hl);
    EXPECT_TRUE(inf->default_binary);
    nr_http_infer_free(inf);

    /* 10 bytes short, then 10 too many */
    EXPECT_STATUS(parse(m, body, hl + 54, ihcl, &inf), NR_INVALID_ARG,
                  "unexpected size for input 'INPUT0', expecting 10 additional bytes for model "
                  "'simple'");
    nr_http_infer_free(inf);
    char big[1100];
    memcpy(big, body, hl + 64);
    memset(big + hl + 64, 0, 10);
    EXPECT_STATUS(parse(m, big, hl + 74, ihcl, &inf), NR_INVALID_ARG,
                  "unexpected additional input data for model 'simple'");
    nr_http_infer_free(inf);
    EXPECT_STATUS(parse(m, body, hl + 64, "9999", &inf), NR_INVALID_ARG,
                  "inference header size should be in range (0, 299), got: 9999");
    nr_http_infer_free(inf);
    EXPECT_STATUS(parse(m, body, hl + 64, "-5", &inf), NR_INVALID_ARG,
                  "inference header size should be in range (0, 299), got: -5");
    nr_http_infer_free(inf);
    fake_free(m);
}

NR_TEST(infer_parse_errors)
{
    nr_model_t *m = fake_model(SIMPLE);
    ASSERT_NOT_NULL(m);
    EXPECT_STATUS(parse_str(m, "null"), NR_INVALID_ARG,
                  "Unable to parse 'inputs': attempt to access non-existing object member 'inputs'");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":{}}"), NR_INVALID_ARG,
                  "Unable to parse 'inputs': attempt to access JSON non-array as array");
    EXPECT_STATUS(parse_str(m, "{\"id\":42,\"inputs\":[]}"), NR_INVALID_ARG,
                  "Unable to parse 'id': attempt to access JSON non-string as string");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],"
                               "\"datatype\":\"FLOAT32\",\"data\":[1]}]}"),
                  NR_INVALID_ARG, "invalid datatype for input INPUT0");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,-16],"
                               "\"datatype\":\"INT32\",\"data\":[1]}]}"),
                  NR_INVALID_ARG,
                  "Unable to parse 'shape': attempt to access JSON non-unsigned-integer as "
                  "unsigned-integer");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],"
                               "\"datatype\":\"INT32\"}]}"),
                  NR_INVALID_ARG,
                  "Input must set only one of the following fields: 'data', 'binary_data_size' "
                  "in 'parameters', 'shared_memory_region' in 'parameters'. But no field is set");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],"
                               "\"datatype\":\"INT32\",\"data\":[1],"
                               "\"parameters\":{\"binary_data_size\":64}}]}"),
                  NR_INVALID_ARG,
                  "Input must set only one of the following fields: 'data', 'binary_data_size' "
                  "in 'parameters', 'shared_memory_region' in 'parameters'. But set 'data' "
                  "'binary_data_size'");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,16],"
                               "\"datatype\":\"INT32\",\"data\":[1,2]}]}"),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': Shape does not match true shape of 'data' field");
    /* 2^32 x 16 elements: refused before anything is allocated */
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[4294967296,16],"
                               "\"datatype\":\"INT32\",\"data\":[1,2]}]}"),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': Shape does not match true shape of 'data' field");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,1],"
                               "\"datatype\":\"INT32\",\"data\":[1.5]}]}"),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': attempt to access JSON non-signed-integer as "
                  "signed-integer");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,1],"
                               "\"datatype\":\"INT32\",\"data\":[4294967296]}]}"),
                  NR_INVALID_ARG, "Unable to parse 'data': value 4294967296 is out of range for INT32");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[{\"name\":\"INPUT0\",\"shape\":[1,2],"
                               "\"datatype\":\"FP16\",\"data\":[1,2]}]}"),
                  NR_INVALID_ARG,
                  "receiving FP16 data via JSON is not supported. Please use the binary data "
                  "format for input INPUT0");
    EXPECT_STATUS(parse_str(m, "{\"parameters\":{\"triton_x\":1},\"inputs\":[]}"), NR_INVALID_ARG,
                  "parameter keys starting with 'triton_' are reserved for Triton usage and should "
                  "not be specified.");
    EXPECT_STATUS(parse_str(m, "{\"parameters\":{\"foo\":null},\"inputs\":[]}"), NR_INVALID_ARG,
                  "parameter 'foo' has invalid type. It should be either 'int', 'bool', or "
                  "'string'.");
    EXPECT_STATUS(parse_str(m, "{\"parameters\":{\"priority\":\"1\"},\"inputs\":[]}"),
                  NR_INVALID_ARG,
                  "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as "
                  "unsigned-integer");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[],\"outputs\":[{\"name\":\"OUTPUT9\"}]}"),
                  NR_INVALID_ARG, "unexpected inference output 'OUTPUT9' for model 'simple'");
    EXPECT_STATUS(parse_str(m, "{\"inputs\":[],\"outputs\":[{\"name\":\"OUTPUT0\","
                               "\"parameters\":{\"classification\":\"2\"}}]}"),
                  NR_INVALID_ARG,
                  "Unable to set 'classification': attempt to access JSON non-unsigned-integer "
                  "as unsigned-integer");
    nr_http_infer_t *inf;
    EXPECT_STATUS(parse(m, "", 0, NULL, &inf), NR_INVALID_ARG,
                  "[request id: <id_unknown>] Raw request must only have 1 input (found 1) to be "
                  "deduced but got 2 inputs in 'simple' model configuration");
    nr_http_infer_free(inf);
    fake_free(m);
}

/* One input of identity_fp32 (whose config the parser does not check the
 * datatype against) with `fields` around its data; its bytes into out. */
static nr_status_t *one_input(nr_model_t *m, const char *fields, void *out, size_t *size)
{
    char body[2048];
    snprintf(body, sizeof(body), "{\"inputs\":[{\"name\":\"INPUT0\",%s}]}", fields);
    nr_http_infer_t *inf;
    nr_status_t *st = parse(m, body, strlen(body), NULL, &inf);
    if (st == NULL) {
        const nr_tensor_t *t = &inf->base.req->inputs[0];
        *size = t->size;
        if (t->size <= 256)
            memcpy(out, t->data, t->size);
    }
    nr_http_infer_free(inf);
    return st;
}

NR_TEST(infer_json_data_into_the_tensor)
{
    nr_model_t *m = fake_model(IDENT);
    ASSERT_NOT_NULL(m);
    unsigned char b[256];
    size_t n;
    float f[4];
    /* nested, with the datatype and shape after the data */
    ASSERT_OK(one_input(m, "\"data\":[[1, 2.5], [[]], [-3e0, 4E-1]],\"shape\":[2,2],"
                           "\"datatype\":\"FP32\"",
                        b, &n));
    EXPECT_EQ_INT(n, 16);
    memcpy(f, b, 16);
    EXPECT_TRUE(f[0] == 1.0f && f[1] == 2.5f && f[2] == -3.0f && f[3] == 0.4f);
    double d[2];
    ASSERT_OK(one_input(m, "\"datatype\":\"FP64\",\"shape\":[2],\"data\":[0.1, 1e-300]", b, &n));
    memcpy(d, b, 16);
    EXPECT_TRUE(n == 16 && d[0] == 0.1 && d[1] == 1e-300);
    ASSERT_OK(one_input(m, "\"datatype\":\"BOOL\",\"shape\":[3],\"data\":[true,[false],true]", b,
                        &n));
    EXPECT_TRUE(n == 3 && b[0] == 1 && b[1] == 0 && b[2] == 1);
    int64_t i64[2];
    ASSERT_OK(one_input(m, "\"datatype\":\"INT64\",\"shape\":[2],"
                           "\"data\":[-9223372036854775808,9223372036854775807]",
                        b, &n));
    memcpy(i64, b, 16);
    EXPECT_TRUE(i64[0] == INT64_MIN && i64[1] == INT64_MAX);
    uint64_t u64;
    ASSERT_OK(one_input(m, "\"datatype\":\"UINT64\",\"shape\":[1],\"data\":[18446744073709551615]",
                        b, &n));
    memcpy(&u64, b, 8);
    EXPECT_EQ_U64(u64, UINT64_MAX);
    ASSERT_OK(one_input(m, "\"datatype\":\"INT8\",\"shape\":[2],\"data\":[-128,127]", b, &n));
    EXPECT_TRUE(n == 2 && (int8_t)b[0] == -128 && b[1] == 127);
    /* BYTES: 4-byte lengths, escapes decoded, nested arrays flattened */
    ASSERT_OK(one_input(m, "\"datatype\":\"BYTES\",\"shape\":[3],"
                           "\"data\":[\"ab\",[\"\"],\"\\u00e9\\\\\\u0000\"]",
                        b, &n));
    static const unsigned char want[] = {2, 0, 0, 0, 'a', 'b', 0, 0, 0, 0,
                                         4, 0, 0, 0, 0xc3, 0xa9, '\\', 0};
    EXPECT_TRUE(n == sizeof(want) && memcmp(b, want, sizeof(want)) == 0);
    /* Triton's errors, in Triton's order */
    EXPECT_STATUS(one_input(m, "\"datatype\":\"BYTES\",\"shape\":[2],\"data\":[\"a\",1]", b, &n),
                  NR_INVALID_ARG,
                  "Unable to parse JSON bytes array: attempt to access JSON non-string as string");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"FP32\",\"shape\":[2],\"data\":[1,{\"a\":[2]}]", b,
                            &n),
                  NR_INVALID_ARG, "Unable to parse 'data': attempt to access JSON non-number as "
                                  "double");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"BOOL\",\"shape\":[1],\"data\":[1]", b, &n),
                  NR_INVALID_ARG, "Unable to parse 'data': attempt to access JSON non-boolean as "
                                  "boolean");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"UINT8\",\"shape\":[1],\"data\":[-1]", b, &n),
                  NR_INVALID_ARG, "Unable to parse 'data': attempt to access JSON "
                                  "non-unsigned-integer as unsigned-integer");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"UINT16\",\"shape\":[1],\"data\":[65536]", b, &n),
                  NR_INVALID_ARG, "Unable to parse 'data': value 65536 is out of range for UINT16");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"INT16\",\"shape\":[1],\"data\":[-32769]", b, &n),
                  NR_INVALID_ARG, "Unable to parse 'data': value -32769 is out of range for INT16");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"INT64\",\"shape\":[1],"
                               "\"data\":[9223372036854775808]",
                            b, &n),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': value 9223372036854775808 is out of range for INT64");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"INT32\",\"shape\":[1],\"data\":[1e2]", b, &n),
                  NR_INVALID_ARG, "Unable to parse 'data': attempt to access JSON "
                                  "non-signed-integer as signed-integer");
    /* the count is checked before the type: the third element is one too many */
    EXPECT_STATUS(one_input(m, "\"datatype\":\"FP32\",\"shape\":[2],\"data\":[[1,2],[\"x\"]]", b,
                            &n),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': Shape does not match true shape of 'data' field");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"FP32\",\"shape\":[3],\"data\":[[1],[2]]", b, &n),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': Shape does not match true shape of 'data' field");
    EXPECT_STATUS(one_input(m, "\"datatype\":\"FP32\",\"shape\":[1],\"data\":\"1\"", b, &n),
                  NR_INVALID_ARG,
                  "Unable to parse 'data': attempt to access JSON non-array as array");
    /* a JSON error inside `data` wins over the errors before it (the id) */
    EXPECT_STATUS(parse_str(m, "{\"id\":1,\"inputs\":[{\"name\":\"INPUT0\",\"datatype\":\"FP32\","
                               "\"shape\":[1],\"data\":[1e999]}]}"),
                  NR_INVALID_ARG,
                  "failed to parse the request JSON buffer: Number too big to be stored in "
                  "double. at 73");
    fake_free(m);
}

NR_TEST(infer_raw_request)
{
    nr_model_t *m = fake_model(IDENT);
    ASSERT_NOT_NULL(m);
    float x[4] = {1, 2, 3, 4};
    nr_http_infer_t *inf;
    ASSERT_OK(parse(m, (const char *)x, sizeof(x), "0", &inf));
    EXPECT_TRUE(inf->raw && inf->default_binary);
    EXPECT_EQ_INT(inf->base.req->inputs[0].ndim, 2);
    EXPECT_EQ_INT(inf->base.req->inputs[0].dims[0], 1);
    EXPECT_EQ_INT(inf->base.req->inputs[0].dims[1], 4);
    nr_http_infer_free(inf);
    EXPECT_STATUS(parse(m, "abc", 3, "0", &inf), NR_INVALID_ARG,
                  "[request id: <id_unknown>] input byte size mismatch for input 'raw_input' for "
                  "model 'identity_fp32'. Expected 0, got 3");
    nr_http_infer_free(inf);
    fake_free(m);
}

/* ---- encoding -------------------------------------------------------------- */

static void set_output(nr_req_t *req, size_t i, uint32_t cfg_idx, nr_dtype_t dt, const void *data,
                       size_t size, int64_t d0, int64_t d1)
{
    req->want[i] = cfg_idx;
    req->outputs[i].name = req->model->cfg->output[cfg_idx].name; /* a backend names what it returns */
    req->outputs[i].dtype = dt;
    req->outputs[i].ndim = 2;
    req->outputs[i].dims[0] = d0;
    req->outputs[i].dims[1] = d1;
    req->outputs[i].data = data;
    req->outputs[i].size = size;
}

static char *flatten(const nr_http_resp_t *r, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    for (size_t i = 0; i < r->n_iov; i++)
        nr_buf_append(&b, r->iov[i].iov_base, r->iov[i].iov_len);
    return nr_buf_steal(&b, len);
}

NR_TEST(encode_json_and_binary)
{
    nr_model_t *m = fake_model(SIMPLE);
    ASSERT_NOT_NULL(m);
    const char *b = "{\"id\":\"q\",\"inputs\":[],\"outputs\":[{\"name\":\"OUTPUT1\","
                    "\"parameters\":{\"binary_data\":true}},{\"name\":\"OUTPUT0\"}]}";
    nr_http_infer_t *inf;
    ASSERT_OK(parse(m, b, strlen(b), NULL, &inf));
    int32_t o0[2] = {-1, 7}, o1[2] = {5, 6};
    nr_req_t *req = inf->base.req;
    /* the core reports outputs in any order: the encoder sorts them by name */
    set_output(req, 0, 0, NR_TYPE_INT32, o1, 8, 1, 2); /* OUTPUT1 */
    set_output(req, 1, 1, NR_TYPE_INT32, o0, 8, 1, 2); /* OUTPUT0 */
    nr_http_resp_t r;
    nr_http_resp_init(&r);
    ASSERT_OK(nr_http_infer_encode(inf, &r));
    const char *hdr = "{\"id\":\"q\",\"model_name\":\"simple\",\"model_version\":\"1\",\"outputs\":["
                      "{\"name\":\"OUTPUT0\",\"datatype\":\"INT32\",\"shape\":[1,2],\"data\":[-1,7]},"
                      "{\"name\":\"OUTPUT1\",\"datatype\":\"INT32\",\"shape\":[1,2],"
                      "\"parameters\":{\"binary_data_size\":8}}]}";
    EXPECT_STREQ(r.content_type, "application/octet-stream");
    EXPECT_TRUE(r.has_infer_header_len);
    EXPECT_EQ_U64(r.infer_header_len, strlen(hdr));
    size_t len;
    char *all = flatten(&r, &len);
    EXPECT_EQ_U64(len, strlen(hdr) + 8);
    EXPECT_TRUE(memcmp(all, hdr, strlen(hdr)) == 0);
    EXPECT_TRUE(memcmp(all + strlen(hdr), o1, 8) == 0);
    free(all);

    /* and compressed: gunzip gives the same bytes back */
    nr_buf_t z;
    nr_buf_init(&z);
    ASSERT_OK(nr_http_deflate(NR_ENC_GZIP, r.iov, r.n_iov, &z));
    char *plain;
    size_t plen;
    ASSERT_OK(nr_http_inflate(z.data, z.len, 1 << 20, 0, &plain, &plen));
    EXPECT_EQ_U64(plen, strlen(hdr) + 8);
    free(plain);
    nr_buf_free(&z);
    req->n_want = 0; /* outputs are not held: nothing for nr_req_free to release */
    free(r.iov);
    nr_http_infer_free(inf);
    fake_free(m);
}

NR_TEST(encode_numbers_and_fp16)
{
    nr_model_t *m = fake_model(IDENT);
    ASSERT_NOT_NULL(m);
    nr_http_infer_t *inf;
    ASSERT_OK(parse(m, "{\"inputs\":[]}", 13, NULL, &inf));
    float v[4] = {0.1f, 100.0f, -0.0f, 1e-7f};
    inf->base.req->n_want = 1;
    set_output(inf->base.req, 0, 0, NR_TYPE_FP32, v, sizeof(v), 1, 4);
    nr_http_resp_t r;
    nr_http_resp_init(&r);
    ASSERT_OK(nr_http_infer_encode(inf, &r));
    EXPECT_STREQ(r.content_type, "application/json");
    EXPECT_FALSE(r.has_infer_header_len);
    EXPECT_STREQ(inf->header.data,
                 "{\"model_name\":\"identity_fp32\",\"model_version\":\"1\",\"outputs\":[{\"name\":"
                 "\"OUTPUT0\",\"datatype\":\"FP32\",\"shape\":[1,4],\"data\":[0.10000000149011612,"
                 "100.0,-0.0,1.0000000116860974e-7]}]}");
    free(r.iov);
    uint16_t h[2] = {0x3c00, 0x4000};
    set_output(inf->base.req, 0, 0, NR_TYPE_FP16, h, sizeof(h), 1, 2);
    nr_http_resp_init(&r);
    EXPECT_STATUS(nr_http_infer_encode(inf, &r), NR_INVALID_ARG,
                  "sending FP16 data via JSON is not supported. Please use the binary data format "
                  "for output");
    inf->base.req->n_want = 0;
    nr_http_infer_free(inf);
    fake_free(m);
}

/* ---- numbers as Triton prints them ----------------------------------------- */

static void expect_double(double v, const char *want)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_double(&b, v);
    EXPECT_STREQ(b.data, want);
    nr_buf_free(&b);
}

NR_TEST(doubles_like_rapidjson)
{
    expect_double((double)0.1f, "0.10000000149011612");
    expect_double((double)3.4028234663852886e38f, "3.4028234663852887e38"); /* FLT_MAX */
    expect_double((double)0.3f, "0.30000001192092898");
    expect_double((double)1e-7f, "1.0000000116860974e-7");
    expect_double((double)1e-45f, "1.401298464324817e-45");
    expect_double(100.0, "100.0");
    expect_double(1e10, "10000000000.0");
    expect_double(123456792.0, "123456792.0");
    expect_double(-0.0, "-0.0");
    expect_double(0.0025, "0.0025");
    expect_double(1e21, "1e21");
    expect_double(1.5e300, "1.5e300");
    expect_double(5e-324, "5e-324");
    expect_double(1.7456232591108475e80, "1.7456232591108475e80");
    expect_double(NAN, "NaN");
    expect_double(-INFINITY, "-Infinity");
    /* whatever the digits, they read back to the same double */
    uint64_t x = 88172645463325252ull;
    for (int i = 0; i < 200000; i++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        double v;
        memcpy(&v, &x, 8);
        if (!isfinite(v))
            continue;
        nr_buf_t b;
        nr_buf_init(&b);
        nr_buf_double(&b, v);
        if (strtod(b.data, NULL) != v) {
            EXPECT_STREQ(b.data, "(round trip)");
            nr_buf_free(&b);
            break;
        }
        nr_buf_free(&b);
    }
}

/* ---- compression ----------------------------------------------------------- */

NR_TEST(compression)
{
    EXPECT_EQ_INT(nr_http_request_encoding(NULL), NR_ENC_IDENTITY);
    EXPECT_EQ_INT(nr_http_request_encoding("identity"), NR_ENC_IDENTITY);
    EXPECT_EQ_INT(nr_http_request_encoding("gzip"), NR_ENC_GZIP);
    EXPECT_EQ_INT(nr_http_request_encoding("deflate"), NR_ENC_DEFLATE);
    EXPECT_EQ_INT(nr_http_request_encoding("GZIP"), NR_ENC_UNKNOWN);
    EXPECT_EQ_INT(nr_http_request_encoding("br"), NR_ENC_UNKNOWN);
    EXPECT_EQ_INT(nr_http_response_encoding("gzip, deflate"), NR_ENC_GZIP);
    EXPECT_EQ_INT(nr_http_response_encoding("deflate;q=0.5, gzip;q=0.9"), NR_ENC_GZIP);
    EXPECT_EQ_INT(nr_http_response_encoding("gzip;q=0.5"), NR_ENC_GZIP);
    EXPECT_EQ_INT(nr_http_response_encoding("br"), NR_ENC_IDENTITY);
    EXPECT_EQ_INT(nr_http_response_encoding("identity, gzip;q=0.5"), NR_ENC_IDENTITY);
    EXPECT_EQ_INT(nr_http_response_encoding("gzip;q=0"), NR_ENC_IDENTITY);

    /* zlib-wrapped (Python's zlib.compress) is auto-detected too */
    char src[4000];
    for (size_t i = 0; i < sizeof(src); i++)
        src[i] = (char)('a' + i % 7);
    unsigned char z[8000];
    uLongf zl = sizeof(z);
    ASSERT_TRUE(compress(z, &zl, (const Bytef *)src, sizeof(src)) == Z_OK);
    char *out;
    size_t ol;
    ASSERT_OK(nr_http_inflate((const char *)z, zl, 1 << 20, 0, &out, &ol));
    EXPECT_EQ_U64(ol, sizeof(src));
    EXPECT_TRUE(memcmp(out, src, ol) == 0);
    free(out);
    /* the result after a lead of unused bytes, as an infer body wants it */
    ASSERT_OK(nr_http_inflate((const char *)z, zl, 1 << 20, 10, &out, &ol));
    EXPECT_EQ_U64(ol, sizeof(src));
    EXPECT_TRUE(memcmp(out + 10, src, ol) == 0);
    free(out);
    /* a bomb stops at the limit; garbage is an error, not an empty body */
    EXPECT_STATUS(nr_http_inflate((const char *)z, zl, 1000, 0, &out, &ol), NR_INVALID_ARG,
                  NULL);
    EXPECT_NULL(out);
    EXPECT_STATUS(nr_http_inflate("not gzip", 8, 1000, 0, &out, &ol), NR_INVALID_ARG,
                  "failed to decompress the request body: incorrect header check");
    EXPECT_STATUS(nr_http_inflate((const char *)z, zl / 2, 1 << 20, 0, &out, &ol),
                  NR_INVALID_ARG, "failed to decompress the request body: unexpected end of data");
}

/* ---- body placement --------------------------------------------------------- */

NR_TEST(body_lead_aligns_the_binary_data)
{
    EXPECT_EQ_U64(nr_http_body_lead(NULL), 0);
    EXPECT_EQ_U64(nr_http_body_lead("0"), 0);
    EXPECT_EQ_U64(nr_http_body_lead("not a number"), 0); /* refused later by the handler */
    EXPECT_EQ_U64(nr_http_body_lead("160"), 0);
    EXPECT_EQ_U64(nr_http_body_lead("166"), 10);
    for (unsigned h = 1; h < 64; h++) {
        char v[8];
        snprintf(v, sizeof(v), "%u", h);
        size_t lead = nr_http_body_lead(v);
        EXPECT_TRUE(lead < 16 && (lead + h) % 16 == 0);
    }
}

NR_TEST(params_http_texts)
{
    nr_model_t *m = fake_model(SIMPLE);
    ASSERT_NOT_NULL(m);
    nr_infer_t inf = {0};
    nr_infer_init(&inf, NULL, m, NULL);
    nr_param_t p = p_int("priority", 3);
    EXPECT_OK(nr_http_check_param(&inf, &p));
    EXPECT_EQ_INT(inf.req->priority, 3);
    p = p_uint("priority", UINT64_MAX); /* clamped to the core's range */
    EXPECT_OK(nr_http_check_param(&inf, &p));
    EXPECT_EQ_U64(inf.req->priority, UINT32_MAX);
    p = p_int("timeout", 99);
    EXPECT_OK(nr_http_check_param(&inf, &p));
    EXPECT_EQ_U64(inf.req->timeout_us, 99);
    p = p_int("priority", -1);
    EXPECT_STATUS(nr_http_check_param(&inf, &p), NR_INVALID_ARG,
                  "Unable to parse 'priority': attempt to access JSON non-unsigned-integer as "
                  "unsigned-integer");
    p = p_str("timeout", "5");
    EXPECT_STATUS(nr_http_check_param(&inf, &p), NR_INVALID_ARG,
                  "Unable to parse 'timeout': attempt to access JSON non-unsigned-integer as "
                  "unsigned-integer");
    p = p_int("sequence_id", -2);
    EXPECT_STATUS(nr_http_check_param(&inf, &p), NR_INVALID_ARG,
                  "Unable to parse 'sequence_id': attempt to access JSON non-string as string");
    p = p_str("sequence_start", "yes");
    EXPECT_STATUS(nr_http_check_param(&inf, &p), NR_INVALID_ARG,
                  "Unable to parse 'sequence_start': attempt to access JSON non-boolean as "
                  "boolean");
    p = p_bool("triton_enable_empty_final_response", true);
    EXPECT_STATUS(nr_http_check_param(&inf, &p), NR_INVALID_ARG,
                  "parameter keys starting with 'triton_' are reserved for Triton usage and "
                  "should not be specified.");
    p = p_other("custom");
    EXPECT_STATUS(nr_http_check_param(&inf, &p), NR_INVALID_ARG,
                  "parameter 'custom' has invalid type. It should be either 'int', 'bool', or "
                  "'string'.");
    p = p_str("custom", "x");
    EXPECT_OK(nr_http_check_param(&inf, &p));
    nr_infer_release(&inf);
    fake_free(m);
}

/* A logging update as its JSON body, read by the HTTP frontend's reader. */
static nr_status_t *log_update_json(const char *json)
{
    nr_json_doc_t *d;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(json, strlen(json), &d, &root);
    if (st == NULL)
        st = nr_kserve_log_update(&nr_http_log_reader, (void *)root);
    nr_json_free(d);
    return st;
}

NR_TEST(log_update_texts_http)
{
    nr_log_settings_t saved;
    memcpy(&saved, &nr_log_settings, sizeof(saved));
    EXPECT_STATUS(log_update_json("{\"log_format\":\"xml\"}"), NR_UNAVAILABLE,
                  "invalid argument for --log_format, got: xml");
    EXPECT_STATUS(log_update_json("{\"log_warning\":\"no\"}"), NR_INTERNAL,
                  "attempt to access JSON non-boolean as boolean");
    EXPECT_STATUS(log_update_json("{\"log_verbose_level\":-3}"), NR_INTERNAL,
                  "attempt to access JSON non-unsigned-integer as unsigned-integer");
    EXPECT_STATUS(log_update_json("{\"log_format\":true}"), NR_INTERNAL,
                  "attempt to access JSON non-string as string");
    EXPECT_OK(log_update_json("{\"log_info\":null,\"log_verbose_level\":2}")); /* null: unset */
    EXPECT_EQ_INT(nr_log_settings.verbose, 2);
    EXPECT_EQ_INT(nr_log_settings.info, saved.info);
    memcpy(&nr_log_settings, &saved, sizeof(saved));
}

NR_TEST_MAIN()
