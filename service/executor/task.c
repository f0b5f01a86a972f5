/* task.c - the controller-task executor of this node (loop thread, every poll): it reads the
 * published cluster state, acts on the live raft groups it hosts (learners, conf changes,
 * leadership transfers, opening and closing replicas) and reports each phase's live proof to
 * the controller, which fences and checks it (service/controller). */
#include <stdlib.h>
#include <string.h>

#include "service/controller/controller.h"
#include "service/fault/fault.h"
#include "raft/raft.h"
#include "service/executor/executor_internal.h"

/* The same action (conf change, transfer, report) is repeated at most this often. */
#define TASK_PACE_MS 1500
/* A leader transfer hands over to any caught-up voter when the target did not take over. */
#define TASK_TRANSFER_FALLBACK_MS 6000

static struct exec_task_pace *pace_of(struct executor *ex, const struct ctl_task *t)
{
    struct exec_task_pace *free_slot = NULL, *oldest = &ex->task_pace[0];
    for (size_t i = 0; i < EXEC_TASK_PACE_MAX; i++) {
        struct exec_task_pace *p = &ex->task_pace[i];
        if (p->task == t->id && p->attempt == t->attempt && p->phase == t->phase_index)
            return p;
        if (p->task == 0 && free_slot == NULL)
            free_slot = p;
        if (p->since_ms < oldest->since_ms)
            oldest = p;
    }
    struct exec_task_pace *p = free_slot ? free_slot : oldest;
    memset(p, 0, sizeof(*p));
    p->task = t->id;
    p->attempt = t->attempt;
    p->phase = t->phase_index;
    p->since_ms = engine_now_ms();
    return p;
}

/* True (and the pace moved on) when an action for this task phase may be taken now. */
static bool due(struct executor *ex, const struct ctl_task *t)
{
    struct exec_task_pace *p = pace_of(ex, t);
    int64_t now = engine_now_ms();
    if (now < p->next_ms)
        return false;
    p->next_ms = now + TASK_PACE_MS;
    return true;
}

static bool stuck(struct executor *ex, const struct ctl_task *t)
{
    /* a phase without progress for this long fails the task (membership stays as it is) */
    return engine_now_ms() - pace_of(ex, t)->since_ms > (int64_t)ex->opts->task_phase_timeout_ms;
}

