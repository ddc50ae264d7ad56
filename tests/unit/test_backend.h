/* test_backend.h - a test backend for the core's unit tests (included by
 * test_core.c and test_scheduler.c; static, one copy per test binary): identity
 * on input 0, whose executions can be gated (each waits until the test opens
 * it) so that a queue's contents are known whenever a batch forms, and which
 * logs each execution (batch size, requests, instance, thread). With
 * tb_fail_items set, every request of an execution fails on its own (a
 * request-level backend error, the batch itself runs).
 */
#ifndef NR_TEST_BACKEND_H
#define NR_TEST_BACKEND_H

#include "../../src/common/alloc.h"
#include "../../src/core/model.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the gated test backend: identity on input 0 ---- */
#define MAX_EXEC 64
static pthread_mutex_t tb_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t tb_cv = PTHREAD_COND_INITIALIZER;
static bool tb_gated;           /* executions wait until opened */
static bool tb_open[MAX_EXEC];  /* per execution number */
static int tb_running, tb_nexec;
static bool tb_fail_items;      /* each item fails: "test backend failure" */
typedef struct {
    uint64_t size;               /* total batch size */
    size_t n;                    /* requests */
    int32_t first[16];           /* first input value of each request */
    char inst[32], thread[16];   /* instance that ran it, and its thread's name */
    pthread_t tid;               /* the thread that ran it */
} exec_rec_t;
static exec_rec_t tb_exec_log[MAX_EXEC];

typedef struct { nr_hold_t h; void *mem; } tb_hold_t;
static inline void tb_release(nr_hold_t *h)
{
    tb_hold_t *t = (tb_hold_t *)h;
    free(t->mem);
    free(t);
}
typedef struct { const nr_model_config_t *cfg; char name[32]; } tb_inst_t;

static inline nr_status_t *tb_load(const nr_model_config_t *cfg, const char *dir, const char *path,
                            void **state)
{
    *state = (void *)cfg;
    return NULL;
}
static inline nr_status_t *tb_inst(void *ms, const nr_instance_info_t *info, void **is)
{
    tb_inst_t *t = nr_calloc(1, sizeof(*t));
    t->cfg = ms;
    snprintf(t->name, sizeof(t->name), "%s", info->name);
    *is = t;
    return NULL;
}
static inline nr_status_t *tb_exec(void *is, nr_batch_t *b)
{
    tb_inst_t *ti = is;
    pthread_mutex_lock(&tb_mu);
    int e = tb_nexec++;
    exec_rec_t *rec = &tb_exec_log[e % MAX_EXEC];
    rec->size = b->total_batch_size;
    rec->n = b->n;
    for (size_t i = 0; i < b->n && i < 16; i++)
        rec->first[i] = b->items[i]->inputs[0].data ? *(const int32_t *)b->items[i]->inputs[0].data : -1;
    snprintf(rec->inst, sizeof(rec->inst), "%s", ti->name);
    pthread_getname_np(pthread_self(), rec->thread, sizeof(rec->thread));
    rec->tid = pthread_self();
    tb_running++;
    pthread_cond_broadcast(&tb_cv);
    while (tb_gated && !tb_open[e % MAX_EXEC])
        pthread_cond_wait(&tb_cv, &tb_mu);
    tb_running--;
    pthread_cond_broadcast(&tb_cv);
    bool fail = tb_fail_items;
    pthread_mutex_unlock(&tb_mu);
    for (size_t i = 0; i < b->n; i++) {
        nr_batch_item_t *it = b->items[i];
        if (fail) {
            it->status = nr_status_new(NR_INVALID_ARG, "test backend failure");
            continue;
        }
        for (size_t k = 0; k < it->n_want; k++) {
            const nr_tensor_t *in = &it->inputs[0];
            nr_tensor_t *out = &it->outputs[k];
            tb_hold_t *h = nr_calloc(1, sizeof(*h));
            h->mem = nr_malloc(in->size ? in->size : 1);
            memcpy(h->mem, in->data, in->size);
            atomic_init(&h->h.refs, 1);
            h->h.release = tb_release;
            out->name = ti->cfg->output[it->want[k]].name;
            out->dtype = in->dtype;
            out->ndim = in->ndim;
            memcpy(out->dims, in->dims, sizeof(in->dims));
            out->data = h->mem;
            out->size = in->size;
            out->hold = &h->h;
        }
    }
    b->input_end_ns = nr_now_ns();
    b->infer_end_ns = nr_now_ns();
    return NULL;
}
static inline void tb_inst_destroy(void *is) { free(is); }
static inline void tb_unload(void *ms) {}
static const nr_backend_t test_backend = {"test", NR_BACKEND_ABI_VERSION, NULL, tb_load, tb_inst,
                                          tb_exec, tb_inst_destroy, tb_unload};

static inline void gate_reset(bool gated)
{
    pthread_mutex_lock(&tb_mu);
    tb_gated = gated;
    memset(tb_open, 0, sizeof(tb_open));
    memset(tb_exec_log, 0, sizeof(tb_exec_log));
    tb_nexec = 0;
    pthread_cond_broadcast(&tb_cv);
    pthread_mutex_unlock(&tb_mu);
}
static inline void gate_open(int e)
{
    pthread_mutex_lock(&tb_mu);
    tb_open[e % MAX_EXEC] = true;
    pthread_cond_broadcast(&tb_cv);
    pthread_mutex_unlock(&tb_mu);
}
static inline void gate_open_all(void)
{
    pthread_mutex_lock(&tb_mu);
    tb_gated = false;
    pthread_cond_broadcast(&tb_cv);
    pthread_mutex_unlock(&tb_mu);
}
/* Waits until `n` executions have started and `running` are inside execute. */
static inline void wait_execs(int n, int running)
{
    pthread_mutex_lock(&tb_mu);
    while (tb_nexec < n || tb_running != running)
        pthread_cond_wait(&tb_cv, &tb_mu);
    pthread_mutex_unlock(&tb_mu);
}
static inline int nexec(void)
{
    pthread_mutex_lock(&tb_mu);
    int n = tb_nexec;
    pthread_mutex_unlock(&tb_mu);
    return n;
}
static inline int tb_count(void) /* executions started so far */
{
    return nexec();
}

/* Parses, completes and validates a config and loads it on the test backend
 * (instance threads started, inline execution off). NULL on error (printed). */
static inline nr_model_t *tb_load_model_text(const char *text)
{
    nr_model_config_t *cfg;
    nr_status_t *st = nr_cfg_parse(text, strlen(text), "test/config.pbtxt", &cfg);
    if (st) {
        fprintf(stderr, "parse: %s\n", st->msg);
        nr_status_free(st);
        return NULL;
    }
    nr_cfg_normalize(cfg);
    nr_cfg_fill_instance_groups(cfg, 1, 0);
    st = nr_cfg_validate(cfg, cfg->name);
    if (st == NULL) {
        nr_model_t *m = nr_calloc(1, sizeof(*m));
        m->cfg = cfg;
        m->version = 1;
        m->backend = &test_backend;
        st = nr_model_load(m, "dir", "dir/1/model", 1);
        if (st == NULL) {
            m->state = NR_MODEL_READY;
            atomic_init(&m->refs, 1u << 30); /* never released to 0: freed by the test */
            return m;
        }
        free(m);
    }
    fprintf(stderr, "load: %s\n", st->msg);
    nr_status_free(st);
    nr_cfg_free(cfg);
    return NULL;
}

static inline void unload_model(nr_model_t *m)
{
    nr_model_unload(m);
    nr_cfg_free((nr_model_config_t *)m->cfg);
    free(m);
}

#endif
