/* restrict.h - Triton's restricted API groups (--http-restricted-api, --grpc-restricted-protocol,
 * "Limit Endpoint Access"): a request to an API of a restricted group is served only when it
 * carries the group's header with the group's value; otherwise the frontend refuses it in its
 * protocol's form (HTTP 403, gRPC UNAVAILABLE) with nr_restrict_refusal's text.
 *
 * The groups are Triton's, with the same members over both protocols: health (live, ready,
 * model ready; gRPC's health Check), metadata (server and model), inference (infer, generate,
 * ModelInfer, ModelStreamInfer), shared-memory (system and CUDA), model-config,
 * model-repository (index, load, unload), statistics, trace, logging. A flag value is
 * "<api>[,<api>...]:<key>=<value>"; the flag may be repeated for groups with other headers, and
 * an API may be in one group only. The gRPC frontend checks the key prefixed with
 * "triton-grpc-protocol-", as Triton's does.
 */
#ifndef NR_RESTRICT_H
#define NR_RESTRICT_H

#include "../common/status.h"

#include <stdbool.h>
#include <stddef.h>

typedef enum {
    NR_API_HEALTH,
    NR_API_METADATA,
    NR_API_INFERENCE,
    NR_API_SHARED_MEMORY,
    NR_API_MODEL_CONFIG,
    NR_API_MODEL_REPOSITORY,
    NR_API_STATISTICS,
    NR_API_TRACE,
    NR_API_LOGGING,
    NR_API_COUNT,
    NR_API_NONE = NR_API_COUNT, /* not restrictable (a route that answers 404, say) */
} nr_api_t;

/* The header each group asks for (key NULL: the group is open). Zeroed: nothing restricted. */
typedef struct {
    struct {
        char *key;   /* with the protocol's prefix */
        char *value;
    } group[NR_API_COUNT];
} nr_restrict_t;

/* Adds the groups of one flag value; key_prefix is put before its key ("" or
 * "triton-grpc-protocol-"). INVALID_ARG for a value not of that form, an unknown API, or an
 * API already restricted. */
NR_MUST_CHECK nr_status_t *nr_restrict_add(nr_restrict_t *r, const char *flag_value,
                                           const char *key_prefix);
/* A copy of *from (which stays the caller's). */
void nr_restrict_copy(nr_restrict_t *to, const nr_restrict_t *from);
void nr_restrict_free(nr_restrict_t *r);

/* The header `api` asks for, or NULL when it is open. */
static inline const char *nr_restrict_key(const nr_restrict_t *r, nr_api_t api)
{
    return api < NR_API_COUNT ? r->group[api].key : NULL;
}
/* Whether a request to `api` whose header nr_restrict_key(r, api) has `value` (NULL: the
 * header is missing) may be served. */
bool nr_restrict_allows(const nr_restrict_t *r, nr_api_t api, const char *value, size_t len);
/* The refusal's text, Triton's: HTTP "This API is restricted, expecting header '<key>'",
 * gRPC "This protocol is restricted, expecting header '<key>'". */
NR_MUST_CHECK nr_status_t *nr_restrict_refusal(const nr_restrict_t *r, nr_api_t api,
                                               bool grpc);

#endif
