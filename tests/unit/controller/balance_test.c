/* balance_test.c - ctl_balance_plan(): weighted shares, convergence through the real task FSM,
 * the move budget, one move per group, zones, busy groups and groups without a live quorum. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "ctl_test.h"
#include "task_test.h"

#define expect ctl_test_check
#define OK(expr) task_built((expr), cmd)

static uint32_t held_by(const struct ctl_state *s, uint64_t node)
{
    uint32_t n = 0;
    for (uint32_t k = 0; k < s->n_groups; k++) {
        for (uint32_t p = 0; p < s->groups[k].n_peers; p++) {
            n += s->groups[k].desired_peers[p] == node;
        }
    }
    return n;
}

/* Every eligible node within 1 replica of total * weight / wsum (exact integers). */
static bool within_one(const struct ctl_state *s)
{
    int64_t total = 0, wsum = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        total += held_by(s, s->nodes[i].id);
        wsum += s->nodes[i].weight;
    }
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        int64_t e = (int64_t)held_by(s, s->nodes[i].id) * wsum - total * s->nodes[i].weight;
        if (e > wsum || e < -wsum) {
            return false;
        }
    }
    return true;
}

static bool peer_of(const struct ctl_state *s, uint32_t group, uint64_t node)
{
    const struct ctl_group *g = ctl_state_group(s, group);
    for (uint32_t p = 0; p < g->n_peers; p++) {
        if (g->desired_peers[p] == node) {
            return true;
        }
    }
    return false;
}

/* Plans and runs moves through the controller FSM until the plan is empty; checks each plan's
 * budget, one move per group, zones (NULL: none) and that a move's target is outside the group.
 * Returns the number of rounds. */
static uint32_t converge(struct ctl_state *s, const char *const *zones, uint32_t max_moves)
{
    struct ctl_balance_plan *p = malloc(sizeof(*p));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    uint32_t rounds = 0;
    uint64_t now = 100;
    for (;;) {
        ctl_balance_plan(s, zones, max_moves, p);
        if (p->n_moves == 0) {
            break;
        }
        CU_ASSERT_TRUE_FATAL(++rounds < 40);
        CU_ASSERT_TRUE(p->n_moves <= max_moves);
        uint64_t ids[CTL_GROUPS_MAX];
        for (uint32_t m = 0; m < p->n_moves; m++) {
            const struct ctl_balance_move *mv = &p->moves[m];
            for (uint32_t o = 0; o < m; o++) {
                CU_ASSERT_NOT_EQUAL(p->moves[o].group, mv->group);
            }
            CU_ASSERT_TRUE(peer_of(s, mv->group, mv->source));
            CU_ASSERT_FALSE(peer_of(s, mv->group, mv->target));
            CU_ASSERT_PTR_NOT_NULL(strstr(mv->why, "share"));
            if (zones != NULL) {
                const struct ctl_group *g = ctl_state_group(s, mv->group);
                int t = -1;
                for (uint32_t i = 0; i < s->n_nodes; i++) {
                    t = s->nodes[i].id == mv->target ? (int)i : t;
                }
                for (uint32_t k = 0; k < g->n_peers; k++) {
                    for (uint32_t i = 0; i < s->n_nodes; i++) {
                        if (s->nodes[i].id == g->desired_peers[k] &&
                            g->desired_peers[k] != mv->source) {
                            CU_ASSERT_NOT_EQUAL(strcmp(zones[i], zones[t]), 0);
                        }
                    }
                }
            }
            ids[m] =
                task_create(s, CTL_TASK_REPLICA_MOVE, mv->group, mv->source, mv->target, 0, now++);
        }
        /* planned again while they run: the running moves count, nothing more within budget */
        struct ctl_balance_plan *q = malloc(sizeof(*q));
        ctl_balance_plan(s, zones, p->n_moves, q);
        CU_ASSERT_EQUAL(q->n_moves, 0);
        free(q);
        for (uint32_t m = 0; m < p->n_moves; m++) {
            task_run_move(s, ids[m], now);
            now += 10;
        }
    }
    CU_ASSERT_TRUE(p->balanced);
    free(p);
    return rounds;
}

