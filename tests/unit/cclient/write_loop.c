/* write_loop.c - cclient_write_loop: puts one key COUNT times through one libslotd client, one JSON
 * line per write (driven by tests/e2e/test_slotctl.py). */
#include "slotd/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define WRITE_LOOP_COUNT_MAX 100000

static void sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL);
}

int main(int argc, char **argv)
{
    if (argc != 7) {
        fprintf(stderr, "usage: cclient_write_loop ENDPOINTS KEY COUNT INTERVAL_MS DEADLINE_MS "
                        "MAX_RETRIES\n");
        return 2;
    }
    const char *key = argv[2];
    long count = strtol(argv[3], NULL, 10), interval = strtol(argv[4], NULL, 10);
    struct slotd_client_options o = {.deadline_ms = atoi(argv[5]), .max_retries = atoi(argv[6])};
    if (count < 1 || count > WRITE_LOOP_COUNT_MAX || interval < 0 || interval > 10000) {
        fprintf(stderr, "cclient_write_loop: COUNT 1..%d, INTERVAL_MS 0..10000\n",
                WRITE_LOOP_COUNT_MAX);
        return 2;
    }
    struct slotd_client *c;
    char err[256];
    if (slotd_client_new(argv[1], &o, &c, err, sizeof(err)) != SLOTD_CLIENT_OK) {
        fprintf(stderr, "cclient_write_loop: %s\n", err);
        return 2;
    }
    int failures = 0;
    for (long i = 0; i < count; i++) {
        char value[32];
        snprintf(value, sizeof(value), "%ld", i);
        struct slotd_write_result r;
        int rc = slotd_put(c, key, strlen(key), value, strlen(value), &r);
        failures += rc != SLOTD_CLIENT_OK;
        printf("{\"i\": %ld, \"rc\": %d, \"error\": \"%s\", \"attempts\": %u, \"version\": %llu, "
               "\"group_id\": %u, \"deduplicated\": %s, \"address\": \"%s\"}\n",
               i, rc, slotd_client_strerror(rc), r.attempts, (unsigned long long)r.version,
               r.group_id, r.deduplicated ? "true" : "false", r.status.address);
        if (rc != SLOTD_CLIENT_OK)
            fprintf(stderr, "write %ld: %s\n", i, r.status.message);
        fflush(stdout);
        slotd_write_result_free(&r);
        sleep_ms((int)interval);
    }
    slotd_client_free(c);
    return failures ? 1 : 0;
}
