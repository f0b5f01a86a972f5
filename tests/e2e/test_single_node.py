# test_single_node.py - one slotd process: health, route, Propose/Read semantics, dedupe, bad input.
import os
import random
import subprocess
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

SEED = h.SEED
CONSISTENCIES = (pb.CONSISTENCY_LINEARIZABLE, pb.CONSISTENCY_LEADER_LOCAL, pb.CONSISTENCY_LOCAL)
INVALID = grpc.StatusCode.INVALID_ARGUMENT
IF = pb.ERROR_CODE_INVALID_FIELD


def _encode_varint(n):
    out = bytearray()
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _len_field(field_number, payload):
    return _encode_varint(field_number << 3 | 2) + _encode_varint(len(payload)) + payload


def check_route_shape(test, route, slot_groups):
    """Asserts everything the brief says about a fresh single-node route with slot_groups groups."""
    table = list(route.hash_slot_table)
    test.assertEqual(len(table), h.HASH_SLOTS)
    test.assertEqual(table, sorted(table), "hash-slot table is not non-decreasing")
    test.assertEqual(set(table), set(range(1, slot_groups + 1)))
    sizes = [table.count(g) for g in range(1, slot_groups + 1)]
    test.assertLessEqual(max(sizes) - min(sizes), 1, "range sizes %s" % sizes)
    test.assertEqual(table, h.expected_hash_slot_table(slot_groups),
                     "the first 256 %% G groups must own one extra hash slot; sizes %s" % sizes)
    groups = {g.group_id: g for g in route.groups}
    test.assertEqual(sorted(groups), list(range(1, slot_groups + 1)))
    for group_id, group in groups.items():
        test.assertEqual(list(group.voters), [1], "group %d voters" % group_id)
        test.assertEqual(group.leader, 1, "group %d leader" % group_id)
        test.assertGreaterEqual(group.leader_term, 1, "group %d leader_term" % group_id)
    return table


def check_health(test, server):
    resp = server.health.Check(h.health_pb2.HealthCheckRequest(service=""), timeout=5)
    test.assertEqual(resp.status, h.health_pb2.HealthCheckResponse.SERVING)
    live = server.health.Check(h.health_pb2.HealthCheckRequest(service="liveness"), timeout=5)
    test.assertEqual(live.status, h.health_pb2.HealthCheckResponse.SERVING)
    # The health protocol: an unknown service name is NOT_FOUND.
    with test.assertRaises(grpc.RpcError) as ctx:
        server.health.Check(h.health_pb2.HealthCheckRequest(service="no.such.Service"), timeout=5)
    test.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)
    stream = server.health.Watch(h.health_pb2.HealthCheckRequest(service=""), timeout=5)
    try:
        first = next(stream)
        test.assertEqual(first.status, h.health_pb2.HealthCheckResponse.SERVING)
    finally:
        stream.cancel()


