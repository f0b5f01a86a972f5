/* transport.h - slotd's peer transport: raft message batches and unary calls to other nodes. */
#ifndef SLOTD_TRANSPORT_H
#define SLOTD_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errlist.h"

#include "slotd/internal/v1/peer.pb-c.h"

/* X(name, value, message) */
#define TRANSPORT_ERRORS(X)                                                                        \
    X(TRANSPORT_OK, 0, "ok")                                                                       \
    X(TRANSPORT_ENOMEM, 1, "out of memory")                                                        \
    X(TRANSPORT_EUNKNOWN_PEER, 2, "unknown peer")                                                  \
    X(TRANSPORT_EFULL, 3, "queue or table full")                                                   \
    X(TRANSPORT_ESTOPPED, 4, "transport not running")                                              \
    X(TRANSPORT_EINVAL, 5, "invalid argument")

enum transport_err { TRANSPORT_ERRORS(SLOTD_ERRLIST_ENUM) };

/* Static message for an enum transport_err ("unknown error" for other values). */
const char *transport_strerror(int code);

#define TRANSPORT_PEERS_MAX 256    /* peers (node ids) per transport */
#define TRANSPORT_CHANNELS_MAX 512 /* distinct addresses (one gRPC channel each) per transport */
#define TRANSPORT_ADDRESS_MAX 256  /* "host:port" incl. NUL */
#define TRANSPORT_METHOD_MAX 128   /* "/package.Service/Method" incl. NUL */
/* The peer stream raft messages go out on (one per peer, frames of RaftStreamFrame). */
#define TRANSPORT_RAFT_STREAM_METHOD "/slotd.internal.v1.Peer/RaftStream"
#define TRANSPORT_PROOF_MAX 256 /* bytes of one signature value incl. NUL */
/* Bytes of a frame beside its RaftBatch: the proof field (tag, 2-byte length, the proof without
 * its NUL) and the batch field's tag and length. batch_bytes_max bounds the whole frame. */
#define TRANSPORT_FRAME_OVERHEAD_MAX (1 + 2 + (TRANSPORT_PROOF_MAX - 1) + 1 + 5)

struct transport_options {
    uint64_t node_id;         /* this node; must not be 0 */
    size_t queue_msgs_max;    /* per peer: raft messages waiting; default 8192 */
    size_t queue_bytes_max;   /* per peer: encoded bytes waiting; default 64 MiB */
    size_t batch_bytes_max;   /* one RaftStream frame; default 4 MiB, at least 1 KiB */
    unsigned backoff_min_ms;  /* after a failed send; default 50 */
    unsigned backoff_max_ms;  /* default 2000; must be >= backoff_min_ms */
    unsigned call_timeout_ms; /* a frame's send must complete within it; default 5000 */
    /* TLS to peers (gRPC core SSL credentials); false (default): plaintext. The PEM text is
     * borrowed for transport_new, which copies what it keeps. tls_ca_pem verifies the peers'
     * certificates (NULL: gRPC's default roots). tls_cert_pem and tls_key_pem (both or neither)
     * are presented to peers that require client certificates (mTLS). tls_server_name (NULL or
     * "": the host of the peer's address) is the name checked in the peers' certificates, sent
     * as GRPC_SSL_TARGET_NAME_OVERRIDE_ARG. */
    bool tls;
    const char *tls_ca_pem;
    const char *tls_cert_pem;
    const char *tls_key_pem;
    const char *tls_server_name; /* shorter than TRANSPORT_ADDRESS_MAX */
    /* Proof of this node's identity on every call whose method starts with sign_prefix (NULL:
     * no call is signed). sign writes a NUL-terminated value of at most TRANSPORT_PROOF_MAX bytes
     * for request metadata key sign_header (lowercase; borrowed, must outlive the transport)
     * of a call to node `to` (0 for transport_call_addr) and returns 0; nonzero sends the call
     * unsigned (the peer then refuses it). A RaftStream frame carries its proof in its own proof
     * field instead, made for TRANSPORT_RAFT_STREAM_METHOD over the frame's batch bytes (when
     * that method starts with sign_prefix). It runs on any thread that starts a call, with the
     * transport's lock held: thread-safe, short, and it must not call the transport. */
    int (*sign)(void *ctx, const char *method, uint64_t to, const uint8_t *body, size_t len,
                char *out, size_t outlen);
    void *sign_ctx;
    const char *sign_header;
    const char *sign_prefix;
};

