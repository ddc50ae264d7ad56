/* validate_io.c - Triton's ValidateModelIOConfig: inputs, outputs, reshape,
 * batch_input and batch_output, in Triton's words ("model input 'X' must
 * specify 'dims' for m"). Also rejects a tensor name listed twice, which
 * Triton only notices later in the backend. O(n log n) in the number of
 * tensors. Pure; loader thread.
 */
#include "cfg_int.h"

#include "../common/alloc.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#define WILDCARD (-1)

static const char *str(const char *s)
{
    return s ? s : "";
}

/* Triton's GetElementCount: -1 with any wildcard, 0 for no dims, else the
 * product. false on overflow. */
static bool element_count(const nr_cfg_dims_t *d, int64_t *out)
{
    int64_t cnt = 0;
    for (size_t i = 0; i < d->n; i++) {
        if (d->v[i] == WILDCARD) {
            *out = -1;
            return true;
        }
        if (i == 0)
            cnt = d->v[i];
        else if (__builtin_mul_overflow(cnt, d->v[i], &cnt))
            return false;
    }
    *out = cnt;
    return true;
}

/* Product (mod 2^64) of the fixed dims from *i up to the next wildcard or the
 * end; leaves *i on that wildcard. */
static uint64_t run_product(const nr_cfg_dims_t *d, size_t *i)
{
    uint64_t p = 1;
    while (*i < d->n && d->v[*i] != WILDCARD)
        p *= (uint64_t)d->v[(*i)++];
    return p;
}

static size_t wildcards(const nr_cfg_dims_t *d)
{
    size_t w = 0;
    for (size_t i = 0; i < d->n; i++)
        w += d->v[i] == WILDCARD;
    return w;
}

/* Runs of fixed dims between wildcards must have equal products, pairwise. */
static const char *wildcard_runs(const nr_cfg_dims_t *a, const nr_cfg_dims_t *b)
{
    if (wildcards(a) != wildcards(b))
        return "has different number of variable-size dimensions for dims and reshape";
    size_t i = 0, k = 0;
    for (;;) {
        if (run_product(a, &i) != run_product(b, &k))
            return "has different size for dims and reshape";
        if (i >= a->n)
            return NULL;
        i++;
        k++;
    }
}

/* ValidateIOShape; prefix is "model input " or "model output ". */
static nr_status_t *check_shape(const char *prefix, const char *name, nr_dtype_t dtype,
                                const nr_cfg_dims_t *dims, bool has_reshape,
                                const nr_cfg_dims_t *reshape, const nr_model_config_t *cfg)
{
    const char *m = str(cfg->name);
    if (name == NULL || name[0] == '\0')
        return nr_status_new(NR_INVALID_ARG, "%smust specify 'name' for %s", prefix, m);
    if (dtype == NR_TYPE_INVALID)
        return nr_status_new(NR_INVALID_ARG, "%s'%s' must specify 'data_type' for %s", prefix,
                             name, m);
    if (dims->n == 0)
        return nr_status_new(NR_INVALID_ARG, "%s'%s' must specify 'dims' for %s", prefix, name, m);
    if (has_reshape && reshape->n == 0 && cfg->max_batch_size == 0)
        return nr_status_new(NR_INVALID_ARG,
                             "%s'%s' cannot have empty reshape for non-batching model as scalar "
                             "tensors are not supported for %s", prefix, name, m);
    for (size_t i = 0; i < dims->n; i++)
        if (dims->v[i] < 1 && dims->v[i] != WILDCARD)
            return nr_status_new(NR_INVALID_ARG,
                                 "%s'%s' dimension must be integer >= 1, or -1 to indicate a "
                                 "variable-size dimension for %s", prefix, name, m);
    if (!has_reshape)
        return NULL;
    for (size_t i = 0; i < reshape->n; i++)
        if (reshape->v[i] < 1 && reshape->v[i] != WILDCARD)
            return nr_status_new(NR_INVALID_ARG,
                                 "%s'%s' reshape dimensions must be integer >= 1, or -1 to "
                                 "indicate a variable-size dimension for %s", prefix, name, m);
    int64_t dsize, rsize;
    if (!element_count(dims, &dsize) || !element_count(reshape, &rsize))
        return nr_status_new(NR_INVALID_ARG, "%s'%s' has an element count that overflows int64 "
                             "for %s", prefix, name, m);
    if (dsize != rsize && (rsize != 0 || dsize != 1))
        return nr_status_new(NR_INVALID_ARG, "%s'%s' has different size for dims and reshape "
                             "for %s", prefix, name, m);
    if (dsize == -1) {
        const char *why = wildcard_runs(dims, reshape);
        if (why != NULL)
            return nr_status_new(NR_INVALID_ARG, "%s'%s' %s for %s", prefix, name, why, m);
    }
    return NULL;
}

