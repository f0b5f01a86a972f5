/* migrate.c - the hash-slot migration executor (loop thread, on the source group's leader):
 * fence the slots, copy their rows into the target group's raft log, have the target accept
 * them, and after the controller switched the table release the source (docs/operations.md). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/grpc.h>
#include <pthread.h>

#include "service/controller/controller.h"
#include "service/fault/fault.h"
#include "service/executor/executor_internal.h"
#include "raft/raft.h"
#include "service/route/route.h"
#include "service/slot/slot.h"
#include "service/transport/transport.h"
#include "slotd/internal/v1/log.pb-c.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"
#include "store/keys.h"
#include "store/store.h"

/* A chunk closes once it holds this many row bytes (or rows); one row may exceed it alone. */
#define MIG_CHUNK_BYTES (256u << 10)
#define MIG_CHUNK_ROWS 2048u
#define MIG_CALL_TIMEOUT_MS 10000
/* After the table switch, the source keeps its fenced copy this long before releasing it, so
 * nodes still routing by the previous table get HASH_SLOT_FENCED (retriable) rather than
 * WRONG_GROUP; mirrors poll the controller every 500 ms. */
#define MIG_RELEASE_GRACE_MS 2000
#define MIG_PROGRESS_EVERY_MS 1000
#define MIG_RETRY_MS 500
static const char MIG_METHOD[] = "/slotd.internal.v1.Peer/MigrationPropose";

/* One call in flight: the callback (any thread) fills the answer under exec_migration.mu. */
struct mig_ticket {
    struct exec_migration *m;
    uint64_t seq;
};

static bool slot_in(const uint8_t bitmap[32], unsigned s)
{
    return (bitmap[s / 8] >> (s % 8)) & 1;
}

static void on_reply(void *arg, int status, const char *message, const uint8_t *resp,
                     size_t resp_len, const uint8_t *details, size_t details_len)
{
    (void)details;
    (void)details_len;
    struct mig_ticket *tk = arg;
    struct exec_migration *m = tk->m;
    uint64_t index = 0;
    if (status == GRPC_STATUS_OK) {
        Slotd__V1__ProposeResponse *r = slotd__v1__propose_response__unpack(NULL, resp_len, resp);
        if (r != NULL) {
            index = r->applied_index;
            slotd__v1__propose_response__free_unpacked(r, NULL);
        } else {
            status = GRPC_STATUS_INTERNAL;
            message = "undecodable ProposeResponse";
        }
    }
    pthread_mutex_lock(&m->mu);
    if (tk->seq == m->call_seq) {
        m->reply_ready = true;
        m->reply_status = status;
        m->reply_index = index;
        snprintf(m->reply_message, sizeof(m->reply_message), "%s", message ? message : "");
    }
    pthread_mutex_unlock(&m->mu);
    free(tk);
}

/* The leader of group as this node sees it (0 = unknown). */
static uint64_t leader_of(struct executor *ex, uint32_t group)
{
    const struct rt_group *hosted = engine_group(ex->rt, group);
    if (hosted != NULL && engine_group_hosted(hosted))
        return engine_group_leader(ex->rt, group);
    uint64_t leader = 0;
    struct route_snapshot *rs = route_table_acquire(engine_routes(ex->rt));
    const struct route_group *g = rs ? route_snapshot_group(rs, group) : NULL;
    if (g != NULL)
        leader = g->leader;
    route_snapshot_release(rs);
    return leader;
}

/* Proposes a packed LogCommand to group through its leader `to` (this node: a local call).
 * Returns 0 when a call is in flight (its answer arrives in m), else -1 with m->error set. */
