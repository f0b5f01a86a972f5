/* auth_test.c - unit tests for service/auth: key files, proof format, verify errors, replay. */
#define _GNU_SOURCE /* memmem */
#include <CUnit/Basic.h>
#include <inttypes.h>
#include <pthread.h>
#include <sodium.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "auth.h"

#define SECRET "correct horse battery staple, cluster one" /* 41 bytes */
#define OTHER_SECRET "correct horse battery staple, cluster two"
#define METHOD "/slotd.internal.v1.Peer/Propose"
#define T0 1714564800000LL /* 2024-05-01 12:00:00.000 UTC */
#define SELF 2             /* the receiving node of the proofs made here */

static const uint8_t BODY[] = "propose: key=a value=b";

/* xorshift64*: deterministic inputs from a printed seed. */
static uint64_t rng_next(uint64_t *s)
{
    *s ^= *s >> 12;
    *s ^= *s << 25;
    *s ^= *s >> 27;
    return *s * 2685821657736338717ull;
}

static struct auth_key *key_of(const char *secret)
{
    struct auth_key *k = NULL;
    CU_ASSERT_EQUAL_FATAL(auth_key_from_bytes((const uint8_t *)secret, strlen(secret), &k),
                          AUTH_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(k);
    return k;
}

static struct auth_verifier *verifier_of(const struct auth_key *k)
{
    struct auth_verifier *v = NULL;
    CU_ASSERT_EQUAL_FATAL(auth_verifier_new(k, &v), AUTH_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    return v;
}

static void make(const struct auth_key *k, const char *method, uint64_t node, int64_t ms,
                 const uint8_t *body, size_t len, char out[AUTH_PROOF_MAX])
{
    CU_ASSERT_EQUAL_FATAL(
        auth_proof_make(k, method, node, SELF, ms, body, len, out, AUTH_PROOF_MAX), AUTH_OK);
}

/* auth_verify of a NUL-terminated proof for METHOD and BODY; why into why (may be NULL). */
static int verify_at(struct auth_verifier *v, const char *proof, int64_t now, bool remember,
                     uint64_t *node, char *why, size_t whylen)
{
    return auth_verify(v, METHOD, SELF, proof, proof == NULL ? 0 : strlen(proof), BODY,
                       sizeof(BODY), now, remember, node, why, whylen);
}

static void test_round_trip(void)
{
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], why[256];
    make(k, METHOD, 7, T0, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(strncmp(proof, "v1.7.1714564800000.", 19), 0);
    uint64_t node = 0;
    snprintf(why, sizeof(why), "stale");
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, false, &node, why, sizeof(why)), AUTH_OK);
    CU_ASSERT_EQUAL(node, 7);
    CU_ASSERT_STRING_EQUAL(why, "");
    node = 0;
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + 1234, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(node, 7);

    /* Two proofs of the same call differ (fresh nonce) and both verify. */
    char again[AUTH_PROOF_MAX];
    make(k, METHOD, 7, T0, BODY, sizeof(BODY), again);
    CU_ASSERT_STRING_NOT_EQUAL(proof, again);
    CU_ASSERT_EQUAL(verify_at(v, again, T0, true, &node, NULL, 0), AUTH_OK);

