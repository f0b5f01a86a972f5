/* internal.h - struct runtime, struct rt_group and the types and bounds every stage shares. */
#ifndef SLOTD_RUNTIME_INTERNAL_H
#define SLOTD_RUNTIME_INTERNAL_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <uv.h>

#include "raft/raft.h"
#include "service/metrics/metrics.h"
#include "service/runtime/runtime.h"
#include "service/runtime/request.h"
#include "service/runtime/stage.h"
#include "service/log/log.h"
#include "service/slot/slot.h"
#include "service/transport/transport.h"
#include "store/keys.h"
#include "slotd/internal/v1/peer.pb-c.h"

/* One log line per event (service/log). */
#define RT_LOG(level, fmt, ...) slog(level, "runtime", fmt, ##__VA_ARGS__)

/* rt->groups is indexed by group id: slot 0 is the controller group, 1..n_groups the slot
 * groups; room for every group a cluster state can place. */
#define RT_GROUPS_CAP 257 /* = ENGINE_GROUPS_CAP (engine.c checks) */
/* A replica that becomes leader waits this long before moving leadership to the group's
 * preferred leader (ctl.c converge_group): longer than a voter that handed its groups off at
 * shutdown takes to stop (main.c waits for the hand-off, then stops at once). */
#define RT_LEADER_SETTLE_MS 3000
#define RT_GROUP_SLOTS(rt) ((size_t)(rt)->n_groups + 1)

/* Snapshot sizes: chunks on the wire (default; opts.snap_chunk_bytes), the largest snapshot a
 * receiver stages in memory, and the transfers a node sends at once by default
 * (opts.snap_sends_max; one more is refused). */
#define RT_SNAP_CHUNK_BYTES ((size_t)1 << 20)
#define RT_SNAP_BYTES_MAX ((size_t)512 << 20) /* group 0 (in memory) only */
/* A data group's received snapshot is spooled to disk (snapshot.c rt_snap_recv_chunk) up to this
 * size by default (opts.snap_recv_max_bytes, --snapshot-recv-max-bytes); one larger is refused. */
#define RT_SNAP_RECV_MAX_BYTES ((uint64_t)64 << 30)
/* Free space a data group's snapshot receive leaves in the data dir's file system. */
#define RT_SNAP_RECV_FREE_MIN ((uint64_t)64 << 20)
/* Row bytes per LevelDB batch when a spooled snapshot is installed (opts.snap_install_batch_bytes).
 */
#define RT_SNAP_INSTALL_BATCH_BYTES ((size_t)4 << 20)
#define RT_SNAP_SENDS_MAX 8
/* A staged receive idle this long is discarded by default (opts.snap_recv_idle_ms): three times
 * the sender's chunk RPC timeout (snapshot.c SNAP_CHUNK_TIMEOUT_MS), so a live sender has given
 * up. */
#define RT_SNAP_RECV_IDLE_MS 90000
/* An apply job (one fsm batch) takes at most this many committed entries or arena bytes (but
 * always at least one entry): a follower catching up, or a group committing a long run at once,
 * is applied in several jobs back to back instead of one unbounded batch (loop.c). */
#define RT_APPLY_JOB_ENTRIES_MAX 4096
#define RT_APPLY_JOB_BYTES_MAX ((size_t)8 << 20)
/* Storage linger (loop.c, rt_pump): after a synced raftlog batch of at least
 * RT_STORAGE_LINGER_BUSY entries, the next storage job waits until RT_STORAGE_LINGER_US after
 * that one's return or until RT_STORAGE_LINGER_ENTRIES entries were proposed or received. */
#define RT_STORAGE_LINGER_US 1000
#define RT_STORAGE_LINGER_ENTRIES 48
#define RT_STORAGE_LINGER_BUSY 16
/* Requests are answered this long before their deadline at the latest. */
#define RT_DEADLINE_MARGIN_MS 150
/* Bounds of the queue of peer traffic (raft batches, snapshot chunks, status). */
#define RT_PEER_QUEUE_LEN_MAX 8192
#define RT_PEER_QUEUE_BYTES_MAX ((size_t)256 << 20)
/* How long a deposed leader waits for its pending proposals to resolve. */
#define RT_DEPOSED_WAIT_MS 5000
/* Fresh cluster: ticks before a group's preferred voter campaigns (< election_tick). */
#define RT_FIRST_CAMPAIGN_TICKS 4
/* Raft ticks whose time a group remembers: a lease older than this many ticks is not used. */
#define RT_LEASE_TICKS 32

