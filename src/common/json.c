/* json.c - the JSON reader (json.h): a DOM parser that
 * accepts exactly what Triton's parser (rapidjson with NaN/Inf enabled) does
 * and fails with rapidjson's messages and offsets:
 *   failed to parse the request JSON buffer: Invalid value. at 12
 * Every value goes through one parse_value, which either builds it or, with
 * no value to fill, only checks it; a span (an infer request's `data`) is
 * checked that way and read again later by nr_json_leaves_next, so tensor
 * data costs no node per value (24 bytes each, and as much again on the
 * temporary stack, where the body has 2 bytes per value: "0,").
 *
 * Why not a library: Triton clients rely on things no packaged C JSON
 * library parses: NaN / Infinity / -Infinity tokens (Triton writes and reads
 * them), the full UINT64 range as integers, and any bytes inside strings
 * (BYTES tensors need not be UTF-8). It also keeps the hot path cheap: one
 * arena per document, strings without escapes are views into the body, no
 * malloc per value. Every allocation is checked: a document too big for the
 * memory there is is UNAVAILABLE, not an abort.
 *
 * Object members keep document order and duplicates (lookup finds the first,
 * as rapidjson's FindMember does). Nesting is limited to NR_JSON_MAX_DEPTH.
 * No locks; a document belongs to one request.
 */
#include "json.h"

#include "alloc.h"
#include "arena.h"
#include "json_int.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define NR_JSON_MAX_DEPTH 256

struct nr_json_doc_s {
    nr_arena_t arena; /* every value, member array and unescaped string */
    nr_jv_t root;
};

/* The "message" of a failed allocation: reported as UNAVAILABLE, not as
 * rapidjson's parse error; err_at then holds the size asked for. */
static const char OOM[] = "out of memory";

typedef struct {
    const char *s;
    size_t n, i;
    nr_json_doc_t *doc;
    nr_jv_t *vals; size_t n_vals, cap_vals;         /* array elements being built */
    nr_jv_member_t *mems; size_t n_mems, cap_mems;  /* object members being built */
    const char *err;
    size_t err_at;
    int depth;
    const nr_json_opts_t *opts; /* NULL: every value is built */
    bool in_list;               /* inside the value of the root's member opts->list */
    /* the stacks start here (an infer request's header fits): no allocation until deeper */
    nr_jv_t vals_small[16];
    nr_jv_member_t mems_small[16];
} parser_t;

static bool fail(parser_t *p, const char *msg, size_t at)
{
    if (p->err == NULL) {
        p->err = msg;
        p->err_at = at;
    }
    return false;
}

static inline void skip_ws(parser_t *p)
{
    while (p->i < p->n && nr__json_is_ws(p->s[p->i]))
        p->i++;
}

static bool lit_at(const char *s, size_t n, size_t *i, const char *word)
{
    size_t wl = strlen(word);
    if (n - *i < wl || memcmp(s + *i, word, wl) != 0)
        return false;
    *i += wl;
    return true;
}

static bool lit(parser_t *p, const char *word)
{
    return lit_at(p->s, p->n, &p->i, word);
}

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool hex4(parser_t *p, unsigned *out)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
        int h = p->i < p->n ? hexval(p->s[p->i]) : -1;
        if (h < 0)
            return fail(p, "Incorrect hex digit after \\u escape in string.", p->i);
        v = v * 16 + (unsigned)h;
        p->i++;
    }
    *out = v;
    return true;
}

static size_t put_utf8(char *o, unsigned cp)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | (cp >> 6));
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | (cp >> 12));
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | (cp >> 18));
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* Checks the string at the opening quote and moves past its closing one;
 * *escaped tells whether its text holds escape sequences. */
