# test_partitions.py - partitions, a lossy network, and the unsafe-read build caught by the checker.
import os
import random
import sys
import tempfile
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultnet  # noqa: E402
import lincheck  # noqa: E402
import schedule  # noqa: E402
import workload as wl  # noqa: E402
from workload import h, pb  # noqa: E402
from lincheck import Op  # noqa: E402

SEED = int(os.environ.get("SLOTD_FAULT_SEED", "0")) or random.randrange(1, 1 << 31)
ROUNDS = int(os.environ.get("SLOTD_FAULT_NET_ROUNDS", "1"))
HERE = os.path.dirname(os.path.abspath(__file__))

UNSAFE_ATTEMPTS = 3          # the unsafe build must show a violation within this many attempts
SAFE_ATTEMPTS = 2            # the same scenario on the correct build: never a violation
NEW_LEADER_BOUND_S = 15.0    # the majority side acknowledges the new value within this
READ_TIMEOUT_S = 1.0
READS_WHILE_PAUSED = 20
READ_WINDOW_S = 0.6          # reads sent to the isolated old leader after SIGCONT


class NetScheduleTest(faultnet.FaultTestCase):
    """A seeded schedule of partitions (one node alone both ways = the 1/2 majority/minority
    split, the busiest leader alone, one-way) and a lossy, slow peer network, while 6 clients
    run; zero violations, replicas identical, every group writable after healing."""

    def test_partition_schedule_is_linearizable(self):
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d rounds=%d (network faults)\n" % (SEED, ROUNDS))
        c = self.new_fault_cluster(size=3)
        result = schedule.run(c, SEED, rounds=ROUNDS, kinds=schedule.NET_KINDS)
        rep = result.report
        sys.stderr.write("  faults %s; %s; errors %s; partition of busiest leader: ms to first "
                         "write %s; run %.1f s\n"
                         % (result.stats.faults, rep.summary(), result.errors,
                            ["%.0f" % ms for ms in result.stats.leader_partition_ms],
                            result.seconds))
        problems = result.problems()
        if problems:
            path = os.path.join(tempfile.gettempdir(), "slotd-lincheck-history-net-%d.json" % SEED)
            lincheck.save_history(result.history, path)
            lincheck.write_violation(rep, os.path.join(
                tempfile.gettempdir(), "slotd-lincheck-violation-net-%d.json" % SEED))
            for t, text in result.stats.log:
                sys.stderr.write("  %7.2f s  %s\n" % (t, text))
            sys.stderr.write("  history saved to %s; replay: cd %s && SLOTD_FAULT_SEED=%d %s -m "
                             "unittest -v test_partitions.NetScheduleTest\n"
                             % (path, HERE, SEED, sys.executable))
        self.assertEqual(problems, [])
        self.assertEqual(result.busy_at_heal, 6, "clients ran out of ops before the faults ended")
        self.assertGreater(rep.ops - rep.maybe_ops, 50, "too few completed ops to mean anything")
        self.assertEqual(sum(result.stats.faults.values()), len(schedule.NET_KINDS) * ROUNDS)


class SplitTest(faultnet.FaultTestCase):
    """A 5-node cluster (3 voters per group, so each split cuts groups differently) split 2/3 both
    ways, twice with seeded sides, while 6 clients run: zero violations, replicas identical,
    every group writable after healing."""

    SPLITS = 2
    HOLD_S = 2.0

    def test_two_three_splits(self):
        c = self.new_fault_cluster(size=5)
        rng = random.Random("split/%d" % SEED)
        keys = [b"split/%d/k%d" % (SEED, i) for i in range(8)]
        result = schedule.RunResult(kinds=("split_2_3",))
        t0 = time.monotonic()
        work = wl.Workload(c, keys, SEED, ops_max=20000).start()
        try:
            for _ in range(self.SPLITS):
                time.sleep(rng.uniform(0.5, 1.0))
                minority = sorted(rng.sample(c.node_ids, 2))
                c.split(minority)
                result.stats.note(t0, "split %s | %s" % (
                    minority, [n for n in c.node_ids if n not in minority]))
                time.sleep(self.HOLD_S)
                c.heal_net()
                result.stats.note(t0, "healed")
                result.stats.faults["split_2_3"] += 1
            schedule.settle_and_check(c, work, keys, result, SEED, rng, t0)
        except BaseException:
            work.stop()
            raise
        rep = result.report
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d 5 nodes: %s; errors %s\n"
                         % (SEED, rep.summary(), result.errors))
        for t, text in result.stats.log:
            sys.stderr.write("  %7.2f s  %s\n" % (t, text))
        self.assertEqual(result.problems(), [])
        self.assertGreater(rep.ops - rep.maybe_ops, 50, "too few completed ops to mean anything")



