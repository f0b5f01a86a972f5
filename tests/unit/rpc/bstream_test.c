/* bstream_test.c - bidirectional streams (service/rpc/bstream.c) against a live server on
 * 127.0.0.1 through a gRPC core client: results by id, the in-flight bound, coalescing, the
 * per-frame item limit, a client cancel with items in flight. */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "google/rpc/status.pb-c.h"
#include "rpc.h"
#include "slotd/v1/metadata.pb-c.h"

#define BS_PATH "/slotd.test.v1.BStream/Items"
#define BS_WAIT_MS 5000 /* bound on every wait in this file */
#define BS_INFLIGHT_MAX 256
#define BS_FRAME_ITEMS_MAX 64
#define BS_HELD_MAX 1024 /* > any number of items one test holds */

/* A frame is a run of 4-byte little-endian item ids; a result is the item's id (4 bytes), so a
 * response message is a run of ids too. Header x-mode: "now" finishes every item inside the
 * frame callback, "hold" keeps them until the test releases them from its own thread. */

static struct {
    pthread_mutex_t mu;
    struct rpc_bstream *held[BS_HELD_MAX];
    uint32_t held_id[BS_HELD_MAX];
    size_t n_held;
    size_t frames;          /* frames handed to the callback */
    size_t peak;            /* highest rpc_bstream_inflight_peak seen */
    size_t begun_over_peak; /* items begun while inflight_max were already in flight */
} bs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static gpr_timespec after_ms(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

static uint32_t get_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static void put_u32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) {
        p[i] = (uint8_t)(v >> (8 * i));
    }
}

static int items_frame(void *ctx, struct rpc_bstream *st, const uint8_t *frame, size_t len,
                       struct slotd_error *err)
{
    (void)ctx;
    size_t mlen = 0;
    const char *mode = rpc_call_header(rpc_bstream_call(st), "x-mode", &mlen);
    bool hold = mode != NULL && mlen == 4 && memcmp(mode, "hold", 4) == 0;
    if (len % 4 != 0) {
        slotd_error_set(err, SLOTD_EMALFORMED, "test: a frame of %zu bytes", len);
        return -1;
    }
    size_t n = len / 4;
    if (rpc_bstream_items_check(st, n, err) != 0) {
        return -1;
    }
    pthread_mutex_lock(&bs.mu);
    bs.frames++;
    pthread_mutex_unlock(&bs.mu);
    for (size_t i = 0; i < n; i++) {
        uint8_t id[4];
        memcpy(id, frame + 4 * i, 4);
        if (rpc_bstream_item_begin(st) != 0) {
            pthread_mutex_lock(&bs.mu);
            bs.begun_over_peak++;
            pthread_mutex_unlock(&bs.mu);
            slotd_error_set(err, SLOTD_EINTERNAL, "test: item %zu: no in-flight slot", i);
            return -1;
        }
        if (!hold) {
            rpc_bstream_item_done(st, id, sizeof(id));
            continue;
        }
        pthread_mutex_lock(&bs.mu);
        bool room = bs.n_held < BS_HELD_MAX; /* always, in these tests */
        if (room) {
            bs.held[bs.n_held] = st;
            bs.held_id[bs.n_held++] = get_u32(id);
        }
        pthread_mutex_unlock(&bs.mu);
        if (!room) {
            rpc_bstream_item_done(st, id, sizeof(id));
        }
    }
    size_t peak = rpc_bstream_inflight_peak(st);
    pthread_mutex_lock(&bs.mu);
    bs.peak = peak > bs.peak ? peak : bs.peak;
    pthread_mutex_unlock(&bs.mu);
    return 0;
}

