/* sim_node.c - one replica's host loop (ready, fake disk sync, send, apply, advance), crash,
 * restart. */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static const uint64_t SIM__SM_MAGIC = 0x53494d534d303031ull; /* "SIMSM001" */

static void sim__put_u64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t sim__get_u64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 0; i < 8; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void sim__sm_encode(const struct sim_sm *sm, uint8_t out[SIM_SM_ENCODED_LEN])
{
    sim__put_u64(out, SIM__SM_MAGIC);
    sim__put_u64(out + 8, sm->applied);
    sim__put_u64(out + 16, sm->hash);
    for (int k = 0; k < SIM_KV_KEYS; k++)
        sim__put_u64(out + 24 + 8 * k, sm->kv_index[k]);
}

int sim__sm_decode(const void *data, size_t len, struct sim_sm *out)
{
    const uint8_t *p = data;
    if (len != SIM_SM_ENCODED_LEN || sim__get_u64(p) != SIM__SM_MAGIC)
        return SIM_EINVAL;
    out->applied = sim__get_u64(p + 8);
    out->hash = sim__get_u64(p + 16);
    for (int k = 0; k < SIM_KV_KEYS; k++)
        out->kv_index[k] = sim__get_u64(p + 24 + 8 * k);
    return SIM_OK;
}

uint64_t sim__entry_hash(const struct raft_entry *e)
{
    uint64_t h = 0xcbf29ce484222325ull ^ e->type;
    const uint8_t *p = e->data.base;
    for (size_t i = 0; i < e->data.len; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    return sim_mix64(h ^ e->data.len);
}

static void sim__ring_push(struct sim_replica *rep)
{
    rep->ring[rep->ring_head] = rep->sm;
    rep->ring_head = (rep->ring_head + 1) % SIM_SM_RING;
    if (rep->ring_n < SIM_SM_RING)
        rep->ring_n++;
}

static void sim__conf_push(struct sim_replica *rep, raft_index index,
                           const struct raft_conf_state *cs)
{
    if (rep->n_confs == SIM_CONF_HIST) {
        memmove(&rep->confs[0], &rep->confs[1], (SIM_CONF_HIST - 1) * sizeof(rep->confs[0]));
        rep->n_confs--;
    }
    rep->confs[rep->n_confs].index = index;
    rep->confs[rep->n_confs].conf = *cs;
    rep->n_confs++;
}

const struct raft_conf_state *sim__replica_conf_at(const struct sim_replica *rep, raft_index index)
{
    for (unsigned i = rep->n_confs; i > 0; i--)
        if (rep->confs[i - 1].index <= index)
            return &rep->confs[i - 1].conf;
    return NULL;
}

/* Resets the in-memory state machine to sm (restart or snapshot install). */
static void sim__replica_reset_sm(struct sim_replica *rep, const struct sim_sm *sm,
                                  const struct raft_conf_state *cs)
{
    rep->sm = *sm;
    rep->ring_n = rep->ring_head = 0;
    sim__ring_push(rep);
    rep->n_confs = 0;
    sim__conf_push(rep, sm->applied, cs);
}

static void sim__defer(struct sim_cluster *c, unsigned node, unsigned group, bool create)
{
    if (c->n_deferred == SIM_DEFERRED_MAX)
        return; /* bounded: the replica is then created/destroyed by no one, still safe */
    c->deferred[c->n_deferred++] =
        (struct sim_deferred){.node = (uint8_t)node, .group = (uint8_t)group, .create = create};
}

/* The cluster "controller": the first node to apply a membership change creates the new
 * replica or destroys the removed one (the removed node may never learn of its removal). */
static void sim__conf_effects(struct sim_cluster *c, unsigned group, raft_index index,
                              const struct raft_entry *e)
{
    struct raft_conf_change cc;
    if (raft_conf_change_decode(e->data.base, e->data.len, &cc) != RAFT_OK || cc.node == 0 ||
        cc.node > c->opt.n_nodes)
        return;
    struct sim_replica *target = sim__rep(c, (unsigned)cc.node - 1, group);
    if (index <= target->cc_handled)
        return;
    target->cc_handled = index;
    if (cc.type == RAFT_CC_ADD_LEARNER || cc.type == RAFT_CC_ADD_VOTER)
        sim__defer(c, (unsigned)cc.node - 1, group, true);
    else if (cc.type == RAFT_CC_REMOVE)
        sim__defer(c, (unsigned)cc.node - 1, group, false);
}

/* A conf change must be applied to the configuration it was committed against. If the core
 * restored a newer snapshot (raft_step between raft_ready and raft_advance) while this entry
 * waited in the outstanding ready, its configuration is already the snapshot's: the core must
 * treat the entry as covered (return 0 and leave the configuration alone). Anything else is a
 * violation. Returns true when the entry was such a covered one. */
static bool sim__conf_behind_snapshot(struct sim_cluster *c, unsigned node, unsigned group,
                                      const struct raft_entry *e)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    struct raft_status st;
    raft_status(rep->core, &st);
    if (st.first_index <= e->index)
        return false;
    struct raft_conf_state after;
    int rc = raft_apply_conf_change(rep->core, e, &after);
    if (rc != RAFT_OK || after.n_voters != st.conf.n_voters ||
        after.n_learners != st.conf.n_learners ||
        memcmp(after.voters, st.conf.voters, st.conf.n_voters * sizeof(raft_id)) != 0 ||
        memcmp(after.learners, st.conf.learners, st.conf.n_learners * sizeof(raft_id)) != 0)
        sim__fail(c,
                  "node %u group %u: conf change %llu was handed out in a ready, but before it "
                  "was applied the core restored snapshot %llu (%u voters, %u learners); "
                  "raft_apply_conf_change(%llu) returned %s and changed the configuration",
                  node + 1, group, (unsigned long long)e->index,
                  (unsigned long long)st.first_index - 1, st.conf.n_voters, st.conf.n_learners,
                  (unsigned long long)e->index, raft_strerror(rc));
    return true;
}

