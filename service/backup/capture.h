/* capture.h - one consistent backup read from this node's store: controller state + every slot
 * group. */
#ifndef SLOTD_BACKUP_CAPTURE_H
#define SLOTD_BACKUP_CAPTURE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "format.h"
#include "store/store.h"

/* Where the capture reads and who asks. */
struct backup_capture_source {
    struct store *store; /* borrowed: this node's store */
    uint64_t node_id;    /* this node, recorded as every group's source node */
    /* True when this node hosts a replica of group (any thread). */
    bool (*hosts_group)(void *arg, uint32_t group);
    void *hosts_arg;
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
    uint64_t rows, bytes;
};

/* Takes one fsm snapshot of src->store and writes through w (borrowed; fresh) the header, the
 * controller state stored at the snapshot (group 0's CTL_STATE record) and, for each slot group
 * of that state in id order, the rows of the hash slots the group owns at the snapshot (its
 * OWNED record) and the group's own records ([0xFFFF][group]...: applied index, owned, snapshot,
 * migration), read in chunks of BACKUP_ROWS_TARGET_BYTES, then the trailer. The header records
 * the state's cluster id, revision (as route revision) and hash-slot table, and per group the
 * applied index read from the same snapshot. Returns BACKUP_OK; BACKUP_EPRECONDITION when there
 * is no controller state here, a group has no replica here, or a group has applied nothing here
 * (err names it); BACKUP_ECORRUPT for a stored record that does not decode; BACKUP_EIO,
 * BACKUP_ENOMEM, BACKUP_ESTOP (the writer's output stopped or src->cancelled said so). err
 * (errlen may be 0) receives a sentence; *res (may be NULL) is filled in every case. */
int backup_capture_run(const struct backup_capture_source *src, struct backup_writer *w,
                       struct backup_capture_result *res, char *err, size_t errlen);

#endif
