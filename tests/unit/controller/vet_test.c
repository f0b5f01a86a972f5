/* vet_test.c - ctl_vet: task_advance checked against the facts the controller leader observed,
 * never against the proof the command carries. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"
#include "task_test.h"

#define MAX_AGE_MS 3000
#define OBSERVER 1

/* What the fake controller leader observed, per group (0..4). */
static struct ctl_obs_group facts[5];

static void observe(void *arg, uint32_t group, struct ctl_obs_group *out)
{
    (void)arg;
    if (group < 5) {
        *out = facts[group];
    }
}

static void conf(uint32_t group, const uint64_t *voters, uint32_t nv, const uint64_t *learners,
                 uint32_t nl, uint64_t leader, uint64_t commit, uint64_t age_ms)
{
    struct ctl_obs_group *g = &facts[group];
    memset(g, 0, sizeof(*g));
    g->known = true;
    g->age_ms = age_ms;
    g->n_voters = nv;
    g->n_learners = nl;
    memcpy(g->voters, voters, nv * sizeof(uint64_t));
    if (nl > 0) {
        memcpy(g->learners, learners, nl * sizeof(uint64_t));
    }
    g->leader = leader;
    g->commit = commit;
    g->leader_applied = commit;
}

static void member(uint32_t group, uint64_t node, uint64_t match, uint64_t commit, uint64_t age_ms)
{
    struct ctl_obs_group *g = &facts[group];
    g->members[g->n_members++] = (struct ctl_obs_member){
        .node = node, .known = true, .match = match, .commit = commit, .age_ms = age_ms};
}

/* ctl_vet of cmd (freed here): want_rc, the reason (substring) for CTL_EFACT; returns the
 * rebuilt command (caller frees with ctl_free()) or NULL. */
static char *vet(const struct ctl_state *s, char *cmd, int want_rc, const char *reason)
{
    char *out = NULL, why[512];
    int rc =
        ctl_vet(s, cmd, strlen(cmd), observe, NULL, OBSERVER, MAX_AGE_MS, &out, why, sizeof(why));
    if (rc != want_rc || (reason != NULL && strstr(why, reason) == NULL)) {
        printf("\n  ctl_vet: rc %d want %d, why \"%s\", want \"%s\"\n", rc, want_rc, why,
               reason ? reason : "");
    }
    CU_ASSERT_EQUAL(rc, want_rc);
    if (reason != NULL) {
        CU_ASSERT_PTR_NOT_NULL(strstr(why, reason));
    }
    if (rc != CTL_OK) {
        CU_ASSERT_PTR_NULL(out);
    }
    ctl_free(cmd);
    return out;
}

/* A forged proof (the target holds everything) of each move phase is refused unless the observed
 * facts say so; what passes is rebuilt with the observed proof, which ctl_apply then checks. */
