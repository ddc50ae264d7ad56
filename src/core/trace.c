/* trace.c - Triton's trace modes "triton" and "opentelemetry" (trace.h). */
#include "trace.h"

#include "../common/alloc.h"
#include "../common/buf.h"
#include "../common/clock.h"
#include "../common/dtype.h"
#include "../common/log.h"
#include "model.h"
#include "request.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>

atomic_bool nr_trace_armed_flag;

/* The file every setting writes (the command line's: the trace extension cannot change it).
 * Held by each setting; the last one closes the array. */
typedef struct {
    atomic_uint refs;
    char *name;
    pthread_mutex_t mu;
    FILE *f;          /* <name>, once the first unindexed write opened it */
    bool failed;      /* opening it failed once: said once */
    unsigned next_index;
} tfile_t;

/* An unlimited setting's stream (no log_frequency) goes to the file past this size. */
#define STREAM_FLUSH_BYTES ((size_t)1 << 20)

enum { SPEC_LEVEL = 1, SPEC_RATE = 2, SPEC_COUNT = 4, SPEC_LOGFREQ = 8, SPEC_ALL = 15 };

/* One setting object. Replaced, never changed, by an update (its counters start again, as
 * Triton's do); the traces it sampled keep it until they are written. */
typedef struct {
    atomic_uint refs;
    unsigned level;
    uint32_t rate, log_frequency;
    unsigned specified; /* a model's: the fields it sets itself (SPEC_*) */
    nr_trace_mode_t mode;
    tfile_t *file;
    /* sampling, guarded by T.mu (one lock per request counted) */
    int32_t count;
    uint64_t sample, created;
    pthread_mutex_t mu; /* guards what follows: the traces written */
    uint64_t collected, in_stream;
    nr_buf_t stream; /* traces written since the last save, comma separated */
} setting_t;

typedef struct {
    char *name;
    setting_t *s;
} model_setting_t;

static struct {
    pthread_mutex_t mu;         /* guards the pointers below and the settings' sampling */
    setting_t *global, *initial; /* initial: the command line's, what a cleared field returns to */
    model_setting_t *models;
    size_t n_models;
    char **otel; /* mode opentelemetry's settings, "<key>=<value>" (copies) */
    size_t n_otel;
    nr_trace_exporter_t exporter; /* span NULL: none */
    atomic_ullong next_id;
} T = {.mu = PTHREAD_MUTEX_INITIALIZER};

struct nr_trace_s {
    nr_trace_t *root;   /* itself for a request's own trace */
    setting_t *setting; /* the root's (a reference, held by the root) */
    atomic_uint refs;   /* the root's: itself and its children not yet written */
    uint64_t id, parent_id;
    unsigned level;
    nr_trace_proto_t proto;
    uint64_t recv[2], send[2], done_ns;
    uint64_t first_resp_ns; /* a decoupled model's first response sent */
    pthread_mutex_t mu; /* the root's: guards out */
    nr_buf_t out;       /* the root's: this trace's and its children's records */
    /* mode opentelemetry: the trace's and its spans' ids (the root span's parent: the request's
     * traceparent, when it brought one; a child's model span's parent: its parent's model span) */
    bool otel, remote_parent;
    uint8_t trace_id[16], root_span[8], parent_span[8], model_span[8], compute_span[8];
};

/* ---- the file ---------------------------------------------------------------------------- */

static void file_unref(tfile_t *f)
{
    if (f == NULL || atomic_fetch_sub(&f->refs, 1) != 1)
        return;
    if (f->f != NULL) {
        fputc(']', f->f);
        fclose(f->f);
    }
    pthread_mutex_destroy(&f->mu);
    free(f->name);
    free(f);
}

static void cannot_write(const char *name)
{
    NR_LOG_ERROR("failed creating trace file: %s: %s", name, strerror(errno));
}

