/* rpc_test.c - unit tests for service/rpc: error mapping, and a live server on 127.0.0.1 called
 * through a gRPC core client (echo, cross-thread reply, limits, health, server and client
 * streams, shutdown). */
#include <CUnit/Basic.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "google/protobuf/any.pb-c.h"
#include "google/rpc/status.pb-c.h"
#include "grpc/health/v1/health.pb-c.h"
#include "rpc.h"
#include "slotd/v1/metadata.pb-c.h"

#define WAIT_MS 5000 /* bound on every wait in this file */
#define HOLD_MAX 8
#define WORKER_MAX 64 /* > any number of calls in flight in these tests */

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

static gpr_timespec in_ms(int ms)
{
    return gpr_time_add(gpr_now(GPR_CLOCK_REALTIME), gpr_time_from_millis(ms, GPR_TIMESPAN));
}

/* ---- error mapping ----------------------------------------------------------------------- */

/* Decodes grpc-status-details-bin bytes into the ErrorDetail inside (caller frees both). */
static Slotd__V1__ErrorDetail *decode_detail(const uint8_t *buf, size_t len,
                                             Google__Rpc__Status **status_out)
{
    Google__Rpc__Status *st = google__rpc__status__unpack(NULL, len, buf);
    if (st == NULL || st->n_details != 1 ||
        strcmp(st->details[0]->type_url, SLOTD_ERROR_DETAIL_TYPE_URL) != 0) {
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
    *status_out = st;
    return d;
}

static void test_error_mapping(void)
{
    static const struct {
        int code;
        grpc_status_code grpc;
        int detail;
    } table[] = {
        {SLOTD_OK, GRPC_STATUS_OK, 0},
        {SLOTD_EINVALID_FIELD, GRPC_STATUS_INVALID_ARGUMENT, 1},
        {SLOTD_EMALFORMED, GRPC_STATUS_INVALID_ARGUMENT, 13},
        {SLOTD_ENOT_LEADER, GRPC_STATUS_FAILED_PRECONDITION, 2},
        {SLOTD_ENO_LEADER, GRPC_STATUS_UNAVAILABLE, 3},
        {SLOTD_EROUTE_NOT_READY, GRPC_STATUS_UNAVAILABLE, 4},
        {SLOTD_EQUEUE_FULL, GRPC_STATUS_RESOURCE_EXHAUSTED, 5},
        {SLOTD_EUNKNOWN_OUTCOME, GRPC_STATUS_UNAVAILABLE, 6},
        {SLOTD_EWRONG_GROUP, GRPC_STATUS_ABORTED, 7},
        {SLOTD_ESTALE_FENCE, GRPC_STATUS_ABORTED, 8},
        {SLOTD_EHASH_SLOT_FENCED, GRPC_STATUS_UNAVAILABLE, 9},
        {SLOTD_ENOT_FOUND, GRPC_STATUS_NOT_FOUND, 10},
        {SLOTD_ESHUTTING_DOWN, GRPC_STATUS_UNAVAILABLE, 11},
        {SLOTD_ESTORAGE, GRPC_STATUS_INTERNAL, 12},
        {SLOTD_ETIMEOUT, GRPC_STATUS_DEADLINE_EXCEEDED, 0},
        {SLOTD_EINTERNAL, GRPC_STATUS_INTERNAL, 0},
        {SLOTD_EUNIMPLEMENTED, GRPC_STATUS_UNIMPLEMENTED, 0},
        {SLOTD_EUNAUTHENTICATED, GRPC_STATUS_UNAUTHENTICATED, 0},
        {SLOTD_EPRECONDITION, GRPC_STATUS_FAILED_PRECONDITION, 0},
    };
    for (size_t i = 0; i < sizeof(table) / sizeof(table[0]); i++) {
        CU_ASSERT_EQUAL(slotd_error_grpc_code(table[i].code), table[i].grpc);
        CU_ASSERT_EQUAL(slotd_error_detail_code(table[i].code), table[i].detail);
        CU_ASSERT_STRING_NOT_EQUAL(slotd_strerror(table[i].code), "unknown error");
    }
    CU_ASSERT_EQUAL(slotd_error_grpc_code(12345), GRPC_STATUS_INTERNAL);
    CU_ASSERT_STRING_EQUAL(slotd_strerror(12345), "unknown error");
    CU_ASSERT_STRING_EQUAL(slotd_strerror(SLOTD_ENOT_LEADER), "not leader");
}

static void test_error_details_field(void)
{
    struct slotd_error e;
    slotd_error_field(&e, "put.key", 1024, "put.key: %d bytes exceeds the limit of %d", 2000, 1024);
    CU_ASSERT_EQUAL(e.code, SLOTD_EINVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(e.message, "put.key: 2000 bytes exceeds the limit of 1024");
    uint8_t *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(slotd_error_encode_details(&e, &buf, &len), SLOTD_OK);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = decode_detail(buf, len, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(st->code, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st->message, "put.key: 2000 bytes exceeds the limit of 1024");
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(d->field, "put.key");
    CU_ASSERT_EQUAL(d->limit, 1024);
    CU_ASSERT_PTR_NULL(d->leader_hint);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    free(buf);
}

static void test_error_details_leader_hint(void)
{
    struct slotd_error e;
    slotd_error_set(&e, SLOTD_ENOT_LEADER, "group %u: node 1 is not the leader", 7u);
    slotd_error_leader_hint(&e, 3, "10.0.0.3:7700", 7, 12);
    e.retry_after_ms = 25;
    uint8_t *buf = NULL;
    size_t len = 0;
    CU_ASSERT_EQUAL_FATAL(slotd_error_encode_details(&e, &buf, &len), SLOTD_OK);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = decode_detail(buf, len, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(st->code, GRPC_STATUS_FAILED_PRECONDITION);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER);
    CU_ASSERT_EQUAL(d->retry_after_ms, 25);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->leader_hint);
    CU_ASSERT_EQUAL(d->leader_hint->node_id, 3);
    CU_ASSERT_STRING_EQUAL(d->leader_hint->address, "10.0.0.3:7700");
    CU_ASSERT_EQUAL(d->leader_hint->group_id, 7);
    CU_ASSERT_EQUAL(d->leader_hint->term, 12);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    free(buf);

    /* Empty message: the status carries the code's own words. */
    memset(&e, 0, sizeof(e));
    e.code = SLOTD_ENO_LEADER;
    CU_ASSERT_STRING_EQUAL(slotd_error_message(&e), "no leader");
}

/* ---- test handlers ----------------------------------------------------------------------- */

static void echo_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    rpc_call_reply_bytes(call, req, len);
}

/* Replies with the remaining deadline in ms as text ("inf" without one). */
static void deadline_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    char out[32];
    int64_t d = rpc_call_deadline_ms(call);
    if (d == INT64_MAX) {
        snprintf(out, sizeof(out), "inf");
    } else {
        snprintf(out, sizeof(out), "%lld", (long long)(d - now_ms()));
    }
    rpc_call_reply_bytes(call, out, strlen(out));
}

static void fail_field_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct slotd_error e;
    slotd_error_field(&e, "put.key", 1024, "put.key: %zu bytes exceeds the limit of 1024", len);
    rpc_call_fail(call, &e);
}

/* Hands calls to a worker thread that replies (a stand-in for the runtime's loop thread). */
struct worker {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct rpc_call *calls[WORKER_MAX];
    uint8_t *reqs[WORKER_MAX];
    size_t lens[WORKER_MAX];
    size_t n;
    bool stop;
    pthread_t thread;
};

static void later_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct worker *w = ctx;
    uint8_t *copy = malloc(len + 1);
    memcpy(copy, req, len);
    pthread_mutex_lock(&w->mu);
    if (w->n == WORKER_MAX) {
        pthread_mutex_unlock(&w->mu);
        free(copy);
        struct slotd_error e;
        slotd_error_set(&e, SLOTD_EQUEUE_FULL, "worker queue full");
        rpc_call_fail(call, &e);
        return;
    }
    w->calls[w->n] = call;
    w->reqs[w->n] = copy;
    w->lens[w->n] = len;
    w->n++;
    pthread_cond_signal(&w->cond);
    pthread_mutex_unlock(&w->mu);
}

static void *worker_main(void *arg)
{
    struct worker *w = arg;
    pthread_mutex_lock(&w->mu);
    for (;;) {
        while (w->n == 0 && !w->stop) {
            pthread_cond_wait(&w->cond, &w->mu);
        }
        if (w->n == 0 && w->stop) {
            break;
        }
        struct rpc_call *call = w->calls[0];
        uint8_t *req = w->reqs[0];
        size_t len = w->lens[0];
        w->n--;
        memmove(w->calls, w->calls + 1, w->n * sizeof(w->calls[0]));
        memmove(w->reqs, w->reqs + 1, w->n * sizeof(w->reqs[0]));
        memmove(w->lens, w->lens + 1, w->n * sizeof(w->lens[0]));
        pthread_mutex_unlock(&w->mu);
        memcpy(req + len, "!", 1);
        rpc_call_reply_bytes(call, req, len + 1);
        free(req);
        pthread_mutex_lock(&w->mu);
    }
    pthread_mutex_unlock(&w->mu);
    return NULL;
}

/* Holds calls until the test releases them. */
struct hold {
    pthread_mutex_t mu;
    struct rpc_call *calls[HOLD_MAX];
    size_t n;
};

static void hold_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct hold *h = ctx;
    pthread_mutex_lock(&h->mu);
    CU_ASSERT_FATAL(h->n < HOLD_MAX);
    h->calls[h->n++] = call;
    pthread_mutex_unlock(&h->mu);
}

static size_t hold_count(struct hold *h)
{
    pthread_mutex_lock(&h->mu);
    size_t n = h->n;
    pthread_mutex_unlock(&h->mu);
    return n;
}

/* Finishes every held call: OK echoing "held", or with e when not NULL. */
static void hold_release(struct hold *h, const struct slotd_error *e)
{
    pthread_mutex_lock(&h->mu);
    for (size_t i = 0; i < h->n; i++) {
        if (e != NULL) {
            rpc_call_fail(h->calls[i], e);
        } else {
            rpc_call_reply_bytes(h->calls[i], "held", 4);
        }
    }
    h->n = 0;
    pthread_mutex_unlock(&h->mu);
}

/* ---- server-streaming handlers ------------------------------------------------------------ */

