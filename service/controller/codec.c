/* codec.c - canonical JSON encoding of the cluster state, its CRC-32C checksum, strict decode. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

/* ---- encode ---------------------------------------------------------------------------------- */

static json_t *encode_node(const struct ctl_node *n)
{
    json_t *o = json_object(), *roles = json_array();
    int bad = o == NULL || roles == NULL;
    if (!bad && (n->roles & CTL_ROLE_CONTROLLER_VOTER)) {
        bad |= ctl__json_push(roles, json_string("controller_voter"));
    }
    if (!bad && (n->roles & CTL_ROLE_DATA)) {
        bad |= ctl__json_push(roles, json_string("data"));
    }
    if (!bad) {
        bad |= ctl__json_set(o, "roles", roles);
        roles = NULL;
        bad |= ctl__json_set(o, "id", ctl__json_u64_new(n->id));
        bad |= ctl__json_set(o, "address", json_string(n->address));
        if (n->client_address[0] != '\0') {
            bad |= ctl__json_set(o, "client_address", json_string(n->client_address));
        }
        bad |= ctl__json_set(o, "join_state", json_string(ctl_join_state_name(n->join_state)));
        bad |= ctl__json_set(o, "status", json_string(ctl_node_status_name(n->status)));
        bad |= ctl__json_set(o, "weight", json_integer(n->weight));
        if (n->zone[0] != '\0') {
            bad |= ctl__json_set(o, "zone", json_string(n->zone));
        }
    }
    json_decref(roles);
    return ctl__json_done(o, bad);
}

static json_t *encode_group(const struct ctl_group *g)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "id", json_integer(g->id));
    bad |= ctl__json_set(o, "desired_peers", ctl__json_u64s_new(g->desired_peers, g->n_peers));
    bad |= ctl__json_set(o, "config_epoch", ctl__json_u64_new(g->config_epoch));
    bad |= ctl__json_set(o, "preferred_leader", ctl__json_u64_new(g->preferred_leader));
    return ctl__json_done(o, bad);
}

static json_t *encode_table(const struct ctl_hash_slot_table *t)
{
    json_t *o = json_object(), *ranges = json_array();
    int bad = o == NULL || ranges == NULL;
    for (uint32_t i = 0; !bad && i < t->n_ranges; i++) {
        json_t *r =
            json_pack("{s:I,s:I,s:I}", "first", (json_int_t)t->ranges[i].first, "last",
                      (json_int_t)t->ranges[i].last, "group", (json_int_t)t->ranges[i].group);
        bad |= ctl__json_push(ranges, r);
    }
    if (!bad) {
        bad |= ctl__json_set(o, "ranges", ranges);
        ranges = NULL;
        bad |= ctl__json_set(o, "version", ctl__json_u64_new(t->version));
    }
    json_decref(ranges);
    return ctl__json_done(o, bad);
}

static json_t *encode_proof(const struct ctl_task_proof *p)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "config_index", ctl__json_u64_new(p->config_index));
    bad |= ctl__json_set(o, "voters", ctl__json_u64s_new(p->voters, p->n_voters));
    bad |= ctl__json_set(o, "learners", ctl__json_u64s_new(p->learners, p->n_learners));
    bad |= ctl__json_set(o, "leader", ctl__json_u64_new(p->leader));
    bad |= ctl__json_set(o, "commit", ctl__json_u64_new(p->commit));
    bad |= ctl__json_set(o, "target_match", ctl__json_u64_new(p->target_match));
    return ctl__json_done(o, bad);
}

static json_t *encode_progress(const struct ctl_task_progress *p)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "bytes_sent", ctl__json_u64_new(p->bytes_sent));
    bad |= ctl__json_set(o, "bytes_total", ctl__json_u64_new(p->bytes_total));
    bad |= ctl__json_set(o, "target_match", ctl__json_u64_new(p->target_match));
    bad |= ctl__json_set(o, "commit", ctl__json_u64_new(p->commit));
    return ctl__json_done(o, bad);
}

static json_t *encode_task(const struct ctl_task *t)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "id", ctl__json_u64_new(t->id));
    bad |= ctl__json_set(o, "kind", json_string(ctl_task_kind_name(t->kind)));
    bad |= ctl__json_set(o, "group", json_integer(t->group));
    bad |= ctl__json_set(o, "phase_index", json_integer(t->phase_index));
    bad |= ctl__json_set(o, "config_epoch", ctl__json_u64_new(t->config_epoch));
    bad |= ctl__json_set(o, "attempt", json_integer(t->attempt));
    bad |= ctl__json_set(o, "status", json_string(ctl_task_status_name(t->status)));
    bad |= ctl__json_set(o, "last_error", json_string(t->last_error));
    bad |= ctl__json_set(o, "participants", ctl__json_u64s_new(t->participants, t->n_participants));
    bad |= ctl__json_set(o, "created_ms", ctl__json_u64_new(t->created_ms));
    bad |= ctl__json_set(o, "updated_ms", ctl__json_u64_new(t->updated_ms));
    bad |= ctl__json_set(o, "source", ctl__json_u64_new(t->source));
    bad |= ctl__json_set(o, "target", ctl__json_u64_new(t->target));
    bad |= ctl__json_set(o, "previous_voters",
                         ctl__json_u64s_new(t->previous_voters, t->n_previous_voters));
    bad |= ctl__json_set(o, "proof", encode_proof(&t->proof));
    bad |= ctl__json_set(o, "progress", encode_progress(&t->progress));
    if (t->kind == CTL_TASK_HASH_SLOT_MIGRATION) { /* other kinds do not have these keys */
        bad |= ctl__json_set(o, "to_group", json_integer(t->to_group));
        bad |= ctl__json_set(o, "hash_slots", ctl__json_slots_new(t->hash_slots));
    }
    return ctl__json_done(o, bad);
}

