# test_crash_points.py - each crash point of the fault build fires under load; nothing acked is lost.
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

SEED = int(os.environ.get("SLOTD_FAULT_SEED", "0")) or random.randrange(1, 1 << 31)
HERE = os.path.dirname(os.path.abspath(__file__))

CRASH_BOUND_S = 30.0       # the armed node must reach its crash point within this under load
DOWN_S = 0.5               # time the crashed node stays down
AFTER_RESTART_S = 2.0      # load after the restart, before the checks
OPS_MAX = 20000            # per client: more than the run can use (ops are time-bound)
# Hits before the crash: enough that the cluster is under load, few enough to come quickly.
HITS = {"loop_before_log_sync": 300, "loop_after_log_sync": 300, "apply_after_fsm_commit": 300,
        # controller entries are rarer: bootstrap, each node's address report, then every node's
        # health report every 3 s (12: past the start, a few seconds into the load)
        "controller_before_state_save": 12}
# Snapshot test: a tiny compaction threshold so the leaders compact past the stopped node.
COMPACT_ARGS = ["--compact-entries", "10", "--compact-tail", "1"]
SNAPSHOT_WRITES_WHILE_DOWN_S = 2.0


class CrashPointTest(faultnet.FaultTestCase):
    """For each crash point: a 3-node fault-build cluster with SLOTD_CRASH_AT on node 1 (the
    first voter of groups 1, 4, 7, ..., so it leads some groups and follows others), 6 clients
    of the checked workload, node 1 exits with status 86 at the point, is restarted without the
    variable, and the run ends with the schedule's checks: every group writable, lincheck over
    the whole history (nothing acknowledged lost), replicas identical."""

    def _check(self, c, work, keys, rng, t0, name):
        result = schedule.RunResult(kinds=())
        schedule.settle_and_check(c, work, keys, result, SEED, rng, t0)
        rep = result.report
        sys.stderr.write("  %s: %s; errors %s\n" % (name, rep.summary(), result.errors))
        problems = result.problems()
        if problems:
            path = os.path.join(tempfile.gettempdir(),
                                "slotd-lincheck-history-%s-%d.json" % (name, SEED))
            lincheck.save_history(result.history, path)
            lincheck.write_violation(rep, path.replace("history", "violation"))
            for t, text in result.stats.log:
                sys.stderr.write("  %7.2f s  %s\n" % (t, text))
        self.assertEqual(problems, [])
        self.assertGreater(rep.ops - rep.maybe_ops, 50, "too few completed ops to mean anything")

    def _wait_crash(self, c, node, point, bound_s):
        server = c.server(node)
        status = server.wait_exit(bound_s)
        self.assertIsNotNone(status, "node %d did not reach crash point %s within %.0f s"
                             % (node, point, bound_s))
        self.assertEqual(status, faultnet.CRASH_EXIT_STATUS,
                         "node %d exited with %d, not at the crash point\n%s"
                         % (node, status, server.log_tail()))
        self.assertTrue(server.log_lines("fault: crash point %s hit" % point, True),
                        server.log_tail())

    def _crash_under_load(self, point):
        name = "crash-" + point
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d SLOTD_CRASH_AT=%s:%d on node 1\n"
                         % (SEED, point, HITS[point]))
        c = self.new_fault_cluster(size=3, crash_at={1: "%s:%d" % (point, HITS[point])})
        self._last_cluster = c
        rng = random.Random("%s/%d" % (name, SEED))
        keys = [b"crash/%d/%s/k%d" % (SEED, point.encode(), i) for i in range(8)]
        t0 = time.monotonic()
        work = wl.Workload(c, keys, SEED, ops_max=OPS_MAX).start()
        try:
            self._wait_crash(c, 1, point, CRASH_BOUND_S)
            work.set_targets([2, 3])
            time.sleep(DOWN_S)
            c.restart(1)
            self.assertFalse(c.server(1).log_lines("armed", True), "restarted with the crash point")
            work.set_targets(c.node_ids)
            time.sleep(AFTER_RESTART_S)
        except BaseException:
            work.stop()
            raise
        self._check(c, work, keys, rng, t0, name)

    def test_loop_before_log_sync(self):
        """Node 1 leads some groups: its appends left before its own write, which it never
        makes. An entry must not commit on a quorum that counts that write."""
        self._crash_under_load("loop_before_log_sync")

    def test_loop_after_log_sync(self):
        self._crash_under_load("loop_after_log_sync")

    def test_apply_after_fsm_commit(self):
        self._crash_under_load("apply_after_fsm_commit")

    def test_controller_before_state_save(self):
        """Node 1 (a controller voter) dies after applying controller entries and before saving
        the controller state to its store; restarted, it replays the controller log suffix and
        its exported cluster-state.json matches the other voters' byte for byte (revision,
        checksum, applied index)."""
        point = "controller_before_state_save"
        self._crash_under_load(point)
        c = self._last_cluster

        def files():
            return {n: (c.server(n).data_dir / "cluster-state.json").read_bytes()
                    for n in c.node_ids}
        deadline = time.monotonic() + 15
        while len(set(files().values())) != 1 and time.monotonic() < deadline:
            time.sleep(0.2)
        self.assertEqual(len(set(files().values())), 1, "cluster-state.json differs: %s"
                         % {n: f[:120] for n, f in files().items()})

    def test_snapshot_after_fsm_rows(self):
        """Node 3 is stopped while the leaders compact their logs (threshold 10 entries); it
        restarts armed, must crash while installing a snapshot (rows synced, raftlog batch not
        written), and after a plain restart must install again and converge."""
        point = "snapshot_after_fsm_rows"
        name = "crash-" + point
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d SLOTD_CRASH_AT=%s on node 3\n" % (SEED, point))
        c = self.new_fault_cluster(size=3, slot_groups=4, extra_args=COMPACT_ARGS)
        rng = random.Random("%s/%d" % (name, SEED))
        keys = [b"crash/%d/%s/k%d" % (SEED, point.encode(), i) for i in range(8)]
        t0 = time.monotonic()
        work = wl.Workload(c, keys, SEED, ops_max=OPS_MAX)
        work.set_targets([1, 2])
        work.start()
        try:
            self.assertIsNone(c.stop(3))
            time.sleep(SNAPSHOT_WRITES_WHILE_DOWN_S)
            self.assertTrue(any(c.server(n).log_lines("log compacted") for n in (1, 2)),
                            "no leader compacted its log")
            c.server(3).env_once["SLOTD_CRASH_AT"] = point
            c.server(3).launch()  # no wait for SERVING: it may crash before
            self._wait_crash(c, 3, point, CRASH_BOUND_S)
            c.restart(3)
            work.set_targets(c.node_ids)
            time.sleep(AFTER_RESTART_S)
            self.assertTrue(c.server(3).log_lines("snapshot installed", True),
                            "node 3 did not install a snapshot after the crash\n%s"
                            % c.server(3).log_tail())
        except BaseException:
            work.stop()
            raise
        self._check(c, work, keys, rng, t0, name)


    def _local(self, server, key, min_index):
        """A LOCAL read of key on server with min_applied_index, retried for CRASH_BOUND_S."""
        deadline = time.monotonic() + CRASH_BOUND_S
        while True:
            try:
                return faultnet.h.get(server.stub, key, consistency=faultnet.h.pb.CONSISTENCY_LOCAL,
                                      min_applied_index=min_index, timeout=2.0).get
            except faultnet.h.grpc.RpcError as err:
                if time.monotonic() > deadline:
                    self.fail("LOCAL read of %r on node %d: %s %s\n%s" % (
                        key, server.node_id, err.code(), err.details(), server.log_tail()))
                time.sleep(0.05)

    def _snapshot_round(self, c, rng, tag, keys, gone):
        """Node 3 stopped; via node 1, gone deleted and every key of keys written (200-byte
        values, so the snapshot is many install batches of 4096 bytes); node 3 restarted armed,
        it must crash in the middle of the install. Returns the highest version written."""
        self.assertIsNone(c.stop(3))
        top = 0
        for k in gone:
            faultnet.h.delete(c.stub(1), k, request_id=b"%s/del/%s" % (tag, k))
        for k in keys:
            resp = faultnet.h.put_retrying(c.stub(1), k, tag + b"/" + k.ljust(200, b"v"),
                                           b"%s/put/%s" % (tag, k))
            top = max(top, resp.put.version)
        self.assertTrue(any(c.server(n).log_lines("log compacted") for n in (1, 2)),
                        "no leader compacted its log")
        c.server(3).env_once["SLOTD_CRASH_AT"] = "snapshot_mid_install"
        c.server(3).launch()  # no wait for SERVING: it may crash before
        self._wait_crash(c, 3, "snapshot_mid_install", CRASH_BOUND_S)
        return top

    def test_snapshot_mid_install(self):
        """A received snapshot is installed from its spool file in batches of
        --snapshot-install-batch-bytes. Node 3 crashes after the first middle batch (its old
        rows deleted, some new ones written, applied index 0): restarted, it finishes the install
        from <data dir>/snap-recv/g1-<transfer>.snap before the group starts, serves every row of
        the snapshot LOCAL and none of the rows the snapshot no longer has, and the spool file is
        gone. Crashed there again, with the spool file deleted, it refuses to start: exit 1 and a
        message naming group 1 and the file."""
        rng = random.Random("mid-install/%d" % SEED)
        c = self.new_fault_cluster(size=3, slot_groups=1, extra_args=COMPACT_ARGS + [
            "--snapshot-install-batch-bytes", "4096"])
        c.wait_leaders()
        old = c.keys_by_group("mid/old", rng, per_group=30)[1]
        for k in old:
            resp = faultnet.h.put_retrying(c.stub(1), k, b"old", b"old/" + k)
        self.assertTrue(self._local(c.server(3), old[-1], resp.put.version).found)
        new = c.keys_by_group("mid/new", rng, per_group=150)[1]
        top = self._snapshot_round(c, rng, b"r1", new, old)
        spool = c.server(3).data_dir / "snap-recv"
        snaps = sorted(p.name for p in spool.glob("g1-*.snap"))
        self.assertEqual(len(snaps), 1, "spool files after the crash: %s"
                         % sorted(p.name for p in spool.iterdir()))
        c.restart(3)
        s3 = c.server(3)
        self.assertTrue(s3.log_lines('msg="interrupted snapshot install finished" group=1', True),
                        s3.log_tail())
        for k in new:
            got = self._local(s3, k, top)
            self.assertEqual((got.found, got.value), (True, b"r1/" + k.ljust(200, b"v")), k)
        for k in old:
            self.assertFalse(self._local(s3, k, top).found, "old row %r left" % k)
        self.assertFalse((spool / snaps[0]).exists(), "the spool file is still there")

        self._snapshot_round(c, rng, b"r2", new[:100], new[100:])
        snaps = sorted(spool.glob("g1-*.snap"))
        self.assertEqual(len(snaps), 1)
        snaps[0].unlink()
        s3.launch()
        status = s3.wait_exit(CRASH_BOUND_S)
        self.assertEqual(status, 1, "node 3 did not refuse to start\n%s" % s3.log_tail())
        refused = s3.log_lines("cannot start: interrupted snapshot install", True)
        self.assertTrue(refused, s3.log_tail())
        self.assertIn("group 1:", refused[0])
        self.assertIn(str(snaps[0]), refused[0])
        self.assertIn("is missing", refused[0])
        sys.stderr.write("\n  refused: %s\n" % refused[0][:300])


if __name__ == "__main__":
    unittest.main()