    /* Empty body (NULL, 0) and the extremes of node and time. */
    CU_ASSERT_EQUAL(
        auth_proof_make(k, METHOD, UINT64_MAX, SELF, INT64_MAX, NULL, 0, proof, sizeof(proof)),
        AUTH_OK);
    CU_ASSERT(strlen(proof) == 141 && strlen(proof) < AUTH_PROOF_MAX);
    CU_ASSERT_EQUAL(auth_verify(v, METHOD, SELF, proof, strlen(proof), NULL, 0, INT64_MAX, true,
                                &node, why, sizeof(why)),
                    AUTH_OK);
    CU_ASSERT_EQUAL(node, UINT64_MAX);
    CU_ASSERT_EQUAL(auth_proof_make(k, "", 1, SELF, 0, NULL, 0, proof, sizeof(proof)), AUTH_OK);
    CU_ASSERT_EQUAL(
        auth_verify(v, "", SELF, proof, strlen(proof), NULL, 0, 0, false, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(node, 1);
    /* A NUL-free proof that is not NUL-terminated: only proof_len bytes are read. */
    char padded[AUTH_PROOF_MAX + 8];
    make(k, METHOD, 9, T0, BODY, sizeof(BODY), padded);
    size_t plen = strlen(padded);
    memset(padded + plen, 'x', 8);
    CU_ASSERT_EQUAL(
        auth_verify(v, METHOD, SELF, padded, plen, BODY, sizeof(BODY), T0, false, &node, NULL, 0),
        AUTH_OK);
    CU_ASSERT_EQUAL(node, 9);
    auth_verifier_free(v);
    auth_key_free(k);
}

/* The documented format, recomputed here from auth.h's comment with libsodium directly. */
static void test_known_format(void)
{
    struct auth_key *k = key_of(SECRET);
    char proof[AUTH_PROOF_MAX];
    make(k, METHOD, 42, T0, BODY, sizeof(BODY), proof);
    unsigned long long node = 0;
    long long ms = 0;
    char nonce_hex[33], mac_hex[65];
    CU_ASSERT_EQUAL_FATAL(
        sscanf(proof, "v1.%llu.%lld.%32[0-9a-f].%64[0-9a-f]", &node, &ms, nonce_hex, mac_hex), 4);
    CU_ASSERT_EQUAL(node, 42);
    CU_ASSERT_EQUAL(ms, T0);
    CU_ASSERT_EQUAL(strlen(nonce_hex), 32);

    uint8_t key[32], digest[32], nonce[16], mac[32];
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof(key));
    crypto_generichash_update(&st, (const uint8_t *)"slotd peer proof v1", 19);
    crypto_generichash_update(&st, (const uint8_t *)SECRET, strlen(SECRET));
    crypto_generichash_final(&st, key, sizeof(key));
    crypto_generichash(digest, sizeof(digest), BODY, sizeof(BODY), NULL, 0);
    CU_ASSERT_EQUAL_FATAL(sodium_hex2bin(nonce, sizeof(nonce), nonce_hex, 32, NULL, NULL, NULL), 0);
    uint8_t msg[13 + 4 + sizeof(METHOD) - 1 + 8 + 8 + 8 + 16 + 32], *p = msg;
    memcpy(p, "slotd-peer-v1", 13);
    p += 13;
    uint32_t mlen = (uint32_t)strlen(METHOD);
    for (int i = 0; i < 4; i++) {
        *p++ = (uint8_t)(mlen >> (8 * i));
    }
    memcpy(p, METHOD, mlen);
    p += mlen;
    for (int i = 0; i < 8; i++) {
        *p++ = (uint8_t)(42ull >> (8 * i));
    }
    for (int i = 0; i < 8; i++) {
        *p++ = (uint8_t)((uint64_t)SELF >> (8 * i));
    }
    for (int i = 0; i < 8; i++) {
        *p++ = (uint8_t)((uint64_t)T0 >> (8 * i));
    }
    memcpy(p, nonce, 16);
    p += 16;
    memcpy(p, digest, 32);
    p += 32;
    CU_ASSERT_EQUAL_FATAL((size_t)(p - msg), sizeof(msg));
    crypto_auth_hmacsha256_state h;
    crypto_auth_hmacsha256_init(&h, key, sizeof(key));
    crypto_auth_hmacsha256_update(&h, msg, sizeof(msg));
    crypto_auth_hmacsha256_final(&h, mac);
    char want[65];
    sodium_bin2hex(want, sizeof(want), mac, sizeof(mac));
    CU_ASSERT_STRING_EQUAL(mac_hex, want);
    auth_key_free(k);
}

static void test_bad_proofs(void)
{
    struct auth_key *k = key_of(SECRET), *other = key_of(OTHER_SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], why[256];
    uint64_t node = 99;

    make(other, METHOD, 7, T0, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, false, &node, why, sizeof(why)), AUTH_EBADPROOF);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "does not match the request"));
    CU_ASSERT_PTR_NULL(strstr(why, "horse"));
    CU_ASSERT_EQUAL(node, 99); /* untouched on error */

    /* A proof made for node SELF is refused by any other receiver (no relay to a third node). */
    make(k, METHOD, 7, T0, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(auth_verify(v, METHOD, SELF + 1, proof, strlen(proof), BODY, sizeof(BODY), T0,
                                false, &node, why, sizeof(why)),
                    AUTH_EBADPROOF);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "receiving node"));
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, false, &node, NULL, 0), AUTH_OK);
    node = 99;

    make(k, METHOD, 7, T0, BODY, sizeof(BODY), proof);
    uint8_t body[sizeof(BODY)];
    for (size_t i = 0; i < sizeof(BODY); i += 5) {
        memcpy(body, BODY, sizeof(BODY));
        body[i] ^= 0x01;
        CU_ASSERT_EQUAL(auth_verify(v, METHOD, SELF, proof, strlen(proof), body, sizeof(body), T0,
                                    false, &node, NULL, 0),
                        AUTH_EBADPROOF);
    }
    CU_ASSERT_EQUAL(auth_verify(v, METHOD, SELF, proof, strlen(proof), BODY, sizeof(BODY) - 1, T0,
                                false, &node, NULL, 0),
                    AUTH_EBADPROOF);
    CU_ASSERT_EQUAL(auth_verify(v, "/slotd.internal.v1.Peer/Raft", SELF, proof, strlen(proof), BODY,
                                sizeof(BODY), T0, false, &node, NULL, 0),
                    AUTH_EBADPROOF);
    CU_ASSERT_EQUAL(auth_verify(v, METHOD "x", SELF, proof, strlen(proof), BODY, sizeof(BODY), T0,
                                false, &node, NULL, 0),
                    AUTH_EBADPROOF);

    /* Each field edited in the text: node, time, nonce, mac. */
    char edited[AUTH_PROOF_MAX + 8];
    snprintf(edited, sizeof(edited), "v1.8.%s", proof + 5);
    CU_ASSERT_EQUAL(verify_at(v, edited, T0, false, &node, why, sizeof(why)), AUTH_EBADPROOF);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "claiming node 8"));
    snprintf(edited, sizeof(edited), "v1.17.%s", proof + 5);
    CU_ASSERT_EQUAL(verify_at(v, edited, T0, false, &node, NULL, 0), AUTH_EBADPROOF);
    snprintf(edited, sizeof(edited), "%s", proof);
    edited[17] = '1'; /* last digit of the time: ...000 -> ...001 */
    CU_ASSERT_EQUAL(verify_at(v, edited, T0, false, &node, NULL, 0), AUTH_EBADPROOF);
    size_t nonce_at = strlen("v1.7.1714564800000.");
    snprintf(edited, sizeof(edited), "%s", proof);
    edited[nonce_at] = edited[nonce_at] == 'a' ? 'b' : 'a';
    CU_ASSERT_EQUAL(verify_at(v, edited, T0, false, &node, NULL, 0), AUTH_EBADPROOF);
    snprintf(edited, sizeof(edited), "%s", proof);
    edited[strlen(edited) - 1] = edited[strlen(edited) - 1] == '0' ? '1' : '0';
    CU_ASSERT_EQUAL(verify_at(v, edited, T0, false, &node, NULL, 0), AUTH_EBADPROOF);
    CU_ASSERT_EQUAL(node, 99);
    /* A bad proof is not remembered: the good one still passes with remember. */
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 0);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, true, &node, NULL, 0), AUTH_OK);
    auth_verifier_free(v);
    auth_key_free(other);
    auth_key_free(k);
}