static void test_replica_move(void)
{
    memset(facts, 0, sizeof(facts));
    struct ctl_state *s = task_fixture(4);
    const struct ctl_group *g = ctl_state_group(s, 1);
    uint64_t src = g->preferred_leader, dst = task_outsider(s, 1, 0), peers[CTL_REPLICAS_MAX];
    uint32_t n = g->n_peers;
    memcpy(peers, g->desired_peers, n * sizeof(peers[0]));
    uint64_t id = task_create(s, CTL_TASK_REPLICA_MOVE, 1, src, dst, 0, 1000);
    const struct ctl_task *t = ctl_state_task(s, id);
    uint64_t revision = s->revision;
    struct ctl_task_proof forged = task_proof(peers, n, &dst, 1, src, 57, 57);

    /* Nothing observed yet, then only a stale view. */
    vet(s, task_advance_cmd(s, id, &forged, 1100), CTL_EFACT,
        "group 1: no configuration observed by the controller leader (node 1)");
    conf(1, peers, n, NULL, 0, src, 57, MAX_AGE_MS + 1);
    vet(s, task_advance_cmd(s, id, &forged, 1100), CTL_EFACT, "ms ago, older than 3000 ms");
    /* Fresh, but the target is not a learner as the leader sees it. */
    conf(1, peers, n, NULL, 0, src, 57, 400);
    vet(s, task_advance_cmd(s, id, &forged, 1100), CTL_EFACT, "is not a learner");
    CU_ASSERT_EQUAL(s->revision, revision);

    /* The target is a learner: the command is rebuilt with the observed proof and applies. */
    conf(1, peers, n, &dst, 1, src, 57, 400);
    struct ctl_task_proof lie = task_proof(peers, n, NULL, 0, 99, 1, 1); /* ignored */
    char *rebuilt = vet(s, task_advance_cmd(s, id, &lie, 1100), CTL_OK, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rebuilt);
    ctl_test_check(s, rebuilt, CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_CATCH_UP);
    CU_ASSERT_EQUAL(t->proof.leader, src); /* the observed leader, not 99 */
    CU_ASSERT_EQUAL(t->proof.n_learners, 1);

    /* catch_up: the forged "target_match 10^6" is not what the leader saw. */
    forged = task_proof(peers, n, &dst, 1, src, 1000000, 1000000);
    vet(s, task_advance_cmd(s, id, &forged, 1200), CTL_EFACT,
        "no progress of it observed by the controller leader");
    member(1, dst, 12, 57, 400);
    char want[200];
    snprintf(want, sizeof(want),
             "group 1: node %llu applied 12 < leader commit 57 as observed by the controller "
             "leader (node 1) 400 ms ago",
             (unsigned long long)dst);
    vet(s, task_advance_cmd(s, id, &forged, 1200), CTL_EFACT, want);
    facts[1].members[0] = (struct ctl_obs_member){
        .node = dst, .known = true, .match = 57, .commit = 57, .age_ms = MAX_AGE_MS + 5};
    vet(s, task_advance_cmd(s, id, &forged, 1200), CTL_EFACT, "progress last observed");
    facts[1].members[0].age_ms = 300;
    rebuilt = vet(s, task_advance_cmd(s, id, &forged, 1200), CTL_OK, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rebuilt);
    ctl_test_check(s, rebuilt, CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->proof.target_match, 57);
    CU_ASSERT_EQUAL(t->proof.commit, 57);

    /* promote: still a learner as observed: refused with the facts, nothing proposed. */
    forged = task_proof(peers, n, NULL, 0, src, 60, 60);
    forged.voters[forged.n_voters++] = dst;
    revision = s->revision;
    vet(s, task_advance_cmd(s, id, &forged, 1300), CTL_EFACT, "is not a voter");
    CU_ASSERT_EQUAL(s->revision, revision);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MOVE_PROMOTE);

    /* A stale fence passes untouched: ctl_apply answers it as a noop. */
    struct ctl_task_proof any = {0};
    char *stale = NULL;
    CU_ASSERT_EQUAL(
        ctl_cmd_task_advance(id, 1, 1, 1, CTL_PHASE_MOVE_ADD_LEARNER, &any, 0, 0, 5, 0, &stale),
        CTL_OK);
    CU_ASSERT_PTR_NULL(vet(s, stale, CTL_OK, NULL));
    /* Other commands pass untouched. */
    char *hr = NULL;
    CU_ASSERT_EQUAL(ctl_cmd_health_report(2, 5, 1000, 0, &hr), CTL_OK);
    CU_ASSERT_PTR_NULL(vet(s, hr, CTL_OK, NULL));
    free(s);
}

/* node_remove: each group the node is a desired peer of needs a fresh observed leader other than
 * the node; the other groups are not looked at. */
