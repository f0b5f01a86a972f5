/* echo.c - the echo ceiling: a unary method answering its request bytes, no runtime behind it. */
#include "rpc.h"

/* Runs on the completion-queue thread that decoded the call and finishes it there: the request
 * path of the rpc layer (dispatch, limits, one final batch) and nothing else. */
static void echo_cb(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len)
{
    (void)ctx;
    rpc_call_reply_bytes(call, req, len);
}

int rpc_server_add_echo(struct rpc_server *s)
{
    return rpc_server_add_unary(s, RPC_ECHO_METHOD, echo_cb, NULL);
}
