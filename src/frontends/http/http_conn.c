/* http_conn.c - the HTTP frontend's open connections as a set.
 *
 * The limit. Each connection is counted while it is open. One past
 * --http-max-connections gets a 503 written straight to its new socket,
 * which is then shut down (libmicrohttpd sees the end and closes it), so a
 * refused client costs an fd only briefly. The first refusal of a burst is
 * logged, and the first connection accepted after it says how many were
 * refused.
 *
 * The sweeper. libmicrohttpd 0.9.75's epoll loop misses a client's FIN that
 * arrives together with the last bytes it reads (a request cut short, a
 * partial header): such a connection would hold its fd and its slot until
 * the idle timeout, so a client could fill every slot at no cost to itself.
 * Once a second the sweeper peeks at each listed connection that has no
 * request being answered; one whose peer has closed, on GONE_SWEEPS sweeps in a row, is
 * shut down, which wakes libmicrohttpd, which then closes it. Several, because a client may
 * send a whole request and half-close at once: libmicrohttpd has then read every byte (the
 * peek sees the end) before its handler marks the request as being answered, and a slow
 * moment there must not cost that client its answer (two sweeps, 1-2 s, were not enough
 * once under TSan on a machine loaded by other servers: the client got no answer). A
 * connection stays listed (and its fd open) until libmicrohttpd's CLOSED notification, which
 * takes the list's lock, so the sweeper never touches an fd that was closed and reused. Its
 * cost: one recv(MSG_PEEK) per idle connection per second.
 */
#include "http_conn.h"
#include "http_int.h"

#include "../../common/alloc.h"
#include "../../common/log.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <time.h>

struct nr_http_conn_s {
    nr_http_conn_t *prev, *next;
    int fd;
    atomic_bool busy; /* a request is being answered */
    unsigned gone;    /* sweeps in a row that found the peer closed and nothing answered */
};

/* Sweeps in a row (a second apart) that must find a peer gone before its connection is shut:
 * an abandoned connection holds its fd 3-4 s at most. */
#define GONE_SWEEPS 4

#define REFUSAL_BODY "{\"error\":\"the server has too many open connections; try again later\"}"
static const char refusal[] = "HTTP/1.1 503 Service Unavailable\r\n"
                              "Content-Type: application/json\r\n"
                              "Connection: close\r\n"
                              "Content-Length: %zu\r\n\r\n" REFUSAL_BODY;

void nr_http_conns_init(nr_http_server_t *s)
{
    nr_http_conns_t *cs = &s->conns;
    pthread_mutex_init(&cs->mu, NULL);
    pthread_cond_init(&cs->cv, NULL);
    cs->head = NULL;
    atomic_init(&cs->open, 0);
    atomic_init(&cs->refusing, false);
    atomic_init(&cs->refused, 0);
    cs->sweeping = false;
}

void nr_http_conns_free(nr_http_server_t *s)
{
    pthread_mutex_destroy(&s->conns.mu);
    pthread_cond_destroy(&s->conns.cv);
}

static void refuse(nr_http_server_t *s, int fd)
{
    nr_http_conns_t *cs = &s->conns;
    atomic_fetch_add(&cs->refused, 1);
    if (!atomic_exchange(&cs->refusing, true))
        NR_LOG_WARN("HTTP: %d connections open (--http-max-connections); refusing new "
                    "connections with 503 until some close", s->opts.max_connections);
    char msg[sizeof(refusal) + 16];
    int len = snprintf(msg, sizeof(msg), refusal, sizeof(REFUSAL_BODY) - 1);
    ssize_t w = send(fd, msg, (size_t)len, MSG_DONTWAIT | MSG_NOSIGNAL);
    (void)w; /* best effort: the socket is new, its buffer empty */
    shutdown(fd, SHUT_RDWR);
}

