/* otlp.c - OTLP/HTTP span export (otlp.h). */
#include "otlp.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"
#include "../../common/clock.h"
#include "../../common/log.h"
#include "../../common/varint.h"
#include "proto/otlp_trace.pb-c.h"

#include <curl/curl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_URL "http://localhost:4318/v1/traces"
#define EXPORT_TIMEOUT_MS 10000L /* OpenTelemetry's OTLP exporter default */
#define FINAL_TIMEOUT_MS 2000L
#define SCOPE_NAME "triton-server" /* Triton's tracer name */

typedef struct span_s {
    struct span_s *next;
    size_t len;
    uint8_t data[]; /* a packed Span */
} span_t;

static struct {
    pthread_mutex_t mu; /* guards the queue and the flags below */
    pthread_cond_t cv;
    span_t *head, *tail;
    size_t n;
    bool running, stop, dropping;
    pthread_t thread;
    /* set at start, read by the thread and queue_span */
    char *url;
    nr_buf_t resource, scope; /* packed Resource and InstrumentationScope */
    uint32_t max_queue, delay_ms, max_batch;
    int64_t offset_ns; /* Unix time - CLOCK_MONOTONIC */
    atomic_ullong exported, dropped;
} X = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* ---- packing -------------------------------------------------------------------------------- */

static void pack_into(const ProtobufCMessage *m, nr_buf_t *b)
{
    size_t n = protobuf_c_message_get_packed_size(m);
    nr_buf_reserve(b, n);
    protobuf_c_message_pack(m, (uint8_t *)b->data + b->len);
    b->len += n;
}

/* A length-delimited field: tag, length, bytes. */
static void put_field(nr_buf_t *b, unsigned field, const void *p, size_t n)
{
    uint8_t tmp[1 + NR_VARINT_MAX];
    size_t k = nr_varint_put(tmp, (uint64_t)field << 3 | 2);
    k += nr_varint_put(tmp + k, n);
    nr_buf_append(b, tmp, k);
    nr_buf_append(b, p, n);
}

static void kv_init(Nereid__Otlp__KeyValue *kv, Nereid__Otlp__AnyValue *v, const char *key,
                    const char *str, int64_t num)
{
    nereid__otlp__key_value__init(kv);
    nereid__otlp__any_value__init(v);
    kv->key = (char *)key;
    kv->value = v;
    if (str != NULL) {
        v->value_case = NEREID__OTLP__ANY_VALUE__VALUE_STRING_VALUE;
        v->string_value = (char *)str;
    } else {
        v->value_case = NEREID__OTLP__ANY_VALUE__VALUE_INT_VALUE;
        v->int_value = num;
    }
}

static uint64_t unix_ns(uint64_t mono)
{
    return (uint64_t)((int64_t)mono + X.offset_ns);
}

/* The core's exporter hook (nr_trace_exporter_t.span): packs the span and queues it. */
static void queue_span(void *ctx, const nr_trace_span_t *s)
{
    Nereid__Otlp__Span sp;
    nereid__otlp__span__init(&sp);
    sp.trace_id = (ProtobufCBinaryData){16, (uint8_t *)s->trace_id};
    sp.span_id = (ProtobufCBinaryData){8, (uint8_t *)s->span_id};
    if (s->parent_span_id != NULL)
        sp.parent_span_id = (ProtobufCBinaryData){8, (uint8_t *)s->parent_span_id};
    sp.name = (char *)s->name;
    sp.kind = NEREID__OTLP__SPAN__SPAN_KIND__SPAN_KIND_SERVER;
    sp.start_time_unix_nano = unix_ns(s->start_ns);
    sp.end_time_unix_nano = unix_ns(s->end_ns);
    Nereid__Otlp__KeyValue kv[8], *kvp[8];
    Nereid__Otlp__AnyValue av[8];
    size_t na = s->n_attrs < 8 ? s->n_attrs : 8;
    for (size_t i = 0; i < na; i++) {
        kv_init(&kv[i], &av[i], s->attrs[i].key, s->attrs[i].str, s->attrs[i].num);
        kvp[i] = &kv[i];
    }
    sp.n_attributes = na;
    sp.attributes = kvp;
    Nereid__Otlp__Span__Event ev[16], *evp[16];
    size_t ne = 0;
    for (size_t i = 0; i < s->n_events && ne < 16; i++) {
        if (s->events[i].ns == 0)
            continue;
        nereid__otlp__span__event__init(&ev[ne]);
        ev[ne].name = (char *)s->events[i].name;
        ev[ne].time_unix_nano = unix_ns(s->events[i].ns);
        evp[ne] = &ev[ne];
        ne++;
    }
    sp.n_events = ne;
    sp.events = evp;
    size_t len = nereid__otlp__span__get_packed_size(&sp);
    span_t *q = malloc(sizeof(*q) + len);
    if (q == NULL) {
        atomic_fetch_add(&X.dropped, 1);
        return;
    }
    q->next = NULL;
    q->len = len;
    nereid__otlp__span__pack(&sp, q->data);
    pthread_mutex_lock(&X.mu);
    if (!X.running || X.n >= X.max_queue) {
        bool first = X.running && !X.dropping;
        X.dropping = X.running;
        pthread_mutex_unlock(&X.mu);
        free(q);
        atomic_fetch_add(&X.dropped, 1);
        if (first)
            NR_LOG_WARN("OpenTelemetry: the span queue is full (bsp_max_queue_size %u): spans "
                        "are dropped until it drains", X.max_queue);
        return;
    }
    X.dropping = false;
    if (X.tail != NULL)
        X.tail->next = q;
    else
        X.head = q;
    X.tail = q;
    X.n++;
    if (X.n >= X.max_batch)
        pthread_cond_signal(&X.cv);
    pthread_mutex_unlock(&X.mu);
}

