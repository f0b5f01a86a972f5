/* bench_stream.h - --stream: puts as items of Metadata/ProposeStream, coalesced per loop turn. */
#ifndef SLOTD_BENCH_STREAM_H
#define SLOTD_BENCH_STREAM_H

#include "bench_opts.h"

#include <grpc/grpc.h>

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define BENCH_STREAM_METHOD "/slotd.v1.Metadata/ProposeStream"
/* Items per request message: the server's limit (docs/api.md "ProposeStream"). */
#define BENCH_STREAM_ITEMS_PER_MSG 1024u
/* Item bytes per request message (the server takes --max-request-bytes, default 4 MiB). */
#define BENCH_STREAM_MSG_BYTES_MAX (1u << 20)

/* One put of a worker: set by the caller before bench_stream_submit, kept until its result. */
struct bench_stream_item {
    uint64_t key_index;
    int64_t start_ns; /* submit time: the item's latency runs from here to its result */
    bool measured;
    bool direct;     /* sent with no_forward to the leader the route names */
    bool in_use;     /* submitted, result not yet delivered */
    bool sent;       /* in a request message the stream has sent */
    uint16_t stream; /* index into the set's streams */
};

/* How one item ended, for the caller's counts. */
struct bench_stream_outcome {
    unsigned code;     /* gRPC status code of the item (or of its stream when it ended) */
    bool response_ok;  /* code 0 and a ProposeResponse carrying its put result */
    bool has_detail;   /* the item's details held a slotd.v1.ErrorDetail */
    unsigned detail;   /* its ErrorCode, bucketed by bench_wire_detail_bucket */
    bool stream_ended; /* the stream ended (or was cancelled) before the item's result */
};

/* Called once for every submitted item; ctx is the set's. */
typedef void (*bench_stream_done_cb)(void *ctx, unsigned item,
                                     const struct bench_stream_outcome *out);

struct bench_stream;

/* The item table and the streams of one worker; everything runs on the worker's thread. */
struct bench_stream_set {
    const struct bench_opts *o;
    grpc_completion_queue *cq;
    grpc_metadata *md; /* the token, or NULL; borrowed until the set is freed */
    size_t md_count;
    const uint8_t *value;
    char *key; /* key_size + 1 bytes */
    struct bench_stream_item *items;
    unsigned item_count;
    struct bench_stream *streams;
    unsigned stream_count;
    unsigned inflight; /* invariant: number of items[i].in_use */
    bench_stream_done_cb done;
    void *ctx;
    /* counters (the caller copies them into its report) */
    uint64_t streams_opened, messages_sent, items_sent, messages_received;
    uint64_t unknown_results; /* results naming no item of theirs, or undecodable messages,
                                 before bench_stream_cancel_all */
    bool closing;             /* bench_stream_cancel_all ran */
};

/*
 * set, o, cq, md, value: borrowed until bench_stream_set_free (md: md_count entries, NULL when
 * 0). item_count items (each worker's share of --concurrency) over stream_count streams
 * (opened on first use). Returns BENCH_OK or BENCH_ENOMEM.
 */
int bench_stream_set_init(struct bench_stream_set *set, const struct bench_opts *o,
                          grpc_completion_queue *cq, grpc_metadata *md, size_t md_count,
                          const uint8_t *value, unsigned item_count, unsigned stream_count,
                          bench_stream_done_cb done, void *ctx);

/* Frees the set; every call must have ended (bench_stream_busy false). */
void bench_stream_set_free(struct bench_stream_set *set);

/*
 * channel: borrowed while the stream is open. Queues set->items[item] (filled in by the caller,
 * not in use) on stream index stream (< stream_count), which is opened on channel when it is
 * not open. The item goes out with the next bench_stream_flush.
 */
void bench_stream_submit(struct bench_stream_set *set, unsigned item, unsigned stream,
                         grpc_channel *channel);

/* Sends, on every stream that has queued items and no send in flight, one request message of
 * at most BENCH_STREAM_ITEMS_PER_MSG items and BENCH_STREAM_MSG_BYTES_MAX bytes. */
void bench_stream_flush(struct bench_stream_set *set);

/* True when tag belongs to the set; then handles the completion (results go to done). */
bool bench_stream_event(struct bench_stream_set *set, void *tag, bool success);

/* Cancels every open stream whose oldest item was submitted before now - deadline_ns (its
 * items end DEADLINE_EXCEEDED when its status comes back). */
void bench_stream_expire(struct bench_stream_set *set, int64_t now, int64_t deadline_ns);

/* Cancels every open stream and ends every queued item (stream_ended, CANCELLED). */
void bench_stream_cancel_all(struct bench_stream_set *set);

/* True while a stream has a batch outstanding or an item is in use. */
bool bench_stream_busy(const struct bench_stream_set *set);

/*
 * key, buf: borrowed for the call. Encodes one ProposeStreamRequest.items entry (field 1):
 * ProposeStreamItem{id, request = the put of key and value, no_forward as given}. Returns the
 * encoded size; writes buf only when that size is <= buf_len.
 */
size_t bench_stream_item_encode(uint64_t id, bool no_forward, const uint8_t *key, size_t key_len,
                                const uint8_t *value, size_t value_len, uint8_t *buf,
                                size_t buf_len);

#endif /* SLOTD_BENCH_STREAM_H */
