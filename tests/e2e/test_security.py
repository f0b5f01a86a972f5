# test_security.py - trust-boundary checks on real processes: a port slotd serves is its own, Peer
# calls need a proof of the cluster secret made by the node the body names, for the receiver, and
# with --auth 1 client calls need a user (token) holding the grant.
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
from slotd.v1 import admin_pb2_grpc  # noqa: E402

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

    def test_second_slotd_on_bound_peer_port_exits(self):
        second_dir = os.path.join(self.tmp.name, "second-peer-data")
        t0 = time.monotonic()
        proc = subprocess.run([str(h.SLOTD_BIN), "--listen", "127.0.0.1:%d" % h.free_port(),
                               "--peer-listen", self.first.peer_addr, "--data-dir", second_dir],
                              stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=EXIT_WITHIN_S + 10)
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(time.monotonic() - t0, EXIT_WITHIN_S)
        lines = [ln for ln in proc.stderr.decode().splitlines() if ln.strip()]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("--peer-listen", lines[0])
        self.assertIn(self.first.peer_addr, lines[0])
        self.assertIn("Address already in use", lines[0])
        self.assertFalse(os.path.exists(second_dir), "the second slotd created its data dir")
        self.assertIn("peer_listen=%s" % self.first.peer_addr, self.first.log_text())



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


def stream_chunk(from_node, group, transfer, offset, total, data, last=False, message=None):
    """slotd.internal.v1.SnapshotChunk of a streaming sender (total_bytes 0 until the last)."""
    return (_u(1, from_node) + _u(2, group) + _u(3, transfer) + _u(4, offset) + _u(5, total)
            + _b(6, data) + (_u(7, 1) if last else b"") + (_b(8, message) if message else b""))


def snapshot_ack(resp):
    """(ok, error) of a slotd.internal.v1.SnapshotAck (field 1 bool, field 2 string)."""
    ok, error, i = False, "", 0
    while i < len(resp):
        tag = resp[i]
        if tag == 0x08:
            ok, i = resp[i + 1] == 1, i + 2
        elif tag == 0x12:
            n = resp[i + 1]  # the errors are shorter than 128 bytes
            error, i = resp[i + 2:i + 2 + n].decode(), i + 2 + n
        else:
            raise AssertionError("unexpected SnapshotAck bytes %r" % resp)
    return ok, error


def controller_command(command, no_forward=False):
    """slotd.internal.v1.ControllerCommandRequest."""
    return _b(1, command) + (_u(2, 1) if no_forward else b"")


def forward_request(method, request):
    """slotd.internal.v1.ForwardRequest."""
    return _b(1, method.encode()) + _b(2, request)


PEER_METHODS = ["Raft", "RaftStream", "Snapshot", "GroupStatus", "ControllerCommand",
                "MigrationPropose", "Forward", "WatchPoll", "BackupOpen", "BackupRead",
                "BackupClose"]

RAFT_STREAM = "/slotd.internal.v1.Peer/RaftStream"


def raft_frame(batch, proof=None):
    """slotd.internal.v1.RaftStreamFrame: the proof (absent when None) and the packed batch."""
    return (b"" if proof is None else _b(1, proof.encode())) + _b(2, batch)


