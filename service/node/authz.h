/* authz.h - who calls the client port (node, user by token or certificate) and what it may do. */
#ifndef SLOTD_NODE_AUTHZ_H
#define SLOTD_NODE_AUTHZ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "service/controller/controller.h"
#include "service/rpc/rpc.h"

struct runtime;
struct auth_pwhash_pool;

struct node_authz_options {
    bool enabled;          /* --auth: Metadata and Admin calls need a caller with the grant */
    uint64_t token_ttl_ms; /* lifetime of an Authenticate token */
    /* user root's password when this node enables auth (auth_init); borrowed for
     * node_authz_new (copied). NULL: a random one, printed once to the log. */
    const char *root_password;
    size_t root_password_len;
};

/* Users and roles as this node holds them (the published cluster state's auth section). */
struct node_authz;

/* Starts the password-hash pool (1 worker, AUTHZ_PWHASH_QUEUE_MAX waiting jobs). *out: caller
 * frees with node_authz_free() after the gRPC server has shut down. Returns 0 or -1 with err. */
#define AUTHZ_PWHASH_QUEUE_MAX 16
int node_authz_new(const struct node_authz_options *o, struct node_authz **out, char *err,
                   size_t errlen);
/* The runtime (borrowed) auth_init is proposed through, once it exists. */
void node_authz_set_runtime(struct node_authz *a, struct runtime *rt, uint64_t node_id);
/* runtime_options.on_ctl_state: refreshes the users and roles when the revision moved and, on
 * the controller leader of a bootstrapped state without auth while --auth is on, proposes
 * auth_init (token key from randombytes, root's password hashed on the pool). Loop thread. */
void node_authz_on_ctl_state(void *ctx, const struct ctl_state *state);
void node_authz_free(struct node_authz *a);
bool node_authz_enabled(const struct node_authz *a);
struct auth_pwhash_pool *node_authz_pool(struct node_authz *a);
uint64_t node_authz_token_ttl_ms(const struct node_authz *a);

/* An immutable copy of the auth section, reference-counted. */
struct node_authz_snap {
    _Atomic unsigned refs;
    uint64_t revision; /* the controller revision it was copied from */
    uint64_t key_gen;  /* which token key auth.token_key is (authz.c's verified-token cache) */
    struct ctl_auth auth;
};
/* The current snapshot (a reference: release with node_authz_snap_release), NULL before the
 * first cluster state. Any thread. */
struct node_authz_snap *node_authz_snap_acquire(struct node_authz *a);
void node_authz_snap_release(struct node_authz_snap *s);

enum node_caller_kind {
    NODE_CALLER_OPEN, /* auth is off on this node: everything is allowed */
    NODE_CALLER_NODE, /* another node (peer proof or node-<id> certificate): everything */
    NODE_CALLER_USER, /* a user, by token or client certificate: its roles decide */
};

struct node_caller {
    enum node_caller_kind kind;
    uint64_t node;                /* NODE */
    struct node_authz_snap *snap; /* USER: held until node_caller_release */
    const struct ctl_user *user;  /* USER: borrowed from snap */
};

/* Who made call (method: its path; req, len: its body, for the peer proof), in this order: a node
 * is proven by a slotd-peer-proof header (--cluster-secret-file); a user by the token in
 * "authorization: Bearer <token>" when one is sent (MAC, expiry and the user's current revision
 * checked); else, with --tls-client-auth, a certificate naming node-<id> is that node (only when
 * peer_mtls: the node's struct node_api setting) and one whose CN is a user name is that user.
 * a (NULL: auth off, every caller is NODE_CALLER_OPEN), call, c, err: borrowed for the call.
 * Returns 0 with *c filled (release it), or -1 with err UNAUTHENTICATED naming what failed. Any
 * thread. */
int node_authz_caller(struct node_authz *a, bool peer_mtls, struct rpc_call *call,
                      const char *method, const uint8_t *req, size_t len, struct node_caller *c,
                      struct slotd_error *err);
void node_caller_release(struct node_caller *c);
/* True when call comes from a node, whether or not --auth is on (ClusterState keeps its secrets
 * only for nodes): a local call (this node's own, or one another node forwarded on the peer
 * plane) or a node-<id> client certificate. */
bool node_authz_is_node(bool peer_mtls, struct rpc_call *call);

/* 0 when c may do need (NULL: only being authenticated is needed); else -1 with err
 * PERMISSION_DENIED naming the missing permission and what the user has. */
int node_authz_allowed(const struct node_caller *c, const struct ctl_need *need,
                       struct slotd_error *err);

/* node_authz_caller + node_authz_allowed + release, for handlers that need no more. */
int node_authz_require(struct node_authz *a, bool peer_mtls, struct rpc_call *call,
                       const char *method, const uint8_t *req, size_t len,
                       const struct ctl_need *need, struct slotd_error *err);

/* The kind (CTL_AUTH_KINDS) of a typed ProposeRequest command / ReadRequest query field number
 * (20..99), NULL for other numbers. */
const char *node_authz_kind(unsigned field_number);

#endif
