/* raft.c - the protocol: roles, elections, log replication, commit, transfer and snapshots. */
#include "raft_int.h"
#include <limits.h>

enum raft__campaign { RAFT__CAMPAIGN_PRE, RAFT__CAMPAIGN_ELECTION, RAFT__CAMPAIGN_TRANSFER };

static bool raft__is_vote_type(uint8_t t)
{
    return t == RAFT_MSG_VOTE || t == RAFT_MSG_PRE_VOTE || t == RAFT_MSG_VOTE_RESP ||
           t == RAFT_MSG_PRE_VOTE_RESP;
}

/* Queues m for the next ready. A message that cannot be queued (out of memory) is dropped: the
 * protocol tolerates lost messages, and the sender retries on its timers. */
void raft__send(struct raft *r, struct raft_msg *m)
{
    RAFT_ASSERT(m->type < RAFT_MSG_TYPE_COUNT_ && m->to != 0 && m->to != r->id);
    m->from = r->id;
    if (!raft__is_vote_type(m->type)) {
        m->term = r->term; /* vote messages carry the term they are about, set by the caller */
    }
    struct raft__outbox *o = &r->out;
    if (raft__grow((void **)&o->msgs, &o->cap_msgs, o->n_msgs + 1, sizeof(*o->msgs)) != 0) {
        return;
    }
    o->msgs[o->n_msgs++] = *m;
}

struct raft__progress *raft__progress_get(struct raft *r, raft_id id)
{
    for (uint32_t i = 0; i < r->n_prs; i++) {
        if (r->prs[i].id == id) {
            return &r->prs[i];
        }
    }
    return NULL;
}

bool raft__is_voter(const struct raft *r, raft_id id)
{
    return raft__conf_has_voter(&r->conf, id);
}

/* Learners and nodes outside the configuration never campaign. */
bool raft__promotable(const struct raft *r)
{
    return raft__is_voter(r, r->id);
}

bool raft__committed_in_term(struct raft *r)
{
    return raft__log_term_or_zero(&r->log, r->log.committed) == r->term;
}

static void raft__reset_timeout(struct raft *r)
{
    RAFT_ASSERT(r->cfg.election_tick > 0);
    r->randomized_timeout =
        r->cfg.election_tick + (unsigned)(raft__rand_next(&r->rng) % r->cfg.election_tick);
}

/* Rebuilds progress from r->conf, keeping the state of members that stay. */
void raft__rebuild_progress(struct raft *r)
{
    struct raft__progress old[RAFT_MEMBERS_MAX];
    uint32_t n_old = r->n_prs;
    bool moved[RAFT_MEMBERS_MAX] = {false};
    memcpy(old, r->prs, sizeof(old));
    raft_index last = raft__log_last_index(&r->log);
    r->n_prs = 0;
    RAFT_ASSERT(r->conf.n_voters + r->conf.n_learners <= RAFT_MEMBERS_MAX);
    for (uint32_t k = 0; k < r->conf.n_voters + r->conf.n_learners; k++) {
        bool learner = k >= r->conf.n_voters;
        raft_id id = learner ? r->conf.learners[k - r->conf.n_voters] : r->conf.voters[k];
        struct raft__progress *p = &r->prs[r->n_prs++];
        uint32_t j = 0;
        while (j < n_old && old[j].id != id) {
            j++;
        }
        if (j < n_old) {
            *p = old[j];
            moved[j] = true;
        } else {
            memset(p, 0, sizeof(*p));
            p->id = id;
            p->ins.max = r->cfg.max_inflight_msgs;
            raft__progress_reset(p, last, id == r->id);
            p->recent_active = true; /* a new member gets one check-quorum period */
        }
        p->learner = learner;
    }
    for (uint32_t j = 0; j < n_old; j++) {
        if (!moved[j]) {
            raft__progress_free(&old[j]);
        }
    }
}

void raft__abort_transfer(struct raft *r)
{
    r->transferee = 0;
}

