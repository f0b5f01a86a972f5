/* bench_run.c - closed-loop load: each completion on a thread's queue issues the next call. */
#include "bench_run.h"

#include "bench_err.h"
#include "bench_wire.h"

#include <grpc/byte_buffer.h>
#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
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
#include <sys/resource.h>
#include <time.h>

/* --populate gives up after this long (it is reported as incomplete, not as a failure). */
#define RUN_POPULATE_S_MAX 600.0
/* How often an idle worker wakes to check the clock. */
#define RUN_POLL_MS 50
#define RUN_REQ_KINDS 4

enum { RUN_METHOD_PUT, RUN_METHOD_READ, RUN_METHODS };

struct run_channel {
    grpc_channel *channel;
    void *method[RUN_METHODS]; /* registered call handles, owned by the channel */
};

/* What every worker of one phase reads; only the atomics change while workers run. */
struct run_shared {
    const struct bench_opts *o;
    struct run_channel *channels;
    size_t channel_count;
    const uint8_t *value;
    size_t req_size[RUN_REQ_KINDS]; /* encoded size per request kind: keys have a fixed size */
    bool populate;                  /* this phase puts key 0..keys-1 once each */
    uint64_t issue_limit;           /* measured calls to issue (populate: keys), 0 = unbounded */
    int64_t measure_start_ns;
    _Atomic int64_t measure_end_ns; /* set to 0 to stop early */
    _Atomic uint64_t issued;        /* measured calls issued (populate: next key index) */
};

struct run_worker;

/* One in-flight request slot; reused for the next call when its call completes. */
struct run_call {
    struct run_worker *w;
    grpc_call *call; /* NULL while the slot is idle */
    enum bench_req req;
    bool measured;
    int64_t start_ns;
    grpc_byte_buffer *send;
    grpc_byte_buffer *recv;
    grpc_metadata_array initial_md;
    grpc_metadata_array trailing_md;
    grpc_status_code status;
    grpc_slice details;
};

struct run_worker {
    struct run_shared *s;
    pthread_t thread;
    grpc_completion_queue *cq;
    struct run_call *calls;
    unsigned call_count;
    unsigned inflight; /* invariant: inflight == number of calls[i].call != NULL */
    uint64_t rng;
    size_t next_channel;
    char *key; /* key_size + 1 bytes */
    int64_t last_done_ns;
    struct bench_phase phase;
};

static const char *const status_names[BENCH_STATUS_SLOTS] = {
    "OK",
    "CANCELLED",
    "UNKNOWN",
    "INVALID_ARGUMENT",
    "DEADLINE_EXCEEDED",
    "NOT_FOUND",
    "ALREADY_EXISTS",
    "PERMISSION_DENIED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "ABORTED",
    "OUT_OF_RANGE",
    "UNIMPLEMENTED",
    "INTERNAL",
    "UNAVAILABLE",
    "DATA_LOSS",
    "UNAUTHENTICATED",
    "OTHER",
};

const char *bench_status_name(unsigned code)
{
    return code < BENCH_STATUS_SLOTS ? status_names[code] : "OTHER";
}

