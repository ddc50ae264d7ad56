/* cfg_fields.c - the ModelConfig schema (model_config.proto) as tables.
 *
 * Each message is a table of fields in proto declaration order, which is the
 * order Triton's JSON prints them in, each with its proto field number
 * (model_config.proto's; config_pb.c writes fields in number order, and
 * tests/unit/test_config_pb.c checks every number is set and unique per
 * message). Sub-messages that the C struct flattens into its parent use a
 * sub-table whose offsets are relative to the parent.
 * Also the generic walkers over the tables: free, emptiness, presence.
 * Immutable data only; safe from any thread.
 */
#include "cfg_int.h"

#include <stdlib.h>
#include <string.h>

_Static_assert(sizeof(nr_dtype_t) == sizeof(int), "enums are stored as int");
_Static_assert(sizeof(nr_version_policy_kind_t) == sizeof(int), "enums are stored as int");

#define N(a) (sizeof(a) / sizeof((a)[0]))
#define ENUM_T(var, nm, vals) static const nr__cfg_enum_t var = {nm, vals, N(vals)}
#define MSG_T(var, nm, T, fields) \
    const nr__cfg_msg_t var = {nm, sizeof(T), fields, N(fields)}

/* Field constructors: the field's name and proto field number come first (as
 * in the .proto, "name = num"); ONE/REP then take the C struct T and member
 * names. Numbers are model_config.proto's; an NR__FL_ALIAS field has 0. */
#define ONE(nm, no, ty, T, m) \
    {.name = nm, .num = no, .type = ty, .off = offsetof(T, m), .off_aux = NR__CFG_NONE}
#define ONE_FL(nm, no, ty, T, m, fl) \
    {.name = nm, .num = no, .type = ty, .flags = fl, .off = offsetof(T, m), \
     .off_aux = NR__CFG_NONE}
#define ENUM(nm, no, T, m, e) \
    {.name = nm, .num = no, .type = NR__F_ENUM, .off = offsetof(T, m), .off_aux = NR__CFG_NONE, \
     .en = &e}
#define REP(nm, no, ty, T, m, mn) \
    {.name = nm, .num = no, .type = ty, .rep = NR__R_PTR, .off = offsetof(T, m), \
     .off_n = offsetof(T, mn), .off_aux = NR__CFG_NONE}
#define FIX2(nm, no, ty, T, m, mn) \
    {.name = nm, .num = no, .type = ty, .rep = NR__R_FIX2, .off = offsetof(T, m), \
     .off_n = offsetof(T, mn), .off_aux = NR__CFG_NONE}
#define DIMS_FL(nm, no, T, m, fl) \
    {.name = nm, .num = no, .type = NR__F_INT64, .rep = NR__R_PTR, .flags = fl, \
     .off = offsetof(T, m.v), .off_n = offsetof(T, m.n), .off_aux = NR__CFG_NONE}
#define DIMS(nm, no, T, m) DIMS_FL(nm, no, T, m, 0)
/* Message stored at member m, presence in bool member has. */
#define MSG(nm, no, T, m, has, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .off = offsetof(T, m), .off_aux = offsetof(T, has), \
     .sub = &s}
/* Message always present when its parent is (map values). */
#define MSG_ALWAYS(nm, no, T, m, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .off = offsetof(T, m), .off_aux = NR__CFG_NONE, \
     .sub = &s}
/* Message flattened into T (sub-table offsets are T-relative), presence in has. */
#define FLAT(nm, no, T, has, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .off = 0, .off_aux = offsetof(T, has), .sub = &s}
/* Oneof member message: selector member sel = val; optional has-flag. */
#define ONEOF_MSG(nm, no, T, m, sel, val, oo, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .off = m, .off_aux = NR__CFG_NONE, .sub = &s, \
     .oneof = oo, .off_oneof = offsetof(T, sel), .oneof_val = val}
#define ONEOF_SCALAR(nm, no, ty, T, m, sel, val, oo) \
    {.name = nm, .num = no, .type = ty, .off = offsetof(T, m), .off_aux = NR__CFG_NONE, \
     .oneof = oo, .off_oneof = offsetof(T, sel), .oneof_val = val}
#define REPMSG(nm, no, T, m, mn, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .rep = NR__R_PTR, .off = offsetof(T, m), \
     .off_n = offsetof(T, mn), .off_aux = NR__CFG_NONE, .sub = &s}
#define MAP(nm, no, T, m, mn, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .rep = NR__R_PTR, .flags = NR__FL_MAP, \
     .off = offsetof(T, m), .off_n = offsetof(T, mn), .off_aux = NR__CFG_NONE, .sub = &s}
#define SHAPEMAP(nm, no, T, names, dims, cnt) \
    {.name = nm, .num = no, .type = NR__F_SHAPEMAP, .off = offsetof(T, names), \
     .off_n = offsetof(T, cnt), .off_aux = offsetof(T, dims)}

/* ---- enums ---------------------------------------------------------------- */

static const nr__cfg_enum_val_t dtype_vals[] = {
    {"TYPE_INVALID", 0}, {"TYPE_BOOL", 1},   {"TYPE_UINT8", 2},   {"TYPE_UINT16", 3},
    {"TYPE_UINT32", 4},  {"TYPE_UINT64", 5}, {"TYPE_INT8", 6},    {"TYPE_INT16", 7},
    {"TYPE_INT32", 8},   {"TYPE_INT64", 9},  {"TYPE_FP16", 10},   {"TYPE_FP32", 11},
    {"TYPE_FP64", 12},   {"TYPE_STRING", 13}, {"TYPE_BF16", 14},
};
ENUM_T(dtype_enum, "inference.DataType", dtype_vals);

