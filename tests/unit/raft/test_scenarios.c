/* test_scenarios.c - protocol scenarios as scripts: elections, replication, reads, transfer. */
#include "harness.h"
#include "tests_raft.h"

#include <CUnit/CUnit.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct raft_config cfg_base(void)
{
    struct raft_config cfg;
    raft_config_default(&cfg);
    cfg.seed = 42;
    return cfg;
}

/* Ticks the listed nodes (not the others) one at a time, pumping, until one of them leads. */
static raft_id tick_until_leader(struct h_cluster *c, const raft_id *ids, int n)
{
    for (int round = 0; round < 200; round++) {
        for (int i = 0; i < n; i++) {
            h_tick(c, ids[i], 1);
        }
        h_pump(c);
        for (int i = 0; i < n; i++) {
            if (h_role(c, ids[i]) == RAFT_LEADER) {
                return ids[i];
            }
        }
    }
    CU_FAIL("no leader emerged");
    return 0;
}

static bool has_read(struct h_node *nd, uint64_t ctx, raft_index *index)
{
    for (size_t i = 0; i < nd->n_reads; i++) {
        if (nd->reads[i].context == ctx) {
            *index = nd->reads[i].index;
            return true;
        }
    }
    return false;
}

static int read_failure(struct h_node *nd, uint64_t ctx)
{
    for (size_t i = 0; i < nd->n_fails; i++) {
        if (nd->fails[i].context == ctx) {
            return nd->fails[i].err;
        }
    }
    return -1;
}

static void test_election(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    for (raft_id id = 1; id <= 3; id++) {
        CU_ASSERT_EQUAL(h_term(c, id), 1); /* pre-vote did not spend a term */
        CU_ASSERT_EQUAL(h_leader_of(c, id), 1);
        CU_ASSERT_EQUAL(h_commit(c, id), 1); /* the leader's no-op */
        CU_ASSERT_EQUAL(c->nodes[id].n_applied, 1);
    }
    CU_ASSERT_EQUAL(c->nodes[1].log[0].index, 1);
    CU_ASSERT_EQUAL(c->nodes[1].log[0].term, 1);
    CU_ASSERT_STRING_EQUAL(c->nodes[1].log[0].data, "");
    CU_ASSERT_EQUAL(h_propose(c, 1, "hello"), 0);
    h_pump(c);
    for (raft_id id = 1; id <= 3; id++) {
        CU_ASSERT_EQUAL(h_commit(c, id), 2);
        CU_ASSERT_STRING_EQUAL(c->nodes[id].log[1].data, "hello");
    }
    h_cluster_free(c);
}

/* thesis 3.6.1: a candidate whose log is behind cannot win a voter with a newer log. */
static void test_stale_log_loses_votes(void)
{
    struct raft_config cfg = cfg_base();
    cfg.disable_pre_vote = true;
    cfg.disable_check_quorum = true;
    struct h_cluster *c = h_cluster_new(3, 0, &cfg);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_cut(c, 1, 3, true);
    CU_ASSERT_EQUAL(h_propose(c, 1, "a"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 2), 2);
    CU_ASSERT_EQUAL(h_last(c, 3), 1);

    c->nodes[1].down = true;
    raft_campaign(h_raft(c, 3));
    h_pump(c);
    struct raft_status st;
    h_status(c, 3, &st);
    CU_ASSERT_EQUAL(st.role, RAFT_CANDIDATE);
    CU_ASSERT_EQUAL(st.term, 2);
    h_status(c, 2, &st);
    CU_ASSERT_EQUAL(st.term, 2); /* the higher term was adopted ... */
    CU_ASSERT_EQUAL(st.vote, 0); /* ... but the vote was denied */
    CU_ASSERT_EQUAL(st.role, RAFT_FOLLOWER);

    CU_ASSERT_EQUAL(h_campaign(c, 2), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 2), 3);
    CU_ASSERT_EQUAL(h_stored_term(c, 3, 2), 1); /* node 3 received the entry it lacked */
    CU_ASSERT_EQUAL(h_commit(c, 3), 3);
    h_cluster_free(c);
}

static void test_higher_term_steps_down(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_isolate(c, 1, true);
    raft_id others[2] = {2, 3};
    raft_id l = tick_until_leader(c, others, 2);
    CU_ASSERT_EQUAL(h_term(c, l), 2);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_LEADER); /* not ticked: still believes it leads */
    CU_ASSERT_EQUAL(h_term(c, 1), 1);
    /* a stale leader's message is ignored; its answer tells it about the new term */
    h_heal(c);
    CU_ASSERT_EQUAL(h_propose(c, 1, "stale"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_FOLLOWER);
    CU_ASSERT_EQUAL(h_term(c, 1), 2);
    CU_ASSERT_EQUAL(h_leader_of(c, 1), 0);
    h_tick(c, l, 1); /* heartbeat */
    h_pump(c);
    CU_ASSERT_EQUAL(h_leader_of(c, 1), l);
    CU_ASSERT_EQUAL(h_commit(c, 1), 2);
    CU_ASSERT_EQUAL(h_stored_term(c, 1, 2), 2); /* "stale" was replaced by the new no-op */
    h_cluster_free(c);
}

