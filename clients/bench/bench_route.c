/* bench_route.c - CRC-32 hash slots and RouteSnapshotResponse decoding for --route-aware. */
#include "bench_route.h"

#include "bench_err.h"
#include "slotd/v1/metadata.pb-c.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include <zlib.h>

uint32_t bench_route_crc32(const void *data, size_t len)
{
    /* zlib's crc32(); an empty buffer is CRC 0 (zlib would answer its initial value for NULL) */
    return len == 0 ? 0u : (uint32_t)crc32(0L, data, (uInt)len);
}

unsigned bench_route_hash_slot(const void *key, size_t len)
{
    return bench_route_crc32(key, len) % BENCH_HASH_SLOTS;
}

static int route_fail(char *errmsg, size_t errmsg_len, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int route_fail(char *errmsg, size_t errmsg_len, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, errmsg_len, fmt, ap);
    va_end(ap);
    return BENCH_EMALFORMED;
}

/* The leader's address of group id in m, or NULL when the group or its leader is unknown. */
static const char *route_group_leader(const Slotd__V1__RouteSnapshotResponse *m, uint32_t id)
{
    uint64_t leader = 0;
    for (size_t i = 0; i < m->n_groups && leader == 0; i++)
        if (m->groups[i]->group_id == id)
            leader = m->groups[i]->leader;
    if (leader == 0)
        return NULL;
    for (size_t i = 0; i < m->n_nodes; i++)
        if (m->nodes[i]->node_id == leader)
            return m->nodes[i]->address[0] ? m->nodes[i]->address : NULL;
    return NULL;
}

/* Index of address in r->addresses, added when new; -1 when r is full. */
static int route_address_index(struct bench_route *r, const char *address)
{
    for (unsigned i = 0; i < r->address_count; i++)
        if (strcmp(r->addresses[i], address) == 0)
            return (int)i;
    if (r->address_count == BENCH_ROUTE_ADDRESSES_MAX)
        return -1;
    snprintf(r->addresses[r->address_count], sizeof(r->addresses[0]), "%s", address);
    return (int)r->address_count++;
}

static int route_fill(struct bench_route *r, const Slotd__V1__RouteSnapshotResponse *m,
                      char *errmsg, size_t errmsg_len)
{
    if (m->n_hash_slot_table != BENCH_HASH_SLOTS)
        return route_fail(errmsg, errmsg_len,
                          "route snapshot: hash_slot_table has %zu entries, expected %d",
                          m->n_hash_slot_table, BENCH_HASH_SLOTS);
    r->revision = m->route_revision;
    for (unsigned s = 0; s < BENCH_HASH_SLOTS; s++) {
        const char *address = route_group_leader(m, m->hash_slot_table[s]);
        r->slot_leader[s] = BENCH_ROUTE_NONE;
        if (!address)
            continue;
        if (strlen(address) > BENCH_ENDPOINT_LEN_MAX)
            return route_fail(errmsg, errmsg_len,
                              "route snapshot: hash slot %u: leader address longer than %d bytes",
                              s, BENCH_ENDPOINT_LEN_MAX);
        int index = route_address_index(r, address);
        if (index < 0)
            return route_fail(errmsg, errmsg_len,
                              "route snapshot: more than %d distinct leader addresses",
                              BENCH_ROUTE_ADDRESSES_MAX);
        r->slot_leader[s] = (uint16_t)index;
    }
    return BENCH_OK;
}

int bench_route_decode(struct bench_route *r, const uint8_t *buf, size_t len, char *errmsg,
                       size_t errmsg_len)
{
    memset(r, 0, sizeof(*r));
    for (unsigned s = 0; s < BENCH_HASH_SLOTS; s++)
        r->slot_leader[s] = BENCH_ROUTE_NONE;
    Slotd__V1__RouteSnapshotResponse *m =
        slotd__v1__route_snapshot_response__unpack(NULL, len, buf);
    if (!m)
        return route_fail(errmsg, errmsg_len,
                          "route snapshot: %zu bytes do not decode as RouteSnapshotResponse", len);
    int rc = route_fill(r, m, errmsg, errmsg_len);
    slotd__v1__route_snapshot_response__free_unpacked(m, NULL);
    if (rc != BENCH_OK) {
        r->address_count = 0;
        for (unsigned s = 0; s < BENCH_HASH_SLOTS; s++)
            r->slot_leader[s] = BENCH_ROUTE_NONE;
    }
    return rc;
}

const char *bench_route_leader_address(const struct bench_route *r, const void *key, size_t len)
{
    uint16_t index = r->slot_leader[bench_route_hash_slot(key, len)];
    return index == BENCH_ROUTE_NONE ? NULL : r->addresses[index];
}
