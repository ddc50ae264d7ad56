/* fake_libcuda.c - a stand-in for the NVIDIA driver library (libcuda.so.1) for test_gpu:
 * the five driver API calls src/core/gpu.c makes, answering for three devices of compute
 * capability 9.0, 8.6 and 5.2 (the last below Triton's minimum). Built as
 * <build>/tests/fake_cuda/libcuda.so.1, without sanitizers; CI has no GPU, so this is what
 * tests GPU discovery and Triton's gpu-id check there (tests/e2e/test_gpu.py does it on a
 * real GPU). FAKE_CUDA_FAIL=1 makes cuInit fail as a driver without a device does (100). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const int cc[3][2] = {{9, 0}, {8, 6}, {5, 2}};

int cuInit(unsigned flags)
{
    (void)flags;
    const char *f = getenv("FAKE_CUDA_FAIL");
    return f && *f == '1' ? 100 : 0;
}

int cuDeviceGetCount(int *n)
{
    *n = 3;
    return 0;
}

int cuDeviceGet(int *dev, int ordinal)
{
    if (ordinal < 0 || ordinal > 2)
        return 101; /* CUDA_ERROR_INVALID_DEVICE */
    *dev = ordinal;
    return 0;
}

int cuDeviceGetAttribute(int *v, int attr, int dev)
{
    if (dev < 0 || dev > 2 || (attr != 75 && attr != 76))
        return 1;
    *v = cc[dev][attr == 76];
    return 0;
}

int cuDeviceGetName(char *name, int len, int dev)
{
    snprintf(name, (size_t)len, "Fake GPU %d", dev);
    return 0;
}
