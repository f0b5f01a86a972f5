/* harness.h - a tiny hand-driven raft cluster for scenario tests: nodes, mem storage, a queue. */
#ifndef SLOTD_TEST_RAFT_HARNESS_H
#define SLOTD_TEST_RAFT_HARNESS_H

#include "raft/raft.h"

/* Ownership: h_cluster_new() returns a cluster the caller frees with h_cluster_free(); every
 * other pointer argument is borrowed for the call. */

#include <stdbool.h>
#include <stddef.h>

#define H_NODES_MAX 8
#define H_LOG_MAX 512

struct h_applied {
    raft_index index;
    raft_term term;
    uint8_t type;
    char data[32]; /* NUL-terminated prefix of the entry data */
};

struct h_node {
    raft_id id;
    bool exists; /* the node was started (h_cluster_new or h_add_node) */
    bool down;   /* crashed or cut off: no ticks, no readies, messages dropped */
    struct raft *r;
    struct raft_mem_storage *ms;
    raft_index applied;
    size_t n_applied; /* entries applied, including ones beyond the h_applied log */
    struct h_applied log[H_LOG_MAX];
    raft_index snapshot_index; /* last snapshot installed from a ready (0 none) */
    char snapshot_data[32];
    size_t n_reads;
    struct raft_read_state reads[64];
    size_t n_fails;
    struct raft_read_failure fails[64];
    size_t n_conf_errors; /* raft_apply_conf_change() errors */
};

/* Returns true to drop the message; may also trim m->entries (freeing what it trims). */
typedef bool (*h_filter_cb)(void *arg, struct raft_msg *m);

struct h_cluster {
    struct raft_config cfg;                     /* template: id and storage are set per node */
    struct h_node nodes[H_NODES_MAX + 1];       /* indexed by id, 1..H_NODES_MAX */
    bool cut[H_NODES_MAX + 1][H_NODES_MAX + 1]; /* cut[a][b]: messages a -> b dropped */
    struct raft_msg *queue;
    size_t n_queue;
    size_t cap_queue;
    h_filter_cb filter;
    void *filter_arg;
    size_t n_delivered;
    size_t n_dropped;
};

/* A cluster of voters 1..n_voters and learners n_voters+1..n_voters+n_learners, all started.
 * cfg may be NULL (defaults, seed 1). Caller frees with h_cluster_free(). */
struct h_cluster *h_cluster_new(int n_voters, int n_learners, const struct raft_config *cfg);
void h_cluster_free(struct h_cluster *c);
/* Starts node `id` with empty storage and membership cs (what the operator tells a joining
 * node; cs may be NULL for none). It becomes a member through a conf change. */
void h_add_node(struct h_cluster *c, raft_id id, const struct raft_conf_state *cs);
/* Rebuilds node `id`'s core from its storage (a restart that keeps what was persisted). */
void h_restart(struct h_cluster *c, raft_id id);

/* Replaces node `id`'s storage with an empty one holding membership cs (may be NULL) and
 * starts it again: its replica was deleted and opened empty, as after a lost disk. */
void h_wipe(struct h_cluster *c, raft_id id, const struct raft_conf_state *cs);

struct raft *h_raft(struct h_cluster *c, raft_id id);
void h_status(struct h_cluster *c, raft_id id, struct raft_status *st);
raft_term h_term(struct h_cluster *c, raft_id id);
int h_role(struct h_cluster *c, raft_id id);
raft_index h_commit(struct h_cluster *c, raft_id id);
raft_index h_last(struct h_cluster *c, raft_id id);
raft_id h_leader_of(struct h_cluster *c, raft_id id);
/* Term of entry i in node id's storage, or 0. */
raft_term h_stored_term(struct h_cluster *c, raft_id id, raft_index i);

/* Checks r's invariants; on a failure prints the invariant, node, term, index and detail and
 * fails the current test. Returns true when they hold. */
bool h_invariants_ok(const struct raft *r);
/* Runs fn(arg) in a child process and returns true if it aborted (SIGABRT) and its stderr
 * contains `needle`: a host-contract misuse must stop the process with a RAFT_ASSERT. */
bool h_aborts_with(void (*fn)(void *), void *arg, const char *needle);

/* Handles every pending ready once (persist, queue messages, apply, advance). */
bool h_process(struct h_cluster *c);
/* Delivers every queued message once (cuts, down nodes and the filter drop some). */
void h_deliver(struct h_cluster *c);
/* process + deliver until nothing moves (bounded). */
void h_pump(struct h_cluster *c);
void h_tick(struct h_cluster *c, raft_id id, int n);
/* n rounds of: tick every up node once, then pump. */
void h_tick_all(struct h_cluster *c, int n);
/* Makes `id` campaign and pumps; returns the resulting role of `id`. */
int h_campaign(struct h_cluster *c, raft_id id);

void h_isolate(struct h_cluster *c, raft_id id, bool cut);
void h_cut(struct h_cluster *c, raft_id a, raft_id b, bool cut); /* both directions */
void h_heal(struct h_cluster *c);

int h_propose(struct h_cluster *c, raft_id id, const char *data);
/* Number of queued messages of a type (from 0 = any sender). */
size_t h_queued(struct h_cluster *c, int type, raft_id from);
void h_queue_clear(struct h_cluster *c);

#endif /* SLOTD_TEST_RAFT_HARNESS_H */
