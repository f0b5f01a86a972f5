/* stream.c - server-streaming calls: a bounded send queue, one send in flight, close notice. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_internal.h"

/* One queued message. */
struct rpc__stream_msg {
    struct rpc__stream_msg *next;
    grpc_byte_buffer *bb;
    size_t len;
};

/* One server-streaming call. The close batch (RECV_CLOSE_ON_SERVER) is armed before the handler
 * runs and tells of cancellation, a passed deadline, a lost connection or shutdown. Messages go
 * out one send batch at a time from a FIFO queue; the status batch starts once the handler
 * finished and nothing is in flight. st is freed when the last reference goes: the handler's
 * (until rpc_stream_finish), the dispatcher's (while the handler runs) and one per batch given to
 * gRPC and not yet completed. */
struct rpc_stream {
    struct rpc__tag send_tag, close_tag, status_tag;
    struct rpc_server *server;
    /* The call and the lock guarding everything below; sh.refs: the handler's (until
     * rpc_stream_finish), the dispatcher's (while the handler runs), one per batch. */
    struct rpc__shell sh;
    pthread_cond_t cond; /* signalled when the on_close callback returns */
    struct rpc__stream_msg *head, *tail;
    /* invariant: queued_bytes == out_len + the lens of the queue */
    size_t queued_bytes;
    size_t queue_limit;
    grpc_byte_buffer *out; /* the message in flight, NULL if none */
    size_t out_len;
    bool in_handler;     /* the handler has not returned yet */
    bool broken;         /* a send failed or the call closed: nothing more can be delivered */
    bool closed;         /* the close batch completed */
    bool finished;       /* rpc_stream_finish was called */
    bool status_started; /* invariant: status_started implies finished and out == NULL */
    bool close_notified; /* on_close was called (or will not be) */
    bool in_close_cb;    /* on_close is running on close_thread */
    pthread_t close_thread;
    void (*on_close)(void *arg);
    void *on_close_arg;
    grpc_status_code code;
};

static void queue_drop_locked(struct rpc_stream *st)
{
    while (st->head != NULL) {
        struct rpc__stream_msg *m = st->head;
        st->head = m->next;
        st->queued_bytes -= m->len;
        grpc_byte_buffer_destroy(m->bb);
        free(m);
    }
    st->tail = NULL;
}

/* Drops one reference and unlocks st->sh.mu (held on entry); frees st with the last one. */
static void stream_unlock_release(struct rpc_stream *st)
{
    if (rpc__shell_unlock_release(&st->sh)) {
        assert(st->head == NULL && st->out == NULL && st->queued_bytes == 0);
        pthread_cond_destroy(&st->cond);
        rpc__shell_free(&st->sh, st);
    }
}

/* Starts a batch of ops[n] (with initial metadata in front if not sent yet) on tag. */
static bool batch_start_locked(struct rpc_stream *st, grpc_op *ops, size_t n, struct rpc__tag *tag)
{
    return rpc__shell_batch_start_locked(&st->sh, ops, n, tag, true);
}

static void status_start_locked(struct rpc_stream *st)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    rpc__status_op(&op, st->code, &st->sh.status);
    st->status_started = true;
    rpc__stream_record(st->sh.call->server, st->sh.call, st->code);
    batch_start_locked(st, &op, 1, &st->status_tag);
}

/* Moves the stream on when nothing is in flight: the next queued message, else the status once
 * finished. A broken stream drops its queue. */
static void pump_locked(struct rpc_stream *st)
{
    if (st->out != NULL || st->status_started) {
        return;
    }
    if (st->broken) {
        queue_drop_locked(st);
    }
    if (st->head != NULL) {
        struct rpc__stream_msg *m = st->head;
        st->head = m->next;
        if (st->head == NULL) {
            st->tail = NULL;
        }
        st->out = m->bb;
        st->out_len = m->len;
        free(m);
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = st->out;
        if (!batch_start_locked(st, &op, 1, &st->send_tag)) {
            grpc_byte_buffer_destroy(st->out);
            st->out = NULL;
            st->queued_bytes -= st->out_len;
            st->broken = true;
            queue_drop_locked(st);
        }
    }
    if (st->out == NULL && st->finished) {
        status_start_locked(st);
    }
}

