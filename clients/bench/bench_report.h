/* bench_report.h - prints a slotbench result as text or as one JSON object. */
#ifndef SLOTD_BENCH_REPORT_H
#define SLOTD_BENCH_REPORT_H

#include "bench_opts.h"
#include "bench_run.h"

#include <stdio.h>

/* o, r, out: borrowed for the call. Human-readable lines. */
void bench_report_text(const struct bench_opts *o, const struct bench_result *r, FILE *out);

/*
 * o, r, out: borrowed for the call. One JSON object and a newline. Latencies are in
 * microseconds; "errors" maps gRPC status names (and "MALFORMED_RESPONSE") to counts.
 */
void bench_report_json(const struct bench_opts *o, const struct bench_result *r, FILE *out);

#endif /* SLOTD_BENCH_REPORT_H */
