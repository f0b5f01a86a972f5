/* sim_check.c - the simulator's safety checkers over global per-group maps (run after every step).
 */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

int sim__group_checks_init(struct sim_group *g)
{
    g->terms_cap = 256;
    g->leader_of_term = calloc(g->terms_cap, sizeof(*g->leader_of_term));
    if (g->leader_of_term == NULL)
        goto err;
    g->cmax = calloc(g->terms_cap, sizeof(*g->cmax));
    if (g->cmax == NULL)
        goto err_after_leaders;
    g->applied_cap = 4096;
    g->applied = calloc(g->applied_cap, sizeof(*g->applied));
    if (g->applied == NULL)
        goto err_after_cmax;
    g->log_cap = 8192;
    g->log = calloc(g->log_cap, sizeof(*g->log));
    if (g->log == NULL)
        goto err_after_applied;
    return SIM_OK;
err_after_applied:
    free(g->applied);
err_after_cmax:
    free(g->cmax);
err_after_leaders:
    free(g->leader_of_term);
err:
    memset(g, 0, sizeof(*g));
    return SIM_ENOMEM;
}

void sim__group_checks_free(struct sim_group *g)
{
    free(g->leader_of_term);
    free(g->cmax);
    free(g->applied);
    free(g->log);
    g->leader_of_term = NULL;
    g->cmax = NULL;
    g->applied = NULL;
    g->log = NULL;
}

static bool sim__grow_terms(struct sim_cluster *c, struct sim_group *g, raft_term term)
{
    if (term < g->terms_cap)
        return true;
    size_t cap = g->terms_cap;
    while (cap <= term && cap < SIM_TERMS_MAX)
        cap *= 2;
    raft_id *lot = term < cap ? realloc(g->leader_of_term, cap * sizeof(*lot)) : NULL;
    if (lot == NULL) {
        sim__fail(c, "group %u: term %llu beyond the checker bound", g->id,
                  (unsigned long long)term);
        return false;
    }
    g->leader_of_term = lot;
    struct sim_commit_mark *cm = realloc(g->cmax, cap * sizeof(*cm));
    if (cm == NULL) {
        sim__fail(c, "out of memory growing the term map");
        return false;
    }
    g->cmax = cm;
    memset(lot + g->terms_cap, 0, (cap - g->terms_cap) * sizeof(*lot));
    memset(cm + g->terms_cap, 0, (cap - g->terms_cap) * sizeof(*cm));
    g->terms_cap = cap;
    return true;
}

static bool sim__grow_applied(struct sim_cluster *c, struct sim_group *g, raft_index index)
{
    if (index < g->applied_cap)
        return true;
    size_t cap = g->applied_cap;
    while (cap <= index && cap < SIM_INDEX_MAX)
        cap *= 2;
    struct sim_applied *a = index < cap ? realloc(g->applied, cap * sizeof(*a)) : NULL;
    if (a == NULL) {
        sim__fail(c, "group %u: index %llu beyond the checker bound", g->id,
                  (unsigned long long)index);
        return false;
    }
    memset(a + g->applied_cap, 0, (cap - g->applied_cap) * sizeof(*a));
    g->applied = a;
    g->applied_cap = cap;
    return true;
}

static size_t sim__log_slot(const struct sim_group *g, raft_index index, raft_term term)
{
    return sim_mix64(index * 0x9e3779b97f4a7c15ull ^ term) & (g->log_cap - 1);
}

static bool sim__log_grow(struct sim_cluster *c, struct sim_group *g)
{
    size_t old_cap = g->log_cap;
    struct sim_log_slot *old = g->log;
    if (old_cap * 2 > 2 * (size_t)SIM_INDEX_MAX) {
        sim__fail(c, "group %u: log map beyond the checker bound", g->id);
        return false;
    }
    g->log = calloc(old_cap * 2, sizeof(*g->log));
    if (g->log == NULL) {
        g->log = old;
        sim__fail(c, "out of memory growing the log map");
        return false;
    }
    g->log_cap = old_cap * 2;
    for (size_t i = 0; i < old_cap; i++) {
        if (old[i].index == 0)
            continue;
        size_t s = sim__log_slot(g, old[i].index, old[i].term);
        while (g->log[s].index != 0)
            s = (s + 1) & (g->log_cap - 1);
        g->log[s] = old[i];
    }
    free(old);
    return true;
}

