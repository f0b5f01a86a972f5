/* snapshot.c - snapshot transfers: sending (capture, chunks), receiving (spool), installing. */
#define _GNU_SOURCE /* sync_file_range */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <zlib.h>

#include "service/fault/fault.h"
#include "service/runtime/facts.h"
#include "service/runtime/request.h"
#include "service/runtime/snap_spool.h"
#include "service/runtime/snapshot.h"
#include "service/runtime/submit.h"
#include "service/runtime/wire.h"
#include "store/keys.h"

#define PEER_METHOD_SNAPSHOT "/slotd.internal.v1.Peer/Snapshot"
#define SNAP_CHUNK_TIMEOUT_MS 30000
#define SNAP_DELETE_KEYS_MAX ((size_t)1 << 26)

/* ---- Snapshots: sending ---- */

struct chunk_ctx {
    struct runtime *rt;
    uint64_t transfer_id;
};

/* ---- Snapshot rows: [u32 klen][key][u32 vlen][value]..., the group's meta first ---- */

struct rowbuf {
    uint8_t *p;
    size_t len, cap;
};

static int row_put(struct rowbuf *b, const void *k, size_t kl, const void *v, size_t vl)
{
    size_t need = b->len + 8 + kl + vl;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < need)
            cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = cap;
    }
    store_put_u32(b->p + b->len, (uint32_t)kl);
    memcpy(b->p + b->len + 4, k, kl);
    store_put_u32(b->p + b->len + 4 + kl, (uint32_t)vl);
    memcpy(b->p + b->len + 8 + kl, v, vl);
    b->len = need;
    return 0;
}

static int row_put_cb(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    return row_put(arg, k, kl, v, vl);
}

static bool bit(const uint8_t bitmap[32], unsigned s)
{
    return (bitmap[s / 8] >> (s % 8)) & 1;
}

/* The hash slots whose rows a snapshot carries: owned ones, and those receiving a migration. */
void rt_snap_slots(const struct slot_group_state *gs, uint8_t out[32])
{
    for (size_t i = 0; i < 32; i++)
        out[i] = gs->owned[i] | gs->incoming[i];
}

static struct rt_snap_send *find_send(struct runtime *rt, uint64_t transfer_id)
{
    for (struct rt_snap_send *s = rt->snap_sends; s != NULL; s = s->next)
        if (s->transfer_id == transfer_id)
            return s;
    return NULL;
}

/* Unlinks send and frees it with its fsm snapshot (every path a transfer ends by). */
static void send_free(struct runtime *rt, struct rt_snap_send *send)
{
    for (struct rt_snap_send **pp = &rt->snap_sends; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == send) {
            *pp = send->next;
            break;
        }
    }
    store_fsm_snap_free(send->sn);
    free(send->head);
    free(send);
}

void rt_snap_free_all(struct runtime *rt)
{
    while (rt->snap_sends != NULL)
        send_free(rt, rt->snap_sends);
}

/* The leader needs to send a snapshot: the apply stage takes an fsm snapshot at its applied
 * index (so the rows are exactly the state there), then the loop streams them in chunks read
 * from it. One transfer per (group, peer) at a time, opts.snap_sends_max in all. */
void rt_snap_start(struct runtime *rt, struct rt_group *g, const struct raft_msg *m)
{
    size_t n = 0;
    for (struct rt_snap_send *s = rt->snap_sends; s != NULL; s = s->next, n++)
        if (s->g == g && s->to == m->to)
            return;
    size_t max = rt->opts.snap_sends_max ? rt->opts.snap_sends_max : RT_SNAP_SENDS_MAX;
    if (n >= max) {
        RT_LOG("warn",
               "msg=\"snapshot refused: too many transfers\" node=%llu group=%u to=%llu "
               "transfers=%zu max=%zu",
               (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)m->to, n, max);
        raft_report_snapshot(g->raft, m->to, false);
        return;
    }
    struct rt_snap_send *send = calloc(1, sizeof(*send));
    if (send == NULL) {
        raft_report_snapshot(g->raft, m->to, false);
        return;
    }
    send->g = g;
    send->to = m->to;
    send->term = m->term;
    send->transfer_id = ++rt->next_transfer_id;
    send->next = rt->snap_sends;
    rt->snap_sends = send;
    send->capture_next = rt->building->capture;
    rt->building->capture = send;
    RT_LOG("info", "msg=\"snapshot needed\" node=%llu group=%u to=%llu transfer=%llu",
           (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)m->to,
           (unsigned long long)send->transfer_id);
}

static void on_chunk_reply(void *arg, int status, const char *message, const uint8_t *resp,
                           size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct chunk_ctx *c = arg;
    bool ok = false;
    if (status == 0 && resp != NULL) {
        Slotd__Internal__V1__SnapshotAck *ack =
            slotd__internal__v1__snapshot_ack__unpack(NULL, resp_len, resp);
        ok = ack != NULL && ack->ok;
        if (ack != NULL)
            slotd__internal__v1__snapshot_ack__free_unpacked(ack, NULL);
    }
    rt_submit_snap_sent(c->rt, c->transfer_id, ok);
    free(c);
}

/* Loop: the rows of send's next chunk into b (about opts.snap_chunk_bytes: the scan stops after
 * the row that reaches it), read from the fsm snapshot; *last once nothing is left after them. */
