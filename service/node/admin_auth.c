/* admin_auth.c - Admin.Authenticate, UserWrite, RoleWrite and AuthList: users, roles, tokens. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <sodium.h>

#include "service/auth/token.h"
#include "service/controller/controller.h"
#include "service/node/api.h"
#include "service/node/authz.h"
#include "slotd/v1/admin.pb-c.h"

#define M_AUTHENTICATE "/slotd.v1.Admin/Authenticate"
#define M_USER_WRITE "/slotd.v1.Admin/UserWrite"
#define M_ROLE_WRITE "/slotd.v1.Admin/RoleWrite"
#define M_AUTH_LIST "/slotd.v1.Admin/AuthList"

static int pool_refused(int rc, struct slotd_error *err)
{
    if (rc == AUTH_EFULL) {
        slotd_error_set(err, SLOTD_EQUEUE_FULL,
                        "password checks: %d already waiting, the limit; retry",
                        AUTHZ_PWHASH_QUEUE_MAX);
        err->retry_after_ms = 100;
    } else {
        slotd_error_set(err, SLOTD_EINTERNAL, "password check: %s", auth_strerror(rc));
    }
    return -1;
}

static int password_field(const char *pw, struct slotd_error *err)
{
    size_t n = strlen(pw);
    if (n >= 1 && n <= AUTH_PASSWORD_MAX)
        return 0;
    slotd_error_field(err, "password", AUTH_PASSWORD_MAX, "password: %zu bytes, not in 1..%d", n,
                      AUTH_PASSWORD_MAX);
    return -1;
}

/* ---- Authenticate: open to everyone; the password check runs on the pool ---- */

struct auth_job {
    struct node_api *api;
    struct rpc_call *call;
    char user[CTL_AUTH_NAME_MAX + 1];
    char hash[CTL_PASSWORD_HASH_MAX + 1]; /* the hash the password was checked against */
};

/* After a good check: the user's revision and the token key in the newest users and roles (an
 * admin write's answer can reach the client before this node published its state, so the
 * snapshot read at submit time may be one revision old). 0 when the user is gone or its hash
 * changed meanwhile (the checked password may no longer be the user's). */
static uint64_t current_revision(struct node_api *api, const char *user, const char *hash,
                                 uint8_t key[CTL_TOKEN_KEY_BYTES])
{
    struct node_authz_snap *snap = node_authz_snap_acquire(api->authz);
    const struct ctl_user *u = snap ? ctl_auth_user(&snap->auth, user) : NULL;
    uint64_t rev = 0;
    if (u != NULL && strcmp(u->password_hash, hash) == 0) {
        rev = u->revision;
        memcpy(key, snap->auth.token_key, CTL_TOKEN_KEY_BYTES);
    }
    node_authz_snap_release(snap);
    return rev;
}

static void authenticated(void *arg, int rc, const char *hash)
{
    struct auth_job *j = arg;
    struct slotd_error err;
    (void)hash;
    uint8_t key[CTL_TOKEN_KEY_BYTES];
    uint64_t revision = rc == AUTH_OK ? current_revision(j->api, j->user, j->hash, key) : 0;
    if (revision == 0) {
        /* A missing user and a wrong password read the same and cost the same. */
        slotd_error_set(&err, SLOTD_EUNAUTHENTICATED, "Authenticate: wrong user or password");
        rpc_call_fail(j->call, &err);
        goto done;
    }
    uint64_t expires = (uint64_t)auth_now_wall_ms() + node_authz_token_ttl_ms(j->api->authz);
    char token[AUTH_TOKEN_MAX];
    int mrc = auth_token_make(key, j->user, revision, expires, token, sizeof(token));
    sodium_memzero(key, sizeof(key));
    if (mrc != AUTH_OK) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "Authenticate: cannot make a token");
        rpc_call_fail(j->call, &err);
        goto done;
    }
    Slotd__V1__AuthenticateResponse r = SLOTD__V1__AUTHENTICATE_RESPONSE__INIT;
    r.token = token;
    r.expires_at_ms = expires;
    r.user_revision = revision;
    rpc_call_reply(j->call, &r.base);
    sodium_memzero(token, sizeof(token));
