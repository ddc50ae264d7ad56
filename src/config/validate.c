/* validate.c - Triton's config normalization, instance-group fill and checks.
 *
 * nr_cfg_normalize = NormalizeModelConfig, nr_cfg_fill_instance_groups =
 * NormalizeInstanceGroup, nr_cfg_validate = ValidateModelConfig +
 * ValidateInstanceGroup + ValidateModelIOConfig + warmup sample checks, with
 * Triton's error wording (tests pin it). I/O, sequence and ensemble checks
 * live in validate_io.c and validate_sched.c.
 * Pure functions of the config; called on the loader thread.
 */
#include "model_config.h"

#include "../common/alloc.h"
#include "cfg_int.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SEQUENCE_IDLE_DEFAULT_US 1000000

static const char *str(const char *s)
{
    return s ? s : "";
}

static void add_preferred(int32_t **arr, size_t *n, int32_t v)
{
    *arr = nr_realloc(*arr, sizeof(int32_t));
    (*arr)[0] = v;
    *n = 1;
}

void nr_cfg_normalize(nr_model_config_t *cfg)
{
    if (!cfg->has_version_policy) {
        cfg->has_version_policy = true;
        cfg->version_policy.has_choice = true;
        cfg->version_policy.kind = NR_POLICY_LATEST;
        cfg->version_policy.latest_num_versions = 1;
    }
    if (cfg->scheduling_choice == NR_SCHED_DYNAMIC) {
        nr_cfg_dynamic_batching_t *db = &cfg->dynamic_batching;
        if (db->n_preferred_batch_size == 0 && cfg->max_batch_size > 0)
            add_preferred(&db->preferred_batch_size, &db->n_preferred_batch_size,
                          cfg->max_batch_size);
    }
    if (cfg->scheduling_choice == NR_SCHED_SEQUENCE) {
        nr_cfg_sequence_batching_t *sb = &cfg->sequence_batching;
        if (sb->max_sequence_idle_microseconds == 0)
            sb->max_sequence_idle_microseconds = SEQUENCE_IDLE_DEFAULT_US;
        if (sb->strategy == 2 && sb->n_oldest_preferred_batch_size == 0 &&
            cfg->max_batch_size > 0)
            add_preferred(&sb->oldest_preferred_batch_size, &sb->n_oldest_preferred_batch_size,
                          cfg->max_batch_size);
    }
    if (cfg->scheduling_choice != NR_SCHED_ENSEMBLE) {
        nr_cfg_optimization_t *o = &cfg->optimization;
        cfg->has_optimization = true;
        if (!o->has_input_pinned_memory) {
            o->has_input_pinned_memory = true;
            o->input_pinned_memory = true;
        }
        if (!o->has_output_pinned_memory) {
            o->has_output_pinned_memory = true;
            o->output_pinned_memory = true;
        }
    }
}

/* Triton's SetDefaultInstanceCount: only the onnxruntime and tensorflow
 * backends get the CPU default (2 in Triton); everything else gets 1. */
static int32_t default_count(const nr_model_config_t *cfg, int kind, int default_cpu_count)
{
    const char *be = str(cfg->backend);
    if (kind == NR_KIND_CPU && (strcmp(be, "onnxruntime") == 0 || strcmp(be, "tensorflow") == 0))
        return default_cpu_count > 0 ? default_cpu_count : 1;
    return 1;
}

void nr_cfg_fill_instance_groups(nr_model_config_t *cfg, int default_cpu_count, int gpu_count)
{
    if (cfg->scheduling_choice == NR_SCHED_ENSEMBLE)
        return;
    if (cfg->n_instance_group == 0) {
        cfg->instance_group = nr_calloc(1, sizeof(nr_cfg_instance_group_t));
        cfg->instance_group[0].name = nr_strdup(str(cfg->name));
        cfg->n_instance_group = 1;
    }
    for (size_t i = 0; i < cfg->n_instance_group; i++) {
        nr_cfg_instance_group_t *g = &cfg->instance_group[i];
        if (g->name == NULL || g->name[0] == '\0') {
            free(g->name);
            g->name = nr_asprintf("%s_%zu", str(cfg->name), i);
        }
        if (g->kind == NR_KIND_AUTO) {
            bool all_present = gpu_count > 0;
            for (size_t k = 0; k < g->n_gpus; k++)
                if (g->gpus[k] < 0 || g->gpus[k] >= gpu_count)
                    all_present = false;
            g->kind = all_present ? NR_KIND_GPU : NR_KIND_CPU;
        }
        if (g->count < 1)
            g->count = default_count(cfg, g->kind, default_cpu_count);
        if (g->kind == NR_KIND_GPU && g->n_gpus == 0 && gpu_count > 0) {
            g->gpus = nr_malloc((size_t)gpu_count * sizeof(int32_t));
            for (int k = 0; k < gpu_count; k++)
                g->gpus[k] = k;
            g->n_gpus = (size_t)gpu_count;
        }
    }
}

/* ---- ValidateModelConfig -------------------------------------------------- */

