/* config_pbtxt.c - nr_model_config_t -> config.pbtxt (protobuf text format).
 *
 * Writes a config the way protobuf's TextFormat printer (protoc --decode,
 * DebugString) writes inference.ModelConfig, so that a tool can save a
 * variant config that both nereid (nr_cfg_parse) and Triton load unchanged.
 * It walks the schema tables of cfg_fields.c with the presence rules of
 * config_json.c and config_pb.c:
 *   - fields in field-number order, as the printer lists them (aliases never);
 *   - a scalar as `name: value` on its line, a repeated one a line per value;
 *   - a message as `name {`, its fields indented two more spaces, `}`; a
 *     present empty message as `name {` `}`, so its presence survives;
 *   - singular scalars at their proto3 zero value and absent messages left
 *     out; a selected oneof member written even when zero;
 *   - a map entry as `name { key: .. value .. }` with key and value always
 *     written, entries in the config's order (protobuf sorts them by key; the
 *     config's order is what nr_cfg_to_json keeps, and either reads back the
 *     same map);
 *   - strings quoted with protobuf's CEscape (\n \r \t \" \' \\, other bytes
 *     outside 0x20..0x7e as three octal digits), enums by name (an unknown
 *     number as the number), bools true/false, 64-bit integers unquoted,
 *     floats as SimpleFtoa/SimpleDtoa (%g at 6 or 15 digits, 9 or 17 when
 *     that does not read back), inf, -inf and nan.
 * An all-default config gives "". Pure; the tables are immutable, so any
 * thread may call it.
 */
#include "model_config.h"

#include "../common/buf.h"
#include "cfg_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static void put_msg(nr_buf_t *b, const nr__cfg_msg_t *m, const void *base, int depth);

static void put_indent(nr_buf_t *b, int depth)
{
    for (int i = 0; i < depth; i++)
        nr_buf_puts(b, "  ");
}

/* A quoted string, escaped as protobuf's CEscape escapes it. */
static void put_str(nr_buf_t *b, const char *s)
{
    nr_buf_putc(b, '"');
    for (const unsigned char *p = (const unsigned char *)(s ? s : ""); *p; p++) {
        switch (*p) {
        case '\n': nr_buf_puts(b, "\\n"); break;
        case '\r': nr_buf_puts(b, "\\r"); break;
        case '\t': nr_buf_puts(b, "\\t"); break;
        case '"': nr_buf_puts(b, "\\\""); break;
        case '\'': nr_buf_puts(b, "\\'"); break;
        case '\\': nr_buf_puts(b, "\\\\"); break;
        default:
            if (*p < 0x20 || *p > 0x7e)
                nr_buf_printf(b, "\\%03o", *p);
            else
                nr_buf_putc(b, (char)*p);
            break;
        }
    }
    nr_buf_putc(b, '"');
}

/* protobuf's SimpleFtoa/SimpleDtoa: %g at FLT_DIG/DBL_DIG digits, more when
 * that does not read back. Read back as both readers do: strtod, then a
 * float field narrows the double. */
static void put_real(nr_buf_t *b, double v, bool is_float)
{
    if (isnan(v)) {
        nr_buf_puts(b, "nan");
        return;
    }
    if (isinf(v)) {
        nr_buf_puts(b, v < 0 ? "-inf" : "inf");
        return;
    }
    char s[64];
    if (is_float) {
        snprintf(s, sizeof(s), "%.*g", FLT_DIG, v);
        if ((float)strtod(s, NULL) != (float)v)
            snprintf(s, sizeof(s), "%.*g", FLT_DIG + 3, v);
    } else {
        snprintf(s, sizeof(s), "%.*g", DBL_DIG, v);
        if (strtod(s, NULL) != v)
            snprintf(s, sizeof(s), "%.*g", DBL_DIG + 2, v);
    }
    nr_buf_puts(b, s);
}

/* One value of a non-message field at p. */
static void put_scalar(nr_buf_t *b, const nr__cfg_field_t *f, const void *p)
{
    switch (f->type) {
    case NR__F_STRING: put_str(b, *(char *const *)p); break;
    case NR__F_BOOL: nr_buf_puts(b, *(const bool *)p ? "true" : "false"); break;
    case NR__F_INT32: nr_buf_i64(b, *(const int32_t *)p); break;
    case NR__F_UINT32: nr_buf_u64(b, *(const uint32_t *)p); break;
    case NR__F_INT64: nr_buf_i64(b, *(const int64_t *)p); break;
    case NR__F_UINT64: nr_buf_u64(b, *(const uint64_t *)p); break;
    case NR__F_ENUM: {
        const char *name = nr__cfg_enum_name(f->en, *(const int *)p);
        if (name)
            nr_buf_puts(b, name);
        else
            nr_buf_i64(b, *(const int *)p); /* open enum: unknown numbers print as numbers */
        break;
    }
    case NR__F_FLOAT: put_real(b, *(const float *)p, true); break;
    case NR__F_DOUBLE: put_real(b, *(const double *)p, false); break;
    default: break;
    }
}

