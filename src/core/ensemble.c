/* ensemble.c - the ensemble's plan and its runs (ensemble.h).
 *
 * The plan numbers the ensemble tensors (every name the steps' maps and the ensemble's
 * inputs and outputs use) and, per step, lists the (model tensor, ensemble tensor) pairs it
 * reads and writes; per tensor, the steps that read it. A run is one ensemble request: the
 * tensors produced so far, per step the number of distinct input tensors still missing, and
 * the steps in flight, under one mutex that is never held across a submit or a done().
 * The run is reference counted through its own hold: the ensemble's outputs keep it (and the
 * step outputs it took over, and the composing model versions those came from) alive until
 * the frontend frees the ensemble request.
 */
#include "ensemble.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/debug.h"
#include "../common/strmap.h"
#include "cache.h"
#include "model.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    const char *model_name;
    int64_t version;                 /* -1: the highest READY version */
    const char **in_name; uint32_t *in_tensor; size_t n_in;   /* input_map */
    const char **out_name; uint32_t *out_tensor; size_t n_out; /* output_map */
    uint32_t n_sources;              /* distinct tensors it reads */
    uint32_t label_in, label_out;    /* decoupled labels (decouple_labels) */
    bool decoupled;                  /* its model is: each response is an iteration */
} step_t;

struct nr_ensemble_s {
    nr_model_t *model; /* the ensemble (its config owns every name here) */
    nr_model_lookup_fn lookup;
    void *lookup_arg;
    const char **tensor; size_t n_tensors; /* the ensemble tensors' names */
    nr_strmap_t tensor_index;
    step_t *steps; size_t n_steps;
    uint32_t *readers_at, *readers;  /* per tensor: the steps that read it (CSR, each once) */
    uint32_t *input_tensor;          /* [cfg n_input] */
    uint32_t *output_tensor;         /* [cfg n_output] */
    bool decoupled;                  /* a step's model is: the ensemble answers as they do */
    uint32_t out_label;              /* the label of the ensemble's outputs */
    _Atomic uint64_t inflight;
};

/* ---- the plan ---- */

static uint32_t tensor_of(nr_ensemble_t *e, const char *name)
{
    uint32_t i;
    if (nr_strmap_get(&e->tensor_index, name, strlen(name), &i))
        return i;
    i = (uint32_t)e->n_tensors;
    e->tensor = nr_grow(e->tensor, e->n_tensors, sizeof(char *));
    e->tensor[e->n_tensors++] = name;
    nr_strmap_put(&e->tensor_index, name, strlen(name), i, NULL);
    return i;
}

static void plan_step(nr_ensemble_t *e, step_t *st, const nr_cfg_ensemble_step_t *cs)
{
    st->model_name = cs->model_name;
    st->version = cs->model_version;
    st->n_in = cs->n_input_map;
    st->in_name = nr_calloc(st->n_in + 1, sizeof(char *));
    st->in_tensor = nr_calloc(st->n_in + 1, sizeof(uint32_t));
    for (size_t i = 0; i < st->n_in; i++) {
        st->in_name[i] = cs->input_map[i].key;
        st->in_tensor[i] = tensor_of(e, cs->input_map[i].value);
    }
    st->n_out = cs->n_output_map;
    st->out_name = nr_calloc(st->n_out + 1, sizeof(char *));
    st->out_tensor = nr_calloc(st->n_out + 1, sizeof(uint32_t));
    for (size_t i = 0; i < st->n_out; i++) {
        st->out_name[i] = cs->output_map[i].key;
        st->out_tensor[i] = tensor_of(e, cs->output_map[i].value);
    }
}

/* Whether step s reads tensor t through an input before its k-th one. */
static bool read_before(const step_t *st, size_t k)
{
    for (size_t i = 0; i < k; i++)
        if (st->in_tensor[i] == st->in_tensor[k])
            return true;
    return false;
}

/* The readers of each tensor, each step once; each step's count of distinct sources. */
static void plan_readers(nr_ensemble_t *e)
{
    e->readers_at = nr_calloc(e->n_tensors + 1, sizeof(uint32_t));
    for (size_t s = 0; s < e->n_steps; s++)
        for (size_t k = 0; k < e->steps[s].n_in; k++)
            if (!read_before(&e->steps[s], k)) {
                e->readers_at[e->steps[s].in_tensor[k] + 1]++;
                e->steps[s].n_sources++;
            }
    for (size_t t = 0; t < e->n_tensors; t++)
        e->readers_at[t + 1] += e->readers_at[t];
    e->readers = nr_calloc(e->readers_at[e->n_tensors] + 1, sizeof(uint32_t));
    uint32_t *fill = nr_calloc(e->n_tensors + 1, sizeof(uint32_t));
    memcpy(fill, e->readers_at, e->n_tensors * sizeof(uint32_t));
    for (size_t s = 0; s < e->n_steps; s++)
        for (size_t k = 0; k < e->steps[s].n_in; k++)
            if (!read_before(&e->steps[s], k))
                e->readers[fill[e->steps[s].in_tensor[k]]++] = (uint32_t)s;
    free(fill);
}

/* An ensemble output without labels of its own takes those of the step output it comes
 * from, as Triton does (classification of ensemble outputs). Context: the loading thread, the
 * composing models loaded. */
