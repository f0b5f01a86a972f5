/* state.c - the cluster state model: errors, names, init, lookups and ctl_state_validate(). */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

const char *ctl_strerror(int err)
{
    switch (err) {
#define CTL__CASE(name, value, msg)                                                                \
    case name:                                                                                     \
        return msg;
        CTL_ERRORS(CTL__CASE)
#undef CTL__CASE
    default:
        return "unknown error";
    }
}

void ctl__errf(char *err, size_t errlen, const char *fmt, ...)
{
    if (err == NULL || errlen == 0) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

const char *const ctl__join_state_names[] = {"joining", "active", "leaving", "removed"};
const char *const ctl__node_status_names[] = {"alive", "suspect", "down"};
const char *const ctl__task_kind_names[] = {"replica_move", "leader_transfer",
                                            "hash_slot_migration", "controller_voter_promotion",
                                            "node_drain"};
const char *const ctl__task_status_names[] = {"pending", "running", "failed", "done"};
const size_t ctl__n_join_state_names = 4, ctl__n_node_status_names = 3, ctl__n_task_kind_names = 5,
             ctl__n_task_status_names = 4;

int ctl__name_index(const char *const *names, size_t n, const char *s)
{
    for (size_t i = 0; i < n; i++) {
        if (strcmp(names[i], s) == 0) {
            return (int)i;
        }
    }
    return -1;
}

static const char *name_of(const char *const *names, size_t n, unsigned v)
{
    return v < n ? names[v] : NULL;
}

const char *ctl_join_state_name(enum ctl_join_state v)
{
    return name_of(ctl__join_state_names, ctl__n_join_state_names, (unsigned)v);
}

const char *ctl_node_status_name(enum ctl_node_status v)
{
    return name_of(ctl__node_status_names, ctl__n_node_status_names, (unsigned)v);
}

const char *ctl_task_kind_name(enum ctl_task_kind v)
{
    return name_of(ctl__task_kind_names, ctl__n_task_kind_names, (unsigned)v);
}

const char *ctl_task_status_name(enum ctl_task_status v)
{
    return name_of(ctl__task_status_names, ctl__n_task_status_names, (unsigned)v);
}

/* Phase names by kind (index = enum ctl_task_kind); the last name of each list is "done". */
static const char *const move_phases[] = {"add_learner", "catch_up", "promote", "remove_source",
                                          "done"};
static const char *const transfer_phases[] = {"transfer", "done"};
static const char *const promotion_phases[] = {"add_learner", "catch_up", "promote", "done"};
static const char *const drain_phases[] = {"moving_replicas", "done"};
static const char *const migration_phases[] = {"fence", "copy", "release", "done"};
static const struct {
    const char *const *names;
    uint32_t n;
} phases[] = {
    [CTL_TASK_REPLICA_MOVE] = {move_phases, 5},
    [CTL_TASK_LEADER_TRANSFER] = {transfer_phases, 2},
    [CTL_TASK_HASH_SLOT_MIGRATION] = {migration_phases, 4},
    [CTL_TASK_CONTROLLER_VOTER_PROMOTION] = {promotion_phases, 4},
    [CTL_TASK_NODE_DRAIN] = {drain_phases, 2},
};

const char *ctl_task_phase_name(enum ctl_task_kind kind, uint32_t phase)
{
    if ((unsigned)kind >= sizeof(phases) / sizeof(phases[0]) || phase >= phases[kind].n) {
        return NULL;
    }
    return phases[kind].names[phase];
}

uint32_t ctl__task_done_phase(enum ctl_task_kind kind)
{
    if ((unsigned)kind >= sizeof(phases) / sizeof(phases[0]) || phases[kind].n == 0) {
        return 0;
    }
    return phases[kind].n - 1;
}

bool ctl__task_active(const struct ctl_task *t)
{
    return t->status == CTL_TASK_PENDING || t->status == CTL_TASK_RUNNING;
}

bool ctl__task_occupies(const struct ctl_task *t, uint32_t group)
{
    return group != 0 &&
           (t->group == group || (t->kind == CTL_TASK_HASH_SLOT_MIGRATION && t->to_group == group));
}

uint32_t ctl__slots_count(const uint8_t *bits)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < CTL_HASH_SLOT_BYTES; i++) {
        n += (uint32_t)__builtin_popcount(bits[i]);
    }
    return n;
}

