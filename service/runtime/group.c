/* group.c - opening slot groups: bootstrap of an empty store, reload of the durable raft log at
 * restart. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "service/runtime/facts.h"
#include "service/runtime/group.h"
#include "service/runtime/metrics.h"
#include "service/runtime/snapshot.h"
#include "service/runtime/watch.h"
#include "store/keys.h"

/* The raft core's and the store's membership have the same fields (STORE_MEMBERS_MAX ==
 * RAFT_MEMBERS_MAX, asserted below); one copy serves both directions. */
_Static_assert(sizeof(((struct store_conf_state *)0)->voters) ==
                   sizeof(((struct raft_conf_state *)0)->voters),
               "store and raft membership arrays differ");
#define CONF_COPY(in, out)                                                                         \
    do {                                                                                           \
        memset((out), 0, sizeof(*(out)));                                                          \
        (out)->n_voters = (in)->n_voters;                                                          \
        (out)->n_learners = (in)->n_learners;                                                      \
        memcpy((out)->voters, (in)->voters, (in)->n_voters * sizeof(uint64_t));                    \
        memcpy((out)->learners, (in)->learners, (in)->n_learners * sizeof(uint64_t));              \
    } while (0)

static void conf_to_store(const struct raft_conf_state *in, struct store_conf_state *out)
{
    CONF_COPY(in, out);
}

static void conf_from_store(const struct store_conf_state *in, struct raft_conf_state *out)
{
    CONF_COPY(in, out);
}

/* Writes a fresh group's first state, identical on every replica so logs match from the start
 * (etcd's bootstrap does the same): entries 1..n (term 1) add each voter (conf changes), entry
 * n+1 = data, all committed; the stored membership is already the n voters. A replica that
 * joins later through a task replays the log from index 1 and so rebuilds the membership from
 * empty; replicas that bootstrapped skip those entries (the voters are already there). */
int rt_group_bootstrap(struct runtime *rt, uint32_t id, const uint64_t *voters, size_t n_voters,
                       const uint8_t *data, size_t len, char *err, size_t errlen)
{
    struct store_log_batch *b;
    int rc = store_log_batch_new(&b);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: bootstrap: %s", id, store_strerror(rc));
        return -1;
    }
    struct raft_conf_state rcs;
    memset(&rcs, 0, sizeof(rcs));
    rcs.n_voters = n_voters;
    memcpy(rcs.voters, voters, n_voters * sizeof(uint64_t));
    struct store_conf_state cs;
    conf_to_store(&rcs, &cs);
    store_log_batch_put_conf_state(b, id, &cs);
    for (size_t i = 0; i < n_voters; i++) {
        struct raft_conf_change cc = {.type = RAFT_CC_ADD_VOTER, .node = voters[i]};
        uint8_t enc[RAFT_CONF_CHANGE_ENCODED_LEN];
        raft_conf_change_encode(&cc, enc);
        struct store_entry ce = {.index = i + 1,
                                 .term = 1,
                                 .type = RAFT_ENTRY_CONF_CHANGE,
                                 .data = enc,
                                 .len = sizeof(enc)};
        store_log_batch_put_entry(b, id, &ce);
    }
    struct store_entry e = {
        .index = n_voters + 1, .term = 1, .type = RAFT_ENTRY_NORMAL, .data = data, .len = len};
    struct store_hard_state hs = {.term = 1, .vote = 0, .commit = n_voters + 1};
    store_log_batch_put_entry(b, id, &e);
    store_log_batch_put_hard_state(b, id, &hs);
    rc = store_log_write(rt->store, b, true);
    store_log_batch_free(b);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: bootstrap: %s: %s", id, store_strerror(rc),
                 store_errmsg(rt->store));
        return -1;
    }
    RT_LOG("info", "msg=\"bootstrapped group\" node=%llu group=%u voters=%zu",
           (unsigned long long)rt->opts.node_id, id, n_voters);
    return 0;
}

static int append_cb(void *arg, const struct store_entry *e)
{
    struct raft_entry re = {
        .term = e->term, .index = e->index, .type = e->type, .data = {e->data, e->len}};
    return raft_mem_storage_append(arg, &re, 1) == 0 ? 0 : STORE_ENOMEM;
}

