/* slotctl_lease.c - slotctl lease grant / keepalive / revoke over libslotd's
 * slotd_client_lease_*. */
#include "slotctl_cmds.h"

#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

/* The keep-alive loop is bounded by --count (at most SLOTCTL_LIMIT_MAX, checked by the parser). */

static void lease_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* The JSON object of one lease answer (caller owns it). */
static json_t *lease_json(const struct slotctl_args *a, const struct slotd_lease_result *r)
{
    char id_hex[24];
    snprintf(id_hex, sizeof(id_hex), "0x%" PRIx64, r->id);
    json_t *j = json_object();
    json_object_set_new(j, "command", json_string(slotctl_cmd_name(a->cmd)));
    json_object_set_new(j, "ok", json_true());
    json_object_set_new(j, "id", json_integer((json_int_t)r->id));
    json_object_set_new(j, "id_hex", json_string(id_hex));
    json_object_set_new(j, "hash_slot", json_integer(slotd_lease_hash_slot(r->id)));
    if (a->cmd == SLOTCTL_CMD_LEASE_GRANT) {
        slotctl_json_set_bytes(j, "key", (const uint8_t *)a->pos[1], strlen(a->pos[1]));
        json_object_set_new(j, "ttl_seconds", json_integer(r->ttl_seconds));
    } else if (a->cmd == SLOTCTL_CMD_LEASE_KEEPALIVE) {
        json_object_set_new(j, "ttl_seconds", json_integer(r->ttl_seconds));
        json_object_set_new(j, "keys", json_integer(r->keys));
    } else {
        json_object_set_new(j, "keys_deleted", json_integer(r->keys_deleted));
    }
    slotctl_json_set_write(j, r->group_id, r->applied_index, r->term, r->deduplicated,
                           r->request_id, r->request_id_len, r->attempts);
    return j;
}

/* Prints one answer: "lease 1234 (0x4d0000000001) ttl 10s  ..." or its JSON object. */
static void lease_print(const struct slotctl_args *a, const struct slotd_lease_result *r)
{
    if (a->json) {
        slotctl_json_print(lease_json(a, r));
    } else if (a->cmd == SLOTCTL_CMD_LEASE_GRANT) {
        printf("lease %" PRIu64 " (0x%" PRIx64 ") ttl %us  hash slot %d  group %u\n", r->id, r->id,
               r->ttl_seconds, slotd_lease_hash_slot(r->id), r->group_id);
    } else if (a->cmd == SLOTCTL_CMD_LEASE_KEEPALIVE) {
        printf("lease %" PRIu64 " (0x%" PRIx64 ") ttl %us  keys %u\n", r->id, r->id, r->ttl_seconds,
               r->keys);
    } else {
        printf("lease %" PRIu64 " (0x%" PRIx64 ") revoked  keys deleted %u\n", r->id, r->id,
               r->keys_deleted);
    }
    fflush(stdout);
}

/* lease keepalive ID [--count N] [--interval S]: N keep-alives (default 1), S apart (default a
 * third of the TTL the previous one answered, at least the parser's minimum). */
static int lease_keepalive_run(struct slotd_client *c, const struct slotctl_args *a)
{
    uint64_t count = a->count ? a->count : 1;
    for (uint64_t i = 0; i < count; i++) {
        struct slotd_lease_result *r;
        struct slotd_error *e = NULL;
        int rc = slotd_client_lease_keepalive(c, a->lease_id, &r, &e);
        if (rc != SLOTD_CLIENT_OK) {
            return slotctl_error_report_free(a, rc, e);
        }
        lease_print(a, r);
        uint32_t ttl_seconds = r->ttl_seconds;
        slotd_lease_result_destroy(r);
        if (i + 1 == count)
            break;
        int ms = a->lease_interval_ms;
        if (ms == 0) {
            ms = (int)((uint64_t)ttl_seconds * 1000 / 3);
            if (ms < SLOTCTL_LEASE_INTERVAL_MS_MIN)
                ms = SLOTCTL_LEASE_INTERVAL_MS_MIN;
            if (ms > SLOTCTL_LEASE_INTERVAL_MS_MAX)
                ms = SLOTCTL_LEASE_INTERVAL_MS_MAX;
        }
        lease_sleep_ms(ms);
    }
    return SLOTCTL_EXIT_OK;
}

int slotctl_lease_run(struct slotd_client *c, const struct slotctl_args *a)
{
    struct slotd_lease_result *r;
    struct slotd_error *e = NULL;
    int rc;
    switch (a->cmd) {
    case SLOTCTL_CMD_LEASE_GRANT:
        rc = slotd_client_lease_grant(c, a->pos[1], strlen(a->pos[1]), a->ttl_seconds, &r, &e);
        break;
    case SLOTCTL_CMD_LEASE_KEEPALIVE:
        return lease_keepalive_run(c, a);
    default:
        rc = slotd_client_lease_revoke(c, a->lease_id, &r, &e);
        break;
    }
    if (rc != SLOTD_CLIENT_OK) {
        return slotctl_error_report_free(a, rc, e);
    }
    lease_print(a, r);
    slotd_lease_result_destroy(r);
    return SLOTCTL_EXIT_OK;
}