/* LINEARIZABLE reads of one group waiting for one ReadIndex round. */
struct rt_read_round {
    struct rt_read_round *next;
    uint64_t ctx;
    struct rt_list reads;
};

/* A snapshot being sent to one peer (loop thread). A data group's rows are read chunk by chunk
 * from a LevelDB snapshot of the fsm the apply stage took at its applied index (sn); head holds
 * the group's meta rows captured with it. The controller's state is captured whole (head). */
struct rt_snap_send {
    struct rt_snap_send *next;
    struct rt_snap_send *capture_next; /* captures riding on one apply job */
    struct rt_group *g;
    uint64_t to;
    uint64_t term; /* leader term of the SNAPSHOT message */
    uint64_t transfer_id;
    bool captured; /* set by the apply stage */
    bool started;
    bool dead;
    bool head_sent; /* head is in a chunk already sent or in flight */
    bool cursor_on; /* cursor reads hash slots [range_first, range_last] */
    bool last_sent; /* the chunk in flight is the last one */
    uint8_t *head;  /* meta rows (data group) or the controller state */
    size_t head_len;
    struct store_fsm_snap *sn; /* data groups: the fsm at meta.index; NULL for the controller */
    uint8_t slots[32];         /* hash slots whose rows the snapshot carries */
    unsigned range_next;       /* first hash slot not read yet */
    unsigned range_first, range_last;
    struct store_fsm_snap_cursor cursor;
    size_t offset;                     /* bytes acknowledged */
    size_t chunk_len;                  /* bytes of the chunk in flight */
    size_t chunks;                     /* chunks acknowledged */
    size_t peak_chunk;                 /* largest chunk built (bytes held in memory at once) */
    unsigned in_flight, in_flight_max; /* chunk RPCs outstanding (one, as chunk_sent sends) */
    struct raft_snapshot_meta meta;
};

/* A snapshot being received from a peer (loop thread): group 0's in memory (data), a data
 * group's in its spool file (path, fd; snap_spool.h). All zero: none. */
struct rt_snap_recv {
    bool active;
    uint64_t transfer_id;
    uint64_t from;
    uint8_t *data;
    size_t len, cap;
    char *path; /* the .part file, deleted with the receive */
    int fd;     /* open for writing when has_fd */
    bool has_fd;
    uint32_t crc;    /* zlib crc32 of the bytes spooled so far */
    size_t total;    /* announced by the first chunk; 0: known at the last one */
    int64_t last_ms; /* rt_now_ms() of the last chunk taken */
};

/* A snapshot the storage stage installs before its raftlog batch. */
struct rt_snap_install {
    struct rt_snap_install *next;
    struct rt_group *g;
    struct raft_snapshot_meta meta;
    uint8_t *data;
    size_t len;
};

/* Series of one hosted group, written on the loop thread (NULL without a registry). */
struct rt_group_metrics {
    struct metrics_gauge *term;
    struct metrics_gauge *commit;
    struct metrics_gauge *applied;
    struct metrics_gauge *is_leader;
    struct metrics_gauge *has_leader;
    struct metrics_counter *leader_changes;
};

