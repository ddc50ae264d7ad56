/* ort_types.c - the ONNX <-> nereid dtype table and reading a session's I/O metadata.
 *
 * The table is immutable. nr__ort_read_ios allocates the names it returns; the caller
 * frees them with nr__ort_ios_free. Called on the loading thread only.
 */
#include "ort_int.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* X(nereid dtype, ONNX element type). Sizes and names come from config's dtype
 * table (nr_dtype_size, nr_dtype_enum_name, nr_dtype_kserve_name). */
#define NR_ORT_DTYPE_MAP(X)                                        \
    X(NR_TYPE_BOOL, ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL)            \
    X(NR_TYPE_UINT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8)          \
    X(NR_TYPE_UINT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16)        \
    X(NR_TYPE_UINT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32)        \
    X(NR_TYPE_UINT64, ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64)        \
    X(NR_TYPE_INT8, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8)            \
    X(NR_TYPE_INT16, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16)          \
    X(NR_TYPE_INT32, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32)          \
    X(NR_TYPE_INT64, ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64)          \
    X(NR_TYPE_FP16, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16)         \
    X(NR_TYPE_FP32, ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT)           \
    X(NR_TYPE_FP64, ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE)          \
    X(NR_TYPE_STRING, ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING)        \
    X(NR_TYPE_BF16, ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16)

typedef struct {
    nr_dtype_t dtype;
    ONNXTensorElementDataType ort;
} dtype_row_t;

static const dtype_row_t dtype_rows[] = {
#define NR_X(d, o) {d, o},
    NR_ORT_DTYPE_MAP(NR_X)
#undef NR_X
};
#define N_ROWS (sizeof(dtype_rows) / sizeof(dtype_rows[0]))

nr_dtype_t nr__ort_to_dtype(ONNXTensorElementDataType t)
{
    for (size_t i = 0; i < N_ROWS; i++)
        if (dtype_rows[i].ort == t)
            return dtype_rows[i].dtype;
    return NR_TYPE_INVALID;
}

ONNXTensorElementDataType nr__ort_from_dtype(nr_dtype_t t)
{
    for (size_t i = 0; i < N_ROWS; i++)
        if (dtype_rows[i].dtype == t)
            return dtype_rows[i].ort;
    return ONNX_TENSOR_ELEMENT_DATA_TYPE_UNDEFINED;
}

const char *nr__ort_type_name(ONNXTensorElementDataType t)
{
    switch (t) {
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT: return "FLOAT";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT8: return "UINT8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT8: return "INT8";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT16: return "UINT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT16: return "INT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT32: return "INT32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_INT64: return "INT64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_STRING: return "STRING";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BOOL: return "BOOL";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_FLOAT16: return "FLOAT16";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_DOUBLE: return "DOUBLE";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT32: return "UINT32";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_UINT64: return "UINT64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX64: return "COMPLEX64";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_COMPLEX128: return "COMPLEX128";
    case ONNX_TENSOR_ELEMENT_DATA_TYPE_BFLOAT16: return "BFLOAT16";
    default: return "UNDEFINED";
    }
}

char *nr__ort_shape_str(const int64_t *dims, size_t ndim, char *buf, size_t cap)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, cap, "[");
    for (size_t i = 0; i < ndim && len < cap; i++)
        len += (size_t)snprintf(buf + len, cap - len, "%s%lld", i ? "," : "", (long long)dims[i]);
    if (len < cap)
        snprintf(buf + len, cap - len, "]");
    return buf;
}

static const char *onnx_type_name(ONNXType t)
{
    switch (t) {
    case ONNX_TYPE_TENSOR: return "ONNX_TYPE_TENSOR";
    case ONNX_TYPE_SEQUENCE: return "ONNX_TYPE_SEQUENCE";
    case ONNX_TYPE_MAP: return "ONNX_TYPE_MAP";
    case ONNX_TYPE_OPAQUE: return "ONNX_TYPE_OPAQUE";
    case ONNX_TYPE_SPARSETENSOR: return "ONNX_TYPE_SPARSETENSOR";
    default: return "ONNX_TYPE_UNKNOWN";
    }
}

/* Type, rank and dims of one OrtTypeInfo into io (name already set). */
static nr_status_t *fill_io(const OrtApi *api, OrtTypeInfo *ti, nr__ort_io_t *io)
{
    ONNXType kind;
    nr_status_t *st = nr__ort_status(api->GetOnnxTypeFromTypeInfo(ti, &kind));
    if (st)
        return st;
    if (kind != ONNX_TYPE_TENSOR)
        return nr_status_new(NR_UNSUPPORTED, "Unsupported ONNX Type '%s' for I/O '%s', expected '%s'.",
                             onnx_type_name(kind), io->name, onnx_type_name(ONNX_TYPE_TENSOR));
    const OrtTensorTypeAndShapeInfo *tsi;
    size_t ndim = 0;
    st = nr__ort_status(api->CastTypeInfoToTensorInfo(ti, &tsi));
    if (!st)
        st = nr__ort_status(api->GetTensorElementType(tsi, &io->type));
    if (!st)
        st = nr__ort_status(api->GetDimensionsCount(tsi, &ndim));
    if (st)
        return st;
    if (ndim > NR_MAX_DIMS)
        return nr_status_new(NR_UNSUPPORTED, "I/O '%s' has %zu dimensions; at most %d are supported",
                             io->name, ndim, NR_MAX_DIMS);
    io->ndim = ndim;
    return nr__ort_status(api->GetDimensions(tsi, io->dims, ndim));
}