static void test_skew(void)
{
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], why[256];
    uint64_t node = 0;
    make(k, METHOD, 3, T0, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS, false, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 - AUTH_WINDOW_MS, false, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS + 1, false, &node, why, sizeof(why)),
                    AUTH_ESKEW);
    CU_ASSERT_STRING_EQUAL(why, "proof time 2024-05-01 12:00:00.000 UTC from node 3 is 30001 ms "
                                "behind this node's clock; the limit is 30000 ms");
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 - 45000, false, &node, why, sizeof(why)), AUTH_ESKEW);
    CU_ASSERT_STRING_EQUAL(why, "proof time 2024-05-01 12:00:00.000 UTC from node 3 is 45000 ms "
                                "ahead of this node's clock; the limit is 30000 ms");
    /* Edges with remember too, and far-off clocks without overflow. */
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 - AUTH_WINDOW_MS - 1, true, &node, NULL, 0), AUTH_ESKEW);
    CU_ASSERT_EQUAL(verify_at(v, proof, INT64_MIN, false, &node, why, sizeof(why)), AUTH_ESKEW);
    CU_ASSERT_EQUAL(verify_at(v, proof, INT64_MAX, true, &node, why, sizeof(why)), AUTH_ESKEW);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 0);
    auth_verifier_free(v);
    auth_key_free(k);
}

static void check_malformed(struct auth_verifier *v, const char *text, size_t len)
{
    char why[256];
    uint64_t node = 99;
    int rc = auth_verify(v, METHOD, SELF, text, len, BODY, sizeof(BODY), T0, true, &node, why,
                         sizeof(why));
    CU_ASSERT(rc == AUTH_EMALFORMED || rc == AUTH_EMISSING);
    if (rc != AUTH_EMALFORMED && rc != AUTH_EMISSING) {
        printf("\n    accepted %zu bytes \"%.*s\": %s\n", len, (int)len, text, auth_strerror(rc));
    }
    CU_ASSERT(why[0] != '\0');
    CU_ASSERT_EQUAL(node, 99);
}

