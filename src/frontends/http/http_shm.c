/* http_shm.c - Triton's shared-memory extension over HTTP:
 *   GET  /v2/systemsharedmemory[/region/<r>]/status      [{"name","key","offset","byte_size"}]
 *   POST /v2/systemsharedmemory/region/<r>/register      {"key","offset"?,"byte_size"}
 *   POST /v2/systemsharedmemory[/region/<r>]/unregister
 * and the same paths under /v2/cudasharedmemory, answered as a server without
 * GPUs answers them (nothing registered, registering refused). The regions
 * live in the core's registry (core/shm.h); inference reads and writes them in
 * http_infer.c / http_encode.c. Every answer is application/json, as Triton's.
 * Any HTTP worker thread; the registry locks for itself.
 */
#include "http_int.h"

#include <string.h>

static void json_ok_empty(nr_http_resp_t *r)
{
    nr_buf_reset(&r->body);
    nr_http_json_ok(r);
}

static void put_region(const nr_shm_info_t *info, void *arg)
{
    nr_buf_t *b = arg;
    if (b->len > 1)
        nr_buf_putc(b, ',');
    nr_buf_puts(b, "{\"name\":");
    nr_buf_json_str(b, info->name, strlen(info->name));
    nr_buf_puts(b, ",\"key\":");
    nr_buf_json_str(b, info->key, strlen(info->key));
    nr_buf_puts(b, ",\"offset\":");
    nr_buf_u64(b, info->offset);
    nr_buf_puts(b, ",\"byte_size\":");
    nr_buf_u64(b, info->byte_size);
    nr_buf_putc(b, '}');
}

void nr_http_shm_status(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_buf_reset(&r->body);
    nr_buf_putc(&r->body, '[');
    nr_status_t *st =
        nr_shm_visit(nr_server_shm(s->core), q->region, q->region_len, put_region, &r->body);
    if (st != NULL) {
        nr_http_error(r, st);
        return;
    }
    nr_buf_putc(&r->body, ']');
    nr_http_json_ok(r);
}

/* A register body member: "Unable to parse" texts like the infer parser's. */
static nr_status_t *uint_member(const nr_jv_t *root, const char *key, bool required,
                                uint64_t *out)
{
    const nr_jv_t *v = nr_jv_get(root, key);
    if (v == NULL)
        return required ? nr_status_new(NR_INVALID_ARG,
                                        "Shared memory register request has no '%s' field", key)
                        : NULL;
    if (!nr_jv_is_uint(v))
        return nr_status_new(NR_INVALID_ARG, "Unable to parse '%s': " NR_TJ_UINT, key);
    *out = (uint64_t)v->u.i;
    return NULL;
}

static nr_status_t *do_register(nr_http_server_t *s, nr_http_req_t *q)
{
    if (q->region == NULL)
        return nr_status_new(NR_INVALID_ARG,
                             "'region name' is necessary to register system shared memory "
                             "region");
    nr_json_doc_t *doc = NULL;
    const nr_jv_t *root;
    nr_status_t *st = nr_json_parse(q->body, q->body_len, &doc, &root);
    if (st != NULL)
        return st;
    const nr_jv_t *key = nr_jv_get(root, "key");
    uint64_t offset = 0, byte_size = 0;
    if (key == NULL)
        st = nr_status_new(NR_INVALID_ARG, "Shared memory register request has no 'key' field");
    else if (key->type != NR_JV_STRING)
        st = nr_status_new(NR_INVALID_ARG, "Unable to parse 'key': " NR_TJ_STRING);
    if (st == NULL)
        st = uint_member(root, "offset", false, &offset);
    if (st == NULL)
        st = uint_member(root, "byte_size", true, &byte_size);
    if (st == NULL)
        st = nr_shm_register(nr_server_shm(s->core), q->region, q->region_len, key->u.str,
                             key->n, offset, byte_size);
    nr_json_free(doc);
    return st;
}

void nr_http_shm_register(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_status_t *st = do_register(s, q);
    if (st != NULL)
        nr_http_error(r, st);
    else
        json_ok_empty(r);
}

void nr_http_shm_unregister(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_shm_unregister(nr_server_shm(s->core), q->region, q->region_len);
    json_ok_empty(r);
}

/* ---- cuda: no GPU memory can be registered --------------------------------- */

void nr_http_cuda_status(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    if (q->region != NULL) {
        nr_http_error(r, nr_kserve_cuda_status(q->region, q->region_len));
        return;
    }
    nr_buf_reset(&r->body);
    nr_buf_puts(&r->body, "[]");
    nr_http_json_ok(r);
}

void nr_http_cuda_register(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_http_error(r, nr_kserve_cuda_register(q->region, q->region_len));
}

void nr_http_cuda_unregister(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    json_ok_empty(r); /* nothing is ever registered */
}
