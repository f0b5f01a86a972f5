"""test_controller_recovery.py - the controller state is rebuilt from the store (the state machine
saved with its applied index, plus the raft log after it), never from cluster-state.json: a voter
restarted with its file deleted, replaced by an older copy or truncated comes back at the
leader's revision and rewrites the file; a voter whose store lost its controller log refuses to
start without --join and rejoins with it; no node's revision ever goes backwards."""
import json
import shutil
import threading
import time
import unittest

import grpc

import slotd_harness as h
from slotd.v1 import admin_pb2
from test_controller import ControllerClusterCase, admin_call, wait_for

COMPACT = ["--compact-entries", "10", "--compact-tail", "2"]
CATCH_UP_S = 5  # the bound: a restarted voter's revision equals the leader's within it
EXIT_S = 10


def controller_status(server, timeout=2.0):
    return admin_call(server, "ControllerStatus", admin_pb2.ControllerStatusRequest(),
                      admin_pb2.ControllerStatusResponse, timeout=timeout)


class RevisionWatch(threading.Thread):
    """Polls every running node's ControllerStatus and records any revision that is lower than
    one the same node answered before (across restarts too)."""

    def __init__(self, nodes):
        super().__init__(daemon=True)
        self.nodes = nodes
        self.highest = {}
        self.backwards = []
        self.samples = 0
        self.stopping = threading.Event()

    def run(self):
        deadline = time.monotonic() + 600  # bounded even if the test forgets to stop it
        while not self.stopping.is_set() and time.monotonic() < deadline:
            for i, s in list(self.nodes.items()):
                if not s.running() or s.channel is None:
                    continue
                try:
                    st = controller_status(s, timeout=0.5)
                except (grpc.RpcError, ValueError, AttributeError):
                    continue  # restarting: no answer is not an answer that goes back
                if st.revision == 0:
                    continue  # nothing published yet in this run (the store is loaded first)
                self.samples += 1
                if st.revision < self.highest.get(i, 0):
                    self.backwards.append((i, self.highest[i], st.revision))
                self.highest[i] = max(self.highest.get(i, 0), st.revision)
            time.sleep(0.05)

    def stop(self):
        self.stopping.set()
        self.join(5)


