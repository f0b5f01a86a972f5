/* node.c - the public face of the core (etcd's rawnode.go): create, step, propose, ready/advance,
 * invariant checks. */
#include "raft_int.h"

#include <stdarg.h>
#include <stdio.h>

static void raft__config_fill(struct raft_config *c)
{
    struct raft_config d;
    raft_config_default(&d);
    c->max_msg_bytes = c->max_msg_bytes ? c->max_msg_bytes : d.max_msg_bytes;
    c->max_inflight_msgs = c->max_inflight_msgs ? c->max_inflight_msgs : d.max_inflight_msgs;
    c->max_uncommitted_bytes =
        c->max_uncommitted_bytes ? c->max_uncommitted_bytes : d.max_uncommitted_bytes;
    c->max_entry_bytes = c->max_entry_bytes ? c->max_entry_bytes : d.max_entry_bytes;
    c->max_committed_bytes_per_ready = c->max_committed_bytes_per_ready
                                           ? c->max_committed_bytes_per_ready
                                           : d.max_committed_bytes_per_ready;
    c->read_queue_max = c->read_queue_max ? c->read_queue_max : d.read_queue_max;
    if (c->lease_drift_ticks == 0) {
        c->lease_drift_ticks = c->election_tick / 10 > 0 ? c->election_tick / 10 : 1;
    }
}

int raft_new(const struct raft_config *cfg, struct raft **out)
{
    RAFT_ASSERT(cfg != NULL && out != NULL);
    if (cfg->id == 0 || cfg->storage == NULL || cfg->election_tick == 0 ||
        cfg->heartbeat_tick == 0 || cfg->heartbeat_tick >= cfg->election_tick) {
        return RAFT_EINVAL;
    }
    const struct raft_storage *st = cfg->storage;
    RAFT_ASSERT(st->initial_state != NULL && st->entries != NULL && st->term != NULL &&
                st->first_index != NULL && st->last_index != NULL && st->snapshot != NULL);
    struct raft_hard_state hs = {0};
    struct raft_conf_state cs;
    memset(&cs, 0, sizeof(cs));
    if (cfg->storage->initial_state(cfg->storage->ctx, &hs, &cs) != 0) {
        return RAFT_ESTORAGE;
    }
    if (raft__conf_validate(&cs) != 0) {
        return RAFT_ESTORAGE;
    }
    struct raft *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return RAFT_ENOMEM;
    }
    r->cfg = *cfg;
    raft__config_fill(&r->cfg);
    if (r->cfg.lease &&
        (r->cfg.disable_check_quorum || r->cfg.election_tick <= 2 + r->cfg.lease_drift_ticks)) {
        free(r);
        return RAFT_EINVAL; /* a lease needs check-quorum and at least one tick of length */
    }
    r->id = cfg->id;
    int rv = raft__log_init(&r->log, cfg->storage, hs.commit, cfg->applied);
    if (rv != 0) {
        goto err_after_alloc;
    }
    r->term = hs.term;
    r->vote = hs.vote;
    r->conf = cs;
    r->conf_index = raft__log_first_index(&r->log) - 1; /* at least the storage's snapshot */
    /* nodes differ even with one seed: mix the id into the PRNG state */
    r->rng = cfg->seed ^ (cfg->id * 0x9e3779b97f4a7c15ull);
    raft__rebuild_progress(r);
    raft__become_follower(r, r->term, 0);
    r->prev_hard.term = r->term;
    r->prev_hard.vote = r->vote;
    r->prev_hard.commit = r->log.committed;
    r->prev_soft.leader = 0;
    r->prev_soft.role = RAFT_FOLLOWER;
    RAFT__CHECK_CALL(r, "raft_new");
    *out = r;
    return 0;

err_after_alloc:
    free(r);
    return rv;
}

static void raft__outbox_free(struct raft__outbox *o)
{
    free(o->msgs);
    free(o->reads);
    free(o->fails);
    raft__arena_free(&o->arena);
}

void raft_free(struct raft *r)
{
    if (r == NULL) {
        return;
    }
    for (uint32_t i = 0; i < r->n_prs; i++) {
        raft__progress_free(&r->prs[i]);
    }
    raft__log_free(&r->log);
    free(r->reads);
    free(r->fwd);
    raft__outbox_free(&r->out);
    raft__outbox_free(&r->rdy);
    free(r);
}

