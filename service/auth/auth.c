/* auth.c - cluster-secret keys, making proofs, parsing and verifying them (see auth.h). */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "auth_internal.h"

#define KEY_CONTEXT "slotd peer proof v1" /* prefix of the secret in the key derivation */
#define MAC_CONTEXT "slotd-peer-v1"       /* first bytes of every MAC input */
#define MAC_BYTES crypto_auth_hmacsha256_BYTES
#define DIGEST_BYTES 32 /* BLAKE2b-256 of the request body */

_Static_assert(MAC_BYTES == 32, "the proof carries 64 hex digits of MAC");
_Static_assert(AUTH_SECRET_MIN > 0 && AUTH_SECRET_MIN <= AUTH_SECRET_MAX, "secret bounds");

struct auth_key {
    uint8_t bytes[crypto_auth_hmacsha256_KEYBYTES]; /* BLAKE2b-256(KEY_CONTEXT || secret) */
};

struct auth_verifier {
    const struct auth_key *key; /* borrowed; must outlive the verifier */
    pthread_mutex_t lock;       /* guards replay */
    struct auth__replay replay; /* bound: AUTH_REPLAY_MAX proofs */
};

/* A proof text's fields once parsed. */
struct proof {
    uint64_t node;
    int64_t wall_ms;
    uint8_t nonce[AUTH__NONCE_BYTES];
    uint8_t mac[MAC_BYTES];
};

SLOTD_ERRLIST_STRERROR(auth_strerror, AUTH_ERRORS, "unknown error")

/* ---- Keys -------------------------------------------------------------------------------- */

int auth_key_from_bytes(const uint8_t *secret, size_t len, struct auth_key **out)
{
    *out = NULL;
    if (len < AUTH_SECRET_MIN || len > AUTH_SECRET_MAX) {
        return AUTH_ESECRET;
    }
    if (sodium_init() < 0) {
        return AUTH_ESYS;
    }
    struct auth_key *k = sodium_malloc(sizeof(*k));
    if (k == NULL) {
        return AUTH_ESYS;
    }
    crypto_generichash_state st;
    crypto_generichash_init(&st, NULL, 0, sizeof(k->bytes));
    crypto_generichash_update(&st, (const uint8_t *)KEY_CONTEXT, strlen(KEY_CONTEXT));
    crypto_generichash_update(&st, secret, len);
    crypto_generichash_final(&st, k->bytes, sizeof(k->bytes));
    sodium_memzero(&st, sizeof(st));
    sodium_mprotect_readonly(k); /* a stray write faults; sodium_free undoes it */
    *out = k;
    return AUTH_OK;
}

void auth_key_free(struct auth_key *k)
{
    sodium_free(k); /* wipes; NULL is a no-op */
}

/* Reads at most cap bytes of fd into buf; *n gets the count. Returns 0 or an errno value. */
static int read_all(int fd, uint8_t *buf, size_t cap, size_t *n)
{
    *n = 0;
    while (*n < cap) {
        ssize_t r = read(fd, buf + *n, cap - *n);
        if (r < 0 && errno == EINTR) {
            continue;
        }
        if (r < 0) {
            return errno;
        }
        if (r == 0) {
            break;
        }
        *n += (size_t)r;
    }
    return 0;
}

/* Trims one trailing "\n" or "\r\n" off buf[0, *n). */
static void trim_newline(const uint8_t *buf, size_t *n)
{
    if (*n > 0 && buf[*n - 1] == '\n') {
        (*n)--;
        if (*n > 0 && buf[*n - 1] == '\r') {
            (*n)--;
        }
    }
}