static nr_status_t *check_input(const nr_cfg_input_t *in, const nr_model_config_t *cfg)
{
    const char *m = str(cfg->name);
    bool trt = strcmp(str(cfg->platform), "tensorrt_plan") == 0;
    nr_status_t *st = check_shape("model input ", in->name, in->data_type, &in->dims,
                                  in->has_reshape, &in->reshape, cfg);
    if (st != NULL)
        return st;
    if ((in->format == NR_FORMAT_NHWC || in->format == NR_FORMAT_NCHW) && in->dims.n != 3)
        return nr_status_new(NR_INVALID_ARG, "model input NHWC/NCHW require 3 dims for %s", m);
    if (!trt && in->is_shape_tensor)
        return nr_status_new(NR_INVALID_ARG,
                             "shape tensors are only supported for TensorRT platform for %s", m);
    if (in->is_non_linear_format_io && !trt)
        return nr_status_new(NR_INVALID_ARG, "Non-linear IO format is only supported for the "
                             "TensorRT platform for %s", m);
    if (in->is_non_linear_format_io && in->dims.n != 3)
        return nr_status_new(NR_INVALID_ARG, "Non-linear IO format input requires 3 dims for %s",
                             m);
    return NULL;
}

static nr_status_t *check_output(const nr_cfg_output_t *out, const nr_model_config_t *cfg)
{
    const char *m = str(cfg->name);
    bool trt = strcmp(str(cfg->platform), "tensorrt_plan") == 0;
    nr_status_t *st = check_shape("model output ", out->name, out->data_type, &out->dims,
                                  out->has_reshape, &out->reshape, cfg);
    if (st != NULL)
        return st;
    if (!trt && out->is_shape_tensor)
        return nr_status_new(NR_INVALID_ARG,
                             "shape tensors are only supported for TensorRT platform for %s", m);
    if (out->is_non_linear_format_io && !trt)
        return nr_status_new(NR_INVALID_ARG, "Non-linear IO format is only supported for the "
                             "TensorRT platform for %s", m);
    if (out->is_non_linear_format_io && out->dims.n != 3)
        return nr_status_new(NR_INVALID_ARG,
                             "Non-linear IO format output requires 3 dims for %s", m);
    return NULL;
}

/* Sorted name lists make every lookup and uniqueness check O(n log n), so a
 * hostile config cannot make validation quadratic. */
typedef struct {
    const char **v;
    size_t n;
} names_t;

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Sorts n names taken `stride` bytes apart starting at first (NULL = ""). */
static names_t sorted_names(const void *first, size_t n, size_t stride)
{
    names_t s = {nr_malloc((n ? n : 1) * sizeof(char *)), n};
    for (size_t i = 0; i < n; i++)
        s.v[i] = str(*(char *const *)((const char *)first + i * stride));
    qsort(s.v, n, sizeof(char *), cmp_str);
    return s;
}

static bool has_name(const names_t *s, const char *name)
{
    const char *key = str(name);
    return bsearch(&key, s->v, s->n, sizeof(char *), cmp_str) != NULL;
}

/* A name listed twice in s, or NULL. */
static const char *duplicate(const names_t *s)
{
    for (size_t i = 1; i < s->n; i++)
        if (strcmp(s->v[i - 1], s->v[i]) == 0)
            return s->v[i];
    return NULL;
}

static const char *const bi_kinds[] = {
    "BATCH_ELEMENT_COUNT", "BATCH_ACCUMULATED_ELEMENT_COUNT",
    "BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", "BATCH_MAX_ELEMENT_COUNT_AS_SHAPE",
    "BATCH_ITEM_SHAPE", "BATCH_ITEM_SHAPE_FLATTEN"};