static int send_entry(struct executor *ex, struct exec_migration *m, uint32_t group, uint64_t to,
                      const uint8_t *entry, size_t len)
{
    struct mig_ticket *tk = malloc(sizeof(*tk));
    if (tk == NULL || to == 0) {
        free(tk);
        snprintf(m->error, sizeof(m->error), "group %u has no known leader", group);
        return -1;
    }
    pthread_mutex_lock(&m->mu);
    tk->m = m;
    tk->seq = ++m->call_seq;
    m->reply_ready = false;
    pthread_mutex_unlock(&m->mu);
    m->call_to = to;
    m->call_deadline_ms = engine_now_ms() + MIG_CALL_TIMEOUT_MS + 1000;
    if (to == ex->opts->node_id) {
        struct rpc_call *call =
            rpc_call_new_local(MIG_METHOD, engine_now_ms() + MIG_CALL_TIMEOUT_MS, on_reply, tk);
        if (call == NULL) {
            free(tk);
            snprintf(m->error, sizeof(m->error), "out of memory");
            return -1;
        }
        struct slotd_error err;
        if (runtime_submit_propose(ex->rt, group, entry, len, call, &err) != 0)
            rpc_call_fail(call, &err); /* answers through on_reply now */
        return 0;
    }
    Slotd__Internal__V1__MigrationProposeRequest q =
        SLOTD__INTERNAL__V1__MIGRATION_PROPOSE_REQUEST__INIT;
    q.group_id = group;
    q.entry.data = (uint8_t *)entry;
    q.entry.len = len;
    size_t n = slotd__internal__v1__migration_propose_request__get_packed_size(&q);
    uint8_t *buf = malloc(n ? n : 1);
    int rc = -1;
    struct transport *transport = engine_transport(ex->rt);
    if (buf != NULL && transport != NULL) {
        slotd__internal__v1__migration_propose_request__pack(&q, buf);
        rc = transport_call(transport, to, MIG_METHOD, buf, n,
                            engine_now_ms() + MIG_CALL_TIMEOUT_MS, on_reply, tk);
    }
    free(buf);
    if (rc != 0) {
        free(tk);
        snprintf(m->error, sizeof(m->error), "cannot call node %llu", (unsigned long long)to);
        return -1;
    }
    return 0;
}

/* The answer of the call in flight: 1 = OK (*index set), -1 = failed (m->error says why),
 * 0 = still waiting. */
static int take_reply(struct executor *ex, struct exec_migration *m, uint64_t *index)
{
    pthread_mutex_lock(&m->mu);
    bool ready = m->reply_ready;
    int status = m->reply_status;
    *index = m->reply_index;
    if (ready) {
        m->reply_ready = false;
        m->call_seq++; /* the call is over: nothing else is awaited */
    }
    char msg[sizeof(m->reply_message)];
    memcpy(msg, m->reply_message, sizeof(msg));
    pthread_mutex_unlock(&m->mu);
    m->in_flight = m->in_flight && !ready;
    if (!ready) {
        if (m->in_flight && engine_now_ms() > m->call_deadline_ms) {
            pthread_mutex_lock(&m->mu);
            m->call_seq++; /* a late answer is ignored */
            pthread_mutex_unlock(&m->mu);
            m->in_flight = false;
            snprintf(m->error, sizeof(m->error), "node %llu did not answer",
                     (unsigned long long)m->call_to);
            return -1;
        }
        return 0;
    }
    if (status != GRPC_STATUS_OK) {
        snprintf(m->error, sizeof(m->error), "node %llu: %s", (unsigned long long)m->call_to, msg);
        return -1;
    }
    return 1;
}

/* Packs a LogCommand carrying one migration command (cmd set by the caller) and sends it. */
static int send_command(struct executor *ex, struct exec_migration *m, uint32_t group, uint64_t to,
                        Slotd__Internal__V1__LogCommand *c)
{
    size_t n = slotd__internal__v1__log_command__get_packed_size(c);
    uint8_t *buf = malloc(n ? n : 1);
    if (buf == NULL) {
        snprintf(m->error, sizeof(m->error), "out of memory");
        return -1;
    }
    slotd__internal__v1__log_command__pack(c, buf);
    int rc = send_entry(ex, m, group, to, buf, n);
    free(buf);
    m->in_flight = rc == 0;
    return rc;
}

