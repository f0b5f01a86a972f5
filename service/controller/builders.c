/* builders.c - ctl_cmd_*(): canonical JSON for each controller command. */
#include <string.h>

#include "internal.h"

/* Dumps cmd (consumed) into *out; adds expected_revision when it is not 0. bad is the OR of the
 * earlier ctl__json_set results. */
static int finish(json_t *cmd, int bad, uint64_t expected_revision, char **out)
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

static json_t *op_new(const char *op)
{
    json_t *cmd = json_object();
    if (cmd != NULL && ctl__json_set(cmd, "op", json_string(op)) != 0) {
        json_decref(cmd);
        return NULL;
    }
    return cmd;
}

static json_t *node_obj(uint64_t id, const char *address, uint32_t weight)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "id", json_integer((json_int_t)id));
    bad |= ctl__json_set(o, "address", json_string(address));
    if (weight != 0) {
        bad |= ctl__json_set(o, "weight", json_integer(weight));
    }
    if (bad) {
        json_decref(o);
        return NULL;
    }
    return o;
}

int ctl_cmd_bootstrap(const char *cluster_id, const struct ctl_config *config,
                      const struct ctl_cmd_node *nodes, size_t n_nodes, uint64_t expected_revision,
                      char **out)
{
    if (!string_ok(cluster_id) || config == NULL || (nodes == NULL && n_nodes > 0)) {
        return CTL_EINVALID;
    }
    for (size_t i = 0; i < n_nodes; i++) {
        if (!string_ok(nodes[i].address) || nodes[i].id > CTL_U64_JSON_MAX) {
            return CTL_EINVALID;
        }
    }
    json_t *cmd = op_new("bootstrap"), *list = json_array();
    int bad = list == NULL;
    for (size_t i = 0; !bad && i < n_nodes; i++) {
        bad |= ctl__json_push(list, node_obj(nodes[i].id, nodes[i].address, nodes[i].weight));
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
    } else {
        json_decref(list);
    }
    return finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_join_node(uint64_t id, const char *address, uint32_t weight, uint64_t expected_revision,
                      char **out)
{
    if (!string_ok(address) || id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = op_new("join_node"), *node = node_obj(id, address, weight);
    int bad = 0;
    if (cmd != NULL && node != NULL) {
        bad |= json_object_update(cmd, node);
    } else {
        bad = -1;
    }
    json_decref(node);
    return finish(cmd, bad, expected_revision, out);
}

/* A command {op, key: id} for the ops that name one node. */
static int one_node(const char *op, const char *key, uint64_t id, uint64_t expected_revision,
                    char **out)
{
    if (id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = op_new(op);
    int bad = cmd == NULL ? -1 : ctl__json_set(cmd, key, json_integer((json_int_t)id));
    return finish(cmd, bad, expected_revision, out);
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
    json_t *cmd = op_new("set_preferred_leader");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "group", json_integer(group));
        bad |= ctl__json_set(cmd, "node", json_integer((json_int_t)node));
    }
    return finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_set_node_status(uint64_t id, enum ctl_node_status status, uint64_t expected_revision,
                            char **out)
{
    const char *name = ctl_node_status_name(status);
    if (id > CTL_U64_JSON_MAX || name == NULL) {
        return CTL_EINVALID;
    }
    json_t *cmd = op_new("set_node_status");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "id", json_integer((json_int_t)id));
        bad |= ctl__json_set(cmd, "status", json_string(name));
    }
    return finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_health_report(uint64_t node, uint64_t now_ms, uint64_t ttl_ms,
                          uint64_t expected_revision, char **out)
{
    if (node > CTL_U64_JSON_MAX || now_ms > CTL_U64_JSON_MAX || ttl_ms > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = op_new("health_report");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "node", json_integer((json_int_t)node));
        bad |= ctl__json_set(cmd, "now_ms", json_integer((json_int_t)now_ms));
        bad |= ctl__json_set(cmd, "ttl_ms", json_integer((json_int_t)ttl_ms));
    }
    return finish(cmd, bad, expected_revision, out);
}

int ctl_cmd_set_weight(uint64_t id, uint32_t weight, uint64_t expected_revision, char **out)
{
    if (id > CTL_U64_JSON_MAX) {
        return CTL_EINVALID;
    }
    json_t *cmd = op_new("set_weight");
    int bad = -1;
    if (cmd != NULL) {
        bad = ctl__json_set(cmd, "id", json_integer((json_int_t)id));
        bad |= ctl__json_set(cmd, "weight", json_integer(weight));
    }
    return finish(cmd, bad, expected_revision, out);
}
