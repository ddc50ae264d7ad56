/* arena.h - a bump allocator for objects that die together (a parsed config
 * tree, a request's JSON document): allocations are carved from chunks and
 * everything is released by one nr_arena_free. One owner, no locking.
 */
#ifndef NR_ARENA_H
#define NR_ARENA_H

#include <stddef.h>

typedef struct nr_arena_chunk_s nr_arena_chunk_t;

typedef struct {
    nr_arena_chunk_t *chunks;
    size_t chunk_size; /* size of a fresh chunk; larger requests get their own */
} nr_arena_t;

/* An empty arena; nothing is allocated until the first nr_arena_alloc. */
static inline nr_arena_t nr_arena_init(size_t chunk_size)
{
    nr_arena_t a = {NULL, chunk_size};
    return a;
}
/* size bytes aligned to 16, uninitialised; aborts on out-of-memory like nr_malloc. */
void *nr_arena_alloc(nr_arena_t *a, size_t size);
/* The same, but NULL when the memory cannot be had (sizes from the wire). */
void *nr_arena_try_alloc(nr_arena_t *a, size_t size);
void *nr_arena_calloc(nr_arena_t *a, size_t size); /* zeroed */
char *nr_arena_strndup(nr_arena_t *a, const char *s, size_t n); /* NUL-terminated copy */
void nr_arena_free(nr_arena_t *a); /* frees every chunk; the arena is empty again */

#endif
