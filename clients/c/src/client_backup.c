/* client_backup.c - libslotd Admin/Backup: one server stream whose records the caller writes out.
 */
#include "client_internal.h"

#include "slotd/v1/admin.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKUP_METHOD "/slotd.v1.Admin/Backup"
#define BACKUP_CQ_GRACE_MS 2000

enum { BACKUP_TAG_SEND = 1, BACKUP_TAG_STATUS, BACKUP_TAG_RECV };

/* Decodes one BackupChunk and hands its record to cb; *stop when cb says so. */
static int backup_deliver(grpc_byte_buffer *recv, slotd_backup_cb cb, void *arg, bool *stop,
                          struct slotd_status *st)
{
    grpc_byte_buffer_reader rd;
    if (!grpc_byte_buffer_reader_init(&rd, recv)) {
        snprintf(st->message, sizeof(st->message), "backup: unreadable message");
        return SLOTD_CLIENT_EMALFORMED;
    }
    grpc_slice s = grpc_byte_buffer_reader_readall(&rd);
    grpc_byte_buffer_reader_destroy(&rd);
    Slotd__V1__BackupChunk *m =
        slotd__v1__backup_chunk__unpack(NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    if (m == NULL) {
        snprintf(st->message, sizeof(st->message), "backup: a message is no BackupChunk");
        return SLOTD_CLIENT_EMALFORMED;
    }
    *stop = cb(arg, m->record.data, m->record.len, m->groups_done, m->groups_total) != 0;
    slotd__v1__backup_chunk__free_unpacked(m, NULL);
    return SLOTD_CLIENT_OK;
}

/* Starts the call's three batches (request, status, first message); returns how many started. */
static int backup_start(grpc_call *call, grpc_metadata *md, const char *authorization,
                        grpc_byte_buffer *send, grpc_metadata_array *initial_md,
                        grpc_metadata_array *trailing_md, grpc_status_code *status,
                        grpc_slice *details, grpc_byte_buffer **recv, bool *status_started)
{
    grpc_op ops[3];
    int pending = 0;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (authorization[0]) {
        md->key = grpc_slice_from_static_string("authorization");
        md->value = grpc_slice_from_copied_string(authorization);
        ops[0].data.send_initial_metadata.count = 1;
        ops[0].data.send_initial_metadata.metadata = md;
    }
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    if (grpc_call_start_batch(call, ops, 3, (void *)(intptr_t)BACKUP_TAG_SEND, NULL) ==
        GRPC_CALL_OK)
        pending++;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = trailing_md;
    ops[0].data.recv_status_on_client.status = status;
    ops[0].data.recv_status_on_client.status_details = details;
    *status_started = grpc_call_start_batch(call, ops, 1, (void *)(intptr_t)BACKUP_TAG_STATUS,
                                            NULL) == GRPC_CALL_OK;
    pending += *status_started;
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[0].data.recv_initial_metadata.recv_initial_metadata = initial_md;
    ops[1].op = GRPC_OP_RECV_MESSAGE;
    ops[1].data.recv_message.recv_message = recv;
    if (grpc_call_start_batch(call, ops, 2, (void *)(intptr_t)BACKUP_TAG_RECV, NULL) ==
        GRPC_CALL_OK)
        pending++;
    return pending;
}

/* One stream from address. *got: at least one record was delivered. */
static int backup_stream(struct slotd_client *c, const char *address, int64_t timeout_ms,
                         slotd_backup_cb cb, void *arg, bool *got, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    snprintf(st->address, sizeof(st->address), "%s", address);
    *got = false;
    grpc_channel *ch = slotd__client_channel(c, address);
    if (!ch) {
        st->grpc_status = GRPC_STATUS_UNAVAILABLE;
        snprintf(st->message, sizeof(st->message), "too many node addresses in use");
        return SLOTD_CLIENT_EUNAVAILABLE;
    }
    gpr_timespec deadline = timeout_ms > 0
                                ? gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                               gpr_time_from_millis(timeout_ms, GPR_TIMESPAN))
                                : gpr_inf_future(GPR_CLOCK_MONOTONIC);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_call *call = grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(BACKUP_METHOD), NULL,
                                               deadline, NULL);
    char authorization[SLOTD_CLIENT_TOKEN_MAX + 8];
    slotd__client_authorization(c, authorization, sizeof(authorization));
    grpc_metadata md;
    memset(&md, 0, sizeof(md));
    grpc_metadata_array initial_md, trailing_md;
    grpc_metadata_array_init(&initial_md);
    grpc_metadata_array_init(&trailing_md);
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_slice req_slice = grpc_empty_slice(); /* BackupRequest has no fields */
    grpc_byte_buffer *send = grpc_raw_byte_buffer_create(&req_slice, 1);
    grpc_byte_buffer *recv = NULL;
    bool status_started = false, stopped = false;
    int rc = SLOTD_CLIENT_OK;
    int pending = backup_start(call, &md, authorization, send, &initial_md, &trailing_md, &status,
                               &details, &recv, &status_started);
    if (!status_started) {
        grpc_call_cancel(call, NULL);
        st->grpc_status = GRPC_STATUS_INTERNAL;
        snprintf(st->message, sizeof(st->message), "cannot start the backup call");
        rc = SLOTD_CLIENT_ERPC;
    }
    while (pending > 0) {
        gpr_timespec wait =
            timeout_ms > 0
                ? gpr_time_add(deadline, gpr_time_from_millis(BACKUP_CQ_GRACE_MS, GPR_TIMESPAN))
                : gpr_inf_future(GPR_CLOCK_MONOTONIC);
        grpc_event ev = grpc_completion_queue_next(cq, wait, NULL);
        if (ev.type != GRPC_OP_COMPLETE) {
            grpc_call_cancel(call, NULL);
            continue;
        }
        pending--;
        if ((intptr_t)ev.tag != BACKUP_TAG_RECV || recv == NULL)
            continue;
        if (!stopped) {
            *got = true;
            rc = backup_deliver(recv, cb, arg, &stopped, st);
            if (rc != SLOTD_CLIENT_OK)
                stopped = true;
        }
        grpc_byte_buffer_destroy(recv);
        recv = NULL;
        if (stopped) {
            grpc_call_cancel(call, NULL);
            continue;
        }
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_RECV_MESSAGE;
        op.data.recv_message.recv_message = &recv;
        if (grpc_call_start_batch(call, &op, 1, (void *)(intptr_t)BACKUP_TAG_RECV, NULL) ==
            GRPC_CALL_OK)
            pending++;
    }
    if (stopped && rc == SLOTD_CLIENT_OK) {
        st->grpc_status = GRPC_STATUS_CANCELLED;
        snprintf(st->message, sizeof(st->message), "backup: stopped by the caller");
        rc = SLOTD_CLIENT_ERPC;
    } else if (rc == SLOTD_CLIENT_OK && st->grpc_status == -1) {
        slotd_call_status_set(st, status, details, &trailing_md);
        rc = slotd__err_of_status(st);
    }
    if (recv)
        grpc_byte_buffer_destroy(recv);
    grpc_slice_unref(details);
    if (authorization[0])
        grpc_slice_unref(md.value);
    memset(authorization, 0, sizeof(authorization));
    grpc_metadata_array_destroy(&initial_md);
    grpc_metadata_array_destroy(&trailing_md);
    grpc_byte_buffer_destroy(send);
    grpc_call_unref(call);
    slotd_call_cq_destroy(cq);
    return rc;
}

