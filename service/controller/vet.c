/* vet.c - ctl_vet(): a task_advance checked on the controller leader against the facts it observed
 * itself, and rebuilt with those facts as its proof, before it is proposed. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct vet {
    const struct ctl_state *s;
    ctl_observe_cb observe;
    void *arg;
    uint64_t observer, max_age_ms;
    char *why;
    size_t whylen;
};

/* " as observed by the controller leader (node N) A ms ago (voters [..], learners [..], leader L)"
 */
static void seen(const struct vet *v, const struct ctl_obs_group *g, char *buf, size_t len)
{
    char a[96], b[96];
    snprintf(buf, len,
             "as observed by the controller leader (node %llu) %llu ms ago (voters %s, learners "
             "%s, leader %llu)",
             CTL__ULL(v->observer), CTL__ULL(g->age_ms),
             ctl__fmt_ids(a, sizeof(a), g->voters, g->n_voters),
             ctl__fmt_ids(b, sizeof(b), g->learners, g->n_learners), CTL__ULL(g->leader));
}

/* The group's facts, fresh enough: true, or false with v->why set. */
static bool observe_fresh(const struct vet *v, uint32_t gid, struct ctl_obs_group *g)
{
    memset(g, 0, sizeof(*g));
    v->observe(v->arg, gid, g);
    if (!g->known) {
        snprintf(v->why, v->whylen,
                 "group %u: no configuration observed by the controller leader (node %llu)", gid,
                 CTL__ULL(v->observer));
        return false;
    }
    if (g->age_ms > v->max_age_ms) {
        snprintf(v->why, v->whylen,
                 "group %u: configuration last observed by the controller leader (node %llu) "
                 "%llu ms ago, older than %llu ms",
                 gid, CTL__ULL(v->observer), CTL__ULL(g->age_ms), CTL__ULL(v->max_age_ms));
        return false;
    }
    if (g->n_voters > CTL_REPLICAS_MAX || g->n_learners > CTL_REPLICAS_MAX ||
        g->n_members > CTL_REPLICAS_MAX * 2) {
        snprintf(v->why, v->whylen, "group %u: observed configuration has too many members", gid);
        return false;
    }
    return true;
}

static void proof_of(const struct ctl_obs_group *g, struct ctl_task_proof *p)
{
    memset(p, 0, sizeof(*p));
    p->config_index = g->commit;
    p->n_voters = g->n_voters;
    p->n_learners = g->n_learners;
    memcpy(p->voters, g->voters, g->n_voters * sizeof(p->voters[0]));
    memcpy(p->learners, g->learners, g->n_learners * sizeof(p->learners[0]));
    p->leader = g->leader;
    p->commit = g->commit;
}

/* Catch-up: node holds what the leader had committed, both observed within the bound. */
static bool caught_up(const struct vet *v, uint32_t gid, const struct ctl_obs_group *g,
                      uint64_t node, struct ctl_task_proof *p)
{
    const struct ctl_obs_member *m = NULL;
    for (uint32_t i = 0; i < g->n_members; i++) {
        m = g->members[i].node == node ? &g->members[i] : m;
    }
    if (m == NULL || !m->known) {
        snprintf(v->why, v->whylen,
                 "group %u: node %llu: no progress of it observed by the controller leader "
                 "(node %llu)",
                 gid, CTL__ULL(node), CTL__ULL(v->observer));
        return false;
    }
    if (m->age_ms > v->max_age_ms) {
        snprintf(v->why, v->whylen,
                 "group %u: node %llu: progress last observed by the controller leader (node "
                 "%llu) %llu ms ago, older than %llu ms",
                 gid, CTL__ULL(node), CTL__ULL(v->observer), CTL__ULL(m->age_ms),
                 CTL__ULL(v->max_age_ms));
        return false;
    }
    if (m->commit == 0 || m->match < m->commit) {
        snprintf(v->why, v->whylen,
                 "group %u: node %llu %s %llu < leader commit %llu as observed by the "
                 "controller leader (node %llu) %llu ms ago",
                 gid, CTL__ULL(node), m->from_progress ? "holds up to" : "applied",
                 CTL__ULL(m->match), CTL__ULL(m->commit), CTL__ULL(v->observer),
                 CTL__ULL(m->age_ms));
        return false;
    }
    p->commit = m->commit;
    p->target_match = m->match;
    return true;
}

/* Appends " N" to a list of ids being written into buf (at most len bytes, always terminated). */
static void list_add(char *buf, size_t len, uint64_t id)
{
    size_t used = strlen(buf);
    if (used + 1 < len) {
        snprintf(buf + used, len - used, "%s%llu", used ? "," : "", CTL__ULL(id));
    }
}