static int run_fail(char *errmsg, size_t errmsg_len, int err, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

static int run_fail(char *errmsg, size_t errmsg_len, int err, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(errmsg, errmsg_len, fmt, ap);
    va_end(ap);
    return err;
}

static int64_t run_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static double run_cpu_s(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static uint64_t run_splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

/* ---- one call ------------------------------------------------------------------------- */

/* Chooses the next call of this slot; false when the phase issues no more. */
static bool run_next(struct run_worker *w, int64_t now, struct run_call *c, uint64_t *key_index)
{
    struct run_shared *s = w->s;
    const struct bench_opts *o = s->o;
    if (now >= atomic_load(&s->measure_end_ns))
        return false;
    c->measured = now >= s->measure_start_ns;
    if (s->populate) {
        *key_index = atomic_fetch_add(&s->issued, 1);
        c->req = BENCH_REQ_PUT;
        return *key_index < s->issue_limit;
    }
    if (c->measured && s->issue_limit && atomic_fetch_add(&s->issued, 1) >= s->issue_limit)
        return false;
    *key_index = run_splitmix(&w->rng) % o->keys;
    if (o->op != BENCH_OP_MIXED) {
        c->req = bench_wire_req_of(o->op);
    } else {
        double draw = (double)(run_splitmix(&w->rng) >> 11) / 9007199254740992.0; /* [0,1) */
        c->req = draw < o->read_ratio ? bench_wire_req_of(o->read_op) : BENCH_REQ_PUT;
    }
    return true;
}

/* Starts the slot's next call, or leaves the slot idle when the phase is over. */
static void run_issue(struct run_worker *w, struct run_call *c, int64_t now)
{
    struct run_shared *s = w->s;
    const struct bench_opts *o = s->o;
    uint64_t key_index = 0;
    if (!run_next(w, now, c, &key_index))
        return;

    bench_wire_key_format(w->key, o->key_size, key_index);
    size_t size = s->req_size[c->req];
    grpc_slice slice = grpc_slice_malloc(size);
    size_t n =
        bench_wire_request_encode(o->target, c->req, (const uint8_t *)w->key, o->key_size, s->value,
                                  o->value_size, GRPC_SLICE_START_PTR(slice), size);
    assert(n == size);
    (void)n;
    c->send = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);

    struct run_channel *ch = &s->channels[w->next_channel++ % s->channel_count];
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(o->deadline_ms, GPR_TIMESPAN));
    c->call = grpc_channel_create_registered_call(
        ch->channel, NULL, GRPC_PROPAGATE_DEFAULTS, w->cq,
        ch->method[c->req == BENCH_REQ_PUT ? RUN_METHOD_PUT : RUN_METHOD_READ], deadline, NULL);
    c->recv = NULL;
    grpc_metadata_array_init(&c->initial_md);
    grpc_metadata_array_init(&c->trailing_md);
    c->details = grpc_empty_slice();
    c->start_ns = now;

    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = c->send;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &c->initial_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &c->recv;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &c->trailing_md;
    ops[5].data.recv_status_on_client.status = &c->status;
    ops[5].data.recv_status_on_client.status_details = &c->details;
    grpc_call_error rc = grpc_call_start_batch(c->call, ops, 6, c, NULL);
    /* Only a malformed batch fails here: a programmer error. */
    assert(rc == GRPC_CALL_OK);
    (void)rc;
    w->inflight++;
}

/* Decodes an OK response; false when it is missing or not the expected message. */
static bool run_response_ok(const struct run_worker *w, const struct run_call *c, bool *found)
{
    grpc_byte_buffer_reader reader;
    if (!c->recv || !grpc_byte_buffer_reader_init(&reader, c->recv))
        return false;
    grpc_slice slice = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    int rc = bench_wire_response_check(w->s->o->target, c->req, GRPC_SLICE_START_PTR(slice),
                                       GRPC_SLICE_LENGTH(slice), found);
    grpc_slice_unref(slice);
    return rc == BENCH_OK;
}

/* Counts the slotd.v1.ErrorCode a failed call carries in its trailer, if any. */
static void run_count_detail(const struct run_call *c, struct bench_phase *p)
{
    for (size_t i = 0; i < c->trailing_md.count; i++) {
        const grpc_metadata *md = &c->trailing_md.metadata[i];
        unsigned detail = 0;
        if (grpc_slice_str_cmp(md->key, "grpc-status-details-bin") == 0 &&
            bench_wire_error_detail(GRPC_SLICE_START_PTR(md->value), GRPC_SLICE_LENGTH(md->value),
                                    &detail) == BENCH_OK) {
            p->error_detail[detail]++;
            return;
        }
    }
}

/* Counts a finished call (when it belongs to the measured window) and frees it. */
static void run_complete(struct run_worker *w, struct run_call *c, bool success, int64_t now)
{
    unsigned code = success ? (unsigned)c->status : (unsigned)GRPC_STATUS_UNKNOWN;
    if (code >= BENCH_STATUS_OTHER)
        code = BENCH_STATUS_OTHER;
    bool found = true;
    bool ok = code == GRPC_STATUS_OK && run_response_ok(w, c, &found);
    struct bench_phase *p = &w->phase;

    if (c->measured && now <= atomic_load(&w->s->measure_end_ns)) {
        p->status[code]++;
        if (ok) {
            p->ok++;
            bench_hist_record(&p->latency_ns, (uint64_t)(now - c->start_ns));
            if (c->req == BENCH_REQ_PUT)
                p->writes++;
            else
                p->reads++;
            if (!found)
                p->not_found++;
        } else {
            p->errors++;
            if (code == GRPC_STATUS_OK)
                p->malformed++;
            else
                run_count_detail(c, p);
        }
        w->last_done_ns = now;
    }

    grpc_byte_buffer_destroy(c->send);
    if (c->recv)
        grpc_byte_buffer_destroy(c->recv);
    grpc_metadata_array_destroy(&c->initial_md);
    grpc_metadata_array_destroy(&c->trailing_md);
    grpc_slice_unref(c->details);
    grpc_call_unref(c->call);
    c->call = NULL;
    c->send = NULL;
    c->recv = NULL;
    w->inflight--;
}

