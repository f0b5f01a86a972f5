/* transport.c - the transport object: options, peers and channels, the completion-queue thread,
 * start/stop/free and stats. */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <grpc/grpc_security.h>
#include <grpc/support/time.h>
#include <sys/prctl.h>

#include "transport_internal.h"

#define TRANSPORT__DEFAULT_QUEUE_MSGS 8192
#define TRANSPORT__DEFAULT_QUEUE_BYTES (64u << 20)
#define TRANSPORT__DEFAULT_BATCH_BYTES (4u << 20)
#define TRANSPORT__MIN_BATCH_BYTES 1024
#define TRANSPORT__DEFAULT_BACKOFF_MIN_MS 50
#define TRANSPORT__DEFAULT_BACKOFF_MAX_MS 2000
#define TRANSPORT__DEFAULT_CALL_TIMEOUT_MS 5000

/* gRPC's own reconnect backoff and keepalive of every channel. gRPC reads
 * GRPC_ARG_MIN_RECONNECT_BACKOFF_MS as the minimum *connect timeout* (TCP + HTTP/2 handshake up to
 * the server's SETTINGS), not as a backoff: at 100 ms a handshake on a loaded node is abandoned
 * (measured: "connection attempt timed out before receiving SETTINGS frame" after 101 ms), so it
 * is 1 s. Keepalive pings only while calls are outstanding, which the default server ping policy
 * accepts. */
#define TRANSPORT__RECONNECT_INITIAL_MS 100
#define TRANSPORT__RECONNECT_MIN_MS 1000
#define TRANSPORT__RECONNECT_MAX_MS 2000
#define TRANSPORT__KEEPALIVE_TIME_MS 10000
#define TRANSPORT__KEEPALIVE_TIMEOUT_MS 5000

SLOTD_ERRLIST_STRERROR(transport_strerror, TRANSPORT_ERRORS, "unknown error")

int64_t transport__now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void transport_options_default(struct transport_options *o)
{
    memset(o, 0, sizeof(*o));
    o->queue_msgs_max = TRANSPORT__DEFAULT_QUEUE_MSGS;
    o->queue_bytes_max = TRANSPORT__DEFAULT_QUEUE_BYTES;
    o->batch_bytes_max = TRANSPORT__DEFAULT_BATCH_BYTES;
    o->backoff_min_ms = TRANSPORT__DEFAULT_BACKOFF_MIN_MS;
    o->backoff_max_ms = TRANSPORT__DEFAULT_BACKOFF_MAX_MS;
    o->call_timeout_ms = TRANSPORT__DEFAULT_CALL_TIMEOUT_MS;
}

/* o with its zero fields replaced by the defaults; false when the result is inconsistent. */
static bool options_resolve(const struct transport_options *o, struct transport_options *out)
{
    transport_options_default(out);
    out->node_id = o->node_id;
/* A field given as 0 keeps its default. */
#define TRANSPORT__TAKE_SET(field)                                                                 \
    do {                                                                                           \
        if (o->field != 0) {                                                                       \
            out->field = o->field;                                                                 \
        }                                                                                          \
    } while (0)
    TRANSPORT__TAKE_SET(queue_msgs_max);
    TRANSPORT__TAKE_SET(queue_bytes_max);
    TRANSPORT__TAKE_SET(batch_bytes_max);
    TRANSPORT__TAKE_SET(backoff_min_ms);
    TRANSPORT__TAKE_SET(backoff_max_ms);
    TRANSPORT__TAKE_SET(call_timeout_ms);
#undef TRANSPORT__TAKE_SET
    out->tls = o->tls;
    out->tls_ca_pem = o->tls_ca_pem;
    out->tls_cert_pem = o->tls_cert_pem;
    out->tls_key_pem = o->tls_key_pem;
    out->tls_server_name = o->tls_server_name;
    out->sign = o->sign;
    out->sign_ctx = o->sign_ctx;
    out->sign_header = o->sign_header;
    out->sign_prefix = o->sign_prefix;
    if (o->sign != NULL && (o->sign_header == NULL || o->sign_prefix == NULL)) {
        return false;
    }
    if ((o->tls_cert_pem == NULL) != (o->tls_key_pem == NULL) ||
        (o->tls_server_name != NULL && strlen(o->tls_server_name) >= TRANSPORT_ADDRESS_MAX)) {
        return false;
    }
    /* A batch larger than INT_MAX/2 could not be received by any gRPC server anyway. */
    return out->node_id != 0 && out->backoff_min_ms <= out->backoff_max_ms &&
           out->batch_bytes_max >= TRANSPORT__MIN_BATCH_BYTES && out->batch_bytes_max <= (1u << 30);
}

