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

/* Stops accepting connections (once: *quiesced says whether it was done);
 * connections already open go on. */
void nr_mhd_quiesce(struct MHD_Daemon *d, atomic_bool *quiesced);

#endif
