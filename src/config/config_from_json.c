/* config_from_json.c - a ModelConfig in protobuf's JSON mapping -> nr_model_config_t.
 *
 * Triton's model-load API takes a whole config as JSON (the "config"
 * parameter of POST /v2/repository/models/<m>/load) and reads it with
 * protobuf's JsonStringToMessage (Triton's JsonToModelConfig: enum names
 * matched in any case, unknown fields rejected). This reads the same text
 * through the schema tables of cfg_fields.c and stores values with the
 * helpers of cfg_store.c that the config.pbtxt reader (model_config.c) uses,
 * so that a config gives the same struct whichever way it is written; what
 * nr_cfg_to_json prints reads back to an equal config. Protobuf's rules:
 *   - a field by its proto name (max_batch_size) or JSON name (maxBatchSize);
 *     an unknown field is an error; null leaves a field at its default;
 *   - integers: a JSON number with no fraction (1.0 is 1; a real beyond
 *     2^53 is refused), or a string of one ("16": protobuf prints 64-bit
 *     values so), in the field type's range;
 *   - float/double: a number, or a string of one as absl::SimpleAtod reads
 *     it ("NaN", "Infinity", "-Infinity", " 1.5", "inf"); a bare NaN or
 *     Infinity token (which nereid's JSON reader takes) is refused;
 *   - bool: true / false; enums: a value name (any case) or number; strings:
 *     valid UTF-8 (and, here, no NUL: the struct holds C strings);
 *   - repeated fields: an array without nulls; maps: an object, keys given
 *     once, message values as objects (a uint64 key as a decimal string);
 *   - a message given as {} is present (its has-flag / oneof selector set,
 *     as `dynamic_batching { }` sets them in config.pbtxt);
 *   - a field given twice (by either name) or two members of one oneof is an
 *     error (a null counts as not given).
 * Errors are INVALID_ARG "<JSON path>: <problem>", e.g.
 *   input[0].dims[1]: expected an integer, got "x"
 * Pure; the tables are immutable, so any thread may call it.
 */
#include "model_config.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/json.h"
#include "cfg_int.h"
#include "pbtxt.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    nr_buf_t path; /* JSON path of the value being read: input[0].dims */
    nr_status_t *err;
} ctx_t;

static bool fail(ctx_t *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static bool fail(ctx_t *c, const char *fmt, ...)
{
    if (c->err != NULL)
        return false;
    va_list ap;
    va_start(ap, fmt);
    char *msg = nr_vasprintf(fmt, ap);
    va_end(ap);
    c->err = c->path.len ? nr_status_new(NR_INVALID_ARG, "%s: %s", c->path.data, msg)
                         : nr_status_new(NR_INVALID_ARG, "%s", msg);
    free(msg);
    return false;
}

/* ---- the path ------------------------------------------------------------- */

static bool is_ident(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char ch = s[i];
        if (!(ch == '_' || (ch >= '0' && ch <= '9') || (ch >= 'a' && ch <= 'z') ||
              (ch >= 'A' && ch <= 'Z')))
            return false;
    }
    return n > 0;
}

/* Appends a member to the path: .name for a field, ["key"] for a map key (or
 * a name that is no identifier). Returns the length to pop back to. */
static size_t push_key(ctx_t *c, const char *s, size_t n, bool map_key)
{
    size_t mark = c->path.len;
    if (!map_key && is_ident(s, n)) {
        if (mark)
            nr_buf_putc(&c->path, '.');
        nr_buf_append(&c->path, s, n);
    } else {
        char d[64];
        nr_pbtxt_describe_str(s, n, d, sizeof(d));
        nr_buf_printf(&c->path, "[%s]", d);
    }
    return mark;
}

static size_t push_index(ctx_t *c, size_t i)
{
    size_t mark = c->path.len;
    nr_buf_printf(&c->path, "[%zu]", i);
    return mark;
}

static void pop(ctx_t *c, size_t mark)
{
    c->path.len = mark;
    if (c->path.data != NULL)
        c->path.data[mark] = '\0';
}

/* ---- scalars -------------------------------------------------------------- */

