/* auth.c - users and roles in the controller state: rules, JSON, commands, permission check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "internal.h"

static const char *const perm_type_names[] = {"key_prefix", "kind", "admin"};
static const char *const access_names[] = {"", "read", "write", "readwrite"};
static const char *const kind_names[] = {CTL_AUTH_KINDS};

const char *ctl_perm_type_name(enum ctl_perm_type v)
{
    return (unsigned)v < CTL__N(perm_type_names) ? perm_type_names[v] : NULL;
}

const char *ctl_access_name(uint32_t access)
{
    return access >= 1 && access <= 3 ? access_names[access] : NULL;
}

/* ---- value rules ---------------------------------------------------------------------------- */

/* 1..CTL_AUTH_NAME_MAX of [A-Za-z0-9._-], and not "node-<digits>" (certificate names of nodes). */
static bool name_ok(const char *s)
{
    if (!ctl__cluster_id_ok(s) || strlen(s) > CTL_AUTH_NAME_MAX) {
        return false;
    }
    if (strncmp(s, "node-", 5) == 0 && s[5] != '\0' &&
        strspn(s + 5, "0123456789") == strlen(s + 5)) {
        return false;
    }
    return true;
}

#define NAME_RULE "1..32 characters of [A-Za-z0-9._-], not node-<digits>"

static bool hash_ok(const char *h)
{
    size_t n = strnlen(h, CTL_PASSWORD_HASH_MAX + 1);
    if (n < 20 || n > CTL_PASSWORD_HASH_MAX || strncmp(h, "$argon2id$", 10) != 0) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (h[i] < 0x21 || h[i] > 0x7e) {
            return false;
        }
    }
    return true;
}

static bool prefix_ok(const char *p)
{
    size_t n = strnlen(p, CTL_KEY_PREFIX_MAX + 1);
    if (n > CTL_KEY_PREFIX_MAX) {
        return false;
    }
    for (size_t i = 0; i < n; i++) {
        if (p[i] < 0x20 || p[i] > 0x7e) {
            return false;
        }
    }
    return true;
}

static bool kind_ok(const char *k)
{
    return ctl__name_index(kind_names, CTL__N(kind_names), k) >= 0;
}

/* Why perm (type, access, value) is not a valid grant, NULL when it is. */
static const char *perm_problem(const struct ctl_perm *p)
{
    if ((unsigned)p->type >= CTL__N(perm_type_names)) {
        return "type: not key_prefix, kind or admin";
    }
    if (p->access < 1 || p->access > 3) {
        return "access: not read, write or readwrite";
    }
    switch (p->type) {
    case CTL_PERM_KEY_PREFIX:
        return prefix_ok(p->value) ? NULL
                                   : "value: a key prefix is at most 128 bytes of printable ASCII";
    case CTL_PERM_KIND:
        return kind_ok(p->value) ? NULL
                                 : "value: not a kind (user, channel, conversation, cmd, "
                                   "runtime_meta, migration_task, plugin, event)";
    case CTL_PERM_ADMIN:
        return p->value[0] == '\0' && p->access == 3 ? NULL
                                                     : "admin: value must be \"\" and access "
                                                       "readwrite";
    }
    return "type: unknown";
}

static int perm_cmp(const struct ctl_perm *a, const struct ctl_perm *b)
{
    if (a->type != b->type) {
        return a->type < b->type ? -1 : 1;
    }
    return strcmp(a->value, b->value);
}

/* ---- lookups and the check ------------------------------------------------------------------ */

