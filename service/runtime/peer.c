/* peer.c - traffic with peers: raft messages out and in, observed leaders of remote groups,
 * removed replicas, leadership hand-off; snapshot transfers are snapshot.c's. */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "service/runtime/facts.h"
#include "service/runtime/lease.h"
#include "service/runtime/peer.h"
#include "service/runtime/request.h"
#include "service/runtime/routes.h"
#include "service/runtime/snapshot.h"
#include "service/runtime/submit.h"
#include "service/runtime/watch.h"
#include "service/runtime/wire.h"
#include "store/keys.h"

#define PEER_METHOD_GROUP_STATUS "/slotd.internal.v1.Peer/GroupStatus"
#define STATUS_TIMEOUT_MS 1000
/* A configuration reported by a follower is replaced by an older term's after this long. */
#define OBS_CONF_TTL_MS 2000

/* ---- Raft messages out ---- */

void rt_send_msgs(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd, size_t from,
                  size_t to)
{
    for (size_t i = from; i < to; i++) {
        const struct raft_msg *m = &rd->msgs[i];
        if (rt->transport == NULL) {
            metrics_counter_add(rt->metrics.dropped_outbound, 1);
            continue;
        }
        if (m->type == RAFT_MSG_SNAPSHOT) {
            rt_snap_start(rt, g, m);
            continue;
        }
        Slotd__Internal__V1__RaftMessage pb;
        struct rt_wire_scratch scratch;
        if (rt_wire_msg_to_pb(g->id, m, &pb, &scratch) != 0) {
            metrics_counter_add(rt->metrics.dropped_outbound, 1);
            continue;
        }
        int rc = transport_send_raft(rt->transport, m->to, &pb);
        rt_wire_scratch_free(&scratch);
        if (rc != 0) {
            /* Queue full or unknown peer: raft retransmits from probe state. */
            metrics_counter_add(rt->metrics.dropped_outbound, 1);
            raft_report_unreachable(g->raft, m->to);
        }
    }
}

/* ---- Raft messages in ---- */

/* caller: the node the Peer/Raft call was authenticated as, 0 when peers are not authenticated
 * (the handler checked the batch's from_node against it). */
static void step_batch(struct runtime *rt, const uint8_t *data, size_t len, uint64_t caller)
{
    Slotd__Internal__V1__RaftBatch *b = slotd__internal__v1__raft_batch__unpack(NULL, len, data);
    if (b == NULL) {
        RT_LOG("warn", "msg=\"undecodable raft batch dropped\" bytes=%zu", len);
        return;
    }
    if (caller != 0 && b->from_node != caller) {
        RT_LOG("warn",
               "msg=\"raft batch from another node than its caller dropped\" caller=%llu "
               "from_node=%llu",
               (unsigned long long)caller, (unsigned long long)b->from_node);
        metrics_counter_add(rt->metrics.dropped_inbound, b->n_messages);
        slotd__internal__v1__raft_batch__free_unpacked(b, NULL);
        return;
    }
    for (size_t i = 0; i < b->n_messages; i++) {
        const Slotd__Internal__V1__RaftMessage *pb = b->messages[i];
        if (!runtime_hosts_group(rt, pb->group_id) || pb->to != rt->opts.node_id ||
            pb->from != b->from_node || pb->type == RAFT_MSG_SNAPSHOT) {
            /* a node speaks for itself only; snapshots arrive through Peer/Snapshot only */
            metrics_counter_add(rt->metrics.dropped_inbound, 1);
            continue;
        }
        struct raft_msg m;
        if (rt_wire_msg_from_pb(pb, &m) != 0) {
            metrics_counter_add(rt->metrics.dropped_inbound, 1);
            continue;
        }
        raft_step(rt->groups[pb->group_id].raft, &m);
        rt->linger_entries += m.n_entries; /* loop.c, storage_linger */
        free(m.entries);
    }
    slotd__internal__v1__raft_batch__free_unpacked(b, NULL);
}

/* ---- Observed leaders of groups hosted elsewhere ---- */

static void on_status_reply(void *arg, int status, const char *message, const uint8_t *resp,
                            size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct runtime *rt = arg;
    if (status == 0 && resp != NULL)
        rt_submit_group_status(rt, resp, resp_len);
}

