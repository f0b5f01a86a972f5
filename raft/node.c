/* node.c - the public face of the core (etcd's rawnode.go): create, step, propose, ready/advance.
 */
#include "raft_int.h"

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
}

int raft_new(const struct raft_config *cfg, struct raft **out)
{
    if (cfg == NULL || out == NULL || cfg->id == 0 || cfg->storage == NULL ||
        cfg->election_tick == 0 || cfg->heartbeat_tick == 0 ||
        cfg->heartbeat_tick >= cfg->election_tick) {
        return RAFT_EINVAL;
    }
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
    r->ticks++;
    raft__read_tick(r);
    raft__tick_impl(r);
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
    bool pre = m->type == RAFT_MSG_PRE_VOTE;
    /* thesis 3.4: at most one vote per term, first come first served */
    bool can_vote =
        r->vote == m->from || (r->vote == 0 && r->lead == 0) || (pre && m->term > r->term);
    bool log_ok = true;
#ifndef SLOTD_RAFT_BUG_VOTE_NO_LOG_CHECK
    /* thesis 3.6.1: only vote for a candidate whose log is at least as up-to-date as ours */
    log_ok = raft__log_up_to_date(&r->log, m->index, m->log_term);
#endif
    struct raft_msg resp = {.type = pre ? RAFT_MSG_PRE_VOTE_RESP : RAFT_MSG_VOTE_RESP,
                            .to = m->from};
    if (can_vote && log_ok) {
        resp.term = m->term;
        if (!pre) {
            r->election_elapsed = 0;
            r->vote = m->from;
        }
    } else {
        resp.term = r->term;
        resp.reject = true;
    }
    raft__send(r, &resp);
}

int raft_step(struct raft *r, const struct raft_msg *m)
{
    if (r->log.storage_err != 0) {
        return r->log.storage_err;
    }
    if (m->type >= RAFT_MSG_TYPE_COUNT_ || m->from == 0 || m->from == r->id ||
        (m->to != 0 && m->to != r->id)) {
        return 0;
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

int raft_propose_batch(struct raft *r, const struct raft_buf *data, size_t n,
                       raft_index *first_index)
{
    if (n == 0 || data == NULL) {
        return RAFT_EINVAL;
    }
    if (r->role != RAFT_LEADER) {
        return r->lead == 0 ? RAFT_ENOLEADER : RAFT_ENOTLEADER;
    }
    /* thesis 3.10 step 1: a leader handing off leadership stops accepting requests */
    if (r->transferee != 0) {
        return RAFT_ETRANSFER;
    }
    return raft__append_entries(r, RAFT_ENTRY_NORMAL, data, n, first_index);
}

int raft_propose(struct raft *r, const void *data, size_t len, raft_index *index)
{
    struct raft_buf b = {.base = data, .len = len};
    return raft_propose_batch(r, &b, 1, index);
}

int raft_transfer_leader(struct raft *r, raft_id target)
{
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
    r->election_elapsed = 0; /* the transfer gets one election timeout */
    struct raft__progress *p = raft__progress_get(r, target);
    if (p->match == raft__log_last_index(&r->log)) {
        struct raft_msg m = {.type = RAFT_MSG_TIMEOUT_NOW, .to = target};
        raft__send(r, &m);
    } else {
        raft__bcast_append(r);
    }
    return 0;
}

int raft_campaign(struct raft *r)
{
    if (r->role == RAFT_LEADER || !raft__promotable(r)) {
        return RAFT_EINVAL;
    }
    raft__hup(r, false);
    return 0;
}

void raft_report_unreachable(struct raft *r, raft_id to)
{
    struct raft__progress *p = raft__progress_get(r, to);
    if (r->role == RAFT_LEADER && p != NULL && p->state == RAFT_PROGRESS_REPLICATE) {
        raft__progress_become_probe(p);
    }
}

void raft_report_snapshot(struct raft *r, raft_id to, bool ok)
{
    struct raft__progress *p = raft__progress_get(r, to);
    if (r->role != RAFT_LEADER || p == NULL || p->state != RAFT_PROGRESS_SNAPSHOT) {
        return;
    }
    if (!ok) {
        p->pending_snapshot = 0; /* probe again from match */
    }
    raft__progress_become_probe(p);
    p->probe_sent = true; /* wait for the follower's answer or a heartbeat answer */
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
    if (r->ready_out) {
        return RAFT_EINVAL;
    }
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
    return 0;
}

void raft_advance(struct raft *r, const struct raft_ready *rd)
{
    (void)rd; /* everything needed was recorded by raft_ready() */
    if (!r->ready_out) {
        return;
    }
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
}

/* ---- introspection ---- */

raft_term raft_current_term(const struct raft *r)
{
    return r->term;
}

void raft_status(const struct raft *cr, struct raft_status *out)
{
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

int raft_check_invariants(const struct raft *cr)
{
    struct raft *r = (struct raft *)cr;
    struct raft__log *l = &r->log;
    raft_index last = raft__log_last_index(l);
    if (l->committed > last || l->applied > l->committed) {
        return RAFT_EINVAL;
    }
    if (raft__log_last_term(l) > r->term || raft__conf_validate(&r->conf) != 0 ||
        r->n_prs != r->conf.n_voters + r->conf.n_learners) {
        return RAFT_EINVAL;
    }
    for (size_t i = 0; i < l->u.n; i++) {
        if (l->u.ents[i].index != l->u.offset + i ||
            (i > 0 && l->u.ents[i].term < l->u.ents[i - 1].term)) {
            return RAFT_EINVAL;
        }
    }
    if (r->role == RAFT_LEADER) {
        if (r->lead != r->id || r->vote != r->id || !raft__promotable(r)) {
            return RAFT_EINVAL;
        }
        for (uint32_t i = 0; i < r->n_prs; i++) {
            const struct raft__progress *p = &r->prs[i];
            if (p->match >= p->next || p->next > last + 1) {
                return RAFT_EINVAL;
            }
            if (p->id == r->id && p->match > raft__log_stable_last(l)) {
                return RAFT_EINVAL; /* the leader counts only its durable entries */
            }
        }
    }
    if (r->n_reads + r->n_fwd > r->cfg.read_queue_max) {
        return RAFT_EINVAL;
    }
    return 0;
}
