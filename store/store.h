/* store.h - slotd's node storage: the raftlog and fsm LevelDB databases, or an in-memory twin. */
#ifndef SLOTD_STORE_H
#define SLOTD_STORE_H

/*
 * One struct store per node holds two ordered key-value databases: raftlog (entries, hard state,
 * conf state and snapshot metadata of every raft group) and fsm (the slot state machines' rows
 * plus each group's applied index). store_open() backs them with LevelDB under <dir>/raftlog and
 * <dir>/fsm; store_open_memory() backs them with in-memory ordered maps that have the same
 * semantics, for tests. The key and value encodings are in store/FORMAT.md and store/keys.h.
 *
 * This layer deals in integers and bytes only: it knows nothing of the raft core or protobuf.
 *
 * Batches (struct store_log_batch, struct store_fsm_batch) are built by one thread, then
 * written atomically: every put and delete of a batch becomes visible at once, in the order the
 * batch received them (a later op on the same key wins). A batch is not tied to a store until
 * it is written. Errors found while building a batch (an oversized key, a conf state with too
 * many members, an I/O error while scanning the store for a range delete, a batch larger than
 * STORE_BATCH_BYTES_MAX) are recorded in the batch: the first one is kept, later ops are
 * ignored, and store_log_write()/store_fsm_write() return it without writing anything. Clear
 * the batch to reuse it.
 *
 * Threads: store_log_write() and store_fsm_write() may run concurrently from two threads; reads
 * (store_log_load, store_log_iterate, store_log_groups, store_fsm_get, store_fsm_applied,
 * iterators, range-delete scans) may run from any thread at any time. A batch or an iterator is
 * used by one thread at a time. store_close() runs after every other call has returned and
 * every iterator is freed.
 *
 * Errors: every int-returning function returns STORE_OK (0) or a STORE_E* code. The store keeps
 * the message of its last failure as a sentence, read with store_errmsg().
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "store/err.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Bounds. A batch whose key+value bytes would exceed STORE_BATCH_BYTES_MAX records STORE_ELIMIT.
 * store_log_batch_delete_entries() spans at most STORE_LOG_DELETE_SPAN_MAX indexes per call. */
#define STORE_BATCH_BYTES_MAX ((size_t)512 << 20)
#define STORE_LOG_DELETE_SPAN_MAX ((uint64_t)1 << 24)
#define STORE_ERRMSG_MAX 256

struct store; /* one per node: raftlog + fsm */

struct store_options {
    size_t cache_bytes;        /* LevelDB block cache per db, default 64 MiB */
    size_t write_buffer_bytes; /* LevelDB write buffer per db, default 16 MiB */
};

/* o is borrowed for the call. */
void store_options_default(struct store_options *o);

/* Opens (creating if missing) <dir>, <dir>/raftlog and <dir>/fsm with LevelDB. dir, o (NULL =
 * defaults) and err are borrowed for the call; on failure err receives a sentence (errlen may
 * be 0). On success *out is the store: caller frees with store_close(). */
int store_open(const char *dir, const struct store_options *o, struct store **out, char *err,
               size_t errlen);

/* In-memory twin with identical semantics (ordered maps). Caller frees with store_close(). */
int store_open_memory(struct store **out);

/* Closes the databases and frees s. NULL is ok. */
void store_close(struct store *s);

/* The last failure of any call on s as a sentence ("" when none), e.g. "raftlog write: IO
 * error: ...". The store keeps its message under a mutex and this call copies it into a
 * buffer of the calling thread: the result stays valid and unchanged until the same thread
 * calls store_errmsg() again, whatever other threads do. s is borrowed for the call. */
const char *store_errmsg(const struct store *s);

/* ---- raftlog ---- */
struct store_hard_state {
    uint64_t term, vote, commit;
};

#define STORE_MEMBERS_MAX 16
struct store_conf_state {
    uint32_t n_voters, n_learners; /* invariant: each <= STORE_MEMBERS_MAX */
    uint64_t voters[STORE_MEMBERS_MAX], learners[STORE_MEMBERS_MAX];
};

