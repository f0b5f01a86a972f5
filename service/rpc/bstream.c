/* bstream.c - bidirectional streams: frames in one at a time, items in flight, coalesced results.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_internal.h"

/* One response message being filled or waiting to be sent. */
struct rpc__bmsg {
    struct rpc__bmsg *next;
    uint8_t *buf;
    size_t len, cap;
    size_t items; /* results in it: their in-flight slots are given back once it is sent */
};

/* One bidirectional call. The close batch (RECV_CLOSE_ON_SERVER) and one RECV_MESSAGE are armed
 * at start; each frame runs on_frame on the CQ thread that received it, which may begin items
 * (rpc_bstream_item_begin). An item's result (rpc_bstream_item_done, any thread) is appended to
 * the last queued response message when it fits in RPC_BSTREAM_MSG_BYTES_MAX (coalescing what
 * became ready while a send was in flight), else to a new one; one SEND_MESSAGE is in flight at a
 * time. An item holds its in-flight slot until the message with its result was sent (or dropped);
 * the next frame is read only while inflight + frame_items_max <= inflight_max, so inflight never
 * exceeds inflight_max and a client that does not read its results is held by flow control.
 * The end: the client's half-close (OK once every item's result went out), a refused frame (its
 * error, at once), or a broken call (CANCELLED; results still to come are dropped). st is freed
 * when no batch is outstanding, every begun item is done and the status batch completed. */
struct rpc_bstream {
    struct rpc__tag recv_tag, send_tag, close_tag, status_tag;
    struct rpc_server *server;
    const struct rpc__method *method;
    /* The call (its md points at st->md for the stream's whole life) and the lock guarding
     * everything below; sh.refs = batches outstanding + items begun and not done + start's. */
    struct rpc__shell sh;
    grpc_metadata_array md;        /* a copy of the request metadata (slices referenced) */
    grpc_byte_buffer *in;          /* RECV_MESSAGE output */
    bool recv_pending;             /* invariant: at most one RECV_MESSAGE outstanding */
    bool recv_held;                /* a frame was not read because of the in-flight bound */
    bool half_closed;              /* the client sent its last frame */
    bool closed;                   /* the close batch completed: deliver nothing more */
    bool ending;                   /* the end is decided (code and status set) */
    bool status_started;           /* invariant: status_started implies ending and out == NULL */
    size_t inflight;               /* items begun whose result is not yet sent or dropped */
    size_t inflight_peak;          /* highest inflight seen */
    struct rpc__bmsg *head, *tail; /* queued response messages */
    grpc_byte_buffer *out;         /* the message in flight, NULL if none */
    size_t out_items;
    grpc_status_code code;
};

static void bmsg_free(struct rpc__bmsg *m)
{
    free(m->buf);
    free(m);
}

static void queue_drop_locked(struct rpc_bstream *st)
{
    while (st->head != NULL) {
        struct rpc__bmsg *m = st->head;
        st->head = m->next;
        st->inflight -= m->items;
        bmsg_free(m);
    }
    st->tail = NULL;
}

static void md_free(grpc_metadata_array *md)
{
    for (size_t i = 0; i < md->count; i++) {
        grpc_slice_unref(md->metadata[i].key);
        grpc_slice_unref(md->metadata[i].value);
    }
    grpc_metadata_array_destroy(md);
}

/* Drops one reference and unlocks st->sh.mu (held on entry); frees st with the last one. */
static void unlock_release(struct rpc_bstream *st)
{
    if (rpc__shell_unlock_release(&st->sh)) {
        assert(st->head == NULL && st->out == NULL);
        st->sh.call->md = NULL;
        md_free(&st->md);
        rpc__shell_free(&st->sh, st);
    }
}

static void recv_arm_locked(struct rpc_bstream *st)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &st->in;
    st->recv_pending = rpc__shell_batch_start_locked(&st->sh, &op, 1, &st->recv_tag, false);
}

/* Decides the end (once): code with e's message and details (e may be NULL: message). */
static void end_set_locked(struct rpc_bstream *st, grpc_status_code code, const char *message,
                           const struct slotd_error *e)
{
    if (st->ending) {
        return;
    }
    st->ending = true;
    st->code = code;
    if (e != NULL) {
        rpc__status_set_error(&st->sh.status, e);
    } else {
        rpc__status_set(&st->sh.status, message, NULL, 0);
    }
    if (code != GRPC_STATUS_OK) {
        queue_drop_locked(st); /* an error end sends no more results */
    }
}

/* May the next frame be read now? */
static bool recv_allowed_locked(const struct rpc_bstream *st)
{
    const struct rpc_bstream_limits *l = &st->method->bstream_limits;
    return !st->ending && !st->closed && !st->half_closed &&
           st->inflight + l->frame_items_max <= l->inflight_max;
}