/* Finishes up to n held items (oldest first) from this thread; how many. */
static size_t held_release(size_t n)
{
    pthread_mutex_lock(&bs.mu);
    size_t k = n < bs.n_held ? n : bs.n_held;
    struct rpc_bstream *st[BS_HELD_MAX];
    uint32_t id[BS_HELD_MAX];
    memcpy(st, bs.held, k * sizeof(st[0]));
    memcpy(id, bs.held_id, k * sizeof(id[0]));
    memmove(bs.held, bs.held + k, (bs.n_held - k) * sizeof(bs.held[0]));
    memmove(bs.held_id, bs.held_id + k, (bs.n_held - k) * sizeof(bs.held_id[0]));
    bs.n_held -= k;
    pthread_mutex_unlock(&bs.mu);
    for (size_t i = 0; i < k; i++) {
        uint8_t b[4];
        put_u32(b, id[i]);
        rpc_bstream_item_done(st[i], b, sizeof(b));
    }
    return k;
}

static size_t held_count(void)
{
    pthread_mutex_lock(&bs.mu);
    size_t n = bs.n_held;
    pthread_mutex_unlock(&bs.mu);
    return n;
}

/* Waits (bounded) until n items are held; false on timeout. */
static bool held_wait(size_t n)
{
    int64_t end = mono_ms() + BS_WAIT_MS;
    while (held_count() < n && mono_ms() < end) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return held_count() == n;
}

static size_t frames_seen(void)
{
    pthread_mutex_lock(&bs.mu);
    size_t n = bs.frames;
    pthread_mutex_unlock(&bs.mu);
    return n;
}

/* ---- the server and one client ------------------------------------------------------------- */

static struct rpc_server *server;
static grpc_channel *channel;
static grpc_completion_queue *ccq; /* the client's, pluck */

static int suite_up(void)
{
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    o.max_inflight_calls = 4;
    o.max_request_bytes = 64 * 1024;
    o.cq_threads = 2;
    static const struct rpc_bstream_limits limits = {BS_INFLIGHT_MAX, BS_FRAME_ITEMS_MAX};
    int port = 0;
    char err[256];
    if (rpc_server_new(&o, &server) != SLOTD_OK ||
        rpc_server_add_bidi_stream(server, BS_PATH, items_frame, &limits, NULL) != SLOTD_OK ||
        rpc_server_start(server, &port, err, sizeof(err)) != SLOTD_OK) {
        return -1;
    }
    grpc_init(); /* the client's own reference */
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    channel = grpc_channel_create(target, creds, NULL);
    grpc_channel_credentials_release(creds);
    ccq = grpc_completion_queue_create_for_pluck(NULL);
    return 0;
}

/* Order: the client's calls are all unreferenced by now; channel, then its queue drained to
 * GRPC_QUEUE_SHUTDOWN (bounded), then the server (which cancels what is left and waits for it),
 * then the client's grpc_init reference. */
static int suite_down(void)
{
    held_release(BS_HELD_MAX);
    grpc_channel_destroy(channel);
    grpc_completion_queue_shutdown(ccq);
    grpc_event ev;
    do {
        ev = grpc_completion_queue_pluck(ccq, NULL, after_ms(BS_WAIT_MS), NULL);
    } while (ev.type == GRPC_OP_COMPLETE);
    grpc_completion_queue_destroy(ccq);
    rpc_server_free(server);
    grpc_shutdown();
    return ev.type == GRPC_QUEUE_SHUTDOWN ? 0 : -1;
}

/* One bidirectional client call. Every batch has its own tag; the status batch is started at
 * open, so every wait below can end (the status comes when the call ends for any reason). */
struct bcall {
    grpc_call *call;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    int tag_md, tag_rmd, tag_status;
    bool status_done;
    char message[256];
    Slotd__V1__ErrorDetail *detail; /* of the final status, NULL if none */
    Google__Rpc__Status *status_pb;
};

