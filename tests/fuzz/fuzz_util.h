/* fuzz_util.h - what the fuzz drivers share: models without a backend (only
 * what the infer parser and request validation read), built from config text,
 * and a real server over the example models with a shared-memory object.
 * Not a public API; included by the tests/fuzz/fuzz_*.c drivers only.
 */
#ifndef NR_FUZZ_UTIL_H
#define NR_FUZZ_UTIL_H

#include "../../src/common/alloc.h"
#include "../../src/common/log.h"
#include "../../src/config/model_config.h"
#include "../../src/core/model.h"
#include "../../src/core/server.h"
#include "../unit/fake_model.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#ifndef NR_SRC_ROOT
#define NR_SRC_ROOT "."
#endif

/* The example repository's simple (INT32 [16] x2, batching) and
 * identity_fp32 (FP32 [-1]), plus a STRING model without batching. */
static const char *const FUZZ_CFGS[] = {
    "name: \"simple\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"INPUT1\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n"
    "output [ { name: \"OUTPUT1\" data_type: TYPE_INT32 dims: [ 16 ] },"
    " { name: \"OUTPUT0\" data_type: TYPE_INT32 dims: [ 16 ] } ]\n",
    "name: \"identity_fp32\"\nbackend: \"onnxruntime\"\nmax_batch_size: 8\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_FP32 dims: [ -1 ] } ]\n",
    "name: \"identity_string\"\nbackend: \"onnxruntime\"\nmax_batch_size: 0\n"
    "input [ { name: \"INPUT0\" data_type: TYPE_STRING dims: [ -1, 2 ] } ]\n"
    "output [ { name: \"OUTPUT0\" data_type: TYPE_STRING dims: [ -1, 2 ] } ]\n",
};
#define FUZZ_N_MODELS (sizeof(FUZZ_CFGS) / sizeof(FUZZ_CFGS[0]))

static inline nr_model_t *fuzz_fake_model(size_t i)
{
    nr_model_t *m = nr_fake_model(FUZZ_CFGS[i], true);
    if (m == NULL)
        abort();
    return m;
}

static const char *const FUZZ_EXAMPLES[] = {"simple", "identity_fp32"};

/* A server core over a temporary repository (dir: a mkdtemp template, filled
 * in) that links the example models simple and identity_fp32 (written by
 * `make models`), with the shared-memory object `shm_key` of shm_size bytes
 * created; aborts when anything is missing. */
static inline nr_server_t *fuzz_example_server(char *dir, const char *shm_key, size_t shm_size)
{
    nr_log_settings.info = false;
    nr_log_settings.warn = false;
    if (mkdtemp(dir) == NULL) {
        perror("mkdtemp");
        abort();
    }
    for (size_t i = 0; i < 2; i++) {
        char src[512], dst[512];
        snprintf(src, sizeof(src), "%s/examples/model_repository/%s", NR_SRC_ROOT,
                 FUZZ_EXAMPLES[i]);
        snprintf(dst, sizeof(dst), "%s/%s", dir, FUZZ_EXAMPLES[i]);
        if (symlink(src, dst) != 0) {
            perror("symlink");
            abort();
        }
    }
    const char *paths[] = {dir};
    nr_repo_options_t ro = {.paths = paths, .n_paths = 1, .autocomplete = true, .cpu_count = 1};
    nr_repo_t *repo = NULL;
    nr_status_t *st = nr_repo_create(&ro, &repo);
    if (st != NULL || !nr_repo_all_ready(repo)) {
        fprintf(stderr, "fuzz: the example models did not load (run `make models`)%s%s\n",
                st ? ": " : "", st ? st->msg : "");
        abort();
    }
    nr_server_options_t so = {.id = "triton", .version = "", .strict_readiness = true};
    int fd = shm_open(shm_key, O_RDWR | O_CREAT, 0600);
    if (fd < 0 || ftruncate(fd, (off_t)shm_size) != 0) {
        perror(shm_key);
        abort();
    }
    close(fd);
    return nr_server_new(&so, repo);
}

/* The state every input finds: the registry with region "fz" over the whole
 * object, and the quiet log settings of the setup (an input may change them
 * through the logging extension). */
static inline void fuzz_reset(nr_server_t *core, const char *shm_key, size_t shm_size)
{
    nr_log_settings.info = nr_log_settings.warn = false;
    nr_log_settings.error = true;
    nr_log_settings.verbose = 0;
    nr_log_settings.iso8601 = false;
    nr_shm_unregister(nr_server_shm(core), NULL, 0);
    nr_status_t *st = nr_shm_register(nr_server_shm(core), "fz", 2, shm_key, strlen(shm_key), 0,
                                      shm_size);
    if (st != NULL) {
        fprintf(stderr, "fuzz: %s\n", st->msg);
        abort();
    }
}

static inline void fuzz_example_cleanup(nr_server_t *core, const char *dir, const char *shm_key)
{
    nr_server_free(core);
    shm_unlink(shm_key);
    char p[512];
    for (size_t i = 0; i < 2; i++) {
        snprintf(p, sizeof(p), "%s/%s", dir, FUZZ_EXAMPLES[i]);
        unlink(p);
    }
    rmdir(dir);
}

#endif
