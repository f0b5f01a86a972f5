/* format.c - the backup file's records: framing, the streaming writer and the checking reader. */
#include "format.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#define BACKUP__ERR_TEXT(name, code, text) [code] = text,
static const char *const backup_err_text[] = {BACKUP_ERRORS(BACKUP__ERR_TEXT)};
#undef BACKUP__ERR_TEXT

const char *backup_strerror(int err)
{
    if (err < 0 || err >= BACKUP_ERR_COUNT_)
        return "unknown error";
    return backup_err_text[err];
}

const char *backup_record_type_name(unsigned type)
{
    switch (type) {
    case BACKUP_REC_HEADER:
        return "header";
    case BACKUP_REC_CONTROLLER:
        return "controller";
    case BACKUP_REC_GROUP_BEGIN:
        return "group begin";
    case BACKUP_REC_ROWS:
        return "rows";
    case BACKUP_REC_GROUP_END:
        return "group end";
    case BACKUP_REC_TRAILER:
        return "trailer";
    default:
        return "unknown";
    }
}

/* ---- big-endian helpers ---- */

static void put_u16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)(v >> 8);
    p[1] = (uint8_t)v;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (24 - 8 * i));
}

static void put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (56 - 8 * i));
}

static uint16_t get_u16(const uint8_t *p)
{
    return (uint16_t)((p[0] << 8) | p[1]);
}

static uint32_t get_u32(const uint8_t *p)
{
    return ((uint32_t)p[0] << 24) | ((uint32_t)p[1] << 16) | ((uint32_t)p[2] << 8) | p[3];
}

static uint64_t get_u64(const uint8_t *p)
{
    return ((uint64_t)get_u32(p) << 32) | get_u32(p + 4);
}

static uint32_t crc_update(uint32_t crc, const void *p, size_t n)
{
    const uint8_t *b = p;
    while (n > 0) { /* zlib's length is a uInt */
        uInt step = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = (uint32_t)crc32(crc, b, step);
        b += step;
        n -= step;
    }
    return crc;
}

/* The record CRC: over frame bytes 0..11 and the payload. */
static uint32_t record_crc(const uint8_t *frame, const uint8_t *payload, size_t len)
{
    uint32_t crc = crc_update(0, frame, 12);
    return crc_update(crc, payload, len);
}

#define HEADER_FIXED_LEN (BACKUP_MAGIC_LEN + 4 + 8 + 8 + 8 + 2)
#define GROUP_INFO_LEN (4 + 8 + 8)
#define GROUP_BEGIN_LEN GROUP_INFO_LEN
#define GROUP_END_LEN (4 + 8 + 8 + 4)
#define TRAILER_LEN (4 + 8 + 4 + 4)
#define ROWS_HEAD_LEN (4 + 4)
#define ROW_HEAD_LEN (2 + 4)

/* ---- writer ---- */

enum writer_phase { W_START, W_CONTROLLER, W_IN_GROUP, W_FINISHED, W_FAILED };

struct backup_writer {
    backup_out_cb out;
    void *arg;
    enum writer_phase phase;
    uint32_t seq;      /* next record's sequence number */
    uint64_t bytes;    /* given to out so far */
    uint32_t file_crc; /* over every byte given to out */
    uint64_t rows;     /* all groups */
    /* the header's group list, to check group_begin's order */
    uint32_t n_groups, next_group; /* invariant: next_group <= n_groups */
    struct backup_group_info *groups;
    /* the open group */
    uint32_t group;
    uint64_t group_rows, group_row_bytes;
    uint32_t group_crc;
    /* one record being built: frame + payload */
    uint8_t *buf;      /* BACKUP_FRAME_LEN + BACKUP_RECORD_BYTES_MAX bytes */
    size_t len;        /* payload bytes in buf */
    uint32_t buf_rows; /* rows in the ROWS record being built */
    char errmsg[BACKUP_ERRMSG_MAX];
};

