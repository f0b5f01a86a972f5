/* peer.c - traffic with peers: raft messages out and in, observed leaders of remote groups,
 * snapshot transfers. */
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "service/fault/fault.h"
#include "service/runtime/internal.h"
#include "store/keys.h"

#define PEER_METHOD_SNAPSHOT "/slotd.internal.v1.Peer/Snapshot"
#define PEER_METHOD_GROUP_STATUS "/slotd.internal.v1.Peer/GroupStatus"
#define SNAP_CHUNK_TIMEOUT_MS 30000
#define STATUS_TIMEOUT_MS 1000
/* A configuration reported by a follower is replaced by an older term's after this long. */
#define OBS_CONF_TTL_MS 2000
#define SNAP_DELETE_KEYS_MAX ((size_t)1 << 26)

static void start_snapshot(struct runtime *rt, struct rt_group *g, const struct raft_msg *m);

/* ---- Raft messages out ---- */

void rt_send_msgs(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd, size_t from,
                  size_t to)
{
    for (size_t i = from; i < to; i++) {
        const struct raft_msg *m = &rd->msgs[i];
        if (rt->transport == NULL) {
            metrics_counter_add(rt->metrics.dropped_outbound, 1);
            continue;
        }
        if (m->type == RAFT_MSG_SNAPSHOT) {
            start_snapshot(rt, g, m);
            continue;
        }
        Slotd__Internal__V1__RaftMessage pb;
        struct rt_wire_scratch scratch;
        if (rt_wire_msg_to_pb(g->id, m, &pb, &scratch) != 0) {
            metrics_counter_add(rt->metrics.dropped_outbound, 1);
            continue;
        }
        int rc = transport_send_raft(rt->transport, m->to, &pb);
        rt_wire_scratch_free(&scratch);
        if (rc != 0) {
            /* Queue full or unknown peer: raft retransmits from probe state. */
            metrics_counter_add(rt->metrics.dropped_outbound, 1);
            raft_report_unreachable(g->raft, m->to);
        }
    }
}

/* ---- Raft messages in ---- */

/* caller: the node the Peer/Raft call was authenticated as, 0 when peers are not authenticated
 * (the handler checked the batch's from_node against it). */
static void step_batch(struct runtime *rt, const uint8_t *data, size_t len, uint64_t caller)
{
    Slotd__Internal__V1__RaftBatch *b = slotd__internal__v1__raft_batch__unpack(NULL, len, data);
    if (b == NULL) {
        RT_LOG("warn", "msg=\"undecodable raft batch dropped\" bytes=%zu", len);
        return;
    }
    if (caller != 0 && b->from_node != caller) {
        RT_LOG("warn",
               "msg=\"raft batch from another node than its caller dropped\" caller=%llu "
               "from_node=%llu",
               (unsigned long long)caller, (unsigned long long)b->from_node);
        metrics_counter_add(rt->metrics.dropped_inbound, b->n_messages);
        slotd__internal__v1__raft_batch__free_unpacked(b, NULL);
        return;
    }
    for (size_t i = 0; i < b->n_messages; i++) {
        const Slotd__Internal__V1__RaftMessage *pb = b->messages[i];
        if (!runtime_hosts_group(rt, pb->group_id) || pb->to != rt->opts.node_id ||
            pb->from != b->from_node || pb->type == RAFT_MSG_SNAPSHOT) {
            /* a node speaks for itself only; snapshots arrive through Peer/Snapshot only */
            metrics_counter_add(rt->metrics.dropped_inbound, 1);
            continue;
        }
        struct raft_msg m;
        if (rt_wire_msg_from_pb(pb, &m) != 0) {
            metrics_counter_add(rt->metrics.dropped_inbound, 1);
            continue;
        }
        raft_step(rt->groups[pb->group_id].raft, &m);
        free(m.entries);
    }
    slotd__internal__v1__raft_batch__free_unpacked(b, NULL);
}

/* ---- Observed leaders of groups hosted elsewhere ---- */

static void on_status_reply(void *arg, int status, const char *message, const uint8_t *resp,
                            size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct runtime *rt = arg;
    if (status == 0 && resp != NULL)
        rt_submit_group_status(rt, resp, resp_len);
}

void rt_poll_peers(struct runtime *rt)
{
    if (rt->transport == NULL || rt->route_base == NULL)
        return;
    /* every peer, also when this node hosts every group: the route shows each replica's own
     * answer (RouteSnapshot replicas) */
    Slotd__Internal__V1__GroupStatusRequest req = SLOTD__INTERNAL__V1__GROUP_STATUS_REQUEST__INIT;
    uint8_t buf[16];
    size_t len = slotd__internal__v1__group_status_request__pack(&req, buf);
    const struct route_snapshot *members = rt->route_base; /* the cluster state's nodes */
    for (size_t i = 0; i < members->n_nodes; i++) {
        if (members->nodes[i].id == rt->opts.node_id)
            continue;
        transport_call(rt->transport, members->nodes[i].id, PEER_METHOD_GROUP_STATUS, buf, len,
                       rt_now_ms() + STATUS_TIMEOUT_MS, on_status_reply, rt);
    }
}

/* A peer hosting a group names its leader. A higher term replaces what this node knows; the
 * leader itself saying so confirms it (first-hand). A follower naming the same leader confirms
 * nothing: it may not have noticed yet that the leader died. A leader not confirmed first-hand
 * for two election timeouts expires (rt_expire_leaders); so does one this node cannot reach. */
static bool listed(const uint64_t *ids, size_t n, uint64_t id)
{
    for (size_t i = 0; i < n; i++)
        if (ids[i] == id)
            return true;
    return false;
}

/* The reporter's own replica of the group, as it said; kept sorted by node (when full, the
 * oldest answer makes room). */
static void observe_replica(struct rt_group *g, uint64_t node,
                            const Slotd__Internal__V1__GroupLeader *gl, int64_t now)
{
    struct route_replica r = {.node = node,
                              .role = listed(gl->voters, gl->n_voters, node) ? ROUTE_ROLE_VOTER
                                      : listed(gl->learners, gl->n_learners, node)
                                          ? ROUTE_ROLE_LEARNER
                                          : ROUTE_ROLE_NONE,
                              .leader = gl->leader,
                              .term = gl->term,
                              .commit = gl->commit,
                              .applied = gl->applied,
                              .heard_ms = now};
    uint32_t at = 0;
    while (at < g->n_obs && g->obs[at].node < node)
        at++;
    if (at < g->n_obs && g->obs[at].node == node) {
        g->obs[at] = r;
        return;
    }
    if (g->n_obs == ROUTE_MEMBERS_MAX) {
        uint32_t oldest = 0;
        for (uint32_t i = 1; i < g->n_obs; i++)
            if (g->obs[i].heard_ms < g->obs[oldest].heard_ms)
                oldest = i;
        memmove(&g->obs[oldest], &g->obs[oldest + 1], (g->n_obs - oldest - 1) * sizeof(r));
        g->n_obs--;
        if (oldest < at)
            at--;
    }
    memmove(&g->obs[at + 1], &g->obs[at], (g->n_obs - at) * sizeof(r));
    g->obs[at] = r;
    g->n_obs++;
}

