/* vcache.c - the slot fsm's direct-mapped cache of key rows' version and lease. */
#include "service/slot/vcache.h"

#include <stdlib.h>
#include <string.h>

struct entry {
    uint64_t version;
    uint64_t lease;
    uint32_t gen; /* valid while equal to the cache's gen; 0 never is */
    uint8_t key_len;
    uint8_t found;
    uint8_t key[SLOT_VCACHE_KEY_MAX];
};

struct slot_vcache {
    struct entry *slots; /* SLOT_VCACHE_ENTRIES, calloc'ed: pages are touched as slots fill */
    uint32_t gen;
    struct slot_vcache_stats stats;
};

/* FNV-1a over the key, folded: the low bits pick the slot. */
static uint32_t key_hash(const uint8_t *k, size_t kl)
{
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < kl; i++) {
        h ^= k[i];
        h *= 1099511628211ull;
    }
    return (uint32_t)(h ^ (h >> 32));
}

int slot_vcache_new(struct slot_vcache **out)
{
    struct slot_vcache *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return -1;
    c->slots = calloc(SLOT_VCACHE_ENTRIES, sizeof(*c->slots));
    if (c->slots == NULL)
        goto err_after_cache;
    c->gen = 1;
    *out = c;
    return 0;

err_after_cache:
    free(c);
    return -1;
}

void slot_vcache_free(struct slot_vcache *c)
{
    if (c == NULL)
        return;
    free(c->slots);
    free(c);
}

bool slot_vcache_get(struct slot_vcache *c, const uint8_t *k, size_t kl, bool *found,
                     uint64_t *version, uint64_t *lease)
{
    if (kl == 0 || kl > SLOT_VCACHE_KEY_MAX)
        return false;
    const struct entry *e = &c->slots[key_hash(k, kl) & (SLOT_VCACHE_ENTRIES - 1)];
    if (e->gen != c->gen || e->key_len != kl || memcmp(e->key, k, kl) != 0) {
        c->stats.misses++;
        return false;
    }
    c->stats.hits++;
    *found = e->found;
    *version = e->found ? e->version : 0;
    *lease = e->found ? e->lease : 0;
    return true;
}

void slot_vcache_put(struct slot_vcache *c, const uint8_t *k, size_t kl, bool found,
                     uint64_t version, uint64_t lease)
{
    if (kl == 0 || kl > SLOT_VCACHE_KEY_MAX)
        return;
    struct entry *e = &c->slots[key_hash(k, kl) & (SLOT_VCACHE_ENTRIES - 1)];
    e->gen = c->gen;
    e->key_len = (uint8_t)kl;
    e->found = found;
    e->version = found ? version : 0;
    e->lease = found ? lease : 0;
    memcpy(e->key, k, kl);
}

void slot_vcache_clear(struct slot_vcache *c)
{
    c->stats.clears++;
    if (++c->gen == 0) { /* after 2^32 clears: no stale entry may match the new gen */
        memset(c->slots, 0, (size_t)SLOT_VCACHE_ENTRIES * sizeof(*c->slots));
        c->gen = 1;
    }
}

void slot_vcache_stats(const struct slot_vcache *c, struct slot_vcache_stats *out)
{
    *out = c->stats;
}
