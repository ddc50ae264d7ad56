/* py_backend.c - the "python" backend: Triton's model.py models (class TritonPythonModel), each
 * instance in a stub process of its own (py_stub.c).
 *
 * autocomplete: when model.py defines auto_complete_config, a short-lived stub runs it on the
 *     config and the config it returns replaces ours (Triton does the same at load).
 * model_load: finds the interpreter (the model's EXECUTION_ENV_PATH, else the machine's python3).
 * instance_create: starts the instance's stub and initializes the model in it (initialize(args)),
 *     bounded by stub-timeout-seconds (--backend-config=python,...; 30 s).
 * execute: writes the batch into the stub's batch file, waits for its responses in the shared
 *     file and copies each request's outputs out (one buffer per request). A stub that dies
 *     fails the batch it held (and the requests it still answers) and is started again for
 *     the next one. A decoupled model's requests may stay open after execute returns, as on
 *     Triton: each has a slot (its name on the wire) and the batch file's region it was
 *     written to is kept until every one of them has sent its final flag.
 *
 * Ownership: the model state borrows the config and owns its paths; an instance owns its stub.
 */
#include "py_int.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"
#include "../../common/clock.h"
#include "../../common/log.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define NR_PY_INIT_TIMEOUT_S 30 /* Triton's stub-timeout-seconds */
#define NR_PY_STOP_TIMEOUT_MS 5000


static size_t pad8(size_t n) { return (n + 7) & ~(size_t)7; }
static size_t align(size_t n) { return (n + NR_PY_ALIGN - 1) & ~(size_t)(NR_PY_ALIGN - 1); }

/* ---- the interpreter ------------------------------------------------------------------------ */

static const char *param(const nr_model_config_t *cfg, const char *key)
{
    for (size_t i = 0; i < cfg->n_parameters; i++)
        if (cfg->parameters[i].key && strcmp(cfg->parameters[i].key, key) == 0)
            return cfg->parameters[i].value;
    return NULL;
}

static nr_status_t *interpreter(const nr_model_config_t *cfg, const char *model_dir, char **out)
{
    return nr_py_env_python(param(cfg, "EXECUTION_ENV_PATH"), model_dir, out);
}

/* One --backend-config=python,<key>=<value> as Triton reads it (std::stol, then its bound). */
static nr_status_t *setting(const char *key, long min, long def, const char *too_small, long *out)
{
    const char *v = nr_backend_config("python", key);
    *out = def;
    if (v == NULL)
        return NULL;
    char *end;
    errno = 0;
    long n = strtol(v, &end, 10);
    if (end == v || errno == ERANGE)
        return nr_status_new(NR_INVALID_ARG, "stol");
    if (n < min)
        return nr_status_new(NR_INVALID_ARG, "%s", too_small);
    *out = n;
    return NULL;
}

static nr_status_t *settings(py_settings_t *s)
{
    long def, growth, timeout;
    nr_status_t *st = setting("shm-default-byte-size", NR_PY_SHM_DEFAULT, NR_PY_SHM_DEFAULT,
                              "shm-default-byte-size can't be smaller than 4 MiBs", &def);
    if (st == NULL)
        st = setting("shm-growth-byte-size", 1, NR_PY_SHM_DEFAULT,
                     "shm-growth-byte-size can't be smaller than or equal to zero.", &growth);
    if (st == NULL)
        st = setting("stub-timeout-seconds", 1, NR_PY_INIT_TIMEOUT_S,
                     "stub-timeout-seconds can't be smaller than or equal to zero.", &timeout);
    if (st != NULL)
        return st;
    s->shm_default = (size_t)def;
    s->shm_growth = (size_t)growth;
    s->timeout_ms = timeout > INT32_MAX / 1000 ? INT32_MAX : (int)timeout * 1000;
    return NULL;
}

/* ---- autocomplete --------------------------------------------------------------------------- */

/* Does model.py mention auto_complete_config at all? (Starting Python costs ~50 ms.) */
static bool mentions_autocomplete(const char *model_path)
{
    nr_buf_t b;
    nr_buf_init(&b);
    bool found = nr_buf_read_file(&b, model_path, 64u << 20) == 0 &&
                 memmem(b.data, b.len, "auto_complete_config", 20) != NULL;
    nr_buf_free(&b);
    return found;
}

/* Writes text into the stub's shared file (before the stub writes anything there), after its
 * head: at NR_PY_REPLY_HEAD. */
static nr_status_t *put_text(nr_py_stub_t *s, const char *text, size_t len)
{
    nr_status_t *st = nr_py_stub_reserve(s, NR_PY_REPLY_HEAD + len + NR_PY_ALIGN);
    if (st == NULL)
        memcpy(s->shm + NR_PY_REPLY_HEAD, text, len);
    return st;
}

