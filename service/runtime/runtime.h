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
#include "slotd/internal/v1/peer.pb-c.h"
#include "store/store.h"

/*
 * Threads (ARCHITECTURE.md §6):
 *   - gRPC threads call runtime_submit_*(); requests go into one bounded
 *     queue (records and bytes) and wake the loop with uv_async_send.
 *   - The loop thread owns every raft core: it drains the queue, ticks,
 *     collects the ready of every group into ONE synced raftlog batch (group
 *     commit) while at most one such batch is in flight, and hands committed
 *     entries to the apply stage.
 *   - The storage stage (thread "slotd-storage", stage.c) writes and syncs that batch.
 *   - The apply stage (thread "slotd-apply", one job at a time, in order, the next one
 *     right after the last without waiting for the loop) applies
 *     committed entries of all groups into one fsm batch with each group's
 *     applied index, serves reads whose read index is covered, and finishes
 *     the waiting gRPC calls.
 *   - The watch notifier (watch.c, a thread of its own) answers the watch polls
 *     waiting on the histories the apply stage appended to.
 */

#define RUNTIME_NODES_MAX 64

struct metrics_registry;

struct runtime_peer {
    uint64_t id;
    char address[128];
};

struct ctl_state;

struct runtime_options {
    uint64_t node_id; /* default 1 */
    size_t n_nodes;   /* cluster members incl. this node; 0 = single node */
    struct runtime_peer nodes[RUNTIME_NODES_MAX]; /* sorted by id by runtime_new */
    unsigned replicas;                            /* voters per group; 0 = min(3, nodes) */
    unsigned n_groups;                            /* slot groups 1..n_groups; default 8 */
    /* this node's client port (--listen) as route snapshots give it; default "127.0.0.1:7700" */
    const char *advertise;
    /* this node's peer port (--peer-listen), where other nodes reach it; default
     * "127.0.0.1:7701". nodes[] and join name peer addresses. */
    const char *peer_advertise;
    unsigned tick_ms;        /* raft tick; default 100 */
    unsigned election_tick;  /* default 10 (1 s) */
    unsigned heartbeat_tick; /* default 1 */
    size_t queue_len_max;    /* queued requests; default 65536 */
    size_t queue_bytes_max;  /* queued request bytes; default 256 MiB */
    size_t
        compact_entries; /* compact a group's log after this many applied entries; default 10000 */
    size_t compact_tail; /* entries kept behind the compaction point; default 1000 */
    /* Row bytes per snapshot chunk a leader reads from its fsm snapshot and sends; default 1 MiB
     * (a sender holds one chunk of each transfer at a time). */
    size_t snap_chunk_bytes;
    /* Snapshot transfers this node sends at once; one more is refused (raft retries it later);
     * default RT_SNAP_SENDS_MAX (8). */
    size_t snap_sends_max;
    /* A snapshot being received that has had no chunk for this long is discarded on a loop tick
     * (snapshot.c rt_snap_recv_expire); default RT_SNAP_RECV_IDLE_MS (90 s, 3 x the sender's chunk
     * RPC timeout). */
    uint64_t snap_recv_idle_ms;
    /* The largest data-group snapshot this node receives (spooled to <data dir>/snap-recv);
     * a larger one is refused at its first chunk; default RT_SNAP_RECV_MAX_BYTES (64 GiB). */
    uint64_t snap_recv_max_bytes;
    /* Row bytes per LevelDB batch when a received snapshot is installed; default 4 MiB. */
    size_t snap_install_batch_bytes;
    /* Proposals of one group appended on its leader and not yet committed (its pending list)
     * beyond which a new one is refused with QUEUE_FULL (loop.c), so one hot group cannot hold
     * every call the node takes while the others wait; default 1024. */
    size_t group_proposals_max;
    /* Bytes of recent key changes each hosted group keeps for Watch (watch.c); 0 = Watch off
     * (nothing recorded, polls answer UNIMPLEMENTED); default 4 MiB. */
    size_t watch_history_bytes;
    uint64_t seed;       /* raft election randomness; default from the node id */
    /* Controller (ctl.c). nodes[] above are the initial controller voters; a node started with
     * `join` set bootstraps nothing and registers itself through that address instead. */
    const char *state_path;         /* cluster-state.json (required) */
    const char *cluster_id;         /* bootstrap; default "slotd" */
    unsigned bootstrap_expect;      /* active data nodes before placement; 0 = the initial voters */
    const char *join;               /* host:port of any member; NULL/"" = bootstrap with nodes[] */
    unsigned weight;                /* this node's capacity weight; default 100 */
    const char *zone;               /* this node's --zone (ctl_zone_valid); NULL/"" = none */
    unsigned task_phase_timeout_ms; /* a task phase without progress fails; default 60000 */
    /* repair.c, on the controller leader: a node down with its last health report this old has
     * its replicas replaced by replica moves, at most repair_max_moves active at once; default
     * 600000 (0: never) and 2 */
    uint64_t down_replace_after_ms;
    unsigned repair_max_moves;
    /* balance.c, on the controller leader, unless the cluster state's features.balance_paused:
     * replica moves toward each node's weighted share (ctl_balance_plan), at most
     * balance_max_moves active at once; default true and 2 */
    bool balance;
    unsigned balance_max_moves;
    bool enable_hash_slot_migration; /* seeds the cluster state's features.hash_slot_migration
                                      * when this node bootstraps the cluster; default false */
    /* Where the runtime's series live (service/metrics/README.md); NULL (default): none.
     * Borrowed; must outlive the runtime. */
    struct metrics_registry *metrics;
    /* Called on the loop thread with every cluster state the runtime publishes (controller
     * applies, mirrored copies, health updates included; state borrowed for the call), e.g. to
     * refresh users and roles (service/node/authz.c). NULL: none. Must not block. */
    void (*on_ctl_state)(void *ctx, const struct ctl_state *state);
    void *on_ctl_state_ctx;
};

