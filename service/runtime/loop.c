/* loop.c - the raft loop: proposals and reads into the cores, ticks, group commit of every ready
 * group, hand-off to apply. */
#include <stdlib.h>
#include <string.h>
#include <sys/timerfd.h>
#include <unistd.h>

#include "service/fault/fault.h"
#include "service/runtime/apply.h"
#include "service/runtime/ctl.h"
#include "service/runtime/facts.h"
#include "service/runtime/keylease.h"
#include "service/runtime/lease.h"
#include "service/runtime/loop.h"
#include "service/runtime/metrics.h"
#include "service/runtime/peer.h"
#include "service/runtime/pending.h"
#include "service/runtime/request.h"
#include "service/runtime/routes.h"
#include "service/runtime/snapshot.h"
#include "service/runtime/watch.h"

#define PROPOSE_BATCH_MAX 256

/* ---- Proposals ---- */

int rt_raft_err_code(int rc)
{
    switch (rc) {
    case RAFT_ENOLEADER:
        return SLOTD_ENO_LEADER;
    case RAFT_ENOTLEADER:
        return SLOTD_ENOT_LEADER;
    case RAFT_ETRANSFER:
        return SLOTD_ENO_LEADER; /* retriable: a new leader takes over shortly */
    case RAFT_EBUDGET:
    case RAFT_EREADFULL:
        return SLOTD_EQUEUE_FULL;
    case RAFT_ETOOBIG:
        return SLOTD_EINVALID_FIELD;
    default:
        return SLOTD_EINTERNAL;
    }
}

/* NOT_LEADER with a leader hint (node, address, group, term) when one is known. */
void rt_fail_not_leader(struct runtime *rt, struct rt_group *g, struct rt_request *r,
                        const char *what)
{
    struct slotd_error e;
    if (g->leader == 0 || g->leader == rt->opts.node_id) {
        slotd_error_set(&e, SLOTD_ENO_LEADER, "group %u: %s: no leader known", g->id, what);
        e.retry_after_ms = 100;
    } else {
        slotd_error_set(&e, SLOTD_ENOT_LEADER, "group %u: %s: node %llu is the leader", g->id, what,
                        (unsigned long long)g->leader);
        const struct route_node *n = route_snapshot_node(rt->route_base, g->leader);
        slotd_error_leader_hint(&e, g->leader, n ? n->address : "", g->id, g->term);
    }
    rpc_call_fail(r->call, &e);
    free(r);
}

/* Proposes a run of requests of one group in one raft_propose_batch call. */
static void propose_run(struct runtime *rt, struct rt_group *g, struct rt_request **run, size_t n)
{
    struct raft_buf bufs[PROPOSE_BATCH_MAX] = {{0}};
    for (size_t i = 0; i < n; i++) {
        bufs[i].base = run[i]->data;
        bufs[i].len = run[i]->len;
    }
    raft_index first = 0;
    int rc = raft_propose_batch(g->raft, bufs, n, &first);
    if (rc != 0) {
        for (size_t i = 0; i < n; i++) {
            if (rc == RAFT_ENOTLEADER || rc == RAFT_ENOLEADER)
                rt_fail_not_leader(rt, g, run[i], "propose");
            else
                rt_fail(run[i], rt_raft_err_code(rc), "group %u: propose: %s", g->id,
                        raft_strerror(rc));
        }
        return;
    }
    /* The entries' term is the core's current term. g->term (from the last ready taken) can
     * lag it while a storage batch is in flight: recording that would make the commit of our
     * own entry look like another entry superseding it (a NOT_LEADER answer for an applied
     * write). */
    raft_term term = raft_current_term(g->raft);
    rt->linger_entries += n;
    for (size_t i = 0; i < n; i++) {
        run[i]->index = first + i;
        run[i]->term = term;
        rt_pending_add(&g->proposals, run[i]);
    }
}

/* ---- Reads ---- */