/* fence / release / abort: {task_id, hash_slots} alike. */
static int send_simple(struct executor *ex, struct exec_migration *m, const struct ctl_task *t,
                       Slotd__Internal__V1__LogCommand__CommandCase which, uint32_t group,
                       uint64_t to)
{
    Slotd__Internal__V1__LogCommand c = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    Slotd__Internal__V1__MigrationFence fence = SLOTD__INTERNAL__V1__MIGRATION_FENCE__INIT;
    Slotd__Internal__V1__MigrationRelease rel = SLOTD__INTERNAL__V1__MIGRATION_RELEASE__INIT;
    Slotd__Internal__V1__MigrationAbort ab = SLOTD__INTERNAL__V1__MIGRATION_ABORT__INIT;
    ProtobufCBinaryData slots = {.len = sizeof(t->hash_slots), .data = (uint8_t *)t->hash_slots};
    c.command_case = which;
    switch (which) {
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_FENCE:
        fence.task_id = t->id;
        fence.hash_slots = slots;
        c.migration_fence = &fence;
        break;
    case SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_RELEASE:
        rel.task_id = t->id;
        rel.hash_slots = slots;
        c.migration_release = &rel;
        break;
    default:
        ab.task_id = t->id;
        ab.hash_slots = slots;
        c.migration_abort = &ab;
        break;
    }
    return send_command(ex, m, group, to, &c);
}

/* Rows of t's slots from slot from_slot, after the key `after` (NULL: from the slot's start), in
 * key order: calls cb for each until it returns non-zero (then returns 1) or the rows end
 * (returns 0); -1 on a store error. */
typedef int (*row_cb)(void *arg, const void *k, size_t kl, const void *v, size_t vl);

static int scan_rows(struct executor *ex, const struct ctl_task *t, unsigned from_slot,
                     const uint8_t *after, size_t after_len, row_cb cb, void *arg)
{
    for (unsigned s = from_slot; s < CTL_HASH_SLOTS; s++) {
        if (!slot_in(t->hash_slots, s))
            continue;
        uint8_t lo_buf[STORE_FSM_KEY_MAX + 1], hi[2];
        size_t lol = 2;
        store_put_u16(lo_buf, (uint16_t)s);
        if (s == from_slot && after != NULL) {
            memcpy(lo_buf, after, after_len); /* the smallest key after `after` */
            lo_buf[after_len] = 0;
            lol = after_len + 1;
        }
        store_put_u16(hi, s == 255 ? 0xFFFF : (uint16_t)(s + 1)); /* 0xFFFF: group metadata */
        struct store_iter *it;
        if (store_fsm_iter_new(engine_store(ex->rt), lo_buf, lol, hi, 2, &it) != 0)
            return -1;
        int rc = 0;
        for (; rc == 0 && store_iter_valid(it); store_iter_next(it)) {
            size_t kl, vl;
            const void *k = store_iter_key(it, &kl);
            const void *v = store_iter_value(it, &vl);
            rc = cb(arg, k, kl, v, vl);
        }
        int st = store_iter_status(it);
        store_iter_free(it);
        if (st != 0)
            return -1;
        if (rc != 0)
            return 1;
    }
    return 0;
}

static int count_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    (void)k;
    (void)v;
    struct exec_migration *m = arg;
    m->bytes_total += kl + vl;
    m->rows_total++;
    return 0;
}

/* A chunk being built: rows copied out of the iterator. */
struct chunk {
    Slotd__Internal__V1__MigrationRow *rows;
    Slotd__Internal__V1__MigrationRow **ptrs;
    size_t n, bytes;
    uint32_t crc;
    const void *last_key;
    size_t last_kl;
    bool oom;
};