/* The length check of auth_key_load with its sentence; n is after trimming, read_n before. */
static int check_secret_len(const char *path, size_t n, size_t read_n, char *err, size_t errlen)
{
    if (read_n > AUTH_SECRET_MAX + 2) {
        snprintf(err, errlen, "cluster secret file %s holds more than %d bytes; the limit is %d",
                 path, AUTH_SECRET_MAX, AUTH_SECRET_MAX);
        return AUTH_ESECRET;
    }
    if (n == 0) {
        snprintf(err, errlen, "cluster secret file %s is empty; it must hold at least %d bytes",
                 path, AUTH_SECRET_MIN);
        return AUTH_ESECRET;
    }
    if (n < AUTH_SECRET_MIN) {
        snprintf(err, errlen,
                 "cluster secret file %s holds %zu bytes (not counting one trailing newline); "
                 "it must hold at least %d",
                 path, n, AUTH_SECRET_MIN);
        return AUTH_ESECRET;
    }
    if (n > AUTH_SECRET_MAX) {
        snprintf(err, errlen, "cluster secret file %s holds %zu bytes; the limit is %d", path, n,
                 AUTH_SECRET_MAX);
        return AUTH_ESECRET;
    }
    return AUTH_OK;
}

int auth_key_load(const char *path, struct auth_key **out, char *err, size_t errlen)
{
    /* The longest acceptable file is AUTH_SECRET_MAX bytes and "\r\n"; one more tells "longer". */
    const size_t cap = AUTH_SECRET_MAX + 3;
    *out = NULL;
    err[0] = '\0';
    if (sodium_init() < 0) {
        snprintf(err, errlen, "cluster secret file %s: libsodium failed to initialize", path);
        return AUTH_ESYS;
    }
    uint8_t *buf = sodium_malloc(cap); /* guarded, wiped by sodium_free */
    if (buf == NULL) {
        snprintf(err, errlen, "cluster secret file %s: out of memory", path);
        return AUTH_ESYS;
    }
    int rc = AUTH_ESYS;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        snprintf(err, errlen, "cluster secret file %s: open: %s", path, strerror(errno));
        goto err_after_buf;
    }
    size_t n = 0;
    int e = read_all(fd, buf, cap, &n);
    close(fd);
    if (e != 0) {
        snprintf(err, errlen, "cluster secret file %s: read: %s", path, strerror(e));
        goto err_after_buf;
    }
    size_t read_n = n;
    trim_newline(buf, &n);
    rc = check_secret_len(path, n, read_n, err, errlen);
    if (rc != AUTH_OK) {
        goto err_after_buf;
    }
    rc = auth_key_from_bytes(buf, n, out);
    if (rc != AUTH_OK) {
        snprintf(err, errlen, "cluster secret file %s: %s", path, auth_strerror(rc));
        goto err_after_buf;
    }
    sodium_free(buf);
    return AUTH_OK;

err_after_buf:
    sodium_free(buf);
    return rc;
}

/* ---- MAC --------------------------------------------------------------------------------- */

static void put_le64(uint8_t out[8], uint64_t v)
{
    for (int i = 0; i < 8; i++) {
        out[i] = (uint8_t)(v >> (8 * i));
    }
}

/* HMAC-SHA-256 with k over MAC_CONTEXT | u32 LE len(method) | method | u64 LE node |
 * u64 LE to | i64 LE wall_ms | nonce | BLAKE2b-256(body). The only variable-length field is
 * length-prefixed, so no two distinct inputs encode alike. method_len fits in 32 bits. */
static void mac_compute(const struct auth_key *k, const char *method, size_t method_len,
                        uint64_t node, uint64_t to, int64_t wall_ms,
                        const uint8_t nonce[AUTH__NONCE_BYTES], const uint8_t *body, size_t len,
                        uint8_t mac[MAC_BYTES])
{
    static const uint8_t empty[1];
    uint8_t digest[DIGEST_BYTES], fixed[8 + 8 + 8], mlen[4];
    crypto_generichash(digest, sizeof(digest), len > 0 ? body : empty, len, NULL, 0);
    for (int i = 0; i < 4; i++) {
        mlen[i] = (uint8_t)((uint64_t)method_len >> (8 * i));
    }
    put_le64(fixed, node);
    put_le64(fixed + 8, to);
    put_le64(fixed + 16, (uint64_t)wall_ms);

    crypto_auth_hmacsha256_state st;
    crypto_auth_hmacsha256_init(&st, k->bytes, sizeof(k->bytes));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)MAC_CONTEXT, strlen(MAC_CONTEXT));
    crypto_auth_hmacsha256_update(&st, mlen, sizeof(mlen));
    crypto_auth_hmacsha256_update(&st, (const uint8_t *)method, method_len);
    crypto_auth_hmacsha256_update(&st, fixed, sizeof(fixed));
    crypto_auth_hmacsha256_update(&st, nonce, AUTH__NONCE_BYTES);
    crypto_auth_hmacsha256_update(&st, digest, sizeof(digest));
    crypto_auth_hmacsha256_final(&st, mac);
    sodium_memzero(&st, sizeof(st)); /* holds key-derived pads */
}

