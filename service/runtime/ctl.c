/* ctl.c - the controller group (id 0) inside the runtime: bootstrap, apply into the controller
 * state and cluster-state.json, publication (peers, hosted slot groups, route), mirrors and
 * joining, preferred-leader convergence. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "service/controller/controller.h"
#include "service/fault/fault.h"
#include "service/net/net.h"
#include "service/runtime/ctl.h"
#include "service/runtime/facts.h"
#include "service/runtime/group.h"
#include "service/runtime/lease.h"
#include "service/runtime/metrics.h"
#include "service/runtime/request.h"
#include "service/runtime/routes.h"
#include "slotd/v1/admin.pb-c.h"
#include "store/keys.h"

#define ADMIN_CLUSTER_STATE "/slotd.v1.Admin/ClusterState"
#define ADMIN_JOIN_NODE "/slotd.v1.Admin/JoinNode"
#define ADMIN_ACTIVATE_NODE "/slotd.v1.Admin/ActivateNode"
/* Liveness: every node reports every CTL_REPORT_EVERY_MS with this TTL; the controller leader
 * marks a node suspect after one TTL without a report and down after CTL_DOWN_TTLS of them. */
#define CTL_REPORT_EVERY_MS 3000
#define CTL_REPORT_TTL_MS 10000
#define CTL_DOWN_TTLS 3
#define CTL_STATUS_RETRY_MS 2000
#define CTL_CALL_TIMEOUT_MS 2000
/* Preferred-leader convergence: a group is left alone this long after a transfer it started. */
#define CTL_CONVERGE_COOLDOWN_MS 10000

/* ---- Apply stage ---- */

static void fill_result(const struct ctl_state *s, const struct ctl_result *res, uint64_t index,
                        struct slot_result *out)
{
    memset(out, 0, sizeof(*out));
    if (res->outcome == CTL_OUTCOME_REJECTED) {
        bool stale = strncmp(res->reason, "stale expected_revision", 23) == 0;
        /* a fact that does not hold (a phase's live proof, the migration switch) is a failed
         * precondition, not a malformed request */
        bool fact = strncmp(res->reason, "proof:", 6) == 0 ||
                    strncmp(res->reason, "hash-slot migration is off", 26) == 0;
        slotd_error_set(&out->err,
                        stale  ? SLOTD_ESTALE_FENCE
                        : fact ? SLOTD_EPRECONDITION
                               : SLOTD_EINVALID_FIELD,
                        "controller rejected the command: %s", res->reason);
        if (!stale && !fact)
            snprintf(out->err.field, sizeof(out->err.field), "command");
        return;
    }
    Slotd__V1__AdminWriteResponse r = SLOTD__V1__ADMIN_WRITE_RESPONSE__INIT;
    r.outcome = res->outcome == CTL_OUTCOME_CHANGED   ? SLOTD__V1__OUTCOME__OUTCOME_CHANGED
                : res->outcome == CTL_OUTCOME_UPDATED ? SLOTD__V1__OUTCOME__OUTCOME_UPDATED
                                                      : SLOTD__V1__OUTCOME__OUTCOME_NOOP;
    r.reason = (char *)res->reason;
    r.revision = s->revision;
    r.applied_index = index;
    r.task_id = res->task_id;
    out->resp_len = slotd__v1__admin_write_response__get_packed_size(&r);
    out->resp = malloc(out->resp_len ? out->resp_len : 1);
    if (out->resp == NULL) {
        slotd_error_set(&out->err, SLOTD_EINTERNAL, "out of memory");
        return;
    }
    slotd__v1__admin_write_response__pack(&r, out->resp);
}

int rt_ctl_apply_entry(struct runtime *rt, uint64_t index, const uint8_t *data, size_t len,
                       struct slot_result *out)
{
    struct ctl_state *s = rt->ctl_apply;
    if (index <= s->applied_raft_index)
        return 0; /* already in the stored state (replayed after a restart) */
    if (len == 0) {
        /* a new leader's empty entry */
        s->applied_raft_index = index;
        return 0;
    }
    struct ctl_result res;
    int rc = ctl_apply(s, index, data, len, &res);
    if (rc != CTL_OK) {
        RT_LOG("fatal", "msg=\"controller apply failed\" index=%llu err=\"%s\"",
               (unsigned long long)index, ctl_strerror(rc));
        return STORE_ENOMEM;
    }
    if (res.outcome == CTL_OUTCOME_REJECTED || res.outcome == CTL_OUTCOME_NOOP)
        RT_LOG("info", "msg=\"controller command %s\" index=%llu reason=\"%s\"",
               ctl_outcome_name(res.outcome), (unsigned long long)index, res.reason);
    else if (res.outcome == CTL_OUTCOME_CHANGED)
        RT_LOG("info", "msg=\"controller state changed\" index=%llu revision=%llu",
               (unsigned long long)index, (unsigned long long)s->revision);
    if (out != NULL)
        fill_result(s, &res, index, out);
    return 0;
}

void rt_ctl_apply_conf(struct runtime *rt, uint64_t index)
{
    if (index > rt->ctl_apply->applied_raft_index)
        rt->ctl_apply->applied_raft_index = index;
}

/* ---- The controller state in the store ----
 * The fsm db holds the state machine itself: [0xFFFF][0][SLOT_GROUP_META_CTL_STATE] ->
 * [1][canonical JSON], written in one batch with group 0's applied index, so the state and the
 * index it reflects never disagree. A restart loads it and replays the log after it; a follower
 * behind a compaction gets it as the raft snapshot. cluster-state.json is only an export of it,
 * written after each save, and never read back as state. */

