/* grpc_infer.c - ModelInfer: a serialized ModelInferRequest becomes the
 * core's request (nr_infer_t) as Triton's gRPC frontend reads it, and a
 * finished request becomes a ModelInferResponse (or, on a stream, a
 * ModelStreamInferResponse carrying one).
 *
 * Request: protobuf-c unpacks the message into the request's arena (raw
 * tensor bytes are copied once there, 16-byte aligned, and the backend reads
 * them in place); typed `contents` of 4- and 8-byte types are used where
 * protobuf-c left them, the others (BOOL, INT8/16, UINT8/16, BYTES) are
 * converted once. Texts and the order of the checks are Triton's
 * (infer_handler.cc): version, model, parameters, inputs, outputs.
 *
 * Response: the message without raw_output_contents is packed by protobuf-c;
 * raw_output_contents (field 6, the last) follows as our own bytes: a tag and
 * length per output, then the data. Replies of REPLY_COPY_MAX bytes of data
 * or less are copied into one buffer; in larger ones every backend output is
 * a slice over the backend's buffer (no copy) holding a reference on it (its
 * nr_hold_t), so the reply outlives the request that produced it.
 */
#include "grpc_int.h"

#include "../../common/alloc.h"
#include "../../common/varint.h"

#include <stdlib.h>
#include <string.h>

#define REPLY_COPY_MAX (64u << 10)
/* A request runs on the gRPC thread itself (no hand-off to the instance
 * thread) only if its model's mean execution is shorter than this. */
#define NR_GRPC_INLINE_MAX_NS (100u * 1000u)
#define ARENA_CHUNK 16384

static const char empty_data[1];

/* ---- request ------------------------------------------------------------------- */

static nr_param_t grpc_param(const char *key, const Inference__InferParameter *v)
{
    nr_param_t p = {.key = key, .key_len = strlen(key), .type = NR_PARAM_OTHER};
    switch (v ? (int)v->parameter_choice_case : 0) {
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM:
        p.type = NR_PARAM_BOOL;
        p.v.b = v->bool_param;
        break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM:
        p.type = NR_PARAM_INT64;
        p.v.i = v->int64_param;
        break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_UINT64_PARAM:
        p.type = NR_PARAM_UINT64;
        p.v.u = v->uint64_param;
        break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_DOUBLE_PARAM:
        p.type = NR_PARAM_DOUBLE;
        p.v.d = v->double_param;
        break;
    case INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM:
        p.type = NR_PARAM_STRING;
        p.v.s.p = v->string_param;
        p.v.s.n = strlen(v->string_param);
        break;
    default: break;
    }
    return p;
}

static nr_status_t *bad_type(const nr_param_t *p, const char *expected)
{
    return nr_status_new(NR_INVALID_ARG,
                         "invalid value type for '%.*s' parameter, expected %s.", (int)p->key_len,
                         p->key, expected);
}

nr_status_t *nr_grpc_check_param(nr_infer_t *inf, const nr_param_t *p)
{
    if (nr_param_is(p, "sequence_id")) {
        if (p->type != NR_PARAM_INT64 && p->type != NR_PARAM_STRING)
            return bad_type(p, "int64_param or string_param");
    } else if (nr_param_is(p, "sequence_start") || nr_param_is(p, "sequence_end")) {
        if (p->type != NR_PARAM_BOOL)
            return bad_type(p, "bool_param");
    } else if (nr_param_is(p, "priority")) {
        if (p->type != NR_PARAM_INT64 && p->type != NR_PARAM_UINT64)
            return bad_type(p, "int64_param or uint64_param");
        if (p->type == NR_PARAM_INT64 && p->v.i < 0)
            return nr_status_new(NR_INVALID_ARG,
                                 "invalid value for 'priority', expected value >= 0.");
    } else if (nr_param_is(p, "timeout")) {
        /* a negative one is none: Triton passes it on as a huge unsigned timeout */
        if (p->type != NR_PARAM_INT64)
            return bad_type(p, "int64_param");
    } else if (nr_param_is(p, "triton_enable_empty_final_response")) {
        if (p->type != NR_PARAM_BOOL)
            return bad_type(p, "bool_param");
    } else if (p->key_len >= 7 && memcmp(p->key, "triton_", 7) == 0) {
        return nr_status_new(NR_INVALID_ARG,
                             "parameter keys starting with 'triton_' are reserved for Triton "
                             "usage. Only the following keys starting with 'triton_' are "
                             "allowed: triton_enable_empty_final_response");
    } else if (p->type == NR_PARAM_UINT64 || p->type == NR_PARAM_OTHER) {
        /* (double_param is accepted since 2.44; the text was never updated) */
        return bad_type(p, "int64_param, bool_param, or string_param");
    }
    nr_infer_param(inf, p);
    return NULL;
}

