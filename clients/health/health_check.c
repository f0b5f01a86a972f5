/* health_check.c - one grpc.health.v1.Health/Check call, made with libslotd's call layer. */
#include "health_check.h"

#include "call.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>

#include "grpc/health/v1/health.pb-c.h"

#define HEALTH_CHECK_PATH "/grpc.health.v1.Health/Check"

SLOTD_CALL_STRERROR_DEFINE(health_strerror, HEALTH_ERRORS, HEALTH_ERR_COUNT)

const char *health_status_name(int status)
{
    return slotd_call_health_status_name(status, "?");
}

/* Unpacks the response in bb (borrowed for the call) into *serving_status. */
static int health_response_unpack(grpc_byte_buffer *bb, int *serving_status)
{
    Grpc__Health__V1__HealthCheckResponse *resp =
        (Grpc__Health__V1__HealthCheckResponse *)slotd_call_unpack(
            bb, &grpc__health__v1__health_check_response__descriptor);
    if (resp == NULL)
        return HEALTH_EMALFORMED;
    *serving_status = (int)resp->status;
    grpc__health__v1__health_check_response__free_unpacked(resp, NULL);
    return HEALTH_OK;
}

int health_check_call(const char *addr, const char *service, int timeout_ms,
                      grpc_channel_credentials *creds, const char *server_name, int *serving_status,
                      char *errmsg, size_t errlen)
{
    Grpc__Health__V1__HealthCheckRequest req = GRPC__HEALTH__V1__HEALTH_CHECK_REQUEST__INIT;
    req.service = (char *)service;
    uint8_t buf[HEALTH_SERVICE_MAX + 8]; /* the service name and its tag and length */
    if (grpc__health__v1__health_check_request__get_packed_size(&req) > sizeof(buf)) {
        snprintf(errmsg, errlen, "%s: service name longer than %d bytes", addr, HEALTH_SERVICE_MAX);
        return HEALTH_ECALL;
    }
    size_t len = grpc__health__v1__health_check_request__pack(&req, buf);
    /* gRPC's own reconnect defaults: a silent peer keeps the probe until its deadline */
    grpc_channel *channel = slotd_call_channel_create(addr, creds, server_name, false);
    struct slotd_status st;
    slotd_call_status_reset(&st);
    grpc_byte_buffer *response = NULL;
    int status =
        slotd_call_unary(channel, HEALTH_CHECK_PATH, buf, len, timeout_ms, "", &response, &st);
    int rc = HEALTH_OK;
    if (status != GRPC_STATUS_OK) {
        rc = HEALTH_ESTATUS;
        snprintf(errmsg, errlen, "%s: grpc status %d (%s): %s", addr, status,
                 slotd_grpc_status_name(status), st.message);
    } else if (response == NULL) {
        rc = HEALTH_EMALFORMED;
        snprintf(errmsg, errlen, "%s: %s (no message)", addr, health_strerror(rc));
    } else if ((rc = health_response_unpack(response, serving_status)) != HEALTH_OK) {
        snprintf(errmsg, errlen, "%s: %s (HealthCheckResponse)", addr, health_strerror(rc));
    }
    if (response)
        grpc_byte_buffer_destroy(response);
    grpc_channel_destroy(channel);
    return rc;
}
