/* raft_int.h - internal types and helpers shared by the files of the raft core (not installed). */
#ifndef SLOTD_RAFT_INT_H
#define SLOTD_RAFT_INT_H

#include "raft/raft.h"

/* Ownership: every pointer passed to these helpers is borrowed for the call unless the comment
 * says otherwise; memory they return belongs to the structure it came from (arena, chunk FIFO,
 * log) and lives as long as that structure's rules say (see raft/README.md, "Memory"). */

#include <stdlib.h>
#include <string.h>

/* ---- assertions (util.c) --------------------------------------------------------------------- */

/* RAFT_ASSERT(cond): a programmer error (an argument the contract rules out, misuse of the host
 * contract, a broken invariant) stops the process with the condition, file, line and function.
 * Operating errors (bad input from the network, full queues, storage failures) are return codes.
 * On in every build, like the rest of slotd's asserts (NDEBUG does not turn it off): each one is
 * a compare and a predicted branch on a value already at hand, and the measurement in
 * raft/README.md shows no throughput cost. O(n) checks live in raft_check_invariants(), which
 * only debug and sanitizer builds run after every call (RAFT__CHECK_CALL below). */
#define RAFT_ASSERT(cond)                                                                          \
    (__builtin_expect(!!(cond), 1) ? (void)0                                                       \
                                   : raft__assert_fail(#cond, __FILE__, __LINE__, __func__))
void raft__assert_fail(const char *cond, const char *file, int line, const char *func)
    __attribute__((noreturn, cold));

/* RAFT__CHECK_CALL(r, call): with SLOTD_RAFT_CHECK_CALLS (raft/CMakeLists.txt: Debug and sanitizer
 * builds) every public entry point that changes r ends with raft_check_invariants() and stops the
 * process naming the invariant, node, term, index and the call; otherwise it compiles to nothing.
 */
#ifdef SLOTD_RAFT_CHECK_CALLS
void raft__check_call(const struct raft *r, const char *call);
#define RAFT__CHECK_CALL(r, call) raft__check_call((r), (call))
#else
#define RAFT__CHECK_CALL(r, call) ((void)0)
#endif

/* ---- memory (util.c) ------------------------------------------------------------------------ */

/* One block of bytes. max_index tags the highest log index whose data went into it (chunk FIFO). */
struct raft__chunk {
    struct raft__chunk *next;
    size_t cap;
    size_t used;
    raft_index max_index;
    unsigned char data[];
};

#define RAFT__CHUNK_BYTES ((size_t)256 * 1024)
#define RAFT__ARENA_KEEP_BYTES ((size_t)4 * 1024 * 1024)

/* Bump allocator released as a whole. reset() keeps up to RAFT__ARENA_KEEP_BYTES of chunks. */
struct raft__arena {
    struct raft__chunk *head; /* chunks in use order; cur points into the list */
    struct raft__chunk *cur;
};
/* Returns 16-byte aligned memory owned by the arena, or NULL (out of memory). */
void *raft__arena_alloc(struct raft__arena *a, size_t n);
void raft__arena_reset(struct raft__arena *a);
void raft__arena_free(struct raft__arena *a);

/* FIFO of chunks holding entry data; a chunk is released once every index in it is dropped. */
struct raft__chunks {
    struct raft__chunk *head;
    struct raft__chunk *tail;
    struct raft__chunk *spare; /* one released chunk kept for reuse */
};
/* Makes sure the next `len` bytes fit in the tail chunk (so puts cannot fail). 0 or RAFT_ENOMEM. */
int raft__chunks_reserve(struct raft__chunks *c, size_t len);
/* Copies data into the reserved space; returns the copy (NULL when len == 0). */
void *raft__chunks_put(struct raft__chunks *c, const void *data, size_t len, raft_index index);
/* Frees head chunks whose max_index <= upto. */
void raft__chunks_release(struct raft__chunks *c, raft_index upto);
void raft__chunks_free(struct raft__chunks *c);

/* Grows *arr (elements of `size` bytes) so that it holds at least `need`. 0 or RAFT_ENOMEM. */
int raft__grow(void **arr, size_t *cap, size_t need, size_t size);

uint64_t raft__rand_next(uint64_t *state);
size_t raft__entries_bytes(const struct raft_entry *ents, size_t n);

/* ---- log (log.c): unstable entries in front of read-only storage, like etcd's raftLog ------ */

struct raft__unstable {
    struct raft_snapshot *snap; /* pending snapshot to hand out (owned), or NULL */
    struct raft_entry *ents;    /* ents[i].index == offset + i; data lives in `data` */
    size_t n;
    size_t cap;
    /* invariant: offset == snap->meta.index + 1 while snap is set, else offset <= storage last
     * index + 1 (below it when these entries replace stored ones that conflicted) */
    raft_index offset;
    struct raft__chunks data;
};

struct raft__log {
    const struct raft_storage *st;
    struct raft__unstable u;
    raft_index committed; /* invariant: committed <= last index */
    raft_index applied;   /* invariant: applied <= committed */
    int storage_err;      /* sticky storage failure (first/last index); returned by step/ready */
    struct raft_snapshot *snap_in_ready; /* snapshot handed out in the ready in flight (owned) */
};

int raft__log_init(struct raft__log *l, const struct raft_storage *st, raft_index committed,
                   raft_index applied);
void raft__log_free(struct raft__log *l);
raft_index raft__log_first_index(struct raft__log *l);
raft_index raft__log_last_index(struct raft__log *l);
/* The last index persisted by the host (what storage holds and the unstable part keeps). */
raft_index raft__log_stable_last(struct raft__log *l);
raft_term raft__log_last_term(struct raft__log *l);
/* 0, RAFT_ECOMPACTED, RAFT_EUNAVAILABLE or RAFT_ESTORAGE. */
int raft__log_term(struct raft__log *l, raft_index i, raft_term *out);
raft_term raft__log_term_or_zero(struct raft__log *l, raft_index i);
bool raft__log_match_term(struct raft__log *l, raft_index i, raft_term t);
bool raft__log_up_to_date(struct raft__log *l, raft_index lasti, raft_term term);
/* Appends after a consistency check (thesis 3.5). *ok false if (index, log_term) does not match.
 * Returns 0, RAFT_ENOMEM (nothing changed) or RAFT_EINVAL (a committed entry conflicts). */
int raft__log_maybe_append(struct raft__log *l, raft_index index, raft_term log_term,
                           raft_index commit, const struct raft_entry *ents, size_t n, bool *ok,
                           raft_index *last_new);
/* Appends entries (data copied), truncating any conflicting unstable suffix. */
int raft__log_append(struct raft__log *l, const struct raft_entry *ents, size_t n);
/* Appends new entries of `term` with the given data (copied). */
int raft__log_append_new(struct raft__log *l, raft_term term, uint8_t type,
                         const struct raft_buf *data, size_t n, raft_index *first);
void raft__log_find_conflict_by_term(struct raft__log *l, raft_index index, raft_term term,
                                     raft_index *out_index, raft_term *out_term);
/* Entries [lo, hi) limited to max_bytes (at least one), headers and data copied into `a`
 * (unstable data is referenced instead when copy_unstable is false). */
int raft__log_slice(struct raft__log *l, raft_index lo, raft_index hi, size_t max_bytes,
                    struct raft__arena *a, bool copy_unstable, struct raft_entry **out, size_t *n);
void raft__log_commit_to(struct raft__log *l, raft_index c);
bool raft__log_maybe_commit(struct raft__log *l, raft_index max_index, raft_term term);
int raft__log_restore(struct raft__log *l, const struct raft_snapshot *s);
void raft__log_stable_to(struct raft__log *l, raft_index i, raft_term t);
void raft__log_stable_snap_to(struct raft__log *l, raft_index i);

/* ---- progress (progress.c): per-member replication state, like etcd's tracker ------------- */

struct raft__inflights {
    raft_index *buf; /* ring of last indexes of APPENDs in flight, grown up to max */
    size_t start;
    size_t count;
    size_t cap;
    size_t max;
};

enum { RAFT__VOTE_NONE = 0, RAFT__VOTE_GRANTED = 1, RAFT__VOTE_REJECTED = 2 };

struct raft__progress {
    raft_id id;
    bool learner;
    uint8_t state; /* enum raft_progress_state */
    bool recent_active;
    bool probe_sent; /* probe: an APPEND is out, wait for its answer or a heartbeat answer */
    uint8_t vote;
    raft_index match; /* invariant (on the leader): match < next <= last index + 1 */
    raft_index next;
    raft_index pending_snapshot;
    uint64_t read_ack; /* highest read-index round this member acknowledged */
    uint64_t lease_tick; /* leader: 1 + the tick the acknowledged round was sent at (0 none) */
    struct raft__inflights ins;
};

void raft__progress_reset(struct raft__progress *p, raft_index last, bool self);
void raft__progress_free(struct raft__progress *p);
bool raft__progress_paused(const struct raft__progress *p);
void raft__progress_become_probe(struct raft__progress *p);
void raft__progress_become_replicate(struct raft__progress *p);
void raft__progress_become_snapshot(struct raft__progress *p, raft_index snap_index);
bool raft__progress_maybe_update(struct raft__progress *p, raft_index n);
bool raft__progress_maybe_decr_to(struct raft__progress *p, raft_index rejected,
                                  raft_index match_hint);
void raft__progress_sent(struct raft__progress *p, raft_index last, size_t n_ents);
void raft__inflights_free_to(struct raft__inflights *in, raft_index to);
void raft__inflights_free_first(struct raft__inflights *in);
bool raft__inflights_full(const struct raft__inflights *in);
/* The value that a quorum of voters has reached, given one value per voter. */
uint64_t raft__quorum_value(uint64_t *vals, size_t n);

/* ---- the core ------------------------------------------------------------------------------ */

/* A leader-side read: waiting for a term commit (round == 0) or for a heartbeat quorum. */
struct raft__read {
    uint64_t context;
    raft_index index;
    uint64_t round;
    raft_id from; /* 0 = asked locally, else the follower to answer with READ_INDEX_RESP */
};

/* A follower-side read forwarded to the leader. */
struct raft__fwd_read {
    uint64_t context;
    uint64_t deadline; /* tick count after which the read fails */
};

/* What one ready hands out: collected in `out`, swapped into `rdy` by raft_ready(). */
struct raft__outbox {
    struct raft_msg *msgs;
    size_t n_msgs;
    size_t cap_msgs;
    struct raft_read_state *reads;
    size_t n_reads;
    size_t cap_reads;
    struct raft_read_failure *fails;
    size_t n_fails;
    size_t cap_fails;
    struct raft__arena arena; /* message entries and snapshots, ready arrays */
};

#define RAFT__ROUND_TICKS 64 /* rounds whose send tick a leader remembers (leases) */

struct raft {
    struct raft_config cfg; /* copy with defaults filled */
    raft_id id;
    raft_term term; /* invariant: term >= the term of every log entry */
    raft_id vote;
    raft_id lead;
    uint8_t role;
    struct raft__log log;

    struct raft_conf_state conf;
    /* Log index conf reflects: the last conf change applied or snapshot restored. */
    raft_index conf_index;
    struct raft__progress prs[RAFT_MEMBERS_MAX]; /* one per voter and learner */
    uint32_t n_prs;

    raft_id transferee;
    raft_index pending_conf_index; /* leader: index of the last conf change it may have to apply */
    /* leader: commit index when it was elected. invariant: the leader's commit is this or an
     * entry of its own term (thesis 3.6.2: it never commits an earlier term's entry by counting) */
    raft_index lead_commit0;
    size_t uncommitted_bytes; /* leader: data bytes appended and not yet handed out */

    unsigned election_elapsed;
    unsigned leader_silent; /* ticks since a leader's message (not on a leader); see raft_status */
    unsigned heartbeat_elapsed;
    unsigned randomized_timeout; /* in [election_tick, 2 * election_tick) */
    uint64_t rng;
    uint64_t ticks;

    struct raft__read *reads; /* leader queue, bounded by read_queue_max */
    size_t n_reads;
    size_t cap_reads;
    uint64_t read_round;     /* last read round started */
    uint64_t read_round_gen; /* outbox generation that carries that round's first heartbeats */
    uint64_t round_tick[RAFT__ROUND_TICKS]; /* leader: tick round k was sent at, at k % size */
    raft_term lease_off_term; /* leader: a term in which a leadership transfer started */
    struct raft__fwd_read *fwd;
    size_t n_fwd;
    size_t cap_fwd;

    struct raft__outbox out;
    struct raft__outbox rdy;
    uint64_t out_gen;
    bool ready_out; /* a ready is in flight */
    struct raft_soft_state prev_soft;
    struct raft_hard_state prev_hard;
    raft_index rdy_last_index; /* last entry handed out in the ready in flight (0 none) */
    raft_term rdy_last_term;
    raft_index rdy_applied; /* last committed entry handed out in the ready in flight */
    raft_index rdy_snap_index;

    /* entries copied for APPENDs in the current outbox, shared between followers */
    raft_index mcache_lo;
    raft_index mcache_hi; /* [lo, hi) */
    struct raft_entry *mcache;
};

/* raft.c */
void raft__send(struct raft *r, struct raft_msg *m);
struct raft__progress *raft__progress_get(struct raft *r, raft_id id);
bool raft__is_voter(const struct raft *r, raft_id id);
bool raft__promotable(const struct raft *r);
void raft__become_follower(struct raft *r, raft_term term, raft_id lead);
void raft__bcast_append(struct raft *r);
/* A heartbeat carrying ctx to every other peer, each told to commit no further than its match. */
void raft__bcast_heartbeat_ctx(struct raft *r, uint64_t ctx);
bool raft__maybe_commit(struct raft *r);
/* raft_advance: the host persisted the log through (i, t); a leader counts itself from now on. */
void raft__self_persisted(struct raft *r, raft_index i, raft_term t);
void raft__rebuild_progress(struct raft *r);
bool raft__committed_in_term(struct raft *r);
void raft__abort_transfer(struct raft *r);
void raft__hup(struct raft *r, bool transfer);
int raft__step_role(struct raft *r, const struct raft_msg *m);
void raft__tick_impl(struct raft *r);
int raft__append_entries(struct raft *r, uint8_t type, const struct raft_buf *data, size_t n,
                         raft_index *first);

/* read_only.c */
int raft__read_reserve(struct raft *r, struct raft__outbox *o, size_t extra);
int raft__read_leader(struct raft *r, uint64_t context, raft_id from);
void raft__read_on_term_commit(struct raft *r);
void raft__read_on_ack(struct raft *r, raft_id from, uint64_t round);
void raft__read_fail_all(struct raft *r, int err);
void raft__read_fwd_resp(struct raft *r, const struct raft_msg *m);
void raft__read_tick(struct raft *r);
uint64_t raft__read_heartbeat_context(struct raft *r);
unsigned raft__lease_ticks(const struct raft *r);

/* conf.c */
bool raft__conf_has_voter(const struct raft_conf_state *cs, raft_id id);
bool raft__conf_has_learner(const struct raft_conf_state *cs, raft_id id);
int raft__conf_check(const struct raft_conf_state *cs, const struct raft_conf_change *cc);
int raft__conf_validate(const struct raft_conf_state *cs);

#endif /* SLOTD_RAFT_INT_H */
