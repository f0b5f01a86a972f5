"""test_controller.py - the controller group: 3 controller voters + 2 joined data nodes (mirrors),
placement over all five, mirrors converging to the voters' revision and checksum, the controller
leader killed, preferred-leader convergence, a voter restored from a controller snapshot."""
import json
import os
import time
import unittest

import grpc

import slotd_harness as h
from slotd.v1 import admin_pb2, metadata_pb2

ADMIN = "/slotd.v1.Admin/"
SLOT_GROUPS = 8
WAIT_S = 30


def admin_call(server, method, request, response_type, timeout=5.0):
    raw = h.raw_unary(server.channel, ADMIN + method, request.SerializeToString(), timeout=timeout)
    return response_type.FromString(raw)


def cluster_state(server):
    resp = admin_call(server, "ClusterState", admin_pb2.ClusterStateRequest(),
                      admin_pb2.ClusterStateResponse)
    return resp, json.loads(resp.state_json) if resp.state_json else None


def route(server):
    raw = h.raw_unary(server.channel, "/slotd.v1.Metadata/RouteSnapshot", b"")
    return metadata_pb2.RouteSnapshotResponse.FromString(raw)


def wait_for(what, fn, timeout=WAIT_S, interval=0.2):
    """Polls fn() until it returns a truthy value (returned) or timeout (AssertionError)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        try:
            last = fn()
            if last:
                return last
        except grpc.RpcError as err:
            last = err.code()
        time.sleep(interval)
    raise AssertionError("%s: not within %.0f s (last: %r)" % (what, timeout, last))


def five_nodes(workdir):
    """The 5-node layout's servers, not started: {1..5: SlotdServer} on client and peer ports
    chosen together, and the --peers value naming nodes 1-3 (the controller voters). The caller
    sets each node's extra_args."""
    ports = h.free_ports(10)
    nodes = {}
    for i in range(1, 6):
        nodes[i] = h.SlotdServer(workdir, name="n%d" % i, slot_groups=SLOT_GROUPS)
        nodes[i].port, nodes[i].peer_port = ports[i - 1], ports[4 + i]
    return nodes, ",".join("%d=%s" % (i, nodes[i].peer_addr) for i in (1, 2, 3))


class ControllerClusterCase(h.SlotdTestCase):
    """One 5-node cluster per test: nodes 1-3 bootstrap the controller (--peers, with
    --bootstrap-expect 5), nodes 4-5 start with --join and become data nodes (mirrors)."""

    def start_cluster(self, extra_args=()):
        import tempfile
        self._workdir = tempfile.mkdtemp(prefix="slotd-e2e-ctl-")
        self.nodes, peers = five_nodes(self._workdir)
        self._servers = list(self.nodes.values())
        for i in (1, 2, 3):
            self.nodes[i].extra_args = ["--node-id", str(i), "--peers", peers,
                                        "--bootstrap-expect", "5"] + list(extra_args)
        for i in (4, 5):
            self.nodes[i].extra_args = (["--node-id", str(i), "--join",
                                         self.nodes[1 + i % 3].peer_addr] + list(extra_args))
        for s in self.nodes.values():
            s.launch()
        for s in self.nodes.values():
            problem = s._wait_serving(WAIT_S)
            self.assertIsNone(problem, "%s: %s" % (s.name, problem))
        self.wait_client_addresses()

    def wait_client_addresses(self):
        """Until the state every running node holds gives each node its client address (each
        reports its own after the start: one CHANGED command per bootstrap voter)."""
        want = {i: s.addr for i, s in self.nodes.items()}

        def settled():
            views = [st for _, st in self.voter_states().values()]
            return views and all(
                {n["id"]: n.get("client_address") for n in st["nodes"]} == want for st in views)
        wait_for("every node's client address in every node's cluster state", settled)

    def voter_states(self):
        return {i: cluster_state(self.nodes[i]) for i in self.nodes if self.nodes[i].running()}

    def converged(self):
        """(revision, checksum) when every running node answers the same, else None."""
        seen = {(r.revision, r.checksum) for r, _ in self.voter_states().values()}
        return seen.pop() if len(seen) == 1 else None

    def controller_leader(self):
        # Only the controller leader accepts a write with no_forward set (others: NOT_LEADER).
        leaders = set()
        for i in (1, 2, 3):
            if not self.nodes[i].running():
                continue
            try:
                admin_call(self.nodes[i], "JoinNode",
                           admin_pb2.JoinNodeRequest(node_id=4, address=self.nodes[4].peer_addr,
                                                     no_forward=True),
                           admin_pb2.AdminWriteResponse, timeout=3)
                leaders.add(i)
            except grpc.RpcError:
                pass
        return leaders.pop() if len(leaders) == 1 else None