uint32_t ctl__table_group(const struct ctl_hash_slot_table *table, uint32_t slot)
{
    size_t lo = 0, hi = table->n_ranges < CTL_HASH_SLOTS ? table->n_ranges : CTL_HASH_SLOTS;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct ctl_range *r = &table->ranges[mid];
        if (slot < r->first) {
            hi = mid;
        } else if (slot > r->last) {
            lo = mid + 1;
        } else {
            return r->group;
        }
    }
    return 0;
}

bool ctl__set_has(const uint64_t *v, uint32_t n, uint64_t id)
{
    for (uint32_t i = 0; i < n; i++) {
        if (v[i] == id) {
            return true;
        }
    }
    return false;
}

const char *ctl_outcome_name(enum ctl_outcome v)
{
    static const char *const names[] = {"changed", "updated", "noop", "rejected"};
    return name_of(names, 4, (unsigned)v);
}

void ctl_state_init(struct ctl_state *state)
{
    memset(state, 0, sizeof(*state));
    state->schema_version = CTL_SCHEMA_VERSION;
}

/* bsearch comparator: the uint64_t at key against the id of an element of nodes[] or tasks[]
 * (both sorted by id, which is each element's first member). */
_Static_assert(offsetof(struct ctl_node, id) == 0, "id_cmp reads a node's id at its start");
_Static_assert(offsetof(struct ctl_task, id) == 0, "id_cmp reads a task's id at its start");
static int id_cmp(const void *key, const void *elem)
{
    uint64_t a = *(const uint64_t *)key, b = *(const uint64_t *)elem;
    return (a > b) - (a < b);
}

const struct ctl_node *ctl_state_node(const struct ctl_state *state, uint64_t id)
{
    return bsearch(&id, state->nodes, state->n_nodes, sizeof(state->nodes[0]), id_cmp);
}

const struct ctl_group *ctl_state_group(const struct ctl_state *state, uint32_t id)
{
    if (id == 0 || id > state->n_groups) {
        return NULL;
    }
    return &state->groups[id - 1];
}

const struct ctl_task *ctl_state_task(const struct ctl_state *state, uint64_t id)
{
    return bsearch(&id, state->tasks, state->n_tasks, sizeof(state->tasks[0]), id_cmp);
}

const struct ctl_task *ctl_state_active_task(const struct ctl_state *state, uint32_t group)
{
    for (uint32_t i = 0; i < state->n_tasks; i++) {
        const struct ctl_task *t = &state->tasks[i];
        if (ctl__task_active(t) && (t->group == group || ctl__task_occupies(t, group))) {
            return t;
        }
    }
    return NULL;
}

uint32_t ctl__active_data_nodes(const struct ctl_state *state)
{
    uint32_t n = 0;
    for (uint32_t i = 0; i < state->n_nodes; i++) {
        const struct ctl_node *nd = &state->nodes[i];
        n += nd->join_state == CTL_JOIN_ACTIVE && (nd->roles & CTL_ROLE_DATA);
    }
    return n;
}

bool ctl__cluster_id_ok(const char *s)
{
    size_t n = strlen(s);
    if (n < 1 || n > CTL_CLUSTER_ID_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

/* "host:port": printable ASCII without spaces, a non-empty host, port 1..65535 in decimal. */
bool ctl__address_ok(const char *s)
{
    size_t n = strnlen(s, CTL_ADDRESS_MAX + 1);
    if (n < 3 || n > CTL_ADDRESS_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] < 0x21 || s[i] > 0x7e) {
            return false;
        }
    }
    const char *colon = strrchr(s, ':');
    if (colon == NULL || colon == s) {
        return false;
    }
    size_t digits = strlen(colon + 1);
    if (digits < 1 || digits > 5 || colon[1] == '0') {
        return false;
    }
    unsigned port = 0;
    for (const char *p = colon + 1; *p; p++) {
        if (*p < '0' || *p > '9') {
            return false;
        }
        port = port * 10 + (unsigned)(*p - '0');
    }
    return port >= 1 && port <= 65535;
}

