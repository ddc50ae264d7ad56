/* dtype.c - the element types' names and sizes, and their JSON form. */
#include "dtype.h"

#include <string.h>

/* ---- dtypes --------------------------------------------------------------- */

/* X(enum suffix, KServe name, element bytes) */
#define NR_DTYPE_MAP(X)   \
    X(BOOL, "BOOL", 1)     \
    X(UINT8, "UINT8", 1)   \
    X(UINT16, "UINT16", 2) \
    X(UINT32, "UINT32", 4) \
    X(UINT64, "UINT64", 8) \
    X(INT8, "INT8", 1)     \
    X(INT16, "INT16", 2)   \
    X(INT32, "INT32", 4)   \
    X(INT64, "INT64", 8)   \
    X(FP16, "FP16", 2)     \
    X(FP32, "FP32", 4)     \
    X(FP64, "FP64", 8)     \
    X(STRING, "BYTES", 0)  \
    X(BF16, "BF16", 2)

static const struct dtype_row {
    nr_dtype_t t;
    const char *kserve, *enum_name;
    size_t size;
} dtypes[] = {
#define NR_X(e, k, s) {NR_TYPE_##e, k, "TYPE_" #e, s},
    NR_DTYPE_MAP(NR_X)
#undef NR_X
};

/* The table's row of t, or NULL. */
static const struct dtype_row *row_of(nr_dtype_t t)
{
    for (size_t i = 0; i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (dtypes[i].t == t)
            return &dtypes[i];
    return NULL;
}

const char *nr_dtype_kserve_name(nr_dtype_t t)
{
    const struct dtype_row *r = row_of(t);
    return r ? r->kserve : NULL;
}

nr_dtype_t nr_dtype_from_kserve(const char *s, size_t n)
{
    for (size_t i = 0; s != NULL && i < sizeof(dtypes) / sizeof(dtypes[0]); i++)
        if (strlen(dtypes[i].kserve) == n && memcmp(dtypes[i].kserve, s, n) == 0)
            return dtypes[i].t;
    return NR_TYPE_INVALID;
}

const char *nr_dtype_enum_name(nr_dtype_t t)
{
    const struct dtype_row *r = row_of(t);
    return r ? r->enum_name : "TYPE_INVALID";
}

size_t nr_dtype_size(nr_dtype_t t)
{
    const struct dtype_row *r = row_of(t);
    return r ? r->size : 0;
}

/* one case per type: no table lookup per element (JSON responses print every element) */
#define JSON_ELEM(tag, type, put)                                                              \
    case tag: {                                                                                \
        type v;                                                                                \
        memcpy(&v, e, sizeof(v));                                                              \
        put;                                                                                   \
        return true;                                                                           \
    }

bool nr_dtype_json_elem(nr_buf_t *b, nr_dtype_t t, const void *e)
{
    switch (t) {
        JSON_ELEM(NR_TYPE_BOOL, uint8_t, nr_buf_puts(b, v ? "true" : "false"))
        JSON_ELEM(NR_TYPE_UINT8, uint8_t, nr_buf_u64(b, v))
        JSON_ELEM(NR_TYPE_INT8, int8_t, nr_buf_i64(b, v))
        JSON_ELEM(NR_TYPE_UINT16, uint16_t, nr_buf_u64(b, v))
        JSON_ELEM(NR_TYPE_INT16, int16_t, nr_buf_i64(b, v))
        JSON_ELEM(NR_TYPE_UINT32, uint32_t, nr_buf_u64(b, v))
        JSON_ELEM(NR_TYPE_INT32, int32_t, nr_buf_i64(b, v))
        JSON_ELEM(NR_TYPE_UINT64, uint64_t, nr_buf_u64(b, v))
        JSON_ELEM(NR_TYPE_INT64, int64_t, nr_buf_i64(b, v))
        JSON_ELEM(NR_TYPE_FP32, float, nr_buf_double(b, (double)v))
        JSON_ELEM(NR_TYPE_FP64, double, nr_buf_double(b, v))
    default:
        return false;
    }
}
#undef JSON_ELEM
