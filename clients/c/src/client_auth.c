/* client_auth.c - libslotd users and roles: Authenticate, UserWrite, RoleWrite, AuthList. */
#include "client_internal.h"

#include "slotd/v1/admin.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#pragma GCC diagnostic ignored "-Wformat-truncation"

#define AUTH_METHOD_AUTHENTICATE "/slotd.v1.Admin/Authenticate"
#define AUTH_METHOD_USER_WRITE "/slotd.v1.Admin/UserWrite"
#define AUTH_METHOD_ROLE_WRITE "/slotd.v1.Admin/RoleWrite"
#define AUTH_METHOD_LIST "/slotd.v1.Admin/AuthList"
#define AUTH_REQUEST_MAX 2048

static char *text(const char *s)
{
    return (char *)(s ? s : "");
}

int slotd_client_authenticate(struct slotd_client *c, const char *user, const char *password,
                              uint64_t *expires_at_ms, struct slotd_error **err)
{
    struct slotd_status local;
    struct slotd_status *st = &local;
    slotd_call_status_reset(st);
    Slotd__V1__AuthenticateRequest q = SLOTD__V1__AUTHENTICATE_REQUEST__INIT;
    q.user = text(user);
    q.password = text(password);
    size_t len = slotd__v1__authenticate_request__get_packed_size(&q);
    if (len > AUTH_REQUEST_MAX) {
        snprintf(st->message, sizeof(st->message), "authenticate: user or password too long");
        return slotd__finish(SLOTD_CLIENT_EINVAL, st, 0, err);
    }
    uint8_t req[AUTH_REQUEST_MAX];
    slotd__v1__authenticate_request__pack(&q, req);
    uint8_t *body = NULL;
    size_t body_len = 0;
    unsigned attempts = 0;
    int rc = slotd__call_endpoints(c, AUTH_METHOD_AUTHENTICATE, req, len, false, &body, &body_len,
                                   &attempts, NULL, st);
    memset(req, 0, sizeof(req));
    if (rc == SLOTD_CLIENT_OK) {
        Slotd__V1__AuthenticateResponse *m =
            slotd__v1__authenticate_response__unpack(NULL, body_len, body);
        free(body);
        if (m == NULL) {
            rc = SLOTD_CLIENT_EMALFORMED;
            snprintf(st->message, sizeof(st->message), "response does not decode");
        } else {
            rc = slotd_client_set_token(c, m->token);
            if (expires_at_ms != NULL)
                *expires_at_ms = m->expires_at_ms;
            slotd__v1__authenticate_response__free_unpacked(m, NULL);
        }
    }
    if (rc != SLOTD_CLIENT_OK)
        slotd__admin_fail_text("authenticate", rc, attempts, st);
    return slotd__finish(rc, st, attempts, err);
}

static int auth_write_encode(const struct slotd_auth_write *w, uint8_t *buf, size_t *len)
{
    if (!w->role) {
        Slotd__V1__UserWriteRequest q = SLOTD__V1__USER_WRITE_REQUEST__INIT;
        q.op = (Slotd__V1__UserOp)w->op;
        q.name = text(w->name);
        q.password = text(w->password);
        q.role = text(w->role_name);
        q.expected_revision = w->expected_revision;
        *len = slotd__v1__user_write_request__get_packed_size(&q);
        if (*len > AUTH_REQUEST_MAX)
            return SLOTD_CLIENT_EINVAL;
        slotd__v1__user_write_request__pack(&q, buf);
        return SLOTD_CLIENT_OK;
    }
    Slotd__V1__RoleWriteRequest q = SLOTD__V1__ROLE_WRITE_REQUEST__INIT;
    Slotd__V1__Permission p = SLOTD__V1__PERMISSION__INIT;
    q.op = (Slotd__V1__RoleOp)w->op;
    q.name = text(w->name);
    q.expected_revision = w->expected_revision;
    if (w->perm_type != NULL) {
        p.type = text(w->perm_type);
        p.access = text(w->perm_access);
        p.value = text(w->perm_value);
        q.permission = &p;
    }
    *len = slotd__v1__role_write_request__get_packed_size(&q);
    if (*len > AUTH_REQUEST_MAX)
        return SLOTD_CLIENT_EINVAL;
    slotd__v1__role_write_request__pack(&q, buf);
    return SLOTD_CLIENT_OK;
}