static void adopt_labels(nr_ensemble_t *e)
{
    nr_model_t *m = e->model;
    for (size_t o = 0; o < m->cfg->n_output; o++) {
        if (nr_model_labels(m, (uint32_t)o) != NULL)
            continue;
        for (size_t s = 0; s < e->n_steps; s++) {
            const step_t *st = &e->steps[s];
            for (size_t j = 0; j < st->n_out; j++) {
                if (st->out_tensor[j] != e->output_tensor[o])
                    continue;
                nr_model_t *sm = NULL;
                nr_status_t *err = e->lookup(e->lookup_arg, st->model_name, st->version, &sm);
                int so = err ? -1 : nr_model_output_index(sm, st->out_name[j],
                                                          strlen(st->out_name[j]));
                const nr_labels_t *l = so < 0 ? NULL : nr_model_labels(sm, (uint32_t)so);
                if (l != NULL)
                    nr_labels_adopt(&m->labels, (uint32_t)o, l);
                nr_status_free(err);
                nr_model_release(sm);
            }
        }
    }
}

static nr_status_t *decouple_labels(const nr_model_config_t *ens, const bool *dec,
                                    uint32_t *in_label, uint32_t *out_label, uint32_t *result,
                                    bool *any);

/* Each step's decoupled flag (its model's, as loaded now) and labels. Context: the loading
 * thread, the composing models loaded. */
static nr_status_t *plan_labels(nr_ensemble_t *e)
{
    size_t n = e->n_steps + 1;
    bool *dec = nr_calloc(n, sizeof(bool));
    uint32_t *in = nr_calloc(n, sizeof(uint32_t)), *out = nr_calloc(n, sizeof(uint32_t));
    for (size_t s = 0; s < e->n_steps; s++) {
        nr_model_t *sm = NULL;
        nr_status_t *err = e->lookup(e->lookup_arg, e->steps[s].model_name, e->steps[s].version,
                                     &sm);
        dec[s] = err == NULL && sm->cfg->decoupled;
        nr_status_free(err);
        nr_model_release(sm);
    }
    nr_status_t *st = decouple_labels(e->model->cfg, dec, in, out, &e->out_label, &e->decoupled);
    for (size_t s = 0; s < e->n_steps; s++) {
        e->steps[s].decoupled = dec[s];
        e->steps[s].label_in = in[s];
        e->steps[s].label_out = out[s];
    }
    free(dec);
    free(in);
    free(out);
    return st;
}

void nr_ensemble_destroy(nr_ensemble_t *e)
{
    if (e == NULL)
        return;
    for (size_t s = 0; s < e->n_steps; s++) {
        free(e->steps[s].in_name);
        free(e->steps[s].in_tensor);
        free(e->steps[s].out_name);
        free(e->steps[s].out_tensor);
    }
    free(e->steps);
    free(e->tensor);
    nr_strmap_free(&e->tensor_index);
    free(e->readers_at);
    free(e->readers);
    free(e->input_tensor);
    free(e->output_tensor);
    free(e);
}

nr_status_t *nr_ensemble_create(nr_model_t *m, nr_model_lookup_fn lookup, void *lookup_arg,
                                nr_ensemble_t **out)
{
    const nr_model_config_t *cfg = m->cfg;
    const nr_cfg_ensemble_t *es = &cfg->ensemble_scheduling;
    nr_ensemble_t *e = nr_calloc(1, sizeof(*e));
    e->model = m;
    e->lookup = lookup;
    e->lookup_arg = lookup_arg;
    e->input_tensor = nr_calloc(cfg->n_input + 1, sizeof(uint32_t));
    for (size_t i = 0; i < cfg->n_input; i++)
        e->input_tensor[i] = tensor_of(e, cfg->input[i].name);
    e->output_tensor = nr_calloc(cfg->n_output + 1, sizeof(uint32_t));
    for (size_t i = 0; i < cfg->n_output; i++)
        e->output_tensor[i] = tensor_of(e, cfg->output[i].name);
    e->n_steps = es->n_step;
    e->steps = nr_calloc(e->n_steps + 1, sizeof(step_t));
    for (size_t s = 0; s < e->n_steps; s++)
        plan_step(e, &e->steps[s], &es->step[s]);
    plan_readers(e);
    adopt_labels(e);
    nr_status_t *st = plan_labels(e);
    if (st != NULL) {
        nr_ensemble_destroy(e);
        return st;
    }
    *out = e;
    return NULL;
}

uint64_t nr_ensemble_inflight(const nr_ensemble_t *e)
{
    return atomic_load(&e->inflight);
}

/* ---- decoupled labels ---- */

/* Triton's decoupled labels (its ensemble validation): the ensemble's inputs carry label 0; a
 * step's outputs carry the label of its inputs, or a label of their own when the step's model
 * is decoupled (each of its responses starts the steps after it anew). A step whose inputs
 * carry different labels, or ensemble outputs that do, cannot be run and are refused in
 * Triton's words. in_label / out_label get each step's (UINT32_MAX: never reached);
 * *result gets the outputs'; *any whether a step is decoupled. Context: the loading thread. */
