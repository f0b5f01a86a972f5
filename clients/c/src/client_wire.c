/* client_wire.c - libslotd error texts and objects, retry policy, endpoints and options. */
#include "client_internal.h"

#include "slotd/v1/metadata.pb-c.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* gRPC status codes used by the retry policy (grpc/status.h values, kept here so this file
 * needs no gRPC header). */
enum {
    WIRE_OK = 0,
    WIRE_CANCELLED = 1,
    WIRE_UNKNOWN = 2,
    WIRE_INVALID_ARGUMENT = 3,
    WIRE_DEADLINE_EXCEEDED = 4,
    WIRE_NOT_FOUND = 5,
    WIRE_RESOURCE_EXHAUSTED = 8,
    WIRE_FAILED_PRECONDITION = 9,
    WIRE_ABORTED = 10,
    WIRE_UNAVAILABLE = 14,
};
#define WIRE_BACKOFF_BASE_MS 50
#define WIRE_BACKOFF_MAX_MS 1000

SLOTD_CALL_STRERROR_DEFINE(slotd_client_strerror, SLOTD_CLIENT_ERRORS, SLOTD_CLIENT_ERR_COUNT)

const char *slotd_error_code_name(int code)
{
    static const char *const names[] = {
        "UNSPECIFIED", "INVALID_FIELD",   "NOT_LEADER",  "NO_LEADER",   "ROUTE_NOT_READY",
        "QUEUE_FULL",  "UNKNOWN_OUTCOME", "WRONG_GROUP", "STALE_FENCE", "HASH_SLOT_FENCED",
        "NOT_FOUND",   "SHUTTING_DOWN",   "STORAGE",     "MALFORMED",   "COMPACTED",
    };
    if (code < 0 || (size_t)code >= sizeof(names) / sizeof(names[0]))
        return "UNKNOWN";
    return names[code];
}

int slotd__err_of_status(const struct slotd_status *st)
{
    switch (st->grpc_status) {
    case WIRE_OK:
        return SLOTD_CLIENT_OK;
    case WIRE_INVALID_ARGUMENT:
        return SLOTD_CLIENT_EINVAL;
    case WIRE_FAILED_PRECONDITION:
        return SLOTD_CLIENT_EPRECONDITION;
    case WIRE_UNAVAILABLE:
        return SLOTD_CLIENT_EUNAVAILABLE;
    case WIRE_DEADLINE_EXCEEDED:
        return SLOTD_CLIENT_ETIMEOUT;
    case WIRE_RESOURCE_EXHAUSTED:
        return SLOTD_CLIENT_EEXHAUSTED;
    case WIRE_NOT_FOUND:
        return SLOTD_CLIENT_ENOTFOUND;
    default:
        return SLOTD_CLIENT_ERPC;
    }
}

enum slotd__action slotd__action_decide(const struct slotd_status *st, bool idempotent)
{
    switch (st->grpc_status) {
    case WIRE_FAILED_PRECONDITION:
        /* NOT_LEADER is answered before anything is proposed: always safe to send again */
        if (st->has_detail && st->detail_code == SLOTD_ERROR_CODE_NOT_LEADER)
            return SLOTD__ACTION_REDIRECT;
        return SLOTD__ACTION_DONE;
    case WIRE_UNAVAILABLE:
    case WIRE_DEADLINE_EXCEEDED:
    case WIRE_RESOURCE_EXHAUSTED:
    case WIRE_ABORTED:
    case WIRE_CANCELLED:
    case WIRE_UNKNOWN:
        return idempotent ? SLOTD__ACTION_RETRY : SLOTD__ACTION_DONE;
    default:
        return SLOTD__ACTION_DONE;
    }
}

int slotd__backoff_ms(unsigned attempt, uint32_t retry_after_ms)
{
    int ms = WIRE_BACKOFF_BASE_MS;
    for (unsigned i = 1; i < attempt && ms < WIRE_BACKOFF_MAX_MS; i++)
        ms *= 2;
    if (ms > WIRE_BACKOFF_MAX_MS)
        ms = WIRE_BACKOFF_MAX_MS;
    if (retry_after_ms > (uint32_t)ms)
        ms = retry_after_ms > WIRE_BACKOFF_MAX_MS * 5 ? WIRE_BACKOFF_MAX_MS * 5
                                                      : (int)retry_after_ms;
    return ms;
}

int slotd__endpoints_parse(const char *s, char (*out)[SLOTD_ADDRESS_LEN + 1], size_t max,
                           size_t *count, char *err, size_t errlen)
{
    *count = 0;
    if (!s || !*s) {
        snprintf(err, errlen, "endpoints: empty (want host:port[,host:port...])");
        return SLOTD_CLIENT_EINVAL;
    }
    const char *p = s;
    for (;;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == 0) {
            snprintf(err, errlen, "endpoints: empty entry in '%s'", s);
            return SLOTD_CLIENT_EINVAL;
        }
        if (n > SLOTD_ADDRESS_LEN) {
            snprintf(err, errlen, "endpoints: entry longer than %d bytes", SLOTD_ADDRESS_LEN);
            return SLOTD_CLIENT_EINVAL;
        }
        if (memchr(p, ' ', n) || !memchr(p, ':', n)) {
            snprintf(err, errlen, "endpoints: '%.*s' is not host:port", (int)n, p);
            return SLOTD_CLIENT_EINVAL;
        }
        if (*count == max) {
            snprintf(err, errlen, "endpoints: more than %zu entries", max);
            return SLOTD_CLIENT_EINVAL;
        }
        memcpy(out[*count], p, n);
        out[*count][n] = '\0';
        (*count)++;
        if (!end)
            return SLOTD_CLIENT_OK;
        p = end + 1;
    }
}

