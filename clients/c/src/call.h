/* call.h - the clients' one gRPC call layer (libslotd, slotd-health, slotbench). */
#ifndef SLOTD_CALL_H
#define SLOTD_CALL_H

#include <grpc/grpc.h>
#include <protobuf-c/protobuf-c.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLOTD_STATUS_MESSAGE_LEN 512
#define SLOTD_FIELD_LEN 64
#define SLOTD_CALL_ADDRESS_LEN 255

/* The outcome of one attempt of a call: its gRPC status and the server's ErrorDetail. */
struct slotd_status {
    int grpc_status;                        /* 0 (OK) on success; -1 when no call was made */
    char message[SLOTD_STATUS_MESSAGE_LEN]; /* the server's text, or a caller's sentence */
    bool has_detail;                        /* a slotd.v1.ErrorDetail came with the status */
    int detail_code;                        /* enum slotd_error_code */
    char field[SLOTD_FIELD_LEN];            /* INVALID_FIELD: the request field ("put.key") */
    uint64_t limit;                         /* INVALID_FIELD: the field's limit */
    uint32_t retry_after_ms;                /* retriable errors: the server's suggested wait */
    uint64_t leader_node_id;                /* NOT_LEADER: leader hint (0 = none) */
    char leader_address[SLOTD_CALL_ADDRESS_LEN + 1];
    uint32_t leader_group_id;
    uint64_t leader_term;
    char address[SLOTD_CALL_ADDRESS_LEN + 1]; /* the node the attempt went to */
    /* COMPACTED (a watch resumed behind a group's history): that group and the oldest
     * position a watch can resume from in it */
    uint32_t compacted_group_id;
    uint64_t compacted_index;
};

/* st: borrowed for the call. Clears st; grpc_status -1 (no call made). */
void slotd_call_status_reset(struct slotd_status *st);

/* Static name of a gRPC status code ("UNAVAILABLE"); "UNKNOWN_STATUS" outside 0..16. */
const char *slotd_grpc_status_name(int status);

/* Static name of a grpc.health.v1 ServingStatus number ("SERVING"; 0..3), other for any other
 * number: libslotd's slotd_health_status_name and slotd-health's output. */
const char *slotd_call_health_status_name(int status, const char *other);

/* Reconnect back-off of a channel that fails over quickly (libslotd's): the first and least
 * wait, which gRPC also takes as the least time a connection attempt gets, and the most. */
#define SLOTD_CALL_RECONNECT_MIN_MS 100
#define SLOTD_CALL_RECONNECT_MAX_MS 1000

/*
 * target, creds, server_name: borrowed for the call (creds NULL: plaintext; server_name NULL or
 * "": no override of the name checked in the server's certificate). A channel without gRPC's
 * own retries; fast_reconnect: reconnect after SLOTD_CALL_RECONNECT_MIN_MS up to _MAX_MS apart
 * (a peer that accepts but does not answer the HTTP/2 handshake fails after about 100 ms), else
 * gRPC's defaults (one attempt may use the whole call deadline). Call after grpc_init(); caller
 * frees with grpc_channel_destroy().
 */
grpc_channel *slotd_call_channel_create(const char *target, grpc_channel_credentials *creds,
                                        const char *server_name, bool fast_reconnect);

/*
 * ch, method, req, authorization ("" = none), st: borrowed for the call. One unary call bounded
 * by deadline_ms (gRPC's deadline; the batch is cancelled if it has not ended 2 s later).
 * Returns the gRPC status code, also in st->grpc_status, with st->message the server's text and
 * the detail of a grpc-status-details-bin trailer; on GRPC_STATUS_OK *body holds the response
 * (caller frees with grpc_byte_buffer_destroy(); NULL when the server sent no message).
 */
int slotd_call_unary(grpc_channel *ch, const char *method, const uint8_t *req, size_t req_len,
                     int deadline_ms, const char *authorization, grpc_byte_buffer **body,
                     struct slotd_status *st);

