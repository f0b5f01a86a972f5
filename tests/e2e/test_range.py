"""test_range.py - e2e tests of the Range read: pages over a single node's 8 groups and a cluster,
merged from every group's run when they fit one page."""
import os
import random
import sys
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

INVALID = grpc.StatusCode.INVALID_ARGUMENT
IF = pb.ERROR_CODE_INVALID_FIELD
CONSISTENCIES = (pb.CONSISTENCY_LINEARIZABLE, pb.CONSISTENCY_LEADER_LOCAL, pb.CONSISTENCY_LOCAL)


def drain(stub, consistency=pb.CONSISTENCY_LINEARIZABLE, pages_max=10000, **query):
    """Every page of one range: (entries, summed counts, pages, group ids that served)."""
    entries, count, pages, groups = [], 0, 0, set()
    cursor = b""
    while True:
        resp = stub.Read(pb.ReadRequest(consistency=consistency,
                                        range=pb.RangeQuery(cursor=cursor, **query)),
                         timeout=h.RPC_TIMEOUT_S)
        pages += 1
        groups.add(resp.group_id)
        entries.extend(resp.range.entries)
        count += resp.range.count
        if not resp.range.more:
            assert resp.range.cursor == b"", "a last page carries no cursor"
            return entries, count, pages, groups
        assert pages < pages_max, "range did not end"
        cursor = resp.range.cursor


class RangeTestMixin:
    def write_keys(self, stub, prefix, n):
        """n keys under prefix and n / 3 under prefix + "x" sibling: {key: (value, version)}."""
        written = {}
        for i in range(n):
            key = b"%s%05d" % (prefix, i)
            value = b"v-%d-%x" % (i, self.rng.getrandbits(32))
            written[key] = (value, h.put_retrying(stub, key, value, b"r-" + key).put.version)
        return written

    def check_entries(self, entries, written, values=True):
        keys = [e.key for e in entries]
        self.assertEqual(len(keys), len(set(keys)), "a key came twice")
        self.assertEqual(set(keys), set(written))
        order = [(h.hash_slot(e.key), e.key) for e in entries]
        self.assertEqual(order, sorted(order), "not in hash-slot order, then key order")
        for e in entries:
            value, version = written[e.key]
            self.assertEqual(e.version, version)
            self.assertEqual(e.value, value if values else b"")


