/* rpc.h - slotd's gRPC core server: unary and server-streaming calls, limits, errors, health. */
#ifndef SLOTD_RPC_H
#define SLOTD_RPC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

#include "status.h"

#define RPC_METHODS_MAX 64         /* registered method paths per server */
#define RPC_METHOD_PATH_MAX 128    /* "/package.Service/Method" incl. NUL */
#define RPC_HEALTH_SERVICES_MAX 32 /* distinct service names with a health status */
#define RPC_HEALTH_WATCHERS_MAX 64 /* concurrent Health/Watch streams; more: RESOURCE_EXHAUSTED */
#define RPC_QUEUE_FULL_RETRY_MS 10 /* retry_after_ms sent with the max_inflight_calls rejection */
/* Concurrent ServerReflectionInfo streams (v1 and v1alpha together); more: RESOURCE_EXHAUSTED. */
#define RPC_REFLECTION_STREAMS_MAX 16
/* Bytes of one ServerReflectionRequest; a larger one ends its stream with INVALID_ARGUMENT. */
#define RPC_REFLECTION_REQUEST_BYTES_MAX 16384

struct metrics_registry;

struct rpc_server_options {
    const char *listen_addr;   /* "127.0.0.1:0" picks a free port; borrowed until start returns */
    size_t max_inflight_calls; /* calls handed to handlers and not finished; default 4096 */
    size_t max_request_bytes;  /* default 4 MiB */
    unsigned cq_threads;       /* completion-queue threads; default 1 */
    /* Where unary calls are counted (slotd_grpc_requests_total, slotd_grpc_request_duration_
     * seconds); NULL (default): not counted. Borrowed; must outlive the server. */
    struct metrics_registry *metrics;
    /* TLS (gRPC core SSL credentials). PEM text, borrowed for rpc_server_new (which copies it).
     * tls_cert_pem and tls_key_pem both set: the server listens with TLS only; both NULL
     * (default): plaintext. tls_ca_pem verifies client certificates (NULL: none); with
     * tls_client_auth every client must present a certificate that verifies against it. */
    const char *tls_cert_pem; /* certificate chain */
    const char *tls_key_pem;  /* its private key */
    const char *tls_ca_pem;
    bool tls_client_auth; /* needs tls_ca_pem */
    /* false (default): a client port, with slotd.v1.Metadata (UNIMPLEMENTED until handlers are
     * added), health and reflection built in. true: a peer port, serving only what is added with
     * rpc_server_add_service / rpc_server_add_unary (every other path answers UNIMPLEMENTED). */
    bool peer_plane;
    /* Connection limits (conn.c; 0 = the default). A connection holding max_streams_per_conn
     * calls gets RESOURCE_EXHAUSTED for more (HTTP/2 MAX_CONCURRENT_STREAMS is twice that, so
     * the excess reaches the server and is refused instead of queueing in the client); a call on
     * a new connection while max_connections are served gets RESOURCE_EXHAUSTED; a connection
     * without calls for conn_idle_ms is closed by the server. */
    size_t
        max_streams_per_conn; /* default 1024 (a peer connection carries many clients' forwards) */
    size_t max_connections;   /* default 1024 */
    size_t conn_idle_ms;      /* default 60000 */
};

/* Keepalive enforcement of every server (rpc_server_start): the server pings a connection idle for
 * RPC_KEEPALIVE_TIME_MS and closes it when no answer comes within RPC_KEEPALIVE_TIMEOUT_MS; a
 * client pinging more often than every RPC_MIN_RECV_PING_INTERVAL_MS (without data) gets a strike,
 * and after RPC_MAX_PING_STRIKES the connection is closed (GOAWAY too_many_pings). Peer channels
 * ping every 10 s (service/transport). */
#define RPC_KEEPALIVE_TIME_MS 30000
#define RPC_KEEPALIVE_TIMEOUT_MS 10000
#define RPC_MIN_RECV_PING_INTERVAL_MS 5000
#define RPC_MAX_PING_STRIKES 2

