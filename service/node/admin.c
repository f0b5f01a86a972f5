/* admin.c - the slotd.v1.Admin handlers: the cluster state, and controller commands proposed on
 * the controller leader (relayed there by voters and mirrors). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <jansson.h>

#include "service/controller/controller.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "slotd/internal/v1/log.pb-c.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "slotd/v1/admin.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"

#define ADMIN_FORWARD_DEFAULT_MS 10000
#define ADMIN_FORWARD_MARGIN_MS 100

/* The state without its secrets (auth.token_key, auth.users[].password_hash) for callers that
 * are not nodes: *buf (a packed ClusterStateResponse, malloc'd) is replaced when its state has
 * an auth section. "checksum" stays the full state's (clients send it back as known_checksum).
 * Returns 0, -1 on allocation or decode failure. */
static bool has_auth_section(const uint8_t *p, size_t n)
{
    static const char k[] = "\"auth\":";
    for (size_t i = 0; i + sizeof(k) - 1 <= n; i++)
        if (memcmp(p + i, k, sizeof(k) - 1) == 0)
            return true;
    return false;
}

static int redact_secrets(uint8_t **buf, size_t *len)
{
    Slotd__V1__ClusterStateResponse *r =
        slotd__v1__cluster_state_response__unpack(NULL, *len, *buf);
    if (r == NULL)
        return -1;
    int rc = 0;
    json_t *root = NULL;
    if (r->state_json.len > 0 && has_auth_section(r->state_json.data, r->state_json.len)) {
        rc = -1;
        root = json_loadb((const char *)r->state_json.data, r->state_json.len, 0, NULL);
        json_t *auth = root ? json_object_get(root, "auth") : NULL;
        json_t *users = auth ? json_object_get(auth, "users") : NULL;
        char *text = NULL;
        if (auth != NULL && json_is_array(users)) {
            json_object_del(auth, "token_key");
            for (size_t i = 0; i < json_array_size(users); i++)
                json_object_del(json_array_get(users, i), "password_hash");
            text = json_dumps(root, JSON_SORT_KEYS | JSON_COMPACT);
        }
        uint8_t *out = NULL;
        if (text != NULL) {
            ProtobufCBinaryData full = r->state_json; /* freed with r below */
            r->state_json.data = (uint8_t *)text;
            r->state_json.len = strlen(text);
            size_t n = slotd__v1__cluster_state_response__get_packed_size(r);
            out = malloc(n ? n : 1);
            if (out != NULL) {
                slotd__v1__cluster_state_response__pack(r, out);
                free(*buf);
                *buf = out;
                *len = n;
                rc = 0;
            }
            r->state_json = full;
            free(text);
        }
    }
    json_decref(root);
    slotd__v1__cluster_state_response__free_unpacked(r, NULL);
    return rc;
}

static void answer_cluster_state(const struct node_gated *g)
{
    struct slotd_error err;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc = runtime_ctl_state(g->api->rt, g->known_checksum, g->known_revision, &buf, &blen);
    if (rc == 1) {
        slotd_error_set(&err, SLOTD_EROUTE_NOT_READY,
                        "node %llu holds no cluster state yet (bootstrapping or joining)",
                        (unsigned long long)g->api->node_id);
        err.retry_after_ms = 200;
        rpc_call_fail(g->call, &err);
        return;
    }
    if (rc != 0) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        rpc_call_fail(g->call, &err);
        return;
    }
    if (!g->secrets && redact_secrets(&buf, &blen) != 0) {
        free(buf);
        slotd_error_set(&err, SLOTD_EINTERNAL, "cluster state: cannot leave out the secrets");
        rpc_call_fail(g->call, &err);
        return;
    }
    rpc_call_reply_bytes(g->call, buf, blen);
    free(buf);
}

static void on_cluster_state(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    Slotd__V1__ClusterStateRequest *r =
        node_request_decode(call, &slotd__v1__cluster_state_request__descriptor, req, len);
    if (r == NULL)
        return;
    struct node_caller caller;
    struct slotd_error aerr;
    if (node_authz_caller(api->authz, api->peer_mtls, call, "/slotd.v1.Admin/ClusterState", req,
                          len, &caller, &aerr) != 0 ||
        node_authz_allowed(&caller,
                           &(struct ctl_need){.type = CTL_PERM_ADMIN, .access = CTL_ACCESS_READ},
                           &aerr) != 0) {
        node_caller_release(&caller);
        slotd__v1__cluster_state_request__free_unpacked(r, NULL);
        rpc_call_fail(call, &aerr);
        return;
    }
    bool node = caller.kind == NODE_CALLER_NODE ||
                (caller.kind == NODE_CALLER_OPEN && node_authz_is_node(api->peer_mtls, call));
    node_caller_release(&caller);
    struct node_gated g = {.api = ctx,
                           .call = call,
                           .min_revision = r->min_revision,
                           .answer = answer_cluster_state,
                           .known_revision = r->known_revision,
                           .secrets = node};
    const char *sum = r->known_checksum != NULL ? r->known_checksum : "";
    bool fits = strlen(sum) < sizeof(g.known_checksum);
    if (fits)
        snprintf(g.known_checksum, sizeof(g.known_checksum), "%s", sum);
    slotd__v1__cluster_state_request__free_unpacked(r, NULL);
    if (!fits) {
        struct slotd_error err;
        slotd_error_field(&err, "known_checksum", sizeof(g.known_checksum) - 1,
                          "known_checksum: longer than %zu bytes (a checksum from a "
                          "ClusterStateResponse)",
                          sizeof(g.known_checksum) - 1);
        rpc_call_fail(call, &err);
        return;
    }
    node_gate(&g);
}