static nr_status_t *py_autocomplete(nr_model_config_t *cfg, const char *model_path)
{
    if (!mentions_autocomplete(model_path))
        return NULL;
    char *python = NULL;
    py_settings_t set;
    nr_status_t *st = settings(&set);
    if (st == NULL)
        st = interpreter(cfg, "", &python);
    if (st != NULL)
        return st;
    nr_py_stub_t s = {.name = nr_asprintf("%s (auto-complete)", cfg->name ? cfg->name : ""),
                      .shm_default = set.shm_default, .shm_growth = set.shm_growth};
    /* the stub's own name is the model's, as Triton names its auto-complete stub */
    st = nr_py_stub_start(&s, python, "autocomplete", cfg->name ? cfg->name : "");
    nr_buf_t b;
    nr_buf_init(&b);
    if (st == NULL) {
        size_t len = 0;
        char *json = nr_cfg_to_json(cfg, &len);
        nr_buf_puts(&b, "{\"config\":");
        nr_buf_append(&b, json, len);
        nr_buf_puts(&b, ",\"model_path\":");
        nr_buf_json_str(&b, model_path, strlen(model_path));
        nr_buf_puts(&b, "}");
        free(json);
        st = put_text(&s, b.data, b.len);
    }
    if (st == NULL)
        st = nr_py_stub_send(&s, NR_PY_AUTOCOMPLETE, 0, NR_PY_REPLY_HEAD, b.len);
    nr_py_hdr_t h;
    if (st == NULL)
        st = nr_py_stub_wait(&s, &h, set.timeout_ms, "auto_complete_config");
    if (st == NULL && h.kind == NR_PY_ERROR)
        st = nr_status_new(NR_INTERNAL, "%s", nr_py_stub_text(&s, &h));
    if (st == NULL && h.kind != NR_PY_CONFIG)
        st = nr_status_new(NR_INTERNAL, "the Python stub of '%s' answered %u to auto-complete",
                           cfg->name, h.kind);
    if (st == NULL) {
        nr_model_config_t *done = NULL;
        st = nr_cfg_parse_json(s.shm + h.off, h.len, &done);
        if (st != NULL) {
            nr_status_t *w = nr_status_new(NR_INVALID_ARG, "auto_complete_config of '%s' "
                                           "returned an invalid config: %s", cfg->name, st->msg);
            nr_status_free(st);
            st = w;
        } else {
            nr_model_config_t tmp = *cfg;
            *cfg = *done;
            *done = tmp;
            nr_cfg_free(done);
        }
    }
    nr_buf_free(&b);
    nr_py_stub_stop(&s, 0);
    free(s.name);
    free(python);
    return st;
}

/* ---- model ---------------------------------------------------------------------------------- */

static void py_model_unload(void *state)
{
    py_model_t *m = state;
    if (m == NULL)
        return;
    free(m->python);
    free(m->model_path);
    free(m->model_dir);
    free(m->version);
    free(m->config_json);
    free(m);
}

static nr_status_t *py_model_load(const nr_model_config_t *cfg, const char *model_dir,
                                  const char *model_path, void **state)
{
    struct stat sb;
    if (stat(model_path, &sb) != 0 || !S_ISREG(sb.st_mode))
        return nr_status_new(NR_INVALID_ARG, "unable to find the Python model file '%s'",
                             model_path);
    py_model_t *m = nr_calloc(1, sizeof(*m));
    m->cfg = cfg;
    nr_status_t *st = settings(&m->settings);
    if (st == NULL)
        st = interpreter(cfg, model_dir, &m->python);
    if (st != NULL) {
        py_model_unload(m);
        return st;
    }
    m->model_path = nr_strdup(model_path);
    m->model_dir = nr_strdup(model_dir);
    /* the version is the directory model.py sits in */
    const char *end = strrchr(model_path, '/'), *start = end;
    while (start > model_path && start[-1] != '/')
        start--;
    m->version = end ? nr_asprintf("%.*s", (int)(end - start), start) : nr_strdup("1");
    size_t len = 0;
    m->config_json = nr_cfg_to_json(cfg, &len);
    *state = m;
    return NULL;
}

/* ---- instances ------------------------------------------------------------------------------ */

static const char *kind_name(int kind)
{
    return kind == NR_KIND_GPU ? "GPU" : kind == NR_KIND_MODEL ? "MODEL" : "CPU";
}

/* Ends the instance's stub (finalize first when timeout_ms > 0) and the metrics it made. The
 * caller owns the socket (py_side_own). */
static void stub_down(py_inst_t *in, int timeout_ms)
{
    in->up = false;
    pthread_mutex_lock(&in->mu); /* answers to its requests still to come are dropped */
    in->gen++;
    pthread_mutex_unlock(&in->mu);
    nr_py_stub_stop(&in->stub, timeout_ms);
    py_fail_open(in);
    py_side_forget(in);
}

/* Starts the stub and runs initialize(args) in it; the caller owns the socket. */
static nr_status_t *inst_start(py_inst_t *in)
{
    py_model_t *m = in->m;
    nr_status_t *st = nr_py_stub_start(&in->stub, m->python, "instance", in->name);
    if (st != NULL)
        return st;
    in->consumed = 0; /* a new stub counts its messages from 0 (py_int.h) */
    in->n_regions = 0;
    pthread_mutex_lock(&in->mu);
    in->reply_used = NR_PY_REPLY_HEAD;
    in->replies = 0;
    pthread_mutex_unlock(&in->mu);
    nr_buf_t b;
    nr_buf_init(&b);
    char dev[16];
    snprintf(dev, sizeof(dev), "%d", in->info.device_id);
    const struct { const char *k, *v; } args[] = {
        {"model_config", m->config_json},   {"model_instance_kind", kind_name(in->info.kind)},
        {"model_instance_name", in->name},  {"model_instance_device_id", dev},
        {"model_repository", m->model_dir}, {"model_version", m->version},
        {"model_name", m->cfg->name},
    };
    nr_buf_puts(&b, "{\"args\":{");
    for (size_t i = 0; i < sizeof(args) / sizeof(args[0]); i++) {
        if (i)
            nr_buf_puts(&b, ",");
        nr_buf_json_str(&b, args[i].k, strlen(args[i].k));
        nr_buf_puts(&b, ":");
        nr_buf_json_str(&b, args[i].v, strlen(args[i].v));
    }
    nr_buf_puts(&b, "},\"model_path\":");
    nr_buf_json_str(&b, m->model_path, strlen(m->model_path));
    nr_buf_puts(&b, "}");
    st = put_text(&in->stub, b.data, b.len);
    if (st == NULL)
        st = nr_py_stub_send(&in->stub, NR_PY_INIT, 0, NR_PY_REPLY_HEAD, b.len);
    nr_buf_free(&b);
    nr_py_hdr_t h;
    if (st == NULL)
        st = nr_py_stub_wait(&in->stub, &h, m->settings.timeout_ms, "initialize");
    if (st == NULL && h.kind == NR_PY_ERROR)
        st = nr_status_new(NR_INTERNAL, "%s", nr_py_stub_text(&in->stub, &h));
    if (st != NULL) {
        stub_down(in, 0);
        return st;
    }
    in->up = true;
    py_side_attach(in);
    return NULL;
}

