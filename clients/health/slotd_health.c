/* slotd_health.c - slotd-health [--tls-*] ADDR [SERVICE]: exit 0 when the node is SERVING. */
#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>

#include "client_tls.h"
#include "grpc/health/v1/health.pb-c.h"
#include "health_check.h"

#define SLOTD_HEALTH_TIMEOUT_MS 2000

enum {
    SLOTD_HEALTH_EXIT_SERVING = 0,
    SLOTD_HEALTH_EXIT_NOT_SERVING = 1,
    SLOTD_HEALTH_EXIT_USAGE = 2
};

struct health_args {
    const char *addr;
    const char *service;
    struct client_tls_opts tls;
    bool help;
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: slotd-health ADDR [SERVICE]\n"
            "       slotd-health --tls-ca FILE [--tls-cert FILE --tls-key FILE]\n"
            "                    [--tls-server-name NAME] ADDR [SERVICE]\n"
            "  Calls grpc.health.v1.Health/Check on ADDR (host:port) for SERVICE (default \"\",\n"
            "  the whole server) with a 2 s deadline. Prints the answer.\n"
            "  --tls-ca FILE          TLS: CA bundle PEM verifying the server (default: "
            "plaintext)\n"
            "  --tls-cert FILE        TLS: client certificate PEM (servers with "
            "--tls-client-auth 1)\n"
            "  --tls-key FILE         TLS: private key PEM of --tls-cert\n"
            "  --tls-server-name N    TLS: name expected in the server certificate (default: "
            "host)\n"
            "  Exit 0 when SERVING, 1 otherwise (not serving, unknown service, no answer),\n"
            "  2 on a usage error.\n");
}

/* Parses argv into a; returns 0, or -1 with a sentence in err (usage error). */
static int args_parse(int argc, char **argv, struct health_args *a, char *err, size_t errlen)
{
    memset(a, 0, sizeof(*a));
    a->service = "";
    int pos = 0;
    for (int i = 1; i < argc; i++) {
        const char *arg = argv[i];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            a->help = true;
            return 0;
        }
        if (arg[0] == '-') {
            const char **field = strcmp(arg, "--tls-ca") == 0            ? &a->tls.ca_file
                                 : strcmp(arg, "--tls-cert") == 0        ? &a->tls.cert_file
                                 : strcmp(arg, "--tls-key") == 0         ? &a->tls.key_file
                                 : strcmp(arg, "--tls-server-name") == 0 ? &a->tls.server_name
                                                                         : NULL;
            if (!field) {
                snprintf(err, errlen, "unknown option %s", arg);
                return -1;
            }
            if (i + 1 == argc || !argv[i + 1][0]) {
                snprintf(err, errlen, "%s: needs a value", arg);
                return -1;
            }
            *field = argv[++i];
            continue;
        }
        if (pos == 2) {
            snprintf(err, errlen, "too many arguments ('%s')", arg);
            return -1;
        }
        *(pos++ == 0 ? &a->addr : &a->service) = arg;
    }
    if (!a->addr || !a->addr[0]) {
        snprintf(err, errlen, "ADDR is missing");
        return -1;
    }
    if (strlen(a->service) > HEALTH_SERVICE_MAX) {
        snprintf(err, errlen, "SERVICE is longer than %d bytes", HEALTH_SERVICE_MAX);
        return -1;
    }
    return client_tls_opts_check(&a->tls, err, errlen) == CLIENT_TLS_OK ? 0 : -1;
}

int main(int argc, char **argv)
{
    struct health_args a;
    char err[512] = "";
    if (args_parse(argc, argv, &a, err, sizeof(err)) != 0) {
        fprintf(stderr, "slotd-health: %s\n", err);
        usage(stderr);
        return SLOTD_HEALTH_EXIT_USAGE;
    }
    if (a.help) {
        usage(stdout);
        return SLOTD_HEALTH_EXIT_SERVING;
    }
    struct client_tls_pem pem;
    int code = SLOTD_HEALTH_EXIT_USAGE;
    if (client_tls_pem_load(&a.tls, &pem, err, sizeof(err)) != CLIENT_TLS_OK) {
        fprintf(stderr, "slotd-health: %s\n", err);
        goto err_after_pem;
    }
    grpc_init();
    grpc_channel_credentials *creds = NULL;
    if (client_tls_opts_enabled(&a.tls) && !(creds = client_tls_creds_new(&pem))) {
        fprintf(stderr, "slotd-health: --tls-*: gRPC refused the SSL credentials\n");
        goto err_after_init;
    }
    int serving_status = -1;
    int rc = health_check_call(a.addr, a.service, SLOTD_HEALTH_TIMEOUT_MS, creds, a.tls.server_name,
                               &serving_status, err, sizeof(err));
    if (rc != HEALTH_OK) {
        fprintf(stderr, "slotd-health: %s\n", err);
        code = SLOTD_HEALTH_EXIT_NOT_SERVING;
    } else {
        printf("%s\n", health_status_name(serving_status));
        code = serving_status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
                   ? SLOTD_HEALTH_EXIT_SERVING
                   : SLOTD_HEALTH_EXIT_NOT_SERVING;
    }
    if (creds)
        grpc_channel_credentials_release(creds);
err_after_init:
    grpc_shutdown();
err_after_pem:
    client_tls_pem_free(&pem);
    return code;
}