typedef enum { IO_INPUT, IO_OUTPUT, IO_INIT } io_kind_t;

static OrtStatus *io_count(const OrtApi *api, OrtSession *s, io_kind_t k, size_t *n)
{
    if (k == IO_INPUT)
        return api->SessionGetInputCount(s, n);
    if (k == IO_OUTPUT)
        return api->SessionGetOutputCount(s, n);
    return api->SessionGetOverridableInitializerCount(s, n);
}

static OrtStatus *io_name(const OrtApi *api, OrtSession *s, io_kind_t k, size_t i,
                          OrtAllocator *a, char **name)
{
    if (k == IO_INPUT)
        return api->SessionGetInputName(s, i, a, name);
    if (k == IO_OUTPUT)
        return api->SessionGetOutputName(s, i, a, name);
    return api->SessionGetOverridableInitializerName(s, i, a, name);
}

static OrtStatus *io_type(const OrtApi *api, OrtSession *s, io_kind_t k, size_t i, OrtTypeInfo **ti)
{
    if (k == IO_INPUT)
        return api->SessionGetInputTypeInfo(s, i, ti);
    if (k == IO_OUTPUT)
        return api->SessionGetOutputTypeInfo(s, i, ti);
    return api->SessionGetOverridableInitializerTypeInfo(s, i, ti);
}

static nr_status_t *read_list(OrtSession *s, io_kind_t k, nr__ort_io_t **out, size_t *n_out)
{
    const OrtApi *api = nr__ort_api();
    OrtAllocator *alloc;
    size_t n = 0;
    nr_status_t *st = nr__ort_status(api->GetAllocatorWithDefaultOptions(&alloc));
    if (!st)
        st = nr__ort_status(io_count(api, s, k, &n));
    if (st)
        return st;
    nr__ort_io_t *v = nr_calloc(n, sizeof(*v));
    *out = v;
    *n_out = 0;
    for (size_t i = 0; i < n && !st; i++) {
        char *name = NULL;
        st = nr__ort_status(io_name(api, s, k, i, alloc, &name));
        if (st)
            break;
        v[i].name = nr_strdup(name);
        OrtStatus *fs = api->AllocatorFree(alloc, name);
        if (fs)
            api->ReleaseStatus(fs);
        *n_out = i + 1;
        OrtTypeInfo *ti = NULL;
        st = nr__ort_status(io_type(api, s, k, i, &ti));
        if (!st)
            st = fill_io(api, ti, &v[i]);
        if (ti)
            api->ReleaseTypeInfo(ti);
    }
    return st;
}

nr_status_t *nr__ort_read_ios(OrtSession *session, nr__ort_ios_t *ios)
{
    memset(ios, 0, sizeof(*ios));
    nr_status_t *st = read_list(session, IO_INPUT, &ios->in, &ios->n_in);
    if (!st)
        st = read_list(session, IO_OUTPUT, &ios->out, &ios->n_out);
    if (!st)
        st = read_list(session, IO_INIT, &ios->init, &ios->n_init);
    if (st)
        nr__ort_ios_free(ios);
    return st;
}

static void free_list(nr__ort_io_t *v, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(v[i].name);
    free(v);
}

void nr__ort_ios_free(nr__ort_ios_t *ios)
{
    free_list(ios->in, ios->n_in);
    free_list(ios->out, ios->n_out);
    free_list(ios->init, ios->n_init);
    memset(ios, 0, sizeof(*ios));
}

const nr__ort_io_t *nr__ort_io_find(const nr__ort_io_t *v, size_t n, const char *name)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(v[i].name, name) == 0)
            return &v[i];
    return NULL;
}

nr_status_t *nr__ort_meta_session(const char *path, OrtSession **out)
{
    const OrtApi *api = nr__ort_api();
    OrtSessionOptions *so = NULL;
    *out = NULL;
    nr_status_t *st = nr__ort_status(api->CreateSessionOptions(&so));
    if (!st)
        st = nr__ort_status(api->SetIntraOpNumThreads(so, 1));
    if (!st)
        st = nr__ort_status(api->SetInterOpNumThreads(so, 1));
    if (!st)
        st = nr__ort_status(api->SetSessionGraphOptimizationLevel(so, ORT_DISABLE_ALL));
    if (!st)
        st = nr__ort_status(api->AddSessionConfigEntry(so, "session.intra_op.allow_spinning", "0"));
    if (!st)
        st = nr__ort_status(api->CreateSession(nr__ort_env(), path, so, out));
    if (so)
        api->ReleaseSessionOptions(so);
    return st;
}
