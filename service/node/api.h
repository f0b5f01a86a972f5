/* api.h - the slotd.v1.Metadata handlers (decode, validate, route, forward or submit), the
 * slotd.v1.Admin handlers and the slotd.internal.v1.Peer handlers. */
#ifndef SLOTD_NODE_API_H
#define SLOTD_NODE_API_H

#include "service/route/route.h"
#include "service/rpc/rpc.h"
#include "service/runtime/runtime.h"
#include "service/transport/transport.h"

/* Times a forwarded request follows a NOT_LEADER hint to a newer leader. */
#define NODE_FORWARD_HOPS_MAX 3

struct node_api {
    struct runtime *rt;          /* borrowed */
    struct route_table *routes;  /* borrowed */
    struct transport *transport; /* borrowed; NULL on a single node */
    uint64_t node_id;
};

/* Registers slotd.v1.Metadata and slotd.internal.v1.Peer on s (before
 * rpc_server_start). api is borrowed for the server's lifetime. */
int node_api_register(struct node_api *api, struct rpc_server *s);
/* Registers slotd.v1.Admin (admin.c); node_api_register calls it. */
int node_admin_register(struct node_api *api, struct rpc_server *s);
/* Answers slotd.v1.Metadata/TaskStatus from the cluster state this node holds (admin.c). */
void node_admin_task_status(struct node_api *api, struct rpc_call *call, uint64_t task_id,
                            bool active_only);

#endif /* SLOTD_NODE_API_H */
