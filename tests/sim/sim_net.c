/* sim_net.c - the simulator's event heap and fake network (latency, drop, dup, reorder, cuts). */
#include <stdlib.h>
#include <string.h>

#include "sim_internal.h"

static bool sim__ev_before(const struct sim_event *a, const struct sim_event *b)
{
    return a->time < b->time || (a->time == b->time && a->seq < b->seq);
}

int sim__heap_push(struct sim_cluster *c, const struct sim_event *ev)
{
    if (c->heap_n == c->heap_cap) {
        if (c->heap_cap >= SIM_EVENTS_MAX)
            return SIM_ENOMEM;
        size_t cap = c->heap_cap ? c->heap_cap * 2 : 1024;
        struct sim_event *v = realloc(c->heap, cap * sizeof(*v));
        if (v == NULL)
            return SIM_ENOMEM;
        c->heap = v;
        c->heap_cap = cap;
    }
    size_t i = c->heap_n++;
    c->heap[i] = *ev;
    c->heap[i].seq = c->seq++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!sim__ev_before(&c->heap[i], &c->heap[p]))
            break;
        struct sim_event t = c->heap[i];
        c->heap[i] = c->heap[p];
        c->heap[p] = t;
        i = p;
    }
    return SIM_OK;
}

/* Pops the earliest event if it is due (time <= now). */
bool sim__heap_pop_due(struct sim_cluster *c, struct sim_event *out)
{
    if (c->heap_n == 0 || c->heap[0].time > c->now)
        return false;
    *out = c->heap[0];
    c->heap[0] = c->heap[--c->heap_n];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1, r = l + 1, m = i;
        if (l < c->heap_n && sim__ev_before(&c->heap[l], &c->heap[m]))
            m = l;
        if (r < c->heap_n && sim__ev_before(&c->heap[r], &c->heap[m]))
            m = r;
        if (m == i)
            break;
        struct sim_event t = c->heap[i];
        c->heap[i] = c->heap[m];
        c->heap[m] = t;
        i = m;
    }
    return true;
}

void sim__heap_clear(struct sim_cluster *c)
{
    for (size_t i = 0; i < c->heap_n; i++)
        free(c->heap[i].msg);
    free(c->heap);
    c->heap = NULL;
    c->heap_n = c->heap_cap = 0;
}

/* Deep copy in one allocation: the core owns ready memory only until raft_advance. */
static struct sim_msg *sim__msg_copy(uint32_t group, const struct raft_msg *m)
{
    size_t data_len = m->snapshot.data.len;
    for (size_t i = 0; i < m->n_entries; i++)
        data_len += m->entries[i].data.len;
    size_t sz = sizeof(struct sim_msg) + m->n_entries * sizeof(struct raft_entry) + data_len;
    struct sim_msg *sm = malloc(sz);
    if (sm == NULL)
        return NULL;
    sm->group = group;
    sm->m = *m;
    struct raft_entry *ents = (struct raft_entry *)(sm + 1);
    uint8_t *p = (uint8_t *)(ents + m->n_entries);
    for (size_t i = 0; i < m->n_entries; i++) {
        ents[i] = m->entries[i];
        size_t len = m->entries[i].data.len;
        ents[i].data.base = len ? p : NULL;
        if (len)
            memcpy(p, m->entries[i].data.base, len);
        p += len;
    }
    sm->m.entries = m->n_entries ? ents : NULL;
    if (m->snapshot.data.len) {
        memcpy(p, m->snapshot.data.base, m->snapshot.data.len);
        sm->m.snapshot.data.base = p;
    } else {
        sm->m.snapshot.data.base = NULL;
    }
    return sm;
}

