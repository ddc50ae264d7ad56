/* fuzz_util.h - what the fuzz drivers share: models without a backend (only
 * what the infer parser and request validation read), built from config text.
 * Not a public API; included by the tests/fuzz/fuzz_*.c drivers only.
 */
#ifndef NR_FUZZ_UTIL_H
#define NR_FUZZ_UTIL_H

#include "../../src/common/alloc.h"
#include "../../src/common/log.h"
#include "../../src/config/model_config.h"
#include "../../src/core/model.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

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

static uint32_t fuzz_by_name[FUZZ_N_MODELS][2] = {{1, 0}, {0, 0}, {0, 0}};

static inline nr_model_t *fuzz_fake_model(size_t i)
{
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse(FUZZ_CFGS[i], strlen(FUZZ_CFGS[i]), "fuzz/config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "fuzz config %zu: %s\n", i, st->msg);
        abort();
    }
    nr_cfg_normalize(cfg);
    nr_model_t *m = nr_calloc(1, sizeof(*m));
    m->name = cfg->name;
    m->version = 1;
    strcpy(m->version_str, "1");
    m->cfg = cfg;
    m->state = NR_MODEL_READY;
    m->outputs_by_name = fuzz_by_name[i];
    return m;
}

#endif
