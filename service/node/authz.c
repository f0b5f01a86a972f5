/* authz.c - client-port authentication and permission checks, per-node users, auth_init. */
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc.h>
#include <sodium.h>

#include "service/log/log.h"
#include "service/auth/auth.h"
#include "service/auth/token.h"
#include "service/node/authz.h"
#include "service/runtime/runtime.h"
#include "slotd/v1/admin.pb-c.h"

#define AUTHZ_INIT_RETRY_MS 2000
#define AUTHZ_INIT_TIMEOUT_MS 5000
#define AUTHZ_ROOT_GENERATED_BYTES 18 /* 24 base64 characters */
#define AUTHZ_TOKEN_CACHE 256         /* verified tokens remembered per node (direct-mapped) */

/* A token whose MAC this node verified: the same bytes later skip the MAC; the expiry and the
 * user's revision are still checked on every call. */
struct token_entry {
    uint64_t key_gen; /* node_authz.key_gen when verified; 0 = empty */
    size_t len;
    char text[AUTH_TOKEN_MAX];
    struct auth_token t;
};

struct node_authz {
    bool enabled;
    uint64_t token_ttl_ms;
    struct auth_pwhash_pool *pool;
    pthread_mutex_t mu;
    struct node_authz_snap *snap; /* under mu */
    struct runtime *rt;           /* set once before the runtime starts */
    uint64_t node_id;
    /* auth_init: one proposal at a time, retried every AUTHZ_INIT_RETRY_MS (loop thread reads,
     * the completion writes). */
    _Atomic bool init_inflight;
    _Atomic int64_t init_next_ms;
    bool root_from_file;
    char root_password[AUTH_PASSWORD_MAX + 1]; /* the file's, or the generated one */
    size_t root_password_len;
    /* token key generation: + 1 whenever a published state's token key differs (under mu;
     * copied into each snapshot) */
    uint64_t key_gen;
    uint8_t key[CTL_TOKEN_KEY_BYTES]; /* the key of key_gen (under mu) */
    pthread_mutex_t cache_mu;
    uint8_t cache_hash_key[crypto_shorthash_KEYBYTES]; /* SipHash key of the cache index */
    struct token_entry cache[AUTHZ_TOKEN_CACHE];       /* under cache_mu */
};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int node_authz_new(const struct node_authz_options *o, struct node_authz **out, char *err,
                   size_t errlen)
{
    struct node_authz *a = calloc(1, sizeof(*a));
    if (a == NULL) {
        snprintf(err, errlen, "auth: out of memory");
        return -1;
    }
    a->enabled = o->enabled;
    a->token_ttl_ms = o->token_ttl_ms;
    if (o->root_password != NULL) {
        if (o->root_password_len < 1 || o->root_password_len > AUTH_PASSWORD_MAX) {
            snprintf(err, errlen, "--root-password-file: the password must be 1..%d bytes",
                     AUTH_PASSWORD_MAX);
            goto err_after_a;
        }
        memcpy(a->root_password, o->root_password, o->root_password_len);
        a->root_password_len = o->root_password_len;
        a->root_from_file = true;
    }
    if (pthread_mutex_init(&a->mu, NULL) != 0) {
        snprintf(err, errlen, "auth: cannot create a mutex");
        goto err_after_a;
    }
    if (pthread_mutex_init(&a->cache_mu, NULL) != 0) {
        snprintf(err, errlen, "auth: cannot create a mutex");
        pthread_mutex_destroy(&a->mu);
        goto err_after_a;
    }
    if (auth_pwhash_pool_new(1, AUTHZ_PWHASH_QUEUE_MAX, &a->pool) == AUTH_OK) {
        randombytes_buf(a->cache_hash_key, sizeof(a->cache_hash_key)); /* sodium_init ran */
    } else {
        snprintf(err, errlen, "auth: cannot start the password-hash worker");
        goto err_after_mu;
    }
    *out = a;
    return 0;

err_after_mu:
    pthread_mutex_destroy(&a->cache_mu);
    pthread_mutex_destroy(&a->mu);
err_after_a:
    sodium_memzero(a, sizeof(*a));
    free(a);
    return -1;
}