static int chunk_build(struct runtime *rt, struct rt_snap_send *send, struct rowbuf *b, bool *last)
{
    size_t max = rt->opts.snap_chunk_bytes ? rt->opts.snap_chunk_bytes : RT_SNAP_CHUNK_BYTES;
    if (send->sn == NULL) { /* the controller: its captured state in slices */
        size_t n = send->head_len - send->offset;
        n = n > max ? max : n;
        b->p = malloc(n ? n : 1);
        if (b->p == NULL)
            return -1;
        memcpy(b->p, send->head + send->offset, n);
        b->len = b->cap = n;
        *last = send->offset + n == send->head_len;
        return 0;
    }
    if (!send->head_sent) { /* the meta rows open the first chunk */
        b->cap = send->head_len + 65536;
        b->p = malloc(b->cap);
        if (b->p == NULL)
            return -1;
        memcpy(b->p, send->head, send->head_len);
        b->len = send->head_len;
    }
    while (b->len < max) {
        if (!send->cursor_on) {
            unsigned s = send->range_next;
            while (s < 256 && !bit(send->slots, s))
                s++;
            if (s >= 256)
                break;
            unsigned e = s;
            while (e + 1 < 256 && bit(send->slots, e + 1))
                e++;
            uint8_t lo[2], hi[2];
            store_put_u16(lo, (uint16_t)s);
            store_put_u16(hi, e == 255 ? 0xFFFF : (uint16_t)(e + 1)); /* 0xFFFF: group metadata */
            if (store_fsm_snap_cursor_init(&send->cursor, lo, 2, hi, 2) != 0)
                return -1;
            send->range_first = s;
            send->range_last = e;
            send->cursor_on = true;
        }
        int rc = store_fsm_snap_scan(send->sn, &send->cursor, max - b->len, row_put_cb, b);
        if (rc != 0)
            return -1;
        if (send->cursor.done) {
            send->cursor_on = false;
            send->range_next = send->range_last + 1;
        }
    }
    *last = !send->cursor_on && send->range_next >= 256;
    if (!*last) { /* maybe only empty ranges remain: the next chunk says so */
        unsigned s = send->range_next;
        while (!send->cursor_on && s < 256 && !bit(send->slots, s))
            s++;
        *last = !send->cursor_on && s >= 256;
    }
    return 0;
}

static void send_chunk(struct runtime *rt, struct rt_snap_send *send)
{
    struct rowbuf b = {0};
    bool last = false;
    if (chunk_build(rt, send, &b, &last) != 0) {
        RT_LOG("warn", "msg=\"snapshot read failed\" group=%u to=%llu sent=%zu", send->g->id,
               (unsigned long long)send->to, send->offset);
        free(b.p);
        raft_report_snapshot(send->g->raft, send->to, false);
        send_free(rt, send);
        return;
    }
    send->head_sent = true;
    if (b.len > send->peak_chunk)
        send->peak_chunk = b.len;
    Slotd__Internal__V1__SnapshotChunk c = SLOTD__INTERNAL__V1__SNAPSHOT_CHUNK__INIT;
    c.from_node = rt->opts.node_id;
    c.group_id = send->g->id;
    c.transfer_id = send->transfer_id;
    c.offset = send->offset;
    c.total_bytes = last ? send->offset + b.len : 0; /* 0: not known before the last chunk */
    c.data.data = b.p;
    c.data.len = b.len;
    c.last = last;
    Slotd__Internal__V1__RaftMessage pb;
    struct rt_wire_scratch scratch;
    memset(&scratch, 0, sizeof(scratch));
    if (c.last) {
        struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT,
                             .from = rt->opts.node_id,
                             .to = send->to,
                             .term = send->term};
        m.snapshot.meta = send->meta;
        rt_wire_msg_to_pb(send->g->id, &m, &pb, &scratch);
        c.message = &pb;
    }
    size_t len = slotd__internal__v1__snapshot_chunk__get_packed_size(&c);
    uint8_t *buf = malloc(len);
    struct chunk_ctx *ctx = malloc(sizeof(*ctx));
    int rc = -1;
    bool counted = false;
    if (buf != NULL && ctx != NULL) {
        slotd__internal__v1__snapshot_chunk__pack(&c, buf);
        free(b.p); /* the rows live in buf now */
        b.p = NULL;
        ctx->rt = rt;
        ctx->transfer_id = send->transfer_id;
        send->chunk_len = c.data.len;
        send->last_sent = last;
        counted = true;
        if (++send->in_flight > send->in_flight_max)
            send->in_flight_max = send->in_flight;
        rc = transport_call(rt->transport, send->to, PEER_METHOD_SNAPSHOT, buf, len,
                            rt_now_ms() + SNAP_CHUNK_TIMEOUT_MS, on_chunk_reply, ctx);
    }
    free(b.p);
    rt_wire_scratch_free(&scratch);
    free(buf);
    if (rc != 0) {
        free(ctx);
        if (counted)
            send->in_flight--;
        raft_report_snapshot(send->g->raft, send->to, false);
        send_free(rt, send);
    }
}

/* Loop: the apply stage captured (or failed to capture) the rows. */
void rt_snap_captured(struct runtime *rt, struct rt_snap_send *send)
{
    for (; send != NULL; send = send->capture_next) {
        if (!send->captured) {
            RT_LOG("warn", "msg=\"snapshot capture failed\" group=%u to=%llu", send->g->id,
                   (unsigned long long)send->to);
            raft_report_snapshot(send->g->raft, send->to, false);
            send->dead = true;
            continue;
        }
        RT_LOG("info",
               "msg=\"snapshot captured\" node=%llu group=%u to=%llu index=%llu term=%llu "
               "streamed=%d",
               (unsigned long long)rt->opts.node_id, send->g->id, (unsigned long long)send->to,
               (unsigned long long)send->meta.index, (unsigned long long)send->meta.term,
               send->sn != NULL);
    }
}

/* Starts the first chunk of every captured transfer not yet started. */
void rt_snap_kick(struct runtime *rt)
{
    struct rt_snap_send *s = rt->snap_sends;
    while (s != NULL) {
        struct rt_snap_send *next = s->next;
        if (s->dead)
            send_free(rt, s);
        else if (s->captured && !s->started) {
            s->started = true;
            send_chunk(rt, s);
        }
        s = next;
    }
}