/* The runtime's node-wide series (NULL without a registry: updates are no-ops). */
struct rt_metrics {
    struct metrics_gauge *queue_client; /* written under runtime.mu */
    struct metrics_gauge *queue_peer;
    struct metrics_histogram *batch_entries;  /* entries per synced raftlog batch */
    struct metrics_histogram *write_synced_s; /* raftlog batch write + fsync */
    struct metrics_histogram *write_unsynced_s;
    struct metrics_histogram *apply_entries; /* entries per apply job */
    struct metrics_counter *snap_sent_bytes;
    struct metrics_counter *snap_received_bytes;
    struct metrics_counter *snap_recv_abandoned; /* receives rt_snap_recv_expire dropped */
    struct metrics_counter *dropped_outbound;
    struct metrics_counter *dropped_inbound;
    struct metrics_counter *read_local_served; /* GRPC (read_local.c) */
    struct metrics_counter *read_local_overlapped;
    struct metrics_counter *read_lease_served; /* GRPC (read_local.c) */
    struct metrics_counter *read_lease_missed;
    struct metrics_counter *lease_expiries; /* loop (keylease.c) */
    struct metrics_gauge *route_revision;
    struct metrics_gauge *controller_revision;
    struct metrics_gauge *controller_tasks[4];   /* by enum ctl_task_status */
    struct metrics_counter *repair_moves;        /* loop (repair.c): moves proposed */
    struct metrics_gauge *groups_without_quorum; /* loop (repair.c), controller leader */
    /* loop (ctl.c), from the published state's backup plan: interval (0 = no plan), last
     * successful run's Unix time in seconds and bytes (0 = none) */
    struct metrics_gauge *backup_plan_interval, *backup_plan_success_s, *backup_plan_bytes;
    struct metrics_counter *balance_moves[3]; /* loop (balance.c): planned, done, failed */
    /* per-group families: series are added as groups open */
    struct metrics_family *fam_term, *fam_commit, *fam_applied, *fam_leader, *fam_changes;
    struct metrics_family *fam_has_leader;
    struct metrics_family *fam_decisions; /* preferred-leader convergence, by reason */
};

/* Threads (runtime.h): the LOOP thread (loop_main, libuv), gRPC handler threads and the transport
 * thread (GRPC), the STORAGE stage and the APPLY stage (a thread each, stage.c: the loop submits
 * a job under the stage's lock and takes it back done under the same lock, so everything the loop
 * wrote before rt_stage_submit happens before the work, and the work before its done callback on
 * the loop; the apply stage may run later jobs while the loop runs an earlier one's done).
 * Each field names the thread that writes it;
 * a field any other thread reads while it may change is _Atomic or guarded by a named lock. */
struct rt_group {
    /* -- read by other threads while the loop changes them: atomics, written on the loop -- */
    uint32_t id; /* fixed by rt_groups_open before any thread starts */
    /* loop (main before the loop starts): this node holds a replica; the loop-owned rest is
     * NULL/0 otherwise. Read by GRPC (runtime_hosts_group, GroupStatus) and by the APPLY and
     * STORAGE stages (other groups' claims on hash slots). */
    _Atomic bool hosted;
    /* loop: the observed leader (this replica's, or a peer's report); read by GRPC
     * (runtime_ctl_leader). */
    _Atomic raft_id leader;
    _Atomic uint64_t commit; /* loop: last commit index seen in a ready; read by GRPC */
    /* apply stage (after its fsm commit, before it answers; apply_done stores it again), open,
     * install, removal: highest index the apply stage finished; read by GRPC (GroupStatus,
     * read_local.c). invariant: applied <= applied_submitted */
    _Atomic uint64_t applied;
    /* apply stage and install (rt_facts_publish_slots): fsm_state's owned and fenced bitmaps and
     * migration_task, word by word; read by GRPC (GroupStatus). Each word only moves forward
     * within a migration, so a reader mixing words of two states sees no state a slot never had */
    _Atomic uint64_t pub_owned[4], pub_fenced[4];
    _Atomic uint64_t pub_migration_task;
    /* The seqlock of read_local.c (runtime_read_local, read by GRPC): odd while a writer may
     * change what this group's keys read as other than by ordinary applies. Written by the
     * apply stage (a job changing the group's owned hash slots: odd before rt_facts_publish_slots,
     * even after the fsm commit), the storage stage (rt_snap_install_rows: odd before its batch,
     * even after the publish) and the loop (rt_group_close_removed: odd after hosted is cleared,
     * even after the rows are deleted). Those three never run at once (installs_blocked and
     * rt_group_close_removed's assert). Never reset: it only grows. */
    _Atomic uint64_t read_seq;
    /* loop: g->term after each ready and leader change; read by GRPC (runtime_read_local's
     * response term) */
    _Atomic uint64_t pub_term;
    /* loop (rt_lease_publish at each tick, rt_lease_clear): this replica's leader lease
     * (raft_read_lease) as the rt_now_ms() time it ends (0 = none) and the commit index it was
     * computed with; read by GRPC (runtime_read_local for linearizable reads). lease_index is
     * stored before lease_until_ms (release) and read after it (acquire). */
    _Atomic int64_t lease_until_ms;
    _Atomic uint64_t lease_index;