static void test_node_remove_facts(void)
{
    memset(facts, 0, sizeof(facts));
    struct ctl_state *s = task_fixture(4);
    uint64_t node = 5;
    uint32_t with = 0, without = 0;
    /* placement used nodes 1-3: move a replica of group 2 to node 5 */
    task_run_move(s,
                  task_create(s, CTL_TASK_REPLICA_MOVE, 2, ctl_state_group(s, 2)->desired_peers[0],
                              node, 0, 1),
                  2);
    for (uint32_t gid = 1; gid <= 4; gid++) {
        const struct ctl_group *g = ctl_state_group(s, gid);
        bool has = false;
        for (uint32_t k = 0; k < g->n_peers; k++) {
            has |= g->desired_peers[k] == node;
        }
        with = has && with == 0 ? gid : with;
        without = !has && without == 0 ? gid : without;
        uint64_t leader = g->desired_peers[0] != node ? g->desired_peers[0] : g->desired_peers[1];
        conf(gid, g->desired_peers, g->n_peers, NULL, 0, leader, 10, 100);
    }
    CU_ASSERT_FATAL(with != 0);
    char *cmd = NULL;
    CU_ASSERT_EQUAL(ctl_cmd_node_remove(node, 0, &cmd), CTL_OK);
    CU_ASSERT_PTR_NULL(vet(s, cmd, CTL_OK, NULL)); /* proposed as it is */
    const struct ctl_group *g = ctl_state_group(s, with);
    conf(with, g->desired_peers, g->n_peers, NULL, 0, node, 10, 100); /* it leads?! */
    CU_ASSERT_EQUAL(ctl_cmd_node_remove(node, 0, &cmd), CTL_OK);
    CU_ASSERT_PTR_NULL(vet(s, cmd, CTL_OK, NULL)); /* alive: ctl_apply refuses it, saying so */
    ((struct ctl_node *)ctl_state_node(s, node))->status = CTL_STATUS_DOWN;
    CU_ASSERT_EQUAL(ctl_cmd_node_remove(node, 0, &cmd), CTL_OK);
    char want[160];
    snprintf(want, sizeof(want), "group %u: no leader other than node 5 as observed", with);
    vet(s, cmd, CTL_EFACT, want);
    conf(with, g->desired_peers, g->n_peers, NULL, 0, 0, 10, 100); /* no leader */
    CU_ASSERT_EQUAL(ctl_cmd_node_remove(node, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "its quorum without node 5 is not proven");
    facts[with].age_ms = MAX_AGE_MS + 1; /* stale */
    CU_ASSERT_EQUAL(ctl_cmd_node_remove(node, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "older than");
    if (without != 0) {
        facts[without].known = false; /* not looked at */
        conf(with, g->desired_peers, g->n_peers, NULL, 0,
             g->desired_peers[0] == node ? g->desired_peers[1] : g->desired_peers[0], 10, 100);
        CU_ASSERT_EQUAL(ctl_cmd_node_remove(node, 0, &cmd), CTL_OK);
        CU_ASSERT_PTR_NULL(vet(s, cmd, CTL_OK, NULL));
    }
    free(s);
}

/* controller_voter_demote: the controller leader's group 0 must show the node a voter and,
 * without it, a quorum of voters that are the leader or alive and caught up. */
static void test_demote_facts(void)
{
    memset(facts, 0, sizeof(facts));
    struct ctl_state *s = task_fixture(4);
    uint64_t voters[] = {1, 2, 3}, two[] = {1, 2};
    char *cmd = NULL;
    conf(0, voters, 3, NULL, 0, OBSERVER, 50, 100);
    member(0, 2, 50, 50, 100);
    member(0, 3, 50, 50, 100);
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(3, 0, &cmd), CTL_OK);
    CU_ASSERT_PTR_NULL(vet(s, cmd, CTL_OK, NULL)); /* 1 (leader) and 2 caught up: 2 of 3 */
    facts[0].members[0].match = 40;                /* node 2 behind */
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(3, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT,
        "group 0: without node 3, 1 voters are alive and caught up, below a "
        "quorum of 2 of the 3 voters");
    facts[0].members[0].match = 50;
    ((struct ctl_node *)ctl_state_node(s, 2))->status = CTL_STATUS_SUSPECT; /* not alive */
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(3, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "1 voters are alive and caught up");
    ((struct ctl_node *)ctl_state_node(s, 2))->status = CTL_STATUS_ALIVE;
    conf(0, two, 2, NULL, 0, OBSERVER, 50, 100); /* 3 is no voter of the live group 0 */
    member(0, 2, 50, 50, 100);
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(3, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "group 0: node 3 is not a voter as observed");
    facts[0].known = false;
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(2, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "group 0: no configuration observed");
    CU_ASSERT_EQUAL(ctl_cmd_controller_voter_demote(4, 0, &cmd), CTL_OK); /* not a voter: */
    CU_ASSERT_PTR_NULL(vet(s, cmd, CTL_OK, NULL)); /* left to ctl_apply, which says so */
    free(s);
}

/* node_drain: done only when no observed configuration holds the node and it leads nothing. */
static void test_drain(void)
{
    memset(facts, 0, sizeof(facts));
    struct ctl_state *s = task_fixture(4);
    uint64_t node = 5;
    /* Move node 5's replicas away in the intent, so only the live facts stand in the way. */
    for (uint32_t i = 0; i < s->n_groups; i++) {
        struct ctl_group *g = &s->groups[i];
        for (uint32_t k = 0; k < g->n_peers; k++) {
            if (g->desired_peers[k] == node) {
                memmove(&g->desired_peers[k], &g->desired_peers[k + 1],
                        (g->n_peers - k - 1) * sizeof(uint64_t));
                g->n_peers--;
                if (g->preferred_leader == node) {
                    g->preferred_leader = g->desired_peers[0];
                }
            }
        }
    }
    uint64_t id = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, node, 1000);
    for (uint32_t gid = 1; gid <= 4; gid++) {
        const struct ctl_group *g = ctl_state_group(s, gid);
        conf(gid, g->desired_peers, g->n_peers, NULL, 0, g->desired_peers[0], 10, 100);
    }
    uint64_t voters3[CTL_REPLICAS_MAX];
    const struct ctl_group *g3 = ctl_state_group(s, 3);
    memcpy(voters3, g3->desired_peers, g3->n_peers * sizeof(uint64_t));
    conf(3, voters3, g3->n_peers, &node, 1, voters3[0], 10, 100); /* still a learner of 3 */
    /* The forged command claims nothing is left; the facts say group 3 holds node 5. */
    char *cmd = NULL;
    struct ctl_drain_facts zero = {0, 0, 0, 4};
    CU_ASSERT_EQUAL(ctl_cmd_drain_advance(id, 1, &zero, 1100, 0, &cmd), CTL_OK);
    uint64_t revision = s->revision;
    vet(s, cmd, CTL_EFACT,
        "node 5: observed by the controller leader (node 1) in 4 groups: 1 replicas (groups [3]), "
        "0 leaderships (groups []), 0 active tasks ([]); a tombstone needs 0, 0 and 0");
    CU_ASSERT_EQUAL(s->revision, revision);
    conf(3, voters3, g3->n_peers, NULL, 0, node, 10, 100); /* out, but still leading?! */
    conf(1, ctl_state_group(s, 1)->desired_peers, ctl_state_group(s, 1)->n_peers, &node, 1, node,
         10, 100); /* and a learner leading group 1 */
    CU_ASSERT_EQUAL(ctl_cmd_drain_advance(id, 1, &zero, 1100, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "1 replicas (groups [1]), 2 leaderships (groups [1,3])");
    const struct ctl_group *g1 = ctl_state_group(s, 1);
    conf(1, g1->desired_peers, g1->n_peers, NULL, 0, g1->desired_peers[0], 10, 100);
    /* the generic builder's command is rebuilt as well: its zeros are never trusted */
    CU_ASSERT_EQUAL(ctl_cmd_task_advance(id, 0, 0, 1, 0, NULL, 0, 0, 1100, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "0 replicas (groups []), 1 leaderships (groups [3])");
    facts[2].known = false;
    conf(3, voters3, g3->n_peers, NULL, 0, voters3[0], 10, 100);
    CU_ASSERT_EQUAL(ctl_cmd_drain_advance(id, 1, &zero, 1100, 0, &cmd), CTL_OK);
    vet(s, cmd, CTL_EFACT, "group 2: no configuration observed");
    const struct ctl_group *g2 = ctl_state_group(s, 2);
    conf(2, g2->desired_peers, g2->n_peers, NULL, 0, g2->desired_peers[0], 10, 100);
    /* an active task naming node 5 (written by hand) is counted too */
    struct ctl_state *busy = malloc(sizeof(*busy));
    *busy = *s;
    busy->tasks[busy->n_tasks++] = (struct ctl_task){.id = busy->next_task_id++,
                                                     .kind = CTL_TASK_LEADER_TRANSFER,
                                                     .group = 1,
                                                     .config_epoch = g1->config_epoch,
                                                     .attempt = 1,
                                                     .status = CTL_TASK_RUNNING,
                                                     .n_participants = 1,
                                                     .participants = {5},
                                                     .target = g1->desired_peers[0]};
    CU_ASSERT_EQUAL(ctl_cmd_drain_advance(id, 1, &zero, 1100, 0, &cmd), CTL_OK);
    vet(busy, cmd, CTL_EFACT, "0 replicas (groups []), 0 leaderships (groups []), 1 active tasks");
    free(busy);
    CU_ASSERT_EQUAL(ctl_cmd_drain_advance(id, 1, &zero, 1100, 0, &cmd), CTL_OK);
    char *rebuilt = vet(s, cmd, CTL_OK, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rebuilt);
    CU_ASSERT_PTR_NOT_NULL(strstr(rebuilt, "\"groups_observed\":4"));
    CU_ASSERT_PTR_NOT_NULL(strstr(rebuilt, "\"tasks_on_node\":0"));
    ctl_test_check(s, rebuilt, CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_state_node(s, node)->join_state, CTL_JOIN_REMOVED);
    free(s);
}

/* hash_slot_migration: each phase against the observed leader's applied hash-slot state. */
static void test_migration(void)
{
    memset(facts, 0, sizeof(facts));
    struct ctl_state *s = task_fixture(4);
    struct ctl_task_spec spec = {.kind = CTL_TASK_HASH_SLOT_MIGRATION, .to_group = 2};
    spec.hash_slots[0] = 0x01; /* hash slot 0: group 1 */
    char *cmd = NULL;
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 10, 0, &cmd), CTL_OK);
    ctl_test_check(s, cmd, CTL_OUTCOME_CHANGED, "");
    uint64_t id = s->next_task_id - 1;
    const struct ctl_group *g1 = ctl_state_group(s, 1);
    struct ctl_task_proof claim = {.config_index = 900, .leader = 3};
    vet(s, task_advance_cmd(s, id, &claim, 11), CTL_EFACT, "group 1: no configuration observed");
    conf(1, g1->desired_peers, g1->n_peers, NULL, 0, 2, 40, 200);
    facts[1].leader = 0;
    vet(s, task_advance_cmd(s, id, &claim, 11), CTL_EFACT, "group 1: no leader");
    conf(1, g1->desired_peers, g1->n_peers, NULL, 0, 2, 950, 200);
    /* What the fence changed is the source leader's hash-slot state (the claimed index is not
     * used: the proof records the leader's applied index). */
    vet(s, task_advance_cmd(s, id, &claim, 11), CTL_EFACT,
        "group 1: hash-slot state of leader 2 not observed");
    facts[1].slots_known = true;
    facts[1].owned[0] = 0xFF;
    vet(s, task_advance_cmd(s, id, &claim, 11), CTL_EFACT,
        "group 1: leader 2 has not fenced hash slot 0 as observed by the controller leader");
    facts[1].fenced[0] = 0x01;
    facts[1].migration_task = id + 1;
    vet(s, task_advance_cmd(s, id, &claim, 11), CTL_EFACT, "applied migration task");
    facts[1].migration_task = id;
    char *rebuilt = vet(s, task_advance_cmd(s, id, &claim, 11), CTL_OK, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rebuilt);
    ctl_test_check(s, rebuilt, CTL_OUTCOME_CHANGED, "");
    const struct ctl_task *t = ctl_state_task(s, id);
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_COPY);
    CU_ASSERT_EQUAL(t->proof.leader, 2);         /* observed, not the claimed 3 */
    CU_ASSERT_EQUAL(t->proof.config_index, 950); /* observed applied, not the claimed 900 */
    /* copy: facts of to_group are needed, and it must own the slot (accepted) */
    vet(s, task_advance_cmd(s, id, &claim, 12), CTL_EFACT, "group 2: no configuration observed");
    const struct ctl_group *g2 = ctl_state_group(s, 2);
    claim.config_index = 30;
    conf(2, g2->desired_peers, g2->n_peers, NULL, 0, 4, 31, 100);
    facts[2].slots_known = true;
    facts[2].migration_task = id;
    vet(s, task_advance_cmd(s, id, &claim, 12), CTL_EFACT,
        "group 2: leader 4 does not own (the accept entry has not applied there) hash slot 0");
    facts[2].owned[0] = 0x01;
    rebuilt = vet(s, task_advance_cmd(s, id, &claim, 12), CTL_OK, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rebuilt);
    ctl_test_check(s, rebuilt, CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->phase_index, CTL_PHASE_MIGRATION_RELEASE);
    /* release: the source must hold the slot no more */
    claim.config_index = 960;
    facts[1].leader_applied = 960;
    vet(s, task_advance_cmd(s, id, &claim, 13), CTL_EFACT,
        "group 1: leader 2 still owns hash slot 0");
    facts[1].owned[0] = 0xFE;
    rebuilt = vet(s, task_advance_cmd(s, id, &claim, 13), CTL_OK, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(rebuilt);
    ctl_test_check(s, rebuilt, CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(t->status, CTL_TASK_DONE);
    free(s);
}

void ctl_test_add_vet(void)
{
    CU_pSuite s =
        CU_add_suite("controller ctl_vet (facts the controller leader observed)", NULL, NULL);
    CU_add_test(s, "replica_move: forged proofs refused, observed ones rebuilt", test_replica_move);
    CU_add_test(s, "node_drain: observed configurations and leaders", test_drain);
    CU_add_test(s, "node_remove: an observed leader other than the node", test_node_remove_facts);
    CU_add_test(s, "controller_voter_demote: a live quorum without the node", test_demote_facts);
    CU_add_test(s, "hash_slot_migration: the observed leader's hash-slot state", test_migration);
}
