/* codec_test.c - CRC-32C, canonical encoding round trip, strict decode and validation messages. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ctl_test.h"

static void test_crc32c_known_answers(void)
{
    CU_ASSERT_EQUAL(ctl_crc32c("123456789", 9), 0xE3069283u);
    CU_ASSERT_EQUAL(ctl_crc32c(NULL, 0), 0u);
    uint8_t zeros[32] = {0}, ones[32];
    memset(ones, 0xFF, sizeof(ones));
    CU_ASSERT_EQUAL(ctl_crc32c(zeros, sizeof(zeros)), 0x8A9136AAu); /* RFC 3720 B.4 */
    CU_ASSERT_EQUAL(ctl_crc32c(ones, sizeof(ones)), 0x62A8AB43u);
}

static void test_round_trip(void)
{
    struct ctl_state *s = ctl_test_fixture(8), *d = malloc(sizeof(*d));
    char err[256] = "";
    char *a = ctl_test_encode(s);
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(a, strlen(a), d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(memcmp(d->nodes, s->nodes, sizeof(s->nodes)), 0);
    CU_ASSERT_EQUAL(d->revision, s->revision);
    CU_ASSERT_STRING_EQUAL(d->tasks[1].last_error, s->tasks[1].last_error);
    char *b = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(a, b);
    /* Sets are sorted and keys sorted: node 1 comes first, "address" is its first key. */
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"nodes\":[{\"address\":\"10.0.0.1:7700\",\"id\":1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"roles\":[\"controller_voter\",\"data\"]"));
    /* The checksum is the CRC-32C of the encoding without the checksum field. */
    uint32_t crc;
    CU_ASSERT_EQUAL(ctl_state_checksum(s, &crc), CTL_OK);
    char hex[32];
    snprintf(hex, sizeof(hex), "\"checksum\":\"%08x\"", crc);
    CU_ASSERT_PTR_NOT_NULL(strstr(a, hex));
    /* Pretty-printed input decodes to the same state and re-encodes canonically. */
    json_t *root = json_loads(a, 0, NULL);
    char *pretty = json_dumps(root, JSON_INDENT(2));
    CU_ASSERT_EQUAL(ctl_state_decode(pretty, strlen(pretty), d, err, sizeof(err)), CTL_OK);
    char *c = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(a, c);
    /* The empty (not bootstrapped) state round-trips too. */
    ctl_state_init(s);
    s->applied_raft_index = 12;
    char *e = ctl_test_encode(s);
    CU_ASSERT_EQUAL(ctl_state_decode(e, strlen(e), d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(d->applied_raft_index, 12);
    char *f = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(e, f);
    free(pretty);
    json_decref(root);
    ctl_free(a), ctl_free(b), ctl_free(c), ctl_free(e), ctl_free(f);
    free(s);
    free(d);
}

typedef void (*mutate_fn)(json_t *root);

/* Encodes the fixture, applies mutate, fixes the checksum when asked, decodes: expects want_rc,
 * an error containing want_msg, and the output state left untouched. */
static void expect_decode(mutate_fn mutate, int fix, int want_rc, const char *want_msg)
{
    struct ctl_state *s = ctl_test_fixture(4), *out = malloc(sizeof(*out));
    char *text = ctl_test_encode(s);
    json_t *root = json_loads(text, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    mutate(root);
    memset(out, 0xA5, sizeof(*out));
    char err[256] = "";
    int rc = ctl_test_decode_json(root, fix, out, err, sizeof(err));
    if (rc != want_rc || strstr(err, want_msg) == NULL) {
        printf("\n  decode: rc %d (%s), want %d (%s)\n", rc, err, want_rc, want_msg);
    }
    CU_ASSERT_EQUAL(rc, want_rc);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want_msg));
    CU_ASSERT_EQUAL(((unsigned char *)out)[0], 0xA5); /* not written */
    json_decref(root);
    ctl_free(text);
    free(s);
    free(out);
}

