/* encode.c - serializes a route snapshot as a slotd.v1.RouteSnapshotResponse. */
#include "route.h"

#include <stdlib.h>
#include <time.h>

#include "slotd/v1/metadata.pb-c.h"

static const char *const role_names[] = {"none", "voter", "learner"};

int route_snapshot_encode(const struct route_snapshot *s, uint8_t **buf, size_t *len)
{
    static const uint32_t no_table[ROUTE_HASH_SLOTS];
    Slotd__V1__RouteSnapshotResponse resp = SLOTD__V1__ROUTE_SNAPSHOT_RESPONSE__INIT;
    int rc = ROUTE_ENOMEM;
    size_t n_msgs = s->n_groups + s->n_nodes;
    size_t n_reps = 0;
    for (size_t i = 0; i < s->n_groups; i++) {
        n_reps += s->groups[i].n_replicas;
    }
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    int64_t now = (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
    Slotd__V1__ReplicaStatus *reps = calloc(n_reps > 0 ? n_reps : 1, sizeof(*reps));
    Slotd__V1__ReplicaStatus **rep_ptrs = calloc(n_reps > 0 ? n_reps : 1, sizeof(*rep_ptrs));
    if (reps == NULL || rep_ptrs == NULL) {
        free(reps);
        free(rep_ptrs);
        return ROUTE_ENOMEM;
    }
    /* The messages live in one array, the pointers protobuf-c wants in another. */
    void *msgs =
        calloc(n_msgs > 0 ? n_msgs : 1, sizeof(Slotd__V1__GroupRoute) > sizeof(Slotd__V1__NodeInfo)
                                            ? sizeof(Slotd__V1__GroupRoute)
                                            : sizeof(Slotd__V1__NodeInfo));
    if (msgs == NULL) {
        goto err;
    }
    void **ptrs = calloc(n_msgs > 0 ? n_msgs : 1, sizeof(void *));
    if (ptrs == NULL) {
        goto err_after_msgs;
    }
    Slotd__V1__GroupRoute *groups = msgs;
    Slotd__V1__NodeInfo *nodes = (Slotd__V1__NodeInfo *)(groups + s->n_groups);
    size_t k = 0;
    for (size_t i = 0; i < s->n_groups; i++) {
        const struct route_group *g = &s->groups[i];
        slotd__v1__group_route__init(&groups[i]);
        groups[i].group_id = g->id;
        groups[i].n_voters = g->n_voters;
        groups[i].voters = (uint64_t *)g->voters;
        groups[i].n_learners = g->n_learners;
        groups[i].learners = (uint64_t *)g->learners;
        groups[i].config_epoch = g->config_epoch;
        groups[i].preferred_leader = g->preferred_leader;
        groups[i].leader = g->leader;
        groups[i].leader_term = g->leader_term;
        groups[i].n_intended_voters = g->n_intended_voters;
        groups[i].intended_voters = (uint64_t *)g->intended_voters;
        groups[i].n_intended_learners = g->n_intended_learners;
        groups[i].intended_learners = (uint64_t *)g->intended_learners;
        groups[i].n_replicas = g->n_replicas;
        groups[i].replicas = rep_ptrs + k;
        for (uint32_t j = 0; j < g->n_replicas; j++, k++) {
            const struct route_replica *r = &g->replicas[j];
            slotd__v1__replica_status__init(&reps[k]);
            reps[k].node_id = r->node;
            reps[k].role = (char *)role_names[r->role <= ROUTE_ROLE_LEARNER ? r->role : 0];
            reps[k].leader = r->leader;
            reps[k].term = r->term;
            reps[k].commit_index = r->commit;
            reps[k].applied_index = r->applied;
            reps[k].age_ms = now > r->heard_ms ? (uint64_t)(now - r->heard_ms) : 0;
            rep_ptrs[k] = &reps[k];
        }
        ptrs[i] = &groups[i];
    }
    for (size_t i = 0; i < s->n_nodes; i++) {
        slotd__v1__node_info__init(&nodes[i]);
        nodes[i].node_id = s->nodes[i].id;
        nodes[i].address = (char *)s->nodes[i].address;
        ptrs[s->n_groups + i] = &nodes[i];
    }
    resp.route_revision = s->revision;
    resp.n_hash_slot_table = ROUTE_HASH_SLOTS;
    resp.hash_slot_table = (uint32_t *)(s->table_ready ? s->slot_group : no_table);
    resp.n_groups = s->n_groups;
    resp.groups = (Slotd__V1__GroupRoute **)ptrs;
    resp.n_nodes = s->n_nodes;
    resp.nodes = (Slotd__V1__NodeInfo **)(ptrs + s->n_groups);

    size_t size = slotd__v1__route_snapshot_response__get_packed_size(&resp);
    uint8_t *out = malloc(size > 0 ? size : 1);
    if (out == NULL) {
        goto err_after_ptrs;
    }
    *len = slotd__v1__route_snapshot_response__pack(&resp, out);
    *buf = out;
    rc = ROUTE_OK;

err_after_ptrs:
    free(ptrs);
err_after_msgs:
    free(msgs);
err:
    free(reps);
    free(rep_ptrs);
    return rc;
}