/* Fills o (borrowed for the call) with the defaults; listen_addr "127.0.0.1:7700". */
void rpc_server_options_default(struct rpc_server_options *o);

struct rpc_server;
struct rpc_call;

/* Called on a completion-queue thread with the request bytes (req borrowed for the call; it may
 * be NULL when len is 0). The handler, or any one thread it hands the call to, must finish the call
 * exactly once with rpc_call_reply, rpc_call_reply_bytes or rpc_call_fail. Must not block. */
typedef void (*rpc_unary_cb)(void *ctx, struct rpc_call *call, const uint8_t *req, size_t len);

/* Creates a server (calls grpc_init). o (borrowed for the call) may be NULL for the defaults;
 * zero fields take the defaults. Unless o->peer_plane, registers every method of
 * slotd.v1.Metadata (answering UNIMPLEMENTED until a handler is added), grpc.health.v1.Health
 * with service "" SERVING, and grpc.reflection.v1 and v1alpha ServerReflection (from the
 * FileDescriptorSet embedded at build time; list_services names every service registered on the
 * server).
 * *out: caller frees with rpc_server_free(). Returns SLOTD_OK, SLOTD_EINVALID_FIELD (bad option:
 * only one of tls_cert_pem / tls_key_pem, or tls_client_auth without tls_cert_pem, tls_key_pem
 * and tls_ca_pem) or SLOTD_EINTERNAL. The PEM text is checked by rpc_server_start. */
int rpc_server_new(const struct rpc_server_options *o, struct rpc_server **out);

/* Registers every method of a protobuf-c service descriptor (borrowed; must outlive the server,
 * as generated descriptors do) without handlers. Before start only. Returns SLOTD_EINVALID_FIELD
 * when the path is too long or RPC_METHODS_MAX is reached. Registering a path twice is a no-op. */
int rpc_server_add_service(struct rpc_server *s, const ProtobufCServiceDescriptor *service);

/* Sets the handler of method ("/slotd.v1.Metadata/Propose", borrowed for the call), registering
 * the path if it is new. Before start only. ctx is passed to cb untouched. Returns
 * SLOTD_EINVALID_FIELD when the path is too long or RPC_METHODS_MAX is reached. */
int rpc_server_add_unary(struct rpc_server *s, const char *method, rpc_unary_cb cb, void *ctx);

/* The echo ceiling's method (`slotd --echo-only`, `slotbench --target echo`): its response is
 * the request's bytes, unchanged. No message type: any bytes up to max_request_bytes. */
#define RPC_ECHO_METHOD "/slotd.bench.v1.Echo/Echo"

/* Adds RPC_ECHO_METHOD to s, answered on the completion-queue thread that decoded the call with
 * rpc_call_reply_bytes (the request path's cost without any back end). Before start only.
 * Returns what rpc_server_add_unary returns. */
int rpc_server_add_echo(struct rpc_server *s);

/* Binds listen_addr (with TLS when configured), starts the completion-queue threads and arms every
 * method. *bound_port (may be NULL) receives the port. On failure err (NULL allowed) gets a
 * sentence and the server may only be freed. Returns SLOTD_OK or SLOTD_EINTERNAL. */
int rpc_server_start(struct rpc_server *s, int *bound_port, char *err, size_t errlen);

/* Makes s (not started) poll through `poller`'s completion queue (started, and shut down after
 * s): s's own queue does not poll, poller's is registered with s as well, so the connections s
 * accepts are read and written by poller's threads, while s's calls still complete on s's own
 * queue and threads. slotd's peer port uses it: otherwise its mostly idle thread also polls gRPC's
 * shared epoll set, takes a share of the client port's connections, and gRPC hands their work
 * between threads (a default-executor hop per call; BENCHMARKS.md "The unary path"). Needs gRPC's
 * epoll1 engine: rpc_server_start refuses it under another GRPC_POLL_STRATEGY. */
