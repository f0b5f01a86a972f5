/* task_test.c - task commands: each kind's happy path, fences, proofs, failure, retry, eviction. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"
#include "task_test.h"

#define expect ctl_test_check

/* ---- helpers shared with task_codec_test.c ---- */

struct ctl_state *task_fixture(uint32_t groups)
{
    struct ctl_state *s = ctl_test_fixture(groups);
    s->n_tasks = 0; /* drop the fixture's hand-written tasks; next_task_id stays 10 */
    return s;
}

char *task_built(int rc, char **out)
{
    CU_ASSERT_EQUAL_FATAL(rc, CTL_OK);
    CU_ASSERT_PTR_NOT_NULL_FATAL(*out);
    return *out;
}

uint64_t task_create(struct ctl_state *s, enum ctl_task_kind kind, uint32_t group, uint64_t source,
                     uint64_t target, uint64_t node, uint64_t now_ms)
{
    struct ctl_task_spec spec = {kind, group, source, target, node};
    struct ctl_result res;
    char *cmd = NULL;
    uint64_t id = s->next_task_id;
    CU_ASSERT_EQUAL_FATAL(ctl_cmd_task_create(&spec, now_ms, 0, &cmd), CTL_OK);
    enum ctl_outcome got = ctl_test_apply(s, cmd, &res);
    if (got != CTL_OUTCOME_CHANGED) {
        printf("\n  %s: %s (%s)\n", cmd, ctl_outcome_name(got), res.reason);
    }
    CU_ASSERT_EQUAL_FATAL(got, CTL_OUTCOME_CHANGED);
    CU_ASSERT_EQUAL(res.task_id, id);
    CU_ASSERT_EQUAL(s->next_task_id, id + 1);
    ctl_free(cmd);
    return id;
}

char *task_advance_cmd(const struct ctl_state *s, uint64_t id, const struct ctl_task_proof *p,
                       uint64_t now_ms)
{
    const struct ctl_task *t = ctl_state_task(s, id);
    char *cmd = NULL;
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    return task_built(ctl_cmd_task_advance(id, t->group, t->config_epoch, t->attempt,
                                           t->phase_index, p, 0, 0, now_ms, 0, &cmd),
                      &cmd);
}

struct ctl_task_proof task_proof(const uint64_t *voters, uint32_t n_voters,
                                 const uint64_t *learners, uint32_t n_learners, uint64_t leader,
                                 uint64_t commit, uint64_t target_match)
{
    struct ctl_task_proof p = {.config_index = 40 + n_voters + n_learners,
                               .n_voters = n_voters,
                               .n_learners = n_learners,
                               .leader = leader,
                               .commit = commit,
                               .target_match = target_match};
    if (n_voters > 0) {
        memcpy(p.voters, voters, n_voters * sizeof(voters[0]));
    }
    if (n_learners > 0) {
        memcpy(p.learners, learners, n_learners * sizeof(learners[0]));
    }
    return p;
}

uint64_t task_outsider(const struct ctl_state *s, uint32_t group, uint64_t skip)
{
    const struct ctl_group *g = ctl_state_group(s, group);
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct ctl_node *n = &s->nodes[i];
        bool member = false;
        for (uint32_t k = 0; k < g->n_peers; k++) {
            member |= g->desired_peers[k] == n->id;
        }
        if (!member && n->id != skip && n->join_state == CTL_JOIN_ACTIVE &&
            (n->roles & CTL_ROLE_DATA) && n->status != CTL_STATUS_DOWN) {
            return n->id;
        }
    }
    CU_FAIL_FATAL("no node outside the group");
    return 0;
}

/* peers - minus + plus (each skipped when 0), sorted, into out; returns the count. */
static uint32_t peers_with(const struct ctl_group *g, uint64_t minus, uint64_t plus, uint64_t *out)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < g->n_peers; k++) {
        if (g->desired_peers[k] != minus) {
            out[n++] = g->desired_peers[k];
        }
    }
    if (plus != 0) {
        uint32_t at = n++;
        while (at > 0 && out[at - 1] > plus) {
            out[at] = out[at - 1];
            at--;
        }
        out[at] = plus;
    }
    return n;
}

void task_run_move(struct ctl_state *s, uint64_t id, uint64_t now_ms)
{
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    const struct ctl_group *g = ctl_state_group(s, t->group);
    uint64_t src = t->source, dst = t->target, v[CTL_REPLICAS_MAX + 1];
    uint32_t n = peers_with(g, 0, 0, v);
    struct ctl_task_proof p = task_proof(v, n, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, now_ms), CTL_OUTCOME_CHANGED, "");
    p = task_proof(v, n, &dst, 1, src, 9, 9);
    expect(s, task_advance_cmd(s, id, &p, now_ms + 1), CTL_OUTCOME_CHANGED, "");
    n = peers_with(g, 0, dst, v);
    p = task_proof(v, n, NULL, 0, src, 12, 12);
    expect(s, task_advance_cmd(s, id, &p, now_ms + 2), CTL_OUTCOME_CHANGED, "");
    n = peers_with(g, src, dst, v);
    p = task_proof(v, n, NULL, 0, dst, 14, 14);
    expect(s, task_advance_cmd(s, id, &p, now_ms + 3), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_task(s, id)->status, CTL_TASK_DONE);
}

#define OK(expr) task_built((expr), cmd)

/* ---- tests ---- */

static void test_phase_names(void)
{
    static const struct {
        enum ctl_task_kind kind;
        uint32_t phase;
        const char *name;
    } want[] = {
        {CTL_TASK_REPLICA_MOVE, 0, "add_learner"},
        {CTL_TASK_REPLICA_MOVE, 1, "catch_up"},
        {CTL_TASK_REPLICA_MOVE, 2, "promote"},
        {CTL_TASK_REPLICA_MOVE, 3, "remove_source"},
        {CTL_TASK_REPLICA_MOVE, 4, "done"},
        {CTL_TASK_LEADER_TRANSFER, 0, "transfer"},
        {CTL_TASK_LEADER_TRANSFER, 1, "done"},
        {CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, "add_learner"},
        {CTL_TASK_CONTROLLER_VOTER_PROMOTION, 1, "catch_up"},
        {CTL_TASK_CONTROLLER_VOTER_PROMOTION, 2, "promote"},
        {CTL_TASK_CONTROLLER_VOTER_PROMOTION, 3, "done"},
        {CTL_TASK_NODE_DRAIN, 0, "moving_replicas"},
        {CTL_TASK_NODE_DRAIN, 1, "done"},
        {CTL_TASK_HASH_SLOT_MIGRATION, CTL_PHASE_MIGRATION_FENCE, "fence"},
        {CTL_TASK_HASH_SLOT_MIGRATION, CTL_PHASE_MIGRATION_COPY, "copy"},
        {CTL_TASK_HASH_SLOT_MIGRATION, CTL_PHASE_MIGRATION_RELEASE, "release"},
        {CTL_TASK_HASH_SLOT_MIGRATION, CTL_PHASE_MIGRATION_DONE, "done"},
    };
    for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
        const char *got = ctl_task_phase_name(want[i].kind, want[i].phase);
        CU_ASSERT_PTR_NOT_NULL_FATAL(got);
        CU_ASSERT_STRING_EQUAL(got, want[i].name);
    }
    CU_ASSERT_PTR_NULL(ctl_task_phase_name(CTL_TASK_REPLICA_MOVE, 5));
    CU_ASSERT_PTR_NULL(ctl_task_phase_name(CTL_TASK_LEADER_TRANSFER, 2));
    CU_ASSERT_PTR_NULL(ctl_task_phase_name(CTL_TASK_HASH_SLOT_MIGRATION, 4));
    CU_ASSERT_PTR_NULL(ctl_task_phase_name((enum ctl_task_kind)9, 0));
    CU_ASSERT_EQUAL(CTL_PHASE_MOVE_DONE, 4);
    CU_ASSERT_EQUAL(CTL_PHASE_PROMOTION_DONE, 3);
    CU_ASSERT_EQUAL(CTL_PHASE_MIGRATION_FENCE, 0);
    CU_ASSERT_EQUAL(CTL_PHASE_MIGRATION_DONE, 3);
}