static void read_index_round(struct runtime *rt, struct rt_group *g, struct rt_list *reads)
{
    struct rt_read_round *round = malloc(sizeof(*round));
    if (round == NULL) {
        rt_fail_list(reads, SLOTD_EINTERNAL, "out of memory");
        return;
    }
    round->ctx = ++rt->next_read_ctx;
    int rc = raft_read_index(g->raft, round->ctx);
    if (rc != 0) {
        free(round);
        struct rt_request *r;
        while ((r = rt_list_pop(reads)) != NULL) {
            if (rc == RAFT_ENOLEADER || rc == RAFT_ENOTLEADER)
                rt_fail_not_leader(rt, g, r, "read index");
            else
                rt_fail(r, rt_raft_err_code(rc), "group %u: read index: %s", g->id,
                        raft_strerror(rc));
        }
        return;
    }
    memset(&round->reads, 0, sizeof(round->reads));
    rt_list_concat(&round->reads, reads);
    round->next = g->rounds;
    g->rounds = round;
}

static void handle_read(struct runtime *rt, struct rt_group *g, struct rt_request *r,
                        struct rt_list *linearizable)
{
    r->term = raft_current_term(g->raft);
    if (SLOTD_FAULT_UNSAFE_READS() && r->consistency != SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL)
        r->consistency = SLOTD__V1__CONSISTENCY__CONSISTENCY_LEADER_LOCAL; /* tests/fault only */
    switch (r->consistency) {
    case SLOTD__V1__CONSISTENCY__CONSISTENCY_LOCAL:
        r->read_index = r->min_applied;
        rt_list_push(&g->waiting_reads, r);
        return;
    case SLOTD__V1__CONSISTENCY__CONSISTENCY_LEADER_LOCAL:
        if (g->role != RAFT_LEADER) {
            rt_fail_not_leader(rt, g, r, "leader-local read");
            return;
        }
        r->read_index = 0;
        rt_list_push(&g->waiting_reads, r);
        return;
    default:
        rt_list_push(&linearizable[g->id], r);
    }
}

/* Requests drained from the inbound queue, in arrival order per group. */
void rt_handle_requests(struct runtime *rt, struct rt_list *reqs)
{
    RT_ASSERT_LOOP(rt);
    struct rt_list *lin = calloc(RT_GROUPS_CAP, sizeof(*lin));
    struct rt_request *run[PROPOSE_BATCH_MAX];
    struct rt_group *run_group = NULL;
    size_t n_run = 0;
    struct rt_request *r;
    while ((r = rt_list_pop(reqs)) != NULL) {
        if (r->kind != RT_PROPOSE && r->kind != RT_READ) {
            rt_handle_peer_request(rt, r);
            continue;
        }
        struct rt_group *g = &rt->groups[r->group];
        if (!g->hosted) { /* closed after the request was queued */
            rt_fail(r, SLOTD_EWRONG_GROUP, "group %u: the replica left this node", r->group);
            continue;
        }
        if (r->kind == RT_READ) {
            if (lin == NULL)
                rt_fail(r, SLOTD_EINTERNAL, "out of memory");
            else
                handle_read(rt, g, r, lin);
            continue;
        }
        if (r->group == 0 && (r = rt_ctl_vet_request(rt, r)) == NULL)
            continue; /* a controller command the leader's own facts refute (facts.c) */
        size_t waiting = g->proposals.len + (run_group == g ? n_run : 0);
        if (waiting >= rt->opts.group_proposals_max) { /* a hot group: the others go on */
            struct slotd_error e;
            slotd_error_set(&e, SLOTD_EQUEUE_FULL,
                            "group %u: %zu proposals are waiting to commit, the limit is %zu "
                            "(--group-proposals-max); nothing was proposed",
                            g->id, waiting, rt->opts.group_proposals_max);
            e.limit = rt->opts.group_proposals_max; /* ErrorDetail.limit */
            e.retry_after_ms = 100;
            rpc_call_fail(r->call, &e);
            free(r);
            continue;
        }
        if (run_group != g || n_run == PROPOSE_BATCH_MAX) {
            if (n_run > 0)
                propose_run(rt, run_group, run, n_run);
            run_group = g;
            n_run = 0;
        }
        run[n_run++] = r;
    }
    if (n_run > 0)
        propose_run(rt, run_group, run, n_run);
    if (lin == NULL)
        return;
    for (size_t i = 0; i < RT_GROUPS_CAP; i++)
        if (lin[i].len > 0)
            read_index_round(rt, &rt->groups[i], &lin[i]);
    free(lin);
}

/* Requests are answered before their deadline, so a caller learns what
 * happened instead of timing out: LOCAL reads waiting for an index, reads of
 * a ReadIndex round that never completed, and proposals that never
 * committed (they still may: UNKNOWN_OUTCOME). */
