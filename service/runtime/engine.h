/* engine.h - the multi-raft engine as the controller's executors (service/executor) see it. */
#ifndef SLOTD_RUNTIME_ENGINE_H
#define SLOTD_RUNTIME_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Everything here works on opaque types: an executor never reaches into struct runtime or
 * struct rt_group (service/runtime/internal.h). Threads are the runtime's (runtime.h): LOOP is
 * the libuv loop thread, which runs the executor's poll hook; ANY is any thread. The loop-only
 * calls assert it wherever asserts are on (RT_ASSERT_LOOP). Nothing here waits for another
 * thread; opening and closing a replica read and write the store on the calling thread. */

struct runtime;
struct rt_group; /* one slot group (id 1..) or the controller group (id 0) on this node */
struct runtime_options;
struct ctl_state;
struct raft;
struct store;
struct transport;
struct route_table;
struct metrics_counter;
struct metrics_gauge;

/* Group ids an executor may ask about: 0 (the controller) .. ENGINE_GROUPS_CAP - 1. */
#define ENGINE_GROUPS_CAP 257

/* ---- registration (main thread, before runtime_start) ---- */

/* The executor's hooks. Each may be NULL. */
struct runtime_executor_ops {
    /* LOOP, every poll (500 ms), after the controller's own steps (mirror poll, preferred-leader
     * convergence, liveness) and before group 0's member step; what it submitted is proposed in
     * the same turn. */
    void (*poll)(void *ctx);
    /* Main thread, in runtime_stop once the loop thread ended: joins the executor's own threads.
     * No hook runs after it. */
    void (*stop)(void *ctx);
};

/* Registers the executor (ops and ctx borrowed: they must outlive the runtime; one executor per
 * runtime, a second call replaces the first). Call before runtime_start. */
void runtime_set_executor(struct runtime *rt, const struct runtime_executor_ops *ops, void *ctx);

/* ---- what the runtime was built with (ANY; fixed in runtime_new, borrowed for its life) ---- */

const struct runtime_options *engine_options(const struct runtime *rt);
struct store *engine_store(const struct runtime *rt);         /* thread-safe */
struct transport *engine_transport(const struct runtime *rt); /* NULL on a single node */
struct route_table *engine_routes(const struct runtime *rt);  /* thread-safe */

/* The executors' series, registered by the runtime with its own (service/metrics/README.md);
 * NULL without a registry (updates are then no-ops). ANY; the series are atomics. */
struct engine_executor_series {
    struct metrics_counter *repair_moves;        /* slotd_repair_moves_total */
    struct metrics_gauge *groups_without_quorum; /* slotd_groups_without_quorum */
    struct metrics_counter *balance_moves[3];    /* slotd_balance_moves_total: planned, done,
                                                    failed */
};
void engine_executor_series(const struct runtime *rt, struct engine_executor_series *out);

/* Clocks (ANY): monotonic ms (timeouts, pacing) and CLOCK_REALTIME ms (controller timestamps). */
int64_t engine_now_ms(void);
uint64_t engine_wall_ms(void);

/* ---- the controller (LOOP) ---- */

/* The published cluster state, NULL before the first one. Borrowed: valid until the loop
 * publishes the next (never during a hook call). */
const struct ctl_state *engine_ctl_state(const struct runtime *rt);
/* This node hosts the controller group and its replica leads it. */
bool engine_ctl_leading(const struct runtime *rt);
/* Sends a controller command (ownership of cmd transfers; NULL is a no-op): proposed here when
 * this node leads the controller, else sent to the leader (voters) or a voter (mirrors). No
 * answer is awaited: the executor re-derives what to do from the next published state. `what`
 * names the command in logs (borrowed for the call). */
void engine_ctl_submit(struct runtime *rt, char *cmd, const char *what);
/* Opens the controller group here as a joining replica (a voter promotion's target): from then
 * on this node follows the controller log instead of mirroring it. 0, or -1 with err set. */
int engine_ctl_open_joining(struct runtime *rt, char *err, size_t errlen);

/* ---- hosted groups (LOOP) ---- */

/* Group id's slot (borrowed for the runtime's life), NULL when id >= ENGINE_GROUPS_CAP. */
struct rt_group *engine_group(struct runtime *rt, uint32_t id);
/* Group ids the cluster state placed: 0 .. engine_group_slots() - 1. */
size_t engine_group_slots(const struct runtime *rt);
uint32_t engine_group_id(const struct rt_group *g);
/* This node holds a replica of g. */
bool engine_group_hosted(const struct rt_group *g);
/* g's raft core while the replica is open, else NULL (borrowed: valid until the replica closes;
 * only raft_status and the raft_propose_* calls may be made on it). */
struct raft *engine_group_raft(const struct rt_group *g);
/* The replica here was leader at its last ready (the role the loop last took from the core). */
bool engine_group_leading(const struct rt_group *g);
/* The leader of group id as this node saw it last: its own replica's when it hosts one, else the
 * route the loop publishes (0 = unknown or id out of range). */
uint64_t engine_group_leader(const struct runtime *rt, uint32_t id);
/* A pipeline stage or a snapshot transfer may still read g's state or rows: g is in the storage
 * batch in flight or in an apply job, a snapshot of it is being received or sent, or any apply
 * job or snapshot install is pending (those read every hosted group's state). */
bool engine_group_in_use(const struct runtime *rt, const struct rt_group *g);
/* Opens a replica of slot group g added by a task (no bootstrap: the leader fills it). 0, or -1
 * with err set. */
int engine_group_open_joining(struct runtime *rt, struct rt_group *g, char *err, size_t errlen);
/* Closes the replica of g this node no longer holds and deletes its rows and raft log; only when
 * !engine_group_in_use(rt, g). */
void engine_group_close_removed(struct runtime *rt, struct rt_group *g);
/* Hands g's leadership to `to` (the replica's lease is withdrawn first); a raft error code. */
int engine_transfer_leader(struct rt_group *g, uint64_t to);

#endif /* SLOTD_RUNTIME_ENGINE_H */
