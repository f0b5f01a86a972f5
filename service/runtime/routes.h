/* routes.h - the route table and health the loop publishes from its groups (routes.c). */
#ifndef SLOTD_RUNTIME_ROUTES_H
#define SLOTD_RUNTIME_ROUTES_H

#include "service/runtime/internal.h"

/* Publishes the route (leaders, observed replicas) from every group (loop thread). */
void rt_publish_route(struct runtime *rt);

#endif /* SLOTD_RUNTIME_ROUTES_H */