static bool due(const struct rt_request *r, int64_t now)
{
    return r->deadline_ms != INT64_MAX && r->deadline_ms - RT_DEADLINE_MARGIN_MS <= now;
}

static void expire_list(struct rt_group *g, struct rt_list *l, int64_t now, int code,
                        const char *what)
{
    struct rt_list keep = {0};
    struct rt_request *r;
    while ((r = rt_list_pop(l)) != NULL) {
        if (due(r, now))
            rt_fail(r, code, "group %u: %s", g->id, what);
        else
            rt_list_push(&keep, r);
    }
    *l = keep;
}

static void expire_requests(struct rt_group *g, int64_t now)
{
    expire_list(g, &g->waiting_reads, now, SLOTD_ETIMEOUT,
                "the replica did not reach the read's index before the deadline");
    for (struct rt_read_round *round = g->rounds; round != NULL; round = round->next)
        expire_list(g, &round->reads, now, SLOTD_ENO_LEADER,
                    "leadership could not be confirmed by a quorum before the deadline");
    expire_list(g, &g->proposals, now, SLOTD_EUNKNOWN_OUTCOME,
                "the proposal did not commit before the deadline; it may still commit");
}

void rt_tick(struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    int64_t now = rt_now_ms();
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (!g->hosted)
            continue;
        if (g->campaign_in_ticks > 0 && --g->campaign_in_ticks == 0 && g->leader == 0 &&
            g->term <= 1)
            raft_campaign_fresh(g->raft); /* still the bootstrap term: no lease to respect */
        raft_tick(g->raft);
        g->raft_ticks++;
        g->tick_ms[g->raft_ticks % RT_LEASE_TICKS] = now;
        rt_lease_publish(rt, g);
        expire_requests(&rt->groups[i], now);
    }
    rt_expire_leaders(rt, now);
    rt_watch_expire(rt, now);
    rt_keylease_tick(rt, now);
    rt_snap_recv_expire(rt, now);
    rt_ctl_view_refresh(rt);
    rt_ctl_waiters_run(rt, false); /* the expired ones */
}

/* ---- Leadership facts ---- */

static void on_soft_state(struct runtime *rt, struct rt_group *g, const struct raft_soft_state *ss)
{
    struct raft_status st;
    raft_status(g->raft, &st);
    bool was_leader = g->role == RAFT_LEADER;
    if (ss->role != RAFT_LEADER)
        rt_lease_clear(g);
    if (ss->leader != 0 && ss->leader != g->leader)
        metrics_counter_add(g->metrics.leader_changes, 1);
    g->leader = ss->leader;
    g->role = ss->role;
    g->term = st.term;
    if (!was_leader && g->role == RAFT_LEADER) {
        /* A leader that just took over (often from a voter handing its groups off before it
         * stops) does not hand leadership to the preferred leader at once: that voter would
         * get it back while it shuts down. */
        int64_t settle = rt_now_ms() + RT_LEADER_SETTLE_MS;
        if (g->converge_after_ms < settle)
            g->converge_after_ms = settle;
    }
    atomic_store_explicit(&g->pub_term, g->term, memory_order_relaxed);
    RT_LOG("info", "msg=\"leader changed\" node=%llu group=%u leader=%llu term=%llu role=%s",
           (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)g->leader,
           (unsigned long long)g->term, raft_role_name(g->role));
    if (was_leader && g->role != RAFT_LEADER) {
        /* A deposed leader cannot tell yet whether its appended proposals
         * commit: they stay in its log and may still be committed by the next
         * leader (or by this node if re-elected). They stay pending and are
         * resolved when their index commits here: the same term means success,
         * another term means they certainly did not (waiter_for). A bound makes
         * sure each gets an answer (UNKNOWN_OUTCOME at the latest then). */
        int64_t bound = rt_now_ms() + RT_DEPOSED_WAIT_MS;
        for (struct rt_request *r = g->proposals.head; r != NULL; r = r->next)
            if (r->deadline_ms > bound)
                r->deadline_ms = bound;
        if (g->transferring)
            RT_LOG("info", "msg=\"leadership transferred\" node=%llu group=%u to=%llu term=%llu",
                   (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)g->leader,
                   (unsigned long long)g->term);
    }
    g->transferring = false;
    rt_publish_route(rt);
}

