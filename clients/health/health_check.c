/* health_check.c - one grpc.health.v1.Health/Check call over gRPC core, with a deadline. */
#include "health_check.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <grpc/byte_buffer_reader.h>
#include <grpc/grpc.h>
#include <grpc/grpc_security.h>
#include <grpc/support/alloc.h>
#include <grpc/support/time.h>

#include "grpc/health/v1/health.pb-c.h"

#define HEALTH_CHECK_PATH "/grpc.health.v1.Health/Check"
#define HEALTH_CQ_GRACE_MS 1000 /* extra wait for the batch after the call's own deadline */

static const char *const health_err_text[] = {
#define HEALTH__ERR_TEXT(name, text) text,
    HEALTH_ERRORS(HEALTH__ERR_TEXT)
#undef HEALTH__ERR_TEXT
};

const char *health_strerror(int err)
{
    if (err < 0 || err >= HEALTH_ERR_COUNT)
        return "unknown error";
    return health_err_text[err];
}

const char *health_status_name(int status)
{
    switch (status) {
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__UNKNOWN:
        return "UNKNOWN";
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING:
        return "SERVING";
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__NOT_SERVING:
        return "NOT_SERVING";
    case GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVICE_UNKNOWN:
        return "SERVICE_UNKNOWN";
    default:
        return "?";
    }
}

static const char *grpc_status_name(grpc_status_code code)
{
    static const char *const names[] = {"OK",
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
                                        "UNAUTHENTICATED"};
    if ((unsigned)code < sizeof(names) / sizeof(names[0]))
        return names[code];
    return "?";
}

/* The packed HealthCheckRequest for service as a byte buffer (caller frees with
 * grpc_byte_buffer_destroy()), or NULL when out of memory. */
static grpc_byte_buffer *health_request_pack(const char *service)
{
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    req.service = (char *)service;
    size_t len = grpc__health__v1__health_check_request__get_packed_size(&req);
    grpc_slice s = grpc_slice_malloc(len);
    grpc__health__v1__health_check_request__pack(&req, GRPC_SLICE_START_PTR(s));
    grpc_byte_buffer *bb = grpc_raw_byte_buffer_create(&s, 1);
    grpc_slice_unref(s);
    return bb;
}

/* Unpacks the response in bb (borrowed for the call) into *serving_status. */
static int health_response_unpack(grpc_byte_buffer *bb, int *serving_status)
{
    grpc_byte_buffer_reader reader;
    if (!grpc_byte_buffer_reader_init(&reader, bb))
        return HEALTH_EMALFORMED;
    grpc_slice all = grpc_byte_buffer_reader_readall(&reader);
    grpc_byte_buffer_reader_destroy(&reader);
    Grpc__Health__V1__HealthCheckResponse *resp = grpc__health__v1__health_check_response__unpack(
        NULL, GRPC_SLICE_LENGTH(all), GRPC_SLICE_START_PTR(all));
    grpc_slice_unref(all);
    if (resp == NULL)
        return HEALTH_EMALFORMED;
    *serving_status = (int)resp->status;
    grpc__health__v1__health_check_response__free_unpacked(resp, NULL);
    return HEALTH_OK;
}

/* Waits for the one batch tag on cq until deadline; true when it completed. */
static bool health_batch_wait(grpc_completion_queue *cq, void *tag, gpr_timespec deadline)
{
    grpc_event ev = grpc_completion_queue_next(cq, deadline, NULL);
    return ev.type == GRPC_OP_COMPLETE && ev.tag == tag;
}

/* Shuts cq down and drains it (bounded by the events of one call), then destroys it. */
static void health_cq_destroy(grpc_completion_queue *cq)
{
    grpc_completion_queue_shutdown(cq);
    for (int i = 0; i < 16; i++) {
        grpc_event ev = grpc_completion_queue_next(cq, gpr_inf_future(GPR_CLOCK_MONOTONIC), NULL);
        if (ev.type == GRPC_QUEUE_SHUTDOWN)
            break;
    }
    grpc_completion_queue_destroy(cq);
}