void rt_poll_peers(struct runtime *rt)
{
    if (rt->transport == NULL || rt->route_base == NULL)
        return;
    /* every peer, also when this node hosts every group: the route shows each replica's own
     * answer (RouteSnapshot replicas) */
    Slotd__Internal__V1__GroupStatusRequest req = SLOTD__INTERNAL__V1__GROUP_STATUS_REQUEST__INIT;
    uint8_t buf[16];
    size_t len = slotd__internal__v1__group_status_request__pack(&req, buf);
    const struct route_snapshot *members = rt->route_base; /* the cluster state's nodes */
    for (size_t i = 0; i < members->n_nodes; i++) {
        if (members->nodes[i].id == rt->opts.node_id)
            continue;
        transport_call(rt->transport, members->nodes[i].id, PEER_METHOD_GROUP_STATUS, buf, len,
                       rt_now_ms() + STATUS_TIMEOUT_MS, on_status_reply, rt);
    }
}

/* A peer hosting a group names its leader. A higher term replaces what this node knows; the
 * leader itself saying so confirms it (first-hand). A follower naming the same leader confirms
 * nothing: it may not have noticed yet that the leader died. A leader not confirmed first-hand
 * for two election timeouts expires (rt_expire_leaders); so does one this node cannot reach. */
static bool listed(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* The reporter's own replica of the group, as it said; kept sorted by node (when full, the
 * oldest answer makes room). */
static void observe_replica(struct rt_group *g, uint64_t node,
                            const Slotd__Internal__V1__GroupLeader *gl, int64_t now)
{
    struct route_replica r = {.node = node,
                              .role = listed(gl->voters, gl->n_voters, node) ? ROUTE_ROLE_VOTER
                                      : listed(gl->learners, gl->n_learners, node)
                                          ? ROUTE_ROLE_LEARNER
                                          : ROUTE_ROLE_NONE,
                              .leader = gl->leader,
                              .term = gl->term,
                              .commit = gl->commit,
                              .applied = gl->applied,
                              .heard_ms = now};
    uint32_t at = 0;
    while (at < g->n_obs && g->obs[at].node < node)
        at++;
    if (at < g->n_obs && g->obs[at].node == node) {
        g->obs[at] = r;
        return;
    }
    if (g->n_obs == ROUTE_MEMBERS_MAX) {
        uint32_t oldest = 0;
        for (uint32_t i = 1; i < g->n_obs; i++)
            if (g->obs[i].heard_ms < g->obs[oldest].heard_ms)
                oldest = i;
        memmove(&g->obs[oldest], &g->obs[oldest + 1], (g->n_obs - oldest - 1) * sizeof(r));
        g->n_obs--;
        if (oldest < at)
            at--;
    }
    memmove(&g->obs[at + 1], &g->obs[at], (g->n_obs - at) * sizeof(r));
    g->obs[at] = r;
    g->n_obs++;
}

/* A group hosted elsewhere: the configuration its leader reported, else the newest term's. */
static void observe_conf(struct rt_group *g, uint64_t node,
                         const Slotd__Internal__V1__GroupLeader *gl, int64_t now)
{
    bool from_leader = gl->leader != 0 && gl->leader == node;
    if (!from_leader && gl->term <= g->obs_conf_term && now - g->obs_conf_ms < OBS_CONF_TTL_MS)
        return;
    g->n_obs_voters = gl->n_voters < ROUTE_MEMBERS_MAX ? (uint32_t)gl->n_voters : ROUTE_MEMBERS_MAX;
    if (g->n_obs_voters > 0) /* protobuf-c leaves an empty repeated field NULL */
        memcpy(g->obs_voters, gl->voters, g->n_obs_voters * sizeof(uint64_t));
    g->n_obs_learners =
        gl->n_learners < ROUTE_MEMBERS_MAX ? (uint32_t)gl->n_learners : ROUTE_MEMBERS_MAX;
    if (g->n_obs_learners > 0)
        memcpy(g->obs_learners, gl->learners, g->n_obs_learners * sizeof(uint64_t));
    g->obs_conf_term = gl->term;
    g->obs_conf_ms = now;
    g->obs_conf_by = from_leader ? node : 0;
}