static int writer_fail(struct backup_writer *w, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int writer_fail(struct backup_writer *w, int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->errmsg, sizeof(w->errmsg), fmt, ap);
    va_end(ap);
    w->phase = W_FAILED;
    return code;
}

int backup_writer_new(backup_out_cb out, void *arg, struct backup_writer **out_w)
{
    struct backup_writer *w = calloc(1, sizeof(*w));
    if (w == NULL)
        goto err;
    w->buf = malloc(BACKUP_FRAME_LEN + BACKUP_RECORD_BYTES_MAX);
    if (w->buf == NULL)
        goto err_after_w;
    w->out = out;
    w->arg = arg;
    *out_w = w;
    return BACKUP_OK;

err_after_w:
    free(w);
err:
    return BACKUP_ENOMEM;
}

void backup_writer_free(struct backup_writer *w)
{
    if (w == NULL)
        return;
    free(w->groups);
    free(w->buf);
    free(w);
}

const char *backup_writer_errmsg(const struct backup_writer *w)
{
    return w->errmsg;
}

uint64_t backup_writer_bytes(const struct backup_writer *w)
{
    return w->bytes;
}

uint64_t backup_writer_rows(const struct backup_writer *w)
{
    return w->rows;
}

static uint8_t *payload(struct backup_writer *w)
{
    return w->buf + BACKUP_FRAME_LEN;
}

/* Frames the payload in buf as a record of type, hands it to out and empties buf. */
static int writer_emit(struct backup_writer *w, unsigned type)
{
    uint8_t *f = w->buf;
    f[0] = (uint8_t)type;
    f[1] = (uint8_t)BACKUP_FORMAT_VERSION;
    put_u16(f + 2, 0);
    put_u32(f + 4, w->seq);
    put_u32(f + 8, (uint32_t)w->len);
    put_u32(f + 12, record_crc(f, payload(w), w->len));
    size_t n = BACKUP_FRAME_LEN + w->len;
    if (w->out(w->arg, w->buf, n) != 0)
        return writer_fail(w, BACKUP_ESTOP, "record %" PRIu32 " (%s): output stopped", w->seq,
                           backup_record_type_name(type));
    w->file_crc = crc_update(w->file_crc, w->buf, n);
    w->bytes += n;
    w->seq++;
    w->len = 0;
    return BACKUP_OK;
}

static int writer_check_phase(struct backup_writer *w, enum writer_phase want, const char *what)
{
    if (w->phase == W_FAILED)
        return BACKUP_EINVAL; /* keeps the first message */
    if (w->phase != want)
        return writer_fail(w, BACKUP_EINVAL, "%s: out of order", what);
    return BACKUP_OK;
}

static int header_check(struct backup_writer *w, const struct backup_header *h)
{
    size_t idl = strnlen(h->cluster_id, sizeof(h->cluster_id));
    if (idl > BACKUP_CLUSTER_ID_MAX)
        return writer_fail(w, BACKUP_EINVAL, "header: cluster_id longer than %u bytes",
                           BACKUP_CLUSTER_ID_MAX);
    if (h->n_groups > BACKUP_GROUPS_MAX)
        return writer_fail(w, BACKUP_EINVAL, "header: %" PRIu32 " groups, at most %u", h->n_groups,
                           BACKUP_GROUPS_MAX);
    for (uint32_t i = 0; i < h->n_groups; i++) {
        if (h->groups[i].group == 0 || (i > 0 && h->groups[i].group <= h->groups[i - 1].group))
            return writer_fail(w, BACKUP_EINVAL,
                               "header: groups[%" PRIu32 "] = %" PRIu32
                               ": want ids >= 1, ascending, no duplicates",
                               i, h->groups[i].group);
    }
    return BACKUP_OK;
}