static nr_status_t *decouple_labels(const nr_model_config_t *ens, const bool *dec,
                                    uint32_t *in_label, uint32_t *out_label, uint32_t *result,
                                    bool *any)
{
    const nr_cfg_ensemble_t *es = &ens->ensemble_scheduling;
    size_t cap = ens->n_input + ens->n_output + 1;
    for (size_t i = 0; i < es->n_step; i++)
        cap += es->step[i].n_output_map;
    const char **name = nr_calloc(cap, sizeof(char *));
    uint32_t *label = nr_calloc(cap, sizeof(uint32_t));
    size_t n = 0;
    nr_status_t *st = NULL;
#define LABEL_OF(nm, out) do { *(out) = UINT32_MAX;                                        \
        for (size_t q_ = 0; q_ < n; q_++) if (!strcmp(name[q_], (nm))) *(out) = label[q_]; } while (0)
    for (size_t i = 0; i < ens->n_input; i++) {
        name[n] = ens->input[i].name;
        label[n++] = 0;
    }
    uint32_t next = 1;
    *any = false;
    for (size_t s = 0; s < es->n_step; s++)
        in_label[s] = out_label[s] = UINT32_MAX;
    for (bool grew = true; grew && st == NULL;) { /* steps in any order: until none resolves */
        grew = false;
        for (size_t s = 0; s < es->n_step && st == NULL; s++) {
            const nr_cfg_ensemble_step_t *cs = &es->step[s];
            if (in_label[s] != UINT32_MAX)
                continue;
            uint32_t l = 0;
            bool ready = true, mixed = false;
            for (size_t k = 0; k < cs->n_input_map && ready; k++) {
                uint32_t x;
                LABEL_OF(cs->input_map[k].value, &x);
                ready = x != UINT32_MAX;
                mixed |= ready && k > 0 && x != l;
                l = ready ? x : l;
            }
            if (!ready)
                continue;
            if (mixed) {
                st = nr_status_new(NR_INVALID_ARG, "in ensemble %s, step of model '%s' receives "
                                   "inputs originated from different decoupled models",
                                   ens->name, cs->model_name);
                break;
            }
            in_label[s] = l;
            out_label[s] = dec[s] ? next++ : l;
            *any |= dec[s];
            for (size_t k = 0; k < cs->n_output_map; k++) {
                name[n] = cs->output_map[k].value;
                label[n++] = out_label[s];
            }
            grew = true;
        }
    }
    *result = 0;
    for (size_t i = 0, seen = 0; st == NULL && i < ens->n_output; i++) {
        uint32_t x;
        LABEL_OF(ens->output[i].name, &x);
        if (x == UINT32_MAX)
            continue;
        if (seen++ > 0 && x != *result)
            st = nr_status_new(NR_INVALID_ARG, "in ensemble %s, step of model '%s' receives "
                               "inputs originated from different decoupled models",
                               ens->name, ens->name);
        *result = x;
    }
#undef LABEL_OF
    free(name);
    free(label);
    return st;
}

/* ---- Triton's checks against the composing models (ValidateEnsembleConfig) ---- */

/* What the ensemble knows of one tensor: the first model that used it. */
typedef struct {
    const char *name;
    nr_dtype_t dtype;
    int64_t dims[NR_MAX_DIMS + 1]; /* full: -1 in front when that side batches */
    size_t ndim;
    const char *owner;
} use_t;

typedef struct {
    use_t *u;
    size_t n;
    const char *ens;
} uses_t;

static use_t *use_find(uses_t *us, const char *name)
{
    for (size_t i = 0; i < us->n; i++)
        if (strcmp(us->u[i].name, name) == 0)
            return &us->u[i];
    return NULL;
}

static use_t make_use(const char *name, nr_dtype_t dt, const nr_cfg_dims_t *d, bool batching,
                      const char *owner)
{
    use_t u = {.name = name, .dtype = dt, .owner = owner};
    if (batching)
        u.dims[u.ndim++] = -1;
    for (size_t i = 0; i < d->n && u.ndim < NR_MAX_DIMS + 1; i++)
        u.dims[u.ndim++] = d->v[i];
    return u;
}

static bool dims_match(const use_t *a, const use_t *b)
{
    if (a->ndim != b->ndim)
        return false;
    for (size_t i = 0; i < a->ndim; i++)
        if (a->dims[i] != -1 && b->dims[i] != -1 && a->dims[i] != b->dims[i])
            return false;
    return true;
}

static void put_dims(nr_buf_t *b, const use_t *u)
{
    nr_buf_putc(b, '[');
    for (size_t i = 0; i < u->ndim; i++) {
        if (i)
            nr_buf_putc(b, ',');
        nr_buf_i64(b, u->dims[i]);
    }
    nr_buf_putc(b, ']');
}

/* A use of an ensemble tensor: the first is recorded, the next ones must agree with it. */
static nr_status_t *use(uses_t *us, use_t u)
{
    use_t *prev = use_find(us, u.name);
    if (prev == NULL) {
        us->u = nr_grow(us->u, us->n, sizeof(use_t));
        us->u[us->n++] = u;
        return NULL;
    }
    if (prev->dtype != u.dtype)
        return nr_status_new(NR_INVALID_ARG,
                             "in ensemble %s, ensemble tensor %s: inconsistent data type: %s is "
                             "inferred from model %s while %s is inferred from model %s",
                             us->ens, u.name, nr_dtype_enum_name(prev->dtype), prev->owner,
                             nr_dtype_enum_name(u.dtype), u.owner);
    if (dims_match(prev, &u))
        return NULL;
    nr_buf_t a, b;
    nr_buf_init(&a);
    nr_buf_init(&b);
    put_dims(&a, prev);
    put_dims(&b, &u);
    nr_status_t *st = nr_status_new(NR_INVALID_ARG,
                                    "in ensemble %s, ensemble tensor %s: inconsistent shape: %s "
                                    "is inferred from model %s while %s is inferred from model %s",
                                    us->ens, u.name, a.data, prev->owner, b.data, u.owner);
    nr_buf_free(&a);
    nr_buf_free(&b);
    return st;
}

static const nr_cfg_kv_t *map_find(const nr_cfg_kv_t *kv, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(kv[i].key, key) == 0)
            return &kv[i];
    return NULL;
}