/* thesis 3.5: a follower's conflicting uncommitted suffix is replaced by the leader's. */
static void test_conflicting_suffix_truncated(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_isolate(c, 1, true);
    CU_ASSERT_EQUAL(h_propose(c, 1, "x1"), 0);
    CU_ASSERT_EQUAL(h_propose(c, 1, "x2"), 0);
    CU_ASSERT_EQUAL(h_propose(c, 1, "x3"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_last(c, 1), 4);
    CU_ASSERT_EQUAL(h_stored_term(c, 1, 4), 1);
    raft_id others[2] = {2, 3};
    raft_id l = tick_until_leader(c, others, 2);
    CU_ASSERT_EQUAL(h_propose(c, l, "c"), 0);
    h_pump(c);
    h_heal(c);
    h_tick(c, l, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_FOLLOWER);
    CU_ASSERT_EQUAL(h_last(c, 1), 3); /* entry 4 of term 1 is gone */
    CU_ASSERT_EQUAL(h_stored_term(c, 1, 2), 2);
    CU_ASSERT_EQUAL(h_stored_term(c, 1, 3), 2);
    CU_ASSERT_EQUAL(h_commit(c, 1), 3);
    CU_ASSERT_EQUAL(c->nodes[1].n_applied, 3);
    CU_ASSERT_STRING_EQUAL(c->nodes[1].log[2].data, "c");
    h_cluster_free(c);
}

/* Figure 8 filter: drops APPENDs to node 4, and trims entries of term >= min_term. */
struct fig8 {
    raft_term min_term;
};

static bool fig8_filter(void *arg, struct raft_msg *m)
{
    struct fig8 *f = arg;
    if (m->type != RAFT_MSG_APPEND || m->from != 1) {
        return false;
    }
    if (m->to == 4) {
        return true;
    }
    size_t keep = 0;
    while (keep < m->n_entries && m->entries[keep].term < f->min_term) {
        keep++;
    }
    for (size_t i = keep; i < m->n_entries; i++) {
        free((void *)m->entries[i].data.base);
    }
    m->n_entries = keep;
    return false;
}

static bool drop_appends_from_5(void *arg, struct raft_msg *m)
{
    (void)arg;
    return m->from == 5 && m->type == RAFT_MSG_APPEND;
}

/* thesis 3.6.2 / Figure 3.7: an entry of an older term stored on a majority is not committed by
 * counting replicas; it commits once an entry of the leader's term does. */
static void test_figure8(void)
{
    struct raft_config cfg = cfg_base();
    cfg.disable_pre_vote = true;
    cfg.disable_check_quorum = true;
    struct h_cluster *c = h_cluster_new(5, 0, &cfg);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    /* (a) S1 (term 1) replicates entry 2 to S2 only */
    for (raft_id id = 3; id <= 5; id++) {
        h_cut(c, 1, id, true);
    }
    CU_ASSERT_EQUAL(h_propose(c, 1, "x"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 1), 1);
    CU_ASSERT_EQUAL(h_stored_term(c, 2, 2), 1);
    /* (b) S1 crashes; S5 wins term 2 with S3, S4 and writes entry 2 of term 2 locally only */
    c->nodes[1].down = true;
    c->filter = drop_appends_from_5;
    CU_ASSERT_EQUAL(h_campaign(c, 5), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 5), 2);
    CU_ASSERT_EQUAL(h_stored_term(c, 5, 2), 2);
    /* (c) S5 crashes; S1 restarts and wins term 3 (S2 votes; S3 and S4 already voted in term 2
     * and grant in term 3); it replicates its term-1 entry 2 to S2 and S3 but not entry 3 */
    c->nodes[5].down = true;
    c->nodes[1].down = false;
    h_heal(c);
    c->nodes[5].down = true;
    h_restart(c, 1);
    struct fig8 f = {.min_term = 3};
    c->filter = fig8_filter;
    c->filter_arg = &f;
    h_campaign(c, 1);
    if (h_role(c, 1) != RAFT_LEADER) {
        h_campaign(c, 1);
    }
    CU_ASSERT_EQUAL_FATAL(h_role(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 1), 3);
    CU_ASSERT_EQUAL(h_stored_term(c, 3, 2), 1); /* entry 2 (term 1) is on S1, S2, S3 */
    CU_ASSERT_EQUAL(h_stored_term(c, 2, 2), 1);
    CU_ASSERT_EQUAL(h_last(c, 3), 2);
    CU_ASSERT_EQUAL(h_commit(c, 1), 1); /* ... but not committed by counting */
    /* (e) once entry 3 (term 3) reaches a majority, both commit */
    c->filter = NULL;
    h_tick(c, 1, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 1), 3);
    CU_ASSERT_EQUAL(h_commit(c, 3), 3);
    /* S5 returns: its entry 2 of term 2 is replaced */
    c->nodes[5].down = false;
    h_tick_all(c, 3);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_stored_term(c, 5, 2), 1);
    CU_ASSERT_EQUAL(h_commit(c, 5), 3);
    CU_ASSERT_STRING_EQUAL(c->nodes[5].log[1].data, "x");
    h_cluster_free(c);
}

static void test_learner(void)
{
    struct h_cluster *c = h_cluster_new(2, 1, NULL);
    h_tick(c, 3, 100);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 3), RAFT_FOLLOWER); /* never campaigns */
    CU_ASSERT_EQUAL(h_term(c, 3), 0);
    CU_ASSERT_EQUAL(raft_campaign(h_raft(c, 3)), RAFT_EINVAL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_commit(c, 3), 1); /* replicated to */
    struct raft_status st;
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.n_progress, 3);
    CU_ASSERT_TRUE(st.progress[2].learner);
    CU_ASSERT_EQUAL(st.progress[2].id, 3);
    /* the learner's copy does not count toward the quorum */
    c->nodes[2].down = true;
    CU_ASSERT_EQUAL(h_propose(c, 1, "a"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_last(c, 3), 2);
    CU_ASSERT_EQUAL(h_commit(c, 1), 1);
    /* nobody asks a learner for a vote */
    c->nodes[2].down = false;
    c->nodes[1].down = true;
    raft_campaign(h_raft(c, 2));
    h_process(c);
    for (size_t i = 0; i < c->n_queue; i++) {
        CU_ASSERT_NOT_EQUAL(c->queue[i].to, 3);
    }
    h_pump(c);
    CU_ASSERT_NOT_EQUAL(h_role(c, 2), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 3), 1);
    h_cluster_free(c);
}

/* A learner whose replica is deleted and reopened empty (its node dropped it on a stale view of
 * the cluster while the leader counted its match) rejects every append; the leader takes its
 * shorter log as lost, forgets the match and fills it again instead of ignoring it forever. */
