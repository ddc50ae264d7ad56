/* perf_client.c - nereid-perf's HTTP/1.1 client (blocking, keep-alive, one per thread), the
 * server and model queries perf_analyzer makes, and the infer request (perf.h).
 *
 * The request is built once, headers and body together, with every input as a binary tensor
 * and every output asked for as binary data, as perf_analyzer's HTTP client sends it; each
 * worker then writes the same bytes. Responses are read by Content-Length.
 */
#include "perf.h"

#include "../../common/alloc.h"
#include "../../common/json.h"

#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>
#include <unistd.h>

static nr_status_t *server_error(const perf_resp_t *r);

uint64_t perf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

nr_status_t *perf_conn_init(perf_conn_t *c, const char *url)
{
    memset(c, 0, sizeof(*c));
    c->fd = -1;
    nr_buf_init(&c->in);
    if (strncmp(url, "http://", 7) == 0)
        url += 7;
    const char *colon = strrchr(url, ':');
    size_t hl = colon ? (size_t)(colon - url) : strlen(url);
    if (hl == 0 || hl >= sizeof(c->host))
        return nr_status_new(NR_INVALID_ARG, "invalid URL '%s'", url);
    memcpy(c->host, url, hl);
    c->host[hl] = '\0';
    c->port = 8000;
    if (colon) {
        char *end;
        long p = strtol(colon + 1, &end, 10);
        if (*end != '\0' && *end != '/')
            return nr_status_new(NR_INVALID_ARG, "invalid URL '%s'", url);
        c->port = (int)p;
    }
    char port[16];
    snprintf(port, sizeof(port), "%d", c->port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM}, *res = NULL;
    if (getaddrinfo(c->host, port, &hints, &res) != 0 || res == NULL)
        return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: Couldn't resolve host name");
    memcpy(&c->addr, res->ai_addr, res->ai_addrlen);
    c->addr_len = res->ai_addrlen;
    freeaddrinfo(res);
    return NULL;
}

void perf_conn_close(perf_conn_t *c)
{
    if (c->fd >= 0)
        close(c->fd);
    c->fd = -1;
    nr_buf_free(&c->in);
}

static nr_status_t *conn_open(perf_conn_t *c)
{
    c->fd = socket(c->addr.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (c->fd < 0)
        return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: %s", strerror(errno));
    if (connect(c->fd, (struct sockaddr *)&c->addr, c->addr_len) != 0) {
        close(c->fd);
        c->fd = -1;
        return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: Couldn't connect to server");
    }
    int one = 1;
    (void)setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    nr_buf_reset(&c->in);
    c->used = 0;
    return NULL;
}

static bool write_all(int fd, const char *p, size_t n)
{
    while (n > 0) {
        ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return false;
        p += w, n -= (size_t)w;
    }
    return true;
}

/* Reads more into c->in; false at EOF or error. */
static bool read_more(perf_conn_t *c)
{
    nr_buf_reserve(&c->in, 65536);
    for (;;) {
        ssize_t r = recv(c->fd, c->in.data + c->in.len, c->in.cap - c->in.len, 0);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            return false;
        c->in.len += (size_t)r;
        return true;
    }
}

static const char *find_header(const char *head, size_t n, const char *name)
{
    size_t nl = strlen(name);
    for (const char *p = head; p + nl + 1 < head + n; p++) {
        if ((p == head || p[-1] == '\n') && strncasecmp(p, name, nl) == 0 && p[nl] == ':') {
            p += nl + 1;
            while (*p == ' ' || *p == '\t')
                p++;
            return p;
        }
    }
    return NULL;
}

/* One attempt on an open connection: *retry when it turned out to be closed before any
 * response byte (the server may close an idle keep-alive connection). */
static nr_status_t *exchange_once(perf_conn_t *c, const nr_buf_t *head, const void *body,
                                  size_t len, perf_resp_t *r, bool *retry)
{
    *retry = false;
    /* drop the previous response */
    if (c->used) {
        memmove(c->in.data, c->in.data + c->used, c->in.len - c->used);
        c->in.len -= c->used;
        c->used = 0;
    }
    uint64_t t0 = perf_now_ns();
    if (!write_all(c->fd, head->data, head->len) || (len && !write_all(c->fd, body, len))) {
        *retry = true;
        return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: Send failed since rewinding "
                             "of the data stream failed");
    }
    uint64_t t1 = perf_now_ns(), first = 0;
    const char *eoh = NULL;
    while ((eoh = c->in.len ? memmem(c->in.data, c->in.len, "\r\n\r\n", 4) : NULL) == NULL) {
        if (!read_more(c)) {
            *retry = c->in.len == 0;
            return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: Server returned nothing "
                                 "(no headers, no data)");
        }
        if (!first)
            first = perf_now_ns();
    }
    if (!first)
        first = perf_now_ns();
    size_t hlen = (size_t)(eoh - c->in.data) + 4;
    int status = 0;
    if (sscanf(c->in.data, "HTTP/1.%*d %d", &status) != 1)
        return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: malformed response");
    const char *cl = find_header(c->in.data, hlen, "Content-Length");
    if (cl == NULL)
        return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: response without "
                             "Content-Length");
    size_t blen = (size_t)strtoull(cl, NULL, 10);
    const char *conn = find_header(c->in.data, hlen, "Connection");
    bool close_after = conn && strncasecmp(conn, "close", 5) == 0;
    while (c->in.len < hlen + blen)
        if (!read_more(c))
            return nr_status_new(NR_UNAVAILABLE, "HTTP client failed: Transferred a partial "
                                 "file");
    uint64_t t2 = perf_now_ns();
    r->status = status;
    r->body = c->in.data + hlen;
    r->body_len = blen;
    r->send_ns = t1 - t0;
    r->recv_ns = t2 - first;
    c->used = hlen + blen;
    if (close_after) { /* the body stays readable: `in` is kept */
        close(c->fd);
        c->fd = -1;
    }
    return NULL;
}

