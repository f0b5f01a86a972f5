/* client_route.c - hash slots (zlib crc32 % 256), route decoding, the route's getters, lookups. */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <zlib.h>

unsigned slotd_hash_slot(const void *key, size_t klen)
{
    /* zlib's crc32() (CRC-32/IEEE), like the server's route_hash_slot(); an empty key must not
     * reach it as a NULL buffer, for which zlib answers its initial value */
    uLong crc = crc32(0L, Z_NULL, 0);
    const Bytef *p = key;
    while (klen > 0) {
        uInt n = klen > UINT_MAX ? UINT_MAX : (uInt)klen;
        crc = crc32(crc, p, n);
        p += n;
        klen -= n;
    }
    return (unsigned)(crc % SLOTD_HASH_SLOTS);
}

void slotd_route_destroy(struct slotd_route *r)
{
    if (!r)
        return;
    free(r->groups);
    free(r->nodes);
    free(r);
}

uint64_t slotd_route_revision(const struct slotd_route *r)
{
    return r->revision;
}

const char *slotd_route_source(const struct slotd_route *r)
{
    return r->source;
}

uint32_t slotd_route_hash_slot_group(const struct slotd_route *r, unsigned hash_slot)
{
    return hash_slot < SLOTD_HASH_SLOTS ? r->hash_slot_table[hash_slot] : 0;
}

size_t slotd_route_group_count(const struct slotd_route *r)
{
    return r->group_count;
}

const struct slotd_route_group *slotd_route_group_at(const struct slotd_route *r, size_t i)
{
    return i < r->group_count ? &r->groups[i] : NULL;
}

size_t slotd_route_node_count(const struct slotd_route *r)
{
    return r->node_count;
}

const struct slotd_route_node *slotd_route_node_at(const struct slotd_route *r, size_t i)
{
    return i < r->node_count ? &r->nodes[i] : NULL;
}

static int group_cmp(const void *a, const void *b)
{
    uint32_t x = ((const struct slotd_route_group *)a)->group_id;
    uint32_t y = ((const struct slotd_route_group *)b)->group_id;
    return x < y ? -1 : x > y;
}

static int node_cmp(const void *a, const void *b)
{
    uint64_t x = ((const struct slotd_route_node *)a)->node_id;
    uint64_t y = ((const struct slotd_route_node *)b)->node_id;
    return x < y ? -1 : x > y;
}

/* Copies m's groups into r->groups (allocated by the caller with m->n_groups entries). */
static int route_fill_groups(struct slotd_route *r, const Slotd__V1__RouteSnapshotResponse *m,
                             char *err, size_t errlen)
{
    for (size_t i = 0; i < m->n_groups; i++) {
        const Slotd__V1__GroupRoute *g = m->groups[i];
        struct slotd_route_group *o = &r->groups[i];
        if (g->n_voters > SLOTD_ROUTE_REPLICAS_MAX || g->n_learners > SLOTD_ROUTE_REPLICAS_MAX ||
            g->n_intended_voters > SLOTD_ROUTE_REPLICAS_MAX ||
            g->n_intended_learners > SLOTD_ROUTE_REPLICAS_MAX ||
            g->n_replicas > SLOTD_ROUTE_REPLICAS_MAX)
            return slotd_call_fail(err, errlen, SLOTD_CLIENT_EMALFORMED,
                                   "route snapshot: group %u has more than %d voters, learners or "
                                   "replicas",
                                   g->group_id, SLOTD_ROUTE_REPLICAS_MAX);
        o->group_id = g->group_id;
        o->voter_count = (unsigned)g->n_voters;
        if (g->n_voters)
            memcpy(o->voters, g->voters, g->n_voters * sizeof(uint64_t));
        o->learner_count = (unsigned)g->n_learners;
        if (g->n_learners)
            memcpy(o->learners, g->learners, g->n_learners * sizeof(uint64_t));
        o->intended_voter_count = (unsigned)g->n_intended_voters;
        if (g->n_intended_voters)
            memcpy(o->intended_voters, g->intended_voters, g->n_intended_voters * sizeof(uint64_t));
        o->intended_learner_count = (unsigned)g->n_intended_learners;
        if (g->n_intended_learners)
            memcpy(o->intended_learners, g->intended_learners,
                   g->n_intended_learners * sizeof(uint64_t));
        o->replica_count = (unsigned)g->n_replicas;
        for (size_t k = 0; k < g->n_replicas; k++) {
            const Slotd__V1__ReplicaStatus *rs = g->replicas[k];
            struct slotd_route_replica *x = &o->replicas[k];
            x->node_id = rs->node_id;
            x->role = strcmp(rs->role, "voter") == 0     ? SLOTD_REPLICA_VOTER
                      : strcmp(rs->role, "learner") == 0 ? SLOTD_REPLICA_LEARNER
                                                         : SLOTD_REPLICA_NONE;
            x->leader = rs->leader;
            x->term = rs->term;
            x->commit_index = rs->commit_index;
            x->applied_index = rs->applied_index;
            x->age_ms = rs->age_ms;
        }
        o->config_epoch = g->config_epoch;
        o->preferred_leader = g->preferred_leader;
        o->leader = g->leader;
        o->leader_term = g->leader_term;
    }
    r->group_count = m->n_groups;
    qsort(r->groups, r->group_count, sizeof(*r->groups), group_cmp);
    for (unsigned s = 0; s < SLOTD_HASH_SLOTS; s++) {
        struct slotd_route_group key = {.group_id = r->hash_slot_table[s]};
        struct slotd_route_group *g =
            bsearch(&key, r->groups, r->group_count, sizeof(key), group_cmp);
        if (g)
            g->hash_slot_count++;
    }
    return SLOTD_CLIENT_OK;
}

