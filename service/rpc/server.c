/* server.c - gRPC core server: method table, completion-queue threads, call dispatch, shutdown. */
#include <assert.h>
#include <dlfcn.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <sys/prctl.h>

#include "service/log/log.h"
#include "descset.h"
#include "rpc_internal.h"
#include "service/net/net.h"
#include "slotd/v1/metadata.pb-c.h"

#define RPC__DEFAULT_MAX_INFLIGHT 4096
#define RPC__DEFAULT_MAX_REQUEST_BYTES (4u << 20)
#define RPC__DEFAULT_MAX_STREAMS_PER_CONN 1024
#define RPC__DEFAULT_MAX_CONNECTIONS 1024
#define RPC__DEFAULT_CONN_IDLE_MS 60000

/* An armed grpc_server_request_call / request_registered_call. */
struct rpc__request {
    struct rpc__tag tag;
    struct rpc_server *server;
    struct rpc__method *method; /* NULL: generic (unregistered path) */
    grpc_call *call;
    gpr_timespec deadline;
    grpc_metadata_array md;
    grpc_byte_buffer *payload;
    grpc_call_details details; /* generic only */
};

void rpc_server_options_default(struct rpc_server_options *o)
{
    o->listen_addr = "127.0.0.1:7700";
    o->max_inflight_calls = RPC__DEFAULT_MAX_INFLIGHT;
    o->max_request_bytes = RPC__DEFAULT_MAX_REQUEST_BYTES;
    o->cq_threads = 1;
    o->max_streams_per_conn = RPC__DEFAULT_MAX_STREAMS_PER_CONN;
    o->max_connections = RPC__DEFAULT_MAX_CONNECTIONS;
    o->conn_idle_ms = RPC__DEFAULT_CONN_IDLE_MS;
    o->metrics = NULL;
    o->tls_cert_pem = NULL;
    o->tls_key_pem = NULL;
    o->tls_ca_pem = NULL;
    o->tls_client_auth = false;
    o->peer_plane = false;
}

/* *dst = a copy of src (NULL stays NULL); false on ENOMEM. */
static bool pem_copy(const char *src, char **dst)
{
    *dst = NULL;
    if (src == NULL) {
        return true;
    }
    *dst = strdup(src);
    return *dst != NULL;
}

static void tls_free(struct rpc_server *s)
{
    free(s->tls_cert_pem);
    free(s->tls_key_pem);
    free(s->tls_ca_pem);
    s->tls_cert_pem = s->tls_key_pem = s->tls_ca_pem = NULL;
}

static const char *const rpc__grpc_code_names[RPC__GRPC_CODES] = {
    "OK",        "CANCELLED",      "UNKNOWN",           "INVALID_ARGUMENT",   "DEADLINE_EXCEEDED",
    "NOT_FOUND", "ALREADY_EXISTS", "PERMISSION_DENIED", "RESOURCE_EXHAUSTED", "FAILED_PRECONDITION",
    "ABORTED",   "OUT_OF_RANGE",   "UNIMPLEMENTED",     "INTERNAL",           "UNAVAILABLE",
    "DATA_LOSS", "UNAUTHENTICATED"};

/* The two request families; without them (no registry, or it is full) nothing is counted. */
static void metrics_families_new(struct rpc_server *s)
{
    const char *both[] = {"method", "code"}, *method[] = {"method"};
    if (s->opts.metrics == NULL)
        return;
    if (metrics_counter_family_new(s->opts.metrics, "slotd_grpc_requests_total",
                                   "Unary gRPC calls finished, by method and status code.", 2, both,
                                   &s->m_requests) != METRICS_OK ||
        metrics_histogram_family_new(
            s->opts.metrics, "slotd_grpc_request_duration_seconds",
            "Time from dispatch to the final status of unary gRPC calls, by method.", 1, method,
            metrics_latency_bounds, metrics_latency_bounds_len, &s->m_latency) != METRICS_OK ||
        metrics_counter_family_new(s->opts.metrics, "slotd_grpc_stream_frames_total",
                                   "Frames of client-streaming calls handed to their handler, by "
                                   "method and result (accepted or refused).",
                                   2, (const char *[]){"method", "result"},
                                   &s->m_frames) != METRICS_OK ||
        metrics_counter_family_new(s->opts.metrics, "slotd_grpc_streams_total",
                                   "Server-streaming gRPC calls (Metadata/Watch, Admin/Backup) "
                                   "that ended with a final status, by method and status code.",
                                   2, both, &s->m_streams) != METRICS_OK) {
        slog("warn", "rpc", "msg=\"grpc metrics not registered\"");
        s->m_requests = NULL;
        s->m_latency = NULL;
        s->m_frames = NULL;
        s->m_streams = NULL;
    }
}

void rpc__stream_record(struct rpc_server *s, struct rpc_call *c, grpc_status_code code)
{
    struct rpc__method_metrics *mm = c->metrics;
    if (mm == NULL || s->m_streams == NULL)
        return;
    unsigned i = (unsigned)code < RPC__GRPC_CODES ? (unsigned)code : GRPC_STATUS_UNKNOWN;
    struct metrics_counter *ctr =
        atomic_load_explicit(&mm->streams_by_code[i], memory_order_acquire);
    if (ctr == NULL) {
        const char *values[] = {mm->label, rpc__grpc_code_names[i]};
        ctr = metrics_counter_get(s->m_streams, values);
        atomic_store_explicit(&mm->streams_by_code[i], ctr, memory_order_release);
    }
    metrics_counter_add(ctr, 1);
}