/* Saves a stream of traces: into <name>.<n> as an array of its own, or appended to <name>'s. */
static void file_save(tfile_t *f, const nr_buf_t *traces, bool indexed)
{
    pthread_mutex_lock(&f->mu);
    if (indexed) {
        size_t len = strlen(f->name) + 16;
        char *path = nr_malloc(len);
        snprintf(path, len, "%s.%u", f->name, f->next_index++);
        pthread_mutex_unlock(&f->mu);
        FILE *o = fopen(path, "w");
        if (o == NULL) {
            cannot_write(path);
        } else {
            fputc('[', o);
            fwrite(traces->data, 1, traces->len, o);
            fputc(']', o);
            fclose(o);
        }
        free(path);
        return;
    }
    if (f->f == NULL && !f->failed) {
        f->f = fopen(f->name, "w");
        if (f->f == NULL) {
            f->failed = true;
            cannot_write(f->name);
        } else {
            fputc('[', f->f);
        }
    } else if (f->f != NULL) {
        fputc(',', f->f);
    }
    if (f->f != NULL) {
        fwrite(traces->data, 1, traces->len, f->f);
        fflush(f->f); /* readable while the server runs; closed (']') at exit */
    }
    pthread_mutex_unlock(&f->mu);
}

/* ---- settings ---------------------------------------------------------------------------- */

static const char *invalid_reason(const setting_t *s)
{
    if (s->level == 0)
        return "tracing is disabled";
    if (s->rate == 0)
        return "sample rate must be non-zero";
    if (s->mode == NR_TRACE_MODE_TRITON && (s->file == NULL || s->file->name[0] == '\0'))
        return "trace file name is not given";
    if (s->mode == NR_TRACE_MODE_OPENTELEMETRY && T.exporter.span == NULL)
        return "the OpenTelemetry exporter is not running";
    return NULL;
}

static setting_t *setting_new(unsigned level, uint32_t rate, int32_t count, uint32_t log_frequency,
                              nr_trace_mode_t mode, tfile_t *file, unsigned specified)
{
    setting_t *s = nr_calloc(1, sizeof(*s));
    atomic_init(&s->refs, 1);
    s->level = level;
    s->rate = rate;
    s->count = count;
    s->log_frequency = log_frequency;
    s->mode = mode;
    s->specified = specified;
    s->file = file;
    if (file != NULL)
        atomic_fetch_add(&file->refs, 1);
    pthread_mutex_init(&s->mu, NULL);
    nr_buf_init(&s->stream);
    return s;
}

static void setting_ref(setting_t *s)
{
    atomic_fetch_add_explicit(&s->refs, 1, memory_order_relaxed);
}

/* The last reference: what the stream still holds is saved (indexed when log_frequency asks
 * for indexed files), as Triton's setting does when it is replaced or the server exits. */
static void setting_unref(setting_t *s)
{
    if (s == NULL || atomic_fetch_sub_explicit(&s->refs, 1, memory_order_acq_rel) != 1)
        return;
    if (s->in_stream > 0 && s->file != NULL)
        file_save(s->file, &s->stream, s->log_frequency != 0);
    nr_buf_free(&s->stream);
    pthread_mutex_destroy(&s->mu);
    file_unref(s->file);
    free(s);
}

/* Under T.mu. */
static model_setting_t *find_model(const char *model)
{
    for (size_t i = 0; i < T.n_models; i++)
        if (!strcmp(T.models[i].name, model))
            return &T.models[i];
    return NULL;
}

/* Whether s may sample a request: valid, or in mode opentelemetry with a rate of 0 (Triton's
 * way to trace only the requests that bring their own trace context). */
static bool may_sample(const setting_t *s)
{
    const char *why = invalid_reason(s);
    return why == NULL || (s->mode == NR_TRACE_MODE_OPENTELEMETRY && s->level != 0 &&
                           s->rate == 0 && T.exporter.span != NULL);
}

/* Under T.mu: whether any setting can sample. */
static void rearm(void)
{
    bool armed = T.global != NULL && may_sample(T.global);
    for (size_t i = 0; !armed && i < T.n_models; i++)
        armed = may_sample(T.models[i].s);
    atomic_store(&nr_trace_armed_flag, armed);
}

void nr_trace_set_exporter(const nr_trace_exporter_t *e)
{
    pthread_mutex_lock(&T.mu);
    T.exporter = e != NULL ? *e : (nr_trace_exporter_t){0};
    if (T.global != NULL)
        rearm();
    pthread_mutex_unlock(&T.mu);
}

