/* membership.c - node_remove: a dead node leaves the cluster for good (a tombstone), allowed only
 * when every group it is a desired peer of keeps a quorum of live peers without it; and
 * controller_voter_demote: a controller voter becomes a mirror. */
#include <string.h>

#include "internal.h"

/* The first active task naming node as source, target or participant; NULL when none. */
static const struct ctl_task *task_naming(const struct ctl_state *s, uint64_t node)
{
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if (ctl__task_active(t) && (t->source == node || t->target == node ||
                                    ctl__set_has(t->participants, t->n_participants, node))) {
            return t;
        }
    }
    return NULL;
}

/* Group g without node: its desired peers other than node that are not down must be a quorum of
 * the peers it has now (the removal of the voter commits under the current configuration). */
static bool keeps_quorum(const struct ctl_state *s, const struct ctl_group *g, uint64_t node,
                         struct ctl_result *r)
{
    uint32_t live = 0, quorum = g->n_peers / 2 + 1;
    for (uint32_t k = 0; k < g->n_peers; k++) {
        const struct ctl_node *p = ctl_state_node(s, g->desired_peers[k]);
        live += p != NULL && p->id != node && p->status != CTL_STATUS_DOWN;
    }
    if (live < quorum) {
        CTL__REJECT(
            r,
            "id: without node %llu group %u keeps %u live desired peers of %u, below a quorum "
            "of %u: bring a peer back or move the group's replicas first",
            CTL__ULL(node), g->id, live, g->n_peers, quorum);
        return false;
    }
    return true;
}

static void drop_peer(struct ctl_group *g, uint64_t node)
{
    for (uint32_t k = 0; k < g->n_peers; k++) {
        if (g->desired_peers[k] == node) {
            memmove(&g->desired_peers[k], &g->desired_peers[k + 1],
                    (g->n_peers - k - 1) * sizeof(g->desired_peers[0]));
            g->n_peers--;
            break;
        }
    }
    if (g->preferred_leader == node) {
        g->preferred_leader = g->desired_peers[0]; /* n_peers >= 1: keeps_quorum held */
    }
    g->config_epoch++;
}

int ctl__op_node_remove(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    uint64_t id;
    if (ctl__json_u64(cmd, "id", "", 1, CTL_U64_JSON_MAX, &id, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return CTL_OK;
    }
    struct ctl_node *n = (struct ctl_node *)ctl_state_node(s, id);
    if (n == NULL) {
        return CTL__REJECT(r, "id: node %llu is unknown", CTL__ULL(id));
    }
    if (n->join_state == CTL_JOIN_REMOVED) {
        return CTL__REJECT(r,
                           "id: node %llu is removed already (a tombstone; its id is never reused)",
                           CTL__ULL(id));
    }
    if (n->roles & CTL_ROLE_CONTROLLER_VOTER) {
        return CTL__REJECT(r, "id: node %llu is a controller voter: demote it first", CTL__ULL(id));
    }
    if (n->status != CTL_STATUS_DOWN) {
        return CTL__REJECT(
            r,
            "id: node %llu is %s, RemoveNode takes a node that is down (drain a live "
            "node with DrainNode)",
            CTL__ULL(id), ctl_node_status_name(n->status));
    }
    const struct ctl_task *t = task_naming(s, id);
    if (t != NULL) {
        return CTL__REJECT(r,
                           "id: active task %llu (%s) involves node %llu: abort it or let it fail",
                           CTL__ULL(t->id), ctl_task_kind_name(t->kind), CTL__ULL(id));
    }
    for (uint32_t i = 0; i < s->n_groups; i++) {
        const struct ctl_group *g = &s->groups[i];
        if (ctl__set_has(g->desired_peers, g->n_peers, id) && !keeps_quorum(s, g, id, r)) {
            return CTL_OK;
        }
    }
    for (uint32_t i = 0; i < s->n_groups; i++) {
        struct ctl_group *g = &s->groups[i];
        if (ctl__set_has(g->desired_peers, g->n_peers, id)) {
            drop_peer(g, id);
        }
    }
    n->join_state = CTL_JOIN_REMOVED;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* ---- controller_voter_demote ---- */

int ctl__op_controller_voter_demote(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    uint64_t id;
    if (ctl__json_u64(cmd, "node", "", 1, CTL_U64_JSON_MAX, &id, CTL__RS(r)) != CTL_OK) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return CTL_OK;
    }
    struct ctl_node *n = (struct ctl_node *)ctl_state_node(s, id);
    if (n == NULL) {
        return CTL__REJECT(r, "node: node %llu is unknown", CTL__ULL(id));
    }
    if (!(n->roles & CTL_ROLE_CONTROLLER_VOTER)) {
        return CTL__REJECT(r, "node: node %llu is not a controller voter", CTL__ULL(id));
    }
    uint32_t voters = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        voters += (s->nodes[i].roles & CTL_ROLE_CONTROLLER_VOTER) != 0;
    }
    if (voters <= 1) {
        return CTL__REJECT(r, "node: node %llu is the only controller voter", CTL__ULL(id));
    }
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if (ctl__task_active(t) && t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION) {
            return CTL__REJECT(r, "node: controller_voter_promotion %llu (node %llu) is active",
                               CTL__ULL(t->id), CTL__ULL(t->target));
        }
    }
    n->roles &= ~(unsigned)CTL_ROLE_CONTROLLER_VOTER;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}
