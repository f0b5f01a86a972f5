/* bench_fake_server.h - in-process 127.0.0.1 gRPC server answering slotd/etcd calls. */
#ifndef SLOTD_BENCH_FAKE_SERVER_H
#define SLOTD_BENCH_FAKE_SERVER_H

#include <stdbool.h>
#include <stdint.h>

#define FAKE_KEYS_TRACKED 4096 /* put counts are kept per key index below this */

struct fake_server_config {
    /* ProposeStream: each item counts as a call; its result fails UNAVAILABLE (with the
     * NO_LEADER detail) or has code 0 without a response ("malformed"); hang_every is ignored */
    unsigned fail_every;      /* every Nth call (1-based) answers UNAVAILABLE; 0 = never */
    unsigned malformed_every; /* every Nth call answers OK with bytes that do not decode */
    unsigned hang_every;      /* every Nth call gets no answer until the client gives up */
    bool read_found;          /* reads answer found=true (etcd: one kv) */
    unsigned key_size;        /* expected key length: others count as bad_requests */
    unsigned value_size;      /* expected put value length */
    /* RouteSnapshot: NULL answers UNIMPLEMENTED; else even hash slots map to group 1, led by
     * node 2 at this address, and odd ones to group 2, whose leader is unknown (0). */
    const char *route_leader_address;
    /* 0 = any key; 1 = keys must fall in even hash slots, 2 = odd (others count wrong_slot) */
    unsigned slot_parity;
    /* Watch (slotd Metadata/Watch, etcd Watch/Watch; the request must watch the prefix "key-"):
     * each stream first gets a created message; once the fake has seen its first put, every
     * stream gets watch_messages messages of watch_events events (1..FAKE_WATCH_EVENTS_MAX),
     * each followed by a progress message without events; then, when watch_end_code is not 0,
     * the stream ends with that status ("fake: watch cut off"), else it stays open until the
     * client cancels it. */
    unsigned watch_messages;
    unsigned watch_events;
    unsigned watch_end_code;
};

#define FAKE_WATCH_EVENTS_MAX 64
#define FAKE_WATCHES_MAX 64 /* streams served at once (more: UNAVAILABLE) */

struct fake_server_stats {
    uint64_t calls;
    uint64_t propose;
    uint64_t read_by_consistency[3]; /* slotd.v1.Consistency */
    uint64_t etcd_put;
    uint64_t etcd_range_linearizable;
    uint64_t etcd_range_serializable;
    uint64_t bad_requests;      /* undecodable, wrong key or value size, unknown method */
    uint64_t route_snapshots;   /* RouteSnapshot calls */
    uint64_t no_forward;        /* Propose/Read calls with no_forward set */
    uint64_t wrong_slot;        /* Propose/Read keys outside the slot_parity hash slots */
    uint64_t watches;           /* Watch streams with a good request */
    uint64_t watch_events_sent; /* events in messages whose send completed */
    uint64_t put_count_by_key[FAKE_KEYS_TRACKED];
};

struct fake_server;

/*
 * cfg: borrowed for the call. Starts the server on an ephemeral 127.0.0.1 port (in *port)
 * with its own thread. Returns NULL on failure. Caller frees with fake_server_stop().
 */
struct fake_server *fake_server_start(const struct fake_server_config *cfg, int *port);

/* f: ownership transfers (freed here). out: borrowed for the call, receives the counters. */
void fake_server_stop(struct fake_server *f, struct fake_server_stats *out);

#endif /* SLOTD_BENCH_FAKE_SERVER_H */
