/* auth.h - node-to-node call proofs from a shared cluster secret: sign a peer call, verify it. */
#ifndef SLOTD_AUTH_H
#define SLOTD_AUTH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errlist.h"

#define AUTH_PROOF_HEADER "slotd-peer-proof" /* gRPC metadata key carrying the proof */
#define AUTH_PROOF_MAX 192   /* bytes of one proof text incl. NUL (the longest is 142) */
#define AUTH_SECRET_MIN 16   /* bytes a secret must hold (after trimming one "\n" or "\r\n") */
#define AUTH_SECRET_MAX 4096 /* bytes a secret may hold (after the same trimming) */
/* A proof whose time differs from the receiver's wall clock by more is refused (exactly this
 * much passes). Peers' clocks must agree to well within it (NTP). */
#define AUTH_WINDOW_MS 30000
#define AUTH_REPLAY_MAX 4096 /* proofs one verifier remembers for replay refusal */

/* X(name, value, message) */
#define AUTH_ERRORS(X)                                                                             \
    X(AUTH_OK, 0, "ok")                                                                            \
    X(AUTH_EMISSING, 1, "no peer proof")                                                           \
    X(AUTH_EMALFORMED, 2, "malformed peer proof")                                                  \
    X(AUTH_EBADPROOF, 3, "peer proof does not match")                                              \
    X(AUTH_ESKEW, 4, "peer proof time outside the window")                                         \
    X(AUTH_EREPLAY, 5, "peer proof replayed")                                                      \
    X(AUTH_EFULL, 6, "replay memory full")                                                         \
    X(AUTH_ESYS, 7, "system error")                                                                \
    X(AUTH_ESECRET, 8, "unusable cluster secret")                                                  \
    X(AUTH_EINVALID, 9, "invalid argument")

enum auth_err { AUTH_ERRORS(SLOTD_ERRLIST_ENUM) };

/* Static message for an auth_err ("unknown error" for other values). Thread-safe. */
const char *auth_strerror(int rc);

/* ---- Keys -------------------------------------------------------------------------------- */

/* Opaque: the 32-byte key BLAKE2b-256("slotd peer proof v1" || secret) (unkeyed), so the key held
 * in memory and used for MACs is not the secret itself. It lives in sodium_malloc memory (guard
 * pages, mlock where allowed) made read-only after derivation, and is wiped on free. Read-only
 * after creation: any number of threads may use one key at once. */
struct auth_key;

/* Reads the cluster secret from the file at path (borrowed for the call) and derives the key.
 * The file's mode is not checked (Kubernetes Secrets are mounted 0644). One trailing "\n" or
 * "\r\n" is trimmed; every other byte, including a second newline, is part of the secret.
 * Calls sodium_init(). On AUTH_OK, *out is the key (caller frees with auth_key_free()).
 * Errors, each with err (never NULL, errlen > 0) set to one sentence naming path (and the
 * limit): AUTH_ESYS (the file cannot be opened or read, or no memory), AUTH_ESECRET (empty,
 * shorter than AUTH_SECRET_MIN or longer than AUTH_SECRET_MAX bytes after trimming). The bytes
 * read are wiped before return; the secret is never copied into err. Thread-safe. */
int auth_key_load(const char *path, struct auth_key **out, char *err, size_t errlen);

/* The same key from len secret bytes (borrowed for the call; nothing is trimmed). For tests and
 * callers that already hold the bytes. Returns AUTH_OK with *out set (caller frees with
 * auth_key_free()), AUTH_ESECRET when len is outside [AUTH_SECRET_MIN, AUTH_SECRET_MAX], or
 * AUTH_ESYS (sodium_init failed, or no memory). Thread-safe. */
int auth_key_from_bytes(const uint8_t *secret, size_t len, struct auth_key **out);

/* Wipes and frees k (NULL is allowed). No verifier made from k may be used afterwards. */
void auth_key_free(struct auth_key *k);

/* ---- Making proofs ----------------------------------------------------------------------- */

/* Writes the proof "v1.<node>.<wall_ms>.<nonce>.<mac>" (NUL-terminated) into out, for a call of
 * method (borrowed for the call, e.g. "/slotd.internal.v1.Peer/Raft") made by node to node `to`
 * (the receiver; it is not in the text, the receiver puts its own id in the MAC, so a proof
 * made for one node is refused by every other; 0 when the receiver is unknown) at wall-clock
 * time wall_ms (ms since the Unix epoch) with request body (len bytes, borrowed for the call;
 * NULL is allowed when len is 0). node and wall_ms are decimal without sign or leading zeros,
 * nonce is 16 fresh random bytes (randombytes_buf) as 32 lowercase hex digits, and mac is
 *   HMAC-SHA-256(key, "slotd-peer-v1" | u32 LE strlen(method) | method | u64 LE node
 *                     | u64 LE to | i64 LE wall_ms | nonce | BLAKE2b-256(body))
 * as 64 lowercase hex digits. The secret never appears in the text.
 * Returns AUTH_OK, or AUTH_EINVALID when node is 0, wall_ms is negative, method is longer than
 * UINT32_MAX bytes or outlen < AUTH_PROOF_MAX (out is then "" when outlen > 0).
 * Thread-safe: k is only read. */
