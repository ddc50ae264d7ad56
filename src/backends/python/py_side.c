/* py_side.c - what a Python model sends outside its requests: log lines, custom metrics
 * (pb_utils.MetricFamily / Metric) and model control (load_model, unload_model,
 * is_model_ready), from initialize, execute, finalize or threads of its own.
 *
 * Who reads the socket. The thread that runs execute (or starts or stops the stub) reads it
 * itself, as it waits for its answer: no thread hop on the request path. While nobody does,
 * a listener thread per instance reads it, so a model's own thread that logs or counts
 * between requests is never left waiting on a full socket. The hand-over (py_side_own,
 * py_side_release) is a flag under the instance's mutex and one epoll_ctl: the socket sits in
 * the listener's epoll with EPOLLONESHOT, armed only while nobody owns it, so an answer meant
 * for execute never wakes the listener.
 *
 * Custom metrics live in the core (core's custom_metrics.h, through nr_host_t); the stub names
 * them by small ids, this instance's table of the handles it made, deleted when the stub ends.
 */
#include "py_int.h"

#include "../../common/alloc.h"
#include "../../common/buf.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

/* ---- the listener ---------------------------------------------------------------------- */

/* Arms (or disarms) the socket in the listener's epoll. mu held. */
static void arm(py_inst_t *in, bool on)
{
    if (!in->listening || in->stub.sock < 0)
        return;
    struct epoll_event ev = {.events = EPOLLONESHOT | (on ? EPOLLIN : 0u), .data.u32 = 0};
    if (epoll_ctl(in->ep, EPOLL_CTL_MOD, in->stub.sock, &ev) != 0 && errno == ENOENT)
        (void)epoll_ctl(in->ep, EPOLL_CTL_ADD, in->stub.sock, &ev);
}

static void *listen_main(void *arg)
{
    py_inst_t *in = arg;
    char tname[16];
    snprintf(tname, sizeof(tname), "py-%s", in->name);
    pthread_setname_np(pthread_self(), tname);
    for (;;) {
        struct epoll_event ev;
        int n = epoll_wait(in->ep, &ev, 1, -1);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || ev.data.u32 == 1)
            break; /* stopping */
        pthread_mutex_lock(&in->mu);
        if (in->owned) { /* what came is the owner's; it re-arms when it gives the socket back */
            pthread_mutex_unlock(&in->mu);
            continue;
        }
        in->listener_reading = true;
        pthread_mutex_unlock(&in->mu);
        bool alive = nr_py_stub_drain(&in->stub);
        if (!alive) /* the requests it still held end now, not at the next batch */
            py_fail_open(in);
        pthread_mutex_lock(&in->mu);
        in->listener_reading = false;
        if (alive) /* a stub that has gone is noticed before the next batch */
            arm(in, true);
        pthread_cond_broadcast(&in->handoff);
        pthread_mutex_unlock(&in->mu);
    }
    return NULL;
}

nr_status_t *py_side_start(py_inst_t *in)
{
    in->ep = epoll_create1(EPOLL_CLOEXEC);
    in->wake = eventfd(0, EFD_CLOEXEC);
    if (in->ep < 0 || in->wake < 0)
        goto fail;
    struct epoll_event ev = {.events = EPOLLIN, .data.u32 = 1};
    if (epoll_ctl(in->ep, EPOLL_CTL_ADD, in->wake, &ev) != 0)
        goto fail;
    in->listening = true;
    pthread_mutex_lock(&in->mu);
    arm(in, !in->owned);
    pthread_mutex_unlock(&in->mu);
    int rc = pthread_create(&in->listener, NULL, listen_main, in);
    if (rc == 0)
        return NULL;
    in->listening = false;
    errno = rc;
fail:;
    char why[128];
    nr_status_t *st = nr_status_new(NR_INTERNAL, "the listener of '%s' did not start: %s",
                                    in->name, strerror_r(errno, why, sizeof(why)));
    if (in->ep >= 0)
        close(in->ep);
    if (in->wake >= 0)
        close(in->wake);
    in->ep = in->wake = -1;
    return st;
}

void py_side_stop(py_inst_t *in)
{
    if (in->listening) {
        uint64_t one = 1;
        ssize_t w = write(in->wake, &one, sizeof(one));
        (void)w;
        pthread_join(in->listener, NULL);
        in->listening = false;
    }
    if (in->ep >= 0)
        close(in->ep);
    if (in->wake >= 0)
        close(in->wake);
    in->ep = in->wake = -1;
}

void py_side_own(py_inst_t *in)
{
    pthread_mutex_lock(&in->mu);
    while (in->listener_reading)
        pthread_cond_wait(&in->handoff, &in->mu);
    in->owned = true;
    arm(in, false);
    pthread_mutex_unlock(&in->mu);
}