void runtime_options_default(struct runtime_options *o);

struct runtime;
struct transport;

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
/* GRPC thread, for a validated ReadRequest `req` with a Get query (borrowed for the call) of
 * hash_slot in group, after authorization and routing chose this node: serves it here from the
 * fsm's LevelDB (read_local.c) and finishes `call` (returns 1), when the group is hosted, owns
 * the slot, has applied min_applied_index and no install, close or ownership change overlapped
 * the read; a linearizable one (CONSISTENCY_LINEARIZABLE or LEADER_LOCAL) only while this replica
 * leads under a valid leader lease and has applied the commit index the lease was published with.
 * Returns 0 with `call` untouched otherwise: the caller submits it with runtime_submit_read. */
int runtime_read_local(struct runtime *rt, uint32_t group, uint16_t hash_slot, const void *req,
                       size_t len, uint64_t min_applied_index, bool linearizable,
                       struct rpc_call *call);
/* Reads runtime_read_local served; *retried (may be NULL): those it handed back after a
 * writer overlapped them. Any thread. */
uint64_t runtime_read_local_served(const struct runtime *rt, uint64_t *retried);
/* `req` is the packed, validated ReadRequest (borrowed for the call, copied); the apply stage
 * serves it with slot_serve_read(). */
int runtime_submit_read(struct runtime *rt, uint32_t group, uint16_t hash_slot, const void *req,
                        size_t len, int consistency, uint64_t min_applied_index,
                        struct rpc_call *call, struct slotd_error *err);

/* ---- Peer traffic (service/node's Peer handlers and the transport). ---- */

/* A RaftBatch from a peer (bytes borrowed for the call, copied). caller: the node the call was
 * authenticated as (0: peers are not authenticated); a batch whose from_node differs is dropped,
 * and so is every message whose from is not the batch's from_node. Errors: queue full / shutting
 * down (err filled). */
int runtime_submit_raft_batch(struct runtime *rt, const uint8_t *batch, size_t len, uint64_t caller,
                              struct slotd_error *err);
/* A peer could not be reached: its groups' progress goes back to probing. Any thread. */
void runtime_peer_unreachable(struct runtime *rt, uint64_t peer);
/* One snapshot chunk from a peer (SnapshotChunk bytes borrowed for the call). The call is
 * answered once the chunk is staged (or rejected). */
int runtime_submit_snapshot_chunk(struct runtime *rt, const uint8_t *chunk, size_t len,
                                  struct rpc_call *call, struct slotd_error *err);
/* Fills a GroupStatusResponse for the groups hosted here (caller frees *buf with free()). */
int runtime_group_status(struct runtime *rt, uint8_t **buf, size_t *len);

/* ---- Watch history (watch.c) ---- */

/* One long poll of a hosted group's watch history: the key changes of entries after `after`
 * (from_now: none, only the current position) that match key (exactly) or prefix (both empty:
 * every key), whole entries, at most max_bytes of keys and values but at least one entry. With
 * nothing matching it waits up to wait_ms (0: answers at once). key and prefix are borrowed
 * for the call. */
struct runtime_watch_query {
    uint32_t group;
    uint64_t after;
    bool from_now;
    /* typed_kind 0: key or prefix changes of the key-value space; else (slotd.v1.TypedWatchKind)
     * the typed rows slot_typed_watch_match() gives for the id in key (prefix empty) */
    uint32_t typed_kind;
    const uint8_t *key, *prefix;
    size_t key_len, prefix_len;
    bool keys_only;
    uint32_t wait_ms;
    uint32_t max_bytes;
};
/* The answer: err NULL and resp (events, through_index), or err (WRONG_GROUP: not hosted here
 * (any more); COMPACTED: `after` is older than the history; SHUTTING_DOWN; INTERNAL). Called
 * once, on the polling thread before runtime_watch_poll returns, or later on the watch
 * notifier's thread (changes arrived), the loop thread (deadline, reset) or the one that closes
 * the runtime; resp and err are borrowed for the call. Must not block. */