int health_check_call(const char *addr, const char *service, int timeout_ms,
                      grpc_channel_credentials *creds, const char *server_name, int *serving_status,
                      char *errmsg, size_t errlen)
{
    int rc = HEALTH_ECALL;
    gpr_timespec deadline =
        gpr_time_add(gpr_now(GPR_CLOCK_MONOTONIC), gpr_time_from_millis(timeout_ms, GPR_TIMESPAN));
    grpc_arg name_arg = {.type = GRPC_ARG_STRING,
                         .key = (char *)GRPC_SSL_TARGET_NAME_OVERRIDE_ARG,
                         .value.string = (char *)server_name};
    grpc_channel_args args = {1, &name_arg};
    grpc_channel_credentials *insecure = creds ? NULL : grpc_insecure_credentials_create();
    grpc_channel *channel =
        grpc_channel_create(addr, creds ? creds : insecure, server_name ? &args : NULL);
    if (insecure)
        grpc_channel_credentials_release(insecure);
    grpc_completion_queue *cq = grpc_completion_queue_create_for_next(NULL);
    grpc_call *call = grpc_channel_create_call(channel, NULL, GRPC_PROPAGATE_DEFAULTS, cq,
                                               grpc_slice_from_static_string(HEALTH_CHECK_PATH),
                                               NULL, deadline, NULL);
    if (call == NULL) {
        snprintf(errmsg, errlen, "%s: cannot create the call", addr);
        goto err_after_cq;
    }
    grpc_byte_buffer *request = health_request_pack(service);
    if (request == NULL) {
        rc = HEALTH_ENOMEM;
        snprintf(errmsg, errlen, "%s", health_strerror(rc));
        goto err_after_call;
    }

    grpc_metadata_array initial_md, trailing_md;
    grpc_metadata_array_init(&initial_md);
    grpc_metadata_array_init(&trailing_md);
    grpc_byte_buffer *response = NULL;
    grpc_status_code status = GRPC_STATUS_UNKNOWN;
    grpc_slice details = grpc_empty_slice();
    grpc_op ops[6];
    memset(ops, 0, sizeof(ops));
    ops[0].op = GRPC_OP_SEND_INITIAL_METADATA;
    ops[1].op = GRPC_OP_SEND_MESSAGE;
    ops[1].data.send_message.send_message = request;
    ops[2].op = GRPC_OP_SEND_CLOSE_FROM_CLIENT;
    ops[3].op = GRPC_OP_RECV_INITIAL_METADATA;
    ops[3].data.recv_initial_metadata.recv_initial_metadata = &initial_md;
    ops[4].op = GRPC_OP_RECV_MESSAGE;
    ops[4].data.recv_message.recv_message = &response;
    ops[5].op = GRPC_OP_RECV_STATUS_ON_CLIENT;
    ops[5].data.recv_status_on_client.trailing_metadata = &trailing_md;
    ops[5].data.recv_status_on_client.status = &status;
    ops[5].data.recv_status_on_client.status_details = &details;
    void *tag = (void *)(uintptr_t)1;
    if (grpc_call_start_batch(call, ops, 6, tag, NULL) != GRPC_CALL_OK) {
        snprintf(errmsg, errlen, "%s: cannot start the call", addr);
        goto err_after_request;
    }
    /* The call's deadline ends the batch; the grace only covers a stalled library. */
    gpr_timespec wait_until =
        gpr_time_add(deadline, gpr_time_from_millis(HEALTH_CQ_GRACE_MS, GPR_TIMESPAN));
    if (!health_batch_wait(cq, tag, wait_until)) {
        grpc_call_cancel(call, NULL);
        health_batch_wait(cq, tag, gpr_inf_future(GPR_CLOCK_MONOTONIC));
        rc = HEALTH_ETIMEOUT;
        snprintf(errmsg, errlen, "%s: %s", addr, health_strerror(rc));
        goto err_after_batch;
    }
    if (status != GRPC_STATUS_OK) {
        rc = HEALTH_ESTATUS;
        char *text = grpc_slice_to_c_string(details);
        snprintf(errmsg, errlen, "%s: grpc status %d (%s): %s", addr, (int)status,
                 grpc_status_name(status), text);
        gpr_free(text);
        goto err_after_batch;
    }
    if (response == NULL) {
        rc = HEALTH_EMALFORMED;
        snprintf(errmsg, errlen, "%s: %s (no message)", addr, health_strerror(rc));
        goto err_after_batch;
    }
    rc = health_response_unpack(response, serving_status);
    /* Success and failure release the same things: fall through the ladder. */
    if (rc != HEALTH_OK)
        snprintf(errmsg, errlen, "%s: %s (HealthCheckResponse)", addr, health_strerror(rc));

err_after_batch:
    if (response != NULL)
        grpc_byte_buffer_destroy(response);
    grpc_slice_unref(details);
err_after_request:
    grpc_metadata_array_destroy(&initial_md);
    grpc_metadata_array_destroy(&trailing_md);
    grpc_byte_buffer_destroy(request);
err_after_call:
    grpc_call_unref(call);
err_after_cq:
    health_cq_destroy(cq);
    grpc_channel_destroy(channel);
    return rc;
}