static nr_status_t *py_instance_create(void *model_state, const nr_instance_info_t *info,
                                       void **inst_state)
{
    py_inst_t *in = nr_calloc(1, sizeof(*in));
    in->m = model_state;
    in->info = *info;
    pthread_mutex_init(&in->mu, NULL);
    pthread_cond_init(&in->idle, NULL);
    pthread_cond_init(&in->handoff, NULL);
    in->ep = in->wake = -1;
    in->owned = true; /* the loading thread reads until the listener starts */
    in->name = nr_strdup(info->name);
    in->stub.name = in->name;
    in->stub.shm_default = in->m->settings.shm_default;
    in->stub.shm_growth = in->m->settings.shm_growth;
    in->stub.side = py_side_message;
    in->stub.side_arg = in;
    NR_LOG_INFO("TRITONBACKEND_ModelInstanceInitialize: %s (%s device %d)", in->name,
                kind_name(info->kind), info->device_id);
    nr_status_t *st = inst_start(in);
    if (st == NULL) {
        st = py_side_start(in);
        if (st != NULL)
            stub_down(in, NR_PY_STOP_TIMEOUT_MS);
    }
    if (st != NULL) {
        pthread_mutex_destroy(&in->mu);
        pthread_cond_destroy(&in->idle);
        pthread_cond_destroy(&in->handoff);
        free(in->name);
        free(in);
        return st;
    }
    py_side_release(in);
    *inst_state = in;
    return NULL;
}

static void py_instance_destroy(void *state)
{
    py_inst_t *in = state;
    if (in == NULL)
        return;
    py_side_own(in);
    py_side_stop(in);
    stub_down(in, in->up ? NR_PY_STOP_TIMEOUT_MS : 0);
    pthread_mutex_lock(&in->mu); /* the requests the model made end (their answers dropped) */
    while (in->outstanding > 0)
        pthread_cond_wait(&in->idle, &in->mu);
    pthread_mutex_unlock(&in->mu);
    pthread_mutex_destroy(&in->mu);
    pthread_cond_destroy(&in->idle);
    pthread_cond_destroy(&in->handoff);
    free(in->slots);
    free(in->regions);
    free(in->name);
    free(in);
}

/* ---- the requests the stub holds: slots, and the batch file's regions they read ----------- */

enum { SENT_ONE = 1, SENT_FINAL = 2 }; /* a request's sender's state */

typedef struct py_slot_s {
    nr_batch_item_t *it; /* NULL: free */
    size_t region;       /* the offset of the batch it came in */
    uint8_t sent;        /* SENT_* */
    bool later;          /* its batch's execute has returned (item.later) */
} py_slot_t;

typedef struct py_region_s {
    size_t off, end;
    uint32_t open; /* requests of it answered later, not ended yet */
} py_region_t;

static uint32_t slot_take(py_inst_t *in, nr_batch_item_t *it, size_t region)
{
    uint32_t i = in->free_hint;
    while (i < in->n_slots && in->slots[i].it != NULL)
        i++;
    if (i == in->n_slots) {
        in->slots = nr_grow(in->slots, in->n_slots, sizeof(py_slot_t));
        i = in->n_slots++;
    }
    in->slots[i] = (py_slot_t){.it = it, .region = region};
    in->free_hint = i + 1;
    return i;
}

static void region_drop(py_inst_t *in, size_t k)
{
    in->regions[k] = in->regions[--in->n_regions];
}

static void slot_free(py_inst_t *in, uint32_t i)
{
    py_slot_t *sl = &in->slots[i];
    if (sl->later) {
        in->n_later--;
        for (size_t k = 0; k < in->n_regions; k++)
            if (in->regions[k].off == sl->region && --in->regions[k].open == 0) {
                region_drop(in, k);
                break;
            }
    }
    *sl = (py_slot_t){0};
    if (i < in->free_hint)
        in->free_hint = i;
}

/* Where a batch of `size` bytes goes in the batch file: the lowest place no open request's
 * region overlaps (offset 0 while none is open: the common case). */
static size_t region_place(const py_inst_t *in, size_t size)
{
    size_t at = 0;
    for (bool moved = true; moved;) {
        moved = false;
        for (size_t k = 0; k < in->n_regions; k++)
            if (at < in->regions[k].end && in->regions[k].off < at + size) {
                at = (in->regions[k].end + NR_PY_ALIGN - 1) & ~(size_t)(NR_PY_ALIGN - 1);
                moved = true;
            }
    }
    return at;
}