nr_status_t *perf_exchange(perf_conn_t *c, const char *method, const char *path,
                           const nr_buf_t *head, const void *body, size_t len, perf_resp_t *r)
{
    nr_buf_t h;
    nr_buf_init(&h);
    if (head == NULL) { /* a plain request */
        nr_buf_printf(&h, "%s %s HTTP/1.1\r\nHost: %s:%d\r\nContent-Length: %zu\r\n\r\n", method,
                      path, c->host, c->port, len);
        head = &h;
    }
    nr_status_t *st = NULL;
    for (int attempt = 0; attempt < 2; attempt++) {
        bool retry = false;
        nr_status_free(st);
        st = NULL;
        if (c->fd < 0 && (st = conn_open(c)) != NULL)
            break;
        st = exchange_once(c, head, body, len, r, &retry);
        if (st == NULL || !retry)
            break;
        close(c->fd);
        c->fd = -1;
    }
    nr_buf_free(&h);
    return st;
}

char *perf_error_text(const perf_resp_t *r)
{
    nr_status_t *st = server_error(r);
    char *s = nr_strdup(st->msg);
    nr_status_free(st);
    return s;
}

/* The server's {"error":"..."} text, or the body itself. */
static nr_status_t *server_error(const perf_resp_t *r)
{
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root, *e;
    nr_status_t *st = nr_json_parse(r->body, r->body_len, &doc, &root);
    if (st == NULL && (e = nr_jv_get(root, "error")) != NULL && e->type == NR_JV_STRING) {
        nr_status_t *out = nr_status_new(NR_INVALID_ARG, "%.*s", (int)e->n, e->u.str);
        nr_json_free(doc);
        return out;
    }
    nr_status_free(st);
    nr_json_free(doc);
    return nr_status_new(NR_INVALID_ARG, "HTTP %d: %.*s", r->status, (int)r->body_len, r->body);
}

nr_status_t *perf_get_json(perf_conn_t *c, const char *path, char **text, size_t *len)
{
    perf_resp_t r;
    nr_status_t *st = perf_exchange(c, "GET", path, NULL, NULL, 0, &r);
    if (st)
        return st;
    if (r.status != 200)
        return server_error(&r);
    *text = nr_strndup(r.body, r.body_len);
    *len = r.body_len;
    return NULL;
}

/* ---- the model ---- */

static const struct {
    const char *name;
    size_t size;
} g_types[] = {{"BOOL", 1},  {"UINT8", 1}, {"UINT16", 2}, {"UINT32", 4}, {"UINT64", 8},
               {"INT8", 1},  {"INT16", 2}, {"INT32", 4},  {"INT64", 8},  {"FP16", 2},
               {"FP32", 4},  {"FP64", 8},  {"BF16", 2},   {"BYTES", 0}};

