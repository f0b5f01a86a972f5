/* request.h - one request on its way through the runtime, lists of them, their failure. */
#ifndef SLOTD_RUNTIME_REQUEST_H
#define SLOTD_RUNTIME_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct rpc_call;

enum rt_request_kind {
    RT_PROPOSE = 1,
    RT_READ = 2,
    RT_RAFT_BATCH = 3,   /* data = RaftBatch bytes */
    RT_UNREACHABLE = 4,  /* group field unused; min_applied = peer id */
    RT_SNAP_CHUNK = 5,   /* data = SnapshotChunk bytes; call answered when staged */
    RT_SNAP_SENT = 6,    /* a chunk RPC finished: index = transfer id, min_applied = ok */
    RT_GROUP_STATUS = 7, /* data = GroupStatusResponse bytes from a peer */
    RT_TRANSFER = 8,     /* hand leadership away (shutdown) */
    RT_CTL_STATE = 9,    /* data = ClusterStateResponse bytes from a voter (mirrors) */
};

/* One client request on its way through the runtime. One allocation holding
 * the entry (propose) or key (read) bytes. */
struct rt_request {
    struct rt_request *next;
    uint8_t kind;        /* enum rt_request_kind */
    uint8_t consistency; /* Slotd__V1__Consistency, reads */
    uint16_t hash_slot;
    uint32_t group;
    struct rpc_call *call;
    int64_t deadline_ms;
    uint64_t min_applied; /* LOCAL reads */
    uint64_t index;       /* proposals: raft index once appended */
    uint64_t term;        /* proposals: term of that entry; reads: leader term */
    uint64_t read_index;  /* LINEARIZABLE reads once confirmed */
    size_t len;
    uint8_t data[];
};

/* A FIFO of requests (intrusive). */
struct rt_list {
    struct rt_request *head;
    struct rt_request *tail;
    size_t len;
};

void rt_list_push(struct rt_list *l, struct rt_request *r);
struct rt_request *rt_list_pop(struct rt_list *l);
void rt_list_concat(struct rt_list *dst, struct rt_list *src);

/* CLOCK_MONOTONIC in ms: deadlines, leases, timers (any thread). */
int64_t rt_now_ms(void);
/* Answers r with the error (code, message) and frees it; QUEUE_FULL and NO_LEADER carry a retry
 * hint. */
void rt_fail(struct rt_request *r, int code, const char *fmt, ...);
void rt_fail_list(struct rt_list *l, int code, const char *msg);

#endif /* SLOTD_RUNTIME_REQUEST_H */
