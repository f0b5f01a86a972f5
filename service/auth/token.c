/* token.c - client tokens t1.<user>.<revision>.<expires_ms>.<HMAC-SHA-256>: make, check. */
#include <stdio.h>
#include <string.h>

#include <sodium.h>

#include "auth_internal.h"
#include "token.h"

#define TOKEN_PREFIX "t1."
#define TOKEN_DOMAIN "slotd-token-v1"

static bool user_ok(const char *u, size_t n)
{
    if (n < 1 || n > AUTH_TOKEN_USER_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        char c = u[i];
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '.' || c == '_' || c == '-')) {
            return false;
        }
    }
    return true;
}

static void le64(uint8_t *out, uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(v >> (8 * i));
    }
}

static void token_mac(const uint8_t *key, const char *user, size_t n, uint64_t rev, uint64_t exp,
                      uint8_t mac[crypto_auth_hmacsha256_BYTES])
{
    crypto_auth_hmacsha256_state st;
    uint8_t b[8];
    crypto_auth_hmacsha256_init(&st, key, AUTH_TOKEN_KEY_BYTES);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)TOKEN_DOMAIN, strlen(TOKEN_DOMAIN));
    for (int i = 0; i < 4; i++) {
        b[i] = (uint8_t)(n >> (8 * i));
    }
    crypto_auth_hmacsha256_update(&st, b, 4);
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)user, n);
    le64(b, rev);
    crypto_auth_hmacsha256_update(&st, b, 8);
    le64(b, exp);
    crypto_auth_hmacsha256_update(&st, b, 8);
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof(st));
}

int auth_token_make(const uint8_t *key, const char *user, uint64_t user_revision,
                    uint64_t expires_ms, char *out, size_t outlen)
{
    uint8_t mac[crypto_auth_hmacsha256_BYTES];
    char hex[2 * sizeof(mac) + 1];
    if (outlen > 0) {
        out[0] = '\0';
    }
    if (key == NULL || user == NULL || !user_ok(user, strlen(user)) || outlen < AUTH_TOKEN_MAX) {
        return AUTH_EINVALID;
    }
    token_mac(key, user, strlen(user), user_revision, expires_ms, mac);
    sodium_bin2hex(hex, sizeof(hex), mac, sizeof(mac));
    snprintf(out, outlen, TOKEN_PREFIX "%s.%llu.%llu.%s", user, (unsigned long long)user_revision,
             (unsigned long long)expires_ms, hex);
    return AUTH_OK;
}

/* Splits tok at its last three dots: user, revision, expiry, mac (pointers into tok). */
struct parts {
    const char *user, *rev, *exp, *mac;
    size_t user_n, rev_n, exp_n, mac_n;
};

static int split(const char *tok, size_t len, struct parts *p)
{
    size_t pre = strlen(TOKEN_PREFIX);
    if (len <= pre || len >= AUTH_TOKEN_MAX || memcmp(tok, TOKEN_PREFIX, pre) != 0) {
        return -1;
    }
    const char *dots[3];
    int found = 0;
    for (size_t i = len; i > pre && found < 3; i--) {
        if (tok[i - 1] == '.') {
            dots[found++] = tok + i - 1;
        }
    }
    if (found < 3) {
        return -1;
    }
    const char *end = tok + len;
    p->user = tok + pre;
    p->user_n = (size_t)(dots[2] - p->user);
    p->rev = dots[2] + 1;
    p->rev_n = (size_t)(dots[1] - p->rev);
    p->exp = dots[1] + 1;
    p->exp_n = (size_t)(dots[0] - p->exp);
    p->mac = dots[0] + 1;
    p->mac_n = (size_t)(end - p->mac);
    return 0;
}

int auth_token_parse(const char *tok, size_t len, struct auth_token *out)
{
    struct parts p;
    memset(out, 0, sizeof(*out));
    if (tok == NULL || len == 0) {
        return AUTH_EMISSING;
    }
    if (split(tok, len, &p) != 0 || !user_ok(p.user, p.user_n) ||
        auth__decimal_parse(p.rev, p.rev_n, UINT64_MAX, &out->user_revision) != 0 ||
        auth__decimal_parse(p.exp, p.exp_n, UINT64_MAX, &out->expires_ms) != 0 ||
        p.mac_n != 2 * crypto_auth_hmacsha256_BYTES) {
        return AUTH_EMALFORMED;
    }
    for (size_t i = 0; i < p.mac_n; i++) {
        char c = p.mac[i];
        if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) {
            return AUTH_EMALFORMED;
        }
    }
    memcpy(out->user, p.user, p.user_n);
    out->user[p.user_n] = '\0';
    return AUTH_OK;
}

int auth_token_verify(const uint8_t *key, const char *tok, size_t len, uint64_t now_wall_ms,
                      struct auth_token *out)
{
    int rc = auth_token_parse(tok, len, out);
    if (rc != AUTH_OK) {
        return rc;
    }
    struct parts p;
    uint8_t want[crypto_auth_hmacsha256_BYTES], got[crypto_auth_hmacsha256_BYTES];
    split(tok, len, &p);
    if (sodium_hex2bin(got, sizeof(got), p.mac, p.mac_n, NULL, NULL, NULL) != 0) {
        return AUTH_EMALFORMED;
    }
    token_mac(key, out->user, p.user_n, out->user_revision, out->expires_ms, want);
    if (sodium_memcmp(want, got, sizeof(want)) != 0) {
        return AUTH_EBADPROOF;
    }
    if (now_wall_ms >= out->expires_ms) {
        return AUTH_ESKEW;
    }
    return AUTH_OK;
}
