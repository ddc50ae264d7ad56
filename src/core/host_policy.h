/* host_policy.h - Triton's host policies (--host-policy=<name>,<setting>=<value>):
 * named sets of CPU cores (`cpu-cores`) and a NUMA node (`numa-node`) that
 * instances take by name (instance_group host_policy, or Triton's default
 * names: "cpu" for KIND_CPU, "gpu_<id>" for KIND_GPU, "model" for KIND_MODEL).
 *
 * The table is process-wide, filled from the command line before any model
 * loads and read-only afterwards (any thread may look a policy up).
 */
#ifndef NR_HOST_POLICY_H
#define NR_HOST_POLICY_H

#include "../common/status.h"

#include <sched.h>
#include <stdbool.h>

typedef struct {
    char *name;
    bool has_cores;
    cpu_set_t cores;  /* cpu-cores */
    int numa_node;    /* numa-node, -1 if none */
} nr_host_policy_t;

/* One --host-policy value: "<name>,<setting>=<value>" (one setting a flag,
 * as Triton; the value is the rest, so cpu-cores may list "0-3,8-11").
 * Settings of a name given twice accumulate. Errors (format, unknown
 * setting, a core or node this machine does not have) say what is wrong;
 * *usage is set when the error is the option's format (Triton prints the
 * usage text then). */
NR_MUST_CHECK nr_status_t *nr_host_policy_add(const char *spec, bool *usage);
/* The policy of that name, or NULL (a name no --host-policy gave). */
const nr_host_policy_t *nr_host_policy_find(const char *name);
/* Whether the policy would move a thread or its memory. */
bool nr_host_policy_binds(const nr_host_policy_t *p);
/* Applies p to the calling thread: CPU affinity to its cores (the node's
 * cores when only numa-node is set) and memory bound to its node. With
 * `saved` non-NULL, first stores the thread's current affinity and memory
 * policy there for nr_host_policy_restore. */
typedef struct nr_host_policy_saved_s nr_host_policy_saved_t;
NR_MUST_CHECK nr_status_t *nr_host_policy_apply(const nr_host_policy_t *p,
                                                nr_host_policy_saved_t **saved);
void nr_host_policy_restore(nr_host_policy_saved_t *saved);
/* Frees the table (at exit). */
void nr_host_policy_clear(void);

#endif
