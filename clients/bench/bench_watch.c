/* bench_watch.c - --watchers: watch streams read on their own completion queue, events counted. */
#include "bench_watch.h"

#include "bench_err.h"
#include "bench_wire.h"
#include "call.h"

#include <grpc/byte_buffer.h>
#include <grpc/support/time.h>

#include <assert.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* How often the watch thread wakes to see whether the run is over. */
#define WATCH_POLL_MS 50
/* While bench_watch_open() waits for the first messages, it looks this often. */
#define WATCH_OPEN_POLL_MS 5

enum watch_tag_kind { WATCH_TAG_MESSAGE, WATCH_TAG_STATUS };

struct watch_stream;

/* A completion queue tag: which stream, which of its two batches. */
struct watch_tag {
    struct watch_stream *st;
    enum watch_tag_kind kind;
};

/* One watch stream. Touched by the opening thread until the watch thread starts, then only
 * by the watch thread. */
struct watch_stream {
    struct bench_watch *pool;
    struct watch_tag message_tag, status_tag;
    /* batches started and not completed: the message batch (the first one also sends the
     * request) and the status batch; invariant: pending <= 2 */
    unsigned pending;
    bool status_done;
    bool first;       /* its first message arrived */
    bool ended_early; /* counted in pool->ended_early */
    /* the call (NULL once freed) and its batches' buffers; io.send, the request, is freed when
     * the first batch completes */
    struct slotd_call_io io;
    uint64_t events;       /* in the window */
    uint64_t events_total; /* while open */
    uint64_t messages;     /* in the window */
    uint64_t malformed;
};

struct bench_watch {
    const struct bench_opts *o;
    const grpc_metadata *token_md; /* NULL: none */
    grpc_completion_queue *cq;
    pthread_t thread;
    bool thread_started;
    struct watch_stream *streams;
    unsigned count;
    unsigned live;  /* streams whose call is not freed yet (watch thread) */
    bool cancelled; /* the watch thread cancelled every live stream (after stop) */
    atomic_bool stop;
    _Atomic unsigned settled; /* streams with their first message, or ended */
    _Atomic int64_t from_ns, until_ns;
    /* early ends (watch thread; read after the join) */
    unsigned ended_early, etcd_canceled;
    uint64_t ended_by_status[BENCH_STATUS_SLOTS];
    int64_t first_end_ns;
    char first_end_error[BENCH_WATCH_ERROR_LEN];
};

static int64_t watch_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* ---- one stream ----------------------------------------------------------------------- */

/* Records that st ended before the run was over; the first such end keeps its reason. */
static void watch_ended_early(struct watch_stream *st, unsigned code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void watch_ended_early(struct watch_stream *st, unsigned code, const char *fmt, ...)
{
    struct bench_watch *w = st->pool;
    if (st->ended_early)
        return;
    st->ended_early = true;
    w->ended_early++;
    if (code < BENCH_STATUS_SLOTS)
        w->ended_by_status[code]++;
    if (w->ended_early == 1) {
        w->first_end_ns = watch_now_ns();
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(w->first_end_error, sizeof(w->first_end_error), fmt, ap);
        va_end(ap);
    }
}

static void watch_arm_recv(struct watch_stream *st)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &st->io.recv;
    grpc_call_error rc = grpc_call_start_batch(st->io.call, &op, 1, &st->message_tag, NULL);
    assert(rc == GRPC_CALL_OK); /* one RECV_MESSAGE at a time: only a bug fails here */
    (void)rc;
    st->pending++;
}

/* Starts the call: the request (slotd: and the half-close; etcd keeps its send side open)
 * with the first RECV_MESSAGE, and the status batch. */
static void watch_stream_start(struct bench_watch *w, struct watch_stream *st, grpc_channel *ch,
                               const uint8_t *req, size_t req_len)
{
    const struct bench_opts *o = w->o;
    st->pool = w;
    st->message_tag = (struct watch_tag){st, WATCH_TAG_MESSAGE};
    st->status_tag = (struct watch_tag){st, WATCH_TAG_STATUS};
    grpc_slice slice = grpc_slice_from_copied_buffer((const char *)req, req_len);
    st->io.send = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    grpc_metadata_array_init(&st->io.initial_md);
    grpc_metadata_array_init(&st->io.trailing_md);
    st->io.details = grpc_empty_slice();
    /* no deadline: the stream lives until the run ends and cancels it */
    st->io.call =
        grpc_channel_create_call(ch, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
                                 grpc_slice_from_static_string(bench_wire_watch_method(o->target)),
                                 NULL, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);

    grpc_op ops[5];
    memset(ops, 0, sizeof(ops));
    size_t n = 0;
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    if (w->token_md) {
        ops[n].data.send_initial_metadata.count = 1;
        ops[n].data.send_initial_metadata.metadata = (grpc_metadata *)w->token_md;
    }
    n++;
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = st->io.send;
    if (o->target != BENCH_TARGET_ETCD)
        ops[n++].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[n].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[n++].data.recv_initial_metadata.recv_initial_metadata = &st->io.initial_md;
    ops[n].op = GRPC_OP_RECV_MESSAGE;
    ops[n++].data.recv_message.recv_message = &st->io.recv;
    grpc_call_error rc = grpc_call_start_batch(st->io.call, ops, n, &st->message_tag, NULL);
    assert(rc == GRPC_CALL_OK);
    st->pending++;

    grpc_op status_op;
    memset(&status_op, 0, sizeof(status_op));
    status_op.op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    status_op.data.recv_status_on_client.trailing_metadata = &st->io.trailing_md;
    status_op.data.recv_status_on_client.status = &st->io.status;
    status_op.data.recv_status_on_client.status_details = &st->io.details;
    rc = grpc_call_start_batch(st->io.call, &status_op, 1, &st->status_tag, NULL);
    assert(rc == GRPC_CALL_OK);
    (void)rc;
    st->pending++;
}

