/* raft.h - public API of slotd's pure, deterministic Raft core (libc only). */
#ifndef SLOTD_RAFT_H
#define SLOTD_RAFT_H

/*
 * The core is a state machine in the style of etcd's RawNode. It reads no clock,
 * seeds no RNG by itself, does no I/O and never sees protobuf. Inputs are
 * messages (raft_step), ticks (raft_tick), proposals (raft_propose*),
 * read requests (raft_read_index), leadership transfers and conf changes.
 * Outputs are collected in a struct raft_ready.
 *
 * HOST CONTRACT (one round):
 *   1. if (raft_has_ready(r)) raft_ready(r, &rd);
 *   2. Install rd.snapshot (if rd.has_snapshot) into the state machine and
 *      stable storage; then durably persist rd.hard_state (if
 *      rd.has_hard_state) and rd.entries (an append that replaces every stored
 *      entry with index >= rd.entries[0].index). Persisting must be synced when
 *      rd.must_sync is true.
 *   3. rd.msgs[0 .. rd.n_msgs_early) may be sent at once, in parallel with
 *      step 2 (thesis 10.2.1: a leader's APPEND, HEARTBEAT and TIMEOUT_NOW
 *      depend on nothing this ready persists). The rest only after step 2 is
 *      durable: they may depend on the persisted state (a vote granted, an
 *      append acknowledged). Sending the early ones late is always allowed.
 *   4. Apply rd.committed in order. A committed entry of type
 *      RAFT_ENTRY_CONF_CHANGE is applied with raft_apply_conf_change(), which
 *      returns the new configuration to persist with the applied index.
 *      Serve rd.reads once the applied index is >= read.index.
 *   5. raft_advance(r, &rd). Everything rd points to stays valid until then.
 *      A leader counts its own copy of an entry towards the commit quorum
 *      only from here on (its append is durable), so an entry never commits
 *      on a majority that includes the leader's unsynced write.
 * Between raft_ready() and raft_advance() the host may keep calling raft_step,
 * raft_tick, raft_propose* and raft_read_index (pipelining: proposals collected
 * while a batch syncs go into the next ready). It must not call raft_ready()
 * again before raft_advance(), nor raft_advance() without a ready out or with
 * another ready than the one handed out.
 *
 * Misuse is a programmer error, not an error code: a broken rule of this
 * contract (above), a NULL where a pointer is required, or an argument a
 * function's comment rules out stops the process with RAFT_ASSERT (on in every
 * build; raft/README.md). Bad input from the network and state-dependent
 * refusals are return codes.
 *
 * The host makes stable storage (struct raft_storage) reflect what it has
 * persisted: after step 2 it appends rd.entries / applies rd.snapshot /
 * saves rd.hard_state in the storage the core reads from (for example
 * raft_mem_storage_append()). The core only ever reads storage.
 *
 * Threading: a struct raft is owned by one thread. Nothing is global.
 * Memory: see "ownership" on each function. Allocation failures return
 * RAFT_ENOMEM and leave the core unchanged.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef uint64_t raft_id;    /* node id; 0 means "none" */
typedef uint64_t raft_term;  /* election term */
typedef uint64_t raft_index; /* log index; 0 means "none / before the log" */

/* Errors. 0 is success. RAFT_ERRORS(X) yields the enum and raft_strerror(). */
#define RAFT_ERRORS(X)                                                          \
    X(RAFT_OK, 0, "ok")                                                       \
    X(RAFT_ENOMEM, 1, "out of memory")                                        \
    X(RAFT_EINVAL, 2, "invalid argument")                                     \
    X(RAFT_ENOLEADER, 3, "no leader known")                                   \
    X(RAFT_ENOTLEADER, 4, "this node is not the leader")                      \
    X(RAFT_ETRANSFER, 5, "leadership transfer in progress")                   \
    X(RAFT_EBUDGET, 6, "uncommitted bytes budget exceeded")                   \
    X(RAFT_ECONFPENDING, 7, "a configuration change is already pending")      \
    X(RAFT_ENOTREADY, 8, "leader has not committed an entry in its term yet") \
    X(RAFT_EREADFULL, 9, "read index queue is full")                          \
    X(RAFT_ECOMPACTED, 10, "requested index is compacted")                    \
    X(RAFT_EUNAVAILABLE, 11, "requested entries are not available")           \
    X(RAFT_ESTORAGE, 12, "storage error")                                     \
    X(RAFT_ETOOBIG, 13, "entry larger than the maximum")                      \
    X(RAFT_ECONF, 14, "configuration change is not valid")                    \
    X(RAFT_ESTALE, 15, "snapshot or request is out of date")                 \
    X(RAFT_ENOLEASE, 16, "this leader holds no valid lease")

