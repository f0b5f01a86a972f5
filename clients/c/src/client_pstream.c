/* client_pstream.c - libslotd's ProposeStream: items queued, coalesced into messages, results. */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>

#include <assert.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PSTREAM_METHOD "/slotd.v1.Metadata/ProposeStream"

enum { PSTREAM_TAG_SEND = 1, PSTREAM_TAG_RECV, PSTREAM_TAG_STATUS, PSTREAM_TAGS };

/* One queued item: its ProposeStreamRequest.items entry, encoded (owned). */
struct pstream_item {
    uint8_t *bytes;
    size_t len;
};

struct slotd_propose_stream {
    /* the call's queue, call, token metadata, initial and trailing metadata, status, details
     * and the send/recv buffers (freed by slotd__stream_close; its pending and open fields are
     * not used: pending[] below says which batches are out) */
    struct slotd__stream c;
    char address[SLOTD_ADDRESS_LEN + 1];
    struct slotd_client *client; /* borrowed: the request ids of put */
    size_t max_outstanding;
    /* invariant: outstanding == queued + sent without result + results not taken */
    size_t outstanding;
    /* items not sent yet: a ring of max_outstanding entries */
    struct pstream_item *queue;
    size_t queue_head, queue_len;
    /* results received and not taken: a ring of max_outstanding entries */
    struct slotd_propose_stream_result **results;
    size_t results_head, results_len;
    bool pending[PSTREAM_TAGS]; /* a batch of that tag awaits its completion */
    bool metadata_sent, close_wanted, close_sent, ended;
};

/* ---- encoding ------------------------------------------------------------------------- */

uint8_t *slotd__varint_put(uint8_t *p, uint64_t v)
{
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

size_t slotd__varint_len(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7)
        n++;
    return n;
}

size_t slotd__pstream_item_encode(uint64_t id, const uint8_t *request, size_t len, uint8_t *buf,
                                  size_t buf_len)
{
    /* ProposeStreamItem{id = 1 (varint), request = 2 (bytes)} as ProposeStreamRequest.items (1) */
    size_t body = 1 + slotd__varint_len(id) + 1 + slotd__varint_len(len) + len;
    size_t size = 1 + slotd__varint_len(body) + body;
    if (size > buf_len || !buf)
        return size;
    uint8_t *p = buf;
    *p++ = 0x0a;
    p = slotd__varint_put(p, body);
    *p++ = 0x08;
    p = slotd__varint_put(p, id);
    *p++ = 0x12;
    p = slotd__varint_put(p, len);
    if (len)
        memcpy(p, request, len);
    return size;
}

/* ---- batches -------------------------------------------------------------------------- */

static void pstream_batch(struct slotd_propose_stream *s, int tag, const grpc_op *ops, size_t n)
{
    assert(!s->pending[tag]);
    grpc_call_error rc = grpc_call_start_batch(s->c.call, ops, n, (void *)(intptr_t)tag, NULL);
    assert(rc == GRPC_CALL_OK); /* only a misused call fails here: a programmer error */
    (void)rc;
    s->pending[tag] = true;
}

/* Sends the queued items that fit one message (with the initial metadata the first time), or
 * the half-close once nothing is queued and it is wanted. Only when no send is in flight. */
static void pstream_send_more(struct slotd_propose_stream *s)
{
    if (s->pending[PSTREAM_TAG_SEND] || s->ended)
        return;
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    if (!s->metadata_sent) {
        ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
        if (s->c.authorization[0]) {
            ops[n].data.send_initial_metadata.count = 1;
            ops[n].data.send_initial_metadata.metadata = &s->c.md;
        }
        n++;
        s->metadata_sent = true;
    }
    if (s->queue_len > 0) {
        size_t items = 0, bytes = 0;
        while (items < s->queue_len && items < SLOTD_PROPOSE_STREAM_BATCH_MAX) {
            size_t len = s->queue[(s->queue_head + items) % s->max_outstanding].len;
            if (items > 0 && bytes + len > SLOTD_PROPOSE_STREAM_MESSAGE_BYTES)
                break;
            bytes += len;
            items++;
        }
        grpc_slice slice = grpc_slice_malloc(bytes);
        uint8_t *p = GRPC_SLICE_START_PTR(slice);
        for (size_t k = 0; k < items; k++) {
            struct pstream_item *it = &s->queue[s->queue_head];
            memcpy(p, it->bytes, it->len);
            p += it->len;
            free(it->bytes);
            it->bytes = NULL;
            s->queue_head = (s->queue_head + 1) % s->max_outstanding;
            s->queue_len--;
        }
        s->c.send = grpc_raw_byte_buffer_create(&slice, 1);
        grpc_slice_unref(slice);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n].data.send_message.send_message = s->c.send;
        n++;
    }
    if (s->queue_len == 0 && s->close_wanted && !s->close_sent) {
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
        s->close_sent = true;
    }
    if (n > 0)
        pstream_batch(s, PSTREAM_TAG_SEND, ops, n);
}