static void bc_open(struct bcall *b, const char *mode)
{
    memset(b, 0, sizeof(*b));
    b->call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, ccq,
                                       grpc_slice_from_static_string(BS_PATH), NULL,
                                       after_ms(4 * BS_WAIT_MS), NULL);
    grpc_metadata_array_init(&b->init_md);
    grpc_metadata_array_init(&b->trail_md);
    grpc_metadata md = {.key = grpc_slice_from_static_string("x-mode"),
                        .value = grpc_slice_from_static_string(mode)};
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_SEND_INITIAL_METADATA;
    op.data.send_initial_metadata.count = 1;
    op.data.send_initial_metadata.metadata = &md;
    CU_ASSERT_EQUAL(grpc_call_start_batch(b->call, &op, 1, &b->tag_md, NULL), GRPC_CALL_OK);
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_INITIAL_METADATA;
    op.data.recv_initial_metadata.recv_initial_metadata = &b->init_md;
    CU_ASSERT_EQUAL(grpc_call_start_batch(b->call, &op, 1, &b->tag_rmd, NULL), GRPC_CALL_OK);
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    op.data.recv_status_on_client.trailing_metadata = &b->trail_md;
    op.data.recv_status_on_client.status = &b->status;
    op.data.recv_status_on_client.status_details = &b->details;
    op.data.recv_status_on_client.error_string = &b->error_string;
    CU_ASSERT_EQUAL(grpc_call_start_batch(b->call, &op, 1, &b->tag_status, NULL), GRPC_CALL_OK);
    CU_ASSERT_EQUAL(grpc_completion_queue_pluck(ccq, &b->tag_md, after_ms(BS_WAIT_MS), NULL).type,
                    GRPC_OP_COMPLETE);
}

/* Waits for tag (bounded); on timeout cancels the call and waits again, so the tag is never
 * left with gRPC. true when it completed successfully before the timeout. */
static bool bc_pluck(struct bcall *b, void *tag)
{
    grpc_event ev = grpc_completion_queue_pluck(ccq, tag, after_ms(BS_WAIT_MS), NULL);
    if (ev.type == GRPC_OP_COMPLETE) {
        return ev.success != 0;
    }
    grpc_call_cancel(b->call, NULL);
    ev = grpc_completion_queue_pluck(ccq, tag, after_ms(BS_WAIT_MS), NULL);
    CU_ASSERT_EQUAL_FATAL(ev.type, GRPC_OP_COMPLETE);
    return false;
}

/* Sends one frame of ids first..first+n-1 (n 0: the half-close); its success. */
static bool bc_send(struct bcall *b, uint32_t first, size_t n, bool half_close)
{
    int tag;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    grpc_byte_buffer *bb = NULL;
    if (half_close) {
        op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    } else {
        grpc_slice s = grpc_slice_malloc(4 * n);
        for (size_t i = 0; i < n; i++) {
            put_u32(GRPC_SLICE_START_PTR(s) + 4 * i, first + (uint32_t)i);
        }
        bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = bb;
    }
    CU_ASSERT_EQUAL(grpc_call_start_batch(b->call, &op, 1, &tag, NULL), GRPC_CALL_OK);
    bool ok = bc_pluck(b, &tag);
    if (bb != NULL) {
        grpc_byte_buffer_destroy(bb);
    }
    return ok;
}

/* Receives one response message and marks its ids in seen[] (ids < cap; a repeat or an id out
 * of range counts in *bad). Its item count, or -1 when the stream ended or the wait timed out. */
static long bc_recv(struct bcall *b, unsigned char *seen, size_t cap, size_t *bad)
{
    int tag;
    grpc_byte_buffer *bb = NULL;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &bb;
    CU_ASSERT_EQUAL(grpc_call_start_batch(b->call, &op, 1, &tag, NULL), GRPC_CALL_OK);
    if (!bc_pluck(b, &tag) || bb == NULL) {
        if (bb != NULL) {
            grpc_byte_buffer_destroy(bb);
        }
        return -1;
    }
    grpc_byte_buffer_reader r;
    grpc_byte_buffer_reader_init(&r, bb);
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    size_t len = GRPC_SLICE_LENGTH(s);
    const uint8_t *p = GRPC_SLICE_START_PTR(s);
    if (len % 4 != 0) {
        (*bad)++;
    }
    for (size_t i = 0; i + 4 <= len; i += 4) {
        uint32_t id = get_u32(p + i);
        if (id >= cap || seen[id]) {
            (*bad)++;
        } else {
            seen[id] = 1;
        }
    }
    grpc_slice_unref(s);
    grpc_byte_buffer_destroy(bb);
    return (long)(len / 4);
}

/* Cancels (when cancel), waits for the status and the initial metadata, decodes the status into
 * b and unreferences the call; returns the status. */