void rpc__frame_record(struct rpc_server *s, struct rpc_call *c, bool accepted)
{
    struct rpc__method_metrics *mm = c->metrics;
    if (mm == NULL || s->m_frames == NULL)
        return;
    struct metrics_counter *ctr =
        atomic_load_explicit(&mm->frames[!accepted], memory_order_acquire);
    if (ctr == NULL) {
        const char *values[] = {mm->label, accepted ? "accepted" : "refused"};
        ctr = metrics_counter_get(s->m_frames, values);
        atomic_store_explicit(&mm->frames[!accepted], ctr, memory_order_release);
    }
    metrics_counter_add(ctr, 1);
}

/* Fixes the label of one method's series (at start; the series appear on first use). */
static void method_metrics_init(struct rpc__method_metrics *mm, const char *path)
{
    snprintf(mm->label, sizeof(mm->label), "%s", path[0] == '/' ? path + 1 : path);
}

/* Counts a finished call and its latency (any thread: atomics, plus the registry mutex the first
 * time a method ends with a given code). */
static void call_record(struct rpc_server *s, struct rpc_call *c, grpc_status_code code)
{
    struct rpc__method_metrics *mm = c->metrics;
    unsigned i = (unsigned)code < RPC__GRPC_CODES ? (unsigned)code : GRPC_STATUS_UNKNOWN;
    struct metrics_counter *ctr = atomic_load_explicit(&mm->by_code[i], memory_order_acquire);
    if (ctr == NULL) {
        const char *values[] = {mm->label, rpc__grpc_code_names[i]};
        ctr = metrics_counter_get(s->m_requests, values);
        atomic_store_explicit(&mm->by_code[i], ctr, memory_order_release);
    }
    struct metrics_histogram *h = atomic_load_explicit(&mm->latency, memory_order_acquire);
    if (h == NULL) {
        const char *values[] = {mm->label};
        h = metrics_histogram_get(s->m_latency, values);
        atomic_store_explicit(&mm->latency, h, memory_order_release);
    }
    metrics_counter_add(ctr, 1);
    metrics_histogram_observe(h, metrics_now_seconds() - c->start_s);
}

static struct rpc__method *method_find(struct rpc_server *s, const char *path)
{
    for (size_t i = 0; i < s->n_methods; i++) {
        if (strcmp(s->methods[i].path, path) == 0) {
            return &s->methods[i];
        }
    }
    return NULL;
}

/* The method with this path, added (without handler) if new; NULL when the table is full or the
 * path too long. */
static struct rpc__method *method_get(struct rpc_server *s, const char *path)
{
    assert(!s->started);
    struct rpc__method *m = method_find(s, path);
    if (m != NULL) {
        return m;
    }
    if (s->n_methods == RPC_METHODS_MAX || strlen(path) >= RPC_METHOD_PATH_MAX) {
        return NULL;
    }
    m = &s->methods[s->n_methods++];
    memset(m, 0, sizeof(*m));
    snprintf(m->path, sizeof(m->path), "%s", path);
    m->kind = RPC__METHOD_UNARY;
    m->counted = true;
    return m;
}

int rpc_server_add_service(struct rpc_server *s, const ProtobufCServiceDescriptor *service)
{
    for (unsigned i = 0; i < service->n_methods; i++) {
        char path[RPC_METHOD_PATH_MAX];
        int n = snprintf(path, sizeof(path), "/%s/%s", service->name, service->methods[i].name);
        if (n < 0 || (size_t)n >= sizeof(path) || method_get(s, path) == NULL) {
            return SLOTD_EINVALID_FIELD;
        }
    }
    return SLOTD_OK;
}

int rpc_server_add_unary(struct rpc_server *s, const char *method, rpc_unary_cb cb, void *ctx)
{
    struct rpc__method *m = method_get(s, method);
    if (m == NULL) {
        return SLOTD_EINVALID_FIELD;
    }
    m->kind = RPC__METHOD_UNARY;
    m->cb = cb;
    m->ctx = ctx;
    return SLOTD_OK;
}

/* The method with this path (added if new) made a streaming method of kind with ctx, counted
 * against max_inflight_calls and without a unary handler; NULL as method_get. */
static struct rpc__method *stream_method_get(struct rpc_server *s, const char *path,
                                             enum rpc__method_kind kind, void *ctx)
{
    struct rpc__method *m = method_get(s, path);
    if (m != NULL) {
        m->kind = kind;
        m->cb = NULL;
        m->ctx = ctx;
        m->counted = true;
    }
    return m;
}

int rpc_server_add_client_stream(struct rpc_server *s, const char *method,
                                 rpc_cstream_frame_cb on_frame, rpc_cstream_end_cb on_end,
                                 void *ctx)
{
    assert(on_frame != NULL);
    struct rpc__method *m = stream_method_get(s, method, RPC__METHOD_CLIENT_STREAM, ctx);
    if (m == NULL) {
        return SLOTD_EINVALID_FIELD;
    }
    m->cstream_frame = on_frame;
    m->cstream_end = on_end;
    return SLOTD_OK;
}

int rpc_server_add_bidi_stream(struct rpc_server *s, const char *method,
                               rpc_bstream_frame_cb on_frame,
                               const struct rpc_bstream_limits *limits, void *ctx)
{
    assert(on_frame != NULL && limits != NULL);
    if (limits->inflight_max == 0 || limits->frame_items_max == 0 ||
        limits->frame_items_max > limits->inflight_max) {
        return SLOTD_EINVALID_FIELD;
    }
    struct rpc__method *m = stream_method_get(s, method, RPC__METHOD_BIDI_STREAM, ctx);
    if (m == NULL) {
        return SLOTD_EINVALID_FIELD;
    }
    m->bstream_frame = on_frame;
    m->bstream_limits = *limits;
    return SLOTD_OK;
}

int rpc_server_add_server_stream(struct rpc_server *s, const char *method, rpc_stream_cb cb,
                                 void *ctx)
{
    assert(cb != NULL);
    struct rpc__method *m = stream_method_get(s, method, RPC__METHOD_SERVER_STREAM, ctx);
    if (m == NULL) {
        return SLOTD_EINVALID_FIELD;
    }
    m->stream_cb = cb;
    return SLOTD_OK;
}

