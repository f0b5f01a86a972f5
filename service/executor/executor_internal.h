/* executor_internal.h - the executor's state and the steps its files share (loop thread). */
#ifndef SLOTD_EXECUTOR_EXECUTOR_INTERNAL_H
#define SLOTD_EXECUTOR_EXECUTOR_INTERNAL_H

#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

#include "service/executor/executor.h"
#include "service/log/log.h"
#include "service/runtime/engine.h"
#include "service/runtime/runtime.h"
#include "store/keys.h"

/* The executors' log lines keep the component they had inside the runtime. */
#define EXEC_LOG(level, fmt, ...) slog(level, "runtime", fmt, ##__VA_ARGS__)

/* A balance move the controller leader proposed (balance.c), until it sees the task end: the
 * move's group, source and target and the wall clock it was created at (the task's created_ms). */
#define EXEC_BALANCE_SENT_MAX 64
struct exec_balance_sent {
    uint32_t group;
    uint64_t source, target;
    uint64_t created_ms;
};

/* The task executor's memory of one task phase (task.c): when it started here and when the
 * next repeated action is due. */
#define EXEC_TASK_PACE_MAX 16
struct exec_task_pace {
    uint64_t task;
    uint32_t attempt, phase;
    int64_t since_ms, next_ms;
    bool advanced; /* this node sent the phase's task_advance at least once */
};

/* The hash-slot migration executor's memory of one task on this node (migrate.c; loop thread,
 * except the reply fields, which transport and apply threads fill under mu). */
#define EXEC_MIGRATIONS_MAX 4
#define EXEC_MIG_ERROR_MAX 200
struct exec_migration {
    pthread_mutex_t mu;
    uint64_t call_seq; /* the call whose answer is awaited; answers to others are ignored */
    bool reply_ready;
    int reply_status;
    uint64_t reply_index;
    char reply_message[EXEC_MIG_ERROR_MAX - 40];
    /* loop thread */
    uint64_t task;
    uint32_t attempt, phase;
    int64_t used_ms, next_ms, next_progress_ms, call_deadline_ms;
    bool in_flight;
    uint64_t call_to;
    char error[EXEC_MIG_ERROR_MAX];
    bool fenced_here, copy_done;
    uint32_t seq, crc;
    uint64_t rows, rows_total, bytes_sent, bytes_total;
    unsigned cursor_slot;
    size_t cursor_len;
    uint8_t cursor[STORE_FSM_KEY_MAX]; /* last row key acknowledged by the target */
    bool pending_last;                 /* the chunk in flight holds the last rows */
    size_t pending_rows, pending_bytes, pending_len;
    uint32_t pending_crc;
    unsigned pending_slot;
    uint8_t pending_key[STORE_FSM_KEY_MAX];
    uint32_t abort_attempt; /* failed task: the attempt whose abort ran / runs here */
    unsigned abort_step;    /* 0 target, 1 source, 2 done */
    bool aborted;
};

/* task_cleanup.c, per slot group led here: a learner (or removed voter) no task owns, since when
 * it was seen so (engine_now_ms), and when its removal may be proposed again (0 = none). Zeroed
 * when the group is not led here, and when close_removed (task.c) closes the replica. */
struct exec_leftover {
    uint64_t learner;
    int64_t since_ms, next_ms;
};

struct exec_backup_run;

struct executor {
    /* -- fixed in executor_new (main thread, before the loop starts) -- */
    struct runtime *rt; /* borrowed: outlives the executor's hooks */
    const struct runtime_options *opts;
    struct engine_executor_series series;
    struct runtime_executor_ops ops; /* registered with rt */

    /* -- loop thread -- */
    int64_t repair_next_ms;         /* repair.c's next plan (engine_now_ms) */
    uint32_t repair_lost;           /* repair.c: groups without a quorum in the last plan */
    int64_t balance_next_ms;        /* balance.c's next plan (engine_now_ms) */
    int64_t balance_leader_next_ms; /* balance.c's next preferred-leader change */
    uint32_t balance_n_sent;        /* balance.c's proposed moves not yet seen ending */
    struct exec_balance_sent balance_sent[EXEC_BALANCE_SENT_MAX];
    int64_t backup_next_ms;             /* backup_plan.c's next step (engine_now_ms) */
    uint64_t backup_run_taken;          /* backup_plan.c: the last run this node started */
    uint64_t backup_warned_run;         /* the run the "no active data node is up" line named */
    struct exec_backup_run *backup_run; /* the run writing here (own thread), NULL = none */
    struct exec_task_pace task_pace[EXEC_TASK_PACE_MAX];
    struct exec_leftover leftover[ENGINE_GROUPS_CAP]; /* index = group id */
    /* the reply fields under their mu (transport and apply threads); mu set up by executor_new */
    struct exec_migration migrations[EXEC_MIGRATIONS_MAX];
};

/* task.c: the task executor, every poll (and the migration step and task_cleanup from it) */
void executor__task_step(struct executor *ex);
/* task.c, for the kinds executed elsewhere: report a proven phase, fail the task, whether the
 * phase ran out of time, and when this node first saw the phase. */
struct ctl_task;
struct ctl_task_proof;
void executor__task_advance(struct executor *ex, const struct ctl_task *t,
                            const struct ctl_task_proof *p);
void executor__task_fail(struct executor *ex, const struct ctl_task *t, const char *why);
bool executor__task_stuck(struct executor *ex, const struct ctl_task *t);
int64_t executor__task_since_ms(struct executor *ex, const struct ctl_task *t);
/* task_cleanup.c: the leader of each slot group removes a learner no task owns */
void executor__task_cleanup(struct executor *ex);
/* task_cleanup.c: true when task t (of the replica's group) still needs the replica that the
 * cluster state does not place on this node (a running task, or a failed one that a retry
 * continues with the same learner). */
bool executor__task_holds_replica(const struct ctl_task *t);
/* migrate.c: one step of a hash_slot_migration task (running, or failed before the switch) */
void executor__migration_step(struct executor *ex, const struct ctl_task *t);
/* migrate.c: the migrations' locks (executor_new, executor_free) */
void executor__migrations_init(struct executor *ex);
void executor__migrations_destroy(struct executor *ex);
/* repair.c: on the controller leader, replica moves for nodes down too long */
void executor__repair_step(struct executor *ex);
/* balance.c: on the controller leader, replica moves toward weighted shares */
void executor__balance_step(struct executor *ex);

/* backup_plan.c: starts due backup runs on the controller leader, executes and reports this
 * node's run; executor__backup_stop (main thread, once the loop ended) stops and joins it. */
void executor__backup_step(struct executor *ex);
void executor__backup_stop(struct executor *ex);

#endif /* SLOTD_EXECUTOR_EXECUTOR_INTERNAL_H */