/* ---- one worker thread ---------------------------------------------------------------- */

static void *run_worker_main(void *arg)
{
    struct run_worker *w = arg;
    struct run_shared *s = w->s;
    int64_t now = run_now_ns();
    for (unsigned i = 0; i < w->call_count; i++)
        run_issue(w, &w->calls[i], now);

    bool cancelled = false;
    while (w->inflight > 0) {
        gpr_timespec wake = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(RUN_POLL_MS, GPR_TIMESPAN));
        grpc_event ev = grpc_completion_queue_next(w->cq, wake, NULL);
        now = run_now_ns();
        if (ev.type == GRPC_OP_COMPLETE) {
            struct run_call *c = ev.tag;
            run_complete(w, c, ev.success != 0, now);
            run_issue(w, c, now);
        }
        /* Past the end: calls still in flight are not counted; cancel them to finish now. */
        if (!cancelled && now >= atomic_load(&s->measure_end_ns)) {
            for (unsigned i = 0; i < w->call_count; i++)
                if (w->calls[i].call)
                    grpc_call_cancel(w->calls[i].call, NULL);
            cancelled = true;
        }
    }
    return NULL;
}

static void run_worker_free(struct run_worker *w)
{
    if (w->cq) {
        grpc_completion_queue_shutdown(w->cq);
        while (grpc_completion_queue_next(w->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
        grpc_completion_queue_destroy(w->cq);
    }
    free(w->calls);
    free(w->key);
}

static int run_worker_init(struct run_worker *w, struct run_shared *s, unsigned index,
                           unsigned call_count, uint64_t seed)
{
    memset(w, 0, sizeof(*w));
    w->s = s;
    w->call_count = call_count;
    w->next_channel = index;
    w->rng = seed;
    bench_hist_init(&w->phase.latency_ns);
    w->calls = calloc(call_count, sizeof(*w->calls));
    w->key = malloc((size_t)s->o->key_size + 1);
    if (!w->calls || !w->key)
        return BENCH_ENOMEM;
    for (unsigned i = 0; i < call_count; i++)
        w->calls[i].w = w;
    w->cq = grpc_completion_queue_create_for_next(NULL);
    return BENCH_OK;
}

/* ---- one phase ------------------------------------------------------------------------ */

static void run_phase_merge(struct bench_phase *dst, const struct run_worker *w)
{
    const struct bench_phase *p = &w->phase;
    bench_hist_merge(&dst->latency_ns, &p->latency_ns);
    dst->ok += p->ok;
    dst->reads += p->reads;
    dst->writes += p->writes;
    dst->not_found += p->not_found;
    dst->malformed += p->malformed;
    dst->errors += p->errors;
    for (unsigned i = 0; i < BENCH_STATUS_SLOTS; i++)
        dst->status[i] += p->status[i];
    for (unsigned i = 0; i < BENCH_DETAIL_SLOTS; i++)
        dst->error_detail[i] += p->error_detail[i];
}

/* Starts the threads, waits for them and fills *out. Phase timing is set by the caller. */
static int run_phase_threads(struct run_shared *s, struct run_worker *workers, unsigned threads,
                             struct bench_phase *out, char *errmsg, size_t errmsg_len)
{
    unsigned started = 0;
    int rc = BENCH_OK;
    for (; started < threads; started++) {
        if (pthread_create(&workers[started].thread, NULL, run_worker_main, &workers[started]) !=
            0) {
            atomic_store(&s->measure_end_ns, 0); /* stop the threads already running */
            rc = run_fail(errmsg, errmsg_len, BENCH_ETHREAD,
                          "client thread %u: pthread_create failed", started);
            break;
        }
    }
    int64_t now = run_now_ns();
    if (rc == BENCH_OK && now < s->measure_start_ns) {
        struct timespec until = {(time_t)(s->measure_start_ns / 1000000000),
                                 (long)(s->measure_start_ns % 1000000000)};
        while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &until, NULL) == EINTR) {
        }
    }
    int64_t cpu_from_ns = run_now_ns();
    double cpu_from = run_cpu_s();
    int64_t last_done = s->measure_start_ns;
    for (unsigned i = 0; i < started; i++) {
        pthread_join(workers[i].thread, NULL);
        run_phase_merge(out, &workers[i]);
        if (workers[i].last_done_ns > last_done)
            last_done = workers[i].last_done_ns;
    }
    out->cpu_s = run_cpu_s() - cpu_from;
    out->cpu_wall_s = (double)(run_now_ns() - cpu_from_ns) / 1e9;
    /* Ended by count: the time to the last counted completion; else the whole window. */
    bool by_count = s->issue_limit && atomic_load(&s->issued) >= s->issue_limit;
    int64_t end = by_count ? last_done : atomic_load(&s->measure_end_ns);
    out->elapsed_s = end > s->measure_start_ns ? (double)(end - s->measure_start_ns) / 1e9 : 0.0;
    return rc;
}