/* Frees the call once both batches are done. */
static void watch_stream_maybe_free(struct watch_stream *st)
{
    if (st->pending > 0 || !st->status_done || !st->io.call)
        return;
    slotd_call_io_release(&st->io);
    st->pool->live--;
}

/* Decodes and counts one message received at now. */
static void watch_count(struct watch_stream *st, int64_t now)
{
    struct bench_watch *w = st->pool;
    struct bench_watch_msg m;
    int rc = BENCH_EMALFORMED;
    grpc_slice slice;
    if (slotd_call_flatten(st->io.recv, &slice)) {
        rc = bench_wire_watch_decode(w->o->target, GRPC_SLICE_START_PTR(slice),
                                     GRPC_SLICE_LENGTH(slice), &m);
        grpc_slice_unref(slice);
    }
    bool in_window = now >= atomic_load(&w->from_ns) && now < atomic_load(&w->until_ns);
    if (rc != BENCH_OK) {
        st->malformed++;
        return;
    }
    st->events_total += m.events;
    if (in_window) {
        st->events += m.events;
        st->messages++;
    }
    if (m.canceled && !st->ended_early) {
        w->etcd_canceled++;
        watch_ended_early(st, BENCH_STATUS_SLOTS, "etcd canceled the watcher: %s",
                          m.cancel_reason[0] ? m.cancel_reason : "(no reason given)");
    }
}

static void watch_on_message(struct watch_stream *st, bool success, int64_t now)
{
    struct bench_watch *w = st->pool;
    st->pending--;
    if (st->io.send) {
        grpc_byte_buffer_destroy(st->io.send);
        st->io.send = NULL;
    }
    if (success && st->io.recv) {
        if (!st->first) {
            st->first = true;
            atomic_fetch_add(&w->settled, 1);
        }
        watch_count(st, now);
        grpc_byte_buffer_destroy(st->io.recv);
        st->io.recv = NULL;
        if (!w->cancelled)
            watch_arm_recv(st);
    }
    /* else the stream is over: its status batch says why */
    watch_stream_maybe_free(st);
}

static void watch_on_status(struct watch_stream *st, bool success)
{
    struct bench_watch *w = st->pool;
    st->pending--;
    st->status_done = true;
    unsigned code = success ? (unsigned)st->io.status : (unsigned)GRPC_STATUS_UNKNOWN;
    if (code >= BENCH_STATUS_OTHER)
        code = BENCH_STATUS_OTHER;
    /* after our cancel a stream ends CANCELLED; any other end is the server's (or the
     * network's) before the run was over */
    if (!w->cancelled || code != GRPC_STATUS_CANCELLED) {
        if (!st->first)
            atomic_fetch_add(&w->settled, 1);
        watch_ended_early(st, code, "%s: %.*s", bench_status_name(code),
                          (int)GRPC_SLICE_LENGTH(st->io.details),
                          (const char *)GRPC_SLICE_START_PTR(st->io.details));
    }
    watch_stream_maybe_free(st);
}

/* ---- the thread ----------------------------------------------------------------------- */

