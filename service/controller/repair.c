/* repair.c - ctl_repair_plan(): which replicas of nodes down for too long to replace, through the
 * ordinary fenced replica move, and which groups lost a quorum of live peers (reported, never
 * forced). Pure: the caller's clock comes in as now_ms. */
#include <string.h>

#include "internal.h"

/* Whether node n counts as dead for repair: a data node not removed, status down (the controller
 * leader's decision from its health reports), its last report at least down_after_ms old. */
static bool dead_for_long(const struct ctl_state *s, const struct ctl_node *n, uint64_t now_ms,
                          uint64_t down_after_ms)
{
    if (n->status != CTL_STATUS_DOWN || n->join_state == CTL_JOIN_REMOVED ||
        !(n->roles & CTL_ROLE_DATA)) {
        return false;
    }
    for (uint32_t i = 0; i < s->n_health; i++) {
        if (s->health[i].node == n->id) {
            return now_ms >= s->health[i].reported_at_ms &&
                   now_ms - s->health[i].reported_at_ms >= down_after_ms;
        }
    }
    return false; /* never reported: never marked down by age either */
}

bool ctl_group_has_quorum(const struct ctl_state *s, const struct ctl_group *g)
{
    uint32_t live = 0;
    for (uint32_t k = 0; k < g->n_peers; k++) {
        const struct ctl_node *p = ctl_state_node(s, g->desired_peers[k]);
        live += p != NULL && p->status != CTL_STATUS_DOWN;
    }
    return live >= g->n_peers / 2 + 1;
}

/* Whether n's zone (when set) is the zone of a peer of g other than dead. */
static bool zone_taken(const struct ctl_state *s, const struct ctl_group *g, uint64_t dead,
                       const struct ctl_node *n)
{
    for (uint32_t k = 0; n->zone[0] != '\0' && k < g->n_peers; k++) {
        const struct ctl_node *p = ctl_state_node(s, g->desired_peers[k]);
        if (p != NULL && p->id != dead && strcmp(p->zone, n->zone) == 0) {
            return true;
        }
    }
    return false;
}

/* The node to take g's replica on dead: active, alive, data, not a peer of g, in a zone no other
 * peer of g is in when such a node exists (else any), the fewest replicas per weight counting
 * the moves planned so far (held[] by node index), then the lowest id. Returns the node index
 * or -1. */
static int pick_target(const struct ctl_state *s, const struct ctl_group *g, uint64_t dead,
                       const uint32_t *held)
{
    int best = -1;
    bool best_free = false;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct ctl_node *n = &s->nodes[i];
        if (n->join_state != CTL_JOIN_ACTIVE || n->status != CTL_STATUS_ALIVE ||
            !(n->roles & CTL_ROLE_DATA) || ctl__set_has(g->desired_peers, g->n_peers, n->id)) {
            continue;
        }
        bool free_zone = !zone_taken(s, g, dead, n);
        const struct ctl_node *b = best >= 0 ? &s->nodes[best] : NULL;
        /* a free zone first; then held / weight < best's, exactly (nodes are sorted by id: ties
         * keep the lower) */
        if (b == NULL || (free_zone && !best_free) ||
            (free_zone == best_free &&
             (uint64_t)held[i] * b->weight < (uint64_t)held[best] * n->weight)) {
            best = (int)i;
            best_free = free_zone;
        }
    }
    return best;
}

void ctl_repair_plan(const struct ctl_state *s, uint64_t now_ms, uint64_t down_after_ms,
                     uint32_t max_moves, struct ctl_repair_plan *out)
{
    memset(out, 0, sizeof(*out));
    uint32_t held[CTL_NODES_MAX] = {0}, active = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        for (uint32_t k = 0; k < s->n_groups; k++) {
            held[i] +=
                ctl__set_has(s->groups[k].desired_peers, s->groups[k].n_peers, s->nodes[i].id);
        }
    }
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        active += ctl__task_active(&s->tasks[i]) && s->tasks[i].kind == CTL_TASK_REPLICA_MOVE;
    }
    for (uint32_t k = 0; k < s->n_groups; k++) {
        const struct ctl_group *g = &s->groups[k];
        if (!ctl_group_has_quorum(s, g)) {
            out->lost[out->n_lost++] = g->id;
        }
    }
    if (down_after_ms == 0) {
        return;
    }
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct ctl_node *n = &s->nodes[i];
        if (!dead_for_long(s, n, now_ms, down_after_ms)) {
            continue;
        }
        for (uint32_t k = 0; k < s->n_groups; k++) {
            const struct ctl_group *g = &s->groups[k];
            if (!ctl__set_has(g->desired_peers, g->n_peers, n->id)) {
                continue;
            }
            bool planned = false;
            for (uint32_t m = 0; m < out->n_moves; m++) {
                planned |= out->moves[m].group == g->id;
            }
            int t = planned || !ctl_group_has_quorum(s, g) ? -1 : pick_target(s, g, n->id, held);
            if (planned || t < 0 || ctl_state_active_task(s, g->id) != NULL ||
                active + out->n_moves >= max_moves) {
                out->n_waiting++; /* lost quorum, busy, no target, or over the move budget */
                continue;
            }
            out->moves[out->n_moves++] = (struct ctl_repair_move){g->id, n->id, s->nodes[t].id};
            held[t]++;
        }
    }
}