/*
 * Starts the one batch of an asynchronous unary call on call: send the initial metadata (md_count
 * entries of md; 0: none), send and close; receive the initial metadata, the response (*recv,
 * NULL when none came) and the status, its trailers and details. md, send and the receiving
 * arguments are borrowed until the batch completes on the call's queue with tag. Returns
 * grpc_call_start_batch's result (not GRPC_CALL_OK only for a misused call).
 */
grpc_call_error slotd_call_unary_start(grpc_call *call, grpc_metadata *md, size_t md_count,
                                       grpc_byte_buffer *send, grpc_metadata_array *initial_md,
                                       grpc_byte_buffer **recv, grpc_metadata_array *trailing_md,
                                       grpc_status_code *status, grpc_slice *details, void *tag);

/* One call and what its batches send and receive: the arguments slotd_call_unary_start takes,
 * kept together by callers whose batches complete on a queue they poll themselves. */
struct slotd_call_io {
    grpc_call *call; /* NULL when none is in flight */
    grpc_byte_buffer *send;
    grpc_byte_buffer *recv;
    grpc_metadata_array initial_md;
    grpc_metadata_array trailing_md;
    grpc_status_code status;
    grpc_slice details;
};

/* io: borrowed for the call, every batch on io->call completed. Frees the request and the
 * response (either may be NULL), both metadata arrays, the status details and the call; call,
 * send and recv are left NULL. */
void slotd_call_io_release(struct slotd_call_io *io);

/* details, trailing_md, st: borrowed for the call. Records how a call ended in st: the status
 * code, the server's text and, for a failure, the detail of a grpc-status-details-bin trailer. */
void slotd_call_status_set(struct slotd_status *st, grpc_status_code status, grpc_slice details,
                           const grpc_metadata_array *trailing_md);

/* bb: borrowed for the call (NULL allowed). Sets *out to the whole message in bb as one slice
 * (caller frees with grpc_slice_unref()). Returns false, *out empty, when bb is NULL or cannot
 * be read. */
bool slotd_call_flatten(grpc_byte_buffer *bb, grpc_slice *out);

/* bb, d: borrowed for the call. The message of type d in bb (caller frees with
 * protobuf_c_message_free_unpacked() or the type's own _free_unpacked()), or NULL when bb is
 * NULL, cannot be read or does not decode as d. */
ProtobufCMessage *slotd_call_unpack(grpc_byte_buffer *bb, const ProtobufCMessageDescriptor *d);

/* cq: ownership transfers. Shuts cq down, takes what is left on it (one event per batch still
 * started on it, then GRPC_QUEUE_SHUTDOWN) and destroys it. */
void slotd_call_cq_destroy(grpc_completion_queue *cq);

/* md, st: borrowed for the call. Reads a grpc-status-details-bin trailer into st's detail. */
void slotd_call_trailer_detail(const grpc_metadata_array *md, struct slotd_status *st);

/* buf, st: borrowed for the call. Fills st's detail fields from a grpc-status-details-bin value
 * (google.rpc.Status holding a slotd.v1.ErrorDetail). Returns 0, or -1 when the bytes do not
 * decode or carry no ErrorDetail (st->has_detail stays false). */
int slotd_call_detail_decode(const uint8_t *buf, size_t len, struct slotd_status *st);

/* err: borrowed for the call. Writes the printf-style sentence fmt into err (cut to errlen) and
 * returns rc: the one "fail with a message" of the clients' parsers and decoders. */
int slotd_call_fail(char *err, size_t errlen, int rc, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Defines `const char *fn(int err)`, the strerror() of an error list LIST of X(name, text) entries
 * numbered 0..count-1 in order: entry err's text, "unknown error" for any other err. Used by
 * libslotd, slotd-health and slotbench for their own error lists. */
#define SLOTD_CALL_STRERROR_DEFINE(fn, LIST, count)                                                \
    const char *fn(int err)                                                                        \
    {                                                                                              \
        static const char *const texts_[] = {LIST(SLOTD_CALL__ERR_TEXT)};                          \
        return err < 0 || err >= (count) ? "unknown error" : texts_[err];                          \
    }
#define SLOTD_CALL__ERR_TEXT(name, text) text,

#endif /* SLOTD_CALL_H */
