"""test_balance.py - the balancer (issue 19 item 1) on one 3 -> 5 node cluster (3 controller
voters with 8 groups, 2 data nodes joined later, every node --balance 1): Admin.SetBalance with a
stale expected_revision changes nothing; paused, the 2 joined nodes get no move while
ControllerStatus shows the plan it would carry out; resumed, within a bound every node holds
replicas within 1 of its weighted share (weights 100 and, for node 5, 50), no move is left and
client writes keep succeeding (bounded retries while leaders change). Then 5 -> 3 with the
balancer on: slotctl drain of nodes 5 and 4 under writes, no move onto a draining or drained
node."""
import json
import os
import subprocess
import tempfile
import threading
import time
import unittest

import grpc

import slotd_harness as h
import test_controller as tc
from slotd.v1 import admin_pb2

SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))
WAIT_S = 40
BALANCE_S = 120  # 6-8 moves, 4 at a time, each learner + catch-up + promote + remove
DRAIN_S = 90  # a drain moves its node's 2-5 replicas one at a time


class BalanceTest(h.SlotdTestCase):

    @classmethod
    def setUpClass(cls):
        cls._class_workdir = tempfile.mkdtemp(prefix="slotd-e2e-balance-")
        cls.nodes, peers = tc.five_nodes(cls._class_workdir)
        cls._class_servers = list(cls.nodes.values())
        for i in (1, 2, 3):
            cls.nodes[i].extra_args = ["--node-id", str(i), "--peers", peers,
                                       "--bootstrap-expect", "3", "--balance", "1",
                                       "--balance-max-moves", "4"]
        for i in (4, 5):
            cls.nodes[i].extra_args = ["--node-id", str(i), "--join", cls.nodes[1].peer_addr,
                                       "--balance", "1", "--weight", "100" if i == 4 else "50"]
        try:
            for i in (1, 2, 3):
                cls.nodes[i].launch()
            for i in (1, 2, 3):
                problem = cls.nodes[i]._wait_serving(WAIT_S)
                if problem:
                    raise AssertionError("%s: %s" % (cls.nodes[i].name, problem))
        except BaseException:
            for s in cls.nodes.values():
                s.kill()
            raise

    def state(self):
        return tc.cluster_state(self.nodes[1])[1]

    def admin(self, method, request, via=1):
        return tc.admin_call(self.nodes[via], method, request, admin_pb2.AdminWriteResponse)

    def balance_status(self, via=1):
        return tc.admin_call(self.nodes[via], "ControllerStatus",
                             admin_pb2.ControllerStatusRequest(),
                             admin_pb2.ControllerStatusResponse).balance

    def slotctl(self, *args, json_out=False, timeout=30):
        endpoints = ",".join(self.nodes[i].addr for i in sorted(self.nodes)
                             if self.nodes[i].running())
        cmd = [SLOTCTL_BIN, "--endpoints", endpoints] + (["--json"] if json_out else []) + list(args)
        r = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
        self.assertEqual(r.returncode, 0, r.stderr)
        return json.loads(r.stdout) if json_out else r.stdout

    def within_one(self, st):
        """{node: replicas} when every active node holds within 1 of its weighted share."""
        nodes = [n for n in st["nodes"] if n["join_state"] == "active"]
        held = {n["id"]: sum(n["id"] in g["desired_peers"] for g in st["groups"]) for n in nodes}
        total, wsum = sum(held.values()), sum(n["weight"] for n in nodes)
        for n in nodes:
            if abs(held[n["id"]] * wsum - total * n["weight"]) > wsum:
                return None
        return held

    def test_grow_3_to_5(self):
        t0 = time.monotonic()
        tc.wait_for("8 groups placed", lambda: len(self.state()["groups"]) == 8)
        # A stale expected_revision: ABORTED, nothing stored changes.
        before = self.state()
        with self.assertRaises(grpc.RpcError) as cm:
            self.admin("SetBalance", admin_pb2.SetBalanceRequest(
                enabled=False, expected_revision=before["revision"] + 5))
        self.assertEqual(cm.exception.code(), grpc.StatusCode.ABORTED)
        self.assertIn("stale expected_revision", cm.exception.details())
        after = self.state()
        self.assertEqual(after["revision"], before["revision"])
        self.assertFalse(after["features"].get("balance_paused", False))
        # Paused through node 2 (a follower relays it): the joined nodes get nothing.
        r = self.admin("SetBalance", admin_pb2.SetBalanceRequest(enabled=False), via=2)
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        again = self.admin("SetBalance", admin_pb2.SetBalanceRequest(enabled=False))
        self.assertEqual(again.outcome, admin_pb2.OUTCOME_NOOP)
        for i in (4, 5):
            self.nodes[i].launch()
        for i in (4, 5):
            self.assertIsNone(self.nodes[i]._wait_serving(WAIT_S))
        tc.wait_for("nodes 4 and 5 active", lambda: sum(
            n["join_state"] == "active" for n in self.state()["nodes"]) == 5)
        stop, failures, acked = threading.Event(), [], []

        def writer():
            i = 0
            while not stop.is_set():
                key = b"bal/%d" % i
                try:
                    h.put_retrying(self.nodes[1 + i % 3].stub, key, b"v%d" % i,
                                   request_id=b"bal-%d" % i)
                    acked.append(key)
                except grpc.RpcError as err:
                    failures.append((key, err.code()))
                i += 1
                time.sleep(0.02)

        w = threading.Thread(target=writer, daemon=True)
        w.start()
        try:
            b = tc.wait_for("paused status with a plan", lambda: (
                lambda s: s if s.paused and len(s.moves) > 0 else None)(self.balance_status()))
            self.assertTrue(b.enabled)
            self.assertFalse(b.balanced)
            self.assertEqual(b.total_replicas, 24)
            self.assertEqual(b.total_weight, 450)
            self.assertEqual({s.node: s.share_x10 for s in b.scores},
                             {1: 53, 2: 53, 3: 53, 4: 53, 5: 27})
            self.assertIn("share", b.moves[0].why)
            out = self.slotctl("balance", "status")
            print("\n$ slotctl balance status   # paused, 3 -> 5\n" + out)
            self.assertIn("paused cluster-wide", out)
            self.assertIn("plan: group ", out)
            self.assertIn("5      50     0        2.7    -2.7", out)
            j = self.slotctl("balance", "status", json_out=True)
            self.assertEqual(j["role"], "leader")
            self.assertTrue(j["paused"])
            self.assertEqual(len(j["moves"]), len(b.moves))
            time.sleep(3)  # three balancer periods: still no move
            st = self.state()
            self.assertEqual([t for t in st["tasks"] if t["kind"] == "replica_move"], [])
            self.assertIsNone(self.within_one(st))
            # Resumed: balanced within the bound, no move left, the plan empty.
            out = self.slotctl("balance", "on")
            self.assertIn("changed", out.lower())
            self.assertFalse(self.state()["features"].get("balance_paused", False))
            t1 = time.monotonic()
            held = tc.wait_for("every node within 1 of its share", lambda: (
                lambda st: self.within_one(st) if not [
                    t for t in st["tasks"] if t["status"] in ("pending", "running")] else None)(
                        self.state()), timeout=BALANCE_S, interval=0.5)
            took = time.monotonic() - t1
            self.assertGreaterEqual(held[4], 4)
            self.assertGreaterEqual(held[5], 2)
            st = self.state()
            moves = [t for t in st["tasks"] if t["kind"] == "replica_move"]
            self.assertTrue(all(t["status"] == "done" for t in moves), moves)
            self.assertGreaterEqual(len(moves), 6)
            b = self.balance_status(via=4)
            self.assertTrue(b.balanced)
            self.assertEqual(len(b.moves), 0)
            for g in st["groups"]:
                self.assertEqual(len(g["desired_peers"]), 3)
            # Then the preferred leaders spread over the 5 nodes (8 groups: 1 or 2 each), and
            # the groups' live leaders follow them (the preferred-leader convergence).
            t2 = time.monotonic()
            led = tc.wait_for("preferred leaders within 1 of each other", lambda: (
                lambda c: c if max(c.values()) - min(c.values()) <= 1 else None)(
                    {n: sum(g["preferred_leader"] == n for g in self.state()["groups"])
                     for n in range(1, 6)}), timeout=WAIT_S, interval=0.5)
            want = {g["id"]: g["preferred_leader"] for g in self.state()["groups"]}
            tc.wait_for("live leaders are the preferred ones", lambda: all(
                r.leader == want[r.group_id] for r in tc.route(self.nodes[1]).groups
                if r.group_id in want), timeout=WAIT_S, interval=0.5)
            leaders_took = time.monotonic() - t2
            self.assertEqual(sum(led.values()), 8)
            out = self.slotctl("balance", "status")
            print("$ slotctl balance status   # balanced\n" + out)
            self.assertIn("plan: no move (balanced", out)
        finally:
            stop.set()
            w.join(timeout=15)
        self.assertEqual(failures, [])
        self.assertGreater(len(acked), 20)
        for key in acked[-5:]:
            self.assertTrue(h.get(self.nodes[2].stub, key).get.value.startswith(b"v"))
        print("\n  balanced in %.1f s (%d moves), leaders %.1f s, test %.1f s" % (
            took, len(moves), leaders_took, time.monotonic() - t0))

    def test_shrink_5_to_3(self):
        """After test_grow_3_to_5, with the balancer still on and client writes running: slotctl
        drain of node 5, then node 4 (the real drain proof) makes each a tombstone; every replica
        move made meanwhile targets a node that is neither draining nor drained (5, then 4 and
        5); every group ends with 3 desired peers among nodes 1-3; writes never
        fail beyond bounded retries and every acknowledged one reads back."""
        t0 = time.monotonic()
        tc.wait_for("5 active nodes", lambda: sum(
            n["join_state"] == "active" for n in self.state()["nodes"]) == 5)
        first = max([t["id"] for t in self.state()["tasks"]] or [0])
        stop, failures, acked = threading.Event(), [], []

        def writer():
            i = 0
            while not stop.is_set():
                key = b"shrink/%d" % i
                try:
                    h.put_retrying(self.nodes[1 + i % 3].stub, key, b"s%d" % i,
                                   request_id=b"shrink-%d" % i)
                    acked.append(key)
                except grpc.RpcError as err:
                    failures.append((key, err.code()))
                i += 1
                time.sleep(0.02)

        w = threading.Thread(target=writer, daemon=True)
        w.start()
        try:
            marks = {}
            for victim in (5, 4):
                marks[victim] = max([t["id"] for t in self.state()["tasks"]] or [0])
                out = self.slotctl("drain", "--node", str(victim), "--wait", str(DRAIN_S),
                                   timeout=DRAIN_S + 10)
                self.assertIn("drain node %d" % victim, out)
                node = [n for n in self.state()["nodes"] if n["id"] == victim][0]
                self.assertEqual(node["join_state"], "removed")
        finally:
            stop.set()
            w.join(timeout=15)
        st = self.state()
        for g in st["groups"]:
            self.assertEqual(sorted(g["desired_peers"]), [1, 2, 3], g)
        moves = [t for t in st["tasks"] if t["kind"] == "replica_move" and t["id"] > first]
        self.assertTrue(moves)
        # From the drain of 5 on no move targets 5; from the drain of 4 on, only nodes 1-3
        # (while 5 drains, node 4 is still active and a valid target).
        self.assertEqual([t for t in moves if t["target"] == 5], [])
        self.assertEqual([t for t in moves if t["id"] > marks[4] and t["target"] not in (1, 2, 3)],
                         [])
        self.assertEqual(failures, [])
        self.assertGreater(len(acked), 20)
        for key in acked:
            self.assertTrue(h.get(self.nodes[2].stub, key).get.value.startswith(b"s"))
        out = self.slotctl("balance", "status")
        print("\n$ slotctl balance status   # shrunk 5 -> 3\n" + out)
        print("  drained 5 then 4 (%d replica moves), %d writes: %.1f s" % (
            len(moves), len(acked), time.monotonic() - t0))


