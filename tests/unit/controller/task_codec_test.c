/* task_codec_test.c - tasks in cluster-state.json, task builders, seeded task-command determinism.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ctl_test.h"
#include "task_test.h"

#define expect ctl_test_check

/* A state holding every task kind with real proofs: a done replica move, a done leader transfer,
 * a promotion waiting at phase promote, a failed drain with progress and an error. */
static struct ctl_state *tasks_state(void)
{
    struct ctl_state *s = task_fixture(4);
    char *cmd = NULL;
    const struct ctl_group *g = ctl_state_group(s, 1);
    uint64_t mv = task_create(s, CTL_TASK_REPLICA_MOVE, 1, g->desired_peers[0],
                              task_outsider(s, 1, 0), 0, 10);
    task_run_move(s, mv, 11);
    g = ctl_state_group(s, 2);
    uint64_t lt = task_create(s, CTL_TASK_LEADER_TRANSFER, 2, g->preferred_leader,
                              g->desired_peers[0] == g->preferred_leader ? g->desired_peers[1]
                                                                         : g->desired_peers[0],
                              0, 20);
    struct ctl_task_proof p =
        task_proof(g->desired_peers, g->n_peers, NULL, 0, ctl_state_task(s, lt)->target, 7, 7);
    expect(s, task_advance_cmd(s, lt, &p, 21), CTL_OUTCOME_CHANGED, "");
    uint64_t pr = task_create(s, CTL_TASK_CONTROLLER_VOTER_PROMOTION, 0, 0, 0, 4, 30);
    uint64_t voters[3] = {1, 2, 3}, four = 4;
    p = task_proof(voters, 3, &four, 1, 2, 90, 0);
    expect(s, task_advance_cmd(s, pr, &p, 31), CTL_OUTCOME_CHANGED, "");
    p = task_proof(voters, 3, &four, 1, 2, 95, 96);
    expect(s, task_advance_cmd(s, pr, &p, 32), CTL_OUTCOME_CHANGED, "");
    uint64_t dr = task_create(s, CTL_TASK_NODE_DRAIN, 0, 0, 0, 5, 40);
    struct ctl_task_progress prog = {123, 4567, 8, 9};
    expect(s, task_built(ctl_cmd_task_progress(dr, 1, 0, &prog, 41, 0, &cmd), &cmd),
           CTL_OUTCOME_UPDATED, "");
    expect(s,
           task_built(ctl_cmd_task_fail(dr, 1, 0, "drain: \"busy\" \xc3\xa9", 42, 0, &cmd), &cmd),
           CTL_OUTCOME_CHANGED, "");
    return s;
}

static void test_task_round_trip(void)
{
    struct ctl_state *s = tasks_state(), *d = malloc(sizeof(*d));
    char err[256] = "";
    CU_ASSERT_EQUAL(s->n_tasks, 4);
    char *a = ctl_test_encode(s);
    CU_ASSERT_EQUAL_FATAL(ctl_state_decode(a, strlen(a), d, err, sizeof(err)), CTL_OK);
    CU_ASSERT_EQUAL(d->next_task_id, s->next_task_id);
    CU_ASSERT_EQUAL(d->n_tasks, 4);
    CU_ASSERT_EQUAL(memcmp(d->tasks, s->tasks, sizeof(s->tasks)), 0);
    char *b = ctl_test_encode(d);
    CU_ASSERT_STRING_EQUAL(a, b);
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"next_task_id\":14,"));
    CU_ASSERT_PTR_NOT_NULL(
        strstr(a, "\"previous_voters\":[1,2,3],\"progress\":{\"bytes_sent\":0,\"bytes_total\":0,"
                  "\"commit\":0,\"target_match\":0},\"proof\":{\"commit\":95,\"config_index\":44,"
                  "\"leader\":2,\"learners\":[4],\"target_match\":96,\"voters\":[1,2,3]}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(a, "\"progress\":{\"bytes_sent\":123,\"bytes_total\":4567,"
                                     "\"commit\":9,\"target_match\":8}"));
    ctl_free(a), ctl_free(b);
    free(s), free(d);
}

static json_t *task_obj(json_t *root, size_t i)
{
    return json_array_get(json_object_get(root, "tasks"), i);
}

