/* engine.c - engine.h over the runtime's own state: what the executors (service/executor) use. */
#include "service/runtime/engine.h"

#include "service/controller/controller.h"
#include "service/route/route.h"
#include "service/runtime/ctl.h"
#include "service/runtime/engine_int.h"
#include "service/runtime/group.h"
#include "service/runtime/lease.h"
#include "service/runtime/peer.h"
#include "service/runtime/request.h"

_Static_assert(RT_GROUPS_CAP == ENGINE_GROUPS_CAP, "engine.h names the runtime's group bound");

void runtime_set_executor(struct runtime *rt, const struct runtime_executor_ops *ops, void *ctx)
{
    assert(!rt->started);
    rt->exec_ops = ops;
    rt->exec_ctx = ctx;
}

void rt_exec_poll(struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    if (rt->exec_ops != NULL && rt->exec_ops->poll != NULL)
        rt->exec_ops->poll(rt->exec_ctx);
}

void rt_exec_stop(struct runtime *rt)
{
    if (rt->exec_ops != NULL && rt->exec_ops->stop != NULL)
        rt->exec_ops->stop(rt->exec_ctx);
}

const struct runtime_options *engine_options(const struct runtime *rt)
{
    return &rt->opts;
}

struct store *engine_store(const struct runtime *rt)
{
    return rt->store;
}

struct transport *engine_transport(const struct runtime *rt)
{
    return rt->transport;
}

struct route_table *engine_routes(const struct runtime *rt)
{
    return rt->routes;
}

void engine_executor_series(const struct runtime *rt, struct engine_executor_series *out)
{
    out->repair_moves = rt->metrics.repair_moves;
    out->groups_without_quorum = rt->metrics.groups_without_quorum;
    for (size_t i = 0; i < 3; i++)
        out->balance_moves[i] = rt->metrics.balance_moves[i];
}

int64_t engine_now_ms(void)
{
    return rt_now_ms();
}

uint64_t engine_wall_ms(void)
{
    return rt_wall_ms();
}

const struct ctl_state *engine_ctl_state(const struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    return rt->ctl;
}

bool engine_ctl_leading(const struct runtime *rt)
{
    RT_ASSERT_LOOP(rt);
    return rt_ctl_leading(rt);
}

void engine_ctl_submit(struct runtime *rt, char *cmd, const char *what)
{
    RT_ASSERT_LOOP(rt);
    rt_ctl_submit(rt, cmd, what);
}

int engine_ctl_open_joining(struct runtime *rt, char *err, size_t errlen)
{
    RT_ASSERT_LOOP(rt);
    if (rt_group_open_joining(rt, &rt->groups[0], err, errlen) != 0)
        return -1;
    rt->ctl_voter = true;
    return 0;
}

struct rt_group *engine_group(struct runtime *rt, uint32_t id)
{
    RT_ASSERT_LOOP(rt);
    return id < RT_GROUPS_CAP ? &rt->groups[id] : NULL;
}

size_t engine_group_slots(const struct runtime *rt)
{
    return RT_GROUP_SLOTS(rt);
}

uint32_t engine_group_id(const struct rt_group *g)
{
    return g->id;
}

bool engine_group_hosted(const struct rt_group *g)
{
    return g->hosted;
}

struct raft *engine_group_raft(const struct rt_group *g)
{
    return g->raft;
}

bool engine_group_leading(const struct rt_group *g)
{
    return g->role == RAFT_LEADER;
}

uint64_t engine_group_leader(const struct runtime *rt, uint32_t id)
{
    RT_ASSERT_LOOP(rt);
    if (id >= RT_GROUPS_CAP)
        return 0;
    if (rt->groups[id].hosted)
        return rt->groups[id].leader;
    const struct route_group *rg = route_snapshot_group(rt->route_base, id);
    return rg != NULL ? rg->leader : 0;
}

bool engine_group_in_use(const struct runtime *rt, const struct rt_group *g)
{
    RT_ASSERT_LOOP(rt);
    bool busy = g->in_batch || g->apply_jobs > 0 || g->snap_recv.active || !rt_apply_idle(rt) ||
                rt->installs != NULL;
    for (const struct rt_snap_send *x = rt->snap_sends; x != NULL && !busy; x = x->next)
        busy = x->g == g;
    return busy;
}

int engine_group_open_joining(struct runtime *rt, struct rt_group *g, char *err, size_t errlen)
{
    RT_ASSERT_LOOP(rt);
    return rt_group_open_joining(rt, g, err, errlen);
}

void engine_group_close_removed(struct runtime *rt, struct rt_group *g)
{
    RT_ASSERT_LOOP(rt);
    rt_group_close_removed(rt, g);
}

int engine_transfer_leader(struct rt_group *g, uint64_t to)
{
    return rt_transfer_leader(g, to);
}