static void sim__replica_apply(struct sim_cluster *c, unsigned node, unsigned group,
                               const struct raft_entry *e)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    if (e->index != rep->sm.applied + 1) {
        sim__fail(c, "node %u group %u: committed entry %llu handed out after applied %llu",
                  node + 1, group, (unsigned long long)e->index,
                  (unsigned long long)rep->sm.applied);
        return;
    }
    sim__check_apply(c, node, group, e);
    rep->sm.hash = sim__sm_hash_step(rep->sm.hash, e->index, e->term, sim__entry_hash(e));
    rep->sm.applied = e->index;
    const uint8_t *d = e->data.base;
    if (e->type == RAFT_ENTRY_NORMAL && e->data.len >= SIM_OP_HDR && d[9] == SIM_OP_PUT)
        rep->sm.kv_index[d[10] % SIM_KV_KEYS] = e->index;
    sim__ring_push(rep);
    if (e->type == RAFT_ENTRY_CONF_CHANGE) {
        struct raft_conf_state cs;
        if (sim__conf_behind_snapshot(c, node, group, e))
            return;
        int rc = raft_apply_conf_change(rep->core, e, &cs);
        if (rc != RAFT_OK) {
            sim__fail(c, "node %u group %u: raft_apply_conf_change(index %llu) returned %s",
                      node + 1, group, (unsigned long long)e->index, raft_strerror(rc));
            return;
        }
        sim__conf_push(rep, e->index, &cs);
        sim__trace(c, "n%u g%u applies conf change at %llu: %u voters, %u learners", node + 1,
                   group, (unsigned long long)e->index, cs.n_voters, cs.n_learners);
        sim__conf_effects(c, group, e->index, e);
    }
    sim__workload_on_apply(c, node, group, e);
}

static void sim__replica_reads(struct sim_cluster *c, unsigned node, unsigned group,
                               const struct raft_ready *rd)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    for (size_t i = 0; i < rd->n_reads; i++)
        for (unsigned j = 0; j < rep->n_reads; j++)
            if (rep->reads[j].ctx == rd->reads[i].context && !rep->reads[j].has_index) {
                rep->reads[j].index = rd->reads[i].index;
                rep->reads[j].has_index = true;
            }
    for (size_t i = 0; i < rd->n_read_failures; i++)
        for (unsigned j = 0; j < rep->n_reads; j++)
            if (rep->reads[j].ctx == rd->read_failures[i].context) {
                rep->reads[j] = rep->reads[--rep->n_reads];
                c->cnt.read_failures++;
                break;
            }
    /* thesis 6.4: serve once the state machine has applied up to the read index */
    for (unsigned j = 0; j < rep->n_reads && !c->failed;) {
        struct sim_read *r = &rep->reads[j];
        if (r->has_index && r->index <= rep->sm.applied) {
            sim__check_read(c, node, group, r);
            if (r->lease)
                c->cnt.lease_reads++;
            else
                c->cnt.reads++;
            *r = rep->reads[--rep->n_reads];
        } else {
            j++;
        }
    }
}

