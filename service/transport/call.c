/* call.c - unary gRPC client calls: start, completion, transport_call / transport_call_addr and
 * the Peer/Forward wrapper (transport_forward / transport_forward_addr). */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/support/alloc.h>
#include <grpc/support/string_util.h>
#include <grpc/support/time.h>

#include "call.h" /* slotd_call_unary_start */
#include "service/fault/fault.h"
#include "slotd/internal/v1/peer.pb-c.h"
#include "transport_internal.h"

#define TRANSPORT__DETAILS_KEY "grpc-status-details-bin"

static void call_free(struct transport__call *c)
{
    if (c->send != NULL) {
        grpc_byte_buffer_destroy(c->send);
    }
    if (c->recv != NULL) {
        grpc_byte_buffer_destroy(c->recv);
    }
    grpc_metadata_array_destroy(&c->init_md);
    grpc_metadata_array_destroy(&c->trail_md);
    if (c->has_proof) {
        grpc_slice_unref(c->proof.key);
        grpc_slice_unref(c->proof.value);
    }
    grpc_slice_unref(c->status_details);
    free(c);
}

/* Signs c's request when the transport signs this method (see transport_options.sign). */
static void call_sign(struct transport *t, struct transport__call *c, const char *method,
                      uint64_t to)
{
    const struct transport_options *o = &t->opts;
    if (o->sign == NULL || strncmp(method, o->sign_prefix, strlen(o->sign_prefix)) != 0) {
        return;
    }
    grpc_byte_buffer_reader reader;
    if (c->send == NULL || !grpc_byte_buffer_reader_init(&reader, c->send)) {
        return;
    }
    grpc_slice body = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    char proof[TRANSPORT_PROOF_MAX];
    if (o->sign(o->sign_ctx, method, to, GRPC_SLICE_START_PTR(body), GRPC_SLICE_LENGTH(body), proof,
                sizeof(proof)) == 0) {
        c->proof.key = grpc_slice_from_static_string(o->sign_header);
        c->proof.value = grpc_slice_from_copied_string(proof);
        c->has_proof = true;
    }
    grpc_slice_unref(body);
}

int transport__call_start(struct transport *t, struct transport__call *c, grpc_channel *channel,
                          const char *method, uint64_t to, gpr_timespec deadline)
{
    assert(t->state == TRANSPORT__RUNNING);
    grpc_metadata_array_init(&c->init_md);
    grpc_metadata_array_init(&c->trail_md);
    c->status = GRPC_STATUS_UNKNOWN;
    c->status_details = grpc_empty_slice();
    call_sign(t, c, method, to);
    grpc_slice path = grpc_slice_from_copied_string(method);
    c->call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, t->cq, path, NULL,
                                       deadline, NULL);
    grpc_slice_unref(path);
    if (c->call == NULL) {
        goto err;
    }
    /* No GRPC_INITIAL_METADATA_WAIT_FOR_READY: a call to a peer that cannot be reached fails
     * fast with UNAVAILABLE instead of waiting for the connection until its deadline. */
    if (slotd_call_unary_start(c->call, &c->proof, c->has_proof ? 1 : 0, c->send, &c->init_md,
                               &c->recv, &c->trail_md, &c->status, &c->status_details,
                               c) != GRPC_CALL_OK) {
        goto err_after_call;
    }
    c->prev = NULL;
    c->next = t->calls;
    if (t->calls != NULL) {
        t->calls->prev = c;
    }
    t->calls = c;
    t->live_calls++;
    return TRANSPORT_OK;

err_after_call:
    grpc_call_unref(c->call);
err:
    call_free(c);
    return TRANSPORT_ENOMEM;
}

/* Runs the USER callback of a completed call with its status, message, response and details. */
static void user_done(struct transport__call *c)
{
    int status = c->status;
    char *message = grpc_slice_to_c_string(c->status_details);
    grpc_slice resp = grpc_empty_slice();
    bool has_resp = false;
    if (status == GRPC_STATUS_OK) {
        grpc_byte_buffer_reader reader;
        if (c->recv != NULL && grpc_byte_buffer_reader_init(&reader, c->recv)) {
            resp = grpc_byte_buffer_reader_readall(&reader);
            grpc_byte_buffer_reader_destroy(&reader);
            has_resp = true;
        } else {
            /* OK without a message breaks the unary contract: report it as gRPC C++ does. */
            status = GRPC_STATUS_INTERNAL;
            gpr_free(message);
            message = gpr_strdup("transport: unary call finished OK without a response message");
        }
    }
    const uint8_t *details = NULL;
    size_t details_len = 0;
    for (size_t i = 0; i < c->trail_md.count; i++) {
        if (grpc_slice_str_cmp(c->trail_md.metadata[i].key, TRANSPORT__DETAILS_KEY) == 0) {
            details = GRPC_SLICE_START_PTR(c->trail_md.metadata[i].value);
            details_len = GRPC_SLICE_LENGTH(c->trail_md.metadata[i].value);
            break;
        }
    }
    c->cb(c->arg, status, message != NULL ? message : "",
          has_resp ? GRPC_SLICE_START_PTR(resp) : NULL, has_resp ? GRPC_SLICE_LENGTH(resp) : 0,
          details, details_len);
    grpc_slice_unref(resp);
    gpr_free(message);
}