static int state_put(struct store_fsm_batch *b, const struct ctl_state *s, bool with_applied)
{
    char *buf;
    size_t n;
    if (ctl_state_encode(s, &buf, &n) != CTL_OK)
        return STORE_ENOMEM;
    uint8_t *v = malloc(n + 1);
    if (v == NULL) {
        ctl_free(buf);
        return STORE_ENOMEM;
    }
    v[0] = STORE_VALUE_VERSION;
    memcpy(v + 1, buf, n);
    ctl_free(buf);
    uint8_t k[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(k, 0, SLOT_GROUP_META_CTL_STATE);
    store_fsm_batch_put(b, k, sizeof(k), v, n + 1);
    free(v);
    if (with_applied)
        store_fsm_batch_set_applied(b, 0, s->applied_raft_index);
    return store_fsm_batch_error(b);
}

/* One synced write of s (with group 0's applied index when with_applied: voters). */
static int state_save(struct runtime *rt, const struct ctl_state *s, bool with_applied)
{
    struct store_fsm_batch *b;
    int rc = store_fsm_batch_new(&b);
    if (rc != 0)
        return rc;
    rc = state_put(b, s, with_applied);
    if (rc == 0)
        rc = store_fsm_write(rt->store, b, true);
    store_fsm_batch_free(b);
    return rc;
}

int rt_ctl_save_mirror(struct runtime *rt)
{
    return rt->ctl != NULL ? state_save(rt, rt->ctl, false) : 0;
}

/* *found = false when the store holds no controller state. A value that does not decode is an
 * error: the store is the truth, and a damaged truth must not be replaced by a guess. */
static int state_load(struct runtime *rt, struct ctl_state *s, bool *found, char *err,
                      size_t errlen)
{
    uint8_t k[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(k, 0, SLOT_GROUP_META_CTL_STATE);
    void *v = NULL;
    size_t vl = 0;
    *found = false;
    int rc = store_fsm_get(rt->store, k, sizeof(k), &v, &vl);
    if (rc == STORE_ENOTFOUND)
        return 0;
    if (rc != 0) {
        snprintf(err, errlen, "controller state: %s: %s", store_strerror(rc),
                 store_errmsg(rt->store));
        return -1;
    }
    char derr[256] = "";
    if (vl < 2 || ((uint8_t *)v)[0] != STORE_VALUE_VERSION ||
        ctl_state_decode((uint8_t *)v + 1, vl - 1, s, derr, sizeof(derr)) != CTL_OK) {
        snprintf(err, errlen, "controller state in the store does not decode (%zu bytes): %s", vl,
                 derr[0] ? derr : "bad version byte");
        free(v);
        return -1;
    }
    free(v);
    *found = true;
    return 0;
}

/* Writes the export; a failure is logged, never fatal (the store already holds the state). */
static void export_file(struct runtime *rt, const struct ctl_state *s)
{
    char err[256];
    if (ctl_file_save(rt->opts.state_path, s, err, sizeof(err)) != CTL_OK) {
        RT_LOG("error", "msg=\"cannot export the cluster state\" path=%s err=\"%s\"",
               rt->opts.state_path, err);
        return;
    }
    pthread_mutex_lock(&rt->ctl_mu);
    rt->ctl_view.file_revision = s->revision;
    rt->ctl_view.file_age_ms = rt_now_ms(); /* a stamp here; an age in runtime_ctl_status */
    pthread_mutex_unlock(&rt->ctl_mu);
}

/* After a job's controller entries: one synced write of the state with its applied index, then
 * the export, then a copy to publish on the loop. */
int rt_ctl_apply_finish(struct runtime *rt, struct ctl_state **pub)
{
    /* applied (and committed) but not yet in the store: a restart replays the log suffix */
    SLOTD_CRASH_POINT("controller_before_state_save");
    int rc = state_save(rt, rt->ctl_apply, true);
    if (rc != 0) {
        RT_LOG("fatal", "msg=\"cannot save the controller state\" err=\"%s\" detail=\"%s\"",
               store_strerror(rc), store_errmsg(rt->store));
        abort(); /* a voter that cannot record what it applied must not go on */
    }
    export_file(rt, rt->ctl_apply);
    *pub = malloc(sizeof(**pub));
    if (*pub == NULL)
        return STORE_ENOMEM;
    **pub = *rt->ctl_apply;
    return 0;
}

/* Snapshot of group 0: the canonical state at the apply index. */
int rt_ctl_capture(struct runtime *rt, uint8_t **data, size_t *len)
{
    char *buf;
    size_t n;
    if (ctl_state_encode(rt->ctl_apply, &buf, &n) != CTL_OK)
        return STORE_ENOMEM;
    *data = malloc(n ? n : 1);
    if (*data == NULL) {
        ctl_free(buf);
        return STORE_ENOMEM;
    }
    memcpy(*data, buf, n);
    *len = n;
    ctl_free(buf);
    return 0;
}

/* Storage stage: installs a controller snapshot (the apply stage holds no job of group 0). The
 * state, its applied index and the snapshot's raft position go to the fsm db in one synced
 * batch before the raftlog records the snapshot, so a restart in between rebuilds the position
 * (group.c); then the export. */
int rt_ctl_install(struct runtime *rt, struct rt_group *g, const uint8_t *data, size_t len,
                   const struct raft_snapshot_meta *meta)
{
    struct ctl_state *s = malloc(sizeof(*s));
    char err[256];
    if (s == NULL)
        return STORE_ENOMEM;
    if (ctl_state_decode(data, len, s, err, sizeof(err)) != CTL_OK ||
        s->applied_raft_index != meta->index) {
        RT_LOG("error", "msg=\"controller snapshot rejected\" err=\"%s\"", err);
        free(s);
        return STORE_ECORRUPT;
    }
    struct store_fsm_batch *b;
    int rc = store_fsm_batch_new(&b);
    if (rc != 0) {
        free(s);
        return rc;
    }
    uint8_t pk[STORE_GROUP_META_KEY_LEN], pv[17];
    store_key_group_meta(pk, 0, SLOT_GROUP_META_SNAPSHOT);
    pv[0] = STORE_VALUE_VERSION;
    store_put_u64(pv + 1, meta->index);
    store_put_u64(pv + 9, meta->term);
    store_fsm_batch_put(b, pk, sizeof(pk), pv, sizeof(pv));
    rc = state_put(b, s, true); /* also group 0's applied index = meta->index */
    if (rc == 0)
        rc = store_fsm_write(rt->store, b, true);
    store_fsm_batch_free(b);
    if (rc == 0)
        SLOTD_FAULT_NOTE_FSM_SYNCED(rt->data_dir);
    if (rc != 0) {
        free(s);
        return rc;
    }
    export_file(rt, s);
    *rt->ctl_apply = *s;
    free(rt->ctl_installed);
    rt->ctl_installed = s; /* published by the loop after the batch */
    g->apply_index = meta->index;
    g->apply_term = meta->term;
    g->apply_conf = meta->conf;
    return 0;
}

/* ---- Publication (loop thread) ---- */

static bool has_peer(const struct ctl_group *cg, uint64_t node)
{
    for (uint32_t i = 0; i < cg->n_peers; i++)
        if (cg->desired_peers[i] == node)
            return true;
    return false;
}

/* A running replica move is part of the intent: its target is a learner until the promote
 * phase is proven, then a voter beside the source until the move is done. */
static void intend_move(const struct ctl_state *s, struct route_group *g)
{
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if (t->kind != CTL_TASK_REPLICA_MOVE || t->group != g->id || t->status != CTL_TASK_RUNNING)
            continue;
        if (t->phase_index <= CTL_PHASE_MOVE_PROMOTE) {
            if (g->n_intended_learners < ROUTE_MEMBERS_MAX)
                g->intended_learners[g->n_intended_learners++] = t->target;
        } else if (g->n_intended_voters < ROUTE_MEMBERS_MAX) {
            g->intended_voters[g->n_intended_voters++] = t->target;
        }
    }
}

/* The route a state describes: its table, groups (intent: desired peers and moves, epoch,
 * preferred leader) and nodes; observed facts are filled in by rt_publish_route. */
static int build_route_base(struct runtime *rt, const struct ctl_state *s)
{
    size_t n_nodes = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++)
        n_nodes += s->nodes[i].join_state != CTL_JOIN_REMOVED;
    struct route_snapshot *r;
    if (route_snapshot_new(s->n_groups, n_nodes, &r) != 0)
        return -1;
    r->revision = s->revision;
    r->table_ready = s->table.version > 0 && s->n_groups > 0;
    for (uint32_t i = 0; i < s->table.n_ranges; i++)
        for (uint32_t h = s->table.ranges[i].first; h <= s->table.ranges[i].last; h++)
            r->slot_group[h] = s->table.ranges[i].group;
    for (uint32_t i = 0; i < s->n_groups; i++) {
        const struct ctl_group *cg = &s->groups[i];
        struct route_group *g = &r->groups[i];
        g->id = cg->id;
        g->n_intended_voters = cg->n_peers;
        memcpy(g->intended_voters, cg->desired_peers, cg->n_peers * sizeof(uint64_t));
        intend_move(s, g);
        g->n_voters = g->n_intended_voters; /* until a replica reports */
        memcpy(g->voters, g->intended_voters, g->n_voters * sizeof(uint64_t));
        g->n_learners = g->n_intended_learners;
        memcpy(g->learners, g->intended_learners, g->n_learners * sizeof(uint64_t));
        g->config_epoch = cg->config_epoch;
        g->preferred_leader = cg->preferred_leader;
    }
    size_t k = 0;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        if (s->nodes[i].join_state == CTL_JOIN_REMOVED)
            continue;
        r->nodes[k].id = s->nodes[i].id;
        /* clients dial the client port; "" until the node has reported it */
        snprintf(r->nodes[k].address, sizeof(r->nodes[k].address), "%s",
                 s->nodes[i].client_address);
        k++;
    }
    route_snapshot_release(rt->route_base);
    rt->route_base = r;
    return 0;
}

