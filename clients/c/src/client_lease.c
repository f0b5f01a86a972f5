/* client_lease.c - libslotd leases: grant, keep-alive and revoke (Propose lease commands). */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <grpc/slice.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LEASE_METHOD_PROPOSE "/slotd.v1.Metadata/Propose"
#define LEASE_SEQ_MASK ((UINT64_C(1) << SLOTD_LEASE_ID_SHIFT) - 1)

int slotd_lease_hash_slot(uint64_t id)
{
    uint64_t hash_slot = id >> SLOTD_LEASE_ID_SHIFT;
    if (hash_slot >= SLOTD_HASH_SLOTS || (id & LEASE_SEQ_MASK) == 0)
        return -1;
    return (int)hash_slot;
}

/* The command of one lease call, borrowed for the call. */
struct lease_cmd {
    const char *op;    /* "lease grant", "lease keepalive", "lease revoke" */
    const char *field; /* the request field a bad argument is reported as */
    Slotd__V1__ProposeRequest__CommandCase command_case;
    const void *key; /* grant */
    size_t key_len;
    uint32_t ttl_seconds; /* grant */
    uint64_t id;          /* keep-alive, revoke */
};

void slotd_lease_result_destroy(struct slotd_lease_result *r)
{
    free(r);
}

/* What the server cannot see or the client needs to route: the TTL bound, a NULL key with a
 * length, an id that names no hash slot. */
static int lease_check(const struct lease_cmd *cmd, struct slotd_status *st)
{
    if (cmd->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT) {
        if (!cmd->key && cmd->key_len) {
            snprintf(st->message, sizeof(st->message),
                     "%s: no call: lease_grant.key: NULL with length %zu", cmd->op, cmd->key_len);
            snprintf(st->field, sizeof(st->field), "lease_grant.key");
            return SLOTD_CLIENT_EINVAL;
        }
        if (cmd->ttl_seconds < 1 || cmd->ttl_seconds > SLOTD_LEASE_TTL_MAX) {
            snprintf(st->message, sizeof(st->message),
                     "%s: no call: lease_grant.ttl_seconds: %u is not in 1..%u", cmd->op,
                     cmd->ttl_seconds, SLOTD_LEASE_TTL_MAX);
            snprintf(st->field, sizeof(st->field), "lease_grant.ttl_seconds");
            st->limit = SLOTD_LEASE_TTL_MAX;
            return SLOTD_CLIENT_EINVAL;
        }
        return SLOTD_CLIENT_OK;
    }
    if (slotd_lease_hash_slot(cmd->id) < 0) {
        snprintf(st->message, sizeof(st->message),
                 "%s: no call: %s: %llu (0x%llx) is not a lease id (hash slot 0..255 << %d | "
                 "sequence >= 1)",
                 cmd->op, cmd->field, (unsigned long long)cmd->id, (unsigned long long)cmd->id,
                 SLOTD_LEASE_ID_SHIFT);
        snprintf(st->field, sizeof(st->field), "%s", cmd->field);
        return SLOTD_CLIENT_EINVAL;
    }
    return SLOTD_CLIENT_OK;
}

/* Packs cmd as a ProposeRequest (no_forward, out's request id) into *buf (caller frees). */
static int lease_encode(const struct lease_cmd *cmd, const struct slotd_lease_result *out,
                        uint8_t **buf, size_t *len)
{
    Slotd__V1__ProposeRequest m = SLOTD__V1__PROPOSE_REQUEST__INIT;
    Slotd__V1__LeaseGrantCommand grant = SLOTD__V1__LEASE_GRANT_COMMAND__INIT;
    Slotd__V1__LeaseKeepAliveCommand keep = SLOTD__V1__LEASE_KEEP_ALIVE_COMMAND__INIT;
    Slotd__V1__LeaseRevokeCommand revoke = SLOTD__V1__LEASE_REVOKE_COMMAND__INIT;
    m.no_forward = true;
    m.request_id = (ProtobufCBinaryData){out->request_id_len, (uint8_t *)out->request_id};
    m.command_case = cmd->command_case;
    switch (cmd->command_case) {
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT:
        grant.key = (ProtobufCBinaryData){cmd->key_len, (uint8_t *)cmd->key};
        grant.ttl_seconds = cmd->ttl_seconds;
        m.lease_grant = &grant;
        break;
    case SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE:
        keep.id = cmd->id;
        m.lease_keep_alive = &keep;
        break;
    default:
        revoke.id = cmd->id;
        m.lease_revoke = &revoke;
        break;
    }
    return slotd__pack(&m.base, buf, len);
}