void nr_trace_random_id(uint8_t *out, size_t n)
{
    static _Thread_local uint64_t x; /* xorshift64, seeded per thread */
    while (x == 0)
        if (getrandom(&x, sizeof(x), 0) != (ssize_t)sizeof(x))
            x = nr_now_ns() | 1;
    bool zero = true;
    while (zero) {
        for (size_t i = 0; i < n; i += 8) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            memcpy(out + i, &x, n - i < 8 ? n - i : 8);
        }
        for (size_t i = 0; i < n; i++)
            zero &= out[i] == 0;
    }
}

void nr_trace_start(const nr_trace_config_t *c)
{
    nr_trace_stop();
    T.otel = nr_calloc(c->n_otel + 1, sizeof(char *));
    for (size_t i = 0; i < c->n_otel; i++)
        T.otel[i] = nr_strdup(c->otel[i]);
    T.n_otel = c->n_otel;
    tfile_t *f = nr_calloc(1, sizeof(*f));
    atomic_init(&f->refs, 1);
    f->name = nr_strdup(c->file != NULL ? c->file : "");
    pthread_mutex_init(&f->mu, NULL);
    pthread_mutex_lock(&T.mu);
    T.global = setting_new(c->level, c->rate, c->count, c->log_frequency, c->mode, f, 0);
    T.initial = setting_new(c->level, c->rate, c->count, c->log_frequency, c->mode, f, 0);
    rearm();
    pthread_mutex_unlock(&T.mu);
    file_unref(f); /* the settings hold it */
}

void nr_trace_stop(void)
{
    pthread_mutex_lock(&T.mu);
    setting_t *g = T.global, *init = T.initial;
    model_setting_t *ms = T.models;
    size_t n = T.n_models;
    T.global = T.initial = NULL;
    T.models = NULL;
    T.n_models = 0;
    atomic_store(&nr_trace_armed_flag, false);
    pthread_mutex_unlock(&T.mu);
    for (size_t i = 0; i < n; i++) {
        setting_unref(ms[i].s);
        free(ms[i].name);
    }
    free(ms);
    setting_unref(g);
    setting_unref(init);
    for (size_t i = 0; i < T.n_otel; i++)
        free(T.otel[i]);
    free(T.otel);
    T.otel = NULL;
    T.n_otel = 0;
}

const char *nr_trace_idle_reason(void)
{
    pthread_mutex_lock(&T.mu);
    const char *why = T.global != NULL && T.global->level != 0 && !may_sample(T.global)
                          ? invalid_reason(T.global) : NULL; /* (rate 0 with opentelemetry:
                                                                 requests with a context) */
    pthread_mutex_unlock(&T.mu);
    return why;
}

/* A field of the setting that replaces `cur` (NULL: none yet), falling back to `fb`'s. */
#define PICK(field, bit, has, clear, newval)                                                  \
    do {                                                                                      \
        bool spec_ = !u->clear && ((cur != NULL && (cur->specified & (bit))) || u->has);      \
        field = fb->field;                                                                    \
        if (spec_) {                                                                          \
            field = u->has ? (newval) : cur->field;                                           \
            specified |= (bit);                                                               \
        }                                                                                     \
    } while (0)

/* The setting `cur` becomes with u (Triton's UpdateTraceSettingInternal): each field u sets,
 * or cur set itself and u does not clear, is its own; the others are fb's. */
static setting_t *derive(const setting_t *cur, const setting_t *fb, const nr_trace_update_t *u)
{
    unsigned specified = 0, level;
    uint32_t rate, log_frequency;
    int32_t count;
    PICK(level, SPEC_LEVEL, has_level, clear_level, u->level);
    PICK(rate, SPEC_RATE, has_rate, clear_rate, u->rate);
    PICK(log_frequency, SPEC_LOGFREQ, has_log_frequency, clear_log_frequency, u->log_frequency);
    PICK(count, SPEC_COUNT, has_count, clear_count, u->count); /* (cur's: what it has left) */
    return setting_new(level, rate, count, log_frequency, fb->mode, fb->file, specified);
}

#undef PICK