if __name__ == "__main__":
    unittest.main()


ZONES = {1: "a", 2: "b", 3: "c", 4: "c"}
ZONE_S = 60  # 4 moves, 4 at a time, after the nodes' first reports carry their zones


class ZoneTest(h.SlotdTestCase):
    """--zone: 4 nodes in zones a, b, c, c with 8 groups of 3 replicas and the balancer on. The
    bootstrap placement ignores zones and gives groups 3, 4, 7 and 8 replicas on both nodes of
    zone c; once the nodes' own node_zone reports carry their zones into the replicated state
    (every node's ClusterState shows them), the balancer moves one of the two to the node of the
    zone the group lacks, within a bound: then no group has two replicas in one zone and nodes 1
    and 2 hold a replica of every group. A node_zone report about another node is refused where
    it is sent (Peer/ControllerCommand, FAILED_PRECONDITION) and changes nothing; a bad --zone
    stops slotd at start naming the flag and the rule."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(
            size=4, replicas=3, slot_groups=8,
            extra_args=["--balance", "1", "--balance-max-moves", "4"],
            node_args={i: ["--zone", z] for i, z in ZONES.items()})

    def state(self, via=1):
        return tc.cluster_state(self.cluster.server(via))[1]

    def test_replicas_spread_over_zones(self):
        deadline = time.monotonic() + ZONE_S
        while True:
            st = self.state()
            zones = {n["id"]: n.get("zone", "") for n in st["nodes"]}
            doubled = [g["id"] for g in st["groups"]
                       if len({zones[p] for p in g["desired_peers"]}) < len(g["desired_peers"])]
            running = [t for t in st.get("tasks", []) if t["status"] in ("pending", "running")]
            if zones == ZONES and not doubled and not running:
                break
            self.assertLess(time.monotonic(), deadline,
                            "zones %s, groups with two replicas in one zone %s, tasks %s"
                            % (zones, doubled, running))
            time.sleep(0.5)
        for g in st["groups"]:
            self.assertEqual(len(g["desired_peers"]), 3, g)
            self.assertIn(1, g["desired_peers"], g)
            self.assertIn(2, g["desired_peers"], g)
        for n in (2, 3, 4):  # the replicated state: every node has the zones
            self.assertEqual({x["id"]: x.get("zone", "") for x in self.state(n)["nodes"]}, ZONES)
        text = "\n".join(self.cluster.server(n).log_text() for n in self.cluster.node_ids)
        self.assertIn("both in zone c", text)

    def test_forged_zone_report_refused(self):
        import test_security as ts
        rev = self.state()["revision"]
        cmd = ts.controller_command(json.dumps({"op": "node_zone", "id": 3, "zone": "a"}).encode())
        with self.assertRaises(grpc.RpcError) as ctx:
            self.cluster.server(1).peer_call("/slotd.internal.v1.Peer/ControllerCommand", cmd,
                                             node=2)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("the zone of node 3 sent by node 2", ctx.exception.details())
        st = self.state()
        self.assertEqual([n.get("zone") for n in st["nodes"] if n["id"] == 3], ["c"])
        self.assertGreaterEqual(st["revision"], rev)

    def test_bad_zone_flag_refused(self):
        data = tempfile.mkdtemp(prefix="slotd-e2e-zone-")
        r = subprocess.run([str(h.SLOTD_BIN), "--zone", "Rack A", "--data-dir", data,
                            "--listen", "127.0.0.1:%d" % h.free_port()],
                           capture_output=True, text=True, timeout=30)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn('--zone: "Rack A" is not 1..32 bytes of [a-z0-9._-]', r.stderr)
        self.assertEqual(os.listdir(data), [])
