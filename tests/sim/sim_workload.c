/* sim_workload.c - seeded workload and faults: proposals, reads, conf changes, transfers,
 * compactions, crashes, partitions, message faults, and the liveness probe of quiet phases. */
#include <string.h>

#include "sim_internal.h"

/* Rates per virtual millisecond, in parts per million (per group where it says so). */
#define SIM_PPM_PROPOSE_LEADER 250000 /* per group */
#define SIM_PPM_PROPOSE_ANY 20000     /* per group, at a random node (often not the leader) */
#define SIM_PPM_READ_LEADER 40000     /* per group */
#define SIM_PPM_READ_ANY 30000        /* per group, followers forward to the leader */
#define SIM_PPM_CONF_CHANGE 2500      /* per group */
#define SIM_PPM_TRANSFER 1500         /* per group */
#define SIM_PPM_COMPACT 5000          /* per group, at a random node */
#define SIM_PPM_CRASH 1200
#define SIM_PPM_PARTITION 1500
#define SIM_PPM_NEW_LEADER_READ 500000    /* a read right at a new leader */
#define SIM_PPM_NEW_LEADER_ISOLATE 400000 /* cut a new leader off before it replicates */
#define SIM_NET_PHASE_MS 1000             /* message fault rates change this often */
#define SIM_LIVENESS_RETRY_MS 200
#define SIM_CLIENT_WINDOW 64 /* outstanding proposals per replica before the client waits */

static int sim__leader_of(struct sim_cluster *c, unsigned group)
{
    int best = -1;
    raft_term best_term = 0;
    for (unsigned n = 0; n < c->opt.n_nodes; n++) {
        struct sim_replica *rep = sim__rep(c, n, group);
        if (rep->core && rep->role == RAFT_LEADER && rep->term >= best_term) {
            best = (int)n;
            best_term = rep->term;
        }
    }
    return best;
}

static int sim__random_live_replica(struct sim_cluster *c, unsigned group)
{
    unsigned start = (unsigned)sim_rand_below(&c->rand, c->opt.n_nodes);
    for (unsigned i = 0; i < c->opt.n_nodes; i++) {
        unsigned n = (start + i) % c->opt.n_nodes;
        if (sim__rep(c, n, group)->core)
            return (int)n;
    }
    return -1;
}

static void sim__put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

static uint32_t sim__get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static uint64_t sim__get_u64le(const uint8_t *p)
{
    return (uint64_t)sim__get_u32(p) | (uint64_t)sim__get_u32(p + 4) << 32;
}

static size_t sim__op_encode(struct sim_cluster *c, uint8_t *buf, uint64_t op, unsigned node,
                             uint32_t inc, uint8_t kind)
{
    size_t len = sim_rand_range(&c->rand, SIM_OP_HDR, SIM_OP_LEN_MAX);
    sim__put_u32(buf, (uint32_t)op);
    sim__put_u32(buf + 4, (uint32_t)(op >> 32));
    buf[8] = (uint8_t)(node + 1);
    buf[9] = kind;
    buf[10] = (uint8_t)sim_rand_below(&c->rand, SIM_KV_KEYS);
    buf[11] = 0;
    sim__put_u32(buf + 12, inc);
    uint64_t pad = sim_mix64(op);
    for (size_t i = SIM_OP_HDR; i < len; i++)
        buf[i] = (uint8_t)(pad >> (8 * (i % 8)));
    return len;
}

static bool sim__ok_or(struct sim_cluster *c, int rc, const char *what, unsigned node,
                       unsigned group, int ok1, int ok2, int ok3, int ok4)
{
    if (rc == RAFT_OK)
        return true;
    if (rc != ok1 && rc != ok2 && rc != ok3 && rc != ok4 && rc != RAFT_ENOMEM)
        sim__fail(c, "node %u group %u: %s returned unexpected %s", node + 1, group, what,
                  raft_strerror(rc));
    return false;
}

