/* raft.c - per-peer raft message queues and the RaftStream call per peer (one frame in flight,
 * send timeout, backoff, reopen). */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/slice_buffer.h>
#include <grpc/support/time.h>

#include "service/fault/fault.h"
#include "call.h" /* slotd_grpc_status_name: clients/c, the one C call layer */
#include "transport_internal.h"

/* RaftBatch field numbers (peer.proto) and their wire tags (field << 3 | wire type). */
#define TRANSPORT__TAG_FROM_NODE 0x08 /* 1, varint */
#define TRANSPORT__TAG_TO_NODE 0x10   /* 2, varint */
#define TRANSPORT__TAG_MESSAGES 0x1a  /* 3, length-delimited */
#define TRANSPORT__VARINT_MAX 10
/* from_node and to_node: two tags and two varints. */
#define TRANSPORT__BATCH_HEADER_MAX (2 * (1 + TRANSPORT__VARINT_MAX))
#define TRANSPORT__RING_MIN 16
/* RaftStreamFrame field tags (peer.proto): proof = 1 (string), batch = 2 (bytes). */
#define TRANSPORT__TAG_FRAME_PROOF 0x0a
#define TRANSPORT__TAG_FRAME_BATCH 0x12
/* Bytes of a frame that are not queued records: the RaftBatch header and the frame fields. */
#define TRANSPORT__FRAME_RESERVE (TRANSPORT__BATCH_HEADER_MAX + TRANSPORT_FRAME_OVERHEAD_MAX)

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
    if (rec_len > t->opts.batch_bytes_max - TRANSPORT__FRAME_RESERVE) {
        return TRANSPORT_EINVAL; /* could never be sent: no frame may hold it */
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

/* ---- the stream ----------------------------------------------------------------------- */

static void stream_free(struct transport *t, struct transport__stream *st)
{
    if (st->prev != NULL) {
        st->prev->next = st->next;
    } else {
        t->streams = st->next;
    }
    if (st->next != NULL) {
        st->next->prev = st->prev;
    }
    assert(t->live_streams > 0);
    t->live_streams--;
    if (t->live_streams == 0) {
        pthread_cond_broadcast(&t->cond);
    }
    if (st->send != NULL) {
        grpc_byte_buffer_destroy(st->send);
    }
    if (st->recv != NULL) {
        grpc_byte_buffer_destroy(st->recv);
    }
    grpc_metadata_array_destroy(&st->init_md);
    grpc_metadata_array_destroy(&st->trail_md);
    grpc_slice_unref(st->status_details);
    grpc_call_unref(st->call);
    free(st);
}

/* Opens p's RaftStream: SEND_INITIAL_METADATA (nothing secret: each frame carries its proof) and
 * the receive side up to the status, in one batch that completes when the stream is over. No
 * deadline: a frame that is not sent within call_timeout_ms fails the stream instead. Under
 * t->mu, state RUNNING. NULL when gRPC or memory refused (the messages stay queued). */
static struct transport__stream *stream_open(struct transport *t, struct transport__peer *p)
{
    struct transport__stream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        return NULL;
    }
    st->send_tag = (struct transport__tag){TRANSPORT__TAG_STREAM_SEND, st};
    st->end_tag = (struct transport__tag){TRANSPORT__TAG_STREAM_END, st};
    st->peer = p;
    st->status = GRPC_STATUS_UNKNOWN;
    st->status_details = grpc_empty_slice();
    grpc_metadata_array_init(&st->init_md);
    grpc_metadata_array_init(&st->trail_md);
    grpc_slice path = grpc_slice_from_static_string(TRANSPORT_RAFT_STREAM_METHOD);
    st->call = grpc_channel_create_call(p->chan->channel, NULL, GRPC_PROPAGATE_DEFAULTS, t->cq,
                                        path, NULL, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    grpc_slice_unref(path);
    if (st->call == NULL) {
        goto err;
    }
    /* No GRPC_INITIAL_METADATA_WAIT_FOR_READY: a peer that cannot be reached fails the stream
     * fast with UNAVAILABLE. */
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[1].data.recv_initial_metadata.recv_initial_metadata = &st->init_md;
    ops[2].op = GRPC_OP_RECV_MESSAGE;
    ops[2].data.recv_message.recv_message = &st->recv;
    ops[3].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[3].data.recv_status_on_client.trailing_metadata = &st->trail_md;
    ops[3].data.recv_status_on_client.status = &st->status;
    ops[3].data.recv_status_on_client.status_details = &st->status_details;
    if (grpc_call_start_batch(st->call, ops, 4, &st->end_tag, NULL) != GRPC_CALL_OK) {
        goto err_after_call;
    }
    st->end_pending = true;
    st->next = t->streams;
    if (t->streams != NULL) {
        t->streams->prev = st;
    }
    t->streams = st;
    t->live_streams++;
    return st;

err_after_call:
    grpc_call_unref(st->call);
err:
    grpc_metadata_array_destroy(&st->init_md);
    grpc_metadata_array_destroy(&st->trail_md);
    free(st);
    return NULL;
}

/* The frame's proof field for batch (its bytes gathered from sb), into out; false when the
 * transport signs nothing or the signer refused (the frame goes without a proof). */
static bool frame_proof(struct transport *t, uint64_t to, const grpc_slice_buffer *sb, size_t len,
                        char *out, size_t outlen)
{
    const struct transport_options *o = &t->opts;
    if (o->sign == NULL ||
        strncmp(TRANSPORT_RAFT_STREAM_METHOD, o->sign_prefix, strlen(o->sign_prefix)) != 0) {
        return false;
    }
    uint8_t *body = malloc(len);
    if (body == NULL) {
        return false;
    }
    size_t at = 0;
    for (size_t i = 0; i < sb->count; i++) {
        memcpy(body + at, GRPC_SLICE_START_PTR(sb->slices[i]), GRPC_SLICE_LENGTH(sb->slices[i]));
        at += GRPC_SLICE_LENGTH(sb->slices[i]);
    }
    int rc = o->sign(o->sign_ctx, TRANSPORT_RAFT_STREAM_METHOD, to, body, len, out, outlen);
    free(body);
    return rc == 0;
}

/* Sends the oldest queued messages of p that fit in batch_bytes_max as one frame on its stream,
 * opening the stream first if none is open. Under t->mu; state RUNNING, p has messages queued
 * and no frame in flight. */
static void raft_start(struct transport *t, struct transport__peer *p)
{
    assert(t->state == TRANSPORT__RUNNING && !p->in_flight && p->queue.n > 0);
    if (p->stream == NULL && (p->stream = stream_open(t, p)) == NULL) {
        return; /* the messages stay queued; the next flush retries */
    }
    struct transport__stream *st = p->stream;
    uint8_t hdr[TRANSPORT__BATCH_HEADER_MAX];
    size_t h = 0;
    hdr[h++] = TRANSPORT__TAG_FROM_NODE;
    h += varint_put(hdr + h, t->opts.node_id);
    hdr[h++] = TRANSPORT__TAG_TO_NODE;
    h += varint_put(hdr + h, p->node_id);

    /* The RaftBatch is its header followed by the field-3 records: no re-encoding, no copy. */
    grpc_slice_buffer sb;
    grpc_slice_buffer_init(&sb);
    grpc_slice_buffer_add(&sb, grpc_slice_from_copied_buffer((const char *)hdr, h));
    size_t bytes = h;
    size_t n = 0;
    while (p->queue.n > 0) {
        size_t len = GRPC_SLICE_LENGTH(p->queue.slots[p->queue.head]);
        if (bytes + len > t->opts.batch_bytes_max - TRANSPORT_FRAME_OVERHEAD_MAX) {
            break; /* never on the first record: send_raft refuses records that cannot fit */
        }
        grpc_slice_buffer_add(&sb, ring_pop(&p->queue));
        p->queued_bytes -= len;
        bytes += len;
        n++;
    }
    assert(n > 0);

    /* The frame: proof (field 1, when signed), then batch (field 2) = the slices above. */
    char proof[TRANSPORT_PROOF_MAX];
    size_t plen = frame_proof(t, p->node_id, &sb, bytes, proof, sizeof(proof)) ? strlen(proof) : 0;
    uint8_t fh[1 + TRANSPORT__VARINT_MAX + TRANSPORT_PROOF_MAX + 1 + TRANSPORT__VARINT_MAX];
    size_t f = 0;
    if (plen > 0) {
        fh[f++] = TRANSPORT__TAG_FRAME_PROOF;
        f += varint_put(fh + f, plen);
        memcpy(fh + f, proof, plen);
        f += plen;
    }
    fh[f++] = TRANSPORT__TAG_FRAME_BATCH;
    f += varint_put(fh + f, bytes);
    grpc_slice *slices = malloc((sb.count + 1) * sizeof(*slices));
    if (slices == NULL) {
        grpc_slice_buffer_destroy(&sb);
        p->failed_batches++; /* out of memory: the batch is lost, raft retransmits */
        return;
    }
    slices[0] = grpc_slice_from_copied_buffer((const char *)fh, f);
    memcpy(slices + 1, sb.slices, sb.count * sizeof(*slices));
    st->send = grpc_raw_byte_buffer_create(slices, sb.count + 1);
    grpc_slice_unref(slices[0]);
    free(slices);
    grpc_slice_buffer_destroy(&sb);

    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_MESSAGE;
    op.data.send_message.send_message = st->send;
    if (grpc_call_start_batch(st->call, &op, 1, &st->send_tag, NULL) != GRPC_CALL_OK) {
        grpc_byte_buffer_destroy(st->send);
        st->send = NULL;
        p->failed_batches++; /* gRPC refused the send: the batch is lost, raft retransmits */
        return;
    }
    st->send_pending = true;
    st->n_msgs = n;
    st->send_until_ms = transport__now_ms() + (int64_t)t->opts.call_timeout_ms;
    p->in_flight = true;
}

/* True when p may send a frame now. Under t->mu. */
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

/* The next backoff wait of p after a failure: backoff_min_ms, then doubling up to the max. */
static unsigned backoff_next(const struct transport *t, const struct transport__peer *p)
{
    if (p->backoff_ms == 0) {
        return t->opts.backoff_min_ms;
    }
    uint64_t next = (uint64_t)p->backoff_ms * 2;
    return next > t->opts.backoff_max_ms ? t->opts.backoff_max_ms : (unsigned)next;
}

/* Detaches st from its peer and cancels it: the frame in flight (if any) is lost and counted in
 * failed_batches. With report (and running): the peer backs off and why gets the sentence for
 * peer_unreachable (the caller runs it without the lock). Under t->mu; st not failed yet. */
static bool stream_fail_locked(struct transport *t, struct transport__stream *st, bool report,
                               int status, const char *details, size_t details_len, char *why,
                               size_t whylen)
{
    struct transport__peer *p = st->peer;
    assert(!st->failed && p->stream == st);
    st->failed = true;
    p->stream = NULL;
    size_t lost = 0;
    if (p->in_flight) {
        p->in_flight = false;
        p->failed_batches++;
        lost = st->n_msgs;
    }
    grpc_call_cancel(st->call, NULL);
    if (!report || t->state != TRANSPORT__RUNNING) {
        return false; /* stopping: cancelled by transport_stop, not lost to the peer */
    }
    p->backoff_ms = backoff_next(t, p);
    p->backoff_until_ms = transport__now_ms() + p->backoff_ms;
    snprintf(why, whylen,
             "peer %llu at %s: Raft stream failed, %zu messages in flight lost: %s: %.*s; "
             "retrying in %u ms",
             (unsigned long long)p->node_id, p->chan->address, lost,
             slotd_grpc_status_name(status), (int)details_len, details, p->backoff_ms);
    return true;
}

void transport__stream_close(struct transport *t, struct transport__peer *p)
{
    if (p->stream != NULL) {
        stream_fail_locked(t, p->stream, false, GRPC_STATUS_CANCELLED, "", 0, NULL, 0);
    }
}

void transport__streams_cancel(struct transport *t)
{
    for (struct transport__stream *st = t->streams; st != NULL; st = st->next) {
        if (!st->failed) {
            stream_fail_locked(t, st, false, GRPC_STATUS_CANCELLED, "", 0, NULL, 0);
        }
    }
}

int64_t transport__raft_retry_due(struct transport *t)
{
    int64_t wake_ms = INT64_MAX;
    char why[512];
    pthread_mutex_lock(&t->mu);
    int64_t now = transport__now_ms();
    for (size_t i = 0; i < t->n_peers; i++) {
        struct transport__peer *p = t->peers[i];
        if (p->in_flight && p->stream != NULL) {
            if (now >= p->stream->send_until_ms) {
                /* accepted the stream but does not read it (or never connected) */
                static const char msg[] = "a frame was not sent within call_timeout_ms";
                if (stream_fail_locked(t, p->stream, true, GRPC_STATUS_DEADLINE_EXCEEDED, msg,
                                       sizeof(msg) - 1, why, sizeof(why))) {
                    pthread_mutex_unlock(&t->mu); /* peers are only ever added: i stays valid */
                    if (t->cb.peer_unreachable != NULL) {
                        t->cb.peer_unreachable(t->cb.ctx, p->node_id, why);
                    }
                    pthread_mutex_lock(&t->mu);
                    now = transport__now_ms();
                }
            } else {
                wake_ms = p->stream->send_until_ms < wake_ms ? p->stream->send_until_ms : wake_ms;
            }
        }
        if (p->backoff_until_ms == 0) {
            continue;
        }
        if (now < p->backoff_until_ms) {
            wake_ms = p->backoff_until_ms < wake_ms ? p->backoff_until_ms : wake_ms;
        } else if (raft_ready(t, p, now)) {
            raft_start(t, p);
            if (p->in_flight && p->stream->send_until_ms < wake_ms) {
                wake_ms = p->stream->send_until_ms;
            }
        }
    }
    pthread_mutex_unlock(&t->mu);
    return wake_ms;
}

void transport__stream_event(struct transport *t, struct transport__tag *tag, int success)
{
    struct transport__stream *st = tag->st;
    struct transport__peer *p = st->peer;
    char why[512];
    bool report = false;
    pthread_mutex_lock(&t->mu);
    if (tag->kind == TRANSPORT__TAG_STREAM_SEND) {
        st->send_pending = false;
        grpc_byte_buffer_destroy(st->send);
        st->send = NULL;
        if (!st->failed && success) {
            assert(p->in_flight);
            p->in_flight = false;
            p->sent_msgs += st->n_msgs;
            p->sent_batches++;
            p->backoff_ms = 0;
            /* 0 unless a fault build delays the peer (service/fault) */
            p->backoff_until_ms = SLOTD_FAULT_NET_PACE_UNTIL_MS(t->opts.node_id, p->node_id);
            if (raft_ready(t, p, transport__now_ms())) {
                raft_start(t, p); /* what queued meanwhile goes out now, as one frame */
            }
        }
        /* Not sent: the call broke. Its status (the end batch, which gRPC completes once the
         * call is over) says why and counts the frame; the send timeout covers the wait. */
    } else {
        st->end_pending = false;
        if (!st->failed) {
            if (st->status == GRPC_STATUS_OK && !success) {
                st->status = GRPC_STATUS_INTERNAL; /* never report a broken batch as OK */
            }
            report = stream_fail_locked(t, st, true, st->status,
                                        (const char *)GRPC_SLICE_START_PTR(st->status_details),
                                        GRPC_SLICE_LENGTH(st->status_details), why, sizeof(why));
        }
    }
    uint64_t node = p->node_id;
    if (!st->send_pending && !st->end_pending) {
        stream_free(t, st);
    }
    pthread_mutex_unlock(&t->mu);
    if (report && t->cb.peer_unreachable != NULL) {
        t->cb.peer_unreachable(t->cb.ctx, node, why);
    }
}
