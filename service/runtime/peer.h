/* peer.h - raft messages out and in, group status, removed replicas (peer.c). */
#ifndef SLOTD_RUNTIME_PEER_H
#define SLOTD_RUNTIME_PEER_H

#include "service/runtime/internal.h"

void rt_group_close_removed(struct runtime *rt, struct rt_group *g);
/* Sends rd->msgs[from .. to) through the transport (queued until transport_flush); a snapshot
 * message starts a transfer (snapshot.c). */
void rt_send_msgs(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd, size_t from,
                  size_t to);
void rt_handle_peer_request(struct runtime *rt, struct rt_request *r);
void rt_poll_peers(struct runtime *rt);
/* Loop thread, every tick: drops leaders of groups hosted elsewhere not confirmed first-hand
 * for two election timeouts, so calls get NO_LEADER instead of waiting on a dead node. */
void rt_expire_leaders(struct runtime *rt, int64_t now);

#endif /* SLOTD_RUNTIME_PEER_H */