void py_side_release(py_inst_t *in)
{
    pthread_mutex_lock(&in->mu);
    in->owned = false;
    if (in->up)
        arm(in, true);
    pthread_mutex_unlock(&in->mu);
}

void py_side_attach(py_inst_t *in)
{
    pthread_mutex_lock(&in->mu);
    arm(in, false); /* added, disarmed: its owner arms it when it gives it back */
    pthread_mutex_unlock(&in->mu);
}

/* ---- custom metrics -------------------------------------------------------------------- */

/* Slot for a new handle in *tab (grown as needed); its id is the index + 1. */
static uint64_t put_handle(void ***tab, size_t *n, void *h)
{
    for (size_t i = 0; i < *n; i++)
        if ((*tab)[i] == NULL) {
            (*tab)[i] = h;
            return i + 1;
        }
    *tab = nr_realloc(*tab, (*n + 1) * sizeof(void *));
    (*tab)[(*n)++] = h;
    return *n;
}

static void *get_handle(void **tab, size_t n, uint64_t id)
{
    return id >= 1 && id <= n ? tab[id - 1] : NULL;
}

void py_side_forget(py_inst_t *in)
{
    const nr_host_t *host = in->info.host;
    for (size_t i = 0; i < in->n_metrics; i++)
        if (in->metrics[i] != NULL)
            host->metric_delete(in->metrics[i]);
    for (size_t i = 0; i < in->n_families; i++)
        if (in->families[i] != NULL)
            host->metric_family_delete(in->families[i]);
    free(in->metrics);
    free(in->families);
    in->metrics = in->families = NULL;
    in->n_metrics = in->n_families = 0;
}

static void reply(nr_py_stub_t *s, uint32_t tag, nr_status_t *st, uint64_t result)
{
    if (tag == 0) { /* nobody waits: an error is only logged */
        if (st != NULL)
            NR_LOG_WARN("custom metric of '%s': %s", s->name, st->msg);
    } else if (st != NULL) {
        nr_status_free(nr_py_stub_send_text(s, NR_PY_SIDE_REPLY,
                                            (tag & 0xffffffu) | NR_PY_REPLY_ERROR << 24,
                                            (uint64_t)st->code, st->msg, strlen(st->msg)));
    } else {
        nr_status_free(nr_py_stub_send(s, NR_PY_SIDE_REPLY, tag & 0xffffffu, result, 0));
    }
    nr_status_free(st);
}

/* The n NUL-terminated strings at [p, end) into strs[]; false when they run past end. */
static bool split_strings(const char *p, const char *end, const char **strs, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const char *nul = p < end ? memchr(p, '\0', (size_t)(end - p)) : NULL;
        if (nul == NULL)
            return false;
        strs[i] = p;
        p = nul + 1;
    }
    return true;
}

static void metric_message(py_inst_t *in, nr_py_stub_t *s, const nr_py_hdr_t *h,
                           const char *body, size_t len)
{
    const nr_host_t *host = in->info.host;
    nr_py_metric_t mh;
    if (len < sizeof(mh)) {
        reply(s, h->arg, nr_status_new(NR_INVALID_ARG, "malformed metrics request"), 0);
        return;
    }
    memcpy(&mh, body, sizeof(mh));
    const char *p = body + sizeof(mh), *end = body + len;
    if (mh.n_buckets > (size_t)(end - p) / sizeof(double) || mh.n_strings > 4096) {
        reply(s, h->arg, nr_status_new(NR_INVALID_ARG, "malformed metrics request"), 0);
        return;
    }
    double few_b[16], *buckets = mh.n_buckets <= 16 ? few_b
                                                     : nr_malloc(mh.n_buckets * sizeof(double));
    if (mh.n_buckets)
        memcpy(buckets, p, mh.n_buckets * sizeof(double));
    p += mh.n_buckets * sizeof(double);
    const char *few_s[16], **strs = mh.n_strings <= 16 ? few_s
                                                       : nr_malloc(mh.n_strings * sizeof(char *));
    nr_status_t *st = NULL;
    if (!split_strings(p, end, strs, mh.n_strings))
        st = nr_status_new(NR_INVALID_ARG, "malformed metrics request");
    uint64_t result = 0;
    void *handle;
    if (st != NULL) {
    } else if (mh.op == NR_PY_M_FAMILY_NEW && mh.n_strings == 2) {
        st = host->metric_family_new(strs[0], strs[1], (int)mh.kind, &handle);
        if (st == NULL)
            result = put_handle(&in->families, &in->n_families, handle);
    } else if (mh.op == NR_PY_M_FAMILY_DELETE) {
        if ((handle = get_handle(in->families, in->n_families, mh.id)) != NULL) {
            host->metric_family_delete(handle);
            in->families[mh.id - 1] = NULL;
        }
    } else if (mh.op == NR_PY_M_METRIC_NEW && mh.n_strings % 2 == 0) {
        void *fam = get_handle(in->families, in->n_families, mh.id);
        if (fam == NULL)
            st = nr_status_new(NR_INVALID_ARG, "unknown metric family");
        else
            st = host->metric_new(fam, strs, mh.n_strings / 2, buckets, mh.n_buckets,
                                  mh.kind != 0, &handle);
        if (st == NULL)
            result = put_handle(&in->metrics, &in->n_metrics, handle);
    } else if (mh.op == NR_PY_M_METRIC_DELETE) {
        if ((handle = get_handle(in->metrics, in->n_metrics, mh.id)) != NULL) {
            host->metric_delete(handle);
            in->metrics[mh.id - 1] = NULL;
        }
    } else if (mh.op >= NR_PY_M_INCREMENT && mh.op <= NR_PY_M_VALUE) {
        double v = 0;
        if ((handle = get_handle(in->metrics, in->n_metrics, mh.id)) == NULL)
            st = nr_status_new(NR_INVALID_ARG, "unknown metric");
        else
            st = host->metric_op(handle, (int)(mh.op - NR_PY_M_INCREMENT), mh.value, &v);
        memcpy(&result, &v, sizeof(v));
    } else {
        st = nr_status_new(NR_INVALID_ARG, "malformed metrics request");
    }
    if (buckets != few_b)
        free(buckets);
    if (strs != few_s)
        free(strs);
    reply(s, h->arg, st, result);
}

