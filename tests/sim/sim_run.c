/* sim_run.c - one simulated run: cluster set-up, the step loop, quiet phases, final heal. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

SLOTD_ERRLIST_STRERROR(sim_strerror, SIM_ERRORS, "unknown error")

#define SIM_QUIET_EVERY_MIN_MS 1500
#define SIM_QUIET_EVERY_MAX_MS 3000

void sim__fail(struct sim_cluster *c, const char *fmt, ...)
{
    if (c->failed)
        return;
    c->failed = true;
    va_list ap;
    va_start(ap, fmt);
    int n = snprintf(c->violation, c->violation_len, "t=%llu ms: ", (unsigned long long)c->now);
    if (n >= 0 && (size_t)n < c->violation_len)
        vsnprintf(c->violation + n, c->violation_len - (size_t)n, fmt, ap);
    va_end(ap);
    if (c->opt.verbose)
        printf("t=%llu VIOLATION %s\n", (unsigned long long)c->now, c->violation);
}

void sim__trace(struct sim_cluster *c, const char *fmt, ...)
{
    if (!c->opt.verbose)
        return;
    va_list ap;
    va_start(ap, fmt);
    printf("t=%llu ", (unsigned long long)c->now);
    vprintf(fmt, ap);
    putchar('\n');
    va_end(ap);
}

/* Group 0 spans every node; the others start on 3 nodes each (rotating), so with 5 nodes there
 * are outsiders to add as learners. With 3 nodes a group may shrink to 2 voters and re-grow. */
static void sim__group_init_conf(struct sim_cluster *c, unsigned g, struct raft_conf_state *cs)
{
    unsigned n = c->opt.n_nodes;
    unsigned size = (g == 0 || n <= 3) ? n : 3;
    memset(cs, 0, sizeof(*cs));
    for (unsigned k = 0; k < size; k++)
        cs->voters[cs->n_voters++] = (raft_id)((g + k) % n) + 1;
    c->groups[g].min_voters = n <= 3 ? 2 : 3;
}

static int sim__setup(struct sim_cluster *c)
{
    sim_rand_seed(&c->rand, c->opt.seed);
    static const size_t msg_bytes[] = {0, 1, 300};
    c->max_msg_bytes = msg_bytes[sim_rand_below(&c->rand, 3)];
    /* one entry per APPEND (the Figure 8 enabler) only with a small window, else reordering
     * makes the leader re-send its whole 256-message window again and again */
    c->max_inflight =
        c->max_msg_bytes == 1 || sim_rand_below(&c->rand, 2) ? sim_rand_range(&c->rand, 1, 8) : 0;
    c->sync_max_ms = (unsigned)sim_rand_range(&c->rand, 0, 3);
    c->lat_max_ms = 5;
    c->next_quiet_at = sim_rand_range(&c->rand, SIM_QUIET_EVERY_MIN_MS, SIM_QUIET_EVERY_MAX_MS);
    for (unsigned n = 0; n < c->opt.n_nodes; n++) {
        c->nodes[n].id = n + 1;
        c->nodes[n].up = true;
        c->nodes[n].tick_phase = (unsigned)sim_rand_below(&c->rand, SIM_TICK_MS);
    }
    for (unsigned g = 0; g < c->opt.n_groups; g++) {
        c->groups[g].id = g;
        if (sim__group_checks_init(&c->groups[g]) != SIM_OK)
            return SIM_ENOMEM;
        sim__group_init_conf(c, g, &c->groups[g].init_conf);
        struct sim_sm sm;
        sim__sm_bootstrap(g, &sm);
        c->groups[g].applied[1] = (struct sim_applied){.term = 1, .prefix = sm.hash};
        c->groups[g].applied_max = 1;
    }
    for (unsigned g = 0; g < c->opt.n_groups && !c->failed; g++) {
        const struct raft_conf_state *cs = &c->groups[g].init_conf;
        for (uint32_t v = 0; v < cs->n_voters; v++)
            if (sim__replica_create(c, (unsigned)cs->voters[v] - 1, g, true) != SIM_OK)
                return SIM_ENOMEM;
    }
    return SIM_OK;
}

static void sim__teardown(struct sim_cluster *c)
{
    sim__replica_free_all(c);
    sim__heap_clear(c);
    for (unsigned g = 0; g < SIM_GROUPS_MAX; g++)
        sim__group_checks_free(&c->groups[g]);
}

static void sim__events_step(struct sim_cluster *c)
{
    struct sim_event ev;
    unsigned handled = 0;
    while (!c->failed && sim__heap_pop_due(c, &ev)) {
        if (ev.kind == SIM_EV_MSG)
            sim__net_deliver(c, &ev);
        else
            sim__replica_sync(c, &ev);
        sim__run_deferred(c);
        if (++handled > SIM_STEP_EVENTS_MAX)
            sim__fail(c, "more than %u events in one millisecond", SIM_STEP_EVENTS_MAX);
    }
}

static void sim__ticks_step(struct sim_cluster *c)
{
    for (unsigned n = 0; n < c->opt.n_nodes && !c->failed; n++) {
        struct sim_node *nd = &c->nodes[n];
        if (!nd->up || c->now % SIM_TICK_MS != nd->tick_phase)
            continue;
        for (unsigned g = 0; g < c->opt.n_groups && !c->failed; g++) {
            if (nd->reps[g].core == NULL)
                continue;
            raft_tick(nd->reps[g].core);
            sim__replica_pump(c, n, g);
            sim__run_deferred(c);
        }
    }
}

