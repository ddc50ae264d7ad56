/* model_config.h - the typed, immutable Triton ModelConfig (model_config.proto).
 *
 * config/ builds it from config.pbtxt (nr_cfg_parse), fills defaults, validates
 * and renders it as Triton's JSON, protobuf binary or config.pbtxt. After load
 * it never changes: a reload builds a new one. Every string is owned by the
 * config; nr_cfg_free releases it all.
 * Field names follow the proto's snake_case names; repeated fields are (ptr, n).
 */
#ifndef NR_MODEL_CONFIG_H
#define NR_MODEL_CONFIG_H

#include "../common/buf.h"
#include "../common/dtype.h"
#include "../common/status.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct { char *key; char *value; } nr_cfg_kv_t; /* map<string,string> entry */

typedef struct { int64_t *v; size_t n; } nr_cfg_dims_t;

typedef enum { NR_FORMAT_NONE = 0, NR_FORMAT_NHWC = 1, NR_FORMAT_NCHW = 2 } nr_format_t;

typedef struct {
    char *name;
    nr_dtype_t data_type;
    int format; /* nr_format_t */
    nr_cfg_dims_t dims;
    bool has_reshape;
    nr_cfg_dims_t reshape;
    bool is_shape_tensor;
    bool allow_ragged_batch;
    bool optional;
    bool is_non_linear_format_io;
} nr_cfg_input_t;

typedef struct {
    char *name;
    nr_dtype_t data_type;
    nr_cfg_dims_t dims;
    bool has_reshape;
    nr_cfg_dims_t reshape;
    char *label_filename;
    bool is_shape_tensor;
    bool is_non_linear_format_io;
} nr_cfg_output_t;

typedef struct {
    int kind; /* BatchInput.Kind */
    char **target_name; size_t n_target_name;
    nr_dtype_t data_type;
    char **source_input; size_t n_source_input;
} nr_cfg_batch_input_t;

typedef struct {
    char **target_name; size_t n_target_name;
    int kind;
    char **source_input; size_t n_source_input;
} nr_cfg_batch_output_t;

typedef enum { NR_POLICY_LATEST = 0, NR_POLICY_ALL = 1, NR_POLICY_SPECIFIC = 2 } nr_version_policy_kind_t;

typedef struct {
    nr_version_policy_kind_t kind;
    bool has_choice; /* a policy_choice member (latest/all/specific) was given */
    uint32_t latest_num_versions;
    int64_t *specific_versions; size_t n_specific_versions;
} nr_cfg_version_policy_t;

typedef enum { NR_TIMEOUT_REJECT = 0, NR_TIMEOUT_DELAY = 1 } nr_timeout_action_t;

typedef struct {
    int timeout_action;
    uint64_t default_timeout_microseconds;
    bool allow_timeout_override;
    uint32_t max_queue_size;
} nr_cfg_queue_policy_t;

typedef struct { uint64_t key; nr_cfg_queue_policy_t value; } nr_cfg_priority_policy_t;

typedef struct {
    int32_t *preferred_batch_size; size_t n_preferred_batch_size;
    uint64_t max_queue_delay_microseconds;
    bool preserve_ordering;
    uint64_t priority_levels;
    uint64_t default_priority_level;
    bool has_default_queue_policy;
    nr_cfg_queue_policy_t default_queue_policy;
    nr_cfg_priority_policy_t *priority_queue_policy; size_t n_priority_queue_policy;
} nr_cfg_dynamic_batching_t;

/* Sequence batching and ensembles are parsed, validated and rendered so that
 * Triton repositories load; nereid does not schedule them yet. */
typedef struct {
    int kind;
    int32_t int32_false_true[2]; size_t n_int32_false_true;
    float fp32_false_true[2]; size_t n_fp32_false_true;
    bool bool_false_true[2]; size_t n_bool_false_true;
    nr_dtype_t data_type;
} nr_cfg_seq_control_t;

typedef struct {
    char *name;
    nr_cfg_seq_control_t *control; size_t n_control;
} nr_cfg_seq_control_input_t;

typedef struct {
    nr_dtype_t data_type;
    nr_cfg_dims_t dims;
    bool zero_data;
    char *data_file;
    char *name;
    int data_choice; /* state_data oneof: 0 none, 1 zero_data, 2 data_file */
} nr_cfg_seq_initial_state_t;

typedef struct {
    char *input_name;
    char *output_name;
    nr_dtype_t data_type;
    nr_cfg_dims_t dims;
    nr_cfg_seq_initial_state_t *initial_state; size_t n_initial_state;
    bool use_same_buffer_for_input_output;
    bool use_growable_memory;
} nr_cfg_seq_state_t;

