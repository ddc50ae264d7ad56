/* mhd.h - what the two frontends on libmicrohttpd (HTTP, metrics) share
 * around their daemons: the logger that turns libmicrohttpd's messages into
 * nereid's verbose log lines, the outcome of starting a daemon, and quiesce.
 */
#ifndef NR_MHD_H
#define NR_MHD_H

#include "../../common/status.h"

#include <microhttpd.h>
#include <stdarg.h>
#include <stdatomic.h>

/* MHD_OPTION_EXTERNAL_LOGGER with cls = the prefix of the lines ("HTTP"):
 * connection-level trouble (resets, bad requests) is per request, so verbose only. */
void nr_mhd_log(void *prefix, const char *fmt, va_list ap);

/* After MHD_start_daemon(..., port, ...): NULL and *bound = the bound port (the
 * kernel's pick for port 0) when d started, else Triton's UNAVAILABLE
 * "Socket '<address>:<port>' already in use ". */
NR_MUST_CHECK nr_status_t *nr_mhd_started(struct MHD_Daemon *d, const char *address, int port,
                                          int *bound);

/* Quiesce state of one daemon: whether it was done, and the listening socket
 * libmicrohttpd handed back (-1 before). */
typedef struct {
    atomic_bool done;
    atomic_int fd;
} nr_mhd_quiesce_t;

void nr_mhd_quiesce_init(nr_mhd_quiesce_t *q);
/* Stops accepting connections (once); connections already open go on. The
 * listening socket is shut down (new connections are refused) but stays open
 * until nr_mhd_stop: a worker thread of the daemon may still be registering it
 * in its epoll set when the server is stopped right after starting, and a
 * closed descriptor number could be reused under it. */
void nr_mhd_quiesce(struct MHD_Daemon *d, nr_mhd_quiesce_t *q);
/* MHD_stop_daemon, then closes the socket quiesce kept. */
void nr_mhd_stop(struct MHD_Daemon *d, nr_mhd_quiesce_t *q);

#endif
