/* builders.c - ctl_cmd_*(): canonical JSON for each controller command. */
#include <string.h>

#include "internal.h"

int ctl__cmd_finish(json_t *cmd, int bad, uint64_t expected_revision, char **out)
{
    int rc = CTL_ENOMEM;
    if (cmd == NULL) {
        return rc;
    }
    if (expected_revision > CTL_U64_JSON_MAX) {
        rc = CTL_EINVALID;
        goto err_after_cmd;
    }
    if (expected_revision != 0) {
        bad |= ctl__json_set(cmd, "expected_revision", ctl__json_u64_new(expected_revision));
    }
    if (bad) {
        goto err_after_cmd;
    }
    *out = ctl__json_dump(cmd, NULL);
    if (*out == NULL) {
        goto err_after_cmd;
    }
    json_decref(cmd);
    return CTL_OK;

err_after_cmd:
    json_decref(cmd);
    return rc;
}

static bool string_ok(const char *s)
{
    return s != NULL && ctl__utf8_ok(s);
}

json_t *ctl__cmd_op_new(const char *op)
{
    json_t *cmd = json_object();
    if (cmd != NULL && ctl__json_set(cmd, "op", json_string(op)) != 0) {
        json_decref(cmd);
        return NULL;
    }
    return cmd;
}

static json_t *node_obj(uint64_t id, const char *address, const char *client_address,
                        uint32_t weight)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "id", json_integer((json_int_t)id));
    bad |= ctl__json_set(o, "address", json_string(address));
    if (client_address != NULL && client_address[0] != '\0') {
        bad |= ctl__json_set(o, "client_address", json_string(client_address));
    }
    if (weight != 0) {
        bad |= ctl__json_set(o, "weight", json_integer(weight));
    }
    return ctl__json_done(o, bad);
}

int ctl_cmd_bootstrap(const char *cluster_id, const struct ctl_config *config,
                      const struct ctl_cmd_node *nodes, size_t n_nodes, uint64_t expected_revision,
                      char **out)
{
    return ctl_cmd_bootstrap_features(cluster_id, config, NULL, nodes, n_nodes, expected_revision,
                                      out);
}