/* One step against its composing model's config. */
static nr_status_t *check_step(uses_t *us, const nr_model_config_t *ens,
                               const nr_cfg_ensemble_step_t *cs, const nr_model_config_t *mc)
{
    const char *en = us->ens, *mn = mc->name;
    if (mc->max_batch_size != 0 && mc->max_batch_size < ens->max_batch_size)
        return nr_status_new(NR_INVALID_ARG,
                             "ensemble %s allows maximum batch size %d, but it contains model %s "
                             "which only allows maximum batch size to be %d",
                             en, ens->max_batch_size, cs->model_name, mc->max_batch_size);
    bool batching = mc->max_batch_size > 0;
    for (size_t k = 0; k < cs->n_input_map; k++) {
        bool known = false;
        for (size_t i = 0; i < mc->n_input && !known; i++)
            known = strcmp(mc->input[i].name, cs->input_map[k].key) == 0;
        if (!known)
            return nr_status_new(NR_INVALID_ARG,
                                 "in ensemble %s, ensemble tensor %s is mapping to non-existing "
                                 "input %s in model %s",
                                 en, cs->input_map[k].value, cs->input_map[k].key, mn);
    }
    for (size_t i = 0; i < mc->n_input; i++) {
        const nr_cfg_input_t *in = &mc->input[i];
        const nr_cfg_kv_t *kv = map_find(cs->input_map, cs->n_input_map, in->name);
        if (kv == NULL) {
            if (in->optional)
                continue;
            return nr_status_new(NR_INVALID_ARG,
                                 "in ensemble %s, input %s in model %s is not mapped to any "
                                 "ensemble tensors",
                                 en, in->name, mn);
        }
        nr_status_t *st = use(us, make_use(kv->value, in->data_type, &in->dims, batching, mn));
        if (st != NULL)
            return st;
    }
    for (size_t k = 0; k < cs->n_output_map; k++) {
        const nr_cfg_output_t *out = NULL;
        for (size_t i = 0; i < mc->n_output && out == NULL; i++)
            if (strcmp(mc->output[i].name, cs->output_map[k].key) == 0)
                out = &mc->output[i];
        if (out == NULL)
            return nr_status_new(NR_INVALID_ARG,
                                 "in ensemble %s, ensemble tensor %s is mapped from non-existing "
                                 "output %s in model %s",
                                 en, cs->output_map[k].value, cs->output_map[k].key,
                                 cs->model_name);
        nr_status_t *st =
            use(us, make_use(cs->output_map[k].value, out->data_type, &out->dims, batching, mn));
        if (st != NULL)
            return st;
    }
    return NULL;
}

nr_status_t *nr_ensemble_validate(const nr_model_config_t *ens,
                                  const nr_model_config_t *const *step_cfg, bool *decoupled)
{
    uses_t us = {.ens = ens->name};
    bool batching = ens->max_batch_size > 0;
    nr_status_t *st = NULL;
    for (size_t i = 0; st == NULL && i < ens->n_input; i++) {
        const nr_cfg_input_t *in = &ens->input[i];
        st = use(&us, make_use(in->name, in->data_type, in->has_reshape ? &in->reshape : &in->dims,
                               batching, ens->name));
    }
    for (size_t i = 0; st == NULL && i < ens->n_output; i++) {
        const nr_cfg_output_t *out = &ens->output[i];
        st = use(&us, make_use(out->name, out->data_type,
                               out->has_reshape ? &out->reshape : &out->dims, batching,
                               ens->name));
    }
    const nr_cfg_ensemble_t *es = &ens->ensemble_scheduling;
    for (size_t s = 0; st == NULL && s < es->n_step; s++)
        st = check_step(&us, ens, &es->step[s], step_cfg[s]);
    free(us.u);
    *decoupled = false;
    if (st == NULL) {
        size_t n = es->n_step + 1;
        bool *dec = nr_calloc(n, sizeof(bool));
        uint32_t *in = nr_calloc(n, sizeof(uint32_t)), *out = nr_calloc(n, sizeof(uint32_t));
        uint32_t result;
        for (size_t s = 0; s < es->n_step; s++)
            dec[s] = step_cfg[s]->decoupled;
        st = decouple_labels(ens, dec, in, out, &result, decoupled);
        free(dec);
        free(in);
        free(out);
    }
    return st;
}

/* ---- a run ---- */

/* The tensors of one iteration (Triton's word): the run's root holds the ensemble's inputs and
 * what the steps before any decoupled step make; each response of a decoupled step starts a
 * context of its own, with that response's outputs, for the steps that read them (their
 * label). Each step runs at most once per context. */
typedef struct ctx_s ctx_t;
typedef struct run_s run_t;

typedef struct { /* one step's request in one context: its done_arg */
    run_t *r;
    ctx_t *c;
    uint32_t s;
} launch_t;

struct ctx_s {
    ctx_t *next;           /* the run's contexts after the root */
    uint32_t label;
    nr_tensor_t *t;        /* [n_tensors]: data set once produced; hold: taken */
    bool *have;            /* [n_tensors]: produced (or an absent optional input) */
    bool *batched;         /* [n_tensors]: its producer batches (dims[0] is a batch) */
    uint32_t *missing;     /* [n_steps]: distinct sources not produced yet; NOT_RUN: not here */
    launch_t *launch;      /* [n_steps] */
    bool answered;         /* its response has gone (decoupled ensembles) */
};