void py_fail_open(py_inst_t *in)
{
    for (uint32_t i = 0; in->n_later > 0 && i < in->n_slots; i++) {
        py_slot_t *sl = &in->slots[i];
        if (sl->it == NULL || !sl->later)
            continue;
        nr_batch_item_t *it = sl->it;
        slot_free(in, i);
        nr_status_t *st = nr_status_new(NR_UNAVAILABLE, "Stub process '%s' is not healthy.",
                                        in->name);
        nr_status_free(it->status);
        it->status = NULL;
        in->info.host->respond(in->info.host->ctx, it, st, NR_RESPONSE_FINAL);
        nr_status_free(st);
    }
    in->n_regions = 0; /* the stub that read them has gone */
}

/* ---- execute -------------------------------------------------------------------------------- */

/* One request's outputs, copied out of the shared memory. */
typedef struct {
    nr_hold_t hold;
    char bytes[];
} out_hold_t;

static void out_release(nr_hold_t *h) { free(h); }

/* Writes the batch into the batch file (its place in *at, its length in *len), each request
 * given a slot (ids[i]). */
static nr_status_t *encode(py_inst_t *in, const nr_batch_t *b, uint32_t *ids, size_t *at,
                           size_t *len)
{
    size_t head = sizeof(nr_py_batch_t), data = 0;
    for (size_t i = 0; i < b->n; i++) {
        const nr_batch_item_t *it = b->items[i];
        size_t id_len = it->id ? strlen(it->id) : 0;
        head += sizeof(nr_py_req_t) + pad8(id_len + it->params_len) + pad8(4 * it->n_want);
        for (size_t k = 0; k < it->n_inputs; k++)
            if (it->inputs[k].data != NULL) {
                head += sizeof(nr_py_tensor_t) + 8 * it->inputs[k].ndim;
                data += align(it->inputs[k].size);
            }
    }
    size_t total = align(head) + data;
    size_t o = region_place(in, total);
    nr_status_t *st = nr_py_stub_reserve_batch(&in->stub, o + total + NR_PY_ALIGN);
    if (st != NULL)
        return st;
    in->regions = nr_grow(in->regions, in->n_regions, sizeof(py_region_t));
    in->regions[in->n_regions++] = (py_region_t){.off = o, .end = o + total};
    char *base = in->stub.batch;
    nr_py_batch_t bh = {.n = (uint32_t)b->n};
    memcpy(base + o, &bh, sizeof(bh));
    size_t p = o + sizeof(bh), d = o + align(head);
    for (size_t i = 0; i < b->n; i++) {
        nr_batch_item_t *it = b->items[i];
        size_t id_len = it->id ? strlen(it->id) : 0;
        ids[i] = slot_take(in, it, o);
        nr_py_req_t rh = {.n_want = (uint32_t)it->n_want, .id_len = (uint32_t)id_len,
                          .params_len = (uint32_t)it->params_len, .slot = ids[i]};
        for (size_t k = 0; k < it->n_inputs; k++)
            rh.n_inputs += it->inputs[k].data != NULL;
        memcpy(base + p, &rh, sizeof(rh));
        p += sizeof(rh);
        if (id_len > 0)
            memcpy(base + p, it->id, id_len);
        if (it->params_len > 0)
            memcpy(base + p + id_len, it->params, it->params_len);
        p = pad8(p + id_len + it->params_len);
        if (it->n_want > 0)
            memcpy(base + p, it->want, 4 * it->n_want);
        p = pad8(p + 4 * it->n_want);
        for (size_t k = 0; k < it->n_inputs; k++) {
            const nr_tensor_t *t = &it->inputs[k];
            if (t->data == NULL)
                continue;
            nr_py_tensor_t th = {.index = (uint32_t)k, .type = nr_py_type_code(t->dtype),
                                 .ndim = (uint32_t)t->ndim, .off = d, .nbytes = t->size};
            memcpy(base + p, &th, sizeof(th));
            p += sizeof(th);
            memcpy(base + p, t->dims, 8 * t->ndim);
            p += 8 * t->ndim;
            memcpy(base + d, t->data, t->size);
            d = align(d + t->size);
        }
    }
    *at = o;
    *len = d - o;
    return NULL;
}

/* Bytes [off, off + n) of the answer lie inside it. */
static bool inside(uint64_t off, uint64_t n, uint64_t start, uint64_t end)
{
    return off >= start && off <= end && n <= end - off;
}

/* A BYTES tensor's serialized form holds exactly `count` elements. */
static bool bytes_ok(const char *p, uint64_t n, uint64_t count)
{
    uint64_t off = 0, seen = 0;
    while (off < n) {
        uint32_t l;
        if (n - off < 4)
            return false;
        memcpy(&l, p + off, 4);
        off += 4;
        if (l > n - off)
            return false;
        off += l;
        seen++;
    }
    return seen == count;
}

static nr_status_t *bad_answer(const py_inst_t *in, const char *what)
{
    return nr_status_new(NR_INTERNAL, "the Python stub of '%s' sent a malformed answer (%s)",
                         in->name, what);
}