/* Debian's abseil is built without NDEBUG, so every absl::Mutex acquisition under gRPC core runs
 * abseil's lock-order (deadlock) detector: a graph lookup per lock, 4-6% of a loaded node's CPU
 * (perf: absl::...::GraphCycles::GetId; BENCHMARKS.md). Release builds of abseil have it off.
 * The setter is C++ (absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore), value
 * 0), so it is looked up by its mangled Debian name at run time: an abseil without that symbol
 * keeps its own default. Idempotent; before the first gRPC call. */
static void absl_deadlock_detection_off(void)
{
    void (*set_mode)(int) = NULL;
    void *sym = dlsym(RTLD_DEFAULT,
                      "_ZN4absl7debian329SetMutexDeadlockDetectionModeENS0_15OnDeadlockCycleE");
    memcpy(&set_mode, &sym, sizeof(set_mode)); /* object to function pointer, without a cast */
    if (set_mode != NULL)
        set_mode(0);
}

int rpc_server_new(const struct rpc_server_options *o, struct rpc_server **out)
{
    struct rpc_server_options opts;
    rpc_server_options_default(&opts);
    if (o != NULL) {
        if (o->listen_addr != NULL) {
            opts.listen_addr = o->listen_addr;
        }
        if (o->max_inflight_calls != 0) {
            opts.max_inflight_calls = o->max_inflight_calls;
        }
        if (o->max_request_bytes != 0) {
            opts.max_request_bytes = o->max_request_bytes;
        }
        if (o->cq_threads != 0) {
            opts.cq_threads = o->cq_threads;
        }
        opts.max_streams_per_conn =
            o->max_streams_per_conn ? o->max_streams_per_conn : opts.max_streams_per_conn;
        opts.max_connections = o->max_connections ? o->max_connections : opts.max_connections;
        opts.conn_idle_ms = o->conn_idle_ms ? o->conn_idle_ms : opts.conn_idle_ms;
        opts.metrics = o->metrics;
        opts.tls_cert_pem = o->tls_cert_pem;
        opts.tls_key_pem = o->tls_key_pem;
        opts.tls_ca_pem = o->tls_ca_pem;
        opts.tls_client_auth = o->tls_client_auth;
        opts.peer_plane = o->peer_plane;
    }
    if (opts.cq_threads > RPC__CQ_THREADS_MAX || opts.max_request_bytes > INT_MAX / 2 ||
        opts.max_streams_per_conn > INT_MAX / 2 || opts.max_connections > INT_MAX / 4 ||
        opts.conn_idle_ms > INT_MAX) {
        return SLOTD_EINVALID_FIELD;
    }
    bool tls = opts.tls_cert_pem != NULL;
    if (tls != (opts.tls_key_pem != NULL) ||
        (opts.tls_client_auth && (!tls || opts.tls_ca_pem == NULL))) {
        return SLOTD_EINVALID_FIELD;
    }
    struct rpc_server *s = calloc(1, sizeof(*s));
    if (s == NULL) {
        goto err;
    }
    if (snprintf(s->listen_addr, sizeof(s->listen_addr), "%s", opts.listen_addr) >=
        (int)sizeof(s->listen_addr)) {
        free(s);
        return SLOTD_EINVALID_FIELD;
    }
    s->opts = opts;
    s->opts.listen_addr = s->listen_addr;
    if (!pem_copy(opts.tls_cert_pem, &s->tls_cert_pem) ||
        !pem_copy(opts.tls_key_pem, &s->tls_key_pem) ||
        !pem_copy(opts.tls_ca_pem, &s->tls_ca_pem)) {
        goto err_after_tls;
    }
    s->opts.tls_cert_pem = s->tls_cert_pem;
    s->opts.tls_key_pem = s->tls_key_pem;
    s->opts.tls_ca_pem = s->tls_ca_pem;
    atomic_init(&s->inflight, 0);
    if (rpc__conns_new(opts.max_connections, &s->conns) != 0) {
        goto err_after_tls;
    }
    s->shutdown_tag.kind = RPC__TAG_SHUTDOWN;
    s->shutdown_tag.owner = s;
    s->shutdown_tag.on_event = NULL;
    if (pthread_mutex_init(&s->mu, NULL) != 0) {
        goto err_after_tls;
    }
    if (pthread_cond_init(&s->cond, NULL) != 0) {
        goto err_after_mutex;
    }
    metrics_families_new(s);
    if (!opts.peer_plane &&
        (rpc_server_add_service(s, &slotd__v1__metadata__descriptor) != SLOTD_OK ||
         rpc__health_register(s) != SLOTD_OK || rpc__reflection_register(s) != SLOTD_OK)) {
        goto err_after_cond;
    }
    absl_deadlock_detection_off();
    grpc_init();
    *out = s;
    return SLOTD_OK;

err_after_cond:
    rpc_descset_free(s->descset);
    pthread_cond_destroy(&s->cond);
err_after_mutex:
    pthread_mutex_destroy(&s->mu);
err_after_tls:
    rpc__conns_free(s->conns); /* NULL when it was not made */
    tls_free(s);
    free(s);
err:
    return SLOTD_EINTERNAL;
}

/* ---- arming ------------------------------------------------------------------------------ */