/* Rebuilds the group's in-memory log from the raftlog db. */
static int load_log(struct runtime *rt, struct rt_group *g, uint64_t applied, char *err,
                    size_t errlen)
{
    struct store_group_state st;
    int rc = store_log_load(rt->store, g->id, &st);
    if (rc == STORE_ENOTFOUND && applied == 0) {
        /* a replica joining through a task: the leader fills it */
        g->first_index = 1;
        g->stored_last = 0;
        return 0;
    }
    if (rc != 0) {
        snprintf(err, errlen, "group %u: load raft state: %s: %s", g->id, store_strerror(rc),
                 store_errmsg(rt->store));
        return -1;
    }
    if (st.has_snapshot) {
        struct raft_snapshot snap = {
            .meta = {.index = st.snapshot.index, .term = st.snapshot.term}};
        conf_from_store(&st.snapshot.conf, &snap.meta.conf);
        if (raft_mem_storage_apply_snapshot(g->mem, &snap) != 0) {
            snprintf(err, errlen, "group %u: bad snapshot metadata", g->id);
            return -1;
        }
        g->first_index = st.snapshot.index + 1;
    }
    struct raft_hard_state hs = {st.hs.term, st.hs.vote, st.hs.commit};
    /* Durable entries are applied as soon as they commit, possibly before the
     * batch carrying the new commit index syncs: applied entries were
     * committed, so the commit index is at least the applied index. */
    if (hs.commit < applied)
        hs.commit = applied;
    raft_mem_storage_set_hard_state(g->mem, &hs);
    if (st.has_conf) {
        struct raft_conf_state cs;
        conf_from_store(&st.conf, &cs);
        raft_mem_storage_set_conf_state(g->mem, &cs);
    }
    if (applied > st.last_index && (!st.has_snapshot || applied > st.snapshot.index)) {
        /* A crash between a snapshot's rows (synced first) and the raftlog batch
         * recording it: rebuild the position from the fsm's record of it. */
        uint8_t k[STORE_GROUP_META_KEY_LEN];
        void *v = NULL;
        size_t vl = 0;
        store_key_group_meta(k, g->id, SLOT_GROUP_META_SNAPSHOT);
        rc = store_fsm_get(rt->store, k, sizeof(k), &v, &vl);
        if (rc != 0 || vl != 17 || store_get_u64((uint8_t *)v + 1) != applied) {
            free(v);
            snprintf(err, errlen, "group %u: applied index %llu is past the raft log (last %llu)",
                     g->id, (unsigned long long)applied, (unsigned long long)st.last_index);
            return -1;
        }
        struct raft_snapshot snap = {
            .meta = {.index = applied, .term = store_get_u64((uint8_t *)v + 9)}};
        free(v);
        conf_from_store(&st.conf, &snap.meta.conf);
        raft_mem_storage_apply_snapshot(g->mem, &snap);
        raft_mem_storage_set_hard_state(g->mem, &hs);
        if (st.has_conf)
            raft_mem_storage_set_conf_state(g->mem, &snap.meta.conf);
        g->first_index = applied + 1;
        g->stored_last = applied;
        /* Record it now, as the interrupted batch would have. */
        struct store_log_batch *b;
        struct store_snapshot_meta m = {.index = applied, .term = snap.meta.term, .conf = st.conf};
        if (store_log_batch_new(&b) != 0) {
            snprintf(err, errlen, "group %u: out of memory", g->id);
            return -1;
        }
        store_log_batch_put_snapshot_meta(b, g->id, &m);
        if (st.last_index > 0)
            store_log_batch_delete_entries(b, g->id, st.first_index, st.last_index + 1);
        rc = store_log_write(rt->store, b, true);
        store_log_batch_free(b);
        if (rc != 0) {
            snprintf(err, errlen, "group %u: record snapshot position: %s", g->id,
                     store_errmsg(rt->store));
            return -1;
        }
        RT_LOG("warn",
               "msg=\"raft log position rebuilt from an installed snapshot\" group=%u index=%llu",
               g->id, (unsigned long long)applied);
        return 0;
    }
    if (st.last_index > 0) {
        rc = store_log_iterate(rt->store, g->id, st.first_index, st.last_index + 1, append_cb,
                               g->mem);
        if (rc != 0) {
            snprintf(err, errlen, "group %u: replay raft log: %s: %s", g->id, store_strerror(rc),
                     store_errmsg(rt->store));
            return -1;
        }
        if (!st.has_snapshot)
            g->first_index = st.first_index;
    }
    g->stored_last = st.last_index;
    return 0;
}