static void merge_group_status(struct runtime *rt, const uint8_t *data, size_t len)
{
    Slotd__Internal__V1__GroupStatusResponse *r =
        slotd__internal__v1__group_status_response__unpack(NULL, len, data);
    if (r == NULL)
        return;
    bool changed = false;
    int64_t now = rt_now_ms();
    for (size_t i = 0; i < r->n_groups; i++) {
        const Slotd__Internal__V1__GroupLeader *gl = r->groups[i];
        if (gl->group_id == 0 || gl->group_id > rt->n_groups || r->node_id == rt->opts.node_id)
            continue;
        struct rt_group *g = &rt->groups[gl->group_id];
        observe_replica(g, r->node_id, gl, now);
        if (gl->leader == r->node_id) {
            rt_facts_leader_commit(g, gl->commit, now);
            rt_facts_leader_slots(g, gl->leader, gl->owned.data, gl->owned.len, gl->fenced.data,
                                  gl->fenced.len, gl->migration_task, now);
        }
        changed = true; /* the route shows the answer's age */
        /* also for hosted groups: a replica that is not the leader may be behind or removed,
         * the controller leader's facts (facts.c) take the leader's report */
        observe_conf(g, r->node_id, gl, now);
        if (g->hosted)
            continue;
        if (gl->leader == 0 || gl->term < g->term)
            continue;
        bool first_hand = r->node_id == gl->leader;
        if (gl->term == g->term && !first_hand && (g->leader == gl->leader || g->leader == 0))
            continue; /* confirms nothing; an expired leader stays out until it speaks */
        if (first_hand)
            g->leader_seen_ms = now;
        else if (g->leader != gl->leader)
            g->leader_seen_ms = now; /* a new leader named: it has two timeouts to speak */
        g->leader = gl->leader;
        g->term = gl->term;
    }
    slotd__internal__v1__group_status_response__free_unpacked(r, NULL);
    if (changed)
        rt_publish_route(rt);
}

/* Every tick: the leaders of groups hosted elsewhere that no longer confirm themselves. */
void rt_expire_leaders(struct runtime *rt, int64_t now)
{
    int64_t ttl = 2 * (int64_t)rt->opts.election_tick * (int64_t)rt->opts.tick_ms;
    bool changed = false;
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (g->hosted || g->leader == 0 || now - g->leader_seen_ms <= ttl)
            continue;
        RT_LOG("info",
               "msg=\"observed leader expired\" group=%u leader=%llu term=%llu silent_ms=%lld",
               g->id, (unsigned long long)g->leader, (unsigned long long)g->term,
               (long long)(now - g->leader_seen_ms));
        g->leader = 0;
        changed = true;
    }
    if (changed)
        rt_publish_route(rt);
}

/* A peer could not be reached (a raft batch or a forward found nothing to connect to): the
 * groups hosted elsewhere that it leads have no known leader until it speaks again. */
static void drop_unreachable_leader(struct runtime *rt, uint64_t peer)
{
    bool changed = false;
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (g->hosted || g->leader != peer)
            continue;
        g->leader = 0;
        changed = true;
    }
    if (changed) {
        RT_LOG("info", "msg=\"leader unreachable: dropped from the route\" node=%llu",
               (unsigned long long)peer);
        rt_publish_route(rt);
    }
}

