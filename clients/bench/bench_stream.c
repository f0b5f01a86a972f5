/* bench_stream.c - --stream: ProposeStream calls of one worker, their items, sends and results. */
#include "bench_stream.h"

#include "bench_err.h"
#include "bench_wire.h"
#include "client_internal.h"
#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/support/time.h>

#include <assert.h>
#include <stdlib.h>
#include <string.h>

enum { STREAM_OP_SEND, STREAM_OP_RECV, STREAM_OP_STATUS, STREAM_OPS };

struct bench_stream;

/* The tag of one kind of batch on one stream (one batch of each kind at most is outstanding). */
struct stream_op {
    struct bench_stream *st;
    int kind;
};

struct bench_stream {
    struct bench_stream_set *set;
    unsigned index;
    grpc_channel *channel; /* of the open call */
    grpc_call *call;       /* NULL: not open */
    struct stream_op op[STREAM_OPS];
    bool outstanding[STREAM_OPS]; /* a batch of that kind awaits its completion */
    bool ended;                   /* the status arrived; the call is freed once nothing is
                                     outstanding */
    bool cancelled;               /* by us: expired items, or the end of the phase */
    bool metadata_sent;           /* the initial metadata went with the first message */
    grpc_byte_buffer *send;       /* the request message in flight */
    grpc_byte_buffer *recv;
    grpc_metadata_array initial_md, trailing_md;
    grpc_status_code status;
    grpc_slice details;
    /* items queued for the next message: a ring of item indices, capacity set->item_count */
    unsigned *queue;
    unsigned queue_head, queue_len; /* invariant: queue_len <= set->item_count */
    unsigned sent_inflight;         /* sent items without a result */
};

/* ---- encoding ------------------------------------------------------------------------- */

size_t bench_stream_item_encode(uint64_t id, bool no_forward, const uint8_t *key, size_t key_len,
                                const uint8_t *value, size_t value_len, uint8_t *buf,
                                size_t buf_len)
{
    Slotd__V1__PutCommand put = SLOTD__V1__PUT_COMMAND__INIT;
    Slotd__V1__ProposeRequest req = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__ProposeStreamItem item = SLOTD__V1__PROPOSE_STREAM_ITEM__INIT;
    put.key.data = (uint8_t *)key;
    put.key.len = key_len;
    put.value.data = (uint8_t *)value;
    put.value.len = value_len;
    req.no_forward = no_forward;
    req.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    req.put = &put;
    item.id = id;
    item.request = &req;
    size_t body = slotd__v1__propose_stream_item__get_packed_size(&item);
    size_t size = 1 + slotd__varint_len(body) + body; /* ProposeStreamRequest.items, field 1 */
    if (size > buf_len || !buf)
        return size;
    uint8_t *p = buf;
    *p++ = 0x0a;
    p = slotd__varint_put(p, body);
    size_t n = slotd__v1__propose_stream_item__pack(&item, p);
    assert(n == body);
    (void)n;
    return size;
}

/* ---- the set -------------------------------------------------------------------------- */

int bench_stream_set_init(struct bench_stream_set *set, const struct bench_opts *o,
                          grpc_completion_queue *cq, grpc_metadata *md, size_t md_count,
                          const uint8_t *value, unsigned item_count, unsigned stream_count,
                          bench_stream_done_cb done, void *ctx)
{
    memset(set, 0, sizeof(*set));
    set->o = o;
    set->cq = cq;
    set->md = md;
    set->md_count = md_count;
    set->value = value;
    set->item_count = item_count;
    set->stream_count = stream_count;
    set->done = done;
    set->ctx = ctx;
    set->key = malloc((size_t)o->key_size + 1);
    set->items = calloc(item_count ? item_count : 1, sizeof(*set->items));
    set->streams = calloc(stream_count, sizeof(*set->streams));
    if (!set->key || !set->items || !set->streams)
        goto err_after_alloc;
    for (unsigned i = 0; i < stream_count; i++) {
        struct bench_stream *st = &set->streams[i];
        st->set = set;
        st->index = i;
        for (int k = 0; k < STREAM_OPS; k++)
            st->op[k] = (struct stream_op){st, k};
        st->queue = malloc((item_count ? item_count : 1) * sizeof(*st->queue));
        if (!st->queue)
            goto err_after_alloc;
    }
    return BENCH_OK;

err_after_alloc:
    bench_stream_set_free(set);
    return BENCH_ENOMEM;
}

