/* task_advance.c - task_advance: the proof each phase needs and what completing a task changes. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

const char *ctl__fmt_ids(char *buf, size_t len, const uint64_t *v, uint32_t n)
{
    size_t used = (size_t)snprintf(buf, len, "[");
    for (uint32_t i = 0; i < n && used < len; i++) {
        used += (size_t)snprintf(buf + used, len - used, "%s%llu", i ? "," : "", CTL__ULL(v[i]));
    }
    if (used < len) {
        snprintf(buf + used, len - used, "]");
    }
    return buf;
}

static bool same_set(const uint64_t *a, uint32_t na, const uint64_t *b, uint32_t nb)
{
    return na == nb && memcmp(a, b, na * sizeof(a[0])) == 0;
}

/* Inserts id into the sorted set v[0..*n) (room for one more is the caller's job). */
static void set_add(uint64_t *v, uint32_t *n, uint64_t id)
{
    uint32_t at = *n;
    while (at > 0 && v[at - 1] > id) {
        v[at] = v[at - 1];
        at--;
    }
    v[at] = id;
    (*n)++;
}

static void set_del(uint64_t *v, uint32_t *n, uint64_t id)
{
    for (uint32_t i = 0; i < *n; i++) {
        if (v[i] == id) {
            memmove(&v[i], &v[i + 1], (*n - i - 1) * sizeof(v[0]));
            (*n)--;
            return;
        }
    }
}

/* proof.<key>: an array of at most CTL_REPLICAS_MAX distinct node ids, any order; stored sorted. */
static bool read_proof_ids(const json_t *proof, const char *key, uint64_t *out, uint32_t *n,
                           struct ctl_result *r)
{
    json_t *arr;
    *n = 0;
    if (ctl__json_array(proof, key, "proof", CTL_REPLICAS_MAX, &arr, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return false;
    }
    for (size_t i = 0; i < json_array_size(arr); i++) {
        json_t *v = json_array_get(arr, i);
        if (!json_is_integer(v) || json_integer_value(v) < 1) {
            CTL__REJECT(r, "proof.%s[%zu]: expected a node id in 1..%llu", key, i,
                        CTL_U64_JSON_MAX);
            return false;
        }
        uint64_t id = (uint64_t)json_integer_value(v);
        if (ctl__set_has(out, *n, id)) {
            CTL__REJECT(r, "proof.%s: node %llu listed twice", key, CTL__ULL(id));
            return false;
        }
        set_add(out, n, id);
    }
    return true;
}

static bool read_proof(const json_t *cmd, struct ctl_task_proof *p, struct ctl_result *r)
{
    static const char *const fields[] = {"config_index", "voters", "learners",
                                         "leader",       "commit", "target_match"};
    const json_t *o = json_object_get(cmd, "proof");
    memset(p, 0, sizeof(*p));
    if (ctl__json_fields(o, "proof", fields, 6, NULL, 0, CTL__RS(r)) != CTL_OK ||
        ctl__json_u64(o, "config_index", "proof", 0, CTL_U64_JSON_MAX, &p->config_index,
                      CTL__RS(r)) ||
        ctl__json_u64(o, "leader", "proof", 0, CTL_U64_JSON_MAX, &p->leader, CTL__RS(r)) ||
        ctl__json_u64(o, "commit", "proof", 0, CTL_U64_JSON_MAX, &p->commit, CTL__RS(r)) ||
        ctl__json_u64(o, "target_match", "proof", 0, CTL_U64_JSON_MAX, &p->target_match,
                      CTL__RS(r))) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return false;
    }
    if (!read_proof_ids(o, "voters", p->voters, &p->n_voters, r) ||
        !read_proof_ids(o, "learners", p->learners, &p->n_learners, r)) {
        return false;
    }
    for (uint32_t i = 0; i < p->n_learners; i++) {
        if (ctl__set_has(p->voters, p->n_voters, p->learners[i])) {
            CTL__REJECT(r, "proof: node %llu is both a voter and a learner",
                        CTL__ULL(p->learners[i]));
            return false;
        }
    }
    return true;
}

/* ---- per-phase proof checks: each returns true, or false with r rejected ("proof: ..."). ---- */

