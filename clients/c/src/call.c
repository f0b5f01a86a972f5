/* call.c - the clients' one gRPC call layer: channels, unary calls, status detail. */
#include "call.h"

#include "google/rpc/status.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc_security.h>
#include <grpc/support/time.h>

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

/* Error sentences are cut to their fixed-size buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define CALL_DETAIL_TYPE_URL "type.googleapis.com/slotd.v1.ErrorDetail"
/* Extra wait for a batch after its call's own deadline (gRPC enforces the deadline). */
#define CALL_CQ_GRACE_MS 2000

void slotd_call_status_reset(struct slotd_status *st)
{
    memset(st, 0, sizeof(*st));
    st->grpc_status = -1;
}

const char *slotd_call_health_status_name(int status, const char *other)
{
    static const char *const names[] = {"UNKNOWN", "SERVING", "NOT_SERVING", "SERVICE_UNKNOWN"};
    return status >= 0 && status < (int)(sizeof(names) / sizeof(names[0])) ? names[status] : other;
}

const char *slotd_grpc_status_name(int status)
{
    static const char *const names[] = {
        "OK",
        "CANCELLED",
        "UNKNOWN",
        "INVALID_ARGUMENT",
        "DEADLINE_EXCEEDED",
        "NOT_FOUND",
        "ALREADY_EXISTS",
        "PERMISSION_DENIED",
        "RESOURCE_EXHAUSTED",
        "FAILED_PRECONDITION",
        "ABORTED",
        "OUT_OF_RANGE",
        "UNIMPLEMENTED",
        "INTERNAL",
        "UNAVAILABLE",
        "DATA_LOSS",
        "UNAUTHENTICATED",
    };
    if (status < 0 || (size_t)status >= sizeof(names) / sizeof(names[0]))
        return "UNKNOWN_STATUS";
    return names[status];
}

/* Copies d into st's detail fields. */
static void call_detail_fill(struct slotd_status *st, const Slotd__V1__ErrorDetail *d)
{
    st->has_detail = true;
    st->detail_code = (int)d->code;
    snprintf(st->field, sizeof(st->field), "%s", d->field ? d->field : "");
    st->limit = d->limit;
    st->retry_after_ms = d->retry_after_ms;
    st->leader_node_id = 0;
    st->leader_address[0] = '\0';
    st->leader_group_id = 0;
    st->leader_term = 0;
    st->compacted_group_id = d->compacted ? d->compacted->group_id : 0;
    st->compacted_index = d->compacted ? d->compacted->index : 0;
    if (d->leader_hint) {
        st->leader_node_id = d->leader_hint->node_id;
        snprintf(st->leader_address, sizeof(st->leader_address), "%s",
                 d->leader_hint->address ? d->leader_hint->address : "");
        st->leader_group_id = d->leader_hint->group_id;
        st->leader_term = d->leader_hint->term;
    }
}

int slotd_call_detail_decode(const uint8_t *buf, size_t len, struct slotd_status *st)
{
    Google__Rpc__Status *s = google__rpc__status__unpack(NULL, len, buf);
    if (!s)
        return -1;
    int rc = -1;
    for (size_t i = 0; i < s->n_details && rc != 0; i++) {
        const Google__Protobuf__Any *any = s->details[i];
        if (!any->type_url || strcmp(any->type_url, CALL_DETAIL_TYPE_URL) != 0)
            continue;
        Slotd__V1__ErrorDetail *d =
            slotd__v1__error_detail__unpack(NULL, any->value.len, any->value.data);
        if (!d)
            break;
        call_detail_fill(st, d);
        slotd__v1__error_detail__free_unpacked(d, NULL);
        rc = 0;
    }
    google__rpc__status__free_unpacked(s, NULL);
    return rc;
}

grpc_channel *slotd_call_channel_create(const char *target, grpc_channel_credentials *creds,
                                        const char *server_name, bool fast_reconnect)
{
    grpc_arg args[5];
    size_t n = 0;
    args[n++] = (grpc_arg){
        .type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_RETRIES, .value.integer = 0};
    if (server_name && server_name[0])
        args[n++] = (grpc_arg){.type = GRPC_ARG_STRING,
                               .key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
                               .value.string = (char *)server_name};
    if (fast_reconnect) {
        args[n++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                               .key = (char *)GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS,
                               .value.integer = SLOTD_CALL_RECONNECT_MIN_MS};
        args[n++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                               .key = (char *)GRPC_ARG_MIN_RECONNECT_BACKOFF_MS,
                               .value.integer = SLOTD_CALL_RECONNECT_MIN_MS};
        args[n++] = (grpc_arg){.type = GRPC_ARG_INTEGER,
                               .key = (char *)GRPC_ARG_MAX_RECONNECT_BACKOFF_MS,
                               .value.integer = SLOTD_CALL_RECONNECT_MAX_MS};
    }
    grpc_channel_args channel_args = {n, args};
    grpc_channel_credentials *insecure = creds ? NULL : grpc_insecure_credentials_create();
    grpc_channel *ch = grpc_channel_create(target, creds ? creds : insecure, &channel_args);
    if (insecure)
        grpc_channel_credentials_release(insecure); /* the channel holds its own reference */
    return ch;
}

/* Reads the grpc-status-details-bin trailer of md into st, if there is one. */
void slotd_call_trailer_detail(const grpc_metadata_array *md, struct slotd_status *st)
{
    for (size_t i = 0; i < md->count; i++) {
        const grpc_slice *k = &md->metadata[i].key;
        const char *name = "grpc-status-details-bin";
        if (GRPC_SLICE_LENGTH(*k) != strlen(name) ||
            memcmp(GRPC_SLICE_START_PTR(*k), name, strlen(name)) != 0)
            continue;
        const grpc_slice *v = &md->metadata[i].value;
        slotd_call_detail_decode(GRPC_SLICE_START_PTR(*v), GRPC_SLICE_LENGTH(*v), st);
        return;
    }
}