#define STREAM_COUNT_PATH "/slotd.test.v1.Stream/Count"
#define STREAM_HOLD_PATH "/slotd.test.v1.Stream/Hold"
#define STREAM_FAIL_PATH "/slotd.test.v1.Stream/Fail"
#define SHELD_MAX 4

/* A stream held by the Hold handler until the test finishes it. */
struct sheld {
    struct rpc_stream *st; /* NULL once finished */
    bool finish_on_close;  /* on_close finishes it itself */
    int closes;            /* on_close calls */
};

static struct {
    pthread_mutex_t mu;
    pthread_cond_t cond;
    struct sheld held[SHELD_MAX];
    int n;
    char header[64]; /* "x-test" metadata the last Hold handler saw */
    int64_t deadline_ms;
    pthread_t sender; /* the Count handler's sending thread */
    bool has_sender;
    int sender_rc;    /* the sender's last rpc_stream_send_bytes result */
    int count_closes; /* on_close calls of Count streams */
} sh = {.mu = PTHREAD_MUTEX_INITIALIZER, .cond = PTHREAD_COND_INITIALIZER};

struct count_job {
    struct rpc_stream *st;
    int n;
};

/* Sends "msg-%06d" for 0..n-1 from its own thread, pacing on EFULL, then finishes OK. */
static void *count_sender_main(void *arg)
{
    struct count_job *job = arg;
    int64_t deadline = now_ms() + 4 * WAIT_MS;
    for (int i = 0; i < job->n && now_ms() < deadline; i++) {
        char msg[16];
        int len = snprintf(msg, sizeof(msg), "msg-%06d", i);
        int rc;
        while ((rc = rpc_stream_send_bytes(job->st, msg, (size_t)len)) == RPC_STREAM_EFULL &&
               now_ms() < deadline) {
            sleep_ms(1);
        }
        pthread_mutex_lock(&sh.mu);
        sh.sender_rc = rc;
        pthread_mutex_unlock(&sh.mu);
        if (rc != 0) {
            break;
        }
    }
    rpc_stream_finish(job->st, NULL);
    free(job);
    return NULL;
}

static void count_on_close(void *arg)
{
    pthread_mutex_lock(&sh.mu);
    sh.count_closes++;
    pthread_mutex_unlock(&sh.mu);
}

static void count_cb(void *ctx, struct rpc_stream *st, const uint8_t *req, size_t len)
{
    char text[16];
    snprintf(text, sizeof(text), "%.*s", (int)len, (const char *)req);
    struct count_job *job = malloc(sizeof(*job));
    job->st = st;
    job->n = atoi(text);
    rpc_stream_set_queue_limit(st, 4096); /* small: the sender paces on EFULL */
    rpc_stream_set_on_close(st, count_on_close, NULL);
    pthread_mutex_lock(&sh.mu);
    CU_ASSERT_FATAL(!sh.has_sender);
    CU_ASSERT_FATAL(pthread_create(&sh.sender, NULL, count_sender_main, job) == 0);
    sh.has_sender = true;
    pthread_mutex_unlock(&sh.mu);
}

static void hold_on_close(void *arg)
{
    struct sheld *h = arg;
    pthread_mutex_lock(&sh.mu);
    h->closes++;
    struct rpc_stream *st = h->st;
    bool fin = h->finish_on_close;
    if (fin) {
        h->st = NULL;
    }
    pthread_cond_broadcast(&sh.cond);
    pthread_mutex_unlock(&sh.mu);
    if (fin) {
        CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, "late", 4), RPC_STREAM_ECLOSED);
        rpc_stream_finish(st, NULL);
    }
}

/* Request "<queue limit> <f|k>": holds the stream (f: on_close finishes it) after sending
 * "hello" from inside the handler. */
static void hold_stream_cb(void *ctx, struct rpc_stream *st, const uint8_t *req, size_t len)
{
    char text[32], mode = 'k';
    unsigned long limit = 0;
    snprintf(text, sizeof(text), "%.*s", (int)len, (const char *)req);
    sscanf(text, "%lu %c", &limit, &mode);
    if (limit != 0) {
        rpc_stream_set_queue_limit(st, limit);
    }
    pthread_mutex_lock(&sh.mu);
    CU_ASSERT_FATAL(sh.n < SHELD_MAX);
    struct sheld *h = &sh.held[sh.n++];
    h->st = st;
    h->finish_on_close = mode == 'f';
    h->closes = 0;
    size_t hl = 0;
    const char *hv = rpc_stream_header(st, "x-test", &hl);
    snprintf(sh.header, sizeof(sh.header), "%.*s", hv != NULL ? (int)hl : 0, hv != NULL ? hv : "");
    sh.deadline_ms = rpc_stream_deadline_ms(st);
    pthread_mutex_unlock(&sh.mu);
    rpc_stream_set_on_close(st, hold_on_close, h);
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, "hello", 5), 0);
}

/* Sends "a" and "b", then fails with NOT_LEADER and a leader hint. */
static void fail_stream_cb(void *ctx, struct rpc_stream *st, const uint8_t *req, size_t len)
{
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, "a", 1), 0);
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, "b", 1), 0);
    struct slotd_error e;
    slotd_error_set(&e, SLOTD_ENOT_LEADER, "group %u: node 1 is not the leader", 7u);
    slotd_error_leader_hint(&e, 3, "10.0.0.3:7700", 7, 12);
    rpc_stream_finish(st, &e);
}

static void sheld_reset(void)
{
    pthread_mutex_lock(&sh.mu);
    memset(sh.held, 0, sizeof(sh.held));
    sh.n = 0;
    sh.header[0] = '\0';
    pthread_mutex_unlock(&sh.mu);
}

/* Waits (bounded) until held stream i exists and has seen `closes` on_close calls. */
static bool sheld_wait(int i, int closes)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += WAIT_MS / 1000;
    pthread_mutex_lock(&sh.mu);
    while ((sh.n <= i || sh.held[i].closes < closes) &&
           pthread_cond_timedwait(&sh.cond, &sh.mu, &until) == 0) {
    }
    bool ok = sh.n > i && sh.held[i].closes >= closes;
    pthread_mutex_unlock(&sh.mu);
    return ok;
}

/* Takes held stream i from the table (the caller finishes it). */
static struct rpc_stream *sheld_take(int i)
{
    pthread_mutex_lock(&sh.mu);
    struct rpc_stream *st = sh.n > i ? sh.held[i].st : NULL;
    if (st != NULL) {
        sh.held[i].st = NULL;
    }
    pthread_mutex_unlock(&sh.mu);
    return st;
}

static int sheld_closes(int i)
{
    pthread_mutex_lock(&sh.mu);
    int n = sh.held[i].closes;
    pthread_mutex_unlock(&sh.mu);
    return n;
}

/* ---- a client-streaming method -------------------------------------------------------------- */

#define CSTREAM_PATH "/slotd.test.v1.CStream/Frames"

/* What the frames of client streams did: frame i of a stream must be "frame-<i>"; "refuse"
 * ends the stream with QUEUE_FULL. */
static struct {
    pthread_mutex_t mu;
    int frames, out_of_order, ends, concurrent, max_concurrent;
} cs = {.mu = PTHREAD_MUTEX_INITIALIZER};

static int cstream_frame_cb(void *ctx, struct rpc_cstream *st, const uint8_t *frame, size_t len,
                            struct slotd_error *err)
{
    (void)ctx;
    intptr_t next = (intptr_t)rpc_cstream_data(st); /* frames this stream handed over */
    char want[32];
    snprintf(want, sizeof(want), "frame-%d", (int)next);
    pthread_mutex_lock(&cs.mu);
    cs.concurrent++;
    cs.max_concurrent = cs.concurrent > cs.max_concurrent ? cs.concurrent : cs.max_concurrent;
    pthread_mutex_unlock(&cs.mu);
    int rc = 0;
    if (len == 6 && memcmp(frame, "refuse", 6) == 0) {
        slotd_error_set(err, SLOTD_EQUEUE_FULL, "test: frame %d refused", (int)next);
        rc = -1;
    }
    pthread_mutex_lock(&cs.mu);
    cs.concurrent--;
    if (rc == 0) {
        cs.frames++;
        if (len != strlen(want) || memcmp(frame, want, len) != 0) {
            cs.out_of_order++;
        }
    }
    pthread_mutex_unlock(&cs.mu);
    rpc_cstream_set_data(st, (void *)(next + 1));
    return rc;
}

static void cstream_end_cb(void *ctx, struct rpc_cstream *st)
{
    (void)ctx;
    (void)st;
    pthread_mutex_lock(&cs.mu);
    cs.ends++;
    pthread_mutex_unlock(&cs.mu);
}

/* ---- client ------------------------------------------------------------------------------ */

struct client {
    grpc_channel *channel;
    grpc_completion_queue *cq; /* pluck */
};

struct ccall {
    grpc_call *call;
    grpc_metadata_array init_md, trail_md;
    grpc_byte_buffer *send, *recv;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    /* results */
    uint8_t *resp;
    size_t resp_len;
    bool has_resp;
    uint8_t *status_bin;
    size_t status_bin_len;
    char message[256];
};

static void client_open(struct client *c, int port)
{
    char target[64];
    snprintf(target, sizeof(target), "127.0.0.1:%d", port);
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    grpc_arg arg;
    arg.type = GRPC_ARG_INTEGER;
    arg.key = GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL;
    arg.value.integer = 1;
    grpc_channel_args args = {1, &arg};
    c->channel = grpc_channel_create(target, creds, &args);
    grpc_channel_credentials_release(creds);
    c->cq = grpc_completion_queue_create_for_pluck(NULL);
}