/* Shared by every role change: a new term forgets the vote (thesis 3.3, Figure 3.1). */
static void raft__reset(struct raft *r, raft_term term)
{
    RAFT_ASSERT(term >= r->term); /* terms never go back (thesis 3.3) */
    bool was_leader = r->role == RAFT_LEADER;
    if (r->term != term) {
        r->term = term;
        r->vote = 0;
    }
    r->lead = 0;
    r->election_elapsed = 0;
    r->heartbeat_elapsed = 0;
    raft__reset_timeout(r);
    raft__abort_transfer(r);
    raft_index last = raft__log_last_index(&r->log);
    for (uint32_t i = 0; i < r->n_prs; i++) {
        raft__progress_reset(&r->prs[i], last, r->prs[i].id == r->id);
        r->prs[i].recent_active = false;
    }
    /* pending reads are failed so that the host never waits for a leader that is gone */
    if (was_leader || r->n_fwd > 0) {
        raft__read_fail_all(r, RAFT_ENOTLEADER);
    }
    r->n_reads = 0;
    r->uncommitted_bytes = 0;
    r->mcache = NULL;
    struct raft__progress *self = raft__progress_get(r, r->id);
    if (self != NULL) {
        self->match = raft__log_stable_last(&r->log); /* only what is durable here counts */
    }
}

void raft__become_follower(struct raft *r, raft_term term, raft_id lead)
{
    raft__reset(r, term);
    r->role = RAFT_FOLLOWER;
    r->lead = lead;
}

static void raft__become_pre_candidate(struct raft *r)
{
    RAFT_ASSERT(r->role != RAFT_LEADER && raft__promotable(r));
    /* thesis 9.6: a pre-candidate keeps its term and vote until a majority would vote for it */
    if (r->n_fwd > 0) {
        raft__read_fail_all(r, RAFT_ENOTLEADER);
    }
    for (uint32_t i = 0; i < r->n_prs; i++) {
        r->prs[i].vote = RAFT__VOTE_NONE;
    }
    r->role = RAFT_PRE_CANDIDATE;
    r->lead = 0;
}

static void raft__become_candidate(struct raft *r)
{
    RAFT_ASSERT(r->role != RAFT_LEADER && raft__promotable(r));
    /* thesis 3.4: increment the term, vote for self */
    raft__reset(r, r->term + 1);
    r->vote = r->id;
    r->role = RAFT_CANDIDATE;
}

static void raft__become_leader(struct raft *r)
{
    /* thesis 3.4: only a candidate that won the votes of its term leads */
    RAFT_ASSERT(r->role == RAFT_CANDIDATE && r->vote == r->id && raft__promotable(r));
    raft__reset(r, r->term);
    r->role = RAFT_LEADER;
    r->lead = r->id;
    r->lead_commit0 = r->log.committed;
    struct raft__progress *self = raft__progress_get(r, r->id);
    RAFT_ASSERT(self != NULL && !self->learner);
    raft__progress_become_replicate(self);
    self->recent_active = true;
    /* any conf change in the log may still be pending: wait until it is applied */
    r->pending_conf_index = raft__log_last_index(&r->log);
    /* thesis 6.4 / 3.6.2: a new leader appends a no-op entry of its term; committing it
     * commits everything before it and lets reads and conf changes proceed */
    struct raft_buf noop = {NULL, 0};
    if (raft__append_entries(r, RAFT_ENTRY_NORMAL, &noop, 1, NULL) != 0) {
        raft__become_follower(r, r->term, 0); /* out of memory: let another node lead */
    }
}

/* Records a vote; returns +1 won, -1 lost, 0 pending (over the voters of r->conf). */
static int raft__poll(struct raft *r, raft_id id, bool granted)
{
    struct raft__progress *p = raft__progress_get(r, id);
    if (p != NULL && p->vote == RAFT__VOTE_NONE) {
        p->vote = granted ? RAFT__VOTE_GRANTED : RAFT__VOTE_REJECTED;
    }
    uint32_t yes = 0;
    uint32_t no = 0;
    for (uint32_t i = 0; i < r->n_prs; i++) {
        if (r->prs[i].learner) {
            continue; /* learners never count (thesis 4.2.1) */
        }
        yes += r->prs[i].vote == RAFT__VOTE_GRANTED;
        no += r->prs[i].vote == RAFT__VOTE_REJECTED;
    }
    uint32_t q = r->conf.n_voters / 2 + 1;
    RAFT_ASSERT(yes + no <= r->conf.n_voters);
    if (yes >= q) {
        return 1;
    }
    return (r->conf.n_voters - no < q) ? -1 : 0;
}