void slotd__options_init(struct slotd_options *o)
{
    memset(o, 0, sizeof(*o));
    o->deadline_ms = SLOTD_CLIENT_DEADLINE_MS_DEFAULT;
    o->max_retries = SLOTD_CLIENT_MAX_RETRIES_DEFAULT;
}

int slotd__options_resolve(const struct slotd_options *in, struct slotd_options *out, char *err,
                           size_t errlen)
{
    struct slotd_options o;
    slotd__options_init(&o);
    if (in)
        o = *in;
    if (o.deadline_ms < 1 || o.deadline_ms > SLOTD_CLIENT_DEADLINE_MS_MAX) {
        snprintf(err, errlen, "deadline_ms: %d is not in 1..%d", o.deadline_ms,
                 SLOTD_CLIENT_DEADLINE_MS_MAX);
        return SLOTD_CLIENT_EINVAL;
    }
    if (o.max_retries < 0 || o.max_retries > SLOTD_CLIENT_MAX_RETRIES_MAX) {
        snprintf(err, errlen, "max_retries: %d is not in 0..%d", o.max_retries,
                 SLOTD_CLIENT_MAX_RETRIES_MAX);
        return SLOTD_CLIENT_EINVAL;
    }
    if (o.route_refresh_ms < 0) {
        snprintf(err, errlen, "route_refresh_ms: %d is negative", o.route_refresh_ms);
        return SLOTD_CLIENT_EINVAL;
    }
    if ((o.tls_cert_file == NULL) != (o.tls_key_file == NULL)) {
        snprintf(err, errlen, "tls_cert_file and tls_key_file: set both or neither");
        return SLOTD_CLIENT_EINVAL;
    }
    if (o.tls_server_name != NULL && (o.tls_server_name[0] == '\0' ||
                                      strlen(o.tls_server_name) > SLOTD_CLIENT_SERVER_NAME_MAX)) {
        snprintf(err, errlen, "tls_server_name: empty or longer than %d bytes",
                 SLOTD_CLIENT_SERVER_NAME_MAX);
        return SLOTD_CLIENT_EINVAL;
    }
    if (o.tls_server_name != NULL && o.tls_ca_file == NULL && o.tls_cert_file == NULL) {
        snprintf(err, errlen, "tls_server_name: needs tls_ca_file or tls_cert_file (TLS)");
        return SLOTD_CLIENT_EINVAL;
    }
    *out = o;
    return SLOTD_CLIENT_OK;
}

/* ---- the per-call error object ------------------------------------------------------------ */

int slotd__finish(int rc, const struct slotd_status *st, unsigned attempts,
                  struct slotd_error **err)
{
    if (rc == SLOTD_CLIENT_OK || err == NULL)
        return rc;
    slotd_error_destroy(*err);
    *err = malloc(sizeof(**err));
    if (*err) {
        (*err)->code = rc;
        (*err)->attempts = attempts;
        (*err)->st = *st;
        if ((*err)->st.message[0] == '\0')
            snprintf((*err)->st.message, sizeof((*err)->st.message), "%s",
                     slotd_client_strerror(rc));
    }
    return rc;
}

int slotd__refuse(int rc, const char *message, const char *field, struct slotd_error **err)
{
    struct slotd_status st;
    memset(&st, 0, sizeof(st));
    st.grpc_status = -1;
    snprintf(st.message, sizeof(st.message), "%s", message);
    if (field)
        snprintf(st.field, sizeof(st.field), "%s", field);
    return slotd__finish(rc, &st, 0, err);
}

void slotd_error_destroy(struct slotd_error *e)
{
    free(e);
}

/* The error's getters (client.h): X(type, name, member of struct slotd_error). */
#define SLOTD__ERROR_GETTERS(X)                                                                    \
    X(int, code, code)                                                                             \
    X(const char *, message, st.message)                                                           \
    X(int, grpc_status, st.grpc_status)                                                            \
    X(unsigned, attempts, attempts)                                                                \
    X(const char *, address, st.address)                                                           \
    X(bool, has_detail, st.has_detail)                                                             \
    X(int, detail_code, st.detail_code)                                                            \
    X(const char *, field, st.field)                                                               \
    X(uint64_t, limit, st.limit)                                                                   \
    X(uint32_t, retry_after_ms, st.retry_after_ms)                                                 \
    X(uint64_t, leader_node_id, st.leader_node_id)                                                 \
    X(const char *, leader_address, st.leader_address)                                             \
    X(uint32_t, leader_group_id, st.leader_group_id)                                               \
    X(uint64_t, leader_term, st.leader_term)                                                       \
    X(uint32_t, compacted_group_id, st.compacted_group_id)                                         \
    X(uint64_t, compacted_index, st.compacted_index)

#define SLOTD__ERROR_GETTER(type, name, member)                                                    \
    type slotd_error_##name(const struct slotd_error *e)                                           \
    {                                                                                              \
        return e->member;                                                                          \
    }
SLOTD__ERROR_GETTERS(SLOTD__ERROR_GETTER)
#undef SLOTD__ERROR_GETTER