int transport_new(const struct transport_options *o, const struct transport_callbacks *cb,
                  struct transport **out)
{
    struct transport_options opts;
    if (o == NULL || !options_resolve(o, &opts)) {
        return TRANSPORT_EINVAL;
    }
    struct transport *t = calloc(1, sizeof(*t));
    if (t == NULL) {
        goto err;
    }
    t->opts = opts;
    t->opts.tls_ca_pem = t->opts.tls_cert_pem = t->opts.tls_key_pem = NULL;
    t->opts.tls_server_name = NULL;
    if (opts.tls && opts.tls_server_name != NULL) {
        snprintf(t->tls_server_name, sizeof(t->tls_server_name), "%s", opts.tls_server_name);
    }
    if (cb != NULL) {
        t->cb = *cb;
    }
    t->state = TRANSPORT__NEW;
    if (pthread_mutex_init(&t->mu, NULL) != 0) {
        goto err_after_alloc;
    }
    if (pthread_cond_init(&t->cond, NULL) != 0) {
        goto err_after_mutex;
    }
    grpc_init();
    if (opts.tls) {
        /* gRPC copies the PEM text. */
        grpc_ssl_pem_key_cert_pair pair = {opts.tls_key_pem, opts.tls_cert_pem};
        t->creds = grpc_ssl_credentials_create(
            opts.tls_ca_pem, opts.tls_cert_pem != NULL ? &pair : NULL, NULL, NULL);
    } else {
        t->creds = grpc_insecure_credentials_create();
    }
    if (t->creds == NULL) {
        goto err_after_init;
    }
    t->cq = grpc_completion_queue_create_for_next(NULL);
    if (t->cq == NULL) {
        goto err_after_creds;
    }
    *out = t;
    return TRANSPORT_OK;

err_after_creds:
    grpc_channel_credentials_release(t->creds);
err_after_init:
    grpc_shutdown();
    pthread_cond_destroy(&t->cond);
err_after_mutex:
    pthread_mutex_destroy(&t->mu);
err_after_alloc:
    free(t);
err:
    return TRANSPORT_ENOMEM;
}

/* ---- channels and peers ------------------------------------------------------------------ */

static grpc_arg int_arg(const char *key, int value)
{
    grpc_arg a;
    memset(&a, 0, sizeof(a));
    a.type = GRPC_ARG_INTEGER;
    a.key = (char *)key; /* gRPC copies the args; the key is never written */
    a.value.integer = value;
    return a;
}

static grpc_channel *channel_create(struct transport *t, const char *address)
{
    grpc_arg args[] = {
        int_arg(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1), /* one connection per peer address */
        int_arg(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, TRANSPORT__RECONNECT_INITIAL_MS),
        int_arg(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, TRANSPORT__RECONNECT_MIN_MS),
        int_arg(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, TRANSPORT__RECONNECT_MAX_MS),
        int_arg(GRPC_ARG_KEEPALIVE_TIME_MS, TRANSPORT__KEEPALIVE_TIME_MS),
        int_arg(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, TRANSPORT__KEEPALIVE_TIMEOUT_MS),
        int_arg(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 0),
        {.type = GRPC_ARG_STRING,
         .key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
         .value.string = t->tls_server_name}, /* last: only passed when set */
    };
    size_t n_args = sizeof(args) / sizeof(args[0]);
    if (t->tls_server_name[0] == '\0') {
        n_args--;
    }
    grpc_channel_args chargs = {n_args, args};
    return grpc_channel_create(address, t->creds, &chargs);
}