static void test_replica_move_happy_path(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    const struct ctl_group *g = ctl_state_group(s, 1);
    uint64_t src = g->preferred_leader, dst = task_outsider(s, 1, 0), v[8], before[8];
    uint32_t n_before = peers_with(g, 0, 0, before);
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 1, src, dst, 0, 1000);
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_PTR_NOT_NULL_FATAL(t);
    CU_ASSERT_EQUAL(id, 10);
    CU_ASSERT_EQUAL(t->kind, CTL_TASK_REPLICA_MOVE);
    CU_ASSERT_EQUAL(t->group, 1);
    CU_ASSERT_EQUAL(t->source, src);
    CU_ASSERT_EQUAL(t->target, dst);
    CU_ASSERT_EQUAL(t->status, CTL_TASK_RUNNING);
    CU_ASSERT_EQUAL(t->phase_index, 0);
    CU_ASSERT_EQUAL(t->attempt, 1);
    CU_ASSERT_EQUAL(t->config_epoch, 1);
    CU_ASSERT_EQUAL(t->created_ms, 1000);
    CU_ASSERT_EQUAL(t->updated_ms, 1000);
    CU_ASSERT_EQUAL(t->n_participants, 2);
    CU_ASSERT_EQUAL(t->participants[0], src < dst ? src : dst);
    CU_ASSERT_EQUAL(t->participants[1], src < dst ? dst : src);
    CU_ASSERT_EQUAL(t->n_previous_voters, 0);
    CU_ASSERT_PTR_EQUAL(ctl_state_active_task(s, 1), t);
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 2));

    /* 0 add_learner: target is a learner, voters are still the desired peers. */
    struct ctl_task_proof p = task_proof(before, n_before, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 1100), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_CATCH_UP);
    CU_ASSERT_EQUAL(t->updated_ms, 1100);
    CU_ASSERT_EQUAL(t->proof.n_learners, 1);
    CU_ASSERT_EQUAL(t->proof.learners[0], dst);
    CU_ASSERT_EQUAL(t->proof.config_index, p.config_index);
    CU_ASSERT_EQUAL(memcmp(g->desired_peers, before, n_before * sizeof(before[0])), 0);
    CU_ASSERT_EQUAL(g->config_epoch, 1);

    /* progress while catching up: UPDATED, revision unchanged; the same report again is NOOP. */
    struct ctl_task_progress prog = {.bytes_sent = 100, .bytes_total = 1000, .commit = 9};
    expect(s, OK(ctl_cmd_task_progress(id, 1, 1, &prog, 1150, 0, cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(t->progress.bytes_sent, 100);
    CU_ASSERT_EQUAL(t->progress.bytes_total, 1000);
    CU_ASSERT_EQUAL(t->updated_ms, 1150);
    expect(s, OK(ctl_cmd_task_progress(id, 1, 1, &prog, 1150, 0, cmd)), CTL_OUTCOME_NOOP,
           "same progress");
    /* An older clock never moves updated_ms back. */
    prog.bytes_sent = 1000;
    expect(s, OK(ctl_cmd_task_progress(id, 1, 1, &prog, 900, 0, cmd)), CTL_OUTCOME_UPDATED, "");
    CU_ASSERT_EQUAL(t->updated_ms, 1150);

    /* 1 catch_up: match reached commit. */
    p = task_proof(before, n_before, &dst, 1, src, 9, 9);
    expect(s, task_advance_cmd(s, id, &p, 1200), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_PROMOTE);
    CU_ASSERT_EQUAL(t->progress.bytes_sent, 1000); /* progress is not reset by an advance */

    /* 2 promote: target is a voter. */
    uint32_t n = peers_with(g, 0, dst, v);
    p = task_proof(v, n, NULL, 0, src, 12, 12);
    expect(s, task_advance_cmd(s, id, &p, 1300), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_REMOVE_SOURCE);
    CU_ASSERT_EQUAL(g->n_peers, n_before);
    CU_ASSERT_EQUAL(g->config_epoch, 1);

    /* 3 remove_source: completes; the assignment is committed, preferred leader follows. */
    n = peers_with(g, src, dst, v);
    uint64_t leader = v[0];
    p = task_proof(v, n, NULL, 0, leader, 14, 14);
    expect(s, task_advance_cmd(s, id, &p, 1400), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_DONE);
    CU_ASSERT_STRING_EQUAL(ctl_task_phase_name(t->kind, t->phase_index), "done");
    CU_ASSERT_EQUAL(g->n_peers, n);
    CU_ASSERT_EQUAL(memcmp(g->desired_peers, v, n * sizeof(v[0])), 0);
    CU_ASSERT_EQUAL(g->config_epoch, 2);
    CU_ASSERT_EQUAL(g->preferred_leader, dst);
    CU_ASSERT_EQUAL(t->proof.leader, leader);
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 1));
    /* The same advance again is a harmless no-op. */
    expect(s, OK(ctl_cmd_task_advance(id, 1, 1, 1, 3, &p, 0, 0, 1500, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is done, not running");
    free(s);
}

static void test_replica_move_create_rejects(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    const struct ctl_group *g = ctl_state_group(s, 2);
    uint64_t in = g->desired_peers[0], in2 = g->desired_peers[1], out = task_outsider(s, 2, 0);
    struct ctl_task_spec spec = {CTL_TASK_REPLICA_MOVE, 2, out, out, 0};
    char want[160];
    snprintf(want, sizeof(want), "source: node %llu is not a desired peer of group 2",
             (unsigned long long)out);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    spec = (struct ctl_task_spec){CTL_TASK_REPLICA_MOVE, 2, in, in2, 0};
    snprintf(want, sizeof(want), "target: node %llu is already a desired peer of group 2",
             (unsigned long long)in2);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    spec.target = 77;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "target: node 77 is unknown");
    spec.group = 9;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "group: 9 does not exist (groups are 1..4)");
    spec.group = 2;
    spec.source = 0;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, "source: 0 not in");
    /* A joining, a down target. */
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 0, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    spec = (struct ctl_task_spec){CTL_TASK_REPLICA_MOVE, 2, in, 6, 0};
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "target: node 6 is joining, a replica moves only to an active data node");
    expect(s, OK(ctl_cmd_activate_node(6, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_set_node_status(6, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "target: node 6 is down");
    expect(s, OK(ctl_cmd_set_node_status(6, CTL_STATUS_SUSPECT, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 2, in, 6, 0, 5);
    /* One active task per group, whatever its kind. */
    spec = (struct ctl_task_spec){CTL_TASK_LEADER_TRANSFER, 2, 0, in2, 0};
    snprintf(want, sizeof(want), "group: 2 already has active task %llu (replica_move)",
             (unsigned long long)id);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    /* A migration into the busy group is refused too (it would occupy group 2). */
    spec = (struct ctl_task_spec){.kind = CTL_TASK_HASH_SLOT_MIGRATION, .to_group = 2};
    spec.hash_slots[200 / 8] = 1u << (200 % 8); /* hash slot 200: group 4 */
    snprintf(want, sizeof(want), "to_group: 2 already has active task %llu (replica_move)",
             (unsigned long long)id);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    /* Kinds, fields. */
    static const struct {
        const char *cmd, *reason;
    } bad[] = {
        {"{\"op\":\"task_create\",\"kind\":\"replica_move\",\"group\":3,\"source\":1,\"target\":4,"
         "\"node\":4,\"now_ms\":1}",
         "node: not a field for a replica_move task"},
        {"{\"op\":\"task_create\",\"kind\":\"replica_move\",\"group\":3,\"target\":4,"
         "\"now_ms\":1}",
         "source: missing for a replica_move task"},
        {"{\"op\":\"task_create\",\"kind\":\"node_drain\",\"group\":3,\"node\":4,\"now_ms\":1}",
         "group: not a field for a node_drain task"},
        {"{\"op\":\"task_create\",\"kind\":\"node_drain\",\"now_ms\":1}",
         "node: missing for a node_drain task"},
        {"{\"op\":\"task_create\",\"kind\":\"node_drain\",\"node\":4}", "missing field \"now_ms\""},
        {"{\"op\":\"task_create\",\"kind\":\"teleport\",\"node\":4,\"now_ms\":1}",
         "kind: \"teleport\" is not replica_move|leader_transfer|hash_slot_migration|"},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        expect(s, strdup(bad[i].cmd), CTL_OUTCOME_REJECTED, bad[i].reason);
    }
    free(s);
}

/* Wrong proofs at every replica-move phase: REJECTED "proof: ...", nothing changes. */
static void test_replica_move_wrong_proofs(void)
{
    struct ctl_state *s = task_fixture(4);
    const struct ctl_group *g = ctl_state_group(s, 2);
    uint64_t src =
        g->desired_peers[0] == g->preferred_leader ? g->desired_peers[1] : g->desired_peers[0];
    uint64_t pref = g->preferred_leader, dst = task_outsider(s, 2, 0), v[8], w[8], none[1] = {0};
    uint32_t n = peers_with(g, 0, 0, v);
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 2, src, dst, 0, 10);
    struct ctl_task_proof p;
    char want[200];
    /* phase 0 */
    p = task_proof(v, n, NULL, 0, src, 5, 0);
    snprintf(want, sizeof(want), "proof: node %llu is not a learner (learners [])",
             (unsigned long long)dst);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_REJECTED, want);
    p = task_proof(v, n - 1, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_REJECTED, "are not the desired peers");
    uint32_t m = peers_with(g, 0, dst, w);
    p = task_proof(w, m, &dst, 1, src, 5, 0);
    snprintf(want, sizeof(want), "proof: node %llu is both a voter and a learner",
             (unsigned long long)dst);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_REJECTED, want);
    uint64_t dup[2] = {v[0], v[0]};
    p = task_proof(dup, 2, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_REJECTED, "proof.voters: node");
    p = task_proof(none, 1, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_REJECTED,
           "proof.voters[0]: expected a node id");
    expect(s,
           strdup("{\"op\":\"task_advance\",\"task\":10,\"group\":2,\"config_epoch\":1,"
                  "\"attempt\":1,\"phase\":0,\"now_ms\":3,\"proof\":{\"voters\":[1,2,3,4,5,6,7,8],"
                  "\"learners\":[],\"leader\":1,\"commit\":1,\"target_match\":1,"
                  "\"config_index\":1}}"),
           CTL_OUTCOME_REJECTED, "proof.voters: 8 entries, the limit is 7");
    expect(s,
           strdup("{\"op\":\"task_advance\",\"task\":10,\"group\":2,\"config_epoch\":1,"
                  "\"attempt\":1,\"phase\":0,\"now_ms\":3,\"proof\":{}}"),
           CTL_OUTCOME_REJECTED, "proof: missing field \"config_index\"");
    expect(s,
           strdup("{\"op\":\"task_advance\",\"task\":10,\"group\":2,\"config_epoch\":1,"
                  "\"attempt\":1,\"phase\":0,\"now_ms\":3,\"proof\":[]}"),
           CTL_OUTCOME_REJECTED, "proof: expected an object");
    CU_ASSERT_EQUAL(ctl_state_task(s, id)->phase_index, 0);
    p = task_proof(v, n, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 12), CTL_OUTCOME_CHANGED, "");
    /* phase 1 */
    p = task_proof(v, n, &dst, 1, src, 0, 0);
    expect(s, task_advance_cmd(s, id, &p, 13), CTL_OUTCOME_REJECTED, "proof: commit is 0");
    p = task_proof(v, n, &dst, 1, src, 5, 4);
    snprintf(want, sizeof(want), "proof: node %llu match 4 is behind commit 5",
             (unsigned long long)dst);
    expect(s, task_advance_cmd(s, id, &p, 13), CTL_OUTCOME_REJECTED, want);
    p = task_proof(v, n, NULL, 0, src, 5, 5);
    expect(s, task_advance_cmd(s, id, &p, 13), CTL_OUTCOME_REJECTED, "is not a learner");
    p = task_proof(v, n, &dst, 1, src, 5, 7);
    expect(s, task_advance_cmd(s, id, &p, 14), CTL_OUTCOME_CHANGED, "");
    /* phase 2 */
    p = task_proof(v, n, &dst, 1, src, 8, 8);
    snprintf(want, sizeof(want), "proof: node %llu is not a voter", (unsigned long long)dst);
    expect(s, task_advance_cmd(s, id, &p, 15), CTL_OUTCOME_REJECTED, want);
    p = task_proof(w, m, NULL, 0, src, 8, 8);
    expect(s, task_advance_cmd(s, id, &p, 16), CTL_OUTCOME_CHANGED, "");
    /* phase 3 */
    p = task_proof(w, m, NULL, 0, dst, 9, 9);
    snprintf(want, sizeof(want), "proof: source %llu is still a voter", (unsigned long long)src);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_REJECTED, want);
    m = peers_with(g, src, dst, w);
    p = task_proof(w, m - 1, NULL, 0, w[0], 9, 9);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_REJECTED,
           "are not desired peers - source + target");
    p = task_proof(w, m, &src, 1, dst, 9, 9);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_REJECTED, "remain, want none");
    p = task_proof(w, m, NULL, 0, src, 9, 9);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_REJECTED, "is the source");
    p = task_proof(w, m, NULL, 0, 0, 9, 9);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_REJECTED,
           "proof: leader 0 is not one of the new voters");
    CU_ASSERT_EQUAL(g->config_epoch, 1);
    p = task_proof(w, m, NULL, 0, dst, 9, 9);
    expect(s, task_advance_cmd(s, id, &p, 18), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(g->config_epoch, 2);
    CU_ASSERT_EQUAL(g->preferred_leader, pref); /* the source was not the preferred leader */
    CU_ASSERT_EQUAL(memcmp(g->desired_peers, w, m * sizeof(w[0])), 0);
    free(s);
}

