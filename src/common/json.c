/* json.c - the JSON reader (json.h): a DOM parser that
 * accepts exactly what Triton's parser (rapidjson with NaN/Inf enabled) does
 * and fails with rapidjson's messages and offsets:
 *   failed to parse the request JSON buffer: Invalid value. at 12
 *
 * Why not a library: Triton clients rely on things no packaged C JSON
 * library parses: NaN / Infinity / -Infinity tokens (Triton writes and reads
 * them), the full UINT64 range as integers, and any bytes inside strings
 * (BYTES tensors need not be UTF-8). It also keeps the hot path cheap: one
 * arena per document, strings without escapes are views into the body, no
 * malloc per value.
 *
 * Object members keep document order and duplicates (lookup finds the first,
 * as rapidjson's FindMember does). Nesting is limited to NR_JSON_MAX_DEPTH.
 * No locks; a document belongs to one request.
 */
#include "json.h"

#include "alloc.h"
#include "arena.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#define NR_JSON_MAX_DEPTH 256

struct nr_json_doc_s {
    nr_arena_t arena; /* every value, member array and unescaped string */
    nr_jv_t root;
};

typedef struct {
    const char *s;
    size_t n, i;
    nr_json_doc_t *doc;
    nr_jv_t *vals; size_t n_vals, cap_vals;         /* array elements being built */
    nr_jv_member_t *mems; size_t n_mems, cap_mems;  /* object members being built */
    const char *err;
    size_t err_at;
    int depth;
} parser_t;

static bool fail(parser_t *p, const char *msg, size_t at)
{
    if (p->err == NULL) {
        p->err = msg;
        p->err_at = at;
    }
    return false;
}

static void skip_ws(parser_t *p)
{
    while (p->i < p->n) {
        char c = p->s[p->i];
        if (c != ' ' && c != '\t' && c != '\n' && c != '\r')
            break;
        p->i++;
    }
}

static bool lit(parser_t *p, const char *word)
{
    size_t n = strlen(word);
    if (p->n - p->i < n || memcmp(p->s + p->i, word, n) != 0)
        return false;
    p->i += n;
    return true;
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

/* At the opening quote. Strings without escapes are views into the input. */
static bool parse_string(parser_t *p, const char **out, size_t *out_len)
{
    size_t start = ++p->i;
    size_t j = start;
    while (j < p->n) {
        unsigned char c = (unsigned char)p->s[j];
        if (c == '"' || c == '\\' || c < 0x20)
            break;
        j++;
    }
    if (j < p->n && p->s[j] == '"') {
        *out = p->s + start;
        *out_len = j - start;
        p->i = j + 1;
        return true;
    }
    /* escapes: decode into the arena (never longer than the source) */
    size_t end = j;
    while (end < p->n && p->s[end] != '"')
        end += p->s[end] == '\\' ? 2 : 1;
    char *o = nr_arena_alloc(&p->doc->arena, (end > p->n ? p->n : end) - start + 1);
    size_t len = j - start;
    memcpy(o, p->s + start, len);
    p->i = j;
    for (;;) {
        if (p->i >= p->n)
            return fail(p, "Missing a closing quotation mark in string.", p->i);
        unsigned char c = (unsigned char)p->s[p->i];
        if (c == '"') {
            p->i++;
            break;
        }
        if (c < 0x20) {
            if (c == 0)
                return fail(p, "Missing a closing quotation mark in string.", p->i);
            return fail(p, "Invalid encoding in string.", p->i);
        }
        if (c != '\\') {
            o[len++] = (char)c;
            p->i++;
            continue;
        }
        size_t esc_at = p->i;
        p->i++;
        if (p->i >= p->n)
            return fail(p, "Invalid escape character in string.", esc_at);
        char e = p->s[p->i++];
        switch (e) {
        case '"': o[len++] = '"'; break;
        case '\\': o[len++] = '\\'; break;
        case '/': o[len++] = '/'; break;
        case 'b': o[len++] = '\b'; break;
        case 'f': o[len++] = '\f'; break;
        case 'n': o[len++] = '\n'; break;
        case 'r': o[len++] = '\r'; break;
        case 't': o[len++] = '\t'; break;
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
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(p, "The surrogate pair in string is invalid.", p->i);
            }
            len += put_utf8(o + len, cp); /* 6+ source bytes -> at most 4 */
            break;
        }
        default:
            return fail(p, "Invalid escape character in string.", esc_at);
        }
    }
    o[len] = '\0';
    *out = o;
    *out_len = len;
    return true;
}