/* The fixture's 8 groups x 3 replicas on nodes 1..3, weights set to 100, 150, 100, 100, 50 for
 * nodes 1..5 (4 and 5 joined empty). Caller frees with free(). */
static struct ctl_state *balance_fixture(void)
{
    struct ctl_state *s = task_fixture(8);
    char *cmd[1];
    const uint32_t w[] = {100, 150, 100, 100, 50};
    for (uint64_t id = 1; id <= 5; id++) {
        char *c = task_built(ctl_cmd_set_weight(id, w[id - 1], 0, cmd), cmd);
        struct ctl_result res;
        enum ctl_outcome got = ctl_test_apply(s, c, &res);
        CU_ASSERT_TRUE(got == CTL_OUTCOME_CHANGED || got == CTL_OUTCOME_NOOP);
        ctl_free(c);
    }
    return s;
}

/* The plan moves replicas until each node is within 1 of its share (4.8, 7.2, 4.8, 4.8, 2.4),
 * then plans nothing. */
static void test_balance_weighted(void)
{
    struct ctl_state *s = balance_fixture();
    struct ctl_balance_plan *p = malloc(sizeof(*p));
    ctl_balance_plan(s, NULL, 2, p);
    CU_ASSERT_EQUAL(p->total_replicas, 24);
    CU_ASSERT_EQUAL(p->total_weight, 500);
    CU_ASSERT_EQUAL_FATAL(p->n_scores, 5);
    CU_ASSERT_EQUAL(p->scores[1].node, 2);
    CU_ASSERT_EQUAL(p->scores[1].share_x10, 72);
    CU_ASSERT_EQUAL(p->scores[3].share_x10, 48);
    CU_ASSERT_EQUAL(p->scores[4].share_x10, 24);
    CU_ASSERT_EQUAL(p->scores[3].replicas, 0);
    CU_ASSERT_EQUAL(p->n_moves, 2);
    CU_ASSERT_FALSE(p->balanced);
    CU_ASSERT_FALSE(within_one(s));
    uint32_t rounds = converge(s, NULL, 2);
    CU_ASSERT_TRUE(rounds >= 2);
    CU_ASSERT_TRUE(within_one(s));
    CU_ASSERT_TRUE(held_by(s, 4) >= 4 && held_by(s, 4) <= 5);
    CU_ASSERT_TRUE(held_by(s, 5) >= 2 && held_by(s, 5) <= 3);
    CU_ASSERT_TRUE(held_by(s, 2) >= 7);
    for (uint32_t k = 0; k < s->n_groups; k++) {
        CU_ASSERT_EQUAL(s->groups[k].n_peers, 3);
    }
    ctl_balance_plan(s, NULL, 2, p); /* balanced: nothing */
    CU_ASSERT_EQUAL(p->n_moves, 0);
    CU_ASSERT_TRUE(p->balanced);
    ctl_balance_plan(s, NULL, 0, p); /* no budget: nothing */
    CU_ASSERT_EQUAL(p->n_moves, 0);
    free(p);
    free(s);
}

/* Zones a, b, c, a, c on nodes 1..5: no move puts two replicas of a group in one zone, and the
 * cluster still converges (4 takes from 1, 5 from 3). */
static void test_balance_zones(void)
{
    struct ctl_state *s = balance_fixture();
    const char *zones[] = {"a", "b", "c", "a", "c"};
    converge(s, zones, 2);
    CU_ASSERT_TRUE(within_one(s));
    for (uint32_t k = 0; k < s->n_groups; k++) {
        const struct ctl_group *g = &s->groups[k];
        for (uint32_t x = 0; x < g->n_peers; x++) {
            for (uint32_t y = x + 1; y < g->n_peers; y++) {
                CU_ASSERT_NOT_EQUAL(
                    strcmp(zones[g->desired_peers[x] - 1], zones[g->desired_peers[y] - 1]), 0);
            }
        }
    }
    /* zone b only on node 2 and node 5 in it too: 5 can take a replica only from 2 */
    struct ctl_state *t = balance_fixture();
    const char *zb[] = {"a", "b", "c", "a", "b"};
    struct ctl_balance_plan *p = malloc(sizeof(*p));
    ctl_balance_plan(t, zb, 64, p);
    for (uint32_t m = 0; m < p->n_moves; m++) {
        CU_ASSERT_FALSE(p->moves[m].target == 5 && p->moves[m].source != 2);
    }
    free(p);
    free(t);
    free(s);
}