/* Arms one request for method m (NULL = generic) unless the server is shutting down. */
static void request_arm(struct rpc_server *s, struct rpc__method *m)
{
    struct rpc__request *r = calloc(1, sizeof(*r));
    if (r == NULL) {
        return; /* the other armed requests keep serving */
    }
    r->tag.kind = RPC__TAG_REQUEST;
    r->tag.owner = r;
    r->tag.on_event = NULL;
    r->server = s;
    r->method = m;
    grpc_metadata_array_init(&r->md);
    grpc_call_details_init(&r->details);

    pthread_mutex_lock(&s->mu);
    if (s->shutting_down) {
        pthread_mutex_unlock(&s->mu);
        goto err_after_alloc;
    }
    s->armed++;
    pthread_mutex_unlock(&s->mu);

    grpc_call_error e;
    if (m != NULL) {
        /* Methods registered with GRPC_SRM_PAYLOAD_NONE must not ask for a payload. */
        grpc_byte_buffer **payload =
            m->kind == RPC__METHOD_REFLECTION || m->kind == RPC__METHOD_CLIENT_STREAM ||
                    m->kind == RPC__METHOD_BIDI_STREAM
                ? NULL
                : &r->payload;
        e = grpc_server_request_registered_call(s->server, m->handle, &r->call, &r->deadline,
                                                &r->md, payload, s->cq, s->cq, &r->tag);
    } else {
        e = grpc_server_request_call(s->server, &r->call, &r->details, &r->md, s->cq, s->cq,
                                     &r->tag);
    }
    if (e != GRPC_CALL_OK) {
        pthread_mutex_lock(&s->mu);
        s->armed--;
        pthread_cond_broadcast(&s->cond);
        pthread_mutex_unlock(&s->mu);
        goto err_after_alloc;
    }
    return;

err_after_alloc:
    grpc_call_details_destroy(&r->details);
    grpc_metadata_array_destroy(&r->md);
    free(r);
}

static void request_free(struct rpc__request *r)
{
    if (r->payload != NULL) {
        grpc_byte_buffer_destroy(r->payload);
    }
    grpc_call_details_destroy(&r->details);
    grpc_metadata_array_destroy(&r->md);
    free(r);
}

/* ---- calls ------------------------------------------------------------------------------- */

/* CLOCK_MONOTONIC milliseconds of a gRPC deadline (INT64_MAX: none). */
static int64_t deadline_to_ms(gpr_timespec d)
{
    if (d.tv_sec == INT64_MAX || d.clock_type == GPR_TIMESPAN) {
        return INT64_MAX;
    }
    gpr_timespec left = gpr_time_sub(d, gpr_now(d.clock_type));
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    int64_t now_ms = (int64_t)now.tv_sec * 1000 + now.tv_nsec / 1000000;
    if (left.tv_sec > INT64_MAX / 4000) {
        return INT64_MAX;
    }
    int64_t left_ms = left.tv_sec * 1000 + left.tv_nsec / 1000000;
    return now_ms + left_ms;
}

void rpc__status_init(struct rpc__status *st)
{
    st->message = grpc_empty_slice();
    st->has_trailer = false;
}

void rpc__status_set(struct rpc__status *st, const char *message, const uint8_t *details,
                     size_t details_len)
{
    st->message = grpc_slice_from_copied_string(message);
    st->has_trailer = details != NULL;
    if (details != NULL) {
        st->trailer.key = grpc_slice_from_static_string(RPC__DETAILS_KEY);
        st->trailer.value = grpc_slice_from_copied_buffer((const char *)details, details_len);
    }
}

void rpc__status_set_error(struct rpc__status *st, const struct slotd_error *e)
{
    uint8_t *details = NULL;
    size_t details_len = 0;
    if (slotd_error_encode_details(e, &details, &details_len) != SLOTD_OK) {
        details = NULL;
    }
    rpc__status_set(st, slotd_error_message(e), details, details_len);
    free(details);
}

void rpc__status_op(grpc_op *op, grpc_status_code code, struct rpc__status *st)
{
    op->op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    op->data.send_status_from_server.status = code;
    op->data.send_status_from_server.status_details = &st->message;
    op->data.send_status_from_server.trailing_metadata_count = st->has_trailer ? 1 : 0;
    op->data.send_status_from_server.trailing_metadata = st->has_trailer ? &st->trailer : NULL;
}

void rpc__status_free(struct rpc__status *st)
{
    grpc_slice_unref(st->message);
    if (st->has_trailer) {
        grpc_slice_unref(st->trailer.value);
    }
}

void rpc__call_uncount(struct rpc_call *c)
{
    if (c->counted) {
        c->counted = false;
        atomic_fetch_sub_explicit(&c->server->inflight, 1, memory_order_relaxed);
    }
}