/* Opens g from the store: applied index `applied`, raft core, apply-stage position. A group
 * whose only voter is this node campaigns at once; with `campaign` (a fresh group whose preferred
 * leader is this node) it campaigns after a few ticks, before any election timeout, so initial
 * leaders follow the placement. */
static int open_group(struct runtime *rt, struct rt_group *g, uint64_t applied, bool campaign,
                      char *err, size_t errlen)
{
    if (raft_mem_storage_new(&g->mem) != 0) {
        snprintf(err, errlen, "group %u: out of memory", g->id);
        return -1;
    }
    if (load_log(rt, g, applied, err, errlen) != 0)
        goto err_after_mem;
    struct raft_config cfg;
    raft_config_default(&cfg);
    cfg.id = rt->opts.node_id;
    cfg.storage = raft_mem_storage_get(g->mem);
    cfg.applied = applied;
    cfg.seed = rt->opts.seed * 1000003u + g->id;
    cfg.election_tick = rt->opts.election_tick;
    cfg.heartbeat_tick = rt->opts.heartbeat_tick;
    cfg.lease = true; /* every node runs with leases (runtime_read_local) */
    /* A replica of a group this node held before: vote as that one would have. */
    struct store_tombstone tomb;
    int trc = store_log_load_tombstone(rt->store, g->id, &tomb);
    if (trc == 0) {
        cfg.vote_floor_index = tomb.floor_index;
        cfg.vote_floor_term = tomb.floor_term;
        const struct raft_storage *ms = cfg.storage;
        struct raft_hard_state hs;
        struct raft_conf_state cs;
        if (ms->initial_state(ms->ctx, &hs, &cs) == 0 && hs.term < tomb.term) {
            hs.term = tomb.term;
            hs.vote = tomb.vote;
            raft_mem_storage_set_hard_state(g->mem, &hs);
        }
    } else if (trc != STORE_ENOTFOUND) {
        snprintf(err, errlen, "group %u: load tombstone: %s: %s", g->id, store_strerror(trc),
                 store_errmsg(rt->store));
        goto err_after_mem;
    }
    int rc = raft_new(&cfg, &g->raft);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: raft: %s", g->id, raft_strerror(rc));
        goto err_after_mem;
    }
    g->applied = g->applied_submitted = applied;
    if (g->id != 0)
        rt_watch_reset(rt, g->id, applied, true);
    struct raft_status st;
    raft_status(g->raft, &st);
    g->apply_index = applied;
    g->apply_conf = st.conf;
    const struct raft_storage *s = cfg.storage;
    if (s->term(s->ctx, applied, &g->apply_term) != 0)
        g->apply_term = 0;
    if (st.conf.n_voters == 1 && st.conf.voters[0] == rt->opts.node_id)
        raft_campaign(g->raft);
    else if (campaign)
        g->campaign_in_ticks = RT_FIRST_CAMPAIGN_TICKS;
    rt_metrics_group_register(rt, g);
    atomic_store_explicit(&g->hosted, true, memory_order_release); /* after the rest of g */
    return 0;

err_after_mem:
    raft_mem_storage_free(g->mem);
    g->mem = NULL;
    return -1;
}

static bool stored_group(struct runtime *rt, uint32_t id, bool *out, char *err, size_t errlen)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    int rc = store_log_groups(rt->store, &ids, &n);
    if (rc != 0) {
        snprintf(err, errlen, "list groups: %s", store_strerror(rc));
        return false;
    }
    *out = false;
    for (size_t i = 0; i < n; i++)
        *out = *out || ids[i] == id;
    free(ids);
    return true;
}