void transport__call_complete(struct transport *t, struct transport__call *c, int success)
{
    if (!success && c->status == GRPC_STATUS_OK) {
        /* The batch itself failed (not expected for a client unary batch): never report OK. */
        c->status = GRPC_STATUS_INTERNAL;
    }
    user_done(c);
    pthread_mutex_lock(&t->mu);
    if (c->prev != NULL) {
        c->prev->next = c->next;
    } else {
        t->calls = c->next;
    }
    if (c->next != NULL) {
        c->next->prev = c->prev;
    }
    grpc_call_unref(c->call);
    assert(t->live_calls > 0);
    t->live_calls--;
    if (t->live_calls == 0) {
        pthread_cond_broadcast(&t->cond);
    }
    pthread_mutex_unlock(&t->mu);
    call_free(c);
}

/* CLOCK_MONOTONIC ms -> a gRPC deadline (INT64_MAX: none). */
static gpr_timespec deadline_from_ms(int64_t deadline_ms)
{
    if (deadline_ms == INT64_MAX) {
        return gpr_inf_future(GPR_CLOCK_MONOTONIC);
    }
    int64_t left = deadline_ms - transport__now_ms();
    if (left < 0) {
        left = 0; /* already past: the call fails with DEADLINE_EXCEEDED */
    }
    return gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(left, GPR_TIMESPAN));
}

/* Starts a USER call to peer (by_peer) or to address (TRANSPORT_EINVAL when it is NULL). */
static int user_call(struct transport *t, bool by_peer, uint64_t peer, const char *address,
                     const char *method, const void *req, size_t len, int64_t deadline_ms,
                     transport_reply_cb cb, void *arg)
{
    if (method == NULL || method[0] != '/' || strlen(method) >= TRANSPORT_METHOD_MAX ||
        cb == NULL || (req == NULL && len != 0) || (!by_peer && address == NULL)) {
        return TRANSPORT_EINVAL;
    }
    struct transport__call *c = calloc(1, sizeof(*c));
    if (c == NULL) {
        return TRANSPORT_ENOMEM;
    }
    c->kind = TRANSPORT__CALL_USER;
    c->cb = cb;
    c->arg = arg;
    grpc_slice s = len > 0 ? grpc_slice_from_copied_buffer(req, len) : grpc_empty_slice();
    c->send = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);

    pthread_mutex_lock(&t->mu);
    int rc = TRANSPORT_OK;
    grpc_channel *channel = NULL;
    if (t->state != TRANSPORT__RUNNING) {
        rc = TRANSPORT_ESTOPPED;
    } else if (by_peer) {
        struct transport__peer *p = transport__peer_find(t, peer);
        if (p == NULL) {
            rc = TRANSPORT_EUNKNOWN_PEER;
        } else {
            channel = p->chan->channel;
        }
    } else {
        struct transport__channel *chan = NULL;
        rc = transport__channel_get(t, address, &chan);
        if (rc == TRANSPORT_OK) {
            channel = chan->channel;
        }
    }
    if (rc != TRANSPORT_OK) {
        pthread_mutex_unlock(&t->mu);
        grpc_byte_buffer_destroy(c->send);
        free(c);
        return rc;
    }
    /* On failure transport__call_start frees c and its buffer. */
    rc = transport__call_start(t, c, channel, method, by_peer ? peer : 0,
                               deadline_from_ms(deadline_ms));
    if (rc == TRANSPORT_OK && deadline_ms != INT64_MAX && deadline_ms <= transport__now_ms()) {
        /* gRPC's deadline timer would race a fast reply (measured: a past deadline came back OK
         * from a local server); a deadline that has passed fails every time. c->call stays valid
         * while t->mu is held. */
        grpc_call_cancel_with_status(c->call, GRPC_STATUS_DEADLINE_EXCEEDED,
                                     "transport: the deadline passed before the call started",
                                     NULL);
    }
    if (rc == TRANSPORT_OK && by_peer && SLOTD_FAULT_NET_DROP(t->opts.node_id, peer)) {
        grpc_call_cancel_with_status(c->call, GRPC_STATUS_UNAVAILABLE, "fault: dropped", NULL);
    }
    pthread_mutex_unlock(&t->mu);
    return rc;
}