static int type_size(const char *dt)
{
    for (size_t i = 0; i < sizeof(g_types) / sizeof(g_types[0]); i++)
        if (strcmp(g_types[i].name, dt) == 0)
            return (int)g_types[i].size;
    return -1;
}

static char *jstr(const nr_jv_t *v)
{
    return v && v->type == NR_JV_STRING ? nr_strndup(v->u.str, v->n) : nr_strdup("");
}

static nr_status_t *fetch(perf_conn_t *c, const char *what, const char *path, char **text,
                          nr_json_doc_t **doc, const nr_jv_t **root)
{
    size_t len;
    nr_status_t *st = perf_get_json(c, path, text, &len);
    if (st == NULL)
        st = nr_json_parse(*text, len, doc, root);
    if (st) {
        nr_status_t *out = nr_status_new(st->code, "failed to get %s: %s", what, st->msg);
        nr_status_free(st);
        return out;
    }
    return NULL;
}

static const perf_shape_t *shape_flag(const perf_opts_t *o, const char *name)
{
    for (size_t i = 0; i < o->n_shapes; i++)
        if (strcmp(o->shapes[i].name, name) == 0)
            return &o->shapes[i];
    return NULL;
}

/* The data of one input: zero, or random bytes (xorshift, fixed seed); BYTES elements are
 * --string-length random letters, each after its 4-byte length. */
static void input_data(nr_buf_t *b, const perf_input_t *in, size_t elems, const perf_opts_t *o,
                       uint64_t *seed)
{
    bool zero = o->input_data && strcmp(o->input_data, "zero") == 0;
    if (strcmp(in->datatype, "BYTES") == 0) {
        for (size_t i = 0; i < elems; i++) {
            uint32_t n = (uint32_t)o->string_length;
            nr_buf_append(b, &n, 4);
            for (uint32_t k = 0; k < n; k++) {
                *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
                nr_buf_putc(b, zero ? '0' : (char)('a' + *seed % 26));
            }
        }
        return;
    }
    size_t n = in->bytes;
    nr_buf_reserve(b, n);
    for (size_t i = 0; i < n; i++) {
        *seed ^= *seed << 13, *seed ^= *seed >> 7, *seed ^= *seed << 17;
        b->data[b->len + i] = zero ? 0 : (char)(*seed & 0x3f); /* small values: no NaN/Inf */
    }
    b->len += n;
}