struct run_s {
    nr_hold_t hold;        /* first member: the ensemble's outputs keep the run */
    nr_ensemble_t *e;
    nr_req_t *req;         /* the ensemble request, until its done */
    pthread_mutex_t mu;
    pthread_mutex_t out_mu; /* one response to the frontend at a time (decoupled) */
    size_t n_tensors, n_steps;
    ctx_t root;
    bool *need;            /* [n_steps]: the requested outputs depend on it (Triton's pruning) */
    nr_model_t **models;   /* [n_steps]: the versions steps ran on (references), or NULL */
    size_t running;        /* step requests started and not ended, in every context */
    bool ended;
    bool final_sent;       /* a response carried the final flag (decoupled) */
    nr_status_t *status;   /* the first failure */
    uint64_t in_ns, infer_ns, out_ns; /* the steps' compute times, summed (statistics) */
};

#define NOT_RUN UINT32_MAX /* a step whose outputs the request does not need here */

static void ctx_init(run_t *r, ctx_t *c, uint32_t label)
{
    const nr_ensemble_t *e = r->e;
    c->label = label;
    /* one block: t, launch, missing, have, batched (the request path's allocations count) */
    size_t nt = e->n_tensors + 1, ns = e->n_steps + 1;
    char *p = nr_calloc(1, nt * sizeof(nr_tensor_t) + ns * sizeof(launch_t) +
                               ns * sizeof(uint32_t) + 2 * nt);
    c->t = (nr_tensor_t *)p;
    c->launch = (launch_t *)(p + nt * sizeof(nr_tensor_t));
    c->missing = (uint32_t *)(c->launch + ns);
    c->have = (bool *)(c->missing + ns);
    c->batched = c->have + nt;
    for (size_t s = 0; s < e->n_steps; s++) {
        c->missing[s] = r->need[s] && e->steps[s].label_in == label ? e->steps[s].n_sources
                                                                     : NOT_RUN;
        c->launch[s] = (launch_t){.r = r, .c = c, .s = (uint32_t)s};
    }
}

static void ctx_free(const run_t *r, ctx_t *c)
{
    for (size_t t = 0; t < r->n_tensors; t++)
        nr_hold_unref(c->t[t].hold);
    free(c->t); /* the block */
}

static void run_release(nr_hold_t *h)
{
    run_t *r = (run_t *)h;
    ctx_free(r, &r->root);
    for (ctx_t *c = r->root.next, *next; c != NULL; c = next) {
        next = c->next;
        ctx_free(r, c);
        free(c);
    }
    for (size_t s = 0; s < r->n_steps; s++) /* after the holds: outputs come from them */
        nr_model_release(r->models[s]);
    nr_status_free(r->status);
    pthread_mutex_destroy(&r->mu);
    pthread_mutex_destroy(&r->out_mu);
    free(r->need);
    free(r->models);
    free(r);
}

/* Marks tensor t of context c produced; the steps it completes there are appended to ready[]
 * (and counted as running) unless the run failed. Context: r->mu held, or the run not started
 * yet. */
static void produce(run_t *r, ctx_t *c, uint32_t t, uint32_t *ready, size_t *n_ready)
{
    const nr_ensemble_t *e = r->e;
    if (c->have[t])
        return;
    c->have[t] = true;
    for (uint32_t k = e->readers_at[t]; k < e->readers_at[t + 1]; k++) {
        uint32_t s = e->readers[k];
        if (c->missing[s] != NOT_RUN && --c->missing[s] == 0 && r->status == NULL) {
            ready[(*n_ready)++] = s;
            r->running++;
        }
    }
}

/* Whether context c now holds every requested output and is to answer (a decoupled
 * ensemble's iteration; marked so). Context: r->mu held. */
static bool ctx_answers(run_t *r, ctx_t *c)
{
    const nr_ensemble_t *e = r->e;
    if (!e->decoupled || c->answered || c->label != e->out_label || r->status != NULL)
        return false;
    for (size_t k = 0; k < r->req->n_want; k++)
        if (!c->have[e->output_tensor[r->req->want[k]]])
            return false;
    return c->answered = true;
}

/* Triton's pruning: only the steps the requested outputs depend on run. Context: before the
 * run starts. */
static void prune(run_t *r)
{
    const nr_ensemble_t *e = r->e;
    bool *want = nr_calloc(e->n_tensors + 1, sizeof(bool));
    bool *need = r->need;
    for (size_t k = 0; k < r->req->n_want; k++)
        want[e->output_tensor[r->req->want[k]]] = true;
    for (bool grew = true; grew;) { /* a fixed point: the graph is a DAG of a few steps */
        grew = false;
        for (size_t s = 0; s < e->n_steps; s++) {
            const step_t *st = &e->steps[s];
            for (size_t j = 0; !need[s] && j < st->n_out; j++)
                need[s] = want[st->out_tensor[j]];
            if (!need[s])
                continue;
            for (size_t k = 0; k < st->n_in; k++)
                if (!want[st->in_tensor[k]])
                    grew = want[st->in_tensor[k]] = true;
        }
    }
    free(want);
}

static void finish(run_t *r);
static void step_done(nr_req_t *sq, void *arg);
static void step_response(nr_req_t *sq, const nr_status_t *err, unsigned flags, void *arg);

/* The run's first failure is kept; a later one is freed. Takes st. Context: r->mu held. */
static void keep_failure(run_t *r, nr_status_t *st)
{
    if (r->status == NULL)
        r->status = st;
    else
        nr_status_free(st);
}

/* A step has ended: whether it was the last one running, and the caller is the one to
 * finish the run. Context: r->mu held. */
static bool step_ended(run_t *r)
{
    r->running--;
    bool end = r->running == 0 && !r->ended;
    r->ended |= end;
    return end;
}

/* One step ended without producing anything (it failed, or could not start). Takes st. */
static void step_failed(run_t *r, nr_status_t *st)
{
    pthread_mutex_lock(&r->mu);
    keep_failure(r, st);
    bool end = step_ended(r);
    pthread_mutex_unlock(&r->mu);
    if (end)
        finish(r);
}

