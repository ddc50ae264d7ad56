/* config_json.c - nr_model_config_t -> the JSON Triton serves at .../config.
 *
 * Triton prints the proto with protobuf's JSON printer (snake_case names,
 * default scalars, [] and {} for empty repeated/maps, unset messages left
 * out, enums by name), turns most 64-bit strings back into numbers, and
 * re-serializes with rapidjson. This walks the schema tables of cfg_fields.c
 * to reproduce those bytes. Pure; called once per model load.
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

static void put_msg(nr_buf_t *b, const nr__cfg_msg_t *m, const void *base);

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

/* A map entry: "key":<value>. Keys are always JSON strings. */
static void put_entry(nr_buf_t *b, const nr__cfg_msg_t *entry, const void *e)
{
    const nr__cfg_field_t *kf = &entry->fields[0], *vf = &entry->fields[1];
    if (kf->type == NR__F_STRING) {
        put_str(b, *NR__CAT(e, kf->off, char *));
    } else {
        nr_buf_putc(b, '"');
        nr_buf_u64(b, *NR__CAT(e, kf->off, uint64_t));
        nr_buf_putc(b, '"');
    }
    nr_buf_putc(b, ':');
    if (vf->type == NR__F_MSG)
        put_msg(b, vf->sub, NR__CAT(e, vf->off, char));
    else
        put_scalar(b, vf, NR__CAT(e, vf->off, char));
}

static void put_shapemap(nr_buf_t *b, const nr__cfg_field_t *f, const void *base)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    typedef char **strv_t;
    char *const *names = *NR__CAT(base, f->off, strv_t);
    const nr_cfg_dims_t *dims = *NR__CAT(base, f->off_aux, nr_cfg_dims_t *);
    nr_buf_putc(b, '{');
    for (size_t i = 0; i < n; i++) {
        nr__cfg_shape_entry_t e = {names[i], dims[i]};
        if (i)
            nr_buf_putc(b, ',');
        put_entry(b, &nr__cfg_shape_entry_msg, &e);
    }
    nr_buf_putc(b, '}');
}

static void put_repeated(nr_buf_t *b, const nr__cfg_field_t *f, const void *base)
{
    size_t n = *NR__CAT(base, f->off_n, size_t);
    const char *arr = f->rep == NR__R_FIX2 ? NR__CAT(base, f->off, char)
                                           : *NR__CAT(base, f->off, char *);
    if (f->rep == NR__R_FIX2 && n > 2)
        n = 2;
    size_t es = nr__cfg_elem_size(f);
    bool is_map = (f->flags & NR__FL_MAP) != 0;
    nr_buf_putc(b, is_map ? '{' : '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            nr_buf_putc(b, ',');
        if (is_map)
            put_entry(b, f->sub, arr + i * es);
        else if (f->type == NR__F_MSG)
            put_msg(b, f->sub, arr + i * es);
        else
            put_scalar(b, f, arr + i * es);
    }
    nr_buf_putc(b, is_map ? '}' : ']');
}

static void put_msg(nr_buf_t *b, const nr__cfg_msg_t *m, const void *base)
{
    bool first = true;
    nr_buf_putc(b, '{');
    for (size_t i = 0; i < m->n_fields; i++) {
        const nr__cfg_field_t *f = &m->fields[i];
        if (f->flags & NR__FL_ALIAS)
            continue;
        if (f->rep == NR__R_ONE && f->type == NR__F_MSG && !nr__cfg_msg_present(f, base))
            continue;
        if (f->rep == NR__R_ONE && f->type != NR__F_MSG && f->oneof != NULL &&
            *NR__CAT(base, f->off_oneof, int) != f->oneof_val)
            continue;
        if (!first)
            nr_buf_putc(b, ',');
        first = false;
        nr_buf_json_str(b, f->name, strlen(f->name));
        nr_buf_putc(b, ':');
        if (f->type == NR__F_SHAPEMAP)
            put_shapemap(b, f, base);
        else if (f->rep != NR__R_ONE)
            put_repeated(b, f, base);
        else if (f->type == NR__F_MSG)
            put_msg(b, f->sub, NR__CAT(base, f->off, char));
        else
            put_scalar(b, f, NR__CAT(base, f->off, char));
    }
    nr_buf_putc(b, '}');
}

char *nr_cfg_to_json(const nr_model_config_t *cfg, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    /* Triton answers an empty body when every field is at its default. */
    if (!nr__cfg_msg_is_empty(&nr__cfg_model_config_msg, cfg))
        put_msg(&b, &nr__cfg_model_config_msg, cfg);
    size_t n;
    char *s = nr_buf_steal(&b, &n);
    if (len)
        *len = n;
    return s;
}
