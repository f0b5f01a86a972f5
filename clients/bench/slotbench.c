/* slotbench.c - main() of slotbench, the closed-loop gRPC load client for slotd and etcd. */
#include "bench_err.h"
#include "bench_opts.h"
#include "bench_report.h"
#include "bench_run.h"

#include <grpc/grpc.h>

#include <stdio.h>
#include <string.h>
#include <stdlib.h>

/* Reads the --tls-* files into pem (free with client_tls_pem_free() whatever the return) and
 * checks that gRPC accepts them; o->tls_pem points at pem when TLS is on. Returns 0, or the
 * usage exit code 2 after printing the reason. */
static int slotbench_tls_load(struct bench_opts *o, struct client_tls_pem *pem)
{
    char err[512];
    if (client_tls_pem_load(&o->tls, pem, err, sizeof(err)) != CLIENT_TLS_OK) {
        fprintf(stderr, "slotbench: %s\n", err);
        return 2;
    }
    if (!client_tls_opts_enabled(&o->tls))
        return 0;
    grpc_init();
    grpc_channel_credentials *creds = client_tls_creds_new(pem);
    if (creds)
        grpc_channel_credentials_release(creds);
    grpc_shutdown();
    if (!creds) {
        fprintf(stderr, "slotbench: --tls-*: gRPC refused the SSL credentials\n");
        return 2;
    }
    o->tls_pem = pem;
    return 0;
}

/* Reads --token-file's first line into o->token. Returns 0, or -1 after printing why. */
static int slotbench_token_load(struct bench_opts *o)
{
    FILE *f = fopen(o->token_file, "rb");
    if (f == NULL) {
        fprintf(stderr, "slotbench: --token-file %s: cannot open\n", o->token_file);
        return -1;
    }
    size_t n = fread(o->token, 1, BENCH_TOKEN_MAX, f);
    fclose(f);
    o->token[n] = '\0';
    o->token[strcspn(o->token, "\r\n")] = '\0';
    if (o->token[0] == '\0') {
        fprintf(stderr, "slotbench: --token-file %s: no token on the first line\n", o->token_file);
        return -1;
    }
    return 0;
}

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
    struct client_tls_pem pem;
    int code = slotbench_tls_load(&opts, &pem);
    if (code != 0)
        goto done;
    if (opts.token_file != NULL && slotbench_token_load(&opts) != 0) {
        code = 2;
        goto done;
    }
    code = 1;
    struct bench_result *r = malloc(sizeof(*r)); /* two histograms: ~116 KiB */
    if (!r) {
        fprintf(stderr, "slotbench: out of memory\n");
        goto done;
    }
    int rc = bench_run_execute(&opts, r, errmsg, sizeof(errmsg));
    if (rc != BENCH_OK) {
        fprintf(stderr, "slotbench: %s: %s\n", bench_strerror(rc), errmsg);
        free(r);
        goto done;
    }
    if (opts.json)
        bench_report_json(&opts, r, stdout);
    else
        bench_report_text(&opts, r, stdout);
    free(r);
    code = 0;
done:
    client_tls_pem_free(&pem);
    return code;
}
