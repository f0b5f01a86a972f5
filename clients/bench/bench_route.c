/* bench_route.c - --route-aware's leader table, decoded by libslotd's route decode. */
#include "bench_route.h"

#include "bench_err.h"
#include "client_internal.h"

#include <stdio.h>
#include <string.h>

_Static_assert(BENCH_HASH_SLOTS == SLOTD_HASH_SLOTS, "one hash slot count");
_Static_assert(BENCH_ENDPOINT_LEN_MAX >= SLOTD_ADDRESS_LEN, "a route address fits an endpoint");
_Static_assert(BENCH_ROUTE_ADDRESSES_MAX >= SLOTD_CLIENT_NODES_MAX, "every node may lead");

/* Index of address in r->addresses, added when new. Never full: libslotd's decode bounds the
 * nodes of a route to SLOTD_CLIENT_NODES_MAX <= BENCH_ROUTE_ADDRESSES_MAX. */
static uint16_t route_address_index(struct bench_route *r, const char *address)
{
    for (unsigned i = 0; i < r->address_count; i++)
        if (strcmp(r->addresses[i], address) == 0)
            return (uint16_t)i;
    snprintf(r->addresses[r->address_count], sizeof(r->addresses[0]), "%s", address);
    return (uint16_t)r->address_count++;
}

int bench_route_decode(struct bench_route *r, const uint8_t *buf, size_t len, char *errmsg,
                       size_t errmsg_len)
{
    memset(r, 0, sizeof(*r));
    for (unsigned s = 0; s < BENCH_HASH_SLOTS; s++)
        r->slot_leader[s] = BENCH_ROUTE_NONE;
    struct slotd_route *route;
    if (slotd__route_decode(buf, len, &route, errmsg, errmsg_len) != SLOTD_CLIENT_OK)
        return BENCH_EMALFORMED;
    r->revision = route->revision;
    for (unsigned s = 0; s < BENCH_HASH_SLOTS; s++) {
        const struct slotd_route_group *g =
            slotd_route_group_find(route, route->hash_slot_table[s]);
        const char *address = g && g->leader ? slotd_route_node_address(route, g->leader) : NULL;
        if (address)
            r->slot_leader[s] = route_address_index(r, address);
    }
    slotd_route_destroy(route);
    return BENCH_OK;
}

const char *bench_route_leader_address(const struct bench_route *r, const void *key, size_t len)
{
    uint16_t index = r->slot_leader[slotd_hash_slot(key, len)];
    return index == BENCH_ROUTE_NONE ? NULL : r->addresses[index];
}