void bench_stream_set_free(struct bench_stream_set *set)
{
    assert(!bench_stream_busy(set));
    for (unsigned i = 0; set->streams && i < set->stream_count; i++)
        free(set->streams[i].queue);
    free(set->streams);
    free(set->items);
    free(set->key);
    memset(set, 0, sizeof(*set));
}

bool bench_stream_busy(const struct bench_stream_set *set)
{
    if (set->inflight)
        return true;
    for (unsigned i = 0; set->streams && i < set->stream_count; i++)
        if (set->streams[i].call)
            return true;
    return false;
}

/* Hands item to the caller's callback and frees its entry. */
static void stream_item_end(struct bench_stream_set *set, unsigned item,
                            const struct bench_stream_outcome *out)
{
    assert(set->items[item].in_use);
    set->items[item].in_use = false;
    set->inflight--;
    set->done(set->ctx, item, out);
}

/* ---- one stream ----------------------------------------------------------------------- */

static void stream_batch(struct bench_stream *st, int kind, const grpc_op *ops, size_t n)
{
    assert(!st->outstanding[kind]);
    grpc_call_error rc = grpc_call_start_batch(st->call, ops, n, &st->op[kind], NULL);
    assert(rc == GRPC_CALL_OK); /* only a malformed batch fails here: a programmer error */
    (void)rc;
    st->outstanding[kind] = true;
}

static void stream_recv_next(struct bench_stream *st)
{
    grpc_op op = {.op = GRPC_OP_RECV_MESSAGE};
    op.data.recv_message.recv_message = &st->recv;
    st->recv = NULL;
    stream_batch(st, STREAM_OP_RECV, &op, 1);
}

/* Opens the call: the status and the first message are asked for now, the initial metadata
 * goes with the first request message. */
static void stream_open(struct bench_stream *st)
{
    struct bench_stream_set *set = st->set;
    st->call = grpc_channel_create_call(st->channel, NULL, GRPC_PROPAGATE_DEFAULTS, set->cq,
                                        grpc_slice_from_static_string(BENCH_STREAM_METHOD), NULL,
                                        gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
    st->ended = false;
    st->cancelled = false;
    st->metadata_sent = false;
    st->send = NULL;
    grpc_metadata_array_init(&st->initial_md);
    grpc_metadata_array_init(&st->trailing_md);
    st->details = grpc_empty_slice();
    st->status = GRPC_STATUS_OK;
    grpc_op status = {.op = GRPC_OP_RECV_STATUS_ON_CLIENT};
    status.data.recv_status_on_client.trailing_metadata = &st->trailing_md;
    status.data.recv_status_on_client.status = &st->status;
    status.data.recv_status_on_client.status_details = &st->details;
    stream_batch(st, STREAM_OP_STATUS, &status, 1);
    grpc_op recv[2] = {{.op = GRPC_OP_RECV_INITIAL_METADATA}, {.op = GRPC_OP_RECV_MESSAGE}};
    recv[0].data.recv_initial_metadata.recv_initial_metadata = &st->initial_md;
    recv[1].data.recv_message.recv_message = &st->recv;
    stream_batch(st, STREAM_OP_RECV, recv, 2);
    set->streams_opened++;
}

/* Encodes up to one message's worth of queued items into a slice; NULL when out of memory. */
static grpc_byte_buffer *stream_message(struct bench_stream *st, unsigned *count)
{
    struct bench_stream_set *set = st->set;
    const struct bench_opts *o = set->o;
    size_t item_max =
        bench_stream_item_encode(UINT64_MAX, true, NULL, o->key_size, NULL, o->value_size, NULL, 0);
    unsigned n =
        st->queue_len < BENCH_STREAM_ITEMS_PER_MSG ? st->queue_len : BENCH_STREAM_ITEMS_PER_MSG;
    if (item_max * n > BENCH_STREAM_MSG_BYTES_MAX)
        n = item_max >= BENCH_STREAM_MSG_BYTES_MAX
                ? 1
                : (unsigned)(BENCH_STREAM_MSG_BYTES_MAX / item_max);
    grpc_slice slice = grpc_slice_malloc(item_max * n);
    uint8_t *p = GRPC_SLICE_START_PTR(slice);
    size_t used = 0;
    for (unsigned k = 0; k < n; k++) {
        unsigned item = st->queue[st->queue_head];
        st->queue_head = (st->queue_head + 1) % set->item_count;
        st->queue_len--;
        struct bench_stream_item *it = &set->items[item];
        bench_wire_key_format(set->key, o->key_size, it->key_index);
        used += bench_stream_item_encode(item, it->direct, (const uint8_t *)set->key, o->key_size,
                                         set->value, o->value_size, p + used, item_max * n - used);
        it->sent = true;
    }
    assert(used <= item_max * n);
    grpc_slice sub = grpc_slice_sub(slice, 0, used);
    grpc_slice_unref(slice);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&sub, 1);
    grpc_slice_unref(sub);
    *count = n;
    return bb;
}

