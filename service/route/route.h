/* route.h - keys to hash slots to slot groups: CRC-32, the hash-slot table and route snapshots. */
#ifndef SLOTD_ROUTE_H
#define SLOTD_ROUTE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errlist.h"

#define ROUTE_HASH_SLOTS 256
#define ROUTE_MEMBERS_MAX 16
#define ROUTE_GROUPS_MAX 4096 /* bound on route_snapshot_new's n_groups */
#define ROUTE_NODES_MAX 4096  /* bound on route_snapshot_new's n_nodes */

/* X(name, value, message) */
#define ROUTE_ERRORS(X)                                                                            \
    X(ROUTE_OK, 0, "ok")                                                                           \
    X(ROUTE_EINVALID, 1, "invalid argument")                                                       \
    X(ROUTE_ENOMEM, 2, "out of memory")                                                            \
    X(ROUTE_ENOT_READY, 3, "route not ready")                                                      \
    X(ROUTE_ENO_LEADER, 4, "no leader")

enum route_err { ROUTE_ERRORS(SLOTD_ERRLIST_ENUM) };

/* Static message for a route_err ("unknown error" for other values). */
const char *route_strerror(int err);

/* CRC-32/IEEE (reflected polynomial 0xEDB88320), the same value as zlib's crc32(0, data, len).
 * data is borrowed for the call; NULL is allowed when len is 0. */
uint32_t route_crc32(const void *data, size_t len);

/* Continues a CRC-32/IEEE over more bytes, like zlib's crc32(crc, data, len): start from 0, and
 * route_crc32_update(route_crc32_update(0, a, n), b, m) is the CRC of a followed by b.
 * data is borrowed for the call; NULL is allowed when len is 0. */
uint32_t route_crc32_update(uint32_t crc, const void *data, size_t len);

/* route_crc32(key) % ROUTE_HASH_SLOTS. key is borrowed for the call. */
uint16_t route_hash_slot(const void *key, size_t len);

/* Splits the 256 hash slots into contiguous ranges over groups 1..n_groups, in order: group g owns
 * a run of 256 / n_groups slots, and the first 256 % n_groups groups own one extra slot.
 * slot_group is borrowed for the call. Returns ROUTE_EINVALID unless 1 <= n_groups <= 256. */
int route_split_ranges(unsigned n_groups, uint32_t slot_group[ROUTE_HASH_SLOTS]);

struct route_range {
    uint16_t first, last; /* inclusive; first <= last */
};

/* Writes the contiguous runs of hash slots that slot_group assigns to group, in ascending order,
 * into out[0..max) and returns how many runs there are in total (which may exceed max, like
 * snprintf; out may be NULL when max is 0). slot_group and out are borrowed for the call. */
size_t route_ranges_of(const uint32_t slot_group[ROUTE_HASH_SLOTS], uint32_t group,
                       struct route_range *out, size_t max);

enum route_role { ROUTE_ROLE_NONE = 0, ROUTE_ROLE_VOTER = 1, ROUTE_ROLE_LEARNER = 2 };

/* What one replica last said about itself. */
struct route_replica {
    uint64_t node;
    uint8_t role; /* enum route_role, in the replica's own configuration */
    uint64_t leader, term, commit, applied;
    int64_t heard_ms; /* CLOCK_MONOTONIC ms when it was heard (encode reports the age) */
};

struct route_group {
    uint32_t id; /* >= 1 */
    /* observed configuration (the intent until a replica reports); invariant: each count
     * <= ROUTE_MEMBERS_MAX, as for every array below */
    uint32_t n_voters, n_learners;
    uint64_t voters[ROUTE_MEMBERS_MAX], learners[ROUTE_MEMBERS_MAX];
    uint64_t config_epoch, preferred_leader; /* controller intent */
    uint64_t leader, leader_term;            /* observed fact; leader 0 = unknown */
    uint64_t silent_term; /* leader 0: the term whose leader this node stopped trusting (it
                           * went silent or could not be reached), 0 = none; not encoded */
    uint32_t n_intended_voters, n_intended_learners; /* controller intent */
    uint64_t intended_voters[ROUTE_MEMBERS_MAX], intended_learners[ROUTE_MEMBERS_MAX];
    uint32_t n_replicas;
    struct route_replica replicas[ROUTE_MEMBERS_MAX]; /* sorted by node */
};

struct route_node {
    uint64_t id;
    char address[128]; /* NUL-terminated "host:port" */
};

