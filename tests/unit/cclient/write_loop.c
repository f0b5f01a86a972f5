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
    if (count < 1 || count > WRITE_LOOP_COUNT_MAX || interval < 0 || interval > 10000) {
        fprintf(stderr, "cclient_write_loop: COUNT 1..%d, INTERVAL_MS 0..10000\n",
                WRITE_LOOP_COUNT_MAX);
        return 2;
    }
    struct slotd_options *o = slotd_options_create();
    if (!o)
        return 2;
    slotd_options_set_deadline_ms(o, atoi(argv[5]));
    slotd_options_set_max_retries(o, atoi(argv[6]));
    struct slotd_client *c;
    struct slotd_error *err = NULL;
    int rc = slotd_client_create(argv[1], o, &c, &err);
    slotd_options_destroy(o);
    if (rc != SLOTD_CLIENT_OK) {
        fprintf(stderr, "cclient_write_loop: %s\n", slotd_error_message(err));
        slotd_error_destroy(err);
        return 2;
    }
    int failures = 0;
    for (long i = 0; i < count; i++) {
        char value[32];
        snprintf(value, sizeof(value), "%ld", i);
        struct slotd_write_result *r = NULL;
        rc = slotd_client_put(c, key, strlen(key), value, strlen(value), NULL, &r, &err);
        failures += rc != SLOTD_CLIENT_OK;
        printf("{\"i\": %ld, \"rc\": %d, \"error\": \"%s\", \"attempts\": %u, \"version\": %llu, "
               "\"group_id\": %u, \"deduplicated\": %s, \"address\": \"%s\"}\n",
               i, rc, slotd_client_strerror(rc), r ? r->attempts : slotd_error_attempts(err),
               r ? (unsigned long long)r->version : 0ull, r ? r->group_id : 0,
               r && r->deduplicated ? "true" : "false", r ? r->address : slotd_error_address(err));
        if (rc != SLOTD_CLIENT_OK)
            fprintf(stderr, "write %ld: %s\n", i, slotd_error_message(err));
        fflush(stdout);
        slotd_write_result_destroy(r);
        sleep_ms((int)interval);
    }
    slotd_error_destroy(err);
    slotd_client_destroy(c);
    return failures ? 1 : 0;
}