static struct rt_read_round *take_round(struct rt_group *g, uint64_t ctx)
{
    for (struct rt_read_round **pp = &g->rounds; *pp != NULL; pp = &(*pp)->next) {
        if ((*pp)->ctx == ctx) {
            struct rt_read_round *r = *pp;
            *pp = r->next;
            return r;
        }
    }
    return NULL;
}

/* ---- After the batch is durable: messages, committed entries, reads ---- */

/* Answers the proposals a committed entry decides; returns the one it is, if any. A conf change
 * is nobody's proposal here (term 0 matches none). */
static struct rt_request *waiter_for(struct rt_group *g, uint64_t index, uint64_t term)
{
    struct rt_list lost = {0}, unknown = {0};
    struct rt_request *w = rt_pending_match(&g->proposals, index, term, &lost, &unknown);
    struct rt_request *p;
    while ((p = rt_list_pop(&lost)) != NULL)
        rt_fail(p, SLOTD_ENOT_LEADER, "group %u: proposal at index %llu was superseded", g->id,
                (unsigned long long)p->index);
    while ((p = rt_list_pop(&unknown)) != NULL)
        rt_fail(p, SLOTD_EUNKNOWN_OUTCOME,
                "group %u: index %llu of the proposal was passed unseen; it may have committed",
                g->id, (unsigned long long)p->index);
    return w;
}

/* A new, empty job collects what the turn hands to the apply stage. */
static void start_building(struct runtime *rt)
{
    rt->building = rt_apply_job_new(rt);
    if (rt->building == NULL) {
        RT_LOG("fatal", "msg=\"out of memory\"");
        abort();
    }
}

/* The job being built is full: it goes to the apply stage now, without the turn's reads (they
 * ride on the turn's last job, submit_building), and a new one collects the rest. */
static void seal_building(struct runtime *rt)
{
    rt_apply_submit(rt, rt->building);
    start_building(rt);
}

static void hand_committed(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_committed; i++) {
        const struct raft_entry *e = &rd->committed[i];
        struct rt_request *w = NULL;
        struct raft_conf_state cs;
        if (e->type == RAFT_ENTRY_CONF_CHANGE) {
            /* Applied in the core now, in log order; the apply stage records
             * the membership for snapshots taken at this index. */
            waiter_for(g, e->index, 0);
            raft_apply_conf_change(g->raft, e, &cs);
            struct store_conf_state scs = {.n_voters = cs.n_voters, .n_learners = cs.n_learners};
            memcpy(scs.voters, cs.voters, cs.n_voters * sizeof(uint64_t));
            memcpy(scs.learners, cs.learners, cs.n_learners * sizeof(uint64_t));
            store_log_batch_put_conf_state(rt->log_batch, g->id, &scs);
        } else {
            w = waiter_for(g, e->index, e->term);
        }
        if (rt_apply_job_add(rt->building, g, e, w,
                             e->type == RAFT_ENTRY_CONF_CHANGE ? &cs : NULL) != 0) {
            RT_LOG("fatal", "msg=\"out of memory building the apply job\" group=%u", g->id);
            abort();
        }
        if (rt->building->n_entries >= RT_APPLY_JOB_ENTRIES_MAX ||
            rt->building->arena_len >= RT_APPLY_JOB_BYTES_MAX)
            seal_building(rt); /* the rest of this turn goes into the next job */
    }
    if (rd->n_committed > 0)
        g->applied_submitted = rd->committed[rd->n_committed - 1].index;
}

static void hand_reads(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd)
{
    for (size_t i = 0; i < rd->n_reads; i++) {
        struct rt_read_round *round = take_round(g, rd->reads[i].context);
        if (round == NULL)
            continue;
        for (struct rt_request *r = round->reads.head; r; r = r->next)
            r->read_index = rd->reads[i].index;
        rt_list_concat(&g->waiting_reads, &round->reads);
        free(round);
    }
    for (size_t i = 0; i < rd->n_read_failures; i++) {
        struct rt_read_round *round = take_round(g, rd->read_failures[i].context);
        if (round == NULL)
            continue;
        /* The leader was lost during the round: a hint when a new leader is
         * known, NO_LEADER (UNAVAILABLE) otherwise. */
        struct rt_request *r;
        while ((r = rt_list_pop(&round->reads)) != NULL)
            rt_fail_not_leader(rt, g, r, "leadership changed during the read");
        free(round);
    }
}