/* Fills o (borrowed for the call) with the defaults; node_id 0 (the caller must set it). */
void transport_options_default(struct transport_options *o);

struct transport;

/* Callbacks run on the transport's own completion-queue thread; keep them short (hand off). They
 * may call any transport function except transport_stop and transport_free. */
struct transport_callbacks {
    void *ctx;
    /* The RaftStream to `peer` failed (connect error, a refused frame, a send not completed
     * within call_timeout_ms, any status): the messages of the frame in flight (why says how
     * many, maybe 0) are lost and the peer backs off. why (borrowed for the callback) is a
     * sentence. Not called for streams cancelled by transport_stop. May be NULL. */
    void (*peer_unreachable)(void *ctx, uint64_t peer, const char *why);
};

/* Creates a stopped transport (calls grpc_init). o is borrowed for the call; zero fields other
 * than node_id take the defaults. cb (borrowed for the call, copied; NULL = no callbacks).
 * *out: caller frees with transport_free(). Returns TRANSPORT_OK, TRANSPORT_EINVAL (bad option,
 * e.g. only one of tls_cert_pem / tls_key_pem) or TRANSPORT_ENOMEM (also: gRPC refused the SSL
 * credentials). */
int transport_new(const struct transport_options *o, const struct transport_callbacks *cb,
                  struct transport **out);

/* Adds peer node_id at address ("host:port", borrowed for the call), before or after start.
 * Adding a known node_id again points it at address (calls in flight finish on the old
 * channel). Thread-safe. Returns TRANSPORT_OK, TRANSPORT_EINVAL (node_id 0 or this node, empty
 * or too long address), TRANSPORT_EFULL (TRANSPORT_PEERS_MAX or TRANSPORT_CHANNELS_MAX reached)
 * or TRANSPORT_ENOMEM. */
int transport_add_peer(struct transport *t, uint64_t node_id, const char *address);

/* The address of peer node_id, NULL if unknown. Borrowed from t; valid until transport_free. */
const char *transport_peer_address(const struct transport *t, uint64_t node_id);

/* Starts the completion-queue thread. Returns TRANSPORT_OK, TRANSPORT_ESTOPPED (already started
 * or stopped) or TRANSPORT_ENOMEM (thread creation failed). */
int transport_start(struct transport *t);

/* Refuses new work, cancels in-flight calls and returns once every one has completed and the
 * completion-queue thread is joined. The transport_reply_cb of every cancelled call still runs
 * exactly once (status GRPC_STATUS_CANCELLED). Queued raft messages are dropped. Idempotent; not
 * from a callback. */
void transport_stop(struct transport *t);

/* Stops if needed, frees t (queued messages, channels) and calls grpc_shutdown. NULL is a no-op. */
void transport_free(struct transport *t);

/* Queues one raft message for peer `to` (normally m->to); encoded now (m borrowed for the call).
 * Thread-safe. Returns TRANSPORT_OK, TRANSPORT_EUNKNOWN_PEER, TRANSPORT_EFULL (queue_msgs_max or
 * queue_bytes_max hit: the message is dropped and counted in dropped_full; raft retransmits),
 * TRANSPORT_EINVAL (the encoded message alone exceeds batch_bytes_max), TRANSPORT_ESTOPPED
 * (after transport_stop) or TRANSPORT_ENOMEM. Before start messages just queue. */
int transport_send_raft(struct transport *t, uint64_t to,
                        const Slotd__Internal__V1__RaftMessage *m);

/* Sends one frame on each peer's RaftStream (opening it first when none is open) for every peer
 * that has queued messages and no frame in flight, unless the peer is backing off. At most one
 * frame per peer is in flight, so order is kept and messages coalesce while a send is
 * outstanding; a frame holds whole messages up to batch_bytes_max. The completion-queue thread
 * also sends the next frame when a send completes and more is queued, and when a backoff ends.
 * Thread-safe; a no-op unless running. */
void transport_flush(struct transport *t);