static const nr__cfg_enum_val_t kind_vals[] = {
    {"KIND_AUTO", 0}, {"KIND_GPU", 1}, {"KIND_CPU", 2}, {"KIND_MODEL", 3}};
ENUM_T(kind_enum, "inference.ModelInstanceGroup.Kind", kind_vals);

static const nr__cfg_enum_val_t secdev_vals[] = {{"KIND_NVDLA", 0}};
ENUM_T(secdev_enum, "inference.ModelInstanceGroup.SecondaryDevice.SecondaryDeviceKind",
       secdev_vals);

static const nr__cfg_enum_val_t format_vals[] = {
    {"FORMAT_NONE", 0}, {"FORMAT_NHWC", 1}, {"FORMAT_NCHW", 2}};
ENUM_T(format_enum, "inference.ModelInput.Format", format_vals);

static const nr__cfg_enum_val_t bi_kind_vals[] = {
    {"BATCH_ELEMENT_COUNT", 0},
    {"BATCH_ACCUMULATED_ELEMENT_COUNT", 1},
    {"BATCH_ACCUMULATED_ELEMENT_COUNT_WITH_ZERO", 2},
    {"BATCH_MAX_ELEMENT_COUNT_AS_SHAPE", 3},
    {"BATCH_ITEM_SHAPE", 4},
    {"BATCH_ITEM_SHAPE_FLATTEN", 5},
};
ENUM_T(bi_kind_enum, "inference.BatchInput.Kind", bi_kind_vals);

static const nr__cfg_enum_val_t bo_kind_vals[] = {{"BATCH_SCATTER_WITH_INPUT_SHAPE", 0}};
ENUM_T(bo_kind_enum, "inference.BatchOutput.Kind", bo_kind_vals);

static const nr__cfg_enum_val_t prio_vals[] = {
    {"PRIORITY_DEFAULT", 0}, {"PRIORITY_MAX", 1}, {"PRIORITY_MIN", 2}};
ENUM_T(prio_enum, "inference.ModelOptimizationPolicy.ModelPriority", prio_vals);

static const nr__cfg_enum_val_t timeout_vals[] = {{"REJECT", 0}, {"DELAY", 1}};
ENUM_T(timeout_enum, "inference.ModelQueuePolicy.TimeoutAction", timeout_vals);

static const nr__cfg_enum_val_t control_vals[] = {
    {"CONTROL_SEQUENCE_START", 0},
    {"CONTROL_SEQUENCE_READY", 1},
    {"CONTROL_SEQUENCE_END", 2},
    {"CONTROL_SEQUENCE_CORRID", 3},
};
ENUM_T(control_enum, "inference.ModelSequenceBatching.Control.Kind", control_vals);

/* ---- small shared messages ------------------------------------------------ */

static const nr__cfg_field_t kv_fields[] = {
    ONE("key", 1, NR__F_STRING, nr_cfg_kv_t, key),
    ONE("value", 2, NR__F_STRING, nr_cfg_kv_t, value),
};
static MSG_T(kv_msg, "inference.StringMapEntry", nr_cfg_kv_t, kv_fields);

static const nr__cfg_field_t reshape_fields[] = {
    {.name = "shape", .num = 1, .type = NR__F_INT64, .rep = NR__R_PTR,
     .off = offsetof(nr_cfg_dims_t, v), .off_n = offsetof(nr_cfg_dims_t, n),
     .off_aux = NR__CFG_NONE},
};
static MSG_T(reshape_msg, "inference.ModelTensorReshape", nr_cfg_dims_t, reshape_fields);

/* ---- instance groups ------------------------------------------------------ */

static const nr__cfg_field_t resource_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_rl_resource_t, name),
    ONE("global", 2, NR__F_BOOL, nr_cfg_rl_resource_t, global),
    ONE("count", 3, NR__F_UINT32, nr_cfg_rl_resource_t, count),
};
static MSG_T(resource_msg, "inference.ModelRateLimiter.Resource", nr_cfg_rl_resource_t,
             resource_fields);

static const nr__cfg_field_t rate_limiter_fields[] = {
    REPMSG("resources", 1, nr_cfg_instance_group_t, rl_resources, n_rl_resources, resource_msg),
    ONE("priority", 2, NR__F_UINT32, nr_cfg_instance_group_t, rl_priority),
};
static MSG_T(rate_limiter_msg, "inference.ModelRateLimiter", nr_cfg_instance_group_t,
             rate_limiter_fields);

static const nr__cfg_field_t secdev_fields[] = {
    ENUM("kind", 1, nr_cfg_secondary_device_t, kind, secdev_enum),
    ONE_FL("device_id", 2, NR__F_INT64, nr_cfg_secondary_device_t, device_id, NR__FL_STR64),
};
static MSG_T(secdev_msg, "inference.ModelInstanceGroup.SecondaryDevice",
             nr_cfg_secondary_device_t, secdev_fields);