/* Calls on_close if the stream closed, the handler returned and is not finished. Under st->sh.mu;
 * unlocks it around the callback. */
static void close_notify_locked(struct rpc_stream *st)
{
    if (!st->closed || st->in_handler || st->finished || st->close_notified ||
        st->on_close == NULL) {
        return;
    }
    st->close_notified = true;
    st->in_close_cb = true;
    st->close_thread = pthread_self();
    pthread_mutex_unlock(&st->sh.mu);
    st->on_close(st->on_close_arg); /* our reference (a batch's or the dispatcher's) keeps st */
    pthread_mutex_lock(&st->sh.mu);
    st->in_close_cb = false;
    pthread_cond_broadcast(&st->cond);
}

void rpc__stream_start(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c,
                       const uint8_t *req, size_t len)
{
    struct rpc_stream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        goto err;
    }
    if (rpc__shell_init(&st->sh, c) != 0) {
        goto err_after_alloc;
    }
    if (pthread_cond_init(&st->cond, NULL) != 0) {
        goto err_after_shell;
    }
    st->server = s;
    st->send_tag = (struct rpc__tag){RPC__TAG_STREAM_SEND, st, rpc__stream_on_event};
    st->close_tag = (struct rpc__tag){RPC__TAG_STREAM_CLOSE, st, rpc__stream_on_event};
    st->status_tag = (struct rpc__tag){RPC__TAG_STREAM_STATUS, st, rpc__stream_on_event};
    st->queue_limit = RPC_STREAM_QUEUE_BYTES_DEFAULT;
    st->sh.refs = 2; /* the handler's and ours */
    st->in_handler = true;

    pthread_mutex_lock(&st->sh.mu);
    if (!rpc__shell_close_arm_locked(&st->sh, &st->close_tag)) {
        st->broken = true; /* no close notice will come: refuse to send */
    }
    pthread_mutex_unlock(&st->sh.mu);

    m->stream_cb(m->ctx, st, req, len);

    pthread_mutex_lock(&st->sh.mu);
    st->in_handler = false;
    c->md = NULL; /* the request's metadata goes with the request */
    close_notify_locked(st);
    stream_unlock_release(st);
    return;

err_after_shell:
    rpc__shell_destroy(&st->sh);
err_after_alloc:
    free(st);
err:
    rpc__shell_start_fail(c);
}

void rpc__stream_on_event(struct rpc__tag *t, bool ok)
{
    struct rpc_stream *st = t->owner;
    pthread_mutex_lock(&st->sh.mu);
    switch (t->kind) {
    case RPC__TAG_STREAM_SEND:
        grpc_byte_buffer_destroy(st->out);
        st->out = NULL;
        st->queued_bytes -= st->out_len;
        st->out_len = 0;
        if (!ok) {
            st->broken = true; /* the close batch tells the owner */
        }
        pump_locked(st);
        break;
    case RPC__TAG_STREAM_CLOSE:
        st->closed = true;
        st->broken = true;
        pump_locked(st);
        close_notify_locked(st);
        break;
    default:
        assert(t->kind == RPC__TAG_STREAM_STATUS);
        break;
    }
    stream_unlock_release(st);
}

/* 0 when len more bytes may be queued now. Under st->sh.mu. */
static int send_check_locked(const struct rpc_stream *st, size_t len)
{
    if (st->finished || st->broken) {
        return RPC_STREAM_ECLOSED;
    }
    if (len > st->queue_limit || st->queued_bytes > st->queue_limit - len) {
        return RPC_STREAM_EFULL;
    }
    return 0;
}

static int send_check(struct rpc_stream *st, size_t len)
{
    pthread_mutex_lock(&st->sh.mu);
    int rc = send_check_locked(st, len);
    pthread_mutex_unlock(&st->sh.mu);
    return rc;
}

