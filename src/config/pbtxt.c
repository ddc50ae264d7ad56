/* pbtxt.c - protobuf text format tokenizer + parser -> generic field tree.
 *
 * Follows protobuf's TextFormat/Tokenizer rules (model_config.md §8): '#'
 * comments, `a: v`, `a {}` / `a: {}` / `a <>`, lists `a: [..]`, optional ','
 * or ';' after a field, '"'/'\'' strings with C escapes and concatenation,
 * hex/octal ints, floats with f suffix. Input is (ptr, len): never assumes a
 * NUL terminator. All nodes and strings live in one arena owned by the tree.
 */
#include "pbtxt.h"

#include "../common/alloc.h"
#include "../common/arena.h"
#include "../common/buf.h"
#include "../common/limits.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Fields plus list items per file: bounds the tree (~100 bytes a node) far
 * above any real config.pbtxt. */
#define MAX_NODES (1 << 20)

/* ---- arena ---------------------------------------------------------------- */

struct nr_pbtxt_tree_s {
    nr_arena_t arena; /* every node and string of the tree */
    nr_pbtxt_node_t root;
};

/* ---- tokenizer ------------------------------------------------------------ */

typedef enum { T_EOF, T_IDENT, T_INT, T_FLOAT, T_STRING, T_SYM } ttype_t;

typedef struct {
    ttype_t type;
    size_t start, end; /* byte range in the input */
    uint32_t line, col;
    char sym;
} token_t;

typedef struct {
    const char *s;
    size_t n, i;
    uint32_t line, col;
    token_t cur;
    nr_pbtxt_tree_t *tree;
    const char *path;
    const char *stack[NR_MAX_PBTXT_DEPTH + 4]; /* field names, outermost first */
    int depth;                                 /* entries used in stack */
    int msg_depth;                             /* open messages */
    size_t n_nodes;
    nr_status_t *err;
    nr_buf_t sbuf; /* string concatenation scratch */
} parser_t;

