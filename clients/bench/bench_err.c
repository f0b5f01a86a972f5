/* bench_err.c - bench_strerror(): text for slotbench's error codes; names of gRPC status codes. */
#include "bench_err.h"

#include "call.h"

SLOTD_CALL_STRERROR_DEFINE(bench_strerror, BENCH_ERRORS, BENCH_ERR_COUNT)

const char *bench_status_name(unsigned code)
{
    return code < BENCH_STATUS_OTHER ? slotd_grpc_status_name((int)code) : "OTHER";
}
