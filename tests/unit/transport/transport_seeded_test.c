/* transport_seeded_test.c - seeded randomized property test of the peer transport's RaftStream
 * against in-process rpc servers: order, accounting, frame and queue bounds, one frame processed
 * at a time per peer, backoff after a refused frame, isolation of a dead, failing or slow peer. */
#include <CUnit/Basic.h>
#include <arpa/inet.h>
#include <inttypes.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "rpc.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "transport.h"

#define SELF 1            /* the transport's node id */
#define SERVERS 3         /* in-process receivers, node ids 2..4, up for the whole run */
#define DEAD_NODE 5       /* node id of a peer whose address has nothing listening */
#define PEERS_MAX 3       /* peers of one seed */
#define SENDERS_MAX 3     /* up to two sender threads plus the burst queued before start */
#define PRE_SENDER 2      /* sender index of that burst */
#define GROUPS 8          /* raft group ids used */
#define OPS_MAX 160       /* bursts per sender thread */
#define SENT_MAX 8192     /* messages send_raft took, per (peer, sender) */
#define RECORDS_MAX 32768 /* messages one server records per seed */
#define DELAY_MS_MAX 30   /* a frame's handler may take this long (the stream is not read) */
#define SEND_MS_MAX 3000 /* a sender thread stops early past this */
#define DRAIN_MS 2000
#define WAIT_MS 5000
#define QUIET_MS 100 /* after an abrupt stop: servers idle this long before checks */
#define FAILS_MAX 8  /* failure lines kept per seed */
#define SEEDS_DEFAULT 30
#define PAYLOAD_MAX (64 * 1024 + 512)
/* Header bytes of a RaftBatch to node ids < 128 (two tags, two 1-byte varints) and of its frame
 * without a proof (tag and a length of at most 3 bytes), and the room the transport reserves for
 * any header (two tags, two 10-byte varints) and any frame (TRANSPORT_FRAME_OVERHEAD_MAX): a
 * record is refused with TRANSPORT_EINVAL when it plus the reserve exceeds batch_bytes_max (the
 * bound of a whole frame). */
#define BATCH_HEADER_BYTES (4 + 4)
#define BATCH_HEADER_RESERVE (22 + TRANSPORT_FRAME_OVERHEAD_MAX)

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_ms(int64_t ms)
{
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    nanosleep(&ts, NULL);
}

/* ---- the PRNG: splitmix64 ---------------------------------------------------------------- */

struct rng {
    uint64_t s;
};