void raft_tick(struct raft *r)
{
    RAFT_ASSERT(r != NULL);
    r->ticks++;
    raft__read_tick(r);
    raft__tick_impl(r);
    RAFT__CHECK_CALL(r, "raft_tick");
}

/* Term rules applied to every message before the role sees it. Returns true if m goes on. */
static bool raft__step_term(struct raft *r, const struct raft_msg *m)
{
    if (m->term > r->term) {
        if (m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE) {
            /* thesis 4.2.3: a server that heard from a leader within the minimum election
             * timeout ignores (pre-)votes, unless a leadership transfer forces them */
            bool force = m->context == 1;
            bool in_lease = !r->cfg.disable_check_quorum && r->lead != 0 &&
                            r->election_elapsed < r->cfg.election_tick;
            /* with leases, a replica that just started may have acknowledged a leader's
             * heartbeat just before it stopped: it keeps that promise for a timeout */
            if (r->cfg.lease && !r->cfg.disable_check_quorum && r->ticks < r->cfg.election_tick) {
                in_lease = true;
            }
            if (!force && in_lease) {
                return false;
            }
        }
        if (m->type == RAFT_MSG_PRE_VOTE || (m->type == RAFT_MSG_PRE_VOTE_RESP && !m->reject)) {
            /* thesis 9.6: pre-votes use a future term but change no state */
        } else if (m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_HEARTBEAT ||
                   m->type == RAFT_MSG_SNAPSHOT) {
            /* thesis 3.3: a higher term makes any server a follower (here of the sender) */
            raft__become_follower(r, m->term, m->from);
        } else {
            raft__become_follower(r, m->term, 0);
        }
        return true;
    }
    if (m->term < r->term) {
        if ((!r->cfg.disable_check_quorum || !r->cfg.disable_pre_vote) &&
            (m->type == RAFT_MSG_HEARTBEAT || m->type == RAFT_MSG_APPEND)) {
            /* a stale leader (or a node cut off with a lower term) learns our term; with
             * check-quorum or pre-vote it would otherwise never step down or catch up */
            struct raft_msg resp = {.type = RAFT_MSG_APPEND_RESP, .to = m->from};
            raft__send(r, &resp);
        } else if (m->type == RAFT_MSG_PRE_VOTE) {
            struct raft_msg resp = {
                .type = RAFT_MSG_PRE_VOTE_RESP, .to = m->from, .term = r->term, .reject = true};
            raft__send(r, &resp);
        }
        return false;
    }
    return true;
}

static void raft__step_vote(struct raft *r, const struct raft_msg *m)
{
    RAFT_ASSERT(m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE);
    /* raft__step_term let it through: a vote is of our term, a pre-vote of ours or later */
    RAFT_ASSERT(m->term == r->term || (m->type == RAFT_MSG_PRE_VOTE && m->term > r->term));
    bool pre = m->type == RAFT_MSG_PRE_VOTE;
    /* thesis 3.4: at most one vote per term, first come first served */
    bool can_vote =
        r->vote == m->from || (r->vote == 0 && r->lead == 0) || (pre && m->term > r->term);
    bool log_ok = true;
#ifndef SLOTD_RAFT_BUG_VOTE_NO_LOG_CHECK
    /* thesis 3.6.1: only vote for a candidate whose log is at least as up-to-date as ours */
    log_ok = raft__log_up_to_date(&r->log, m->index, m->log_term);
    /* a replica re-created empty votes as the log it held before its removal would */
    if (log_ok && r->cfg.vote_floor_term != 0) {
        log_ok = m->log_term > r->cfg.vote_floor_term ||
                 (m->log_term == r->cfg.vote_floor_term && m->index >= r->cfg.vote_floor_index);
    }
#endif
    struct raft_msg resp = {.type = pre ? RAFT_MSG_PRE_VOTE_RESP : RAFT_MSG_VOTE_RESP,
                            .to = m->from};
    if (can_vote && log_ok) {
        resp.term = m->term;
        if (!pre) {
            RAFT_ASSERT(r->vote == 0 || r->vote == m->from); /* one vote per term (3.4) */
            r->election_elapsed = 0;
            r->vote = m->from;
        }
    } else {
        resp.term = r->term;
        resp.reject = true;
    }
    raft__send(r, &resp);
}