static int add_row(void *arg, const void *k, size_t kl, const void *v, size_t vl)
{
    struct chunk *c = arg;
    if (c->n == MIG_CHUNK_ROWS || (c->n > 0 && c->bytes + kl + vl > MIG_CHUNK_BYTES))
        return 1; /* full: this row starts the next chunk */
    uint8_t *copy = malloc(kl + vl + 1);
    if (copy == NULL) {
        c->oom = true;
        return 1;
    }
    memcpy(copy, k, kl);
    memcpy(copy + kl, v, vl);
    Slotd__Internal__V1__MigrationRow *r = &c->rows[c->n];
    slotd__internal__v1__migration_row__init(r);
    r->key.data = copy;
    r->key.len = kl;
    r->value.data = copy + kl;
    r->value.len = vl;
    c->ptrs[c->n++] = r;
    c->bytes += kl + vl;
    c->crc = slot_migration_row_crc(c->crc, k, kl, v, vl);
    c->last_key = copy;
    c->last_kl = kl;
    return 0;
}

static void chunk_free(struct chunk *c)
{
    for (size_t i = 0; i < c->n; i++)
        free(c->rows[i].key.data);
    free(c->rows);
    free(c->ptrs);
}

/* Builds and sends the next chunk of rows (seq m->seq) to the target's leader. */
static int send_chunk(struct executor *ex, struct exec_migration *m, const struct ctl_task *t)
{
    struct chunk c = {0};
    c.rows = calloc(MIG_CHUNK_ROWS, sizeof(*c.rows));
    c.ptrs = calloc(MIG_CHUNK_ROWS, sizeof(*c.ptrs));
    c.crc = m->crc;
    if (c.rows == NULL || c.ptrs == NULL) {
        chunk_free(&c);
        snprintf(m->error, sizeof(m->error), "out of memory");
        return -1;
    }
    int rc = scan_rows(ex, t, m->cursor_slot, m->cursor_len ? m->cursor : NULL, m->cursor_len,
                       add_row, &c);
    if (rc < 0 || c.oom) {
        chunk_free(&c);
        snprintf(m->error, sizeof(m->error), "reading the source rows: %s",
                 c.oom ? "out of memory" : store_errmsg(engine_store(ex->rt)));
        return -1;
    }
    Slotd__Internal__V1__MigrationRows rows = SLOTD__INTERNAL__V1__MIGRATION_ROWS__INIT;
    rows.task_id = t->id;
    rows.source_group = t->group;
    rows.hash_slots.data = (uint8_t *)t->hash_slots;
    rows.hash_slots.len = sizeof(t->hash_slots);
    rows.seq = m->seq;
    rows.n_rows = c.n;
    rows.rows = c.ptrs;
    Slotd__Internal__V1__LogCommand cmd = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
    cmd.command_case = SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ROWS;
    cmd.migration_rows = &rows;
    int sent = send_command(ex, m, t->to_group, leader_of(ex, t->to_group), &cmd);
    if (sent == 0) {
        /* Where the next chunk starts, once this one is acknowledged. */
        m->pending_last = rc == 0; /* the rows ended inside this chunk */
        m->pending_rows = c.n;
        m->pending_bytes = c.bytes;
        m->pending_crc = c.crc;
        m->pending_slot = c.n > 0 ? store_get_u16(c.last_key) : m->cursor_slot;
        m->pending_len = c.n > 0 ? c.last_kl : m->cursor_len;
        if (c.n > 0)
            memcpy(m->pending_key, c.last_key, c.last_kl);
        else
            memcpy(m->pending_key, m->cursor, m->cursor_len);
    }
    chunk_free(&c);
    return sent;
}

static void reset_copy(struct exec_migration *m)
{
    m->fenced_here = false;
    m->copy_done = false;
    m->seq = 0;
    m->rows = 0;
    m->crc = 0;
    m->bytes_sent = 0;
    m->bytes_total = 0;
    m->rows_total = 0;
    m->cursor_slot = 0;
    m->cursor_len = 0;
}

