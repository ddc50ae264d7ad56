/* gpu.h - the GPUs this process may use, found as Triton finds them: the CUDA devices the
 * NVIDIA driver reports (CUDA_VISIBLE_DEVICES applies) whose compute capability is at least
 * Triton's default minimum, 6.0. The driver library (libcuda.so.1) is opened on first use,
 * once per process; nereid needs no CUDA to build or run, and without a driver there are no
 * GPUs. Safe from any thread.
 */
#ifndef NR_GPU_H
#define NR_GPU_H

#include "../common/status.h"
#include "../config/model_config.h"

#include <stdbool.h>

#define NR_GPU_MIN_COMPUTE_CAPABILITY 6.0

/* Whether an NVIDIA driver was found and initialised. */
bool nr_gpu_driver(void);
/* The number of usable GPUs: ids 0 .. n-1 (devices below the minimum capability end the
 * count, so ids stay dense, as the instance groups that name them expect). */
int nr_gpu_count(void);
/* Triton's check of the gpus an instance group names, against the GPUs found: INVALID_ARG
 * "instance group <g> of model <m> specifies invalid or unsupported gpu id <n>. ..." Done
 * only where a driver was found: without one, a KIND_GPU group that names its GPUs reaches
 * the backend, whose error names what is missing (the driver library). */
NR_MUST_CHECK nr_status_t *nr_gpu_check_config(const nr_model_config_t *cfg);

#endif