static bool is_learner(const struct ctl_task_proof *p, uint64_t node, struct ctl_result *r)
{
    if (!ctl__set_has(p->learners, p->n_learners, node)) {
        char b[96];
        CTL__REJECT(r, "proof: node %llu is not a learner (learners %s)", CTL__ULL(node),
                    ctl__fmt_ids(b, sizeof(b), p->learners, p->n_learners));
        return false;
    }
    return true;
}

static bool caught_up(const struct ctl_task_proof *p, uint64_t node, struct ctl_result *r)
{
    if (!is_learner(p, node, r)) {
        return false;
    }
    if (p->commit == 0) {
        CTL__REJECT(r, "proof: commit is 0, catch-up needs a committed index");
        return false;
    }
    if (p->target_match < p->commit) {
        CTL__REJECT(r, "proof: node %llu match %llu is behind commit %llu", CTL__ULL(node),
                    CTL__ULL(p->target_match), CTL__ULL(p->commit));
        return false;
    }
    return true;
}

static bool is_voter(const struct ctl_task_proof *p, uint64_t node, struct ctl_result *r)
{
    if (!ctl__set_has(p->voters, p->n_voters, node)) {
        char b[96];
        CTL__REJECT(r, "proof: node %llu is not a voter (voters %s)", CTL__ULL(node),
                    ctl__fmt_ids(b, sizeof(b), p->voters, p->n_voters));
        return false;
    }
    return true;
}

static bool voters_are(const struct ctl_task_proof *p, const uint64_t *want, uint32_t n_want,
                       const char *what, struct ctl_result *r)
{
    if (!same_set(p->voters, p->n_voters, want, n_want)) {
        char a[96], b[96];
        CTL__REJECT(r, "proof: voters %s are not %s %s",
                    ctl__fmt_ids(a, sizeof(a), p->voters, p->n_voters), what,
                    ctl__fmt_ids(b, sizeof(b), want, n_want));
        return false;
    }
    return true;
}

/* Phase 3 of a replica move and the commit of the new assignment. */
static bool move_remove_source(struct ctl_group *g, const struct ctl_task *t,
                               const struct ctl_task_proof *p, struct ctl_result *r)
{
    uint64_t want[CTL_REPLICAS_MAX + 1];
    uint32_t n_want = g->n_peers;
    memcpy(want, g->desired_peers, n_want * sizeof(want[0]));
    set_del(want, &n_want, t->source);
    set_add(want, &n_want, t->target);
    if (ctl__set_has(p->voters, p->n_voters, t->source)) {
        return CTL__REJECT(r, "proof: source %llu is still a voter", CTL__ULL(t->source)), false;
    }
    if (!voters_are(p, want, n_want, "desired peers - source + target", r)) {
        return false;
    }
    if (p->n_learners != 0) {
        char b[96];
        return CTL__REJECT(r, "proof: learners %s remain, want none",
                           ctl__fmt_ids(b, sizeof(b), p->learners, p->n_learners)),
               false;
    }
    if (p->leader == t->source || !ctl__set_has(p->voters, p->n_voters, p->leader)) {
        return CTL__REJECT(r, "proof: leader %llu is %s", CTL__ULL(p->leader),
                           p->leader == t->source ? "the source" : "not one of the new voters"),
               false;
    }
    memcpy(g->desired_peers, p->voters, p->n_voters * sizeof(p->voters[0]));
    g->n_peers = p->n_voters;
    g->config_epoch++;
    if (g->preferred_leader == t->source) {
        g->preferred_leader = t->target;
    }
    return true;
}

static bool check_replica_move(struct ctl_state *s, struct ctl_task *t,
                               const struct ctl_task_proof *p, struct ctl_result *r)
{
    struct ctl_group *g = (struct ctl_group *)ctl_state_group(s, t->group);
    switch (t->phase_index) {
    case CTL_PHASE_MOVE_ADD_LEARNER:
        if (!is_learner(p, t->target, r)) {
            return false;
        }
        return voters_are(p, g->desired_peers, g->n_peers, "the desired peers", r);
    case CTL_PHASE_MOVE_CATCH_UP:
        return caught_up(p, t->target, r);
    case CTL_PHASE_MOVE_PROMOTE:
        return is_voter(p, t->target, r);
    default:
        return move_remove_source(g, t, p, r);
    }
}

