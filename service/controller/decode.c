/* decode.c - strict decode of cluster-state.json: exact fields and types, checksum, validation. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* A sorted-set array of u64 ids at obj[key] into out[0..max). */
static int decode_ids(const json_t *obj, const char *key, const char *path, size_t max,
                      uint64_t *out, uint32_t *n, char *err, size_t errlen)
{
    json_t *arr;
    CTL__TRY(ctl__json_array(obj, key, path, max, &arr, err, errlen));
    char fp[CTL__PATH_MAX];
    ctl__json_path(fp, path, key);
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 0) {
            ctl__errf(err, errlen, "%s[%zu]: expected an integer in 0..%llu", fp, i,
                      CTL_U64_JSON_MAX);
            return CTL_EDECODE;
        }
        out[i] = (uint64_t)json_integer_value(v);
    }
    *n = (uint32_t)json_array_size(arr);
    return CTL_OK;
}

static int decode_roles(const json_t *obj, const char *path, uint32_t *roles, char *err,
                        size_t errlen)
{
    static const char *const names[] = {"controller_voter", "data"};
    json_t *arr;
    CTL__TRY(ctl__json_array(obj, "roles", path, CTL__N(names), &arr, err, errlen));
    int prev = -1;
    *roles = 0;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        int idx =
            json_is_string(v) ? ctl__name_index(names, CTL__N(names), json_string_value(v)) : -1;
        if (idx < 0 || idx <= prev) {
            ctl__errf(err, errlen,
                      "%s.roles[%zu]: expected \"controller_voter\" or \"data\", "
                      "sorted, no duplicates",
                      path, i);
            return CTL_EDECODE;
        }
        prev = idx;
        *roles |= 1u << idx;
    }
    return CTL_OK;
}

static int decode_node(const json_t *o, const char *path, struct ctl_node *n, char *err,
                       size_t errlen)
{
    static const char *const fields[] = {"id",         "address", "roles",
                                         "join_state", "status",  "weight"};
    static const char *const optional[] = {"client_address", "zone"};
    int v;
    CTL__TRY(
        ctl__json_fields(o, path, fields, CTL__N(fields), optional, CTL__N(optional), err, errlen));
    CTL__TRY(ctl__json_u64(o, "id", path, 0, CTL_U64_JSON_MAX, &n->id, err, errlen));
    n->zone[0] = '\0';
    if (json_object_get(o, "zone") != NULL) {
        CTL__TRY(ctl__json_str(o, "zone", path, CTL_ZONE_MAX, n->zone, err, errlen));
    }
    CTL__TRY(ctl__json_str(o, "address", path, CTL_ADDRESS_MAX, n->address, err, errlen));
    n->client_address[0] = '\0';
    if (json_object_get(o, "client_address") != NULL) {
        CTL__TRY(ctl__json_str(o, "client_address", path, CTL_ADDRESS_MAX, n->client_address, err,
                               errlen));
    }
    CTL__TRY(decode_roles(o, path, &n->roles, err, errlen));
    CTL__TRY(ctl__json_enum(o, "join_state", path, ctl__join_state_names, ctl__n_join_state_names,
                            &v, err, errlen));
    n->join_state = (enum ctl_join_state)v;
    CTL__TRY(ctl__json_enum(o, "status", path, ctl__node_status_names, ctl__n_node_status_names, &v,
                            err, errlen));
    n->status = (enum ctl_node_status)v;
    return ctl__json_u32(o, "weight", path, 0, UINT32_MAX, &n->weight, err, errlen);
}

static int decode_group(const json_t *o, const char *path, struct ctl_group *g, char *err,
                        size_t errlen)
{
    static const char *const fields[] = {"id", "desired_peers", "config_epoch", "preferred_leader"};
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_u32(o, "id", path, 0, UINT32_MAX, &g->id, err, errlen));
    CTL__TRY(decode_ids(o, "desired_peers", path, CTL_REPLICAS_MAX, g->desired_peers, &g->n_peers,
                        err, errlen));
    CTL__TRY(
        ctl__json_u64(o, "config_epoch", path, 0, CTL_U64_JSON_MAX, &g->config_epoch, err, errlen));
    return ctl__json_u64(o, "preferred_leader", path, 0, CTL_U64_JSON_MAX, &g->preferred_leader,
                         err, errlen);
}