def raft_stream(channel, frames, timeout=h.RPC_TIMEOUT_S):
    """Sends frames on one Peer/RaftStream and half-closes; returns the raw response bytes."""
    call = channel.stream_unary(RAFT_STREAM, request_serializer=None, response_deserializer=None)
    return call(iter(frames), timeout=timeout)


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

    def assertNothingMoved(self, before, rev, tag):
        """No replica's term jumped past `before` (at most an election), none reached HUGE_TERM,
        every group takes writes and node 2's cluster-state revision is still rev."""
        time.sleep(0.5)
        after = self.terms()
        for k, term in after.items():
            self.assertLess(term, HUGE_TERM, k)
            self.assertLessEqual(term, before.get(k, term) + 2, k)  # no jump, at most an election
        self.assertWritesEverywhere(tag)
        self.assertEqual(self.revision(2), rev)
        self.assertLess(max(self.terms().values()), HUGE_TERM)

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
                lambda: h.raw_unary(node2.peer_channel, raft, batch), "has no slotd-peer-proof header")
            # A proof of another secret.
            self.assertUnauthenticated(
                lambda: node2.peer_call(raft, batch, node=1, secret=b"not the cluster's secret!"),
                "does not match")
            # A proof made for node 3, sent to node 2.
            self.assertUnauthenticated(
                lambda: h.peer_unary(node2.peer_channel, raft, batch, 1, 3), "receiving node")
            # A valid identity (node 3) whose batch claims to come from node 1.
            self.assertUnauthenticated(lambda: node2.peer_call(raft, batch, node=3),
                                       "from_node 1 is not the calling node 3")
            # A valid node 3 batch carrying messages that claim node 1: dropped by the runtime.
            node2.peer_call(raft, raft_batch(3, 2, [beat, append]), node=3)
            # A snapshot chunk without a proof, and one whose sender is not the caller.
            chunk = snapshot_chunk(1, g, raft_message(g, RAFT_MSG_SNAPSHOT, 1, 2, HUGE_TERM))
            self.assertUnauthenticated(
                lambda: h.raw_unary(node2.peer_channel, "/slotd.internal.v1.Peer/Snapshot", chunk),
                "has no slotd-peer-proof header")
            self.assertUnauthenticated(
                lambda: node2.peer_call("/slotd.internal.v1.Peer/Snapshot", chunk, node=3),
                "from_node 1 is not the calling node 3")
        self.assertNothingMoved(before, rev, "raft")

    def test_snapshot_chunks_out_of_order_refused(self):
        """Chunks from an authenticated node that break a transfer's framing (a gap, a total that
        changes or does not match on the last chunk, a last chunk without its total, a chunk of
        another transfer) are refused with the reason and never reach raft: nothing moves."""
        before, rev = self.terms(), self.revision(2)
        node2 = self.cluster.server(2)
        path = "/slotd.internal.v1.Peer/Snapshot"

        def send(chunk):
            return snapshot_ack(node2.peer_call(path, chunk, node=3))

        tried = 0
        for g in self.cluster.group_ids:  # those node 2 hosts now (other tests move replicas)
            snap = raft_message(g, RAFT_MSG_SNAPSHOT, 3, 2, HUGE_TERM)
            first = send(stream_chunk(3, g, 901, 0, 0, b"abcd"))
            if first == (False, "group not hosted here"):
                continue
            tried += 1
            self.assertEqual(first, (True, ""))
            self.assertEqual(send(stream_chunk(3, g, 901, 6, 0, b"ef")),
                             (False, "chunk out of order"))  # a gap after 4 bytes
            self.assertEqual(send(stream_chunk(3, g, 902, 0, 0, b"abcd")), (True, ""))
            self.assertEqual(send(stream_chunk(3, g, 902, 4, 5, b"ef", True, snap)),
                             (False, "chunk out of order"))  # 6 bytes, the last says 5
            self.assertEqual(send(stream_chunk(3, g, 903, 0, 0, b"abcd")), (True, ""))
            self.assertEqual(send(stream_chunk(3, g, 903, 4, 99, b"ef")),
                             (False, "chunk out of order"))  # a total announced mid-way
            self.assertEqual(send(stream_chunk(3, g, 904, 0, 0, b"abcd")), (True, ""))
            self.assertEqual(send(stream_chunk(3, g, 904, 4, 0, b"ef", True, snap)),
                             (False, "last chunk is incomplete"))  # no total on the last
            self.assertEqual(send(stream_chunk(3, g, 905, 0, 0, b"abcd")), (True, ""))
            self.assertEqual(send(stream_chunk(3, g, 906, 4, 0, b"ef", True, snap)),
                             (False, "chunk out of order"))  # another transfer mid-way
            big = 100 << 30  # over --snapshot-recv-max-bytes (default 64 GiB): refused at once
            self.assertEqual(send(stream_chunk(3, g, 907, 0, big, b"abcd")),
                             (False, "snapshot of %d bytes is larger than this node accepts "
                              "(68719476736, --snapshot-recv-max-bytes)" % big))
            self.assertEqual(send(stream_chunk(3, g, 907, 4, big, b"ef")),
                             (False, "chunk out of order"))  # nothing of it was kept
        self.assertTrue(tried, "node 2 hosts no slot group")
        self.assertNothingMoved(before, rev, "snapshot chunks")

    def test_forged_raft_stream_refused(self):
        """Peer/RaftStream verifies every frame on its own (its proof over its batch, for this
        receiver and this method, and the batch's from_node against the proven node): a forged
        frame ends the stream with UNAUTHENTICATED and nothing it carries reaches a group, even
        behind a valid frame on the same stream; a stream of valid frames ends OK on half-close."""
        before, rev = self.terms(), self.revision(2)
        node2 = self.cluster.server(2)
        secret = b"not the cluster's secret!"
        for g in self.cluster.group_ids:
            beat = raft_message(g, RAFT_MSG_HEARTBEAT, 1, 2, HUGE_TERM, commit=HUGE_TERM)
            append = raft_message(g, RAFT_MSG_APPEND, 1, 2, HUGE_TERM, index=0, log_term=0,
                                  commit=1, entries=[(HUGE_TERM, 1)])
            batch = raft_batch(1, 2, [beat, append])
            own = raft_batch(3, 2, [beat, append])  # node 3's, carrying messages of node 1
            ch = node2.peer_channel
            forged = [
                (raft_frame(batch), RAFT_STREAM + " refused"),  # no proof at all
                (raft_frame(batch, h.peer_proof(RAFT_STREAM, batch, 1, 2, secret=secret)),
                 "does not match"),
                (raft_frame(batch, h.peer_proof(RAFT_STREAM, batch, 1, 3)), "receiving node"),
                # a proof of the unary method does not prove a stream frame
                (raft_frame(batch, h.peer_proof("/slotd.internal.v1.Peer/Raft", batch, 1, 2)),
                 RAFT_STREAM + " refused"),
                # a proof over another body
                (raft_frame(batch, h.peer_proof(RAFT_STREAM, own, 1, 2)),
                 RAFT_STREAM + " refused"),
                (raft_frame(batch, h.peer_proof(RAFT_STREAM, batch, 3, 2)),
                 "from_node 1 is not the calling node 3"),
            ]
            for frame, needle in forged:
                self.assertUnauthenticated(lambda: raft_stream(ch, [frame]), needle)
                # behind a valid frame of node 3 (whose messages the runtime drops)
                ok = raft_frame(own, h.peer_proof(RAFT_STREAM, own, 3, 2))
                self.assertUnauthenticated(lambda: raft_stream(ch, [ok, frame, ok]), needle)
            # Valid frames only: the stream ends OK with an empty RaftBatchAck.
            ok = raft_frame(own, h.peer_proof(RAFT_STREAM, own, 3, 2))
            self.assertEqual(raft_stream(ch, [ok, ok]), b"")
        self.assertNothingMoved(before, rev, "raftstream")

    def test_forged_watch_poll_refused(self):
        """Peer/WatchPoll reads a group's changes: without a proof, or with a proof of another
        secret, it answers UNAUTHENTICATED and nothing; with a node's proof it answers."""
        path = "/slotd.internal.v1.Peer/WatchPoll"
        node2 = self.cluster.server(2)
        g = [r.group_id for r in self.cluster.route().groups if 2 in r.voters][0]
        req = _u(1, g) + _u(3, 1) + _u(8, 4096)  # WatchPollRequest{group_id, from_now, max_bytes}
        self.assertUnauthenticated(lambda: h.raw_unary(node2.peer_channel, path, req),
                                   "has no slotd-peer-proof header")
        self.assertUnauthenticated(
            lambda: node2.peer_call(path, req, node=1, secret=b"not the cluster's secret!"),
            "does not match")
        raw = node2.peer_call(path, req, node=1)
        self.assertEqual(raw[:1], b"\x08")  # WatchPollResponse.through_index, > 0

    def test_forged_controller_command_refused(self):
        path = "/slotd.internal.v1.Peer/ControllerCommand"
        rev = self.revision(1)
        cmd = controller_command(json.dumps(
            {"op": "node_state", "node": 2, "state": "drained"}).encode())
        node1 = self.cluster.server(1)
        self.assertUnauthenticated(lambda: h.raw_unary(node1.peer_channel, path, cmd),
                                   "has no slotd-peer-proof header")
        self.assertUnauthenticated(
            lambda: node1.peer_call(path, cmd, node=2, secret=b"a guessed cluster secret"),
            "does not match")
        # One proof, sent twice: the second is a replay.
        bad = controller_command(b"{}")  # a valid proof of a command the controller refuses
        proof = h.peer_proof(path, bad, 2, 1)
        try:
            h.raw_unary(node1.peer_channel, path, bad, metadata=[(h.PROOF_HEADER, proof)])
        except grpc.RpcError as e:  # the controller refuses "{}", the proof itself was good
            self.assertNotEqual(e.code(), grpc.StatusCode.UNAUTHENTICATED, e.details())
        self.assertUnauthenticated(
            lambda: h.raw_unary(node1.peer_channel, path, bad, metadata=[(h.PROOF_HEADER, proof)]),
            "was already used (a replay)")
        # A proof far from this node's clock.
        old = h.peer_proof(path, cmd, 2, 1, wall_ms=int(time.time() * 1000) - 120000)
        self.assertUnauthenticated(
            lambda: h.raw_unary(node1.peer_channel, path, cmd, metadata=[(h.PROOF_HEADER, old)]),
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
            ({"op": "node_address", "id": 3, "address": "127.0.0.1:1",
              "client_address": "127.0.0.1:2"}, False, 2,
             "the addresses of node 3 sent by node 2"),
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

    def test_planes_are_separate(self):
        """Peer methods on the client port and client methods on the peer port answer
        UNIMPLEMENTED; a Forward (a node passing a client request on) needs a node's proof and a
        Metadata or Admin method. Nothing forged is stored, read back through another node."""
        for n in self.cluster.node_ids:
            server = self.cluster.server(n)
            for m in PEER_METHODS:
                path = "/slotd.internal.v1.Peer/" + m
                with self.assertRaises(grpc.RpcError) as ctx:  # even with a valid proof
                    h.raw_unary(server.channel, path, b"", metadata=[
                        (h.PROOF_HEADER, h.peer_proof(path, b"", 3 if n != 3 else 1, n))])
                self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNIMPLEMENTED, path)
            for path in ("/slotd.v1.Metadata/Read", "/slotd.v1.Admin/ClusterState",
                         "/grpc.health.v1.Health/Check"):
                with self.assertRaises(grpc.RpcError) as ctx:
                    h.raw_unary(server.peer_channel, path, b"")
                self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNIMPLEMENTED, path)
        key = h.unique_key("security/forward")
        put = h.pb.ProposeRequest(put=h.pb.PutCommand(key=key, value=b"forged"),
                                  no_forward=True).SerializeToString()
        fwd = forward_request("/slotd.v1.Metadata/Propose", put)
        node2 = self.cluster.server(2)
        path = "/slotd.internal.v1.Peer/Forward"
        self.assertUnauthenticated(lambda: h.raw_unary(node2.peer_channel, path, fwd),
                                   "has no slotd-peer-proof header")
        self.assertUnauthenticated(lambda: node2.peer_call(path, fwd, secret=b"x" * 32),
                                   "does not match")
        with self.assertRaises(grpc.RpcError) as ctx:
            node2.peer_call(path, forward_request("/slotd.internal.v1.Peer/Raft", b""), node=3)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("is not a slotd.v1.Metadata or slotd.v1.Admin method",
                      ctx.exception.details())
        self.assertFalse(h.get(self.cluster.stub(3), key).get.found)
        # From a node, the forward is served like a client call on node 2's client port (a
        # write there is answered NOT_LEADER unless node 2 leads the key's group: no_forward).
        get = h.pb.ReadRequest(get=h.pb.GetQuery(key=key)).SerializeToString()
        raw = node2.peer_call(path, forward_request("/slotd.v1.Metadata/Read", get), node=3)
        self.assertEqual(raw[:1], b"\n", raw)  # ForwardResponse.response (field 1)
        n, at = 0, 1
        for shift in range(0, 64, 7):
            n |= (raw[at] & 0x7F) << shift
            at += 1
            if not raw[at - 1] & 0x80:
                break
        answer = h.pb.ReadResponse.FromString(raw[at:at + n])
        self.assertEqual(answer.group_id, self.cluster.table[h.hash_slot(key)])
        self.assertFalse(answer.get.found)
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