static void test_malformed(void)
{
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], why[256], t[512];
    uint64_t node = 0;
    make(k, METHOD, 7, T0, BODY, sizeof(BODY), proof);
    const char *tail = strchr(proof + 5, '.') + 1; /* "<nonce>.<mac>" */
    const char *mac = strchr(tail, '.') + 1;

    CU_ASSERT_EQUAL(verify_at(v, NULL, T0, false, &node, why, sizeof(why)), AUTH_EMISSING);
    CU_ASSERT_STRING_EQUAL(why, "the request has no slotd-peer-proof header");
    CU_ASSERT_EQUAL(
        auth_verify(v, METHOD, SELF, proof, 0, BODY, sizeof(BODY), T0, false, &node, NULL, 0),
        AUTH_EMISSING);
    CU_ASSERT_EQUAL(verify_at(v, "7.1714564800000.00.00", T0, false, &node, why, sizeof(why)),
                    AUTH_EMALFORMED);
    CU_ASSERT_STRING_EQUAL(why, "proof header is not v1.<node>.<ms>.<nonce>.<mac>: it has fewer "
                                "than five dot-separated fields");

    const char *fixed[] = {".", "....", ".....", "v1", "v1.", "v1....", "garbage", " ", "\n"};
    for (size_t i = 0; i < sizeof(fixed) / sizeof(*fixed); i++) {
        check_malformed(v, fixed[i], strlen(fixed[i]));
    }
    /* Built from the good proof: each breaks exactly one rule. */
    const char *forms[][2] = {
        {"v2.7.1714564800000.", ""},
        {"V1.7.1714564800000.", ""},
        {"1.7.1714564800000.", ""},
        {"7.1714564800000.", ""},
        {"v1.07.1714564800000.", ""},
        {"v1.0.1714564800000.", ""},
        {"v1.+7.1714564800000.", ""},
        {"v1.-7.1714564800000.", ""},
        {"v1. 7.1714564800000.", ""},
        {"v1.7.+1714564800000.", ""},
        {"v1.7.-1714564800000.", ""},
        {"v1.7.01714564800000.", ""},
        {"v1..1714564800000.", ""},
        {"v1.7..", ""},
        {"v1.18446744073709551616.1714564800000.", ""},
        {"v1.99999999999999999999999.1714564800000.", ""},
        {"v1.7.9223372036854775808.", ""},
        {"v1.7.1714564800000.", ".extra"},
        {"v1.7.1714564800000.", "."},
        {"v1.7.1714564800000.", " "},
        {"v1.7.1714564800000.", "0"},
        {"v1.7.1.2.", ""},
    };
    for (size_t i = 0; i < sizeof(forms) / sizeof(*forms); i++) {
        snprintf(t, sizeof(t), "%s%s%s", forms[i][0], tail, forms[i][1]);
        check_malformed(v, t, strlen(t));
    }
    /* nonce and mac: short, long, uppercase, non-hex, missing. */
    snprintf(t, sizeof(t), "v1.7.1714564800000.%.31s.%s", tail, mac);
    check_malformed(v, t, strlen(t));
    snprintf(t, sizeof(t), "v1.7.1714564800000.%.32s0.%s", tail, mac);
    check_malformed(v, t, strlen(t));
    snprintf(t, sizeof(t), "v1.7.1714564800000.%.32s.%.63s", tail, mac);
    check_malformed(v, t, strlen(t));
    snprintf(t, sizeof(t), "v1.7.1714564800000.%.32s.", tail);
    check_malformed(v, t, strlen(t));
    snprintf(t, sizeof(t), "v1.7.1714564800000..%s", mac);
    check_malformed(v, t, strlen(t));
    snprintf(t, sizeof(t), "v1.7.1714564800000.%s", tail);
    for (char *c = t + 19; *c != '\0'; c++) {
        if (*c >= 'a' && *c <= 'f') {
            *c = (char)(*c - 'a' + 'A');
            break;
        }
    }
    check_malformed(v, t, strlen(t));
    snprintf(t, sizeof(t), "v1.7.1714564800000.%s", tail);
    t[25] = 'g';
    check_malformed(v, t, strlen(t));
    /* An embedded NUL, and a proof of AUTH_PROOF_MAX bytes or more. */
    snprintf(t, sizeof(t), "%s", proof);
    t[22] = '\0';
    check_malformed(v, t, strlen(proof));
    memset(t, '7', sizeof(t));
    memcpy(t, "v1.", 3);
    check_malformed(v, t, AUTH_PROOF_MAX);
    check_malformed(v, t, sizeof(t));
    CU_ASSERT_EQUAL(auth_verify(v, METHOD, SELF, t, sizeof(t), BODY, sizeof(BODY), T0, false, &node,
                                why, sizeof(why)),
                    AUTH_EMALFORMED);
    CU_ASSERT_STRING_EQUAL(why, "proof header is not v1.<node>.<ms>.<nonce>.<mac>: it is too long");

    /* Every truncation, and seeded random edits, never pass; no text byte reaches why. */
    for (size_t n = 0; n < strlen(proof); n++) {
        check_malformed(v, proof, n);
    }
    uint64_t seed = 0xa17e57ull;
    int accepted = 0;
    for (int i = 0; i < 5000; i++) {
        size_t n = strlen(proof);
        memcpy(t, proof, n + 1);
        int edits = 1 + (int)(rng_next(&seed) % 3);
        for (int e = 0; e < edits; e++) {
            size_t at = rng_next(&seed) % n;
            t[at] = (char)(rng_next(&seed) & 0xff);
        }
        if (memcmp(t, proof, n) == 0) {
            continue;
        }
        int rc = auth_verify(v, METHOD, SELF, t, n, BODY, sizeof(BODY), T0, false, &node, why,
                             sizeof(why));
        accepted += rc == AUTH_OK;
        CU_ASSERT(rc == AUTH_EMALFORMED || rc == AUTH_EBADPROOF);
    }
    CU_ASSERT_EQUAL(accepted, 0);
    if (accepted != 0) {
        printf("\n    seed 0xa17e57: an edited proof passed\n");
    }
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 0);
    auth_verifier_free(v);
    auth_key_free(k);
}

static void test_replay(void)
{
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], other[AUTH_PROOF_MAX], why[256];
    uint64_t node = 0;
    make(k, METHOD, 5, T0, BODY, sizeof(BODY), proof);
    make(k, METHOD, 5, T0, BODY, sizeof(BODY), other); /* same node, time and call; new nonce */
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, false, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 0);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(verify_at(v, other, T0, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 2);
    node = 0;
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + 10, true, &node, why, sizeof(why)), AUTH_EREPLAY);
    CU_ASSERT_STRING_EQUAL(why, "proof from node 5 at 2024-05-01 12:00:00.000 UTC was already "
                                "used (a replay)");
    CU_ASSERT_EQUAL(node, 0);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + 10, false, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(node, 5);
    /* Remembered through the whole window; afterwards refused for skew, and forgotten. */
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS, true, &node, NULL, 0), AUTH_EREPLAY);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 2);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS + 1, true, &node, NULL, 0), AUTH_ESKEW);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 2); /* forgotten by the next admit */
    make(k, METHOD, 5, T0 + AUTH_WINDOW_MS + 1, BODY, sizeof(BODY), other);
    CU_ASSERT_EQUAL(verify_at(v, other, T0 + AUTH_WINDOW_MS + 1, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 1);
    CU_ASSERT_EQUAL(auth_verifier_check_invariants(v), 0);

    /* The clock goes back by more than the window: a proof below the horizon is refused even
     * though it is inside the window, since the memory that would catch its replay is gone. */
    make(k, METHOD, 5, T0 + 100000, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + 100000, true, &node, NULL, 0), AUTH_OK);
    make(k, METHOD, 5, T0, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, true, &node, why, sizeof(why)), AUTH_ESKEW);
    CU_ASSERT_STRING_EQUAL(why, "proof time 2024-05-01 12:00:00.000 UTC from node 5 is before "
                                "2024-05-01 12:01:10.000 UTC, which the replay memory no longer "
                                "covers (this node's clock went back)");
    CU_ASSERT_EQUAL(verify_at(v, proof, T0, false, &node, NULL, 0), AUTH_OK); /* raft: fine */
    auth_verifier_free(v);
    auth_key_free(k);
}

