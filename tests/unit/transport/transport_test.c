/* transport_test.c - unit tests for service/transport against in-process slotd rpc servers on
 * 127.0.0.1: the RaftStream (one stream, ordering and coalescing, queue bounds, refusal, backoff
 * and reopen, a peer that never reads), dead peers, unary calls with status details, deadlines,
 * and stop with calls and streams in flight. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <grpc/status.h>

#include "google/protobuf/any.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "rpc.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "slotd/v1/metadata.pb-c.h"
#include "transport.h"

#define WAIT_MS 5000 /* bound on every wait in this file */
#define HELD_MAX 32
#define GROUPS_MAX 16 /* group ids the test server tracks ordering for */
#define SELF 1        /* the transport's node id in every test */
#define HOLD_METHOD "/test.Hold/Hold"
#define GROUP_STATUS_METHOD "/slotd.internal.v1.Peer/GroupStatus"
#define SNAPSHOT_METHOD "/slotd.internal.v1.Peer/Snapshot"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- a peer: an rpc_server serving slotd.internal.v1.Peer ---------------------------------- */

struct peer_server {
    uint64_t node_id;
    struct rpc_server *server;
    int port;
    char address[64];
    pthread_mutex_t mu;
    pthread_cond_t cond; /* signalled when hold_raft clears */
    /* RaftStream frames seen (one batch each) and streams opened */
    uint64_t batches, msgs, bad_batches, streams;
    size_t max_frame_bytes;
    int fail_next; /* > 0: the next frames end their stream with RESOURCE_EXHAUSTED */
    uint64_t next_context[GROUPS_MAX]; /* per group: messages arrive in send order */
    bool order_ok;
    size_t max_batch_bytes;
    int64_t max_latency_ms, sum_latency_ms; /* receipt - RaftMessage.commit (send time) */
    /* held calls (HOLD_METHOD); while hold_raft a frame's callback waits (bounded) for it to
     * clear, so the stream is not read meanwhile (raft_holding: frames waiting now) */
    bool hold_raft;
    size_t raft_holding;
    struct rpc_call *held[HELD_MAX];
    size_t n_held;
};

static void reply_ack(struct rpc_call *call)
{
    Slotd__Internal__V1__RaftBatchAck ack = SLOTD__INTERNAL__V1__RAFT_BATCH_ACK__INIT;
    rpc_call_reply(call, &ack.base);
}

/* A RaftStream frame: its batch checked (from, to, per-group order) and counted. */
static int raft_frame_cb(void *ctx, struct rpc_cstream *st, const uint8_t *frame, size_t len,
                         struct slotd_error *err)
{
    struct peer_server *ps = ctx;
    Slotd__Internal__V1__RaftStreamFrame *f =
        slotd__internal__v1__raft_stream_frame__unpack(NULL, len, frame);
    Slotd__Internal__V1__RaftBatch *b =
        f != NULL ? slotd__internal__v1__raft_batch__unpack(NULL, f->batch.len, f->batch.data)
                  : NULL;
    int64_t now = now_ms();
    int rc = 0;
    pthread_mutex_lock(&ps->mu);
    if (rpc_cstream_data(st) == NULL) {
        rpc_cstream_set_data(st, ps); /* a marker: this stream is counted */
        ps->streams++;
    }
    if (ps->fail_next > 0) {
        ps->fail_next--;
        slotd_error_set(err, SLOTD_EQUEUE_FULL, "test: raft queue full");
        rc = -1;
    } else if (b == NULL || b->from_node != SELF || b->to_node != ps->node_id ||
               b->n_messages == 0 || f->proof[0] != '\0') {
        ps->bad_batches++;
    } else {
        ps->batches++;
        ps->max_batch_bytes = f->batch.len > ps->max_batch_bytes ? f->batch.len : ps->max_batch_bytes;
        ps->max_frame_bytes = len > ps->max_frame_bytes ? len : ps->max_frame_bytes;
        for (size_t i = 0; i < b->n_messages; i++) {
            const Slotd__Internal__V1__RaftMessage *m = b->messages[i];
            if (m->group_id >= GROUPS_MAX || m->to != ps->node_id ||
                m->context != ps->next_context[m->group_id]) {
                ps->order_ok = false;
            } else {
                ps->next_context[m->group_id] = m->context + 1;
            }
            int64_t lat = now - (int64_t)m->commit;
            ps->max_latency_ms = lat > ps->max_latency_ms ? lat : ps->max_latency_ms;
            ps->sum_latency_ms += lat;
            ps->msgs++;
        }
    }
    int64_t end = now_ms() + WAIT_MS;
    ps->raft_holding++;
    while (ps->hold_raft && now_ms() < end) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 10 * 1000000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&ps->cond, &ps->mu, &ts);
    }
    ps->raft_holding--;
    pthread_mutex_unlock(&ps->mu);
    if (b != NULL) {
        slotd__internal__v1__raft_batch__free_unpacked(b, NULL);
    }
    if (f != NULL) {
        slotd__internal__v1__raft_stream_frame__free_unpacked(f, NULL);
    }
    return rc;
}

static void raft_hold(struct peer_server *ps, bool hold)
{
    pthread_mutex_lock(&ps->mu);
    ps->hold_raft = hold;
    pthread_cond_broadcast(&ps->cond);
    pthread_mutex_unlock(&ps->mu);
}

static bool server_wait_raft_holding(struct peer_server *ps)
{
    int64_t end = now_ms() + WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        size_t n = ps->raft_holding;
        pthread_mutex_unlock(&ps->mu);
        if (n > 0) {
            return true;
        }
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(1);
    }
}

static void hold_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct peer_server *ps = ctx;
    pthread_mutex_lock(&ps->mu);
    bool hold = ps->n_held < HELD_MAX;
    if (hold) {
        ps->held[ps->n_held++] = call;
    }
    pthread_mutex_unlock(&ps->mu);
    if (!hold) {
        reply_ack(call);
    }
}

static void group_status_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct peer_server *ps = ctx;
    Slotd__Internal__V1__GroupStatusResponse r = SLOTD__INTERNAL__V1__GROUP_STATUS_RESPONSE__INIT;
    r.node_id = ps->node_id;
    rpc_call_reply(call, &r.base);
}

static void snapshot_fail_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct slotd_error e;
    slotd_error_field(&e, "snapshot.data", 4096, "snapshot.data: %zu bytes exceeds the limit of %d",
                      len, 4096);
    rpc_call_fail(call, &e);
}

static size_t held_count(struct peer_server *ps)
{
    pthread_mutex_lock(&ps->mu);
    size_t n = ps->n_held;
    pthread_mutex_unlock(&ps->mu);
    return n;
}

/* Answers every held call (a reply to a call the client cancelled completes at once). */
static void held_release(struct peer_server *ps)
{
    pthread_mutex_lock(&ps->mu);
    struct rpc_call *held[HELD_MAX];
    size_t n = ps->n_held;
    memcpy(held, ps->held, n * sizeof(held[0]));
    ps->n_held = 0;
    pthread_mutex_unlock(&ps->mu);
    for (size_t i = 0; i < n; i++) {
        reply_ack(held[i]);
    }
}