#define RAFT__ERR_ENUM(name, code, text) name = code,
enum raft_err { RAFT_ERRORS(RAFT__ERR_ENUM) RAFT_ERR_COUNT_ };
#undef RAFT__ERR_ENUM

/* Returns a static string; never NULL. */
const char *raft_strerror(int err);

/* A borrowed or owned byte range (ownership stated at each use). */
struct raft_buf {
    const void *base;
    size_t len;
};

enum raft_entry_type {
    RAFT_ENTRY_NORMAL = 0,      /* host command; an empty one is a leader's no-op */
    RAFT_ENTRY_CONF_CHANGE = 1, /* data is an encoded struct raft_conf_change */
};

struct raft_entry {
    raft_term term;
    raft_index index;
    uint8_t type;         /* enum raft_entry_type */
    struct raft_buf data; /* owner stated where the entry appears */
};

#define RAFT_MEMBERS_MAX 16 /* voters + learners, per group */

/* The membership of a group. invariant: no id is both voter and learner. */
struct raft_conf_state {
    uint32_t n_voters;
    uint32_t n_learners;
    raft_id voters[RAFT_MEMBERS_MAX];
    raft_id learners[RAFT_MEMBERS_MAX];
};

/* One membership change. At most one may be pending (proposed and not applied)
 * at a time (thesis 4.1: single-server changes); see raft/README.md. */
enum raft_conf_change_type {
    RAFT_CC_ADD_VOTER = 0,   /* new voter (must not be a learner; use PROMOTE) */
    RAFT_CC_ADD_LEARNER = 1, /* new learner: replicated, never votes */
    RAFT_CC_PROMOTE = 2,     /* learner -> voter */
    RAFT_CC_REMOVE = 3,      /* voter or learner leaves */
};

struct raft_conf_change {
    uint8_t type; /* enum raft_conf_change_type */
    raft_id node;
};

/* Encoded size of a conf change entry's data. */
#define RAFT_CONF_CHANGE_ENCODED_LEN 9
void raft_conf_change_encode(const struct raft_conf_change *cc,
                             uint8_t out[RAFT_CONF_CHANGE_ENCODED_LEN]);
int raft_conf_change_decode(const void *data, size_t len, struct raft_conf_change *out);

/* Persistent state (thesis Figure 3.1) plus the commit index. */
struct raft_hard_state {
    raft_term term;
    raft_id vote;
    raft_index commit;
};

struct raft_snapshot_meta {
    raft_index index; /* last index the snapshot covers */
    raft_term term;   /* term of that entry */
    struct raft_conf_state conf;
};

/* data is opaque to the core and may be empty (the host may stream the state
 * machine separately and attach nothing here). */
struct raft_snapshot {
    struct raft_snapshot_meta meta;
    struct raft_buf data;
};

enum raft_msg_type {
    RAFT_MSG_APPEND = 0,
    RAFT_MSG_APPEND_RESP = 1,
    RAFT_MSG_VOTE = 2,
    RAFT_MSG_VOTE_RESP = 3,
    RAFT_MSG_PRE_VOTE = 4,
    RAFT_MSG_PRE_VOTE_RESP = 5,
    RAFT_MSG_HEARTBEAT = 6,
    RAFT_MSG_HEARTBEAT_RESP = 7,
    RAFT_MSG_SNAPSHOT = 8,
    RAFT_MSG_TIMEOUT_NOW = 9,
    RAFT_MSG_READ_INDEX = 10,      /* follower -> leader */
    RAFT_MSG_READ_INDEX_RESP = 11, /* leader -> follower */
    RAFT_MSG_TYPE_COUNT_
};

/* Name of a message type for logs ("append", "vote_resp", ...). */
const char *raft_msg_type_name(int type);

