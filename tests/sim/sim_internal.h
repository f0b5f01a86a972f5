/* sim_internal.h - types and helpers shared by the simulator's files (cluster, disk, net, checks).
 */
#ifndef SLOTD_SIM_INTERNAL_H
#define SLOTD_SIM_INTERNAL_H

#include "raft/raft.h"
#include "sim.h"
#include "sim_rand.h"

/* Virtual time: every node ticks all its groups every SIM_TICK_MS (at its own phase). */
#define SIM_TICK_MS 10
#define SIM_ELECTION_TICK 10
#define SIM_HEARTBEAT_TICK 1
/* Liveness bound: 20 election timeouts of the slowest randomized timeout (2 * election tick). */
#define SIM_LIVENESS_MS (20u * 2u * SIM_ELECTION_TICK * SIM_TICK_MS)

/* Bounds on everything that grows. */
#define SIM_KV_KEYS 8
#define SIM_SM_RING 32   /* recent state-machine states kept for compaction with a tail */
#define SIM_CONF_HIST 8  /* recent configurations (index -> conf) per replica */
#define SIM_READS_MAX 32 /* outstanding ReadIndex requests per replica */
#define SIM_ACKS_MAX 256 /* outstanding proposals per replica whose ack is tracked */
#define SIM_EVENTS_MAX (1u << 20)
#define SIM_TERMS_MAX (1u << 20)
#define SIM_INDEX_MAX (1u << 24)
#define SIM_DEFERRED_MAX 64
#define SIM_READY_LOOPS_MAX 16 /* readies handled back to back without a sync */
#define SIM_READ_EXPIRE_MS 2000
#define SIM_STEP_EVENTS_MAX 200000 /* events handled in one virtual millisecond */

/* Entry data written by the workload: [op id u64][proposer u8][kind u8][key u8][0][inc u32]
 * followed by deterministic padding. Leader no-ops are empty. */
#define SIM_OP_HDR 16
#define SIM_OP_LEN_MAX 96
enum sim_op_kind { SIM_OP_PUT = 1, SIM_OP_MARKER = 2 };

/* The replicated state machine: a tiny KV (key -> log index of its last write) and a running
 * hash of every applied (index, term, data). Snapshots carry it (sim__sm_encode). */
struct sim_sm {
    raft_index applied;
    uint64_t hash;
    uint64_t kv_index[SIM_KV_KEYS];
};
#define SIM_SM_ENCODED_LEN (8 * (3 + SIM_KV_KEYS))

struct sim_read {
    uint64_t ctx;
    raft_index acked_at_start; /* highest acknowledged write index when the read started */
    raft_index index;          /* read index, valid once has_index */
    bool has_index;
    bool lease;          /* served by raft_read_lease, not ReadIndex */
    uint64_t started_ms; /* reads lost in the network expire after SIM_READ_EXPIRE_MS */
};

struct sim_ack {
    uint64_t op_id;
    raft_index index; /* index raft_propose_batch returned */
};

struct sim_conf_version {
    raft_index index; /* the configuration holds from this applied index on */
    struct raft_conf_state conf;
};

/* One group's replica on one node. The "disk" part survives crashes; the rest does not. */
struct sim_replica {
    /* disk */
    bool exists;
    struct raft_mem_storage *disk;
    raft_index durable_commit; /* invariant: never decreases while the replica exists */
    raft_index cc_handled;     /* last conf-change index that created/destroyed it */
    uint32_t gen;              /* bumped when created or destroyed (see sim_msg) */
    raft_term tomb_term;       /* hard state kept when destroyed, so a re-added */
    raft_id tomb_vote;         /* replica never votes twice in one term */
    raft_index floor_index;    /* and the last log position it ever held (its vote floor, */
    raft_term floor_term;      /* raft_config.vote_floor_*), kept across removals */
    /* memory (lost on crash) */
    struct raft *core; /* NULL when down or absent */
    uint32_t inc;      /* incarnation: unique per raft_new in a run */
    bool ready_out;    /* rd is waiting for its sync event */
    size_t msgs_sent;  /* rd.msgs[0 .. msgs_sent) already sent (the early ones) */
    struct raft_ready rd;
    uint64_t ready_seq;
    bool lc_pending; /* leader completeness check due at the next sync of a newer ready */
    uint64_t lc_after_seq;
    raft_term lc_term;
    struct sim_sm sm;
    struct sim_sm ring[SIM_SM_RING];
    unsigned ring_n, ring_head;
    struct sim_conf_version confs[SIM_CONF_HIST];
    unsigned n_confs;
    struct sim_read reads[SIM_READS_MAX];
    unsigned n_reads;
    struct sim_ack acks[SIM_ACKS_MAX];
    unsigned n_acks;
    uint8_t role;
    raft_term term;
    raft_index commit_seen; /* invariant: the core's commit never goes below it */
};