/* Reads response i at *p into item `it` (outputs or its status). */
static nr_status_t *decode_one(py_inst_t *in, nr_batch_item_t *it, uint64_t *p, uint64_t start,
                               uint64_t end)
{
    const char *base = in->stub.shm;
    const nr_model_config_t *cfg = in->m->cfg;
    nr_py_resp_t rh;
    if (!inside(*p, sizeof(rh), start, end))
        return bad_answer(in, "response header");
    memcpy(&rh, base + *p, sizeof(rh));
    *p += sizeof(rh);
    if (!inside(*p, (uint64_t)rh.err_len + rh.params_len, start, end))
        return bad_answer(in, "error text");
    const char *err = base + *p;
    *p = pad8(*p + rh.err_len + rh.params_len);
    /* the outputs' headers, then (for a response without error) the outputs asked for */
    uint32_t n_out = rh.n_outputs;
    if (n_out > (end - *p) / sizeof(nr_py_tensor_t))
        return bad_answer(in, "output count");
    const nr_py_tensor_t *th_few[16], **th = th_few;
    const char *names_few[16], **names = names_few;
    if (n_out > 16) {
        th = nr_malloc(n_out * sizeof(*th));
        names = nr_malloc(n_out * sizeof(*names));
    }
    nr_status_t *st = NULL;
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < n_out; k++) {
        const nr_py_tensor_t *t = (const nr_py_tensor_t *)(base + *p);
        *p += sizeof(*t);
        if (t->ndim > NR_MAX_DIMS || !inside(*p, pad8(t->index) + 8ull * t->ndim, start, end) ||
            !inside(t->off, t->nbytes, start, end)) {
            st = bad_answer(in, "output");
            goto out;
        }
        th[k] = t;
        names[k] = base + *p;
        *p += pad8(t->index) + 8ull * t->ndim;
        bytes += align(t->nbytes);
    }
    if (rh.code >= 0) {
        nr_code_t code = rh.code <= NR_CANCELLED ? (nr_code_t)rh.code : NR_INTERNAL;
        it->status = nr_status_new(code, "%.*s", (int)rh.err_len, err);
        goto out;
    }
    out_hold_t *h = nr_malloc(sizeof(*h) + bytes + 1);
    h->hold.release = out_release;
    atomic_init(&h->hold.refs, 0);
    char *dst = h->bytes;
    for (size_t j = 0; j < it->n_want; j++) {
        const char *want = cfg->output[it->want[j]].name;
        size_t wl = strlen(want);
        uint32_t k = 0;
        while (k < n_out && !(th[k]->index == wl && memcmp(names[k], want, wl) == 0))
            k++;
        nr_tensor_t *o = &it->outputs[j];
        if (k == n_out) /* not returned: absent from the reply, as on Triton */
            continue;
        const nr_py_tensor_t *t = th[k];
        const int64_t *dims = (const int64_t *)(names[k] + pad8(t->index));
        nr_dtype_t dt = nr_py_type_from_code(t->type);
        uint64_t count = 0;
        o->ndim = t->ndim;
        memcpy(o->dims, dims, 8 * t->ndim);
        if (dt == NR_TYPE_INVALID || !nr_shape_count(o->dims, o->ndim, &count) ||
            (dt == NR_TYPE_STRING ? !bytes_ok(base + t->off, t->nbytes, count)
                                  : count * nr_dtype_size(dt) != t->nbytes)) {
            it->status = nr_status_new(NR_INTERNAL, "output '%s' of the Python model has a "
                                       "shape that does not match its bytes", want);
            break;
        }
        memcpy(dst, base + t->off, t->nbytes);
        o->name = want;
        o->dtype = dt;
        o->data = dst;
        o->size = t->nbytes;
        o->hold = &h->hold;
        atomic_fetch_add(&h->hold.refs, 1);
        dst += align(t->nbytes);
    }
    if (it->status != NULL) {
        for (size_t j = 0; j < it->n_want; j++) {
            it->outputs[j].hold = NULL;
            it->outputs[j].name = NULL;
        }
        free(h);
    } else if (atomic_load(&h->hold.refs) == 0) {
        free(h);
    }
out:
    if (th != th_few) {
        free(th);
        free(names);
    }
    return st;
}

static nr_status_t *decode(py_inst_t *in, nr_batch_t *b, const nr_py_hdr_t *h)
{
    uint64_t start = h->off, end = h->off + h->len, p = start;
    nr_py_batch_t bh;
    if (!inside(p, sizeof(bh), start, end))
        return bad_answer(in, "batch header");
    memcpy(&bh, in->stub.shm + p, sizeof(bh));
    if (bh.n != b->n)
        return bad_answer(in, "response count");
    p += sizeof(bh);
    for (size_t i = 0; i < b->n; i++) {
        nr_status_t *st = decode_one(in, b->items[i], &p, start, end);
        if (st != NULL)
            return st;
    }
    return NULL;
}

/* ---- requests from the model to other models (BLS) --------------------------------------- */

/* One request in flight: what the host borrows (names, dims, bytes) lives in `mem`. */
typedef struct {
    py_inst_t *in;
    uint32_t tag, gen; /* gen: the stub that asked */
    bool final_sent; /* a decoupled callee's last response has gone to the stub */
    nr_host_req_t r;
    char mem[];
} bls_call_t;

/* Writes one response into the reply file and sends it to the stub that asked (gen; flags:
 * NR_RESPONSE_FINAL on the last); dropped when that stub has gone. The file is written from
 * its start again once the stub has read every answer so far (py_int.h). in->mu held. */