/* Moves the stream on: the next queued message when nothing is in flight, a held read when the
 * bound allows it, the status once the end is decided and everything owed went out. */
static void pump_locked(struct rpc_bstream *st)
{
    if (st->status_started) {
        return;
    }
    if (st->closed) {
        queue_drop_locked(st);
        end_set_locked(st, GRPC_STATUS_CANCELLED, "stream: the call ended", NULL);
    }
    if (st->out == NULL && st->head != NULL) {
        struct rpc__bmsg *m = st->head;
        st->head = m->next;
        if (st->head == NULL) {
            st->tail = NULL;
        }
        grpc_slice slice = grpc_slice_from_copied_buffer((const char *)m->buf, m->len);
        st->out = grpc_raw_byte_buffer_create(&slice, 1);
        grpc_slice_unref(slice);
        st->out_items = m->items;
        bmsg_free(m);
        grpc_op op;
        memset(&op, 0, sizeof(op));
        op.op = GRPC_OP_SEND_MESSAGE;
        op.data.send_message.send_message = st->out;
        if (!rpc__shell_batch_start_locked(&st->sh, &op, 1, &st->send_tag, true)) {
            grpc_byte_buffer_destroy(st->out);
            st->out = NULL;
            st->inflight -= st->out_items;
            st->out_items = 0;
            end_set_locked(st, GRPC_STATUS_INTERNAL, "stream: cannot send", NULL);
        }
    }
    if (st->recv_held && !st->recv_pending && recv_allowed_locked(st)) {
        st->recv_held = false;
        recv_arm_locked(st);
        if (!st->recv_pending) {
            end_set_locked(st, GRPC_STATUS_INTERNAL, "stream: cannot read the next frame", NULL);
        }
    }
    if (st->half_closed && st->inflight == 0) {
        end_set_locked(st, GRPC_STATUS_OK, "", NULL);
    }
    if (st->ending && st->out == NULL && (st->code != GRPC_STATUS_OK || st->inflight == 0)) {
        grpc_op op;
        memset(&op, 0, sizeof(op));
        rpc__status_op(&op, st->code, &st->sh.status);
        st->status_started = true;
        rpc__stream_record(st->server, st->sh.call, st->code);
        rpc__shell_batch_start_locked(&st->sh, &op, 1, &st->status_tag, true);
    }
}

static void on_recv(struct rpc_bstream *st, bool ok)
{
    pthread_mutex_lock(&st->sh.mu);
    st->recv_pending = false;
    grpc_byte_buffer *in = st->in;
    st->in = NULL;
    if (st->ending || st->closed || !ok || in == NULL) {
        if (in != NULL) {
            grpc_byte_buffer_destroy(in);
        } else if (ok && !st->ending && !st->closed) {
            st->half_closed = true; /* ok with no message: the client's last frame came */
        } else if (!ok) {
            end_set_locked(st, GRPC_STATUS_CANCELLED, "stream: the call ended", NULL);
        }
        pump_locked(st);
        unlock_release(st);
        return;
    }
    pthread_mutex_unlock(&st->sh.mu);

    struct slotd_error e;
    int rc = -1;
    grpc_slice body;
    if (rpc__frame_read(st->server, in, "message", &body, &e) == 0) {
        rc = st->method->bstream_frame(st->method->ctx, st, RPC__BODY_PTR(body),
                                       GRPC_SLICE_LENGTH(body), &e);
        grpc_slice_unref(body);
        rpc__frame_record(st->server, st->sh.call, rc == 0);
    }

    pthread_mutex_lock(&st->sh.mu);
    if (rc != 0) {
        end_set_locked(st, (grpc_status_code)slotd_error_grpc_code(e.code), NULL, &e);
    } else {
        st->recv_held = true; /* pump reads on when the bound allows it */
    }
    pump_locked(st);
    unlock_release(st);
}

void rpc__bstream_start(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c)
{
    struct rpc_bstream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        goto err;
    }
    if (rpc__shell_init(&st->sh, c) != 0) {
        goto err_after_alloc;
    }
    grpc_metadata_array_init(&st->md);
    if (c->md != NULL && c->md->count > 0) {
        st->md.metadata = calloc(c->md->count, sizeof(grpc_metadata));
        if (st->md.metadata == NULL) {
            goto err_after_shell;
        }
        st->md.capacity = c->md->count;
        for (size_t i = 0; i < c->md->count; i++) {
            st->md.metadata[i].key = grpc_slice_ref(c->md->metadata[i].key);
            st->md.metadata[i].value = grpc_slice_ref(c->md->metadata[i].value);
        }
        st->md.count = c->md->count;
    }
    c->md = &st->md; /* rpc_call_header answers for the stream's whole life */
    st->server = s;
    st->method = m;
    st->recv_tag = (struct rpc__tag){RPC__TAG_BSTREAM_RECV, st, rpc__bstream_on_event};
    st->send_tag = (struct rpc__tag){RPC__TAG_BSTREAM_SEND, st, rpc__bstream_on_event};
    st->close_tag = (struct rpc__tag){RPC__TAG_BSTREAM_CLOSE, st, rpc__bstream_on_event};
    st->status_tag = (struct rpc__tag){RPC__TAG_BSTREAM_STATUS, st, rpc__bstream_on_event};

    pthread_mutex_lock(&st->sh.mu);
    st->sh.refs = 1; /* ours until the two batches are started */
    if (rpc__shell_close_arm_locked(&st->sh, &st->close_tag)) {
        recv_arm_locked(st);
    }
    if (!st->recv_pending) {
        end_set_locked(st, GRPC_STATUS_INTERNAL, "stream: cannot read frames", NULL);
        pump_locked(st);
    }
    unlock_release(st);
    return;

