"""test_tasks.py - controller tasks on a 5-node cluster (3 controller voters + 2 joined data
nodes): replica moves under a concurrent writer, leader transfer, node drain, controller voter
promotion, failure and retry, TaskStatus."""
import random
import threading
import time
import unittest

import grpc

import slotd_harness as h
import test_controller as tc
from slotd.v1 import admin_pb2, metadata_pb2

TASK_WAIT_S = 60


def task_status(server, task_id):
    raw = h.raw_unary(server.channel, "/slotd.v1.Metadata/TaskStatus",
                      metadata_pb2.TaskStatusRequest(task_id=task_id).SerializeToString())
    return metadata_pb2.TaskStatusResponse.FromString(raw).task


class Writer:
    """Writes unique keys of one group through random nodes with request ids, retrying the same
    request until it is answered; records the last acknowledged value of every key."""

    def __init__(self, servers, table, group, seed):
        self.servers = servers
        self.rng = random.Random(seed)
        self.keys = [h.key_in_group(table, group, "move", self.rng) for _ in range(16)]
        self.acked = {}
        self.n_acked = 0
        self.errors = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)

    def run(self):
        n = 0
        while not self.stop.is_set() and n < 20000:
            key = self.keys[n % len(self.keys)]
            value = b"v%d" % n
            req = metadata_pb2.ProposeRequest(request_id=b"w-%d" % n,
                                              put=metadata_pb2.PutCommand(key=key, value=value))
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                live = [s for s in self.servers if s.running() and s.channel is not None]
                if not live:
                    time.sleep(0.05)
                    continue
                server = self.rng.choice(live)
                try:
                    h.raw_unary(server.channel, "/slotd.v1.Metadata/Propose",
                                req.SerializeToString(), timeout=3)
                    self.acked[key] = value
                    self.n_acked += 1
                    break
                except (grpc.RpcError, AttributeError, ValueError) as err:
                    name = err.code().name if isinstance(err, grpc.RpcError) else "CLOSED"
                    self.errors[name] = self.errors.get(name, 0) + 1
                    time.sleep(0.05)
                    continue
                except grpc.RpcError as err:
                    self.errors[err.code().name] = self.errors.get(err.code().name, 0) + 1
                    time.sleep(0.05)
            n += 1
            time.sleep(0.005)
        self.count = n

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop.set()
        self.thread.join(30)