struct sim_node {
    raft_id id;
    bool up;
    uint64_t restart_at;
    unsigned tick_phase;
    struct sim_replica reps[SIM_GROUPS_MAX];
};

/* Checker state of one group: global maps over the whole run. */
struct sim_log_slot {
    raft_index index; /* 0 = empty slot */
    raft_term term;
    raft_term prev_term;
    uint64_t dhash;
};

struct sim_applied {
    raft_term term; /* 0 = nobody applied this index yet */
    uint64_t dhash;
    uint64_t prefix; /* state-machine hash after applying this index */
};

struct sim_commit_mark {
    raft_index index; /* highest commit any node persisted while in this term */
    raft_term entry_term;
};

struct sim_group {
    uint32_t id;
    struct raft_conf_state init_conf;
    uint32_t min_voters;
    raft_id *leader_of_term; /* [term] */
    struct sim_commit_mark *cmax;
    size_t terms_cap;
    struct sim_applied *applied; /* [index] */
    size_t applied_cap;
    raft_index applied_max;
    struct sim_log_slot *log; /* open addressing on (index, term) */
    size_t log_cap, log_n;
    raft_index acked_max;
    /* liveness probe of a quiet phase */
    bool live_ok;
    uint64_t marker_op;
    raft_id marker_node;
    uint64_t marker_at;
};

enum sim_event_kind { SIM_EV_MSG = 0, SIM_EV_SYNC = 1 };

struct sim_msg {
    uint32_t group;
    bool lost; /* dropped at send; a SNAPSHOT is still "delivered" to report the failure */
    /* Replica generations of both ends at send time. A removed and re-added replica reuses its
     * node id, so messages of its earlier life are dropped (TiKV gives it a new peer id). */
    uint32_t from_gen;
    uint32_t to_gen;
    struct raft_msg m; /* entries and data live in the same allocation */
};

struct sim_event {
    uint64_t time;
    uint64_t seq;
    struct sim_msg *msg; /* SIM_EV_MSG: owned by the event */
    uint64_t ready_seq;  /* SIM_EV_SYNC */
    uint32_t inc;        /* SIM_EV_SYNC */
    uint8_t kind;
    uint8_t node; /* SIM_EV_SYNC: node index */
    uint8_t group;
};

struct sim_deferred {
    uint8_t node;
    uint8_t group;
    bool create;
};

struct sim_cluster {
    struct sim_options opt;
    struct sim_rand rand;
    struct sim_counters cnt;
    uint64_t now; /* virtual ms */
    struct sim_node nodes[SIM_NODES_MAX];
    struct sim_group groups[SIM_GROUPS_MAX];
    struct sim_event *heap;
    size_t heap_n, heap_cap;
    uint64_t seq;
    /* network faults */
    bool blocked[SIM_NODES_MAX][SIM_NODES_MAX]; /* [from][to] */
    uint64_t heal_at;
    uint64_t isolate_at; /* a new leader is cut off at this time (0 = none pending) */
    unsigned isolate_node;
    uint32_t drop_ppm, dup_ppm, delay_ppm;
    unsigned lat_max_ms;
    /* per-seed core configuration */
    size_t max_msg_bytes;
    size_t max_inflight;
    unsigned sync_max_ms;
    /* phases */
    bool quiet;
    uint64_t quiet_started;
    uint64_t next_quiet_at;
    uint64_t next_op_id;
    uint64_t next_ctx;
    uint32_t next_inc;
    struct sim_deferred deferred[SIM_DEFERRED_MAX];
    unsigned n_deferred;
    bool failed;
    char *violation;
    size_t violation_len;
};