bool ctl__utf8_ok(const char *s)
{
    const unsigned char *p = (const unsigned char *)s;
    while (*p) {
        unsigned c = *p, extra;
        uint32_t cp;
        if (c < 0x80) {
            p++;
            continue;
        } else if (c >= 0xC2 && c <= 0xDF) {
            extra = 1, cp = c & 0x1F;
        } else if (c >= 0xE0 && c <= 0xEF) {
            extra = 2, cp = c & 0x0F;
        } else if (c >= 0xF0 && c <= 0xF4) {
            extra = 3, cp = c & 0x07;
        } else {
            return false;
        }
        for (unsigned k = 1; k <= extra; k++) {
            if ((p[k] & 0xC0) != 0x80) {
                return false;
            }
            cp = (cp << 6) | (p[k] & 0x3F);
        }
        if ((extra == 2 && (cp < 0x800 || (cp >= 0xD800 && cp <= 0xDFFF))) ||
            (extra == 3 && (cp < 0x10000 || cp > 0x10FFFF))) {
            return false;
        }
        p += extra + 1;
    }
    return true;
}

/* ---- validation: each check writes "<field>: <what is wrong>" and returns CTL_ESTATE. ---- */

#define U64_OK(v) ((v) <= CTL_U64_JSON_MAX)

static int validate_empty(const struct ctl_state *s, char *err, size_t errlen)
{
    if (s->cluster_id[0] != '\0') {
        CTL__FAIL("cluster_id: must be \"\" while revision is 0 (not bootstrapped)");
    }
    if (s->config.slot_groups || s->config.hash_slots || s->config.replicas ||
        s->config.bootstrap_expect) {
        CTL__FAIL("config: must be all zeros while revision is 0 (not bootstrapped)");
    }
    if (s->n_nodes || s->n_groups || s->n_tasks || s->n_health || s->table.version ||
        s->table.n_ranges) {
        CTL__FAIL(
            "nodes, groups, hash_slot_table, tasks, health: must be empty while revision is 0 "
            "(not bootstrapped)");
    }
    if (s->next_task_id != 0) {
        CTL__FAIL("next_task_id: must be 0 while revision is 0 (not bootstrapped)");
    }
    if (s->backup.set || s->backup.run_id != 0) {
        CTL__FAIL("backup: must be absent while revision is 0 (not bootstrapped)");
    }
    return ctl__auth_validate(s, err, errlen);
}

static int validate_config(const struct ctl_config *c, char *err, size_t errlen)
{
    if (c->slot_groups < 1 || c->slot_groups > CTL_GROUPS_MAX) {
        CTL__FAIL("config.slot_groups: %u not in 1..%u", c->slot_groups, CTL_GROUPS_MAX);
    }
    if (c->hash_slots != CTL_HASH_SLOTS) {
        CTL__FAIL("config.hash_slots: %u is not %u", c->hash_slots, CTL_HASH_SLOTS);
    }
    if (c->replicas < 1 || c->replicas > CTL_REPLICAS_MAX) {
        CTL__FAIL("config.replicas: %u not in 1..%u", c->replicas, CTL_REPLICAS_MAX);
    }
    if (c->bootstrap_expect < 1 || c->bootstrap_expect > CTL_NODES_MAX) {
        CTL__FAIL("config.bootstrap_expect: %u not in 1..%u", c->bootstrap_expect, CTL_NODES_MAX);
    }
    return CTL_OK;
}