void rpc_server_poll_by(struct rpc_server *s, struct rpc_server *poller);

/* Stops accepting, sets every health status to NOT_SERVING, cancels in-flight calls (so health
 * watches end and server streams get their on_close) and returns once every call and stream has
 * finished and the completion-queue threads are joined. Calls held by other threads must still be
 * finished by them (a reply to a cancelled call completes immediately); shutdown waits for that.
 * Idempotent; no-op before start. */
void rpc_server_shutdown(struct rpc_server *s);

/* Shuts down if needed, frees s and calls grpc_shutdown. NULL is a no-op. */
void rpc_server_free(struct rpc_server *s);

/* The answer of a local call: status is a grpc_status_code; message (never NULL), resp (NULL
 * unless status is OK) and details (a packed google.rpc.Status, NULL if none) are borrowed for
 * the callback, which runs on the thread that finishes the call. */
typedef void (*rpc_local_cb)(void *arg, int status, const char *message, const uint8_t *resp,
                             size_t resp_len, const uint8_t *details, size_t details_len);

/* A call that never touches the network, for a node's own requests to its own handlers'
 * back ends (service/runtime/migrate.c submits its proposals with it): finishing it with
 * rpc_call_reply*, rpc_call_fail* calls cb(arg, ...) and frees it. path (static) is what
 * rpc_call_method returns; deadline_ms is CLOCK_MONOTONIC milliseconds. NULL out of memory. */
struct rpc_call *rpc_call_new_local(const char *path, int64_t deadline_ms, rpc_local_cb cb,
                                    void *arg);

/* Runs the handler registered on s for path (borrowed for the call) with a local call (see
 * rpc_call_new_local: cb(arg, ...) gets the answer, on the thread that finishes it) and request
 * req (len bytes, borrowed for the call), as if a client had called path on s's port: how a
 * node serves a request another node forwarded to it on the peer plane. After start; any
 * thread. Returns SLOTD_OK (cb runs exactly once), SLOTD_EUNIMPLEMENTED (no handler for path on
 * s) or SLOTD_EINTERNAL (out of memory); on an error cb never runs. */
int rpc_server_call_local(struct rpc_server *s, const char *path, int64_t deadline_ms,
                          const uint8_t *req, size_t len, rpc_local_cb cb, void *arg);

/* True for a call made with rpc_call_new_local or rpc_server_call_local (no network peer). */
bool rpc_call_is_local(const struct rpc_call *c);

/* Finishes the call with OK and msg (borrowed for the call) as the response. Any thread; the call
 * is freed later by a completion-queue thread and must not be touched again. */
void rpc_call_reply(struct rpc_call *c, const ProtobufCMessage *msg);

/* Same with an already serialized response (buf borrowed for the call). */
void rpc_call_reply_bytes(struct rpc_call *c, const void *buf, size_t len);

/* Finishes the call with e (borrowed for the call): status slotd_error_grpc_code(e->code), the
 * message, and the grpc-status-details-bin trailer. Any thread; e->code must not be SLOTD_OK. */
void rpc_call_fail(struct rpc_call *c, const struct slotd_error *e);

/* Finishes c with a status relayed from another server (forwarding): gRPC status code `status`
 * (not OK), its message, and the raw grpc-status-details-bin bytes (NULL for none). All pointers
 * are borrowed for the call. Any thread; exactly once per call, like rpc_call_fail(). */
void rpc_call_fail_raw(struct rpc_call *c, int status, const char *message, const uint8_t *details,
                       size_t details_len);

/* The call's deadline in CLOCK_MONOTONIC milliseconds, INT64_MAX if the client set none. */
int64_t rpc_call_deadline_ms(const struct rpc_call *c);

/* The method path, e.g. "/slotd.v1.Metadata/Propose". Borrowed from the server. */
const char *rpc_call_method(const struct rpc_call *c);

/* While the handler runs (the rpc_unary_cb call; NULL afterwards and for local calls): the value
 * of request metadata key (lowercase ASCII, borrowed for the call), not NUL-terminated, its length
 * in *len; NULL when the request has no such key. */
