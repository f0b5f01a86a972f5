"""test_elastic.py - the elastic cluster (issue 19) on one shared 5-node cluster (3 controller
voters + 2 joined data nodes, 8 groups): Admin.AbortTask stops a move mid catch-up and the
group's leader removes the learner it added; a move whose target died fails at the phase
timeout and cleans up by itself; a later move of the same group is not blocked; drain proofs
carry the observed counts and a forged tombstone changes nothing."""
import json
import os
import subprocess
import tempfile
import time
import unittest

import grpc

import slotd_harness as h
import test_controller as tc
from slotd.v1 import admin_pb2
from test_tasks import controller_command_request, task_status

SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))

PHASE_TIMEOUT_MS = 8000
# A node is down 30 s after its last health report (3 TTLs); repair starts 15 s later, which
# leaves test_remove_dead_node a window to remove its node by hand first.
DOWN_REPLACE_AFTER_MS = 45000
WAIT_S = 40


class ElasticTest(h.SlotdTestCase):

    @classmethod
    def setUpClass(cls):
        cls._class_workdir = tempfile.mkdtemp(prefix="slotd-e2e-elastic-")
        cls.nodes, peers = tc.five_nodes(cls._class_workdir)
        cls._class_servers = list(cls.nodes.values())
        common = ["--task-phase-timeout-ms", str(PHASE_TIMEOUT_MS),
                  "--down-replace-after-ms", str(DOWN_REPLACE_AFTER_MS)]
        for i in (1, 2, 3):
            cls.nodes[i].extra_args = ["--node-id", str(i), "--peers", peers,
                                       "--bootstrap-expect", "5"] + common
        for i in (4, 5):
            cls.nodes[i].extra_args = ["--node-id", str(i), "--join",
                                       cls.nodes[1 + i % 3].peer_addr] + common
        try:
            for s in cls.nodes.values():
                s.launch()
            for s in cls.nodes.values():
                problem = s._wait_serving(WAIT_S)
                if problem:
                    raise AssertionError("%s: %s" % (s.name, problem))
        except BaseException:
            for s in cls.nodes.values():
                s.kill()
            raise

    # -- helpers --

    avoid = 0  # a node the test stopped or killed: calls go elsewhere

    def via(self):
        return [i for i in sorted(self.nodes) if i != self.avoid and self.nodes[i].running()][0]

    def state(self, min_revision=0):
        resp = tc.admin_call(self.nodes[self.via()], "ClusterState",
                             admin_pb2.ClusterStateRequest(min_revision=min_revision),
                             admin_pb2.ClusterStateResponse)
        return json.loads(resp.state_json)

    def group(self, gid):
        return [g for g in self.state()["groups"] if g["id"] == gid][0]

    def live_group(self, gid, via):
        return [r for r in tc.route(self.nodes[via]).groups if r.group_id == gid][0]

    def slotctl(self, *args, via=None):
        """(exit code, stdout JSON or None, stderr) of `slotctl --json ARGS` against one node."""
        r = subprocess.run([SLOTCTL_BIN, "--endpoints", self.nodes[via or self.via()].addr,
                            "--json"] + list(args), capture_output=True, text=True, timeout=60)
        return r.returncode, json.loads(r.stdout) if r.returncode == 0 else None, r.stderr

    def admin(self, method, request, via=None):
        return tc.admin_call(self.nodes[via or self.via()], method, request,
                             admin_pb2.AdminWriteResponse)

    def wait_phase(self, task_id, phase, timeout=WAIT_S):
        return tc.wait_for("task %d at %s" % (task_id, phase), lambda: (
            lambda t: t if t.phase == phase and t.status == "running" else None)(
                task_status(self.nodes[self.via()], task_id)), timeout=timeout)

    def wait_status(self, task_id, status, timeout=WAIT_S):
        return tc.wait_for("task %d %s" % (task_id, status), lambda: (
            lambda t: t if t.status == status else None)(task_status(self.nodes[self.via()], task_id)),
            timeout=timeout)

    def wait_no_learner(self, gid, voters, via):
        """The group's live configuration (as a voter reports it) is voters and no learner."""
        return tc.wait_for("group %d: voters %s, no learner" % (gid, voters), lambda: (
            lambda r: r if not list(r.learners) and sorted(r.voters) == sorted(voters)
            else None)(self.live_group(gid, via)), timeout=WAIT_S)

    def move_plan(self, gid):
        g = self.group(gid)
        leader = self.live_group(gid, g["desired_peers"][0]).leader
        source = [p for p in g["desired_peers"] if p != leader][0]
        target = [n for n in (5, 4, 3, 2, 1) if n not in g["desired_peers"]][0]
        return g, source, target

    def setUp(self):
        tc.wait_for("every node holds the same state", lambda: len(
            {(r.revision, r.checksum) for r, _ in
             [tc.cluster_state(s) for s in self.nodes.values() if s.running()]}) == 1)

    # -- abort and self-cleanup --

    def test_abort_move_mid_catch_up(self):
        """The target is stopped (SIGSTOP), so the move sits at catch_up with its learner added;
        AbortTask fails it at once ("aborted"), the group's leader removes the learner (voters as
        before, no learner), and a new move of the same group to the same target completes. Aborting it again, aborting a done task,
        task_id 0 and an unknown task are refused and change nothing."""
        t0 = time.monotonic()
        g, source, target = self.move_plan(2)
        self.nodes[target].pause()
        self.avoid = target
        try:
            task_id = self.admin("MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=2, from_node=source, to_node=target)).task_id
            self.wait_phase(task_id, "catch_up", timeout=PHASE_TIMEOUT_MS / 1000.0)
            r = self.live_group(2, source)
            self.assertEqual(list(r.learners), [target])
            resp = self.admin("AbortTask", admin_pb2.AbortTaskRequest(task_id=task_id))
            self.assertEqual(resp.outcome, admin_pb2.OUTCOME_CHANGED)
            t = task_status(self.nodes[self.via()], task_id, min_revision=resp.revision)
            self.assertEqual((t.status, t.phase), ("failed", "catch_up"))
            self.assertIn("aborted (Admin.AbortTask) at phase catch_up", t.last_error)
            self.wait_no_learner(2, g["desired_peers"], source)
            self.assertEqual(self.group(2)["desired_peers"], g["desired_peers"])
            self.assertEqual(self.group(2)["config_epoch"], g["config_epoch"])
        finally:
            self.nodes[target].resume()
            self.avoid = 0
        # Refusals: INVALID_ARGUMENT naming the field (the controller's: "command"), the tasks
        # and groups unchanged (the revision may move: the resumed node's health status).
        before = {k: self.state()[k] for k in ("tasks", "groups", "next_task_id")}
        for req, field, text in (
                (admin_pb2.AbortTaskRequest(task_id=task_id), "command",
                 "only a running task can be aborted"),
                (admin_pb2.AbortTaskRequest(task_id=0), "task_id", "task_id"),
                (admin_pb2.AbortTaskRequest(task_id=9999), "command", "does not exist")):
            with self.assertRaises(grpc.RpcError) as cm:
                self.admin("AbortTask", req)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT,
                             cm.exception.details())
            self.assertEqual(h.error_detail(cm.exception).field, field)
            self.assertIn(text, cm.exception.details())
        self.assertEqual({k: self.state()[k] for k in before}, before)
        # The target never ran while the task did, so it never opened the replica (one that did
        # closes it like any replica the state does not place on it: task.c close_removed).
        self.assertFalse(self.nodes[target].log_lines(
            'msg="replica opened for a move" group=2', current_run_only=True))
        # No leftover blocks the next move of the group, to the same target.
        again = self.admin("MoveReplica", admin_pb2.MoveReplicaRequest(
            group_id=2, from_node=source, to_node=target)).task_id
        self.wait_status(again, "done", timeout=60)
        self.assertIn(target, self.group(2)["desired_peers"])
        with self.assertRaises(grpc.RpcError) as cm:
            self.admin("AbortTask", admin_pb2.AbortTaskRequest(task_id=again))
        self.assertIn("is done, only a running task", cm.exception.details())
        print("\n  abort mid catch-up, cleanup, next move: %.1f s" % (time.monotonic() - t0))

    def test_dead_target_fails_and_cleans_up(self):
        """The target is killed (-9) during the move: the task fails within the phase timeout,
        the leader removes the learner by itself, and a move to another node then completes."""
        t0 = time.monotonic()
        g, source, target = self.move_plan(5)
        self.nodes[target].kill()
        self.avoid = target
        try:
            task_id = self.admin("MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=5, from_node=source, to_node=target)).task_id
            self.wait_phase(task_id, "catch_up")
            t = self.wait_status(task_id, "failed", timeout=PHASE_TIMEOUT_MS / 1000.0 + 15)
            self.assertEqual(t.phase, "catch_up")
            self.assertIn("phase timeout", t.last_error)
            self.wait_no_learner(5, g["desired_peers"], source)
            self.assertEqual(self.group(5)["desired_peers"], g["desired_peers"])
            other = [n for n in sorted(self.nodes) if n not in g["desired_peers"]
                     and n != target][0]
            nxt = self.admin("MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=5, from_node=source, to_node=other)).task_id
            self.wait_status(nxt, "done", timeout=60)
            peers = self.group(5)["desired_peers"]
            self.assertIn(other, peers)
            self.assertNotIn(source, peers)
            self.wait_no_learner(5, peers, other)
        finally:
            self.nodes[target].start()
            self.avoid = 0
        print("\n  dead target: failed, cleaned up, next move done: %.1f s"
              % (time.monotonic() - t0))

    # -- controller membership --

    def test_demote_controller_voter(self):
        """DemoteControllerVoter of the controller leader itself: it loses the controller_voter
        role, hands leadership to a caught-up voter, closes its copy of the controller log and
        mirrors the state (ControllerStatus role "mirror"); the new leader takes it out of group
        0, and controller writes keep working through it. With two voters left, demoting one
        more is refused (FAILED_PRECONDITION: no live quorum would remain) and changes nothing."""
        t0 = time.monotonic()

        def status(n):
            return tc.admin_call(self.nodes[n], "ControllerStatus",
                                 admin_pb2.ControllerStatusRequest(),
                                 admin_pb2.ControllerStatusResponse)
        leader = tc.wait_for("a controller leader", lambda: status(1).leader)
        rest = [n for n in (1, 2, 3) if n != leader]
        code, out, err = self.slotctl("demote", "--node", str(leader), via=rest[0])
        self.assertEqual(code, 0, err)
        self.assertEqual((out["command"], out["outcome"], out["node_id"]),
                         ("demote", "CHANGED", leader))
        roles = {n["id"]: n["roles"] for n in self.state(out["revision"])["nodes"]}
        self.assertEqual(roles[leader], ["data"])
        tc.wait_for("node %d mirrors" % leader, lambda: status(leader).role == "mirror")
        self.assertTrue(self.nodes[leader].log_lines(
            "controller leader demoted: handing leadership over"))
        self.assertTrue(self.nodes[leader].log_lines("no longer a controller voter"))
        tc.wait_for("node %d taken out of group 0" % leader, lambda: any(
            self.nodes[n].log_lines('msg="controller member removal proposed" node=%d' % leader)
            for n in rest))
        self.assertFalse(tc.cluster_state(self.nodes[leader])[0].from_voter)
        tc.wait_for("a leader among %s" % rest, lambda: status(rest[0]).leader in rest and
                    status(rest[0]).leader == status(rest[1]).leader)
        # controller writes, relayed by the new mirror
        g = self.group(1)
        w = tc.admin_call(self.nodes[leader], "SetPreferredLeader",
                          admin_pb2.SetPreferredLeaderRequest(
                              group_id=1, node_id=g["preferred_leader"]),
                          admin_pb2.AdminWriteResponse)
        self.assertIn(w.outcome, (admin_pb2.OUTCOME_CHANGED, admin_pb2.OUTCOME_NOOP))
        before = self.state()
        code, out, err = self.slotctl("demote", "--node", str(rest[1]))
        self.assertNotEqual(code, 0)
        self.assertIn("demote controller voter: FAILED_PRECONDITION", err)
        self.assertIn("below a quorum of 2 of the 2 voters", err)
        after = self.state()
        self.assertEqual([n["roles"] for n in after["nodes"]],
                         [n["roles"] for n in before["nodes"]])
        print("\n  controller leader %d demoted to a mirror, a second demotion refused: %.1f s"
              % (leader, time.monotonic() - t0))

    # -- drain proof --

    def test_forged_tombstone_changes_nothing(self):
        """DrainNode of node 5: while it still holds replicas, a drain task_advance claiming 0
        replicas, 0 leaderships, 0 tasks and every group observed, sent with a valid node
        identity, is refused FAILED_PRECONDITION with the counts the controller leader observed;
        the node stays leaving and the task at moving_replicas. AbortTask then stops the drain:
        node 5 is active again."""
        victim = 5
        held = [g["id"] for g in self.state()["groups"] if victim in g["desired_peers"]]
        self.assertTrue(held)
        task_id = self.admin("DrainNode", admin_pb2.DrainNodeRequest(node_id=victim)).task_id
        t = self.wait_phase(task_id, "moving_replicas")
        before = self.state()
        forged = {"op": "task_advance", "task": task_id, "now_ms": int(time.time() * 1000),
                  "group": 0, "config_epoch": 0, "attempt": t.attempt, "phase": t.phase_index,
                  "replicas_on_node": 0, "leading": 0, "tasks_on_node": 0,
                  "groups_observed": tc.SLOT_GROUPS,
                  "proof": {"config_index": 0, "voters": [], "learners": [], "leader": 0,
                            "commit": 0, "target_match": 0}}
        with self.assertRaises(grpc.RpcError) as cm:
            self.nodes[2].peer_call("/slotd.internal.v1.Peer/ControllerCommand",
                                    controller_command_request(json.dumps(forged).encode()),
                                    node=3)
        details = cm.exception.details()
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION, details)
        self.assertIn("node %d: observed by the controller leader" % victim, details)
        self.assertIn("a tombstone needs 0, 0 and 0", details)
        self.assertNotIn(" 0 replicas", details)  # the node still holds some: a nonzero count
        node = [n for n in self.state()["nodes"] if n["id"] == victim][0]
        self.assertEqual(node["join_state"], "leaving")
        t = task_status(self.nodes[1], task_id)
        self.assertEqual((t.status, t.phase), ("running", "moving_replicas"))
        self.assertEqual([x for x in self.state()["tasks"] if x["id"] == task_id],
                         [x for x in before["tasks"] if x["id"] == task_id])
        # Abort the drain: the node is active again; the move it started may finish.
        resp = self.admin("AbortTask", admin_pb2.AbortTaskRequest(task_id=task_id))
        self.assertEqual(resp.outcome, admin_pb2.OUTCOME_CHANGED)
        self.assertGreater(resp.revision, before["revision"])
        node = [n for n in self.state(resp.revision)["nodes"] if n["id"] == victim][0]
        self.assertEqual(node["join_state"], "active")
        for x in self.state()["tasks"]:
            if x["kind"] == "replica_move" and x["status"] == "running":
                self.wait_status(x["id"], "done", timeout=60)
        print("\n  forged tombstone refused: %s" % details)

    # -- removing a dead node (runs last: the node stays removed) --

    def test_remove_dead_node(self):
        """RemoveNode of a live node is refused; node 4 killed for good turns down, then
        RemoveNode makes it a tombstone out of every group's desired peers, each group's leader
        removes it as a voter, writes to its groups go on, a second RemoveNode is refused, and
        node 4 started again exits non-zero with a line saying it is removed."""
        t0 = time.monotonic()
        victim = 4
        with self.assertRaises(grpc.RpcError) as cm:
            self.admin("RemoveNode", admin_pb2.RemoveNodeRequest(node_id=victim))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("RemoveNode takes a node that is down", cm.exception.details())
        before = self.state()
        held = [g["id"] for g in before["groups"] if victim in g["desired_peers"]]
        self.assertTrue(held)
        self.nodes[victim].kill()
        self.avoid = victim
        tc.wait_for("node %d down" % victim, lambda: [
            n for n in self.state()["nodes"] if n["id"] == victim][0]["status"] == "down",
            timeout=60)
        code, out, err = self.slotctl("remove-node", "--node", str(victim))
        self.assertEqual(code, 0, err)
        self.assertEqual((out["command"], out["outcome"], out["node_id"]),
                         ("remove-node", "CHANGED", victim))
        after = self.state(out["revision"])
        self.assertEqual([n for n in after["nodes"] if n["id"] == victim][0]["join_state"],
                         "removed")
        for g0, g1 in zip(before["groups"], after["groups"]):
            self.assertNotIn(victim, g1["desired_peers"])
            if g0["id"] in held:
                self.assertEqual(g1["config_epoch"], g0["config_epoch"] + 1)
        for gid in held:
            peers = [g for g in after["groups"] if g["id"] == gid][0]["desired_peers"]
            self.wait_no_learner(gid, peers, peers[0])
        table = h.expected_hash_slot_table(tc.SLOT_GROUPS)
        for gid in held:
            key = h.key_in_group(table, gid, "removed")
            h.put(self.nodes[self.via()].stub, key, b"after")
            self.assertEqual(h.get(self.nodes[self.via()].stub, key).get.value, b"after")
        code, out, err = self.slotctl("remove-node", "--node", str(victim))
        self.assertNotEqual(code, 0)
        self.assertIn("remove node: ", err)
        self.assertIn("removed already", err)
        # It comes back: it exits with an error naming the removal.
        server = self.nodes[victim]
        server.launch()
        code = server.proc.wait(30)
        self.assertNotEqual(code, 0)
        self.assertTrue(server.log_lines("this node is removed from the cluster",
                                         current_run_only=True))
        self.assertIsNone(server.sanitizer_report())
        server.proc = None
        server._close_channel()
        print("\n  dead node down, removed, voters gone, comeback refused: %.1f s"
              % (time.monotonic() - t0))

    def test_replace_dead_node_replicas(self):
        """Node 5 killed for good (after test_remove_dead_node left some groups with 2 peers):
        once it is down and silent for --down-replace-after-ms the controller leader replaces
        each of its replicas in a group that keeps a quorum with an ordinary replica move (logged,
        one per group): those groups are back to 3 voters without it, no learner, and take
        writes. A group of 2 peers that had it lost its quorum: ControllerStatus lists it, no move
        is made for it and its membership is left alone (never forced)."""
        t0 = time.monotonic()
        victim = 5
        before = self.state()
        held = {g["id"]: g for g in before["groups"] if victim in g["desired_peers"]}
        lost = sorted(gid for gid, g in held.items() if len(g["desired_peers"]) < 3)
        fixable = sorted(gid for gid in held if gid not in lost)
        self.assertTrue(fixable)
        self.nodes[victim].kill()
        self.avoid = victim

        def replaced():
            st = self.state()
            busy = [t for t in st["tasks"] if t["status"] in ("pending", "running")]
            groups = {g["id"]: g for g in st["groups"]}
            return st if not busy and all(victim not in groups[gid]["desired_peers"] and
                                          len(groups[gid]["desired_peers"]) == 3
                                          for gid in fixable) else None
        st = tc.wait_for("node %d's replicas replaced" % victim, replaced,
                         timeout=DOWN_REPLACE_AFTER_MS / 1000.0 + 60)
        first = before["next_task_id"]  # the drain of test_forged_tombstone moved one earlier
        moves = [t for t in st["tasks"] if t["kind"] == "replica_move" and t["source"] == victim
                 and t["id"] >= first]
        self.assertEqual(sorted(t["group"] for t in moves if t["status"] == "done"), fixable)
        self.assertFalse([t for t in moves if t["group"] in lost])  # never forced
        for gid in fixable:
            peers = [g for g in st["groups"] if g["id"] == gid][0]["desired_peers"]
            self.wait_no_learner(gid, peers, peers[0])
        for gid in lost:
            self.assertEqual([g for g in st["groups"] if g["id"] == gid][0]["desired_peers"],
                             held[gid]["desired_peers"])
        self.assertTrue(any(n.log_lines('msg="repair: replacing a replica of a down node" '
                                        'node=%d' % victim)
                            for n in self.nodes.values() if n.running()))
        table = h.expected_hash_slot_table(tc.SLOT_GROUPS)
        for gid in fixable:
            key = h.key_in_group(table, gid, "repaired")
            h.put(self.nodes[self.via()].stub, key, b"after")
            self.assertEqual(h.get(self.nodes[self.via()].stub, key).get.value, b"after")
        status = tc.admin_call(self.nodes[self.via()], "ControllerStatus",
                               admin_pb2.ControllerStatusRequest(),
                               admin_pb2.ControllerStatusResponse)
        self.assertEqual(sorted(status.groups_without_quorum), lost)
        print("\n  node %d killed: groups %s repaired by moves, groups %s reported without a "
              "quorum, in %.1f s" % (victim, fixable, lost, time.monotonic() - t0))


if __name__ == "__main__":
    unittest.main()