/* ---- Making proofs ----------------------------------------------------------------------- */

int auth_proof_make(const struct auth_key *k, const char *method, uint64_t node, uint64_t to,
                    int64_t wall_ms, const uint8_t *body, size_t len, char *out, size_t outlen)
{
    assert(k != NULL && method != NULL && out != NULL);
    assert(body != NULL || len == 0);
    if (outlen > 0) {
        out[0] = '\0';
    }
    size_t method_len = strlen(method);
    if (node == 0 || wall_ms < 0 || method_len > UINT32_MAX || outlen < AUTH_PROOF_MAX) {
        return AUTH_EINVALID;
    }
    uint8_t nonce[AUTH__NONCE_BYTES], mac[MAC_BYTES];
    char nonce_hex[2 * AUTH__NONCE_BYTES + 1], mac_hex[2 * MAC_BYTES + 1];
    randombytes_buf(nonce, sizeof(nonce));
    mac_compute(k, method, method_len, node, to, wall_ms, nonce, body, len, mac);
    sodium_bin2hex(nonce_hex, sizeof(nonce_hex), nonce, sizeof(nonce));
    sodium_bin2hex(mac_hex, sizeof(mac_hex), mac, sizeof(mac));
    int n = snprintf(out, outlen, "v1.%" PRIu64 ".%" PRId64 ".%s.%s", node, wall_ms, nonce_hex,
                     mac_hex);
    assert(n > 0 && (size_t)n < AUTH_PROOF_MAX);
    (void)n;
    return AUTH_OK;
}

int64_t auth_now_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int auth_signer_sign(void *ctx, const char *method, uint64_t to, const uint8_t *body, size_t len,
                     char *out, size_t outlen)
{
    const struct auth_signer *s = ctx;
    if (s == NULL || s->key == NULL) {
        return AUTH_EINVALID;
    }
    return auth_proof_make(s->key, method, s->node, to, auth_now_wall_ms(), body, len, out, outlen);
}

/* ---- Parsing ----------------------------------------------------------------------------- */

int auth__decimal_parse(const char *s, size_t n, uint64_t max, uint64_t *v)
{
    if (n == 0 || n > 20 || (n > 1 && s[0] == '0')) {
        return -1;
    }
    uint64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (s[i] < '0' || s[i] > '9') {
            return -1;
        }
        unsigned d = (unsigned)(s[i] - '0');
        if (x > (max - d) / 10) {
            return -1; /* x * 10 + d would exceed max */
        }
        x = x * 10 + d;
    }
    *v = x;
    return 0;
}

static int hex_digit(char c)
{
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1; /* uppercase too: proofs are made lowercase, and one proof has one spelling */
}