static void pstream_recv_more(struct slotd_propose_stream *s)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->c.recv;
    pstream_batch(s, PSTREAM_TAG_RECV, &op, 1);
}

/* ---- results -------------------------------------------------------------------------- */

void slotd_propose_stream_result_destroy(struct slotd_propose_stream_result *r)
{
    if (!r)
        return;
    slotd_error_destroy(r->error);
    free((void *)r->response);
    free(r);
}

/* One ProposeStreamResult as a caller's result; NULL when out of memory. */
static struct slotd_propose_stream_result *pstream_result(const struct slotd_propose_stream *s,
                                                          const Slotd__V1__ProposeStreamResult *m)
{
    struct slotd_propose_stream_result *r = calloc(1, sizeof(*r));
    if (!r)
        return NULL;
    r->id = m->id;
    struct slotd_status st;
    slotd_call_status_reset(&st);
    snprintf(st.address, sizeof(st.address), "%s", s->address);
    st.grpc_status = m->code;
    if (m->code == 0 && !m->response) {
        st.grpc_status = GRPC_STATUS_INTERNAL;
        snprintf(st.message, sizeof(st.message), "propose stream: result %llu without a response",
                 (unsigned long long)m->id);
        slotd__finish(SLOTD_CLIENT_EMALFORMED, &st, 1, &r->error);
        return r;
    }
    if (m->code != 0) {
        snprintf(st.message, sizeof(st.message), "%s", m->message);
        if (m->details.len)
            slotd_call_detail_decode(m->details.data, m->details.len, &st);
        slotd__finish(slotd__err_of_status(&st), &st, 1, &r->error);
        return r;
    }
    const Slotd__V1__ProposeResponse *p = m->response;
    r->applied_index = p->applied_index;
    r->group_id = p->group_id;
    r->term = p->term;
    r->deduplicated = p->deduplicated;
    if (p->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_PUT && p->put)
        r->version = p->put->version;
    size_t len = slotd__v1__propose_response__get_packed_size(p);
    uint8_t *bytes = malloc(len ? len : 1);
    if (!bytes) {
        free(r);
        return NULL;
    }
    slotd__v1__propose_response__pack(p, bytes);
    r->response = bytes;
    r->response_len = len;
    return r;
}

Slotd__V1__ProposeStreamResponse *slotd__pstream_response_unpack(grpc_byte_buffer *bb)
{
    return (Slotd__V1__ProposeStreamResponse *)slotd_call_unpack(
        bb, &slotd__v1__propose_stream_response__descriptor);
}

/* A response message arrived: its results join the ring (bounded by outstanding). */
static void pstream_on_message(struct slotd_propose_stream *s)
{
    Slotd__V1__ProposeStreamResponse *m = slotd__pstream_response_unpack(s->c.recv);
    grpc_byte_buffer_destroy(s->c.recv);
    s->c.recv = NULL;
    size_t unplaced = 0;
    for (size_t i = 0; m && i < m->n_results; i++) {
        /* more results than items outstanding: the server's bug; stop the call */
        struct slotd_propose_stream_result *r =
            s->results_len < s->outstanding ? pstream_result(s, m->results[i]) : NULL;
        if (!r) {
            unplaced++;
            continue;
        }
        s->results[(s->results_head + s->results_len) % s->max_outstanding] = r;
        s->results_len++;
    }
    if (!m || unplaced)
        grpc_call_cancel_with_status(s->c.call, GRPC_STATUS_INTERNAL,
                                     !m ? "propose stream: response does not decode"
                                        : "propose stream: results not kept (more than "
                                          "outstanding, or out of memory)",
                                     NULL);
    if (m)
        slotd__v1__propose_stream_response__free_unpacked(m, NULL);
    pstream_recv_more(s);
}

