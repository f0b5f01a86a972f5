/* slotctl_auth.c - slotctl users and roles: --user/--password-file login, user, role. */
#include "slotctl_cmds.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#define PASSWORD_MAX 256

/* One user or role command as parsed (strings borrowed from the arguments). */
struct auth_req {
    bool role; /* false: a user command (op is an enum slotd_user_op), true: a role command */
    int op;
    const char *name;
    const char *password, *role_name;                 /* user commands */
    const char *perm_type, *perm_access, *perm_value; /* role grant/revoke */
    uint64_t expected_revision;
};

/* The first line of path (one trailing "\n" or "\r\n" trimmed) into out. 0, or -1 with err. */
static int read_password(const char *path, char *out, size_t outlen, char *err, size_t errlen)
{
    FILE *f = fopen(path, "rb");
    if (f == NULL) {
        snprintf(err, errlen, "%s: cannot open: %m", path);
        return -1;
    }
    size_t n = fread(out, 1, outlen - 1, f);
    fclose(f);
    out[n] = '\0';
    char *nl = strpbrk(out, "\r\n");
    if (nl != NULL)
        *nl = '\0';
    if (out[0] == '\0' || strlen(out) > PASSWORD_MAX) {
        snprintf(err, errlen, "%s: the password must be 1..%d bytes on the first line", path,
                 PASSWORD_MAX);
        memset(out, 0, outlen);
        return -1;
    }
    return 0;
}

int slotctl_login(struct slotd_client *c, const struct slotctl_args *a)
{
    if (a->user == NULL)
        return SLOTCTL_EXIT_OK;
    char pw[PASSWORD_MAX + 2], err[300];
    if (read_password(a->password_file, pw, sizeof(pw), err, sizeof(err)) != 0) {
        fprintf(stderr, "slotctl: --password-file %s\n", err);
        return SLOTCTL_EXIT_USAGE;
    }
    struct slotd_error *e = NULL;
    int rc = slotd_client_authenticate(c, a->user, pw, NULL, &e);
    memset(pw, 0, sizeof(pw));
    int code = rc == SLOTD_CLIENT_OK ? SLOTCTL_EXIT_OK : slotctl_error_report_free(a, rc, e);
    return code;
}

static int usage(const char *text)
{
    fprintf(stderr, "slotctl: %s\n", text);
    return SLOTCTL_EXIT_USAGE;
}

static int write_run(struct slotd_client *c, const struct slotctl_args *a, const struct auth_req *w,
                     const char *what)
{
    struct slotd_admin_result *r = NULL;
    struct slotd_error *e = NULL;
    int rc = w->role ? slotd_client_role_write(c, w->op, w->name, w->perm_type, w->perm_access,
                                               w->perm_value, w->expected_revision, &r, &e)
                     : slotd_client_user_write(c, w->op, w->name, w->password, w->role_name,
                                               w->expected_revision, &r, &e);
    if (rc != SLOTD_CLIENT_OK) {
        return slotctl_error_report_free(a, rc, e);
    }
    json_t *fields = json_object();
    json_object_set_new(fields, "name", json_string(w->name));
    slotctl_admin_result_report(a, r, what, fields);
    slotd_admin_result_destroy(r);
    return SLOTCTL_EXIT_OK;
}

static int list_run(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_auth_list *l = NULL;
    struct slotd_error *e = NULL;
    int rc = slotd_client_auth_list(c, &l, &e);
    if (rc != SLOTD_CLIENT_OK) {
        return slotctl_error_report_free(a, rc, e);
    }
    if (a->json) {
        json_t *j = json_object(), *users = json_array(), *roles = json_array();
        for (size_t i = 0; i < l->user_count; i++)
            json_array_append_new(users, json_pack("{s:s,s:s,s:I}", "name", l->users[i]->name,
                                                   "roles", l->users[i]->roles, "revision",
                                                   (json_int_t)l->users[i]->revision));
        for (size_t i = 0; i < l->role_count; i++)
            json_array_append_new(roles, json_pack("{s:s,s:s}", "name", l->roles[i]->name,
                                                   "permissions", l->roles[i]->permissions));
        json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
        json_object_set_new(j, "enabled", json_boolean(l->enabled));
        json_object_set_new(j, "revision", json_integer((json_int_t)l->revision));
        json_object_set_new(j, "users", users);
        json_object_set_new(j, "roles", roles);
        slotctl_json_print(j);
        slotd_auth_list_destroy(l);
        return SLOTCTL_EXIT_OK;
    }
    printf("auth %s  revision %" PRIu64 "\n", l->enabled ? "enabled" : "not enabled", l->revision);
    if (a->cmd == SLOTCTL_CMD_USER) {
        printf("%-32s  %-10s  %s\n", "USER", "REVISION", "ROLES");
        for (size_t i = 0; i < l->user_count; i++)
            printf("%-32s  %-10" PRIu64 "  %s\n", l->users[i]->name, l->users[i]->revision,
                   l->users[i]->roles);
    } else {
        printf("%-32s  %s\n", "ROLE", "PERMISSIONS");
        printf("%-32s  %s\n", "root", "everything (built in)");
        for (size_t i = 0; i < l->role_count; i++)
            printf("%-32s  %s\n", l->roles[i]->name,
                   l->roles[i]->permissions[0] ? l->roles[i]->permissions : "(none)");
    }
    slotd_auth_list_destroy(l);
    return SLOTCTL_EXIT_OK;
}