/* A short description of a value for messages: "x" (quoted), 1.5, an array. */
static void describe(const nr_jv_t *v, char *out, size_t cap)
{
    nr_buf_t b;
    switch (v->type) {
    case NR_JV_NULL: snprintf(out, cap, "null"); break;
    case NR_JV_TRUE: snprintf(out, cap, "true"); break;
    case NR_JV_FALSE: snprintf(out, cap, "false"); break;
    case NR_JV_INT: snprintf(out, cap, "%" PRId64, v->u.i); break;
    case NR_JV_UINT: snprintf(out, cap, "%" PRIu64, (uint64_t)v->u.i); break;
    case NR_JV_REAL:
        nr_buf_init(&b);
        nr_buf_double(&b, v->u.d);
        snprintf(out, cap, "%s", b.data);
        nr_buf_free(&b);
        break;
    case NR_JV_STRING: nr_pbtxt_describe_str(v->u.str, v->n, out, cap); break;
    case NR_JV_ARRAY: snprintf(out, cap, "an array"); break;
    default: snprintf(out, cap, "an object"); break;
    }
}

static bool type_error(ctx_t *c, const nr_jv_t *v, const char *want)
{
    char d[64];
    describe(v, d, sizeof(d));
    return fail(c, "expected %s, got %s", want, d);
}

static const char *int_type_name(uint8_t type)
{
    switch (type) {
    case NR__F_UINT32: return "uint32";
    case NR__F_INT64: return "int64";
    case NR__F_UINT64: return "uint64";
    default: return "int32";
    }
}

/* Numbers in strings, read as protobuf reads them: with absl's SimpleAtoi
 * and SimpleAtod, which skip ASCII white space around the number. */
static bool is_space(char ch)
{
    return ch == ' ' || (ch >= '\t' && ch <= '\r');
}

static void trim(const char **s, size_t *n)
{
    while (*n > 0 && is_space(**s))
        (*s)++, (*n)--;
    while (*n > 0 && is_space((*s)[*n - 1]))
        (*n)--;
}

/* SimpleAtoi: [+-]digits that fit 64 bits, as a sign and magnitude. */
static bool string_int(const char *s, size_t n, bool *neg, uint64_t *mag)
{
    trim(&s, &n);
    size_t i = n > 0 && (s[0] == '+' || s[0] == '-');
    if (i == n)
        return false;
    uint64_t m = 0;
    for (; i < n; i++) {
        unsigned dg = (unsigned)(s[i] - '0');
        if (dg > 9 || m > (UINT64_MAX - dg) / 10)
            return false;
        m = m * 10 + dg;
    }
    *neg = s[0] == '-';
    *mag = m;
    return true;
}

/* SimpleAtod: an optional '+', then a decimal number (no hex), or inf,
 * infinity, nan in any case; beyond the double range it is infinite. */
static bool string_double(const char *s, size_t n, double *d)
{
    trim(&s, &n);
    if (n > 0 && s[0] == '+') {
        s++, n--;
        if (n > 0 && (s[0] == '+' || s[0] == '-'))
            return false;
    }
    if (n == 0 || is_space(s[0]) || memchr(s, '\0', n) != NULL ||
        memchr(s, 'x', n) != NULL || memchr(s, 'X', n) != NULL)
        return false;
    char *tmp = nr_strndup(s, n), *end;
    *d = strtod(tmp, &end);
    bool whole = end == tmp + n;
    free(tmp);
    return whole;
}

/* The number in a string for an integer field (ParseIntInner): no white
 * space at all, then an integer (*kind 1: sign and magnitude), else a finite
 * real (*kind 2: *d) that get_int checks further. */
static bool string_number(const char *s, size_t n, int *kind, bool *neg, uint64_t *mag,
                          double *d)
{
    for (size_t i = 0; i < n; i++)
        if (is_space(s[i]))
            return false;
    if (string_int(s, n, neg, mag)) {
        *kind = 1;
        return true;
    }
    *kind = 2;
    return string_double(s, n, d) && isfinite(*d);
}

/* An integer for a field of integer type `type` as protobuf's parser takes it
 * (ParseInt / ParseUInt): an integral JSON number or string of one; a real
 * must be within +-2^53 (0..2^54 unsigned), then the type's range applies. */
