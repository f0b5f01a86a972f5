/* read_local.c - Get reads served on the gRPC thread, no loop hop: serializable ones, and
 * linearizable ones under the leader lease. */
#include <stdlib.h>

#include "service/runtime/internal.h"
#include "service/runtime/request.h"

/* Whether hash slot s is in the group's published owned bitmap (rt_facts_publish_slots). */
static bool published_owns(struct rt_group *g, uint16_t s)
{
    uint64_t w = atomic_load_explicit(&g->pub_owned[s / 64], memory_order_acquire);
    return (w >> (s % 64)) & 1;
}

/*
 * A seqlock over the group's rows (internal.h, rt_group.read_seq): the writers that can change
 * what a key of this group reads as other than by applying entries in order -- an apply job that
 * changes the owned hash slots (a migration's accept or release), a snapshot install, the close
 * of a removed replica -- make read_seq odd before they touch rows or the published ownership and
 * even again after their LevelDB batch is written. A reader takes read_seq (even), checks the
 * group is hosted, owns the slot and has applied min_applied_index, reads, and keeps the answer
 * only when read_seq is unchanged and the group still hosted; otherwise the read goes the old
 * way through the loop, which serializes with all of them. LevelDB's own lock orders the row
 * writes against the Get, so a Get that saw such a batch sees the odd or later read_seq after it.
 * Ordinary applies change neither ownership nor old rows' meaning: a Get between them reads
 * some applied state at or after `applied`, which is what a serializable read promises.
 *
 * The LevelDB handle (rt->store) is the node's one store, opened before the rpc server starts
 * and closed by main only after rpc_server_shutdown has joined every gRPC thread, so it is valid
 * for every handler call; no per-group handle exists that a close or install could free.
 */
int runtime_read_local(struct runtime *rt, uint32_t group, uint16_t hash_slot, const void *req,
                       size_t len, uint64_t min_applied_index, bool linearizable,
                       struct rpc_call *call)
{
    if (group == 0 || group >= RT_GROUPS_CAP)
        return 0;
    struct rt_group *g = &rt->groups[group];
    uint64_t seq = atomic_load_explicit(&g->read_seq, memory_order_acquire);
    if (seq & 1 || !atomic_load_explicit(&g->hosted, memory_order_acquire))
        return 0;
    if (linearizable) {
        /* The leader lease (lease.c, rt_lease_publish): while it lasts no other leader exists,
         * so every write acknowledged before now was applied here (acknowledged on apply, by
         * this leader or by an earlier one whose entries this leader applied through
         * lease_index). Now is the read's linearization point; after it the state only grows.
         * Without a lease the read goes through the loop's ReadIndex. */
        int64_t until = atomic_load_explicit(&g->lease_until_ms, memory_order_acquire);
        uint64_t index = atomic_load_explicit(&g->lease_index, memory_order_relaxed);
        if (until == 0 || rt_now_ms() >= until) {
            metrics_counter_add(rt->metrics.read_lease_missed, 1);
            return 0;
        }
        if (index > min_applied_index)
            min_applied_index = index;
    }
    uint64_t applied = atomic_load_explicit(&g->applied, memory_order_acquire);
    if (applied < min_applied_index || applied == 0 || !published_owns(g, hash_slot))
        return 0; /* the loop waits for the index / answers WRONG_GROUP with its wording */
    uint64_t term = atomic_load_explicit(&g->pub_term, memory_order_relaxed);
    struct slotd_error err;
    uint8_t *buf = NULL;
    size_t blen = 0;
    int rc = slot_serve_read(rt->store, NULL, hash_slot, req, len, group, applied, term, &buf,
                             &blen, &err);
    atomic_thread_fence(memory_order_acquire); /* the Get before the second look */
    if (atomic_load_explicit(&g->read_seq, memory_order_relaxed) != seq ||
        !atomic_load_explicit(&g->hosted, memory_order_relaxed)) {
        free(buf);
        atomic_fetch_add_explicit(&rt->read_local_retried, 1, memory_order_relaxed);
        metrics_counter_add(rt->metrics.read_local_overlapped, 1);
        return 0;
    }
    if (rc != 0)
        rpc_call_fail(call, &err);
    else
        rpc_call_reply_bytes(call, buf, blen);
    free(buf);
    atomic_fetch_add_explicit(&rt->read_local_served, 1, memory_order_relaxed);
    metrics_counter_add(linearizable ? rt->metrics.read_lease_served
                                     : rt->metrics.read_local_served, 1);
    return 1;
}

uint64_t runtime_read_local_served(const struct runtime *rt, uint64_t *retried)
{
    struct runtime *m = (struct runtime *)rt; /* atomic loads of a const object */
    if (retried != NULL)
        *retried = atomic_load_explicit(&m->read_local_retried, memory_order_relaxed);
    return atomic_load_explicit(&m->read_local_served, memory_order_relaxed);
}
