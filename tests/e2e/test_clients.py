# test_clients.py - the Python (clients/python) and Node (clients/node) clients against real slotd.
"""Other-language clients end to end.

* ``slotd_client.Client`` against one node: put/get/delete/cas at every consistency, request-id
  dedupe, INVALID_ARGUMENT not retried, a dead first endpoint, a request-id write retried after
  UNAVAILABLE and a write without request id not retried.
* The same client against 3 nodes through one endpoint: writes for every group go straight to the
  group's leader (no NOT_LEADER redirect), a cached leader pointing at a non-leader is corrected
  from the NOT_LEADER hint, and a retried request-id write whose first copy committed is applied
  once (``deduplicated``, same index and version).
* Read your admin writes on the same 3 nodes, for the Python client and for the Node client
  (clients/node/index.js driven by a small script under ``node``): an admin write raises
  last_revision to the revision it answers, TaskStatus / ClusterState / RouteSnapshot through
  other endpoints answer at that revision or later, and a min_revision 1000 ahead (given
  explicitly, or carried in last_revision and sent by default) fails UNAVAILABLE naming
  "min_revision" after the node's 3 s wait, without trying the other endpoints.
* ``Client.range`` / ``range_page`` (every key under a prefix once across all groups, limit,
  count_only) and the ``Client.txn`` builder (success and failure branches, a cross-group txn
  refused with nothing written), on one node and on 3.
* ``Client.watch(typed=("subscribers", id))`` (Python, one node and 3) and ``watch({typed})``
  (Node): a channel's subscriber rows as typed events.
* ``Client.watch`` (Python) and ``watch()`` (Node) through 3 endpoints: a prefix watch keeps every acked put exactly once across
  kill -9 of the node it streams from (it resumes on the next endpoint with its positions).
* clients/node ``range()`` (every key under a prefix once) and the ``txn()`` builder (both
  branches, a cross-group txn refused) against one node.
* Leases (Python ``lease_grant`` / ``put(lease=)`` / txn ``then_put(lease=)`` /
  ``lease_keepalive`` / ``lease_revoke``, on one node and on 3; Node ``leaseGrant`` ...
  ``leaseRevoke``): keys of the lease's hash slot attached, one of another refused
  FAILED_PRECONDITION, a revoke deletes them, then NOT_FOUND; a key on a 2 s lease expires.
* ``node clients/node/example.js --addr`` against one node (``npm ci`` first when
  clients/node/node_modules is missing); its output is checked and the value read back here.
  Skipped only when node or npm is not installed.
"""

import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import slotd_harness as h  # noqa: E402

sys.path.insert(0, str(h.REPO / "clients" / "python"))
import grpc  # noqa: E402
from slotd_client import Client, SlotdError, admin_pb  # noqa: E402

NODE_DIR = h.REPO / "clients" / "node"
NPM_TIMEOUT_S = 180
NODE_TIMEOUT_S = 30
# A min_revision this far past the last one seen is never reached: the node waits 3 s, then fails.
FAR_REVISIONS = 1000
NOT_REACHED_WAIT_MIN_S = 2.5
NOT_REACHED_WAIT_MAX_S = 6.0
# Lease expiry: a short TTL and how long past it a key may linger, polled every LEASE_POLL_S.
LEASE_TTL_S = 2
LEASE_EXPIRY_SLACK_S = 6.0
LEASE_POLL_S = 0.2


def key_in_hash_slot(prefix, slot):
    """prefix plus a suffix that puts the key (bytes) in hash slot slot."""
    for i in range(100000):
        key = b"%s/%d" % (prefix, i)
        if h.hash_slot(key) == slot:
            return key
    raise AssertionError("no key in hash slot %d" % slot)


def dead_address():
    """A loopback address nothing listens on (a port that was free a moment ago)."""
    return "127.0.0.1:%d" % h.free_port()


def node_tools():
    """(node, npm) paths, after `npm ci` in clients/node when node_modules is missing. Raises
    unittest.SkipTest when node or npm is not installed."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        raise unittest.SkipTest("node or npm is not installed (node 18+ needed for clients/node)")
    if not (NODE_DIR / "node_modules" / "@grpc" / "grpc-js").is_dir():
        proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund"], cwd=str(NODE_DIR),
                              capture_output=True, text=True, timeout=NPM_TIMEOUT_S)
        if proc.returncode != 0:
            raise AssertionError("npm ci in %s failed (%d):\n%s%s"
                                 % (NODE_DIR, proc.returncode, proc.stdout, proc.stderr))
    return node, npm


# Run by `node -e` with argv: index.js path, the writer's endpoint, the reader's endpoints
# (comma-separated), group id, node id. Prints one JSON object (uint64 values as strings).
NODE_REVISION_SCRIPT = r"""
'use strict';
const [indexPath, writerAddr, readerAddrs, groupId, nodeId] = process.argv.slice(1);
const { createClient } = require(indexPath);

async function failure(call) {
  const t0 = Date.now();
  try {
    await call();
    return { ok: true };
  } catch (err) {
    return { code: err.code, field: err.detail ? err.detail.field : null, details: err.details,
             attempts: err.attempts, ms: Date.now() - t0 };
  }
}