typedef enum { BT_UNKNOWN, BT_TF, BT_TRT, BT_ORT, BT_PYTORCH } backend_type_t;

static backend_type_t backend_type(const char *be)
{
    static const struct { const char *n; backend_type_t t; } m[] = {
        {"tensorflow", BT_TF}, {"tensorrt", BT_TRT}, {"onnxruntime", BT_ORT}, {"pytorch", BT_PYTORCH}};
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (strcmp(be, m[i].n) == 0)
            return m[i].t;
    return BT_UNKNOWN;
}

static backend_type_t platform_type(const char *pf)
{
    static const struct { const char *n; backend_type_t t; } m[] = {
        {"tensorflow_graphdef", BT_TF}, {"tensorflow_savedmodel", BT_TF},
        {"tensorrt_plan", BT_TRT},      {"onnxruntime_onnx", BT_ORT},
        {"pytorch_libtorch", BT_PYTORCH}};
    for (size_t i = 0; i < sizeof(m) / sizeof(m[0]); i++)
        if (strcmp(pf, m[i].n) == 0)
            return m[i].t;
    return BT_UNKNOWN;
}

static nr_status_t *invalid(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static nr_status_t *invalid(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    nr_status_t *st = nr_status_newv(NR_INVALID_ARG, fmt, ap);
    va_end(ap);
    return st;
}

static nr_status_t *check_identity(const nr_model_config_t *cfg, const char *dir_name)
{
    const char *name = str(cfg->name), *pf = str(cfg->platform), *be = str(cfg->backend);
    if (name[0] == '\0')
        return invalid("model configuration must specify 'name'");
    if (dir_name != NULL && strcmp(dir_name, name) != 0)
        return invalid("unexpected directory name '%s' for model '%s', directory name must "
                       "equal model name", dir_name, name);
    if (be[0] == '\0' && strcmp(pf, "ensemble") != 0)
        return invalid("unexpected platform type '%s' for %s", pf, name);
    if (be[0] != '\0' && strcmp(pf, "ensemble") == 0)
        return invalid("Ensemble model '%s' must have platform type '%s' and empty backend type",
                       name, pf);
    /* Triton's "must specify 'platform' or 'backend'" cannot fire after the two
     * checks above, so it is not repeated here. */
    if (backend_type(be) != BT_UNKNOWN && backend_type(be) != platform_type(pf))
        return invalid("unexpected 'platform' and 'backend' pair, got:%s, %s", pf, be);
    if (cfg->max_batch_size < 0)
        return invalid("'max_batch_size' must be non-negative value for %s", name);
    if (!cfg->has_version_policy)
        return invalid("must specify 'version policy' for %s", name);
    return NULL;
}

static bool delay_with_timeout(const nr_cfg_queue_policy_t *q)
{
    return q->default_timeout_microseconds != 0 && q->timeout_action == NR_TIMEOUT_DELAY;
}

static nr_status_t *check_dynamic_batching(const nr_model_config_t *cfg)
{
    const nr_cfg_dynamic_batching_t *db = &cfg->dynamic_batching;
    const char *name = str(cfg->name);
    for (size_t i = 0; i < db->n_preferred_batch_size; i++) {
        if (db->preferred_batch_size[i] <= 0)
            return invalid("dynamic batching preferred size must be positive for %s", name);
        if (db->preferred_batch_size[i] > cfg->max_batch_size)
            return invalid("dynamic batching preferred size must be <= max batch size for %s",
                           name);
    }
    uint64_t levels = db->priority_levels;
    if (levels != 0) {
        if (db->default_priority_level == 0 || db->default_priority_level > levels)
            return invalid("default priority level must be in range [1, %llu] for %s",
                           (unsigned long long)levels, name);
        for (size_t i = 0; i < db->n_priority_queue_policy; i++) {
            uint64_t k = db->priority_queue_policy[i].key;
            if (k == 0 || k > levels)
                return invalid("priority queue policy must have priority level in range "
                               "[1, %llu] for %s", (unsigned long long)levels, name);
        }
    }
    if (db->preserve_ordering) {
        if (levels > 1)
            return invalid("Only one priority level is allowed when 'preserve_ordering' is "
                           "true for %s", name);
        bool bad = delay_with_timeout(&db->default_queue_policy);
        for (size_t i = 0; i < db->n_priority_queue_policy; i++)
            bad = bad || delay_with_timeout(&db->priority_queue_policy[i].value);
        if (bad)
            return invalid("Queue policy can not have DELAY as timeout action when "
                           "'preserve_ordering' is true for %s", name);
    }
    return NULL;
}

static nr_status_t *check_metrics(const nr_model_config_t *cfg)
{
    for (size_t i = 0; i < cfg->n_metric_control; i++) {
        const nr_cfg_metric_control_t *mc = &cfg->metric_control[i];
        if (!mc->has_metric_identifier)
            return invalid("metric control must specify 'metric_identifier'");
        if (mc->family == NULL || mc->family[0] == '\0')
            return invalid("metric identifier must specify non-empty 'family'");
        if (!mc->has_histogram_options)
            return invalid("metric control must specify 'histogram_options'");
        if (mc->n_buckets == 0)
            return invalid("histogram options must specify non-empty 'buckets'");
    }
    return NULL;
}

static nr_status_t *check_model(const nr_model_config_t *cfg, const char *dir_name)
{
    const char *name = str(cfg->name);
    nr_status_t *st = check_identity(cfg, dir_name);
    if (st == NULL && cfg->scheduling_choice == NR_SCHED_DYNAMIC)
        st = check_dynamic_batching(cfg);
    if (st == NULL && cfg->scheduling_choice == NR_SCHED_SEQUENCE)
        st = nr__cfg_check_sequence(cfg);
    if (st != NULL)
        return st;
    if (cfg->scheduling_choice == NR_SCHED_ENSEMBLE) {
        st = nr__cfg_check_ensemble(cfg);
        if (st != NULL)
            return st;
    } else if (strcmp(str(cfg->platform), "ensemble") == 0) {
        return invalid("ensemble scheduling must be set for ensemble %s whose platform is "
                       "ensemble", name);
    }
    if (cfg->decoupled && cfg->response_cache_enable)
        return invalid("Response Cache does not currently support model %s with 'decoupled' "
                       "transaction policy. Please disable the response cache.", name);
    if (cfg->has_model_metrics)
        return check_metrics(cfg);
    return NULL;
}

/* ---- ValidateInstanceGroup ------------------------------------------------ */

static bool is_int_string(const char *s)
{
    char *end;
    if (s == NULL || *s == '\0')
        return false;
    long v = strtol(s, &end, 10);
    return end != s && v >= 0;
}

static nr_status_t *check_groups(const nr_model_config_t *cfg)
{
    const char *name = str(cfg->name);
    if (cfg->scheduling_choice == NR_SCHED_ENSEMBLE)
        return NULL;
    if (cfg->n_instance_group == 0)
        return invalid("must specify one or more 'instance group's for %s", name);
    for (size_t i = 0; i < cfg->n_instance_group; i++) {
        const nr_cfg_instance_group_t *g = &cfg->instance_group[i];
        const char *gn = str(g->name);
        if (g->kind == NR_KIND_MODEL && g->n_gpus > 0)
            return invalid("instance group %s of model %s has kind KIND_MODEL but specifies one "
                           "or more GPUs", gn, name);
        if (g->kind == NR_KIND_GPU && g->n_gpus == 0)
            return invalid("instance group %s of model %s has kind KIND_GPU but no GPUs are "
                           "available", gn, name);
        if (g->kind == NR_KIND_CPU && g->n_gpus > 0)
            return invalid("instance group %s of model %s has kind KIND_CPU but specifies one or "
                           "more GPUs", gn, name);
        if (g->kind != NR_KIND_MODEL && g->kind != NR_KIND_GPU && g->kind != NR_KIND_CPU)
            return nr_status_new(NR_INTERNAL, "instance group %s of model %s has unexpected "
                                 "kind KIND_AUTO", gn, name);
        /* Triton's text, missing space included. */
        if (strcmp(str(cfg->platform), "tensorrt_plan") != 0 && g->n_profile > 0)
            return invalid("instance group %s of model %s and platform %sspecifies profile "
                           "field which is only supported for TensorRT models",
                           gn, name, str(cfg->platform));
        for (size_t k = 0; k < g->n_profile; k++)
            if (!is_int_string(g->profile[k]))
                return invalid("instance group %s of model %s and platform %s specifies "
                               "invalid profile %s. The field should contain the string "
                               "representation of a non-negative integer.",
                               gn, name, str(cfg->platform), str(g->profile[k]));
        if (g->count < 1)
            return invalid("instance group %s of model %s has count %d; it must be at least 1",
                           gn, name, g->count);
    }
    return NULL;
}

/* ---- warmup --------------------------------------------------------------- */

static nr_status_t *check_warmup(const nr_model_config_t *cfg)
{
    for (size_t i = 0; i < cfg->n_model_warmup; i++) {
        const nr_cfg_warmup_t *w = &cfg->model_warmup[i];
        if (w->batch_size == 0)
            continue; /* Triton skips such samples */
        for (size_t k = 0; k < w->n_inputs; k++) {
            const nr_cfg_warmup_input_t *in = &w->inputs[k];
            for (size_t d = 0; d < in->dims.n; d++)
                if (in->dims.v[d] < 0)
                    return invalid("warmup setting expects all variable-size dimensions are "
                                   "specified for input '%s'", str(in->key));
            if (in->data == NR_WARMUP_NONE)
                return invalid("warmup setting expects input '%s' to have input_data_type set",
                               str(in->key));
        }
    }
    return NULL;
}

nr_status_t *nr_cfg_validate(const nr_model_config_t *cfg, const char *dir_name)
{
    nr_status_t *st = check_model(cfg, dir_name);
    if (st == NULL)
        st = check_groups(cfg);
    if (st == NULL)
        st = nr__cfg_check_io(cfg);
    if (st == NULL)
        st = check_warmup(cfg);
    return st;
}