static bool get_int(ctx_t *c, uint8_t type, const nr_jv_t *v, bool *neg, uint64_t *mag)
{
    bool is_unsigned = type == NR__F_UINT32 || type == NR__F_UINT64;
    double d = 0;
    int kind = 1;
    if (v->type == NR_JV_INT) {
        *neg = v->u.i < 0;
        *mag = *neg ? 0 - (uint64_t)v->u.i : (uint64_t)v->u.i;
    } else if (v->type == NR_JV_UINT) {
        *neg = false;
        *mag = (uint64_t)v->u.i;
    } else if (v->type == NR_JV_REAL && isfinite(v->u.d)) {
        kind = 2;
        d = v->u.d;
    } else if (v->type != NR_JV_STRING || !string_number(v->u.str, v->n, &kind, neg, mag, &d)) {
        return type_error(c, v, "an integer");
    }
    if (kind == 2) {
        double lo = is_unsigned ? 0 : -9007199254740992.0;
        double hi = is_unsigned ? 18014398509481984.0 : 9007199254740992.0;
        if (!(d >= lo && d <= hi)) {
            char ds[64];
            describe(v, ds, sizeof(ds));
            return fail(c, "value out of range for %s: %s", int_type_name(type), ds);
        }
        if (d != trunc(d))
            return type_error(c, v, "an integer");
        *neg = d < 0;
        *mag = (uint64_t)(*neg ? -d : d);
    }
    if (!nr__cfg_int_fits(type, *neg, *mag)) {
        char ds[64];
        describe(v, ds, sizeof(ds));
        return fail(c, "value out of range for %s: %s", int_type_name(type), ds);
    }
    return true;
}

/* A float or double (ParseFp): a number, or a string SimpleAtod reads
 * ("NaN", "Infinity", "-Infinity": JSON has no literal for them); a float
 * must not overflow (an infinite value may be given as such). */
static bool get_real(ctx_t *c, uint8_t type, const nr_jv_t *v, double *out)
{
    double d = 0;
    if (v->type == NR_JV_INT || v->type == NR_JV_UINT || v->type == NR_JV_REAL) {
        d = nr_jv_number(v);
        if (!isfinite(d)) /* a bare NaN / Infinity token, which the JSON reader takes */
            return type_error(c, v, "a number (NaN and Infinity are written as strings)");
    } else if (v->type != NR_JV_STRING) {
        return type_error(c, v, "a number");
    } else if (!string_double(v->u.str, v->n, &d)) {
        return type_error(c, v, "a number");
    }
    if (type == NR__F_FLOAT && isfinite(d) && !isfinite((float)d)) {
        char ds[64];
        describe(v, ds, sizeof(ds));
        return fail(c, "value out of range for float: %s", ds);
    }
    *out = d;
    return true;
}

/* Protobuf's JSON lexer takes UTF-8 by the shape of each sequence (a lead
 * byte and its continuation bytes). */
static bool utf8_ok(const unsigned char *s, size_t n)
{
    for (size_t i = 0; i < n;) {
        unsigned char b = s[i++];
        size_t more = b < 0x80 ? 0 : (b & 0xE0) == 0xC0 ? 1 : (b & 0xF0) == 0xE0 ? 2
                                   : (b & 0xF8) == 0xF0 ? 3 : 4;
        if (more == 4 || n - i < more)
            return false;
        for (; more > 0; more--)
            if ((s[i++] & 0xC0) != 0x80)
                return false;
    }
    return true;
}

static bool text_ok(ctx_t *c, const char *s, size_t n)
{
    if (memchr(s, '\0', n) != NULL)
        return fail(c, "strings with NUL bytes are not supported");
    if (!utf8_ok((const unsigned char *)s, n))
        return fail(c, "invalid UTF-8 in a string");
    return true;
}

static bool get_string(ctx_t *c, const nr_jv_t *v, char **out)
{
    if (v->type != NR_JV_STRING)
        return type_error(c, v, "a string");
    if (!text_ok(c, v->u.str, v->n))
        return false;
    free(*out);
    *out = nr_strndup(v->u.str, v->n);
    return true;
}

/* An enum (ParseEnum): a value name, in any case as Triton parses (its
 * JsonToModelConfig sets case_insensitive_enum_parsing), a string holding a
 * number, or a number; numbers within int32, unknown ones kept (open enums). */
static bool get_enum(ctx_t *c, const nr__cfg_enum_t *en, const nr_jv_t *v, int *out)
{
    bool neg;
    uint64_t mag;
    if (v->type == NR_JV_STRING) {
        if (nr__cfg_enum_value(en, v->u.str, v->n, true, out))
            return true;
        if (string_int(v->u.str, v->n, &neg, &mag) && nr__cfg_int_fits(NR__F_INT32, neg, mag)) {
            nr__cfg_store_int(NR__F_ENUM, out, neg, mag);
            return true;
        }
        char ds[64];
        describe(v, ds, sizeof(ds));
        return fail(c, "unknown enumeration value %s for %s", ds, en->name);
    }
    if (!nr_jv_is_number(v))
        return type_error(c, v, "an enumeration value name or number");
    if (!get_int(c, NR__F_INT32, v, &neg, &mag))
        return false;
    nr__cfg_store_int(NR__F_ENUM, out, neg, mag);
    return true;
}