typedef struct {
    int strategy; /* 0 none given (direct default), 1 direct, 2 oldest */
    uint64_t direct_max_queue_delay_microseconds;
    float direct_minimum_slot_utilization;
    int32_t oldest_max_candidate_sequences;
    int32_t *oldest_preferred_batch_size; size_t n_oldest_preferred_batch_size;
    uint64_t oldest_max_queue_delay_microseconds;
    bool oldest_preserve_ordering;
    uint64_t max_sequence_idle_microseconds;
    nr_cfg_seq_control_input_t *control_input; size_t n_control_input;
    nr_cfg_seq_state_t *state; size_t n_state;
    bool iterative_sequence;
} nr_cfg_sequence_batching_t;

typedef struct {
    char *model_name;
    int64_t model_version;
    nr_cfg_kv_t *input_map; size_t n_input_map;
    nr_cfg_kv_t *output_map; size_t n_output_map;
    char *model_namespace; /* reserved by Triton; parsed and echoed only */
} nr_cfg_ensemble_step_t;

typedef struct {
    nr_cfg_ensemble_step_t *step; size_t n_step;
    uint32_t max_inflight_requests;
} nr_cfg_ensemble_t;

typedef enum { NR_KIND_AUTO = 0, NR_KIND_GPU = 1, NR_KIND_CPU = 2, NR_KIND_MODEL = 3 } nr_instance_kind_t;

typedef struct { char *name; bool global; uint32_t count; } nr_cfg_rl_resource_t;

typedef struct { int kind; int64_t device_id; } nr_cfg_secondary_device_t;

typedef struct {
    char *name;
    int kind; /* nr_instance_kind_t */
    int32_t count;
    bool has_rate_limiter;
    nr_cfg_rl_resource_t *rl_resources; size_t n_rl_resources;
    uint32_t rl_priority;
    int32_t *gpus; size_t n_gpus;
    nr_cfg_secondary_device_t *secondary_devices; size_t n_secondary_devices;
    char **profile; size_t n_profile;
    bool passive;
    char *host_policy;
} nr_cfg_instance_group_t;

typedef struct {
    char *name;
    nr_cfg_kv_t *parameters; size_t n_parameters;
} nr_cfg_accelerator_t;

typedef struct {
    int32_t batch_size;
    /* input: map<string, Shape{dim}> */
    char **input_names; nr_cfg_dims_t *input_dims; size_t n_input;
    bool has_lower_bound;
    int32_t lower_batch_size;
    char **lower_input_names; nr_cfg_dims_t *lower_input_dims; size_t n_lower_input;
} nr_cfg_graph_spec_t;

typedef struct {
    bool has_graph;
    int32_t graph_level;
    int priority;
    bool has_cuda;
    bool cuda_graphs, cuda_busy_wait_events, cuda_output_copy_stream;
    nr_cfg_graph_spec_t *cuda_graph_spec; size_t n_cuda_graph_spec;
    bool has_execution_accelerators;
    nr_cfg_accelerator_t *gpu_execution_accelerator; size_t n_gpu_execution_accelerator;
    nr_cfg_accelerator_t *cpu_execution_accelerator; size_t n_cpu_execution_accelerator;
    bool has_input_pinned_memory, input_pinned_memory;
    bool has_output_pinned_memory, output_pinned_memory;
    uint32_t gather_kernel_buffer_threshold;
    bool eager_batching;
} nr_cfg_optimization_t;

typedef enum { NR_WARMUP_NONE = 0, NR_WARMUP_ZERO = 1, NR_WARMUP_RANDOM = 2, NR_WARMUP_FILE = 3 } nr_warmup_data_t;

typedef struct {
    char *key; /* input name */
    nr_dtype_t data_type;
    nr_cfg_dims_t dims;
    int data; /* nr_warmup_data_t: which oneof member was present */
    bool data_flag; /* the bool written for zero_data / random_data (JSON echoes it) */
    char *input_data_file;
} nr_cfg_warmup_input_t;

typedef struct {
    char *name;
    uint32_t batch_size;
    nr_cfg_warmup_input_t *inputs; size_t n_inputs;
    uint32_t count;
} nr_cfg_warmup_t;

typedef struct {
    char *name;
    nr_cfg_kv_t *parameters; size_t n_parameters;
} nr_cfg_repo_agent_t;

typedef struct {
    char *family;
    double *buckets; size_t n_buckets;
    bool has_histogram_options;
    bool has_metric_identifier;
} nr_cfg_metric_control_t;

typedef enum { NR_SCHED_DEFAULT = 0, NR_SCHED_DYNAMIC = 1, NR_SCHED_SEQUENCE = 2, NR_SCHED_ENSEMBLE = 3 } nr_sched_choice_t;