static void bls_reply(py_inst_t *in, uint32_t gen, uint32_t tag, const nr_status_t *status,
                      const nr_tensor_t *outs, size_t n, unsigned flags)
{
    if (gen != in->gen) /* stub_down moves the generation on */
        return;
    if (__atomic_load_n(in->stub.shm_head, __ATOMIC_ACQUIRE) == in->replies)
        in->reply_used = NR_PY_REPLY_HEAD;
    const char *err = status ? status->msg : "";
    size_t err_len = strlen(err), head = sizeof(nr_py_resp_t) + pad8(err_len), data = 0;
    uint32_t n_out = 0;
    for (size_t i = 0; i < n; i++)
        if (outs[i].name != NULL) {
            n_out++;
            head += sizeof(nr_py_tensor_t) + pad8(strlen(outs[i].name)) + 8 * outs[i].ndim;
            data += align(outs[i].size);
        }
    size_t base = align(in->reply_used), d = align(base + head), end = d + data;
    nr_py_stub_t *s = &in->stub;
    if (nr_py_stub_reserve_reply(s, end) != NULL) { /* no room: say so instead */
        static const char msg[] = "the answer does not fit in the Python stub's shared memory";
        nr_status_t tmp = {.code = NR_UNAVAILABLE, .msg = (char *)msg};
        if (status == NULL)
            bls_reply(in, gen, tag, &tmp, NULL, 0, flags);
        return;
    }
    nr_py_resp_t rh = {.code = status ? (int32_t)status->code : -1, .n_outputs = n_out,
                       .err_len = (uint32_t)err_len};
    char *p = s->reply + base;
    memcpy(p, &rh, sizeof(rh));
    p += sizeof(rh);
    memcpy(p, err, err_len);
    p += pad8(err_len);
    for (size_t i = 0; i < n; i++) {
        const nr_tensor_t *t = &outs[i];
        if (t->name == NULL)
            continue;
        size_t nl = strlen(t->name);
        nr_py_tensor_t th = {.index = (uint32_t)nl, .type = nr_py_type_code(t->dtype),
                             .ndim = (uint32_t)t->ndim, .off = d, .nbytes = t->size};
        memcpy(p, &th, sizeof(th));
        p += sizeof(th);
        memcpy(p, t->name, nl);
        p += pad8(nl);
        memcpy(p, t->dims, 8 * t->ndim);
        p += 8 * t->ndim;
        if (t->size > 0)
            memcpy(s->reply + d, t->data, t->size);
        d = align(d + t->size);
    }
    in->reply_used = end;
    in->replies++;
    nr_status_t *st = nr_py_stub_send(s, NR_PY_BLS_REPLY, tag | flags << 24, base, end - base);
    nr_status_free(st); /* a stub gone meanwhile: the batch's wait says so */
}

/* A response of a decoupled callee (exec(decoupled=True)). */
static void bls_response(void *arg, const nr_status_t *err, const nr_tensor_t *outs, size_t n,
                         unsigned flags)
{
    bls_call_t *c = arg;
    pthread_mutex_lock(&c->in->mu);
    if (!c->final_sent)
        bls_reply(c->in, c->gen, c->tag, err, outs, n, flags & NR_RESPONSE_FINAL);
    c->final_sent |= (flags & NR_RESPONSE_FINAL) != 0;
    pthread_mutex_unlock(&c->in->mu);
}

static void bls_done(void *arg, const nr_status_t *status, const nr_tensor_t *outs, size_t n)
{
    bls_call_t *c = arg;
    py_inst_t *in = c->in;
    pthread_mutex_lock(&in->mu);
    if (!c->final_sent) /* else a decoupled callee has said all (its end carries nothing) */
        bls_reply(in, c->gen, c->tag, status, outs, n, NR_RESPONSE_FINAL);
    if (--in->outstanding == 0)
        pthread_cond_broadcast(&in->idle);
    pthread_mutex_unlock(&in->mu);
    free(c);
}

/* Reads the request at [h->off, h->off + h->len) of the shared memory, copies what it borrows
 * (the file may move before it is answered) and hands it to the server. */