static void peer_reset(struct peer_server *ps)
{
    pthread_mutex_lock(&ps->mu);
    ps->batches = ps->msgs = ps->bad_batches = ps->streams = 0;
    memset(ps->next_context, 0, sizeof(ps->next_context));
    ps->order_ok = true;
    ps->max_batch_bytes = ps->max_frame_bytes = 0;
    ps->max_latency_ms = ps->sum_latency_ms = 0;
    ps->hold_raft = false;
    ps->fail_next = 0;
    pthread_cond_broadcast(&ps->cond);
    pthread_mutex_unlock(&ps->mu);
}

/* Starts ps as node node_id on 127.0.0.1:0. unread: a peer whose RaftStream handler takes the
 * first frame and never reads another (the path is served as a unary method that holds its
 * call, so the stream's flow-control window fills), serving nothing else. */
static int peer_start(struct peer_server *ps, uint64_t node_id, bool unread)
{
    memset(ps, 0, sizeof(*ps));
    ps->node_id = node_id;
    ps->order_ok = true;
    pthread_mutex_init(&ps->mu, NULL);
    pthread_cond_init(&ps->cond, NULL);
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    o.cq_threads = 2; /* one may wait in a held frame while the other serves */
    if (rpc_server_new(&o, &ps->server) != SLOTD_OK) {
        return -1;
    }
    if (unread ? rpc_server_add_unary(ps->server, TRANSPORT_RAFT_STREAM_METHOD, hold_cb, ps) !=
                     SLOTD_OK
               : rpc_server_add_service(ps->server, &slotd__internal__v1__peer__descriptor) !=
                         SLOTD_OK ||
                     rpc_server_add_client_stream(ps->server, TRANSPORT_RAFT_STREAM_METHOD,
                                                  raft_frame_cb, NULL, ps) != SLOTD_OK ||
                     rpc_server_add_unary(ps->server, GROUP_STATUS_METHOD, group_status_cb,
                                          ps) != SLOTD_OK ||
                     rpc_server_add_unary(ps->server, SNAPSHOT_METHOD, snapshot_fail_cb, ps) !=
                         SLOTD_OK ||
                     rpc_server_add_unary(ps->server, HOLD_METHOD, hold_cb, ps) != SLOTD_OK) {
        return -1;
    }
    char err[256];
    if (rpc_server_start(ps->server, &ps->port, err, sizeof(err)) != SLOTD_OK) {
        fprintf(stderr, "peer %llu: %s\n", (unsigned long long)node_id, err);
        return -1;
    }
    snprintf(ps->address, sizeof(ps->address), "127.0.0.1:%d", ps->port);
    return 0;
}

static int peer_up(struct peer_server *ps, uint64_t node_id)
{
    return peer_start(ps, node_id, false);
}

static void peer_down(struct peer_server *ps)
{
    held_release(ps);
    raft_hold(ps, false);
    rpc_server_free(ps->server);
    ps->server = NULL;
    pthread_cond_destroy(&ps->cond);
    pthread_mutex_destroy(&ps->mu);
}

/* An address on 127.0.0.1 where nothing listens (a port just bound and released). */
static void dead_address(char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(a);
    CU_ASSERT_FATAL(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                    getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    snprintf(buf, len, "127.0.0.1:%d", ntohs(a.sin_port));
    close(fd);
}

/* ---- client-side recorders ----------------------------------------------------------------- */

#define UNREACH_PEERS 8

struct unreach {
    pthread_mutex_t mu;
    uint64_t count[UNREACH_PEERS]; /* by node id */
    char last_why[UNREACH_PEERS][512];
};

static void unreach_cb(void *ctx, uint64_t peer, const char *why)
{
    struct unreach *u = ctx;
    pthread_mutex_lock(&u->mu);
    if (peer < UNREACH_PEERS) {
        u->count[peer]++;
        snprintf(u->last_why[peer], sizeof(u->last_why[peer]), "%s", why);
    }
    pthread_mutex_unlock(&u->mu);
}

static uint64_t unreach_count(struct unreach *u, uint64_t peer)
{
    pthread_mutex_lock(&u->mu);
    uint64_t n = u->count[peer];
    pthread_mutex_unlock(&u->mu);
    return n;
}

struct reply {
    pthread_mutex_t *mu; /* shared by the replies of one test */
    int runs;            /* callbacks run: must end at exactly 1 */
    int status;
    int64_t at_ms;
    size_t resp_len, details_len;
    bool has_resp, has_details;
    char message[256];
    uint8_t resp[256];
    uint8_t details[1024];
};

static void reply_cb(void *arg, int status, const char *message, const uint8_t *resp,
                     size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct reply *r = arg;
    pthread_mutex_lock(r->mu);
    r->runs++;
    r->status = status;
    snprintf(r->message, sizeof(r->message), "%s", message);
    r->has_resp = resp != NULL;
    r->resp_len = resp_len < sizeof(r->resp) ? resp_len : sizeof(r->resp);
    if (resp != NULL) {
        memcpy(r->resp, resp, r->resp_len);
    }
    r->has_details = details != NULL;
    r->details_len = details_len < sizeof(r->details) ? details_len : sizeof(r->details);
    if (details != NULL) {
        memcpy(r->details, details, r->details_len);
    }
    r->at_ms = now_ms();
    pthread_mutex_unlock(r->mu);
}

/* Waits (bounded by WAIT_MS) until every one of the n replies has run. */
static bool replies_wait(struct reply *r, size_t n)
{
    int64_t end = now_ms() + WAIT_MS;
    for (;;) {
        size_t done = 0;
        pthread_mutex_lock(r[0].mu);
        for (size_t i = 0; i < n; i++) {
            done += r[i].runs > 0;
        }
        pthread_mutex_unlock(r[0].mu);
        if (done == n) {
            return true;
        }
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(1);
    }
}

static bool server_wait_msgs(struct peer_server *ps, uint64_t msgs)
{
    int64_t end = now_ms() + WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&ps->mu);
        uint64_t n = ps->msgs;
        pthread_mutex_unlock(&ps->mu);
        if (n >= msgs) {
            return n == msgs;
        }
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(1);
    }
}

static bool server_wait_held(struct peer_server *ps, size_t n)
{
    int64_t end = now_ms() + WAIT_MS;
    while (held_count(ps) < n) {
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(1);
    }
    return true;
}

/* ---- helpers --------------------------------------------------------------------------------- */

static struct peer_server peer_a; /* node 2, up for the whole "live" suite */

static struct transport *transport_make(struct transport_options *o, struct unreach *u)
{
    struct transport_callbacks cb = {u, unreach_cb};
    struct transport *t = NULL;
    CU_ASSERT_EQUAL_FATAL(transport_new(o, u != NULL ? &cb : NULL, &t), TRANSPORT_OK);
    return t;
}

static struct transport *transport_default(struct unreach *u)
{
    struct transport_options o;
    transport_options_default(&o);
    o.node_id = SELF;
    return transport_make(&o, u);
}

/* A transport reporting to u (initialized here; the caller destroys u.mu) with backoff_min_ms and
 * call_timeout_ms (0: the defaults). */
