/* arena.c - the bump allocator behind nr_arena_t. */
#include "arena.h"

#include "alloc.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct nr_arena_chunk_s {
    nr_arena_chunk_t *next;
    size_t used, cap;
    _Alignas(16) unsigned char data[];
};

void *nr_arena_try_alloc(nr_arena_t *a, size_t size)
{
    if (size > SIZE_MAX - sizeof(nr_arena_chunk_t) - 15)
        return NULL;
    size = (size + 15) & ~(size_t)15;
    nr_arena_chunk_t *c = a->chunks;
    if (c == NULL || c->cap - c->used < size) {
        size_t cap = size > a->chunk_size ? size : a->chunk_size;
        c = malloc(sizeof(nr_arena_chunk_t) + cap);
        if (c == NULL)
            return NULL;
        c->used = 0;
        c->cap = cap;
        c->next = a->chunks;
        a->chunks = c;
    }
    void *p = c->data + c->used;
    c->used += size;
    return p;
}

void *nr_arena_alloc(nr_arena_t *a, size_t size)
{
    void *p = nr_arena_try_alloc(a, size);
    if (p == NULL)
        nr_oom(size);
    return p;
}

void *nr_arena_calloc(nr_arena_t *a, size_t size)
{
    void *p = nr_arena_alloc(a, size);
    memset(p, 0, size);
    return p;
}

char *nr_arena_strndup(nr_arena_t *a, const char *s, size_t n)
{
    char *d = nr_arena_alloc(a, n + 1);
    if (n)
        memcpy(d, s, n);
    d[n] = '\0';
    return d;
}

void nr_arena_free(nr_arena_t *a)
{
    nr_arena_chunk_t *c = a->chunks;
    while (c) {
        nr_arena_chunk_t *next = c->next;
        free(c);
        c = next;
    }
    a->chunks = NULL;
}
