/* keylease.c - expiry of key leases (TTL keys) on each group's leader (loop thread): the
 * leader's own clock times every lease of the group's hash slots and proposes a LeaseExpire
 * entry when one runs out; the fsm (service/slot/lease.c) never reads a clock.
 *
 * Each leader keeps, per group it leads, the leases it has seen in a sorted array: id, the
 * index of the lease's last grant or keep-alive (refreshed_index) and a deadline on rt_now_ms().
 * Every RT_KEYLEASE_SCAN_MS it reads up to RT_KEYLEASE_SCAN_ROWS lease rows of the group's
 * owned hash slots from the applied state, resuming where the previous pass stopped (a group
 * with no lease only after a lease row was written, or every RT_KEYLEASE_IDLE_SCAN_MS). A lease
 * seen for the first time, or whose refreshed_index moved, gets the deadline now + its TTL;
 * a lease no longer stored is forgotten. A lease past its deadline gets a LeaseExpire carrying
 * the refreshed_index seen, which the fsm applies only if no keep-alive came after it.
 *
 * Why a lease never ends before TTL after the acknowledgement of its last grant or keep-alive:
 * the deadline is set when this leader's scan first sees that entry applied, which is after the
 * entry committed and so after the client sent it. A new leader starts with an empty array
 * (deadlines restart at its own scans, after its election), so its leases run at least TTL from
 * its first look; the fsm's refreshed_index check covers a keep-alive that commits while an
 * expiry is on its way. Leases can only last longer than TTL: by up to one scan period, more
 * while a pass needs several turns (many leases), and by up to TTL after a leader change. */
#include <stdlib.h>
#include <string.h>

#include "service/runtime/facts.h"
#include "service/runtime/keylease.h"
#include "service/runtime/request.h"
#include "service/slot/slot.h"

#define RT_KEYLEASE_SCAN_MS 500
/* A group whose last pass found no lease is scanned again only when the fsm committed a lease
 * row write (a grant or keep-alive, slot_fsm_lease_commits) or after this long (leases that
 * arrived by a snapshot or a hash-slot migration). */
#define RT_KEYLEASE_IDLE_SCAN_MS 5000
#define RT_KEYLEASE_SCAN_ROWS 4096u
#define RT_KEYLEASE_EXPIRE_PER_PASS 64u
#define RT_KEYLEASE_RETRY_MS 5000 /* an expiry that changed nothing is proposed again */
#define RT_KEYLEASE_CALL_MS 10000
static const char KEYLEASE_METHOD[] = "/slotd.internal.v1.LeaseExpire";

static void keylease_clear(struct rt_keylease *kl)
{
    free(kl->v);
    memset(kl, 0, sizeof(*kl));
}

void rt_keyleases_free(struct runtime *rt)
{
    for (size_t i = 0; i < RT_GROUPS_CAP; i++)
        keylease_clear(&rt->keyleases[i]);
}

