/* client_admin.c - libslotd's slotd.v1.Admin calls: ClusterState, ControllerStatus, commands. */
#include "client_internal.h"

#include "slotd/v1/admin.pb-c.h"

#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Error sentences are cut to their fixed-size buffers on purpose. */
#pragma GCC diagnostic ignored "-Wformat-truncation"

#define ADMIN_METHOD_STATE "/slotd.v1.Admin/ClusterState"
#define ADMIN_METHOD_CONTROLLER_STATUS "/slotd.v1.Admin/ControllerStatus"
#define ADMIN_METHOD_JOIN "/slotd.v1.Admin/JoinNode"
#define ADMIN_METHOD_ACTIVATE "/slotd.v1.Admin/ActivateNode"
#define ADMIN_METHOD_PREFERRED "/slotd.v1.Admin/SetPreferredLeader"
#define ADMIN_METHOD_MOVE "/slotd.v1.Admin/MoveReplica"
#define ADMIN_METHOD_TRANSFER "/slotd.v1.Admin/TransferLeader"
#define ADMIN_METHOD_PROMOTE "/slotd.v1.Admin/PromoteControllerVoter"
#define ADMIN_METHOD_DRAIN "/slotd.v1.Admin/DrainNode"
#define ADMIN_METHOD_RETRY "/slotd.v1.Admin/RetryTask"
#define ADMIN_METHOD_ABORT "/slotd.v1.Admin/AbortTask"
#define ADMIN_METHOD_REMOVE "/slotd.v1.Admin/RemoveNode"
#define ADMIN_METHOD_DEMOTE "/slotd.v1.Admin/DemoteControllerVoter"
#define ADMIN_METHOD_MIGRATE "/slotd.v1.Admin/MigrateHashSlots"
#define ADMIN_METHOD_SET_FEATURE "/slotd.v1.Admin/SetFeature"
#define ADMIN_METHOD_SET_BALANCE "/slotd.v1.Admin/SetBalance"
#define ADMIN_FEATURE_NAME_MAX 64
#define ADMIN_METHOD_SET_BACKUP_PLAN "/slotd.v1.Admin/SetBackupPlan"
#define ADMIN_DESTINATION_MAX 512 /* the request fits SLOTD__ADMIN_REQUEST_MAX; the server: 255 */
#define ADMIN_CHECKSUM_LEN_MAX 15
#define ADMIN_GRPC_ABORTED 10

const char *slotd_admin_outcome_name(int outcome)
{
    switch (outcome) {
    case SLOTD_ADMIN_OUTCOME_CHANGED:
        return "CHANGED";
    case SLOTD_ADMIN_OUTCOME_UPDATED:
        return "UPDATED";
    case SLOTD_ADMIN_OUTCOME_NOOP:
        return "NOOP";
    default:
        return "UNSPECIFIED";
    }
}

void slotd__admin_fail_text(const char *op, int rc, unsigned attempts, struct slotd_status *st)
{
    char text[SLOTD_STATUS_MESSAGE_LEN];
    snprintf(text, sizeof(text), "%s: %s: %s", op,
             st->grpc_status >= 0 ? slotd_grpc_status_name(st->grpc_status) : "no call",
             st->message[0] ? st->message : slotd_client_strerror(rc));
    size_t used = strlen(text);
    if (st->has_detail && st->field[0])
        snprintf(text + used, sizeof(text) - used, " (field %s)", st->field);
    used = strlen(text);
    snprintf(text + used, sizeof(text) - used, " [%s, %u attempt%s]",
             st->address[0] ? st->address : "no endpoint", attempts, attempts == 1 ? "" : "s");
    snprintf(st->message, sizeof(st->message), "%s", text);
}

void slotd_cluster_state_destroy(struct slotd_cluster_state *s)
{
    if (!s)
        return;
    free(s->state_json);
    free(s);
}

void slotd_admin_result_destroy(struct slotd_admin_result *r)
{
    free(r);
}

void slotd_controller_status_destroy(struct slotd_controller_status *s)
{
    free(s);
}