/* A group hosted elsewhere: the configuration its leader reported, else the newest term's. */
static void observe_conf(struct rt_group *g, uint64_t node,
                         const Slotd__Internal__V1__GroupLeader *gl, int64_t now)
{
    bool from_leader = gl->leader != 0 && gl->leader == node;
    if (!from_leader && gl->term <= g->obs_conf_term && now - g->obs_conf_ms < OBS_CONF_TTL_MS)
        return;
    g->n_obs_voters = gl->n_voters < ROUTE_MEMBERS_MAX ? (uint32_t)gl->n_voters : ROUTE_MEMBERS_MAX;
    if (g->n_obs_voters > 0) /* protobuf-c leaves an empty repeated field NULL */
        memcpy(g->obs_voters, gl->voters, g->n_obs_voters * sizeof(uint64_t));
    g->n_obs_learners =
        gl->n_learners < ROUTE_MEMBERS_MAX ? (uint32_t)gl->n_learners : ROUTE_MEMBERS_MAX;
    if (g->n_obs_learners > 0)
        memcpy(g->obs_learners, gl->learners, g->n_obs_learners * sizeof(uint64_t));
    g->obs_conf_term = gl->term;
    g->obs_conf_ms = now;
    g->obs_conf_by = from_leader ? node : 0;
}

static void merge_group_status(struct runtime *rt, const uint8_t *data, size_t len)
{
    Slotd__Internal__V1__GroupStatusResponse *r =
        slotd__internal__v1__group_status_response__unpack(NULL, len, data);
    if (r == NULL)
        return;
    bool changed = false;
    int64_t now = rt_now_ms();
    for (size_t i = 0; i < r->n_groups; i++) {
        const Slotd__Internal__V1__GroupLeader *gl = r->groups[i];
        if (gl->group_id == 0 || gl->group_id > rt->n_groups || r->node_id == rt->opts.node_id)
            continue;
        struct rt_group *g = &rt->groups[gl->group_id];
        observe_replica(g, r->node_id, gl, now);
        if (gl->leader == r->node_id) {
            rt_facts_leader_commit(g, gl->commit, now);
            rt_facts_leader_slots(g, gl->leader, gl->owned.data, gl->owned.len, gl->fenced.data,
                                  gl->fenced.len, gl->migration_task, now);
        }
        changed = true; /* the route shows the answer's age */
        /* also for hosted groups: a replica that is not the leader may be behind or removed,
         * the controller leader's facts (facts.c) take the leader's report */
        observe_conf(g, r->node_id, gl, now);
        if (g->hosted)
            continue;
        if (gl->leader == 0 || gl->term < g->term)
            continue;
        bool first_hand = r->node_id == gl->leader;
        if (gl->term == g->term && !first_hand && (g->leader == gl->leader || g->leader == 0))
            continue; /* confirms nothing; an expired leader stays out until it speaks */
        if (first_hand)
            g->leader_seen_ms = now;
        else if (g->leader != gl->leader)
            g->leader_seen_ms = now; /* a new leader named: it has two timeouts to speak */
        g->leader = gl->leader;
        g->term = gl->term;
    }
    slotd__internal__v1__group_status_response__free_unpacked(r, NULL);
    if (changed)
        rt_publish_route(rt);
}

/* Every tick: the leaders of groups hosted elsewhere that no longer confirm themselves. */
void rt_expire_leaders(struct runtime *rt, int64_t now)
{
    int64_t ttl = 2 * (int64_t)rt->opts.election_tick * (int64_t)rt->opts.tick_ms;
    bool changed = false;
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (g->hosted || g->leader == 0 || now - g->leader_seen_ms <= ttl)
            continue;
        RT_LOG("info",
               "msg=\"observed leader expired\" group=%u leader=%llu term=%llu silent_ms=%lld",
               g->id, (unsigned long long)g->leader, (unsigned long long)g->term,
               (long long)(now - g->leader_seen_ms));
        g->leader = 0;
        changed = true;
    }
    if (changed)
        rt_publish_route(rt);
}

/* A peer could not be reached (a raft batch or a forward found nothing to connect to): the
 * groups hosted elsewhere that it leads have no known leader until it speaks again. */
static void drop_unreachable_leader(struct runtime *rt, uint64_t peer)
{
    bool changed = false;
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (g->hosted || g->leader != peer)
            continue;
        g->leader = 0;
        changed = true;
    }
    if (changed) {
        RT_LOG("info", "msg=\"leader unreachable: dropped from the route\" node=%llu",
               (unsigned long long)peer);
        rt_publish_route(rt);
    }
}