/* Steps 3-5 of the host contract, once the ready is durable. */
static void sim__replica_finish(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    struct raft_ready *rd = &rep->rd;
    for (size_t i = rep->msgs_sent; i < rd->n_msgs && !c->failed; i++)
        sim__net_send(c, group, &rd->msgs[i]);
    for (size_t i = 0; i < rd->n_committed && !c->failed; i++)
        sim__replica_apply(c, node, group, &rd->committed[i]);
    if (c->failed)
        return;
    sim__replica_reads(c, node, group, rd);
    raft_advance(rep->core, rd);
    rep->ready_out = false;
}

/* Step 2 of the host contract: the pending write becomes durable on the fake disk. */
static void sim__replica_persist(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    struct raft_ready *rd = &rep->rd;
    int rc;
    if (rd->has_snapshot) {
        struct sim_sm sm;
        if (sim__sm_decode(rd->snapshot.data.base, rd->snapshot.data.len, &sm) != SIM_OK) {
            sim__fail(c, "node %u group %u: snapshot %llu carries no valid state machine", node + 1,
                      group, (unsigned long long)rd->snapshot.meta.index);
            return;
        }
        sim__check_snapshot(c, node, group, &rd->snapshot, &sm);
        rc = raft_mem_storage_apply_snapshot(rep->disk, &rd->snapshot);
        if (rc != RAFT_OK) {
            sim__fail(c, "node %u group %u: installing snapshot %llu: %s", node + 1, group,
                      (unsigned long long)rd->snapshot.meta.index, raft_strerror(rc));
            return;
        }
        raft_mem_storage_set_conf_state(rep->disk, &rd->snapshot.meta.conf);
        sim__replica_reset_sm(rep, &sm, &rd->snapshot.meta.conf);
        c->cnt.snapshots++;
        sim__trace(c, "n%u g%u installs snapshot index=%llu term=%llu (%u voters %u learners)",
                   node + 1, group, (unsigned long long)rd->snapshot.meta.index,
                   (unsigned long long)rd->snapshot.meta.term, rd->snapshot.meta.conf.n_voters,
                   rd->snapshot.meta.conf.n_learners);
    }
    sim__check_persist(c, node, group, rd);
    if (c->failed)
        return;
    if (rd->has_hard_state) {
        raft_mem_storage_set_hard_state(rep->disk, &rd->hard_state);
        rep->durable_commit = rd->hard_state.commit;
    }
    if (rd->n_entries) {
        rc = raft_mem_storage_append(rep->disk, rd->entries, rd->n_entries);
        if (rc != RAFT_OK) {
            sim__fail(c, "node %u group %u: appending %zu entries at %llu: %s", node + 1, group,
                      rd->n_entries, (unsigned long long)rd->entries[0].index, raft_strerror(rc));
            return;
        }
    }
    sim__check_after_persist(c, node, group, rd);
}

void sim__replica_pump(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    for (unsigned loops = 0; loops < SIM_READY_LOOPS_MAX; loops++) {
        if (c->failed || rep->core == NULL)
            return;
        sim__check_observe(c, node, group);
        sim__check_core(c, node, group); /* after every input, so a failure names the input */
        if (c->failed || rep->ready_out || !raft_has_ready(rep->core))
            return;
        int rc = raft_ready(rep->core, &rep->rd);
        if (rc == RAFT_ENOMEM)
            return;
        if (rc != RAFT_OK) {
            sim__fail(c, "node %u group %u: raft_ready returned %s", node + 1, group,
                      raft_strerror(rc));
            return;
        }
        rep->ready_seq++;
        rep->ready_out = true;
        rep->msgs_sent = 0;
        if (rep->rd.has_snapshot || rep->rd.has_hard_state || rep->rd.n_entries) {
            /* contract step 3: the early messages leave while the write is pending; a crash
             * before the sync loses the write but not them */
            for (; rep->msgs_sent < rep->rd.n_msgs_early && !c->failed; rep->msgs_sent++)
                sim__net_send(c, group, &rep->rd.msgs[rep->msgs_sent]);
            struct sim_event ev = {.kind = SIM_EV_SYNC,
                                   .node = (uint8_t)node,
                                   .group = (uint8_t)group,
                                   .inc = rep->inc,
                                   .ready_seq = rep->ready_seq};
            ev.time = c->now + sim_rand_below(&c->rand, c->sync_max_ms + 1);
            if (sim__heap_push(c, &ev) != SIM_OK)
                sim__fail(c, "event heap full (%u events)", SIM_EVENTS_MAX);
            return;
        }
        sim__replica_finish(c, node, group); /* nothing to persist: messages go out now */
    }
}