nr_status_t *perf_model_load(perf_conn_t *c, const perf_opts_t *o, perf_model_t *m)
{
    memset(m, 0, sizeof(*m));
    nr_buf_init(&m->request);
    char *t1 = NULL, *t2 = NULL, *t3 = NULL, *path = NULL;
    nr_json_doc_t *d1 = NULL, *d2 = NULL, *d3 = NULL;
    const nr_jv_t *server, *meta, *cfg;
    nr_status_t *st = NULL;
    m->version = nr_strdup(o->version ? o->version : "");
    char *base = o->version ? nr_asprintf("/v2/models/%s/versions/%s", o->model, o->version)
                            : nr_asprintf("/v2/models/%s", o->model);
    if ((st = fetch(c, "model metadata", base, &t2, &d2, &meta)) != NULL)
        goto out;
    path = nr_asprintf("%s/config", base);
    if ((st = fetch(c, "model config", path, &t3, &d3, &cfg)) != NULL)
        goto out;
    if ((st = fetch(c, "server metadata", "/v2", &t1, &d1, &server)) != NULL)
        goto out;
    const nr_jv_t *ext = nr_jv_get(server, "extensions");
    for (size_t i = 0; ext && ext->type == NR_JV_ARRAY && i < ext->n; i++)
        if (ext->u.items[i].type == NR_JV_STRING && ext->u.items[i].n == 10 &&
            memcmp(ext->u.items[i].u.str, "statistics", 10) == 0)
            m->has_stats = true;
    const nr_jv_t *mbs = nr_jv_get(cfg, "max_batch_size");
    m->max_batch_size = mbs && nr_jv_is_number(mbs) ? (int)nr_jv_number(mbs) : 0;
    if (m->max_batch_size == 0 && o->batch > 1) {
        st = nr_status_new(NR_INVALID_ARG, "can not specify batch size > 1 as the model does not "
                           "support batching");
        goto out;
    }
    const nr_jv_t *ins = nr_jv_get(meta, "inputs"), *outs = nr_jv_get(meta, "outputs");
    m->n_inputs = ins && ins->type == NR_JV_ARRAY ? ins->n : 0;
    m->inputs = nr_calloc(m->n_inputs ? m->n_inputs : 1, sizeof(perf_input_t));
    for (size_t i = 0; i < m->n_inputs; i++) {
        perf_input_t *in = &m->inputs[i];
        const nr_jv_t *e = &ins->u.items[i], *shape = nr_jv_get(e, "shape");
        in->name = jstr(nr_jv_get(e, "name"));
        in->datatype = jstr(nr_jv_get(e, "datatype"));
        int tsize = type_size(in->datatype);
        if (tsize < 0) {
            st = nr_status_new(NR_INVALID_ARG, "unsupported datatype '%s' for input '%s'",
                               in->datatype, in->name);
            goto out;
        }
        const perf_shape_t *given = shape_flag(o, in->name);
        size_t nd = shape && shape->type == NR_JV_ARRAY ? shape->n : 0;
        size_t skip = m->max_batch_size > 0 && nd > 0 ? 1 : 0; /* the batch dimension */
        in->shape = nr_calloc(nd + (given ? given->n_dims : 0) + 1, sizeof(int64_t));
        if (skip)
            in->shape[in->n_shape++] = o->batch;
        if (given) {
            for (size_t k = 0; k < given->n_dims; k++)
                in->shape[in->n_shape++] = given->dims[k];
        } else {
            for (size_t k = skip; k < nd; k++) {
                int64_t d = nr_jv_is_number(&shape->u.items[k]) ? (int64_t)nr_jv_number(&shape->u.items[k]) : -1;
                if (d < 0) {
                    st = nr_status_new(NR_INVALID_ARG, "Failed to init manager inputs: input "
                                       "%s contains dynamic shape, provide shapes to send "
                                       "along with the request", in->name);
                    goto out;
                }
                in->shape[in->n_shape++] = d;
            }
        }
        size_t elems = 1;
        for (size_t k = 0; k < in->n_shape; k++)
            elems *= (size_t)in->shape[k];
        in->bytes = elems * (size_t)tsize; /* BYTES: set when the data is built */
    }
    m->n_outputs = outs && outs->type == NR_JV_ARRAY ? outs->n : 0;
    m->outputs = nr_calloc(m->n_outputs ? m->n_outputs : 1, sizeof(char *));
    for (size_t i = 0; i < m->n_outputs; i++)
        m->outputs[i] = jstr(nr_jv_get(&outs->u.items[i], "name"));

    /* the body: JSON header, then each input's bytes */
    nr_buf_t data, json;
    nr_buf_init(&data);
    nr_buf_init(&json);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    size_t *sizes = nr_calloc(m->n_inputs + 1, sizeof(size_t));
    for (size_t i = 0; i < m->n_inputs; i++) {
        size_t before = data.len, elems = 1;
        for (size_t k = 0; k < m->inputs[i].n_shape; k++)
            elems *= (size_t)m->inputs[i].shape[k];
        input_data(&data, &m->inputs[i], elems, o, &seed);
        sizes[i] = data.len - before;
        m->inputs[i].bytes = sizes[i];
    }
    nr_buf_puts(&json, "{\"inputs\":[");
    for (size_t i = 0; i < m->n_inputs; i++) {
        const perf_input_t *in = &m->inputs[i];
        nr_buf_printf(&json, "%s{\"name\":", i ? "," : "");
        nr_buf_json_str(&json, in->name, strlen(in->name));
        nr_buf_printf(&json, ",\"shape\":[");
        for (size_t k = 0; k < in->n_shape; k++)
            nr_buf_printf(&json, "%s%lld", k ? "," : "", (long long)in->shape[k]);
        nr_buf_printf(&json, "],\"datatype\":\"%s\",\"parameters\":{\"binary_data_size\":%zu}}",
                      in->datatype, sizes[i]);
    }
    nr_buf_puts(&json, "],\"outputs\":[");
    for (size_t i = 0; i < m->n_outputs; i++) {
        nr_buf_printf(&json, "%s{\"name\":", i ? "," : "");
        nr_buf_json_str(&json, m->outputs[i], strlen(m->outputs[i]));
        nr_buf_puts(&json, ",\"parameters\":{\"binary_data\":true}}");
    }
    nr_buf_puts(&json, "]}");
    m->path = nr_asprintf("%s/infer", base);
    nr_buf_printf(&m->request, "POST %s HTTP/1.1\r\nHost: %s:%d\r\n", m->path, c->host, c->port);
    for (size_t i = 0; i < o->n_headers; i++)
        nr_buf_printf(&m->request, "%s: %s\r\n", o->headers[i].name, o->headers[i].value);
    nr_buf_printf(&m->request, "Content-Type: application/octet-stream\r\n"
                  "Inference-Header-Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n",
                  json.len, json.len + data.len);
    nr_buf_append(&m->request, json.data, json.len);
    nr_buf_append(&m->request, data.data, data.len);
    nr_buf_free(&json);
    nr_buf_free(&data);
    free(sizes);
out:
    free(base);
    free(path);
    nr_json_free(d1);
    nr_json_free(d2);
    nr_json_free(d3);
    free(t1);
    free(t2);
    free(t3);
    return st;
}