done:
    sodium_memzero(j, sizeof(*j));
    free(j);
}

static void on_authenticate(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    Slotd__V1__AuthenticateRequest *r =
        node_request_decode(call, &slotd__v1__authenticate_request__descriptor, req, len);
    if (r == NULL)
        return;
    struct auth_job *j = NULL;
    struct node_authz_snap *snap = api->authz ? node_authz_snap_acquire(api->authz) : NULL;
    if (snap == NULL || !snap->auth.enabled) {
        slotd_error_set(&err, SLOTD_EPRECONDITION,
                        "Authenticate: auth is not enabled in this cluster (start the controller "
                        "voters with --auth 1)");
        goto fail;
    }
    if (password_field(r->password, &err) != 0)
        goto fail;
    if (strlen(r->user) < 1 || strlen(r->user) > CTL_AUTH_NAME_MAX) {
        slotd_error_field(&err, "user", CTL_AUTH_NAME_MAX, "user: not 1..%d bytes",
                          CTL_AUTH_NAME_MAX);
        goto fail;
    }
    j = calloc(1, sizeof(*j));
    if (j == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        goto fail;
    }
    j->api = api;
    j->call = call;
    const struct ctl_user *u = ctl_auth_user(&snap->auth, r->user);
    snprintf(j->user, sizeof(j->user), "%s", r->user);
    if (u != NULL)
        snprintf(j->hash, sizeof(j->hash), "%s", u->password_hash);
    int rc = auth_pwhash_verify(node_authz_pool(api->authz), u ? u->password_hash : NULL,
                                r->password, strlen(r->password), authenticated, j);
    if (rc != AUTH_OK) {
        pool_refused(rc, &err);
        goto fail;
    }
    node_authz_snap_release(snap);
    sodium_memzero(r->password, strlen(r->password));
    slotd__v1__authenticate_request__free_unpacked(r, NULL);
    return;

fail:
    if (j != NULL) {
        sodium_memzero(j, sizeof(*j));
        free(j);
    }
    node_authz_snap_release(snap);
    sodium_memzero(r->password, strlen(r->password));
    slotd__v1__authenticate_request__free_unpacked(r, NULL);
    rpc_call_fail(call, &err);
}

/* ---- UserWrite ---- */

static const char *user_op_name(Slotd__V1__UserOp op)
{
    switch (op) {
    case SLOTD__V1__USER_OP__USER_OP_ADD:
        return "user_add";
    case SLOTD__V1__USER_OP__USER_OP_DELETE:
        return "user_delete";
    case SLOTD__V1__USER_OP__USER_OP_PASSWD:
        return "user_passwd";
    case SLOTD__V1__USER_OP__USER_OP_GRANT_ROLE:
        return "user_grant_role";
    case SLOTD__V1__USER_OP__USER_OP_REVOKE_ROLE:
        return "user_revoke_role";
    default:
        return NULL;
    }
}

/* Builds the command of r (password_hash set for ADD and PASSWD) and proposes or relays it. */
static int user_submit(struct node_api *api, struct rpc_call *call, Slotd__V1__UserWriteRequest *r,
                       struct slotd_error *err)
{
    const char *op = user_op_name(r->op);
    char *cmd = NULL;
    int rc;
    if (r->op == SLOTD__V1__USER_OP__USER_OP_GRANT_ROLE ||
        r->op == SLOTD__V1__USER_OP__USER_OP_REVOKE_ROLE)
        rc = ctl_cmd_user_role(op, r->name, r->role, r->expected_revision, &cmd);
    else
        rc = ctl_cmd_user(op, r->name,
                          r->op == SLOTD__V1__USER_OP__USER_OP_DELETE ? NULL : r->password_hash,
                          r->expected_revision, &cmd);
    if (rc != CTL_OK) {
        slotd_error_set(err, rc == CTL_EINVALID ? SLOTD_EINVALID_FIELD : SLOTD_EINTERNAL,
                        rc == CTL_EINVALID ? "request: a value is not UTF-8 text or out of range"
                                           : "out of memory");
        return -1;
    }
    rc = node_admin_submit(api, call, M_USER_WRITE, cmd, &r->base, &r->no_forward, err);
    ctl_free(cmd);
    return rc;
}

