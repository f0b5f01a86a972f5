/* wire.h - the one raft <-> protobuf adapter (wire.c). */
#ifndef SLOTD_RUNTIME_WIRE_H
#define SLOTD_RUNTIME_WIRE_H

#include "service/runtime/internal.h"

void rt_wire_conf_to_pb(const struct raft_conf_state *cs, Slotd__Internal__V1__ConfState *pb,
                        uint64_t *voters, uint64_t *learners);
int rt_wire_conf_from_pb(const Slotd__Internal__V1__ConfState *pb, struct raft_conf_state *cs);
int rt_wire_msg_to_pb(uint32_t group, const struct raft_msg *m,
                      Slotd__Internal__V1__RaftMessage *pb, struct rt_wire_scratch *scratch);
void rt_wire_scratch_free(struct rt_wire_scratch *scratch);
int rt_wire_msg_from_pb(const Slotd__Internal__V1__RaftMessage *pb, struct raft_msg *m);

#endif /* SLOTD_RUNTIME_WIRE_H */
