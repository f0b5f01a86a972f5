/* auth_test.c - controller users and roles: commands, limits, JSON, permission check. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"

#define HASH "$argon2id$v=19$m=32768,t=2,p=1$c2FsdHNhbHRzYWx0$aGFzaGhhc2hoYXNoaGFzaGhhc2hoYXNo"
#define HASH2 "$argon2id$v=19$m=32768,t=2,p=1$b3RoZXJzYWx0c2FsdA$b3RoZXJoYXNob3RoZXJoYXNob3RoZXI"

static const uint8_t KEY[CTL_TOKEN_KEY_BYTES] = {1,  2,  3,  4,  5,  6,  7,  8,  9,  10, 11,
                                                 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                                 23, 24, 25, 26, 27, 28, 29, 30, 31, 32};

static char *built(int rc, char **cmd)
{
    CU_ASSERT_EQUAL_FATAL(rc, CTL_OK);
    return *cmd;
}

/* The fixture with auth_init applied: user root (role root). */
static struct ctl_state *auth_state(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *c;
    ctl_test_check(s, built(ctl_cmd_auth_init(KEY, HASH, &c), &c), CTL_OUTCOME_CHANGED, "");
    return s;
}

static char *user(const char *op, const char *name, const char *hash)
{
    char *c;
    return built(ctl_cmd_user(op, name, hash, 0, &c), &c);
}

static char *user_role(const char *op, const char *name, const char *role)
{
    char *c;
    return built(ctl_cmd_user_role(op, name, role, 0, &c), &c);
}

static char *role(const char *op, const char *name, enum ctl_perm_type type, uint32_t access,
                  const char *value)
{
    char *c;
    struct ctl_perm p = {.type = type, .access = access};
    snprintf(p.value, sizeof(p.value), "%s", value);
    return built(ctl_cmd_role(op, name, op[5] == 'g' || op[5] == 'r' ? &p : NULL, 0, &c), &c);
}

