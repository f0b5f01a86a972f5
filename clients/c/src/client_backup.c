/* client_backup.c - libslotd Admin/Backup: one server stream whose records the caller writes out.
 */
#include "client_internal.h"

#include "slotd/v1/admin.pb-c.h"

#include <grpc/byte_buffer.h>
#include <grpc/grpc.h>
#include <grpc/support/time.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BACKUP_METHOD "/slotd.v1.Admin/Backup"
#define BACKUP_CQ_GRACE_MS 2000

/* Decodes one BackupChunk and hands its record to cb; *stop when cb says so. */
static int backup_deliver(grpc_byte_buffer *recv, slotd_backup_cb cb, void *arg, bool *stop,
                          struct slotd_status *st)
{
    grpc_slice s;
    if (!slotd_call_flatten(recv, &s)) {
        snprintf(st->message, sizeof(st->message), "backup: unreadable message");
        return SLOTD_CLIENT_EMALFORMED;
    }
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

/* One stream from address. *got: at least one record was delivered. */
static int backup_stream(struct slotd_client *c, const char *address, int64_t timeout_ms,
                         slotd_backup_cb cb, void *arg, bool *got, struct slotd_status *st)
{
    *got = false;
    struct slotd__stream s; /* BackupRequest has no fields: an empty request */
    int rc = slotd__stream_open(&s, c, address, BACKUP_METHOD, "backup", NULL, 0, timeout_ms > 0,
                                timeout_ms, BACKUP_CQ_GRACE_MS, st);
    if (rc == SLOTD_CLIENT_EUNAVAILABLE)
        return rc;
    bool stopped = false;
    grpc_byte_buffer *recv;
    while ((recv = slotd__stream_next(&s)) != NULL) {
        if (!stopped) {
            *got = true;
            rc = backup_deliver(recv, cb, arg, &stopped, st);
            if (rc != SLOTD_CLIENT_OK)
                stopped = true;
        }
        grpc_byte_buffer_destroy(recv);
        slotd__stream_more(&s, !stopped);
    }
    if (stopped && rc == SLOTD_CLIENT_OK) {
        st->grpc_status = GRPC_STATUS_CANCELLED;
        snprintf(st->message, sizeof(st->message), "backup: stopped by the caller");
        rc = SLOTD_CLIENT_ERPC;
    } else if (rc == SLOTD_CLIENT_OK && st->grpc_status == -1) {
        slotd_call_status_set(st, s.status, s.details, &s.trailing_md);
        rc = slotd__err_of_status(st);
    }
    slotd__stream_close(&s);
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
