/* auth_internal.h - internals shared by auth.c, replay.c and token.c: the bounded replay memory
 * and the decimal parser. */
#ifndef SLOTD_AUTH_INTERNAL_H
#define SLOTD_AUTH_INTERNAL_H

#include <sodium.h>
#include <stdint.h>

#include "auth.h"

#define AUTH__NONCE_BYTES 16
#define AUTH__SLOTS (2 * AUTH_REPLAY_MAX) /* hash slots: load factor <= 1/2 */

_Static_assert((AUTH__SLOTS & (AUTH__SLOTS - 1)) == 0, "AUTH__SLOTS must be a power of two");
_Static_assert(AUTH_REPLAY_MAX < UINT32_MAX, "pool indices are uint32_t");

/* One accepted proof: its identity and where it hashes to. */
struct auth__seen {
    uint64_t node;
    int64_t wall_ms;
    uint8_t nonce[AUTH__NONCE_BYTES];
    uint32_t home; /* hash slot the entry hashes to (cached for deletion) */
};

/* Proofs accepted with remember, each kept until its time falls below the horizon. A pool of
 * entries, a min-heap of pool indices by wall_ms (to forget the oldest in O(log n)) and an
 * open-addressing hash set with linear probing (lookup O(1) expected). Not locked: the verifier
 * holds its mutex around every call. */
struct auth__replay {
    uint8_t hash_key[crypto_shorthash_KEYBYTES]; /* random per verifier (SipHash-2-4) */
    int64_t horizon_ms; /* entries with wall_ms < horizon_ms are forgotten; never decreases */
    uint32_t n_live;    /* invariant: n_live + n_free == AUTH_REPLAY_MAX */
    uint32_t n_free;
    struct auth__seen seen[AUTH_REPLAY_MAX]; /* pool; bound: AUTH_REPLAY_MAX */
    uint32_t free_list[AUTH_REPLAY_MAX];     /* unused pool indices, [0, n_free) */
    uint32_t heap[AUTH_REPLAY_MAX];          /* live pool indices, [0, n_live); invariant: the
                                                wall_ms of a parent <= those of its children */
    uint32_t slot[AUTH__SLOTS]; /* 0 = empty, else pool index + 1; invariant: n_live used */
};

/* Fills r (borrowed for the call) as empty with a fresh hash key. sodium_init() must have run. */
void auth__replay_init(struct auth__replay *r);

/* Admits (node, wall_ms, nonce) (nonce borrowed for the call) at now_wall_ms: first raises the
 * horizon to now_wall_ms - AUTH_WINDOW_MS and forgets entries below it. Returns AUTH_OK (now
 * remembered), AUTH_ESKEW (wall_ms is below the horizon: the clock went back since a later
 * call, and a replay could no longer be told apart), AUTH_EREPLAY (already remembered) or
 * AUTH_EFULL (AUTH_REPLAY_MAX live entries; nothing is forgotten to make room). */
int auth__replay_admit(struct auth__replay *r, uint64_t node, int64_t wall_ms,
                       const uint8_t nonce[AUTH__NONCE_BYTES], int64_t now_wall_ms);

/* Returns 0 when r's invariants hold, else AUTH_EINVALID. O(AUTH__SLOTS). */
int auth__replay_check(const struct auth__replay *r);

/* A canonical decimal (digits only, no sign, no leading zero but "0" itself, at most 20
 * digits) of value <= max in s[0, n) (borrowed) into *v. Returns 0 or -1 (*v untouched). */
int auth__decimal_parse(const char *s, size_t n, uint64_t max, uint64_t *v);

#endif /* SLOTD_AUTH_INTERNAL_H */
