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


if __name__ == "__main__":
    unittest.main()