static nr_status_t *invalid_update(setting_t *s)
{
    nr_status_t *st = NULL;
    const char *why = invalid_reason(s);
    if (why != NULL && s->level != 0)
        st = nr_status_new(NR_INVALID_ARG, "Attempting to set invalid trace setting :%s", why);
    return st;
}

nr_status_t *nr_trace_update(const char *model, const nr_trace_update_t *u)
{
    setting_t *old = NULL;
    nr_status_t *st = NULL;
    pthread_mutex_lock(&T.mu);
    if (T.global == NULL) {
        pthread_mutex_unlock(&T.mu);
        return nr_status_new(NR_UNAVAILABLE, "tracing is not started");
    }
    if (model == NULL || model[0] == '\0') {
        setting_t *s = derive(T.global, T.initial, u);
        st = invalid_update(s);
        if (st != NULL) {
            setting_unref(s);
            goto out;
        }
        old = T.global;
        T.global = s;
        /* models that follow the global setting in some field follow the new one */
        static const nr_trace_update_t none;
        for (size_t i = 0; i < T.n_models; i++) {
            if (T.models[i].s->specified == SPEC_ALL)
                continue;
            setting_t *ms = derive(T.models[i].s, T.global, &none);
            if (invalid_reason(ms) != NULL && ms->level != 0) { /* keeps its old one */
                setting_unref(ms);
                continue;
            }
            setting_unref(T.models[i].s);
            T.models[i].s = ms;
        }
    } else {
        model_setting_t *m = find_model(model);
        setting_t *s = derive(m != NULL ? m->s : NULL, T.global, u);
        st = invalid_update(s);
        if (st != NULL) {
            setting_unref(s);
            goto out;
        }
        if (s->specified == 0) { /* nothing of its own: the model follows the global one */
            setting_unref(s);
            if (m != NULL) {
                old = m->s;
                free(m->name);
                *m = T.models[--T.n_models];
            }
        } else if (m != NULL) {
            old = m->s;
            m->s = s;
        } else {
            T.models = nr_grow(T.models, T.n_models, sizeof(*T.models));
            T.models[T.n_models++] = (model_setting_t){nr_strdup(model), s};
        }
    }
out:
    rearm();
    pthread_mutex_unlock(&T.mu);
    setting_unref(old); /* outside T.mu: it may save its stream */
    return st;
}

void nr_trace_get(const char *model, nr_trace_config_t *c)
{
    memset(c, 0, sizeof(*c));
    c->rate = 1000;
    c->count = -1;
    c->file = "";
    pthread_mutex_lock(&T.mu);
    model_setting_t *m = model != NULL && model[0] ? find_model(model) : NULL;
    setting_t *s = m != NULL ? m->s : T.global;
    if (s != NULL) {
        c->level = s->level;
        c->rate = s->rate;
        c->log_frequency = s->log_frequency;
        c->mode = s->mode;
        c->file = s->file != NULL ? s->file->name : "";
        c->count = s->count;
    }
    c->otel = (const char *const *)T.otel;
    c->n_otel = T.n_otel;
    pthread_mutex_unlock(&T.mu);
}

/* ---- sampling ------------------------------------------------------------------------------ */

static int hexval(char c)
{
    return c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10
         : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
}

/* n bytes from 2n hex digits; false when one is not a digit or all are zero. */
static bool unhex(const char *p, uint8_t *out, size_t n)
{
    bool any = false;
    for (size_t i = 0; i < n; i++) {
        int hi = hexval(p[2 * i]), lo = hexval(p[2 * i + 1]);
        if (hi < 0 || lo < 0)
            return false;
        out[i] = (uint8_t)(hi << 4 | lo);
        any |= out[i] != 0;
    }
    return any;
}

/* W3C trace context: "<version 2>-<trace id 32>-<parent id 16>-<flags 2>", hex. */
static bool parse_traceparent(const char *tp, uint8_t trace_id[16], uint8_t parent[8])
{
    uint8_t v[1], f[1];
    return tp != NULL && strlen(tp) == 55 && tp[2] == '-' && tp[35] == '-' && tp[52] == '-' &&
           (unhex(tp, v, 1) || (tp[0] == '0' && tp[1] == '0')) && v[0] != 0xff &&
           unhex(tp + 3, trace_id, 16) && unhex(tp + 36, parent, 8) &&
           (unhex(tp + 53, f, 1) || (tp[53] == '0' && tp[54] == '0'));
}

