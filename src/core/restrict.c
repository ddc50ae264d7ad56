/* restrict.c - restricted API groups (restrict.h). */
#include "restrict.h"

#include "../common/alloc.h"

#include <stdlib.h>
#include <string.h>

static const char *const api_names[NR_API_COUNT] = {
    [NR_API_HEALTH] = "health",
    [NR_API_METADATA] = "metadata",
    [NR_API_INFERENCE] = "inference",
    [NR_API_SHARED_MEMORY] = "shared-memory",
    [NR_API_MODEL_CONFIG] = "model-config",
    [NR_API_MODEL_REPOSITORY] = "model-repository",
    [NR_API_STATISTICS] = "statistics",
    [NR_API_TRACE] = "trace",
    [NR_API_LOGGING] = "logging",
};

static int api_of(const char *name, size_t len)
{
    for (int i = 0; i < NR_API_COUNT; i++)
        if (strlen(api_names[i]) == len && !strncmp(api_names[i], name, len))
            return i;
    return -1;
}

nr_status_t *nr_restrict_add(nr_restrict_t *r, const char *v, const char *key_prefix)
{
    const char *colon = strrchr(v, ':');
    const char *eq = colon ? strchr(colon + 1, '=') : NULL;
    if (colon == NULL || eq == NULL || colon == v || eq == colon + 1)
        return nr_status_new(NR_INVALID_ARG, "restricted api option format is "
                                             "'<api>[,<api>...]:<key>=<value>', got '%s'", v);
    /* every name first, so that a refused value changes nothing */
    bool named[NR_API_COUNT] = {false};
    for (const char *p = v; p < colon;) {
        size_t n = strcspn(p, ",:");
        int a = api_of(p, n);
        if (a < 0)
            return nr_status_new(NR_INVALID_ARG, "unknown restricted api '%.*s' (allowed: "
                                 "health, metadata, inference, shared-memory, model-config, "
                                 "model-repository, statistics, trace, logging)", (int)n, p);
        if (r->group[a].key != NULL || named[a])
            return nr_status_new(NR_INVALID_ARG, "restricted api '%s' is given more than once "
                                 "(an api can be in one group only)", api_names[a]);
        named[a] = true;
        p += n + (p[n] == ',');
    }
    for (int a = 0; a < NR_API_COUNT; a++)
        if (named[a]) {
            r->group[a].key = nr_asprintf("%s%.*s", key_prefix, (int)(eq - colon - 1),
                                          colon + 1);
            r->group[a].value = nr_strdup(eq + 1);
        }
    return NULL;
}

void nr_restrict_copy(nr_restrict_t *to, const nr_restrict_t *from)
{
    for (int a = 0; a < NR_API_COUNT; a++) {
        to->group[a].key = from->group[a].key ? nr_strdup(from->group[a].key) : NULL;
        to->group[a].value = from->group[a].value ? nr_strdup(from->group[a].value) : NULL;
    }
}

void nr_restrict_free(nr_restrict_t *r)
{
    for (int a = 0; a < NR_API_COUNT; a++) {
        free(r->group[a].key);
        free(r->group[a].value);
        r->group[a].key = r->group[a].value = NULL;
    }
}

bool nr_restrict_allows(const nr_restrict_t *r, nr_api_t api, const char *value, size_t len)
{
    if (nr_restrict_key(r, api) == NULL)
        return true;
    const char *want = r->group[api].value;
    return value != NULL && strlen(want) == len && !memcmp(want, value, len);
}

nr_status_t *nr_restrict_refusal(const nr_restrict_t *r, nr_api_t api, bool grpc)
{
    /* Triton's codes: evhtp's 403 for HTTP (FORBIDDEN maps to no core code: the frontend sets
     * it), gRPC UNAVAILABLE */
    return nr_status_new(NR_UNAVAILABLE, "This %s is restricted, expecting header '%s'",
                         grpc ? "protocol" : "API", nr_restrict_key(r, api));
}
