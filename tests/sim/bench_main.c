/* bench_main.c - raft-bench: committed-and-applied entries/s of a 3-node in-memory cluster. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "raft/raft.h"

#define BENCH_NODES 3
#define BENCH_RUNS_MAX 15
#define BENCH_BATCH_MAX 4096
#define BENCH_ENTRY_BYTES_MAX 4096
#define BENCH_BATCHES_AHEAD 8       /* proposed-but-unapplied batches the client keeps */
#define BENCH_COMPACT_EVERY 65536   /* entries between compactions */
#define BENCH_COMPACT_TAIL 4096     /* entries kept behind the slowest node */
#define BENCH_ROUNDS_MAX 100000000u /* bound on host-loop rounds per run */

struct bench_node {
    struct raft_mem_storage *disk;
    struct raft *core;
    raft_index applied;
    uint64_t applied_payloads; /* applied entries carrying a benchmark payload */
};

struct bench {
    struct bench_node nodes[BENCH_NODES];
    struct raft_conf_state conf;
    size_t entry_bytes;
};

static void bench_free(struct bench *b)
{
    for (int i = 0; i < BENCH_NODES; i++) {
        if (b->nodes[i].core)
            raft_free(b->nodes[i].core);
        if (b->nodes[i].disk)
            raft_mem_storage_free(b->nodes[i].disk);
    }
    memset(b, 0, sizeof(*b));
}

static int bench_init(struct bench *b)
{
    memset(b, 0, sizeof(*b));
    for (int i = 0; i < BENCH_NODES; i++)
        b->conf.voters[b->conf.n_voters++] = (raft_id)i + 1;
    for (int i = 0; i < BENCH_NODES; i++) {
        struct bench_node *n = &b->nodes[i];
        if (raft_mem_storage_new(&n->disk) != RAFT_OK)
            goto err_after_nodes;
        raft_mem_storage_set_conf_state(n->disk, &b->conf);
        struct raft_config cfg;
        raft_config_default(&cfg);
        cfg.id = (raft_id)i + 1;
        cfg.storage = raft_mem_storage_get(n->disk);
        cfg.seed = 42 + (uint64_t)i;
        if (raft_new(&cfg, &n->core) != RAFT_OK)
            goto err_after_nodes;
    }
    return 0;
err_after_nodes:
    bench_free(b);
    return -1;
}

/* One host round on node i: persist, deliver (synchronously), apply, advance. */
static int bench_round(struct bench *b, int i)
{
    struct bench_node *n = &b->nodes[i];
    if (!raft_has_ready(n->core))
        return 0;
    struct raft_ready rd;
    int rc = raft_ready(n->core, &rd);
    if (rc != RAFT_OK)
        return rc;
    if (rd.has_snapshot)
        raft_mem_storage_apply_snapshot(n->disk, &rd.snapshot);
    if (rd.has_hard_state)
        raft_mem_storage_set_hard_state(n->disk, &rd.hard_state);
    if (rd.n_entries && (rc = raft_mem_storage_append(n->disk, rd.entries, rd.n_entries)) != 0)
        return rc;
    for (size_t m = 0; m < rd.n_msgs; m++) {
        raft_id to = rd.msgs[m].to;
        if (to >= 1 && to <= BENCH_NODES)
            raft_step(b->nodes[to - 1].core, &rd.msgs[m]);
    }
    for (size_t e = 0; e < rd.n_committed; e++) {
        if (rd.committed[e].type == RAFT_ENTRY_CONF_CHANGE)
            raft_apply_conf_change(n->core, &rd.committed[e], NULL);
        else if (rd.committed[e].data.len == b->entry_bytes)
            n->applied_payloads++;
        n->applied = rd.committed[e].index;
    }
    raft_advance(n->core, &rd);
    return 0;
}

static void bench_compact(struct bench *b)
{
    raft_index low = b->nodes[0].applied;
    for (int i = 1; i < BENCH_NODES; i++)
        if (b->nodes[i].applied < low)
            low = b->nodes[i].applied;
    if (low <= BENCH_COMPACT_TAIL)
        return;
    for (int i = 0; i < BENCH_NODES; i++) {
        raft_mem_storage_create_snapshot(b->nodes[i].disk, low - BENCH_COMPACT_TAIL, &b->conf, NULL,
                                         0);
        raft_compacted(b->nodes[i].core, low - BENCH_COMPACT_TAIL);
    }
}