nr_trace_t *nr_trace_sample(const char *model, const char *traceparent)
{
    bool hit = false, forced = false;
    uint8_t ctx_trace[16], ctx_parent[8];
    pthread_mutex_lock(&T.mu); /* the one lock a request not sampled takes */
    model_setting_t *m = T.n_models > 0 ? find_model(model) : NULL;
    setting_t *s = m != NULL ? m->s : T.global;
    if (s != NULL && s->level != 0) {
        /* Triton: a request that brings its OpenTelemetry context is always traced */
        forced = s->mode == NR_TRACE_MODE_OPENTELEMETRY && may_sample(s) &&
                 parse_traceparent(traceparent, ctx_trace, ctx_parent);
        if (s->count != 0 && invalid_reason(s) == NULL) {
            /* every rate-th request a setting sees, while its count lasts */
            hit = ++s->sample % s->rate == 0;
            if (hit && s->count > 0) {
                s->count--;
                s->created++;
            }
        }
        if (hit || forced)
            setting_ref(s); /* the trace's */
    }
    pthread_mutex_unlock(&T.mu);
    if (!hit && !forced)
        return NULL;
    nr_trace_t *t = nr_calloc(1, sizeof(*t));
    t->root = t;
    t->setting = s; /* the reference taken above */
    atomic_init(&t->refs, 1);
    t->id = atomic_fetch_add(&T.next_id, 1) + 1;
    t->level = s->level;
    pthread_mutex_init(&t->mu, NULL);
    nr_buf_init(&t->out);
    t->otel = s->mode == NR_TRACE_MODE_OPENTELEMETRY;
    if (t->otel) {
        if (forced) { /* its spans continue the client's trace */
            memcpy(t->trace_id, ctx_trace, 16);
            memcpy(t->parent_span, ctx_parent, 8);
            t->remote_parent = true;
        } else {
            nr_trace_random_id(t->trace_id, 16);
        }
        nr_trace_random_id(t->root_span, 8);
        nr_trace_random_id(t->model_span, 8);
        nr_trace_random_id(t->compute_span, 8);
    }
    return t;
}

nr_trace_t *nr_trace_child(nr_trace_t *parent)
{
    nr_trace_t *root = parent->root;
    atomic_fetch_add(&root->refs, 1);
    nr_trace_t *t = nr_calloc(1, sizeof(*t));
    t->root = root;
    t->id = atomic_fetch_add(&T.next_id, 1) + 1;
    t->parent_id = parent->id;
    t->level = root->level;
    t->otel = root->otel;
    if (t->otel) {
        memcpy(t->trace_id, root->trace_id, 16);
        memcpy(t->parent_span, parent->model_span, 8); /* its model span's parent */
        nr_trace_random_id(t->model_span, 8);
        nr_trace_random_id(t->compute_span, 8);
    }
    return t;
}

void nr_trace_recv(nr_trace_t *t, nr_trace_proto_t proto, uint64_t start_ns, uint64_t end_ns)
{
    t->proto = proto;
    t->recv[0] = start_ns;
    t->recv[1] = end_ns;
}

void nr_trace_send(nr_trace_t *t, bool end)
{
    if (t == NULL)
        return;
    t->send[end] = nr_now_ns();
    if (end && t->send[0] == 0) /* a reply made and sent at once (an error) */
        t->send[0] = t->send[1];
}

void nr_trace_done(nr_trace_t *t)
{
    t->done_ns = nr_now_ns();
}

void nr_trace_response(nr_trace_t *t)
{
    if (t->first_resp_ns == 0)
        t->first_resp_ns = nr_now_ns();
}

/* ---- writing --------------------------------------------------------------------------- */

static void stamp(nr_buf_t *b, uint64_t id, const char *name, uint64_t ns)
{
    if (ns == 0)
        return; /* not taken (a step the request never reached) */
    nr_buf_puts(b, ",{\"id\":"); /* (printf-free: a traced request writes twelve) */
    nr_buf_u64(b, id);
    nr_buf_puts(b, ",\"timestamps\":[{\"name\":\"");
    nr_buf_puts(b, name);
    nr_buf_puts(b, "\",\"ns\":");
    nr_buf_u64(b, ns);
    nr_buf_puts(b, "}]}");
}