static void publish_json(struct runtime *rt, const struct ctl_state *s)
{
    char *buf = NULL;
    size_t len = 0;
    uint32_t crc = 0;
    if (ctl_state_encode(s, &buf, &len) != CTL_OK || ctl_state_checksum(s, &crc) != CTL_OK) {
        RT_LOG("error", "msg=\"cannot encode the cluster state\"");
        ctl_free(buf);
        return;
    }
    pthread_mutex_lock(&rt->ctl_mu);
    if (rt->ctl_shared == NULL)
        rt->ctl_shared = malloc(sizeof(*rt->ctl_shared));
    if (rt->ctl_shared != NULL)
        *rt->ctl_shared = *s;
    ctl_free(rt->ctl_json);
    rt->ctl_json = buf;
    rt->ctl_json_len = len;
    rt->ctl_revision = s->revision;
    rt->ctl_applied = s->applied_raft_index;
    snprintf(rt->ctl_checksum, sizeof(rt->ctl_checksum), "%08x", crc);
    rt->ctl_n_voters = 0;
    for (uint32_t i = 0; i < s->n_nodes && rt->ctl_n_voters < RUNTIME_NODES_MAX; i++)
        if (s->nodes[i].roles & CTL_ROLE_CONTROLLER_VOTER)
            rt->ctl_voters[rt->ctl_n_voters++] = s->nodes[i].id;
    pthread_mutex_unlock(&rt->ctl_mu);
}

/* Opens (bootstrapping when the store has none) the slot groups the state places here. */
static void open_placed_groups(struct runtime *rt, const struct ctl_state *s)
{
    if (s->n_groups == 0 || s->table.version == 0)
        return;
    if (rt->n_groups == 0)
        atomic_store_explicit(&rt->n_groups, (size_t)s->n_groups, memory_order_release);
    uint32_t slot_group[256] = {0};
    for (uint32_t i = 0; i < s->table.n_ranges; i++)
        for (uint32_t h = s->table.ranges[i].first; h <= s->table.ranges[i].last; h++)
            slot_group[h] = s->table.ranges[i].group;
    for (uint32_t i = 0; i < s->n_groups && i < rt->n_groups; i++) {
        const struct ctl_group *cg = &s->groups[i];
        struct rt_group *g = &rt->groups[cg->id];
        if (g->hosted || !has_peer(cg, rt->opts.node_id))
            continue;
        char err[256];
        if (rt_group_open_placed(rt, g, cg->desired_peers, cg->n_peers, slot_group,
                                 cg->preferred_leader == rt->opts.node_id, err, sizeof(err)) != 0) {
            RT_LOG("error", "msg=\"cannot open a placed slot group\" group=%u err=\"%s\"", cg->id,
                   err);
            continue;
        }
        RT_LOG("info", "msg=\"slot group opened\" group=%u epoch=%llu", cg->id,
               (unsigned long long)cg->config_epoch);
    }
}

/* A node started with --join that the state lists as a controller voter, but that hosts no
 * controller log (its store lost it): it follows group 0 again from empty, and the leader fills
 * it with its log or snapshot, as for a promotion. */
static void rejoin_ctl(struct runtime *rt, const struct ctl_state *s)
{
    const struct ctl_node *self = ctl_state_node(s, rt->opts.node_id);
    if (rt->ctl_voter || rt->groups[0].hosted || self == NULL ||
        !(self->roles & CTL_ROLE_CONTROLLER_VOTER) || rt->opts.join == NULL ||
        rt->opts.join[0] == '\0')
        return;
    char err[256];
    if (rt_group_open_joining(rt, &rt->groups[0], err, sizeof(err)) != 0) {
        RT_LOG("error", "msg=\"cannot reopen the controller group\" err=\"%s\"", err);
        return;
    }
    rt->ctl_voter = true;
    RT_LOG("warn",
           "msg=\"rejoining the controller group with an empty log; the leader sends its log or "
           "snapshot\" revision=%llu",
           (unsigned long long)s->revision);
}

void rt_ctl_publish(struct runtime *rt, struct ctl_state *s)
{
    if (rt->ctl != NULL && s->revision < rt->ctl->revision) {
        RT_LOG("warn", "msg=\"older cluster state ignored\" have=%llu got=%llu",
               (unsigned long long)rt->ctl->revision, (unsigned long long)s->revision);
        free(s);
        return;
    }
    bool changed = rt->ctl == NULL || rt->ctl->revision != s->revision;
    if (!changed && s->applied_raft_index < rt->ctl->applied_raft_index) {
        free(s);
        return;
    }
    free(rt->ctl);
    rt->ctl = s;
    publish_json(rt, s);
    metrics_gauge_set(rt->metrics.controller_revision, (int64_t)s->revision);
    int64_t by_status[4] = {0};
    for (uint32_t i = 0; i < s->n_tasks; i++)
        if ((unsigned)s->tasks[i].status < 4)
            by_status[s->tasks[i].status]++;
    for (int i = 0; i < 4; i++)
        metrics_gauge_set(rt->metrics.controller_tasks[i], by_status[i]);
    metrics_gauge_set(rt->metrics.backup_plan_interval, (int64_t)s->backup.interval_s);
    metrics_gauge_set(rt->metrics.backup_plan_success_s,
                      (int64_t)(s->backup.last_success_ms / 1000));
    metrics_gauge_set(rt->metrics.backup_plan_bytes, (int64_t)s->backup.last_success_bytes);
    if (rt->opts.on_ctl_state != NULL)
        rt->opts.on_ctl_state(rt->opts.on_ctl_state_ctx, s);
    if (!changed)
        return;
    rejoin_ctl(rt, s);
    if (rt->transport != NULL)
        for (uint32_t i = 0; i < s->n_nodes; i++)
            if (s->nodes[i].id != rt->opts.node_id && s->nodes[i].join_state != CTL_JOIN_REMOVED)
                transport_add_peer(rt->transport, s->nodes[i].id, s->nodes[i].address);
    open_placed_groups(rt, s);
    if (build_route_base(rt, s) != 0) {
        RT_LOG("error", "msg=\"route rebuild: out of memory\"");
        return;
    }
    rt_publish_route(rt);
    rt_ctl_waiters_run(rt, false); /* state and route are at s->revision now */
}