static void on_controller_status(struct node_api *api, struct rpc_call *call, void *req)
{
    (void)req; /* ControllerStatusRequest has no fields */
    struct runtime_ctl_status st;
    runtime_ctl_status(api->rt, &st);
    Slotd__V1__ControllerStatusResponse q = SLOTD__V1__CONTROLLER_STATUS_RESPONSE__INIT;
    q.node_id = api->node_id;
    q.role = (char *)st.role;
    q.term = st.term;
    q.commit_index = st.commit_index;
    q.revision = st.revision;
    q.applied_index = st.applied_index;
    q.snapshot_index = st.snapshot_index;
    q.state_file_revision = st.file_revision;
    q.state_file_age_ms = st.file_age_ms;
    q.mirror_lag_ms = st.mirror_age_ms;
    q.leader = st.leader;
    q.n_groups_without_quorum = st.n_groups_without_quorum;
    q.groups_without_quorum = st.groups_without_quorum;
    struct ctl_balance_plan *plan = malloc(sizeof(*plan));
    Slotd__V1__BalanceStatus bs = SLOTD__V1__BALANCE_STATUS__INIT;
    Slotd__V1__BalanceScore sc[CTL_NODES_MAX], *scp[CTL_NODES_MAX];
    Slotd__V1__BalanceMove mv[CTL_GROUPS_MAX], *mvp[CTL_GROUPS_MAX];
    uint8_t *buf = NULL;
    struct slotd_error e;
    if (plan == NULL) {
        slotd_error_set(&e, SLOTD_EINTERNAL, "controller status: out of memory");
        goto err_after_plan;
    }
    bool enabled, paused;
    unsigned max_moves;
    runtime_ctl_balance(api->rt, plan, &enabled, &paused, &max_moves);
    bs.enabled = enabled;
    bs.paused = paused;
    bs.max_moves = max_moves;
    bs.total_replicas = plan->total_replicas;
    bs.total_weight = plan->total_weight;
    bs.balanced = plan->balanced;
    for (uint32_t i = 0; i < plan->n_scores; i++) {
        slotd__v1__balance_score__init(&sc[i]);
        sc[i].node = plan->scores[i].node;
        sc[i].weight = plan->scores[i].weight;
        sc[i].replicas = plan->scores[i].replicas;
        sc[i].share_x10 = plan->scores[i].share_x10;
        scp[i] = &sc[i];
    }
    bs.n_scores = plan->n_scores;
    bs.scores = scp;
    for (uint32_t i = 0; i < plan->n_moves; i++) {
        slotd__v1__balance_move__init(&mv[i]);
        mv[i].group = plan->moves[i].group;
        mv[i].source = plan->moves[i].source;
        mv[i].target = plan->moves[i].target;
        mv[i].why = plan->moves[i].why;
        mvp[i] = &mv[i];
    }
    bs.n_moves = plan->n_moves;
    bs.moves = mvp;
    q.balance = &bs;
    size_t n = slotd__v1__controller_status_response__get_packed_size(&q);
    buf = malloc(n > 0 ? n : 1);
    if (buf == NULL) {
        slotd_error_set(&e, SLOTD_EINTERNAL, "controller status: %zu bytes", n);
        goto err_after_buf;
    }
    slotd__v1__controller_status_response__pack(&q, buf);
    rpc_call_reply_bytes(call, buf, n);
    free(buf);
    free(plan);
    return;
err_after_buf:
    free(plan);
err_after_plan:
    rpc_call_fail(call, &e);
}

/* ---- Relaying a write to the controller leader ---- */

struct relay {
    struct rpc_call *call;
};

static void relay_done(void *arg, int status, const char *message, const uint8_t *resp,
                       size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct relay *f = arg;
    if (status == GRPC_STATUS_OK) {
        rpc_call_reply_bytes(f->call, resp ? resp : (const uint8_t *)"", resp ? resp_len : 0);
    } else if (details == NULL && transport_reply_unsent(status, message)) {
        struct slotd_error err;
        slotd_error_set(&err, SLOTD_ENO_LEADER,
                        "controller: the leader cannot be reached (%s); the command was not sent",
                        message);
        err.retry_after_ms = 200;
        rpc_call_fail(f->call, &err);
    } else if (details == NULL &&
               (status == GRPC_STATUS_UNAVAILABLE || status == GRPC_STATUS_DEADLINE_EXCEEDED ||
                status == GRPC_STATUS_CANCELLED)) {
        struct slotd_error err;
        slotd_error_set(&err, SLOTD_EUNKNOWN_OUTCOME,
                        "controller: relayed command got no answer (%s); it may or may not "
                        "have been applied",
                        message ? message : "no answer");
        err.retry_after_ms = 200;
        rpc_call_fail(f->call, &err);
    } else {
        rpc_call_fail_raw(f->call, status, message, details, details_len);
    }
    free(f);
}

static int relay(struct node_api *api, struct rpc_call *call, const char *method, uint64_t to,
                 const ProtobufCMessage *msg, struct slotd_error *err)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    uint8_t *buf = malloc(len ? len : 1);
    struct relay *f = malloc(sizeof(*f));
    if (buf == NULL || f == NULL) {
        free(buf);
        free(f);
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
        return -1;
    }
    protobuf_c_message_pack(msg, buf);
    f->call = call;
    int64_t d = rpc_call_deadline_ms(call);
    int64_t deadline =
        d == INT64_MAX ? node_mono_ms() + ADMIN_FORWARD_DEFAULT_MS : d - ADMIN_FORWARD_MARGIN_MS;
    /* Admin commands travel as Peer/Forward; a relayed Peer/ControllerCommand as itself */
    bool peer = strncmp(method, "/slotd.internal.v1.Peer/", 24) == 0;
    int rc = peer
                 ? transport_call(api->transport, to, method, buf, len, deadline, relay_done, f)
                 : transport_forward(api->transport, to, method, buf, len, deadline, relay_done, f);
    free(buf);
    if (rc != 0) {
        free(f);
        slotd_error_set(err, SLOTD_ENO_LEADER, "controller: cannot reach node %llu: %s",
                        (unsigned long long)to, transport_strerror(rc));
        err->retry_after_ms = 200;
        return -1;
    }
    return 0;
}