/* ---- export ------------------------------------------------------------------------------- */

static size_t discard(char *p, size_t size, size_t n, void *arg)
{
    return size * n;
}

/* libcurl asks now and then whether to go on: an export waiting on a collector that does not
 * answer is given up as soon as the server stops (the final flush then has its own 2 s). */
static atomic_bool abort_export;

static int progress(void *arg, curl_off_t dlt, curl_off_t dln, curl_off_t ult, curl_off_t uln)
{
    return atomic_load(&abort_export) ? 1 : 0;
}

/* Sends a batch (freeing it); whether the collector took it. */
static bool export_batch(CURL *curl, span_t *batch, size_t n, long timeout_ms, bool *failing)
{
    nr_buf_t scope_spans, resource_spans, body;
    nr_buf_init(&scope_spans);
    nr_buf_init(&resource_spans);
    nr_buf_init(&body);
    put_field(&scope_spans, 1, X.scope.data, X.scope.len);
    for (span_t *s = batch, *next; s != NULL; s = next) {
        next = s->next;
        put_field(&scope_spans, 2, s->data, s->len);
        free(s);
    }
    put_field(&resource_spans, 1, X.resource.data, X.resource.len);
    put_field(&resource_spans, 2, scope_spans.data, scope_spans.len);
    put_field(&body, 1, resource_spans.data, resource_spans.len);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDS, body.data);
    curl_easy_setopt(curl, CURLOPT_POSTFIELDSIZE, (long)body.len);
    curl_easy_setopt(curl, CURLOPT_TIMEOUT_MS, timeout_ms);
    CURLcode rc = curl_easy_perform(curl);
    long status = 0;
    if (rc == CURLE_OK)
        curl_easy_getinfo(curl, CURLINFO_RESPONSE_CODE, &status);
    bool ok = rc == CURLE_OK && status >= 200 && status < 300;
    if (ok) {
        atomic_fetch_add(&X.exported, n);
        if (*failing)
            NR_LOG_INFO("OpenTelemetry: exporting spans to %s works again", X.url);
    } else {
        atomic_fetch_add(&X.dropped, n);
        if (!*failing) {
            if (rc != CURLE_OK)
                NR_LOG_WARN("OpenTelemetry: cannot export spans to %s: %s (spans are dropped "
                            "while it fails)", X.url, curl_easy_strerror(rc));
            else
                NR_LOG_WARN("OpenTelemetry: exporting spans to %s answered HTTP %ld (spans are "
                            "dropped while it fails)", X.url, status);
        }
    }
    *failing = !ok;
    nr_buf_free(&scope_spans);
    nr_buf_free(&resource_spans);
    nr_buf_free(&body);
    return ok;
}

static void drop_batch(span_t *batch, size_t n)
{
    atomic_fetch_add(&X.dropped, n);
    for (span_t *s = batch, *next; s != NULL; s = next) {
        next = s->next;
        free(s);
    }
}

/* Under X.mu: up to max_batch queued spans, off the queue. */
static span_t *take_batch(size_t *n)
{
    span_t *batch = X.head, *last = NULL;
    size_t k = 0;
    for (span_t *s = X.head; s != NULL && k < X.max_batch; s = s->next, k++)
        last = s;
    if (last != NULL) {
        X.head = last->next;
        last->next = NULL;
        if (X.head == NULL)
            X.tail = NULL;
    }
    X.n -= k;
    *n = k;
    return k ? batch : NULL;
}