static nr_status_t *parse_params(nr_grpc_infer_t *inf)
{
    const Inference__ModelInferRequest *msg = inf->msg;
    for (size_t i = 0; i < msg->n_parameters; i++) {
        nr_param_t p = grpc_param(msg->parameters[i]->key, msg->parameters[i]->value);
        nr_status_t *st = nr_grpc_check_param(&inf->base, &p);
        if (st != NULL)
            return st;
    }
    return NULL;
}

/* The shared_memory_* parameters of a tensor (Triton's ParseSharedMemoryParams). */
typedef struct {
    const char *region; /* NULL: none */
    uint64_t offset, byte_size;
} shm_ref_t;

/* Input and output parameter maps have the same layout (key, InferParameter). */
typedef Inference__ModelInferRequest__InferInputTensor__ParametersEntry param_entry_t;
typedef Inference__ModelInferRequest__InferRequestedOutputTensor__ParametersEntry out_entry_t;
_Static_assert(sizeof(param_entry_t) == sizeof(out_entry_t),
               "the two parameter map entries share a layout");

static const Inference__InferParameter *find(param_entry_t *const *ps, size_t n, const char *key)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(ps[i]->key, key) == 0)
            return ps[i]->value;
    return NULL;
}

static bool is_int64(const Inference__InferParameter *p)
{
    return p->parameter_choice_case == INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_INT64_PARAM;
}

static nr_status_t *shm_params(const char *tensor, param_entry_t *const *ps, size_t n,
                               shm_ref_t *out)
{
    const Inference__InferParameter *r = find(ps, n, "shared_memory_region");
    const Inference__InferParameter *o = find(ps, n, "shared_memory_offset");
    const Inference__InferParameter *b = find(ps, n, "shared_memory_byte_size");
    out->region = NULL;
    out->offset = out->byte_size = 0;
    if (r != NULL) {
        if (r->parameter_choice_case !=
            INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_STRING_PARAM)
            return nr_status_new(NR_INVALID_ARG,
                                 "invalid value type for 'shared_memory_region' parameter for "
                                 "tensor '%s', expected string_param.",
                                 tensor);
        out->region = r->string_param;
    }
    const struct { const char *k; const Inference__InferParameter *v; uint64_t *dst; } f[] = {
        {"shared_memory_offset", o, &out->offset},
        {"shared_memory_byte_size", b, &out->byte_size},
    };
    for (size_t i = 0; i < 2; i++) {
        if (f[i].v == NULL)
            continue;
        if (r == NULL)
            return nr_status_new(NR_INVALID_ARG,
                                 "'%s' can not be specified without 'shared_memory_region' "
                                 "parameter for tensor '%s'",
                                 f[i].k, tensor);
        if (!is_int64(f[i].v))
            return nr_status_new(NR_INVALID_ARG,
                                 "invalid value type for '%s' parameter for tensor '%s', "
                                 "expected int64_param.",
                                 f[i].k, tensor);
        *f[i].dst = (uint64_t)f[i].v->int64_param; /* Triton casts to size_t */
    }
    if (r != NULL && b == NULL)
        return nr_status_new(NR_INVALID_ARG,
                             "'shared_memory_byte_size' must be specified along with "
                             "'shared_memory_region' parameter for tensor '%s'",
                             tensor);
    return NULL;
}

static const char *dtype_name(nr_dtype_t dt)
{
    const char *s = nr_dtype_kserve_name(dt);
    return s ? s : "<invalid>";
}

/* One typed field: its elements, their count and what they are as a tensor. */
typedef struct {
    size_t n;
    nr_dtype_t dt;
    const void *v;
} typed_t;