/* ---- Start-up ---- */

static int bootstrap_ctl(struct runtime *rt, char *err, size_t errlen)
{
    const struct runtime_options *o = &rt->opts;
    struct ctl_cmd_node nodes[RUNTIME_NODES_MAX];
    for (size_t i = 0; i < o->n_nodes; i++)
        /* the same bytes on every initial voter: no client address (each reports its own),
         * except a cluster of one, whose bootstrap only it writes */
        nodes[i] = (struct ctl_cmd_node){
            o->nodes[i].id, o->nodes[i].address, o->weight,
            o->n_nodes == 1 && !net_addr_wildcard(o->advertise) ? o->advertise : NULL};
    struct ctl_config cfg = {.slot_groups = o->n_groups,
                             .hash_slots = CTL_HASH_SLOTS,
                             .replicas = o->replicas,
                             .bootstrap_expect =
                                 o->bootstrap_expect ? o->bootstrap_expect : (uint32_t)o->n_nodes};
    /* --enable-hash-slot-migration seeds the replicated switch here, once; later only
     * Admin.SetFeature changes it (docs/operations.md) */
    struct ctl_features features = {.hash_slot_migration = o->enable_hash_slot_migration};
    char *cmd = NULL;
    int rc = ctl_cmd_bootstrap_features(o->cluster_id, &cfg, &features, nodes, o->n_nodes, 0, &cmd);
    if (rc != CTL_OK) {
        snprintf(err, errlen, "controller bootstrap command: %s", ctl_strerror(rc));
        return -1;
    }
    uint64_t voters[RUNTIME_NODES_MAX];
    for (size_t i = 0; i < o->n_nodes; i++)
        voters[i] = o->nodes[i].id;
    rc = rt_group_bootstrap(rt, 0, voters, o->n_nodes, (const uint8_t *)cmd, strlen(cmd), err,
                            errlen);
    ctl_free(cmd);
    return rc;
}

/* Compares cluster-state.json with the state the store holds and rewrites it when it is not an
 * exact export of it, logging one line that says what was found and what was done. */
static void reconcile_file(struct runtime *rt, const struct ctl_state *s, bool voter)
{
    const char *path = rt->opts.state_path;
    struct ctl_state *f = malloc(sizeof(*f));
    char ferr[256] = "";
    char found[320];
    if (f == NULL)
        return;
    int rc = ctl_file_load(path, f, ferr, sizeof(ferr));
    uint32_t want = 0, have = 0;
    if (rc == CTL_ENOT_FOUND) {
        snprintf(found, sizeof(found), "missing");
    } else if (rc != CTL_OK) {
        snprintf(found, sizeof(found), "unreadable: %s", ferr);
    } else if (ctl_state_checksum(s, &want) != CTL_OK || ctl_state_checksum(f, &have) != CTL_OK) {
        free(f);
        return;
    } else if (f->revision == s->revision && f->applied_raft_index == s->applied_raft_index &&
               want == have) {
        free(f); /* an exact export: its age is unknown (written by an earlier run) */
        pthread_mutex_lock(&rt->ctl_mu);
        rt->ctl_view.file_revision = s->revision;
        pthread_mutex_unlock(&rt->ctl_mu);
        return;
    } else {
        bool newer = f->applied_raft_index > s->applied_raft_index;
        snprintf(found, sizeof(found), "%s: revision %llu at applied index %llu",
                 newer ? "ahead of the store (ignored)" : "older", (unsigned long long)f->revision,
                 (unsigned long long)f->applied_raft_index);
    }
    free(f);
    RT_LOG("warn",
           "msg=\"cluster-state.json is not the controller state; rewritten from the store\" "
           "found=\"%s\" revision=%llu applied=%llu source=%s",
           found, (unsigned long long)s->revision, (unsigned long long)s->applied_raft_index,
           voter ? "raft_snapshot_and_log" : "mirrored_copy");
    export_file(rt, s);
}

/* True when cluster-state.json shows a bootstrapped cluster in which this node is a controller
 * voter: evidence that it was a member, though its store holds no controller log. */
static bool file_names_self_voter(struct runtime *rt, uint64_t *revision)
{
    struct ctl_state *f = malloc(sizeof(*f));
    char ferr[256];
    bool yes = false;
    if (f != NULL && ctl_file_load(rt->opts.state_path, f, ferr, sizeof(ferr)) == CTL_OK) {
        const struct ctl_node *n = ctl_state_node(f, rt->opts.node_id);
        yes = f->revision > 0 && n != NULL && (n->roles & CTL_ROLE_CONTROLLER_VOTER);
        *revision = f->revision;
    }
    free(f);
    return yes;
}