static bool check_leader_transfer(struct ctl_state *s, struct ctl_task *t,
                                  const struct ctl_task_proof *p, struct ctl_result *r)
{
    const struct ctl_group *g = ctl_state_group(s, t->group);
    if (p->leader == 0) {
        return CTL__REJECT(r, "proof: no leader observed"), false;
    }
    if (p->leader == t->source) {
        return CTL__REJECT(r, "proof: leader %llu is still the source", CTL__ULL(p->leader)), false;
    }
    if (!ctl__set_has(g->desired_peers, g->n_peers, p->leader)) {
        return CTL__REJECT(r, "proof: leader %llu is not a desired peer of group %u",
                           CTL__ULL(p->leader), g->id),
               false;
    }
    return true;
}

static bool check_promotion(struct ctl_state *s, struct ctl_task *t, const struct ctl_task_proof *p,
                            struct ctl_result *r)
{
    uint64_t want[CTL_REPLICAS_MAX + 1];
    uint32_t n_want = t->n_previous_voters;
    switch (t->phase_index) {
    case CTL_PHASE_PROMOTION_ADD_LEARNER:
        return is_learner(p, t->target, r);
    case CTL_PHASE_PROMOTION_CATCH_UP:
        return caught_up(p, t->target, r);
    default:
        memcpy(want, t->previous_voters, n_want * sizeof(want[0]));
        set_add(want, &n_want, t->target);
        if (!voters_are(p, want, n_want, "previous voters + node", r)) {
            return false;
        }
        ((struct ctl_node *)ctl_state_node(s, t->target))->roles |= CTL_ROLE_CONTROLLER_VOTER;
        return true;
    }
}

/* node_drain's tombstone: the controller leader's observed counts (ctl_vet rebuilt them from
 * its own facts) are all 0 and cover every group; then the replicated state must agree. */
static bool check_drain(struct ctl_state *s, struct ctl_task *t, const json_t *cmd,
                        struct ctl_result *r)
{
    static const char *const keys[] = {"replicas_on_node", "leading", "tasks_on_node",
                                       "groups_observed"};
    uint64_t v[4], node = t->source;
    for (size_t i = 0; i < 4; i++) {
        if (json_object_get(cmd, keys[i]) == NULL) {
            return CTL__REJECT(
                       r,
                       "proof: replicas_on_node, leading, tasks_on_node and groups_observed "
                       "are required to prove node %llu drained",
                       CTL__ULL(node)),
                   false;
        }
        if (ctl__json_u64(cmd, keys[i], "", 0, CTL_U64_JSON_MAX, &v[i], CTL__RS(r))) {
            r->outcome = CTL_OUTCOME_REJECTED;
            return false;
        }
    }
    if (v[0] != 0 || v[1] != 0 || v[2] != 0) {
        return CTL__REJECT(r,
                           "proof: node %llu still holds %llu replicas and leads %llu, with %llu "
                           "active tasks, as observed",
                           CTL__ULL(node), CTL__ULL(v[0]), CTL__ULL(v[1]), CTL__ULL(v[2])),
               false;
    }
    if (v[3] != s->n_groups) {
        return CTL__REJECT(
                   r, "proof: facts of %llu of the %u groups observed, every group's are needed",
                   CTL__ULL(v[3]), s->n_groups),
               false;
    }
    for (uint32_t i = 0; i < s->n_groups; i++) {
        if (ctl__set_has(s->groups[i].desired_peers, s->groups[i].n_peers, node)) {
            return CTL__REJECT(r, "proof: node %llu is still a desired peer of group %u",
                               CTL__ULL(node), s->groups[i].id),
                   false;
        }
    }
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *o = &s->tasks[i];
        if (o != t && ctl__task_active(o) &&
            ctl__set_has(o->participants, o->n_participants, node)) {
            return CTL__REJECT(r, "proof: active task %llu (%s) still involves node %llu",
                               CTL__ULL(o->id), ctl_task_kind_name(o->kind), CTL__ULL(node)),
                   false;
        }
    }
    struct ctl_node *n = (struct ctl_node *)ctl_state_node(s, node);
    if (n->roles & CTL_ROLE_CONTROLLER_VOTER) {
        return CTL__REJECT(r, "proof: node %llu is a controller voter: demote it first",
                           CTL__ULL(node)),
               false;
    }
    n->join_state = CTL_JOIN_REMOVED;
    return true;
}