static void test_follower_lost_its_log(void)
{
    struct h_cluster *c = h_cluster_new(3, 1, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(h_propose(c, 1, "v"), 0);
    }
    h_pump(c);
    raft_index last = h_last(c, 1);
    CU_ASSERT_EQUAL(h_last(c, 4), last);
    struct raft_status st;
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.progress[3].match, last);
    struct raft_conf_state none;
    memset(&none, 0, sizeof(none));
    h_wipe(c, 4, &none);
    CU_ASSERT_EQUAL(h_last(c, 4), 0);
    CU_ASSERT_EQUAL(h_propose(c, 1, "after"), 0);
    h_tick_all(c, 5); /* heartbeats reach it too */
    h_pump(c);
    CU_ASSERT_EQUAL(h_last(c, 4), last + 1);
    CU_ASSERT_EQUAL(h_commit(c, 4), last + 1);
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.progress[3].match, last + 1);
    CU_ASSERT_EQUAL(raft_check_invariants(h_raft(c, 1), NULL), 0);
    h_cluster_free(c);
}

/* thesis 9.6: a node cut off keeps pre-campaigning without raising its term; on return it does
 * not disrupt the leader. */
static void test_prevote_rejoin(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_isolate(c, 3, true);
    h_tick_all(c, 60);
    CU_ASSERT_EQUAL(h_term(c, 3), 1);
    CU_ASSERT_EQUAL(h_role(c, 3), RAFT_PRE_CANDIDATE);
    h_heal(c);
    h_tick_all(c, 5);
    for (raft_id id = 1; id <= 3; id++) {
        CU_ASSERT_EQUAL(h_term(c, id), 1);
        CU_ASSERT_EQUAL(h_leader_of(c, id), 1);
    }
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_role(c, 3), RAFT_FOLLOWER);
    h_cluster_free(c);
}

/* thesis 6.2: a leader that hears from no majority for an election timeout steps down. */
static void test_check_quorum(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_isolate(c, 1, true);
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, 1), 77), 0);
    h_tick(c, 1, 19); /* first check passes on answers heard before the cut */
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_LEADER);
    h_tick(c, 1, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_FOLLOWER);
    CU_ASSERT_EQUAL(h_term(c, 1), 1);
    CU_ASSERT_EQUAL(h_leader_of(c, 1), 0);
    CU_ASSERT_EQUAL(read_failure(&c->nodes[1], 77), RAFT_ENOTLEADER);
    CU_ASSERT_EQUAL(h_propose(c, 1, "x"), RAFT_ENOLEADER);
    h_cluster_free(c);
}

/* thesis 3.10: the leader brings a lagging target up to date, then hands over. */
static void test_transfer_lagging(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_isolate(c, 3, true);
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(h_propose(c, 1, "e"), 0);
    }
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 1), 6);
    CU_ASSERT_EQUAL(h_last(c, 3), 1);
    h_heal(c);
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, 1), 3), 0);
    CU_ASSERT_EQUAL(h_propose(c, 1, "no"), RAFT_ETRANSFER);
    CU_ASSERT_EQUAL(h_last(c, 1), 6);
    struct raft_status st;
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.transfer_target, 3);
    h_tick_all(c, 2);
    CU_ASSERT_EQUAL(h_role(c, 3), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 3), 2);
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.role, RAFT_FOLLOWER);
    CU_ASSERT_EQUAL(st.leader, 3);
    CU_ASSERT_EQUAL(st.transfer_target, 0);
    for (raft_id id = 1; id <= 3; id++) {
        CU_ASSERT_EQUAL(h_commit(c, id), 7); /* the new leader's no-op */
        CU_ASSERT_EQUAL(h_stored_term(c, id, 6), 1);
    }
    h_cluster_free(c);
}

static void test_transfer_abort(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, 1), 1), RAFT_EINVAL);
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, 1), 9), RAFT_EINVAL);
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, 2), 3), RAFT_ENOTLEADER);
    h_isolate(c, 3, true);
    CU_ASSERT_EQUAL(h_propose(c, 1, "a"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, 1), 3), 0);
    for (int i = 0; i < 9; i++) {
        h_tick(c, 1, 1);
        h_tick(c, 2, 1);
        h_pump(c);
    }
    CU_ASSERT_EQUAL(h_propose(c, 1, "b"), RAFT_ETRANSFER);
    h_tick(c, 1, 1);
    h_tick(c, 2, 1);
    h_pump(c);
    struct raft_status st;
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.transfer_target, 0);
    CU_ASSERT_EQUAL(st.role, RAFT_LEADER);
    CU_ASSERT_EQUAL(st.term, 1);
    CU_ASSERT_EQUAL(h_propose(c, 1, "b"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 2), 3);
    h_cluster_free(c);
}

/* thesis 6.4: reads on the leader, forwarded reads, and reads across a leader change. */
static void test_read_index_leader_change(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, 1), 1), RAFT_ENOLEADER);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    raft_index idx = 0;
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, 1), 100), 0);
    h_process(c);
    CU_ASSERT_FALSE(has_read(&c->nodes[1], 100, &idx)); /* waits for the heartbeat quorum */
    CU_ASSERT_EQUAL(h_queued(c, RAFT_MSG_HEARTBEAT, 1), 2);
    h_pump(c);
    CU_ASSERT_TRUE(has_read(&c->nodes[1], 100, &idx));
    CU_ASSERT_EQUAL(idx, 1);
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, 2), 200), 0); /* forwarded */
    h_pump(c);
    CU_ASSERT_TRUE(has_read(&c->nodes[2], 200, &idx));
    CU_ASSERT_EQUAL(idx, 1);

    /* the old leader, cut off, cannot confirm a read */
    h_isolate(c, 1, true);
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, 1), 300), 0);
    h_pump(c);
    CU_ASSERT_FALSE(has_read(&c->nodes[1], 300, &idx));
    /* the new leader: a read before its no-op commits waits for it */
    raft_id l = 0;
    for (int round = 0; round < 200 && l == 0; round++) {
        h_tick(c, 2, 1);
        h_tick(c, 3, 1);
        for (int k = 0; k < 20 && l == 0; k++) {
            h_process(c);
            h_deliver(c);
            l = h_role(c, 2) == RAFT_LEADER ? 2 : h_role(c, 3) == RAFT_LEADER ? 3 : 0;
        }
    }
    CU_ASSERT_FATAL(l != 0);
    CU_ASSERT_EQUAL(h_commit(c, l), 1);
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, l), 400), 0);
    h_process(c);
    CU_ASSERT_FALSE(has_read(&c->nodes[l], 400, &idx));
    h_pump(c);
    CU_ASSERT_TRUE(has_read(&c->nodes[l], 400, &idx));
    CU_ASSERT_EQUAL(idx, 2); /* the new leader's no-op */
    CU_ASSERT_EQUAL(h_commit(c, l), 2);
    /* the old leader learns the new term and fails its pending read */
    h_heal(c);
    h_tick(c, l, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_FOLLOWER);
    CU_ASSERT_EQUAL(read_failure(&c->nodes[1], 300), RAFT_ENOTLEADER);
    CU_ASSERT_FALSE(has_read(&c->nodes[1], 300, &idx));
    h_cluster_free(c);
}

