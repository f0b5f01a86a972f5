/* placement.c - pure, deterministic placement of slot groups and the first hash-slot table. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

struct slot {
    uint64_t id;
    uint32_t weight;
    uint32_t replicas; /* replicas assigned so far */
    uint32_t leaders;  /* preferred leaderships assigned so far */
};

/* (a + 1) / wa < (b + 1) / wb, exactly (cross-multiplied; all factors fit in 64 bits). */
static bool load_below(uint32_t a, uint32_t wa, uint32_t b, uint32_t wb)
{
    return (uint64_t)(a + 1) * wb < (uint64_t)(b + 1) * wa;
}

static bool load_equal(uint32_t a, uint32_t wa, uint32_t b, uint32_t wb)
{
    return (uint64_t)(a + 1) * wb == (uint64_t)(b + 1) * wa;
}

/* Replica order: lower (replicas + 1) / weight first, then lower id. */
static bool replica_first(const struct slot *x, const struct slot *y)
{
    if (!load_equal(x->replicas, x->weight, y->replicas, y->weight)) {
        return load_below(x->replicas, x->weight, y->replicas, y->weight);
    }
    return x->id < y->id;
}

/* Leader order: fewer leaderships, then lower (leaders + 1) / weight, then lower id. */
static bool leader_first(const struct slot *x, const struct slot *y)
{
    if (x->leaders != y->leaders) {
        return x->leaders < y->leaders;
    }
    if (!load_equal(x->leaders, x->weight, y->leaders, y->weight)) {
        return load_below(x->leaders, x->weight, y->leaders, y->weight);
    }
    return x->id < y->id;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

/* Places one group: picks k nodes by replica order (loads as they were before this group), then
 * the preferred leader among them by leader order. */
static void place_group(struct slot *slots, size_t n, uint32_t k, struct ctl_group *g)
{
    bool picked[CTL_NODES_MAX] = {false};
    size_t chosen[CTL_REPLICAS_MAX] = {0};
    assert(k >= 1 && k <= n && k <= CTL_REPLICAS_MAX && n <= CTL_NODES_MAX);
    for (uint32_t r = 0; r < k; r++) {
        size_t best = n;
        for (size_t i = 0; i < n; i++) {
            if (!picked[i] && (best == n || replica_first(&slots[i], &slots[best]))) {
                best = i;
            }
        }
        picked[best] = true;
        chosen[r] = best;
    }
    size_t leader = chosen[0];
    for (uint32_t r = 1; r < k; r++) {
        if (leader_first(&slots[chosen[r]], &slots[leader])) {
            leader = chosen[r];
        }
    }
    g->n_peers = k;
    for (uint32_t r = 0; r < k; r++) {
        slots[chosen[r]].replicas++;
        g->desired_peers[r] = slots[chosen[r]].id;
    }
    qsort(g->desired_peers, k, sizeof(uint64_t), cmp_u64);
    slots[leader].leaders++;
    g->preferred_leader = slots[leader].id;
    g->config_epoch = 1;
}

int ctl_placement_make(const struct ctl_placement_node *nodes, size_t n_nodes, uint32_t slot_groups,
                       uint32_t replicas, struct ctl_group *groups,
                       struct ctl_hash_slot_table *table)
{
    if (n_nodes < 1 || n_nodes > CTL_NODES_MAX || slot_groups < 1 || slot_groups > CTL_GROUPS_MAX ||
        replicas < 1 || replicas > CTL_REPLICAS_MAX) {
        return CTL_EINVALID;
    }
    struct slot slots[CTL_NODES_MAX];
    for (size_t i = 0; i < n_nodes; i++) {
        if (nodes[i].id < 1 || nodes[i].weight < CTL_WEIGHT_MIN ||
            nodes[i].weight > CTL_WEIGHT_MAX) {
            return CTL_EINVALID;
        }
        for (size_t k = 0; k < i; k++) {
            if (nodes[k].id == nodes[i].id) {
                return CTL_EINVALID;
            }
        }
        slots[i] = (struct slot){.id = nodes[i].id, .weight = nodes[i].weight};
    }
    uint32_t k = replicas < n_nodes ? replicas : (uint32_t)n_nodes;
    for (uint32_t g = 0; g < slot_groups; g++) {
        memset(&groups[g], 0, sizeof(groups[g]));
        groups[g].id = g + 1;
        place_group(slots, n_nodes, k, &groups[g]);
    }
    memset(table, 0, sizeof(*table));
    table->version = 1;
    table->n_ranges = slot_groups;
    uint32_t base = CTL_HASH_SLOTS / slot_groups, extra = CTL_HASH_SLOTS % slot_groups, next = 0;
    for (uint32_t g = 0; g < slot_groups; g++) {
        uint32_t size = base + (g < extra ? 1 : 0);
        table->ranges[g] =
            (struct ctl_range){.first = next, .last = next + size - 1, .group = g + 1};
        next += size;
    }
    return CTL_OK;
}

int ctl__state_place(struct ctl_state *state)
{
    struct ctl_placement_node nodes[CTL_NODES_MAX];
    size_t n = 0;
    for (uint32_t i = 0; i < state->n_nodes; i++) {
        const struct ctl_node *nd = &state->nodes[i];
        if (nd->join_state == CTL_JOIN_ACTIVE && (nd->roles & CTL_ROLE_DATA)) {
            nodes[n++] = (struct ctl_placement_node){.id = nd->id, .weight = nd->weight};
        }
    }
    int rc = ctl_placement_make(nodes, n, state->config.slot_groups, state->config.replicas,
                                state->groups, &state->table);
    if (rc == CTL_OK) {
        state->n_groups = state->config.slot_groups;
    }
    return rc;
}