int slotd_call_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return rc;
}

bool slotd_call_flatten(grpc_byte_buffer *bb, grpc_slice *out)
{
    grpc_byte_buffer_reader reader;
    if (bb == NULL || !grpc_byte_buffer_reader_init(&reader, bb)) {
        *out = grpc_empty_slice();
        return false;
    }
    *out = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    return true;
}

ProtobufCMessage *slotd_call_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d)
{
    grpc_slice body;
    if (!slotd_call_flatten(bb, &body))
        return NULL;
    ProtobufCMessage *m =
        protobuf_c_message_unpack(d, NULL, GRPC_SLICE_LENGTH(body), GRPC_SLICE_START_PTR(body));
    grpc_slice_unref(body);
    return m;
}

void slotd_call_io_release(struct slotd_call_io *io)
{
    if (io->send)
        grpc_byte_buffer_destroy(io->send);
    if (io->recv)
        grpc_byte_buffer_destroy(io->recv);
    grpc_metadata_array_destroy(&io->initial_md);
    grpc_metadata_array_destroy(&io->trailing_md);
    grpc_slice_unref(io->details);
    grpc_call_unref(io->call);
    io->call = NULL;
    io->send = NULL;
    io->recv = NULL;
}

void slotd_call_cq_destroy(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
}

void slotd_call_status_set(struct slotd_status *st, grpc_status_code status, grpc_slice details,
                           const grpc_metadata_array *trailing_md)
{
    st->grpc_status = (int)status;
    snprintf(st->message, sizeof(st->message), "%.*s", (int)GRPC_SLICE_LENGTH(details),
             (const char *)GRPC_SLICE_START_PTR(details));
    if (status != GRPC_STATUS_OK)
        slotd_call_trailer_detail(trailing_md, st);
}

grpc_call_error slotd_call_unary_start(grpc_call *call, grpc_metadata *md, size_t md_count,
                                       grpc_byte_buffer *send, grpc_metadata_array *initial_md,
                                       grpc_byte_buffer **recv, grpc_metadata_array *trailing_md,
                                       grpc_status_code *status, grpc_slice *details, void *tag)
{
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = md_count;
    ops[0].data.send_initial_metadata.metadata = md_count > 0 ? md : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = initial_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = trailing_md;
    ops[5].data.recv_status_on_client.status = status;
    ops[5].data.recv_status_on_client.status_details = details;
    return grpc_call_start_batch(call, ops, 6, tag, NULL);
}

/* Runs the batch of one unary call; fills st (status, server text, detail) and *body. */
static void call_run(grpc_call *call, grpc_completion_queue *cq, grpc_byte_buffer *send,
                     int deadline_ms, const char *authorization, grpc_byte_buffer **recv,
                     struct slotd_status *st)
{
    grpc_metadata md;
    memset(&md, 0, sizeof(md));
    grpc_metadata_array initial_md, trailing_md;
    grpc_metadata_array_init(&initial_md);
    grpc_metadata_array_init(&trailing_md);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    if (authorization[0] != '\0') {
        md.key = grpc_slice_from_static_string("authorization");
        md.value = grpc_slice_from_copied_string(authorization);
    }
    int tag;
    grpc_call_error ce =
        slotd_call_unary_start(call, &md, authorization[0] != '\0', send, &initial_md, recv,
                               &trailing_md, &status, &details, &tag);
    if (ce != GRPC_CALL_OK) {
        st->grpc_status = GRPC_STATUS_INTERNAL;
        snprintf(st->message, sizeof(st->message), "cannot start the call (error %d)", (int)ce);
        goto done;
    }
    gpr_timespec wait =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                     gpr_time_from_millis(deadline_ms + CALL_CQ_GRACE_MS, GPR_TIMESPAN));
    grpc_event ev = grpc_completion_queue_next(cq, wait, NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        /* gRPC did not enforce the deadline in time: cancel, then the batch completes */
        grpc_call_cancel(call, NULL);
        ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        status = GRPC_STATUS_DEADLINE_EXCEEDED;
    }
    slotd_call_status_set(st, status, details, &trailing_md);
done:
    grpc_slice_unref(details);
    if (authorization[0] != '\0')
        grpc_slice_unref(md.value); /* the batch is complete (or never started) */
    grpc_metadata_array_destroy(&initial_md);
    grpc_metadata_array_destroy(&trailing_md);
}

int slotd_call_unary(grpc_channel *ch, const char *method, const uint8_t *req, size_t req_len,
                     int deadline_ms, const char *authorization, grpc_byte_buffer **body,
                     struct slotd_status *st)
{
    *body = NULL;
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(deadline_ms, GPR_TIMESPAN));
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_slice method_slice = grpc_slice_from_static_string(method);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq, method_slice,
                                               NULL, deadline, NULL);
    grpc_slice req_slice = grpc_slice_from_copied_buffer((const char *)req, req_len);
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&req_slice, 1);
    grpc_slice_unref(req_slice);
    call_run(call, cq, send, deadline_ms, authorization, body, st);
    grpc_byte_buffer_destroy(send);
    grpc_call_unref(call);
    slotd_call_cq_destroy(cq);
    if (st->grpc_status != GRPC_STATUS_OK && *body) {
        grpc_byte_buffer_destroy(*body);
        *body = NULL;
    }
    return st->grpc_status;
}