/* A follower behind the leader's compacted log receives and installs a snapshot. */
static void test_snapshot_install(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    h_isolate(c, 3, true);
    for (int i = 0; i < 10; i++) {
        char buf[16];
        snprintf(buf, sizeof(buf), "e%d", i);
        CU_ASSERT_EQUAL(h_propose(c, 1, buf), 0);
    }
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 1), 11);
    struct raft_status st;
    h_status(c, 1, &st);
    for (raft_id id = 1; id <= 2; id++) {
        CU_ASSERT_EQUAL(c->nodes[id].applied, 11);
        CU_ASSERT_EQUAL(
            raft_mem_storage_create_snapshot(c->nodes[id].ms, 11, &st.conf, "snap-11", 7), 0);
        raft_compacted(h_raft(c, id), 11);
    }
    h_heal(c);
    h_tick_all(c, 3);
    CU_ASSERT_EQUAL(c->nodes[3].snapshot_index, 11);
    CU_ASSERT_STRING_EQUAL(c->nodes[3].snapshot_data, "snap-11");
    CU_ASSERT_EQUAL(h_commit(c, 3), 11);
    CU_ASSERT_EQUAL(c->nodes[3].n_applied, 1); /* only the no-op before the cut */
    CU_ASSERT_EQUAL(h_propose(c, 1, "after"), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 3), 12);
    CU_ASSERT_EQUAL(c->nodes[3].applied, 12);
    CU_ASSERT_STRING_EQUAL(c->nodes[3].log[1].data, "after");
    h_status(c, 3, &st);
    CU_ASSERT_EQUAL(st.first_index, 12);
    CU_ASSERT_EQUAL(st.conf.n_voters, 3);
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.progress[2].state, RAFT_PROGRESS_REPLICATE);
    CU_ASSERT_EQUAL(st.progress[2].match, 12);
    /* a restarted follower resumes from its snapshot without re-applying */
    h_restart(c, 3);
    h_tick_all(c, 2);
    CU_ASSERT_EQUAL(h_commit(c, 3), 12);
    CU_ASSERT_EQUAL(c->nodes[3].n_applied, 2);
    h_cluster_free(c);
}

static int propose_cc(struct h_cluster *c, raft_id at, uint8_t type, raft_id node)
{
    struct raft_conf_change cc = {.type = type, .node = node};
    return raft_propose_conf_change(h_raft(c, at), &cc, NULL);
}

/* thesis 4.1: one single-server change at a time; a new leader first commits in its term. */
static void test_conf_change_one_at_a_time(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    raft_campaign(h_raft(c, 1));
    for (int k = 0; k < 10 && h_role(c, 1) != RAFT_LEADER; k++) {
        h_process(c);
        h_deliver(c);
    }
    CU_ASSERT_EQUAL_FATAL(h_role(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_ADD_LEARNER, 4), RAFT_ECONFPENDING);
    h_pump(c);
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_ADD_VOTER, 2), RAFT_ECONF);
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_PROMOTE, 2), RAFT_ECONF);
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_REMOVE, 9), RAFT_ECONF);
    CU_ASSERT_EQUAL(propose_cc(c, 2, RAFT_CC_ADD_LEARNER, 4), RAFT_ENOTLEADER);

    struct raft_status st;
    h_status(c, 1, &st);
    h_add_node(c, 4, &st.conf);
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_ADD_LEARNER, 4), 0);
    raft_index last = h_last(c, 1);
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_ADD_VOTER, 5), RAFT_ECONFPENDING);
    CU_ASSERT_EQUAL(h_last(c, 1), last);
    h_pump(c);
    h_tick_all(c, 2);
    for (raft_id id = 1; id <= 4; id++) {
        h_status(c, id, &st);
        CU_ASSERT_EQUAL(st.conf.n_learners, 1);
        CU_ASSERT_EQUAL(st.conf.learners[0], 4);
        CU_ASSERT_EQUAL(st.commit, 2);
    }
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_PROMOTE, 4), 0);
    h_pump(c);
    h_status(c, 4, &st);
    CU_ASSERT_EQUAL(st.conf.n_voters, 4);
    CU_ASSERT_EQUAL(st.conf.n_learners, 0);
    /* the leader removes itself and steps down once the change is applied */
    CU_ASSERT_EQUAL(propose_cc(c, 1, RAFT_CC_REMOVE, 1), 0);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, 1), RAFT_FOLLOWER);
    h_status(c, 2, &st);
    CU_ASSERT_EQUAL(st.conf.n_voters, 3);
    CU_ASSERT_EQUAL(st.commit, 4);
    raft_id rest[3] = {2, 3, 4};
    raft_id l = tick_until_leader(c, rest, 3);
    CU_ASSERT_NOT_EQUAL(l, 0);
    CU_ASSERT_EQUAL(h_term(c, l), 2);
    for (raft_id id = 1; id <= 4; id++) {
        CU_ASSERT_EQUAL(c->nodes[id].n_conf_errors, 0);
    }
    h_cluster_free(c);
}

