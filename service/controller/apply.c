/* apply.c - ctl_apply(): parse one controller command and apply it to the state, all or nothing. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

int ctl__outcome(struct ctl_result *r, enum ctl_outcome o, const char *fmt, ...)
{
    va_list ap;
    r->outcome = o;
    va_start(ap, fmt);
    vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
    va_end(ap);
    return CTL_OK;
}

bool ctl__expected_revision_ok(const struct ctl_state *s, const json_t *cmd, bool required,
                               struct ctl_result *r)
{
    uint64_t v;
    if (json_object_get(cmd, "expected_revision") == NULL) {
        if (required) {
            CTL__REJECT(
                r, "expected_revision: required by this command (the current revision is %llu)",
                CTL__ULL(s->revision));
        }
        return !required;
    }
    if (ctl__json_u64(cmd, "expected_revision", "", 0, CTL_U64_JSON_MAX, &v, CTL__RS(r)) !=
        CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return false;
    }
    if (v != s->revision) {
        CTL__REJECT(r, "stale expected_revision: have %llu, want %llu", CTL__ULL(s->revision),
                    CTL__ULL(v));
        return false;
    }
    return true;
}

static struct ctl_node *node_mut(struct ctl_state *s, uint64_t id)
{
    return (struct ctl_node *)ctl_state_node(s, id);
}

static const struct ctl_node *node_by_address(const struct ctl_state *s, const char *address)
{
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (strcmp(s->nodes[i].address, address) == 0) {
            return &s->nodes[i];
        }
    }
    return NULL;
}

/* The node other than except whose client address is address ("" matches none). */
static const struct ctl_node *node_by_client_address(const struct ctl_state *s, const char *address,
                                                     uint64_t except)
{
    for (uint32_t i = 0; i < s->n_nodes && address[0] != '\0'; i++) {
        if (s->nodes[i].id != except && strcmp(s->nodes[i].client_address, address) == 0) {
            return &s->nodes[i];
        }
    }
    return NULL;
}

/* cmd's host:port field key (at most CTL_ADDRESS_MAX bytes; "" allowed when may_be_empty) into
 * out. Returns true; false with r rejected on a bad value. */