int rt_ctl_open(struct runtime *rt, char *err, size_t errlen)
{
    const struct runtime_options *o = &rt->opts;
    pthread_mutex_init(&rt->ctl_mu, NULL);
    rt->ctl_apply = malloc(sizeof(*rt->ctl_apply));
    if (rt->ctl_apply == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ctl_state_init(rt->ctl_apply);
    bool have_state;
    if (state_load(rt, rt->ctl_apply, &have_state, err, errlen) != 0)
        return -1;
    struct store_group_state st;
    int rc = store_log_load(rt->store, 0, &st);
    if (rc != 0 && rc != STORE_ENOTFOUND) {
        snprintf(err, errlen, "controller raft log: %s: %s", store_strerror(rc),
                 store_errmsg(rt->store));
        return -1;
    }
    bool stored = rc == 0;
    bool initial_voter = o->join == NULL || o->join[0] == '\0';
    uint32_t *ids = NULL;
    size_t n_ids = 0;
    if (store_log_groups(rt->store, &ids, &n_ids) != 0) {
        snprintf(err, errlen, "controller group: %s", store_errmsg(rt->store));
        return -1;
    }
    bool slot_groups_stored = n_ids > (stored ? 1u : 0u);
    free(ids);
    const struct ctl_node *self = ctl_state_node(rt->ctl_apply, o->node_id);
    bool was_voter = have_state && self != NULL && (self->roles & CTL_ROLE_CONTROLLER_VOTER);
    uint64_t file_rev = 0;
    if (!stored && initial_voter) {
        /* Never start an empty controller where a member was: it could vote again in a term it
         * already voted in and elect a leader without the committed log. */
        if (was_voter || (!have_state && file_names_self_voter(rt, &file_rev))) {
            snprintf(err, errlen,
                     "this node was a controller voter (cluster state at revision %llu) but its "
                     "store holds no controller raft log; it must not start as an empty "
                     "controller: start it with --join HOST:PORT of a live node to be re-added "
                     "from the leader's snapshot",
                     (unsigned long long)(have_state ? rt->ctl_apply->revision : file_rev));
            return -1;
        }
        if (slot_groups_stored) {
            snprintf(err, errlen,
                     "the data directory holds slot groups but no controller raft log; "
                     "start with a new data directory");
            return -1;
        }
        if (have_state) {
            snprintf(err, errlen,
                     "the data directory holds a mirrored cluster state but no controller raft "
                     "log; it belongs to a node that joined: start it with --join");
            return -1;
        }
        if (bootstrap_ctl(rt, err, errlen) != 0)
            return -1;
        stored = true;
    }
    if (stored && !have_state && st.has_snapshot) {
        snprintf(err, errlen,
                 "the controller raft log is compacted to index %llu but the store holds no "
                 "controller state to start from (a data directory of an older slotd, or a "
                 "damaged one): move it away and start this node with --join",
                 (unsigned long long)st.snapshot.index);
        return -1;
    }
    if (stored) {
        rt->ctl_voter = true;
        if (rt_group_open_ctl(rt, &rt->groups[0], rt->ctl_apply->applied_raft_index, err, errlen) !=
            0)
            return -1;
    }
    if (have_state) {
        RT_LOG("info",
               "msg=\"controller state loaded from the store\" revision=%llu applied=%llu "
               "replay=%s",
               (unsigned long long)rt->ctl_apply->revision,
               (unsigned long long)rt->ctl_apply->applied_raft_index,
               stored ? "log_suffix" : "none_mirror");
        reconcile_file(rt, rt->ctl_apply, stored);
        struct ctl_state *pub = malloc(sizeof(*pub));
        if (pub == NULL) {
            snprintf(err, errlen, "out of memory");
            return -1;
        }
        *pub = *rt->ctl_apply;
        rt->ctl_pending = pub; /* published when the loop starts */
    } else if (stored) {
        RT_LOG("info", "msg=\"no controller state in the store yet; the raft log is replayed "
                       "from index 1\"");
    }
    return 0;
}

void rt_ctl_close(struct runtime *rt)
{
    free(rt->ctl);
    free(rt->ctl_apply);
    free(rt->ctl_installed);
    free(rt->ctl_pending);
    free(rt->ctl_shared);
    rt->ctl_shared = NULL;
    ctl_free(rt->ctl_json);
    rt->ctl = rt->ctl_apply = rt->ctl_installed = rt->ctl_pending = NULL;
    rt->ctl_json = NULL;
    pthread_mutex_destroy(&rt->ctl_mu);
}

/* ---- Mirrors and joining (loop thread; replies arrive on the transport's thread) ---- */

static void on_state_reply(void *arg, int status, const char *message, const uint8_t *resp,
                           size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct runtime *rt = arg;
    (void)details;
    (void)details_len;
    if (status == 0) {
        pthread_mutex_lock(&rt->ctl_mu);
        rt->ctl_view.mirror_age_ms = rt_now_ms(); /* a stamp here */
        pthread_mutex_unlock(&rt->ctl_mu);
    }
    if (status == 0 && resp != NULL)
        runtime_submit_ctl_state(rt, resp, resp_len);
    else if (status != 0)
        RT_LOG("debug", "msg=\"cluster state poll failed\" status=%d err=\"%s\"", status,
               message ? message : "");
}

static void on_join_reply(void *arg, int status, const char *message, const uint8_t *resp,
                          size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct runtime *rt = arg;
    (void)resp;
    (void)resp_len;
    (void)details;
    (void)details_len;
    if (status != 0)
        RT_LOG("warn", "msg=\"join request failed\" status=%d err=\"%s\"", status,
               message ? message : "");
    atomic_store(&rt->ctl_join_inflight, false);
}

/* A mirror's copy arrived (loop thread): strict decode, newer only, atomic save, publish. */
/* A node that comes back after it was removed (its id is a tombstone, never reused) stops: the
 * first mirrored state since the start showing it removed raises SIGTERM (main exits non-zero,
 * runtime_ctl_removed). One removed while it ran (the end of a drain) saw itself live before and
 * keeps running until it is stopped. */
static void check_removed(struct runtime *rt, const struct ctl_state *s)
{
    const struct ctl_node *me = ctl_state_node(s, rt->opts.node_id);
    if (me == NULL || rt->ctl_removed)
        return;
    if (me->join_state != CTL_JOIN_REMOVED) {
        rt->ctl_seen_live = true;
        return;
    }
    if (rt->ctl_seen_live)
        return;
    RT_LOG("error",
           "msg=\"this node is removed from the cluster (a tombstone: drained or Admin.RemoveNode "
           "while it was away); its id is never reused: start it with an empty data directory and "
           "a new --node-id\" node=%llu revision=%llu",
           (unsigned long long)rt->opts.node_id, (unsigned long long)s->revision);
    rt->ctl_removed = true;
    kill(getpid(), SIGTERM);
}

bool runtime_ctl_removed(const struct runtime *rt)
{
    return rt->ctl_removed;
}

void rt_ctl_mirror_reply(struct runtime *rt, const uint8_t *data, size_t len)
{
    Slotd__V1__ClusterStateResponse *r = slotd__v1__cluster_state_response__unpack(NULL, len, data);
    if (r == NULL)
        return;
    /* Newer: a higher revision, or the same revision at a later applied index. */
    if (r->not_modified || r->state_json.len == 0 ||
        (rt->ctl != NULL && (r->revision < rt->ctl->revision ||
                             (r->revision == rt->ctl->revision &&
                              r->applied_raft_index <= rt->ctl->applied_raft_index)))) {
        slotd__v1__cluster_state_response__free_unpacked(r, NULL);
        return;
    }
    struct ctl_state *s = malloc(sizeof(*s));
    char err[256];
    if (s == NULL ||
        ctl_state_decode(r->state_json.data, r->state_json.len, s, err, sizeof(err)) != CTL_OK) {
        if (s != NULL)
            RT_LOG("warn", "msg=\"mirrored cluster state rejected\" err=\"%s\"", err);
        free(s);
        slotd__v1__cluster_state_response__free_unpacked(r, NULL);
        return;
    }
    slotd__v1__cluster_state_response__free_unpacked(r, NULL);
    /* A mirror keeps its copy in the store too (no applied index: it hosts no group 0). */
    int rc = state_save(rt, s, false);
    if (rc != 0) {
        RT_LOG("error", "msg=\"cannot save the mirrored cluster state\" err=\"%s\"",
               store_strerror(rc));
        free(s);
        return;
    }
    export_file(rt, s);
    RT_LOG("info", "msg=\"cluster state mirrored\" revision=%llu", (unsigned long long)s->revision);
    check_removed(rt, s);
    rt_ctl_publish(rt, s);
}

static const struct ctl_node *self_node(const struct runtime *rt)
{
    return rt->ctl ? ctl_state_node(rt->ctl, rt->opts.node_id) : NULL;
}

static void send_join(struct runtime *rt, const char *address, bool activate)
{
    uint8_t buf[512];
    size_t len;
    if (activate) {
        Slotd__V1__ActivateNodeRequest q = SLOTD__V1__ACTIVATE_NODE_REQUEST__INIT;
        q.node_id = rt->opts.node_id;
        len = slotd__v1__activate_node_request__pack(&q, buf);
    } else {
        Slotd__V1__JoinNodeRequest q = SLOTD__V1__JOIN_NODE_REQUEST__INIT;
        q.node_id = rt->opts.node_id;
        q.address = (char *)rt->opts.peer_advertise;
        q.client_address = (char *)rt->opts.advertise;
        q.weight = rt->opts.weight;
        len = slotd__v1__join_node_request__pack(&q, buf);
    }
    atomic_store(&rt->ctl_join_inflight, true);
    if (transport_forward_addr(rt->transport, address,
                               activate ? ADMIN_ACTIVATE_NODE : ADMIN_JOIN_NODE, buf, len,
                               rt_now_ms() + CTL_CALL_TIMEOUT_MS, on_join_reply, rt) != 0)
        atomic_store(&rt->ctl_join_inflight, false);
    else
        RT_LOG("info", "msg=\"%s\" via=%s", activate ? "asking to be activated" : "joining",
               address);
}

/* A controller voter to send to: the observed leader (voters), else one from the state. */
static uint64_t ctl_target(struct runtime *rt)
{
    uint64_t to = rt->ctl_voter ? rt->groups[0].leader : 0;
    for (uint32_t k = 0; rt->ctl != NULL && k < rt->ctl->n_nodes && to == 0; k++) {
        const struct ctl_node *n = &rt->ctl->nodes[(rt->ctl_poll_next + k) % rt->ctl->n_nodes];
        if ((n->roles & CTL_ROLE_CONTROLLER_VOTER) && n->id != rt->opts.node_id)
            to = n->id;
    }
    return to == rt->opts.node_id ? 0 : to;
}

/* Every poll: a mirror asks a voter (round robin; the join address until it knows one) for a
 * newer state; a joining node registers and activates itself. Voters do nothing here. */
void rt_ctl_poll(struct runtime *rt)
{
    if (rt->ctl_voter || rt->transport == NULL)
        return;
    const char *address = NULL;
    uint64_t voter = ctl_target(rt); /* not a voter: round robin over the state's voters */
    rt->ctl_poll_next++;
    if (voter == 0)
        address = rt->opts.join;
    if (voter == 0 && (address == NULL || address[0] == '\0'))
        return;
    const struct ctl_node *me = self_node(rt);
    const char *via = address ? address : transport_peer_address(rt->transport, voter);
    if (rt->opts.join && rt->opts.join[0] && via && !atomic_load(&rt->ctl_join_inflight)) {
        if (me == NULL) {
            send_join(rt, via, false);
        } else if (me->join_state == CTL_JOIN_JOINING) {
            send_join(rt, via, true);
        }
    }
    Slotd__V1__ClusterStateRequest q = SLOTD__V1__CLUSTER_STATE_REQUEST__INIT;
    char known[16] = "";
    if (rt->ctl != NULL) {
        q.known_revision = rt->ctl->revision;
        pthread_mutex_lock(&rt->ctl_mu);
        snprintf(known, sizeof(known), "%s", rt->ctl_checksum);
        pthread_mutex_unlock(&rt->ctl_mu);
        q.known_checksum = known;
    }
    uint8_t buf[64];
    size_t len = slotd__v1__cluster_state_request__pack(&q, buf);
    int64_t deadline = rt_now_ms() + CTL_CALL_TIMEOUT_MS;
    if (voter != 0)
        transport_forward(rt->transport, voter, ADMIN_CLUSTER_STATE, buf, len, deadline,
                          on_state_reply, rt);
    else
        transport_forward_addr(rt->transport, address, ADMIN_CLUSTER_STATE, buf, len, deadline,
                               on_state_reply, rt);
}

/* ---- Liveness (loop thread) ---- */

uint64_t rt_wall_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* A command the controller leader proposes by itself (no caller waits for it). */
static void propose_own(struct runtime *rt, char *cmd, const char *what)
{
    if (cmd == NULL)
        return;
    const uint8_t *data = (const uint8_t *)cmd;
    size_t len = strlen(cmd);
    char *vetted = NULL;
    struct slotd_error err;
    if (rt_ctl_vet(rt, &data, &len, &vetted, &err) != 0) {
        RT_LOG("debug", "msg=\"controller proposal refused\" what=%s err=\"%s\"", what,
               err.message);
        ctl_free(cmd);
        return;
    }
    raft_index index;
    int rc = raft_propose(rt->groups[0].raft, data, len, &index);
    ctl_free(vetted);
    if (rc != 0)
        RT_LOG("debug", "msg=\"controller proposal refused\" what=%s err=\"%s\"", what,
               raft_strerror(rc));
    ctl_free(cmd);
}

static void on_command_reply(void *arg, int status, const char *message, const uint8_t *resp,
                             size_t resp_len, const uint8_t *details, size_t details_len)
{
    (void)resp;
    (void)resp_len;
    (void)details;
    (void)details_len;
    if (status != 0)
        RT_LOG("debug", "msg=\"controller command not applied\" what=%s status=%d err=\"%s\"",
               (const char *)arg, status, message ? message : "");
}

void rt_ctl_submit(struct runtime *rt, char *cmd, const char *what)
{
    if (cmd == NULL)
        return;
    if (rt_ctl_leading(rt)) {
        propose_own(rt, cmd, what);
        return;
    }
    uint64_t to = ctl_target(rt);
    if (to == 0 || rt->transport == NULL) {
        ctl_free(cmd);
        return;
    }
    Slotd__Internal__V1__ControllerCommandRequest q =
        SLOTD__INTERNAL__V1__CONTROLLER_COMMAND_REQUEST__INIT;
    q.command.data = (uint8_t *)cmd;
    q.command.len = strlen(cmd);
    q.no_forward = rt->ctl_voter; /* a voter sends to the leader itself */
    size_t len = slotd__internal__v1__controller_command_request__get_packed_size(&q);
    uint8_t *buf = malloc(len ? len : 1);
    if (buf != NULL) {
        slotd__internal__v1__controller_command_request__pack(&q, buf);
        transport_call(rt->transport, to, "/slotd.internal.v1.Peer/ControllerCommand", buf, len,
                       rt_now_ms() + CTL_CALL_TIMEOUT_MS, on_command_reply, (void *)what);
    }
    free(buf);
    ctl_free(cmd);
}

/* Every CTL_REPORT_EVERY_MS: this node's report, to the controller leader. */
static void report_health(struct runtime *rt, int64_t now)
{
    if (rt->ctl == NULL || self_node(rt) == NULL || now < rt->ctl_next_report_ms)
        return;
    rt->ctl_next_report_ms = now + CTL_REPORT_EVERY_MS;
    char *cmd = NULL;
    ctl_cmd_health_report(rt->opts.node_id, rt_wall_ms(), CTL_REPORT_TTL_MS, 0, &cmd);
    rt_ctl_submit(rt, cmd, "health_report");
    /* where this node serves, when the state says otherwise (the other voters' client
     * addresses at bootstrap, a restart on other ports); a wildcard host (--listen 0.0.0.0:...
     * without --advertise) is nobody's address to dial and is never reported */
    const struct ctl_node *me = self_node(rt);
    const char *peer =
        net_addr_wildcard(rt->opts.peer_advertise) ? me->address : rt->opts.peer_advertise;
    const char *client =
        net_addr_wildcard(rt->opts.advertise) ? me->client_address : rt->opts.advertise;
    if (client[0] != '\0' &&
        (strcmp(me->address, peer) != 0 || strcmp(me->client_address, client) != 0)) {
        cmd = NULL;
        ctl_cmd_node_address(rt->opts.node_id, peer, client, 0, &cmd);
        rt_ctl_submit(rt, cmd, "node_address");
    }
    /* this node's --zone, when the state says otherwise (a new node, a restart in another zone) */
    const char *zone = rt->opts.zone != NULL ? rt->opts.zone : "";
    if (me->join_state != CTL_JOIN_REMOVED && strcmp(me->zone, zone) != 0) {
        cmd = NULL;
        if (ctl_cmd_node_zone(rt->opts.node_id, zone, &cmd) == CTL_OK)
            rt_ctl_submit(rt, cmd, "node_zone");
    }
}

/* The controller leader: a node's status follows the age of its last report. Nodes that never
 * reported keep their status. */
static void reconcile_status(struct runtime *rt, int64_t now)
{
    if (!rt_ctl_leading(rt) || rt->ctl == NULL || now < rt->ctl_next_status_ms)
        return;
    const struct ctl_state *s = rt->ctl;
    uint64_t wall = rt_wall_ms();
    for (uint32_t i = 0; i < s->n_health; i++) {
        const struct ctl_health *hr = &s->health[i];
        const struct ctl_node *n = ctl_state_node(s, hr->node);
        if (n == NULL || n->join_state == CTL_JOIN_REMOVED)
            continue;
        uint64_t age = wall > hr->reported_at_ms ? wall - hr->reported_at_ms : 0;
        enum ctl_node_status want = age <= hr->ttl_ms                   ? CTL_STATUS_ALIVE
                                    : age <= hr->ttl_ms * CTL_DOWN_TTLS ? CTL_STATUS_SUSPECT
                                                                        : CTL_STATUS_DOWN;
        if (want == n->status)
            continue;
        char *cmd = NULL;
        ctl_cmd_set_node_status(n->id, want, 0, &cmd);
        RT_LOG("info", "msg=\"node status\" node=%llu status=%s last_report_ms_ago=%llu",
               (unsigned long long)n->id, ctl_node_status_name(want), (unsigned long long)age);
        propose_own(rt, cmd, "set_node_status");
        rt->ctl_next_status_ms = now + CTL_STATUS_RETRY_MS; /* wait for it to apply */
    }
}

void rt_ctl_liveness(struct runtime *rt)
{
    int64_t now = rt_now_ms();
    report_health(rt, now);
    reconcile_status(rt, now);
}

/* ---- Preferred-leader convergence (loop thread, every poll) ---- */

static const char *converge_group(struct runtime *rt, struct rt_group *g, int64_t now)
{
    const struct ctl_group *cg = ctl_state_group(rt->ctl, g->id);
    if (cg == NULL)
        return "no_intent";
    uint64_t target = cg->preferred_leader;
    if (target == rt->opts.node_id)
        return "already_preferred";
    if (ctl_state_active_task(rt->ctl, g->id) != NULL)
        return "task_active";
    if (now < g->converge_after_ms)
        return "cooldown";
    struct raft_status st;
    raft_status(g->raft, &st);
    if (st.role != RAFT_LEADER)
        return "not_leader";
    if (st.conf.n_learners != 0 || st.conf.n_voters != cg->n_peers)
        return "voters_differ";
    for (uint32_t i = 0; i < cg->n_peers; i++) {
        bool found = false;
        for (size_t j = 0; j < st.conf.n_voters; j++)
            found = found || st.conf.voters[j] == cg->desired_peers[i];
        if (!found)
            return "voters_differ";
    }
    const struct raft_progress_status *p = NULL;
    for (size_t i = 0; i < st.n_progress; i++)
        if (st.progress[i].id == target)
            p = &st.progress[i];
    if (p == NULL || !p->recent_active)
        return "target_inactive";
    if (p->match < st.commit)
        return "target_behind";
    if (rt_transfer_leader(g, target) != 0)
        return "transfer_refused";
    g->converge_after_ms = now + CTL_CONVERGE_COOLDOWN_MS;
    RT_LOG("info", "msg=\"moving leadership to the preferred leader\" group=%u to=%llu", g->id,
           (unsigned long long)target);
    return "transferred";
}

void rt_ctl_converge(struct runtime *rt)
{
    if (rt->ctl == NULL)
        return;
    int64_t now = rt_now_ms();
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (!g->hosted || g->leader != rt->opts.node_id)
            continue;
        const char *why = converge_group(rt, g, now);
        rt_metrics_converge(rt, why);
    }
}