static double bench_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Returns elapsed seconds to commit and apply `total` entries at the leader, or < 0. */
static double bench_run(uint64_t total, size_t batch, size_t entry_bytes)
{
    static uint8_t payload[BENCH_ENTRY_BYTES_MAX];
    struct raft_buf bufs[BENCH_BATCH_MAX];
    struct bench b;
    if (bench_init(&b) != 0)
        return -1;
    b.entry_bytes = entry_bytes;
    memset(payload, 0xab, entry_bytes);
    for (size_t i = 0; i < batch; i++)
        bufs[i] = (struct raft_buf){.base = payload, .len = entry_bytes};
    raft_campaign(b.nodes[0].core);
    struct bench_node *leader = &b.nodes[0];
    double t0 = 0, elapsed = -1;
    raft_index start = 0, proposed = 0, next_compact = BENCH_COMPACT_EVERY;
    for (unsigned rounds = 0; rounds < BENCH_ROUNDS_MAX; rounds++) {
        struct raft_status st;
        raft_status(leader->core, &st);
        if (st.role == RAFT_LEADER && start == 0 && st.commit >= 1 &&
            leader->applied >= st.commit) {
            start = leader->applied;
            proposed = start;
            t0 = bench_now();
        }
        if (start != 0) {
            if (leader->applied >= start + total) {
                elapsed = bench_now() - t0;
                /* sanity: the leader applied exactly the proposed payloads, followers kept up */
                if (leader->applied_payloads < total)
                    elapsed = -1;
                for (int i = 1; i < BENCH_NODES; i++)
                    if (b.nodes[i].applied + BENCH_BATCHES_AHEAD * batch < start + total)
                        elapsed = -1;
                break;
            }
            while (proposed < start + total &&
                   proposed - leader->applied < BENCH_BATCHES_AHEAD * batch) {
                raft_index first;
                if (raft_propose_batch(leader->core, bufs, batch, &first) != RAFT_OK)
                    break;
                proposed = first + batch - 1;
            }
            if (leader->applied >= next_compact) {
                bench_compact(&b);
                next_compact = leader->applied + BENCH_COMPACT_EVERY;
            }
        }
        for (int i = 0; i < BENCH_NODES; i++)
            if (bench_round(&b, i) != 0)
                goto out;
        if (start == 0)
            raft_tick(leader->core);
    }
out:
    bench_free(&b);
    return elapsed;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0' || v == 0)
        return -1;
    *out = v;
    return 0;
}

int main(int argc, char **argv)
{
    uint64_t total = 2000000, runs = 5, size = 128, batch = 0;
    for (int i = 1; i < argc; i++) {
        uint64_t *dst = NULL;
        if (strcmp(argv[i], "--entries") == 0)
            dst = &total;
        else if (strcmp(argv[i], "--runs") == 0)
            dst = &runs;
        else if (strcmp(argv[i], "--size") == 0)
            dst = &size;
        else if (strcmp(argv[i], "--batch") == 0)
            dst = &batch;
        if (dst == NULL || i + 1 >= argc || parse_u64(argv[++i], dst) != 0 ||
            runs > BENCH_RUNS_MAX || size > BENCH_ENTRY_BYTES_MAX || batch > BENCH_BATCH_MAX) {
            fprintf(stderr,
                    "usage: raft-bench [--entries N] [--batch B] [--runs R<=%d] "
                    "[--size S]\n",
                    BENCH_RUNS_MAX);
            return 2;
        }
    }
    const uint64_t batches[] = {64, 256};
    size_t n_batches = batch ? 1 : 2;
    printf("raft-bench: %d nodes in one thread, %" PRIu64 "-byte entries, %" PRIu64
           " entries per run, median of %" PRIu64 " runs\n",
           BENCH_NODES, size, total, runs);
    printf("| batch | entries/s | ns/entry |\n|---|---|---|\n");
    for (size_t k = 0; k < n_batches; k++) {
        uint64_t bsz = batch ? batch : batches[k];
        double t[BENCH_RUNS_MAX] = {0};
        for (uint64_t r = 0; r < runs; r++) {
            t[r] = bench_run(total, bsz, size);
            if (t[r] <= 0) {
                fprintf(stderr, "raft-bench: run failed (batch %" PRIu64 ")\n", bsz);
                return 1;
            }
        }
        qsort(t, runs, sizeof(t[0]), cmp_double);
        double med = t[runs / 2];
        printf("| %" PRIu64 " | %.0f | %.0f |\n", bsz, (double)total / med,
               med * 1e9 / (double)total);
        fflush(stdout);
    }
    return 0;
}
