/* remote.c - a capture's reads of other nodes' replicas: Peer/BackupOpen, BackupRead and
 * BackupClose as blocking calls from the capture's thread. */
#include "remote.h"

#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/status.h>

#include "service/log/log.h"
#include "slotd/internal/v1/peer.pb-c.h"

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* A unary Peer call the capture thread waits for (the reply comes on a transport thread). */
struct sync_call {
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
    int status;
    char message[256];
    uint8_t *resp; /* malloc'ed copy of an OK answer */
    size_t resp_len;
};

static void sync_call_done(void *arg, int status, const char *message, const uint8_t *resp,
                           size_t resp_len, const uint8_t *details, size_t details_len)
{
    (void)details;
    (void)details_len;
    struct sync_call *sc = arg;
    uint8_t *copy = NULL;
    if (status == GRPC_STATUS_OK) {
        copy = malloc(resp_len ? resp_len : 1);
        if (copy == NULL)
            status = GRPC_STATUS_RESOURCE_EXHAUSTED;
        else if (resp_len > 0)
            memcpy(copy, resp, resp_len);
    }
    pthread_mutex_lock(&sc->mu);
    sc->status = status;
    snprintf(sc->message, sizeof(sc->message), "%s",
             copy == NULL && status == GRPC_STATUS_RESOURCE_EXHAUSTED && message == NULL
                 ? "out of memory"
                 : (message ? message : ""));
    sc->resp = copy;
    sc->resp_len = resp_len;
    sc->done = true;
    pthread_cond_signal(&sc->cv);
    pthread_mutex_unlock(&sc->mu);
}

/* Calls method on node with req and waits for the answer: BACKUP_OK with *resp (caller frees),
 * or BACKUP_EIO / BACKUP_EPRECONDITION with err naming the call and its status. */
static int peer_call(struct backup_remote *br, uint64_t node, const char *method,
                     const ProtobufCMessage *req, uint8_t **resp, size_t *resp_len, char *err,
                     size_t errlen)
{
    size_t n = protobuf_c_message_get_packed_size(req);
    uint8_t *buf = malloc(n ? n : 1);
    struct sync_call sc = {.done = false};
    if (buf == NULL) {
        snprintf(err, errlen, "%s: out of memory", method);
        return BACKUP_ENOMEM;
    }
    protobuf_c_message_pack(req, buf);
    pthread_mutex_init(&sc.mu, NULL);
    pthread_cond_init(&sc.cv, NULL);
    int rc = br->transport == NULL
                 ? TRANSPORT_EINVAL
                 : transport_call(br->transport, node, method, buf, n,
                                  (int64_t)mono_ms() + BACKUP_PEER_CALL_MS, sync_call_done, &sc);
    free(buf);
    if (rc == TRANSPORT_OK) {
        pthread_mutex_lock(&sc.mu);
        while (!sc.done)
            pthread_cond_wait(&sc.cv, &sc.mu);
        pthread_mutex_unlock(&sc.mu);
    }
    pthread_cond_destroy(&sc.cv);
    pthread_mutex_destroy(&sc.mu);
    if (rc != TRANSPORT_OK) {
        snprintf(err, errlen, "%s to node %" PRIu64 ": %s", method, node, transport_strerror(rc));
        return BACKUP_EIO;
    }
    if (sc.status != GRPC_STATUS_OK) {
        snprintf(err, errlen, "%s on node %" PRIu64 ": status %d: %s", method, node, sc.status,
                 sc.message);
        free(sc.resp);
        return sc.status == GRPC_STATUS_FAILED_PRECONDITION ? BACKUP_EPRECONDITION : BACKUP_EIO;
    }
    *resp = sc.resp;
    *resp_len = sc.resp_len;
    return BACKUP_OK;
}

static uint64_t group_leader(void *arg, uint32_t group)
{
    struct backup_remote *br = arg;
    struct route_snapshot *s = route_table_acquire(br->routes);
    const struct route_group *g = s != NULL ? route_snapshot_group(s, group) : NULL;
    uint64_t leader = g != NULL ? g->leader : 0;
    route_snapshot_release(s);
    return leader;
}

