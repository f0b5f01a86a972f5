/* route.c - route errors, hash-slot range splitting and route snapshot construction and lookup. */
#include "route.h"

#include <assert.h>
#include <stdlib.h>
#include <string.h>

SLOTD_ERRLIST_STRERROR(route_strerror, ROUTE_ERRORS, "unknown error")

int route_split_ranges(unsigned n_groups, uint32_t slot_group[ROUTE_HASH_SLOTS])
{
    if (n_groups < 1 || n_groups > ROUTE_HASH_SLOTS) {
        return ROUTE_EINVALID;
    }
    unsigned base = ROUTE_HASH_SLOTS / n_groups;
    unsigned extra = ROUTE_HASH_SLOTS % n_groups;
    unsigned slot = 0;
    for (unsigned g = 1; g <= n_groups; g++) {
        unsigned size = base + (g <= extra ? 1 : 0);
        for (unsigned i = 0; i < size; i++) {
            slot_group[slot++] = g;
        }
    }
    assert(slot == ROUTE_HASH_SLOTS);
    return ROUTE_OK;
}

size_t route_ranges_of(const uint32_t slot_group[ROUTE_HASH_SLOTS], uint32_t group,
                       struct route_range *out, size_t max)
{
    size_t n = 0;
    unsigned s = 0;
    while (s < ROUTE_HASH_SLOTS) {
        if (slot_group[s] != group) {
            s++;
            continue;
        }
        unsigned first = s;
        while (s + 1 < ROUTE_HASH_SLOTS && slot_group[s + 1] == group) {
            s++;
        }
        if (n < max) {
            out[n].first = (uint16_t)first;
            out[n].last = (uint16_t)s;
        }
        n++;
        s++;
    }
    return n;
}

/* One allocation: the struct, then the groups, then the nodes. */
static struct route_snapshot *snapshot_alloc(size_t n_groups, size_t n_nodes)
{
    size_t bytes = sizeof(struct route_snapshot) + n_groups * sizeof(struct route_group) +
                   n_nodes * sizeof(struct route_node);
    struct route_snapshot *s = calloc(1, bytes);
    if (s == NULL) {
        return NULL;
    }
    s->n_groups = n_groups;
    s->groups = n_groups > 0 ? (struct route_group *)(s + 1) : NULL;
    s->n_nodes = n_nodes;
    s->nodes = n_nodes > 0
                   ? (struct route_node *)((char *)(s + 1) + n_groups * sizeof(struct route_group))
                   : NULL;
    atomic_init(&s->refs__, 1);
    s->published__ = false;
    return s;
}

int route_snapshot_new(size_t n_groups, size_t n_nodes, struct route_snapshot **out)
{
    if (n_groups > ROUTE_GROUPS_MAX || n_nodes > ROUTE_NODES_MAX) {
        return ROUTE_EINVALID;
    }
    struct route_snapshot *s = snapshot_alloc(n_groups, n_nodes);
    if (s == NULL) {
        return ROUTE_ENOMEM;
    }
    *out = s;
    return ROUTE_OK;
}

int route_snapshot_clone(const struct route_snapshot *s, struct route_snapshot **out)
{
    struct route_snapshot *c = snapshot_alloc(s->n_groups, s->n_nodes);
    if (c == NULL) {
        return ROUTE_ENOMEM;
    }
    c->revision = s->revision;
    c->table_ready = s->table_ready;
    memcpy(c->slot_group, s->slot_group, sizeof(c->slot_group));
    if (s->n_groups > 0) {
        memcpy(c->groups, s->groups, s->n_groups * sizeof(*s->groups));
    }
    if (s->n_nodes > 0) {
        memcpy(c->nodes, s->nodes, s->n_nodes * sizeof(*s->nodes));
    }
    *out = c;
    return ROUTE_OK;
}

int route_snapshot_validate(const struct route_snapshot *s)
{
    for (size_t i = 0; i < s->n_groups; i++) {
        const struct route_group *g = &s->groups[i];
        if (g->id == 0 || (i > 0 && s->groups[i - 1].id >= g->id) ||
            g->n_voters > ROUTE_MEMBERS_MAX || g->n_learners > ROUTE_MEMBERS_MAX ||
            g->n_intended_voters > ROUTE_MEMBERS_MAX ||
            g->n_intended_learners > ROUTE_MEMBERS_MAX || g->n_replicas > ROUTE_MEMBERS_MAX) {
            return ROUTE_EINVALID;
        }
    }
    for (size_t i = 0; i < s->n_nodes; i++) {
        const struct route_node *n = &s->nodes[i];
        if ((i > 0 && s->nodes[i - 1].id >= n->id) ||
            memchr(n->address, '\0', sizeof(n->address)) == NULL) {
            return ROUTE_EINVALID;
        }
    }
    return ROUTE_OK;
}

static int group_cmp(const void *key, const void *elem)
{
    uint32_t id = *(const uint32_t *)key;
    const struct route_group *g = elem;
    return id < g->id ? -1 : id > g->id ? 1 : 0;
}

static int node_cmp(const void *key, const void *elem)
{
    uint64_t id = *(const uint64_t *)key;
    const struct route_node *n = elem;
    return id < n->id ? -1 : id > n->id ? 1 : 0;
}

const struct route_group *route_snapshot_group(const struct route_snapshot *s, uint32_t id)
{
    if (s->n_groups == 0) {
        return NULL;
    }
    return bsearch(&id, s->groups, s->n_groups, sizeof(*s->groups), group_cmp);
}

struct route_group *route_snapshot_group_mut(struct route_snapshot *s, uint32_t id)
{
    assert(!s->published__);
    return (struct route_group *)route_snapshot_group(s, id);
}

const struct route_node *route_snapshot_node(const struct route_snapshot *s, uint64_t id)
{
    if (s->n_nodes == 0) {
        return NULL;
    }
    return bsearch(&id, s->nodes, s->n_nodes, sizeof(*s->nodes), node_cmp);
}

int route_snapshot_lookup(const struct route_snapshot *s, const void *key, size_t len,
                          uint16_t *hash_slot, const struct route_group **group)
{
    uint16_t slot = route_hash_slot(key, len);
    *hash_slot = slot;
    *group = NULL;
    if (s == NULL || !s->table_ready || s->slot_group[slot] == 0) {
        return ROUTE_ENOT_READY;
    }
    const struct route_group *g = route_snapshot_group(s, s->slot_group[slot]);
    if (g == NULL) {
        return ROUTE_ENOT_READY;
    }
    *group = g;
    return g->leader == 0 ? ROUTE_ENO_LEADER : ROUTE_OK;
}

void route_snapshot_release(struct route_snapshot *s)
{
    if (s == NULL) {
        return;
    }
    size_t before = atomic_fetch_sub_explicit(&s->refs__, 1, memory_order_acq_rel);
    assert(before >= 1);
    if (before == 1) {
        free(s);
    }
}
