/* raft.c - per-peer raft message queues and RaftBatch calls (one in flight per peer, backoff). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/slice_buffer.h>
#include <grpc/support/time.h>

#include "service/fault/fault.h"
#include "transport_internal.h"

/* RaftBatch field numbers (peer.proto) and their wire tags (field << 3 | wire type). */
#define TRANSPORT__TAG_FROM_NODE 0x08 /* 1, varint */
#define TRANSPORT__TAG_TO_NODE 0x10   /* 2, varint */
#define TRANSPORT__TAG_MESSAGES 0x1a  /* 3, length-delimited */
#define TRANSPORT__VARINT_MAX 10
/* from_node and to_node: two tags and two varints. */
#define TRANSPORT__BATCH_HEADER_MAX (2 * (1 + TRANSPORT__VARINT_MAX))
#define TRANSPORT__RING_MIN 16

static size_t varint_put(uint8_t *w, uint64_t v)
{
    size_t n = 0;
    while (v >= 0x80) {
        w[n++] = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    w[n++] = (uint8_t)v;
    return n;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    while (v >= 0x80) {
        v >>= 7;
        n++;
    }
    return n;
}

/* ---- the queue --------------------------------------------------------------------------- */

/* Appends s (ownership transfers on success); false when out of memory. */
static bool ring_push(struct transport__ring *r, grpc_slice s)
{
    if (r->n == r->cap) {
        size_t cap = r->cap == 0 ? TRANSPORT__RING_MIN : r->cap * 2;
        grpc_slice *slots = malloc(cap * sizeof(*slots));
        if (slots == NULL) {
            return false;
        }
        for (size_t i = 0; i < r->n; i++) {
            slots[i] = r->slots[(r->head + i) % r->cap];
        }
        free(r->slots);
        r->slots = slots;
        r->cap = cap;
        r->head = 0;
    }
    r->slots[(r->head + r->n) % r->cap] = s;
    r->n++;
    return true;
}

/* Removes the oldest slice; ownership transfers to the caller. */
static grpc_slice ring_pop(struct transport__ring *r)
{
    assert(r->n > 0);
    grpc_slice s = r->slots[r->head];
    r->head = (r->head + 1) % r->cap;
    r->n--;
    return s;
}

void transport__ring_clear(struct transport__peer *p)
{
    while (p->queue.n > 0) {
        grpc_slice_unref(ring_pop(&p->queue));
    }
    p->queued_bytes = 0;
}

void transport__ring_free(struct transport__peer *p)
{
    transport__ring_clear(p);
    free(p->queue.slots);
    p->queue.slots = NULL;
    p->queue.cap = 0;
}

int transport_send_raft(struct transport *t, uint64_t to, const Slotd__Internal__V1__RaftMessage *m)
{
    if (SLOTD_FAULT_NET_DROP(t->opts.node_id, to)) {
        return TRANSPORT_OK; /* fault builds only (service/fault): lost on the wire */
    }
    size_t msg_len = slotd__internal__v1__raft_message__get_packed_size(m);
    size_t rec_len = 1 + varint_len(msg_len) + msg_len;
    if (rec_len > t->opts.batch_bytes_max - TRANSPORT__BATCH_HEADER_MAX) {
        return TRANSPORT_EINVAL; /* could never be sent: no batch may hold it */
    }
    /* Encode outside the lock: the costly part, and it needs no shared state. */
    grpc_slice s = grpc_slice_malloc(rec_len);
    uint8_t *w = GRPC_SLICE_START_PTR(s);
    *w++ = TRANSPORT__TAG_MESSAGES;
    w += varint_put(w, msg_len);
    size_t packed = slotd__internal__v1__raft_message__pack(m, w);
    assert(packed == msg_len);
    (void)packed;

    int rc = TRANSPORT_OK;
    pthread_mutex_lock(&t->mu);
    struct transport__peer *p = transport__peer_find(t, to);
    if (t->state != TRANSPORT__NEW && t->state != TRANSPORT__RUNNING) {
        rc = TRANSPORT_ESTOPPED;
    } else if (p == NULL) {
        rc = TRANSPORT_EUNKNOWN_PEER;
    } else if (p->queue.n >= t->opts.queue_msgs_max ||
               p->queued_bytes + rec_len > t->opts.queue_bytes_max) {
        p->dropped_full++;
        rc = TRANSPORT_EFULL;
    } else if (!ring_push(&p->queue, s)) {
        rc = TRANSPORT_ENOMEM;
    } else {
        p->queued_bytes += rec_len;
    }
    pthread_mutex_unlock(&t->mu);
    if (rc != TRANSPORT_OK) {
        grpc_slice_unref(s);
    }
    return rc;
}

/* ---- batches ----------------------------------------------------------------------------- */

/* Starts a RaftBatch call with the oldest queued messages of p that fit in batch_bytes_max.
 * Under t->mu; state RUNNING, p has messages queued and no batch in flight. */
static void raft_start(struct transport *t, struct transport__peer *p)
{
    assert(t->state == TRANSPORT__RUNNING && !p->in_flight && p->queue.n > 0);
    struct transport__call *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return; /* the messages stay queued; the next flush retries */
    }
    uint8_t hdr[TRANSPORT__BATCH_HEADER_MAX];
    size_t h = 0;
    hdr[h++] = TRANSPORT__TAG_FROM_NODE;
    h += varint_put(hdr + h, t->opts.node_id);
    hdr[h++] = TRANSPORT__TAG_TO_NODE;
    h += varint_put(hdr + h, p->node_id);

    /* A RaftBatch is its header followed by the field-3 records: no re-encoding, no copy. */
    grpc_slice_buffer sb;
    grpc_slice_buffer_init(&sb);
    grpc_slice_buffer_add(&sb, grpc_slice_from_copied_buffer((const char *)hdr, h));
    size_t bytes = h;
    size_t n = 0;
    while (p->queue.n > 0) {
        size_t len = GRPC_SLICE_LENGTH(p->queue.slots[p->queue.head]);
        if (bytes + len > t->opts.batch_bytes_max) {
            break; /* never on the first record: send_raft refuses records that cannot fit */
        }
        grpc_slice_buffer_add(&sb, ring_pop(&p->queue));
        p->queued_bytes -= len;
        bytes += len;
        n++;
    }
    assert(n > 0);
    c->send = grpc_raw_byte_buffer_create(sb.slices, sb.count);
    grpc_slice_buffer_destroy(&sb);
    c->kind = TRANSPORT__CALL_RAFT;
    c->peer = p;
    c->n_msgs = n;
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_millis((int64_t)t->opts.call_timeout_ms, GPR_TIMESPAN));
    if (transport__call_start(t, c, p->chan->channel, TRANSPORT_RAFT_METHOD, p->node_id,
                              deadline) != TRANSPORT_OK) {
        p->failed_batches++; /* out of memory in gRPC: the batch is lost, raft retransmits */
        return;
    }
    p->in_flight = true;
}