/* A tensor's elements as Triton prints them: comma separated, C++ stream formatting (%g for
 * floats), strings quoted; FP16 and BF16 left empty, as Triton leaves them. */
static void tensor_data(nr_buf_t *d, const nr_tensor_t *t)
{
    size_t es = nr_dtype_size(t->dtype);
    const unsigned char *p = t->data;
    if (t->dtype == NR_TYPE_STRING) {
        size_t off = 0;
        for (size_t k = 0; off + 4 <= t->size; k++) {
            uint32_t len;
            memcpy(&len, p + off, 4);
            off += 4;
            if (len > t->size - off)
                return;
            nr_buf_puts(d, k ? ",\"" : "\""); /* the bytes as they are (a NUL included): the
                                                  record escapes them */
            nr_buf_append(d, p + off, len);
            nr_buf_putc(d, '"');
            off += len;
        }
        return;
    }
    if (es == 0 || t->dtype == NR_TYPE_FP16 || t->dtype == NR_TYPE_BF16)
        return;
    for (size_t off = 0, k = 0; off + es <= t->size; off += es, k++) {
        if (k)
            nr_buf_putc(d, ',');
        union {
            int8_t i8; int16_t i16; int32_t i32; int64_t i64;
            uint8_t u8; uint16_t u16; uint32_t u32; uint64_t u64;
            float f; double g;
        } v;
        memcpy(&v, p + off, es);
        switch (t->dtype) {
        case NR_TYPE_BOOL: nr_buf_putc(d, v.u8 ? '1' : '0'); break;
        case NR_TYPE_UINT8: nr_buf_u64(d, v.u8); break;
        case NR_TYPE_UINT16: nr_buf_u64(d, v.u16); break;
        case NR_TYPE_UINT32: nr_buf_u64(d, v.u32); break;
        case NR_TYPE_UINT64: nr_buf_u64(d, v.u64); break;
        case NR_TYPE_INT8: nr_buf_i64(d, v.i8); break;
        case NR_TYPE_INT16: nr_buf_i64(d, v.i16); break;
        case NR_TYPE_INT32: nr_buf_i64(d, v.i32); break;
        case NR_TYPE_INT64: nr_buf_i64(d, v.i64); break;
        case NR_TYPE_FP32: nr_buf_printf(d, "%g", (double)v.f); break;
        case NR_TYPE_FP64: nr_buf_printf(d, "%g", v.g); break;
        default: break;
        }
    }
}

static void tensor(nr_buf_t *b, nr_buf_t *tmp, uint64_t id, const char *activity,
                   const char *name, const nr_tensor_t *t)
{
    if (t->data == NULL && t->size > 0)
        return;
    nr_buf_printf(b, ",{\"id\":%" PRIu64 ",\"activity\":\"%s\",\"tensor\":{\"name\":", id,
                  activity);
    nr_buf_json_str(b, name, strlen(name));
    nr_buf_reset(tmp);
    tensor_data(tmp, t);
    nr_buf_puts(b, ",\"data\":");
    nr_buf_json_str(b, tmp->data ? tmp->data : "", tmp->len);
    nr_buf_puts(b, ",\"shape\":\"");
    for (size_t i = 0; i < t->ndim; i++)
        nr_buf_printf(b, "%s%" PRId64, i ? "," : "", t->dims[i]);
    const char *dt = nr_dtype_kserve_name(t->dtype);
    nr_buf_printf(b, "\",\"dtype\":\"%s\"}}", dt != NULL ? dt : "");
}