/* Reads whose index is covered by what was handed to the apply stage ride
 * on the job being built: they run after those entries are applied. */
static void attach_ready_reads(struct runtime *rt, struct rt_group *g)
{
    struct rt_list keep = {0};
    struct rt_request *r;
    while ((r = rt_list_pop(&g->waiting_reads)) != NULL) {
        if (r->read_index <= g->applied_submitted) {
            r->index = g->applied_submitted;
            rt_list_push(&rt->building->reads, r);
        } else {
            rt_list_push(&keep, r);
        }
    }
    g->waiting_reads = keep;
}

static void after_persist(struct runtime *rt, struct rt_group *g)
{
    struct raft_ready *rd = &g->rd;
    if (rd->has_snapshot) {
        /* The rows are installed; the core's storage only needs the position. */
        struct raft_snapshot pos = {.meta = rd->snapshot.meta};
        raft_mem_storage_apply_snapshot(g->mem, &pos);
        struct rt_list unknown = {0};
        rt_pending_passed(&g->proposals, pos.meta.index, &unknown);
        rt_fail_list(&unknown, SLOTD_EUNKNOWN_OUTCOME,
                     "a snapshot replaced the log here; the proposal may or may not be in it");
        if (pos.meta.index > g->applied_submitted)
            g->applied_submitted = pos.meta.index;
        if (pos.meta.index > g->applied)
            g->applied = pos.meta.index;
        if (g->id != 0) /* the changes the snapshot replaced are not in its history */
            rt_watch_reset(rt, g->id, pos.meta.index, true);
        rt_metrics_group(rt, g);
        RT_LOG("info", "msg=\"snapshot installed\" node=%llu group=%u index=%llu term=%llu",
               (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)pos.meta.index,
               (unsigned long long)pos.meta.term);
    }
    if (rd->n_entries > 0)
        raft_mem_storage_append(g->mem, rd->entries, rd->n_entries);
    if (rd->has_hard_state)
        raft_mem_storage_set_hard_state(g->mem, &rd->hard_state);
    if (g->compact_to > 0) {
        /* The snapshot position a lagging follower is sent from; its rows are
         * captured live from the fsm when needed (snapshot.c). */
        raft_mem_storage_create_snapshot(g->mem, g->compact_to, &g->compact_conf, NULL, 0);
        raft_compacted(g->raft, g->compact_to);
        RT_LOG("info", "msg=\"log compacted\" node=%llu group=%u through=%llu",
               (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)g->compact_to);
        g->first_index = g->compact_to + 1;
        g->compact_to = 0;
    }
    rt_send_msgs(rt, g, rd, rd->n_msgs_early, rd->n_msgs); /* the early ones left in take_ready */
    if (!g->committed_handed)
        hand_committed(rt, g, rd);
    raft_advance(g->raft, rd);
    g->in_batch = false;
    g->committed_handed = false;
}
/* ---- Group commit ---- */

static void queue_compaction(struct runtime *rt, struct rt_group *g)
{
    /* Only below what the fsm holds durably (apply.c syncs it every compact_entries). */
    uint64_t base = g->durable_applied < g->applied ? g->durable_applied : g->applied;
    if (base < g->first_index + rt->opts.compact_entries + rt->opts.compact_tail)
        return;
    uint64_t to = base - rt->opts.compact_tail;
    raft_term term = 0;
    const struct raft_storage *s = raft_mem_storage_get(g->mem);
    if (s->term(s->ctx, to, &term) != 0)
        return;
    struct raft_status st;
    raft_status(g->raft, &st);
    struct store_snapshot_meta m = {.index = to, .term = term};
    m.conf.n_voters = st.conf.n_voters;
    m.conf.n_learners = st.conf.n_learners;
    memcpy(m.conf.voters, st.conf.voters, st.conf.n_voters * sizeof(uint64_t));
    memcpy(m.conf.learners, st.conf.learners, st.conf.n_learners * sizeof(uint64_t));
    store_log_batch_put_snapshot_meta(rt->log_batch, g->id, &m);
    store_log_batch_delete_entries(rt->log_batch, g->id, g->first_index, to + 1);
    g->compact_to = to;
    g->compact_conf = st.conf;
}

