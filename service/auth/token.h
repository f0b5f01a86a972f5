/* token.h - client tokens (MAC over user, revision, expiry) and the password-hash pool. */
#ifndef SLOTD_AUTH_TOKEN_H
#define SLOTD_AUTH_TOKEN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "auth.h"

#define AUTH_TOKEN_KEY_BYTES 32
#define AUTH_TOKEN_USER_MAX 32 /* bytes of a user name in a token */
#define AUTH_TOKEN_MAX 160     /* bytes of a token text incl. NUL (the longest is 140) */
/* Clients send the token as request metadata "authorization: Bearer <token>". */
#define AUTH_TOKEN_HEADER "authorization"
#define AUTH_TOKEN_SCHEME "Bearer "

/* Writes "t1.<user>.<user_revision>.<expires_ms>.<mac>" (NUL-terminated) into out: user is
 * 1..AUTH_TOKEN_USER_MAX bytes of [A-Za-z0-9._-], user_revision and expires_ms are canonical
 * decimals, mac is 64 lowercase hex digits of
 *   HMAC-SHA-256(key, "slotd-token-v1" | u32 LE len(user) | user | u64 LE user_revision
 *                     | u64 LE expires_ms).
 * key (AUTH_TOKEN_KEY_BYTES) and user are borrowed for the call. Returns AUTH_OK, or
 * AUTH_EINVALID (bad user, outlen < AUTH_TOKEN_MAX). Thread-safe. */
int auth_token_make(const uint8_t *key, const char *user, uint64_t user_revision,
                    uint64_t expires_ms, char *out, size_t outlen);

/* A parsed token; user is NUL-terminated. */
struct auth_token {
    char user[AUTH_TOKEN_USER_MAX + 1];
    uint64_t user_revision;
    uint64_t expires_ms;
};

/* Parses tok (len bytes, borrowed, need not be NUL-terminated) without checking the MAC:
 * AUTH_EMISSING (len 0), AUTH_EMALFORMED. Then auth_token_verify checks it. */
int auth_token_parse(const char *tok, size_t len, struct auth_token *out);

/* Checks tok's MAC under key (constant time) and its expiry against now_wall_ms: AUTH_OK, or
 * AUTH_EMISSING, AUTH_EMALFORMED, AUTH_EBADPROOF (MAC differs: another key or edited fields),
 * AUTH_ESKEW (expired). *out holds the parsed fields whenever the text parsed. Thread-safe. */
int auth_token_verify(const uint8_t *key, const char *tok, size_t len, uint64_t now_wall_ms,
                      struct auth_token *out);

/* ---- Password hashing off the completion-queue threads ----------------------------------- */

/* crypto_pwhash_str with these limits costs ~50-100 ms on the 2-core reference machine
 * (tests/unit/auth measures it): opslimit 2 (crypto_pwhash_OPSLIMIT_INTERACTIVE), memlimit
 * 32 MiB. */
#define AUTH_PWHASH_OPSLIMIT 2ull
#define AUTH_PWHASH_MEMLIMIT (32u << 20)
#define AUTH_PWHASH_STR_MAX 128 /* crypto_pwhash_STRBYTES */
#define AUTH_PASSWORD_MAX 256   /* bytes of one password */

/* A fixed set of worker threads that hash and verify passwords, with a bounded queue. */
struct auth_pwhash_pool;

/* The answer of one job, on a worker thread: rc is AUTH_OK (hash: hash is the new string;
 * verify: the password matches), AUTH_EBADPROOF (verify: it does not, or there was no hash),
 * AUTH_ESYS (out of memory). hash is borrowed for the callback (NULL for verify). */
typedef void (*auth_pwhash_cb)(void *arg, int rc, const char *hash);

/* threads 1..8 workers, queue_max 1..1024 waiting jobs. Computes the dummy hash verify uses for
 * a missing user before returning (one hash). Returns AUTH_OK with *out (caller frees with
 * auth_pwhash_pool_free), AUTH_EINVALID, AUTH_ESYS. */
int auth_pwhash_pool_new(unsigned threads, unsigned queue_max, struct auth_pwhash_pool **out);

/* Queues hashing password (len bytes, copied; 1..AUTH_PASSWORD_MAX). AUTH_EFULL when queue_max
 * jobs wait (nothing queued, cb never called), AUTH_EINVALID (length), AUTH_ESYS. */
int auth_pwhash_hash(struct auth_pwhash_pool *p, const char *password, size_t len,
                     auth_pwhash_cb cb, void *arg);

/* Queues checking password (copied) against hash (copied; NULL: a user that does not exist, the
 * check runs against the dummy hash so it costs the same and answers AUTH_EBADPROOF). Errors as
 * auth_pwhash_hash. */
int auth_pwhash_verify(struct auth_pwhash_pool *p, const char *hash, const char *password,
                       size_t len, auth_pwhash_cb cb, void *arg);

/* Jobs waiting or running now. */
unsigned auth_pwhash_pending(struct auth_pwhash_pool *p);

/* Runs the jobs still queued (their callbacks are called), joins the workers, frees p. NULL ok. */
void auth_pwhash_pool_free(struct auth_pwhash_pool *p);

#endif