static void raft__campaign(struct raft *r, enum raft__campaign kind)
{
    uint8_t type = RAFT_MSG_VOTE;
    raft_term term = 0;
    if (kind == RAFT__CAMPAIGN_PRE) {
        raft__become_pre_candidate(r);
        type = RAFT_MSG_PRE_VOTE;
        term = r->term + 1; /* the term it would campaign in */
    } else {
        raft__become_candidate(r);
        term = r->term;
    }
    if (raft__poll(r, r->id, true) > 0) {
        if (kind == RAFT__CAMPAIGN_PRE) {
            raft__campaign(r, RAFT__CAMPAIGN_ELECTION);
        } else {
            raft__become_leader(r);
        }
        return;
    }
    raft_index last = raft__log_last_index(&r->log);
    raft_term last_term = raft__log_last_term(&r->log);
    for (uint32_t i = 0; i < r->conf.n_voters; i++) {
        if (r->conf.voters[i] == r->id) {
            continue;
        }
        struct raft_msg m = {.type = type,
                             .to = r->conf.voters[i],
                             .term = term,
                             .index = last,
                             .log_term = last_term,
                             .context = kind == RAFT__CAMPAIGN_TRANSFER ? 1 : 0};
        raft__send(r, &m);
    }
}

/* True if a conf change entry is committed but not yet applied (the node must not campaign:
 * it could count votes with an outdated configuration). */
static bool raft__conf_unapplied(struct raft *r)
{
    raft_index lo = r->log.applied + 1;
    struct raft__arena a = {0};
    bool found = false;
    while (lo <= r->log.committed && !found) {
        struct raft_entry *ents = NULL;
        size_t n = 0;
        if (raft__log_slice(&r->log, lo, r->log.committed + 1, 1u << 20, &a, false, &ents, &n) !=
                0 ||
            n == 0) {
            found = true; /* cannot tell: stay conservative */
            break;
        }
        for (size_t i = 0; i < n; i++) {
            found = found || ents[i].type == RAFT_ENTRY_CONF_CHANGE;
        }
        lo += n;
        raft__arena_reset(&a);
    }
    raft__arena_free(&a);
    return found;
}

void raft__hup(struct raft *r, bool transfer)
{
    if (r->role == RAFT_LEADER || !raft__promotable(r) || raft__conf_unapplied(r)) {
        return;
    }
    if (transfer) {
        /* thesis 3.10: the target of a transfer starts an election at once, skipping pre-vote */
        raft__campaign(r, RAFT__CAMPAIGN_TRANSFER);
    } else if (!r->cfg.disable_pre_vote) {
        raft__campaign(r, RAFT__CAMPAIGN_PRE);
    } else {
        raft__campaign(r, RAFT__CAMPAIGN_ELECTION);
    }
}

/* ---- replication (leader) ---- */

/* Entries [lo, hi) for an APPEND, copied once per outbox and shared between followers. */
static int raft__msg_entries(struct raft *r, raft_index lo, raft_index hi, struct raft_entry **out,
                             size_t *n)
{
    RAFT_ASSERT(lo < hi);
    if (r->mcache == NULL || lo < r->mcache_lo || lo >= r->mcache_hi) {
        size_t k = 0;
        int rv = raft__log_slice(&r->log, lo, hi, r->cfg.max_msg_bytes, &r->out.arena, true,
                                 &r->mcache, &k);
        if (rv != 0) {
            r->mcache = NULL;
            return rv;
        }
        r->mcache_lo = lo;
        r->mcache_hi = lo + k;
    }
    RAFT_ASSERT(r->mcache_lo <= lo && lo < r->mcache_hi);
    struct raft_entry *e = r->mcache + (lo - r->mcache_lo);
    size_t avail = (size_t)((hi < r->mcache_hi ? hi : r->mcache_hi) - lo);
    size_t k = 0;
    size_t bytes = 0;
    while (k < avail && (k == 0 || bytes + e[k].data.len <= r->cfg.max_msg_bytes)) {
        bytes += e[k].data.len;
        k++;
    }
    *out = e;
    *n = k;
    return 0;
}

/* thesis 5.1 / 3.10 of etcd's design: a follower behind the first stored index gets a snapshot */
static bool raft__send_snapshot(struct raft *r, struct raft__progress *p)
{
    if (!p->recent_active) {
        return false;
    }
    struct raft_snapshot s;
    const struct raft_storage *st = r->log.st;
    if (st->snapshot(st->ctx, &s) != 0 || s.meta.index == 0) {
        return false;
    }
    if (s.data.len > 0) {
        void *d = raft__arena_alloc(&r->out.arena, s.data.len);
        if (d == NULL) {
            return false;
        }
        memcpy(d, s.data.base, s.data.len);
        s.data.base = d;
    }
    struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT, .to = p->id, .snapshot = s};
    raft__send(r, &m);
    raft__progress_become_snapshot(p, s.meta.index);
    return true;
}