static const nr__cfg_field_t group_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_instance_group_t, name),
    ENUM("kind", 4, nr_cfg_instance_group_t, kind, kind_enum),
    ONE("count", 2, NR__F_INT32, nr_cfg_instance_group_t, count),
    FLAT("rate_limiter", 6, nr_cfg_instance_group_t, has_rate_limiter, rate_limiter_msg),
    REP("gpus", 3, NR__F_INT32, nr_cfg_instance_group_t, gpus, n_gpus),
    REPMSG("secondary_devices", 8, nr_cfg_instance_group_t, secondary_devices,
           n_secondary_devices, secdev_msg),
    REP("profile", 5, NR__F_STRING, nr_cfg_instance_group_t, profile, n_profile),
    ONE("passive", 7, NR__F_BOOL, nr_cfg_instance_group_t, passive),
    ONE("host_policy", 9, NR__F_STRING, nr_cfg_instance_group_t, host_policy),
};
static MSG_T(group_msg, "inference.ModelInstanceGroup", nr_cfg_instance_group_t, group_fields);

/* ---- inputs, outputs, batch io -------------------------------------------- */

static const nr__cfg_field_t input_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_input_t, name),
    ENUM("data_type", 2, nr_cfg_input_t, data_type, dtype_enum),
    ENUM("format", 3, nr_cfg_input_t, format, format_enum),
    DIMS("dims", 4, nr_cfg_input_t, dims),
    MSG("reshape", 5, nr_cfg_input_t, reshape, has_reshape, reshape_msg),
    ONE("is_shape_tensor", 6, NR__F_BOOL, nr_cfg_input_t, is_shape_tensor),
    ONE("allow_ragged_batch", 7, NR__F_BOOL, nr_cfg_input_t, allow_ragged_batch),
    ONE("optional", 8, NR__F_BOOL, nr_cfg_input_t, optional),
    ONE("is_non_linear_format_io", 9, NR__F_BOOL, nr_cfg_input_t, is_non_linear_format_io),
};
static MSG_T(input_msg, "inference.ModelInput", nr_cfg_input_t, input_fields);

static const nr__cfg_field_t output_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_output_t, name),
    ENUM("data_type", 2, nr_cfg_output_t, data_type, dtype_enum),
    DIMS("dims", 3, nr_cfg_output_t, dims),
    MSG("reshape", 5, nr_cfg_output_t, reshape, has_reshape, reshape_msg),
    ONE("label_filename", 4, NR__F_STRING, nr_cfg_output_t, label_filename),
    ONE("is_shape_tensor", 6, NR__F_BOOL, nr_cfg_output_t, is_shape_tensor),
    ONE("is_non_linear_format_io", 7, NR__F_BOOL, nr_cfg_output_t, is_non_linear_format_io),
};
static MSG_T(output_msg, "inference.ModelOutput", nr_cfg_output_t, output_fields);

static const nr__cfg_field_t batch_input_fields[] = {
    ENUM("kind", 1, nr_cfg_batch_input_t, kind, bi_kind_enum),
    REP("target_name", 2, NR__F_STRING, nr_cfg_batch_input_t, target_name, n_target_name),
    ENUM("data_type", 3, nr_cfg_batch_input_t, data_type, dtype_enum),
    REP("source_input", 4, NR__F_STRING, nr_cfg_batch_input_t, source_input, n_source_input),
};
static MSG_T(batch_input_msg, "inference.BatchInput", nr_cfg_batch_input_t, batch_input_fields);

static const nr__cfg_field_t batch_output_fields[] = {
    REP("target_name", 1, NR__F_STRING, nr_cfg_batch_output_t, target_name, n_target_name),
    ENUM("kind", 2, nr_cfg_batch_output_t, kind, bo_kind_enum),
    REP("source_input", 3, NR__F_STRING, nr_cfg_batch_output_t, source_input, n_source_input),
};
static MSG_T(batch_output_msg, "inference.BatchOutput", nr_cfg_batch_output_t,
             batch_output_fields);

/* ---- version policy ------------------------------------------------------- */

typedef nr_cfg_version_policy_t vp_t;
static const nr__cfg_field_t latest_fields[] = {
    ONE("num_versions", 1, NR__F_UINT32, vp_t, latest_num_versions),
};
static MSG_T(latest_msg, "inference.ModelVersionPolicy.Latest", vp_t, latest_fields);
static const nr__cfg_field_t all_fields[1];
static const nr__cfg_msg_t all_msg = {"inference.ModelVersionPolicy.All", sizeof(vp_t),
                                      all_fields, 0};
static const nr__cfg_field_t specific_fields[] = {
    REP("versions", 1, NR__F_INT64, vp_t, specific_versions, n_specific_versions),
};
static MSG_T(specific_msg, "inference.ModelVersionPolicy.Specific", vp_t, specific_fields);

#define VP_CHOICE(nm, no, val, s) \
    {.name = nm, .num = no, .type = NR__F_MSG, .off = 0, .off_aux = offsetof(vp_t, has_choice), \
     .sub = &s, .oneof = "policy_choice", .off_oneof = offsetof(vp_t, kind), .oneof_val = val}
static const nr__cfg_field_t vp_fields[] = {
    VP_CHOICE("latest", 1, NR_POLICY_LATEST, latest_msg),
    VP_CHOICE("all", 2, NR_POLICY_ALL, all_msg),
    VP_CHOICE("specific", 3, NR_POLICY_SPECIFIC, specific_msg),
};
static MSG_T(vp_msg, "inference.ModelVersionPolicy", vp_t, vp_fields);