static json_t *path(json_t *root, const char *list, size_t i)
{
    return json_array_get(json_object_get(root, list), i);
}

static void m_unknown_top(json_t *r)
{
    json_object_set_new(r, "extra", json_integer(1));
}
static void m_unknown_node(json_t *r)
{
    json_object_set_new(path(r, "nodes", 2), "rack", json_string("a"));
}
static void m_unknown_range(json_t *r)
{
    json_t *t = json_object_get(r, "hash_slot_table");
    json_object_set_new(json_array_get(json_object_get(t, "ranges"), 1), "x", json_true());
}
static void m_unknown_config(json_t *r)
{
    json_object_set_new(json_object_get(r, "config"), "mode", json_null());
}
static void m_content_only(json_t *r)
{
    json_object_set_new(path(r, "nodes", 0), "weight", json_integer(101));
}
static void m_bad_hex(json_t *r)
{
    json_object_set_new(r, "checksum", json_string("E3069283"));
}
static void m_type_revision(json_t *r)
{
    json_object_set_new(r, "revision", json_string("5"));
}
static void m_type_weight_real(json_t *r)
{
    json_object_set_new(path(r, "nodes", 1), "weight", json_real(100.0));
}
static void m_type_roles(json_t *r)
{
    json_object_set_new(path(r, "nodes", 1), "roles", json_string("data"));
}
static void m_missing_weight(json_t *r)
{
    json_object_del(path(r, "nodes", 3), "weight");
}
static void m_missing_health(json_t *r)
{
    json_object_del(r, "health");
}
static void m_table_gap(json_t *r)
{
    json_t *r1 =
        json_array_get(json_object_get(json_object_get(r, "hash_slot_table"), "ranges"), 1);
    json_object_set_new(r1, "first",
                        json_integer(json_integer_value(json_object_get(r1, "first")) + 1));
}
static void m_table_overlap(json_t *r)
{
    json_t *r2 =
        json_array_get(json_object_get(json_object_get(r, "hash_slot_table"), "ranges"), 2);
    json_object_set_new(r2, "first",
                        json_integer(json_integer_value(json_object_get(r2, "first")) - 1));
}
static void m_table_short(json_t *r)
{
    json_array_remove(json_object_get(json_object_get(r, "hash_slot_table"), "ranges"), 3);
}
static void m_peer_unknown(json_t *r)
{
    json_t *peers = json_object_get(path(r, "groups", 0), "desired_peers");
    json_array_set_new(peers, 2, json_integer(99));
}
static void m_leader_not_peer(json_t *r)
{
    /* Groups were placed over nodes 1..3 only; node 5 exists but is no peer. */
    json_object_set_new(path(r, "groups", 1), "preferred_leader", json_integer(5));
}
static void m_revision_negative(json_t *r)
{
    json_object_set_new(r, "revision", json_integer(-1));
}
static void m_epoch_negative(json_t *r)
{
    json_object_set_new(path(r, "groups", 0), "config_epoch", json_integer(-7));
}
static void m_weight_zero(json_t *r)
{
    json_object_set_new(path(r, "nodes", 2), "weight", json_integer(0));
}
static void m_nodes_unsorted(json_t *r)
{
    json_t *nodes = json_object_get(r, "nodes"), *n0 = json_incref(json_array_get(nodes, 0));
    json_array_remove(nodes, 0);
    json_array_append_new(nodes, n0);
}
static void m_unknown_task_field(json_t *r)
{
    json_object_set_new(path(r, "tasks", 0), "color", json_integer(3));
}
static void m_task_status(json_t *r)
{
    json_object_set_new(path(r, "tasks", 1), "status", json_string("paused"));
}