void node_authz_set_runtime(struct node_authz *a, struct runtime *rt, uint64_t node_id)
{
    a->rt = rt;
    a->node_id = node_id;
}

void node_authz_free(struct node_authz *a)
{
    if (a == NULL) {
        return;
    }
    auth_pwhash_pool_free(a->pool);
    node_authz_snap_release(a->snap);
    pthread_mutex_destroy(&a->cache_mu);
    pthread_mutex_destroy(&a->mu);
    sodium_memzero(a, sizeof(*a));
    free(a);
}

bool node_authz_enabled(const struct node_authz *a)
{
    return a != NULL && a->enabled;
}

struct auth_pwhash_pool *node_authz_pool(struct node_authz *a)
{
    return a->pool;
}

uint64_t node_authz_token_ttl_ms(const struct node_authz *a)
{
    return a->token_ttl_ms;
}

struct node_authz_snap *node_authz_snap_acquire(struct node_authz *a)
{
    pthread_mutex_lock(&a->mu);
    struct node_authz_snap *s = a->snap;
    if (s != NULL) {
        atomic_fetch_add(&s->refs, 1);
    }
    pthread_mutex_unlock(&a->mu);
    return s;
}

void node_authz_snap_release(struct node_authz_snap *s)
{
    if (s != NULL && atomic_fetch_sub(&s->refs, 1) == 1) {
        sodium_memzero(&s->auth, sizeof(s->auth));
        free(s);
    }
}

/* ---- auth_init on the controller leader ---- */

static void init_done(void *arg, int status, const char *message, const uint8_t *resp,
                      size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct node_authz *a = arg;
    (void)details;
    (void)details_len;
    bool changed = false;
    if (status == 0) {
        Slotd__V1__AdminWriteResponse *r =
            slotd__v1__admin_write_response__unpack(NULL, resp_len, resp);
        changed = r != NULL && r->outcome == SLOTD__V1__OUTCOME__OUTCOME_CHANGED;
        if (r != NULL) {
            slotd__v1__admin_write_response__free_unpacked(r, NULL);
        }
    }
    if (changed && !a->root_from_file) {
        /* The one time this password is shown: auth_init applied with its hash. */
        slog("warn", "auth",
             "msg=\"auth enabled; user root was created with a "
             "generated password, shown once (change it: slotctl user passwd root)\" "
             "root_password=%.*s",
             (int)a->root_password_len, a->root_password);
    } else if (changed) {
        slog("info", "auth",
             "msg=\"auth enabled; user root was created "
             "with the password of --root-password-file\"");
    } else if (status == GRPC_STATUS_UNAVAILABLE && !a->root_from_file) {
        /* The proposal may have been applied: this may be root's password, so it is shown; a
         * later attempt (the state then still has no users) shows its own. */
        slog("warn", "auth",
             "msg=\"auth_init outcome unknown; if it was applied, "
             "user root's generated password is this one, shown once\" err=\"%s\" "
             "root_password=%.*s",
             message ? message : "", (int)a->root_password_len, a->root_password);
    } else {
        slog("info", "auth",
             "msg=\"auth_init not applied\" status=%d "
             "err=\"%s\"",
             status, message ? message : "");
    }
    if (!a->root_from_file) {
        sodium_memzero(a->root_password, sizeof(a->root_password));
        a->root_password_len = 0;
    }
    atomic_store(&a->init_next_ms, mono_ms() + AUTHZ_INIT_RETRY_MS);
    atomic_store(&a->init_inflight, false);
}

