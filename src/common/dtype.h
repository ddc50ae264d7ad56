/* dtype.h - the tensor element types (Triton's DataType, model_config.proto's numbers)
 * and their names: below config, core and the backends, which all speak of them.
 */
#ifndef NR_DTYPE_H
#define NR_DTYPE_H

#include "buf.h"

#include <stdbool.h>
#include <stddef.h>

/* DataType enum numbers are the proto's. */
typedef enum {
    NR_TYPE_INVALID = 0,
    NR_TYPE_BOOL = 1,
    NR_TYPE_UINT8 = 2,
    NR_TYPE_UINT16 = 3,
    NR_TYPE_UINT32 = 4,
    NR_TYPE_UINT64 = 5,
    NR_TYPE_INT8 = 6,
    NR_TYPE_INT16 = 7,
    NR_TYPE_INT32 = 8,
    NR_TYPE_INT64 = 9,
    NR_TYPE_FP16 = 10,
    NR_TYPE_FP32 = 11,
    NR_TYPE_FP64 = 12,
    NR_TYPE_STRING = 13,
    NR_TYPE_BF16 = 14,
} nr_dtype_t;

/* dtype helpers: "FP32" <-> NR_TYPE_FP32 (TYPE_STRING <-> "BYTES"). */
const char *nr_dtype_kserve_name(nr_dtype_t t); /* NULL for INVALID */
nr_dtype_t nr_dtype_from_kserve(const char *s, size_t n); /* INVALID if unknown */
const char *nr_dtype_enum_name(nr_dtype_t t); /* "TYPE_FP32" */
size_t nr_dtype_size(nr_dtype_t t); /* 0 for STRING / INVALID */
/* Appends the element at e (nr_dtype_size(t) bytes, any alignment) as Triton's JSON writes
 * it: BOOL true/false, integers, FP32/FP64 as rapidjson prints doubles. False (nothing
 * appended) for a type JSON does not carry: FP16, BF16, STRING, INVALID. */
bool nr_dtype_json_elem(nr_buf_t *b, nr_dtype_t t, const void *e);

#endif