int ctl_cmd_bootstrap_features(const char *cluster_id, const struct ctl_config *config,
                               const struct ctl_features *features,
                               const struct ctl_cmd_node *nodes, size_t n_nodes,
                               uint64_t expected_revision, char **out)
{
    if (!string_ok(cluster_id) || config == NULL || (nodes == NULL && n_nodes > 0)) {
        return CTL_EINVALID;
    }
    for (size_t i = 0; i < n_nodes; i++) {
        if (!string_ok(nodes[i].address) || nodes[i].id > CTL_U64_JSON_MAX ||
            (nodes[i].client_address != NULL && !string_ok(nodes[i].client_address))) {
            return CTL_EINVALID;
        }
    }
    json_t *cmd = ctl__cmd_op_new("bootstrap"), *list = json_array();
    int bad = list == NULL;
    for (size_t i = 0; !bad && i < n_nodes; i++) {
        bad |= ctl__json_push(list, node_obj(nodes[i].id, nodes[i].address, nodes[i].client_address,
                                             nodes[i].weight));
    }
    if (bad) {
        json_decref(list);
        list = NULL;
    }
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "cluster_id", json_string(cluster_id));
        bad |=
            ctl__json_set(cmd, "config",
                          json_pack("{s:I,s:I,s:I}", "slot_groups", (json_int_t)config->slot_groups,
                                    "replicas", (json_int_t)config->replicas, "bootstrap_expect",
                                    (json_int_t)config->bootstrap_expect));
        bad |= ctl__json_set(cmd, "nodes", list);
        if (features != NULL) {
            json_t *f =
                json_pack("{s:b}", "hash_slot_migration", (int)features->hash_slot_migration);
            if (f != NULL && features->operations_mcp) {
                bad |= ctl__json_set(f, "operations_mcp", json_true());
            }
            if (f != NULL && features->balance_paused) {
                bad |= ctl__json_set(f, "balance_paused", json_true());
            }
            bad |= ctl__json_set(cmd, "features", f);
        }
    } else {
        json_decref(list);
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_set_feature(const char *name, bool enabled, uint64_t expected_revision, char **out)
{
    if (!string_ok(name)) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("set_feature");
    int bad = 0;
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "name", json_string(name));
        bad |= ctl__json_set(cmd, "enabled", json_boolean(enabled));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_join_node(uint64_t id, const char *address, const char *client_address, uint32_t weight,
                      uint64_t expected_revision, char **out)
{
    if (!string_ok(address) || id > CTL_U64_JSON_MAX ||
        (client_address != NULL && !string_ok(client_address))) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("join_node"),
           *node = node_obj(id, address, client_address, weight);
    int bad = 0;
    if (cmd != NULL && node != NULL) {
        bad |= json_object_update(cmd, node);
    } else {
        bad = -1;
    }
    json_decref(node);
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_node_address(uint64_t id, const char *address, const char *client_address,
                         uint64_t expected_revision, char **out)
{
    if (!string_ok(address) || !string_ok(client_address) || id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("node_address");
    int bad = cmd == NULL;
    if (!bad) {
        bad |= ctl__json_set(cmd, "id", json_integer((json_int_t)id));
        bad |= ctl__json_set(cmd, "address", json_string(address));
        bad |= ctl__json_set(cmd, "client_address", json_string(client_address));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_node_zone(uint64_t id, const char *zone, char **out)
{
    if (zone == NULL || !ctl_zone_valid(zone) || id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("node_zone");
    int bad = cmd == NULL;
    if (!bad) {
        bad |= ctl__json_set(cmd, "id", json_integer((json_int_t)id));
        bad |= ctl__json_set(cmd, "zone", json_string(zone));
    }
    return ctl__cmd_finish(cmd, bad, 0, out);
}

/* A command {op, key: id} for the ops that name one node. */
static int one_node(const char *op, const char *key, uint64_t id, uint64_t expected_revision,
                    char **out)
{
    if (id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new(op);
    int bad = cmd == NULL ? -1 : ctl__json_set(cmd, key, json_integer((json_int_t)id));
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_activate_node(uint64_t id, uint64_t expected_revision, char **out)
{
    return one_node("activate_node", "id", id, expected_revision, out);
}

int ctl_cmd_set_preferred_leader(uint32_t group, uint64_t node, uint64_t expected_revision,
                                 char **out)
{
    if (node > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("set_preferred_leader");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "group", json_integer(group));
        bad |= ctl__json_set(cmd, "node", json_integer((json_int_t)node));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_set_node_status(uint64_t id, enum ctl_node_status status, uint64_t expected_revision,
                            char **out)
{
    const char *name = ctl_node_status_name(status);
    if (id > CTL_U64_JSON_MAX || name == NULL) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("set_node_status");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "id", json_integer((json_int_t)id));
        bad |= ctl__json_set(cmd, "status", json_string(name));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_health_report(uint64_t node, uint64_t now_ms, uint64_t ttl_ms,
                          uint64_t expected_revision, char **out)
{
    if (node > CTL_U64_JSON_MAX || now_ms > CTL_U64_JSON_MAX || ttl_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("health_report");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "node", json_integer((json_int_t)node));
        bad |= ctl__json_set(cmd, "now_ms", json_integer((json_int_t)now_ms));
        bad |= ctl__json_set(cmd, "ttl_ms", json_integer((json_int_t)ttl_ms));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_set_weight(uint64_t id, uint32_t weight, uint64_t expected_revision, char **out)
{
    if (id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("set_weight");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "id", json_integer((json_int_t)id));
        bad |= ctl__json_set(cmd, "weight", json_integer(weight));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

/* ---- task commands ---- */

/* A command {op, task, now_ms} that the task builders extend; NULL on allocation failure. */
static json_t *task_op(const char *op, uint64_t task, uint64_t now_ms, int *bad)
{
    json_t *cmd = ctl__cmd_op_new(op);
    if (cmd == NULL) {
        *bad = -1;
        return NULL;
    }
    *bad |= ctl__json_set(cmd, "task", ctl__json_u64_new(task));
    *bad |= ctl__json_set(cmd, "now_ms", ctl__json_u64_new(now_ms));
    return cmd;
}

int ctl_cmd_task_create(const struct ctl_task_spec *spec, uint64_t now_ms,
                        uint64_t expected_revision, char **out)
{
    if (spec == NULL || ctl_task_kind_name(spec->kind) == NULL || spec->source > CTL_U64_JSON_MAX ||
        spec->target > CTL_U64_JSON_MAX || spec->node > CTL_U64_JSON_MAX ||
        now_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = ctl__cmd_op_new("task_create");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "kind", json_string(ctl_task_kind_name(spec->kind)));
        bad |= ctl__json_set(cmd, "now_ms", ctl__json_u64_new(now_ms));
        switch (spec->kind) {
        case CTL_TASK_REPLICA_MOVE:
        case CTL_TASK_LEADER_TRANSFER:
            bad |= ctl__json_set(cmd, "source", ctl__json_u64_new(spec->source));
            bad |= ctl__json_set(cmd, "target", ctl__json_u64_new(spec->target));
            bad |= ctl__json_set(cmd, "group", json_integer(spec->group));
            break;
        case CTL_TASK_HASH_SLOT_MIGRATION:
            bad |= ctl__json_set(cmd, "hash_slots", ctl__json_slots_new(spec->hash_slots));
            bad |= ctl__json_set(cmd, "to_group", json_integer(spec->to_group));
            break;
        default:
            bad |= ctl__json_set(cmd, "node", ctl__json_u64_new(spec->node));
            break;
        }
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

static bool proof_ok(const struct ctl_task_proof *p)
{
    if (p->n_voters > CTL_REPLICAS_MAX || p->n_learners > CTL_REPLICAS_MAX ||
        p->config_index > CTL_U64_JSON_MAX || p->leader > CTL_U64_JSON_MAX ||
        p->commit > CTL_U64_JSON_MAX || p->target_match > CTL_U64_JSON_MAX) {
        return false;
    }
    for (uint32_t i = 0; i < p->n_voters; i++) {
        if (p->voters[i] > CTL_U64_JSON_MAX) {
            return false;
        }
    }
    for (uint32_t i = 0; i < p->n_learners; i++) {
        if (p->learners[i] > CTL_U64_JSON_MAX) {
            return false;
        }
    }
    return true;
}

int ctl_cmd_task_advance(uint64_t task, uint32_t group, uint64_t config_epoch, uint32_t attempt,
                         uint32_t phase, const struct ctl_task_proof *proof,
                         uint64_t replicas_on_node, uint64_t leading, uint64_t now_ms,
                         uint64_t expected_revision, char **out)
{
    static const struct ctl_task_proof none;
    proof = proof != NULL ? proof : &none;
    if (task > CTL_U64_JSON_MAX || config_epoch > CTL_U64_JSON_MAX || !proof_ok(proof) ||
        replicas_on_node > CTL_U64_JSON_MAX || leading > CTL_U64_JSON_MAX ||
        now_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    int bad = 0;
    json_t *cmd = task_op("task_advance", task, now_ms, &bad);
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "group", json_integer(group));
        bad |= ctl__json_set(cmd, "config_epoch", ctl__json_u64_new(config_epoch));
        bad |= ctl__json_set(cmd, "attempt", json_integer(attempt));
        bad |= ctl__json_set(cmd, "phase", json_integer(phase));
        bad |= ctl__json_set(cmd, "replicas_on_node", ctl__json_u64_new(replicas_on_node));
        bad |= ctl__json_set(cmd, "leading", ctl__json_u64_new(leading));
        json_t *p = json_object();
        if (p != NULL) {
            bad |= ctl__json_set(p, "config_index", ctl__json_u64_new(proof->config_index));
            bad |= ctl__json_set(p, "voters", ctl__json_u64s_new(proof->voters, proof->n_voters));
            bad |= ctl__json_set(p, "learners",
                                 ctl__json_u64s_new(proof->learners, proof->n_learners));
            bad |= ctl__json_set(p, "leader", ctl__json_u64_new(proof->leader));
            bad |= ctl__json_set(p, "commit", ctl__json_u64_new(proof->commit));
            bad |= ctl__json_set(p, "target_match", ctl__json_u64_new(proof->target_match));
        }
        bad |= ctl__json_set(cmd, "proof", p);
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_task_progress(uint64_t task, uint32_t attempt, uint32_t phase,
                          const struct ctl_task_progress *progress, uint64_t now_ms,
                          uint64_t expected_revision, char **out)
{
    if (progress == NULL || task > CTL_U64_JSON_MAX || now_ms > CTL_U64_JSON_MAX ||
        progress->bytes_sent > CTL_U64_JSON_MAX || progress->bytes_total > CTL_U64_JSON_MAX ||
        progress->target_match > CTL_U64_JSON_MAX || progress->commit > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    int bad = 0;
    json_t *cmd = task_op("task_progress", task, now_ms, &bad);
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "attempt", json_integer(attempt));
        bad |= ctl__json_set(cmd, "phase", json_integer(phase));
        bad |= ctl__json_set(
            cmd, "progress",
            json_pack("{s:I,s:I,s:I,s:I}", "bytes_sent", (json_int_t)progress->bytes_sent,
                      "bytes_total", (json_int_t)progress->bytes_total, "target_match",
                      (json_int_t)progress->target_match, "commit", (json_int_t)progress->commit));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

/* Length of the longest prefix of s (valid UTF-8) of at most max bytes that ends on a character
 * boundary. */
static size_t utf8_prefix(const char *s, size_t max)
{
    size_t n = strlen(s);
    if (n <= max) {
        return n;
    }
    n = max;
    while (n > 0 && ((unsigned char)s[n] & 0xC0) == 0x80) {
        n--; /* s[n] continues a character: cut before that character's lead byte */
    }
    return n;
}

int ctl_cmd_task_fail(uint64_t task, uint32_t attempt, uint32_t phase, const char *error,
                      uint64_t now_ms, uint64_t expected_revision, char **out)
{
    if (!string_ok(error) || task > CTL_U64_JSON_MAX || now_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    int bad = 0;
    json_t *cmd = task_op("task_fail", task, now_ms, &bad);
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "attempt", json_integer(attempt));
        bad |= ctl__json_set(cmd, "phase", json_integer(phase));
        bad |= ctl__json_set(cmd, "error",
                             json_stringn(error, utf8_prefix(error, CTL_LAST_ERROR_MAX)));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

/* task_retry's and task_abort's command: {op, task, now_ms}. */
static int task_cmd(const char *op, uint64_t task, uint64_t now_ms, uint64_t expected_revision,
                    char **out)
{
    if (task > CTL_U64_JSON_MAX || now_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    int bad = 0;
    json_t *cmd = task_op(op, task, now_ms, &bad);
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_task_retry(uint64_t task, uint64_t now_ms, uint64_t expected_revision, char **out)
{
    return task_cmd("task_retry", task, now_ms, expected_revision, out);
}

int ctl_cmd_task_abort(uint64_t task, uint64_t now_ms, uint64_t expected_revision, char **out)
{
    return task_cmd("task_abort", task, now_ms, expected_revision, out);
}

int ctl_cmd_drain_advance(uint64_t task, uint32_t attempt, const struct ctl_drain_facts *f,
                          uint64_t now_ms, uint64_t expected_revision, char **out)
{
    if (f == NULL || f->tasks_on_node > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    char *base = NULL;
    int rc = ctl_cmd_task_advance(task, 0, 0, attempt, CTL_PHASE_DRAIN_MOVING_REPLICAS, NULL,
                                  f->replicas_on_node, f->leading, now_ms, 0, &base);
    if (rc != CTL_OK) {
        return rc;
    }
    json_t *cmd = json_loads(base, JSON_REJECT_DUPLICATES, NULL);
    ctl_free(base);
    int bad = cmd == NULL;
    if (cmd != NULL) {
        bad |= ctl__json_set(cmd, "tasks_on_node", ctl__json_u64_new(f->tasks_on_node));
        bad |= ctl__json_set(cmd, "groups_observed", json_integer(f->groups_observed));
    }
    return ctl__cmd_finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_node_remove(uint64_t id, uint64_t expected_revision, char **out)
{
    return id == 0 ? CTL_EINVALID : one_node("node_remove", "id", id, expected_revision, out);
}

int ctl_cmd_controller_voter_demote(uint64_t node, uint64_t expected_revision, char **out)
{
    return node == 0 ? CTL_EINVALID
                     : one_node("controller_voter_demote", "node", node, expected_revision, out);
}