static bool scan_string(parser_t *p, bool *escaped)
{
    size_t j = ++p->i;
    while (j < p->n) {
        unsigned char c = (unsigned char)p->s[j];
        if (c == '"' || c == '\\' || c < 0x20)
            break;
        j++;
    }
    *escaped = false;
    p->i = j;
    for (;;) {
        if (p->i >= p->n)
            return fail(p, "Missing a closing quotation mark in string.", p->i);
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            return true;
        }
        if (c < 0x20) {
            if (c == 0)
                return fail(p, "Missing a closing quotation mark in string.", p->i);
            return fail(p, "Invalid encoding in string.", p->i);
        }
        if (c != '\\') {
            p->i++;
            continue;
        }
        *escaped = true;
        size_t esc_at = p->i++;
        if (p->i >= p->n)
            return fail(p, "Invalid escape character in string.", esc_at);
        switch (p->s[p->i++]) {
        case '"': case '\\': case '/': case 'b': case 'f': case 'n': case 'r': case 't':
            break;
        case 'u': {
            unsigned cp;
            if (!hex4(p, &cp))
                return false;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (p->n - p->i < 2 || p->s[p->i] != '\\' || p->s[p->i + 1] != 'u')
                    return fail(p, "The surrogate pair in string is invalid.", p->i);
                p->i += 2;
                if (!hex4(p, &lo))
                    return false;
                if (lo < 0xDC00 || lo > 0xDFFF)
                    return fail(p, "The surrogate pair in string is invalid.", p->i);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(p, "The surrogate pair in string is invalid.", p->i);
            }
            break;
        }
        default:
            return fail(p, "Invalid escape character in string.", esc_at);
        }
    }
}

static unsigned hex4_at(const char *s)
{
    unsigned v = 0;
    for (int k = 0; k < 4; k++)
        v = v * 16 + (unsigned)hexval(s[k]);
    return v;
}

size_t nr_json_unescape(const char *raw, size_t n, char *out)
{
    char tmp[4];
    size_t len = 0, i = 0;
    while (i < n) {
        char c = raw[i++];
        if (c == '\\' && i < n) {
            char e = raw[i++];
            switch (e) {
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'n': c = '\n'; break;
            case 'r': c = '\r'; break;
            case 't': c = '\t'; break;
            case 'u': {
                if (n - i < 4)
                    return len;
                unsigned cp = hex4_at(raw + i);
                i += 4;
                if (cp >= 0xD800 && cp <= 0xDBFF && n - i >= 6) {
                    cp = 0x10000 + ((cp - 0xD800) << 10) + (hex4_at(raw + i + 2) - 0xDC00);
                    i += 6;
                }
                len += put_utf8(out ? out + len : tmp, cp); /* 6+ source bytes -> at most 4 */
                continue;
            }
            default: c = e; break; /* " \ / */
            }
        }
        if (out)
            out[len] = c;
        len++;
    }
    return len;
}

/* At the opening quote. Strings without escapes are views into the input. */
static bool parse_string(parser_t *p, const char **out, size_t *out_len)
{
    size_t start = p->i + 1;
    bool escaped;
    if (!scan_string(p, &escaped))
        return false;
    size_t raw = p->i - 1 - start;
    if (!escaped) {
        *out = p->s + start;
        *out_len = raw;
        return true;
    }
    char *o = nr_arena_try_alloc(&p->doc->arena, raw + 1); /* never longer than the source */
    if (o == NULL)
        return fail(p, OOM, raw + 1);
    size_t len = nr_json_unescape(p->s + start, raw, o);
    o[len] = '\0';
    *out = o;
    *out_len = len;
    return true;
}

static const char *num_err(size_t *err_at, size_t at, const char *msg)
{
    *err_at = at;
    return msg;
}

bool nr__json_int_value(const char *s, size_t d0, size_t end, bool neg, nr_jv_t *v)
{
    if (end - d0 > 20)
        return false;
    uint64_t u = 0;
    for (size_t i = d0; i < end; i++) {
        unsigned dgt = (unsigned)(s[i] - '0');
        if (i - d0 >= 19 && u > (UINT64_MAX - dgt) / 10)
            return false;
        u = u * 10 + dgt;
    }
    if (neg && u > (uint64_t)INT64_MAX + 1)
        return false;
    v->type = neg || u <= INT64_MAX ? NR_JV_INT : NR_JV_UINT;
    v->u.i = !neg ? (int64_t)u : u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
    return true;
}

