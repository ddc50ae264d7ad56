/* perf_http.c - nereid-perf over HTTP (perf.h): a blocking HTTP/1.1 client (keep-alive, one
 * per thread), the server and model queries perf_analyzer makes, and the infer request.
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
    r->head = c->in.data;
    r->head_len = hlen;
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
        if (st == NULL)
            break;
        close(c->fd); /* what is left in the buffer belongs to no request now */
        c->fd = -1;
        if (!retry)
            break;
    }
    nr_buf_free(&h);
    return st;
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

char *perf_error_text(const perf_resp_t *r)
{
    nr_status_t *st = server_error(r);
    char *s = nr_strdup(st->msg);
    nr_status_free(st);
    return s;
}

nr_status_t *perf_get_body(perf_conn_t *c, const char *path, char **text, size_t *len)
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

/* ---- the model, over HTTP ---- */

static char *jstr(const nr_jv_t *v)
{
    return v && v->type == NR_JV_STRING ? nr_strndup(v->u.str, v->n) : nr_strdup("");
}

static nr_status_t *fetch(perf_conn_t *c, const char *what, const char *path, char **text,
                          nr_json_doc_t **doc, const nr_jv_t **root)
{
    size_t len;
    nr_status_t *st = perf_get_body(c, path, text, &len);
    if (st == NULL)
        st = nr_json_parse(*text, len, doc, root);
    if (st) {
        nr_status_t *out = nr_status_new(st->code, "failed to get %s: %s", what, st->msg);
        nr_status_free(st);
        return out;
    }
    return NULL;
}

/* One metadata tensor ({"name","datatype","shape"}) into in, or (in NULL) into out. */
static nr_status_t *http_tensor(const nr_jv_t *e, int mbs, const perf_opts_t *o,
                                perf_input_t *in, perf_output_t *out)
{
    const nr_jv_t *shape = nr_jv_get(e, "shape");
    size_t nd = shape && shape->type == NR_JV_ARRAY ? shape->n : 0;
    int64_t *dims = nr_calloc(nd + 1, sizeof(int64_t));
    for (size_t k = 0; k < nd; k++)
        dims[k] = nr_jv_is_number(&shape->u.items[k]) ? (int64_t)nr_jv_number(&shape->u.items[k])
                                                      : -1;
    char *name = jstr(nr_jv_get(e, "name")), *dt = jstr(nr_jv_get(e, "datatype"));
    nr_status_t *st = NULL;
    if (in)
        st = perf_input_init(in, name, dt, dims, nd, mbs, o);
    else
        perf_output_init(out, name, dt, dims, nd, mbs, o);
    free(name);
    free(dt);
    free(dims);
    return st;
}

/* A tensor's "parameters": its region with --shared-memory system, else binary data. */
static void http_params(nr_buf_t *json, const char *region, size_t shm_bytes, bool input,
                        size_t bytes)
{
    if (region) {
        nr_buf_puts(json, ",\"parameters\":{\"shared_memory_region\":");
        nr_buf_json_str(json, region, strlen(region));
        nr_buf_printf(json, ",\"shared_memory_byte_size\":%zu}}", shm_bytes);
    } else if (input) {
        nr_buf_printf(json, ",\"parameters\":{\"binary_data_size\":%zu}}", bytes);
    } else {
        nr_buf_puts(json, ",\"parameters\":{\"binary_data\":true}}");
    }
}

typedef struct {
    const perf_conn_t *c;
    const perf_opts_t *o;
} http_ctx_t;

/* One infer request: the JSON header (inputs with their shapes, binary data, every output
 * asked for as binary), then each input's bytes; with --shared-memory system the header alone,
 * naming the regions. */
