/* peer.h - raft messages out and in, group status, snapshot transfers (peer.c). */
#ifndef SLOTD_RUNTIME_PEER_H
#define SLOTD_RUNTIME_PEER_H

#include "service/runtime/internal.h"

/* peer.c: true when a hosted group other than `group` owns hash slot s or is receiving it (their
 * rows are shared on this node). Apply stage, or the loop with no apply job running or queued and
 * no install staged (rt_group_close_removed). */
bool rt_slot_claimed_elsewhere(struct runtime *rt, uint32_t group, uint16_t s);
void rt_group_close_removed(struct runtime *rt, struct rt_group *g);
/* Sends rd->msgs[from .. to) through the transport (queued until transport_flush). */
void rt_send_msgs(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd, size_t from,
                  size_t to);
void rt_handle_peer_request(struct runtime *rt, struct rt_request *r);
void rt_poll_peers(struct runtime *rt);
/* Loop thread, every tick: drops leaders of groups hosted elsewhere not confirmed first-hand
 * for two election timeouts, so calls get NO_LEADER instead of waiting on a dead node. */
void rt_expire_leaders(struct runtime *rt, int64_t now);
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

#endif /* SLOTD_RUNTIME_PEER_H */
