/* replay.c - the verifier's bounded replay memory: a pool, a min-heap by time and a hash set. */
#include <string.h>

#include "auth_internal.h"

#define SLOT_MASK ((uint32_t)AUTH__SLOTS - 1)

void auth__replay_init(struct auth__replay *r)
{
    memset(r, 0, sizeof(*r));
    crypto_shorthash_keygen(r->hash_key);
    r->horizon_ms = INT64_MIN;
    r->n_live = 0;
    r->n_free = AUTH_REPLAY_MAX;
    for (uint32_t i = 0; i < AUTH_REPLAY_MAX; i++) {
        r->free_list[i] = AUTH_REPLAY_MAX - 1 - i; /* pop hands out index 0 first */
    }
}

static uint32_t seen_home(const struct auth__replay *r, uint64_t node, int64_t wall_ms,
                          const uint8_t nonce[AUTH__NONCE_BYTES])
{
    uint8_t in[8 + 8 + AUTH__NONCE_BYTES], out[crypto_shorthash_BYTES];
    uint64_t ms = (uint64_t)wall_ms;
    for (int i = 0; i < 8; i++) {
        in[i] = (uint8_t)(node >> (8 * i));
        in[8 + i] = (uint8_t)(ms >> (8 * i));
    }
    memcpy(in + 16, nonce, AUTH__NONCE_BYTES);
    crypto_shorthash(out, in, sizeof(in), r->hash_key);
    uint32_t h =
        (uint32_t)out[0] | (uint32_t)out[1] << 8 | (uint32_t)out[2] << 16 | (uint32_t)out[3] << 24;
    return h & SLOT_MASK;
}

static bool seen_equal(const struct auth__seen *e, uint64_t node, int64_t wall_ms,
                       const uint8_t nonce[AUTH__NONCE_BYTES])
{
    return e->node == node && e->wall_ms == wall_ms &&
           memcmp(e->nonce, nonce, AUTH__NONCE_BYTES) == 0;
}

/* The slot holding pool index idx + 1, or the empty slot where the search from home stopped. */
static uint32_t slot_find(const struct auth__replay *r, uint32_t home, uint64_t node,
                          int64_t wall_ms, const uint8_t nonce[AUTH__NONCE_BYTES])
{
    uint32_t i = home;
    /* Bounded: at most n_live < AUTH__SLOTS slots are used, so an empty one is reached. */
    while (r->slot[i] != 0 && !seen_equal(&r->seen[r->slot[i] - 1], node, wall_ms, nonce)) {
        i = (i + 1) & SLOT_MASK;
    }
    return i;
}

/* Empties slot i and shifts later entries of its probe run back (linear-probing deletion
 * without tombstones, so lookups stay O(1) however many entries come and go). */
static void slot_delete(struct auth__replay *r, uint32_t i)
{
    r->slot[i] = 0;
    for (uint32_t j = (i + 1) & SLOT_MASK; r->slot[j] != 0; j = (j + 1) & SLOT_MASK) {
        uint32_t k = r->seen[r->slot[j] - 1].home;
        /* The entry at j may move to i unless its home lies cyclically in (i, j]. */
        if (((j - k) & SLOT_MASK) >= ((j - i) & SLOT_MASK)) {
            r->slot[i] = r->slot[j];
            r->slot[j] = 0;
            i = j;
        }
    }
}

static int64_t heap_ms(const struct auth__replay *r, uint32_t pos)
{
    return r->seen[r->heap[pos]].wall_ms;
}

static void heap_swap(struct auth__replay *r, uint32_t a, uint32_t b)
{
    uint32_t t = r->heap[a];
    r->heap[a] = r->heap[b];
    r->heap[b] = t;
}

static void heap_push(struct auth__replay *r, uint32_t idx)
{
    uint32_t pos = r->n_live++;
    r->heap[pos] = idx;
    while (pos > 0) {
        uint32_t parent = (pos - 1) / 2;
        if (heap_ms(r, parent) <= heap_ms(r, pos)) {
            break;
        }
        heap_swap(r, pos, parent);
        pos = parent;
    }
}

