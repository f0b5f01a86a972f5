/* bench.c - throughput of the raft core: a 3-node in-memory cluster on one thread, batched
 * proposals of fixed-size entries. Usage: raft_bench [entries [entry_bytes [batch]]] */
#include "raft/raft.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define NODES 3

struct bnode {
    struct raft *r;
    struct raft_mem_storage *ms;
    raft_index applied;
    raft_index compacted;
};

static struct bnode nodes[NODES + 1];

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static void check(int rv, const char *what)
{
    if (rv != 0) {
        fprintf(stderr, "raft_bench: %s: %s\n", what, raft_strerror(rv));
        exit(1);
    }
}

/* One host round for node i; messages are stepped into their targets before advance. */
static size_t round_node(int i)
{
    struct bnode *nd = &nodes[i];
    if (!raft_has_ready(nd->r)) {
        return 0;
    }
    struct raft_ready rd;
    check(raft_ready(nd->r, &rd), "ready");
    if (rd.has_hard_state) {
        raft_mem_storage_set_hard_state(nd->ms, &rd.hard_state);
    }
    if (rd.n_entries > 0) {
        check(raft_mem_storage_append(nd->ms, rd.entries, rd.n_entries), "append");
    }
    for (size_t k = 0; k < rd.n_msgs; k++) {
        check(raft_step(nodes[rd.msgs[k].to].r, &rd.msgs[k]), "step");
    }
    if (rd.n_committed > 0) {
        nd->applied = rd.committed[rd.n_committed - 1].index;
    }
    raft_advance(nd->r, &rd);
    /* keep the stored log bounded: followers here are never far behind */
    if (nd->applied > nd->compacted + 200000) {
        check(raft_mem_storage_compact(nd->ms, nd->applied - 100000), "compact");
        nd->compacted = nd->applied - 100000;
    }
    return rd.n_committed + rd.n_msgs + rd.n_entries + 1;
}

int main(int argc, char **argv)
{
    long total = argc > 1 ? atol(argv[1]) : 2000000;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 128;
    size_t batch = argc > 3 ? (size_t)atol(argv[3]) : 256;
    struct raft_conf_state cs;
    memset(&cs, 0, sizeof(cs));
    for (int i = 1; i <= NODES; i++) {
        cs.voters[cs.n_voters++] = (raft_id)i;
    }
    for (int i = 1; i <= NODES; i++) {
        check(raft_mem_storage_new(&nodes[i].ms), "storage");
        raft_mem_storage_set_conf_state(nodes[i].ms, &cs);
        struct raft_config cfg;
        raft_config_default(&cfg);
        cfg.id = (raft_id)i;
        cfg.storage = raft_mem_storage_get(nodes[i].ms);
        cfg.seed = 7;
        check(raft_new(&cfg, &nodes[i].r), "new");
    }
    check(raft_campaign(nodes[1].r), "campaign");
    for (int k = 0; k < 20; k++) {
        for (int i = 1; i <= NODES; i++) {
            round_node(i);
        }
    }
    char *payload = malloc(size ? size : 1);
    struct raft_buf *bufs = malloc(batch * sizeof(*bufs));
    if (payload == NULL || bufs == NULL) {
        return 1;
    }
    memset(payload, 'x', size);
    for (size_t k = 0; k < batch; k++) {
        bufs[k].base = payload;
        bufs[k].len = size;
    }
    raft_index start = nodes[1].applied;
    raft_index target = start + (raft_index)total;
    long proposed = 0;
    double t0 = now_s();
    while (nodes[1].applied < target || nodes[2].applied < target || nodes[3].applied < target) {
        if (proposed < total) {
            int rv = raft_propose_batch(nodes[1].r, bufs, batch, NULL);
            if (rv == 0) {
                proposed += (long)batch;
            } else if (rv != RAFT_EBUDGET) {
                check(rv, "propose");
            }
        }
        size_t work = 0;
        for (int i = 1; i <= NODES; i++) {
            work += round_node(i);
        }
        if (work == 0 && proposed >= total) {
            break;
        }
    }
    double dt = now_s() - t0;
    raft_index done = nodes[3].applied - start;
    printf("raft_bench: %d nodes, %zu-byte entries, batch %zu: %llu entries committed and "
           "applied on every node in %.3f s = %.0f entries/s (%.1f MB/s)\n",
           NODES, size, batch, (unsigned long long)done, dt, (double)done / dt,
           (double)done * (double)size / dt / 1e6);
    for (int i = 1; i <= NODES; i++) {
        raft_free(nodes[i].r);
        raft_mem_storage_free(nodes[i].ms);
    }
    free(payload);
    free(bufs);
    return done >= (raft_index)total ? 0 : 1;
}
