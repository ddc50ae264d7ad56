/* rate_limit.c - the rate limiter (rate_limit.h): one mutex, the resources, and the list of
 * claims waiting; whoever changes the resources (a release, a new waiter) hands them out. */
#include "rate_limit.h"

#include "../common/alloc.h"
#include "../common/cli.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ANY_DEVICE (-1) /* a --rate-limit-resource without a device; a global resource */

typedef struct {
    char *name;
    int device;      /* ANY_DEVICE: global, or given for every device */
    bool given;      /* by --rate-limit-resource: its count is fixed */
    uint32_t total;  /* what exists */
    uint32_t used;   /* held by running instances */
} resource_t;

typedef struct {
    size_t res;      /* index into g.res */
    uint32_t count;
} need_t;

struct nr_rl_claim_s {
    need_t *needs;
    size_t n_needs;
    uint64_t priority;   /* >= 1 */
    uint64_t executions; /* turns taken */
    bool granted;
    nr_rl_claim_t *next_waiter;
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool on;
    resource_t *res;
    size_t n_res;
    nr_rl_claim_t *waiters;
} g = {.mu = PTHREAD_MUTEX_INITIALIZER, .cv = PTHREAD_COND_INITIALIZER};

void nr_rl_set_enabled(bool on) { g.on = on; }
bool nr_rl_enabled(void) { return g.on; }

/* The resource (name, device), made when absent. Lock held (or before any model loads). */
static size_t resource(const char *name, size_t len, int device)
{
    for (size_t i = 0; i < g.n_res; i++)
        if (g.res[i].device == device && strlen(g.res[i].name) == len &&
            !strncasecmp(g.res[i].name, name, len))
            return i;
    g.res = nr_realloc(g.res, (g.n_res + 1) * sizeof(*g.res));
    g.res[g.n_res] = (resource_t){.name = nr_strndup(name, len), .device = device};
    return g.n_res++;
}

nr_status_t *nr_rl_add_resource(const char *spec)
{
    const char *c1 = strchr(spec, ':');
    const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
    long long count, device = ANY_DEVICE;
    char *cs = c1 ? nr_strndup(c1 + 1, c2 ? (size_t)(c2 - c1 - 1) : strlen(c1 + 1)) : NULL;
    bool ok = c1 != NULL && c1 != spec && nr_cli_int(cs, 0, UINT32_MAX, &count) &&
              (c2 == NULL || nr_cli_int(c2 + 1, 0, INT32_MAX, &device));
    free(cs);
    if (!ok)
        return nr_status_new(NR_INVALID_ARG, "--rate-limit-resource option format is "
                             "'<resource_name>:<count>:<device>' or '<resource_name>:<count>'. "
                             "Got %s", spec);
    pthread_mutex_lock(&g.mu);
    size_t k = resource(spec, (size_t)(c1 - spec), (int)device); /* (may move g.res) */
    resource_t *r = &g.res[k];
    r->given = true;
    r->total = (uint32_t)count;
    pthread_mutex_unlock(&g.mu);
    return NULL;
}

bool nr_rl_has_resources(void)
{
    for (size_t i = 0; i < g.n_res; i++)
        if (g.res[i].given)
            return true;
    return false;
}

void nr_rl_clear(void)
{
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < g.n_res; i++)
        free(g.res[i].name);
    free(g.res);
    g.res = NULL;
    g.n_res = 0;
    g.on = false;
    pthread_mutex_unlock(&g.mu);
}

/* The count a claim of (name, device) may have: the given count for that device, else the
 * given count for every device, else none (0, not given). Lock held. */
static const resource_t *given_for(const char *name, int device)
{
    const resource_t *any = NULL;
    for (size_t i = 0; i < g.n_res; i++) {
        const resource_t *r = &g.res[i];
        if (!r->given || strcasecmp(r->name, name))
            continue;
        if (r->device == device)
            return r;
        if (r->device == ANY_DEVICE)
            any = r;
    }
    return any;
}