int transport__channel_get(struct transport *t, const char *address,
                           struct transport__channel **out)
{
    *out = NULL;
    size_t len = strlen(address);
    if (len == 0 || len >= TRANSPORT_ADDRESS_MAX) {
        return TRANSPORT_EINVAL;
    }
    for (size_t i = 0; i < t->n_channels; i++) {
        if (strcmp(t->channels[i]->address, address) == 0) {
            *out = t->channels[i];
            return TRANSPORT_OK;
        }
    }
    if (t->n_channels == TRANSPORT_CHANNELS_MAX) {
        return TRANSPORT_EFULL;
    }
    struct transport__channel *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        goto err;
    }
    memcpy(c->address, address, len + 1);
    c->channel = channel_create(t, address);
    if (c->channel == NULL) {
        goto err_after_alloc;
    }
    t->channels[t->n_channels++] = c;
    *out = c;
    return TRANSPORT_OK;

err_after_alloc:
    free(c);
err:
    return TRANSPORT_ENOMEM;
}

struct transport__peer *transport__peer_find(struct transport *t, uint64_t node_id)
{
    for (size_t i = 0; i < t->n_peers; i++) {
        if (t->peers[i]->node_id == node_id) {
            return t->peers[i];
        }
    }
    return NULL;
}

int transport_add_peer(struct transport *t, uint64_t node_id, const char *address)
{
    if (node_id == 0 || node_id == t->opts.node_id || address == NULL) {
        return TRANSPORT_EINVAL;
    }
    pthread_mutex_lock(&t->mu);
    struct transport__peer *p = transport__peer_find(t, node_id);
    if (p == NULL && t->n_peers == TRANSPORT_PEERS_MAX) {
        pthread_mutex_unlock(&t->mu);
        return TRANSPORT_EFULL;
    }
    struct transport__channel *chan = NULL;
    int rc = transport__channel_get(t, address, &chan);
    if (rc != TRANSPORT_OK) {
        pthread_mutex_unlock(&t->mu);
        return rc;
    }
    if (p == NULL) {
        p = calloc(1, sizeof(*p));
        if (p == NULL) {
            pthread_mutex_unlock(&t->mu);
            return TRANSPORT_ENOMEM; /* the channel stays cached for a retry */
        }
        p->node_id = node_id;
        t->peers[t->n_peers++] = p;
    }
    if (p->chan != chan) {
        transport__stream_close(t, p); /* the next frame opens one to the new address */
    }
    p->chan = chan;
    pthread_mutex_unlock(&t->mu);
    return TRANSPORT_OK;
}

const char *transport_peer_address(const struct transport *t, uint64_t node_id)
{
    struct transport *mt = (struct transport *)t; /* the lock only */
    pthread_mutex_lock(&mt->mu);
    struct transport__peer *p = transport__peer_find(mt, node_id);
    const char *address = p != NULL ? p->chan->address : NULL;
    pthread_mutex_unlock(&mt->mu);
    return address;
}

int transport_peer_stats(struct transport *t, uint64_t peer, struct transport_peer_stats *out)
{
    pthread_mutex_lock(&t->mu);
    struct transport__peer *p = transport__peer_find(t, peer);
    if (p == NULL) {
        pthread_mutex_unlock(&t->mu);
        return TRANSPORT_EUNKNOWN_PEER;
    }
    out->sent_msgs = p->sent_msgs;
    out->sent_batches = p->sent_batches;
    out->dropped_full = p->dropped_full;
    out->failed_batches = p->failed_batches;
    out->queued_msgs = p->queue.n;
    out->queued_bytes = p->queued_bytes;
    out->in_flight = p->in_flight;
    out->backing_off = p->backoff_until_ms != 0 && transport__now_ms() < p->backoff_until_ms;
    pthread_mutex_unlock(&t->mu);
    return TRANSPORT_OK;
}

/* ---- the completion-queue thread --------------------------------------------------------- */

static gpr_timespec wake_deadline(int64_t wake_ms)
{
    if (wake_ms == INT64_MAX) {
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    }
    int64_t left = wake_ms - transport__now_ms();
    if (left < 0) {
        left = 0;
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(left, GPR_TIMESPAN));
}

