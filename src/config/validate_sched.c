/* validate_sched.c - Triton's checks for sequence_batching (controls, oldest,
 * direct) and ensemble_scheduling (steps, maps, data flow from ensemble inputs
 * to outputs), worded as Triton words them; O(n log n) in the number of
 * entries. nereid parses and validates these schedulers so Triton
 * repositories load; it does not run them yet.
 */
#include "cfg_int.h"

#include "../common/alloc.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

static const char *str(const char *s)
{
    return s ? s : "";
}

/* ---- sequence batching ---------------------------------------------------- */

static const char *const control_names[] = {"CONTROL_SEQUENCE_START", "CONTROL_SEQUENCE_READY",
                                            "CONTROL_SEQUENCE_END", "CONTROL_SEQUENCE_CORRID"};

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(const char *const *)a, *(const char *const *)b);
}

/* Every control input needs a name, used once (sorted: O(n log n)). */
static nr_status_t *check_control_names(const nr_model_config_t *cfg)
{
    const nr_cfg_sequence_batching_t *sb = &cfg->sequence_batching;
    const char *m = str(cfg->name);
    size_t n = sb->n_control_input;
    const char **names = nr_malloc((n ? n : 1) * sizeof(char *));
    nr_status_t *st = NULL;
    for (size_t i = 0; i < n; i++) {
        names[i] = str(sb->control_input[i].name);
        if (st == NULL && names[i][0] == '\0')
            st = nr_status_new(NR_INVALID_ARG, "sequence batching control tensor must have a "
                               "name for %s", m);
    }
    qsort(names, n, sizeof(char *), cmp_str);
    for (size_t i = 1; st == NULL && i < n; i++)
        if (strcmp(names[i - 1], names[i]) == 0)
            st = nr_status_new(NR_INVALID_ARG, "sequence batching control tensor '%s' is "
                               "specified for multiple control kinds for %s", names[i], m);
    free(names);
    return st;
}

/* Rules shared by all controls of one kind; `typed` is CORRID's variant
 * (data_type given, no false/true values). *dtype gets the CORRID type. */
static nr_status_t *check_control(const nr_model_config_t *cfg, int kind, bool typed,
                                  bool *seen, nr_dtype_t *dtype)
{
    const nr_cfg_sequence_batching_t *sb = &cfg->sequence_batching;
    const char *m = str(cfg->name), *kn = control_names[kind];
    *seen = false;
    for (size_t i = 0; i < sb->n_control_input; i++) {
        const nr_cfg_seq_control_input_t *ci = &sb->control_input[i];
        for (size_t k = 0; k < ci->n_control; k++) {
            const nr_cfg_seq_control_t *c = &ci->control[k];
            if (c->kind != kind)
                continue;
            if (*seen)
                return nr_status_new(NR_INVALID_ARG, "sequence batching specifies multiple %s "
                                     "tensors for %s", kn, m);
            *seen = true;
            *dtype = c->data_type;
            int given = (c->n_int32_false_true > 0) + (c->n_fp32_false_true > 0) +
                        (c->n_bool_false_true > 0);
            if (typed && given > 0)
                return nr_status_new(NR_INVALID_ARG, "sequence batching must not specify either "
                                     "'int32_false_true', 'fp32_false_true' or 'bool_false_true' "
                                     "for %s for %s", kn, m);
            if (typed)
                continue;
            if (given == 0)
                return nr_status_new(NR_INVALID_ARG, "sequence batching must specify either "
                                     "'int32_false_true', 'fp32_false_true' or 'bool_false_true' "
                                     "for %s for %s", kn, m);
            if (given > 1)
                return nr_status_new(NR_INVALID_ARG, "sequence batching specifies more than one "
                                     "from 'int32_false_true', 'fp32_false_true' and "
                                     "'bool_false_true' for %s for %s", kn, m);
            const char *which = c->n_int32_false_true ? "int32_false_true"
                                : c->n_fp32_false_true ? "fp32_false_true"
                                                       : "bool_false_true";
            size_t n = c->n_int32_false_true + c->n_fp32_false_true + c->n_bool_false_true;
            if (n != 2)
                return nr_status_new(NR_INVALID_ARG, "sequence batching control '%s' must have "
                                     "exactly 2 entries for %s for %s", which, kn, m);
        }
    }
    return NULL;
}