static bool shape_is(const int64_t *dims, size_t ndim, const nr_cfg_dims_t *cfg)
{
    if (ndim != cfg->n)
        return false;
    for (size_t i = 0; i < ndim; i++)
        if (cfg->v[i] != -1 && cfg->v[i] != dims[i])
            return false;
    return true;
}

/* Triton's ReshapeTensorDims: a tensor from a side that does not batch goes to a batching
 * consumer as a batch of one when its shape is the consumer's own; one from a batching side
 * with a batch of one goes to a consumer that does not batch without the batch dimension
 * when that makes it the consumer's shape. dims gets the shape to send. */
static size_t reshape(const nr_tensor_t *t, bool from_batching, bool to_batching,
                      const nr_cfg_dims_t *cfg_dims, int64_t *dims)
{
    size_t n = t->ndim;
    memcpy(dims, t->dims, n * sizeof(int64_t));
    if (to_batching && !from_batching && n < NR_MAX_DIMS && shape_is(t->dims, n, cfg_dims)) {
        memmove(dims + 1, dims, n * sizeof(int64_t));
        dims[0] = 1;
        return n + 1;
    }
    if (!to_batching && from_batching && n > 0 && t->dims[0] == 1 &&
        !shape_is(t->dims, n, cfg_dims)) {
        memmove(dims, dims + 1, (n - 1) * sizeof(int64_t));
        return n - 1;
    }
    return n;
}

/* Builds and submits step s's request over the tensors it reads in context c. Context: no
 * lock held. */
static void launch(run_t *r, ctx_t *c, uint32_t s)
{
    const step_t *st = &r->e->steps[s];
    if (r->req->cancelled != NULL && atomic_load(r->req->cancelled)) { /* the client has gone */
        step_failed(r, nr_req_error(r->req, NR_CANCELLED, "Request was cancelled"));
        return;
    }
    nr_model_t *m = NULL;
    nr_status_t *err = r->e->lookup(r->e->lookup_arg, st->model_name, st->version, &m);
    if (err != NULL) {
        step_failed(r, err);
        return;
    }
    pthread_mutex_lock(&r->mu); /* a decoupled run's steps run once per iteration, all on
                                   the version the first one took (the run's reference keeps
                                   it, read by run_release only, after every step ended) */
    if (r->models[s] == NULL) {
        r->models[s] = m;
        m = NULL;
    }
    nr_model_t *run_on = r->models[s];
    pthread_mutex_unlock(&r->mu);
    nr_req_t *sq = nr_req_new(run_on);
    const nr_req_t *req = r->req;
    bool batching = run_on->cfg->max_batch_size > 0;
    if (req->trace != NULL) /* a step of a traced request: a child trace */
        sq->trace = nr_trace_child(req->trace);
    if (req->id != NULL && req->id[0])
        err = nr_req_set_id(sq, req->id, strlen(req->id));
    for (size_t k = 0; err == NULL && k < st->n_in; k++) {
        uint32_t ti = st->in_tensor[k];
        const nr_tensor_t *t = &c->t[ti];
        if (t->data == NULL && t->size == 0 && t->ndim == 0)
            continue; /* an optional ensemble input the request left out */
        int ci = nr_model_input_index(run_on, st->in_name[k], strlen(st->in_name[k]));
        int64_t dims[NR_MAX_DIMS + 1];
        size_t nd = ci < 0 ? t->ndim : reshape(t, c->batched[ti], batching,
                                               &run_on->cfg->input[ci].dims, dims);
        err = nr_req_add_input(sq, st->in_name[k], strlen(st->in_name[k]), t->dtype,
                               ci < 0 ? t->dims : dims, nd, t->data, t->size);
    }
    for (size_t k = 0; err == NULL && k < st->n_out; k++) /* each step: all it maps */
        err = nr_req_add_output(sq, st->out_name[k], strlen(st->out_name[k]));
    if (err == NULL) {
        sq->priority = req->priority;
        sq->timeout_us = req->timeout_us;
        sq->inline_max_ns = req->inline_max_ns;
        sq->cancelled = req->cancelled;
        sq->done = step_done;
        sq->done_arg = &c->launch[s];
        if (run_on->cfg->decoupled) /* each response is an iteration of the steps after it */
            sq->on_response = step_response;
        err = nr_model_submit(run_on, sq); /* sq may be done and gone once this returns */
    }
    if (err != NULL)
        nr_req_free(sq);
    nr_model_release(m); /* a second lookup's reference: not used */
    if (err != NULL)
        step_failed(r, err);
}

/* The steps a completion makes ready: on the stack for an ensemble of up to READY_LOCAL
 * steps (each step's completion needs one such list, outside the run's lock). */
#define READY_LOCAL 16

static uint32_t *ready_list(size_t n_steps, uint32_t *local)
{
    return n_steps <= READY_LOCAL ? local : nr_calloc(n_steps + 1, sizeof(uint32_t));
}

static void launch_all(run_t *r, ctx_t *c, const uint32_t *ready, size_t n)
{
    for (size_t i = 0; i < n; i++)
        launch(r, c, ready[i]);
}

/* The requested outputs of context c, in the ensemble request's outputs (each a reference on
 * the run). */
