/* progress.c - a leader's view of each member: probe/replicate/snapshot states and inflights. */
#include "raft_int.h"

/* ---- inflights: a bounded window of APPENDs in flight (etcd's tracker/inflights.go) ---- */

bool raft__inflights_full(const struct raft__inflights *in)
{
    return in->count >= in->max;
}

/* Records an APPEND ending at `last`. If the ring cannot grow (out of memory) the APPEND is
 * not recorded: the window is advisory flow control, so this only loosens it. */
static void raft__inflights_add(struct raft__inflights *in, raft_index last)
{
    RAFT_ASSERT(in->count < in->max); /* the sender checked raft__progress_paused */
    RAFT_ASSERT(in->count == 0 || in->buf[(in->start + in->count - 1) % in->cap] < last);
    if (in->count == in->cap) {
        size_t ncap = in->cap ? in->cap * 2 : 8;
        if (ncap > in->max) {
            ncap = in->max;
        }
        raft_index *nb = malloc(ncap * sizeof(*nb));
        if (nb == NULL) {
            return;
        }
        for (size_t i = 0; i < in->count; i++) {
            nb[i] = in->buf[(in->start + i) % in->cap];
        }
        free(in->buf);
        in->buf = nb;
        in->cap = ncap;
        in->start = 0;
    }
    in->buf[(in->start + in->count) % in->cap] = last;
    in->count++;
}

void raft__inflights_free_to(struct raft__inflights *in, raft_index to)
{
    while (in->count > 0 && in->buf[in->start] <= to) {
        in->start = (in->start + 1) % in->cap;
        in->count--;
    }
    if (in->count == 0) {
        in->start = 0;
    }
}

void raft__inflights_free_first(struct raft__inflights *in)
{
    if (in->count > 0) {
        raft__inflights_free_to(in, in->buf[in->start]);
    }
}

static void raft__inflights_reset(struct raft__inflights *in)
{
    in->start = 0;
    in->count = 0;
}

/* ---- progress (etcd's tracker/progress.go) ---- */

void raft__progress_reset(struct raft__progress *p, raft_index last, bool self)
{
    RAFT_ASSERT(p->ins.max > 0);
    p->state = RAFT_PROGRESS_PROBE;
    p->probe_sent = false;
    p->match = self ? last : 0;
    p->next = last + 1;
    p->pending_snapshot = 0;
    p->read_ack = 0;
    p->lease_tick = 0;
    p->vote = RAFT__VOTE_NONE;
    raft__inflights_reset(&p->ins);
}

void raft__progress_free(struct raft__progress *p)
{
    free(p->ins.buf);
    p->ins.buf = NULL;
    p->ins.cap = 0;
    p->ins.count = 0;
    p->ins.start = 0;
}

bool raft__progress_paused(const struct raft__progress *p)
{
    switch (p->state) {
    case RAFT_PROGRESS_PROBE:
        return p->probe_sent;
    case RAFT_PROGRESS_REPLICATE:
        return raft__inflights_full(&p->ins);
    default:
        return true;
    }
}

static void raft__progress_reset_state(struct raft__progress *p, uint8_t state)
{
    p->probe_sent = false;
    p->pending_snapshot = 0;
    p->state = state;
    raft__inflights_reset(&p->ins);
}

void raft__progress_become_probe(struct raft__progress *p)
{
    /* after a snapshot, resume probing right after it (or after match if further) */
    if (p->state == RAFT_PROGRESS_SNAPSHOT) {
        raft_index ps = p->pending_snapshot;
        raft__progress_reset_state(p, RAFT_PROGRESS_PROBE);
        p->next = (p->match + 1 > ps + 1) ? p->match + 1 : ps + 1;
        return;
    }
    raft__progress_reset_state(p, RAFT_PROGRESS_PROBE);
    p->next = p->match + 1;
}

void raft__progress_become_replicate(struct raft__progress *p)
{
    RAFT_ASSERT(p->state != RAFT_PROGRESS_SNAPSHOT); /* a snapshot ends in probe first */
    raft__progress_reset_state(p, RAFT_PROGRESS_REPLICATE);
    p->next = p->match + 1;
}

void raft__progress_become_snapshot(struct raft__progress *p, raft_index snap_index)
{
    RAFT_ASSERT(snap_index > 0);
    raft__progress_reset_state(p, RAFT_PROGRESS_SNAPSHOT);
    p->pending_snapshot = snap_index;
}

/* An accepted APPEND_RESP for index n. Returns false if it was stale. */
bool raft__progress_maybe_update(struct raft__progress *p, raft_index n)
{
    bool updated = false;
    if (p->match < n) {
        p->match = n;
        updated = true;
        p->probe_sent = false;
    }
    if (p->next < n + 1) {
        p->next = n + 1;
    }
    RAFT_ASSERT(p->match < p->next);
    return updated;
}

/* A rejected APPEND for index `rejected`; match_hint is where the follower's log may match.
 * Returns false if the rejection is stale. */
bool raft__progress_maybe_decr_to(struct raft__progress *p, raft_index rejected,
                                  raft_index match_hint)
{
    if (p->state == RAFT_PROGRESS_REPLICATE) {
        if (rejected <= p->match) {
            return false; /* stale: we already know a higher match */
        }
        p->next = p->match + 1;
        return true;
    }
    if (p->next - 1 != rejected) {
        return false; /* not the probe we sent last */
    }
    raft_index n = match_hint + 1 < rejected ? match_hint + 1 : rejected;
    p->next = n > p->match + 1 ? n : p->match + 1;
    p->probe_sent = false;
    RAFT_ASSERT(p->match < p->next && p->next >= 1);
    return true;
}

/* An APPEND carrying entries up to `last` went out. */
void raft__progress_sent(struct raft__progress *p, raft_index last, size_t n_ents)
{
    if (p->state == RAFT_PROGRESS_REPLICATE) {
        if (n_ents > 0) {
            p->next = last + 1;
            raft__inflights_add(&p->ins, last);
        }
    } else if (p->state == RAFT_PROGRESS_PROBE) {
        p->probe_sent = true;
    }
}

uint64_t raft__quorum_value(uint64_t *vals, size_t n)
{
    RAFT_ASSERT(n <= RAFT_MEMBERS_MAX);
    if (n == 0) {
        return 0;
    }
    /* insertion sort, descending: n <= RAFT_MEMBERS_MAX */
    for (size_t i = 1; i < n; i++) {
        uint64_t v = vals[i];
        size_t j = i;
        while (j > 0 && vals[j - 1] < v) {
            vals[j] = vals[j - 1];
            j--;
        }
        vals[j] = v;
    }
    return vals[n / 2]; /* the (n/2 + 1)-th largest value */
}