/* Loop: a chunk RPC ended; the next chunk is read only now (one chunk per transfer at a time). */
void rt_snap_chunk_sent(struct runtime *rt, uint64_t transfer_id, bool ok)
{
    struct rt_snap_send *send = find_send(rt, transfer_id);
    if (send == NULL || send->in_flight == 0)
        return;
    send->in_flight--;
    if (!ok) {
        RT_LOG("warn", "msg=\"snapshot send failed\" group=%u to=%llu sent=%zu chunks=%zu",
               send->g->id, (unsigned long long)send->to, send->offset, send->chunks);
        raft_report_snapshot(send->g->raft, send->to, false);
        send_free(rt, send);
        return;
    }
    send->offset += send->chunk_len;
    send->chunks++;
    metrics_counter_add(rt->metrics.snap_sent_bytes, send->chunk_len);
    RT_LOG("debug", "msg=\"snapshot progress\" group=%u to=%llu sent=%zu chunks=%zu", send->g->id,
           (unsigned long long)send->to, send->offset, send->chunks);
    if (!send->last_sent) {
        send_chunk(rt, send);
        return;
    }
    RT_LOG("info",
           "msg=\"snapshot sent\" node=%llu group=%u to=%llu index=%llu bytes=%zu chunks=%zu "
           "peak_chunk_bytes=%zu chunks_in_flight_max=%u",
           (unsigned long long)rt->opts.node_id, send->g->id, (unsigned long long)send->to,
           (unsigned long long)send->meta.index, send->offset, send->chunks, send->peak_chunk,
           send->in_flight_max);
    raft_report_snapshot(send->g->raft, send->to, true);
    send_free(rt, send);
}

/* Apply thread, between jobs (after the job's rows are committed): nothing else writes this
 * group's rows now. Takes an fsm snapshot and the meta; no row is read here. */
int rt_snap_capture_rows(struct runtime *rt, struct rt_snap_send *send)
{
    for (; send != NULL; send = send->capture_next) {
        struct rt_group *g = send->g;
        send->meta.index = g->apply_index;
        send->meta.term = g->apply_term;
        send->meta.conf = g->apply_conf;
        if (g->id == 0) { /* the controller: its canonical state */
            send->captured = rt->hooks.ctl_capture(rt, &send->head, &send->head_len) == 0;
            continue;
        }
        struct rowbuf b = {0};
        uint8_t mk[STORE_GROUP_META_KEY_LEN], mv[1 + sizeof(g->fsm_state.owned)];
        store_key_group_meta(mk, g->id, SLOT_GROUP_META_OWNED);
        mv[0] = STORE_VALUE_VERSION;
        memcpy(mv + 1, g->fsm_state.owned, sizeof(g->fsm_state.owned));
        int rc = row_put(&b, mk, sizeof(mk), mv, sizeof(mv));
        /* Then the migration record (fences, rows received for a migration in progress). */
        uint8_t gk[STORE_GROUP_META_KEY_LEN], gv[SLOT_GROUP_META_MIGRATION_LEN];
        store_key_group_meta(gk, g->id, SLOT_GROUP_META_MIGRATION);
        slot_group_migration_encode(&g->fsm_state, gv);
        if (rc == 0)
            rc = row_put(&b, gk, sizeof(gk), gv, sizeof(gv));
        if (rc == 0)
            rc = store_fsm_snap_new(rt->store, &send->sn);
        if (rc != 0) {
            free(b.p);
            send->sn = NULL;
            send->captured = false;
            continue;
        }
        rt_snap_slots(&g->fsm_state, send->slots);
        send->head = b.p;
        send->head_len = b.len;
        send->captured = true;
    }
    return 0;
}

/* ---- Snapshots: receiving ---- */

static void ack(struct rpc_call *call, bool ok, const char *error)
{
    Slotd__Internal__V1__SnapshotAck a = SLOTD__INTERNAL__V1__SNAPSHOT_ACK__INIT;
    a.ok = ok;
    a.error = (char *)(error ? error : "");
    rpc_call_reply(call, &a.base);
}

/* Drops a staged receive: frees its buffer (group 0), closes and deletes its spool file (data
 * groups). Loop thread (or with the loop stopped). */
void rt_snap_recv_discard(struct rt_snap_recv *rcv)
{
    free(rcv->data);
    if (rcv->has_fd)
        close(rcv->fd);
    if (rcv->path != NULL)
        unlink(rcv->path);
    free(rcv->path);
    memset(rcv, 0, sizeof(*rcv));
}

static void recv_reset(struct rt_snap_recv *rcv)
{
    rt_snap_recv_discard(rcv);
}

static int write_all(int fd, const uint8_t *p, size_t n)
{
    while (n > 0) {
        ssize_t w = write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        if (w <= 0)
            return -1;
        p += w;
        n -= (size_t)w;
    }
    return 0;
}

static int fsync_dir(const char *dir)
{
    int fd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = fsync(fd);
    close(fd);
    return rc;
}

/* Free bytes for an unprivileged writer on the file system of dir, UINT64_MAX if unknown. */
static uint64_t free_bytes(const char *dir)
{
    struct statvfs sv;
    if (statvfs(dir, &sv) != 0)
        return UINT64_MAX;
    return (uint64_t)sv.f_bavail * (uint64_t)sv.f_frsize;
}

/* Whether the data dir can take a data group's snapshot that has spooled `have` bytes and brings
 * `more` (the rest when it is announced, else this chunk): the spool file needs `more`, the
 * install writes every row into LevelDB while the file is still there (have + more again), and
 * RT_SNAP_RECV_FREE_MIN stays free for the raft logs and everything else. No: err says so. */
static bool recv_space_ok(const struct runtime *rt, uint64_t have, uint64_t more, char *err,
                          size_t errlen)
{
    uint64_t avail = free_bytes(rt->data_dir);
    uint64_t need = more + have + more + RT_SNAP_RECV_FREE_MIN;
    if (avail >= need)
        return true;
    snprintf(err, errlen,
             "not enough free space for the snapshot: %llu bytes free in the data dir, %llu "
             "needed (spool file and install, %llu kept free)",
             (unsigned long long)avail, (unsigned long long)need,
             (unsigned long long)RT_SNAP_RECV_FREE_MIN);
    return false;
}

/* Spool write-back: starts writing this chunk's range [off, off + n) to disk and waits for the
 * ranges before it (started one chunk earlier, so mostly done), so dirty pages stay within about
 * two chunks and the last chunk's fsync on the loop thread has little left to write. Best effort
 * (the fsync is what makes the file durable): an error here is ignored. */
static void spool_writeback(int fd, uint64_t off, uint64_t n)
{
    if (off > 0)
        (void)sync_file_range(fd, 0, (off_t)off,
                              SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE |
                                  SYNC_FILE_RANGE_WAIT_AFTER);
    (void)sync_file_range(fd, (off_t)off, (off_t)n, SYNC_FILE_RANGE_WRITE);
}