struct store_snapshot_meta {
    uint64_t index, term;
    struct store_conf_state conf;
};

struct store_entry {
    uint64_t index, term;
    uint8_t type;
    const void *data; /* ownership stated where an entry is passed */
    size_t len;
};

struct store_log_batch; /* many groups, one write */

/* On success *out is an empty batch: caller frees with store_log_batch_free(). */
int store_log_batch_new(struct store_log_batch **out);
/* NULL is ok. */
void store_log_batch_free(struct store_log_batch *b);
/* Empties b, including a recorded error; keeps its buffers for reuse. */
void store_log_batch_clear(struct store_log_batch *b);
/* Key + value bytes of the ops in b. */
size_t store_log_batch_bytes(const struct store_log_batch *b);
/* Number of puts and deletes in b. */
size_t store_log_batch_count(const struct store_log_batch *b);
/* The error recorded while building b (STORE_OK when none). */
int store_log_batch_error(const struct store_log_batch *b);

/* All put/delete functions: b and the pointed-to arguments are borrowed for the call (the
 * batch copies what it needs). */
void store_log_batch_put_entry(struct store_log_batch *b, uint32_t group,
                               const struct store_entry *e);
void store_log_batch_put_hard_state(struct store_log_batch *b, uint32_t group,
                                    const struct store_hard_state *hs);
/* A conf state with more than STORE_MEMBERS_MAX voters or learners records STORE_EINVAL. */
void store_log_batch_put_conf_state(struct store_log_batch *b, uint32_t group,
                                    const struct store_conf_state *cs);
void store_log_batch_put_snapshot_meta(struct store_log_batch *b, uint32_t group,
                                       const struct store_snapshot_meta *m);
/* Deletes entries with index in [lo, hi) of group (one delete per index, whether stored or
 * not; hi <= lo is a no-op). A span over STORE_LOG_DELETE_SPAN_MAX records STORE_ELIMIT. */
void store_log_batch_delete_entries(struct store_log_batch *b, uint32_t group, uint64_t lo,
                                    uint64_t hi);
/* Deletes every raftlog key of the group that is stored in s now (group removed); keys the
 * batch itself adds are not seen. A failed scan records its error in b. s and b are borrowed. */
void store_log_batch_delete_group(struct store *s, struct store_log_batch *b, uint32_t group);
/* Writes b atomically, synced to disk when sync is true. b is unchanged (clear it to reuse).
 * Returns the batch's recorded error without writing, or STORE_EIO. */
int store_log_write(struct store *s, struct store_log_batch *b, bool sync);

/* What a node keeps of a replica it removed, in the raftlog keyspace of the group: the hard
 * state's term and vote (a replica created here again never votes twice in a term) and the last
 * log position it ever held (its vote floor: it never votes for a log that one would have
 * refused). */
struct store_tombstone {
    uint64_t term, vote, floor_index, floor_term;
};
/* Records t for group. Put it after store_log_batch_delete_group() in the same batch, which
 * deletes an older one. */
void store_log_batch_put_tombstone(struct store_log_batch *b, uint32_t group,
                                   const struct store_tombstone *t);
/* Reads group's tombstone into *out: STORE_ENOTFOUND when the group was never removed here,
 * STORE_ECORRUPT when the value does not decode. */
int store_log_load_tombstone(struct store *s, uint32_t group, struct store_tombstone *out);

/* What is durable for one group. */
struct store_group_state {
    struct store_hard_state hs;
    bool has_conf;
    struct store_conf_state conf;
    bool has_snapshot;
    struct store_snapshot_meta snapshot;
    uint64_t first_index, last_index; /* of stored entries; 0,0 when none */
};

/* Fills *out (borrowed for the call). STORE_ENOTFOUND if the group has no hard state;
 * STORE_ECORRUPT if a value does not decode. first_index/last_index are the lowest and highest
 * stored entry indexes; whether every index between them is stored is checked by
 * store_log_iterate(). */
int store_log_load(struct store *s, uint32_t group, struct store_group_state *out);