/* sim_run.c */
void sim__fail(struct sim_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void sim__trace(struct sim_cluster *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* sim_net.c: event heap and fake network. */
int sim__heap_push(struct sim_cluster *c, const struct sim_event *ev);
bool sim__heap_pop_due(struct sim_cluster *c, struct sim_event *out);
void sim__heap_clear(struct sim_cluster *c);
/* Copies m (borrowed for the call) into the network with random latency and faults. */
void sim__net_send(struct sim_cluster *c, uint32_t group, const struct raft_msg *m);
/* Delivers ev's message (ownership transfers: freed here). */
void sim__net_deliver(struct sim_cluster *c, struct sim_event *ev);
void sim__net_heal(struct sim_cluster *c);

/* sim_node.c: the host loop of one replica, the fake disk, crashes and restarts. */
void sim__replica_pump(struct sim_cluster *c, unsigned node, unsigned group);
void sim__replica_sync(struct sim_cluster *c, const struct sim_event *ev);
void sim__node_crash(struct sim_cluster *c, unsigned node);
void sim__node_restart(struct sim_cluster *c, unsigned node);
/* A replica of an initial member starts from the group's bootstrap snapshot (index 1, term 1,
 * initial configuration); a joiner starts empty and gets a snapshot from the leader. */
int sim__replica_create(struct sim_cluster *c, unsigned node, unsigned group, bool bootstrap);
/* The state machine every initial member starts from (index 1). */
void sim__sm_bootstrap(unsigned group, struct sim_sm *out);
void sim__replica_destroy(struct sim_cluster *c, unsigned node, unsigned group);
void sim__replica_free_all(struct sim_cluster *c);
void sim__run_deferred(struct sim_cluster *c);
void sim__sm_encode(const struct sim_sm *sm, uint8_t out[SIM_SM_ENCODED_LEN]);
int sim__sm_decode(const void *data, size_t len, struct sim_sm *out);
uint64_t sim__entry_hash(const struct raft_entry *e);
/* The configuration this replica had applied at `index` (NULL if no longer known). */
const struct raft_conf_state *sim__replica_conf_at(const struct sim_replica *rep, raft_index index);

/* sim_check.c: the checkers (each calls sim__fail on a violation). */
int sim__group_checks_init(struct sim_group *g);
void sim__group_checks_free(struct sim_group *g);
void sim__check_observe(struct sim_cluster *c, unsigned node, unsigned group);
void sim__check_persist(struct sim_cluster *c, unsigned node, unsigned group,
                        const struct raft_ready *rd);
void sim__check_after_persist(struct sim_cluster *c, unsigned node, unsigned group,
                              const struct raft_ready *rd);
void sim__check_apply(struct sim_cluster *c, unsigned node, unsigned group,
                      const struct raft_entry *e);
void sim__check_snapshot(struct sim_cluster *c, unsigned node, unsigned group,
                         const struct raft_snapshot *snap, const struct sim_sm *sm);
void sim__check_read(struct sim_cluster *c, unsigned node, unsigned group,
                     const struct sim_read *rd);
/* raft_check_invariants on one core / on every live core (sim__fail names the invariant). */
void sim__check_core(struct sim_cluster *c, unsigned node, unsigned group);
void sim__check_all_cores(struct sim_cluster *c);

/* sim_workload.c */
void sim__workload_step(struct sim_cluster *c);
void sim__workload_on_leader(struct sim_cluster *c, unsigned node, unsigned group);
void sim__workload_on_apply(struct sim_cluster *c, unsigned node, unsigned group,
                            const struct raft_entry *e);
/* Runs the liveness probe one step; returns true once every group committed a probe. */
bool sim__liveness_step(struct sim_cluster *c);
void sim__liveness_reset(struct sim_cluster *c);

/* State-machine hash after applying (index, term, entry hash) on top of h. */
static inline uint64_t sim__sm_hash_step(uint64_t h, raft_index index, raft_term term,
                                         uint64_t dhash)
{
    return sim_mix64(
        h ^ sim_mix64(index * 0x9e3779b97f4a7c15ull ^ term * 0xc2b2ae3d27d4eb4full ^ dhash));
}

static inline struct sim_replica *sim__rep(struct sim_cluster *c, unsigned node, unsigned group)
{
    return &c->nodes[node].reps[group];
}

#endif /* SLOTD_SIM_INTERNAL_H */