/* Fills out from a ClusterStateResponse (buf borrowed for the call). */
static int admin_state_decode(const uint8_t *buf, size_t len, struct slotd_cluster_state *out,
                              struct slotd_status *st)
{
    Slotd__V1__ClusterStateResponse *m = slotd__v1__cluster_state_response__unpack(NULL, len, buf);
    int rc = SLOTD_CLIENT_EMALFORMED;
    if (!m) {
        snprintf(st->message, sizeof(st->message), "response is not a ClusterStateResponse");
        goto err_after_nothing;
    }
    if (strlen(m->checksum) > ADMIN_CHECKSUM_LEN_MAX) {
        snprintf(st->message, sizeof(st->message), "checksum longer than %d characters",
                 ADMIN_CHECKSUM_LEN_MAX);
        goto err_after_unpack;
    }
    if (m->state_json.len > SLOTD_ADMIN_STATE_JSON_MAX) {
        snprintf(st->message, sizeof(st->message), "state_json of %zu bytes exceeds %d",
                 m->state_json.len, SLOTD_ADMIN_STATE_JSON_MAX);
        goto err_after_unpack;
    }
    if (!m->not_modified && m->state_json.len == 0) {
        snprintf(st->message, sizeof(st->message), "state_json is empty");
        goto err_after_unpack;
    }
    if (!m->not_modified) {
        out->state_json = malloc(m->state_json.len + 1);
        if (!out->state_json) {
            rc = SLOTD_CLIENT_ENOMEM;
            snprintf(st->message, sizeof(st->message), "out of memory");
            goto err_after_unpack;
        }
        memcpy(out->state_json, m->state_json.data, m->state_json.len);
        out->state_json[m->state_json.len] = '\0';
        out->state_json_len = m->state_json.len;
    }
    out->not_modified = m->not_modified;
    out->revision = m->revision;
    snprintf(out->checksum, sizeof(out->checksum), "%s", m->checksum);
    out->applied_raft_index = m->applied_raft_index;
    out->from_voter = m->from_voter;
    slotd__v1__cluster_state_response__free_unpacked(m, NULL);
    return SLOTD_CLIENT_OK;

err_after_unpack:
    slotd__v1__cluster_state_response__free_unpacked(m, NULL);
err_after_nothing:
    return rc;
}

int slotd__call_endpoints(struct slotd_client *c, const char *method, const uint8_t *req,
                          size_t len, bool retry, uint8_t **body, size_t *body_len,
                          unsigned *attempts, char *source, struct slotd_status *st)
{
    char endpoints[SLOTD_CLIENT_ENDPOINTS_MAX][SLOTD_ADDRESS_LEN + 1];
    size_t n = slotd__client_endpoints(c, endpoints, SLOTD_CLIENT_ENDPOINTS_MAX);
    int retries = retry ? slotd__client_max_retries(c) : 0;
    unsigned passes = 1 + (unsigned)(retries > 0 ? retries : 0);
    int rc = SLOTD_CLIENT_EUNAVAILABLE;
    for (unsigned pass = 0; pass < passes; pass++) {
        if (pass > 0)
            slotd__sleep_ms(slotd__backoff_ms(pass, st->retry_after_ms));
        for (size_t i = 0; i < n; i++) {
            (*attempts)++;
            rc = slotd__client_unary(c, endpoints[i], method, req, len, body, body_len, st);
            if (rc == SLOTD_CLIENT_OK && source)
                snprintf(source, SLOTD_ADDRESS_LEN + 1, "%s", endpoints[i]);
            if (rc == SLOTD_CLIENT_OK || !slotd__admin_skippable(rc))
                return rc;
        }
    }
    return rc;
}

bool slotd__admin_skippable(int rc)
{
    return rc == SLOTD_CLIENT_EUNAVAILABLE || rc == SLOTD_CLIENT_ETIMEOUT ||
           rc == SLOTD_CLIENT_EEXHAUSTED;
}