class TaskTest(tc.ControllerClusterCase):

    def create(self, method, request, via=1):
        resp = tc.admin_call(self.nodes[via], method, request, admin_pb2.AdminWriteResponse)
        self.assertEqual(resp.outcome, admin_pb2.OUTCOME_CHANGED)
        self.assertGreater(resp.task_id, 0)
        return resp.task_id

    def wait_task(self, task_id, status="done", timeout=TASK_WAIT_S, via=1):
        phases = []

        def check():
            t = task_status(self.nodes[via], task_id)
            if not phases or phases[-1] != t.phase:
                phases.append(t.phase)
            return t if t.status == status else None
        t = tc.wait_for("task %d %s" % (task_id, status), check, timeout=timeout)
        return t, phases

    def state(self):
        return tc.cluster_state(self.nodes[1])[1]

    def group(self, gid):
        return [g for g in self.state()["groups"] if g["id"] == gid][0]

    def check_acked(self, writer):
        for key, value in writer.acked.items():
            resp = h.get(self.nodes[1].stub, key)
            self.assertTrue(resp.get.found, key)
            self.assertEqual(resp.get.value, value, key)

    def test_replica_move_under_writes(self):
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        table = h.expected_hash_slot_table(tc.SLOT_GROUPS)
        for leader_moves in (False, True):
            g = self.group(1)
            peers = g["desired_peers"]
            leader = {r.group_id: r.leader for r in tc.route(self.nodes[1]).groups}[1]
            source = leader if leader_moves else [p for p in peers if p != leader][0]
            target = [n for n in (1, 2, 3, 4, 5) if n not in peers][0]
            writer = Writer(list(self.nodes.values()), table, 1, seed=7 + leader_moves).start()
            time.sleep(0.5)
            task_id = self.create("MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=1, from_node=source, to_node=target), via=5)
            t, phases = self.wait_task(task_id)
            writer.finish()
            self.assertEqual(t.kind, "replica_move")
            self.assertEqual((t.source_node, t.target_node), (source, target))
            for phase in ("add_learner", "catch_up", "promote", "remove_source", "done"):
                self.assertIn(phase, phases + ["done"], phases)
            after = self.group(1)
            self.assertEqual(sorted(after["desired_peers"]),
                             sorted([p for p in peers if p != source] + [target]))
            self.assertEqual(after["config_epoch"], g["config_epoch"] + 1)
            if g["preferred_leader"] == source:
                self.assertEqual(after["preferred_leader"], target)
            self.assertGreater(writer.n_acked, 0)
            self.check_acked(writer)
            # The source drops the replica and its data; the route shows the new voters.
            tc.wait_for("source closed the replica", lambda: self.nodes[source].log_lines(
                'msg="replica removed from this node" node=%d group=1' % source))
            tc.wait_for("route shows the new voters", lambda: sorted(
                [r for r in tc.route(self.nodes[2]).groups if r.group_id == 1][0].voters)
                == sorted(after["desired_peers"]))
            print("\n  move g1 %d->%d (source led: %s): %d writes acked, errors %s, phases %s"
                  % (source, target, leader_moves, writer.n_acked, writer.errors, phases))

    def test_move_refused_and_stale(self):
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        g = self.group(2)
        outsider = [n for n in (1, 2, 3, 4, 5) if n not in g["desired_peers"]][0]
        with self.assertRaises(grpc.RpcError) as cm:  # source is not a peer
            tc.admin_call(self.nodes[1], "MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=2, from_node=outsider, to_node=outsider), admin_pb2.AdminWriteResponse)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        with self.assertRaises(grpc.RpcError) as cm:
            tc.admin_call(self.nodes[1], "MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=0, from_node=1, to_node=2), admin_pb2.AdminWriteResponse)
        self.assertEqual(h.error_detail(cm.exception).field, "group_id")
        with self.assertRaises(grpc.RpcError) as cm:
            tc.admin_call(self.nodes[1], "DrainNode", admin_pb2.DrainNodeRequest(node_id=1),
                          admin_pb2.AdminWriteResponse)
        self.assertIn("demote", cm.exception.details())
        with self.assertRaises(grpc.RpcError) as cm:
            task_status(self.nodes[1], 999)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.NOT_FOUND)

    def test_leader_transfer(self):
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        route = {r.group_id: r for r in tc.route(self.nodes[1]).groups}
        g = route[3]
        target = [v for v in g.voters if v != g.leader][0]
        task_id = self.create("TransferLeader", admin_pb2.TransferLeaderRequest(
            group_id=3, to_node=target))
        t, _ = self.wait_task(task_id)
        self.assertEqual(t.source_node, g.leader)
        self.assertEqual(self.group(3)["preferred_leader"], target)
        tc.wait_for("target leads", lambda: {r.group_id: r.leader for r in
                                             tc.route(self.nodes[1]).groups}[3] == target)

    def test_drain_a_joined_node(self):
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        table = h.expected_hash_slot_table(tc.SLOT_GROUPS)
        victim = 5
        held = [g["id"] for g in self.state()["groups"] if victim in g["desired_peers"]]
        writer = Writer([s for i, s in self.nodes.items() if i != victim], table, held[0],
                        seed=11).start()
        task_id = self.create("DrainNode", admin_pb2.DrainNodeRequest(node_id=victim), via=2)
        t, _ = self.wait_task(task_id, timeout=60 * len(held))
        writer.finish()
        state = self.state()
        node = [n for n in state["nodes"] if n["id"] == victim][0]
        self.assertEqual(node["join_state"], "removed")
        self.assertFalse(any(victim in g["desired_peers"] for g in state["groups"]))
        moves = [x for x in state["tasks"] if x["kind"] == "replica_move"]
        self.assertEqual(len(moves), len(held))
        self.check_acked(writer)
        print("\n  drained node %d: %d replica moves, %d writes acked meanwhile"
              % (victim, len(moves), writer.n_acked))

    def test_promote_controller_voter(self):
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        task_id = self.create("PromoteControllerVoter",
                              admin_pb2.PromoteControllerVoterRequest(node_id=4))
        self.wait_task(task_id)
        roles = {n["id"]: n["roles"] for n in self.state()["nodes"]}
        self.assertIn("controller_voter", roles[4])
        tc.wait_for("node 4 follows the controller log",
                    lambda: tc.cluster_state(self.nodes[4])[0].from_voter)
        # With 4 voters, losing two of the original three still leaves no quorum... losing one
        # keeps the controller writable (3 of 4).
        self.nodes[1].kill()
        r = tc.wait_for("controller write with a voter down", lambda: tc.admin_call(
            self.nodes[4], "SetPreferredLeader",
            admin_pb2.SetPreferredLeaderRequest(group_id=2, node_id=self.group_via(4, 2)),
            admin_pb2.AdminWriteResponse), timeout=20)
        self.assertIn(r.outcome, (admin_pb2.OUTCOME_CHANGED, admin_pb2.OUTCOME_NOOP))

    def group_via(self, node, gid):
        st = tc.cluster_state(self.nodes[node])[1]
        g = [x for x in st["groups"] if x["id"] == gid][0]
        return g["desired_peers"][0]

    def test_failed_move_keeps_membership_and_retries(self):
        self.start_cluster(extra_args=["--task-phase-timeout-ms", "4000"])
        tc.wait_for("converged", self.converged)
        g = self.group(4)
        target = [n for n in (1, 2, 3, 4, 5) if n not in g["desired_peers"]][0]
        source = [p for p in g["desired_peers"] if p != target][0]
        self.nodes[target].kill()  # the target is down: the learner can never catch up
        task_id = self.create("MoveReplica", admin_pb2.MoveReplicaRequest(
            group_id=4, from_node=source, to_node=target))
        t, _ = self.wait_task(task_id, status="failed", timeout=40)
        self.assertTrue(t.last_error)
        self.assertEqual(self.group(4)["desired_peers"], g["desired_peers"])
        self.nodes[target].start()
        r = tc.admin_call(self.nodes[1], "RetryTask", admin_pb2.RetryTaskRequest(task_id=task_id),
                          admin_pb2.AdminWriteResponse)
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        t, _ = self.wait_task(task_id)
        self.assertEqual(t.attempt, 2)
        self.assertIn(target, self.group(4)["desired_peers"])


if __name__ == "__main__":
    unittest.main()
