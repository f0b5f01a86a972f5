/* lease.c - the leader lease the loop publishes for reads on the gRPC threads (read_local.c). */
#include "service/runtime/lease.h"

/*
 * Leases (raft_read_lease): at each tick the loop turns the core's lease, counted in its ticks,
 * into a time on rt_now_ms()'s clock for the gRPC threads (runtime_read_local). The lease ends
 * L = election_tick - 2 - drift ticks after the tick at which the round a quorum acknowledged was
 * sent, so its end is tick_ms[that tick] + L * tick_ms: the time the tick was taken, not the
 * current tick's, so a loop that ticked late never stretches it. A lease from a tick older than
 * RT_LEASE_TICKS is not published.
 */
void rt_lease_publish(struct runtime *rt, struct rt_group *g)
{
    raft_index index = 0;
    unsigned left = 0;
    int64_t until = 0;
    unsigned e = rt->opts.election_tick;
    unsigned drift = e / 10 > 0 ? e / 10 : 1;
    if (g->raft != NULL && raft_read_lease(g->raft, &index, &left) == 0 && e > 2 + drift) {
        unsigned len = e - 2 - drift;
        uint64_t age = left <= len ? len - left : 0; /* ticks since the acknowledged round */
        if (age < RT_LEASE_TICKS && age < g->raft_ticks)
            until = g->tick_ms[(g->raft_ticks - age) % RT_LEASE_TICKS] +
                    (int64_t)len * rt->opts.tick_ms;
    }
    if (until == 0) {
        rt_lease_clear(g);
        return;
    }
    atomic_store_explicit(&g->lease_index, index, memory_order_relaxed);
    atomic_store_explicit(&g->lease_until_ms, until, memory_order_release);
}

void rt_lease_clear(struct rt_group *g)
{
    atomic_store_explicit(&g->lease_until_ms, 0, memory_order_release);
}

int rt_transfer_leader(struct rt_group *g, raft_id to)
{
    rt_lease_clear(g); /* the target's forced election ignores leases */
    return raft_transfer_leader(g->raft, to);
}