int rt_group_open_placed(struct runtime *rt, struct rt_group *g, const uint64_t *peers,
                         size_t n_peers, const uint32_t slot_group[256], bool campaign, char *err,
                         size_t errlen)
{
    bool stored;
    if (!stored_group(rt, g->id, &stored, err, errlen))
        return -1;
    if (!stored) {
        uint8_t *data;
        size_t len;
        if (slot_encode_group_init(g->id, slot_group, &data, &len) != 0) {
            snprintf(err, errlen, "group %u: out of memory", g->id);
            return -1;
        }
        int rc = rt_group_bootstrap(rt, g->id, peers, n_peers, data, len, err, errlen);
        free(data);
        if (rc != 0)
            return -1;
    }
    if (stored && rt_snap_install_resume(rt, g, err, errlen) != 0) {
        /* Never serve half-installed rows: stop the node with the reason. */
        RT_LOG("fatal", "msg=\"cannot start: interrupted snapshot install\" err=\"%s\"", err);
        fprintf(stderr, "slotd: %s\n", err);
        fflush(NULL);
        _exit(1);
    }
    int rc = slot_fsm_load_group(rt->fsm, g->id, &g->fsm_state);
    uint64_t applied = 0;
    if (rc == 0)
        rt_facts_publish_slots(g);
    if (rc == 0)
        rc = store_fsm_applied(rt->store, g->id, &applied);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: load fsm state: %s", g->id, store_strerror(rc));
        return -1;
    }
    return open_group(rt, g, applied, campaign && !stored, err, errlen);
}

/* A replica added by a task (a replica move's target, a controller voter being promoted): no
 * bootstrap, no membership; the leader's entries or snapshot fill it once it is a learner. Its
 * rows left by an earlier replica of the group were deleted when that one was closed. */
int rt_group_open_joining(struct runtime *rt, struct rt_group *g, char *err, size_t errlen)
{
    uint64_t applied = 0;
    int rc = 0;
    if (g->id != 0) {
        rc = slot_fsm_load_group(rt->fsm, g->id, &g->fsm_state);
        if (rc == 0)
            rt_facts_publish_slots(g);
        if (rc == 0)
            rc = store_fsm_applied(rt->store, g->id, &applied);
    }
    if (rc != 0) {
        snprintf(err, errlen, "group %u: load fsm state: %s", g->id, store_strerror(rc));
        return -1;
    }
    return open_group(rt, g, applied, false, err, errlen);
}

int rt_group_open_ctl(struct runtime *rt, struct rt_group *g, uint64_t applied, char *err,
                      size_t errlen)
{
    bool stored;
    if (!stored_group(rt, 0, &stored, err, errlen))
        return -1;
    if (!stored) {
        snprintf(err, errlen,
                 "the data directory holds a cluster state but no controller raft log; it "
                 "belongs to a mirror node: start it with --join");
        return -1;
    }
    /* The first initial voter campaigns first on a fresh cluster. */
    bool fresh = applied == 0 && rt->opts.n_nodes > 0 && rt->opts.nodes[0].id == rt->opts.node_id;
    return open_group(rt, g, applied, fresh, err, errlen);
}

int rt_groups_open(struct runtime *rt, char *err, size_t errlen)
{
    rt->groups = calloc(RT_GROUPS_CAP, sizeof(*rt->groups));
    if (rt->groups == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < RT_GROUPS_CAP; i++)
        rt->groups[i].id = (uint32_t)i;
    return 0;
}

void rt_groups_close(struct runtime *rt)
{
    if (rt->groups == NULL)
        return;
    for (size_t i = 0; i < RT_GROUPS_CAP; i++) {
        struct rt_group *g = &rt->groups[i];
        rt_snap_recv_discard(&g->snap_recv);
        if (!g->hosted)
            continue;
        raft_free(g->raft);
        raft_mem_storage_free(g->mem);
        struct rt_read_round *r = g->rounds;
        while (r != NULL) {
            struct rt_read_round *next = r->next;
            free(r);
            r = next;
        }
    }
    free(rt->groups);
    rt->groups = NULL;
}