static void test_decode_rejects(void)
{
    expect_decode(m_unknown_top, 1, CTL_EDECODE, "top level: unknown field \"extra\"");
    expect_decode(m_unknown_node, 1, CTL_EDECODE, "nodes[2]: unknown field \"rack\"");
    expect_decode(m_unknown_range, 1, CTL_EDECODE,
                  "hash_slot_table.ranges[1]: unknown field \"x\"");
    expect_decode(m_unknown_config, 1, CTL_EDECODE, "config: unknown field \"mode\"");
    expect_decode(m_unknown_task_field, 1, CTL_EDECODE, "tasks[0]: unknown field \"color\"");
    expect_decode(m_content_only, 0, CTL_ECHECKSUM, "checksum: stored ");
    expect_decode(m_bad_hex, 0, CTL_EDECODE, "not 8 lowercase hex digits");
    expect_decode(m_type_revision, 1, CTL_EDECODE, "revision: expected an integer");
    expect_decode(m_type_weight_real, 1, CTL_EDECODE, "nodes[1].weight: expected an integer");
    expect_decode(m_type_roles, 1, CTL_EDECODE, "nodes[1].roles: expected an array");
    expect_decode(m_missing_weight, 1, CTL_EDECODE, "nodes[3]: missing field \"weight\"");
    expect_decode(m_missing_health, 1, CTL_EDECODE, "top level: missing field \"health\"");
    expect_decode(m_table_gap, 1, CTL_ESTATE, "hash_slot_table.ranges[1].first");
    expect_decode(m_table_gap, 1, CTL_ESTATE, "(gap)");
    expect_decode(m_table_overlap, 1, CTL_ESTATE, "(overlap)");
    expect_decode(m_table_short, 1, CTL_ESTATE, "hash_slot_table.ranges: cover 0..");
    expect_decode(m_peer_unknown, 1, CTL_ESTATE,
                  "groups[0].desired_peers[2]: 99 is not an existing, non-removed data node");
    expect_decode(m_leader_not_peer, 1, CTL_ESTATE,
                  "groups[1].preferred_leader: 5 is not one of desired_peers");
    expect_decode(m_revision_negative, 1, CTL_EDECODE,
                  "revision: -1 not in 0..9223372036854775807");
    expect_decode(m_epoch_negative, 1, CTL_EDECODE, "groups[0].config_epoch: -7 not in");
    expect_decode(m_weight_zero, 1, CTL_ESTATE, "nodes[2].weight: 0 not in 1..1000");
    expect_decode(m_nodes_unsorted, 1, CTL_ESTATE, "nodes sorted by id");
    expect_decode(m_task_status, 1, CTL_EDECODE,
                  "tasks[1].status: \"paused\" is not pending|running|failed|done");
}