static void *exporter_main(void *arg)
{
    CURL *curl = arg;
    bool failing = false;
    uint64_t last = nr_now_ns();
    pthread_mutex_lock(&X.mu);
    for (;;) {
        uint64_t due = last + (uint64_t)X.delay_ms * 1000000ull;
        while (!X.stop && X.n < X.max_batch && nr_now_ns() < due) {
            struct timespec ts = nr_timespec_of(due);
            pthread_cond_timedwait(&X.cv, &X.mu, &ts);
        }
        if (X.stop)
            break;
        size_t n;
        span_t *batch = take_batch(&n);
        last = nr_now_ns();
        if (batch == NULL)
            continue;
        pthread_mutex_unlock(&X.mu);
        export_batch(curl, batch, n, EXPORT_TIMEOUT_MS, &failing);
        pthread_mutex_lock(&X.mu);
    }
    /* stopping: what is queued gets one more chance, within FINAL_TIMEOUT_MS in all */
    atomic_store(&abort_export, false);
    uint64_t end = nr_now_ns() + FINAL_TIMEOUT_MS * 1000000ull;
    size_t n;
    span_t *batch;
    while ((batch = take_batch(&n)) != NULL) {
        pthread_mutex_unlock(&X.mu);
        uint64_t now = nr_now_ns();
        long left = now < end ? (long)((end - now) / 1000000ull) : 0;
        if (left > 0)
            export_batch(curl, batch, n, left, &failing);
        else
            drop_batch(batch, n);
        pthread_mutex_lock(&X.mu);
    }
    pthread_mutex_unlock(&X.mu);
    curl_easy_cleanup(curl);
    return NULL;
}

/* ---- lifecycle ---------------------------------------------------------------------------- */

/* The exporter's configuration, from the settings (nr_otlp_start). */
typedef struct {
    const char *url;
    const char **resource; /* "key=value" */
    size_t n_resource;
    uint32_t max_queue, schedule_delay_ms, max_batch;
    char *env; /* OTEL_RESOURCE_ATTRIBUTES' copy, which resource points into */
} config_t;

static bool key_is(const char *kv, const char *key, const char **value)
{
    size_t n = strlen(key);
    if (strncmp(kv, key, n) != 0 || kv[n] != '=')
        return false;
    *value = kv + n + 1;
    return true;
}

static void config_of(const char *const *settings, size_t n, config_t *c)
{
    *c = (config_t){.url = DEFAULT_URL, .max_queue = 2048, .schedule_delay_ms = 5000,
                    .max_batch = 512};
    const char *env = getenv("OTEL_RESOURCE_ATTRIBUTES"); /* "k=v,k=v", before the flags' */
    c->env = env != NULL && env[0] ? nr_strdup(env) : NULL;
    size_t cap = n + 1;
    for (const char *p = c->env; p != NULL && *p; p++)
        cap += *p == ',';
    c->resource = nr_calloc(cap, sizeof(char *));
    char *save = NULL;
    for (char *kv = c->env ? strtok_r(c->env, ",", &save) : NULL; kv;
         kv = strtok_r(NULL, ",", &save))
        c->resource[c->n_resource++] = kv;
    for (size_t i = 0; i < n; i++) {
        const char *v;
        if (key_is(settings[i], "url", &v))
            c->url = v;
        else if (key_is(settings[i], "resource", &v))
            c->resource[c->n_resource++] = v;
        else if (key_is(settings[i], "bsp_max_queue_size", &v))
            c->max_queue = (uint32_t)strtoul(v, NULL, 10);
        else if (key_is(settings[i], "bsp_schedule_delay", &v))
            c->schedule_delay_ms = (uint32_t)strtoul(v, NULL, 10);
        else if (key_is(settings[i], "bsp_max_export_batch_size", &v))
            c->max_batch = (uint32_t)strtoul(v, NULL, 10);
    }
}