static struct exec_migration *slot_for(struct executor *ex, const struct ctl_task *t)
{
    struct exec_migration *free_m = NULL, *oldest = &ex->migrations[0];
    for (size_t i = 0; i < EXEC_MIGRATIONS_MAX; i++) {
        struct exec_migration *m = &ex->migrations[i];
        if (m->task == t->id)
            return m;
        if (m->task == 0 && free_m == NULL)
            free_m = m;
        if (m->used_ms < oldest->used_ms)
            oldest = m;
    }
    struct exec_migration *m = free_m ? free_m : oldest;
    pthread_mutex_lock(&m->mu);
    m->call_seq++; /* answers to the previous owner's calls are ignored */
    m->reply_ready = false;
    pthread_mutex_unlock(&m->mu);
    m->task = t->id;
    m->attempt = 0;
    m->phase = UINT32_MAX;
    m->in_flight = false;
    m->aborted = false;
    m->abort_attempt = 0;
    return m;
}

/* A new (task, attempt, phase) starts from nothing. */
static void enter(struct exec_migration *m, const struct ctl_task *t)
{
    if (m->attempt == t->attempt && m->phase == t->phase_index)
        return;
    if (m->in_flight) {
        pthread_mutex_lock(&m->mu);
        m->call_seq++;
        pthread_mutex_unlock(&m->mu);
        m->in_flight = false;
    }
    m->attempt = t->attempt;
    m->phase = t->phase_index;
    m->next_ms = 0;
    m->next_progress_ms = 0;
    m->error[0] = '\0';
    reset_copy(m);
}

static void report(struct executor *ex, struct exec_migration *m, const struct ctl_task *t,
                   bool now)
{
    if (!now && engine_now_ms() < m->next_progress_ms)
        return;
    m->next_progress_ms = engine_now_ms() + MIG_PROGRESS_EVERY_MS;
    struct ctl_task_progress pr = {.bytes_sent = m->bytes_sent, .bytes_total = m->bytes_total};
    char *cmd = NULL;
    ctl_cmd_task_progress(t->id, t->attempt, t->phase_index, &pr, engine_wall_ms(), 0, &cmd);
    engine_ctl_submit(ex->rt, cmd, "task_progress");
}

static void prove(struct executor *ex, struct rt_group *g, const struct ctl_task *t, uint64_t index,
                  uint64_t leader)
{
    struct raft_status st;
    raft_status(engine_group_raft(g), &st);
    struct ctl_task_proof p;
    memset(&p, 0, sizeof(p));
    p.config_index = index;
    p.leader = leader;
    p.commit = st.commit;
    p.n_voters = st.conf.n_voters < CTL_REPLICAS_MAX ? st.conf.n_voters : CTL_REPLICAS_MAX;
    memcpy(p.voters, st.conf.voters, p.n_voters * sizeof(uint64_t));
    executor__task_advance(ex, t, &p);
}

/* A call failed: remember why, try again a little later. */
static void retry_later(struct exec_migration *m, const struct ctl_task *t, const char *what)
{
    m->next_ms = engine_now_ms() + MIG_RETRY_MS;
    EXEC_LOG("debug", "msg=\"migration step failed\" task=%llu step=%s err=\"%s\"",
             (unsigned long long)t->id, what, m->error);
}