/* ---- optimization --------------------------------------------------------- */

static const nr__cfg_field_t shape_fields[] = {
    DIMS_FL("dim", 1, nr__cfg_shape_entry_t, dims, NR__FL_STR64), /* Triton leaves these strings */
};
static MSG_T(shape_msg, "inference.ModelOptimizationPolicy.Cuda.GraphSpec.Shape",
             nr__cfg_shape_entry_t, shape_fields);
static const nr__cfg_field_t shape_entry_fields[] = {
    ONE("key", 1, NR__F_STRING, nr__cfg_shape_entry_t, key),
    {.name = "value", .num = 2, .type = NR__F_MSG, .off = 0, .off_aux = NR__CFG_NONE,
     .sub = &shape_msg},
};
MSG_T(nr__cfg_shape_entry_msg, "inference.ModelOptimizationPolicy.Cuda.GraphSpec.InputEntry",
      nr__cfg_shape_entry_t, shape_entry_fields);

typedef nr_cfg_optimization_t opt_t;
typedef nr_cfg_graph_spec_t gs_t;

static const nr__cfg_field_t graph_fields[] = {
    {.name = "level", .num = 1, .type = NR__F_INT32, .off = 0, .off_aux = NR__CFG_NONE},
};
static MSG_T(graph_msg, "inference.ModelOptimizationPolicy.Graph", int32_t, graph_fields);

static const nr__cfg_field_t lower_bound_fields[] = {
    ONE("batch_size", 1, NR__F_INT32, gs_t, lower_batch_size),
    SHAPEMAP("input", 2, gs_t, lower_input_names, lower_input_dims, n_lower_input),
};
static MSG_T(lower_bound_msg, "inference.ModelOptimizationPolicy.Cuda.GraphSpec.LowerBound",
             gs_t, lower_bound_fields);

static const nr__cfg_field_t graph_spec_fields[] = {
    ONE("batch_size", 1, NR__F_INT32, gs_t, batch_size),
    SHAPEMAP("input", 2, gs_t, input_names, input_dims, n_input),
    FLAT("graph_lower_bound", 3, gs_t, has_lower_bound, lower_bound_msg),
};
static MSG_T(graph_spec_msg, "inference.ModelOptimizationPolicy.Cuda.GraphSpec", gs_t,
             graph_spec_fields);

static const nr__cfg_field_t cuda_fields[] = {
    ONE("graphs", 1, NR__F_BOOL, opt_t, cuda_graphs),
    ONE("busy_wait_events", 2, NR__F_BOOL, opt_t, cuda_busy_wait_events),
    REPMSG("graph_spec", 3, opt_t, cuda_graph_spec, n_cuda_graph_spec, graph_spec_msg),
    ONE("output_copy_stream", 4, NR__F_BOOL, opt_t, cuda_output_copy_stream),
};
static MSG_T(cuda_msg, "inference.ModelOptimizationPolicy.Cuda", opt_t, cuda_fields);

static const nr__cfg_field_t accel_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_accelerator_t, name),
    MAP("parameters", 2, nr_cfg_accelerator_t, parameters, n_parameters, kv_msg),
};
static MSG_T(accel_msg, "inference.ModelOptimizationPolicy.ExecutionAccelerators.Accelerator",
             nr_cfg_accelerator_t, accel_fields);

static const nr__cfg_field_t ea_fields[] = {
    REPMSG("gpu_execution_accelerator", 1, opt_t, gpu_execution_accelerator,
           n_gpu_execution_accelerator, accel_msg),
    REPMSG("cpu_execution_accelerator", 2, opt_t, cpu_execution_accelerator,
           n_cpu_execution_accelerator, accel_msg),
};
static MSG_T(ea_msg, "inference.ModelOptimizationPolicy.ExecutionAccelerators", opt_t, ea_fields);

static const nr__cfg_field_t pinned_fields[] = {
    {.name = "enable", .num = 1, .type = NR__F_BOOL, .off = 0, .off_aux = NR__CFG_NONE},
};
static MSG_T(pinned_msg, "inference.ModelOptimizationPolicy.PinnedMemoryBuffer", bool,
             pinned_fields);

static const nr__cfg_field_t opt_fields[] = {
    MSG("graph", 1, opt_t, graph_level, has_graph, graph_msg),
    ENUM("priority", 2, opt_t, priority, prio_enum),
    FLAT("cuda", 3, opt_t, has_cuda, cuda_msg),
    FLAT("execution_accelerators", 4, opt_t, has_execution_accelerators, ea_msg),
    MSG("input_pinned_memory", 5, opt_t, input_pinned_memory, has_input_pinned_memory, pinned_msg),
    MSG("output_pinned_memory", 6, opt_t, output_pinned_memory, has_output_pinned_memory,
        pinned_msg),
    ONE("gather_kernel_buffer_threshold", 7, NR__F_UINT32, opt_t, gather_kernel_buffer_threshold),
    ONE("eager_batching", 8, NR__F_BOOL, opt_t, eager_batching),
};
static MSG_T(opt_msg, "inference.ModelOptimizationPolicy", opt_t, opt_fields);

/* ---- dynamic batching ----------------------------------------------------- */