/* The pool hashed root's password (worker thread): propose auth_init with a fresh token key. */
static void init_hashed(void *arg, int rc, const char *hash)
{
    struct node_authz *a = arg;
    uint8_t key[CTL_TOKEN_KEY_BYTES];
    char *cmd = NULL;
    randombytes_buf(key, sizeof(key));
    if (rc != AUTH_OK || ctl_cmd_auth_init(key, hash, &cmd) != CTL_OK) {
        sodium_memzero(key, sizeof(key));
        atomic_store(&a->init_inflight, false);
        return;
    }
    sodium_memzero(key, sizeof(key));
    struct rpc_call *call = rpc_call_new_local("/slotd.v1.Admin/AuthInit",
                                               mono_ms() + AUTHZ_INIT_TIMEOUT_MS, init_done, a);
    struct slotd_error err;
    if (call == NULL) {
        atomic_store(&a->init_inflight, false);
    } else if (runtime_submit_propose(a->rt, 0, (const uint8_t *)cmd, strlen(cmd), call, &err) !=
               0) {
        rpc_call_fail(call, &err); /* answers through init_done */
    }
    sodium_memzero(cmd, strlen(cmd));
    ctl_free(cmd);
}

static void maybe_init(struct node_authz *a, const struct ctl_state *s)
{
    if (!a->enabled || a->rt == NULL || s->revision == 0 || s->auth.enabled ||
        !runtime_ctl_voter(a->rt) || runtime_ctl_leader(a->rt) != a->node_id ||
        mono_ms() < atomic_load(&a->init_next_ms) || atomic_exchange(&a->init_inflight, true)) {
        return;
    }
    if (!a->root_from_file) {
        uint8_t raw[AUTHZ_ROOT_GENERATED_BYTES];
        randombytes_buf(raw, sizeof(raw));
        sodium_bin2base64(a->root_password, sizeof(a->root_password), raw, sizeof(raw),
                          sodium_base64_VARIANT_URLSAFE_NO_PADDING);
        a->root_password_len = strlen(a->root_password);
        sodium_memzero(raw, sizeof(raw));
    }
    if (auth_pwhash_hash(a->pool, a->root_password, a->root_password_len, init_hashed, a) !=
        AUTH_OK) {
        atomic_store(&a->init_inflight, false);
    }
}

void node_authz_on_ctl_state(void *ctx, const struct ctl_state *s)
{
    struct node_authz *a = ctx;
    pthread_mutex_lock(&a->mu);
    bool same = a->snap != NULL && a->snap->revision == s->revision;
    pthread_mutex_unlock(&a->mu);
    if (!same) {
        struct node_authz_snap *n = malloc(sizeof(*n));
        if (n == NULL) {
            slog("error", "auth",
                 "msg=\"users and roles not refreshed: out "
                 "of memory\"");
            return;
        }
        atomic_init(&n->refs, 1);
        n->revision = s->revision;
        n->auth = s->auth;
        pthread_mutex_lock(&a->mu);
        if (a->key_gen == 0 || sodium_memcmp(a->key, s->auth.token_key, sizeof(a->key)) != 0) {
            memcpy(a->key, s->auth.token_key, sizeof(a->key));
            a->key_gen++; /* cached verifications under another key no longer match */
        }
        n->key_gen = a->key_gen;
        struct node_authz_snap *old = a->snap;
        a->snap = n;
        pthread_mutex_unlock(&a->mu);
        node_authz_snap_release(old);
    }
    maybe_init(a, s);
}

/* ---- who calls ---- */

/* 1 when the call is a local one (c filled): made by this node's own code, or a request another
 * node forwarded on the peer plane (Peer/Forward, whose sender service/node authenticated there);
 * nodes never call each other's client port. 0 otherwise. */
static int caller_local(struct rpc_call *call, struct node_caller *c)
{
    if (!rpc_call_is_local(call)) {
        return 0;
    }
    c->kind = NODE_CALLER_NODE;
    c->node = 0;
    return 1;
}

/* The node id of "node-<id>" (canonical decimal), 0 otherwise. */
static uint64_t cert_node(const char *name)
{
    if (strncmp(name, "node-", 5) != 0 || name[5] == '\0' || name[5] == '0' ||
        strlen(name + 5) > 18 || strspn(name + 5, "0123456789") != strlen(name + 5)) {
        return 0;
    }
    return strtoull(name + 5, NULL, 10);
}

