/* json.h - the JSON reader nereid uses for request bodies and tool inputs: a
 * DOM parser that accepts exactly what Triton's parser (rapidjson with
 * NaN/Inf enabled) accepts and fails with rapidjson's messages and offsets
 * (json.c says why no packaged library does). A document belongs to one
 * thread; nothing here locks.
 */
#ifndef NR_JSON_H
#define NR_JSON_H

#include "status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NR_JV_NULL, NR_JV_FALSE, NR_JV_TRUE,
    NR_JV_INT,  /* fits int64 */
    NR_JV_UINT, /* above INT64_MAX, fits uint64 (bits in u.i) */
    NR_JV_REAL, NR_JV_STRING, NR_JV_ARRAY, NR_JV_OBJECT,
} nr_jv_type_t;

typedef struct nr_jv_s nr_jv_t;
typedef struct nr_jv_member_s nr_jv_member_t;
struct nr_jv_s {
    uint8_t type; /* nr_jv_type_t */
    size_t n;     /* string length, array or object count */
    union {
        int64_t i;
        double d;
        const char *str; /* not NUL-terminated when a view into the input */
        nr_jv_t *items;
        nr_jv_member_t *members;
    } u;
};
struct nr_jv_member_s {
    const char *key;
    size_t key_len;
    nr_jv_t val;
};
typedef struct nr_json_doc_s nr_json_doc_t;

/* Parses buf[0..len) (which must outlive the document: strings may be views).
 * Errors are INVALID_ARG "failed to parse the request JSON buffer: <rapidjson
 * message> at <offset>". */
NR_MUST_CHECK nr_status_t *nr_json_parse(const char *buf, size_t len, nr_json_doc_t **doc,
                                         const nr_jv_t **root);
void nr_json_free(nr_json_doc_t *doc);
/* First member named key of an object; NULL if obj is NULL, not an object or lacks it. */
const nr_jv_t *nr_jv_get(const nr_jv_t *obj, const char *key);

static inline bool nr_jv_is_bool(const nr_jv_t *v)
{
    return v->type == NR_JV_TRUE || v->type == NR_JV_FALSE;
}
static inline bool nr_jv_is_uint(const nr_jv_t *v) /* rapidjson IsUint64 */
{
    return v->type == NR_JV_UINT || (v->type == NR_JV_INT && v->u.i >= 0);
}
static inline bool nr_jv_is_number(const nr_jv_t *v)
{
    return v->type == NR_JV_INT || v->type == NR_JV_UINT || v->type == NR_JV_REAL;
}
static inline double nr_jv_number(const nr_jv_t *v)
{
    return v->type == NR_JV_REAL ? v->u.d
           : v->type == NR_JV_UINT ? (double)(uint64_t)v->u.i
                                   : (double)v->u.i;
}

/* Triton's TritonJson texts for a member of the wrong type, as they follow
 * "Unable to parse '<field>': " in its errors. */
#define NR_TJ_MISSING "attempt to access non-existing object member '%s'"
#define NR_TJ_STRING "attempt to access JSON non-string as string"
#define NR_TJ_ARRAY "attempt to access JSON non-array as array"
#define NR_TJ_UINT "attempt to access JSON non-unsigned-integer as unsigned-integer"
#define NR_TJ_INT "attempt to access JSON non-signed-integer as signed-integer"
#define NR_TJ_BOOL "attempt to access JSON non-boolean as boolean"
#define NR_TJ_DOUBLE "attempt to access JSON non-number as double"

#endif