static void test_auth_init(void)
{
    struct ctl_state *s = ctl_test_fixture(4);
    char *c;
    /* before auth_init every auth command is refused */
    ctl_test_check(s, user("user_add", "bob", HASH), CTL_OUTCOME_REJECTED, "auth is not enabled");
    ctl_test_check(s, built(ctl_cmd_auth_init(KEY, "plain text", &c), &c), CTL_OUTCOME_REJECTED,
                   "password_hash: not a crypto_pwhash_str");
    ctl_test_check(s, built(ctl_cmd_auth_init(KEY, HASH, &c), &c), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(s->auth.enabled);
    CU_ASSERT_EQUAL(memcmp(s->auth.token_key, KEY, sizeof(KEY)), 0);
    const struct ctl_user *root = ctl_auth_user(&s->auth, "root");
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    CU_ASSERT_EQUAL(root->revision, s->revision);
    CU_ASSERT_STRING_EQUAL(root->roles[0], "root");
    ctl_test_check(s, built(ctl_cmd_auth_init(KEY, HASH, &c), &c), CTL_OUTCOME_REJECTED,
                   "auth already enabled");
    /* a state without auth encodes without the section (old files keep their bytes) */
    struct ctl_state *plain = ctl_test_fixture(4);
    char *e = ctl_test_encode(plain);
    CU_ASSERT_PTR_NULL(strstr(e, "\"auth\""));
    ctl_free(e);
    free(plain);
    free(s);
}

static void test_users(void)
{
    struct ctl_state *s = auth_state();
    ctl_test_check(s, user("user_add", "bob", HASH), CTL_OUTCOME_CHANGED, "");
    uint64_t rev = ctl_auth_user(&s->auth, "bob")->revision;
    CU_ASSERT_EQUAL(rev, s->revision);
    ctl_test_check(s, user("user_add", "bob", HASH), CTL_OUTCOME_REJECTED,
                   "user bob already exists");
    ctl_test_check(s, user("user_add", "node-7", HASH), CTL_OUTCOME_REJECTED, "not node-<digits>");
    ctl_test_check(s, user("user_add", "a/b", HASH), CTL_OUTCOME_REJECTED, "is not 1..32");
    ctl_test_check(s, user("user_add", "abcdefghijklmnopqrstuvwxyz0123456", HASH),
                   CTL_OUTCOME_REJECTED, "the limit is 32");
    ctl_test_check(s, user("user_add", "carol", "$2y$bcrypt"), CTL_OUTCOME_REJECTED,
                   "password_hash");
    ctl_test_check(s, user("user_passwd", "nobody", HASH2), CTL_OUTCOME_REJECTED,
                   "user nobody does not exist");
    ctl_test_check(s, user("user_passwd", "bob", HASH2), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(ctl_auth_user(&s->auth, "bob")->revision > rev);
    CU_ASSERT_STRING_EQUAL(ctl_auth_user(&s->auth, "bob")->password_hash, HASH2);
    ctl_test_check(s, user("user_delete", "root", NULL), CTL_OUTCOME_REJECTED,
                   "user root cannot be deleted");
    ctl_test_check(s, user_role("user_revoke_role", "root", "root"), CTL_OUTCOME_REJECTED,
                   "user root keeps role root");
    ctl_test_check(s, user("user_delete", "bob", NULL), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_PTR_NULL(ctl_auth_user(&s->auth, "bob"));
    /* a re-added user gets a revision above every token of the old one */
    ctl_test_check(s, user("user_add", "bob", HASH), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(ctl_auth_user(&s->auth, "bob")->revision > rev + 1);
    /* the user limit */
    for (int i = s->auth.n_users; i < CTL_USERS_MAX; i++) {
        char name[16];
        snprintf(name, sizeof(name), "u%02d", i);
        ctl_test_check(s, user("user_add", name, HASH), CTL_OUTCOME_CHANGED, "");
    }
    ctl_test_check(s, user("user_add", "onemore", HASH), CTL_OUTCOME_REJECTED,
                   "users: already 64, the limit");
    free(s);
}

static void test_roles(void)
{
    struct ctl_state *s = auth_state();
    ctl_test_check(s, user("user_add", "bob", HASH), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_add", "root", 0, 0, ""), CTL_OUTCOME_REJECTED, "built-in role");
    ctl_test_check(s, role("role_add", "reader", 0, 0, ""), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_add", "reader", 0, 0, ""), CTL_OUTCOME_REJECTED, "already exists");
    ctl_test_check(s, role("role_grant", "nope", CTL_PERM_KEY_PREFIX, 1, "b/"),
                   CTL_OUTCOME_REJECTED, "role nope does not exist");
    ctl_test_check(s, role("role_grant", "root", CTL_PERM_KEY_PREFIX, 1, "b/"),
                   CTL_OUTCOME_REJECTED, "built-in role and cannot be changed");
    ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KEY_PREFIX, CTL_ACCESS_READ, "b/"),
                   CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KEY_PREFIX, CTL_ACCESS_READ, "b/"),
                   CTL_OUTCOME_NOOP, "already has read key_prefix");
    ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KIND, CTL_ACCESS_READ, "nosuchkind"),
                   CTL_OUTCOME_REJECTED, "not a kind");
    ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KEY_PREFIX, CTL_ACCESS_READ, "\x01"),
                   CTL_OUTCOME_REJECTED, "printable ASCII");
    ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KIND, CTL_ACCESS_WRITE, "user"),
                   CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, user_role("user_grant_role", "bob", "nope"), CTL_OUTCOME_REJECTED,
                   "role nope does not exist");
    uint64_t rev = ctl_auth_user(&s->auth, "bob")->revision;
    ctl_test_check(s, user_role("user_grant_role", "bob", "reader"), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(ctl_auth_user(&s->auth, "bob")->revision > rev);
    ctl_test_check(s, user_role("user_grant_role", "bob", "reader"), CTL_OUTCOME_NOOP,
                   "already has role reader");
    ctl_test_check(s, role("role_delete", "reader", 0, 0, ""), CTL_OUTCOME_REJECTED,
                   "role reader is granted to user bob; revoke it first");
    /* the permission limit */
    for (int i = 2; i < CTL_ROLE_PERMS_MAX; i++) {
        char prefix[16];
        snprintf(prefix, sizeof(prefix), "p%02d/", i);
        ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KEY_PREFIX, 1, prefix),
                       CTL_OUTCOME_CHANGED, "");
    }
    ctl_test_check(s, role("role_grant", "reader", CTL_PERM_KEY_PREFIX, 1, "full/"),
                   CTL_OUTCOME_REJECTED, "already 16 permissions, the limit");
    ctl_test_check(s, role("role_revoke", "reader", CTL_PERM_KEY_PREFIX, CTL_ACCESS_WRITE, "b/"),
                   CTL_OUTCOME_REJECTED, "has no write key_prefix \"b/\" to revoke");
    ctl_test_check(s, role("role_revoke", "reader", CTL_PERM_KEY_PREFIX, CTL_ACCESS_READ, "b/"),
                   CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, user_role("user_revoke_role", "bob", "reader"), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_delete", "reader", 0, 0, ""), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->auth.n_roles, 0);
    free(s);
}