class RangeSingleNodeTest(RangeTestMixin, h.SlotdTestCase):
    """Default flags (8 slot groups), one server for the class."""

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.stub = cls.server.stub
        cls.rng = random.Random(h.SEED)
        cls.prefix = h.unique_key("range", cls.rng) + b"/"
        cls.written = RangeTestMixin.write_keys(cls, cls.stub, cls.prefix, 300)
        cls.others = RangeTestMixin.write_keys(cls, cls.stub, cls.prefix[:-1] + b"-other/", 40)

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def test_prefix_pages(self):
        for consistency in CONSISTENCIES:
            entries, count, pages, groups = drain(self.stub, consistency, prefix=self.prefix,
                                                  limit=7)
            self.check_entries(entries, self.written)
            self.assertEqual(count, 300)
            self.assertGreaterEqual(pages, 300 // 7)
            self.assertEqual(len(groups), 8, "every group served pages")

    def test_one_page_merges_every_group(self):
        """A page asks the next runs' groups at once and merges them: 300 keys over 8 groups
        come in one page of 1000, in three of 100 (each full but the last); a route-aware
        client's no_forward page stays one group's run."""
        entries, count, pages, _ = drain(self.stub, prefix=self.prefix, limit=1000)
        self.check_entries(entries, self.written)
        self.assertEqual((count, pages), (300, 1))
        entries, count, pages, _ = drain(self.stub, prefix=self.prefix, limit=100)
        self.check_entries(entries, self.written)
        self.assertEqual((count, pages), (300, 3))
        pages = 0
        cursor = b""
        while True:
            resp = self.stub.Read(pb.ReadRequest(no_forward=True, range=pb.RangeQuery(
                prefix=self.prefix, limit=1000, cursor=cursor)), timeout=h.RPC_TIMEOUT_S)
            pages += 1
            if not resp.range.more:
                break
            cursor = resp.range.cursor
        self.assertGreaterEqual(pages, 8)

    def test_keys_only_and_count_only(self):
        entries, count, _, _ = drain(self.stub, prefix=self.prefix, limit=50, keys_only=True)
        self.check_entries(entries, self.written, values=False)
        entries, count, _, _ = drain(self.stub, prefix=self.prefix, count_only=True)
        self.assertEqual(entries, [])
        self.assertEqual(count, 300)

    def test_start_end(self):
        start, end = b"%s%05d" % (self.prefix, 100), b"%s%05d" % (self.prefix, 200)
        want = {k: v for k, v in self.written.items() if start <= k < end}
        self.assertEqual(len(want), 100)
        entries, _, _, _ = drain(self.stub, start=start, end=end, limit=1000)
        self.check_entries(entries, want)
        # end empty: to the end of the keyspace; the "-other/" keys sort before the prefix.
        entries, _, _, _ = drain(self.stub, start=start, limit=1000)
        got = {e.key for e in entries}
        self.assertTrue(set(want) <= got)
        self.assertFalse(got & set(self.others))

    def test_bad_input(self):
        good = drain(self.stub, prefix=self.prefix, limit=1000)[0]
        first = self.stub.Read(pb.ReadRequest(range=pb.RangeQuery(prefix=self.prefix, limit=3)))
        self.assertTrue(first.range.more)
        forged = bytearray(first.range.cursor)
        forged[-1] ^= 1
        cases = [
            (pb.ReadRequest(range=pb.RangeQuery(prefix=self.prefix, limit=1001)),
             "range.limit", 1000),
            (pb.ReadRequest(range=pb.RangeQuery(prefix=self.prefix, start=b"a")),
             "range.prefix", None),
            (pb.ReadRequest(range=pb.RangeQuery(start=b"b", end=b"a")), "range.end", None),
            (pb.ReadRequest(range=pb.RangeQuery(prefix=self.prefix, cursor=bytes(forged))),
             "range.cursor", None),
            (pb.ReadRequest(range=pb.RangeQuery(prefix=self.prefix, cursor=b"garbage")),
             "range.cursor", None),
            # A genuine cursor sent with other bounds.
            (pb.ReadRequest(range=pb.RangeQuery(prefix=self.prefix[:-1],
                                                cursor=first.range.cursor)),
             "range.cursor", None),
            (pb.ReadRequest(consistency=99, range=pb.RangeQuery(prefix=self.prefix)),
             "consistency", None),
        ]
        for req, field, limit in cases:
            with self.subTest(field=field):
                self.assertRpcError(lambda: self.stub.Read(req, timeout=h.RPC_TIMEOUT_S), INVALID,
                                    IF, field, limit)
        self.assertEqual(drain(self.stub, prefix=self.prefix, limit=1000)[0], good)


class RangeClusterTest(RangeTestMixin, h.SlotdTestCase):
    """Three nodes: pages of groups led elsewhere are forwarded to their leaders."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)
        cls.cluster.wait_client_addresses()

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def test_pages_via_every_node(self):
        c = self.cluster
        ids = sorted(c.running_ids())
        prefix = h.unique_key("range-cluster", self.rng) + b"/"
        written = self.write_keys(c.stub(ids[0]), prefix, 120)
        for node_id in ids:
            for consistency in (pb.CONSISTENCY_LINEARIZABLE, pb.CONSISTENCY_LEADER_LOCAL):
                entries, count, _, groups = drain(c.stub(node_id), consistency, prefix=prefix,
                                                  limit=9)
                self.check_entries(entries, written)
                self.assertEqual(count, 120)
                self.assertEqual(len(groups), len(set(c.server(ids[0]).route().hash_slot_table)))
            # one page of 1000: merged from every group, led here or elsewhere
            entries, count, pages, _ = drain(c.stub(node_id), prefix=prefix, limit=1000)
            self.check_entries(entries, written)
            self.assertEqual((count, pages), (120, 1))

    def test_txn_counter_under_eight_clients(self):
        """8 clients increment one key with compare-version-then-put txns through every node:
        the final count is exactly the number of txns that reported success (no lost update),
        and every failed compare returned the current value with its get op."""
        import threading
        c = self.cluster
        key = h.unique_key("txn-counter", self.rng)
        h.put(c.stub(1), key, b"0")
        ids = sorted(c.running_ids())
        wins, lock = [0], threading.Lock()

        def client(k):
            stub = c.stub(ids[k % len(ids)])
            got = h.get(stub, key).get
            value, version = int(got.value), got.version
            done = 0
            for _ in range(400):  # bounded: each client needs 10 wins
                if done == 10:
                    break
                txn = pb.TxnCommand(
                    compares=[pb.TxnCompare(key=key, target=pb.TXN_TARGET_VERSION,
                                            op=pb.TXN_COMPARE_OP_EQUAL, version=version)],
                    success=[pb.TxnOp(put=pb.PutCommand(key=key, value=b"%d" % (value + 1)))],
                    failure=[pb.TxnOp(get=pb.GetQuery(key=key))])
                r = stub.Propose(pb.ProposeRequest(txn=txn), timeout=h.RPC_TIMEOUT_S)
                if r.txn.succeeded:
                    done += 1
                    value, version = value + 1, r.txn.results[0].put.version
                else:
                    cur = r.txn.results[0].get
                    value, version = int(cur.value), cur.version
            with lock:
                wins[0] += done

        threads = [threading.Thread(target=client, args=(k,)) for k in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        self.assertEqual(wins[0], 80)
        for node_id in ids:
            self.assertEqual(h.get(c.stub(node_id), key).get.value, b"80")


if __name__ == "__main__":
    unittest.main()