void perf_model_free(perf_model_t *m)
{
    for (size_t i = 0; i < m->n_inputs; i++) {
        free(m->inputs[i].name);
        free(m->inputs[i].datatype);
        free(m->inputs[i].shape);
    }
    for (size_t i = 0; i < m->n_outputs; i++)
        free(m->outputs[i]);
    free(m->inputs);
    free(m->outputs);
    free(m->version);
    free(m->path);
    nr_buf_free(&m->request);
}

/* ---- statistics ---- */

#define N_STATS (sizeof(perf_server_stats_t) / sizeof(uint64_t)) /* all uint64_t */

void perf_stats_add(perf_server_stats_t *a, const perf_server_stats_t *b)
{
    uint64_t v[N_STATS], w[N_STATS];
    memcpy(v, a, sizeof(v));
    memcpy(w, b, sizeof(w));
    for (size_t i = 0; i < N_STATS; i++)
        v[i] += w[i];
    memcpy(a, v, sizeof(v));
}

void perf_stats_diff(perf_server_stats_t *d, const perf_server_stats_t *now,
                     const perf_server_stats_t *prev)
{
    uint64_t v[N_STATS], w[N_STATS];
    memcpy(v, now, sizeof(v));
    memcpy(w, prev, sizeof(w));
    for (size_t i = 0; i < N_STATS; i++)
        v[i] -= w[i];
    memcpy(d, v, sizeof(v));
}

static uint64_t u64_at(const nr_jv_t *o, const char *a, const char *b)
{
    const nr_jv_t *v = nr_jv_get(o, a);
    if (b)
        v = nr_jv_get(v, b);
    return v && nr_jv_is_uint(v) ? (uint64_t)v->u.i : 0;
}

nr_status_t *perf_server_stats(perf_conn_t *c, const perf_opts_t *o, perf_server_stats_t *s)
{
    char *path = o->version ? nr_asprintf("/v2/models/%s/versions/%s/stats", o->model, o->version)
                            : nr_asprintf("/v2/models/%s/stats", o->model);
    char *text = NULL;
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = fetch(c, "model statistics", path, &text, &doc, &root);
    free(path);
    memset(s, 0, sizeof(*s));
    if (st == NULL) {
        /* every version listed: summed (without -x the server lists the versions it serves) */
        const nr_jv_t *list = nr_jv_get(root, "model_stats");
        for (size_t i = 0; list && list->type == NR_JV_ARRAY && i < list->n; i++) {
            const nr_jv_t *e = &list->u.items[i], *is = nr_jv_get(e, "inference_stats");
            s->inference_count += u64_at(e, "inference_count", NULL);
            s->execution_count += u64_at(e, "execution_count", NULL);
            s->success_count += u64_at(is, "success", "count");
            s->success_ns += u64_at(is, "success", "ns");
            s->queue_count += u64_at(is, "queue", "count");
            s->queue_ns += u64_at(is, "queue", "ns");
            s->input_count += u64_at(is, "compute_input", "count");
            s->input_ns += u64_at(is, "compute_input", "ns");
            s->infer_count += u64_at(is, "compute_infer", "count");
            s->infer_ns += u64_at(is, "compute_infer", "ns");
            s->output_count += u64_at(is, "compute_output", "count");
            s->output_ns += u64_at(is, "compute_output", "ns");
        }
    }
    nr_json_free(doc);
    free(text);
    return st;
}