/* Log matching (thesis 3.5): one (index, term) always names the same entry and the same
 * predecessor term, so by induction two logs that share (index, term) share the whole prefix. */
static void sim__log_match(struct sim_cluster *c, unsigned node, unsigned group,
                           const struct raft_entry *e, raft_term prev_term)
{
    struct sim_group *g = &c->groups[group];
    if (2 * (g->log_n + 1) > g->log_cap && !sim__log_grow(c, g))
        return;
    uint64_t dh = sim__entry_hash(e);
    size_t s = sim__log_slot(g, e->index, e->term);
    while (g->log[s].index != 0) {
        struct sim_log_slot *l = &g->log[s];
        if (l->index == e->index && l->term == e->term) {
            if (l->dhash != dh || l->prev_term != prev_term)
                sim__fail(c,
                          "log matching: group %u node %u persisted entry index %llu term %llu "
                          "(prev term %llu) that differs from the same (index, term) elsewhere "
                          "(prev term %llu%s)",
                          group, node + 1, (unsigned long long)e->index,
                          (unsigned long long)e->term, (unsigned long long)prev_term,
                          (unsigned long long)l->prev_term,
                          l->dhash != dh ? ", different data" : "");
            return;
        }
        s = (s + 1) & (g->log_cap - 1);
    }
    g->log[s] = (struct sim_log_slot){
        .index = e->index, .term = e->term, .prev_term = prev_term, .dhash = dh};
    g->log_n++;
}

void sim__check_persist(struct sim_cluster *c, unsigned node, unsigned group,
                        const struct raft_ready *rd)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    if (rd->has_hard_state && rd->hard_state.commit < rep->durable_commit) {
        sim__fail(c, "commit moved backwards: group %u node %u persisted commit %llu after %llu",
                  group, node + 1, (unsigned long long)rd->hard_state.commit,
                  (unsigned long long)rep->durable_commit);
        return;
    }
    const struct raft_storage *st = raft_mem_storage_get(rep->disk);
    raft_index first = 0;
    st->first_index(st->ctx, &first);
    for (size_t i = 0; i < rd->n_entries && !c->failed; i++) {
        const struct raft_entry *e = &rd->entries[i];
        if (e->index < first)
            continue; /* covered by the snapshot, ignored by the disk */
        raft_term prev_term = 0;
        if (i > 0 && rd->entries[i - 1].index + 1 != e->index) {
            sim__fail(c, "group %u node %u: ready entries not contiguous at %llu", group, node + 1,
                      (unsigned long long)e->index);
            return;
        }
        if (i > 0 && rd->entries[i - 1].index >= first) {
            prev_term = rd->entries[i - 1].term;
        } else {
            int rc = st->term(st->ctx, e->index - 1, &prev_term);
            if (rc != RAFT_OK) {
                sim__fail(c,
                          "group %u node %u: persisting entry %llu but the disk has no entry "
                          "%llu (%s)",
                          group, node + 1, (unsigned long long)e->index,
                          (unsigned long long)e->index - 1, raft_strerror(rc));
                return;
            }
        }
        if (e->term < prev_term) {
            sim__fail(c, "group %u node %u: entry %llu has term %llu below its predecessor's %llu",
                      group, node + 1, (unsigned long long)e->index, (unsigned long long)e->term,
                      (unsigned long long)prev_term);
            return;
        }
        sim__log_match(c, node, group, e, prev_term);
    }
}

/* Leader completeness (thesis 3.6.3): a leader of term T holds every entry committed in an
 * earlier term. Checked on its first durable ready as leader. */