static void test_check(void)
{
    struct ctl_state *s = auth_state();
    ctl_test_check(s, user("user_add", "bob", HASH), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_add", "b", 0, 0, ""), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_grant", "b", CTL_PERM_KEY_PREFIX, CTL_ACCESS_READ, "b/"),
                   CTL_OUTCOME_CHANGED, "");
    ctl_test_check(
        s, role("role_grant", "b", CTL_PERM_KIND, CTL_ACCESS_READ | CTL_ACCESS_WRITE, "channel"),
        CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, user_role("user_grant_role", "bob", "b"), CTL_OUTCOME_CHANGED, "");
    const struct ctl_user *bob = ctl_auth_user(&s->auth, "bob");
    const struct ctl_user *root = ctl_auth_user(&s->auth, "root");
    char why[256];
    struct ctl_need rd = {.type = CTL_PERM_KEY_PREFIX,
                          .access = CTL_ACCESS_READ,
                          .key = (const uint8_t *)"b/x",
                          .key_len = 3};
    struct ctl_need wr = rd;
    wr.access = CTL_ACCESS_WRITE;
    struct ctl_need other = {.type = CTL_PERM_KEY_PREFIX,
                             .access = CTL_ACCESS_WRITE,
                             .key = (const uint8_t *)"a/1",
                             .key_len = 3};
    struct ctl_need shorter = {.type = CTL_PERM_KEY_PREFIX,
                               .access = CTL_ACCESS_READ,
                               .key = (const uint8_t *)"b",
                               .key_len = 1};
    struct ctl_need chan = {.type = CTL_PERM_KIND, .access = CTL_ACCESS_WRITE, .kind = "channel"};
    struct ctl_need usr = {.type = CTL_PERM_KIND, .access = CTL_ACCESS_READ, .kind = "user"};
    struct ctl_need admin = {.type = CTL_PERM_ADMIN, .access = CTL_ACCESS_WRITE};
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &rd, why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &chan, why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &wr, why, sizeof(why)), -1);
    CU_ASSERT_STRING_EQUAL(why, "write on key \"b/x\" needed (a key_prefix grant covering it); "
                                "user bob has read key_prefix \"b/\", readwrite kind \"channel\"");
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &other, why, sizeof(why)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "write on key \"a/1\" needed"));
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &shorter, why, sizeof(why)), -1);
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &usr, why, sizeof(why)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "read on kind \"user\" needed"));
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &admin, why, sizeof(why)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "admin needed; user bob has"));
    /* root has everything; "" as a prefix covers every key */
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, root, &admin, why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, root, &other, why, sizeof(why)), 0);
    ctl_test_check(s, role("role_grant", "b", CTL_PERM_KEY_PREFIX, CTL_ACCESS_WRITE, ""),
                   CTL_OUTCOME_CHANGED, "");
    bob = ctl_auth_user(&s->auth, "bob");
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &other, why, sizeof(why)), 0);
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &admin, why, sizeof(why)), -1);
    ctl_test_check(s, role("role_grant", "b", CTL_PERM_ADMIN, 3, ""), CTL_OUTCOME_CHANGED, "");
    bob = ctl_auth_user(&s->auth, "bob");
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &admin, why, sizeof(why)), 0);
    /* a key with bytes that are not printable is quoted with \x escapes */
    ctl_test_check(s, role("role_revoke", "b", CTL_PERM_KEY_PREFIX, CTL_ACCESS_WRITE, ""),
                   CTL_OUTCOME_CHANGED, "");
    bob = ctl_auth_user(&s->auth, "bob");
    struct ctl_need bin = {.type = CTL_PERM_KEY_PREFIX,
                           .access = CTL_ACCESS_WRITE,
                           .key = (const uint8_t *)"\x00\xff\"",
                           .key_len = 3};
    CU_ASSERT_EQUAL(ctl_auth_check(&s->auth, bob, &bin, why, sizeof(why)), -1);
    CU_ASSERT_PTR_NOT_NULL(strstr(why, "\"\\x00\\xff\\x22\""));
    free(s);
}

