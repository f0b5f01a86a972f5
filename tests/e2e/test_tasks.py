"""test_tasks.py - controller tasks on a 5-node cluster (3 controller voters + 2 joined data
nodes): replica moves under a concurrent writer, leader transfer, node drain, controller voter
promotion, failure and retry, TaskStatus."""
import json
import random
import threading
import time
import unittest

import grpc

import slotd_harness as h
import test_controller as tc
import test_slotctl as ts
from slotd.v1 import admin_pb2, metadata_pb2

TASK_WAIT_S = 60


def task_status_response(server, task_id, min_revision=0, timeout=h.RPC_TIMEOUT_S):
    raw = h.raw_unary(server.channel, "/slotd.v1.Metadata/TaskStatus",
                      metadata_pb2.TaskStatusRequest(
                          task_id=task_id, min_revision=min_revision).SerializeToString(),
                      timeout=timeout)
    return metadata_pb2.TaskStatusResponse.FromString(raw)


def task_status(server, task_id, min_revision=0, timeout=h.RPC_TIMEOUT_S):
    return task_status_response(server, task_id, min_revision, timeout).task


def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def controller_command_request(command):
    """slotd.internal.v1.ControllerCommandRequest{command} encoded by hand (the harness generates
    only the public protos): field 1, length-delimited."""
    return b"\x0a" + _varint(len(command)) + command


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
        # Intent and fact side by side: the target is a learner in both while the task runs...
        def route4():
            return [r for r in tc.route(self.nodes[source]).groups if r.group_id == 4][0]
        r = tc.wait_for("route shows the learner", lambda: (lambda x: x if list(x.learners) ==
                        [target] else None)(route4()))
        self.assertEqual(list(r.intended_learners), [target])
        self.assertNotIn(target, [x.node_id for x in r.replicas if x.age_ms < 1500])  # down
        t, _ = self.wait_task(task_id, status="failed", timeout=40)
        self.assertTrue(t.last_error)
        self.assertEqual(self.group(4)["desired_peers"], g["desired_peers"])
        # ...once it failed the intent no longer has it, and the group's leader removes the
        # learner the move left (a move that failed before promote owns no learner any more).
        r = tc.wait_for("intent drops the learner", lambda: (lambda x: x if not
                        x.intended_learners else None)(route4()))
        r = tc.wait_for("the leader removes the leftover learner", lambda: (lambda x: x if not
                        x.learners else None)(route4()))
        self.assertEqual(sorted(r.voters), sorted(g["desired_peers"]))
        self.assertEqual(sorted(r.intended_voters), sorted(g["desired_peers"]))
        tc.wait_for("leftover learner removal logged", lambda: any(
            n.log_lines('msg="leftover learner removal proposed" group=4 node=%d' % target)
            for n in self.nodes.values() if n.running()))
        # slotctl route shows intent and fact agreeing again for every group.
        code, j, err = ts.slotctl_json(self.nodes[source].addr, "route")
        self.assertEqual(code, 0, err)
        g4 = [x for x in j["groups"] if x["group_id"] == 4][0]
        self.assertEqual((g4["learners"], g4["intended_learners"], g4["agrees"]), ([], [], True))
        self.assertIn(source, [x["node_id"] for x in g4["replicas"]])
        self.nodes[target].start()
        r = tc.admin_call(self.nodes[1], "RetryTask", admin_pb2.RetryTaskRequest(task_id=task_id),
                          admin_pb2.AdminWriteResponse)
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        t, _ = self.wait_task(task_id)  # the learner was removed: the retry added it again
        self.assertEqual(t.attempt, 2)
        self.assertIn(target, self.group(4)["desired_peers"])

    def test_forged_catch_up_proof_promotes_nothing(self):
        """A task_advance with a made-up catch-up proof (the target is down, it has nothing),
        sent with a valid node identity, is refused by the controller leader with
        FAILED_PRECONDITION naming the fact it observed itself: the task stays at catch_up, the
        down target never becomes a voter, the group keeps taking writes, and the task fails at
        the phase timeout with the membership as it was."""
        self.start_cluster(extra_args=["--task-phase-timeout-ms", "4000"])
        tc.wait_for("converged", self.converged)
        g = self.group(4)
        target = [n for n in (1, 2, 3, 4, 5) if n not in g["desired_peers"]][0]
        source = [p for p in g["desired_peers"] if p != target][0]
        self.nodes[target].kill()
        task_id = self.create("MoveReplica", admin_pb2.MoveReplicaRequest(
            group_id=4, from_node=source, to_node=target))
        t = tc.wait_for("catch_up", lambda: (lambda x: x if x.phase == "catch_up" else None)(
            task_status(self.nodes[1], task_id)))
        leader = {r.group_id: r.leader for r in tc.route(self.nodes[1]).groups}[4]
        forged = {"op": "task_advance", "task": task_id, "now_ms": int(time.time() * 1000),
                  "group": 4, "config_epoch": t.config_epoch, "attempt": t.attempt,
                  "phase": t.phase_index, "replicas_on_node": 0, "leading": 0,
                  "proof": {"config_index": 10 ** 6, "voters": g["desired_peers"],
                            "learners": [target], "leader": leader, "commit": 10 ** 6,
                            "target_match": 10 ** 6}}
        # Sent as node 3 with the cluster secret: a valid node identity carrying a forged proof.
        with self.assertRaises(grpc.RpcError) as ctx:
            self.nodes[2].peer_call("/slotd.internal.v1.Peer/ControllerCommand",
                                    controller_command_request(json.dumps(forged).encode()),
                                    node=3)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.FAILED_PRECONDITION,
                         ctx.exception.details())
        self.assertIn("group 4: node %d" % target, ctx.exception.details())
        self.assertIn("observed by the controller leader", ctx.exception.details())
        self.assertEqual(task_status(self.nodes[1], task_id).phase, "catch_up")
        writer = Writer([s for i, s in self.nodes.items() if i != target],
                        h.expected_hash_slot_table(tc.SLOT_GROUPS), 4, seed=17).start()
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline:  # the leader never promotes the down learner
            r = [x for x in tc.route(self.nodes[source]).groups if x.group_id == 4][0]
            self.assertNotIn(target, list(r.voters))
            time.sleep(0.2)
        t, _ = self.wait_task(task_id, status="failed", timeout=40)
        writer.finish()
        self.assertEqual(t.phase, "catch_up", t)
        r = [x for x in tc.route(self.nodes[source]).groups if x.group_id == 4][0]
        self.assertEqual(sorted(r.voters), sorted(g["desired_peers"]))
        self.assertEqual(self.group(4)["desired_peers"], g["desired_peers"])
        self.assertGreater(writer.n_acked, 0)
        self.check_acked(writer)

    def test_read_your_admin_writes_on_another_node(self):
        """MoveReplica through one node, then TaskStatus(min_revision = the write's revision)
        through another finds the task: 100 times in a row, 8 groups moving at once. ClusterState
        and RouteSnapshot honour min_revision too; one never reached fails UNAVAILABLE naming
        the revision the node is at, after the bounded wait."""
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        rounds, found, failures = 100, [], []
        lock = threading.Lock()

        def mover(gid):
            rng = random.Random(gid)
            seen = 0  # the highest controller revision this mover has been answered at
            while True:
                with lock:
                    if len(found) + len(failures) >= rounds:
                        return
                try:
                    # Read at least what the last round saw done, or node 1 may still hold the
                    # placement from before it and pick a target that is already a peer.
                    cs = tc.admin_call(self.nodes[1], "ClusterState",
                                       admin_pb2.ClusterStateRequest(min_revision=seen),
                                       admin_pb2.ClusterStateResponse)
                    g = [x for x in json.loads(cs.state_json)["groups"] if x["id"] == gid][0]
                    leader = {r.group_id: r.leader for r in tc.route(self.nodes[1]).groups}[gid]
                    source = rng.choice([p for p in g["desired_peers"] if p != leader])
                    target = rng.choice([n for n in self.nodes if n not in g["desired_peers"]])
                    via = rng.choice(list(self.nodes))
                    other = rng.choice([n for n in self.nodes if n != via])
                    resp = tc.admin_call(self.nodes[via], "MoveReplica",
                                         admin_pb2.MoveReplicaRequest(
                                             group_id=gid, from_node=source, to_node=target),
                                         admin_pb2.AdminWriteResponse, timeout=10)
                    t = task_status(self.nodes[other], resp.task_id,
                                    min_revision=resp.revision, timeout=5)
                    with lock:
                        found.append((gid, via, other, resp.task_id, t.task_id))
                    done = tc.wait_for("task %d done" % t.task_id, lambda: (
                        lambda r: r if r.task.status == "done" else None)(task_status_response(
                            self.nodes[other], t.task_id)), timeout=TASK_WAIT_S)
                    seen = max(seen, done.revision)
                except grpc.RpcError as err:
                    with lock:
                        failures.append((gid, err.code().name, err.details()))
                    return
                except Exception as err:  # noqa: BLE001 - reported by the main thread
                    with lock:
                        failures.append((gid, type(err).__name__, str(err)))
                    return

        threads = [threading.Thread(target=mover, args=(gid,), daemon=True)
                   for gid in range(1, tc.SLOT_GROUPS + 1)]
        t0 = time.monotonic()
        for t in threads:
            t.start()
        for t in threads:
            t.join(300)
        self.assertEqual(failures, [])
        self.assertGreaterEqual(len(found), rounds)
        for gid, via, other, created, got in found:
            self.assertEqual(created, got, (gid, via, other))
        print("\n  %d MoveReplica + TaskStatus(min_revision) on another node in %.1f s"
              % (len(found), time.monotonic() - t0))

        # ClusterState and RouteSnapshot: answered at the revision asked for, or later.
        resp = tc.admin_call(self.nodes[2], "SetPreferredLeader", admin_pb2.SetPreferredLeaderRequest(
            group_id=1, node_id=self.group(1)["desired_peers"][1]), admin_pb2.AdminWriteResponse)
        for n in self.nodes.values():
            cs = tc.admin_call(n, "ClusterState",
                               admin_pb2.ClusterStateRequest(min_revision=resp.revision),
                               admin_pb2.ClusterStateResponse)
            self.assertGreaterEqual(cs.revision, resp.revision)
            raw = h.raw_unary(n.channel, "/slotd.v1.Metadata/RouteSnapshot",
                              metadata_pb2.RouteSnapshotRequest(
                                  min_revision=resp.revision).SerializeToString())
            self.assertGreaterEqual(metadata_pb2.RouteSnapshotResponse.FromString(raw).route_revision,
                                    resp.revision)

        # A revision no node reaches: UNAVAILABLE after the 3 s wait, naming where it is.
        far = resp.revision + 1000
        t0 = time.monotonic()
        with self.assertRaises(grpc.RpcError) as cm:
            task_status(self.nodes[4], 0, min_revision=far, timeout=10)
        waited = time.monotonic() - t0
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(h.error_detail(cm.exception).field, "min_revision")
        self.assertRegex(cm.exception.details(), r"min_revision %d not reached within 3000 ms: "
                         r"node 4 is at controller revision \d+" % far)
        self.assertGreater(waited, 2.5)
        self.assertLess(waited, 6)

        # The wait list is bounded (256 per node): 300 such calls at once, the ones over the
        # bound fail RESOURCE_EXHAUSTED at once, the rest UNAVAILABLE after the wait.
        call = self.nodes[5].channel.unary_unary("/slotd.v1.Metadata/TaskStatus",
                                                 request_serializer=None,
                                                 response_deserializer=None)
        payload = metadata_pb2.TaskStatusRequest(min_revision=far).SerializeToString()
        futures = [call.future(payload, timeout=10) for _ in range(300)]
        codes = {}
        for f in futures:
            code = f.exception().code() if f.exception() is not None else grpc.StatusCode.OK
            codes[code] = codes.get(code, 0) + 1
        self.assertEqual(codes.get(grpc.StatusCode.UNAVAILABLE, 0), 256, codes)
        self.assertEqual(codes.get(grpc.StatusCode.RESOURCE_EXHAUSTED, 0), 44, codes)


if __name__ == "__main__":
    unittest.main()