/* A message comes from the network: what the core relies on is checked here and a message that
 * breaks it is refused (an operating error, not an assert). An APPEND's entries follow its
 * (index, log_term) without gaps, in non-decreasing terms no higher than the message's; a
 * snapshot is of a term no higher than the message's. */
static bool raft__msg_well_formed(const struct raft_msg *m)
{
    if (m->n_entries > 0 && (m->type != RAFT_MSG_APPEND || m->entries == NULL)) {
        return false;
    }
    raft_term prev = m->log_term;
    for (size_t i = 0; i < m->n_entries; i++) {
        const struct raft_entry *e = &m->entries[i];
        if (e->index != m->index + 1 + i || e->term < prev || e->term > m->term ||
            (e->data.len > 0 && e->data.base == NULL)) {
            return false;
        }
        prev = e->term;
    }
    if (m->type == RAFT_MSG_SNAPSHOT &&
        (m->snapshot.meta.term > m->term ||
         (m->snapshot.data.len > 0 && m->snapshot.data.base == NULL))) {
        return false;
    }
    return true;
}

static int raft__step(struct raft *r, const struct raft_msg *m)
{
    if (r->log.storage_err != 0) {
        return r->log.storage_err;
    }
    if (m->type >= RAFT_MSG_TYPE_COUNT_ || m->from == 0 || m->from == r->id ||
        (m->to != 0 && m->to != r->id)) {
        return 0;
    }
    if (!raft__msg_well_formed(m)) {
        return RAFT_EINVAL;
    }
    if (!raft__step_term(r, m)) {
        return 0;
    }
    if (m->type == RAFT_MSG_VOTE || m->type == RAFT_MSG_PRE_VOTE) {
        raft__step_vote(r, m);
        return 0;
    }
    return raft__step_role(r, m);
}

int raft_step(struct raft *r, const struct raft_msg *m)
{
    RAFT_ASSERT(r != NULL && m != NULL);
    int rv = raft__step(r, m);
    RAFT__CHECK_CALL(r, "raft_step");
    return rv;
}

int raft_propose_batch(struct raft *r, const struct raft_buf *data, size_t n,
                       raft_index *first_index)
{
    RAFT_ASSERT(r != NULL && data != NULL && n > 0);
    for (size_t i = 0; i < n; i++) {
        RAFT_ASSERT(data[i].len == 0 || data[i].base != NULL);
    }
    if (r->role != RAFT_LEADER) {
        return r->lead == 0 ? RAFT_ENOLEADER : RAFT_ENOTLEADER;
    }
    /* thesis 3.10 step 1: a leader handing off leadership stops accepting requests */
    if (r->transferee != 0) {
        return RAFT_ETRANSFER;
    }
    int rv = raft__append_entries(r, RAFT_ENTRY_NORMAL, data, n, first_index);
    RAFT__CHECK_CALL(r, "raft_propose_batch");
    return rv;
}

int raft_propose(struct raft *r, const void *data, size_t len, raft_index *index)
{
    RAFT_ASSERT(len == 0 || data != NULL);
    struct raft_buf b = {.base = data, .len = len};
    return raft_propose_batch(r, &b, 1, index);
}

int raft_transfer_leader(struct raft *r, raft_id target)
{
    RAFT_ASSERT(r != NULL);
    if (r->role != RAFT_LEADER) {
        return RAFT_ENOTLEADER;
    }
    if (target == r->id || !raft__is_voter(r, target)) {
        return RAFT_EINVAL;
    }
    if (r->transferee == target) {
        return 0;
    }
    r->transferee = target;
    r->lease_off_term = r->term; /* the target's forced election ignores leases */
    r->election_elapsed = 0;     /* the transfer gets one election timeout */
    struct raft__progress *p = raft__progress_get(r, target);
    RAFT_ASSERT(p != NULL); /* every voter has a progress */
    if (p->match == raft__log_last_index(&r->log)) {
        struct raft_msg m = {.type = RAFT_MSG_TIMEOUT_NOW, .to = target};
        raft__send(r, &m);
    } else {
        raft__bcast_append(r);
    }
    RAFT__CHECK_CALL(r, "raft_transfer_leader");
    return 0;
}

/* raft_campaign (fresh false) and raft_campaign_fresh (fresh true); fn names the caller. */
static int raft__campaign(struct raft *r, bool fresh, const char *fn)
{
    RAFT_ASSERT(r != NULL);
    if (r->role == RAFT_LEADER || !raft__promotable(r)) {
        return RAFT_EINVAL;
    }
    raft__hup(r, fresh);
    RAFT__CHECK_CALL(r, fn);
    return 0;
}