/* ---- Queries from other threads ---- */

int runtime_ctl_state(struct runtime *rt, const char *known_checksum, uint64_t known_revision,
                      uint8_t **buf, size_t *len)
{
    Slotd__V1__ClusterStateResponse r = SLOTD__V1__CLUSTER_STATE_RESPONSE__INIT;
    pthread_mutex_lock(&rt->ctl_mu);
    if (rt->ctl_json == NULL) {
        pthread_mutex_unlock(&rt->ctl_mu);
        return 1;
    }
    r.revision = rt->ctl_revision;
    r.checksum = rt->ctl_checksum;
    r.applied_raft_index = rt->ctl_applied;
    r.from_voter = rt->ctl_voter;
    r.not_modified = known_revision == rt->ctl_revision && known_checksum != NULL &&
                     strcmp(known_checksum, rt->ctl_checksum) == 0;
    if (!r.not_modified) {
        r.state_json.data = (uint8_t *)rt->ctl_json;
        r.state_json.len = rt->ctl_json_len;
    }
    *len = slotd__v1__cluster_state_response__get_packed_size(&r);
    *buf = malloc(*len ? *len : 1);
    if (*buf != NULL)
        slotd__v1__cluster_state_response__pack(&r, *buf);
    pthread_mutex_unlock(&rt->ctl_mu);
    return *buf == NULL ? -1 : 0;
}