/* One ClusterState answer into out (borrowed for the call); st describes a failure. */
static int admin_cluster_state(struct slotd_client *c, uint64_t known_revision,
                               const char *known_checksum, struct slotd_cluster_state *out,
                               struct slotd_status *st)
{
    slotd_call_status_reset(st);
    Slotd__V1__ClusterStateRequest req = SLOTD__V1__CLUSTER_STATE_REQUEST__INIT;
    req.known_revision = known_revision;
    req.known_checksum = (char *)(known_checksum ? known_checksum : "");
    req.min_revision = slotd_client_last_revision(c);
    if (strlen(req.known_checksum) > ADMIN_CHECKSUM_LEN_MAX) {
        snprintf(st->message, sizeof(st->message), "known_checksum longer than %d characters",
                 ADMIN_CHECKSUM_LEN_MAX);
        slotd__admin_fail_text("cluster state", SLOTD_CLIENT_EINVAL, 0, st);
        return SLOTD_CLIENT_EINVAL;
    }
    uint8_t buf[96]; /* known_checksum plus two varints */
    size_t len = slotd__v1__cluster_state_request__pack(&req, buf);
    uint8_t *body;
    size_t body_len;
    char source[SLOTD_ADDRESS_LEN + 1];
    int rc = slotd__call_endpoints(c, ADMIN_METHOD_STATE, buf, len, false, &body, &body_len,
                                   &out->attempts, source, st);
    if (rc == SLOTD_CLIENT_OK) {
        rc = admin_state_decode(body, body_len, out, st);
        free(body);
    }
    if (rc == SLOTD_CLIENT_OK) {
        snprintf(out->source, sizeof(out->source), "%s", source);
        slotd_client_observe_revision(c, out->revision);
    }
    if (rc != SLOTD_CLIENT_OK)
        slotd__admin_fail_text("cluster state", rc, out->attempts, st);
    return rc;
}

int slotd_client_cluster_state(struct slotd_client *c, uint64_t known_revision,
                               const char *known_checksum, struct slotd_cluster_state **out,
                               struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_cluster_state, "cluster state", slotd_cluster_state_destroy,
                       out, err, admin_cluster_state(c, known_revision, known_checksum, r, &st));
}

int slotd__controller_status_decode(const uint8_t *buf, size_t len,
                                    struct slotd_controller_status *out, struct slotd_status *st)
{
    Slotd__V1__ControllerStatusResponse *m =
        slotd__v1__controller_status_response__unpack(NULL, len, buf);
    if (!m) {
        snprintf(st->message, sizeof(st->message), "response is not a ControllerStatusResponse");
        return SLOTD_CLIENT_EMALFORMED;
    }
    out->node_id = m->node_id;
    snprintf(out->role, sizeof(out->role), "%s", m->role ? m->role : "");
    out->term = m->term;
    out->commit_index = m->commit_index;
    out->revision = m->revision;
    out->applied_index = m->applied_index;
    out->snapshot_index = m->snapshot_index;
    out->state_file_revision = m->state_file_revision;
    out->state_file_age_ms = m->state_file_age_ms;
    out->mirror_lag_ms = m->mirror_lag_ms;
    out->leader = m->leader;
    const Slotd__V1__BalanceStatus *b = m->balance;
    if (b != NULL) {
        out->balance_enabled = b->enabled;
        out->balance_paused = b->paused;
        out->balance_balanced = b->balanced;
        out->balance_max_moves = b->max_moves;
        out->balance_total_replicas = b->total_replicas;
        out->balance_total_weight = b->total_weight;
        for (size_t i = 0; i < b->n_scores && i < SLOTD_BALANCE_NODES_MAX; i++) {
            struct slotd_balance_score *sc = &out->balance_scores[out->n_balance_scores++];
            sc->node = b->scores[i]->node;
            sc->weight = b->scores[i]->weight;
            sc->replicas = b->scores[i]->replicas;
            sc->share_x10 = b->scores[i]->share_x10;
        }
        for (size_t i = 0; i < b->n_moves && i < SLOTD_BALANCE_MOVES_MAX; i++) {
            struct slotd_balance_move *mv = &out->balance_moves[out->n_balance_moves++];
            mv->group = b->moves[i]->group;
            mv->source = b->moves[i]->source;
            mv->target = b->moves[i]->target;
            snprintf(mv->why, sizeof(mv->why), "%s", b->moves[i]->why ? b->moves[i]->why : "");
        }
    }
    slotd__v1__controller_status_response__free_unpacked(m, NULL);
    return SLOTD_CLIENT_OK;
}

