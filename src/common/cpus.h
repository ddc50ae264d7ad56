/* cpus.h - how many CPUs this process may run on.
 */
#ifndef NR_CPUS_H
#define NR_CPUS_H

/* The CPUs of this process's affinity mask (taskset, cgroups' cpusets), else
 * the online CPUs; at least 1. */
int nr_cpu_count(void);

#endif
