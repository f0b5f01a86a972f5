/* repair.c - on the controller leader (loop thread, every poll, at most once a second): replaces
 * the replicas of nodes down longer than --down-replace-after-ms with ordinary fenced replica
 * moves (ctl_repair_plan) and reports groups that lost a quorum of live peers (log, metric). */
#include <stdlib.h>

#include "service/controller/controller.h"
#include "service/runtime/internal.h"

#define REPAIR_EVERY_MS 1000

static void report_lost(struct runtime *rt, const struct ctl_repair_plan *p)
{
    metrics_gauge_set(rt->metrics.groups_without_quorum, (int64_t)p->n_lost);
    if (p->n_lost == rt->repair_lost)
        return;
    rt->repair_lost = p->n_lost;
    for (uint32_t i = 0; i < p->n_lost; i++)
        RT_LOG("error",
               "msg=\"group without a quorum of live peers: not repaired (membership is never "
               "forced); bring its down peers back\" group=%u",
               p->lost[i]);
}

void rt_repair_step(struct runtime *rt)
{
    int64_t now = rt_now_ms();
    if (!rt_ctl_leading(rt) || rt->ctl == NULL || now < rt->repair_next_ms)
        return;
    rt->repair_next_ms = now + REPAIR_EVERY_MS;
    struct ctl_repair_plan *p = malloc(sizeof(*p));
    if (p == NULL)
        return; /* the next poll tries again */
    ctl_repair_plan(rt->ctl, rt_wall_ms(), rt->opts.down_replace_after_ms,
                    rt->opts.repair_max_moves, p);
    report_lost(rt, p);
    for (uint32_t i = 0; i < p->n_moves; i++) {
        const struct ctl_repair_move *m = &p->moves[i];
        struct ctl_task_spec spec = {.kind = CTL_TASK_REPLICA_MOVE,
                                     .group = m->group,
                                     .source = m->source,
                                     .target = m->target};
        char *cmd = NULL;
        if (ctl_cmd_task_create(&spec, rt_wall_ms(), 0, &cmd) != CTL_OK)
            continue;
        RT_LOG("info",
               "msg=\"repair: replacing a replica of a down node\" node=%llu group=%u to=%llu",
               (unsigned long long)m->source, m->group, (unsigned long long)m->target);
        metrics_counter_add(rt->metrics.repair_moves, 1);
        rt_ctl_submit(rt, cmd, "task_create");
    }
    free(p);
}