static uint32_t heap_pop(struct auth__replay *r)
{
    uint32_t top = r->heap[0];
    r->heap[0] = r->heap[--r->n_live];
    uint32_t pos = 0;
    for (;;) {
        uint32_t l = 2 * pos + 1, m = pos;
        if (l < r->n_live && heap_ms(r, l) < heap_ms(r, m)) {
            m = l;
        }
        if (l + 1 < r->n_live && heap_ms(r, l + 1) < heap_ms(r, m)) {
            m = l + 1;
        }
        if (m == pos) {
            break;
        }
        heap_swap(r, pos, m);
        pos = m;
    }
    return top;
}

/* Forgets every entry below the horizon: O(log n) each, and each entry is forgotten once. */
static void replay_expire(struct auth__replay *r)
{
    while (r->n_live > 0 && heap_ms(r, 0) < r->horizon_ms) {
        uint32_t idx = heap_pop(r);
        const struct auth__seen *e = &r->seen[idx];
        slot_delete(r, slot_find(r, e->home, e->node, e->wall_ms, e->nonce));
        r->free_list[r->n_free++] = idx;
    }
}

int auth__replay_admit(struct auth__replay *r, uint64_t node, int64_t wall_ms,
                       const uint8_t nonce[AUTH__NONCE_BYTES], int64_t now_wall_ms)
{
    int64_t horizon =
        now_wall_ms < INT64_MIN + AUTH_WINDOW_MS ? INT64_MIN : now_wall_ms - AUTH_WINDOW_MS;
    if (horizon > r->horizon_ms) {
        r->horizon_ms = horizon;
    }
    replay_expire(r);
    if (wall_ms < r->horizon_ms) {
        return AUTH_ESKEW; /* an entry this old may already be forgotten */
    }
    uint32_t home = seen_home(r, node, wall_ms, nonce);
    uint32_t i = slot_find(r, home, node, wall_ms, nonce);
    if (r->slot[i] != 0) {
        return AUTH_EREPLAY;
    }
    if (r->n_free == 0) {
        return AUTH_EFULL;
    }
    uint32_t idx = r->free_list[--r->n_free];
    struct auth__seen *e = &r->seen[idx];
    e->node = node;
    e->wall_ms = wall_ms;
    memcpy(e->nonce, nonce, AUTH__NONCE_BYTES);
    e->home = home;
    r->slot[i] = idx + 1;
    heap_push(r, idx);
    return AUTH_OK;
}

int auth__replay_check(const struct auth__replay *r)
{
    if (r->n_live + r->n_free != AUTH_REPLAY_MAX) {
        return AUTH_EINVALID;
    }
    uint32_t used = 0;
    for (uint32_t i = 0; i < AUTH__SLOTS; i++) {
        used += r->slot[i] != 0;
    }
    if (used != r->n_live) {
        return AUTH_EINVALID; /* also keeps slot_find below bounded: an empty slot exists */
    }
    for (uint32_t i = 0; i < AUTH__SLOTS; i++) {
        if (r->slot[i] == 0) {
            continue;
        }
        uint32_t idx = r->slot[i] - 1;
        if (idx >= AUTH_REPLAY_MAX) {
            return AUTH_EINVALID;
        }
        const struct auth__seen *e = &r->seen[idx];
        /* Reachable from its home: the probe from home stops at i, not at an empty slot. */
        if (e->home != seen_home(r, e->node, e->wall_ms, e->nonce) ||
            slot_find(r, e->home, e->node, e->wall_ms, e->nonce) != i) {
            return AUTH_EINVALID;
        }
    }
    for (uint32_t pos = 0; pos < r->n_live; pos++) {
        if (r->heap[pos] >= AUTH_REPLAY_MAX) {
            return AUTH_EINVALID;
        }
    }
    if (r->n_live > 0 && heap_ms(r, 0) < r->horizon_ms) {
        return AUTH_EINVALID; /* every admit forgets what is below the horizon first */
    }
    for (uint32_t pos = 1; pos < r->n_live; pos++) {
        if (heap_ms(r, (pos - 1) / 2) > heap_ms(r, pos)) {
            return AUTH_EINVALID;
        }
    }
    return AUTH_OK;
}