/* Proposes cmd on the controller leader. A voter that is the leader proposes; a voter that is
 * not relays once to the leader it observes (no_forward set); a mirror relays to a voter, which
 * relays to its leader. Returns 0 when the call is taken care of, -1 with err. */
int node_admin_submit(struct node_api *api, struct rpc_call *call, const char *method,
                      const char *cmd, ProtobufCMessage *msg, protobuf_c_boolean *no_forward,
                      struct slotd_error *err)
{
    if (runtime_ctl_voter(api->rt)) {
        uint64_t leader = runtime_ctl_leader(api->rt);
        if (leader == api->node_id)
            return runtime_submit_propose(api->rt, 0, (const uint8_t *)cmd, strlen(cmd), call, err);
        if (leader == 0 || api->transport == NULL) {
            slotd_error_set(err, SLOTD_ENO_LEADER, "controller: no leader known");
            err->retry_after_ms = 200;
            return -1;
        }
        if (*no_forward) {
            slotd_error_set(err, SLOTD_ENOT_LEADER,
                            "controller: node %llu is not the leader; node %llu is",
                            (unsigned long long)api->node_id, (unsigned long long)leader);
            char address[128];
            slotd_error_leader_hint(
                err, leader, node_client_address(api, leader, address, sizeof(address)), 0, 0);
            return -1;
        }
        *no_forward = 1;
        return relay(api, call, method, leader, msg, err);
    }
    uint64_t voters[64];
    size_t n = runtime_ctl_voters(api->rt, voters, 64);
    if (n == 0 || api->transport == NULL || *no_forward) {
        slotd_error_set(err, SLOTD_EROUTE_NOT_READY,
                        "controller: node %llu is not a controller voter and knows none yet",
                        (unsigned long long)api->node_id);
        err->retry_after_ms = 200;
        return -1;
    }
    /* Spread relays over the voters; the voter relays on to its leader. */
    static _Atomic unsigned next;
    return relay(api, call, method, voters[next++ % n], msg, err);
}

static void finish(struct rpc_call *call, int rc, char *cmd, struct slotd_error *err)
{
    ctl_free(cmd);
    if (rc != 0)
        rpc_call_fail(call, err);
}

static int build_failed(int rc, struct slotd_error *err)
{
    if (rc == CTL_EINVALID)
        slotd_error_set(err, SLOTD_EINVALID_FIELD, "request: a value is out of range");
    else
        slotd_error_set(err, SLOTD_EINTERNAL, "out of memory");
    return -1;
}

static int node_field(uint64_t id, const char *field, struct slotd_error *err)
{
    if (id != 0 && id <= CTL_U64_JSON_MAX)
        return 0;
    slotd_error_field(err, field, CTL_U64_JSON_MAX, "%s: %llu not in 1..2^63-1", field,
                      (unsigned long long)id);
    return -1;
}

static int group_field(uint32_t id, struct slotd_error *err)
{
    if (id != 0 && id <= CTL_GROUPS_MAX)
        return 0;
    slotd_error_field(err, "group_id", CTL_GROUPS_MAX, "group_id: %u not in 1..%u", id,
                      CTL_GROUPS_MAX);
    return -1;
}

static void on_join_node(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__JoinNodeRequest *r = req;
    char *cmd = NULL;
    int rc = -1;
    size_t alen = strlen(r->address);
    if (node_field(r->node_id, "node_id", &err) != 0)
        ; /* err names the field */
    else if (alen == 0 || alen > CTL_ADDRESS_MAX || strchr(r->address, ':') == NULL)
        slotd_error_field(&err, "address", CTL_ADDRESS_MAX,
                          "address: \"host:port\" of 1..%u bytes required (the node's peer port)",
                          CTL_ADDRESS_MAX);
    else if (strlen(r->client_address) > CTL_ADDRESS_MAX ||
             (r->client_address[0] != '\0' && strchr(r->client_address, ':') == NULL))
        slotd_error_field(&err, "client_address", CTL_ADDRESS_MAX,
                          "client_address: empty or \"host:port\" of at most %u bytes",
                          CTL_ADDRESS_MAX);
    else if (r->weight > CTL_WEIGHT_MAX)
        slotd_error_field(&err, "weight", CTL_WEIGHT_MAX, "weight: %u not in 0..%u", r->weight,
                          CTL_WEIGHT_MAX);
    else if ((rc = ctl_cmd_join_node(r->node_id, r->address, r->client_address, r->weight,
                                     r->expected_revision, &cmd)) != CTL_OK)
        rc = build_failed(rc, &err);
    else
        rc = node_admin_submit(api, call, "/slotd.v1.Admin/JoinNode", cmd, &r->base, &r->no_forward,
                               &err);
    finish(call, rc, cmd, &err);
}

/* ActivateNode's, DemoteControllerVoter's and RemoveNode's common part: checks node_id, builds
 * the command with build (ctl_cmd_activate_node, ctl_cmd_controller_voter_demote or
 * ctl_cmd_node_remove) and submits it to method for call (msg and no_forward borrowed, as
 * node_admin_submit); the call is answered or failed either way. */
static void node_command_submit(struct node_api *api, struct rpc_call *call, const char *method,
                                int (*build)(uint64_t node, uint64_t expected_revision, char **out),
                                uint64_t node_id, uint64_t expected_revision, ProtobufCMessage *msg,
                                protobuf_c_boolean *no_forward)
{
    struct slotd_error err;
    char *cmd = NULL;
    int rc = node_field(node_id, "node_id", &err);
    if (rc == 0 && (rc = build(node_id, expected_revision, &cmd)) != CTL_OK)
        rc = build_failed(rc, &err);
    else if (rc == 0)
        rc = node_admin_submit(api, call, method, cmd, msg, no_forward, &err);
    finish(call, rc, cmd, &err);
}