/* The auth section round-trips through the canonical JSON; broken sections are refused. */
static void test_codec(void)
{
    struct ctl_state *s = auth_state();
    ctl_test_check(s, user("user_add", "bob", HASH2), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_add", "b", 0, 0, ""), CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, role("role_grant", "b", CTL_PERM_KIND, CTL_ACCESS_READ, "event"),
                   CTL_OUTCOME_CHANGED, "");
    ctl_test_check(s, user_role("user_grant_role", "bob", "b"), CTL_OUTCOME_CHANGED, "");
    char *e = ctl_test_encode(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(e, "\"token_key\":\"0102030405"));
    CU_ASSERT_PTR_NOT_NULL(strstr(e, HASH2));
    struct ctl_state *d = malloc(sizeof(*d));
    char err[256];
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(e, strlen(e), d, err, sizeof(err)), CTL_OK);
    char *e2 = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(e, e2);
    ctl_free(e2);
    /* edits that break a rule: unknown role, unsorted users, missing root, bad key */
    json_t *root = json_loads(e, 0, NULL);
    json_t *auth = json_object_get(root, "auth");
    json_t *bob = json_array_get(json_object_get(auth, "users"), 0);
    json_array_set_new(json_object_get(bob, "roles"), 0, json_string("ghost"));
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, d, err, sizeof(err)), CTL_ESTATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "role \"ghost\" does not exist"));
    json_decref(root);
    root = json_loads(e, 0, NULL);
    auth = json_object_get(root, "auth");
    json_array_remove(json_object_get(auth, "users"), 1); /* root */
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, d, err, sizeof(err)), CTL_ESTATE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "user root with role root is required"));
    json_decref(root);
    root = json_loads(e, 0, NULL);
    json_object_set_new(json_object_get(root, "auth"), "token_key", json_string("zz"));
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, d, err, sizeof(err)), CTL_EDECODE);
    json_decref(root);
    root = json_loads(e, 0, NULL);
    json_object_set_new(json_object_get(root, "auth"), "extra", json_true());
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, d, err, sizeof(err)), CTL_EDECODE);
    json_decref(root);
    ctl_free(e);
    free(d);
    free(s);
}

void ctl_test_add_auth(void)
{
    CU_pSuite suite = CU_add_suite("controller_auth", NULL, NULL);
    CU_add_test(suite, "auth_init once, root user, no section without it", test_auth_init);
    CU_add_test(suite, "users: add, passwd, delete, names, limit, revisions", test_users);
    CU_add_test(suite, "roles: add, grant, revoke, delete, limit", test_roles);
    CU_add_test(suite, "permission check and its refusal sentence", test_check);
    CU_add_test(suite, "auth section JSON round trip and broken sections", test_codec);
}