int runtime_group_status(struct runtime *rt, uint8_t **buf, size_t *len)
{
    struct route_snapshot *s = route_table_acquire(rt->routes);
    size_t n = 0;
    /* n_groups is set once by the loop thread (0 -> N); read it once. */
    size_t slots = atomic_load_explicit(&rt->n_groups, memory_order_acquire) + 1;
    Slotd__Internal__V1__GroupLeader *gl = calloc(slots, sizeof(*gl));
    Slotd__Internal__V1__GroupLeader **glp = calloc(slots, sizeof(*glp));
    uint8_t(*bits)[64] = calloc(slots, sizeof(*bits)); /* owned, fenced of each group */
    int rc = gl && glp && bits ? 0 : -1;
    for (size_t i = 0; rc == 0 && s != NULL && i < slots; i++) {
        const struct rt_group *g = &rt->groups[i];
        const struct route_group *rg = route_snapshot_group(s, g->id);
        if (!atomic_load_explicit(&g->hosted, memory_order_acquire) || rg == NULL)
            continue;
        slotd__internal__v1__group_leader__init(&gl[n]);
        gl[n].group_id = g->id;
        gl[n].leader = rg->leader;
        gl[n].term = rg->leader_term;
        gl[n].n_voters = rg->n_voters;
        gl[n].voters = (uint64_t *)rg->voters;
        gl[n].n_learners = rg->n_learners;
        gl[n].learners = (uint64_t *)rg->learners;
        gl[n].commit = atomic_load_explicit(&g->commit, memory_order_relaxed);
        gl[n].applied = atomic_load_explicit(&g->applied, memory_order_relaxed);
        if (g->id != 0) {
            rt_facts_published_slots(g, bits[n], bits[n] + 32, &gl[n].migration_task);
            gl[n].owned = (ProtobufCBinaryData){.len = 32, .data = bits[n]};
            gl[n].fenced = (ProtobufCBinaryData){.len = 32, .data = bits[n] + 32};
        }
        glp[n] = &gl[n];
        n++;
    }
    if (rc == 0) {
        Slotd__Internal__V1__GroupStatusResponse resp =
            SLOTD__INTERNAL__V1__GROUP_STATUS_RESPONSE__INIT;
        resp.node_id = rt->opts.node_id;
        resp.n_groups = n;
        resp.groups = glp;
        *len = slotd__internal__v1__group_status_response__get_packed_size(&resp);
        *buf = malloc(*len ? *len : 1);
        if (*buf == NULL)
            rc = -1;
        else
            slotd__internal__v1__group_status_response__pack(&resp, *buf);
    }
    route_snapshot_release(s);
    free(gl);
    free(glp);
    free(bits);
    return rc;
}

/* Closes a replica this node no longer holds (a finished replica move took it away) and
 * deletes its rows, group metadata and raft log, so a later replica of the group here starts
 * empty. Loop thread; the caller checked that no batch or snapshot uses g and that no apply job
 * runs or waits and no snapshot install is staged (those read every hosted group's fsm_state,
 * which this reads and zeroes). */
