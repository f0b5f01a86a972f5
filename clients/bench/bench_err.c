/* bench_err.c - bench_strerror(): text for slotbench's error codes. */
#include "bench_err.h"

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