static void sim__net_enqueue(struct sim_cluster *c, uint32_t group, const struct raft_msg *m,
                             bool lost)
{
    struct sim_event ev = {.kind = SIM_EV_MSG, .group = (uint8_t)group};
    ev.time = c->now + sim_rand_range(&c->rand, 1, c->lat_max_ms);
    if (!c->quiet && sim_rand_ppm(&c->rand, c->delay_ppm))
        ev.time += sim_rand_range(&c->rand, 10, 80); /* reorders behind later messages */
    ev.msg = sim__msg_copy(group, m);
    if (ev.msg) {
        ev.msg->lost = lost;
        ev.msg->from_gen = sim__rep(c, (unsigned)m->from - 1, group)->gen;
        ev.msg->to_gen = sim__rep(c, (unsigned)m->to - 1, group)->gen;
    }
    if (ev.msg == NULL || sim__heap_push(c, &ev) != SIM_OK) {
        free(ev.msg);
        c->cnt.dropped++;
    }
}

void sim__net_send(struct sim_cluster *c, uint32_t group, const struct raft_msg *m)
{
    if (m->to == 0 || m->to > c->opt.n_nodes || m->from == 0 || m->from > c->opt.n_nodes) {
        sim__fail(c, "group %u: core sent a %s from %llu to unknown node %llu", group,
                  raft_msg_type_name(m->type), (unsigned long long)m->from,
                  (unsigned long long)m->to);
        return;
    }
    if (!c->quiet && sim_rand_ppm(&c->rand, c->drop_ppm)) {
        c->cnt.dropped++;
        if (m->type == RAFT_MSG_SNAPSHOT)
            sim__net_enqueue(c, group, m, true);
        return;
    }
    sim__net_enqueue(c, group, m, false);
    if (!c->quiet && sim_rand_ppm(&c->rand, c->dup_ppm))
        sim__net_enqueue(c, group, m, false);
}

/* The transport tells the sender how a snapshot went (it never gets stuck in snapshot state). */
static void sim__net_report_snapshot(struct sim_cluster *c, const struct sim_msg *sm, bool ok)
{
    unsigned from = (unsigned)sm->m.from - 1;
    struct sim_replica *sender = sim__rep(c, from, sm->group);
    if (c->failed || sm->m.type != RAFT_MSG_SNAPSHOT || sender->core == NULL ||
        sender->gen != sm->from_gen)
        return;
    raft_report_snapshot(sender->core, sm->m.to, ok);
    sim__replica_pump(c, from, sm->group);
}

void sim__net_deliver(struct sim_cluster *c, struct sim_event *ev)
{
    struct sim_msg *sm = ev->msg;
    unsigned from = (unsigned)sm->m.from - 1, to = (unsigned)sm->m.to - 1;
    struct sim_replica *rep = sim__rep(c, to, sm->group);
    if (sm->lost || !c->nodes[to].up || rep->core == NULL || c->blocked[from][to] ||
        rep->gen != sm->to_gen || sim__rep(c, from, sm->group)->gen != sm->from_gen) {
        if (!sm->lost)
            c->cnt.dropped++;
        sim__net_report_snapshot(c, sm, false);
        goto out;
    }
    if (c->opt.trace_msgs)
        sim__trace(c, "g%u %llu->%llu %s term=%llu idx=%llu logterm=%llu commit=%llu n=%zu%s",
                   sm->group, (unsigned long long)sm->m.from, (unsigned long long)sm->m.to,
                   raft_msg_type_name(sm->m.type), (unsigned long long)sm->m.term,
                   (unsigned long long)sm->m.index, (unsigned long long)sm->m.log_term,
                   (unsigned long long)sm->m.commit, sm->m.n_entries,
                   sm->m.reject ? " reject" : "");
    c->cnt.msgs++;
    int rc = raft_step(rep->core, &sm->m);
    if (rc != RAFT_OK && rc != RAFT_ENOMEM) {
        sim__fail(c, "node %u group %u: raft_step(%s from %llu) returned %s", to + 1, sm->group,
                  raft_msg_type_name(sm->m.type), (unsigned long long)sm->m.from,
                  raft_strerror(rc));
        goto out;
    }
    sim__replica_pump(c, to, sm->group);
    sim__net_report_snapshot(c, sm, true);
out:
    free(sm);
    ev->msg = NULL;
}

void sim__net_heal(struct sim_cluster *c)
{
    memset(c->blocked, 0, sizeof(c->blocked));
    c->heal_at = 0;
}