static void fill_outputs(run_t *r, ctx_t *c, nr_req_t *req)
{
    nr_ensemble_t *e = r->e;
    const nr_model_config_t *cfg = e->model->cfg;
    bool batching = cfg->max_batch_size > 0;
    for (size_t k = 0; k < req->n_want; k++) {
        uint32_t o = req->want[k], ti = e->output_tensor[o];
        nr_tensor_t *out = &req->outputs[k];
        *out = c->t[ti];
        out->ndim = reshape(&c->t[ti], c->batched[ti], batching, &cfg->output[o].dims,
                            out->dims);
        out->name = cfg->output[o].name;
        out->hold = &r->hold;
        nr_hold_ref(&r->hold);
    }
}

/* A decoupled ensemble's response: context c's outputs (the last one carries `flags`). */
static void answer(run_t *r, ctx_t *c, unsigned flags)
{
    pthread_mutex_lock(&r->out_mu);
    fill_outputs(r, c, r->req);
    r->final_sent |= (flags & NR_RESPONSE_FINAL) != 0;
    nr_req_respond(r->req, NULL, flags);
    pthread_mutex_unlock(&r->out_mu);
}

/* Step outputs become tensors of context c, their holds taken over (the step's request, freed
 * or its response released next, lets go of nothing); the steps they complete are listed in
 * ready[]. Context: r->mu held. */
static void take_outputs(run_t *r, ctx_t *c, const step_t *st, nr_req_t *sq, uint32_t *ready,
                         size_t *n_ready)
{
    bool batching = sq->model->cfg->max_batch_size > 0;
    for (size_t j = 0; j < st->n_out; j++) {
        for (size_t k = 0; k < sq->n_want; k++) {
            nr_tensor_t *o = &sq->outputs[k];
            if (o->name == NULL || strcmp(o->name, st->out_name[j]) != 0)
                continue;
            uint32_t ti = st->out_tensor[j];
            c->t[ti] = *o;
            c->t[ti].name = r->e->tensor[ti];
            c->batched[ti] = batching;
            o->hold = NULL; /* the run keeps it */
            produce(r, c, ti, ready, n_ready);
            break;
        }
    }
}

/* One response of a decoupled step: a new context with its outputs, and the steps they make
 * ready there; an error fails the run (no step starts after it). */
static void step_response(nr_req_t *sq, const nr_status_t *err, unsigned flags, void *arg)
{
    launch_t *L = arg;
    run_t *r = L->r;
    const step_t *st = &r->e->steps[L->s];
    if (err == NULL && (flags & NR_RESPONSE_NONE))
        return; /* its end alone: its done follows */
    uint32_t local[READY_LOCAL];
    uint32_t *ready = ready_list(r->n_steps, local);
    size_t n_ready = 0;
    ctx_t *c = NULL;
    bool answers = false;
    pthread_mutex_lock(&r->mu);
    if (err != NULL) {
        keep_failure(r, nr_status_new(err->code, "%s", err->msg));
    } else if (r->status == NULL) {
        c = nr_calloc(1, sizeof(*c));
        ctx_init(r, c, st->label_out);
        c->next = r->root.next;
        r->root.next = c;
        take_outputs(r, c, st, sq, ready, &n_ready);
        answers = ctx_answers(r, c);
    }
    pthread_mutex_unlock(&r->mu);
    if (answers) /* the decoupled step runs until its done: never the last, and the run */
        answer(r, c, 0); /* cannot finish meanwhile */
    if (c != NULL)
        launch_all(r, c, ready, n_ready);
    if (ready != local)
        free(ready);
}

/* A step's request is done: its outputs become tensors of its context (a decoupled step's
 * came with its responses), the steps they complete start; a decoupled ensemble answers with
 * the context they complete, final when nothing else runs. */
static void step_done(nr_req_t *sq, void *arg)
{
    launch_t *L = arg;
    run_t *r = L->r;
    ctx_t *c = L->c;
    const step_t *st = &r->e->steps[L->s];
    uint32_t local[READY_LOCAL];
    uint32_t *ready = ready_list(r->n_steps, local);
    size_t n_ready = 0;
    bool answers = false;
    pthread_mutex_lock(&r->mu);
    if (sq->status != NULL) {
        keep_failure(r, sq->status); /* the step's own status and text */
        sq->status = NULL;
    } else {
        r->in_ns += sq->t_input_end_ns - sq->t_exec_ns;
        r->infer_ns += sq->t_infer_end_ns - sq->t_input_end_ns;
        r->out_ns += sq->t_end_ns - sq->t_infer_end_ns;
        if (sq->on_response == NULL) {
            take_outputs(r, c, st, sq, ready, &n_ready);
            answers = ctx_answers(r, c);
        }
    }
    /* a step that answers still runs while it does, so the run cannot finish meanwhile; when
     * it is the only one running, nothing can start any more and its answer is the last */
    bool last = answers && r->running == 1;
    bool end = answers ? false : step_ended(r);
    pthread_mutex_unlock(&r->mu);
    nr_req_free(sq);
    if (answers) {
        answer(r, c, last ? NR_RESPONSE_FINAL : 0);
        pthread_mutex_lock(&r->mu);
        end = step_ended(r);
        pthread_mutex_unlock(&r->mu);
    }
    launch_all(r, c, ready, n_ready);
    if (ready != local)
        free(ready);
    if (end)
        finish(r);
}

/* The ensemble's own statistics of a request that succeeded: as Triton counts them, one
 * execution whose compute times are the sums of its steps'. */
