/* status.h - slotd's error codes and THE one mapping from them to gRPC status + error details. */
#ifndef SLOTD_RPC_STATUS_H
#define SLOTD_RPC_STATUS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <grpc/status.h>

#include "common/errlist.h"

/* X(name, value, message) */
#define SLOTD_ERRORS(X)                                                                            \
    X(SLOTD_OK, 0, "ok")                                                                           \
    X(SLOTD_EINVALID_FIELD, 1, "invalid field")                                                    \
    X(SLOTD_EMALFORMED, 2, "malformed request")                                                    \
    X(SLOTD_ENOT_LEADER, 3, "not leader")                                                          \
    X(SLOTD_ENO_LEADER, 4, "no leader")                                                            \
    X(SLOTD_EROUTE_NOT_READY, 5, "route not ready")                                                \
    X(SLOTD_EQUEUE_FULL, 6, "queue full")                                                          \
    X(SLOTD_EUNKNOWN_OUTCOME, 7, "unknown outcome")                                                \
    X(SLOTD_EWRONG_GROUP, 8, "wrong group")                                                        \
    X(SLOTD_ESTALE_FENCE, 9, "stale fence")                                                        \
    X(SLOTD_EHASH_SLOT_FENCED, 10, "hash slot fenced")                                             \
    X(SLOTD_ENOT_FOUND, 11, "not found")                                                           \
    X(SLOTD_ESHUTTING_DOWN, 12, "shutting down")                                                   \
    X(SLOTD_ESTORAGE, 13, "storage error")                                                         \
    X(SLOTD_ETIMEOUT, 14, "deadline exceeded")                                                     \
    X(SLOTD_EINTERNAL, 15, "internal error")                                                       \
    X(SLOTD_EUNIMPLEMENTED, 16, "unimplemented")                                                   \
    X(SLOTD_EUNAUTHENTICATED, 17, "unauthenticated")                                               \
    X(SLOTD_EPRECONDITION, 18, "precondition failed")                                              \
    X(SLOTD_EPERMISSION_DENIED, 19, "permission denied")                                          \
    X(SLOTD_ECOMPACTED, 20, "compacted")

enum slotd_err { SLOTD_ERRORS(SLOTD_ERRLIST_ENUM) };

/* Bytes of a packed current value an error can carry (ErrorDetail.current_runtime_meta). */
#define SLOTD_ERROR_CURRENT_MAX 512u

/* An error as the caller will see it. Zero-initialize, then use the setters below. */
struct slotd_error {
    int code;          /* enum slotd_err */
    char message[256]; /* a sentence: "put.key: 2000 bytes exceeds the limit of 1024" */
    char field[64];    /* INVALID_FIELD / MALFORMED: the request field, "" if none */
    uint64_t limit;    /* INVALID_FIELD: the limit the field broke, 0 if none */
    bool has_leader_hint;
    uint64_t leader_node;
    char leader_address[128];
    uint32_t group;
    uint64_t term;
    uint32_t retry_after_ms; /* retriable errors: suggested wait, 0 = none */
    /* STALE_FENCE: the current values the fence was checked against, sent as
     * ErrorDetail.current_version and ErrorDetail.current_runtime_meta. */
    bool has_current_version;
    uint64_t current_version;
    size_t current_runtime_meta_len; /* 0 = none; else a packed slotd.v1.ChannelRuntimeMeta */
    uint8_t current_runtime_meta[SLOTD_ERROR_CURRENT_MAX];
    /* COMPACTED: the group and the oldest position a watch can resume from in it
     * (ErrorDetail.compacted); compacted_group 0 = none. */
    uint32_t compacted_group;
    uint64_t compacted_index;
};

/* Resets e (borrowed for the call) and sets code and a printf-style message (truncated to fit). */
void slotd_error_set(struct slotd_error *e, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* slotd_error_set(e, SLOTD_EINVALID_FIELD, fmt, ...) plus the field name (truncated to 63 bytes)
 * and its limit. e and field are borrowed for the call. */
void slotd_error_field(struct slotd_error *e, const char *field, uint64_t limit, const char *fmt,
                       ...) __attribute__((format(printf, 4, 5)));

/* slotd_error_set(e, SLOTD_ECOMPACTED, fmt, ...) plus the group and its oldest resumable
 * position. */
void slotd_error_compacted(struct slotd_error *e, uint32_t group, uint64_t oldest, const char *fmt,
                           ...) __attribute__((format(printf, 4, 5)));

/* Attaches a leader hint to e (typically NOT_LEADER). e and address (NULL = "") are borrowed for
 * the call; address is truncated to 127 bytes. */
void slotd_error_leader_hint(struct slotd_error *e, uint64_t node, const char *address,
                             uint32_t group, uint64_t term);

/* Static message for an enum slotd_err ("unknown error" for other values). */
const char *slotd_strerror(int code);

/* THE mapping from enum slotd_err to the gRPC status code (unknown codes -> GRPC_STATUS_INTERNAL).
 */
grpc_status_code slotd_error_grpc_code(int code);

/* The slotd.v1.ErrorCode (as int) that ErrorDetail.code carries for an enum slotd_err. */
int slotd_error_detail_code(int code);

/* The status message sent for e: e->message, or slotd_strerror(e->code) when it is empty.
 * Borrowed from e or static. */
const char *slotd_error_message(const struct slotd_error *e);

/* Serializes google.rpc.Status{code = slotd_error_grpc_code, message, details = [Any{type_url
 * "type.googleapis.com/slotd.v1.ErrorDetail", value = ErrorDetail}]}, the value of the
 * grpc-status-details-bin trailer. e is borrowed for the call; *buf: caller frees with free().
 * Returns SLOTD_OK or SLOTD_EINTERNAL (out of memory). */
int slotd_error_encode_details(const struct slotd_error *e, uint8_t **buf, size_t *len);

#define SLOTD_ERROR_DETAIL_TYPE_URL "type.googleapis.com/slotd.v1.ErrorDetail"

#endif /* SLOTD_RPC_STATUS_H */
