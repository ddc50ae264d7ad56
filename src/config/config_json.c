/* config_json.c - nr_model_config_t -> the JSON Triton serves at .../config.
 *
 * Triton prints the proto with protobuf's JSON printer (snake_case names,
 * default scalars, [] and {} for empty repeated/maps, unset messages left
 * out, enums by name), turns most 64-bit strings back into numbers, and
 * re-serializes with rapidjson. This is cfg_walk.c's JSON emitter: the walker
 * goes through the schema tables of cfg_fields.c, this spells those bytes.
 * Pure; called once per model load.
 */
#include "model_config.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "cfg_int.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* protobuf writes floats with SimpleFtoa/SimpleDtoa (%g at FLT_DIG/DBL_DIG
 * digits, more if that does not read back); rapidjson then reads that text as
 * an integer when it has no '.'/exponent, else as a double it prints shortest. */
static void put_real(nr_buf_t *b, double v, bool is_float)
{
    if (isnan(v)) {
        nr_buf_puts(b, "\"NaN\"");
        return;
    }
    if (isinf(v)) {
        nr_buf_puts(b, v < 0 ? "\"-Infinity\"" : "\"Infinity\"");
        return;
    }
    char s[64];
    if (is_float) {
        snprintf(s, sizeof(s), "%.*g", FLT_DIG, v);
        if (strtof(s, NULL) != (float)v)
            snprintf(s, sizeof(s), "%.*g", FLT_DIG + 3, v);
    } else {
        snprintf(s, sizeof(s), "%.*g", DBL_DIG, v);
        if (strtod(s, NULL) != v)
            snprintf(s, sizeof(s), "%.*g", DBL_DIG + 2, v);
    }
    if (strpbrk(s, ".eE") == NULL) {
        nr_buf_i64(b, strtoll(s, NULL, 10)); /* "-0" reads back as integer 0 */
        return;
    }
    nr_buf_double(b, strtod(s, NULL));
}

static void put_str(nr_buf_t *b, const char *s)
{
    if (s == NULL)
        s = "";
    nr_buf_json_str(b, s, strlen(s));
}

/* One value of a non-message field at p. */
static void put_scalar(nr_buf_t *b, const nr__cfg_field_t *f, const void *p)
{
    bool quote = (f->flags & NR__FL_STR64) != 0;
    switch (f->type) {
    case NR__F_STRING: put_str(b, *(char *const *)p); break;
    case NR__F_BOOL: nr_buf_puts(b, *(const bool *)p ? "true" : "false"); break;
    case NR__F_INT32: nr_buf_i64(b, *(const int32_t *)p); break;
    case NR__F_UINT32: nr_buf_u64(b, *(const uint32_t *)p); break;
    case NR__F_ENUM: {
        const char *name = nr__cfg_enum_name(f->en, *(const int *)p);
        if (name)
            put_str(b, name);
        else
            nr_buf_i64(b, *(const int *)p); /* open enum: unknown numbers print as numbers */
        break;
    }
    case NR__F_INT64:
        if (quote)
            nr_buf_putc(b, '"');
        nr_buf_i64(b, *(const int64_t *)p);
        if (quote)
            nr_buf_putc(b, '"');
        break;
    case NR__F_UINT64:
        if (quote)
            nr_buf_putc(b, '"');
        nr_buf_u64(b, *(const uint64_t *)p);
        if (quote)
            nr_buf_putc(b, '"');
        break;
    case NR__F_FLOAT: put_real(b, *(const float *)p, true); break;
    case NR__F_DOUBLE: put_real(b, *(const double *)p, false); break;
    default: break;
    }
}

/* ---- the emitter (cfg_walk.c): objects, arrays and maps, a separator before all but
 * the first item of each ---- */

enum { LV_OBJECT, LV_ARRAY, LV_MAP };
#define MAX_DEPTH 32 /* the schema nests 6 deep */

typedef struct {
    nr_buf_t *b;
    int depth;
    unsigned char kind[MAX_DEPTH]; /* LV_* of each open level */
    bool any[MAX_DEPTH];           /* an item was written at that level */
} json_t;

static void open_level(json_t *j, int kind, char c)
{
    nr_buf_putc(j->b, c);
    j->depth++;
    j->kind[j->depth] = (unsigned char)kind;
    j->any[j->depth] = false;
}

/* Before an item of the current level. */
static void item(json_t *j)
{
    if (j->any[j->depth])
        nr_buf_putc(j->b, ',');
    j->any[j->depth] = true;
}

static void msg_begin(void *ctx, const nr__cfg_field_t *f)
{
    json_t *j = ctx;
    if (j->kind[j->depth] == LV_ARRAY)
        item(j);
    open_level(j, LV_OBJECT, '{');
}

static void close_level(void *ctx, char c)
{
    json_t *j = ctx;
    nr_buf_putc(j->b, c);
    j->depth--;
}

static void msg_end(void *ctx, const nr__cfg_field_t *f)
{
    close_level(ctx, '}');
}

static bool is_map(const nr__cfg_field_t *f)
{
    return (f->flags & NR__FL_MAP) != 0 || f->type == NR__F_SHAPEMAP;
}

static void field_begin(void *ctx, const nr__cfg_field_t *f, bool list, size_t n)
{
    json_t *j = ctx;
    item(j);
    nr_buf_json_str(j->b, f->name, strlen(f->name));
    nr_buf_putc(j->b, ':');
    if (list)
        open_level(j, is_map(f) ? LV_MAP : LV_ARRAY, is_map(f) ? '{' : '[');
}

static void field_end(void *ctx, const nr__cfg_field_t *f, bool list, size_t n)
{
    if (list)
        close_level(ctx, is_map(f) ? '}' : ']');
}

static void scalar(void *ctx, const nr__cfg_field_t *f, const void *p)
{
    json_t *j = ctx;
    if (j->kind[j->depth] == LV_ARRAY)
        item(j);
    put_scalar(j->b, f, p);
}

/* A map entry: "key":<value>. Keys are always JSON strings. */
static void entry_begin(void *ctx, const nr__cfg_field_t *f, const nr__cfg_field_t *kf,
                        const void *key)
{
    json_t *j = ctx;
    item(j);
    if (kf->type == NR__F_STRING) {
        put_str(j->b, *(char *const *)key);
    } else {
        nr_buf_putc(j->b, '"');
        nr_buf_u64(j->b, *(const uint64_t *)key);
        nr_buf_putc(j->b, '"');
    }
    nr_buf_putc(j->b, ':');
}

static void entry_end(void *ctx, const nr__cfg_field_t *f)
{
}

static const nr__cfg_emitter_t json_emitter = {
    .by_number = false, /* declaration order, as protobuf's JSON printer */
    .all_fields = true, /* default scalars, [] and {} too */
    .msg_begin = msg_begin,
    .msg_end = msg_end,
    .field_begin = field_begin,
    .field_end = field_end,
    .scalar = scalar,
    .entry_begin = entry_begin,
    .entry_end = entry_end,
};

char *nr_cfg_to_json(const nr_model_config_t *cfg, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    /* Triton answers an empty body when every field is at its default. */
    if (!nr__cfg_msg_is_empty(&nr__cfg_model_config_msg, cfg)) {
        json_t j = {.b = &b, .kind = {LV_OBJECT}};
        nr__cfg_walk(&json_emitter, &j, &nr__cfg_model_config_msg, cfg);
    }
    size_t n;
    char *s = nr_buf_steal(&b, &n);
    if (len)
        *len = n;
    return s;
}