/* ---- messages ------------------------------------------------------------- */

static bool parse_message(ctx_t *c, const nr__cfg_msg_t *m, void *base, const nr_jv_t *obj);

/* Stores value v (not null) of field f at slot: a scalar or a message. */
static bool set_value(ctx_t *c, const nr__cfg_field_t *f, void *slot, const nr_jv_t *v)
{
    bool neg;
    uint64_t mag;
    double d = 0;
    switch (f->type) {
    case NR__F_MSG: return parse_message(c, f->sub, slot, v);
    case NR__F_STRING: return get_string(c, v, (char **)slot);
    case NR__F_BOOL:
        if (!nr_jv_is_bool(v))
            return type_error(c, v, "true or false");
        *(bool *)slot = v->type == NR_JV_TRUE;
        return true;
    case NR__F_ENUM: return get_enum(c, f->en, v, (int *)slot);
    case NR__F_FLOAT:
    case NR__F_DOUBLE:
        if (!get_real(c, f->type, v, &d))
            return false;
        if (f->type == NR__F_FLOAT)
            *(float *)slot = (float)d;
        else
            *(double *)slot = d;
        return true;
    default:
        if (!get_int(c, f->type, v, &neg, &mag))
            return false;
        nr__cfg_store_int(f->type, slot, neg, mag);
        return true;
    }
}

static bool check_count(ctx_t *c, const nr__cfg_field_t *f, const void *base)
{
    if (*NR__CAT(base, f->off_n, size_t) < NR__CFG_MAX_REPEATED)
        return true;
    return fail(c, "more than %d values for a repeated field", NR__CFG_MAX_REPEATED);
}

static bool add_item(ctx_t *c, const nr__cfg_field_t *f, void *base, const nr_jv_t *v)
{
    if (v->type == NR_JV_NULL)
        return fail(c, "null is not allowed in a repeated field");
    if (!check_count(c, f, base))
        return false;
    char scratch[16];
    return set_value(c, f, nr__cfg_add_elem(f, base, scratch), v);
}

/* A map key into the entry's key field: a string, or a uint64 as decimal
 * text (priority_queue_policy), as protobuf's SimpleAtoi reads it. */
static bool set_key(ctx_t *c, const nr__cfg_field_t *kf, void *entry, const nr_jv_member_t *mem)
{
    if (kf->type == NR__F_STRING) {
        nr_jv_t s = {.type = NR_JV_STRING, .n = mem->key_len, .u.str = mem->key};
        return get_string(c, &s, NR__AT(entry, kf->off, char *));
    }
    bool neg;
    uint64_t mag;
    if (!string_int(mem->key, mem->key_len, &neg, &mag) || neg ||
        !nr__cfg_int_fits(kf->type, neg, mag))
        return fail(c, "map key must be an unsigned integer");
    nr__cfg_store_int(kf->type, NR__AT(entry, kf->off, char), neg, mag);
    return true;
}

/* Member i of object obj as an entry of map field f (a MAP or a SHAPEMAP). */
static bool add_entry(ctx_t *c, const nr__cfg_field_t *f, void *base, const nr_jv_t *obj,
                      size_t i)
{
    const nr_jv_member_t *mem = &obj->u.members[i];
    if (!check_count(c, f, base))
        return false;
    for (size_t k = 0; k < i; k++) {
        const nr_jv_member_t *o = &obj->u.members[k];
        if (o->key_len == mem->key_len && memcmp(o->key, mem->key, o->key_len) == 0)
            return fail(c, "map key given more than once");
    }
    const nr__cfg_msg_t *entry_msg = f->type == NR__F_SHAPEMAP ? &nr__cfg_shape_entry_msg : f->sub;
    const nr__cfg_field_t *kf = &entry_msg->fields[0], *vf = &entry_msg->fields[1];
    nr__cfg_shape_entry_t shape = {0};
    char *e = f->type == NR__F_SHAPEMAP ? (char *)&shape : nr__cfg_add_elem(f, base, NULL);
    bool ok = set_key(c, kf, e, mem);
    if (ok && mem->val.type != NR_JV_NULL) { /* null: the entry holds the default value */
        nr__cfg_mark_set(vf, e);
        ok = set_value(c, vf, NR__AT(e, vf->off, char), &mem->val);
    }
    if (f->type == NR__F_SHAPEMAP)
        nr__cfg_shapemap_put(f, base, &shape);
    else if (ok)
        nr__cfg_map_dedupe(f, base); /* "1" and "01" are one uint64 key: the last wins */
    return ok;
}

