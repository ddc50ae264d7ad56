/* alloc.c - allocation wrappers that abort on out-of-memory for small,
 * fixed-size objects. Thread-safe.
 */
#include "alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void nr_oom(size_t size)
{
    fprintf(stderr, "nereid: out of memory allocating %zu bytes\n", size);
    abort();
}

void *nr_malloc(size_t size)
{
    void *p = malloc(size ? size : 1);
    if (p == NULL)
        nr_oom(size);
    return p;
}

void *nr_calloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (p == NULL)
        nr_oom(n * size);
    return p;
}

void *nr_realloc(void *p, size_t size)
{
    void *q = realloc(p, size ? size : 1);
    if (q == NULL)
        nr_oom(size);
    return q;
}

char *nr_strdup(const char *s)
{
    return nr_strndup(s, strlen(s));
}

char *nr_strndup(const char *s, size_t n)
{
    char *d = nr_malloc(n + 1);
    memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

char *nr_vasprintf(const char *fmt, va_list ap)
{
    va_list ap2;
    va_copy(ap2, ap);
    int n = vsnprintf(NULL, 0, fmt, ap2);
    va_end(ap2);
    if (n < 0)
        n = 0;
    char *s = nr_malloc((size_t)n + 1);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    return s;
}

char *nr_asprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = nr_vasprintf(fmt, ap);
    va_end(ap);
    return s;
}

void *nr_grow(void *p, size_t n, size_t size)
{
    if ((n & (n - 1)) == 0) /* n is 0 or a power of two: the array is full */
        p = nr_realloc(p, (n ? 2 * n : 1) * size);
    return p;
}