/* thesis 3.5: AppendEntries with the preceding entry's index and term. Returns true if sent. */
static bool raft__send_append(struct raft *r, struct raft__progress *p, bool send_if_empty)
{
    RAFT_ASSERT(r->role == RAFT_LEADER && p->id != r->id && p->next > 0);
    if (raft__progress_paused(p)) {
        return false;
    }
    raft_index last = raft__log_last_index(&r->log);
    raft_term prev_term = 0;
    struct raft_entry *ents = NULL;
    size_t n = 0;
    int rv = raft__log_term(&r->log, p->next - 1, &prev_term);
    if (rv == 0 && p->next <= last) {
        rv = raft__msg_entries(r, p->next, last + 1, &ents, &n);
    }
    if (rv == RAFT_ECOMPACTED) {
        return raft__send_snapshot(r, p);
    }
    if (rv != 0 || (n == 0 && !send_if_empty)) {
        return false;
    }
    struct raft_msg m = {.type = RAFT_MSG_APPEND,
                         .to = p->id,
                         .index = p->next - 1,
                         .log_term = prev_term,
                         .commit = r->log.committed,
                         .n_entries = n,
                         .entries = ents};
    raft__send(r, &m);
    raft__progress_sent(p, n > 0 ? ents[n - 1].index : 0, n);
    return true;
}

void raft__bcast_append(struct raft *r)
{
    for (uint32_t i = 0; i < r->n_prs; i++) {
        if (r->prs[i].id != r->id) {
            raft__send_append(r, &r->prs[i], true);
        }
    }
}

void raft__bcast_heartbeat_ctx(struct raft *r, uint64_t ctx)
{
    for (uint32_t i = 0; i < r->n_prs; i++) {
        struct raft__progress *p = &r->prs[i];
        if (p->id == r->id) {
            continue;
        }
        /* never tell a follower to commit past what it is known to hold */
        raft_index commit = p->match < r->log.committed ? p->match : r->log.committed;
        struct raft_msg m = {
            .type = RAFT_MSG_HEARTBEAT, .to = p->id, .commit = commit, .context = ctx};
        raft__send(r, &m);
    }
}

static void raft__bcast_heartbeat(struct raft *r)
{
    raft__bcast_heartbeat_ctx(r, raft__read_heartbeat_context(r));
}

/* thesis 3.6.2: the commit index is the highest index stored on a majority of voters, and only
 * an entry of the current term commits by counting (checked in raft__log_maybe_commit). */
bool raft__maybe_commit(struct raft *r)
{
    RAFT_ASSERT(r->role == RAFT_LEADER);
    uint64_t match[RAFT_MEMBERS_MAX];
    size_t n = 0;
    for (uint32_t i = 0; i < r->n_prs; i++) {
        if (!r->prs[i].learner) {
            match[n++] = r->prs[i].match;
        }
    }
    if (!raft__log_maybe_commit(&r->log, raft__quorum_value(match, n), r->term)) {
        return false;
    }
    raft__read_on_term_commit(r);
    return true;
}

/* thesis 10.2.1: the leader writes its log in parallel with replicating it; its own copy counts
 * towards a commit once durable, like a follower's acknowledgement. */
void raft__self_persisted(struct raft *r, raft_index i, raft_term t)
{
    if (r->role != RAFT_LEADER || !raft__log_match_term(&r->log, i, t)) {
        return;
    }
    struct raft__progress *self = raft__progress_get(r, r->id);
    if (self == NULL || !raft__progress_maybe_update(self, i)) {
        return;
    }
    if (raft__maybe_commit(r)) {
        raft__bcast_append(r);
    }
}

