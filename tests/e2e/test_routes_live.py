# test_routes_live.py - routes against live facts: a forward to a dead leader is a definite failure.
import os
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

ATTEMPTS = 20
ATTEMPT_TIMEOUT_S = 3.0


class RefusedForwardTest(h.SlotdTestCase):
    """Node F still routes a group to its leader L after L was killed (the third node is paused, so
    no new leader can be elected). F's forward meets a refused port: the caller is told the write
    was not sent (UNAVAILABLE, NO_LEADER, retryable), never UNKNOWN_OUTCOME, and indeed nothing
    of those writes is stored."""

    def test_refused_forward_is_definite(self):
        cluster = self.new_cluster(size=3)
        route = cluster.wait_leaders()
        group = route.groups[0]
        leader = group.leader
        follower, third = [n for n in cluster.node_ids if n != leader][:2]
        key = cluster.keys_by_group("refused")[group.group_id][0]
        first = h.put(cluster.stub(follower), key, b"before")  # forwarded to the leader
        cluster.pause(third)
        cluster.kill(leader)
        # Long enough for the follower's gRPC to see the killed leader's connection close (a
        # call written onto it before then may have arrived: UNKNOWN_OUTCOME would be right),
        # well inside the 1 s election timeout, so the follower still routes to the dead node.
        time.sleep(0.2)
        answers = []
        for i in range(ATTEMPTS):
            try:
                h.put(cluster.stub(follower), key, b"after-%d" % i, timeout=ATTEMPT_TIMEOUT_S)
                answers.append(("OK", None, ""))
            except grpc.RpcError as err:
                detail = h.error_detail(err)
                answers.append((err.code().name, detail.code if detail else None, err.details()))
            time.sleep(0.05)
        for code, detail, text in answers:
            self.assertEqual((code, detail), ("UNAVAILABLE", pb.ERROR_CODE_NO_LEADER),
                             "answer %r of %r" % ((code, detail, text), answers))
        self.assertTrue(any("the request was not sent" in text for _, _, text in answers),
                        "no answer came from a refused forward: %r" % answers)

        # Nothing of the refused writes was applied: once a leader is back, the key holds the
        # value written before the kill, at the same version.
        cluster.resume(third)
        cluster.restart(leader)
        cluster.wait_leaders()
        deadline = time.monotonic() + h.RPC_TIMEOUT_S
        while True:
            try:
                got = h.get(cluster.stub(follower), key).get
                break
            except grpc.RpcError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)
        self.assertEqual((got.found, got.value, got.version),
                         (True, b"before", first.put.version))


ELECTION_TIMEOUT_S = 1.0  # --tick-ms 100 x --election-tick 10, the defaults
# A leader confirms itself at every GroupStatus poll (500 ms); a node drops one silent for two
# election timeouts, checked every tick. What the test allows on top: its own polling.
EXPIRY_BOUND_S = 2 * ELECTION_TIMEOUT_S + 0.5 + 0.5


def route_group(cluster, node_id, group_id):
    route = cluster.stub(node_id).RouteSnapshot(pb.RouteSnapshotRequest(), timeout=2)
    return [g for g in route.groups if g.group_id == group_id][0]


def route_leader(cluster, node_id, group_id):
    return route_group(cluster, node_id, group_id).leader