static nr_status_t *http_request(void *arg, const perf_model_t *m, const nr_buf_t *data,
                                 nr_buf_t *req)
{
    const http_ctx_t *ctx = arg;
    nr_buf_t json;
    nr_buf_init(&json);
    nr_buf_puts(&json, "{\"inputs\":[");
    for (size_t i = 0; i < m->n_inputs; i++) {
        const perf_input_t *in = &m->inputs[i];
        nr_buf_printf(&json, "%s{\"name\":", i ? "," : "");
        nr_buf_json_str(&json, in->name, strlen(in->name));
        nr_buf_printf(&json, ",\"shape\":[");
        for (size_t k = 0; k < in->n_shape; k++)
            nr_buf_printf(&json, "%s%lld", k ? "," : "", (long long)in->shape[k]);
        nr_buf_printf(&json, "],\"datatype\":\"%s\"", in->datatype);
        http_params(&json, in->region, in->bytes, true, in->bytes);
    }
    nr_buf_puts(&json, "],\"outputs\":[");
    for (size_t i = 0; i < m->n_outputs; i++) {
        nr_buf_printf(&json, "%s{\"name\":", i ? "," : "");
        const perf_output_t *out = &m->outputs[i];
        nr_buf_json_str(&json, out->name, strlen(out->name));
        http_params(&json, out->region, out->shm_bytes, false, 0);
    }
    nr_buf_puts(&json, "]}");
    size_t body = 0;
    for (size_t i = 0; i < m->n_inputs; i++)
        body += m->inputs[i].region ? 0 : m->inputs[i].bytes;
    nr_buf_printf(req, "POST %s HTTP/1.1\r\nHost: %s:%d\r\n", m->path, ctx->c->host,
                  ctx->c->port);
    for (size_t i = 0; i < ctx->o->n_headers; i++)
        nr_buf_printf(req, "%s: %s\r\n", ctx->o->headers[i].name, ctx->o->headers[i].value);
    nr_buf_printf(req, "Content-Type: application/octet-stream\r\n"
                  "Inference-Header-Content-Length: %zu\r\nContent-Length: %zu\r\n\r\n",
                  json.len, json.len + body);
    nr_buf_append(req, json.data, json.len);
    for (size_t i = 0; i < m->n_inputs; i++)
        if (m->inputs[i].region == NULL)
            nr_buf_append(req, data->data + m->inputs[i].offset, m->inputs[i].bytes);
    nr_buf_free(&json);
    return NULL;
}

/* A config's name and, for an ensemble, its steps (perf_config_t). Triton's JSON writes
 * int64 fields such as model_version as strings, nereid's as numbers: both are read. */
static void http_config(const nr_jv_t *cfg, perf_config_t *out)
{
    memset(out, 0, sizeof(*out));
    out->name = jstr(nr_jv_get(cfg, "name"));
    const nr_jv_t *pf = nr_jv_get(cfg, "platform");
    out->ensemble = pf && pf->type == NR_JV_STRING && pf->n == 8 &&
                    memcmp(pf->u.str, "ensemble", 8) == 0;
    const nr_jv_t *steps = nr_jv_get(nr_jv_get(cfg, "ensemble_scheduling"), "step");
    if (!out->ensemble || steps == NULL || steps->type != NR_JV_ARRAY)
        return;
    out->step_models = nr_calloc(steps->n + 1, sizeof(char *));
    out->step_versions = nr_calloc(steps->n + 1, sizeof(int64_t));
    for (size_t i = 0; i < steps->n; i++, out->n_steps++) {
        const nr_jv_t *st = &steps->u.items[i], *v = nr_jv_get(st, "model_version");
        out->step_models[i] = jstr(nr_jv_get(st, "model_name"));
        if (v && v->type == NR_JV_STRING)
            out->step_versions[i] = strtoll(v->u.str, NULL, 10);
        else if (v && nr_jv_is_number(v))
            out->step_versions[i] = (int64_t)nr_jv_number(v);
    }
}

/* perf_config_fn over HTTP: GET /v2/models/<name>[/versions/<version>]/config; an error in
 * perf_analyzer's words for a composing model's config. */
static nr_status_t *http_fetch_config(void *ctx, const char *name, const char *version,
                                      perf_config_t *out)
{
    char *path = *version ? nr_asprintf("/v2/models/%s/versions/%s/config", name, version)
                          : nr_asprintf("/v2/models/%s/config", name);
    char *text = NULL;
    size_t len;
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = perf_get_body(ctx, path, &text, &len);
    if (st == NULL)
        st = nr_json_parse(text, len, &doc, &root);
    if (st == NULL)
        http_config(root, out);
    nr_json_free(doc);
    free(text);
    free(path);
    return st ? nr_status_prefix(st, "failed to create model parser: ") : NULL;
}

