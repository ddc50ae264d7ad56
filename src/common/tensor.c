/* tensor.c - shape arithmetic shared by every layer; pure functions. */
#include "tensor.h"

bool nr_shape_count(const int64_t *dims, size_t ndim, uint64_t *count)
{
    uint64_t n = 1;
    for (size_t i = 0; i < ndim; i++) {
        if (dims[i] < 0)
            return false;
        if (__builtin_mul_overflow(n, (uint64_t)dims[i], &n))
            return false;
    }
    *count = n;
    return true;
}
