/* task_cleanup.c - a slot group's leader removes a learner that no task owns any more (one left
 * by a replica move that failed, its target died or the phase timed out, or was aborted before
 * promote, so no leftover learner blocks a later move of the group) and a voter that is a
 * removed node (Admin.RemoveNode) no longer among the desired peers (loop thread). */
#include <string.h>

#include "service/controller/controller.h"
#include "raft/raft.h"
#include "service/executor/executor_internal.h"

/* A learner must look unowned this long before its removal is proposed: a leader whose copy of
 * the cluster state trails the controller (a mirror polls it) may not know the task that added
 * it yet. */
#define CLEANUP_GRACE_MS 3000
/* The same removal is proposed again at most this often (until the learner is gone). */
#define CLEANUP_PACE_MS 1500

static bool has(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

bool executor__task_holds_replica(const struct ctl_task *t)
{
    if (t->status == CTL_TASK_RUNNING || t->status == CTL_TASK_PENDING)
        return true;
    if (t->status != CTL_TASK_FAILED)
        return false;
    /* a move that failed before promote restarts at add_learner: its learner goes */
    return t->kind != CTL_TASK_REPLICA_MOVE || t->phase_index > CTL_PHASE_MOVE_CATCH_UP;
}

/* Whether learner l of group cg is owned: the group's newest task is a move to l that is
 * running, or failed from promote on (a retry continues with it). Any other active task of the
 * group that is not a replica move (a migration, a transfer) defers the cleanup: *defer set. */
static bool owned(const struct ctl_state *s, const struct ctl_group *cg, uint64_t l, bool *defer)
{
    const struct ctl_task *newest = NULL;
    *defer = false;
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        bool mine = t->group == cg->id ||
                    (t->kind == CTL_TASK_HASH_SLOT_MIGRATION && t->to_group == cg->id);
        if (!mine)
            continue;
        bool active = t->status == CTL_TASK_RUNNING || t->status == CTL_TASK_PENDING;
        if (active && t->kind != CTL_TASK_REPLICA_MOVE)
            *defer = true;
        if (newest == NULL || t->id > newest->id)
            newest = t;
    }
    return newest != NULL && newest->kind == CTL_TASK_REPLICA_MOVE && newest->target == l &&
           executor__task_holds_replica(newest);
}

static void cleanup_group(struct executor *ex, const struct ctl_state *s, struct rt_group *g,
                          const struct ctl_group *cg, int64_t now)
{
    struct exec_leftover *lo = &ex->leftover[cg->id];
    struct raft_status st;
    raft_status(engine_group_raft(g), &st);
    uint64_t leftover = 0;
    for (size_t i = 0; i < st.conf.n_learners && leftover == 0; i++) {
        uint64_t l = st.conf.learners[i];
        bool defer;
        if (!has(cg->desired_peers, cg->n_peers, l) && !owned(s, cg, l, &defer) && !defer)
            leftover = l;
    }
    /* a voter that is a tombstone (Admin.RemoveNode took it out of the desired peers), once no
     * task is active on the group */
    for (size_t i = 0; i < st.conf.n_voters && leftover == 0; i++) {
        uint64_t id = st.conf.voters[i];
        const struct ctl_node *n = ctl_state_node(s, id);
        if (id != ex->opts->node_id && n != NULL && n->join_state == CTL_JOIN_REMOVED &&
            !has(cg->desired_peers, cg->n_peers, id) && ctl_state_active_task(s, cg->id) == NULL)
            leftover = id;
    }
    if (leftover != lo->learner) {
        lo->learner = leftover;
        lo->since_ms = now;
        lo->next_ms = 0;
    }
    if (leftover == 0 || now - lo->since_ms < CLEANUP_GRACE_MS || now < lo->next_ms)
        return;
    lo->next_ms = now + CLEANUP_PACE_MS;
    struct raft_conf_change cc = {.type = RAFT_CC_REMOVE, .node = leftover};
    raft_index index = 0;
    int rc = raft_propose_conf_change(engine_group_raft(g), &cc, &index);
    EXEC_LOG(rc == 0 ? "info" : "debug",
             "msg=\"leftover %s removal %s\" group=%u node=%llu index=%llu err=\"%s\"",
             has(st.conf.voters, st.conf.n_voters, leftover) ? "voter" : "learner",
             rc == 0 ? "proposed" : "refused", cg->id, (unsigned long long)leftover,
             (unsigned long long)index, rc == 0 ? "" : raft_strerror(rc));
}

void executor__task_cleanup(struct executor *ex)
{
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    if (s == NULL)
        return;
    int64_t now = engine_now_ms();
    for (uint32_t i = 0; i < s->n_groups; i++) {
        const struct ctl_group *cg = &s->groups[i];
        struct rt_group *g = cg->id == 0 ? NULL : engine_group(ex->rt, cg->id);
        if (g == NULL)
            continue;
        if (!engine_group_hosted(g) || engine_group_raft(g) == NULL || !engine_group_leading(g)) {
            ex->leftover[cg->id].learner = 0;
            continue;
        }
        cleanup_group(ex, s, g, cg, now);
    }
}