static void add_ready_to_batch(struct runtime *rt, struct rt_group *g)
{
    struct raft_ready *rd = &g->rd;
    struct store_log_batch *b = rt->log_batch;
    for (size_t i = 0; i < rd->n_entries; i++) {
        const struct raft_entry *e = &rd->entries[i];
        struct store_entry se = {.index = e->index,
                                 .term = e->term,
                                 .type = e->type,
                                 .data = e->data.base,
                                 .len = e->data.len};
        store_log_batch_put_entry(b, g->id, &se);
    }
    if (rd->n_entries > 0) {
        uint64_t last = rd->entries[rd->n_entries - 1].index;
        /* A follower's conflicting suffix is replaced: drop stored entries past the new end. */
        if (g->stored_last > last)
            store_log_batch_delete_entries(b, g->id, last + 1, g->stored_last + 1);
        g->stored_last = last;
    }
    if (rd->has_hard_state) {
        struct store_hard_state hs = {rd->hard_state.term, rd->hard_state.vote,
                                      rd->hard_state.commit};
        store_log_batch_put_hard_state(b, g->id, &hs);
    }
    queue_compaction(rt, g);
}

static struct runtime *storage_rt(struct rt_stage_item *it)
{
    return (struct runtime *)((char *)it - offsetof(struct runtime, storage_item));
}

/* The storage stage's thread. Snapshot rows go in (synced) before the raftlog batch that
 * records them. */
static void storage_work(struct rt_stage_item *it)
{
    struct runtime *rt = storage_rt(it);
    RT_ASSERT_NOT_LOOP(rt);
    /* installs write fsm state the apply stage owns otherwise: no apply job may run meanwhile */
    assert(rt->installs == NULL || rt_apply_idle(rt));
    rt->storage_rc = 0;
    for (struct rt_snap_install *in = rt->installs; in != NULL && rt->storage_rc == 0;
         in = in->next) {
        /* read_local.c's seqlock: odd while the group's rows and ownership are replaced */
        atomic_fetch_add_explicit(&in->g->read_seq, 1, memory_order_seq_cst);
        rt->storage_rc = rt_snap_install_rows(rt, in->g, in);
        atomic_fetch_add_explicit(&in->g->read_seq, 1, memory_order_release);
    }
    if (rt->storage_rc == 0) {
        SLOTD_CRASH_POINT("loop_before_log_sync"); /* the leader's early messages are out */
        double start = metrics_now_seconds();
        rt->storage_rc = store_log_write(rt->store, rt->log_batch, true);
        metrics_histogram_observe(rt->metrics.write_synced_s, metrics_now_seconds() - start);
    }
}

static void free_installs(struct runtime *rt)
{
    while (rt->installs != NULL) {
        struct rt_snap_install *in = rt->installs;
        rt->installs = in->next;
        free(in->data);
        free(in);
    }
}

/* An installed group must have no older apply job still writing its rows. */
static bool installs_blocked(const struct runtime *rt)
{
    /* An install reads every hosted group's ownership (snapshot.c, snap_yields): no apply job may
     * change it meanwhile. */
    if (rt->installs != NULL && !rt_apply_idle(rt))
        return true;
    for (const struct rt_snap_install *in = rt->installs; in != NULL; in = in->next)
        if (in->g->apply_jobs > 0)
            return true;
    return false;
}

static void start_storage(struct runtime *rt)
{
    rt->storage_busy = true;
    rt_stage_submit(&rt->storage, &rt->storage_item);
}

/* Submits the job built this turn (committed entries, covered reads). */
static void submit_building(struct runtime *rt)
{
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++)
        if (rt->groups[i].hosted)
            attach_ready_reads(rt, &rt->groups[i]);
    struct rt_apply_job *job = rt->building;
    rt->building = NULL;
    if (job->n_groups > 0 || job->reads.len > 0 || job->capture != NULL)
        rt_apply_submit(rt, job);
    else
        rt_apply_job_free(job);
}

static void finish_batch(struct runtime *rt)
{
    start_building(rt);
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++)
        if (rt->groups[i].in_batch)
            after_persist(rt, &rt->groups[i]);
    /* The batch is durable: its messages go out now, one RPC per peer. */
    if (rt->transport != NULL)
        transport_flush(rt->transport);
    submit_building(rt);
}
static void storage_failed(struct runtime *rt)
{
    /* Unknown what reached the disk: stop rather than guess (a restart replays the log). */
    RT_LOG("fatal", "msg=\"raft log write failed\" err=\"%s\" detail=\"%s\"",
           store_strerror(rt->storage_rc), store_errmsg(rt->store));
    abort();
}