    /* -- loop thread -- (rt_group_close_removed zeroes from here on, keeping metrics) */
    struct raft *raft;
    struct raft_mem_storage *mem;
    raft_term term;
    int64_t leader_seen_ms; /* not hosted: when a peer last confirmed leader (rt_now_ms) */
    /* what other replicas said about themselves in GroupStatus answers (sorted by node), and
     * the configuration the leader (else the newest term) reported, for groups hosted elsewhere */
    uint32_t n_obs;
    struct route_replica obs[ROUTE_MEMBERS_MAX];
    uint32_t n_obs_voters, n_obs_learners;
    uint64_t obs_voters[ROUTE_MEMBERS_MAX], obs_learners[ROUTE_MEMBERS_MAX];
    uint64_t obs_conf_term;
    int64_t obs_conf_ms;
    uint64_t obs_conf_by; /* the leader whose own answer gave them, 0 = a follower's */
    /* the leader's commit index in its last two first-hand GroupStatus answers ([0] newest),
     * paired with other replicas' answers by time in the controller leader's catch-up facts */
    uint64_t obs_lc_commit[2];
    int64_t obs_lc_ms[2];
    /* the leader's hash-slot state in its last first-hand answer (obs_slots_ms 0 = none) */
    uint8_t obs_owned[32], obs_fenced[32];
    uint64_t obs_migration_task, obs_slots_leader;
    int64_t obs_slots_ms;
    uint8_t role;
    bool in_batch;         /* rd is in the in-flight storage batch */
    bool committed_handed; /* rd's committed entries already went to the apply stage */
    struct raft_ready rd;  /* the last ready taken */
    uint64_t stored_last;  /* last raft index in the raftlog db */
    uint64_t first_index;  /* first raft index in the raftlog db */
    uint64_t compact_to;   /* compaction queued in the in-flight batch (0 none) */
    struct raft_conf_state compact_conf;
    struct rt_list proposals;     /* appended, waiting for commit, by index */
    struct rt_read_round *rounds; /* ReadIndex rounds in flight */
    struct rt_list waiting_reads; /* confirmed or LOCAL reads waiting for apply */
    uint64_t applied_submitted;   /* highest index handed to the apply stage */
    uint64_t durable_applied;     /* applied index known on disk (a synced fsm write covered it) */
    unsigned apply_jobs;          /* apply jobs in flight or queued with entries of this group */
    struct rt_snap_recv snap_recv;
    bool transferring;          /* leadership transfer started at shutdown */
    unsigned campaign_in_ticks; /* fresh cluster: the preferred voter campaigns then (0 = no) */
    uint64_t raft_ticks;        /* raft_tick calls since raft_new (the core's own tick count) */
    int64_t tick_ms[RT_LEASE_TICKS]; /* rt_now_ms() of raft tick k, at k % RT_LEASE_TICKS */
    int64_t converge_after_ms;       /* preferred-leader convergence cooldown (ctl.c) */
    struct rt_group_metrics metrics; /* set when the group opens; the series are atomics */

    /* -- the fsm side: the APPLY stage, and the STORAGE stage's snapshot install
     * (rt_snap_install_rows, rt_ctl_install), which starts only when no apply job runs or waits
     * (installs_blocked in loop.c) and no job starts before it ends (storage_done). The loop
     * writes them while the group is not hosted: at open (before hosted is set; the stages skip
     * groups not hosted) and at close (rt_group_close_removed, with no apply job and no install
     * in progress). The apply stage (rt_slot_claimed_elsewhere, serve_read) and the install
     * (snap_yields) also read other hosted groups' fsm_state, under the same rule. */
    struct slot_group_state fsm_state;
    uint64_t apply_index; /* state as of the last applied entry, for snapshots */
    uint64_t apply_term;
    struct raft_conf_state apply_conf;
};
/* rt_group_close_removed zeroes from raft on and resets the atomics one by one. */
_Static_assert(offsetof(struct rt_group, raft) > offsetof(struct rt_group, applied),
               "the cross-thread fields of struct rt_group come before raft");

