# test_faults.py - randomized kill -9 / SIGSTOP schedules checked for linearizability; the stale-read proof.
import os
import random
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultnet  # noqa: E402
import lincheck  # noqa: E402
import schedule  # noqa: E402
import workload as wl  # noqa: E402
from workload import h, pb  # noqa: E402
from lincheck import Op  # noqa: E402

SEED = int(os.environ.get("SLOTD_FAULT_SEED", "0")) or random.randrange(1, 1 << 31)
ROUNDS = int(os.environ.get("SLOTD_FAULT_ROUNDS", "2"))
HERE = os.path.dirname(os.path.abspath(__file__))

STALE_READS = 20          # LOCAL reads from the cut-off follower: every one must be stale
WRITE_BOUND_S = 15.0      # a put (same request id on retries) is acknowledged within this


def _dump(result_or_report, name):
    path = os.path.join(tempfile.gettempdir(), "slotd-lincheck-%s-%d.json" % (name, SEED))
    report = getattr(result_or_report, "report", result_or_report)
    return lincheck.write_violation(report, path)


class FaultScheduleTest(h.SlotdTestCase):
    """A seeded schedule of every fault kind while 6 clients run; zero violations required."""

    def test_random_schedule_is_linearizable(self):
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d rounds=%d\n" % (SEED, ROUNDS))
        c = self.new_cluster(size=3)
        result = schedule.run(c, SEED, rounds=ROUNDS)
        rep = result.report
        lengths = {}
        for op in result.history:
            lengths[op.key] = lengths.get(op.key, 0) + 1
        sys.stderr.write("  faults %s; %s; errors %s; leader-kill ms to first write %s; "
                         "run %.1f s\n" % (result.stats.faults, rep.summary(), result.errors,
                                           ["%.0f" % ms for ms in result.stats.leader_kill_ms],
                                           result.seconds))
        problems = result.problems()
        if problems:
            history_path = os.path.join(tempfile.gettempdir(),
                                        "slotd-lincheck-history-%d.json" % SEED)
            lincheck.save_history(result.history, history_path)
            _dump(result, "violation")
            for t, text in result.stats.log:
                sys.stderr.write("  %7.2f s  %s\n" % (t, text))
            sys.stderr.write("  history saved to %s; replay: cd %s && SLOTD_FAULT_SEED=%d "
                             "%s -m unittest -v test_faults\n"
                             % (history_path, HERE, SEED, sys.executable))
        self.assertEqual(problems, [])
        self.assertEqual(result.busy_at_heal, 6, "clients ran out of ops before the faults ended")
        self.assertGreater(rep.ops - rep.maybe_ops, 50, "too few completed ops to mean anything")
        self.assertEqual(sum(result.stats.faults.values()), len(schedule.KINDS) * ROUNDS)


class StaleLocalReadTest(faultnet.FaultTestCase):
    """Proof that the suite can fail, on every run: a deliberately wrong client reads with
    CONSISTENCY_LOCAL (no min_applied_index) from a follower that has applied the key's old value
    and is then cut off from both peers (the fault build's peer filter, both ways) before the new
    value is written through the majority side. The cut-off follower cannot learn the new value,
    so every one of its answers is the old value after the new write was acknowledged; the test
    requires all STALE_READS of them to be stale and the checker to report a violation with a
    sub-history of at most 4 ops (it is 3: put old, put new, get old). It never skips: without a
    fault build it fails (the other fault-build tests skip unless SLOTD_FAULT_REQUIRED=1)."""

    def setUp(self):
        problem = faultnet.fault_bin_problem()
        if problem:
            self.fail("the stale-read proof needs the fault build: %s" % problem)

    def test_local_reads_from_cut_off_follower_are_flagged(self):
        c = self.new_fault_cluster(size=3, slot_groups=2)
        rng = random.Random("stale/%d" % SEED)
        group_id = 1
        leader = c.leaders(c.wait_leaders())[group_id]
        follower = [n for n in c.voters(group_id) if n != leader][0]
        majority = [n for n in c.node_ids if n != follower]
        key = h.key_in_group(c.table, group_id, "stale", rng)
        history = []

        def write(node, value):
            t0, resp = wl.put_until_acked(c.stub(node), key, value, b"stale-" + value,
                                          WRITE_BOUND_S)
            self.assertIsNotNone(resp, "put %r through node %d not acknowledged within %.0f s"
                                 % (value, node, WRITE_BOUND_S))
            history.append(Op("put", key, {"value": value}, {"version": resp.put.version}, t0,
                              time.monotonic()))
            return resp

        old = write(leader, b"old")
        # the follower has applied the old value (a correct LOCAL read waits for it)
        h.get(c.stub(follower), key, consistency=pb.CONSISTENCY_LOCAL,
              min_applied_index=old.applied_index)
        c.isolate(follower)
        c.wait_net()  # every node logged the cut: nothing of the new write reaches the follower
        new = write(majority[0], b"new")
        self.assertGreater(new.put.version, old.put.version)
        stale = 0
        req = pb.ReadRequest(consistency=pb.CONSISTENCY_LOCAL, get=pb.GetQuery(key=key))
        for _ in range(STALE_READS):
            t0 = time.monotonic()
            g = c.stub(follower).Read(req, timeout=5).get  # a LOCAL read always answers
            history.append(Op("get", key, {}, {"found": g.found,
                                               "value": g.value if g.found else None,
                                               "version": g.version}, t0, time.monotonic()))
            stale += g.value != b"new"
        c.heal_net()
        rep = lincheck.check(history)
        sys.stderr.write("\n  follower %d cut off: %d of %d LOCAL reads stale; %s\n"
                         % (follower, stale, STALE_READS, rep.summary()))
        self.assertEqual(stale, STALE_READS, "a cut-off follower answered the new value")
        self.assertEqual(rep.results.get(key), lincheck.VIOLATION,
                         "stale reads not flagged: %s" % rep.summary())
        _dump(rep, "stale-local")
        for ops in rep.violations.values():
            self.assertLessEqual(len(ops), 4)
            self.assertEqual(sorted(op.kind for op in ops), ["get", "put", "put"])



if __name__ == "__main__":
    unittest.main()