err_after_shell:
    grpc_metadata_array_destroy(&st->md);
    rpc__shell_destroy(&st->sh);
err_after_alloc:
    free(st);
err:
    rpc__shell_start_fail(c);
}

void rpc__bstream_on_event(struct rpc__tag *t, bool ok)
{
    struct rpc_bstream *st = t->owner;
    if (t->kind == RPC__TAG_BSTREAM_RECV) {
        on_recv(st, ok);
        return;
    }
    pthread_mutex_lock(&st->sh.mu);
    switch (t->kind) {
    case RPC__TAG_BSTREAM_SEND:
        grpc_byte_buffer_destroy(st->out);
        st->out = NULL;
        st->inflight -= st->out_items;
        st->out_items = 0;
        if (!ok) {
            end_set_locked(st, GRPC_STATUS_CANCELLED, "stream: the call ended", NULL);
        }
        pump_locked(st);
        break;
    case RPC__TAG_BSTREAM_CLOSE:
        st->closed = true;
        pump_locked(st);
        break;
    default:
        assert(t->kind == RPC__TAG_BSTREAM_STATUS);
        break;
    }
    unlock_release(st);
}

int rpc_bstream_item_begin(struct rpc_bstream *st)
{
    pthread_mutex_lock(&st->sh.mu);
    int rc = -1;
    if (st->inflight < st->method->bstream_limits.inflight_max) {
        st->inflight++;
        if (st->inflight > st->inflight_peak) {
            st->inflight_peak = st->inflight;
        }
        st->sh.refs++;
        rc = 0;
    }
    pthread_mutex_unlock(&st->sh.mu);
    return rc;
}

int rpc_bstream_items_check(const struct rpc_bstream *st, size_t n, struct slotd_error *err)
{
    size_t max = st->method->bstream_limits.frame_items_max; /* read-only after start */
    if (n <= max) {
        return 0;
    }
    slotd_error_field(err, "items", max, "items: %zu items in one message exceeds the limit of %zu",
                      n, max);
    return -1;
}

/* Appends part to the tail message when it fits, else to a new one. 0, or -1 out of memory. */
static int queue_append_locked(struct rpc_bstream *st, const void *part, size_t len)
{
    struct rpc__bmsg *m = st->tail;
    if (m == NULL || m->len + len > RPC_BSTREAM_MSG_BYTES_MAX) {
        m = calloc(1, sizeof(*m));
        if (m == NULL) {
            return -1;
        }
        if (st->tail != NULL) {
            st->tail->next = m;
        } else {
            st->head = m;
        }
        st->tail = m;
    }
    if (m->len + len > m->cap) {
        size_t cap = m->cap ? m->cap : 256;
        while (cap < m->len + len) {
            cap *= 2;
        }
        uint8_t *b = realloc(m->buf, cap);
        if (b == NULL) {
            return -1;
        }
        m->buf = b;
        m->cap = cap;
    }
    memcpy(m->buf + m->len, part, len);
    m->len += len;
    m->items++;
    return 0;
}

void rpc_bstream_item_done(struct rpc_bstream *st, const void *part, size_t len)
{
    pthread_mutex_lock(&st->sh.mu);
    bool deliver = !(st->ending && st->code != GRPC_STATUS_OK) && !st->closed;
    if (!deliver || len > RPC_BSTREAM_MSG_BYTES_MAX || queue_append_locked(st, part, len) != 0) {
        if (deliver) {
            end_set_locked(st, GRPC_STATUS_INTERNAL, "stream: cannot queue a result", NULL);
        }
        st->inflight--; /* dropped: its slot is free at once */
    }
    pump_locked(st);
    unlock_release(st); /* the item's reference */
}

struct rpc_call *rpc_bstream_call(struct rpc_bstream *st)
{
    return st->sh.call;
}

size_t rpc_bstream_inflight_peak(struct rpc_bstream *st)
{
    pthread_mutex_lock(&st->sh.mu);
    size_t n = st->inflight_peak;
    pthread_mutex_unlock(&st->sh.mu);
    return n;
}