static bool parse_number(parser_t *p, nr_jv_t *v)
{
    size_t start = p->i;
    bool neg = false;
    if (p->s[p->i] == '-') {
        neg = true;
        p->i++;
    }
    /* NaN / Infinity extension (rapidjson kParseNanAndInfFlag) */
    if (p->i < p->n && (p->s[p->i] == 'N' || p->s[p->i] == 'I')) {
        if (lit(p, "NaN")) {
            v->type = NR_JV_REAL;
            v->u.d = neg ? -NAN : NAN;
            return true;
        }
        if (lit(p, "Infinity") || lit(p, "Inf")) {
            v->type = NR_JV_REAL;
            v->u.d = neg ? -INFINITY : INFINITY;
            return true;
        }
        return fail(p, "Invalid value.", start);
    }
    if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
        return fail(p, "Invalid value.", start);
    uint64_t u = 0;
    bool big = false;
    if (p->s[p->i] == '0') {
        p->i++;
    } else {
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9') {
            unsigned dgt = (unsigned)(p->s[p->i] - '0');
            if (u > (UINT64_MAX - dgt) / 10)
                big = true;
            else
                u = u * 10 + dgt;
            p->i++;
        }
    }
    bool real = false;
    if (p->i < p->n && p->s[p->i] == '.') {
        real = true;
        p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return fail(p, "Miss fraction part in number.", p->i);
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (p->i < p->n && (p->s[p->i] == 'e' || p->s[p->i] == 'E')) {
        real = true;
        p->i++;
        if (p->i < p->n && (p->s[p->i] == '+' || p->s[p->i] == '-'))
            p->i++;
        if (p->i >= p->n || p->s[p->i] < '0' || p->s[p->i] > '9')
            return fail(p, "Miss exponent in number.", p->i);
        while (p->i < p->n && p->s[p->i] >= '0' && p->s[p->i] <= '9')
            p->i++;
    }
    if (!real && !big) {
        if (!neg) {
            v->type = u <= INT64_MAX ? NR_JV_INT : NR_JV_UINT;
            v->u.i = (int64_t)u;
            return true;
        }
        if (u <= (uint64_t)INT64_MAX + 1) {
            v->type = NR_JV_INT;
            v->u.i = u == (uint64_t)INT64_MAX + 1 ? INT64_MIN : -(int64_t)u;
            return true;
        }
    }
    /* a real, or an integer too big for 64 bits: read as a double */
    size_t len = p->i - start;
    char small[64];
    char *tmp = len < sizeof(small) ? small : nr_malloc(len + 1);
    memcpy(tmp, p->s + start, len);
    tmp[len] = '\0';
    double d = strtod(tmp, NULL);
    if (tmp != small)
        free(tmp);
    if (isinf(d))
        return fail(p, "Number too big to be stored in double.", start);
    v->type = NR_JV_REAL;
    v->u.d = d;
    return true;
}

static bool parse_value(parser_t *p, nr_jv_t *v);

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
            if (!parse_value(p, &e))
                return false;
            if (p->n_vals == p->cap_vals) {
                p->cap_vals = p->cap_vals ? p->cap_vals * 2 : 64;
                p->vals = nr_realloc(p->vals, p->cap_vals * sizeof(nr_jv_t));
            }
            p->vals[p->n_vals++] = e;
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
    size_t n = p->n_vals - base;
    v->type = NR_JV_ARRAY;
    v->n = n;
    v->u.items = n ? nr_arena_alloc(&p->doc->arena, n * sizeof(nr_jv_t)) : NULL;
    if (n)
        memcpy(v->u.items, p->vals + base, n * sizeof(nr_jv_t));
    p->n_vals = base;
    return true;
}

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
            if (p->i >= p->n || p->s[p->i] != '"')
                return fail(p, "Missing a name for object member.", p->i);
            if (!parse_string(p, &m.key, &m.key_len))
                return false;
            skip_ws(p);
            if (p->i >= p->n || p->s[p->i] != ':')
                return fail(p, "Missing a colon after a name of object member.", p->i);
            p->i++;
            if (!parse_value(p, &m.val))
                return false;
            if (p->n_mems == p->cap_mems) {
                p->cap_mems = p->cap_mems ? p->cap_mems * 2 : 32;
                p->mems = nr_realloc(p->mems, p->cap_mems * sizeof(nr_jv_member_t));
            }
            p->mems[p->n_mems++] = m;
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
    size_t n = p->n_mems - base;
    v->type = NR_JV_OBJECT;
    v->n = n;
    v->u.members = n ? nr_arena_alloc(&p->doc->arena, n * sizeof(nr_jv_member_t)) : NULL;
    if (n)
        memcpy(v->u.members, p->mems + base, n * sizeof(nr_jv_member_t));
    p->n_mems = base;
    return true;
}

static bool parse_value(parser_t *p, nr_jv_t *v)
{
    skip_ws(p);
    memset(v, 0, sizeof(*v));
    if (p->i >= p->n)
        return fail(p, "Invalid value.", p->i);
    if (++p->depth > NR_JSON_MAX_DEPTH)
        return fail(p, "Terminate parsing due to Handler error.", p->i);
    bool ok;
    switch (p->s[p->i]) {
    case '{': ok = parse_object(p, v); break;
    case '[': ok = parse_array(p, v); break;
    case '"':
        v->type = NR_JV_STRING;
        ok = parse_string(p, &v->u.str, &v->n);
        break;
    case 'n':
        ok = lit(p, "null") || fail(p, "Invalid value.", p->i);
        v->type = NR_JV_NULL;
        break;
    case 't':
        ok = lit(p, "true") || fail(p, "Invalid value.", p->i);
        v->type = NR_JV_TRUE;
        break;
    case 'f':
        ok = lit(p, "false") || fail(p, "Invalid value.", p->i);
        v->type = NR_JV_FALSE;
        break;
    default: ok = parse_number(p, v); break;
    }
    p->depth--;
    return ok;
}

nr_status_t *nr_json_parse(const char *buf, size_t len, nr_json_doc_t **out, const nr_jv_t **root)
{
    nr_json_doc_t *doc = nr_calloc(1, sizeof(*doc));
    doc->arena = nr_arena_init(65536);
    parser_t p = {0};
    p.s = buf;
    p.n = len;
    p.doc = doc;
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
    free(p.vals);
    free(p.mems);
    if (!ok) {
        nr_json_free(doc);
        *out = NULL;
        *root = NULL;
        return nr_status_new(NR_INVALID_ARG, "failed to parse the request JSON buffer: %s at %zu",
                             p.err, p.err_at);
    }
    *out = doc;
    *root = &doc->root;
    return NULL;
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