int raft__append_entries(struct raft *r, uint8_t type, const struct raft_buf *data, size_t n,
                         raft_index *first)
{
    RAFT_ASSERT(r->role == RAFT_LEADER && n > 0);
    size_t bytes = 0;
    for (size_t i = 0; i < n; i++) {
        if (data[i].len > r->cfg.max_entry_bytes) {
            return RAFT_ETOOBIG;
        }
        bytes += data[i].len;
    }
    /* bound on uncommitted data; an empty entry (the no-op) and a first proposal always pass */
    if (r->uncommitted_bytes > 0 && bytes > 0 &&
        r->uncommitted_bytes + bytes > r->cfg.max_uncommitted_bytes) {
        return RAFT_EBUDGET;
    }
    raft_index idx = 0;
    int rv = raft__log_append_new(&r->log, r->term, type, data, n, &idx);
    if (rv != 0) {
        return rv;
    }
    r->uncommitted_bytes += bytes;
    /* the leader's own match moves when the host reports the append durable
     * (raft__self_persisted), so the entries go out now and commit on durable copies only */
    raft__bcast_append(r);
    if (first != NULL) {
        *first = idx;
    }
    return 0;
}

static void raft__send_timeout_now(struct raft *r, raft_id to)
{
    struct raft_msg m = {.type = RAFT_MSG_TIMEOUT_NOW, .to = to};
    raft__send(r, &m);
}

static void raft__handle_append_reject(struct raft *r, struct raft__progress *p,
                                       const struct raft_msg *m)
{
    /* fast back-off: skip every entry whose term is above the follower's term at its hint */
    raft_index next_probe = m->reject_hint;
    if (m->log_term > 0) {
        raft_term t = 0;
        raft__log_find_conflict_by_term(&r->log, m->reject_hint, m->log_term, &next_probe, &t);
    }
    if (p->state == RAFT_PROGRESS_PROBE && m->index == p->next - 1 && m->reject_hint < p->match) {
        /* The probe we sent last, at or above the follower's acknowledged match, was rejected
         * by a log that ends below that match: it lost entries (its replica was deleted and
         * opened empty again, as after a replaced disk). Raft assumes a follower keeps what it
         * acknowledged, so the probe would never go below match and it would never catch up:
         * forget its match and probe from its log. Only the probe sent last counts (a replicate
         * state's rejection first falls back to a probe at match): rejections of pipelined
         * appends arrive reordered behind later acks, and taking each as a loss would reset the
         * follower again for every one of them. */
        raft__progress_become_probe(p);
        p->match = 0;
        p->next = next_probe + 1;
        p->probe_sent = false;
        raft__send_append(r, p, true);
        return;
    }
    if (raft__progress_maybe_decr_to(p, m->index, next_probe)) {
        if (p->state == RAFT_PROGRESS_REPLICATE) {
            raft__progress_become_probe(p);
        }
        raft__send_append(r, p, true);
    }
}

static void raft__handle_append_resp(struct raft *r, const struct raft_msg *m)
{
    struct raft__progress *p = raft__progress_get(r, m->from);
    if (p == NULL) {
        return;
    }
    RAFT_ASSERT(m->term == r->term); /* raft__step_term dropped the others */
    p->recent_active = true;
    if (m->reject) {
        raft__handle_append_reject(r, p, m);
        return;
    }
    bool was_paused = raft__progress_paused(p);
    if (!raft__progress_maybe_update(p, m->index) &&
        !(p->match == m->index && p->state == RAFT_PROGRESS_PROBE)) {
        return;
    }
    if (p->state == RAFT_PROGRESS_PROBE) {
        raft__progress_become_replicate(p);
    } else if (p->state == RAFT_PROGRESS_SNAPSHOT &&
               p->match + 1 >= raft__log_first_index(&r->log)) {
        /* the follower caught up (snapshot applied or entries still available) */
        raft__progress_become_probe(p);
        raft__progress_become_replicate(p);
    } else if (p->state == RAFT_PROGRESS_REPLICATE) {
        raft__inflights_free_to(&p->ins, m->index);
    }
    if (raft__maybe_commit(r)) {
        raft__bcast_append(r);
    } else if (was_paused) {
        raft__send_append(r, p, true);
    }
    while (raft__send_append(r, p, false)) {
    }
    /* thesis 3.10 step 2-3: once the target holds the whole log, tell it to start an election */
    if (m->from == r->transferee && p->match == raft__log_last_index(&r->log)) {
        raft__send_timeout_now(r, m->from);
    }
}

static void raft__handle_heartbeat_resp(struct raft *r, const struct raft_msg *m)
{
    struct raft__progress *p = raft__progress_get(r, m->from);
    if (p == NULL) {
        return;
    }
    p->recent_active = true;
    p->probe_sent = false;
    if (p->state == RAFT_PROGRESS_REPLICATE && raft__inflights_full(&p->ins)) {
        raft__inflights_free_first(&p->ins); /* lets one APPEND through if answers were lost */
    }
    if (p->match < raft__log_last_index(&r->log) || p->state == RAFT_PROGRESS_PROBE) {
        raft__send_append(r, p, true);
    }
    if (m->context != 0) {
        raft__read_on_ack(r, m->from, m->context);
    }
}

