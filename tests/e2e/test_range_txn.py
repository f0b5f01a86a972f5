"""test_range_txn.py - e2e tests of the Range read (pages over a single node's 8 groups and a cluster,
merged from every group's run when they fit one page), txn under concurrent clients, and leases
(TTL keys: attach, keep-alive, revoke, expiry on every replica)."""
import os
import random
import sys
import time
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


PRECONDITION = grpc.StatusCode.FAILED_PRECONDITION
NOT_FOUND = grpc.StatusCode.NOT_FOUND


def keys_in_slot(hs, prefix, n, rng):
    """n distinct keys of hash slot hs."""
    out = []
    while len(out) < n:
        k = h.unique_key(prefix, rng)
        if h.hash_slot(k) == hs and k not in out:
            out.append(k)
    return out


def lease_grant(stub, key, ttl):
    return stub.Propose(pb.ProposeRequest(lease_grant=pb.LeaseGrantCommand(key=key,
                                                                           ttl_seconds=ttl)),
                        timeout=h.RPC_TIMEOUT_S).lease_grant


def lease_call(stub, **cmd):
    return stub.Propose(pb.ProposeRequest(**cmd), timeout=h.RPC_TIMEOUT_S)


def put_lease(stub, key, value, lease):
    return stub.Propose(pb.ProposeRequest(put=pb.PutCommand(key=key, value=value, lease=lease)),
                        timeout=h.RPC_TIMEOUT_S)


def present(stub, key, consistency=pb.CONSISTENCY_LINEARIZABLE):
    return h.get(stub, key, consistency=consistency).get.found


def wait_gone(stubs, keys, bound_s, consistency=pb.CONSISTENCY_LINEARIZABLE):
    """Seconds until no key is found through any stub; AssertionError after bound_s."""
    start = time.monotonic()
    while True:
        left = [(i, k) for i, s in enumerate(stubs) for k in keys if present(s, k, consistency)]
        if not left:
            return time.monotonic() - start
        assert time.monotonic() - start < bound_s, "still present after %.1f s: %r" % (
            bound_s, left[:4])
        time.sleep(0.2)


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


class LeaseSingleNodeTest(h.SlotdTestCase):
    """Leases on one node: attach, detach, keep-alive, revoke, expiry, and bad input."""

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.stub = cls.server.stub

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def test_grant_attach_revoke(self):
        hs = self.rng.randrange(256)
        k1, k2, k3, other = keys_in_slot(hs, "lease-a", 4, self.rng)
        g = lease_grant(self.stub, k1, 60)
        self.assertEqual((g.id >> 48, g.ttl_seconds), (hs, 60))
        for k in (k1, k2, k3):
            put_lease(self.stub, k, b"v", g.id)
        h.put(self.stub, other, b"stays")
        self.assertEqual(h.get(self.stub, k1).get.lease, g.id)
        h.put(self.stub, k3, b"detached")  # a put without a lease detaches the key
        self.assertEqual(h.get(self.stub, k3).get.lease, 0)
        entries = drain(self.stub, start=min(k1, k2), end=max(k1, k2) + b"\0", limit=1000)[0]
        self.assertEqual({e.key: e.lease for e in entries if e.key in (k1, k2)},
                         {k1: g.id, k2: g.id})
        r = lease_call(self.stub, lease_keep_alive=pb.LeaseKeepAliveCommand(id=g.id))
        self.assertEqual((r.lease_keep_alive.ttl_seconds, r.lease_keep_alive.keys), (60, 2))
        r = lease_call(self.stub, lease_revoke=pb.LeaseRevokeCommand(id=g.id))
        self.assertEqual(r.lease_revoke.keys_deleted, 2)
        self.assertEqual([present(self.stub, k) for k in (k1, k2, k3, other)],
                         [False, False, True, True])
        for cmd in ({"lease_keep_alive": pb.LeaseKeepAliveCommand(id=g.id)},
                    {"lease_revoke": pb.LeaseRevokeCommand(id=g.id)}):
            with self.assertRaises(grpc.RpcError) as cm:
                lease_call(self.stub, **cmd)
            self.assertEqual(cm.exception.code(), NOT_FOUND, cm.exception.details())
        g2 = lease_grant(self.stub, k1, 60)
        self.assertGreater(g2.id, g.id, "a lease id is never reused")

    def test_expiry_and_keep_alive(self):
        hs = self.rng.randrange(256)
        kept, expiring = keys_in_slot(hs, "lease-b", 2, self.rng)
        a = lease_grant(self.stub, kept, 2)
        b = lease_grant(self.stub, expiring, 2)
        put_lease(self.stub, kept, b"k", a.id)
        put_lease(self.stub, expiring, b"e", b.id)
        start = time.monotonic()
        while time.monotonic() - start < 4.5:  # keep a alive for more than twice its TTL
            lease_call(self.stub, lease_keep_alive=pb.LeaseKeepAliveCommand(id=a.id))
            time.sleep(0.5)
        self.assertFalse(present(self.stub, expiring), "b expired after 2 s")
        self.assertTrue(present(self.stub, kept), "a was kept alive")
        wait_gone([self.stub], [kept], bound_s=6)

    def test_bad_input_changes_nothing(self):
        hs = self.rng.randrange(256)
        key, = keys_in_slot(hs, "lease-c", 1, self.rng)
        wrong, = keys_in_slot((hs + 1) % 256, "lease-c", 1, self.rng)
        g = lease_grant(self.stub, key, 30)
        cases = [
            (pb.ProposeRequest(lease_grant=pb.LeaseGrantCommand(key=key, ttl_seconds=0)),
             INVALID, "lease_grant.ttl_seconds"),
            (pb.ProposeRequest(lease_grant=pb.LeaseGrantCommand(key=key, ttl_seconds=31536001)),
             INVALID, "lease_grant.ttl_seconds"),
            (pb.ProposeRequest(lease_grant=pb.LeaseGrantCommand(key=b"", ttl_seconds=5)),
             INVALID, "lease_grant.key"),
            (pb.ProposeRequest(lease_keep_alive=pb.LeaseKeepAliveCommand(id=hs << 48)),
             INVALID, "lease_keep_alive.id"),
            (pb.ProposeRequest(lease_revoke=pb.LeaseRevokeCommand(id=300 << 48 | 1)),
             INVALID, "lease_revoke.id"),
            (pb.ProposeRequest(put=pb.PutCommand(key=wrong, value=b"x", lease=g.id)),
             PRECONDITION, "put.lease"),
            (pb.ProposeRequest(put=pb.PutCommand(key=key, value=b"x", lease=g.id + 1000)),
             NOT_FOUND, "put.lease"),
            (pb.ProposeRequest(txn=pb.TxnCommand(success=[pb.TxnOp(put=pb.PutCommand(
                key=key, value=b"x", lease=g.id + 1000))])),
             NOT_FOUND, "txn.success[0].put.lease"),
        ]
        for req, code, field in cases:
            with self.assertRaises(grpc.RpcError, msg=field) as cm:
                self.stub.Propose(req, timeout=h.RPC_TIMEOUT_S)
            self.assertEqual(cm.exception.code(), code, cm.exception.details())
            self.assertIn(field, cm.exception.details())
        self.assertEqual([present(self.stub, k) for k in (key, wrong)], [False, False])
        r = lease_call(self.stub, lease_keep_alive=pb.LeaseKeepAliveCommand(id=g.id))
        self.assertEqual(r.lease_keep_alive.keys, 0)