static void open_msg(nr_buf_t *b, const char *name, int depth)
{
    put_indent(b, depth);
    nr_buf_puts(b, name);
    nr_buf_puts(b, " {\n");
}

static void close_msg(nr_buf_t *b, int depth)
{
    put_indent(b, depth);
    nr_buf_puts(b, "}\n");
}

/* One value of field f at p on its own line(s): `name: v` or `name { .. }`. */
static void put_value(nr_buf_t *b, const nr__cfg_field_t *f, const void *p, int depth)
{
    if (f->type == NR__F_MSG) {
        open_msg(b, f->name, depth);
        put_msg(b, f->sub, p, depth + 1);
        close_msg(b, depth);
        return;
    }
    put_indent(b, depth);
    nr_buf_puts(b, f->name);
    nr_buf_puts(b, ": ");
    put_scalar(b, f, p);
    nr_buf_putc(b, '\n');
}

/* A map entry under the map's name: key and value both written, even when
 * zero, as protobuf prints map entries. */
static void put_entry(nr_buf_t *b, const char *name, const nr__cfg_msg_t *entry, const void *e,
                      int depth)
{
    open_msg(b, name, depth);
    for (size_t i = 0; i < entry->n_fields; i++) {
        const nr__cfg_field_t *f = &entry->fields[i];
        put_value(b, f, NR__CAT(e, f->off, char), depth + 1);
    }
    close_msg(b, depth);
}

static void put_shapemap(nr_buf_t *b, const nr__cfg_field_t *f, const void *base, int depth)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    typedef char **strv_t;
    char *const *names = *NR__CAT(base, f->off, strv_t);
    const nr_cfg_dims_t *dims = *NR__CAT(base, f->off_aux, nr_cfg_dims_t *);
    for (size_t i = 0; i < n; i++) {
        nr__cfg_shape_entry_t e = {names[i], dims[i]};
        put_entry(b, f->name, &nr__cfg_shape_entry_msg, &e, depth);
    }
}

static void put_repeated(nr_buf_t *b, const nr__cfg_field_t *f, const void *base, int depth)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    const char *arr = f->rep == NR__R_FIX2 ? NR__CAT(base, f->off, char)
                                           : *NR__CAT(base, f->off, char *);
    if (f->rep == NR__R_FIX2 && n > 2)
        n = 2; /* as config_json.c: the inline array holds two */
    size_t es = nr__cfg_elem_size(f);
    for (size_t i = 0; i < n; i++) {
        if (f->flags & NR__FL_MAP)
            put_entry(b, f->name, f->sub, arr + i * es, depth);
        else
            put_value(b, f, arr + i * es, depth);
    }
}

static void put_field(nr_buf_t *b, const nr__cfg_field_t *f, const void *base, int depth)
{
    const void *p = NR__CAT(base, f->off, char);
    if (f->type == NR__F_SHAPEMAP) {
        put_shapemap(b, f, base, depth);
    } else if (f->rep != NR__R_ONE) {
        put_repeated(b, f, base, depth);
    } else if (f->type == NR__F_MSG) {
        if (nr__cfg_msg_present(f, base))
            put_value(b, f, p, depth);
    } else if (f->oneof != NULL) {
        if (*NR__CAT(base, f->off_oneof, int) == f->oneof_val)
            put_value(b, f, p, depth);
    } else if (!nr__cfg_scalar_is_default(f, base)) {
        put_value(b, f, p, depth);
    }
}

static void put_msg(nr_buf_t *b, const nr__cfg_msg_t *m, const void *base, int depth)
{
    for (const nr__cfg_field_t *f = nr__cfg_next_field(m, 0); f != NULL;
         f = nr__cfg_next_field(m, f->num))
        put_field(b, f, base, depth);
}

char *nr_cfg_to_pbtxt(const nr_model_config_t *cfg, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    put_msg(&b, &nr__cfg_model_config_msg, cfg, 0);
    size_t n;
    char *s = nr_buf_steal(&b, &n);
    if (len)
        *len = n;
    return s;
}
