/* test_contract.c - host-contract misuse stops the process, malformed messages are refused,
 * raft_check_invariants names what broke. */
#include "harness.h"
#include "tests_raft.h"

#include <CUnit/CUnit.h>
#include <string.h>

/* ---- misuse of the host contract is a RAFT_ASSERT (checked in a child process) ---- */

static void ready_twice(void *arg)
{
    struct raft *r = arg;
    struct raft_ready rd, again;
    raft_ready(r, &rd);
    raft_ready(r, &again);
}

static void advance_without_ready(void *arg)
{
    struct raft *r = arg;
    struct raft_ready rd;
    memset(&rd, 0, sizeof(rd));
    raft_advance(r, &rd);
}

static void advance_other_ready(void *arg)
{
    struct raft *r = arg;
    struct raft_ready rd, other;
    raft_ready(r, &rd);
    memset(&other, 0, sizeof(other)); /* not the ready raft_ready() handed out */
    raft_advance(r, &other);
}

static void propose_nothing(void *arg)
{
    raft_index idx = 0;
    raft_propose_batch(arg, NULL, 0, &idx);
}

static void apply_normal_entry(void *arg)
{
    struct raft_entry e = {.term = 1, .index = 1, .type = RAFT_ENTRY_NORMAL};
    raft_apply_conf_change(arg, &e, NULL);
}

static void test_contract_misuse_asserts(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    struct raft *r = h_raft(c, 1);
    CU_ASSERT_EQUAL(h_propose(c, 1, "x"), 0);
    CU_ASSERT_TRUE(raft_has_ready(r));
    CU_ASSERT_TRUE(h_aborts_with(ready_twice, r, "!r->ready_out"));
    CU_ASSERT_TRUE(h_aborts_with(advance_other_ready, r, "rd->msgs == r->rdy.msgs"));
    CU_ASSERT_TRUE(h_aborts_with(propose_nothing, r, "n > 0"));
    CU_ASSERT_TRUE(h_aborts_with(apply_normal_entry, r, "RAFT_ENTRY_CONF_CHANGE"));
    h_pump(c); /* the parent's core is untouched by what the children did */
    CU_ASSERT_FALSE(raft_has_ready(r));
    CU_ASSERT_TRUE(h_aborts_with(advance_without_ready, r, "r->ready_out"));
    CU_ASSERT_EQUAL(h_commit(c, 2), 2);
    h_cluster_free(c);
}

/* ---- a malformed message from the network is refused and changes nothing ---- */

static void test_malformed_append_refused(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    struct raft *f = h_raft(c, 2);
    struct raft_status before, after;
    raft_status(f, &before);
    raft_term t = before.term;
    struct raft_entry gap[2] = {{.term = t, .index = 2}, {.term = t, .index = 4}};
    struct raft_entry future[1] = {{.term = t + 5, .index = 2}};
    struct raft_entry backwards[2] = {{.term = t, .index = 2}, {.term = t - 1, .index = 3}};
    struct raft_msg bad[] = {
        {.type = RAFT_MSG_APPEND,
         .from = 1,
         .to = 2,
         .term = t,
         .log_term = t,
         .index = 1,
         .commit = 3,
         .n_entries = 2,
         .entries = gap},
        {.type = RAFT_MSG_APPEND,
         .from = 1,
         .to = 2,
         .term = t,
         .log_term = t,
         .index = 1,
         .commit = 2,
         .n_entries = 1,
         .entries = future},
        {.type = RAFT_MSG_APPEND,
         .from = 1,
         .to = 2,
         .term = t,
         .log_term = t,
         .index = 1,
         .commit = 3,
         .n_entries = 2,
         .entries = backwards},
        {.type = RAFT_MSG_APPEND,
         .from = 1,
         .to = 2,
         .term = t + 1,
         .index = 1,
         .n_entries = 1,
         .entries = NULL},
        {.type = RAFT_MSG_SNAPSHOT,
         .from = 1,
         .to = 2,
         .term = t,
         .snapshot = {.meta = {.index = 9, .term = t + 1}}},
    };
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CU_ASSERT_EQUAL(raft_step(f, &bad[i]), RAFT_EINVAL);
    }
    raft_status(f, &after);
    CU_ASSERT_EQUAL(after.term, before.term); /* the higher term of bad[3] was not taken */
    CU_ASSERT_EQUAL(after.last_index, before.last_index);
    CU_ASSERT_EQUAL(after.commit, before.commit);
    CU_ASSERT_TRUE(h_invariants_ok(f));
    h_cluster_free(c);
}

/* ---- raft_check_invariants names the invariant, node, term and index ---- */

static void test_invariant_report(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_EQUAL(h_propose(c, 1, "v"), 0);
    }
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 2), 5);
    struct raft_invariant_report rep;
    CU_ASSERT_EQUAL(raft_check_invariants(h_raft(c, 2), &rep), 0);
    CU_ASSERT_PTR_NULL(rep.name);
    /* A host that breaks its storage contract: it drops persisted entries 3..5 of node 2 (an
     * append at index 3 replaces everything from there; here with nothing after it). */
    struct raft_entry keep = {.term = h_stored_term(c, 2, 2), .index = 2};
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[2].ms, &keep, 1), 0);
    CU_ASSERT_EQUAL(raft_check_invariants(h_raft(c, 2), &rep), RAFT_EINVAL);
    CU_ASSERT_STRING_EQUAL(rep.name, "commit_le_last");
    CU_ASSERT_EQUAL(rep.node, 2);
    CU_ASSERT_EQUAL(rep.term, h_term(c, 2));
    CU_ASSERT_EQUAL(rep.index, 5);
    CU_ASSERT_PTR_NOT_NULL(strstr(rep.detail, "commit 5 is above the last index 2"));
    CU_ASSERT_EQUAL(raft_check_invariants(h_raft(c, 2), NULL), RAFT_EINVAL);
    h_cluster_free(c); /* frees node 2 without another call on its core */
}

void tests_contract_add(CU_pSuite s)
{
    CU_add_test(s, "host-contract misuse stops the process", test_contract_misuse_asserts);
    CU_add_test(s, "a malformed message is refused and changes nothing",
                test_malformed_append_refused);
    CU_add_test(s, "an invariant failure names invariant, node, term and index",
                test_invariant_report);
}
