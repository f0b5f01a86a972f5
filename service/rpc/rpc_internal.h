/* rpc_internal.h - server internals shared by the files of service/rpc (not API). */
#ifndef SLOTD_RPC_INTERNAL_H
#define SLOTD_RPC_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#include <grpc/grpc.h>

#include "rpc.h"
#include "service/metrics/metrics.h"

#define RPC__CQ_THREADS_MAX 16
#define RPC__ARMED_PER_METHOD 8 /* request_call tags kept armed per method path (and generic) */

/* Every completion-queue tag starts with this; owner is the object the event belongs to. */
enum rpc__tag_kind {
    RPC__TAG_REQUEST,        /* struct rpc__request: a new call arrived (or shutdown) */
    RPC__TAG_CALL,           /* struct rpc_call: the final unary batch completed */
    RPC__TAG_WATCH_SEND,     /* struct rpc__watch: a Health/Watch message was sent */
    RPC__TAG_WATCH_CLOSE,    /* struct rpc__watch: the stream closed (client cancel / shutdown) */
    RPC__TAG_WATCH_STATUS,   /* struct rpc__watch: the final status batch completed */
    RPC__TAG_REFL_RECV,      /* struct rpc__refl: a reflection request arrived (or the end) */
    RPC__TAG_REFL_SEND,      /* struct rpc__refl: a reflection response was sent */
    RPC__TAG_REFL_CLOSE,     /* struct rpc__refl: the stream closed (status sent or cancelled) */
    RPC__TAG_REFL_STATUS,    /* struct rpc__refl: the final status batch completed */
    RPC__TAG_STREAM_SEND,    /* struct rpc_stream: a queued message was sent (or failed) */
    RPC__TAG_STREAM_CLOSE,   /* struct rpc_stream: the call closed (status sent, or cancelled) */
    RPC__TAG_STREAM_STATUS,  /* struct rpc_stream: the final status batch completed */
    RPC__TAG_CSTREAM_RECV,   /* struct rpc_cstream: a frame arrived (or the client's end) */
    RPC__TAG_CSTREAM_CLOSE,  /* struct rpc_cstream: the call closed (status sent, or cancelled) */
    RPC__TAG_CSTREAM_STATUS, /* struct rpc_cstream: the final status batch completed */
    RPC__TAG_BSTREAM_RECV,   /* struct rpc_bstream: a frame arrived (or the client's end) */
    RPC__TAG_BSTREAM_SEND,   /* struct rpc_bstream: a response message was sent (or failed) */
    RPC__TAG_BSTREAM_CLOSE,  /* struct rpc_bstream: the call closed (status sent, or cancelled) */
    RPC__TAG_BSTREAM_STATUS, /* struct rpc_bstream: the final status batch completed */
    RPC__TAG_SHUTDOWN,       /* struct rpc_server: grpc_server_shutdown_and_notify finished */
};

struct rpc__tag {
    enum rpc__tag_kind kind;
    void *owner;
    /* Runs the event on the CQ thread; set by the file that owns the kind (stream.c, cstream.c,
     * health.c, reflection.c). NULL for server.c's own kinds (request, call, shutdown). */
    void (*on_event)(struct rpc__tag *t, bool ok);
};

enum rpc__method_kind {
    RPC__METHOD_UNARY,         /* request message in, one response out, via cb */
    RPC__METHOD_HEALTH_WATCH,  /* grpc.health.v1.Health/Watch (server streaming, health.c) */
    RPC__METHOD_REFLECTION,    /* ServerReflectionInfo (bidi streaming, reflection.c); registered
                                  with GRPC_SRM_PAYLOAD_NONE */
    RPC__METHOD_SERVER_STREAM, /* one request in, messages out, via stream_cb (stream.c) */
    RPC__METHOD_CLIENT_STREAM, /* frames in via cstream_frame, one empty response (cstream.c);
                                  registered with GRPC_SRM_PAYLOAD_NONE */
    RPC__METHOD_BIDI_STREAM,   /* frames in via bstream_frame, coalesced results out
                                  (bstream.c); registered with GRPC_SRM_PAYLOAD_NONE */
};

#define RPC__GRPC_CODES 17 /* OK .. UNAUTHENTICATED */