static void storage_done(struct rt_stage_item *it)
{
    struct runtime *rt = storage_rt(it);
    RT_ASSERT_LOOP(rt);
    rt->storage_busy = false;
    rt->storage_done_ns = uv_hrtime();
    if (rt->storage_rc != 0)
        storage_failed(rt);
    SLOTD_CRASH_POINT("loop_after_log_sync"); /* durable; only the early messages were sent */
    store_log_batch_clear(rt->log_batch);
    free_installs(rt);
    if (rt->ctl_installed != NULL) {
        struct ctl_state *installed = rt->ctl_installed;
        rt->ctl_installed = NULL;
        rt_ctl_publish(rt, installed);
    }
    finish_batch(rt);
    rt_pump(rt);
    rt_stages_close_idle(rt);
}

/* ---- Storage linger ---- */

static void on_linger(uv_poll_t *h, int status, int events)
{
    (void)status;
    (void)events;
    struct runtime *rt = h->data;
    uint64_t expirations;
    if (read(rt->linger_fd, &expirations, sizeof(expirations)) < 0) {
        /* EAGAIN: disarmed or re-armed since it fired; the pump below decides again */
    }
    rt->linger_armed = false;
    rt_pump(rt);
}

/* Whether the next storage job waits (a bounded linger, so that it holds more entries at
 * moderate load): only after a synced batch of at least RT_STORAGE_LINGER_BUSY entries (at low
 * load batches are small and nothing waits), only while the loop has taken in some but fewer than
 * RT_STORAGE_LINGER_ENTRIES entries since the last ready (none: the ready holds commits, acks or
 * votes only, which never wait), and at most until RT_STORAGE_LINGER_US after the last job came
 * back. Arms the timerfd for the rest of the wait; a pump before it fires (a wake, a tick, an
 * apply job's return) decides again. */
static bool storage_linger(struct runtime *rt)
{
    if (rt->linger_fd == -1 && RT_STORAGE_LINGER_US > 0 && !rt->loop_stopping) {
        /* made on the loop thread once it runs, closed by rt_stages_close_idle at stop */
        rt->linger_fd = -2; /* failed: no linger */
        int fd = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC);
        if (fd >= 0 && uv_poll_init(&rt->loop, &rt->linger_poll, fd) == 0) {
            rt->linger_fd = fd;
            rt->linger_poll.data = rt;
            uv_poll_start(&rt->linger_poll, UV_READABLE, on_linger);
        } else if (fd >= 0) {
            close(fd);
        }
    }
    if (rt->linger_fd < 0 || rt->loop_stopping || rt->last_batch_entries < RT_STORAGE_LINGER_BUSY ||
        rt->linger_entries == 0 || rt->linger_entries >= RT_STORAGE_LINGER_ENTRIES ||
        rt->installs != NULL)
        return false;
    uint64_t now = uv_hrtime(), until = rt->storage_done_ns + (uint64_t)RT_STORAGE_LINGER_US * 1000;
    if (now >= until)
        return false;
    if (!rt->linger_armed) {
        uint64_t left = until - now;
        struct itimerspec its = {.it_value = {.tv_sec = (time_t)(left / 1000000000),
                                              .tv_nsec = (long)(left % 1000000000)}};
        if (timerfd_settime(rt->linger_fd, 0, &its, NULL) != 0)
            return false;
        rt->linger_armed = true;
    }
    return true;
}

int rt_storage_init(struct runtime *rt)
{
    rt->linger_fd = -1;
    return rt_stage_init(&rt->storage, &rt->loop, "slotd-storage", storage_work, storage_done);
}

static void linger_closed(uv_handle_t *h)
{
    struct runtime *rt = h->data;
    close(rt->linger_fd);
    rt->linger_fd = -2;
}

void rt_stages_close_idle(struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    if (rt->loop_stopping && rt->linger_fd >= 0 && !uv_is_closing((uv_handle_t *)&rt->linger_poll))
        uv_close((uv_handle_t *)&rt->linger_poll, linger_closed);
    if (!rt->loop_stopping || rt->storage_busy || rt_stage_pending(&rt->storage) > 0 ||
        !rt_apply_idle(rt))
        return;
    rt_stage_close(&rt->storage);
    rt_stage_close(&rt->apply);
}

