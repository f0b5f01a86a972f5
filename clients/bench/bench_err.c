/* bench_err.c - bench_strerror(): text for slotbench's error codes; names of gRPC status codes. */
#include "bench_err.h"

#include "call.h"

static const char *const bench_err_text[] = {
#define BENCH__ERR_TEXT(name, text) [name] = text,
    BENCH_ERRORS(BENCH__ERR_TEXT)
#undef BENCH__ERR_TEXT
};

const char *bench_strerror(int err)
{
    if (err < 0 || err >= BENCH_ERR_COUNT)
        return "unknown error";
    return bench_err_text[err];
}

const char *bench_status_name(unsigned code)
{
    return code < BENCH_STATUS_OTHER ? slotd_grpc_status_name((int)code) : "OTHER";
}