/* Series of one method path (or of every unregistered path), created at start / first use. */
struct rpc__method_metrics {
    char label[RPC_METHOD_PATH_MAX];           /* the path without its leading '/', or "unknown" */
    struct metrics_histogram *_Atomic latency; /* NULL until first used */
    struct metrics_counter *_Atomic by_code[RPC__GRPC_CODES]; /* NULL until first used */
    struct metrics_counter *_Atomic frames[2]; /* client-stream frames: accepted, refused */
    struct metrics_counter *_Atomic streams_by_code[RPC__GRPC_CODES]; /* server streams ended */
};

struct rpc__method {
    char path[RPC_METHOD_PATH_MAX];
    enum rpc__method_kind kind;
    rpc_unary_cb cb;                          /* NULL: answers UNIMPLEMENTED (unary kind) */
    rpc_stream_cb stream_cb;                  /* RPC__METHOD_SERVER_STREAM only; never NULL there */
    rpc_cstream_frame_cb cstream_frame;       /* RPC__METHOD_CLIENT_STREAM only; never NULL there */
    rpc_cstream_end_cb cstream_end;           /* RPC__METHOD_CLIENT_STREAM; may be NULL */
    rpc_bstream_frame_cb bstream_frame;       /* RPC__METHOD_BIDI_STREAM only; never NULL there */
    struct rpc_bstream_limits bstream_limits; /* RPC__METHOD_BIDI_STREAM */
    void *ctx;
    bool counted; /* counts against max_inflight_calls (false for health) */
    void *handle; /* grpc_server_register_method result, set at start */
    struct rpc__method_metrics metrics;
};

/* A call's final status text and grpc-status-details-bin trailer (unary calls, server and client
 * streams); alive until the status batch completes. */
struct rpc__status {
    grpc_slice message;
    grpc_metadata trailer;
    bool has_trailer;
};

struct rpc_call {
    struct rpc__tag tag;
    struct rpc_server *server;
    const char *path; /* borrowed from the method table, or path_buf for unknown methods */
    grpc_call *call;
    int64_t deadline_ms;
    bool counted;  /* holds one max_inflight_calls slot until finished */
    int cancelled; /* RECV_CLOSE_ON_SERVER output: alive until the batch completes */
    grpc_byte_buffer *response;
    struct rpc__status status;
    char path_buf[RPC_METHOD_PATH_MAX];
    struct rpc__method_metrics *metrics; /* NULL: the server counts nothing */
    double start_s;                      /* metrics_now_seconds() at dispatch */
    const grpc_metadata_array *md;       /* request metadata while the handler runs, else NULL */
    rpc_local_cb local_cb;               /* non-NULL: a local call (rpc_call_new_local) */
    void *local_arg;
    int32_t conn; /* its connection's entry + 1 in server->conns (conn.c); 0 = none */
};

struct rpc__watch;
struct rpc_descset;

struct rpc__health {
    char service[RPC_METHOD_PATH_MAX];
    int status;
};

struct rpc_server {
    struct rpc_server_options opts;
    char listen_addr[256];
    char *tls_cert_pem, *tls_key_pem, *tls_ca_pem; /* owned copies (opts points at them); NULL */
    grpc_server *server;
    grpc_completion_queue *cq;
    struct rpc_server *poller; /* rpc_server_poll_by: polls through its cq; NULL: cq polls */
    pthread_t threads[RPC__CQ_THREADS_MAX];
    unsigned n_threads;
    struct rpc__method methods[RPC_METHODS_MAX];
    size_t n_methods;
    atomic_size_t inflight; /* invariant: <= opts.max_inflight_calls */
    struct rpc__tag shutdown_tag;

    pthread_mutex_t mu;  /* guards everything below */
    pthread_cond_t cond; /* signalled when live_calls / armed / shutdown_done change */
    bool started, shutting_down, shutdown_done, stopped;
    size_t live_calls; /* rpc_call and rpc__watch objects not yet freed */
    size_t armed;      /* request tags given to gRPC and not yet returned */
    struct rpc__health health[RPC_HEALTH_SERVICES_MAX];
    size_t n_health;
    struct rpc__watch *watches; /* doubly linked */
    size_t n_watches;           /* invariant: <= RPC_HEALTH_WATCHERS_MAX */
    size_t n_reflections;       /* invariant: <= RPC_REFLECTION_STREAMS_MAX */