/* Queues slice (ownership transfers) as one message. */
static int enqueue(struct rpc_stream *st, grpc_slice slice)
{
    size_t len = GRPC_SLICE_LENGTH(slice);
    struct rpc__stream_msg *m = malloc(sizeof(*m));
    if (m == NULL) {
        grpc_slice_unref(slice);
        return RPC_STREAM_EFULL; /* out of memory: nothing queued, the caller may retry later */
    }
    m->next = NULL;
    m->len = len;
    m->bb = grpc_raw_byte_buffer_create(&slice, 1);
    grpc_slice_unref(slice);
    pthread_mutex_lock(&st->sh.mu);
    int rc = send_check_locked(st, len); /* again: the state may have changed meanwhile */
    if (rc == 0) {
        if (st->tail != NULL) {
            st->tail->next = m;
        } else {
            st->head = m;
        }
        st->tail = m;
        st->queued_bytes += len;
        pump_locked(st);
    }
    pthread_mutex_unlock(&st->sh.mu);
    if (rc != 0) {
        grpc_byte_buffer_destroy(m->bb);
        free(m);
    }
    return rc;
}

int rpc_stream_send_bytes(struct rpc_stream *st, const void *buf, size_t len)
{
    int rc = send_check(st, len);
    if (rc != 0) {
        return rc;
    }
    return enqueue(st, grpc_slice_from_copied_buffer(buf, len));
}

int rpc_stream_send(struct rpc_stream *st, const ProtobufCMessage *msg)
{
    size_t len = protobuf_c_message_get_packed_size(msg);
    int rc = send_check(st, len);
    if (rc != 0) {
        return rc;
    }
    grpc_slice slice = grpc_slice_malloc(len);
    protobuf_c_message_pack(msg, GRPC_SLICE_START_PTR(slice));
    return enqueue(st, slice);
}

size_t rpc_stream_queued_bytes(const struct rpc_stream *st)
{
    struct rpc_stream *w = (struct rpc_stream *)st; /* the lock is not part of the value */
    pthread_mutex_lock(&w->sh.mu);
    size_t n = w->queued_bytes;
    pthread_mutex_unlock(&w->sh.mu);
    return n;
}

void rpc_stream_set_queue_limit(struct rpc_stream *st, size_t bytes)
{
    pthread_mutex_lock(&st->sh.mu);
    st->queue_limit = bytes;
    pthread_mutex_unlock(&st->sh.mu);
}

void rpc_stream_set_on_close(struct rpc_stream *st, void (*cb)(void *arg), void *arg)
{
    pthread_mutex_lock(&st->sh.mu);
    assert(st->in_handler && st->on_close == NULL);
    st->on_close = cb;
    st->on_close_arg = arg;
    pthread_mutex_unlock(&st->sh.mu);
}

void rpc_stream_finish(struct rpc_stream *st, const struct slotd_error *e)
{
    assert(e == NULL || e->code != SLOTD_OK);
    pthread_mutex_lock(&st->sh.mu);
    assert(!st->finished);
    st->finished = true;
    if (e == NULL) {
        st->code = GRPC_STATUS_OK;
        rpc__status_set(&st->sh.status, "", NULL, 0);
    } else {
        st->code = (grpc_status_code)slotd_error_grpc_code(e->code);
        rpc__status_set_error(&st->sh.status, e);
    }
    /* on_close never runs after we return: wait for one already running elsewhere. */
    while (st->in_close_cb && !pthread_equal(st->close_thread, pthread_self())) {
        pthread_cond_wait(&st->cond, &st->sh.mu);
    }
    pump_locked(st);
    stream_unlock_release(st);
}

const char *rpc_stream_header(const struct rpc_stream *st, const char *key, size_t *len)
{
    return rpc_call_header(st->sh.call, key, len);
}

struct rpc_call *rpc_stream_call(struct rpc_stream *st)
{
    return st->sh.call;
}

int64_t rpc_stream_deadline_ms(const struct rpc_stream *st)
{
    return st->sh.call->deadline_ms;
}

const char *rpc_stream_method(const struct rpc_stream *st)
{
    return st->sh.call->path;
}