/* ---- model control (pb_utils.load_model, unload_model, is_model_ready) ------------------- */

/* The whole of file `path` (the stub wrote it for this load) into *data. */
static nr_status_t *read_file(const char *path, char **data, size_t *len)
{
    nr_buf_t b;
    nr_buf_init(&b);
    int err = nr_buf_read_file(&b, path, SIZE_MAX);
    if (err != 0) {
        nr_buf_free(&b);
        return nr_status_new(NR_INVALID_ARG, "unable to read '%s': %s", path, strerror(err));
    }
    *data = b.data;
    *len = b.len;
    return NULL;
}

static void control_message(py_inst_t *in, nr_py_stub_t *s, const nr_py_hdr_t *h,
                            const char *body, size_t len)
{
    const nr_host_t *host = in->info.host;
    nr_py_control_t ch;
    const char *strs_few[16], **strs = strs_few;
    nr_status_t *st = NULL;
    uint64_t result = 0;
    if (len < sizeof(ch)) {
        reply(s, h->arg, nr_status_new(NR_INVALID_ARG, "malformed model control request"), 0);
        return;
    }
    memcpy(&ch, body, sizeof(ch));
    if (ch.n_strings > 16)
        strs = nr_malloc(ch.n_strings * sizeof(char *));
    if (ch.n_strings > len || ch.n_strings < 1 ||
        !split_strings(body + sizeof(ch), body + len, strs, ch.n_strings)) {
        st = nr_status_new(NR_INVALID_ARG, "malformed model control request");
    } else if (ch.op == NR_PY_C_LOAD && ch.n_strings >= 2 && ch.n_strings % 2 == 0) {
        size_t n_files = (ch.n_strings - 2) / 2;
        nr_host_file_t *files = nr_calloc(n_files ? n_files : 1, sizeof(*files));
        for (size_t i = 0; i < n_files && st == NULL; i++) {
            char *data = NULL;
            files[i].path = strs[2 + 2 * i];
            st = read_file(strs[3 + 2 * i], &data, &files[i].len);
            files[i].data = data;
        }
        if (st == NULL)
            st = host->load_model(host->ctx, strs[0], strs[1][0] ? strs[1] : NULL, files,
                                  n_files);
        for (size_t i = 0; i < n_files; i++)
            free((void *)files[i].data);
        free(files);
    } else if (ch.op == NR_PY_C_UNLOAD) {
        st = host->unload_model(host->ctx, strs[0], ch.flag != 0);
    } else if (ch.op == NR_PY_C_READY) {
        result = host->model_ready(host->ctx, strs[0], ch.version);
    } else {
        st = nr_status_new(NR_INVALID_ARG, "malformed model control request");
    }
    if (strs != strs_few)
        free(strs);
    reply(s, h->arg, st, result);
}

void py_side_message(void *arg, nr_py_stub_t *s, const nr_py_hdr_t *h, const char *body,
                     size_t len)
{
    if (h->kind == NR_PY_CONTROL)
        control_message(arg, s, h, body, len);
    else if (h->kind == NR_PY_RESPONSE || h->kind == NR_PY_CANCELLED || h->kind == NR_PY_BLS)
        py_sender_message(arg, h);
    else
        metric_message(arg, s, h, body, len);
}
