# test_security.py - trust-boundary checks on real processes: a port slotd serves is its own, and
# Peer calls need a proof of the cluster secret made by the node the body names, for the receiver.
import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd.v1 import admin_pb2, metadata_pb2  # noqa: E402

sys.path.insert(0, str(h.REPO / "clients" / "python"))
from slotd_client import Client  # noqa: E402

EXIT_WITHIN_S = 3.0


class BoundPortTest(unittest.TestCase):
    """A second slotd on a port another slotd serves exits at once (exit != 0, one line naming the
    port and the error) and touches no data directory; the first keeps serving every request."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="slotd-security-")
        cls.first = h.SlotdServer(cls.tmp.name, name="first").start()

    @classmethod
    def tearDownClass(cls):
        problem = cls.first.stop()
        cls.tmp.cleanup()
        if problem:
            raise AssertionError("first slotd: %s" % problem)

    def test_second_slotd_on_bound_port_exits(self):
        key = h.unique_key("bound-port")
        h.put(self.first.stub, key, b"first")
        second_dir = os.path.join(self.tmp.name, "second-data")
        t0 = time.monotonic()
        proc = subprocess.run([str(h.SLOTD_BIN), "--listen", self.first.addr, "--data-dir",
                               second_dir], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=EXIT_WITHIN_S + 10)
        took = time.monotonic() - t0
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(took, EXIT_WITHIN_S)
        lines = [ln for ln in proc.stderr.decode().splitlines() if ln.strip()]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("--listen", lines[0])
        self.assertIn(str(self.first.port), lines[0])
        self.assertIn("Address already in use", lines[0])
        self.assertFalse(os.path.exists(second_dir), "the second slotd created its data dir")
        # Every read still reaches the first process and its data (no shared port).
        for _ in range(10):
            resp = h.get(self.first.stub, key)
            self.assertTrue(resp.get.found)
            self.assertEqual(resp.get.value, b"first")



class SecretFileTest(unittest.TestCase):
    """A --cluster-secret-file slotd cannot use stops it at once: exit 2, one line naming the flag,
    the file and the limit, no data directory made, and the secret never printed."""

    def test_unusable_secret_files_refused(self):
        with tempfile.TemporaryDirectory(prefix="slotd-secret-") as tmp:
            short = os.path.join(tmp, "short.secret")
            with open(short, "w") as f:
                f.write("tiny-secret\n")
            data = os.path.join(tmp, "data")
            for path, needle in ((os.path.join(tmp, "missing"), "No such file"),
                                 (short, "it must hold at least 16")):
                proc = subprocess.run([str(h.SLOTD_BIN), "--listen", "127.0.0.1:0", "--data-dir",
                                       data, "--metrics-listen", "", "--cluster-secret-file",
                                       path], stdin=subprocess.DEVNULL, capture_output=True,
                                      text=True, timeout=10)
                self.assertEqual(proc.returncode, 2, proc.stderr)
                lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
                self.assertEqual(len(lines), 1, lines)
                self.assertIn("--cluster-secret-file", lines[0])
                self.assertIn(path, lines[0])
                self.assertIn(needle, lines[0])
                self.assertNotIn("tiny-secret", lines[0])
                self.assertFalse(os.path.exists(data))


# ---- hand-encoded slotd.internal.v1 messages (the harness generates only the public protos) ----

def _varint(n):
    out = bytearray()
    while True:
        out.append((n & 0x7F) | (0x80 if n > 0x7F else 0))
        n >>= 7
        if not n:
            return bytes(out)


def _u(field, v):
    return _varint(field << 3) + _varint(v)


def _b(field, data):
    return _varint((field << 3) | 2) + _varint(len(data)) + data


RAFT_MSG_APPEND = 0
RAFT_MSG_HEARTBEAT = 6
RAFT_MSG_SNAPSHOT = 8
HUGE_TERM = 10 ** 12


def raft_message(group, mtype, frm, to, term, index=0, log_term=0, commit=0, entries=()):
    """slotd.internal.v1.RaftMessage."""
    m = _u(1, group) + _u(2, mtype) + _u(3, frm) + _u(4, to) + _u(5, term)
    m += _u(6, log_term) + _u(7, index) + _u(8, commit)
    for term_, index_ in entries:
        m += _b(12, _u(1, term_) + _u(2, index_) + _u(3, 0) + _b(4, b"forged"))
    return m


def raft_batch(from_node, to_node, messages):
    """slotd.internal.v1.RaftBatch."""
    return _u(1, from_node) + _u(2, to_node) + b"".join(_b(3, m) for m in messages)


def snapshot_chunk(from_node, group, message):
    """slotd.internal.v1.SnapshotChunk: one whole (last) chunk of 6 bytes with its message."""
    return (_u(1, from_node) + _u(2, group) + _u(3, 77) + _u(4, 0) + _u(5, 6) + _b(6, b"forged")
            + _u(7, 1) + _b(8, message))


def controller_command(command, no_forward=False):
    """slotd.internal.v1.ControllerCommandRequest."""
    return _b(1, command) + (_u(2, 1) if no_forward else b"")


class PeerAuthTest(h.SlotdTestCase):
    """A 4-node cluster (3 replicas per group) started with --cluster-secret-file (the harness
    gives every multi-node process one). Forged Peer calls without a proof, with a proof of
    another secret, made for another receiver, replayed, or whose body names another sender than
    the proof are refused with UNAUTHENTICATED; forged task steps from a valid node identity are
    refused with FAILED_PRECONDITION naming the fact the controller leader observed; no group's
    term moves, the cluster state's revision stays, and every group keeps taking writes, read back
    through another node. Nodes 1-3 take the writes; node 4 is the target of a replica move."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.cluster = cls.new_class_cluster(size=4, replicas=3)

    def admin(self, node_id, method, request, response_type, timeout=h.RPC_TIMEOUT_S):
        raw = h.raw_unary(self.cluster.server(node_id).channel, "/slotd.v1.Admin/" + method,
                          request.SerializeToString(), timeout=timeout)
        return response_type.FromString(raw)

    def state(self, node_id, min_revision=0):
        resp = self.admin(node_id, "ClusterState",
                          admin_pb2.ClusterStateRequest(min_revision=min_revision),
                          admin_pb2.ClusterStateResponse)
        return json.loads(resp.state_json)

    def task(self, node_id, task_id, min_revision=0):
        raw = h.raw_unary(self.cluster.server(node_id).channel, "/slotd.v1.Metadata/TaskStatus",
                          metadata_pb2.TaskStatusRequest(
                              task_id=task_id, min_revision=min_revision).SerializeToString())
        return metadata_pb2.TaskStatusResponse.FromString(raw).task

    def wait(self, what, fn, timeout=30.0):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            got = fn()
            if got:
                return got
            time.sleep(0.2)
        self.fail("%s: not within %.0f s" % (what, timeout))

    def assertPrecondition(self, fn, *needles):
        with self.assertRaises(grpc.RpcError) as ctx:
            fn()
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.FAILED_PRECONDITION,
                         ctx.exception.details())
        for needle in needles:
            self.assertIn(needle, ctx.exception.details())
        return ctx.exception.details()

    def terms(self):
        """{(group, node): term} every replica reports, through node 1."""
        route = self.cluster.route(via=1)
        return {(g.group_id, r.node_id): r.term for g in route.groups for r in g.replicas}

    def revision(self, node_id):
        raw = h.raw_unary(self.cluster.server(node_id).channel, "/slotd.v1.Admin/ClusterState",
                          admin_pb2.ClusterStateRequest().SerializeToString())
        return admin_pb2.ClusterStateResponse.FromString(raw).revision

    def assertUnauthenticated(self, fn, needle):
        with self.assertRaises(grpc.RpcError) as ctx:
            fn()
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAUTHENTICATED,
                         ctx.exception.details())
        self.assertIn(needle, ctx.exception.details())
        return ctx.exception.details()

    def assertWritesEverywhere(self, tag):
        """Every group takes a write through node 1 and node 3 reads it back."""
        for g in self.cluster.group_ids:
            key = h.key_in_group(self.cluster.table, g, "security/%s/g%d" % (tag, g))
            h.put_retrying(self.cluster.stub(1), key, b"v", request_id=key)
            got = h.get(self.cluster.stub(3), key)
            self.assertTrue(got.get.found, (tag, g))

    def test_forged_raft_refused(self):
        before, rev = self.terms(), self.revision(2)
        self.assertTrue(before)
        raft = "/slotd.internal.v1.Peer/Raft"
        node2 = self.cluster.server(2)
        for g in self.cluster.group_ids:
            beat = raft_message(g, RAFT_MSG_HEARTBEAT, 1, 2, HUGE_TERM, commit=HUGE_TERM)
            # An APPEND at a huge term that would truncate node 2's log from index 1.
            append = raft_message(g, RAFT_MSG_APPEND, 1, 2, HUGE_TERM, index=0, log_term=0,
                                  commit=1, entries=[(HUGE_TERM, 1)])
            batch = raft_batch(1, 2, [beat, append])
            # No proof at all, as any client of the port could send it.
            self.assertUnauthenticated(
                lambda: h.raw_unary(node2.channel, raft, batch), "has no slotd-peer-proof header")
            # A proof of another secret.
            self.assertUnauthenticated(
                lambda: node2.peer_call(raft, batch, node=1, secret=b"not the cluster's secret!"),
                "does not match")
            # A proof made for node 3, sent to node 2.
            self.assertUnauthenticated(
                lambda: h.peer_unary(node2.channel, raft, batch, 1, 3), "receiving node")
            # A valid identity (node 3) whose batch claims to come from node 1.
            self.assertUnauthenticated(lambda: node2.peer_call(raft, batch, node=3),
                                       "from_node 1 is not the calling node 3")
            # A valid node 3 batch carrying messages that claim node 1: dropped by the runtime.
            node2.peer_call(raft, raft_batch(3, 2, [beat, append]), node=3)
            # A snapshot chunk without a proof, and one whose sender is not the caller.
            chunk = snapshot_chunk(1, g, raft_message(g, RAFT_MSG_SNAPSHOT, 1, 2, HUGE_TERM))
            self.assertUnauthenticated(
                lambda: h.raw_unary(node2.channel, "/slotd.internal.v1.Peer/Snapshot", chunk),
                "has no slotd-peer-proof header")
            self.assertUnauthenticated(
                lambda: node2.peer_call("/slotd.internal.v1.Peer/Snapshot", chunk, node=3),
                "from_node 1 is not the calling node 3")
        time.sleep(0.5)
        after = self.terms()
        for k, term in after.items():
            self.assertLess(term, HUGE_TERM, k)
            self.assertLessEqual(term, before.get(k, term) + 2, k)  # no jump, at most an election
        self.assertWritesEverywhere("raft")
        self.assertEqual(self.revision(2), rev)
        self.assertLess(max(self.terms().values()), HUGE_TERM)

    def test_forged_controller_command_refused(self):
        path = "/slotd.internal.v1.Peer/ControllerCommand"
        rev = self.revision(1)
        cmd = controller_command(json.dumps(
            {"op": "node_state", "node": 2, "state": "drained"}).encode())
        node1 = self.cluster.server(1)
        self.assertUnauthenticated(lambda: h.raw_unary(node1.channel, path, cmd),
                                   "has no slotd-peer-proof header")
        self.assertUnauthenticated(
            lambda: node1.peer_call(path, cmd, node=2, secret=b"a guessed cluster secret"),
            "does not match")
        # One proof, sent twice: the second is a replay.
        bad = controller_command(b"{}")  # a valid proof of a command the controller refuses
        proof = h.peer_proof(path, bad, 2, 1)
        try:
            h.raw_unary(node1.channel, path, bad, metadata=[(h.PROOF_HEADER, proof)])
        except grpc.RpcError as e:  # the controller refuses "{}", the proof itself was good
            self.assertNotEqual(e.code(), grpc.StatusCode.UNAUTHENTICATED, e.details())
        self.assertUnauthenticated(
            lambda: h.raw_unary(node1.channel, path, bad, metadata=[(h.PROOF_HEADER, proof)]),
            "was already used (a replay)")
        # A proof far from this node's clock.
        old = h.peer_proof(path, cmd, 2, 1, wall_ms=int(time.time() * 1000) - 120000)
        self.assertUnauthenticated(
            lambda: h.raw_unary(node1.channel, path, cmd, metadata=[(h.PROOF_HEADER, old)]),
            "behind this node's clock")
        self.assertEqual(self.revision(1), rev)
        self.assertEqual(self.revision(3), rev)
        self.assertWritesEverywhere("ctl")

    def test_commands_checked_against_the_caller(self):
        """Authenticated nodes still send only what nodes send: an Admin-only op, a health report
        for another node, or a relay (no_forward) from a node that is not a controller voter
        answer FAILED_PRECONDITION naming the fact, and the cluster state does not change."""
        path = "/slotd.internal.v1.Peer/ControllerCommand"
        rev = self.revision(1)
        now = int(time.time() * 1000)
        cases = [
            ({"op": "set_node_status", "node": 3, "status": "draining"}, False, 2,
             'op "set_node_status" is not one nodes send'),
            ({"op": "health_report", "node": 3, "now_ms": now, "ttl_ms": 60000}, False, 2,
             "a health report for node 3 sent by node 2"),
            ({"op": "health_report", "node": 7, "now_ms": now, "ttl_ms": 60000}, True, 7,
             "relayed (no_forward) by node 7, which is not a controller voter"),
        ]
        for command, no_forward, sender, needle in cases:
            for n in self.cluster.node_ids:
                if n == sender:
                    continue
                with self.assertRaises(grpc.RpcError) as ctx:
                    self.cluster.server(n).peer_call(
                        path, controller_command(json.dumps(command).encode(), no_forward),
                        node=sender)
                self.assertEqual(ctx.exception.code(), grpc.StatusCode.FAILED_PRECONDITION,
                                 ctx.exception.details())
                self.assertIn(needle, ctx.exception.details())
        self.assertEqual(self.revision(1), rev)
        self.assertEqual(self.revision(2), rev)
        # A node's own report, first-hand, is taken.
        report = {"op": "health_report", "node": 2, "now_ms": now, "ttl_ms": 60000}
        self.cluster.server(1).peer_call(path, controller_command(json.dumps(report).encode()),
                                         node=2)

    def test_forged_task_advance_refused(self):
        """A replica move to node 4 while node 4 is stopped waits at catch_up. A forged
        task_advance with a made-up catch-up proof (target_match = commit = 10^6), sent as node 2
        (a valid identity) through nodes 1, 2 and 3, answers FAILED_PRECONDITION naming the fact
        the controller leader observed itself (node 4 holds nothing). Nothing changes: revision
        on two nodes, task phase, the group's voters, and the group takes writes, read back
        through another node. Node 4 resumed, the move completes on the observed facts and every
        group takes writes. (Forged drain and migration proofs: tests/unit/controller/
        vet_test.c.)"""
        path = "/slotd.internal.v1.Peer/ControllerCommand"
        state = self.state(1)
        g = [x for x in state["groups"] if 4 not in x["desired_peers"]][0]
        gid, peers = g["id"], g["desired_peers"]
        leader = {r.group_id: r.leader for r in self.cluster.route(via=1).groups}[gid]
        source = [p for p in peers if p != leader][0]
        self.cluster.pause(4)
        try:
            resp = self.admin(1, "MoveReplica", admin_pb2.MoveReplicaRequest(
                group_id=gid, from_node=source, to_node=4), admin_pb2.AdminWriteResponse)
            task_id = resp.task_id
            t = self.wait("catch_up", lambda: (lambda x: x if x.phase == "catch_up" else None)(
                self.task(1, task_id, min_revision=resp.revision)))
            rev = self.revision(1)
            now = int(time.time() * 1000)
            fence = {"op": "task_advance", "task": task_id, "now_ms": now, "group": gid,
                     "config_epoch": t.config_epoch, "attempt": t.attempt,
                     "replicas_on_node": 0, "leading": 0}
            caught_up = dict(fence, phase=t.phase_index, proof={
                "config_index": 10 ** 6, "voters": peers, "learners": [4], "leader": leader,
                "commit": 10 ** 6, "target_match": 10 ** 6})
            for via in (1, 2, 3):
                details = self.assertPrecondition(
                    lambda: self.cluster.server(via).peer_call(
                        path, controller_command(json.dumps(caught_up).encode()), node=2),
                    "group %d: node 4" % gid, "observed by the controller leader")
            # e.g. "group 3: node 4 holds up to 0 < leader commit 57 as observed by the
            # controller leader (node 1) 0 ms ago" or "... no progress of it observed ..."
            self.assertTrue("< leader commit" in details or "no progress" in details, details)
            self.assertEqual(self.task(1, task_id).phase, "catch_up")
            self.assertEqual(self.revision(1), rev)
            self.assertEqual(self.revision(3), rev)
            r = [x for x in self.cluster.route(via=3).groups if x.group_id == gid][0]
            self.assertEqual(sorted(r.voters), sorted(peers))
            # The moved group (node 4 is not among its voters) keeps taking writes.
            key = h.key_in_group(self.cluster.table, gid, "security/advance/g%d" % gid)
            h.put_retrying(self.cluster.stub(1), key, b"v", request_id=key)
            self.assertTrue(h.get(self.cluster.stub(3), key).get.found)
        finally:
            self.cluster.resume(4)
        # Node 4 back: the move completes on the facts themselves.
        done = self.wait("move done", lambda: (lambda x: x if x.status == "done" else None)(
            self.task(1, task_id, min_revision=resp.revision)), timeout=60)
        self.assertEqual(done.phase, "done")
        self.assertIn(4, self.state(3, min_revision=done.revision)["groups"][gid - 1][
            "desired_peers"])
        self.assertWritesEverywhere("advance")

    def test_migration_switch_is_replicated(self):
        """hash-slot migration is off in the cluster state: MigrateHashSlots is refused through
        every node (FAILED_PRECONDITION naming Admin.SetFeature), and so is a task_create sent as a
        node on Peer/ControllerCommand. SetFeature on, through one node, shows in ClusterState on
        every node; a migration through another node is then accepted and completes."""
        state = self.state(1)
        self.assertEqual(state["features"], {"hash_slot_migration": False})
        rev = self.revision(1)
        busy = set()
        for t in state["tasks"]:
            if t["status"] in ("pending", "running"):
                busy.update({t.get("group", 0), t.get("to_group", 0)})
        src, dst = [g for g in self.cluster.group_ids if g not in busy][:2]
        slot = [r for r in state["hash_slot_table"]["ranges"] if r["group"] == src][0]["first"]
        req = admin_pb2.MigrateHashSlotsRequest(hash_slots=[slot], to_group=dst)
        for n in self.cluster.node_ids:
            self.assertPrecondition(
                lambda: self.admin(n, "MigrateHashSlots", req, admin_pb2.AdminWriteResponse),
                "hash-slot migration is off in the cluster state (Admin.SetFeature")
        create = {"op": "task_create", "kind": "hash_slot_migration", "hash_slots": [slot],
                  "to_group": dst, "now_ms": int(time.time() * 1000)}
        self.assertPrecondition(
            lambda: self.cluster.server(3).peer_call(
                "/slotd.internal.v1.Peer/ControllerCommand",
                controller_command(json.dumps(create).encode()), node=2),
            "hash-slot migration is off")
        self.assertEqual(self.revision(1), rev)
        self.assertEqual(self.revision(4), rev)
        with self.assertRaises(grpc.RpcError) as ctx:
            self.admin(2, "SetFeature", admin_pb2.SetFeatureRequest(name="warp", enabled=True),
                       admin_pb2.AdminWriteResponse)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("known: hash_slot_migration", ctx.exception.details())
        # The Python client's set_feature / features, through node 2, then node 4.
        client, client4 = Client([self.cluster.addr(2)]), Client([self.cluster.addr(4)])
        try:
            on = client.set_feature("hash_slot_migration", True)
            self.assertEqual(on.outcome, admin_pb2.OUTCOME_CHANGED)
            client4.observe_revision(on.revision)  # read your write on node 4
            self.assertEqual(client4.features(), {"hash_slot_migration": True})
        finally:
            client.close()
            client4.close()
        for n in self.cluster.node_ids:
            self.assertTrue(self.state(n, min_revision=on.revision)["features"][
                "hash_slot_migration"], n)
        again = self.admin(4, "SetFeature", admin_pb2.SetFeatureRequest(
            name="hash_slot_migration", enabled=True), admin_pb2.AdminWriteResponse)
        self.assertEqual(again.outcome, admin_pb2.OUTCOME_NOOP)
        try:
            resp = self.admin(3, "MigrateHashSlots", req, admin_pb2.AdminWriteResponse)
            done = self.wait("migration done", lambda: (
                lambda x: x if x.status in ("done", "failed") else None)(
                    self.task(1, resp.task_id, min_revision=resp.revision)), timeout=60)
            self.assertEqual(done.status, "done", done)
            table = self.state(4, min_revision=done.revision)["hash_slot_table"]["ranges"]
            self.assertTrue(any(r["first"] <= slot <= r["last"] and r["group"] == dst
                                for r in table), table)
        finally:
            self.admin(1, "SetFeature", admin_pb2.SetFeatureRequest(
                name="hash_slot_migration", enabled=False), admin_pb2.AdminWriteResponse)
        self.assertWritesEverywhere("migrated")

    def test_started_with_peer_auth(self):
        for n in self.cluster.node_ids:
            self.assertIn("peer_auth=secret", self.cluster.server(n).log_text())
            self.assertNotIn("PEERS ARE NOT AUTHENTICATED", self.cluster.server(n).log_text())


