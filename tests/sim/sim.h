/* sim.h - public API of the deterministic Raft cluster simulator (one seed = one run). */
#ifndef SLOTD_SIM_H
#define SLOTD_SIM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/errlist.h"

#define SIM_ERRORS(X)                                                                              \
    X(SIM_OK, 0, "ok")                                                                             \
    X(SIM_ENOMEM, 1, "out of memory")                                                              \
    X(SIM_EINVAL, 2, "invalid simulator options")                                                  \
    X(SIM_EVIOLATION, 3, "a checker found a violation")

enum sim_err { SIM_ERRORS(SLOTD_ERRLIST_ENUM) SIM_ERR_COUNT_ };

/* Returns a static string; never NULL. */
const char *sim_strerror(int err);

#define SIM_NODES_MAX 7
#define SIM_GROUPS_MAX 8

struct sim_options {
    uint64_t seed;
    unsigned n_nodes;  /* 3..SIM_NODES_MAX */
    unsigned n_groups; /* 1..SIM_GROUPS_MAX */
    uint64_t steps;    /* one step = one virtual millisecond of faults and workload */
    bool verbose;      /* print a trace of notable events to stdout */
    bool trace_msgs;   /* with verbose: also every message delivered */
};

/* What a run did, so a reader can see the workload is real. Summed over seeds by the caller. */
struct sim_counters {
    uint64_t steps;     /* including the final heal phase */
    uint64_t elections; /* a node observed becoming leader */
    uint64_t commits;   /* entries applied for the first time (per group index) */
    uint64_t proposals; /* entries accepted by raft_propose_batch */
    uint64_t reads;     /* ReadIndex reads served and checked */
    uint64_t lease_reads; /* lease reads served and checked (raft_read_lease) */
    uint64_t lease_refused; /* lease reads the leader refused (RAFT_ENOLEASE) */
    uint64_t read_failures;
    uint64_t crashes;
    uint64_t snapshots;    /* snapshots installed from a leader */
    uint64_t compactions;  /* raft_mem_storage_create_snapshot calls */
    uint64_t conf_changes; /* conf changes applied (first time per group index) */
    uint64_t transfers;    /* leadership transfers started */
    uint64_t partitions;
    uint64_t msgs;         /* messages delivered */
    uint64_t dropped;      /* messages dropped by faults, partitions or down nodes */
    uint64_t quiet_phases; /* liveness checks passed */
};

/*
 * Runs one seed: opt->steps virtual milliseconds of randomized workload and faults with every
 * checker after every step, then a final heal and a liveness check. Returns SIM_OK,
 * SIM_EVIOLATION (the first violation is written into violation, NUL-terminated, truncated to
 * violation_len), SIM_EINVAL or SIM_ENOMEM. opt, cnt and violation are borrowed for the call;
 * the counters of this run are added to *cnt.
 */
int sim_run(const struct sim_options *opt, struct sim_counters *cnt, char *violation,
            size_t violation_len);

#endif /* SLOTD_SIM_H */