class UnsafeReadTest(faultnet.FaultTestCase):
    """Proof that the suite catches a wrong server: the fault build with
    SLOTD_FAULT_UNSAFE_READS=1 serves LINEARIZABLE reads like LEADER_LOCAL (no ReadIndex round).
    Scenario: put old through the leader L of group 1; cut L off from its peers (both ways) and
    SIGSTOP it; put new through the majority side until acknowledged; queue LINEARIZABLE reads at
    L, SIGCONT it and keep reading from L for READ_WINDOW_S. L still believes it leads (its
    check-quorum timer counts ticks it did not run while stopped), so the unsafe build answers
    old after new was acknowledged and the checker must say violation. The correct build runs
    the same scenario and must never answer stale (its ReadIndex round cannot reach a quorum)."""

    def _attempt(self, c, rng, attempt, tag):
        route = c.wait_leaders()
        group_id = 1
        leader = c.leaders(route)[group_id]
        others = [n for n in c.node_ids if n != leader]
        key = h.key_in_group(c.table, group_id, "%s%d" % (tag, attempt), rng)
        history = []
        t0, resp = wl.put_until_acked(c.stub(leader), key, b"old", b"%s-old-%d" % (tag.encode(),
                                                                                 attempt), 10.0)
        self.assertIsNotNone(resp, "put old through leader %d failed" % leader)
        history.append(Op("put", key, {"value": b"old"}, {"version": resp.put.version}, t0,
                          time.monotonic()))
        c.isolate(leader)
        c.pause(leader)
        try:
            t0, resp = wl.put_until_acked(c.stub(others[0]), key, b"new",
                                        b"%s-new-%d" % (tag.encode(), attempt), NEW_LEADER_BOUND_S)
            self.assertIsNotNone(resp, "the majority side %s did not take a write within %.0f s"
                                 % (others, NEW_LEADER_BOUND_S))
            history.append(Op("put", key, {"value": b"new"}, {"version": resp.put.version}, t0,
                              time.monotonic()))
            t_queue = time.monotonic()
            req = pb.ReadRequest(consistency=pb.CONSISTENCY_LINEARIZABLE, get=pb.GetQuery(key=key))
            reads = [(t_queue, c.stub(leader).Read.future(req, timeout=READ_TIMEOUT_S + 1))
                     for _ in range(READS_WHILE_PAUSED)]
        finally:
            c.resume(leader)
        end = time.monotonic() + READ_WINDOW_S
        while time.monotonic() < end:
            reads.append((time.monotonic(), c.stub(leader).Read.future(req,
                                                                        timeout=READ_TIMEOUT_S)))
            time.sleep(0.01)
        stale = answered = 0
        for t_read, f in reads:
            try:
                g = f.result().get
            except grpc.RpcError:
                continue
            answered += 1
            history.append(Op("get", key, {}, {"found": g.found,
                                               "value": g.value if g.found else None,
                                               "version": g.version}, t_read, time.monotonic()))
            stale += g.value != b"new"
        c.heal_net()
        sys.stderr.write("\n  %s attempt %d: leader %d isolated and paused; %d reads answered, "
                         "%d stale\n" % (tag, attempt, leader, answered, stale))
        return history, stale

    def test_unsafe_reads_are_caught(self):
        c = self.new_fault_cluster(size=3, slot_groups=2, env={"SLOTD_FAULT_UNSAFE_READS": "1"})
        self.assertTrue(c.server(1).log_lines("UNSAFE"), "the nodes did not take the unsafe flag")
        rng = random.Random("unsafe/%d" % SEED)
        for attempt in range(UNSAFE_ATTEMPTS):
            history, stale = self._attempt(c, rng, attempt, "unsafe")
            rep = lincheck.check(history)
            sys.stderr.write("  checker: %s\n" % rep.summary())
            if rep.violations:
                self.assertGreater(stale, 0)
                for ops in rep.violations.values():
                    self.assertLessEqual(len(ops), 4)
                lincheck.write_violation(rep, os.path.join(
                    tempfile.gettempdir(), "slotd-lincheck-unsafe-reads-%d.json" % SEED))
                return
            self.assertEqual(stale, 0, "stale reads the checker did not flag: %s" % rep.summary())
        self.fail("the unsafe build (LINEARIZABLE served as LEADER_LOCAL) showed no violation in "
                  "%d attempts: the suite failed to catch it (SLOTD_FAULT_SEED=%d)"
                  % (UNSAFE_ATTEMPTS, SEED))

    def test_same_scenario_on_the_correct_build_is_linearizable(self):
        c = self.new_fault_cluster(size=3, slot_groups=2)
        rng = random.Random("safe/%d" % SEED)
        for attempt in range(SAFE_ATTEMPTS):
            history, stale = self._attempt(c, rng, attempt, "safe")
            rep = lincheck.check(history)
            sys.stderr.write("  checker: %s\n" % rep.summary())
            self.assertEqual(stale, 0)
            self.assertTrue(rep.ok, rep.summary())


if __name__ == "__main__":
    unittest.main()