/* Narrows int32/uint32 elements to their low bytes (INT8/16, UINT8/16);
 * NULL when the memory cannot be had. */
static void *narrow(nr_arena_t *a, const void *v, size_t n, size_t es)
{
    char *out = nr_arena_try_alloc(a, n * es);
    if (out == NULL)
        return NULL;
    for (size_t i = 0; i < n; i++)
        memcpy(out + i * es, (const char *)v + i * 4, es); /* little-endian host */
    return out;
}

static nr_status_t *no_memory(size_t size, const char *name)
{
    return nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes for input tensor '%s'",
                         size, name);
}

static nr_status_t *typed_input(nr_grpc_infer_t *inf, const char *name, nr_dtype_t declared,
                                const Inference__InferTensorContents *c, const void **data,
                                size_t *size)
{
    const char *model = inf->base.model->name;
    nr_dtype_t int_t = declared == NR_TYPE_INT8 || declared == NR_TYPE_INT16 ? declared
                                                                              : NR_TYPE_INT32;
    nr_dtype_t uint_t = declared == NR_TYPE_UINT8 || declared == NR_TYPE_UINT16 ? declared
                                                                                : NR_TYPE_UINT32;
    const typed_t fields[] = {
        {c->n_bool_contents, NR_TYPE_BOOL, c->bool_contents},
        {c->n_int_contents, int_t, c->int_contents},
        {c->n_int64_contents, NR_TYPE_INT64, c->int64_contents},
        {c->n_uint_contents, uint_t, c->uint_contents},
        {c->n_uint64_contents, NR_TYPE_UINT64, c->uint64_contents},
        {c->n_fp32_contents, NR_TYPE_FP32, c->fp32_contents},
        {c->n_fp64_contents, NR_TYPE_FP64, c->fp64_contents},
        {c->n_bytes_contents, NR_TYPE_STRING, c->bytes_contents},
    };
    *data = empty_data;
    *size = 0;
    for (size_t f = 0; f < sizeof(fields) / sizeof(fields[0]); f++) {
        const typed_t *t = &fields[f];
        if (t->n == 0)
            continue;
        if (*size != 0)
            return nr_status_new(NR_INVALID_ARG,
                                 "unexpected explicit tensor data for input tensor '%s' for "
                                 "model '%s', binary data was already supplied.",
                                 name, model);
        if (t->dt != declared)
            return nr_status_new(NR_INVALID_ARG,
                                 "unexpected explicit tensor data for input tensor '%s' for "
                                 "model '%s' of type '%s', expected datatype '%s'",
                                 name, model, dtype_name(t->dt), dtype_name(declared));
        size_t es = nr_dtype_size(t->dt);
        if (t->dt == NR_TYPE_BOOL) {
            uint8_t *b = nr_arena_try_alloc(&inf->arena, t->n);
            if (b == NULL)
                return no_memory(t->n, name);
            for (size_t i = 0; i < t->n; i++)
                b[i] = c->bool_contents[i] != 0;
            *data = b;
        } else if (t->dt == NR_TYPE_STRING) {
            size_t total = 0;
            for (size_t i = 0; i < t->n; i++)
                total += 4 + c->bytes_contents[i].len;
            char *p = nr_arena_try_alloc(&inf->arena, total);
            if (p == NULL)
                return no_memory(total, name);
            *data = p;
            for (size_t i = 0; i < t->n; i++) {
                uint32_t l = (uint32_t)c->bytes_contents[i].len;
                memcpy(p, &l, 4);
                if (l)
                    memcpy(p + 4, c->bytes_contents[i].data, l);
                p += 4 + l;
            }
            *size = total;
            continue;
        } else if (es < 4) {
            if ((*data = narrow(&inf->arena, t->v, t->n, es)) == NULL)
                return no_memory(t->n * es, name);
        } else {
            *data = t->v;
        }
        *size = t->n * es;
    }
    return NULL;
}