static void sim__check_leader_complete(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_group *g = &c->groups[group];
    struct sim_replica *rep = sim__rep(c, node, group);
    struct sim_commit_mark best = {0};
    raft_term best_term = 0;
    for (raft_term t = 1; t < rep->lc_term && t < g->terms_cap; t++)
        if (g->cmax[t].index > best.index) {
            best = g->cmax[t];
            best_term = t;
        }
    if (best.index == 0)
        return;
    const struct raft_storage *st = raft_mem_storage_get(rep->disk);
    raft_index first = 0;
    st->first_index(st->ctx, &first);
    if (best.index < first)
        return; /* covered by its snapshot, whose state was checked when it was made */
    raft_term t = 0;
    int rc = st->term(st->ctx, best.index, &t);
    if (rc != RAFT_OK || t != best.entry_term)
        sim__fail(c,
                  "leader completeness: group %u node %u became leader of term %llu but its log "
                  "%s entry %llu of term %llu, committed by term %llu",
                  group, node + 1, (unsigned long long)rep->lc_term,
                  rc != RAFT_OK ? "lacks" : "has another term at", (unsigned long long)best.index,
                  (unsigned long long)best.entry_term, (unsigned long long)best_term);
}

void sim__check_after_persist(struct sim_cluster *c, unsigned node, unsigned group,
                              const struct raft_ready *rd)
{
    struct sim_group *g = &c->groups[group];
    struct sim_replica *rep = sim__rep(c, node, group);
    const struct raft_storage *st = raft_mem_storage_get(rep->disk);
    if (rd->has_hard_state && rd->hard_state.commit > 0) {
        raft_term term = rd->hard_state.term;
        raft_term et = 0;
        if (!sim__grow_terms(c, g, term))
            return;
        if (rd->hard_state.commit > g->cmax[term].index &&
            st->term(st->ctx, rd->hard_state.commit, &et) == RAFT_OK)
            g->cmax[term] =
                (struct sim_commit_mark){.index = rd->hard_state.commit, .entry_term = et};
    }
    if (rep->lc_pending && rep->ready_seq > rep->lc_after_seq) {
        rep->lc_pending = false;
        sim__check_leader_complete(c, node, group);
    }
}

/* State machine safety (thesis 3.6.3): every node applies the same entry at each index. */
void sim__check_apply(struct sim_cluster *c, unsigned node, unsigned group,
                      const struct raft_entry *e)
{
    struct sim_group *g = &c->groups[group];
    struct sim_replica *rep = sim__rep(c, node, group);
    if (!sim__grow_applied(c, g, e->index))
        return;
    struct sim_applied *a = &g->applied[e->index];
    uint64_t dh = sim__entry_hash(e);
    uint64_t prefix = sim__sm_hash_step(rep->sm.hash, e->index, e->term, dh);
    if (e->index > rep->commit_seen) {
        sim__fail(c, "group %u node %u: applies entry %llu above its commit %llu", group, node + 1,
                  (unsigned long long)e->index, (unsigned long long)rep->commit_seen);
        return;
    }
    if (a->term == 0) {
        *a = (struct sim_applied){.term = e->term, .dhash = dh, .prefix = prefix};
        if (e->index > g->applied_max)
            g->applied_max = e->index;
        c->cnt.commits++;
        if (e->type == RAFT_ENTRY_CONF_CHANGE)
            c->cnt.conf_changes++;
        return;
    }
    if (a->term != e->term || a->dhash != dh || a->prefix != prefix)
        sim__fail(c,
                  "state machine safety: group %u node %u applied index %llu term %llu%s, "
                  "another node applied term %llu there",
                  group, node + 1, (unsigned long long)e->index, (unsigned long long)e->term,
                  a->term == e->term && a->dhash == dh ? " on a different prefix" : "",
                  (unsigned long long)a->term);
}

void sim__check_snapshot(struct sim_cluster *c, unsigned node, unsigned group,
                         const struct raft_snapshot *snap, const struct sim_sm *sm)
{
    struct sim_group *g = &c->groups[group];
    struct sim_replica *rep = sim__rep(c, node, group);
    raft_index idx = snap->meta.index;
    if (sm->applied != idx) {
        sim__fail(c, "group %u node %u: snapshot meta index %llu but state applied %llu", group,
                  node + 1, (unsigned long long)idx, (unsigned long long)sm->applied);
        return;
    }
    if (idx <= rep->sm.applied) {
        sim__fail(c, "group %u node %u: asked to install snapshot %llu at applied %llu", group,
                  node + 1, (unsigned long long)idx, (unsigned long long)rep->sm.applied);
        return;
    }
    if (idx >= g->applied_cap || g->applied[idx].term == 0) {
        sim__fail(c, "group %u node %u: snapshot %llu covers an index nobody applied", group,
                  node + 1, (unsigned long long)idx);
        return;
    }
    if (g->applied[idx].term != snap->meta.term || g->applied[idx].prefix != sm->hash)
        sim__fail(c,
                  "state machine safety: group %u node %u got snapshot index %llu term %llu "
                  "whose state differs from what nodes applied (term %llu)",
                  group, node + 1, (unsigned long long)idx, (unsigned long long)snap->meta.term,
                  (unsigned long long)g->applied[idx].term);
}

