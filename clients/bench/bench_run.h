/* bench_run.h - slotbench's closed-loop gRPC engine: channels, client threads, measured result. */
#ifndef SLOTD_BENCH_RUN_H
#define SLOTD_BENCH_RUN_H

#include "bench_err.h"
#include "bench_hist.h"
#include "bench_opts.h"
#include "bench_watch.h"
#include "bench_wire.h"

#include <stddef.h>
#include <stdint.h>

/* Bytes kept of the latest RouteSnapshot failure, NUL included. */
#define BENCH_ROUTE_ERROR_LEN 192

/* Counters of one phase (populate or measured run). */
struct bench_phase {
    struct bench_hist latency_ns;        /* status OK and well-formed responses only */
    uint64_t ok;                         /* status OK and well-formed */
    uint64_t reads, writes;              /* of ok */
    uint64_t not_found;                  /* ok reads whose key was absent */
    uint64_t malformed;                  /* status OK but the response did not decode */
    uint64_t status[BENCH_STATUS_SLOTS]; /* calls by gRPC status code (OK included) */
    uint64_t errors;                     /* every call that is not ok (status != OK or malformed) */
    uint64_t error_detail[BENCH_DETAIL_SLOTS]; /* failed calls by the slotd.v1.ErrorCode of
                                                   their grpc-status-details-bin trailer */
    uint64_t direct;   /* --route-aware: counted calls sent straight to their group's leader */
    uint64_t fallback; /* --route-aware: counted calls sent round robin (leader unknown) */
    /* --stream (whole phase, warmup included): ProposeStream calls opened, request messages
     * and the items they carried, response messages */
    uint64_t streams_opened, stream_messages_sent, stream_items_sent, stream_messages_received;
    double elapsed_s; /* wall time the counts cover */
    double cpu_s;     /* process user+sys CPU over cpu_wall_s */
    double cpu_wall_s;
};

struct bench_result {
    struct bench_phase run;
    struct bench_phase populate; /* zero unless opts->populate */
    uint64_t populate_keys;      /* keys --populate wrote successfully */
    uint64_t route_fetches;      /* --route-aware: RouteSnapshot calls completed */
    uint64_t route_fetch_failures;
    char route_error[BENCH_ROUTE_ERROR_LEN]; /* the latest failed fetch; "" when none failed */
    struct bench_watch_result watch;         /* --watchers */
};

/*
 * o, r, errmsg: borrowed for the call. Connects every channel, then optionally populates and
 * runs the measured load; fills *r. Returns BENCH_OK when the run completed (also when calls
 * failed: see r->run.errors), BENCH_ECONNECT when a channel did not become ready within
 * o->connect_timeout_ms, BENCH_ENOMEM or BENCH_ETHREAD; errmsg then holds a sentence.
 * Calls grpc_init() and grpc_shutdown() itself.
 */
int bench_run_execute(const struct bench_opts *o, struct bench_result *r, char *errmsg,
                      size_t errmsg_len);

#endif /* SLOTD_BENCH_RUN_H */
