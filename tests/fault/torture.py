#!/usr/bin/python3
# torture.py - longer seeded fault schedules against a fresh 3-node cluster per run, with a markdown report.
"""Usage: SLOTD_BIN=build/bin/slotd /usr/bin/python3 tests/fault/torture.py --seed 7 --rounds 5 \\
          --runs 2 --out report.md
       SLOTD_FAULT_BIN=build-fault/bin/slotd ... torture.py --net ...   (adds the network kinds:
          the clusters run the fault build, see faultnet.py)

Each run starts a fresh 3-node cluster, runs schedule.run() (every fault kind once per round,
seeded order and timings) and stops the cluster. Run i uses seed <seed>+i. The report lists
histories checked, ops, faults by kind, violations (with the minimal sub-history), checker
unknowns, replica divergence and write unavailability after killing the busiest leader (ms until
each of its groups acknowledged a write, p50/p99). Exit status 1 when any run found a problem.
"""

import argparse
import json
import os
import random
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultnet  # noqa: E402
import lincheck  # noqa: E402
import schedule  # noqa: E402
from workload import h  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description="seeded fault schedules against slotd")
    ap.add_argument("--seed", type=int, default=0, help="first seed (default random)")
    ap.add_argument("--rounds", type=int, default=3, help="fault rounds per run (4 faults each)")
    ap.add_argument("--runs", type=int, default=1, help="runs, each on a fresh cluster")
    ap.add_argument("--ops-per-client", type=int, default=0,
                    help="bound per client (default: enough for every round)")
    ap.add_argument("--out", default="torture-report.md")
    ap.add_argument("--net", action="store_true",
                    help="also partitions and a lossy network (needs SLOTD_FAULT_BIN)")
    args = ap.parse_args()
    kinds = schedule.KINDS
    if args.net:
        problem = faultnet.fault_bin_problem()
        if problem:
            ap.error(problem)
        kinds = schedule.KINDS + schedule.NET_KINDS
    seed = args.seed or random.randrange(1, 1 << 31)
    lines = ["# slotd fault torture report", "",
             "binary `%s`, first seed %d, %d run(s) x %d round(s)"
             % (faultnet.FAULT_BIN if args.net else h.SLOTD_BIN, seed, args.runs, args.rounds), ""]
    all_ms, totals, bad = [], {k: 0 for k in kinds}, 0
    part_ms = []
    ctl_ms = []
    ops = maybe = histories = 0
    for i in range(args.runs):
        run_seed = seed + i
        workdir = tempfile.mkdtemp(prefix="slotd-torture-")
        if args.net:
            cluster = faultnet.FaultCluster(workdir, size=3, name="t%d" % i)
        else:
            cluster = h.SlotdCluster(workdir, size=3, name="t%d" % i)
        t0 = time.monotonic()
        try:
            cluster.start()
            result = schedule.run(cluster, run_seed, rounds=args.rounds,
                                  ops_max=args.ops_per_client or None, kinds=kinds)
        finally:
            stop_problems = [p for p in (cluster.stop(n) for n in cluster.node_ids) if p]
        rep = result.report
        histories += len(rep.results)
        ops += rep.ops
        maybe += rep.maybe_ops
        all_ms += result.stats.leader_kill_ms
        part_ms += result.stats.leader_partition_ms
        ctl_ms += result.stats.controller_kill_ms
        for k, n in result.stats.faults.items():
            totals[k] += n
        problems = result.problems() + ["stop: %s" % p for p in stop_problems]
        lines += ["## run %d, seed %d (%.1f s)" % (i, run_seed, time.monotonic() - t0), "",
                  "- checker: %s" % rep.summary(),
                  "- faults: %s" % result.stats.faults,
                  "- client errors: %s" % result.errors,
                  "- leader-kill ms to first write: %s"
                  % ", ".join("%.0f" % ms for ms in result.stats.leader_kill_ms),
                  "- problems: %s" % (problems or "none"), ""]
        if problems:
            bad += 1
            hist = os.path.abspath("torture-history-%d.json" % run_seed)
            lincheck.save_history(result.history, hist)
            lines += ["history saved to `%s`; replay the schedule with `--seed %d --runs 1 "
                      "--rounds %d`" % (hist, run_seed, args.rounds), "", "fault log:", "```"]
            lines += ["%7.2f s  %s" % (t, text) for t, text in result.stats.log]
            lines += ["```", ""]
            for key, vops in rep.violations.items():
                lines += ["minimal failing sub-history of key `%s`:" % lincheck._show(key),
                          "```json"]
                lines += [json.dumps(op.to_dict(), sort_keys=True) for op in vops]
                lines += ["```", ""]
            sys.stderr.write("run %d seed %d: %s (workdir %s kept)\n"
                             % (i, run_seed, problems, workdir))
        else:
            shutil.rmtree(workdir, ignore_errors=True)
        sys.stderr.write("run %d seed %d: %s\n" % (i, run_seed, rep.summary()))
    summary = ["## summary", "",
               "- histories (keys) checked: %d" % histories,
               "- ops: %d (%d with unknown outcome)" % (ops, maybe),
               "- faults injected: %s" % totals,
               "- runs with problems: %d of %d" % (bad, args.runs)]
    if all_ms:
        summary.append("- write unavailability after kill -9 of the busiest leader: p50 %.0f ms, "
                       "p99 %.0f ms over %d groups" % (h.percentile(all_ms, 0.5),
                                                       h.percentile(all_ms, 0.99), len(all_ms)))
    if part_ms:
        summary.append("- write unavailability after the busiest leader is cut off: p50 %.0f ms, "
                       "p99 %.0f ms over %d groups" % (h.percentile(part_ms, 0.5),
                                                       h.percentile(part_ms, 0.99), len(part_ms)))
    if ctl_ms:
        summary.append("- controller writes after kill -9 of the controller leader: p50 %.0f ms, "
                       "p99 %.0f ms over %d kills" % (h.percentile(ctl_ms, 0.5),
                                                     h.percentile(ctl_ms, 0.99), len(ctl_ms)))
    lines += summary + [""]
    with open(args.out, "w") as f:
        f.write("\n".join(lines))
    print("\n".join(summary))
    print("report: %s" % os.path.abspath(args.out))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
