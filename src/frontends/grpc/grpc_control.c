/* grpc_control.c - every RPC that is not inference, and the method table.
 * Each handler takes the unpacked request, asks the core (kserve.h, the
 * shared-memory registry, the server's readiness) and packs the response;
 * the errors are the core's, with Triton's texts, mapped to gRPC codes in
 * common/status.c. Responses are built in an arena that dies with the call.
 */
#include "grpc_int.h"

#include "../../common/alloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Zeroed memory for a response being built; it goes with the arena. */
static void *zalloc(nr_arena_t *a, size_t n)
{
    return nr_arena_calloc(a, n ? n : 1);
}

/* Appends item to a response's growing array: acc has {nr_arena_t a; T **v;
 * size_t n, cap;}, the array lives in acc->a. */
#define PUSH(acc, item)                                                          \
    do {                                                                         \
        if ((acc)->n == (acc)->cap) {                                            \
            size_t cap_ = (acc)->cap ? (acc)->cap * 2 : 8;                       \
            void *v_ = zalloc(&(acc)->a, cap_ * sizeof(*(acc)->v));              \
            if ((acc)->n)                                                        \
                memcpy(v_, (acc)->v, (acc)->n * sizeof(*(acc)->v));              \
            (acc)->v = v_;                                                       \
            (acc)->cap = cap_;                                                   \
        }                                                                        \
        (acc)->v[(acc)->n++] = (item);                                           \
    } while (0)

/* The version field of a request: "" = none. */
static nr_status_t *version_of(const char *v, int64_t *out)
{
    return nr_kserve_parse_version(v, strlen(v), NR_VERSION_STOL, out);
}

/* ---- health and metadata -------------------------------------------------------- */

