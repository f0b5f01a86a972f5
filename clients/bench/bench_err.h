/* bench_err.h - slotbench's error codes (one X-macro table), bench_strerror() and gRPC status
 * names. */
#ifndef SLOTD_BENCH_ERR_H
#define SLOTD_BENCH_ERR_H

/* X(name, text): 0 is success; every other code is an operating error. */
#define BENCH_ERRORS(X)                                                                            \
    X(BENCH_OK, "ok")                                                                              \
    X(BENCH_EUSAGE, "usage error")                                                                 \
    X(BENCH_ENOMEM, "out of memory")                                                               \
    X(BENCH_ECONNECT, "could not connect")                                                         \
    X(BENCH_ETHREAD, "could not start a client thread")                                            \
    X(BENCH_EMALFORMED, "malformed response")

enum bench_err {
#define BENCH__ERR_ENUM(name, text) name,
    BENCH_ERRORS(BENCH__ERR_ENUM)
#undef BENCH__ERR_ENUM
        BENCH_ERR_COUNT
};

/* Static text for an error code ("unknown error" when out of range). */
const char *bench_strerror(int err);

/* gRPC status codes 0..16; anything else is counted under BENCH_STATUS_OTHER. */
#define BENCH_STATUS_OTHER 17
#define BENCH_STATUS_SLOTS 18

/* Static name of a gRPC status code ("UNAVAILABLE"); "OTHER" for BENCH_STATUS_OTHER. */
const char *bench_status_name(unsigned code);

#endif /* SLOTD_BENCH_ERR_H */