int runtime_group_status(struct runtime *rt, uint8_t **buf, size_t *len)
{
    struct route_snapshot *s = route_table_acquire(rt->routes);
    size_t n = 0;
    /* n_groups is set once by the loop thread (0 -> N); read it once. */
    size_t slots = atomic_load_explicit(&rt->n_groups, memory_order_acquire) + 1;
    Slotd__Internal__V1__GroupLeader *gl = calloc(slots, sizeof(*gl));
    Slotd__Internal__V1__GroupLeader **glp = calloc(slots, sizeof(*glp));
    uint8_t(*bits)[64] = calloc(slots, sizeof(*bits)); /* owned, fenced of each group */
    int rc = gl && glp && bits ? 0 : -1;
    for (size_t i = 0; rc == 0 && s != NULL && i < slots; i++) {
        const struct rt_group *g = &rt->groups[i];
        const struct route_group *rg = route_snapshot_group(s, g->id);
        if (!atomic_load_explicit(&g->hosted, memory_order_acquire) || rg == NULL)
            continue;
        slotd__internal__v1__group_leader__init(&gl[n]);
        gl[n].group_id = g->id;
        gl[n].leader = rg->leader;
        gl[n].term = rg->leader_term;
        gl[n].n_voters = rg->n_voters;
        gl[n].voters = (uint64_t *)rg->voters;
        gl[n].n_learners = rg->n_learners;
        gl[n].learners = (uint64_t *)rg->learners;
        gl[n].commit = atomic_load_explicit(&g->commit, memory_order_relaxed);
        gl[n].applied = atomic_load_explicit(&g->applied, memory_order_relaxed);
        if (g->id != 0) {
            rt_facts_published_slots(g, bits[n], bits[n] + 32, &gl[n].migration_task);
            gl[n].owned = (ProtobufCBinaryData){.len = 32, .data = bits[n]};
            gl[n].fenced = (ProtobufCBinaryData){.len = 32, .data = bits[n] + 32};
        }
        glp[n] = &gl[n];
        n++;
    }
    if (rc == 0) {
        Slotd__Internal__V1__GroupStatusResponse resp =
            SLOTD__INTERNAL__V1__GROUP_STATUS_RESPONSE__INIT;
        resp.node_id = rt->opts.node_id;
        resp.n_groups = n;
        resp.groups = glp;
        *len = slotd__internal__v1__group_status_response__get_packed_size(&resp);
        *buf = malloc(*len ? *len : 1);
        if (*buf == NULL)
            rc = -1;
        else
            slotd__internal__v1__group_status_response__pack(&resp, *buf);
    }
    route_snapshot_release(s);
    free(gl);
    free(glp);
    free(bits);
    return rc;
}

/* ---- Snapshots: sending ---- */

struct chunk_ctx {
    struct runtime *rt;
    uint64_t transfer_id;
};

/* ---- Snapshot rows: [u32 klen][key][u32 vlen][value]..., the group's meta first ---- */

struct rowbuf {
    uint8_t *p;
    size_t len, cap;
};

static int row_put(struct rowbuf *b, const void *k, size_t kl, const void *v, size_t vl)
{
    size_t need = b->len + 8 + kl + vl;
    if (need > b->cap) {
        size_t cap = b->cap ? b->cap : 65536;
        while (cap < need)
            cap *= 2;
        uint8_t *np = realloc(b->p, cap);
        if (np == NULL)
            return -1;
        b->p = np;
        b->cap = cap;
    }
    store_put_u32(b->p + b->len, (uint32_t)kl);
    memcpy(b->p + b->len + 4, k, kl);
    store_put_u32(b->p + b->len + 4 + kl, (uint32_t)vl);
    memcpy(b->p + b->len + 8 + kl, v, vl);
    b->len = need;
    return 0;
}

static int row_put_cb(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    return row_put(arg, k, kl, v, vl);
}

static bool bit(const uint8_t bitmap[32], unsigned s)
{
    return (bitmap[s / 8] >> (s % 8)) & 1;
}

/* The hash slots whose rows a snapshot carries: owned ones, and those receiving a migration. */
static void snap_slots(const struct slot_group_state *gs, uint8_t out[32])
{
    for (size_t i = 0; i < 32; i++)
        out[i] = gs->owned[i] | gs->incoming[i];
}

static struct rt_snap_send *find_send(struct runtime *rt, uint64_t transfer_id)
{
    for (struct rt_snap_send *s = rt->snap_sends; s != NULL; s = s->next)
        if (s->transfer_id == transfer_id)
            return s;
    return NULL;
}

/* Unlinks send and frees it with its fsm snapshot (every path a transfer ends by). */
static void send_free(struct runtime *rt, struct rt_snap_send *send)
{
    for (struct rt_snap_send **pp = &rt->snap_sends; *pp != NULL; pp = &(*pp)->next) {
        if (*pp == send) {
            *pp = send->next;
            break;
        }
    }
    store_fsm_snap_free(send->sn);
    free(send->head);
    free(send);
}

void rt_snap_free_all(struct runtime *rt)
{
    while (rt->snap_sends != NULL)
        send_free(rt, rt->snap_sends);
}

/* The leader needs to send a snapshot: the apply stage takes an fsm snapshot at its applied
 * index (so the rows are exactly the state there), then the loop streams them in chunks read
 * from it. One transfer per (group, peer) at a time, opts.snap_sends_max in all. */
static void start_snapshot(struct runtime *rt, struct rt_group *g, const struct raft_msg *m)
{
    size_t n = 0;
    for (struct rt_snap_send *s = rt->snap_sends; s != NULL; s = s->next, n++)
        if (s->g == g && s->to == m->to)
            return;
    size_t max = rt->opts.snap_sends_max ? rt->opts.snap_sends_max : RT_SNAP_SENDS_MAX;
    if (n >= max) {
        RT_LOG("warn",
               "msg=\"snapshot refused: too many transfers\" node=%llu group=%u to=%llu "
               "transfers=%zu max=%zu",
               (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)m->to, n, max);
        raft_report_snapshot(g->raft, m->to, false);
        return;
    }
    struct rt_snap_send *send = calloc(1, sizeof(*send));
    if (send == NULL) {
        raft_report_snapshot(g->raft, m->to, false);
        return;
    }
    send->g = g;
    send->to = m->to;
    send->term = m->term;
    send->transfer_id = ++rt->next_transfer_id;
    send->next = rt->snap_sends;
    rt->snap_sends = send;
    send->capture_next = rt->building->capture;
    rt->building->capture = send;
    RT_LOG("info", "msg=\"snapshot needed\" node=%llu group=%u to=%llu transfer=%llu",
           (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)m->to,
           (unsigned long long)send->transfer_id);
}

static void on_chunk_reply(void *arg, int status, const char *message, const uint8_t *resp,
                           size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct chunk_ctx *c = arg;
    bool ok = false;
    if (status == 0 && resp != NULL) {
        Slotd__Internal__V1__SnapshotAck *ack =
            slotd__internal__v1__snapshot_ack__unpack(NULL, resp_len, resp);
        ok = ack != NULL && ack->ok;
        if (ack != NULL)
            slotd__internal__v1__snapshot_ack__free_unpacked(ack, NULL);
    }
    rt_submit_snap_sent(c->rt, c->transfer_id, ok);
    free(c);
}

/* Loop: the rows of send's next chunk into b (about opts.snap_chunk_bytes: the scan stops after
 * the row that reaches it), read from the fsm snapshot; *last once nothing is left after them. */
