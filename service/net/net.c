/* net.c - listening TCP sockets from "HOST:PORT" text, bound exclusively (no SO_REUSEPORT). */
#include "net.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

int net_addr_split(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= portlen)
        return NET_EMALFORMED;
    const char *h = addr;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n >= hostlen)
        return NET_EMALFORMED;
    memcpy(host, h, n);
    host[n] = '\0';
    snprintf(port, portlen, "%s", colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return NET_EMALFORMED;
    return 0;
}

/* The port of a bound socket, 0 if unknown. */
static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0)
        return 0;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    if (ss.ss_family == AF_INET6)
        return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    return 0;
}

int net_listen(const char *addr, int backlog, int *port, char *err, size_t errlen)
{
    char host[256], portstr[8];
    if (net_addr_split(addr, host, sizeof(host), portstr, sizeof(portstr)) != 0) {
        snprintf(err, errlen, "listen address '%s' is not HOST:PORT", addr);
        return NET_EMALFORMED;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "listen address '%s': %s", addr, gai_strerror(gai));
        return NET_EMALFORMED;
    }
    int fd = -1, saved = 0;
    for (struct addrinfo *ai = res; ai != NULL && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            saved = errno;
            continue;
        }
        int one = 1;
        setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, backlog) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "cannot listen on %s: %s", addr, strerror(saved));
        return NET_ELISTEN;
    }
    *port = bound_port(fd);
    return fd;
}

int net_listen_check(const char *addr, char *err, size_t errlen)
{
    char host[256], portstr[8];
    if (net_addr_split(addr, host, sizeof(host), portstr, sizeof(portstr)) == 0 &&
        strcmp(portstr, "0") == 0)
        return 0;
    int port = 0;
    int fd = net_listen(addr, 1, &port, err, errlen);
    if (fd < 0)
        return fd;
    close(fd);
    return 0;
}

bool net_addr_wildcard(const char *addr)
{
    const char *colon = strrchr(addr, ':');
    size_t n = colon ? (size_t)(colon - addr) : strlen(addr);
    return n == 0 || (n == 7 && strncmp(addr, "0.0.0.0", 7) == 0) ||
           (n == 4 && strncmp(addr, "[::]", 4) == 0) || (n == 2 && strncmp(addr, "::", 2) == 0);
}