static void bls_start(py_inst_t *in, const nr_py_hdr_t *h)
{
    const char *base = in->stub.shm;
    uint64_t start = h->off, end = h->off + h->len, p = start;
    nr_py_bls_t bh;
    nr_status_t *st = NULL;
    bls_call_t *c = NULL;
    if (!inside(p, sizeof(bh), start, end))
        goto bad;
    memcpy(&bh, base + p, sizeof(bh));
    p += sizeof(bh);
    uint64_t strings = (uint64_t)bh.name_len + bh.id_len + bh.want_len + bh.params_len;
    if (!inside(p, strings, start, end) || bh.n_inputs > (end - p) / sizeof(nr_py_tensor_t) ||
        bh.n_want > bh.want_len)
        goto bad;
    /* the copy: inputs[], outputs[], then the strings (NUL-terminated) and the tensor bytes */
    uint64_t bytes = 0;
    uint64_t q = pad8(p + strings);
    for (uint32_t i = 0; i < bh.n_inputs; i++) {
        if (!inside(q, sizeof(nr_py_tensor_t), start, end))
            goto bad;
        const nr_py_tensor_t *t = (const nr_py_tensor_t *)(base + q);
        q += sizeof(*t);
        if (t->ndim > NR_MAX_DIMS || !inside(q, pad8(t->index) + 8ull * t->ndim, start, end) ||
            !inside(t->off, t->nbytes, start, end))
            goto bad;
        q += pad8(t->index) + 8ull * t->ndim;
        bytes += t->index + 1 + t->nbytes;
    }
    size_t ins = bh.n_inputs * sizeof(nr_tensor_t), outs = bh.n_want * sizeof(char *);
    c = nr_malloc(sizeof(*c) + ins + outs + strings + 4 + bytes);
    c->in = in;
    c->tag = h->arg;
    nr_tensor_t *inputs = (nr_tensor_t *)c->mem;
    const char **want = (const char **)(c->mem + ins);
    char *m = c->mem + ins + outs;
    const char *src = base + p;
    c->r = (nr_host_req_t){.model = m, .version = bh.version, .inputs = inputs,
                           .n_inputs = bh.n_inputs, .outputs = want, .n_outputs = bh.n_want,
                           .timeout_us = bh.timeout_us,
                           .on_response = bh.flags & NR_PY_BLS_DECOUPLED ? bls_response : NULL};
    c->final_sent = false;
    uint32_t ps = bh.parent - 1; /* the slots are this thread's (py_sender_message) */
    if (bh.parent > 0 && ps < in->n_slots && in->slots[ps].it != NULL)
        c->r.parent = in->slots[ps].it;
    memcpy(m, src, bh.name_len);
    m[bh.name_len] = '\0';
    m += bh.name_len + 1;
    src += bh.name_len;
    c->r.id = m;
    memcpy(m, src, bh.id_len);
    m[bh.id_len] = '\0';
    m += bh.id_len + 1;
    src += bh.id_len;
    memcpy(m, src, bh.want_len); /* NUL-separated names */
    m[bh.want_len] = '\0';
    src += bh.want_len;
    char *params = m + bh.want_len + 1;
    memcpy(params, src, bh.params_len);
    params[bh.params_len] = '\0';
    c->r.params = params;
    c->r.params_len = bh.params_len;
    const char *wend = m + bh.want_len + 1;
    for (uint32_t k = 0; k < bh.n_want; k++) {
        if (m >= wend) /* fewer names than it says */
            goto bad;
        want[k] = m;
        m += strlen(m) + 1;
    }
    m = c->mem + ins + outs + strings + 4;
    q = pad8(p + strings);
    for (uint32_t i = 0; i < bh.n_inputs; i++) {
        const nr_py_tensor_t *t = (const nr_py_tensor_t *)(base + q);
        q += sizeof(*t);
        nr_tensor_t *x = &inputs[i];
        memset(x, 0, sizeof(*x));
        memcpy(m, base + q, t->index);
        m[t->index] = '\0';
        x->name = m;
        m += t->index + 1;
        q += pad8(t->index);
        x->ndim = t->ndim;
        memcpy(x->dims, base + q, 8 * t->ndim);
        q += 8ull * t->ndim;
        x->dtype = nr_py_type_from_code(t->type);
        memcpy(m, base + t->off, t->nbytes);
        x->data = m;
        x->size = t->nbytes;
        m += t->nbytes;
    }
    pthread_mutex_lock(&in->mu);
    in->outstanding++;
    c->gen = in->gen;
    pthread_mutex_unlock(&in->mu);
    st = in->info.host->infer(in->info.host->ctx, &c->r, bls_done, c);
    if (st != NULL) { /* refused before it was queued: answered here */
        pthread_mutex_lock(&in->mu);
        bls_reply(in, in->gen, h->arg, st, NULL, 0, NR_RESPONSE_FINAL);
        if (--in->outstanding == 0)
            pthread_cond_broadcast(&in->idle);
        pthread_mutex_unlock(&in->mu);
        nr_status_free(st);
        free(c);
    }
    return;
bad:
    free(c);
    st = bad_answer(in, "request to another model");
    pthread_mutex_lock(&in->mu);
    bls_reply(in, in->gen, h->arg, st, NULL, 0, NR_RESPONSE_FINAL);
    pthread_mutex_unlock(&in->mu);
    nr_status_free(st);
}

/* ---- responses from senders (decoupled models; the default mode's sender) ------------------ */

/* The stub has read every message it wrote into the shared file so far (py_int.h). */
static void consumed(py_inst_t *in)
{
    in->consumed++;
    __atomic_store_n(in->stub.reply_head, in->consumed, __ATOMIC_RELEASE);
}

/* One response of the request in slot h->arg & 0xffffff: handed to its client at once
 * (decoupled), or kept as the request's answer (the default mode allows one response, then
 * the final flag). */
static void sender_response(py_inst_t *in, const nr_py_hdr_t *h)
{
    uint32_t i = h->arg & 0xffffffu, flags = h->arg >> 24;
    py_slot_t *sl = i < in->n_slots ? &in->slots[i] : NULL;
    if (sl == NULL || sl->it == NULL || (sl->sent & SENT_FINAL)) /* the stub closes a sender
                                                                    after its final flag */
        return;
    nr_batch_item_t *it = sl->it;
    bool decoupled = in->m->cfg->decoupled;
    if (!(flags & NR_RESPONSE_NONE)) {
        uint64_t p = h->off + sizeof(nr_py_batch_t), end = h->off + h->len;
        nr_py_batch_t bh = {0};
        if (inside(h->off, sizeof(bh), h->off, end))
            memcpy(&bh, in->stub.shm + h->off, sizeof(bh));
        nr_status_t *st = NULL;
        if (bh.n != 1)
            st = bad_answer(in, "response header");
        else if (!decoupled && (sl->sent & SENT_ONE)) /* the stub refuses it first */
            st = bad_answer(in, "a second response in the default mode");
        else
            st = decode_one(in, it, &p, h->off, end);
        if (st != NULL) { /* malformed: that request fails */
            nr_status_free(it->status);
            it->status = st;
        }
        sl->sent |= SENT_ONE;
    }
    bool final = flags & NR_RESPONSE_FINAL;
    if (final)
        sl->sent |= SENT_FINAL;
    if (final && sl->later) /* its batch has ended: the request ends with this response */
        slot_free(in, i);
    if (decoupled) { /* after this a later request may be gone */
        nr_status_t *err = it->status;
        it->status = NULL;
        in->info.host->respond(in->info.host->ctx, it, err, flags);
        nr_status_free(err);
    }
}