static int chunk_build(struct runtime *rt, struct rt_snap_send *send, struct rowbuf *b, bool *last)
{
    size_t max = rt->opts.snap_chunk_bytes ? rt->opts.snap_chunk_bytes : RT_SNAP_CHUNK_BYTES;
    if (send->sn == NULL) { /* the controller: its captured state in slices */
        size_t n = send->head_len - send->offset;
        n = n > max ? max : n;
        b->p = malloc(n ? n : 1);
        if (b->p == NULL)
            return -1;
        memcpy(b->p, send->head + send->offset, n);
        b->len = b->cap = n;
        *last = send->offset + n == send->head_len;
        return 0;
    }
    if (!send->head_sent) { /* the meta rows open the first chunk */
        b->cap = send->head_len + 65536;
        b->p = malloc(b->cap);
        if (b->p == NULL)
            return -1;
        memcpy(b->p, send->head, send->head_len);
        b->len = send->head_len;
    }
    while (b->len < max) {
        if (!send->cursor_on) {
            unsigned s = send->range_next;
            while (s < 256 && !bit(send->slots, s))
                s++;
            if (s >= 256)
                break;
            unsigned e = s;
            while (e + 1 < 256 && bit(send->slots, e + 1))
                e++;
            uint8_t lo[2], hi[2];
            store_put_u16(lo, (uint16_t)s);
            store_put_u16(hi, e == 255 ? 0xFFFF : (uint16_t)(e + 1)); /* 0xFFFF: group metadata */
            if (store_fsm_snap_cursor_init(&send->cursor, lo, 2, hi, 2) != 0)
                return -1;
            send->range_first = s;
            send->range_last = e;
            send->cursor_on = true;
        }
        int rc = store_fsm_snap_scan(send->sn, &send->cursor, max - b->len, row_put_cb, b);
        if (rc != 0)
            return -1;
        if (send->cursor.done) {
            send->cursor_on = false;
            send->range_next = send->range_last + 1;
        }
    }
    *last = !send->cursor_on && send->range_next >= 256;
    if (!*last) { /* maybe only empty ranges remain: the next chunk says so */
        unsigned s = send->range_next;
        while (!send->cursor_on && s < 256 && !bit(send->slots, s))
            s++;
        *last = !send->cursor_on && s >= 256;
    }
    return 0;
}

static void send_chunk(struct runtime *rt, struct rt_snap_send *send)
{
    struct rowbuf b = {0};
    bool last = false;
    if (chunk_build(rt, send, &b, &last) != 0) {
        RT_LOG("warn", "msg=\"snapshot read failed\" group=%u to=%llu sent=%zu", send->g->id,
               (unsigned long long)send->to, send->offset);
        free(b.p);
        raft_report_snapshot(send->g->raft, send->to, false);
        send_free(rt, send);
        return;
    }
    send->head_sent = true;
    if (b.len > send->peak_chunk)
        send->peak_chunk = b.len;
    Slotd__Internal__V1__SnapshotChunk c = SLOTD__INTERNAL__V1__SNAPSHOT_CHUNK__INIT;
    c.from_node = rt->opts.node_id;
    c.group_id = send->g->id;
    c.transfer_id = send->transfer_id;
    c.offset = send->offset;
    c.total_bytes = last ? send->offset + b.len : 0; /* 0: not known before the last chunk */
    c.data.data = b.p;
    c.data.len = b.len;
    c.last = last;
    Slotd__Internal__V1__RaftMessage pb;
    struct rt_wire_scratch scratch;
    memset(&scratch, 0, sizeof(scratch));
    if (c.last) {
        struct raft_msg m = {.type = RAFT_MSG_SNAPSHOT,
                             .from = rt->opts.node_id,
                             .to = send->to,
                             .term = send->term};
        m.snapshot.meta = send->meta;
        rt_wire_msg_to_pb(send->g->id, &m, &pb, &scratch);
        c.message = &pb;
    }
    size_t len = slotd__internal__v1__snapshot_chunk__get_packed_size(&c);
    uint8_t *buf = malloc(len);
    struct chunk_ctx *ctx = malloc(sizeof(*ctx));
    int rc = -1;
    bool counted = false;
    if (buf != NULL && ctx != NULL) {
        slotd__internal__v1__snapshot_chunk__pack(&c, buf);
        free(b.p); /* the rows live in buf now */
        b.p = NULL;
        ctx->rt = rt;
        ctx->transfer_id = send->transfer_id;
        send->chunk_len = c.data.len;
        send->last_sent = last;
        counted = true;
        if (++send->in_flight > send->in_flight_max)
            send->in_flight_max = send->in_flight;
        rc = transport_call(rt->transport, send->to, PEER_METHOD_SNAPSHOT, buf, len,
                            rt_now_ms() + SNAP_CHUNK_TIMEOUT_MS, on_chunk_reply, ctx);
    }
    free(b.p);
    rt_wire_scratch_free(&scratch);
    free(buf);
    if (rc != 0) {
        free(ctx);
        if (counted)
            send->in_flight--;
        raft_report_snapshot(send->g->raft, send->to, false);
        send_free(rt, send);
    }
}

/* Loop: the apply stage captured (or failed to capture) the rows. */
void rt_snap_captured(struct runtime *rt, struct rt_snap_send *send)
{
    for (; send != NULL; send = send->capture_next) {
        if (!send->captured) {
            RT_LOG("warn", "msg=\"snapshot capture failed\" group=%u to=%llu", send->g->id,
                   (unsigned long long)send->to);
            raft_report_snapshot(send->g->raft, send->to, false);
            send->dead = true;
            continue;
        }
        RT_LOG("info",
               "msg=\"snapshot captured\" node=%llu group=%u to=%llu index=%llu term=%llu "
               "streamed=%d",
               (unsigned long long)rt->opts.node_id, send->g->id, (unsigned long long)send->to,
               (unsigned long long)send->meta.index, (unsigned long long)send->meta.term,
               send->sn != NULL);
    }
}

/* Starts the first chunk of every captured transfer not yet started. */
void rt_snap_kick(struct runtime *rt)
{
    struct rt_snap_send *s = rt->snap_sends;
    while (s != NULL) {
        struct rt_snap_send *next = s->next;
        if (s->dead)
            send_free(rt, s);
        else if (s->captured && !s->started) {
            s->started = true;
            send_chunk(rt, s);
        }
        s = next;
    }
}