static void test_replay_full(void)
{
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], why[256];
    uint64_t node = 0;
    int ok = 0;
    for (int i = 0; i < AUTH_REPLAY_MAX; i++) {
        make(k, METHOD, 1 + (uint64_t)i % 5, T0 + i % 1000, BODY, sizeof(BODY), proof);
        ok += verify_at(v, proof, T0 + 999, true, &node, NULL, 0) == AUTH_OK;
    }
    CU_ASSERT_EQUAL(ok, AUTH_REPLAY_MAX);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), AUTH_REPLAY_MAX);
    CU_ASSERT_EQUAL(auth_verifier_check_invariants(v), 0);
    make(k, METHOD, 9, T0 + 999, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + 999, true, &node, why, sizeof(why)), AUTH_EFULL);
    CU_ASSERT_STRING_EQUAL(why, "the replay memory holds 4096 proofs still inside the 30000 ms "
                                "window; refusing rather than forgetting one");
    /* At the window's edge for the oldest (T0) all are still live: still full. */
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS, true, &node, NULL, 0), AUTH_EFULL);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS, false, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), AUTH_REPLAY_MAX);
    /* One ms later the T0 entries (every 1000th) leave; then past everything. */
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + AUTH_WINDOW_MS + 1, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), AUTH_REPLAY_MAX - 5 + 1);
    CU_ASSERT_EQUAL(auth_verifier_check_invariants(v), 0);
    make(k, METHOD, 9, T0 + 40000, BODY, sizeof(BODY), proof);
    CU_ASSERT_EQUAL(verify_at(v, proof, T0 + 40000, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(auth_verifier_remembered(v), 1);
    CU_ASSERT_EQUAL(auth_verifier_check_invariants(v), 0);
    auth_verifier_free(v);
    auth_key_free(k);
}

/* The replay memory against a model: a proof is refused as a replay exactly when it was
 * accepted with remember before and is still inside the window. */
static void test_replay_model(void)
{
    enum { N_PROOFS = 3000, OPS = 20000 };
    struct made {
        char text[AUTH_PROOF_MAX];
        int64_t ms;
        bool accepted;
    };
    struct made *m = calloc(N_PROOFS, sizeof(*m));
    CU_ASSERT_PTR_NOT_NULL_FATAL(m);
    if (m == NULL) {
        return; /* for the analyzer: the fatal assert above does not return */
    }
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    uint64_t seed = 0x5eed0001ull;
    int64_t now = T0;
    int n = 0, mismatches = 0, replays = 0;
    for (int op = 0; op < OPS; op++) {
        now += (int64_t)(rng_next(&seed) % 20);
        struct made *p;
        if (n < N_PROOFS && (n == 0 || rng_next(&seed) % 3 == 0)) {
            p = &m[n++];
            p->ms = now - AUTH_WINDOW_MS - 100 +
                    (int64_t)(rng_next(&seed) % (2 * AUTH_WINDOW_MS + 200));
            if (p->ms < 0) {
                p->ms = 0;
            }
            make(k, METHOD, 1 + rng_next(&seed) % 3, p->ms, BODY, sizeof(BODY), p->text);
        } else {
            p = &m[rng_next(&seed) % (uint64_t)n];
        }
        int64_t d = now > p->ms ? now - p->ms : p->ms - now;
        int want = d > AUTH_WINDOW_MS ? AUTH_ESKEW : p->accepted ? AUTH_EREPLAY : AUTH_OK;
        uint64_t node = 0;
        int rc = verify_at(v, p->text, now, true, &node, NULL, 0);
        mismatches += rc != want;
        replays += rc == AUTH_EREPLAY;
        p->accepted |= rc == AUTH_OK;
        if (op % 500 == 0) {
            CU_ASSERT_EQUAL(auth_verifier_check_invariants(v), 0);
        }
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT(replays > 100);
    CU_ASSERT_EQUAL(auth_verifier_check_invariants(v), 0);
    if (mismatches != 0) {
        printf("\n    seed 0x5eed0001: %d results differ from the model\n", mismatches);
    }
    auth_verifier_free(v);
    auth_key_free(k);
    free(m);
}

#define RACE_THREADS 4
#define RACE_PROOFS 1000

struct race {
    struct auth_verifier *v;
    char (*proofs)[AUTH_PROOF_MAX];
    int ok[RACE_PROOFS];
    pthread_mutex_t lock;
};

static void *race_run(void *arg)
{
    struct race *r = arg;
    for (int i = 0; i < RACE_PROOFS; i++) {
        uint64_t node = 0;
        if (verify_at(r->v, r->proofs[i], T0, true, &node, NULL, 0) == AUTH_OK) {
            pthread_mutex_lock(&r->lock);
            r->ok[i]++;
            pthread_mutex_unlock(&r->lock);
        }
    }
    return NULL;
}

/* Threads racing on the same proofs with remember: each is accepted exactly once. */
static void test_threads(void)
{
    struct auth_key *k = key_of(SECRET);
    struct race r = {.v = verifier_of(k)};
    r.proofs = calloc(RACE_PROOFS, sizeof(*r.proofs));
    CU_ASSERT_PTR_NOT_NULL_FATAL(r.proofs);
    pthread_mutex_init(&r.lock, NULL);
    for (int i = 0; i < RACE_PROOFS; i++) {
        make(k, METHOD, 1 + (uint64_t)i % 3, T0, BODY, sizeof(BODY), r.proofs[i]);
    }
    pthread_t t[RACE_THREADS];
    for (int i = 0; i < RACE_THREADS; i++) {
        CU_ASSERT_FATAL(pthread_create(&t[i], NULL, race_run, &r) == 0);
    }
    for (int i = 0; i < RACE_THREADS; i++) {
        pthread_join(t[i], NULL);
    }
    int wrong = 0;
    for (int i = 0; i < RACE_PROOFS; i++) {
        wrong += r.ok[i] != 1;
    }
    CU_ASSERT_EQUAL(wrong, 0);
    CU_ASSERT_EQUAL(auth_verifier_remembered(r.v), RACE_PROOFS);
    CU_ASSERT_EQUAL(auth_verifier_check_invariants(r.v), 0);
    pthread_mutex_destroy(&r.lock);
    free(r.proofs);
    auth_verifier_free(r.v);
    auth_key_free(k);
}

/* ---- key files --------------------------------------------------------------------------- */

static char tmpdir[64];

static void write_file(const char *name, const void *data, size_t len, char *path, size_t size)
{
    snprintf(path, size, "%s/%s", tmpdir, name);
    FILE *f = fopen(path, "wb");
    CU_ASSERT_PTR_NOT_NULL_FATAL(f);
    CU_ASSERT_EQUAL(fwrite(data, 1, len, f), len);
    fclose(f);
}

/* A proof made with a verifies with b's verifier and the other way round. */
static bool same_key(const struct auth_key *a, const struct auth_key *b)
{
    struct auth_verifier *va = verifier_of(a), *vb = verifier_of(b);
    char pa[AUTH_PROOF_MAX], pb[AUTH_PROOF_MAX];
    uint64_t node = 0;
    make(a, METHOD, 4, T0, BODY, sizeof(BODY), pa);
    make(b, METHOD, 4, T0, BODY, sizeof(BODY), pb);
    bool same = verify_at(vb, pa, T0, false, &node, NULL, 0) == AUTH_OK &&
                verify_at(va, pb, T0, false, &node, NULL, 0) == AUTH_OK;
    auth_verifier_free(va);
    auth_verifier_free(vb);
    return same;
}

/* auth_key_load of a file holding data; returns the code, *k the key or NULL, err the text. */
static int load(const char *name, const void *data, size_t len, struct auth_key **k, char *err,
                size_t errlen)
{
    char path[128];
    write_file(name, data, len, path, sizeof(path));
    int rc = auth_key_load(path, k, err, errlen);
    unlink(path);
    return rc;
}

static void test_key_files(void)
{
    snprintf(tmpdir, sizeof(tmpdir), "/tmp/slotd-auth-test.XXXXXX");
    CU_ASSERT_PTR_NOT_NULL_FATAL(mkdtemp(tmpdir));
    struct auth_key *want = key_of(SECRET), *other = key_of(OTHER_SECRET), *k = NULL;
    char err[512], path[128], expect[256];

    CU_ASSERT_EQUAL(load("lf", SECRET "\n", strlen(SECRET) + 1, &k, err, sizeof(err)), AUTH_OK);
    CU_ASSERT(k != NULL && same_key(k, want));
    CU_ASSERT(k != NULL && !same_key(k, other));
    auth_key_free(k);
    CU_ASSERT_EQUAL(load("crlf", SECRET "\r\n", strlen(SECRET) + 2, &k, err, sizeof(err)), AUTH_OK);
    CU_ASSERT(k != NULL && same_key(k, want));
    auth_key_free(k);
    CU_ASSERT_EQUAL(load("bare", SECRET, strlen(SECRET), &k, err, sizeof(err)), AUTH_OK);
    CU_ASSERT(k != NULL && same_key(k, want));
    auth_key_free(k);
    /* Only one newline is trimmed: the second is part of the secret. */
    CU_ASSERT_EQUAL(load("two", SECRET "\n\n", strlen(SECRET) + 2, &k, err, sizeof(err)), AUTH_OK);
    CU_ASSERT(k != NULL && !same_key(k, want));
    struct auth_key *with_lf = key_of(SECRET "\n");
    CU_ASSERT(k != NULL && same_key(k, with_lf));
    auth_key_free(with_lf);
    auth_key_free(k);
    /* A 0644 file (a Kubernetes Secret) is fine. */
    write_file("open", SECRET, strlen(SECRET), path, sizeof(path));
    CU_ASSERT_EQUAL(chmod(path, 0644), 0);
    CU_ASSERT_EQUAL(auth_key_load(path, &k, err, sizeof(err)), AUTH_OK);
    auth_key_free(k);
    unlink(path);

    /* Lengths: exactly the minimum (with and without a newline), one short, the maximum. */
    char buf[AUTH_SECRET_MAX + 8];
    memset(buf, 's', sizeof(buf));
    CU_ASSERT_EQUAL(load("min", buf, AUTH_SECRET_MIN, &k, err, sizeof(err)), AUTH_OK);
    auth_key_free(k);
    buf[AUTH_SECRET_MIN] = '\n';
    CU_ASSERT_EQUAL(load("minlf", buf, AUTH_SECRET_MIN + 1, &k, err, sizeof(err)), AUTH_OK);
    auth_key_free(k);
    buf[AUTH_SECRET_MIN - 1] = '\n';
    CU_ASSERT_EQUAL(load("short", buf, AUTH_SECRET_MIN, &k, err, sizeof(err)), AUTH_ESECRET);
    CU_ASSERT_PTR_NULL(k);
    snprintf(expect, sizeof(expect),
             "cluster secret file %s/short holds 15 bytes (not counting one trailing newline); "
             "it must hold at least 16",
             tmpdir);
    CU_ASSERT_STRING_EQUAL(err, expect);
    memset(buf, 's', sizeof(buf));
    CU_ASSERT_EQUAL(load("max", buf, AUTH_SECRET_MAX, &k, err, sizeof(err)), AUTH_OK);
    auth_key_free(k);
    buf[AUTH_SECRET_MAX] = '\r';
    buf[AUTH_SECRET_MAX + 1] = '\n';
    CU_ASSERT_EQUAL(load("maxcrlf", buf, AUTH_SECRET_MAX + 2, &k, err, sizeof(err)), AUTH_OK);
    auth_key_free(k);
    memset(buf, 's', sizeof(buf));
    CU_ASSERT_EQUAL(load("long", buf, AUTH_SECRET_MAX + 1, &k, err, sizeof(err)), AUTH_ESECRET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/long holds 4097 bytes; the limit is 4096"));
    CU_ASSERT_EQUAL(load("huge", buf, sizeof(buf), &k, err, sizeof(err)), AUTH_ESECRET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/huge holds more than 4096 bytes; the limit is 4096"));
    CU_ASSERT_EQUAL(load("empty", "", 0, &k, err, sizeof(err)), AUTH_ESECRET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/empty is empty; it must hold at least 16 bytes"));
    CU_ASSERT_EQUAL(load("newline", "\n", 1, &k, err, sizeof(err)), AUTH_ESECRET);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "/newline is empty"));
    CU_ASSERT_PTR_NULL(k);

    /* Missing file, a directory: the path and the system's reason. */
    snprintf(path, sizeof(path), "%s/missing", tmpdir);
    CU_ASSERT_EQUAL(auth_key_load(path, &k, err, sizeof(err)), AUTH_ESYS);
    CU_ASSERT_PTR_NULL(k);
    snprintf(expect, sizeof(expect), "cluster secret file %s: open: No such file or directory",
             path);
    CU_ASSERT_STRING_EQUAL(err, expect);
    CU_ASSERT_EQUAL(auth_key_load(tmpdir, &k, err, sizeof(err)), AUTH_ESYS);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, tmpdir));
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "Is a directory"));

    /* The byte form has the same limits; nothing is trimmed there. */
    CU_ASSERT_EQUAL(auth_key_from_bytes((const uint8_t *)buf, AUTH_SECRET_MIN - 1, &k),
                    AUTH_ESECRET);
    CU_ASSERT_EQUAL(auth_key_from_bytes((const uint8_t *)buf, AUTH_SECRET_MAX + 1, &k),
                    AUTH_ESECRET);
    CU_ASSERT_PTR_NULL(k);
    auth_key_free(NULL);
    auth_key_free(other);
    auth_key_free(want);
    CU_ASSERT_EQUAL(rmdir(tmpdir), 0);
}