static uint64_t mix64(uint64_t z)
{
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rng_next(struct rng *r)
{
    r->s += 0x9e3779b97f4a7c15ull;
    return mix64(r->s);
}

/* Uniform enough in [0, n) for test decisions; n > 0. */
static uint64_t rng_below(struct rng *r, uint64_t n)
{
    return rng_next(r) % n;
}

/* ---- failures of the current seed (any thread) --------------------------------------------- */

static struct {
    pthread_mutex_t mu;
    size_t n; /* failures of this seed, also those beyond FAILS_MAX */
    char lines[FAILS_MAX][384];
} g_fail = {.mu = PTHREAD_MUTEX_INITIALIZER};

static void seed_fail(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

static void seed_fail(const char *fmt, ...)
{
    pthread_mutex_lock(&g_fail.mu);
    if (g_fail.n < FAILS_MAX) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(g_fail.lines[g_fail.n], sizeof(g_fail.lines[0]), fmt, ap);
        va_end(ap);
    }
    g_fail.n++;
    pthread_mutex_unlock(&g_fail.mu);
}

/* ---- messages: every field derives from (seed, to, context), so receivers can verify ------- */

/* context = sender index + 1 in the high 32 bits, the sender's sequence number below. */
static uint64_t msg_ctx(size_t sender, uint64_t seq)
{
    return ((uint64_t)(sender + 1) << 32) | seq;
}

static size_t msg_sender(uint64_t ctx)
{
    return (size_t)(ctx >> 32) - 1;
}

static uint32_t msg_group(uint64_t seed, uint64_t ctx)
{
    return (uint32_t)(mix64(seed ^ ctx) % GROUPS);
}

static uint64_t msg_index(uint64_t seed, uint64_t ctx)
{
    return mix64(seed + ctx) >> 20;
}

static uint8_t msg_byte(uint64_t ctx, size_t i)
{
    return (uint8_t)(ctx * 131u + i * 7u);
}

struct msg_buf {
    Slotd__Internal__V1__RaftMessage m;
    Slotd__Internal__V1__RaftEntry e;
    Slotd__Internal__V1__RaftEntry *entries[1];
};

/* Builds in b (borrowed for the call) the message ctx to node `to` with data (borrowed; len
 * bytes, filled here) as its one entry's payload. */
static void msg_build(struct msg_buf *b, uint64_t seed, uint64_t to, uint64_t ctx, uint8_t *data,
                      size_t len)
{
    slotd__internal__v1__raft_message__init(&b->m);
    slotd__internal__v1__raft_entry__init(&b->e);
    for (size_t i = 0; i < len; i++) {
        data[i] = msg_byte(ctx, i);
    }
    b->m.group_id = msg_group(seed, ctx);
    b->m.type = 3;
    b->m.from = SELF;
    b->m.to = to;
    b->m.term = seed;
    b->m.index = msg_index(seed, ctx);
    b->m.context = ctx;
    b->e.term = seed;
    b->e.index = b->m.index + 1;
    b->e.data.data = data;
    b->e.data.len = len;
    b->entries[0] = &b->e;
    b->m.n_entries = 1;
    b->m.entries = b->entries;
}

/* True when m (borrowed for the call) is exactly what msg_build made for node `to`. */
static bool msg_valid(uint64_t seed, uint64_t to, const Slotd__Internal__V1__RaftMessage *m)
{
    uint64_t ctx = m->context;
    if (m->group_id != msg_group(seed, ctx) || m->type != 3 || m->from != SELF || m->to != to ||
        m->term != seed || m->index != msg_index(seed, ctx) || m->n_entries != 1 ||
        msg_sender(ctx) >= SENDERS_MAX) {
        return false;
    }
    const Slotd__Internal__V1__RaftEntry *e = m->entries[0];
    if (e->term != seed || e->index != m->index + 1) {
        return false;
    }
    for (size_t i = 0; i < e->data.len; i++) {
        if (e->data.data[i] != msg_byte(ctx, i)) {
            return false;
        }
    }
    return true;
}

static size_t varint_len(uint64_t v)
{
    size_t n = 1;
    for (; v >= 0x80; v >>= 7) {
        n++;
    }
    return n;
}

/* Bytes m takes in a RaftBatch: field-3 tag, length, message. */
static size_t msg_record_len(const Slotd__Internal__V1__RaftMessage *m)
{
    size_t packed = slotd__internal__v1__raft_message__get_packed_size(m);
    return 1 + varint_len(packed) + packed;
}

/* ---- receivers: rpc servers whose Raft handler accepts, delays or fails, driven by the seed -- */

enum peer_mode {
    MODE_MIXED,    /* accepts, delays or refuses each frame at random */
    MODE_GOOD,     /* accepts every frame, some after a delay */
    MODE_SLOW,     /* accepts every frame after 15-30 ms */
    MODE_FAIL_ALL, /* refuses every frame (UNAVAILABLE or RESOURCE_EXHAUSTED: ends the stream) */
    MODE_DEAD,     /* no server: the address has nothing listening */
};

static const char *const mode_names[] = {"mixed", "good", "slow", "fail-all", "dead"};

struct rec {
    uint64_t ctx;
    bool accepted;
};

struct peer_server {
    uint64_t node_id;
    struct rpc_server *server;
    char address[64];
    struct rec *recs;    /* RECORDS_MAX */
    atomic_int inflight; /* frames in the handler now */
    pthread_mutex_t mu;  /* guards the per-seed state below */
    enum peer_mode mode;
    unsigned backoff_min_ms;
    struct rng rng;
    uint64_t seed;
    size_t batch_bytes_max;
    size_t n_recs; /* messages of every frame received, in arrival order */
    uint64_t acc_batches, acc_msgs, fail_batches, fail_msgs;
    size_t max_batch_len;
    int64_t fail_at_ms; /* when the last frame was refused; 0 once the next frame arrived */
    int max_inflight;
};

struct verdict {
    bool accept;
    int code; /* enum slotd_err when !accept */
    int64_t delay_ms;
};

/* The answer to the next frame, from the peer's PRNG. Under ps->mu. */
static struct verdict verdict_draw(struct peer_server *ps)
{
    struct verdict v = {true, SLOTD_OK, 0};
    uint64_t k = rng_below(&ps->rng, 100);
    int fail_code = rng_below(&ps->rng, 2) == 0 ? SLOTD_ENO_LEADER : SLOTD_EQUEUE_FULL;
    int64_t delay = 1 + (int64_t)rng_below(&ps->rng, DELAY_MS_MAX);
    switch (ps->mode) {
    case MODE_MIXED:
        v.accept = k < 85;
        v.code = v.accept ? SLOTD_OK : fail_code;
        v.delay_ms = (k >= 70 && k < 85) || k >= 95 ? delay : 0;
        break;
    case MODE_GOOD:
        v.delay_ms = k < 20 ? delay : 0;
        break;
    case MODE_SLOW:
        v.delay_ms = 15 + delay / 2;
        break;
    case MODE_FAIL_ALL:
    case MODE_DEAD:
        v.accept = false;
        v.code = fail_code;
        break;
    }
    return v;
}

/* Checks one received frame (len bytes; b its batch, NULL when undecodable). Under ps->mu. */
static void batch_check(struct peer_server *ps, const Slotd__Internal__V1__RaftBatch *b, size_t len,
                        int inflight, int64_t now)
{
    if (inflight > ps->max_inflight) {
        ps->max_inflight = inflight;
    }
    if (inflight > 1) {
        seed_fail("peer %" PRIu64 ": %d frames in the handler at once", ps->node_id, inflight);
    }
    if (len > ps->max_batch_len) {
        ps->max_batch_len = len;
    }
    if (len > ps->batch_bytes_max) {
        seed_fail("peer %" PRIu64 ": a frame of %zu bytes exceeds batch_bytes_max %zu",
                  ps->node_id, len, ps->batch_bytes_max);
    }
    if (ps->fail_at_ms != 0 && now - ps->fail_at_ms < (int64_t)ps->backoff_min_ms) {
        seed_fail("peer %" PRIu64 ": a frame %" PRId64 " ms after a refused one (backoff_min_ms %u)",
                  ps->node_id, now - ps->fail_at_ms, ps->backoff_min_ms);
    }
    ps->fail_at_ms = 0;
    if (b == NULL || b->from_node != SELF || b->to_node != ps->node_id || b->n_messages == 0) {
        seed_fail("peer %" PRIu64 ": bad RaftBatch (%s)", ps->node_id,
                  b == NULL ? "undecodable" : "header or empty");
    }
}

/* Records the messages of b with their fate. Under ps->mu. */
static void batch_record(struct peer_server *ps, const Slotd__Internal__V1__RaftBatch *b,
                         bool accepted)
{
    for (size_t i = 0; b != NULL && i < b->n_messages; i++) {
        const Slotd__Internal__V1__RaftMessage *m = b->messages[i];
        if (!msg_valid(ps->seed, ps->node_id, m)) {
            seed_fail("peer %" PRIu64 ": message context %#" PRIx64 " arrived altered", ps->node_id,
                      m->context);
        }
        if (ps->n_recs < RECORDS_MAX) {
            ps->recs[ps->n_recs] = (struct rec){m->context, accepted};
        } else if (ps->n_recs == RECORDS_MAX) {
            seed_fail("peer %" PRIu64 ": more than %d messages: records full", ps->node_id,
                      RECORDS_MAX);
        }
        ps->n_recs++;
    }
    size_t n = b != NULL ? b->n_messages : 0;
    if (accepted) {
        ps->acc_batches++;
        ps->acc_msgs += n;
    } else {
        ps->fail_batches++;
        ps->fail_msgs += n;
    }
}

/* ---- the RaftStream handler -------------------------------------------------------------- */

/* One frame: checked, recorded with its verdict, held for the verdict's delay (the stream is not
 * read meanwhile), then accepted or refused (which ends the stream with the verdict's code). */
static int raft_frame_cb(void *ctx, struct rpc_cstream *st, const uint8_t *frame, size_t len,
                         struct slotd_error *err)
{
    (void)st;
    struct peer_server *ps = ctx;
    int inflight = atomic_fetch_add(&ps->inflight, 1) + 1;
    int64_t now = now_ms();
    Slotd__Internal__V1__RaftStreamFrame *f =
        slotd__internal__v1__raft_stream_frame__unpack(NULL, len, frame);
    Slotd__Internal__V1__RaftBatch *b =
        f != NULL ? slotd__internal__v1__raft_batch__unpack(NULL, f->batch.len, f->batch.data)
                  : NULL;
    pthread_mutex_lock(&ps->mu);
    batch_check(ps, b, len, inflight, now);
    struct verdict v = verdict_draw(ps);
    batch_record(ps, b, v.accept);
    pthread_mutex_unlock(&ps->mu);
    if (b != NULL) {
        slotd__internal__v1__raft_batch__free_unpacked(b, NULL);
    }
    if (f != NULL) {
        slotd__internal__v1__raft_stream_frame__free_unpacked(f, NULL);
    }
    if (v.delay_ms > 0) {
        sleep_ms(v.delay_ms); /* a slow receiver: the test's servers have two CQ threads */
    }
    if (!v.accept) {
        pthread_mutex_lock(&ps->mu);
        ps->fail_at_ms = now_ms();
        pthread_mutex_unlock(&ps->mu);
        slotd_error_set(err, v.code, "test peer %" PRIu64 " refuses this frame", ps->node_id);
        if (v.code == SLOTD_EQUEUE_FULL) {
            err->retry_after_ms = 1;
        }
    }
    atomic_fetch_sub(&ps->inflight, 1);
    return v.accept ? 0 : -1;
}

static void server_down(struct peer_server *ps)
{
    rpc_server_free(ps->server); /* NULL is a no-op */
    ps->server = NULL;
    free(ps->recs);
    ps->recs = NULL;
    pthread_mutex_destroy(&ps->mu);
}

/* Starts ps as node node_id on 127.0.0.1:0; on failure ps is left freed. */
static int server_up(struct peer_server *ps, uint64_t node_id)
{
    memset(ps, 0, sizeof(*ps));
    ps->node_id = node_id;
    pthread_mutex_init(&ps->mu, NULL);
    atomic_init(&ps->inflight, 0);
    ps->recs = calloc(RECORDS_MAX, sizeof(*ps->recs));
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    o.cq_threads = 2; /* so two overlapping frames would really overlap in the handler */
    int port = 0;
    char err[256] = "";
    if (ps->recs == NULL || rpc_server_new(&o, &ps->server) != SLOTD_OK ||
        rpc_server_add_service(ps->server, &slotd__internal__v1__peer__descriptor) != SLOTD_OK ||
        rpc_server_add_client_stream(ps->server, TRANSPORT_RAFT_STREAM_METHOD, raft_frame_cb,
                                     NULL, ps) != SLOTD_OK ||
        rpc_server_start(ps->server, &port, err, sizeof(err)) != SLOTD_OK) {
        fprintf(stderr, "peer %" PRIu64 ": cannot start: %s\n", node_id, err);
        server_down(ps);
        return -1;
    }
    snprintf(ps->address, sizeof(ps->address), "127.0.0.1:%d", port);
    return 0;
}

/* Resets the per-seed state of ps for a seed where it plays mode. */
static void server_arm(struct peer_server *ps, uint64_t seed, enum peer_mode mode,
                       uint64_t rng_seed, const struct transport_options *o)
{
    pthread_mutex_lock(&ps->mu);
    ps->mode = mode;
    ps->rng.s = rng_seed;
    ps->seed = seed;
    ps->batch_bytes_max = o->batch_bytes_max;
    ps->backoff_min_ms = o->backoff_min_ms;
    ps->n_recs = 0;
    ps->acc_batches = ps->acc_msgs = ps->fail_batches = ps->fail_msgs = 0;
    ps->max_batch_len = 0;
    ps->max_inflight = 0;
    ps->fail_at_ms = 0;
    pthread_mutex_unlock(&ps->mu);
}

/* An address on 127.0.0.1 where nothing listens (a port just bound and released). */
static int dead_address(char *buf, size_t len)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a;
    memset(&a, 0, sizeof(a));
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t alen = sizeof(a);
    int rc = fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0 &&
                     getsockname(fd, (struct sockaddr *)&a, &alen) == 0
                 ? 0
                 : -1;
    snprintf(buf, len, "127.0.0.1:%d", ntohs(a.sin_port));
    if (fd >= 0) {
        close(fd);
    }
    return rc;
}

