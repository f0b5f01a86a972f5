/* transport_internal.h - structures shared by the files of service/transport. */
#ifndef SLOTD_TRANSPORT_INTERNAL_H
#define SLOTD_TRANSPORT_INTERNAL_H

#include <pthread.h>

#include <grpc/grpc.h>

#include "transport.h"

/* One gRPC channel per distinct address; never freed before transport_free, so the address
 * string can be handed out by transport_peer_address. */
struct transport__channel {
    char address[TRANSPORT_ADDRESS_MAX];
    grpc_channel *channel;
};

/* FIFO of encoded RaftBatch field-3 records (tag, length, RaftMessage bytes), one slice each.
 * Grows by doubling; invariant: n <= cap, n <= queue_msgs_max. */
struct transport__ring {
    grpc_slice *slots;
    size_t cap, head, n;
};

struct transport__stream;

struct transport__peer {
    uint64_t node_id;
    struct transport__channel *chan; /* current address */
    struct transport__ring queue;
    size_t queued_bytes;              /* invariant: sum of the queued slices' lengths */
    struct transport__stream *stream; /* the open RaftStream call, NULL if none */
    bool in_flight;           /* a frame's SEND_MESSAGE is outstanding on stream (at most one) */
    unsigned backoff_ms;      /* 0 after a success; else the last wait */
    int64_t backoff_until_ms; /* CLOCK_MONOTONIC ms; 0 = no backoff started */
    uint64_t sent_msgs, sent_batches, dropped_full, failed_batches;
};

enum transport__state {
    TRANSPORT__NEW,      /* created, thread not started: messages only queue */
    TRANSPORT__RUNNING,  /* thread running: calls and batches start */
    TRANSPORT__STOPPING, /* in transport_stop: no new work, cancelled calls draining */
    TRANSPORT__STOPPED,
};

/* Every completion-queue tag starts with its kind. */
enum transport__call_kind {
    TRANSPORT__CALL_USER,        /* struct transport__call: transport_call / transport_call_addr */
    TRANSPORT__TAG_STREAM_SEND,  /* struct transport__tag: a frame's SEND_MESSAGE completed */
    TRANSPORT__TAG_STREAM_END,   /* struct transport__tag: the stream's status arrived */
};

struct transport__tag {
    enum transport__call_kind kind;
    struct transport__stream *st;
};

/* One peer's RaftStream call (raft.c). Two batches at most: the end batch (initial metadata
 * out, then RECV_INITIAL_METADATA, RECV_MESSAGE, RECV_STATUS_ON_CLIENT), armed at open and
 * outstanding until the call is over, and the one frame being sent. Freed once both completed. */
struct transport__stream {
    struct transport__tag send_tag, end_tag;
    struct transport__stream *prev, *next; /* t->streams, under t->mu */
    struct transport__peer *peer;
    grpc_call *call;
    grpc_byte_buffer *send; /* the frame in flight, NULL if none */
    grpc_byte_buffer *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_status_code status;
    grpc_slice status_details;
    size_t n_msgs;           /* messages in the frame in flight */
    int64_t send_until_ms;   /* CLOCK_MONOTONIC: the frame in flight fails the stream after */
    bool send_pending, end_pending;
    bool failed;             /* detached from its peer: a failure was counted (or it was closed) */
};

/* One outstanding unary client call; its address is the completion-queue tag. */
struct transport__call {
    enum transport__call_kind kind; /* TRANSPORT__CALL_USER */
    struct transport__call *prev, *next; /* t->calls, under t->mu */
    grpc_call *call;
    grpc_byte_buffer *send, *recv;
    grpc_metadata_array init_md, trail_md;
    grpc_metadata proof;          /* sent when has_proof; its slices live until call_free */
    bool has_proof;
    grpc_status_code status;
    grpc_slice status_details;
    transport_reply_cb cb;
    void *arg;
};

struct transport {
    struct transport_options opts;               /* its tls_* pointers are NULL (not kept) */
    grpc_channel_credentials *creds;             /* every channel's; SSL when opts.tls */
    char tls_server_name[TRANSPORT_ADDRESS_MAX]; /* "" = no target name override */
    struct transport_callbacks cb;
    pthread_mutex_t mu; /* guards everything below; never held while a callback runs */
    pthread_cond_t cond;
    enum transport__state state;
    grpc_completion_queue *cq;
    pthread_t thread;
    struct transport__peer *peers[TRANSPORT_PEERS_MAX];
    size_t n_peers;
    struct transport__channel *channels[TRANSPORT_CHANNELS_MAX];
    size_t n_channels;
    struct transport__call *calls; /* outstanding calls, for cancellation by stop */
    size_t live_calls;             /* invariant: the length of calls */
    struct transport__stream *streams; /* RaftStream calls not yet freed (open or closing) */
    size_t live_streams;               /* invariant: the length of streams */
};

/* CLOCK_MONOTONIC milliseconds. */
int64_t transport__now_ms(void);

/* The channel of address (borrowed for the call), created if new; *out is NULL on error. Under
 * t->mu. Returns TRANSPORT_OK, TRANSPORT_EINVAL (empty or too long), TRANSPORT_EFULL
 * (TRANSPORT_CHANNELS_MAX) or TRANSPORT_ENOMEM. */
int transport__channel_get(struct transport *t, const char *address,
                           struct transport__channel **out);

/* The peer with node_id, NULL if unknown. Under t->mu. */
struct transport__peer *transport__peer_find(struct transport *t, uint64_t node_id);

/* Starts c (allocated by the caller, kind and kind fields set, send owned by c from now on) on
 * channel with method and deadline, to node `to` (0: an address with no known node; only what the
 * sign callback binds a proof to): one batch of the six unary client ops. Under t->mu, state
 * RUNNING. On TRANSPORT_OK c is linked into t->calls and completes on the CQ thread; otherwise c
 * and send are freed. Returns TRANSPORT_OK or TRANSPORT_ENOMEM. */
int transport__call_start(struct transport *t, struct transport__call *c, grpc_channel *channel,
                          const char *method, uint64_t to, gpr_timespec deadline);

/* The CQ thread's handling of a completed call tag (success as reported by the queue): runs the
 * kind's completion, then unlinks and frees c. Takes t->mu itself. */
void transport__call_complete(struct transport *t, struct transport__call *c, int success);

/* The CQ thread's handling of a RaftStream tag (success as reported by the queue): stats,
 * failure (backoff, peer_unreachable), the next frame, the stream's free. Takes t->mu itself. */
void transport__stream_event(struct transport *t, struct transport__tag *tag, int success);

/* Fails the streams whose frame in flight passed call_timeout_ms, starts the frames of peers
 * whose backoff has ended and that have messages queued, and returns the earliest future
 * backoff end or send timeout (CLOCK_MONOTONIC ms), INT64_MAX if none. Takes t->mu. */
int64_t transport__raft_retry_due(struct transport *t);

/* Cancels every stream (transport_stop; their ends are not reported). Under t->mu. */
void transport__streams_cancel(struct transport *t);

/* Closes p's stream, if any, without counting a failure (its address changed): a frame in
 * flight is counted failed. Under t->mu. */
void transport__stream_close(struct transport *t, struct transport__peer *p);

/* Frees every queued slice and the ring storage of p. Under t->mu (or single-threaded). */
void transport__ring_free(struct transport__peer *p);

/* Drops the queued messages of p (they are not counted as dropped_full). Under t->mu. */
void transport__ring_clear(struct transport__peer *p);

/* The short name of a gRPC status code ("UNAVAILABLE"). Static. */

#endif /* SLOTD_TRANSPORT_INTERNAL_H */