/* No proof or error text carries the secret, its hex, or the derived key's hex. */
static void test_no_secret_on_wire(void)
{
    const char *secrets[] = {SECRET, "0123456789abcdef0123456789abcdef"};
    for (size_t s = 0; s < sizeof(secrets) / sizeof(*secrets); s++) {
        const char *secret = secrets[s];
        size_t slen = strlen(secret);
        struct auth_key *k = key_of(secret), *other = key_of(OTHER_SECRET);
        struct auth_verifier *v = verifier_of(other);
        char hex[2 * 64 + 1], keyhex[65], why[256];
        uint8_t key[32];
        sodium_bin2hex(hex, sizeof(hex), (const uint8_t *)secret, slen < 64 ? slen : 64);
        crypto_generichash_state st;
        crypto_generichash_init(&st, NULL, 0, sizeof(key));
        crypto_generichash_update(&st, (const uint8_t *)"slotd peer proof v1", 19);
        crypto_generichash_update(&st, (const uint8_t *)secret, slen);
        crypto_generichash_final(&st, key, sizeof(key));
        sodium_bin2hex(keyhex, sizeof(keyhex), key, sizeof(key));
        int leaks = 0;
        for (int i = 0; i < 200; i++) {
            char proof[AUTH_PROOF_MAX];
            uint64_t node = 0;
            make(k, METHOD, 1 + (uint64_t)i, T0 + i, (const uint8_t *)secret, slen, proof);
            int rc = auth_verify(v, METHOD, SELF, proof, strlen(proof), (const uint8_t *)secret,
                                 slen, T0, true, &node, why, sizeof(why));
            CU_ASSERT_EQUAL(rc, AUTH_EBADPROOF);
            const char *texts[] = {proof, why};
            for (int t = 0; t < 2; t++) {
                /* any 12-byte window of the secret, 16 of its hex or of the key's hex (short
                 * enough to catch a leak, long enough that random hex never matches) */
                for (size_t at = 0; at + 12 <= slen; at++) {
                    leaks += memmem(texts[t], strlen(texts[t]), secret + at, 12) != NULL;
                }
                for (size_t at = 0; at + 16 <= strlen(hex); at++) {
                    leaks += memmem(texts[t], strlen(texts[t]), hex + at, 16) != NULL;
                }
                for (size_t at = 0; at + 16 <= strlen(keyhex); at++) {
                    leaks += memmem(texts[t], strlen(texts[t]), keyhex + at, 16) != NULL;
                }
            }
        }
        CU_ASSERT_EQUAL(leaks, 0);
        auth_verifier_free(v);
        auth_key_free(other);
        auth_key_free(k);
    }
}

