/* snap_spool.h - a received data-group snapshot spooled to disk: descriptor, file names, reader. */
#ifndef SLOTD_RUNTIME_SNAP_SPOOL_H
#define SLOTD_RUNTIME_SNAP_SPOOL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The folder under the data dir that holds spool files. */
#define RT_SPOOL_DIR "snap-recv"
/* A received snapshot of a data group is handed to the raft core as this descriptor instead of
 * its rows: [magic u32 "SLSP"][version u8][0 0 0][transfer u64][length u64][crc32 u32][0 u32]. */
#define RT_SPOOL_DESC_LEN 32
#define RT_SPOOL_MAGIC 0x534C5350u
#define RT_SPOOL_VERSION 1
/* Bytes the reader fetches from the file at once (it holds one piece, or one row if larger). */
#define RT_SPOOL_PIECE_BYTES ((size_t)4 << 20)
/* A row (key + value + framing) larger than this is corrupt. */
#define RT_SPOOL_ROW_MAX ((size_t)64 << 20)

struct rt_spool_desc {
    uint64_t transfer_id;
    uint64_t len;   /* bytes of the spooled rows */
    uint32_t crc;   /* zlib crc32 of them */
};

/* Writes d into out. */
void rt_spool_desc_encode(const struct rt_spool_desc *d, uint8_t out[RT_SPOOL_DESC_LEN]);
/* 0 and *d set when (p, len) is a descriptor; -1 otherwise. */
int rt_spool_desc_decode(const uint8_t *p, size_t len, struct rt_spool_desc *d);

/* The spool file of `transfer` for `group` under data_dir into buf:
 * <data_dir>/snap-recv/g<group>-<transfer>.part while it is received (part), .snap once whole.
 * 0, or -1 when it does not fit in n bytes. */
int rt_spool_path(char *buf, size_t n, const char *data_dir, uint32_t group, uint64_t transfer,
                  bool part);
/* Parses a spool file name (no folder): 0 and *group, *transfer, *part set, or -1. */
int rt_spool_name_parse(const char *name, uint32_t *group, uint64_t *transfer, bool *part);

/* Reads the rows ([key len u32][key][value len u32][value], big-endian lengths) of a spool file
 * in pieces of at most `piece` bytes (more only for one larger row), checking the length and
 * CRC-32 against a descriptor as it goes. invariant: buf[start, end) are read, unparsed bytes. */
struct rt_spool_reader {
    int fd;
    uint8_t *buf;
    size_t cap, start, end, piece;
    uint64_t read;  /* bytes read from the file so far */
    uint64_t want;  /* the descriptor's length */
    uint32_t crc;   /* of the bytes read so far */
    uint32_t want_crc;
};

/* Opens path for d; 0, or -1 with errno set (ENOENT: no such file; EINVAL: its size is not
 * d->len). The reader owns the fd and buffer until rt_spool_reader_close. */
int rt_spool_reader_open(struct rt_spool_reader *r, const char *path, const struct rt_spool_desc *d,
                         size_t piece);
/* The next row, borrowed until the next call: 1 = a row; 0 = the end (every byte read and the
 * CRC matches); -1 = truncated framing, a row over RT_SPOOL_ROW_MAX, a CRC mismatch or an I/O
 * error (errno: EIO for a bad CRC or framing). */
int rt_spool_reader_next(struct rt_spool_reader *r, const uint8_t **k, size_t *kl,
                         const uint8_t **v, size_t *vl);
void rt_spool_reader_close(struct rt_spool_reader *r);

#endif