class ControllerTest(ControllerClusterCase):

    def test_placement_mirrors_and_files(self):
        self.start_cluster()
        rev, checksum = wait_for("every node holds the same state", self.converged)
        resp, state = cluster_state(self.nodes[4])
        self.assertFalse(resp.from_voter, "node 4 is a mirror")
        self.assertTrue(cluster_state(self.nodes[1])[0].from_voter)
        # Placement spans all five nodes and matches the controller's algorithm.
        want = h.controller_placement([1, 2, 3, 4, 5], SLOT_GROUPS, 3)
        hosts = set()
        for g in state["groups"]:
            self.assertEqual((g["desired_peers"], g["preferred_leader"]), want[g["id"]])
            hosts.update(g["desired_peers"])
        self.assertEqual(hosts, {1, 2, 3, 4, 5})
        roles = {n["id"]: n["roles"] for n in state["nodes"]}
        self.assertEqual(roles[1], ["controller_voter", "data"])
        self.assertEqual(roles[4], ["data"])
        self.assertTrue(all(n["join_state"] == "active" for n in state["nodes"]))
        # The route's revision is the controller revision; every node's file is byte-identical.
        self.assertEqual(route(self.nodes[5]).route_revision, rev)
        files = {i: (self.nodes[i].data_dir / "cluster-state.json").read_bytes()
                 for i in self.nodes}
        wait_for("files identical", lambda: len({(self.nodes[i].data_dir /
                                                  "cluster-state.json").read_bytes()
                                                 for i in self.nodes}) == 1)
        self.assertIn(b'"checksum":"%s"' % checksum.encode(), files[1])
        # NOT_MODIFIED when the caller already has it.
        nm = admin_call(self.nodes[2], "ClusterState",
                        admin_pb2.ClusterStateRequest(known_revision=rev, known_checksum=checksum),
                        admin_pb2.ClusterStateResponse)
        self.assertTrue(nm.not_modified)
        self.assertEqual(nm.state_json, b"")
        # Writes work through every node, joined ones included.
        for i in self.nodes:
            h.put(self.nodes[i].stub, h.unique_key(b"ctl-%d" % i), b"v")

    def test_admin_commands_outcomes_and_errors(self):
        self.start_cluster()
        wait_for("converged", self.converged)
        _, state = cluster_state(self.nodes[1])
        g1 = state["groups"][0]
        other = [p for p in g1["desired_peers"] if p != g1["preferred_leader"]][0]
        # Through a mirror (relayed to a voter, then to the controller leader).
        r = admin_call(self.nodes[5], "SetPreferredLeader",
                       admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=other),
                       admin_pb2.AdminWriteResponse)
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        self.assertEqual(r.revision, state["revision"] + 1)
        again = admin_call(self.nodes[2], "SetPreferredLeader",
                           admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=other),
                           admin_pb2.AdminWriteResponse)
        self.assertEqual(again.outcome, admin_pb2.OUTCOME_NOOP)
        self.assertEqual(again.revision, r.revision)
        # Stale compare-and-set: ABORTED, nothing changes.
        with self.assertRaises(grpc.RpcError) as cm:
            admin_call(self.nodes[3], "SetPreferredLeader",
                       admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=g1["preferred_leader"],
                                                           expected_revision=1),
                       admin_pb2.AdminWriteResponse)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.ABORTED)
        self.assertIn("stale expected_revision", cm.exception.details())
        # A node that is not a peer of the group: rejected by the controller.
        outsider = [n for n in (1, 2, 3, 4, 5) if n not in g1["desired_peers"]][0]
        with self.assertRaises(grpc.RpcError) as cm:
            admin_call(self.nodes[1], "SetPreferredLeader",
                       admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=outsider),
                       admin_pb2.AdminWriteResponse)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        # Bad fields are refused before anything is proposed, naming the field.
        for req, field in ((admin_pb2.SetPreferredLeaderRequest(group_id=0, node_id=1), "group_id"),
                           (admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=0), "node_id")):
            with self.assertRaises(grpc.RpcError) as cm:
                admin_call(self.nodes[1], "SetPreferredLeader", req, admin_pb2.AdminWriteResponse)
            self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertEqual(h.error_detail(cm.exception).field, field)
        with self.assertRaises(grpc.RpcError) as cm:
            admin_call(self.nodes[1], "JoinNode", admin_pb2.JoinNodeRequest(node_id=9, address=""),
                       admin_pb2.AdminWriteResponse)
        self.assertEqual(h.error_detail(cm.exception).field, "address")
        final = wait_for("converged", self.converged)
        self.assertEqual(final[0], r.revision, "only the one CHANGED command moved the revision")
        # The new preferred leader takes over group 1 (convergence on the group's leader).
        wait_for("group 1 led by its new preferred leader",
                 lambda: {g.group_id: g.leader for g in route(self.nodes[1]).groups}[1] == other)

    def test_controller_leader_killed(self):
        self.start_cluster()
        wait_for("converged", self.converged)
        leader = wait_for("a controller leader", self.controller_leader)
        self.nodes[leader].kill()
        # Slot writes keep working through the survivors (groups re-elect where needed).
        survivors = [i for i in self.nodes if i != leader]
        for k in range(20):
            key = h.unique_key(b"ctlkill-%d" % k)
            wait_for("write after the controller leader died",
                     lambda: h.put(self.nodes[survivors[k % 4]].stub, key, b"v") or True,
                     timeout=15)
        # Controller writes either fail cleanly (UNAVAILABLE) or succeed once a new leader exists.
        codes = set()

        def controller_write():
            try:
                return admin_call(self.nodes[survivors[0]], "JoinNode",
                                  admin_pb2.JoinNodeRequest(node_id=4, address=self.nodes[4].peer_addr),
                                  admin_pb2.AdminWriteResponse, timeout=3)
            except grpc.RpcError as err:
                codes.add(err.code())
                return None
        r = wait_for("a controller write after re-election", controller_write, timeout=20)
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_NOOP)
        self.assertTrue(codes <= {grpc.StatusCode.UNAVAILABLE}, codes)
        new_leader = wait_for("a new controller leader", self.controller_leader)
        self.assertNotEqual(new_leader, leader)
        self.nodes[leader].start()
        wait_for("converged after the old leader restarted", self.converged)

    def test_preferred_leaders_converge_and_down_target_left_alone(self):
        self.start_cluster()
        wait_for("converged", self.converged)
        _, state = cluster_state(self.nodes[1])
        preferred = {g["id"]: g["preferred_leader"] for g in state["groups"]}
        wait_for("leaders = preferred", lambda: {g.group_id: g.leader
                                                 for g in route(self.nodes[1]).groups} == preferred)
        victim = 4
        led = sorted(g for g, p in preferred.items() if p == victim)
        self.assertTrue(led)
        self.nodes[victim].kill()
        wait_for("other leaders for the victim's groups",
                 lambda: all(g.leader not in (0, victim) for g in route(self.nodes[1]).groups
                             if g.group_id in led))
        # Down: nothing moves to it, and no other candidate is chosen over the current leaders.
        before = {g.group_id: g.leader for g in route(self.nodes[1]).groups}
        time.sleep(3)
        after = {g.group_id: g.leader for g in route(self.nodes[1]).groups}
        self.assertEqual(before, after)
        # Liveness: without reports for one TTL (10 s) the controller marks the node suspect;
        # health reports alone never move the revision, the status change does (once).
        rev_before = cluster_state(self.nodes[1])[1]["revision"]

        def status(node):
            st = cluster_state(self.nodes[1])[1]
            return {n["id"]: n["status"] for n in st["nodes"]}[node], st["revision"]
        wait_for("node 4 suspect", lambda: status(victim)[0] == "suspect", timeout=25)
        self.assertEqual(status(victim)[1], rev_before + 1)
        self.nodes[victim].start()
        wait_for("node 4 alive again", lambda: status(victim)[0] == "alive", timeout=15)
        wait_for("leaders = preferred after the restart",
                 lambda: {g.group_id: g.leader for g in route(self.nodes[1]).groups} == preferred,
                 timeout=40)
        moved = sum(1 for i in self.nodes for _ in
                    self.nodes[i].log_lines("moving leadership to the preferred leader"))
        self.assertGreaterEqual(moved, len(led))

    def test_voter_restores_from_a_snapshot_and_a_mirror_refills_its_file(self):
        # (Restarts with a deleted, older or torn file: test_controller_recovery.py.)
        self.start_cluster(extra_args=["--compact-entries", "10", "--compact-tail", "2"])
        rev, _ = wait_for("converged", self.converged)
        # 1. A voter down while the controller log compacts: it restores from a snapshot.
        self.nodes[2].kill()
        self.toggle_preferred(14)
        self.nodes[2].start()
        rev2, _ = wait_for("the voter restored from a snapshot", self.converged)
        self.assertEqual(rev2, rev + 14)
        self.assertTrue(self.nodes[2].log_lines('msg="snapshot installed" node=2 group=0 '),
                        "node 2 restored the controller from a snapshot")
        # 2. A mirror whose file is deleted gets it back.
        self.nodes[5].stop()
        os.remove(self.nodes[5].data_dir / "cluster-state.json")
        self.nodes[5].start()
        wait_for("the mirror copied the state again", self.converged)

    def toggle_preferred(self, times):
        _, state = cluster_state(self.nodes[1])
        g = state["groups"][0]
        peers = g["desired_peers"]
        current = g["preferred_leader"]
        for k in range(times):
            nxt = peers[(peers.index(current) + 1) % len(peers)]
            r = wait_for("set preferred leader", lambda: admin_call(
                self.nodes[1], "SetPreferredLeader",
                admin_pb2.SetPreferredLeaderRequest(group_id=1, node_id=nxt),
                admin_pb2.AdminWriteResponse))
            self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
            current = nxt


if __name__ == "__main__":
    unittest.main()