/* Proposes 1..4 entries (or one liveness marker); returns the first op id or 0. */
static uint64_t sim__propose(struct sim_cluster *c, unsigned node, unsigned group, uint8_t kind)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    if (kind == SIM_OP_PUT && rep->n_acks >= SIM_CLIENT_WINDOW)
        return 0; /* client-side flow control: bounded outstanding proposals */
    uint8_t data[4][SIM_OP_LEN_MAX];
    struct raft_buf bufs[4];
    size_t n = kind == SIM_OP_MARKER ? 1 : sim_rand_range(&c->rand, 1, 4);
    uint64_t first_op = c->next_op_id + 1;
    for (size_t i = 0; i < n; i++) {
        bufs[i].base = data[i];
        bufs[i].len = sim__op_encode(c, data[i], ++c->next_op_id, node, rep->inc, kind);
    }
    raft_index first = 0;
    int rc = raft_propose_batch(rep->core, bufs, n, &first);
    if (!sim__ok_or(c, rc, "raft_propose_batch", node, group, RAFT_ENOTLEADER, RAFT_ENOLEADER,
                    RAFT_ETRANSFER, RAFT_EBUDGET))
        return 0;
    c->cnt.proposals += n;
    for (size_t i = 0; i < n && rep->n_acks < SIM_ACKS_MAX; i++)
        rep->acks[rep->n_acks++] = (struct sim_ack){.op_id = first_op + i, .index = first + i};
    sim__replica_pump(c, node, group);
    return first_op;
}

static void sim__read(struct sim_cluster *c, unsigned node, unsigned group)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    for (unsigned j = 0; j < rep->n_reads;) {
        if (c->now - rep->reads[j].started_ms > SIM_READ_EXPIRE_MS)
            rep->reads[j] = rep->reads[--rep->n_reads]; /* lost in the network: client gives up */
        else
            j++;
    }
    if (rep->n_reads == SIM_READS_MAX)
        return;
    uint64_t ctx = ++c->next_ctx;
    if (sim_rand_ppm(&c->rand, 500000)) {
        /* half the reads try the lease first, as the runtime does; served once applied */
        raft_index index = 0;
        int rc = raft_read_lease(rep->core, &index, NULL);
        if (rc == RAFT_ENOLEASE)
            c->cnt.lease_refused++; /* falls back to ReadIndex below */
        else if (!sim__ok_or(c, rc, "raft_read_lease", node, group, RAFT_ENOTLEADER,
                             RAFT_ENOTLEADER, RAFT_ENOTLEADER, RAFT_ENOTLEADER))
            return;
        else {
            rep->reads[rep->n_reads++] = (struct sim_read){.ctx = ctx,
                                                           .acked_at_start =
                                                               c->groups[group].acked_max,
                                                           .index = index,
                                                           .has_index = true,
                                                           .lease = true,
                                                           .started_ms = c->now};
            return;
        }
    }
    int rc = raft_read_index(rep->core, ctx);
    if (!sim__ok_or(c, rc, "raft_read_index", node, group, RAFT_ENOLEADER, RAFT_EREADFULL,
                    RAFT_ENOTLEADER, RAFT_OK))
        return;
    rep->reads[rep->n_reads++] = (struct sim_read){
        .ctx = ctx, .acked_at_start = c->groups[group].acked_max, .started_ms = c->now};
}