static int validate_node(const struct ctl_state *s, uint32_t i, char *err, size_t errlen)
{
    const struct ctl_node *n = &s->nodes[i];
    if (n->id < 1 || !U64_OK(n->id)) {
        CTL__FAIL("nodes[%u].id: %llu not in 1..%llu", i, (unsigned long long)n->id,
                  CTL_U64_JSON_MAX);
    }
    if (i > 0 && s->nodes[i - 1].id >= n->id) {
        CTL__FAIL("nodes[%u].id: %llu not above nodes[%u].id (nodes sorted by id, ids unique)", i,
                  (unsigned long long)n->id, i - 1);
    }
    if (memchr(n->address, '\0', sizeof(n->address)) == NULL || !ctl__address_ok(n->address)) {
        CTL__FAIL("nodes[%u].address: not \"host:port\" of at most %u bytes", i, CTL_ADDRESS_MAX);
    }
    for (uint32_t k = 0; k < i; k++) {
        if (strcmp(s->nodes[k].address, n->address) == 0) {
            CTL__FAIL("nodes[%u].address: %s is also the address of node %llu", i, n->address,
                      (unsigned long long)s->nodes[k].id);
        }
    }
    if (memchr(n->client_address, '\0', sizeof(n->client_address)) == NULL ||
        (n->client_address[0] != '\0' && !ctl__address_ok(n->client_address))) {
        CTL__FAIL("nodes[%u].client_address: not empty or \"host:port\" of at most %u bytes", i,
                  CTL_ADDRESS_MAX);
    }
    for (uint32_t k = 0; k < i && n->client_address[0] != '\0'; k++) {
        if (strcmp(s->nodes[k].client_address, n->client_address) == 0) {
            CTL__FAIL("nodes[%u].client_address: %s is also the client address of node %llu", i,
                      n->client_address, (unsigned long long)s->nodes[k].id);
        }
    }
    if (n->roles == 0 || (n->roles & ~(uint32_t)(CTL_ROLE_CONTROLLER_VOTER | CTL_ROLE_DATA))) {
        CTL__FAIL("nodes[%u].roles: must be a non-empty set of controller_voter, data", i);
    }
    if ((unsigned)n->join_state >= ctl__n_join_state_names) {
        CTL__FAIL("nodes[%u].join_state: %u is not joining|active|leaving|removed", i,
                  (unsigned)n->join_state);
    }
    if ((unsigned)n->status >= ctl__n_node_status_names) {
        CTL__FAIL("nodes[%u].status: %u is not alive|suspect|down", i, (unsigned)n->status);
    }
    if (n->weight < CTL_WEIGHT_MIN || n->weight > CTL_WEIGHT_MAX) {
        CTL__FAIL("nodes[%u].weight: %u not in %u..%u", i, n->weight, CTL_WEIGHT_MIN,
                  CTL_WEIGHT_MAX);
    }
    if (memchr(n->zone, '\0', sizeof(n->zone)) == NULL || !ctl_zone_valid(n->zone)) {
        CTL__FAIL("nodes[%u].zone: not 0..%u bytes of [a-z0-9._-]", i, CTL_ZONE_MAX);
    }
    return CTL_OK;
}

static int validate_nodes(const struct ctl_state *s, char *err, size_t errlen)
{
    if (s->n_nodes > CTL_NODES_MAX) {
        CTL__FAIL("nodes: %u entries, the limit is %u", s->n_nodes, CTL_NODES_MAX);
    }
    bool voter = false;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        int rc = validate_node(s, i, err, errlen);
        if (rc != CTL_OK) {
            return rc;
        }
        voter |= (s->nodes[i].roles & CTL_ROLE_CONTROLLER_VOTER) != 0;
    }
    if (!voter) {
        CTL__FAIL("nodes: no controller_voter (a bootstrapped cluster needs at least one)");
    }
    return CTL_OK;
}

/* A node that may host a replica: present, not removed, with the data role. */
static bool peer_ok(const struct ctl_state *s, uint64_t id)
{
    const struct ctl_node *n = ctl_state_node(s, id);
    return n != NULL && n->join_state != CTL_JOIN_REMOVED && (n->roles & CTL_ROLE_DATA);
}

static int validate_group(const struct ctl_state *s, uint32_t i, char *err, size_t errlen)
{
    const struct ctl_group *g = &s->groups[i];
    if (g->id != i + 1) {
        CTL__FAIL("groups[%u].id: %u is not %u (groups are 1..slot_groups in order)", i, g->id,
                  i + 1);
    }
    if (g->n_peers < 1 || g->n_peers > s->config.replicas) {
        CTL__FAIL("groups[%u].desired_peers: %u peers not in 1..%u (config.replicas)", i,
                  g->n_peers, s->config.replicas);
    }
    bool leader_in = false;
    for (uint32_t k = 0; k < g->n_peers; k++) {
        uint64_t p = g->desired_peers[k];
        if (k > 0 && g->desired_peers[k - 1] >= p) {
            CTL__FAIL("groups[%u].desired_peers[%u]: %llu not above the previous peer (sorted set)",
                      i, k, (unsigned long long)p);
        }
        if (!peer_ok(s, p)) {
            CTL__FAIL(
                "groups[%u].desired_peers[%u]: %llu is not an existing, non-removed data node", i,
                k, (unsigned long long)p);
        }
        leader_in |= p == g->preferred_leader;
    }
    if (g->config_epoch < 1 || !U64_OK(g->config_epoch)) {
        CTL__FAIL("groups[%u].config_epoch: %llu not in 1..%llu", i,
                  (unsigned long long)g->config_epoch, CTL_U64_JSON_MAX);
    }
    if (!leader_in) {
        CTL__FAIL("groups[%u].preferred_leader: %llu is not one of desired_peers", i,
                  (unsigned long long)g->preferred_leader);
    }
    return CTL_OK;
}

