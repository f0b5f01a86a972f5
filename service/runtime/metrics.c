/* metrics.c - the runtime's Prometheus series: registration and the per-group gauges. */
#include <string.h>

#include "service/runtime/metrics.h"

#define RT_METRICS_GROUPS_LABEL "group"

static int node_families(struct metrics_registry *m, struct rt_metrics *out)
{
    struct metrics_family *qd, *be, *ws, *ae, *sb, *dr, *rr;
    const char *queue[] = {"queue"}, *sync[] = {"sync"}, *direction[] = {"direction"};
    int rc = metrics_gauge_family_new(
        m, "slotd_proposal_queue_depth",
        "Requests waiting in the runtime's inbound queue (client: proposals and reads; peer: raft "
        "traffic).",
        1, queue, &qd);
    rc = rc ? rc
            : metrics_histogram_family_new(m, "slotd_raftlog_batch_entries",
                                           "Raft entries per synced raftlog batch (group commit).",
                                           0, NULL, metrics_size_bounds, metrics_size_bounds_len,
                                           &be);
    rc = rc ? rc
            : metrics_histogram_family_new(
                  m, "slotd_raftlog_write_seconds",
                  "Raftlog batch write latency (sync=\"true\": with fsync).", 1, sync,
                  metrics_latency_bounds, metrics_latency_bounds_len, &ws);
    rc = rc ? rc
            : metrics_histogram_family_new(m, "slotd_apply_batch_entries",
                                           "Committed entries applied per apply job.", 0, NULL,
                                           metrics_size_bounds, metrics_size_bounds_len, &ae);
    rc = rc ? rc
            : metrics_counter_family_new(m, "slotd_snapshot_bytes_total",
                                         "Snapshot bytes sent (acknowledged) and received.", 1,
                                         direction, &sb);
    rc = rc ? rc
            : metrics_counter_family_new(
                  m, "slotd_raft_dropped_messages_total",
                  "Raft messages dropped: outbound could not be queued to a peer, inbound were for "
                  "a group not hosted here or did not decode.",
                  1, direction, &dr);
    const char *outcome[] = {"outcome"};
    struct metrics_family *sa = NULL;
    rc = rc ? rc
            : metrics_counter_family_new(
                  m, "slotd_snapshot_recv_abandoned_total",
                  "Snapshot receives dropped (spool file deleted) after no chunk came for "
                  "--snapshot-recv-idle-ms (the sender died or gave up mid-transfer).",
                  0, NULL, &sa);
    struct metrics_family *rl = NULL;
    rc = rc ? rc
            : metrics_counter_family_new(
                  m, "slotd_read_local_total",
                  "Serializable (LOCAL) reads tried on the gRPC thread (read_local.c): "
                  "outcome=\"served\" answered there, \"overlapped\" a snapshot install, replica "
                  "close or ownership change ran meanwhile and the read went through the loop.",
                  1, outcome, &rl);
    struct metrics_family *ls = NULL;
    rc = rc ? rc
            : metrics_counter_family_new(
                  m, "slotd_read_lease_total",
                  "Linearizable Get reads tried on the gRPC thread under the leader lease "
                  "(read_local.c): outcome=\"served\" answered there, \"no_lease\" this replica "
                  "held no valid lease and the read took a ReadIndex round through the loop.",
                  1, outcome, &ls);
    struct metrics_family *le = NULL;
    rc = rc ? rc
            : metrics_counter_family_new(
                  m, "slotd_lease_expiries_total",
                  "LeaseExpire entries this node proposed as a slot group's leader when a key "
                  "lease ran past its TTL (keylease.c); one a keep-alive overtook changes nothing "
                  "and is proposed again only if the lease runs out again.",
                  0, NULL, &le);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_route_revision",
                                       "Revision of the route snapshot last published.", 0, NULL,
                                       &rr);
    if (rc != METRICS_OK)
        return rc;
    const char *client[] = {"client"}, *peer[] = {"peer"}, *yes[] = {"true"}, *no[] = {"false"};
    const char *sent[] = {"sent"}, *received[] = {"received"};
    const char *outbound[] = {"outbound"}, *inbound[] = {"inbound"};
    out->queue_client = metrics_gauge_get(qd, client);
    out->queue_peer = metrics_gauge_get(qd, peer);
    out->batch_entries = metrics_histogram_get(be, NULL);
    out->write_synced_s = metrics_histogram_get(ws, yes);
    out->write_unsynced_s = metrics_histogram_get(ws, no);
    out->apply_entries = metrics_histogram_get(ae, NULL);
    out->snap_sent_bytes = metrics_counter_get(sb, sent);
    out->snap_received_bytes = metrics_counter_get(sb, received);
    out->snap_recv_abandoned = metrics_counter_get(sa, NULL);
    out->dropped_outbound = metrics_counter_get(dr, outbound);
    out->dropped_inbound = metrics_counter_get(dr, inbound);
    out->route_revision = metrics_gauge_get(rr, NULL);
    const char *served[] = {"served"}, *overlapped[] = {"overlapped"};
    out->read_local_served = metrics_counter_get(rl, served);
    out->read_local_overlapped = metrics_counter_get(rl, overlapped);
    const char *no_lease[] = {"no_lease"};
    out->read_lease_served = metrics_counter_get(ls, served);
    out->read_lease_missed = metrics_counter_get(ls, no_lease);
    out->lease_expiries = metrics_counter_get(le, NULL);
    return METRICS_OK;
}