struct rt_wire_scratch {
    Slotd__Internal__V1__RaftEntry *entries;
    Slotd__Internal__V1__RaftEntry **entry_ptrs;
    Slotd__Internal__V1__SnapshotMeta snap;
    Slotd__Internal__V1__ConfState conf;
    uint64_t voters[RAFT_MEMBERS_MAX];
    uint64_t learners[RAFT_MEMBERS_MAX];
};

/* One committed entry handed to the apply stage (data in the job's arena). */
struct rt_apply_entry {
    uint64_t index;
    uint64_t term;
    bool conf; /* conf change: conf_state holds the new membership */
    struct raft_conf_state conf_state;
    const uint8_t *data;
    size_t len;
    struct rt_request *waiter; /* proposal waiting for this entry, or NULL */
};

struct rt_apply_group {
    struct rt_group *g;
    size_t n_entries;
    struct rt_apply_entry *entries;
};

/* Work for the apply stage: entries of many groups plus reads to serve. */
struct rt_apply_job {
    struct rt_stage_item item; /* in rt->apply's queues */
    struct runtime *rt;
    size_t n_groups;
    size_t cap_groups;
    struct rt_apply_group *groups;
    size_t n_entries; /* over all groups (RT_APPLY_JOB_ENTRIES_MAX) */
    struct rt_list reads;
    struct rt_snap_send *capture; /* snapshot to capture after the entries */
    struct ctl_state *ctl_pub;    /* controller state after this job, published by the loop */
    bool sync_fsm;                /* write the fsm batch synced (log compaction needs it) */
    /* Set by the apply stage for apply_done: the controller group's applied index after this
     * job (its state save is synced every job) and, for a synced job, every group's (indexed by
     * group id, RT_GROUPS_CAP): what the synced batch made durable. The later jobs may already
     * run when the loop reads them, so the loop never takes them from g->applied. */
    uint64_t applied0;
    uint64_t *durable;
    uint8_t *arena;
    size_t arena_len;
    size_t arena_cap;
    int rc; /* store error, fatal */
};

/* keylease.c: the leases of a group this replica leads, as its leader times them (loop). */
struct rt_keylease_entry {
    uint64_t id;
    uint64_t refreshed;  /* the lease row's refreshed_index when last seen */
    int64_t deadline_ms; /* rt_now_ms() at which it expires */
    int64_t proposed_ms; /* its LeaseExpire was proposed then, 0 = not yet */
};
struct rt_keylease {
    struct rt_keylease_entry *v; /* sorted by id */
    size_t n;
    uint64_t term; /* the leadership term the deadlines belong to; 0 = not leading */
    int64_t next_scan_ms;
    int64_t idle_until_ms; /* no lease known: the next pass then even without a lease write */
    uint64_t seen_commits; /* slot_fsm_lease_commits() before the last pass */
    uint16_t cursor_hs;    /* where the next scan pass starts */
    uint64_t cursor_id;
};

/* The calls a stage makes back up the pipeline, into a file that includes its header: pointers
 * runtime_new (lifecycle.c) sets before any thread starts and nothing changes, so the includes run
 * one way. apply.c's job completion pumps the loop (loop.c); snapshot.c's snapshots and peer.c's
 * mirror of group 0 go to the controller's state machine (ctl.c). */
struct rt_hooks {
    void (*pump)(struct runtime *rt);              /* rt_pump, loop */
    void (*stages_close_idle)(struct runtime *rt); /* rt_stages_close_idle, loop */
    int (*ctl_capture)(struct runtime *rt, uint8_t **data, size_t *len); /* rt_ctl_capture, APPLY */
    int (*ctl_install)(struct runtime *rt, struct rt_group *g, const uint8_t *data, size_t len,
                       const struct raft_snapshot_meta *meta); /* rt_ctl_install, STORAGE */
    void (*ctl_mirror_reply)(struct runtime *rt, const uint8_t *data, size_t len); /* loop */
};