int raft_campaign(struct raft *r)
{
    return raft__campaign(r, false, "raft_campaign");
}

int raft_campaign_fresh(struct raft *r)
{
    return raft__campaign(r, true, "raft_campaign_fresh");
}

/* Both reports may name a member that left meanwhile (the transport answers late): ignored. */
void raft_report_unreachable(struct raft *r, raft_id to)
{
    RAFT_ASSERT(r != NULL);
    struct raft__progress *p = raft__progress_get(r, to);
    if (r->role == RAFT_LEADER && p != NULL && p->state == RAFT_PROGRESS_REPLICATE) {
        raft__progress_become_probe(p);
    }
    RAFT__CHECK_CALL(r, "raft_report_unreachable");
}

void raft_report_snapshot(struct raft *r, raft_id to, bool ok)
{
    RAFT_ASSERT(r != NULL);
    struct raft__progress *p = raft__progress_get(r, to);
    if (r->role != RAFT_LEADER || p == NULL || p->state != RAFT_PROGRESS_SNAPSHOT) {
        return;
    }
    if (!ok) {
        p->pending_snapshot = 0; /* probe again from match */
    }
    raft__progress_become_probe(p);
    p->probe_sent = true; /* wait for the follower's answer or a heartbeat answer */
    RAFT__CHECK_CALL(r, "raft_report_snapshot");
}

void raft_compacted(struct raft *r, raft_index index)
{
    /* The core keeps no copy of stable entries (it reads them from storage on demand), so
     * there is nothing to drop; storage is the source of truth. */
    (void)r;
    (void)index;
}

/* ---- ready / advance ---- */

static raft_index raft__apply_lo(struct raft *r)
{
    raft_index lo = r->log.applied + 1;
    raft_index first = raft__log_first_index(&r->log);
    return lo > first ? lo : first;
}

bool raft_has_ready(const struct raft *cr)
{
    RAFT_ASSERT(cr != NULL);
    struct raft *r = (struct raft *)cr; /* log lookups only read storage */
    if (r->ready_out) {
        return false;
    }
    if (r->lead != r->prev_soft.leader || r->role != r->prev_soft.role ||
        r->term != r->prev_hard.term || r->vote != r->prev_hard.vote ||
        r->log.committed != r->prev_hard.commit) {
        return true;
    }
    if (r->log.u.snap != NULL || r->log.u.n > 0 || r->out.n_msgs > 0 || r->out.n_reads > 0 ||
        r->out.n_fails > 0) {
        return true;
    }
    return raft__apply_lo(r) <= r->log.committed;
}

static void raft__ready_states(struct raft *r, struct raft_ready *rd)
{
    if (r->lead != r->prev_soft.leader || r->role != r->prev_soft.role) {
        rd->has_soft_state = true;
        rd->soft_state.leader = r->lead;
        rd->soft_state.role = r->role;
        r->prev_soft = rd->soft_state;
    }
    struct raft_hard_state hs = {.term = r->term, .vote = r->vote, .commit = r->log.committed};
    if (hs.term != r->prev_hard.term || hs.vote != r->prev_hard.vote ||
        hs.commit != r->prev_hard.commit) {
        rd->has_hard_state = true;
        rd->hard_state = hs;
        rd->must_sync = hs.term != r->prev_hard.term || hs.vote != r->prev_hard.vote;
        r->prev_hard = hs;
    }
}

/* Only a leader sends these, and none depends on what the ready persists: the commit index they
 * carry never counts the leader's unsynced entries (raft__self_persisted). A ready that changes
 * the term or vote sends everything after the sync: a message of a term this node could forget
 * in a crash must not leave it. Stable partition in place: early messages first. */
static bool raft__msg_early(const struct raft_msg *m)
{
    return m->type == RAFT_MSG_APPEND || m->type == RAFT_MSG_HEARTBEAT ||
           m->type == RAFT_MSG_TIMEOUT_NOW;
}

static size_t raft__partition_early(struct raft_msg *msgs, size_t n)
{
    size_t early = 0;
    for (size_t i = 0; i < n; i++) {
        if (!raft__msg_early(&msgs[i])) {
            continue;
        }
        if (i != early) {
            /* rotate msgs[early..i] right by one: keeps both groups in order */
            struct raft_msg m = msgs[i];
            memmove(&msgs[early + 1], &msgs[early], (i - early) * sizeof(m));
            msgs[early] = m;
        }
        early++;
    }
    return early;
}