async function main() {
  const out = {};
  const writer = createClient(writerAddr);
  const reader = createClient(readerAddrs.split(','));
  const carrier = createClient(writerAddr);
  try {
    out.initial = writer.lastRevision;
    const w = await writer.admin('SetPreferredLeader',
                                 { group_id: Number(groupId), node_id: nodeId });
    out.write = { outcome: w.outcome, revision: w.revision, last: writer.lastRevision };
    out.observed = reader.observeRevision(writer.lastRevision);
    out.task_status = (await reader.taskStatus()).revision;
    out.cluster_state = (await reader.clusterState()).revision;
    out.route = (await reader.route()).route_revision;
    out.reader_last = reader.lastRevision;
    const far = BigInt(reader.lastRevision) + 1000n;
    carrier.observeRevision(far);
    out.far = far.toString();
    const router = createClient(writerAddr);
    router.observeRevision(far);
    [out.explicit, out.by_default, out.route_by_default] = await Promise.all([
      failure(() => reader.taskStatus(0, { minRevision: far })),
      failure(() => carrier.clusterState()),
      failure(() => router.route()),
    ]);
    router.close();
    out.explicit_zero = (await carrier.taskStatus(0, { minRevision: 0 })).revision;
    out.reader_last_after = reader.lastRevision;
    let threw = null;
    try { await writer.admin('ClusterState', {}); } catch (err) { threw = err.name; }
    out.not_a_write = threw;
  } finally {
    writer.close();
    reader.close();
    carrier.close();
  }
  console.log(JSON.stringify(out));
}

