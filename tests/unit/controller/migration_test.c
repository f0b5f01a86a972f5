/* migration_test.c - hash_slot_migration: create checks, phases, table switch, retry, codec. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"
#include "task_test.h"

#define expect ctl_test_check
#define OK(expr) task_built((expr), cmd)

/* task_fixture(4) maps hash slots 0-63 to group 1, 64-127 to 2, 128-191 to 3, 192-255 to 4. */
#define FIXTURE_TABLE "0-63:1,64-127:2,128-191:3,192-255:4"

/* task_create for a migration of slots[0..n) (borrowed for the call) to to_group. */
static char *migrate_cmd(const uint32_t *slots, size_t n, uint32_t to_group, uint64_t now_ms)
{
    struct ctl_task_spec spec = {.kind = CTL_TASK_HASH_SLOT_MIGRATION, .to_group = to_group};
    char *cmd = NULL;
    for (size_t i = 0; i < n; i++) {
        spec.hash_slots[slots[i] / 8] |= (uint8_t)(1u << (slots[i] % 8));
    }
    return task_built(ctl_cmd_task_create(&spec, now_ms, 0, &cmd), &cmd);
}

/* Creates the migration, asserts CHANGED, returns its id. */
static uint64_t migrate(struct ctl_state *s, const uint32_t *slots, size_t n, uint32_t to_group,
                        uint64_t now_ms)
{
    uint64_t id = s->next_task_id;
    struct ctl_result res;
    char *cmd = migrate_cmd(slots, n, to_group, now_ms);
    enum ctl_outcome got = ctl_test_apply(s, cmd, &res);
    if (got != CTL_OUTCOME_CHANGED) {
        printf("\n  %s: %s (%s)\n", cmd, ctl_outcome_name(got), res.reason);
    }
    CU_ASSERT_EQUAL_FATAL(got, CTL_OUTCOME_CHANGED);
    CU_ASSERT_EQUAL(res.task_id, id);
    ctl_free(cmd);
    return id;
}

/* The proof of a migration phase: its entry applied at raft index index, seen by leader. */
static struct ctl_task_proof mproof(uint64_t index, uint64_t leader)
{
    return (struct ctl_task_proof){.config_index = index, .leader = leader};
}

/* The table as "first-last:group,..." ("slot:group" for a one-slot range) into buf. */
static const char *table_text(const struct ctl_state *s, char *buf, size_t len)
{
    size_t used = 0;
    buf[0] = '\0';
    for (uint32_t i = 0; i < s->table.n_ranges && used < len; i++) {
        const struct ctl_range *r = &s->table.ranges[i];
        if (r->first == r->last) {
            used += (size_t)snprintf(buf + used, len - used, "%s%u:%u", i ? "," : "", r->first,
                                     r->group);
        } else {
            used += (size_t)snprintf(buf + used, len - used, "%s%u-%u:%u", i ? "," : "", r->first,
                                     r->last, r->group);
        }
    }
    return buf;
}

static void expect_table(const struct ctl_state *s, const char *want)
{
    char got[1024];
    table_text(s, got, sizeof(got));
    if (strcmp(got, want) != 0) {
        printf("\n  table %s, want %s\n", got, want);
    }
    CU_ASSERT_STRING_EQUAL(got, want);
}

/* Runs migration id through fence, copy, release with good proofs: the table switches exactly
 * once, at the copy advance, to want_table. */
static void run_migration(struct ctl_state *s, uint64_t id, uint64_t now_ms, const char *want_table)
{
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    uint64_t version = s->table.version,
             src_leader = ctl_state_group(s, t->group)->preferred_leader;
    uint64_t dst_leader = ctl_state_group(s, t->to_group)->preferred_leader;
    char before[1024];
    table_text(s, before, sizeof(before));
    struct ctl_task_proof p = mproof(100 + now_ms, src_leader);
    expect(s, task_advance_cmd(s, id, &p, now_ms), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_COPY);
    CU_ASSERT_EQUAL(s->table.version, version);
    expect_table(s, before);
    p = mproof(7 + now_ms, dst_leader);
    expect(s, task_advance_cmd(s, id, &p, now_ms + 1), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_RELEASE);
    CU_ASSERT_EQUAL(t->status, CTL_TASK_RUNNING);
    CU_ASSERT_EQUAL(s->table.version, version + 1);
    expect_table(s, want_table);
    p = mproof(101 + now_ms, src_leader);
    expect(s, task_advance_cmd(s, id, &p, now_ms + 2), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_DONE);
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    CU_ASSERT_EQUAL(s->table.version, version + 1);
    expect_table(s, want_table);
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, t->group));
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, t->to_group));
}

/* ---- tests ---- */

