/* test_gpu.c - GPU discovery and Triton's gpu-id check (src/core/gpu.c) against
 * tests/unit/fake_libcuda.c: the binary re-executes itself once with the fake driver's folder
 * on LD_LIBRARY_PATH (the loader reads it only at start), so that dlopen("libcuda.so.1") finds
 * it. Run without the fake (its folder missing), it checks the no-driver case instead.
 */
#include "nr_test.h"

#include "../../src/common/alloc.h"
#include "../../src/config/model_config.h"
#include "../../src/core/gpu.h"

#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static bool g_fake; /* the fake driver is on the library path */

static nr_model_config_t *config(const char *groups)
{
    char *text = nr_asprintf("name: \"m\" backend: \"onnxruntime\" platform: \"onnxruntime_onnx\" "
                             "input [ { name: \"I\" data_type: TYPE_FP32 dims: [ 4 ] } ] "
                             "output [ { name: \"O\" data_type: TYPE_FP32 dims: [ 4 ] } ] %s",
                             groups);
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "config.pbtxt", &cfg);
    free(text);
    if (st) {
        fprintf(stderr, "unexpected parse error: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 2, nr_gpu_count());
    return cfg;
}

NR_TEST(discovery_stops_at_the_first_gpu_below_the_minimum)
{
    EXPECT_TRUE(nr_gpu_driver() == g_fake);
    EXPECT_EQ_INT(nr_gpu_count(), g_fake ? 2 : 0);
}

NR_TEST(kind_auto_and_kind_gpu_without_gpus_take_every_gpu)
{
    nr_model_config_t *cfg = config("instance_group [ { count: 1 }, { kind: KIND_GPU } ]");
    ASSERT_TRUE(cfg != NULL);
    for (size_t i = 0; i < 2; i++) {
        const nr_cfg_instance_group_t *g = &cfg->instance_group[i];
        if (g_fake) {
            EXPECT_EQ_INT(g->kind, NR_KIND_GPU);
            EXPECT_EQ_INT(g->n_gpus, 2);
            EXPECT_TRUE(g->n_gpus == 2 && g->gpus[0] == 0 && g->gpus[1] == 1);
        } else {
            EXPECT_EQ_INT(g->kind, i == 0 ? NR_KIND_CPU : NR_KIND_GPU);
            EXPECT_EQ_INT(g->n_gpus, 0);
        }
    }
    nr_cfg_free(cfg);
}

NR_TEST(gpu_ids_are_checked_only_where_a_driver_answers)
{
    nr_model_config_t *cfg = config("instance_group [ { kind: KIND_GPU gpus: [ 1 ] }, "
                                    "{ kind: KIND_GPU gpus: [ 0, 2 ] } ]");
    ASSERT_TRUE(cfg != NULL);
    if (g_fake) /* Triton's text; device 2 is below 6.0, so it is no GPU of this server */
        EXPECT_STATUS(nr_gpu_check_config(cfg), NR_INVALID_ARG,
                      "instance group m_1 of model m specifies invalid or unsupported gpu id 2. "
                      "GPUs with at least the minimum required CUDA compute compatibility of "
                      "6.000000 are: 0, 1");
    else /* no driver: the backend says what is missing */
        EXPECT_OK(nr_gpu_check_config(cfg));
    nr_cfg_free(cfg);
    cfg = config("instance_group [ { kind: KIND_GPU gpus: [ 1, 0 ] }, { kind: KIND_CPU } ]");
    ASSERT_TRUE(cfg != NULL);
    EXPECT_OK(nr_gpu_check_config(cfg));
    nr_cfg_free(cfg);
}

int main(int argc, char **argv)
{
    char self[PATH_MAX], dir[PATH_MAX + 32], lib[PATH_MAX + 64];
    ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    if (n <= 0)
        return 1;
    self[n] = '\0';
    snprintf(dir, sizeof(dir), "%.*s/fake_cuda", (int)(strrchr(self, '/') - self), self);
    snprintf(lib, sizeof(lib), "%s/libcuda.so.1", dir);
    const char *was = getenv("NR_TEST_FAKE_CUDA");
    if (was == NULL && access(lib, R_OK) == 0) {
        setenv("NR_TEST_FAKE_CUDA", "1", 1);
        setenv("LD_LIBRARY_PATH", dir, 1);
        execv(self, argv);
        perror("execv");
        return 1;
    }
    const char *fail = getenv("FAKE_CUDA_FAIL"); /* the fake driver then fails to start */
    g_fake = was != NULL && !(fail && *fail == '1');
    printf("test_gpu: %s\n", g_fake ? "with the fake driver" : "without a driver");
    return nr_test_run_all(argc, argv);
}
