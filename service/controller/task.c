/* task.c - task commands: task_create, task_progress, task_fail, task_retry and the shared fence.
 */
#include <stdio.h>
#include <string.h>

#include "internal.h"

uint64_t ctl__task_now(const struct ctl_task *t, const json_t *cmd)
{
    json_int_t now = json_integer_value(json_object_get(cmd, "now_ms"));
    return (uint64_t)now > t->updated_ms ? (uint64_t)now : t->updated_ms;
}

/* The first active task other than self that occupies group (when group != 0; a migration
 * occupies its to_group too), or is of kind with node as its subject (when node != 0). Borrowed
 * from s. */
static const struct ctl_task *other_active(const struct ctl_state *s, const struct ctl_task *self,
                                           uint32_t group, enum ctl_task_kind kind, uint64_t node)
{
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *o = &s->tasks[i];
        if (o == self || !ctl__task_active(o)) {
            continue;
        }
        if (ctl__task_occupies(o, group)) {
            return o;
        }
        if (group == 0 && o->kind == kind && (node == 0 || o->source == node)) {
            return o;
        }
    }
    return NULL;
}

/* ---- fence ---- */

struct ctl_task *ctl__task_fence(struct ctl_state *s, const json_t *cmd, bool with_group,
                                 struct ctl_result *r)
{
    uint64_t id, epoch = 0;
    uint32_t attempt, phase, group = 0;
    if (ctl__json_u64(cmd, "task", "", 1, CTL_U64_JSON_MAX, &id, CTL__RS(r)) != CTL_OK ||
        ctl__json_u32(cmd, "attempt", "", 0, UINT32_MAX, &attempt, CTL__RS(r)) != CTL_OK ||
        ctl__json_u32(cmd, "phase", "", 0, UINT32_MAX, &phase, CTL__RS(r)) != CTL_OK ||
        (with_group &&
         (ctl__json_u32(cmd, "group", "", 0, UINT32_MAX, &group, CTL__RS(r)) != CTL_OK ||
          ctl__json_u64(cmd, "config_epoch", "", 0, CTL_U64_JSON_MAX, &epoch, CTL__RS(r)) !=
              CTL_OK))) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return NULL;
    }
    struct ctl_task *t = (struct ctl_task *)ctl_state_task(s, id);
    const struct ctl_group *g = t != NULL ? ctl_state_group(s, t->group) : NULL;
    if (t == NULL) {
        CTL__NOOP(r, "stale fence: task %llu does not exist (never created, or evicted)",
                  CTL__ULL(id));
    } else if (t->status != CTL_TASK_RUNNING) {
        CTL__NOOP(r, "stale fence: task %llu is %s, not running", CTL__ULL(id),
                  ctl_task_status_name(t->status));
    } else if (with_group && group != t->group) {
        CTL__NOOP(r, "stale fence: task %llu is for group %u, the command names group %u",
                  CTL__ULL(id), t->group, group);
    } else if (with_group && epoch != t->config_epoch) {
        CTL__NOOP(r, "stale fence: task %llu has config_epoch %llu, the command has %llu",
                  CTL__ULL(id), CTL__ULL(t->config_epoch), CTL__ULL(epoch));
    } else if (with_group && g != NULL && g->config_epoch != epoch) {
        CTL__NOOP(r, "stale fence: group %u is at config_epoch %llu, the command has %llu",
                  t->group, CTL__ULL(g->config_epoch), CTL__ULL(epoch));
    } else if (attempt != t->attempt) {
        CTL__NOOP(r, "stale fence: task %llu is at attempt %u, the command has %u", CTL__ULL(id),
                  t->attempt, attempt);
    } else if (phase != t->phase_index) {
        CTL__NOOP(r, "stale fence: task %llu is at phase %u (%s), the command has %u", CTL__ULL(id),
                  t->phase_index, ctl_task_phase_name(t->kind, t->phase_index), phase);
    } else {
        return t;
    }
    return NULL;
}

/* ---- task_create ---- */