typedef void (*runtime_watch_cb)(void *arg, const struct slotd_error *err,
                                 const Slotd__Internal__V1__WatchPollResponse *resp);
/* 0: cb is or will be called. -1: err filled and cb never called (not hosted, COMPACTED, too
 * many waiting polls: QUEUE_FULL, bad group, Watch disabled: UNIMPLEMENTED). Any thread. */
int runtime_watch_poll(struct runtime *rt, const struct runtime_watch_query *q,
                       runtime_watch_cb cb, void *arg, struct slotd_error *err);
/* ---- Controller (ctl.c): any thread. ---- */

/* A voter's ClusterStateResponse bytes for a mirror (borrowed for the call, copied). */
int runtime_submit_ctl_state(struct runtime *rt, const uint8_t *resp, size_t len);
/* Packs the ClusterStateResponse this node can give (not_modified when known_revision and
 * known_checksum, borrowed, match). *buf: caller frees with free(). Returns 1 when this node
 * holds no state yet, -1 out of memory. */
int runtime_ctl_state(struct runtime *rt, const char *known_checksum, uint64_t known_revision,
                      uint8_t **buf, size_t *len);
/* Copies task id of the published cluster state into *out (and its revision). Returns 0, or 1
 * when the state has no such task (or there is no state yet). */
struct ctl_task;
int runtime_ctl_task(struct runtime *rt, uint64_t id, struct ctl_task *out, uint64_t *revision);
/* Copies up to max tasks of the published cluster state (all of them, or only pending and
 * running ones when active_only) into out, oldest first, and the state's revision. Returns the
 * number copied (0 without a state). */
size_t runtime_ctl_tasks(struct runtime *rt, bool active_only, struct ctl_task *out, size_t max,
                         uint64_t *revision);
/* True when this node is a controller voter (hosts group 0). */
bool runtime_ctl_voter(const struct runtime *rt);
/* True once this node learned, from the first cluster state it mirrored after it started, that
 * it is removed (a tombstone: drained or Admin.RemoveNode while it was away); the runtime then
 * raised SIGTERM so that main shuts down and exits with an error. */
bool runtime_ctl_removed(const struct runtime *rt);
/* The controller voters of the published state (at most max, into out). */
size_t runtime_ctl_voters(struct runtime *rt, uint64_t *out, size_t max);
/* The controller leader this voter observes (0 = unknown or not a voter). */
uint64_t runtime_ctl_leader(struct runtime *rt);
/* This node's own view of the controller (Admin.ControllerStatus), without a quorum. */
struct runtime_ctl_status {
    const char *role; /* a raft role name (voters, learners), "mirror", or "none" */
    uint64_t term, commit_index, leader; /* group 0's raft core (voters) */
    uint64_t snapshot_index;             /* the controller log starts after it (voters) */
    uint64_t revision, applied_index;    /* the published cluster state (0 = none yet) */
    uint64_t file_revision;              /* of the last cluster-state.json export (0 = none) */
    int64_t file_age_ms;                 /* since that export (-1 = none this run) */
    int64_t mirror_age_ms; /* mirrors: since a voter last answered a poll (-1 = never) */
    /* slot groups whose desired peers that are not down are fewer than a quorum, in the
     * published state (ctl_group_has_quorum): reported, never repaired by force */
    uint32_t n_groups_without_quorum;
    uint32_t groups_without_quorum[64];
};
void runtime_ctl_status(struct runtime *rt, struct runtime_ctl_status *out);
/* The balancer's plan from the published cluster state with this node's --balance-max-moves
 * (ctl_balance_plan; out borrowed, zeroed without a state), whether this node runs the balancer
 * (--balance) and whether the state pauses it (features.balance_paused). */
struct ctl_balance_plan;
void runtime_ctl_balance(struct runtime *rt, struct ctl_balance_plan *out, bool *enabled,
                         bool *paused, unsigned *max_moves);
/* Read-your-admin-writes gate. Returns 1 when the published cluster state (and the route built
 * from it) is at min_revision or later: fn is not called, the caller answers now. Returns 0 when
 * fn(arg, reached, revision) will be called once, on the loop thread: reached when the state gets
 * there, not reached after RUNTIME_CTL_WAIT_MS or at shutdown (revision = the one reached).
 * Returns -1 with err (SLOTD_EQUEUE_FULL) when RUNTIME_CTL_WAITERS_MAX calls already wait, or
 * SLOTD_ESHUTTING_DOWN. */
#define RUNTIME_CTL_WAIT_MS 3000
#define RUNTIME_CTL_WAITERS_MAX 256
typedef void (*runtime_revision_cb)(void *arg, bool reached, uint64_t revision);
int runtime_ctl_wait(struct runtime *rt, uint64_t min_revision, runtime_revision_cb fn, void *arg,
                     struct slotd_error *err);

/* True when this node hosts a replica of the group (group 0: the controller). */
bool runtime_hosts_group(const struct runtime *rt, uint32_t group);
uint64_t runtime_node_id(const struct runtime *rt);

#endif /* SLOTD_RUNTIME_H */