const char *rpc_call_header(const struct rpc_call *c, const char *key, size_t *len);

/* ---- server-streaming methods (stream.c) ------------------------------------------------- */

struct rpc_stream;

/* A server-streaming method's handler: called on a completion-queue thread with the one request
 * message (req borrowed for the call; NULL when len is 0). The handler owns one reference to st
 * and must call rpc_stream_finish exactly once (from any thread, possibly much later), after
 * which it must not touch st. Must not block. */
typedef void (*rpc_stream_cb)(void *ctx, struct rpc_stream *st, const uint8_t *req, size_t len);

/* Sets the server-streaming handler of method ("/slotd.v1.Metadata/Watch", borrowed for the
 * call; cb must not be NULL), registering the path if it is new. Before start only. A stream
 * passes the same checks as a unary call before cb runs (shutdown, connection limits, request
 * present and within max_request_bytes, max_inflight_calls) and holds its max_inflight_calls
 * slot and its connection's count until it is freed. Returns SLOTD_EINVALID_FIELD when the path
 * is too long or RPC_METHODS_MAX is reached. */
int rpc_server_add_server_stream(struct rpc_server *s, const char *method, rpc_stream_cb cb,
                                 void *ctx);

#define RPC_STREAM_QUEUE_BYTES_DEFAULT (4u << 20) /* default bound of rpc_stream_queued_bytes */
#define RPC_STREAM_EFULL 1 /* queued bytes would exceed the bound: nothing queued */
/* Finished, cancelled by the client, connection gone, or server shutting down: nothing queued. */
#define RPC_STREAM_ECLOSED 2

/* Queues one serialized message (buf borrowed for the call: it is copied) for sending, from any
 * thread; messages go out in the order queued, one send batch in flight at a time. Returns 0,
 * RPC_STREAM_EFULL (a message larger than the bound never fits) or RPC_STREAM_ECLOSED. */
int rpc_stream_send_bytes(struct rpc_stream *st, const void *buf, size_t len);
/* Same with msg (borrowed for the call), packed into the queue. */
int rpc_stream_send(struct rpc_stream *st, const ProtobufCMessage *msg);
/* Bytes queued and not yet reported sent by gRPC (the message in flight included): for pacing.
 * Any thread. */
size_t rpc_stream_queued_bytes(const struct rpc_stream *st);
/* Bound on queued bytes (default RPC_STREAM_QUEUE_BYTES_DEFAULT); set by the handler before
 * sending. */
void rpc_stream_set_queue_limit(struct rpc_stream *st, size_t bytes);
/* cb(arg) is called exactly once when the stream can no longer deliver (client cancelled,
 * deadline passed, connection closed, server shutdown) before rpc_stream_finish was called —
 * from a gRPC thread, after the handler returned, never while st's lock is held (cb may call
 * rpc_stream_send*, which return ECLOSED, and rpc_stream_finish), and never after
 * rpc_stream_finish has returned: a finish racing with cb on another thread waits for cb to
 * return (so do not finish while holding a lock cb takes). Set at most once, inside the handler
 * (before it returns). Without it an owner learns of the end only from RPC_STREAM_ECLOSED; one
 * that keeps a stream open without sending would hold up rpc_server_shutdown. */
void rpc_stream_set_on_close(struct rpc_stream *st, void (*cb)(void *arg), void *arg);
/* Ends the stream: the queued messages are sent first, then the status (e == NULL: OK; else
 * e's gRPC code, message and ErrorDetail trailer exactly like rpc_call_fail; e borrowed for the
 * call). If the stream already broke, the queue is dropped. Releases the handler's reference;
 * st is freed once every gRPC batch of it completed. Any thread, exactly once. */
void rpc_stream_finish(struct rpc_stream *st, const struct slotd_error *e);
/* While the handler runs (NULL afterwards): the value of request metadata key (lowercase ASCII,
 * borrowed for the call), not NUL-terminated, its length in *len; NULL when absent. */