/* Rejects fields the kind does not use and missing ones it needs. */
static bool kind_fields_ok(const json_t *cmd, enum ctl_task_kind kind, struct ctl_result *r)
{
    static const char *const fields[] = {"group", "source",     "target",
                                         "node",  "hash_slots", "to_group"};
    /* bit i: the kind uses fields[i] (index = enum ctl_task_kind) */
    static const unsigned used[] = {
        [CTL_TASK_REPLICA_MOVE] = 0x07,               /* group, source, target */
        [CTL_TASK_LEADER_TRANSFER] = 0x07,            /* group, source, target */
        [CTL_TASK_HASH_SLOT_MIGRATION] = 0x30,        /* hash_slots, to_group */
        [CTL_TASK_CONTROLLER_VOTER_PROMOTION] = 0x08, /* node */
        [CTL_TASK_NODE_DRAIN] = 0x08,                 /* node */
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        bool present = json_object_get(cmd, fields[i]) != NULL;
        if (present != ((used[kind] >> i) & 1u)) {
            CTL__REJECT(r, "%s: %s for a %s task", fields[i], present ? "not a field" : "missing",
                        ctl_task_kind_name(kind));
            return false;
        }
    }
    return true;
}

/* Writes the sorted set of the nonzero a, b into t->participants. */
static void set_participants(struct ctl_task *t, uint64_t a, uint64_t b)
{
    uint64_t lo = a < b ? a : b, hi = a < b ? b : a;
    t->n_participants = 0;
    if (lo != 0) {
        t->participants[t->n_participants++] = lo;
    }
    if (hi != 0 && hi != lo) {
        t->participants[t->n_participants++] = hi;
    }
}

/* Reads "group", "source" (min_source..) and "target" and checks the group is free of active
 * tasks. Returns the group (borrowed from s) or NULL with r rejected. */
