/* read_only.c - ReadIndex (thesis 6.4): leader read rounds confirmed by heartbeats, forwarding. */
#include "raft_int.h"

/* Each pending read ends in exactly one read_state or read_failure, so reserving both arrays of
 * an outbox for every pending read means releasing or failing reads never needs memory. */
int raft__read_reserve(struct raft *r, struct raft__outbox *o, size_t extra)
{
    size_t need = r->n_reads + r->n_fwd + extra;
    int rv = raft__grow((void **)&o->reads, &o->cap_reads, o->n_reads + need, sizeof(*o->reads));
    if (rv == 0) {
        rv = raft__grow((void **)&o->fails, &o->cap_fails, o->n_fails + need, sizeof(*o->fails));
    }
    return rv;
}

static void raft__read_respond(struct raft *r, const struct raft__read *rd)
{
    if (rd->from == 0 || rd->from == r->id) {
        RAFT_ASSERT(r->out.n_reads < r->out.cap_reads); /* raft__read_reserve */
        struct raft_read_state *s = &r->out.reads[r->out.n_reads++];
        s->index = rd->index;
        s->context = rd->context;
        return;
    }
    struct raft_msg m = {.type = RAFT_MSG_READ_INDEX_RESP,
                         .to = rd->from,
                         .index = rd->index,
                         .context = rd->context};
    raft__send(r, &m);
}

static bool raft__read_single_voter(const struct raft *r)
{
    return r->conf.n_voters == 1 && r->conf.voters[0] == r->id;
}

/* A round's heartbeats leave with the next ready, so a read may join the latest round as long as
 * those heartbeats are still in the outbox: every answer then postdates the read. */
static uint64_t raft__round_new(struct raft *r)
{
    RAFT_ASSERT(r->role == RAFT_LEADER);
    r->read_round++;
    r->read_round_gen = r->out_gen;
    r->round_tick[r->read_round % RAFT__ROUND_TICKS] = r->ticks;
    return r->read_round;
}

static uint64_t raft__read_round(struct raft *r)
{
    RAFT_ASSERT(r->role == RAFT_LEADER);
    if (r->read_round != 0 && r->read_round_gen == r->out_gen) {
        return r->read_round;
    }
    uint64_t ctx = raft__round_new(r);
    raft__bcast_heartbeat_ctx(r, ctx);
    return ctx;
}

static bool raft__read_may_serve(struct raft *r)
{
#ifdef SLOTD_RAFT_BUG_READ_BEFORE_COMMIT
    return true;
#else
    /* thesis 6.4 step 1: the leader must have committed an entry of its term (its no-op) so that
     * its commit index is at least that of any previous leader */
    return raft__committed_in_term(r);
#endif
}

/* Makes room for one more read in the queue arr (n of *cap used, size bytes each) and for its
 * answer in r->out; RAFT_EREADFULL when the leader and forwarded queues hold read_queue_max. */
static int raft__read_admit(struct raft *r, void **arr, size_t *cap, size_t n, size_t size)
{
    if (r->n_reads + r->n_fwd >= r->cfg.read_queue_max) {
        return RAFT_EREADFULL;
    }
    int rv = raft__read_reserve(r, &r->out, 1);
    if (rv == 0) {
        rv = raft__grow(arr, cap, n + 1, size);
    }
    return rv;
}

int raft__read_leader(struct raft *r, uint64_t context, raft_id from)
{
    RAFT_ASSERT(r->role == RAFT_LEADER);
    int rv = raft__read_admit(r, (void **)&r->reads, &r->cap_reads, r->n_reads, sizeof(*r->reads));
    if (rv != 0) {
        return rv;
    }
    struct raft__read rd = {.context = context, .from = from};
    if (!raft__read_may_serve(r)) {
        r->reads[r->n_reads++] = rd; /* waits for the term commit (round 0) */
        return 0;
    }
    rd.index = r->log.committed;
    if (raft__read_single_voter(r)) {
        raft__read_respond(r, &rd);
        return 0;
    }
    /* thesis 6.4 step 2-3: record the commit index, then confirm leadership with a round of
     * heartbeats acknowledged by a majority */
    rd.round = raft__read_round(r);
    r->reads[r->n_reads++] = rd;
    return 0;
}

