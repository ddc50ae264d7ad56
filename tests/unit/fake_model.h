/* fake_model.h - a loaded model version without a backend, from config text:
 * only what request parsing, validation and reply encoding read (the config,
 * name, version, state, and the name indexes nr_model_index builds). For unit
 * tests and fuzz drivers; header-only.
 */
#ifndef NR_FAKE_MODEL_H
#define NR_FAKE_MODEL_H

#include "../../src/common/alloc.h"
#include "../../src/config/model_config.h"
#include "../../src/core/model.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* normalize: apply Triton's config normalization first. NULL (with the parse
 * error on stderr) when the text does not parse. */
static inline nr_model_t *nr_fake_model(const char *pbtxt, bool normalize)
{
    nr_model_config_t *cfg = NULL;
    nr_status_t *st = nr_cfg_parse(pbtxt, strlen(pbtxt), "test/config.pbtxt", &cfg);
    if (st != NULL) {
        fprintf(stderr, "config: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    if (normalize)
        nr_cfg_normalize(cfg);
    nr_model_t *m = nr_calloc(1, sizeof(*m));
    m->name = cfg->name;
    m->version = 1;
    strcpy(m->version_str, "1");
    m->cfg = cfg;
    m->state = NR_MODEL_READY;
    atomic_init(&m->refs, 1u << 30); /* never released to 0: freed by the test */
    nr_model_index(m);
    return m;
}

static inline void nr_fake_model_free(nr_model_t *m)
{
    if (m == NULL)
        return;
    nr_model_index_free(m);
    nr_cfg_free((nr_model_config_t *)m->cfg);
    free(m);
}

#endif