static bool parse_field(ctx_t *c, const nr__cfg_msg_t *m, void *base, unsigned char *seen,
                        const nr__cfg_field_t *f, const nr_jv_t *v)
{
    if (v->type == NR_JV_NULL)
        return true; /* the field keeps its default and does not count as given */
    size_t idx = nr__cfg_field_index(m, f);
    const nr__cfg_field_t *rival = nr__cfg_oneof_rival(m, f, seen);
    if (rival != NULL)
        return fail(c, "given along with \"%s\", another member of oneof \"%s\"", rival->name,
                    f->oneof);
    if (seen[idx])
        return fail(c, "field given more than once");
    bool is_map = f->type == NR__F_SHAPEMAP || (f->flags & NR__FL_MAP);
    if (f->rep == NR__R_ONE && !is_map) {
        seen[idx] = 1;
        nr__cfg_mark_set(f, base);
        return set_value(c, f, NR__AT(base, f->off, char), v);
    }
    if (v->type != (is_map ? NR_JV_OBJECT : NR_JV_ARRAY))
        return type_error(c, v, is_map ? "an object" : "an array");
    seen[idx] = v->n > 0; /* as protobuf: an empty list or map sets nothing */
    for (size_t i = 0; i < v->n; i++) {
        size_t mark = is_map ? push_key(c, v->u.members[i].key, v->u.members[i].key_len, true)
                             : push_index(c, i);
        bool ok = is_map ? add_entry(c, f, base, v, i) : add_item(c, f, base, &v->u.items[i]);
        pop(c, mark);
        if (!ok)
            return false;
    }
    return true;
}

static bool parse_message(ctx_t *c, const nr__cfg_msg_t *m, void *base, const nr_jv_t *obj)
{
    if (obj->type != NR_JV_OBJECT)
        return type_error(c, obj, "an object");
    unsigned char seen[64] = {0};
    if (m->n_fields > sizeof(seen))
        return fail(c, "internal: message table too large");
    for (size_t i = 0; i < obj->n; i++) {
        const nr_jv_member_t *mem = &obj->u.members[i];
        const nr__cfg_field_t *f = nr__cfg_find_field(m, mem->key, mem->key_len, true);
        if (f == NULL) {
            char d[64];
            nr_pbtxt_describe_str(mem->key, mem->key_len, d, sizeof(d));
            return fail(c, "message type \"%s\" has no field named %s", m->type_name, d);
        }
        size_t mark = push_key(c, mem->key, mem->key_len, false);
        bool ok = parse_field(c, m, base, seen, f, &mem->val);
        pop(c, mark);
        if (!ok)
            return false;
    }
    return true;
}

/* ---- public --------------------------------------------------------------- */

nr_status_t *nr_cfg_parse_json(const char *text, size_t len, nr_model_config_t **out)
{
    *out = NULL;
    nr_json_doc_t *doc;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(text != NULL ? text : "", text != NULL ? len : 0, &doc, &root);
    if (st != NULL) {
        if (st->code != NR_INVALID_ARG)
            return st; /* no memory for the document */
        static const char reader[] = "failed to parse the request JSON buffer: ";
        const char *why = st->msg;
        if (strncmp(why, reader, sizeof(reader) - 1) == 0)
            why += sizeof(reader) - 1;
        nr_status_t *e = nr_status_new(NR_INVALID_ARG, "invalid JSON: %s", why);
        nr_status_free(st);
        return e;
    }
    nr_model_config_t *cfg = nr_cfg_new();
    ctx_t c = {.err = NULL};
    nr_buf_init(&c.path);
    if (root->type != NR_JV_OBJECT)
        type_error(&c, root, "a JSON object (a ModelConfig)");
    else
        parse_message(&c, &nr__cfg_model_config_msg, cfg, root);
    nr_buf_free(&c.path);
    nr_json_free(doc);
    if (c.err != NULL) {
        nr_cfg_free(cfg);
        return c.err;
    }
    *out = cfg;
    return NULL;
}
