/* shell.c - what the stream kinds share of a call: batches, the close batch, frame reads, release.
 */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>

#include "rpc_internal.h"

int rpc__shell_init(struct rpc__shell *sh, struct rpc_call *c)
{
    if (pthread_mutex_init(&sh->mu, NULL) != 0) {
        return -1;
    }
    sh->call = c;
    sh->refs = 0;
    sh->initial_sent = false;
    sh->cancelled = 0;
    rpc__status_init(&sh->status);
    return 0;
}

void rpc__shell_destroy(struct rpc__shell *sh)
{
    rpc__status_free(&sh->status);
    pthread_mutex_destroy(&sh->mu);
}

bool rpc__shell_batch_start_locked(struct rpc__shell *sh, const grpc_op *ops, size_t n,
                                   struct rpc__tag *tag, bool with_initial)
{
    grpc_op all[4];
    size_t k = 0;
    memset(all, 0, sizeof(all));
    if (with_initial && !sh->initial_sent) {
        all[k++].op = GRPC_OP_SEND_INITIAL_METADATA;
    }
    assert(k + n <= sizeof(all) / sizeof(all[0]));
    memcpy(&all[k], ops, n * sizeof(ops[0]));
    grpc_call_error e = grpc_call_start_batch(sh->call->call, all, k + n, tag, NULL);
    /* Only misuse (two batches of one op type, ops after the status) can fail here. */
    assert(e == GRPC_CALL_OK);
    if (e != GRPC_CALL_OK) {
        return false;
    }
    if (with_initial) {
        sh->initial_sent = true;
    }
    sh->refs++;
    return true;
}

bool rpc__shell_close_arm_locked(struct rpc__shell *sh, struct rpc__tag *tag)
{
    grpc_op op;
    memset(&op, 0, sizeof(op));
    op.op = GRPC_OP_RECV_CLOSE_ON_SERVER;
    op.data.recv_close_on_server.cancelled = &sh->cancelled;
    return rpc__shell_batch_start_locked(sh, &op, 1, tag, false);
}

bool rpc__bytes_flatten(grpc_byte_buffer *bb, grpc_slice *body)
{
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb)) {
        return false;
    }
    *body = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    return true;
}

int rpc__frame_read(const struct rpc_server *s, grpc_byte_buffer *in, const char *noun,
                    grpc_slice *body, struct slotd_error *e)
{
    int rc = -1;
    size_t len = grpc_byte_buffer_length(in);
    size_t max = s->opts.max_request_bytes;
    if (len > max) {
        slotd_error_field(e, "request", max, "request: a %s of %zu bytes exceeds the limit of %zu",
                          noun, len, max);
    } else if (!rpc__bytes_flatten(in, body)) {
        slotd_error_set(e, SLOTD_EMALFORMED, "request: cannot read the %s", noun);
    } else {
        rc = 0;
    }
    grpc_byte_buffer_destroy(in);
    return rc;
}

bool rpc__shell_unlock_release(struct rpc__shell *sh)
{
    assert(sh->refs > 0);
    bool last = --sh->refs == 0;
    pthread_mutex_unlock(&sh->mu);
    return last;
}

void rpc__shell_free(struct rpc__shell *sh, void *owner)
{
    struct rpc_call *c = sh->call;
    rpc__shell_destroy(sh);
    free(owner);
    rpc__call_uncount(c);
    rpc__call_free(c); /* last: shutdown may proceed once the live-call count drops */
}

void rpc__shell_start_fail(struct rpc_call *c)
{
    struct slotd_error e;
    slotd_error_set(&e, SLOTD_EINTERNAL, "stream: out of memory");
    rpc_call_fail(c, &e);
}