static struct peer_server g_servers[SERVERS];

/* ---- one seed's scenario ------------------------------------------------------------------ */

struct scenario {
    uint64_t seed;
    struct rng rng; /* the seed's stream: everything random below derives from it */
    struct transport_options opts;
    size_t n_peers;
    uint64_t peer_id[PEERS_MAX];
    enum peer_mode mode[PEERS_MAX];
    struct peer_server *server[PEERS_MAX]; /* NULL for MODE_DEAD */
    size_t n_senders;                      /* sender threads: 1 or 2 */
    bool pre_start;                        /* a burst is queued before transport_start */
    bool drain_flush_once;                 /* the drain relies on the transport's own restarts */
    bool stop_abrupt;                      /* transport_stop with batches in flight, no drain */
    /* peer_unreachable, by peer index: every call, those that lost a frame in flight, and the
     * messages those frames held */
    pthread_mutex_t mu;
    uint64_t unreach_calls[PEERS_MAX], unreach_lost_calls[PEERS_MAX], unreach_msgs[PEERS_MAX];
    /* queue bounds observed */
    uint64_t max_queued_msgs, max_queued_bytes;
};

static size_t size_between(struct rng *r, size_t lo, size_t hi)
{
    return lo + (size_t)rng_below(r, hi - lo + 1);
}

/* Draws bounds, peers, modes and senders of seed into sc. */
static void scenario_make(struct scenario *sc, uint64_t seed)
{
    memset(sc, 0, sizeof(*sc));
    sc->seed = seed;
    sc->rng.s = seed;
    struct rng *r = &sc->rng;
    transport_options_default(&sc->opts);
    sc->opts.node_id = SELF;
    sc->opts.batch_bytes_max = size_between(r, 1024, 64 * 1024);
    sc->opts.queue_bytes_max = size_between(r, 1024, 64 * 1024);
    sc->opts.queue_msgs_max = size_between(r, 4, 512);
    sc->opts.backoff_min_ms = (unsigned)size_between(r, 1, 5);
    sc->opts.backoff_max_ms = sc->opts.backoff_min_ms + (unsigned)size_between(r, 0, 15);
    sc->n_peers = size_between(r, 2, PEERS_MAX);
    sc->n_senders = size_between(r, 1, 2);
    sc->pre_start = rng_below(r, 3) == 0;
    sc->drain_flush_once = rng_below(r, 2) == 0;
    /* One seed in three has a bad peer (failing, dead or slow) beside good ones. */
    bool bad = rng_below(r, 3) == 0;
    size_t bad_i = (size_t)rng_below(r, sc->n_peers);
    enum peer_mode bad_mode = (enum peer_mode)(MODE_SLOW + rng_below(r, 3));
    for (size_t i = 0; i < sc->n_peers; i++) {
        sc->mode[i] = !bad ? MODE_MIXED : i == bad_i ? bad_mode : MODE_GOOD;
        sc->peer_id[i] = sc->mode[i] == MODE_DEAD ? DEAD_NODE : g_servers[i].node_id;
        sc->server[i] = sc->mode[i] == MODE_DEAD ? NULL : &g_servers[i];
    }
    sc->stop_abrupt = rng_below(r, 6) == 0;
    pthread_mutex_init(&sc->mu, NULL);
}