static int validate_groups_and_table(const struct ctl_state *s, char *err, size_t errlen)
{
    if (s->n_groups != 0 && s->n_groups != s->config.slot_groups) {
        CTL__FAIL("groups: %u entries, must be 0 (no placement) or %u (config.slot_groups)",
                  s->n_groups, s->config.slot_groups);
    }
    for (uint32_t i = 0; i < s->n_groups; i++) {
        int rc = validate_group(s, i, err, errlen);
        if (rc != CTL_OK) {
            return rc;
        }
    }
    const struct ctl_hash_slot_table *t = &s->table;
    if (!U64_OK(t->version)) {
        CTL__FAIL("hash_slot_table.version: %llu above %llu", (unsigned long long)t->version,
                  CTL_U64_JSON_MAX);
    }
    if ((t->version == 0) != (s->n_groups == 0)) {
        CTL__FAIL("hash_slot_table.version: %llu, but groups has %u entries (a placement has both)",
                  (unsigned long long)t->version, s->n_groups);
    }
    if (t->version == 0) {
        if (t->n_ranges != 0) {
            CTL__FAIL("hash_slot_table.ranges: must be empty when version is 0");
        }
        return CTL_OK;
    }
    if (t->n_ranges < 1 || t->n_ranges > CTL_HASH_SLOTS) {
        CTL__FAIL("hash_slot_table.ranges: %u entries not in 1..%u", t->n_ranges, CTL_HASH_SLOTS);
    }
    uint32_t next = 0;
    for (uint32_t i = 0; i < t->n_ranges; i++) {
        const struct ctl_range *r = &t->ranges[i];
        if (r->first != next) {
            CTL__FAIL("hash_slot_table.ranges[%u].first: %u is not %u (%s)", i, r->first, next,
                      r->first > next ? "gap" : "overlap");
        }
        if (r->last < r->first || r->last >= CTL_HASH_SLOTS) {
            CTL__FAIL("hash_slot_table.ranges[%u].last: %u not in %u..%u", i, r->last, r->first,
                      CTL_HASH_SLOTS - 1);
        }
        if (r->group < 1 || r->group > s->n_groups) {
            CTL__FAIL("hash_slot_table.ranges[%u].group: %u is not an existing group (1..%u)", i,
                      r->group, s->n_groups);
        }
        next = r->last + 1;
    }
    if (next != CTL_HASH_SLOTS) {
        CTL__FAIL("hash_slot_table.ranges: cover 0..%u, not 0..%u", next - 1, CTL_HASH_SLOTS - 1);
    }
    return CTL_OK;
}

/* v[0..n) is a sorted set of at most CTL_REPLICAS_MAX ids in 1..CTL_U64_JSON_MAX; existing
 * requires each to be a node of s. */
static int validate_id_set(const struct ctl_state *s, const uint64_t *v, uint32_t n, bool existing,
                           uint32_t i, const char *field, char *err, size_t errlen)
{
    if (n > CTL_REPLICAS_MAX) {
        CTL__FAIL("tasks[%u].%s: %u entries, the limit is %u", i, field, n, CTL_REPLICAS_MAX);
    }
    for (uint32_t k = 0; k < n; k++) {
        if (v[k] < 1 || !U64_OK(v[k]) || (k > 0 && v[k - 1] >= v[k]) ||
            (existing && ctl_state_node(s, v[k]) == NULL)) {
            CTL__FAIL("tasks[%u].%s[%u]: %llu is not %s above the previous entry (sorted set)", i,
                      field, k, (unsigned long long)v[k],
                      existing ? "an existing node" : "a node id");
        }
    }
    return CTL_OK;
}

/* The migration fields of task i: to_group and hash_slots only on a hash_slot_migration; there
 * to_group is another existing group, hash_slots non-empty, no source, target or participants,
 * and while active every slot maps to group (phases fence, copy) or to_group (release on). */