/* node_drain: every group's fresh configuration read (an unknown or stale one: false, v->why
 * names it), counting the groups that hold node and those it leads; the active tasks other than
 * the drain that name it come from the replicated state. Nonzero counts: false, v->why naming
 * them and their groups. */
static bool drain_facts(const struct vet *v, const struct ctl_task *drain,
                        struct ctl_drain_facts *f)
{
    uint64_t node = drain->source;
    char held[128] = "", led[128] = "", tasks[128] = "";
    memset(f, 0, sizeof(*f));
    for (uint32_t i = 0; i < v->s->n_groups; i++) {
        struct ctl_obs_group g;
        uint32_t gid = v->s->groups[i].id;
        if (!observe_fresh(v, gid, &g)) {
            return false;
        }
        f->groups_observed++;
        if (ctl__set_has(g.voters, g.n_voters, node) ||
            ctl__set_has(g.learners, g.n_learners, node)) {
            f->replicas_on_node++;
            list_add(held, sizeof(held), gid);
        }
        if (g.leader == node) {
            f->leading++;
            list_add(led, sizeof(led), gid);
        }
    }
    for (uint32_t i = 0; i < v->s->n_tasks; i++) {
        const struct ctl_task *o = &v->s->tasks[i];
        if (o != drain && ctl__task_active(o) &&
            ctl__set_has(o->participants, o->n_participants, node)) {
            f->tasks_on_node++;
            list_add(tasks, sizeof(tasks), o->id);
        }
    }
    if (f->replicas_on_node != 0 || f->leading != 0 || f->tasks_on_node != 0) {
        snprintf(v->why, v->whylen,
                 "node %llu: observed by the controller leader (node %llu) in %u groups: %llu "
                 "replicas (groups [%s]), %llu leaderships (groups [%s]), %llu active tasks "
                 "([%s]); a tombstone needs 0, 0 and 0",
                 CTL__ULL(node), CTL__ULL(v->observer), f->groups_observed,
                 CTL__ULL(f->replicas_on_node), held, CTL__ULL(f->leading), led,
                 CTL__ULL(f->tasks_on_node), tasks);
        return false;
    }
    return true;
}

/* The first slot of t for which want(bit of bits) fails, or -1. */
static int slot_failing(const uint8_t *bits, const struct ctl_task *t, bool want)
{
    for (uint32_t s = 0; s < CTL_HASH_SLOTS; s++) {
        if (CTL__SLOT_HAS(t->hash_slots, s) && CTL__SLOT_HAS(bits, s) != want) {
            return (int)s;
        }
    }
    return -1;
}

/* What the phase's entry changed in the group's applied hash-slot state, as its leader reported
 * it: fence: the source fenced every slot; copy (accept): to_group owns every slot; release: the
 * source holds none of them any more. */
static bool migration_slots(const struct vet *v, const struct ctl_task *t, uint32_t gid,
                            const struct ctl_obs_group *g)
{
    int bad;
    const char *fact;
    if (!g->slots_known) {
        snprintf(v->why, v->whylen,
                 "group %u: hash-slot state of leader %llu not observed by the controller leader "
                 "(node %llu)",
                 gid, CTL__ULL(g->leader), CTL__ULL(v->observer));
        return false;
    }
    if (t->phase_index == CTL_PHASE_MIGRATION_FENCE) {
        bad = slot_failing(g->fenced, t, true);
        fact = "has not fenced";
    } else if (t->phase_index == CTL_PHASE_MIGRATION_COPY) {
        bad = slot_failing(g->owned, t, true);
        fact = "does not own (the accept entry has not applied there)";
    } else {
        bad = slot_failing(g->owned, t, false);
        fact = "still owns";
    }
    if (bad >= 0) {
        snprintf(v->why, v->whylen,
                 "group %u: leader %llu %s hash slot %d as observed by the controller leader "
                 "(node %llu) %llu ms ago",
                 gid, CTL__ULL(g->leader), fact, bad, CTL__ULL(v->observer), CTL__ULL(g->age_ms));
        return false;
    }
    if (t->phase_index != CTL_PHASE_MIGRATION_RELEASE && g->migration_task != t->id) {
        snprintf(v->why, v->whylen,
                 "group %u: leader %llu applied migration task %llu last, not task %llu, as "
                 "observed by the controller leader (node %llu) %llu ms ago",
                 gid, CTL__ULL(g->leader), CTL__ULL(g->migration_task), CTL__ULL(t->id),
                 CTL__ULL(v->observer), CTL__ULL(g->age_ms));
        return false;
    }
    return true;
}

/* hash_slot_migration: the phase's entry changed the group's applied hash-slot state as its
 * observed leader reports it. The entry index a command claims is not used: an executor re-sends
 * its (idempotent) entry until the advance goes through, so the newest index runs ahead of any
 * observation; the proof records the leader's observed applied index, which covers the entry. */