static grpc_status_code bc_close(struct bcall *b, bool cancel)
{
    if (cancel) {
        grpc_call_cancel(b->call, NULL);
    }
    if (!bc_pluck(b, &b->tag_status)) {
        CU_FAIL("bidi stream: no status");
    }
    bc_pluck(b, &b->tag_rmd);
    for (size_t i = 0; i < b->trail_md.count; i++) {
        grpc_slice v = b->trail_md.metadata[i].value;
        if (grpc_slice_str_cmp(b->trail_md.metadata[i].key, "grpc-status-details-bin") != 0) {
            continue;
        }
        b->status_pb =
            google__rpc__status__unpack(NULL, GRPC_SLICE_LENGTH(v), GRPC_SLICE_START_PTR(v));
        if (b->status_pb != NULL && b->status_pb->n_details == 1) {
            b->detail = slotd__v1__error_detail__unpack(NULL, b->status_pb->details[0]->value.len,
                                                        b->status_pb->details[0]->value.data);
        }
    }
    snprintf(b->message, sizeof(b->message), "%.*s", (int)GRPC_SLICE_LENGTH(b->details),
             (const char *)GRPC_SLICE_START_PTR(b->details));
    grpc_metadata_array_destroy(&b->init_md);
    grpc_metadata_array_destroy(&b->trail_md);
    grpc_slice_unref(b->details);
    gpr_free((void *)b->error_string);
    grpc_call_unref(b->call);
    return b->status;
}

static void bc_free_detail(struct bcall *b)
{
    if (b->detail != NULL) {
        slotd__v1__error_detail__free_unpacked(b->detail, NULL);
    }
    if (b->status_pb != NULL) {
        google__rpc__status__free_unpacked(b->status_pb, NULL);
    }
}

/* Waits (bounded) until the server holds n calls in flight (a stream holds one until freed). */
static bool inflight_wait(size_t n)
{
    int64_t end = mono_ms() + BS_WAIT_MS;
    while (rpc_server_inflight(server) != n && mono_ms() < end) {
        struct timespec ts = {0, 2000000};
        nanosleep(&ts, NULL);
    }
    return rpc_server_inflight(server) == n;
}

static void bs_reset(void)
{
    pthread_mutex_lock(&bs.mu);
    bs.frames = bs.peak = bs.begun_over_peak = 0;
    pthread_mutex_unlock(&bs.mu);
}

/* Reads responses until total results came (or the stream ended / timed out); messages read. */
static size_t recv_results(struct bcall *b, size_t total, unsigned char *seen, size_t cap,
                           size_t *got, size_t *bad)
{
    size_t msgs = 0;
    while (*got < total) {
        long k = bc_recv(b, seen, cap, bad);
        if (k < 0) {
            break;
        }
        msgs++;
        *got += (size_t)k;
    }
    return msgs;
}

/* ---- tests ------------------------------------------------------------------------------------
 */

#define ALL_FRAMES 40 /* x BS_FRAME_ITEMS_MAX items = 2560 */

/* (a) and (c): 2,560 items in 40 frames, finished inside the callback; every id comes back once,
 * in fewer response messages than items, then OK on the half-close. */