void nr_http_on_connection(void *cls, struct MHD_Connection *c, void **socket_context,
                           enum MHD_ConnectionNotificationCode toe)
{
    nr_http_server_t *s = cls;
    nr_http_conns_t *cs = &s->conns;
    nr_http_conn_t *e = *socket_context;
    if (toe == MHD_CONNECTION_NOTIFY_CLOSED) {
        if (e != NULL) {
            pthread_mutex_lock(&cs->mu);
            if (e->prev)
                e->prev->next = e->next;
            else
                cs->head = e->next;
            if (e->next)
                e->next->prev = e->prev;
            pthread_mutex_unlock(&cs->mu);
            free(e);
            *socket_context = NULL;
        }
        atomic_fetch_sub(&cs->open, 1);
        return;
    }
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_CONNECTION_FD);
    int n = atomic_fetch_add(&cs->open, 1) + 1;
    if (n > s->opts.max_connections) {
        if (ci != NULL)
            refuse(s, ci->connect_fd);
        return;
    }
    if (atomic_load(&cs->refusing) && atomic_exchange(&cs->refusing, false))
        NR_LOG_INFO("HTTP: accepting connections again (%llu refused at the limit of %d)",
                    (unsigned long long)atomic_exchange(&cs->refused, 0),
                    s->opts.max_connections);
    if (ci == NULL)
        return;
    e = nr_calloc(1, sizeof(*e));
    e->fd = ci->connect_fd;
    atomic_init(&e->busy, false);
    pthread_mutex_lock(&cs->mu);
    e->next = cs->head;
    if (cs->head)
        cs->head->prev = e;
    cs->head = e;
    pthread_mutex_unlock(&cs->mu);
    *socket_context = e;
}

void nr_http_conn_busy(struct MHD_Connection *c, bool busy)
{
    const union MHD_ConnectionInfo *ci =
        MHD_get_connection_info(c, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    if (ci != NULL && ci->socket_context != NULL)
        atomic_store(&((nr_http_conn_t *)ci->socket_context)->busy, busy);
}

/* Shuts down every idle listed connection whose peer has closed. */
static void sweep(nr_http_conns_t *cs)
{
    unsigned closed = 0;
    pthread_mutex_lock(&cs->mu);
    for (nr_http_conn_t *e = cs->head; e != NULL; e = e->next) {
        if (atomic_load(&e->busy)) {
            e->gone = 0;
            continue;
        }
        char b;
        if (recv(e->fd, &b, 1, MSG_PEEK | MSG_DONTWAIT) != 0) {
            e->gone = 0;
        } else if (++e->gone >= GONE_SWEEPS) { /* a second apart: see above */
            shutdown(e->fd, SHUT_RDWR);
            closed++;
        }
    }
    pthread_mutex_unlock(&cs->mu);
    if (closed > 0)
        NR_LOG_VERBOSE(1, "HTTP: closed %u connections whose clients had gone", closed);
}

static void *sweeper_main(void *arg)
{
    nr_http_conns_t *cs = arg;
    pthread_mutex_lock(&cs->mu);
    while (cs->sweeping) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += 1;
        if (pthread_cond_timedwait(&cs->cv, &cs->mu, &until) == ETIMEDOUT && cs->sweeping) {
            pthread_mutex_unlock(&cs->mu);
            sweep(cs);
            pthread_mutex_lock(&cs->mu);
        }
    }
    pthread_mutex_unlock(&cs->mu);
    return NULL;
}

void nr_http_sweeper_start(nr_http_server_t *s)
{
    nr_http_conns_t *cs = &s->conns;
    cs->sweeping = true;
    if (pthread_create(&cs->sweeper, NULL, sweeper_main, cs) != 0) {
        cs->sweeping = false;
        NR_LOG_WARN("HTTP: cannot start the connection sweeper; connections whose clients "
                    "left mid-request close at the idle timeout");
    }
}

void nr_http_sweeper_stop(nr_http_server_t *s)
{
    nr_http_conns_t *cs = &s->conns;
    pthread_mutex_lock(&cs->mu);
    bool was = cs->sweeping;
    cs->sweeping = false;
    pthread_cond_signal(&cs->cv);
    pthread_mutex_unlock(&cs->mu);
    if (was)
        pthread_join(cs->sweeper, NULL);
}