/* Waits for one completion until deadline and handles it; false when none came. */
static bool pstream_step(struct slotd_propose_stream *s, gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(s->c.cq, deadline, NULL);
    if (ev.type != GRPC_OP_COMPLETE)
        return false;
    int tag = (int)(intptr_t)ev.tag;
    s->pending[tag] = false;
    if (tag == PSTREAM_TAG_SEND) {
        if (s->c.send)
            grpc_byte_buffer_destroy(s->c.send);
        s->c.send = NULL;
        pstream_send_more(s);
    } else if (tag == PSTREAM_TAG_RECV) {
        if (ev.success && s->c.recv)
            pstream_on_message(s);
    } else {
        s->ended = true;
    }
    return true;
}

/* Handles every completion that is ready now. */
static void pstream_poll(struct slotd_propose_stream *s)
{
    while (pstream_step(s, gpr_inf_past(GPR_CLOCK_MONOTONIC))) {
    }
}

/* ---- the public calls ----------------------------------------------------------------- */

static gpr_timespec pstream_after_ms(int64_t ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

int slotd_propose_stream_open(struct slotd_client *c, const char *address, int max_outstanding,
                              int timeout_ms, struct slotd_propose_stream **out,
                              struct slotd_error **err)
{
    *out = NULL;
    if (!c)
        return slotd__refuse(SLOTD_CLIENT_EINVAL, "propose stream: no client", NULL, err);
    if (max_outstanding < 0 || max_outstanding > SLOTD_PROPOSE_STREAM_OUTSTANDING_MAX)
        return slotd__refuse(SLOTD_CLIENT_EINVAL,
                             "propose stream: max_outstanding must be 0..4096 (0: 4096)",
                             "max_outstanding", err);
    if (timeout_ms < 0 || timeout_ms > SLOTD_CLIENT_DEADLINE_MS_MAX)
        return slotd__refuse(SLOTD_CLIENT_EINVAL,
                             "propose stream: timeout_ms must be 0..3600000 (0: none)",
                             "timeout_ms", err);
    char first[1][SLOTD_ADDRESS_LEN + 1];
    if (!address) {
        if (slotd__client_endpoints(c, first, 1) == 0)
            return slotd__refuse(SLOTD_CLIENT_EINVAL, "propose stream: no endpoint", "address",
                                 err);
        address = first[0];
    }
    if (address[0] == '\0' || strlen(address) > SLOTD_ADDRESS_LEN)
        return slotd__refuse(SLOTD_CLIENT_EINVAL, "propose stream: address must be 1..255 bytes",
                             "address", err);
    grpc_channel *ch = slotd__client_channel(c, address);
    if (!ch)
        return slotd__refuse(SLOTD_CLIENT_EUNAVAILABLE,
                             "propose stream: too many node addresses in use", NULL, err);
    struct slotd_propose_stream *s = calloc(1, sizeof(*s));
    size_t n = max_outstanding ? (size_t)max_outstanding : SLOTD_PROPOSE_STREAM_OUTSTANDING_MAX;
    if (s) {
        s->queue = calloc(n, sizeof(*s->queue));
        s->results = calloc(n, sizeof(*s->results));
    }
    if (!s || !s->queue || !s->results) {
        if (s) {
            free(s->queue);
            free(s->results);
        }
        free(s);
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "propose stream: out of memory", NULL, err);
    }
    s->client = c;
    s->max_outstanding = n;
    snprintf(s->address, sizeof(s->address), "%s", address);
    slotd__client_authorization(c, s->c.authorization, sizeof(s->c.authorization));
    if (s->c.authorization[0]) {
        s->c.md.key = grpc_slice_from_static_string("authorization");
        s->c.md.value = grpc_slice_from_copied_string(s->c.authorization);
    }
    s->c.open = true;
    s->c.cq = grpc_completion_queue_create_for_next(NULL);
    gpr_timespec deadline =
        timeout_ms ? pstream_after_ms(timeout_ms) : gpr_inf_future(GPR_CLOCK_MONOTONIC);
    s->c.call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->c.cq,
                                         grpc_slice_from_static_string(PSTREAM_METHOD), NULL,
                                         deadline, NULL);
    grpc_metadata_array_init(&s->c.initial_md);
    grpc_metadata_array_init(&s->c.trailing_md);
    s->c.status = GRPC_STATUS_UNKNOWN;
    s->c.details = grpc_empty_slice();
    grpc_op ops[2];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->c.trailing_md;
    ops[0].data.recv_status_on_client.status = &s->c.status;
    ops[0].data.recv_status_on_client.status_details = &s->c.details;
    pstream_batch(s, PSTREAM_TAG_STATUS, ops, 1);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &s->c.initial_md;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &s->c.recv;
    pstream_batch(s, PSTREAM_TAG_RECV, ops, 2);
    *out = s;
    return SLOTD_CLIENT_OK;
}