typedef nr_cfg_queue_policy_t qp_t;
static const nr__cfg_field_t qp_fields[] = {
    ENUM("timeout_action", 1, qp_t, timeout_action, timeout_enum),
    ONE("default_timeout_microseconds", 2, NR__F_UINT64, qp_t, default_timeout_microseconds),
    ONE("allow_timeout_override", 3, NR__F_BOOL, qp_t, allow_timeout_override),
    ONE("max_queue_size", 4, NR__F_UINT32, qp_t, max_queue_size),
};
static MSG_T(qp_msg, "inference.ModelQueuePolicy", qp_t, qp_fields);

static const nr__cfg_field_t pqp_entry_fields[] = {
    ONE("key", 1, NR__F_UINT64, nr_cfg_priority_policy_t, key),
    MSG_ALWAYS("value", 2, nr_cfg_priority_policy_t, value, qp_msg),
};
static MSG_T(pqp_entry_msg, "inference.ModelDynamicBatching.PriorityQueuePolicyEntry",
             nr_cfg_priority_policy_t, pqp_entry_fields);

typedef nr_cfg_dynamic_batching_t db_t;
static const nr__cfg_field_t db_fields[] = {
    REP("preferred_batch_size", 1, NR__F_INT32, db_t, preferred_batch_size, n_preferred_batch_size),
    ONE("max_queue_delay_microseconds", 2, NR__F_UINT64, db_t, max_queue_delay_microseconds),
    ONE("preserve_ordering", 3, NR__F_BOOL, db_t, preserve_ordering),
    ONE("priority_levels", 4, NR__F_UINT64, db_t, priority_levels),
    ONE("default_priority_level", 5, NR__F_UINT64, db_t, default_priority_level),
    MSG("default_queue_policy", 6, db_t, default_queue_policy, has_default_queue_policy, qp_msg),
    MAP("priority_queue_policy", 7, db_t, priority_queue_policy, n_priority_queue_policy,
        pqp_entry_msg),
};
static MSG_T(db_msg, "inference.ModelDynamicBatching", db_t, db_fields);

/* ---- sequence batching ---------------------------------------------------- */

typedef nr_cfg_sequence_batching_t sb_t;
typedef nr_cfg_seq_control_t ctl_t;
typedef nr_cfg_seq_initial_state_t ist_t;
typedef nr_cfg_seq_state_t st_t;

static const nr__cfg_field_t control_fields[] = {
    ENUM("kind", 1, ctl_t, kind, control_enum),
    FIX2("int32_false_true", 2, NR__F_INT32, ctl_t, int32_false_true, n_int32_false_true),
    FIX2("fp32_false_true", 3, NR__F_FLOAT, ctl_t, fp32_false_true, n_fp32_false_true),
    FIX2("bool_false_true", 5, NR__F_BOOL, ctl_t, bool_false_true, n_bool_false_true),
    ENUM("data_type", 4, ctl_t, data_type, dtype_enum),
};
static MSG_T(control_msg, "inference.ModelSequenceBatching.Control", ctl_t, control_fields);

static const nr__cfg_field_t control_input_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_seq_control_input_t, name),
    REPMSG("control", 2, nr_cfg_seq_control_input_t, control, n_control, control_msg),
};
static MSG_T(control_input_msg, "inference.ModelSequenceBatching.ControlInput",
             nr_cfg_seq_control_input_t, control_input_fields);

static const nr__cfg_field_t initial_state_fields[] = {
    ENUM("data_type", 1, ist_t, data_type, dtype_enum),
    DIMS_FL("dims", 2, ist_t, dims, NR__FL_STR64), /* Triton's FixIntArray misses these */
    ONEOF_SCALAR("zero_data", 3, NR__F_BOOL, ist_t, zero_data, data_choice, 1, "state_data"),
    ONEOF_SCALAR("data_file", 4, NR__F_STRING, ist_t, data_file, data_choice, 2, "state_data"),
    ONE("name", 5, NR__F_STRING, ist_t, name),
};
static MSG_T(initial_state_msg, "inference.ModelSequenceBatching.InitialState", ist_t,
             initial_state_fields);

static const nr__cfg_field_t state_fields[] = {
    ONE("input_name", 1, NR__F_STRING, st_t, input_name),
    ONE("output_name", 2, NR__F_STRING, st_t, output_name),
    ENUM("data_type", 3, st_t, data_type, dtype_enum),
    DIMS("dims", 4, st_t, dims),
    REPMSG("initial_state", 5, st_t, initial_state, n_initial_state, initial_state_msg),
    ONE("use_same_buffer_for_input_output", 6, NR__F_BOOL, st_t, use_same_buffer_for_input_output),
    ONE("use_growable_memory", 7, NR__F_BOOL, st_t, use_growable_memory),
};
static MSG_T(state_msg, "inference.ModelSequenceBatching.State", st_t, state_fields);

static const nr__cfg_field_t direct_fields[] = {
    ONE("max_queue_delay_microseconds", 1, NR__F_UINT64, sb_t, direct_max_queue_delay_microseconds),
    ONE("minimum_slot_utilization", 2, NR__F_FLOAT, sb_t, direct_minimum_slot_utilization),
};
static MSG_T(direct_msg, "inference.ModelSequenceBatching.StrategyDirect", sb_t, direct_fields);

