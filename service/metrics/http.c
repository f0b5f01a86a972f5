/* http.c - GET /metrics over HTTP/1.1 with libmicrohttpd (one internal polling thread). */
#include <errno.h>
#include <netdb.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <microhttpd.h>

#include "metrics_internal.h"

#define METRICS_HTTP_BACKLOG 16
#define METRICS_CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"

struct metrics_http {
    struct metrics_registry *registry; /* borrowed */
    struct MHD_Daemon *daemon;
};

static enum MHD_Result reply_static(struct MHD_Connection *conn, unsigned status, const char *text)
{
    struct MHD_Response *resp =
        MHD_create_response_from_buffer(strlen(text), (void *)text, MHD_RESPMEM_PERSISTENT);
    if (resp == NULL)
        return MHD_NO;
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, "text/plain; charset=utf-8");
    if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
        MHD_add_response_header(resp, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
    enum MHD_Result rc = MHD_queue_response(conn, status, resp);
    MHD_destroy_response(resp);
    return rc;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *conn, const char *url,
                                  const char *method, const char *version, const char *upload_data,
                                  size_t *upload_data_size, void **con_cls)
{
    struct metrics_http *h = cls;
    (void)version;
    (void)upload_data;
    (void)upload_data_size;
    (void)con_cls;
    if (strcmp(url, "/metrics") != 0)
        return reply_static(conn, MHD_HTTP_NOT_FOUND, "not found: metrics are at /metrics\n");
    if (strcmp(method, MHD_HTTP_METHOD_GET) != 0 && strcmp(method, MHD_HTTP_METHOD_HEAD) != 0)
        return reply_static(conn, MHD_HTTP_METHOD_NOT_ALLOWED, "method not allowed\n");
    char *text;
    size_t len;
    if (metrics_registry_render(h->registry, &text, &len) != METRICS_OK)
        return reply_static(conn, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
    struct MHD_Response *resp = MHD_create_response_from_buffer(len, text, MHD_RESPMEM_MUST_FREE);
    if (resp == NULL) {
        free(text);
        return MHD_NO;
    }
    MHD_add_response_header(resp, MHD_HTTP_HEADER_CONTENT_TYPE, METRICS_CONTENT_TYPE);
    enum MHD_Result rc = MHD_queue_response(conn, MHD_HTTP_OK, resp);
    MHD_destroy_response(resp);
    return rc;
}

/* "host:port" or "[v6]:port" into host and port strings; -1 when malformed. */
static int split_listen(const char *addr, char *host, size_t hostlen, char *port, size_t portlen)
{
    const char *colon = strrchr(addr, ':');
    if (colon == NULL || colon[1] == '\0' || strlen(colon + 1) >= portlen)
        return -1;
    const char *h = addr;
    size_t n = (size_t)(colon - addr);
    if (n >= 2 && h[0] == '[' && h[n - 1] == ']') {
        h++;
        n -= 2;
    }
    if (n >= hostlen)
        return -1;
    memcpy(host, h, n);
    host[n] = '\0';
    snprintf(port, portlen, "%s", colon + 1);
    for (const char *p = port; *p; p++)
        if (*p < '0' || *p > '9')
            return -1;
    return 0;
}

/* A listening TCP socket on addr, or -1 (-2: malformed address) with err set. *port gets the bound
 * port. */
static int listen_socket(const char *addr, int *port, char *err, size_t errlen)
{
    char host[256], portstr[8];
    if (split_listen(addr, host, sizeof(host), portstr, sizeof(portstr)) != 0) {
        snprintf(err, errlen, "metrics listen address '%s' is not HOST:PORT", addr);
        return -2;
    }
    struct addrinfo hints = {.ai_family = AF_UNSPEC,
                             .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gai = getaddrinfo(host[0] ? host : NULL, portstr, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "metrics listen address '%s': %s", addr, gai_strerror(gai));
        return -2;
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
        if (bind(fd, ai->ai_addr, ai->ai_addrlen) != 0 || listen(fd, METRICS_HTTP_BACKLOG) != 0) {
            saved = errno;
            close(fd);
            fd = -1;
        }
    }
    freeaddrinfo(res);
    if (fd < 0) {
        snprintf(err, errlen, "metrics listen %s: %s", addr, strerror(saved));
        return -1;
    }
    struct sockaddr_storage ss;
    socklen_t sl = sizeof(ss);
    *port = 0;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) == 0) {
        if (ss.ss_family == AF_INET)
            *port = ntohs(((struct sockaddr_in *)&ss)->sin_port);
        else if (ss.ss_family == AF_INET6)
            *port = ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
    }
    return fd;
}

int metrics_http_start(struct metrics_registry *r, const char *addr, struct metrics_http **out,
                       int *port, char *err, size_t errlen)
{
    char scratch[1];
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    int bound = 0;
    int fd = listen_socket(addr, &bound, err, errlen);
    if (fd == -2)
        return METRICS_EINVALID;
    if (fd < 0)
        return METRICS_ELISTEN;
    struct metrics_http *h = calloc(1, sizeof(*h));
    if (h == NULL) {
        snprintf(err, errlen, "metrics: out of memory");
        goto err_after_socket;
    }
    h->registry = r;
    /* The daemon takes over fd and closes it in MHD_stop_daemon. */
    h->daemon = MHD_start_daemon(
        MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, h, MHD_OPTION_LISTEN_SOCKET,
        (MHD_socket)fd, MHD_OPTION_CONNECTION_LIMIT, (unsigned)METRICS_HTTP_CONNECTIONS_MAX,
        MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)METRICS_HTTP_TIMEOUT_S, MHD_OPTION_END);
    if (h->daemon == NULL) {
        snprintf(err, errlen, "metrics listen %s: libmicrohttpd could not start", addr);
        goto err_after_alloc;
    }
    if (port != NULL)
        *port = bound;
    *out = h;
    return METRICS_OK;

err_after_alloc:
    free(h);
err_after_socket:
    close(fd);
    return METRICS_ELISTEN;
}

void metrics_http_stop(struct metrics_http *h)
{
    if (h == NULL)
        return;
    MHD_stop_daemon(h->daemon);
    free(h);
}
