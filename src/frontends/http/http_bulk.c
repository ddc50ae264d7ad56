/* http_bulk.c - large inference requests off the HTTP workers.
 *
 * A worker serves its share of every connection, so while it parses a large
 * JSON body, inflates a compressed one or writes a large JSON reply, every
 * connection it serves waits (a 32 MB JSON request held a worker for 430-650
 * ms). Such a request is handed to this pool instead: its connection is parked
 * as for any inference, a pool thread runs the whole request (parse, run, reply)
 * on the synchronous path, fills the response and wakes the connection; the
 * worker only sends what is ready. A small request never comes here, so it pays
 * nothing; a large one pays one queue hop.
 *
 * A small request can have a large reply (an output sent as JSON text, or a
 * reply to compress): encoding it held its worker as long (8M floats of JSON,
 * about 0.5 s). Its finish hands the encoding to the same pool
 * (nr_http_bulk_reply) and the connection parks a second time.
 *
 * The pool has one thread per CPU (nr_cpu_count): its work is CPU-bound, so more threads
 * would not finish it sooner. Jobs wait in arrival order; how many can exist at
 * once is bounded by the body memory budget (--http-body-memory-limit), as each
 * holds its body.
 */
#include "http_int.h"

#include "../../common/alloc.h"
#include "../../common/cpus.h"
#include "../../common/log.h"

#include <stdlib.h>
#include <string.h>

/* A JSON part this large, or a compressed body this large, goes to the pool. */
#define BULK_JSON_MIN ((size_t)256 * 1024)
#define BULK_COMPRESSED_MIN ((size_t)16 * 1024)
/* A reply whose JSON text is estimated this large, or that compresses this
 * many bytes, is encoded on the pool. */
#define BULK_REPLY_JSON_MIN BULK_JSON_MIN
#define BULK_REPLY_DEFLATE_MIN ((size_t)64 * 1024)
_Static_assert(BULK_COMPRESSED_MIN <= BULK_JSON_MIN, "is_bulk stops below the smaller one");

typedef struct job_s {
    struct job_s *next;
    void (*fn)(void *arg, nr_http_resp_t *r); /* fills resp on a pool thread */
    void *arg;
    nr_http_server_t *s;      /* a whole request (fn = run_request, arg = the job): */
    nr_http_req_t q;          /* the request, with async NULL: the synchronous path */
    nr_http_headers_t h;      /* q.headers: the dispatching frame's copy is gone by then (its
                                 values are the suspended connection's, which stay) */
    nr_http_async_t *async;   /* the parked connection's */
    nr_http_resp_t resp;      /* filled on the pool thread, moved out by finish */
} job_t;

static void *bulk_main(void *arg)
{
    nr_http_bulk_t *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->mu);
        while (b->head == NULL && !b->stop)
            pthread_cond_wait(&b->cv, &b->mu);
        job_t *j = b->head;
        if (j != NULL) {
            b->head = j->next;
            if (b->head == NULL)
                b->tail = NULL;
        }
        pthread_mutex_unlock(&b->mu);
        if (j == NULL)
            return NULL; /* stopping, and nothing left */
        j->fn(j->arg, &j->resp);
        j->async->wake(j->async); /* from here on j is the worker's (finish) */
    }
}

void nr_http_bulk_start(nr_http_bulk_t *b)
{
    int cpus = nr_cpu_count();
    int n = cpus > 64 ? 64 : cpus;
    b->threads = nr_calloc((size_t)n, sizeof(pthread_t));
    for (int i = 0; i < n; i++) {
        if (pthread_create(&b->threads[b->n], NULL, bulk_main, b) != 0) {
            NR_LOG_WARN("HTTP: cannot start a thread for large requests (%d of %d started)",
                        b->n, n);
            break;
        }
        pthread_setname_np(b->threads[b->n], "http-bulk");
        b->n++;
    }
}

void nr_http_bulk_stop(nr_http_bulk_t *b)
{
    pthread_mutex_lock(&b->mu);
    b->stop = true;
    pthread_cond_broadcast(&b->cv);
    pthread_mutex_unlock(&b->mu);
    for (int i = 0; i < b->n; i++)
        pthread_join(b->threads[i], NULL);
    free(b->threads);
    b->threads = NULL;
    b->n = 0;
}

/* The pool's answer, on the worker once the connection is resumed (or when the
 * client has gone, before the response is released). */
static void bulk_finish(void *arg, nr_http_resp_t *r)
{
    job_t *j = arg;
    *r = j->resp; /* its finish is NULL: the synchronous path never defers */
    free(j->q.body_owned); /* when the handler did not take it (an inflated body) */
    free(j);
}

/* Whether the request is one for the pool: its JSON part, or its compressed
 * body, is large. */
static bool is_bulk(const nr_http_req_t *q)
{
    if (q->body_len < BULK_COMPRESSED_MIN) /* below both: every small request stops here */
        return false;
    nr_http_enc_t enc = nr_http_request_encoding(q->content_encoding);
    if (enc == NR_ENC_UNKNOWN)
        return false; /* refused at once */
    if (enc != NR_ENC_IDENTITY)
        return true; /* compressed, and at least BULK_COMPRESSED_MIN */
    size_t json = q->body_len;
    if (q->infer_header_len != NULL) {
        unsigned long long h = strtoull(q->infer_header_len, NULL, 10);
        if (h < json)
            json = (size_t)h;
    }
    return json >= BULK_JSON_MIN;
}

/* Queues j, whose answer r takes once the connection is woken. */
static void post(nr_http_bulk_t *b, job_t *j, nr_http_resp_t *r)
{
    nr_http_resp_init(&j->resp);
    r->finish = bulk_finish; /* before the job runs: wake() may come first */
    r->finish_arg = j;
    pthread_mutex_lock(&b->mu);
    if (b->tail != NULL)
        b->tail->next = j;
    else
        b->head = j;
    b->tail = j;
    pthread_cond_signal(&b->cv);
    pthread_mutex_unlock(&b->mu);
}

/* A whole request, on the synchronous path: parse, run, wait, encode. */
static void run_request(void *arg, nr_http_resp_t *r)
{
    job_t *j = arg;
    nr_http_infer(j->s, &j->q, r);
}

bool nr_http_bulk_post(nr_http_server_t *s, nr_http_req_t *q, nr_http_resp_t *r)
{
    nr_http_bulk_t *b = &s->bulk;
    if (q->async == NULL || b->n == 0 || !is_bulk(q))
        return false;
    job_t *j = nr_calloc(1, sizeof(*j));
    j->fn = run_request;
    j->arg = j;
    j->s = s;
    j->q = *q;
    j->q.async = NULL;
    if (q->headers != NULL) {
        j->h = *q->headers;
        j->q.headers = &j->h;
    }
    j->async = q->async;
    q->body_owned = NULL; /* the job's now: the worker must not free it */
    post(b, j, r);
    return true;
}

bool nr_http_bulk_reply(nr_http_server_t *s, nr_http_async_t *async, size_t json_bytes,
                        size_t deflate_bytes, void (*fn)(void *, nr_http_resp_t *), void *arg,
                        nr_http_resp_t *r)
{
    nr_http_bulk_t *b = &s->bulk;
    if (b->n == 0 || (json_bytes < BULK_REPLY_JSON_MIN && deflate_bytes < BULK_REPLY_DEFLATE_MIN))
        return false;
    job_t *j = nr_calloc(1, sizeof(*j));
    j->fn = fn;
    j->arg = arg;
    j->async = async;
    post(b, j, r);
    return true;
}
