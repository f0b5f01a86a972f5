/* group.c - opening slot groups: bootstrap of an empty store, reload of the durable raft log at restart. */
#include <stdlib.h>
#include <string.h>

#include "service/runtime/internal.h"

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

/* Writes every group's first state: membership {this node}, entry 1 (term 1)
 * = GroupInit with its hash-slot ranges, commit 1. Every replica of a group
 * would write the identical entry, so logs match from the start (etcd's
 * bootstrap does the same with its initial conf entries). */
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
        uint8_t *data;
        size_t len;
        if (slot_encode_group_init(id, rt->route_base->slot_group, &data, &len) != 0) {
            rc = STORE_ENOMEM;
            break;
        }
        struct raft_conf_state rcs = {.n_voters = 1, .voters = {rt->opts.node_id}};
        struct store_conf_state cs;
        conf_to_store(&rcs, &cs);
        struct store_entry e = {.index = 1, .term = 1, .type = RAFT_ENTRY_NORMAL,
                                .data = data, .len = len};
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
    return 0;
}

static int append_cb(void *arg, const struct store_entry *e)
{
    struct raft_entry re = {.term = e->term, .index = e->index, .type = e->type,
                            .data = {e->data, e->len}};
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
        struct raft_snapshot snap = {.meta = {.index = st.snapshot.index,
                                              .term = st.snapshot.term}};
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
    if (st.last_index > 0) {
        rc = store_log_iterate(rt->store, g->id, st.first_index, st.last_index + 1, append_cb,
                               g->mem);
        if (rc != 0) {
            snprintf(err, errlen, "group %u: replay raft log: %s: %s", g->id,
                     store_strerror(rc), store_errmsg(rt->store));
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
    /* A group whose only voter is this node need not wait for an election timeout. */
    if (st.conf.n_voters == 1 && st.conf.voters[0] == rt->opts.node_id)
        raft_campaign(g->raft);
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
    free(ids);
    if (n == 0 && bootstrap(rt, err, errlen) != 0)
        return -1;
    if (n != 0 && n != rt->n_groups) {
        snprintf(err, errlen,
                 "the data directory holds %zu slot groups but --slot-groups is %zu; "
                 "start with --slot-groups %zu or a new data directory",
                 n, rt->n_groups, n);
        return -1;
    }
    rt->groups = calloc(rt->n_groups, sizeof(*rt->groups));
    if (rt->groups == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    for (size_t i = 0; i < rt->n_groups; i++) {
        rt->groups[i].id = (uint32_t)(i + 1);
        if (open_group(rt, &rt->groups[i], err, errlen) != 0)
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