/* One ControllerStatus answer of address into out (borrowed); st describes a failure. */
static int admin_controller_status(struct slotd_client *c, const char *address,
                                   struct slotd_controller_status *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    /* exactly one node: a list would make the answer ambiguous, so it is refused */
    if (!address || !*address || strlen(address) > SLOTD_ADDRESS_LEN || strchr(address, ',')) {
        snprintf(st->message, sizeof(st->message), "address must be one host:port of 1..%d bytes",
                 SLOTD_ADDRESS_LEN);
        slotd__admin_fail_text("controller status", SLOTD_CLIENT_EINVAL, 0, st);
        return SLOTD_CLIENT_EINVAL;
    }
    snprintf(out->source, sizeof(out->source), "%s", address);
    Slotd__V1__ControllerStatusRequest req = SLOTD__V1__CONTROLLER_STATUS_REQUEST__INIT;
    uint8_t buf[16];
    size_t len = slotd__v1__controller_status_request__pack(&req, buf);
    uint8_t *body;
    size_t body_len;
    out->attempts = 1;
    int rc = slotd__client_unary(c, address, ADMIN_METHOD_CONTROLLER_STATUS, buf, len, &body,
                                 &body_len, st);
    if (rc == SLOTD_CLIENT_OK) {
        rc = slotd__controller_status_decode(body, body_len, out, st);
        free(body);
    }
    if (rc != SLOTD_CLIENT_OK)
        slotd__admin_fail_text("controller status", rc, out->attempts, st);
    return rc;
}

int slotd_client_controller_status(struct slotd_client *c, const char *address,
                                   struct slotd_controller_status **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_controller_status, "controller status",
                       slotd_controller_status_destroy, out, err,
                       admin_controller_status(c, address, r, &st));
}

/* Checks w's hash slots (1..256 distinct values in 0..255) into a request's array (ascending;
 * slots has SLOTD_HASH_SLOTS entries); EINVAL naming the field and the bad value otherwise. */
static int admin_slots_check(const struct slotd_admin_command *w, uint32_t *slots,
                             struct slotd_status *st)
{
    bool seen[SLOTD_HASH_SLOTS] = {false};
    snprintf(st->field, sizeof(st->field), "hash_slots");
    st->limit = SLOTD_HASH_SLOTS;
    if (!w->hash_slots || w->hash_slot_count == 0 || w->hash_slot_count > SLOTD_HASH_SLOTS) {
        snprintf(st->message, sizeof(st->message), "hash_slots: %zu given, must be 1..%d",
                 w->hash_slots ? w->hash_slot_count : 0, SLOTD_HASH_SLOTS);
        return SLOTD_CLIENT_EINVAL;
    }
    for (size_t i = 0; i < w->hash_slot_count; i++) {
        uint32_t v = w->hash_slots[i];
        if (v >= SLOTD_HASH_SLOTS) {
            snprintf(st->message, sizeof(st->message), "hash_slots: %u not in 0..%d", v,
                     SLOTD_HASH_SLOTS - 1);
            return SLOTD_CLIENT_EINVAL;
        }
        if (seen[v]) {
            snprintf(st->message, sizeof(st->message), "hash_slots: %u given twice", v);
            return SLOTD_CLIENT_EINVAL;
        }
        seen[v] = true;
    }
    size_t n = 0;
    for (uint32_t v = 0; v < SLOTD_HASH_SLOTS; v++)
        if (seen[v])
            slots[n++] = v;
    st->field[0] = '\0';
    st->limit = 0;
    return SLOTD_CLIENT_OK;
}