int raft_ready(struct raft *r, struct raft_ready *rd)
{
    RAFT_ASSERT(r != NULL && rd != NULL);
    /* host contract: one ready at a time; raft_has_ready() is false while one is out */
    RAFT_ASSERT(!r->ready_out);
    if (r->log.storage_err != 0) {
        return r->log.storage_err;
    }
    memset(rd, 0, sizeof(*rd));
    /* every allocation first, so that a failure changes nothing */
    int rv = raft__read_reserve(r, &r->rdy, 0);
    if (rv != 0) {
        return rv;
    }
    struct raft_entry *committed = NULL;
    size_t n_committed = 0;
    raft_index lo = raft__apply_lo(r);
    if (lo <= r->log.committed) {
        rv =
            raft__log_slice(&r->log, lo, r->log.committed + 1, r->cfg.max_committed_bytes_per_ready,
                            &r->out.arena, false, &committed, &n_committed);
        if (rv != 0) {
            return rv == RAFT_ENOMEM ? rv : RAFT_ESTORAGE;
        }
    }
    struct raft__unstable *u = &r->log.u;
    struct raft_entry *ents = NULL;
    if (u->n > 0) {
        ents = raft__arena_alloc(&r->out.arena, u->n * sizeof(*ents));
        if (ents == NULL) {
            return RAFT_ENOMEM;
        }
        memcpy(ents, u->ents, u->n * sizeof(*ents));
        rd->entries = ents;
        rd->n_entries = u->n;
        r->rdy_last_index = ents[u->n - 1].index;
        r->rdy_last_term = ents[u->n - 1].term;
    }
    raft__ready_states(r, rd);
    bool term_or_vote_changed = rd->must_sync; /* set by raft__ready_states only for those */
    if (u->snap != NULL) {
        rd->has_snapshot = true;
        rd->snapshot = *u->snap;
        r->log.snap_in_ready = u->snap;
        r->rdy_snap_index = u->snap->meta.index;
    }
    rd->must_sync = rd->must_sync || rd->n_entries > 0 || rd->has_snapshot;
    rd->committed = committed;
    rd->n_committed = n_committed;
    r->rdy_applied = n_committed > 0 ? committed[n_committed - 1].index : 0;
    if (r->role == RAFT_LEADER) {
        size_t b = raft__entries_bytes(committed, n_committed);
        r->uncommitted_bytes -= b < r->uncommitted_bytes ? b : r->uncommitted_bytes;
    }
    struct raft__outbox tmp = r->out;
    r->out = r->rdy;
    r->rdy = tmp;
    r->out_gen++;
    r->mcache = NULL;
    rd->msgs = r->rdy.msgs;
    rd->n_msgs = r->rdy.n_msgs;
    if (!term_or_vote_changed && !rd->has_snapshot) {
        rd->n_msgs_early = raft__partition_early(rd->msgs, rd->n_msgs);
    }
    rd->reads = r->rdy.reads;
    rd->n_reads = r->rdy.n_reads;
    rd->read_failures = r->rdy.fails;
    rd->n_read_failures = r->rdy.n_fails;
    r->ready_out = true;
    RAFT__CHECK_CALL(r, "raft_ready");
    return 0;
}