int backup_writer_header(struct backup_writer *w, const struct backup_header *h)
{
    int rc = writer_check_phase(w, W_START, "header");
    if (rc != BACKUP_OK)
        return rc;
    rc = header_check(w, h);
    if (rc != BACKUP_OK)
        return rc;
    w->groups = malloc(sizeof(*w->groups) * (h->n_groups ? h->n_groups : 1));
    if (w->groups == NULL)
        return writer_fail(w, BACKUP_ENOMEM, "header: out of memory");
    size_t idl = strnlen(h->cluster_id, sizeof(h->cluster_id));
    uint8_t *p = payload(w);
    memcpy(p, BACKUP_MAGIC, BACKUP_MAGIC_LEN);
    p += BACKUP_MAGIC_LEN;
    put_u32(p, BACKUP_FORMAT_VERSION);
    put_u64(p + 4, h->created_at_ms);
    put_u64(p + 12, h->route_revision);
    put_u64(p + 20, h->controller_applied_index);
    put_u16(p + 28, (uint16_t)idl);
    p += 30;
    memcpy(p, h->cluster_id, idl);
    p += idl;
    for (unsigned s = 0; s < BACKUP_HASH_SLOTS; s++, p += 4)
        put_u32(p, h->hash_slot_table[s]);
    put_u32(p, h->n_groups);
    p += 4;
    for (uint32_t i = 0; i < h->n_groups; i++, p += GROUP_INFO_LEN) {
        put_u32(p, h->groups[i].group);
        put_u64(p + 4, h->groups[i].applied_index);
        put_u64(p + 12, h->groups[i].source_node);
        w->groups[i] = h->groups[i];
    }
    w->n_groups = h->n_groups;
    w->len = (size_t)(p - payload(w));
    rc = writer_emit(w, BACKUP_REC_HEADER);
    if (rc == BACKUP_OK)
        w->phase = W_CONTROLLER;
    return rc;
}

int backup_writer_controller(struct backup_writer *w, const void *data, size_t len)
{
    int rc = writer_check_phase(w, W_CONTROLLER, "controller");
    const uint8_t *d = data;
    while (rc == BACKUP_OK && len > 0) {
        size_t n = len > BACKUP_RECORD_BYTES_MAX ? BACKUP_RECORD_BYTES_MAX : len;
        memcpy(payload(w), d, n);
        w->len = n;
        rc = writer_emit(w, BACKUP_REC_CONTROLLER);
        d += n;
        len -= n;
    }
    return rc;
}

int backup_writer_group_begin(struct backup_writer *w, uint32_t group)
{
    int rc = writer_check_phase(w, W_CONTROLLER, "group begin");
    if (rc != BACKUP_OK)
        return rc;
    if (w->next_group >= w->n_groups || w->groups[w->next_group].group != group)
        return writer_fail(w, BACKUP_EINVAL,
                           "group begin: group %" PRIu32 " is not the header's next group", group);
    w->group = group;
    w->group_rows = w->group_row_bytes = 0;
    w->group_crc = 0;
    w->buf_rows = 0;
    const struct backup_group_info *g = &w->groups[w->next_group++];
    put_u32(payload(w), group);
    put_u64(payload(w) + 4, g->applied_index);
    put_u64(payload(w) + 12, g->source_node);
    w->len = GROUP_BEGIN_LEN;
    rc = writer_emit(w, BACKUP_REC_GROUP_BEGIN);
    if (rc == BACKUP_OK)
        w->phase = W_IN_GROUP;
    return rc;
}

static int writer_flush_rows(struct backup_writer *w)
{
    if (w->buf_rows == 0)
        return BACKUP_OK;
    put_u32(payload(w), w->group);
    put_u32(payload(w) + 4, w->buf_rows);
    w->buf_rows = 0;
    return writer_emit(w, BACKUP_REC_ROWS);
}