static void step_copy(struct executor *ex, struct exec_migration *m, struct rt_group *g,
                      const struct ctl_task *t)
{
    uint64_t index;
    int r = m->in_flight ? take_reply(ex, m, &index) : 0;
    if (r < 0) {
        const char *what = !m->fenced_here ? "fence" : !m->copy_done ? "rows" : "accept";
        reset_copy(m); /* a lost chunk or a new target leader: copy again from chunk 0 */
        retry_later(m, t, what);
        return;
    }
    if (m->in_flight)
        return;
    if (r > 0 && !m->fenced_here) {
        /* The fence applied here: the slots' rows are final; count them once. */
        m->fenced_here = true;
        if (scan_rows(ex, t, 0, NULL, 0, count_row, m) < 0) {
            snprintf(m->error, sizeof(m->error), "reading the source rows: %s",
                     store_errmsg(engine_store(ex->rt)));
            reset_copy(m);
            retry_later(m, t, "count");
            return;
        }
        EXEC_LOG("info",
                 "msg=\"migration copy starts\" task=%llu from=%u to=%u rows=%llu bytes=%llu",
                 (unsigned long long)t->id, t->group, t->to_group,
                 (unsigned long long)m->rows_total, (unsigned long long)m->bytes_total);
    } else if (r > 0 && !m->copy_done) {
        m->seq++;
        m->rows += m->pending_rows;
        m->bytes_sent += m->pending_bytes;
        m->crc = m->pending_crc;
        m->cursor_slot = m->pending_slot;
        m->cursor_len = m->pending_len;
        memcpy(m->cursor, m->pending_key, m->pending_len);
        m->copy_done = m->pending_last;
    } else if (r > 0) {
        SLOTD_CRASH_POINT("migration_before_copy_advance");
        EXEC_LOG("info", "msg=\"migration accepted\" task=%llu group=%u index=%llu rows=%llu",
                 (unsigned long long)t->id, t->to_group, (unsigned long long)index,
                 (unsigned long long)m->rows);
        report(ex, m, t, true); /* the final figures, before the phase moves on */
        prove(ex, g, t, index, m->call_to);
        m->next_ms = engine_now_ms() + MIG_RETRY_MS * 3; /* the advance is on its way */
        return;
    }
    if (engine_now_ms() < m->next_ms)
        return;
    if (m->fenced_here)
        report(ex, m, t, false);
    if (!m->fenced_here) {
        /* Fence again (a no-op once applied): its answer proves this replica applied it. */
        if (send_simple(ex, m, t, SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_FENCE,
                        t->group, ex->opts->node_id) != 0)
            retry_later(m, t, "fence");
    } else if (!m->copy_done) {
        if (send_chunk(ex, m, t) != 0)
            retry_later(m, t, "rows");
    } else {
        Slotd__Internal__V1__MigrationAccept acc = SLOTD__INTERNAL__V1__MIGRATION_ACCEPT__INIT;
        acc.task_id = t->id;
        acc.hash_slots.data = (uint8_t *)t->hash_slots;
        acc.hash_slots.len = sizeof(t->hash_slots);
        acc.chunks = m->seq;
        acc.rows = m->rows;
        acc.checksum = m->crc;
        Slotd__Internal__V1__LogCommand c = SLOTD__INTERNAL__V1__LOG_COMMAND__INIT;
        c.command_case = SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ACCEPT;
        c.migration_accept = &acc;
        if (send_command(ex, m, t->to_group, leader_of(ex, t->to_group), &c) != 0)
            retry_later(m, t, "accept");
    }
}

/* fence and release: one entry to the source group (this node leads it), then the proof. */
static void step_one_entry(struct executor *ex, struct exec_migration *m, struct rt_group *g,
                           const struct ctl_task *t,
                           Slotd__Internal__V1__LogCommand__CommandCase which, const char *what)
{
    uint64_t index;
    int r = m->in_flight ? take_reply(ex, m, &index) : 0;
    if (r < 0) {
        retry_later(m, t, what);
        return;
    }
    if (r > 0) {
        EXEC_LOG("info", "msg=\"migration %s applied\" task=%llu group=%u index=%llu", what,
                 (unsigned long long)t->id, t->group, (unsigned long long)index);
        prove(ex, g, t, index, ex->opts->node_id);
        m->next_ms = engine_now_ms() + MIG_RETRY_MS * 3;
        return;
    }
    if (m->in_flight || engine_now_ms() < m->next_ms)
        return;
    if (send_simple(ex, m, t, which, t->group, ex->opts->node_id) != 0)
        retry_later(m, t, what);
}

/* A migration that failed before the table switch: the target drops what it received, then the
 * source lifts its fence, once per attempt on this leader (both entries are idempotent). */