/* The largest snapshot of group `group` this node takes. */
static uint64_t recv_max(const struct runtime *rt, uint32_t group)
{
    if (group == 0)
        return RT_SNAP_BYTES_MAX;
    return rt->opts.snap_recv_max_bytes ? rt->opts.snap_recv_max_bytes : RT_SNAP_RECV_MAX_BYTES;
}

/* A data group's snapshot is spooled to <data dir>/snap-recv/g<group>-<transfer>.part, chunk by
 * chunk (no fsync per chunk); on the last one the file is synced and renamed to .snap and the
 * raft core gets a descriptor (snap_spool.h) in place of the rows. Group 0's stays in memory. */
void rt_snap_recv_chunk(struct runtime *rt, struct rt_request *r)
{
    Slotd__Internal__V1__SnapshotChunk *c =
        slotd__internal__v1__snapshot_chunk__unpack(NULL, r->len, r->data);
    if (c == NULL) {
        ack(r->call, false, "chunk does not decode");
        return;
    }
    const char *err = NULL;
    char errbuf[256];
    struct rt_group *g = NULL;
    if (!runtime_hosts_group(rt, c->group_id)) {
        err = "group not hosted here";
        goto done;
    }
    g = &rt->groups[c->group_id];
    struct rt_snap_recv *rcv = &g->snap_recv;
    uint64_t max = recv_max(rt, g->id);
    if (c->offset == 0) {
        recv_reset(rcv);
        if (c->total_bytes > max) {
            snprintf(errbuf, sizeof(errbuf),
                     "snapshot of %llu bytes is larger than this node accepts (%llu%s)",
                     (unsigned long long)c->total_bytes, (unsigned long long)max,
                     g->id == 0 ? ", the controller's limit" : ", --snapshot-recv-max-bytes");
            err = errbuf;
            goto done;
        }
        if (g->id != 0 && c->total_bytes != 0 &&
            !recv_space_ok(rt, 0, c->total_bytes, errbuf, sizeof(errbuf))) {
            err = errbuf;
            goto done;
        }
        if (g->id == 0) {
            rcv->cap = c->total_bytes ? c->total_bytes : 65536;
            rcv->data = malloc(rcv->cap);
            if (rcv->data == NULL) {
                err = "out of memory";
                goto done;
            }
        } else {
            char path[sizeof(rt->data_dir) + 64];
            if (rt_spool_path(path, sizeof(path), rt->data_dir, g->id, c->transfer_id, true) != 0 ||
                (rcv->path = strdup(path)) == NULL) {
                err = "spool file path: out of memory or too long";
                goto done;
            }
            rcv->fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            rcv->has_fd = rcv->fd >= 0;
            if (!rcv->has_fd) {
                RT_LOG("error", "msg=\"snapshot spool file\" group=%u path=\"%s\" err=\"%s\"",
                       g->id, path, strerror(errno));
                err = "cannot create the snapshot spool file";
                goto done;
            }
            rcv->crc = (uint32_t)crc32(0L, Z_NULL, 0);
        }
        rcv->active = true;
        rcv->transfer_id = c->transfer_id;
        rcv->from = c->from_node;
        rcv->total = c->total_bytes; /* 0: a streaming sender says it on the last chunk */
    }
    if (!rcv->active || rcv->transfer_id != c->transfer_id || rcv->from != c->from_node ||
        c->offset != rcv->len || (rcv->total != 0 && rcv->len + c->data.len > rcv->total) ||
        (c->total_bytes != 0 &&
         c->total_bytes != (c->last ? rcv->len + c->data.len : rcv->total))) {
        err = "chunk out of order";
        goto done;
    }
    if (rcv->len + c->data.len > max) {
        snprintf(errbuf, sizeof(errbuf), "snapshot larger than this node accepts (%llu bytes%s)",
                 (unsigned long long)max,
                 g->id == 0 ? ", the controller's limit" : ", --snapshot-recv-max-bytes");
        err = errbuf;
        goto done;
    }
    if (g->id == 0 && rcv->len + c->data.len > rcv->cap) {
        size_t cap = rcv->cap;
        while (cap < rcv->len + c->data.len)
            cap *= 2;
        cap = cap > RT_SNAP_BYTES_MAX ? RT_SNAP_BYTES_MAX : cap;
        uint8_t *np = realloc(rcv->data, cap);
        if (np == NULL) {
            err = "out of memory";
            goto done;
        }
        rcv->data = np;
        rcv->cap = cap;
    }
    if (c->data.len > 0 && g->id == 0) {
        memcpy(rcv->data + rcv->len, c->data.data, c->data.len);
    } else if (c->data.len > 0) {
        if (!recv_space_ok(rt, rcv->len, c->data.len, errbuf, sizeof(errbuf))) {
            err = errbuf;
            goto done;
        }
        if (write_all(rcv->fd, c->data.data, c->data.len) != 0) {
            RT_LOG("error", "msg=\"snapshot spool write failed\" group=%u path=\"%s\" err=\"%s\"",
                   g->id, rcv->path, strerror(errno));
            err = "writing the snapshot spool file failed";
            goto done;
        }
        rcv->crc = (uint32_t)crc32(rcv->crc, c->data.data, (uInt)c->data.len);
        spool_writeback(rcv->fd, rcv->len, c->data.len);
    }
    rcv->len += c->data.len;
    rcv->last_ms = rt_now_ms();
    metrics_counter_add(rt->metrics.snap_received_bytes, c->data.len);
    if (c->last) {
        struct raft_msg m;
        if (c->total_bytes != rcv->len || c->message == NULL || c->message->from != c->from_node ||
            rt_wire_msg_from_pb(c->message, &m) != 0 || m.type != RAFT_MSG_SNAPSHOT) {
            err = "last chunk is incomplete";
            goto done;
        }
        uint8_t desc[RT_SPOOL_DESC_LEN];
        char path[sizeof(rt->data_dir) + 64];
        if (g->id == 0) {
            m.snapshot.data.base = rcv->data;
            m.snapshot.data.len = rcv->len;
        } else {
            char dir[sizeof(rt->data_dir) + 16];
            snprintf(dir, sizeof(dir), "%s/%s", rt->data_dir, RT_SPOOL_DIR);
            int frc =
                rt_spool_path(path, sizeof(path), rt->data_dir, g->id, rcv->transfer_id, false);
            if (frc == 0)
                frc = fsync(rcv->fd);
            if (frc == 0)
                frc = rename(rcv->path, path);
            if (frc == 0) {
                free(rcv->path);
                rcv->path = NULL; /* renamed: the install deletes it now */
                frc = fsync_dir(dir);
            }
            if (frc != 0) {
                RT_LOG("error",
                       "msg=\"snapshot spool file: sync or rename failed\" group=%u "
                       "path=\"%s\" err=\"%s\"",
                       g->id, path, strerror(errno));
                free(m.entries);
                if (rcv->path == NULL)
                    unlink(path);
                err = "syncing the snapshot spool file failed";
                goto done;
            }
            struct rt_spool_desc d = {
                .transfer_id = rcv->transfer_id, .len = rcv->len, .crc = rcv->crc};
            rt_spool_desc_encode(&d, desc);
            m.snapshot.data.base = desc;
            m.snapshot.data.len = sizeof(desc);
        }
        raft_step(g->raft, &m); /* the core copies the data it keeps (a descriptor: 32 bytes) */
        free(m.entries);
        const struct raft_snapshot *taken = raft_pending_snapshot(g->raft);
        if (g->id != 0 && (taken == NULL || taken->data.len != sizeof(desc) ||
                           memcmp(taken->data.base, desc, sizeof(desc)) != 0)) {
            /* Not taken (older than what the group has committed, or its log already holds
             * it): nothing will install the file, so it goes now, not at the next start. */
            unlink(path);
            RT_LOG("info", "msg=\"snapshot not taken, spool file deleted\" group=%u index=%llu",
                   g->id, (unsigned long long)m.snapshot.meta.index);
        }
        RT_LOG("info",
               "msg=\"snapshot received\" node=%llu group=%u from=%llu index=%llu bytes=%zu",
               (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)rcv->from,
               (unsigned long long)m.snapshot.meta.index, rcv->len);
        recv_reset(rcv);
    }

done:
    if (err != NULL && g != NULL) {
        RT_LOG("warn",
               "msg=\"snapshot chunk refused\" group=%u from=%llu transfer=%llu offset=%llu "
               "err=\"%s\"",
               g->id, (unsigned long long)c->from_node, (unsigned long long)c->transfer_id,
               (unsigned long long)c->offset, err);
        recv_reset(&g->snap_recv);
    }
    ack(r->call, err == NULL, err);
    slotd__internal__v1__snapshot_chunk__free_unpacked(c, NULL);
}