/* Loop: a chunk RPC ended; the next chunk is read only now (one chunk per transfer at a time). */
static void chunk_sent(struct runtime *rt, uint64_t transfer_id, bool ok)
{
    struct rt_snap_send *send = find_send(rt, transfer_id);
    if (send == NULL || send->in_flight == 0)
        return;
    send->in_flight--;
    if (!ok) {
        RT_LOG("warn", "msg=\"snapshot send failed\" group=%u to=%llu sent=%zu chunks=%zu",
               send->g->id, (unsigned long long)send->to, send->offset, send->chunks);
        raft_report_snapshot(send->g->raft, send->to, false);
        send_free(rt, send);
        return;
    }
    send->offset += send->chunk_len;
    send->chunks++;
    metrics_counter_add(rt->metrics.snap_sent_bytes, send->chunk_len);
    RT_LOG("debug", "msg=\"snapshot progress\" group=%u to=%llu sent=%zu chunks=%zu", send->g->id,
           (unsigned long long)send->to, send->offset, send->chunks);
    if (!send->last_sent) {
        send_chunk(rt, send);
        return;
    }
    RT_LOG("info",
           "msg=\"snapshot sent\" node=%llu group=%u to=%llu index=%llu bytes=%zu chunks=%zu "
           "peak_chunk_bytes=%zu chunks_in_flight_max=%u",
           (unsigned long long)rt->opts.node_id, send->g->id, (unsigned long long)send->to,
           (unsigned long long)send->meta.index, send->offset, send->chunks, send->peak_chunk,
           send->in_flight_max);
    raft_report_snapshot(send->g->raft, send->to, true);
    send_free(rt, send);
}

/* Apply thread, between jobs (after the job's rows are committed): nothing else writes this
 * group's rows now. Takes an fsm snapshot and the meta; no row is read here. */
int rt_snap_capture_rows(struct runtime *rt, struct rt_snap_send *send)
{
    for (; send != NULL; send = send->capture_next) {
        struct rt_group *g = send->g;
        send->meta.index = g->apply_index;
        send->meta.term = g->apply_term;
        send->meta.conf = g->apply_conf;
        if (g->id == 0) { /* the controller: its canonical state */
            send->captured = rt_ctl_capture(rt, &send->head, &send->head_len) == 0;
            continue;
        }
        struct rowbuf b = {0};
        uint8_t mk[STORE_GROUP_META_KEY_LEN], mv[1 + sizeof(g->fsm_state.owned)];
        store_key_group_meta(mk, g->id, SLOT_GROUP_META_OWNED);
        mv[0] = STORE_VALUE_VERSION;
        memcpy(mv + 1, g->fsm_state.owned, sizeof(g->fsm_state.owned));
        int rc = row_put(&b, mk, sizeof(mk), mv, sizeof(mv));
        /* Then the migration record (fences, rows received for a migration in progress). */
        uint8_t gk[STORE_GROUP_META_KEY_LEN], gv[SLOT_GROUP_META_MIGRATION_LEN];
        store_key_group_meta(gk, g->id, SLOT_GROUP_META_MIGRATION);
        slot_group_migration_encode(&g->fsm_state, gv);
        if (rc == 0)
            rc = row_put(&b, gk, sizeof(gk), gv, sizeof(gv));
        if (rc == 0)
            rc = store_fsm_snap_new(rt->store, &send->sn);
        if (rc != 0) {
            free(b.p);
            send->sn = NULL;
            send->captured = false;
            continue;
        }
        snap_slots(&g->fsm_state, send->slots);
        send->head = b.p;
        send->head_len = b.len;
        send->captured = true;
    }
    return 0;
}

/* ---- Snapshots: receiving ---- */

static void ack(struct rpc_call *call, bool ok, const char *error)
{
    Slotd__Internal__V1__SnapshotAck a = SLOTD__INTERNAL__V1__SNAPSHOT_ACK__INIT;
    a.ok = ok;
    a.error = (char *)(error ? error : "");
    rpc_call_reply(call, &a.base);
}

static void recv_reset(struct rt_snap_recv *rcv)
{
    free(rcv->data);
    memset(rcv, 0, sizeof(*rcv));
}

static void recv_chunk(struct runtime *rt, struct rt_request *r)
{
    Slotd__Internal__V1__SnapshotChunk *c =
        slotd__internal__v1__snapshot_chunk__unpack(NULL, r->len, r->data);
    if (c == NULL) {
        ack(r->call, false, "chunk does not decode");
        return;
    }
    const char *err = NULL;
    struct rt_group *g = NULL;
    if (!runtime_hosts_group(rt, c->group_id)) {
        err = "group not hosted here";
        goto done;
    }
    g = &rt->groups[c->group_id];
    struct rt_snap_recv *rcv = &g->snap_recv;
    if (c->offset == 0) {
        recv_reset(rcv);
        rcv->cap = c->total_bytes && c->total_bytes <= RT_SNAP_BYTES_MAX ? c->total_bytes : 65536;
        rcv->data = malloc(rcv->cap);
        if (rcv->data == NULL) {
            err = "out of memory";
            goto done;
        }
        rcv->transfer_id = c->transfer_id;
        rcv->from = c->from_node;
        rcv->total = c->total_bytes; /* 0: a streaming sender says it on the last chunk */
    }
    if (rcv->transfer_id != c->transfer_id || rcv->from != c->from_node || c->offset != rcv->len ||
        (rcv->total != 0 && rcv->len + c->data.len > rcv->total) ||
        (c->total_bytes != 0 &&
         c->total_bytes != (c->last ? rcv->len + c->data.len : rcv->total))) {
        err = "chunk out of order";
        goto done;
    }
    if (rcv->total > RT_SNAP_BYTES_MAX || rcv->len + c->data.len > RT_SNAP_BYTES_MAX) {
        err = "snapshot larger than this node accepts";
        goto done;
    }
    if (rcv->len + c->data.len > rcv->cap) {
        size_t cap = rcv->cap;
        while (cap < rcv->len + c->data.len)
            cap *= 2;
        cap = cap > RT_SNAP_BYTES_MAX ? RT_SNAP_BYTES_MAX : cap;
        uint8_t *np = realloc(rcv->data, cap);
        if (np == NULL) {
            err = "out of memory";
            goto done;
        }
        rcv->data = np;
        rcv->cap = cap;
    }
    if (c->data.len > 0)
        memcpy(rcv->data + rcv->len, c->data.data, c->data.len);
    rcv->len += c->data.len;
    rcv->last_ms = rt_now_ms();
    metrics_counter_add(rt->metrics.snap_received_bytes, c->data.len);
    if (c->last) {
        struct raft_msg m;
        if (c->total_bytes != rcv->len || c->message == NULL || c->message->from != c->from_node ||
            rt_wire_msg_from_pb(c->message, &m) != 0 || m.type != RAFT_MSG_SNAPSHOT) {
            err = "last chunk is incomplete";
            goto done;
        }
        m.snapshot.data.base = rcv->data;
        m.snapshot.data.len = rcv->len;
        raft_step(g->raft, &m); /* the core copies the data it keeps */
        free(m.entries);
        RT_LOG("info",
               "msg=\"snapshot received\" node=%llu group=%u from=%llu index=%llu bytes=%zu",
               (unsigned long long)rt->opts.node_id, g->id, (unsigned long long)rcv->from,
               (unsigned long long)m.snapshot.meta.index, rcv->len);
        recv_reset(rcv);
    }

done:
    if (err != NULL && g != NULL)
        recv_reset(&g->snap_recv);
    ack(r->call, err == NULL, err);
    slotd__internal__v1__snapshot_chunk__free_unpacked(c, NULL);
}