static bool sim__conf_has(const raft_id *ids, uint32_t n, raft_id id)
{
    for (uint32_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* Picks one single-server change valid for the leader's configuration. */
static bool sim__conf_pick(struct sim_cluster *c, unsigned group, const struct raft_status *st,
                           struct raft_conf_change *cc)
{
    const struct raft_conf_state *cs = &st->conf;
    uint32_t min_voters = c->groups[group].min_voters;
    if (cs->n_learners > 0) {
        raft_id l = cs->learners[sim_rand_below(&c->rand, cs->n_learners)];
        cc->node = l;
        cc->type = sim_rand_below(&c->rand, 4) ? RAFT_CC_PROMOTE : RAFT_CC_REMOVE;
        return true;
    }
    raft_id outside[SIM_NODES_MAX];
    unsigned n_out = 0;
    for (raft_id id = 1; id <= c->opt.n_nodes; id++)
        if (!sim__conf_has(cs->voters, cs->n_voters, id))
            outside[n_out++] = id;
    if (n_out > 0 && (cs->n_voters <= min_voters || sim_rand_below(&c->rand, 2))) {
        cc->node = outside[sim_rand_below(&c->rand, n_out)];
        cc->type = RAFT_CC_ADD_LEARNER;
        return true;
    }
    if (cs->n_voters > min_voters) {
        cc->node = cs->voters[sim_rand_below(&c->rand, cs->n_voters)];
        cc->type = RAFT_CC_REMOVE;
        return true;
    }
    return false;
}

static void sim__conf_change(struct sim_cluster *c, unsigned group)
{
    int l = sim__leader_of(c, group);
    if (l < 0)
        return;
    struct sim_replica *rep = sim__rep(c, (unsigned)l, group);
    struct raft_status st;
    raft_status(rep->core, &st);
    struct raft_conf_change cc;
    if (!sim__conf_pick(c, group, &st, &cc))
        return;
    raft_index idx = 0;
    int rc = raft_propose_conf_change(rep->core, &cc, &idx);
    if (!sim__ok_or(c, rc, "raft_propose_conf_change", (unsigned)l, group, RAFT_ECONFPENDING,
                    RAFT_ETRANSFER, RAFT_EBUDGET, RAFT_ENOTLEADER))
        return;
    static const char *const names[] = {"add voter", "add learner", "promote", "remove"};
    sim__trace(c, "n%d g%u proposes conf change: %s %llu at index %llu", l + 1, group,
               names[cc.type], (unsigned long long)cc.node, (unsigned long long)idx);
    sim__replica_pump(c, (unsigned)l, group);
}

static void sim__transfer(struct sim_cluster *c, unsigned group)
{
    int l = sim__leader_of(c, group);
    if (l < 0)
        return;
    struct sim_replica *rep = sim__rep(c, (unsigned)l, group);
    struct raft_status st;
    raft_status(rep->core, &st);
    if (st.conf.n_voters < 2)
        return;
    raft_id target = st.conf.voters[sim_rand_below(&c->rand, st.conf.n_voters)];
    if (target == (raft_id)l + 1)
        return;
    int rc = raft_transfer_leader(rep->core, target);
    if (!sim__ok_or(c, rc, "raft_transfer_leader", (unsigned)l, group, RAFT_ETRANSFER,
                    RAFT_ENOTLEADER, RAFT_OK, RAFT_OK))
        return;
    c->cnt.transfers++;
    sim__trace(c, "n%d g%u transfers leadership to n%llu", l + 1, group,
               (unsigned long long)target);
    sim__replica_pump(c, (unsigned)l, group);
}

/* Snapshots the state machine at a recent applied index (keeping a tail of 0..31 entries)
 * and compacts the disk, so lagging and new replicas need a snapshot install. */
static void sim__compact(struct sim_cluster *c, unsigned group)
{
    int n = sim__random_live_replica(c, group);
    if (n < 0)
        return;
    struct sim_replica *rep = sim__rep(c, (unsigned)n, group);
    unsigned age = (unsigned)sim_rand_below(&c->rand, rep->ring_n);
    const struct sim_sm *sm = &rep->ring[(rep->ring_head + SIM_SM_RING - 1 - age) % SIM_SM_RING];
    const struct raft_storage *st = raft_mem_storage_get(rep->disk);
    raft_index first = 0;
    st->first_index(st->ctx, &first);
    const struct raft_conf_state *cs = sim__replica_conf_at(rep, sm->applied);
    if (sm->applied < first || cs == NULL)
        return;
    uint8_t buf[SIM_SM_ENCODED_LEN];
    sim__sm_encode(sm, buf);
    int rc = raft_mem_storage_create_snapshot(rep->disk, sm->applied, cs, buf, sizeof(buf));
    if (rc != RAFT_OK) {
        sim__fail(c, "node %d group %u: create_snapshot(%llu): %s", n + 1, group,
                  (unsigned long long)sm->applied, raft_strerror(rc));
        return;
    }
    raft_compacted(rep->core, sm->applied);
    c->cnt.compactions++;
    sim__trace(c, "n%d g%u compacts through %llu (applied %llu, conf %u voters %u learners)", n + 1,
               group, (unsigned long long)sm->applied, (unsigned long long)rep->sm.applied,
               cs->n_voters, cs->n_learners);
}

static unsigned sim__nodes_down(struct sim_cluster *c)
{
    unsigned d = 0;
    for (unsigned n = 0; n < c->opt.n_nodes; n++)
        d += !c->nodes[n].up;
    return d;
}

static void sim__isolate(struct sim_cluster *c, unsigned node, uint64_t ms, bool in, bool out)
{
    sim__net_heal(c);
    for (unsigned o = 0; o < c->opt.n_nodes; o++) {
        if (o == node)
            continue;
        c->blocked[node][o] = out;
        c->blocked[o][node] = in;
    }
    c->heal_at = c->now + ms;
    c->cnt.partitions++;
}

static void sim__partition(struct sim_cluster *c)
{
    unsigned n = c->opt.n_nodes;
    unsigned kind = (unsigned)sim_rand_below(&c->rand, 5);
    uint64_t ms = sim_rand_range(&c->rand, 50, 1200);
    int l = sim__leader_of(c, (unsigned)sim_rand_below(&c->rand, c->opt.n_groups));
    unsigned victim =
        l >= 0 && sim_rand_below(&c->rand, 2) ? (unsigned)l : (unsigned)sim_rand_below(&c->rand, n);
    if (kind <= 1) {
        sim__isolate(c, victim, ms, true, true);
        sim__trace(c, "partition: n%u isolated for %llu ms", victim + 1, (unsigned long long)ms);
    } else if (kind == 2) {
        sim__isolate(c, victim, ms, false, true);
        sim__trace(c, "partition: n%u cannot send for %llu ms", victim + 1, (unsigned long long)ms);
    } else if (kind == 3) {
        sim__isolate(c, victim, ms, true, false);
        sim__trace(c, "partition: n%u cannot receive for %llu ms", victim + 1,
                   (unsigned long long)ms);
    } else {
        bool side[SIM_NODES_MAX];
        for (unsigned i = 0; i < n; i++)
            side[i] = sim_rand_below(&c->rand, 2);
        sim__net_heal(c);
        for (unsigned a = 0; a < n; a++)
            for (unsigned b = 0; b < n; b++)
                c->blocked[a][b] = side[a] != side[b];
        c->heal_at = c->now + ms;
        c->cnt.partitions++;
        sim__trace(c, "partition: random split for %llu ms", (unsigned long long)ms);
    }
}

static void sim__net_phase(struct sim_cluster *c)
{
    static const uint32_t drop[] = {0, 10000, 50000, 200000};
    static const uint32_t dup[] = {0, 10000, 50000};
    static const uint32_t delay[] = {0, 20000, 100000};
    static const unsigned lat[] = {2, 5, 15};
    c->drop_ppm = drop[sim_rand_below(&c->rand, 4)];
    c->dup_ppm = dup[sim_rand_below(&c->rand, 3)];
    c->delay_ppm = delay[sim_rand_below(&c->rand, 3)];
    c->lat_max_ms = lat[sim_rand_below(&c->rand, 3)];
}

static void sim__faults_step(struct sim_cluster *c)
{
    if (c->now % SIM_NET_PHASE_MS == 0)
        sim__net_phase(c);
    if (c->heal_at && c->now >= c->heal_at) {
        sim__net_heal(c);
        sim__trace(c, "partition healed");
    }
    if (sim_rand_ppm(&c->rand, SIM_PPM_PARTITION))
        sim__partition(c);
    if (c->isolate_at && c->now >= c->isolate_at) {
        uint64_t ms = sim_rand_range(&c->rand, 50, 400);
        c->isolate_at = 0;
        sim__isolate(c, c->isolate_node, ms, true, true);
        sim__trace(c, "partition: new leader n%u isolated for %llu ms", c->isolate_node + 1,
                   (unsigned long long)ms);
    }
    if (sim_rand_ppm(&c->rand, SIM_PPM_CRASH) && sim__nodes_down(c) < (c->opt.n_nodes + 1) / 2) {
        int l = sim__leader_of(c, (unsigned)sim_rand_below(&c->rand, c->opt.n_groups));
        unsigned n = l >= 0 && sim_rand_below(&c->rand, 2)
                         ? (unsigned)l
                         : (unsigned)sim_rand_below(&c->rand, c->opt.n_nodes);
        if (c->nodes[n].up) {
            sim__node_crash(c, n);
            c->nodes[n].restart_at = c->now + sim_rand_range(&c->rand, 20, 800);
        }
    }
}

static void sim__group_step(struct sim_cluster *c, unsigned g)
{
    int l = sim__leader_of(c, g);
    if (l >= 0 && sim_rand_ppm(&c->rand, SIM_PPM_PROPOSE_LEADER))
        sim__propose(c, (unsigned)l, g, SIM_OP_PUT);
    int any = sim__random_live_replica(c, g);
    if (any >= 0 && sim_rand_ppm(&c->rand, SIM_PPM_PROPOSE_ANY))
        sim__propose(c, (unsigned)any, g, SIM_OP_PUT);
    l = sim__leader_of(c, g);
    if (l >= 0 && sim_rand_ppm(&c->rand, SIM_PPM_READ_LEADER))
        sim__read(c, (unsigned)l, g);
    any = sim__random_live_replica(c, g);
    if (any >= 0 && sim_rand_ppm(&c->rand, SIM_PPM_READ_ANY))
        sim__read(c, (unsigned)any, g);
    if (sim_rand_ppm(&c->rand, SIM_PPM_COMPACT))
        sim__compact(c, g);
    if (c->quiet)
        return;
    if (sim_rand_ppm(&c->rand, SIM_PPM_CONF_CHANGE))
        sim__conf_change(c, g);
    if (sim_rand_ppm(&c->rand, SIM_PPM_TRANSFER))
        sim__transfer(c, g);
}

void sim__workload_step(struct sim_cluster *c)
{
    for (unsigned n = 0; n < c->opt.n_nodes && !c->failed; n++)
        if (!c->nodes[n].up && c->nodes[n].restart_at && c->now >= c->nodes[n].restart_at)
            sim__node_restart(c, n);
    if (!c->quiet)
        sim__faults_step(c);
    for (unsigned g = 0; g < c->opt.n_groups && !c->failed; g++)
        sim__group_step(c, g);
}

/* Called when a node is first seen leading a term: bait for the bugs that only show right
 * after an election (a read before the leader committed in its term, a cut-off new leader). */
void sim__workload_on_leader(struct sim_cluster *c, unsigned node, unsigned group)
{
    if (c->quiet)
        return;
    if (sim_rand_ppm(&c->rand, SIM_PPM_NEW_LEADER_READ))
        sim__read(c, node, group);
    /* cut off soon after the election: before or while it replicates older-term entries */
    if (c->isolate_at == 0 && sim_rand_ppm(&c->rand, SIM_PPM_NEW_LEADER_ISOLATE)) {
        c->isolate_at = c->now + sim_rand_range(&c->rand, 0, 40);
        c->isolate_node = node;
    }
}

void sim__workload_on_apply(struct sim_cluster *c, unsigned node, unsigned group,
                            const struct raft_entry *e)
{
    struct sim_replica *rep = sim__rep(c, node, group);
    struct sim_group *g = &c->groups[group];
    const uint8_t *d = e->data.base;
    if (e->type != RAFT_ENTRY_NORMAL || e->data.len < SIM_OP_HDR || d[8] != node + 1 ||
        sim__get_u32(d + 12) != rep->inc)
        return;
    uint64_t op = sim__get_u64le(d);
    for (unsigned j = 0; j < rep->n_acks;) {
        struct sim_ack *a = &rep->acks[j];
        if (a->op_id == op && a->index != e->index) {
            sim__fail(c, "node %u group %u: proposal %llu got index %llu but committed at %llu",
                      node + 1, group, (unsigned long long)op, (unsigned long long)a->index,
                      (unsigned long long)e->index);
            return;
        }
        if (a->index <= e->index) /* acknowledged now, or lost to a leader change */
            *a = rep->acks[--rep->n_acks];
        else
            j++;
    }
    /* the client gets its answer: every later read must observe this write */
    if (e->index > g->acked_max)
        g->acked_max = e->index;
    if (d[9] == SIM_OP_MARKER && g->marker_op != 0 && op >= g->marker_op)
        g->live_ok = true;
}

void sim__liveness_reset(struct sim_cluster *c)
{
    for (unsigned g = 0; g < c->opt.n_groups; g++) {
        c->groups[g].live_ok = false;
        c->groups[g].marker_op = 0;
        c->groups[g].marker_node = 0;
        c->groups[g].marker_at = 0;
    }
}

bool sim__liveness_step(struct sim_cluster *c)
{
    bool all = true;
    for (unsigned g = 0; g < c->opt.n_groups && !c->failed; g++) {
        struct sim_group *grp = &c->groups[g];
        if (grp->live_ok)
            continue;
        all = false;
        int l = sim__leader_of(c, g);
        if (l < 0)
            continue;
        if (grp->marker_op && grp->marker_node == (raft_id)l + 1 &&
            c->now - grp->marker_at < SIM_LIVENESS_RETRY_MS)
            continue;
        uint64_t op = sim__propose(c, (unsigned)l, g, SIM_OP_MARKER);
        sim__trace(c, "n%d g%u liveness probe %s", l + 1, g, op ? "proposed" : "refused");
        if (op) {
            if (grp->marker_op == 0)
                grp->marker_op = op; /* any probe of this phase counts */
            grp->marker_node = (raft_id)l + 1;
            grp->marker_at = c->now;
        }
    }
    return all;
}