static int group_families(struct runtime *rt)
{
    struct metrics_registry *m = rt->opts.metrics;
    struct metrics_family *term, *commit, *applied, *leader, *changes, *decisions, *revision,
        *tasks, *has_leader;
    const char *group[] = {RT_METRICS_GROUPS_LABEL}, *reason[] = {"reason"};
    int rc = metrics_gauge_family_new(m, "slotd_raft_term", "Current raft term of the group.", 1,
                                      group, &term);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_raft_commit_index",
                                       "Highest raft index known committed in the group.", 1, group,
                                       &commit);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_raft_applied_index",
                                       "Highest raft index applied to the state machine here.", 1,
                                       group, &applied);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_raft_is_leader",
                                       "1 when this node leads the group, else 0.", 1, group,
                                       &leader);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_group_has_leader",
                                       "1 when this replica knows a leader of the group (itself "
                                       "or another node), 0 during an election or cut off.",
                                       1, group, &has_leader);
    rc = rc ? rc
            : metrics_counter_family_new(m, "slotd_raft_leader_changes_total",
                                         "Times this replica saw a new leader of the group.", 1,
                                         group, &changes);
    rc = rc ? rc
            : metrics_counter_family_new(
                  m, "slotd_preferred_leader_decisions_total",
                  "Preferred-leader convergence checks of groups this node leads, by outcome "
                  "(transferred, or why nothing was done).",
                  1, reason, &decisions);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_controller_revision",
                                       "Revision of the cluster state this node last published.", 0,
                                       NULL, &revision);
    const char *status[] = {"status"};
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_controller_tasks",
                                       "Controller tasks in the cluster state this node last "
                                       "published, by status.",
                                       1, status, &tasks);
    struct metrics_family *repair = NULL, *lost = NULL;
    rc = rc ? rc
            : metrics_counter_family_new(m, "slotd_repair_moves_total",
                                         "Replica moves this node proposed as controller leader "
                                         "to replace replicas of nodes down longer than "
                                         "--down-replace-after-ms.",
                                         0, NULL, &repair);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_groups_without_quorum",
                                       "Slot groups whose desired peers that are not down are "
                                       "fewer than a quorum (controller leader; never repaired "
                                       "by forcing membership).",
                                       0, NULL, &lost);
    struct metrics_family *plan_interval = NULL, *plan_success = NULL, *plan_bytes = NULL;
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_backup_plan_interval_seconds",
                                       "interval_s of the backup plan in the cluster state this "
                                       "node last published (0: no plan).",
                                       0, NULL, &plan_interval);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_backup_plan_last_success_timestamp_seconds",
                                       "Unix time the backup plan's last successful run reported "
                                       "(cluster state; 0: none).",
                                       0, NULL, &plan_success);
    rc = rc ? rc
            : metrics_gauge_family_new(m, "slotd_backup_plan_last_bytes",
                                       "Bytes of the backup plan's last successful run's file "
                                       "(cluster state; 0: none).",
                                       0, NULL, &plan_bytes);
    if (rc != METRICS_OK)
        return rc;
    rt->metrics.backup_plan_interval = metrics_gauge_get(plan_interval, NULL);
    rt->metrics.backup_plan_success_s = metrics_gauge_get(plan_success, NULL);
    rt->metrics.backup_plan_bytes = metrics_gauge_get(plan_bytes, NULL);
    struct metrics_family *bal = NULL;
    static const char *const bal_label[1] = {"result"};
    rc = rc ? rc
            : metrics_counter_family_new(m, "slotd_balance_moves_total",
                                         "Balance replica moves this node proposed as controller "
                                         "leader (planned) and how those it saw end ended (done, "
                                         "failed).",
                                         1, bal_label, &bal);
    if (rc != METRICS_OK)
        return rc;
    static const char *const bal_results[3] = {"planned", "done", "failed"};
    for (int i = 0; i < 3; i++) {
        const char *v[] = {bal_results[i]};
        rt->metrics.balance_moves[i] = metrics_counter_get(bal, v);
    }
    rt->metrics.repair_moves = metrics_counter_get(repair, NULL);
    rt->metrics.groups_without_quorum = metrics_gauge_get(lost, NULL);
    static const char *const names[4] = {"pending", "running", "failed", "done"};
    for (int i = 0; i < 4; i++) {
        const char *v[] = {names[i]};
        rt->metrics.controller_tasks[i] = metrics_gauge_get(tasks, v);
    }
    rt->metrics.fam_term = term;
    rt->metrics.fam_commit = commit;
    rt->metrics.fam_applied = applied;
    rt->metrics.fam_leader = leader;
    rt->metrics.fam_has_leader = has_leader;
    rt->metrics.fam_changes = changes;
    rt->metrics.fam_decisions = decisions;
    rt->metrics.controller_revision = metrics_gauge_get(revision, NULL);
    return METRICS_OK;
}