static struct transport *transport_reporting(struct unreach *u, unsigned backoff_min_ms,
                                             unsigned call_timeout_ms)
{
    memset(u, 0, sizeof(*u));
    pthread_mutex_init(&u->mu, NULL);
    struct transport_options o;
    transport_options_default(&o);
    o.node_id = SELF;
    o.backoff_min_ms = backoff_min_ms;
    o.call_timeout_ms = call_timeout_ms;
    return transport_make(&o, u);
}

/* Queues message number ctx of group for peer; commit carries the send time. */
static int send_msg_group(struct transport *t, uint64_t peer, uint32_t group, uint64_t ctx,
                          size_t data_len)
{
    static const uint8_t data[4096];
    Slotd__Internal__V1__RaftMessage m = SLOTD__INTERNAL__V1__RAFT_MESSAGE__INIT;
    Slotd__Internal__V1__RaftEntry e = SLOTD__INTERNAL__V1__RAFT_ENTRY__INIT;
    Slotd__Internal__V1__RaftEntry *entries[1] = {&e};
    m.group_id = group;
    m.type = 3;
    m.from = SELF;
    m.to = peer;
    m.term = 5;
    m.context = ctx;
    m.commit = (uint64_t)now_ms();
    if (data_len > 0) {
        e.term = 5;
        e.index = ctx + 1;
        e.data.data = (uint8_t *)data;
        e.data.len = data_len < sizeof(data) ? data_len : sizeof(data);
        m.n_entries = 1;
        m.entries = entries;
    }
    return transport_send_raft(t, peer, &m);
}

static int send_msg(struct transport *t, uint64_t peer, uint64_t ctx, size_t data_len)
{
    return send_msg_group(t, peer, 7, ctx, data_len);
}

static struct transport_peer_stats stats_of(struct transport *t, uint64_t peer)
{
    struct transport_peer_stats s;
    memset(&s, 0, sizeof(s));
    CU_ASSERT_EQUAL(transport_peer_stats(t, peer, &s), TRANSPORT_OK);
    return s;
}

/* ---- tests without a server ---------------------------------------------------------------- */

static void test_options_and_errors(void)
{
    CU_ASSERT_STRING_EQUAL(transport_strerror(TRANSPORT_EFULL), "queue or table full");
    CU_ASSERT_STRING_EQUAL(transport_strerror(99), "unknown error");

    struct transport_options o;
    transport_options_default(&o);
    CU_ASSERT_EQUAL(o.queue_msgs_max, 8192);
    CU_ASSERT_EQUAL(o.queue_bytes_max, 64u << 20);
    CU_ASSERT_EQUAL(o.batch_bytes_max, 4u << 20);
    CU_ASSERT_EQUAL(o.backoff_min_ms, 50);
    CU_ASSERT_EQUAL(o.backoff_max_ms, 2000);
    CU_ASSERT_EQUAL(o.call_timeout_ms, 5000);
    struct transport *t = NULL;
    CU_ASSERT_EQUAL(transport_new(&o, NULL, &t), TRANSPORT_EINVAL); /* node_id 0 */
    o.node_id = SELF;
    o.backoff_min_ms = 3000;
    CU_ASSERT_EQUAL(transport_new(&o, NULL, &t), TRANSPORT_EINVAL); /* min > max */
    o.backoff_min_ms = 0;
    o.batch_bytes_max = 100;
    CU_ASSERT_EQUAL(transport_new(&o, NULL, &t), TRANSPORT_EINVAL); /* batch too small */
    o.batch_bytes_max = 1024;
    t = transport_make(&o, NULL);

    char longaddr[TRANSPORT_ADDRESS_MAX + 8];
    memset(longaddr, 'a', sizeof(longaddr) - 1);
    longaddr[sizeof(longaddr) - 1] = '\0';
    CU_ASSERT_EQUAL(transport_add_peer(t, 0, "127.0.0.1:1"), TRANSPORT_EINVAL);
    CU_ASSERT_EQUAL(transport_add_peer(t, SELF, "127.0.0.1:1"), TRANSPORT_EINVAL);
    CU_ASSERT_EQUAL(transport_add_peer(t, 2, ""), TRANSPORT_EINVAL);
    CU_ASSERT_EQUAL(transport_add_peer(t, 2, longaddr), TRANSPORT_EINVAL);
    CU_ASSERT_PTR_NULL(transport_peer_address(t, 2));
    CU_ASSERT_EQUAL(transport_add_peer(t, 2, "127.0.0.1:1"), TRANSPORT_OK);
    CU_ASSERT_STRING_EQUAL(transport_peer_address(t, 2), "127.0.0.1:1");
    CU_ASSERT_EQUAL(transport_add_peer(t, 2, "127.0.0.1:2"), TRANSPORT_OK); /* moved */
    CU_ASSERT_STRING_EQUAL(transport_peer_address(t, 2), "127.0.0.1:2");

    struct transport_peer_stats s;
    CU_ASSERT_EQUAL(transport_peer_stats(t, 9, &s), TRANSPORT_EUNKNOWN_PEER);
    CU_ASSERT_EQUAL(send_msg(t, 9, 0, 0), TRANSPORT_EUNKNOWN_PEER);
    CU_ASSERT_EQUAL(send_msg(t, 2, 0, 700), TRANSPORT_OK);
    /* 1000 data bytes + header + frame fields cannot fit a 1024-byte frame: refused, not queued
     * forever. */
    CU_ASSERT_EQUAL(send_msg(t, 2, 1, 1000), TRANSPORT_EINVAL);
    s = stats_of(t, 2);
    CU_ASSERT_EQUAL(s.queued_msgs, 1);
    CU_ASSERT(s.queued_bytes > 700 && s.queued_bytes < 737); /* 1024 - 287 bytes of reserve */
    CU_ASSERT_EQUAL(send_msg(t, 2, 1, 737 - 15), TRANSPORT_EINVAL); /* record > 737 bytes */

    struct reply r = {0};
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    r.mu = &mu;
    /* Calls need the thread: before start they are refused and the callback never runs. */
    CU_ASSERT_EQUAL(transport_call(t, 2, GROUP_STATUS_METHOD, NULL, 0, INT64_MAX, reply_cb, &r),
                    TRANSPORT_ESTOPPED);
    CU_ASSERT_EQUAL(r.runs, 0);
    transport_flush(t); /* not running: a no-op */
    CU_ASSERT_EQUAL(stats_of(t, 2).queued_msgs, 1);
    transport_free(t); /* never started, one message queued: nothing leaks */
}

