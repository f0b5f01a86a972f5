#!/usr/bin/python3
"""Runs the e2e modules (tests/e2e/test_*.py) in N worker processes, longest first.

The suites mostly wait on timers (elections, leases, watch deadlines), so two of them share two
cores well. Each module runs in its own `python3 -m unittest -v MODULE` process; its output is
buffered and printed whole when it ends, so the log reads module by module. Modules that share a
folder of the tree (clients/node's node_modules, clients/python's build backend) are one serial
chain: they never run at the same time. Exit status is 0 only when every module passed.

Usage: run_parallel.py [-j N] [MODULE ...]     (default: every test_*.py here, N = $E2E_JOBS or 2)
The last lines give each module's wall time, longest first (the input for COST_S below).
"""
import argparse
import os
import subprocess
import sys
import tempfile
import threading
import time
import unittest
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))  # test_ids() imports the split modules

# Wall time of each module in seconds, as this runner's summary gave it (2 workers, 2 cores, a
# busy machine); used only to start the long ones first. Unknown modules count as long.
COST_S = {
    "test_tasks": 250, "test_slotctl_tasks": 105, "test_controller": 90, "test_cluster": 106,
    "test_security": 55, "test_slotctl": 50, "test_clients": 50, "test_migration": 50,
    "test_watch": 35, "test_range_txn": 30, "test_tls": 30, "test_c_client": 25,
    "test_controller_recovery": 25, "test_docs_scenario": 20, "test_routes_live": 20,
    "test_meta": 20, "test_propose_stream": 8, "test_c_propose_stream": 12, "test_slotctl_cluster": 15, "test_metrics": 15, "test_metadata_model": 15,
    "test_crash": 10, "test_single_node": 5, "test_reflection": 5, "test_echo": 1,
    "test_backup": 60, "test_elastic": 135, "test_mcp": 25, "test_balance": 105,
}
UNKNOWN_COST_S = 120

# Modules that write into the same folder of the tree run one after another, in this order:
# test_clients runs `npm ci` in clients/node (when node_modules is missing), test_docs_scenario
# runs `npm pack` there and pip-builds clients/python, test_tls and test_security import
# clients/python and run node from clients/node.
CHAINS = [["test_clients", "test_docs_scenario", "test_tls", "test_security"]]


# Modules whose every test starts its own cluster: each test is a work item of its own (a module
# of eight 30 s tests would otherwise be the run's critical path).
SPLIT = {"test_tasks", "test_slotctl_tasks", "test_controller"}


def test_ids(module):
    """The unittest ids (module.Class.test) of a module's tests, in unittest's order."""
    def walk(suite):
        for t in suite:
            if isinstance(t, unittest.TestSuite):
                yield from walk(t)
            else:
                yield t.id()
    return list(walk(unittest.defaultTestLoader.loadTestsFromName(module)))


def plan(modules):
    """Work items (lists of unittest names run in order) with their cost, longest first."""
    items, chained = [], set()
    for chain in CHAINS:
        members = [m for m in chain if m in modules]
        if members:
            items.append((sum(COST_S.get(m, UNKNOWN_COST_S) for m in members), members))
            chained.update(members)
    for m in modules:
        if m in chained:
            continue
        cost = COST_S.get(m, UNKNOWN_COST_S)
        ids = test_ids(m) if m in SPLIT else [m]
        items += [(cost / len(ids), [t]) for t in ids]
    return [names for _, names in sorted(items, key=lambda item: item[0], reverse=True)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-j", type=int, default=int(os.environ.get("E2E_JOBS", "2")))
    ap.add_argument("modules", nargs="*")
    args = ap.parse_args()
    modules = args.modules or sorted(p.stem for p in HERE.glob("test_*.py"))
    queue = plan(modules)
    lock = threading.Lock()
    results = {}  # module -> (rc, seconds)

    def run_item(name):
        with tempfile.TemporaryFile(mode="w+") as out:
            t0 = time.monotonic()
            rc = subprocess.call([sys.executable, "-m", "unittest", "-v", name], cwd=str(HERE),
                                 stdout=out, stderr=subprocess.STDOUT)
            secs = time.monotonic() - t0
            out.seek(0)
            text = out.read()
        with lock:
            results[name] = (rc, secs)
            sys.stdout.write("--- module %s\n%s--- module %s: %s (%.0f s)\n"
                             % (name, text, name, "ok" if rc == 0 else "FAILED", secs))
            sys.stdout.flush()

    def worker():
        while True:
            with lock:
                if not queue:
                    return
                item = queue.pop(0)
            for name in item:
                run_item(name)

    t0 = time.monotonic()
    threads = [threading.Thread(target=worker) for _ in range(max(1, args.j))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    failed = sorted(m for m, (rc, _) in results.items() if rc != 0)
    print("module wall times (s), longest first:")
    for m, (rc, secs) in sorted(results.items(), key=lambda kv: -kv[1][1]):
        print("  %-28s %5.0f %s" % (m, secs, "" if rc == 0 else "FAILED"))
    print("e2e: %d modules in %.0f s with %d workers; %d failed%s"
          % (len(results), time.monotonic() - t0, args.j, len(failed),
             (": " + " ".join(failed)) if failed else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