nr_status_t *perf_model_load(perf_conn_t *c, const perf_opts_t *o, perf_model_t *m)
{
    perf_model_init(m, o);
    char *t1 = NULL, *t2 = NULL, *t3 = NULL, *path = NULL;
    nr_json_doc_t *d1 = NULL, *d2 = NULL, *d3 = NULL;
    const nr_jv_t *server, *meta, *cfg;
    nr_status_t *st = NULL;
    char *base = o->version ? nr_asprintf("/v2/models/%s/versions/%s", o->model, o->version)
                            : nr_asprintf("/v2/models/%s", o->model);
    if ((st = fetch(c, "model metadata", base, &t2, &d2, &meta)) != NULL)
        goto out;
    path = nr_asprintf("%s/config", base);
    if ((st = fetch(c, "model config", path, &t3, &d3, &cfg)) != NULL)
        goto out;
    perf_config_t top; /* an ensemble: its composing models, as perf_analyzer's parser */
    http_config(cfg, &top);
    st = perf_composing_load(m, &top, http_fetch_config, c);
    perf_config_free(&top);
    if (st)
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
    const nr_jv_t *dec = nr_jv_get(nr_jv_get(cfg, "model_transaction_policy"), "decoupled");
    m->decoupled = dec != NULL && dec->type == NR_JV_TRUE;
    if ((st = perf_model_check_batch(m, o)) != NULL)
        goto out;
    const nr_jv_t *ins = nr_jv_get(meta, "inputs"), *outs = nr_jv_get(meta, "outputs");
    size_t n_in = ins && ins->type == NR_JV_ARRAY ? ins->n : 0;
    m->inputs = nr_calloc(n_in + 1, sizeof(perf_input_t));
    for (size_t i = 0; i < n_in && !st; i++, m->n_inputs++)
        st = http_tensor(&ins->u.items[i], m->max_batch_size, o, &m->inputs[i], NULL);
    if (st)
        goto out;
    size_t n_out = outs && outs->type == NR_JV_ARRAY ? outs->n : 0;
    m->outputs = nr_calloc(n_out + 1, sizeof(perf_output_t));
    for (m->n_outputs = 0; m->n_outputs < n_out; m->n_outputs++)
        (void)http_tensor(&outs->u.items[m->n_outputs], m->max_batch_size, o, NULL,
                          &m->outputs[m->n_outputs]);

    m->path = nr_asprintf("%s/infer", base);
    http_ctx_t ctx = {.c = c, .o = o};
    st = perf_model_requests(m, o, http_request, &ctx);
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

nr_status_t *perf_http_shm(perf_conn_t *c, const char *name, size_t bytes)
{
    nr_buf_t path, body;
    nr_buf_init(&path);
    nr_buf_init(&body);
    if (name) {
        nr_buf_printf(&path, "/v2/systemsharedmemory/region/%s/register", name);
        nr_buf_puts(&body, "{\"key\":");
        char *key = nr_asprintf("/%s", name);
        nr_buf_json_str(&body, key, strlen(key));
        free(key);
        nr_buf_printf(&body, ",\"offset\":0,\"byte_size\":%zu}", bytes);
    } else {
        nr_buf_puts(&path, "/v2/systemsharedmemory/unregister");
    }
    nr_buf_putc(&path, '\0');
    perf_resp_t r;
    nr_status_t *st = perf_exchange(c, "POST", path.data, NULL, body.data, body.len, &r);
    if (st == NULL && r.status != 200)
        st = server_error(&r);
    nr_buf_free(&path);
    nr_buf_free(&body);
    return st;
}

static void trace_member(nr_buf_t *b, const char *key, const char *value)
{
    if (value == NULL)
        return;
    nr_buf_putc(b, b->len > 1 ? ',' : ' ' /* (replaced below) */);
    nr_buf_json_str(b, key, strlen(key));
    nr_buf_putc(b, ':');
    nr_buf_json_str(b, value, strlen(value));
}

nr_status_t *perf_http_trace(perf_conn_t *c, const perf_opts_t *o)
{
    nr_buf_t body;
    nr_buf_init(&body);
    nr_buf_putc(&body, '{');
    if (o->n_trace_levels > 0) {
        nr_buf_puts(&body, "\"trace_level\":[");
        for (size_t i = 0; i < o->n_trace_levels; i++) {
            if (i)
                nr_buf_putc(&body, ',');
            nr_buf_json_str(&body, o->trace_levels[i], strlen(o->trace_levels[i]));
        }
        nr_buf_putc(&body, ']');
    }
    trace_member(&body, "trace_rate", o->trace_rate);
    trace_member(&body, "trace_count", o->trace_count);
    trace_member(&body, "log_frequency", o->log_frequency);
    if (body.len > 1 && body.data[1] == ' ') /* no level: the first member's separator */
        memmove(body.data + 1, body.data + 2, --body.len - 1);
    nr_buf_putc(&body, '}');
    perf_resp_t r;
    nr_status_t *st = perf_exchange(c, "POST", "/v2/trace/setting", NULL, body.data, body.len,
                                    &r);
    if (st == NULL && r.status != 200)
        st = server_error(&r);
    nr_buf_free(&body);
    return st;
}

void perf_http_outputs(const perf_resp_t *r, nr_buf_t *out)
{
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root, *outs;
    nr_buf_putc(out, '{');
    /* looked up here, not for every response: only --profile-export-file reads outputs */
    const char *ihcl = find_header(r->head, r->head_len, "Inference-Header-Content-Length");
    size_t json_len = ihcl ? (size_t)strtoull(ihcl, NULL, 10) : r->body_len;
    if (json_len > r->body_len)
        json_len = r->body_len;
    nr_status_t *st = nr_json_parse(r->body, json_len, &doc, &root);
    size_t at = json_len, n = 0; /* the binary data follows the header, output by output */
    if (st == NULL && (outs = nr_jv_get(root, "outputs")) != NULL && outs->type == NR_JV_ARRAY)
        for (size_t i = 0; i < outs->n; i++) {
            const nr_jv_t *t = &outs->u.items[i], *name = nr_jv_get(t, "name"),
                          *dt = nr_jv_get(t, "datatype"),
                          *size = nr_jv_get(nr_jv_get(t, "parameters"), "binary_data_size");
            if (!name || name->type != NR_JV_STRING || !dt || dt->type != NR_JV_STRING ||
                !size || !nr_jv_is_uint(size) || (uint64_t)size->u.i > r->body_len - at)
                continue; /* no binary data: in a shared memory region */
            if (n++)
                nr_buf_putc(out, ',');
            perf_json_tensor(out, name->u.str, name->n, dt->u.str, dt->n, r->body + at,
                             (size_t)size->u.i, SIZE_MAX);
            at += (size_t)size->u.i;
        }
    nr_status_free(st);
    nr_json_free(doc);
    nr_buf_putc(out, '}');
}

/* ---- statistics ---- */

static uint64_t u64_at(const nr_jv_t *o, const char *a, const char *b)
{
    const nr_jv_t *v = nr_jv_get(o, a);
    if (b)
        v = nr_jv_get(v, b);
    return v && nr_jv_is_uint(v) ? (uint64_t)v->u.i : 0;
}

/* A JSON string's text, or `dflt`. */
static const char *str_or(const nr_jv_t *v, const char *dflt, size_t *len)
{
    bool ok = v && v->type == NR_JV_STRING;
    *len = ok ? v->n : strlen(dflt);
    return ok ? v->u.str : dflt;
}

nr_status_t *perf_server_stats(perf_conn_t *c, const perf_opts_t *o, bool all,
                               perf_snapshot_t *snap)
{
    char *path = all          ? nr_strdup("/v2/models/stats")
                 : o->version ? nr_asprintf("/v2/models/%s/versions/%s/stats", o->model,
                                            o->version)
                              : nr_asprintf("/v2/models/%s/stats", o->model);
    char *text = NULL;
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = fetch(c, "model statistics", path, &text, &doc, &root);
    free(path);
    memset(snap, 0, sizeof(*snap));
    const nr_jv_t *list = st ? NULL : nr_jv_get(root, "model_stats");
    for (size_t i = 0; list && list->type == NR_JV_ARRAY && i < list->n; i++) {
        const nr_jv_t *e = &list->u.items[i], *is = nr_jv_get(e, "inference_stats");
        size_t nl, vl;
        const char *name = str_or(nr_jv_get(e, "name"), "", &nl);
        const char *version = str_or(nr_jv_get(e, "version"), "0", &vl);
        perf_server_stats_t *s = &perf_snapshot_add(snap, name, nl, version, vl)->s;
        s->inference_count = u64_at(e, "inference_count", NULL);
        s->execution_count = u64_at(e, "execution_count", NULL);
        s->success_count = u64_at(is, "success", "count");
        s->success_ns = u64_at(is, "success", "ns");
        s->queue_count = u64_at(is, "queue", "count");
        s->queue_ns = u64_at(is, "queue", "ns");
        s->input_count = u64_at(is, "compute_input", "count");
        s->input_ns = u64_at(is, "compute_input", "ns");
        s->infer_count = u64_at(is, "compute_infer", "count");
        s->infer_ns = u64_at(is, "compute_infer", "ns");
        s->output_count = u64_at(is, "compute_output", "count");
        s->output_ns = u64_at(is, "compute_output", "ns");
    }
    nr_json_free(doc);
    free(text);
    return st;
}