static void client_close(struct client *c)
{
    grpc_channel_destroy(c->channel);
    grpc_completion_queue_shutdown(c->cq);
    while (
        grpc_completion_queue_pluck(c->cq, NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
        GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(c->cq);
}

/* Starts a unary call; req NULL sends no message at all. timeout_ms < 0: no deadline. */
static struct ccall *ccall_start(struct client *c, const char *method, const void *req, size_t len,
                                 int timeout_ms)
{
    struct ccall *cc = calloc(1, sizeof(*cc));
    grpc_slice m = grpc_slice_from_static_string(method);
    gpr_timespec deadline = timeout_ms < 0 ? gpr_inf_future(GPR_CLOCK_REALTIME) : in_ms(timeout_ms);
    cc->call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, m, NULL,
                                        deadline, NULL);
    grpc_metadata_array_init(&cc->init_md);
    grpc_metadata_array_init(&cc->trail_md);
    grpc_op ops[6];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (req != NULL) {
        grpc_slice s = grpc_slice_from_copied_buffer(req, len);
        cc->send = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = cc->send;
    }
    ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &cc->init_md;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &cc->recv;
    ops[n].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[n].data.recv_status_on_client.trailing_metadata = &cc->trail_md;
    ops[n].data.recv_status_on_client.status = &cc->status;
    ops[n].data.recv_status_on_client.status_details = &cc->details;
    ops[n++].data.recv_status_on_client.error_string = &cc->error_string;
    grpc_call_error e = grpc_call_start_batch(cc->call, ops, n, cc, NULL);
    CU_ASSERT_EQUAL(e, GRPC_CALL_OK);
    return cc;
}

/* Waits (bounded) for cc and collects its results; false on timeout. */
static bool ccall_wait(struct client *c, struct ccall *cc)
{
    grpc_event ev = grpc_completion_queue_pluck(c->cq, cc, in_ms(WAIT_MS), NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        grpc_call_cancel(cc->call, NULL);
        ev = grpc_completion_queue_pluck(c->cq, cc, in_ms(WAIT_MS), NULL);
        CU_ASSERT_EQUAL(ev.type, GRPC_OP_COMPLETE);
        return false;
    }
    if (cc->recv != NULL) {
        grpc_byte_buffer_reader r;
        grpc_byte_buffer_reader_init(&r, cc->recv);
        grpc_slice s = grpc_byte_buffer_reader_readall(&r);
        grpc_byte_buffer_reader_destroy(&r);
        cc->resp_len = GRPC_SLICE_LENGTH(s);
        cc->resp = malloc(cc->resp_len + 1);
        memcpy(cc->resp, GRPC_SLICE_START_PTR(s), cc->resp_len);
        cc->resp[cc->resp_len] = '\0';
        cc->has_resp = true;
        grpc_slice_unref(s);
    }
    for (size_t i = 0; i < cc->trail_md.count; i++) {
        if (grpc_slice_str_cmp(cc->trail_md.metadata[i].key, "grpc-status-details-bin") == 0) {
            grpc_slice v = cc->trail_md.metadata[i].value;
            cc->status_bin_len = GRPC_SLICE_LENGTH(v);
            cc->status_bin = malloc(cc->status_bin_len + 1);
            memcpy(cc->status_bin, GRPC_SLICE_START_PTR(v), cc->status_bin_len);
        }
    }
    snprintf(cc->message, sizeof(cc->message), "%.*s", (int)GRPC_SLICE_LENGTH(cc->details),
             (const char *)GRPC_SLICE_START_PTR(cc->details));
    return true;
}

static void ccall_free(struct ccall *cc)
{
    if (cc->send != NULL) {
        grpc_byte_buffer_destroy(cc->send);
    }
    if (cc->recv != NULL) {
        grpc_byte_buffer_destroy(cc->recv);
    }
    grpc_metadata_array_destroy(&cc->init_md);
    grpc_metadata_array_destroy(&cc->trail_md);
    grpc_slice_unref(cc->details);
    gpr_free((void *)cc->error_string);
    grpc_call_unref(cc->call);
    free(cc->resp);
    free(cc->status_bin);
    free(cc);
}

static struct ccall *unary(struct client *c, const char *method, const void *req, size_t len)
{
    struct ccall *cc = ccall_start(c, method, req, len, WAIT_MS);
    CU_ASSERT(ccall_wait(c, cc));
    return cc;
}

/* The ErrorDetail of a finished call (NULL if none decodes); caller frees both. */
static Slotd__V1__ErrorDetail *ccall_detail(struct ccall *cc, Google__Rpc__Status **st)
{
    if (cc->status_bin == NULL) {
        return NULL;
    }
    return decode_detail(cc->status_bin, cc->status_bin_len, st);
}

/* ---- fixture ----------------------------------------------------------------------------- */

struct fixture {
    struct rpc_server *server;
    int port;
    struct client client;
    struct worker worker;
    struct hold hold;
};

static struct fixture fx;

/* Connection limits the next fixture_up gives its server (0: the defaults). */
static size_t fixture_streams_per_conn, fixture_connections;

static int fixture_up(struct fixture *f, size_t max_inflight, unsigned cq_threads)
{
    memset(f, 0, sizeof(*f));
    pthread_mutex_init(&f->worker.mu, NULL);
    pthread_cond_init(&f->worker.cond, NULL);
    pthread_mutex_init(&f->hold.mu, NULL);
    if (pthread_create(&f->worker.thread, NULL, worker_main, &f->worker) != 0) {
        return -1;
    }
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    o.max_inflight_calls = max_inflight;
    o.max_request_bytes = 1024;
    o.cq_threads = cq_threads;
    o.max_streams_per_conn = fixture_streams_per_conn;
    o.max_connections = fixture_connections;
    if (rpc_server_new(&o, &f->server) != SLOTD_OK) {
        return -1;
    }
    rpc_server_add_unary(f->server, "/test.Echo/Echo", echo_cb, NULL);
    rpc_server_add_unary(f->server, "/test.Echo/Later", later_cb, &f->worker);
    rpc_server_add_unary(f->server, "/test.Echo/Hold", hold_cb, &f->hold);
    rpc_server_add_unary(f->server, "/test.Echo/Deadline", deadline_cb, NULL);
    rpc_server_add_unary(f->server, "/test.Echo/FailField", fail_field_cb, NULL);
    rpc_server_add_server_stream(f->server, STREAM_COUNT_PATH, count_cb, NULL);
    rpc_server_add_server_stream(f->server, STREAM_HOLD_PATH, hold_stream_cb, NULL);
    rpc_server_add_server_stream(f->server, STREAM_FAIL_PATH, fail_stream_cb, NULL);
    rpc_server_add_client_stream(f->server, CSTREAM_PATH, cstream_frame_cb, cstream_end_cb, NULL);
    if (rpc_server_add_echo(f->server) != SLOTD_OK) {
        return -1;
    }
    char err[256];
    if (rpc_server_start(f->server, &f->port, err, sizeof(err)) != SLOTD_OK) {
        fprintf(stderr, "start: %s\n", err);
        return -1;
    }
    grpc_init(); /* the client's own reference */
    client_open(&f->client, f->port);
    return 0;
}

static void fixture_down(struct fixture *f)
{
    hold_release(&f->hold, NULL);
    client_close(&f->client);
    rpc_server_free(f->server);
    grpc_shutdown();
    pthread_mutex_lock(&f->worker.mu);
    f->worker.stop = true;
    pthread_cond_signal(&f->worker.cond);
    pthread_mutex_unlock(&f->worker.mu);
    pthread_join(f->worker.thread, NULL);
    pthread_mutex_destroy(&f->worker.mu);
    pthread_cond_destroy(&f->worker.cond);
    pthread_mutex_destroy(&f->hold.mu);
}

static int suite_init(void)
{
    return fixture_up(&fx, 2, 1);
}

static int suite_clean(void)
{
    fixture_down(&fx);
    return 0;
}

/* ---- server tests ------------------------------------------------------------------------ */

static void test_echo(void)
{
    struct ccall *cc = unary(&fx.client, "/test.Echo/Echo", "hello", 5);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    CU_ASSERT(cc->has_resp && cc->resp_len == 5 && memcmp(cc->resp, "hello", 5) == 0);
    ccall_free(cc);
    /* An empty message is a message: the handler sees len 0. */
    cc = unary(&fx.client, "/test.Echo/Echo", "", 0);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    CU_ASSERT(cc->has_resp && cc->resp_len == 0);
    ccall_free(cc);
}

/* rpc_server_add_echo (slotd --echo-only): the request bytes come back unchanged, the request
 * limits still apply. */
static void test_echo_method(void)
{
    uint8_t req[300];
    for (size_t i = 0; i < sizeof(req); i++)
        req[i] = (uint8_t)(i * 7 + 1);
    struct ccall *cc = unary(&fx.client, RPC_ECHO_METHOD, req, sizeof(req));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    CU_ASSERT(cc->has_resp && cc->resp_len == sizeof(req) &&
              memcmp(cc->resp, req, sizeof(req)) == 0);
    ccall_free(cc);
    uint8_t big[1025] = {0}; /* the fixture's max_request_bytes is 1024 */
    cc = unary(&fx.client, RPC_ECHO_METHOD, big, sizeof(big));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_FALSE(cc->has_resp && cc->resp_len == sizeof(big));
    ccall_free(cc);
    CU_ASSERT_EQUAL(rpc_server_inflight(fx.server), 0);
}

static void test_reply_from_other_thread(void)
{
    /* Rounds of 2 concurrent calls: the fixture's max_inflight_calls. */
    for (int round = 0; round < 3; round++) {
        struct ccall *calls[2];
        char req[2][16];
        for (int i = 0; i < 2; i++) {
            snprintf(req[i], sizeof(req[i]), "m%d.%d", round, i);
            calls[i] = ccall_start(&fx.client, "/test.Echo/Later", req[i], strlen(req[i]), WAIT_MS);
        }
        for (int i = 0; i < 2; i++) {
            char want[16];
            snprintf(want, sizeof(want), "m%d.%d!", round, i);
            CU_ASSERT(ccall_wait(&fx.client, calls[i]));
            CU_ASSERT_EQUAL(calls[i]->status, GRPC_STATUS_OK);
            CU_ASSERT_FATAL(calls[i]->has_resp);
            CU_ASSERT_STRING_EQUAL((char *)calls[i]->resp, want);
            ccall_free(calls[i]);
        }
    }
    CU_ASSERT_EQUAL(rpc_server_inflight(fx.server), 0);
}

static void test_unimplemented(void)
{
    struct ccall *cc = unary(&fx.client, "/no.Such/Method", "x", 1);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_UNIMPLEMENTED);
    CU_ASSERT_PTR_NOT_NULL(strstr(cc->message, "/no.Such/Method"));
    ccall_free(cc);
    /* Registered from the slotd.v1.Metadata descriptor, but no handler yet. */
    cc = unary(&fx.client, "/slotd.v1.Metadata/Propose", "", 0);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_UNIMPLEMENTED);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(cc, &st);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d != NULL) {
        CU_ASSERT_EQUAL(st->code, GRPC_STATUS_UNIMPLEMENTED);
        CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_UNSPECIFIED);
        slotd__v1__error_detail__free_unpacked(d, NULL);
        google__rpc__status__free_unpacked(st, NULL);
    }
    ccall_free(cc);
}