bool transport_reply_unsent(int status, const char *message)
{
    static const char pick_failed[] = "failed to connect to all addresses";
    return status == GRPC_STATUS_UNAVAILABLE && message != NULL &&
           strncmp(message, pick_failed, sizeof(pick_failed) - 1) == 0;
}

int transport_call(struct transport *t, uint64_t peer, const char *method, const void *req,
                   size_t len, int64_t deadline_ms, transport_reply_cb cb, void *arg)
{
    return user_call(t, true, peer, NULL, method, req, len, deadline_ms, cb, arg);
}

int transport_call_addr(struct transport *t, const char *address, const char *method,
                        const void *req, size_t len, int64_t deadline_ms, transport_reply_cb cb,
                        void *arg)
{
    return user_call(t, false, 0, address, method, req, len, deadline_ms, cb, arg);
}

/* ---- Forward: a client-plane call passed on to another node on the peer plane ---- */

#define TRANSPORT__FORWARD_METHOD "/slotd.internal.v1.Peer/Forward"

struct forward {
    transport_reply_cb cb;
    void *arg;
};

/* Unwraps the ForwardResponse of an OK answer; any other status is the inner call's own. */
static void forward_done(void *arg, int status, const char *message, const uint8_t *resp,
                         size_t resp_len, const uint8_t *details, size_t details_len)
{
    struct forward f = *(struct forward *)arg;
    free(arg);
    if (status != GRPC_STATUS_OK) {
        f.cb(f.arg, status, message, NULL, 0, details, details_len);
        return;
    }
    Slotd__Internal__V1__ForwardResponse *r =
        slotd__internal__v1__forward_response__unpack(NULL, resp_len, resp);
    if (r == NULL) {
        f.cb(f.arg, GRPC_STATUS_INTERNAL,
             "transport: Peer/Forward answered OK with a malformed ForwardResponse", NULL, 0, NULL,
             0);
        return;
    }
    f.cb(f.arg, GRPC_STATUS_OK, message, r->response.len ? r->response.data : (const uint8_t *)"",
         r->response.len, details, details_len);
    slotd__internal__v1__forward_response__free_unpacked(r, NULL);
}

/* Sends method(req) to peer (by_id) or address wrapped in a Peer/Forward call (user_call's
 * checks); cb gets the inner call's answer through forward_done. */
static int forward_call(struct transport *t, bool by_id, uint64_t peer, const char *address,
                        const char *method, const void *req, size_t len, int64_t deadline_ms,
                        transport_reply_cb cb, void *arg)
{
    if (method == NULL || method[0] != '/' || (req == NULL && len > 0)) {
        return TRANSPORT_EINVAL;
    }
    Slotd__Internal__V1__ForwardRequest q = SLOTD__INTERNAL__V1__FORWARD_REQUEST__INIT;
    q.method = (char *)method;
    q.request.data = (uint8_t *)req;
    q.request.len = len;
    size_t n = slotd__internal__v1__forward_request__get_packed_size(&q);
    uint8_t *buf = malloc(n ? n : 1);
    struct forward *f = malloc(sizeof(*f));
    if (buf == NULL || f == NULL) {
        free(buf);
        free(f);
        return TRANSPORT_ENOMEM;
    }
    slotd__internal__v1__forward_request__pack(&q, buf);
    f->cb = cb;
    f->arg = arg;
    int rc = user_call(t, by_id, peer, address, TRANSPORT__FORWARD_METHOD, buf, n, deadline_ms,
                       forward_done, f);
    free(buf);
    if (rc != TRANSPORT_OK) {
        free(f);
    }
    return rc;
}

int transport_forward(struct transport *t, uint64_t peer, const char *method, const void *req,
                      size_t len, int64_t deadline_ms, transport_reply_cb cb, void *arg)
{
    return forward_call(t, true, peer, NULL, method, req, len, deadline_ms, cb, arg);
}

int transport_forward_addr(struct transport *t, const char *address, const char *method,
                           const void *req, size_t len, int64_t deadline_ms, transport_reply_cb cb,
                           void *arg)
{
    return forward_call(t, false, 0, address, method, req, len, deadline_ms, cb, arg);
}