nr_status_t *nr_rl_claim_new(const nr_cfg_instance_group_t *ig, int device,
                             const char *instance, nr_rl_claim_t **out)
{
    *out = NULL;
    if (!g.on || !ig->has_rate_limiter || ig->n_rl_resources == 0)
        return NULL;
    nr_rl_claim_t *c = nr_calloc(1, sizeof(*c));
    c->priority = ig->rl_priority > 0 ? ig->rl_priority : 1;
    c->needs = nr_calloc(ig->n_rl_resources, sizeof(*c->needs));
    pthread_mutex_lock(&g.mu);
    nr_status_t *st = NULL;
    for (size_t i = 0; i < ig->n_rl_resources && st == NULL; i++) {
        const nr_cfg_rl_resource_t *want = &ig->rl_resources[i];
        const char *name = want->name ? want->name : "";
        int dev = want->global ? ANY_DEVICE : device;
        const resource_t *fixed = given_for(name, dev);
        bool is_given = fixed != NULL;
        uint32_t given = is_given ? fixed->total : 0; /* (resource() may move the table) */
        if (is_given && given < want->count) {
            st = nr_status_new(NR_INVALID_ARG, "Resource count for \"%s\" is limited to %u "
                               "which will prevent scheduling of one or more model instances, "
                               "the minimum required count is %u (instance %s)", name, given,
                               want->count, instance);
            break;
        }
        size_t k = resource(name, strlen(name), dev);
        resource_t *r = &g.res[k];
        if (is_given && !r->given) { /* a per-device copy of a count given for all */
            r->given = true;
            r->total = given;
        } else if (!r->given && r->total < want->count) {
            r->total = want->count; /* the largest any instance asks for */
        }
        c->needs[c->n_needs++] = (need_t){k, want->count};
    }
    pthread_mutex_unlock(&g.mu);
    if (st != NULL) {
        nr_rl_claim_free(c);
        return st;
    }
    *out = c;
    return NULL;
}

void nr_rl_claim_free(nr_rl_claim_t *c)
{
    if (c == NULL)
        return;
    free(c->needs);
    free(c);
}

static bool fits(const nr_rl_claim_t *c)
{
    for (size_t i = 0; i < c->n_needs; i++) {
        const resource_t *r = &g.res[c->needs[i].res];
        if (r->used + c->needs[i].count > r->total)
            return false;
    }
    return true;
}

/* Hands the free resources to the waiters, the smallest priority x (executions + 1) first
 * among those that fit; wakes them. Lock held. */
static void grant(void)
{
    bool woke = false;
    for (;;) {
        nr_rl_claim_t **best = NULL;
        for (nr_rl_claim_t **p = &g.waiters; *p != NULL; p = &(*p)->next_waiter)
            if (fits(*p) && (best == NULL || (*p)->priority * ((*p)->executions + 1) <
                                                 (*best)->priority * ((*best)->executions + 1)))
                best = p;
        if (best == NULL)
            break;
        nr_rl_claim_t *c = *best;
        *best = c->next_waiter;
        for (size_t i = 0; i < c->n_needs; i++)
            g.res[c->needs[i].res].used += c->needs[i].count;
        c->executions++;
        c->granted = true;
        woke = true;
    }
    if (woke)
        pthread_cond_broadcast(&g.cv);
}

void nr_rl_acquire(nr_rl_claim_t *c)
{
    pthread_mutex_lock(&g.mu);
    c->granted = false;
    c->next_waiter = NULL;
    nr_rl_claim_t **tail = &g.waiters; /* arrival order breaks ties */
    while (*tail != NULL)
        tail = &(*tail)->next_waiter;
    *tail = c;
    grant();
    while (!c->granted)
        pthread_cond_wait(&g.cv, &g.mu);
    pthread_mutex_unlock(&g.mu);
}

void nr_rl_release(nr_rl_claim_t *c)
{
    pthread_mutex_lock(&g.mu);
    for (size_t i = 0; i < c->n_needs; i++)
        g.res[c->needs[i].res].used -= c->needs[i].count;
    grant();
    pthread_mutex_unlock(&g.mu);
}