static int decode_range(const json_t *o, const char *path, struct ctl_range *r, char *err,
                        size_t errlen)
{
    static const char *const fields[] = {"first", "last", "group"};
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_u32(o, "first", path, 0, UINT32_MAX, &r->first, err, errlen));
    CTL__TRY(ctl__json_u32(o, "last", path, 0, UINT32_MAX, &r->last, err, errlen));
    return ctl__json_u32(o, "group", path, 0, UINT32_MAX, &r->group, err, errlen);
}

static int decode_table(const json_t *o, struct ctl_hash_slot_table *t, char *err, size_t errlen)
{
    static const char *const fields[] = {"version", "ranges"};
    const char *path = "hash_slot_table";
    json_t *arr;
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_u64(o, "version", path, 0, CTL_U64_JSON_MAX, &t->version, err, errlen));
    CTL__TRY(ctl__json_array(o, "ranges", path, CTL_HASH_SLOTS, &arr, err, errlen));
    t->n_ranges = (uint32_t)json_array_size(arr);
    for (uint32_t i = 0; i < t->n_ranges; i++) {
        char p[CTL__PATH_MAX];
        snprintf(p, sizeof(p), "%s.ranges[%u]", path, i);
        CTL__TRY(decode_range(json_array_get(arr, i), p, &t->ranges[i], err, errlen));
    }
    return CTL_OK;
}

/* The object task[name] (path: task_path.name, written to path), which must have exactly the
 * fields of required; *o is set to it (NULL when absent, which ctl__json_fields rejects). */
static int task_sub_object(const json_t *task, const char *task_path, const char *name,
                           const char *const *required, size_t n_required, char *path,
                           const json_t **o, char *err, size_t errlen)
{
    ctl__json_path(path, task_path, name);
    *o = json_object_get(task, name);
    return ctl__json_fields(*o, path, required, n_required, NULL, 0, err, errlen);
}

/* Decodes the u64 fields names[i] (0..CTL_U64_JSON_MAX) of o into *outs[i], in order. */
static int decode_u64s(const json_t *o, const char *path, const char *const *names,
                       uint64_t *const *outs, size_t n, char *err, size_t errlen)
{
    for (size_t i = 0; i < n; i++)
        CTL__TRY(ctl__json_u64(o, names[i], path, 0, CTL_U64_JSON_MAX, outs[i], err, errlen));
    return 0;
}

static int decode_proof(const json_t *task, const char *task_path, struct ctl_task_proof *p,
                        char *err, size_t errlen)
{
    static const char *const fields[] = {"config_index", "voters", "learners",
                                         "leader",       "commit", "target_match"};
    char path[CTL__PATH_MAX];
    const json_t *o;
    CTL__TRY(
        task_sub_object(task, task_path, "proof", fields, CTL__N(fields), path, &o, err, errlen));
    CTL__TRY(
        ctl__json_u64(o, "config_index", path, 0, CTL_U64_JSON_MAX, &p->config_index, err, errlen));
    CTL__TRY(decode_ids(o, "voters", path, CTL_REPLICAS_MAX, p->voters, &p->n_voters, err, errlen));
    CTL__TRY(decode_ids(o, "learners", path, CTL_REPLICAS_MAX, p->learners, &p->n_learners, err,
                        errlen));
    uint64_t *const outs[] = {&p->leader, &p->commit, &p->target_match};
    return decode_u64s(o, path, fields + 3, outs, CTL__N(outs), err, errlen);
}

static int decode_progress(const json_t *task, const char *task_path, struct ctl_task_progress *p,
                           char *err, size_t errlen)
{
    static const char *const fields[] = {"bytes_sent", "bytes_total", "target_match", "commit"};
    char path[CTL__PATH_MAX];
    const json_t *o;
    CTL__TRY(task_sub_object(task, task_path, "progress", fields, CTL__N(fields), path, &o, err,
                             errlen));
    uint64_t *const outs[] = {&p->bytes_sent, &p->bytes_total, &p->target_match, &p->commit};
    return decode_u64s(o, path, fields, outs, CTL__N(outs), err, errlen);
}