typedef struct nr_model_config_s {
    char *name;
    char *platform;
    char *backend;
    char *runtime;
    bool has_version_policy;
    nr_cfg_version_policy_t version_policy;
    int32_t max_batch_size;
    nr_cfg_input_t *input; size_t n_input;
    nr_cfg_output_t *output; size_t n_output;
    nr_cfg_batch_input_t *batch_input; size_t n_batch_input;
    nr_cfg_batch_output_t *batch_output; size_t n_batch_output;
    bool has_optimization;
    nr_cfg_optimization_t optimization;
    int scheduling_choice; /* nr_sched_choice_t: which oneof member is set */
    nr_cfg_dynamic_batching_t dynamic_batching;
    nr_cfg_sequence_batching_t sequence_batching;
    nr_cfg_ensemble_t ensemble_scheduling;
    nr_cfg_instance_group_t *instance_group; size_t n_instance_group;
    char *default_model_filename;
    nr_cfg_kv_t *cc_model_filenames; size_t n_cc_model_filenames;
    nr_cfg_kv_t *metric_tags; size_t n_metric_tags;
    nr_cfg_kv_t *parameters; size_t n_parameters; /* ModelParameter.string_value */
    nr_cfg_warmup_t *model_warmup; size_t n_model_warmup;
    char **op_library_filename; size_t n_op_library_filename; bool has_model_operations;
    bool has_model_transaction_policy;
    bool decoupled;
    bool has_model_repository_agents;
    nr_cfg_repo_agent_t *agents; size_t n_agents;
    bool has_response_cache;
    bool response_cache_enable;
    bool has_model_metrics;
    nr_cfg_metric_control_t *metric_control; size_t n_metric_control;
} nr_model_config_t;

/* Parses config.pbtxt text. `path` is used in error messages only:
 * "<path>:<line>:<col>: <field>: <problem>". On error *out is NULL. */
NR_MUST_CHECK nr_status_t *nr_cfg_parse(const char *text, size_t len, const char *path,
                                        nr_model_config_t **out);
NR_MUST_CHECK nr_status_t *nr_cfg_parse_file(const char *path, nr_model_config_t **out);
/* Parses a ModelConfig written in protobuf's JSON mapping, as Triton reads the
 * "config" parameter of a model-load request (JsonStringToMessage; enum names
 * in any case, unknown fields rejected): proto or lowerCamelCase field names,
 * 64-bit values as numbers or strings, {} for a present empty message. The
 * result is what nr_cfg_parse gives for the same config in config.pbtxt, and
 * what nr_cfg_to_json prints parses back to an equal config. Errors are
 * INVALID_ARG "<JSON path>: <problem>" (`input[0].dims[1]: expected an
 * integer, got "x"`; "invalid JSON: <reader message>" when it is no JSON),
 * for the caller to prefix; on error *out is NULL. */
NR_MUST_CHECK nr_status_t *nr_cfg_parse_json(const char *text, size_t len,
                                             nr_model_config_t **out);
nr_model_config_t *nr_cfg_new(void); /* an all-default config (proto3 zero values) */
void nr_cfg_free(nr_model_config_t *cfg);

/* Triton's normalization (version_policy default, preferred_batch_size, pinned
 * memory, sequence idle default). Idempotent. */
void nr_cfg_normalize(nr_model_config_t *cfg);
/* Fills instance_group defaults as Triton does (NormalizeInstanceGroup): no
 * group -> one named <model>; unnamed group i -> "<model>_<i>"; KIND_AUTO ->
 * KIND_GPU when gpu_count > 0 and every listed gpu exists, else KIND_CPU;
 * count < 1 -> default_cpu_count for KIND_CPU on the onnxruntime/tensorflow
 * backends, else 1; KIND_GPU without gpus -> all gpu_count GPUs. Ensembles
 * are left alone. Idempotent. */
void nr_cfg_fill_instance_groups(nr_model_config_t *cfg, int default_cpu_count, int gpu_count);
/* Triton's ValidateModelConfig, ValidateInstanceGroup and ValidateModelIOConfig
 * rules, plus warmup sample checks. Call it where Triton does: after the
 * server autofill (name, backend, platform), nr_cfg_normalize and
 * nr_cfg_fill_instance_groups (it checks the filled groups). `dir_name` is the
 * model's directory name (NULL skips that check). Errors are INVALID_ARG
 * (INTERNAL for a group left at KIND_AUTO), in Triton's wording. */
NR_MUST_CHECK nr_status_t *nr_cfg_validate(const nr_model_config_t *cfg, const char *dir_name);

/* Renders Triton's protobuf JSON for GET .../config (malloc'd, NUL-terminated). */
char *nr_cfg_to_json(const nr_model_config_t *cfg, size_t *len);
/* Renders the config as config.pbtxt, in protobuf's text format as its
 * TextFormat printer writes it (fields in number order, two-space indents,
 * one line per repeated value, zero scalars and absent messages left out),
 * for nr_cfg_parse and Triton to read back as the same config. Returns
 * malloc'd, NUL-terminated text, *len bytes ("" for an all-default config);
 * never NULL. */
char *nr_cfg_to_pbtxt(const nr_model_config_t *cfg, size_t *len);
/* Serializes the config as an inference.ModelConfig protobuf message, in the
 * binary wire format (the body of ModelConfigResponse's field 1). Returns
 * malloc'd bytes, *len of them (0 for an all-default config); never NULL. */
char *nr_cfg_to_pb(const nr_model_config_t *cfg, size_t *len);

#endif
