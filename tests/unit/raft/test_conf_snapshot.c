/* test_conf_snapshot.c - restored snapshots: a conf change behind one is a no-op; which one the
 * core holds pending (raft_pending_snapshot). */
#include "raft/raft.h"
#include "tests_raft.h"

#include <CUnit/CUnit.h>
#include <string.h>

/* Node 2 of {1,2,3}, a follower on empty memory storage (*ms: freed by the caller). */
static struct raft *follower_2(struct raft_mem_storage **ms, uint64_t seed)
{
    CU_ASSERT_FATAL(raft_mem_storage_new(ms) == 0);
    struct raft_conf_state cs = {.n_voters = 3, .voters = {1, 2, 3}};
    raft_mem_storage_set_conf_state(*ms, &cs);
    struct raft_config cfg;
    raft_config_default(&cfg);
    cfg.id = 2;
    cfg.storage = raft_mem_storage_get(*ms);
    cfg.seed = seed;
    struct raft *r = NULL;
    CU_ASSERT_FATAL(raft_new(&cfg, &r) == 0);
    return r;
}

/* Follower 2 of {1,2,3}: the leader's APPEND carries a conf change (add learner 4) at index 2 and
 * commits it; while that ready is out, a SNAPSHOT at index 5 arrives whose configuration is
 * {1,2,3} + voter 5. Applying entry 2 afterwards must leave the snapshot's configuration alone
 * (found by the simulator: seeds 114, 500, 512, 2429). */
static void test_conf_change_behind_snapshot(void)
{
    struct raft_mem_storage *ms;
    struct raft *r = follower_2(&ms, 7);

    uint8_t cc_data[RAFT_CONF_CHANGE_ENCODED_LEN];
    struct raft_conf_change cc = {.type = RAFT_CC_ADD_LEARNER, .node = 4};
    raft_conf_change_encode(&cc, cc_data);
    struct raft_entry ents[2] = {
        {.term = 1, .index = 1, .type = RAFT_ENTRY_NORMAL},
        {.term = 1, .index = 2, .type = RAFT_ENTRY_CONF_CHANGE, .data = {cc_data, sizeof(cc_data)}},
    };
    struct raft_msg app = {.type = RAFT_MSG_APPEND,
                           .from = 1,
                           .to = 2,
                           .term = 1,
                           .log_term = 0,
                           .index = 0,
                           .commit = 2,
                           .n_entries = 2,
                           .entries = ents};
    CU_ASSERT_FATAL(raft_step(r, &app) == 0);
    struct raft_ready rd;
    CU_ASSERT_FATAL(raft_ready(r, &rd) == 0);
    CU_ASSERT_FATAL(rd.n_committed == 2);
    CU_ASSERT(rd.committed[1].type == RAFT_ENTRY_CONF_CHANGE);

    /* Pipelining: a snapshot arrives before the host applied the ready. */
    struct raft_msg snap = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 2, .term = 1};
    snap.snapshot.meta.index = 5;
    snap.snapshot.meta.term = 1;
    snap.snapshot.meta.conf = (struct raft_conf_state){.n_voters = 4, .voters = {1, 2, 3, 5}};
    CU_ASSERT_FATAL(raft_step(r, &snap) == 0);

    struct raft_conf_state out;
    CU_ASSERT(raft_apply_conf_change(r, &rd.committed[1], &out) == 0);
    CU_ASSERT(out.n_voters == 4 && out.n_learners == 0); /* learner 4 was not added on top */
    struct raft_status st;
    raft_status(r, &st);
    CU_ASSERT(st.conf.n_voters == 4 && st.conf.n_learners == 0);
    CU_ASSERT(raft_mem_storage_append(ms, rd.entries, rd.n_entries) == 0); /* contract step 2 */
    raft_advance(r, &rd);
    /* The snapshot comes out in the next ready; a repeat of entry 2 is still a no-op. */
    CU_ASSERT(raft_has_ready(r));
    CU_ASSERT(raft_ready(r, &rd) == 0);
    CU_ASSERT(rd.has_snapshot && rd.snapshot.meta.index == 5);
    CU_ASSERT(raft_mem_storage_apply_snapshot(ms, &rd.snapshot) == 0);
    raft_advance(r, &rd);
    CU_ASSERT(raft_apply_conf_change(r, &ents[1], &out) == 0);
    CU_ASSERT(out.n_voters == 4 && out.n_learners == 0);
    raft_free(r);
    raft_mem_storage_free(ms);
}