static nr_status_t *check_batch_input(const nr_cfg_batch_input_t *bi, const names_t *inputs,
                                      const char *m)
{
    if (bi->kind < 0 || bi->kind > 5)
        return nr_status_new(NR_INVALID_ARG, "unknown batch input kind '' for %s", m);
    if (bi->n_source_input != 1)
        return nr_status_new(NR_INVALID_ARG, "batch input kind '%s' expects 1 source input, got "
                             "%zu for %s", bi_kinds[bi->kind], bi->n_source_input, m);
    if (bi->data_type != NR_TYPE_INT32 && bi->data_type != NR_TYPE_FP32)
        return nr_status_new(NR_INVALID_ARG,
                             "batch input data type must be TYPE_INT32 or TYPE_FP32 for %s", m);
    if (!has_name(inputs, bi->source_input[0]))
        return nr_status_new(NR_INVALID_ARG, "unknown source input name '%s' for %s",
                             str(bi->source_input[0]), m);
    return NULL;
}

static nr_status_t *check_batch_output(const nr_cfg_batch_output_t *bo, const names_t *inputs,
                                       const names_t *outputs, const char *m)
{
    if (bo->kind != 0)
        return nr_status_new(NR_INVALID_ARG, "unknown batch output kind '' for %s", m);
    if (bo->n_source_input != 1)
        return nr_status_new(NR_INVALID_ARG, "batch output kind 'BATCH_SCATTER_WITH_INPUT_SHAPE' "
                             "expects 1 source input, got %zu for %s", bo->n_source_input, m);
    if (!has_name(inputs, bo->source_input[0]))
        return nr_status_new(NR_INVALID_ARG, "unknown source input name '%s' for %s",
                             str(bo->source_input[0]), m);
    for (size_t i = 0; i < bo->n_target_name; i++)
        if (!has_name(outputs, bo->target_name[i]))
            return nr_status_new(NR_INVALID_ARG, "unknown target output name '%s' for %s",
                                 str(bo->target_name[i]), m);
    names_t targets = sorted_names(bo->target_name, bo->n_target_name, sizeof(char *));
    const char *dup = duplicate(&targets);
    nr_status_t *st = dup ? nr_status_new(NR_INVALID_ARG, "target output name '%s' can only be "
                                          "specified once for %s", dup, m)
                          : NULL;
    free(targets.v);
    return st;
}

/* Each tensor once per list; Triton would only notice later, in the backend. */
static nr_status_t *check_unique(const names_t *s, const char *what, const char *m)
{
    const char *dup = duplicate(s);
    if (dup == NULL)
        return NULL;
    return nr_status_new(NR_INVALID_ARG, "model %s '%s' is specified more than once for %s", what,
                         dup, m);
}

nr_status_t *nr__cfg_check_io(const nr_model_config_t *cfg)
{
    const char *m = str(cfg->name);
    nr_status_t *st = NULL;
    for (size_t i = 0; st == NULL && i < cfg->n_input; i++)
        st = check_input(&cfg->input[i], cfg);
    for (size_t i = 0; st == NULL && i < cfg->n_output; i++)
        st = check_output(&cfg->output[i], cfg);
    if (st != NULL)
        return st;
    names_t in = sorted_names(cfg->n_input ? &cfg->input[0].name : NULL, cfg->n_input,
                              sizeof(nr_cfg_input_t));
    names_t out = sorted_names(cfg->n_output ? &cfg->output[0].name : NULL, cfg->n_output,
                               sizeof(nr_cfg_output_t));
    st = check_unique(&in, "input", m);
    if (st == NULL)
        st = check_unique(&out, "output", m);
    for (size_t i = 0; st == NULL && i < cfg->n_batch_input; i++)
        st = check_batch_input(&cfg->batch_input[i], &in, m);
    for (size_t i = 0; st == NULL && i < cfg->n_batch_output; i++)
        st = check_batch_output(&cfg->batch_output[i], &in, &out, m);
    free(in.v);
    free(out.v);
    return st;
}