static bool fail(parser_t *p, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

nr_status_t *nr_pbtxt_errorv(const char *path, uint32_t line, uint32_t col,
                             const char *const *fields, int n_fields, const char *fmt, va_list ap)
{
    nr_buf_t b;
    nr_buf_init(&b);
    nr_buf_printf(&b, "%s:%u:%u: ", path, line, col);
    for (int i = 0; i < n_fields; i++)
        nr_buf_printf(&b, "%s%s", i ? "." : "", fields[i]);
    if (n_fields > 0)
        nr_buf_puts(&b, ": ");
    nr_buf_vprintf(&b, fmt, ap);
    nr_status_t *st = nr_status_new(NR_INTERNAL, "%s", b.data);
    nr_buf_free(&b);
    return st;
}

static bool fail(parser_t *p, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (p->err != NULL)
        return false;
    va_list ap;
    va_start(ap, fmt);
    p->err = nr_pbtxt_errorv(p->path, line, col, p->stack, p->depth, fmt, ap);
    va_end(ap);
    return false;
}

static int ch(const parser_t *p, size_t k)
{
    return p->i + k < p->n ? (unsigned char)p->s[p->i + k] : -1;
}

static void adv(parser_t *p)
{
    if (p->s[p->i] == '\n') {
        p->line++;
        p->col = 1;
    } else {
        p->col++;
    }
    p->i++;
}

static bool is_letter(int c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
static bool is_digit(int c) { return c >= '0' && c <= '9'; }
static bool is_hex(int c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}
static int hexval(int c)
{
    return is_digit(c) ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* Skips whitespace and comments; rejects control characters. */
static bool skip_space(parser_t *p)
{
    for (;;) {
        int c = ch(p, 0);
        if (c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f') {
            adv(p);
        } else if (c == '#') {
            while (ch(p, 0) != -1 && ch(p, 0) != '\n')
                adv(p);
        } else {
            return true;
        }
    }
}

static void put_utf8(nr_buf_t *out, uint32_t cp)
{
    char b[4];
    size_t n;
    if (cp < 0x80) {
        b[0] = (char)cp;
        n = 1;
    } else if (cp < 0x800) {
        b[0] = (char)(0xC0 | (cp >> 6));
        b[1] = (char)(0x80 | (cp & 0x3F));
        n = 2;
    } else if (cp < 0x10000) {
        b[0] = (char)(0xE0 | (cp >> 12));
        b[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[2] = (char)(0x80 | (cp & 0x3F));
        n = 3;
    } else {
        b[0] = (char)(0xF0 | (cp >> 18));
        b[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
        b[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
        b[3] = (char)(0x80 | (cp & 0x3F));
        n = 4;
    }
    nr_buf_append(out, b, n);
}

/* Reads `digits` hex digits at s[i..]; -1 if they are not all there. */
static long read_hex(const char *s, size_t n, size_t i, int digits)
{
    long v = 0;
    for (int k = 0; k < digits; k++) {
        if (i + (size_t)k >= n || !is_hex((unsigned char)s[i + (size_t)k]))
            return -1;
        v = v * 16 + hexval((unsigned char)s[i + (size_t)k]);
    }
    return v;
}

/* One escape sequence starting after the backslash at s[i]. Appends its bytes
 * to out (if non-NULL); returns the bytes consumed, 0 if invalid. */
static size_t unescape_one(const char *s, size_t n, size_t i, nr_buf_t *out)
{
    static const char simple_in[] = "abfnrtv\\?'\"";
    static const char simple_out[] = "\a\b\f\n\r\t\v\\?'\"";
    if (i >= n)
        return 0;
    int c = (unsigned char)s[i];
    const char *hit = c ? strchr(simple_in, c) : NULL;
    if (hit != NULL) {
        if (out)
            nr_buf_putc(out, simple_out[hit - simple_in]);
        return 1;
    }
    if (c >= '0' && c <= '7') {
        unsigned v = 0;
        size_t k = 0;
        while (k < 3 && i + k < n && s[i + k] >= '0' && s[i + k] <= '7')
            v = v * 8 + (unsigned)(s[i + k++] - '0');
        if (out)
            nr_buf_putc(out, (char)(v & 0xFF));
        return k;
    }
    if (c == 'x' || c == 'X') {
        size_t k = 1;
        unsigned v = 0;
        while (k < 3 && i + k < n && is_hex((unsigned char)s[i + k]))
            v = v * 16 + (unsigned)hexval((unsigned char)s[i + k++]);
        if (k == 1)
            return 0;
        if (out)
            nr_buf_putc(out, (char)v);
        return k;
    }
    if (c == 'u' || c == 'U') {
        int digits = c == 'u' ? 4 : 8;
        long cp = read_hex(s, n, i + 1, digits);
        if (cp < 0 || cp > 0x10FFFF)
            return 0;
        size_t used = 1 + (size_t)digits;
        /* A head surrogate followed by \u<trail> combines into one code point. */
        if (cp >= 0xD800 && cp <= 0xDBFF && i + used + 1 < n && s[i + used] == '\\' &&
            s[i + used + 1] == 'u') {
            long lo = read_hex(s, n, i + used + 2, 4);
            if (lo >= 0xDC00 && lo <= 0xDFFF) {
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
                used += 6;
            }
        }
        if (out)
            put_utf8(out, (uint32_t)cp);
        return used;
    }
    return 0;
}

/* Scans a quoted string starting at the quote. With out == NULL it only
 * validates and moves the parser; with out set it re-reads the range and
 * appends the unescaped bytes (already validated, so it cannot fail). */
static bool scan_string(parser_t *p)
{
    int q = ch(p, 0);
    adv(p);
    for (;;) {
        int c = ch(p, 0);
        if (c == -1)
            return fail(p, p->line, p->col, "unexpected end of input inside a string literal");
        if (c == '\n')
            return fail(p, p->line, p->col, "string literals cannot cross line boundaries");
        if (c == 0)
            return fail(p, p->line, p->col, "invalid NUL byte inside a string literal");
        if (c == q) {
            adv(p);
            return true;
        }
        if (c == '\\') {
            size_t used = unescape_one(p->s, p->n, p->i + 1, NULL);
            if (used == 0)
                return fail(p, p->line, p->col, "invalid escape sequence in string literal");
            for (size_t k = 0; k <= used; k++)
                adv(p);
            continue;
        }
        adv(p);
    }
}

static void unescape_range(const char *s, size_t start, size_t end, nr_buf_t *out)
{
    size_t i = start + 1; /* past the opening quote */
    size_t stop = end - 1; /* the closing quote */
    while (i < stop) {
        if (s[i] == '\\') {
            i += 1 + unescape_one(s, stop, i + 1, out);
        } else {
            size_t j = i;
            while (j < stop && s[j] != '\\')
                j++;
            nr_buf_append(out, s + i, j - i);
            i = j;
        }
    }
}

static bool scan_number(parser_t *p, token_t *t)
{
    bool is_float = false;
    if (ch(p, 0) == '0' && (ch(p, 1) == 'x' || ch(p, 1) == 'X')) {
        adv(p);
        adv(p);
        if (!is_hex(ch(p, 0)))
            return fail(p, t->line, t->col, "\"0x\" must be followed by hex digits");
        while (is_hex(ch(p, 0)))
            adv(p);
    } else if (ch(p, 0) == '0' && is_digit(ch(p, 1))) {
        while (ch(p, 0) >= '0' && ch(p, 0) <= '7')
            adv(p);
        if (is_digit(ch(p, 0)))
            return fail(p, t->line, t->col, "numbers starting with leading zero must be in octal");
    } else {
        while (is_digit(ch(p, 0)))
            adv(p);
        if (ch(p, 0) == '.') {
            is_float = true;
            adv(p);
            while (is_digit(ch(p, 0)))
                adv(p);
        }
        if (ch(p, 0) == 'e' || ch(p, 0) == 'E') {
            is_float = true;
            adv(p);
            if (ch(p, 0) == '+' || ch(p, 0) == '-')
                adv(p);
            if (!is_digit(ch(p, 0)))
                return fail(p, t->line, t->col, "\"e\" must be followed by exponent");
            while (is_digit(ch(p, 0)))
                adv(p);
        }
        if (ch(p, 0) == 'f' || ch(p, 0) == 'F') {
            is_float = true;
            adv(p);
        }
    }
    if (is_letter(ch(p, 0)) || is_digit(ch(p, 0)))
        return fail(p, t->line, t->col, "need space between number and identifier");
    if (ch(p, 0) == '.')
        return fail(p, t->line, t->col, "unexpected \".\" after number");
    t->type = is_float ? T_FLOAT : T_INT;
    return true;
}

/* Loads the next token into p->cur. */
static bool next_token(parser_t *p)
{
    skip_space(p);
    token_t *t = &p->cur;
    t->start = p->i;
    t->line = p->line;
    t->col = p->col;
    int c = ch(p, 0);
    if (c == -1) {
        t->type = T_EOF;
    } else if (is_letter(c)) {
        while (is_letter(ch(p, 0)) || is_digit(ch(p, 0)))
            adv(p);
        t->type = T_IDENT;
    } else if (is_digit(c) || (c == '.' && is_digit(ch(p, 1)))) {
        if (!scan_number(p, t))
            return false;
    } else if (c == '"' || c == '\'') {
        if (!scan_string(p))
            return false;
        t->type = T_STRING;
    } else if (c != 0 && strchr("{}<>[]:;,-", c) != NULL) {
        t->type = T_SYM;
        t->sym = (char)c;
        adv(p);
    } else if (c < 0x20 || c == 0x7F) {
        return fail(p, t->line, t->col, "invalid control character 0x%02x", c);
    } else if (c >= 0x80) {
        return fail(p, t->line, t->col, "unexpected byte 0x%02x", c);
    } else {
        return fail(p, t->line, t->col, "unexpected character '%c'", c);
    }
    t->end = p->i;
    return true;
}

static bool is_sym(const parser_t *p, char s)
{
    return p->cur.type == T_SYM && p->cur.sym == s;
}

/* Writes a short quoted rendering of the current token. */
static const char *tok_desc(const parser_t *p, char *buf, size_t cap)
{
    const token_t *t = &p->cur;
    if (t->type == T_EOF)
        return "end of input";
    size_t n = t->end - t->start;
    const char *ell = "";
    if (n > 40) {
        n = 40;
        ell = "...";
    }
    snprintf(buf, cap, "'%.*s%s'", (int)n, p->s + t->start, ell);
    return buf;
}

/* ---- parser --------------------------------------------------------------- */

static bool parse_fields(parser_t *p, nr_pbtxt_node_t *msg, char closer);

/* A new node at the current token; NULL (error set) past MAX_NODES. */
static nr_pbtxt_node_t *new_node(parser_t *p, const char *name)
{
    if (++p->n_nodes > MAX_NODES) {
        fail(p, p->cur.line, p->cur.col, "more than %d fields and values in one file",
             MAX_NODES);
        return NULL;
    }
    nr_pbtxt_node_t *n = nr_arena_calloc(&p->tree->arena, sizeof(*n));
    n->name = name;
    n->line = p->cur.line;
    n->col = p->cur.col;
    return n;
}

static void append(nr_pbtxt_node_t *parent, nr_pbtxt_node_t **last, nr_pbtxt_node_t *n)
{
    if (*last)
        (*last)->next = n;
    else
        parent->child = n;
    *last = n;
    parent->n_child++;
}

/* At '{' or '<': parses a nested message into n. */
static bool parse_message(parser_t *p, nr_pbtxt_node_t *n)
{
    char closer = p->cur.sym == '{' ? '}' : '>';
    n->kind = NR_PBTXT_MESSAGE;
    n->vline = p->cur.line;
    n->vcol = p->cur.col;
    if (p->msg_depth >= NR_MAX_PBTXT_DEPTH)
        return fail(p, p->cur.line, p->cur.col, "message nesting deeper than %d levels",
                    NR_MAX_PBTXT_DEPTH);
    p->msg_depth++;
    if (!next_token(p))
        return false;
    bool ok = parse_fields(p, n, closer);
    p->msg_depth--;
    return ok;
}

/* Parses a scalar value: [-] number|identifier, or one or more strings. */
static bool parse_scalar(parser_t *p, nr_pbtxt_node_t *n)
{
    char d[64];
    n->kind = NR_PBTXT_SCALAR;
    n->vline = p->cur.line;
    n->vcol = p->cur.col;
    if (p->cur.type == T_STRING) {
        nr_buf_reset(&p->sbuf);
        while (p->cur.type == T_STRING) {
            unescape_range(p->s, p->cur.start, p->cur.end, &p->sbuf);
            if (!next_token(p))
                return false;
        }
        n->tok = NR_PBTXT_STRING;
        n->len = p->sbuf.len;
        n->text = nr_arena_strndup(&p->tree->arena, p->sbuf.data ? p->sbuf.data : "", p->sbuf.len);
        return true;
    }
    if (is_sym(p, '-')) {
        n->neg = true;
        if (!next_token(p))
            return false;
        if (p->cur.type != T_INT && p->cur.type != T_FLOAT && p->cur.type != T_IDENT)
            return fail(p, p->cur.line, p->cur.col, "expected a number after '-', got %s",
                        tok_desc(p, d, sizeof(d)));
    }
    switch (p->cur.type) {
    case T_IDENT: n->tok = NR_PBTXT_IDENT; break;
    case T_INT: n->tok = NR_PBTXT_INT; break;
    case T_FLOAT: n->tok = NR_PBTXT_FLOAT; break;
    default:
        return fail(p, p->cur.line, p->cur.col, "expected a value, got %s",
                    tok_desc(p, d, sizeof(d)));
    }
    n->len = p->cur.end - p->cur.start;
    n->text = nr_arena_strndup(&p->tree->arena, p->s + p->cur.start, n->len);
    return next_token(p);
}

/* At '[': items are messages, or (only after a ':') scalars. */
static bool parse_list(parser_t *p, nr_pbtxt_node_t *n)
{
    char d[64];
    n->kind = NR_PBTXT_LIST;
    n->vline = p->cur.line;
    n->vcol = p->cur.col;
    if (!next_token(p))
        return false;
    if (is_sym(p, ']'))
        return next_token(p);
    nr_pbtxt_node_t *last = NULL;
    for (;;) {
        nr_pbtxt_node_t *item = new_node(p, n->name);
        if (item == NULL)
            return false;
        item->colon = n->colon;
        bool ok;
        if (is_sym(p, '{') || is_sym(p, '<'))
            ok = parse_message(p, item);
        else if (n->colon)
            ok = parse_scalar(p, item);
        else
            ok = fail(p, p->cur.line, p->cur.col, "expected '{' or ':' before a list value, got %s",
                      tok_desc(p, d, sizeof(d)));
        if (!ok)
            return false;
        append(n, &last, item);
        if (is_sym(p, ']'))
            return next_token(p);
        if (!is_sym(p, ','))
            return fail(p, p->cur.line, p->cur.col, "expected ',' or ']' in list, got %s",
                        tok_desc(p, d, sizeof(d)));
        if (!next_token(p))
            return false;
    }
}

/* At an identifier: one field with its value and optional separator. */
static bool parse_field(parser_t *p, nr_pbtxt_node_t *n)
{
    char d[64];
    p->stack[p->depth++] = n->name;
    if (!next_token(p))
        return false;
    if (is_sym(p, ':')) {
        n->colon = true;
        if (!next_token(p))
            return false;
    }
    bool ok;
    if (is_sym(p, '['))
        ok = parse_list(p, n);
    else if (is_sym(p, '{') || is_sym(p, '<'))
        ok = parse_message(p, n);
    else if (n->colon)
        ok = parse_scalar(p, n);
    else
        ok = fail(p, p->cur.line, p->cur.col, "expected ':' or '{' after field name, got %s",
                  tok_desc(p, d, sizeof(d)));
    if (!ok)
        return false;
    p->depth--;
    if (is_sym(p, ';') || is_sym(p, ','))
        return next_token(p);
    return true;
}

/* Parses fields until `closer` ('}' or '>'), or end of input when closer is 0. */
static bool parse_fields(parser_t *p, nr_pbtxt_node_t *msg, char closer)
{
    char d[64];
    nr_pbtxt_node_t *last = NULL;
    for (;;) {
        if (p->cur.type == T_EOF) {
            if (closer == 0)
                return true;
            return fail(p, p->cur.line, p->cur.col, "unexpected end of input, expected '%c'",
                        closer);
        }
        if (closer && is_sym(p, closer))
            return next_token(p);
        if (p->cur.type != T_IDENT) {
            if (closer)
                return fail(p, p->cur.line, p->cur.col,
                            "expected a field name or '%c', got %s", closer,
                            tok_desc(p, d, sizeof(d)));
            return fail(p, p->cur.line, p->cur.col, "expected a field name, got %s",
                        tok_desc(p, d, sizeof(d)));
        }
        nr_pbtxt_node_t *n = new_node(
            p, nr_arena_strndup(&p->tree->arena, p->s + p->cur.start, p->cur.end - p->cur.start));
        if (n == NULL || !parse_field(p, n))
            return false;
        append(msg, &last, n);
    }
}

nr_status_t *nr_pbtxt_parse(const char *text, size_t len, const char *path,
                            nr_pbtxt_tree_t **out)
{
    *out = NULL;
    parser_t p;
    memset(&p, 0, sizeof(p));
    p.s = text ? text : "";
    p.n = text ? len : 0;
    p.line = 1;
    p.col = 1;
    p.path = path ? path : "<config>";
    p.tree = nr_calloc(1, sizeof(*p.tree));
    p.tree->arena = nr_arena_init(16384);
    p.tree->root.kind = NR_PBTXT_MESSAGE;
    p.tree->root.name = "";
    p.tree->root.line = p.tree->root.col = 1;
    p.tree->root.vline = p.tree->root.vcol = 1;
    nr_buf_init(&p.sbuf);
    if (next_token(&p))
        parse_fields(&p, &p.tree->root, 0);
    nr_buf_free(&p.sbuf);
    if (p.err != NULL) {
        nr_pbtxt_free(p.tree);
        return p.err;
    }
    *out = p.tree;
    return NULL;
}

const nr_pbtxt_node_t *nr_pbtxt_root(const nr_pbtxt_tree_t *tree)
{
    return &tree->root;
}

void nr_pbtxt_free(nr_pbtxt_tree_t *tree)
{
    if (tree == NULL)
        return;
    nr_arena_free(&tree->arena);
    free(tree);
}

void nr_pbtxt_describe(const nr_pbtxt_node_t *node, char *out, size_t cap)
{
    if (cap == 0)
        return;
    if (node->kind == NR_PBTXT_MESSAGE) {
        snprintf(out, cap, "a message");
        return;
    }
    if (node->kind == NR_PBTXT_LIST) {
        snprintf(out, cap, "a list");
        return;
    }
    if (node->tok != NR_PBTXT_STRING) {
        snprintf(out, cap, "%s%.*s%s", node->neg ? "-" : "", node->len > 40 ? 40 : (int)node->len,
                 node->text, node->len > 40 ? "..." : "");
        return;
    }
    nr_pbtxt_describe_str(node->text, node->len, out, cap);
}

void nr_pbtxt_describe_str(const char *s, size_t n, char *out, size_t cap)
{
    if (cap == 0)
        return;
    /* Quoted, non-printable bytes as '?', at most 40 bytes shown. */
    size_t o = 0;
    out[o++] = '"';
    for (size_t i = 0; i < n && i < 40 && o + 5 < cap; i++) {
        unsigned char c = (unsigned char)s[i];
        out[o++] = (c >= 0x20 && c < 0x7F) ? (char)c : '?';
    }
    if (n > 40 && o + 5 < cap) {
        memcpy(out + o, "...", 3);
        o += 3;
    }
    if (o + 1 < cap)
        out[o++] = '"';
    out[o < cap ? o : cap - 1] = '\0';
}
