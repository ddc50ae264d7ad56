/* mhd.c - shared libmicrohttpd daemon plumbing (mhd.h). */
#include "mhd.h"

#include "../../common/log.h"
#include "../../common/net.h"

#include <stdio.h>
#include <sys/socket.h>
#include <string.h>
#include <unistd.h>

void nr_mhd_log(void *prefix, const char *fmt, va_list ap)
{
    char msg[512];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    size_t n = strlen(msg);
    while (n > 0 && (msg[n - 1] == '\n' || msg[n - 1] == '\r'))
        msg[--n] = '\0';
    NR_LOG_VERBOSE(1, "%s: %s", (const char *)prefix, msg);
}

nr_status_t *nr_mhd_started(struct MHD_Daemon *d, const char *address, int port, int *bound)
{
    if (d == NULL)
        return nr_net_in_use(address, port);
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    *bound = di ? di->port : port;
    return NULL;
}

void nr_mhd_quiesce_init(nr_mhd_quiesce_t *q)
{
    atomic_init(&q->done, false);
    atomic_init(&q->fd, -1);
}

void nr_mhd_quiesce(struct MHD_Daemon *d, nr_mhd_quiesce_t *q)
{
    if (atomic_exchange(&q->done, true))
        return;
    MHD_socket fd = MHD_quiesce_daemon(d);
    if (fd != MHD_INVALID_SOCKET) {
        (void)shutdown(fd, SHUT_RDWR); /* Linux: a listening socket stops listening */
        atomic_store(&q->fd, fd);
    }
}

void nr_mhd_stop(struct MHD_Daemon *d, nr_mhd_quiesce_t *q)
{
    MHD_stop_daemon(d);
    int fd = atomic_exchange(&q->fd, -1);
    if (fd >= 0)
        close(fd);
}
