/* facts.h - what this node observed of each group, and the controller-command vet (facts.c). */
#ifndef SLOTD_RUNTIME_FACTS_H
#define SLOTD_RUNTIME_FACTS_H

#include "service/runtime/internal.h"
#include "service/runtime/request.h"

/* facts.c (loop thread): a GroupStatus answer in which the group's leader spoke for itself. */
void rt_facts_leader_commit(struct rt_group *g, uint64_t commit, int64_t now);
/* ... and its hash-slot state (GroupLeader owned, fenced: 32-byte bitmaps, borrowed; other
 * lengths: an answer without them, ignored). */
void rt_facts_leader_slots(struct rt_group *g, uint64_t leader, const uint8_t *owned,
                           size_t owned_len, const uint8_t *fenced, size_t fenced_len,
                           uint64_t migration_task, int64_t now);
/* The thread that owns g's fsm_state (apply stage, install, open): publishes its owned and
 * fenced bitmaps and migration_task for GroupStatus. */
void rt_facts_publish_slots(struct rt_group *g);
/* Copies what rt_facts_publish_slots published (any thread). */
void rt_facts_published_slots(const struct rt_group *g, uint8_t owned[32], uint8_t fenced[32],
                              uint64_t *migration_task);
/* On the controller leader: checks a controller command against the facts this node observed
 * (ctl_vet) before it is proposed. Returns 0 with *cmd / *len replaced by the rebuilt command
 * when ctl_vet rebuilt it (*owned set: caller frees *cmd with ctl_free()), or -1 with err
 * (FAILED_PRECONDITION naming the fact). Not leading group 0: 0, unchanged. */
int rt_ctl_vet(struct runtime *rt, const uint8_t **cmd, size_t *len, char **owned,
               struct slotd_error *err);
/* rt_ctl_vet for a queued proposal of group 0: the request to propose (maybe reallocated), or
 * NULL when it was answered (and freed). */
struct rt_request *rt_ctl_vet_request(struct runtime *rt, struct rt_request *r);

#endif /* SLOTD_RUNTIME_FACTS_H */