/* The call's own end as an error: its status, text and ErrorDetail, and what was lost. */
static int pstream_ended_error(const struct slotd_propose_stream *s, const char *op,
                               struct slotd_error **err)
{
    struct slotd_status st;
    slotd_call_status_reset(&st);
    slotd_call_status_set(&st, s->c.status, s->c.details, &s->c.trailing_md);
    snprintf(st.address, sizeof(st.address), "%s", s->address);
    char text[SLOTD_STATUS_MESSAGE_LEN];
    snprintf(text, sizeof(text), "%s: the call ended %s: %.400s (%zu items without a result)", op,
             slotd_grpc_status_name(s->c.status), st.message, s->outstanding - s->results_len);
    snprintf(st.message, sizeof(st.message), "%s", text);
    int rc = slotd__err_of_status(&st);
    return slotd__finish(rc == SLOTD_CLIENT_OK ? SLOTD_CLIENT_ERPC : rc, &st, 1, err);
}

int slotd_propose_stream_submit(struct slotd_propose_stream *s, uint64_t id, const void *request,
                                size_t len, struct slotd_error **err)
{
    if (!s || (!request && len))
        return slotd__refuse(SLOTD_CLIENT_EINVAL, "propose stream submit: no stream or request",
                             NULL, err);
    if (len == 0 || len > SLOTD_PROPOSE_STREAM_REQUEST_MAX) {
        struct slotd_status st;
        slotd_call_status_reset(&st);
        snprintf(st.message, sizeof(st.message),
                 "propose stream submit: request must be 1..%d bytes, got %zu",
                 SLOTD_PROPOSE_STREAM_REQUEST_MAX, len);
        snprintf(st.field, sizeof(st.field), "request");
        st.limit = SLOTD_PROPOSE_STREAM_REQUEST_MAX;
        return slotd__finish(SLOTD_CLIENT_EINVAL, &st, 0, err);
    }
    if (s->close_wanted)
        return slotd__refuse(SLOTD_CLIENT_EPRECONDITION,
                             "propose stream submit: the send side is closed", NULL, err);
    if (s->ended)
        return pstream_ended_error(s, "propose stream submit", err);
    /* the bound before the poll: it does not depend on what the network did meanwhile */
    if (s->outstanding >= s->max_outstanding) {
        struct slotd_status st;
        slotd_call_status_reset(&st);
        snprintf(st.message, sizeof(st.message),
                 "propose stream submit: %zu items outstanding (limit %zu): take results first",
                 s->outstanding, s->max_outstanding);
        snprintf(st.field, sizeof(st.field), "items");
        st.limit = s->max_outstanding;
        return slotd__finish(SLOTD_CLIENT_EEXHAUSTED, &st, 0, err);
    }
    pstream_poll(s);
    if (s->ended)
        return pstream_ended_error(s, "propose stream submit", err);
    size_t size = slotd__pstream_item_encode(id, request, len, NULL, 0);
    uint8_t *bytes = malloc(size);
    if (!bytes)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "propose stream submit: out of memory", NULL,
                             err);
    slotd__pstream_item_encode(id, request, len, bytes, size);
    /* invariant: queue_len <= outstanding < max_outstanding, so the ring has room */
    s->queue[(s->queue_head + s->queue_len) % s->max_outstanding] =
        (struct pstream_item){bytes, size};
    s->queue_len++;
    s->outstanding++;
    pstream_send_more(s);
    return SLOTD_CLIENT_OK;
}