void rpc__call_free(struct rpc_call *c)
{
    struct rpc_server *s = c->server;
    if (c->response != NULL) {
        grpc_byte_buffer_destroy(c->response);
    }
    rpc__status_free(&c->status);
    if (c->call != NULL) {
        grpc_call_unref(c->call);
    }
    rpc__conn_release(s, c);
    free(c);
    pthread_mutex_lock(&s->mu);
    assert(s->live_calls > 0);
    s->live_calls--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

grpc_call *rpc__call_take(struct rpc_call *c)
{
    grpc_call *call = c->call;
    c->call = NULL;
    rpc__call_free(c);
    return call;
}

/* Starts the one final batch of a unary call; the CQ thread frees c when it completes. */
static void call_finish(struct rpc_call *c, grpc_status_code code, const char *message,
                        grpc_byte_buffer *response, uint8_t *details, size_t details_len)
{
    grpc_op ops[4];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    rpc__call_uncount(c);
    if (c->metrics != NULL) {
        call_record(c->server, c, code);
    }
    c->response = response;
    rpc__status_set(&c->status, message, details, details_len);
    ops[n].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[n++].data.send_initial_metadata.count = 0;
    if (response != NULL) {
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = response;
    }
    rpc__status_op(&ops[n++], code, &c->status);
    ops[n].op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    ops[n++].data.recv_close_on_server.cancelled = &c->cancelled;
    c->tag.kind = RPC__TAG_CALL;
    c->tag.owner = c;
    c->tag.on_event = NULL;
    grpc_call_error e = grpc_call_start_batch(c->call, ops, n, &c->tag, NULL);
    /* Only misuse (a call finished twice, ops out of order) can fail here. */
    assert(e == GRPC_CALL_OK);
    if (e != GRPC_CALL_OK) {
        rpc__call_free(c);
    }
}

struct rpc_call *rpc_call_new_local(const char *path, int64_t deadline_ms, rpc_local_cb cb,
                                    void *arg)
{
    struct rpc_call *c = calloc(1, sizeof(*c));
    if (c == NULL)
        return NULL;
    c->path = path;
    c->deadline_ms = deadline_ms;
    c->local_cb = cb;
    c->local_arg = arg;
    return c;
}

int rpc_server_call_local(struct rpc_server *s, const char *path, int64_t deadline_ms,
                          const uint8_t *req, size_t len, rpc_local_cb cb, void *arg)
{
    assert(s->started);
    const struct rpc__method *m = method_find(s, path); /* the table is fixed after start */
    if (m == NULL || m->kind != RPC__METHOD_UNARY || m->cb == NULL) {
        return SLOTD_EUNIMPLEMENTED;
    }
    struct rpc_call *c = rpc_call_new_local(m->path, deadline_ms, cb, arg);
    if (c == NULL) {
        return SLOTD_EINTERNAL;
    }
    m->cb(m->ctx, c, req, len);
    return SLOTD_OK;
}

bool rpc_call_is_local(const struct rpc_call *c)
{
    return c->local_cb != NULL;
}

/* Finishes a local call: the answer goes to its callback. */
static void local_finish(struct rpc_call *c, int status, const char *message, const void *resp,
                         size_t len, const uint8_t *details, size_t details_len)
{
    c->local_cb(c->local_arg, status, message, resp, len, details, details_len);
    free(c);
}

void rpc_call_reply_bytes(struct rpc_call *c, const void *buf, size_t len)
{
    if (c->local_cb != NULL) {
        local_finish(c, GRPC_STATUS_OK, "", buf, len, NULL, 0);
        return;
    }
    grpc_slice slice = grpc_slice_from_copied_buffer(buf, len);
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    call_finish(c, GRPC_STATUS_OK, "", bb, NULL, 0);
}

void rpc_call_reply(struct rpc_call *c, const ProtobufCMessage *msg)
{
    if (c->local_cb != NULL) {
        size_t n = protobuf_c_message_get_packed_size(msg);
        uint8_t *buf = malloc(n ? n : 1);
        if (buf == NULL) {
            local_finish(c, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory", NULL, 0, NULL, 0);
            return;
        }
        protobuf_c_message_pack(msg, buf);
        local_finish(c, GRPC_STATUS_OK, "", buf, n, NULL, 0);
        free(buf);
        return;
    }
    size_t size = protobuf_c_message_get_packed_size(msg);
    grpc_slice slice = grpc_slice_malloc(size);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(slice));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    call_finish(c, GRPC_STATUS_OK, "", bb, NULL, 0);
}

void rpc_call_fail(struct rpc_call *c, const struct slotd_error *e)
{
    assert(e->code != SLOTD_OK);
    uint8_t *details = NULL;
    size_t details_len = 0;
    /* Without memory for the details the status and message still go out. */
    if (slotd_error_encode_details(e, &details, &details_len) != SLOTD_OK) {
        details = NULL;
    }
    if (c->local_cb != NULL)
        local_finish(c, slotd_error_grpc_code(e->code), slotd_error_message(e), NULL, 0, details,
                     details_len);
    else
        call_finish(c, slotd_error_grpc_code(e->code), slotd_error_message(e), NULL, details,
                    details_len);
    free(details);
}

void rpc_call_fail_raw(struct rpc_call *c, int status, const char *message, const uint8_t *details,
                       size_t details_len)
{
    assert(status != GRPC_STATUS_OK);
    if (c->local_cb != NULL) {
        local_finish(c, status, message ? message : "", NULL, 0, details,
                     details != NULL ? details_len : 0);
        return;
    }
    call_finish(c, (grpc_status_code)status, message ? message : "", NULL, (uint8_t *)details,
                details != NULL ? details_len : 0);
}

int64_t rpc_call_deadline_ms(const struct rpc_call *c)
{
    return c->deadline_ms;
}

const char *rpc_call_method(const struct rpc_call *c)
{
    return c->path;
}

size_t rpc_server_inflight(const struct rpc_server *s)
{
    return atomic_load_explicit(&((struct rpc_server *)s)->inflight, memory_order_relaxed);
}

/* Takes one max_inflight_calls slot; false when all are taken. */
static bool inflight_acquire(struct rpc_server *s)
{
    size_t n = atomic_fetch_add_explicit(&s->inflight, 1, memory_order_relaxed);
    if (n >= s->opts.max_inflight_calls) {
        atomic_fetch_sub_explicit(&s->inflight, 1, memory_order_relaxed);
        return false;
    }
    return true;
}

/* Takes a max_inflight_calls slot for c when m counts against it (c->counted = m->counted); when
 * the server is full, fails c with QUEUE_FULL (and a retry hint) and returns false. */
static bool call_count(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c)
{
    if (m->counted && !inflight_acquire(s)) {
        struct slotd_error e;
        slotd_error_set(&e, SLOTD_EQUEUE_FULL, "server: %zu calls in flight, the limit is %zu",
                        s->opts.max_inflight_calls, s->opts.max_inflight_calls);
        e.retry_after_ms = RPC_QUEUE_FULL_RETRY_MS;
        rpc_call_fail(c, &e);
        return false;
    }
    c->counted = m->counted;
    return true;
}

/* Checks a new unary call and hands it to its handler, or fails it. */
static void call_dispatch(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c,
                          grpc_byte_buffer *payload, bool shutting_down)
{
    struct slotd_error e;
    if (m == NULL) {
        slotd_error_set(&e, SLOTD_EUNIMPLEMENTED, "method %s is not served here", c->path);
        rpc_call_fail(c, &e);
        return;
    }
    if (m->kind == RPC__METHOD_UNARY && m->cb == NULL) {
        slotd_error_set(&e, SLOTD_EUNIMPLEMENTED, "method %s is not implemented", c->path);
        rpc_call_fail(c, &e);
        return;
    }
    if (shutting_down) {
        slotd_error_set(&e, SLOTD_ESHUTTING_DOWN, "server: shutting down");
        rpc_call_fail(c, &e);
        return;
    }
    if (c->call != NULL && rpc__conn_acquire(s, c, &e) != 0) {
        rpc_call_fail(c, &e);
        return;
    }
    if (m->kind == RPC__METHOD_REFLECTION) {
        rpc__reflection_start(s, c); /* a stream: reads its own messages */
        return;
    }
    if (m->kind == RPC__METHOD_CLIENT_STREAM) {
        if (!call_count(s, m, c))
            return;
        rpc__cstream_start(s, m, c); /* reads its own frames */
        return;
    }
    if (m->kind == RPC__METHOD_BIDI_STREAM) {
        if (!call_count(s, m, c))
            return;
        rpc__bstream_start(s, m, c); /* reads its own frames */
        return;
    }
    if (payload == NULL) {
        slotd_error_set(&e, SLOTD_EMALFORMED, "request: no message (cancelled or not sent)");
        snprintf(e.field, sizeof(e.field), "request");
        rpc_call_fail(c, &e);
        return;
    }
    size_t len = grpc_byte_buffer_length(payload);
    if (len > s->opts.max_request_bytes) {
        slotd_error_field(&e, "request", s->opts.max_request_bytes,
                          "request: %zu bytes exceeds the limit of %zu", len,
                          s->opts.max_request_bytes);
        rpc_call_fail(c, &e);
        return;
    }
    if (!call_count(s, m, c))
        return;
    grpc_slice body;
    if (!rpc__bytes_flatten(payload, &body)) {
        slotd_error_set(&e, SLOTD_EMALFORMED, "request: cannot read the message");
        snprintf(e.field, sizeof(e.field), "request");
        rpc_call_fail(c, &e);
        return;
    }
    const uint8_t *req = RPC__BODY_PTR(body);
    if (m->kind == RPC__METHOD_HEALTH_WATCH) {
        rpc__health_watch_start(s, c, req, GRPC_SLICE_LENGTH(body));
    } else if (m->kind == RPC__METHOD_SERVER_STREAM) {
        rpc__stream_start(s, m, c, req, GRPC_SLICE_LENGTH(body));
    } else {
        m->cb(m->ctx, c, req, GRPC_SLICE_LENGTH(body));
    }
    grpc_slice_unref(body);
}

const char *rpc_call_header(const struct rpc_call *c, const char *key, size_t *len)
{
    if (c->md == NULL) {
        return NULL;
    }
    for (size_t i = 0; i < c->md->count; i++) {
        if (grpc_slice_str_cmp(c->md->metadata[i].key, key) == 0) {
            *len = GRPC_SLICE_LENGTH(c->md->metadata[i].value);
            return (const char *)GRPC_SLICE_START_PTR(c->md->metadata[i].value);
        }
    }
    return NULL;
}

size_t rpc_call_peer_names(const struct rpc_call *c, char (*names)[RPC_PEER_NAME_MAX], size_t max)
{
    if (c->call == NULL || max == 0) {
        return 0;
    }
    grpc_auth_context *ctx = grpc_call_auth_context(c->call);
    if (ctx == NULL) {
        return 0;
    }
    size_t n = 0;
    if (grpc_auth_context_peer_is_authenticated(ctx)) {
        /* The common name first, then every subject alternative name. */
        static const char *const props[] = {GRPC_X509_CN_PROPERTY_NAME,
                                            GRPC_X509_SAN_PROPERTY_NAME};
        for (size_t k = 0; k < 2 && n < max; k++) {
            grpc_auth_property_iterator it =
                grpc_auth_context_find_properties_by_name(ctx, props[k]);
            const grpc_auth_property *p;
            while (n < max && (p = grpc_auth_property_iterator_next(&it)) != NULL) {
                if (p->value_length == 0 || p->value_length >= RPC_PEER_NAME_MAX ||
                    memchr(p->value, '\0', p->value_length) != NULL) {
                    continue; /* not a name slotd could have issued */
                }
                memcpy(names[n], p->value, p->value_length);
                names[n][p->value_length] = '\0';
                n++;
            }
        }
    }
    grpc_auth_context_release(ctx);
    return n;
}

/* A request tag came back: re-arm first, then build the call and dispatch it. */
static void request_on_event(struct rpc__request *r, bool ok)
{
    struct rpc_server *s = r->server;
    if (!ok) {
        request_free(r); /* server shutting down */
        goto out_disarm;
    }
    request_arm(s, r->method);

    struct rpc_call *c = calloc(1, sizeof(*c));
    pthread_mutex_lock(&s->mu);
    bool shutting_down = s->shutting_down;
    if (c != NULL) {
        s->live_calls++;
    }
    pthread_mutex_unlock(&s->mu);
    if (c == NULL) {
        grpc_call_cancel_with_status(r->call, GRPC_STATUS_RESOURCE_EXHAUSTED, "out of memory",
                                     NULL);
        grpc_call_unref(r->call);
        request_free(r);
        goto out_disarm;
    }
    c->server = s;
    c->call = r->call;
    rpc__status_init(&c->status);
    if (s->m_requests != NULL) {
        c->metrics = r->method != NULL ? &r->method->metrics : &s->unknown_metrics;
        c->start_s = metrics_now_seconds();
    }
    if (r->method != NULL) {
        c->path = r->method->path;
        c->deadline_ms = deadline_to_ms(r->deadline);
    } else {
        snprintf(c->path_buf, sizeof(c->path_buf), "%.*s",
                 (int)GRPC_SLICE_LENGTH(r->details.method),
                 (const char *)GRPC_SLICE_START_PTR(r->details.method));
        c->path = c->path_buf;
        c->deadline_ms = deadline_to_ms(r->details.deadline);
    }
    c->md = &r->md; /* for rpc_call_header, while the handler runs */
    call_dispatch(s, r->method, c, r->payload, shutting_down);
    request_free(r);

out_disarm:
    pthread_mutex_lock(&s->mu);
    assert(s->armed > 0);
    s->armed--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

static void *cq_thread_main(void *arg)
{
    struct rpc_server *s = arg;
    prctl(PR_SET_NAME, "slotd-rpc");
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type != GRPC_OP_COMPLETE) {
            continue;
        }
        struct rpc__tag *t = ev.tag;
        if (t->on_event != NULL) {
            t->on_event(t, ev.success != 0); /* a stream's event (stream, cstream, health, ...) */
            continue;
        }
        switch (t->kind) {
        case RPC__TAG_REQUEST:
            request_on_event(t->owner, ev.success != 0);
            break;
        case RPC__TAG_CALL:
            rpc__call_free(t->owner);
            break;
        default:
            assert(t->kind == RPC__TAG_SHUTDOWN);
            pthread_mutex_lock(&s->mu);
            s->shutdown_done = true;
            pthread_cond_broadcast(&s->cond);
            pthread_mutex_unlock(&s->mu);
            break;
        }
    }
    return NULL;
}