/* Reply of transport_call: status is a grpc_status_code; message (never NULL), resp (NULL unless
 * status is OK) and details (the grpc-status-details-bin trailer, a google.rpc.Status; NULL if
 * none) are borrowed for the callback. Runs on the completion-queue thread. */
typedef void (*transport_reply_cb)(void *arg, int status, const char *message, const uint8_t *resp,
                                   size_t resp_len, const uint8_t *details, size_t details_len);

/* Starts a unary call of method ("/pkg.Service/Method", borrowed for the call) with request req
 * (borrowed for the call, copied; NULL allowed when len is 0) to peer's address. deadline_ms is
 * CLOCK_MONOTONIC milliseconds (INT64_MAX = none; one already passed always ends in
 * DEADLINE_EXCEEDED); the call fails fast (no wait-for-ready: UNAVAILABLE while the address
 * cannot be reached). On
 * TRANSPORT_OK cb runs exactly once with arg; on any other return it never runs. Thread-safe.
 * Returns TRANSPORT_OK, TRANSPORT_EUNKNOWN_PEER, TRANSPORT_EINVAL (method too long or not
 * starting with '/'), TRANSPORT_ESTOPPED (not started, or stopped) or TRANSPORT_ENOMEM. */
int transport_call(struct transport *t, uint64_t peer, const char *method, const void *req,
                   size_t len, int64_t deadline_ms, transport_reply_cb cb, void *arg);

/* Same, to address (borrowed for the call); its channel is created on first use and kept until
 * transport_free. Also TRANSPORT_EFULL when TRANSPORT_CHANNELS_MAX addresses are known. */
int transport_call_addr(struct transport *t, const char *address, const char *method,
                        const void *req, size_t len, int64_t deadline_ms, transport_reply_cb cb,
                        void *arg);

/* A slotd.v1.Metadata or slotd.v1.Admin call (method, e.g. "/slotd.v1.Metadata/Propose",
 * borrowed for the call) passed on to peer on the peer plane: sent as Peer/Forward with req
 * wrapped in a ForwardRequest (signed like every Peer call), answered by cb with the inner
 * method's response unwrapped. Otherwise as transport_call (same returns; also TRANSPORT_ENOMEM
 * when the wrapper cannot be made). */
int transport_forward(struct transport *t, uint64_t peer, const char *method, const void *req,
                      size_t len, int64_t deadline_ms, transport_reply_cb cb, void *arg);

/* Same, to address (borrowed for the call), as transport_call_addr: the receiver is not known
 * by id, so the proof names none (service/node accepts such a proof only for JoinNode,
 * ActivateNode and ClusterState, what a joining node sends before it knows the members). */
int transport_forward_addr(struct transport *t, const char *address, const char *method,
                           const void *req, size_t len, int64_t deadline_ms, transport_reply_cb cb,
                           void *arg);

/* True when a reply with status and message (borrowed for the call) says the call was never sent:
 * gRPC failed the call at its pick of a connection (UNAVAILABLE "failed to connect to all
 * addresses": refused, unreachable, or a TLS handshake that failed), so the peer cannot have seen
 * the request. A failure after a connection was picked (reset, GOAWAY, deadline) is false: the
 * request may have arrived. */
bool transport_reply_unsent(int status, const char *message);

struct transport_peer_stats {
    uint64_t sent_msgs;      /* messages in frames whose send completed */
    uint64_t sent_batches;   /* frames whose send completed (the receiver acks none) */
    uint64_t dropped_full;   /* messages refused by transport_send_raft with TRANSPORT_EFULL */
    uint64_t failed_batches; /* frames in flight when their stream failed: reported to
                                peer_unreachable, except those cancelled by transport_stop or
                                that gRPC could not start */
    uint64_t queued_msgs;    /* waiting now (not counting the frame in flight) */
    uint64_t queued_bytes;
    bool in_flight;   /* a frame's send is outstanding */
    bool backing_off; /* a failed stream was followed by a wait that has not ended */
};

/* Fills out (borrowed for the call) with peer's counters. Thread-safe. Returns TRANSPORT_OK or
 * TRANSPORT_EUNKNOWN_PEER. */
int transport_peer_stats(struct transport *t, uint64_t peer, struct transport_peer_stats *out);

#endif /* SLOTD_TRANSPORT_H */
