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

/* A read of the cluster state held until this node serves min_revision or later (read your
 * admin writes on any node). The fields are the decoded request's, copied. */
struct node_gated {
    struct node_api *api;
    struct rpc_call *call;
    uint64_t min_revision;
    void (*answer)(const struct node_gated *g); /* answers g->call from the state held */
    uint64_t task_id;                           /* TaskStatus */
    bool active_only;                           /* TaskStatus */
    uint64_t known_revision;                    /* ClusterState */
    char known_checksum[72];                    /* ClusterState */
};
/* g: copied. Answers now when min_revision is 0 or reached; else holds the call (at most
 * RUNTIME_CTL_WAIT_MS, on a heap copy) and answers it from the loop thread when the state gets
 * there, or fails it UNAVAILABLE (ROUTE_NOT_READY, field min_revision) naming the revision
 * reached. A full wait list fails it RESOURCE_EXHAUSTED. */
void node_gate(const struct node_gated *g);

#endif /* SLOTD_NODE_API_H */
