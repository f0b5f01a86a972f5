/* ctl_members.c - controller membership follows the cluster state (loop thread, every poll): the
 * controller leader takes out of group 0 a member the state no longer names a controller voter
 * (Admin.DemoteControllerVoter, or a promotion that failed) once it stopped answering, handing
 * leadership away first when that member is itself; such a member closes its replica of group 0
 * and becomes a mirror. */
#include "service/controller/controller.h"
#include "service/runtime/ctl.h"
#include "service/runtime/ctl_members.h"
#include "service/runtime/lease.h"
#include "service/runtime/peer.h"
#include "service/runtime/request.h"

/* The same conf change or transfer is attempted at most this often. */
#define MEMBERS_PACE_MS 1500

static bool promoting(const struct ctl_state *s, uint64_t node)
{
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if ((t->status == CTL_TASK_RUNNING || t->status == CTL_TASK_PENDING) &&
            t->kind == CTL_TASK_CONTROLLER_VOTER_PROMOTION && t->target == node)
            return true;
    }
    return false;
}

/* A member of group 0 that the state does not name a controller voter, none being promoted. */
static bool outsider(const struct ctl_state *s, uint64_t id)
{
    const struct ctl_node *n = ctl_state_node(s, id);
    return n != NULL && !(n->roles & CTL_ROLE_CONTROLLER_VOTER) && !promoting(s, id);
}

/* A caught-up, recently active member the state names a voter (0 if none). */
static uint64_t successor(const struct ctl_state *s, const struct raft_status *st)
{
    for (size_t i = 0; i < st->n_progress; i++) {
        const struct raft_progress_status *p = &st->progress[i];
        const struct ctl_node *n = ctl_state_node(s, p->id);
        if (p->id != st->id && !p->learner && p->recent_active && p->match >= st->commit &&
            n != NULL && (n->roles & CTL_ROLE_CONTROLLER_VOTER))
            return p->id;
    }
    return 0;
}

static void leader_step(struct runtime *rt, int64_t now)
{
    struct rt_group *g = &rt->groups[0];
    struct raft_status st;
    raft_status(g->raft, &st);
    for (size_t i = 0; i < st.n_progress && now >= rt->ctl_members_next_ms; i++) {
        const struct raft_progress_status *p = &st.progress[i];
        if (!outsider(rt->ctl, p->id))
            continue;
        rt->ctl_members_next_ms = now + MEMBERS_PACE_MS;
        if (p->id == st.id) {
            uint64_t to = successor(rt->ctl, &st);
            if (to != 0) {
                RT_LOG("info", "msg=\"controller leader demoted: handing leadership over\" to=%llu",
                       (unsigned long long)to);
                rt_transfer_leader(g, to);
            }
            return;
        }
        if (p->recent_active)
            continue; /* it closes its replica once it applied its demotion, then goes */
        struct raft_conf_change cc = {.type = RAFT_CC_REMOVE, .node = p->id};
        raft_index index = 0;
        int rc = raft_propose_conf_change(g->raft, &cc, &index);
        RT_LOG(rc == 0 ? "info" : "debug",
               "msg=\"controller member removal %s\" node=%llu index=%llu err=\"%s\"",
               rc == 0 ? "proposed" : "refused", (unsigned long long)p->id,
               (unsigned long long)index, rc == 0 ? "" : raft_strerror(rc));
        return;
    }
}

/* This node hosts group 0 but the state (its own applied copy) no longer names it a voter: it
 * closes the replica at a poll where nothing reads the group's state, and mirrors from then on. */
static void self_step(struct runtime *rt)
{
    struct rt_group *g = &rt->groups[0];
    if (!outsider(rt->ctl, rt->opts.node_id) || g->role == RAFT_LEADER)
        return;
    bool busy = g->in_batch || g->apply_jobs > 0 || g->snap_recv.active ||
                !rt_apply_idle(rt) || rt->installs != NULL;
    for (struct rt_snap_send *x = rt->snap_sends; x != NULL && !busy; x = x->next)
        busy = x->g == g;
    if (busy)
        return;
    rt_group_close_removed(rt, g);
    rt->ctl_voter = false;
    rt_ctl_save_mirror(rt);
    RT_LOG("info",
           "msg=\"no longer a controller voter: group 0 closed, mirroring the cluster "
           "state\" revision=%llu",
           (unsigned long long)rt->ctl->revision);
}

void rt_ctl_members_step(struct runtime *rt)
{
    struct rt_group *g = &rt->groups[0];
    if (rt->ctl == NULL || !rt->ctl_voter || !g->hosted || g->raft == NULL)
        return;
    if (rt_ctl_leading(rt))
        leader_step(rt, rt_now_ms());
    else
        self_step(rt);
}