const struct ctl_user *ctl_auth_user(const struct ctl_auth *a, const char *name)
{
    uint32_t lo = 0, hi = a->n_users;
    while (lo < hi) {
        uint32_t mid = lo + (hi - lo) / 2;
        int c = strcmp(a->users[mid].name, name);
        if (c == 0) {
            return &a->users[mid];
        }
        if (c < 0) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    return NULL;
}

const struct ctl_auth_role *ctl_auth_role(const struct ctl_auth *a, const char *name)
{
    for (uint32_t i = 0; i < a->n_roles; i++) {
        if (strcmp(a->roles[i].name, name) == 0) {
            return &a->roles[i];
        }
    }
    return NULL;
}

static bool perm_covers(const struct ctl_perm *p, const struct ctl_need *need)
{
    if (p->type != need->type || (p->access & need->access) == 0) {
        return false;
    }
    switch (p->type) {
    case CTL_PERM_ADMIN:
        return true;
    case CTL_PERM_KIND:
        return need->kind != NULL && strcmp(p->value, need->kind) == 0;
    case CTL_PERM_KEY_PREFIX: {
        size_t n = strlen(p->value);
        return need->key_len >= n && (n == 0 || memcmp(need->key, p->value, n) == 0);
    }
    }
    return false;
}

/* Appends "%s" formatting to buf at *at, never past len (the text is cut when full). */
static void append(char *buf, size_t len, size_t *at, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void append(char *buf, size_t len, size_t *at, const char *fmt, ...)
{
    if (*at >= len) {
        return;
    }
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf + *at, len - *at, fmt, ap);
    va_end(ap);
    *at = n < 0 ? len : *at + (size_t)n;
}

/* The key as printable text for messages: at most 64 bytes, other bytes as \xHH. */
static void key_text(const uint8_t *k, size_t n, char *out, size_t outlen)
{
    size_t at = 0;
    out[0] = '\0';
    for (size_t i = 0; i < n && i < 64; i++) {
        if (k[i] >= 0x20 && k[i] <= 0x7e && k[i] != '"' && k[i] != '\\') {
            append(out, outlen, &at, "%c", k[i]);
        } else {
            append(out, outlen, &at, "\\x%02x", k[i]);
        }
    }
    if (n > 64) {
        append(out, outlen, &at, "...");
    }
}

int ctl_auth_check(const struct ctl_auth *a, const struct ctl_user *u, const struct ctl_need *need,
                   char *why, size_t whylen)
{
    for (uint32_t i = 0; i < u->n_roles; i++) {
        if (strcmp(u->roles[i], CTL_AUTH_ROOT) == 0) {
            return 0;
        }
        const struct ctl_auth_role *r = ctl_auth_role(a, u->roles[i]);
        for (uint32_t j = 0; r != NULL && j < r->n_perms; j++) {
            if (perm_covers(&r->perms[j], need)) {
                return 0;
            }
        }
    }
    size_t at = 0;
    const char *acc = need->access == CTL_ACCESS_WRITE ? "write" : "read";
    if (need->type == CTL_PERM_ADMIN) {
        append(why, whylen, &at, "admin needed");
    } else if (need->type == CTL_PERM_KIND) {
        append(why, whylen, &at, "%s on kind \"%s\" needed", acc, need->kind ? need->kind : "");
    } else {
        char kt[300];
        key_text(need->key, need->key_len, kt, sizeof(kt));
        append(why, whylen, &at, "%s on key \"%s\" needed (a key_prefix grant covering it)", acc,
               kt);
    }
    append(why, whylen, &at, "; user %s has", u->name);
    int listed = 0;
    for (uint32_t i = 0; i < u->n_roles; i++) {
        const struct ctl_auth_role *r = ctl_auth_role(a, u->roles[i]);
        for (uint32_t j = 0; r != NULL && j < r->n_perms; j++) {
            const struct ctl_perm *p = &r->perms[j];
            if (p->type == CTL_PERM_ADMIN) {
                append(why, whylen, &at, "%s admin", listed++ ? "," : "");
            } else {
                append(why, whylen, &at, "%s %s %s \"%s\"", listed++ ? "," : "",
                       ctl_access_name(p->access), ctl_perm_type_name(p->type), p->value);
            }
        }
    }
    if (listed == 0) {
        append(why, whylen, &at, " no grants (roles: %u)", u->n_roles);
    }
    return -1;
}

/* ---- validation ------------------------------------------------------------------------------ */

static int validate_role(const struct ctl_auth_role *r, uint32_t i, char *err, size_t errlen)
{
    if (!name_ok(r->name) || strcmp(r->name, CTL_AUTH_ROOT) == 0) {
        CTL__FAIL("auth.roles[%u].name: \"%s\" is not " NAME_RULE " other than root", i, r->name);
    }
    if (r->n_perms > CTL_ROLE_PERMS_MAX) {
        CTL__FAIL("auth.roles[%u].perms: %u, the limit is %u", i, r->n_perms, CTL_ROLE_PERMS_MAX);
    }
    for (uint32_t j = 0; j < r->n_perms; j++) {
        const char *why = perm_problem(&r->perms[j]);
        if (why != NULL) {
            CTL__FAIL("auth.roles[%u].perms[%u].%s", i, j, why);
        }
        if (j > 0 && perm_cmp(&r->perms[j - 1], &r->perms[j]) >= 0) {
            CTL__FAIL("auth.roles[%u].perms: not sorted by (type, value) without duplicates", i);
        }
    }
    return CTL_OK;
}

static int validate_user(const struct ctl_state *s, const struct ctl_user *u, uint32_t i, char *err,
                         size_t errlen)
{
    const struct ctl_auth *a = &s->auth;
    if (!name_ok(u->name)) {
        CTL__FAIL("auth.users[%u].name: \"%s\" is not " NAME_RULE, i, u->name);
    }
    if (!hash_ok(u->password_hash)) {
        CTL__FAIL(
            "auth.users[%u].password_hash: not a crypto_pwhash_str Argon2id string of at most "
            "%u bytes",
            i, CTL_PASSWORD_HASH_MAX);
    }
    if (u->revision < 1 || u->revision > s->revision) {
        CTL__FAIL("auth.users[%u].revision: %llu not in 1..%llu (the state revision)", i,
                  CTL__ULL(u->revision), CTL__ULL(s->revision));
    }
    if (u->n_roles > CTL_USER_ROLES_MAX) {
        CTL__FAIL("auth.users[%u].roles: %u, the limit is %u", i, u->n_roles, CTL_USER_ROLES_MAX);
    }
    for (uint32_t j = 0; j < u->n_roles; j++) {
        if (strcmp(u->roles[j], CTL_AUTH_ROOT) != 0 && ctl_auth_role(a, u->roles[j]) == NULL) {
            CTL__FAIL("auth.users[%u].roles[%u]: role \"%s\" does not exist", i, j, u->roles[j]);
        }
        if (j > 0 && strcmp(u->roles[j - 1], u->roles[j]) >= 0) {
            CTL__FAIL("auth.users[%u].roles: not sorted without duplicates", i);
        }
    }
    return CTL_OK;
}

int ctl__auth_validate(const struct ctl_state *s, char *err, size_t errlen)
{
    const struct ctl_auth *a = &s->auth;
    if (!a->enabled) {
        static const uint8_t zero[CTL_TOKEN_KEY_BYTES];
        if (a->n_users || a->n_roles || memcmp(a->token_key, zero, sizeof(zero)) != 0) {
            CTL__FAIL("auth: users, roles and token_key must be empty until auth_init");
        }
        return CTL_OK;
    }
    if (s->revision == 0) {
        CTL__FAIL("auth: enabled before bootstrap");
    }
    if (a->n_users > CTL_USERS_MAX || a->n_roles > CTL_AUTH_ROLES_MAX) {
        CTL__FAIL("auth: %u users / %u roles, the limits are %u / %u", a->n_users, a->n_roles,
                  CTL_USERS_MAX, CTL_AUTH_ROLES_MAX);
    }
    for (uint32_t i = 0; i < a->n_roles; i++) {
        CTL__TRY(validate_role(&a->roles[i], i, err, errlen));
        if (i > 0 && strcmp(a->roles[i - 1].name, a->roles[i].name) >= 0) {
            CTL__FAIL("auth.roles: not sorted by name without duplicates");
        }
    }
    for (uint32_t i = 0; i < a->n_users; i++) {
        CTL__TRY(validate_user(s, &a->users[i], i, err, errlen));
        if (i > 0 && strcmp(a->users[i - 1].name, a->users[i].name) >= 0) {
            CTL__FAIL("auth.users: not sorted by name without duplicates");
        }
    }
    const struct ctl_user *root = ctl_auth_user(a, CTL_AUTH_ROOT);
    if (root == NULL || root->n_roles == 0 || strcmp(root->roles[0], CTL_AUTH_ROOT) != 0) {
        CTL__FAIL("auth.users: user root with role root is required");
    }
    return CTL_OK;
}

/* ---- JSON section ---------------------------------------------------------------------------- */

static void hex_encode(const uint8_t *b, size_t n, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (size_t i = 0; i < n; i++) {
        out[2 * i] = d[b[i] >> 4];
        out[2 * i + 1] = d[b[i] & 15];
    }
    out[2 * n] = '\0';
}

static int hex_decode(const char *s, uint8_t *out, size_t n)
{
    if (strlen(s) != 2 * n) {
        return -1;
    }
    for (size_t i = 0; i < 2 * n; i++) {
        char c = s[i];
        int v = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
        if (v < 0) {
            return -1;
        }
        out[i / 2] = (uint8_t)(i % 2 ? (out[i / 2] | v) : v << 4);
    }
    return 0;
}

static json_t *encode_perm(const struct ctl_perm *p)
{
    return json_pack("{s:s,s:s,s:s}", "type", ctl_perm_type_name(p->type), "access",
                     ctl_access_name(p->access), "value", p->value);
}

static json_t *encode_role(const struct ctl_auth_role *r)
{
    json_t *perms = json_array();
    int bad = perms == NULL;
    for (uint32_t i = 0; !bad && i < r->n_perms; i++) {
        bad |= ctl__json_push(perms, encode_perm(&r->perms[i]));
    }
    if (bad) {
        json_decref(perms);
        return NULL;
    }
    return json_pack("{s:s,s:o}", "name", r->name, "perms", perms);
}

static json_t *encode_user(const struct ctl_user *u)
{
    json_t *roles = json_array();
    int bad = roles == NULL;
    for (uint32_t i = 0; !bad && i < u->n_roles; i++) {
        bad |= ctl__json_push(roles, json_string(u->roles[i]));
    }
    json_t *o = bad ? NULL
                    : json_pack("{s:s,s:o,s:o}", "name", u->name, "revision",
                                ctl__json_u64_new(u->revision), "roles", roles);
    if (o == NULL) {
        json_decref(bad ? roles : NULL);
        return NULL;
    }
    if (ctl__json_set(o, "password_hash", json_string(u->password_hash)) != 0) {
        json_decref(o);
        return NULL;
    }
    return o;
}

json_t *ctl__auth_encode(const struct ctl_auth *a)
{
    json_t *o = json_object(), *users = json_array(), *roles = json_array();
    int bad = o == NULL || users == NULL || roles == NULL;
    for (uint32_t i = 0; !bad && i < a->n_users; i++) {
        bad |= ctl__json_push(users, encode_user(&a->users[i]));
    }
    for (uint32_t i = 0; !bad && i < a->n_roles; i++) {
        bad |= ctl__json_push(roles, encode_role(&a->roles[i]));
    }
    if (bad) {
        json_decref(o);
        json_decref(users);
        json_decref(roles);
        return NULL;
    }
    bad |= ctl__json_set(o, "users", users);
    bad |= ctl__json_set(o, "roles", roles);
    char hex[2 * CTL_TOKEN_KEY_BYTES + 1];
    hex_encode(a->token_key, CTL_TOKEN_KEY_BYTES, hex);
    bad |= ctl__json_set(o, "token_key", json_string(hex));
    return ctl__json_done(o, bad);
}

/* A string field without embedded NUL. */
static int json_text(const json_t *o, const char *key, const char *path, size_t max, char *out,
                     char *err, size_t errlen)
{
    CTL__TRY(ctl__json_str(o, key, path, max, out, err, errlen));
    if (strlen(out) != json_string_length(json_object_get(o, key))) {
        char fp[CTL__PATH_MAX];
        ctl__json_path(fp, path, key);
        ctl__errf(err, errlen, "%s: holds a NUL byte", fp);
        return CTL_EDECODE;
    }
    return CTL_OK;
}

/* type, access and value of o (which may hold other fields: the caller checked them). */
static int read_perm_values(const json_t *o, const char *path, struct ctl_perm *p, char *err,
                            size_t errlen)
{
    int type, access;
    CTL__TRY(ctl__json_enum(o, "type", path, perm_type_names, CTL__N(perm_type_names), &type, err,
                            errlen));
    CTL__TRY(ctl__json_enum(o, "access", path, access_names + 1, CTL__N(access_names) - 1, &access,
                            err, errlen));
    memset(p, 0, sizeof(*p));
    p->type = (enum ctl_perm_type)type;
    p->access = (uint32_t)access + 1;
    return json_text(o, "value", path, CTL_KEY_PREFIX_MAX, p->value, err, errlen);
}

static int read_perm(const json_t *o, const char *path, struct ctl_perm *p, char *err,
                     size_t errlen)
{
    static const char *const fields[] = {"type", "access", "value"};
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    return read_perm_values(o, path, p, err, errlen);
}

static int decode_role(const json_t *o, const char *path, struct ctl_auth_role *r, char *err,
                       size_t errlen)
{
    static const char *const fields[] = {"name", "perms"};
    json_t *arr;
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(json_text(o, "name", path, CTL_AUTH_NAME_MAX, r->name, err, errlen));
    CTL__TRY(ctl__json_array(o, "perms", path, CTL_ROLE_PERMS_MAX, &arr, err, errlen));
    r->n_perms = (uint32_t)json_array_size(arr);
    for (uint32_t i = 0; i < r->n_perms; i++) {
        char p[CTL__PATH_MAX];
        snprintf(p, sizeof(p), "%.60s.perms[%u]", path, i);
        CTL__TRY(read_perm(json_array_get(arr, i), p, &r->perms[i], err, errlen));
    }
    return CTL_OK;
}

static int decode_user(const json_t *o, const char *path, struct ctl_user *u, char *err,
                       size_t errlen)
{
    static const char *const fields[] = {"name", "password_hash", "revision", "roles"};
    json_t *arr;
    CTL__TRY(ctl__json_fields(o, path, fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(json_text(o, "name", path, CTL_AUTH_NAME_MAX, u->name, err, errlen));
    CTL__TRY(
        json_text(o, "password_hash", path, CTL_PASSWORD_HASH_MAX, u->password_hash, err, errlen));
    CTL__TRY(ctl__json_u64(o, "revision", path, 0, CTL_U64_JSON_MAX, &u->revision, err, errlen));
    CTL__TRY(ctl__json_array(o, "roles", path, CTL_USER_ROLES_MAX, &arr, err, errlen));
    u->n_roles = (uint32_t)json_array_size(arr);
    for (uint32_t i = 0; i < u->n_roles; i++) {
        const json_t *v = json_array_get(arr, i);
        if (!json_is_string(v) || json_string_length(v) > CTL_AUTH_NAME_MAX ||
            strlen(json_string_value(v)) != json_string_length(v)) {
            ctl__errf(err, errlen, "%s.roles[%u]: expected a role name of at most %u bytes", path,
                      i, CTL_AUTH_NAME_MAX);
            return CTL_EDECODE;
        }
        snprintf(u->roles[i], sizeof(u->roles[i]), "%s", json_string_value(v));
    }
    return CTL_OK;
}

int ctl__auth_decode(const json_t *o, struct ctl_auth *a, char *err, size_t errlen)
{
    static const char *const fields[] = {"token_key", "users", "roles"};
    char hex[2 * CTL_TOKEN_KEY_BYTES + 1];
    json_t *arr;
    memset(a, 0, sizeof(*a));
    CTL__TRY(ctl__json_fields(o, "auth", fields, CTL__N(fields), NULL, 0, err, errlen));
    CTL__TRY(ctl__json_str(o, "token_key", "auth", 2 * CTL_TOKEN_KEY_BYTES, hex, err, errlen));
    if (hex_decode(hex, a->token_key, CTL_TOKEN_KEY_BYTES) != 0) {
        ctl__errf(err, errlen, "auth.token_key: not 64 lowercase hex digits");
        return CTL_EDECODE;
    }
    CTL__TRY(ctl__json_array(o, "users", "auth", CTL_USERS_MAX, &arr, err, errlen));
    a->n_users = (uint32_t)json_array_size(arr);
    for (uint32_t i = 0; i < a->n_users; i++) {
        char p[CTL__PATH_MAX];
        snprintf(p, sizeof(p), "auth.users[%u]", i);
        CTL__TRY(decode_user(json_array_get(arr, i), p, &a->users[i], err, errlen));
    }
    CTL__TRY(ctl__json_array(o, "roles", "auth", CTL_AUTH_ROLES_MAX, &arr, err, errlen));
    a->n_roles = (uint32_t)json_array_size(arr);
    for (uint32_t i = 0; i < a->n_roles; i++) {
        char p[CTL__PATH_MAX];
        snprintf(p, sizeof(p), "auth.roles[%u]", i);
        CTL__TRY(decode_role(json_array_get(arr, i), p, &a->roles[i], err, errlen));
    }
    a->enabled = true;
    return CTL_OK;
}

/* ---- commands -------------------------------------------------------------------------------- */

static bool enabled_or_reject(const struct ctl_state *s, struct ctl_result *r)
{
    if (!s->auth.enabled) {
        CTL__REJECT(
            r, "auth is not enabled in this cluster (start the controller voters with --auth)");
        return false;
    }
    return true;
}

/* cmd[key] as a user or role name, or REJECTED naming the rule. */
static int read_name(const json_t *cmd, const char *key, char *out, struct ctl_result *r)
{
    CTL__READ(r, json_text(cmd, key, "", CTL_AUTH_NAME_MAX, out, CTL__RS(r)));
    if (!name_ok(out)) {
        return CTL__REJECT(r, "%s: \"%s\" is not " NAME_RULE, key, out);
    }
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int read_hash(const json_t *cmd, char *out, struct ctl_result *r)
{
    CTL__READ(r, json_text(cmd, "password_hash", "", CTL_PASSWORD_HASH_MAX, out, CTL__RS(r)));
    if (!hash_ok(out)) {
        return CTL__REJECT(r,
                           "password_hash: not a crypto_pwhash_str Argon2id string of at most %u "
                           "bytes",
                           CTL_PASSWORD_HASH_MAX);
    }
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

#define READ_OK(r, expr)                                                                           \
    do {                                                                                           \
        if ((expr) != CTL_OK || (r)->outcome == CTL_OUTCOME_REJECTED) {                            \
            (r)->outcome = CTL_OUTCOME_REJECTED;                                                   \
            return CTL_OK;                                                                         \
        }                                                                                          \
    } while (0)

static struct ctl_user *user_mut(struct ctl_state *s, const char *name)
{
    return (struct ctl_user *)ctl_auth_user(&s->auth, name);
}

static struct ctl_auth_role *role_mut(struct ctl_state *s, const char *name)
{
    return (struct ctl_auth_role *)ctl_auth_role(&s->auth, name);
}

static void user_insert(struct ctl_auth *a, const struct ctl_user *u)
{
    uint32_t at = 0;
    while (at < a->n_users && strcmp(a->users[at].name, u->name) < 0) {
        at++;
    }
    memmove(&a->users[at + 1], &a->users[at], (a->n_users - at) * sizeof(a->users[0]));
    a->users[at] = *u;
    a->n_users++;
}

int ctl__op_auth_init(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char hex[2 * CTL_TOKEN_KEY_BYTES + 1];
    struct ctl_user root;
    if (s->auth.enabled) {
        return CTL__REJECT(r, "auth already enabled (%u users, %u roles)", s->auth.n_users,
                           s->auth.n_roles);
    }
    CTL__READ(r, ctl__json_str(cmd, "token_key", "", 2 * CTL_TOKEN_KEY_BYTES, hex, CTL__RS(r)));
    if (hex_decode(hex, s->auth.token_key, CTL_TOKEN_KEY_BYTES) != 0) {
        memset(s->auth.token_key, 0, sizeof(s->auth.token_key));
        return CTL__REJECT(r, "token_key: not 64 lowercase hex digits");
    }
    memset(&root, 0, sizeof(root));
    READ_OK(r, read_hash(cmd, root.password_hash, r));
    snprintf(root.name, sizeof(root.name), CTL_AUTH_ROOT);
    snprintf(root.roles[0], sizeof(root.roles[0]), CTL_AUTH_ROOT);
    root.n_roles = 1;
    root.revision = s->revision + 1;
    user_insert(&s->auth, &root);
    s->auth.enabled = true;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

int ctl__op_user_add(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_user u;
    memset(&u, 0, sizeof(u));
    if (!enabled_or_reject(s, r)) {
        return CTL_OK;
    }
    READ_OK(r, read_name(cmd, "name", u.name, r));
    READ_OK(r, read_hash(cmd, u.password_hash, r));
    if (ctl_auth_user(&s->auth, u.name) != NULL) {
        return CTL__REJECT(r, "name: user %s already exists", u.name);
    }
    if (s->auth.n_users >= CTL_USERS_MAX) {
        return CTL__REJECT(r, "users: already %u, the limit (CTL_USERS_MAX)", CTL_USERS_MAX);
    }
    u.revision = s->revision + 1;
    user_insert(&s->auth, &u);
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* The existing user cmd["name"] names, or NULL with r REJECTED. */
static struct ctl_user *existing_user(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char name[CTL_AUTH_NAME_MAX + 1];
    if (!enabled_or_reject(s, r) || read_name(cmd, "name", name, r) != CTL_OK ||
        r->outcome == CTL_OUTCOME_REJECTED) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return NULL;
    }
    struct ctl_user *u = user_mut(s, name);
    if (u == NULL) {
        CTL__REJECT(r, "name: user %s does not exist", name);
    }
    return u;
}

int ctl__op_user_delete(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_user *u = existing_user(s, cmd, r);
    if (u == NULL) {
        return CTL_OK;
    }
    if (strcmp(u->name, CTL_AUTH_ROOT) == 0) {
        return CTL__REJECT(r, "name: user root cannot be deleted (change its password instead)");
    }
    struct ctl_auth *a = &s->auth;
    size_t at = (size_t)(u - a->users);
    memmove(&a->users[at], &a->users[at + 1], (a->n_users - at - 1) * sizeof(a->users[0]));
    a->n_users--;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

int ctl__op_user_passwd(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    char hash[CTL_PASSWORD_HASH_MAX + 1];
    struct ctl_user *u = existing_user(s, cmd, r);
    if (u == NULL) {
        return CTL_OK;
    }
    READ_OK(r, read_hash(cmd, hash, r));
    memcpy(u->password_hash, hash, sizeof(hash));
    u->revision = s->revision + 1;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int user_role(struct ctl_state *s, const json_t *cmd, bool grant, struct ctl_result *r)
{
    char role[CTL_AUTH_NAME_MAX + 1];
    struct ctl_user *u = existing_user(s, cmd, r);
    if (u == NULL) {
        return CTL_OK;
    }
    READ_OK(r, read_name(cmd, "role", role, r));
    bool builtin = strcmp(role, CTL_AUTH_ROOT) == 0;
    if (!builtin && ctl_auth_role(&s->auth, role) == NULL) {
        return CTL__REJECT(r, "role: role %s does not exist", role);
    }
    uint32_t at = 0;
    while (at < u->n_roles && strcmp(u->roles[at], role) < 0) {
        at++;
    }
    bool has = at < u->n_roles && strcmp(u->roles[at], role) == 0;
    if (grant && has) {
        return CTL__NOOP(r, "user %s already has role %s", u->name, role);
    }
    if (!grant && !has) {
        return CTL__REJECT(r, "role: user %s does not have role %s", u->name, role);
    }
    if (!grant && builtin && strcmp(u->name, CTL_AUTH_ROOT) == 0) {
        return CTL__REJECT(r, "role: user root keeps role root");
    }
    if (grant && u->n_roles >= CTL_USER_ROLES_MAX) {
        return CTL__REJECT(r, "role: user %s already has %u roles, the limit (CTL_USER_ROLES_MAX)",
                           u->name, CTL_USER_ROLES_MAX);
    }
    if (grant) {
        memmove(&u->roles[at + 1], &u->roles[at], (u->n_roles - at) * sizeof(u->roles[0]));
        snprintf(u->roles[at], sizeof(u->roles[at]), "%s", role);
        u->n_roles++;
    } else {
        memmove(&u->roles[at], &u->roles[at + 1], (u->n_roles - at - 1) * sizeof(u->roles[0]));
        u->n_roles--;
    }
    u->revision = s->revision + 1;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

int ctl__op_user_grant_role(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    return user_role(s, cmd, true, r);
}

int ctl__op_user_revoke_role(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    return user_role(s, cmd, false, r);
}

int ctl__op_role_add(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_auth_role role;
    memset(&role, 0, sizeof(role));
    if (!enabled_or_reject(s, r)) {
        return CTL_OK;
    }
    READ_OK(r, read_name(cmd, "name", role.name, r));
    if (strcmp(role.name, CTL_AUTH_ROOT) == 0) {
        return CTL__REJECT(r, "name: root is the built-in role (every permission)");
    }
    if (ctl_auth_role(&s->auth, role.name) != NULL) {
        return CTL__REJECT(r, "name: role %s already exists", role.name);
    }
    struct ctl_auth *a = &s->auth;
    if (a->n_roles >= CTL_AUTH_ROLES_MAX) {
        return CTL__REJECT(r, "roles: already %u, the limit (CTL_AUTH_ROLES_MAX)",
                           CTL_AUTH_ROLES_MAX);
    }
    uint32_t at = 0;
    while (at < a->n_roles && strcmp(a->roles[at].name, role.name) < 0) {
        at++;
    }
    memmove(&a->roles[at + 1], &a->roles[at], (a->n_roles - at) * sizeof(a->roles[0]));
    a->roles[at] = role;
    a->n_roles++;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

/* The existing, non built-in role cmd[key] names, or NULL with r REJECTED. */
static struct ctl_auth_role *existing_role(struct ctl_state *s, const json_t *cmd, const char *key,
                                           struct ctl_result *r)
{
    char name[CTL_AUTH_NAME_MAX + 1];
    if (!enabled_or_reject(s, r) || read_name(cmd, key, name, r) != CTL_OK ||
        r->outcome == CTL_OUTCOME_REJECTED) {
        r->outcome = CTL_OUTCOME_REJECTED;
        return NULL;
    }
    if (strcmp(name, CTL_AUTH_ROOT) == 0) {
        CTL__REJECT(r, "%s: root is the built-in role and cannot be changed", key);
        return NULL;
    }
    struct ctl_auth_role *role = role_mut(s, name);
    if (role == NULL) {
        CTL__REJECT(r, "%s: role %s does not exist", key, name);
    }
    return role;
}

int ctl__op_role_delete(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    struct ctl_auth_role *role = existing_role(s, cmd, "name", r);
    if (role == NULL) {
        return CTL_OK;
    }
    struct ctl_auth *a = &s->auth;
    for (uint32_t i = 0; i < a->n_users; i++) {
        for (uint32_t j = 0; j < a->users[i].n_roles; j++) {
            if (strcmp(a->users[i].roles[j], role->name) == 0) {
                return CTL__REJECT(r, "name: role %s is granted to user %s; revoke it first",
                                   role->name, a->users[i].name);
            }
        }
    }
    size_t at = (size_t)(role - a->roles);
    memmove(&a->roles[at], &a->roles[at + 1], (a->n_roles - at - 1) * sizeof(a->roles[0]));
    a->n_roles--;
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

static int role_perm(struct ctl_state *s, const json_t *cmd, bool grant, struct ctl_result *r)
{
    struct ctl_perm p;
    struct ctl_auth_role *role = existing_role(s, cmd, "role", r);
    if (role == NULL) {
        return CTL_OK;
    }
    CTL__READ(r, read_perm_values(cmd, "", &p, CTL__RS(r)));
    const char *why = perm_problem(&p);
    if (why != NULL) {
        return CTL__REJECT(r, "%s", why);
    }
    uint32_t at = 0;
    while (at < role->n_perms && perm_cmp(&role->perms[at], &p) < 0) {
        at++;
    }
    bool has = at < role->n_perms && perm_cmp(&role->perms[at], &p) == 0;
    struct ctl_perm *cur = has ? &role->perms[at] : NULL;
    if (grant) {
        if (cur != NULL && (cur->access | p.access) == cur->access) {
            return CTL__NOOP(r, "role %s already has %s %s \"%s\"", role->name,
                             ctl_access_name(cur->access), ctl_perm_type_name(p.type), p.value);
        }
        if (cur != NULL) {
            cur->access |= p.access;
        } else if (role->n_perms >= CTL_ROLE_PERMS_MAX) {
            return CTL__REJECT(r, "role %s: already %u permissions, the limit (CTL_ROLE_PERMS_MAX)",
                               role->name, CTL_ROLE_PERMS_MAX);
        } else {
            memmove(&role->perms[at + 1], &role->perms[at],
                    (role->n_perms - at) * sizeof(role->perms[0]));
            role->perms[at] = p;
            role->n_perms++;
        }
    } else {
        if (cur == NULL || (cur->access & p.access) == 0) {
            return CTL__REJECT(r, "role %s has no %s %s \"%s\" to revoke", role->name,
                               ctl_access_name(p.access), ctl_perm_type_name(p.type), p.value);
        }
        cur->access &= ~p.access;
        if (cur->access == 0 || p.type == CTL_PERM_ADMIN) {
            memmove(&role->perms[at], &role->perms[at + 1],
                    (role->n_perms - at - 1) * sizeof(role->perms[0]));
            role->n_perms--;
        }
    }
    r->outcome = CTL_OUTCOME_CHANGED;
    return CTL_OK;
}

int ctl__op_role_grant(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    return role_perm(s, cmd, true, r);
}

int ctl__op_role_revoke(struct ctl_state *s, const json_t *cmd, struct ctl_result *r)
{
    return role_perm(s, cmd, false, r);
}

/* ---- builders -------------------------------------------------------------------------------- */

static int dump(json_t *cmd, uint64_t expected_revision, char **out)
{
    if (cmd == NULL) {
        return CTL_ENOMEM;
    }
    int bad = 0;
    if (expected_revision > CTL_U64_JSON_MAX) {
        json_decref(cmd);
        return CTL_EINVALID;
    }
    if (expected_revision != 0) {
        bad |= ctl__json_set(cmd, "expected_revision", ctl__json_u64_new(expected_revision));
    }
    *out = bad ? NULL : ctl__json_dump(cmd, NULL);
    json_decref(cmd);
    return *out == NULL ? CTL_ENOMEM : CTL_OK;
}

static bool text_ok(const char *s)
{
    return s != NULL && ctl__utf8_ok(s);
}

int ctl_cmd_auth_init(const uint8_t token_key[CTL_TOKEN_KEY_BYTES], const char *root_hash,
                      char **out)
{
    char hex[2 * CTL_TOKEN_KEY_BYTES + 1];
    if (!text_ok(root_hash)) {
        return CTL_EINVALID;
    }
    hex_encode(token_key, CTL_TOKEN_KEY_BYTES, hex);
    return dump(
        json_pack("{s:s,s:s,s:s}", "op", "auth_init", "token_key", hex, "password_hash", root_hash),
        0, out);
}

int ctl_cmd_user(const char *op, const char *name, const char *password_hash,
                 uint64_t expected_revision, char **out)
{
    if (!text_ok(op) || !text_ok(name) || (password_hash != NULL && !text_ok(password_hash))) {
        return CTL_EINVALID;
    }
    json_t *cmd = json_pack("{s:s,s:s}", "op", op, "name", name);
    if (cmd != NULL && password_hash != NULL &&
        ctl__json_set(cmd, "password_hash", json_string(password_hash)) != 0) {
        json_decref(cmd);
        cmd = NULL;
    }
    return dump(cmd, expected_revision, out);
}

int ctl_cmd_user_role(const char *op, const char *name, const char *role,
                      uint64_t expected_revision, char **out)
{
    if (!text_ok(op) || !text_ok(name) || !text_ok(role)) {
        return CTL_EINVALID;
    }
    return dump(json_pack("{s:s,s:s,s:s}", "op", op, "name", name, "role", role), expected_revision,
                out);
}

int ctl_cmd_role(const char *op, const char *name, const struct ctl_perm *perm,
                 uint64_t expected_revision, char **out)
{
    if (!text_ok(op) || !text_ok(name)) {
        return CTL_EINVALID;
    }
    if (perm == NULL) {
        return dump(json_pack("{s:s,s:s}", "op", op, "name", name), expected_revision, out);
    }
    const char *type = ctl_perm_type_name(perm->type), *access = ctl_access_name(perm->access);
    if (type == NULL || access == NULL || !text_ok(perm->value)) {
        return CTL_EINVALID;
    }
    return dump(json_pack("{s:s,s:s,s:s,s:s,s:s}", "op", op, "role", name, "type", type, "access",
                          access, "value", perm->value),
                expected_revision, out);
}