struct user_job {
    struct node_api *api;
    struct rpc_call *call;
    Slotd__V1__UserWriteRequest *r;
};

static void free_request(Slotd__V1__UserWriteRequest *r)
{
    sodium_memzero(r->password, strlen(r->password));
    slotd__v1__user_write_request__free_unpacked(r, NULL);
}

/* The pool hashed the new password (worker thread): submit with the hash, never the password. */
static void user_hashed(void *arg, int rc, const char *hash)
{
    struct user_job *j = arg;
    struct slotd_error err;
    if (rc != AUTH_OK) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "password hash failed: %s", auth_strerror(rc));
        rpc_call_fail(j->call, &err);
    } else {
        sodium_memzero(j->r->password, strlen(j->r->password));
        j->r->password[0] = '\0';
        char *was = j->r->password_hash;
        j->r->password_hash = (char *)hash; /* borrowed for the call */
        int src = user_submit(j->api, j->call, j->r, &err);
        j->r->password_hash = was;
        if (src != 0)
            rpc_call_fail(j->call, &err);
    }
    free_request(j->r);
    free(j);
}

static void on_user_write(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    struct node_caller caller;
    Slotd__V1__UserWriteRequest *r =
        node_request_decode(call, &slotd__v1__user_write_request__descriptor, req, len);
    if (r == NULL)
        return;
    if (node_authz_caller(api->authz, api->peer_mtls, call, M_USER_WRITE, req, len, &caller,
                          &err) != 0)
        goto fail;
    int rc = node_authz_allowed(
        &caller, &(struct ctl_need){.type = CTL_PERM_ADMIN, .access = CTL_ACCESS_WRITE}, &err);
    bool from_node = caller.kind == NODE_CALLER_NODE;
    node_caller_release(&caller);
    if (rc != 0)
        goto fail;
    if (user_op_name(r->op) == NULL) {
        slotd_error_field(&err, "op", 5,
                          "op: %d is not ADD, DELETE, PASSWD, GRANT_ROLE or "
                          "REVOKE_ROLE",
                          (int)r->op);
        goto fail;
    }
    bool with_password =
        r->op == SLOTD__V1__USER_OP__USER_OP_ADD || r->op == SLOTD__V1__USER_OP__USER_OP_PASSWD;
    if (r->password_hash[0] != '\0' && !from_node) {
        slotd_error_field(&err, "password_hash", 0,
                          "password_hash: set only by a node relaying the request; send "
                          "password");
        goto fail;
    }
    if (!with_password || r->password_hash[0] != '\0') {
        if (user_submit(api, call, r, &err) != 0)
            goto fail;
        free_request(r);
        return;
    }
    if (password_field(r->password, &err) != 0)
        goto fail;
    struct user_job *j = malloc(sizeof(*j));
    if (j == NULL) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        goto fail;
    }
    *j = (struct user_job){.api = api, .call = call, .r = r};
    rc = auth_pwhash_hash(node_authz_pool(api->authz), r->password, strlen(r->password),
                          user_hashed, j);
    if (rc != AUTH_OK) {
        free(j);
        pool_refused(rc, &err);
        goto fail;
    }
    return; /* user_hashed answers and frees r */

fail:
    free_request(r);
    rpc_call_fail(call, &err);
}

/* ---- RoleWrite ---- */

