/* vcache.h - the slot fsm's bounded cache of key rows' version and lease (the apply stage's). */
#ifndef SLOTD_SLOT_VCACHE_H
#define SLOTD_SLOT_VCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* What a put, delete or CAS needs of the row it replaces, without a LevelDB read: whether the
 * key row exists and, if so, its version and lease. Direct-mapped: SLOT_VCACHE_ENTRIES slots,
 * each holding the last key row looked up or written that hashes there (store keys of up to
 * SLOT_VCACHE_KEY_MAX bytes; longer ones are never cached). At most
 * SLOT_VCACHE_ENTRIES * sizeof(entry) bytes (about 26 MiB), touched only as slots fill.
 *
 * The cache must say what a read through the fsm's overlay would: its owner (slot_fsm) updates
 * it on every write of a key row and clears it whenever rows change any other way (a hash-slot
 * wipe, a snapshot install, a replica's removal). One thread at a time: the apply stage, or a
 * stage that runs only while no apply job runs or waits. */
#define SLOT_VCACHE_ENTRIES_LOG2 18
#define SLOT_VCACHE_ENTRIES (1u << SLOT_VCACHE_ENTRIES_LOG2)
#define SLOT_VCACHE_KEY_MAX 78

struct slot_vcache;

struct slot_vcache_stats {
    uint64_t hits;
    uint64_t misses; /* lookups of cacheable keys that found nothing */
    uint64_t clears;
};

/* On success *out: caller frees with slot_vcache_free(). Returns 0 or -1 (out of memory). */
int slot_vcache_new(struct slot_vcache **out);
void slot_vcache_free(struct slot_vcache *c);

/* true: the cache knows the row of k (kl bytes): *found, and when found *version and *lease. */
bool slot_vcache_get(struct slot_vcache *c, const uint8_t *k, size_t kl, bool *found,
                     uint64_t *version, uint64_t *lease);
/* Records the row of k as it now is (found with version and lease, or absent). */
void slot_vcache_put(struct slot_vcache *c, const uint8_t *k, size_t kl, bool found,
                     uint64_t version, uint64_t lease);
/* Forgets every row, in O(1). */
void slot_vcache_clear(struct slot_vcache *c);
void slot_vcache_stats(const struct slot_vcache *c, struct slot_vcache_stats *out);

#endif