/* Linearizable reads (thesis 6.4): the read index covers every write acknowledged before the
 * read started, and the state served has applied at least that far. */
void sim__check_read(struct sim_cluster *c, unsigned node, unsigned group, const struct sim_read *r)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    if (r->index < r->acked_at_start || rep->sm.applied < r->acked_at_start)
        sim__fail(c,
                  "linearizability: group %u node %u served read ctx %llu at read index %llu "
                  "(applied %llu) but the write at index %llu was acknowledged before the read "
                  "started",
                  group, node + 1, (unsigned long long)r->ctx, (unsigned long long)r->index,
                  (unsigned long long)rep->sm.applied, (unsigned long long)r->acked_at_start);
}

/* Per-core checks after every input: commit monotonic, applied <= commit, one leader per term. */
void sim__check_observe(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_group *g = &c->groups[group];
    struct sim_replica *rep = sim__rep(c, node, group);
    struct raft_status st;
    raft_status(rep->core, &st);
    if (st.commit < rep->commit_seen) {
        sim__fail(c, "commit moved backwards: group %u node %u commit %llu after %llu", group,
                  node + 1, (unsigned long long)st.commit, (unsigned long long)rep->commit_seen);
        return;
    }
    rep->commit_seen = st.commit;
    if (st.applied > st.commit || rep->sm.applied > st.commit) {
        sim__fail(c, "group %u node %u: applied %llu (host %llu) above commit %llu", group,
                  node + 1, (unsigned long long)st.applied, (unsigned long long)rep->sm.applied,
                  (unsigned long long)st.commit);
        return;
    }
    if (st.role == RAFT_LEADER) {
        if (!sim__grow_terms(c, g, st.term))
            return;
        raft_id other = g->leader_of_term[st.term];
        if (other != 0 && other != node + 1) {
            sim__fail(c,
                      "election safety: group %u has two leaders in term %llu: nodes %llu "
                      "and %u",
                      group, (unsigned long long)st.term, (unsigned long long)other, node + 1);
            return;
        }
        g->leader_of_term[st.term] = node + 1;
        if (rep->role != RAFT_LEADER || rep->term != st.term) {
            c->cnt.elections++;
            rep->lc_pending = true;
            rep->lc_after_seq = rep->ready_seq;
            rep->lc_term = st.term;
            rep->role = st.role;
            rep->term = st.term;
            sim__trace(c, "n%u g%u becomes leader of term %llu (commit %llu, last %llu)", node + 1,
                       group, (unsigned long long)st.term, (unsigned long long)st.commit,
                       (unsigned long long)st.last_index);
            sim__workload_on_leader(c, node, group);
        }
    }
    rep->role = st.role;
    rep->term = st.term;
}

/* raft_check_invariants on one live core: a failure names the invariant, node, term and index. */
void sim__check_core(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    struct raft_invariant_report ir;
    if (rep->core == NULL || raft_check_invariants(rep->core, &ir) == RAFT_OK)
        return;
    sim__fail(c,
              "raft_check_invariants: invariant %s broken on node %u group %u term %llu index "
              "%llu: %s",
              ir.name, node + 1, group, (unsigned long long)ir.term, (unsigned long long)ir.index,
              ir.detail);
}

void sim__check_all_cores(struct sim_cluster *c)
{
    for (unsigned n = 0; n < c->opt.n_nodes && !c->failed; n++) {
        if (!c->nodes[n].up)
            continue;
        for (unsigned g = 0; g < c->opt.n_groups && !c->failed; g++)
            sim__check_core(c, n, g);
    }
}