static void test_proposal_errors(void)
{
    struct raft_config cfg = cfg_base();
    cfg.max_uncommitted_bytes = 100;
    cfg.max_entry_bytes = 150;
    struct h_cluster *c = h_cluster_new(3, 0, &cfg);
    CU_ASSERT_EQUAL(h_propose(c, 1, "x"), RAFT_ENOLEADER);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_propose(c, 2, "x"), RAFT_ENOTLEADER);
    h_isolate(c, 1, true);
    char big[200];
    memset(big, 'b', sizeof(big));
    raft_index idx = 0;
    CU_ASSERT_EQUAL(raft_propose(h_raft(c, 1), big, 60, &idx), 0);
    CU_ASSERT_EQUAL(idx, 2);
    CU_ASSERT_EQUAL(raft_propose(h_raft(c, 1), big, 60, &idx), RAFT_EBUDGET);
    CU_ASSERT_EQUAL(raft_propose(h_raft(c, 1), big, 151, &idx), RAFT_ETOOBIG);
    struct raft_buf two[2] = {{big, 30}, {big, 30}};
    CU_ASSERT_EQUAL(raft_propose_batch(h_raft(c, 1), two, 2, &idx), RAFT_EBUDGET);
    CU_ASSERT_EQUAL(h_last(c, 1), 2);
    CU_ASSERT_EQUAL(raft_propose(h_raft(c, 1), NULL, 0, &idx), 0); /* empty entries pass */
    CU_ASSERT_EQUAL(idx, 3);
    struct raft_status st;
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.uncommitted_bytes, 60);
    h_heal(c);
    h_tick(c, 1, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(h_commit(c, 1), 3);
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.uncommitted_bytes, 0);
    /* one proposal larger than the budget is accepted when nothing is uncommitted */
    CU_ASSERT_EQUAL(raft_propose(h_raft(c, 1), big, 150, &idx), 0);
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, 1), 2), 0);
    CU_ASSERT_EQUAL(h_propose(c, 1, "y"), RAFT_ETRANSFER);
    CU_ASSERT_EQUAL(h_last(c, 1), 4);
    struct raft_conf_change cc = {.type = RAFT_CC_ADD_LEARNER, .node = 5};
    CU_ASSERT_EQUAL(raft_propose_conf_change(h_raft(c, 1), &cc, NULL), RAFT_ETRANSFER);
    h_cluster_free(c);
}

static void test_single_node_and_restart(void)
{
    struct raft_config cfg = cfg_base();
    cfg.max_committed_bytes_per_ready = 250;
    struct h_cluster *c = h_cluster_new(1, 0, &cfg);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 1), 1);
    CU_ASSERT_EQUAL(h_commit(c, 1), 1);
    CU_ASSERT_EQUAL(raft_read_index(h_raft(c, 1), 5), 0);
    h_pump(c);
    raft_index idx = 0;
    CU_ASSERT_TRUE(has_read(&c->nodes[1], 5, &idx));
    CU_ASSERT_EQUAL(idx, 1);
    /* committed entries are paged by max_committed_bytes_per_ready */
    char buf[100];
    memset(buf, 'p', sizeof(buf));
    struct raft_buf five[5];
    for (int i = 0; i < 5; i++) {
        five[i].base = buf;
        five[i].len = sizeof(buf);
    }
    CU_ASSERT_EQUAL(raft_propose_batch(h_raft(c, 1), five, 5, &idx), 0);
    CU_ASSERT_EQUAL(idx, 2);
    size_t before = c->nodes[1].n_applied;
    h_process(c); /* persists them: the leader's own copy counts from its advance on */
    CU_ASSERT_EQUAL(c->nodes[1].n_applied - before, 0);
    CU_ASSERT_EQUAL(h_commit(c, 1), 6);
    h_process(c);
    CU_ASSERT_EQUAL(c->nodes[1].n_applied - before, 2);
    h_process(c);
    CU_ASSERT_EQUAL(c->nodes[1].n_applied - before, 4);
    h_process(c);
    CU_ASSERT_EQUAL(c->nodes[1].n_applied - before, 5);
    CU_ASSERT_FALSE(raft_has_ready(h_raft(c, 1)));
    /* a restart keeps term, vote and log, and does not re-apply */
    h_restart(c, 1);
    struct raft_status st;
    h_status(c, 1, &st);
    CU_ASSERT_EQUAL(st.role, RAFT_FOLLOWER);
    CU_ASSERT_EQUAL(st.term, 1);
    CU_ASSERT_EQUAL(st.vote, 1);
    CU_ASSERT_EQUAL(st.last_index, 6);
    CU_ASSERT_EQUAL(st.applied, 6);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    CU_ASSERT_EQUAL(h_term(c, 1), 2);
    CU_ASSERT_EQUAL(h_commit(c, 1), 7);
    CU_ASSERT_EQUAL(c->nodes[1].n_applied, 7);
    h_cluster_free(c);
}

/* Between raft_ready() and raft_advance() the host keeps stepping and proposing. */
static void test_pipelining(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    struct raft *r = h_raft(c, 1);
    CU_ASSERT_EQUAL(h_propose(c, 1, "one"), 0);
    struct raft_ready rd;
    CU_ASSERT_EQUAL(raft_ready(r, &rd), 0);
    CU_ASSERT_EQUAL(rd.n_entries, 1);
    CU_ASSERT_EQUAL(rd.n_msgs, 2);
    CU_ASSERT_TRUE(rd.must_sync);
    CU_ASSERT_FALSE(raft_has_ready(r)); /* a second raft_ready() now would abort (test_contract) */
    CU_ASSERT_EQUAL(h_propose(c, 1, "two"), 0); /* goes to the next ready */
    CU_ASSERT_EQUAL(memcmp(rd.entries[0].data.base, "one", 3), 0);
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[1].ms, rd.entries, rd.n_entries), 0);
    raft_advance(r, &rd);
    CU_ASSERT_EQUAL(raft_ready(r, &rd), 0);
    CU_ASSERT_EQUAL(rd.n_entries, 1);
    CU_ASSERT_EQUAL(rd.entries[0].index, 3);
    CU_ASSERT_EQUAL(memcmp(rd.entries[0].data.base, "two", 3), 0);
    CU_ASSERT_EQUAL(rd.n_msgs, 2);
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[1].ms, rd.entries, rd.n_entries), 0);
    raft_advance(r, &rd);
    /* the messages of both readies were not delivered: followers catch up on heartbeats */
    h_tick_all(c, 2);
    CU_ASSERT_EQUAL(h_commit(c, 2), 3);
    CU_ASSERT_STRING_EQUAL(c->nodes[2].log[2].data, "two");
    h_cluster_free(c);
}

