/* rate_limit.h - Triton's rate limiter (--rate-limit=execution_count, --rate-limit-resource,
 * instance_group { rate_limiter { resources [...] priority } }): an instance that names
 * resources executes a batch only while it holds all of them; when several instances wait,
 * the next to run is, among those whose resources are free, the one with the smallest
 * priority x (executions so far + 1), so an instance of priority 2 gets half the turns of one
 * of priority 1 (Triton's execution_count mode).
 *
 * A resource is per device (the instance's GPU, 0 for CPU instances) unless the config says
 * `global: true`. Its count is --rate-limit-resource=<name>:<count>[:<device>] when given
 * (without a device: on every device), else the largest count any instance asks for (so each
 * instance can run alone). An instance asking for more than a given count fails to load, with
 * Triton's text.
 *
 * Process-wide, as host policies are: set from the command line before any model loads.
 * The instance takes its resources when it has a batch to run (core/instance.c), so a batch
 * waits already formed; Triton hands the batch to the instance the limiter picks instead.
 */
#ifndef NR_RATE_LIMIT_H
#define NR_RATE_LIMIT_H

#include "../common/status.h"
#include "../config/model_config.h"

#include <stdbool.h>

/* --rate-limit: execution_count (true) or off (false, the default: configs' rate_limiter
 * sections are then ignored, as Triton ignores them). */
void nr_rl_set_enabled(bool on);
bool nr_rl_enabled(void);
/* --rate-limit-resource=<name>:<count>[:<device>] (names case-insensitive, as Triton's).
 * INVALID_ARG for another form. */
NR_MUST_CHECK nr_status_t *nr_rl_add_resource(const char *spec);
/* Whether any --rate-limit-resource was given. */
bool nr_rl_has_resources(void);
/* Forgets the mode and every resource (at exit; no claim may be alive). */
void nr_rl_clear(void);

/* One instance's resources. */
typedef struct nr_rl_claim_s nr_rl_claim_t;
/* The claim of an instance of group ig on device `device`; *out NULL when the limiter is off
 * or the group names no resource. INVALID_ARG when it asks for more than a resource has. */
NR_MUST_CHECK nr_status_t *nr_rl_claim_new(const nr_cfg_instance_group_t *ig, int device,
                                           const char *instance, nr_rl_claim_t **out);
void nr_rl_claim_free(nr_rl_claim_t *c);
/* Blocks until the claim holds all its resources (its turn among the waiters). */
void nr_rl_acquire(nr_rl_claim_t *c);
/* Gives them back; the next waiter whose resources are now free runs. */
void nr_rl_release(nr_rl_claim_t *c);

#endif