    struct rpc_descset *descset; /* the embedded FileDescriptorSet; read-only after new */
    struct rpc__conns *conns;    /* connections and their calls in flight (conn.c) */

    struct metrics_family *m_requests; /* NULL when opts.metrics is NULL */
    struct metrics_family *m_latency;
    struct metrics_family *m_frames;  /* client-stream frames; NULL like m_requests */
    struct metrics_family *m_streams; /* server streams ended, by code; NULL like m_requests */
    struct rpc__method_metrics unknown_metrics; /* every unregistered path */
};

/* server.c */
void rpc__call_free(struct rpc_call *c);

/* The trailer that carries a failed call's ErrorDetail (google.rpc.Status bytes). */
#define RPC__DETAILS_KEY "grpc-status-details-bin"

/* An empty message and no trailer. */
void rpc__status_init(struct rpc__status *st);
/* Sets the message (copied) and, when details (borrowed for the call) is not NULL, the trailer
 * carrying a copy of details[0..details_len). Once per status, after rpc__status_init. */
void rpc__status_set(struct rpc__status *st, const char *message, const uint8_t *details,
                     size_t details_len);
/* rpc__status_set with e's message and its encoded ErrorDetail (e borrowed for the call); without
 * memory for the details the message still goes out. */
void rpc__status_set_error(struct rpc__status *st, const struct slotd_error *e);
/* Fills *op as the SEND_STATUS_FROM_SERVER of code with st, which must outlive the batch. */
void rpc__status_op(grpc_op *op, grpc_status_code code, struct rpc__status *st);
/* Releases what rpc__status_set made. */
void rpc__status_free(struct rpc__status *st);
/* Gives back the max_inflight_calls slot c holds, if any (once). */
void rpc__call_uncount(struct rpc_call *c);
/* Counts one frame of a client stream handed to its method's on_frame, by whether it was
 * accepted (any thread). */
void rpc__frame_record(struct rpc_server *s, struct rpc_call *c, bool accepted);
/* Counts a server-streaming call of c's method ending with code (slotd_grpc_streams_total),
 * when its final status is sent. Any thread. */
void rpc__stream_record(struct rpc_server *s, struct rpc_call *c, grpc_status_code code);
/* Moves the grpc_call out of c and frees the shell (the caller took over the live-call count). */
grpc_call *rpc__call_take(struct rpc_call *c);

/* shell.c: what the stream kinds (stream.c, cstream.c, bstream.c) share of a call. */

/* The part of a stream that holds its call: embedded in struct rpc_stream, rpc_cstream and
 * rpc_bstream. The stream is freed (rpc__shell_free) when its last reference goes. */
struct rpc__shell {
    /* The call's shell: its grpc_call, connection count, max_inflight_calls slot and live-call
     * count; freed after the stream. */
    struct rpc_call *call;
    pthread_mutex_t mu;        /* guards the stream (each kind says what else it covers) */
    unsigned refs;             /* batches given to gRPC and not completed, + the kind's own */
    bool initial_sent;         /* SEND_INITIAL_METADATA went with a batch */
    int cancelled;             /* RECV_CLOSE_ON_SERVER output: alive until the batch completes */
    struct rpc__status status; /* the final status, alive until the status batch completes */
};

/* Sets up sh for call c (borrowed until rpc__shell_free): the lock and an empty status.
 * 0, or -1 when the lock cannot be made (nothing to undo). */
int rpc__shell_init(struct rpc__shell *sh, struct rpc_call *c);
/* Undoes rpc__shell_init on a start that failed before any batch (the call stays the caller's). */
void rpc__shell_destroy(struct rpc__shell *sh);
/* Starts ops[n] on tag, with SEND_INITIAL_METADATA in front when with_initial and it was not sent
 * yet; counts one reference. Under sh->mu. false (nothing started) only on misuse. */
bool rpc__shell_batch_start_locked(struct rpc__shell *sh, const grpc_op *ops, size_t n,
                                   struct rpc__tag *tag, bool with_initial);
/* Arms the call's RECV_CLOSE_ON_SERVER on tag. Under sh->mu. */
bool rpc__shell_close_arm_locked(struct rpc__shell *sh, struct rpc__tag *tag);
/* Flattens one received message in (ownership transfers: destroyed here) of a stream of s into
 * *body (caller unrefs it) when it has at most s->opts.max_request_bytes: 0, or -1 with e set
 * (INVALID_FIELD "request" naming the limit, or MALFORMED), noun ("frame", "message") naming
 * the message in e's text. */