/* The entry of id in the sorted array, or NULL. */
static struct rt_keylease_entry *find(struct rt_keylease *kl, uint64_t id)
{
    size_t lo = 0, hi = kl->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (kl->v[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < kl->n && kl->v[lo].id == id ? &kl->v[lo] : NULL;
}

struct pass {
    struct rt_keylease *kl;
    struct rt_keylease_entry *v; /* the rows of this pass, in id order */
    size_t n, cap;
    int64_t now;
    uint64_t last_id;
    int err;
};

static int on_lease(void *ctx, const struct slot_lease_info *l)
{
    struct pass *p = ctx;
    if (p->n == p->cap) {
        size_t cap = p->cap ? 2 * p->cap : 64;
        struct rt_keylease_entry *v = realloc(p->v, cap * sizeof(*v));
        if (v == NULL) {
            p->err = 1;
            return 1;
        }
        p->v = v;
        p->cap = cap;
    }
    struct rt_keylease_entry *e = &p->v[p->n++];
    const struct rt_keylease_entry *old = find(p->kl, l->id);
    if (old != NULL && old->refreshed == l->refreshed_index) {
        *e = *old;
    } else {
        e->id = l->id;
        e->refreshed = l->refreshed_index;
        e->deadline_ms = p->now + (int64_t)l->ttl_seconds * 1000;
        e->proposed_ms = 0;
    }
    p->last_id = l->id;
    return 0;
}

/* Replaces the entries with ids in [lo, hi] by the pass's rows. */
static int merge(struct rt_keylease *kl, struct pass *p, uint64_t lo, uint64_t hi)
{
    size_t before = 0, after = kl->n;
    while (before < kl->n && kl->v[before].id < lo)
        before++;
    while (after > before && kl->v[after - 1].id > hi)
        after--;
    size_t n = before + p->n + (kl->n - after);
    struct rt_keylease_entry *v = malloc((n ? n : 1) * sizeof(*v));
    if (v == NULL)
        return -1;
    if (before > 0)
        memcpy(v, kl->v, before * sizeof(*v));
    if (p->n > 0)
        memcpy(v + before, p->v, p->n * sizeof(*v));
    if (kl->n > after)
        memcpy(v + before + p->n, kl->v + after, (kl->n - after) * sizeof(*v));
    free(kl->v);
    kl->v = v;
    kl->n = n;
    return 0;
}

static void on_expire_reply(void *arg, int status, const char *message, const uint8_t *resp,
                            size_t resp_len, const uint8_t *details, size_t details_len)
{
    /* Nothing to do: an expiry that applied removed the row (the next scan forgets it); one
     * refused (refreshed, fenced, not leader) is looked at again by the next scans. */
    (void)arg, (void)status, (void)message, (void)resp, (void)resp_len, (void)details,
        (void)details_len;
}

static void propose_expire(struct runtime *rt, struct rt_group *g, struct rt_keylease_entry *e,
                           int64_t now)
{
    uint8_t *buf;
    size_t len;
    e->proposed_ms = now;
    if (slot_encode_lease_expire(e->id, e->refreshed, &buf, &len) != 0)
        return;
    struct rpc_call *call =
        rpc_call_new_local(KEYLEASE_METHOD, now + RT_KEYLEASE_CALL_MS, on_expire_reply, NULL);
    if (call != NULL) {
        struct slotd_error err;
        if (runtime_submit_propose(rt, g->id, buf, len, call, &err) != 0)
            rpc_call_fail(call, &err);
        else
            metrics_counter_add(rt->metrics.lease_expiries, 1);
    }
    free(buf);
}

/* One pass of group g (this replica leads it). */
static void pass_group(struct runtime *rt, struct rt_group *g, struct rt_keylease *kl, int64_t now)
{
    uint8_t owned[32], fenced[32];
    uint64_t task;
    rt_facts_published_slots(g, owned, fenced, &task);
    struct pass p = {.kl = kl, .now = now};
    unsigned hs = kl->cursor_hs;
    uint64_t from = kl->cursor_id;
    uint64_t lo = (uint64_t)hs << SLOT_LEASE_ID_SHIFT | from, hi = UINT64_MAX;
    bool more = false;
    for (; hs < 256 && p.err == 0; hs++, from = 0) {
        if (!((owned[hs / 8] >> (hs % 8)) & 1))
            continue;
        size_t budget = RT_KEYLEASE_SCAN_ROWS > p.n ? RT_KEYLEASE_SCAN_ROWS - p.n : 0;
        if (budget == 0) {
            more = true;
            break;
        }
        if (slot_lease_scan(rt->store, (uint16_t)hs, from, budget, on_lease, &p, &more) != 0)
            p.err = 1;
        if (more)
            break;
    }
    if (p.err == 0) {
        if (more) { /* p.n > 0: the budget ran out; the next pass resumes after the last row */
            hi = p.last_id;
            kl->cursor_hs = (uint16_t)(p.last_id >> SLOT_LEASE_ID_SHIFT);
            kl->cursor_id = (p.last_id & ((UINT64_C(1) << SLOT_LEASE_ID_SHIFT) - 1)) + 1;
        } else {
            kl->cursor_hs = 0;
            kl->cursor_id = 0;
        }
        if (merge(kl, &p, lo, hi) != 0)
            keylease_clear(kl); /* out of memory: start over (deadlines only move later) */
    }
    free(p.v);
    unsigned proposed = 0;
    for (size_t i = 0; i < kl->n && proposed < RT_KEYLEASE_EXPIRE_PER_PASS; i++) {
        struct rt_keylease_entry *e = &kl->v[i];
        if (e->deadline_ms > now ||
            (e->proposed_ms != 0 && now - e->proposed_ms < RT_KEYLEASE_RETRY_MS))
            continue;
        propose_expire(rt, g, e, now);
        proposed++;
    }
}

void rt_keylease_tick(struct runtime *rt, int64_t now)
{
    RT_ASSERT_LOOP(rt);
    uint64_t commits = slot_fsm_lease_commits(rt->fsm); /* before the scans it may cause */
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt) && i < RT_GROUPS_CAP; i++) {
        struct rt_group *g = &rt->groups[i];
        struct rt_keylease *kl = &rt->keyleases[i];
        bool leads = i != 0 && g->hosted && g->raft != NULL && g->role == RAFT_LEADER;
        if (!leads || kl->term != g->term) {
            keylease_clear(kl); /* a new leadership times every lease from its own look */
            if (!leads)
                continue;
            kl->term = g->term;
            kl->next_scan_ms = now;
        }
        bool written = commits != kl->seen_commits;
        if (now < kl->next_scan_ms || (kl->n == 0 && kl->cursor_hs == 0 && kl->cursor_id == 0 &&
                                       !written && now < kl->idle_until_ms))
            continue;
        kl->next_scan_ms = now + RT_KEYLEASE_SCAN_MS;
        kl->idle_until_ms = now + RT_KEYLEASE_IDLE_SCAN_MS;
        kl->seen_commits = commits;
        pass_group(rt, g, kl, now);
    }
}