void py_sender_message(py_inst_t *in, const nr_py_hdr_t *h)
{
    if (h->kind == NR_PY_BLS) { /* during a batch, or from a thread of the model's after it */
        bls_start(in, h);
        consumed(in);
        return;
    }
    if (h->kind == NR_PY_CANCELLED) {
        uint64_t i = h->off;
        bool gone = i < in->n_slots && in->slots[i].it != NULL &&
                    in->info.host->is_cancelled(in->info.host->ctx, in->slots[i].it);
        unsigned flags = NR_RESPONSE_FINAL | (gone ? NR_PY_REPLY_CANCELLED : 0);
        nr_status_free(nr_py_stub_send(&in->stub, NR_PY_BLS_REPLY,
                                       (h->arg & 0xffffffu) | flags << 24, 0, 0));
        return;
    }
    sender_response(in, h);
    if (!((h->arg >> 24) & NR_RESPONSE_NONE)) /* it had a body in the shared file */
        consumed(in);
}

static nr_status_t *run(py_inst_t *in, nr_batch_t *b, uint32_t *ids);

static nr_status_t *py_execute(void *state, nr_batch_t *b)
{
    py_inst_t *in = state;
    uint32_t few[16], *ids = b->n <= 16 ? few : nr_malloc(b->n * sizeof(uint32_t));
    py_side_own(in);
    nr_status_t *st = run(in, b, ids);
    py_side_release(in);
    if (ids != few)
        free(ids);
    return st;
}

/* The batch's requests leave their slots when execute ends; a decoupled model's without their
 * final flag stay, answered later (item.later), and so does the batch's region. */
static void batch_end(py_inst_t *in, nr_batch_t *b, const uint32_t *ids, size_t at, bool keep)
{
    uint32_t open = 0;
    for (size_t i = 0; i < b->n; i++) {
        py_slot_t *sl = &in->slots[ids[i]];
        if (keep && !(sl->sent & SENT_FINAL)) {
            sl->later = true;
            b->items[i]->later = true;
            open++;
        } else {
            slot_free(in, ids[i]);
        }
    }
    in->n_later += open;
    for (size_t k = 0; k < in->n_regions; k++)
        if (in->regions[k].off == at) {
            if (open == 0)
                region_drop(in, k);
            else
                in->regions[k].open = open;
            break;
        }
}

/* execute, the socket owned. */
static nr_status_t *run(py_inst_t *in, nr_batch_t *b, uint32_t *ids)
{
    nr_status_t *st = NULL;
    if (in->up && nr_py_stub_hung_up(&in->stub)) { /* it died while idle */
        NR_LOG_ERROR("the Python stub of '%s' ended while idle", in->name);
        stub_down(in, 0);
    }
    if (!in->up) { /* its stub died: start it again */
        NR_LOG_WARN("restarting the Python stub of '%s'", in->name);
        st = inst_start(in);
        if (st != NULL) {
            NR_LOG_ERROR("the Python stub of '%s' did not restart: %s", in->name, st->msg);
            nr_status_free(st);
            return nr_status_new(NR_UNAVAILABLE, "Stub process '%s' is not healthy.", in->name);
        }
    }
    size_t at = 0, len = 0;
    st = encode(in, b, ids, &at, &len);
    b->input_end_ns = nr_now_ns();
    if (st != NULL) /* no slot was taken */
        return st;
    nr_py_hdr_t h;
    st = nr_py_stub_send(&in->stub, NR_PY_EXECUTE, 0, at, len);
    /* the senders' responses and the model's requests to other models are read inside the
     * wait (py_sender_message); their answers may come after the batch has ended */
    if (st == NULL)
        st = nr_py_stub_wait(&in->stub, &h, -1, "execute");
    b->infer_end_ns = nr_now_ns();
    size_t finals = 0;
    for (size_t i = 0; i < b->n; i++)
        finals += (in->slots[ids[i]].sent & SENT_FINAL) != 0;
    bool died = st != NULL, keep = false;
    if (died) {
    } else if (h.kind == NR_PY_OK) {  /* answered through the senders */
        keep = in->m->cfg->decoupled; /* a decoupled model's requests may stay open */
        if (!keep && finals < b->n)   /* the stub waits for every final flag first */
            st = bad_answer(in, "the end of a batch with requests unanswered");
    } else if (h.kind == NR_PY_ERROR) {
        st = nr_status_new(NR_INTERNAL, "%s", nr_py_stub_text(&in->stub, &h));
    } else if (h.kind != NR_PY_RESPONSES) {
        st = bad_answer(in, "message kind");
    } else {
        st = decode(in, b, &h);
        consumed(in);
    }
    if (st != NULL && finals > 0) { /* the requests already finished keep their answers */
        for (size_t i = 0; i < b->n; i++)
            if (!(in->slots[ids[i]].sent & SENT_FINAL) && b->items[i]->status == NULL)
                b->items[i]->status = nr_status_new(st->code, "%s", st->msg);
        nr_status_free(st);
        st = NULL;
    }
    batch_end(in, b, ids, at, keep);
    if (died)
        stub_down(in, 0);
    return st;
}

static const char *const py_config_keys[] = {
    "shm-default-byte-size", "shm-growth-byte-size", "stub-timeout-seconds", NULL};

const nr_backend_t nr_python_backend = {
    .name = "python",
    .abi_version = NR_BACKEND_ABI_VERSION,
    .model_autocomplete = py_autocomplete,
    .model_load = py_model_load,
    .instance_create = py_instance_create,
    .execute = py_execute,
    .instance_destroy = py_instance_destroy,
    .model_unload = py_model_unload,
    .sees_cancellation = true, /* request.is_cancelled() */
    .config_keys = py_config_keys,
};