static bool migration_facts(const struct vet *v, const struct ctl_task *t, uint32_t gid,
                            const struct ctl_obs_group *g, struct ctl_task_proof *p)
{
    if (g->leader == 0 || g->leader_applied == 0) {
        snprintf(v->why, v->whylen,
                 "group %u: no leader (or its applied index) observed by the controller leader "
                 "(node %llu) within %llu ms",
                 gid, CTL__ULL(v->observer), CTL__ULL(v->max_age_ms));
        return false;
    }
    p->config_index = g->leader_applied;
    return migration_slots(v, t, gid, g);
}

/* The group whose facts t's current phase needs (node_drain: every group; this is its own). */
static uint32_t fact_group(const struct ctl_task *t)
{
    if (t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION) {
        return 0;
    }
    if (t->kind == CTL_TASK_HASH_SLOT_MIGRATION && t->phase_index == CTL_PHASE_MIGRATION_COPY) {
        return t->to_group;
    }
    return t->group;
}

/* The proof (and drain facts) of t's current phase from the observed facts. */
static bool observed_proof(const struct vet *v, const struct ctl_task *t, struct ctl_task_proof *p,
                           struct ctl_drain_facts *f)
{
    struct ctl_obs_group g;
    memset(f, 0, sizeof(*f));
    memset(p, 0, sizeof(*p));
    if (t->kind == CTL_TASK_NODE_DRAIN) {
        return drain_facts(v, t, f);
    }
    uint32_t gid = fact_group(t);
    if (!observe_fresh(v, gid, &g)) {
        return false;
    }
    proof_of(&g, p);
    bool catch_up =
        (t->kind == CTL_TASK_REPLICA_MOVE && t->phase_index == CTL_PHASE_MOVE_CATCH_UP) ||
        (t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION &&
         t->phase_index == CTL_PHASE_PROMOTION_CATCH_UP);
    if (catch_up) {
        return caught_up(v, gid, &g, t->target, p);
    }
    if (t->kind == CTL_TASK_HASH_SLOT_MIGRATION) {
        return migration_facts(v, t, gid, &g, p);
    }
    return true;
}

/* Applies the rebuilt command to a copy of the state: a proof the observed facts do not satisfy
 * is answered here, with the facts, instead of becoming a rejected raft entry. */
static int dry_run(const struct vet *v, const struct ctl_task *t, const char *cmd)
{
    struct ctl_state *copy = malloc(sizeof(*copy));
    if (copy == NULL) {
        return CTL_ENOMEM;
    }
    memcpy(copy, v->s, sizeof(*copy));
    struct ctl_result r;
    int rc = ctl_apply(copy, copy->applied_raft_index + 1, cmd, strlen(cmd), &r);
    free(copy);
    if (rc != CTL_OK) {
        return rc;
    }
    if (r.outcome == CTL_OUTCOME_REJECTED && strncmp(r.reason, "proof:", 6) == 0) {
        struct ctl_obs_group g;
        uint32_t gid = fact_group(t);
        char b[256] = "";
        if (t->kind == CTL_TASK_NODE_DRAIN) {
            snprintf(v->why, v->whylen, "node %llu: %s (the replicated state)", CTL__ULL(t->source),
                     r.reason + 7);
            return CTL_EFACT;
        }
        if (observe_fresh(v, gid, &g)) {
            seen(v, &g, b, sizeof(b));
        }
        snprintf(v->why, v->whylen, "group %u: %s %s", gid, r.reason + 7, b);
        return CTL_EFACT;
    }
    return CTL_OK;
}

static uint64_t u64_or_0(const json_t *cmd, const char *key)
{
    const json_t *x = json_object_get(cmd, key);
    return json_is_integer(x) && json_integer_value(x) > 0 ? (uint64_t)json_integer_value(x) : 0;
}

/* node_remove: every group that has node as a desired peer has a fresh observed leader other
 * than node (a leader under check-quorum holds a quorum without it). The rest is ctl_apply's. */
static bool remove_facts(const struct vet *v, uint64_t node)
{
    const struct ctl_node *n = ctl_state_node(v->s, node);
    if (n == NULL || n->status != CTL_STATUS_DOWN || n->join_state == CTL_JOIN_REMOVED) {
        return true; /* ctl_apply refuses it, saying why */
    }
    for (uint32_t i = 0; i < v->s->n_groups; i++) {
        const struct ctl_group *cg = &v->s->groups[i];
        struct ctl_obs_group g;
        if (node == 0 || !ctl__set_has(cg->desired_peers, cg->n_peers, node)) {
            continue;
        }
        if (!observe_fresh(v, cg->id, &g)) {
            return false;
        }
        if (g.leader == 0 || g.leader == node) {
            char b[256];
            seen(v, &g, b, sizeof(b));
            snprintf(v->why, v->whylen,
                     "group %u: no leader other than node %llu %s: its quorum without node %llu "
                     "is not proven",
                     cg->id, CTL__ULL(node), b, CTL__ULL(node));
            return false;
        }
    }
    return true;
}

