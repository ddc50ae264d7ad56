/* alloc.h - allocation wrappers. Small fixed-size allocations abort on OOM
 * (as Redis and h2o do); sizes from the wire or a model are checked by the
 * caller against limits.h with nr_mul_overflow/nr_add_overflow first.
 */
#ifndef NR_ALLOC_H
#define NR_ALLOC_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

void *nr_malloc(size_t size);
void *nr_calloc(size_t n, size_t size);
void *nr_realloc(void *p, size_t size);
char *nr_strdup(const char *s);
char *nr_strndup(const char *s, size_t n);
char *nr_asprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
char *nr_vasprintf(const char *fmt, va_list ap);
/* Array p of n elements of `size` bytes, with room made for element n (call
 * before each append): it grows by doubling, so n appends copy O(n) in all. */
void *nr_grow(void *p, size_t n, size_t size);
/* What the wrappers do when memory runs out: report size and abort. */
_Noreturn void nr_oom(size_t size);

/* true on overflow */
static inline bool nr_mul_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_mul_overflow(a, b, out);
}
static inline bool nr_add_overflow(uint64_t a, uint64_t b, uint64_t *out)
{
    return __builtin_add_overflow(a, b, out);
}

#endif