static int peer_index(const struct scenario *sc, uint64_t node_id)
{
    for (size_t i = 0; i < sc->n_peers; i++) {
        if (sc->peer_id[i] == node_id) {
            return (int)i;
        }
    }
    return -1;
}

static void unreach_cb(void *ctx, uint64_t peer, const char *why)
{
    struct scenario *sc = ctx;
    int i = peer_index(sc, peer);
    const char *at = strstr(why, "Raft stream failed, ");
    size_t n = 0;
    if (i < 0 || at == NULL || sscanf(at, "Raft stream failed, %zu messages", &n) != 1) {
        seed_fail("peer_unreachable(%" PRIu64 ") without a message count: %s", peer, why);
        return;
    }
    pthread_mutex_lock(&sc->mu);
    sc->unreach_calls[i]++;
    sc->unreach_lost_calls[i] += n > 0;
    sc->unreach_msgs[i] += n;
    pthread_mutex_unlock(&sc->mu);
}

/* Checks the queue bounds of every peer against a stats sample. Any thread. */
static void bounds_sample(struct scenario *sc, struct transport *t)
{
    for (size_t i = 0; i < sc->n_peers; i++) {
        struct transport_peer_stats st;
        if (transport_peer_stats(t, sc->peer_id[i], &st) != TRANSPORT_OK) {
            seed_fail("peer %" PRIu64 ": transport_peer_stats failed", sc->peer_id[i]);
            continue;
        }
        if (st.queued_msgs > sc->opts.queue_msgs_max ||
            st.queued_bytes > sc->opts.queue_bytes_max) {
            seed_fail("peer %" PRIu64 ": %" PRIu64 " messages / %" PRIu64
                      " bytes queued, bounds %zu / %zu",
                      sc->peer_id[i], st.queued_msgs, st.queued_bytes, sc->opts.queue_msgs_max,
                      sc->opts.queue_bytes_max);
        }
        pthread_mutex_lock(&sc->mu);
        sc->max_queued_msgs =
            st.queued_msgs > sc->max_queued_msgs ? st.queued_msgs : sc->max_queued_msgs;
        sc->max_queued_bytes =
            st.queued_bytes > sc->max_queued_bytes ? st.queued_bytes : sc->max_queued_bytes;
        pthread_mutex_unlock(&sc->mu);
    }
}

/* ---- senders ------------------------------------------------------------------------------ */

struct sender {
    size_t idx;
    struct scenario *sc;
    struct transport *t;
    struct rng rng;
    uint8_t *buf; /* PAYLOAD_MAX */
    uint64_t next_seq;
    uint64_t *sent[PEERS_MAX]; /* contexts send_raft took (TRANSPORT_OK), in send order */
    size_t n_sent[PEERS_MAX];
    uint64_t n_full[PEERS_MAX], n_einval;
    pthread_t thread;
};

static size_t payload_pick(struct rng *r, size_t batch_max)
{
    uint64_t k = rng_below(r, 100);
    if (k < 55) {
        return (size_t)rng_below(r, 65);
    }
    if (k < 80) {
        return 64 + (size_t)rng_below(r, 449);
    }
    if (k < 96) {
        return 512 + (size_t)rng_below(r, (batch_max < 16384 ? batch_max : 16384) / 2);
    }
    if (k < 99) {
        return batch_max - 96 + (size_t)rng_below(r, 96); /* around the EINVAL edge */
    }
    return batch_max + (size_t)rng_below(r, 256);
}

static size_t burst_pick(struct rng *r)
{
    uint64_t k = rng_below(r, 100);
    return k < 50   ? 1 + (size_t)rng_below(r, 8)
           : k < 95 ? 8 + (size_t)rng_below(r, 33)
                    : 64 + (size_t)rng_below(r, 129);
}

/* Sends one message of len payload bytes to peer index p; checks the answer of send_raft against
 * the record size. *rec_len (may be NULL) gets that size. Returns send_raft's code, or -1 when
 * the (peer, sender) log is full and nothing was sent. */
static int sender_send(struct sender *s, size_t p, size_t len, size_t *rec_len)
{
    struct scenario *sc = s->sc;
    if (s->n_sent[p] >= SENT_MAX) {
        return -1;
    }
    uint64_t ctx = msg_ctx(s->idx, s->next_seq++);
    struct msg_buf b;
    msg_build(&b, sc->seed, sc->peer_id[p], ctx, s->buf, len);
    size_t rl = msg_record_len(&b.m);
    int rc = transport_send_raft(s->t, sc->peer_id[p], &b.m);
    size_t max = sc->opts.batch_bytes_max;
    if (rc == TRANSPORT_OK) {
        s->sent[p][s->n_sent[p]++] = ctx;
    } else if (rc == TRANSPORT_EFULL) {
        s->n_full[p]++;
    } else if (rc == TRANSPORT_EINVAL) {
        s->n_einval++;
    } else {
        seed_fail("sender %zu: transport_send_raft: %s", s->idx, transport_strerror(rc));
    }
    if (rc != TRANSPORT_EINVAL && rl + BATCH_HEADER_BYTES > max) {
        seed_fail("sender %zu: a %zu-byte record no %zu-byte batch can hold was answered %s",
                  s->idx, rl, max, transport_strerror(rc));
    }
    if (rc == TRANSPORT_EINVAL && rl + BATCH_HEADER_RESERVE <= max) {
        seed_fail("sender %zu: a %zu-byte record that fits a %zu-byte batch was refused (EINVAL)",
                  s->idx, rl, max);
    }
    if (rec_len != NULL) {
        *rec_len = rl;
    }
    return rc;
}

static void *sender_main(void *arg)
{
    struct sender *s = arg;
    struct scenario *sc = s->sc;
    int64_t end = now_ms() + SEND_MS_MAX;
    size_t ops = 20 + (size_t)rng_below(&s->rng, OPS_MAX - 19);
    for (size_t op = 0; op < ops && now_ms() < end; op++) {
        size_t n = burst_pick(&s->rng);
        bool spray = rng_below(&s->rng, 4) == 0; /* one burst over random peers */
        size_t p = (size_t)rng_below(&s->rng, sc->n_peers);
        for (size_t i = 0; i < n; i++) {
            p = spray ? (size_t)rng_below(&s->rng, sc->n_peers) : p;
            sender_send(s, p, payload_pick(&s->rng, sc->opts.batch_bytes_max), NULL);
            if (rng_below(&s->rng, 64) == 0) {
                transport_flush(s->t);
            }
        }
        bounds_sample(sc, s->t);
        if (rng_below(&s->rng, 100) < 40) {
            transport_flush(s->t);
        }
        if (rng_below(&s->rng, 100) < 50) {
            sleep_ms((int64_t)rng_below(&s->rng, 5)); /* lets batches go out between bursts */
        }
    }
    return NULL;
}