class ControllerRecoveryTest(ControllerClusterCase):

    def leader_status(self):
        leader = wait_for("a controller leader", self.controller_leader)
        return controller_status(self.nodes[leader])

    def toggle(self, times):
        """`times` admin changes (revision + times), each a SetPreferredLeader of group 1.

        Node 1 may answer ClusterState from a state a few entries behind the leader's, and a
        retried call may find its first attempt applied: either way the call answers
        OUTCOME_NOOP and changed nothing, so the state is read again and that call does not
        count. Only OUTCOME_CHANGED counts toward `times`."""
        changed, calls = 0, 0
        while changed < times:
            calls += 1
            self.assertLess(calls, 3 * times + 10, "SetPreferredLeader keeps answering NOOP")
            _, state = self.state_of(1)
            g = state["groups"][0]
            peers, current = g["desired_peers"], g["preferred_leader"]
            nxt = peers[(peers.index(current) + 1) % len(peers)]
            r = wait_for("set preferred leader", lambda: admin_call(
                self.nodes[1], "SetPreferredLeader",
                admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=nxt),
                admin_pb2.AdminWriteResponse))
            self.assertIn(r.outcome, (admin_pb2.OUTCOME_CHANGED, admin_pb2.OUTCOME_NOOP))
            if r.outcome == admin_pb2.OUTCOME_CHANGED:
                changed += 1

    def state_of(self, i):
        resp = admin_call(self.nodes[i], "ClusterState", admin_pb2.ClusterStateRequest(),
                          admin_pb2.ClusterStateResponse)
        return resp, json.loads(resp.state_json)

    def restart_and_check(self, victim, mutate, found):
        """Kills the voter, applies mutate(path) to its cluster-state.json, starts it and checks
        that it serves the leader's revision within CATCH_UP_S, logged what it found, and
        rewrote the file to an exact export."""
        s = self.nodes[victim]
        path = s.data_dir / "cluster-state.json"
        s.kill()
        mutate(path)
        s.start()
        want = self.leader_status().revision
        t0 = time.monotonic()
        # the role is published at the loop's first tick, the revision already when the state
        # loads from the store: wait for both
        got = wait_for("node %d at the leader's revision %d" % (victim, want),
                       lambda: (lambda st: st.revision >= want and
                                st.role in ("follower", "leader") and st)(controller_status(s)),
                       timeout=CATCH_UP_S)
        self.assertLessEqual(time.monotonic() - t0, CATCH_UP_S)
        self.assertIn(got.role, ("follower", "leader"))
        lines = s.log_lines("rewritten from the store", current_run_only=True)
        self.assertEqual(len(lines), 1, "one line says what was found: %s" % lines)
        self.assertIn('found="%s' % found, lines[0])
        self.assertTrue(s.log_lines("controller state loaded from the store",
                                    current_run_only=True))
        wait_for("node %d's file is an export of its state" % victim,
                 lambda: json.loads(path.read_bytes())["revision"] ==
                 controller_status(s).revision)
        return got

    def test_restart_rebuilds_from_the_store_never_from_the_file(self):
        self.start_cluster(extra_args=COMPACT)
        wait_for("converged", self.converged)
        watch = RevisionWatch(self.nodes)
        watch.start()
        try:
            self.toggle(31)  # 30+ admin changes; the controller log compacts (every 10 entries)
            st = wait_for("the controller log compacted on node 3",
                          lambda: controller_status(self.nodes[3]).snapshot_index > 0 and
                          controller_status(self.nodes[3]))
            self.assertGreater(st.revision, 31)
            victim = 3
            path = self.nodes[victim].data_dir / "cluster-state.json"
            old = path.read_bytes()
            old_rev = json.loads(old)["revision"]
            self.toggle(12)  # the old copy is now 12 revisions and a compaction behind

            # (a) the file deleted
            self.restart_and_check(victim, lambda p: p.unlink(), "missing")
            # (b) an older copy in its place
            got = self.restart_and_check(victim, lambda p: p.write_bytes(old), "older")
            self.assertGreater(got.revision, old_rev + 11)
            # (c) the file truncated (a torn write by some other tool)
            self.toggle(2)
            self.restart_and_check(victim, lambda p: p.write_bytes(p.read_bytes()[:100]),
                                   "unreadable")

            # (d) the store lost (raftlog/ and fsm/ gone, the exported file kept): the node must
            # not start as an empty controller that could vote again ...
            s = self.nodes[victim]
            s.kill()
            shutil.rmtree(s.data_dir / "raftlog")
            shutil.rmtree(s.data_dir / "fsm")
            s.launch()
            try:
                s.proc.wait(EXIT_S)
            except Exception:  # noqa: BLE001 - report below
                pass
            self.assertIsNotNone(s.proc.poll(), "node 3 started as an empty controller")
            self.assertNotEqual(s.proc.returncode, 0)
            self.assertTrue(s.log_lines("must not start as an empty controller",
                                        current_run_only=True), s.log_tail())
            s.kill()
            # ... and with --join it is re-added from the leader's snapshot.
            args = list(s.extra_args)
            at = args.index("--peers")
            s.extra_args = args[:at] + ["--join", self.nodes[1].peer_addr] + args[at + 2:]
            s.start()
            want = self.leader_status().revision
            wait_for("the rejoined voter follows the controller at revision %d" % want,
                     lambda: controller_status(s).role == "follower" and
                     controller_status(s).revision >= want, timeout=30)
            self.assertTrue(s.log_lines("rejoining the controller group", current_run_only=True))
            self.toggle(1)
            want = self.leader_status().revision
            wait_for("the rejoined voter applies new commands",
                     lambda: controller_status(s).revision == want, timeout=10)
        finally:
            watch.stop()
        self.assertGreater(watch.samples, 50)
        self.assertEqual(watch.backwards, [], "a revision went backwards (node, had, got)")

    def test_controller_status_on_every_node(self):
        self.start_cluster()
        rev, _ = wait_for("converged", self.converged)
        roles = {}
        for i, s in self.nodes.items():
            st = controller_status(s)
            self.assertEqual(st.node_id, i)
            self.assertEqual(st.revision, rev)
            roles[i] = st.role
            if i in (1, 2, 3):
                self.assertGreater(st.term, 0)
                self.assertGreaterEqual(st.commit_index, st.applied_index)
                self.assertEqual(st.mirror_lag_ms, -1)
            else:
                self.assertEqual(st.term, 0)
                self.assertGreaterEqual(st.mirror_lag_ms, 0)
                self.assertLess(st.mirror_lag_ms, 10000)
            self.assertEqual(st.state_file_revision, rev)
        self.assertEqual(sorted(roles[i] for i in (1, 2, 3)), ["follower", "follower", "leader"])
        self.assertEqual((roles[4], roles[5]), ("mirror", "mirror"))
        leaders = {controller_status(s).leader for i, s in self.nodes.items() if i <= 3}
        self.assertEqual(len(leaders), 1)
        # Without a quorum it still answers: two voters stopped, the third tells what it knows.
        self.nodes[1].kill()
        self.nodes[2].kill()
        st = controller_status(self.nodes[3])
        self.assertEqual(st.revision, rev)
        self.assertIn(st.role, ("follower", "pre_candidate", "candidate"))


if __name__ == "__main__":
    unittest.main()