static void test_create_rejects(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1], want[200];
    uint32_t mid[1] = {10}, two_owners[2] = {10, 200};
    /* A bootstrapped cluster without placement has no hash-slot table. */
    struct ctl_state *bare = malloc(sizeof(*bare));
    CU_ASSERT_PTR_NOT_NULL_FATAL(bare);
    ctl_state_init(bare);
    struct ctl_config cfg = {.slot_groups = 4, .replicas = 3, .bootstrap_expect = 5};
    struct ctl_cmd_node boot[] = {{1, "10.0.0.1:7700", 0}};
    struct ctl_features on = {.hash_slot_migration = true};
    expect(bare, OK(ctl_cmd_bootstrap_features("bare", &cfg, &on, boot, 1, 0, cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(bare->table.version, 0);
    expect(bare, migrate_cmd(mid, 1, 2, 1), CTL_OUTCOME_REJECTED,
           "hash_slots: no hash-slot table yet (version 0, placement not made)");
    free(bare);
    /* Malformed hash_slots. */
    expect(s, migrate_cmd(NULL, 0, 2, 1), CTL_OUTCOME_REJECTED,
           "hash_slots: empty, name 1..256 hash slots");
    char big[2048] = "{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"to_group\":2,"
                     "\"now_ms\":1,\"hash_slots\":[";
    for (int i = 0; i <= CTL_HASH_SLOTS; i++) {
        snprintf(big + strlen(big), sizeof(big) - strlen(big), "%s%d", i ? "," : "", i % 64);
    }
    strcat(big, "]}");
    expect(s, strdup(big), CTL_OUTCOME_REJECTED, "hash_slots: 257 entries, the limit is 256");
    static const struct {
        const char *slots, *reason;
    } bad[] = {
        {"[1,256]", "hash_slots[1]: expected a hash slot in 0..255"},
        {"[-1]", "hash_slots[0]: expected a hash slot in 0..255"},
        {"[\"3\"]", "hash_slots[0]: expected a hash slot in 0..255"},
        {"[2.0]", "hash_slots[0]: expected a hash slot in 0..255"},
        {"[5,6,5]", "hash_slots: hash slot 5 listed twice"},
        {"5", "hash_slots: expected an array"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        snprintf(big, sizeof(big),
                 "{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"to_group\":2,"
                 "\"now_ms\":1,\"hash_slots\":%s}",
                 bad[i].slots);
        expect(s, strdup(big), CTL_OUTCOME_REJECTED, bad[i].reason);
    }
    /* Fields of the kind. */
    static const struct {
        const char *cmd, *reason;
    } fields[] = {
        {"{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"group\":1,\"to_group\":2,"
         "\"hash_slots\":[1],\"now_ms\":1}",
         "group: not a field for a hash_slot_migration task"},
        {"{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"hash_slots\":[1],"
         "\"now_ms\":1}",
         "to_group: missing for a hash_slot_migration task"},
        {"{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"to_group\":2,\"now_ms\":1}",
         "hash_slots: missing for a hash_slot_migration task"},
        {"{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"to_group\":2,\"node\":4,"
         "\"hash_slots\":[1],\"now_ms\":1}",
         "node: not a field for a hash_slot_migration task"},
        {"{\"op\":\"task_create\",\"kind\":\"hash_slot_migration\",\"to_group\":\"2\","
         "\"hash_slots\":[1],\"now_ms\":1}",
         "to_group: expected an integer"},
        {"{\"op\":\"task_create\",\"kind\":\"replica_move\",\"group\":3,\"source\":1,\"target\":4,"
         "\"hash_slots\":[1],\"now_ms\":1}",
         "hash_slots: not a field for a replica_move task"},
        {"{\"op\":\"task_create\",\"kind\":\"node_drain\",\"node\":4,\"to_group\":1,\"now_ms\":1}",
         "to_group: not a field for a node_drain task"},
    };
    for (size_t i = 0; i < sizeof(fields) / sizeof(fields[0]); i++) {
        expect(s, strdup(fields[i].cmd), CTL_OUTCOME_REJECTED, fields[i].reason);
    }
    /* to_group, owners. */
    expect(s, migrate_cmd(mid, 1, 9, 1), CTL_OUTCOME_REJECTED,
           "to_group: 9 does not exist (groups are 1..4)");
    expect(s, migrate_cmd(mid, 1, 0, 1), CTL_OUTCOME_REJECTED,
           "to_group: 0 does not exist (groups are 1..4)");
    expect(s, migrate_cmd(two_owners, 2, 2, 1), CTL_OUTCOME_REJECTED,
           "hash_slots: owned by groups 1 and 4; one task moves the slots of one group");
    expect(s, migrate_cmd(mid, 1, 1, 1), CTL_OUTCOME_REJECTED,
           "to_group: the hash slots are already owned by group 1");
    /* Active tasks on the source, then on to_group. */
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, 1, 0,
                              ctl_state_group(s, 1)->desired_peers[0], 0, 2);
    snprintf(want, sizeof(want),
             "hash_slots: source group 1 already has active task %llu (leader_transfer)",
             (unsigned long long)lt);
    expect(s, migrate_cmd(mid, 1, 2, 3), CTL_OUTCOME_REJECTED, want);
    uint32_t in2[1] = {70};
    snprintf(want, sizeof(want), "to_group: 1 already has active task %llu (leader_transfer)",
             (unsigned long long)lt);
    expect(s, migrate_cmd(in2, 1, 1, 3), CTL_OUTCOME_REJECTED, want);
    /* A migration occupies both of its groups. */
    uint64_t m = migrate(s, in2, 1, 3, 4);
    const struct ctl_task *t = ctl_state_task(s, m);
    CU_ASSERT_PTR_EQUAL(ctl_state_active_task(s, 2), t);
    CU_ASSERT_PTR_EQUAL(ctl_state_active_task(s, 3), t);
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 4));
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 0));
    struct ctl_task_spec mv = {CTL_TASK_REPLICA_MOVE, 3, ctl_state_group(s, 3)->desired_peers[0],
                               task_outsider(s, 3, 0), 0};
    snprintf(want, sizeof(want), "group: 3 already has active task %llu (hash_slot_migration)",
             (unsigned long long)m);
    expect(s, OK(ctl_cmd_task_create(&mv, 5, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    uint32_t in4[1] = {250};
    snprintf(want, sizeof(want), "to_group: 3 already has active task %llu (hash_slot_migration)",
             (unsigned long long)m);
    expect(s, migrate_cmd(in4, 1, 3, 5), CTL_OUTCOME_REJECTED, want);
    free(s);
}

/* Full runs: a slot in the middle of a range, at an edge, several non-adjacent slots, and slots
 * moving back so three ranges merge into one. */
static void test_happy_path(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    uint32_t mid[1] = {10};
    expect_table(s, FIXTURE_TABLE);
    CU_ASSERT_EQUAL(s->table.version, 1);
    uint64_t id = migrate(s, mid, 1, 3, 1000);
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(t->kind, CTL_TASK_HASH_SLOT_MIGRATION);
    CU_ASSERT_EQUAL(t->group, 1);
    CU_ASSERT_EQUAL(t->to_group, 3);
    CU_ASSERT_EQUAL(t->config_epoch, ctl_state_group(s, 1)->config_epoch);
    CU_ASSERT_EQUAL(t->status, CTL_TASK_RUNNING);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_FENCE);
    CU_ASSERT_EQUAL(t->attempt, 1);
    CU_ASSERT_EQUAL(t->created_ms, 1000);
    CU_ASSERT_EQUAL(t->source, 0);
    CU_ASSERT_EQUAL(t->target, 0);
    CU_ASSERT_EQUAL(t->n_participants, 0);
    uint8_t bits[CTL_HASH_SLOT_BYTES] = {0};
    bits[1] = 1u << 2; /* hash slot 10 */
    CU_ASSERT_EQUAL(memcmp(t->hash_slots, bits, sizeof(bits)), 0);
    /* Progress while copying: UPDATED, revision unchanged. */
    struct ctl_task_proof p = mproof(50, ctl_state_group(s, 1)->preferred_leader);
    expect(s, task_advance_cmd(s, id, &p, 1001), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->proof.config_index, 50);
    CU_ASSERT_EQUAL(t->proof.leader, p.leader);
    struct ctl_task_progress prog = {.bytes_sent = 4096, .bytes_total = 8192};
    expect(s, OK(ctl_cmd_task_progress(id, 1, 1, &prog, 1002, 0, cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(t->progress.bytes_sent, 4096);
    p = mproof(9, ctl_state_group(s, 3)->preferred_leader);
    expect(s, task_advance_cmd(s, id, &p, 1003), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->table.version, 2);
    expect_table(s, "0-9:1,10:3,11-63:1,64-127:2,128-191:3,192-255:4");
    p = mproof(51, p.leader);
    expect(s, task_advance_cmd(s, id, &p, 1004), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    CU_ASSERT_EQUAL(s->table.version, 2);

    /* At an edge: slot 63 joins the range 64-127 of group 2. */
    uint32_t edge[1] = {63};
    run_migration(s, migrate(s, edge, 1, 2, 2000), 2001,
                  "0-9:1,10:3,11-62:1,63-127:2,128-191:3,192-255:4");
    /* Several non-adjacent slots; 191 joins 192-255 of group 4. */
    uint32_t several[3] = {191, 130, 150};
    run_migration(s, migrate(s, several, 3, 4, 3000), 3001,
                  "0-9:1,10:3,11-62:1,63-127:2,128-129:3,130:4,131-149:3,150:4,151-190:3,"
                  "191-255:4");
    /* Back home: 0-9, 10 and 11-62 merge into one range of group 1. */
    run_migration(s, migrate(s, mid, 1, 1, 4000), 4001,
                  "0-62:1,63-127:2,128-129:3,130:4,131-149:3,150:4,151-190:3,191-255:4");
    /* A whole range: group 2 gives all of 63-127 to group 1. */
    uint32_t whole[65];
    for (uint32_t k = 0; k < 65; k++) {
        whole[k] = 63 + k;
    }
    run_migration(s, migrate(s, whole, 65, 1, 5000), 5001,
                  "0-127:1,128-129:3,130:4,131-149:3,150:4,151-190:3,191-255:4");
    CU_ASSERT_EQUAL(s->table.version, 6);
    char err[256];
    CU_ASSERT_EQUAL(ctl_state_validate(s, err, sizeof(err)), CTL_OK);
    free(s);
}

/* Stale fences are NOOP; a proof without config_index or leader is REJECTED (state unchanged). */
static void test_fences_and_proofs(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1], want[200];
    uint32_t slots[2] = {70, 71};
    uint64_t id = migrate(s, slots, 2, 1, 10);
    const struct ctl_task *t = ctl_state_task(s, id);
    struct ctl_task_proof p = mproof(33, 2);
    CU_ASSERT_EQUAL(t->group, 2);
    expect(s, OK(ctl_cmd_task_advance(id, 2, 1, 2, 0, &p, 0, 0, 11, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 1, the command has 2");
    expect(s, OK(ctl_cmd_task_advance(id, 2, 1, 1, 1, &p, 0, 0, 11, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at phase 0 (fence), the command has 1");
    expect(s, OK(ctl_cmd_task_advance(id, 2, 2, 1, 0, &p, 0, 0, 11, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 has config_epoch 1, the command has 2");
    expect(s, OK(ctl_cmd_task_advance(id, 1, 1, 1, 0, &p, 0, 0, 11, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is for group 2, the command names group 1");
    struct ctl_task_progress prog = {1, 2, 0, 0};
    expect(s, OK(ctl_cmd_task_progress(id, 1, 2, &prog, 11, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at phase 0 (fence), the command has 2");
    expect(s, OK(ctl_cmd_task_fail(id, 3, 0, "late", 11, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 1, the command has 3");
    p = mproof(0, 2);
    expect(s, task_advance_cmd(s, id, &p, 12), CTL_OUTCOME_REJECTED,
           "proof: config_index is 0, want the raft index at which group 2 applied the fence "
           "entry");
    p = mproof(33, 0);
    expect(s, task_advance_cmd(s, id, &p, 12), CTL_OUTCOME_REJECTED,
           "proof: leader is 0, want the node that saw the fence entry applied as leader of group "
           "2");
    p = mproof(33, 2);
    expect(s, task_advance_cmd(s, id, &p, 13), CTL_OUTCOME_CHANGED, "");
    /* copy: the accept entry is in to_group; a bad proof switches nothing. */
    p = mproof(0, 1);
    expect(s, task_advance_cmd(s, id, &p, 14), CTL_OUTCOME_REJECTED,
           "proof: config_index is 0, want the raft index at which group 1 applied the accept "
           "entry");
    p = mproof(4, 0);
    expect(s, task_advance_cmd(s, id, &p, 14), CTL_OUTCOME_REJECTED, "proof: leader is 0");
    CU_ASSERT_EQUAL(s->table.version, 1);
    p = mproof(4, 1);
    expect(s, task_advance_cmd(s, id, &p, 15), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(s->table.version, 2);
    expect_table(s, "0-63:1,64-69:2,70-71:1,72-127:2,128-191:3,192-255:4");
    /* The copy advance repeated (a lost reply) is a NOOP: the table switched exactly once. */
    expect(s, OK(ctl_cmd_task_advance(id, 2, 1, 1, 1, &p, 0, 0, 16, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at phase 2 (release), the command has 1");
    CU_ASSERT_EQUAL(s->table.version, 2);
    p = mproof(0, 2);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_REJECTED,
           "group 2 applied the release entry");
    p = mproof(40, 2);
    expect(s, task_advance_cmd(s, id, &p, 18), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    snprintf(want, sizeof(want), "stale fence: task %llu is done, not running",
             (unsigned long long)id);
    expect(s, OK(ctl_cmd_task_advance(id, 2, 1, 1, 2, &p, 0, 0, 19, 0, cmd)), CTL_OUTCOME_NOOP,
           want);
    CU_ASSERT_EQUAL(s->table.version, 2);
    free(s);
}

static void test_fail_and_retry(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1], want[200];
    uint32_t slots[2] = {20, 21};
    uint64_t id = migrate(s, slots, 2, 2, 10);
    const struct ctl_task *t = ctl_state_task(s, id);
    struct ctl_task_proof p = mproof(5, 1);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_CHANGED, "");
    /* Failed in copy: restarts at fence (the executor lifted the fence). */
    expect(s, OK(ctl_cmd_task_fail(id, 1, 1, "copy: to_group unreachable", 12, 0, cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 1));
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 2));
    expect_table(s, FIXTURE_TABLE);
    expect(s, OK(ctl_cmd_task_retry(id, 13, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_RUNNING);
    CU_ASSERT_EQUAL(t->attempt, 2);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_FENCE);
    CU_ASSERT_STRING_EQUAL(t->last_error, "copy: to_group unreachable");
    p = mproof(6, 2);
    expect(s, OK(ctl_cmd_task_advance(id, 1, 1, 1, 1, &p, 0, 0, 14, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 2, the command has 1");
    /* Failed in fence: stays at fence. */
    expect(s, OK(ctl_cmd_task_fail(id, 2, 0, "fence: timeout", 15, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    expect(s, OK(ctl_cmd_task_retry(id, 16, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->attempt, 3);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_FENCE);
    /* Failed in release: stays at release, the switch is kept. */
    p = mproof(7, 1);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_CHANGED, "");
    p = mproof(8, 2);
    expect(s, task_advance_cmd(s, id, &p, 18), CTL_OUTCOME_CHANGED, "");
    const char *switched = "0-19:1,20-21:2,22-63:1,64-127:2,128-191:3,192-255:4";
    expect_table(s, switched);
    expect(s, OK(ctl_cmd_task_fail(id, 3, 2, "release: source busy", 19, 0, cmd)),
           CTL_OUTCOME_CHANGED, "");
    expect_table(s, switched);
    expect(s, OK(ctl_cmd_task_retry(id, 20, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->attempt, 4);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_RELEASE);
    CU_ASSERT_EQUAL(s->table.version, 2);
    expect_table(s, switched);
    p = mproof(9, 1);
    expect(s, task_advance_cmd(s, id, &p, 21), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);

    /* The slots moved on while the migration was failed: it cannot resume. */
    uint32_t thirty[1] = {30};
    uint64_t b = migrate(s, thirty, 1, 3, 30);
    expect(s, OK(ctl_cmd_task_fail(b, 1, 0, "fence: refused", 31, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    run_migration(s, migrate(s, thirty, 1, 4, 32), 33,
                  "0-19:1,20-21:2,22-29:1,30:4,31-63:1,64-127:2,128-191:3,192-255:4");
    snprintf(want, sizeof(want),
             "task %llu: hash slot 30 is owned by group 4 now, not group 1; create a new task",
             (unsigned long long)b);
    expect(s, OK(ctl_cmd_task_retry(b, 40, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    /* to_group became busy while the migration was failed. */
    uint32_t forty[1] = {40};
    uint64_t d = migrate(s, forty, 1, 2, 50);
    expect(s, OK(ctl_cmd_task_fail(d, 1, 0, "fence: refused", 51, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, 2, 0,
                              ctl_state_group(s, 2)->desired_peers[0], 0, 52);
    snprintf(want, sizeof(want), "task %llu: task %llu (leader_transfer) became active meanwhile",
             (unsigned long long)d, (unsigned long long)lt);
    expect(s, OK(ctl_cmd_task_retry(d, 53, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    free(s);
}

/* ctl_state_validate and a state that disagrees with a migration. */
static void expect_invalid(const struct ctl_state *s, const char *want)
{
    char err[256] = "";
    CU_ASSERT_EQUAL(ctl_state_validate(s, err, sizeof(err)), CTL_ESTATE);
    if (strcmp(err, want) != 0) {
        printf("\n  validate: \"%s\", want \"%s\"\n", err, want);
    }
    CU_ASSERT_STRING_EQUAL(err, want);
}

/* The switch lives in the state: set_feature turns it on/off (noop when so, unknown names
 * rejected); off refuses create, the fence and copy advances and a retry, never the release that
 * finishes a switch already made; a state without "features" decodes with every feature off. */
static void test_feature_switch(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    uint32_t slots[1] = {30};
    CU_ASSERT_TRUE(s->features.hash_slot_migration);
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", true, 0, cmd)), CTL_OUTCOME_NOOP,
           "feature hash_slot_migration is already on");
    expect(s, OK(ctl_cmd_set_feature("warp_drive", true, 0, cmd)), CTL_OUTCOME_REJECTED,
           "name: \"warp_drive\" is not a feature (known: hash_slot_migration, operations_mcp, "
           "balance_paused)");
    char *not_bool = strdup("{\"op\":\"set_feature\",\"name\":\"hash_slot_migration\","
                            "\"enabled\":1}"); /* ctl_test_check frees it */
    CU_ASSERT_PTR_NOT_NULL_FATAL(not_bool);
    expect(s, not_bool, CTL_OUTCOME_REJECTED, "enabled: expected true or false");
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", false, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    CU_ASSERT_FALSE(s->features.hash_slot_migration);
    char *json = ctl_test_encode(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"features\":{\"hash_slot_migration\":false}"));
    ctl_free(json);
    expect(s, migrate_cmd(slots, 1, 2, 5), CTL_OUTCOME_REJECTED,
           "hash-slot migration is off in the cluster state (Admin.SetFeature");
    /* On: a migration starts; off again: its fence and copy advances are refused. */
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", true, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    uint64_t id = migrate(s, slots, 1, 2, 6);
    const struct ctl_task *t = ctl_state_task(s, id);
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", false, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    struct ctl_task_proof p = mproof(9, 1);
    expect(s, task_advance_cmd(s, id, &p, 7), CTL_OUTCOME_REJECTED, "hash-slot migration is off");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_FENCE);
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", true, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    expect(s, task_advance_cmd(s, id, &p, 8), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", false, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    p = mproof(4, 2);
    expect(s, task_advance_cmd(s, id, &p, 9), CTL_OUTCOME_REJECTED, "hash-slot migration is off");
    expect_table(s, FIXTURE_TABLE);
    /* failed in copy, retried while off: refused */
    expect(s, OK(ctl_cmd_task_fail(id, 1, 1, "copy: timeout", 10, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    expect(s, OK(ctl_cmd_task_retry(id, 11, 0, cmd)), CTL_OUTCOME_REJECTED,
           "hash-slot migration is off");
    /* on again: retried, fenced, copied (switch), then off: the release still completes */
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", true, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    expect(s, OK(ctl_cmd_task_retry(id, 12, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    p = mproof(20, 1);
    expect(s, task_advance_cmd(s, id, &p, 13), CTL_OUTCOME_CHANGED, "");
    p = mproof(5, 2);
    expect(s, task_advance_cmd(s, id, &p, 14), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_RELEASE);
    expect(s, OK(ctl_cmd_set_feature("hash_slot_migration", false, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    p = mproof(21, 1);
    expect(s, task_advance_cmd(s, id, &p, 15), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    /* A state encoded before "features" existed decodes with the feature off. */
    struct ctl_state *old = malloc(sizeof(*old));
    CU_ASSERT_PTR_NOT_NULL_FATAL(old);
    s->features.hash_slot_migration = true;
    json = ctl_test_encode(s);
    json_t *root = json_loads(json, 0, NULL);
    ctl_free(json);
    json_object_del(root, "features");
    char err[256];
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, old, err, sizeof(err)), CTL_OK);
    CU_ASSERT_FALSE(old->features.hash_slot_migration);
    json_object_set_new(root, "features", json_pack("{s:i}", "hash_slot_migration", 1));
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, old, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_STRING_EQUAL(err, "features.hash_slot_migration: expected true or false");
    json_decref(root);
    free(old);
    free(s);
}

/* operations_mcp: off by default and absent from the encoding while off; set_feature turns it on
 * (then it encodes and decodes back) and off; a non-boolean value does not decode; the other
 * switch does not move. */
static void test_feature_operations_mcp(void)
{
    struct ctl_state *s = task_fixture(4), *back = malloc(sizeof(*back));
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    char *cmd[1], err[256];
    CU_ASSERT_FALSE(s->features.operations_mcp);
    char *json = ctl_test_encode(s);
    CU_ASSERT_PTR_NULL(strstr(json, "operations_mcp"));
    ctl_free(json);
    expect(s, OK(ctl_cmd_set_feature("operations_mcp", false, 0, cmd)), CTL_OUTCOME_NOOP,
           "feature operations_mcp is already off");
    bool migration = s->features.hash_slot_migration;
    expect(s, OK(ctl_cmd_set_feature("operations_mcp", true, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(s->features.operations_mcp);
    CU_ASSERT_EQUAL(s->features.hash_slot_migration, migration);
    json = ctl_test_encode(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"operations_mcp\":true"));
    json_t *root = json_loads(json, 0, NULL);
    ctl_free(json);
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, back, err, sizeof(err)), CTL_OK);
    CU_ASSERT_TRUE(back->features.operations_mcp);
    json_object_set_new(json_object_get(root, "features"), "operations_mcp", json_integer(1));
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, back, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_STRING_EQUAL(err, "features.operations_mcp: expected true or false");
    json_decref(root);
    expect(s, OK(ctl_cmd_set_feature("operations_mcp", false, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_FALSE(s->features.operations_mcp);
    free(back);
    free(s);
}

static void test_validation(void)
{
    struct ctl_state *s = task_fixture(4), *v = malloc(sizeof(*v));
    CU_ASSERT_PTR_NOT_NULL_FATAL(v);
    uint32_t mid[1] = {10};
    uint64_t id = migrate(s, mid, 1, 3, 10);
    *v = *s;
    v->table.ranges[0].group = 2; /* 0-63 -> group 2 while the migration is at fence */
    expect_invalid(v, "tasks[0].hash_slots: hash slot 10 maps to group 2 in hash_slot_table, a "
                      "migration at phase fence needs group 1");
    v->tasks[0].status = CTL_TASK_FAILED; /* a failed migration holds nothing */
    CU_ASSERT_EQUAL(ctl_state_validate(v, NULL, 0), CTL_OK);
    *v = *s;
    v->tasks[0].to_group = 1;
    expect_invalid(v, "tasks[0].to_group: 1 is not an existing group (1..4) other than group 1");
    v->tasks[0].to_group = 5;
    expect_invalid(v, "tasks[0].to_group: 5 is not an existing group (1..4) other than group 1");
    *v = *s;
    memset(v->tasks[0].hash_slots, 0, sizeof(v->tasks[0].hash_slots));
    expect_invalid(v, "tasks[0].hash_slots: empty, a migration moves 1..256 hash slots");
    *v = *s;
    v->tasks[0].source = 1;
    expect_invalid(v, "tasks[0].source: a hash_slot_migration has no source, target or "
                      "participants");
    *v = *s;
    v->tasks[0].n_participants = 1;
    v->tasks[0].participants[0] = 1;
    expect_invalid(v, "tasks[0].source: a hash_slot_migration has no source, target or "
                      "participants");
    *v = *s;
    v->tasks[0].phase_index = 4;
    expect_invalid(v, "tasks[0].phase_index: 4 not in 0..3 (hash_slot_migration)");
    /* One active task per group counts to_group: a transfer on group 3 after the migration... */
    *v = *s;
    uint64_t peer = ctl_state_group(v, 3)->desired_peers[0];
    v->tasks[1] = (struct ctl_task){.id = v->next_task_id++,
                                    .kind = CTL_TASK_LEADER_TRANSFER,
                                    .group = 3,
                                    .config_epoch = 1,
                                    .attempt = 1,
                                    .status = CTL_TASK_RUNNING,
                                    .n_participants = 1,
                                    .participants = {peer},
                                    .target = peer};
    v->n_tasks = 2;
    char want[160];
    snprintf(want, sizeof(want),
             "tasks[1]: group 3 already has active task %llu (one active task per group)",
             (unsigned long long)id);
    expect_invalid(v, want);
    /* ... and before it. */
    struct ctl_task m = v->tasks[0];
    v->tasks[0] = v->tasks[1];
    v->tasks[0].id = m.id;
    m.id = v->tasks[1].id;
    v->tasks[1] = m;
    snprintf(want, sizeof(want),
             "tasks[1]: group 3 already has active task %llu (one active task per group)",
             (unsigned long long)v->tasks[0].id);
    expect_invalid(v, want);
    v->tasks[0].status = CTL_TASK_DONE;
    v->tasks[0].phase_index = 1;
    CU_ASSERT_EQUAL(ctl_state_validate(v, NULL, 0), CTL_OK);
    /* Other kinds carry no migration fields. */
    *v = *s;
    v->tasks[0] = (struct ctl_task){.id = id,
                                    .kind = CTL_TASK_NODE_DRAIN,
                                    .attempt = 1,
                                    .status = CTL_TASK_FAILED,
                                    .n_participants = 1,
                                    .participants = {5},
                                    .source = 5,
                                    .to_group = 2};
    expect_invalid(v, "tasks[0].to_group: only a hash_slot_migration has it");
    v->tasks[0].to_group = 0;
    v->tasks[0].hash_slots[31] = 0x80;
    expect_invalid(v, "tasks[0].hash_slots: only a hash_slot_migration has it");
    /* After the switch the slots must map to to_group. */
    struct ctl_hash_slot_table before = s->table;
    struct ctl_task_proof p = mproof(3, 1);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_CHANGED, "");
    p = mproof(4, 3);
    expect(s, task_advance_cmd(s, id, &p, 12), CTL_OUTCOME_CHANGED, "");
    *v = *s;
    v->table = before;
    v->table.version = s->table.version;
    expect_invalid(v, "tasks[0].hash_slots: hash slot 10 maps to group 1 in hash_slot_table, a "
                      "migration at phase release needs group 3");
    free(v);
    free(s);
}

/* ---- cluster-state.json ---- */

/* tasks[0]: a migration of 10-12 from 1 to 2 waiting at release with progress; tasks[1]: a done
 * migration of 200 from 4 to 3; tasks[2]: a done replica move on group 3. */
static struct ctl_state *migration_state(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    uint32_t a_slots[3] = {12, 10, 11}, b_slots[1] = {200};
    uint64_t a = migrate(s, a_slots, 3, 2, 10);
    struct ctl_task_proof p = mproof(21, 1);
    expect(s, task_advance_cmd(s, a, &p, 11), CTL_OUTCOME_CHANGED, "");
    struct ctl_task_progress prog = {300, 900, 0, 0};
    expect(s, OK(ctl_cmd_task_progress(a, 1, 1, &prog, 12, 0, cmd)), CTL_OUTCOME_UPDATED, "");
    p = mproof(22, 2);
    expect(s, task_advance_cmd(s, a, &p, 13), CTL_OUTCOME_CHANGED, "");
    run_migration(s, migrate(s, b_slots, 1, 3, 20), 21,
                  "0-9:1,10-12:2,13-63:1,64-127:2,128-191:3,192-199:4,200:3,201-255:4");
    const struct ctl_group *g = ctl_state_group(s, 3);
    uint64_t mv = task_create(s, CTL_TASK_REPLICA_MOVE, 3, g->desired_peers[0],
                              task_outsider(s, 3, 0), 0, 30);
    task_run_move(s, mv, 31);
    return s;
}

static size_t count(const char *hay, const char *needle)
{
    size_t n = 0;
    for (const char *at = strstr(hay, needle); at != NULL; at = strstr(at + 1, needle)) {
        n++;
    }
    return n;
}

static void test_round_trip(void)
{
    struct ctl_state *s = migration_state(), *d = malloc(sizeof(*d));
    char err[256] = "";
    CU_ASSERT_EQUAL_FATAL(s->n_tasks, 3);
    char *a = ctl_test_encode(s);
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(a, strlen(a), d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(memcmp(d->tasks, s->tasks, sizeof(s->tasks)), 0);
    CU_ASSERT_EQUAL(memcmp(&d->table, &s->table, sizeof(s->table)), 0);
    char *b = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"hash_slots\":[10,11,12],\"id\":10,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"hash_slots\":[200],\"id\":11,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"target\":0,\"to_group\":2,\"updated_ms\":13}"));
    CU_ASSERT_EQUAL(count(a, "\"to_group\""), 2);     /* not on the replica move */
    CU_ASSERT_EQUAL(count(a, "\"hash_slots\":["), 2); /* config has "hash_slots":256 */
    ctl_free(a), ctl_free(b);
    free(s), free(d);
}

static json_t *task_at(json_t *root, size_t i)
{
    return json_array_get(json_object_get(root, "tasks"), i);
}
static void m_slots_on_move(json_t *r)
{
    json_object_set_new(task_at(r, 2), "hash_slots", json_pack("[i]", 5));
}
static void m_to_group_on_move(json_t *r)
{
    json_object_set_new(task_at(r, 2), "to_group", json_integer(1));
}
static void m_no_slots(json_t *r)
{
    json_object_del(task_at(r, 0), "hash_slots");
}
static void m_no_to_group(json_t *r)
{
    json_object_del(task_at(r, 1), "to_group");
}
static void m_slots_unsorted(json_t *r)
{
    json_object_set_new(task_at(r, 0), "hash_slots", json_pack("[i,i,i]", 10, 12, 11));
}
static void m_slots_duplicate(json_t *r)
{
    json_object_set_new(task_at(r, 0), "hash_slots", json_pack("[i,i,i,i]", 10, 11, 12, 12));
}
static void m_slot_256(json_t *r)
{
    json_object_set_new(task_at(r, 1), "hash_slots", json_pack("[i]", 256));
}
static void m_slots_empty(json_t *r)
{
    json_object_set_new(task_at(r, 1), "hash_slots", json_array());
}
static void m_slots_moved(json_t *r)
{
    json_object_set_new(task_at(r, 0), "hash_slots", json_pack("[i,i]", 10, 13));
}

static void test_decode_rejects(void)
{
    struct ctl_state *s = migration_state();
    task_expect_decode(s, m_slots_on_move, CTL_EDECODE,
                       "tasks[2].hash_slots: not a field for a replica_move task");
    task_expect_decode(s, m_to_group_on_move, CTL_EDECODE,
                       "tasks[2].to_group: not a field for a replica_move task");
    task_expect_decode(s, m_no_slots, CTL_EDECODE,
                       "tasks[0].hash_slots: missing for a hash_slot_migration task");
    task_expect_decode(s, m_no_to_group, CTL_EDECODE,
                       "tasks[1].to_group: missing for a hash_slot_migration task");
    task_expect_decode(s, m_slots_unsorted, CTL_EDECODE,
                       "tasks[0].hash_slots[2]: expected a hash slot in 0..255 above the previous "
                       "entry (sorted set)");
    task_expect_decode(s, m_slots_duplicate, CTL_EDECODE, "tasks[0].hash_slots[3]: expected");
    task_expect_decode(s, m_slot_256, CTL_EDECODE, "tasks[1].hash_slots[0]: expected");
    task_expect_decode(s, m_slots_empty, CTL_ESTATE,
                       "tasks[1].hash_slots: empty, a migration moves 1..256 hash slots");
    task_expect_decode(s, m_slots_moved, CTL_ESTATE,
                       "tasks[0].hash_slots: hash slot 13 maps to group 1 in hash_slot_table, a "
                       "migration at phase release needs group 2");
    free(s);
}

void ctl_test_add_migration(void)
{
    CU_pSuite s = CU_add_suite("controller hash_slot_migration", NULL, NULL);
    CU_add_test(s, "create: every rejected case", test_create_rejects);
    CU_add_test(s, "fence, copy, release, done; the table switches once", test_happy_path);
    CU_add_test(s, "stale fences are noops, proofs need config_index and leader",
                test_fences_and_proofs);
    CU_add_test(s, "task_fail and task_retry by phase", test_fail_and_retry);
    CU_add_test(s, "the replicated switch: set_feature, off refuses, release completes",
                test_feature_switch);
    CU_add_test(s, "the operations_mcp switch: off by default, set, encoded, decoded",
                test_feature_operations_mcp);
    CU_add_test(s, "validation: table agrees with active migrations", test_validation);
    CU_add_test(s, "migration tasks round-trip", test_round_trip);
    CU_add_test(s, "decode rejects bad migration fields", test_decode_rejects);
}