const char *rpc_stream_header(const struct rpc_stream *st, const char *key, size_t *len);
/* The stream's deadline in CLOCK_MONOTONIC milliseconds, INT64_MAX if the client set none. */
/* The stream's call, for the accessors only (rpc_call_header, rpc_call_peer_names,
 * rpc_call_is_local, rpc_call_method, rpc_call_deadline_ms): never reply or fail it. */
struct rpc_call *rpc_stream_call(struct rpc_stream *st);
int64_t rpc_stream_deadline_ms(const struct rpc_stream *st);
/* The method path, borrowed from the server. */
const char *rpc_stream_method(const struct rpc_stream *st);

/* ---- client-streaming methods (cstream.c) ------------------------------------------------ */

struct rpc_cstream;

/* Called on a completion-queue thread with one frame (a request message of the stream; frame
 * borrowed for the call, NULL when len is 0). Frames of one stream are handed over one at a
 * time, in order: the next is read only after this returns. Return 0 to read on, or -1 with err
 * filled to end the stream with that status (no more frames are handed over). Must not block. */
typedef int (*rpc_cstream_frame_cb)(void *ctx, struct rpc_cstream *st, const uint8_t *frame,
                                    size_t len, struct slotd_error *err);
/* Called once per stream, on a completion-queue thread, after its last frame callback and once
 * the call is over: frees what the handler keeps with rpc_cstream_set_data. */
typedef void (*rpc_cstream_end_cb)(void *ctx, struct rpc_cstream *st);

/* Sets the client-streaming handler of method (borrowed for the call; on_frame not NULL, on_end
 * may be NULL), registering the path if it is new. Before start only. A stream passes the
 * unary call's checks before its first frame is read (shutdown, connection limits,
 * max_inflight_calls, whose slot and connection count it holds until it ends); each frame must
 * be within max_request_bytes (a larger one ends the stream with INVALID_ARGUMENT). When the
 * client half-closes, the stream ends with OK and an empty response message; when the call
 * breaks (client cancel, connection lost, server shutdown) it ends without more callbacks but
 * on_end. No deadline is enforced beyond the client's. Returns SLOTD_EINVALID_FIELD when the
 * path is too long or RPC_METHODS_MAX is reached. */
int rpc_server_add_client_stream(struct rpc_server *s, const char *method,
                                 rpc_cstream_frame_cb on_frame, rpc_cstream_end_cb on_end,
                                 void *ctx);
/* The stream's call, for the accessors only (rpc_call_peer_names, rpc_call_is_local,
 * rpc_call_method, rpc_call_deadline_ms; rpc_call_header answers NULL): never reply or fail it. */
struct rpc_call *rpc_cstream_call(struct rpc_cstream *st);
/* A pointer the handler keeps with the stream (NULL until set). Only from the frame callback or
 * on_end, which never run at the same time for one stream. */
void rpc_cstream_set_data(struct rpc_cstream *st, void *data);
void *rpc_cstream_data(const struct rpc_cstream *st);

/* ---- bidirectional streams (bstream.c) -------------------------------------------------- */

struct rpc_bstream;

/* Bounds of one bidirectional method's streams. */
struct rpc_bstream_limits {
    size_t inflight_max;    /* items begun whose results are not yet sent, per stream (>= 1) */
    size_t frame_items_max; /* items one frame may begin (1..inflight_max): the next frame is
                               read only while inflight + frame_items_max <= inflight_max */
};
#define RPC_BSTREAM_MSG_BYTES_MAX (1u << 20) /* bytes of one coalesced response message */

/* Called on a completion-queue thread with one frame (a request message; frame borrowed for the
 * call, NULL when len is 0), one at a time per stream, in order. It may begin at most
 * frame_items_max items (rpc_bstream_item_begin), each finished later with
 * rpc_bstream_item_done. Return 0 to read on, or -1 with err filled to end the stream with that
 * status at once (results not yet sent are dropped). Must not block. */