static int validate_migration(const struct ctl_state *s, uint32_t i, char *err, size_t errlen)
{
    const struct ctl_task *t = &s->tasks[i];
    uint32_t n_slots = ctl__slots_count(t->hash_slots);
    if (t->kind != CTL_TASK_HASH_SLOT_MIGRATION) {
        if (t->to_group != 0 || n_slots != 0) {
            CTL__FAIL("tasks[%u].%s: only a hash_slot_migration has it", i,
                      t->to_group != 0 ? "to_group" : "hash_slots");
        }
        return CTL_OK;
    }
    if (t->to_group < 1 || t->to_group > s->n_groups || t->to_group == t->group) {
        CTL__FAIL("tasks[%u].to_group: %u is not an existing group (1..%u) other than group %u", i,
                  t->to_group, s->n_groups, t->group);
    }
    if (n_slots == 0) {
        CTL__FAIL("tasks[%u].hash_slots: empty, a migration moves 1..%u hash slots", i,
                  CTL_HASH_SLOTS);
    }
    if (t->source != 0 || t->target != 0 || t->n_participants != 0) {
        CTL__FAIL("tasks[%u].source: a hash_slot_migration has no source, target or participants",
                  i);
    }
    if (!ctl__task_active(t)) {
        return CTL_OK;
    }
    uint32_t want = t->phase_index <= CTL_PHASE_MIGRATION_COPY ? t->group : t->to_group;
    for (uint32_t slot = 0; slot < CTL_HASH_SLOTS; slot++) {
        uint32_t got = ctl__table_group(&s->table, slot);
        if (CTL__SLOT_HAS(t->hash_slots, slot) && got != want) {
            CTL__FAIL("tasks[%u].hash_slots: hash slot %u maps to group %u in hash_slot_table, a "
                      "migration at phase %s needs group %u",
                      i, slot, got, ctl_task_phase_name(t->kind, t->phase_index), want);
        }
    }
    return CTL_OK;
}

/* Who the task is about (source, target, previous voters) and its raft proof and progress. */
static int validate_task_facts(const struct ctl_state *s, uint32_t i, char *err, size_t errlen)
{
    const struct ctl_task *t = &s->tasks[i];
    uint32_t done = ctl__task_done_phase(t->kind);
    if (done != 0 && t->phase_index > done) {
        CTL__FAIL("tasks[%u].phase_index: %u not in 0..%u (%s)", i, t->phase_index, done,
                  ctl_task_kind_name(t->kind));
    }
    if (done != 0 && (t->status == CTL_TASK_DONE) != (t->phase_index == done)) {
        CTL__FAIL("tasks[%u].status: %s at phase %u, a %s task is done exactly at phase %u", i,
                  ctl_task_status_name(t->status), t->phase_index, ctl_task_kind_name(t->kind),
                  done);
    }
    const uint64_t ends[2] = {t->source, t->target};
    for (int k = 0; k < 2; k++) {
        if (ends[k] != 0 && ctl_state_node(s, ends[k]) == NULL) {
            CTL__FAIL("tasks[%u].%s: %llu is not an existing node", i, k ? "target" : "source",
                      (unsigned long long)ends[k]);
        }
    }
    bool promotion = t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION;
    if (!promotion && t->n_previous_voters != 0) {
        CTL__FAIL("tasks[%u].previous_voters: only a controller_voter_promotion has them", i);
    }
    int rc = validate_id_set(s, t->previous_voters, t->n_previous_voters, true, i,
                             "previous_voters", err, errlen);
    if (rc == CTL_OK) {
        rc = validate_id_set(s, t->proof.voters, t->proof.n_voters, false, i, "proof.voters", err,
                             errlen);
    }
    if (rc == CTL_OK) {
        rc = validate_id_set(s, t->proof.learners, t->proof.n_learners, false, i, "proof.learners",
                             err, errlen);
    }
    if (rc != CTL_OK) {
        return rc;
    }
    const struct ctl_task_proof *p = &t->proof;
    const struct ctl_task_progress *g = &t->progress;
    if (!U64_OK(p->config_index) || !U64_OK(p->leader) || !U64_OK(p->commit) ||
        !U64_OK(p->target_match)) {
        CTL__FAIL("tasks[%u].proof: a number above %llu", i, CTL_U64_JSON_MAX);
    }
    if (!U64_OK(g->bytes_sent) || !U64_OK(g->bytes_total) || !U64_OK(g->target_match) ||
        !U64_OK(g->commit)) {
        CTL__FAIL("tasks[%u].progress: a number above %llu", i, CTL_U64_JSON_MAX);
    }
    return validate_migration(s, i, err, errlen);
}