/* Answers the READ_INDEX m with a rejection (this node is not the leader, or could not queue it).
 */
static void raft__reject_read(struct raft *r, const struct raft_msg *m)
{
    struct raft_msg resp = {
        .type = RAFT_MSG_READ_INDEX_RESP, .to = m->from, .reject = true, .context = m->context};
    raft__send(r, &resp);
}

static int raft__step_leader(struct raft *r, const struct raft_msg *m)
{
    switch (m->type) {
    case RAFT_MSG_APPEND_RESP:
        raft__handle_append_resp(r, m);
        return 0;
    case RAFT_MSG_HEARTBEAT_RESP:
        raft__handle_heartbeat_resp(r, m);
        return 0;
    case RAFT_MSG_READ_INDEX:
        if (raft__read_leader(r, m->context, m->from) != 0) {
            raft__reject_read(r, m);
        }
        return 0;
    default:
        return 0; /* stale or misdirected in this term */
    }
}

/* ---- follower side ---- */

static void raft__append_resp(struct raft *r, raft_id to, raft_index index)
{
    struct raft_msg m = {.type = RAFT_MSG_APPEND_RESP, .to = to, .index = index};
    raft__send(r, &m);
}

static int raft__handle_append(struct raft *r, const struct raft_msg *m)
{
    RAFT_ASSERT(r->role == RAFT_FOLLOWER && r->lead == m->from && m->term == r->term);
    if (m->index < r->log.committed) {
        raft__append_resp(r, m->from, r->log.committed);
        return 0;
    }
    bool ok = false;
    raft_index last_new = 0;
    int rv = raft__log_maybe_append(&r->log, m->index, m->log_term, m->commit, m->entries,
                                    m->n_entries, &ok, &last_new);
    if (rv != 0) {
        return rv;
    }
    if (ok) {
        raft__append_resp(r, m->from, last_new);
        return 0;
    }
    /* thesis 3.5: reject, with a hint (our last index capped at the probe, and its term) that
     * lets the leader skip a whole term of mismatching entries at once */
    raft_index hint = raft__log_last_index(&r->log);
    if (m->index < hint) {
        hint = m->index;
    }
    raft_term hint_term = 0;
    raft__log_find_conflict_by_term(&r->log, hint, m->log_term, &hint, &hint_term);
    struct raft_msg resp = {.type = RAFT_MSG_APPEND_RESP,
                            .to = m->from,
                            .index = m->index,
                            .reject = true,
                            .reject_hint = hint,
                            .log_term = hint_term};
    raft__send(r, &resp);
    return 0;
}

static void raft__handle_heartbeat(struct raft *r, const struct raft_msg *m)
{
    raft_index last = raft__log_last_index(&r->log);
    raft__log_commit_to(&r->log, m->commit < last ? m->commit : last);
    struct raft_msg resp = {.type = RAFT_MSG_HEARTBEAT_RESP, .to = m->from, .context = m->context};
    raft__send(r, &resp);
}

/* Installs a snapshot unless it is old or our log already holds its last entry. */
static int raft__restore(struct raft *r, const struct raft_snapshot *s, bool *restored)
{
    *restored = false;
    if (s->meta.index <= r->log.committed) {
        return 0;
    }
    if (raft__conf_validate(&s->meta.conf) != 0) {
        return RAFT_EINVAL;
    }
    if (raft__log_match_term(&r->log, s->meta.index, s->meta.term)) {
        raft__log_commit_to(&r->log, s->meta.index); /* fast-forward: the log has it all */
        return 0;
    }
    int rv = raft__log_restore(&r->log, s);
    if (rv != 0) {
        return rv;
    }
    RAFT_ASSERT(r->log.committed == s->meta.index && r->log.u.offset == s->meta.index + 1);
    r->conf = s->meta.conf;
    r->conf_index = s->meta.index;
    raft__rebuild_progress(r);
    *restored = true;
    return 0;
}