/* The records of one trace, each after a comma (the first one's is dropped by the caller). */
static void render(nr_buf_t *b, const nr_trace_t *t, const nr_req_t *req)
{
    const nr_model_t *m = req->model;
    nr_buf_printf(b, ",{\"id\":%" PRIu64 ",\"model_name\":", t->id);
    nr_buf_json_str(b, m->name, strlen(m->name));
    nr_buf_printf(b, ",\"model_version\":%" PRId64, m->version);
    if (req->id != NULL && req->id[0]) {
        nr_buf_puts(b, ",\"request_id\":");
        nr_buf_json_str(b, req->id, strlen(req->id));
    }
    if (t->parent_id != 0)
        nr_buf_printf(b, ",\"parent_id\":%" PRIu64, t->parent_id);
    nr_buf_putc(b, '}');
    if (t->level & NR_TRACE_TIMESTAMPS) {
        bool grpc = t->proto == NR_TRACE_GRPC;
        stamp(b, t->id, grpc ? "GRPC_WAITREAD_START" : "HTTP_RECV_START", t->recv[0]);
        stamp(b, t->id, grpc ? "GRPC_WAITREAD_END" : "HTTP_RECV_END", t->recv[1]);
        stamp(b, t->id, "REQUEST_START", req->t_start_ns);
        stamp(b, t->id, "QUEUE_START", req->t_queue_ns);
        if (m->ensemble == NULL) { /* an ensemble computes nothing itself: its steps do */
            stamp(b, t->id, "COMPUTE_START", req->t_exec_ns);
            stamp(b, t->id, "COMPUTE_INPUT_END", req->t_input_end_ns);
            stamp(b, t->id, "COMPUTE_OUTPUT_START", req->t_infer_end_ns);
            stamp(b, t->id, "COMPUTE_END", req->t_end_ns);
        }
        stamp(b, t->id, "INFER_RESPONSE_COMPLETE",
              t->first_resp_ns ? t->first_resp_ns : t->done_ns);
        stamp(b, t->id, "REQUEST_END", t->done_ns);
        stamp(b, t->id, grpc ? "GRPC_SEND_START" : "HTTP_SEND_START", t->send[0]);
        stamp(b, t->id, grpc ? "GRPC_SEND_END" : "HTTP_SEND_END", t->send[1]);
    }
    if (t->level & NR_TRACE_TENSORS) {
        nr_buf_t tmp;
        nr_buf_init(&tmp);
        const nr_model_config_t *cfg = m->cfg;
        for (size_t i = 0; i < cfg->n_input; i++)
            if (req->present[i])
                tensor(b, &tmp, t->id, "TENSOR_QUEUE_INPUT", cfg->input[i].name,
                       &req->inputs[i]);
        for (size_t k = 0; req->status == NULL && k < req->n_want; k++)
            if (req->outputs[k].data != NULL)
                tensor(b, &tmp, t->id, "TENSOR_BACKEND_OUTPUT", cfg->output[req->want[k]].name,
                       &req->outputs[k]);
        nr_buf_free(&tmp);
    }
}

/* A root trace whose records are all in: into its setting's stream, saved when Triton saves it
 * (log_frequency traces collected, or every trace `count` asked for). */
static void write_root(nr_trace_t *t)
{
    setting_t *s = t->setting;
    if (t->otel) { /* its spans have gone to the exporter */
        pthread_mutex_destroy(&t->mu);
        setting_unref(s);
        free(t);
        return;
    }
    pthread_mutex_lock(&T.mu); /* the sampling side: once count is 0, created is final */
    bool all_in_count = s->count == 0, unlimited = s->count < 0;
    uint64_t created = s->created;
    pthread_mutex_unlock(&T.mu);
    pthread_mutex_lock(&s->mu);
    if (s->in_stream > 0)
        nr_buf_putc(&s->stream, ',');
    nr_buf_append(&s->stream, t->out.data + 1, t->out.len - 1); /* its leading comma */
    s->in_stream++;
    s->collected++;
    nr_buf_t save = {0};
    bool indexed = (all_in_count && s->collected == created) ||
                   (s->log_frequency != 0 && s->in_stream >= s->log_frequency);
    /* Triton keeps an unlimited run's traces in memory until exit when no log_frequency is set;
     * appending them to <file> as they pile up gives the same file with bounded memory */
    bool early = !indexed && s->log_frequency == 0 && unlimited &&
                 s->stream.len >= STREAM_FLUSH_BYTES;
    if (indexed || early) {
        save = s->stream;
        nr_buf_init(&s->stream);
        s->in_stream = 0;
    }
    pthread_mutex_unlock(&s->mu);
    if (indexed || early) {
        file_save(s->file, &save, indexed);
        nr_buf_free(&save);
    }
    nr_buf_free(&t->out);
    pthread_mutex_destroy(&t->mu);
    setting_unref(s);
    free(t);
}