class RangeClusterTest(RangeTestMixin, h.SlotdTestCase):
    """Three nodes: pages of groups led elsewhere are forwarded to their leaders."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)
        cls.cluster.wait_client_addresses()

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def test_lease_expiry_on_every_replica(self):
        """Keys attached to a lease vanish on every replica (read locally on followers) after
        the TTL, also after kill -9 of the group's leader (the next leader times it anew); a
        key of the same hash slot without the lease stays."""
        c = self.cluster
        ids = sorted(c.running_ids())
        route = c.route()
        hs = self.rng.randrange(256)
        group = route.hash_slot_table[hs]
        keys = keys_in_slot(hs, "lease-cluster", 4, self.rng)
        sent = time.monotonic()
        g = lease_grant(c.stub(ids[0]), keys[0], 3)
        for k in keys[:3]:
            put_lease(c.stub(ids[1]), k, b"v", g.id)
        index = h.put(c.stub(ids[2]), keys[3], b"stays").applied_index
        for node_id in ids:
            self.assertTrue(all(h.get(c.stub(node_id), k, consistency=pb.CONSISTENCY_LOCAL,
                                      min_applied_index=index).get.found for k in keys))
        wait_gone([c.stub(i) for i in ids], keys[:3], bound_s=15,
                  consistency=pb.CONSISTENCY_LOCAL)
        self.assertGreaterEqual(time.monotonic() - sent, 3.0, "gone before the TTL")
        for node_id in ids:
            self.assertTrue(present(c.stub(node_id), keys[3], pb.CONSISTENCY_LOCAL))
        # a lease whose group leader dies: the next leader expires it
        g = lease_grant(c.stub(ids[0]), keys[0], 3)
        put_lease(c.stub(ids[0]), keys[0], b"v", g.id)
        leader = [gr.leader for gr in c.wait_leaders().groups if gr.group_id == group][0]
        c.kill(leader)
        try:
            live = [i for i in ids if i != leader]
            wait_gone([c.stub(i) for i in live], keys[:1], bound_s=30,
                      consistency=pb.CONSISTENCY_LOCAL)
        finally:
            c.restart(leader)
        c.wait_leaders()

    def test_pages_via_every_node(self):
        c = self.cluster
        ids = sorted(c.running_ids())
        # an earlier test of this cluster may have restarted a leader: every node must know
        # every group's leader before its pages are forwarded (else UNAVAILABLE, no leader known)
        for node_id in ids:
            c.wait_leaders(via=node_id)
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
