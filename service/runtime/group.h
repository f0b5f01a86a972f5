/* group.h - opening and closing this node's replicas (group.c). */
#ifndef SLOTD_RUNTIME_GROUP_H
#define SLOTD_RUNTIME_GROUP_H

#include "service/runtime/internal.h"

int rt_groups_open(struct runtime *rt, char *err, size_t errlen);
/* Writes a fresh group's first state (membership = voters, entry 1 = data, commit 1), synced. */
int rt_group_bootstrap(struct runtime *rt, uint32_t id, const uint64_t *voters, size_t n_voters,
                       const uint8_t *data, size_t len, char *err, size_t errlen);
/* Opens slot group g placed here by the cluster state, bootstrapping it when the store has no
 * log for it (GroupInit from slot_group, the 256-entry hash-slot table); `campaign`: this node
 * is its preferred leader. */
int rt_group_open_placed(struct runtime *rt, struct rt_group *g, const uint64_t *peers,
                         size_t n_peers, const uint32_t slot_group[256], bool campaign, char *err,
                         size_t errlen);
/* Opens the controller group with the applied index of cluster-state.json. */
int rt_group_open_ctl(struct runtime *rt, struct rt_group *g, uint64_t applied, char *err,
                      size_t errlen);
/* Opens a replica this node joins (a membership change placed it here): the fsm state and
 * applied index the store has for it, no bootstrap; the leader sends what it lacks. */
int rt_group_open_joining(struct runtime *rt, struct rt_group *g, char *err, size_t errlen);
/* Closes every replica (runtime_new on failure, runtime_free; no loop thread runs). */
void rt_groups_close(struct runtime *rt);

#endif /* SLOTD_RUNTIME_GROUP_H */