/* "to_group" and "hash_slots" (a strictly ascending array of hash slots) of a hash_slot_migration
 * task; other kinds must not have them. */
static int decode_migration(const json_t *o, const char *path, struct ctl_task *t, char *err,
                            size_t errlen)
{
    static const char *const keys[] = {"to_group", "hash_slots"};
    bool migration = t->kind == CTL_TASK_HASH_SLOT_MIGRATION;
    for (size_t k = 0; k < CTL__N(keys); k++) {
        if ((json_object_get(o, keys[k]) != NULL) != migration) {
            ctl__errf(err, errlen, "%s.%s: %s for a %s task", path, keys[k],
                      migration ? "missing" : "not a field", ctl_task_kind_name(t->kind));
            return CTL_EDECODE;
        }
    }
    if (!migration) {
        return CTL_OK;
    }
    json_t *arr;
    CTL__TRY(ctl__json_u32(o, "to_group", path, 0, UINT32_MAX, &t->to_group, err, errlen));
    CTL__TRY(ctl__json_array(o, "hash_slots", path, CTL_HASH_SLOTS, &arr, err, errlen));
    json_int_t prev = -1;
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        json_int_t slot = json_is_integer(v) ? json_integer_value(v) : -1;
        if (slot <= prev || slot >= CTL_HASH_SLOTS) {
            ctl__errf(err, errlen,
                      "%s.hash_slots[%zu]: expected a hash slot in 0..%u above the previous "
                      "entry (sorted set)",
                      path, i, CTL_HASH_SLOTS - 1);
            return CTL_EDECODE;
        }
        prev = slot;
        CTL__SLOT_ADD(t->hash_slots, (uint32_t)slot);
    }
    return CTL_OK;
}

static int decode_task(const json_t *o, const char *path, struct ctl_task *t, char *err,
                       size_t errlen)
{
    static const char *const fields[] = {
        "id",         "kind",   "group",      "phase_index",     "config_epoch",
        "attempt",    "status", "last_error", "participants",    "created_ms",
        "updated_ms", "source", "target",     "previous_voters", "proof",
        "progress"};
    static const char *const migration_fields[] = {"to_group", "hash_slots"};
    int v;
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), migration_fields,
                              CTL__N(migration_fields), err, errlen));
    CTL__TRY(ctl__json_u64(o, "id", path, 0, CTL_U64_JSON_MAX, &t->id, err, errlen));
    CTL__TRY(ctl__json_enum(o, "kind", path, ctl__task_kind_names, ctl__n_task_kind_names, &v, err,
                            errlen));
    t->kind = (enum ctl_task_kind)v;
    CTL__TRY(ctl__json_u32(o, "group", path, 0, UINT32_MAX, &t->group, err, errlen));
    CTL__TRY(ctl__json_u32(o, "phase_index", path, 0, UINT32_MAX, &t->phase_index, err, errlen));
    CTL__TRY(
        ctl__json_u64(o, "config_epoch", path, 0, CTL_U64_JSON_MAX, &t->config_epoch, err, errlen));
    CTL__TRY(ctl__json_u32(o, "attempt", path, 0, UINT32_MAX, &t->attempt, err, errlen));
    CTL__TRY(ctl__json_enum(o, "status", path, ctl__task_status_names, ctl__n_task_status_names, &v,
                            err, errlen));
    t->status = (enum ctl_task_status)v;
    CTL__TRY(ctl__json_str(o, "last_error", path, CTL_LAST_ERROR_MAX, t->last_error, err, errlen));
    CTL__TRY(decode_ids(o, "participants", path, CTL_PARTICIPANTS_MAX, t->participants,
                        &t->n_participants, err, errlen));
    CTL__TRY(
        ctl__json_u64(o, "created_ms", path, 0, CTL_U64_JSON_MAX, &t->created_ms, err, errlen));
    CTL__TRY(
        ctl__json_u64(o, "updated_ms", path, 0, CTL_U64_JSON_MAX, &t->updated_ms, err, errlen));
    CTL__TRY(ctl__json_u64(o, "source", path, 0, CTL_U64_JSON_MAX, &t->source, err, errlen));
    CTL__TRY(ctl__json_u64(o, "target", path, 0, CTL_U64_JSON_MAX, &t->target, err, errlen));
    CTL__TRY(decode_ids(o, "previous_voters", path, CTL_REPLICAS_MAX, t->previous_voters,
                        &t->n_previous_voters, err, errlen));
    CTL__TRY(decode_proof(o, path, &t->proof, err, errlen));
    CTL__TRY(decode_progress(o, path, &t->progress, err, errlen));
    return decode_migration(o, path, t, err, errlen);
}