/* A follower takes the messages of one ready addressed to it, persists its own ready and
 * returns its answer to the leader (an APPEND_RESP, stepped into the leader). */
static void follower_round(struct h_cluster *c, raft_id id, const struct raft_ready *lead_rd)
{
    struct raft *f = h_raft(c, id);
    for (size_t i = 0; i < lead_rd->n_msgs; i++)
        if (lead_rd->msgs[i].to == id)
            CU_ASSERT_EQUAL(raft_step(f, &lead_rd->msgs[i]), 0);
    struct raft_ready rd;
    CU_ASSERT_EQUAL_FATAL(raft_ready(f, &rd), 0);
    CU_ASSERT_EQUAL(rd.n_msgs_early, 0); /* a follower's answers wait for its sync */
    if (rd.has_hard_state)
        raft_mem_storage_set_hard_state(c->nodes[id].ms, &rd.hard_state);
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[id].ms, rd.entries, rd.n_entries), 0);
    struct raft_msg resp[8];
    size_t n = 0;
    for (size_t i = 0; i < rd.n_msgs && n < 8; i++)
        resp[n++] = rd.msgs[i]; /* APPEND_RESP: no entries, a shallow copy is enough */
    raft_advance(f, &rd);
    for (size_t i = 0; i < n; i++)
        CU_ASSERT_EQUAL(raft_step(h_raft(c, 1), &resp[i]), 0);
}

/* Thesis 10.2.1: a leader's appends may leave before its own write is durable; its own copy
 * then counts towards the commit only from raft_advance on. */
static void test_leader_writes_in_parallel(void)
{
    struct h_cluster *c = h_cluster_new(3, 0, NULL);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    struct raft *r = h_raft(c, 1);
    raft_index commit0 = h_commit(c, 1);
    CU_ASSERT_EQUAL(h_propose(c, 1, "one"), 0);
    struct raft_ready rd;
    CU_ASSERT_EQUAL_FATAL(raft_ready(r, &rd), 0);
    CU_ASSERT_EQUAL(rd.n_entries, 1);
    CU_ASSERT_EQUAL(rd.n_msgs, 2);
    CU_ASSERT_EQUAL(rd.n_msgs_early, 2);
    raft_index idx = rd.entries[0].index;
    /* one follower has it durably, the leader not yet: no majority of durable copies */
    follower_round(c, 2, &rd);
    struct raft_status st;
    raft_status(r, &st);
    CU_ASSERT_EQUAL(st.commit, commit0);
    /* the leader's write completes: leader + follower 2 */
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[1].ms, rd.entries, rd.n_entries), 0);
    raft_advance(r, &rd);
    raft_status(r, &st);
    CU_ASSERT_EQUAL(st.commit, idx);
    CU_ASSERT_EQUAL(raft_check_invariants(r, NULL), 0);
    h_pump(c);

    /* two followers durable commit without the leader's write */
    commit0 = h_commit(c, 1);
    CU_ASSERT_EQUAL(h_propose(c, 1, "two"), 0);
    CU_ASSERT_EQUAL_FATAL(raft_ready(r, &rd), 0);
    CU_ASSERT_EQUAL(rd.n_msgs_early, 2);
    idx = rd.entries[0].index;
    follower_round(c, 2, &rd);
    raft_status(r, &st);
    CU_ASSERT_EQUAL(st.commit, commit0);
    follower_round(c, 3, &rd);
    raft_status(r, &st);
    CU_ASSERT_EQUAL(st.commit, idx);
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[1].ms, rd.entries, rd.n_entries), 0);
    raft_advance(r, &rd);
    h_pump(c);
    CU_ASSERT_STRING_EQUAL(c->nodes[1].log[c->nodes[1].n_applied - 1].data, "two");

    h_cluster_free(c);

    /* a ready that changes the term or vote sends nothing early, not even a leader's appends:
     * a single voter elects itself and appends to its learner within one ready */
    c = h_cluster_new(1, 1, NULL);
    r = h_raft(c, 1);
    CU_ASSERT_EQUAL(raft_campaign(r), 0);
    CU_ASSERT_EQUAL_FATAL(raft_ready(r, &rd), 0);
    CU_ASSERT_TRUE(rd.has_hard_state && rd.hard_state.term == 1 && rd.hard_state.vote == 1);
    CU_ASSERT_TRUE(rd.n_msgs > 0 && rd.msgs[0].type == RAFT_MSG_APPEND);
    CU_ASSERT_EQUAL(rd.n_msgs_early, 0);
    raft_mem_storage_set_hard_state(c->nodes[1].ms, &rd.hard_state); /* contract step 2 */
    CU_ASSERT_EQUAL(raft_mem_storage_append(c->nodes[1].ms, rd.entries, rd.n_entries), 0);
    raft_advance(r, &rd);
    h_cluster_free(c);
}

/* Random drops for the randomized test: splitmix64 state and a drop rate in percent. */
struct chaos {
    uint64_t rng;
    unsigned drop_pct;
};

static uint64_t chaos_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static bool chaos_filter(void *arg, struct raft_msg *m)
{
    struct chaos *ch = arg;
    (void)m;
    return chaos_next(&ch->rng) % 100 < ch->drop_pct;
}