/* MigrateHashSlots: the checked hash slot list, ascending. */
static int admin_migrate_encode(const struct slotd_admin_command *w, uint8_t *buf, size_t *len,
                                struct slotd_status *st)
{
    uint32_t slots[SLOTD_HASH_SLOTS];
    int rc = admin_slots_check(w, slots, st);
    if (rc != SLOTD_CLIENT_OK)
        return rc;
    Slotd__V1__MigrateHashSlotsRequest r = SLOTD__V1__MIGRATE_HASH_SLOTS_REQUEST__INIT;
    r.n_hash_slots = w->hash_slot_count;
    r.hash_slots = slots;
    r.to_group = w->to_group;
    r.expected_revision = w->expected_revision;
    *len = slotd__v1__migrate_hash_slots_request__pack(&r, buf);
    return SLOTD_CLIENT_OK;
}

/* The commands whose request holds only numbers and flags of the command, each copied from the
 * command field of the same name (admin_plain_value); no_forward stays false. */
static const struct admin_plain {
    enum slotd_admin_kind kind;
    const char *method, *op;
    const ProtobufCMessageDescriptor *d;
} admin_plain[] = {
    {SLOTD_ADMIN_ACTIVATE_NODE, ADMIN_METHOD_ACTIVATE, "activate node",
     &slotd__v1__activate_node_request__descriptor},
    {SLOTD_ADMIN_SET_BALANCE, ADMIN_METHOD_SET_BALANCE, "set balance",
     &slotd__v1__set_balance_request__descriptor},
    {SLOTD_ADMIN_SET_PREFERRED_LEADER, ADMIN_METHOD_PREFERRED, "set preferred leader",
     &slotd__v1__set_preferred_leader_request__descriptor},
    {SLOTD_ADMIN_MOVE_REPLICA, ADMIN_METHOD_MOVE, "move replica",
     &slotd__v1__move_replica_request__descriptor},
    {SLOTD_ADMIN_TRANSFER_LEADER, ADMIN_METHOD_TRANSFER, "transfer leader",
     &slotd__v1__transfer_leader_request__descriptor},
    {SLOTD_ADMIN_PROMOTE_CONTROLLER_VOTER, ADMIN_METHOD_PROMOTE, "promote controller voter",
     &slotd__v1__promote_controller_voter_request__descriptor},
    {SLOTD_ADMIN_DRAIN_NODE, ADMIN_METHOD_DRAIN, "drain node",
     &slotd__v1__drain_node_request__descriptor},
    {SLOTD_ADMIN_RETRY_TASK, ADMIN_METHOD_RETRY, "retry task",
     &slotd__v1__retry_task_request__descriptor},
    {SLOTD_ADMIN_ABORT_TASK, ADMIN_METHOD_ABORT, "abort task",
     &slotd__v1__abort_task_request__descriptor},
    {SLOTD_ADMIN_REMOVE_NODE, ADMIN_METHOD_REMOVE, "remove node",
     &slotd__v1__remove_node_request__descriptor},
    {SLOTD_ADMIN_DEMOTE_CONTROLLER_VOTER, ADMIN_METHOD_DEMOTE, "demote controller voter",
     &slotd__v1__demote_controller_voter_request__descriptor},
};

/* w's value for the request field called name; false for a field the command does not set. */
static bool admin_plain_value(const struct slotd_admin_command *w, const char *name, uint64_t *v)
{
    if (strcmp(name, "node_id") == 0)
        *v = w->node_id;
    else if (strcmp(name, "group_id") == 0)
        *v = w->group_id;
    else if (strcmp(name, "from_node") == 0)
        *v = w->from_node;
    else if (strcmp(name, "to_node") == 0)
        *v = w->to_node;
    else if (strcmp(name, "task_id") == 0)
        *v = w->task_id;
    else if (strcmp(name, "enabled") == 0)
        *v = w->enabled;
    else if (strcmp(name, "expected_revision") == 0)
        *v = w->expected_revision;
    else
        return false;
    return true;
}