/*
 * One message between two cores of the same group. The host adds the group id
 * on the wire. Field use by type:
 *   APPEND:         log_term/index = entry preceding entries; entries; commit
 *   APPEND_RESP:    index = last matching index (accept) or rejected index;
 *                   reject, reject_hint (the follower's last index capped at
 *                   the rejected index, moved back past entries of a term
 *                   above the APPEND's log_term), log_term (term at
 *                   reject_hint, for fast back-off)
 *   VOTE/PRE_VOTE:  log_term/index = candidate's last entry; term (for
 *                   PRE_VOTE: the term the candidate would campaign in);
 *                   context = 1 when forced by a leadership transfer
 *   *_VOTE_RESP:    reject
 *   HEARTBEAT:      commit; context = read-index round id (0 = none)
 *   HEARTBEAT_RESP: context echoed
 *   SNAPSHOT:       snapshot (meta + opaque data)
 *   READ_INDEX:     context = host's request id
 *   READ_INDEX_RESP:context echoed, index = read index (0 + reject = failed)
 */
struct raft_msg {
    uint8_t type; /* enum raft_msg_type */
    bool reject;
    raft_id from;
    raft_id to;
    raft_term term;
    raft_term log_term;
    raft_index index;
    raft_index commit;
    raft_index reject_hint;
    uint64_t context;
    size_t n_entries;
    struct raft_entry *entries;
    struct raft_snapshot snapshot;
};

enum raft_role {
    RAFT_FOLLOWER = 0,
    RAFT_PRE_CANDIDATE = 1,
    RAFT_CANDIDATE = 2,
    RAFT_LEADER = 3,
};
const char *raft_role_name(int role);

/* Volatile state that is useful to the host (leader changes, role). */
struct raft_soft_state {
    raft_id leader; /* 0 when unknown */
    uint8_t role;   /* enum raft_role */
};

/* A ReadIndex result: once applied >= index, state includes every write
 * acknowledged before raft_read_index() was called with this context. */
struct raft_read_state {
    raft_index index;
    uint64_t context;
};

/* A read the core dropped (leader lost, read forwarded but leader changed):
 * the host must fail or retry the request with this context. */
struct raft_read_failure {
    uint64_t context;
    int err; /* RAFT_ENOTLEADER (leader lost), RAFT_ENOLEADER (a forwarded
              * read got no answer within two election timeouts) */
};

/*
 * Output of one round. Everything is owned by the core and stays valid
 * until raft_advance() with this ready.
 */
struct raft_ready {
    bool has_soft_state;
    struct raft_soft_state soft_state;

    bool has_hard_state;
    struct raft_hard_state hard_state;

    bool has_snapshot; /* install before persisting entries */
    struct raft_snapshot snapshot;

    size_t n_entries; /* to persist (step 2 of the contract) */
    struct raft_entry *entries;

    size_t n_msgs; /* to send after persisting ... */
    struct raft_msg *msgs;
    size_t n_msgs_early; /* ... except msgs[0 .. n_msgs_early): any time (contract step 3) */

    size_t n_committed; /* to apply, in order */
    struct raft_entry *committed;

    size_t n_reads;
    struct raft_read_state *reads;

    size_t n_read_failures;
    struct raft_read_failure *read_failures;

    bool must_sync; /* entries or hard state (term, vote) must be synced */
};

/*
 * Read-only stable storage: what the host has durably persisted. Every
 * function returns 0 or a RAFT_E* error. Entries returned by entries() are
 * borrowed until the next call on the same storage; the core copies them.
 */
struct raft_storage {
    void *ctx;
    /* Hard state and membership at startup. */
    int (*initial_state)(void *ctx, struct raft_hard_state *hs, struct raft_conf_state *cs);
    /* Entries in [lo, hi), at least one if any exist, total data bytes at
     * most max_bytes otherwise. RAFT_ECOMPACTED if lo <= snapshot index;
     * RAFT_EUNAVAILABLE if hi > last_index + 1. */
    int (*entries)(void *ctx, raft_index lo, raft_index hi, size_t max_bytes,
                   const struct raft_entry **out, size_t *n_out);
    /* Term of entry i; i may equal the snapshot index. */
    int (*term)(void *ctx, raft_index i, raft_term *out);
    /* Index of the first available entry (snapshot index + 1). */
    int (*first_index)(void *ctx, raft_index *out);
    /* Index of the last entry (snapshot index when the log is empty). */
    int (*last_index)(void *ctx, raft_index *out);
    /* The most recent snapshot (data borrowed until the next call). */
    int (*snapshot)(void *ctx, struct raft_snapshot *out);
};