int runtime_ctl_task(struct runtime *rt, uint64_t id, struct ctl_task *out, uint64_t *revision)
{
    int rc = 1;
    pthread_mutex_lock(&rt->ctl_mu);
    const struct ctl_task *t = rt->ctl_shared ? ctl_state_task(rt->ctl_shared, id) : NULL;
    if (t != NULL) {
        *out = *t;
        *revision = rt->ctl_shared->revision;
        rc = 0;
    }
    pthread_mutex_unlock(&rt->ctl_mu);
    return rc;
}

size_t runtime_ctl_tasks(struct runtime *rt, bool active_only, struct ctl_task *out, size_t max,
                         uint64_t *revision)
{
    size_t n = 0;
    pthread_mutex_lock(&rt->ctl_mu);
    const struct ctl_state *s = rt->ctl_shared;
    *revision = s ? s->revision : 0;
    for (uint32_t i = 0; s != NULL && i < s->n_tasks && n < max; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if (!active_only || t->status == CTL_TASK_PENDING || t->status == CTL_TASK_RUNNING)
            out[n++] = *t;
    }
    pthread_mutex_unlock(&rt->ctl_mu);
    return n;
}

void runtime_ctl_balance(struct runtime *rt, struct ctl_balance_plan *out, bool *enabled,
                         bool *paused, unsigned *max_moves)
{
    *enabled = rt->opts.balance;
    *max_moves = rt->opts.balance_max_moves;
    pthread_mutex_lock(&rt->ctl_mu);
    const struct ctl_state *s = rt->ctl_shared;
    *paused = s != NULL && s->features.balance_paused;
    if (s != NULL)
        ctl_balance_plan(s, NULL, rt->opts.balance_max_moves, out);
    else
        memset(out, 0, sizeof(*out));
    pthread_mutex_unlock(&rt->ctl_mu);
}