/* Exactly 2 * size lowercase hex digits into out. Returns 0 or -1. */
static int parse_hex(const char *s, size_t n, uint8_t *out, size_t size)
{
    if (n != 2 * size) {
        return -1;
    }
    for (size_t i = 0; i < size; i++) {
        int hi = hex_digit(s[2 * i]), lo = hex_digit(s[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            return -1;
        }
        out[i] = (uint8_t)(hi << 4 | lo);
    }
    return 0;
}

/* Parses text[0, n) into p. Returns 0, or -1 with *reason a static phrase. */
static int proof_parse(const char *text, size_t n, struct proof *p, const char **reason)
{
    const char *field[5];
    size_t field_len[5], count = 0, start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || text[i] == '.') {
            if (count == 5) {
                *reason = "it has more than five dot-separated fields";
                return -1;
            }
            field[count] = text + start;
            field_len[count++] = i - start;
            start = i + 1;
        }
    }
    uint64_t node = 0, ms = 0;
    if (count != 5) {
        *reason = "it has fewer than five dot-separated fields";
    } else if (field_len[0] != 2 || memcmp(field[0], "v1", 2) != 0) {
        *reason = "it is not version v1";
    } else if (auth__decimal_parse(field[1], field_len[1], UINT64_MAX, &node) != 0 || node == 0) {
        *reason = "the node is not a decimal from 1 to 18446744073709551615";
    } else if (auth__decimal_parse(field[2], field_len[2], INT64_MAX, &ms) != 0) {
        *reason = "the time is not a decimal ms count from 0 to 9223372036854775807";
    } else if (parse_hex(field[3], field_len[3], p->nonce, sizeof(p->nonce)) != 0) {
        *reason = "the nonce is not 32 lowercase hex digits";
    } else if (parse_hex(field[4], field_len[4], p->mac, sizeof(p->mac)) != 0) {
        *reason = "the mac is not 64 lowercase hex digits";
    } else {
        p->node = node;
        p->wall_ms = (int64_t)ms;
        return 0;
    }
    return -1;
}

/* ---- Verifying --------------------------------------------------------------------------- */

int auth_verifier_new(const struct auth_key *k, struct auth_verifier **out)
{
    assert(k != NULL);
    *out = NULL;
    struct auth_verifier *v = calloc(1, sizeof(*v));
    if (v == NULL) {
        return AUTH_ESYS;
    }
    if (pthread_mutex_init(&v->lock, NULL) != 0) {
        goto err_after_alloc;
    }
    v->key = k;
    auth__replay_init(&v->replay); /* sodium_init() ran when k was made */
    *out = v;
    return AUTH_OK;

err_after_alloc:
    free(v);
    return AUTH_ESYS;
}

void auth_verifier_free(struct auth_verifier *v)
{
    if (v == NULL) {
        return;
    }
    pthread_mutex_destroy(&v->lock);
    free(v);
}

/* "2024-05-01 12:00:00.000 UTC" for wall_ms, or "<ms> ms since the epoch" past gmtime's range. */
static void format_wall(int64_t wall_ms, char *buf, size_t size)
{
    time_t sec = (time_t)(wall_ms / 1000);
    struct tm tm;
    char day[32];
    if (wall_ms >= 0 && gmtime_r(&sec, &tm) != NULL &&
        strftime(day, sizeof(day), "%Y-%m-%d %H:%M:%S", &tm) > 0) {
        snprintf(buf, size, "%s.%03d UTC", day, (int)(wall_ms % 1000));
    } else {
        snprintf(buf, size, "%" PRId64 " ms since the epoch", wall_ms);
    }
}

/* AUTH_ESKEW with its sentence when the proof time is more than the window from now. */
static int check_skew(const struct proof *p, int64_t now_wall_ms, char *why, size_t whylen)
{
    bool ahead = p->wall_ms > now_wall_ms;
    /* Unsigned: the distance between any two int64 values fits in a uint64. */
    uint64_t d = ahead ? (uint64_t)p->wall_ms - (uint64_t)now_wall_ms
                       : (uint64_t)now_wall_ms - (uint64_t)p->wall_ms;
    if (d <= AUTH_WINDOW_MS) {
        return AUTH_OK;
    }
    if (why != NULL) {
        char when[64];
        format_wall(p->wall_ms, when, sizeof(when));
        snprintf(why, whylen,
                 "proof time %s from node %" PRIu64 " is %" PRIu64
                 " ms %s this node's clock; the limit is %d ms",
                 when, p->node, d, ahead ? "ahead of" : "behind", AUTH_WINDOW_MS);
    }
    return AUTH_ESKEW;
}