/* Calls cb for each stored entry of group with lo <= index < hi, in order. The entry's data is
 * borrowed for the callback. cb returns 0 to go on, non-zero to stop (returned as-is). Two
 * visited entries whose indexes are not consecutive are a gap: STORE_ECORRUPT naming group and
 * index (the first visited entry may be above lo: compare lo with first_index from
 * store_log_load()). Reads with fill_cache off (LevelDB), for large replays. */
typedef int (*store_entry_cb)(void *arg, const struct store_entry *e);
int store_log_iterate(struct store *s, uint32_t group, uint64_t lo, uint64_t hi, store_entry_cb cb,
                      void *arg);

/* Group ids that have a hard state, ascending. On success *groups (NULL when *n == 0): caller
 * frees with free(). */
int store_log_groups(struct store *s, uint32_t **groups, size_t *n);

/* ---- fsm ---- */
struct store_fsm_batch;

/* On success *out is an empty batch: caller frees with store_fsm_batch_free(). */
int store_fsm_batch_new(struct store_fsm_batch **out);
/* NULL is ok. */
void store_fsm_batch_free(struct store_fsm_batch *b);
/* Empties b, including a recorded error. */
void store_fsm_batch_clear(struct store_fsm_batch *b);
/* Key + value bytes of the ops in b. */
size_t store_fsm_batch_bytes(const struct store_fsm_batch *b);
/* Number of puts and deletes in b. */
size_t store_fsm_batch_count(const struct store_fsm_batch *b);
/* The error recorded while building b (STORE_OK when none). */
int store_fsm_batch_error(const struct store_fsm_batch *b);

/* k and v are borrowed for the call (copied). A key of 0 or more than STORE_FSM_KEY_MAX bytes
 * records STORE_EINVAL. */
void store_fsm_batch_put(struct store_fsm_batch *b, const void *k, size_t kl, const void *v,
                         size_t vl);
void store_fsm_batch_delete(struct store_fsm_batch *b, const void *k, size_t kl);
/* Adds deletes for every key currently stored in [lo, hi) (hi NULL = to the end; keys the
 * batch itself adds are not seen), in key order. Bounded by max_keys: when more than max_keys
 * keys are stored in the range, adds deletes for the first max_keys of them and returns
 * STORE_ELIMIT: write the batch and call again to continue (callers that need one atomic
 * batch treat it as an error and clear the batch). On STORE_EIO/STORE_ENOMEM nothing is
 * added; a batch that already holds an error returns it. Pointers are borrowed for the call. */
int store_fsm_batch_delete_range(struct store *s, struct store_fsm_batch *b, const void *lo,
                                 size_t lol, const void *hi, size_t hil, size_t max_keys);
/* Puts the group's applied index ([0xFFFF][group] -> [1][index u64]). */
void store_fsm_batch_set_applied(struct store_fsm_batch *b, uint32_t group, uint64_t index);
/* Writes b atomically (sync as for store_log_write). b is unchanged (clear it to reuse). */
int store_fsm_write(struct store *s, struct store_fsm_batch *b, bool sync);

/* STORE_ENOTFOUND if absent, STORE_EINVAL if kl is 0 or over STORE_FSM_KEY_MAX. On success
 * *val is malloc'ed (non-NULL even when *vl is 0): caller frees with free(). */
int store_fsm_get(struct store *s, const void *k, size_t kl, void **val, size_t *vl);
/* *index = the group's applied index, 0 when never written. STORE_ECORRUPT on a bad value. */
int store_fsm_applied(struct store *s, uint32_t group, uint64_t *index);

/* Forward iterator over [lo, hi) (lo NULL = from the start, hi NULL = to the end) on a
 * consistent snapshot of the fsm: writes after store_fsm_iter_new() are not seen. On success
 * *out is positioned at the first key: caller frees with store_iter_free() before store_close().
 * The memory twin copies the range when the iterator is created. */
struct store_iter;
int store_fsm_iter_new(struct store *s, const void *lo, size_t lol, const void *hi, size_t hil,
                       struct store_iter **out);
