/* shm.h - system shared-memory regions (Triton's shared-memory extension).
 *
 * A client creates a POSIX shared-memory object (shm_open), registers a
 * window of it under a name, and then names that region in inference
 * requests instead of sending tensor bytes over the socket: inputs are read
 * from the mapping in place, outputs are written into it. The registry maps
 * names to mappings; it is shared by every frontend and every thread (one
 * mutex, held only for the lookup, never across I/O or a backend call).
 *
 * Lifetime: a request that uses a region holds a reference from lookup
 * (nr_shm_get) until its reply is built (nr_shm_put). Unregistering removes
 * the name at once, so no new request finds it; the mapping itself is
 * unmapped when the last reference goes, never under a running inference.
 * A region's memory is the client's. A client that shrinks its object after
 * registering it would make the next access fault (SIGBUS) and, in Triton,
 * end the server; here the fault is caught (shm.c), the access completes on
 * zero pages and the region is marked broken (nr_shm_check).
 */
#ifndef NR_SHM_H
#define NR_SHM_H

#include "../common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct nr_shm_s nr_shm_t;               /* the registry */
typedef struct nr_shm_region_s nr_shm_region_t; /* one mapping */

nr_shm_t *nr_shm_new(void);
/* Unregisters every region and frees the registry; a region a request still
 * holds is unmapped by that request's nr_shm_put. */
void nr_shm_free(nr_shm_t *shm);

/* Maps [offset, offset + byte_size) of the object `key` (shm_open name) under
 * `name`. Triton's errors: "shared memory region '<name>' already in manager"
 * (ALREADY_EXISTS), "Unable to open shared memory region: '<key>'"
 * (INTERNAL), "failed to register shared memory region '<name>': invalid
 * args" (INVALID_ARG: outside the object); UNAVAILABLE when
 * NR_MAX_SHM_REGIONS regions are registered already. */
NR_MUST_CHECK nr_status_t *nr_shm_register(nr_shm_t *shm, const char *name, size_t name_len,
                                           const char *key, size_t key_len, uint64_t offset,
                                           uint64_t byte_size);
/* Removes `name` (NULL: every region). An unknown name is not an error. */
void nr_shm_unregister(nr_shm_t *shm, const char *name, size_t name_len);

/* One registered region, as the status extension reports it. */
typedef struct {
    const char *name, *key;
    uint64_t offset, byte_size;
} nr_shm_info_t;
typedef void (*nr_shm_visit_fn)(const nr_shm_info_t *info, void *arg);
/* Calls fn for `name` (NULL: every region, sorted by name) under the
 * registry's lock; fn must not call back into the registry. NOT_FOUND
 * "Unable to find system shared memory region: '<name>'" for an unknown name. */
NR_MUST_CHECK nr_status_t *nr_shm_visit(nr_shm_t *shm, const char *name, size_t name_len,
                                        nr_shm_visit_fn fn, void *arg);

/* Looks up `name` and checks [offset, offset + byte_size) against the region;
 * on success *region holds a reference and *addr points at offset. Errors
 * (Triton's): "Unable to find shared memory region: '<name>'" (NOT_FOUND),
 * "Invalid offset for shared memory region: '<name>'" and "Invalid offset +
 * byte size for shared memory region: '<name>'" (INVALID_ARG). */
NR_MUST_CHECK nr_status_t *nr_shm_get(nr_shm_t *shm, const char *name, size_t name_len,
                                      uint64_t offset, uint64_t byte_size,
                                      nr_shm_region_t **region, void **addr);
/* Drops a reference from nr_shm_get (NULL is a no-op). */
void nr_shm_put(nr_shm_region_t *region);

/* Whether an access to the region faulted because its object was truncated
 * after registration (its mapping is zero pages from there on). nr_shm_check
 * gives the error a request that used it answers with (INTERNAL), or NULL;
 * nr_shm_get refuses such a region with the same error. */
bool nr_shm_broken(const nr_shm_region_t *region);
NR_MUST_CHECK nr_status_t *nr_shm_check(const nr_shm_region_t *region);

#endif