/* Series of a group opened here (loop thread or start-up). */
void rt_metrics_group_register(struct runtime *rt, struct rt_group *g)
{
    if (rt->metrics.fam_term == NULL)
        return;
    char id[16];
    snprintf(id, sizeof(id), "%u", g->id);
    const char *v[] = {id};
    g->metrics.term = metrics_gauge_get(rt->metrics.fam_term, v);
    g->metrics.commit = metrics_gauge_get(rt->metrics.fam_commit, v);
    g->metrics.applied = metrics_gauge_get(rt->metrics.fam_applied, v);
    g->metrics.is_leader = metrics_gauge_get(rt->metrics.fam_leader, v);
    g->metrics.has_leader = metrics_gauge_get(rt->metrics.fam_has_leader, v);
    g->metrics.leader_changes = metrics_counter_get(rt->metrics.fam_changes, v);
    rt_metrics_group(rt, g);
}

void rt_metrics_converge(struct runtime *rt, const char *reason)
{
    if (rt->metrics.fam_decisions == NULL)
        return;
    const char *v[] = {reason};
    metrics_counter_add(metrics_counter_get(rt->metrics.fam_decisions, v), 1);
}

void rt_metrics_init(struct runtime *rt)
{
    if (rt->opts.metrics == NULL)
        return;
    int rc = node_families(rt->opts.metrics, &rt->metrics);
    if (rc == METRICS_OK)
        rc = group_families(rt);
    if (rc != METRICS_OK) {
        RT_LOG("warn", "msg=\"runtime metrics not registered\" err=\"%s\"", metrics_strerror(rc));
        memset(&rt->metrics, 0, sizeof(rt->metrics));
        for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++)
            memset(&rt->groups[i].metrics, 0, sizeof(rt->groups[i].metrics));
    }
}

void rt_metrics_group(struct runtime *rt, const struct rt_group *g)
{
    metrics_gauge_set(g->metrics.term, (int64_t)g->term);
    metrics_gauge_set(g->metrics.commit, (int64_t)g->commit);
    metrics_gauge_set(g->metrics.applied, (int64_t)g->applied);
    metrics_gauge_set(g->metrics.is_leader, g->hosted && g->leader == rt->opts.node_id);
    metrics_gauge_set(g->metrics.has_leader, g->hosted && g->leader != 0);
}