class ConnectionLimitTest(h.SlotdTestCase):
    """One node with small connection limits: --max-streams-per-conn 4, --max-connections 4,
    --conn-idle-ms 2000. A client holding more calls on one connection gets RESOURCE_EXHAUSTED
    at once for the excess while another client is served; one connection more than the limit is
    refused, and served again once the idle connections are gone."""

    STREAMS = 4
    CONNS = 4
    IDLE_MS = 2000

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.server = cls.new_class_server(extra_args=[
            "--max-streams-per-conn", str(cls.STREAMS), "--max-connections", str(cls.CONNS),
            "--conn-idle-ms", str(cls.IDLE_MS)])

    def held_call(self, channel):
        """A ClusterState waiting for a revision the node will not reach (held ~3 s)."""
        fn = channel.unary_unary("/slotd.v1.Admin/ClusterState")
        req = admin_pb2.ClusterStateRequest(min_revision=10**15).SerializeToString()
        return fn.future(req, timeout=10)

    def test_too_many_streams_on_one_connection(self):
        greedy = h.open_channel(self.server.addr)
        other = h.open_channel(self.server.addr)
        try:
            stub = h.pb_grpc.MetadataStub(other)
            h.put(stub, b"conn/warm", b"v")  # the second client's connection exists already
            start = time.monotonic()
            calls = [self.held_call(greedy) for _ in range(3 * self.STREAMS)]
            done_at = {}
            for c in calls:
                c.add_done_callback(lambda f: done_at.setdefault(id(f), time.monotonic()))
            # While the greedy client's calls are held, the other client is served.
            h.put(stub, b"conn/other", b"v", request_id=b"conn/other")
            self.assertTrue(h.get(stub, b"conn/other").get.found)
            codes, refused_after = [], []
            for c in calls:
                try:
                    c.result()
                    codes.append(grpc.StatusCode.OK)
                except grpc.RpcError as e:
                    codes.append(e.code())
                    if e.code() == grpc.StatusCode.RESOURCE_EXHAUSTED:
                        self.assertIn("the limit is %d (max_streams_per_conn)" % self.STREAMS,
                                      e.details())
                        refused_after.append(done_at[id(c)] - start)
            held = codes.count(grpc.StatusCode.UNAVAILABLE)  # waited the 3 s for the revision
            refused = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertEqual(held + refused, len(calls), codes)
            self.assertGreaterEqual(refused, self.STREAMS, codes)
            self.assertGreaterEqual(held, self.STREAMS, codes)
            self.assertLess(min(refused_after), 2.0)  # refused at once, not after the wait
            # The greedy connection is served again once its calls are done.
            h.put(h.pb_grpc.MetadataStub(greedy), b"conn/greedy", b"v")
        finally:
            greedy.close()
            other.close()

    def test_one_connection_too_many(self):
        # Let the other test's connections age out of the table first.
        time.sleep((self.IDLE_MS + 1500) / 1000.0)
        channels = [h.open_channel(self.server.addr) for _ in range(self.CONNS + 1)]
        try:
            served = 0
            for i, ch in enumerate(channels[:-1]):
                try:
                    h.put(h.pb_grpc.MetadataStub(ch), b"conn/many/%d" % i, b"v")
                    served += 1
                except grpc.RpcError as e:
                    self.assertEqual(e.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, e.details())
            # the harness's own connection may hold one entry still
            self.assertGreaterEqual(served, self.CONNS - 1)
            with self.assertRaises(grpc.RpcError) as ctx:
                h.put(h.pb_grpc.MetadataStub(channels[-1]), b"conn/many/extra", b"v")
            self.assertEqual(ctx.exception.code(), grpc.StatusCode.RESOURCE_EXHAUSTED)
            self.assertIn("(max_connections)", ctx.exception.details())
            # Connections already served keep being served.
            self.assertTrue(h.get(h.pb_grpc.MetadataStub(channels[0]), b"conn/many/0").get.found)
        finally:
            for ch in channels[:-1]:
                ch.close()
        # Once the closed connections are idle past --conn-idle-ms, the new one is served.
        time.sleep((self.IDLE_MS + 1500) / 1000.0)
        h.put(h.pb_grpc.MetadataStub(channels[-1]), b"conn/many/extra", b"v")
        channels[-1].close()


if __name__ == "__main__":
    unittest.main()