/* The switch of a migration: every slot of t maps to t->to_group; ranges rebuilt sorted and
 * contiguous over 0..255 with adjacent slots of one group merged; version + 1. */
static void switch_table(struct ctl_hash_slot_table *table, const struct ctl_task *t)
{
    uint32_t owner[CTL_HASH_SLOTS];
    for (uint32_t i = 0; i < table->n_ranges; i++) {
        for (uint32_t slot = table->ranges[i].first; slot <= table->ranges[i].last; slot++) {
            owner[slot] = table->ranges[i].group;
        }
    }
    table->n_ranges = 0;
    for (uint32_t slot = 0; slot < CTL_HASH_SLOTS; slot++) {
        uint32_t g = CTL__SLOT_HAS(t->hash_slots, slot) ? t->to_group : owner[slot];
        struct ctl_range *last = table->n_ranges > 0 ? &table->ranges[table->n_ranges - 1] : NULL;
        if (last != NULL && last->group == g) {
            last->last = slot;
        } else {
            table->ranges[table->n_ranges++] = (struct ctl_range){slot, slot, g};
        }
    }
    table->version++;
}

/* hash_slot_migration: the phase's entry was applied at proof.config_index, seen by proof.leader
 * as leader of the group that applied it (fence, release: the source; copy: to_group). */
static bool check_migration(struct ctl_state *s, struct ctl_task *t, const struct ctl_task_proof *p,
                            struct ctl_result *r)
{
    static const char *const entry[] = {"fence", "accept", "release"};
    uint32_t g = t->phase_index == CTL_PHASE_MIGRATION_COPY ? t->to_group : t->group;
    /* Before the table switch the switch is honoured; a release finishes a switch already made
     * (undoing it is never an option), so it completes whatever the feature says now. */
    if (t->phase_index < CTL_PHASE_MIGRATION_RELEASE && !s->features.hash_slot_migration) {
        return CTL__REJECT(r, "%s", CTL__MIGRATION_OFF), false;
    }
    if (p->config_index == 0) {
        return CTL__REJECT(
                   r,
                   "proof: config_index is 0, want the raft index at which group %u applied "
                   "the %s entry",
                   g, entry[t->phase_index]),
               false;
    }
    if (p->leader == 0) {
        return CTL__REJECT(r,
                           "proof: leader is 0, want the node that saw the %s entry applied as "
                           "leader of group %u",
                           entry[t->phase_index], g),
               false;
    }
    if (t->phase_index == CTL_PHASE_MIGRATION_COPY) {
        switch_table(&s->table, t);
    }
    return true;
}

int ctl__op_task_advance(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_task *t = ctl__task_fence(s, cmd, true, r);
    if (t == NULL) {
        return CTL_OK;
    }
    bool promote = t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION &&
                   t->phase_index == CTL_PHASE_PROMOTION_PROMOTE;
    struct ctl_task_proof p;
    if (!ctl__expected_revision_ok(s, cmd, promote, r) || !read_proof(cmd, &p, r)) {
        return CTL_OK;
    }
    bool ok;
    switch (t->kind) {
    case CTL_TASK_REPLICA_MOVE:
        ok = check_replica_move(s, t, &p, r);
        break;
    case CTL_TASK_LEADER_TRANSFER:
        ok = check_leader_transfer(s, t, &p, r);
        break;
    case CTL_TASK_CONTROLLER_VOTER_PROMOTION:
        ok = check_promotion(s, t, &p, r);
        break;
    case CTL_TASK_NODE_DRAIN:
        ok = check_drain(s, t, cmd, r);
        break;
    default:
        ok = check_migration(s, t, &p, r);
        break;
    }
    if (!ok) {
        return CTL_OK;
    }
    t->phase_index++;
    if (t->phase_index == ctl__task_done_phase(t->kind)) {
        t->status = CTL_TASK_DONE;
    }
    t->proof = p;
    t->last_error[0] = '\0';
    t->updated_ms = ctl__task_now(t, cmd);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}
