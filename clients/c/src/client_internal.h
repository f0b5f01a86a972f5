/* client_internal.h - libslotd internals shared by its sources and its unit test. */
#ifndef SLOTD_CLIENT_INTERNAL_H
#define SLOTD_CLIENT_INTERNAL_H

#include "slotd/client.h"

#include <grpc/grpc.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/*
 * buf, err: borrowed for the call. Decodes a RouteSnapshotResponse into *out (caller frees with
 * slotd_route_free()). SLOTD_CLIENT_EMALFORMED with a sentence in err when the bytes do not
 * decode, the table does not have 256 entries or a bound is exceeded.
 */
int slotd__route_decode(const uint8_t *buf, size_t len, struct slotd_route **out, char *err,
                        size_t errlen);

/* r: borrowed for the call. The address of the leader of the group owning hash_slot (pointer
 * into r), or NULL when hash_slot is not 0..255 or that group, its leader or the leader's
 * address is unknown. */
const char *slotd__route_slot_leader_address(const struct slotd_route *r, unsigned hash_slot);

/* r: borrowed for the call. A deep copy (caller frees with slotd_route_free()), NULL on ENOMEM. */
struct slotd_route *slotd__route_copy(const struct slotd_route *r);

/* r: borrowed for the call. Records a NOT_LEADER hint: group_id's leader becomes node_id at
 * address (added to the node table when new and there is room). Returns true when r changed. */
bool slotd__route_apply_hint(struct slotd_route *r, uint32_t group_id, uint64_t node_id,
                             const char *address, uint64_t term);

/* buf, st: borrowed for the call. Fills st's detail fields from a grpc-status-details-bin value
 * (google.rpc.Status holding a slotd.v1.ErrorDetail). SLOTD_CLIENT_EMALFORMED when the bytes do
 * not decode or carry no ErrorDetail (st->has_detail stays false). */
int slotd__status_detail_decode(const uint8_t *buf, size_t len, struct slotd_status *st);

/* st: borrowed for the call. The client error a failed status means (OK for grpc_status 0). */
int slotd__err_of_status(const struct slotd_status *st);

/* What a call does after one attempt. */
enum slotd__action {
    SLOTD__ACTION_DONE,     /* success, or a failure no retry can fix */
    SLOTD__ACTION_REDIRECT, /* NOT_LEADER: send again (the write was not applied) */
    SLOTD__ACTION_RETRY,    /* retriable failure: refresh the route, back off, send again */
};

/* st: borrowed for the call. The decision after an attempt that ended with st; idempotent
 * says whether repeating the call is safe (a read, or a write carrying a request id). */
enum slotd__action slotd__action_decide(const struct slotd_status *st, bool idempotent);

/* Back-off before retry number attempt (1-based), honouring the server's retry hint. */
int slotd__backoff_ms(unsigned attempt, uint32_t retry_after_ms);

/* s, out, err: borrowed for the call. Splits "h:p,h:p" into out[0..*count) (each non-empty,
 * at most SLOTD_ADDRESS_LEN bytes, no spaces), at most max of them. SLOTD_CLIENT_EINVAL and a
 * sentence in err otherwise. */
int slotd__endpoints_parse(const char *s, char (*out)[SLOTD_ADDRESS_LEN + 1], size_t max,
                           size_t *count, char *err, size_t errlen);

/* in (may be NULL), out, err: borrowed for the call. Applies defaults and checks ranges. */
int slotd__options_resolve(const struct slotd_client_options *in, struct slotd_client_options *out,
                           char *err, size_t errlen);

/* ---- what client_admin.c uses from client.c ---- */

/* c, address, method, req, st: borrowed for the call. One unary call bounded by the client's
 * deadline. On SLOTD_CLIENT_OK *body holds the response bytes plus a NUL (caller frees with
 * free()); otherwise *body is NULL and st describes the failure (server text only). */
int slotd__client_unary(struct slotd_client *c, const char *address, const char *method,
                        const uint8_t *req, size_t req_len, uint8_t **body, size_t *body_len,
                        struct slotd_status *st);

/* c, out: borrowed for the call. The seed endpoints, starting at the one that answered the
 * latest route fetch; returns how many were written (at most max). */
size_t slotd__client_endpoints(struct slotd_client *c, char (*out)[SLOTD_ADDRESS_LEN + 1],
                               size_t max);

/* c: borrowed for the call. The resolved max_retries (negative = none). */
int slotd__client_max_retries(const struct slotd_client *c);

/* c, st: borrowed for the call. Makes st the client's last error. */
void slotd__client_record_error(struct slotd_client *c, const struct slotd_status *st);

