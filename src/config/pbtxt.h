/* pbtxt.h - protobuf text format (config.pbtxt) tokenizer and parser.
 *
 * Turns text into a generic tree that knows nothing about ModelConfig: each
 * node is one field occurrence with its name, line:col, and a scalar token, a
 * message (child fields) or a list (items written as `name: [a, b]`). Schema
 * checks (known fields, types, ranges) happen in model_config.c. The tree owns
 * all its memory in one arena; nr_pbtxt_free releases it. Pure, thread-safe.
 */
#ifndef NR_PBTXT_H
#define NR_PBTXT_H

#include "../common/status.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef enum {
    NR_PBTXT_SCALAR = 0,
    NR_PBTXT_MESSAGE = 1, /* `a { .. }`, `a: { .. }`, `a < .. >`; children = fields */
    NR_PBTXT_LIST = 2,    /* `a: [ .. ]` or `a [ {..} ]`; children = items (may be empty) */
} nr_pbtxt_kind_t;

typedef enum {
    NR_PBTXT_IDENT = 0,  /* identifier: enum names, true/false, inf, nan */
    NR_PBTXT_STRING = 1, /* quoted, unescaped and concatenated; may hold NULs */
    NR_PBTXT_INT = 2,    /* decimal, 0x hex or 0-prefixed octal, digits only */
    NR_PBTXT_FLOAT = 3,  /* has '.', an exponent or an f/F suffix */
} nr_pbtxt_tok_t;

typedef struct nr_pbtxt_node_s {
    const char *name;       /* field name; list items carry their list's name */
    uint32_t line, col;     /* 1-based; col counts bytes. Name position (value, for list items) */
    uint32_t vline, vcol;   /* 1-based position of the value's first token */
    nr_pbtxt_kind_t kind;
    bool colon;             /* a ':' followed the name */
    /* NR_PBTXT_SCALAR */
    nr_pbtxt_tok_t tok;
    bool neg;               /* a '-' preceded the number or identifier */
    const char *text;       /* token text, NUL-terminated (strings: unescaped bytes) */
    size_t len;             /* bytes in text, not counting the terminator */
    /* NR_PBTXT_MESSAGE / NR_PBTXT_LIST */
    struct nr_pbtxt_node_s *child; /* first child, in source order */
    size_t n_child;
    struct nr_pbtxt_node_s *next;  /* next sibling */
} nr_pbtxt_node_t;

typedef struct nr_pbtxt_tree_s nr_pbtxt_tree_t;

/* Parses len bytes of text (no NUL terminator needed; NUL bytes are errors
 * outside escapes). `path` is used in messages only. On failure returns
 * NR_INTERNAL "<path>:<line>:<col>: [<field>: ]<problem>" and sets *out NULL. */
NR_MUST_CHECK nr_status_t *nr_pbtxt_parse(const char *text, size_t len, const char *path,
                                          nr_pbtxt_tree_t **out);
/* The top-level message (kind NR_PBTXT_MESSAGE, name ""). */
const nr_pbtxt_node_t *nr_pbtxt_root(const nr_pbtxt_tree_t *tree);
void nr_pbtxt_free(nr_pbtxt_tree_t *tree);

/* The one config error format: NR_INTERNAL "<path>:<line>:<col>: <f1>.<f2>: <problem>"
 * (the field part left out when n_fields is 0). Used by pbtxt.c and model_config.c. */
NR_MUST_CHECK nr_status_t *nr_pbtxt_errorv(const char *path, uint32_t line, uint32_t col,
                                           const char *const *fields, int n_fields,
                                           const char *fmt, va_list ap);

/* Short human description of a value for error messages ("\"abc\"", "-1.5",
 * "a message", "a list"); writes at most cap bytes including the NUL. */
void nr_pbtxt_describe(const nr_pbtxt_node_t *node, char *out, size_t cap);
/* The same for the string s[0, n) (config_from_json.c's messages too):
 * quoted, non-printable bytes as '?', at most 40 bytes shown. */
void nr_pbtxt_describe_str(const char *s, size_t n, char *out, size_t cap);

#endif