void task_expect_decode(const struct ctl_state *s, void (*mutate)(json_t *), int want_rc,
                        const char *want)
{
    char *text = ctl_test_encode(s), err[256] = "";
    json_t *root = json_loads(text, 0, NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(root);
    mutate(root);
    struct ctl_state *out = malloc(sizeof(*out));
    int rc = ctl_test_decode_json(root, 1, out, err, sizeof(err));
    if (rc != want_rc || strstr(err, want) == NULL) {
        printf("\n  decode: %d \"%s\", want %d \"%s\"\n", rc, err, want_rc, want);
    }
    CU_ASSERT_EQUAL(rc, want_rc);
    CU_ASSERT_PTR_NOT_NULL(strstr(err, want));
    json_decref(root);
    ctl_free(text);
    free(out);
}

static void m_proof_field(json_t *r)
{
    json_object_set_new(json_object_get(task_obj(r, 0), "proof"), "term", json_integer(1));
}
static void m_progress_missing(json_t *r)
{
    json_object_del(json_object_get(task_obj(r, 3), "progress"), "commit");
}
static void m_no_next_task_id(json_t *r)
{
    json_object_del(r, "next_task_id");
}
static void m_next_task_id_low(json_t *r)
{
    json_object_set_new(r, "next_task_id", json_integer(13));
}
static void m_next_task_id_zero(json_t *r)
{
    json_object_set_new(r, "next_task_id", json_integer(0));
}
static void m_voters_unsorted(json_t *r)
{
    json_t *v = json_object_get(json_object_get(task_obj(r, 2), "proof"), "voters");
    json_array_append_new(v, json_integer(1));
}
static void m_previous_voters_on_move(json_t *r)
{
    json_object_set_new(task_obj(r, 0), "previous_voters", json_pack("[I]", (json_int_t)1));
}
static void m_phase_beyond_done(json_t *r)
{
    json_object_set_new(task_obj(r, 0), "phase_index", json_integer(5));
}
static void m_done_early(json_t *r)
{
    json_object_set_new(task_obj(r, 0), "phase_index", json_integer(2));
}
static void m_source_unknown(json_t *r)
{
    json_object_set_new(task_obj(r, 3), "source", json_integer(99));
}
static void m_target_string(json_t *r)
{
    json_object_set_new(task_obj(r, 1), "target", json_string("4"));
}
static void m_two_promotions(json_t *r)
{
    json_t *t = json_deep_copy(task_obj(r, 2));
    json_object_set_new(t, "id", json_integer(14));
    json_array_append_new(json_object_get(r, "tasks"), t);
    json_object_set_new(r, "next_task_id", json_integer(15));
}
static void m_two_drains(json_t *r)
{
    json_t *t = json_deep_copy(task_obj(r, 3));
    json_object_set_new(t, "id", json_integer(14));
    json_object_set_new(task_obj(r, 3), "status", json_string("running"));
    json_object_set_new(t, "status", json_string("running"));
    json_array_append_new(json_object_get(r, "tasks"), t);
    json_object_set_new(r, "next_task_id", json_integer(15));
}

static void test_task_decode_rejects(void)
{
    struct ctl_state *s = tasks_state();
    task_expect_decode(s, m_proof_field, CTL_EDECODE, "tasks[0].proof: unknown field \"term\"");
    task_expect_decode(s, m_progress_missing, CTL_EDECODE,
                       "tasks[3].progress: missing field \"commit\"");
    task_expect_decode(s, m_no_next_task_id, CTL_EDECODE,
                       "top level: missing field \"next_task_id\"");
    task_expect_decode(s, m_next_task_id_low, CTL_ESTATE,
                       "tasks[3].id: 13 not below next_task_id 13");
    task_expect_decode(s, m_next_task_id_zero, CTL_ESTATE,
                       "next_task_id: 0 not in 1..9223372036854775807");
    task_expect_decode(s, m_voters_unsorted, CTL_ESTATE,
                       "tasks[2].proof.voters[3]: 1 is not a node id above the previous entry");
    task_expect_decode(s, m_previous_voters_on_move, CTL_ESTATE,
                       "tasks[0].previous_voters: only a controller_voter_promotion has them");
    task_expect_decode(s, m_phase_beyond_done, CTL_ESTATE,
                       "tasks[0].phase_index: 5 not in 0..4 (replica_move)");
    task_expect_decode(s, m_done_early, CTL_ESTATE,
                       "tasks[0].status: done at phase 2, a replica_move task is done exactly at "
                       "phase 4");
    task_expect_decode(s, m_source_unknown, CTL_ESTATE, "tasks[3].source: 99 is not an existing");
    task_expect_decode(s, m_target_string, CTL_EDECODE, "tasks[1].target: expected an integer");
    task_expect_decode(s, m_two_promotions, CTL_ESTATE,
                       "tasks[4]: controller_voter_promotion 12 is already active (one at a time)");
    task_expect_decode(s, m_two_drains, CTL_ESTATE,
                       "tasks[4]: node_drain 13 of node 5 is already active (one per node)");
    /* The empty state has no next_task_id. */
    struct ctl_state *e = malloc(sizeof(*e));
    ctl_state_init(e);
    e->next_task_id = 3;
    char err[128];
    CU_ASSERT_EQUAL(ctl_state_validate(e, err, sizeof(err)), CTL_ESTATE);
    CU_ASSERT_STRING_EQUAL(err, "next_task_id: must be 0 while revision is 0 (not bootstrapped)");
    free(e);
    free(s);
}

static void test_task_builders(void)
{
    char *cmd = NULL;
    struct ctl_task_spec spec = {CTL_TASK_REPLICA_MOVE, 1, 2, 4, 9};
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 5, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"group\":1,\"kind\":\"replica_move\",\"now_ms\":5,\"op\":"
                                "\"task_create\",\"source\":2,\"target\":4}");
    ctl_free(cmd);
    spec = (struct ctl_task_spec){CTL_TASK_CONTROLLER_VOTER_PROMOTION, 3, 2, 4, 9};
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 5, 8, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"expected_revision\":8,\"kind\":\"controller_voter_promotion\","
                                "\"node\":9,\"now_ms\":5,\"op\":\"task_create\"}");
    ctl_free(cmd);
    /* A migration writes hash_slots (sorted) and to_group, never group, source, target, node. */
    spec = (struct ctl_task_spec){CTL_TASK_HASH_SLOT_MIGRATION, 3, 1, 2, 9, 2, {0}};
    spec.hash_slots[0] = 0x28;       /* hash slots 3, 5 */
    spec.hash_slots[255 / 8] = 0x80; /* hash slot 255 */
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 5, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"hash_slots\":[3,5,255],\"kind\":\"hash_slot_migration\","
                                "\"now_ms\":5,\"op\":\"task_create\",\"to_group\":2}");
    ctl_free(cmd);
    memset(spec.hash_slots, 0, sizeof(spec.hash_slots)); /* empty: built, rejected by ctl_apply */
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 5, 0, &cmd), CTL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(cmd, "\"hash_slots\":[],"));
    ctl_free(cmd);
    uint64_t v[3] = {3, 1, 2}, l = 4;
    struct ctl_task_proof p = task_proof(v, 3, &l, 1, 1, 3, 0);
    p.config_index = 2;
    CU_ASSERT_EQUAL(ctl_cmd_task_advance(10, 1, 1, 1, 0, &p, 0, 0, 9, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd,
                           "{\"attempt\":1,\"config_epoch\":1,\"group\":1,\"leading\":0,\"now_ms\":"
                           "9,\"op\":\"task_advance\",\"phase\":0,\"proof\":{\"commit\":3,"
                           "\"config_index\":2,\"leader\":1,\"learners\":[4],\"target_match\":0,"
                           "\"voters\":[3,1,2]},\"replicas_on_node\":0,\"task\":10}");
    ctl_free(cmd);
    CU_ASSERT_EQUAL(ctl_cmd_task_advance(11, 0, 0, 2, 0, NULL, 3, 1, 9, 4, &cmd), CTL_OK);
    CU_ASSERT_PTR_NOT_NULL(strstr(cmd, "\"leading\":1,"));
    CU_ASSERT_PTR_NOT_NULL(strstr(cmd, "\"learners\":[],\"target_match\":0,\"voters\":[]}"));
    CU_ASSERT_PTR_NOT_NULL(strstr(cmd, "\"expected_revision\":4,"));
    ctl_free(cmd);
    struct ctl_task_progress prog = {1, 2, 3, 4};
    CU_ASSERT_EQUAL(ctl_cmd_task_progress(10, 2, 1, &prog, 9, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"attempt\":2,\"now_ms\":9,\"op\":\"task_progress\",\"phase\":1,"
                                "\"progress\":{\"bytes_sent\":1,\"bytes_total\":2,\"commit\":4,"
                                "\"target_match\":3},\"task\":10}");
    ctl_free(cmd);
    CU_ASSERT_EQUAL(ctl_cmd_task_fail(10, 2, 1, "x \"y\"", 9, 0, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(cmd, "{\"attempt\":2,\"error\":\"x \\\"y\\\"\",\"now_ms\":9,\"op\":"
                                "\"task_fail\",\"phase\":1,\"task\":10}");
    ctl_free(cmd);
    CU_ASSERT_EQUAL(ctl_cmd_task_retry(10, 9, 7, &cmd), CTL_OK);
    CU_ASSERT_STRING_EQUAL(
        cmd, "{\"expected_revision\":7,\"now_ms\":9,\"op\":\"task_retry\",\"task\":10}");
    ctl_free(cmd);
    cmd = NULL;
    CU_ASSERT_EQUAL(ctl_cmd_task_create(NULL, 5, 0, &cmd), CTL_EINVALID);
    spec.kind = (enum ctl_task_kind)9;
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 5, 0, &cmd), CTL_EINVALID);
    spec = (struct ctl_task_spec){CTL_TASK_NODE_DRAIN, 0, 0, 0, CTL_U64_JSON_MAX + 1};
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, 5, 0, &cmd), CTL_EINVALID);
    p.n_voters = CTL_REPLICAS_MAX + 1;
    CU_ASSERT_EQUAL(ctl_cmd_task_advance(10, 1, 1, 1, 0, &p, 0, 0, 9, 0, &cmd), CTL_EINVALID);
    p.n_voters = 1;
    p.voters[0] = CTL_U64_JSON_MAX + 1;
    CU_ASSERT_EQUAL(ctl_cmd_task_advance(10, 1, 1, 1, 0, &p, 0, 0, 9, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_task_progress(10, 1, 1, NULL, 9, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_EQUAL(ctl_cmd_task_retry(CTL_U64_JSON_MAX + 1, 9, 0, &cmd), CTL_EINVALID);
    CU_ASSERT_PTR_NULL(cmd);
}

/* ---- determinism over seeded task commands ---- */

static uint64_t rng_next(uint64_t *x)
{
    *x ^= *x >> 12;
    *x ^= *x << 25;
    *x ^= *x >> 27;
    return *x * 2685821657736338717ull;
}

/* A proof that usually satisfies task t's phase in s (and sometimes is spoiled). */
static struct ctl_task_proof plausible_proof(const struct ctl_state *s, const struct ctl_task *t,
                                             uint64_t *rng)
{
    struct ctl_task_proof p = {
        .config_index = rng_next(rng) % 50, .commit = 10, .target_match = 10};
    const struct ctl_group *g = ctl_state_group(s, t->group);
    uint64_t v[CTL_REPLICAS_MAX + 1];
    uint32_t n = 0;
    for (uint32_t k = 0; g != NULL && k < g->n_peers; k++) {
        v[n++] = g->desired_peers[k];
    }
    if (t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION) {
        n = t->n_previous_voters;
        memcpy(v, t->previous_voters, n * sizeof(v[0]));
    }
    bool learner = t->phase_index < 2, promoted = t->phase_index >= 2;
    if (t->kind == CTL_TASK_REPLICA_MOVE && t->phase_index == 3) {
        for (uint32_t k = 0; k < n; k++) {
            v[k] = v[k] == t->source ? t->target : v[k];
        }
        promoted = false;
    }
    memcpy(p.voters, v, n * sizeof(v[0]));
    p.n_voters = n;
    if (learner && t->target != 0) {
        p.learners[p.n_learners++] = t->target;
    }
    if (promoted && t->target != 0 && n < CTL_REPLICAS_MAX) {
        p.voters[p.n_voters++] = t->target;
    }
    p.leader = t->target != 0 ? t->target : v[0];
    switch (rng_next(rng) % 8) {
    case 0:
        p.leader = t->source;
        break;
    case 1:
        p.n_voters = p.n_voters > 0 ? p.n_voters - 1 : 0;
        break;
    case 2:
        p.target_match = 3;
        break;
    default:
        break;
    }
    return p;
}

/* A task_create that is often valid: real peers and outsiders of a random group, nodes 4 and 5
 * for promotions and drains, 0..3 consecutive hash slots (which may span two owners) for
 * migrations; sometimes any ids. */
static char *random_create(const struct ctl_state *s, uint64_t *rng, uint64_t now_ms)
{
    char *cmd = NULL;
    struct ctl_task_spec spec = {(enum ctl_task_kind)(rng_next(rng) % 5),
                                 (uint32_t)(1 + rng_next(rng) % 4), 0, 0, 4 + rng_next(rng) % 2};
    const struct ctl_group *g = ctl_state_group(s, spec.group);
    spec.source = g->desired_peers[rng_next(rng) % g->n_peers];
    spec.target = g->desired_peers[rng_next(rng) % g->n_peers];
    if (spec.kind == CTL_TASK_REPLICA_MOVE) {
        spec.target = 1 + rng_next(rng) % 5;
    }
    if (spec.kind == CTL_TASK_HASH_SLOT_MIGRATION) {
        uint32_t first = (uint32_t)(rng_next(rng) % CTL_HASH_SLOTS), n = rng_next(rng) % 4;
        spec.to_group = (uint32_t)(1 + rng_next(rng) % 4);
        for (uint32_t k = 0; k < n; k++) {
            uint32_t h = (first + k * (1 + first % 3)) % CTL_HASH_SLOTS;
            spec.hash_slots[h / 8] |= (uint8_t)(1u << (h % 8));
        }
    }
    if (rng_next(rng) % 8 == 0) {
        spec.group = (uint32_t)(rng_next(rng) % 6);
        spec.source = rng_next(rng) % 7;
        spec.node = rng_next(rng) % 7;
    }
    CU_ASSERT_EQUAL(ctl_cmd_task_create(&spec, now_ms, 0, &cmd), CTL_OK);
    return cmd;
}

/* Mostly an active task (commands for it can succeed), else any task of s; NULL when none. */
static const struct ctl_task *random_task(const struct ctl_state *s, uint64_t *rng)
{
    if (s->n_tasks == 0) {
        return NULL;
    }
    uint32_t start = (uint32_t)(rng_next(rng) % s->n_tasks);
    for (uint32_t k = 0; rng_next(rng) % 5 != 0 && k < s->n_tasks; k++) {
        const struct ctl_task *t = &s->tasks[(start + k) % s->n_tasks];
        if (t->status == CTL_TASK_RUNNING) {
            return t;
        }
    }
    return &s->tasks[start];
}

static char *random_task_command(const struct ctl_state *s, uint64_t *rng)
{
    char *cmd = NULL;
    uint64_t r = rng_next(rng) % 100;
    const struct ctl_task *t = random_task(s, rng);
    uint32_t skew = rng_next(rng) % 10 == 0 ? 1 : 0; /* a stale fence now and then */
    if (r < 25 || t == NULL) {
        cmd = random_create(s, rng, 1000 + r);
    } else if (r < 70) {
        struct ctl_task_proof p = plausible_proof(s, t, rng);
        uint64_t rev = t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION ? s->revision : 0;
        CU_ASSERT_EQUAL(ctl_cmd_task_advance(t->id, t->group, t->config_epoch, t->attempt + skew,
                                             t->phase_index, &p, 0, 0, 2000 + r, rev, &cmd),
                        CTL_OK);
    } else if (r < 80) {
        struct ctl_task_progress prog = {rng_next(rng) % 4, 4, 1, 2};
        CU_ASSERT_EQUAL(ctl_cmd_task_progress(t->id, t->attempt, t->phase_index + skew, &prog,
                                              3000 + r, 0, &cmd),
                        CTL_OK);
    } else if (r < 87) {
        CU_ASSERT_EQUAL(
            ctl_cmd_task_fail(t->id + skew, t->attempt, t->phase_index, "random", 4000, 0, &cmd),
            CTL_OK);
    } else if (r < 95) {
        CU_ASSERT_EQUAL(ctl_cmd_task_retry(t->id, 5000, 0, &cmd), CTL_OK);
    } else {
        static const char *const junk[] = {
            "{\"op\":\"task_advance\",\"task\":10}", "{\"op\":\"task_retry\",\"task\":-1}",
            "{\"op\":\"task_create\",\"kind\":\"node_drain\",\"node\":4,\"now_ms\":1.5}",
            "{\"op\":\"task_progress\""};
        cmd = strdup(junk[r % 4]);
    }
    return cmd;
}

static void test_task_determinism(void)
{
    uint64_t seed = 0x7a5c5eedull;
    const char *env = getenv("CTL_TEST_SEED");
    if (env != NULL) {
        seed = strtoull(env, NULL, 0);
    }
    uint64_t rng = seed;
    struct ctl_state *a = task_fixture(4), *b = malloc(sizeof(*b)), *c = malloc(sizeof(*c));
    *b = *a;
    *c = *a;
    int counts[4] = {0}, mismatches = 0, invalid = 0;
    for (int step = 0; step < 600; step++) {
        char *cmd = random_task_command(a, &rng);
        CU_ASSERT_PTR_NOT_NULL_FATAL(cmd);
        struct ctl_result ra, rb, rc;
        int ea = ctl_apply(a, a->applied_raft_index + 1, cmd, strlen(cmd), &ra);
        int eb = ctl_apply(b, b->applied_raft_index + 1, cmd, strlen(cmd), &rb);
        int ec = ctl_apply(c, c->applied_raft_index + 1, cmd, strlen(cmd), &rc);
        char *ta = ctl_test_encode(a), *tb = ctl_test_encode(b), *tc = ctl_test_encode(c);
        char err[256];
        /* c restarts from its file encoding at every step, as a restarted voter would */
        CU_ASSERT_EQUAL(ctl_state_decode(tc, strlen(tc), c, err, sizeof(err)), CTL_OK);
        if (ea || eb || ec || ra.outcome != rb.outcome || strcmp(ra.reason, rb.reason) ||
            ra.task_id != rb.task_id || strcmp(ta, tb) || strcmp(ta, tc)) {
            mismatches++;
        }
        invalid += ctl_state_validate(a, NULL, 0) != CTL_OK;
        counts[ra.outcome]++;
        ctl_free(ta), ctl_free(tb), ctl_free(tc), ctl_free(cmd);
    }
    int done = 0, migrations = 0;
    for (uint32_t i = 0; i < a->n_tasks; i++) {
        done += a->tasks[i].status == CTL_TASK_DONE;
        migrations += a->tasks[i].kind == CTL_TASK_HASH_SLOT_MIGRATION;
    }
    if (mismatches != 0 || invalid != 0) {
        printf("\n  task determinism failed; replay: CTL_TEST_SEED=0x%llx bin/controller_test\n",
               (unsigned long long)seed);
    }
    CU_ASSERT_EQUAL(mismatches, 0);
    CU_ASSERT_EQUAL(invalid, 0);
    printf("\n  task outcomes: %d changed, %d updated, %d noop, %d rejected; %u tasks, %d done, "
           "%d migrations, table version %llu\n",
           counts[CTL_OUTCOME_CHANGED], counts[CTL_OUTCOME_UPDATED], counts[CTL_OUTCOME_NOOP],
           counts[CTL_OUTCOME_REJECTED], a->n_tasks, done, migrations,
           (unsigned long long)a->table.version);
    CU_ASSERT_TRUE(counts[CTL_OUTCOME_CHANGED] > 30 && counts[CTL_OUTCOME_UPDATED] > 5 &&
                   counts[CTL_OUTCOME_NOOP] > 10 && counts[CTL_OUTCOME_REJECTED] > 30);
    CU_ASSERT_TRUE(done >= 3);
    CU_ASSERT_TRUE(migrations >= 1);
    free(a), free(b), free(c);
}

void ctl_test_add_task_codec(void)
{
    CU_pSuite s = CU_add_suite("controller task codec, builders, determinism", NULL, NULL);
    CU_add_test(s, "tasks of every kind round-trip", test_task_round_trip);
    CU_add_test(s, "decode and validation reject bad tasks", test_task_decode_rejects);
    CU_add_test(s, "task command builders", test_task_builders);
    CU_add_test(s, "determinism over 600 seeded task commands", test_task_determinism);
}