static void test_items_complete(void)
{
    bs_reset();
    enum { total = ALL_FRAMES * BS_FRAME_ITEMS_MAX };
    static unsigned char seen[total];
    memset(seen, 0, sizeof(seen));
    struct bcall b;
    bc_open(&b, "now");
    size_t got = 0, bad = 0, msgs = 0;
    for (uint32_t f = 0; f < ALL_FRAMES; f++) {
        CU_ASSERT(bc_send(&b, f * BS_FRAME_ITEMS_MAX, BS_FRAME_ITEMS_MAX, false));
        /* read what is there now: at most one frame's results are owed, so the read ends */
        msgs += recv_results(&b, (f + 1) * BS_FRAME_ITEMS_MAX, seen, total, &got, &bad);
    }
    CU_ASSERT(bc_send(&b, 0, 0, true));
    CU_ASSERT_EQUAL(bc_recv(&b, seen, total, &bad), -1); /* nothing more after the last */
    CU_ASSERT_EQUAL(bc_close(&b, false), GRPC_STATUS_OK);
    bc_free_detail(&b);
    CU_ASSERT_EQUAL(got, (size_t)total);
    CU_ASSERT_EQUAL(bad, 0);
    size_t missing = 0;
    for (size_t i = 0; i < total; i++) {
        missing += seen[i] == 0;
    }
    CU_ASSERT_EQUAL(missing, 0);
    /* 64 results finished back to back on the CQ thread while the first of them is being sent:
     * they go out coalesced, in far fewer messages than items. */
    printf("\n    %zu results in %zu response messages ", got, msgs);
    CU_ASSERT(msgs >= ALL_FRAMES);
    CU_ASSERT(msgs * 4 <= (size_t)total);
    CU_ASSERT_EQUAL(frames_seen(), ALL_FRAMES);
    CU_ASSERT(inflight_wait(0));
}

/* (b) and (c): held items. Six frames of 64 are sent; only four are read (256 = inflight_max
 * begun) until results go out; releasing 64 lets exactly one more frame in; releasing all lets
 * the rest in. Results released together come back in fewer messages than results. */
static void test_inflight_bound(void)
{
    bs_reset();
    enum { frames = 6, total = frames * BS_FRAME_ITEMS_MAX };
    static unsigned char seen[total];
    memset(seen, 0, sizeof(seen));
    struct bcall b;
    bc_open(&b, "hold");
    for (uint32_t f = 0; f < frames; f++) {
        CU_ASSERT(bc_send(&b, f * BS_FRAME_ITEMS_MAX, BS_FRAME_ITEMS_MAX, false));
    }
    CU_ASSERT(held_wait(BS_INFLIGHT_MAX));
    struct timespec settle = {0, 200 * 1000000}; /* room for a wrong fifth read to show */
    nanosleep(&settle, NULL);
    CU_ASSERT_EQUAL(frames_seen(), BS_INFLIGHT_MAX / BS_FRAME_ITEMS_MAX);
    CU_ASSERT_EQUAL(held_count(), BS_INFLIGHT_MAX);

    size_t got = 0, bad = 0;
    CU_ASSERT_EQUAL(held_release(BS_FRAME_ITEMS_MAX), BS_FRAME_ITEMS_MAX);
    size_t msgs = recv_results(&b, BS_FRAME_ITEMS_MAX, seen, total, &got, &bad);
    CU_ASSERT_EQUAL(got, BS_FRAME_ITEMS_MAX);
    CU_ASSERT(held_wait(BS_INFLIGHT_MAX)); /* the fifth frame, read once the results went out */
    nanosleep(&settle, NULL);
    CU_ASSERT_EQUAL(frames_seen(), 5);

    /* all 256 held (frames 2..5) out together, then the sixth frame is read and released */
    CU_ASSERT_EQUAL(held_release(BS_HELD_MAX), BS_INFLIGHT_MAX);
    msgs += recv_results(&b, BS_FRAME_ITEMS_MAX + BS_INFLIGHT_MAX, seen, total, &got, &bad);
    CU_ASSERT(held_wait(BS_FRAME_ITEMS_MAX));
    CU_ASSERT_EQUAL(held_release(BS_HELD_MAX), BS_FRAME_ITEMS_MAX);
    msgs += recv_results(&b, total, seen, total, &got, &bad);
    CU_ASSERT(bc_send(&b, 0, 0, true));
    CU_ASSERT_EQUAL(bc_close(&b, false), GRPC_STATUS_OK);
    bc_free_detail(&b);
    CU_ASSERT_EQUAL(got, (size_t)total);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT_EQUAL(frames_seen(), frames);
    pthread_mutex_lock(&bs.mu);
    printf("\n    peak %zu in flight (bound %d), %zu results in %zu messages ", bs.peak,
           BS_INFLIGHT_MAX, got, msgs);
    CU_ASSERT(bs.peak <= BS_INFLIGHT_MAX);
    CU_ASSERT(bs.peak >= BS_INFLIGHT_MAX - BS_FRAME_ITEMS_MAX); /* the bound was reached */
    CU_ASSERT_EQUAL(bs.begun_over_peak, 0);
    pthread_mutex_unlock(&bs.mu);
    CU_ASSERT(msgs < got);
    CU_ASSERT(inflight_wait(0));
}