static int perm_of(const Slotd__V1__Permission *p, struct ctl_perm *out, struct slotd_error *err)
{
    memset(out, 0, sizeof(*out));
    if (p == NULL) {
        slotd_error_field(err, "permission", 0, "permission: required by GRANT and REVOKE");
        return -1;
    }
    if (strcmp(p->type, "key_prefix") == 0)
        out->type = CTL_PERM_KEY_PREFIX;
    else if (strcmp(p->type, "kind") == 0)
        out->type = CTL_PERM_KIND;
    else if (strcmp(p->type, "admin") == 0)
        out->type = CTL_PERM_ADMIN;
    else {
        slotd_error_field(err, "permission.type", 0,
                          "permission.type: \"%.32s\" is not key_prefix, kind or admin", p->type);
        return -1;
    }
    const char *a = p->access[0] ? p->access : (out->type == CTL_PERM_ADMIN ? "readwrite" : "");
    out->access = strcmp(a, "read") == 0        ? CTL_ACCESS_READ
                  : strcmp(a, "write") == 0     ? CTL_ACCESS_WRITE
                  : strcmp(a, "readwrite") == 0 ? CTL_ACCESS_READ | CTL_ACCESS_WRITE
                                                : 0;
    if (out->access == 0) {
        slotd_error_field(err, "permission.access", 0,
                          "permission.access: \"%.32s\" is not read, write or readwrite", a);
        return -1;
    }
    if (strlen(p->value) > CTL_KEY_PREFIX_MAX) {
        slotd_error_field(err, "permission.value", CTL_KEY_PREFIX_MAX,
                          "permission.value: %zu bytes, the limit is %d", strlen(p->value),
                          CTL_KEY_PREFIX_MAX);
        return -1;
    }
    snprintf(out->value, sizeof(out->value), "%s", p->value);
    return 0;
}

static void on_role_write(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct node_api *api = ctx;
    struct slotd_error err;
    Slotd__V1__RoleWriteRequest *r =
        node_request_decode(call, &slotd__v1__role_write_request__descriptor, req, len);
    if (r == NULL)
        return;
    if (node_admin_gate(api, call, req, len) != 0) {
        slotd__v1__role_write_request__free_unpacked(r, NULL);
        return;
    }
    static const char *const ops[] = {NULL, "role_add", "role_delete", "role_grant", "role_revoke"};
    struct ctl_perm perm;
    char *cmd = NULL;
    int rc = -1;
    bool with_perm =
        r->op == SLOTD__V1__ROLE_OP__ROLE_OP_GRANT || r->op == SLOTD__V1__ROLE_OP__ROLE_OP_REVOKE;
    if (r->op < 1 || r->op > 4)
        slotd_error_field(&err, "op", 4, "op: %d is not ADD, DELETE, GRANT or REVOKE", (int)r->op);
    else if (with_perm && perm_of(r->permission, &perm, &err) != 0)
        ; /* err names the field */
    else if ((rc = ctl_cmd_role(ops[r->op], r->name, with_perm ? &perm : NULL, r->expected_revision,
                                &cmd)) != CTL_OK) {
        slotd_error_set(&err, rc == CTL_EINVALID ? SLOTD_EINVALID_FIELD : SLOTD_EINTERNAL,
                        rc == CTL_EINVALID ? "request: a value is not UTF-8 text"
                                           : "out of memory");
        rc = -1;
    } else
        rc = node_admin_submit(api, call, M_ROLE_WRITE, cmd, &r->base, &r->no_forward, &err);
    ctl_free(cmd);
    slotd__v1__role_write_request__free_unpacked(r, NULL);
    if (rc != 0)
        rpc_call_fail(call, &err);
}

/* ---- AuthList ---- */

static const char *access_text(uint32_t a)
{
    return ctl_access_name(a) ? ctl_access_name(a) : "";
}

