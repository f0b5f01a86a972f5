/* http.c - GET /metrics over HTTP/1.1 with libmicrohttpd (one internal polling thread). */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <microhttpd.h>

#include "metrics_internal.h"
#include "service/net/net.h"

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

int metrics_http_start(struct metrics_registry *r, const char *addr, struct metrics_http **out,
                       int *port, char *err, size_t errlen)
{
    char scratch[1];
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    int bound = 0;
    char why[400];
    int fd = net_listen(addr, METRICS_HTTP_BACKLOG, &bound, why, sizeof(why));
    if (fd < 0)
        snprintf(err, errlen, "metrics %s", why);
    if (fd == NET_EMALFORMED)
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
