/* health.c - grpc.health.v1.Health: Check (unary) and Watch (server streaming) on the rpc server.
 */
#include <assert.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "grpc/health/v1/health.pb-c.h"
#include "rpc_internal.h"

#define HEALTH_CHECK_PATH "/grpc.health.v1.Health/Check"
#define HEALTH_WATCH_PATH "/grpc.health.v1.Health/Watch"
#define HEALTH_SERVICE_UNKNOWN                                                                     \
    GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN
#define HEALTH_NOT_SERVING GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING

/* One Watch stream. At most one send batch is outstanding; the close batch is armed from the
 * start; the status batch is started once the stream closed and no send is outstanding. */
struct rpc__watch {
    struct rpc__tag send_tag, close_tag, status_tag;
    struct rpc_server *server;
    grpc_call *call;
    char service[RPC_METHOD_PATH_MAX];
    int last_sent;     /* status in the last message sent, -1 before the first */
    bool sending;      /* a send batch is outstanding */
    bool closed;       /* the close batch completed */
    bool finishing;    /* the status batch was started */
    bool initial_sent; /* initial metadata went with the first send */
    int cancelled;     /* RECV_CLOSE_ON_SERVER output */
    grpc_byte_buffer *out;
    grpc_slice status_details;
    struct rpc__watch *prev, *next; /* s->watches */
};

/* Status of service, or SERVICE_UNKNOWN. Under s->mu. */
static int health_status_locked(struct rpc_server *s, const char *service)
{
    for (size_t i = 0; i < s->n_health; i++) {
        if (strcmp(s->health[i].service, service) == 0) {
            return s->health[i].status;
        }
    }
    return HEALTH_SERVICE_UNKNOWN;
}

static void health_check_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    struct rpc_server *s = ctx;
    Grpc__Health__V1__HealthCheckRequest *in =
        grpc__health__v1__health_check_request__unpack(NULL, len, req);
    struct slotd_error e;
    if (in == NULL) {
        slotd_error_set(&e, SLOTD_EMALFORMED, "health: cannot decode HealthCheckRequest");
        snprintf(e.field, sizeof(e.field), "request");
        rpc_call_fail(call, &e);
        return;
    }
    pthread_mutex_lock(&s->mu);
    int status = health_status_locked(s, in->service);
    pthread_mutex_unlock(&s->mu);
    if (status == HEALTH_SERVICE_UNKNOWN) {
        slotd_error_set(&e, SLOTD_ENOT_FOUND, "health: unknown service \"%.100s\"", in->service);
        rpc_call_fail(call, &e);
    } else {
        Grpc__Health__V1__HealthCheckResponse out = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
        out.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
        rpc_call_reply(call, &out.base);
    }
    grpc__health__v1__health_check_request__free_unpacked(in, NULL);
}

int rpc__health_register(struct rpc_server *s)
{
    if (rpc_server_add_unary(s, HEALTH_CHECK_PATH, health_check_cb, s) != SLOTD_OK ||
        rpc_server_add_unary(s, HEALTH_WATCH_PATH, NULL, NULL) != SLOTD_OK) {
        return SLOTD_EINTERNAL;
    }
    for (size_t i = 0; i < s->n_methods; i++) {
        if (strcmp(s->methods[i].path, HEALTH_CHECK_PATH) == 0) {
            s->methods[i].counted = false;
        } else if (strcmp(s->methods[i].path, HEALTH_WATCH_PATH) == 0) {
            s->methods[i].counted = false;
            s->methods[i].kind = RPC__METHOD_HEALTH_WATCH;
        }
    }
    s->health[0].service[0] = '\0';
    s->health[0].status = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING;
    s->n_health = 1;
    return SLOTD_OK;
}