/* A number that is not a 64-bit integer, s[start, end), as a double: a real,
 * or an integer too big for 64 bits. strtod must see it end: when a byte
 * follows it in s, that byte cannot continue a number (the grammar took every
 * digit, '.' and exponent), so strtod reads it in place; only a number that
 * ends the input is copied first. Only checking (v NULL), strtod is skipped
 * when the number is certainly below 10^308, a finite double: its magnitude
 * is below 10^(int_digits + exp). */
static const char *to_double(const char *s, size_t n, size_t start, size_t end,
                             size_t int_digits, int64_t exp, nr_jv_t *v, size_t *err_at)
{
    if (v == NULL && int_digits <= 308 && (int64_t)int_digits + exp <= 308)
        return NULL;
    size_t len = end - start;
    double d;
    if (end < n) {
        d = strtod(s + start, NULL);
    } else {
        char small[64];
        char *tmp = len < sizeof(small) ? small : malloc(len + 1);
        if (tmp == NULL)
            return num_err(err_at, len + 1, OOM);
        memcpy(tmp, s + start, len);
        tmp[len] = '\0';
        d = strtod(tmp, NULL);
        if (tmp != small)
            free(tmp);
    }
    if (isinf(d))
        return num_err(err_at, start, "Number too big to be stored in double.");
    if (v != NULL) {
        v->type = NR_JV_REAL;
        v->u.d = d;
    }
    return NULL;
}

const char *nr__json_special(const char *s, size_t n, size_t *pi, size_t i, bool neg, nr_jv_t *v,
                             size_t *err_at)
{
    double d;
    if (i < n && s[i] == 'N' && lit_at(s, n, &i, "NaN"))
        d = neg ? -NAN : NAN;
    else if (i < n && s[i] == 'I' && (lit_at(s, n, &i, "Infinity") || lit_at(s, n, &i, "Inf")))
        d = neg ? -INFINITY : INFINITY;
    else
        return num_err(err_at, *pi, "Invalid value.");
    if (v != NULL) {
        v->type = NR_JV_REAL;
        v->u.d = d;
    }
    *pi = i;
    return NULL;
}

/* The common numbers of tensor data checked fast: [-]digits[.digits], at
 * most 308 integer digits (a finite double). Returns where it ends, or 0
 * (never the end of a number) for number() to decide: exponents, NaN and
 * Infinity, errors. */
static size_t quick_number(const char *s, size_t n, size_t i)
{
    i += s[i] == '-';
    size_t d0 = i;
    if (i >= n || !nr__json_is_digit(s[i]))
        return 0;
    if (s[i++] != '0')
        while (i < n && nr__json_is_digit(s[i]))
            i++;
    size_t int_digits = i - d0;
    if (i < n && s[i] == '.') {
        if (++i >= n || !nr__json_is_digit(s[i]))
            return 0;
        i = nr__json_skip_digits(s, n, i);
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E'))
        return 0;
    return int_digits <= 308 ? i : 0;
}

/* The number at s[*pi] (rapidjson's grammar with NaN/Infinity): moves past
 * it and, unless v is NULL (only checked), reads its value as the DOM holds
 * it (INT, UINT above INT64_MAX, else REAL). Returns NULL, or the error with
 * *err_at (OOM: the size). */
static const char *number(const char *s, size_t n, size_t *pi, nr_jv_t *v, size_t *err_at)
{
    size_t start = *pi, i = start;
    bool neg = s[i] == '-';
    i += neg;
    if (i >= n || !nr__json_is_digit(s[i]))
        return nr__json_special(s, n, pi, i, neg, v, err_at);
    size_t d0 = i++;
    if (s[d0] != '0') /* a leading 0 is the whole integer part */
        while (i < n && nr__json_is_digit(s[i]))
            i++;
    size_t int_digits = i - d0;
    bool real = false;
    if (i < n && s[i] == '.') {
        real = true;
        i++;
        if (i >= n || !nr__json_is_digit(s[i]))
            return num_err(err_at, i, "Miss fraction part in number.");
        i = nr__json_skip_digits(s, n, i);
    }
    int64_t exp = 0;
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        real = true;
        i++;
        bool eneg = false;
        if (i < n && (s[i] == '+' || s[i] == '-'))
            eneg = s[i++] == '-';
        if (i >= n || !nr__json_is_digit(s[i]))
            return num_err(err_at, i, "Miss exponent in number.");
        for (; i < n && nr__json_is_digit(s[i]); i++)
            if (exp < 100000) /* saturates: only the side of 308 matters */
                exp = exp * 10 + (s[i] - '0');
        if (eneg)
            exp = -exp;
    }
    *pi = i;
    if (!real && (v == NULL ? int_digits <= 308 : nr__json_int_value(s, d0, i, neg, v)))
        return NULL;
    return to_double(s, n, start, i, int_digits, exp, v, err_at);
}

