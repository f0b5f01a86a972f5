/* snap_spool.c - spool files of received data-group snapshots: descriptor, names, row reader. */
#include "service/runtime/snap_spool.h"

#include "store/keys.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

void rt_spool_desc_encode(const struct rt_spool_desc *d, uint8_t out[RT_SPOOL_DESC_LEN])
{
    memset(out, 0, RT_SPOOL_DESC_LEN);
    store_put_u32(out, RT_SPOOL_MAGIC);
    out[4] = RT_SPOOL_VERSION;
    store_put_u64(out + 8, d->transfer_id);
    store_put_u64(out + 16, d->len);
    store_put_u32(out + 24, d->crc);
}

int rt_spool_desc_decode(const uint8_t *p, size_t len, struct rt_spool_desc *d)
{
    if (p == NULL || len != RT_SPOOL_DESC_LEN || store_get_u32(p) != RT_SPOOL_MAGIC ||
        p[4] != RT_SPOOL_VERSION)
        return -1;
    d->transfer_id = store_get_u64(p + 8);
    d->len = store_get_u64(p + 16);
    d->crc = store_get_u32(p + 24);
    return 0;
}

int rt_spool_path(char *buf, size_t n, const char *data_dir, uint32_t group, uint64_t transfer,
                  bool part)
{
    int w = snprintf(buf, n, "%s/%s/g%" PRIu32 "-%" PRIu64 ".%s", data_dir, RT_SPOOL_DIR, group,
                     transfer, part ? "part" : "snap");
    return w < 0 || (size_t)w >= n ? -1 : 0;
}

int rt_spool_name_parse(const char *name, uint32_t *group, uint64_t *transfer, bool *part)
{
    unsigned long long gr, tr;
    char ext[8];
    int used = 0;
    if (name[0] != 'g' || name[1] < '0' || name[1] > '9' ||
        sscanf(name, "g%llu-%llu.%5[a-z]%n", &gr, &tr, ext, &used) != 3 ||
        name[used] != '\0' || gr > UINT32_MAX)
        return -1;
    if (strcmp(ext, "part") != 0 && strcmp(ext, "snap") != 0)
        return -1;
    char canon[64];
    snprintf(canon, sizeof(canon), "g%llu-%llu.%s", gr, tr, ext);
    if (strcmp(canon, name) != 0) /* no leading zeros, signs or spaces */
        return -1;
    *group = (uint32_t)gr;
    *transfer = tr;
    *part = ext[0] == 'p';
    return 0;
}

int rt_spool_reader_open(struct rt_spool_reader *r, const char *path, const struct rt_spool_desc *d,
                         size_t piece)
{
    memset(r, 0, sizeof(*r));
    r->fd = -1;
    r->piece = piece < 64 ? 64 : piece;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    struct stat st;
    if (fstat(fd, &st) != 0 || (uint64_t)st.st_size != d->len) {
        close(fd);
        errno = EINVAL;
        return -1;
    }
    r->buf = malloc(r->piece);
    if (r->buf == NULL) {
        close(fd);
        errno = ENOMEM;
        return -1;
    }
    r->fd = fd;
    r->cap = r->piece;
    r->want = d->len;
    r->want_crc = d->crc;
    r->crc = (uint32_t)crc32(0L, Z_NULL, 0);
    return 0;
}

/* Makes at least `need` unparsed bytes available (fewer only at the end of the file): 0, or -1. */
static int fill(struct rt_spool_reader *r, size_t need)
{
    if (r->end - r->start >= need)
        return 0;
    if (r->start > 0) {
        memmove(r->buf, r->buf + r->start, r->end - r->start);
        r->end -= r->start;
        r->start = 0;
    }
    if (need > r->cap) {
        uint8_t *nb = realloc(r->buf, need);
        if (nb == NULL) {
            errno = ENOMEM;
            return -1;
        }
        r->buf = nb;
        r->cap = need;
    }
    while (r->end < need && r->read < r->want) {
        size_t room = r->cap - r->end;
        if (room > r->piece)
            room = r->piece;
        if (room > r->want - r->read)
            room = (size_t)(r->want - r->read);
        ssize_t got = read(r->fd, r->buf + r->end, room);
        if (got < 0 && errno == EINTR)
            continue;
        if (got <= 0) {
            if (got == 0)
                errno = EIO; /* shorter than its size said */
            return -1;
        }
        r->crc = (uint32_t)crc32(r->crc, r->buf + r->end, (uInt)got);
        r->end += (size_t)got;
        r->read += (uint64_t)got;
    }
    return 0;
}

int rt_spool_reader_next(struct rt_spool_reader *r, const uint8_t **k, size_t *kl,
                         const uint8_t **v, size_t *vl)
{
    errno = 0;
    if (fill(r, 4) != 0)
        return -1;
    size_t have = r->end - r->start;
    if (have == 0) {
        if (r->read != r->want || r->crc != r->want_crc) {
            errno = EIO;
            return -1;
        }
        return 0;
    }
    if (have < 4)
        goto corrupt;
    size_t klen = store_get_u32(r->buf + r->start);
    if (klen > RT_SPOOL_ROW_MAX - 8 || fill(r, 8 + klen) != 0)
        goto corrupt_or_io;
    if (r->end - r->start < 8 + klen)
        goto corrupt;
    size_t vlen = store_get_u32(r->buf + r->start + 4 + klen);
    if (vlen > RT_SPOOL_ROW_MAX - 8 - klen || fill(r, 8 + klen + vlen) != 0)
        goto corrupt_or_io;
    if (r->end - r->start < 8 + klen + vlen)
        goto corrupt;
    *k = r->buf + r->start + 4;
    *kl = klen;
    *v = r->buf + r->start + 8 + klen;
    *vl = vlen;
    r->start += 8 + klen + vlen;
    return 1;

corrupt_or_io:
    if (errno == ENOMEM)
        return -1;
corrupt:
    errno = EIO;
    return -1;
}

void rt_spool_reader_close(struct rt_spool_reader *r)
{
    if (r->fd >= 0)
        close(r->fd);
    free(r->buf);
    memset(r, 0, sizeof(*r));
    r->fd = -1;
}