static void pack_resource(const config_t *c)
{
    size_t n = 1 + c->n_resource;
    Nereid__Otlp__KeyValue *kv = nr_calloc(n, sizeof(*kv));
    Nereid__Otlp__KeyValue **kvp = nr_calloc(n, sizeof(*kvp));
    Nereid__Otlp__AnyValue *av = nr_calloc(n, sizeof(*av));
    char **keys = nr_calloc(n, sizeof(char *));
    size_t k = 0;
    bool named = false;
    for (size_t i = 0; i < c->n_resource; i++) {
        const char *eq = strchr(c->resource[i], '=');
        if (eq == NULL)
            continue;
        char *key = nr_strndup(c->resource[i], (size_t)(eq - c->resource[i]));
        named |= !strcmp(key, "service.name");
        size_t at = 0;
        while (at < k && strcmp(keys[at], key)) /* a key given again: its last value */
            at++;
        if (at < k) {
            free(key);
            av[at].string_value = (char *)eq + 1;
            continue;
        }
        keys[k] = key;
        kv_init(&kv[k], &av[k], keys[k], eq + 1, 0);
        kvp[k] = &kv[k];
        k++;
    }
    if (!named) { /* Triton's default */
        kv_init(&kv[k], &av[k], "service.name", "triton-inference-server", 0);
        kvp[k] = &kv[k];
        k++;
    }
    Nereid__Otlp__Resource r = NEREID__OTLP__RESOURCE__INIT;
    r.n_attributes = k;
    r.attributes = kvp;
    nr_buf_init(&X.resource);
    pack_into(&r.base, &X.resource);
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
    free(kv);
    free(kvp);
    free(av);
    Nereid__Otlp__InstrumentationScope sc = NEREID__OTLP__INSTRUMENTATION_SCOPE__INIT;
    sc.name = SCOPE_NAME;
    nr_buf_init(&X.scope);
    pack_into(&sc.base, &X.scope);
}

static void release_config(void)
{
    free(X.url);
    X.url = NULL;
    nr_buf_free(&X.resource);
    nr_buf_free(&X.scope);
}

static void global_init(void)
{
    curl_global_init(CURL_GLOBAL_DEFAULT); /* once, before any handle (not thread-safe) */
}

nr_status_t *nr_otlp_start(const char *const *settings, size_t n_settings)
{
    nr_otlp_stop();
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, global_init);
    CURL *curl = curl_easy_init();
    if (curl == NULL)
        return nr_status_new(NR_UNAVAILABLE, "OpenTelemetry: cannot start libcurl");
    config_t cfg, *c = &cfg;
    config_of(settings, n_settings, c);
    X.url = nr_strdup(c->url[0] ? c->url : DEFAULT_URL);
    X.max_queue = c->max_queue ? c->max_queue : 1;
    X.max_batch = c->max_batch ? c->max_batch : 1;
    X.delay_ms = c->schedule_delay_ms;
    struct timespec rt;
    clock_gettime(CLOCK_REALTIME, &rt);
    X.offset_ns = (int64_t)rt.tv_sec * 1000000000 + rt.tv_nsec - (int64_t)nr_now_ns();
    pack_resource(c);
    free(c->resource);
    free(c->env);
    static struct curl_slist *headers;
    if (headers == NULL)
        headers = curl_slist_append(NULL, "Content-Type: application/x-protobuf");
    curl_easy_setopt(curl, CURLOPT_URL, X.url);
    curl_easy_setopt(curl, CURLOPT_POST, 1L);
    curl_easy_setopt(curl, CURLOPT_HTTPHEADER, headers);
    curl_easy_setopt(curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(curl, CURLOPT_CONNECTTIMEOUT_MS, 2000L);
    curl_easy_setopt(curl, CURLOPT_WRITEFUNCTION, discard);
    curl_easy_setopt(curl, CURLOPT_XFERINFOFUNCTION, progress);
    curl_easy_setopt(curl, CURLOPT_NOPROGRESS, 0L);
    atomic_store(&abort_export, false);
    pthread_mutex_lock(&X.mu);
    X.stop = false;
    X.dropping = false;
    X.running = true;
    pthread_mutex_unlock(&X.mu);
    nr_cond_init_monotonic(&X.cv);
    if (pthread_create(&X.thread, NULL, exporter_main, curl) != 0) {
        pthread_mutex_lock(&X.mu);
        X.running = false;
        pthread_mutex_unlock(&X.mu);
        curl_easy_cleanup(curl);
        pthread_cond_destroy(&X.cv);
        release_config();
        return nr_status_new(NR_UNAVAILABLE, "OpenTelemetry: cannot start the exporter thread");
    }
    pthread_setname_np(X.thread, "otlp-export");
    nr_trace_set_exporter(&(nr_trace_exporter_t){queue_span, NULL});
    return NULL;
}

void nr_otlp_stop(void)
{
    nr_trace_set_exporter(NULL); /* no span comes any more */
    pthread_mutex_lock(&X.mu);
    bool was = X.running;
    X.running = false;
    X.stop = true;
    atomic_store(&abort_export, was); /* the export in flight, if any, gives up */
    pthread_cond_signal(&X.cv);
    pthread_mutex_unlock(&X.mu);
    if (!was)
        return;
    pthread_join(X.thread, NULL);
    NR_LOG_VERBOSE(1, "OpenTelemetry: %llu spans exported to %s, %llu dropped",
                   (unsigned long long)atomic_load(&X.exported), X.url,
                   (unsigned long long)atomic_load(&X.dropped));
    pthread_cond_destroy(&X.cv);
    release_config();
}