static int validate_task(const struct ctl_state *s, uint32_t i, char *err, size_t errlen)
{
    const struct ctl_task *t = &s->tasks[i];
    if (t->id < 1 || !U64_OK(t->id)) {
        CTL__FAIL("tasks[%u].id: %llu not in 1..%llu", i, (unsigned long long)t->id,
                  CTL_U64_JSON_MAX);
    }
    if (i > 0 && s->tasks[i - 1].id >= t->id) {
        CTL__FAIL("tasks[%u].id: %llu not above tasks[%u].id (tasks sorted by id, ids unique)", i,
                  (unsigned long long)t->id, i - 1);
    }
    if ((unsigned)t->kind >= ctl__n_task_kind_names) {
        CTL__FAIL("tasks[%u].kind: %u is not a task kind", i, (unsigned)t->kind);
    }
    bool needs_group = t->kind == CTL_TASK_REPLICA_MOVE || t->kind == CTL_TASK_LEADER_TRANSFER ||
                       t->kind == CTL_TASK_HASH_SLOT_MIGRATION;
    if ((needs_group || t->group != 0) && (t->group < 1 || t->group > s->n_groups)) {
        CTL__FAIL("tasks[%u].group: %u is not an existing group (1..%u)", i, t->group, s->n_groups);
    }
    if (t->phase_index >= CTL_TASK_PHASES_MAX) {
        CTL__FAIL("tasks[%u].phase_index: %u not in 0..%u", i, t->phase_index,
                  CTL_TASK_PHASES_MAX - 1);
    }
    if (!U64_OK(t->config_epoch)) {
        CTL__FAIL("tasks[%u].config_epoch: %llu above %llu", i, (unsigned long long)t->config_epoch,
                  CTL_U64_JSON_MAX);
    }
    if (t->attempt < 1 || t->attempt > CTL_TASK_ATTEMPTS_MAX) {
        CTL__FAIL("tasks[%u].attempt: %u not in 1..%u", i, t->attempt, CTL_TASK_ATTEMPTS_MAX);
    }
    if ((unsigned)t->status >= ctl__n_task_status_names) {
        CTL__FAIL("tasks[%u].status: %u is not pending|running|failed|done", i,
                  (unsigned)t->status);
    }
    if (memchr(t->last_error, '\0', sizeof(t->last_error)) == NULL ||
        !ctl__utf8_ok(t->last_error)) {
        CTL__FAIL("tasks[%u].last_error: not UTF-8 text of at most %u bytes", i,
                  CTL_LAST_ERROR_MAX);
    }
    if (t->n_participants > CTL_PARTICIPANTS_MAX) {
        CTL__FAIL("tasks[%u].participants: %u entries, the limit is %u", i, t->n_participants,
                  CTL_PARTICIPANTS_MAX);
    }
    for (uint32_t k = 0; k < t->n_participants; k++) {
        uint64_t p = t->participants[k];
        if ((k > 0 && t->participants[k - 1] >= p) || ctl_state_node(s, p) == NULL) {
            CTL__FAIL("tasks[%u].participants[%u]: %llu is not an existing node above the previous "
                      "entry (sorted set)",
                      i, k, (unsigned long long)p);
        }
    }
    if (!U64_OK(t->updated_ms) || t->created_ms > t->updated_ms) {
        CTL__FAIL("tasks[%u].updated_ms: %llu not in created_ms..%llu", i,
                  (unsigned long long)t->updated_ms, CTL_U64_JSON_MAX);
    }
    if (t->id >= s->next_task_id) {
        CTL__FAIL("tasks[%u].id: %llu not below next_task_id %llu", i, (unsigned long long)t->id,
                  (unsigned long long)s->next_task_id);
    }
    return validate_task_facts(s, i, err, errlen);
}

