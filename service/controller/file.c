/* file.c - cluster-state.json on disk: atomic save (tmp, fsync, rename, fsync dir), bounded load.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

static int write_all(int fd, const char *buf, size_t len)
{
    while (len > 0) {
        ssize_t n = write(fd, buf, len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            return -1;
        }
        buf += n;
        len -= (size_t)n;
    }
    return 0;
}

/* fsync of the directory that holds path, so the rename itself is durable. */
static int sync_dir(const char *path, char *err, size_t errlen)
{
    char dir[PATH_MAX];
    const char *slash = strrchr(path, '/');
    if (slash == NULL) {
        snprintf(dir, sizeof(dir), ".");
    } else if (slash == path) {
        snprintf(dir, sizeof(dir), "/");
    } else {
        snprintf(dir, sizeof(dir), "%.*s", (int)(slash - path), path);
    }
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) {
        ctl__errf(err, errlen, "open %s: %s", dir, strerror(errno));
        return CTL_EIO;
    }
    int rc = CTL_OK;
    if (fsync(fd) != 0) {
        ctl__errf(err, errlen, "fsync %s: %s", dir, strerror(errno));
        rc = CTL_EIO;
    }
    close(fd);
    return rc;
}

int ctl_file_save(const char *path, const struct ctl_state *state, char *err, size_t errlen)
{
    char tmp[PATH_MAX];
    if (strlen(path) + 5 > sizeof(tmp)) {
        ctl__errf(err, errlen, "%s: path longer than %d bytes", path, PATH_MAX - 5);
        return CTL_EINVALID;
    }
    snprintf(tmp, sizeof(tmp), "%s.tmp", path);
    char *buf;
    size_t len;
    int rc = ctl_state_encode(state, &buf, &len);
    if (rc == CTL_ESTATE) {
        char why[CTL_REASON_MAX];
        ctl_state_validate(state, why, sizeof(why));
        ctl__errf(err, errlen, "save %s: %s", path, why);
        goto err_after_nothing;
    }
    if (rc != CTL_OK) {
        ctl__errf(err, errlen, "save %s: %s", path, ctl_strerror(rc));
        goto err_after_nothing;
    }
    rc = CTL_EIO;
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) {
        ctl__errf(err, errlen, "open %s: %s", tmp, strerror(errno));
        goto err_after_buf;
    }
    if (write_all(fd, buf, len) != 0 || fsync(fd) != 0) {
        ctl__errf(err, errlen, "write %s: %s", tmp, strerror(errno));
        goto err_after_fd;
    }
    if (close(fd) != 0) {
        fd = -1;
        ctl__errf(err, errlen, "close %s: %s", tmp, strerror(errno));
        goto err_after_fd;
    }
    fd = -1;
    if (rename(tmp, path) != 0) {
        ctl__errf(err, errlen, "rename %s to %s: %s", tmp, path, strerror(errno));
        goto err_after_fd;
    }
    rc = sync_dir(path, err, errlen);
    ctl_free(buf);
    return rc;

err_after_fd:
    if (fd >= 0) {
        close(fd);
    }
    unlink(tmp);
err_after_buf:
    ctl_free(buf);
err_after_nothing:
    return rc;
}

int ctl_file_load(const char *path, struct ctl_state *state, char *err, size_t errlen)
{
    int rc = CTL_EIO;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        rc = errno == ENOENT ? CTL_ENOT_FOUND : CTL_EIO;
        ctl__errf(err, errlen, "open %s: %s", path, strerror(errno));
        goto err_after_nothing;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) {
        ctl__errf(err, errlen, "stat %s: %s", path, strerror(errno));
        goto err_after_fd;
    }
    if (st.st_size > (off_t)CTL_FILE_BYTES_MAX) {
        rc = CTL_ETOO_BIG;
        ctl__errf(err, errlen, "%s: %lld bytes, the limit is %u", path, (long long)st.st_size,
                  CTL_FILE_BYTES_MAX);
        goto err_after_fd;
    }
    /* Read up to one byte past the bound so a file that grew after fstat is still refused. */
    size_t cap = (size_t)st.st_size + 1, len = 0;
    char *buf = malloc(cap);
    if (buf == NULL) {
        rc = CTL_ENOMEM;
        ctl__errf(err, errlen, "%s: out of memory", path);
        goto err_after_fd;
    }
    for (;;) {
        ssize_t n = read(fd, buf + len, cap - len);
        if (n < 0 && errno == EINTR) {
            continue;
        }
        if (n < 0) {
            ctl__errf(err, errlen, "read %s: %s", path, strerror(errno));
            goto err_after_buf;
        }
        if (n == 0 || (len += (size_t)n) == cap) {
            break;
        }
    }
    if (len == cap) {
        ctl__errf(err, errlen, "%s: changed size while being read", path);
        goto err_after_buf;
    }
    char why[CTL_REASON_MAX];
    rc = ctl_state_decode(buf, len, state, why, sizeof(why));
    if (rc != CTL_OK) {
        ctl__errf(err, errlen, "%s: %s", path, why);
        goto err_after_buf;
    }
    free(buf);
    close(fd);
    return CTL_OK;

err_after_buf:
    free(buf);
err_after_fd:
    close(fd);
err_after_nothing:
    return rc;
}