static int decode_health(const json_t *o, const char *path, struct ctl_health *h, char *err,
                         size_t errlen)
{
    static const char *const fields[] = {"node", "reported_at_ms", "ttl_ms"};
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_u64(o, "node", path, 0, CTL_U64_JSON_MAX, &h->node, err, errlen));
    CTL__TRY(ctl__json_u64(o, "reported_at_ms", path, 0, CTL_U64_JSON_MAX, &h->reported_at_ms, err,
                           errlen));
    return ctl__json_u64(o, "ttl_ms", path, 0, CTL_U64_JSON_MAX, &h->ttl_ms, err, errlen);
}

static int decode_config(const json_t *o, struct ctl_config *c, char *err, size_t errlen)
{
    static const char *const fields[] = {"slot_groups", "hash_slots", "replicas",
                                         "bootstrap_expect"};
    const char *path = "config";
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_u32(o, "slot_groups", path, 0, UINT32_MAX, &c->slot_groups, err, errlen));
    CTL__TRY(ctl__json_u32(o, "hash_slots", path, 0, UINT32_MAX, &c->hash_slots, err, errlen));
    CTL__TRY(ctl__json_u32(o, "replicas", path, 0, UINT32_MAX, &c->replicas, err, errlen));
    return ctl__json_u32(o, "bootstrap_expect", path, 0, UINT32_MAX, &c->bootstrap_expect, err,
                         errlen);
}

/* Decodes root[key], an array of at most max objects, with decode(elem, "key[i]", &items[i]). */
#define DECODE_LIST(root, key, max, items, n, decode)                                              \
    do {                                                                                           \
        json_t *arr_;                                                                              \
        CTL__TRY(ctl__json_array((root), (key), "", (max), &arr_, err, errlen));                   \
        *(n) = (uint32_t)json_array_size(arr_);                                                    \
        for (uint32_t i_ = 0; i_ < *(n); i_++) {                                                   \
            char p_[CTL__PATH_MAX];                                                                \
            snprintf(p_, sizeof(p_), "%s[%u]", (key), i_);                                         \
            CTL__TRY(decode((json_array_get(arr_, i_)), p_, &(items)[i_], err, errlen));           \
        }                                                                                          \
    } while (0)

static int decode_body(const json_t *root, struct ctl_state *s, char *err, size_t errlen)
{
    static const char *const fields[] = {
        "schema_version",  "cluster_id", "revision", "applied_raft_index",
        "next_task_id",    "config",     "nodes",    "groups",
        "hash_slot_table", "tasks",      "health",   "checksum"};
    /* "auth", "features" and "backup" are optional: a state written before them has them off. */
    static const char *const optional[] = {"auth", "features", "backup"};
    CTL__TRY(ctl__json_fields(root, "", fields, CTL__N(fields), optional, CTL__N(optional), err,
                              errlen));
    CTL__TRY(
        ctl__json_u32(root, "schema_version", "", 0, UINT32_MAX, &s->schema_version, err, errlen));
    if (s->schema_version != CTL_SCHEMA_VERSION) {
        ctl__errf(err, errlen, "schema_version: %u is not %u", s->schema_version,
                  CTL_SCHEMA_VERSION);
        return CTL_EDECODE;
    }
    CTL__TRY(ctl__json_str(root, "cluster_id", "", CTL_CLUSTER_ID_MAX, s->cluster_id, err, errlen));
    CTL__TRY(ctl__json_u64(root, "revision", "", 0, CTL_U64_JSON_MAX, &s->revision, err, errlen));
    CTL__TRY(ctl__json_u64(root, "applied_raft_index", "", 0, CTL_U64_JSON_MAX,
                           &s->applied_raft_index, err, errlen));
    CTL__TRY(ctl__json_u64(root, "next_task_id", "", 0, CTL_U64_JSON_MAX, &s->next_task_id, err,
                           errlen));
    CTL__TRY(decode_config(json_object_get(root, "config"), &s->config, err, errlen));
    DECODE_LIST(root, "nodes", CTL_NODES_MAX, s->nodes, &s->n_nodes, decode_node);
    DECODE_LIST(root, "groups", CTL_GROUPS_MAX, s->groups, &s->n_groups, decode_group);
    CTL__TRY(decode_table(json_object_get(root, "hash_slot_table"), &s->table, err, errlen));
    DECODE_LIST(root, "tasks", CTL_TASKS_MAX, s->tasks, &s->n_tasks, decode_task);
    DECODE_LIST(root, "health", CTL_NODES_MAX, s->health, &s->n_health, decode_health);
    if (json_object_get(root, "auth") != NULL) {
        CTL__TRY(ctl__auth_decode(json_object_get(root, "auth"), &s->auth, err, errlen));
    }
    if (json_object_get(root, "features") != NULL) {
        CTL__TRY(ctl__features_read(json_object_get(root, "features"), "features", &s->features,
                                    err, errlen));
    }
    if (json_object_get(root, "backup") != NULL) {
        CTL__TRY(ctl__backup_decode(json_object_get(root, "backup"), &s->backup, err, errlen));
    }
    return CTL_OK;
}