void rt_snap_recv_expire(struct runtime *rt, int64_t now)
{
    RT_ASSERT_LOOP(rt);
    int64_t idle = rt->opts.snap_recv_idle_ms ? (int64_t)rt->opts.snap_recv_idle_ms
                                              : (int64_t)RT_SNAP_RECV_IDLE_MS;
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_snap_recv *rcv = &rt->groups[i].snap_recv;
        if (!rcv->active || now - rcv->last_ms < idle)
            continue;
        RT_LOG("warn",
               "msg=\"snapshot receive abandoned\" node=%llu group=%zu from=%llu bytes=%zu "
               "idle_ms=%lld",
               (unsigned long long)rt->opts.node_id, i, (unsigned long long)rcv->from, rcv->len,
               (long long)(now - rcv->last_ms));
        metrics_counter_add(rt->metrics.snap_recv_abandoned, 1);
        recv_reset(rcv); /* deletes the spool file */
    }
}

/* Loop, in take_ready: the core accepted a snapshot. The rows are installed
 * (synced) by the storage stage BEFORE the raftlog batch that records the
 * snapshot and drops the replaced entries, once no apply job of the group is
 * in flight; see rt_pump. */
void rt_snap_install_ready(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd)
{
    const struct raft_snapshot *snap = &rd->snapshot;
    struct rt_snap_install *in = calloc(1, sizeof(*in));
    if (in == NULL || (snap->data.len > 0 && (in->data = malloc(snap->data.len)) == NULL)) {
        RT_LOG("fatal", "msg=\"out of memory staging a snapshot\" group=%u", g->id);
        abort();
    }
    in->meta = snap->meta;
    in->len = snap->data.len;
    if (in->len > 0)
        memcpy(in->data, snap->data.base, in->len);
    in->g = g;
    in->next = rt->installs;
    rt->installs = in;

    struct store_snapshot_meta m = {.index = snap->meta.index, .term = snap->meta.term};
    m.conf.n_voters = snap->meta.conf.n_voters;
    m.conf.n_learners = snap->meta.conf.n_learners;
    memcpy(m.conf.voters, snap->meta.conf.voters, m.conf.n_voters * sizeof(uint64_t));
    memcpy(m.conf.learners, snap->meta.conf.learners, m.conf.n_learners * sizeof(uint64_t));
    store_log_batch_put_snapshot_meta(rt->log_batch, g->id, &m);
    store_log_batch_put_conf_state(rt->log_batch, g->id, &m.conf);
    if (g->first_index > 0 && g->stored_last >= g->first_index)
        store_log_batch_delete_entries(rt->log_batch, g->id, g->first_index, g->stored_last + 1);
    g->stored_last = snap->meta.index;
    g->first_index = snap->meta.index + 1;
}

/* The fsm keyspace is per node, keyed by hash slot, so two groups hosted here share the rows of
 * a hash slot while a migration moves it between them. A group giving a slot up (release, abort,
 * a removed replica) leaves its rows alone when another hosted group owns the slot or is
 * receiving it. Apply stage, or with no apply job running (snapshot installs). */
bool rt_slot_claimed_elsewhere(struct runtime *rt, uint32_t group, uint16_t s)
{
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        const struct rt_group *h = &rt->groups[i];
        if (h->id != group && h->hosted &&
            (slot_group_owns(&h->fsm_state, s) || slot_group_incoming(&h->fsm_state, s)))
            return true;
    }
    return false;
}

/* A snapshot of `group` replaces the rows of hash slot s unless another hosted group has the
 * say over them: one that owns s while `group` does not, or has it fenced (the rows are then
 * the other group's writes, newer than or equal to what the snapshot carries). */
