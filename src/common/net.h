/* net.h - socket address helpers shared by the frontends that bind a port
 * (HTTP, gRPC, metrics): an address flag ("0.0.0.0", "::1", a host name) and a
 * port into a sockaddr.
 */
#ifndef NR_NET_H
#define NR_NET_H

#include "status.h"

#include <stdbool.h>
#include <sys/socket.h>

/* Fills *ss from an IPv4 or IPv6 literal, or a host name (getaddrinfo, so
 * call at startup only); *v6 says which family. false when it cannot. */
bool nr_net_resolve(const char *addr, int port, struct sockaddr_storage *ss, bool *v6);

/* A port that cannot be bound, as Triton words it (trailing blank included):
 * UNAVAILABLE "Socket '<addr>:<port>' already in use ". */
NR_MUST_CHECK nr_status_t *nr_net_in_use(const char *addr, int port);

/* Raises the process's open-file limit to its hard cap (each connection is
 * an fd) and returns the limit now in force. */
long nr_net_raise_fd_limit(void);

#endif