/* Sends w into out (borrowed for the call); st describes a failure. */
static int auth_write(struct slotd_client *c, const struct slotd_auth_write *w,
                      struct slotd_admin_result *out, struct slotd_status *st)
{
    slotd_call_status_reset(st);
    const char *op = w->role ? "role" : "user";
    uint8_t req[AUTH_REQUEST_MAX];
    size_t len = 0;
    int rc = auth_write_encode(w, req, &len);
    if (rc != SLOTD_CLIENT_OK) {
        snprintf(st->message, sizeof(st->message), "request larger than %d bytes",
                 AUTH_REQUEST_MAX);
        slotd__admin_fail_text(op, rc, 0, st);
        return rc;
    }
    uint8_t *body = NULL;
    size_t body_len = 0;
    rc = slotd__call_endpoints(c, w->role ? AUTH_METHOD_ROLE_WRITE : AUTH_METHOD_USER_WRITE, req,
                               len, true, &body, &body_len, &out->attempts, NULL, st);
    memset(req, 0, sizeof(req));
    if (rc == SLOTD_CLIENT_OK) {
        Slotd__V1__AdminWriteResponse *m =
            slotd__v1__admin_write_response__unpack(NULL, body_len, body);
        free(body);
        if (m == NULL) {
            rc = SLOTD_CLIENT_EMALFORMED;
        } else {
            out->outcome = (int)m->outcome;
            snprintf(out->reason, sizeof(out->reason), "%s", m->reason);
            out->revision = m->revision;
            out->applied_index = m->applied_index;
            slotd__v1__admin_write_response__free_unpacked(m, NULL);
            slotd_client_observe_revision(c, out->revision);
        }
    }
    if (rc != SLOTD_CLIENT_OK)
        slotd__admin_fail_text(op, rc, out->attempts, st);
    return rc;
}

/* auth_write into a new result: *out on success, *err on failure. */
static int auth_write_run(struct slotd_client *c, const struct slotd_auth_write *w,
                          struct slotd_admin_result **out, struct slotd_error **err)
{
    SLOTD__RESULT_CALL(struct slotd_admin_result, "auth", slotd_admin_result_destroy, out, err,
                       auth_write(c, w, r, &st));
}

int slotd_client_user_write(struct slotd_client *c, int op, const char *name,
                            const char *password, const char *role, uint64_t expected_revision,
                            struct slotd_admin_result **out, struct slotd_error **err)
{
    struct slotd_auth_write w = {.op = op,
                                 .name = name,
                                 .password = password,
                                 .role_name = role,
                                 .expected_revision = expected_revision};
    return auth_write_run(c, &w, out, err);
}

int slotd_client_role_write(struct slotd_client *c, int op, const char *name,
                            const char *perm_type, const char *perm_access,
                            const char *perm_value, uint64_t expected_revision,
                            struct slotd_admin_result **out, struct slotd_error **err)
{
    struct slotd_auth_write w = {.role = true,
                                 .op = op,
                                 .name = name,
                                 .perm_type = perm_type,
                                 .perm_access = perm_access,
                                 .perm_value = perm_value,
                                 .expected_revision = expected_revision};
    return auth_write_run(c, &w, out, err);
}

void slotd_auth_list_destroy(struct slotd_auth_list *l)
{
    if (!l)
        return;
    if (l->users)
        free(l->users[0]); /* the block of every entry */
    if (l->roles)
        free(l->roles[0]);
    free(l->users);
    free(l->roles);
    free(l);
}

/* An empty list with room for every user and role: each pointer array points into one block
 * of entries (users[0] and roles[0] are the blocks slotd_auth_list_destroy frees). */