int slotd_admin_backup(struct slotd_client *c, int64_t timeout_ms, slotd_backup_cb cb, void *arg,
                       struct slotd_error **err)
{
    if (cb == NULL || timeout_ms < 0)
        return slotd__refuse(SLOTD_CLIENT_EINVAL, "backup: cb is NULL or timeout_ms < 0",
                             cb == NULL ? "cb" : "timeout_ms", err);
    char addrs[SLOTD_CLIENT_ENDPOINTS_MAX][SLOTD_ADDRESS_LEN + 1];
    size_t n = slotd__client_endpoints(c, addrs, SLOTD_CLIENT_ENDPOINTS_MAX);
    struct slotd_status st;
    slotd_call_status_reset(&st);
    int rc = SLOTD_CLIENT_EUNAVAILABLE;
    unsigned attempts = 0;
    for (size_t i = 0; i < n; i++) {
        bool got = false;
        attempts++;
        rc = backup_stream(c, addrs[i], timeout_ms, cb, arg, &got, &st);
        /* a backup is one consistent stream: only a node that sent nothing is left for the next */
        if (rc != SLOTD_CLIENT_EUNAVAILABLE || got)
            break;
    }
    if (rc != SLOTD_CLIENT_OK) {
        char text[SLOTD_STATUS_MESSAGE_LEN];
        snprintf(text, sizeof(text), "backup: %s: %.300s [%.100s]",
                 slotd_grpc_status_name(st.grpc_status),
                 st.message[0] ? st.message : slotd_client_strerror(rc), st.address);
        memcpy(st.message, text, sizeof(st.message));
    }
    return slotd__finish(rc, &st, attempts, err);
}