static int validate_tasks(const struct ctl_state *s, char *err, size_t errlen)
{
    if (s->n_tasks > CTL_TASKS_MAX) {
        CTL__FAIL("tasks: %u entries, the limit is %u", s->n_tasks, CTL_TASKS_MAX);
    }
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        int rc = validate_task(s, i, err, errlen);
        if (rc != CTL_OK) {
            return rc;
        }
        const struct ctl_task *t = &s->tasks[i];
        for (uint32_t k = 0; ctl__task_active(t) && k < i; k++) {
            const struct ctl_task *o = &s->tasks[k];
            if (!ctl__task_active(o)) {
                continue;
            }
            uint32_t shared = ctl__task_occupies(o, t->group) ? t->group : 0;
            if (shared == 0 && t->kind == CTL_TASK_HASH_SLOT_MIGRATION &&
                ctl__task_occupies(o, t->to_group)) {
                shared = t->to_group;
            }
            if (shared != 0) {
                CTL__FAIL("tasks[%u]: group %u already has active task %llu (one active task per "
                          "group)",
                          i, shared, (unsigned long long)o->id);
            }
            if (o->kind == t->kind && t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION) {
                CTL__FAIL("tasks[%u]: controller_voter_promotion %llu is already active (one at a "
                          "time)",
                          i, (unsigned long long)o->id);
            }
            if (o->kind == t->kind && t->kind == CTL_TASK_NODE_DRAIN && o->source == t->source) {
                CTL__FAIL(
                    "tasks[%u]: node_drain %llu of node %llu is already active (one per node)", i,
                    (unsigned long long)o->id, (unsigned long long)t->source);
            }
        }
    }
    return CTL_OK;
}

static int validate_health(const struct ctl_state *s, char *err, size_t errlen)
{
    if (s->n_health > s->n_nodes) {
        CTL__FAIL("health: %u entries, the limit is one per node (%u)", s->n_health, s->n_nodes);
    }
    for (uint32_t i = 0; i < s->n_health; i++) {
        const struct ctl_health *h = &s->health[i];
        if ((i > 0 && s->health[i - 1].node >= h->node) || ctl_state_node(s, h->node) == NULL) {
            CTL__FAIL("health[%u].node: %llu is not an existing node above the previous entry (one "
                      "report per node, sorted)",
                      i, (unsigned long long)h->node);
        }
        if (!U64_OK(h->reported_at_ms)) {
            CTL__FAIL("health[%u].reported_at_ms: %llu above %llu", i,
                      (unsigned long long)h->reported_at_ms, CTL_U64_JSON_MAX);
        }
        if (h->ttl_ms < 1 || h->ttl_ms > CTL_HEALTH_TTL_MS_MAX) {
            CTL__FAIL("health[%u].ttl_ms: %llu not in 1..%u", i, (unsigned long long)h->ttl_ms,
                      CTL_HEALTH_TTL_MS_MAX);
        }
    }
    return CTL_OK;
}

int ctl_state_validate(const struct ctl_state *s, char *err, size_t errlen)
{
    if (s->schema_version != CTL_SCHEMA_VERSION) {
        CTL__FAIL("schema_version: %u is not %u", s->schema_version, CTL_SCHEMA_VERSION);
    }
    if (!U64_OK(s->revision)) {
        CTL__FAIL("revision: %llu above %llu", (unsigned long long)s->revision, CTL_U64_JSON_MAX);
    }
    if (!U64_OK(s->applied_raft_index)) {
        CTL__FAIL("applied_raft_index: %llu above %llu", (unsigned long long)s->applied_raft_index,
                  CTL_U64_JSON_MAX);
    }
    if (memchr(s->cluster_id, '\0', sizeof(s->cluster_id)) == NULL) {
        CTL__FAIL("cluster_id: longer than %u bytes", CTL_CLUSTER_ID_MAX);
    }
    if (s->revision == 0) {
        return validate_empty(s, err, errlen);
    }
    if (!ctl__cluster_id_ok(s->cluster_id)) {
        CTL__FAIL("cluster_id: \"%s\" is not 1..%u characters of [A-Za-z0-9._-]", s->cluster_id,
                  CTL_CLUSTER_ID_MAX);
    }
    if (s->next_task_id < 1 || !U64_OK(s->next_task_id)) {
        CTL__FAIL("next_task_id: %llu not in 1..%llu", (unsigned long long)s->next_task_id,
                  CTL_U64_JSON_MAX);
    }
    int rc = validate_config(&s->config, err, errlen);
    if (rc == CTL_OK) {
        rc = validate_nodes(s, err, errlen);
    }
    if (rc == CTL_OK) {
        rc = validate_groups_and_table(s, err, errlen);
    }
    if (rc == CTL_OK) {
        rc = validate_tasks(s, err, errlen);
    }
    if (rc == CTL_OK) {
        rc = validate_health(s, err, errlen);
    }
    if (rc == CTL_OK) {
        rc = ctl__auth_validate(s, err, errlen);
    }
    if (rc == CTL_OK) {
        rc = ctl__backup_validate(s, err, errlen);
    }
    return rc;
}
