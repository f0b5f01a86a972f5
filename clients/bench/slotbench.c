/* slotbench.c - main() of slotbench, the closed-loop gRPC load client for slotd and etcd. */
#include "bench_err.h"
#include "bench_opts.h"
#include "bench_report.h"
#include "bench_run.h"

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    char errmsg[512];
    struct bench_opts opts;
    if (bench_opts_parse(&opts, argc, argv, errmsg, sizeof(errmsg)) != BENCH_OK) {
        fprintf(stderr, "slotbench: %s\n%s", errmsg, bench_opts_usage());
        return 2;
    }
    if (opts.help) {
        fputs(bench_opts_usage(), stdout);
        return 0;
    }
    struct bench_result *r = malloc(sizeof(*r)); /* two histograms: ~116 KiB */
    if (!r) {
        fprintf(stderr, "slotbench: out of memory\n");
        return 1;
    }
    int rc = bench_run_execute(&opts, r, errmsg, sizeof(errmsg));
    if (rc != BENCH_OK) {
        fprintf(stderr, "slotbench: %s: %s\n", bench_strerror(rc), errmsg);
        free(r);
        return 1;
    }
    if (opts.json)
        bench_report_json(&opts, r, stdout);
    else
        bench_report_text(&opts, r, stdout);
    free(r);
    return 0;
}