void sim__replica_sync(struct sim_cluster *c, const struct sim_event *ev)
{
    struct sim_replica *rep = sim__rep(c, ev->node, ev->group);
    if (!c->nodes[ev->node].up || rep->core == NULL || rep->inc != ev->inc || !rep->ready_out ||
        rep->ready_seq != ev->ready_seq)
        return; /* the write was lost in a crash */
    sim__replica_persist(c, ev->node, ev->group);
    if (c->failed)
        return;
    sim__replica_finish(c, ev->node, ev->group);
    sim__replica_pump(c, ev->node, ev->group);
}

/* Builds the core from the synced disk; the state machine restarts from the disk's snapshot
 * and the core re-delivers committed entries above it. */
static void sim__replica_start(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    const struct raft_storage *st = raft_mem_storage_get(rep->disk);
    struct raft_snapshot snap;
    struct sim_sm sm = {0};
    struct raft_conf_state conf = {0};
    int rc = st->snapshot(st->ctx, &snap);
    if (rc == RAFT_OK && snap.meta.index > 0) {
        conf = snap.meta.conf;
        if (sim__sm_decode(snap.data.base, snap.data.len, &sm) != SIM_OK ||
            sm.applied != snap.meta.index)
            rc = RAFT_ESTORAGE;
    }
    if (rc != RAFT_OK) {
        sim__fail(c, "node %u group %u: restart: reading the disk's snapshot: %s", node + 1, group,
                  raft_strerror(rc));
        return;
    }
    raft_mem_storage_set_conf_state(rep->disk, &conf);
    struct raft_hard_state hs;
    struct raft_conf_state cs;
    st->initial_state(st->ctx, &hs, &cs);

    struct raft_config cfg;
    raft_config_default(&cfg);
    cfg.id = node + 1;
    cfg.storage = st;
    cfg.applied = sm.applied;
    cfg.seed = sim_rand_next(&c->rand);
    cfg.election_tick = SIM_ELECTION_TICK;
    cfg.heartbeat_tick = SIM_HEARTBEAT_TICK;
    cfg.lease = true;
    cfg.vote_floor_index = rep->floor_index;
    cfg.vote_floor_term = rep->floor_term;
    if (c->max_msg_bytes)
        cfg.max_msg_bytes = c->max_msg_bytes;
    if (c->max_inflight)
        cfg.max_inflight_msgs = c->max_inflight;
    rc = raft_new(&cfg, &rep->core);
    if (rc != RAFT_OK) {
        rep->core = NULL;
        sim__fail(c, "node %u group %u: raft_new: %s", node + 1, group, raft_strerror(rc));
        return;
    }
    rep->inc = ++c->next_inc;
    rep->ready_out = false;
    rep->lc_pending = false;
    rep->n_reads = rep->n_acks = 0;
    rep->role = RAFT_FOLLOWER;
    rep->term = hs.term;
    rep->commit_seen = hs.commit;
    sim__replica_reset_sm(rep, &sm, &conf);
}

static void sim__replica_stop(struct sim_replica *rep)
{
    if (rep->core)
        raft_free(rep->core);
    rep->core = NULL;
    rep->ready_out = false;
    rep->lc_pending = false;
    rep->n_reads = rep->n_acks = 0;
}

void sim__node_crash(struct sim_cluster *c, unsigned node)
{
    struct sim_node *nd = &c->nodes[node];
    nd->up = false;
    for (unsigned g = 0; g < c->opt.n_groups; g++)
        sim__replica_stop(&nd->reps[g]);
    c->cnt.crashes++;
    sim__trace(c, "n%u crashes (unsynced writes lost)", node + 1);
}