int auth_proof_make(const struct auth_key *k, const char *method, uint64_t node, uint64_t to,
                    int64_t wall_ms, const uint8_t *body, size_t len, char *out, size_t outlen);

/* The wall clock (CLOCK_REALTIME) in ms since the Unix epoch, as auth_signer_sign and the
 * receiver's now_wall_ms use it. Thread-safe. */
int64_t auth_now_wall_ms(void);

/* What auth_signer_sign needs: the key (borrowed, must outlive the signer's use) and this node. */
struct auth_signer {
    const struct auth_key *key;
    uint64_t node; /* this node's id; not 0 */
};

/* A sign callback in the shape of transport_options.sign: ctx is a struct auth_signer
 * (borrowed for the call). Makes the proof for (method, to, body) at auth_now_wall_ms(); method,
 * body and out are borrowed for the call. Returns 0 or an auth_err as auth_proof_make does.
 * Thread-safe, short, no locks. */
int auth_signer_sign(void *ctx, const char *method, uint64_t to, const uint8_t *body, size_t len,
                     char *out, size_t outlen);

/* ---- Verifying proofs -------------------------------------------------------------------- */

/* The key (borrowed, must outlive the verifier) plus a bounded replay memory. Thread-safe: one
 * pthread mutex guards the replay memory, held only by calls with remember set. */
struct auth_verifier;

/* A verifier for proofs made with k. Returns AUTH_OK with *out set (caller frees with
 * auth_verifier_free()), or AUTH_ESYS (no memory, or the mutex could not be made). */
int auth_verifier_new(const struct auth_key *k, struct auth_verifier **out);

/* Frees v (NULL is allowed). No call on v may be running. The key is not freed. */
void auth_verifier_free(struct auth_verifier *v);

/* Checks proof (proof_len bytes, borrowed for the call, need not be NUL-terminated) for a call
 * of method (borrowed for the call) received by node self with request body (len bytes, borrowed;
 * NULL when len is 0) at the receiver's wall clock now_wall_ms. Checks, in this order:
 *   AUTH_EMISSING   proof is NULL or proof_len is 0;
 *   AUTH_EMALFORMED the text is not exactly v1.<node>.<ms>.<nonce>.<mac> (canonical decimals,
 *                   node 1..UINT64_MAX, ms 0..INT64_MAX, lowercase hex, < AUTH_PROOF_MAX bytes);
 *   AUTH_EBADPROOF  the MAC differs (other secret, method, body, node, receiver, time or nonce),
 *                   compared in constant time (sodium_memcmp);
 *   AUTH_ESKEW      |now_wall_ms - proof time| > AUTH_WINDOW_MS; with remember, also a proof
 *                   older than the replay memory's horizon (this node's clock went back);
 *   AUTH_EREPLAY    remember is true and (node, ms, nonce) was already accepted with remember;
 *   AUTH_EFULL      remember is true and AUTH_REPLAY_MAX proofs inside the window are all still
 *                   remembered (no live entry is ever dropped to make room).
 * remember: true for low-rate state-changing methods (the proof is remembered until its time
 * leaves the window, then forgotten); false for raft traffic, which tolerates duplicates by
 * design (no replay check, the mutex is not taken).
 * On AUTH_OK, *node_out (not NULL) is the node that made the proof. why (NULL allowed, else
 * whylen > 0) gets "" on AUTH_OK or one sentence naming what failed; it never holds the secret,
 * the key or the expected MAC, and never echoes the proof text (only its parsed node and time).
 * AUTH_EINVALID when method is longer than UINT32_MAX bytes (no proof can be made for it).
 * Thread-safe. */
int auth_verify(struct auth_verifier *v, const char *method, uint64_t self, const char *proof,
                size_t proof_len, const uint8_t *body, size_t len, int64_t now_wall_ms,
                bool remember, uint64_t *node_out, char *why, size_t whylen);

/* Proofs the replay memory holds now (live or not yet forgotten). Thread-safe. */
size_t auth_verifier_remembered(struct auth_verifier *v);

/* Checks the replay memory's internal invariants (O(AUTH_REPLAY_MAX); tests call it). Returns 0
 * or AUTH_EINVALID. Thread-safe. */
int auth_verifier_check_invariants(struct auth_verifier *v);

#endif /* SLOTD_AUTH_H */