static void test_make_args_and_signer(void)
{
    struct auth_key *k = key_of(SECRET);
    struct auth_verifier *v = verifier_of(k);
    char proof[AUTH_PROOF_MAX], small[AUTH_PROOF_MAX - 1];
    memset(proof, 'x', sizeof(proof));
    CU_ASSERT_EQUAL(auth_proof_make(k, METHOD, 0, SELF, T0, NULL, 0, proof, sizeof(proof)),
                    AUTH_EINVALID);
    CU_ASSERT_STRING_EQUAL(proof, "");
    CU_ASSERT_EQUAL(auth_proof_make(k, METHOD, 1, SELF, -1, NULL, 0, proof, sizeof(proof)),
                    AUTH_EINVALID);
    CU_ASSERT_EQUAL(auth_proof_make(k, METHOD, 1, SELF, T0, NULL, 0, small, sizeof(small)),
                    AUTH_EINVALID);

    struct auth_signer s = {.key = k, .node = 11};
    CU_ASSERT_EQUAL(auth_signer_sign(&s, METHOD, SELF, BODY, sizeof(BODY), proof, sizeof(proof)),
                    0);
    uint64_t node = 0;
    int64_t now = auth_now_wall_ms();
    CU_ASSERT(now > T0);
    CU_ASSERT_EQUAL(verify_at(v, proof, now, true, &node, NULL, 0), AUTH_OK);
    CU_ASSERT_EQUAL(node, 11);
    CU_ASSERT_EQUAL(auth_signer_sign(NULL, METHOD, SELF, BODY, sizeof(BODY), proof, sizeof(proof)),
                    AUTH_EINVALID);
    s.node = 0;
    CU_ASSERT_EQUAL(auth_signer_sign(&s, METHOD, SELF, BODY, sizeof(BODY), proof, sizeof(proof)),
                    AUTH_EINVALID);
    auth_verifier_free(v);
    auth_verifier_free(NULL);
    auth_key_free(k);
}