/* (d): a frame of 65 items (limit 64) ends the stream with INVALID_ARGUMENT naming the field
 * and the limit; the earlier frame's results still came; nothing of the refused frame began. */
static void test_frame_items_limit(void)
{
    bs_reset();
    static unsigned char seen[256];
    memset(seen, 0, sizeof(seen));
    struct bcall b;
    bc_open(&b, "now");
    size_t got = 0, bad = 0;
    CU_ASSERT(bc_send(&b, 0, 2, false));
    recv_results(&b, 2, seen, sizeof(seen), &got, &bad);
    CU_ASSERT_EQUAL(got, 2);
    bc_send(&b, 100, BS_FRAME_ITEMS_MAX + 1, false);
    CU_ASSERT_EQUAL(bc_recv(&b, seen, sizeof(seen), &bad), -1);
    CU_ASSERT_EQUAL(bc_close(&b, false), GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(b.message, "items: 65 items in one message exceeds the limit of 64");
    CU_ASSERT_PTR_NOT_NULL(b.detail);
    if (b.detail != NULL) {
        CU_ASSERT_EQUAL(b.detail->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD);
        CU_ASSERT_STRING_EQUAL(b.detail->field, "items");
        CU_ASSERT_EQUAL(b.detail->limit, BS_FRAME_ITEMS_MAX);
    }
    bc_free_detail(&b);
    CU_ASSERT_EQUAL(frames_seen(), 1);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(inflight_wait(0));
}

/* (e): the client cancels with 128 items held; the stream keeps its slot until the last held
 * item is finished (its result dropped), then everything is freed (the ASan build checks no
 * leak) and a new stream is served. */
static void test_cancel_in_flight(void)
{
    bs_reset();
    struct bcall b;
    bc_open(&b, "hold");
    CU_ASSERT(bc_send(&b, 0, BS_FRAME_ITEMS_MAX, false));
    CU_ASSERT(bc_send(&b, BS_FRAME_ITEMS_MAX, BS_FRAME_ITEMS_MAX, false));
    CU_ASSERT(held_wait(2 * BS_FRAME_ITEMS_MAX));
    CU_ASSERT_EQUAL(rpc_server_inflight(server), 1);
    CU_ASSERT_EQUAL(bc_close(&b, true), GRPC_STATUS_CANCELLED);
    bc_free_detail(&b);
    struct timespec ts = {0, 100 * 1000000};
    nanosleep(&ts, NULL);
    CU_ASSERT_EQUAL(rpc_server_inflight(server), 1); /* held items keep the stream */
    CU_ASSERT_EQUAL(held_release(BS_HELD_MAX), 2 * BS_FRAME_ITEMS_MAX);
    CU_ASSERT(inflight_wait(0));

    static unsigned char seen[8];
    memset(seen, 0, sizeof(seen));
    size_t got = 0, bad = 0;
    bc_open(&b, "now");
    CU_ASSERT(bc_send(&b, 0, 8, false));
    recv_results(&b, 8, seen, sizeof(seen), &got, &bad);
    CU_ASSERT(bc_send(&b, 0, 0, true));
    CU_ASSERT_EQUAL(bc_close(&b, false), GRPC_STATUS_OK);
    bc_free_detail(&b);
    CU_ASSERT_EQUAL(got, 8);
    CU_ASSERT_EQUAL(bad, 0);
    CU_ASSERT(inflight_wait(0));
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite s = CU_add_suite("rpc_bstream", suite_up, suite_down);
    CU_add_test(s, "items complete, every id back once, coalesced", test_items_complete);
    CU_add_test(s, "in-flight bound: next frame only after results sent", test_inflight_bound);
    CU_add_test(s, "frame above frame_items_max refused naming the limit", test_frame_items_limit);
    CU_add_test(s, "client cancel with items in flight frees all", test_cancel_in_flight);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