/* Sleeps ms milliseconds (restarts after signals). */
void slotd__sleep_ms(int ms);

/* ---- what client_task.c and the unit test use from client_admin.c ---- */

/* st: borrowed for the call. Clears st; grpc_status -1 (no call made). */
void slotd__admin_status_reset(struct slotd_status *st);

/* c, op, st: borrowed for the call. Rewrites st->message as "op: STATUS: text (field F)
 * [address, N attempts]" and makes st the client's last error. */
void slotd__admin_fail_text(struct slotd_client *c, const char *op, int rc, unsigned attempts,
                            struct slotd_status *st);

/* Whether a failed read-only admin call is worth asking the next endpoint (UNAVAILABLE, past
 * its deadline, overloaded). */
bool slotd__admin_skippable(int rc);

/* Largest packed admin request: an address of <= 255 bytes, or 256 hash slots of at most 2
 * varint bytes each, plus the other fields. */
#define SLOTD__ADMIN_REQUEST_MAX 1024

/* w, buf, len, method, op, st: borrowed for the call. Packs w into buf (at least
 * SLOTD__ADMIN_REQUEST_MAX bytes) and sets *method (gRPC path) and *op (its name in messages).
 * SLOTD_CLIENT_EINVAL with a sentence in st->message for a bad kind, address or hash slot
 * list (no call is to be made then). */
int slotd__admin_write_encode(const struct slotd_admin_write *w, uint8_t *buf, size_t *len,
                              const char **method, const char **op, struct slotd_status *st);

/* buf, out: borrowed for the call. Decodes a TaskStatusResponse into out->tasks (malloc'd,
 * freed by slotd_task_status_free()) and out->revision. by_id: the answer to a task_id > 0
 * request (exactly one task expected). SLOTD_CLIENT_EMALFORMED with a sentence in
 * out->status.message when it does not decode or exceeds a bound (SLOTD_TASKS_MAX tasks,
 * SLOTD_TASK_PARTICIPANTS_MAX participants, SLOTD_HASH_SLOTS hash slots). */
int slotd__task_status_decode(const uint8_t *buf, size_t len, bool by_id,
                              struct slotd_task_status *out);

/* buf, out: borrowed for the call. Fills out's answer fields from a ControllerStatusResponse
 * (role cut to SLOTD_CONTROLLER_ROLE_LEN - 1 bytes); SLOTD_CLIENT_EMALFORMED with a sentence in
 * out->status.message when the bytes do not decode. */
int slotd__controller_status_decode(const uint8_t *buf, size_t len,
                                    struct slotd_controller_status *out);

/* ---- what client_kv.c and client_watch.c use from client.c ---- */

/* Clears st: no call made yet (grpc_status -1). */
void slotd__status_reset(struct slotd_status *st);

/* c, op, key, req, st: borrowed for the call. Sends req to the leader of key's slot group (key
 * NULL: to a seed endpoint, for calls any node serves), following NOT_LEADER hints and retrying
 * retriable failures when idempotent. On SLOTD_CLIENT_OK *body holds the response (caller frees
 * with grpc_slice_unref()); otherwise st->message is a sentence starting with op. */
int slotd__client_routed_call(struct slotd_client *c, const char *op, const char *method,
                              const void *key, size_t klen, const uint8_t *req, size_t req_len,
                              bool idempotent, grpc_slice *body, unsigned *attempts,
                              struct slotd_status *st);

/* As slotd__client_routed_call, but routed by a hash slot (0..255) instead of a key: the calls
 * naming a lease id, whose hash slot is id >> SLOTD_LEASE_ID_SHIFT. */
int slotd__client_slot_call(struct slotd_client *c, const char *op, const char *method,
                            unsigned hash_slot, const uint8_t *req, size_t req_len, bool idempotent,
                            grpc_slice *body, unsigned *attempts, struct slotd_status *st);

/* Fills id[0..len) with random bytes (a request id). */
void slotd__client_request_id(struct slotd_client *c, uint8_t *id, size_t len);

/* The client's channel to address (opened on first use, owned by the client); NULL when its
 * channel table is full. */
grpc_channel *slotd__client_channel(struct slotd_client *c, const char *address);

/* Copies the "authorization" value every call sends ("" = none) into out. */
void slotd__client_authorization(struct slotd_client *c, char *out, size_t len);

/* md, st: borrowed for the call. Reads a grpc-status-details-bin trailer into st's detail. */
void slotd__client_trailer_detail(const grpc_metadata_array *md, struct slotd_status *st);

#endif /* SLOTD_CLIENT_INTERNAL_H */