void sim__node_restart(struct sim_cluster *c, unsigned node)
{
    struct sim_node *nd = &c->nodes[node];
    nd->up = true;
    nd->restart_at = 0;
    sim__trace(c, "n%u restarts", node + 1);
    for (unsigned g = 0; g < c->opt.n_groups && !c->failed; g++)
        if (nd->reps[g].exists) {
            sim__replica_start(c, node, g);
            sim__replica_pump(c, node, g);
        }
}

void sim__sm_bootstrap(unsigned group, struct sim_sm *out)
{
    memset(out, 0, sizeof(*out));
    out->applied = 1;
    out->hash = sim_mix64(0x5eed0000ull + group);
}

int sim__replica_create(struct sim_cluster *c, unsigned node, unsigned group, bool bootstrap)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    int rc = raft_mem_storage_new(&rep->disk);
    if (rc != RAFT_OK)
        return SIM_ENOMEM;
    rep->exists = true;
    rep->gen++;
    struct raft_hard_state hs = {.term = rep->tomb_term, .vote = rep->tomb_vote, .commit = 0};
    if (bootstrap) {
        struct sim_sm sm;
        uint8_t buf[SIM_SM_ENCODED_LEN];
        sim__sm_bootstrap(group, &sm);
        sim__sm_encode(&sm, buf);
        struct raft_snapshot snap = {.meta = {.index = 1, .term = 1},
                                     .data = {.base = buf, .len = sizeof(buf)}};
        snap.meta.conf = c->groups[group].init_conf;
        rc = raft_mem_storage_apply_snapshot(rep->disk, &snap);
        if (rc != RAFT_OK)
            return rc == RAFT_ENOMEM ? SIM_ENOMEM : SIM_EINVAL;
        raft_mem_storage_set_conf_state(rep->disk, &snap.meta.conf);
        hs = (struct raft_hard_state){.term = 1, .vote = 0, .commit = 1};
    }
    raft_mem_storage_set_hard_state(rep->disk, &hs);
    rep->durable_commit = hs.commit;
    rep->commit_seen = 0;
    if (c->nodes[node].up) {
        sim__replica_start(c, node, group);
        sim__replica_pump(c, node, group);
    }
    return SIM_OK;
}

void sim__replica_destroy(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    if (!rep->exists)
        return;
    sim__replica_stop(rep);
    const struct raft_storage *st = raft_mem_storage_get(rep->disk);
    struct raft_hard_state hs;
    struct raft_conf_state cs;
    if (st->initial_state(st->ctx, &hs, &cs) == RAFT_OK) {
        rep->tomb_term = hs.term;
        rep->tomb_vote = hs.vote;
    }
    raft_index last = 0;
    raft_term last_term = 0;
    if (st->last_index(st->ctx, &last) == RAFT_OK && last > 0 &&
        st->term(st->ctx, last, &last_term) == RAFT_OK &&
        (last_term > rep->floor_term ||
         (last_term == rep->floor_term && last > rep->floor_index))) {
        rep->floor_index = last;
        rep->floor_term = last_term;
    }
    raft_mem_storage_free(rep->disk);
    rep->disk = NULL;
    rep->exists = false;
    rep->gen++;
    rep->durable_commit = 0;
    rep->commit_seen = 0;
}

void sim__replica_free_all(struct sim_cluster *c)
{
    for (unsigned n = 0; n < SIM_NODES_MAX; n++)
        for (unsigned g = 0; g < SIM_GROUPS_MAX; g++) {
            struct sim_replica *rep = sim__rep(c, n, g);
            sim__replica_stop(rep);
            if (rep->disk)
                raft_mem_storage_free(rep->disk);
            rep->disk = NULL;
            rep->exists = false;
        }
}

void sim__run_deferred(struct sim_cluster *c)
{
    for (unsigned i = 0; i < c->n_deferred && !c->failed; i++) {
        struct sim_deferred *d = &c->deferred[i];
        struct sim_replica *rep = sim__rep(c, d->node, d->group);
        if (d->create && !rep->exists) {
            sim__trace(c, "n%u g%u replica created (empty, joins through the leader)", d->node + 1,
                       d->group);
            if (sim__replica_create(c, d->node, d->group, false) != SIM_OK)
                sim__fail(c, "out of memory creating a replica");
        } else if (!d->create && rep->exists) {
            sim__trace(c, "n%u g%u replica destroyed (removed)", d->node + 1, d->group);
            sim__replica_destroy(c, d->node, d->group);
        }
    }
    c->n_deferred = 0;
}
