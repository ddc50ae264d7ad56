/* net.c - socket address helpers (net.h). */
#include "net.h"

#include <arpa/inet.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdint.h>
#include <string.h>
#include <sys/resource.h>

bool nr_net_resolve(const char *addr, int port, struct sockaddr_storage *ss, bool *v6)
{
    memset(ss, 0, sizeof(*ss));
    struct sockaddr_in *a4 = (struct sockaddr_in *)ss;
    struct sockaddr_in6 *a6 = (struct sockaddr_in6 *)ss;
    if (inet_pton(AF_INET, addr, &a4->sin_addr) == 1) {
        a4->sin_family = AF_INET;
        a4->sin_port = htons((uint16_t)port);
        *v6 = false;
        return true;
    }
    if (inet_pton(AF_INET6, addr, &a6->sin6_addr) == 1) {
        a6->sin6_family = AF_INET6;
        a6->sin6_port = htons((uint16_t)port);
        *v6 = true;
        return true;
    }
    struct addrinfo hints = {0}, *res = NULL; /* a host name: startup only */
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    if (getaddrinfo(addr, NULL, &hints, &res) != 0 || res == NULL)
        return false;
    memcpy(ss, res->ai_addr, res->ai_addrlen);
    *v6 = res->ai_family == AF_INET6;
    if (*v6)
        a6->sin6_port = htons((uint16_t)port);
    else
        a4->sin_port = htons((uint16_t)port);
    freeaddrinfo(res);
    return true;
}

nr_status_t *nr_net_in_use(const char *addr, int port)
{
    return nr_status_new(NR_UNAVAILABLE, "Socket '%s:%d' already in use ", addr, port);
}

long nr_net_raise_fd_limit(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) != 0)
        return 1024;
    if (rl.rlim_cur < rl.rlim_max) {
        rlim_t want = rl.rlim_max;
        rl.rlim_cur = want;
        if (setrlimit(RLIMIT_NOFILE, &rl) != 0)
            getrlimit(RLIMIT_NOFILE, &rl);
    }
    return rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > LONG_MAX ? LONG_MAX : (long)rl.rlim_cur;
}