static void *cq_main(void *arg)
{
    struct transport *t = arg;
    prctl(PR_SET_NAME, "slotd-peer");
    int64_t wake_ms = INT64_MAX;
    /* a tenth of the send timeout, 5 ms .. 1 s: a stuck frame fails within 1.1 x the timeout */
    int64_t tick = (int64_t)t->opts.call_timeout_ms / 10;
    tick = tick < 5 ? 5 : tick > 1000 ? 1000 : tick;
    for (;;) {
        grpc_event ev = grpc_completion_queue_next(t->cq, wake_deadline(wake_ms), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN) {
            break;
        }
        if (ev.type == GRPC_OP_COMPLETE) {
            enum transport__call_kind kind = *(const enum transport__call_kind *)ev.tag;
            if (kind == TRANSPORT__CALL_USER) {
                transport__call_complete(t, ev.tag, ev.success);
            } else {
                transport__stream_event(t, ev.tag, ev.success);
            }
        }
        /* After every event: a completion may have started a backoff, a timeout ended one or
         * a frame's send timeout passed. A frame started by a flush on another thread does
         * not wake this one, so it also wakes every tick to check the send timeouts. */
        wake_ms = transport__raft_retry_due(t);
        int64_t tick_ms = transport__now_ms() + tick;
        wake_ms = tick_ms < wake_ms ? tick_ms : wake_ms;
    }
    return NULL;
}

int transport_start(struct transport *t)
{
    pthread_mutex_lock(&t->mu);
    if (t->state != TRANSPORT__NEW) {
        pthread_mutex_unlock(&t->mu);
        return TRANSPORT_ESTOPPED;
    }
    if (pthread_create(&t->thread, NULL, cq_main, t) != 0) {
        pthread_mutex_unlock(&t->mu);
        return TRANSPORT_ENOMEM;
    }
    t->state = TRANSPORT__RUNNING;
    pthread_mutex_unlock(&t->mu);
    /* Messages queued before start go out now. */
    transport_flush(t);
    return TRANSPORT_OK;
}

void transport_stop(struct transport *t)
{
    pthread_mutex_lock(&t->mu);
    if (t->state == TRANSPORT__NEW) {
        t->state = TRANSPORT__STOPPED;
    }
    if (t->state == TRANSPORT__STOPPING) {
        /* Another thread is stopping: wait for it. */
        while (t->state != TRANSPORT__STOPPED) {
            pthread_cond_wait(&t->cond, &t->mu);
        }
    }
    if (t->state == TRANSPORT__STOPPED) {
        pthread_mutex_unlock(&t->mu);
        return;
    }
    assert(!pthread_equal(pthread_self(), t->thread)); /* not from a callback */
    t->state = TRANSPORT__STOPPING;
    for (struct transport__call *c = t->calls; c != NULL; c = c->next) {
        grpc_call_cancel(c->call, NULL);
    }
    transport__streams_cancel(t);
    for (size_t i = 0; i < t->n_peers; i++) {
        transport__ring_clear(t->peers[i]);
    }
    /* Cancelled calls and streams complete promptly; callbacks run on the CQ thread meanwhile. */
    while (t->live_calls > 0 || t->live_streams > 0) {
        pthread_cond_wait(&t->cond, &t->mu);
    }
    pthread_mutex_unlock(&t->mu);

    grpc_completion_queue_shutdown(t->cq);
    pthread_join(t->thread, NULL);

    pthread_mutex_lock(&t->mu);
    t->state = TRANSPORT__STOPPED;
    pthread_cond_broadcast(&t->cond);
    pthread_mutex_unlock(&t->mu);
}

void transport_free(struct transport *t)
{
    if (t == NULL) {
        return;
    }
    bool started = t->state != TRANSPORT__NEW;
    transport_stop(t);
    assert(t->live_calls == 0 && t->calls == NULL && t->live_streams == 0);
    if (!started) {
        /* Never started: no call was ever created, so the queue holds no events. A started
         * queue was shut down and drained by the thread in transport_stop. */
        grpc_completion_queue_shutdown(t->cq);
        while (grpc_completion_queue_next(t->cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL).type !=
               GRPC_QUEUE_SHUTDOWN) {
        }
    }
    grpc_completion_queue_destroy(t->cq);
    for (size_t i = 0; i < t->n_peers; i++) {
        transport__ring_free(t->peers[i]);
        free(t->peers[i]);
    }
    for (size_t i = 0; i < t->n_channels; i++) {
        grpc_channel_destroy(t->channels[i]->channel);
        free(t->channels[i]);
    }
    grpc_channel_credentials_release(t->creds);
    pthread_cond_destroy(&t->cond);
    pthread_mutex_destroy(&t->mu);
    free(t);
    grpc_shutdown();
}
