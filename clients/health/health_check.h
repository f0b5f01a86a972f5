/* health_check.h - one grpc.health.v1.Health/Check call over gRPC core, with a deadline. */
#ifndef SLOTD_HEALTH_CHECK_H
#define SLOTD_HEALTH_CHECK_H

#include <grpc/grpc.h>

#include <stddef.h>

/* X(name, text): 0 is success; every other code is an operating error. */
#define HEALTH_ERRORS(X)                                                                           \
    X(HEALTH_OK, "ok")                                                                             \
    X(HEALTH_ENOMEM, "out of memory")                                                              \
    X(HEALTH_ECALL, "the call could not be started")                                               \
    X(HEALTH_ESTATUS, "the call failed")                                                           \
    X(HEALTH_EMALFORMED, "malformed response")

enum health_err {
#define HEALTH__ERR_ENUM(name, text) name,
    HEALTH_ERRORS(HEALTH__ERR_ENUM)
#undef HEALTH__ERR_ENUM
        HEALTH_ERR_COUNT
};

#define HEALTH_SERVICE_MAX 512 /* longest service name accepted, in bytes */

/* Static text for an error code ("unknown error" when out of range). */
const char *health_strerror(int err);

/* The grpc.health.v1 ServingStatus names ("UNKNOWN", "SERVING", "NOT_SERVING",
 * "SERVICE_UNKNOWN"); "?" for any other value. Static text. */
const char *health_status_name(int status);

/* Calls grpc.health.v1.Health/Check on addr (host:port, borrowed for the call) for service
 * (borrowed for the call; "" = the whole server) with a deadline of timeout_ms, over a channel
 * with creds (borrowed for the call; NULL = insecure) and, when server_name (borrowed for the
 * call) is not NULL, that name checked in the server's certificate. The caller has called
 * grpc_init(). On HEALTH_OK, *serving_status holds the
 * ServingStatus the server answered. Otherwise errmsg (borrowed for the call, errlen bytes) holds
 * a sentence such as "grpc status 14 (UNAVAILABLE): failed to connect to all addresses". */
int health_check_call(const char *addr, const char *service, int timeout_ms,
                      grpc_channel_credentials *creds, const char *server_name, int *serving_status,
                      char *errmsg, size_t errlen);

#endif /* SLOTD_HEALTH_CHECK_H */