static const nr__cfg_field_t oldest_fields[] = {
    ONE("max_candidate_sequences", 1, NR__F_INT32, sb_t, oldest_max_candidate_sequences),
    REP("preferred_batch_size", 2, NR__F_INT32, sb_t, oldest_preferred_batch_size,
        n_oldest_preferred_batch_size),
    ONE("max_queue_delay_microseconds", 3, NR__F_UINT64, sb_t, oldest_max_queue_delay_microseconds),
    ONE("preserve_ordering", 4, NR__F_BOOL, sb_t, oldest_preserve_ordering),
};
static MSG_T(oldest_msg, "inference.ModelSequenceBatching.StrategyOldest", sb_t, oldest_fields);

static const nr__cfg_field_t sb_fields[] = {
    ONEOF_MSG("direct", 3, sb_t, 0, strategy, 1, "strategy_choice", direct_msg),
    ONEOF_MSG("oldest", 4, sb_t, 0, strategy, 2, "strategy_choice", oldest_msg),
    ONE("max_sequence_idle_microseconds", 1, NR__F_UINT64, sb_t, max_sequence_idle_microseconds),
    REPMSG("control_input", 2, sb_t, control_input, n_control_input, control_input_msg),
    REPMSG("state", 5, sb_t, state, n_state, state_msg),
    ONE("iterative_sequence", 6, NR__F_BOOL, sb_t, iterative_sequence),
};
static MSG_T(sb_msg, "inference.ModelSequenceBatching", sb_t, sb_fields);

/* ---- ensemble ------------------------------------------------------------- */

typedef nr_cfg_ensemble_step_t step_t;
static const nr__cfg_field_t step_fields[] = {
    ONE("model_name", 1, NR__F_STRING, step_t, model_name),
    ONE("model_version", 2, NR__F_INT64, step_t, model_version),
    MAP("input_map", 3, step_t, input_map, n_input_map, kv_msg),
    MAP("output_map", 4, step_t, output_map, n_output_map, kv_msg),
    ONE("model_namespace", 5, NR__F_STRING, step_t, model_namespace),
};
static MSG_T(step_msg, "inference.ModelEnsembling.Step", step_t, step_fields);

static const nr__cfg_field_t ens_fields[] = {
    REPMSG("step", 1, nr_cfg_ensemble_t, step, n_step, step_msg),
    ONE("max_inflight_requests", 2, NR__F_UINT32, nr_cfg_ensemble_t, max_inflight_requests),
    /* The field's name in newer protos; same storage. */
    ONE_FL("max_inflight_responses", 0, NR__F_UINT32, nr_cfg_ensemble_t, max_inflight_requests,
           NR__FL_ALIAS),
};
static MSG_T(ens_msg, "inference.ModelEnsembling", nr_cfg_ensemble_t, ens_fields);

/* ---- warmup, parameters, the small optional messages ---------------------- */

typedef nr_cfg_warmup_input_t wi_t;
static const nr__cfg_field_t warmup_input_fields[] = {
    ENUM("data_type", 1, wi_t, data_type, dtype_enum),
    DIMS("dims", 2, wi_t, dims),
    ONEOF_SCALAR("zero_data", 3, NR__F_BOOL, wi_t, data_flag, data, NR_WARMUP_ZERO,
                 "input_data_type"),
    ONEOF_SCALAR("random_data", 4, NR__F_BOOL, wi_t, data_flag, data, NR_WARMUP_RANDOM,
                 "input_data_type"),
    ONEOF_SCALAR("input_data_file", 5, NR__F_STRING, wi_t, input_data_file, data, NR_WARMUP_FILE,
                 "input_data_type"),
};
static MSG_T(warmup_input_msg, "inference.ModelWarmup.Input", wi_t, warmup_input_fields);

static const nr__cfg_field_t warmup_entry_fields[] = {
    ONE("key", 1, NR__F_STRING, wi_t, key),
    {.name = "value", .num = 2, .type = NR__F_MSG, .off = 0, .off_aux = NR__CFG_NONE,
     .sub = &warmup_input_msg},
};
static MSG_T(warmup_entry_msg, "inference.ModelWarmup.InputsEntry", wi_t, warmup_entry_fields);

static const nr__cfg_field_t warmup_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_warmup_t, name),
    ONE("batch_size", 2, NR__F_UINT32, nr_cfg_warmup_t, batch_size),
    MAP("inputs", 3, nr_cfg_warmup_t, inputs, n_inputs, warmup_entry_msg),
    ONE("count", 4, NR__F_UINT32, nr_cfg_warmup_t, count),
};
static MSG_T(warmup_msg, "inference.ModelWarmup", nr_cfg_warmup_t, warmup_fields);

static const nr__cfg_field_t model_param_fields[] = {
    {.name = "string_value", .num = 1, .type = NR__F_STRING, .off = 0, .off_aux = NR__CFG_NONE},
};
static MSG_T(model_param_msg, "inference.ModelParameter", char *, model_param_fields);

static const nr__cfg_field_t param_entry_fields[] = {
    ONE("key", 1, NR__F_STRING, nr_cfg_kv_t, key),
    MSG_ALWAYS("value", 2, nr_cfg_kv_t, value, model_param_msg),
};
static MSG_T(param_entry_msg, "inference.ModelConfig.ParametersEntry", nr_cfg_kv_t,
             param_entry_fields);