void raft__read_on_term_commit(struct raft *r)
{
    if (r->n_reads == 0 || r->reads[0].round != 0 || !raft__read_may_serve(r)) {
        return;
    }
    bool single = raft__read_single_voter(r);
    uint64_t round = single ? 0 : raft__read_round(r);
    for (size_t i = 0; i < r->n_reads; i++) {
        r->reads[i].index = r->log.committed;
        r->reads[i].round = round;
        if (single) {
            raft__read_respond(r, &r->reads[i]);
        }
    }
    if (single) {
        r->n_reads = 0;
    }
}

void raft__read_on_ack(struct raft *r, raft_id from, uint64_t round)
{
    struct raft__progress *p = raft__progress_get(r, from);
    if (p != NULL && round > p->read_ack && round <= r->read_round) {
        p->read_ack = round;
        /* a lease counts from when the acknowledged round left, never from the answer */
        if (r->read_round - round < RAFT__ROUND_TICKS) {
            uint64_t sent = r->round_tick[round % RAFT__ROUND_TICKS] + 1;
            if (sent > p->lease_tick) {
                p->lease_tick = sent;
            }
        }
    }
    if (r->n_reads == 0 || r->reads[0].round == 0) {
        return;
    }
    uint64_t acks[RAFT_MEMBERS_MAX];
    size_t n = 0;
    for (uint32_t i = 0; i < r->n_prs; i++) {
        if (!r->prs[i].learner) {
            acks[n++] = r->prs[i].id == r->id ? r->read_round : r->prs[i].read_ack;
        }
    }
    uint64_t confirmed = raft__quorum_value(acks, n);
    size_t k = 0;
    RAFT_ASSERT(confirmed <= r->read_round);
    while (k < r->n_reads && r->reads[k].round != 0 && r->reads[k].round <= confirmed) {
        raft__read_respond(r, &r->reads[k]);
        k++;
    }
    if (k > 0) {
        memmove(r->reads, r->reads + k, (r->n_reads - k) * sizeof(*r->reads));
        r->n_reads -= k;
    }
}

static void raft__read_fail(struct raft *r, uint64_t context, int err)
{
    RAFT_ASSERT(r->out.n_fails < r->out.cap_fails); /* raft__read_reserve */
    struct raft_read_failure *f = &r->out.fails[r->out.n_fails++];
    f->context = context;
    f->err = err;
}

void raft__read_fail_all(struct raft *r, int err)
{
    for (size_t i = 0; i < r->n_reads; i++) {
        /* reads forwarded by followers are dropped: the follower fails them itself when it
         * learns of the leader change or when they expire */
        if (r->reads[i].from == 0 || r->reads[i].from == r->id) {
            raft__read_fail(r, r->reads[i].context, err);
        }
    }
    r->n_reads = 0;
    for (size_t i = 0; i < r->n_fwd; i++) {
        raft__read_fail(r, r->fwd[i].context, err);
    }
    r->n_fwd = 0;
}

void raft__read_fwd_resp(struct raft *r, const struct raft_msg *m)
{
    for (size_t i = 0; i < r->n_fwd; i++) {
        if (r->fwd[i].context != m->context) {
            continue;
        }
        if (m->reject) {
            raft__read_fail(r, m->context, RAFT_ENOTLEADER);
        } else {
            RAFT_ASSERT(r->out.n_reads < r->out.cap_reads); /* raft__read_reserve */
            struct raft_read_state *s = &r->out.reads[r->out.n_reads++];
            s->index = m->index;
            s->context = m->context;
        }
        memmove(r->fwd + i, r->fwd + i + 1, (r->n_fwd - i - 1) * sizeof(*r->fwd));
        r->n_fwd--;
        return;
    }
}

