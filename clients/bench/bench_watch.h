/* bench_watch.h - slotbench --watchers: watch streams on "key-" beside the load, events counted. */
#ifndef SLOTD_BENCH_WATCH_H
#define SLOTD_BENCH_WATCH_H

#include "bench_err.h"
#include "bench_opts.h"

#include <grpc/grpc.h>

#include <stddef.h>
#include <stdint.h>

/* Bytes kept of the first early end of a watch stream, NUL included. */
#define BENCH_WATCH_ERROR_LEN 256

/* --watchers: what the watch streams received (all zero without the option). */
struct bench_watch_result {
    unsigned watchers;     /* streams opened */
    unsigned created;      /* streams that received their first message (server accepted) */
    uint64_t events;       /* events received in the measured window, all streams */
    uint64_t events_total; /* events received while the streams were open (warmup included) */
    uint64_t messages;     /* messages received in the window (with events or without) */
    uint64_t malformed;    /* messages that did not decode (their events are not counted) */
    double elapsed_s;      /* the window the counts cover: the measured phase */
    double events_per_s;   /* events / elapsed_s: delivered, all watchers together */
    /* events/s of each stream over the window: the median, the smallest and the largest */
    double per_watcher_median, per_watcher_min, per_watcher_max;
    /* streams that ended before slotbench cancelled them at the end of the run: their status
     * arrived (counted by code in ended_by_status) or etcd canceled the watcher (etcd_canceled;
     * the stream itself stays open) */
    unsigned ended_early;
    uint64_t ended_by_status[BENCH_STATUS_SLOTS];
    unsigned etcd_canceled;
    double first_end_s; /* the first early end, seconds after the measured start (< 0: before) */
    char first_end_error[BENCH_WATCH_ERROR_LEN]; /* "RESOURCE_EXHAUSTED: <details>"; "" if none */
};

/* o->watchers streams with their own completion queue and thread. */
struct bench_watch;

/*
 * o, channels, token_md, errmsg: borrowed for the call; o, the channels and token_md (NULL: no
 * authorization header) must outlive bench_watch_close(). Opens o->watchers watch streams on
 * BENCH_WIRE_WATCH_PREFIX (slotd Metadata/Watch, etcd Watch/Watch), round robin over channels,
 * without a deadline, starts the thread that reads them (one RECV_MESSAGE outstanding per
 * stream), and waits at most o->connect_timeout_ms until every stream has its first message
 * or has ended. Nothing is counted until bench_watch_window(). Returns BENCH_OK and *out
 * (caller frees with bench_watch_close()), or BENCH_ENOMEM with a sentence in errmsg.
 */
int bench_watch_open(struct bench_watch **out, const struct bench_opts *o,
                     grpc_channel *const *channels, size_t channel_count,
                     const grpc_metadata *token_md, char *errmsg, size_t errmsg_len);

/* Counts the events received from from_ns until until_ns (CLOCK_MONOTONIC); may be called
 * again to move the end (a run ended by --ops ends when its last call does). */
void bench_watch_window(struct bench_watch *w, int64_t from_ns, int64_t until_ns);

/* w: ownership transfers (freed here). r: borrowed for the call. Cancels every stream still
 * open, drains their completions, stops the thread and fills *r. */
void bench_watch_close(struct bench_watch *w, struct bench_watch_result *r);

#endif /* SLOTD_BENCH_WATCH_H */
