/* config_pbtxt.c - nr_model_config_t -> config.pbtxt (protobuf text format).
 *
 * Writes a config the way protobuf's TextFormat printer (protoc --decode,
 * DebugString) writes inference.ModelConfig, so that a tool can save a
 * variant config that both nereid (nr_cfg_parse) and Triton load unchanged.
 * It is cfg_walk.c's text emitter: the walker goes through the schema tables
 * of cfg_fields.c with the presence rules it applies for config_pb.c too:
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

/* ---- the emitter (cfg_walk.c): a line per value, a block per message ---- */

typedef struct {
    nr_buf_t *b;
    int depth;
} text_t;

static void open_block(text_t *t, const char *name)
{
    put_indent(t->b, t->depth++);
    nr_buf_puts(t->b, name);
    nr_buf_puts(t->b, " {\n");
}

static void close_block(text_t *t)
{
    put_indent(t->b, --t->depth);
    nr_buf_puts(t->b, "}\n");
}

/* A message as `name {`, its fields two spaces deeper, `}`; the root is not wrapped. */
static void msg_begin(void *ctx, const nr__cfg_field_t *f)
{
    if (f != NULL)
        open_block(ctx, f->name);
}

static void msg_end(void *ctx, const nr__cfg_field_t *f)
{
    if (f != NULL)
        close_block(ctx);
}

/* A repeated field is its values one after the other, each with the name. */
static void field_mark(void *ctx, const nr__cfg_field_t *f, bool list, size_t n)
{
}

static void scalar(void *ctx, const nr__cfg_field_t *f, const void *p)
{
    text_t *t = ctx;
    put_indent(t->b, t->depth);
    nr_buf_puts(t->b, f->name);
    nr_buf_puts(t->b, ": ");
    put_scalar(t->b, f, p);
    nr_buf_putc(t->b, '\n');
}

/* A map entry under the map's name: key and value both written, even when zero, as
 * protobuf prints map entries. */
static void entry_begin(void *ctx, const nr__cfg_field_t *f, const nr__cfg_field_t *kf,
                        const void *key)
{
    open_block(ctx, f->name);
    scalar(ctx, kf, key);
}

static void entry_end(void *ctx, const nr__cfg_field_t *f)
{
    close_block(ctx);
}

static const nr__cfg_emitter_t text_emitter = {
    .by_number = true,   /* the printer lists fields in field-number order */
    .all_fields = false, /* proto3: default scalars and empty repeated fields are left out */
    .msg_begin = msg_begin,
    .msg_end = msg_end,
    .field_begin = field_mark,
    .field_end = field_mark,
    .scalar = scalar,
    .entry_begin = entry_begin,
    .entry_end = entry_end,
};

char *nr_cfg_to_pbtxt(const nr_model_config_t *cfg, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    text_t t = {.b = &b, .depth = 0};
    nr__cfg_walk(&text_emitter, &t, &nr__cfg_model_config_msg, cfg);
    size_t n;
    char *s = nr_buf_steal(&b, &n);
    if (len)
        *len = n;
    return s;
}