/* Packs the request of an admin_plain command p into buf. */
static size_t admin_plain_encode(const struct admin_plain *p, const struct slotd_admin_command *w,
                                 uint8_t *buf)
{
    union {
        ProtobufCMessage base;
        uint64_t room[16]; /* more than the largest of them (MoveReplicaRequest) */
    } m;
    assert(p->d->sizeof_message <= sizeof(m));
    protobuf_c_message_init(p->d, &m);
    for (unsigned i = 0; i < p->d->n_fields; i++) {
        const ProtobufCFieldDescriptor *f = &p->d->fields[i];
        uint64_t v;
        if (!admin_plain_value(w, f->name, &v))
            continue;
        void *at = (char *)&m + f->offset;
        if (f->type == PROTOBUF_C_TYPE_UINT64)
            *(uint64_t *)at = v;
        else if (f->type == PROTOBUF_C_TYPE_UINT32)
            *(uint32_t *)at = (uint32_t)v;
        else if (f->type == PROTOBUF_C_TYPE_BOOL)
            *(protobuf_c_boolean *)at = v != 0;
        else
            assert(!"admin_plain: a field type the table does not copy");
    }
    return protobuf_c_message_pack(&m.base, buf);
}

/* MigrateHashSlots and the admin_plain commands. */
static int admin_task_encode(const struct slotd_admin_command *w, uint8_t *buf, size_t *len,
                             const char **method, const char **op, struct slotd_status *st)
{
    for (size_t i = 0; i < sizeof(admin_plain) / sizeof(admin_plain[0]); i++) {
        if (admin_plain[i].kind == w->kind) {
            *method = admin_plain[i].method;
            *op = admin_plain[i].op;
            *len = admin_plain_encode(&admin_plain[i], w, buf);
            return SLOTD_CLIENT_OK;
        }
    }
    switch (w->kind) {
    case SLOTD_ADMIN_MIGRATE_HASH_SLOTS:
        *method = ADMIN_METHOD_MIGRATE;
        *op = "migrate hash slots";
        return admin_migrate_encode(w, buf, len, st);
    default:
        break;
    }
    *op = "admin";
    snprintf(st->message, sizeof(st->message), "unknown admin command kind %d", (int)w->kind);
    return SLOTD_CLIENT_EINVAL;
}

int slotd__admin_write_encode(const struct slotd_admin_command *w, uint8_t *buf, size_t *len,
                              const char **method, const char **op, struct slotd_status *st)
{
    switch (w->kind) {
    case SLOTD_ADMIN_JOIN_NODE: {
        *method = ADMIN_METHOD_JOIN;
        *op = "join node";
        if (!w->address || !*w->address || strlen(w->address) > SLOTD_ADDRESS_LEN) {
            snprintf(st->message, sizeof(st->message), "address must be 1..%d bytes",
                     SLOTD_ADDRESS_LEN);
            return SLOTD_CLIENT_EINVAL;
        }
        Slotd__V1__JoinNodeRequest r = SLOTD__V1__JOIN_NODE_REQUEST__INIT;
        r.node_id = w->node_id;
        r.address = (char *)w->address;
        r.weight = w->weight;
        r.expected_revision = w->expected_revision;
        *len = slotd__v1__join_node_request__pack(&r, buf);
        return SLOTD_CLIENT_OK;
    }
    case SLOTD_ADMIN_SET_FEATURE: {
        *method = ADMIN_METHOD_SET_FEATURE;
        *op = "set feature";
        if (!w->feature || !*w->feature || strlen(w->feature) > ADMIN_FEATURE_NAME_MAX) {
            snprintf(st->message, sizeof(st->message), "feature must be 1..%d bytes",
                     ADMIN_FEATURE_NAME_MAX);
            snprintf(st->field, sizeof(st->field), "feature");
            return SLOTD_CLIENT_EINVAL;
        }
        Slotd__V1__SetFeatureRequest r = SLOTD__V1__SET_FEATURE_REQUEST__INIT;
        r.name = (char *)w->feature;
        r.enabled = w->enabled;
        r.expected_revision = w->expected_revision;
        *len = slotd__v1__set_feature_request__pack(&r, buf);
        return SLOTD_CLIENT_OK;
    }
    case SLOTD_ADMIN_SET_BACKUP_PLAN: {
        *method = ADMIN_METHOD_SET_BACKUP_PLAN;
        *op = "set backup plan";
        if (w->destination && strlen(w->destination) > ADMIN_DESTINATION_MAX) {
            snprintf(st->message, sizeof(st->message), "destination must be at most %d bytes",
                     ADMIN_DESTINATION_MAX);
            snprintf(st->field, sizeof(st->field), "destination");
            return SLOTD_CLIENT_EINVAL;
        }
        Slotd__V1__SetBackupPlanRequest r = SLOTD__V1__SET_BACKUP_PLAN_REQUEST__INIT;
        r.interval_s = w->interval_s;
        r.destination = (char *)(w->destination ? w->destination : "");
        r.retention = w->retention;
        r.delete_ = w->delete_plan;
        r.expected_revision = w->expected_revision;
        *len = slotd__v1__set_backup_plan_request__pack(&r, buf);
        return SLOTD_CLIENT_OK;
    }
    default:
        return admin_task_encode(w, buf, len, method, op, st);
    }
}