typedef nr_model_config_t mc_t;
static const nr__cfg_field_t ops_fields[] = {
    REP("op_library_filename", 1, NR__F_STRING, mc_t, op_library_filename, n_op_library_filename),
};
static MSG_T(ops_msg, "inference.ModelOperations", mc_t, ops_fields);

static const nr__cfg_field_t txn_fields[] = {ONE("decoupled", 1, NR__F_BOOL, mc_t, decoupled)};
static MSG_T(txn_msg, "inference.ModelTransactionPolicy", mc_t, txn_fields);

static const nr__cfg_field_t agent_fields[] = {
    ONE("name", 1, NR__F_STRING, nr_cfg_repo_agent_t, name),
    MAP("parameters", 2, nr_cfg_repo_agent_t, parameters, n_parameters, kv_msg),
};
static MSG_T(agent_msg, "inference.ModelRepositoryAgents.Agent", nr_cfg_repo_agent_t,
             agent_fields);

static const nr__cfg_field_t agents_fields[] = {
    REPMSG("agents", 1, mc_t, agents, n_agents, agent_msg),
};
static MSG_T(agents_msg, "inference.ModelRepositoryAgents", mc_t, agents_fields);

static const nr__cfg_field_t cache_fields[] = {
    ONE("enable", 1, NR__F_BOOL, mc_t, response_cache_enable),
};
static MSG_T(cache_msg, "inference.ModelResponseCache", mc_t, cache_fields);

typedef nr_cfg_metric_control_t mctl_t;
static const nr__cfg_field_t metric_id_fields[] = {ONE("family", 1, NR__F_STRING, mctl_t, family)};
static MSG_T(metric_id_msg, "inference.ModelMetrics.MetricControl.MetricIdentifier", mctl_t,
             metric_id_fields);
static const nr__cfg_field_t histo_fields[] = {
    REP("buckets", 1, NR__F_DOUBLE, mctl_t, buckets, n_buckets),
};
static MSG_T(histo_msg, "inference.ModelMetrics.MetricControl.HistogramOptions", mctl_t,
             histo_fields);
static const nr__cfg_field_t metric_control_fields[] = {
    FLAT("metric_identifier", 1, mctl_t, has_metric_identifier, metric_id_msg),
    FLAT("histogram_options", 2, mctl_t, has_histogram_options, histo_msg),
};
static MSG_T(metric_control_msg, "inference.ModelMetrics.MetricControl", mctl_t,
             metric_control_fields);
static const nr__cfg_field_t metrics_fields[] = {
    REPMSG("metric_control", 1, mc_t, metric_control, n_metric_control, metric_control_msg),
};
static MSG_T(metrics_msg, "inference.ModelMetrics", mc_t, metrics_fields);

/* ---- ModelConfig ---------------------------------------------------------- */

#define SCHED(nm, no, m, val, s) \
    ONEOF_MSG(nm, no, mc_t, offsetof(mc_t, m), scheduling_choice, val, "scheduling_choice", s)
static const nr__cfg_field_t mc_fields[] = {
    ONE("name", 1, NR__F_STRING, mc_t, name),
    ONE("platform", 2, NR__F_STRING, mc_t, platform),
    ONE("backend", 17, NR__F_STRING, mc_t, backend),
    ONE("runtime", 25, NR__F_STRING, mc_t, runtime),
    MSG("version_policy", 3, mc_t, version_policy, has_version_policy, vp_msg),
    ONE("max_batch_size", 4, NR__F_INT32, mc_t, max_batch_size),
    REPMSG("input", 5, mc_t, input, n_input, input_msg),
    REPMSG("output", 6, mc_t, output, n_output, output_msg),
    REPMSG("batch_input", 20, mc_t, batch_input, n_batch_input, batch_input_msg),
    REPMSG("batch_output", 21, mc_t, batch_output, n_batch_output, batch_output_msg),
    MSG("optimization", 12, mc_t, optimization, has_optimization, opt_msg),
    SCHED("dynamic_batching", 11, dynamic_batching, NR_SCHED_DYNAMIC, db_msg),
    SCHED("sequence_batching", 13, sequence_batching, NR_SCHED_SEQUENCE, sb_msg),
    SCHED("ensemble_scheduling", 15, ensemble_scheduling, NR_SCHED_ENSEMBLE, ens_msg),
    REPMSG("instance_group", 7, mc_t, instance_group, n_instance_group, group_msg),
    ONE("default_model_filename", 8, NR__F_STRING, mc_t, default_model_filename),
    MAP("cc_model_filenames", 9, mc_t, cc_model_filenames, n_cc_model_filenames, kv_msg),
    MAP("metric_tags", 10, mc_t, metric_tags, n_metric_tags, kv_msg),
    MAP("parameters", 14, mc_t, parameters, n_parameters, param_entry_msg),
    REPMSG("model_warmup", 16, mc_t, model_warmup, n_model_warmup, warmup_msg),
    FLAT("model_operations", 18, mc_t, has_model_operations, ops_msg),
    FLAT("model_transaction_policy", 19, mc_t, has_model_transaction_policy, txn_msg),
    FLAT("model_repository_agents", 23, mc_t, has_model_repository_agents, agents_msg),
    FLAT("response_cache", 24, mc_t, has_response_cache, cache_msg),
    FLAT("model_metrics", 26, mc_t, has_model_metrics, metrics_msg),
};
MSG_T(nr__cfg_model_config_msg, "inference.ModelConfig", mc_t, mc_fields);