/* Zones from the node records: nodes 1 and 2 in zone a hold a replica of every group, so each
 * group gets a move of one of them to zone c (nodes 4 and 5), run through the task FSM until the
 * plan is empty; then no group has two replicas in one zone. */
static void test_balance_zone_fix(void)
{
    struct ctl_state *s = balance_fixture();
    const char *z[] = {"a", "a", "b", "c", "c"};
    char *cmd[1];
    for (uint64_t id = 1; id <= 5; id++) {
        char *c = task_built(ctl_cmd_node_zone(id, z[id - 1], cmd), cmd);
        struct ctl_result res;
        CU_ASSERT_EQUAL(ctl_test_apply(s, c, &res), CTL_OUTCOME_CHANGED);
        ctl_free(c);
    }
    struct ctl_balance_plan *p = malloc(sizeof(*p));
    CU_ASSERT_PTR_NOT_NULL_FATAL(p);
    ctl_balance_plan(s, NULL, 64, p);
    CU_ASSERT_EQUAL(p->n_moves, 8);
    for (uint32_t m = 0; m < p->n_moves; m++) {
        CU_ASSERT_TRUE(p->moves[m].source == 1 || p->moves[m].source == 2);
        CU_ASSERT_TRUE(p->moves[m].target == 4 || p->moves[m].target == 5);
        CU_ASSERT_PTR_NOT_NULL(strstr(p->moves[m].why, "both in zone a"));
    }
    uint64_t now = 100;
    for (int round = 0; round < 40; round++) {
        ctl_balance_plan(s, NULL, 2, p);
        if (p->n_moves == 0) {
            break;
        }
        uint64_t ids[CTL_GROUPS_MAX];
        for (uint32_t m = 0; m < p->n_moves; m++) {
            ids[m] = task_create(s, CTL_TASK_REPLICA_MOVE, p->moves[m].group, p->moves[m].source,
                                 p->moves[m].target, 0, now++);
        }
        for (uint32_t m = 0; m < p->n_moves; m++) {
            task_run_move(s, ids[m], now);
            now += 10;
        }
    }
    CU_ASSERT_EQUAL(p->n_moves, 0);
    for (uint32_t k = 0; k < s->n_groups; k++) {
        const struct ctl_group *g = &s->groups[k];
        for (uint32_t x = 0; x < g->n_peers; x++) {
            for (uint32_t y = x + 1; y < g->n_peers; y++) {
                CU_ASSERT_NOT_EQUAL(strcmp(z[g->desired_peers[x] - 1], z[g->desired_peers[y] - 1]),
                                    0);
            }
        }
    }
    free(p);
    free(s);
}

/* Refusals: the budget counts running moves; a group with a task is never moved; a group whose
 * alive peers other than the source are not a quorum is never moved (the source could be the
 * only up-to-date copy); a down node gets nothing. */