/* Sends the current status of w's service. Under s->mu; w not sending, closed or finishing. */
static void watch_send_locked(struct rpc__watch *w)
{
    Grpc__Health__V1__HealthCheckResponse msg = GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__INIT;
    grpc_op ops[2];
    size_t n = 0;
    int status = health_status_locked(w->server, w->service);
    msg.status = (Grpc__Health__V1__HealthCheckResponse__ServingStatus)status;
    size_t size = grpc__health__v1__health_check_response__get_packed_size(&msg);
    grpc_slice slice = grpc_slice_malloc(size);
    grpc__health__v1__health_check_response__pack(&msg, GRPC_SLICE_START_PTR(slice));
    w->out = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    memset(ops, 0, sizeof(ops));
    if (!w->initial_sent) {
        w->initial_sent = true;
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    }
    ops[n].op = GRPC_OP_SEND_MESSAGE;
    ops[n++].data.send_message.send_message = w->out;
    w->sending = true;
    w->last_sent = status;
    grpc_call_error e = grpc_call_start_batch(w->call, ops, n, &w->send_tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

/* Ends the stream with status OK. Under s->mu; closed and not sending. */
static void watch_finish_locked(struct rpc__watch *w)
{
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    w->finishing = true;
    if (!w->initial_sent) {
        w->initial_sent = true;
        ops[n++].op = GRPC_OP_SEND_INITIAL_METADATA;
    }
    ops[n].op = GRPC_OP_SEND_STATUS_FROM_SERVER;
    ops[n].data.send_status_from_server.status = GRPC_STATUS_OK;
    ops[n++].data.send_status_from_server.status_details = &w->status_details;
    grpc_call_error e = grpc_call_start_batch(w->call, ops, n, &w->status_tag, NULL);
    assert(e == GRPC_CALL_OK);
    (void)e;
}

static void watch_tag_init(struct rpc__tag *t, enum rpc__tag_kind kind, struct rpc__watch *w)
{
    t->kind = kind;
    t->owner = w;
    t->on_event = rpc__health_on_event;
}

void rpc__health_watch_start(struct rpc_server *s, struct rpc_call *c, const uint8_t *req,
                             size_t len)
{
    struct slotd_error e;
    Grpc__Health__V1__HealthCheckRequest *in =
        grpc__health__v1__health_check_request__unpack(NULL, len, req);
    if (in == NULL) {
        slotd_error_set(&e, SLOTD_EMALFORMED, "health: cannot decode HealthCheckRequest");
        snprintf(e.field, sizeof(e.field), "request");
        rpc_call_fail(c, &e);
        return;
    }
    struct rpc__watch *w = calloc(1, sizeof(*w));
    if (w == NULL) {
        slotd_error_set(&e, SLOTD_EINTERNAL, "health: out of memory");
        goto err_after_unpack;
    }
    w->server = s;
    w->last_sent = -1;
    w->status_details = grpc_empty_slice();
    snprintf(w->service, sizeof(w->service), "%s", in->service);
    watch_tag_init(&w->send_tag, RPC__TAG_WATCH_SEND, w);
    watch_tag_init(&w->close_tag, RPC__TAG_WATCH_CLOSE, w);
    watch_tag_init(&w->status_tag, RPC__TAG_WATCH_STATUS, w);

    pthread_mutex_lock(&s->mu);
    if (s->n_watches >= RPC_HEALTH_WATCHERS_MAX) {
        pthread_mutex_unlock(&s->mu);
        slotd_error_set(&e, SLOTD_EQUEUE_FULL, "health: %d watch streams open, the limit",
                        RPC_HEALTH_WATCHERS_MAX);
        e.retry_after_ms = 1000;
        goto err_after_watch;
    }
    s->n_watches++;
    s->live_calls++; /* the watch's own; c's is dropped by rpc__call_take below */
    w->next = s->watches;
    if (s->watches != NULL) {
        s->watches->prev = w;
    }
    s->watches = w;
    pthread_mutex_unlock(&s->mu);
    grpc__health__v1__health_check_request__free_unpacked(in, NULL);
    w->call = rpc__call_take(c);

    grpc_op close_op;
    memset(&close_op, 0, sizeof(close_op));
    close_op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    close_op.data.recv_close_on_server.cancelled = &w->cancelled;
    pthread_mutex_lock(&s->mu);
    grpc_call_error ce = grpc_call_start_batch(w->call, &close_op, 1, &w->close_tag, NULL);
    assert(ce == GRPC_CALL_OK);
    (void)ce;
    watch_send_locked(w);
    pthread_mutex_unlock(&s->mu);
    return;

err_after_watch:
    free(w);
err_after_unpack:
    grpc__health__v1__health_check_request__free_unpacked(in, NULL);
    rpc_call_fail(c, &e);
}

static void watch_free(struct rpc__watch *w)
{
    struct rpc_server *s = w->server;
    pthread_mutex_lock(&s->mu);
    if (w->prev != NULL) {
        w->prev->next = w->next;
    } else {
        s->watches = w->next;
    }
    if (w->next != NULL) {
        w->next->prev = w->prev;
    }
    s->n_watches--;
    pthread_mutex_unlock(&s->mu);
    grpc_call_unref(w->call);
    grpc_slice_unref(w->status_details);
    free(w);
    pthread_mutex_lock(&s->mu);
    s->live_calls--;
    pthread_cond_broadcast(&s->cond);
    pthread_mutex_unlock(&s->mu);
}

void rpc__health_on_event(struct rpc__tag *t, bool ok)
{
    struct rpc__watch *w = t->owner;
    struct rpc_server *s = w->server;
    if (t->kind == RPC__TAG_WATCH_STATUS) {
        watch_free(w);
        return;
    }
    pthread_mutex_lock(&s->mu);
    if (t->kind == RPC__TAG_WATCH_SEND) {
        grpc_byte_buffer_destroy(w->out);
        w->out = NULL;
        w->sending = false;
        /* A failed send means the stream is broken: wait for the close. */
        if (ok && !w->closed && health_status_locked(s, w->service) != w->last_sent) {
            watch_send_locked(w);
        }
    } else {
        w->closed = true;
    }
    if (w->closed && !w->sending && !w->finishing) {
        watch_finish_locked(w);
    }
    pthread_mutex_unlock(&s->mu);
}

void rpc_server_set_health(struct rpc_server *s, const char *service, int status)
{
    if (strlen(service) >= RPC_METHOD_PATH_MAX) {
        return;
    }
    pthread_mutex_lock(&s->mu);
    size_t i = 0;
    while (i < s->n_health && strcmp(s->health[i].service, service) != 0) {
        i++;
    }
    if (i == s->n_health) {
        if (s->n_health == RPC_HEALTH_SERVICES_MAX) {
            pthread_mutex_unlock(&s->mu);
            return;
        }
        snprintf(s->health[i].service, sizeof(s->health[i].service), "%s", service);
        s->n_health++;
    }
    s->health[i].status = status;
    for (struct rpc__watch *w = s->watches; w != NULL; w = w->next) {
        if (!w->sending && !w->closed && !w->finishing && w->last_sent != status &&
            strcmp(w->service, service) == 0) {
            watch_send_locked(w);
        }
    }
    pthread_mutex_unlock(&s->mu);
}

void rpc__health_all_not_serving_locked(struct rpc_server *s)
{
    for (size_t i = 0; i < s->n_health; i++) {
        s->health[i].status = HEALTH_NOT_SERVING;
    }
    for (struct rpc__watch *w = s->watches; w != NULL; w = w->next) {
        if (!w->sending && !w->closed && !w->finishing && w->last_sent != HEALTH_NOT_SERVING) {
            watch_send_locked(w);
        }
    }
}
