/* tensor.h - plain tensor descriptors shared by core, backends and frontends (here, below
 * all of them, so that a backend needs nothing from core).
 *
 * An nr_tensor_t never owns its bytes: they point into a request body, a
 * request-owned buffer, or backend memory kept alive by `hold`. STRING (BYTES)
 * tensors are always in the serialized form: per element a uint32 LE length
 * followed by the bytes.
 */
#ifndef NR_TENSOR_H
#define NR_TENSOR_H

#include "dtype.h"
#include "limits.h"

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A refcounted keep-alive for memory a tensor points into (e.g. an ORT output
 * shared by every request of a batch). release() runs when refs drops to 0. */
typedef struct nr_hold_s {
    atomic_int refs;
    void (*release)(struct nr_hold_s *h);
} nr_hold_t;

static inline void nr_hold_ref(nr_hold_t *h)
{
    if (h)
        atomic_fetch_add_explicit(&h->refs, 1, memory_order_relaxed);
}
static inline void nr_hold_unref(nr_hold_t *h)
{
    if (h && atomic_fetch_sub_explicit(&h->refs, 1, memory_order_acq_rel) == 1)
        h->release(h);
}

typedef struct {
    const char *name; /* borrowed from the model config */
    nr_dtype_t dtype;
    size_t ndim;
    int64_t dims[NR_MAX_DIMS]; /* full shape, batch dim included when batching */
    const void *data;          /* NULL for an absent optional input */
    size_t size;               /* bytes */
    nr_hold_t *hold;           /* outputs only: keeps `data` alive; NULL if none */
} nr_tensor_t;

/* Element count of dims with overflow check; false on overflow or negative dim. */
bool nr_shape_count(const int64_t *dims, size_t ndim, uint64_t *count);

#endif