void rt_snap_recv_expire(struct runtime *rt, int64_t now)
{
    RT_ASSERT_LOOP(rt);
    int64_t idle = rt->opts.snap_recv_idle_ms ? (int64_t)rt->opts.snap_recv_idle_ms
                                              : (int64_t)RT_SNAP_RECV_IDLE_MS;
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_snap_recv *rcv = &rt->groups[i].snap_recv;
        if (rcv->data == NULL || now - rcv->last_ms < idle)
            continue;
        RT_LOG("warn",
               "msg=\"snapshot receive abandoned\" node=%llu group=%zu from=%llu bytes=%zu "
               "idle_ms=%lld",
               (unsigned long long)rt->opts.node_id, i, (unsigned long long)rcv->from, rcv->len,
               (long long)(now - rcv->last_ms));
        recv_reset(rcv);
    }
}

/* Loop, in take_ready: the core accepted a snapshot. The rows are installed
 * (synced) by the storage stage BEFORE the raftlog batch that records the
 * snapshot and drops the replaced entries, once no apply job of the group is
 * in flight; see rt_pump. */
void rt_snap_install_ready(struct runtime *rt, struct rt_group *g, const struct raft_ready *rd)
{
    const struct raft_snapshot *snap = &rd->snapshot;
    struct rt_snap_install *in = calloc(1, sizeof(*in));
    if (in == NULL || (snap->data.len > 0 && (in->data = malloc(snap->data.len)) == NULL)) {
        RT_LOG("fatal", "msg=\"out of memory staging a snapshot\" group=%u", g->id);
        abort();
    }
    in->meta = snap->meta;
    in->len = snap->data.len;
    if (in->len > 0)
        memcpy(in->data, snap->data.base, in->len);
    in->g = g;
    in->next = rt->installs;
    rt->installs = in;

    struct store_snapshot_meta m = {.index = snap->meta.index, .term = snap->meta.term};
    m.conf.n_voters = snap->meta.conf.n_voters;
    m.conf.n_learners = snap->meta.conf.n_learners;
    memcpy(m.conf.voters, snap->meta.conf.voters, m.conf.n_voters * sizeof(uint64_t));
    memcpy(m.conf.learners, snap->meta.conf.learners, m.conf.n_learners * sizeof(uint64_t));
    store_log_batch_put_snapshot_meta(rt->log_batch, g->id, &m);
    store_log_batch_put_conf_state(rt->log_batch, g->id, &m.conf);
    if (g->first_index > 0 && g->stored_last >= g->first_index)
        store_log_batch_delete_entries(rt->log_batch, g->id, g->first_index, g->stored_last + 1);
    g->stored_last = snap->meta.index;
    g->first_index = snap->meta.index + 1;
}

/* The fsm keyspace is per node, keyed by hash slot, so two groups hosted here share the rows of
 * a hash slot while a migration moves it between them. A group giving a slot up (release, abort,
 * a removed replica) leaves its rows alone when another hosted group owns the slot or is
 * receiving it. Apply stage, or with no apply job running (snapshot installs). */
bool rt_slot_claimed_elsewhere(struct runtime *rt, uint32_t group, uint16_t s)
{
    for (size_t i = 1; i < RT_GROUP_SLOTS(rt); i++) {
        const struct rt_group *h = &rt->groups[i];
        if (h->id != group && h->hosted &&
            (slot_group_owns(&h->fsm_state, s) || slot_group_incoming(&h->fsm_state, s)))
            return true;
    }
    return false;
}

/* A snapshot of `group` replaces the rows of hash slot s unless another hosted group has the
 * say over them: one that owns s while `group` does not, or has it fenced (the rows are then
 * the other group's writes, newer than or equal to what the snapshot carries). */
static bool snap_yields(struct runtime *rt, const struct rt_group *g, uint16_t s)
{
    bool writer = slot_group_owns(&g->fsm_state, s) && !slot_group_fenced(&g->fsm_state, s);
    for (size_t i = 1; !writer && i < RT_GROUP_SLOTS(rt); i++) {
        const struct rt_group *h = &rt->groups[i];
        if (h != g && h->hosted && slot_group_owns(&h->fsm_state, s))
            return true;
    }
    return false;
}

/* Clears from slots (a bitmap) every hash slot another hosted group claims (see above). */
static void drop_claimed(struct runtime *rt, const struct rt_group *g, uint8_t slots[32],
                         bool for_snapshot)
{
    for (unsigned s = 0; s < 256; s++) {
        if (!bit(slots, s))
            continue;
        bool keep = for_snapshot ? snap_yields(rt, g, (uint16_t)s)
                                 : rt_slot_claimed_elsewhere(rt, g->id, (uint16_t)s);
        if (keep)
            slots[s / 8] &= (uint8_t) ~(1u << (s % 8));
    }
}

static int delete_owned(struct runtime *rt, struct store_fsm_batch *b, const uint8_t owned[32])
{
    for (unsigned s = 0; s < 256; s++) {
        if (!((owned[s / 8] >> (s % 8)) & 1))
            continue;
        unsigned e = s;
        while (e + 1 < 256 && ((owned[(e + 1) / 8] >> ((e + 1) % 8)) & 1))
            e++;
        uint8_t lo[2], hi[2];
        store_put_u16(lo, (uint16_t)s);
        store_put_u16(hi, e == 255 ? 0xFFFF : (uint16_t)(e + 1)); /* 0xFFFF: group metadata */
        int rc = store_fsm_batch_delete_range(rt->store, b, lo, 2, hi, 2, SNAP_DELETE_KEYS_MAX);
        if (rc != 0)
            return rc;
        s = e;
    }
    return 0;
}

/* Closes a replica this node no longer holds (a finished replica move took it away) and
 * deletes its rows, group metadata and raft log, so a later replica of the group here starts
 * empty. Loop thread; the caller checked that no batch or snapshot uses g and that no apply job
 * runs or waits and no snapshot install is staged (those read every hosted group's fsm_state,
 * which this reads and zeroes). */
