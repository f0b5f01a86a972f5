# test_slotctl_cluster.py - slotctl's controller commands against a real 3-node cluster.
"""`slotctl cluster` (human tables and --json) compared with Admin.ClusterState and
RouteSnapshot fetched by Python; `transfer-leader` with --wait (success, and exit 7 when the
target node is paused so it cannot take over), its outcomes (CHANGED then NOOP) and errors
(stale --expected-revision exit 3, bad group or non-peer exit 5, usage exit 2); `join` and
`activate` (CHANGED, then NOOP on a repeat); endpoint failover past a dead first endpoint;
the exit code 4 when no endpoint answers; `status` (table and --json) compared with every
node's Admin.ClusterState, and with one node killed (its row an error, exit 4).

slotctl is ``$SLOTCTL_BIN`` when set, else ``slotctl`` next to the slotd binary the harness uses."""

import json
import os
import re
import subprocess
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd.v1 import admin_pb2  # noqa: E402

SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))
RUN_TIMEOUT_S = 40.0
WAIT_S = 15          # transfer-leader --wait for a transfer that should happen (~1 s)
SHORT_WAIT_S = 2     # --wait for a transfer that cannot happen


def slotctl(endpoints, *args, json_out=False):
    cmd = [SLOTCTL_BIN, "--endpoints", endpoints, "--deadline-ms", "3000"]
    cmd += (["--json"] if json_out else []) + [str(a) for a in args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    return proc.returncode, proc.stdout, proc.stderr


def slotctl_json(endpoints, *args):
    code, out, err = slotctl(endpoints, *args, json_out=True)
    lines = out.strip().splitlines()
    if len(lines) != 1:
        raise AssertionError("want one JSON line, got %r (stderr %r)" % (out, err))
    return code, json.loads(lines[0]), err


def cluster_state(addr):
    with grpc.insecure_channel(addr) as ch:
        call = ch.unary_unary("/slotd.v1.Admin/ClusterState",
                              request_serializer=admin_pb2.ClusterStateRequest.SerializeToString,
                              response_deserializer=admin_pb2.ClusterStateResponse.FromString)
        return call(admin_pb2.ClusterStateRequest(), timeout=h.RPC_TIMEOUT_S)


def controller_status(addr):
    with grpc.insecure_channel(addr) as ch:
        call = ch.unary_unary(
            "/slotd.v1.Admin/ControllerStatus",
            request_serializer=admin_pb2.ControllerStatusRequest.SerializeToString,
            response_deserializer=admin_pb2.ControllerStatusResponse.FromString)
        return call(admin_pb2.ControllerStatusRequest(), timeout=h.RPC_TIMEOUT_S)


STATUS_TRIES = 10    # `status` rounds until no admin change lands between it and ClusterState


class SlotctlClusterTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)
        cls.ids = cls.cluster.node_ids
        cls.endpoints = ",".join(cls.cluster.addr(n) for n in cls.ids)

    def group_not_led_by(self, node_id):
        """A group whose desired peers include node_id and whose observed leader is another
        node; returns (group_id, leader)."""
        route = self.cluster.wait_leaders()
        state = json.loads(cluster_state(self.cluster.addr(1)).state_json)
        for g in state["groups"]:
            leader = h.SlotdCluster.leaders(route)[g["id"]]
            if node_id in g["desired_peers"] and leader not in (0, node_id):
                return g["id"], leader
        self.fail("no group with node %d as a peer led by another node" % node_id)

    def wait_led_by(self, group_id, node_id, timeout=WAIT_S):
        end = time.monotonic() + timeout
        while time.monotonic() < end:
            if h.SlotdCluster.leaders(self.cluster.route())[group_id] == node_id:
                return
            time.sleep(0.2)
        self.fail("group %d not led by node %d after %s s" % (group_id, node_id, timeout))

    # ---- cluster ---------------------------------------------------------------------------

    def test_cluster_json_matches_cluster_state(self):
        code, j, err = slotctl_json(self.endpoints, "cluster")
        self.assertEqual(code, 0, err)
        self.assertTrue(j["ok"])
        self.assertIn(j["served_by"], self.endpoints.split(","))
        want = cluster_state(j["served_by"])
        state = j["state"]
        self.assertGreaterEqual(want.revision, j["revision"])
        self.assertEqual(state["revision"], j["revision"])
        self.assertEqual(state["checksum"], j["checksum"])
        self.assertEqual(state["applied_raft_index"], j["applied_raft_index"])
        self.assertTrue(j["from_voter"])  # every node of this cluster is a controller voter
        self.assertEqual(sorted(n["id"] for n in state["nodes"]), self.ids)
        self.assertEqual(sorted(g["id"] for g in state["groups"]), self.cluster.group_ids)
        ranges = state["hash_slot_table"]["ranges"]
        self.assertEqual(ranges[0]["first"], 0)
        self.assertEqual(ranges[-1]["last"], h.HASH_SLOTS - 1)
        self.assertEqual(state["tasks"], [])
        observed = {o["group_id"]: o for o in j["observed_leaders"]}
        self.assertEqual(sorted(observed), self.cluster.group_ids)
        route = self.cluster.wait_leaders()
        for g in state["groups"]:
            o = observed[g["id"]]
            self.assertIn(o["leader"], g["desired_peers"])
            self.assertEqual(o["preferred_leader"], g["preferred_leader"])
            self.assertEqual(o["leader_is_preferred"], o["leader"] == g["preferred_leader"])
            self.assertEqual(o["leader_address"], self.cluster.addr(o["leader"]))
        self.assertGreaterEqual(j["route_revision"], 1)
        self.assertTrue(route.groups)

    def test_cluster_tables(self):
        code, out, err = slotctl(self.endpoints, "cluster")
        self.assertEqual(code, 0, err)
        header = out.splitlines()[0]
        self.assertRegex(header, r"^cluster \S+  revision \d+  checksum [0-9a-f]{8}  applied index "
                                 r"\d+  served by 127\.0\.0\.1:\d+ \(controller voter\)$")
        for section in ("NODES", "GROUPS", "HASH SLOTS (table version 1)", "TASKS"):
            self.assertIn("\n" + section + "\n", out)
        self.assertIn("TASKS\nnone", out)
        for n in self.ids:
            self.assertRegex(out, r"\n +%d  %s +%s +controller_voter,data  active +alive +100  "
                                  r"- +(\d+\.\d s ago|never)\n"
                             % (n, re.escape(self.cluster.addr(n)),
                                re.escape(self.cluster.peer_addr(n))))
        slot_rows = re.findall(r"\n(\d+)-(\d+) +(\d+)(?=\n)", out)
        self.assertEqual(sum(int(b) - int(a) + 1 for a, b, _ in slot_rows), h.HASH_SLOTS)
        group_rows = re.findall(r"\n +(\d+)  ([\d,]+) +(\d+) +(\d+) +(\S+) +(\S+)", out)
        self.assertEqual(sorted(int(r[0]) for r in group_rows), self.cluster.group_ids)

    def test_unreachable_exit_4(self):
        dead = "127.0.0.1:%d" % h.free_port()
        code, out, err = slotctl(dead, "--max-retries", "1", "cluster")
        self.assertEqual(code, 4, out + err)
        self.assertIn("cluster state: UNAVAILABLE", err)
        code, j, err = slotctl_json(dead, "cluster")
        self.assertEqual(j["exit_code"], 4)
        self.assertFalse(j["ok"])

    def test_dead_first_endpoint_skipped(self):
        dead = "127.0.0.1:%d" % h.free_port()
        code, j, err = slotctl_json(dead + "," + self.cluster.addr(2), "cluster")
        self.assertEqual(code, 0, err)
        self.assertEqual(j["served_by"], self.cluster.addr(2))

    # ---- status ----------------------------------------------------------------------------

    def status_settled(self, endpoints):
        """`status --json` on endpoints, repeated until every node's revision equals the one its
        Admin.ClusterState reports just before and just after (the controller may apply admin
        changes meanwhile), one node is the controller leader and slotctl finds no
        disagreement. Returns (code, json, err)."""
        last = None
        for _ in range(STATUS_TRIES):
            ids = [n for n in self.ids if self.cluster.addr(n) in endpoints.split(",")]
            before = {n: cluster_state(self.cluster.addr(n)).revision for n in ids}
            code, j, err = slotctl_json(endpoints, "status")
            after = {n: cluster_state(self.cluster.addr(n)).revision for n in ids}
            got = {r["node_id"]: r["revision"] for r in j["nodes"] if r["ok"]}
            roles = [r["role"] for r in j["nodes"] if r["ok"]]
            last = (before, got, after, roles, err)
            if before == got == after and roles.count("leader") == 1 and j["agree"]:
                return code, j, err
            time.sleep(0.5)
        self.fail("status never matched ClusterState (before, status, after, roles, stderr): "
                  "%r" % (last,))

    def test_status_every_node_then_one_killed(self):
        code, j, err = self.status_settled(self.endpoints)
        self.assertEqual((code, j["command"], j["ok"], j["exit_code"]), (0, "status", True, 0),
                         err)
        self.assertTrue(j["agree"], j)
        self.assertEqual(j["disagreements"], [])
        rows = j["nodes"]
        self.assertEqual([r["endpoint"] for r in rows], self.endpoints.split(","))
        self.assertEqual([r["node_id"] for r in rows], self.ids)
        leader = [r["node_id"] for r in rows if r["role"] == "leader"]
        self.assertEqual(len(leader), 1, rows)
        for r in rows:
            self.assertTrue(r["ok"], r)
            if r["node_id"] != leader[0]:
                self.assertIn(r["role"], ("follower", "mirror"))
            self.assertEqual(r["leader"], leader[0])  # every node names the same leader
            self.assertGreater(r["term"], 0)         # all three are controller voters
            # (commit_index comes from a view the node refreshes every tick, so it may trail
            # applied_index for a moment; not compared here)
            self.assertEqual(r["mirror_lag_ms"], -1)
            self.assertLessEqual(r["state_file_revision"], r["revision"])
            # the node's own answer, not a relayed one
            st = controller_status(r["endpoint"])
            self.assertEqual((st.node_id, st.leader), (r["node_id"], r["leader"]))

        # The table: one row per endpoint, then the agreement line (retried like the JSON: an
        # admin change landing mid-command shows as "revisions differ", which is correct).
        # (retried as well while an endpoint does not answer: a fresh connection can fail once
        # while the machine is loaded; every node answered the JSON call just before)
        for _ in range(STATUS_TRIES):
            code, out, err = slotctl(self.endpoints, "status")
            if code == 0 and "\nagree: " in out:
                break
            time.sleep(0.5)
        self.assertEqual(code, 0, out + err)
        lines = out.splitlines()
        self.assertRegex(lines[0], r"^ENDPOINT +NODE  ROLE +TERM +COMMIT +APPLIED +REVISION +"
                                   r"SNAPSHOT +FILE REV +FILE AGE +MIRROR LAG +LEADER$")
        agree = re.search(r"\n\nagree: revision (\d+), leader node (\d+)\n$", out)
        self.assertIsNotNone(agree, out)
        rev, lead = int(agree.group(1)), int(agree.group(2))
        self.assertEqual(lead, leader[0])
        for n, line in zip(self.ids, lines[1:1 + len(self.ids)]):
            self.assertRegex(line, r"^%s +%d  (leader|follower) +\d+ +\d+ +\d+ +%d +\d+ +(\d+|-) "
                                   r"+(\d+\.\d s|-) +- +%d$"
                             % (re.escape(self.cluster.addr(n)), n, rev, lead))

        # One node killed (a follower: the controller keeps its leader): its row is the error,
        # the others still answer, exit 4. Restarted after: the class shares the cluster.
        victim = [r["node_id"] for r in rows if r["role"] != "leader"][-1]
        victim_addr = self.cluster.addr(victim)
        self.assertIsNone(self.cluster.kill(victim))
        try:
            code, out, err = slotctl(self.endpoints, "status")
            self.assertEqual(code, 4, out + err)
            row = [ln for ln in out.splitlines() if ln.startswith(victim_addr + " ")]
            self.assertEqual(len(row), 1, out)
            self.assertRegex(row[0], r"^%s +-  error: controller status: UNAVAILABLE: .*\[%s, 1 "
                                     r"attempt\]$" % (re.escape(victim_addr),
                                                      re.escape(victim_addr)))
            self.assertIn("\n%d of %d endpoints answered\n" % (len(self.ids) - 1, len(self.ids)),
                          out)
            self.assertIn("slotctl status: 1 of %d endpoints did not answer: %s"
                          % (len(self.ids), victim_addr), err)
            code, j, err = slotctl_json(self.endpoints, "status")
            self.assertEqual((code, j["ok"], j["exit_code"]), (4, False, 4), err)
            by_addr = {r["endpoint"]: r for r in j["nodes"]}
            dead = by_addr[victim_addr]
            self.assertEqual((dead["ok"], dead["error"], dead["status"]["grpc_status"]),
                             (False, "unavailable", "UNAVAILABLE"))
            self.assertIn("controller status: UNAVAILABLE", dead["message"])
            self.assertNotIn("node_id", dead)
            for n in self.ids:
                if n != victim:
                    r = by_addr[self.cluster.addr(n)]
                    self.assertTrue(r["ok"], r)
                    self.assertEqual(r["node_id"], n)
        finally:
            self.cluster.restart(victim)
        self.cluster.wait_leaders()
        code, j, err = self.status_settled(self.endpoints)  # the restarted node answers again
        self.assertEqual((code, [r["node_id"] for r in j["nodes"]]), (0, self.ids), err)

    # ---- transfer-leader -------------------------------------------------------------------

    def test_transfer_leader_wait_then_noop(self):
        target = self.ids[-1]
        group_id, old = self.group_not_led_by(target)
        code, out, err = slotctl(self.endpoints, "transfer-leader", "--group", group_id, "--to",
                                 target, "--wait", WAIT_S)
        self.assertEqual(code, 0, out + err)
        self.assertRegex(out, r"^CHANGED  group %d preferred leader is node %d  revision \d+"
                              % (group_id, target))
        self.assertRegex(out, r"\nnode %d leads group %d \(term \d+\) after \d+\.\d s\n"
                              % (target, group_id))
        self.assertEqual(h.SlotdCluster.leaders(self.cluster.route())[group_id], target)
        code, j, err = slotctl_json(self.endpoints, "transfer-leader", "--group", group_id,
                                    "--to", target)
        self.assertEqual(code, 0, err)
        self.assertEqual(j["outcome"], "NOOP")
        self.assertIn("already", j["reason"])
        code, j, err = slotctl_json(self.endpoints, "cluster")
        o = [x for x in j["observed_leaders"] if x["group_id"] == group_id][0]
        self.assertEqual((o["leader"], o["preferred_leader"], o["leader_is_preferred"]),
                         (target, target, True))

    def test_transfer_leader_wait_timeout_exit_7(self):
        """The target is SIGSTOPped: the leader never hands over, --wait gives up with exit 7;
        meanwhile `cluster` marks the group observed != preferred."""
        target = self.ids[1]
        group_id, old = self.group_not_led_by(target)
        others = ",".join(self.cluster.addr(n) for n in self.ids if n != target)
        self.cluster.pause(target)
        try:
            start = time.monotonic()
            code, out, err = slotctl(others, "transfer-leader", "--group", group_id, "--to",
                                     target, "--wait", SHORT_WAIT_S)
            took = time.monotonic() - start
            self.assertEqual(code, 7, out + err)
            self.assertIn("CHANGED", out)
            self.assertIn("timed out after %d s: group %d is led by node" % (SHORT_WAIT_S,
                                                                               group_id), err)
            self.assertLess(took, SHORT_WAIT_S + 10)
            code, out, err = slotctl(others, "cluster")
            row = [ln for ln in out.splitlines() if re.match(r" +%d  " % group_id, ln)
                   and "observed" in ln]
            self.assertTrue(row, out)
            self.assertIn("* observed != preferred", row[0])
            code, j, err = slotctl_json(others, "transfer-leader", "--group", group_id, "--to",
                                        target, "--wait", 1)
            self.assertEqual((code, j["exit_code"], j["ok"], j["error"]), (7, 7, False, "timeout"))
        finally:
            self.cluster.resume(target)
        # Once resumed, the preferred leader takes over (restore: the class shares the cluster).
        self.wait_led_by(group_id, target, timeout=WAIT_S + 10)

    def test_transfer_leader_errors(self):
        code, j, err = slotctl_json(self.endpoints, "cluster")
        rev = j["revision"]
        g = j["state"]["groups"][0]
        code, out, err = slotctl(self.endpoints, "transfer-leader", "--group", g["id"], "--to",
                                 g["preferred_leader"], "--expected-revision", rev + 100)
        self.assertEqual(code, 3, out + err)
        self.assertIn("ABORTED", err)
        self.assertIn("stale expected_revision", err)
        code, j2, err = slotctl_json(self.endpoints, "transfer-leader", "--group", 99, "--to", 1)
        self.assertEqual(code, 5, err)
        self.assertEqual(j2["status"]["detail"]["field"], "group_id")
        self.assertEqual(slotctl_json(self.endpoints, "cluster")[1]["revision"], rev)
        for args in (["transfer-leader", "--group", "1"], ["transfer-leader", "--to", "1"],
                     ["transfer-leader", "--group", "0", "--to", "1"],
                     ["transfer-leader", "--group", "1", "--to", "1", "--wait", "0"],
                     ["cluster", "--group", "1"], ["join", "--node-id", "9"],
                     ["activate"], ["join", "--node-id", "9", "--address", "a:1", "--weight",
                                    "1001"]):
            code, out, err = slotctl(self.endpoints, *args)
            self.assertEqual(code, 2, "%s: %s" % (args, err))
            self.assertIn("usage: slotctl", err)

    # ---- join and activate -------------------------------------------------------------------

    def test_join_and_activate(self):
        node_id, addr = 40, "127.0.0.1:%d" % h.free_port()
        code, out, err = slotctl(self.endpoints, "join", "--node-id", node_id, "--address", addr,
                                 "--weight", 50)
        self.assertEqual(code, 0, out + err)
        self.assertRegex(out, r"^CHANGED  node %d at %s  revision \d+" % (node_id, re.escape(addr)))
        code, j, err = slotctl_json(self.endpoints, "join", "--node-id", node_id, "--address",
                                    addr, "--weight", 50)
        self.assertEqual((code, j["outcome"]), (0, "NOOP"), err)
        rev = j["revision"]
        code, out, err = slotctl(self.endpoints, "activate", "--node-id", node_id,
                                 "--expected-revision", rev + 5)
        self.assertEqual(code, 3, out + err)
        code, j, err = slotctl_json(self.endpoints, "activate", "--node-id", node_id,
                                    "--expected-revision", rev)
        self.assertEqual((code, j["outcome"], j["revision"]), (0, "CHANGED", rev + 1), err)
        code, j, err = slotctl_json(self.endpoints, "cluster")
        node = [n for n in j["state"]["nodes"] if n["id"] == node_id][0]
        self.assertEqual((node["address"], node["join_state"], node["weight"], node["roles"]),
                         (addr, "active", 50, ["data"]))


if __name__ == "__main__":
    unittest.main()