struct runtime {
    /* -- fixed in runtime_new (main thread, before any other thread starts): read anywhere -- */
    struct runtime_options opts;
    char data_dir[1024]; /* the directory of opts.state_path (fault builds note fsm syncs there) */
    struct store *store; /* thread-safe (LevelDB) */
    struct route_table *routes; /* thread-safe: published by the loop, acquired by GRPC */
    struct rpc_server *server;
    struct transport *transport;          /* NULL on a single node; thread-safe */
    uint64_t node_ids[RUNTIME_NODES_MAX]; /* sorted */
    size_t n_nodes;
    struct rt_group *groups; /* RT_GROUPS_CAP entries, index = group id (fields: struct rt_group) */
    struct rt_watch_ring *watch; /* RT_GROUPS_CAP watch histories (watch.c; each has its lock);
                                    NULL when opts.watch_history_bytes is 0 */
    struct rt_watch_notifier *watch_notifier; /* watch.c: answers waiting polls (own thread) */
    struct slot_fsm *fsm;      /* APPLY stage; the loop only loads group state through it
                                  (slot_fsm_load_group reads the store, not the fsm's batch) and
                                  reads slot_fsm_lease_commits (an atomic) */
    _Atomic size_t n_groups;   /* loop (once, 0 -> N, ctl.c): slot groups placed by the cluster
                                  state; read by GRPC and the APPLY/STORAGE stages */
    _Atomic size_t led_groups; /* loop: groups this node leads; read by main at shutdown */
    /* GRPC (runtime_read_local): serializable reads answered on the gRPC thread, and those that
     * saw a writer (read_seq moved) and went through the loop instead */
    _Atomic uint64_t read_local_served, read_local_retried;

    /* -- inbound queue, GRPC and transport threads -> loop: guarded by mu -- */
    pthread_mutex_t mu;
    struct rt_list inbound;
    size_t client_len, client_bytes; /* bounded by opts.queue_*_max */
    size_t peer_len, peer_bytes;     /* bounded by RT_PEER_QUEUE_*_MAX */
    bool stopping;

    /* -- main thread (runtime_start / runtime_stop) -- */
    pthread_t thread;
    bool started;
    bool stages_ready;         /* runtime_new set up rt->storage and rt->apply */
    _Atomic bool loop_running; /* loop: set when loop_main starts (RT_ASSERT_LOOP) */
    pthread_t loop_thread;     /* loop: itself, written before loop_running */
    /* main (runtime_set_executor, before the loop starts): the executor's hooks (engine.h),
     * borrowed; NULL = none */
    const struct runtime_executor_ops *exec_ops;
    void *exec_ctx;

    /* -- loop thread (libuv handles: uv_async_send on wake and stop_async from any thread) -- */
    uv_loop_t loop;
    uv_async_t wake;
    uv_async_t stop_async;
    uv_timer_t ticker;
    uv_timer_t poller;                 /* GroupStatus polling of peers */
    struct route_snapshot *route_base; /* table + members; leaders filled at publish */
    uint64_t next_read_ctx;
    bool storage_busy;
    bool loop_stopping;                /* on_stop ran: the stages close their handles once idle */
    struct rt_stage storage;           /* the STORAGE stage: raftlog batches, one at a time */
    struct rt_stage_item storage_item; /* the one item it runs (rt itself) */
    struct store_log_batch *log_batch; /* the STORAGE stage writes it out while storage_busy */
    int storage_rc;                    /* STORAGE stage -> loop (storage_done) */
    struct rt_stage apply;             /* the APPLY stage: rt_apply_jobs, back to back */
    struct rt_apply_job *building;     /* job collecting entries this turn */
    bool health_serving;
    struct rt_snap_send *snap_sends;  /* in progress */
    struct rt_snap_install *installs; /* in the batch being written (STORAGE reads them) */
    bool batch_waiting;               /* batch built, waiting for apply jobs of installed groups */
    /* storage linger (loop.c): a timerfd polled by the loop, µs resolution */
    uv_poll_t linger_poll;
    int linger_fd;             /* -1: not made yet, -2: none (failed or closed) */
    bool linger_armed;         /* the timerfd is set */
    uint64_t linger_entries;   /* entries proposed or received since the last ready was taken */
    uint64_t storage_done_ns;  /* uv_hrtime() when the last storage job came back */
    size_t last_batch_entries; /* entries of the last synced raftlog batch */
    uint64_t next_transfer_id;