main().catch((err) => {
  console.error(`node revision script: ${err.code !== undefined ? `${err.code}: ` : ''}` +
                `${err.details || err.stack}`);
  process.exit(1);
});
"""


class ClientChecks:
    """Checks shared by the single-node and cluster classes (cls.endpoints set by setUpClass)."""

    def client(self, endpoints=None, **kwargs):
        kwargs.setdefault("deadline", 5.0)
        client = Client(endpoints if endpoints is not None else self.endpoints, **kwargs)
        self.addCleanup(client.close)
        return client

    def test_put_get_delete_cas(self):
        c = self.client()
        key = h.unique_key("py/crud")
        w = c.put(key, b"v1")
        self.assertGreater(w.put.version, 0)
        self.assertEqual(w.put.version, w.applied_index)
        self.assertEqual(w.group_id, c.group_of(key))
        self.assertFalse(w.deduplicated)
        for level in ("linearizable", "leader_local", "local"):
            r = c.get(key, consistency=level, min_applied_index=w.applied_index
                      if level == "local" else 0)
            self.assertEqual((r.get.found, r.get.value, r.get.version),
                             (True, b"v1", w.put.version), level)
            self.assertEqual(r.group_id, w.group_id)
        bad = c.cas(key, w.put.version + 1000, b"nope")
        self.assertFalse(bad.compare_and_set.succeeded)
        self.assertEqual(bad.compare_and_set.current_value, b"v1")
        self.assertEqual(bad.compare_and_set.version, w.put.version)
        good = c.cas(key, w.put.version, "v2")  # str values are UTF-8 encoded
        self.assertTrue(good.compare_and_set.succeeded)
        self.assertGreater(good.compare_and_set.version, w.put.version)
        self.assertEqual(c.get(key).get.value, b"v2")
        gone = c.delete(key)
        self.assertTrue(gone.delete.deleted)
        self.assertEqual(gone.delete.prev_version, good.compare_and_set.version)
        r = c.get(key)
        self.assertFalse(r.get.found)
        created = c.cas(key, 0, b"fresh")
        self.assertTrue(created.compare_and_set.succeeded)
        # The raw stub (harness) sees what the client wrote.
        raw = h.get(self.any_stub(), key)
        self.assertEqual((raw.get.value, raw.get.version),
                         (b"fresh", created.compare_and_set.version))

    def test_request_id_dedupe(self):
        c = self.client()
        key = h.unique_key("py/dedupe")
        first = c.put(key, b"once", request_id=b"py-dedupe-" + key[-12:])
        again = c.put(key, b"once", request_id=b"py-dedupe-" + key[-12:])
        self.assertFalse(first.deduplicated)
        self.assertTrue(again.deduplicated)
        self.assertEqual((again.applied_index, again.put.version),
                         (first.applied_index, first.put.version))
        self.assertEqual(c.get(key).get.version, first.put.version)
        # Random request ids differ between calls: two puts are two writes.
        a, b = c.put(key, b"x"), c.put(key, b"x")
        self.assertFalse(b.deduplicated)
        self.assertGreater(b.put.version, a.put.version)

    def test_invalid_argument_not_retried(self):
        c = self.client()
        with self.assertRaises(SlotdError) as ctx:
            c.put(b"", b"v")
        err = ctx.exception
        self.assertEqual(err.code, grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(err.error_code, "ERROR_CODE_INVALID_FIELD")
        self.assertEqual((err.detail.field, err.detail.limit), ("put.key", 1024))
        self.assertEqual(err.attempts, 1)
        self.assertEqual(c.stats["retries"], 0)

    def test_dead_first_endpoint(self):
        c = Client([dead_address()] + list(self.endpoints), deadline=2.0)
        self.addCleanup(c.close)
        key = h.unique_key("py/failover")
        self.assertGreater(c.put(key, b"v").put.version, 0)
        self.assertEqual(c.get(key).get.value, b"v")

    def test_unavailable_retry_only_with_request_id(self):
        c = self.client(max_retries=3)
        key = h.unique_key("py/retry")
        group = c.group_of(key)
        node, address = c.leader_address(group)
        self.assertTrue(address, "no leader for group %d in the route" % group)
        # The cached leader address goes dead: a write without request id fails after one try.
        c._addresses[node] = dead_address()
        with self.assertRaises(SlotdError) as ctx:
            c.put(key, b"no-id", request_id=b"")
        self.assertEqual(ctx.exception.code, grpc.StatusCode.UNAVAILABLE)
        self.assertEqual(ctx.exception.attempts, 1)
        self.assertEqual(c.stats["retries"], 0)
        self.assertFalse(c.get(key).get.found)  # the read refetched the route
        # With a request id the same situation is retried against a refreshed route.
        c._addresses[node] = dead_address()
        w = c.put(key, b"with-id")
        self.assertEqual(c.stats["retries"], 1)
        self.assertEqual(c.leader_address(group), (node, address))
        self.assertEqual(c.get(key).get.version, w.put.version)

    def test_dedupe_safe_retry(self):
        """A write committed but its answer was lost: the client's retry with the same request id
        (after an UNAVAILABLE) returns the first result and writes nothing new."""
        c = self.client(max_retries=3)
        key = h.unique_key("py/lost")
        rid = b"py-lost-" + key[-12:]
        first = h.put(self.any_stub(), key, b"v", request_id=rid)
        group = c.group_of(key)
        node, _ = c.leader_address(group)
        c._addresses[node] = dead_address()
        retried = c.put(key, b"v", request_id=rid)
        self.assertEqual(c.stats["retries"], 1)
        self.assertTrue(retried.deduplicated)
        self.assertEqual((retried.applied_index, retried.put.version),
                         (first.applied_index, first.put.version))
        r = c.get(key)
        self.assertEqual((r.get.value, r.get.version), (b"v", first.put.version))


    def test_range_pages_and_txn(self):
        """Client.range pages through every group and yields each key under the prefix once;
        range_page honours limit and count_only. Client.txn runs the success branch when the
        compares hold, the failure branch (nothing of the success one written) when not, and a
        txn over two groups is refused INVALID_ARGUMENT with nothing written."""
        c = self.client()
        table = list(c.route().hash_slot_table)
        groups = sorted(set(table))
        prefix = h.unique_key("pyrange") + b"/"
        keys = {h.key_in_group(table, g, prefix + b"g%d" % g) for g in groups for _ in range(2)}
        for k in keys:
            c.put(k, b"v" + k[-3:])
        got = list(c.range(prefix=prefix, page_limit=3))
        self.assertEqual(sorted(e.key for e in got), sorted(keys))
        self.assertTrue(all(e.value == b"v" + e.key[-3:] for e in got))
        page = c.range_page(prefix=prefix, limit=1)
        self.assertEqual((len(page.range.entries), page.range.more), (1, True))
        total = 0
        cursor = b""
        while True:
            page = c.range_page(prefix=prefix, count_only=True, cursor=cursor).range
            self.assertEqual(len(page.entries), 0)
            total += page.count
            if not page.more:
                break
            cursor = page.cursor
        self.assertEqual(total, len(keys))

        g = groups[0]
        k1 = h.key_in_group(table, g, prefix + b"t1")
        k2 = h.key_in_group(table, g, prefix + b"t2")
        c.put(k1, b"one")
        r = c.txn().if_value(k1, "=", b"one").if_absent(k2).then_put(k2, b"two") \
            .then_get(k1).else_get(k1).commit()
        self.assertTrue(r.txn.succeeded)
        self.assertEqual(r.txn.results[1].get.value, b"one")
        version = c.get(k2).get.version
        r = c.txn().if_value(k1, "=", b"one").if_absent(k2).then_put(k2, b"again") \
            .else_get(k2).commit()
        self.assertFalse(r.txn.succeeded)
        self.assertEqual(r.txn.results[0].get.value, b"two")
        self.assertEqual((c.get(k2).get.value, c.get(k2).get.version), (b"two", version))
        if len(groups) > 1:
            other = h.key_in_group(table, groups[1], prefix + b"t3")
            with self.assertRaises(SlotdError) as ctx:
                c.txn().then_put(k1, b"x").then_put(other, b"y").commit()
            self.assertEqual(ctx.exception.code, grpc.StatusCode.INVALID_ARGUMENT)
            self.assertFalse(c.get(other).get.found)
            self.assertEqual(c.get(k1).get.value, b"one")
        with self.assertRaises(ValueError):
            c.txn().if_value(k1, "~", b"x")


    def test_typed_watch_of_subscribers(self):
        """Client.watch(typed=("subscribers", id)) yields the channel's subscriber rows only:
        one PUT per uid added (table CHANNEL_MEMBER, key = length, id, list 1, uid)."""
        c = self.client()
        cid = h.unique_key("pytw").decode()[-12:]
        w = c.watch(typed=("subscribers", cid))
        got, done = [], threading.Event()

        def follow():
            for msg in w:
                got.extend(msg.events)
                if len(got) >= 2:
                    break
            done.set()

        threading.Thread(target=follow, daemon=True).start()
        deadline = time.monotonic() + 10
        while not w.positions and time.monotonic() < deadline:  # the created message
            time.sleep(0.05)
        stub = self.any_stub()
        stub.Propose(h.pb.ProposeRequest(create_channel=h.pb.CreateChannelCommand(
            channel_id=cid, channel_type=2)), timeout=5)
        stub.Propose(h.pb.ProposeRequest(add_subscribers=h.pb.SubscribersCommand(
            channel_id=cid, channel_type=2, uids=["x", "y"])), timeout=5)
        self.assertTrue(done.wait(15), "two subscriber events not seen")
        w.cancel()
        prefix = bytes([len(cid)]) + cid.encode() + b"\x02\x01"  # [type 2][subscribers]
        self.assertEqual([(e.table, e.key) for e in got[:2]],
                         [(h.pb.TYPED_TABLE_CHANNEL_MEMBER, prefix + b"x"),
                          (h.pb.TYPED_TABLE_CHANNEL_MEMBER, prefix + b"y")])
        with self.assertRaises(ValueError):
            c.watch(typed=("members", cid))


    def test_leases(self):
        """lease_grant answers an id of the key's hash slot; put(lease=) and a txn put with a
        lease attach keys of that hash slot (another hash slot: FAILED_PRECONDITION, nothing
        written); lease_keepalive counts them; lease_revoke deletes them; then keepalive and
        revoke fail NOT_FOUND. Bad ids and TTLs raise ValueError before any call."""
        c = self.client()
        key = h.unique_key("py/lease")
        lease, ttl = c.lease_grant(key, 60)
        self.assertEqual((lease >> 48, ttl), (h.hash_slot(key), 60))
        self.assertFalse(c.get(key).get.found)  # the grant writes no key
        w = c.put(key, b"v", lease=lease)
        self.assertGreater(w.put.version, 0)
        sibling = key_in_hash_slot(key, lease >> 48)
        other = key_in_hash_slot(key, (lease >> 48) ^ 1)
        self.assertTrue(c.txn().then_put(sibling, b"w", lease=lease).commit().txn.succeeded)
        with self.assertRaises(SlotdError) as ctx:
            c.put(other, b"no", lease=lease)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.FAILED_PRECONDITION)
        self.assertFalse(c.get(other).get.found)
        redirects = c.stats["redirects"]
        self.assertEqual(c.lease_keepalive(lease), (60, 2))
        self.assertEqual(c.lease_revoke(lease), 2)
        self.assertEqual(c.stats["redirects"], redirects)  # routed by the id's hash slot
        self.assertFalse(c.get(key).get.found)
        self.assertFalse(c.get(sibling).get.found)
        for call in (c.lease_keepalive, c.lease_revoke):
            with self.assertRaises(SlotdError) as ctx:
                call(lease)
            self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND, call.__name__)
        attempts = c.stats["attempts"]
        for bad in (lambda: c.lease_grant(key, 0), lambda: c.lease_keepalive(1 << 48),
                    lambda: c.lease_revoke((256 << 48) | 1)):
            with self.assertRaises(ValueError):
                bad()
        self.assertEqual(c.stats["attempts"], attempts)


class PythonClientSingleNodeTest(ClientChecks, h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.endpoints = [cls.server.addr]

    def any_stub(self):
        return self.server.stub

    def test_lease_expiry(self):
        """A key on a 2 s lease nobody keeps alive is deleted within a few seconds of the TTL."""
        c = self.client()
        key = h.unique_key("py/lexp")
        lease, _ = c.lease_grant(key, LEASE_TTL_S)
        c.put(key, b"v", lease=lease)
        start = time.monotonic()
        while c.get(key).get.found:
            self.assertLess(time.monotonic() - start, LEASE_TTL_S + LEASE_EXPIRY_SLACK_S,
                            "key on an expired lease still there")
            time.sleep(LEASE_POLL_S)
        with self.assertRaises(SlotdError) as ctx:
            c.lease_keepalive(lease)
        self.assertEqual(ctx.exception.code, grpc.StatusCode.NOT_FOUND)

    def test_route(self):
        c = self.client()
        route = c.route()
        self.assertEqual(len(route.hash_slot_table), h.HASH_SLOTS)
        self.assertEqual(route.hash_slot_table, c.route(refresh=True).hash_slot_table)
        for group in route.groups:
            self.assertEqual(c.leader_address(group.group_id), (group.leader, self.server.addr))


class PythonClientClusterTest(ClientChecks, h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)
        cls.endpoints = [cls.cluster.addr(1)]

    def any_stub(self):
        return self.cluster.stub(1)

    def test_every_group_direct_to_leader(self):
        c = self.client()
        route = self.cluster.wait_leaders()
        leaders = self.cluster.leaders(route)
        self.assertEqual(sorted(set(leaders.values())), [1, 2, 3], "leaders not spread")
        keys = self.cluster.keys_by_group("py/direct")
        c.route()
        for group, (key,) in sorted(keys.items()):
            self.assertEqual(c.leader_address(group),
                             (leaders[group], self.cluster.addr(leaders[group])))
            w = c.put(key, b"g%d" % group)
            self.assertEqual(w.group_id, group)
            r = c.get(key)
            self.assertEqual((r.get.value, r.get.version), (b"g%d" % group, w.put.version))
        # no_forward = true everywhere: a request that reached a non-leader would have come back
        # NOT_LEADER and been counted as a redirect.
        self.assertEqual(c.stats["redirects"], 0)
        self.assertEqual(c.stats["retries"], 0)
        self.assertEqual(c.stats["attempts"], 2 * len(keys))
        # Every value is readable from every node.
        for node in self.cluster.node_ids:
            for group, (key,) in keys.items():
                self.assertEqual(h.get(self.cluster.stub(node), key).get.value, b"g%d" % group)

    def test_not_leader_hint_followed(self):
        c = self.client()
        route = self.cluster.wait_leaders()
        group = self.cluster.group_ids[0]
        leader = self.cluster.leaders(route)[group]
        wrong = next(n for n in self.cluster.node_ids if n != leader)
        key = h.key_in_group(self.cluster.table, group, "py/hint")
        # The premise: the wrong node answers no_forward calls with a hint naming the leader.
        err, detail = self.assertRpcError(
            lambda: self.cluster.stub(wrong).Propose(h.pb.ProposeRequest(
                no_forward=True, put=h.pb.PutCommand(key=key, value=b"x")), timeout=5),
            grpc.StatusCode.FAILED_PRECONDITION, h.pb.ERROR_CODE_NOT_LEADER)
        self.assertEqual(detail.leader_hint.node_id, leader)
        c.route()
        c._leaders[group] = wrong  # a stale cache entry
        w = c.put(key, b"hinted")
        self.assertEqual(c.stats["redirects"], 1)
        self.assertEqual(c.leader_address(group), (leader, self.cluster.addr(leader)))
        self.assertEqual(w.group_id, group)
        c._leaders[group] = wrong
        r = c.get(key)
        self.assertEqual(c.stats["redirects"], 2)
        self.assertEqual((r.get.value, r.get.version), (b"hinted", w.put.version))
        self.assertEqual(c.stats["retries"], 0)

    def preferred_leader(self, c):
        """(group id, preferred leader) of the first group in the cluster state c reads: setting
        it again is a NOOP that still answers the controller revision, so the class's cluster
        keeps its leaders."""
        group = json.loads(c.cluster_state().state_json)["groups"][0]
        return group["id"], group["preferred_leader"]

    def assertNotReached(self, err, far, waited):
        """err: the failure of a call with min_revision far, which took waited seconds."""
        self.assertEqual(err.code, grpc.StatusCode.UNAVAILABLE, err)
        self.assertEqual(err.detail.field, "min_revision", err)
        self.assertEqual(err.error_code, "ERROR_CODE_ROUTE_NOT_READY")
        self.assertRegex(err.message, r"^min_revision %d not reached within 3000 ms: node [123] "
                         r"is at controller revision \d+$" % far)
        self.assertEqual(err.attempts, 1, "a min_revision failure went on to other endpoints")
        self.assertGreater(waited, NOT_REACHED_WAIT_MIN_S)
        self.assertLess(waited, NOT_REACHED_WAIT_MAX_S)

    def test_read_your_admin_writes(self):
        writer = self.client()
        self.assertEqual(writer.last_revision, 0)
        group, node = self.preferred_leader(writer)
        w = writer.admin("SetPreferredLeader",
                         admin_pb.SetPreferredLeaderRequest(group_id=group, node_id=node))
        self.assertEqual(w.outcome, admin_pb.OUTCOME_NOOP)
        self.assertGreater(w.revision, 0)
        self.assertEqual(writer.last_revision, w.revision)
        with self.assertRaises(AttributeError):
            writer.last_revision = 0  # read-only
        with self.assertRaises(ValueError):
            writer.admin("ClusterState", admin_pb.ClusterStateRequest())
        # Other endpoints (a dead one first), the revision carried over: answers at it or later.
        reader = self.client([dead_address(), self.cluster.addr(2), self.cluster.addr(3)])
        self.assertEqual(reader.observe_revision(writer.last_revision), w.revision)
        self.assertEqual(reader.observe_revision(1), w.revision)  # never lowered
        self.assertGreaterEqual(reader.task_status().revision, w.revision)
        self.assertGreaterEqual(reader.cluster_state().revision, w.revision)
        self.assertGreaterEqual(reader.route(refresh=True).route_revision, w.revision)
        self.assertGreaterEqual(reader.last_revision, w.revision)
        # A revision no node reaches, passed explicitly (reader) and carried in last_revision,
        # sent by default (carrier, router), at once: each fails after the node's 3 s wait.
        far = reader.last_revision + FAR_REVISIONS
        carrier = self.client([self.cluster.addr(3)])
        carrier.observe_revision(far)
        router = self.client([self.cluster.addr(1)])
        router.observe_revision(far)
        outcomes = {}

        def expect_failure(name, call):
            t0 = time.monotonic()
            try:
                call()
                outcomes[name] = (None, time.monotonic() - t0)
            except SlotdError as err:
                outcomes[name] = (err, time.monotonic() - t0)

        threads = [threading.Thread(target=expect_failure, args=args) for args in (
            ("explicit", lambda: reader.task_status(min_revision=far)),
            ("by default", carrier.cluster_state),
            ("route", router.route))]
        for t in threads:
            t.start()
        for t in threads:
            t.join(NOT_REACHED_WAIT_MAX_S * 2)
        for name in ("explicit", "by default", "route"):
            err, waited = outcomes[name]
            self.assertIsNotNone(err, "%s: min_revision %d answered" % (name, far))
            with self.subTest(name):
                self.assertNotReached(err, far, waited)
        self.assertLess(reader.last_revision, far)  # a failure raises nothing
        # An explicit 0 replaces last_revision for one call.
        self.assertGreaterEqual(carrier.task_status(min_revision=0).revision, w.revision)
        self.assertEqual(carrier.last_revision, far)

    def test_node_read_your_admin_writes(self):
        """The same through clients/node/index.js (createClient, admin, taskStatus, clusterState,
        route, lastRevision, observeRevision)."""
        node, _ = node_tools()
        group, leader = self.preferred_leader(self.client())
        proc = subprocess.run(
            [node, "-e", NODE_REVISION_SCRIPT, str(NODE_DIR / "index.js"), self.cluster.addr(1),
             ",".join([dead_address(), self.cluster.addr(2), self.cluster.addr(3)]), str(group),
             str(leader)], capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(out["initial"], "0")
        revision = int(out["write"]["revision"])
        self.assertEqual(out["write"]["outcome"], "OUTCOME_NOOP")
        self.assertGreater(revision, 0)
        self.assertEqual(out["write"]["last"], out["write"]["revision"])
        self.assertEqual(out["observed"], out["write"]["revision"])
        for name in ("task_status", "cluster_state", "route", "reader_last", "explicit_zero"):
            self.assertGreaterEqual(int(out[name]), revision, name)
        far = int(out["far"])
        self.assertEqual(far, int(out["reader_last"]) + FAR_REVISIONS)
        for name in ("explicit", "by_default", "route_by_default"):
            with self.subTest(name):
                failed = out[name]
                self.assertEqual(failed.get("code"), grpc.StatusCode.UNAVAILABLE.value[0], failed)
                self.assertEqual(failed["field"], "min_revision")
                self.assertRegex(failed["details"], r"^min_revision %d not reached within 3000 ms: "
                                 r"node [123] is at controller revision \d+$" % far)
                self.assertEqual(failed["attempts"], 1)
                self.assertGreater(failed["ms"] / 1000.0, NOT_REACHED_WAIT_MIN_S)
                self.assertLess(failed["ms"] / 1000.0, NOT_REACHED_WAIT_MAX_S)
        self.assertEqual(out["reader_last_after"], out["reader_last"])
        self.assertEqual(out["not_a_write"], "TypeError")


class PythonClientWatchTest(h.SlotdTestCase):
    """Client.watch resumes by itself: a prefix watch through three endpoints keeps every acked
    put exactly once while the node it streams from is killed -9."""

    def test_watch_resumes_on_the_next_endpoint(self):
        cluster = self.new_cluster(size=3)
        c = Client([cluster.addr(n) for n in (1, 2, 3)], deadline=3.0)
        self.addCleanup(c.close)
        w = c.watch(prefix=b"pyw/")
        got, done = [], threading.Event()

        def follow():
            try:
                for msg in w:
                    got.extend((e.key, e.index) for e in msg.events)
            except SlotdError as err:
                got.append(("error", str(err)))
            done.set()

        t = threading.Thread(target=follow, daemon=True)
        t.start()
        writer = Client([cluster.addr(2), cluster.addr(3)], deadline=3.0)
        self.addCleanup(writer.close)
        deadline = time.monotonic() + 10
        while not w.positions and time.monotonic() < deadline:  # the created message
            time.sleep(0.05)
        acked = [(b"pyw/a%d" % i, writer.put(b"pyw/a%d" % i, b"x").applied_index)
                 for i in range(20)]
        cluster.kill(1)  # the first endpoint: the one the watch streams from
        for i in range(20):
            for attempt in range(50):
                try:
                    acked.append((b"pyw/b%d" % i, writer.put(b"pyw/b%d" % i, b"y").applied_index))
                    break
                except SlotdError:
                    time.sleep(0.1)
        deadline = time.monotonic() + 20
        while not set(acked) <= set(got) and time.monotonic() < deadline:
            time.sleep(0.05)
        w.cancel()
        done.wait(10)
        self.assertTrue(set(acked) <= set(got), (sorted(set(acked) - set(got))[:5], got[-3:]))
        self.assertEqual(len(got), len(set(got)), "an event came twice")
        self.assertGreaterEqual(w.resumes, 1)


# Run by `node -e` with argv: index.js path, endpoints (comma-separated), prefix, events wanted.
# Prints "created" once the watch started, then one JSON line per event, then a summary line.
NODE_WATCH_SCRIPT = r"""
'use strict';
const [indexPath, addrs, prefix, wanted] = process.argv.slice(1);
const { createClient } = require(indexPath);
const client = createClient(addrs.split(','));
let n = 0;
let created = false;
const w = client.watch({ prefix }, (msg) => {
  if (msg.created && !created) console.log('created'); // a resumed stream starts with one too
  created = created || msg.created;
  for (const e of msg.events) {
    console.log(JSON.stringify({ key: e.key.toString(), index: String(e.index), type: e.type }));
    n += 1;
  }
  if (n >= Number(wanted)) w.cancel();
});
const timer = setTimeout(() => w.cancel(), 60000);
w.done.then(() => {
  clearTimeout(timer);
  console.log(JSON.stringify({ done: n, resumes: w.resumes }));
  client.close();
}, (err) => {
  console.log(JSON.stringify({ error: err.code, details: err.details }));
  client.close();
  process.exit(1);
});
"""


class NodeClientWatchTest(h.SlotdTestCase):
    """clients/node watch() resumes by itself: every acked put once across kill -9 of the node
    it streams from."""

    def test_watch_resumes_on_the_next_endpoint(self):
        node, _ = node_tools()
        cluster = self.new_cluster(size=3)
        addrs = ",".join(cluster.addr(n) for n in (1, 2, 3))
        proc = subprocess.Popen([node, "-e", NODE_WATCH_SCRIPT, str(NODE_DIR / "index.js"), addrs,
                                 "njs/", "40"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertEqual(proc.stdout.readline().strip(), "created")
        writer = Client([cluster.addr(2), cluster.addr(3)], deadline=3.0)
        self.addCleanup(writer.close)
        acked = [("njs/a%d" % i, writer.put(b"njs/a%d" % i, b"x").applied_index)
                 for i in range(20)]
        cluster.kill(1)
        for i in range(20):
            for attempt in range(50):
                try:
                    acked.append(("njs/b%d" % i,
                                  writer.put(b"njs/b%d" % i, b"y").applied_index))
                    break
                except SlotdError:
                    time.sleep(0.1)
        out, err = proc.communicate(timeout=70)
        lines = [json.loads(line) for line in out.splitlines() if line.strip()]
        self.assertEqual(proc.returncode, 0, (lines[-1:], err[-2000:]))
        events = [(e["key"], int(e["index"])) for e in lines if "key" in e]
        self.assertEqual(sorted(events), sorted(acked))
        self.assertGreaterEqual(lines[-1]["resumes"], 1, lines[-1])


# Run by `node -e` with argv: index.js path, endpoint, prefix, key count, then k1 and k2 (one
# slot group) and k3 (another). Prints one JSON object.
NODE_RANGE_TXN_SCRIPT = r"""
'use strict';
const [indexPath, addr, prefix, count, k1, k2, k3] = process.argv.slice(1);
const { createClient } = require(indexPath);
(async () => {
  const c = createClient([addr]);
  const out = {};
  for (let i = 0; i < Number(count); i += 1) await c.put(prefix + i, 'v' + i);
  out.seen = [];
  for await (const e of c.range({ prefix, pageLimit: 3 })) {
    out.seen.push([e.key.toString(), e.value.toString()]);
  }
  await c.put(k1, 'one');
  const r1 = await c.txn().ifValue(k1, '=', 'one').ifAbsent(k2).thenPut(k2, 'two')
    .thenGet(k1).elseGet(k1).commit();
  out.r1 = [r1.txn.succeeded, r1.txn.results[1].get.value.toString()];
  const r2 = await c.txn().ifAbsent(k2).thenPut(k2, 'again').elseGet(k2).commit();
  out.r2 = [r2.txn.succeeded, r2.txn.results[0].get.value.toString()];
  try {
    await c.txn().thenPut(k1, 'x').thenPut(k3, 'y').commit();
    out.cross = 'committed';
  } catch (err) {
    out.cross = err.code;
  }
  try {
    c.txn().ifValue(k1, '~', 'x');
    out.badOp = 'accepted';
  } catch (err) {
    out.badOp = err.name;
  }
  console.log(JSON.stringify(out));
  c.close();
})().catch((err) => { console.error(err); process.exit(1); });
"""


# Run by `node -e` with argv: index.js path, endpoint, key, a key of the same hash slot, a key
# of another hash slot, the short TTL, the poll bound in ms. Prints one JSON object.
NODE_LEASE_SCRIPT = r"""
'use strict';
const [indexPath, addr, key, sibling, other, ttl, boundMs] = process.argv.slice(1);
const { createClient, leaseHashSlot } = require(indexPath);
const codeOf = async (call) => {
  try { await call(); return 0; } catch (err) { return err.code; }
};
(async () => {
  const c = createClient([addr]);
  const out = {};
  // a short lease nobody keeps alive, on its own key
  const short = (await c.leaseGrant(key + '/exp', Number(ttl))).lease_grant.id;
  await c.put(key + '/exp', 'e', { lease: short });
  const g = (await c.leaseGrant(key, 60)).lease_grant;
  out.grant = [g.id, g.ttl_seconds, leaseHashSlot(g.id)];
  out.foundAfterGrant = (await c.get(key)).get.found;
  await c.put(key, 'v', { lease: g.id });
  out.txn = (await c.txn().thenPut(sibling, 'w', { lease: BigInt(g.id) }).commit()).txn.succeeded;
  out.otherSlot = await codeOf(() => c.put(other, 'no', { lease: g.id }));
  const k = (await c.leaseKeepAlive(g.id)).lease_keep_alive;
  out.keepAlive = [k.ttl_seconds, k.keys];
  out.revoke = (await c.leaseRevoke('0x' + BigInt(g.id).toString(16))).lease_revoke.keys_deleted;
  out.foundAfterRevoke = [(await c.get(key)).get.found, (await c.get(sibling)).get.found];
  out.gone = [await codeOf(() => c.leaseKeepAlive(g.id)), await codeOf(() => c.leaseRevoke(g.id))];
  try { c.leaseKeepAlive(1n << 48n); out.badId = 'sent'; } catch (err) { out.badId = err.name; }
  try { c.leaseGrant(key, 0); out.badTtl = 'sent'; } catch (err) { out.badTtl = err.name; }
  const t0 = Date.now();
  while ((await c.get(key + '/exp')).get.found && Date.now() - t0 < Number(boundMs)) {
    await new Promise((resolve) => { setTimeout(resolve, 200); });
  }
  out.expired = !(await c.get(key + '/exp')).get.found;
  out.short = short;
  console.log(JSON.stringify(out));
  c.close();
})().catch((err) => { console.error(err); process.exit(1); });
"""


# Run by `node -e` with argv: index.js path, endpoint, channel id, events wanted. Prints
# "created", then one JSON object per event, then {"done": n}.
NODE_TYPED_WATCH_SCRIPT = r"""
'use strict';
const [indexPath, addr, channelId, wanted] = process.argv.slice(1);
const { createClient } = require(indexPath);
const client = createClient([addr]);
let n = 0;
const w = client.watch({ typed: { kind: 'TYPED_WATCH_KIND_SUBSCRIBERS', id: channelId } },
  (msg) => {
    if (msg.created) console.log('created');
    for (const e of msg.events) {
      console.log(JSON.stringify({ type: e.type, table: e.table, key: e.key.toString('hex') }));
      n += 1;
    }
    if (n >= Number(wanted)) w.cancel();
  });