static void test_queue_bounds(void)
{
    struct transport_options o;
    transport_options_default(&o);
    o.node_id = SELF;
    o.queue_msgs_max = 10;
    struct transport *t = transport_make(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    peer_reset(&peer_a);
    for (uint64_t i = 0; i < 15; i++) {
        CU_ASSERT_EQUAL(send_msg(t, 2, i, 0), i < 10 ? TRANSPORT_OK : TRANSPORT_EFULL);
    }
    struct transport_peer_stats s = stats_of(t, 2);
    CU_ASSERT_EQUAL(s.queued_msgs, 10);
    CU_ASSERT_EQUAL(s.dropped_full, 5);
    /* Queued before start: start sends them, in order, with nothing lost. */
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    CU_ASSERT_EQUAL(transport_start(t), TRANSPORT_ESTOPPED);
    CU_ASSERT(server_wait_msgs(&peer_a, 10));
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT(peer_a.order_ok);
    CU_ASSERT_EQUAL(peer_a.batches, 1);
    pthread_mutex_unlock(&peer_a.mu);
    transport_free(t);

    /* The byte bound: ~1 KiB messages against 3000 bytes. */
    transport_options_default(&o);
    o.node_id = SELF;
    o.queue_bytes_max = 3000;
    t = transport_make(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL(send_msg(t, 2, 0, 1000), TRANSPORT_OK);
    CU_ASSERT_EQUAL(send_msg(t, 2, 1, 1000), TRANSPORT_OK);
    CU_ASSERT_EQUAL(send_msg(t, 2, 2, 1000), TRANSPORT_EFULL);
    CU_ASSERT_EQUAL(send_msg(t, 2, 2, 10), TRANSPORT_OK); /* a small one still fits */
    s = stats_of(t, 2);
    CU_ASSERT_EQUAL(s.queued_msgs, 3);
    CU_ASSERT_EQUAL(s.dropped_full, 1);
    CU_ASSERT(s.queued_bytes <= 3000);
    transport_free(t);
}

/* ---- tests against live peers ---------------------------------------------------------------- */

#define ORDER_MSGS 2000

static void test_order_and_batching(void)
{
    struct transport *t = transport_default(NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    int64_t t0 = now_ms();
    for (uint64_t i = 0; i < ORDER_MSGS; i++) {
        CU_ASSERT_EQUAL(send_msg(t, 2, i, 64), TRANSPORT_OK);
        if (i % 10 == 9) {
            transport_flush(t);
        }
    }
    transport_flush(t);
    CU_ASSERT(server_wait_msgs(&peer_a, ORDER_MSGS));
    int64_t elapsed = now_ms() - t0;
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT(peer_a.order_ok);
    CU_ASSERT_EQUAL(peer_a.bad_batches, 0);
    CU_ASSERT(peer_a.batches < ORDER_MSGS / 10); /* coalesced beyond the flush cadence */
    CU_ASSERT_EQUAL(peer_a.streams, 1);          /* every frame on one stream */
    uint64_t batches = peer_a.batches;
    pthread_mutex_unlock(&peer_a.mu);
    /* Stats settle when the last ack has been processed. */
    int64_t end = now_ms() + WAIT_MS;
    while (stats_of(t, 2).sent_msgs < ORDER_MSGS && now_ms() < end) {
        sleep_ms(1);
    }
    struct transport_peer_stats s = stats_of(t, 2);
    CU_ASSERT_EQUAL(s.sent_msgs, ORDER_MSGS);
    CU_ASSERT_EQUAL(s.sent_batches, batches);
    CU_ASSERT_EQUAL(s.failed_batches, 0);
    CU_ASSERT_EQUAL(s.queued_msgs, 0);
    CU_ASSERT_EQUAL(s.queued_bytes, 0);
    printf("\n    %d msgs in %llu batches, %lld ms (%.0f msgs/s)\n", ORDER_MSGS,
           (unsigned long long)batches, (long long)elapsed,
           elapsed > 0 ? ORDER_MSGS * 1000.0 / (double)elapsed : 0.0);
    transport_free(t);
}

/* While peer_a holds its first frame (hold_raft set by the caller, frame 0 sent), sends 4 KiB
 * messages to peer 2 until a frame's send has been outstanding for 100 ms: the receiver's
 * flow-control window is full. Returns the frames whose send completed before that one (the
 * queue is empty then), or -1 when no send stalled within WAIT_MS. */
static int64_t stall_stream(struct transport *t, uint64_t *ctx)
{
    int64_t end = now_ms() + WAIT_MS, stall_since = 0;
    while (now_ms() < end) {
        struct transport_peer_stats s = stats_of(t, 2);
        if (!s.in_flight) {
            for (int i = 0; i < 16; i++) {
                CU_ASSERT_EQUAL(send_msg(t, 2, (*ctx)++, 4096), TRANSPORT_OK);
            }
            transport_flush(t);
            stall_since = 0;
        } else if (stall_since == 0) {
            stall_since = now_ms();
        } else if (now_ms() - stall_since >= 100 && s.queued_msgs == 0) {
            return (int64_t)s.sent_batches;
        }
        sleep_ms(1);
    }
    return -1;
}

/* A frame in flight (its send held up by a receiver that is not reading): what is queued
 * meanwhile waits, then goes out as one frame when the send completes, without a flush. */
static void test_coalesce_while_in_flight(void)
{
    struct transport *t = transport_default(NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    raft_hold(&peer_a, true);
    uint64_t ctx = 0;
    CU_ASSERT_EQUAL(send_msg(t, 2, ctx++, 0), TRANSPORT_OK);
    transport_flush(t);
    CU_ASSERT(server_wait_raft_holding(&peer_a)); /* the receiver stops reading */
    int64_t before = stall_stream(t, &ctx);
    CU_ASSERT(before >= 1);
    uint64_t stalled_at = ctx;
    for (int i = 0; i < 99; i++) {
        CU_ASSERT_EQUAL(send_msg(t, 2, ctx++, 0), TRANSPORT_OK);
        transport_flush(t); /* one in flight: starts nothing */
    }
    sleep_ms(20);
    struct transport_peer_stats s = stats_of(t, 2);
    CU_ASSERT(s.in_flight);
    CU_ASSERT_EQUAL(s.queued_msgs, 99);
    CU_ASSERT_EQUAL((int64_t)s.sent_batches, before);
    raft_hold(&peer_a, false); /* the completion starts the next frame without a flush */
    CU_ASSERT(server_wait_msgs(&peer_a, ctx));
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT_EQUAL((int64_t)peer_a.batches, before + 2); /* the stalled frame, then the 99 */
    CU_ASSERT_EQUAL(peer_a.streams, 1);
    CU_ASSERT(peer_a.order_ok);
    pthread_mutex_unlock(&peer_a.mu);
    printf("\n    %llu messages (%lld frames) sent before a frame stalled; 99 queued behind it "
           "went as one frame\n",
           (unsigned long long)stalled_at, (long long)before);
    transport_free(t);
}

/* A frame the receiver refuses (RESOURCE_EXHAUSTED: its raft queue is full) ends the stream:
 * reported, backed off, and the next frame opens a new stream that delivers. */
static void test_refused_frame_reopens(void)
{
    struct unreach u;
    struct transport *t = transport_reporting(&u, 100, 0);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    CU_ASSERT_EQUAL(send_msg(t, 2, 0, 0), TRANSPORT_OK);
    transport_flush(t);
    CU_ASSERT(server_wait_msgs(&peer_a, 1));
    pthread_mutex_lock(&peer_a.mu);
    peer_a.fail_next = 1;
    pthread_mutex_unlock(&peer_a.mu);
    CU_ASSERT_EQUAL(send_msg(t, 2, 1, 0), TRANSPORT_OK); /* refused: lost, raft retransmits */
    transport_flush(t);
    int64_t t_fail = now_ms();
    int64_t end = now_ms() + WAIT_MS;
    while (unreach_count(&u, 2) == 0 && now_ms() < end) {
        sleep_ms(1);
    }
    CU_ASSERT_EQUAL_FATAL(unreach_count(&u, 2), 1);
    pthread_mutex_lock(&u.mu);
    CU_ASSERT_PTR_NOT_NULL(strstr(u.last_why[2], "RESOURCE_EXHAUSTED"));
    CU_ASSERT_PTR_NOT_NULL(strstr(u.last_why[2], "test: raft queue full"));
    pthread_mutex_unlock(&u.mu);
    CU_ASSERT(stats_of(t, 2).backing_off);
    /* The retransmission: sent when the backoff ends, on a new stream, without a flush. */
    pthread_mutex_lock(&peer_a.mu);
    peer_a.next_context[7] = 1;
    pthread_mutex_unlock(&peer_a.mu);
    CU_ASSERT_EQUAL(send_msg(t, 2, 1, 0), TRANSPORT_OK);
    transport_flush(t);
    CU_ASSERT(server_wait_msgs(&peer_a, 2));
    int64_t reopened_ms = now_ms() - t_fail;
    CU_ASSERT(reopened_ms >= 90);
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT_EQUAL(peer_a.streams, 2);
    CU_ASSERT(peer_a.order_ok);
    pthread_mutex_unlock(&peer_a.mu);
    end = now_ms() + WAIT_MS;
    struct transport_peer_stats s = stats_of(t, 2);
    while (s.sent_batches + s.failed_batches < 3 && now_ms() < end) {
        sleep_ms(1);
        s = stats_of(t, 2);
    }
    /* The refused frame counts sent when its send completed before the stream's status came
     * back, else failed (in flight when the stream ended): either way once. */
    CU_ASSERT_EQUAL(s.sent_batches + s.failed_batches, 3);
    CU_ASSERT(s.failed_batches <= 1);
    CU_ASSERT_FALSE(s.backing_off);
    printf("\n    refused frame: reopened and delivered %lld ms later (backoff 100)\n",
           (long long)reopened_ms);
    transport_free(t);
    pthread_mutex_destroy(&u.mu);
}

/* A peer that accepts the stream but stops reading it: the frame whose send cannot complete
 * fails the stream at call_timeout_ms (DEADLINE_EXCEEDED), like a call that never answers. */
static void test_unread_stream_times_out(void)
{
    struct peer_server hold;
    CU_ASSERT_EQUAL_FATAL(peer_start(&hold, 6, true), 0);
    struct unreach u;
    struct transport *t = transport_reporting(&u, 0, 300);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 6, hold.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    CU_ASSERT_EQUAL(send_msg(t, 6, 0, 0), TRANSPORT_OK);
    transport_flush(t);
    CU_ASSERT_FATAL(server_wait_held(&hold, 1));
    int64_t t0 = now_ms();
    uint64_t i = 1;
    int64_t end = now_ms() + WAIT_MS;
    while (unreach_count(&u, 6) == 0 && now_ms() < end) {
        if (send_msg(t, 6, i, 4096) == TRANSPORT_OK) {
            i++;
        }
        transport_flush(t);
        sleep_ms(1);
    }
    int64_t failed_ms = now_ms() - t0;
    CU_ASSERT_EQUAL(unreach_count(&u, 6), 1);
    CU_ASSERT(failed_ms >= 290 && failed_ms < 2500);
    pthread_mutex_lock(&u.mu);
    CU_ASSERT_PTR_NOT_NULL(strstr(u.last_why[6], "DEADLINE_EXCEEDED"));
    pthread_mutex_unlock(&u.mu);
    struct transport_peer_stats s = stats_of(t, 6);
    CU_ASSERT_EQUAL(s.failed_batches, 1);
    CU_ASSERT_FALSE(s.in_flight);
    printf("\n    unread stream: failed after %lld ms (timeout 300), %llu frames sent before\n",
           (long long)failed_ms, (unsigned long long)s.sent_batches);
    transport_free(t);
    peer_down(&hold);
    pthread_mutex_destroy(&u.mu);
}

static void test_batch_bytes_max(void)
{
    struct transport_options o;
    transport_options_default(&o);
    o.node_id = SELF;
    o.batch_bytes_max = 4096;
    struct transport *t = transport_make(&o, NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    peer_reset(&peer_a);
    for (uint64_t i = 0; i < 20; i++) {
        CU_ASSERT_EQUAL(send_msg(t, 2, i, 1000), TRANSPORT_OK);
    }
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    CU_ASSERT(server_wait_msgs(&peer_a, 20));
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT(peer_a.order_ok);
    CU_ASSERT(peer_a.max_frame_bytes <= 4096); /* the whole frame, proof field included */
    CU_ASSERT(peer_a.max_batch_bytes > 3000);  /* 3 whole messages per batch */
    CU_ASSERT_EQUAL(peer_a.batches, 7);       /* 20 = 6 x 3 + 2 */
    pthread_mutex_unlock(&peer_a.mu);
    transport_free(t);
}

#define DEAD_RUN_MS 2000
#define DEAD_KILL_AT_MS 700
#define DEAD_EVERY_MS 5

static void test_dead_peers_isolated(void)
{
    struct peer_server peer_b; /* node 4: stopped mid-test */
    CU_ASSERT_EQUAL_FATAL(peer_up(&peer_b, 4), 0);
    char dead[64]; /* node 3: nothing listens */
    dead_address(dead, sizeof(dead));
    struct unreach u;
    memset(&u, 0, sizeof(u));
    pthread_mutex_init(&u.mu, NULL);
    struct transport_options o;
    transport_options_default(&o);
    o.node_id = SELF;
    o.backoff_min_ms = 50;
    o.backoff_max_ms = 400;
    struct transport *t = transport_make(&o, &u);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 3, dead), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 4, peer_b.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);

    uint64_t sent = 0, sent_b = 0;
    bool saw_backoff = false, killed = false;
    uint64_t b_before_kill = 0;
    int64_t t0 = now_ms();
    while (now_ms() - t0 < DEAD_RUN_MS) {
        CU_ASSERT_EQUAL(send_msg(t, 2, sent, 32), TRANSPORT_OK);
        sent++;
        CU_ASSERT_EQUAL(send_msg(t, 3, sent, 32), TRANSPORT_OK);
        if (send_msg(t, 4, sent_b, 32) == TRANSPORT_OK) {
            sent_b++;
        }
        transport_flush(t);
        saw_backoff = saw_backoff || stats_of(t, 3).backing_off;
        if (!killed && now_ms() - t0 >= DEAD_KILL_AT_MS) {
            b_before_kill = stats_of(t, 4).sent_msgs;
            rpc_server_shutdown(peer_b.server);
            killed = true;
        }
        sleep_ms(DEAD_EVERY_MS);
    }
    /* The healthy peer got every message, in order, promptly, while the others failed. */
    CU_ASSERT(server_wait_msgs(&peer_a, sent));
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT(peer_a.order_ok);
    int64_t max_lat = peer_a.max_latency_ms;
    double avg_lat = (double)peer_a.sum_latency_ms / (double)(peer_a.msgs ? peer_a.msgs : 1);
    pthread_mutex_unlock(&peer_a.mu);
    CU_ASSERT(max_lat < 500); /* loaded 2-core CI machine: measured far lower */
    struct transport_peer_stats s2 = stats_of(t, 2), s3 = stats_of(t, 3), s4 = stats_of(t, 4);
    CU_ASSERT_EQUAL(s2.failed_batches, 0);
    CU_ASSERT_EQUAL(unreach_count(&u, 2), 0);

    /* The dead address: reported, and retried only as the backoff allows (50..400 ms over
     * 2 s: about 8 attempts; without backoff it would be one per 5 ms flush). */
    CU_ASSERT(saw_backoff);
    CU_ASSERT(s3.failed_batches >= 3);
    CU_ASSERT(s3.failed_batches <= 15);
    CU_ASSERT_EQUAL(s3.sent_msgs, 0);
    /* Once the thread is joined every reported failure has had its callback. */
    transport_stop(t);
    struct transport_peer_stats s3_end = stats_of(t, 3);
    CU_ASSERT(unreach_count(&u, 3) >= s3.failed_batches);
    CU_ASSERT(unreach_count(&u, 3) <= s3_end.failed_batches);
    pthread_mutex_lock(&u.mu);
    CU_ASSERT_PTR_NOT_NULL(strstr(u.last_why[3], "UNAVAILABLE"));
    CU_ASSERT_PTR_NOT_NULL(strstr(u.last_why[3], dead));
    char why3[512];
    snprintf(why3, sizeof(why3), "%s", u.last_why[3]);
    pthread_mutex_unlock(&u.mu);

    /* The peer stopped mid-test: delivered before, reported after. */
    CU_ASSERT(b_before_kill > 0);
    CU_ASSERT(s4.failed_batches >= 1);
    CU_ASSERT(unreach_count(&u, 4) >= 1);
    CU_ASSERT(s4.sent_msgs < sent_b);
    printf("\n    healthy peer: %llu msgs, latency max %lld ms avg %.1f ms; dead peer: %llu "
           "failed batches in %d ms; stopped peer: %llu sent, %llu failed batches\n"
           "    why: %s\n",
           (unsigned long long)sent, (long long)max_lat, avg_lat,
           (unsigned long long)s3.failed_batches, DEAD_RUN_MS, (unsigned long long)s4.sent_msgs,
           (unsigned long long)s4.failed_batches, why3);
    transport_free(t);
    peer_down(&peer_b);
    pthread_mutex_destroy(&u.mu);
}

/* Decodes details into google.rpc.Status and its one slotd.v1.ErrorDetail (caller frees). */
static Slotd__V1__ErrorDetail *decode_detail(const uint8_t *buf, size_t len,
                                             Google__Rpc__Status **st_out)
{
    Google__Rpc__Status *st = google__rpc__status__unpack(NULL, len, buf);
    if (st == NULL || st->n_details != 1) {
        if (st != NULL) {
            google__rpc__status__free_unpacked(st, NULL);
        }
        return NULL;
    }
    Slotd__V1__ErrorDetail *d = slotd__v1__error_detail__unpack(NULL, st->details[0]->value.len,
                                                                st->details[0]->value.data);
    if (d == NULL) {
        google__rpc__status__free_unpacked(st, NULL);
        return NULL;
    }
    *st_out = st;
    return d;
}

static void test_call_relays_status(void)
{
    struct transport *t = transport_default(NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    char dead[64];
    dead_address(dead, sizeof(dead));
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct reply r[5];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < 5; i++) {
        r[i].mu = &mu;
    }
    int64_t deadline = now_ms() + WAIT_MS;
    uint8_t chunk[5000];
    memset(chunk, 0x5a, sizeof(chunk));
    CU_ASSERT_EQUAL(transport_call(t, 9, GROUP_STATUS_METHOD, NULL, 0, deadline, reply_cb, &r[0]),
                    TRANSPORT_EUNKNOWN_PEER);
    CU_ASSERT_EQUAL(transport_call(t, 2, "nope", NULL, 0, deadline, reply_cb, &r[0]),
                    TRANSPORT_EINVAL);
    CU_ASSERT_EQUAL(
        transport_call_addr(t, NULL, GROUP_STATUS_METHOD, NULL, 0, deadline, reply_cb, &r[0]),
        TRANSPORT_EINVAL);
    CU_ASSERT_EQUAL(
        transport_forward_addr(t, NULL, GROUP_STATUS_METHOD, NULL, 0, deadline, reply_cb, &r[0]),
        TRANSPORT_EINVAL);
    CU_ASSERT_EQUAL(transport_call(t, 2, GROUP_STATUS_METHOD, NULL, 0, deadline, reply_cb, &r[0]),
                    TRANSPORT_OK);
    CU_ASSERT_EQUAL(
        transport_call(t, 2, SNAPSHOT_METHOD, chunk, sizeof(chunk), deadline, reply_cb, &r[1]),
        TRANSPORT_OK);
    CU_ASSERT_EQUAL(transport_call_addr(t, peer_a.address, "/slotd.internal.v1.Peer/Nope", "x", 1,
                                        deadline, reply_cb, &r[2]),
                    TRANSPORT_OK);
    CU_ASSERT_EQUAL(transport_call_addr(t, peer_a.address, GROUP_STATUS_METHOD, NULL, 0, deadline,
                                        reply_cb, &r[3]),
                    TRANSPORT_OK);
    int64_t t_dead = now_ms();
    CU_ASSERT_EQUAL(
        transport_call_addr(t, dead, GROUP_STATUS_METHOD, NULL, 0, deadline, reply_cb, &r[4]),
        TRANSPORT_OK);
    CU_ASSERT_FATAL(replies_wait(r, 5));

    /* OK: the response bytes. */
    CU_ASSERT_EQUAL(r[0].status, GRPC_STATUS_OK);
    CU_ASSERT(r[0].has_resp);
    Slotd__Internal__V1__GroupStatusResponse *gs =
        slotd__internal__v1__group_status_response__unpack(NULL, r[0].resp_len, r[0].resp);
    CU_ASSERT_PTR_NOT_NULL_FATAL(gs);
    CU_ASSERT_EQUAL(gs->node_id, 2);
    slotd__internal__v1__group_status_response__free_unpacked(gs, NULL);
    CU_ASSERT_FALSE(r[0].has_details);

    /* A slotd_error with field and limit: status, message and the details trailer. */
    CU_ASSERT_EQUAL(r[1].status, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(r[1].message, "snapshot.data: 5000 bytes exceeds the limit of 4096");
    CU_ASSERT_FALSE(r[1].has_resp);
    CU_ASSERT_FATAL(r[1].has_details);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = decode_detail(r[1].details, r[1].details_len, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(st->code, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st->message, r[1].message);
    CU_ASSERT_STRING_EQUAL(st->details[0]->type_url, SLOTD_ERROR_DETAIL_TYPE_URL);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(d->field, "snapshot.data");
    CU_ASSERT_EQUAL(d->limit, 4096);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);

    /* Unknown method, by address; the same address's channel also serves OK calls. */
    CU_ASSERT_EQUAL(r[2].status, GRPC_STATUS_UNIMPLEMENTED);
    CU_ASSERT(r[2].has_details);
    CU_ASSERT_EQUAL(r[3].status, GRPC_STATUS_OK);
    /* Nothing listening: fails fast, long before the deadline. */
    CU_ASSERT_EQUAL(r[4].status, GRPC_STATUS_UNAVAILABLE);
    CU_ASSERT(r[4].at_ms - t_dead < 2000);
    CU_ASSERT_FALSE(r[4].has_resp);
    /* ... and says it was never sent; answers of a server that got the call never do. */
    CU_ASSERT(transport_reply_unsent(r[4].status, r[4].message));
    for (int i = 0; i < 4; i++) {
        CU_ASSERT_FALSE(transport_reply_unsent(r[i].status, r[i].message));
    }
    CU_ASSERT_FALSE(transport_reply_unsent(GRPC_STATUS_UNAVAILABLE, "Socket closed"));
    CU_ASSERT_FALSE(transport_reply_unsent(GRPC_STATUS_UNAVAILABLE, NULL));
    for (int i = 0; i < 5; i++) {
        CU_ASSERT_EQUAL(r[i].runs, 1);
    }
    printf("\n    dead address: UNAVAILABLE after %lld ms (\"%s\")\n",
           (long long)(r[4].at_ms - t_dead), r[4].message);
    transport_free(t);
}

static void test_deadline(void)
{
    struct transport *t = transport_default(NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct reply r[2];
    memset(r, 0, sizeof(r));
    r[0].mu = r[1].mu = &mu;
    int64_t t0 = now_ms();
    CU_ASSERT_EQUAL(transport_call(t, 2, HOLD_METHOD, "h", 1, t0 + 200, reply_cb, &r[0]),
                    TRANSPORT_OK);
    CU_ASSERT_EQUAL(transport_call(t, 2, GROUP_STATUS_METHOD, NULL, 0, t0 - 10, reply_cb, &r[1]),
                    TRANSPORT_OK);
    CU_ASSERT_FATAL(replies_wait(r, 2));
    CU_ASSERT_EQUAL(r[0].status, GRPC_STATUS_DEADLINE_EXCEEDED);
    CU_ASSERT(r[0].at_ms - t0 >= 190);
    CU_ASSERT(r[0].at_ms - t0 < 1500);
    CU_ASSERT_EQUAL(r[1].status, GRPC_STATUS_DEADLINE_EXCEEDED);
    CU_ASSERT_FALSE(r[1].has_resp);
    CU_ASSERT(r[1].at_ms - t0 < 500);
    CU_ASSERT_FALSE(transport_reply_unsent(r[0].status, r[0].message)); /* the server holds it */
    printf("\n    200 ms deadline fired after %lld ms\n", (long long)(r[0].at_ms - t0));
    CU_ASSERT(server_wait_held(&peer_a, 1));
    held_release(&peer_a);
    transport_free(t);
}

#define STOP_CALLS 5

static void test_stop_in_flight(void)
{
    struct unreach u;
    memset(&u, 0, sizeof(u));
    pthread_mutex_init(&u.mu, NULL);
    struct transport *t = transport_default(&u);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    raft_hold(&peer_a, true);
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    struct reply r[STOP_CALLS];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < STOP_CALLS; i++) {
        r[i].mu = &mu;
        CU_ASSERT_EQUAL(transport_call(t, 2, HOLD_METHOD, "h", 1, INT64_MAX, reply_cb, &r[i]),
                        TRANSPORT_OK);
    }
    CU_ASSERT_EQUAL(send_msg(t, 2, 0, 0), TRANSPORT_OK);
    transport_flush(t);
    CU_ASSERT_FATAL(server_wait_held(&peer_a, STOP_CALLS));
    CU_ASSERT_FATAL(server_wait_raft_holding(&peer_a)); /* the stream is open and not read */
    uint64_t ctx = 1;
    int64_t before = stall_stream(t, &ctx); /* a frame held in flight */
    CU_ASSERT(before >= 1);
    CU_ASSERT_EQUAL(send_msg(t, 2, ctx, 0), TRANSPORT_OK); /* queued behind it */
    CU_ASSERT(stats_of(t, 2).in_flight);

    int64_t t0 = now_ms();
    transport_stop(t);
    int64_t stop_ms = now_ms() - t0;
    /* Every callback ran exactly once, before stop returned, with CANCELLED. */
    pthread_mutex_lock(&mu);
    for (int i = 0; i < STOP_CALLS; i++) {
        CU_ASSERT_EQUAL(r[i].runs, 1);
        CU_ASSERT_EQUAL(r[i].status, GRPC_STATUS_CANCELLED);
    }
    pthread_mutex_unlock(&mu);
    CU_ASSERT(stop_ms < 2000);
    CU_ASSERT_EQUAL(unreach_count(&u, 2), 0); /* cancelled by stop, not lost to the peer */
    struct transport_peer_stats s = stats_of(t, 2);
    CU_ASSERT_FALSE(s.in_flight);
    CU_ASSERT_EQUAL(s.queued_msgs, 0);
    CU_ASSERT_EQUAL((int64_t)s.sent_batches, before); /* the stalled frame was not counted */

    struct reply late = {0};
    late.mu = &mu;
    CU_ASSERT_EQUAL(transport_call(t, 2, GROUP_STATUS_METHOD, NULL, 0, INT64_MAX, reply_cb, &late),
                    TRANSPORT_ESTOPPED);
    CU_ASSERT_EQUAL(send_msg(t, 2, 2, 0), TRANSPORT_ESTOPPED);
    CU_ASSERT_EQUAL(transport_start(t), TRANSPORT_ESTOPPED);
    transport_flush(t);
    transport_stop(t); /* idempotent */
    sleep_ms(20);
    CU_ASSERT_EQUAL(late.runs, 0);
    for (int i = 0; i < STOP_CALLS; i++) {
        CU_ASSERT_EQUAL(r[i].runs, 1); /* still exactly once */
    }
    printf("\n    stop with %d calls + 1 stream frame in flight: %lld ms\n", STOP_CALLS,
           (long long)stop_ms);
    transport_free(t);
    held_release(&peer_a); /* the server's side of the cancelled calls */
    raft_hold(&peer_a, false);
    pthread_mutex_destroy(&u.mu);
}

/* A peer that accepts TCP but never speaks HTTP/2: the frame fails at call_timeout_ms, and
 * a healthy peer is served meanwhile. */
static void test_raft_deadline_blackhole(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(a);
    CU_ASSERT_FATAL(fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                    listen(fd, 16) == 0 && getsockname(fd, (struct sockaddr *)&a, &alen) == 0);
    char hole[64];
    snprintf(hole, sizeof(hole), "127.0.0.1:%d", ntohs(a.sin_port));
    struct unreach u;
    memset(&u, 0, sizeof(u));
    pthread_mutex_init(&u.mu, NULL);
    struct transport_options o;
    transport_options_default(&o);
    o.node_id = SELF;
    o.call_timeout_ms = 300;
    struct transport *t = transport_make(&o, &u);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 5, hole), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    int64_t t0 = now_ms();
    CU_ASSERT_EQUAL(send_msg(t, 5, 0, 0), TRANSPORT_OK);
    CU_ASSERT_EQUAL(send_msg(t, 2, 0, 0), TRANSPORT_OK);
    transport_flush(t);
    CU_ASSERT(server_wait_msgs(&peer_a, 1));
    int64_t healthy_ms = now_ms() - t0;
    CU_ASSERT(stats_of(t, 5).in_flight); /* still waiting on the black hole */
    int64_t end = now_ms() + WAIT_MS;
    while (unreach_count(&u, 5) == 0 && now_ms() < end) {
        sleep_ms(1);
    }
    int64_t failed_ms = now_ms() - t0;
    CU_ASSERT_EQUAL(unreach_count(&u, 5), 1);
    CU_ASSERT(failed_ms >= 290 && failed_ms < 2000);
    CU_ASSERT(healthy_ms < 290);
    pthread_mutex_lock(&u.mu);
    CU_ASSERT_PTR_NOT_NULL(strstr(u.last_why[5], "DEADLINE_EXCEEDED"));
    pthread_mutex_unlock(&u.mu);
    printf("\n    black hole: batch failed after %lld ms (timeout 300); healthy peer served in "
           "%lld ms\n",
           (long long)failed_ms, (long long)healthy_ms);
    transport_free(t);
    close(fd);
    pthread_mutex_destroy(&u.mu);
}

#define LOAD_MSGS 100000
#define LOAD_FLUSH_EVERY 64

/* Bounded throughput to one peer: small messages, a flush every 64 (one "loop turn"). */
static void test_load(void)
{
    struct transport *t = transport_default(NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    uint64_t queued = 0, full = 0;
    int64_t t0 = now_ms();
    while (queued < LOAD_MSGS && now_ms() - t0 < WAIT_MS) {
        int rc = send_msg(t, 2, queued, 64);
        if (rc == TRANSPORT_EFULL) {
            full++; /* raft would retransmit; here the sender waits a little */
            transport_flush(t);
            sleep_ms(1);
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(rc, TRANSPORT_OK);
        queued++;
        if (queued % LOAD_FLUSH_EVERY == 0) {
            transport_flush(t);
        }
    }
    transport_flush(t);
    CU_ASSERT_EQUAL(queued, LOAD_MSGS);
    CU_ASSERT(server_wait_msgs(&peer_a, queued));
    int64_t elapsed = now_ms() - t0;
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT(peer_a.order_ok);
    uint64_t batches = peer_a.batches;
    CU_ASSERT_EQUAL(peer_a.streams, 1); /* one stream opened for every frame */
    pthread_mutex_unlock(&peer_a.mu);
    CU_ASSERT(batches > 1);
    CU_ASSERT_EQUAL(stats_of(t, 2).dropped_full, full);
    printf("\n    load: %d msgs (~100 B) in %lld ms = %.0f msgs/s, %llu batches (%.0f msgs each), "
           "%llu EFULL retries\n",
           LOAD_MSGS, (long long)elapsed, elapsed > 0 ? LOAD_MSGS * 1000.0 / (double)elapsed : 0.0,
           (unsigned long long)batches, batches ? (double)LOAD_MSGS / (double)batches : 0.0,
           (unsigned long long)full);
    transport_free(t);
}

#define THREADS 3
#define THREAD_MSGS                                                                                \
    2000 /* THREADS x THREAD_MSGS < queue_msgs_max: no EFULL whatever the timing                   \
          */
#define THREAD_CALLS 50

struct sender {
    struct transport *t;
    uint32_t group;
    pthread_t thread;
    int errors;
};

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    for (uint64_t i = 0; i < THREAD_MSGS; i++) {
        if (send_msg_group(s->t, 2, s->group, i, 16) != TRANSPORT_OK) {
            s->errors++;
        }
        if (i % 20 == 19) {
            transport_flush(s->t);
        }
    }
    transport_flush(s->t);
    return NULL;
}

/* Several threads queue and flush while another makes unary calls: per-sender order holds,
 * nothing is lost, every reply runs once. */
static void test_threads(void)
{
    struct transport *t = transport_default(NULL);
    CU_ASSERT_EQUAL_FATAL(transport_add_peer(t, 2, peer_a.address), TRANSPORT_OK);
    CU_ASSERT_EQUAL_FATAL(transport_start(t), TRANSPORT_OK);
    peer_reset(&peer_a);
    struct sender senders[THREADS];
    for (int i = 0; i < THREADS; i++) {
        senders[i] = (struct sender){.t = t, .group = (uint32_t)(10 + i)};
        CU_ASSERT_FATAL(pthread_create(&senders[i].thread, NULL, sender_main, &senders[i]) == 0);
    }
    pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
    static struct reply r[THREAD_CALLS];
    memset(r, 0, sizeof(r));
    int64_t deadline = now_ms() + WAIT_MS;
    for (int i = 0; i < THREAD_CALLS; i++) {
        r[i].mu = &mu;
        CU_ASSERT_EQUAL(
            transport_call(t, 2, GROUP_STATUS_METHOD, NULL, 0, deadline, reply_cb, &r[i]),
            TRANSPORT_OK);
    }
    for (int i = 0; i < THREADS; i++) {
        pthread_join(senders[i].thread, NULL);
        CU_ASSERT_EQUAL(senders[i].errors, 0);
    }
    CU_ASSERT(server_wait_msgs(&peer_a, THREADS * THREAD_MSGS));
    CU_ASSERT(replies_wait(r, THREAD_CALLS));
    pthread_mutex_lock(&peer_a.mu);
    CU_ASSERT(peer_a.order_ok);
    for (int i = 0; i < THREADS; i++) {
        CU_ASSERT_EQUAL(peer_a.next_context[10 + i], THREAD_MSGS);
    }
    pthread_mutex_unlock(&peer_a.mu);
    for (int i = 0; i < THREAD_CALLS; i++) {
        CU_ASSERT_EQUAL(r[i].runs, 1);
        CU_ASSERT_EQUAL(r[i].status, GRPC_STATUS_OK);
    }
    transport_free(t);
}

static int live_init(void)
{
    return peer_up(&peer_a, 2);
}

static int live_clean(void)
{
    peer_down(&peer_a);
    return 0;
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite local = CU_add_suite("transport_local", NULL, NULL);
    CU_add_test(local, "options, peers and argument errors", test_options_and_errors);
    CU_pSuite live = CU_add_suite("transport_live", live_init, live_clean);
    CU_add_test(live, "queue bounds -> EFULL, queued before start", test_queue_bounds);
    CU_add_test(live, "messages arrive in order, coalesced", test_order_and_batching);
    CU_add_test(live, "one frame in flight, the rest coalesce", test_coalesce_while_in_flight);
    CU_add_test(live, "refused frame: reported, backoff, new stream", test_refused_frame_reopens);
    CU_add_test(live, "a stream not read fails at the send timeout", test_unread_stream_times_out);
    CU_add_test(live, "batch_bytes_max splits on whole messages", test_batch_bytes_max);
    CU_add_test(live, "dead peers back off, healthy one flows", test_dead_peers_isolated);
    CU_add_test(live, "transport_call relays status, message, details", test_call_relays_status);
    CU_add_test(live, "deadlines", test_deadline);
    CU_add_test(live, "frame send timeout against a black hole", test_raft_deadline_blackhole);
    CU_add_test(live, "bounded load to one peer", test_load);
    CU_add_test(live, "senders on several threads", test_threads);
    CU_add_test(live, "stop with calls in flight", test_stop_in_flight);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