typedef int (*rpc_bstream_frame_cb)(void *ctx, struct rpc_bstream *st, const uint8_t *frame,
                                    size_t len, struct slotd_error *err);

/* Sets the bidirectional handler of method (borrowed for the call; on_frame not NULL; limits
 * borrowed, copied), registering the path if it is new. Before start only. A stream passes the
 * unary call's checks before its first frame is read (shutdown, connection limits,
 * max_inflight_calls, whose slot and connection count it holds until it is freed); each frame
 * must be within max_request_bytes (a larger one ends the stream with INVALID_ARGUMENT). The
 * client's half-close ends the stream with OK once every begun item's result was sent; a broken
 * call (client cancel, connection lost, server shutdown) ends it at once, the results of items
 * still in flight being dropped when they come. Returns SLOTD_EINVALID_FIELD when the path is
 * too long, RPC_METHODS_MAX is reached or a limit is out of range. */
int rpc_server_add_bidi_stream(struct rpc_server *s, const char *method,
                               rpc_bstream_frame_cb on_frame,
                               const struct rpc_bstream_limits *limits, void *ctx);
/* Begins one item (from the frame callback): takes an in-flight slot and a reference on st.
 * 0, or -1 when inflight_max items are in flight (then nothing is taken). */
int rpc_bstream_item_begin(struct rpc_bstream *st);
/* From the frame callback, before beginning a frame's n items: 0 when n is within the method's
 * frame_items_max, else -1 with err INVALID_FIELD naming the field "items" and the limit (return
 * -1 with it to refuse the frame). */
int rpc_bstream_items_check(const struct rpc_bstream *st, size_t n, struct slotd_error *err);
/* Finishes a begun item, from any thread, exactly once: part (borrowed for the call; at most
 * RPC_BSTREAM_MSG_BYTES_MAX bytes) is appended to the response being coalesced: it must be
 * whole fields of the response message, so concatenated parts are one valid message. Dropped
 * when the stream already broke or ended in error. Releases the item's reference. */
void rpc_bstream_item_done(struct rpc_bstream *st, const void *part, size_t len);
/* The stream's call, for the accessors only (rpc_call_header answers for the stream's whole
 * life, rpc_call_peer_names, rpc_call_deadline_ms, rpc_call_method): never reply or fail it. */
struct rpc_call *rpc_bstream_call(struct rpc_bstream *st);
/* The highest number of items st had in flight at once. Any thread. */
size_t rpc_bstream_inflight_peak(struct rpc_bstream *st);

#define RPC_PEER_NAME_MAX 128 /* bytes of one certificate name incl. NUL */

/* The names in the client certificate the TLS handshake verified against tls_ca_pem: the
 * subject's common name first, then its subject alternative names, at most max of them into
 * names (NUL-terminated; names of RPC_PEER_NAME_MAX bytes or more are skipped). Returns how many;
 * 0 when the call came without a verified certificate (plaintext, TLS without client auth, local
 * calls). Any time before the call is finished. */
size_t rpc_call_peer_names(const struct rpc_call *c, char (*names)[RPC_PEER_NAME_MAX], size_t max);

/* Calls currently handed to handlers and not yet finished (the max_inflight_calls count). */
size_t rpc_server_inflight(const struct rpc_server *s);
/* Connections the server counts now (conn.c: with calls in flight, or idle for less than
 * conn_idle_ms). */
size_t rpc_server_connections(const struct rpc_server *s);

/* Sets the grpc.health.v1 ServingStatus of service (borrowed for the call; "" = the whole server)
 * and notifies its Watch streams. A service beyond RPC_HEALTH_SERVICES_MAX names, or a name longer
 * than RPC_METHOD_PATH_MAX - 1 bytes, is ignored (and reported SERVICE_UNKNOWN). Any thread. */
void rpc_server_set_health(struct rpc_server *s, const char *service, int status);

#endif /* SLOTD_RPC_H */