void raft_advance(struct raft *r, const struct raft_ready *rd)
{
    RAFT_ASSERT(r != NULL && rd != NULL);
    /* host contract: advance exactly the ready the last raft_ready() handed out (everything
     * needed was recorded then; these fields only show that rd is that ready) */
    RAFT_ASSERT(r->ready_out);
    RAFT_ASSERT(rd->msgs == r->rdy.msgs && rd->n_msgs == r->rdy.n_msgs &&
                rd->n_reads == r->rdy.n_reads && rd->n_read_failures == r->rdy.n_fails);
    RAFT_ASSERT(rd->n_entries == 0 || rd->entries[rd->n_entries - 1].index == r->rdy_last_index);
    RAFT_ASSERT(rd->n_committed == 0 || rd->committed[rd->n_committed - 1].index == r->rdy_applied);
    struct raft__log *l = &r->log;
    if (l->snap_in_ready != NULL) {
        struct raft_snapshot *s = l->snap_in_ready;
        if (l->u.snap == s) {
            l->u.snap = NULL; /* stable now */
        }
        l->snap_in_ready = NULL;
        free(s);
        if (r->rdy_snap_index > l->applied) {
            l->applied = r->rdy_snap_index;
        }
    }
    if (r->rdy_last_index != 0) {
        raft__log_stable_to(l, r->rdy_last_index, r->rdy_last_term);
        raft__self_persisted(r, r->rdy_last_index, r->rdy_last_term);
    }
    if (r->rdy_applied > l->applied) {
        l->applied = r->rdy_applied;
    }
    raft__chunks_release(&l->u.data, l->u.offset - 1);
    r->rdy.n_msgs = 0;
    r->rdy.n_reads = 0;
    r->rdy.n_fails = 0;
    raft__arena_reset(&r->rdy.arena);
    r->rdy_last_index = 0;
    r->rdy_last_term = 0;
    r->rdy_applied = 0;
    r->rdy_snap_index = 0;
    r->ready_out = false;
    RAFT__CHECK_CALL(r, "raft_advance");
}

/* ---- introspection ---- */

raft_term raft_current_term(const struct raft *r)
{
    RAFT_ASSERT(r != NULL);
    return r->term;
}

const struct raft_snapshot *raft_pending_snapshot(const struct raft *r)
{
    RAFT_ASSERT(r != NULL);
    return r->log.u.snap;
}

void raft_status(const struct raft *cr, struct raft_status *out)
{
    RAFT_ASSERT(cr != NULL && out != NULL);
    struct raft *r = (struct raft *)cr;
    memset(out, 0, sizeof(*out));
    out->id = r->id;
    out->role = r->role;
    out->leader = r->lead;
    out->term = r->term;
    out->vote = r->vote;
    out->commit = r->log.committed;
    out->applied = r->log.applied;
    out->last_index = raft__log_last_index(&r->log);
    out->first_index = raft__log_first_index(&r->log);
    out->transfer_target = r->transferee;
    out->leader_silent_ticks = r->role == RAFT_LEADER ? 0 : r->leader_silent;
    out->uncommitted_bytes = r->uncommitted_bytes;
    out->conf = r->conf;
    if (r->role != RAFT_LEADER) {
        return;
    }
    for (uint32_t i = 0; i < r->n_prs; i++) {
        const struct raft__progress *p = &r->prs[i];
        struct raft_progress_status *s = &out->progress[out->n_progress++];
        s->id = p->id;
        s->learner = p->learner;
        s->state = p->state;
        s->recent_active = p->recent_active;
        s->match = p->match;
        s->next = p->next;
        s->inflight = p->ins.count;
    }
}

/* ---- invariants ---- */