/* The replay check under the verifier's lock, with its sentence. */
static int check_replay(struct auth_verifier *v, const struct proof *p, int64_t now_wall_ms,
                        char *why, size_t whylen)
{
    pthread_mutex_lock(&v->lock);
    int rc = auth__replay_admit(&v->replay, p->node, p->wall_ms, p->nonce, now_wall_ms);
    int64_t horizon_ms = v->replay.horizon_ms;
    pthread_mutex_unlock(&v->lock);
    if (rc == AUTH_OK || why == NULL) {
        return rc;
    }
    char when[64], edge[64];
    format_wall(p->wall_ms, when, sizeof(when));
    if (rc == AUTH_EREPLAY) {
        snprintf(why, whylen, "proof from node %" PRIu64 " at %s was already used (a replay)",
                 p->node, when);
    } else if (rc == AUTH_EFULL) {
        snprintf(why, whylen,
                 "the replay memory holds %d proofs still inside the %d ms window; refusing "
                 "rather than forgetting one",
                 AUTH_REPLAY_MAX, AUTH_WINDOW_MS);
    } else {
        format_wall(horizon_ms, edge, sizeof(edge));
        snprintf(why, whylen,
                 "proof time %s from node %" PRIu64 " is before %s, which the replay memory "
                 "no longer covers (this node's clock went back)",
                 when, p->node, edge);
    }
    return rc;
}

int auth_verify(struct auth_verifier *v, const char *method, uint64_t self, const char *proof,
                size_t proof_len, const uint8_t *body, size_t len, int64_t now_wall_ms,
                bool remember, uint64_t *node_out, char *why, size_t whylen)
{
    assert(v != NULL && method != NULL && node_out != NULL);
    assert(body != NULL || len == 0);
    assert(why == NULL || whylen > 0);
    if (why != NULL) {
        why[0] = '\0';
    }
    if (proof == NULL || proof_len == 0) {
        if (why != NULL) {
            snprintf(why, whylen, "the request has no %s header", AUTH_PROOF_HEADER);
        }
        return AUTH_EMISSING;
    }
    struct proof p;
    const char *reason = "it is too long";
    if (proof_len >= AUTH_PROOF_MAX || proof_parse(proof, proof_len, &p, &reason) != 0) {
        if (why != NULL) {
            snprintf(why, whylen, "proof header is not v1.<node>.<ms>.<nonce>.<mac>: %s", reason);
        }
        return AUTH_EMALFORMED;
    }
    size_t method_len = strlen(method);
    if (method_len > UINT32_MAX) {
        if (why != NULL) {
            snprintf(why, whylen, "the method name is longer than %" PRIu32 " bytes", UINT32_MAX);
        }
        return AUTH_EINVALID; /* auth_proof_make makes no proof for such a method */
    }
    uint8_t mac[MAC_BYTES];
    mac_compute(v->key, method, method_len, p.node, self, p.wall_ms, p.nonce, body, len, mac);
    if (sodium_memcmp(mac, p.mac, sizeof(mac)) != 0) {
        if (why != NULL) {
            snprintf(why, whylen,
                     "proof claiming node %" PRIu64 " does not match the request (another "
                     "cluster secret, method, body or receiving node than %" PRIu64 ")",
                     p.node, self);
        }
        return AUTH_EBADPROOF;
    }
    int rc = check_skew(&p, now_wall_ms, why, whylen);
    if (rc == AUTH_OK && remember) {
        rc = check_replay(v, &p, now_wall_ms, why, whylen);
    }
    if (rc == AUTH_OK) {
        *node_out = p.node;
    }
    return rc;
}

size_t auth_verifier_remembered(struct auth_verifier *v)
{
    pthread_mutex_lock(&v->lock);
    size_t n = v->replay.n_live;
    pthread_mutex_unlock(&v->lock);
    return n;
}

int auth_verifier_check_invariants(struct auth_verifier *v)
{
    pthread_mutex_lock(&v->lock);
    int rc = auth__replay_check(&v->replay);
    pthread_mutex_unlock(&v->lock);
    return rc;
}
