/* capture.h - one consistent backup read from this node's store: controller state + every slot
 * group. */
#ifndef SLOTD_BACKUP_CAPTURE_H
#define SLOTD_BACKUP_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "store/store.h"

/* One group's part of a backup read from an fsm snapshot in pages: the rows of the hash slots the
 * group owns at the snapshot (its OWNED record), slot by slot, then the group's own records
 * ([0xFFFF][group]...). Plain data: set it up with backup_group_reader_init, nothing to free. */
struct backup_group_reader {
    struct store_fsm_snap *snap; /* borrowed */
    uint32_t group;
    uint8_t owned[32];
    unsigned slot; /* the range being read: a hash slot, BACKUP_HASH_SLOTS = the own records */
    bool in_range; /* cur is set up for slot */
    bool done;     /* every row was passed on */
    struct store_fsm_snap_cursor cur;
};

/* Sets r up to read group from snap (borrowed; must outlive r's use). BACKUP_OK;
 * BACKUP_ECORRUPT when the OWNED record does not decode, BACKUP_EIO; err names the cause. */
int backup_group_reader_init(struct backup_group_reader *r, struct store_fsm_snap *snap,
                             uint32_t group, char *err, size_t errlen);
/* Passes the next rows to cb in key order until their key + value bytes reach max_bytes (at
 * least one row when any is left) or the part ends (then r->done). STORE_OK, a STORE_* read
 * error, or cb's non-zero value as-is. */
int backup_group_reader_next(struct backup_group_reader *r, size_t max_bytes, store_row_cb cb,
                             void *arg);

/* The order in which a capture tries the replicas of a group (peers: its n desired peers, out:
 * room for n): the followers first, this node (self) first among them, then the leader; with
 * leader 0 (unknown) self first, then the others in order. Returns n. Pure. */
size_t backup_source_order(const uint64_t *peers, size_t n, uint64_t self, uint64_t leader,
                           uint64_t *out);

/* Where the capture reads and who asks. */
struct backup_capture_source {
    struct store *store; /* borrowed: this node's store */
    uint64_t node_id;    /* this node */
    /* True when this node hosts a replica of group (any thread). */
    bool (*hosts_group)(void *arg, uint32_t group);
    void *hosts_arg;
    /* Reading another node's replicas (Peer/BackupOpen, BackupRead, BackupClose). All NULL: a
     * group is read only here, and one this node has no replica of fails the capture.
     * group_leader: the group's leader as this node's route knows it, 0 if unknown.
     * remote_open: opens a session on node for the n groups (applied[i] receives group i's
     * applied index there, 0 = not readable there); BACKUP_OK or an error with err filled.
     * remote_read: the next page (page 0 first) of group from the session: each row to cb
     * (cb's non-zero value stops and is returned as BACKUP_ESTOP), *done with the last page.
     * remote_close: frees the session there (best effort). */
    uint64_t (*group_leader)(void *arg, uint32_t group);
    int (*remote_open)(void *arg, uint64_t node, const uint32_t *groups, size_t n,
                       uint64_t *session, uint64_t *applied, char *err, size_t errlen);
    int (*remote_read)(void *arg, uint64_t node, uint64_t session, uint32_t group, uint32_t page,
                       store_row_cb cb, void *cb_arg, bool *done, char *err, size_t errlen);
    void (*remote_close)(void *arg, uint64_t node, uint64_t session);
    void *remote_arg;
    /* Called after each group's GROUP_END record (done of total); optional. */
    void (*progress)(void *arg, uint32_t groups_done, uint32_t groups_total);
    void *progress_arg;
    /* Polled between chunks: true stops the capture with BACKUP_ESTOP; optional. */
    bool (*cancelled)(void *arg);
    void *cancelled_arg;
};

/* What one capture did, for logs and the caller. */
struct backup_capture_result {
    uint64_t snapshot_us; /* time taken by store_fsm_snap_new (the only moment writes contend) */
    uint32_t groups;
    uint32_t groups_remote; /* of groups: read from another node's replica */
    uint64_t rows, bytes;
};

/* Takes one fsm snapshot of src->store and writes through w (borrowed; fresh) the header, the
 * controller state stored at the snapshot (group 0's CTL_STATE record) and, for each slot group
 * of that state in id order, the group's part (struct backup_group_reader) read in chunks of
 * BACKUP_ROWS_TARGET_BYTES, then the trailer. Each group is read from one replica, tried in
 * backup_source_order over its desired peers: here from the same snapshot, elsewhere through
 * one session per node opened (remote_open) before the header is written; the header records
 * the state's cluster id, revision (as route revision) and hash-slot table, and per group the
 * replica's node and its applied index in the snapshot it was read from. Sessions are closed
 * on every path. Returns BACKUP_OK; BACKUP_EPRECONDITION when there is no controller state here
 * or no replica of a group could be read (err names the group, the nodes tried and the last
 * reason); BACKUP_ECORRUPT for a stored record that does not decode; BACKUP_EIO (also a failed
 * remote page), BACKUP_ENOMEM, BACKUP_ESTOP (the writer's output stopped or src->cancelled said
 * so). err (errlen may be 0) receives a sentence; *res (may be NULL) is filled in every case. */
int backup_capture_run(const struct backup_capture_source *src, struct backup_writer *w,
                       struct backup_capture_result *res, char *err, size_t errlen);

#endif