/* Fills out from the ProposeResponse in body; EMALFORMED when it carries another result. */
static int lease_decode(const struct lease_cmd *cmd, grpc_slice body,
                        struct slotd_lease_result *out)
{
    Slotd__V1__ProposeResponse *m = slotd__propose_response_unpack(
        body, &out->applied_index, &out->group_id, &out->term, &out->deduplicated);
    if (!m)
        return SLOTD_CLIENT_EMALFORMED;
    int rc = SLOTD_CLIENT_OK;
    if (cmd->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT &&
        m->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_GRANT) {
        out->id = m->lease_grant->id;
        out->ttl_seconds = m->lease_grant->ttl_seconds;
    } else if (cmd->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE &&
               m->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_KEEP_ALIVE) {
        out->ttl_seconds = m->lease_keep_alive->ttl_seconds;
        out->keys = m->lease_keep_alive->keys;
    } else if (cmd->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE &&
               m->result_case == SLOTD__V1__PROPOSE_RESPONSE__RESULT_LEASE_REVOKE) {
        out->keys_deleted = m->lease_revoke->keys_deleted;
    } else {
        rc = SLOTD_CLIENT_EMALFORMED;
    }
    slotd__v1__propose_response__free_unpacked(m, NULL);
    return rc;
}

/* Runs one lease command: checks, a random request id (so every retry is safe), the call to
 * the leader of the lease's hash slot (the grant's key's), the answer. */
static int lease_call(struct slotd_client *c, const struct lease_cmd *cmd,
                      struct slotd_lease_result *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    out->id = cmd->id;
    int rc = lease_check(cmd, st);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    slotd__client_request_id(c, out->request_id, SLOTD_REQUEST_ID_LEN_DEFAULT);
    out->request_id_len = SLOTD_REQUEST_ID_LEN_DEFAULT;
    uint8_t *req;
    size_t req_len;
    rc = lease_encode(cmd, out, &req, &req_len);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    unsigned hash_slot = cmd->command_case == SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT
                             ? slotd_hash_slot(cmd->key, cmd->key_len)
                             : (unsigned)slotd_lease_hash_slot(cmd->id);
    grpc_slice body;
    rc = slotd__client_slot_call(c, cmd->op, LEASE_METHOD_PROPOSE, hash_slot, req, req_len, true,
                                 &body, &out->attempts, st);
    free(req);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    rc = lease_decode(cmd, body, out);
    grpc_slice_unref(body);
    if (rc == SLOTD_CLIENT_EMALFORMED)
        snprintf(st->message, sizeof(st->message),
                 "%s: response is not a ProposeResponse with a matching lease result", cmd->op);
    return rc;
}

/* lease_call into a new result: *out on success, *err on failure. */
static int lease_run(struct slotd_client *c, const struct lease_cmd *cmd,
                     struct slotd_lease_result **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_lease_result, "lease", slotd_lease_result_destroy, out, err,
                       lease_call(c, cmd, r, &st));
}

int slotd_client_lease_grant(struct slotd_client *c, const void *key, size_t klen,
                             uint32_t ttl_seconds, struct slotd_lease_result **out,
                             struct slotd_error **err)
{
    struct lease_cmd cmd = {.op = "lease grant",
                            .field = "lease_grant",
                            .command_case = SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_GRANT,
                            .key = key,
                            .key_len = klen,
                            .ttl_seconds = ttl_seconds};
    return lease_run(c, &cmd, out, err);
}

/* A command naming one lease by id: keepalive (keep_alive true) or revoke. */
static int lease_by_id(struct slotd_client *c, bool keep_alive, uint64_t id,
                       struct slotd_lease_result **out, struct slotd_error **err)
{
    struct lease_cmd cmd = {.op = keep_alive ? "lease keepalive" : "lease revoke",
                            .field = keep_alive ? "lease_keep_alive.id" : "lease_revoke.id",
                            .command_case =
                                keep_alive ? SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_KEEP_ALIVE
                                           : SLOTD__V1__PROPOSE_REQUEST__COMMAND_LEASE_REVOKE,
                            .id = id};
    return lease_run(c, &cmd, out, err);
}

int slotd_client_lease_keepalive(struct slotd_client *c, uint64_t id,
                                 struct slotd_lease_result **out, struct slotd_error **err)
{
    return lease_by_id(c, true, id, out, err);
}

int slotd_client_lease_revoke(struct slotd_client *c, uint64_t id, struct slotd_lease_result **out,
                              struct slotd_error **err)
{
    return lease_by_id(c, false, id, out, err);
}