/* Sends one message of queued items (the first one with the initial metadata). */
static void stream_send(struct bench_stream *st)
{
    struct bench_stream_set *set = st->set;
    unsigned n = 0;
    st->send = stream_message(st, &n);
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    size_t count = 0;
    if (!st->metadata_sent) {
        ops[count].op = GRPC_OP_SEND_INITIAL_METADATA;
        ops[count].data.send_initial_metadata.count = set->md_count;
        ops[count].data.send_initial_metadata.metadata = set->md;
        count++;
        st->metadata_sent = true;
    }
    ops[count].op = GRPC_OP_SEND_MESSAGE;
    ops[count].data.send_message.send_message = st->send;
    count++;
    stream_batch(st, STREAM_OP_SEND, ops, count);
    st->sent_inflight += n;
    set->messages_sent++;
    set->items_sent += n;
}

void bench_stream_submit(struct bench_stream_set *set, unsigned item, unsigned stream,
                         grpc_channel *channel)
{
    assert(item < set->item_count && stream < set->stream_count);
    struct bench_stream *st = &set->streams[stream];
    struct bench_stream_item *it = &set->items[item];
    assert(!it->in_use);
    it->in_use = true;
    it->sent = false;
    it->stream = (uint16_t)stream;
    set->inflight++;
    if (!st->call)
        st->channel = channel;
    /* invariant: an item is queued on at most one stream, so a ring of item_count holds all */
    assert(st->queue_len < set->item_count);
    st->queue[(st->queue_head + st->queue_len) % set->item_count] = item;
    st->queue_len++;
}

void bench_stream_flush(struct bench_stream_set *set)
{
    for (unsigned i = 0; i < set->stream_count; i++) {
        struct bench_stream *st = &set->streams[i];
        if (st->queue_len == 0 || st->outstanding[STREAM_OP_SEND])
            continue;
        if (!st->call)
            stream_open(st);
        else if (st->ended || st->cancelled)
            continue; /* its queue goes out on the next call, once this one is freed */
        stream_send(st);
    }
}

/* ---- completions ---------------------------------------------------------------------- */

/* Ends every sent item of st with the stream's status (the stream is over). */
static void stream_fail_sent(struct bench_stream *st, unsigned code)
{
    struct bench_stream_set *set = st->set;
    struct bench_stream_outcome out = {.code = code, .stream_ended = true};
    for (unsigned i = 0; i < set->item_count && st->sent_inflight > 0; i++) {
        struct bench_stream_item *it = &set->items[i];
        if (it->in_use && it->sent && it->stream == st->index) {
            st->sent_inflight--;
            stream_item_end(set, i, &out);
        }
    }
    assert(st->sent_inflight == 0);
}

/* Frees the call once its status is in and no batch is outstanding. */
static void stream_release_if_done(struct bench_stream *st)
{
    if (!st->ended || st->outstanding[STREAM_OP_SEND] || st->outstanding[STREAM_OP_RECV] ||
        st->outstanding[STREAM_OP_STATUS])
        return;
    unsigned code = st->status < 17 ? (unsigned)st->status : (unsigned)GRPC_STATUS_UNKNOWN;
    if (st->cancelled && code == GRPC_STATUS_CANCELLED)
        code = GRPC_STATUS_DEADLINE_EXCEEDED; /* bench_stream_expire (or the phase end) */
    stream_fail_sent(st, code);
    grpc_metadata_array_destroy(&st->initial_md);
    grpc_metadata_array_destroy(&st->trailing_md);
    grpc_slice_unref(st->details);
    grpc_call_unref(st->call);
    st->call = NULL;
}