static void on_activate_node(struct node_api *api, struct rpc_call *call, void *req)
{
    Slotd__V1__ActivateNodeRequest *r = req;
    node_command_submit(api, call, "/slotd.v1.Admin/ActivateNode", ctl_cmd_activate_node,
                        r->node_id, r->expected_revision, &r->base, &r->no_forward);
}

static void on_set_preferred_leader(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__SetPreferredLeaderRequest *r = req;
    char *cmd = NULL;
    int rc = -1;
    if (group_field(r->group_id, &err) != 0 || node_field(r->node_id, "node_id", &err) != 0)
        ; /* err names the field */
    else if ((rc = ctl_cmd_set_preferred_leader(r->group_id, r->node_id, r->expected_revision,
                                                &cmd)) != CTL_OK)
        rc = build_failed(rc, &err);
    else
        rc = node_admin_submit(api, call, "/slotd.v1.Admin/SetPreferredLeader", cmd, &r->base,
                               &r->no_forward, &err);
    finish(call, rc, cmd, &err);
}

static void on_report_health(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__ReportHealthRequest *r = req;
    char *cmd = NULL;
    int rc = -1;
    if (node_field(r->node_id, "node_id", &err) != 0)
        ; /* err names the field */
    else if (r->ttl_ms == 0 || r->ttl_ms > CTL_HEALTH_TTL_MS_MAX)
        slotd_error_field(&err, "ttl_ms", CTL_HEALTH_TTL_MS_MAX, "ttl_ms: %u not in 1..%u",
                          r->ttl_ms, CTL_HEALTH_TTL_MS_MAX);
    /* The time is the proposing leader's: a relayed request is stamped where it is proposed. */
    else if ((rc = ctl_cmd_health_report(r->node_id, node_wall_ms(), r->ttl_ms, 0, &cmd)) != CTL_OK)
        rc = build_failed(rc, &err);
    else
        rc = node_admin_submit(api, call, "/slotd.v1.Admin/ReportHealth", cmd, &r->base,
                               &r->no_forward, &err);
    finish(call, rc, cmd, &err);
}

/* ---- Tasks ---- */

static int create_task(struct node_api *api, struct rpc_call *call, const char *method,
                       const struct ctl_task_spec *spec, uint64_t expected_revision,
                       ProtobufCMessage *msg, protobuf_c_boolean *no_forward,
                       struct slotd_error *err)
{
    char *cmd = NULL;
    int rc = ctl_cmd_task_create(spec, node_wall_ms(), expected_revision, &cmd);
    if (rc != CTL_OK)
        rc = build_failed(rc, err);
    else
        rc = node_admin_submit(api, call, method, cmd, msg, no_forward, err);
    ctl_free(cmd);
    return rc;
}