static struct ctl_group *read_group_task(struct ctl_state *s, const json_t *cmd,
                                         uint64_t min_source, struct ctl_task *t,
                                         struct ctl_result *r)
{
    if (ctl__json_u32(cmd, "group", "", 1, UINT32_MAX, &t->group, CTL__RS(r)) != CTL_OK ||
        ctl__json_u64(cmd, "source", "", min_source, CTL_U64_JSON_MAX, &t->source, CTL__RS(r)) !=
            CTL_OK ||
        ctl__json_u64(cmd, "target", "", 1, CTL_U64_JSON_MAX, &t->target, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return NULL;
    }
    struct ctl_group *g = (struct ctl_group *)ctl_state_group(s, t->group);
    const struct ctl_task *busy = g != NULL ? ctl_state_active_task(s, t->group) : NULL;
    if (g == NULL) {
        CTL__REJECT(r, "group: %u does not exist (groups are 1..%u)", t->group, s->n_groups);
    } else if (busy != NULL) {
        CTL__REJECT(r, "group: %u already has active task %llu (%s)", t->group, CTL__ULL(busy->id),
                    ctl_task_kind_name(busy->kind));
        g = NULL;
    } else {
        t->config_epoch = g->config_epoch;
        set_participants(t, t->source, t->target);
    }
    return g;
}

static int create_replica_move(struct ctl_state *s, const json_t *cmd, struct ctl_task *t,
                               struct ctl_result *r)
{
    const struct ctl_group *g = read_group_task(s, cmd, 1, t, r);
    if (g == NULL) {
        return CTL_OK;
    }
    const struct ctl_node *n = ctl_state_node(s, t->target);
    if (!ctl__set_has(g->desired_peers, g->n_peers, t->source)) {
        return CTL__REJECT(r, "source: node %llu is not a desired peer of group %u",
                           CTL__ULL(t->source), g->id);
    }
    if (n == NULL) {
        return CTL__REJECT(r, "target: node %llu is unknown", CTL__ULL(t->target));
    }
    if (n->join_state != CTL_JOIN_ACTIVE || !(n->roles & CTL_ROLE_DATA)) {
        return CTL__REJECT(r,
                           "target: node %llu is %s%s, a replica moves only to an active data node",
                           CTL__ULL(n->id), ctl_join_state_name(n->join_state),
                           (n->roles & CTL_ROLE_DATA) ? "" : " without the data role");
    }
    if (ctl__set_has(g->desired_peers, g->n_peers, t->target)) {
        return CTL__REJECT(r, "target: node %llu is already a desired peer of group %u",
                           CTL__ULL(n->id), g->id);
    }
    if (n->status == CTL_STATUS_DOWN) {
        return CTL__REJECT(r, "target: node %llu is down", CTL__ULL(n->id));
    }
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int create_leader_transfer(struct ctl_state *s, const json_t *cmd, struct ctl_task *t,
                                  struct ctl_result *r)
{
    struct ctl_group *g = read_group_task(s, cmd, 0, t, r);
    if (g == NULL) {
        return CTL_OK;
    }
    if (!ctl__set_has(g->desired_peers, g->n_peers, t->target)) {
        return CTL__REJECT(r, "target: node %llu is not a desired peer of group %u",
                           CTL__ULL(t->target), g->id);
    }
    if (t->source != 0 && !ctl__set_has(g->desired_peers, g->n_peers, t->source)) {
        return CTL__REJECT(
            r, "source: node %llu is not a desired peer of group %u (0 = leader unknown)",
            CTL__ULL(t->source), g->id);
    }
    if (t->source == t->target) {
        return CTL__REJECT(r, "target: node %llu is the source, the observed leader already",
                           CTL__ULL(t->target));
    }
    g->preferred_leader = t->target;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* Counts the controller voters of s and writes the first CTL_REPLICAS_MAX of them (sorted, as
 * nodes are) into out[0..*n). */
static uint32_t controller_voters(const struct ctl_state *s, uint64_t *out, uint32_t *n)
{
    uint32_t count = 0;
    *n = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (s->nodes[i].roles & CTL_ROLE_CONTROLLER_VOTER) {
            if (*n < CTL_REPLICAS_MAX) {
                out[(*n)++] = s->nodes[i].id;
            }
            count++;
        }
    }
    return count;
}

static int create_promotion(struct ctl_state *s, const json_t *cmd, struct ctl_task *t,
                            struct ctl_result *r)
{
    const struct ctl_node *n = ctl__existing_node(s, cmd, "node", r);
    if (n == NULL) {
        return CTL_OK;
    }
    if (n->join_state != CTL_JOIN_ACTIVE || !(n->roles & CTL_ROLE_DATA)) {
        return CTL__REJECT(r, "node: node %llu is %s%s, only an active data node can be promoted",
                           CTL__ULL(n->id), ctl_join_state_name(n->join_state),
                           (n->roles & CTL_ROLE_DATA) ? "" : " without the data role");
    }
    if (n->roles & CTL_ROLE_CONTROLLER_VOTER) {
        return CTL__REJECT(r, "node: node %llu is already a controller voter", CTL__ULL(n->id));
    }
    const struct ctl_task *o = other_active(s, NULL, 0, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0);
    if (o != NULL) {
        return CTL__REJECT(
            r, "node: controller_voter_promotion %llu (node %llu) is active, one at a time",
            CTL__ULL(o->id), CTL__ULL(o->target));
    }
    if (controller_voters(s, t->previous_voters, &t->n_previous_voters) >= CTL_REPLICAS_MAX) {
        return CTL__REJECT(r, "controller voters: already %u, the limit (CTL_REPLICAS_MAX)",
                           CTL_REPLICAS_MAX);
    }
    t->target = n->id;
    set_participants(t, n->id, 0);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int create_drain(struct ctl_state *s, const json_t *cmd, struct ctl_task *t,
                        struct ctl_result *r)
{
    struct ctl_node *n = ctl__existing_node(s, cmd, "node", r);
    if (n == NULL) {
        return CTL_OK;
    }
    if (n->join_state == CTL_JOIN_JOINING) {
        return CTL__REJECT(
            r, "node: node %llu is joining, only an active or leaving node can be drained",
            CTL__ULL(n->id));
    }
    if (n->roles & CTL_ROLE_CONTROLLER_VOTER) {
        return CTL__REJECT(r, "node: node %llu is a controller voter: demote it first",
                           CTL__ULL(n->id));
    }
    const struct ctl_task *o = other_active(s, NULL, 0, CTL_TASK_NODE_DRAIN, n->id);
    if (o != NULL) {
        return CTL__REJECT(r, "node: node_drain %llu of node %llu is already active",
                           CTL__ULL(o->id), CTL__ULL(n->id));
    }
    o = other_active(s, NULL, 0, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0);
    if (o != NULL && o->target == n->id) {
        return CTL__REJECT(r, "node: controller_voter_promotion %llu of node %llu is active",
                           CTL__ULL(o->id), CTL__ULL(n->id));
    }
    n->join_state = CTL_JOIN_LEAVING;
    t->source = n->id;
    set_participants(t, n->id, 0);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* cmd "hash_slots": 1..CTL_HASH_SLOTS distinct hash slots, any order, into the bitmap bits. false
 * with r rejected otherwise. */
static bool read_hash_slots(const json_t *cmd, uint8_t *bits, struct ctl_result *r)
{
    json_t *arr;
    if (ctl__json_array(cmd, "hash_slots", "", CTL_HASH_SLOTS, &arr, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return false;
    }
    if (json_array_size(arr) == 0) {
        CTL__REJECT(r, "hash_slots: empty, name 1..%u hash slots", CTL_HASH_SLOTS);
        return false;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        json_int_t slot = json_is_integer(v) ? json_integer_value(v) : -1;
        if (slot < 0 || slot >= CTL_HASH_SLOTS) {
            CTL__REJECT(r, "hash_slots[%zu]: expected a hash slot in 0..%u", i, CTL_HASH_SLOTS - 1);
            return false;
        }
        if (CTL__SLOT_HAS(bits, (uint32_t)slot)) {
            CTL__REJECT(r, "hash_slots: hash slot %u listed twice", (unsigned)slot);
            return false;
        }
        CTL__SLOT_ADD(bits, (uint32_t)slot);
    }
    return true;
}

/* hash_slot_migration {hash_slots, to_group}: the slots' one owner (the source) is t->group. */
static int create_migration(struct ctl_state *s, const json_t *cmd, struct ctl_task *t,
                            struct ctl_result *r)
{
    if (s->table.version == 0) {
        return CTL__REJECT(r, "hash_slots: no hash-slot table yet (version 0, placement not made)");
    }
    if (!read_hash_slots(cmd, t->hash_slots, r)) {
        return CTL_OK;
    }
    CTL__READ(r, ctl__json_u32(cmd, "to_group", "", 0, UINT32_MAX, &t->to_group, CTL__RS(r)));
    if (ctl_state_group(s, t->to_group) == NULL) {
        return CTL__REJECT(r, "to_group: %u does not exist (groups are 1..%u)", t->to_group,
                           s->n_groups);
    }
    for (uint32_t slot = 0; slot < CTL_HASH_SLOTS; slot++) {
        uint32_t owner = ctl__table_group(&s->table, slot);
        if (!CTL__SLOT_HAS(t->hash_slots, slot) || owner == t->group) {
            continue;
        }
        if (t->group != 0) {
            return CTL__REJECT(r,
                               "hash_slots: owned by groups %u and %u; one task moves the slots of "
                               "one group",
                               t->group < owner ? t->group : owner,
                               t->group < owner ? owner : t->group);
        }
        t->group = owner;
    }
    if (t->group == t->to_group) {
        return CTL__REJECT(r, "to_group: the hash slots are already owned by group %u",
                           t->to_group);
    }
    const struct ctl_task *busy = ctl_state_active_task(s, t->group);
    if (busy != NULL) {
        return CTL__REJECT(r, "hash_slots: source group %u already has active task %llu (%s)",
                           t->group, CTL__ULL(busy->id), ctl_task_kind_name(busy->kind));
    }
    busy = ctl_state_active_task(s, t->to_group);
    if (busy != NULL) {
        return CTL__REJECT(r, "to_group: %u already has active task %llu (%s)", t->to_group,
                           CTL__ULL(busy->id), ctl_task_kind_name(busy->kind));
    }
    t->config_epoch = ctl_state_group(s, t->group)->config_epoch;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* Frees a slot when the task list is full: evicts the oldest done task, else the oldest failed
 * one. false with r rejected when every task is active. */
static bool make_room(struct ctl_state *s, struct ctl_result *r)
{
    if (s->n_tasks < CTL_TASKS_MAX) {
        return true;
    }
    static const enum ctl_task_status order[] = {CTL_TASK_DONE, CTL_TASK_FAILED};
    for (size_t k = 0; k < 2; k++) {
        for (uint32_t i = 0; i < s->n_tasks; i++) {
            if (s->tasks[i].status == order[k]) {
                memmove(&s->tasks[i], &s->tasks[i + 1], (s->n_tasks - i - 1) * sizeof(s->tasks[0]));
                s->n_tasks--;
                return true;
            }
        }
    }
    CTL__REJECT(r, "tasks: all %u are active (CTL_TASKS_MAX), wait for one to finish",
                CTL_TASKS_MAX);
    return false;
}

int ctl__op_task_create(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    int kind;
    CTL__READ(r, ctl__json_enum(cmd, "kind", "", ctl__task_kind_names, ctl__n_task_kind_names,
                                &kind, CTL__RS(r)));
    if (!kind_fields_ok(cmd, (enum ctl_task_kind)kind, r)) {
        return CTL_OK;
    }
    if (kind == CTL_TASK_HASH_SLOT_MIGRATION && !s->features.hash_slot_migration) {
        return CTL__REJECT(r, "%s", CTL__MIGRATION_OFF);
    }
    struct ctl_task t;
    memset(&t, 0, sizeof(t));
    t.kind = (enum ctl_task_kind)kind;
    static int (*const create[])(struct ctl_state *, const json_t *, struct ctl_task *,
                                 struct ctl_result *) = {
        [CTL_TASK_REPLICA_MOVE] = create_replica_move,
        [CTL_TASK_LEADER_TRANSFER] = create_leader_transfer,
        [CTL_TASK_HASH_SLOT_MIGRATION] = create_migration,
        [CTL_TASK_CONTROLLER_VOTER_PROMOTION] = create_promotion,
        [CTL_TASK_NODE_DRAIN] = create_drain,
    };
    create[kind](s, cmd, &t, r);
    if (r->outcome != CTL_OUTCOME_CHANGED || !make_room(s, r)) {
        return CTL_OK;
    }
    t.id = s->next_task_id++;
    t.status = CTL_TASK_RUNNING;
    t.attempt = 1;
    t.created_ms = t.updated_ms = ctl__task_now(&t, cmd);
    s->tasks[s->n_tasks++] = t;
    r->task_id = t.id;
    return CTL_OK;
}

/* ---- task_progress, task_fail, task_retry ---- */

int ctl__op_task_progress(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    static const char *const fields[] = {"bytes_sent", "bytes_total", "target_match", "commit"};
    struct ctl_task *t = ctl__task_fence(s, cmd, false, r);
    if (t == NULL || !ctl__expected_revision_ok(s, cmd, false, r)) {
        return CTL_OK;
    }
    struct ctl_task_progress p;
    const json_t *o = json_object_get(cmd, "progress");
    CTL__READ(r, ctl__json_fields(o, "progress", fields, 4, NULL, 0, CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(o, "bytes_sent", "progress", 0, CTL_U64_JSON_MAX, &p.bytes_sent,
                               CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(o, "bytes_total", "progress", 0, CTL_U64_JSON_MAX, &p.bytes_total,
                               CTL__RS(r)));
    CTL__READ(r, ctl__json_u64(o, "target_match", "progress", 0, CTL_U64_JSON_MAX, &p.target_match,
                               CTL__RS(r)));
    CTL__READ(r,
              ctl__json_u64(o, "commit", "progress", 0, CTL_U64_JSON_MAX, &p.commit, CTL__RS(r)));
    uint64_t now = ctl__task_now(t, cmd);
    if (memcmp(&p, &t->progress, sizeof(p)) == 0 && now == t->updated_ms) {
        return CTL__NOOP(r, "task %llu: same progress", CTL__ULL(t->id));
    }
    t->progress = p;
    t->updated_ms = now;
    r->outcome = CTL_OUTCOME_UPDATED;
    return CTL_OK;
}

int ctl__op_task_fail(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char error[CTL_LAST_ERROR_MAX + 1] = ""; /* zero-filled: the whole buffer is copied */
    struct ctl_task *t = ctl__task_fence(s, cmd, false, r);
    if (t == NULL || !ctl__expected_revision_ok(s, cmd, false, r)) {
        return CTL_OK;
    }
    CTL__READ(r, ctl__json_str(cmd, "error", "", CTL_LAST_ERROR_MAX, error, CTL__RS(r)));
    if (error[0] == '\0' || !ctl__utf8_ok(error)) {
        return CTL__REJECT(r, "error: must be 1..%u bytes of UTF-8 saying what failed",
                           CTL_LAST_ERROR_MAX);
    }
    t->status = CTL_TASK_FAILED;
    memcpy(t->last_error, error, sizeof(error));
    t->updated_ms = ctl__task_now(t, cmd);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* A failed migration before the table switch (fence, copy) restarts at fence: its slots must still
 * map to the source. One that failed at release stays there: its slots must still map to
 * to_group. false with r rejected when the table moved on. */
static bool migration_retry_ok(struct ctl_state *s, struct ctl_task *t, struct ctl_result *r)
{
    bool switched = t->phase_index >= CTL_PHASE_MIGRATION_RELEASE;
    uint32_t want = switched ? t->to_group : t->group;
    for (uint32_t slot = 0; slot < CTL_HASH_SLOTS; slot++) {
        uint32_t owner = ctl__table_group(&s->table, slot);
        if (CTL__SLOT_HAS(t->hash_slots, slot) && owner != want) {
            CTL__REJECT(r,
                        "task %llu: hash slot %u is owned by group %u now, not group %u; create a "
                        "new task",
                        CTL__ULL(t->id), slot, owner, want);
            return false;
        }
    }
    if (!switched) {
        t->phase_index = CTL_PHASE_MIGRATION_FENCE;
    }
    return true;
}

/* The task cmd's "task" names (in s, borrowed for the call); NULL with r REJECTED when the field
 * is bad or there is no such task. */
static struct ctl_task *task_named(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    uint64_t id;
    if (ctl__json_u64(cmd, "task", "", 1, CTL_U64_JSON_MAX, &id, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return NULL;
    }
    struct ctl_task *t = (struct ctl_task *)ctl_state_task(s, id);
    if (t == NULL) {
        CTL__REJECT(r, "task: %llu does not exist (never created, or evicted)", CTL__ULL(id));
    }
    return t;
}

int ctl__op_task_retry(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_task *t = task_named(s, cmd, r);
    if (t == NULL) {
        return CTL_OK;
    }
    uint64_t id = t->id;
    if (t->status != CTL_TASK_FAILED) {
        return CTL__REJECT(r, "task %llu is %s, only a failed task can be retried", CTL__ULL(id),
                           ctl_task_status_name(t->status));
    }
    if (t->attempt >= CTL_TASK_ATTEMPTS_MAX) {
        return CTL__REJECT(r, "task %llu: attempt %u is the limit (CTL_TASK_ATTEMPTS_MAX)",
                           CTL__ULL(id), t->attempt);
    }
    const struct ctl_group *g = ctl_state_group(s, t->group);
    const struct ctl_task *o =
        other_active(s, t, t->group, t->kind, t->kind == CTL_TASK_NODE_DRAIN ? t->source : 0);
    if (o == NULL && t->kind == CTL_TASK_HASH_SLOT_MIGRATION) {
        o = other_active(s, t, t->to_group, t->kind, 0);
    }
    if (o != NULL) {
        return CTL__REJECT(r, "task %llu: task %llu (%s) became active meanwhile", CTL__ULL(id),
                           CTL__ULL(o->id), ctl_task_kind_name(o->kind));
    }
    if (g != NULL && g->config_epoch != t->config_epoch) {
        return CTL__REJECT(
            r,
            "task %llu: group %u moved to config_epoch %llu since the task was made at "
            "%llu; create a new task",
            CTL__ULL(id), g->id, CTL__ULL(g->config_epoch), CTL__ULL(t->config_epoch));
    }
    const struct ctl_node *n = ctl_state_node(s, t->target);
    bool needs_target =
        t->kind == CTL_TASK_REPLICA_MOVE || t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION;
    if (needs_target && (n == NULL || n->join_state != CTL_JOIN_ACTIVE)) {
        return CTL__REJECT(r, "task %llu: target node %llu is %s now; create a new task",
                           CTL__ULL(id), CTL__ULL(t->target),
                           n ? ctl_join_state_name(n->join_state) : "unknown");
    }
    uint64_t voters[CTL_REPLICAS_MAX];
    uint32_t n_voters;
    if (t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION &&
        (controller_voters(s, voters, &n_voters) != t->n_previous_voters ||
         memcmp(voters, t->previous_voters, n_voters * sizeof(voters[0])) != 0)) {
        return CTL__REJECT(r,
                           "task %llu: the controller voters changed since the task was made; "
                           "create a new task",
                           CTL__ULL(id));
    }
    if (t->kind == CTL_TASK_HASH_SLOT_MIGRATION && !s->features.hash_slot_migration) {
        return CTL__REJECT(r, "%s", CTL__MIGRATION_OFF);
    }
    if (t->kind == CTL_TASK_HASH_SLOT_MIGRATION && !migration_retry_ok(s, t, r)) {
        return CTL_OK;
    }
    /* A move that failed before promote had its learner removed by the group's leader (the
     * executor's cleanup of a leftover learner): it adds the learner again. */
    if (t->kind == CTL_TASK_REPLICA_MOVE && t->phase_index <= CTL_PHASE_MOVE_CATCH_UP) {
        t->phase_index = CTL_PHASE_MOVE_ADD_LEARNER;
    }
    t->status = CTL_TASK_RUNNING;
    t->attempt++;
    t->updated_ms = ctl__task_now(t, cmd);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* ---- task_abort ---- */

/* The last phase of each kind at which an abort is safe (nothing it did must be undone by hand),
 * or -1 when the kind is never aborted. */
static int abort_last_phase(enum ctl_task_kind kind)
{
    switch (kind) {
    case CTL_TASK_REPLICA_MOVE:
        return CTL_PHASE_MOVE_CATCH_UP; /* from promote on the target may already vote */
    case CTL_TASK_LEADER_TRANSFER:
    case CTL_TASK_NODE_DRAIN:
        return 0;
    default:
        return -1;
    }
}

int ctl__op_task_abort(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_task *t = task_named(s, cmd, r);
    if (t == NULL) {
        return CTL_OK;
    }
    uint64_t id = t->id;
    if (!ctl__task_active(t)) {
        return CTL__REJECT(r, "task %llu is %s, only a running task can be aborted", CTL__ULL(id),
                           ctl_task_status_name(t->status));
    }
    int last = abort_last_phase(t->kind);
    if (last < 0) {
        return CTL__REJECT(
            r,
            "task %llu: a %s task cannot be aborted (it fails by itself at the phase "
            "timeout)",
            CTL__ULL(id), ctl_task_kind_name(t->kind));
    }
    if (t->phase_index > (uint32_t)last) {
        return CTL__REJECT(
            r,
            "task %llu is at phase %s, past the last safe point to abort (%s): let it "
            "finish",
            CTL__ULL(id), ctl_task_phase_name(t->kind, t->phase_index),
            ctl_task_phase_name(t->kind, (uint32_t)last));
    }
    if (!ctl__expected_revision_ok(s, cmd, false, r)) {
        return CTL_OK;
    }
    if (t->kind == CTL_TASK_NODE_DRAIN) {
        struct ctl_node *n = (struct ctl_node *)ctl_state_node(s, t->source);
        if (n != NULL && n->join_state == CTL_JOIN_LEAVING) {
            n->join_state = CTL_JOIN_ACTIVE; /* the replicas moved so far stay moved */
        }
    }
    char error[CTL_LAST_ERROR_MAX + 1] = ""; /* zero-filled: the whole buffer is copied */
    snprintf(error, sizeof(error), "aborted (Admin.AbortTask) at phase %s",
             ctl_task_phase_name(t->kind, t->phase_index));
    t->status = CTL_TASK_FAILED;
    memcpy(t->last_error, error, sizeof(error));
    t->updated_ms = ctl__task_now(t, cmd);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}