struct raft_config {
    raft_id id;                    /* this node, != 0 */
    const struct raft_storage *storage; /* borrowed for the core's lifetime */
    raft_index applied;            /* last applied index at restart (0 fresh) */
    uint64_t seed;                 /* randomized election timeouts */
    unsigned election_tick;        /* default 10; timeout is in [e, 2e) */
    unsigned heartbeat_tick;       /* default 1; must be < election_tick */
    bool disable_pre_vote;         /* pre-vote is on by default (thesis 9.6) */
    bool disable_check_quorum;     /* check-quorum is on by default (6.2) */
    size_t max_msg_bytes;          /* entry bytes per APPEND; default 1 MiB */
    size_t max_inflight_msgs;      /* per follower in replicate; default 256 */
    size_t max_uncommitted_bytes;  /* leader budget; default 64 MiB; 0 = default */
    size_t max_entry_bytes;        /* one entry's data; default 8 MiB */
    size_t max_committed_bytes_per_ready; /* default 16 MiB */
    size_t read_queue_max;         /* pending read-index requests; default 4096 */
    /* Leader leases (raft_read_lease). Needs check-quorum, and every replica of the group must
     * set it: it also makes a replica refuse (pre-)votes for election_tick ticks after raft_new
     * (it may have acknowledged a leader just before it stopped), as if it had just heard from
     * a leader. */
    bool lease;
    unsigned lease_drift_ticks;    /* clock drift margin of a lease; default election_tick / 10,
                                    * at least 1 */
    /* A replica re-created empty after it was removed from the group: the last log position it
     * held then (0, 0 for none). It votes only for a candidate whose log is at least as
     * up-to-date as this floor, as if it still held that log (a removed replica that comes back
     * empty must not become a vote that the log it lost would have refused). */
    raft_index vote_floor_index;
    raft_term vote_floor_term;
};

/* Fills defaults; the caller then sets id, storage, seed and overrides. */
void raft_config_default(struct raft_config *cfg);

struct raft;

/* Creates a core from stable storage. cfg is borrowed for the call (cfg->storage
 * for the core's lifetime; every function of it must be set). On success *out is
 * owned by the caller; free with raft_free(). Errors: RAFT_EINVAL (id 0, no
 * storage, bad ticks, applied above the commit index), RAFT_ENOMEM,
 * RAFT_ESTORAGE (storage failed or holds an invalid configuration). */
int raft_new(const struct raft_config *cfg, struct raft **out);
void raft_free(struct raft *r);

/* Advances the logical clock by one tick. */
void raft_tick(struct raft *r);

/* Feeds a message from a peer. The message and everything it points to are
 * borrowed for the call. Stale messages (lower term, not addressed to this
 * node) are ignored and return 0; answers from non-members are ignored, but
 * a leader's APPEND/HEARTBEAT/SNAPSHOT is accepted from any sender so that a
 * joining node can catch up. Errors: RAFT_ENOMEM (the message is dropped
 * as if lost; a term update it carried stays), RAFT_EINVAL (a malformed
 * message, refused before it changes anything: APPEND entries that do not
 * follow (index, log_term) contiguously in non-decreasing terms at most
 * m->term, entries on another type, a snapshot of a term above m->term; or an
 * APPEND that conflicts with committed entries, or a snapshot with an invalid
 * configuration), RAFT_ESTORAGE (a sticky storage failure). */
int raft_step(struct raft *r, const struct raft_msg *m);

/* Proposes n >= 1 normal entries (data not NULL; an entry of len > 0 has a
 * base); data is copied (borrowed for the call).
 * On success *first_index (if not NULL) gets the index of the first entry,
 * the rest follow consecutively, all in the current term (raft_status().term).
 * Errors: RAFT_ENOTLEADER / RAFT_ENOLEADER, RAFT_ETRANSFER, RAFT_EBUDGET,
 * RAFT_ETOOBIG, RAFT_ENOMEM. Nothing is appended on error. */
int raft_propose_batch(struct raft *r, const struct raft_buf *data, size_t n,
                       raft_index *first_index);
int raft_propose(struct raft *r, const void *data, size_t len, raft_index *index);

/* Proposes a membership change. Errors as raft_propose plus
 * RAFT_ECONFPENDING (a change is pending or the leader has not committed an
 * entry of its term yet) and RAFT_ECONF (invalid for the current config). */
int raft_propose_conf_change(struct raft *r, const struct raft_conf_change *cc,
                             raft_index *index);