static bool wait_held(struct hold *h, size_t n)
{
    int64_t deadline = now_ms() + WAIT_MS;
    while (hold_count(h) < n && now_ms() < deadline) {
        sleep_ms(2);
    }
    return hold_count(h) == n;
}

static void test_inflight_limit(void)
{
    struct ccall *a = ccall_start(&fx.client, "/test.Echo/Hold", "a", 1, WAIT_MS);
    struct ccall *b = ccall_start(&fx.client, "/test.Echo/Hold", "b", 1, WAIT_MS);
    CU_ASSERT_FATAL(wait_held(&fx.hold, 2));
    CU_ASSERT_EQUAL(rpc_server_inflight(fx.server), 2);

    /* The third call is rejected without reaching any handler. */
    struct ccall *c = unary(&fx.client, "/test.Echo/Echo", "c", 1);
    CU_ASSERT_EQUAL(c->status, GRPC_STATUS_RESOURCE_EXHAUSTED);
    CU_ASSERT_FALSE(c->has_resp);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(c, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(st->code, GRPC_STATUS_RESOURCE_EXHAUSTED);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_QUEUE_FULL);
    CU_ASSERT_EQUAL(d->retry_after_ms, RPC_QUEUE_FULL_RETRY_MS);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    ccall_free(c);
    CU_ASSERT_EQUAL(hold_count(&fx.hold), 2);

    /* Health checks do not count against the limit. */
    Grpc__Health__V1__HealthCheckRequest hreq = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    uint8_t hbuf[16];
    size_t hlen = grpc__health__v1__health_check_request__pack(&hreq, hbuf);
    c = unary(&fx.client, "/grpc.health.v1.Health/Check", hbuf, hlen);
    CU_ASSERT_EQUAL(c->status, GRPC_STATUS_OK);
    ccall_free(c);

    /* Released from this (non-CQ) thread; the slots free up. */
    hold_release(&fx.hold, NULL);
    CU_ASSERT(ccall_wait(&fx.client, a));
    CU_ASSERT(ccall_wait(&fx.client, b));
    CU_ASSERT_EQUAL(a->status, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(b->status, GRPC_STATUS_OK);
    CU_ASSERT(a->has_resp && memcmp(a->resp, "held", 4) == 0);
    ccall_free(a);
    ccall_free(b);
    CU_ASSERT_EQUAL(rpc_server_inflight(fx.server), 0);
    c = unary(&fx.client, "/test.Echo/Echo", "c", 1);
    CU_ASSERT_EQUAL(c->status, GRPC_STATUS_OK);
    ccall_free(c);
}

/* Asserts c finished RESOURCE_EXHAUSTED (QUEUE_FULL with a retry hint) naming limit; frees c. */
static void expect_exhausted(struct ccall *c, const char *limit)
{
    CU_ASSERT_EQUAL(c->status, GRPC_STATUS_RESOURCE_EXHAUSTED);
    if (strstr(c->message, limit) == NULL) {
        fprintf(stderr, "\n  message \"%s\", want \"%s\"\n", c->message, limit);
    }
    CU_ASSERT_PTR_NOT_NULL(strstr(c->message, limit));
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(c, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_QUEUE_FULL);
    CU_ASSERT_EQUAL(d->retry_after_ms, RPC_QUEUE_FULL_RETRY_MS);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    ccall_free(c);
}

/* max_streams_per_conn 2, max_connections 2: a third call on a connection holding two is refused
 * while another connection is served; a third connection is refused while the two are served;
 * released calls free their connection's slots. */
static void test_connection_limits(void)
{
    struct fixture f;
    fixture_streams_per_conn = 2;
    fixture_connections = 2;
    int rc = fixture_up(&f, 100, 1);
    fixture_streams_per_conn = fixture_connections = 0;
    CU_ASSERT_EQUAL_FATAL(rc, 0);
    struct ccall *a = ccall_start(&f.client, "/test.Echo/Hold", "a", 1, WAIT_MS);
    struct ccall *b = ccall_start(&f.client, "/test.Echo/Hold", "b", 1, WAIT_MS);
    CU_ASSERT_FATAL(wait_held(&f.hold, 2));
    expect_exhausted(unary(&f.client, "/test.Echo/Echo", "c", 1),
                     "calls in flight on this connection");
    CU_ASSERT_EQUAL(hold_count(&f.hold), 2);
    CU_ASSERT_EQUAL(rpc_server_inflight(f.server), 2);

    struct client other, third;
    client_open(&other, f.port);
    client_open(&third, f.port);
    struct ccall *c = unary(&other, "/test.Echo/Echo", "o", 1);
    CU_ASSERT_EQUAL(c->status, GRPC_STATUS_OK);
    ccall_free(c);
    CU_ASSERT_EQUAL(rpc_server_connections(f.server), 2);
    expect_exhausted(unary(&third, "/test.Echo/Echo", "t", 1),
                     "2 connections served, the limit is 2 (max_connections)");
    c = unary(&other, "/test.Echo/Echo", "o", 1); /* the served ones keep being served */
    CU_ASSERT_EQUAL(c->status, GRPC_STATUS_OK);
    ccall_free(c);

    hold_release(&f.hold, NULL);
    CU_ASSERT(ccall_wait(&f.client, a));
    CU_ASSERT(ccall_wait(&f.client, b));
    CU_ASSERT_EQUAL(a->status, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(b->status, GRPC_STATUS_OK);
    ccall_free(a);
    ccall_free(b);
    for (int i = 0; i < 2; i++) { /* both slots of the first connection are free again */
        a = ccall_start(&f.client, "/test.Echo/Hold", "a", 1, WAIT_MS);
        b = ccall_start(&f.client, "/test.Echo/Hold", "b", 1, WAIT_MS);
        CU_ASSERT_FATAL(wait_held(&f.hold, 2));
        hold_release(&f.hold, NULL);
        CU_ASSERT(ccall_wait(&f.client, a) && a->status == GRPC_STATUS_OK);
        CU_ASSERT(ccall_wait(&f.client, b) && b->status == GRPC_STATUS_OK);
        ccall_free(a);
        ccall_free(b);
    }
    client_close(&other);
    client_close(&third);
    fixture_down(&f);
}

static void test_oversized_request(void)
{
    static uint8_t big[5000];
    memset(big, 'x', sizeof(big));
    /* Exactly the limit passes. */
    struct ccall *cc = unary(&fx.client, "/test.Echo/Echo", big, 1024);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(cc->resp_len, 1024);
    ccall_free(cc);

    /* Above the limit, below gRPC's own (2x): our INVALID_ARGUMENT naming the field and limit. */
    cc = unary(&fx.client, "/test.Echo/Echo", big, 2000);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(cc->message, "request: 2000 bytes exceeds the limit of 1024");
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(cc, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(d->field, "request");
    CU_ASSERT_EQUAL(d->limit, 1024);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    ccall_free(cc);

    /* Above 2x the limit gRPC itself rejects the message before any handler runs. */
    cc = unary(&fx.client, "/test.Echo/Echo", big, sizeof(big));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_RESOURCE_EXHAUSTED);
    CU_ASSERT_FALSE(cc->has_resp);
    ccall_free(cc);

    /* The server keeps serving. */
    cc = unary(&fx.client, "/test.Echo/Echo", "ok", 2);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    ccall_free(cc);
}

static void test_no_message(void)
{
    struct ccall *cc = unary(&fx.client, "/test.Echo/Echo", NULL, 0);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_INVALID_ARGUMENT);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(cc, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_MALFORMED);
    CU_ASSERT_STRING_EQUAL(d->field, "request");
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    ccall_free(cc);
}

static void test_field_error_over_the_wire(void)
{
    struct ccall *cc = unary(&fx.client, "/test.Echo/FailField", "0123456789", 10);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(cc->message, "put.key: 10 bytes exceeds the limit of 1024");
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(cc, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(st->code, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_STRING_EQUAL(st->message, cc->message);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_INVALID_FIELD);
    CU_ASSERT_STRING_EQUAL(d->field, "put.key");
    CU_ASSERT_EQUAL(d->limit, 1024);
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    ccall_free(cc);
}

static void test_deadline(void)
{
    struct ccall *cc = ccall_start(&fx.client, "/test.Echo/Deadline", "", 0, 3000);
    CU_ASSERT_FATAL(ccall_wait(&fx.client, cc));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    long left = strtol((char *)cc->resp, NULL, 10);
    printf("\n    deadline: %s ms left\n", (char *)cc->resp);
    CU_ASSERT(left > 2000 && left <= 3100); /* gRPC rounds timeouts up on the wire */
    ccall_free(cc);
    cc = ccall_start(&fx.client, "/test.Echo/Deadline", "", 0, -1);
    CU_ASSERT_FATAL(ccall_wait(&fx.client, cc));
    CU_ASSERT_STRING_EQUAL((char *)cc->resp, "inf");
    ccall_free(cc);
}

/* ---- health ------------------------------------------------------------------------------ */

static size_t health_req(const char *service, uint8_t *buf)
{
    Grpc__Health__V1__HealthCheckRequest r = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    r.service = (char *)service;
    return grpc__health__v1__health_check_request__pack(&r, buf);
}

/* Health Check of service: the status, or -(grpc status) on error. */
static int health_check(const char *service)
{
    uint8_t buf[256];
    size_t len = health_req(service, buf);
    struct ccall *cc = unary(&fx.client, "/grpc.health.v1.Health/Check", buf, len);
    int out = -(int)cc->status;
    if (cc->status == GRPC_STATUS_OK && cc->has_resp) {
        Grpc__Health__V1__HealthCheckResponse *r =
            grpc__health__v1__health_check_response__unpack(NULL, cc->resp_len, cc->resp);
        CU_ASSERT_PTR_NOT_NULL_FATAL(r);
        out = r->status;
        grpc__health__v1__health_check_response__free_unpacked(r, NULL);
    }
    ccall_free(cc);
    return out;
}

static void test_health_check(void)
{
    CU_ASSERT_EQUAL(health_check(""),
                    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    CU_ASSERT_EQUAL(health_check("slotd.v1.Metadata"), -GRPC_STATUS_NOT_FOUND);
    rpc_server_set_health(fx.server, "slotd.v1.Metadata",
                          GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
    CU_ASSERT_EQUAL(health_check("slotd.v1.Metadata"),
                    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
    rpc_server_set_health(fx.server, "slotd.v1.Metadata",
                          GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    CU_ASSERT_EQUAL(health_check("slotd.v1.Metadata"),
                    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
}

struct watch_client {
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    int tag_start, tag_recv, tag_status;
};

static void watch_open(struct client *c, struct watch_client *w, const char *service)
{
    memset(w, 0, sizeof(*w));
    uint8_t buf[256];
    size_t len = health_req(service, buf);
    w->call =
        grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                                 grpc_slice_from_static_string("/grpc.health.v1.Health/Watch"),
                                 NULL, in_ms(4 * WAIT_MS), NULL);
    grpc_metadata_array_init(&w->init_md);
    grpc_metadata_array_init(&w->trail_md);
    grpc_slice s = grpc_slice_from_copied_buffer((const char *)buf, len);
    w->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = w->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &w->init_md;
    CU_ASSERT_EQUAL(grpc_call_start_batch(w->call, ops, 4, &w->tag_start, NULL), GRPC_CALL_OK);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &w->trail_md;
    ops[0].data.recv_status_on_client.status = &w->status;
    ops[0].data.recv_status_on_client.status_details = &w->details;
    ops[0].data.recv_status_on_client.error_string = &w->error_string;
    CU_ASSERT_EQUAL(grpc_call_start_batch(w->call, ops, 1, &w->tag_status, NULL), GRPC_CALL_OK);
    CU_ASSERT_EQUAL(grpc_completion_queue_pluck(c->cq, &w->tag_start, in_ms(WAIT_MS), NULL).type,
                    GRPC_OP_COMPLETE);
}

/* Next streamed status, or -1 when the stream ended or the wait timed out. */
static int watch_next(struct client *c, struct watch_client *w)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &w->recv;
    w->recv = NULL;
    CU_ASSERT_EQUAL(grpc_call_start_batch(w->call, &op, 1, &w->tag_recv, NULL), GRPC_CALL_OK);
    grpc_event ev = grpc_completion_queue_pluck(c->cq, &w->tag_recv, in_ms(WAIT_MS), NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        grpc_call_cancel(w->call, NULL);
        grpc_completion_queue_pluck(c->cq, &w->tag_recv, in_ms(WAIT_MS), NULL);
    }
    if (w->recv == NULL) {
        return -1;
    }
    grpc_byte_buffer_reader r;
    grpc_byte_buffer_reader_init(&r, w->recv);
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    Grpc__Health__V1__HealthCheckResponse *m = grpc__health__v1__health_check_response__unpack(
        NULL, GRPC_SLICE_LENGTH(s), GRPC_SLICE_START_PTR(s));
    int out = m != NULL ? (int)m->status : -1;
    if (m != NULL) {
        grpc__health__v1__health_check_response__free_unpacked(m, NULL);
    }
    grpc_slice_unref(s);
    grpc_byte_buffer_destroy(w->recv);
    w->recv = NULL;
    return out;
}

/* Cancels (when cancel) and collects the final status; returns it. */
static grpc_status_code watch_close(struct client *c, struct watch_client *w, bool cancel)
{
    if (cancel) {
        grpc_call_cancel(w->call, NULL);
    }
    grpc_event ev = grpc_completion_queue_pluck(c->cq, &w->tag_status, in_ms(WAIT_MS), NULL);
    CU_ASSERT_EQUAL(ev.type, GRPC_OP_COMPLETE);
    grpc_status_code st = w->status;
    grpc_byte_buffer_destroy(w->send);
    grpc_metadata_array_destroy(&w->init_md);
    grpc_metadata_array_destroy(&w->trail_md);
    grpc_slice_unref(w->details);
    gpr_free((void *)w->error_string);
    grpc_call_unref(w->call);
    return st;
}

static void test_health_watch(void)
{
    const int serving = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    const int not_serving = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING;
    const int unknown = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN;
    rpc_server_set_health(fx.server, "watched", serving);
    struct watch_client w, u;
    watch_open(&fx.client, &w, "watched");
    watch_open(&fx.client, &u, "later");
    CU_ASSERT_EQUAL(watch_next(&fx.client, &w), serving);
    CU_ASSERT_EQUAL(watch_next(&fx.client, &u), unknown);
    rpc_server_set_health(fx.server, "watched", not_serving);
    CU_ASSERT_EQUAL(watch_next(&fx.client, &w), not_serving);
    rpc_server_set_health(fx.server, "watched", serving);
    CU_ASSERT_EQUAL(watch_next(&fx.client, &w), serving);
    rpc_server_set_health(fx.server, "later", serving);
    CU_ASSERT_EQUAL(watch_next(&fx.client, &u), serving);
    CU_ASSERT_EQUAL(watch_close(&fx.client, &w, true), GRPC_STATUS_CANCELLED);
    CU_ASSERT_EQUAL(watch_close(&fx.client, &u, true), GRPC_STATUS_CANCELLED);
    /* The server still answers after the watches ended. */
    CU_ASSERT_EQUAL(health_check("watched"), serving);
}

/* ---- shutdown with calls in flight -------------------------------------------------------- */

struct shutdown_arg {
    struct rpc_server *server;
    atomic_bool done;
};

static void *shutdown_main(void *arg)
{
    struct shutdown_arg *a = arg;
    rpc_server_shutdown(a->server);
    atomic_store(&a->done, true);
    return NULL;
}

static void test_shutdown_in_flight(void)
{
    struct fixture f;
    CU_ASSERT_FATAL(fixture_up(&f, 2, 2) == 0); /* two completion-queue threads */
    struct ccall *a = ccall_start(&f.client, "/test.Echo/Hold", "a", 1, WAIT_MS);
    struct ccall *b = ccall_start(&f.client, "/test.Echo/Hold", "b", 1, WAIT_MS);
    struct watch_client w;
    watch_open(&f.client, &w, "");
    CU_ASSERT_EQUAL(watch_next(&f.client, &w),
                    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING);
    CU_ASSERT_FATAL(wait_held(&f.hold, 2));

    struct shutdown_arg sa = {.server = f.server};
    atomic_init(&sa.done, false);
    pthread_t t;
    CU_ASSERT_FATAL(pthread_create(&t, NULL, shutdown_main, &sa) == 0);
    sleep_ms(200);
    /* Held calls keep shutdown waiting; the watch stream ends. It may first hear NOT_SERVING
     * (best effort: the cancellation can overtake that message) but never anything else. */
    CU_ASSERT_FALSE(atomic_load(&sa.done));
    int st = 0, reads = 0;
    while (reads < 3 && (st = watch_next(&f.client, &w)) != -1) {
        CU_ASSERT_EQUAL(st, GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING);
        reads++;
    }
    CU_ASSERT_EQUAL(st, -1);
    grpc_status_code wst = watch_close(&f.client, &w, false);
    printf("\n    watch ended with status %d\n", (int)wst);
    CU_ASSERT_EQUAL(rpc_server_inflight(f.server), 2);

    struct slotd_error e;
    slotd_error_set(&e, SLOTD_ESHUTTING_DOWN, "node: shutting down");
    hold_release(&f.hold, &e);
    int64_t deadline = now_ms() + WAIT_MS;
    while (!atomic_load(&sa.done) && now_ms() < deadline) {
        sleep_ms(5);
    }
    CU_ASSERT_FATAL(atomic_load(&sa.done));
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(rpc_server_inflight(f.server), 0);

    CU_ASSERT(ccall_wait(&f.client, a));
    CU_ASSERT(ccall_wait(&f.client, b));
    CU_ASSERT_NOT_EQUAL(a->status, GRPC_STATUS_OK);
    CU_ASSERT_NOT_EQUAL(b->status, GRPC_STATUS_OK);
    ccall_free(a);
    ccall_free(b);
    rpc_server_shutdown(f.server); /* idempotent */
    fixture_down(&f);
}

/* ---- server-streaming methods ------------------------------------------------------------- */

/* A server-streaming client call. */
struct sclient {
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice details;
    const char *error_string;
    int tag_start, tag_recv, tag_status;
    /* results of sc_close */
    uint8_t *status_bin;
    size_t status_bin_len;
    char message[256];
};

/* Opens a stream on method with request req and metadata x-test: header (NULL: none). */
static void sc_open(struct client *c, struct sclient *w, const char *method, const char *req,
                    const char *header)
{
    memset(w, 0, sizeof(*w));
    w->call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq,
                                       grpc_slice_from_static_string(method), NULL,
                                       in_ms(4 * WAIT_MS), NULL);
    grpc_metadata_array_init(&w->init_md);
    grpc_metadata_array_init(&w->trail_md);
    grpc_slice s = grpc_slice_from_copied_string(req);
    w->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    grpc_metadata md;
    memset(&md, 0, sizeof(md));
    md.key = grpc_slice_from_static_string("x-test");
    md.value = grpc_slice_from_static_string(header != NULL ? header : "");
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[0].data.send_initial_metadata.count = header != NULL ? 1 : 0;
    ops[0].data.send_initial_metadata.metadata = header != NULL ? &md : NULL;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = w->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &w->init_md;
    CU_ASSERT_EQUAL(grpc_call_start_batch(w->call, ops, 4, &w->tag_start, NULL), GRPC_CALL_OK);
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[0].data.recv_status_on_client.trailing_metadata = &w->trail_md;
    ops[0].data.recv_status_on_client.status = &w->status;
    ops[0].data.recv_status_on_client.status_details = &w->details;
    ops[0].data.recv_status_on_client.error_string = &w->error_string;
    CU_ASSERT_EQUAL(grpc_call_start_batch(w->call, ops, 1, &w->tag_status, NULL), GRPC_CALL_OK);
    CU_ASSERT_EQUAL(grpc_completion_queue_pluck(c->cq, &w->tag_start, in_ms(WAIT_MS), NULL).type,
                    GRPC_OP_COMPLETE);
}

/* Next message into buf (NUL-terminated, truncated to cap - 1): its length, or -1 when the stream
 * ended or the wait timed out. */
static long sc_next(struct client *c, struct sclient *w, char *buf, size_t cap)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &w->recv;
    w->recv = NULL;
    CU_ASSERT_EQUAL(grpc_call_start_batch(w->call, &op, 1, &w->tag_recv, NULL), GRPC_CALL_OK);
    grpc_event ev = grpc_completion_queue_pluck(c->cq, &w->tag_recv, in_ms(WAIT_MS), NULL);
    if (ev.type != GRPC_OP_COMPLETE) {
        grpc_call_cancel(w->call, NULL);
        grpc_completion_queue_pluck(c->cq, &w->tag_recv, in_ms(WAIT_MS), NULL);
    }
    if (w->recv == NULL) {
        return -1;
    }
    grpc_byte_buffer_reader r;
    grpc_byte_buffer_reader_init(&r, w->recv);
    grpc_slice s = grpc_byte_buffer_reader_readall(&r);
    grpc_byte_buffer_reader_destroy(&r);
    long n = (long)GRPC_SLICE_LENGTH(s);
    snprintf(buf, cap, "%.*s", (int)n, (const char *)GRPC_SLICE_START_PTR(s));
    grpc_slice_unref(s);
    grpc_byte_buffer_destroy(w->recv);
    w->recv = NULL;
    return n;
}

/* Cancels (when cancel), collects the final status (message and details trailer into w) and
 * frees the call; returns the status. */
static grpc_status_code sc_close(struct client *c, struct sclient *w, bool cancel)
{
    if (cancel) {
        grpc_call_cancel(w->call, NULL);
    }
    grpc_event ev = grpc_completion_queue_pluck(c->cq, &w->tag_status, in_ms(WAIT_MS), NULL);
    CU_ASSERT_EQUAL(ev.type, GRPC_OP_COMPLETE);
    for (size_t i = 0; i < w->trail_md.count; i++) {
        if (grpc_slice_str_cmp(w->trail_md.metadata[i].key, "grpc-status-details-bin") == 0) {
            grpc_slice v = w->trail_md.metadata[i].value;
            w->status_bin_len = GRPC_SLICE_LENGTH(v);
            w->status_bin = malloc(w->status_bin_len + 1);
            memcpy(w->status_bin, GRPC_SLICE_START_PTR(v), w->status_bin_len);
        }
    }
    snprintf(w->message, sizeof(w->message), "%.*s", (int)GRPC_SLICE_LENGTH(w->details),
             (const char *)GRPC_SLICE_START_PTR(w->details));
    grpc_byte_buffer_destroy(w->send);
    grpc_metadata_array_destroy(&w->init_md);
    grpc_metadata_array_destroy(&w->trail_md);
    grpc_slice_unref(w->details);
    gpr_free((void *)w->error_string);
    grpc_call_unref(w->call);
    return w->status;
}

/* Waits (bounded) until s holds n calls in flight. */
static bool wait_inflight(struct rpc_server *s, size_t n)
{
    int64_t deadline = now_ms() + WAIT_MS;
    while (rpc_server_inflight(s) != n && now_ms() < deadline) {
        sleep_ms(2);
    }
    return rpc_server_inflight(s) == n;
}

static bool wait_queued_bytes(const struct rpc_stream *st, size_t n)
{
    int64_t deadline = now_ms() + WAIT_MS;
    while (rpc_stream_queued_bytes(st) != n && now_ms() < deadline) {
        sleep_ms(2);
    }
    return rpc_stream_queued_bytes(st) == n;
}

/* 1000 messages sent from another thread (pacing on EFULL with a 4 KiB bound), then OK. */
/* A client-streaming call on the fixture's client: open (the receive side armed up to the
 * status on tag cc), then cs_send per frame. */
static struct ccall *cs_open(struct client *c)
{
    struct ccall *cc = calloc(1, sizeof(*cc));
    grpc_slice m = grpc_slice_from_static_string(CSTREAM_PATH);
    cc->call = grpc_channel_create_call(c->channel, NULL, GRPC_PROPAGATE_DEFAULTS, c->cq, m, NULL,
                                        in_ms(WAIT_MS), NULL);
    grpc_metadata_array_init(&cc->init_md);
    grpc_metadata_array_init(&cc->trail_md);
    grpc_op ops[4];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[1].data.recv_initial_metadata.recv_initial_metadata = &cc->init_md;
    ops[2].op = GRPC_OP_RECV_MESSAGE;
    ops[2].data.recv_message.recv_message = &cc->recv;
    ops[3].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[3].data.recv_status_on_client.trailing_metadata = &cc->trail_md;
    ops[3].data.recv_status_on_client.status = &cc->status;
    ops[3].data.recv_status_on_client.status_details = &cc->details;
    ops[3].data.recv_status_on_client.error_string = &cc->error_string;
    CU_ASSERT_EQUAL(grpc_call_start_batch(cc->call, ops, 4, cc, NULL), GRPC_CALL_OK);
    return cc;
}

/* Sends one frame (or, with frame NULL, the half-close) and waits for the send; its success. */
static bool cs_send(struct client *c, struct ccall *cc, const char *frame, size_t len)
{
    int tag;
    grpc_op op;
    memset(&op, 0, sizeof(op));
    grpc_byte_buffer *bb = NULL;
    if (frame != NULL) {
        grpc_slice s = grpc_slice_from_copied_buffer(frame, len);
        bb = grpc_raw_byte_buffer_create(&s, 1);
        grpc_slice_unref(s);
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = bb;
    } else {
        op.op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    }
    CU_ASSERT_EQUAL(grpc_call_start_batch(cc->call, &op, 1, &tag, NULL), GRPC_CALL_OK);
    grpc_event ev = grpc_completion_queue_pluck(c->cq, &tag, in_ms(WAIT_MS), NULL);
    CU_ASSERT_EQUAL(ev.type, GRPC_OP_COMPLETE);
    if (bb != NULL) {
        grpc_byte_buffer_destroy(bb);
    }
    return ev.type == GRPC_OP_COMPLETE && ev.success;
}

static void cs_reset(void)
{
    pthread_mutex_lock(&cs.mu);
    cs.frames = cs.out_of_order = cs.ends = cs.max_concurrent = 0;
    pthread_mutex_unlock(&cs.mu);
}

static bool cs_wait_ends(int n)
{
    int64_t end = now_ms() + WAIT_MS;
    for (;;) {
        pthread_mutex_lock(&cs.mu);
        int ends = cs.ends;
        pthread_mutex_unlock(&cs.mu);
        if (ends >= n) {
            return ends == n;
        }
        if (now_ms() > end) {
            return false;
        }
        sleep_ms(1);
    }
}

/* 200 frames, one at a time in order, then the half-close: OK with an empty response. */
static void test_cstream_frames(void)
{
    cs_reset();
    struct ccall *cc = cs_open(&fx.client);
    char buf[32];
    for (int i = 0; i < 200; i++) {
        int n = snprintf(buf, sizeof(buf), "frame-%d", i);
        CU_ASSERT(cs_send(&fx.client, cc, buf, (size_t)n));
    }
    CU_ASSERT(cs_send(&fx.client, cc, NULL, 0));
    CU_ASSERT_FATAL(ccall_wait(&fx.client, cc));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    CU_ASSERT(cc->has_resp && cc->resp_len == 0);
    CU_ASSERT(cs_wait_ends(1));
    pthread_mutex_lock(&cs.mu);
    CU_ASSERT_EQUAL(cs.frames, 200);
    CU_ASSERT_EQUAL(cs.out_of_order, 0);
    CU_ASSERT_EQUAL(cs.max_concurrent, 1);
    pthread_mutex_unlock(&cs.mu);
    ccall_free(cc);
    CU_ASSERT(wait_inflight(fx.server, 0));
}

/* A refused frame ends the stream with its error and details; nothing after it is handed over.
 * A frame over max_request_bytes ends it with INVALID_ARGUMENT. */
static void test_cstream_refuse(void)
{
    cs_reset();
    struct ccall *cc = cs_open(&fx.client);
    CU_ASSERT(cs_send(&fx.client, cc, "frame-0", 7));
    CU_ASSERT(cs_send(&fx.client, cc, "refuse", 6));
    cs_send(&fx.client, cc, "frame-2", 7); /* may still be accepted by the transport */
    CU_ASSERT_FATAL(ccall_wait(&fx.client, cc));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_RESOURCE_EXHAUSTED);
    CU_ASSERT_STRING_EQUAL(cc->message, "test: frame 1 refused");
    CU_ASSERT_FALSE(cc->has_resp);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = ccall_detail(cc, &st);
    CU_ASSERT_PTR_NOT_NULL(d);
    if (d != NULL) {
        CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_QUEUE_FULL);
        slotd__v1__error_detail__free_unpacked(d, NULL);
        google__rpc__status__free_unpacked(st, NULL);
    }
    CU_ASSERT(cs_wait_ends(1));
    pthread_mutex_lock(&cs.mu);
    CU_ASSERT_EQUAL(cs.frames, 1);
    pthread_mutex_unlock(&cs.mu);
    ccall_free(cc);

    char big[1500];
    memset(big, 'x', sizeof(big));
    cc = cs_open(&fx.client);
    cs_send(&fx.client, cc, big, sizeof(big));
    CU_ASSERT_FATAL(ccall_wait(&fx.client, cc));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT(cs_wait_ends(2));
    ccall_free(cc);
    CU_ASSERT(wait_inflight(fx.server, 0));
}

/* The client cancels an open stream: the handler's on_end runs once, the slot is given back. */
static void test_cstream_cancel(void)
{
    cs_reset();
    struct ccall *cc = cs_open(&fx.client);
    CU_ASSERT(cs_send(&fx.client, cc, "frame-0", 7));
    CU_ASSERT(wait_inflight(fx.server, 1)); /* the stream holds a max_inflight_calls slot */
    grpc_call_cancel(cc->call, NULL);
    CU_ASSERT_FATAL(ccall_wait(&fx.client, cc));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_CANCELLED);
    CU_ASSERT(cs_wait_ends(1));
    ccall_free(cc);
    CU_ASSERT(wait_inflight(fx.server, 0));
}

