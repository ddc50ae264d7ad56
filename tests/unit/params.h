/* params.h - core parameters (nr_param_t) built by hand, for the unit tests of the core and
 * of each frontend's rules over them. */
#ifndef NR_TEST_PARAMS_H
#define NR_TEST_PARAMS_H

#include "../../src/core/kserve.h"

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

static inline nr_param_t p_int(const char *k, int64_t v)
{
    return (nr_param_t){.key = k, .key_len = strlen(k), .type = NR_PARAM_INT64, .v.i = v};
}
static inline nr_param_t p_uint(const char *k, uint64_t v)
{
    return (nr_param_t){.key = k, .key_len = strlen(k), .type = NR_PARAM_UINT64, .v.u = v};
}
static inline nr_param_t p_str(const char *k, const char *v)
{
    return (nr_param_t){.key = k, .key_len = strlen(k), .type = NR_PARAM_STRING,
                        .v.s = {v, strlen(v)}};
}
static inline nr_param_t p_bool(const char *k, bool v)
{
    return (nr_param_t){.key = k, .key_len = strlen(k), .type = NR_PARAM_BOOL, .v.b = v};
}
static inline nr_param_t p_other(const char *k)
{
    return (nr_param_t){.key = k, .key_len = strlen(k), .type = NR_PARAM_OTHER};
}

/* An update request as a list of parameters (the last of a key counts). */
typedef struct {
    const nr_param_t *p;
    size_t n;
} nr_test_updates_t;

static inline bool nr_test_find_update(const char *key, nr_param_t *out, void *arg)
{
    const nr_test_updates_t *u = arg;
    bool found = false;
    for (size_t i = 0; i < u->n; i++)
        if (nr_param_is(&u->p[i], key)) {
            *out = u->p[i];
            found = true;
        }
    return found;
}

#endif