int rpc__frame_read(const struct rpc_server *s, grpc_byte_buffer *in, const char *noun,
                    grpc_slice *body, struct slotd_error *e);
/* Reads bb (borrowed for the call) into one flat slice (caller unrefs it): false when gRPC cannot
 * read it (a compressed message it cannot decompress). */
bool rpc__bytes_flatten(grpc_byte_buffer *bb, grpc_slice *body);
/* The start of a flattened body for a handler: NULL when it is empty. */
#define RPC__BODY_PTR(body) (GRPC_SLICE_LENGTH(body) > 0 ? GRPC_SLICE_START_PTR(body) : NULL)
/* Drops one reference and unlocks sh->mu (held on entry); true when it was the last: the caller
 * then frees its stream (its own fields, then rpc__shell_free). */
bool rpc__shell_unlock_release(struct rpc__shell *sh);
/* Frees owner (the stream embedding sh, whose own fields are released; free()d here) and then
 * the call's shell: status, lock, the call's max_inflight_calls slot, the call itself (last:
 * shutdown may proceed once the live-call count drops). */
void rpc__shell_free(struct rpc__shell *sh, void *owner);
/* Fails c (a stream whose state could not be allocated, no batch started) with INTERNAL. */
void rpc__shell_start_fail(struct rpc_call *c);

/* stream.c */
/* Takes over call c (a server-streaming method m, its request req already checked and its
 * max_inflight_calls slot taken): runs m's handler with a new stream, or fails c. CQ thread. */
void rpc__stream_start(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c,
                       const uint8_t *req, size_t len);
void rpc__stream_on_event(struct rpc__tag *t, bool ok);

/* cstream.c */
/* Takes over call c (a client-streaming method m, no payload read yet, its max_inflight_calls
 * slot taken): reads its frames, or fails c. CQ thread. */
void rpc__cstream_start(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c);
void rpc__cstream_on_event(struct rpc__tag *t, bool ok);

/* bstream.c */
/* Takes over call c (a bidirectional method m, no payload read yet, its max_inflight_calls slot
 * taken; c->md still the request's): reads its frames, or fails c. CQ thread. */
void rpc__bstream_start(struct rpc_server *s, const struct rpc__method *m, struct rpc_call *c);
void rpc__bstream_on_event(struct rpc__tag *t, bool ok);

/* conn.c: the connection table (max_connections entries). */
#define RPC__CONN_PEER_MAX 96 /* bytes of a peer address kept, NUL included */
struct rpc__conns;
int rpc__conns_new(size_t cap, struct rpc__conns **out);
void rpc__conns_free(struct rpc__conns *t);
/* Counts c (a call from gRPC, CQ thread) on its connection: 0, or -1 with err RESOURCE_EXHAUSTED
 * (QUEUE_FULL) when its connection already has max_streams_per_conn calls, or it is a new one and
 * max_connections are served. rpc__call_free releases it (rpc__conn_release). */
int rpc__conn_acquire(struct rpc_server *s, struct rpc_call *c, struct slotd_error *err);
void rpc__conn_release(struct rpc_server *s, struct rpc_call *c);

/* health.c */
int rpc__health_register(struct rpc_server *s);
/* Takes over call c (a Watch with payload req): starts streaming or fails it. CQ thread. */
void rpc__health_watch_start(struct rpc_server *s, struct rpc_call *c, const uint8_t *req,
                             size_t len);
void rpc__health_on_event(struct rpc__tag *t, bool ok);
/* Under s->mu: every status becomes NOT_SERVING (shutdown). */
void rpc__health_all_not_serving_locked(struct rpc_server *s);

/* reflection.c */
/* Parses the embedded descriptors and registers both ServerReflectionInfo paths. */
int rpc__reflection_register(struct rpc_server *s);
/* Takes over call c (a ServerReflectionInfo stream, no payload read yet): serves it or fails it.
 * CQ thread. */
void rpc__reflection_start(struct rpc_server *s, struct rpc_call *c);
void rpc__reflection_on_event(struct rpc__tag *t, bool ok);

#endif /* SLOTD_RPC_INTERNAL_H */
