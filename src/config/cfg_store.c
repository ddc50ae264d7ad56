/* cfg_store.c - what the two config readers share, so that they build the
 * same nr_model_config_t for the same config: model_config.c reads
 * config.pbtxt, config_from_json.c reads protobuf's JSON mapping, and both
 * find fields, check oneofs and store values through the schema tables of
 * cfg_fields.c with these. Pure; the tables are immutable.
 */
#include "cfg_int.h"

#include "../common/alloc.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

/* s[0, n) is the field's JSON name: protobuf's ToJsonName (lowerCamelCase:
 * each '_' dropped and the letter after it upper-cased). */
static bool json_name_is(const char *name, const char *s, size_t n)
{
    size_t i = 0;
    bool up = false;
    for (const char *p = name; *p != '\0'; p++) {
        if (*p == '_') {
            up = true;
            continue;
        }
        char want = up && *p >= 'a' && *p <= 'z' ? (char)(*p - 'a' + 'A') : *p;
        up = false;
        if (i == n || s[i] != want)
            return false;
        i++;
    }
    return i == n;
}

const nr__cfg_field_t *nr__cfg_find_field(const nr__cfg_msg_t *m, const char *name, size_t n,
                                          bool json_names)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const char *fn = m->fields[i].name;
        if ((strlen(fn) == n && memcmp(fn, name, n) == 0) ||
            (json_names && json_name_is(fn, name, n)))
            return &m->fields[i];
    }
    return NULL;
}

size_t nr__cfg_field_index(const nr__cfg_msg_t *m, const nr__cfg_field_t *f)
{
    size_t idx = (size_t)(f - m->fields);
    return (f->flags & NR__FL_ALIAS) && idx > 0 ? idx - 1 : idx;
}

const nr__cfg_field_t *nr__cfg_oneof_rival(const nr__cfg_msg_t *m, const nr__cfg_field_t *f,
                                           const unsigned char *seen)
{
    size_t idx = nr__cfg_field_index(m, f);
    for (size_t i = 0; f->oneof != NULL && i < m->n_fields; i++) {
        const nr__cfg_field_t *o = &m->fields[i];
        if (i != idx && seen[i] && o->oneof != NULL && strcmp(o->oneof, f->oneof) == 0)
            return o;
    }
    return NULL;
}

void nr__cfg_mark_set(const nr__cfg_field_t *f, void *base)
{
    if (f->oneof != NULL)
        *NR__AT(base, f->off_oneof, int) = f->oneof_val;
    if (f->type == NR__F_MSG && f->off_aux != NR__CFG_NONE)
        *NR__AT(base, f->off_aux, bool) = true;
}

bool nr__cfg_int_fits(uint8_t type, bool neg, uint64_t mag)
{
    bool is_unsigned = type == NR__F_UINT32 || type == NR__F_UINT64;
    if (is_unsigned && neg)
        return mag == 0;
    uint64_t max = type == NR__F_UINT32   ? UINT32_MAX
                   : type == NR__F_UINT64 ? UINT64_MAX
                   : type == NR__F_INT64  ? (uint64_t)INT64_MAX
                                          : (uint64_t)INT32_MAX;
    if (neg)
        max += 1; /* two's complement minimum */
    return mag <= max;
}

void nr__cfg_store_int(uint8_t type, void *slot, bool neg, uint64_t mag)
{
    int64_t s = neg ? (int64_t)(0 - mag) : (int64_t)mag;
    switch (type) {
    case NR__F_INT32:
    case NR__F_ENUM: *(int32_t *)slot = (int32_t)s; break;
    case NR__F_UINT32: *(uint32_t *)slot = (uint32_t)mag; break;
    case NR__F_INT64: *(int64_t *)slot = s; break;
    default: *(uint64_t *)slot = mag; break;
    }
}

bool nr__cfg_enum_value(const nr__cfg_enum_t *en, const char *name, size_t n, bool any_case,
                        int *out)
{
    for (size_t i = 0; i < en->n; i++) {
        const char *v = en->vals[i].name;
        if (strlen(v) == n && (any_case ? strncasecmp(v, name, n) : memcmp(v, name, n)) == 0) {
            *out = en->vals[i].value;
            return true;
        }
    }
    return false;
}

void *nr__cfg_add_elem(const nr__cfg_field_t *f, void *base, void *scratch)
{
    size_t es = nr__cfg_elem_size(f);
    size_t *n = NR__AT(base, f->off_n, size_t);
    if (f->rep == NR__R_FIX2) {
        void *slot = *n < 2 ? NR__AT(base, f->off + *n * es, void) : scratch;
        memset(slot, 0, es);
        (*n)++;
        return slot;
    }
    char **arr = NR__AT(base, f->off, char *);
    if (*n == 0 || (*n & (*n - 1)) == 0) { /* capacity is the next power of two */
        size_t cap = *n ? *n * 2 : 1;
        *arr = nr_realloc(*arr, cap * es);
    }
    char *e = *arr + *n * es;
    memset(e, 0, es);
    (*n)++;
    return e;
}

static bool key_equal(const nr__cfg_field_t *kf, const void *a, const void *b)
{
    if (kf->type == NR__F_STRING) {
        const char *x = *NR__CAT(a, kf->off, char *), *y = *NR__CAT(b, kf->off, char *);
        return strcmp(x ? x : "", y ? y : "") == 0;
    }
    return memcmp(NR__CAT(a, kf->off, char), NR__CAT(b, kf->off, char),
                  nr__cfg_elem_size(kf)) == 0;
}

void nr__cfg_map_dedupe(const nr__cfg_field_t *f, void *base)
{
    char *arr = *NR__AT(base, f->off, char *);
    size_t *n = NR__AT(base, f->off_n, size_t);
    size_t es = f->sub->size;
    char *last = arr + (*n - 1) * es;
    for (size_t i = 0; i + 1 < *n; i++) {
        if (key_equal(&f->sub->fields[0], arr + i * es, last)) {
            nr__cfg_free_msg(f->sub, arr + i * es);
            memcpy(arr + i * es, last, es);
            (*n)--;
            return;
        }
    }
}

void nr__cfg_shapemap_put(const nr__cfg_field_t *f, void *base, nr__cfg_shape_entry_t *e)
{
    char ***names = NR__AT(base, f->off, char **);
    nr_cfg_dims_t **dims = NR__AT(base, f->off_aux, nr_cfg_dims_t *);
    size_t *n = NR__AT(base, f->off_n, size_t);
    size_t i = 0;
    while (i < *n && strcmp((*names)[i], e->key ? e->key : "") != 0)
        i++;
    if (i == *n) {
        *names = nr_realloc(*names, (*n + 1) * sizeof(char *));
        *dims = nr_realloc(*dims, (*n + 1) * sizeof(nr_cfg_dims_t));
        (*names)[i] = e->key ? e->key : nr_strdup("");
        (*n)++;
    } else {
        free(e->key);
        free((*dims)[i].v);
    }
    (*dims)[i] = e->dims;
}