/* ---- start / shutdown -------------------------------------------------------------------- */

static void cq_drain_and_destroy(struct rpc_server *s)
{
    grpc_completion_queue_shutdown(s->cq);
    if (s->n_threads == 0) {
        while (grpc_completion_queue_next(s->cq, gpr_inf_future(GPR_CLOCK_REALTIME), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
    }
    for (unsigned i = 0; i < s->n_threads; i++) {
        pthread_join(s->threads[i], NULL);
    }
    s->n_threads = 0;
    grpc_completion_queue_destroy(s->cq);
    s->cq = NULL;
}

/* Creates the grpc_server, registers the methods and binds: the port, or -1 with err set. */
static int server_create(struct rpc_server *s, char *err, size_t errlen)
{
    /* The port is this process's alone: a second slotd on it fails to bind instead of sharing
     * the connections (gRPC sets SO_REUSEPORT by default). */
    /* Connection limits and keepalive enforcement (rpc.h): the transport lets twice
     * max_streams_per_conn streams in, so the excess is refused by conn.c, not queued. */
    struct {
        const char *key;
        size_t value;
    } ints[] = {
        {GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, 2 * s->opts.max_request_bytes},
        {GRPC_ARG_ALLOW_REUSEPORT, 0},
        {GRPC_ARG_MAX_CONCURRENT_STREAMS, 2 * s->opts.max_streams_per_conn},
        {GRPC_ARG_MAX_CONNECTION_IDLE_MS, s->opts.conn_idle_ms},
        {GRPC_ARG_KEEPALIVE_TIME_MS, RPC_KEEPALIVE_TIME_MS},
        {GRPC_ARG_KEEPALIVE_TIMEOUT_MS, RPC_KEEPALIVE_TIMEOUT_MS},
        {GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1},
        {GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, RPC_MIN_RECV_PING_INTERVAL_MS},
        {GRPC_ARG_HTTP2_MAX_PING_STRIKES, RPC_MAX_PING_STRIKES},
    };
    grpc_arg arg[sizeof(ints) / sizeof(ints[0])];
    for (size_t i = 0; i < sizeof(ints) / sizeof(ints[0]); i++) {
        arg[i].type = GRPC_ARG_INTEGER;
        arg[i].key = (char *)ints[i].key;
        arg[i].value.integer = (int)ints[i].value;
    }
    grpc_channel_args args = {sizeof(ints) / sizeof(ints[0]), arg};
    s->server = grpc_server_create(&args, NULL);
    if (s->server == NULL) {
        snprintf(err, errlen, "rpc: grpc_server_create failed");
        return -1;
    }
    grpc_server_register_completion_queue(s->server, s->cq, NULL);
    if (s->poller != NULL) /* its pollset takes the connections this server accepts */
        grpc_server_register_completion_queue(s->server, s->poller->cq, NULL);
    for (size_t i = 0; i < s->n_methods; i++) {
        /* Streams whose requests arrive one by one read them themselves. */
        grpc_server_register_method_payload_handling payload =
            s->methods[i].kind == RPC__METHOD_REFLECTION ||
                    s->methods[i].kind == RPC__METHOD_CLIENT_STREAM ||
                    s->methods[i].kind == RPC__METHOD_BIDI_STREAM
                ? GRPC_SRM_PAYLOAD_NONE
                : GRPC_SRM_PAYLOAD_READ_INITIAL_BYTE_BUFFER;
        s->methods[i].handle =
            grpc_server_register_method(s->server, s->methods[i].path, NULL, payload, 0);
        if (s->methods[i].handle == NULL) {
            snprintf(err, errlen, "rpc: cannot register method %s", s->methods[i].path);
            return -1;
        }
    }
    grpc_server_credentials *creds;
    if (s->tls_cert_pem != NULL) {
        grpc_ssl_pem_key_cert_pair pair = {s->tls_key_pem, s->tls_cert_pem};
        creds = grpc_ssl_server_credentials_create_ex(
            s->tls_ca_pem, &pair, 1,
            s->opts.tls_client_auth ? GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY
                                    : GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE,
            NULL);
    } else {
        creds = grpc_insecure_server_credentials_create();
    }
    if (creds == NULL) {
        snprintf(err, errlen, "rpc: cannot create the server credentials");
        return -1;
    }
    int port = grpc_server_add_http2_port(s->server, s->listen_addr, creds);
    grpc_server_credentials_release(creds);
    char why[400];
    if (port == 0 && net_listen_check(s->listen_addr, why, sizeof(why)) != 0) {
        snprintf(err, errlen, "rpc: %s", why); /* gRPC logs its reason; this names it for us */
        return -1;
    }
    if (port == 0) {
        snprintf(err, errlen,
                 s->tls_cert_pem != NULL
                     ? "rpc: cannot listen on %s with TLS (address in use, or the certificate, "
                       "key or CA PEM does not load)"
                     : "rpc: cannot listen on %s",
                 s->listen_addr);
        return -1;
    }
    return port;
}

void rpc_server_poll_by(struct rpc_server *s, struct rpc_server *poller)
{
    assert(!s->started && poller->started && poller != s);
    s->poller = poller;
}

int rpc_server_start(struct rpc_server *s, int *bound_port, char *err, size_t errlen)
{
    char scratch[1];
    if (err == NULL || errlen == 0) {
        err = scratch;
        errlen = sizeof(scratch);
    }
    assert(!s->started && s->cq == NULL);
    if (s->poller != NULL) {
        const char *strategy = getenv("GRPC_POLL_STRATEGY");
        if (strategy != NULL && strcmp(strategy, "epoll1") != 0) {
            snprintf(err, errlen,
                     "rpc: a non-polling completion queue needs gRPC's epoll1 engine, not "
                     "GRPC_POLL_STRATEGY=%s",
                     strategy);
            goto err;
        }
        grpc_completion_queue_attributes attr = {GRPC_CQ_CURRENT_VERSION, GRPC_CQ_NEXT,
                                                 GRPC_CQ_NON_POLLING, NULL};
        const grpc_completion_queue_factory *f = grpc_completion_queue_factory_lookup(&attr);
        s->cq = grpc_completion_queue_create(f, &attr, NULL);
    } else {
        s->cq = grpc_completion_queue_create_for_next(NULL);
    }
    if (s->cq == NULL) {
        snprintf(err, errlen, "rpc: cannot create a completion queue");
        goto err;
    }
    int port = server_create(s, err, errlen);
    if (port < 0) {
        goto err_after_server;
    }
    for (unsigned i = 0; i < s->opts.cq_threads; i++) {
        if (pthread_create(&s->threads[i], NULL, cq_thread_main, s) != 0) {
            break;
        }
        s->n_threads++;
    }
    if (s->n_threads == 0) {
        snprintf(err, errlen, "rpc: cannot start a completion-queue thread");
        goto err_after_server;
    }
    if (s->m_requests != NULL) {
        for (size_t i = 0; i < s->n_methods; i++) {
            struct rpc__method_metrics *mm = &s->methods[i].metrics;
            method_metrics_init(mm, s->methods[i].path);
            /* A server stream's OK series exists from the start at 0, so a rate or increase
             * over it sees the first stream that ends (the backup-overdue alert). */
            if (s->m_streams != NULL && s->methods[i].kind == RPC__METHOD_SERVER_STREAM) {
                const char *values[] = {mm->label, "OK"};
                atomic_store_explicit(&mm->streams_by_code[GRPC_STATUS_OK],
                                      metrics_counter_get(s->m_streams, values),
                                      memory_order_release);
            }
        }
        method_metrics_init(&s->unknown_metrics, "unknown");
    }
    grpc_server_start(s->server);
    pthread_mutex_lock(&s->mu);
    s->started = true;
    pthread_mutex_unlock(&s->mu);
    for (size_t i = 0; i < s->n_methods; i++) {
        for (int k = 0; k < RPC__ARMED_PER_METHOD; k++) {
            request_arm(s, &s->methods[i]);
        }
    }
    for (int k = 0; k < RPC__ARMED_PER_METHOD; k++) {
        request_arm(s, NULL);
    }
    if (bound_port != NULL) {
        *bound_port = port;
    }
    return SLOTD_OK;

err_after_server:
    if (s->server != NULL) {
        grpc_server_destroy(s->server); /* never started: no shutdown needed */
        s->server = NULL;
    }
    cq_drain_and_destroy(s);
err:
    return SLOTD_EINTERNAL;
}

void rpc_server_shutdown(struct rpc_server *s)
{
    pthread_mutex_lock(&s->mu);
    if (!s->started || s->shutting_down) {
        pthread_mutex_unlock(&s->mu);
        return;
    }
    s->shutting_down = true;
    rpc__health_all_not_serving_locked(s);
    pthread_mutex_unlock(&s->mu);

    grpc_server_shutdown_and_notify(s->server, s->cq, &s->shutdown_tag);
    grpc_server_cancel_all_calls(s->server);
    pthread_mutex_lock(&s->mu);
    while (!s->shutdown_done || s->live_calls > 0 || s->armed > 0) {
        pthread_cond_wait(&s->cond, &s->mu);
    }
    pthread_mutex_unlock(&s->mu);
    grpc_server_destroy(s->server);
    s->server = NULL;
    cq_drain_and_destroy(s);
    pthread_mutex_lock(&s->mu);
    s->stopped = true;
    pthread_mutex_unlock(&s->mu);
}

void rpc_server_free(struct rpc_server *s)
{
    if (s == NULL) {
        return;
    }
    rpc_server_shutdown(s);
    assert(s->live_calls == 0 && s->watches == NULL && s->n_reflections == 0);
    rpc_descset_free(s->descset);
    rpc__conns_free(s->conns);
    pthread_cond_destroy(&s->cond);
    pthread_mutex_destroy(&s->mu);
    tls_free(s);
    free(s);
    grpc_shutdown();
}