/* Fills s (borrowed for the call; sc and t are kept, borrowed). Returns 0, or -1 when out of
 * memory with nothing left allocated. Either way sender_free(s) is safe. */
static int sender_init(struct sender *s, size_t idx, struct scenario *sc, struct transport *t)
{
    memset(s, 0, sizeof(*s));
    s->idx = idx;
    s->sc = sc;
    s->t = t;
    s->rng.s = rng_next(&sc->rng);
    uint64_t *sent = calloc(PEERS_MAX * SENT_MAX, sizeof(uint64_t));
    if (sent == NULL) {
        goto err;
    }
    s->buf = malloc(PAYLOAD_MAX);
    if (s->buf == NULL) {
        goto err_after_sent;
    }
    for (size_t p = 0; p < PEERS_MAX; p++) {
        s->sent[p] = sent + p * SENT_MAX;
    }
    return 0;

err_after_sent:
    free(sent);
err:
    return -1;
}

static void sender_free(struct sender *s)
{
    free(s->buf);
    free(s->sent[0]); /* the one block behind every sent[p] */
    memset(s, 0, sizeof(*s));
}

/* Before transport_start messages only queue, so whether each is refused is exactly predictable:
 * a model of the queues checks every answer and the queued counters. */
static void prestart_burst(struct sender *s)
{
    struct scenario *sc = s->sc;
    uint64_t model_n[PEERS_MAX] = {0}, model_bytes[PEERS_MAX] = {0}, full[PEERS_MAX] = {0};
    size_t n = 1 + (size_t)rng_below(&s->rng, sc->opts.queue_msgs_max * sc->n_peers + 32);
    for (size_t i = 0; i < n; i++) {
        size_t p = (size_t)rng_below(&s->rng, sc->n_peers);
        size_t rl = 0;
        int rc = sender_send(s, p, payload_pick(&s->rng, sc->opts.batch_bytes_max), &rl);
        if (rc == TRANSPORT_EINVAL || rc < 0) {
            continue;
        }
        bool want_full =
            model_n[p] >= sc->opts.queue_msgs_max || model_bytes[p] + rl > sc->opts.queue_bytes_max;
        if (rc != (want_full ? TRANSPORT_EFULL : TRANSPORT_OK)) {
            seed_fail("before start: message %zu to peer %" PRIu64 " (%zu bytes, %" PRIu64
                      " queued in %" PRIu64 " bytes) answered %s, expected %s",
                      i, sc->peer_id[p], rl, model_n[p], model_bytes[p], transport_strerror(rc),
                      transport_strerror(want_full ? TRANSPORT_EFULL : TRANSPORT_OK));
        }
        full[p] += rc == TRANSPORT_EFULL;
        model_n[p] += rc == TRANSPORT_OK;
        model_bytes[p] += rc == TRANSPORT_OK ? rl : 0;
    }
    for (size_t p = 0; p < sc->n_peers; p++) {
        struct transport_peer_stats st = {0};
        transport_peer_stats(s->t, sc->peer_id[p], &st);
        if (st.queued_msgs != model_n[p] || st.queued_bytes != model_bytes[p] ||
            st.dropped_full != full[p]) {
            seed_fail("before start: peer %" PRIu64 " stats queued %" PRIu64 "/%" PRIu64
                      " bytes, dropped_full %" PRIu64 "; model %" PRIu64 "/%" PRIu64 ", %" PRIu64,
                      sc->peer_id[p], st.queued_msgs, st.queued_bytes, st.dropped_full, model_n[p],
                      model_bytes[p], full[p]);
        }
    }
}

/* ---- drain and checks --------------------------------------------------------------------- */

/* True when no peer has messages queued or a batch in flight and no answer is held. */
static bool all_idle(struct scenario *sc, struct transport *t)
{
    for (size_t i = 0; i < sc->n_peers; i++) {
        struct transport_peer_stats st = {0};
        transport_peer_stats(t, sc->peer_id[i], &st);
        if (st.queued_msgs != 0 || st.in_flight) {
            return false;
        }
    }
    return true;
}

static void servers_quiesce(void);

/* Flushes (each turn, or once) until everything is sent or DRAIN_MS passed, then waits for the
 * receivers to go quiet and for peer_unreachable to have run once per failed frame. Returns the
 * drain time in ms. */
static int64_t drain(struct scenario *sc, struct transport *t)
{
    int64_t start = now_ms();
    transport_flush(t);
    while (!all_idle(sc, t)) {
        bounds_sample(sc, t);
        if (now_ms() - start > DRAIN_MS) {
            seed_fail("not drained after %d ms (drain %s)", DRAIN_MS,
                      sc->drain_flush_once ? "with one flush" : "flushing");
            return now_ms() - start;
        }
        sleep_ms(1);
        if (!sc->drain_flush_once) {
            transport_flush(t);
        }
    }
    int64_t drained = now_ms() - start;
    /* Every send completed; the receivers may still be reading what they buffered. */
    servers_quiesce();
    for (size_t i = 0; i < sc->n_peers; i++) {
        for (int64_t end = now_ms() + WAIT_MS;;) {
            struct transport_peer_stats st = {0};
            transport_peer_stats(t, sc->peer_id[i], &st);
            pthread_mutex_lock(&sc->mu);
            bool done = sc->unreach_lost_calls[i] >= st.failed_batches;
            pthread_mutex_unlock(&sc->mu);
            if (done || now_ms() > end) {
                break;
            }
            sleep_ms(1);
        }
    }
    return drained;
}

/* The messages peer ps received from sender s (accepted or refused) must be what send_raft took
 * from s for it, in send order, intact, none twice. A refused frame ends the stream and frames
 * already sent behind it are never read, so in general some may be missing (exact: none may,
 * for peers that never refuse a frame). */