static int run_phase(struct run_shared *s, double warmup_s, double duration_s, uint64_t seed_salt,
                     struct bench_phase *out, char *errmsg, size_t errmsg_len)
{
    const struct bench_opts *o = s->o;
    unsigned threads = o->threads;
    memset(out, 0, sizeof(*out));
    bench_hist_init(&out->latency_ns);
    struct run_worker *workers = calloc(threads, sizeof(*workers));
    if (!workers)
        return run_fail(errmsg, errmsg_len, BENCH_ENOMEM, "out of memory for %u workers", threads);

    int rc = BENCH_OK;
    unsigned ready = 0;
    uint64_t seed = o->seed ^ seed_salt;
    for (; ready < threads; ready++) {
        unsigned share = o->concurrency / threads + (ready < o->concurrency % threads ? 1 : 0);
        rc = run_worker_init(&workers[ready], s, ready, share, run_splitmix(&seed));
        if (rc != BENCH_OK) {
            run_fail(errmsg, errmsg_len, rc, "client thread %u: out of memory", ready);
            ready++; /* its partial allocations are freed below */
            goto err_after_workers;
        }
    }
    atomic_store(&s->issued, 0);
    s->measure_start_ns = run_now_ns() + (int64_t)(warmup_s * 1e9);
    atomic_store(&s->measure_end_ns, s->measure_start_ns + (int64_t)(duration_s * 1e9));
    rc = run_phase_threads(s, workers, threads, out, errmsg, errmsg_len);

err_after_workers:
    for (unsigned i = 0; i < ready; i++)
        run_worker_free(&workers[i]);
    free(workers);
    return rc;
}

/* ---- channels ------------------------------------------------------------------------- */

static int run_channels_open(struct run_shared *s)
{
    const struct bench_opts *o = s->o;
    s->channel_count = (size_t)o->endpoint_count * o->connections;
    s->channels = calloc(s->channel_count, sizeof(*s->channels));
    if (!s->channels)
        return BENCH_ENOMEM;
    /* A local subchannel pool gives each channel its own TCP connection; no retries so each
     * call is exactly one RPC on the wire. */
    grpc_arg args[2] = {
        {.type = GRPC_ARG_INTEGER,
         .key = (char *)GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL,
         .value.integer = 1},
        {.type = GRPC_ARG_INTEGER, .key = (char *)GRPC_ARG_ENABLE_RETRIES, .value.integer = 0},
    };
    grpc_channel_args channel_args = {2, args};
    grpc_channel_credentials *creds = grpc_insecure_credentials_create();
    for (size_t i = 0; i < s->channel_count; i++) {
        /* Endpoints alternate, so round robin over channels is round robin over endpoints. */
        const char *target = o->endpoints[i % o->endpoint_count];
        struct run_channel *ch = &s->channels[i];
        ch->channel = grpc_channel_create(target, creds, &channel_args);
        ch->method[RUN_METHOD_PUT] = grpc_channel_register_call(
            ch->channel, bench_wire_method(o->target, BENCH_REQ_PUT), NULL, NULL);
        ch->method[RUN_METHOD_READ] = grpc_channel_register_call(
            ch->channel, bench_wire_method(o->target, BENCH_REQ_GET_LINEARIZABLE), NULL, NULL);
    }
    grpc_channel_credentials_release(creds);
    return BENCH_OK;
}

static void run_channels_close(struct run_shared *s)
{
    for (size_t i = 0; i < s->channel_count; i++)
        grpc_channel_destroy(s->channels[i].channel);
    free(s->channels);
    s->channels = NULL;
}

static const char *run_state_name(grpc_connectivity_state st)
{
    switch (st) {
    case GRPC_CHANNEL_IDLE:
        return "idle";
    case GRPC_CHANNEL_CONNECTING:
        return "connecting";
    case GRPC_CHANNEL_READY:
        return "ready";
    case GRPC_CHANNEL_TRANSIENT_FAILURE:
        return "transient failure";
    default:
        return "shut down";
    }
}