bool runtime_ctl_voter(const struct runtime *rt)
{
    return rt->ctl_voter;
}

size_t runtime_ctl_voters(struct runtime *rt, uint64_t *out, size_t max)
{
    pthread_mutex_lock(&rt->ctl_mu);
    size_t n = rt->ctl_n_voters < max ? rt->ctl_n_voters : max;
    memcpy(out, rt->ctl_voters, n * sizeof(uint64_t));
    pthread_mutex_unlock(&rt->ctl_mu);
    return n;
}

uint64_t runtime_ctl_leader(struct runtime *rt)
{
    return rt->ctl_voter ? atomic_load_explicit(&rt->groups[0].leader, memory_order_relaxed) : 0;
}

/* ---- Admin.ControllerStatus ---- */

void rt_ctl_view_refresh(struct runtime *rt)
{
    struct rt_group *g = &rt->groups[0];
    const char *role = rt->ctl != NULL ? "mirror" : "none";
    uint64_t term = 0, commit = 0, leader = 0, snap = 0;
    if (g->hosted) {
        struct raft_status st;
        raft_status(g->raft, &st);
        role = raft_role_name(st.role);
        for (size_t i = 0; i < st.conf.n_learners; i++)
            if (st.conf.learners[i] == rt->opts.node_id)
                role = "learner";
        term = st.term;
        commit = st.commit;
        leader = st.leader;
        snap = g->first_index > 0 ? g->first_index - 1 : 0;
    }
    uint32_t n_lost = 0, lost[64];
    for (uint32_t i = 0; rt->ctl != NULL && i < rt->ctl->n_groups && n_lost < 64; i++)
        if (!ctl_group_has_quorum(rt->ctl, &rt->ctl->groups[i]))
            lost[n_lost++] = rt->ctl->groups[i].id;
    pthread_mutex_lock(&rt->ctl_mu);
    rt->ctl_view.n_groups_without_quorum = n_lost;
    memcpy(rt->ctl_view.groups_without_quorum, lost, n_lost * sizeof(lost[0]));
    rt->ctl_view.role = role;
    rt->ctl_view.term = term;
    rt->ctl_view.commit_index = commit;
    rt->ctl_view.leader = leader;
    rt->ctl_view.snapshot_index = snap;
    pthread_mutex_unlock(&rt->ctl_mu);
}

void runtime_ctl_status(struct runtime *rt, struct runtime_ctl_status *out)
{
    int64_t now = rt_now_ms();
    pthread_mutex_lock(&rt->ctl_mu);
    *out = rt->ctl_view;
    out->revision = rt->ctl_json != NULL ? rt->ctl_revision : 0;
    out->applied_index = rt->ctl_json != NULL ? rt->ctl_applied : 0;
    pthread_mutex_unlock(&rt->ctl_mu);
    /* the view is refreshed every tick, the applied index on every apply: what is applied is
     * committed, so the view's commit index never reads below it */
    if (out->term > 0 && out->commit_index < out->applied_index)
        out->commit_index = out->applied_index;
    if (out->role == NULL)
        out->role = "none";
    out->file_age_ms = out->file_age_ms > 0 ? now - out->file_age_ms : -1;
    out->mirror_age_ms = out->mirror_age_ms > 0 ? now - out->mirror_age_ms : -1;
}

/* ---- min_revision: read your admin writes ---- */

int runtime_ctl_wait(struct runtime *rt, uint64_t min_revision, runtime_revision_cb fn, void *arg,
                     struct slotd_error *err)
{
    pthread_mutex_lock(&rt->ctl_mu);
    if (rt->ctl_gate_revision >= min_revision) {
        pthread_mutex_unlock(&rt->ctl_mu);
        return 1;
    }
    if (rt->ctl_waiters_closed) {
        pthread_mutex_unlock(&rt->ctl_mu);
        slotd_error_set(err, SLOTD_ESHUTTING_DOWN, "node is shutting down");
        return -1;
    }
    if (rt->ctl_n_waiters >= RUNTIME_CTL_WAITERS_MAX) {
        uint64_t have = rt->ctl_gate_revision;
        pthread_mutex_unlock(&rt->ctl_mu);
        slotd_error_set(err, SLOTD_EQUEUE_FULL,
                        "min_revision: %u calls already wait for a newer cluster state (limit "
                        "%u); this node is at revision %llu",
                        RUNTIME_CTL_WAITERS_MAX, RUNTIME_CTL_WAITERS_MAX, (unsigned long long)have);
        err->retry_after_ms = 100;
        return -1;
    }
    rt->ctl_waiters[rt->ctl_n_waiters++] =
        (struct rt_ctl_waiter){.min_revision = min_revision,
                               .deadline_ms = rt_now_ms() + RUNTIME_CTL_WAIT_MS,
                               .fn = fn,
                               .arg = arg};
    pthread_mutex_unlock(&rt->ctl_mu);
    return 0;
}

void rt_ctl_waiters_run(struct runtime *rt, bool shutdown)
{
    struct rt_ctl_waiter due[RUNTIME_CTL_WAITERS_MAX];
    bool reached[RUNTIME_CTL_WAITERS_MAX];
    size_t n = 0;
    int64_t now = rt_now_ms();
    pthread_mutex_lock(&rt->ctl_mu);
    if (rt->ctl != NULL && rt->ctl->revision > rt->ctl_gate_revision)
        rt->ctl_gate_revision = rt->ctl->revision; /* the route was published from it too */
    uint64_t have = rt->ctl_gate_revision;
    if (shutdown)
        rt->ctl_waiters_closed = true;
    size_t k = 0;
    for (size_t i = 0; i < rt->ctl_n_waiters; i++) {
        struct rt_ctl_waiter *w = &rt->ctl_waiters[i];
        bool ok = w->min_revision <= have;
        if (ok || shutdown || now >= w->deadline_ms) {
            reached[n] = ok;
            due[n++] = *w;
        } else {
            rt->ctl_waiters[k++] = *w;
        }
    }
    rt->ctl_n_waiters = k;
    pthread_mutex_unlock(&rt->ctl_mu);
    for (size_t i = 0; i < n; i++)
        due[i].fn(due[i].arg, reached[i], have);
}