static void test_strerror(void)
{
    CU_ASSERT_STRING_EQUAL(auth_strerror(AUTH_OK), "ok");
    CU_ASSERT_STRING_EQUAL(auth_strerror(AUTH_EMISSING), "no peer proof");
    CU_ASSERT_STRING_EQUAL(auth_strerror(AUTH_EREPLAY), "peer proof replayed");
    CU_ASSERT_STRING_EQUAL(auth_strerror(AUTH_EFULL), "replay memory full");
    CU_ASSERT_STRING_EQUAL(auth_strerror(AUTH_EINVALID), "invalid argument");
    CU_ASSERT_STRING_EQUAL(auth_strerror(-1), "unknown error");
    CU_ASSERT_STRING_EQUAL(auth_strerror(999), "unknown error");
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite suite = CU_add_suite("auth", NULL, NULL);
    CU_add_test(suite, "round trip returns the node", test_round_trip);
    CU_add_test(suite, "proof format recomputed from the header's description", test_known_format);
    CU_add_test(suite, "other secret, body, method or field -> EBADPROOF", test_bad_proofs);
    CU_add_test(suite, "skew both ways; window edge passes", test_skew);
    CU_add_test(suite, "malformed and missing proofs, seeded edits", test_malformed);
    CU_add_test(suite, "replay refused with remember, allowed without", test_replay);
    CU_add_test(suite, "replay memory full, then free after the window", test_replay_full);
    CU_add_test(suite, "replay memory against a model (seed 0x5eed0001)", test_replay_model);
    CU_add_test(suite, "threads racing on one proof: accepted once", test_threads);
    CU_add_test(suite, "key files: trimming, limits, error text", test_key_files);
    CU_add_test(suite, "no secret, secret hex or key hex in proofs or why", test_no_secret_on_wire);
    CU_add_test(suite, "make arguments and the transport signer", test_make_args_and_signer);
    CU_add_test(suite, "strerror", test_strerror);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