const timer = setTimeout(() => w.cancel(), 30000);
w.done.then(() => {
  clearTimeout(timer);
  console.log(JSON.stringify({ done: n }));
  client.close();
}, (err) => {
  console.log(JSON.stringify({ error: err.code, details: err.details }));
  client.close();
  process.exit(1);
});
"""


class NodeExampleTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.node, cls.npm = node_tools()
        cls.server = cls.new_class_server()

    def run_example(self, *args):
        proc = subprocess.run([self.node, str(NODE_DIR / "example.js")] + list(args),
                              capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        return proc.returncode, proc.stdout, proc.stderr

    def test_example_put_get(self):
        key = h.unique_key("node").decode()
        code, out, err = self.run_example("--addr", self.server.addr, "--key", key,
                                          "--value", "from node")
        self.assertEqual(code, 0, err)
        lines = out.splitlines()
        self.assertEqual(len(lines), 2, out)
        m = re.fullmatch(r"put (\S+): group (\d+), applied index (\d+), version (\d+)", lines[0])
        self.assertIsNotNone(m, lines[0])
        self.assertEqual(m.group(1), key)
        group, version = int(m.group(2)), int(m.group(4))
        self.assertEqual(group, self.server.route().hash_slot_table[h.hash_slot(key.encode())])
        self.assertEqual(int(m.group(3)), version)
        self.assertEqual(lines[1], "get %s: found=true value='from node' version %d"
                         % (key, version))
        raw = h.get(self.server.stub, key.encode())
        self.assertEqual((raw.get.value, raw.get.version), (b"from node", version))

    def test_range_and_txn(self):
        """clients/node range() pages through every key under a prefix once; the txn() builder
        runs the success branch, then (its compare now false) the failure branch without
        writing, and a txn over two groups is refused INVALID_ARGUMENT with nothing written."""
        table = list(self.server.route().hash_slot_table)
        groups = sorted(set(table))
        prefix = h.unique_key("njsrange").decode() + "/"
        k1 = h.key_in_group(table, groups[0], prefix + "t1").decode()
        k2 = h.key_in_group(table, groups[0], prefix + "t2").decode()
        k3 = h.key_in_group(table, groups[1], prefix + "t3").decode()
        count = 20
        proc = subprocess.run([self.node, "-e", NODE_RANGE_TXN_SCRIPT, str(NODE_DIR / "index.js"),
                               self.server.addr, prefix + "k", str(count), k1, k2, k3],
                              capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        self.assertEqual(sorted(out["seen"]),
                         sorted([prefix + "k%d" % i, "v%d" % i] for i in range(count)))
        self.assertEqual(out["r1"], [True, "one"])
        self.assertEqual(out["r2"], [False, "two"])
        self.assertEqual(out["cross"], grpc.StatusCode.INVALID_ARGUMENT.value[0])
        self.assertEqual(out["badOp"], "TypeError")
        self.assertFalse(h.get(self.server.stub, k3.encode()).get.found)
        self.assertEqual(h.get(self.server.stub, k2.encode()).get.value, b"two")

    def test_typed_watch_of_subscribers(self):
        """clients/node watch({typed}) streams one channel's subscriber rows."""
        cid = h.unique_key("njstw").decode()[-12:]
        proc = subprocess.Popen([self.node, "-e", NODE_TYPED_WATCH_SCRIPT,
                                 str(NODE_DIR / "index.js"), self.server.addr, cid, "2"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: proc.poll() is None and proc.kill())
        self.assertEqual(proc.stdout.readline().strip(), "created")
        stub = self.server.stub
        stub.Propose(h.pb.ProposeRequest(create_channel=h.pb.CreateChannelCommand(
            channel_id=cid, channel_type=2)), timeout=5)
        stub.Propose(h.pb.ProposeRequest(add_subscribers=h.pb.SubscribersCommand(
            channel_id=cid, channel_type=2, uids=["p", "q"])), timeout=5)
        out, err = proc.communicate(timeout=NODE_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, err)
        lines = [json.loads(x) for x in out.splitlines() if x.strip()]
        prefix = bytes([len(cid)]) + cid.encode() + b"\x02\x01"  # [type 2][subscribers]
        self.assertEqual([(e["type"], e["table"], e["key"]) for e in lines[:-1]],
                         [("WATCH_EVENT_TYPE_PUT", "TYPED_TABLE_CHANNEL_MEMBER",
                           (prefix + u).hex()) for u in (b"p", b"q")])
        self.assertEqual(lines[-1], {"done": 2})

    def test_leases(self):
        """clients/node leaseGrant / put({lease}) / txn thenPut({lease}) / leaseKeepAlive /
        leaseRevoke: the revoke deletes both keys, later calls reject NOT_FOUND, bad ids and
        TTLs throw before any call, and a key on a 2 s lease nobody keeps alive expires."""
        key = h.unique_key("njslease")
        sibling = key_in_hash_slot(key + b"/s", h.hash_slot(key))
        other = key_in_hash_slot(key + b"/o", h.hash_slot(key) ^ 1)
        bound_ms = int((LEASE_TTL_S + LEASE_EXPIRY_SLACK_S) * 1000)
        proc = subprocess.run([self.node, "-e", NODE_LEASE_SCRIPT, str(NODE_DIR / "index.js"),
                               self.server.addr, key.decode(), sibling.decode(), other.decode(),
                               str(LEASE_TTL_S), str(bound_ms)],
                              capture_output=True, text=True, timeout=NODE_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        out = json.loads(proc.stdout)
        lease = int(out["grant"][0])
        self.assertEqual(out["grant"][1:], [60, h.hash_slot(key)])
        self.assertEqual(lease >> 48, h.hash_slot(key))
        self.assertFalse(out["foundAfterGrant"])
        self.assertTrue(out["txn"])
        self.assertEqual(out["otherSlot"], grpc.StatusCode.FAILED_PRECONDITION.value[0])
        self.assertFalse(h.get(self.server.stub, other).get.found)
        self.assertEqual(out["keepAlive"], [60, 2])
        self.assertEqual(out["revoke"], 2)
        self.assertEqual(out["foundAfterRevoke"], [False, False])
        self.assertEqual(out["gone"], [grpc.StatusCode.NOT_FOUND.value[0]] * 2)
        self.assertEqual((out["badId"], out["badTtl"]), ("RangeError", "RangeError"))
        self.assertTrue(out["expired"], "key on an expired lease still there")

    def test_example_unreachable(self):
        code, out, err = self.run_example("--addr", dead_address())
        self.assertEqual(code, 1, out + err)
        self.assertIn("UNAVAILABLE", err)

    def test_example_usage(self):
        code, _, err = self.run_example("--bogus", "x")
        self.assertEqual(code, 2)
        self.assertIn("usage:", err)


if __name__ == "__main__":
    unittest.main()