/* Applies a committed entry of type RAFT_ENTRY_CONF_CHANGE (index at most the
 * commit index; anything else is misuse) to the core's
 * configuration (step 4 of the host contract) and returns the resulting
 * configuration in *out (may be NULL; filled on error too). Errors:
 * RAFT_EINVAL (bad data, or a change that is not valid for the current
 * configuration; the entry is then skipped, the same on every replica).
 * An entry at or below the index the configuration already reflects (a
 * snapshot restored meanwhile, or the entry applied before a restart) is a
 * no-op that returns 0 and the current configuration. */
int raft_apply_conf_change(struct raft *r, const struct raft_entry *entry,
                           struct raft_conf_state *out);

/* Requests a linearizable read (thesis 6.4). The result comes back in a later
 * ready as a raft_read_state with the same context, or as a read_failure.
 * On a leader that has not yet committed an entry in its term the request
 * waits for that commit. On a follower it is forwarded to the leader.
 * Errors: RAFT_ENOLEADER, RAFT_EREADFULL, RAFT_ENOMEM. */
int raft_read_index(struct raft *r, uint64_t context);

/* A linearizable read without a message round (thesis 6.4.1): succeeds while this leader holds
 * a lease, that is cfg.lease is set, it has committed an entry of its term, it has started no
 * leadership transfer in this term, and a quorum of voters acknowledged a heartbeat that it sent
 * less than election_tick - 2 - lease_drift_ticks ticks ago. Every voter that acknowledged it
 * refuses (pre-)votes for election_tick of its own ticks after receiving it, so no other leader
 * can exist before the lease ends (2 ticks cover both sides' tick granularity, lease_drift_ticks
 * the clocks' drift). On success *index (if not NULL) is the commit index: state applied through
 * it includes every write acknowledged before the call; *ticks_left (if not NULL) is how many
 * more raft_tick() calls the lease survives without a new acknowledgement (>= 1).
 * Errors: RAFT_ENOTLEADER, RAFT_ENOLEASE. */
int raft_read_lease(const struct raft *r, raft_index *index, unsigned *ticks_left);

/* Starts a leadership transfer to `target` (thesis 3.10). The leader stops
 * accepting proposals, brings the target up to date, then sends TIMEOUT_NOW.
 * The transfer aborts after an election timeout. Errors: RAFT_ENOTLEADER,
 * RAFT_EINVAL (target is not a voter or is self). */
int raft_transfer_leader(struct raft *r, raft_id target);

/* Makes a follower campaign now (testing, bootstrap): pre-vote unless disabled.
 * Does nothing (and returns 0) while a committed conf change is not applied.
 * Errors: RAFT_EINVAL (this node leads already or is not a voter). */
int raft_campaign(struct raft *r);
/* The first campaign of a replica still at its group's bootstrap term, in which no replica led
 * (a fresh cluster): an election at once whose vote requests are forced past leases and the
 * restart hold of cfg.lease. Safe because a voter that follows a leader has that leader's term,
 * above the bootstrap term, and refuses a request of bootstrap term + 1 as a second vote. Using
 * it at a later term is misuse. Errors as raft_campaign. */
int raft_campaign_fresh(struct raft *r);

/* The host could not deliver to `to`: on a leader, a member in the replicate
 * state goes back to probe. Ignored for a node that is not a member. */
void raft_report_unreachable(struct raft *r, raft_id to);
/* Outcome of sending a snapshot to `to`: on a leader, a member in the snapshot
 * state goes back to probe (from the snapshot's index if ok). Ignored otherwise. */
void raft_report_snapshot(struct raft *r, raft_id to, bool ok);

/* False while a ready is out (between raft_ready() and raft_advance()). */
bool raft_has_ready(const struct raft *r);
/* Fills *rd (see the host contract). Only when no ready is out (call
 * raft_has_ready() first; a second raft_ready() before raft_advance() is
 * misuse). Errors: RAFT_ENOMEM, RAFT_ESTORAGE; nothing is handed out then. */
int raft_ready(struct raft *r, struct raft_ready *rd);
/* Acknowledges that rd, the ready the last raft_ready() filled, was fully
 * handled (without a ready out, or with another one, is misuse). */
void raft_advance(struct raft *r, const struct raft_ready *rd);

/* The host compacted its storage up to `index`. Purely informational: the core
 * keeps no copy of stable entries (it reads them from storage on demand), so
 * this does nothing. */
void raft_compacted(struct raft *r, raft_index index);

enum raft_progress_state {
    RAFT_PROGRESS_PROBE = 0,
    RAFT_PROGRESS_REPLICATE = 1,
    RAFT_PROGRESS_SNAPSHOT = 2,
};