static int remote_open(void *arg, uint64_t node, const uint32_t *groups, size_t n,
                       uint64_t *session, uint64_t *applied, char *err, size_t errlen)
{
    struct backup_remote *br = arg;
    Slotd__Internal__V1__BackupOpenRequest q = SLOTD__INTERNAL__V1__BACKUP_OPEN_REQUEST__INIT;
    q.n_group_ids = n;
    q.group_ids = (uint32_t *)groups;
    uint8_t *resp = NULL;
    size_t len = 0;
    int rc = peer_call(br, node, BACKUP_PEER_OPEN_METHOD, &q.base, &resp, &len, err, errlen);
    if (rc != BACKUP_OK)
        return rc;
    Slotd__Internal__V1__BackupOpenResponse *r =
        slotd__internal__v1__backup_open_response__unpack(NULL, len, resp);
    free(resp);
    if (r == NULL || r->n_applied_index != n || r->node_id != node) {
        snprintf(err, errlen, "Peer/BackupOpen on node %" PRIu64 ": malformed answer", node);
        rc = BACKUP_EIO;
    } else {
        *session = r->session_id;
        memcpy(applied, r->applied_index, n * sizeof(*applied));
    }
    if (r != NULL)
        slotd__internal__v1__backup_open_response__free_unpacked(r, NULL);
    return rc;
}

static int remote_read(void *arg, uint64_t node, uint64_t session, uint32_t group, uint32_t page,
                       store_row_cb cb, void *cb_arg, bool *done, char *err, size_t errlen)
{
    struct backup_remote *br = arg;
    Slotd__Internal__V1__BackupReadRequest q = SLOTD__INTERNAL__V1__BACKUP_READ_REQUEST__INIT;
    q.session_id = session;
    q.group_id = group;
    q.page = page;
    q.max_bytes = (uint32_t)BACKUP_ROWS_TARGET_BYTES;
    uint8_t *resp = NULL;
    size_t len = 0;
    int rc = peer_call(br, node, BACKUP_PEER_READ_METHOD, &q.base, &resp, &len, err, errlen);
    if (rc != BACKUP_OK)
        return rc;
    Slotd__Internal__V1__BackupReadResponse *r =
        slotd__internal__v1__backup_read_response__unpack(NULL, len, resp);
    free(resp);
    if (r == NULL) {
        snprintf(err, errlen, "Peer/BackupRead on node %" PRIu64 ": malformed answer", node);
        return BACKUP_EIO;
    }
    for (size_t i = 0; rc == BACKUP_OK && i < r->n_rows; i++)
        if (cb(cb_arg, r->rows[i]->key.data, r->rows[i]->key.len, r->rows[i]->value.data,
               r->rows[i]->value.len) != 0)
            rc = BACKUP_ESTOP;
    *done = r->done;
    slotd__internal__v1__backup_read_response__free_unpacked(r, NULL);
    return rc;
}

static void remote_close(void *arg, uint64_t node, uint64_t session)
{
    struct backup_remote *br = arg;
    Slotd__Internal__V1__BackupCloseRequest q = SLOTD__INTERNAL__V1__BACKUP_CLOSE_REQUEST__INIT;
    q.session_id = session;
    uint8_t *resp = NULL;
    size_t len = 0;
    char err[256];
    if (peer_call(br, node, BACKUP_PEER_CLOSE_METHOD, &q.base, &resp, &len, err, sizeof(err)) !=
        BACKUP_OK)
        slog("warn", "backup",
             "msg=\"backup session not closed\" node=%" PRIu64 " session=%" PRIu64 " error=\"%s\"",
             node, session, err);
    free(resp);
}

void backup_remote_attach(struct backup_remote *r, struct backup_capture_source *src)
{
    if (r->transport == NULL || r->routes == NULL)
        return;
    src->group_leader = group_leader;
    src->remote_open = remote_open;
    src->remote_read = remote_read;
    src->remote_close = remote_close;
    src->remote_arg = r;
}