static void record_success(run_t *r, nr_model_t *m, const nr_req_t *req)
{
    nr_stats_t *s = &m->stats;
    uint64_t bs = req->batch_size > 0 ? req->batch_size : 1;
    pthread_mutex_lock(&s->group);
    nr_stat_add(&s->success, req->t_end_ns - req->t_start_ns);
    nr_stat_add(&s->queue, req->t_exec_ns - req->t_queue_ns);
    nr_stat_add(&s->compute_input, r->in_ns);
    nr_stat_add(&s->compute_infer, r->infer_ns);
    nr_stat_add(&s->compute_output, r->out_ns);
    atomic_fetch_add_explicit(&s->inference_count, bs, memory_order_relaxed);
    atomic_fetch_add_explicit(&s->execution_count, 1, memory_order_relaxed);
    if (bs < s->n_batch) {
        nr_stat_batch_t *b = &s->batch[bs];
        nr_stat_add(&b->compute_input, r->in_ns);
        nr_stat_add(&b->compute_infer, r->infer_ns);
        nr_stat_add(&b->compute_output, r->out_ns);
    }
    pthread_mutex_unlock(&s->group);
    atomic_store_explicit(&s->last_inference_ms, nr_wall_ms(), memory_order_relaxed);
}

/* Every step that started has ended: the ensemble request is answered, its error (Triton's
 * "in ensemble '<name>', " in front of the failing step's own text, its code kept) or its
 * requested outputs, which point into the steps' outputs the run keeps. A decoupled ensemble
 * has answered with each iteration already: it ends with the final flag alone when no
 * response carried it (Triton's, also when no iteration answered). */
static void finish(run_t *r)
{
    nr_req_t *req = r->req;
    nr_ensemble_t *e = r->e;
    nr_model_t *m = e->model;
    bool missed = req->cache_key != NULL; /* a cached ensemble's miss (the insert takes it) */
    req->t_end_ns = nr_now_ns();
    for (size_t k = 0; !e->decoupled && r->status == NULL && k < req->n_want; k++)
        if (!r->root.have[e->output_tensor[req->want[k]]])
            r->status = nr_req_error(req, NR_INVALID_ARG,
                                     "unexpected deadlock, at least one output is not set while "
                                     "no more ensemble steps can be made");
    if (r->status != NULL) {
        req->status = nr_status_new(r->status->code, "in ensemble '%s', %s", m->name,
                                    r->status->msg);
        nr_stat_fail(&m->stats, r->status->code == NR_CANCELLED ? NR_FAIL_CANCELED : NR_FAIL_OTHER,
                     req->t_end_ns - req->t_start_ns);
    } else {
        if (e->decoupled && !r->final_sent) {
            pthread_mutex_lock(&r->out_mu);
            nr_req_respond(req, NULL, NR_RESPONSE_FINAL | NR_RESPONSE_NONE);
            pthread_mutex_unlock(&r->out_mu);
        } else if (!e->decoupled) {
            fill_outputs(r, &r->root, req);
        }
        record_success(r, m, req);
        if (missed && !e->decoupled) /* its answer is kept */
            req->cache_ns += nr_cache_insert(req);
        /* as seen by an ensemble this one is a step of: its compute times are its steps'
         * sums (Triton adds a nested ensemble's into the outer one's) */
        req->t_infer_end_ns = req->t_end_ns - r->out_ns;
        req->t_input_end_ns = req->t_infer_end_ns - r->infer_ns;
        req->t_exec_ns = req->t_input_end_ns - r->in_ns;
    }
    if (missed) /* its lookup (and insert): a miss, as a model's */
        nr_stat_add(&m->stats.cache_miss, req->cache_ns);
    r->req = NULL;
    atomic_fetch_sub(&e->inflight, 1);
    nr_req_done(req);
    nr_hold_unref(&r->hold); /* the run's own reference */
}

void nr_ensemble_submit(nr_ensemble_t *e, nr_req_t *req)
{
    run_t *r = nr_calloc(1, sizeof(*r));
    atomic_init(&r->hold.refs, 1);
    r->hold.release = run_release;
    r->e = e;
    r->req = req;
    pthread_mutex_init(&r->mu, NULL);
    pthread_mutex_init(&r->out_mu, NULL);
    r->n_tensors = e->n_tensors;
    r->n_steps = e->n_steps;
    r->need = nr_calloc(e->n_steps + 1, sizeof(bool));
    r->models = nr_calloc(e->n_steps + 1, sizeof(nr_model_t *));
    prune(r);
    ctx_t *c = &r->root;
    ctx_init(r, c, 0);
    uint32_t local[READY_LOCAL];
    uint32_t *ready = ready_list(e->n_steps, local);
    size_t n_ready = 0;
    for (size_t s = 0; s < e->n_steps; s++)
        if (c->missing[s] == 0)
            ready[n_ready++] = (uint32_t)s, r->running++;
    atomic_fetch_add(&e->inflight, 1);
    req->t_queue_ns = nr_now_ns();
    const nr_model_config_t *cfg = e->model->cfg;
    for (size_t i = 0; i < cfg->n_input; i++) {
        nr_tensor_t *t = &c->t[e->input_tensor[i]];
        if (req->present[i]) {
            *t = req->inputs[i];
            t->hold = NULL; /* the frontend keeps the bytes until done */
        }
        c->batched[e->input_tensor[i]] = cfg->max_batch_size > 0;
        produce(r, c, e->input_tensor[i], ready, &n_ready);
    }
    req->t_exec_ns = nr_now_ns();
    /* not shared with another thread before the first launch */
    bool answers = ctx_answers(r, c); /* outputs that are inputs: answered at once */
    if (answers)
        answer(r, c, n_ready == 0 ? NR_RESPONSE_FINAL : 0);
    if (n_ready == 0) {
        r->ended = true;
        finish(r);
    } else {
        launch_all(r, c, ready, n_ready);
    }
    if (ready != local)
        free(ready);
}