class SingleNodeTest(h.SlotdTestCase):
    """Default flags (8 slot groups), one server for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.stub = cls.server.stub
        cls.table = list(cls.server.route().hash_slot_table)
        # Sentinels: one key per group, written before any bad input; every bad-input test
        # shows they read back unchanged.
        cls.rng = random.Random(SEED)
        cls.sentinels = {}
        for group_id in sorted(set(cls.table)):
            key = h.key_in_group(cls.table, group_id, "sentinel", cls.rng)
            resp = h.put(cls.stub, key, b"sentinel value %d" % group_id)
            cls.sentinels[key] = (b"sentinel value %d" % group_id, resp.put.version)

    def setUp(self):
        self.rng = random.Random("%d/%s" % (SEED, self.id()))

    def key(self, tag="k"):
        return h.unique_key("%s/%s" % (self._testMethodName, tag), self.rng)

    def rid(self):
        return b"rid-%016x" % self.rng.getrandbits(64)

    def assertStoredUnchanged(self, absent_keys=()):
        """Every sentinel reads back (LINEARIZABLE) with its value and version; absent_keys stay absent."""
        for key, (value, version) in self.sentinels.items():
            got = h.get(self.stub, key).get
            self.assertTrue(got.found, "sentinel %r lost" % key)
            self.assertEqual((got.value, got.version), (value, version), "sentinel %r changed" % key)
        for key in absent_keys:
            if 1 <= len(key) <= h.KEY_BYTES_MAX:
                self.assertFalse(h.get(self.stub, key).get.found, "rejected write %r stored" % key)

    # ---- health and route --------------------------------------------------------------------

    def test_health_serving(self):
        check_health(self, self.server)

    def test_route_snapshot_default_eight_groups(self):
        check_route_shape(self, self.server.route(), 8)

    def test_propose_and_read_group_follow_route(self):
        seen = set()
        for i in range(200):
            key = h.unique_key(b"route/%d" % i, self.rng)
            want = self.table[h.hash_slot(key)]
            resp = h.put(self.stub, key, b"v")
            self.assertEqual(resp.group_id, want, "key %r slot %d" % (key, h.hash_slot(key)))
            self.assertEqual(h.get(self.stub, key).group_id, want)
            seen.add(want)
        self.assertEqual(seen, set(self.table), "200 random keys should reach every group")

    # ---- Propose / Read semantics ------------------------------------------------------------

    def test_put_then_get_at_every_consistency(self):
        key = self.key()
        first = h.put(self.stub, key, b"one")
        self.assertEqual(first.WhichOneof("result"), "put")
        self.assertEqual(first.put.version, first.applied_index)
        self.assertEqual(first.put.prev_version, 0)
        self.assertGreaterEqual(first.term, 1)
        self.assertFalse(first.deduplicated)
        self.assertEqual(first.group_id, self.table[h.hash_slot(key)])
        for consistency in CONSISTENCIES:
            resp = h.get(self.stub, key, consistency)
            name = pb.Consistency.Name(consistency)
            self.assertEqual(resp.WhichOneof("result"), "get", name)
            self.assertTrue(resp.get.found, name)
            self.assertEqual(resp.get.value, b"one", name)
            self.assertEqual(resp.get.version, first.applied_index, name)
            self.assertEqual(resp.group_id, first.group_id, name)
            self.assertGreaterEqual(resp.applied_index, first.applied_index, name)
        second = h.put(self.stub, key, b"two")
        self.assertGreater(second.applied_index, first.applied_index)
        self.assertEqual(second.put.version, second.applied_index)
        self.assertEqual(second.put.prev_version, first.put.version)
        got = h.get(self.stub, key).get
        self.assertEqual((got.found, got.value, got.version), (True, b"two", second.applied_index))

    def test_get_absent_key(self):
        for consistency in CONSISTENCIES:
            resp = h.get(self.stub, self.key(), consistency)
            self.assertFalse(resp.get.found)
            self.assertEqual((resp.get.value, resp.get.version), (b"", 0))

    def test_empty_value_is_a_value(self):
        key = self.key()
        resp = h.put(self.stub, key, b"")
        got = h.get(self.stub, key).get
        self.assertEqual((got.found, got.value, got.version), (True, b"", resp.applied_index))

    def test_delete(self):
        key = self.key()
        written = h.put(self.stub, key, b"x")
        resp = h.delete(self.stub, key)
        self.assertEqual(resp.WhichOneof("result"), "delete")
        self.assertTrue(resp.delete.deleted)
        self.assertEqual(resp.delete.prev_version, written.put.version)
        self.assertGreater(resp.applied_index, written.applied_index)
        for consistency in CONSISTENCIES:
            self.assertFalse(h.get(self.stub, key, consistency).get.found)
        again = h.delete(self.stub, key)
        self.assertFalse(again.delete.deleted)
        self.assertEqual(again.delete.prev_version, 0)
        never = h.delete(self.stub, self.key("never"))
        self.assertFalse(never.delete.deleted)

    def test_compare_and_set(self):
        key = self.key()
        # Absent key, wrong expectation: fails, reports absent.
        miss = h.cas(self.stub, key, 5, b"no")
        self.assertEqual(miss.WhichOneof("result"), "compare_and_set")
        self.assertFalse(miss.compare_and_set.succeeded)
        self.assertEqual(miss.compare_and_set.version, 0)
        self.assertEqual(miss.compare_and_set.current_value, b"")
        self.assertFalse(h.get(self.stub, key).get.found)
        # expected_version 0 on an absent key creates it.
        created = h.cas(self.stub, key, 0, b"a")
        self.assertTrue(created.compare_and_set.succeeded)
        self.assertEqual(created.compare_and_set.version, created.applied_index)
        got = h.get(self.stub, key).get
        self.assertEqual((got.found, got.value, got.version), (True, b"a", created.applied_index))
        # Wrong version (0 = "absent", and an old one) fails and reports the current state.
        for wrong in (0, created.applied_index - 1, created.applied_index + 1000):
            resp = h.cas(self.stub, key, wrong, b"b")
            self.assertFalse(resp.compare_and_set.succeeded, "expected_version %d" % wrong)
            self.assertEqual(resp.compare_and_set.current_value, b"a")
            self.assertEqual(resp.compare_and_set.version, created.applied_index)
        got = h.get(self.stub, key).get
        self.assertEqual((got.value, got.version), (b"a", created.applied_index))
        # Right version succeeds and the version increases.
        swapped = h.cas(self.stub, key, created.applied_index, b"b")
        self.assertTrue(swapped.compare_and_set.succeeded)
        self.assertGreater(swapped.compare_and_set.version, created.compare_and_set.version)
        self.assertEqual(swapped.compare_and_set.version, swapped.applied_index)
        got = h.get(self.stub, key).get
        self.assertEqual((got.value, got.version), (b"b", swapped.applied_index))
        # delete=true with a wrong version keeps the key; with the right version removes it.
        kept = h.cas(self.stub, key, created.applied_index, remove=True)
        self.assertFalse(kept.compare_and_set.succeeded)
        self.assertTrue(h.get(self.stub, key).get.found)
        removed = h.cas(self.stub, key, swapped.applied_index, remove=True)
        self.assertTrue(removed.compare_and_set.succeeded)
        self.assertEqual(removed.compare_and_set.version, 0)
        self.assertFalse(h.get(self.stub, key).get.found)
        # And a put afterwards starts from "absent".
        after = h.put(self.stub, key, b"c")
        self.assertEqual(after.put.prev_version, 0)

    # ---- Txn ---------------------------------------------------------------------------------

    def txn(self, compares=(), success=(), failure=(), timeout=h.RPC_TIMEOUT_S):
        req = pb.ProposeRequest(txn=pb.TxnCommand(compares=list(compares), success=list(success),
                                                  failure=list(failure)))
        return self.stub.Propose(req, timeout=timeout)

    def keys_in_one_group(self, n, tag):
        group_id = self.table[h.hash_slot(self.key(tag))]
        return group_id, [h.key_in_group(self.table, group_id, "%s/%s/%d" % (
            self._testMethodName, tag, i), self.rng) for i in range(n)]

    def test_txn_compare_then_branch(self):
        group_id, (a, b, c) = self.keys_in_one_group(3, "txn")
        first = h.put(self.stub, a, b"a1")
        VERSION, VALUE, EXISTS, ABSENT = (pb.TXN_TARGET_VERSION, pb.TXN_TARGET_VALUE,
                                          pb.TXN_TARGET_EXISTS, pb.TXN_TARGET_ABSENT)
        EQ = pb.TXN_COMPARE_OP_EQUAL
        # Every compare holds: the success ops run in order in one entry; a get sees the put
        # before it.
        ok = self.txn(
            compares=[pb.TxnCompare(key=a, target=VERSION, op=EQ, version=first.applied_index),
                      pb.TxnCompare(key=a, target=VALUE, op=EQ, value=b"a1"),
                      pb.TxnCompare(key=a, target=EXISTS), pb.TxnCompare(key=b, target=ABSENT)],
            success=[pb.TxnOp(put=pb.PutCommand(key=b, value=b"b1")),
                     pb.TxnOp(get=pb.GetQuery(key=b)),
                     pb.TxnOp(delete=pb.DeleteCommand(key=a)),
                     pb.TxnOp(get=pb.GetQuery(key=a))],
            failure=[pb.TxnOp(put=pb.PutCommand(key=c, value=b"never"))])
        self.assertEqual(ok.WhichOneof("result"), "txn")
        self.assertEqual(ok.group_id, group_id)
        self.assertTrue(ok.txn.succeeded)
        kinds = [r.WhichOneof("result") for r in ok.txn.results]
        self.assertEqual(kinds, ["put", "get", "delete", "get"])
        self.assertEqual((ok.txn.results[1].get.found, ok.txn.results[1].get.value,
                          ok.txn.results[1].get.version), (True, b"b1", ok.applied_index))
        self.assertFalse(ok.txn.results[3].get.found)
        got = h.get(self.stub, b).get
        self.assertEqual((got.value, got.version), (b"b1", ok.applied_index))
        self.assertFalse(h.get(self.stub, a).get.found)
        self.assertFalse(h.get(self.stub, c).get.found)
        # One compare fails (a is now absent): the failure ops run, the success ops do not.
        bad = self.txn(compares=[pb.TxnCompare(key=a, target=EXISTS),
                                 pb.TxnCompare(key=b, target=VALUE, op=pb.TXN_COMPARE_OP_LESS,
                                               value=b"b2")],
                       success=[pb.TxnOp(delete=pb.DeleteCommand(key=b))],
                       failure=[pb.TxnOp(put=pb.PutCommand(key=c, value=b"c1")),
                                pb.TxnOp(get=pb.GetQuery(key=b))])
        self.assertFalse(bad.txn.succeeded)
        self.assertEqual([r.WhichOneof("result") for r in bad.txn.results], ["put", "get"])
        self.assertEqual(bad.txn.results[1].get.value, b"b1")
        self.assertEqual(h.get(self.stub, c).get.value, b"c1")
        self.assertEqual(h.get(self.stub, b).get.version, ok.applied_index)
        self.assertStoredUnchanged()

    def test_txn_across_groups_refused(self):
        ga, (a,) = self.keys_in_one_group(1, "a")
        gb = next(g for g in sorted(set(self.table)) if g != ga)
        b = h.key_in_group(self.table, gb, "%s/b" % self._testMethodName, self.rng)
        h.put(self.stub, a, b"a0")
        ops = [pb.TxnOp(put=pb.PutCommand(key=a, value=b"a1")),
               pb.TxnOp(put=pb.PutCommand(key=b, value=b"b1"))]
        self.assertRpcError(lambda: self.txn(success=ops), INVALID, IF, "txn.success[1].put.key")
        self.assertEqual(h.get(self.stub, a).get.value, b"a0")
        self.assertStoredUnchanged(absent_keys=[b])

    def test_txn_bad_input(self):
        _, (a, b) = self.keys_in_one_group(2, "bad")
        put_b = pb.TxnOp(put=pb.PutCommand(key=b, value=b"x"))
        cases = [
            (dict(), "txn", None),
            (dict(compares=[pb.TxnCompare(key=a, target=99)], success=[put_b]),
             "txn.compares[0].target", None),
            (dict(compares=[pb.TxnCompare(key=a, target=pb.TXN_TARGET_VERSION)],
                  success=[put_b]), "txn.compares[0].op", None),
            (dict(compares=[pb.TxnCompare(key=a, target=pb.TXN_TARGET_EXISTS,
                                          op=pb.TXN_COMPARE_OP_EQUAL)], success=[put_b]),
             "txn.compares[0].op", None),
            (dict(compares=[pb.TxnCompare(key=b"", target=pb.TXN_TARGET_EXISTS)],
                  success=[put_b]), "txn.compares[0].key", h.KEY_BYTES_MAX),
            (dict(compares=[pb.TxnCompare(key=a, target=pb.TXN_TARGET_EXISTS)] * 17,
                  success=[put_b]), "txn.compares", 16),
            (dict(success=[put_b] * 65), "txn.success", 64),
            (dict(success=[put_b, pb.TxnOp()]), "txn.success[1]", None),
            (dict(failure=[pb.TxnOp(put=pb.PutCommand(key=b, value=b"v" * (h.VALUE_BYTES_MAX
                                                                             + 1)))]),
             "txn.failure[0].put.value", h.VALUE_BYTES_MAX),
            (dict(success=[pb.TxnOp(put=pb.PutCommand(key=b, value=b"v" * (600 << 10)))] * 2),
             "txn", 1 << 20),
        ]
        for kwargs, field, limit in cases:
            self.assertRpcError(lambda: self.txn(**kwargs), INVALID, IF, field, limit)
        self.assertStoredUnchanged(absent_keys=[a, b])

    def test_local_read_with_min_applied_index(self):
        key = self.key()
        last = None
        for i in range(5):
            last = h.put(self.stub, key, b"v%d" % i)
        resp = h.get(self.stub, key, pb.CONSISTENCY_LOCAL, min_applied_index=last.applied_index)
        self.assertGreaterEqual(resp.applied_index, last.applied_index)
        self.assertEqual((resp.get.found, resp.get.value, resp.get.version),
                         (True, b"v4", last.applied_index))

    def test_request_id_dedupe(self):
        key = self.key()
        rid = self.rid()
        first = h.put(self.stub, key, b"v1", request_id=rid)
        self.assertFalse(first.deduplicated)
        retry = h.put(self.stub, key, b"v1", request_id=rid)
        self.assertTrue(retry.deduplicated)
        self.assertEqual((retry.applied_index, retry.put.version, retry.put.prev_version,
                          retry.group_id),
                         (first.applied_index, first.put.version, first.put.prev_version,
                          first.group_id))
        # A retry carrying a different value still returns the first result and changes nothing.
        changed = h.put(self.stub, key, b"v2", request_id=rid)
        self.assertTrue(changed.deduplicated)
        self.assertEqual(changed.put.version, first.put.version)
        got = h.get(self.stub, key).get
        self.assertEqual((got.value, got.version), (b"v1", first.applied_index))
        # A different request id applies anew.
        other = h.put(self.stub, key, b"v3", request_id=rid + b"-other")
        self.assertFalse(other.deduplicated)
        self.assertGreater(other.applied_index, first.applied_index)
        self.assertEqual(other.put.prev_version, first.put.version)
        got = h.get(self.stub, key).get
        self.assertEqual((got.value, got.version), (b"v3", other.applied_index))
        # No request id never deduplicates.
        plain1 = h.put(self.stub, key, b"v4")
        plain2 = h.put(self.stub, key, b"v4")
        self.assertFalse(plain1.deduplicated or plain2.deduplicated)
        self.assertGreater(plain2.applied_index, plain1.applied_index)

    def test_request_id_dedupe_for_delete_and_cas(self):
        key = self.key()
        h.put(self.stub, key, b"x")
        rid = self.rid()
        first = h.delete(self.stub, key, request_id=rid)
        self.assertTrue(first.delete.deleted)
        retry = h.delete(self.stub, key, request_id=rid)
        self.assertTrue(retry.deduplicated)
        self.assertTrue(retry.delete.deleted, "the stored first result says deleted")
        self.assertEqual(retry.applied_index, first.applied_index)
        cmd = pb.CompareAndSetCommand(key=key, expected_version=0, value=b"c")
        rid2 = self.rid()
        made = self.stub.Propose(pb.ProposeRequest(request_id=rid2, compare_and_set=cmd), timeout=10)
        self.assertTrue(made.compare_and_set.succeeded)
        again = self.stub.Propose(pb.ProposeRequest(request_id=rid2, compare_and_set=cmd), timeout=10)
        self.assertTrue(again.deduplicated)
        self.assertTrue(again.compare_and_set.succeeded, "a fresh CAS would fail; the first wins")
        self.assertEqual(again.applied_index, made.applied_index)

    def test_64_concurrent_puts(self):
        keys = [self.key("c%d" % i) for i in range(64)]
        futures = [self.stub.Propose.future(
            pb.ProposeRequest(request_id=self.rid(), put=pb.PutCommand(key=k, value=b"v-" + k)),
            timeout=20) for k in keys]
        results = [f.result() for f in futures]
        indexes = {}
        for key, resp in zip(keys, results):
            self.assertEqual(resp.group_id, self.table[h.hash_slot(key)])
            self.assertEqual(resp.put.version, resp.applied_index)
            self.assertFalse(resp.deduplicated)
            indexes.setdefault(resp.group_id, []).append(resp.applied_index)
        for group_id, idx in indexes.items():
            self.assertEqual(len(idx), len(set(idx)), "group %d reused an applied index" % group_id)
        for key, resp in zip(keys, results):
            got = h.get(self.stub, key).get
            self.assertEqual((got.value, got.version), (b"v-" + key, resp.applied_index))

    def test_example_client(self):
        key = self.key().decode()
        proc = subprocess.run(
            [sys.executable, os.path.join(h.HERE, "example_client.py"), "--addr", self.server.addr,
             "--key", key, "--value", "hello-e2e"], capture_output=True, text=True, timeout=30)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("found=True value='hello-e2e'", proc.stdout)
        self.assertEqual(h.get(self.stub, key.encode()).get.value, b"hello-e2e")

    # ---- bad input: clear error, nothing stored changes --------------------------------------

    def test_key_empty_or_too_long(self):
        too_long = b"k" * (h.KEY_BYTES_MAX + 1)
        for bad in (b"", too_long):
            self.assertRpcError(lambda: h.put(self.stub, bad, b"v"), INVALID, IF, "put.key",
                                h.KEY_BYTES_MAX)
            self.assertRpcError(lambda: h.delete(self.stub, bad), INVALID, IF, "delete.key",
                                h.KEY_BYTES_MAX)
            self.assertRpcError(lambda: h.cas(self.stub, bad, 0, b"v"), INVALID, IF,
                                "compare_and_set.key", h.KEY_BYTES_MAX)
            for consistency in CONSISTENCIES:
                self.assertRpcError(lambda: h.get(self.stub, bad, consistency), INVALID, IF,
                                    "get.key", h.KEY_BYTES_MAX)
        # The limit itself is allowed.
        longest = (self.key() + b"/" + b"x" * h.KEY_BYTES_MAX)[:h.KEY_BYTES_MAX]
        resp = h.put(self.stub, longest, b"at the limit")
        got = h.get(self.stub, longest).get
        self.assertEqual((got.value, got.version), (b"at the limit", resp.applied_index))
        self.assertStoredUnchanged()

    def test_value_too_long(self):
        key = self.key()
        too_long = b"v" * (h.VALUE_BYTES_MAX + 1)
        self.assertRpcError(lambda: h.put(self.stub, key, too_long), INVALID, IF, "put.value",
                            h.VALUE_BYTES_MAX)
        self.assertRpcError(lambda: h.cas(self.stub, key, 0, too_long), INVALID, IF,
                            "compare_and_set.value", h.VALUE_BYTES_MAX)
        self.assertStoredUnchanged(absent_keys=[key])
        # Overwriting an existing key with an oversized value leaves the old value.
        old = h.put(self.stub, key, b"small")
        self.assertRpcError(lambda: h.put(self.stub, key, too_long), INVALID, IF, "put.value",
                            h.VALUE_BYTES_MAX)
        got = h.get(self.stub, key).get
        self.assertEqual((got.value, got.version), (b"small", old.applied_index))
        # The limit itself is allowed and reads back whole.
        biggest = bytes(self.rng.getrandbits(8) for _ in range(256)) * (h.VALUE_BYTES_MAX // 256)
        resp = h.put(self.stub, key, biggest)
        got = h.get(self.stub, key).get
        self.assertEqual(got.version, resp.applied_index)
        self.assertTrue(got.value == biggest, "1 MiB value did not read back intact")

    def test_request_too_large(self):
        key = self.key()
        # Just above max_request_bytes, below 2x (where gRPC itself may refuse the message).
        value = b"v" * (h.REQUEST_BYTES_MAX + 16)
        self.assertRpcError(lambda: h.put(self.stub, key, value), INVALID, IF, "request",
                            h.REQUEST_BYTES_MAX)
        self.assertStoredUnchanged(absent_keys=[key])

    def test_request_id_too_long(self):
        key = self.key()
        self.assertRpcError(lambda: h.put(self.stub, key, b"v", request_id=b"r" * 65), INVALID,
                            IF, "request_id", h.REQUEST_ID_BYTES_MAX)
        self.assertRpcError(lambda: h.delete(self.stub, key, request_id=b"r" * 200), INVALID, IF,
                            "request_id", h.REQUEST_ID_BYTES_MAX)
        self.assertStoredUnchanged(absent_keys=[key])
        rid = (self.rid() + b"x" * h.REQUEST_ID_BYTES_MAX)[:h.REQUEST_ID_BYTES_MAX]
        resp = h.put(self.stub, key, b"v", request_id=rid)
        self.assertEqual(h.get(self.stub, key).get.version, resp.applied_index)

    def test_missing_command_or_query(self):
        self.assertRpcError(lambda: self.stub.Propose(pb.ProposeRequest(), timeout=10), INVALID,
                            IF, "command")
        self.assertRpcError(
            lambda: self.stub.Propose(pb.ProposeRequest(request_id=b"rid-no-cmd"), timeout=10),
            INVALID, IF, "command")
        self.assertRpcError(lambda: self.stub.Read(pb.ReadRequest(), timeout=10), INVALID, IF,
                            "query")
        self.assertRpcError(
            lambda: self.stub.Read(pb.ReadRequest(consistency=pb.CONSISTENCY_LOCAL), timeout=10),
            INVALID, IF, "query")
        self.assertStoredUnchanged()

    def test_consistency_out_of_range(self):
        key = next(iter(self.sentinels))
        get_query = _len_field(10, _len_field(1, key))
        for value in (3, 7, 1 << 20):
            payload = b"\x08" + _encode_varint(value) + get_query
            self.assertRpcError(
                lambda: h.raw_unary(self.server.channel, "/slotd.v1.Metadata/Read", payload),
                INVALID, IF, "consistency", 2)
        # The same bytes with consistency 2 are a valid LOCAL read of the sentinel.
        raw = h.raw_unary(self.server.channel, "/slotd.v1.Metadata/Read", b"\x08\x02" + get_query)
        resp = pb.ReadResponse.FromString(raw)
        self.assertEqual((resp.get.found, resp.get.value), (True, self.sentinels[key][0]))
        self.assertStoredUnchanged()

    def test_malformed_protobuf(self):
        malformed = [
            b"\x0a\x05ab",          # request_id: length 5, only 2 bytes follow
            b"\x0f",                # field 1 with wire type 7 (does not exist)
            b"\x52\x02\x0a\x05",    # field 10 holds a truncated submessage
            b"\x80",                # truncated varint tag
            b"\x10" + b"\xff" * 10 + b"\x01",  # field 2 varint longer than 10 bytes
        ]
        for method in ("Propose", "Read"):
            for payload in malformed:
                err, _ = self.assertRpcError(
                    lambda: h.raw_unary(self.server.channel, "/slotd.v1.Metadata/" + method,
                                        payload),
                    INVALID, pb.ERROR_CODE_MALFORMED, "request")
        # Admin requests are decoded in one place (admin.c's on_gated) from each method's
        # descriptor: the error still names the method's own request message.
        for method, message in (("JoinNode", "JoinNodeRequest"),
                                ("ControllerStatus", "ControllerStatusRequest"),
                                ("SetBalance", "SetBalanceRequest")):
            err, _ = self.assertRpcError(
                lambda: h.raw_unary(self.server.channel, "/slotd.v1.Admin/" + method,
                                    malformed[0]),
                INVALID, pb.ERROR_CODE_MALFORMED, "request")
            self.assertIn("does not decode as slotd.v1." + message, err.details())
        self.assertStoredUnchanged()

    def test_unknown_methods(self):
        for path in ("/slotd.v1.Metadata/Nope", "/x.Y/Z", "/slotd.v1.Admin/Nope"):
            self.assertRpcError(lambda: h.raw_unary(self.server.channel, path, b""),
                                grpc.StatusCode.UNIMPLEMENTED)
            self.assertRpcError(lambda: h.raw_unary(self.server.channel, path, b"\x0a\x01x"),
                                grpc.StatusCode.UNIMPLEMENTED)
        self.assertStoredUnchanged()

    def test_task_status_not_found(self):
        # task_id 0 lists the kept tasks: none on a fresh single node.
        listing = self.stub.TaskStatus(pb.TaskStatusRequest(task_id=0), timeout=10)
        self.assertEqual(list(listing.tasks), [])
        self.assertFalse(listing.HasField("task"))
        for task_id in (1, 42, (1 << 64) - 1):
            self.assertRpcError(
                lambda: self.stub.TaskStatus(pb.TaskStatusRequest(task_id=task_id), timeout=10),
                grpc.StatusCode.NOT_FOUND, pb.ERROR_CODE_NOT_FOUND)
        self.assertStoredUnchanged()


class ThreeGroupsTest(h.SlotdTestCase):
    """A second server with --slot-groups 3 (86 + 85 + 85 hash slots), --max-request-bytes 65536
    and --group-proposals-max 4."""

    REQUEST_BYTES_MAX = 65536
    GROUP_PROPOSALS_MAX = 4

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server(
            slot_groups=3, extra_args=["--max-request-bytes", str(cls.REQUEST_BYTES_MAX),
                                       "--group-proposals-max", str(cls.GROUP_PROPOSALS_MAX)])

    def test_hot_group_refused_others_go_on(self):
        """A burst at one group past --group-proposals-max gets RESOURCE_EXHAUSTED QUEUE_FULL
        naming the limit and stores nothing for the refused puts, while a group under its limit
        takes every put of the same moment; the hot group takes puts again right after."""
        table = list(self.server.route().hash_slot_table)
        rng = random.Random(SEED)
        hot = [h.key_in_group(table, 1, b"hot/", rng) for _ in range(200)]
        calm = [h.key_in_group(table, 2, b"calm/", rng) for _ in range(3)]
        stub = self.server.stub
        req = lambda k: pb.ProposeRequest(put=pb.PutCommand(key=k, value=b"v"))
        futures = [(k, stub.Propose.future(req(k), timeout=10)) for k in hot[:100]]
        futures += [(k, stub.Propose.future(req(k), timeout=10)) for k in calm]
        futures += [(k, stub.Propose.future(req(k), timeout=10)) for k in hot[100:]]
        acked, refused = set(), set()
        for key, f in futures:
            try:
                f.result()
                acked.add(key)
            except grpc.RpcError as err:
                self.assertEqual(err.code(), grpc.StatusCode.RESOURCE_EXHAUSTED, err.details())
                detail = h.error_detail(err)
                self.assertEqual(pb.ErrorCode.Name(detail.code), "ERROR_CODE_QUEUE_FULL")
                self.assertEqual(detail.limit, self.GROUP_PROPOSALS_MAX)
                self.assertIn("--group-proposals-max", err.details())
                self.assertGreater(detail.retry_after_ms, 0)
                refused.add(key)
        self.assertTrue(refused, "200 puts at once to one group never passed a bound of 4")
        self.assertTrue(refused <= set(hot), "a put of the calm group was refused")
        self.assertTrue(set(calm) <= acked)
        for key in refused:
            self.assertFalse(h.get(stub, key).get.found, "refused put %r stored" % key)
        for key in acked:
            self.assertTrue(h.get(stub, key).get.found, "acknowledged put %r lost" % key)
        h.put(stub, h.key_in_group(table, 1, b"hot/after/", rng), b"v")  # nothing left held

    def test_max_request_bytes_flag(self):
        key = b"flag/request-bytes"
        limit = self.REQUEST_BYTES_MAX
        self.assertRpcError(lambda: h.put(self.server.stub, key, b"v" * (limit + 1)), INVALID, IF,
                            "request", limit)
        self.assertFalse(h.get(self.server.stub, key).get.found)
        resp = h.put(self.server.stub, key, b"v" * (limit - 64))
        self.assertEqual(h.get(self.server.stub, key).get.version, resp.applied_index)

    def test_health_serving(self):
        check_health(self, self.server)

    def test_route_and_propose_groups(self):
        table = check_route_shape(self, self.server.route(), 3)
        self.assertEqual([table.count(g) for g in (1, 2, 3)], [86, 85, 85])
        rng = random.Random(SEED)
        seen = set()
        for i in range(60):
            key = h.unique_key(b"three/%d" % i, rng)
            resp = h.put(self.server.stub, key, b"v%d" % i)
            self.assertEqual(resp.group_id, table[h.hash_slot(key)], "key %r" % key)
            got = h.get(self.server.stub, key)
            self.assertEqual(got.group_id, resp.group_id)
            self.assertEqual((got.get.value, got.get.version), (b"v%d" % i, resp.applied_index))
            seen.add(resp.group_id)
        self.assertEqual(seen, {1, 2, 3})


class ReadmeTest(unittest.TestCase):
    """README.md quotes example_client.py; the quote must be the file as it is."""

    def test_readme_quotes_example_client(self):
        readme = (h.HERE / "README.md").read_text()
        example = (h.HERE / "example_client.py").read_text()
        self.assertIn("```python\n" + example + "```", readme)


if __name__ == "__main__":
    unittest.main()