static void on_move_replica(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__MoveReplicaRequest *r = req;
    int rc = group_field(r->group_id, &err);
    rc = rc ? rc : node_field(r->from_node, "from_node", &err);
    rc = rc ? rc : node_field(r->to_node, "to_node", &err);
    if (rc == 0) {
        struct ctl_task_spec spec = {.kind = CTL_TASK_REPLICA_MOVE,
                                     .group = r->group_id,
                                     .source = r->from_node,
                                     .target = r->to_node};
        rc = create_task(api, call, "/slotd.v1.Admin/MoveReplica", &spec, r->expected_revision,
                         &r->base, &r->no_forward, &err);
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
}

static void on_transfer_leader(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__TransferLeaderRequest *r = req;
    int rc = group_field(r->group_id, &err);
    rc = rc ? rc : node_field(r->to_node, "to_node", &err);
    if (rc == 0) {
        /* The source is the leader this node observes (0 = unknown). A relayed request is
         * re-read on the controller leader, which observes it too. */
        uint64_t source = 0;
        struct route_snapshot *rs = route_table_acquire(api->routes);
        const struct route_group *g = rs ? route_snapshot_group(rs, r->group_id) : NULL;
        if (g != NULL)
            source = g->leader;
        route_snapshot_release(rs);
        struct ctl_task_spec spec = {.kind = CTL_TASK_LEADER_TRANSFER,
                                     .group = r->group_id,
                                     .source = source,
                                     .target = r->to_node};
        rc = create_task(api, call, "/slotd.v1.Admin/TransferLeader", &spec, r->expected_revision,
                         &r->base, &r->no_forward, &err);
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
}

static void on_promote_voter(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__PromoteControllerVoterRequest *r = req;
    int rc = node_field(r->node_id, "node_id", &err);
    if (rc == 0) {
        struct ctl_task_spec spec = {.kind = CTL_TASK_CONTROLLER_VOTER_PROMOTION,
                                     .node = r->node_id};
        rc = create_task(api, call, "/slotd.v1.Admin/PromoteControllerVoter", &spec,
                         r->expected_revision, &r->base, &r->no_forward, &err);
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
}

static void on_drain_node(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__DrainNodeRequest *r = req;
    int rc = node_field(r->node_id, "node_id", &err);
    if (rc == 0) {
        struct ctl_task_spec spec = {.kind = CTL_TASK_NODE_DRAIN, .node = r->node_id};
        rc = create_task(api, call, "/slotd.v1.Admin/DrainNode", &spec, r->expected_revision,
                         &r->base, &r->no_forward, &err);
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
}

/* RetryTask's and AbortTask's common part: checks task_id, builds the command with build (one of
 * ctl_cmd_task_retry / ctl_cmd_task_abort) and submits it to method for call (msg and no_forward
 * borrowed, as node_admin_submit); the call is answered or failed either way. */
static void task_command_submit(struct node_api *api, struct rpc_call *call, const char *method,
                                int (*build)(uint64_t task, uint64_t now_ms,
                                             uint64_t expected_revision, char **out),
                                uint64_t task_id, uint64_t expected_revision, ProtobufCMessage *msg,
                                protobuf_c_boolean *no_forward)
{
    struct slotd_error err;
    char *cmd = NULL;
    int rc = node_field(task_id, "task_id", &err);
    if (rc == 0 && (rc = build(task_id, node_wall_ms(), expected_revision, &cmd)) != CTL_OK)
        rc = build_failed(rc, &err);
    else if (rc == 0)
        rc = node_admin_submit(api, call, method, cmd, msg, no_forward, &err);
    finish(call, rc, cmd, &err);
}

static void on_retry_task(struct node_api *api, struct rpc_call *call, void *req)
{
    Slotd__V1__RetryTaskRequest *r = req;
    task_command_submit(api, call, "/slotd.v1.Admin/RetryTask", ctl_cmd_task_retry, r->task_id,
                        r->expected_revision, &r->base, &r->no_forward);
}

static void on_abort_task(struct node_api *api, struct rpc_call *call, void *req)
{
    Slotd__V1__AbortTaskRequest *r = req;
    task_command_submit(api, call, "/slotd.v1.Admin/AbortTask", ctl_cmd_task_abort, r->task_id,
                        r->expected_revision, &r->base, &r->no_forward);
}

static void on_demote_voter(struct node_api *api, struct rpc_call *call, void *req)
{
    Slotd__V1__DemoteControllerVoterRequest *r = req;
    node_command_submit(api, call, "/slotd.v1.Admin/DemoteControllerVoter",
                        ctl_cmd_controller_voter_demote, r->node_id, r->expected_revision, &r->base,
                        &r->no_forward);
}

static void on_remove_node(struct node_api *api, struct rpc_call *call, void *req)
{
    Slotd__V1__RemoveNodeRequest *r = req;
    node_command_submit(api, call, "/slotd.v1.Admin/RemoveNode", ctl_cmd_node_remove, r->node_id,
                        r->expected_revision, &r->base, &r->no_forward);
}

/* Fills t (its hash_slots point into slots, CTL_HASH_SLOTS entries) from c. */
static void task_message(const struct ctl_task *c, uint64_t revision, Slotd__V1__Task *t,
                         uint32_t *slots)
{
    slotd__v1__task__init(t);
    t->task_id = c->id;
    t->kind = (char *)ctl_task_kind_name(c->kind);
    t->status = (char *)ctl_task_status_name(c->status);
    t->group_id = c->group;
    t->phase_index = c->phase_index;
    t->phase = (char *)ctl_task_phase_name(c->kind, c->phase_index);
    if (t->phase == NULL)
        t->phase = (char *)"";
    t->attempt = c->attempt;
    t->last_error = (char *)c->last_error;
    t->source_node = c->source;
    t->target_node = c->target;
    t->n_participants = c->n_participants;
    t->participants = (uint64_t *)c->participants;
    t->config_epoch = c->config_epoch;
    t->bytes_sent = c->progress.bytes_sent;
    t->bytes_total = c->progress.bytes_total;
    t->target_match = c->progress.target_match;
    t->commit = c->progress.commit;
    t->created_ms = c->created_ms;
    t->updated_ms = c->updated_ms;
    t->revision = revision;
    t->to_group = c->to_group;
    t->hash_slots = slots;
    for (uint32_t s = 0; s < CTL_HASH_SLOTS; s++)
        if ((c->hash_slots[s / 8] >> (s % 8)) & 1)
            slots[t->n_hash_slots++] = s;
}

/* slotd.v1.Metadata/TaskStatus: from the cluster state this node holds. task_id 0 lists the
 * tasks the state keeps (active_only: pending and running ones). */
void node_admin_task_status(struct node_api *api, struct rpc_call *call, uint64_t task_id,
                            bool active_only)
{
    struct slotd_error err;
    uint64_t revision = 0;
    Slotd__V1__TaskStatusResponse resp = SLOTD__V1__TASK_STATUS_RESPONSE__INIT;
    if (task_id != 0) {
        struct ctl_task t;
        if (runtime_ctl_task(api->rt, task_id, &t, &revision) != 0) {
            slotd_error_set(&err, SLOTD_ENOT_FOUND, "task %llu not found in the cluster state",
                            (unsigned long long)task_id);
            rpc_call_fail(call, &err);
            return;
        }
        uint32_t slots[CTL_HASH_SLOTS];
        Slotd__V1__Task task;
        task_message(&t, revision, &task, slots);
        resp.task = &task;
        resp.revision = revision;
        rpc_call_reply(call, &resp.base);
        return;
    }
    struct ctl_task *all = malloc(CTL_TASKS_MAX * sizeof(*all));
    Slotd__V1__Task *msgs = malloc(CTL_TASKS_MAX * sizeof(*msgs));
    Slotd__V1__Task **ptrs = malloc(CTL_TASKS_MAX * sizeof(*ptrs));
    uint32_t *slots = malloc((size_t)CTL_TASKS_MAX * CTL_HASH_SLOTS * sizeof(*slots));
    if (all == NULL || msgs == NULL || ptrs == NULL || slots == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        rpc_call_fail(call, &err);
    } else {
        size_t n = runtime_ctl_tasks(api->rt, active_only, all, CTL_TASKS_MAX, &revision);
        for (size_t i = 0; i < n; i++) {
            task_message(&all[i], revision, &msgs[i], slots + i * CTL_HASH_SLOTS);
            ptrs[i] = &msgs[i];
        }
        resp.n_tasks = n;
        resp.tasks = ptrs;
        resp.revision = revision;
        rpc_call_reply(call, &resp.base);
    }
    free(all);
    free(msgs);
    free(ptrs);
    free(slots);
}

/* The bitmap of a MigrateHashSlotsRequest's hash_slots: 1..256 distinct values in 0..255. */
static int hash_slots_field(const uint32_t *v, size_t n, uint8_t bitmap[32],
                            struct slotd_error *err)
{
    memset(bitmap, 0, 32);
    if (n == 0 || n > CTL_HASH_SLOTS) {
        slotd_error_field(err, "hash_slots", CTL_HASH_SLOTS,
                          "hash_slots: %zu values; give 1..%u distinct hash slots", n,
                          CTL_HASH_SLOTS);
        return -1;
    }
    for (size_t i = 0; i < n; i++) {
        if (v[i] >= CTL_HASH_SLOTS) {
            slotd_error_field(err, "hash_slots", CTL_HASH_SLOTS - 1,
                              "hash_slots[%zu]: %u not in 0..%u", i, v[i], CTL_HASH_SLOTS - 1);
            return -1;
        }
        if ((bitmap[v[i] / 8] >> (v[i] % 8)) & 1) {
            slotd_error_field(err, "hash_slots", CTL_HASH_SLOTS,
                              "hash_slots[%zu]: %u is given twice", i, v[i]);
            return -1;
        }
        bitmap[v[i] / 8] |= (uint8_t)(1u << (v[i] % 8));
    }
    return 0;
}

static void on_migrate_hash_slots(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__MigrateHashSlotsRequest *r = req;
    /* The switch is the cluster state's features.hash_slot_migration, checked by the controller
     * state machine where the task is created (whichever node relays it). */
    struct ctl_task_spec spec = {.kind = CTL_TASK_HASH_SLOT_MIGRATION};
    int rc = hash_slots_field(r->hash_slots, r->n_hash_slots, spec.hash_slots, &err);
    if (rc == 0 && (r->to_group == 0 || r->to_group > CTL_GROUPS_MAX)) {
        slotd_error_field(&err, "to_group", CTL_GROUPS_MAX, "to_group: %u not in 1..%u",
                          r->to_group, CTL_GROUPS_MAX);
        rc = -1;
    }
    if (rc == 0) {
        spec.to_group = r->to_group;
        rc = create_task(api, call, "/slotd.v1.Admin/MigrateHashSlots", &spec, r->expected_revision,
                         &r->base, &r->no_forward, &err);
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
}

static void on_set_feature(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__SetFeatureRequest *r = req;
    char *cmd = NULL;
    int rc = -1;
    struct ctl_features none = {0};
    if (ctl_feature_get(&none, r->name) == NULL)
        slotd_error_field(&err, "name", 0, "name: \"%.64s\" is not a feature (known: %s)", r->name,
                          CTL_FEATURE_NAMES_TEXT);
    else if ((rc = ctl_cmd_set_feature(r->name, r->enabled, r->expected_revision, &cmd)) != CTL_OK)
        rc = build_failed(rc, &err);
    else
        rc = node_admin_submit(api, call, "/slotd.v1.Admin/SetFeature", cmd, &r->base,
                               &r->no_forward, &err);
    finish(call, rc, cmd, &err);
}

/* The plan's values are checked here for a clear field error and again where the command is
 * applied (backup_plan_set in the controller state machine). */
static int backup_plan_fields(const Slotd__V1__SetBackupPlanRequest *r, struct slotd_error *err)
{
    const char *why;
    if (r->delete_) {
        if (r->interval_s == 0 && r->retention == 0 && r->destination[0] == '\0')
            return 0;
        slotd_error_field(err, "delete", 0,
                          "delete: interval_s, destination and retention must be unset");
    } else if (r->interval_s < CTL_BACKUP_INTERVAL_S_MIN ||
               r->interval_s > CTL_BACKUP_INTERVAL_S_MAX) {
        slotd_error_field(err, "interval_s", CTL_BACKUP_INTERVAL_S_MAX,
                          "interval_s: %llu not in %u..%u", (unsigned long long)r->interval_s,
                          CTL_BACKUP_INTERVAL_S_MIN, CTL_BACKUP_INTERVAL_S_MAX);
    } else if (r->retention < 1 || r->retention > CTL_BACKUP_RETENTION_MAX) {
        slotd_error_field(err, "retention", CTL_BACKUP_RETENTION_MAX, "retention: %u not in 1..%u",
                          r->retention, CTL_BACKUP_RETENTION_MAX);
    } else if ((why = ctl_backup_destination_check(r->destination)) != NULL) {
        slotd_error_field(err, "destination", CTL_BACKUP_DESTINATION_MAX,
                          "destination: \"%.64s\" %s", r->destination, why);
    } else {
        return 0;
    }
    return -1;
}

static void on_set_backup_plan(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__SetBackupPlanRequest *r = req;
    char *cmd = NULL;
    int rc = backup_plan_fields(r, &err);
    if (rc == 0) {
        rc = r->delete_ ? ctl_cmd_backup_plan_delete(r->expected_revision, &cmd)
                        : ctl_cmd_backup_plan_set(r->interval_s, r->destination, r->retention,
                                                  r->expected_revision, &cmd);
        rc = rc != CTL_OK ? build_failed(rc, &err)
                          : node_admin_submit(api, call, "/slotd.v1.Admin/SetBackupPlan", cmd,
                                              &r->base, &r->no_forward, &err);
    }
    finish(call, rc, cmd, &err);
}

/* SetBalance {enabled}: the feature balance_paused set to !enabled (checked like any
 * set_feature where it applies). */
static void on_set_balance(struct node_api *api, struct rpc_call *call, void *req)
{
    struct slotd_error err;
    Slotd__V1__SetBalanceRequest *r = req;
    char *cmd = NULL;
    int rc = ctl_cmd_set_feature("balance_paused", !r->enabled, r->expected_revision, &cmd);
    if (rc != CTL_OK)
        rc = build_failed(rc, &err);
    else
        rc = node_admin_submit(api, call, "/slotd.v1.Admin/SetBalance", cmd, &r->base,
                               &r->no_forward, &err);
    finish(call, rc, cmd, &err);
}

#define PEER_CONTROLLER_COMMAND "/slotd.internal.v1.Peer/ControllerCommand"
#define PEER_MIGRATION_PROPOSE "/slotd.internal.v1.Peer/MigrationPropose"

/* The controller commands nodes send on Peer/ControllerCommand (service/runtime's task executor,
 * drain and liveness report); every other command has its Admin method. */
static const char *const peer_ops[] = {"health_report", "node_address",     "node_zone",
                                       "task_advance",  "task_progress",    "task_fail",
                                       "task_create",   "backup_run_report"};

/* The first-hand peer ops that report on one node, which must be the sender: the JSON field
 * naming that node and the words of the refusal. */
static const struct own_report {
    const char *op, *field, *what, *whose;
} own_reports[] = {
    {"health_report", "node", "a health report for", "itself"},
    {"backup_run_report", "node", "a backup run report for", "its own run"},
    {"node_zone", "id", "the zone of", "its own"},
    {"node_address", "id", "the addresses of", "its own"},
};

static const struct own_report *own_report_find(const char *op)
{
    for (size_t i = 0; i < sizeof(own_reports) / sizeof(own_reports[0]); i++)
        if (strcmp(op, own_reports[i].op) == 0)
            return &own_reports[i];
    return NULL;
}

/* Whether the command cmd (NUL-terminated JSON) may come from caller (0: peers are not
 * authenticated) on Peer/ControllerCommand, relayed (no_forward) or first-hand: its op is one
 * nodes send; a relayed command comes from a controller voter (only voters relay to the leader);
 * a first-hand health report is the caller's own. Returns 0 or -1 with err naming the fact. */
static int peer_command_allowed(struct node_api *api, const char *cmd, uint64_t caller,
                                bool no_forward, struct slotd_error *err)
{
    json_t *j = json_loads(cmd, 0, NULL);
    const char *op = json_string_value(json_object_get(j, "op"));
    int rc = -1;
    bool known = false;
    const struct own_report *own;
    for (size_t i = 0; op != NULL && i < sizeof(peer_ops) / sizeof(peer_ops[0]); i++)
        known = known || strcmp(op, peer_ops[i]) == 0;
    if (j == NULL || op == NULL) {
        slotd_error_field(err, "command", 0, "command: a JSON object with a string \"op\"");
    } else if (!known) {
        slotd_error_set(err, SLOTD_EPRECONDITION,
                        "command: op \"%.64s\" is not one nodes send on Peer/ControllerCommand "
                        "(health_report, node_address, node_zone, task_advance, task_progress, "
                        "task_fail, task_create, backup_run_report)",
                        op);
    } else if (caller == 0) {
        rc = 0;
    } else if (no_forward) {
        uint64_t voters[64];
        size_t n = runtime_ctl_voters(api->rt, voters, 64);
        for (size_t i = 0; i < n && rc != 0; i++)
            rc = voters[i] == caller ? 0 : -1;
        if (rc != 0)
            slotd_error_set(err, SLOTD_EPRECONDITION,
                            "command: relayed (no_forward) by node %llu, which is not a "
                            "controller voter",
                            (unsigned long long)caller);
    } else if ((own = own_report_find(op)) != NULL &&
               json_integer_value(json_object_get(j, own->field)) != (json_int_t)caller) {
        slotd_error_set(err, SLOTD_EPRECONDITION,
                        "command: %s node %lld sent by node %llu (a node reports only %s)",
                        own->what, (long long)json_integer_value(json_object_get(j, own->field)),
                        (unsigned long long)caller, own->whose);
    } else {
        rc = 0;
    }
    json_decref(j);
    return rc;
}

/* slotd.internal.v1.Peer/ControllerCommand: a node's task executor or liveness report, from an
 * authenticated node when the cluster authenticates peers (peer_command_allowed). */
static void on_controller_command(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    uint64_t caller;
    if (node_peer_caller(api, call, PEER_CONTROLLER_COMMAND, req, len, true, &caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__Internal__V1__ControllerCommandRequest *r = node_request_decode(
        call, &slotd__internal__v1__controller_command_request__descriptor, req, len);
    if (r == NULL)
        return;
    char *cmd = NULL;
    int rc = -1;
    if (r->command.len == 0 || r->command.len > CTL_CMD_BYTES_MAX ||
        memchr(r->command.data, 0, r->command.len) != NULL) {
        slotd_error_field(&err, "command", CTL_CMD_BYTES_MAX,
                          "command: 1..%u bytes of JSON required", CTL_CMD_BYTES_MAX);
    } else if ((cmd = malloc(r->command.len + 1)) == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
    } else {
        memcpy(cmd, r->command.data, r->command.len);
        cmd[r->command.len] = '\0';
        rc = peer_command_allowed(api, cmd, caller, r->no_forward, &err);
        if (rc == 0)
            rc = node_admin_submit(api, call, PEER_CONTROLLER_COMMAND, cmd, &r->base,
                                   &r->no_forward, &err);
    }
    free(cmd);
    if (rc != 0)
        rpc_call_fail(call, &err);
    slotd__internal__v1__controller_command_request__free_unpacked(r, NULL);
}

/* slotd.internal.v1.Peer/MigrationPropose: a migration executor's entry for a group this node
 * should lead (service/runtime/migrate.c). Only migration commands pass; the FSM checks the
 * rest when the entry applies. */
static void on_migration_propose(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    uint64_t caller;
    if (node_peer_caller(api, call, PEER_MIGRATION_PROPOSE, req, len, true, &caller, &err) != 0) {
        rpc_call_fail(call, &err);
        return;
    }
    Slotd__Internal__V1__MigrationProposeRequest *r = node_request_decode(
        call, &slotd__internal__v1__migration_propose_request__descriptor, req, len);
    if (r == NULL)
        return;
    int rc = group_field(r->group_id, &err);
    Slotd__Internal__V1__LogCommand *c =
        rc ? NULL : slotd__internal__v1__log_command__unpack(NULL, r->entry.len, r->entry.data);
    if (rc == 0 && c == NULL) {
        slotd_error_field(&err, "entry", 0, "entry: not a slotd.internal.v1.LogCommand");
        rc = -1;
    }
    if (rc == 0) {
        switch (c->command_case) {
        case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_FENCE:
        case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ROWS:
        case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ACCEPT:
        case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_RELEASE:
        case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ABORT:
            break;
        default:
            slotd_error_field(&err, "entry", 0,
                              "entry: command %d is not a hash-slot migration command",
                              (int)c->command_case);
            rc = -1;
        }
    }
    if (c != NULL)
        slotd__internal__v1__log_command__free_unpacked(c, NULL);
    if (rc == 0)
        rc = runtime_submit_propose(api->rt, r->group_id, r->entry.data, r->entry.len, call, &err);
    if (rc != 0)
        rpc_call_fail(call, &err);
    slotd__internal__v1__migration_propose_request__free_unpacked(r, NULL);
}

int node_admin_gate(struct node_api *api, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct slotd_error err;
    struct ctl_need need = {.type = CTL_PERM_ADMIN, .access = CTL_ACCESS_WRITE};
    if (node_authz_require(api->authz, api->peer_mtls, call, rpc_call_method(call), req, len, &need,
                           &err) == 0)
        return 0;
    rpc_call_fail(call, &err);
    return -1;
}

/* Admin methods that need the admin permission (with --auth), served through on_gated: it checks
 * the permission, decodes the request as desc and calls cb with it (borrowed for the call). */
static const struct {
    const char *path;
    const ProtobufCMessageDescriptor *desc;
    void (*cb)(struct node_api *api, struct rpc_call *call, void *req);
} gated[] = {
    {"/slotd.v1.Admin/ControllerStatus", &slotd__v1__controller_status_request__descriptor,
     on_controller_status},
    {"/slotd.v1.Admin/JoinNode", &slotd__v1__join_node_request__descriptor, on_join_node},
    {"/slotd.v1.Admin/ActivateNode", &slotd__v1__activate_node_request__descriptor,
     on_activate_node},
    {"/slotd.v1.Admin/SetPreferredLeader", &slotd__v1__set_preferred_leader_request__descriptor,
     on_set_preferred_leader},
    {"/slotd.v1.Admin/ReportHealth", &slotd__v1__report_health_request__descriptor,
     on_report_health},
    {"/slotd.v1.Admin/MoveReplica", &slotd__v1__move_replica_request__descriptor, on_move_replica},
    {"/slotd.v1.Admin/TransferLeader", &slotd__v1__transfer_leader_request__descriptor,
     on_transfer_leader},
    {"/slotd.v1.Admin/PromoteControllerVoter",
     &slotd__v1__promote_controller_voter_request__descriptor, on_promote_voter},
    {"/slotd.v1.Admin/DrainNode", &slotd__v1__drain_node_request__descriptor, on_drain_node},
    {"/slotd.v1.Admin/RetryTask", &slotd__v1__retry_task_request__descriptor, on_retry_task},
    {"/slotd.v1.Admin/AbortTask", &slotd__v1__abort_task_request__descriptor, on_abort_task},
    {"/slotd.v1.Admin/RemoveNode", &slotd__v1__remove_node_request__descriptor, on_remove_node},
    {"/slotd.v1.Admin/DemoteControllerVoter",
     &slotd__v1__demote_controller_voter_request__descriptor, on_demote_voter},
    {"/slotd.v1.Admin/MigrateHashSlots", &slotd__v1__migrate_hash_slots_request__descriptor,
     on_migrate_hash_slots},
    {"/slotd.v1.Admin/SetFeature", &slotd__v1__set_feature_request__descriptor, on_set_feature},
    {"/slotd.v1.Admin/SetBackupPlan", &slotd__v1__set_backup_plan_request__descriptor,
     on_set_backup_plan},
    {"/slotd.v1.Admin/SetBalance", &slotd__v1__set_balance_request__descriptor, on_set_balance},
};

static void on_gated(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    const char *m = rpc_call_method(call);
    for (size_t i = 0; i < sizeof(gated) / sizeof(gated[0]); i++) {
        if (strcmp(gated[i].path, m) != 0)
            continue;
        if (node_admin_gate(ctx, call, req, len) != 0)
            return;
        ProtobufCMessage *r = node_request_decode(call, gated[i].desc, req, len);
        if (r == NULL)
            return;
        gated[i].cb(ctx, call, r);
        protobuf_c_message_free_unpacked(r, NULL);
        return;
    }
    struct slotd_error err;
    slotd_error_set(&err, SLOTD_EINTERNAL, "%s: no handler", m);
    rpc_call_fail(call, &err);
}

int node_admin_register(struct node_api *api, struct rpc_server *client, struct rpc_server *peer)
{
    static const struct {
        const char *path;
        rpc_unary_cb cb;
    } methods[] = {
        {"/slotd.v1.Admin/ClusterState", on_cluster_state},
    };
    int rc = rpc_server_add_service(client, &slotd__v1__admin__descriptor);
    for (size_t i = 0; rc == 0 && i < sizeof(methods) / sizeof(methods[0]); i++)
        rc = rpc_server_add_unary(client, methods[i].path, methods[i].cb, api);
    for (size_t i = 0; rc == 0 && i < sizeof(gated) / sizeof(gated[0]); i++)
        rc = rpc_server_add_unary(client, gated[i].path, on_gated, api);
    if (rc == 0)
        rc = rpc_server_add_unary(peer, PEER_CONTROLLER_COMMAND, on_controller_command, api);
    if (rc == 0)
        rc = rpc_server_add_unary(peer, PEER_MIGRATION_PROPOSE, on_migration_propose, api);
    return rc == 0 ? node_admin_auth_register(api, client) : rc;
}