/* controller_voter_demote: the controller leader's own group 0 shows the node a voter, and the
 * voters other than it that are the leader itself, or alive in the state and hold the leader's
 * commit index (its progress, fresh), are at least a quorum of the current voters: the removal
 * commits and the rest keep a quorum. */
static bool demote_facts(const struct vet *v, uint64_t node)
{
    const struct ctl_node *n = ctl_state_node(v->s, node);
    struct ctl_obs_group g;
    if (n == NULL || !(n->roles & CTL_ROLE_CONTROLLER_VOTER)) {
        return true; /* ctl_apply refuses it, saying why */
    }
    if (!observe_fresh(v, 0, &g)) {
        return false;
    }
    if (!ctl__set_has(g.voters, g.n_voters, node)) {
        char b[256];
        seen(v, &g, b, sizeof(b));
        snprintf(v->why, v->whylen, "group 0: node %llu is not a voter %s", CTL__ULL(node), b);
        return false;
    }
    uint32_t live = 0, quorum = g.n_voters / 2 + 1;
    for (uint32_t i = 0; i < g.n_voters; i++) {
        uint64_t id = g.voters[i];
        const struct ctl_node *p = ctl_state_node(v->s, id);
        bool ok = id == v->observer;
        for (uint32_t k = 0; !ok && k < g.n_members; k++) {
            const struct ctl_obs_member *m = &g.members[k];
            ok = m->node == id && m->known && m->age_ms <= v->max_age_ms && m->commit > 0 &&
                 m->match >= m->commit && p != NULL && p->status == CTL_STATUS_ALIVE;
        }
        live += id != node && ok;
    }
    if (live < quorum) {
        char b[256];
        seen(v, &g, b, sizeof(b));
        snprintf(v->why, v->whylen,
                 "group 0: without node %llu, %u voters are alive and caught up, below a quorum "
                 "of %u of the %u voters %s",
                 CTL__ULL(node), live, quorum, g.n_voters, b);
        return false;
    }
    return true;
}

int ctl_vet(const struct ctl_state *state, const void *cmd, size_t len, ctl_observe_cb observe,
            void *arg, uint64_t observer, uint64_t max_age_ms, char **out, char *why, size_t whylen)
{
    struct vet v = {state, observe, arg, observer, max_age_ms, why, whylen};
    *out = NULL;
    if (whylen > 0) {
        why[0] = '\0';
    }
    if (len == 0 || len > CTL_CMD_BYTES_MAX) {
        return CTL_OK; /* ctl_apply rejects it */
    }
    json_t *root = json_loadb(cmd, len, JSON_REJECT_DUPLICATES, NULL);
    const char *op = json_string_value(json_object_get(root, "op"));
    if (op != NULL && strcmp(op, "controller_voter_demote") == 0) {
        int rc = demote_facts(&v, u64_or_0(root, "node")) ? CTL_OK : CTL_EFACT;
        json_decref(root);
        return rc;
    }
    if (op != NULL && strcmp(op, "node_remove") == 0) {
        int rc = remove_facts(&v, u64_or_0(root, "id")) ? CTL_OK : CTL_EFACT;
        json_decref(root);
        return rc;
    }
    if (op == NULL || strcmp(op, "task_advance") != 0) {
        json_decref(root);
        return CTL_OK;
    }
    struct ctl_result r;
    /* ctl__task_fence only reads the state */
    const struct ctl_task *t = ctl__task_fence((struct ctl_state *)state, root, true, &r);
    int rc = CTL_OK;
    struct ctl_task_proof p;
    struct ctl_drain_facts f;
    if (t == NULL) {
        ; /* a stale or malformed fence: ctl_apply answers it */
    } else if (!observed_proof(&v, t, &p, &f)) {
        rc = CTL_EFACT;
    } else {
        uint64_t now = u64_or_0(root, "now_ms"), rev = u64_or_0(root, "expected_revision");
        rc = t->kind == CTL_TASK_NODE_DRAIN
                 ? ctl_cmd_drain_advance(t->id, t->attempt, &f, now, rev, out)
                 : ctl_cmd_task_advance(t->id, t->group, t->config_epoch, t->attempt,
                                        t->phase_index, &p, 0, 0, now, rev, out);
        if (rc == CTL_OK) {
            rc = dry_run(&v, t, *out);
        }
        if (rc != CTL_OK) {
            ctl_free(*out);
            *out = NULL;
        }
    }
    json_decref(root);
    return rc == CTL_EINVALID ? CTL_OK : rc; /* a value the builder refuses: ctl_apply rejects */
}