static nr_status_t *parse_inputs(nr_grpc_infer_t *inf)
{
    const Inference__ModelInferRequest *msg = inf->msg;
    const char *model = inf->base.model->name;
    size_t raw = 0;
    for (size_t i = 0; i < msg->n_inputs; i++) {
        const Inference__ModelInferRequest__InferInputTensor *in = msg->inputs[i];
        nr_dtype_t dt = nr_dtype_from_kserve(in->datatype, strlen(in->datatype));
        shm_ref_t shm;
        nr_status_t *st = shm_params(in->name, in->parameters, in->n_parameters, &shm);
        if (st != NULL)
            return st;
        const void *data = empty_data;
        size_t size = 0;
        if (shm.region != NULL) {
            if (in->contents != NULL)
                return nr_status_new(NR_INVALID_ARG,
                                     "unexpected 'content' provided when using shared memory "
                                     "for input tensor '%s' for model '%s'",
                                     in->name, model);
            st = nr_infer_shm_input(&inf->base, shm.region, strlen(shm.region), shm.offset,
                                    shm.byte_size, &data, &size);
        } else if (in->contents != NULL && msg->n_raw_input_contents > 0) {
            return nr_status_new(NR_INVALID_ARG,
                                 "contents field must not be specified when using "
                                 "raw_input_contents for '%s' for model '%s'",
                                 in->name, model);
        } else if (in->contents != NULL) {
            st = typed_input(inf, in->name, dt, in->contents, &data, &size);
        } else if (raw < msg->n_raw_input_contents) {
            const ProtobufCBinaryData *b = &msg->raw_input_contents[raw++];
            if (b->len > 0)
                data = b->data;
            size = b->len;
        } else {
            return nr_status_new(NR_INVALID_ARG,
                                 "unable to find data for input tensor '%s' for model '%s' in "
                                 "request.",
                                 in->name, model);
        }
        if (st == NULL)
            st = nr_req_add_input(inf->base.req, in->name, strlen(in->name), dt, in->shape,
                                  in->n_shape, data, size);
        if (st != NULL)
            return st;
    }
    return NULL; /* raw entries left over are ignored, as Triton ignores them */
}

static nr_status_t *parse_outputs(nr_grpc_infer_t *inf)
{
    const Inference__ModelInferRequest *msg = inf->msg;
    for (size_t i = 0; i < msg->n_outputs; i++) {
        const Inference__ModelInferRequest__InferRequestedOutputTensor *o = msg->outputs[i];
        int idx;
        nr_status_t *st = nr_infer_output(&inf->base, o->name, strlen(o->name), &idx);
        shm_ref_t shm;
        if (st == NULL)
            st = shm_params(o->name, (param_entry_t *const *)o->parameters, o->n_parameters,
                            &shm);
        if (st != NULL)
            return st;
        const Inference__InferParameter *cls =
            find((param_entry_t *const *)o->parameters, o->n_parameters, "classification");
        if (cls != NULL) {
            if (!is_int64(cls))
                return nr_status_new(NR_INVALID_ARG, "invalid value type for 'classification' "
                                                     "parameter, expected int64_param");
            if (cls->int64_param <= 0)
                return nr_status_new(NR_INVALID_ARG, "invalid value for 'classification' "
                                                     "parameter, expected >= 0");
            if (shm.region != NULL)
                return nr_status_new(NR_INVALID_ARG, "output can't set both "
                                                     "'shared_memory_region' and "
                                                     "'classification'");
            nr_infer_output_classify(&inf->base, idx, (uint64_t)cls->int64_param);
        }
        if (shm.region != NULL &&
            (st = nr_infer_output_shm(&inf->base, idx, shm.region, strlen(shm.region),
                                      shm.offset, shm.byte_size)) != NULL)
            return st;
    }
    return NULL;
}

static void done(nr_req_t *req, void *arg)
{
    nr_grpc_infer_t *inf = arg;
    (void)req;
    inf->on_done(inf);
}