int backup_writer_row(struct backup_writer *w, const void *k, size_t kl, const void *v, size_t vl)
{
    int rc = writer_check_phase(w, W_IN_GROUP, "row");
    if (rc != BACKUP_OK)
        return rc;
    size_t need = ROW_HEAD_LEN + kl + vl;
    if (kl == 0 || kl > BACKUP_KEY_MAX || vl > UINT32_MAX ||
        need > BACKUP_RECORD_BYTES_MAX - ROWS_HEAD_LEN)
        return writer_fail(w, BACKUP_EINVAL,
                           "row: group %" PRIu32 ": key of %zu bytes (want 1 to %u) and value of "
                           "%zu bytes do not fit one record of %zu bytes",
                           w->group, kl, BACKUP_KEY_MAX, vl, BACKUP_RECORD_BYTES_MAX);
    if (w->buf_rows > 0 && w->len + need > BACKUP_RECORD_BYTES_MAX) {
        rc = writer_flush_rows(w);
        if (rc != BACKUP_OK)
            return rc;
    }
    if (w->buf_rows == 0)
        w->len = ROWS_HEAD_LEN;
    uint8_t *p = payload(w) + w->len;
    put_u16(p, (uint16_t)kl);
    put_u32(p + 2, (uint32_t)vl);
    memcpy(p + ROW_HEAD_LEN, k, kl);
    if (vl > 0)
        memcpy(p + ROW_HEAD_LEN + kl, v, vl);
    w->group_crc = crc_update(w->group_crc, p, need);
    w->len += need;
    w->buf_rows++;
    w->group_rows++;
    w->group_row_bytes += kl + vl;
    w->rows++;
    if (w->len >= BACKUP_ROWS_TARGET_BYTES)
        return writer_flush_rows(w);
    return BACKUP_OK;
}

int backup_writer_group_end(struct backup_writer *w)
{
    int rc = writer_check_phase(w, W_IN_GROUP, "group end");
    if (rc == BACKUP_OK)
        rc = writer_flush_rows(w);
    if (rc != BACKUP_OK)
        return rc;
    uint8_t *p = payload(w);
    put_u32(p, w->group);
    put_u64(p + 4, w->group_rows);
    put_u64(p + 12, w->group_row_bytes);
    put_u32(p + 20, w->group_crc);
    w->len = GROUP_END_LEN;
    rc = writer_emit(w, BACKUP_REC_GROUP_END);
    if (rc == BACKUP_OK)
        w->phase = W_CONTROLLER; /* the next group may begin */
    return rc;
}

int backup_writer_finish(struct backup_writer *w)
{
    int rc = writer_check_phase(w, W_CONTROLLER, "finish");
    if (rc != BACKUP_OK)
        return rc;
    if (w->next_group != w->n_groups)
        return writer_fail(w, BACKUP_EINVAL,
                           "finish: %" PRIu32 " of the header's %" PRIu32 " groups written",
                           w->next_group, w->n_groups);
    uint8_t *p = payload(w);
    put_u32(p, w->n_groups);
    put_u64(p + 4, w->rows);
    put_u32(p + 12, w->seq); /* records before the trailer */
    put_u32(p + 16, w->file_crc);
    w->len = TRAILER_LEN;
    rc = writer_emit(w, BACKUP_REC_TRAILER);
    if (rc == BACKUP_OK)
        w->phase = W_FINISHED;
    return rc;
}

/* ---- reader ---- */

struct reader {
    FILE *f;
    const struct backup_read_cbs *cbs;
    void *arg;
    struct backup_summary *sum;
    char *err;
    size_t errlen;
    uint8_t *buf; /* one payload */
    /* the record being checked */
    uint32_t seq;
    unsigned type;
    uint64_t offset; /* of the record's frame */
    uint32_t len;
    uint32_t file_crc; /* over every byte before the current record */
    /* the open group */
    bool in_group;
    struct backup_group_summary *g;
    uint32_t group_crc;
    uint32_t next_group; /* index into the header's groups */
    bool seen_header;
};