/* 1 when the client certificate names a node or a user (c filled), 0 when it names neither. */
static int caller_by_cert(bool peer_mtls, struct rpc_call *call, struct node_authz_snap *snap,
                          struct node_caller *c, char *cn, size_t cnlen)
{
    char names[8][RPC_PEER_NAME_MAX];
    size_t n = rpc_call_peer_names(call, names, 8);
    cn[0] = '\0';
    if (n == 0) {
        return 0;
    }
    snprintf(cn, cnlen, "%s", names[0]);
    for (size_t i = 0; peer_mtls && i < n; i++) {
        uint64_t node = cert_node(names[i]);
        if (node != 0) {
            c->kind = NODE_CALLER_NODE;
            c->node = node;
            return 1;
        }
    }
    const struct ctl_user *u = snap != NULL ? ctl_auth_user(&snap->auth, names[0]) : NULL;
    if (u == NULL) {
        return 0;
    }
    c->kind = NODE_CALLER_USER;
    c->user = u;
    return 1;
}

/* auth_token_verify, with the MAC skipped for a token verified before under the same key. */
static int verify_cached(struct node_authz *a, const struct node_authz_snap *snap, const char *tok,
                         size_t len, uint64_t now, struct auth_token *t)
{
    if (len == 0 || len >= AUTH_TOKEN_MAX) {
        return auth_token_verify(snap->auth.token_key, tok, len, now, t);
    }
    uint8_t h[crypto_shorthash_BYTES];
    crypto_shorthash(h, (const uint8_t *)tok, len, a->cache_hash_key);
    struct token_entry *e = &a->cache[(h[0] | (unsigned)h[1] << 8) % AUTHZ_TOKEN_CACHE];
    pthread_mutex_lock(&a->cache_mu);
    bool hit = e->key_gen == snap->key_gen && e->len == len && memcmp(e->text, tok, len) == 0;
    if (hit) {
        *t = e->t;
    }
    pthread_mutex_unlock(&a->cache_mu);
    if (hit) {
        return now >= t->expires_ms ? AUTH_ESKEW : AUTH_OK;
    }
    int rc = auth_token_verify(snap->auth.token_key, tok, len, now, t);
    if (rc == AUTH_OK) {
        pthread_mutex_lock(&a->cache_mu);
        e->key_gen = snap->key_gen;
        e->len = len;
        memcpy(e->text, tok, len);
        e->t = *t;
        pthread_mutex_unlock(&a->cache_mu);
    }
    return rc;
}

static int caller_by_token(struct node_authz *a, struct node_authz_snap *snap, const char *hdr,
                           size_t hlen, struct node_caller *c, struct slotd_error *err)
{
    size_t sl = strlen(AUTH_TOKEN_SCHEME);
    if (hlen < sl || strncasecmp(hdr, AUTH_TOKEN_SCHEME, sl) != 0) {
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "authorization: expected \"Bearer <token>\" (a token from "
                        "Admin.Authenticate)");
        return -1;
    }
    struct auth_token t;
    int rc = verify_cached(a, snap, hdr + sl, hlen - sl, (uint64_t)auth_now_wall_ms(), &t);
    if (rc == AUTH_EMALFORMED || rc == AUTH_EMISSING) {
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "token: malformed (expected "
                        "t1.<user>.<revision>.<expires_ms>.<mac>)");
        return -1;
    }
    if (rc == AUTH_EBADPROOF) {
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "token: the signature does not match (not made by this cluster, or "
                        "edited); authenticate again");
        return -1;
    }
    if (rc == AUTH_ESKEW) {
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "token: expired at %" PRIu64 " ms; authenticate again", t.expires_ms);
        return -1;
    }
    const struct ctl_user *u = ctl_auth_user(&snap->auth, t.user);
    if (u == NULL || u->revision != t.user_revision) {
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "token: user %s was %s since it was issued (token revision %" PRIu64
                        "); authenticate again",
                        t.user, u == NULL ? "deleted" : "changed", t.user_revision);
        return -1;
    }
    c->kind = NODE_CALLER_USER;
    c->user = u;
    return 0;
}

