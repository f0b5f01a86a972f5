/* api.h - the slotd.v1.Metadata handlers: decode, validate, route, hand to the runtime. */
#ifndef SLOTD_NODE_API_H
#define SLOTD_NODE_API_H

#include "service/route/route.h"
#include "service/rpc/rpc.h"
#include "service/runtime/runtime.h"

struct node_api {
    struct runtime *rt;          /* borrowed */
    struct route_table *routes;  /* borrowed */
};

/* Registers slotd.v1.Metadata on s (before rpc_server_start). api is
 * borrowed for the server's lifetime. */
int node_api_register(struct node_api *api, struct rpc_server *s);

#endif /* SLOTD_NODE_API_H */