/* True when p may start a batch now. Under t->mu. */
static bool raft_ready(const struct transport *t, const struct transport__peer *p, int64_t now)
{
    return t->state == TRANSPORT__RUNNING && !p->in_flight && p->queue.n > 0 &&
           (p->backoff_until_ms == 0 || now >= p->backoff_until_ms);
}

void transport_flush(struct transport *t)
{
    pthread_mutex_lock(&t->mu);
    int64_t now = transport__now_ms();
    for (size_t i = 0; i < t->n_peers; i++) {
        if (raft_ready(t, t->peers[i], now)) {
            raft_start(t, t->peers[i]);
        }
    }
    pthread_mutex_unlock(&t->mu);
}

int64_t transport__raft_retry_due(struct transport *t)
{
    int64_t wake_ms = INT64_MAX;
    pthread_mutex_lock(&t->mu);
    int64_t now = transport__now_ms();
    for (size_t i = 0; i < t->n_peers; i++) {
        struct transport__peer *p = t->peers[i];
        if (p->backoff_until_ms == 0) {
            continue;
        }
        if (now < p->backoff_until_ms) {
            wake_ms = p->backoff_until_ms < wake_ms ? p->backoff_until_ms : wake_ms;
        } else if (raft_ready(t, p, now)) {
            raft_start(t, p);
        }
    }
    pthread_mutex_unlock(&t->mu);
    return wake_ms;
}

/* The next backoff wait of p after a failure: backoff_min_ms, then doubling up to the max. */
static unsigned backoff_next(const struct transport *t, const struct transport__peer *p)
{
    if (p->backoff_ms == 0) {
        return t->opts.backoff_min_ms;
    }
    uint64_t next = (uint64_t)p->backoff_ms * 2;
    return next > t->opts.backoff_max_ms ? t->opts.backoff_max_ms : (unsigned)next;
}

void transport__raft_done(struct transport *t, struct transport__call *c)
{
    struct transport__peer *p = c->peer;
    char why[512];
    bool report = false;
    pthread_mutex_lock(&t->mu);
    assert(p->in_flight);
    p->in_flight = false;
    if (c->status == GRPC_STATUS_OK) {
        p->sent_msgs += c->n_msgs;
        p->sent_batches++;
        p->backoff_ms = 0;
        /* 0 unless a fault build delays the peer (service/fault) */
        p->backoff_until_ms = SLOTD_FAULT_NET_PACE_UNTIL_MS(t->opts.node_id, p->node_id);
        if (raft_ready(t, p, transport__now_ms())) {
            raft_start(t, p); /* what queued meanwhile goes out now, as one batch */
        }
    } else {
        p->failed_batches++;
        if (t->state == TRANSPORT__RUNNING) {
            p->backoff_ms = backoff_next(t, p);
            p->backoff_until_ms = transport__now_ms() + p->backoff_ms;
            snprintf(why, sizeof(why),
                     "peer %llu at %s: Raft batch of %zu messages failed: %s: %.*s; retrying in "
                     "%u ms",
                     (unsigned long long)p->node_id, p->chan->address, c->n_msgs,
                     transport__status_name(c->status), (int)GRPC_SLICE_LENGTH(c->status_details),
                     (const char *)GRPC_SLICE_START_PTR(c->status_details), p->backoff_ms);
            report = true;
        }
        /* Stopping: the batch was cancelled by transport_stop, not lost to the peer. */
    }
    pthread_mutex_unlock(&t->mu);
    if (report && t->cb.peer_unreachable != NULL) {
        t->cb.peer_unreachable(t->cb.ctx, p->node_id, why);
    }
}