/* Follower 2 of {1,2,3} with entries 1..3 committed: raft_pending_snapshot names the snapshot the
 * core restored (its data copied) until the raft_advance after the ready that carried it, and
 * stays NULL for a SNAPSHOT the core did not take (at or below its commit index, or one whose
 * last entry its log already holds), so the host can delete what it stored for those. */
static void test_pending_snapshot(void)
{
    struct raft_mem_storage *ms;
    struct raft *r = follower_2(&ms, 11);
    struct raft_conf_state cs = {.n_voters = 3, .voters = {1, 2, 3}};
    CU_ASSERT(raft_pending_snapshot(r) == NULL);

    struct raft_entry ents[3] = {
        {.term = 1, .index = 1, .type = RAFT_ENTRY_NORMAL},
        {.term = 1, .index = 2, .type = RAFT_ENTRY_NORMAL},
        {.term = 1, .index = 3, .type = RAFT_ENTRY_NORMAL},
    };
    struct raft_msg app = {.type = RAFT_MSG_APPEND,
                           .from = 1,
                           .to = 2,
                           .term = 1,
                           .commit = 3,
                           .n_entries = 3,
                           .entries = ents};
    CU_ASSERT_FATAL(raft_step(r, &app) == 0);
    struct raft_ready rd;
    CU_ASSERT_FATAL(raft_ready(r, &rd) == 0);
    CU_ASSERT(raft_mem_storage_append(ms, rd.entries, rd.n_entries) == 0);
    raft_advance(r, &rd);

    uint8_t desc[4] = {'d', 'e', 's', 'c'};
    struct raft_msg snap = {.type = RAFT_MSG_SNAPSHOT, .from = 1, .to = 2, .term = 1};
    snap.snapshot.meta.term = 1;
    snap.snapshot.meta.conf = cs;
    snap.snapshot.data = (struct raft_buf){desc, sizeof(desc)};
    snap.snapshot.meta.index = 2; /* below the commit index: ignored */
    CU_ASSERT_FATAL(raft_step(r, &snap) == 0);
    CU_ASSERT(raft_pending_snapshot(r) == NULL);

    snap.snapshot.meta.index = 9; /* restored */
    CU_ASSERT_FATAL(raft_step(r, &snap) == 0);
    const struct raft_snapshot *p = raft_pending_snapshot(r);
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT(p->meta.index == 9 && p->data.len == sizeof(desc));
    CU_ASSERT(p->data.base != desc && memcmp(p->data.base, desc, sizeof(desc)) == 0);

    uint8_t other[4] = {'o', 't', 'h', 'r'};
    snap.snapshot.data = (struct raft_buf){other, sizeof(other)};
    CU_ASSERT_FATAL(raft_step(r, &snap) == 0); /* the same index again: not taken */
    p = raft_pending_snapshot(r);
    CU_ASSERT_FATAL(p != NULL);
    CU_ASSERT(memcmp(p->data.base, desc, sizeof(desc)) == 0);

    CU_ASSERT_FATAL(raft_ready(r, &rd) == 0);
    CU_ASSERT(rd.has_snapshot && rd.snapshot.meta.index == 9);
    CU_ASSERT(raft_pending_snapshot(r) != NULL); /* still pending while the ready is out */
    CU_ASSERT(raft_mem_storage_apply_snapshot(ms, &rd.snapshot) == 0);
    raft_advance(r, &rd);
    CU_ASSERT(raft_pending_snapshot(r) == NULL);
    raft_free(r);
    raft_mem_storage_free(ms);
}

void tests_conf_snapshot_add(CU_pSuite s)
{
    CU_add_test(s, "raft_pending_snapshot: restored, not taken, persisted", test_pending_snapshot);
    CU_add_test(s, "conf change behind a restored snapshot is a no-op",
                test_conf_change_behind_snapshot);
}