struct raft_progress_status {
    raft_id id;
    bool learner;
    uint8_t state; /* enum raft_progress_state */
    bool recent_active;
    raft_index match;
    raft_index next;
    size_t inflight;
};

struct raft_status {
    raft_id id;
    uint8_t role; /* enum raft_role */
    raft_id leader;
    raft_term term;
    raft_id vote;
    raft_index commit;
    raft_index applied;
    raft_index last_index;
    raft_index first_index;
    raft_id transfer_target; /* 0 if none */
    /* Not on a leader: ticks since a leader's APPEND, HEARTBEAT or SNAPSHOT reached this node.
     * A replica no leader tracks (removed from the configuration) stops hearing any. */
    unsigned leader_silent_ticks;
    size_t uncommitted_bytes;
    struct raft_conf_state conf;
    size_t n_progress; /* filled on the leader only */
    struct raft_progress_status progress[RAFT_MEMBERS_MAX];
};

void raft_status(const struct raft *r, struct raft_status *out);

/* The current term (cheap; raft_status copies much more). Proposals accepted now carry it. */
raft_term raft_current_term(const struct raft *r);

/* The snapshot the core restored from a SNAPSHOT message and has not yet been told is persisted
 * (it goes out in a ready as rd.snapshot and stays until the raft_advance after it), NULL if
 * none. A host that stored the message's data elsewhere learns here whether the core took it.
 * Borrowed: valid until the next call that changes the core. */
const struct raft_snapshot *raft_pending_snapshot(const struct raft *r);

/* Which invariant raft_check_invariants() found broken, where. */
struct raft_invariant_report {
    /* static, e.g. "applied_le_commit" (raft/README.md lists them); NULL if none broke */
    const char *name;
    raft_id node;     /* the core's id */
    raft_term term;   /* its current term */
    raft_index index; /* the log index the invariant is about (0 when none) */
    char detail[192]; /* the values that broke it, as a sentence */
};

/* Checks the core's invariants (O(members + unstable entries), reads storage). Returns 0 when
 * all hold, else RAFT_EINVAL and, if report is not NULL, fills *report (borrowed for the call)
 * with the first broken one. Debug and sanitizer builds of the core call it after every public
 * call that changes the core and abort on a failure; the simulator calls it after every input
 * to a core; the unit harness after every step and advance. */
int raft_check_invariants(const struct raft *r, struct raft_invariant_report *report);

/* ---- In-memory stable storage (for tests, the simulator and as a log
 * cache). Implements struct raft_storage. */
struct raft_mem_storage;

int raft_mem_storage_new(struct raft_mem_storage **out);
void raft_mem_storage_free(struct raft_mem_storage *s);
/* The vtable bound to s (borrowed for s's lifetime). */
const struct raft_storage *raft_mem_storage_get(struct raft_mem_storage *s);
void raft_mem_storage_set_hard_state(struct raft_mem_storage *s, const struct raft_hard_state *hs);
void raft_mem_storage_set_conf_state(struct raft_mem_storage *s, const struct raft_conf_state *cs);
/* Appends n entries with consecutive indexes (copied), replacing any stored
 * entries at index >= entries[0].index. Entries below the first index are
 * ignored. RAFT_EINVAL if entries[0] would leave a gap after the last index. */
int raft_mem_storage_append(struct raft_mem_storage *s, const struct raft_entry *entries, size_t n);
/* Replaces everything with the snapshot (data copied). RAFT_ESTALE if older
 * than the current snapshot. */
int raft_mem_storage_apply_snapshot(struct raft_mem_storage *s, const struct raft_snapshot *snap);
/* Records a snapshot at `index` (<= last index) with conf `cs` and data
 * (copied), then drops entries <= index. */
int raft_mem_storage_create_snapshot(struct raft_mem_storage *s, raft_index index,
                                     const struct raft_conf_state *cs, const void *data, size_t len);
/* Drops entries <= index but remembers term(index), so first index becomes
 * index + 1 (etcd's Compact). Callers compact only what a snapshot covers.
 * RAFT_ECOMPACTED if index < first index - 1, RAFT_EUNAVAILABLE if > last. */
int raft_mem_storage_compact(struct raft_mem_storage *s, raft_index index);
size_t raft_mem_storage_bytes(const struct raft_mem_storage *s);

#ifdef __cplusplus
}
#endif
#endif /* SLOTD_RAFT_H */