static bool parse_number(parser_t *p, nr_jv_t *v)
{
    size_t at;
    const char *err = number(p->s, p->n, &p->i, v, &at);
    return err == NULL || fail(p, err, at);
}

static bool parse_value(parser_t *p, nr_jv_t *v);

/* The temporary stacks double, from the parser's own small arrays to the heap; a failed
 * growth is an allocation failure. */
static bool grow(parser_t *p, void **stack, size_t *cap, size_t elem, const void *small)
{
    size_t n = *cap * 2;
    void *q = NULL;
    if (n <= SIZE_MAX / elem) {
        q = *stack == small ? malloc(n * elem) : realloc(*stack, n * elem);
        if (q != NULL && *stack == small)
            memcpy(q, small, *cap * elem);
    }
    if (q == NULL)
        return fail(p, OOM, n * elem);
    *stack = q;
    *cap = n;
    return true;
}

/* The n items from `base` of a stack as one arena array (NULL when empty). */
static bool settle(parser_t *p, const void *stack, size_t base, size_t n, size_t elem,
                   void **out)
{
    *out = NULL;
    if (n == 0) /* the stack may be NULL */
        return true;
    *out = nr_arena_try_alloc(&p->doc->arena, n * elem);
    if (*out == NULL)
        return fail(p, OOM, n * elem);
    memcpy(*out, (const char *)stack + base * elem, n * elem);
    return true;
}

/* At '['; v NULL: checked only, nothing built. */
static bool parse_array(parser_t *p, nr_jv_t *v)
{
    p->i++; /* [ */
    size_t base = p->n_vals;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == ']') {
        p->i++;
    } else {
        for (;;) {
            nr_jv_t e;
            skip_ws(p);
            if (v == NULL && p->depth < NR_JSON_MAX_DEPTH && p->i < p->n &&
                (nr__json_is_digit(p->s[p->i]) || p->s[p->i] == '-')) {
                /* a number checked in place: tensor data, the common case */
                size_t end = quick_number(p->s, p->n, p->i), at;
                const char *err = end ? NULL : number(p->s, p->n, &p->i, NULL, &at);
                if (err != NULL)
                    return fail(p, err, at);
                if (end)
                    p->i = end;
            } else if (!parse_value(p, v ? &e : NULL)) {
                return false;
            }
            if (v != NULL) {
                if (p->n_vals == p->cap_vals &&
                    !grow(p, (void **)&p->vals, &p->cap_vals, sizeof(nr_jv_t), p->vals_small))
                    return false;
                p->vals[p->n_vals++] = e;
            }
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                continue;
            }
            if (p->i < p->n && p->s[p->i] == ']') {
                p->i++;
                break;
            }
            return fail(p, "Missing a comma or ']' after an array element.", p->i);
        }
    }
    if (v == NULL)
        return true;
    size_t n = p->n_vals - base;
    v->type = NR_JV_ARRAY;
    v->n = n;
    p->n_vals = base;
    return settle(p, p->vals, base, n, sizeof(nr_jv_t), (void **)&v->u.items);
}

static bool key_is(const nr_jv_member_t *m, const char *k)
{
    size_t n = strlen(k);
    return m->key_len == n && memcmp(m->key, k, n) == 0;
}

