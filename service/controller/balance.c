/* balance.c - ctl_balance_plan(): which replica moves take a group's second replica out of a
 * zone and bring every active node's replica count to its weighted share, as ordinary fenced
 * replica moves; ctl_balance_leaders(): which preferred
 * leaders to change so they spread evenly. From the replicated state only. Pure. */
#include <stdio.h>
#include <string.h>

#include "internal.h"

/* A node the balancer places replicas on: active, alive, data. */
static bool balance_node_eligible(const struct ctl_node *n)
{
    return n->join_state == CTL_JOIN_ACTIVE && n->status == CTL_STATUS_ALIVE &&
           (n->roles & CTL_ROLE_DATA);
}

/* Node index i's zone: zones[i] when zones is given, else the node record's; NULL for none. */
static const char *balance_zone(const struct ctl_state *s, const char *const *zones, uint32_t i)
{
    const char *z = zones != NULL ? zones[i] : s->nodes[i].zone;
    return z != NULL && z[0] != '\0' ? z : NULL;
}

static bool balance_same_zone(const struct ctl_state *s, const char *const *zones, uint32_t a,
                              uint32_t b)
{
    const char *za = balance_zone(s, zones, a), *zb = balance_zone(s, zones, b);
    return za != NULL && zb != NULL && strcmp(za, zb) == 0;
}

/* Index of node id in s->nodes, -1 if absent. */
static int balance_node_index(const struct ctl_state *s, uint64_t id)
{
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (s->nodes[i].id == id) {
            return (int)i;
        }
    }
    return -1;
}

/* Whether g may lose a replica on node index src to node index dst now: src is a peer, dst is
 * not, no task is active on g and none was planned for it in this plan, g keeps a quorum of live
 * peers, the peers other than src that are alive are a quorum of g (so src is never the only
 * up-to-date copy: the move's catch-up reads from them), and dst's zone, when set, is no zone of
 * another peer of g. */
static bool balance_group_movable(const struct ctl_state *s, const struct ctl_group *g,
                                  const char *const *zones, uint32_t src, uint32_t dst,
                                  const struct ctl_balance_plan *out)
{
    uint64_t sid = s->nodes[src].id, did = s->nodes[dst].id;
    if (!ctl__set_has(g->desired_peers, g->n_peers, sid) ||
        ctl__set_has(g->desired_peers, g->n_peers, did) ||
        ctl_state_active_task(s, g->id) != NULL || !ctl_group_has_quorum(s, g)) {
        return false;
    }
    for (uint32_t m = 0; m < out->n_moves; m++) {
        if (out->moves[m].group == g->id) {
            return false;
        }
    }
    uint32_t others_alive = 0;
    for (uint32_t k = 0; k < g->n_peers; k++) {
        if (g->desired_peers[k] == sid) {
            continue;
        }
        int p = balance_node_index(s, g->desired_peers[k]);
        if (p < 0) {
            continue;
        }
        others_alive += s->nodes[p].status == CTL_STATUS_ALIVE;
        if (balance_same_zone(s, zones, dst, (uint32_t)p)) {
            return false;
        }
    }
    return others_alive >= g->n_peers / 2 + 1;
}