/* Reads "checksum" (8 lowercase hex digits), removes it from root and compares it with the
 * CRC-32C of the canonical dump of what is left. */
static int check_checksum(json_t *root, char *err, size_t errlen)
{
    char hex[9];
    CTL__TRY(ctl__json_str(root, "checksum", "", 8, hex, err, errlen));
    bool ok = strlen(hex) == 8;
    for (int i = 0; ok && i < 8; i++) {
        ok = (hex[i] >= '0' && hex[i] <= '9') || (hex[i] >= 'a' && hex[i] <= 'f');
    }
    if (!ok) {
        ctl__errf(err, errlen, "checksum: \"%s\" is not 8 lowercase hex digits", hex);
        return CTL_EDECODE;
    }
    json_object_del(root, "checksum");
    size_t len;
    char *text = ctl__json_dump(root, &len);
    if (text == NULL) {
        ctl__errf(err, errlen, "checksum: out of memory");
        return CTL_ENOMEM;
    }
    uint32_t crc = ctl_crc32c(text, len);
    ctl_free(text);
    if (crc != (uint32_t)strtoul(hex, NULL, 16)) {
        ctl__errf(err, errlen, "checksum: stored %s, computed %08x", hex, crc);
        return CTL_ECHECKSUM;
    }
    return CTL_OK;
}

int ctl_state_decode(const void *buf, size_t len, struct ctl_state *state, char *err, size_t errlen)
{
    if (len > CTL_FILE_BYTES_MAX) {
        ctl__errf(err, errlen, "cluster state: %zu bytes, the limit is %u", len,
                  CTL_FILE_BYTES_MAX);
        return CTL_ETOO_BIG;
    }
    json_error_t jerr;
    json_t *root = json_loadb(buf, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        ctl__errf(err, errlen, "json: line %d column %d: %s", jerr.line, jerr.column, jerr.text);
        return json_error_code(&jerr) == json_error_out_of_memory ? CTL_ENOMEM : CTL_EDECODE;
    }
    int rc = CTL_ENOMEM;
    struct ctl_state *tmp = calloc(1, sizeof(*tmp));
    if (tmp == NULL) {
        ctl__errf(err, errlen, "cluster state: out of memory");
        goto err_after_root;
    }
    rc = decode_body(root, tmp, err, errlen);
    if (rc != CTL_OK) {
        goto err_after_tmp;
    }
    rc = check_checksum(root, err, errlen);
    if (rc != CTL_OK) {
        goto err_after_tmp;
    }
    rc = ctl_state_validate(tmp, err, errlen);
    if (rc != CTL_OK) {
        goto err_after_tmp;
    }
    memcpy(state, tmp, sizeof(*tmp));
    free(tmp);
    json_decref(root);
    return CTL_OK;

err_after_tmp:
    free(tmp);
err_after_root:
    json_decref(root);
    return rc;
}