static void sequence_check(struct peer_server *ps, const struct sender *s, size_t p, bool exact)
{
    size_t j = 0;
    size_t n = ps->n_recs < RECORDS_MAX ? ps->n_recs : RECORDS_MAX;
    for (size_t i = 0; i < n; i++) {
        uint64_t ctx = ps->recs[i].ctx;
        if (msg_sender(ctx) != s->idx) {
            continue;
        }
        size_t k = j;
        while (k < s->n_sent[p] && s->sent[p][k] != ctx && !exact) {
            k++; /* skipped: lost behind a refused frame or in a failed one */
        }
        if (k >= s->n_sent[p] || ctx != s->sent[p][k]) {
            seed_fail("peer %" PRIu64 " sender %zu: arrival %zu is seq %" PRIu64
                      " (%s), expected %s%" PRIu64 ": %s",
                      ps->node_id, s->idx, j, ctx & 0xffffffffu,
                      ps->recs[i].accepted ? "accepted" : "refused",
                      j < s->n_sent[p] ? exact ? "seq " : "a seq from " : "none, sent ",
                      j < s->n_sent[p] ? s->sent[p][j] & 0xffffffffu : (uint64_t)s->n_sent[p],
                      "duplicate, reordered, lost or extra");
            return;
        }
        j = k + 1;
    }
    if (exact && j != s->n_sent[p]) {
        seed_fail("peer %" PRIu64 " sender %zu: %zu of %zu messages never reached the peer",
                  ps->node_id, s->idx, s->n_sent[p] - j, s->n_sent[p]);
    }
}

struct totals {
    uint64_t seeds, failed_seeds, taken, full, einval, delivered, lost, batches, failed_batches;
    size_t max_batch_len;
    int max_inflight;
};

/* Server-side checks of peer p against the transport's stats st: an accepted frame's send
 * completed, so the transport counted it sent; a peer that never refuses got everything. */
static void server_check(struct scenario *sc, const struct transport_peer_stats *st, size_t p,
                         const struct sender *senders, struct totals *tot)
{
    struct peer_server *ps = sc->server[p];
    bool never_refuses = sc->mode[p] == MODE_GOOD || sc->mode[p] == MODE_SLOW;
    pthread_mutex_lock(&ps->mu);
    if (ps->acc_msgs > st->sent_msgs || ps->acc_batches > st->sent_batches ||
        ps->acc_msgs + ps->fail_msgs > st->sent_msgs + sc->unreach_msgs[p] ||
        (never_refuses && (ps->acc_msgs != st->sent_msgs || ps->acc_batches != st->sent_batches ||
                           ps->fail_batches != 0 || st->failed_batches != 0))) {
        seed_fail("peer %" PRIu64 " (%s): server accepted %" PRIu64 " msgs in %" PRIu64
                  " frames, refused %" PRIu64 " in %" PRIu64 "; transport says sent %" PRIu64
                  " in %" PRIu64 ", lost %" PRIu64 " in %" PRIu64,
                  ps->node_id, mode_names[sc->mode[p]], ps->acc_msgs, ps->acc_batches,
                  ps->fail_msgs, ps->fail_batches, st->sent_msgs, st->sent_batches,
                  sc->unreach_msgs[p], st->failed_batches);
    }
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        sequence_check(ps, &senders[s], p, never_refuses);
    }
    tot->max_batch_len =
        ps->max_batch_len > tot->max_batch_len ? ps->max_batch_len : tot->max_batch_len;
    tot->max_inflight = ps->max_inflight > tot->max_inflight ? ps->max_inflight : tot->max_inflight;
    pthread_mutex_unlock(&ps->mu);
}

/* Accounting of peer p: every message send_raft took went out in a frame whose send completed
 * or was lost in a frame in flight, exactly once. */
static void peer_check(struct scenario *sc, struct transport *t, size_t p,
                       const struct sender *senders, struct totals *tot)
{
    uint64_t id = sc->peer_id[p];
    struct transport_peer_stats st = {0};
    transport_peer_stats(t, id, &st);
    uint64_t taken = 0, full = 0;
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        taken += senders[s].n_sent[p];
        full += senders[s].n_full[p];
    }
    pthread_mutex_lock(&sc->mu);
    uint64_t u_calls = sc->unreach_lost_calls[p], u_msgs = sc->unreach_msgs[p];
    pthread_mutex_unlock(&sc->mu);
    if (st.dropped_full != full) {
        seed_fail("peer %" PRIu64 ": dropped_full %" PRIu64 ", send_raft said EFULL %" PRIu64
                  " times",
                  id, st.dropped_full, full);
    }
    if (st.failed_batches != u_calls) {
        seed_fail("peer %" PRIu64 ": failed_batches %" PRIu64 ", peer_unreachable reported a "
                  "lost frame %" PRIu64 " times",
                  id, st.failed_batches, u_calls);
    }
    if (st.sent_msgs + u_msgs + st.queued_msgs != taken) {
        seed_fail("peer %" PRIu64 " (%s): send_raft took %" PRIu64 ", delivered %" PRIu64
                  " + lost %" PRIu64 " + queued %" PRIu64,
                  id, mode_names[sc->mode[p]], taken, st.sent_msgs, u_msgs, st.queued_msgs);
    }
    /* A dead, failing or slow peer does not stop the others: good peers get everything. */
    if (sc->mode[p] == MODE_GOOD && st.sent_msgs != taken) {
        seed_fail("peer %" PRIu64 " (good, beside a bad one): %" PRIu64 " of %" PRIu64
                  " messages delivered",
                  id, st.sent_msgs, taken);
    }
    if (sc->server[p] != NULL) {
        server_check(sc, &st, p, senders, tot);
    } else if (st.sent_msgs != 0) {
        seed_fail("peer %" PRIu64 " (dead): %" PRIu64 " messages delivered", id, st.sent_msgs);
    }
    tot->taken += taken;
    tot->full += full;
    tot->delivered += st.sent_msgs;
    tot->lost += u_msgs;
    tot->batches += st.sent_batches;
    tot->failed_batches += st.failed_batches;
}

/* ---- abrupt stop ------------------------------------------------------------------------- */

/* Waits (bounded) until no server handles a frame and none arrived for QUIET_MS. */
static void servers_quiesce(void)
{
    int64_t end = now_ms() + WAIT_MS, quiet_since = now_ms();
    uint64_t seen = UINT64_MAX;
    for (;;) {
        uint64_t batches = 0;
        bool busy = false;
        for (size_t i = 0; i < SERVERS; i++) {
            busy = busy || atomic_load(&g_servers[i].inflight) != 0;
            pthread_mutex_lock(&g_servers[i].mu);
            batches += g_servers[i].acc_batches + g_servers[i].fail_batches;
            pthread_mutex_unlock(&g_servers[i].mu);
        }
        if (busy || batches != seen) {
            seen = batches;
            quiet_since = now_ms();
        } else if (now_ms() - quiet_since >= QUIET_MS) {
            return;
        }
        if (now_ms() > end) {
            seed_fail("servers still busy %d ms after transport_stop", WAIT_MS);
            return;
        }
        sleep_ms(2);
    }
}

/* Server-side checks of live peer p after an abrupt stop: every frame the server saw was
 * completed on the client (sent, or failed: the one in flight at the stop may have arrived),
 * and what arrived is in send order. */
