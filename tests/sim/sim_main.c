/* sim_main.c - raft-sim: runs seeded simulations, prints the first violation and its replay line.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "sim.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: raft-sim [--seeds N] [--seed-base B] [--seed S] [--steps M] [--nodes K]\n"
            "                [--groups G] [--verbose] [--trace-msgs] [--keep-going]\n"
            "  --seeds N      run seeds B..B+N-1 (default 20, B = --seed-base, default 1)\n"
            "  --seed S       replay one seed\n"
            "  --steps M      virtual milliseconds of faults and workload per seed (default 2000)\n"
            "  --nodes K      nodes 3..%d (default: 3 for odd seeds, 5 for even seeds)\n"
            "  --groups G     raft groups over the same nodes, 1..%d (default 3)\n"
            "  --verbose      print a trace of notable events (elections, faults, snapshots)\n"
            "  --trace-msgs   with --verbose, also every delivered message\n"
            "  --keep-going   run every seed and report each failure (exit 1 if any)\n",
            SIM_NODES_MAX, SIM_GROUPS_MAX);
}

static int parse_u64(const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end != '\0')
        return -1;
    *out = v;
    return 0;
}

struct cli {
    uint64_t seeds, seed_base, steps, nodes, groups;
    bool one_seed, verbose, trace_msgs, keep_going;
};

static int parse_args(int argc, char **argv, struct cli *cli)
{
    *cli = (struct cli){.seeds = 20, .seed_base = 1, .steps = 2000, .groups = 3};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        uint64_t *dst = NULL;
        if (strcmp(a, "--verbose") == 0 || strcmp(a, "-v") == 0) {
            cli->verbose = true;
            continue;
        }
        if (strcmp(a, "--trace-msgs") == 0) {
            cli->trace_msgs = true;
            continue;
        }
        if (strcmp(a, "--keep-going") == 0) {
            cli->keep_going = true;
            continue;
        }
        if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
            usage(stdout);
            exit(0);
        }
        if (strcmp(a, "--seeds") == 0)
            dst = &cli->seeds;
        else if (strcmp(a, "--seed-base") == 0)
            dst = &cli->seed_base;
        else if (strcmp(a, "--seed") == 0) {
            dst = &cli->seed_base;
            cli->one_seed = true;
        } else if (strcmp(a, "--steps") == 0)
            dst = &cli->steps;
        else if (strcmp(a, "--nodes") == 0)
            dst = &cli->nodes;
        else if (strcmp(a, "--groups") == 0)
            dst = &cli->groups;
        if (dst == NULL || i + 1 >= argc || parse_u64(argv[i + 1], dst) != 0) {
            fprintf(stderr, "raft-sim: bad argument '%s'\n", a);
            return -1;
        }
        i++;
    }
    if (cli->one_seed)
        cli->seeds = 1;
    if ((cli->nodes != 0 && (cli->nodes < 3 || cli->nodes > SIM_NODES_MAX)) || cli->groups < 1 ||
        cli->groups > SIM_GROUPS_MAX || cli->seeds == 0) {
        fprintf(stderr, "raft-sim: option out of range\n");
        return -1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    struct cli cli;
    if (parse_args(argc, argv, &cli) != 0) {
        usage(stderr);
        return 2;
    }
    struct sim_counters cnt = {0};
    char violation[1024];
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    uint64_t failures = 0;
    for (uint64_t i = 0; i < cli.seeds; i++) {
        uint64_t seed = cli.seed_base + i;
        struct sim_options opt = {
            .seed = seed,
            .n_nodes = cli.nodes ? (unsigned)cli.nodes : (seed % 2 ? 3u : 5u),
            .n_groups = (unsigned)cli.groups,
            .steps = cli.steps,
            .verbose = cli.verbose,
            .trace_msgs = cli.verbose && cli.trace_msgs,
        };
        int rc = sim_run(&opt, &cnt, violation, sizeof(violation));
        if (rc == SIM_EVIOLATION) {
            printf("FAIL seed %" PRIu64 " (%u nodes, %u groups, %" PRIu64 " steps): %s\n", seed,
                   opt.n_nodes, opt.n_groups, opt.steps, violation);
            printf("replay: %s --seed %" PRIu64 " --steps %" PRIu64 " --nodes %u --groups %u "
                   "--verbose\n",
                   argv[0], seed, opt.steps, opt.n_nodes, opt.n_groups);
            if (!cli.keep_going)
                return 1;
            failures++;
            continue;
        }
        if (rc != SIM_OK) {
            fprintf(stderr, "raft-sim: seed %" PRIu64 ": %s\n", seed, sim_strerror(rc));
            return 2;
        }
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double secs = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
    char nodes[16];
    if (cli.nodes)
        snprintf(nodes, sizeof(nodes), "%u", (unsigned)cli.nodes);
    else
        snprintf(nodes, sizeof(nodes), "%s",
                 cli.seeds > 1 ? "3/5" : (cli.seed_base % 2 ? "3" : "5"));
    if (failures) {
        printf("sim: %" PRIu64 " seeds x %" PRIu64 " steps: %" PRIu64 " FAILED\n", cli.seeds,
               cli.steps, failures);
        return 1;
    }
    printf("sim: %" PRIu64 " seeds x %" PRIu64 " steps, %s nodes: ok "
           "(groups %u, elections %" PRIu64 ", commits %" PRIu64 ", reads %" PRIu64
           ", lease reads %" PRIu64 " (%" PRIu64 " refused), crashes %" PRIu64 ", snapshots %" PRIu64 ", compactions %" PRIu64
           ", conf changes %" PRIu64 ", transfers %" PRIu64 ", partitions %" PRIu64
           ", quiet phases %" PRIu64 ", msgs %" PRIu64 ", dropped %" PRIu64 "; %.1f s)\n",
           cli.seeds, cli.steps, nodes, (unsigned)cli.groups, cnt.elections, cnt.commits, cnt.reads,
           cnt.lease_reads, cnt.lease_refused, cnt.crashes, cnt.snapshots, cnt.compactions, cnt.conf_changes, cnt.transfers,
           cnt.partitions, cnt.quiet_phases, cnt.msgs, cnt.dropped, secs);
    return 0;
}