static int user_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const char *sub = a->pos[0], *name = a->pos_count > 1 ? a->pos[1] : NULL;
    struct auth_req w = {.name = name, .expected_revision = a->expected_revision};
    char pw[PASSWORD_MAX + 2] = "", what[128], err[300];
    int n = a->pos_count;
    if (strcmp(sub, "list") == 0 && n == 1)
        return list_run(c, a);
    if ((strcmp(sub, "add") == 0 || strcmp(sub, "passwd") == 0) && n == 2) {
        if (a->new_password_file == NULL)
            return usage("user add/passwd: needs --new-password-file F");
        if (read_password(a->new_password_file, pw, sizeof(pw), err, sizeof(err)) != 0) {
            fprintf(stderr, "slotctl: --new-password-file %s\n", err);
            return SLOTCTL_EXIT_USAGE;
        }
        w.op = sub[0] == 'a' ? SLOTD_USER_ADD : SLOTD_USER_PASSWD;
        w.password = pw;
        snprintf(what, sizeof(what), "user %s %s", name, sub[0] == 'a' ? "added" : "password set");
    } else if (strcmp(sub, "delete") == 0 && n == 2) {
        w.op = SLOTD_USER_DELETE;
        snprintf(what, sizeof(what), "user %s deleted", name);
    } else if ((strcmp(sub, "grant") == 0 || strcmp(sub, "revoke") == 0) && n == 3) {
        w.op = sub[0] == 'g' ? SLOTD_USER_GRANT_ROLE : SLOTD_USER_REVOKE_ROLE;
        w.role_name = a->pos[2];
        snprintf(what, sizeof(what), "user %s role %s %s", name, a->pos[2],
                 sub[0] == 'g' ? "granted" : "revoked");
    } else {
        return usage("user: usage: user add|passwd NAME --new-password-file F, user delete NAME, "
                     "user grant|revoke NAME ROLE, user list");
    }
    int code = write_run(c, a, &w, what);
    memset(pw, 0, sizeof(pw));
    return code;
}

static int role_run(struct slotd_client *c, const struct slotctl_args *a)
{
    const char *sub = a->pos[0], *name = a->pos_count > 1 ? a->pos[1] : NULL;
    struct auth_req w = {.role = true, .name = name, .expected_revision = a->expected_revision};
    char what[256];
    int n = a->pos_count;
    if (strcmp(sub, "list") == 0 && n == 1)
        return list_run(c, a);
    if (strcmp(sub, "add") == 0 && n == 2) {
        w.op = SLOTD_ROLE_ADD;
        snprintf(what, sizeof(what), "role %s added", name);
    } else if (strcmp(sub, "delete") == 0 && n == 2) {
        w.op = SLOTD_ROLE_DELETE;
        snprintf(what, sizeof(what), "role %s deleted", name);
    } else if ((strcmp(sub, "grant") == 0 || strcmp(sub, "revoke") == 0) && (n == 4 || n == 5)) {
        w.op = sub[0] == 'g' ? SLOTD_ROLE_GRANT : SLOTD_ROLE_REVOKE;
        w.perm_type = a->pos[2];
        w.perm_access = a->pos[3];
        w.perm_value = n == 5 ? a->pos[4] : "";
        snprintf(what, sizeof(what), "role %s %s %s %s \"%s\"", name,
                 sub[0] == 'g' ? "granted" : "revoked", w.perm_access, w.perm_type, w.perm_value);
    } else {
        return usage("role: usage: role add|delete NAME, role grant|revoke NAME TYPE ACCESS "
                     "[VALUE], role list");
    }
    return write_run(c, a, &w, what);
}

int slotctl_auth_run(struct slotd_client *c, const struct slotctl_args *a)
{
    return a->cmd == SLOTCTL_CMD_USER ? user_run(c, a) : role_run(c, a);
}