# ---- users and roles (--auth 1) ---------------------------------------------------------------

ROOT_PASSWORD = "e2e root password, not for production"
UNAUTH = grpc.StatusCode.UNAUTHENTICATED
DENIED = grpc.StatusCode.PERMISSION_DENIED


def bearer(token):
    return (("authorization", "Bearer " + token),)


class AuthCluster(h.SlotdCluster):
    """A SlotdCluster whose route polls (start, wait_leaders) authenticate as root first."""

    root_token = None

    def route(self, via=None, timeout=h.RPC_TIMEOUT_S):
        via = via if via is not None else self.live_ids()[0]
        if self.root_token is None:
            admin = admin_pb2_grpc.AdminStub(self.server(via).channel)
            self.root_token = admin.Authenticate(admin_pb2.AuthenticateRequest(
                user="root", password=ROOT_PASSWORD), timeout=timeout).token
        return self.stub(via).RouteSnapshot(h.pb.RouteSnapshotRequest(), timeout=timeout,
                                            metadata=bearer(self.root_token))


class RbacTest(h.SlotdTestCase):
    """One 3-node cluster started with --auth 1 and --root-password-file (and the cluster secret
    the harness gives every multi-node cluster). Users: bob (role breader: read on key prefix
    "b/"), alice (role awriter: readwrite on "a/", write on kind "user"). Every refused call
    answers UNAUTHENTICATED or PERMISSION_DENIED naming what is missing, and the stored value,
    read back as root through another node, did not change."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._class_workdir = tempfile.mkdtemp(prefix="slotd-e2e-")
        cls._class_servers = []
        pw = os.path.join(cls._class_workdir, "root.password")
        with open(pw, "w") as f:
            f.write(ROOT_PASSWORD + "\n")
        cls.cluster = AuthCluster(cls._class_workdir, name="rbac", size=3,
                                  extra_args=["--auth", "1", "--root-password-file", pw])
        cls._class_servers.extend(cls.cluster.servers.values())
        try:
            cls.cluster.start()
        except BaseException:
            for server in cls.cluster.servers.values():
                server.kill()
            raise
        cls.root = bearer(cls.cluster.root_token)
        cls.rev = 0
        for op, name, perm in [(admin_pb2.ROLE_OP_ADD, "breader", None),
                               (admin_pb2.ROLE_OP_GRANT, "breader", ("key_prefix", "read", "b/")),
                               (admin_pb2.ROLE_OP_ADD, "awriter", None),
                               (admin_pb2.ROLE_OP_GRANT, "awriter", ("key_prefix", "readwrite",
                                                                     "a/")),
                               (admin_pb2.ROLE_OP_GRANT, "awriter", ("kind", "write", "user"))]:
            req = admin_pb2.RoleWriteRequest(op=op, name=name)
            if perm:
                req.permission.type, req.permission.access, req.permission.value = perm
            cls.rev = cls.admin(2).RoleWrite(req, timeout=h.RPC_TIMEOUT_S, metadata=cls.root).revision
        for user, password, role in [("bob", "bob password", "breader"),
                                     ("alice", "alice password", "awriter")]:
            cls.user_write(admin_pb2.USER_OP_ADD, user, password=password)
            cls.user_write(admin_pb2.USER_OP_GRANT_ROLE, user, role=role)
        cls.wait_revision(cls.rev)
        cls.bob = bearer(cls.login("bob", "bob password", via=3))
        cls.alice = bearer(cls.login("alice", "alice password", via=1))
        # values the refused calls must leave alone
        cls.a_key, cls.b_key = h.unique_key("a/rbac"), h.unique_key("b/rbac")
        for key in (cls.a_key, cls.b_key):
            cls.cluster.stub(1).Propose(h.pb.ProposeRequest(put=h.pb.PutCommand(
                key=key, value=b"root wrote this")), timeout=h.RPC_TIMEOUT_S, metadata=cls.root)

    @classmethod
    def admin(cls, node_id):
        return admin_pb2_grpc.AdminStub(cls.cluster.server(node_id).channel)

    @classmethod
    def user_write(cls, op, name, password="", role="", via=2):
        resp = cls.admin(via).UserWrite(admin_pb2.UserWriteRequest(
            op=op, name=name, password=password, role=role), timeout=h.RPC_TIMEOUT_S,
            metadata=cls.root)
        cls.rev = max(cls.rev, resp.revision)
        return resp

    @classmethod
    def wait_revision(cls, rev):
        """Every node holds the users and roles of controller revision rev or later."""
        for n in cls.cluster.node_ids:
            got = cls.admin(n).AuthList(admin_pb2.AuthListRequest(min_revision=rev),
                                        timeout=h.RPC_TIMEOUT_S, metadata=cls.root)
            assert got.enabled and got.revision >= rev, (n, got.revision, rev)

    @classmethod
    def login(cls, user, password, via=1):
        return cls.admin(via).Authenticate(admin_pb2.AuthenticateRequest(
            user=user, password=password), timeout=h.RPC_TIMEOUT_S).token

    def put(self, node_id, key, value, md):
        return self.cluster.stub(node_id).Propose(h.pb.ProposeRequest(
            put=h.pb.PutCommand(key=key, value=value)), timeout=h.RPC_TIMEOUT_S, metadata=md)

    def get(self, node_id, key, md):
        return self.cluster.stub(node_id).Read(h.pb.ReadRequest(get=h.pb.GetQuery(key=key)),
                                               timeout=h.RPC_TIMEOUT_S, metadata=md)

    def assertRefused(self, code, fn, needle=""):
        with self.assertRaises(grpc.RpcError) as ctx:
            fn()
        self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
        self.assertIn(needle, ctx.exception.details())
        return ctx.exception.details()

    def assertStored(self, key, value=b"root wrote this", via=3):
        got = self.get(via, key, self.root)
        self.assertTrue(got.get.found, key)
        self.assertEqual(got.get.value, value)

    def propose_stream(self, node_id, items, md):
        """items: [(id, key, value)] in one ProposeStream message; returns {id: result}."""
        req = h.pb.ProposeStreamRequest(items=[h.pb.ProposeStreamItem(
            id=i, request=h.pb.ProposeRequest(put=h.pb.PutCommand(key=k, value=v)))
            for i, k, v in items])
        out = {}
        for resp in self.cluster.stub(node_id).ProposeStream(iter([req]), timeout=h.RPC_TIMEOUT_S,
                                                             metadata=md):
            out.update({r.id: r for r in resp.results})
        return out

    def test_propose_stream_checked_per_message(self):
        """ProposeStream checks credentials like a unary Propose: without a token, or with a
        forged one, the stream ends UNAUTHENTICATED; a user without the grant gets
        PERMISSION_DENIED for that item while its allowed item commits. Nothing refused is
        stored."""
        fresh = h.unique_key("a/rbac-stream")
        for n in self.cluster.node_ids:
            for md, needle in [((), "no credentials"), (bearer("garbage"), "token: malformed")]:
                self.assertRefused(UNAUTH, lambda: self.propose_stream(
                    n, [(1, self.a_key, b"x"), (2, self.b_key, b"x")], md), needle)
        got = self.propose_stream(2, [(1, fresh, b"alice"), (2, self.b_key, b"alice")],
                                  self.alice)
        self.assertEqual(got[1].code, 0, got[1].message)
        self.assertEqual(got[2].code, grpc.StatusCode.PERMISSION_DENIED.value[0], got[2].message)
        got = self.propose_stream(3, [(7, self.b_key, b"bob")], self.bob)
        self.assertEqual(got[7].code, grpc.StatusCode.PERMISSION_DENIED.value[0], got[7].message)
        self.assertStored(self.a_key)
        self.assertStored(self.b_key)
        self.assertStored(fresh, b"alice")

    def test_no_token_unauthenticated(self):
        for n in self.cluster.node_ids:
            self.assertRefused(UNAUTH, lambda: self.put(n, self.a_key, b"x", ()),
                               "no credentials")
            self.assertRefused(UNAUTH, lambda: self.get(n, self.b_key, ()), "no credentials")
            self.assertRefused(UNAUTH, lambda: self.put(n, self.a_key, b"x", bearer("t1.root.1.9"
                                                                                 "99999999999999."
                                                                                 + "0" * 64)),
                               "signature does not match")
            self.assertRefused(UNAUTH, lambda: self.put(n, self.a_key, b"x", bearer("garbage")),
                               "token: malformed")
            # a request that does not decode learns nothing either: credentials come first
            self.assertRefused(UNAUTH, lambda: h.raw_unary(
                self.cluster.server(n).channel, "/slotd.v1.Metadata/Propose", b"\xff\xff\xff"),
                "no credentials")
            self.assertRefused(UNAUTH, lambda: self.admin(n).ClusterState(
                admin_pb2.ClusterStateRequest(), timeout=h.RPC_TIMEOUT_S), "no credentials")
            self.assertRefused(UNAUTH, lambda: self.admin(n).UserWrite(admin_pb2.UserWriteRequest(
                op=admin_pb2.USER_OP_ADD, name="mallory", password="x"),
                timeout=h.RPC_TIMEOUT_S), "no credentials")
        self.assertStored(self.a_key)
        self.assertStored(self.b_key, via=1)
        users = self.admin(3).AuthList(admin_pb2.AuthListRequest(), timeout=h.RPC_TIMEOUT_S,
                                       metadata=self.root).users
        self.assertNotIn("mallory", [u.name for u in users])

    def test_backup_needs_admin(self):
        """Admin/Backup streams every row and the controller's secrets: without credentials
        UNAUTHENTICATED, as bob (no admin) PERMISSION_DENIED, as root the whole file."""
        def backup(n, md):
            return list(self.admin(n).Backup(admin_pb2.BackupRequest(), timeout=30, metadata=md))
        for n in self.cluster.node_ids:
            self.assertRefused(UNAUTH, lambda: backup(n, ()), "no credentials")
            self.assertRefused(DENIED, lambda: backup(n, self.bob), "admin")
        chunks = backup(2, self.root)
        records = [c.record for c in chunks]
        self.assertEqual(records[0][0], 1)  # the header record
        self.assertEqual(records[0][16:24], b"SLOTDBK\n")
        self.assertEqual(records[-1][0], 6)  # the trailer
        self.assertEqual(chunks[-1].groups_done, chunks[-1].groups_total)
        self.assertStored(self.a_key)

    def test_elastic_admin_writes_need_admin(self):
        """AbortTask, RemoveNode, DemoteControllerVoter, SetBalance (issue 19) and SetBackupPlan
        (issue 21) change the cluster state: without credentials UNAUTHENTICATED, as bob (no
        admin) PERMISSION_DENIED, and the nodes, tasks, groups, backup plan and features stay as
        they were."""
        def state():
            st = json.loads(self.admin(1).ClusterState(
                admin_pb2.ClusterStateRequest(), timeout=h.RPC_TIMEOUT_S,
                metadata=self.root).state_json)
            return st["nodes"], st["tasks"], st["groups"], st.get("backup"), st.get("features")
        before = state()
        for n in self.cluster.node_ids:
            for call in (lambda md: self.admin(n).AbortTask(
                            admin_pb2.AbortTaskRequest(task_id=1), timeout=h.RPC_TIMEOUT_S,
                            metadata=md),
                         lambda md: self.admin(n).RemoveNode(
                            admin_pb2.RemoveNodeRequest(node_id=3), timeout=h.RPC_TIMEOUT_S,
                            metadata=md),
                         lambda md: self.admin(n).DemoteControllerVoter(
                            admin_pb2.DemoteControllerVoterRequest(node_id=1),
                            timeout=h.RPC_TIMEOUT_S, metadata=md),
                         lambda md: self.admin(n).SetBackupPlan(
                            admin_pb2.SetBackupPlanRequest(interval_s=60, destination="/tmp/b",
                                                           retention=2),
                            timeout=h.RPC_TIMEOUT_S, metadata=md),
                         lambda md: self.admin(n).SetBalance(
                            admin_pb2.SetBalanceRequest(enabled=False),
                            timeout=h.RPC_TIMEOUT_S, metadata=md)):
                self.assertRefused(UNAUTH, lambda: call(()), "no credentials")
                self.assertRefused(DENIED, lambda: call(self.bob), "admin needed")
        self.assertEqual(state(), before)

    def test_wrong_prefix_permission_denied(self):
        for n in self.cluster.node_ids:
            why = self.assertRefused(DENIED, lambda: self.put(n, self.b_key, b"bob", self.bob),
                                     'write on key "%s" needed' % self.b_key.decode())
            self.assertIn('user bob has read key_prefix "b/"', why)
            self.assertRefused(DENIED, lambda: self.put(n, self.a_key, b"bob", self.bob),
                               "user bob has")
            self.assertRefused(DENIED, lambda: self.get(n, self.b_key, self.alice),
                               'read on key "%s" needed' % self.b_key.decode())
            self.assertRefused(DENIED, lambda: self.cluster.stub(n).Propose(h.pb.ProposeRequest(
                create_channel=h.pb.CreateChannelCommand(channel_id="c1", channel_type=1)),
                timeout=h.RPC_TIMEOUT_S, metadata=self.alice), 'write on kind "channel" needed')
            self.assertRefused(DENIED, lambda: self.admin(n).ClusterState(
                admin_pb2.ClusterStateRequest(), timeout=h.RPC_TIMEOUT_S, metadata=self.bob),
                "admin needed; user bob has")
            self.assertRefused(DENIED, lambda: self.admin(n).UserWrite(admin_pb2.UserWriteRequest(
                op=admin_pb2.USER_OP_GRANT_ROLE, name="bob", role="root"),
                timeout=h.RPC_TIMEOUT_S, metadata=self.bob), "admin needed")
        self.assertStored(self.a_key)
        self.assertStored(self.b_key, via=2)
        bob = [u for u in self.admin(1).AuthList(admin_pb2.AuthListRequest(),
                                                  timeout=h.RPC_TIMEOUT_S,
                                                  metadata=self.root).users if u.name == "bob"]
        self.assertEqual(list(bob[0].roles), ["breader"])

    def test_watch_needs_read_on_its_prefix(self):
        """A watch is a read of every key it can return: bob (read on b/) may watch b/ and a key
        under it, alice (a/) may not; no credentials: UNAUTHENTICATED. A typed watch needs read on
        the kinds of its rows: bob (keys only) is refused, root is not."""
        def first(n, md, **req):
            call = self.cluster.stub(n).Watch(h.pb.WatchRequest(**req), timeout=10, metadata=md)
            try:
                return next(call)
            finally:
                call.cancel()
        for n in self.cluster.node_ids:
            self.assertRefused(UNAUTH, lambda: first(n, None, prefix=b"b/"), "no credentials")
            self.assertRefused(DENIED, lambda: first(n, self.alice, prefix=b"b/"),
                               'read on key "b/" needed')
            self.assertRefused(DENIED, lambda: first(n, self.bob, prefix=b""),
                               'read on key "" needed')
            self.assertTrue(first(n, self.bob, prefix=b"b/").created)
            self.assertTrue(first(n, self.bob, key=self.b_key).created)
            # a typed watch reads typed rows: read on their kinds, not on keys
            subs = h.pb.TypedWatch(kind=h.pb.TYPED_WATCH_KIND_SUBSCRIBERS, id="c1")
            self.assertRefused(DENIED, lambda: first(n, self.bob, typed=subs),
                               'read on kind "channel" needed')
            user = h.pb.TypedWatch(kind=h.pb.TYPED_WATCH_KIND_USER, id="u1")
            self.assertRefused(DENIED, lambda: first(n, self.bob, typed=user),
                               'read on kind "user" needed')
            self.assertTrue(first(n, self.root, typed=subs).created)

    def test_txn_checks_every_key(self):
        table = list(self.cluster.stub(1).RouteSnapshot(h.pb.RouteSnapshotRequest(),
                                                        timeout=h.RPC_TIMEOUT_S,
                                                        metadata=self.root).hash_slot_table)
        group_id = table[h.hash_slot(self.b_key)]
        a_key = h.key_in_group(table, group_id, "a/txn")
        txn = h.pb.ProposeRequest(txn=h.pb.TxnCommand(
            compares=[h.pb.TxnCompare(key=a_key, target=h.pb.TXN_TARGET_ABSENT)],
            success=[h.pb.TxnOp(put=h.pb.PutCommand(key=a_key, value=b"alice")),
                     h.pb.TxnOp(put=h.pb.PutCommand(key=self.b_key, value=b"alice"))]))
        for n in self.cluster.node_ids:
            # alice may write a/ but not b/; bob may read b/ but write nothing.
            self.assertRefused(DENIED, lambda: self.cluster.stub(n).Propose(
                txn, timeout=h.RPC_TIMEOUT_S, metadata=self.alice),
                'write on key "%s" needed' % self.b_key.decode())
            self.assertRefused(DENIED, lambda: self.cluster.stub(n).Propose(
                txn, timeout=h.RPC_TIMEOUT_S, metadata=self.bob),
                'read on key "%s" needed' % a_key.decode())
        self.assertStored(self.b_key)
        self.assertFalse(self.get(2, a_key, self.root).get.found)
        ok = self.cluster.stub(3).Propose(txn, timeout=h.RPC_TIMEOUT_S, metadata=self.root)
        self.assertTrue(ok.txn.succeeded)
        self.assertStored(self.b_key, b"alice", via=1)
        self.cluster.stub(1).Propose(h.pb.ProposeRequest(put=h.pb.PutCommand(
            key=self.b_key, value=b"root wrote this")), timeout=h.RPC_TIMEOUT_S, metadata=self.root)

    def test_lease_commands_need_the_lease_kind(self):
        """Lease grant, keep-alive and revoke need write on kind "lease": alice (keys a/ and
        kind user) is refused each, and the lease root granted keeps its key."""
        key = h.unique_key("a/lease")
        grant = h.pb.ProposeRequest(lease_grant=h.pb.LeaseGrantCommand(key=key, ttl_seconds=60))
        lease = self.cluster.stub(1).Propose(grant, timeout=h.RPC_TIMEOUT_S,
                                             metadata=self.root).lease_grant.id
        self.cluster.stub(1).Propose(h.pb.ProposeRequest(put=h.pb.PutCommand(
            key=key, value=b"leased", lease=lease)), timeout=h.RPC_TIMEOUT_S, metadata=self.root)
        for n in self.cluster.node_ids:
            for req in (grant,
                        h.pb.ProposeRequest(lease_keep_alive=h.pb.LeaseKeepAliveCommand(id=lease)),
                        h.pb.ProposeRequest(lease_revoke=h.pb.LeaseRevokeCommand(id=lease))):
                self.assertRefused(DENIED, lambda: self.cluster.stub(n).Propose(
                    req, timeout=h.RPC_TIMEOUT_S, metadata=self.alice), 'kind "lease"')
        self.assertStored(key, b"leased")
        kept = self.cluster.stub(2).Propose(h.pb.ProposeRequest(
            lease_keep_alive=h.pb.LeaseKeepAliveCommand(id=lease)), timeout=h.RPC_TIMEOUT_S,
            metadata=self.root).lease_keep_alive
        self.assertEqual(kept.keys, 1)

    def test_granted_ok(self):
        key = h.unique_key("a/granted")
        for n in self.cluster.node_ids:  # forwarded to the leader from the nodes that are not
            self.put(n, key, b"alice %d" % n, self.alice)
            self.assertEqual(self.get(n % 3 + 1, key, self.alice).get.value, b"alice %d" % n)
        self.assertStored(key, b"alice 3", via=1)
        self.assertEqual(self.get(2, self.b_key, self.bob).get.value, b"root wrote this")
        uid = "u%d" % int(time.time() * 1000000)
        self.cluster.stub(2).Propose(h.pb.ProposeRequest(create_user=h.pb.CreateUserCommand(
            user=h.pb.User(uid=uid, token="t"))), timeout=h.RPC_TIMEOUT_S, metadata=self.alice)

    def test_revoked_tokens_unauthenticated(self):
        self.user_write(admin_pb2.USER_OP_ADD, "carol", password="carol one")
        self.user_write(admin_pb2.USER_OP_GRANT_ROLE, "carol", role="awriter")
        self.user_write(admin_pb2.USER_OP_ADD, "dave", password="dave one")
        self.user_write(admin_pb2.USER_OP_GRANT_ROLE, "dave", role="awriter")
        self.wait_revision(self.rev)
        carol, dave = (bearer(self.login("carol", "carol one", via=2)),
                       bearer(self.login("dave", "dave one", via=3)))
        key = h.unique_key("a/revoked")
        self.put(1, key, b"carol", carol)
        self.put(3, key, b"dave", dave)
        self.user_write(admin_pb2.USER_OP_PASSWD, "carol", password="carol two")
        self.user_write(admin_pb2.USER_OP_DELETE, "dave")
        self.wait_revision(self.rev)
        for n in self.cluster.node_ids:
            self.assertRefused(UNAUTH, lambda: self.put(n, key, b"carol again", carol),
                               "user carol was changed")
            self.assertRefused(UNAUTH, lambda: self.put(n, key, b"dave again", dave),
                               "user dave was deleted")
        self.assertStored(key, b"dave", via=2)
        self.assertRefused(UNAUTH, lambda: self.login("carol", "carol one"), "wrong user or password")
        self.put(2, key, b"carol two", bearer(self.login("carol", "carol two", via=1)))
        self.assertStored(key, b"carol two", via=3)

    def test_wrong_password_five_times(self):
        for n in (1, 2, 3, 1, 2):
            t0 = time.monotonic()
            self.assertRefused(UNAUTH, lambda: self.login("bob", "not bob's password", via=n),
                               "wrong user or password")
            self.assertRefused(UNAUTH, lambda: self.login("nobody", "x", via=n),
                               "wrong user or password")
            self.assertLess(time.monotonic() - t0, 5.0)
        for n in self.cluster.node_ids:
            self.assertTrue(self.cluster.server(n).running())
            self.assertEqual(self.cluster.server(n).poll_serving(), (True, None))
        self.assertStored(self.b_key, via=1)
        self.assertEqual(self.get(3, self.b_key, bearer(self.login("bob", "bob password", via=2)))
                         .get.value, b"root wrote this")

    def test_no_secrets_in_cluster_state_or_logs(self):
        for n in self.cluster.node_ids:
            resp = self.admin(n).ClusterState(admin_pb2.ClusterStateRequest(),
                                              timeout=h.RPC_TIMEOUT_S, metadata=self.root)
            state = json.loads(resp.state_json)
            self.assertIn("bob", [u["name"] for u in state["auth"]["users"]])
            self.assertNotIn(b"argon2", resp.state_json)
            self.assertNotIn(b"token_key", resp.state_json)
            self.assertNotIn(b"password_hash", resp.state_json)
            log = self.cluster.server(n).log_text()
            self.assertNotIn("argon2", log)
            self.assertNotIn(ROOT_PASSWORD, log)
            self.assertIn("auth=on", log)

    def test_mirror_checks_too(self):
        """A node that joins later (a mirror: not a controller voter) copies the users and roles
        with the cluster state and checks every call the same way."""
        args = ["--node-id", "4", "--join", self.cluster.peer_addr(1), "--auth", "1"]
        mirror = h.SlotdServer(self._class_workdir, name="rbac-mirror", extra_args=args)
        self._class_servers.append(mirror)
        mirror.start()
        deadline = time.monotonic() + 15
        while True:
            try:
                got = admin_pb2_grpc.AdminStub(mirror.channel).AuthList(
                    admin_pb2.AuthListRequest(min_revision=self.rev), timeout=h.RPC_TIMEOUT_S,
                    metadata=self.root)
                break
            except grpc.RpcError as err:
                if time.monotonic() > deadline:
                    raise AssertionError("mirror: %s %s" % (err.code(), err.details()))
                time.sleep(0.1)
        self.assertIn("bob", [u.name for u in got.users])
        self.assertIn("mirrored", mirror.log_text())
        self.assertRefused(DENIED, lambda: mirror.stub.Propose(h.pb.ProposeRequest(
            put=h.pb.PutCommand(key=self.b_key, value=b"via mirror")), timeout=h.RPC_TIMEOUT_S,
            metadata=self.bob), 'user bob has read key_prefix "b/"')
        self.assertRefused(UNAUTH, lambda: h.put(mirror.stub, self.b_key, b"no token"),
                           "no credentials")
        key = h.unique_key("a/mirror")
        mirror.stub.Propose(h.pb.ProposeRequest(put=h.pb.PutCommand(key=key, value=b"m")),
                            timeout=h.RPC_TIMEOUT_S, metadata=self.alice)  # forwarded
        self.assertStored(key, b"m", via=1)
        self.assertStored(self.b_key, via=2)
        token = admin_pb2_grpc.AdminStub(mirror.channel).Authenticate(
            admin_pb2.AuthenticateRequest(user="bob", password="bob password"),
            timeout=h.RPC_TIMEOUT_S).token
        self.assertEqual(self.get(3, self.b_key, bearer(token)).get.value, b"root wrote this")

    def test_slotctl(self):
        slotctl = h.REPO / "build" / "bin" / "slotctl"
        if not slotctl.exists():
            self.skipTest("no slotctl binary")
        pw = os.path.join(self._class_workdir, "root.password")
        bobpw = os.path.join(self._class_workdir, "bob.password")
        with open(bobpw, "w") as f:
            f.write("bob password\n")
        base = [str(slotctl), "--endpoints", self.cluster.addr(2)]

        def run(*args):
            return subprocess.run(base + list(args), capture_output=True, text=True, timeout=30)
        out = run("--user", "root", "--password-file", pw, "user", "list")
        self.assertEqual(out.returncode, 0, out.stderr)
        self.assertIn("breader", out.stdout)
        out = run("--user", "bob", "--password-file", bobpw, "put", self.b_key.decode(), "x")
        self.assertNotEqual(out.returncode, 0)
        self.assertIn("PERMISSION_DENIED", out.stderr)
        out = run("put", self.b_key.decode(), "x")
        self.assertIn("UNAUTHENTICATED", out.stderr)
        self.assertStored(self.b_key)

    def test_help_and_refused_starts(self):
        out = subprocess.run([str(h.SLOTD_BIN), "--help"], capture_output=True, text=True,
                             timeout=10)
        self.assertIn("--auth", out.stdout + out.stderr)
        self.assertIn("--root-password-file", out.stdout + out.stderr)
        # several nodes, --auth, and nothing that proves a node: refused at start
        d = os.path.join(self._class_workdir, "refused-data")
        out = subprocess.run([str(h.SLOTD_BIN), "--listen", "127.0.0.1:%d" % h.free_port(),
                              "--data-dir", d, "--peers", "1=127.0.0.1:1,2=127.0.0.1:2",
                              "--auth", "1"], capture_output=True, text=True, timeout=10)
        self.assertEqual(out.returncode, 2)
        self.assertIn("--cluster-secret-file or --tls-client-auth 1", out.stderr)


class RbacGeneratedRootTest(h.SlotdTestCase):
    """--auth 1 without --root-password-file: root's password is printed once, and works."""

    def test_generated_root_password(self):
        server = self.new_server(extra_args=["--auth", "1"]).start()
        deadline = time.monotonic() + 10
        while not server.log_lines("root_password=") and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = server.log_lines("root_password=")
        self.assertEqual(len(lines), 1, lines)
        password = lines[0].split("root_password=")[1].split()[0]
        admin = admin_pb2_grpc.AdminStub(server.channel)
        token = admin.Authenticate(admin_pb2.AuthenticateRequest(user="root", password=password),
                                   timeout=h.RPC_TIMEOUT_S).token
        key = h.unique_key("generated")
        server.stub.Propose(h.pb.ProposeRequest(put=h.pb.PutCommand(key=key, value=b"v")),
                            timeout=h.RPC_TIMEOUT_S, metadata=bearer(token))
        with self.assertRaises(grpc.RpcError) as ctx:
            h.put(server.stub, key, b"no token")
        self.assertEqual(ctx.exception.code(), UNAUTH)
        # Its peer port is no way around the check: one node with --auth and no peer
        # authentication takes no Peer call, a forwarded write included.
        put = h.pb.ProposeRequest(put=h.pb.PutCommand(key=key, value=b"forwarded"),
                                  no_forward=True).SerializeToString()
        with self.assertRaises(grpc.RpcError) as ctx:
            h.raw_unary(server.peer_channel, "/slotd.internal.v1.Peer/Forward",
                        forward_request("/slotd.v1.Metadata/Propose", put))
        self.assertEqual(ctx.exception.code(), UNAUTH)
        self.assertIn("without peer authentication", ctx.exception.details())
        got = server.stub.Read(h.pb.ReadRequest(get=h.pb.GetQuery(key=key)),
                               timeout=h.RPC_TIMEOUT_S, metadata=bearer(token))
        self.assertEqual(got.get.value, b"v")