static json_t *encode_health(const struct ctl_health *h)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    int bad = ctl__json_set(o, "node", ctl__json_u64_new(h->node));
    bad |= ctl__json_set(o, "reported_at_ms", ctl__json_u64_new(h->reported_at_ms));
    bad |= ctl__json_set(o, "ttl_ms", ctl__json_u64_new(h->ttl_ms));
    return ctl__json_done(o, bad);
}

/* Appends encode(items[i]) for i < n to a new array stored as obj[key]. */
#define ENCODE_LIST(bad, obj, key, items, n, encode)                                               \
    do {                                                                                           \
        json_t *arr_ = json_array();                                                               \
        int b_ = arr_ == NULL;                                                                     \
        for (uint32_t i_ = 0; !b_ && i_ < (n); i_++) {                                             \
            b_ |= ctl__json_push(arr_, encode(&(items)[i_]));                                      \
        }                                                                                          \
        if (b_) {                                                                                  \
            json_decref(arr_);                                                                     \
            arr_ = NULL;                                                                           \
        }                                                                                          \
        (bad) |= ctl__json_set((obj), (key), arr_);                                                \
    } while (0)

/* The canonical tree of a valid state, without "checksum". NULL on allocation failure. */
static json_t *encode_body(const struct ctl_state *s)
{
    json_t *o = json_object();
    if (o == NULL) {
        return NULL;
    }
    const struct ctl_config *c = &s->config;
    int bad = ctl__json_set(o, "schema_version", json_integer(s->schema_version));
    bad |= ctl__json_set(o, "cluster_id", json_string(s->cluster_id));
    bad |= ctl__json_set(o, "revision", ctl__json_u64_new(s->revision));
    bad |= ctl__json_set(o, "applied_raft_index", ctl__json_u64_new(s->applied_raft_index));
    bad |= ctl__json_set(o, "next_task_id", ctl__json_u64_new(s->next_task_id));
    bad |= ctl__json_set(o, "config",
                         json_pack("{s:I,s:I,s:I,s:I}", "slot_groups", (json_int_t)c->slot_groups,
                                   "hash_slots", (json_int_t)c->hash_slots, "replicas",
                                   (json_int_t)c->replicas, "bootstrap_expect",
                                   (json_int_t)c->bootstrap_expect));
    ENCODE_LIST(bad, o, "nodes", s->nodes, s->n_nodes, encode_node);
    ENCODE_LIST(bad, o, "groups", s->groups, s->n_groups, encode_group);
    bad |= ctl__json_set(o, "hash_slot_table", encode_table(&s->table));
    ENCODE_LIST(bad, o, "tasks", s->tasks, s->n_tasks, encode_task);
    ENCODE_LIST(bad, o, "health", s->health, s->n_health, encode_health);
    if (s->auth.enabled) {
        bad |= ctl__json_set(o, "auth", ctl__auth_encode(&s->auth));
    }
    /* operations_mcp and balance_paused only when on, so a state without them encodes as
     * before they existed. */
    json_t *features =
        json_pack("{s:b}", "hash_slot_migration", (int)s->features.hash_slot_migration);
    if (features != NULL && s->features.operations_mcp) {
        bad |= ctl__json_set(features, "operations_mcp", json_true());
    }
    if (features != NULL && s->features.balance_paused) {
        bad |= ctl__json_set(features, "balance_paused", json_true());
    }
    bad |= ctl__json_set(o, "features", features);
    /* "backup" only once used, so a state without a plan encodes as before it existed. */
    if (s->backup.set || s->backup.run_id != 0) {
        bad |= ctl__json_set(o, "backup", ctl__backup_encode(&s->backup));
    }
    return ctl__json_done(o, bad);
}

/* CRC-32C of the canonical dump of body (which has no "checksum" field). */
static int body_crc(const json_t *body, uint32_t *crc)
{
    size_t len;
    char *text = ctl__json_dump(body, &len);
    if (text == NULL) {
        return CTL_ENOMEM;
    }
    *crc = ctl_crc32c(text, len);
    ctl_free(text);
    return CTL_OK;
}

int ctl_state_checksum(const struct ctl_state *state, uint32_t *crc)
{
    if (ctl_state_validate(state, NULL, 0) != CTL_OK) {
        return CTL_ESTATE;
    }
    json_t *body = encode_body(state);
    if (body == NULL) {
        return CTL_ENOMEM;
    }
    int rc = body_crc(body, crc);
    json_decref(body);
    return rc;
}

int ctl_state_encode(const struct ctl_state *state, char **buf, size_t *len)
{
    if (ctl_state_validate(state, NULL, 0) != CTL_OK) {
        return CTL_ESTATE;
    }
    json_t *body = encode_body(state);
    if (body == NULL) {
        goto err_after_nothing;
    }
    uint32_t crc;
    if (body_crc(body, &crc) != CTL_OK) {
        goto err_after_body;
    }
    char hex[9];
    snprintf(hex, sizeof(hex), "%08x", crc);
    if (ctl__json_set(body, "checksum", json_string(hex)) != 0) {
        goto err_after_body;
    }
    char *text = ctl__json_dump(body, len);
    if (text == NULL) {
        goto err_after_body;
    }
    json_decref(body);
    *buf = text;
    return CTL_OK;

err_after_body:
    json_decref(body);
err_after_nothing:
    return CTL_ENOMEM;
}