int slotd_propose_stream_put(struct slotd_propose_stream *s, uint64_t id, const void *key,
                             size_t klen, const void *val, size_t vlen,
                             const struct slotd_write_options *wo, struct slotd_error **err)
{
    if (!key || klen == 0 || (!val && vlen))
        return slotd__refuse(SLOTD_CLIENT_EINVAL,
                             "propose stream put: key must be given (1 or more bytes), value "
                             "may be empty",
                             key && klen ? "put.value" : "put.key", err);
    if (!s)
        return slotd__refuse(SLOTD_CLIENT_EINVAL, "propose stream put: no stream", NULL, err);
    Slotd__V1__PutCommand put = SLOTD__V1__PUT_COMMAND__INIT;
    put.key = (ProtobufCBinaryData){klen, (uint8_t *)key};
    put.value = (ProtobufCBinaryData){vlen, (uint8_t *)val};
    if (wo)
        put.lease = wo->lease;
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    m.command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_PUT;
    m.put = &put;
    /* the request id as a unary put sets it (slotd__meta_propose_encode), no_forward unset:
     * the node takes the item and forwards it when it does not lead the key's group */
    uint8_t random_id[SLOTD_REQUEST_ID_LEN_DEFAULT];
    if (wo && wo->has_request_id && !wo->no_request_id) {
        m.request_id = (ProtobufCBinaryData){wo->request_id_len, (uint8_t *)wo->request_id};
    } else if (!wo || !wo->no_request_id) {
        slotd__client_request_id(s->client, random_id, sizeof(random_id));
        m.request_id = (ProtobufCBinaryData){sizeof(random_id), random_id};
    }
    uint8_t *buf = NULL;
    size_t len = 0;
    if (slotd__pack(&m.base, &buf, &len) != SLOTD_CLIENT_OK)
        return slotd__refuse(SLOTD_CLIENT_ENOMEM, "propose stream put: out of memory", NULL, err);
    int rc = slotd_propose_stream_submit(s, id, buf, len, err);
    free(buf);
    return rc;
}

int slotd_propose_stream_next(struct slotd_propose_stream *s, int timeout_ms,
                              struct slotd_propose_stream_result **out, struct slotd_error **err)
{
    *out = NULL;
    if (!s)
        return slotd__refuse(SLOTD_CLIENT_EINVAL, "propose stream next: no stream", NULL, err);
    gpr_timespec until = timeout_ms < 0   ? gpr_inf_future(GPR_CLOCK_MONOTONIC)
                         : timeout_ms > 0 ? pstream_after_ms(timeout_ms)
                                          : gpr_inf_past(GPR_CLOCK_MONOTONIC);
    pstream_poll(s);
    for (;;) {
        if (s->results_len > 0) {
            *out = s->results[s->results_head];
            s->results[s->results_head] = NULL;
            s->results_head = (s->results_head + 1) % s->max_outstanding;
            s->results_len--;
            s->outstanding--;
            return SLOTD_CLIENT_OK;
        }
        if (s->ended && !s->pending[PSTREAM_TAG_RECV]) {
            if (s->c.status == GRPC_STATUS_OK && s->outstanding == 0 && s->close_sent)
                return SLOTD_CLIENT_OK;
            return pstream_ended_error(s, "propose stream next", err);
        }
        if (s->outstanding == 0 && !s->close_wanted)
            return slotd__refuse(SLOTD_CLIENT_EPRECONDITION,
                                 "propose stream next: nothing outstanding", NULL, err);
        if (!pstream_step(s, until)) {
            struct slotd_status st;
            slotd_call_status_reset(&st);
            snprintf(st.address, sizeof(st.address), "%s", s->address);
            snprintf(st.message, sizeof(st.message),
                     "propose stream next: no result within %d ms (%zu outstanding)", timeout_ms,
                     s->outstanding);
            return slotd__finish(SLOTD_CLIENT_ETIMEOUT, &st, 0, err);
        }
    }
}

size_t slotd_propose_stream_outstanding(const struct slotd_propose_stream *s)
{
    return s ? s->outstanding : 0;
}

void slotd_propose_stream_close_send(struct slotd_propose_stream *s)
{
    if (!s || s->close_wanted)
        return;
    s->close_wanted = true;
    pstream_send_more(s);
}

void slotd_propose_stream_destroy(struct slotd_propose_stream *s)
{
    if (!s)
        return;
    if (!s->ended)
        grpc_call_cancel(s->c.call, NULL);
    while (s->pending[PSTREAM_TAG_SEND] || s->pending[PSTREAM_TAG_RECV] ||
           s->pending[PSTREAM_TAG_STATUS]) {
        grpc_event ev =
            grpc_completion_queue_next(s->c.cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        assert(ev.type == GRPC_OP_COMPLETE); /* the cancel ends every batch */
        s->pending[(int)(intptr_t)ev.tag] = false;
    }
    for (size_t k = 0; k < s->queue_len; k++)
        free(s->queue[(s->queue_head + k) % s->max_outstanding].bytes);
    for (size_t k = 0; k < s->results_len; k++)
        slotd_propose_stream_result_destroy(s->results[(s->results_head + k) % s->max_outstanding]);
    slotd__stream_close(&s->c);
    free(s->queue);
    free(s->results);
    free(s);
}