static struct slotd_auth_list *list_alloc(void)
{
    struct slotd_auth_list *l = calloc(1, sizeof(*l));
    struct slotd_auth_user *users = calloc(SLOTD_AUTH_USERS_MAX, sizeof(*users));
    struct slotd_auth_role *roles = calloc(SLOTD_AUTH_ROLES_MAX, sizeof(*roles));
    if (l) {
        l->users = calloc(SLOTD_AUTH_USERS_MAX + 1, sizeof(*l->users));
        l->roles = calloc(SLOTD_AUTH_ROLES_MAX + 1, sizeof(*l->roles));
    }
    if (!l || !users || !roles || !l->users || !l->roles) {
        free(users);
        free(roles);
        slotd_auth_list_destroy(l);
        return NULL;
    }
    for (size_t i = 0; i < SLOTD_AUTH_USERS_MAX; i++)
        l->users[i] = &users[i];
    for (size_t i = 0; i < SLOTD_AUTH_ROLES_MAX; i++)
        l->roles[i] = &roles[i];
    return l;
}

static void list_fill(const Slotd__V1__AuthListResponse *m, struct slotd_auth_list *out)
{
    out->enabled = m->enabled;
    out->revision = m->revision;
    for (size_t i = 0; i < m->n_users && out->user_count < SLOTD_AUTH_USERS_MAX; i++) {
        struct slotd_auth_user *u = out->users[out->user_count++];
        snprintf(u->name, sizeof(u->name), "%s", m->users[i]->name);
        u->revision = m->users[i]->revision;
        size_t at = 0;
        for (size_t j = 0; j < m->users[i]->n_roles && at < sizeof(u->roles); j++)
            at += (size_t)snprintf(u->roles + at, sizeof(u->roles) - at, "%s%s", j ? "," : "",
                                   m->users[i]->roles[j]);
    }
    for (size_t i = 0; i < m->n_roles && out->role_count < SLOTD_AUTH_ROLES_MAX; i++) {
        struct slotd_auth_role *r = out->roles[out->role_count++];
        snprintf(r->name, sizeof(r->name), "%s", m->roles[i]->name);
        size_t at = 0;
        for (size_t j = 0; j < m->roles[i]->n_permissions && at < sizeof(r->permissions); j++) {
            const Slotd__V1__Permission *p = m->roles[i]->permissions[j];
            if (strcmp(p->type, "admin") == 0)
                at += (size_t)snprintf(r->permissions + at, sizeof(r->permissions) - at, "%sadmin",
                                       j ? ", " : "");
            else
                at +=
                    (size_t)snprintf(r->permissions + at, sizeof(r->permissions) - at,
                                     "%s%s %s \"%s\"", j ? ", " : "", p->access, p->type, p->value);
        }
    }
}

int slotd_client_auth_list(struct slotd_client *c, struct slotd_auth_list **out,
                           struct slotd_error **err)
{
    struct slotd_status local;
    struct slotd_status *st = &local;
    slotd_call_status_reset(st);
    *out = NULL;
    Slotd__V1__AuthListRequest q = SLOTD__V1__AUTH_LIST_REQUEST__INIT;
    q.min_revision = slotd_client_last_revision(c);
    uint8_t req[32];
    size_t len = slotd__v1__auth_list_request__pack(&q, req);
    uint8_t *body = NULL;
    size_t body_len = 0;
    unsigned attempts = 0;
    int rc = slotd__call_endpoints(c, AUTH_METHOD_LIST, req, len, false, &body, &body_len,
                                   &attempts, NULL, st);
    if (rc == SLOTD_CLIENT_OK) {
        Slotd__V1__AuthListResponse *m =
            slotd__v1__auth_list_response__unpack(NULL, body_len, body);
        free(body);
        if (m == NULL) {
            rc = SLOTD_CLIENT_EMALFORMED;
        } else {
            *out = list_alloc();
            if (*out)
                list_fill(m, *out);
            else
                rc = SLOTD_CLIENT_ENOMEM;
            slotd__v1__auth_list_response__free_unpacked(m, NULL);
        }
    }
    if (rc != SLOTD_CLIENT_OK)
        slotd__admin_fail_text("auth list", rc, attempts, st);
    return slotd__finish(rc, st, attempts, err);
}