static nr_status_t *server_live(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    Inference__ServerLiveResponse r = INFERENCE__SERVER_LIVE_RESPONSE__INIT;
    r.live = nr_server_live(s->core);
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static nr_status_t *server_ready(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    Inference__ServerReadyResponse r = INFERENCE__SERVER_READY_RESPONSE__INIT;
    r.ready = nr_server_ready(s->core);
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static nr_status_t *health_check(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    /* Triton ignores the service name and reports the server's readiness */
    Grpc__Health__V1__HealthCheckResponse r = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    if (nr_server_ready(s->core))
        r.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    else
        r.status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static nr_status_t *model_ready(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    const Inference__ModelReadyRequest *q = (const void *)req;
    int64_t v;
    nr_status_t *st = version_of(q->version, &v);
    if (st != NULL)
        return st;
    Inference__ModelReadyResponse r = INFERENCE__MODEL_READY_RESPONSE__INIT;
    r.ready = nr_kserve_model_ready(s->core, q->name, strlen(q->name), v);
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static nr_status_t *server_metadata(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                    nr_buf_t *out)
{
    Inference__ServerMetadataResponse r = INFERENCE__SERVER_METADATA_RESPONSE__INIT;
    const char *const *ext;
    r.name = (char *)nr_server_id(s->core);
    r.version = (char *)nr_server_version(s->core);
    r.n_extensions = nr_server_extensions(&ext);
    r.extensions = (char **)ext;
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static Inference__ModelMetadataResponse__TensorMetadata *
tensor_meta(nr_arena_t *a, const nr_model_config_t *cfg, const char *name, nr_dtype_t dt,
            const nr_cfg_dims_t *dims)
{
    Inference__ModelMetadataResponse__TensorMetadata *t = zalloc(a, sizeof(*t));
    inference__model_metadata_response__tensor_metadata__init(t);
    t->name = (char *)name;
    t->datatype = (char *)(nr_dtype_kserve_name(dt) ? nr_dtype_kserve_name(dt) : "");
    t->shape = zalloc(a, (NR_MAX_DIMS + 1) * sizeof(int64_t));
    t->n_shape = nr_kserve_meta_shape(cfg, dims, t->shape);
    return t;
}

static nr_status_t *model_metadata(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                   nr_buf_t *out)
{
    const Inference__ModelMetadataRequest *q = (const void *)req;
    int64_t v;
    nr_model_meta_t meta;
    nr_status_t *st = version_of(q->version, &v);
    if (st == NULL)
        st = nr_kserve_model_metadata(s->core, q->name, strlen(q->name), v, &meta);
    if (st != NULL)
        return st;
    const nr_model_config_t *cfg = meta.model->cfg;
    nr_arena_t a = nr_arena_init(4096);
    Inference__ModelMetadataResponse r = INFERENCE__MODEL_METADATA_RESPONSE__INIT;
    r.name = (char *)meta.model->name;
    r.n_versions = meta.n_versions;
    r.versions = (char **)meta.versions;
    r.platform = (char *)meta.platform;
    r.n_inputs = cfg->n_input;
    r.inputs = zalloc(&a, cfg->n_input * sizeof(*r.inputs));
    for (size_t i = 0; i < cfg->n_input; i++)
        r.inputs[i] = tensor_meta(&a, cfg, cfg->input[i].name, cfg->input[i].data_type,
                                  &cfg->input[i].dims);
    r.n_outputs = cfg->n_output;
    r.outputs = zalloc(&a, cfg->n_output * sizeof(*r.outputs));
    for (size_t i = 0; i < cfg->n_output; i++)
        r.outputs[i] = tensor_meta(&a, cfg, cfg->output[i].name, cfg->output[i].data_type,
                                   &cfg->output[i].dims);
    nr_grpc_pack(&r.base, out);
    nr_arena_free(&a);
    nr_kserve_model_meta_free(&meta);
    return NULL;
}

static nr_status_t *model_config(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    const Inference__ModelConfigRequest *q = (const void *)req;
    int64_t v;
    nr_model_t *m;
    nr_status_t *st = version_of(q->version, &v);
    if (st == NULL)
        st = nr_kserve_model(s->core, q->name, strlen(q->name), v, &m);
    if (st != NULL)
        return st;
    /* ModelConfigResponse.config: the ModelConfig message, encoded from the
     * same schema tables that print the HTTP JSON (see src/proto/grpc_service.proto) */
    Inference__ModelConfigResponse r = INFERENCE__MODEL_CONFIG_RESPONSE__INIT;
    size_t len = 0;
    char *pb = nr_cfg_to_pb(m->cfg, &len);
    nr_model_release(m);
    r.config.data = (uint8_t *)pb;
    r.config.len = len;
    nr_grpc_pack(&r.base, out);
    free(pb);
    return NULL;
}

static char *arena_str(nr_arena_t *a, const char *s)
{
    size_t n = strlen(s) + 1;
    return memcpy(zalloc(a, n), s, n);
}

/* ---- statistics ------------------------------------------------------------------ */

typedef struct {
    nr_arena_t a;
    Inference__ModelStatistics **v;
    size_t n, cap;
} stats_acc_t;

static Inference__StatisticDuration *dur(nr_arena_t *a, const nr_dur_snap_t *d)
{
    Inference__StatisticDuration *x = zalloc(a, sizeof(*x));
    inference__statistic_duration__init(x);
    x->count = d->count;
    x->ns = d->ns;
    return x;
}

static void add_stats(const nr_model_t *m, const nr_stats_snap_t *sn, void *arg)
{
    stats_acc_t *acc = arg;
    nr_arena_t *a = &acc->a;
    Inference__ModelStatistics *ms = zalloc(a, sizeof(*ms));
    inference__model_statistics__init(ms);
    ms->name = arena_str(&acc->a, m->name); /* the model may go once the walk ends */
    ms->version = arena_str(&acc->a, m->version_str);
    ms->last_inference = sn->last_inference_ms;
    ms->inference_count = sn->inference_count;
    ms->execution_count = sn->execution_count;
    Inference__InferStatistics *is = zalloc(a, sizeof(*is));
    inference__infer_statistics__init(is);
    is->success = dur(a, &sn->success);
    is->fail = dur(a, &sn->fail);
    is->queue = dur(a, &sn->queue);
    is->compute_input = dur(a, &sn->compute_input);
    is->compute_infer = dur(a, &sn->compute_infer);
    is->compute_output = dur(a, &sn->compute_output);
    is->cache_hit = dur(a, &sn->cache_hit);
    is->cache_miss = dur(a, &sn->cache_miss);
    ms->inference_stats = is;
    ms->n_batch_stats = sn->n_batch;
    ms->batch_stats = zalloc(a, sn->n_batch * sizeof(*ms->batch_stats));
    for (uint32_t i = 0; i < sn->n_batch; i++) {
        Inference__InferBatchStatistics *b = zalloc(a, sizeof(*b));
        inference__infer_batch_statistics__init(b);
        b->batch_size = sn->batch[i].batch_size;
        b->compute_input = dur(a, &sn->batch[i].compute_input);
        b->compute_infer = dur(a, &sn->batch[i].compute_infer);
        b->compute_output = dur(a, &sn->batch[i].compute_output);
        ms->batch_stats[i] = b;
    }
    ms->n_response_stats = sn->n_resp; /* a decoupled model's, by response index */
    ms->response_stats = zalloc(a, sn->n_resp * sizeof(*ms->response_stats));
    for (uint32_t i = 0; i < sn->n_resp; i++) {
        const struct nr_resp_snap_s *r = &sn->resp[i];
        Inference__InferResponseStatistics *x = zalloc(a, sizeof(*x));
        inference__infer_response_statistics__init(x);
        x->compute_infer = dur(a, &r->compute_infer);
        x->compute_output = dur(a, &r->compute_output);
        x->success = dur(a, &r->success);
        x->fail = dur(a, &r->fail);
        x->empty_response = dur(a, &r->empty_response);
        x->cancel = dur(a, &r->cancel);
        Inference__ModelStatistics__ResponseStatsEntry *e = zalloc(a, sizeof(*e));
        inference__model_statistics__response_stats_entry__init(e);
        char key[16];
        snprintf(key, sizeof(key), "%u", i);
        e->key = arena_str(a, key);
        e->value = x;
        ms->response_stats[i] = e;
    }
    PUSH(acc, ms);
}

static nr_status_t *model_statistics(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                     nr_buf_t *out)
{
    const Inference__ModelStatisticsRequest *q = (const void *)req;
    int64_t v;
    nr_status_t *st = version_of(q->version, &v);
    if (st != NULL)
        return st;
    stats_acc_t acc = {nr_arena_init(16384), NULL, 0, 0};
    size_t nl = strlen(q->name);
    st = nr_kserve_stats(s->core, nl ? q->name : NULL, nl, v, add_stats, &acc);
    if (st == NULL) {
        Inference__ModelStatisticsResponse r = INFERENCE__MODEL_STATISTICS_RESPONSE__INIT;
        r.n_model_stats = acc.n;
        r.model_stats = acc.v;
        nr_grpc_pack(&r.base, out);
    }
    nr_arena_free(&acc.a);
    return st;
}

/* ---- repository -------------------------------------------------------------------- */

typedef struct {
    nr_arena_t a;
    Inference__RepositoryIndexResponse__ModelIndex **v;
    size_t n, cap;
} index_acc_t;

static void add_index(const nr_index_entry_t *e, void *arg)
{
    index_acc_t *acc = arg;
    Inference__RepositoryIndexResponse__ModelIndex *mi = zalloc(&acc->a, sizeof(*mi));
    inference__repository_index_response__model_index__init(mi);
    /* copies: the strings are the repository's, valid during this call only */
    mi->name = arena_str(&acc->a, e->name);
    if (e->version != NULL)
        mi->version = arena_str(&acc->a, e->version);
    if (e->state != NULL)
        mi->state = (char *)e->state; /* static */
    if (e->reason != NULL)
        mi->reason = arena_str(&acc->a, e->reason);
    PUSH(acc, mi);
}

static nr_status_t *repository_index(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                     nr_buf_t *out)
{
    const Inference__RepositoryIndexRequest *q = (const void *)req;
    if (q->repository_name[0] != '\0')
        return nr_kserve_repo_named();
    index_acc_t acc = {nr_arena_init(4096), NULL, 0, 0};
    nr_kserve_repo_index(s->core, q->ready, add_index, &acc);
    Inference__RepositoryIndexResponse r = INFERENCE__REPOSITORY_INDEX_RESPONSE__INIT;
    r.n_models = acc.n;
    r.models = acc.v;
    nr_grpc_pack(&r.base, out);
    nr_arena_free(&acc.a);
    return NULL;
}

static nr_status_t *repository_load(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                    nr_buf_t *out)
{
    const Inference__RepositoryModelLoadRequest *q = (const void *)req;
    if (q->repository_name[0] != '\0')
        return nr_kserve_repo_named();
    nr_repo_load_params_t p = {0};
    nr_repo_file_t *files = nr_calloc(q->n_parameters + 1, sizeof(*files));
    nr_status_t *st = NULL;
    for (size_t i = 0; i < q->n_parameters && st == NULL; i++) { /* before the mode, as Triton */
        const char *k = q->parameters[i]->key;
        const Inference__ModelRepositoryParameter *v = q->parameters[i]->value;
        int c = v ? (int)v->parameter_choice_case : 0;
        if (!strcmp(k, "config")) {
            if (c != INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
                st = nr_status_new(NR_INVALID_ARG, "invalid value type for load parameter "
                                                   "'config', expected string_param.");
            else
                p.config = v->string_param, p.config_len = strlen(v->string_param);
        } else if (!strncmp(k, "file:", 5)) {
            if (c != INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BYTES_PARAM)
                st = nr_status_new(NR_INVALID_ARG,
                                   "invalid value type for load parameter '%s', expected "
                                   "bytes_param.",
                                   k);
            else
                files[p.n_files++] = (nr_repo_file_t){k + 5, strlen(k + 5),
                                                      v->bytes_param.data, v->bytes_param.len};
        } else {
            st = nr_status_new(NR_INVALID_ARG, "unrecognized load parameter '%s'.", k);
        }
    }
    p.files = files;
    if (st == NULL)
        st = nr_kserve_repo_load(s->core, q->model_name, strlen(q->model_name), &p);
    free(files);
    if (st == NULL) {
        Inference__RepositoryModelLoadResponse r = INFERENCE__REPOSITORY_MODEL_LOAD_RESPONSE__INIT;
        nr_grpc_pack(&r.base, out);
    }
    return st;
}

static nr_status_t *repository_unload(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                      nr_buf_t *out)
{
    const Inference__RepositoryModelUnloadRequest *q = (const void *)req;
    if (q->repository_name[0] != '\0')
        return nr_kserve_repo_named();
    bool dependents = false;
    for (size_t i = 0; i < q->n_parameters; i++) {
        const Inference__ModelRepositoryParameter *p = q->parameters[i]->value;
        if (strcmp(q->parameters[i]->key, "unload_dependents") != 0)
            continue;
        if (p == NULL || p->parameter_choice_case !=
                             INFERENCE__MODEL_REPOSITORY_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM)
            return nr_status_new(NR_INVALID_ARG, "invalid value type for 'unload_dependents' "
                                                 "parameter, expected bool_param.");
        dependents = p->bool_param;
    }
    nr_status_t *st =
        nr_kserve_repo_unload(s->core, q->model_name, strlen(q->model_name), dependents);
    if (st == NULL) {
        Inference__RepositoryModelUnloadResponse r =
            INFERENCE__REPOSITORY_MODEL_UNLOAD_RESPONSE__INIT;
        nr_grpc_pack(&r.base, out);
    }
    return st;
}

/* ---- shared memory ------------------------------------------------------------------- */

typedef struct {
    nr_arena_t a;
    Inference__SystemSharedMemoryStatusResponse__RegionsEntry **v;
    size_t n, cap;
} shm_acc_t;

static void add_region(const nr_shm_info_t *info, void *arg)
{
    shm_acc_t *acc = arg;
    /* copies: the registry's strings are only safe under its lock */
    Inference__SystemSharedMemoryStatusResponse__RegionStatus *rs = zalloc(&acc->a, sizeof(*rs));
    inference__system_shared_memory_status_response__region_status__init(rs);
    rs->name = nr_arena_strndup(&acc->a, info->name, strlen(info->name));
    rs->key = nr_arena_strndup(&acc->a, info->key, strlen(info->key));
    rs->offset = info->offset;
    rs->byte_size = info->byte_size;
    Inference__SystemSharedMemoryStatusResponse__RegionsEntry *e = zalloc(&acc->a, sizeof(*e));
    inference__system_shared_memory_status_response__regions_entry__init(e);
    e->key = rs->name;
    e->value = rs;
    PUSH(acc, e);
}

static nr_status_t *shm_status(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    const Inference__SystemSharedMemoryStatusRequest *q = (const void *)req;
    size_t nl = strlen(q->name);
    shm_acc_t acc = {nr_arena_init(4096), NULL, 0, 0};
    nr_status_t *st = nr_shm_visit(nr_server_shm(s->core), nl ? q->name : NULL, nl, add_region,
                                   &acc);
    if (st == NULL) {
        Inference__SystemSharedMemoryStatusResponse r =
            INFERENCE__SYSTEM_SHARED_MEMORY_STATUS_RESPONSE__INIT;
        r.n_regions = acc.n;
        r.regions = acc.v;
        nr_grpc_pack(&r.base, out);
    }
    nr_arena_free(&acc.a);
    return st;
}

static nr_status_t *shm_register(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    const Inference__SystemSharedMemoryRegisterRequest *q = (const void *)req;
    nr_status_t *st = nr_shm_register(nr_server_shm(s->core), q->name, strlen(q->name), q->key,
                                      strlen(q->key), q->offset, q->byte_size);
    if (st == NULL) {
        Inference__SystemSharedMemoryRegisterResponse r =
            INFERENCE__SYSTEM_SHARED_MEMORY_REGISTER_RESPONSE__INIT;
        nr_grpc_pack(&r.base, out);
    }
    return st;
}

static nr_status_t *shm_unregister(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                   nr_buf_t *out)
{
    const Inference__SystemSharedMemoryUnregisterRequest *q = (const void *)req;
    size_t nl = strlen(q->name);
    nr_shm_unregister(nr_server_shm(s->core), nl ? q->name : NULL, nl);
    Inference__SystemSharedMemoryUnregisterResponse r =
        INFERENCE__SYSTEM_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static nr_status_t *cuda_status(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    const Inference__CudaSharedMemoryStatusRequest *q = (const void *)req;
    if (q->name[0] != '\0')
        return nr_kserve_cuda_status(q->name, strlen(q->name));
    Inference__CudaSharedMemoryStatusResponse r =
        INFERENCE__CUDA_SHARED_MEMORY_STATUS_RESPONSE__INIT;
    nr_grpc_pack(&r.base, out);
    return NULL;
}

static nr_status_t *cuda_register(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                  nr_buf_t *out)
{
    const Inference__CudaSharedMemoryRegisterRequest *q = (const void *)req;
    return nr_kserve_cuda_register(q->name, strlen(q->name));
}

static nr_status_t *cuda_unregister(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                    nr_buf_t *out)
{
    Inference__CudaSharedMemoryUnregisterResponse r =
        INFERENCE__CUDA_SHARED_MEMORY_UNREGISTER_RESPONSE__INIT;
    nr_grpc_pack(&r.base, out); /* nothing is ever registered */
    return NULL;
}

/* ---- trace and logging ---------------------------------------------------------------- */

#define TRACE_KEYS_MAX 32 /* six of Triton's, and mode opentelemetry's settings */

typedef struct {
    Inference__TraceSettingResponse__SettingValue sv[TRACE_KEYS_MAX];
    Inference__TraceSettingResponse__SettingsEntry e[TRACE_KEYS_MAX], *ep[TRACE_KEYS_MAX];
    char *keys[TRACE_KEYS_MAX], *vals[TRACE_KEYS_MAX][2]; /* copies: they live in the caller's
                                                             frame */
    size_t n;
} trace_acc_t;

static void put_trace_setting(void *arg, const char *key, const char *const *values, size_t n)
{
    trace_acc_t *a = arg;
    if (a->n >= TRACE_KEYS_MAX)
        return;
    size_t i = a->n++;
    inference__trace_setting_response__setting_value__init(&a->sv[i]);
    for (size_t k = 0; k < n && k < 2; k++)
        a->vals[i][k] = nr_strdup(values[k]);
    a->sv[i].n_value = n < 2 ? n : 2;
    a->sv[i].value = a->vals[i];
    inference__trace_setting_response__settings_entry__init(&a->e[i]);
    a->e[i].key = a->keys[i] = nr_strdup(key);
    a->e[i].value = &a->sv[i];
    a->ep[i] = &a->e[i];
}

static nr_status_t *trace_setting(nr_grpc_server_t *s, const ProtobufCMessage *req,
                                  nr_buf_t *out)
{
    const Inference__TraceSettingRequest *q = (const void *)req;
    const char *model = q->model_name;
    if (model[0] != '\0' && !nr_kserve_model_ready(s->core, model, strlen(model), -1))
        return nr_status_new(NR_INVALID_ARG, "Request for unknown model : %s", model);
    if (q->n_settings > 0) {
        size_t nv = 0;
        for (size_t i = 0; i < q->n_settings; i++)
            nv += q->settings[i]->value != NULL ? q->settings[i]->value->n_value : 0;
        nr_kserve_trace_item_t *items = nr_calloc(q->n_settings, sizeof(*items));
        nr_view_t *vals = nr_calloc(nv ? nv : 1, sizeof(*vals));
        for (size_t i = 0, at = 0; i < q->n_settings; i++) {
            const Inference__TraceSettingRequest__SettingValue *v = q->settings[i]->value;
            size_t n = v != NULL ? v->n_value : 0;
            for (size_t k = 0; k < n; k++)
                vals[at + k] = (nr_view_t){v->value[k], strlen(v->value[k])};
            items[i] = (nr_kserve_trace_item_t){.key = q->settings[i]->key,
                                                .key_len = strlen(q->settings[i]->key),
                                                .values = vals + at, .n = n, .null = n == 0};
            at += n;
        }
        nr_status_t *st = nr_kserve_trace_change(model, items, q->n_settings, true);
        free(items);
        free(vals);
        if (st != NULL)
            return st;
    }
    trace_acc_t *a = nr_calloc(1, sizeof(*a)); /* (large for a stack) */
    nr_kserve_trace_settings(model, put_trace_setting, a);
    Inference__TraceSettingResponse r = INFERENCE__TRACE_SETTING_RESPONSE__INIT;
    r.n_settings = a->n;
    r.settings = a->ep;
    nr_grpc_pack(&r.base, out);
    for (size_t i = 0; i < a->n; i++) {
        free(a->keys[i]);
        for (size_t k = 0; k < 2; k++)
            free(a->vals[i][k]);
    }
    free(a);
    return NULL;
}

typedef struct {
    Inference__LogSettingsResponse__SettingValue sv[6];
    Inference__LogSettingsResponse__SettingsEntry e[6], *ep[6];
    size_t n;
} log_acc_t;

static void add_log_setting(const nr_param_t *p, void *arg)
{
    log_acc_t *acc = arg;
    if (acc->n == 6)
        return;
    Inference__LogSettingsResponse__SettingValue *v = &acc->sv[acc->n];
    inference__log_settings_response__setting_value__init(v);
    if (p->type == NR_PARAM_BOOL) {
        v->parameter_choice_case =
            INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM;
        v->bool_param = p->v.b;
    } else if (p->type == NR_PARAM_UINT64) {
        v->parameter_choice_case =
            INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM;
        v->uint32_param = (uint32_t)p->v.u;
    } else {
        v->parameter_choice_case =
            INFERENCE__LOG_SETTINGS_RESPONSE__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM;
        v->string_param = (char *)p->v.s.p; /* static or the settings' own strings */
    }
    Inference__LogSettingsResponse__SettingsEntry *e = &acc->e[acc->n];
    inference__log_settings_response__settings_entry__init(e);
    e->key = (char *)p->key;
    e->value = v;
    acc->ep[acc->n] = e;
    acc->n++;
}

/* A setting of a LogSettingsRequest (a map: the last entry of a key counts). */
static bool find_log_setting(const char *key, nr_param_t *p, void *arg)
{
    const Inference__LogSettingsRequest *q = arg;
    const Inference__LogSettingsRequest__SettingValue *v = NULL;
    bool found = false;
    for (size_t i = 0; i < q->n_settings; i++)
        if (strcmp(q->settings[i]->key, key) == 0) {
            v = q->settings[i]->value;
            found = true;
        }
    switch (v ? (int)v->parameter_choice_case : 0) {
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_BOOL_PARAM:
        p->type = NR_PARAM_BOOL;
        p->v.b = v->bool_param;
        break;
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_UINT32_PARAM:
        p->type = NR_PARAM_UINT64;
        p->v.u = v->uint32_param;
        break;
    case INFERENCE__LOG_SETTINGS_REQUEST__SETTING_VALUE__PARAMETER_CHOICE_STRING_PARAM:
        p->type = NR_PARAM_STRING;
        p->v.s.p = v->string_param;
        p->v.s.n = strlen(v->string_param);
        break;
    default: break; /* no value: NR_PARAM_OTHER, refused as the wrong type */
    }
    return found;
}

static nr_status_t *log_wrong_type(const char *key, nr_param_type_t want)
{
    return nr_status_new(NR_INVALID_ARG, "expect %s for '%s'",
                         want == NR_PARAM_BOOL     ? "boolean"
                         : want == NR_PARAM_STRING ? "string"
                                                   : "int32",
                         key);
}

static nr_status_t *log_bad_format(const char *value, size_t len)
{
    return nr_status_new(NR_INVALID_ARG, "invalid argument for log_format, got: %.*s", (int)len,
                         value);
}

const nr_kserve_log_reader_t nr_grpc_log_reader = {find_log_setting, log_wrong_type,
                                                   log_bad_format};

static nr_status_t *log_settings(nr_grpc_server_t *s, const ProtobufCMessage *req, nr_buf_t *out)
{
    nr_status_t *st = nr_kserve_log_update(&nr_grpc_log_reader, (void *)req);
    if (st != NULL)
        return st;
    log_acc_t acc = {.n = 0};
    nr_kserve_log_settings(add_log_setting, &acc);
    Inference__LogSettingsResponse r = INFERENCE__LOG_SETTINGS_RESPONSE__INIT;
    r.n_settings = acc.n;
    r.settings = acc.ep;
    nr_grpc_pack(&r.base, out);
    return NULL;
}

/* ---- the table -------------------------------------------------------------------------- */

#define SVC "/inference.GRPCInferenceService/"
#define UNARY(name, msg, fn, api) \
    {SVC name, NR_GRPC_UNARY, &inference__##msg##__descriptor, fn, NR_API_##api}
#define CONTROL(name, msg, fn, api) \
    {SVC name, NR_GRPC_CONTROL, &inference__##msg##__descriptor, fn, NR_API_##api}

const nr_grpc_method_t nr_grpc_methods[] = {
    UNARY("ServerLive", server_live_request, server_live, HEALTH),
    UNARY("ServerReady", server_ready_request, server_ready, HEALTH),
    UNARY("ModelReady", model_ready_request, model_ready, HEALTH),
    UNARY("ServerMetadata", server_metadata_request, server_metadata, METADATA),
    UNARY("ModelMetadata", model_metadata_request, model_metadata, METADATA),
    {SVC "ModelInfer", NR_GRPC_INFER, NULL, NULL, NR_API_INFERENCE},
    {SVC "ModelStreamInfer", NR_GRPC_STREAM, NULL, NULL, NR_API_INFERENCE},
    UNARY("ModelConfig", model_config_request, model_config, MODEL_CONFIG),
    UNARY("ModelStatistics", model_statistics_request, model_statistics, STATISTICS),
    UNARY("RepositoryIndex", repository_index_request, repository_index, MODEL_REPOSITORY),
    CONTROL("RepositoryModelLoad", repository_model_load_request, repository_load,
            MODEL_REPOSITORY),
    CONTROL("RepositoryModelUnload", repository_model_unload_request, repository_unload,
            MODEL_REPOSITORY),
    UNARY("SystemSharedMemoryStatus", system_shared_memory_status_request, shm_status,
          SHARED_MEMORY),
    UNARY("SystemSharedMemoryRegister", system_shared_memory_register_request, shm_register,
          SHARED_MEMORY),
    UNARY("SystemSharedMemoryUnregister", system_shared_memory_unregister_request,
          shm_unregister, SHARED_MEMORY),
    UNARY("CudaSharedMemoryStatus", cuda_shared_memory_status_request, cuda_status,
          SHARED_MEMORY),
    UNARY("CudaSharedMemoryRegister", cuda_shared_memory_register_request, cuda_register,
          SHARED_MEMORY),
    UNARY("CudaSharedMemoryUnregister", cuda_shared_memory_unregister_request,
          cuda_unregister, SHARED_MEMORY),
    UNARY("TraceSetting", trace_setting_request, trace_setting, TRACE),
    UNARY("LogSettings", log_settings_request, log_settings, LOGGING),
    {"/grpc.health.v1.Health/Check", NR_GRPC_UNARY,
     &grpc__health__v1__health_check_request__descriptor, health_check, NR_API_HEALTH},
};
const size_t nr_grpc_n_methods = sizeof(nr_grpc_methods) / sizeof(nr_grpc_methods[0]);
