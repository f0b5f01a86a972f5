/* lease.h - the leader lease the loop publishes for the gRPC threads' reads (lease.c). */
#ifndef SLOTD_RUNTIME_LEASE_H
#define SLOTD_RUNTIME_LEASE_H

#include "service/runtime/internal.h"

/* Leases (lease.c): rt_lease_publish recomputes g's published lease after a tick; rt_lease_clear
 * withdraws it (a transfer starts, leadership is lost, the replica closes);
 * rt_transfer_leader is raft_transfer_leader after rt_lease_clear. Loop thread. */
void rt_lease_publish(struct runtime *rt, struct rt_group *g);
void rt_lease_clear(struct rt_group *g);
int rt_transfer_leader(struct rt_group *g, raft_id to);

#endif /* SLOTD_RUNTIME_LEASE_H */
