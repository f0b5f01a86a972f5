/* group.c - opening slot groups: bootstrap of an empty store, reload of the durable raft log at
 * restart. */
#include <stdlib.h>
#include <string.h>

#include "service/runtime/internal.h"
#include "store/keys.h"

static void conf_to_store(const struct raft_conf_state *in, struct store_conf_state *out)
{
    memset(out, 0, sizeof(*out));
    out->n_voters = in->n_voters;
    out->n_learners = in->n_learners;
    memcpy(out->voters, in->voters, in->n_voters * sizeof(uint64_t));
    memcpy(out->learners, in->learners, in->n_learners * sizeof(uint64_t));
}

static void conf_from_store(const struct store_conf_state *in, struct raft_conf_state *out)
{
    memset(out, 0, sizeof(*out));
    out->n_voters = in->n_voters;
    out->n_learners = in->n_learners;
    memcpy(out->voters, in->voters, in->n_voters * sizeof(uint64_t));
    memcpy(out->learners, in->learners, in->n_learners * sizeof(uint64_t));
}

size_t runtime_placement(const uint64_t *sorted_ids, size_t n, unsigned replicas, uint32_t group,
                         uint64_t *out)
{
    size_t r = replicas < n ? replicas : n;
    for (size_t i = 0; i < r; i++)
        out[i] = sorted_ids[(group - 1 + i) % n];
    return r;
}

static void group_conf(const struct runtime *rt, uint32_t id, struct raft_conf_state *cs)
{
    const struct route_group *rg = route_snapshot_group(rt->route_base, id);
    memset(cs, 0, sizeof(*cs));
    cs->n_voters = rg->n_voters;
    memcpy(cs->voters, rg->voters, rg->n_voters * sizeof(uint64_t));
}

/* Writes the first state of every group hosted here: membership = the
 * group's placement, entry 1 (term 1) = GroupInit with its hash-slot ranges,
 * commit 1. Every replica writes the identical entry, so logs match from the
 * start (etcd's bootstrap does the same with its initial conf entries). */
static int bootstrap(struct runtime *rt, char *err, size_t errlen)
{
    struct store_log_batch *b;
    int rc = store_log_batch_new(&b);
    if (rc != 0) {
        snprintf(err, errlen, "bootstrap: %s", store_strerror(rc));
        return -1;
    }
    for (size_t i = 0; i < rt->n_groups && rc == 0; i++) {
        uint32_t id = (uint32_t)(i + 1);
        if (!rt->groups[i].hosted)
            continue;
        uint8_t *data;
        size_t len;
        if (slot_encode_group_init(id, rt->route_base->slot_group, &data, &len) != 0) {
            rc = STORE_ENOMEM;
            break;
        }
        struct raft_conf_state rcs;
        group_conf(rt, id, &rcs);
        struct store_conf_state cs;
        conf_to_store(&rcs, &cs);
        struct store_entry e = {
            .index = 1, .term = 1, .type = RAFT_ENTRY_NORMAL, .data = data, .len = len};
        struct store_hard_state hs = {.term = 1, .vote = 0, .commit = 1};
        store_log_batch_put_conf_state(b, id, &cs);
        store_log_batch_put_entry(b, id, &e);
        store_log_batch_put_hard_state(b, id, &hs);
        free(data);
    }
    if (rc == 0)
        rc = store_log_write(rt->store, b, true);
    store_log_batch_free(b);
    if (rc != 0) {
        snprintf(err, errlen, "bootstrap: %s: %s", store_strerror(rc), store_errmsg(rt->store));
        return -1;
    }
    RT_LOG("info", "msg=\"bootstrapped slot groups\" node=%llu groups=%zu",
           (unsigned long long)rt->opts.node_id, rt->n_groups);
    rt->bootstrapped = true;
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

static int open_group(struct runtime *rt, struct rt_group *g, char *err, size_t errlen)
{
    struct raft_conf_state placed;
    group_conf(rt, g->id, &placed);
    if (raft_mem_storage_new(&g->mem) != 0) {
        snprintf(err, errlen, "group %u: out of memory", g->id);
        return -1;
    }
    int rc = slot_fsm_load_group(rt->fsm, g->id, &g->fsm_state);
    uint64_t applied = 0;
    if (rc == 0)
        rc = store_fsm_applied(rt->store, g->id, &applied);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: load fsm state: %s", g->id, store_strerror(rc));
        return -1;
    }
    if (load_log(rt, g, applied, err, errlen) != 0)
        return -1;
    struct raft_config cfg;
    raft_config_default(&cfg);
    cfg.id = rt->opts.node_id;
    cfg.storage = raft_mem_storage_get(g->mem);
    cfg.applied = applied;
    cfg.seed = rt->opts.seed * 1000003u + g->id;
    cfg.election_tick = rt->opts.election_tick;
    cfg.heartbeat_tick = rt->opts.heartbeat_tick;
    rc = raft_new(&cfg, &g->raft);
    if (rc != 0) {
        snprintf(err, errlen, "group %u: raft: %s", g->id, raft_strerror(rc));
        return -1;
    }
    g->applied = g->applied_submitted = applied;
    struct raft_status st;
    raft_status(g->raft, &st);
    g->apply_index = applied;
    g->apply_conf = st.conf;
    const struct raft_storage *s = cfg.storage;
    if (s->term(s->ctx, applied, &g->apply_term) != 0)
        g->apply_term = 0;
    /* A group whose only voter is this node need not wait for an election
     * timeout; on a fresh cluster the first voter of each group campaigns
     * after a few ticks (time for its peers to start listening), before any
     * election timeout, so initial leaders are spread like the placement. */
    if (st.conf.n_voters == 1 && st.conf.voters[0] == rt->opts.node_id)
        raft_campaign(g->raft);
    else if (rt->bootstrapped && placed.voters[0] == rt->opts.node_id)
        g->campaign_in_ticks = RT_FIRST_CAMPAIGN_TICKS;
    return 0;
}