nr_status_t *nr__cfg_check_sequence(const nr_model_config_t *cfg)
{
    const nr_cfg_sequence_batching_t *sb = &cfg->sequence_batching;
    const char *m = str(cfg->name);
    if (cfg->response_cache_enable)
        return nr_status_new(NR_INVALID_ARG, "Response Cache does not currently support model %s "
                             "with sequence batching scheduler. Please disable the response "
                             "cache.", m);
    static const int bool_kinds[] = {0, 2, 1}; /* START, END, READY: Triton's order */
    bool seen;
    nr_dtype_t dt = NR_TYPE_INVALID;
    nr_status_t *st = check_control_names(cfg);
    for (int i = 0; st == NULL && i < 3; i++)
        st = check_control(cfg, bool_kinds[i], false, &seen, &dt);
    if (st == NULL)
        st = check_control(cfg, 3, true, &seen, &dt);
    if (st != NULL)
        return st;
    if (seen && dt != NR_TYPE_UINT64 && dt != NR_TYPE_INT64 && dt != NR_TYPE_UINT32 &&
        dt != NR_TYPE_INT32 && dt != NR_TYPE_STRING)
        return nr_status_new(NR_INVALID_ARG, "unexpected data type for control "
                             "CONTROL_SEQUENCE_CORRID for %s. Allowed data types are "
                             "TYPE_UINT64, TYPE_INT64, TYPE_UINT32, TYPE_INT32 and TYPE_STRING",
                             m);
    for (size_t i = 0; sb->strategy == 2 && i < sb->n_oldest_preferred_batch_size; i++) {
        if (sb->oldest_preferred_batch_size[i] <= 0)
            return nr_status_new(NR_INVALID_ARG, "sequence batching preferred batch size must "
                                 "be positive for %s", m);
        if (sb->oldest_preferred_batch_size[i] > cfg->max_batch_size)
            return nr_status_new(NR_INVALID_ARG, "sequence batching preferred batch size must "
                                 "be <= max batch size for %s", m);
    }
    float u = sb->direct_minimum_slot_utilization;
    if (sb->strategy == 1 && (u < 0.0f || u > 1.0f))
        return nr_status_new(NR_INVALID_ARG, "sequence batching minimum slot utilization must "
                             "be in range (0.0, 1.0] for %s", m);
    return NULL;
}

/* ---- ensemble ------------------------------------------------------------- */

#define NONE ((size_t)-1)

/* Triton's data-flow graph, stored step-wise so that it stays O(E log E) in
 * the number of map entries: tensors are indexed by sorted name, a step's
 * outputs become ready once all of its distinct inputs are. */
typedef struct {
    const char **names; /* sorted, unique */
    size_t n;
    size_t *producer;            /* per tensor: step that outputs it, or NONE */
    bool *ready;
    size_t *in_at, *in;          /* per step: input tensors, map order (CSR) */
    size_t *out_at, *out;        /* per step: output tensors */
    size_t *cons_at, *cons;      /* per tensor: consuming steps (CSR) */
    size_t *missing;             /* per step: distinct inputs not ready yet */
} flow_t;

static size_t tensor_index(const flow_t *f, const char *name)
{
    const char *key = str(name);
    const char **hit = bsearch(&key, f->names, f->n, sizeof(char *), cmp_str);
    return hit ? (size_t)(hit - f->names) : NONE;
}

static void flow_free(flow_t *f)
{
    free(f->names);
    free(f->producer);
    free(f->ready);
    free(f->in_at);
    free(f->in);
    free(f->out_at);
    free(f->out);
    free(f->cons_at);
    free(f->cons);
    free(f->missing);
}

/* Collects the tensor names of every map value, sorted and unique. */
static void collect_names(const nr_cfg_ensemble_t *e, flow_t *f, size_t *n_in, size_t *n_out)
{
    *n_in = *n_out = 0;
    for (size_t s = 0; s < e->n_step; s++) {
        *n_in += e->step[s].n_input_map;
        *n_out += e->step[s].n_output_map;
    }
    f->names = nr_malloc((*n_in + *n_out + 1) * sizeof(char *));
    size_t k = 0;
    for (size_t s = 0; s < e->n_step; s++) {
        for (size_t i = 0; i < e->step[s].n_input_map; i++)
            f->names[k++] = str(e->step[s].input_map[i].value);
        for (size_t i = 0; i < e->step[s].n_output_map; i++)
            f->names[k++] = str(e->step[s].output_map[i].value);
    }
    qsort(f->names, k, sizeof(char *), cmp_str);
    f->n = 0;
    for (size_t i = 0; i < k; i++)
        if (f->n == 0 || strcmp(f->names[f->n - 1], f->names[i]) != 0)
            f->names[f->n++] = f->names[i];
}