static bool snap_yields(struct runtime *rt, const struct rt_group *g, uint16_t s)
{
    bool writer = slot_group_owns(&g->fsm_state, s) && !slot_group_fenced(&g->fsm_state, s);
    for (size_t i = 1; !writer && i < RT_GROUP_SLOTS(rt); i++) {
        const struct rt_group *h = &rt->groups[i];
        if (h != g && h->hosted && slot_group_owns(&h->fsm_state, s))
            return true;
    }
    return false;
}

/* Clears from slots (a bitmap) every hash slot another hosted group claims (see above). */
void rt_snap_drop_claimed(struct runtime *rt, const struct rt_group *g, uint8_t slots[32],
                          bool for_snapshot)
{
    for (unsigned s = 0; s < 256; s++) {
        if (!bit(slots, s))
            continue;
        bool keep = for_snapshot ? snap_yields(rt, g, (uint16_t)s)
                                 : rt_slot_claimed_elsewhere(rt, g->id, (uint16_t)s);
        if (keep)
            slots[s / 8] &= (uint8_t) ~(1u << (s % 8));
    }
}

int rt_snap_delete_owned(struct runtime *rt, struct store_fsm_batch *b, const uint8_t owned[32])
{
    for (unsigned s = 0; s < 256; s++) {
        if (!((owned[s / 8] >> (s % 8)) & 1))
            continue;
        unsigned e = s;
        while (e + 1 < 256 && ((owned[(e + 1) / 8] >> ((e + 1) % 8)) & 1))
            e++;
        uint8_t lo[2], hi[2];
        store_put_u16(lo, (uint16_t)s);
        store_put_u16(hi, e == 255 ? 0xFFFF : (uint16_t)(e + 1)); /* 0xFFFF: group metadata */
        int rc = store_fsm_batch_delete_range(rt->store, b, lo, 2, hi, 2, SNAP_DELETE_KEYS_MAX);
        if (rc != 0)
            return rc;
        s = e;
    }
    return 0;
}

/* ---- Snapshots: installing a spooled one ---- */

/* The in-progress row (SLOT_GROUP_META_INSTALL) of a batched install: [ver][index u64][term u64]
 * [transfer u64][length u64][crc32 u32][delete bitmap 32][write bitmap 32] - the spool file's
 * descriptor and the hash slots whose old rows the install
 * deletes and those whose snapshot rows it writes, decided once, so a resumed install does the
 * same whatever the other groups' state is when the node restarts. */
#define INSTALL_ROW_LEN (1 + 36 + 64)

struct install_plan {
    uint64_t index, term, transfer, len;
    uint32_t crc;
    uint8_t del[32];
    uint8_t write[32];
};

static void plan_encode(const struct install_plan *p, uint8_t out[INSTALL_ROW_LEN])
{
    out[0] = STORE_VALUE_VERSION;
    store_put_u64(out + 1, p->index);
    store_put_u64(out + 9, p->term);
    store_put_u64(out + 17, p->transfer);
    store_put_u64(out + 25, p->len);
    store_put_u32(out + 33, p->crc);
    memcpy(out + 37, p->del, 32);
    memcpy(out + 69, p->write, 32);
}

static int plan_decode(const uint8_t *v, size_t vl, struct install_plan *p)
{
    if (vl != INSTALL_ROW_LEN || v[0] != STORE_VALUE_VERSION)
        return -1;
    p->index = store_get_u64(v + 1);
    p->term = store_get_u64(v + 9);
    p->transfer = store_get_u64(v + 17);
    p->len = store_get_u64(v + 25);
    p->crc = store_get_u32(v + 33);
    memcpy(p->del, v + 37, 32);
    memcpy(p->write, v + 69, 32);
    return 0;
}

static size_t install_batch_bytes(const struct runtime *rt)
{
    return rt->opts.snap_install_batch_bytes ? rt->opts.snap_install_batch_bytes
                                             : RT_SNAP_INSTALL_BATCH_BYTES;
}

/* One pass over the spool file at path (descriptor d). write = false: checks every row (the
 * ownership row first, then the optional migration row, every other row in the snapshot's own
 * hash slots, the length and CRC) and, unless `decided`, fills plan's bitmaps from the hosted
 * groups' fsm_state. write = true: installs - the first (synced) batch deletes the rows of
 * plan->del, writes the ownership and migration rows, the in-progress row and applied index 0;
 * middle batches of at most install_batch_bytes row bytes put rows of plan->write; the last
 * (synced) one writes the snapshot position, the applied index and deletes the in-progress row.
 * Sets owned and mig. Storage stage, or startup before the group opens. *why: what failed. */
