/* bench_route.h - slotbench's view of slotd routing: libslotd's route reduced to a leader table. */
#ifndef SLOTD_BENCH_ROUTE_H
#define SLOTD_BENCH_ROUTE_H

#include "bench_opts.h"

#include <stddef.h>
#include <stdint.h>

#define BENCH_HASH_SLOTS 256
/* Distinct leader addresses one route may name; a snapshot with more is refused. */
#define BENCH_ROUTE_ADDRESSES_MAX 64
/* slot_leader[] value of a hash slot whose leader (or its address) is unknown. */
#define BENCH_ROUTE_NONE 0xffffu

/* A decoded slotd.v1.RouteSnapshotResponse reduced to "hash slot -> leader address". */
struct bench_route {
    uint64_t revision;                      /* route_revision of the snapshot */
    uint16_t slot_leader[BENCH_HASH_SLOTS]; /* index into addresses[], or BENCH_ROUTE_NONE */
    unsigned address_count;                 /* invariant: <= BENCH_ROUTE_ADDRESSES_MAX */
    char addresses[BENCH_ROUTE_ADDRESSES_MAX][BENCH_ENDPOINT_LEN_MAX + 1];
};

/*
 * r, buf, errmsg: borrowed for the call. Decodes a RouteSnapshotResponse with libslotd's
 * slotd__route_decode() into *r: for each hash slot the group of hash_slot_table, that group's
 * observed leader and the leader's address from nodes[]. A slot whose group is not listed, whose
 * leader is 0 or whose leader has no (or an empty) address gets BENCH_ROUTE_NONE. Returns
 * BENCH_OK, or BENCH_EMALFORMED with libslotd's sentence in errmsg when the bytes do not decode,
 * the table does not have 256 entries or a bound of libslotd is exceeded (an address longer than
 * 255 bytes, more than 64 nodes, hence never more than BENCH_ROUTE_ADDRESSES_MAX leaders).
 */
int bench_route_decode(struct bench_route *r, const uint8_t *buf, size_t len, char *errmsg,
                       size_t errmsg_len);

/*
 * r, key: borrowed for the call. The address of the leader of the key's group (hash slot from
 * libslotd's slotd_hash_slot()), or NULL when it is unknown. The string is r's (valid while r is).
 */
const char *bench_route_leader_address(const struct bench_route *r, const void *key, size_t len);

#endif /* SLOTD_BENCH_ROUTE_H */
