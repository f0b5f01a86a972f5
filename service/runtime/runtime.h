/* runtime.h - the multi-raft runtime: a libuv loop owning every slot group, group commit, the apply
 * stage. */
#ifndef SLOTD_RUNTIME_H
#define SLOTD_RUNTIME_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/route/route.h"
#include "service/rpc/rpc.h"
#include "service/rpc/status.h"
#include "store/store.h"

/*
 * Threads (ARCHITECTURE.md §6):
 *   - gRPC threads call runtime_submit_*(); requests go into one bounded
 *     queue (records and bytes) and wake the loop with uv_async_send.
 *   - The loop thread owns every raft core: it drains the queue, ticks,
 *     collects the ready of every group into ONE synced raftlog batch (group
 *     commit) while at most one such batch is in flight, and hands committed
 *     entries to the apply stage.
 *   - The storage stage (libuv threadpool) writes and syncs that batch.
 *   - The apply stage (libuv threadpool, one job at a time, in order) applies
 *     committed entries of all groups into one fsm batch with each group's
 *     applied index, serves reads whose read index is covered, and finishes
 *     the waiting gRPC calls.
 */

#define RUNTIME_NODES_MAX 64

struct metrics_registry;

struct runtime_peer {
    uint64_t id;
    char address[128];
};

struct runtime_options {
    uint64_t node_id; /* default 1 */
    size_t n_nodes;   /* cluster members incl. this node; 0 = single node */
    struct runtime_peer nodes[RUNTIME_NODES_MAX]; /* sorted by id by runtime_new */
    unsigned replicas;                            /* voters per group; 0 = min(3, nodes) */
    unsigned n_groups;                            /* slot groups 1..n_groups; default 8 */
    const char *advertise;   /* this node's address in the route; default "127.0.0.1:7700" */
    unsigned tick_ms;        /* raft tick; default 100 */
    unsigned election_tick;  /* default 10 (1 s) */
    unsigned heartbeat_tick; /* default 1 */
    size_t queue_len_max;    /* queued requests; default 65536 */
    size_t queue_bytes_max;  /* queued request bytes; default 256 MiB */
    size_t
        compact_entries; /* compact a group's log after this many applied entries; default 10000 */
    size_t compact_tail; /* entries kept behind the compaction point; default 1000 */
    uint64_t seed;       /* raft election randomness; default from the node id */
    /* Where the runtime's series live (service/metrics/README.md); NULL (default): none.
     * Borrowed; must outlive the runtime. */
    struct metrics_registry *metrics;
};

void runtime_options_default(struct runtime_options *o);

struct runtime;
struct transport;

/* Static placement: the voters of group g (1-based) are nodes[(g-1+i) % n] for
 * i < replicas, with nodes sorted by id; the first one is the preferred
 * (initial) leader. Returns the number of voters written to out. */
size_t runtime_placement(const uint64_t *sorted_ids, size_t n, unsigned replicas, uint32_t group,
                         uint64_t *out);

/* Opens (bootstrapping if the store is empty) every slot group. store,
 * routes and server are borrowed for the runtime's lifetime. On error
 * returns non-zero with a sentence in err. */
int runtime_new(const struct runtime_options *o, struct store *store, struct route_table *routes,
                struct rpc_server *server, struct transport *transport, struct runtime **out,
                char *err, size_t errlen);
/* Starts the loop thread. */
int runtime_start(struct runtime *rt);
/* Hands leadership of the groups this node leads to caught-up voters,
 * waiting at most timeout_ms. Returns the number of groups still led. */
size_t runtime_transfer_leadership(struct runtime *rt, unsigned timeout_ms);
/* Stops the loop; every call still held is failed with SHUTTING_DOWN. */
void runtime_stop(struct runtime *rt);
void runtime_free(struct runtime *rt);

/* Called from gRPC threads. On success the runtime finishes `call` later.
 * On error (queue full, shutting down) nothing is consumed: err is filled
 * and the caller fails the call. `entry` is borrowed for the call (copied). */
int runtime_submit_propose(struct runtime *rt, uint32_t group, const uint8_t *entry, size_t len,
                           struct rpc_call *call, struct slotd_error *err);
/* `req` is the packed, validated ReadRequest (borrowed for the call, copied); the apply stage
 * serves it with slot_serve_read(). */
int runtime_submit_read(struct runtime *rt, uint32_t group, uint16_t hash_slot, const void *req,
                        size_t len, int consistency, uint64_t min_applied_index,
                        struct rpc_call *call, struct slotd_error *err);

/* ---- Peer traffic (service/node's Peer handlers and the transport). ---- */

/* A RaftBatch from a peer (bytes borrowed for the call, copied). Errors:
 * queue full / shutting down (err filled). */
int runtime_submit_raft_batch(struct runtime *rt, const uint8_t *batch, size_t len,
                              struct slotd_error *err);
/* A peer could not be reached: its groups' progress goes back to probing. Any thread. */
void runtime_peer_unreachable(struct runtime *rt, uint64_t peer);
/* One snapshot chunk from a peer (SnapshotChunk bytes borrowed for the call). The call is
 * answered once the chunk is staged (or rejected). */
int runtime_submit_snapshot_chunk(struct runtime *rt, const uint8_t *chunk, size_t len,
                                  struct rpc_call *call, struct slotd_error *err);
/* Fills a GroupStatusResponse for the groups hosted here (caller frees *buf with free()). */
int runtime_group_status(struct runtime *rt, uint8_t **buf, size_t *len);
/* True when this node hosts a replica of the group. */
bool runtime_hosts_group(const struct runtime *rt, uint32_t group);
uint64_t runtime_node_id(const struct runtime *rt);

#endif /* SLOTD_RUNTIME_H */