/* A member's value, built; or kept as a span where p->opts asks for it. */
static bool member_value(parser_t *p, nr_jv_member_t *m)
{
    const nr_json_opts_t *o = p->opts;
    if (o == NULL)
        return parse_value(p, &m->val);
    if (p->depth == 1 && key_is(m, o->list)) {
        bool was = p->in_list;
        p->in_list = true;
        bool ok = parse_value(p, &m->val);
        p->in_list = was;
        return ok;
    }
    skip_ws(p);
    if (p->in_list && p->depth == 3 && p->i < p->n && p->s[p->i] == '[' && key_is(m, o->key)) {
        size_t start = p->i;
        if (!parse_value(p, NULL))
            return false;
        memset(&m->val, 0, sizeof(m->val));
        m->val.type = NR_JV_SPAN;
        m->val.u.str = p->s + start;
        m->val.n = p->i - start;
        return true;
    }
    return parse_value(p, &m->val);
}

/* At '{'; v NULL: checked only, nothing built. */
static bool parse_object(parser_t *p, nr_jv_t *v)
{
    p->i++; /* { */
    size_t base = p->n_mems;
    skip_ws(p);
    if (p->i < p->n && p->s[p->i] == '}') {
        p->i++;
    } else {
        for (;;) {
            nr_jv_member_t m;
            bool escaped;
            if (p->i >= p->n || p->s[p->i] != '"')
                return fail(p, "Missing a name for object member.", p->i);
            if (v ? !parse_string(p, &m.key, &m.key_len) : !scan_string(p, &escaped))
                return false;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return fail(p, "Missing a colon after a name of object member.", p->i);
            p->i++;
            if (v ? !member_value(p, &m) : !parse_value(p, NULL))
                return false;
            if (v != NULL) {
                if (p->n_mems == p->cap_mems &&
                    !grow(p, (void **)&p->mems, &p->cap_mems, sizeof(nr_jv_member_t),
                          p->mems_small))
                    return false;
                p->mems[p->n_mems++] = m;
            }
            skip_ws(p);
            if (p->i < p->n && p->s[p->i] == ',') {
                p->i++;
                skip_ws(p);
                continue;
            }
            if (p->i < p->n && p->s[p->i] == '}') {
                p->i++;
                break;
            }
            return fail(p, "Missing a comma or '}' after an object member.", p->i);
        }
    }
    if (v == NULL)
        return true;
    size_t n = p->n_mems - base;
    v->type = NR_JV_OBJECT;
    v->n = n;
    p->n_mems = base;
    return settle(p, p->mems, base, n, sizeof(nr_jv_member_t), (void **)&v->u.members);
}

/* Any value; v NULL: checked only (the same errors at the same offsets). */
static bool parse_value(parser_t *p, nr_jv_t *v)
{
    skip_ws(p);
    nr_jv_t scalar; /* where a checked scalar's type goes */
    nr_jv_t *out = v != NULL ? v : &scalar;
    memset(out, 0, sizeof(*out));
    if (p->i >= p->n)
        return fail(p, "Invalid value.", p->i);
    if (++p->depth > NR_JSON_MAX_DEPTH)
        return fail(p, "Terminate parsing due to Handler error.", p->i);
    bool ok, escaped;
    switch (p->s[p->i]) {
    case '{': ok = parse_object(p, v); break;
    case '[': ok = parse_array(p, v); break;
    case '"':
        out->type = NR_JV_STRING;
        ok = v != NULL ? parse_string(p, &v->u.str, &v->n) : scan_string(p, &escaped);
        break;
    case 'n':
        ok = lit(p, "null") || fail(p, "Invalid value.", p->i);
        out->type = NR_JV_NULL;
        break;
    case 't':
        ok = lit(p, "true") || fail(p, "Invalid value.", p->i);
        out->type = NR_JV_TRUE;
        break;
    case 'f':
        ok = lit(p, "false") || fail(p, "Invalid value.", p->i);
        out->type = NR_JV_FALSE;
        break;
    default: ok = parse_number(p, v); break;
    }
    p->depth--;
    return ok;
}

