/* internal.h - types shared by the runtime's files (loop, groups, storage and apply stages). */
#ifndef SLOTD_RUNTIME_INTERNAL_H
#define SLOTD_RUNTIME_INTERNAL_H

#include <pthread.h>
#include <stdio.h>
#include <uv.h>

#include "raft/raft.h"
#include "service/runtime/runtime.h"
#include "service/slot/slot.h"

/* logfmt lines on stderr: one per event. */
#define RT_LOG(level, fmt, ...)                                                                    \
    fprintf(stderr, "level=%s component=runtime " fmt "\n", level, ##__VA_ARGS__)

enum rt_request_kind { RT_PROPOSE = 1, RT_READ = 2 };

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
    uint64_t min_applied;  /* LOCAL reads */
    uint64_t index;        /* proposals: raft index once appended */
    uint64_t term;         /* proposals: term of that entry; reads: leader term */
    uint64_t read_index;   /* LINEARIZABLE reads once confirmed */
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

/* LINEARIZABLE reads of one group waiting for one ReadIndex round. */
struct rt_read_round {
    struct rt_read_round *next;
    uint64_t ctx;
    struct rt_list reads;
};

struct rt_group {
    uint32_t id;
    struct raft *raft;
    struct raft_mem_storage *mem;
    struct slot_group_state fsm_state; /* touched by the apply stage only */
    /* observed facts (loop thread) */
    raft_id leader;
    raft_term term;
    uint8_t role;
    bool in_batch;         /* rd is in the in-flight storage batch */
    bool committed_handed; /* rd's committed entries already went to the apply stage */
    struct raft_ready rd;
    uint64_t stored_last;  /* last raft index in the raftlog db */
    uint64_t first_index;  /* first raft index in the raftlog db */
    uint64_t compact_to;   /* compaction queued in the in-flight batch (0 none) */
    struct rt_list proposals;     /* appended, waiting for commit, by index */
    struct rt_read_round *rounds; /* ReadIndex rounds in flight */
    struct rt_list waiting_reads; /* confirmed or LOCAL reads waiting for apply */
    uint64_t applied_submitted;   /* highest index handed to the apply stage */
    uint64_t applied;             /* highest index the apply stage finished */
};

/* One committed entry handed to the apply stage (data in the job's arena). */
struct rt_apply_entry {
    uint64_t index;
    uint64_t term;
    const uint8_t *data;
    size_t len;
    struct rt_request *waiter; /* proposal waiting for this entry, or NULL */
};

struct rt_apply_group {
    struct rt_group *g;
    size_t n_entries;
    struct rt_apply_entry *entries;
};

/* Work for the apply stage: entries of many groups plus reads to serve. */
struct rt_apply_job {
    uv_work_t work;
    struct runtime *rt;
    struct rt_apply_job *next;
    size_t n_groups;
    size_t cap_groups;
    struct rt_apply_group *groups;
    struct rt_list reads;
    uint8_t *arena;
    size_t arena_len;
    size_t arena_cap;
    int rc; /* store error, fatal */
};

struct runtime {
    struct runtime_options opts;
    struct store *store;
    struct route_table *routes;
    struct rpc_server *server;
    struct route_snapshot *route_base; /* table + members; leaders filled at publish */
    size_t n_groups;
    struct rt_group *groups; /* index = id - 1 */

    /* inbound queue (gRPC threads -> loop) */
    pthread_mutex_t mu;
    struct rt_list inbound;
    size_t inbound_bytes;
    bool stopping;

    /* loop thread state */
    pthread_t thread;
    bool started;
    uv_loop_t loop;
    uv_async_t wake;
    uv_async_t stop_async;
    uv_timer_t ticker;
    uint64_t next_read_ctx;
    bool storage_busy;
    uv_work_t storage_work;
    struct store_log_batch *log_batch;
    int storage_rc;
    struct rt_apply_job *apply_running;
    struct rt_apply_job *apply_queue_head, *apply_queue_tail;
    struct rt_apply_job *building; /* job collecting entries this turn */
    struct slot_fsm *fsm;          /* used by the apply stage only */
    bool health_serving;
    uint64_t dropped_msgs; /* raft messages to peers this node does not know */
};

int64_t rt_now_ms(void);
void rt_fail(struct rt_request *r, int code, const char *fmt, ...);
void rt_fail_list(struct rt_list *l, int code, const char *msg);

/* group.c */
int rt_groups_open(struct runtime *rt, char *err, size_t errlen);
void rt_groups_close(struct runtime *rt);

/* apply.c */
struct rt_apply_job *rt_apply_job_new(struct runtime *rt);
int rt_apply_job_add(struct rt_apply_job *job, struct rt_group *g, const struct raft_entry *e,
                     struct rt_request *waiter);
void rt_apply_submit(struct runtime *rt, struct rt_apply_job *job);
void rt_apply_job_free(struct rt_apply_job *job);

/* loop.c */
void rt_pump(struct runtime *rt);
void rt_publish_route(struct runtime *rt);

#endif /* SLOTD_RUNTIME_INTERNAL_H */