/* Every fence mismatch is NOOP "stale fence", for advance, progress and fail alike. */
static void test_fences(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    const struct ctl_group *g = ctl_state_group(s, 3);
    uint64_t src = g->desired_peers[0], dst = task_outsider(s, 3, 0), v[8];
    uint32_t n = peers_with(g, 0, 0, v);
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 3, src, dst, 0, 10);
    struct ctl_task_proof p0 = task_proof(v, n, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p0, 11), CTL_OUTCOME_CHANGED, "");
    struct ctl_task_proof p = task_proof(v, n, &dst, 1, src, 5, 5);
    struct ctl_task_progress prog = {1, 2, 3, 4};
    uint64_t rev = s->revision;
    expect(s, OK(ctl_cmd_task_advance(id, 3, 2, 1, 1, &p, 0, 0, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 has config_epoch 1, the command has 2");
    expect(s, OK(ctl_cmd_task_advance(id, 3, 1, 2, 1, &p, 0, 0, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 1, the command has 2");
    expect(s, OK(ctl_cmd_task_advance(id, 3, 1, 1, 2, &p, 0, 0, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at phase 1 (catch_up), the command has 2");
    expect(s, OK(ctl_cmd_task_advance(id, 2, 1, 1, 1, &p, 0, 0, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is for group 3, the command names group 2");
    expect(s, OK(ctl_cmd_task_advance(999, 3, 1, 1, 1, &p, 0, 0, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 999 does not exist");
    /* The phase-0 advance repeated (a lost reply): NOOP, even with a now stale
     * expected_revision, because the fence is checked first. */
    expect(s, OK(ctl_cmd_task_advance(id, 3, 1, 1, 0, &p0, 0, 0, 12, rev - 1, cmd)),
           CTL_OUTCOME_NOOP, "stale fence: task 10 is at phase 1");
    /* A matching fence still honours expected_revision. */
    expect(s, OK(ctl_cmd_task_advance(id, 3, 1, 1, 1, &p, 0, 0, 12, rev - 1, cmd)),
           CTL_OUTCOME_REJECTED, "stale expected_revision");
    expect(s, OK(ctl_cmd_task_progress(id, 2, 1, &prog, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 1, the command has 2");
    expect(s, OK(ctl_cmd_task_progress(id, 1, 0, &prog, 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at phase 1 (catch_up), the command has 0");
    expect(s, OK(ctl_cmd_task_fail(id, 1, 0, "late", 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at phase 1");
    expect(s, OK(ctl_cmd_task_fail(id, 3, 1, "late", 12, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 1, the command has 3");
    expect(s,
           strdup("{\"op\":\"task_advance\",\"task\":\"10\",\"group\":3,\"config_epoch\":1,"
                  "\"attempt\":1,\"phase\":1,\"now_ms\":3,\"proof\":{}}"),
           CTL_OUTCOME_REJECTED, "task: expected an integer");
    expect(s,
           strdup("{\"op\":\"task_progress\",\"task\":10,\"attempt\":1,\"phase\":1,\"now_ms\":3,"
                  "\"progress\":{\"bytes_sent\":1}}"),
           CTL_OUTCOME_REJECTED, "progress: missing field \"bytes_total\"");
    /* Not running: failed, then (after retry and completion) done. */
    expect(s, OK(ctl_cmd_task_fail(id, 1, 1, "snapshot send: peer reset", 13, 0, cmd)),
           CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_task_advance(id, 3, 1, 1, 1, &p, 0, 0, 14, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is failed, not running");
    expect(s, OK(ctl_cmd_task_progress(id, 1, 1, &prog, 14, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is failed, not running");
    expect(s, OK(ctl_cmd_task_fail(id, 1, 1, "again", 14, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is failed, not running");
    /* A group whose epoch moved under a running task (only a hand edit can do that). */
    expect(s, OK(ctl_cmd_task_retry(id, 15, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    ((struct ctl_group *)g)->config_epoch = 5;
    expect(s, OK(ctl_cmd_task_advance(id, 3, 1, 2, 1, &p, 0, 0, 16, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: group 3 is at config_epoch 5, the command has 1");
    free(s);
}

static void test_leader_transfer(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    struct ctl_group *g = (struct ctl_group *)ctl_state_group(s, 2);
    uint64_t src = g->preferred_leader, out = task_outsider(s, 2, 0), dst = 0, third = 0;
    for (uint32_t k = 0; k < g->n_peers; k++) {
        if (g->desired_peers[k] != src) {
            third = dst != 0 ? g->desired_peers[k] : third;
            dst = dst == 0 ? g->desired_peers[k] : dst;
        }
    }
    char want[160];
    struct ctl_task_spec spec = {CTL_TASK_LEADER_TRANSFER, 2, src, out, 0};
    snprintf(want, sizeof(want), "target: node %llu is not a desired peer of group 2",
             (unsigned long long)out);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    spec = (struct ctl_task_spec){CTL_TASK_LEADER_TRANSFER, 2, out, dst, 0};
    snprintf(want, sizeof(want), "source: node %llu is not a desired peer of group 2 (0 = leader",
             (unsigned long long)out);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    spec = (struct ctl_task_spec){CTL_TASK_LEADER_TRANSFER, 2, dst, dst, 0};
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "is the source, the observed leader already");
    uint64_t id = task_create(s, CTL_TASK_LEADER_TRANSFER, 2, src, dst, 0, 50);
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_EQUAL(g->preferred_leader, dst); /* set in the same apply */
    CU_ASSERT_EQUAL(g->config_epoch, 1);
    CU_ASSERT_EQUAL(t->n_participants, 2);
    struct ctl_task_proof p = task_proof(g->desired_peers, g->n_peers, NULL, 0, 0, 3, 3);
    expect(s, task_advance_cmd(s, id, &p, 51), CTL_OUTCOME_REJECTED, "proof: no leader observed");
    p.leader = src;
    snprintf(want, sizeof(want), "proof: leader %llu is still the source", (unsigned long long)src);
    expect(s, task_advance_cmd(s, id, &p, 51), CTL_OUTCOME_REJECTED, want);
    p.leader = out;
    snprintf(want, sizeof(want), "proof: leader %llu is not a desired peer of group 2",
             (unsigned long long)out);
    expect(s, task_advance_cmd(s, id, &p, 51), CTL_OUTCOME_REJECTED, want);
    /* Any voter but the source completes it: the target is preferred, not required. */
    p.leader = third;
    expect(s, task_advance_cmd(s, id, &p, 52), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_TRANSFER_DONE);
    CU_ASSERT_EQUAL(g->preferred_leader, dst);
    CU_ASSERT_EQUAL(g->config_epoch, 1);
    /* Source 0 = unknown leader: participants are the target only. */
    id = task_create(s, CTL_TASK_LEADER_TRANSFER, 2, 0, src, 0, 60);
    t = ctl_state_task(s, id);
    CU_ASSERT_EQUAL(t->n_participants, 1);
    CU_ASSERT_EQUAL(t->participants[0], src);
    CU_ASSERT_EQUAL(g->preferred_leader, src);
    p.leader = src;
    expect(s, task_advance_cmd(s, id, &p, 61), CTL_OUTCOME_CHANGED, "");
    free(s);
}

static void test_voter_promotion(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 0, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    struct ctl_task_spec spec = {CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 1};
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 1 is already a controller voter");
    spec.node = 6;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 6 is joining, only an active data node can be promoted");
    spec.node = 60;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 60 is unknown");
    uint64_t id = task_create(s, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 4, 100);
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_EQUAL(t->group, 0);
    CU_ASSERT_EQUAL(t->config_epoch, 0);
    CU_ASSERT_EQUAL(t->target, 4);
    CU_ASSERT_EQUAL(t->source, 0);
    CU_ASSERT_EQUAL(t->n_participants, 1);
    CU_ASSERT_EQUAL(t->participants[0], 4);
    CU_ASSERT_EQUAL(t->n_previous_voters, 3);
    CU_ASSERT_EQUAL(t->previous_voters[0], 1);
    CU_ASSERT_EQUAL(t->previous_voters[2], 3);
    CU_ASSERT_PTR_EQUAL(ctl_state_active_task(s, 0), t);
    spec.node = 5;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: controller_voter_promotion 10 (node 4) is active, one at a time");
    uint64_t voters[4] = {1, 2, 3, 4}, four = 4;
    struct ctl_task_proof p = task_proof(voters, 3, NULL, 0, 1, 20, 0);
    expect(s, task_advance_cmd(s, id, &p, 101), CTL_OUTCOME_REJECTED,
           "proof: node 4 is not a learner");
    p = task_proof(voters, 3, &four, 1, 1, 20, 0);
    expect(s, task_advance_cmd(s, id, &p, 102), CTL_OUTCOME_CHANGED, "");
    p = task_proof(voters, 3, &four, 1, 1, 20, 19);
    expect(s, task_advance_cmd(s, id, &p, 103), CTL_OUTCOME_REJECTED,
           "proof: node 4 match 19 is behind commit 20");
    p = task_proof(voters, 3, &four, 1, 1, 20, 20);
    expect(s, task_advance_cmd(s, id, &p, 104), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_PROMOTION_PROMOTE);
    /* promote: expected_revision is required and must match; voters == previous + node. */
    p = task_proof(voters, 4, NULL, 0, 1, 22, 22);
    expect(s, task_advance_cmd(s, id, &p, 105), CTL_OUTCOME_REJECTED,
           "expected_revision: required by this command");
    uint64_t rev = s->revision;
    expect(s, OK(ctl_cmd_task_advance(id, 0, 0, 1, 2, &p, 0, 0, 105, rev + 1, cmd)),
           CTL_OUTCOME_REJECTED, "stale expected_revision");
    uint64_t wrong[3] = {1, 2, 4};
    struct ctl_task_proof bad = task_proof(wrong, 3, NULL, 0, 1, 22, 22);
    expect(s, OK(ctl_cmd_task_advance(id, 0, 0, 1, 2, &bad, 0, 0, 105, rev, cmd)),
           CTL_OUTCOME_REJECTED, "proof: voters [1,2,4] are not previous voters + node [1,2,3,4]");
    CU_ASSERT_FALSE(ctl_state_node(s, 4)->roles & CTL_ROLE_CONTROLLER_VOTER);
    expect(s, OK(ctl_cmd_task_advance(id, 0, 0, 1, 2, &p, 0, 0, 106, rev, cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_PROMOTION_DONE);
    CU_ASSERT_EQUAL(ctl_state_node(s, 4)->roles, CTL_ROLE_CONTROLLER_VOTER | CTL_ROLE_DATA);
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 0));
    /* A promoted voter cannot be drained. */
    spec = (struct ctl_task_spec){CTL_TASK_NODE_DRAIN, 0, 0, 0, 4};
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 4 is a controller voter: demote it first");
    /* The controller voter set is bounded by CTL_REPLICAS_MAX. */
    expect(s, OK(ctl_cmd_activate_node(6, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    for (uint64_t idn = 7; idn <= 8; idn++) {
        char addr[32];
        snprintf(addr, sizeof(addr), "10.0.0.%llu:7700", (unsigned long long)idn);
        expect(s, OK(ctl_cmd_join_node(idn, addr, NULL, 0, 0, cmd)), CTL_OUTCOME_CHANGED, "");
        expect(s, OK(ctl_cmd_activate_node(idn, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    }
    for (uint64_t idn = 5; idn <= 7; idn++) {
        ((struct ctl_node *)ctl_state_node(s, idn))->roles |= CTL_ROLE_CONTROLLER_VOTER;
    }
    spec = (struct ctl_task_spec){CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 8};
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "controller voters: already 7, the limit (CTL_REPLICAS_MAX)");
    free(s);
}

/* A node_drain's advance at attempt 1 with the given observed facts. */
static char *drain_cmd(uint64_t id, uint64_t held, uint64_t leading, uint64_t tasks,
                       uint32_t groups, uint64_t now_ms)
{
    struct ctl_drain_facts f = {held, leading, tasks, groups};
    char *cmd = NULL;
    return task_built(ctl_cmd_drain_advance(id, 1, &f, now_ms, 0, &cmd), &cmd);
}

static void test_node_drain(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    /* The fixture placed groups on nodes 1..3 only: first move replicas of groups 1, 2 to 5. */
    for (uint32_t gi = 1; gi <= 2; gi++) {
        task_run_move(s,
                      task_create(s, CTL_TASK_REPLICA_MOVE, gi,
                                  ctl_state_group(s, gi)->desired_peers[0], 5, 0, 100 + gi),
                      110);
    }
    struct ctl_task_spec spec = {CTL_TASK_NODE_DRAIN, 0, 0, 0, 2};
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 2 is a controller voter: demote it first");
    expect(s, OK(ctl_cmd_join_node(6, "10.0.0.6:7700", NULL, 0, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    spec.node = 6;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 6 is joining, only an active or leaving node can be drained");
    expect(s, OK(ctl_cmd_activate_node(6, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    uint64_t id = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 5, 200);
    const struct ctl_task *t = ctl_state_task(s, id);
    char want[256];
    CU_ASSERT_EQUAL(t->source, 5);
    CU_ASSERT_EQUAL(t->target, 0);
    CU_ASSERT_EQUAL(t->n_participants, 1);
    CU_ASSERT_EQUAL(ctl_state_node(s, 5)->join_state, CTL_JOIN_LEAVING);
    spec.node = 5;
    snprintf(want, sizeof(want), "node: node_drain %llu of node 5 is already active",
             (unsigned long long)id);
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    /* A leaving node is no move target. */
    uint32_t with5 = 0;
    for (uint32_t gi = 1; gi <= s->n_groups; gi++) {
        const struct ctl_group *g = ctl_state_group(s, gi);
        bool has5 = false;
        for (uint32_t k = 0; k < g->n_peers; k++) {
            has5 |= g->desired_peers[k] == 5;
        }
        if (!has5) {
            struct ctl_task_spec mv = {CTL_TASK_REPLICA_MOVE, gi, g->desired_peers[0], 5, 0};
            expect(s, OK(ctl_cmd_task_create(&mv, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
                   "target: node 5 is leaving");
        }
        with5 = has5 && with5 == 0 ? gi : with5; /* the first group holding node 5 */
    }
    CU_ASSERT_FATAL(with5 != 0);
    /* Proofs: the observed counts, then desired peers, then other tasks. */
    uint32_t ng = s->n_groups;
    expect(s, drain_cmd(id, 2, 0, 0, ng, 201), CTL_OUTCOME_REJECTED,
           "proof: node 5 still holds 2 replicas and leads 0, with 0 active tasks, as observed");
    expect(s, drain_cmd(id, 0, 1, 0, ng, 201), CTL_OUTCOME_REJECTED, "leads 1");
    expect(s, drain_cmd(id, 0, 0, 1, ng, 201), CTL_OUTCOME_REJECTED, "with 1 active tasks");
    snprintf(want, sizeof(want), "proof: facts of %u of the %u groups observed", ng - 1, ng);
    expect(s, drain_cmd(id, 0, 0, 0, ng - 1, 201), CTL_OUTCOME_REJECTED, want);
    /* the generic builder (no tasks_on_node, groups_observed) proves nothing */
    expect(s, OK(ctl_cmd_task_advance(id, 0, 0, 1, 0, NULL, 0, 0, 201, 0, cmd)),
           CTL_OUTCOME_REJECTED,
           "proof: replicas_on_node, leading, tasks_on_node and groups_observed are required");
    snprintf(want, sizeof(want),
             "{\"op\":\"task_advance\",\"task\":%llu,\"group\":0,\"config_epoch\":0,"
             "\"attempt\":1,\"phase\":0,\"now_ms\":3,\"proof\":{\"voters\":[],"
             "\"learners\":[],\"leader\":0,\"commit\":0,\"target_match\":0,"
             "\"config_index\":0}}",
             (unsigned long long)id);
    expect(s, strdup(want), CTL_OUTCOME_REJECTED,
           "proof: replicas_on_node, leading, tasks_on_node and groups_observed are required");
    snprintf(want, sizeof(want), "proof: node 5 is still a desired peer of group %u", with5);
    expect(s, drain_cmd(id, 0, 0, 0, ng, 201), CTL_OUTCOME_REJECTED, want);
    /* Move every replica off node 5 (the drain executor's job), checking the drain stays blocked
     * while a move is active. */
    uint64_t now = 300;
    for (uint32_t gi = 1; gi <= s->n_groups; gi++) {
        const struct ctl_group *g = ctl_state_group(s, gi);
        bool has5 = false;
        for (uint32_t k = 0; k < g->n_peers; k++) {
            has5 |= g->desired_peers[k] == 5;
        }
        if (!has5) {
            continue;
        }
        uint64_t epoch = g->config_epoch;
        uint64_t mv = task_create(s, CTL_TASK_REPLICA_MOVE, gi, 5, task_outsider(s, gi, 5), 0, now);
        expect(s, drain_cmd(id, 0, 0, 0, ng, now), CTL_OUTCOME_REJECTED,
               "proof: node 5 is still a desired peer");
        task_run_move(s, mv, now);
        CU_ASSERT_EQUAL(g->config_epoch, epoch + 1);
        now += 10;
    }
    /* An active task naming node 5 blocks the drain (written by hand: no command makes one now).
     */
    struct ctl_state *held = malloc(sizeof(*held));
    *held = *s;
    struct ctl_task *x = &held->tasks[held->n_tasks++];
    *x = (struct ctl_task){.id = held->next_task_id++,
                           .kind = CTL_TASK_LEADER_TRANSFER,
                           .group = 1,
                           .config_epoch = ctl_state_group(held, 1)->config_epoch,
                           .attempt = 1,
                           .status = CTL_TASK_RUNNING,
                           .n_participants = 1,
                           .participants = {5},
                           .target = ctl_state_group(held, 1)->desired_peers[0]};
    CU_ASSERT_EQUAL_FATAL(ctl_state_validate(held, NULL, 0), CTL_OK);
    snprintf(want, sizeof(want), "proof: active task %llu (leader_transfer) still involves node 5",
             (unsigned long long)x->id);
    expect(held, drain_cmd(id, 0, 0, 0, ng, now), CTL_OUTCOME_REJECTED, want);
    free(held);
    /* Drained: node 5 becomes a tombstone. */
    expect(s, drain_cmd(id, 0, 0, 0, ng, now), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_DRAIN_DONE);
    const struct ctl_node *n5 = ctl_state_node(s, 5);
    CU_ASSERT_PTR_NOT_NULL_FATAL(n5);
    CU_ASSERT_EQUAL(n5->join_state, CTL_JOIN_REMOVED);
    expect(s, OK(ctl_cmd_join_node(9, "10.0.0.5:7700", NULL, 0, 0, cmd)), CTL_OUTCOME_REJECTED,
           "address 10.0.0.5:7700 is already used by node 5");
    expect(s, OK(ctl_cmd_activate_node(5, 0, cmd)), CTL_OUTCOME_REJECTED, "node 5 is removed");
    spec.node = 5;
    expect(s, OK(ctl_cmd_task_create(&spec, 1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 5 is removed");
    free(s);
}

static void test_fail_and_retry(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    struct ctl_group *g = (struct ctl_group *)ctl_state_group(s, 1);
    struct ctl_group before = *g;
    uint64_t src = g->desired_peers[0], dst = task_outsider(s, 1, 0), v[8];
    uint32_t n = peers_with(g, 0, 0, v);
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 1, src, dst, 0, 10);
    const struct ctl_task *t = ctl_state_task(s, id);
    struct ctl_task_proof p = task_proof(v, n, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_task_fail(id, 1, 1, "", 12, 0, cmd)), CTL_OUTCOME_REJECTED,
           "error: must be 1..256 bytes");
    char long_err[300];
    memset(long_err, 'e', sizeof(long_err) - 1);
    long_err[sizeof(long_err) - 1] = '\0';
    char raw[512];
    snprintf(raw, sizeof(raw),
             "{\"op\":\"task_fail\",\"task\":10,\"attempt\":1,\"phase\":1,\"now_ms\":3,"
             "\"error\":\"%s\"}",
             long_err);
    expect(s, strdup(raw), CTL_OUTCOME_REJECTED, "error: 299 bytes, the limit is 256");
    expect(s, OK(ctl_cmd_task_fail(id, 1, 1, "catch-up: learner 4 unreachable", 13, 0, cmd)),
           CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_FAILED);
    CU_ASSERT_STRING_EQUAL(t->last_error, "catch-up: learner 4 unreachable");
    CU_ASSERT_EQUAL(t->phase_index, 1);
    CU_ASSERT_EQUAL(t->updated_ms, 13);
    CU_ASSERT_EQUAL(memcmp(g, &before, sizeof(before)), 0); /* membership unchanged */
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 1));
    /* retry: running again, attempt 2, the error kept until the next advance; a move that
     * failed at catch_up restarts at add_learner (its leader removed the learner it left). */
    expect(s, OK(ctl_cmd_task_retry(id, 14, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_RUNNING);
    CU_ASSERT_EQUAL(t->attempt, 2);
    CU_ASSERT_EQUAL(t->phase_index, 0);
    CU_ASSERT_STRING_EQUAL(t->last_error, "catch-up: learner 4 unreachable");
    expect(s, OK(ctl_cmd_task_retry(id, 15, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task 10 is running, only a failed task can be retried");
    expect(s, OK(ctl_cmd_task_retry(77, 15, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task: 77 does not exist");
    p = task_proof(v, n, &dst, 1, src, 6, 6);
    expect(s, OK(ctl_cmd_task_advance(id, 1, 1, 1, 0, &p, 0, 0, 16, 0, cmd)), CTL_OUTCOME_NOOP,
           "stale fence: task 10 is at attempt 2, the command has 1");
    expect(s, task_advance_cmd(s, id, &p, 16), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_STRING_EQUAL(t->last_error, "");
    CU_ASSERT_EQUAL(t->phase_index, 1);
    expect(s, task_advance_cmd(s, id, &p, 16), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, 2);
    /* Fail again; another task takes the group meanwhile: retry is refused until it ends. */
    expect(s, OK(ctl_cmd_task_fail(id, 2, 2, "promote: timeout", 17, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    uint64_t other = g->desired_peers[1];
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, 1, 0, other, 0, 18);
    char want[128];
    snprintf(want, sizeof(want), "task 10: task %llu (leader_transfer) became active meanwhile",
             (unsigned long long)lt);
    expect(s, OK(ctl_cmd_task_retry(id, 19, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    struct ctl_task_proof lp = task_proof(g->desired_peers, g->n_peers, NULL, 0, other, 1, 1);
    expect(s, task_advance_cmd(s, lt, &lp, 20), CTL_OUTCOME_CHANGED, "");
    /* A completed move changes the group's config_epoch: the old task cannot resume. */
    struct ctl_state *moved = malloc(sizeof(*moved));
    *moved = *s;
    uint64_t mv = task_create(moved, CTL_TASK_REPLICA_MOVE, 1, src, dst, 0, 21);
    task_run_move(moved, mv, 22);
    expect(moved, OK(ctl_cmd_task_retry(id, 30, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task 10: group 1 moved to config_epoch 2 since the task was made at 1; create a new "
           "task");
    free(moved);
    expect(s, OK(ctl_cmd_task_retry(id, 21, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->attempt, 3);
    /* The attempt bound. */
    expect(s, OK(ctl_cmd_task_fail(id, 3, 2, "x", 22, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    ((struct ctl_task *)t)->attempt = CTL_TASK_ATTEMPTS_MAX;
    expect(s, OK(ctl_cmd_task_retry(id, 23, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task 10: attempt 1000 is the limit (CTL_TASK_ATTEMPTS_MAX)");
    /* A failed drain keeps the node leaving; a new drain may take over, then the old one
     * cannot be retried. */
    uint64_t d1 = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 5, 30);
    expect(s, OK(ctl_cmd_task_fail(d1, 1, 0, "drain: stuck", 31, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, 5)->join_state, CTL_JOIN_LEAVING);
    uint64_t d2 = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 5, 32);
    snprintf(want, sizeof(want), "task %llu (node_drain) became active meanwhile",
             (unsigned long long)d2);
    expect(s, OK(ctl_cmd_task_retry(d1, 33, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    free(s);
}

static void test_fail_error_builder(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1], err[400] = "a";
    for (size_t k = 1; k + 2 < sizeof(err) - 1; k += 2) {
        memcpy(err + k, "\xc3\xa9", 2); /* "a" then U+00E9 repeated: odd byte offsets */
        err[k + 2] = '\0';
    }
    uint64_t id = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 4, 1);
    expect(s, OK(ctl_cmd_task_fail(id, 1, 0, err, 2, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_EQUAL(strlen(t->last_error), 255); /* cut before a split character */
    CU_ASSERT_EQUAL(strncmp(t->last_error, err, 255), 0);
    CU_ASSERT_EQUAL(ctl_cmd_task_fail(id, 1, 0, "\xc3", 2, 0, cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_task_fail(id, 1, 0, NULL, 2, 0, cmd), CTL_EINVALID);
    free(s);
}

/* task_abort: a running move stops at add_learner or catch_up and not later; the fence is the
 * task's live state; an executor's advance after it is a stale fence; a drain's node goes back
 * to active; other kinds, unknown tasks and tasks not running are refused, changing nothing. */
static void test_abort(void)
{
    struct ctl_state *s = task_fixture(4);
    struct ctl_state *before = malloc(sizeof(*before));
    char *cmd[1];
    struct ctl_group *g = (struct ctl_group *)ctl_state_group(s, 1);
    struct ctl_group peers = *g;
    uint64_t src = g->desired_peers[0], dst = task_outsider(s, 1, 0), v[8];
    uint32_t n = peers_with(g, 0, 0, v);
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 1, src, dst, 0, 10);
    const struct ctl_task *t = ctl_state_task(s, id);
    struct ctl_task_proof p = task_proof(v, n, &dst, 1, src, 5, 0);
    expect(s, task_advance_cmd(s, id, &p, 11), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_CATCH_UP);
    char *late = task_advance_cmd(s, id, &p, 12); /* the executor's next step, built before */
    /* refusals first: nothing changes */
    *before = *s;
    expect(s, OK(ctl_cmd_task_abort(77, 12, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task: 77 does not exist");
    expect(s, OK(ctl_cmd_task_abort(id, 12, s->revision + 5, cmd)), CTL_OUTCOME_REJECTED,
           "stale expected_revision");
    CU_ASSERT_EQUAL(memcmp(&before->tasks, &s->tasks, sizeof(s->tasks)), 0);
    CU_ASSERT_EQUAL(before->revision, s->revision);
    /* abort at catch_up: failed, membership unchanged, the late advance is a stale fence */
    expect(s, OK(ctl_cmd_task_abort(id, 13, s->revision, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_FAILED);
    CU_ASSERT_STRING_EQUAL(t->last_error, "aborted (Admin.AbortTask) at phase catch_up");
    CU_ASSERT_EQUAL(t->updated_ms, 13);
    CU_ASSERT_EQUAL(memcmp(g, &peers, sizeof(peers)), 0);
    CU_ASSERT_PTR_NULL(ctl_state_active_task(s, 1));
    expect(s, late, CTL_OUTCOME_NOOP, "stale fence: task 10 is failed, not running");
    expect(s, OK(ctl_cmd_task_abort(id, 14, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task 10 is failed, only a running task can be aborted");
    /* retried, it starts over at add_learner; from promote on it cannot be aborted */
    expect(s, OK(ctl_cmd_task_retry(id, 15, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_ADD_LEARNER);
    expect(s, task_advance_cmd(s, id, &p, 16), CTL_OUTCOME_CHANGED, "");
    p = task_proof(v, n, &dst, 1, src, 6, 6);
    expect(s, task_advance_cmd(s, id, &p, 17), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_PROMOTE);
    *before = *s;
    expect(s, OK(ctl_cmd_task_abort(id, 18, 0, cmd)), CTL_OUTCOME_REJECTED,
           "task 10 is at phase promote, past the last safe point to abort (catch_up): let it "
           "finish");
    CU_ASSERT_EQUAL(memcmp(&before->tasks, &s->tasks, sizeof(s->tasks)), 0);
    CU_ASSERT_EQUAL(t->status, CTL_TASK_RUNNING);
    /* a drain: the node is active again */
    uint64_t d = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 5, 20);
    CU_ASSERT_EQUAL(ctl_state_node(s, 5)->join_state, CTL_JOIN_LEAVING);
    expect(s, OK(ctl_cmd_task_abort(d, 21, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, 5)->join_state, CTL_JOIN_ACTIVE);
    CU_ASSERT_EQUAL(ctl_state_task(s, d)->status, CTL_TASK_FAILED);
    /* a promotion is not aborted */
    uint64_t pr = task_create(s, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 4, 22);
    expect(s, OK(ctl_cmd_task_abort(pr, 23, 0, cmd)), CTL_OUTCOME_REJECTED,
           "a controller_voter_promotion task cannot be aborted");
    CU_ASSERT_EQUAL(ctl_state_task(s, pr)->status, CTL_TASK_RUNNING);
    /* bad fields: the builder and the apply refuse them */
    CU_ASSERT_EQUAL(ctl_cmd_task_abort(CTL_U64_JSON_MAX + 1, 1, 0, cmd), CTL_EINVALID);
    expect(s, strdup("{\"op\":\"task_abort\",\"task\":0,\"now_ms\":1}"), CTL_OUTCOME_REJECTED,
           "task:");
    expect(s, strdup("{\"op\":\"task_abort\",\"now_ms\":1}"), CTL_OUTCOME_REJECTED, "task");
    free(before);
    free(s);
}

/* node_remove: only a down node that is not a controller voter, named by no active task, whose
 * groups keep a quorum of live peers without it; then a tombstone out of every group's desired
 * peers (epoch + 1, preferred leader moved), never back. Each refusal changes nothing. */
static void test_node_remove(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    const uint64_t dead = 5;
    const uint32_t with = 2; /* placement used nodes 1-3: move a replica of group 2 to node 5 */
    task_run_move(s,
                  task_create(s, CTL_TASK_REPLICA_MOVE, with,
                              ctl_state_group(s, with)->desired_peers[0], dead, 0, 1),
                  2);
    expect(s, OK(ctl_cmd_node_remove(99, 0, cmd)), CTL_OUTCOME_REJECTED, "id: node 99 is unknown");
    expect(s, OK(ctl_cmd_node_remove(1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "id: node 1 is a controller voter: demote it first");
    expect(s, OK(ctl_cmd_node_remove(dead, 0, cmd)), CTL_OUTCOME_REJECTED,
           "id: node 5 is alive, RemoveNode takes a node that is down");
    CU_ASSERT_EQUAL(ctl_cmd_node_remove(0, 0, cmd), CTL_EINVALID);
    expect(s, OK(ctl_cmd_set_node_status(dead, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    /* an active task naming it */
    const struct ctl_group *g = ctl_state_group(s, with);
    uint64_t mv =
        task_create(s, CTL_TASK_REPLICA_MOVE, with, dead, task_outsider(s, with, 0), 0, 5);
    char want[200];
    snprintf(want, sizeof(want), "id: active task %llu (replica_move) involves node 5",
             (unsigned long long)mv);
    expect(s, OK(ctl_cmd_node_remove(dead, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    expect(s, OK(ctl_cmd_task_abort(mv, 6, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    /* another peer of the group down too: no quorum of live peers is left without it */
    uint64_t other = g->desired_peers[0] != dead ? g->desired_peers[0] : g->desired_peers[1];
    expect(s, OK(ctl_cmd_set_node_status(other, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    snprintf(want, sizeof(want),
             "id: without node 5 group %u keeps 1 live desired peers of 3, below a quorum of 2",
             with);
    expect(s, OK(ctl_cmd_node_remove(dead, 0, cmd)), CTL_OUTCOME_REJECTED, want);
    expect(s, OK(ctl_cmd_set_node_status(other, CTL_STATUS_ALIVE, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    expect(s, OK(ctl_cmd_node_remove(dead, s->revision + 9, cmd)), CTL_OUTCOME_REJECTED,
           "stale expected_revision");
    /* removed: out of every group, epochs + 1, preferred leaders elsewhere */
    struct ctl_state *before = malloc(sizeof(*before));
    *before = *s;
    expect(s, OK(ctl_cmd_node_remove(dead, s->revision, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, dead)->join_state, CTL_JOIN_REMOVED);
    for (uint32_t i = 0; i < s->n_groups; i++) {
        const struct ctl_group *a = &before->groups[i], *b = &s->groups[i];
        bool had = false;
        for (uint32_t k = 0; k < a->n_peers; k++) {
            had |= a->desired_peers[k] == dead;
        }
        for (uint32_t k = 0; k < b->n_peers; k++) {
            CU_ASSERT_NOT_EQUAL(b->desired_peers[k], dead);
        }
        CU_ASSERT_EQUAL(b->n_peers, a->n_peers - (had ? 1 : 0));
        CU_ASSERT_EQUAL(b->config_epoch, a->config_epoch + (had ? 1 : 0));
        CU_ASSERT_NOT_EQUAL(b->preferred_leader, dead);
    }
    CU_ASSERT_EQUAL(ctl_state_validate(s, NULL, 0), CTL_OK);
    /* a tombstone: never removed twice, never joined or activated again */
    expect(s, OK(ctl_cmd_node_remove(dead, 0, cmd)), CTL_OUTCOME_REJECTED,
           "id: node 5 is removed already (a tombstone; its id is never reused)");
    expect(s, OK(ctl_cmd_activate_node(dead, 0, cmd)), CTL_OUTCOME_REJECTED, "node 5 is removed");
    expect(s, OK(ctl_cmd_join_node(dead, "10.0.0.99:7700", NULL, 0, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node 5 already joined with another address");
    free(before);
    free(s);
}

/* controller_voter_demote: a voter loses the role (keeping its data role); unknown nodes,
 * non-voters, the last voter and a demotion during a promotion are refused, changing nothing;
 * a demoted voter can then be drained. */
static void test_demote(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    expect(s, OK(ctl_cmd_controller_voter_demote(99, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 99 is unknown");
    expect(s, OK(ctl_cmd_controller_voter_demote(4, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 4 is not a controller voter");
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(0, 0, cmd), CTL_EINVALID);
    uint64_t pr = task_create(s, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 4, 1);
    expect(s, OK(ctl_cmd_controller_voter_demote(3, 0, cmd)), CTL_OUTCOME_REJECTED, "is active");
    expect(s, OK(ctl_cmd_task_fail(pr, 1, 0, "x", 2, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    struct ctl_task_spec drain = {CTL_TASK_NODE_DRAIN, 0, 0, 0, 3};
    expect(s, OK(ctl_cmd_task_create(&drain, 3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 3 is a controller voter: demote it first");
    expect(s, OK(ctl_cmd_controller_voter_demote(3, s->revision + 1, cmd)), CTL_OUTCOME_REJECTED,
           "stale expected_revision");
    expect(s, OK(ctl_cmd_controller_voter_demote(3, s->revision, cmd)), CTL_OUTCOME_CHANGED, "");
    const struct ctl_node *n3 = ctl_state_node(s, 3);
    CU_ASSERT_EQUAL(n3->roles, CTL_ROLE_DATA);
    CU_ASSERT_EQUAL(n3->join_state, CTL_JOIN_ACTIVE);
    expect(s, OK(ctl_cmd_controller_voter_demote(3, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 3 is not a controller voter");
    expect(s, OK(ctl_cmd_task_create(&drain, 4, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_controller_voter_demote(2, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_controller_voter_demote(1, 0, cmd)), CTL_OUTCOME_REJECTED,
           "node: node 1 is the only controller voter");
    free(s);
}

/* ctl_repair_plan: a node down and silent for down_after_ms gets its replicas moved to the
 * least loaded (per weight) alive node outside each group, one move per group, within the move
 * budget, none for a busy group or one without a quorum of live peers (listed as lost). */
static void test_repair_plan(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    struct ctl_repair_plan *p = malloc(sizeof(*p));
    const uint64_t dead = 5, after = 5000;
    task_run_move(s,
                  task_create(s, CTL_TASK_REPLICA_MOVE, 2, ctl_state_group(s, 2)->desired_peers[0],
                              dead, 0, 1),
                  2);
    expect(s, OK(ctl_cmd_health_report(dead, 1000, 2000, 0, cmd)), CTL_OUTCOME_UPDATED, "");
    ctl_repair_plan(s, 1000 + after, after, 2, p); /* alive: nothing */
    CU_ASSERT_EQUAL(p->n_moves + p->n_lost + p->n_waiting, 0);
    expect(s, OK(ctl_cmd_set_node_status(dead, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    ctl_repair_plan(s, 1000 + after - 1, after, 2, p); /* not silent long enough */
    CU_ASSERT_EQUAL(p->n_moves, 0);
    ctl_repair_plan(s, 1000 + after, 0, 2, p); /* 0: never */
    CU_ASSERT_EQUAL(p->n_moves, 0);
    ctl_repair_plan(s, 1000 + after, after, 2, p);
    CU_ASSERT_EQUAL_FATAL(p->n_moves, 1);
    CU_ASSERT_EQUAL(p->moves[0].group, 2);
    CU_ASSERT_EQUAL(p->moves[0].source, dead);
    CU_ASSERT_EQUAL(p->moves[0].target, 4); /* no replica yet: 0 per weight */
    CU_ASSERT_EQUAL(p->n_lost, 0);
    /* zones: node 4 is in the zone of a live peer of group 2, so a node in another zone takes
     * the replica although it holds more; with no zone left free, the least loaded again */
    const struct ctl_group *gz = ctl_state_group(s, 2);
    uint64_t live = gz->desired_peers[0] != dead ? gz->desired_peers[0] : gz->desired_peers[1];
    expect(s, OK(ctl_cmd_node_zone(live, "z1", cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_node_zone(4, "z1", cmd)), CTL_OUTCOME_CHANGED, "");
    ctl_repair_plan(s, 1000 + after, after, 2, p);
    CU_ASSERT_EQUAL_FATAL(p->n_moves, 1);
    CU_ASSERT_NOT_EQUAL(p->moves[0].target, 4);
    for (uint32_t k = 0; k < gz->n_peers; k++)
        CU_ASSERT_NOT_EQUAL(p->moves[0].target, gz->desired_peers[k]);
    for (uint64_t id = 1; id <= 5; id++) { /* every node in z1: no zone is free */
        char *c = task_built(ctl_cmd_node_zone(id, "z1", cmd), cmd);
        struct ctl_result res;
        ctl_test_apply(s, c, &res);
        ctl_free(c);
    }
    ctl_repair_plan(s, 1000 + after, after, 2, p);
    CU_ASSERT_EQUAL_FATAL(p->n_moves, 1);
    CU_ASSERT_EQUAL(p->moves[0].target, 4);
    for (uint64_t id = 1; id <= 5; id++) {
        char *c = task_built(ctl_cmd_node_zone(id, "", cmd), cmd);
        struct ctl_result res;
        ctl_test_apply(s, c, &res);
        ctl_free(c);
    }
    /* the budget counts active moves; a busy group waits */
    uint64_t other =
        task_create(s, CTL_TASK_REPLICA_MOVE, 1, ctl_state_group(s, 1)->desired_peers[0], 4, 0, 3);
    ctl_repair_plan(s, 1000 + after, after, 1, p);
    CU_ASSERT_EQUAL(p->n_moves, 0);
    CU_ASSERT_EQUAL(p->n_waiting, 1);
    expect(s, OK(ctl_cmd_task_abort(other, 4, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, 2, 0, dead, 0, 5);
    ctl_repair_plan(s, 1000 + after, after, 2, p);
    CU_ASSERT_EQUAL(p->n_moves, 0);
    CU_ASSERT_EQUAL(p->n_waiting, 1);
    expect(s, OK(ctl_cmd_task_abort(lt, 6, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    /* the plan is an ordinary move the controller takes */
    ctl_repair_plan(s, 1000 + after, after, 2, p);
    CU_ASSERT_EQUAL_FATAL(p->n_moves, 1);
    struct ctl_task_spec spec = {CTL_TASK_REPLICA_MOVE, p->moves[0].group, p->moves[0].source,
                                 p->moves[0].target, 0};
    struct ctl_state *copy = malloc(sizeof(*copy));
    *copy = *s;
    expect(copy, OK(ctl_cmd_task_create(&spec, 7, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    free(copy);
    /* a second peer of group 2 down: no quorum of live peers, reported and never moved */
    const struct ctl_group *g2 = ctl_state_group(s, 2);
    uint64_t peer = g2->desired_peers[0] != dead ? g2->desired_peers[0] : g2->desired_peers[1];
    expect(s, OK(ctl_cmd_set_node_status(peer, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    ctl_repair_plan(s, 1000 + after, after, 2, p);
    for (uint32_t i = 0; i < p->n_moves; i++) {
        CU_ASSERT_NOT_EQUAL(p->moves[i].group, 2); /* the other down peer's groups may move */
    }
    CU_ASSERT_TRUE(p->n_lost >= 1);
    bool listed = false;
    for (uint32_t i = 0; i < p->n_lost; i++) {
        listed |= p->lost[i] == 2;
    }
    CU_ASSERT_TRUE(listed);
    CU_ASSERT_FALSE(ctl_group_has_quorum(s, g2));
    free(p);
    free(s);
}

/* A retry finds the node it was about gone: refused. */
static void test_retry_after_target_removed(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    uint64_t pr = task_create(s, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 4, 1);
    expect(s, OK(ctl_cmd_task_fail(pr, 1, 0, "learner: refused", 2, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    uint64_t mv =
        task_create(s, CTL_TASK_REPLICA_MOVE, 1, ctl_state_group(s, 1)->desired_peers[0], 5, 0, 3);
    expect(s, OK(ctl_cmd_task_fail(mv, 1, 0, "learner: refused", 4, 0, cmd)), CTL_OUTCOME_CHANGED,
           "");
    for (uint64_t node = 4; node <= 5; node++) {
        uint64_t d = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, node, 5);
        expect(s, drain_cmd(d, 0, 0, 0, s->n_groups, 6), CTL_OUTCOME_CHANGED, "");
        CU_ASSERT_EQUAL(ctl_state_node(s, node)->join_state, CTL_JOIN_REMOVED);
    }
    expect(s, OK(ctl_cmd_task_retry(pr, 7, 0, cmd)), CTL_OUTCOME_REJECTED,
           "target node 4 is removed now; create a new task");
    expect(s, OK(ctl_cmd_task_retry(mv, 7, 0, cmd)), CTL_OUTCOME_REJECTED,
           "target node 5 is removed now; create a new task");
    free(s);
}

/* History is bounded: a full list evicts the oldest done task, then the oldest failed one;
 * a list full of active tasks refuses new ones. */
static void test_eviction(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd[1];
    uint64_t first = s->next_task_id;
    for (uint32_t i = 0; i < CTL_TASKS_MAX; i++) {
        uint32_t gi = 1 + i % 4;
        const struct ctl_group *g = ctl_state_group(s, gi);
        uint64_t to = g->desired_peers[i % g->n_peers];
        uint64_t id = task_create(s, CTL_TASK_LEADER_TRANSFER, gi, 0, to, 0, 100 + i);
        if (i % 3 == 0) {
            expect(s, OK(ctl_cmd_task_fail(id, 1, 0, "no leader", 100 + i, 0, cmd)),
                   CTL_OUTCOME_CHANGED, "");
        } else {
            struct ctl_task_proof p = task_proof(g->desired_peers, g->n_peers, NULL, 0, to, 1, 1);
            expect(s, task_advance_cmd(s, id, &p, 100 + i), CTL_OUTCOME_CHANGED, "");
        }
    }
    CU_ASSERT_EQUAL(s->n_tasks, CTL_TASKS_MAX);
    /* first (failed) stays; first + 1 is the oldest done task and goes. */
    uint64_t id = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 5, 500);
    CU_ASSERT_EQUAL(s->n_tasks, CTL_TASKS_MAX);
    CU_ASSERT_PTR_NOT_NULL(ctl_state_task(s, first));
    CU_ASSERT_PTR_NULL(ctl_state_task(s, first + 1));
    CU_ASSERT_PTR_NOT_NULL(ctl_state_task(s, first + 2));
    CU_ASSERT_PTR_NOT_NULL(ctl_state_task(s, id));
    CU_ASSERT_EQUAL(s->tasks[CTL_TASKS_MAX - 1].id, id);
    free(s);

    /* 64 groups: 63 active transfers and one failed task; the failed one is evicted, then the
     * list is full of active tasks. */
    s = task_fixture(CTL_GROUPS_MAX);
    first = s->next_task_id;
    for (uint32_t gi = 1; gi <= CTL_GROUPS_MAX; gi++) {
        const struct ctl_group *g = ctl_state_group(s, gi);
        uint64_t tid = task_create(s, CTL_TASK_LEADER_TRANSFER, gi, 0, g->desired_peers[0], 0, gi);
        if (gi == 10) {
            expect(s, OK(ctl_cmd_task_fail(tid, 1, 0, "boom", gi, 0, cmd)), CTL_OUTCOME_CHANGED,
                   "");
        }
    }
    id = task_create(s, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 4, 900);
    CU_ASSERT_PTR_NULL(ctl_state_task(s, first + 9));
    CU_ASSERT_PTR_NOT_NULL(ctl_state_task(s, first + 8));
    struct ctl_task_spec spec = {CTL_TASK_NODE_DRAIN, 0, 0, 0, 5};
    expect(s, OK(ctl_cmd_task_create(&spec, 901, 0, cmd)), CTL_OUTCOME_REJECTED,
           "tasks: all 64 are active (CTL_TASKS_MAX), wait for one to finish");
    CU_ASSERT_EQUAL(ctl_state_node(s, 5)->join_state, CTL_JOIN_ACTIVE); /* nothing half-applied */
    free(s);
}

void ctl_test_add_task(void)
{
    CU_pSuite s = CU_add_suite("controller tasks", NULL, NULL);
    CU_add_test(s, "phase names", test_phase_names);
    CU_add_test(s, "replica_move: happy path, state at each phase", test_replica_move_happy_path);
    CU_add_test(s, "replica_move: create checks", test_replica_move_create_rejects);
    CU_add_test(s, "replica_move: every wrong proof is rejected", test_replica_move_wrong_proofs);
    CU_add_test(s, "fences: stale epoch/attempt/phase/group/status are noops", test_fences);
    CU_add_test(s, "leader_transfer", test_leader_transfer);
    CU_add_test(s, "controller_voter_promotion", test_voter_promotion);
    CU_add_test(s, "node_drain to a tombstone", test_node_drain);
    CU_add_test(s, "task_fail and task_retry", test_fail_and_retry);
    CU_add_test(s, "task_abort", test_abort);
    CU_add_test(s, "node_remove", test_node_remove);
    CU_add_test(s, "ctl_repair_plan", test_repair_plan);
    CU_add_test(s, "controller_voter_demote", test_demote);
    CU_add_test(s, "task_fail error cut at a UTF-8 boundary", test_fail_error_builder);
    CU_add_test(s, "task_retry refuses a removed target", test_retry_after_target_removed);
    CU_add_test(s, "history eviction and the active bound", test_eviction);
    ctl_test_add_task_codec();
    ctl_test_add_migration();
}