nr_status_t *nr_json_parse_opts(const char *buf, size_t len, const nr_json_opts_t *opts,
                                nr_json_doc_t **out, const nr_jv_t **root)
{
    nr_json_doc_t *doc = nr_calloc(1, sizeof(*doc));
    doc->arena = nr_arena_init(4096); /* an infer request's DOM is small: data is spans */
    parser_t p;
    memset(&p, 0, offsetof(parser_t, vals_small)); /* the small stacks need no zeroing */
    p.vals = p.vals_small;
    p.cap_vals = sizeof(p.vals_small) / sizeof(p.vals_small[0]);
    p.mems = p.mems_small;
    p.cap_mems = sizeof(p.mems_small) / sizeof(p.mems_small[0]);
    p.s = buf;
    p.n = len;
    p.doc = doc;
    p.opts = opts;
    skip_ws(&p);
    bool ok;
    if (p.i >= p.n) {
        ok = fail(&p, "The document is empty.", p.i);
    } else {
        ok = parse_value(&p, &doc->root);
        if (ok) {
            skip_ws(&p);
            if (p.i < p.n)
                ok = fail(&p, "The document root must not be followed by other values.", p.i);
        }
    }
    if (p.vals != p.vals_small)
        free(p.vals);
    if (p.mems != p.mems_small)
        free(p.mems);
    if (!ok) {
        nr_json_free(doc);
        *out = NULL;
        *root = NULL;
        if (p.err == OOM)
            return nr_status_new(NR_UNAVAILABLE,
                                 "unable to allocate %zu bytes to parse the request JSON",
                                 p.err_at);
        return nr_status_new(NR_INVALID_ARG, "failed to parse the request JSON buffer: %s at %zu",
                             p.err, p.err_at);
    }
    *out = doc;
    *root = &doc->root;
    return NULL;
}

nr_status_t *nr_json_parse(const char *buf, size_t len, nr_json_doc_t **out, const nr_jv_t **root)
{
    return nr_json_parse_opts(buf, len, NULL, out, root);
}

void nr_json_free(nr_json_doc_t *doc)
{
    if (doc == NULL)
        return;
    nr_arena_free(&doc->arena);
    free(doc);
}

const nr_jv_t *nr_jv_get(const nr_jv_t *obj, const char *key)
{
    if (obj == NULL || obj->type != NR_JV_OBJECT)
        return NULL;
    size_t kl = strlen(key);
    for (size_t i = 0; i < obj->n; i++) {
        const nr_jv_member_t *m = &obj->u.members[i];
        if (m->key_len == kl && memcmp(m->key, key, kl) == 0)
            return &m->val;
    }
    return NULL;
}

void nr_json_write(nr_buf_t *b, const nr_jv_t *v)
{
    switch (v->type) {
    case NR_JV_NULL: nr_buf_puts(b, "null"); break;
    case NR_JV_FALSE: nr_buf_puts(b, "false"); break;
    case NR_JV_TRUE: nr_buf_puts(b, "true"); break;
    case NR_JV_INT: nr_buf_i64(b, v->u.i); break;
    case NR_JV_UINT: nr_buf_u64(b, (uint64_t)v->u.i); break;
    case NR_JV_REAL: nr_buf_double(b, v->u.d); break;
    case NR_JV_STRING: nr_buf_json_str(b, v->u.str, v->n); break;
    case NR_JV_ARRAY:
        nr_buf_putc(b, '[');
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                nr_buf_putc(b, ',');
            nr_json_write(b, &v->u.items[i]);
        }
        nr_buf_putc(b, ']');
        break;
    case NR_JV_OBJECT:
        nr_buf_putc(b, '{');
        for (size_t i = 0; i < v->n; i++) {
            if (i)
                nr_buf_putc(b, ',');
            nr_buf_json_str(b, v->u.members[i].key, v->u.members[i].key_len);
            nr_buf_putc(b, ':');
            nr_json_write(b, &v->u.members[i].val);
        }
        nr_buf_putc(b, '}');
        break;
    default: break;
    }
}