static void test_stream_count(void)
{
    struct sclient w;
    sc_open(&fx.client, &w, STREAM_COUNT_PATH, "1000", NULL);
    int got = 0;
    char buf[64], want[16];
    for (int i = 0; i < 1000; i++) {
        if (sc_next(&fx.client, &w, buf, sizeof(buf)) < 0) {
            break;
        }
        snprintf(want, sizeof(want), "msg-%06d", i);
        if (strcmp(buf, want) != 0) {
            CU_FAIL("stream message out of order");
            printf("\n    message %d: got \"%s\"\n", i, buf);
            break;
        }
        got++;
    }
    CU_ASSERT_EQUAL(got, 1000);
    CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), -1);
    CU_ASSERT_EQUAL(sc_close(&fx.client, &w, false), GRPC_STATUS_OK);
    CU_ASSERT_PTR_NULL(w.status_bin);
    pthread_mutex_lock(&sh.mu);
    bool joined = sh.has_sender;
    pthread_t t = sh.sender;
    sh.has_sender = false;
    pthread_mutex_unlock(&sh.mu);
    CU_ASSERT_FATAL(joined);
    pthread_join(t, NULL);
    CU_ASSERT(wait_inflight(fx.server, 0));
}

/* The sender thread keeps sending while the client cancels: on_close once, the sender sees
 * ECLOSED and finishes. */
