/* snapshot.h - snapshot transfers: sending, receiving (spooled), installing (snapshot.c). */
#ifndef SLOTD_RUNTIME_SNAPSHOT_H
#define SLOTD_RUNTIME_SNAPSHOT_H

#include "service/runtime/internal.h"

/* true when a hosted group other than `group` owns hash slot s or is receiving it (their
 * rows are shared on this node). Apply stage, or the loop with no apply job running or queued and
 * no install staged (rt_group_close_removed). */
bool rt_slot_claimed_elsewhere(struct runtime *rt, uint32_t group, uint16_t s);
/* The hash slots whose rows a snapshot carries: owned ones, and those receiving a migration. */
void rt_snap_slots(const struct slot_group_state *gs, uint8_t out[32]);
/* Clears from slots (a bitmap) every hash slot another hosted group claims: for a snapshot the
 * ones it yields to another group, else those rt_slot_claimed_elsewhere names. */
void rt_snap_drop_claimed(struct runtime *rt, const struct rt_group *g, uint8_t slots[32],
                          bool for_snapshot);
/* Adds to b the deletion of every row of the hash slots set in owned. 0 or a store error. */
int rt_snap_delete_owned(struct runtime *rt, struct store_fsm_batch *b, const uint8_t owned[32]);
/* Loop (rt_send_msgs): raft asks for a snapshot to m->to; queues its capture on the apply
 * stage, or reports it failed to raft (too many transfers, no memory). */
void rt_snap_start(struct runtime *rt, struct rt_group *g, const struct raft_msg *m);
/* Loop: a Peer/Snapshot chunk received (RT_SNAP_CHUNK); staged or spooled, acked on r's call. */
void rt_snap_recv_chunk(struct runtime *rt, struct rt_request *r);
/* Loop: the peer's answer to a chunk of transfer_id (RT_SNAP_SENT); sends the next or ends it. */
void rt_snap_chunk_sent(struct runtime *rt, uint64_t transfer_id, bool ok);
void rt_snap_captured(struct runtime *rt, struct rt_snap_send *send);
void rt_snap_install_ready(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd);
void rt_snap_free_all(struct runtime *rt);
void rt_snap_kick(struct runtime *rt);
/* Loop, on every tick: discards (frees, logs) each staged receive that has had no chunk for
 * opts.snap_recv_idle_ms, so its group is no longer busy; a later chunk of it is out of order. */
void rt_snap_recv_expire(struct runtime *rt, int64_t now);
/* Drops rcv (its buffer; its spool file is closed and deleted). Loop thread. */
void rt_snap_recv_discard(struct rt_snap_recv *rcv);
/* Startup, before any data group opens: creates <data dir>/snap-recv and deletes the .part
 * files left there. 0, or -1 with err set. */
int rt_snap_spool_init(struct runtime *rt, char *err, size_t errlen);
/* Opening data group g (before its fsm state is loaded): when an install of a spooled snapshot
 * was interrupted (its in-progress row is stored), runs it again from the .snap file; deletes
 * the group's other .snap files. 0, or -1 with err naming the group and file (the node must not
 * serve the group: its rows are half installed). */
int rt_snap_install_resume(struct runtime *rt, struct rt_group *g, char *err, size_t errlen);
/* Apply stage: captures the rows of each send (after the job's entries). */
int rt_snap_capture_rows(struct runtime *rt, struct rt_snap_send *send);
/* Storage stage (storage_work, before the raftlog batch), with no apply job running or queued:
 * installs the rows and sets g's fsm_state and apply position. */
int rt_snap_install_rows(struct runtime *rt, struct rt_group *g, struct rt_snap_install *in);

#endif /* SLOTD_RUNTIME_SNAPSHOT_H */
