/* strmap.h - nereid's one hash map: byte-string keys to uint32 values (an
 * index into the caller's array, usually). Open addressing with linear
 * probing at most half full, so a lookup or an insert costs O(1) expected and
 * n inserts O(n). Keys are hashed with SipHash-1-3 under a random key drawn
 * per map, so names a client chooses cannot be made to collide (the hash
 * flooding that turns a table quadratic).
 *
 * The map borrows its keys: each must stay valid and unchanged while the map
 * holds it. A zeroed nr_strmap_t is an empty map; the first insert allocates.
 * One thread at a time; nothing here locks.
 */
#ifndef NR_STRMAP_H
#define NR_STRMAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const char *key; /* NULL: empty slot */
    size_t len;
    uint32_t val;
    uint32_t tag; /* the hash's high bits: most mismatches never reach memcmp */
} nr_strmap_slot_t;

typedef struct {
    nr_strmap_slot_t *slots; /* [cap], cap a power of two (0 before the first insert) */
    size_t cap, n;
    uint64_t k0, k1; /* SipHash key, drawn with the first allocation */
} nr_strmap_t;

/* Sizes the map for n keys without growing again (optional). */
void nr_strmap_reserve(nr_strmap_t *m, size_t n);
/* Adds key -> val unless key is present: then returns false, and *old (when
 * not NULL) holds the value already there. */
bool nr_strmap_put(nr_strmap_t *m, const char *key, size_t len, uint32_t val, uint32_t *old);
/* The value of key in *val; false when absent. */
bool nr_strmap_get(const nr_strmap_t *m, const char *key, size_t len, uint32_t *val);
/* Frees the table (not the keys); the map is empty and usable again. */
void nr_strmap_free(nr_strmap_t *m);

/* SipHash-1-3 of data under the 128-bit key (k0, k1), as the reference
 * implementation computes it (key bytes little-endian). */
uint64_t nr_siphash13(uint64_t k0, uint64_t k1, const void *data, size_t len);

#endif