void rt_group_close_removed(struct runtime *rt, struct rt_group *g)
{
    RT_ASSERT_LOOP(rt);
    assert(rt_apply_idle(rt) && rt->installs == NULL && g->apply_jobs == 0);
    atomic_store_explicit(&g->hosted, false, memory_order_seq_cst);
    atomic_fetch_add_explicit(&g->read_seq, 1, memory_order_seq_cst); /* odd: rows go */
    rt_watch_reset(rt, g->id, 0, false);
    /* Appended proposals may still commit on the replicas that stay. */
    rt_fail_list(&g->proposals, SLOTD_EUNKNOWN_OUTCOME,
                 "the replica left this node; the proposal may or may not commit");
    rt_lease_clear(g);
    rt_fail_list(&g->waiting_reads, SLOTD_ENOT_LEADER, "the replica left this node");
    while (g->rounds != NULL) {
        struct rt_read_round *r = g->rounds;
        g->rounds = r->next;
        rt_fail_list(&r->reads, SLOTD_ENOT_LEADER, "the replica left this node");
        free(r);
    }
    /* The tombstone (store_tombstone): the term and vote, and the last log position this
     * replica ever held, so that a replica of the group created here again votes as this one
     * would have (raft_config.vote_floor_*). */
    struct store_tombstone tomb = {0};
    if (store_log_load_tombstone(rt->store, g->id, &tomb) != 0)
        memset(&tomb, 0, sizeof(tomb));
    {
        struct raft_status rs;
        raft_status(g->raft, &rs);
        const struct raft_storage *ms = raft_mem_storage_get(g->mem);
        raft_index last = 0;
        raft_term last_term = 0;
        if (ms->last_index(ms->ctx, &last) != 0 || ms->term(ms->ctx, last, &last_term) != 0)
            last = last_term = 0;
        if (rs.term >= tomb.term) {
            tomb.vote = rs.term > tomb.term || rs.vote != 0 ? rs.vote : tomb.vote;
            tomb.term = rs.term;
        }
        if (last_term > tomb.floor_term ||
            (last_term == tomb.floor_term && last > tomb.floor_index)) {
            tomb.floor_index = last;
            tomb.floor_term = last_term;
        }
    }
    raft_free(g->raft);
    raft_mem_storage_free(g->mem);
    free(g->snap_recv.data);
    struct store_fsm_batch *b = NULL;
    int rc = store_fsm_batch_new(&b);
    if (rc == 0 && g->id != 0) {
        uint8_t rows[32];
        snap_slots(&g->fsm_state, rows);
        drop_claimed(rt, g, rows, false);
        rc = delete_owned(rt, b, rows);
    }
    if (rc == 0) {
        uint8_t k[STORE_GROUP_META_KEY_LEN];
        store_key_group_meta(k, g->id, SLOT_GROUP_META_OWNED);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_key_group_meta(k, g->id, SLOT_GROUP_META_MIGRATION);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_key_group_meta(k, g->id, SLOT_GROUP_META_SNAPSHOT);
        store_fsm_batch_delete(b, k, sizeof(k));
        store_fsm_batch_set_applied(b, g->id, 0);
        rc = store_fsm_write(rt->store, b, true);
    }
    store_fsm_batch_free(b);
    slot_fsm_forget_rows(rt->fsm); /* the apply's cached versions of the deleted rows */
    atomic_fetch_add_explicit(&g->read_seq, 1, memory_order_release); /* even: rows are gone */
    struct store_log_batch *lb = NULL;
    if (rc == 0)
        rc = store_log_batch_new(&lb);
    if (rc == 0) {
        store_log_batch_delete_group(rt->store, lb, g->id);
        store_log_batch_put_tombstone(lb, g->id, &tomb);
        rc = store_log_write(rt->store, lb, true);
    }
    store_log_batch_free(lb);
    if (rc != 0)
        RT_LOG("error", "msg=\"removed replica: deleting its data failed\" group=%u err=\"%s\"",
               g->id, store_strerror(rc));
    metrics_gauge_set(g->metrics.is_leader, 0);
    /* GRPC threads that saw hosted before it was cleared may still read the atomics: they are
     * reset atomically; the rest only this thread touches now. id stays. */
    atomic_store_explicit(&g->leader, 0, memory_order_relaxed);
    atomic_store_explicit(&g->commit, 0, memory_order_relaxed);
    atomic_store_explicit(&g->applied, 0, memory_order_relaxed);
    atomic_store_explicit(&g->pub_term, 0, memory_order_relaxed);
    struct rt_group_metrics m = g->metrics;
    memset(&g->raft, 0, sizeof(*g) - offsetof(struct rt_group, raft));
    g->metrics = m;
    uint32_t id = g->id;
    RT_LOG("info", "msg=\"replica removed from this node\" node=%llu group=%u",
           (unsigned long long)rt->opts.node_id, id);
}

/* Storage stage: replaces the group's rows with the snapshot's in one synced
 * batch carrying the applied index and the snapshot's raft position, then sets the group's
 * fsm_state and apply position (struct rt_group: the storage stage writes them here because
 * installs_blocked kept every apply job out, and none starts until storage_done). */