static void test_stream_cancel_while_sending(void)
{
    pthread_mutex_lock(&sh.mu);
    sh.count_closes = 0;
    sh.sender_rc = 0;
    pthread_mutex_unlock(&sh.mu);
    struct sclient w;
    sc_open(&fx.client, &w, STREAM_COUNT_PATH, "100000000", NULL);
    char buf[64], want[16];
    for (int i = 0; i < 10; i++) {
        CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), 10);
        snprintf(want, sizeof(want), "msg-%06d", i);
        CU_ASSERT_STRING_EQUAL(buf, want);
    }
    CU_ASSERT_EQUAL(sc_close(&fx.client, &w, true), GRPC_STATUS_CANCELLED);
    pthread_mutex_lock(&sh.mu);
    bool has = sh.has_sender;
    pthread_t t = sh.sender;
    sh.has_sender = false;
    pthread_mutex_unlock(&sh.mu);
    CU_ASSERT_FATAL(has);
    int64_t t0 = now_ms();
    pthread_join(t, NULL);
    CU_ASSERT(now_ms() - t0 < WAIT_MS);
    CU_ASSERT(wait_inflight(fx.server, 0));
    pthread_mutex_lock(&sh.mu);
    CU_ASSERT_EQUAL(sh.sender_rc, RPC_STREAM_ECLOSED);
    CU_ASSERT_EQUAL(sh.count_closes, 1);
    pthread_mutex_unlock(&sh.mu);
}

