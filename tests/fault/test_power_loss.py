# test_power_loss.py - kill -9 plus loss of the FSM's unsynced writes, checked for linearizability.
"""kill -9 cannot lose data that reached the page cache: the kernel keeps it and writes it back.
Power loss can lose every write that was not fsynced. In slotd the raftlog batches that carry
entries and hard state are synced (group commit) and the FSM's batches are not (ARCHITECTURE.md
§5: a restart replays the durable log from the FSM's applied index). LevelDB appends every FSM
batch to the database's current write-ahead log (`fsm/NNNNNN.log`) and syncs that file only for
a synced write; it syncs table files and the MANIFEST when it makes them. So a power loss leaves
the FSM log cut at any byte after its last synced write, which this test simulates after each
kill -9: the newest `fsm/*.log` is truncated to a seeded random length (or to 0).

Synced FSM writes (the periodic sync that lets the raft log be compacted, snapshot installs) are
never cut: the fault build notes the log's size after each one (fault-fsm-synced in the data
directory) and the cut stays at or above it. The test requires at least one real cut. Not
simulated: the raftlog's unsynced writes (batches that only move a
commit index are written without sync) - the file offset of its last sync is unknown from
outside; a torn write inside a synced region (the disk is trusted to honour fsync).
"""
import os
import random
import re
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lincheck  # noqa: E402
import faultnet  # noqa: E402
import schedule  # noqa: E402
import workload as wl  # noqa: E402
from workload import h  # noqa: E402

SEED = int(os.environ.get("SLOTD_FAULT_SEED", "0")) or random.randrange(1, 1 << 31)
LOSSES = 4                  # power losses per run (random node, then the busiest leader, ...)
LOAD_BEFORE_S = (0.8, 1.5)  # load between losses, so each cut removes applied batches
DOWN_S = 0.3
OPS_MAX = 20000


def fsm_logs(data_dir):
    """The FSM's LevelDB write-ahead logs, oldest first."""
    d = os.path.join(str(data_dir), "fsm")
    logs = [f for f in os.listdir(d) if re.fullmatch(r"\d+\.log", f)]
    return [os.path.join(d, f) for f in sorted(logs, key=lambda f: int(f.split(".")[0]))]


def synced_floor(data_dir, path):
    """Bytes of the log at `path` that a synced FSM write covered: the fault build writes
    "<log name> <size>" to <data_dir>/fault-fsm-synced after every synced FSM write (log
    compaction's periodic sync, snapshot installs). 0 when the note names an older log."""
    try:
        with open(os.path.join(str(data_dir), "fault-fsm-synced")) as f:
            name, size = f.read().split()
    except (OSError, ValueError):
        return 0
    return int(size) if name == os.path.basename(path) else 0


def lose_unsynced_fsm_tail(data_dir, rng, to_zero=False):
    """Truncates the newest fsm/*.log to a random length at or above its synced floor (a third
    of the time, or always with to_zero, to the floor). Returns (path, size before, size
    after)."""
    logs = fsm_logs(data_dir)
    if not logs:
        return None, 0, 0
    path = logs[-1]
    size = os.path.getsize(path)
    floor = min(synced_floor(data_dir, path), size)
    keep = floor if to_zero or rng.random() < 1 / 3 else rng.randint(floor, size)
    os.truncate(path, keep)
    return path, size, keep




class PowerLossTest(faultnet.FaultTestCase):
    """LOSSES times: kill -9 a node (alternately random and the busiest leader) while 6 clients
    run, drop its FSM's unsynced tail, restart it. Then the schedule's checks: no acknowledged
    write lost (lincheck over the whole history), replicas identical, every group writable."""

    def test_losing_unsynced_fsm_writes_loses_nothing_acknowledged(self):
        self._run([])

    def test_same_with_log_compaction_every_10_entries(self):
        """The raft log is compacted only below the FSM's synced applied index (it was once
        compacted below the unsynced one, losing entries a restart needed)."""
        self._run(["--compact-entries", "10", "--compact-tail", "1"], to_zero=True)

    def _run(self, extra_args, to_zero=False):
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d %s\n" % (SEED, " ".join(extra_args)))
        # The fault build notes the FSM log's synced size (fault-fsm-synced); the cut respects it.
        c = self.new_fault_cluster(size=3, extra_args=extra_args)
        rng = random.Random("power/%d" % SEED)
        keys = [b"power/%d/k%d" % (SEED, i) for i in range(8)]
        result = schedule.RunResult(kinds=("power_loss",))
        t0 = time.monotonic()
        work = wl.Workload(c, keys, SEED, ops_max=OPS_MAX).start()
        cut_bytes = 0
        try:
            for i in range(LOSSES):
                time.sleep(rng.uniform(*LOAD_BEFORE_S))
                route = c.wait_leaders()
                victim = c.busiest_leader(route) if i % 2 else rng.choice(c.node_ids)
                work.set_targets([n for n in c.node_ids if n != victim])
                report = c.kill(victim)
                self.assertIsNone(report, "sanitizer report from node %d" % victim)
                # the synced floor (fault-fsm-synced) protects synced writes
                path, before, after = lose_unsynced_fsm_tail(c.server(victim).data_dir, rng,
                                                             to_zero)
                cut_bytes += before - after
                result.stats.note(t0, "kill -9 node %d, %s cut from %d to %d bytes"
                                  % (victim, path and os.path.basename(path), before, after))
                time.sleep(DOWN_S)
                c.restart(victim)
                work.set_targets(c.node_ids)
                result.stats.faults["power_loss"] += 1
            schedule.settle_and_check(c, work, keys, result, SEED, rng, t0)
        except BaseException:
            work.stop()
            raise
        rep = result.report
        sys.stderr.write("  %s; %d unsynced FSM log bytes dropped over %d losses; errors %s\n"
                         % (rep.summary(), cut_bytes, LOSSES, result.errors))
        for t, text in result.stats.log:
            sys.stderr.write("  %7.2f s  %s\n" % (t, text))
        problems = result.problems()
        if problems:
            path = os.path.join(tempfile.gettempdir(), "slotd-lincheck-history-power-%d.json"
                                % SEED)
            lincheck.save_history(result.history, path)
            lincheck.write_violation(rep, path.replace("history", "violation"))
        self.assertEqual(problems, [])
        self.assertGreater(cut_bytes, 0, "no FSM log bytes were dropped: nothing was tested")
        self.assertGreater(rep.ops - rep.maybe_ops, 50, "too few completed ops to mean anything")


if __name__ == "__main__":
    unittest.main()