/* Checks that applied entries agree across nodes and that a term has at most one leader. */
static bool check_safety(struct h_cluster *c, int n, raft_id *leader_of_term, size_t terms)
{
    bool ok = true;
    for (raft_id id = 1; id <= (raft_id)n; id++) {
        struct raft_status st;
        h_status(c, id, &st);
        if (st.role == RAFT_LEADER && st.term < terms) {
            if (leader_of_term[st.term] != 0 && leader_of_term[st.term] != id) {
                ok = false;
            }
            leader_of_term[st.term] = id;
        }
        for (raft_id o = 1; o < id; o++) {
            size_t k = c->nodes[id].n_applied < c->nodes[o].n_applied ? c->nodes[id].n_applied
                                                                      : c->nodes[o].n_applied;
            k = k < H_LOG_MAX ? k : H_LOG_MAX;
            for (size_t i = 0; i < k; i++) {
                const struct h_applied *a = &c->nodes[id].log[i];
                const struct h_applied *b = &c->nodes[o].log[i];
                if (a->index != b->index || a->term != b->term || strcmp(a->data, b->data)) {
                    ok = false;
                }
            }
        }
    }
    return ok;
}

/* One random action: a cut, a heal, a restart, a proposal, a read or a tick. */
static void random_step(struct h_cluster *c, struct chaos *ch, uint64_t seed, int step,
                        int *proposals)
{
    uint64_t x = chaos_next(&ch->rng);
    raft_id who = (raft_id)(1 + x % 5);
    switch ((x >> 8) % 16) {
    case 0:
        h_isolate(c, who, true);
        break;
    case 1:
        h_heal(c);
        break;
    case 2:
        if (((x >> 16) % 8) == 0) {
            h_restart(c, who);
        }
        break;
    case 3:
    case 4:
    case 5:
        if (*proposals < 400 && h_role(c, who) == RAFT_LEADER) {
            char buf[24];
            snprintf(buf, sizeof(buf), "s%llu-%d", (unsigned long long)seed, step);
            *proposals += h_propose(c, who, buf) == 0;
        }
        break;
    case 6:
        raft_read_index(h_raft(c, who), (uint64_t)step);
        break;
    default:
        h_tick_all(c, 1);
        break;
    }
    h_pump(c);
}

/* After healing: one leader, and every node committed and applied the same prefix. */
static bool converged(struct h_cluster *c, raft_id *leader_of_term)
{
    raft_id l = 0;
    for (raft_id id = 1; id <= 5; id++) {
        l = h_role(c, id) == RAFT_LEADER ? id : l;
    }
    bool ok = l != 0 && check_safety(c, 5, leader_of_term, 4096);
    for (raft_id id = 1; id <= 5 && ok; id++) {
        ok = h_commit(c, id) == h_commit(c, l) && c->nodes[id].applied == h_commit(c, l);
    }
    return ok;
}

/* Random ticks, proposals, reads, partitions, drops and restarts: state machine safety
 * (thesis 3.6.3) and election safety must hold, and the cluster must recover when healed. */
static void test_randomized(void)
{
    for (uint64_t seed = 1; seed <= 12; seed++) {
        struct raft_config cfg = cfg_base();
        cfg.seed = seed;
        cfg.disable_pre_vote = seed % 3 == 0;
        struct h_cluster *c = h_cluster_new(5, 0, &cfg);
        struct chaos ch = {.rng = seed * 7919, .drop_pct = 10};
        c->filter = chaos_filter;
        c->filter_arg = &ch;
        raft_id leader_of_term[4096] = {0};
        int proposals = 0;
        bool ok = true;
        for (int step = 0; step < 1500 && ok; step++) {
            random_step(c, &ch, seed, step, &proposals);
            ok = check_safety(c, 5, leader_of_term, 4096);
        }
        h_heal(c);
        c->filter = NULL;
        h_tick_all(c, 60);
        ok = ok && converged(c, leader_of_term);
        if (!ok) {
            fprintf(stderr, "\nrandomized raft test failed: seed %llu\n", (unsigned long long)seed);
        }
        CU_ASSERT_TRUE(ok);
        CU_ASSERT_TRUE(proposals > 20); /* the run did real work */
        h_cluster_free(c);
    }
}

/* A vote request from node `from` at `term` for a log ending at (index, log_term), stepped
 * straight into node `to`; returns whether `to` granted it (its recorded vote). */
static bool vote_granted(struct h_cluster *c, raft_id to, raft_id from, raft_term term,
                         raft_index index, raft_term log_term)
{
    struct raft_msg m = {.type = RAFT_MSG_VOTE, .from = from, .to = to, .term = term,
                         .index = index, .log_term = log_term};
    CU_ASSERT_EQUAL(raft_step(h_raft(c, to), &m), 0);
    struct raft_status st;
    h_status(c, to, &st);
    return st.term == term && st.vote == from;
}

/* thesis 6.4.1: a leader lease from acknowledged heartbeats; it ends election_tick - 2 - drift
 * ticks after the round a quorum acknowledged was sent, at once on a transfer, and a replica
 * that just started keeps the promise a lease relies on. */