void ctl_balance_plan(const struct ctl_state *s, const char *const *zones, uint32_t max_moves,
                      struct ctl_balance_plan *out)
{
    memset(out, 0, sizeof(*out));
    int64_t held[CTL_NODES_MAX] = {0}, total = 0, wsum = 0;
    uint32_t active = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        for (uint32_t k = 0; k < s->n_groups; k++) {
            held[i] +=
                ctl__set_has(s->groups[k].desired_peers, s->groups[k].n_peers, s->nodes[i].id);
        }
    }
    /* a running replica move counts as done: its target holds the replica, its source not */
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if (!ctl__task_active(t) || t->kind != CTL_TASK_REPLICA_MOVE) {
            continue;
        }
        active++;
        const struct ctl_group *g = ctl_state_group(s, t->group);
        int a = balance_node_index(s, t->source), b = balance_node_index(s, t->target);
        if (g != NULL && a >= 0 && ctl__set_has(g->desired_peers, g->n_peers, t->source)) {
            held[a]--;
        }
        if (g != NULL && b >= 0 && !ctl__set_has(g->desired_peers, g->n_peers, t->target)) {
            held[b]++;
        }
    }
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (balance_node_eligible(&s->nodes[i])) {
            total += held[i];
            wsum += s->nodes[i].weight;
        }
    }
    out->total_replicas = (uint32_t)total;
    out->total_weight = (uint32_t)wsum;
    /* excess[i] = (held - share) * wsum, share = total * weight / wsum: exact integers */
    int64_t excess[CTL_NODES_MAX] = {0};
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (!balance_node_eligible(&s->nodes[i]) || wsum == 0) {
            continue;
        }
        excess[i] = held[i] * wsum - total * (int64_t)s->nodes[i].weight;
        struct ctl_balance_score *sc = &out->scores[out->n_scores++];
        sc->node = s->nodes[i].id;
        sc->weight = s->nodes[i].weight;
        sc->replicas = (uint32_t)held[i];
        sc->share_x10 = (uint32_t)((total * (int64_t)s->nodes[i].weight * 10 + wsum / 2) / wsum);
    }
    /* First the zone rule: a group with two peers in one zone moves one of them (the one with
     * more excess) to the eligible node with the least excess whose zone no other peer has. */
    for (uint32_t k = 0; k < s->n_groups && active + out->n_moves < max_moves && wsum > 0; k++) {
        const struct ctl_group *g = &s->groups[k];
        int src = -1, dst = -1, twin = -1;
        for (uint32_t a = 0; a < g->n_peers && src < 0; a++) {
            for (uint32_t b = a + 1; b < g->n_peers && src < 0; b++) {
                int x = balance_node_index(s, g->desired_peers[a]);
                int y = balance_node_index(s, g->desired_peers[b]);
                if (x >= 0 && y >= 0 && balance_same_zone(s, zones, (uint32_t)x, (uint32_t)y)) {
                    src = excess[x] >= excess[y] ? x : y;
                    twin = src == x ? y : x;
                }
            }
        }
        for (uint32_t b = 0; src >= 0 && b < s->n_nodes; b++) {
            if (balance_node_eligible(&s->nodes[b]) && (dst < 0 || excess[b] < excess[dst]) &&
                balance_group_movable(s, g, zones, (uint32_t)src, b, out)) {
                dst = (int)b;
            }
        }
        if (dst < 0) {
            continue; /* no node in another zone can take it now */
        }
        struct ctl_balance_move *m = &out->moves[out->n_moves++];
        m->group = g->id;
        m->source = s->nodes[src].id;
        m->target = s->nodes[dst].id;
        const char *zd = balance_zone(s, zones, (uint32_t)dst);
        snprintf(m->why, sizeof(m->why),
                 "group %u has replicas on nodes %llu and %llu, both in zone %s; node %llu is in "
                 "%s%s, which no other replica of it is in",
                 g->id, (unsigned long long)m->source, (unsigned long long)s->nodes[twin].id,
                 balance_zone(s, zones, (uint32_t)src), (unsigned long long)m->target,
                 zd != NULL ? "zone " : "no zone", zd != NULL ? zd : "");
        held[src]--;
        held[dst]++;
        excess[src] -= wsum;
        excess[dst] += wsum;
    }
    /* Each move takes one replica from the node with the most excess to the one with the least
     * among the pairs apart by more than one replica (so the sum of squared excesses falls:
     * plans never oscillate, and when none is left every node is within 1 of its share). */
    while (active + out->n_moves < max_moves && wsum > 0) {
        int best_s = -1, best_d = -1;
        uint32_t best_g = 0;
        int64_t best_gap = wsum; /* a pair must be apart by more than one replica */
        for (uint32_t a = 0; a < s->n_nodes; a++) {
            if (!balance_node_eligible(&s->nodes[a])) {
                continue;
            }
            for (uint32_t b = 0; b < s->n_nodes; b++) {
                if (!balance_node_eligible(&s->nodes[b]) || excess[a] - excess[b] <= best_gap) {
                    continue;
                }
                for (uint32_t k = 0; k < s->n_groups; k++) {
                    if (balance_group_movable(s, &s->groups[k], zones, a, b, out)) {
                        best_s = (int)a;
                        best_d = (int)b;
                        best_g = s->groups[k].id;
                        best_gap = excess[a] - excess[b];
                        break;
                    }
                }
            }
        }
        if (best_s < 0) {
            break;
        }
        struct ctl_balance_move *m = &out->moves[out->n_moves++];
        m->group = best_g;
        m->source = s->nodes[best_s].id;
        m->target = s->nodes[best_d].id;
        int64_t den = wsum;
        snprintf(m->why, sizeof(m->why),
                 "node %llu holds %lld replicas, share %.1f; node %llu holds %lld, share %.1f "
                 "(total %lld over weight %lld); group %u has a replica on %llu and none on %llu",
                 (unsigned long long)m->source, (long long)held[best_s],
                 (double)(held[best_s] * den - excess[best_s]) / (double)den,
                 (unsigned long long)m->target, (long long)held[best_d],
                 (double)(held[best_d] * den - excess[best_d]) / (double)den, (long long)total,
                 (long long)wsum, best_g, (unsigned long long)m->source,
                 (unsigned long long)m->target);
        held[best_s]--;
        held[best_d]++;
        excess[best_s] -= wsum;
        excess[best_d] += wsum;
    }
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (!balance_node_eligible(&s->nodes[i]) || wsum == 0) {
            continue;
        }
        if (excess[i] > wsum || excess[i] < -wsum) {
            out->balanced = false;
            return;
        }
    }
    out->balanced = wsum > 0;
}

uint32_t ctl_balance_leaders(const struct ctl_state *s, uint32_t max_changes,
                             struct ctl_balance_leader *out)
{
    uint32_t led[CTL_NODES_MAX] = {0}, n = 0;
    for (uint32_t k = 0; k < s->n_groups; k++) {
        int p = balance_node_index(s, s->groups[k].preferred_leader);
        if (p >= 0) {
            led[p]++;
        }
    }
    while (n < max_changes) {
        int best_a = -1, best_b = -1;
        uint32_t best_g = 0, best_gap = 1; /* a pair must be apart by more than one */
        for (uint32_t k = 0; k < s->n_groups; k++) {
            const struct ctl_group *g = &s->groups[k];
            bool planned = false;
            for (uint32_t m = 0; m < n; m++) {
                planned |= out[m].group == g->id;
            }
            int a = balance_node_index(s, g->preferred_leader);
            if (planned || a < 0 || ctl_state_active_task(s, g->id) != NULL ||
                !ctl_group_has_quorum(s, g)) {
                continue;
            }
            for (uint32_t p = 0; p < g->n_peers; p++) {
                int b = balance_node_index(s, g->desired_peers[p]);
                if (b < 0 || b == a || !balance_node_eligible(&s->nodes[b]) ||
                    led[a] <= led[b] + best_gap) {
                    continue;
                }
                best_a = a;
                best_b = b;
                best_g = g->id;
                best_gap = led[a] - led[b];
            }
        }
        if (best_a < 0) {
            break;
        }
        out[n++] = (struct ctl_balance_leader){best_g, s->nodes[best_a].id, s->nodes[best_b].id};
        led[best_a]--;
        led[best_b]++;
    }
    return n;
}