nr_status_t *nr_grpc_infer_parse(nr_server_t *core, const uint8_t *data, size_t len,
                                 bool stream, nr_grpc_infer_t **out)
{
    nr_grpc_infer_t *inf = nr_calloc(1, sizeof(*inf));
    inf->arena = nr_arena_init(ARENA_CHUNK);
    *out = inf;
    nr_grpc_alloc_t alloc = {&inf->arena, 0};
    ProtobufCAllocator al = nr_grpc_arena_allocator(&alloc); /* goes with the request */
    inf->msg = inference__model_infer_request__unpack(&al, len, data);
    if (inf->msg == NULL && alloc.failed > 0)
        return nr_status_new(NR_UNAVAILABLE, "unable to allocate %zu bytes to unpack the "
                                             "ModelInferRequest message",
                             alloc.failed);
    if (inf->msg == NULL)
        return nr_status_new(NR_INVALID_ARG, "failed to parse the ModelInferRequest message");
    const Inference__ModelInferRequest *msg = inf->msg;
    int64_t version;
    nr_model_t *m = NULL;
    nr_status_t *st = nr_kserve_parse_version(msg->model_version, strlen(msg->model_version),
                                              NR_VERSION_STOL, &version);
    if (st == NULL)
        st = nr_kserve_model(core, msg->model_name, strlen(msg->model_name), version, &m);
    if (st != NULL)
        return st;
    nr_infer_init(&inf->base, core, m, inf);
    if (!stream && m->cfg->decoupled) /* before the request is read, as Triton */
        return nr_status_new(NR_UNSUPPORTED, "ModelInfer RPC doesn't support models with "
                             "decoupled transaction policy");
    if (msg->id[0] != '\0')
        st = nr_req_set_id(inf->base.req, msg->id, strlen(msg->id));
    if (st == NULL && (st = parse_params(inf)) == NULL && (st = parse_inputs(inf)) == NULL)
        st = parse_outputs(inf);
    return st;
}

void nr_grpc_infer_headers(nr_grpc_infer_t *inf, const nr_grpc_call_t *c)
{
    const nr_header_fwd_t *fwd = c->srv->fwd;
    for (size_t i = 0; nr_trace_armed() && i < c->md.count; i++) {
        const grpc_metadata *m = &c->md.metadata[i];
        if (GRPC_SLICE_LENGTH(m->key) == 11 &&
            !memcmp(GRPC_SLICE_START_PTR(m->key), "traceparent", 11))
            nr_infer_traceparent(&inf->base, (const char *)GRPC_SLICE_START_PTR(m->value),
                                 GRPC_SLICE_LENGTH(m->value));
    }
    for (size_t i = 0; fwd != NULL && i < c->md.count; i++) {
        const grpc_metadata *m = &c->md.metadata[i];
        nr_infer_header(&inf->base, fwd, (const char *)GRPC_SLICE_START_PTR(m->key),
                        GRPC_SLICE_LENGTH(m->key), (const char *)GRPC_SLICE_START_PTR(m->value),
                        GRPC_SLICE_LENGTH(m->value));
    }
}

void nr_grpc_infer_trace_recv(nr_grpc_infer_t *inf, uint64_t start_ns, uint64_t end_ns)
{
    inf->base.proto = NR_TRACE_GRPC;
    inf->base.t_recv_ns[0] = start_ns;
    inf->base.t_recv_ns[1] = end_ns;
}

static void response(nr_req_t *req, const nr_status_t *err, unsigned flags, void *arg)
{
    nr_grpc_infer_t *inf = arg;
    inf->on_response(inf, err, flags);
}

nr_status_t *nr_grpc_infer_submit(nr_grpc_infer_t *inf)
{
    /* one thread serves every gRPC client: run here only what is quick */
    inf->base.req->inline_max_ns = NR_GRPC_INLINE_MAX_NS;
    if (inf->on_response != NULL)
        inf->base.req->on_response = response;
    return nr_infer_submit(&inf->base, done, inf);
}

void nr_grpc_infer_free(nr_grpc_infer_t *inf)
{
    if (inf == NULL)
        return;
    if (inf->base.req != NULL) {
        nr_infer_trace_send(&inf->base, true); /* (its last reply is queued by now) */
        nr_infer_release(&inf->base);
    }
    nr_arena_free(&inf->arena);
    free(inf);
}

/* ---- response ---------------------------------------------------------------------- */

/* The tag of a length-delimited field (numbers below 16: one byte) and its length. */
static void put_len_prefix(nr_buf_t *b, unsigned field, size_t len)
{
    uint8_t tmp[1 + NR_VARINT_MAX];
    tmp[0] = (uint8_t)(field << 3 | 2);
    size_t n = 1 + nr_varint_put(tmp + 1, len);
    nr_buf_append(b, tmp, n);
}

#define RAW_OUTPUT_FIELD 6    /* ModelInferResponse.raw_output_contents */
#define STREAM_INFER_FIELD 2  /* ModelStreamInferResponse.infer_response */

