/* json.h - the JSON reader nereid uses for request bodies and tool inputs: a
 * DOM parser that accepts exactly what Triton's parser (rapidjson with
 * NaN/Inf enabled) accepts and fails with rapidjson's messages and offsets
 * (json.c says why no packaged library does). Arrays the caller names can be
 * left as validated text (spans) and read later leaf by leaf, so that tensor
 * data costs no memory per value. A document belongs to one thread; nothing
 * here locks.
 */
#ifndef NR_JSON_H
#define NR_JSON_H

#include "buf.h"
#include "status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NR_JV_NULL, NR_JV_FALSE, NR_JV_TRUE,
    NR_JV_INT,  /* fits int64 */
    NR_JV_UINT, /* above INT64_MAX, fits uint64 (bits in u.i) */
    NR_JV_REAL, NR_JV_STRING, NR_JV_ARRAY, NR_JV_OBJECT,
    NR_JV_SPAN, /* an array kept as its text (nr_json_opts_t): u.str at its '[', n bytes
                   through its ']'; valid JSON, read with nr_json_leaves_* */
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

/* Which arrays to keep as spans: the value of member `key` of each element
 * of the root object's member `list` (an infer request's inputs[i].data),
 * when that value is an array. It is validated like any value (the same
 * errors at the same offsets) but no value of it is built. */
typedef struct {
    const char *list, *key;
} nr_json_opts_t;

/* Parses buf[0..len) (which must outlive the document: strings and spans are
 * views). Errors are INVALID_ARG "failed to parse the request JSON buffer:
 * <rapidjson message> at <offset>", or UNAVAILABLE when memory for the
 * document cannot be allocated. opts may be NULL (every value built). */
NR_MUST_CHECK nr_status_t *nr_json_parse_opts(const char *buf, size_t len,
                                              const nr_json_opts_t *opts, nr_json_doc_t **doc,
                                              const nr_jv_t **root);
NR_MUST_CHECK nr_status_t *nr_json_parse(const char *buf, size_t len, nr_json_doc_t **doc,
                                         const nr_jv_t **root);
void nr_json_free(nr_json_doc_t *doc);

/* The leaves of a span in document order, nested arrays flattened (how
 * Triton reads a nested `data`). A leaf is a number (INT, UINT or REAL, as
 * the DOM would hold it), TRUE, FALSE, NULL, an OBJECT (type only) or a
 * STRING whose u.str/n are its raw text between the quotes: when `escaped`
 * is set it must go through nr_json_unescape. Allocates nothing. */
typedef struct {
    const char *s;
    size_t n, i;
    bool escaped; /* the last STRING leaf holds escape sequences */
} nr_json_leaves_t;

void nr_json_leaves_init(nr_json_leaves_t *it, const nr_jv_t *span);
/* The next leaf into *v; false after the last. */
bool nr_json_leaves_next(nr_json_leaves_t *it, nr_jv_t *v);
/* Decodes the raw text of an escaped STRING leaf into out (at most n bytes;
 * NULL only counts); returns the decoded length. */
size_t nr_json_unescape(const char *raw, size_t n, char *out);
/* v written back as compact JSON (numbers as they read back, strings escaped; a span is
 * left out). */
void nr_json_write(nr_buf_t *b, const nr_jv_t *v);
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
#define NR_TJ_OBJECT "attempt to access JSON non-object as object"
#define NR_TJ_UINT "attempt to access JSON non-unsigned-integer as unsigned-integer"
#define NR_TJ_INT "attempt to access JSON non-signed-integer as signed-integer"
#define NR_TJ_BOOL "attempt to access JSON non-boolean as boolean"
#define NR_TJ_DOUBLE "attempt to access JSON non-number as double"

#endif