/* One result: its item's outcome, from the code, the response and the details. */
static void stream_result(struct bench_stream *st, const Slotd__V1__ProposeStreamResult *r)
{
    struct bench_stream_set *set = st->set;
    struct bench_stream_item *it = r->id < set->item_count ? &set->items[r->id] : NULL;
    if (!it || !it->in_use || !it->sent || it->stream != st->index) {
        if (!set->closing)
            set->unknown_results++;
        return;
    }
    struct bench_stream_outcome out = {
        .code = r->code >= 0 && r->code < 17 ? (unsigned)r->code : (unsigned)GRPC_STATUS_UNKNOWN};
    out.response_ok = r->code == 0 && r->response &&
                      r->response->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT;
    if (r->code != 0 && r->details.len &&
        bench_wire_error_detail(r->details.data, r->details.len, &out.detail) == BENCH_OK)
        out.has_detail = true;
    st->sent_inflight--;
    stream_item_end(set, (unsigned)r->id, &out);
}

/* A response message arrived (or the stream's receive side ended: recv NULL). */
static void stream_on_recv(struct bench_stream *st, bool success)
{
    struct bench_stream_set *set = st->set;
    if (!success || !st->recv)
        return; /* the status completion follows */
    Slotd__V1__ProposeStreamResponse *m = slotd__pstream_response_unpack(st->recv); /* libslotd */
    grpc_byte_buffer_destroy(st->recv);
    st->recv = NULL;
    set->messages_received++;
    if (!m) {
        if (!set->closing)
            set->unknown_results++; /* an undecodable message: its items end with the stream */
        grpc_call_cancel_with_status(st->call, GRPC_STATUS_INTERNAL, "undecodable response", NULL);
        st->cancelled = true;
        return;
    }
    for (size_t i = 0; i < m->n_results; i++)
        stream_result(st, m->results[i]);
    slotd__v1__propose_stream_response__free_unpacked(m, NULL);
    if (!st->ended)
        stream_recv_next(st);
}

bool bench_stream_event(struct bench_stream_set *set, void *tag, bool success)
{
    struct stream_op *op = tag;
    if (!set->streams || op < &set->streams[0].op[0] ||
        op > &set->streams[set->stream_count - 1].op[STREAM_OPS - 1])
        return false;
    struct bench_stream *st = op->st;
    st->outstanding[op->kind] = false;
    switch (op->kind) {
    case STREAM_OP_SEND:
        grpc_byte_buffer_destroy(st->send);
        st->send = NULL;
        break;
    case STREAM_OP_RECV:
        stream_on_recv(st, success);
        break;
    default:
        st->ended = true;
        break;
    }
    stream_release_if_done(st);
    return true;
}

void bench_stream_expire(struct bench_stream_set *set, int64_t now, int64_t deadline_ns)
{
    for (unsigned i = 0; i < set->item_count; i++) {
        struct bench_stream_item *it = &set->items[i];
        if (!it->in_use || !it->sent || now - it->start_ns < deadline_ns)
            continue;
        struct bench_stream *st = &set->streams[it->stream];
        if (st->call && !st->cancelled) {
            st->cancelled = true;
            grpc_call_cancel(st->call, NULL);
        }
    }
}

void bench_stream_cancel_all(struct bench_stream_set *set)
{
    struct bench_stream_outcome out = {.code = GRPC_STATUS_CANCELLED, .stream_ended = true};
    set->closing = true;
    for (unsigned i = 0; i < set->stream_count; i++) {
        struct bench_stream *st = &set->streams[i];
        while (st->queue_len > 0) {
            unsigned item = st->queue[st->queue_head];
            st->queue_head = (st->queue_head + 1) % set->item_count;
            st->queue_len--;
            stream_item_end(set, item, &out);
        }
        if (st->call && !st->cancelled) {
            st->cancelled = true;
            grpc_call_cancel(st->call, NULL);
        }
    }
}
