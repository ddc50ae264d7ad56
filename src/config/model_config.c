/* model_config.c - config.pbtxt -> nr_model_config_t, through the schema tables.
 *
 * nr_pbtxt_parse gives a generic tree; this file walks it against the tables
 * of cfg_fields.c: unknown fields, wrong value kinds, ranges, enums, repeated
 * singular fields and oneof conflicts are reported as INTERNAL "failed to read
 * text proto from <path>: <path>:<line>:<col>: <field>: <problem>". Also the
 * file reader, nr_cfg_new/free and the dtype helpers. Pure, thread-safe.
 */
#include "model_config.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/limits.h"
#include "cfg_int.h"
#include "pbtxt.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define STACK_MAX (NR_MAX_PBTXT_DEPTH + 8)

typedef struct {
    const char *path;
    const char *stack[STACK_MAX]; /* field names from the root to the current one */
    int depth;
    nr_status_t *err;
} ctx_t;

static bool cfail(ctx_t *c, uint32_t line, uint32_t col, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static bool cfail(ctx_t *c, uint32_t line, uint32_t col, const char *fmt, ...)
{
    if (c->err != NULL)
        return false;
    va_list ap;
    va_start(ap, fmt);
    c->err = nr_pbtxt_errorv(c->path, line, col, c->stack, c->depth, fmt, ap);
    va_end(ap);
    return false;
}

static bool type_error(ctx_t *c, const nr_pbtxt_node_t *v, const char *want)
{
    char d[64];
    nr_pbtxt_describe(v, d, sizeof(d));
    return cfail(c, v->vline, v->vcol, "expected %s, got %s", want, d);
}

/* ---- scalar conversion ---------------------------------------------------- */

/* Magnitude of an INT token (decimal, 0x hex, 0-octal); false on overflow. */
static bool int_magnitude(const nr_pbtxt_node_t *v, uint64_t *out)
{
    const char *s = v->text;
    unsigned base = 10;
    if (s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
        base = 16;
        s += 2;
    } else if (s[0] == '0' && s[1] != '\0') {
        base = 8;
        s += 1;
    }
    uint64_t m = 0;
    for (; *s; s++) {
        unsigned d = (*s >= '0' && *s <= '9') ? (unsigned)(*s - '0') : (unsigned)((*s | 0x20) - 'a' + 10);
        if (m > (UINT64_MAX - d) / base)
            return false;
        m = m * base + d;
    }
    *out = m;
    return true;
}

/* Reads an integer that fits a field of the given type as its sign and magnitude. */
static bool get_integer(ctx_t *c, uint8_t type, const nr_pbtxt_node_t *v, bool *neg,
                        uint64_t *mag)
{
    bool is_unsigned = type == NR__F_UINT32 || type == NR__F_UINT64;
    if (v->kind != NR_PBTXT_SCALAR || v->tok != NR_PBTXT_INT)
        return type_error(c, v, is_unsigned ? "an unsigned integer" : "an integer");
    uint64_t m;
    bool ok = int_magnitude(v, &m);
    if (is_unsigned && v->neg)
        return cfail(c, v->vline, v->vcol, "negative value -%s for an unsigned field", v->text);
    if (!ok || !nr__cfg_int_fits(type, v->neg, m))
        return cfail(c, v->vline, v->vcol, "integer out of range (%s%s)", v->neg ? "-" : "",
                     v->text);
    *neg = v->neg;
    *mag = m;
    return true;
}

static bool get_double(ctx_t *c, const nr_pbtxt_node_t *v, double *out)
{
    if (v->kind != NR_PBTXT_SCALAR || v->tok == NR_PBTXT_STRING)
        return type_error(c, v, "a number");
    double d;
    if (v->tok == NR_PBTXT_IDENT) {
        if (strcasecmp(v->text, "inf") == 0 || strcasecmp(v->text, "infinity") == 0)
            d = HUGE_VAL;
        else if (strcasecmp(v->text, "nan") == 0)
            d = __builtin_nan("");
        else
            return type_error(c, v, "a number");
    } else {
        if (v->tok == NR_PBTXT_INT && v->text[0] == '0' && v->text[1] != '\0')
            return cfail(c, v->vline, v->vcol, "expected a decimal number, got %s", v->text);
        char *tmp = nr_strndup(v->text, v->len); /* drop an f/F suffix for strtod */
        if (v->len && (tmp[v->len - 1] == 'f' || tmp[v->len - 1] == 'F'))
            tmp[v->len - 1] = '\0';
        d = strtod(tmp, NULL);
        free(tmp);
    }
    *out = v->neg ? -d : d;
    return true;
}

static bool get_bool(ctx_t *c, const nr_pbtxt_node_t *v, bool *out)
{
    char d[64];
    if (v->kind == NR_PBTXT_SCALAR && v->tok == NR_PBTXT_IDENT && !v->neg) {
        static const char *const t[] = {"true", "True", "t"};
        static const char *const f[] = {"false", "False", "f"};
        for (int i = 0; i < 3; i++) {
            if (strcmp(v->text, t[i]) == 0 || strcmp(v->text, f[i]) == 0) {
                *out = strcmp(v->text, t[i]) == 0;
                return true;
            }
        }
    } else if (v->kind == NR_PBTXT_SCALAR && v->tok == NR_PBTXT_INT && !v->neg) {
        uint64_t m;
        if (int_magnitude(v, &m) && m <= 1) {
            *out = m == 1;
            return true;
        }
    } else if (v->kind != NR_PBTXT_SCALAR || v->tok == NR_PBTXT_STRING) {
        return type_error(c, v, "a boolean");
    }
    nr_pbtxt_describe(v, d, sizeof(d));
    return cfail(c, v->vline, v->vcol, "invalid value for a boolean field: %s", d);
}

static bool get_enum(ctx_t *c, const nr__cfg_enum_t *en, const nr_pbtxt_node_t *v, int *out)
{
    if (v->kind == NR_PBTXT_SCALAR && v->tok == NR_PBTXT_IDENT && !v->neg) {
        if (nr__cfg_enum_value(en, v->text, v->len, false, out))
            return true;
        return cfail(c, v->vline, v->vcol, "unknown enumeration value \"%s\" for %s", v->text,
                     en->name);
    }
    if (v->kind == NR_PBTXT_SCALAR && v->tok == NR_PBTXT_INT) {
        bool neg;
        uint64_t mag;
        if (!get_integer(c, NR__F_INT32, v, &neg, &mag))
            return false;
        /* proto3 enums are open: unknown numbers are kept */
        nr__cfg_store_int(NR__F_ENUM, out, neg, mag);
        return true;
    }
    return type_error(c, v, "an enum value");
}

static bool get_string(ctx_t *c, const nr_pbtxt_node_t *v, char **out)
{
    if (v->kind != NR_PBTXT_SCALAR || v->tok != NR_PBTXT_STRING)
        return type_error(c, v, "a string");
    if (memchr(v->text, '\0', v->len) != NULL)
        return cfail(c, v->vline, v->vcol, "strings with NUL bytes are not supported");
    char *s = nr_malloc(v->len + 1);
    memcpy(s, v->text, v->len + 1);
    *out = s;
    return true;
}

/* ---- messages ------------------------------------------------------------- */

static bool parse_message(ctx_t *c, const nr__cfg_msg_t *m, void *base,
                          const nr_pbtxt_node_t *node);

/* Stores scalar or message value v of field f at slot. */
static bool set_value(ctx_t *c, const nr__cfg_field_t *f, void *slot, const nr_pbtxt_node_t *v)
{
    bool neg;
    uint64_t mag;
    double d;
    switch (f->type) {
    case NR__F_MSG:
        if (v->kind != NR_PBTXT_MESSAGE)
            return type_error(c, v, "a message ('{')");
        return parse_message(c, f->sub, slot, v);
    case NR__F_STRING: {
        char *str = NULL;
        if (!get_string(c, v, &str))
            return false;
        free(*(char **)slot);
        *(char **)slot = str;
        return true;
    }
    case NR__F_BOOL: return get_bool(c, v, (bool *)slot);
    case NR__F_ENUM: return get_enum(c, f->en, v, (int *)slot);
    case NR__F_FLOAT:
        if (!get_double(c, v, &d))
            return false;
        *(float *)slot = (float)d;
        return true;
    case NR__F_DOUBLE: return get_double(c, v, (double *)slot);
    default: break;
    }
    if (!get_integer(c, f->type, v, &neg, &mag))
        return false;
    nr__cfg_store_int(f->type, slot, neg, mag);
    return true;
}

/* map<string, Shape{dim}> stored as parallel (names, dims) arrays. */
static bool add_shape_entry(ctx_t *c, const nr__cfg_field_t *f, void *base,
                            const nr_pbtxt_node_t *v)
{
    if (v->kind != NR_PBTXT_MESSAGE)
        return type_error(c, v, "a message ('{')");
    nr__cfg_shape_entry_t e = {0};
    bool ok = parse_message(c, &nr__cfg_shape_entry_msg, &e, v);
    nr__cfg_shapemap_put(f, base, &e);
    return ok;
}

static bool add_item(ctx_t *c, const nr__cfg_field_t *f, void *base, const nr_pbtxt_node_t *v)
{
    if (*NR__AT(base, f->off_n, size_t) >= NR__CFG_MAX_REPEATED)
        return cfail(c, v->vline, v->vcol, "more than %d values for a repeated field",
                     NR__CFG_MAX_REPEATED);
    if (f->type == NR__F_SHAPEMAP)
        return add_shape_entry(c, f, base, v);
    char scratch[16];
    if (!set_value(c, f, nr__cfg_add_elem(f, base, scratch), v))
        return false;
    if (f->flags & NR__FL_MAP)
        nr__cfg_map_dedupe(f, base);
    return true;
}

/* Checks protobuf's rules for a second value of a singular field. */
static bool check_singular(ctx_t *c, const nr__cfg_msg_t *m, const nr__cfg_field_t *f,
                           const unsigned char *seen, const void *base,
                           const nr_pbtxt_node_t *n)
{
    size_t idx = nr__cfg_field_index(m, f);
    if (n->kind == NR_PBTXT_LIST)
        return cfail(c, n->line, n->col, "list syntax '[...]' used for non-repeated field \"%s\"",
                     f->name);
    if (seen[idx] && (f->type == NR__F_MSG || f->oneof != NULL ||
                      !nr__cfg_scalar_is_default(f, base)))
        return cfail(c, n->line, n->col, "Non-repeated field \"%s\" is specified multiple times",
                     f->name);
    const nr__cfg_field_t *o = nr__cfg_oneof_rival(m, f, seen);
    if (o != NULL)
        return cfail(c, n->line, n->col,
                     "Field \"%s\" is specified along with field \"%s\", another member of "
                     "oneof \"%s\"",
                     f->name, o->name, f->oneof);
    return true;
}

static bool parse_field(ctx_t *c, const nr__cfg_msg_t *m, void *base, unsigned char *seen,
                        const nr__cfg_field_t *f, const nr_pbtxt_node_t *n)
{
    if (f->rep != NR__R_ONE || f->type == NR__F_SHAPEMAP) {
        if (n->kind != NR_PBTXT_LIST)
            return add_item(c, f, base, n);
        for (const nr_pbtxt_node_t *it = n->child; it; it = it->next)
            if (!add_item(c, f, base, it))
                return false;
        return true;
    }
    if (!check_singular(c, m, f, seen, base, n))
        return false;
    seen[nr__cfg_field_index(m, f)] = 1;
    nr__cfg_mark_set(f, base);
    return set_value(c, f, NR__AT(base, f->off, char), n);
}

static bool parse_message(ctx_t *c, const nr__cfg_msg_t *m, void *base,
                          const nr_pbtxt_node_t *node)
{
    unsigned char seen[64] = {0};
    if (m->n_fields > sizeof(seen))
        return cfail(c, node->line, node->col, "internal: message table too large");
    for (const nr_pbtxt_node_t *n = node->child; n; n = n->next) {
        if (c->depth >= STACK_MAX)
            return cfail(c, n->line, n->col, "message nesting too deep");
        c->stack[c->depth++] = n->name;
        const nr__cfg_field_t *f = nr__cfg_find_field(m, n->name, strlen(n->name), false);
        if (f == NULL)
            return cfail(c, n->line, n->col,
                         "Message type \"%s\" has no field named \"%s\"", m->type_name, n->name);
        bool ok = parse_field(c, m, base, seen, f, n);
        c->depth--;
        if (!ok)
            return false;
    }
    return true;
}

/* ---- public --------------------------------------------------------------- */

nr_model_config_t *nr_cfg_new(void)
{
    return nr_calloc(1, sizeof(nr_model_config_t));
}

void nr_cfg_free(nr_model_config_t *cfg)
{
    if (cfg == NULL)
        return;
    nr__cfg_free_msg(&nr__cfg_model_config_msg, cfg);
    free(cfg);
}

nr_status_t *nr_cfg_parse(const char *text, size_t len, const char *path,
                          nr_model_config_t **out)
{
    *out = NULL;
    if (path == NULL)
        path = "config.pbtxt";
    nr_pbtxt_tree_t *tree;
    nr_status_t *st = nr_pbtxt_parse(text, len, path, &tree);
    if (st != NULL)
        return nr_status_prefix(st, "failed to read text proto from %s: ", path);
    nr_model_config_t *cfg = nr_cfg_new();
    ctx_t c = {.path = path};
    parse_message(&c, &nr__cfg_model_config_msg, cfg, nr_pbtxt_root(tree));
    nr_pbtxt_free(tree);
    if (c.err != NULL) {
        nr_cfg_free(cfg);
        return nr_status_prefix(c.err, "failed to read text proto from %s: ", path);
    }
    *out = cfg;
    return NULL;
}

nr_status_t *nr_cfg_parse_file(const char *path, nr_model_config_t **out)
{
    *out = NULL;
    FILE *fp = fopen(path, "rb");
    if (fp == NULL) {
        int e = errno;
        return nr_status_new(e == ENOENT || e == ENOTDIR ? NR_NOT_FOUND : NR_INTERNAL,
                             "failed to open text file for read %s: %s", path, strerror(e));
    }
    nr_buf_t b;
    nr_buf_init(&b);
    char chunk[65536];
    size_t got;
    while ((got = fread(chunk, 1, sizeof(chunk), fp)) > 0) {
        if (b.len + got > NR_MAX_CONFIG_BYTES) {
            fclose(fp);
            nr_buf_free(&b);
            return nr_status_new(NR_INVALID_ARG,
                                 "model configuration file %s is larger than %u bytes", path,
                                 NR_MAX_CONFIG_BYTES);
        }
        nr_buf_append(&b, chunk, got);
    }
    int rerr = ferror(fp) ? errno : 0;
    fclose(fp);
    if (rerr != 0) {
        nr_buf_free(&b);
        return nr_status_new(NR_INTERNAL, "failed to read text file %s: %s", path,
                             strerror(rerr));
    }
    nr_status_t *st = nr_cfg_parse(b.data ? b.data : "", b.len, path, out);
    nr_buf_free(&b);
    return st;
}