#define BOUND_LIMIT 65536
#define BOUND_MSG 1024

/* Without a reader the queue fills to its bound: EFULL, nothing more queued; a reader then gets
 * every accepted message in order, and finish sends the rest before OK. */
static void test_stream_queue_bound(void)
{
    sheld_reset();
    struct sclient w;
    char buf[BOUND_MSG + 1], text[32];
    snprintf(text, sizeof(text), "%d k", BOUND_LIMIT);
    sc_open(&fx.client, &w, STREAM_HOLD_PATH, text, NULL);
    CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), 5);
    CU_ASSERT_FATAL(sheld_wait(0, 0));
    struct rpc_stream *st = sheld_take(0);
    CU_ASSERT_FATAL(st != NULL);

    /* Fill until EFULL holds with the queue unchanged for 200 ms (gRPC's windows are full). */
    char msg[BOUND_MSG];
    int sent = 0, stable = 0;
    size_t last = (size_t)-1;
    int64_t deadline = now_ms() + 4 * WAIT_MS;
    while (stable < 100 && now_ms() < deadline) {
        memset(msg, 'x', sizeof(msg));
        snprintf(msg, sizeof(msg), "%08d", sent);
        int rc = rpc_stream_send_bytes(st, msg, sizeof(msg));
        if (rc == 0) {
            sent++;
            stable = 0;
            continue;
        }
        CU_ASSERT_EQUAL_FATAL(rc, RPC_STREAM_EFULL);
        size_t q = rpc_stream_queued_bytes(st);
        stable = q == last ? stable + 1 : 0;
        last = q;
        sleep_ms(2);
    }
    CU_ASSERT_EQUAL(stable, 100);
    size_t q = rpc_stream_queued_bytes(st);
    printf("\n    queue bound: %d messages accepted, %zu bytes queued at EFULL\n", sent, q);
    CU_ASSERT(q <= BOUND_LIMIT && q + BOUND_MSG > BOUND_LIMIT);
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, msg, sizeof(msg)), RPC_STREAM_EFULL);
    CU_ASSERT_EQUAL(rpc_stream_queued_bytes(st), q);
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, msg, BOUND_LIMIT + 1), RPC_STREAM_EFULL);

    /* Finish with the queue full: the client still reads everything, then OK. */
    rpc_stream_finish(st, NULL);
    int got = 0;
    long n;
    while ((n = sc_next(&fx.client, &w, buf, sizeof(buf))) >= 0) {
        char want[16];
        snprintf(want, sizeof(want), "%08d", got);
        if (n != BOUND_MSG || strncmp(buf, want, 8) != 0) {
            CU_FAIL("queued message lost or out of order");
            break;
        }
        got++;
    }
    CU_ASSERT_EQUAL(got, sent);
    CU_ASSERT_EQUAL(sc_close(&fx.client, &w, false), GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(sheld_closes(0), 0); /* finished first: no close notice */
    CU_ASSERT(wait_inflight(fx.server, 0));
}

/* The client cancels: on_close once, later sends ECLOSED, finish afterwards is fine. */
static void test_stream_client_cancel(void)
{
    sheld_reset();
    struct sclient w;
    char buf[64];
    int64_t opened = now_ms();
    sc_open(&fx.client, &w, STREAM_HOLD_PATH, "0 k", "abc");
    CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), 5);
    CU_ASSERT_STRING_EQUAL(buf, "hello");
    int64_t answered = now_ms();
    CU_ASSERT_FATAL(sheld_wait(0, 0));
    pthread_mutex_lock(&sh.mu);
    CU_ASSERT_STRING_EQUAL(sh.header, "abc");
    int64_t left = sh.deadline_ms - opened;
    pthread_mutex_unlock(&sh.mu);
    /* The server's deadline is its receive time plus the grpc-timeout header, which gRPC
     * encodes rounded up (to whole seconds at this size): at most the time the call took to
     * reach the handler plus 1 s over the 4 * WAIT_MS the client set. */
    CU_ASSERT(left > 4 * WAIT_MS - 2000 && left <= answered - opened + 4 * WAIT_MS + 1000);
    if (left <= 4 * WAIT_MS - 2000 || left > answered - opened + 4 * WAIT_MS + 1000)
        fprintf(stderr, "stream deadline %lld ms after open, answered after %lld ms\n",
                (long long)left, (long long)(answered - opened));
    CU_ASSERT_EQUAL(rpc_server_inflight(fx.server), 1); /* a stream holds a slot */

    CU_ASSERT_EQUAL(sc_close(&fx.client, &w, true), GRPC_STATUS_CANCELLED);
    CU_ASSERT_FATAL(sheld_wait(0, 1));
    struct rpc_stream *st = sheld_take(0);
    CU_ASSERT_FATAL(st != NULL);
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, "x", 1), RPC_STREAM_ECLOSED);
    Grpc__Health__V1__HealthCheckResponse m = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    CU_ASSERT_EQUAL(rpc_stream_send(st, &m.base), RPC_STREAM_ECLOSED);
    /* "hello"'s send completes on its own tag, which the completion queue may hand over after
     * the close: it leaves the queue then, and nothing refused above was ever added. */
    CU_ASSERT(wait_queued_bytes(st, 0));
    CU_ASSERT_EQUAL(rpc_server_inflight(fx.server), 1); /* until the owner finishes */
    rpc_stream_finish(st, NULL);
    CU_ASSERT(wait_inflight(fx.server, 0));
    sleep_ms(50);
    CU_ASSERT_EQUAL(sheld_closes(0), 1);
}

/* Finish with an error after two messages: the code, message and ErrorDetail trailer. */
static void test_stream_fail(void)
{
    struct sclient w;
    char buf[64];
    sc_open(&fx.client, &w, STREAM_FAIL_PATH, "", NULL);
    CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "a");
    CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), 1);
    CU_ASSERT_STRING_EQUAL(buf, "b");
    CU_ASSERT_EQUAL(sc_next(&fx.client, &w, buf, sizeof(buf)), -1);
    CU_ASSERT_EQUAL(sc_close(&fx.client, &w, false), GRPC_STATUS_FAILED_PRECONDITION);
    CU_ASSERT_STRING_EQUAL(w.message, "group 7: node 1 is not the leader");
    CU_ASSERT_PTR_NOT_NULL_FATAL(w.status_bin);
    Google__Rpc__Status *st = NULL;
    Slotd__V1__ErrorDetail *d = decode_detail(w.status_bin, w.status_bin_len, &st);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    CU_ASSERT_EQUAL(st->code, GRPC_STATUS_FAILED_PRECONDITION);
    CU_ASSERT_EQUAL(d->code, SLOTD__V1__ERROR_CODE__ERROR_CODE_NOT_LEADER);
    CU_ASSERT_PTR_NOT_NULL_FATAL(d->leader_hint);
    CU_ASSERT_EQUAL(d->leader_hint->node_id, 3);
    CU_ASSERT_STRING_EQUAL(d->leader_hint->address, "10.0.0.3:7700");
    slotd__v1__error_detail__free_unpacked(d, NULL);
    google__rpc__status__free_unpacked(st, NULL);
    free(w.status_bin);

    /* A request over max_request_bytes (1024) is refused before the handler runs. */
    char big[2000];
    memset(big, '7', sizeof(big));
    struct ccall *cc = unary(&fx.client, STREAM_COUNT_PATH, big, sizeof(big));
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_INVALID_ARGUMENT);
    CU_ASSERT_FALSE(cc->has_resp);
    ccall_free(cc);
    pthread_mutex_lock(&sh.mu);
    CU_ASSERT_FALSE(sh.has_sender);
    pthread_mutex_unlock(&sh.mu);
    CU_ASSERT(wait_inflight(fx.server, 0));
}

/* Shutdown with two open streams: on_close fires on both; one finishes inside on_close, the
 * other is finished later by its owner, and only then does shutdown return. */