int rt_groups_open(struct runtime *rt, char *err, size_t errlen)
{
    uint32_t *ids = NULL;
    size_t n = 0;
    int rc = store_log_groups(rt->store, &ids, &n);
    if (rc != 0) {
        snprintf(err, errlen, "list groups: %s", store_strerror(rc));
        return -1;
    }
    rt->groups = calloc(rt->n_groups, sizeof(*rt->groups));
    if (rt->groups == NULL) {
        free(ids);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t hosted = 0;
    for (size_t i = 0; i < rt->n_groups; i++) {
        struct rt_group *g = &rt->groups[i];
        const struct route_group *rg = route_snapshot_group(rt->route_base, (uint32_t)(i + 1));
        g->id = (uint32_t)(i + 1);
        for (size_t v = 0; v < rg->n_voters; v++)
            g->hosted = g->hosted || rg->voters[v] == rt->opts.node_id;
        hosted += g->hosted;
    }
    /* The stored groups must be exactly the ones the placement gives this node. */
    bool match = n == 0 || n == hosted;
    for (size_t i = 0; i < n && match; i++)
        match = ids[i] >= 1 && ids[i] <= rt->n_groups && rt->groups[ids[i] - 1].hosted;
    free(ids);
    if (!match) {
        snprintf(err, errlen,
                 "the data directory holds %zu slot groups that do not match this node's "
                 "placement (%zu of %zu groups with --slot-groups, --peers and --replicas as "
                 "given); start with the flags it was created with or a new data directory",
                 n, hosted, rt->n_groups);
        return -1;
    }
    if (n == 0 && bootstrap(rt, err, errlen) != 0)
        return -1;
    for (size_t i = 0; i < rt->n_groups; i++) {
        if (rt->groups[i].hosted && open_group(rt, &rt->groups[i], err, errlen) != 0)
            return -1;
    }
    return 0;
}

void rt_groups_close(struct runtime *rt)
{
    if (rt->groups == NULL)
        return;
    for (size_t i = 0; i < rt->n_groups; i++) {
        struct rt_group *g = &rt->groups[i];
        free(g->snap_recv.data);
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