static int reader_fail(struct reader *r, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* "record 17 (rows, group 3) at byte 5263012: " + the reason. */
static int reader_fail(struct reader *r, int code, const char *fmt, ...)
{
    char why[BACKUP_ERRMSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(why, sizeof(why), fmt, ap);
    va_end(ap);
    if (r->errlen == 0)
        return code;
    if (r->in_group)
        snprintf(r->err, r->errlen,
                 "record %" PRIu32 " (%s, group %" PRIu32 ") at byte %" PRIu64 ": %s", r->seq,
                 backup_record_type_name(r->type), r->g->group, r->offset, why);
    else
        snprintf(r->err, r->errlen, "record %" PRIu32 " (%s) at byte %" PRIu64 ": %s", r->seq,
                 backup_record_type_name(r->type), r->offset, why);
    return code;
}

static int reader_stopped(struct reader *r, int cbrc)
{
    return cbrc == 0 ? BACKUP_OK : reader_fail(r, BACKUP_ESTOP, "stopped by the caller");
}

static int read_header(struct reader *r, const uint8_t *p, uint32_t len)
{
    struct backup_header *h = &r->sum->header;
    if (r->seen_header)
        return reader_fail(r, BACKUP_ECORRUPT, "a second header");
    if (len < HEADER_FIXED_LEN || memcmp(p, BACKUP_MAGIC, BACKUP_MAGIC_LEN) != 0)
        return reader_fail(r, BACKUP_ECORRUPT, "not a slotd backup (bad magic)");
    h->format_version = get_u32(p + 8);
    if (h->format_version != BACKUP_FORMAT_VERSION)
        return reader_fail(r, BACKUP_ECORRUPT, "format version %" PRIu32 ", want %u",
                           h->format_version, BACKUP_FORMAT_VERSION);
    h->created_at_ms = get_u64(p + 12);
    h->route_revision = get_u64(p + 20);
    h->controller_applied_index = get_u64(p + 28);
    uint16_t idl = get_u16(p + 36);
    if (idl > BACKUP_CLUSTER_ID_MAX ||
        len < (size_t)HEADER_FIXED_LEN + idl + 4 * BACKUP_HASH_SLOTS + 4)
        return reader_fail(r, BACKUP_ECORRUPT, "header of %" PRIu32 " bytes is too short", len);
    const uint8_t *q = p + HEADER_FIXED_LEN;
    memcpy(h->cluster_id, q, idl);
    h->cluster_id[idl] = '\0';
    q += idl;
    for (unsigned s = 0; s < BACKUP_HASH_SLOTS; s++, q += 4)
        h->hash_slot_table[s] = get_u32(q);
    h->n_groups = get_u32(q);
    q += 4;
    if (h->n_groups > BACKUP_GROUPS_MAX)
        return reader_fail(r, BACKUP_ECORRUPT, "%" PRIu32 " groups, at most %u", h->n_groups,
                           BACKUP_GROUPS_MAX);
    if ((size_t)(q - p) + (size_t)h->n_groups * GROUP_INFO_LEN != len)
        return reader_fail(r, BACKUP_ECORRUPT,
                           "header length %" PRIu32 " does not match its %" PRIu32 " groups", len,
                           h->n_groups);
    for (uint32_t i = 0; i < h->n_groups; i++, q += GROUP_INFO_LEN) {
        h->groups[i].group = get_u32(q);
        h->groups[i].applied_index = get_u64(q + 4);
        h->groups[i].source_node = get_u64(q + 12);
        if (h->groups[i].group == 0 || (i > 0 && h->groups[i].group <= h->groups[i - 1].group))
            return reader_fail(r, BACKUP_ECORRUPT, "groups not ascending at entry %" PRIu32, i);
    }
    r->seen_header = true;
    return reader_stopped(r, r->cbs->header ? r->cbs->header(r->arg, h) : 0);
}

static int read_group_begin(struct reader *r, const uint8_t *p, uint32_t len)
{
    const struct backup_header *h = &r->sum->header;
    if (r->in_group)
        return reader_fail(r, BACKUP_ECORRUPT, "group %" PRIu32 " has no group end", r->g->group);
    if (len != GROUP_BEGIN_LEN)
        return reader_fail(r, BACKUP_ECORRUPT, "length %" PRIu32 ", want %d", len, GROUP_BEGIN_LEN);
    uint32_t group = get_u32(p);
    if (r->next_group >= h->n_groups || h->groups[r->next_group].group != group)
        return reader_fail(r, BACKUP_ECORRUPT, "group %" PRIu32 " is not the header's next group",
                           group);
    const struct backup_group_info *gi = &h->groups[r->next_group];
    if (get_u64(p + 4) != gi->applied_index || get_u64(p + 12) != gi->source_node)
        return reader_fail(r, BACKUP_ECORRUPT, "group %" PRIu32 " disagrees with the header",
                           group);
    r->g = &r->sum->groups[r->next_group++];
    memset(r->g, 0, sizeof(*r->g));
    r->g->group = group;
    r->g->applied_index = gi->applied_index;
    r->g->source_node = gi->source_node;
    r->group_crc = 0;
    r->in_group = true;
    return reader_stopped(r, r->cbs->group_begin ? r->cbs->group_begin(r->arg, gi) : 0);
}

static int read_rows(struct reader *r, const uint8_t *p, uint32_t len)
{
    if (!r->in_group)
        return reader_fail(r, BACKUP_ECORRUPT, "rows outside a group");
    if (len < ROWS_HEAD_LEN || get_u32(p) != r->g->group)
        return reader_fail(r, BACKUP_ECORRUPT, "rows record of another group or too short");
    uint32_t n = get_u32(p + 4);
    if (n == 0)
        return reader_fail(r, BACKUP_ECORRUPT, "empty rows record");
    size_t off = ROWS_HEAD_LEN;
    for (uint32_t i = 0; i < n; i++) {
        if (len - off < ROW_HEAD_LEN)
            return reader_fail(r, BACKUP_ECORRUPT, "row %" PRIu32 " runs past the record", i);
        size_t kl = get_u16(p + off), vl = get_u32(p + off + 2);
        if (kl == 0 || len - off - ROW_HEAD_LEN < kl + vl)
            return reader_fail(r, BACKUP_ECORRUPT, "row %" PRIu32 " runs past the record", i);
        const uint8_t *k = p + off + ROW_HEAD_LEN;
        r->group_crc = crc_update(r->group_crc, p + off, ROW_HEAD_LEN + kl + vl);
        if (r->cbs->row && r->cbs->row(r->arg, r->g->group, k, kl, k + kl, vl) != 0)
            return reader_stopped(r, 1);
        off += ROW_HEAD_LEN + kl + vl;
        r->g->rows++;
        r->g->row_bytes += kl + vl;
    }
    if (off != len)
        return reader_fail(r, BACKUP_ECORRUPT, "%zu bytes after the last row", (size_t)len - off);
    r->g->records++;
    r->sum->rows += n;
    return BACKUP_OK;
}

static int read_group_end(struct reader *r, const uint8_t *p, uint32_t len)
{
    if (!r->in_group)
        return reader_fail(r, BACKUP_ECORRUPT, "group end outside a group");
    if (len != GROUP_END_LEN || get_u32(p) != r->g->group)
        return reader_fail(r, BACKUP_ECORRUPT, "group end of another group or bad length");
    uint64_t rows = get_u64(p + 4), bytes = get_u64(p + 12);
    uint32_t crc = get_u32(p + 20);
    if (rows != r->g->rows || bytes != r->g->row_bytes)
        return reader_fail(r, BACKUP_ECORRUPT,
                           "group end says %" PRIu64 " rows of %" PRIu64 " bytes, read %" PRIu64
                           " rows of %" PRIu64 " bytes",
                           rows, bytes, r->g->rows, r->g->row_bytes);
    if (crc != r->group_crc)
        return reader_fail(r, BACKUP_ECORRUPT,
                           "rows checksum: stored 0x%08" PRIx32 ", computed 0x%08" PRIx32, crc,
                           r->group_crc);
    int rc = reader_stopped(r, r->cbs->group_end ? r->cbs->group_end(r->arg, r->g) : 0);
    r->in_group = false;
    r->sum->n_groups++;
    return rc;
}

static int read_trailer(struct reader *r, const uint8_t *p, uint32_t len)
{
    const struct backup_header *h = &r->sum->header;
    if (r->in_group)
        return reader_fail(r, BACKUP_ECORRUPT, "group %" PRIu32 " has no group end", r->g->group);
    if (len != TRAILER_LEN)
        return reader_fail(r, BACKUP_ECORRUPT, "length %" PRIu32 ", want %d", len, TRAILER_LEN);
    if (r->sum->n_groups != h->n_groups || get_u32(p) != h->n_groups)
        return reader_fail(r, BACKUP_ECORRUPT, "%" PRIu32 " groups read, the header lists %" PRIu32,
                           r->sum->n_groups, h->n_groups);
    if (get_u64(p + 4) != r->sum->rows || get_u32(p + 12) != r->seq)
        return reader_fail(r, BACKUP_ECORRUPT, "trailer counts disagree with the file");
    if (get_u32(p + 16) != r->file_crc)
        return reader_fail(r, BACKUP_ECORRUPT,
                           "file checksum: stored 0x%08" PRIx32 ", computed 0x%08" PRIx32,
                           get_u32(p + 16), r->file_crc);
    r->sum->file_crc = r->file_crc;
    return BACKUP_OK;
}

static int read_dispatch(struct reader *r, const uint8_t *p)
{
    if (r->seq == 0 && r->type != BACKUP_REC_HEADER)
        return reader_fail(r, BACKUP_ECORRUPT, "not a slotd backup (first record is no header)");
    switch (r->type) {
    case BACKUP_REC_HEADER:
        return read_header(r, p, r->len);
    case BACKUP_REC_CONTROLLER:
        if (r->in_group || r->next_group > 0)
            return reader_fail(r, BACKUP_ECORRUPT, "controller state after the groups began");
        r->sum->controller_bytes += r->len;
        return reader_stopped(r, r->cbs->controller ? r->cbs->controller(r->arg, p, r->len) : 0);
    case BACKUP_REC_GROUP_BEGIN:
        return read_group_begin(r, p, r->len);
    case BACKUP_REC_ROWS:
        return read_rows(r, p, r->len);
    case BACKUP_REC_GROUP_END:
        return read_group_end(r, p, r->len);
    case BACKUP_REC_TRAILER:
        return read_trailer(r, p, r->len);
    default:
        return reader_fail(r, BACKUP_ECORRUPT, "unknown record type %u", r->type);
    }
}

/* Reads n bytes; BACKUP_OK, or *eof_at_start when nothing at all could be read. */
static int read_exact(struct reader *r, void *buf, size_t n, bool *eof_at_start)
{
    size_t got = fread(buf, 1, n, r->f);
    if (eof_at_start)
        *eof_at_start = got == 0 && feof(r->f);
    if (got == n)
        return BACKUP_OK;
    if (ferror(r->f))
        return reader_fail(r, BACKUP_EIO, "read: %s", strerror(errno));
    return BACKUP_ECORRUPT;
}

/* One record: frame, payload, checks, dispatch. *done after the trailer. */
static int read_record(struct reader *r, bool *done)
{
    uint8_t frame[BACKUP_FRAME_LEN];
    bool eof0 = false;
    r->type = 0;
    int rc = read_exact(r, frame, sizeof(frame), &eof0);
    if (rc == BACKUP_ECORRUPT)
        return reader_fail(r, rc, eof0 ? "file ends before the trailer" : "truncated record frame");
    if (rc != BACKUP_OK)
        return rc;
    r->type = frame[0];
    r->len = get_u32(frame + 8);
    if (frame[1] != BACKUP_FORMAT_VERSION || get_u16(frame + 2) != 0)
        return reader_fail(r, BACKUP_ECORRUPT, "frame version %u, want %u", frame[1],
                           BACKUP_FORMAT_VERSION);
    if (get_u32(frame + 4) != r->seq)
        return reader_fail(r, BACKUP_ECORRUPT, "sequence number %" PRIu32 ", want %" PRIu32,
                           get_u32(frame + 4), r->seq);
    if (r->len > BACKUP_RECORD_BYTES_MAX)
        return reader_fail(r, BACKUP_ECORRUPT, "payload of %" PRIu32 " bytes, at most %zu", r->len,
                           BACKUP_RECORD_BYTES_MAX);
    rc = read_exact(r, r->buf, r->len, NULL);
    if (rc == BACKUP_ECORRUPT)
        return reader_fail(r, rc, "truncated payload (%" PRIu32 " bytes stated)", r->len);
    if (rc != BACKUP_OK)
        return rc;
    uint32_t crc = record_crc(frame, r->buf, r->len);
    if (crc != get_u32(frame + 12))
        return reader_fail(r, BACKUP_ECORRUPT,
                           "checksum mismatch: stored 0x%08" PRIx32 ", computed 0x%08" PRIx32,
                           get_u32(frame + 12), crc);
    rc = read_dispatch(r, r->buf);
    if (rc != BACKUP_OK)
        return rc;
    *done = r->type == BACKUP_REC_TRAILER;
    r->file_crc = crc_update(crc_update(r->file_crc, frame, sizeof(frame)), r->buf, r->len);
    r->offset += BACKUP_FRAME_LEN + r->len;
    r->seq++;
    return BACKUP_OK;
}

static int read_all(struct reader *r)
{
    bool done = false;
    int rc = BACKUP_OK;
    while (rc == BACKUP_OK && !done)
        rc = read_record(r, &done);
    if (rc != BACKUP_OK)
        return rc;
    if (fgetc(r->f) != EOF)
        return reader_fail(r, BACKUP_ECORRUPT, "bytes after the trailer");
    r->sum->records = r->seq;
    r->sum->file_bytes = r->offset;
    return BACKUP_OK;
}

int backup_read(FILE *f, const struct backup_read_cbs *cbs, void *arg, struct backup_summary *sum,
                char *err, size_t errlen)
{
    static const struct backup_read_cbs none;
    struct reader r = {.f = f, .cbs = cbs ? cbs : &none, .arg = arg, .err = err, .errlen = errlen};
    int rc = BACKUP_ENOMEM;
    if (errlen > 0)
        err[0] = '\0';
    r.sum = sum ? sum : malloc(sizeof(*r.sum));
    if (r.sum == NULL)
        goto err;
    memset(r.sum, 0, sizeof(*r.sum));
    r.buf = malloc(BACKUP_RECORD_BYTES_MAX);
    if (r.buf == NULL)
        goto err_after_sum;
    rc = read_all(&r);
    free(r.buf);
    if (sum == NULL)
        free(r.sum);
    return rc;

err_after_sum:
    if (sum == NULL)
        free(r.sum);
err:
    if (errlen > 0)
        snprintf(err, errlen, "read backup: out of memory");
    return rc;
}

int backup_read_file(const char *path, const struct backup_read_cbs *cbs, void *arg,
                     struct backup_summary *sum, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        if (errlen > 0)
            snprintf(err, errlen, "%s: %s", path, strerror(errno));
        return BACKUP_EIO;
    }
    int rc = backup_read(f, cbs, arg, sum, err, errlen);
    fclose(f);
    return rc;
}