static void test_stream_shutdown(void)
{
    struct fixture f;
    CU_ASSERT_FATAL(fixture_up(&f, 2, 2) == 0);
    sheld_reset();
    struct sclient a, b;
    char buf[64];
    sc_open(&f.client, &a, STREAM_HOLD_PATH, "0 k", NULL);
    CU_ASSERT_EQUAL(sc_next(&f.client, &a, buf, sizeof(buf)), 5);
    sc_open(&f.client, &b, STREAM_HOLD_PATH, "0 f", NULL);
    CU_ASSERT_EQUAL(sc_next(&f.client, &b, buf, sizeof(buf)), 5);
    CU_ASSERT_FATAL(sheld_wait(1, 0));
    CU_ASSERT_EQUAL(rpc_server_inflight(f.server), 2);

    struct shutdown_arg sa = {.server = f.server};
    atomic_init(&sa.done, false);
    pthread_t t;
    CU_ASSERT_FATAL(pthread_create(&t, NULL, shutdown_main, &sa) == 0);
    CU_ASSERT(sheld_wait(0, 1));
    CU_ASSERT(sheld_wait(1, 1));
    sleep_ms(100);
    CU_ASSERT_FALSE(atomic_load(&sa.done)); /* stream a is not finished yet */
    struct rpc_stream *st = sheld_take(0);
    CU_ASSERT_FATAL(st != NULL);
    CU_ASSERT_EQUAL(rpc_stream_send_bytes(st, "x", 1), RPC_STREAM_ECLOSED);
    rpc_stream_finish(st, NULL);
    int64_t deadline = now_ms() + WAIT_MS;
    while (!atomic_load(&sa.done) && now_ms() < deadline) {
        sleep_ms(5);
    }
    CU_ASSERT_FATAL(atomic_load(&sa.done));
    pthread_join(t, NULL);
    CU_ASSERT_EQUAL(rpc_server_inflight(f.server), 0);
    CU_ASSERT_NOT_EQUAL(sc_close(&f.client, &a, false), GRPC_STATUS_OK);
    CU_ASSERT_NOT_EQUAL(sc_close(&f.client, &b, false), GRPC_STATUS_OK);
    CU_ASSERT_EQUAL(sheld_closes(0), 1);
    CU_ASSERT_EQUAL(sheld_closes(1), 1);
    fixture_down(&f);
}

/* Bounded load: LOAD_CALLS calls, LOAD_WINDOW in flight, half echoed on the CQ thread and half
 * replied by the worker thread; every one must come back OK with its own payload. */
#define LOAD_CALLS 4000
#define LOAD_WINDOW 32

static void test_load(void)
{
    struct fixture f;
    CU_ASSERT_FATAL(fixture_up(&f, LOAD_WINDOW, 1) == 0);
    struct ccall *window[LOAD_WINDOW] = {0};
    char want[LOAD_WINDOW][32];
    int started = 0, ok = 0, bad = 0;
    int64_t t0 = now_ms(), deadline = t0 + 30000;
    while ((started < LOAD_CALLS || ok + bad < started) && now_ms() < deadline) {
        for (int i = 0; i < LOAD_WINDOW; i++) {
            struct ccall *cc = window[i];
            if (cc != NULL) {
                bool good = ccall_wait(&f.client, cc) && cc->status == GRPC_STATUS_OK &&
                            cc->has_resp && strcmp((char *)cc->resp, want[i]) == 0;
                ok += good;
                bad += !good;
                ccall_free(cc);
                window[i] = NULL;
            }
            if (started < LOAD_CALLS) {
                bool later = started % 2 == 1;
                char req[16];
                int n = snprintf(req, sizeof(req), "%d", started);
                snprintf(want[i], sizeof(want[i]), "%s%s", req, later ? "!" : "");
                window[i] = ccall_start(&f.client, later ? "/test.Echo/Later" : "/test.Echo/Echo",
                                        req, (size_t)n, WAIT_MS);
                started++;
            }
        }
    }
    int64_t elapsed = now_ms() - t0;
    CU_ASSERT_EQUAL(ok, LOAD_CALLS);
    CU_ASSERT_EQUAL(bad, 0);
    printf("\n    load: %d calls, %d in flight, %lld ms (%.0f calls/s)\n", ok, LOAD_WINDOW,
           (long long)elapsed, elapsed > 0 ? ok * 1000.0 / (double)elapsed : 0.0);
    fixture_down(&f);
}

/* rpc_server_poll_by (slotd's peer port): a server whose own queue does not poll accepts and
 * answers calls through the fixture server's queue, is shut down before it, and leaves it serving;
 * under another GRPC_POLL_STRATEGY than epoll1 it refuses to start. */
static void test_poll_by(void)
{
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "127.0.0.1:0";
    struct rpc_server *s = NULL;
    CU_ASSERT_EQUAL_FATAL(rpc_server_new(&o, &s), SLOTD_OK);
    rpc_server_add_unary(s, "/test.Echo/Echo", echo_cb, NULL);
    rpc_server_poll_by(s, fx.server);
    char err[256] = "";
    int port = 0;
    CU_ASSERT_EQUAL_FATAL(rpc_server_start(s, &port, err, sizeof(err)), SLOTD_OK);
    struct client c;
    client_open(&c, port);
    for (int i = 0; i < 20; i++) { /* new streams on one connection, each answered */
        struct ccall *cc = unary(&c, "/test.Echo/Echo", "peer", 4);
        CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
        CU_ASSERT(cc->has_resp && cc->resp_len == 4 && memcmp(cc->resp, "peer", 4) == 0);
        ccall_free(cc);
    }
    client_close(&c);
    rpc_server_free(s);
    struct ccall *cc = unary(&fx.client, "/test.Echo/Echo", "still", 5);
    CU_ASSERT_EQUAL(cc->status, GRPC_STATUS_OK);
    ccall_free(cc);

    setenv("GRPC_POLL_STRATEGY", "poll", 1); /* read by rpc_server_start; gRPC read it at init */
    CU_ASSERT_EQUAL_FATAL(rpc_server_new(&o, &s), SLOTD_OK);
    rpc_server_poll_by(s, fx.server);
    CU_ASSERT_EQUAL(rpc_server_start(s, NULL, err, sizeof(err)), SLOTD_EINTERNAL);
    CU_ASSERT_STRING_EQUAL(err, "rpc: a non-polling completion queue needs gRPC's epoll1 engine, "
                                "not GRPC_POLL_STRATEGY=poll");
    unsetenv("GRPC_POLL_STRATEGY");
    rpc_server_free(s);
}

static void test_start_failure(void)
{
    struct rpc_server_options o;
    rpc_server_options_default(&o);
    o.listen_addr = "256.0.0.1:1";
    struct rpc_server *s = NULL;
    CU_ASSERT_EQUAL_FATAL(rpc_server_new(&o, &s), SLOTD_OK);
    char err[256] = "";
    CU_ASSERT_EQUAL(rpc_server_start(s, NULL, err, sizeof(err)), SLOTD_EINTERNAL);
    CU_ASSERT_STRING_EQUAL(err, "rpc: listen address '256.0.0.1:1': Name or service not known");
    rpc_server_free(s);

    /* A port another server holds is not shared (no SO_REUSEPORT): the second start fails and
     * says why. */
    o.listen_addr = "127.0.0.1:0";
    struct rpc_server *first = NULL;
    CU_ASSERT_EQUAL_FATAL(rpc_server_new(&o, &first), SLOTD_OK);
    int port = 0;
    CU_ASSERT_EQUAL_FATAL(rpc_server_start(first, &port, err, sizeof(err)), SLOTD_OK);
    char addr[64];
    snprintf(addr, sizeof(addr), "127.0.0.1:%d", port);
    o.listen_addr = addr;
    CU_ASSERT_EQUAL_FATAL(rpc_server_new(&o, &s), SLOTD_OK);
    CU_ASSERT_EQUAL(rpc_server_start(s, NULL, err, sizeof(err)), SLOTD_EINTERNAL);
    char want[128];
    snprintf(want, sizeof(want), "rpc: cannot listen on %s: Address already in use", addr);
    CU_ASSERT_STRING_EQUAL(err, want);
    rpc_server_free(s);
    rpc_server_free(first);

    o.cq_threads = 1000;
    CU_ASSERT_EQUAL(rpc_server_new(&o, &s), SLOTD_EINVALID_FIELD);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS) {
        return 1;
    }
    CU_pSuite errs = CU_add_suite("rpc_status", NULL, NULL);
    CU_add_test(errs, "slotd_err -> grpc code and ErrorDetail code", test_error_mapping);
    CU_add_test(errs, "slotd_error_field details decode", test_error_details_field);
    CU_add_test(errs, "leader hint and retry details decode", test_error_details_leader_hint);
    CU_pSuite srv = CU_add_suite("rpc_server", suite_init, suite_clean);
    CU_add_test(srv, "echo", test_echo);
    CU_add_test(srv, "rpc_server_add_echo: request bytes back", test_echo_method);
    CU_add_test(srv, "reply from another thread", test_reply_from_other_thread);
    CU_add_test(srv, "rpc_server_poll_by: served through another server's queue", test_poll_by);
    CU_add_test(srv, "unknown and unimplemented methods", test_unimplemented);
    CU_add_test(srv, "max_inflight_calls -> RESOURCE_EXHAUSTED", test_inflight_limit);
    CU_add_test(srv, "oversized request -> INVALID_ARGUMENT", test_oversized_request);
    CU_add_test(srv, "no request message -> INVALID_ARGUMENT", test_no_message);
    CU_add_test(srv, "slotd_error_field over the wire", test_field_error_over_the_wire);
    CU_add_test(srv, "deadline", test_deadline);
    CU_add_test(srv, "health Check", test_health_check);
    CU_add_test(srv, "health Watch streams changes", test_health_watch);
    CU_pSuite strm = CU_add_suite("rpc_stream", suite_init, suite_clean);
    CU_add_test(strm, "1000 messages from another thread, then OK", test_stream_count);
    CU_add_test(strm, "client cancel while a thread sends", test_stream_cancel_while_sending);
    CU_add_test(strm, "queue bound: EFULL, nothing more queued", test_stream_queue_bound);
    CU_add_test(strm, "client cancel: on_close once, then ECLOSED", test_stream_client_cancel);
    CU_add_test(strm, "finish with an error: code and ErrorDetail", test_stream_fail);
    CU_add_test(strm, "client stream: frames in order, one at a time, OK", test_cstream_frames);
    CU_add_test(strm, "client stream: refused and oversized frames end it", test_cstream_refuse);
    CU_add_test(strm, "client stream: client cancel ends it once", test_cstream_cancel);
    CU_pSuite down = CU_add_suite("rpc_shutdown", NULL, NULL);
    CU_add_test(down, "shutdown with calls in flight", test_shutdown_in_flight);
    CU_add_test(down, "shutdown with open streams", test_stream_shutdown);
    CU_add_test(down, "bounded load, 32 in flight", test_load);
    CU_add_test(down, "start failure", test_start_failure);
    CU_add_test(down, "max_streams_per_conn, max_connections -> RESOURCE_EXHAUSTED",
                test_connection_limits);
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    int failed = CU_get_number_of_tests_failed() != 0;
    CU_cleanup_registry();
    return failed;
}