static bool read_address(const json_t *cmd, const char *path, const char *key, bool may_be_empty,
                         char *out, struct ctl_result *r)
{
    if (ctl__json_str(cmd, key, path, CTL_ADDRESS_MAX, out, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return false;
    }
    if ((out[0] != '\0' || !may_be_empty) && !ctl__address_ok(out)) {
        char fp[CTL__PATH_MAX];
        ctl__json_path(fp, path, key);
        CTL__REJECT(r, "%s: \"%s\" is not host:port (port 1..65535, at most %u bytes)", fp, out,
                    CTL_ADDRESS_MAX);
        return false;
    }
    return true;
}

/* Inserts n keeping nodes sorted by id; the caller checked the id is new and there is room. */
static void node_insert(struct ctl_state *s, const struct ctl_node *n)
{
    uint32_t at = 0;
    while (at < s->n_nodes && s->nodes[at].id < n->id) {
        at++;
    }
    memmove(&s->nodes[at + 1], &s->nodes[at], (s->n_nodes - at) * sizeof(s->nodes[0]));
    s->nodes[at] = *n;
    s->n_nodes++;
}

/* id, address and weight? of a node in a bootstrap or join_node command, range-checked. */
static int read_new_node(const json_t *o, const char *path, struct ctl_node *n,
                         struct ctl_result *r)
{
    memset(n, 0, sizeof(*n));
    CTL__READ(r, ctl__json_u64(o, "id", path, 1, CTL_U64_JSON_MAX, &n->id, CTL__RS(r)));
    if (!read_address(o, path, "address", false, n->address, r) ||
        (json_object_get(o, "client_address") != NULL &&
         !read_address(o, path, "client_address", true, n->client_address, r))) {
        return CTL_OK;
    }
    n->weight = CTL_WEIGHT_DEFAULT;
    if (json_object_get(o, "weight") != NULL) {
        CTL__READ(r, ctl__json_u32(o, "weight", path, CTL_WEIGHT_MIN, CTL_WEIGHT_MAX, &n->weight,
                                   CTL__RS(r)));
    }
    n->status = CTL_STATUS_ALIVE;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* Makes the placement once enough data nodes are active (placement failure rejects). */
static int place_if_ready(struct ctl_state *s, struct ctl_result *r)
{
    if (s->n_groups == 0 && ctl__active_data_nodes(s) >= s->config.bootstrap_expect) {
        int rc = ctl__state_place(s);
        if (rc != CTL_OK) {
            return CTL__REJECT(r, "placement: %s", ctl_strerror(rc));
        }
    }
    return CTL_OK;
}

static int read_bootstrap_nodes(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    static const char *const req[] = {"id", "address"}, *const opt[] = {"weight", "client_address"};
    json_t *arr;
    CTL__READ(r, ctl__json_array(cmd, "nodes", "", CTL_NODES_MAX, &arr, CTL__RS(r)));
    if (json_array_size(arr) == 0) {
        return CTL__REJECT(r, "nodes: empty, a cluster needs 1..%u nodes", CTL_NODES_MAX);
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        char path[CTL__PATH_MAX];
        struct ctl_node n;
        snprintf(path, sizeof(path), "nodes[%zu]", i);
        const json_t *o = json_array_get(arr, i);
        CTL__READ(r, ctl__json_fields(o, path, req, CTL__N(req), opt, CTL__N(opt), CTL__RS(r)));
        if (read_new_node(o, path, &n, r) != CTL_OK || r->outcome == CTL_OUTCOME_REJECTED) {
            return CTL_OK;
        }
        if (ctl_state_node(s, n.id) != NULL) {
            return CTL__REJECT(r, "%s.id: %llu is listed twice", path, CTL__ULL(n.id));
        }
        if (node_by_address(s, n.address) != NULL) {
            return CTL__REJECT(r, "%s.address: %s is listed twice", path, n.address);
        }
        if (node_by_client_address(s, n.client_address, n.id) != NULL) {
            return CTL__REJECT(r, "%s.client_address: %s is listed twice", path, n.client_address);
        }
        n.roles = CTL_ROLE_CONTROLLER_VOTER | CTL_ROLE_DATA;
        n.join_state = CTL_JOIN_ACTIVE;
        node_insert(s, &n);
    }
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int op_bootstrap(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    static const char *const cfg_fields[] = {"slot_groups", "replicas", "bootstrap_expect"};
    if (s->revision != 0) {
        return CTL__REJECT(r, "cluster already bootstrapped (revision %llu)",
                           CTL__ULL(s->revision));
    }
    s->next_task_id = 1;
    CTL__READ(r,
              ctl__json_str(cmd, "cluster_id", "", CTL_CLUSTER_ID_MAX, s->cluster_id, CTL__RS(r)));
    if (!ctl__cluster_id_ok(s->cluster_id)) {
        return CTL__REJECT(r, "cluster_id: \"%s\" is not 1..%u characters of [A-Za-z0-9._-]",
                           s->cluster_id, CTL_CLUSTER_ID_MAX);
    }
    const json_t *cfg = json_object_get(cmd, "config");
    struct ctl_config *c = &s->config;
    CTL__READ(r,
              ctl__json_fields(cfg, "config", cfg_fields, CTL__N(cfg_fields), NULL, 0, CTL__RS(r)));
    CTL__READ(r, ctl__json_u32(cfg, "slot_groups", "config", 1, CTL_GROUPS_MAX, &c->slot_groups,
                               CTL__RS(r)));
    CTL__READ(
        r, ctl__json_u32(cfg, "replicas", "config", 1, CTL_REPLICAS_MAX, &c->replicas, CTL__RS(r)));
    CTL__READ(r, ctl__json_u32(cfg, "bootstrap_expect", "config", 1, CTL_NODES_MAX,
                               &c->bootstrap_expect, CTL__RS(r)));
    c->hash_slots = CTL_HASH_SLOTS;
    if (json_object_get(cmd, "features") != NULL) {
        CTL__READ(r, ctl__features_read(json_object_get(cmd, "features"), "features", &s->features,
                                        CTL__RS(r)));
    }
    if (read_bootstrap_nodes(s, cmd, r) != CTL_OK || r->outcome == CTL_OUTCOME_REJECTED) {
        return CTL_OK;
    }
    r->outcome = CTL_OUTCOME_CHANGED;
    return place_if_ready(s, r);
}

static int op_join_node(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_node n;
    if (read_new_node(cmd, "", &n, r) != CTL_OK || r->outcome == CTL_OUTCOME_REJECTED) {
        return CTL_OK;
    }
    const struct ctl_node *same_id = ctl_state_node(s, n.id);
    if (same_id != NULL && strcmp(same_id->address, n.address) == 0) {
        return CTL__NOOP(r, "node %llu already joined with address %s", CTL__ULL(n.id), n.address);
    }
    if (same_id != NULL) {
        return CTL__REJECT(r, "node %llu already joined with another address (%s)", CTL__ULL(n.id),
                           same_id->address);
    }
    const struct ctl_node *same_address = node_by_address(s, n.address);
    if (same_address != NULL) {
        return CTL__REJECT(r, "address %s is already used by node %llu", n.address,
                           CTL__ULL(same_address->id));
    }
    same_address = node_by_client_address(s, n.client_address, n.id);
    if (same_address != NULL) {
        return CTL__REJECT(r, "client_address %s is already used by node %llu", n.client_address,
                           CTL__ULL(same_address->id));
    }
    if (s->n_nodes >= CTL_NODES_MAX) {
        return CTL__REJECT(r, "nodes: already %u, the limit (CTL_NODES_MAX)", CTL_NODES_MAX);
    }
    n.roles = CTL_ROLE_DATA;
    n.join_state = CTL_JOIN_JOINING;
    node_insert(s, &n);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

struct ctl_node *ctl__existing_node(struct ctl_state *s, const json_t *cmd, const char *key,
                                    struct ctl_result *r)
{
    uint64_t id;
    if (ctl__json_u64(cmd, key, "", 1, CTL_U64_JSON_MAX, &id, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return NULL;
    }
    struct ctl_node *n = node_mut(s, id);
    if (n == NULL) {
        CTL__REJECT(r, "%s: node %llu is unknown", key, CTL__ULL(id));
    } else if (n->join_state == CTL_JOIN_REMOVED) {
        CTL__REJECT(r, "%s: node %llu is removed", key, CTL__ULL(id));
        n = NULL;
    }
    return n;
}

static int op_activate_node(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_node *n = ctl__existing_node(s, cmd, "id", r);
    if (n == NULL) {
        return CTL_OK;
    }
    if (n->join_state == CTL_JOIN_ACTIVE) {
        return CTL__NOOP(r, "node %llu is already active", CTL__ULL(n->id));
    }
    if (n->join_state != CTL_JOIN_JOINING) {
        return CTL__REJECT(r, "node %llu is %s, only a joining node can be activated",
                           CTL__ULL(n->id), ctl_join_state_name(n->join_state));
    }
    n->join_state = CTL_JOIN_ACTIVE;
    r->outcome = CTL_OUTCOME_CHANGED;
    return place_if_ready(s, r);
}

static int op_set_preferred_leader(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    uint32_t gid;
    uint64_t node;
    CTL__READ(r, ctl__json_u32(cmd, "group", "", 1, UINT32_MAX, &gid, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "node", "", 1, CTL_U64_JSON_MAX, &node, CTL__RS(r)));
    if (s->n_groups == 0) {
        return CTL__REJECT(r, "group %u: no placement yet", gid);
    }
    struct ctl_group *g = (struct ctl_group *)ctl_state_group(s, gid);
    if (g == NULL) {
        return CTL__REJECT(r, "group %u does not exist (groups are 1..%u)", gid, s->n_groups);
    }
    bool member = false;
    for (uint32_t i = 0; i < g->n_peers; i++) {
        member |= g->desired_peers[i] == node;
    }
    if (!member) {
        return CTL__REJECT(r, "node %llu is not a desired peer of group %u", CTL__ULL(node), gid);
    }
    if (g->preferred_leader == node) {
        return CTL__NOOP(r, "node %llu is already the preferred leader of group %u", CTL__ULL(node),
                         gid);
    }
    g->preferred_leader = node;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int op_set_node_status(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    int status;
    struct ctl_node *n = ctl__existing_node(s, cmd, "id", r);
    if (n == NULL) {
        return CTL_OK;
    }
    CTL__READ(r, ctl__json_enum(cmd, "status", "", ctl__node_status_names, ctl__n_node_status_names,
                                &status, CTL__RS(r)));
    if (n->status == (enum ctl_node_status)status) {
        return CTL__NOOP(r, "node %llu is already %s", CTL__ULL(n->id),
                         ctl__node_status_names[status]);
    }
    n->status = (enum ctl_node_status)status;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* A node's own report of its peer and client addresses (it sends this when the state differs
 * from the ports it serves; Peer/ControllerCommand takes it only about the calling node). */
static int op_node_address(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char address[CTL_ADDRESS_MAX + 1], client[CTL_ADDRESS_MAX + 1];
    struct ctl_node *n = ctl__existing_node(s, cmd, "id", r);
    if (n == NULL) {
        return CTL_OK;
    }
    if (!read_address(cmd, "", "address", false, address, r) ||
        !read_address(cmd, "", "client_address", false, client, r)) {
        return CTL_OK;
    }
    if (strcmp(n->address, address) == 0 && strcmp(n->client_address, client) == 0) {
        return CTL__NOOP(r, "node %llu already has address %s and client_address %s",
                         CTL__ULL(n->id), address, client);
    }
    const struct ctl_node *other = node_by_address(s, address);
    if (other != NULL && other->id != n->id) {
        return CTL__REJECT(r, "address %s is already used by node %llu", address,
                           CTL__ULL(other->id));
    }
    other = node_by_client_address(s, client, n->id);
    if (other != NULL) {
        return CTL__REJECT(r, "client_address %s is already used by node %llu", client,
                           CTL__ULL(other->id));
    }
    snprintf(n->address, sizeof(n->address), "%s", address);
    snprintf(n->client_address, sizeof(n->client_address), "%s", client);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

bool ctl_zone_valid(const char *zone)
{
    size_t n = strnlen(zone, CTL_ZONE_MAX + 1);
    if (n > CTL_ZONE_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = zone[i];
        if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-')) {
            return false;
        }
    }
    return true;
}

/* A node's own report of its zone (it sends this when the state differs from its --zone;
 * Peer/ControllerCommand takes it only about the calling node). A removed node keeps none. */
static int op_node_zone(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char zone[CTL_ZONE_MAX + 1];
    struct ctl_node *n = ctl__existing_node(s, cmd, "id", r);
    if (n == NULL) {
        return CTL_OK;
    }
    CTL__READ(r, ctl__json_str(cmd, "zone", "", CTL_ZONE_MAX, zone, CTL__RS(r)));
    if (!ctl_zone_valid(zone)) {
        return CTL__REJECT(r, "zone: \"%s\" is not 0..%u bytes of [a-z0-9._-]", zone, CTL_ZONE_MAX);
    }
    if (n->join_state == CTL_JOIN_REMOVED) {
        return CTL__REJECT(r, "node %llu is removed", CTL__ULL(n->id));
    }
    if (strcmp(n->zone, zone) == 0) {
        return CTL__NOOP(r, "node %llu is already in zone \"%s\"", CTL__ULL(n->id), zone);
    }
    snprintf(n->zone, sizeof(n->zone), "%s", zone);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int op_health_report(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_health h;
    const struct ctl_node *n = ctl__existing_node(s, cmd, "node", r);
    if (n == NULL) {
        return CTL_OK;
    }
    h.node = n->id;
    CTL__READ(r,
              ctl__json_u64(cmd, "now_ms", "", 0, CTL_U64_JSON_MAX, &h.reported_at_ms, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(cmd, "ttl_ms", "", 1, CTL_HEALTH_TTL_MS_MAX, &h.ttl_ms, CTL__RS(r)));
    uint32_t at = 0;
    while (at < s->n_health && s->health[at].node < h.node) {
        at++;
    }
    if (at < s->n_health && s->health[at].node == h.node) {
        if (memcmp(&s->health[at], &h, sizeof(h)) == 0) {
            return CTL__NOOP(r, "node %llu: same health report", CTL__ULL(h.node));
        }
        if (h.reported_at_ms < s->health[at].reported_at_ms) {
            return CTL__NOOP(r, "node %llu: report at %llu is older than the stored one at %llu",
                             CTL__ULL(h.node), CTL__ULL(h.reported_at_ms),
                             CTL__ULL(s->health[at].reported_at_ms));
        }
    } else {
        memmove(&s->health[at + 1], &s->health[at], (s->n_health - at) * sizeof(h));
        s->n_health++;
    }
    s->health[at] = h;
    r->outcome = CTL_OUTCOME_UPDATED;
    return CTL_OK;
}

static int op_set_weight(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    uint32_t weight;
    struct ctl_node *n = ctl__existing_node(s, cmd, "id", r);
    if (n == NULL) {
        return CTL_OK;
    }
    CTL__READ(
        r, ctl__json_u32(cmd, "weight", "", CTL_WEIGHT_MIN, CTL_WEIGHT_MAX, &weight, CTL__RS(r)));
    if (n->weight == weight) {
        return CTL__NOOP(r, "node %llu already has weight %u", CTL__ULL(n->id), weight);
    }
    n->weight = weight;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* set_feature {name, enabled}: one cluster-wide switch (struct ctl_features). */
static int op_set_feature(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char name[32];
    bool enabled;
    CTL__READ(r, ctl__json_str(cmd, "name", "", sizeof(name) - 1, name, CTL__RS(r)));
    CTL__READ(r, ctl__json_bool(cmd, "enabled", "", &enabled, CTL__RS(r)));
    bool *on = ctl_feature_get(&s->features, name);
    if (on == NULL) {
        return CTL__REJECT(r, "name: \"%s\" is not a feature (known: %s)", name,
                           CTL_FEATURE_NAMES_TEXT);
    }
    if (*on == enabled) {
        return CTL__NOOP(r, "feature %s is already %s", name, enabled ? "on" : "off");
    }
    *on = enabled;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

typedef int (*op_fn)(struct ctl_state *s, const json_t *cmd, struct ctl_result *r);

#define OP_FIELDS_MAX 8

struct op_def {
    const char *name;
    const char *fields[OP_FIELDS_MAX];   /* required besides "op"; NULL-terminated */
    const char *optional[OP_FIELDS_MAX]; /* optional besides expected_revision, now_ms */
    bool fence_first; /* the handler checks expected_revision itself, after its fence */
    op_fn fn;
};

static const struct op_def ops[] = {
    {"bootstrap", {"cluster_id", "config", "nodes"}, {"features"}, false, op_bootstrap},
    {"join_node", {"id", "address"}, {"weight", "client_address"}, false, op_join_node},
    {"node_address", {"id", "address", "client_address"}, {NULL}, false, op_node_address},
    {"node_zone", {"id", "zone"}, {NULL}, false, op_node_zone},
    {"activate_node", {"id"}, {NULL}, false, op_activate_node},
    {"set_preferred_leader", {"group", "node"}, {NULL}, false, op_set_preferred_leader},
    {"set_node_status", {"id", "status"}, {NULL}, false, op_set_node_status},
    {"health_report", {"node", "now_ms", "ttl_ms"}, {NULL}, false, op_health_report},
    {"set_weight", {"id", "weight"}, {NULL}, false, op_set_weight},
    {"set_feature", {"name", "enabled"}, {NULL}, false, op_set_feature},
    {"task_create",
     {"kind", "now_ms"},
     {"group", "source", "target", "node", "hash_slots", "to_group"},
     false,
     ctl__op_task_create},
    {"task_advance",
     {"task", "group", "config_epoch", "attempt", "phase", "proof", "now_ms"},
     {"replicas_on_node", "leading", "tasks_on_node", "groups_observed"},
     true,
     ctl__op_task_advance},
    {"task_progress",
     {"task", "attempt", "phase", "progress", "now_ms"},
     {NULL},
     true,
     ctl__op_task_progress},
    {"task_fail", {"task", "attempt", "phase", "error", "now_ms"}, {NULL}, true, ctl__op_task_fail},
    {"task_retry", {"task", "now_ms"}, {NULL}, false, ctl__op_task_retry},
    {"task_abort", {"task", "now_ms"}, {NULL}, true, ctl__op_task_abort},
    {"node_remove", {"id"}, {NULL}, false, ctl__op_node_remove},
    {"controller_voter_demote", {"node"}, {NULL}, false, ctl__op_controller_voter_demote},
    {"auth_init", {"token_key", "password_hash"}, {NULL}, false, ctl__op_auth_init},
    {"user_add", {"name", "password_hash"}, {NULL}, false, ctl__op_user_add},
    {"user_delete", {"name"}, {NULL}, false, ctl__op_user_delete},
    {"user_passwd", {"name", "password_hash"}, {NULL}, false, ctl__op_user_passwd},
    {"user_grant_role", {"name", "role"}, {NULL}, false, ctl__op_user_grant_role},
    {"user_revoke_role", {"name", "role"}, {NULL}, false, ctl__op_user_revoke_role},
    {"role_add", {"name"}, {NULL}, false, ctl__op_role_add},
    {"role_delete", {"name"}, {NULL}, false, ctl__op_role_delete},
    {"role_grant", {"role", "type", "access", "value"}, {NULL}, false, ctl__op_role_grant},
    {"role_revoke", {"role", "type", "access", "value"}, {NULL}, false, ctl__op_role_revoke},
    {"backup_plan_set",
     {"interval_s", "destination", "retention"},
     {NULL},
     false,
     ctl__op_backup_plan_set},
    {"backup_plan_delete", {NULL}, {NULL}, false, ctl__op_backup_plan_delete},
    {"backup_run_start", {"run", "node", "now_ms"}, {NULL}, false, ctl__op_backup_run_start},
    {"backup_run_report",
     {"run", "node", "ok", "bytes", "now_ms"},
     {"error"},
     false,
     ctl__op_backup_run_report},
};

/* Checks the op's fields and expected_revision, then runs it on s. */
static int run_op(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    const char *req[OP_FIELDS_MAX + 1] = {"op"};
    const char *opt[OP_FIELDS_MAX + 2] = {"expected_revision", "now_ms"};
    size_t n_req = 1, n_opt = 2;
    const json_t *op = json_object_get(cmd, "op");
    if (!json_is_string(op)) {
        return CTL__REJECT(r, "op: expected a string");
    }
    const struct op_def *def = NULL;
    for (size_t i = 0; i < CTL__N(ops); i++) {
        def = strcmp(ops[i].name, json_string_value(op)) == 0 ? &ops[i] : def;
    }
    if (def == NULL) {
        return CTL__REJECT(r, "op: \"%.64s\" is not a command", json_string_value(op));
    }
    for (size_t i = 0; def->fields[i] != NULL; i++) {
        req[n_req++] = def->fields[i];
    }
    for (size_t i = 0; def->optional[i] != NULL; i++) {
        opt[n_opt++] = def->optional[i];
    }
    CTL__READ(r, ctl__json_fields(cmd, "", req, n_req, opt, n_opt, CTL__RS(r)));
    uint64_t v;
    if (json_object_get(cmd, "now_ms") != NULL) {
        CTL__READ(r, ctl__json_u64(cmd, "now_ms", "", 0, CTL_U64_JSON_MAX, &v, CTL__RS(r)));
    }
    if (!def->fence_first && !ctl__expected_revision_ok(s, cmd, false, r)) {
        return CTL_OK;
    }
    if (def->fn != op_bootstrap && s->revision == 0) {
        return CTL__REJECT(r, "cluster not bootstrapped");
    }
    return def->fn(s, cmd, r);
}

/* Parses cmd and applies it to s (a scratch copy). CTL_ENOMEM only on allocation failure. */
static int run_command(struct ctl_state *s, const void *cmd, size_t cmd_len, struct ctl_result *r)
{
    if (cmd_len == 0) {
        return CTL__REJECT(r, "command: empty");
    }
    if (cmd_len > CTL_CMD_BYTES_MAX) {
        return CTL__REJECT(r, "command: %zu bytes, the limit is %u", cmd_len, CTL_CMD_BYTES_MAX);
    }
    json_error_t jerr;
    json_t *root = json_loadb(cmd, cmd_len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        if (json_error_code(&jerr) == json_error_out_of_memory) {
            return CTL_ENOMEM;
        }
        return CTL__REJECT(r, "command: not JSON: line %d column %d: %s", jerr.line, jerr.column,
                           jerr.text);
    }
    int rc;
    if (!json_is_object(root)) {
        rc = CTL__REJECT(r, "command: expected a JSON object");
    } else {
        rc = run_op(s, root, r);
    }
    json_decref(root);
    return rc;
}

int ctl_apply(struct ctl_state *state, uint64_t raft_index, const void *cmd, size_t cmd_len,
              struct ctl_result *result)
{
    assert(state != NULL && result != NULL && (cmd != NULL || cmd_len == 0));
    if (raft_index <= state->applied_raft_index || raft_index > CTL_U64_JSON_MAX) {
        return CTL_EORDER;
    }
    struct ctl_state *next = malloc(sizeof(*next));
    if (next == NULL) {
        return CTL_ENOMEM;
    }
    memcpy(next, state, sizeof(*next));
    memset(result, 0, sizeof(*result));
    result->outcome = CTL_OUTCOME_REJECTED;
    int rc = run_command(next, cmd, cmd_len, result);
    if (rc != CTL_OK) {
        goto err_after_next;
    }
    if (result->outcome == CTL_OUTCOME_CHANGED) {
        next->revision++;
    }
    if (result->outcome == CTL_OUTCOME_CHANGED || result->outcome == CTL_OUTCOME_UPDATED) {
        char why[CTL_REASON_MAX - 32];
        if (ctl_state_validate(next, why, sizeof(why)) != CTL_OK) {
            ctl__outcome(result, CTL_OUTCOME_REJECTED, "the result would break a rule: %s", why);
            result->task_id = 0;
        } else {
            memcpy(state, next, sizeof(*state));
            result->reason[0] = '\0';
        }
    }
    state->applied_raft_index = raft_index;
    free(next);
    return CTL_OK;

err_after_next:
    free(next);
    return rc;
}
