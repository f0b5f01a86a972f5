/* slotd_health.c - slotd-health ADDR [SERVICE]: exit 0 when grpc.health.v1 says SERVING. */
#include <stdio.h>
#include <string.h>

#include <grpc/grpc.h>

#include "grpc/health/v1/health.pb-c.h"
#include "health_check.h"

#define SLOTD_HEALTH_TIMEOUT_MS 2000

enum {
    SLOTD_HEALTH_EXIT_SERVING = 0,
    SLOTD_HEALTH_EXIT_NOT_SERVING = 1,
    SLOTD_HEALTH_EXIT_USAGE = 2
};

static void usage(FILE *out)
{
    fprintf(out,
            "usage: slotd-health ADDR [SERVICE]\n"
            "  Calls grpc.health.v1.Health/Check on ADDR (host:port) for SERVICE (default \"\",\n"
            "  the whole server) with a 2 s deadline. Prints the answer.\n"
            "  Exit 0 when SERVING, 1 otherwise (not serving, unknown service, no answer),\n"
            "  2 on a usage error.\n");
}

int main(int argc, char **argv)
{
    if (argc == 2 && (strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0)) {
        usage(stdout);
        return SLOTD_HEALTH_EXIT_SERVING;
    }
    if (argc < 2 || argc > 3 || argv[1][0] == '\0' || argv[1][0] == '-') {
        usage(stderr);
        return SLOTD_HEALTH_EXIT_USAGE;
    }
    const char *addr = argv[1];
    const char *service = argc == 3 ? argv[2] : "";
    if (strlen(service) > HEALTH_SERVICE_MAX) {
        fprintf(stderr, "slotd-health: SERVICE is longer than %d bytes\n", HEALTH_SERVICE_MAX);
        return SLOTD_HEALTH_EXIT_USAGE;
    }

    grpc_init();
    int serving_status = -1;
    char err[512] = "";
    int rc = health_check_call(addr, service, SLOTD_HEALTH_TIMEOUT_MS, &serving_status, err,
                               sizeof(err));
    grpc_shutdown();
    if (rc != HEALTH_OK) {
        fprintf(stderr, "slotd-health: %s\n", err);
        return SLOTD_HEALTH_EXIT_NOT_SERVING;
    }
    printf("%s\n", health_status_name(serving_status));
    return serving_status == GRPC__HEALTH__V1__HEALTH_CHECK_RESPONSE__SERVING_STATUS__SERVING
               ? SLOTD_HEALTH_EXIT_SERVING
               : SLOTD_HEALTH_EXIT_NOT_SERVING;
}
