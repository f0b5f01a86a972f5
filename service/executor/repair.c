/* repair.c - on the controller leader (loop thread, every poll, at most once a second): replaces
 * the replicas of nodes down longer than --down-replace-after-ms with ordinary fenced replica
 * moves (ctl_repair_plan) and reports groups that lost a quorum of live peers (log, metric). */
#include <stdlib.h>

#include "service/controller/controller.h"
#include "service/executor/executor_internal.h"
#include "service/metrics/metrics.h"

#define REPAIR_EVERY_MS 1000

static void report_lost(struct executor *ex, const struct ctl_repair_plan *p)
{
    metrics_gauge_set(ex->series.groups_without_quorum, (int64_t)p->n_lost);
    if (p->n_lost == ex->repair_lost)
        return;
    ex->repair_lost = p->n_lost;
    for (uint32_t i = 0; i < p->n_lost; i++)
        EXEC_LOG("error",
                 "msg=\"group without a quorum of live peers: not repaired (membership is never "
                 "forced); bring its down peers back\" group=%u",
                 p->lost[i]);
}

void executor__repair_step(struct executor *ex)
{
    int64_t now = engine_now_ms();
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    if (!engine_ctl_leading(ex->rt) || s == NULL || now < ex->repair_next_ms)
        return;
    ex->repair_next_ms = now + REPAIR_EVERY_MS;
    struct ctl_repair_plan *p = malloc(sizeof(*p));
    if (p == NULL)
        return; /* the next poll tries again */
    ctl_repair_plan(s, engine_wall_ms(), ex->opts->down_replace_after_ms,
                    ex->opts->repair_max_moves, p);
    report_lost(ex, p);
    for (uint32_t i = 0; i < p->n_moves; i++) {
        const struct ctl_repair_move *m = &p->moves[i];
        struct ctl_task_spec spec = {.kind = CTL_TASK_REPLICA_MOVE,
                                     .group = m->group,
                                     .source = m->source,
                                     .target = m->target};
        char *cmd = NULL;
        if (ctl_cmd_task_create(&spec, engine_wall_ms(), 0, &cmd) != CTL_OK)
            continue;
        EXEC_LOG("info",
                 "msg=\"repair: replacing a replica of a down node\" node=%llu group=%u to=%llu",
                 (unsigned long long)m->source, m->group, (unsigned long long)m->target);
        metrics_counter_add(ex->series.repair_moves, 1);
        engine_ctl_submit(ex->rt, cmd, "task_create");
    }
    free(p);
}