class ObservedLeaderExpiryTest(h.SlotdTestCase):
    """4 nodes, 3 replicas per group: node N hosts no replica of group G. G's leader stopped
    (SIGSTOP: its connections stay open, nothing is refused) together with a second replica, so
    no new leader can win: N drops the silent leader from its route within two election
    timeouts and answers G's writes UNAVAILABLE/NO_LEADER at once instead of waiting on it.
    Then G's leader killed with -9 while the others run: N routes to the new leader and its
    writes succeed within the same bound after the election."""

    def test_outsider_drops_a_silent_leader_then_follows_the_new_one(self):
        cluster = self.new_cluster(size=4, replicas=3)
        route = cluster.wait_leaders()
        group = route.groups[0]
        gid, leader = group.group_id, group.leader
        outsider = [n for n in cluster.node_ids if n not in group.voters][0]
        other = [v for v in group.voters if v != leader][0]
        key = cluster.keys_by_group("expiry")[gid][0]
        # N learns the leader from the peers' GroupStatus answers (polled every 500 ms)
        deadline = time.monotonic() + 10
        while route_leader(cluster, outsider, gid) != leader:
            self.assertLess(time.monotonic(), deadline, "node %d never routed group %d to %d"
                            % (outsider, gid, leader))
            time.sleep(0.1)
        h.put(cluster.stub(outsider), key, b"v0", timeout=5)  # forwarded to the leader

        # Intent and fact side by side: the outsider shows each replica's own last answer.
        g = route_group(cluster, outsider, gid)
        self.assertEqual(sorted(g.intended_voters), sorted(group.voters))
        self.assertEqual(list(g.intended_learners), [])
        self.assertEqual(sorted(g.voters), sorted(group.voters))  # reported by the group
        self.assertEqual([r.node_id for r in g.replicas], sorted(group.voters))
        for r in g.replicas:
            self.assertEqual((r.role, r.leader), ("voter", leader), r)
            self.assertGreater(r.applied_index, 0, r)
            self.assertLess(r.age_ms, 1500, r)  # answers every 500 ms
        # a node hosting the group shows its own replica as of its last route publication
        mine = [r for r in route_group(cluster, other, gid).replicas if r.node_id == other][0]
        self.assertEqual(mine.role, "voter")
        self.assertLess(mine.age_ms, 1000)

        cluster.pause(leader)
        cluster.pause(other)
        t0 = time.monotonic()
        while route_leader(cluster, outsider, gid) == leader:
            self.assertLess(time.monotonic() - t0, 10, "node %d still routes group %d to the "
                            "stopped node %d" % (outsider, gid, leader))
            time.sleep(0.1)
        dropped = time.monotonic() - t0
        self.assertLess(dropped, EXPIRY_BOUND_S)
        # the stopped replicas' answers age; the running one's stays fresh
        ages = {r.node_id: r.age_ms for r in route_group(cluster, outsider, gid).replicas}
        self.assertGreater(ages[leader], 1500, ages)
        self.assertGreater(ages[other], 1500, ages)
        third = [v for v in group.voters if v not in (leader, other)][0]
        self.assertLess(ages[third], 1500, ages)
        self.assertTrue(cluster.servers[outsider].log_lines(
            'msg="observed leader expired" group=%d leader=%d' % (gid, leader)))
        t1 = time.monotonic()
        with self.assertRaises(grpc.RpcError) as cm:
            h.put(cluster.stub(outsider), key, b"v1", timeout=5)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(h.error_detail(cm.exception).code, pb.ERROR_CODE_NO_LEADER)
        self.assertLess(time.monotonic() - t1, 1.0)  # answered, not waited out
        cluster.resume(other)
        cluster.resume(leader)
        cluster.wait_leaders()

        # kill -9 of the leader: the outsider follows the new leader and its writes succeed.
        leader = route_leader(cluster, outsider, gid) or cluster.wait_leaders().groups[0].leader
        cluster.kill(leader)
        t0 = time.monotonic()
        n = 0
        while True:
            n += 1
            try:
                h.put(cluster.stub(outsider), key, b"v2", request_id=b"expiry-v2", timeout=1)
                break
            except grpc.RpcError as err:
                self.assertIn(err.code(), (grpc.StatusCode.UNAVAILABLE,
                                           grpc.StatusCode.DEADLINE_EXCEEDED), err.details())
                self.assertLess(time.monotonic() - t0, 10, err.details())
                time.sleep(0.05)
        served = time.monotonic() - t0
        # With no leader known the outsider asks a voter and follows its NOT_LEADER hint, so the
        # write may be served before its own route names the new leader; the next poll does.
        t2 = time.monotonic()
        while route_leader(cluster, outsider, gid) in (0, leader):
            self.assertLess(time.monotonic() - t2, EXPIRY_BOUND_S, "route never named a new leader")
            time.sleep(0.05)
        new_leader = route_leader(cluster, outsider, gid)
        # an election (at most two timeouts with pre-vote) and one poll to learn of it
        self.assertLess(served, 2 * ELECTION_TIMEOUT_S + EXPIRY_BOUND_S)
        print("\n  silent leader dropped after %.2f s; after kill -9 node %d served group %d "
              "through node %d after %.2f s (%d attempts)" % (dropped, outsider, gid, new_leader,
                                                             served, n))
        got = h.get(cluster.stub(outsider), key).get
        self.assertEqual((got.found, got.value), (True, b"v2"))


if __name__ == "__main__":
    unittest.main()