static void emit(const nr_trace_span_t *sp)
{
    pthread_mutex_lock(&T.mu); /* (the exporter is set at start and cleared at stop) */
    nr_trace_exporter_t e = T.exporter;
    pthread_mutex_unlock(&T.mu);
    if (e.span != NULL)
        e.span(e.ctx, sp);
}

/* Mode opentelemetry: the trace's spans, as Triton makes them (trace.h). */
static void send_spans(const nr_trace_t *t, const nr_req_t *req)
{
    if (!(t->level & NR_TRACE_TIMESTAMPS))
        return; /* (Triton makes spans from timestamps only) */
    const nr_model_t *m = req->model;
    uint64_t end = t->done_ns ? t->done_ns : nr_now_ns();
    bool root = t->root == t;
    nr_trace_attr_t attrs[5] = {
        {"triton.model_name", m->name, 0},
        {"triton.model_version", NULL, m->version},
        {"triton.trace_id", NULL, (int64_t)t->id},
        {"triton.trace_parent_id", NULL, (int64_t)t->parent_id},
        {"triton.request_id", req->id, 0},
    };
    nr_trace_event_t ev[4] = {{"REQUEST_START", req->t_start_ns},
                             {"QUEUE_START", req->t_queue_ns},
                             {"REQUEST_END", t->done_ns}};
    emit(&(nr_trace_span_t){
        .trace_id = t->trace_id, .span_id = t->model_span,
        .parent_span_id = root ? t->root_span : t->parent_span, .name = m->name,
        .start_ns = req->t_start_ns, .end_ns = end, .attrs = attrs,
        .n_attrs = req->id != NULL && req->id[0] ? 5 : 4, .events = ev, .n_events = 3});
    if (m->ensemble == NULL && req->t_exec_ns != 0) {
        nr_trace_event_t cev[4] = {{"COMPUTE_START", req->t_exec_ns},
                                  {"COMPUTE_INPUT_END", req->t_input_end_ns},
                                  {"COMPUTE_OUTPUT_START", req->t_infer_end_ns},
                                  {"COMPUTE_END", req->t_end_ns}};
        emit(&(nr_trace_span_t){
            .trace_id = t->trace_id, .span_id = t->compute_span, .parent_span_id = t->model_span,
            .name = "compute", .start_ns = req->t_exec_ns, .end_ns = req->t_end_ns,
            .events = cev, .n_events = 4});
    }
    if (root) { /* the request as the frontend saw it */
        bool grpc = t->proto == NR_TRACE_GRPC;
        nr_trace_event_t fev[4] = {
            {grpc ? "GRPC_WAITREAD_START" : "HTTP_RECV_START", t->recv[0]},
            {grpc ? "GRPC_WAITREAD_END" : "HTTP_RECV_END", t->recv[1]},
            {grpc ? "GRPC_SEND_START" : "HTTP_SEND_START", t->send[0]},
            {grpc ? "GRPC_SEND_END" : "HTTP_SEND_END", t->send[1]}};
        emit(&(nr_trace_span_t){
            .trace_id = t->trace_id, .span_id = t->root_span,
            .parent_span_id = t->remote_parent ? t->parent_span : NULL, .name = "InferRequest",
            .start_ns = t->recv[0] ? t->recv[0] : req->t_start_ns,
            .end_ns = t->send[1] ? t->send[1] : end, .events = fev, .n_events = 4});
    }
}

void nr_trace_end(nr_trace_t *t, const nr_req_t *req)
{
    nr_trace_t *root = t->root;
    if (t->otel) {
        send_spans(t, req);
    } else {
        nr_buf_t rec;
        nr_buf_init(&rec);
        render(&rec, t, req);
        pthread_mutex_lock(&root->mu);
        nr_buf_append(&root->out, rec.data, rec.len);
        pthread_mutex_unlock(&root->mu);
        nr_buf_free(&rec);
    }
    if (t != root)
        free(t);
    if (atomic_fetch_sub_explicit(&root->refs, 1, memory_order_acq_rel) == 1)
        write_root(root);
}