/* Per step in order, as Triton's BuildEnsembleGraph: required fields, then
 * each ensemble tensor produced by one step only. Records inputs/outputs. */
static nr_status_t *build_steps(const nr_model_config_t *cfg, flow_t *f)
{
    const nr_cfg_ensemble_t *e = &cfg->ensemble_scheduling;
    const char *m = str(cfg->name);
    size_t n_in, n_out, ki = 0, ko = 0;
    collect_names(e, f, &n_in, &n_out);
    f->producer = nr_malloc((f->n + 1) * sizeof(size_t));
    for (size_t t = 0; t < f->n; t++)
        f->producer[t] = NONE;
    f->in_at = nr_malloc((e->n_step + 1) * sizeof(size_t));
    f->out_at = nr_malloc((e->n_step + 1) * sizeof(size_t));
    f->in = nr_malloc((n_in + 1) * sizeof(size_t));
    f->out = nr_malloc((n_out + 1) * sizeof(size_t));
    for (size_t s = 0; s < e->n_step; s++) {
        const nr_cfg_ensemble_step_t *step = &e->step[s];
        const char *missing = !step->model_name || !step->model_name[0] ? "model_name"
                              : step->n_input_map == 0                  ? "input_map"
                              : step->n_output_map == 0                 ? "output_map"
                                                                        : NULL;
        if (missing != NULL)
            return nr_status_new(NR_INVALID_ARG, "must specify '%s' in step %zu of ensemble '%s'",
                                 missing, s, m);
        f->in_at[s] = ki;
        f->out_at[s] = ko;
        for (size_t k = 0; k < step->n_output_map; k++) {
            size_t t = tensor_index(f, step->output_map[k].value);
            if (f->producer[t] != NONE)
                return nr_status_new(NR_INVALID_ARG, "ensemble tensor '%s' can appear in an "
                                     "output map only once for ensemble '%s' step %zu",
                                     f->names[t], m, s);
            f->producer[t] = s;
            f->out[ko++] = t;
        }
        for (size_t k = 0; k < step->n_input_map; k++)
            f->in[ki++] = tensor_index(f, step->input_map[k].value);
    }
    f->in_at[e->n_step] = ki;
    f->out_at[e->n_step] = ko;
    return NULL;
}

static int cmp_size(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return (x > y) - (x < y);
}

/* missing[] (distinct inputs per step) and the consumer lists per tensor. */
static void build_consumers(flow_t *f, size_t n_step)
{
    size_t n_in = f->in_at[n_step];
    size_t *uniq = nr_malloc((n_in + 1) * sizeof(size_t));
    size_t *uniq_at = nr_malloc((n_step + 1) * sizeof(size_t));
    size_t u = 0;
    f->missing = nr_calloc(n_step + 1, sizeof(size_t));
    f->cons_at = nr_calloc(f->n + 1, sizeof(size_t));
    for (size_t s = 0; s < n_step; s++) {
        size_t a = f->in_at[s], b = f->in_at[s + 1];
        uniq_at[s] = u;
        memcpy(uniq + u, f->in + a, (b - a) * sizeof(size_t));
        qsort(uniq + u, b - a, sizeof(size_t), cmp_size);
        size_t w = u;
        for (size_t i = u; i < u + (b - a); i++)
            if (i == u || uniq[i] != uniq[w - 1])
                uniq[w++] = uniq[i];
        f->missing[s] = w - u;
        for (size_t i = u; i < w; i++)
            f->cons_at[uniq[i] + 1]++;
        u = w;
    }
    uniq_at[n_step] = u;
    for (size_t t = 0; t < f->n; t++)
        f->cons_at[t + 1] += f->cons_at[t];
    f->cons = nr_malloc((u + 1) * sizeof(size_t));
    size_t *fill = nr_malloc((f->n + 1) * sizeof(size_t));
    memcpy(fill, f->cons_at, (f->n + 1) * sizeof(size_t));
    for (size_t s = 0; s < n_step; s++)
        for (size_t i = uniq_at[s]; i < uniq_at[s + 1]; i++)
            f->cons[fill[uniq[i]]++] = s;
    free(fill);
    free(uniq);
    free(uniq_at);
}

