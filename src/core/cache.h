/* cache.h - Triton's response cache (--cache-config local,size=<bytes>, a model's
 * response_cache { enable: true }): a request whose model, version (this load of it), inputs
 * (dtype, shape, bytes) and requested outputs equal those of an earlier successful one is
 * answered with a copy of that answer's outputs, without running the model.
 *
 * One cache per process (it is set from the command line, as the rate limiter is), of at most
 * `size` bytes counted honestly: each entry's key (which holds the request's input bytes, so
 * that a hit is an exact match, never a hash collision) and its output bytes, plus the
 * entry's bookkeeping. The least recently used entries go first when a new one needs room; an
 * answer larger than the whole cache is not kept. A model's entries are dropped when that load
 * of it is unloaded (a reload gets new ones). Decoupled models (refused by validation) are not
 * cached; an ensemble's whole answer is (inserted when its last step ends, ensemble.c), as
 * Triton caches a top-level ensemble's.
 *
 * An entry is shared by the requests answered from it (its outputs are views held through
 * nr_tensor_t.hold): eviction never frees bytes a reply is still being made from.
 */
#ifndef NR_CACHE_H
#define NR_CACHE_H

#include "../common/status.h"
#include "request.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* --cache-config=local,size=<bytes> (Triton's local cache). INVALID_ARG for another cache
 * name or key, or a size that is not a number. Before any model loads. */
NR_MUST_CHECK nr_status_t *nr_cache_config(const char *spec);
/* Whether a cache was configured (a model's response_cache then applies). */
bool nr_cache_enabled(void);
/* Frees every entry and forgets the configuration (at exit). */
void nr_cache_clear(void);

/* A new id for a load of a model (its entries' owner). */
uint64_t nr_cache_new_owner(void);
/* Drops every entry of `owner` (its model is being unloaded). */
void nr_cache_drop_owner(uint64_t owner);

/* Looks the validated request up: true when it was answered from the cache (its outputs are
 * filled, status NULL; *ns the lookup's duration). Otherwise the request keeps its key for
 * nr_cache_insert and *ns is the lookup's cost so far. */
bool nr_cache_lookup(nr_req_t *req, uint64_t owner, uint64_t *ns);
/* Keeps the outputs of a request that missed and then succeeded; returns the time it took. */
uint64_t nr_cache_insert(nr_req_t *req);

/* Totals (for tests and the log): entries, bytes used, evictions so far. */
void nr_cache_usage(size_t *entries, size_t *bytes, uint64_t *evictions);

#endif
