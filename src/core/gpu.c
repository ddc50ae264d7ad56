/* gpu.c - GPU discovery through the CUDA driver API, opened with dlopen (gpu.h).
 *
 * Five driver entry points, declared here from the driver API's documented signatures;
 * the two attribute numbers are CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR/MINOR.
 * Discovery runs once (pthread_once); the results never change afterwards.
 */
#include "gpu.h"

#include "../common/log.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#define CU_ATTR_CC_MAJOR 75
#define CU_ATTR_CC_MINOR 76
#define MAX_GPUS 64

static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static bool g_driver;
static int g_count;

static void discover(void)
{
    void *h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == NULL) {
        NR_LOG_VERBOSE(1, "no NVIDIA driver: %s", dlerror());
        return;
    }
    int (*cu_init)(unsigned), (*cu_count)(int *), (*cu_get)(int *, int),
        (*cu_attr)(int *, int, int), (*cu_name)(char *, int, int);
    void *p[5] = {dlsym(h, "cuInit"), dlsym(h, "cuDeviceGetCount"), dlsym(h, "cuDeviceGet"),
                  dlsym(h, "cuDeviceGetAttribute"), dlsym(h, "cuDeviceGetName")};
    for (int i = 0; i < 5; i++)
        if (p[i] == NULL) {
            NR_LOG_WARN("the NVIDIA driver library has no CUDA driver API: no GPUs used");
            return;
        }
    memcpy(&cu_init, &p[0], sizeof(p[0])); /* object -> function pointers, as POSIX allows */
    memcpy(&cu_count, &p[1], sizeof(p[1]));
    memcpy(&cu_get, &p[2], sizeof(p[2]));
    memcpy(&cu_attr, &p[3], sizeof(p[3]));
    memcpy(&cu_name, &p[4], sizeof(p[4]));
    int n = 0, rc = cu_init(0);
    if (rc == 0)
        rc = cu_count(&n);
    if (rc != 0) {
        NR_LOG_WARN("the NVIDIA driver failed to initialise (CUDA error %d): no GPUs used", rc);
        return;
    }
    g_driver = true;
    for (int i = 0; i < n && i < MAX_GPUS; i++) {
        int dev = 0, major = 0, minor = 0;
        char name[128] = "?";
        if (cu_get(&dev, i) != 0 || cu_attr(&major, CU_ATTR_CC_MAJOR, dev) != 0 ||
            cu_attr(&minor, CU_ATTR_CC_MINOR, dev) != 0)
            break;
        (void)cu_name(name, (int)sizeof(name), dev);
        bool ok = major + minor / 10.0 >= NR_GPU_MIN_COMPUTE_CAPABILITY;
        NR_LOG_INFO("GPU %d: %s, compute capability %d.%d%s", i, name, major, minor,
                    ok ? "" : " (below the minimum: not used, nor any GPU after it)");
        if (!ok)
            break;
        g_count = i + 1;
    }
    if (n == 0)
        NR_LOG_INFO("the NVIDIA driver reports no GPUs");
}

bool nr_gpu_driver(void)
{
    pthread_once(&g_once, discover);
    return g_driver;
}

int nr_gpu_count(void)
{
    pthread_once(&g_once, discover);
    return g_count;
}

nr_status_t *nr_gpu_check_config(const nr_model_config_t *cfg)
{
    if (!nr_gpu_driver())
        return NULL;
    int n = nr_gpu_count();
    for (size_t i = 0; i < cfg->n_instance_group; i++) {
        const nr_cfg_instance_group_t *g = &cfg->instance_group[i];
        if (g->kind != NR_KIND_GPU)
            continue;
        for (size_t k = 0; k < g->n_gpus; k++) {
            if (g->gpus[k] >= 0 && g->gpus[k] < n)
                continue;
            char ids[MAX_GPUS * 4] = "";
            size_t len = 0;
            for (int d = 0; d < n; d++)
                len += (size_t)snprintf(ids + len, sizeof(ids) - len, "%s%d", d ? ", " : "", d);
            return nr_status_new(NR_INVALID_ARG,
                                 "instance group %s of model %s specifies invalid or unsupported "
                                 "gpu id %d. GPUs with at least the minimum required CUDA compute "
                                 "compatibility of %f are: %s",
                                 g->name, cfg->name, (int)g->gpus[k],
                                 NR_GPU_MIN_COMPUTE_CAPABILITY, ids);
        }
    }
    return NULL;
}
