/* test_conf_snapshot.c - regression: a conf change handed out in a ready is a no-op once a newer
 * snapshot was restored before it is applied. */
#include "raft/raft.h"
#include "tests_raft.h"

#include <CUnit/CUnit.h>
#include <string.h>

/* Follower 2 of {1,2,3}: the leader's APPEND carries a conf change (add learner 4) at index 2 and
 * commits it; while that ready is out, a SNAPSHOT at index 5 arrives whose configuration is
 * {1,2,3} + voter 5. Applying entry 2 afterwards must leave the snapshot's configuration alone
 * (found by the simulator: seeds 114, 500, 512, 2429). */
static void test_conf_change_behind_snapshot(void)
{
    struct raft_mem_storage *ms;
    CU_ASSERT_FATAL(raft_mem_storage_new(&ms) == 0);
    struct raft_conf_state cs = {.n_voters = 3, .voters = {1, 2, 3}};
    raft_mem_storage_set_conf_state(ms, &cs);
    struct raft_config cfg;
    raft_config_default(&cfg);
    cfg.id = 2;
    cfg.storage = raft_mem_storage_get(ms);
    cfg.seed = 7;
    struct raft *r;
    CU_ASSERT_FATAL(raft_new(&cfg, &r) == 0);

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

void tests_conf_snapshot_add(CU_pSuite s)
{
    CU_add_test(s, "conf change behind a restored snapshot is a no-op",
                test_conf_change_behind_snapshot);
}
