/* balance.c - on the controller leader (loop thread, every poll, at most once a second): moves
 * replicas toward each active node's weighted share with ordinary fenced replica moves
 * (ctl_balance_plan), unless --balance 0 or the cluster state's features.balance_paused, and
 * counts the moves it proposed and how they ended (slotd_balance_moves_total). */
#include <stdlib.h>

#include "service/controller/controller.h"
#include "service/executor/executor_internal.h"
#include "service/metrics/metrics.h"

#define BALANCE_EVERY_MS 1000
/* A proposed move not seen as a task this long after it was sent is forgotten (the proposal was
 * lost or refused): it is neither done nor failed. */
#define BALANCE_FORGET_MS 600000

enum { BALANCE_PLANNED, BALANCE_DONE, BALANCE_FAILED };

/* A proposed move not yet in the state this long after it was sent keeps the next plan back (it
 * may still apply: planning again could exceed the budget). */
#define BALANCE_SETTLE_MS 5000
/* After a preferred-leader change is sent, the next one waits this long (the change applies and
 * the counts the next plan reads include it). */
#define BALANCE_LEADER_EVERY_MS 3000

/* Counts the proposed moves whose task ended since the last step and forgets them. Returns how
 * many were sent less than BALANCE_SETTLE_MS ago and are not in the state yet. */
static uint32_t balance_track(struct executor *ex, const struct ctl_state *s, uint64_t now_ms)
{
    uint32_t unsettled = 0;
    uint32_t kept = 0;
    for (uint32_t i = 0; i < ex->balance_n_sent; i++) {
        const struct exec_balance_sent *b = &ex->balance_sent[i];
        int ended = -1;
        bool seen = false;
        for (uint32_t k = 0; k < s->n_tasks; k++) {
            const struct ctl_task *t = &s->tasks[k];
            if (t->kind != CTL_TASK_REPLICA_MOVE || t->group != b->group ||
                t->source != b->source || t->target != b->target || t->created_ms < b->created_ms)
                continue;
            seen = true;
            if (t->status == CTL_TASK_DONE)
                ended = BALANCE_DONE;
            else if (t->status == CTL_TASK_FAILED)
                ended = BALANCE_FAILED;
        }
        if (ended >= 0) {
            metrics_counter_add(ex->series.balance_moves[ended], 1);
            EXEC_LOG("info", "msg=\"balance: move %s\" group=%u from=%llu to=%llu",
                     ended == BALANCE_DONE ? "done" : "failed", b->group,
                     (unsigned long long)b->source, (unsigned long long)b->target);
            continue;
        }
        if (!seen && now_ms > b->created_ms + BALANCE_FORGET_MS)
            continue;
        unsettled += !seen && now_ms < b->created_ms + BALANCE_SETTLE_MS;
        ex->balance_sent[kept++] = *b;
    }
    ex->balance_n_sent = kept;
    return unsettled;
}

void executor__balance_step(struct executor *ex)
{
    int64_t now = engine_now_ms();
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    if (!engine_ctl_leading(ex->rt) || s == NULL || now < ex->balance_next_ms)
        return;
    ex->balance_next_ms = now + BALANCE_EVERY_MS;
    uint64_t wall = engine_wall_ms();
    uint32_t unsettled = balance_track(ex, s, wall);
    if (!ex->opts->balance || s->features.balance_paused || unsettled > 0)
        return;
    struct ctl_balance_plan *p = malloc(sizeof(*p));
    if (p == NULL)
        return;                                                /* the next poll tries again */
    ctl_balance_plan(s, NULL, ex->opts->balance_max_moves, p); /* zones: the node records' */
    for (uint32_t i = 0; i < p->n_moves && ex->balance_n_sent < EXEC_BALANCE_SENT_MAX; i++) {
        const struct ctl_balance_move *m = &p->moves[i];
        struct ctl_task_spec spec = {.kind = CTL_TASK_REPLICA_MOVE,
                                     .group = m->group,
                                     .source = m->source,
                                     .target = m->target};
        char *cmd = NULL;
        if (ctl_cmd_task_create(&spec, wall, 0, &cmd) != CTL_OK)
            continue;
        EXEC_LOG("info", "msg=\"balance: moving a replica\" group=%u from=%llu to=%llu why=\"%s\"",
                 m->group, (unsigned long long)m->source, (unsigned long long)m->target, m->why);
        metrics_counter_add(ex->series.balance_moves[BALANCE_PLANNED], 1);
        ex->balance_sent[ex->balance_n_sent++] =
            (struct exec_balance_sent){m->group, m->source, m->target, wall};
        engine_ctl_submit(ex->rt, cmd, "task_create");
    }
    /* Leaders once the replicas are placed: no move planned nor running. */
    bool moving = p->n_moves > 0;
    for (uint32_t i = 0; i < s->n_tasks && !moving; i++)
        moving = s->tasks[i].kind == CTL_TASK_REPLICA_MOVE &&
                 (s->tasks[i].status == CTL_TASK_PENDING || s->tasks[i].status == CTL_TASK_RUNNING);
    free(p);
    struct ctl_balance_leader ch[1];
    if (moving || now < ex->balance_leader_next_ms || ctl_balance_leaders(s, 1, ch) == 0)
        return;
    char *cmd = NULL;
    if (ctl_cmd_set_preferred_leader(ch[0].group, ch[0].to, 0, &cmd) != CTL_OK)
        return;
    ex->balance_leader_next_ms = now + BALANCE_LEADER_EVERY_MS;
    EXEC_LOG("info", "msg=\"balance: spreading leaders\" group=%u from=%llu to=%llu", ch[0].group,
             (unsigned long long)ch[0].from, (unsigned long long)ch[0].to);
    engine_ctl_submit(ex->rt, cmd, "set_preferred_leader");
}
