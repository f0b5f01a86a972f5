/* cstream.c - client-streaming calls: one RECV_MESSAGE armed at a time, a callback per frame. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "rpc_internal.h"

/* One client-streaming call. The close batch (RECV_CLOSE_ON_SERVER) and one RECV_MESSAGE are
 * armed at start; each frame runs on_frame on the CQ thread that received it, then RECV_MESSAGE
 * is armed again, so at most one frame of a stream is processed at a time; once the close batch
 * completed (the client cancelled, the connection is gone) frames gRPC still delivers are
 * dropped. The end (the client's
 * half-close: OK with an empty response message; a refused frame: its error; a broken call:
 * CANCELLED) starts the one status batch. st is freed, after on_end, when its last batch
 * completed. */
struct rpc_cstream {
    struct rpc__tag recv_tag, close_tag, status_tag;
    struct rpc_server *server;
    const struct rpc__method *method;
    /* The call and the lock guarding everything below (events may come on several threads);
     * sh.refs = batches given to gRPC and not yet completed (+ start's). */
    struct rpc__shell sh;
    void *data;           /* rpc_cstream_set_data; the handler's, freed by on_end */
    grpc_byte_buffer *in; /* RECV_MESSAGE output */
    bool recv_pending;    /* invariant: at most one RECV_MESSAGE outstanding */
    bool status_started;  /* the status batch was started (the stream is over) */
    bool closed;          /* the close batch completed: the call is over, read no more */
    grpc_status_code code;
    grpc_byte_buffer *response; /* the empty response message of an OK end */
};

/* Drops one completed batch and unlocks st->sh.mu (held on entry); after the last, runs on_end
 * and frees st. */
static void batch_done_unlock(struct rpc_cstream *st)
{
    if (!rpc__shell_unlock_release(&st->sh)) {
        return;
    }
    if (st->method->cstream_end != NULL) {
        st->method->cstream_end(st->method->ctx, st);
    }
    if (st->response != NULL) {
        grpc_byte_buffer_destroy(st->response);
    }
    rpc__shell_free(&st->sh, st);
}

static void recv_arm_locked(struct rpc_cstream *st)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_MESSAGE;
    op.data.recv_message.recv_message = &st->in;
    st->recv_pending = rpc__shell_batch_start_locked(&st->sh, &op, 1, &st->recv_tag, false);
}

/* Ends the stream with code (and e's message and details when e is not NULL; else message):
 * initial metadata, the empty response when OK, and the status, in one batch. Once. */
static void end_locked(struct rpc_cstream *st, grpc_status_code code, const char *message,
                       const struct slotd_error *e)
{
    if (st->status_started) {
        return;
    }
    st->status_started = true;
    st->code = code;
    if (e != NULL) {
        rpc__status_set_error(&st->sh.status, e);
    } else {
        rpc__status_set(&st->sh.status, message, NULL, 0);
    }
    grpc_op ops[2];
    size_t n = 0;
    memset(ops, 0, sizeof(ops));
    if (code == GRPC_STATUS_OK) {
        grpc_slice empty = grpc_empty_slice();
        st->response = grpc_raw_byte_buffer_create(&empty, 1);
        ops[n].op = GRPC_OP_SEND_MESSAGE;
        ops[n++].data.send_message.send_message = st->response;
    }
    rpc__status_op(&ops[n++], code, &st->sh.status);
    rpc__shell_batch_start_locked(&st->sh, ops, n, &st->status_tag, true);
}

/* A frame arrived (or the end of the client's half): runs on_frame outside the lock. */
static void on_recv(struct rpc_cstream *st, bool ok)
{
    pthread_mutex_lock(&st->sh.mu);
    st->recv_pending = false;
    grpc_byte_buffer *in = st->in;
    st->in = NULL;
    if (st->status_started) {
        if (in != NULL) {
            grpc_byte_buffer_destroy(in);
        }
        batch_done_unlock(st);
        return;
    }
    if (!ok || in == NULL || st->closed) {
        /* ok with no message: the client half-closed; not ok, or the close batch came back
         * (client cancel, connection lost, shutdown): the call broke and frames gRPC still
         * holds are not handed over (the client's status is decided, this one is not seen) */
        if (in != NULL) {
            grpc_byte_buffer_destroy(in);
            in = NULL;
            ok = false;
        }
        end_locked(st, ok ? GRPC_STATUS_OK : GRPC_STATUS_CANCELLED,
                   ok ? "" : "stream: the call ended", NULL);
        batch_done_unlock(st);
        return;
    }
    pthread_mutex_unlock(&st->sh.mu);

    struct slotd_error e;
    int rc = -1;
    grpc_slice body;
    if (rpc__frame_read(st->server, in, "frame", &body, &e) == 0) {
        rc = st->method->cstream_frame(st->method->ctx, st, RPC__BODY_PTR(body),
                                       GRPC_SLICE_LENGTH(body), &e);
        grpc_slice_unref(body);
        rpc__frame_record(st->server, st->sh.call, rc == 0);
    }

    pthread_mutex_lock(&st->sh.mu);
    if (rc != 0) {
        end_locked(st, (grpc_status_code)slotd_error_grpc_code(e.code), NULL, &e);
    } else if (!st->status_started) {
        recv_arm_locked(st);
        if (!st->recv_pending) {
            end_locked(st, GRPC_STATUS_INTERNAL, "stream: cannot read the next frame", NULL);
        }
    }
    batch_done_unlock(st);
}

void rpc__cstream_start(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c)
{
    struct rpc_cstream *st = calloc(1, sizeof(*st));
    if (st == NULL) {
        goto err;
    }
    if (rpc__shell_init(&st->sh, c) != 0) {
        goto err_after_alloc;
    }
    st->server = s;
    st->method = m;
    st->recv_tag = (struct rpc__tag){RPC__TAG_CSTREAM_RECV, st, rpc__cstream_on_event};
    st->close_tag = (struct rpc__tag){RPC__TAG_CSTREAM_CLOSE, st, rpc__cstream_on_event};
    st->status_tag = (struct rpc__tag){RPC__TAG_CSTREAM_STATUS, st, rpc__cstream_on_event};
    c->md = NULL; /* the request's metadata is not kept: frames carry what a handler needs */

    pthread_mutex_lock(&st->sh.mu);
    st->sh.refs = 1; /* ours until the two batches are started */
    if (rpc__shell_close_arm_locked(&st->sh, &st->close_tag)) {
        recv_arm_locked(st);
    }
    if (!st->recv_pending) {
        end_locked(st, GRPC_STATUS_INTERNAL, "stream: cannot read frames", NULL);
    }
    batch_done_unlock(st);
    return;

err_after_alloc:
    free(st);
err:
    rpc__shell_start_fail(c);
}

void rpc__cstream_on_event(struct rpc__tag *t, bool ok)
{
    struct rpc_cstream *st = t->owner;
    if (t->kind == RPC__TAG_CSTREAM_RECV) {
        on_recv(st, ok);
        return;
    }
    pthread_mutex_lock(&st->sh.mu);
    /* The close batch: the call is over (status sent, client cancel, connection gone, shutdown);
     * the next RECV_MESSAGE completion ends the stream. The status batch: nothing. */
    if (t->kind == RPC__TAG_CSTREAM_CLOSE) {
        st->closed = true;
    }
    batch_done_unlock(st);
}

struct rpc_call *rpc_cstream_call(struct rpc_cstream *st)
{
    return st->sh.call;
}

void rpc_cstream_set_data(struct rpc_cstream *st, void *data)
{
    st->data = data;
}

void *rpc_cstream_data(const struct rpc_cstream *st)
{
    return st->data;
}