static void *watch_main(void *arg)
{
    struct bench_watch *w = arg;
    while (w->live > 0) {
        gpr_timespec wake = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(WATCH_POLL_MS, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(w->cq, wake, NULL);
        if (ev.type == GRPC_OP_COMPLETE) {
            struct watch_tag *t = ev.tag;
            if (t->kind == WATCH_TAG_MESSAGE)
                watch_on_message(t->st, ev.success != 0, watch_now_ns());
            else
                watch_on_status(t->st, ev.success != 0);
        }
        if (!w->cancelled && atomic_load(&w->stop)) {
            w->cancelled = true;
            for (unsigned i = 0; i < w->count; i++)
                if (w->streams[i].io.call)
                    grpc_call_cancel(w->streams[i].io.call, NULL);
        }
    }
    return NULL;
}

/* ---- the pool ------------------------------------------------------------------------- */

int bench_watch_open(struct bench_watch **out, const struct bench_opts *o,
                     grpc_channel *const *channels, size_t channel_count,
                     const grpc_metadata *token_md, char *errmsg, size_t errmsg_len)
{
    *out = NULL;
    struct bench_watch *w = calloc(1, sizeof(*w));
    if (!w)
        goto err_after_nothing;
    w->streams = calloc(o->watchers, sizeof(*w->streams));
    if (!w->streams)
        goto err_after_pool;
    w->o = o;
    w->token_md = token_md;
    w->count = o->watchers;
    atomic_init(&w->stop, false);
    atomic_init(&w->settled, 0);
    atomic_init(&w->from_ns, INT64_MAX); /* nothing counted before the window opens */
    atomic_init(&w->until_ns, INT64_MAX);
    w->cq = grpc_completion_queue_create_for_next(NULL);

    const uint8_t *prefix = (const uint8_t *)BENCH_WIRE_WATCH_PREFIX;
    size_t prefix_len = strlen(BENCH_WIRE_WATCH_PREFIX);
    uint8_t req[64];
    size_t req_len =
        bench_wire_watch_request_encode(o->target, prefix, prefix_len, req, sizeof(req));
    assert(req_len <= sizeof(req));
    for (unsigned i = 0; i < w->count; i++) {
        watch_stream_start(w, &w->streams[i], channels[i % channel_count], req, req_len);
        w->live++;
    }
    if (pthread_create(&w->thread, NULL, watch_main, w) == 0) {
        w->thread_started = true;
    } else {
        /* no thread to read them: end the streams here and report that */
        atomic_store(&w->stop, true);
        watch_main(w);
    }

    int64_t give_up = watch_now_ns() + (int64_t)o->connect_timeout_ms * 1000000;
    struct timespec nap = {0, WATCH_OPEN_POLL_MS * 1000000L};
    while (w->thread_started && atomic_load(&w->settled) < w->count && watch_now_ns() < give_up)
        while (nanosleep(&nap, NULL) == -1 && errno == EINTR) {
        }
    *out = w;
    return BENCH_OK;

err_after_pool:
    free(w);
err_after_nothing:
    snprintf(errmsg, errmsg_len, "out of memory for %u watch streams", o->watchers);
    return BENCH_ENOMEM;
}

void bench_watch_window(struct bench_watch *w, int64_t from_ns, int64_t until_ns)
{
    atomic_store(&w->until_ns, until_ns);
    atomic_store(&w->from_ns, from_ns);
}

static int watch_cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Totals and per-stream rates of the window into *r. */
static void watch_result(const struct bench_watch *w, struct bench_watch_result *r)
{
    memset(r, 0, sizeof(*r));
    int64_t from = atomic_load(&w->from_ns), until = atomic_load(&w->until_ns);
    bool opened = from != INT64_MAX && until > from;
    r->watchers = w->count;
    r->elapsed_s = opened ? (double)(until - from) / 1e9 : 0.0;
    double *rates = calloc(w->count ? w->count : 1, sizeof(*rates));
    for (unsigned i = 0; i < w->count; i++) {
        const struct watch_stream *st = &w->streams[i];
        r->events += st->events;
        r->events_total += st->events_total;
        r->messages += st->messages;
        r->malformed += st->malformed;
        if (rates)
            rates[i] = r->elapsed_s > 0.0 ? (double)st->events / r->elapsed_s : 0.0;
    }
    r->events_per_s = r->elapsed_s > 0.0 ? (double)r->events / r->elapsed_s : 0.0;
    if (rates && w->count) {
        qsort(rates, w->count, sizeof(*rates), watch_cmp_double);
        unsigned mid = w->count / 2;
        r->per_watcher_median = w->count % 2 ? rates[mid] : (rates[mid - 1] + rates[mid]) / 2.0;
        r->per_watcher_min = rates[0];
        r->per_watcher_max = rates[w->count - 1];
    }
    free(rates);
    r->ended_early = w->ended_early;
    r->etcd_canceled = w->etcd_canceled;
    memcpy(r->ended_by_status, w->ended_by_status, sizeof(r->ended_by_status));
    if (w->ended_early) {
        int64_t base = from != INT64_MAX ? from : w->first_end_ns;
        r->first_end_s = (double)(w->first_end_ns - base) / 1e9;
        snprintf(r->first_end_error, sizeof(r->first_end_error), "%s", w->first_end_error);
    }
}

void bench_watch_close(struct bench_watch *w, struct bench_watch_result *r)
{
    unsigned created = 0;
    atomic_store(&w->stop, true);
    if (w->thread_started)
        pthread_join(w->thread, NULL);
    assert(w->live == 0);
    for (unsigned i = 0; i < w->count; i++)
        created += w->streams[i].first;
    slotd_call_cq_destroy(w->cq);
    watch_result(w, r);
    r->created = created;
    free(w->streams);
    free(w);
}
