/* bench_wire.h - slotbench's keys and the protobuf bytes of each request/response (slotd, etcd). */
#ifndef SLOTD_BENCH_WIRE_H
#define SLOTD_BENCH_WIRE_H

#include "bench_opts.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The concrete kind of one RPC (an --op mixed run sends two of them). */
enum bench_req {
    BENCH_REQ_PUT,
    BENCH_REQ_GET_LINEARIZABLE,
    BENCH_REQ_GET_LEADER_LOCAL, /* slotd only */
    BENCH_REQ_GET_LOCAL,
};

/* Maps a get-kind op (GET, GET_LEADER_LOCAL, GET_LOCAL) or PUT to its request kind. */
enum bench_req bench_wire_req_of(enum bench_op op);

/* slotd --echo-only's method (service/rpc/rpc.h RPC_ECHO_METHOD; clients/ does not include
 * service/): every request kind of the echo target goes there and comes back unchanged. */
#define BENCH_WIRE_ECHO_METHOD "/slotd.bench.v1.Echo/Echo"

/* Static gRPC method path, e.g. "/slotd.v1.Metadata/Propose" or "/etcdserverpb.KV/Range". */
const char *bench_wire_method(enum bench_target target, enum bench_req req);

/*
 * buf: borrowed for the call, key_size + 1 bytes. Writes key number index as "key-" followed
 * by index zero padded to key_size bytes in all, NUL terminated. The caller guarantees
 * key_size >= 4 + digits(index) (bench_opts_parse checks it for the whole key space).
 */
void bench_wire_key_format(char *buf, unsigned key_size, uint64_t index);

/*
 * key, value, buf: borrowed for the call. Encodes the request message for (target, req).
 * value is ignored by reads. no_forward (slotd only; etcd ignores it) sets the request's
 * no_forward field, so a node that is not the leader answers NOT_LEADER instead of forwarding.
 * Returns the encoded size; writes buf only when that size is <= buf_len (call with buf_len 0
 * to learn the size).
 */
size_t bench_wire_request_encode(enum bench_target target, enum bench_req req, bool no_forward,
                                 const uint8_t *key, size_t key_len, const uint8_t *value,
                                 size_t value_len, uint8_t *buf, size_t buf_len);

/*
 * buf, found: borrowed for the call. Decodes a response of status OK. Returns BENCH_OK, or
 * BENCH_EMALFORMED when the bytes are not the expected message (or a slotd response lacks
 * its result; for the echo target: the slotd request of req with its key, as sent). For reads
 * *found says whether the key existed; puts set it to true.
 */
int bench_wire_response_check(enum bench_target target, enum bench_req req, const uint8_t *buf,
                              size_t len, bool *found);

/* ---- Watch (--watchers) ---- */

/* The prefix of every benchmark key: what each --watchers stream watches. */
#define BENCH_WIRE_WATCH_PREFIX "key-"
/* Bytes kept of an etcd cancel_reason, NUL included. */
#define BENCH_WIRE_REASON_LEN 128

/* Static Watch method path: "/slotd.v1.Metadata/Watch" (server streaming) or
 * "/etcdserverpb.Watch/Watch" (bidi streaming). */
const char *bench_wire_watch_method(enum bench_target target);

/*
 * prefix, buf: borrowed for the call. Encodes the request that opens one watcher on every key
 * starting with prefix (1..255 bytes, last byte < 0xff): slotd WatchRequest{prefix}; etcd
 * WatchRequest{create_request{key = prefix, range_end = prefix with its last byte plus one}}.
 * Returns the encoded size; writes buf only when that size is <= buf_len.
 */
size_t bench_wire_watch_request_encode(enum bench_target target, const uint8_t *prefix,
                                       size_t prefix_len, uint8_t *buf, size_t buf_len);

/* What one WatchResponse says, as far as slotbench counts it. */
struct bench_watch_msg {
    uint32_t events; /* events in the message (each carries a non-empty key) */
    bool created;    /* the stream's first message (slotd and etcd: created = true) */
    bool progress;   /* no events: slotd progress = true, or an etcd header-only message */
    bool canceled;   /* etcd: the server canceled the watcher (cancel_reason below) */
    char cancel_reason[BENCH_WIRE_REASON_LEN]; /* etcd cancel_reason, cut; "" when none */
};

/*
 * buf, m: borrowed for the call. Decodes one WatchResponse without copying its events (a wire
 * scan: slotd events are field 1 with the key in field 2; etcd events are field 11 with the key
 * in kv (2) field 1). Returns BENCH_OK, or BENCH_EMALFORMED when the bytes are not a protobuf
 * message or an event has no key (m->events is then 0).
 */
int bench_wire_watch_decode(enum bench_target target, const uint8_t *buf, size_t len,
                            struct bench_watch_msg *m);

/* slotd.v1.ErrorCode values 0..BENCH_DETAIL_OTHER-1 are counted each; larger ones together. */
#define BENCH_DETAIL_OTHER 15
#define BENCH_DETAIL_SLOTS 16

/*
 * buf, code: borrowed for the call. Decodes a grpc-status-details-bin trailer value
 * (google.rpc.Status, with libslotd's call layer: slotd_call_detail_decode) and sets *code to the slotd.v1.ErrorCode of its first
 * "type.googleapis.com/slotd.v1.ErrorDetail" detail, capped at BENCH_DETAIL_OTHER. Returns
 * BENCH_OK, or BENCH_EMALFORMED when the bytes do not decode or carry no such detail.
 */
int bench_wire_error_detail(const uint8_t *buf, size_t len, unsigned *code);

/* The bucket of a slotd.v1.ErrorCode in slotbench's counts: code itself, or BENCH_DETAIL_OTHER
 * for a negative or larger one. */
unsigned bench_wire_detail_bucket(int code);

/* Static name of a counted slotd.v1.ErrorCode without its prefix ("NOT_LEADER"); "OTHER". */
const char *bench_wire_error_code_name(unsigned code);

#endif /* SLOTD_BENCH_WIRE_H */