static void test_decode_rejects_text(void)
{
    struct ctl_state *s = ctl_test_fixture(4), *out = malloc(sizeof(*out));
    char *text = ctl_test_encode(s), err[256];
    size_t len = strlen(text);
    /* u64 beyond signed 64 bits: jansson refuses the number itself. */
    char *big = malloc(len + 64);
    const char *rev = strstr(text, "\"revision\":");
    CU_ASSERT_PTR_NOT_NULL_FATAL(rev);
    int head = (int)(rev - text) + 11;
    const char *tail = rev + 11 + strspn(rev + 11, "0123456789");
    snprintf(big, len + 64, "%.*s18446744073709551615%s", head, text, tail);
    CU_ASSERT_EQUAL(ctl_state_decode(big, strlen(big), out, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "too big"));
    /* Duplicate keys, trailing bytes, truncation, a non-object, emptiness. */
    snprintf(big, len + 64, "{\"revision\":1,%s", text + 1);
    CU_ASSERT_EQUAL(ctl_state_decode(big, strlen(big), out, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, "duplicate"));
    snprintf(big, len + 64, "%s{}", text);
    CU_ASSERT_EQUAL(ctl_state_decode(big, strlen(big), out, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_EQUAL(ctl_state_decode(text, len - 1, out, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_EQUAL(ctl_state_decode("[]", 2, out, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_STRING_EQUAL(err, "top level: expected an object");
    CU_ASSERT_EQUAL(ctl_state_decode("", 0, out, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_EQUAL(ctl_state_decode(text, CTL_FILE_BYTES_MAX + 1, out, err, sizeof(err)),
                    CTL_ETOO_BIG);
    /* The untouched text still decodes. */
    CU_ASSERT_EQUAL(ctl_state_decode(text, len, out, err, sizeof(err)), CTL_OK);
    free(big);
    ctl_free(text);
    free(s);
    free(out);
}

static void expect_invalid(struct ctl_state *s, const char *want)
{
    char err[256] = "";
    char *buf = NULL;
    size_t len;
    CU_ASSERT_EQUAL(ctl_state_validate(s, err, sizeof(err)), CTL_ESTATE);
    if (strcmp(err, want) != 0) {
        printf("\n  validate: \"%s\", want \"%s\"\n", err, want);
    }
    CU_ASSERT_STRING_EQUAL(err, want);
    CU_ASSERT_EQUAL(ctl_state_encode(s, &buf, &len), CTL_ESTATE);
    CU_ASSERT_PTR_NULL(buf);
}

static void test_validate_messages(void)
{
    struct ctl_state *base = ctl_test_fixture(4), *s = malloc(sizeof(*s));
    *s = *base;
    s->nodes[2].weight = 0;
    expect_invalid(s, "nodes[2].weight: 0 not in 1..1000");
    *s = *base;
    s->config.hash_slots = 128;
    expect_invalid(s, "config.hash_slots: 128 is not 256");
    *s = *base;
    s->config.replicas = 8;
    expect_invalid(s, "config.replicas: 8 not in 1..7");
    *s = *base;
    snprintf(s->cluster_id, sizeof(s->cluster_id), "bad id");
    expect_invalid(s, "cluster_id: \"bad id\" is not 1..64 characters of [A-Za-z0-9._-]");
    *s = *base;
    snprintf(s->nodes[4].address, sizeof(s->nodes[4].address), "10.0.0.1:7700");
    expect_invalid(s, "nodes[4].address: 10.0.0.1:7700 is also the address of node 1");
    *s = *base;
    snprintf(s->nodes[1].address, sizeof(s->nodes[1].address), "nohost");
    expect_invalid(s, "nodes[1].address: not \"host:port\" of at most 127 bytes");
    *s = *base;
    s->tasks[1].group = 1;
    s->tasks[1].status = CTL_TASK_PENDING;
    expect_invalid(s, "tasks[1]: group 1 already has active task 7 (one active task per group)");
    *s = *base;
    s->tasks[0].updated_ms = 5;
    expect_invalid(s, "tasks[0].updated_ms: 5 not in created_ms..9223372036854775807");
    *s = *base;
    s->tasks[0].last_error[0] = (char)0xC3; /* a lone UTF-8 lead byte */
    expect_invalid(s, "tasks[0].last_error: not UTF-8 text of at most 256 bytes");
    *s = *base;
    s->health[0].ttl_ms = 0;
    expect_invalid(s, "health[0].ttl_ms: 0 not in 1..86400000");
    *s = *base;
    s->revision = CTL_U64_JSON_MAX + 1;
    expect_invalid(s, "revision: 9223372036854775808 above 9223372036854775807");
    *s = *base;
    s->nodes[0].join_state = CTL_JOIN_REMOVED; /* node 1 is a desired peer of group 1 */
    expect_invalid(s, "groups[0].desired_peers[0]: 1 is not an existing, non-removed data node");
    *s = *base;
    s->n_groups = 2;
    expect_invalid(s, "groups: 2 entries, must be 0 (no placement) or 4 (config.slot_groups)");
    ctl_state_init(s);
    s->n_nodes = 1;
    expect_invalid(s, "nodes, groups, hash_slot_table, tasks, health: must be empty while "
                      "revision is 0 (not bootstrapped)");
    free(s);
    free(base);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Task g of the full state: every kind in turn, 8 participants, 7 voters and 7 learners in the
 * proof, 7 previous voters for promotions, every number at its bound. Only one promotion is active
 * and drains are failed, so the one-active rules hold. Migrations have no nodes: task 2 is active
 * at phase copy, moving the 4 slots its group owns (slot h maps to group 1 + h % 64) to group 4
 * (task 3's group is 0); the other migrations are done and name all 256 slots. */
static void fill_full_task(const struct ctl_state *s, uint32_t g, struct ctl_task *t)
{
    enum ctl_task_kind kind = (enum ctl_task_kind)(g % 5);
    bool by_group = kind <= CTL_TASK_HASH_SLOT_MIGRATION;
    static const uint32_t phase[] = {3, 0, CTL_PHASE_MIGRATION_DONE, 3, 0};
    *t = (struct ctl_task){.id = g + 1,
                           .kind = kind,
                           .group = by_group ? g + 1 : 0,
                           .phase_index = phase[kind],
                           .config_epoch = CTL_U64_JSON_MAX,
                           .attempt = CTL_TASK_ATTEMPTS_MAX,
                           .status = CTL_TASK_RUNNING,
                           .n_participants = CTL_PARTICIPANTS_MAX,
                           .created_ms = 1,
                           .updated_ms = CTL_U64_JSON_MAX,
                           .source = s->nodes[g].id,
                           .target = s->nodes[(g + 1) % CTL_NODES_MAX].id};
    if (kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION) {
        t->status = g == 3 ? CTL_TASK_RUNNING : CTL_TASK_DONE;
        t->phase_index = g == 3 ? 2 : 3;
        t->n_previous_voters = CTL_REPLICAS_MAX;
        for (uint32_t k = 0; k < CTL_REPLICAS_MAX; k++) {
            t->previous_voters[k] = s->nodes[k * 9].id;
        }
    }
    if (kind == CTL_TASK_NODE_DRAIN) {
        t->status = CTL_TASK_FAILED;
    }
    if (kind == CTL_TASK_HASH_SLOT_MIGRATION) {
        t->source = t->target = 0;
        t->to_group = g == 2 ? 4 : 1 + (g + 1) % CTL_GROUPS_MAX;
        t->status = g == 2 ? CTL_TASK_RUNNING : CTL_TASK_DONE;
        t->phase_index = g == 2 ? CTL_PHASE_MIGRATION_COPY : CTL_PHASE_MIGRATION_DONE;
        for (uint32_t h = 0; h < CTL_HASH_SLOTS; h++) {
            if (g != 2 || h % CTL_GROUPS_MAX == g) {
                t->hash_slots[h / 8] |= (uint8_t)(1u << (h % 8));
            }
        }
    }
    t->proof = (struct ctl_task_proof){.config_index = CTL_U64_JSON_MAX,
                                       .n_voters = CTL_REPLICAS_MAX,
                                       .n_learners = CTL_REPLICAS_MAX,
                                       .leader = CTL_U64_JSON_MAX,
                                       .commit = CTL_U64_JSON_MAX,
                                       .target_match = CTL_U64_JSON_MAX};
    for (uint32_t k = 0; k < CTL_REPLICAS_MAX; k++) {
        t->proof.voters[k] = CTL_U64_JSON_MAX - 20 + k;
        t->proof.learners[k] = CTL_U64_JSON_MAX - 10 + k;
    }
    t->progress = (struct ctl_task_progress){CTL_U64_JSON_MAX, CTL_U64_JSON_MAX, CTL_U64_JSON_MAX,
                                             CTL_U64_JSON_MAX};
    for (uint32_t k = 0; k < CTL_PARTICIPANTS_MAX && kind != CTL_TASK_HASH_SLOT_MIGRATION; k++) {
        t->participants[k] = s->nodes[k * 8].id;
    }
    t->n_participants = kind == CTL_TASK_HASH_SLOT_MIGRATION ? 0 : CTL_PARTICIPANTS_MAX;
}

/* A state at every bound: 64 nodes with 127-byte addresses, 64 groups of 7 peers, 256 one-slot
 * ranges, 64 tasks of every kind with 256-byte last_error, 8 participants and full proofs, 64
 * health reports. */
static void fill_full_state(struct ctl_state *s)
{
    ctl_state_init(s);
    s->revision = 1000;
    s->applied_raft_index = CTL_U64_JSON_MAX;
    s->next_task_id = CTL_U64_JSON_MAX;
    snprintf(s->cluster_id, sizeof(s->cluster_id), "%064d", 7);
    s->config =
        (struct ctl_config){CTL_GROUPS_MAX, CTL_HASH_SLOTS, CTL_REPLICAS_MAX, CTL_NODES_MAX};
    s->n_nodes = s->n_health = CTL_NODES_MAX;
    for (uint32_t i = 0; i < CTL_NODES_MAX; i++) {
        struct ctl_node *n = &s->nodes[i];
        n->id = CTL_U64_JSON_MAX - CTL_NODES_MAX + i + 1;
        snprintf(n->address, sizeof(n->address), "n%0120u:12345", i);
        n->roles = CTL_ROLE_CONTROLLER_VOTER | CTL_ROLE_DATA;
        n->join_state = CTL_JOIN_ACTIVE;
        n->weight = CTL_WEIGHT_MAX;
        s->health[i] = (struct ctl_health){n->id, CTL_U64_JSON_MAX, CTL_HEALTH_TTL_MS_MAX};
    }
    s->n_groups = s->n_tasks = CTL_GROUPS_MAX;
    for (uint32_t g = 0; g < CTL_GROUPS_MAX; g++) {
        struct ctl_group *gr = &s->groups[g];
        gr->id = g + 1;
        gr->n_peers = CTL_REPLICAS_MAX;
        for (uint32_t k = 0; k < CTL_REPLICAS_MAX; k++) {
            gr->desired_peers[k] = s->nodes[(g + k * 9) % CTL_NODES_MAX].id;
        }
        /* sort the peers (ids grow with the node index) */
        for (uint32_t a = 1; a < CTL_REPLICAS_MAX; a++) {
            for (uint32_t b = a; b > 0 && gr->desired_peers[b - 1] > gr->desired_peers[b]; b--) {
                uint64_t t = gr->desired_peers[b];
                gr->desired_peers[b] = gr->desired_peers[b - 1];
                gr->desired_peers[b - 1] = t;
            }
        }
        gr->config_epoch = CTL_U64_JSON_MAX;
        gr->preferred_leader = gr->desired_peers[CTL_REPLICAS_MAX - 1];
        struct ctl_task *t = &s->tasks[g];
        fill_full_task(s, g, t);
        for (uint32_t k = 0; k < CTL_LAST_ERROR_MAX; k += 2) {
            memcpy(t->last_error + k, "\xc3\xa9", 2); /* U+00E9 */
        }
        t->last_error[CTL_LAST_ERROR_MAX] = '\0';
    }
    s->table.version = CTL_U64_JSON_MAX;
    s->table.n_ranges = CTL_HASH_SLOTS;
    for (uint32_t h = 0; h < CTL_HASH_SLOTS; h++) {
        s->table.ranges[h] = (struct ctl_range){h, h, 1 + h % CTL_GROUPS_MAX};
    }
}

static void test_full_state(void)
{
    struct ctl_state *s = malloc(sizeof(*s)), *d = malloc(sizeof(*d));
    char err[256] = "";
    fill_full_state(s);
    CU_ASSERT_EQUAL_FATAL(ctl_state_validate(s, err, sizeof(err)), CTL_OK);
    char *a = ctl_test_encode(s);
    size_t len = strlen(a);
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(a, len, d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(memcmp(d->tasks, s->tasks, sizeof(s->tasks)), 0);
    char *b = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT(len < CTL_FILE_BYTES_MAX);
    /* One more node, task or peer does not fit the model. */
    s->n_nodes = CTL_NODES_MAX + 1;
    CU_ASSERT_EQUAL(ctl_state_validate(s, err, sizeof(err)), CTL_ESTATE);
    CU_ASSERT_STRING_EQUAL(err, "nodes: 65 entries, the limit is 64");
    int rounds = 50;
    double t0 = now_s();
    for (int i = 0; i < rounds; i++) {
        char *x = ctl_test_encode(d);
        ctl_free(x);
    }
    double t1 = now_s();
    for (int i = 0; i < rounds; i++) {
        CU_ASSERT_EQUAL(ctl_state_decode(a, len, d, err, sizeof(err)), CTL_OK);
    }
    double t2 = now_s();
    /* Applies on the full state: scratch copy + validation per command. */
    d->applied_raft_index = 0;
    for (uint32_t k = 0; k < d->n_health; k++) {
        d->health[k].reported_at_ms = 0; /* older reports are noops: start from 0 */
    }
    int applies = 500, updated = 0;
    for (int i = 0; i < applies; i++) {
        char *cmd;
        struct ctl_result res;
        CU_ASSERT_EQUAL_FATAL(
            ctl_cmd_health_report(d->nodes[i % CTL_NODES_MAX].id, (uint64_t)i + 1, 1000, 0, &cmd),
            CTL_OK);
        CU_ASSERT_EQUAL(ctl_apply(d, (uint64_t)i + 1, cmd, strlen(cmd), &res), CTL_OK);
        updated += res.outcome == CTL_OUTCOME_UPDATED;
        ctl_free(cmd);
    }
    double t3 = now_s();
    CU_ASSERT_EQUAL(updated, applies);
    CU_ASSERT_EQUAL(d->revision, 1000);
    printf("\n  full state: %zu bytes; encode %.2f ms, decode %.2f ms, apply %.1f us\n", len,
           (t1 - t0) * 1000 / rounds, (t2 - t1) * 1000 / rounds, (t3 - t2) * 1e6 / applies);
    ctl_free(a), ctl_free(b);
    free(s), free(d);
}

static void test_strerror_and_names(void)
{
    CU_ASSERT_STRING_EQUAL(ctl_strerror(CTL_OK), "ok");
    CU_ASSERT_STRING_EQUAL(ctl_strerror(CTL_ECHECKSUM), "cluster state checksum mismatch");
    CU_ASSERT_STRING_EQUAL(ctl_strerror(12345), "unknown error");
    CU_ASSERT_STRING_EQUAL(ctl_join_state_name(CTL_JOIN_LEAVING), "leaving");
    CU_ASSERT_PTR_NULL(ctl_node_status_name((enum ctl_node_status)3));
    CU_ASSERT_STRING_EQUAL(ctl_task_kind_name(CTL_TASK_HASH_SLOT_MIGRATION), "hash_slot_migration");
    CU_ASSERT_STRING_EQUAL(ctl_outcome_name(CTL_OUTCOME_UPDATED), "updated");
}

void ctl_test_add_codec(void)
{
    CU_pSuite s = CU_add_suite("controller codec", NULL, NULL);
    CU_add_test(s, "crc32c known answers", test_crc32c_known_answers);
    CU_add_test(s, "canonical round trip", test_round_trip);
    CU_add_test(s, "decode rejects bad fields, types, checksum, rules", test_decode_rejects);
    CU_add_test(s, "decode rejects bad text", test_decode_rejects_text);
    CU_add_test(s, "validate messages name field and limit", test_validate_messages);
    CU_add_test(s, "state at every bound round-trips", test_full_state);
    CU_add_test(s, "strerror and names", test_strerror_and_names);
}