@unittest.skipIf(__import__("shutil").which("openssl") is None, "the openssl CLI is not installed")
class RbacCertificateTest(h.SlotdTestCase):
    """--auth 1 with --tls-client-auth 1: a verified client certificate whose CN is a user's name
    is that user, without a token; a CN that is no user is UNAUTHENTICATED."""

    def test_certificate_cn_is_the_user(self):
        import test_tls as t  # certificates made with openssl (test_tls.py)
        certdir = tempfile.mkdtemp(prefix="slotd-e2e-certs-")
        self.addCleanup(__import__("shutil").rmtree, certdir, True)
        certs = t.make_certs(certdir)
        if getattr(self, "_workdir", None) is None:
            self._workdir = tempfile.mkdtemp(prefix="slotd-e2e-")
        pw = os.path.join(self._workdir, "root.password")
        with open(pw, "w") as f:
            f.write(ROOT_PASSWORD)
        server = t.TlsServer(self._workdir, t.creds(certs, client="client"), name="rbac-mtls",
                             extra_args=t.tls_args(certs, client_auth=True)
                             + ["--auth", "1", "--root-password-file", pw])
        self._servers.append(server)
        server.start()
        admin = admin_pb2_grpc.AdminStub(server.channel)
        deadline = time.monotonic() + 10
        while True:  # auth_init applies right after the first election
            try:
                root = bearer(admin.Authenticate(admin_pb2.AuthenticateRequest(
                    user="root", password=ROOT_PASSWORD), timeout=h.RPC_TIMEOUT_S).token)
                break
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        key_a, key_b = h.unique_key("a/mtls"), h.unique_key("b/mtls")
        with self.assertRaises(grpc.RpcError) as ctx:
            h.put(server.stub, key_a, b"cert only")
        self.assertEqual(ctx.exception.code(), UNAUTH)
        self.assertIn('client certificate CN "slotd-test-client" is not a user',
                      ctx.exception.details())
        role = admin_pb2.RoleWriteRequest(op=admin_pb2.ROLE_OP_ADD, name="certrole")
        admin.RoleWrite(role, timeout=h.RPC_TIMEOUT_S, metadata=root)
        role = admin_pb2.RoleWriteRequest(op=admin_pb2.ROLE_OP_GRANT, name="certrole")
        role.permission.type, role.permission.access, role.permission.value = \
            "key_prefix", "readwrite", "a/"
        admin.RoleWrite(role, timeout=h.RPC_TIMEOUT_S, metadata=root)
        admin.UserWrite(admin_pb2.UserWriteRequest(op=admin_pb2.USER_OP_ADD,
                                                   name="slotd-test-client", password="unused"),
                        timeout=h.RPC_TIMEOUT_S, metadata=root)
        rev = admin.UserWrite(admin_pb2.UserWriteRequest(
            op=admin_pb2.USER_OP_GRANT_ROLE, name="slotd-test-client", role="certrole"),
            timeout=h.RPC_TIMEOUT_S, metadata=root).revision
        admin.AuthList(admin_pb2.AuthListRequest(min_revision=rev), timeout=h.RPC_TIMEOUT_S,
                       metadata=root)
        h.put(server.stub, key_a, b"cert only")  # no token: the certificate names the user
        self.assertEqual(h.get(server.stub, key_a).get.value, b"cert only")
        with self.assertRaises(grpc.RpcError) as ctx:
            h.put(server.stub, key_b, b"cert only")
        self.assertEqual(ctx.exception.code(), DENIED)
        self.assertIn('user slotd-test-client has readwrite key_prefix "a/"',
                      ctx.exception.details())
        got = server.stub.Read(h.pb.ReadRequest(get=h.pb.GetQuery(key=key_b)),
                               timeout=h.RPC_TIMEOUT_S, metadata=root)
        self.assertFalse(got.get.found)


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