static int spool_pass(struct runtime *rt, struct rt_group *g, const char *path,
                      const struct rt_spool_desc *d, struct install_plan *plan, bool decided,
                      bool write, uint8_t owned[32], struct slot_group_state *mig, const char **why)
{
    struct rt_spool_reader rd;
    if (rt_spool_reader_open(&rd, path, d, RT_SPOOL_PIECE_BYTES) != 0) {
        *why = errno == ENOENT   ? "the spool file is missing"
               : errno == EINVAL ? "the spool file's length is not the snapshot's"
                                 : "the spool file cannot be read";
        return STORE_EIO;
    }
    int rc = STORE_ECORRUPT;
    struct store_fsm_batch *b = NULL;
    uint8_t mk[STORE_GROUP_META_KEY_LEN], gk[STORE_GROUP_META_KEY_LEN];
    uint8_t ik[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(mk, g->id, SLOT_GROUP_META_OWNED);
    store_key_group_meta(gk, g->id, SLOT_GROUP_META_MIGRATION);
    store_key_group_meta(ik, g->id, SLOT_GROUP_META_INSTALL);
    const uint8_t *k, *v;
    size_t kl, vl;
    *why = "the spool file's rows are corrupt";
    /* The first row is the group's ownership record. */
    int n = rt_spool_reader_next(&rd, &k, &kl, &v, &vl);
    if (n != 1 || kl != sizeof(mk) || memcmp(k, mk, kl) != 0 || vl != 1 + 32)
        goto out;
    uint8_t own_v[1 + 32];
    memcpy(own_v, v, sizeof(own_v));
    memcpy(owned, v + 1, 32);
    /* Then, from snapshots that carry it, the migration record. */
    memset(mig, 0, sizeof(*mig));
    n = rt_spool_reader_next(&rd, &k, &kl, &v, &vl);
    bool has_mig = n == 1 && kl == sizeof(gk) && memcmp(k, gk, kl) == 0;
    uint8_t mig_v[SLOT_GROUP_META_MIGRATION_LEN];
    if (has_mig) {
        if (vl != SLOT_GROUP_META_MIGRATION_LEN || slot_group_migration_decode(v, vl, mig) != 0)
            goto out;
        memcpy(mig_v, v, sizeof(mig_v));
    }
    uint8_t snap_rows[32]; /* hash slots whose rows the snapshot carries */
    for (size_t i = 0; i < sizeof(snap_rows); i++)
        snap_rows[i] = owned[i] | mig->incoming[i];
    if (!write && !decided) {
        /* Hash slots whose rows another hosted group has the say over are neither deleted nor
         * written (a migration between two groups hosted here). */
        uint8_t mine[32];
        memset(mine, 0xFF, sizeof(mine));
        rt_snap_drop_claimed(rt, g, mine, true);
        for (size_t i = 0; i < sizeof(mine); i++) {
            plan->write[i] = snap_rows[i] & mine[i];
            plan->del[i] =
                (snap_rows[i] | g->fsm_state.owned[i] | g->fsm_state.incoming[i]) & mine[i];
        }
    }
    size_t batch_max = install_batch_bytes(rt), batch_bytes = 0, middle = 0;
    if (write) {
        if ((rc = store_fsm_batch_new(&b)) != 0)
            goto out_io;
        rc = rt_snap_delete_owned(rt, b, plan->del);
        if (rc != 0)
            goto out_io;
        if (!has_mig)
            store_fsm_batch_delete(b, gk, sizeof(gk));
        store_fsm_batch_put(b, mk, sizeof(mk), own_v, sizeof(own_v));
        if (has_mig)
            store_fsm_batch_put(b, gk, sizeof(gk), mig_v, sizeof(mig_v));
        uint8_t iv[INSTALL_ROW_LEN];
        plan_encode(plan, iv);
        store_fsm_batch_put(b, ik, sizeof(ik), iv, sizeof(iv));
        store_fsm_batch_set_applied(b, g->id, 0);
        rc = store_fsm_write(rt->store, b, true);
        if (rc != 0)
            goto out_io;
        SLOTD_FAULT_NOTE_FSM_SYNCED(rt->data_dir);
        store_fsm_batch_clear(b);
    }
    if (has_mig)
        n = rt_spool_reader_next(&rd, &k, &kl, &v, &vl);
    rc = STORE_ECORRUPT;
    for (; n == 1; n = rt_spool_reader_next(&rd, &k, &kl, &v, &vl)) {
        bool meta = kl == sizeof(mk) && (memcmp(k, mk, kl) == 0 || memcmp(k, gk, kl) == 0);
        uint16_t hs = kl >= 2 ? store_get_u16(k) : 0xFFFF;
        if (!meta && (hs >= 256 || !bit(snap_rows, hs)))
            goto out; /* a row outside the snapshot's own hash slots */
        if (!write || !(meta || bit(plan->write, hs)))
            continue;
        store_fsm_batch_put(b, k, kl, v, vl);
        batch_bytes += kl + vl;
        if (batch_bytes >= batch_max) {
            if ((rc = store_fsm_write(rt->store, b, false)) != 0)
                goto out_io;
            store_fsm_batch_clear(b);
            batch_bytes = 0;
            if (++middle == 1)
                SLOTD_CRASH_POINT("snapshot_mid_install"); /* first batch + one middle one */
            rc = STORE_ECORRUPT;
        }
    }
    if (n != 0)
        goto out;
    rc = 0;
    if (write) {
        /* The snapshot's raft position, so a restart that finds the rows but not
         * the raftlog batch written after them can rebuild the log position. */
        uint8_t pk[STORE_GROUP_META_KEY_LEN], pv[17];
        store_key_group_meta(pk, g->id, SLOT_GROUP_META_SNAPSHOT);
        pv[0] = STORE_VALUE_VERSION;
        store_put_u64(pv + 1, plan->index);
        store_put_u64(pv + 9, plan->term);
        store_fsm_batch_put(b, pk, sizeof(pk), pv, sizeof(pv));
        store_fsm_batch_set_applied(b, g->id, plan->index);
        store_fsm_batch_delete(b, ik, sizeof(ik));
        rc = store_fsm_write(rt->store, b, true);
        if (rc != 0)
            goto out_io;
    }
    goto out;

out_io:
    *why = "writing the rows failed";
out:
    store_fsm_batch_free(b);
    rt_spool_reader_close(&rd);
    return rc;
}

/* Checks, then installs, the spooled snapshot (see spool_pass). */
static int install_spool(struct runtime *rt, struct rt_group *g, const char *path,
                         const struct rt_spool_desc *d, struct install_plan *plan, bool decided,
                         uint8_t owned[32], struct slot_group_state *mig, const char **why)
{
    int rc = spool_pass(rt, g, path, d, plan, decided, false, owned, mig, why);
    if (rc == 0)
        rc = spool_pass(rt, g, path, d, plan, true, true, owned, mig, why);
    return rc;
}

/* Deletes the .snap files of group (all, or all but transfer `keep` when has_keep). */
static void spool_delete_group(const struct runtime *rt, uint32_t group, bool has_keep,
                               uint64_t keep)
{
    char dir[sizeof(rt->data_dir) + 16];
    snprintf(dir, sizeof(dir), "%s/%s", rt->data_dir, RT_SPOOL_DIR);
    DIR *dp = opendir(dir);
    if (dp == NULL)
        return;
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        uint32_t gr;
        uint64_t tr;
        bool part;
        if (rt_spool_name_parse(de->d_name, &gr, &tr, &part) != 0 || gr != group || part ||
            (has_keep && tr == keep))
            continue;
        char path[sizeof(dir) + 300];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        unlink(path);
    }
    closedir(dp);
}