void rt_group_close_removed(struct runtime *rt, struct rt_group *g)
{
    RT_ASSERT_LOOP(rt);
    assert(rt_apply_idle(rt) && rt->installs == NULL && g->apply_jobs == 0);
    atomic_store_explicit(&g->hosted, false, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->read_seq, 1, memory_order_seq_cst); /* odd: rows go */
    rt_watch_reset(rt, g->id, 0, false);
    /* Appended proposals may still commit on the replicas that stay. */
    rt_fail_list(&g->proposals, SLOTD_EUNKNOWN_OUTCOME,
                 "the replica left this node; the proposal may or may not commit");
    rt_lease_clear(g);
    rt_fail_list(&g->waiting_reads, SLOTD_ENOT_LEADER, "the replica left this node");
    while (g->rounds != NULL) {
        struct rt_read_round *r = g->rounds;
        g->rounds = r->next;
        rt_fail_list(&r->reads, SLOTD_ENOT_LEADER, "the replica left this node");
        free(r);
    }
    /* The tombstone (store_tombstone): the term and vote, and the last log position this
     * replica ever held, so that a replica of the group created here again votes as this one
     * would have (raft_config.vote_floor_*). */
    struct store_tombstone tomb = {0};
    if (store_log_load_tombstone(rt->store, g->id, &tomb) != 0)
        memset(&tomb, 0, sizeof(tomb));
    {
        struct raft_status rs;
        raft_status(g->raft, &rs);
        const struct raft_storage *ms = raft_mem_storage_get(g->mem);
        raft_index last = 0;
        raft_term last_term = 0;
        if (ms->last_index(ms->ctx, &last) != 0 || ms->term(ms->ctx, last, &last_term) != 0)
            last = last_term = 0;
        if (rs.term >= tomb.term) {
            tomb.vote = rs.term > tomb.term || rs.vote != 0 ? rs.vote : tomb.vote;
            tomb.term = rs.term;
        }
        if (last_term > tomb.floor_term ||
            (last_term == tomb.floor_term && last > tomb.floor_index)) {
            tomb.floor_index = last;
            tomb.floor_term = last_term;
        }
    }
    raft_free(g->raft);
    raft_mem_storage_free(g->mem);
    rt_snap_recv_discard(&g->snap_recv);
    struct store_fsm_batch *b = NULL;
    int rc = store_fsm_batch_new(&b);
    if (rc == 0 && g->id != 0) {
        uint8_t rows[32];
        rt_snap_slots(&g->fsm_state, rows);
        rt_snap_drop_claimed(rt, g, rows, false);
        rc = rt_snap_delete_owned(rt, b, rows);
    }
    if (rc == 0) {
        uint8_t k[STORE_GROUP_META_KEY_LEN];
        store_key_group_meta(k, g->id, SLOT_GROUP_META_OWNED);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_key_group_meta(k, g->id, SLOT_GROUP_META_MIGRATION);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_key_group_meta(k, g->id, SLOT_GROUP_META_SNAPSHOT);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_key_group_meta(k, g->id, SLOT_GROUP_META_INSTALL);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_fsm_batch_set_applied(b, g->id, 0);
        rc = store_fsm_write(rt->store, b, true);
    }
    store_fsm_batch_free(b);
    slot_fsm_forget_rows(rt->fsm); /* the apply's cached versions of the deleted rows */
    atomic_fetch_add_explicit(&g->read_seq, 1, memory_order_release); /* even: rows are gone */
    struct store_log_batch *lb = NULL;
    if (rc == 0)
        rc = store_log_batch_new(&lb);
    if (rc == 0) {
        store_log_batch_delete_group(rt->store, lb, g->id);
        store_log_batch_put_tombstone(lb, g->id, &tomb);
        rc = store_log_write(rt->store, lb, true);
    }
    store_log_batch_free(lb);
    if (rc != 0)
        RT_LOG("error", "msg=\"removed replica: deleting its data failed\" group=%u err=\"%s\"",
               g->id, store_strerror(rc));
    metrics_gauge_set(g->metrics.is_leader, 0);
    /* GRPC threads that saw hosted before it was cleared may still read the atomics: they are
     * reset atomically; the rest only this thread touches now. id stays. */
    atomic_store_explicit(&g->leader, 0, memory_order_relaxed);
    atomic_store_explicit(&g->commit, 0, memory_order_relaxed);
    atomic_store_explicit(&g->applied, 0, memory_order_relaxed);
    atomic_store_explicit(&g->pub_term, 0, memory_order_relaxed);
    struct rt_group_metrics m = g->metrics;
    memset(&g->raft, 0, sizeof(*g) - offsetof(struct rt_group, raft));
    g->metrics = m;
    uint32_t id = g->id;
    RT_LOG("info", "msg=\"replica removed from this node\" node=%llu group=%u",
           (unsigned long long)rt->opts.node_id, id);
}

/* ---- Dispatch (loop thread) ---- */

static void transfer_all(struct runtime *rt)
{
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (!g->hosted || g->role != RAFT_LEADER)
            continue;
        struct raft_status st;
        raft_status(g->raft, &st);
        raft_id best = 0;
        for (size_t p = 0; p < st.n_progress; p++) {
            const struct raft_progress_status *ps = &st.progress[p];
            if (ps->id == rt->opts.node_id || ps->learner || !ps->recent_active)
                continue;
            if (best == 0 || ps->match == st.last_index)
                best = ps->id;
            if (ps->match == st.last_index)
                break;
        }
        if (best != 0 && rt_transfer_leader(g, best) == 0)
            g->transferring = true;
    }
}

void rt_handle_peer_request(struct runtime *rt, struct rt_request *r)
{
    RT_ASSERT_LOOP(rt);
    switch (r->kind) {
    case RT_RAFT_BATCH:
        step_batch(rt, r->data, r->len, r->min_applied);
        break;
    case RT_UNREACHABLE:
        for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++)
            if (rt->groups[i].hosted)
                raft_report_unreachable(rt->groups[i].raft, r->min_applied);
        drop_unreachable_leader(rt, r->min_applied);
        break;
    case RT_SNAP_CHUNK:
        rt_snap_recv_chunk(rt, r);
        break;
    case RT_SNAP_SENT:
        rt_snap_chunk_sent(rt, r->index, r->min_applied != 0);
        break;
    case RT_GROUP_STATUS:
        merge_group_status(rt, r->data, r->len);
        break;
    case RT_TRANSFER:
        transfer_all(rt);
        break;
    case RT_CTL_STATE:
        rt->hooks.ctl_mirror_reply(rt, r->data, r->len);
        break;
    default:
        break;
    }
    free(r);
}