/* Fills *rep (if any) for the broken invariant `name`; returns RAFT_EINVAL. */
static int raft__broken(const struct raft *r, struct raft_invariant_report *rep, const char *name,
                        raft_index index, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

static int raft__broken(const struct raft *r, struct raft_invariant_report *rep, const char *name,
                        raft_index index, const char *fmt, ...)
{
    if (rep != NULL) {
        rep->name = name;
        rep->node = r->id;
        rep->term = r->term;
        rep->index = index;
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(rep->detail, sizeof(rep->detail), fmt, ap);
        va_end(ap);
    }
    return RAFT_EINVAL;
}

#define RAFT__ULL(v) ((unsigned long long)(v))

/* The log: commit and applied within it, terms bounded and ordered, unstable part placed. */
static int raft__check_log(struct raft *r, struct raft_invariant_report *rep)
{
    struct raft__log *l = &r->log;
    raft_index last = raft__log_last_index(l);
    if (l->committed > last) {
        return raft__broken(r, rep, "commit_le_last", l->committed,
                            "commit %llu is above the last index %llu", RAFT__ULL(l->committed),
                            RAFT__ULL(last));
    }
    if (l->applied > l->committed) {
        return raft__broken(r, rep, "applied_le_commit", l->applied,
                            "applied %llu is above commit %llu", RAFT__ULL(l->applied),
                            RAFT__ULL(l->committed));
    }
    raft_term last_term = raft__log_term_or_zero(l, last);
    if (last_term > r->term) {
        return raft__broken(r, rep, "entry_term_le_term", last,
                            "the last entry has term %llu above the current term",
                            RAFT__ULL(last_term));
    }
    const struct raft__unstable *u = &l->u;
    raft_index stable_last = u->n > 0 ? 0 : last; /* nothing unstable: storage holds the last */
    if (u->snap != NULL ? u->offset != u->snap->meta.index + 1
                        : ((u->n == 0 || l->st->last_index(l->st->ctx, &stable_last) == 0) &&
                           u->offset > stable_last + 1)) {
        return raft__broken(r, rep, "unstable_offset", u->offset,
                            "unstable entries start at %llu (pending snapshot %llu, storage last "
                            "%llu)",
                            RAFT__ULL(u->offset), RAFT__ULL(u->snap ? u->snap->meta.index : 0),
                            RAFT__ULL(stable_last));
    }
    for (size_t i = 0; i < u->n; i++) {
        const struct raft_entry *e = &u->ents[i];
        if (e->index != u->offset + i) {
            return raft__broken(r, rep, "unstable_contiguous", u->offset + i,
                                "unstable entry %zu has index %llu, expected %llu", i,
                                RAFT__ULL(e->index), RAFT__ULL(u->offset + i));
        }
        if (i > 0 && e->term < u->ents[i - 1].term) {
            return raft__broken(r, rep, "entry_terms_ordered", e->index,
                                "entry %llu has term %llu below its predecessor's %llu",
                                RAFT__ULL(e->index), RAFT__ULL(e->term),
                                RAFT__ULL(u->ents[i - 1].term));
        }
    }
    return 0;
}

/* Membership: a valid configuration with one progress per member, in configuration order. */
static int raft__check_conf(struct raft *r, struct raft_invariant_report *rep)
{
    if (raft__conf_validate(&r->conf) != 0) {
        return raft__broken(r, rep, "conf_valid", r->conf_index,
                            "the configuration (%u voters, %u learners) has a zero, duplicate or "
                            "overlapping id or too many members",
                            r->conf.n_voters, r->conf.n_learners);
    }
    if (r->n_prs != r->conf.n_voters + r->conf.n_learners) {
        return raft__broken(r, rep, "progress_per_member", r->conf_index,
                            "%u progress entries for %u voters and %u learners", r->n_prs,
                            r->conf.n_voters, r->conf.n_learners);
    }
    for (uint32_t i = 0; i < r->n_prs; i++) {
        bool learner = i >= r->conf.n_voters;
        raft_id id = learner ? r->conf.learners[i - r->conf.n_voters] : r->conf.voters[i];
        if (r->prs[i].id != id || r->prs[i].learner != learner) {
            return raft__broken(r, rep, "progress_per_member", r->conf_index,
                                "progress %u is for node %llu%s, the configuration has node "
                                "%llu%s there",
                                i, RAFT__ULL(r->prs[i].id), r->prs[i].learner ? " (learner)" : "",
                                RAFT__ULL(id), learner ? " (learner)" : "");
        }
    }
    return 0;
}

/* One member's replication state as the leader sees it. */
static int raft__check_progress(struct raft *r, const struct raft__progress *p, raft_index last,
                                struct raft_invariant_report *rep)
{
    if (p->match >= p->next || p->next > last + 1) {
        return raft__broken(r, rep, "progress_match_lt_next", p->match,
                            "node %llu has match %llu, next %llu, last index %llu",
                            RAFT__ULL(p->id), RAFT__ULL(p->match), RAFT__ULL(p->next),
                            RAFT__ULL(last));
    }
    if (p->id == r->id && p->match > raft__log_stable_last(&r->log)) {
        /* thesis 10.2.1: the leader's own copy counts towards a commit once durable */
        return raft__broken(r, rep, "leader_self_durable", p->match,
                            "the leader counts its own match %llu above its durable last index "
                            "%llu",
                            RAFT__ULL(p->match), RAFT__ULL(raft__log_stable_last(&r->log)));
    }
    if (p->ins.count > p->ins.max || (p->ins.count > 0 && p->state != RAFT_PROGRESS_REPLICATE)) {
        return raft__broken(r, rep, "inflights_bounded", p->next,
                            "node %llu has %zu appends in flight (window %zu) in state %u",
                            RAFT__ULL(p->id), p->ins.count, p->ins.max, p->state);
    }
    if ((p->probe_sent && p->state != RAFT_PROGRESS_PROBE) ||
        (p->pending_snapshot != 0 && p->state != RAFT_PROGRESS_SNAPSHOT)) {
        return raft__broken(r, rep, "progress_state", p->next,
                            "node %llu in state %u has probe_sent %d, pending snapshot %llu",
                            RAFT__ULL(p->id), p->state, p->probe_sent,
                            RAFT__ULL(p->pending_snapshot));
    }
    return 0;
}

/* The leader: leads and voted for itself, is a voter, commits only entries of its term. */
static int raft__check_leader(struct raft *r, struct raft_invariant_report *rep)
{
    struct raft__log *l = &r->log;
    if (r->lead != r->id || r->vote != r->id || !raft__promotable(r)) {
        return raft__broken(r, rep, "leader_self", 0,
                            "a leader with lead %llu, vote %llu, voter %d", RAFT__ULL(r->lead),
                            RAFT__ULL(r->vote), raft__promotable(r));
    }
    raft_term ct = 0;
    if (l->committed != r->lead_commit0 && raft__log_term(l, l->committed, &ct) == 0 &&
        ct != r->term) {
        /* thesis 3.6.2: only an entry of the leader's term commits by counting replicas */
        return raft__broken(r, rep, "leader_commit_in_term", l->committed,
                            "the leader moved commit from %llu to %llu, an entry of term %llu",
                            RAFT__ULL(r->lead_commit0), RAFT__ULL(l->committed), RAFT__ULL(ct));
    }
    raft_index last = raft__log_last_index(l);
    for (uint32_t i = 0; i < r->n_prs; i++) {
        int rv = raft__check_progress(r, &r->prs[i], last, rep);
        if (rv != 0) {
            return rv;
        }
    }
    return 0;
}

/* State that only some roles hold, and the bounds on queues. */
static int raft__check_roles(struct raft *r, struct raft_invariant_report *rep)
{
    bool leader = r->role == RAFT_LEADER;
    if (r->role > RAFT_LEADER) {
        return raft__broken(r, rep, "role_valid", 0, "role %u", r->role);
    }
    if (!leader && (r->n_reads > 0 || r->transferee != 0 || r->uncommitted_bytes > 0)) {
        return raft__broken(r, rep, "leader_only_state", 0,
                            "a %s holds %zu leader reads, transfer target %llu, %zu uncommitted "
                            "bytes",
                            raft_role_name(r->role), r->n_reads, RAFT__ULL(r->transferee),
                            r->uncommitted_bytes);
    }
    if (leader && r->n_fwd > 0) {
        return raft__broken(r, rep, "leader_no_forwarded_reads", 0,
                            "a leader holds %zu reads forwarded to another leader", r->n_fwd);
    }
    if (r->n_reads + r->n_fwd > r->cfg.read_queue_max) {
        return raft__broken(r, rep, "reads_bounded", 0, "%zu reads queued, at most %zu",
                            r->n_reads + r->n_fwd, r->cfg.read_queue_max);
    }
    if (r->randomized_timeout < r->cfg.election_tick ||
        r->randomized_timeout >= 2 * r->cfg.election_tick) {
        return raft__broken(r, rep, "election_timeout_range", 0,
                            "randomized election timeout %u outside [%u, %u)",
                            r->randomized_timeout, r->cfg.election_tick, 2 * r->cfg.election_tick);
    }
    return 0;
}

int raft_check_invariants(const struct raft *cr, struct raft_invariant_report *rep)
{
    RAFT_ASSERT(cr != NULL);
    struct raft *r = (struct raft *)cr; /* log lookups only read storage */
    if (rep != NULL) {
        memset(rep, 0, sizeof(*rep));
    }
    int rv = raft__check_log(r, rep);
    if (rv == 0) {
        rv = raft__check_conf(r, rep);
    }
    if (rv == 0) {
        rv = raft__check_roles(r, rep);
    }
    if (rv == 0 && r->role == RAFT_LEADER) {
        rv = raft__check_leader(r, rep);
    }
    return rv;
}

#ifdef SLOTD_RAFT_CHECK_CALLS
void raft__check_call(const struct raft *r, const char *call)
{
    struct raft_invariant_report rep;
    if (raft_check_invariants(r, &rep) != 0) {
        fprintf(stderr, "raft: invariant %s broken after %s: node %llu term %llu index %llu: %s\n",
                rep.name, call, RAFT__ULL(rep.node), RAFT__ULL(rep.term), RAFT__ULL(rep.index),
                rep.detail);
        fflush(stderr);
        abort();
    }
}
#endif
