/* notify.c - the systemd service readiness protocol (sd_notify(3)): one datagram to $NOTIFY_SOCKET. */
#include "notify.h"

#include <errno.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

int slotd_notify_send(const char *state)
{
    const char *path = getenv("NOTIFY_SOCKET");
    if (path == NULL || path[0] == '\0')
        return 1;
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    size_t len = strlen(path);
    /* "/path" or "@abstract" (a leading NUL byte on the wire), as systemd gives it */
    if ((path[0] != '/' && path[0] != '@') || len >= sizeof(sa.sun_path)) {
        errno = EINVAL;
        return -1;
    }
    memcpy(sa.sun_path, path, len);
    if (path[0] == '@')
        sa.sun_path[0] = '\0';
    int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    socklen_t sa_len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + len);
    ssize_t sent = sendto(fd, state, strlen(state), MSG_NOSIGNAL, (struct sockaddr *)&sa, sa_len);
    int saved = errno;
    close(fd);
    errno = saved;
    return sent == (ssize_t)strlen(state) ? 0 : -1;
}