/* Marks ensemble inputs ready and propagates through the steps. */
static nr_status_t *propagate(const nr_model_config_t *cfg, flow_t *f)
{
    size_t *queue = nr_malloc((f->n + 1) * sizeof(size_t)), head = 0, tail = 0;
    f->ready = nr_calloc(f->n + 1, sizeof(bool));
    for (size_t i = 0; i < cfg->n_input; i++) {
        size_t t = tensor_index(f, cfg->input[i].name);
        if (t == NONE) {
            free(queue);
            return nr_status_new(NR_INVALID_ARG, "ensemble input '%s' for ensemble %s' is not "
                                 "used", str(cfg->input[i].name), str(cfg->name));
        }
        if (!f->ready[t]) {
            f->ready[t] = true;
            queue[tail++] = t;
        }
    }
    while (head < tail) {
        size_t t = queue[head++];
        for (size_t c = f->cons_at[t]; c < f->cons_at[t + 1]; c++) {
            size_t s = f->cons[c];
            if (--f->missing[s] != 0)
                continue;
            for (size_t o = f->out_at[s]; o < f->out_at[s + 1]; o++) {
                if (!f->ready[f->out[o]]) {
                    f->ready[f->out[o]] = true;
                    queue[tail++] = f->out[o];
                }
            }
        }
    }
    free(queue);
    return NULL;
}

/* The first not-ready tensor upstream of t (Triton's walk), or t itself. */
static size_t not_ready_source(const flow_t *f, size_t t)
{
    bool *seen = nr_calloc(f->n + 1, sizeof(bool));
    size_t last = t, cur = t;
    while (f->producer[cur] != NONE) {
        size_t s = f->producer[cur], next = NONE;
        for (size_t k = f->in_at[s]; k < f->in_at[s + 1] && next == NONE; k++)
            if (!f->ready[f->in[k]] && !seen[f->in[k]])
                next = f->in[k];
        if (next == NONE)
            break;
        seen[next] = true;
        last = cur = next;
    }
    free(seen);
    return last;
}

static nr_status_t *check_outputs(const nr_model_config_t *cfg, const flow_t *f)
{
    const char *m = str(cfg->name);
    bool *is_out = nr_calloc(f->n + 1, sizeof(bool));
    nr_status_t *st = NULL;
    for (size_t i = 0; st == NULL && i < cfg->n_output; i++) {
        const char *on = str(cfg->output[i].name);
        size_t t = tensor_index(f, on);
        if (t == NONE) {
            st = nr_status_new(NR_INVALID_ARG, "ensemble output '%s' for ensemble %s' is not used",
                               on, m);
        } else if (!f->ready[t]) {
            size_t src = not_ready_source(f, t);
            if (src != t)
                st = nr_status_new(NR_INVALID_ARG, "output '%s' for ensemble '%s' is not written: "
                                   "at least one of its depending tensors, '%s', is not "
                                   "connected", on, m, f->names[src]);
            else
                st = nr_status_new(NR_INVALID_ARG, "output '%s' for ensemble '%s' is not written",
                                   on, m);
        } else {
            is_out[t] = true;
        }
    }
    for (size_t t = 0; st == NULL && t < f->n; t++)
        if (!is_out[t] && (!f->ready[t] || f->cons_at[t] == f->cons_at[t + 1]))
            st = nr_status_new(NR_INVALID_ARG, "ensemble tensor '%s' is unused in ensemble '%s'",
                               f->names[t], m);
    free(is_out);
    return st;
}

nr_status_t *nr__cfg_check_ensemble(const nr_model_config_t *cfg)
{
    const char *m = str(cfg->name);
    if (strcmp(str(cfg->platform), "ensemble") != 0)
        return nr_status_new(NR_INVALID_ARG, "ensemble scheduling cannot be set for model '%s' "
                             "whose platform is not ensemble", m);
    if (cfg->n_instance_group != 0)
        return nr_status_new(NR_INVALID_ARG, "instance group should not be specified for "
                             "ensemble '%s'", m);
    if (cfg->has_optimization)
        return nr_status_new(NR_INVALID_ARG, "optimization should not be specified for "
                             "ensemble '%s'", m);
    if (cfg->n_model_warmup != 0)
        return nr_status_new(NR_INVALID_ARG, "model_warmup can not be specified for ensemble "
                             "'%s'", m);
    if (cfg->ensemble_scheduling.n_step == 0)
        return nr_status_new(NR_INVALID_ARG, "must specify 'step' for ensemble '%s'", m);
    flow_t f = {0};
    nr_status_t *st = build_steps(cfg, &f);
    if (st == NULL) {
        build_consumers(&f, cfg->ensemble_scheduling.n_step);
        st = propagate(cfg, &f);
    }
    if (st == NULL)
        st = check_outputs(cfg, &f);
    flow_free(&f);
    return st;
}