static void test_balance_refusals(void)
{
    struct ctl_state *s = task_fixture(2);
    char *cmd[1];
    struct ctl_balance_plan *p = malloc(sizeof(*p));
    ctl_balance_plan(s, NULL, 2, p);
    CU_ASSERT_EQUAL(p->n_moves, 2); /* 6 replicas, shares 1.2 2.4 1.2 0.6 0.6 */
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, 1, 0,
                              ctl_state_group(s, 1)->desired_peers[0], 0, 5);
    ctl_balance_plan(s, NULL, 2, p);
    CU_ASSERT_EQUAL_FATAL(p->n_moves, 1);
    CU_ASSERT_EQUAL(p->moves[0].group, 2); /* group 1 is busy */
    expect(s, OK(ctl_cmd_task_abort(lt, 6, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    uint64_t mv = task_create(s, CTL_TASK_REPLICA_MOVE, 1, 1, 4, 0, 7);
    ctl_balance_plan(s, NULL, 1, p); /* the running move uses the budget */
    CU_ASSERT_EQUAL(p->n_moves, 0);
    ctl_balance_plan(s, NULL, 2, p);
    CU_ASSERT_EQUAL_FATAL(p->n_moves, 1);
    CU_ASSERT_EQUAL(p->moves[0].group, 2);
    CU_ASSERT_EQUAL(p->moves[0].target, 5); /* node 4 counts the running move's replica */
    expect(s, OK(ctl_cmd_task_abort(mv, 8, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    /* node 3 down: every group has it, so moving any other replica would leave one alive peer
     * besides the source (not a quorum of 3): nothing moves; node 3 is not scored */
    expect(s, OK(ctl_cmd_set_node_status(3, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    ctl_balance_plan(s, NULL, 2, p);
    CU_ASSERT_EQUAL(p->n_moves, 0);
    CU_ASSERT_EQUAL(p->n_scores, 4);
    for (uint32_t i = 0; i < p->n_scores; i++) {
        CU_ASSERT_NOT_EQUAL(p->scores[i].node, 3);
    }
    /* node 3 alive again, node 4 down and 5 leaving-like (suspect): only eligible targets */
    expect(s, OK(ctl_cmd_set_node_status(3, CTL_STATUS_ALIVE, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_set_node_status(4, CTL_STATUS_DOWN, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    expect(s, OK(ctl_cmd_set_node_status(5, CTL_STATUS_SUSPECT, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    ctl_balance_plan(s, NULL, 2, p); /* 1..3 hold 2 each, shares 1.5, 3, 1.5: 1 -> 2 would do,
                                        but no group lacks node 2 */
    CU_ASSERT_EQUAL(p->n_moves, 0);
    free(p);
    free(s);
}

/* Preferred leaders: after the replicas converged, set_preferred_leader changes (applied
 * through the FSM) until none is planned; then the counts differ by at most one, one change per
 * group per plan, every change to a desired peer; a busy group is never changed. */
static void test_balance_leaders(void)
{
    struct ctl_state *s = balance_fixture();
    char *cmd[1];
    converge(s, NULL, 2);
    struct ctl_balance_leader ch[CTL_GROUPS_MAX];
    uint32_t rounds = 0, n;
    while ((n = ctl_balance_leaders(s, 4, ch)) > 0) {
        CU_ASSERT_TRUE_FATAL(++rounds < 20);
        CU_ASSERT_TRUE(n <= 4);
        for (uint32_t i = 0; i < n; i++) {
            for (uint32_t o = 0; o < i; o++) {
                CU_ASSERT_NOT_EQUAL(ch[o].group, ch[i].group);
            }
            CU_ASSERT_EQUAL(ctl_state_group(s, ch[i].group)->preferred_leader, ch[i].from);
            CU_ASSERT_TRUE(peer_of(s, ch[i].group, ch[i].to));
            expect(s, OK(ctl_cmd_set_preferred_leader(ch[i].group, ch[i].to, 0, cmd)),
                   CTL_OUTCOME_CHANGED, "");
        }
    }
    uint32_t led[6] = {0}, lo = 99, hi = 0;
    for (uint32_t k = 0; k < s->n_groups; k++) {
        led[s->groups[k].preferred_leader]++;
    }
    for (uint32_t id = 1; id <= 5; id++) {
        lo = led[id] < lo ? led[id] : lo;
        hi = led[id] > hi ? led[id] : hi;
    }
    CU_ASSERT_TRUE(hi - lo <= 1);
    /* all on node 1 where it can be: a busy group keeps its preferred leader */
    for (uint32_t k = 0; k < s->n_groups; k++) {
        if (peer_of(s, s->groups[k].id, 1)) {
            expect(s, OK(ctl_cmd_set_preferred_leader(s->groups[k].id, 1, 0, cmd)),
                   s->groups[k].preferred_leader == 1 ? CTL_OUTCOME_NOOP : CTL_OUTCOME_CHANGED, "");
        }
    }
    uint32_t g1 = 0;
    for (uint32_t k = 0; k < s->n_groups && g1 == 0; k++) {
        g1 = s->groups[k].preferred_leader == 1 ? s->groups[k].id : 0;
    }
    CU_ASSERT_NOT_EQUAL_FATAL(g1, 0);
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, g1, 0, 1, 0, 5000);
    n = ctl_balance_leaders(s, CTL_GROUPS_MAX, ch);
    CU_ASSERT_TRUE(n >= 1);
    for (uint32_t i = 0; i < n; i++) {
        CU_ASSERT_NOT_EQUAL(ch[i].group, g1);
        CU_ASSERT_EQUAL(ch[i].from, 1);
    }
    expect(s, OK(ctl_cmd_task_abort(lt, 5001, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_EQUAL(ctl_balance_leaders(s, 0, ch), 0);
    free(s);
}

/* balance_paused (Admin.SetBalance): off by default and absent from the encoding while off; on
 * encodes and decodes back; the other switches do not move; and a paused cluster still plans
 * (the runtime is what honours the switch), so status shows what would move. */
static void test_balance_paused_feature(void)
{
    struct ctl_state *s = task_fixture(4), *back = malloc(sizeof(*back));
    CU_ASSERT_PTR_NOT_NULL_FATAL(back);
    char *cmd[1], err[256];
    CU_ASSERT_FALSE(s->features.balance_paused);
    char *json = ctl_test_encode(s);
    CU_ASSERT_PTR_NULL(strstr(json, "balance_paused"));
    ctl_free(json);
    expect(s, OK(ctl_cmd_set_feature("balance_paused", false, 0, cmd)), CTL_OUTCOME_NOOP,
           "feature balance_paused is already off");
    expect(s, OK(ctl_cmd_set_feature("balance_paused", true, s->revision + 1, cmd)),
           CTL_OUTCOME_REJECTED, "stale expected_revision");
    expect(s, OK(ctl_cmd_set_feature("balance_paused", true, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_TRUE(s->features.balance_paused);
    CU_ASSERT_TRUE(s->features.hash_slot_migration);
    CU_ASSERT_FALSE(s->features.operations_mcp);
    json = ctl_test_encode(s);
    CU_ASSERT_PTR_NOT_NULL(strstr(json, "\"balance_paused\":true"));
    json_t *root = json_loads(json, 0, NULL);
    ctl_free(json);
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, back, err, sizeof(err)), CTL_OK);
    CU_ASSERT_TRUE(back->features.balance_paused);
    json_object_set_new(json_object_get(root, "features"), "balance_paused", json_string("yes"));
    CU_ASSERT_EQUAL(ctl_test_decode_json(root, 1, back, err, sizeof(err)), CTL_EDECODE);
    CU_ASSERT_STRING_EQUAL(err, "features.balance_paused: expected true or false");
    json_decref(root);
    expect(s, OK(ctl_cmd_set_feature("balance_paused", false, 0, cmd)), CTL_OUTCOME_CHANGED, "");
    CU_ASSERT_FALSE(s->features.balance_paused);
    free(back);
    free(s);
}

void ctl_test_add_balance(void)
{
    CU_pSuite s = CU_add_suite("controller balance", NULL, NULL);
    CU_add_test(s, "ctl_balance_plan: weighted shares converge", test_balance_weighted);
    CU_add_test(s, "ctl_balance_plan: zones", test_balance_zones);
    CU_add_test(s, "ctl_balance_plan: two replicas in one zone are split", test_balance_zone_fix);
    CU_add_test(s, "ctl_balance_plan: budget, busy, quorum, not eligible", test_balance_refusals);
    CU_add_test(s, "ctl_balance_leaders: preferred leaders spread", test_balance_leaders);
    CU_add_test(s, "the balance_paused switch", test_balance_paused_feature);
}