    /* -- controller (ctl.c) -- */
    _Atomic bool ctl_voter;          /* loop (main before the loop starts): hosts group 0; read
                                        by GRPC (runtime_ctl_voter, runtime_ctl_leader) */
    struct ctl_state *ctl_apply;     /* APPLY stage (voters): the state machine; the STORAGE
                                        stage overwrites it in rt_ctl_install (no apply job then) */
    struct ctl_state *ctl_installed; /* STORAGE stage -> loop (storage_done): installed snapshot */
    struct ctl_state *ctl;           /* loop: the published state, NULL = none yet */
    struct ctl_state *ctl_pending;   /* main (rt_ctl_open) -> loop: published when it starts */
    size_t ctl_poll_next;            /* loop: mirrors, round robin over voters */
    int64_t ctl_next_report_ms;      /* loop: liveness report due */
    /* loop: a mirrored state showed this node not removed since the process started; removed:
     * written by the loop (a mirrored state showed it removed first), read by main (exit code) */
    bool ctl_seen_live;
    _Atomic bool ctl_removed;
    int64_t ctl_next_status_ms;  /* loop: leader, next node-status reconciliation */
    int64_t ctl_members_next_ms; /* loop: ctl_members.c's next conf change or transfer */
    struct rt_keylease keyleases[RT_GROUPS_CAP]; /* loop (keylease.c), index = group id */
    _Atomic bool ctl_join_inflight; /* loop sets, the transport thread clears (on_join_reply) */
    /* guards the copies below: written by the loop, by the APPLY and STORAGE stages
     * (export_file) and by GRPC (waiters); read by GRPC */
    pthread_mutex_t ctl_mu;
    struct ctl_state *ctl_shared; /* a copy of the published state for TaskStatus */
    char *ctl_json;
    size_t ctl_json_len;
    uint64_t ctl_revision, ctl_applied;
    char ctl_checksum[9];
    size_t ctl_n_voters;
    uint64_t ctl_voters[RUNTIME_NODES_MAX];
    struct runtime_ctl_status ctl_view; /* Admin.ControllerStatus; ages held as stamps here */
    uint64_t ctl_gate_revision;         /* state and route published up to it (min_revision) */
    bool ctl_waiters_closed;            /* shutdown: no new waiters */
    size_t ctl_n_waiters;
    struct rt_ctl_waiter {
        uint64_t min_revision;
        int64_t deadline_ms;
        runtime_revision_cb fn;
        void *arg;
    } ctl_waiters[RUNTIME_CTL_WAITERS_MAX];
    /* -- series: set up by main (rt_metrics_init) and the loop (per group); updates are atomic
     * from any thread -- */
    struct rt_metrics metrics;
    /* -- fixed in runtime_new before any other thread starts: read anywhere -- */
    struct rt_hooks hooks;
};

/* Builds with asserts on (all of ours): RT_ASSERT_LOOP, the caller is the loop thread or no loop
 * thread runs (runtime_new before it starts, runtime_free after it ended); RT_ASSERT_NOT_LOOP,
 * the caller is a storage or apply stage job on its stage's thread while the loop runs. */
#define RT_ASSERT_LOOP(rt)                                                                         \
    assert(!atomic_load_explicit(&(rt)->loop_running, memory_order_acquire) ||                     \
           pthread_equal(pthread_self(), (rt)->loop_thread))
#define RT_ASSERT_NOT_LOOP(rt)                                                                     \
    assert(atomic_load_explicit(&(rt)->loop_running, memory_order_acquire) &&                      \
           !pthread_equal(pthread_self(), (rt)->loop_thread))

/* Loop: no apply job is queued or running (nor waiting for apply_done). */
static inline bool rt_apply_idle(const struct runtime *rt)
{
    return rt_stage_pending(&rt->apply) == 0;
}

/* This node votes in the controller and its group 0 replica leads (atomics: any thread). */
static inline bool rt_ctl_leading(const struct runtime *rt)
{
    return rt->ctl_voter && rt->groups[0].hosted && rt->groups[0].leader == rt->opts.node_id;
}

#endif /* SLOTD_RUNTIME_INTERNAL_H */