/* ---- walkers -------------------------------------------------------------- */

size_t nr__cfg_elem_size(const nr__cfg_field_t *f)
{
    switch (f->type) {
    case NR__F_STRING: return sizeof(char *);
    case NR__F_BOOL: return sizeof(bool);
    case NR__F_INT32:
    case NR__F_ENUM: return sizeof(int32_t);
    case NR__F_UINT32: return sizeof(uint32_t);
    case NR__F_INT64: return sizeof(int64_t);
    case NR__F_UINT64: return sizeof(uint64_t);
    case NR__F_FLOAT: return sizeof(float);
    case NR__F_DOUBLE: return sizeof(double);
    case NR__F_MSG: return f->sub->size;
    default: return 0;
    }
}

bool nr__cfg_scalar_is_default(const nr__cfg_field_t *f, const void *base)
{
    const void *p = NR__CAT(base, f->off, char);
    switch (f->type) {
    case NR__F_STRING: {
        const char *s = *(char *const *)p;
        return s == NULL || s[0] == '\0';
    }
    case NR__F_BOOL: return !*(const bool *)p;
    case NR__F_INT32:
    case NR__F_ENUM: return *(const int32_t *)p == 0;
    case NR__F_UINT32: return *(const uint32_t *)p == 0;
    case NR__F_INT64: return *(const int64_t *)p == 0;
    case NR__F_UINT64: return *(const uint64_t *)p == 0;
    case NR__F_FLOAT: {
        uint32_t bits;
        memcpy(&bits, p, sizeof(bits)); /* proto3: -0.0 counts as set */
        return bits == 0;
    }
    case NR__F_DOUBLE: {
        uint64_t bits;
        memcpy(&bits, p, sizeof(bits));
        return bits == 0;
    }
    default: return true;
    }
}

bool nr__cfg_msg_present(const nr__cfg_field_t *f, const void *base)
{
    if (f->off_aux != NR__CFG_NONE && !*NR__CAT(base, f->off_aux, bool))
        return false;
    if (f->oneof != NULL && *NR__CAT(base, f->off_oneof, int) != f->oneof_val)
        return false;
    return true;
}

bool nr__cfg_msg_is_empty(const nr__cfg_msg_t *m, const void *base)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const nr__cfg_field_t *f = &m->fields[i];
        if (f->flags & NR__FL_ALIAS)
            continue;
        if (f->rep != NR__R_ONE || f->type == NR__F_SHAPEMAP) {
            if (*NR__CAT(base, f->off_n, size_t) != 0)
                return false;
        } else if (f->type == NR__F_MSG) {
            if (f->off_aux != NR__CFG_NONE || f->oneof != NULL) {
                if (nr__cfg_msg_present(f, base))
                    return false;
            } else if (!nr__cfg_msg_is_empty(f->sub, NR__CAT(base, f->off, char))) {
                return false;
            }
        } else if (f->oneof != NULL) {
            if (*NR__CAT(base, f->off_oneof, int) == f->oneof_val)
                return false;
        } else if (!nr__cfg_scalar_is_default(f, base)) {
            return false;
        }
    }
    return true;
}

static void free_shapemap(const nr__cfg_field_t *f, void *base)
{
    size_t n = *NR__AT(base, f->off_n, size_t);
    char **names = *NR__AT(base, f->off, char **);
    nr_cfg_dims_t *dims = *NR__AT(base, f->off_aux, nr_cfg_dims_t *);
    for (size_t i = 0; i < n; i++) {
        free(names[i]);
        free(dims[i].v);
    }
    free(names);
    free(dims);
}

void nr__cfg_free_msg(const nr__cfg_msg_t *m, void *base)
{
    for (size_t i = 0; i < m->n_fields; i++) {
        const nr__cfg_field_t *f = &m->fields[i];
        if (f->flags & NR__FL_ALIAS)
            continue;
        if (f->type == NR__F_SHAPEMAP) {
            free_shapemap(f, base);
        } else if (f->rep == NR__R_ONE) {
            if (f->type == NR__F_STRING)
                free(*NR__AT(base, f->off, char *));
            else if (f->type == NR__F_MSG)
                nr__cfg_free_msg(f->sub, NR__AT(base, f->off, char));
        } else if (f->rep == NR__R_PTR) {
            char *arr = *NR__AT(base, f->off, char *);
            size_t n = *NR__AT(base, f->off_n, size_t);
            size_t es = nr__cfg_elem_size(f);
            for (size_t k = 0; arr != NULL && k < n; k++) {
                if (f->type == NR__F_STRING)
                    free(*(char **)(arr + k * es));
                else if (f->type == NR__F_MSG)
                    nr__cfg_free_msg(f->sub, arr + k * es);
            }
            free(arr);
        }
    }
}

const char *nr__cfg_enum_name(const nr__cfg_enum_t *en, int value)
{
    for (size_t i = 0; i < en->n; i++)
        if (en->vals[i].value == value)
            return en->vals[i].name;
    return NULL;
}

const nr__cfg_field_t *nr__cfg_next_field(const nr__cfg_msg_t *m, uint32_t after)
{
    const nr__cfg_field_t *best = NULL;
    for (size_t i = 0; i < m->n_fields; i++) {
        const nr__cfg_field_t *f = &m->fields[i];
        if (f->num > after && (best == NULL || f->num < best->num))
            best = f;
    }
    return best;
}