/* One version of the route. Built unpublished by one thread, then handed to route_table_publish,
 * after which it is immutable and shared by reference count. */
struct route_snapshot {
    uint64_t revision; /* controller revision the route was built from */
    bool table_ready;  /* false: no hash-slot table yet, every lookup is ROUTE_ENOT_READY */
    uint32_t slot_group[ROUTE_HASH_SLOTS]; /* 0 = no group */
    size_t n_groups;
    struct route_group *groups; /* invariant: sorted by id, ids unique */
    size_t n_nodes;
    struct route_node *nodes; /* invariant: sorted by id, ids unique */
    /* private */
    atomic_size_t refs__;
    bool published__;
};

/* Allocates an unpublished snapshot with n_groups zeroed groups and n_nodes zeroed nodes (fill
 * them in ascending id order) and revision 0, table not ready. Returns ROUTE_EINVALID when a count
 * exceeds ROUTE_GROUPS_MAX / ROUTE_NODES_MAX, ROUTE_ENOMEM. *out: caller frees with
 * route_snapshot_release() or hands it to route_table_publish(). */
int route_snapshot_new(size_t n_groups, size_t n_nodes, struct route_snapshot **out);

/* Unpublished deep copy of s (borrowed for the call) to edit into the next version. *out: caller
 * frees with route_snapshot_release() or hands it to route_table_publish(). */
int route_snapshot_clone(const struct route_snapshot *s, struct route_snapshot **out);

/* ROUTE_OK when s (borrowed for the call) keeps its invariants: groups and nodes sorted by
 * strictly increasing id, group ids >= 1, member counts <= ROUTE_MEMBERS_MAX, node addresses
 * NUL-terminated. ROUTE_EINVALID otherwise. */
int route_snapshot_validate(const struct route_snapshot *s);

/* Group with this id in an UNPUBLISHED snapshot (asserted), NULL if absent. Binary search: the
 * group ids must already be sorted. The result is borrowed from s. */
struct route_group *route_snapshot_group_mut(struct route_snapshot *s, uint32_t id);

/* Group / node with this id, NULL if absent (binary search). Borrowed from s. */
const struct route_group *route_snapshot_group(const struct route_snapshot *s, uint32_t id);
const struct route_node *route_snapshot_node(const struct route_snapshot *s, uint64_t id);

/* Resolves key (borrowed for the call) on s. Sets *hash_slot always and *group (borrowed from s)
 * when the group exists. Returns ROUTE_OK, ROUTE_ENOT_READY (s NULL, table not ready, hash slot
 * unassigned or group missing; *group = NULL) or ROUTE_ENO_LEADER (group found, leader unknown). */
int route_snapshot_lookup(const struct route_snapshot *s, const void *key, size_t len,
                          uint16_t *hash_slot, const struct route_group **group);

/* Drops one reference; the last one frees s. NULL is a no-op. */
void route_snapshot_release(struct route_snapshot *s);

/* Encodes s (borrowed for the call) as a serialized slotd.v1.RouteSnapshotResponse: revision, the
 * 256-entry table (all zeros when the table is not ready), groups and nodes. *buf: caller frees
 * with free(). Returns ROUTE_ENOMEM on allocation failure. */
int route_snapshot_encode(const struct route_snapshot *s, uint8_t **buf, size_t *len);

/* The holder of the current snapshot. One thread publishes; any thread acquires.
 *
 * Reclamation: acquire takes a mutex held only for "load pointer + increment its refcount", and
 * publish holds it only for the pointer swap. The old snapshot is released (refcount decremented)
 * after the swap, outside the lock, so a snapshot is freed only once no table points to it and no
 * reader holds a reference: a reader can never increment the count of a freed snapshot because
 * the increment happens under the same lock that guards the swap. Neither side ever waits for the
 * other's work (no allocation, no free, no I/O happens under the lock). */
struct route_table;

/* *out: caller frees with route_table_free(). Returns ROUTE_ENOMEM. */
int route_table_new(struct route_table **out);

/* Releases the current snapshot and frees t. Every acquired snapshot stays valid until released. */
void route_table_free(struct route_table *t);

/* Makes s the current snapshot; ownership transfers (always). s must be unpublished and valid
 * (asserted with route_snapshot_validate()). */
void route_table_publish(struct route_table *t, struct route_snapshot *s);

/* The current snapshot with one reference taken (NULL if none published): caller frees with
 * route_snapshot_release(). */
struct route_snapshot *route_table_acquire(struct route_table *t);

#endif /* SLOTD_ROUTE_H */