/* Waits until every channel is READY; a failed attempt or the timeout is BENCH_ECONNECT. */
static int run_channels_connect(struct run_shared *s, char *errmsg, size_t errmsg_len)
{
    const struct bench_opts *o = s->o;
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    gpr_timespec deadline = gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC),
                                         gpr_time_from_millis(o->connect_timeout_ms, GPR_TIMESPAN));
    int rc = BENCH_OK;
    for (size_t i = 0; i < s->channel_count && rc == BENCH_OK; i++) {
        grpc_channel *ch = s->channels[i].channel;
        grpc_connectivity_state st = grpc_channel_check_connectivity_state(ch, 1);
        while (st != GRPC_CHANNEL_READY) {
            if (st == GRPC_CHANNEL_TRANSIENT_FAILURE || st == GRPC_CHANNEL_SHUTDOWN) {
                rc = run_fail(errmsg, errmsg_len, BENCH_ECONNECT, "connect %s: %s",
                              o->endpoints[i % o->endpoint_count], run_state_name(st));
                break;
            }
            grpc_channel_watch_connectivity_state(ch, st, deadline, cq, NULL);
            grpc_event ev =
                grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
            if (!ev.success) {
                rc = run_fail(
                    errmsg, errmsg_len, BENCH_ECONNECT, "connect %s: still %s after %u ms",
                    o->endpoints[i % o->endpoint_count], run_state_name(st), o->connect_timeout_ms);
                break;
            }
            st = grpc_channel_check_connectivity_state(ch, 0);
        }
    }
    grpc_completion_queue_shutdown(cq);
    while (grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
           GRPC_QUEUE_SHUTDOWN) {
    }
    grpc_completion_queue_destroy(cq);
    return rc;
}

/* ---- the whole run -------------------------------------------------------------------- */

static int run_populate_and_measure(struct run_shared *s, struct bench_result *r, char *errmsg,
                                    size_t errmsg_len)
{
    const struct bench_opts *o = s->o;
    if (o->populate) {
        s->populate = true;
        s->issue_limit = o->keys;
        int rc = run_phase(s, 0.0, RUN_POPULATE_S_MAX, 0x706f70756c617465ull, &r->populate, errmsg,
                           errmsg_len);
        if (rc != BENCH_OK)
            return rc;
        r->populate_keys = r->populate.ok;
    }
    s->populate = false;
    s->issue_limit = o->ops;
    return run_phase(s, o->warmup_s, o->duration_s, 0, &r->run, errmsg, errmsg_len);
}

int bench_run_execute(const struct bench_opts *o, struct bench_result *r, char *errmsg,
                      size_t errmsg_len)
{
    memset(r, 0, sizeof(*r));
    bench_hist_init(&r->run.latency_ns);
    bench_hist_init(&r->populate.latency_ns);
    struct run_shared s;
    memset(&s, 0, sizeof(s));
    s.o = o;
    for (int k = 0; k < RUN_REQ_KINDS; k++) {
        if (o->target == BENCH_TARGET_ETCD && k == BENCH_REQ_GET_LEADER_LOCAL)
            continue; /* never sent to etcd */
        s.req_size[k] = bench_wire_request_encode(o->target, (enum bench_req)k, NULL, o->key_size,
                                                  NULL, o->value_size, NULL, 0);
    }
    int rc = BENCH_ENOMEM;
    uint8_t *value = malloc(o->value_size ? o->value_size : 1);
    if (!value) {
        run_fail(errmsg, errmsg_len, rc, "out of memory for a %u byte value", o->value_size);
        goto err_after_nothing;
    }
    uint64_t x = o->seed;
    for (unsigned i = 0; i < o->value_size; i++)
        value[i] = (uint8_t)('a' + run_splitmix(&x) % 26);
    s.value = value;

    grpc_init();
    rc = run_channels_open(&s);
    if (rc != BENCH_OK) {
        run_fail(errmsg, errmsg_len, rc, "out of memory for channels");
        goto err_after_init;
    }
    rc = run_channels_connect(&s, errmsg, errmsg_len);
    if (rc != BENCH_OK)
        goto err_after_channels;
    rc = run_populate_and_measure(&s, r, errmsg, errmsg_len);

err_after_channels:
    run_channels_close(&s);
err_after_init:
    grpc_shutdown();
    free(value);
err_after_nothing:
    return rc;
}