static void server_check_stopped(struct scenario *sc, const struct transport_peer_stats *st,
                                 size_t p, uint64_t u_calls, const struct sender *senders,
                                 struct totals *tot)
{
    struct peer_server *ps = sc->server[p];
    pthread_mutex_lock(&ps->mu);
    uint64_t seen = ps->acc_batches + ps->fail_batches;
    uint64_t done = st->sent_batches + st->failed_batches;
    if (ps->acc_batches > st->sent_batches + 1 || seen > done || u_calls > ps->fail_batches + 1) {
        seed_fail("after stop: peer %" PRIu64 ": server saw %" PRIu64 " accepted + %" PRIu64
                  " refused frames; transport counted %" PRIu64 " sent + %" PRIu64
                  " failed, %" PRIu64 " reported",
                  ps->node_id, ps->acc_batches, ps->fail_batches, st->sent_batches,
                  st->failed_batches, u_calls);
    }
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        sequence_check(ps, &senders[s], p, false);
    }
    tot->max_inflight = ps->max_inflight > tot->max_inflight ? ps->max_inflight : tot->max_inflight;
    pthread_mutex_unlock(&ps->mu);
}

/* After transport_stop: queues dropped, nothing in flight, at most one cancelled frame per peer
 * counted in failed_batches without a peer_unreachable, nothing delivered twice. */
static void peer_check_stopped(struct scenario *sc, struct transport *t, size_t p,
                               const struct sender *senders, struct totals *tot)
{
    uint64_t id = sc->peer_id[p];
    struct transport_peer_stats st = {0};
    transport_peer_stats(t, id, &st);
    uint64_t taken = 0, full = 0;
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        taken += senders[s].n_sent[p];
        full += senders[s].n_full[p];
    }
    pthread_mutex_lock(&sc->mu);
    uint64_t u_calls = sc->unreach_lost_calls[p], u_msgs = sc->unreach_msgs[p];
    pthread_mutex_unlock(&sc->mu);
    if (st.queued_msgs != 0 || st.queued_bytes != 0 || st.in_flight) {
        seed_fail("after stop: peer %" PRIu64 ": %" PRIu64 " messages (%" PRIu64
                  " bytes) still queued, in flight %d",
                  id, st.queued_msgs, st.queued_bytes, (int)st.in_flight);
    }
    if (st.dropped_full != full || st.sent_msgs + u_msgs > taken) {
        seed_fail("after stop: peer %" PRIu64 ": dropped_full %" PRIu64 " (EFULL %" PRIu64
                  "), delivered %" PRIu64 " + lost %" PRIu64 " of %" PRIu64 " taken",
                  id, st.dropped_full, full, st.sent_msgs, u_msgs, taken);
    }
    if (st.failed_batches < u_calls || st.failed_batches > u_calls + 1) {
        seed_fail("after stop: peer %" PRIu64 ": failed_batches %" PRIu64
                  ", peer_unreachable ran %" PRIu64
                  " times with a lost frame (one cancelled frame may be unreported)",
                  id, st.failed_batches, u_calls);
    }
    if (sc->server[p] != NULL) {
        server_check_stopped(sc, &st, p, u_calls, senders, tot);
    }
    tot->taken += taken;
    tot->full += full;
    tot->delivered += st.sent_msgs;
    tot->lost += u_msgs;
    tot->batches += st.sent_batches;
    tot->failed_batches += st.failed_batches;
}

/* Stops t with batches in flight and messages queued, then checks what stop promises. */
static void stop_abrupt(struct scenario *sc, struct transport *t, const struct sender *senders,
                        struct totals *tot)
{
    int64_t start = now_ms();
    transport_stop(t);
    if (now_ms() - start > WAIT_MS) {
        seed_fail("transport_stop took %" PRId64 " ms", now_ms() - start);
    }
    uint64_t calls_at_stop = 0, calls_later = 0;
    pthread_mutex_lock(&sc->mu);
    for (size_t p = 0; p < sc->n_peers; p++) {
        calls_at_stop += sc->unreach_calls[p];
    }
    pthread_mutex_unlock(&sc->mu);
    struct msg_buf b;
    uint8_t none = 0;
    msg_build(&b, sc->seed, sc->peer_id[0], msg_ctx(PRE_SENDER, UINT32_MAX), &none, 0);
    int rc = transport_send_raft(t, sc->peer_id[0], &b.m);
    if (rc != TRANSPORT_ESTOPPED) {
        seed_fail("after stop: transport_send_raft answered %s", transport_strerror(rc));
    }
    servers_quiesce();
    for (size_t p = 0; p < sc->n_peers; p++) {
        peer_check_stopped(sc, t, p, senders, tot);
    }
    pthread_mutex_lock(&sc->mu);
    for (size_t p = 0; p < sc->n_peers; p++) {
        calls_later += sc->unreach_calls[p];
    }
    pthread_mutex_unlock(&sc->mu);
    if (calls_later != calls_at_stop) {
        seed_fail("peer_unreachable ran %" PRIu64 " times after transport_stop returned",
                  calls_later - calls_at_stop);
    }
}

/* ---- one seed ----------------------------------------------------------------------------- */

static struct transport *seed_transport(struct scenario *sc)
{
    struct transport_callbacks cb = {sc, unreach_cb};
    struct transport *t = NULL;
    if (transport_new(&sc->opts, &cb, &t) != TRANSPORT_OK) {
        seed_fail("transport_new failed");
        return NULL;
    }
    char dead[64];
    for (size_t i = 0; i < sc->n_peers; i++) {
        bool is_dead = sc->server[i] == NULL;
        if (is_dead && dead_address(dead, sizeof(dead)) != 0) {
            seed_fail("no free port for the dead peer");
        }
        if (transport_add_peer(t, sc->peer_id[i], is_dead ? dead : sc->server[i]->address) !=
            TRANSPORT_OK) {
            seed_fail("transport_add_peer(%" PRIu64 ") failed", sc->peer_id[i]);
        }
    }
    return t;
}

/* Senders run, the transport drains, then every invariant is checked. */
static void seed_exercise(struct scenario *sc, struct transport *t, struct sender *senders,
                          struct totals *tot, int64_t *drain_ms)
{
    if (sc->pre_start) {
        prestart_burst(&senders[PRE_SENDER]);
    }
    if (transport_start(t) != TRANSPORT_OK) {
        seed_fail("transport_start failed");
        return;
    }
    size_t started = 0;
    for (; started < sc->n_senders; started++) {
        if (pthread_create(&senders[started].thread, NULL, sender_main, &senders[started]) != 0) {
            seed_fail("cannot start sender thread %zu", started);
            break;
        }
    }
    for (size_t i = 0; i < started; i++) {
        pthread_join(senders[i].thread, NULL);
    }
    if (sc->stop_abrupt) {
        stop_abrupt(sc, t, senders, tot);
        for (size_t s = 0; s < SENDERS_MAX; s++) {
            tot->einval += senders[s].n_einval;
        }
        return;
    }
    *drain_ms = drain(sc, t);
    for (size_t p = 0; p < sc->n_peers; p++) {
        peer_check(sc, t, p, senders, tot);
    }
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        tot->einval += senders[s].n_einval;
    }
}

