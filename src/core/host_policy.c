/* host_policy.c - Triton's host policies (host_policy.h), on libnuma and the
 * thread affinity calls. */
#include "host_policy.h"

#include "../common/alloc.h"

#include <errno.h>
#include <numa.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static nr_host_policy_t *policies;
static size_t n_policies;

struct nr_host_policy_saved_s {
    cpu_set_t cpus;
    struct bitmask *mems; /* NULL: memory policy untouched */
};

static nr_host_policy_t *policy_for(const char *name, size_t len)
{
    for (size_t i = 0; i < n_policies; i++)
        if (strlen(policies[i].name) == len && !memcmp(policies[i].name, name, len))
            return &policies[i];
    policies = nr_grow(policies, n_policies, sizeof(*policies));
    nr_host_policy_t *p = &policies[n_policies++];
    memset(p, 0, sizeof(*p));
    p->name = nr_strndup(name, len);
    p->numa_node = -1;
    return p;
}

static bool parse_uint(const char *s, size_t n, long *out)
{
    if (n == 0 || n > 9 || strspn(s, "0123456789") < n)
        return false;
    *out = strtol(s, NULL, 10);
    return true;
}

/* cpu-cores: "<lo>-<hi>", "<id>", or a comma list of them ("0-3,8-11"). */
static nr_status_t *parse_cores(nr_host_policy_t *p, const char *v, size_t n)
{
    long cores = sysconf(_SC_NPROCESSORS_CONF);
    for (size_t i = 0; i < n;) {
        size_t len = strcspn(v + i, ",");
        if (len > n - i)
            len = n - i;
        const char *item = v + i;
        const char *dash = memchr(item, '-', len);
        long lo, hi;
        bool ok = dash ? parse_uint(item, (size_t)(dash - item), &lo) &&
                             parse_uint(dash + 1, len - (size_t)(dash - item) - 1, &hi)
                       : parse_uint(item, len, &lo) && (hi = lo, true);
        if (!ok)
            return nr_status_new(NR_INVALID_ARG,
                                 "host policy setting 'cpu-cores' format is "
                                 "'<lower_cpu_core_id>-<upper_cpu_core_id>'. Got %.*s",
                                 (int)n, v);
        if (lo > hi || hi >= cores || hi >= CPU_SETSIZE)
            return nr_status_new(NR_INVALID_ARG,
                                 "host policy '%s': setting 'cpu-cores' names cores %ld-%ld; this "
                                 "machine has cores 0-%ld",
                                 p->name, lo, hi, cores - 1);
        for (long c = lo; c <= hi; c++)
            CPU_SET((int)c, &p->cores);
        i += len + 1;
    }
    p->has_cores = true;
    return NULL;
}

static nr_status_t *parse_node(nr_host_policy_t *p, const char *v, size_t n)
{
    long node;
    if (!parse_uint(v, n, &node))
        return nr_status_new(NR_INVALID_ARG,
                             "host policy setting 'numa-node' expects a node id. Got %.*s",
                             (int)n, v);
    int max = numa_available() < 0 ? 0 : numa_max_node();
    bool exists = numa_available() < 0 ? node == 0
                                       : node <= max &&
                                             numa_bitmask_isbitset(numa_all_nodes_ptr, (int)node);
    if (!exists)
        return nr_status_new(NR_INVALID_ARG,
                             "host policy '%s': setting 'numa-node' names node %ld; this machine "
                             "has NUMA nodes 0-%d (Unable to set NUMA memory policy: Invalid "
                             "argument)",
                             p->name, node, max);
    p->numa_node = (int)node;
    return NULL;
}

nr_status_t *nr_host_policy_add(const char *spec, bool *usage)
{
    const char *comma = strchr(spec, ',');
    const char *kv = comma ? comma + 1 : NULL, *eq = kv ? strchr(kv, '=') : NULL;
    *usage = comma == NULL || comma == spec || eq == NULL;
    if (*usage)
        return nr_status_new(NR_INVALID_ARG,
                             "--host-policy option format is '<policy name>,<setting>=<value>'. "
                             "Got %s",
                             spec);
    nr_host_policy_t *p = policy_for(spec, (size_t)(comma - spec));
    size_t klen = (size_t)(eq - kv); /* one setting a flag, as Triton: the value is the rest */
    if (klen == 9 && !memcmp(kv, "cpu-cores", 9))
        return parse_cores(p, eq + 1, strlen(eq + 1));
    if (klen == 9 && !memcmp(kv, "numa-node", 9))
        return parse_node(p, eq + 1, strlen(eq + 1));
    return nr_status_new(NR_UNSUPPORTED,
                         "Unsupported host policy setting '%.*s' is specified, supported "
                         "settings are 'numa-node', 'cpu-cores'",
                         (int)klen, kv);
}

const nr_host_policy_t *nr_host_policy_find(const char *name)
{
    for (size_t i = 0; name && i < n_policies; i++)
        if (!strcmp(policies[i].name, name))
            return &policies[i];
    return NULL;
}

bool nr_host_policy_binds(const nr_host_policy_t *p)
{
    return p != NULL && (p->has_cores || p->numa_node >= 0);
}

nr_status_t *nr_host_policy_apply(const nr_host_policy_t *p, nr_host_policy_saved_t **saved)
{
    if (saved) {
        *saved = nr_calloc(1, sizeof(**saved));
        pthread_getaffinity_np(pthread_self(), sizeof((*saved)->cpus), &(*saved)->cpus);
    }
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    bool set_cpus = p->has_cores;
    if (p->has_cores)
        cpus = p->cores;
    if (p->numa_node >= 0 && numa_available() >= 0) {
        if (saved)
            (*saved)->mems = numa_get_membind();
        struct bitmask *nodes = numa_allocate_nodemask();
        numa_bitmask_setbit(nodes, (unsigned)p->numa_node);
        numa_set_membind(nodes);
        numa_bitmask_free(nodes);
        if (!p->has_cores) { /* run where the memory is */
            struct bitmask *c = numa_allocate_cpumask();
            if (numa_node_to_cpus(p->numa_node, c) == 0)
                for (unsigned i = 0; i < c->size && i < CPU_SETSIZE; i++)
                    if (numa_bitmask_isbitset(c, i))
                        CPU_SET(i, &cpus), set_cpus = true;
            numa_bitmask_free(c);
        }
    }
    if (set_cpus) {
        int rc = pthread_setaffinity_np(pthread_self(), sizeof(cpus), &cpus);
        if (rc != 0)
            return nr_status_new(NR_INTERNAL, "Unable to set thread affinity for host policy "
                                              "'%s': %s",
                                 p->name, strerror(rc));
    }
    return NULL;
}

void nr_host_policy_restore(nr_host_policy_saved_t *saved)
{
    if (saved == NULL)
        return;
    pthread_setaffinity_np(pthread_self(), sizeof(saved->cpus), &saved->cpus);
    if (saved->mems) {
        numa_set_membind(saved->mems);
        numa_bitmask_free(saved->mems);
    }
    free(saved);
}

void nr_host_policy_clear(void)
{
    for (size_t i = 0; i < n_policies; i++)
        free(policies[i].name);
    free(policies);
    policies = NULL;
    n_policies = 0;
}