/* Takes one group's ready: committed entries already durable here and read
 * results go to the apply stage at once; the rest waits for the sync. */
static void take_ready(struct runtime *rt, struct rt_group *g, bool *must_sync)
{
    struct raft_ready *rd = &g->rd;
    uint64_t durable = g->stored_last;
    g->in_batch = true;
    if (rd->has_soft_state)
        on_soft_state(rt, g, &rd->soft_state);
    if (rd->has_hard_state) {
        g->commit = rd->hard_state.commit;
        g->term = rd->hard_state.term;
        atomic_store_explicit(&g->pub_term, g->term, memory_order_relaxed);
    }
    rt_metrics_group(rt, g);
    if (rd->has_snapshot)
        rt_snap_install_ready(rt, g, rd);
    if (!rd->has_snapshot &&
        (rd->n_committed == 0 || rd->committed[rd->n_committed - 1].index <= durable)) {
        hand_committed(rt, g, rd);
        g->committed_handed = true;
    }
    hand_reads(rt, g, rd);
    add_ready_to_batch(rt, g);
    *must_sync = *must_sync || rd->must_sync;
    /* A leader's appends and heartbeats go out now, while its own write syncs (raft.h, step 3):
     * a follower's sync overlaps the leader's instead of following it. */
    rt_send_msgs(rt, g, rd, 0, rd->n_msgs_early);
}

/* Collects the ready of every group into one raftlog batch, written off the
 * loop with one sync (group commit). One batch in flight at a time:
 * proposals arriving meanwhile go into the next one. A batch that needs no
 * sync (only a commit index moved) is written inline. */
void rt_pump(struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    if (rt->batch_waiting) {
        if (installs_blocked(rt))
            return;
        rt->batch_waiting = false;
        start_storage(rt);
        return;
    }
    while (!rt->storage_busy) {
        if (storage_linger(rt))
            return;
        rt->linger_entries = 0;
        start_building(rt);
        bool any = false, must_sync = false;
        size_t batch_entries = 0;
        for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
            struct rt_group *g = &rt->groups[i];
            if (!g->hosted || !raft_has_ready(g->raft))
                continue;
            int rc = raft_ready(g->raft, &g->rd);
            if (rc != 0) {
                RT_LOG("error", "msg=\"raft ready failed\" group=%u err=\"%s\"", g->id,
                       raft_strerror(rc));
                continue;
            }
            any = true;
            take_ready(rt, g, &must_sync);
            batch_entries += g->rd.n_entries;
        }
        submit_building(rt);
        if (!any)
            return;
        if (rt->transport != NULL)
            transport_flush(rt->transport);      /* the early messages */
        if (must_sync || rt->installs != NULL) { /* this batch will be synced */
            metrics_histogram_observe(rt->metrics.batch_entries, (double)batch_entries);
            rt->last_batch_entries = batch_entries; /* storage_linger */
        }
        if (rt->installs != NULL && installs_blocked(rt)) {
            rt->batch_waiting = true;
            return;
        }
        if (must_sync || rt->installs != NULL) {
            start_storage(rt);
            return;
        }
        if (store_log_batch_count(rt->log_batch) > 0) {
            double start = metrics_now_seconds();
            rt->storage_rc = store_log_write(rt->store, rt->log_batch, false);
            metrics_histogram_observe(rt->metrics.write_unsynced_s, metrics_now_seconds() - start);
            if (rt->storage_rc != 0)
                storage_failed(rt);
            store_log_batch_clear(rt->log_batch);
        }
        finish_batch(rt);
    }
}

/* Shutdown: every call still held gets an answer. */
void rt_fail_everything(struct runtime *rt)
{
    rt_ctl_waiters_run(rt, true);
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (!g->hosted)
            continue;
        rt_fail_list(&g->proposals, SLOTD_EUNKNOWN_OUTCOME,
                     "node shutting down; the proposal may or may not commit");
        rt_fail_list(&g->waiting_reads, SLOTD_ESHUTTING_DOWN, "node shutting down");
        while (g->rounds != NULL) {
            struct rt_read_round *r = g->rounds;
            g->rounds = r->next;
            rt_fail_list(&r->reads, SLOTD_ESHUTTING_DOWN, "node shutting down");
            free(r);
        }
    }
}