static bool has(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

static void proof_of(const struct raft_status *st, uint64_t target, struct ctl_task_proof *p)
{
    memset(p, 0, sizeof(*p));
    p->config_index = st->commit;
    p->n_voters = st->conf.n_voters < CTL_REPLICAS_MAX ? st->conf.n_voters : CTL_REPLICAS_MAX;
    p->n_learners = st->conf.n_learners < CTL_REPLICAS_MAX ? st->conf.n_learners : CTL_REPLICAS_MAX;
    memcpy(p->voters, st->conf.voters, p->n_voters * sizeof(uint64_t));
    memcpy(p->learners, st->conf.learners, p->n_learners * sizeof(uint64_t));
    p->leader = st->leader;
    p->commit = st->commit;
    for (size_t i = 0; i < st->n_progress; i++)
        if (st->progress[i].id == target)
            p->target_match = st->progress[i].match;
}

/* node_drain: the executor's zeros are placeholders: the controller leader rebuilds the command
 * with the counts it observed itself (ctl_vet, ctl_cmd_drain_advance) before it is proposed. */
static void advance(struct executor *ex, const struct ctl_task *t, const struct ctl_task_proof *p,
                    uint64_t expected_revision)
{
    /* phase proven, nothing reported yet: the crash point counts each phase once, however often
     * the controller leader refuses a step its own observations do not confirm yet */
    struct exec_task_pace *pace = pace_of(ex, t);
    if (!pace->advanced) {
        pace->advanced = true;
        SLOTD_CRASH_POINT("task_before_advance");
    }
    char *cmd = NULL;
    ctl_cmd_task_advance(t->id, t->group, t->config_epoch, t->attempt, t->phase_index, p, 0, 0,
                         engine_wall_ms(), expected_revision, &cmd);
    EXEC_LOG("info", "msg=\"task phase proven\" task=%llu kind=%s phase=%s",
             (unsigned long long)t->id, ctl_task_kind_name(t->kind),
             ctl_task_phase_name(t->kind, t->phase_index));
    engine_ctl_submit(ex->rt, cmd, "task_advance");
}

static void report_progress(struct executor *ex, const struct ctl_task *t,
                            const struct ctl_task_proof *p)
{
    struct ctl_task_progress pr = {0};
    pr.target_match = p->target_match;
    pr.commit = p->commit;
    char *cmd = NULL;
    ctl_cmd_task_progress(t->id, t->attempt, t->phase_index, &pr, engine_wall_ms(), 0, &cmd);
    engine_ctl_submit(ex->rt, cmd, "task_progress");
}

static void fail(struct executor *ex, const struct ctl_task *t, const char *why)
{
    char *cmd = NULL;
    ctl_cmd_task_fail(t->id, t->attempt, t->phase_index, why, engine_wall_ms(), 0, &cmd);
    EXEC_LOG("warn", "msg=\"task failed\" task=%llu kind=%s phase=%s err=\"%s\"",
             (unsigned long long)t->id, ctl_task_kind_name(t->kind),
             ctl_task_phase_name(t->kind, t->phase_index), why);
    engine_ctl_submit(ex->rt, cmd, "task_fail");
}

static void conf_change(struct rt_group *g, uint8_t type, uint64_t node)
{
    struct raft_conf_change cc = {.type = type, .node = node};
    raft_index index;
    int rc = raft_propose_conf_change(engine_group_raft(g), &cc, &index);
    if (rc != 0)
        EXEC_LOG("debug", "msg=\"conf change refused\" group=%u type=%u node=%llu err=\"%s\"",
                 engine_group_id(g), type, (unsigned long long)node, raft_strerror(rc));
    else
        EXEC_LOG("info", "msg=\"conf change proposed\" group=%u type=%u node=%llu index=%llu",
                 engine_group_id(g), type, (unsigned long long)node, (unsigned long long)index);
    SLOTD_CRASH_POINT("task_after_conf_change"); /* proposed (or refused), not committed */
}

/* A caught-up voter other than `not` (0 if none). */
static uint64_t caught_up_voter(const struct raft_status *st, uint64_t not, uint64_t prefer)
{
    uint64_t any = 0;
    for (size_t i = 0; i < st->n_progress; i++) {
        const struct raft_progress_status *p = &st->progress[i];
        if (p->learner || p->id == not || p->id == st->id || !p->recent_active ||
            p->match < st->commit)
            continue;
        if (p->id == prefer)
            return p->id;
        if (any == 0)
            any = p->id;
    }
    return any;
}

/* The leader's own progress shows the target holding everything committed. */
static bool caught_up(const struct ctl_task_proof *p)
{
    return p->target_match >= p->commit && p->commit > 0;
}

/* Steps shared by a replica move (slot group) and a controller voter promotion (group 0):
 * learner, catch-up, promote. Returns true when the task's phase is past them. */
static bool add_and_promote(struct executor *ex, struct rt_group *g, const struct ctl_task *t,
                            uint64_t node, const struct raft_status *st,
                            const struct ctl_task_proof *p, uint64_t promote_revision)
{
    bool learner = has(st->conf.learners, st->conf.n_learners, node);
    bool voter = has(st->conf.voters, st->conf.n_voters, node);
    switch (t->phase_index) {
    case 0: /* add_learner */
        if (learner)
            advance(ex, t, p, 0);
        else if (!voter && due(ex, t))
            conf_change(g, RAFT_CC_ADD_LEARNER, node);
        return false;
    case 1: /* catch_up */
        if (learner && caught_up(p))
            advance(ex, t, p, 0);
        else if (due(ex, t))
            report_progress(ex, t, p);
        return false;
    case 2: /* promote */
        /* The leader promotes on its own progress only, never on the proof the task carries: a
         * task pushed to this phase by a forged or stale command would otherwise make a learner
         * that has nothing (or a dead node) a voter, and the group could lose its quorum. */
        if (voter && !learner)
            advance(ex, t, p, promote_revision);
        else if (learner && caught_up(p) && due(ex, t))
            conf_change(g, RAFT_CC_PROMOTE, node);
        else if (learner && due(ex, t))
            report_progress(ex, t, p);
        return false;
    default:
        return true;
    }
}

/* Whether this node hosts g (NULL: no) and leads it; then *st is its raft status and *p the
 * proof for target. */
static bool leading(struct rt_group *g, uint64_t target, struct raft_status *st,
                    struct ctl_task_proof *p)
{
    if (g == NULL || !engine_group_hosted(g) || engine_group_raft(g) == NULL)
        return false;
    raft_status(engine_group_raft(g), st);
    if (st->role != RAFT_LEADER)
        return false;
    proof_of(st, target, p);
    return true;
}

static void step_replica_move(struct executor *ex, const struct ctl_task *t)
{
    struct rt_group *g = engine_group(ex->rt, t->group);
    if (g == NULL)
        return;
    char err[256];
    if (t->target == ex->opts->node_id && !engine_group_hosted(g)) {
        if (engine_group_open_joining(ex->rt, g, err, sizeof(err)) != 0)
            EXEC_LOG("error", "msg=\"cannot open the moved replica\" group=%u err=\"%s\"", t->group,
                     err);
        else
            EXEC_LOG("info", "msg=\"replica opened for a move\" group=%u task=%llu", t->group,
                     (unsigned long long)t->id);
        return;
    }
    struct raft_status st;
    struct ctl_task_proof p;
    if (!leading(g, t->target, &st, &p))
        return;
    if (stuck(ex, t)) {
        fail(ex, t, "no progress within the phase timeout");
        return;
    }
    if (!add_and_promote(ex, g, t, t->target, &st, &p, 0))
        return;
    /* remove_source: leadership leaves the source first. */
    if (has(st.conf.voters, st.conf.n_voters, t->source) ||
        has(st.conf.learners, st.conf.n_learners, t->source)) {
        if (!due(ex, t))
            return;
        if (t->source == ex->opts->node_id) {
            uint64_t to = caught_up_voter(&st, t->source, t->target);
            if (to != 0)
                engine_transfer_leader(g, to);
        } else {
            conf_change(g, RAFT_CC_REMOVE, t->source);
        }
        return;
    }
    if (st.conf.n_learners == 0)
        advance(ex, t, &p, 0);
}

static void step_leader_transfer(struct executor *ex, const struct ctl_task *t)
{
    struct rt_group *g = engine_group(ex->rt, t->group);
    struct raft_status st;
    struct ctl_task_proof p;
    if (!leading(g, t->target, &st, &p))
        return;
    if (ex->opts->node_id != t->source) {
        advance(ex, t, &p, 0); /* a voter other than the source leads */
        return;
    }
    if (!due(ex, t))
        return;
    bool late = engine_now_ms() - pace_of(ex, t)->since_ms > TASK_TRANSFER_FALLBACK_MS;
    uint64_t to = caught_up_voter(&st, t->source, t->target);
    if (to == t->target || (late && to != 0))
        engine_transfer_leader(g, to);
    else if (stuck(ex, t))
        fail(ex, t, "no caught-up voter to hand leadership to");
}

static void step_promotion(struct executor *ex, const struct ctl_task *t)
{
    struct rt_group *g = engine_group(ex->rt, 0);
    char err[256];
    if (t->target == ex->opts->node_id && !engine_group_hosted(g)) {
        /* From now on this node follows the controller log instead of mirroring it. */
        if (engine_ctl_open_joining(ex->rt, err, sizeof(err)) != 0) {
            EXEC_LOG("error", "msg=\"cannot open the controller group\" err=\"%s\"", err);
            return;
        }
        EXEC_LOG("info", "msg=\"controller group opened for a promotion\" task=%llu",
                 (unsigned long long)t->id);
        return;
    }
    if (!engine_ctl_leading(ex->rt))
        return;
    struct raft_status st;
    raft_status(engine_group_raft(g), &st);
    struct ctl_task_proof p;
    proof_of(&st, t->target, &p);
    if (stuck(ex, t)) {
        fail(ex, t, "no progress within the phase timeout");
        return;
    }
    add_and_promote(ex, g, t, t->target, &st, &p, engine_ctl_state(ex->rt)->revision);
}

/* The best node to take a drained replica of cg: active, alive, data, not a peer, the fewest
 * replicas per weight, then the lowest id. */
static uint64_t drain_target(const struct ctl_state *s, const struct ctl_group *cg)
{
    uint64_t best = 0, best_n = 0, best_w = 1;
    for (uint32_t i = 0; i < s->n_nodes; i++) {
        const struct ctl_node *n = &s->nodes[i];
        if (n->join_state != CTL_JOIN_ACTIVE || n->status != CTL_STATUS_ALIVE ||
            !(n->roles & CTL_ROLE_DATA) || has(cg->desired_peers, cg->n_peers, n->id))
            continue;
        uint64_t count = 0;
        for (uint32_t k = 0; k < s->n_groups; k++)
            count += has(s->groups[k].desired_peers, s->groups[k].n_peers, n->id);
        /* count / weight < best_n / best_w, exactly */
        if (best == 0 || count * best_w < best_n * n->weight) {
            best = n->id;
            best_n = count;
            best_w = n->weight;
        }
    }
    return best;
}

static void step_drain(struct executor *ex, const struct ctl_task *t)
{
    if (!engine_ctl_leading(ex->rt))
        return;
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    for (uint32_t i = 0; i < s->n_tasks; i++)
        if (s->tasks[i].kind == CTL_TASK_REPLICA_MOVE &&
            (s->tasks[i].status == CTL_TASK_RUNNING || s->tasks[i].status == CTL_TASK_PENDING))
            return; /* one move at a time */
    for (uint32_t i = 0; i < s->n_groups; i++) {
        const struct ctl_group *cg = &s->groups[i];
        if (!has(cg->desired_peers, cg->n_peers, t->source))
            continue;
        if (!due(ex, t))
            return;
        uint64_t to = drain_target(s, cg);
        if (to == 0) {
            if (stuck(ex, t))
                fail(ex, t, "no active, alive data node can take a replica");
            return;
        }
        struct ctl_task_spec spec = {
            .kind = CTL_TASK_REPLICA_MOVE, .group = cg->id, .source = t->source, .target = to};
        char *cmd = NULL;
        ctl_cmd_task_create(&spec, engine_wall_ms(), 0, &cmd);
        EXEC_LOG("info", "msg=\"drain: moving a replica\" node=%llu group=%u to=%llu",
                 (unsigned long long)t->source, cg->id, (unsigned long long)to);
        engine_ctl_submit(ex->rt, cmd, "task_create");
        return;
    }
    /* No replica left: and no leadership (the moves handed it over). */
    for (size_t i = 1; i < engine_group_slots(ex->rt); i++) {
        if (engine_group_leader(ex->rt, (uint32_t)i) == t->source)
            return;
    }
    if (!due(ex, t))
        return;
    struct ctl_task_proof p;
    memset(&p, 0, sizeof(p));
    advance(ex, t, &p, 0);
}

/* A replica this node holds that the cluster state no longer places here, once no active task
 * involves it: the move that took it away finished, so its removal is committed. */
static void close_removed(struct executor *ex)
{
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    if (s == NULL || s->n_groups == 0)
        return;
    for (uint32_t i = 0; i < s->n_groups; i++) {
        const struct ctl_group *cg = &s->groups[i];
        struct rt_group *g = engine_group(ex->rt, cg->id);
        if (g == NULL || !engine_group_hosted(g) ||
            has(cg->desired_peers, cg->n_peers, ex->opts->node_id))
            continue;
        /* Any apply job or staged install reads every hosted group's fsm_state, which closing
         * zeroes (engine_group_close_removed): wait for a turn without either. */
        bool busy = engine_group_in_use(ex->rt, g);
        for (uint32_t k = 0; k < s->n_tasks && !busy; k++) {
            const struct ctl_task *t = &s->tasks[k];
            busy = t->group == cg->id && executor__task_holds_replica(t);
        }
        if (!busy && engine_group_raft(g) != NULL) {
            /* The state here may trail the controller (a mirror polls it): a move may already
             * have added this node back. A leader sends to every replica it tracks at least
             * every heartbeat; only one no leader has reached for two election timeouts is
             * surely out of every configuration, so only that one is deleted. */
            struct raft_status st;
            raft_status(engine_group_raft(g), &st);
            busy = st.role == RAFT_LEADER ||
                   st.leader_silent_ticks < 2 * (unsigned)ex->opts->election_tick;
        }
        if (!busy) {
            engine_group_close_removed(ex->rt, g);
            ex->leftover[cg->id] = (struct exec_leftover){0}; /* as the close zeroed it */
        }
    }
}

/* The step of a running task, by kind (NULL: a kind this node does not step). */
static void (*const task_steps[])(struct executor *, const struct ctl_task *) = {
    [CTL_TASK_REPLICA_MOVE] = step_replica_move,
    [CTL_TASK_LEADER_TRANSFER] = step_leader_transfer,
    [CTL_TASK_HASH_SLOT_MIGRATION] = executor__migration_step,
    [CTL_TASK_CONTROLLER_VOTER_PROMOTION] = step_promotion,
    [CTL_TASK_NODE_DRAIN] = step_drain,
};

void executor__task_step(struct executor *ex)
{
    const struct ctl_state *s = engine_ctl_state(ex->rt);
    if (s == NULL)
        return;
    for (uint32_t i = 0; i < s->n_tasks; i++) {
        const struct ctl_task *t = &s->tasks[i];
        if (t->kind == CTL_TASK_HASH_SLOT_MIGRATION && t->status == CTL_TASK_FAILED)
            executor__migration_step(ex, t); /* lifts the fence of a migration that failed early */
        if (t->status != CTL_TASK_RUNNING)
            continue;
        if ((size_t)t->kind < sizeof(task_steps) / sizeof(task_steps[0]) &&
            task_steps[t->kind] != NULL)
            task_steps[t->kind](ex, t);
    }
    executor__task_cleanup(ex);
    close_removed(ex);
}

void executor__task_advance(struct executor *ex, const struct ctl_task *t,
                            const struct ctl_task_proof *p)
{
    advance(ex, t, p, 0);
}

void executor__task_fail(struct executor *ex, const struct ctl_task *t, const char *why)
{
    fail(ex, t, why);
}

bool executor__task_stuck(struct executor *ex, const struct ctl_task *t)
{
    return stuck(ex, t);
}

int64_t executor__task_since_ms(struct executor *ex, const struct ctl_task *t)
{
    return pace_of(ex, t)->since_ms;
}