int rt_snap_install_rows(struct runtime *rt, struct rt_group *g, struct rt_snap_install *in)
{
    RT_ASSERT_NOT_LOOP(rt);
    if (g->id == 0)
        return rt_ctl_install(rt, g, in->data, in->len, &in->meta);
    const uint8_t *p = in->data, *end = in->data + in->len;
    uint8_t owned[32] = {0}, both[32];
    uint8_t mk[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(mk, g->id, SLOT_GROUP_META_OWNED);
    /* The first row is the group's ownership record. */
    if (end - p < 8 || store_get_u32(p) != sizeof(mk) || memcmp(p + 4, mk, sizeof(mk)) != 0 ||
        store_get_u32(p + 4 + sizeof(mk)) != 1 + sizeof(owned))
        return STORE_ECORRUPT;
    memcpy(owned, p + 8 + sizeof(mk) + 1, sizeof(owned));
    /* Then, from snapshots that carry it, the migration record. */
    struct slot_group_state mig;
    memset(&mig, 0, sizeof(mig));
    uint8_t gk[STORE_GROUP_META_KEY_LEN];
    store_key_group_meta(gk, g->id, SLOT_GROUP_META_MIGRATION);
    const uint8_t *q = p + 8 + sizeof(mk) + 1 + sizeof(owned);
    bool has_mig =
        end - q >= 8 && store_get_u32(q) == sizeof(gk) && memcmp(q + 4, gk, sizeof(gk)) == 0;
    if (has_mig &&
        ((size_t)(end - q) < 8 + sizeof(gk) + SLOT_GROUP_META_MIGRATION_LEN ||
         store_get_u32(q + 4 + sizeof(gk)) != SLOT_GROUP_META_MIGRATION_LEN ||
         slot_group_migration_decode(q + 8 + sizeof(gk), SLOT_GROUP_META_MIGRATION_LEN, &mig) != 0))
        return STORE_ECORRUPT;
    uint8_t rows[32], snap_rows[32]; /* hash slots whose rows the snapshot carries / we write */
    for (size_t i = 0; i < sizeof(both); i++) {
        snap_rows[i] = rows[i] = owned[i] | mig.incoming[i];
        both[i] = rows[i] | g->fsm_state.owned[i] | g->fsm_state.incoming[i];
    }
    struct store_fsm_batch *b;
    int rc = store_fsm_batch_new(&b);
    if (rc != 0)
        return rc;
    /* Hash slots whose rows another hosted group has the say over are neither deleted nor
     * written (a migration between two groups hosted here). */
    uint8_t mine[32];
    for (size_t i = 0; i < sizeof(mine); i++)
        mine[i] = 0xFF;
    drop_claimed(rt, g, mine, true);
    for (size_t i = 0; i < sizeof(both); i++) {
        both[i] &= mine[i];
        rows[i] &= mine[i];
    }
    rc = delete_owned(rt, b, both);
    if (rc == 0 && !has_mig)
        store_fsm_batch_delete(b, gk, sizeof(gk));
    while (rc == 0 && p < end) {
        if (end - p < 4)
            rc = STORE_ECORRUPT;
        size_t kl = rc ? 0 : store_get_u32(p);
        if (rc == 0 && (size_t)(end - p) < 8 + kl)
            rc = STORE_ECORRUPT;
        size_t vl = rc ? 0 : store_get_u32(p + 4 + kl);
        if (rc == 0 && (size_t)(end - p) < 8 + kl + vl)
            rc = STORE_ECORRUPT;
        if (rc != 0)
            break;
        const uint8_t *k = p + 4, *v = p + 8 + kl;
        bool meta = kl == sizeof(mk) && (memcmp(k, mk, kl) == 0 || memcmp(k, gk, kl) == 0);
        uint16_t hs = kl >= 2 ? store_get_u16(k) : 0xFFFF;
        if (!meta && (hs >= 256 || !bit(snap_rows, hs)))
            rc = STORE_ECORRUPT; /* a row outside the snapshot's own hash slots */
        else if (meta || bit(rows, hs))
            store_fsm_batch_put(b, k, kl, v, vl);
        p += 8 + kl + vl;
    }
    if (rc == 0) {
        /* The snapshot's raft position, so a restart that finds the rows but not
         * the raftlog batch written after them can rebuild the log position. */
        uint8_t pk[STORE_GROUP_META_KEY_LEN], pv[17];
        store_key_group_meta(pk, g->id, SLOT_GROUP_META_SNAPSHOT);
        pv[0] = STORE_VALUE_VERSION;
        store_put_u64(pv + 1, in->meta.index);
        store_put_u64(pv + 9, in->meta.term);
        store_fsm_batch_put(b, pk, sizeof(pk), pv, sizeof(pv));
        store_fsm_batch_set_applied(b, g->id, in->meta.index);
        rc = store_fsm_write(rt->store, b, true);
    }
    store_fsm_batch_free(b);
    slot_fsm_forget_rows(rt->fsm); /* the apply's cached versions of the replaced rows */
    if (rc != 0)
        return rc;
    SLOTD_FAULT_NOTE_FSM_SYNCED(rt->data_dir);
    SLOTD_CRASH_POINT("snapshot_after_fsm_rows"); /* rows synced, raftlog batch not written */
    memcpy(g->fsm_state.owned, owned, sizeof(owned));
    memcpy(g->fsm_state.fenced, mig.fenced, sizeof(mig.fenced));
    memcpy(g->fsm_state.incoming, mig.incoming, sizeof(mig.incoming));
    g->fsm_state.migration_task = mig.migration_task;
    g->fsm_state.migration_chunks = mig.migration_chunks;
    g->fsm_state.migration_rows = mig.migration_rows;
    g->fsm_state.migration_crc = mig.migration_crc;
    g->fsm_state.initialized = true;
    g->apply_index = in->meta.index;
    g->apply_term = in->meta.term;
    g->apply_conf = in->meta.conf;
    rt_facts_publish_slots(g);
    return 0;
}

/* ---- Dispatch (loop thread) ---- */

static void transfer_all(struct runtime *rt)
{
    for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++) {
        struct rt_group *g = &rt->groups[i];
        if (!g->hosted || g->role != RAFT_LEADER)
            continue;
        struct raft_status st;
        raft_status(g->raft, &st);
        raft_id best = 0;
        for (size_t p = 0; p < st.n_progress; p++) {
            const struct raft_progress_status *ps = &st.progress[p];
            if (ps->id == rt->opts.node_id || ps->learner || !ps->recent_active)
                continue;
            if (best == 0 || ps->match == st.last_index)
                best = ps->id;
            if (ps->match == st.last_index)
                break;
        }
        if (best != 0 && rt_transfer_leader(g, best) == 0)
            g->transferring = true;
    }
}

void rt_handle_peer_request(struct runtime *rt, struct rt_request *r)
{
    RT_ASSERT_LOOP(rt);
    switch (r->kind) {
    case RT_RAFT_BATCH:
        step_batch(rt, r->data, r->len, r->min_applied);
        break;
    case RT_UNREACHABLE:
        for (size_t i = 0; i < RT_GROUP_SLOTS(rt); i++)
            if (rt->groups[i].hosted)
                raft_report_unreachable(rt->groups[i].raft, r->min_applied);
        drop_unreachable_leader(rt, r->min_applied);
        break;
    case RT_SNAP_CHUNK:
        recv_chunk(rt, r);
        break;
    case RT_SNAP_SENT:
        chunk_sent(rt, r->index, r->min_applied != 0);
        break;
    case RT_GROUP_STATUS:
        merge_group_status(rt, r->data, r->len);
        break;
    case RT_TRANSFER:
        transfer_all(rt);
        break;
    case RT_CTL_STATE:
        rt_ctl_mirror_reply(rt, r->data, r->len);
        break;
    default:
        break;
    }
    free(r);
}