/* triton_final_response in r's parameters, as Triton marks every response on a stream (true
 * for every response of a non-decoupled model); f must outlive r. */
typedef struct {
    Inference__ModelInferResponse__ParametersEntry e, *ep;
    Inference__InferParameter v;
} final_param_t;

static void set_final_response(Inference__ModelInferResponse *r, final_param_t *f, bool final)
{
    inference__infer_parameter__init(&f->v);
    f->v.parameter_choice_case = INFERENCE__INFER_PARAMETER__PARAMETER_CHOICE_BOOL_PARAM;
    f->v.bool_param = final;
    inference__model_infer_response__parameters_entry__init(&f->e);
    f->e.key = "triton_final_response";
    f->e.value = &f->v;
    f->ep = &f->e;
    r->n_parameters = 1;
    r->parameters = &f->ep;
}

static void drop_hold(void *hold)
{
    nr_hold_unref(hold); /* gRPC has written it: the backend's buffer may go */
}

nr_status_t *nr_grpc_infer_reply(nr_grpc_infer_t *inf, bool stream, bool final,
                                 grpc_byte_buffer **out)
{
    *out = NULL;
    nr_infer_trace_send(&inf->base, false);
    const nr_infer_out_t *outs;
    size_t n;
    nr_status_t *st = nr_infer_outputs(&inf->base, &outs, &n);
    if (st != NULL)
        return st;
    const nr_model_t *m = inf->base.model;
    const nr_req_t *req = inf->base.req;
    Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    r.model_name = (char *)m->name;
    r.model_version = (char *)m->version_str;
    if (req->id != NULL)
        r.id = req->id;
    final_param_t fp;
    if (stream)
        set_final_response(&r, &fp, final);
    Inference__ModelInferResponse__InferOutputTensor *ot = nr_calloc(n ? n : 1, sizeof(*ot));
    Inference__ModelInferResponse__InferOutputTensor **op = nr_calloc(n ? n : 1, sizeof(*op));
    size_t data_bytes = 0, raw_bytes = 0;
    for (size_t i = 0; i < n; i++) {
        const nr_tensor_t *t = outs[i].t;
        inference__model_infer_response__infer_output_tensor__init(&ot[i]);
        ot[i].name = (char *)outs[i].name;
        ot[i].datatype = (char *)dtype_name(t->dtype);
        ot[i].n_shape = t->ndim;
        ot[i].shape = (int64_t *)t->dims;
        op[i] = &ot[i];
        size_t len = outs[i].in_shm ? 0 : t->size; /* written into its region: empty */
        data_bytes += len;
        raw_bytes += 1 + nr_varint_size(len) + len;
    }
    r.n_outputs = n;
    r.outputs = op;
    size_t hdr = protobuf_c_message_get_packed_size(&r.base);
    nr_buf_t b;
    nr_buf_init(&b);
    bool copy = data_bytes <= REPLY_COPY_MAX; /* else: slices where a hold keeps the data */
    nr_buf_reserve(&b, 16 + hdr + (copy ? raw_bytes : 16 * n));
    if (stream) /* a ModelStreamInferResponse around it */
        put_len_prefix(&b, STREAM_INFER_FIELD, hdr + raw_bytes);
    protobuf_c_message_pack(&r.base, (uint8_t *)b.data + b.len);
    b.len += hdr;
    free(op);
    free(ot);
    if (copy) {
        for (size_t i = 0; i < n; i++) {
            size_t len = outs[i].in_shm ? 0 : outs[i].t->size;
            put_len_prefix(&b, RAW_OUTPUT_FIELD, len);
            if (len)
                nr_buf_append(&b, outs[i].t->data, len);
        }
        *out = nr_grpc_buffer_take(&b);
        nr_buf_free(&b);
        return NULL;
    }
    /* [header + first tag] [data] [tag] [data] ...: the tags are copied, the data not */
    grpc_slice *sl = nr_malloc((2 * n + 1) * sizeof(grpc_slice));
    size_t ns = 0;
    for (size_t i = 0; i < n; i++) {
        const nr_tensor_t *t = outs[i].t;
        size_t len = outs[i].in_shm ? 0 : t->size;
        put_len_prefix(&b, RAW_OUTPUT_FIELD, len);
        if (len == 0)
            continue;
        if (t->hold == NULL) { /* request-owned (classification): copied */
            nr_buf_append(&b, t->data, len);
            continue;
        }
        sl[ns++] = grpc_slice_from_copied_buffer(b.data, b.len);
        nr_buf_reset(&b);
        nr_hold_ref(t->hold);
        sl[ns++] = nr_grpc_slice_lend((void *)t->data, len, drop_hold, t->hold);
    }
    if (b.len > 0)
        sl[ns++] = grpc_slice_from_copied_buffer(b.data, b.len);
    nr_buf_free(&b);
    *out = grpc_raw_byte_buffer_create(sl, ns);
    for (size_t i = 0; i < ns; i++)
        grpc_slice_unref(sl[i]);
    free(sl);
    return NULL;
}