static void answer_auth_list(const struct node_gated *g)
{
    struct slotd_error err;
    struct node_authz_snap *snap = g->api->authz ? node_authz_snap_acquire(g->api->authz) : NULL;
    Slotd__V1__AuthListResponse q = SLOTD__V1__AUTH_LIST_RESPONSE__INIT;
    const struct ctl_auth *a = snap ? &snap->auth : NULL;
    size_t nu = a ? a->n_users : 0, nr = a ? a->n_roles : 0, np = 0;
    for (size_t i = 0; i < nr; i++)
        np += a->roles[i].n_perms;
    Slotd__V1__AuthUser *users = calloc(nu + 1, sizeof(*users));
    Slotd__V1__AuthUser **up = calloc(nu + 1, sizeof(*up));
    Slotd__V1__AuthRole *roles = calloc(nr + 1, sizeof(*roles));
    Slotd__V1__AuthRole **rp = calloc(nr + 1, sizeof(*rp));
    Slotd__V1__Permission *perms = calloc(np + 1, sizeof(*perms));
    Slotd__V1__Permission **pp = calloc(np + 1, sizeof(*pp));
    char **names = calloc(nu * CTL_USER_ROLES_MAX + 1, sizeof(*names));
    if (!users || !up || !roles || !rp || !perms || !pp || !names) {
        slotd_error_set(&err, SLOTD_EINTERNAL, "out of memory");
        rpc_call_fail(g->call, &err);
        goto done;
    }
    q.enabled = a != NULL && a->enabled;
    q.revision = snap ? snap->revision : 0;
    size_t k = 0, kp = 0;
    for (size_t i = 0; i < nu; i++) {
        slotd__v1__auth_user__init(&users[i]);
        users[i].name = (char *)a->users[i].name;
        users[i].revision = a->users[i].revision;
        users[i].roles = &names[k];
        for (uint32_t j = 0; j < a->users[i].n_roles; j++)
            names[k++] = (char *)a->users[i].roles[j];
        users[i].n_roles = a->users[i].n_roles;
        up[i] = &users[i];
    }
    for (size_t i = 0; i < nr; i++) {
        slotd__v1__auth_role__init(&roles[i]);
        roles[i].name = (char *)a->roles[i].name;
        roles[i].permissions = &pp[kp];
        roles[i].n_permissions = a->roles[i].n_perms;
        for (uint32_t j = 0; j < a->roles[i].n_perms; j++, kp++) {
            const struct ctl_perm *p = &a->roles[i].perms[j];
            slotd__v1__permission__init(&perms[kp]);
            perms[kp].type = (char *)ctl_perm_type_name(p->type);
            perms[kp].access = (char *)access_text(p->access);
            perms[kp].value = (char *)p->value;
            pp[kp] = &perms[kp];
        }
        rp[i] = &roles[i];
    }
    q.users = up;
    q.n_users = nu;
    q.roles = rp;
    q.n_roles = nr;
    rpc_call_reply(g->call, &q.base);
done:
    free(users);
    free(up);
    free(roles);
    free(rp);
    free(perms);
    free(pp);
    free(names);
    node_authz_snap_release(snap);
}

static void on_auth_list(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    Slotd__V1__AuthListRequest *r =
        node_request_decode(call, &slotd__v1__auth_list_request__descriptor, req, len);
    if (r == NULL)
        return;
    uint64_t min_revision = r->min_revision;
    slotd__v1__auth_list_request__free_unpacked(r, NULL);
    if (node_admin_gate(ctx, call, req, len) != 0)
        return;
    struct node_gated g = {
        .api = ctx, .call = call, .min_revision = min_revision, .answer = answer_auth_list};
    node_gate(&g);
}

int node_admin_auth_register(struct node_api *api, struct rpc_server *s)
{
    int rc = rpc_server_add_unary(s, M_AUTHENTICATE, on_authenticate, api);
    if (rc == 0)
        rc = rpc_server_add_unary(s, M_USER_WRITE, on_user_write, api);
    if (rc == 0)
        rc = rpc_server_add_unary(s, M_ROLE_WRITE, on_role_write, api);
    if (rc == 0)
        rc = rpc_server_add_unary(s, M_AUTH_LIST, on_auth_list, api);
    return rc;
}