static void test_read_lease(void)
{
    struct raft_config cfg = cfg_base();
    cfg.lease = true;
    struct h_cluster *c = h_cluster_new(3, 0, &cfg);
    /* just started: every replica refuses votes for an election timeout */
    CU_ASSERT_FALSE(vote_granted(c, 2, 1, 5, 1, 1));
    CU_ASSERT_EQUAL(h_term(c, 2), 0);
    raft_id ids[] = {1, 2, 3};
    raft_id l = tick_until_leader(c, ids, 3);
    h_pump(c);
    raft_id f = l == 1 ? 2 : 1;
    raft_index idx = 0;
    unsigned left = 0;
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, f), &idx, &left), RAFT_ENOTLEADER);
    /* elected, its no-op committed, no heartbeat answered yet */
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), &idx, &left), RAFT_ENOLEASE);
    h_tick(c, l, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), &idx, &left), 0);
    CU_ASSERT_EQUAL(idx, h_commit(c, l));
    CU_ASSERT_EQUAL(left, 10 - 2 - 1); /* election_tick 10, drift 1 */
    /* cut off: it keeps the lease for 7 more ticks, not one more */
    h_isolate(c, l, true);
    for (unsigned i = 1; i < 7; i++) {
        h_tick(c, l, 1);
        h_pump(c);
        CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), NULL, &left), 0);
        CU_ASSERT_EQUAL(left, 7 - i);
    }
    h_tick(c, l, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, l), RAFT_LEADER);
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), NULL, NULL), RAFT_ENOLEASE);
    /* back: the next answered heartbeat renews it */
    h_isolate(c, l, false);
    h_tick(c, l, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), NULL, &left), 0);
    /* a transfer ends it for the rest of the term (the target's election ignores leases) */
    CU_ASSERT_EQUAL(raft_transfer_leader(h_raft(c, l), f), 0);
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), NULL, NULL), RAFT_ENOLEASE);
    h_pump(c);
    CU_ASSERT_EQUAL(h_role(c, f), RAFT_LEADER);
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, l), NULL, NULL), RAFT_ENOTLEADER);
    h_tick(c, f, 1);
    h_pump(c);
    CU_ASSERT_EQUAL(raft_read_lease(h_raft(c, f), NULL, NULL), 0);

    /* a restarted follower refuses votes for an election timeout, then votes again */
    raft_id o = 6 - l - f;
    h_restart(c, o);
    h_isolate(c, o, true);
    raft_term t = h_term(c, o);
    raft_index last = h_last(c, o);
    CU_ASSERT_FALSE(vote_granted(c, o, l, t + 1, last, t));
    CU_ASSERT_EQUAL(h_term(c, o), t);
    h_tick(c, o, 9);
    CU_ASSERT_FALSE(vote_granted(c, o, l, t + 1, last, t));
    h_tick(c, o, 1);
    CU_ASSERT_TRUE(vote_granted(c, o, l, t + 1, last, t));
    h_cluster_free(c);

    struct raft_config bad = cfg_base();
    bad.lease = true;
    bad.disable_check_quorum = true;
    struct raft_mem_storage *ms = NULL;
    CU_ASSERT_EQUAL_FATAL(raft_mem_storage_new(&ms), 0);
    bad.id = 1;
    bad.storage = raft_mem_storage_get(ms);
    struct raft *r = NULL;
    CU_ASSERT_EQUAL(raft_new(&bad, &r), RAFT_EINVAL); /* a lease needs check-quorum */
    raft_mem_storage_free(ms);
}

/* A replica re-created empty after its removal votes as the log it lost would have: a
 * candidate behind that log gets no vote from it. */
static void test_vote_floor(void)
{
    struct raft_config cfg = cfg_base();
    struct h_cluster *c = h_cluster_new(3, 0, &cfg);
    CU_ASSERT_EQUAL(h_campaign(c, 1), RAFT_LEADER);
    for (int i = 0; i < 3; i++) {
        CU_ASSERT_EQUAL(h_propose(c, 1, "e"), 0);
    }
    h_pump(c);
    raft_index last = h_last(c, 3);
    raft_term t = h_term(c, 3);
    CU_ASSERT(last >= 4); /* the no-op and three entries */
    struct raft_status st;
    h_status(c, 3, &st);
    c->cfg.vote_floor_index = last;
    c->cfg.vote_floor_term = t;
    h_wipe(c, 3, &st.conf);
    c->cfg.vote_floor_index = 0;
    c->cfg.vote_floor_term = 0;
    h_isolate(c, 3, true);
    CU_ASSERT_EQUAL(h_last(c, 3), 0);
    /* a stale candidate (log ending at index 2) is refused, an up-to-date one is not */
    CU_ASSERT_FALSE(vote_granted(c, 3, 2, t + 1, 2, t));
    CU_ASSERT_EQUAL(h_term(c, 3), t + 1); /* the term moved, the vote did not */
    CU_ASSERT_TRUE(vote_granted(c, 3, 2, t + 2, last, t));
    h_cluster_free(c);
}

void tests_scenarios_add(CU_pSuite s)
{
    CU_add_test(s, "election with pre-vote", test_election);
    CU_add_test(s, "stale log loses votes", test_stale_log_loses_votes);
    CU_add_test(s, "higher term forces step-down", test_higher_term_steps_down);
    CU_add_test(s, "conflicting follower suffix is truncated", test_conflicting_suffix_truncated);
    CU_add_test(s, "figure 8: old-term entries commit only with a current-term entry",
                test_figure8);
    CU_add_test(s, "learner never votes or campaigns", test_learner);
    CU_add_test(s, "a follower that lost its log is filled again", test_follower_lost_its_log);
    CU_add_test(s, "pre-vote: a rejoining node does not disrupt", test_prevote_rejoin);
    CU_add_test(s, "check-quorum: an isolated leader steps down", test_check_quorum);
    CU_add_test(s, "transfer to a lagging node", test_transfer_lagging);
    CU_add_test(s, "transfer aborts after an election timeout", test_transfer_abort);
    CU_add_test(s, "read index across a leader change", test_read_index_leader_change);
    CU_add_test(s, "snapshot install behind compaction", test_snapshot_install);
    CU_add_test(s, "one pending conf change at a time", test_conf_change_one_at_a_time);
    CU_add_test(s, "proposal errors append nothing", test_proposal_errors);
    CU_add_test(s, "single node, paging, restart", test_single_node_and_restart);
    CU_add_test(s, "pipelining between ready and advance", test_pipelining);
    CU_add_test(s, "leader writes in parallel with replication", test_leader_writes_in_parallel);
    CU_add_test(s, "randomized: safety under drops, partitions, restarts", test_randomized);
    CU_add_test(s, "leader lease: renewal, expiry, transfer, restart hold", test_read_lease);
    CU_add_test(s, "a re-created replica votes by its old log", test_vote_floor);
}