static int admin_write_decode(const uint8_t *body, size_t len, struct slotd_admin_result *out,
                              struct slotd_status *st)
{
    Slotd__V1__AdminWriteResponse *m = slotd__v1__admin_write_response__unpack(NULL, len, body);
    if (!m) {
        snprintf(st->message, sizeof(st->message), "response is not an AdminWriteResponse");
        return SLOTD_CLIENT_EMALFORMED;
    }
    out->outcome = (int)m->outcome;
    snprintf(out->reason, sizeof(out->reason), "%s", m->reason);
    out->revision = m->revision;
    out->applied_index = m->applied_index;
    out->task_id = m->task_id;
    slotd__v1__admin_write_response__free_unpacked(m, NULL);
    return SLOTD_CLIENT_OK;
}

/* Sends w (see slotd_client_admin_command) into out (borrowed); st describes a failure. */
static int admin_command(struct slotd_client *c, const struct slotd_admin_command *w,
                         struct slotd_admin_result *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    uint8_t req[SLOTD__ADMIN_REQUEST_MAX];
    size_t len = 0;
    const char *method = NULL, *op = "admin";
    int rc = slotd__admin_write_encode(w, req, &len, &method, &op, st);
    if (rc != SLOTD_CLIENT_OK) {
        slotd__admin_fail_text(op, rc, 0, st);
        return rc;
    }
    char endpoints[SLOTD_CLIENT_ENDPOINTS_MAX][SLOTD_ADDRESS_LEN + 1];
    size_t n = slotd__client_endpoints(c, endpoints, SLOTD_CLIENT_ENDPOINTS_MAX);
    int retries = slotd__client_max_retries(c);
    unsigned passes = 1 + (unsigned)(retries > 0 ? retries : 0);
    rc = SLOTD_CLIENT_EUNAVAILABLE;
    for (unsigned pass = 0; pass < passes; pass++) {
        if (pass > 0)
            slotd__sleep_ms(slotd__backoff_ms(pass, st->retry_after_ms));
        for (size_t i = 0; i < n; i++) {
            uint8_t *body;
            size_t body_len;
            out->attempts++;
            rc = slotd__client_unary(c, endpoints[i], method, req, len, &body, &body_len, st);
            if (rc == SLOTD_CLIENT_OK) {
                rc = admin_write_decode(body, body_len, out, st);
                free(body);
                if (rc == SLOTD_CLIENT_OK)
                    slotd_client_observe_revision(c, out->revision);
            }
            if (rc != SLOTD_CLIENT_EUNAVAILABLE)
                goto done;
        }
    }
done:
    if (rc == SLOTD_CLIENT_ERPC && st->grpc_status == ADMIN_GRPC_ABORTED)
        rc = SLOTD_CLIENT_ESTALE_REVISION;
    if (rc != SLOTD_CLIENT_OK)
        slotd__admin_fail_text(op, rc, out->attempts, st);
    return rc;
}

int slotd_client_admin_command(struct slotd_client *c, const struct slotd_admin_command *cmd,
                               struct slotd_admin_result **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_admin_result, "admin", slotd_admin_result_destroy, out, err,
                       admin_command(c, cmd, r, &st));
}
