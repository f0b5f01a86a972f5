/* propose_stream.c - cclient_propose_stream: COUNT puts on one libslotd ProposeStream, results
 * checked and summed up as one JSON line (driven by tests/e2e/test_c_propose_stream.py). */
#include "slotd/client.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PS_COUNT_MAX 1000000
#define PS_PREFIX_MAX 2048 /* past slotd's 1024-byte key bound, for the per-item error case */

struct ps_counts {
    long ok, failed, exhausted, duplicate, unknown;
    long by_code[SLOTD_CLIENT_ERR_COUNT];
    char first_error[512];
};

/* Takes one result (waiting up to 10 s); 0 when one came, else the call's failure. */
static int ps_take(struct slotd_propose_stream *s, unsigned char *seen, long count,
                   struct ps_counts *n)
{
    struct slotd_propose_stream_result *r = NULL;
    struct slotd_error *e = NULL;
    int rc = slotd_propose_stream_next(s, 10000, &r, &e);
    if (rc != SLOTD_CLIENT_OK || !r) {
        if (e)
            snprintf(n->first_error, sizeof(n->first_error), "%s", slotd_error_message(e));
        slotd_error_destroy(e);
        return rc == SLOTD_CLIENT_OK ? -1 : rc;
    }
    if (r->id >= (uint64_t)count)
        n->unknown++;
    else if (seen[r->id]++)
        n->duplicate++;
    if (r->error) {
        n->failed++;
        n->by_code[slotd_error_code(r->error)]++;
        if (!n->first_error[0])
            snprintf(n->first_error, sizeof(n->first_error), "%s", slotd_error_message(r->error));
    } else if (r->version == 0 || r->version != r->applied_index) {
        n->failed++; /* a put's version is its entry's index */
    } else {
        n->ok++;
    }
    slotd_propose_stream_result_destroy(r);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 5) {
        fprintf(stderr, "usage: cclient_propose_stream ENDPOINT COUNT MAX_OUTSTANDING PREFIX\n");
        return 2;
    }
    long count = strtol(argv[2], NULL, 10);
    int max_outstanding = atoi(argv[3]);
    if (count < 1 || count > PS_COUNT_MAX || strlen(argv[4]) > PS_PREFIX_MAX) {
        fprintf(stderr, "cclient_propose_stream: COUNT 1..%d, PREFIX up to %d bytes\n",
                PS_COUNT_MAX, PS_PREFIX_MAX);
        return 2;
    }
    struct slotd_client *c = NULL;
    struct slotd_error *e = NULL;
    struct slotd_propose_stream *s = NULL;
    unsigned char *seen = calloc((size_t)count, 1);
    if (!seen || slotd_client_create(argv[1], NULL, &c, &e) != SLOTD_CLIENT_OK ||
        slotd_propose_stream_open(c, NULL, max_outstanding, 60000, &s, &e) != SLOTD_CLIENT_OK) {
        fprintf(stderr, "cclient_propose_stream: %s\n", e ? slotd_error_message(e) : "no memory");
        slotd_error_destroy(e);
        slotd_client_destroy(c);
        free(seen);
        return 2;
    }
    struct ps_counts n;
    memset(&n, 0, sizeof(n));
    int rc = 0;
    for (long i = 0; i < count && rc == 0;) {
        char key[PS_PREFIX_MAX + 32], val[32];
        snprintf(key, sizeof(key), "%s%ld", argv[4], i);
        snprintf(val, sizeof(val), "v%ld", i);
        int sr =
            slotd_propose_stream_put(s, (uint64_t)i, key, strlen(key), val, strlen(val), NULL, &e);
        if (sr == SLOTD_CLIENT_OK) {
            i++;
        } else if (sr == SLOTD_CLIENT_EEXHAUSTED) {
            n.exhausted++; /* the bound: take a result, then submit again */
            rc = ps_take(s, seen, count, &n);
        } else {
            snprintf(n.first_error, sizeof(n.first_error), "%s", slotd_error_message(e));
            rc = sr;
        }
    }
    slotd_propose_stream_close_send(s);
    while (rc == 0)
        rc = ps_take(s, seen, count, &n);
    long lost = (long)slotd_propose_stream_outstanding(s);
    printf("{\"ok\":%ld,\"failed\":%ld,\"exhausted\":%ld,\"duplicate\":%ld,\"unknown\":%ld,"
           "\"lost\":%ld,\"end\":\"%s\",\"einval\":%ld,\"first_error\":\"",
           n.ok, n.failed, n.exhausted, n.duplicate, n.unknown, lost,
           rc == -1 ? "ok" : slotd_client_strerror(rc), n.by_code[SLOTD_CLIENT_EINVAL]);
    for (const char *p = n.first_error; *p; p++)
        if (*p != '"' && *p != '\\')
            putchar(*p);
    printf("\"}\n");
    slotd_propose_stream_destroy(s);
    slotd_error_destroy(e);
    slotd_client_destroy(c);
    free(seen);
    return 0;
}