static int route_fill(struct slotd_route *r, const Slotd__V1__RouteSnapshotResponse *m, char *err,
                      size_t errlen)
{
    if (m->n_hash_slot_table != SLOTD_HASH_SLOTS)
        return slotd_call_fail(err, errlen, SLOTD_CLIENT_EMALFORMED,
                               "route snapshot: hash_slot_table has %zu entries, "
                               "expected %d",
                               m->n_hash_slot_table, SLOTD_HASH_SLOTS);
    if (m->n_groups > SLOTD_ROUTE_GROUPS_MAX)
        return slotd_call_fail(err, errlen, SLOTD_CLIENT_EMALFORMED,
                               "route snapshot: %zu groups, more than %d", m->n_groups,
                               SLOTD_ROUTE_GROUPS_MAX);
    if (m->n_nodes > SLOTD_CLIENT_NODES_MAX)
        return slotd_call_fail(err, errlen, SLOTD_CLIENT_EMALFORMED,
                               "route snapshot: %zu nodes, more than %d", m->n_nodes,
                               SLOTD_CLIENT_NODES_MAX);
    r->revision = m->route_revision;
    memcpy(r->hash_slot_table, m->hash_slot_table, sizeof(r->hash_slot_table));
    for (size_t i = 0; i < m->n_nodes; i++) {
        if (strlen(m->nodes[i]->address) > SLOTD_ADDRESS_LEN)
            return slotd_call_fail(err, errlen, SLOTD_CLIENT_EMALFORMED,
                                   "route snapshot: node %llu: address longer than %d "
                                   "bytes",
                                   (unsigned long long)m->nodes[i]->node_id, SLOTD_ADDRESS_LEN);
        r->nodes[i].node_id = m->nodes[i]->node_id;
        snprintf(r->nodes[i].address, sizeof(r->nodes[i].address), "%s", m->nodes[i]->address);
    }
    r->node_count = m->n_nodes;
    qsort(r->nodes, r->node_count, sizeof(*r->nodes), node_cmp);
    return route_fill_groups(r, m, err, errlen);
}

int slotd__route_decode(const uint8_t *buf, size_t len, struct slotd_route **out, char *err,
                        size_t errlen)
{
    *out = NULL;
    Slotd__V1__RouteSnapshotResponse *m =
        slotd__v1__route_snapshot_response__unpack(NULL, len, buf);
    if (!m)
        return slotd_call_fail(err, errlen, SLOTD_CLIENT_EMALFORMED,
                               "route snapshot: %zu bytes do not decode as RouteSnapshotResponse",
                               len);
    int rc = SLOTD_CLIENT_ENOMEM;
    struct slotd_route *r = calloc(1, sizeof(*r));
    if (!r)
        goto err_after_unpack;
    /* one spare entry each, so apply_hint can add a node without reallocating */
    r->groups = calloc(m->n_groups + 1, sizeof(*r->groups));
    r->nodes = calloc(SLOTD_CLIENT_NODES_MAX, sizeof(*r->nodes));
    if (!r->groups || !r->nodes)
        goto err_after_route;
    rc = route_fill(r, m, err, errlen);
    if (rc != SLOTD_CLIENT_OK)
        goto err_after_route;
    slotd__v1__route_snapshot_response__free_unpacked(m, NULL);
    *out = r;
    return SLOTD_CLIENT_OK;

err_after_route:
    slotd_route_destroy(r);
err_after_unpack:
    slotd__v1__route_snapshot_response__free_unpacked(m, NULL);
    if (rc == SLOTD_CLIENT_ENOMEM)
        snprintf(err, errlen, "route snapshot: out of memory");
    return rc;
}