static grpc_byte_buffer *stream_message(Inference__ModelInferResponse *r, const char *error)
{
    Inference__ModelStreamInferResponse sr = INFERENCE__MODEL_STREAM_INFER_RESPONSE__INIT;
    sr.error_message = (char *)error;
    sr.infer_response = r;
    nr_buf_t b;
    nr_buf_init(&b);
    nr_grpc_pack(&sr.base, &b);
    grpc_byte_buffer *bb = nr_grpc_buffer_take(&b);
    nr_buf_free(&b);
    return bb;
}

grpc_byte_buffer *nr_grpc_stream_error(const nr_grpc_infer_t *inf, bool issued, bool final,
                                       const nr_status_t *st)
{
    const Inference__ModelInferRequest *msg = inf ? inf->msg : NULL;
    Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    final_param_t fp;
    if (msg != NULL) {
        r.id = msg->id;
        if (issued) { /* as the request named them */
            r.model_name = msg->model_name;
            r.model_version = msg->model_version;
            set_final_response(&r, &fp, final);
        }
    }
    return stream_message(&r, nr_status_msg(st));
}

grpc_byte_buffer *nr_grpc_stream_empty_final(const nr_grpc_infer_t *inf)
{
    Inference__ModelInferResponse r = INFERENCE__MODEL_INFER_RESPONSE__INIT;
    final_param_t fp;
    r.id = inf->msg->id; /* as the request named them */
    r.model_name = inf->msg->model_name;
    r.model_version = inf->msg->model_version;
    set_final_response(&r, &fp, true);
    return stream_message(&r, "");
}

/* ---- unary ModelInfer ------------------------------------------------------------------ */

static void unary_done(nr_grpc_infer_t *inf)
{
    nr_grpc_call_t *c = inf->owner;
    grpc_byte_buffer *bb;
    nr_status_t *st = nr_grpc_infer_reply(inf, false, true, &bb);
    nr_grpc_finish(c, bb, st, true);
    nr_grpc_infer_free(inf); /* the reply's slices hold what they point into */
}

void nr_grpc_infer_start(nr_grpc_call_t *c)
{
    uint64_t t_read_end = c->t_wait_ns ? nr_now_ns() : 0;
    grpc_slice in;
    nr_status_t *st = nr_grpc_payload(c->payload, &in);
    nr_grpc_infer_t *inf = NULL;
    if (st == NULL)
        st = nr_grpc_infer_parse(c->srv->core, GRPC_SLICE_START_PTR(in), GRPC_SLICE_LENGTH(in),
                                 false, &inf);
    grpc_slice_unref(in);
    grpc_byte_buffer_destroy(c->payload); /* everything was copied out of it */
    c->payload = NULL;
    if (st == NULL) {
        nr_grpc_infer_headers(inf, c);
        nr_grpc_infer_trace_recv(inf, c->t_wait_ns, t_read_end);
        inf->owner = c;
        inf->on_done = unary_done;
        /* a model that may stop early when the client has gone is told (it costs an event) */
        if (nr_model_sees_cancellation(inf->base.model) && nr_grpc_watch_close(c))
            inf->base.req->cancelled = &c->gone;
        st = nr_grpc_infer_submit(inf);
        if (st == NULL)
            return; /* unary_done answers, maybe already has */
    }
    nr_grpc_infer_free(inf);
    nr_grpc_finish(c, NULL, st, false);
}