static char g_exe[512] = "transport_seeded_test";

/* Runs seed; returns true when every invariant held. */
static bool seed_run(uint64_t seed, struct totals *tot)
{
    int64_t start = now_ms();
    pthread_mutex_lock(&g_fail.mu);
    g_fail.n = 0;
    pthread_mutex_unlock(&g_fail.mu);
    struct totals before = *tot;
    struct scenario sc;
    scenario_make(&sc, seed);
    for (size_t i = 0; i < sc.n_peers; i++) {
        if (sc.server[i] != NULL) {
            server_arm(sc.server[i], seed, sc.mode[i], rng_next(&sc.rng), &sc.opts);
        }
    }
    struct sender senders[SENDERS_MAX];
    bool ok_alloc = true;
    struct transport *t = seed_transport(&sc);
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        ok_alloc = sender_init(&senders[s], s, &sc, t) == 0 && ok_alloc;
    }
    int64_t drain_ms = 0;
    if (t != NULL && ok_alloc) {
        seed_exercise(&sc, t, senders, tot, &drain_ms);
    } else {
        seed_fail("setup failed (out of memory or transport)");
    }
    transport_free(t);
    /* A frame of a cancelled stream may still be in a handler: the next seed starts after. */
    servers_quiesce();
    for (size_t s = 0; s < SENDERS_MAX; s++) {
        sender_free(&senders[s]);
    }
    pthread_mutex_destroy(&sc.mu);
    printf("seed %" PRIu64 " ran: peers", seed); /* failures alone read "seed S: ..." */
    for (size_t i = 0; i < sc.n_peers; i++) {
        printf("%s%s", i == 0 ? " " : ",", mode_names[sc.mode[i]]);
    }
    printf(" senders %zu%s%s, batch %zu, queue %zu msgs/%zu B: taken %" PRIu64 " full %" PRIu64
           " delivered %" PRIu64 " in %" PRIu64 " batches, lost %" PRIu64 " in %" PRIu64
           "; peak queue %" PRIu64 "/%" PRIu64 " B; drain %" PRId64 " ms, %" PRId64 " ms\n",
           sc.n_senders, sc.pre_start ? "+pre" : "", sc.stop_abrupt ? ", abrupt stop" : "",
           sc.opts.batch_bytes_max, sc.opts.queue_msgs_max, sc.opts.queue_bytes_max,
           tot->taken - before.taken, tot->full - before.full, tot->delivered - before.delivered,
           tot->batches - before.batches, tot->lost - before.lost,
           tot->failed_batches - before.failed_batches, sc.max_queued_msgs, sc.max_queued_bytes,
           drain_ms, now_ms() - start);
    tot->seeds++;
    pthread_mutex_lock(&g_fail.mu);
    size_t nf = g_fail.n;
    for (size_t i = 0; i < nf && i < FAILS_MAX; i++) {
        printf("seed %" PRIu64 ": %s\n", seed, g_fail.lines[i]);
    }
    pthread_mutex_unlock(&g_fail.mu);
    if (nf > FAILS_MAX) {
        printf("seed %" PRIu64 ": (%zu more failures)\n", seed, nf - FAILS_MAX);
    }
    if (nf > 0) {
        printf("replay: TRANSPORT_SEED=%" PRIu64 " %s\n", seed, g_exe);
        tot->failed_seeds++;
    }
    fflush(stdout);
    return nf == 0;
}

/* ---- the suite ---------------------------------------------------------------------------- */

/* Reads a positive integer from environment variable name into *out; false when set but bad. */
static bool env_u64(const char *name, uint64_t *out)
{
    const char *v = getenv(name);
    if (v == NULL || *v == '\0') {
        return true;
    }
    char *end = NULL;
    unsigned long long n = strtoull(v, &end, 10);
    if (*end != '\0' || n == 0) {
        fprintf(stderr, "%s=%s: not a positive integer\n", name, v);
        return false;
    }
    *out = n;
    return true;
}

static void test_seeded_batching(void)
{
    uint64_t seeds = SEEDS_DEFAULT, one = 0;
    CU_ASSERT_FATAL(env_u64("TRANSPORT_SEEDS", &seeds) && env_u64("TRANSPORT_SEED", &one));
    size_t up = 0;
    for (; up < SERVERS; up++) {
        if (server_up(&g_servers[up], 2 + up) != 0) {
            break;
        }
    }
    CU_ASSERT_EQUAL(up, SERVERS);
    struct totals tot;
    memset(&tot, 0, sizeof(tot));
    int64_t start = now_ms();
    uint64_t first = one != 0 ? one : 1, last = one != 0 ? one : seeds;
    for (uint64_t seed = first; up == SERVERS && seed <= last; seed++) {
        CU_ASSERT(seed_run(seed, &tot));
    }
    printf("transport_seeded: %" PRIu64 " seeds, %" PRIu64 " failed; taken %" PRIu64
           " (EFULL %" PRIu64 ", EINVAL %" PRIu64 "), delivered %" PRIu64 " in %" PRIu64
           " batches, lost %" PRIu64 " in %" PRIu64 " failed batches; max batch %zu B, max Raft "
           "calls in flight per peer %d; %" PRId64 " ms\n",
           tot.seeds, tot.failed_seeds, tot.taken, tot.full, tot.einval, tot.delivered, tot.batches,
           tot.lost, tot.failed_batches, tot.max_batch_len, tot.max_inflight, now_ms() - start);
    CU_ASSERT(tot.delivered > 0);
    CU_ASSERT(tot.max_inflight <= 1);
    for (size_t i = 0; i < up; i++) {
        server_down(&g_servers[i]);
    }
}

int main(void)
{
    ssize_t n = readlink("/proc/self/exe", g_exe, sizeof(g_exe) - 1);
    g_exe[n > 0 ? (size_t)n : 0] = '\0';
    if (n <= 0) {
        snprintf(g_exe, sizeof(g_exe), "transport_seeded_test");
    }
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("transport_seeded", NULL, NULL);
    if (s == NULL ||
        CU_add_test(s, "batching properties over seeds", test_seeded_batching) == NULL) {
        CU_cleanup_registry();
        return 1;
    }
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed != 0;
}