static int raft__handle_snapshot(struct raft *r, const struct raft_msg *m)
{
    bool restored = false;
    int rv = raft__restore(r, &m->snapshot, &restored);
    if (rv != 0) {
        return rv;
    }
    raft__append_resp(r, m->from, restored ? raft__log_last_index(&r->log) : r->log.committed);
    return 0;
}

static int raft__step_follower(struct raft *r, const struct raft_msg *m)
{
    switch (m->type) {
    case RAFT_MSG_APPEND:
    case RAFT_MSG_HEARTBEAT:
    case RAFT_MSG_SNAPSHOT:
        r->election_elapsed = 0;
        r->leader_silent = 0;
        r->lead = m->from;
        if (m->type == RAFT_MSG_APPEND) {
            return raft__handle_append(r, m);
        }
        if (m->type == RAFT_MSG_HEARTBEAT) {
            raft__handle_heartbeat(r, m);
            return 0;
        }
        return raft__handle_snapshot(r, m);
    case RAFT_MSG_TIMEOUT_NOW:
        raft__hup(r, true);
        return 0;
    case RAFT_MSG_READ_INDEX:
        raft__reject_read(r, m);
        return 0;
    case RAFT_MSG_READ_INDEX_RESP:
        raft__read_fwd_resp(r, m);
        return 0;
    default:
        return 0;
    }
}

static int raft__step_candidate(struct raft *r, const struct raft_msg *m)
{
    uint8_t my_resp = r->role == RAFT_PRE_CANDIDATE ? RAFT_MSG_PRE_VOTE_RESP : RAFT_MSG_VOTE_RESP;
    switch (m->type) {
    case RAFT_MSG_APPEND:
    case RAFT_MSG_HEARTBEAT:
    case RAFT_MSG_SNAPSHOT:
        /* thesis 3.4: a candidate that hears from a leader of its term becomes its follower */
        raft__become_follower(r, m->term, m->from);
        return raft__step_follower(r, m);
    case RAFT_MSG_READ_INDEX:
        raft__reject_read(r, m);
        return 0;
    default:
        break;
    }
    if (m->type != my_resp) {
        return 0;
    }
    int res = raft__poll(r, m->from, !m->reject);
    if (res > 0) {
        if (r->role == RAFT_PRE_CANDIDATE) {
            raft__campaign(r, RAFT__CAMPAIGN_ELECTION);
        } else {
            raft__become_leader(r);
        }
    } else if (res < 0) {
        raft__become_follower(r, r->term, 0);
    }
    return 0;
}

int raft__step_role(struct raft *r, const struct raft_msg *m)
{
    RAFT_ASSERT(m->term >= r->term); /* raft__step_term dropped lower terms */
    switch (r->role) {
    case RAFT_LEADER:
        return raft__step_leader(r, m);
    case RAFT_FOLLOWER:
        return raft__step_follower(r, m);
    default:
        return raft__step_candidate(r, m);
    }
}

/* ---- ticks ---- */

/* thesis 6.2: a leader that did not hear from a majority within an election timeout steps down */
static bool raft__quorum_active(struct raft *r)
{
    uint32_t active = 0;
    for (uint32_t i = 0; i < r->n_prs; i++) {
        struct raft__progress *p = &r->prs[i];
        if (p->id == r->id) {
            active += !p->learner;
            continue;
        }
        active += p->recent_active && !p->learner;
        p->recent_active = false;
    }
    return active >= r->conf.n_voters / 2 + 1;
}

void raft__tick_impl(struct raft *r)
{
    if (r->role != RAFT_LEADER) {
        if (r->leader_silent < UINT_MAX) {
            r->leader_silent++;
        }
        /* thesis 3.4: a follower that hears nothing for an election timeout campaigns */
        r->election_elapsed++;
        if (raft__promotable(r) && r->election_elapsed >= r->randomized_timeout) {
            r->election_elapsed = 0;
            raft__hup(r, false);
        }
        return;
    }
    r->heartbeat_elapsed++;
    r->election_elapsed++;
    if (r->election_elapsed >= r->cfg.election_tick) {
        r->election_elapsed = 0;
        if (!r->cfg.disable_check_quorum && !raft__quorum_active(r)) {
            raft__become_follower(r, r->term, 0);
            return;
        }
        /* thesis 3.10: a transfer that did not finish within an election timeout is aborted */
        raft__abort_transfer(r);
    }
    if (r->heartbeat_elapsed >= r->cfg.heartbeat_tick) {
        r->heartbeat_elapsed = 0;
        raft__bcast_heartbeat(r);
    }
}