bool store_iter_valid(const struct store_iter *it);
/* Requires store_iter_valid(it). */
void store_iter_next(struct store_iter *it);
/* Require store_iter_valid(it). Borrowed until the next store_iter_next()/store_iter_free(). */
const void *store_iter_key(const struct store_iter *it, size_t *len);
const void *store_iter_value(const struct store_iter *it, size_t *len);
/* STORE_OK, or STORE_EIO once the iterator stopped on a read error (message in store_errmsg). */
int store_iter_status(const struct store_iter *it);
/* NULL is ok. */
void store_iter_free(struct store_iter *it);

/* Called once per row in key order; k and v borrowed for the call. Non-zero stops the scan and
 * is returned as-is, except that STORE_SCAN_STOP stops store_fsm_scan() with STORE_OK. */
typedef int (*store_row_cb)(void *arg, const void *k, size_t kl, const void *v, size_t vl);
#define STORE_SCAN_STOP (-1)
/* Visits the rows of [lo, hi) (as store_fsm_iter_new) with cb until it stops or the rows end.
 * Returns cb's error, the iterator's error, or STORE_OK. */
int store_fsm_scan(struct store *s, const void *lo, size_t lol, const void *hi, size_t hil,
                   store_row_cb cb, void *ctx);

/* ---- fsm snapshots, read in bounded chunks (snap.c) ----
 * A point-in-time view of the whole fsm database: every read through it sees the fsm as it was
 * when store_fsm_snap_new() ran, whatever is written later. On LevelDB it is a LevelDB snapshot
 * (taking it costs about what one write costs; it pins old versions until freed); the memory twin
 * copies the whole fsm at creation (tests only). A snapshot counts as an open iterator: free it
 * before store_close(). Any thread; one snapshot used by one thread at a time. */
struct store_fsm_snap;
/* On success *out: caller frees with store_fsm_snap_free(). */
int store_fsm_snap_new(struct store *s, struct store_fsm_snap **out);
/* NULL is ok. */
void store_fsm_snap_free(struct store_fsm_snap *sn);
/* As store_fsm_get(), at the snapshot. */
int store_fsm_snap_get(struct store_fsm_snap *sn, const void *k, size_t kl, void **val, size_t *vl);
/* As store_fsm_applied(), at the snapshot. */
int store_fsm_snap_applied(struct store_fsm_snap *sn, uint32_t group, uint64_t *index);

/* Where a chunked scan of [lo, hi) stands; plain data, no resources (set it up with
 * store_fsm_snap_cursor_init). */
#define STORE_FSM_SNAP_KEY_MAX 1103 /* = STORE_FSM_KEY_MAX of store/keys.h */
struct store_fsm_snap_cursor {
    uint8_t lo[STORE_FSM_SNAP_KEY_MAX], hi[STORE_FSM_SNAP_KEY_MAX], last[STORE_FSM_SNAP_KEY_MAX];
    size_t lol, hil, last_len; /* last_len 0: nothing read yet */
    bool has_hi;
    bool done; /* the range is read to its end */
};
/* lo NULL = from the start, hi NULL = to the end; keys of at most STORE_FSM_KEY_MAX bytes
 * (STORE_EINVAL otherwise). Pointers borrowed for the call. */
int store_fsm_snap_cursor_init(struct store_fsm_snap_cursor *c, const void *lo, size_t lol,
                               const void *hi, size_t hil);
/* Reads the next chunk of c's range at the snapshot: rows in key order until their key + value
 * bytes reach max_bytes (at least one row when any is left) or the range ends (then c->done).
 * Holds no LevelDB iterator between calls: each chunk opens one on the snapshot and closes it.
 * STORE_OK, STORE_EIO (read error, checksums verified), STORE_ECORRUPT or cb's non-zero value. */
int store_fsm_snap_scan(struct store_fsm_snap *sn, struct store_fsm_snap_cursor *c,
                        size_t max_bytes, store_row_cb cb, void *arg);

#ifdef __cplusplus
}
#endif
#endif