static void step_failed(struct executor *ex, struct exec_migration *m, const struct ctl_task *t)
{
    if (m->abort_attempt != t->attempt) {
        if (m->in_flight) {
            pthread_mutex_lock(&m->mu);
            m->call_seq++;
            pthread_mutex_unlock(&m->mu);
            m->in_flight = false;
        }
        m->abort_attempt = t->attempt;
        m->abort_step = 0;
        m->aborted = false;
        m->next_ms = 0;
        m->attempt = 0; /* a retry starts its phases afresh */
        m->phase = UINT32_MAX;
    }
    if (m->aborted)
        return;
    uint64_t index;
    int r = m->in_flight ? take_reply(ex, m, &index) : 0;
    if (r < 0) {
        retry_later(m, t, "abort");
        return;
    }
    if (r > 0 && ++m->abort_step == 2) {
        m->aborted = true;
        EXEC_LOG("info", "msg=\"migration aborted: the source owns its slots again\" task=%llu",
                 (unsigned long long)t->id);
        return;
    }
    if (m->in_flight || engine_now_ms() < m->next_ms)
        return;
    uint32_t group = m->abort_step == 0 ? t->to_group : t->group;
    uint64_t to = m->abort_step == 0 ? leader_of(ex, t->to_group) : ex->opts->node_id;
    if (send_simple(ex, m, t, SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_ABORT, group,
                    to) != 0)
        retry_later(m, t, "abort");
}

void executor__migration_step(struct executor *ex, const struct ctl_task *t)
{
    struct rt_group *g = engine_group(ex->rt, t->group);
    if (g == NULL || !engine_group_hosted(g) || engine_group_raft(g) == NULL ||
        !engine_group_leading(g))
        return;
    bool running = t->status == CTL_TASK_RUNNING;
    bool failed_before_switch =
        t->status == CTL_TASK_FAILED && t->phase_index <= CTL_PHASE_MIGRATION_COPY;
    if (!running && !failed_before_switch)
        return;
    struct exec_migration *m = slot_for(ex, t);
    m->used_ms = engine_now_ms();
    if (failed_before_switch) {
        step_failed(ex, m, t);
        return;
    }
    enter(m, t);
    /* release needs nothing but this leader (the table already moved): it is retried until it
     * applies, never failed, so the source cannot keep a fenced copy after the switch. */
    if (t->phase_index != CTL_PHASE_MIGRATION_RELEASE && executor__task_stuck(ex, t)) {
        char why[sizeof(m->error) + 64];
        snprintf(why, sizeof(why), "no progress within the phase timeout%s%s",
                 m->error[0] ? ": " : "", m->error);
        executor__task_fail(ex, t, why);
        m->next_ms = engine_now_ms() + MIG_RETRY_MS * 3;
        return;
    }
    switch (t->phase_index) {
    case CTL_PHASE_MIGRATION_FENCE:
        step_one_entry(ex, m, g, t, SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_FENCE,
                       "fence");
        break;
    case CTL_PHASE_MIGRATION_COPY:
        step_copy(ex, m, g, t);
        break;
    case CTL_PHASE_MIGRATION_RELEASE:
        if (engine_now_ms() - executor__task_since_ms(ex, t) < MIG_RELEASE_GRACE_MS)
            return;
        step_one_entry(ex, m, g, t, SLOTD__INTERNAL__V1__LOG_COMMAND__COMMAND_MIGRATION_RELEASE,
                       "release");
        break;
    default:
        break;
    }
}

void executor__migrations_init(struct executor *ex)
{
    for (size_t i = 0; i < EXEC_MIGRATIONS_MAX; i++)
        pthread_mutex_init(&ex->migrations[i].mu, NULL);
}

void executor__migrations_destroy(struct executor *ex)
{
    for (size_t i = 0; i < EXEC_MIGRATIONS_MAX; i++)
        pthread_mutex_destroy(&ex->migrations[i].mu);
}