/* Forwarded reads whose answer never came (lost message) fail after two election timeouts. */
void raft__read_tick(struct raft *r)
{
    size_t k = 0;
    while (k < r->n_fwd && r->fwd[k].deadline <= r->ticks) {
        raft__read_fail(r, r->fwd[k].context, RAFT_ENOLEADER);
        k++;
    }
    if (k > 0) {
        memmove(r->fwd, r->fwd + k, (r->n_fwd - k) * sizeof(*r->fwd));
        r->n_fwd -= k;
    }
}

uint64_t raft__read_heartbeat_context(struct raft *r)
{
    if (r->cfg.lease) {
        /* every heartbeat is a round, so that its answers renew the lease; pending reads are
         * confirmed by any later round's answers too */
        if (r->read_round != 0 && r->read_round_gen == r->out_gen) {
            return r->read_round;
        }
        return raft__round_new(r);
    }
    if (r->n_reads > 0 && r->reads[r->n_reads - 1].round != 0) {
        return r->read_round;
    }
    return 0;
}

unsigned raft__lease_ticks(const struct raft *r)
{
    return r->cfg.election_tick - 2 - r->cfg.lease_drift_ticks;
}

int raft_read_lease(const struct raft *r, raft_index *index, unsigned *ticks_left)
{
    RAFT_ASSERT(r != NULL);
    if (r->role != RAFT_LEADER) {
        return RAFT_ENOTLEADER;
    }
    if (!r->cfg.lease || r->cfg.disable_check_quorum || r->lease_off_term == r->term ||
        r->transferee != 0 || !raft__committed_in_term((struct raft *)r)) {
        return RAFT_ENOLEASE;
    }
    uint64_t acks[RAFT_MEMBERS_MAX];
    size_t n = 0;
    for (uint32_t i = 0; i < r->n_prs; i++) {
        if (!r->prs[i].learner) {
            acks[n++] = r->prs[i].id == r->id ? r->ticks + 1 : r->prs[i].lease_tick;
        }
    }
    uint64_t start = raft__quorum_value(acks, n); /* 1 + send tick a quorum acknowledged */
#ifdef SLOTD_RAFT_BUG_LEASE_EXPIRED
    start = start > 0 ? r->ticks + 1 : 0; /* the lease never runs out */
#endif
    if (start == 0) {
        return RAFT_ENOLEASE;
    }
    uint64_t end = start - 1 + raft__lease_ticks(r);
    if (r->ticks >= end) {
        return RAFT_ENOLEASE;
    }
    if (index != NULL) {
        *index = r->log.committed;
    }
    if (ticks_left != NULL) {
        *ticks_left = (unsigned)(end - r->ticks);
    }
    return 0;
}

static int raft__read_index(struct raft *r, uint64_t context)
{
    if (r->role == RAFT_LEADER) {
        return raft__read_leader(r, context, 0);
    }
    if (r->lead == 0) {
        return RAFT_ENOLEADER;
    }
    int rv = raft__read_admit(r, (void **)&r->fwd, &r->cap_fwd, r->n_fwd, sizeof(*r->fwd));
    if (rv != 0) {
        return rv;
    }
    struct raft__fwd_read *f = &r->fwd[r->n_fwd++];
    f->context = context;
    f->deadline = r->ticks + 2ull * r->cfg.election_tick;
    struct raft_msg m = {.type = RAFT_MSG_READ_INDEX, .to = r->lead, .context = context};
    raft__send(r, &m);
    return 0;
}

int raft_read_index(struct raft *r, uint64_t context)
{
    RAFT_ASSERT(r != NULL);
    int rv = raft__read_index(r, context);
    RAFT__CHECK_CALL(r, "raft_read_index");
    return rv;
}