struct slotd_route *slotd__route_copy(const struct slotd_route *r)
{
    struct slotd_route *c = malloc(sizeof(*c));
    if (!c)
        return NULL;
    *c = *r;
    c->groups = calloc(r->group_count + 1, sizeof(*c->groups));
    c->nodes = calloc(SLOTD_CLIENT_NODES_MAX, sizeof(*c->nodes));
    if (!c->groups || !c->nodes) {
        free(c->groups);
        free(c->nodes);
        free(c);
        return NULL;
    }
    if (r->group_count)
        memcpy(c->groups, r->groups, r->group_count * sizeof(*c->groups));
    if (r->node_count)
        memcpy(c->nodes, r->nodes, r->node_count * sizeof(*c->nodes));
    return c;
}

uint32_t slotd_route_group_of(const struct slotd_route *r, const void *key, size_t klen)
{
    return r->hash_slot_table[slotd_hash_slot(key, klen)];
}

/* Every id of a (at most SLOTD_ROUTE_REPLICAS_MAX ids) is in b, and the counts match. */
static int same_set(const uint64_t *a, unsigned na, const uint64_t *b, unsigned nb)
{
    if (na != nb)
        return 0;
    for (unsigned i = 0; i < na; i++) {
        unsigned j = 0;
        while (j < nb && b[j] != a[i])
            j++;
        if (j == nb)
            return 0;
    }
    return 1;
}

int slotd_route_group_agrees(const struct slotd_route_group *g)
{
    return same_set(g->voters, g->voter_count, g->intended_voters, g->intended_voter_count) &&
           same_set(g->learners, g->learner_count, g->intended_learners, g->intended_learner_count);
}

const struct slotd_route_group *slotd_route_group_find(const struct slotd_route *r,
                                                       uint32_t group_id)
{
    struct slotd_route_group key = {.group_id = group_id};
    return bsearch(&key, r->groups, r->group_count, sizeof(key), group_cmp);
}

const char *slotd_route_node_address(const struct slotd_route *r, uint64_t node_id)
{
    struct slotd_route_node key = {.node_id = node_id};
    const struct slotd_route_node *n =
        bsearch(&key, r->nodes, r->node_count, sizeof(key), node_cmp);
    return n && n->address[0] ? n->address : NULL;
}

const char *slotd__route_slot_leader_address(const struct slotd_route *r, unsigned hash_slot)
{
    const struct slotd_route_group *g =
        hash_slot < SLOTD_HASH_SLOTS ? slotd_route_group_find(r, r->hash_slot_table[hash_slot])
                                     : NULL;
    if (!g || g->leader == 0)
        return NULL;
    return slotd_route_node_address(r, g->leader);
}

const char *slotd_route_leader_address(const struct slotd_route *r, const void *key, size_t klen)
{
    return slotd__route_slot_leader_address(r, slotd_hash_slot(key, klen));
}

bool slotd__route_apply_hint(struct slotd_route *r, uint32_t group_id, uint64_t node_id,
                             const char *address, uint64_t term)
{
    struct slotd_route_group key = {.group_id = group_id};
    struct slotd_route_group *g = bsearch(&key, r->groups, r->group_count, sizeof(key), group_cmp);
    if (!g || node_id == 0 || term < g->leader_term)
        return false;
    bool changed = g->leader != node_id || g->leader_term != term;
    g->leader = node_id;
    g->leader_term = term;
    if (!address || !address[0] || strlen(address) > SLOTD_ADDRESS_LEN)
        return changed;
    struct slotd_route_node nkey = {.node_id = node_id};
    struct slotd_route_node *n = bsearch(&nkey, r->nodes, r->node_count, sizeof(nkey), node_cmp);
    if (!n && r->node_count < SLOTD_CLIENT_NODES_MAX) {
        n = &r->nodes[r->node_count++];
        n->node_id = node_id;
        n->address[0] = '\0';
    }
    if (n && strcmp(n->address, address) != 0) {
        snprintf(n->address, sizeof(n->address), "%s", address);
        qsort(r->nodes, r->node_count, sizeof(*r->nodes), node_cmp);
        changed = true;
    }
    return changed;
}