int rt_snap_spool_init(struct runtime *rt, char *err, size_t errlen)
{
    char dir[sizeof(rt->data_dir) + 16];
    snprintf(dir, sizeof(dir), "%s/%s", rt->data_dir, RT_SPOOL_DIR);
    if (mkdir(dir, 0700) != 0 && errno != EEXIST) {
        snprintf(err, errlen, "snapshot spool folder %s: %s", dir, strerror(errno));
        return -1;
    }
    DIR *dp = opendir(dir);
    if (dp == NULL) {
        snprintf(err, errlen, "snapshot spool folder %s: %s", dir, strerror(errno));
        return -1;
    }
    struct dirent *de;
    while ((de = readdir(dp)) != NULL) {
        uint32_t gr;
        uint64_t tr;
        bool part;
        if (rt_spool_name_parse(de->d_name, &gr, &tr, &part) != 0 || !part)
            continue;
        char path[sizeof(dir) + 300];
        snprintf(path, sizeof(path), "%s/%s", dir, de->d_name);
        if (unlink(path) == 0)
            RT_LOG("info", "msg=\"deleted a partly received snapshot\" path=\"%s\"", path);
    }
    closedir(dp);
    return 0;
}

int rt_snap_install_resume(struct runtime *rt, struct rt_group *g, char *err, size_t errlen)
{
    uint8_t ik[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(ik, g->id, SLOT_GROUP_META_INSTALL);
    void *v = NULL;
    size_t vl = 0;
    int rc = store_fsm_get(rt->store, ik, sizeof(ik), &v, &vl);
    if (rc == STORE_ENOTFOUND) {
        spool_delete_group(rt, g->id, false, 0); /* received, never installed: raft resends */
        return 0;
    }
    if (rc != 0) {
        snprintf(err, errlen, "group %u: read the snapshot install record: %s", g->id,
                 store_strerror(rc));
        return -1;
    }
    struct install_plan plan;
    rc = plan_decode(v, vl, &plan);
    free(v);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: the snapshot install record is corrupt", g->id);
        return -1;
    }
    char path[sizeof(rt->data_dir) + 64];
    rt_spool_path(path, sizeof(path), rt->data_dir, g->id, plan.transfer, false);
    if (access(path, F_OK) != 0) {
        snprintf(err, errlen,
                 "group %u: a snapshot install (index %llu) was interrupted and its spool file "
                 "%s is missing (%s): the group's rows are half installed; restore this node's "
                 "data dir or remove the node and add it back",
                 g->id, (unsigned long long)plan.index, path, strerror(errno));
        return -1;
    }
    struct rt_spool_desc d = {.transfer_id = plan.transfer, .len = plan.len, .crc = plan.crc};
    uint8_t owned[32];
    struct slot_group_state mig;
    const char *why = "";
    RT_LOG("warn",
           "msg=\"resuming an interrupted snapshot install\" group=%u index=%llu path=\"%s\"",
           g->id, (unsigned long long)plan.index, path);
    rc = install_spool(rt, g, path, &d, &plan, true, owned, &mig, &why);
    if (rc != 0) {
        snprintf(err, errlen,
                 "group %u: a snapshot install (index %llu) was interrupted and its spool file "
                 "%s is bad (%s): the group's rows are half installed; restore this node's data "
                 "dir or remove the node and add it back",
                 g->id, (unsigned long long)plan.index, path, why);
        return -1;
    }
    SLOTD_FAULT_NOTE_FSM_SYNCED(rt->data_dir);
    unlink(path);
    RT_LOG("info", "msg=\"interrupted snapshot install finished\" group=%u index=%llu", g->id,
           (unsigned long long)plan.index);
    return 0;
}

/* Storage stage: replaces the group's rows with the snapshot's - group 0's from memory
 * (rt_ctl_install), a data group's from its spool file in bounded batches (spool_pass) - then
 * sets the group's fsm_state and apply position (struct rt_group: the storage stage writes them
 * here because installs_blocked kept every apply job out, and none starts until storage_done). */
int rt_snap_install_rows(struct runtime *rt, struct rt_group *g, struct rt_snap_install *in)
{
    RT_ASSERT_NOT_LOOP(rt);
    if (g->id == 0)
        return rt->hooks.ctl_install(rt, g, in->data, in->len, &in->meta);
    struct rt_spool_desc d;
    if (rt_spool_desc_decode(in->data, in->len, &d) != 0) {
        RT_LOG("error", "msg=\"snapshot install: not a spool descriptor\" group=%u bytes=%zu",
               g->id, in->len);
        return STORE_ECORRUPT;
    }
    char path[sizeof(rt->data_dir) + 64];
    if (rt_spool_path(path, sizeof(path), rt->data_dir, g->id, d.transfer_id, false) != 0)
        return STORE_EIO;
    struct install_plan plan = {.index = in->meta.index,
                                .term = in->meta.term,
                                .transfer = d.transfer_id,
                                .len = d.len,
                                .crc = d.crc};
    uint8_t owned[32];
    struct slot_group_state mig;
    const char *why = "";
    int rc = install_spool(rt, g, path, &d, &plan, false, owned, &mig, &why);
    slot_fsm_forget_rows(rt->fsm); /* the apply's cached versions of the replaced rows */
    if (rc != 0) {
        RT_LOG("error", "msg=\"snapshot install failed\" group=%u path=\"%s\" err=\"%s\"", g->id,
               path, why);
        return rc;
    }
    SLOTD_FAULT_NOTE_FSM_SYNCED(rt->data_dir);
    SLOTD_CRASH_POINT("snapshot_after_fsm_rows"); /* rows synced, raftlog batch not written */
    unlink(path);
    memcpy(g->fsm_state.owned, owned, sizeof(owned));
    memcpy(g->fsm_state.fenced, mig.fenced, sizeof(mig.fenced));
    memcpy(g->fsm_state.incoming, mig.incoming, sizeof(mig.incoming));
    g->fsm_state.migration_task = mig.migration_task;
    g->fsm_state.migration_chunks = mig.migration_chunks;
    g->fsm_state.migration_rows = mig.migration_rows;
    g->fsm_state.migration_crc = mig.migration_crc;
    g->fsm_state.initialized = true;
    g->apply_index = in->meta.index;
    g->apply_term = in->meta.term;
    g->apply_conf = in->meta.conf;
    rt_facts_publish_slots(g);
    return 0;
}