int node_authz_caller(struct node_authz *a, bool peer_mtls, struct rpc_call *call,
                      const char *method, const uint8_t *req, size_t len, struct node_caller *c,
                      struct slotd_error *err)
{
    memset(c, 0, sizeof(*c));
    if (!node_authz_enabled(a)) {
        c->kind = NODE_CALLER_OPEN;
        return 0;
    }
    if (caller_local(call, c) == 1) {
        return 0;
    }
    struct node_authz_snap *snap = node_authz_snap_acquire(a);
    size_t hlen = 0;
    const char *hdr = rpc_call_header(call, AUTH_TOKEN_HEADER, &hlen);
    bool token = hdr != NULL && hlen > 0;
    char cn[RPC_PEER_NAME_MAX] = "";
    /* A token, when sent, names the caller; else a certificate may (a node's, or a user's CN) */
    if (!token && caller_by_cert(peer_mtls, call, snap, c, cn, sizeof(cn)) == 1) {
        if (c->kind == NODE_CALLER_USER) {
            c->snap = snap;
        } else {
            node_authz_snap_release(snap);
        }
        return 0;
    }
    if (snap == NULL || !snap->auth.enabled) {
        slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                        "auth is on but this node holds no users yet (controller revision "
                        "%" PRIu64 "); retry",
                        snap != NULL ? snap->revision : 0);
        err->retry_after_ms = 500;
        node_authz_snap_release(snap);
        return -1;
    }
    if (!token) {
        if (cn[0] != '\0') {
            slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                            "client certificate CN \"%.64s\" is not a user, and no token was "
                            "sent",
                            cn);
        } else {
            slotd_error_set(err, SLOTD_EUNAUTHENTICATED,
                            "no credentials: send \"authorization: Bearer <token>\" (from "
                            "Admin.Authenticate) or a client certificate whose CN is a user");
        }
        node_authz_snap_release(snap);
        return -1;
    }
    if (caller_by_token(a, snap, hdr, hlen, c, err) != 0) {
        node_authz_snap_release(snap);
        return -1;
    }
    c->snap = snap;
    return 0;
}

bool node_authz_is_node(bool peer_mtls, struct rpc_call *call)
{
    struct node_caller c;
    char cn[RPC_PEER_NAME_MAX];
    memset(&c, 0, sizeof(c));
    if (caller_local(call, &c) == 1)
        return true;
    return caller_by_cert(peer_mtls, call, NULL, &c, cn, sizeof(cn)) == 1 &&
           c.kind == NODE_CALLER_NODE;
}

void node_caller_release(struct node_caller *c)
{
    node_authz_snap_release(c->snap);
    c->snap = NULL;
    c->user = NULL;
}

int node_authz_allowed(const struct node_caller *c, const struct ctl_need *need,
                       struct slotd_error *err)
{
    if (c->kind != NODE_CALLER_USER || need == NULL) {
        return 0;
    }
    char why[sizeof(err->message)];
    if (ctl_auth_check(&c->snap->auth, c->user, need, why, sizeof(why)) == 0) {
        return 0;
    }
    slotd_error_set(err, SLOTD_EPERMISSION_DENIED, "%s", why);
    return -1;
}

int node_authz_require(struct node_authz *a, bool peer_mtls, struct rpc_call *call,
                       const char *method, const uint8_t *req, size_t len,
                       const struct ctl_need *need, struct slotd_error *err)
{
    struct node_caller c;
    if (node_authz_caller(a, peer_mtls, call, method, req, len, &c, err) != 0) {
        return -1;
    }
    int rc = node_authz_allowed(&c, need, err);
    node_caller_release(&c);
    return rc;
}

const char *node_authz_kind(unsigned f)
{
    if (f >= 14 && f <= 16)
        return "lease";
    if (f >= 20 && f <= 29)
        return "user";
    if (f >= 30 && f <= 39)
        return "channel";
    if (f >= 40 && f <= 44)
        return "conversation";
    if (f >= 45 && f <= 49)
        return "cmd";
    if (f >= 51 && f <= 54)
        return "runtime_meta";
    if (f >= 55 && f <= 59)
        return "migration_task";
    if (f >= 60 && f <= 64)
        return "plugin";
    if (f >= 65 && f <= 99)
        return "event";
    return NULL;
}
