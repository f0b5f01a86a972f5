/* client_stream.c - libslotd's server-stream calls (Watch, Backup): one call on its own queue. */
#include "client_internal.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

enum { STREAM_TAG_SEND = 1, STREAM_TAG_STATUS, STREAM_TAG_RECV };

/* Starts the call's three batches: the request (metadata, message, close), the status, and the
 * initial metadata with the first message. Returns whether the status batch started. */
static bool stream_start(struct slotd__stream *s)
{
    grpc_op ops[3];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (s->authorization[0]) {
        s->md.key = grpc_slice_from_static_string("authorization");
        s->md.value = grpc_slice_from_copied_string(s->authorization);
        ops[0].data.send_initial_metadata.count = 1;
        ops[0].data.send_initial_metadata.metadata = &s->md;
    }
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = s->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (grpc_call_start_batch(s->call, ops, 3, (void *)(intptr_t)STREAM_TAG_SEND, NULL) ==
        GRPC_CALL_OK)
        s->pending++;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &s->trailing_md;
    ops[0].data.recv_status_on_client.status = &s->status;
    ops[0].data.recv_status_on_client.status_details = &s->details;
    bool status_started =
        grpc_call_start_batch(s->call, ops, 1, (void *)(intptr_t)STREAM_TAG_STATUS, NULL) ==
        GRPC_CALL_OK;
    s->pending += status_started;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = &s->initial_md;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = &s->recv;
    if (grpc_call_start_batch(s->call, ops, 2, (void *)(intptr_t)STREAM_TAG_RECV, NULL) ==
        GRPC_CALL_OK)
        s->pending++;
    return status_started;
}

int slotd__stream_open(struct slotd__stream *s, struct slotd_client *c, const char *address,
                       const char *method, const char *what, const uint8_t *req, size_t req_len,
                       bool bounded, int64_t timeout_ms, int grace_ms, struct slotd_status *st)
{
    memset(s, 0, sizeof(*s));
    slotd_call_status_reset(st);
    snprintf(st->address, sizeof(st->address), "%s", address);
    grpc_channel *ch = slotd__client_channel(c, address);
    if (!ch) {
        st->grpc_status = GRPC_STATUS_UNAVAILABLE;
        snprintf(st->message, sizeof(st->message), "too many node addresses in use");
        return SLOTD_CLIENT_EUNAVAILABLE;
    }
    gpr_timespec deadline = gpr_inf_future(GPR_CLOCK_MONOTONIC);
    s->wait = deadline;
    if (bounded) {
        deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
        s->wait = gpr_time_add(deadline, gpr_time_from_millis(grace_ms, GPR_TIMESPAN));
    }
    s->cq = grpc_completion_queue_create_for_next(NULL);
    s->call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, s->cq,
                                       grpc_slice_from_static_string(method), NULL, deadline, NULL);
    slotd__client_authorization(c, s->authorization, sizeof(s->authorization));
    grpc_metadata_array_init(&s->initial_md);
    grpc_metadata_array_init(&s->trailing_md);
    s->status = GRPC_STATUS_UNKNOWN;
    s->details = grpc_empty_slice();
    grpc_slice req_slice =
        req_len ? grpc_slice_from_copied_buffer((const char *)req, req_len) : grpc_empty_slice();
    s->send = grpc_raw_byte_buffer_create(&req_slice, 1);
    grpc_slice_unref(req_slice);
    s->open = true;
    if (stream_start(s))
        return SLOTD_CLIENT_OK;
    grpc_call_cancel(s->call, NULL);
    st->grpc_status = GRPC_STATUS_INTERNAL;
    snprintf(st->message, sizeof(st->message), "cannot start the %s call", what);
    return SLOTD_CLIENT_ERPC;
}

grpc_byte_buffer *slotd__stream_next(struct slotd__stream *s)
{
    while (s->pending > 0) {
        grpc_event ev = grpc_completion_queue_next(s->cq, s->wait, NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            /* gRPC did not enforce the deadline in time: cancel; every batch then completes */
            grpc_call_cancel(s->call, NULL);
            continue;
        }
        s->pending--;
        if ((intptr_t)ev.tag != STREAM_TAG_RECV || s->recv == NULL)
            continue; /* the request or the status batch; or the stream is over */
        grpc_byte_buffer *m = s->recv;
        s->recv = NULL;
        return m;
    }
    return NULL;
}

void slotd__stream_more(struct slotd__stream *s, bool more)
{
    if (!more) {
        grpc_call_cancel(s->call, NULL);
        return;
    }
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &s->recv;
    if (grpc_call_start_batch(s->call, &op, 1, (void *)(intptr_t)STREAM_TAG_RECV, NULL) ==
        GRPC_CALL_OK)
        s->pending++;
}

void slotd__stream_close(struct slotd__stream *s)
{
    if (!s->open)
        return;
    if (s->recv)
        grpc_byte_buffer_destroy(s->recv);
    grpc_slice_unref(s->details);
    if (s->authorization[0])
        grpc_slice_unref(s->md.value);
    memset(s->authorization, 0, sizeof(s->authorization));
    grpc_metadata_array_destroy(&s->initial_md);
    grpc_metadata_array_destroy(&s->trailing_md);
    grpc_byte_buffer_destroy(s->send);
    grpc_call_unref(s->call);
    slotd_call_cq_destroy(s->cq);
    s->open = false;
}