/* Heals every fault and restarts every crashed node: the start of a quiet phase. */
static void sim__quiet_begin(struct sim_cluster *c)
{
    sim__net_heal(c);
    c->isolate_at = 0;
    for (unsigned n = 0; n < c->opt.n_nodes && !c->failed; n++)
        if (!c->nodes[n].up)
            sim__node_restart(c, n);
    c->quiet = true;
    c->quiet_started = c->now;
    sim__liveness_reset(c);
    sim__trace(c, "quiet phase: all faults healed");
}

/* With --verbose, prints every replica's status of a group (liveness failures). */
static void sim__trace_group(struct sim_cluster *c, unsigned g)
{
    for (unsigned n = 0; n < c->opt.n_nodes && c->opt.verbose; n++) {
        struct sim_replica *rep = sim__rep(c, n, g);
        if (rep->core == NULL) {
            printf("  n%u g%u: %s\n", n + 1, g, rep->exists ? "down" : "no replica");
            continue;
        }
        struct raft_status st;
        raft_status(rep->core, &st);
        printf("  n%u g%u: %s term=%llu lead=%llu commit=%llu applied=%llu first=%llu last=%llu "
               "voters=%u learners=%u transfer=%llu\n",
               n + 1, g, raft_role_name(st.role), (unsigned long long)st.term,
               (unsigned long long)st.leader, (unsigned long long)st.commit,
               (unsigned long long)st.applied, (unsigned long long)st.first_index,
               (unsigned long long)st.last_index, st.conf.n_voters, st.conf.n_learners,
               (unsigned long long)st.transfer_target);
        for (size_t i = 0; i < st.n_progress; i++) {
            const struct raft_progress_status *p = &st.progress[i];
            printf("    progress n%llu%s state=%u active=%d match=%llu next=%llu inflight=%zu\n",
                   (unsigned long long)p->id, p->learner ? " (learner)" : "", p->state,
                   p->recent_active, (unsigned long long)p->match, (unsigned long long)p->next,
                   p->inflight);
        }
    }
}

/* Returns true when the quiet phase ended (liveness shown); fails after the bound. */
static bool sim__quiet_step(struct sim_cluster *c)
{
    if (sim__liveness_step(c)) {
        c->quiet = false;
        c->cnt.quiet_phases++;
        c->next_quiet_at =
            c->now + sim_rand_range(&c->rand, SIM_QUIET_EVERY_MIN_MS, SIM_QUIET_EVERY_MAX_MS);
        sim__trace(c, "quiet phase: every group elected a leader and committed (%llu ms)",
                   (unsigned long long)(c->now - c->quiet_started));
        return true;
    }
    if (c->now - c->quiet_started > SIM_LIVENESS_MS) {
        for (unsigned g = 0; g < c->opt.n_groups; g++)
            if (!c->groups[g].live_ok) {
                sim__fail(c,
                          "liveness: group %u has no leader that committed a proposal %u ms "
                          "after all faults healed",
                          g, SIM_LIVENESS_MS);
                sim__trace_group(c, g);
                break;
            }
        return true;
    }
    return false;
}

static void sim__step(struct sim_cluster *c)
{
    c->now++;
    c->cnt.steps++;
    if (!c->quiet && c->now >= c->next_quiet_at)
        sim__quiet_begin(c);
    if (c->quiet)
        sim__quiet_step(c);
    sim__workload_step(c);
    sim__run_deferred(c);
    sim__events_step(c);
    sim__ticks_step(c);
    if (!c->failed)
        sim__check_all_cores(c);
}

int sim_run(const struct sim_options *opt, struct sim_counters *cnt, char *violation,
            size_t violation_len)
{
    if (opt->n_nodes < 3 || opt->n_nodes > SIM_NODES_MAX || opt->n_groups < 1 ||
        opt->n_groups > SIM_GROUPS_MAX || violation == NULL || violation_len == 0)
        return SIM_EINVAL;
    struct sim_cluster *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return SIM_ENOMEM;
    c->opt = *opt;
    c->violation = violation;
    c->violation_len = violation_len;
    violation[0] = '\0';
    int rc = sim__setup(c);
    for (uint64_t s = 0; rc == SIM_OK && s < opt->steps && !c->failed; s++)
        sim__step(c);
    if (rc == SIM_OK && !c->failed) {
        /* final heal: every group must elect a leader and commit within the bound */
        if (!c->quiet)
            sim__quiet_begin(c);
        while (!c->failed && c->quiet)
            sim__step(c);
    }
    if (rc == SIM_OK && c->failed)
        rc = SIM_EVIOLATION;
    struct sim_counters *k = &c->cnt;
    cnt->steps += k->steps;
    cnt->elections += k->elections;
    cnt->commits += k->commits;
    cnt->proposals += k->proposals;
    cnt->reads += k->reads;
    cnt->lease_reads += k->lease_reads;
    cnt->lease_refused += k->lease_refused;
    cnt->read_failures += k->read_failures;
    cnt->crashes += k->crashes;
    cnt->snapshots += k->snapshots;
    cnt->compactions += k->compactions;
    cnt->conf_changes += k->conf_changes;
    cnt->transfers += k->transfers;
    cnt->partitions += k->partitions;
    cnt->msgs += k->msgs;
    cnt->dropped += k->dropped;
    cnt->quiet_phases += k->quiet_phases;
    sim__teardown(c);
    free(c);
    return rc;
}
