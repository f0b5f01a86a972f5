/* executor_internal.h - the executor's state and the steps its files share (loop thread). */
#ifndef SLOTD_EXECUTOR_EXECUTOR_INTERNAL_H
#define SLOTD_EXECUTOR_EXECUTOR_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "service/executor/executor.h"
#include "service/log/log.h"
#include "service/runtime/engine.h"
#include "service/runtime/runtime.h"

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
};

/* repair.c: on the controller leader, replica moves for nodes down too long */
void executor__repair_step(struct executor *ex);
/* balance.c: on the controller leader, replica moves toward weighted shares */
void executor__balance_step(struct executor *ex);

/* backup_plan.c: starts due backup runs on the controller leader, executes and reports this
 * node's run; executor__backup_stop (main thread, once the loop ended) stops and joins it. */
void executor__backup_step(struct executor *ex);
void executor__backup_stop(struct executor *ex);

#endif /* SLOTD_EXECUTOR_EXECUTOR_INTERNAL_H */
