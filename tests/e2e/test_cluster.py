# test_cluster.py - three slotd nodes: forwarding, leader hints, kill -9, snapshots, minority, SIGTERM.
import os
import random
import re
import shutil
import subprocess
import sys
import threading
import time
import unittest
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

LIN = pb.CONSISTENCY_LINEARIZABLE
LEADER_LOCAL = pb.CONSISTENCY_LEADER_LOCAL
LOCAL = pb.CONSISTENCY_LOCAL
UNAVAILABLE = grpc.StatusCode.UNAVAILABLE
# What a node without a quorum may say in its ErrorDetail.
NO_QUORUM_DETAILS = (pb.ERROR_CODE_NO_LEADER, pb.ERROR_CODE_UNKNOWN_OUTCOME)

READ_IN_FLIGHT = 64
PROBE_POLL_S = 0.02          # pause between failed probe writes
PROBE_RPC_TIMEOUT_S = 1.0    # deadline of one probe write
FAILOVER_BOUND_S = 15.0      # a group must accept writes again within this after a kill -9
WARMUP_S = 0.5               # writers run this long before the kill
WRITER_OPS_MAX = 2000        # per writer
WRITER_PAUSE_S = 0.01        # between a writer's acknowledged writes
WRITE_TIMEOUT_S = 2.0
CATCH_UP_BOUND_S = 20.0      # a restarted or resumed node serves LOCAL reads within this
CATCH_UP_RPC_TIMEOUT_S = 3.0
SNAP_COMPACT_ENTRIES = 200
SNAP_COMPACT_TAIL = 20
SNAP_GROUPS = 4
SNAP_KEYS_PER_GROUP = 10
SNAP_ROUNDS = 30             # each key written this often: 300 entries per group > 200 + 20
SNAP_WRITE_BOUND_S = 90.0
# Streamed snapshot test: 4 KiB chunks, ~1.6 MiB of rows in one group (~400 chunks).
STREAM_CHUNK_BYTES = 4096
STREAM_KEYS = 400
STREAM_VALUE_BYTES = 4000
STREAM_IN_FLIGHT = 64
# Bounded transfers test: 3000 rows of 200 bytes in chunks of 256 bytes (one row each), so the
# first transfer (~3000 chunk round trips) still runs when the second follower asks.
BOUND_KEYS = 3000
BOUND_VALUE_BYTES = 200
BOUND_IN_FLIGHT = 256
ABANDON_KEYS = 3000
ABANDON_IDLE_MS = 2000       # --snapshot-recv-idle-ms of the abandoned-receive test
ABANDON_INTO_S = 0.3         # the transfer runs this long before its sender is stopped
DISKFULL_KEYS = 400
ABANDON_BOUND_S = 5.0        # the follower logs the abandonment within this after the stop
MINORITY_DEADLINE_S = 2.0
RECOVER_BOUND_S = 15.0
HEALTH_BOUND_S = 5.0
# A leader lease lasts (election_tick - 2 - drift) ticks from the heartbeat round a quorum
# answered: 7 x 100 ms with the default flags (raft/README.md "Leases").
LEASE_S = 0.7
SIGTERM_FAILOVER_S = 2.0     # after a clean stop, its groups take writes within this


def _value_for(key, tag=b""):
    return b"value/" + tag + b"/" + key


def _read_all(test, stub, expected, consistency=LIN, use_min_index=False, what=""):
    """Reads every key of expected {key: (value, version, group_id)} through stub and asserts
    value, version and group; LOCAL reads pass the version as min_applied_index."""
    items = sorted(expected.items())
    wrong = []
    for start in range(0, len(items), READ_IN_FLIGHT):
        batch = items[start:start + READ_IN_FLIGHT]
        futures = [stub.Read.future(pb.ReadRequest(
            consistency=consistency, get=pb.GetQuery(key=key),
            min_applied_index=version if use_min_index else 0), timeout=h.RPC_TIMEOUT_S)
            for key, (_, version, _) in batch]
        for (key, (value, version, group_id)), future in zip(batch, futures):
            try:
                resp = future.result()
            except grpc.RpcError as err:
                wrong.append((key, "%s: %s" % (err.code(), err.details())))
                continue
            got = (resp.get.found, resp.get.value, resp.get.version, resp.group_id)
            if got != (True, value, version, group_id):
                wrong.append((key, got[:1] + (got[1][:40],) + got[2:],
                              "want version %d group %d" % (version, group_id)))
            elif use_min_index and resp.applied_index < version:
                wrong.append((key, "applied_index %d < min_applied_index %d"
                              % (resp.applied_index, version)))
    test.assertEqual(wrong[:5], [], "%s: %d of %d reads wrong" % (what, len(wrong), len(items)))


def _error_name(err):
    """"UNAVAILABLE/ERROR_CODE_NO_LEADER" for an RpcError (detail part only when present)."""
    detail = h.error_detail(err)
    name = err.code().name
    return name + "/" + pb.ErrorCode.Name(detail.code) if detail is not None else name


def _assert_versions_unique(test, writes, what):
    """writes: (key, version, group_id) of distinct acknowledged writes. Two of them in one group
    must never share an applied index (e.g. after a failover)."""
    seen = {}
    clashes = []
    for key, version, group_id in writes:
        other = seen.setdefault((group_id, version), key)
        if other != key:
            clashes.append((group_id, version, other, key))
    test.assertEqual(clashes[:5], [], "%s: %d applied indexes acknowledged twice"
                     % (what, len(clashes)))


def _probe_group(stub, table, group_id, t0, bound_s, rng_seed, out):
    """Writes fresh keys of group_id through stub every PROBE_POLL_S until one is acknowledged;
    out[group_id] = (seconds from t0 to the ack, key, value, response), or None after bound_s."""
    rng = random.Random(rng_seed)
    while time.monotonic() - t0 < bound_s:
        key = h.key_in_group(table, group_id, "probe/g%d" % group_id, rng)
        value = _value_for(key, b"probe")
        try:
            resp = h.put(stub, key, value, timeout=PROBE_RPC_TIMEOUT_S)
        except grpc.RpcError:
            time.sleep(PROBE_POLL_S)
            continue
        out[group_id] = (time.monotonic() - t0, key, value, resp)
        return
    out[group_id] = None


def probe_writes(cluster, vias, group_ids, t0, bound_s, seed):
    """For every group in parallel: time from t0 until a write to it succeeds through one of
    vias (group g uses vias[g % len(vias)]). Returns {group_id: (s, key, value, resp) or None}."""
    out = {}
    threads = [threading.Thread(target=_probe_group, daemon=True,
                                args=(cluster.stub(vias[g % len(vias)]), cluster.table, g, t0,
                                      bound_s, "%s/%d" % (seed, g), out))
               for g in group_ids]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(bound_s + PROBE_RPC_TIMEOUT_S + 5)
    return out


def _abandoned_total(port):
    """slotd_snapshot_recv_abandoned_total scraped from a node's /metrics."""
    with urllib.request.urlopen("http://127.0.0.1:%d/metrics" % port, timeout=5) as resp:
        text = resp.read().decode()
    m = re.search(r"^slotd_snapshot_recv_abandoned_total (\S+)$", text, re.M)
    if m is None:
        raise AssertionError("no slotd_snapshot_recv_abandoned_total in /metrics")
    return float(m.group(1))


class Ledger:
    """Writes acknowledged by the background writers: key -> (value, version, group_id)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}
        self.errors = {}  # "CODE/DETAIL_CODE" -> count
        self.problems = []


def _writer(addr, name, ledger, stop):
    """Puts unique keys through addr until stop is set (bounded by WRITER_OPS_MAX)."""
    channel = h.open_channel(addr)
    stub = h.pb_grpc.MetadataStub(channel)
    try:
        for i in range(WRITER_OPS_MAX):
            if stop.is_set():
                return
            key = b"load/%s/%06d" % (name.encode(), i)
            value = _value_for(key)
            try:
                resp = h.put(stub, key, value, timeout=WRITE_TIMEOUT_S)
            except grpc.RpcError as err:
                error = _error_name(err)
                with ledger.lock:
                    ledger.errors[error] = ledger.errors.get(error, 0) + 1
                time.sleep(PROBE_POLL_S)
                continue
            with ledger.lock:
                if resp.put.version != resp.applied_index or resp.applied_index == 0:
                    ledger.problems.append("%r: version %d applied_index %d"
                                           % (key, resp.put.version, resp.applied_index))
                ledger.acked[key] = (value, resp.put.version, resp.group_id)
            time.sleep(WRITER_PAUSE_S)
    finally:
        channel.close()


def _wait_local_read(server, key, min_index, bound_s):
    """LOCAL read of key with min_applied_index on server, retried until it answers, bound_s
    passes or the process exits. Returns (response or None, seconds, last error)."""
    stub = server.stub
    t0 = time.monotonic()
    last = None
    while time.monotonic() - t0 < bound_s and server.running():
        try:
            resp = h.get(stub, key, consistency=LOCAL, min_applied_index=min_index,
                         timeout=CATCH_UP_RPC_TIMEOUT_S)
            return resp, time.monotonic() - t0, None
        except grpc.RpcError as err:
            last = "%s: %s" % (err.code(), err.details())
            time.sleep(0.05)
    return None, time.monotonic() - t0, last


def _wait_health(server, serving, bound_s):
    """Seconds until Health.Check("") on server is SERVING (serving=True) or answers anything
    else (serving=False); None after bound_s."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < bound_s:
        try:
            resp = server.health.Check(h.health_pb2.HealthCheckRequest(service=""), timeout=1.0)
            is_serving = resp.status == h.health_pb2.HealthCheckResponse.SERVING
        except grpc.RpcError:
            is_serving = False
        if is_serving == serving:
            return time.monotonic() - t0
        time.sleep(0.05)
    return None


def _node_state(cluster, node_id):
    """"running", or how the node's process ended (with its sanitizer report): for messages."""
    server = cluster.server(node_id)
    if server.proc is None:
        return "not started"
    status = server.proc.poll()
    if status is None:
        return "running"
    return "exited with status %d (%s)" % (status, server.sanitizer_report() or "no sanitizer report")


class ClusterBasicsTest(h.SlotdTestCase):
    """One three-node cluster with default flags for the class; nothing here disturbs it."""

    REPLICAS = None  # the default, min(3, nodes)

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3, replicas=cls.REPLICAS)

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def converged_route(self):
        """A route on which every node reports the same leader and term for every group."""
        c = self.cluster
        deadline = time.monotonic() + h.ROUTE_CONVERGE_S
        while True:
            routes = {n: c.wait_leaders(via=n) for n in c.node_ids}
            views = {n: {g.group_id: (g.leader, g.leader_term) for g in r.groups}
                     for n, r in routes.items()}
            if all(v == views[c.node_ids[0]] for v in views.values()):
                return routes[c.node_ids[0]]
            if time.monotonic() > deadline:
                self.fail("nodes disagree on leaders after %.0f s: %s" % (
                    h.ROUTE_CONVERGE_S,
                    " | ".join("node %d: %s" % (n, h.route_summary(r)) for n, r in routes.items())))
            time.sleep(0.1)

    def test_route_and_health_on_every_node(self):
        c = self.cluster
        for node_id in c.node_ids:
            resp = c.server(node_id).health.Check(h.health_pb2.HealthCheckRequest(service=""),
                                                  timeout=5)
            self.assertEqual(resp.status, h.health_pb2.HealthCheckResponse.SERVING)
            route = c.wait_leaders(via=node_id)
            self.assertEqual(list(route.hash_slot_table),
                             h.expected_hash_slot_table(c.slot_groups))
            for group in route.groups:
                self.assertEqual(sorted(group.voters), sorted(c.voters(group.group_id)),
                                 "node %d: group %d voters" % (node_id, group.group_id))
                self.assertGreaterEqual(group.leader_term, 1)
        route = self.converged_route()
        led = {n: sorted(g for g, l in c.leaders(route).items() if l == n) for n in c.node_ids}
        for node_id, groups in led.items():
            self.assertTrue(groups, "initial leaders are not spread: %s" % h.route_summary(route))

    def test_writes_via_any_node_read_linearizably_everywhere(self):
        c = self.cluster
        written = {}
        for via in c.node_ids:
            for group_id, keys in c.keys_by_group("via%d" % via, self.rng, per_group=2).items():
                for key in keys:
                    value = _value_for(key, b"via%d" % via)
                    resp = h.put(c.stub(via), key, value)
                    self.assertEqual(resp.group_id, group_id, "key %r via node %d" % (key, via))
                    self.assertGreater(resp.applied_index, 0)
                    self.assertEqual(resp.put.version, resp.applied_index)
                    self.assertGreaterEqual(resp.term, 1)
                    written[key] = (value, resp.put.version, group_id)
        self.assertEqual(len(written), len(c.node_ids) * len(c.group_ids) * 2)
        _assert_versions_unique(self, ((k, v[1], v[2]) for k, v in written.items()), "puts")
        for reader in c.node_ids:
            _read_all(self, c.stub(reader), written, LIN, what="LINEARIZABLE via node %d" % reader)
        for reader in c.node_ids:
            hosted = {k: v for k, v in written.items() if reader in c.voters(v[2])}
            self.assertTrue(hosted)
            _read_all(self, c.stub(reader), hosted, LOCAL, use_min_index=True,
                      what="LOCAL with min_applied_index on node %d" % reader)

    def test_no_forward_names_the_leader(self):
        c = self.cluster
        route = self.converged_route()
        groups = {g.group_id: g for g in route.groups}
        for group_id in c.group_ids:
            leader, term = groups[group_id].leader, groups[group_id].leader_term
            key = h.key_in_group(c.table, group_id, "nofwd", self.rng)
            made = c.stub(leader).Propose(pb.ProposeRequest(
                no_forward=True, put=pb.PutCommand(key=key, value=b"at leader")),
                timeout=h.RPC_TIMEOUT_S)
            self.assertEqual(made.group_id, group_id)
            for consistency in (LIN, LEADER_LOCAL):
                got = c.stub(leader).Read(pb.ReadRequest(
                    consistency=consistency, no_forward=True, get=pb.GetQuery(key=key)),
                    timeout=h.RPC_TIMEOUT_S)
                self.assertEqual((got.get.value, got.get.version),
                                 (b"at leader", made.put.version))
            for node_id in c.node_ids:
                if node_id == leader:
                    continue
                calls = [
                    ("Propose", lambda n=node_id: c.stub(n).Propose(pb.ProposeRequest(
                        no_forward=True, put=pb.PutCommand(key=key, value=b"not here")),
                        timeout=h.RPC_TIMEOUT_S)),
                    ("Read LINEARIZABLE", lambda n=node_id: c.stub(n).Read(pb.ReadRequest(
                        consistency=LIN, no_forward=True, get=pb.GetQuery(key=key)),
                        timeout=h.RPC_TIMEOUT_S)),
                    ("Read LEADER_LOCAL", lambda n=node_id: c.stub(n).Read(pb.ReadRequest(
                        consistency=LEADER_LOCAL, no_forward=True, get=pb.GetQuery(key=key)),
                        timeout=h.RPC_TIMEOUT_S)),
                ]
                for what, call in calls:
                    with self.subTest(group=group_id, node=node_id, call=what):
                        _, detail = self.assertRpcError(call, grpc.StatusCode.FAILED_PRECONDITION,
                                                        detail_code=pb.ERROR_CODE_NOT_LEADER)
                        hint = detail.leader_hint
                        self.assertEqual((hint.node_id, hint.address, hint.group_id, hint.term),
                                         (leader, c.addr(leader), group_id, term))
                if node_id in c.voters(group_id):
                    got = c.stub(node_id).Read(pb.ReadRequest(
                        consistency=LOCAL, no_forward=True, min_applied_index=made.put.version,
                        get=pb.GetQuery(key=key)), timeout=h.RPC_TIMEOUT_S)
                    self.assertEqual((got.get.value, got.get.version, got.group_id),
                                     (b"at leader", made.put.version, group_id))
            # The refused no_forward write did not happen anywhere.
            got = h.get(c.stub(leader), key)
            self.assertEqual((got.get.value, got.get.version), (b"at leader", made.put.version))


class ClusterBasicsTwoReplicasTest(ClusterBasicsTest):
    """The same with --replicas 2: every node hosts only some groups, so it forwards to groups
    it does not host and learns their leaders by polling its peers."""

    REPLICAS = 2


class ClusterFailureTest(h.SlotdTestCase):
    """Each test starts its own three-node cluster and breaks it."""

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def test_kill9_busiest_leader_under_writes(self):
        c = self.new_cluster(size=3)
        route = c.wait_leaders()
        victim = c.busiest_leader(route)
        victim_groups = sorted(g for g, l in c.leaders(route).items() if l == victim)
        survivors = [n for n in c.node_ids if n != victim]

        ledger = Ledger()
        stop = threading.Event()
        writers = [threading.Thread(target=_writer, daemon=True,
                                    args=(c.addr(n), "node%d" % n, ledger, stop))
                   for n in c.node_ids]
        for thread in writers:
            thread.start()
        time.sleep(WARMUP_S)
        with ledger.lock:
            acked_before_kill = len(ledger.acked)
        t_kill = time.monotonic()
        report = c.kill(victim)
        probes = probe_writes(c, survivors, c.group_ids, t_kill, FAILOVER_BOUND_S,
                              "%d/kill9" % h.SEED)
        stop.set()
        for thread in writers:
            thread.join(WRITE_TIMEOUT_S + 5)
        self.assertFalse(any(t.is_alive() for t in writers), "a writer is stuck")
        self.assertIsNone(report, "sanitizer report before kill -9")
        self.assertGreater(acked_before_kill, 0, "no write acknowledged before the kill")

        stuck = [g for g in c.group_ids if probes.get(g) is None]
        self.assertEqual(stuck, [], "groups without a successful write %.0f s after kill -9 of "
                         "node %d: %s" % (FAILOVER_BOUND_S, victim,
                                          h.route_summary(c.route(survivors[0]))))
        ms = {g: probes[g][0] * 1000 for g in c.group_ids}
        lost = [ms[g] for g in victim_groups]
        sys.stderr.write("\n  kill -9 node %d (leader of groups %s); %d writes acknowledged "
                         "before the kill; per-group ms until a write succeeds: %s\n"
                         % (victim, victim_groups, acked_before_kill,
                            " ".join("g%d=%.0f" % (g, ms[g]) for g in c.group_ids)))
        sys.stderr.write("  unavailability_ms p50=%.0f p99=%.0f groups=%d\n"
                         % (h.percentile(list(ms.values()), 0.5),
                            h.percentile(list(ms.values()), 0.99), len(ms)))
        sys.stderr.write("  unavailability_ms_leader_killed p50=%.0f p99=%.0f groups=%d\n"
                         % (h.percentile(lost, 0.5), h.percentile(lost, 0.99), len(lost)))

        with ledger.lock:
            acked = dict(ledger.acked)
            errors = dict(ledger.errors)
            self.assertEqual(ledger.problems, [])
        sys.stderr.write("  writers: %d acknowledged, errors %s\n" % (len(acked), errors))
        # A server answers before the deadline (UNAVAILABLE); DEADLINE_EXCEEDED means it hung.
        self.assertEqual([e for e in errors if e.startswith("DEADLINE_EXCEEDED")], [],
                         "writes hung past their %.0f s deadline: %s" % (WRITE_TIMEOUT_S, errors))
        for group_id, (_, key, value, resp) in probes.items():
            acked[key] = (value, resp.put.version, group_id)
        _assert_versions_unique(self, ((k, v[1], v[2]) for k, v in acked.items()),
                                "writes around kill -9")
        _read_all(self, c.stub(survivors[0]), acked, LIN,
                  what="acknowledged writes after kill -9, LINEARIZABLE via node %d"
                  % survivors[0])

        c.restart(victim)
        t0 = time.monotonic()
        latest = {}
        for group_id in c.group_ids:
            if victim not in c.voters(group_id):
                continue
            key = h.key_in_group(c.table, group_id, "after-restart", self.rng)
            # the restarted node may be the group's preferred leader and take leadership back
            resp = h.put_retrying(c.stub(survivors[group_id % 2]), key, b"latest",
                                  b"after-restart-%d" % group_id)
            got, _, last = _wait_local_read(c.server(victim), key, resp.applied_index,
                                            CATCH_UP_BOUND_S)
            self.assertIsNotNone(got, "restarted node %d (%s): group %d LOCAL read with "
                                 "min_applied_index %d: %s"
                                 % (victim, _node_state(c, victim), group_id,
                                    resp.applied_index, last))
            self.assertEqual((got.get.value, got.get.version), (b"latest", resp.put.version))
            latest[key] = (b"latest", resp.put.version, group_id)
        sys.stderr.write("  restarted node %d caught up with %d groups in %.2f s\n"
                         % (victim, len(latest), time.monotonic() - t0))
        hosted = {k: v for k, v in acked.items() if victim in c.voters(v[2])}
        _read_all(self, c.stub(victim), hosted, LOCAL, use_min_index=True,
                  what="acknowledged writes, LOCAL on the restarted node %d" % victim)

    def test_snapshot_catch_up_after_sigstop(self):
        c = self.new_cluster(size=3, slot_groups=SNAP_GROUPS,
                             extra_args=["--compact-entries", SNAP_COMPACT_ENTRIES,
                                         "--compact-tail", SNAP_COMPACT_TAIL])
        route = c.wait_leaders()
        led = {n: sum(1 for l in c.leaders(route).values() if l == n) for n in c.node_ids}
        # SIGSTOP does not stop the kernel from accepting TCP data: leaders in replicate state
        # keep streaming appends into the stopped node's socket (up to their inflight window),
        # and it applies them on SIGCONT without a snapshot. A group the stopped node led gets a
        # new leader that must probe it from scratch and finds the log compacted: a snapshot.
        # So the stopped node is one leading the fewest groups (spread placement: at least one).
        lagger = min(reversed(c.node_ids), key=lambda n: led[n])
        others = [n for n in c.node_ids if n != lagger]
        c.pause(lagger)
        c.wait_leaders(via=others[0], exclude={lagger})

        keys = c.keys_by_group("snap", self.rng, per_group=SNAP_KEYS_PER_GROUP)
        latest = {}
        acked = []  # (request id, version, group) of every acknowledged write
        t0 = time.monotonic()
        deadline = t0 + SNAP_WRITE_BOUND_S
        for round_no in range(SNAP_ROUNDS):
            batch = []
            for group_id, group_keys in keys.items():
                for n, key in enumerate(group_keys):
                    via = others[(round_no + n) % len(others)]
                    req = pb.ProposeRequest(request_id=b"snap/%03d/" % round_no + key,
                                            put=pb.PutCommand(
                                                key=key, value=_value_for(key, b"%03d" % round_no)))
                    batch.append((key, group_id, via, req,
                                  c.stub(via).Propose.future(req, timeout=WRITE_TIMEOUT_S)))
            for key, group_id, via, req, future in batch:
                resp = self._settle(c, via, req, future, deadline)
                self.assertEqual(resp.group_id, group_id)
                latest[key] = (req.put.value, resp.put.version, group_id)
                acked.append((req.request_id, resp.put.version, group_id))
        _assert_versions_unique(self, acked, "writes while a node was stopped")
        write_s = time.monotonic() - t0
        top = {g: max(v for _, v, gid in latest.values() if gid == g) for g in c.group_ids}
        sys.stderr.write("\n  node %d stopped; %d writes in %.1f s; applied index per group %s\n"
                         % (lagger, SNAP_ROUNDS * len(latest), write_s, top))

        c.resume(lagger)
        t0 = time.monotonic()
        for group_id in c.group_ids:
            if lagger not in c.voters(group_id):
                continue
            key = keys[group_id][0]
            got, _, last = _wait_local_read(c.server(lagger), key, top[group_id],
                                            CATCH_UP_BOUND_S - (time.monotonic() - t0))
            self.assertIsNotNone(got, "resumed node %d (%s): group %d LOCAL read with "
                                 "min_applied_index %d: %s" % (lagger, _node_state(c, lagger),
                                                               group_id, top[group_id], last))
        catch_up_s = time.monotonic() - t0
        hosted = {k: v for k, v in latest.items() if lagger in c.voters(v[2])}
        _read_all(self, c.stub(lagger), hosted, LOCAL, use_min_index=True,
                  what="latest values, LOCAL on the resumed node %d" % lagger)
        lines = c.server(lagger).log_lines('msg="snapshot installed"', current_run_only=True)
        installed = sorted({int(m.group(1)) for m in
                            (re.search(r"\bgroup=(\d+)", line) for line in lines) if m})
        sys.stderr.write("  node %d caught up in %.2f s; snapshot installed for groups %s\n"
                         % (lagger, catch_up_s, installed))
        self.assertTrue(set(installed) & set(c.group_ids),
                        "no 'msg=\"snapshot installed\" group=<id>' line in node %d's log "
                        "(%d lines with the msg)" % (lagger, len(lines)))

    def test_snapshot_streams_in_bounded_chunks(self):
        """A follower stopped while the leader compacts its log past it gets a snapshot of ~400
        times the chunk size (--snapshot-chunk-bytes 4096): the leader reads it chunk by chunk
        from its fsm snapshot, with one chunk in flight and no chunk much larger than the
        limit, and the follower then serves every row LOCAL."""
        c = self.new_cluster(size=3, slot_groups=1,
                             extra_args=["--compact-entries", "50", "--compact-tail", "5",
                                         "--snapshot-chunk-bytes", str(STREAM_CHUNK_BYTES)])
        route = c.wait_leaders()
        leader = c.leaders(route)[1]
        lagger = max(n for n in c.node_ids if n != leader)
        self.assertIsNone(c.stop(lagger))
        c.wait_leaders(via=leader, exclude={lagger})
        keys = c.keys_by_group("stream", self.rng, per_group=STREAM_KEYS)[1]
        latest = {}
        deadline = time.monotonic() + SNAP_WRITE_BOUND_S
        for start in range(0, len(keys), STREAM_IN_FLIGHT):
            batch = []
            for key in keys[start:start + STREAM_IN_FLIGHT]:
                value = _value_for(key).ljust(STREAM_VALUE_BYTES, b"x")
                req = pb.ProposeRequest(request_id=b"stream/" + key,
                                        put=pb.PutCommand(key=key, value=value))
                batch.append((req, c.stub(leader).Propose.future(req, timeout=WRITE_TIMEOUT_S)))
            for req, future in batch:
                resp = self._settle(c, leader, req, future, deadline)
                latest[req.put.key] = (req.put.value, resp.put.version, 1)
        self.assertTrue(c.server(leader).log_lines('msg="log compacted" node=%d group=1 '
                                                   % leader, True), "the leader did not compact")
        c.restart(lagger)
        top = max(v for _, v, _ in latest.values())
        got, _, last = _wait_local_read(c.server(lagger), keys[0], top, CATCH_UP_BOUND_S)
        self.assertIsNotNone(got, "restarted node %d: no LOCAL read at index %d: %s"
                             % (lagger, top, last))
        _read_all(self, c.stub(lagger), latest, LOCAL, use_min_index=True,
                  what="rows of the streamed snapshot, LOCAL on node %d" % lagger)
        sent = [dict(re.findall(r"(\w+)=(\d+)", line)) for line in
                c.server(leader).log_lines('msg="snapshot sent"', True)]
        sent = [d for d in sent if d.get("group") == "1" and d.get("to") == str(lagger)]
        self.assertTrue(sent, "no 'snapshot sent' line for group 1 to node %d" % lagger)
        d = {k: int(v) for k, v in sent[-1].items()}
        sys.stderr.write("\n  streamed snapshot: %s\n" % d)
        self.assertGreater(d["bytes"], 300 * STREAM_CHUNK_BYTES)  # far above one chunk
        self.assertGreaterEqual(d["chunks"], d["bytes"] // (2 * STREAM_CHUNK_BYTES + 2048))
        # A chunk stops after the row that reaches the limit: at most one row past it.
        self.assertLessEqual(d["peak_chunk_bytes"], STREAM_CHUNK_BYTES + STREAM_VALUE_BYTES + 2048)
        self.assertEqual(d["chunks_in_flight_max"], 1)

    def test_snapshot_transfers_bounded(self):
        """With --snapshot-sends-max 1, a leader that must send a snapshot to two restarted
        followers refuses the second transfer while the first runs (logged; raft asks again),
        never has two in progress, and both followers end up with every row. The first
        follower is held (SIGSTOP) once its transfer started until the second was refused, so
        the two overlap on a loaded machine too."""
        c = self.new_cluster(size=5, replicas=5, slot_groups=1,
                             extra_args=["--compact-entries", "50", "--compact-tail", "5",
                                         "--snapshot-chunk-bytes", "256",
                                         "--snapshot-sends-max", "1"])
        route = c.wait_leaders()
        leader = c.leaders(route)[1]
        laggers = sorted((n for n in c.node_ids if n != leader), reverse=True)[:2]
        for n in laggers:
            self.assertIsNone(c.stop(n))
        c.wait_leaders(via=leader, exclude=set(laggers))
        keys = c.keys_by_group("bound", self.rng, per_group=BOUND_KEYS)[1]
        latest = self._put_all(c, leader, keys, b"bound/")
        top = max(v for _, v, _ in latest.values())
        # The first lagger's transfer starts, then that lagger is stopped (SIGSTOP) so its
        # transfer stays open however slowly the second one starts on a loaded machine; the
        # second must be refused meanwhile, and the first resumes.
        first, second = laggers
        leader_log = c.server(leader)
        c.server(first)._spawn()
        c.server(first)._open_channel()
        self.assertIsNone(c.server(first)._wait_serving(h.START_TIMEOUT_S))
        bound = time.monotonic() + CATCH_UP_BOUND_S
        while not [line for line in leader_log.log_lines('msg="snapshot needed"', True)
                   if re.search(r"\bto=%d\b" % first, line)]:
            self.assertLess(time.monotonic(), bound, "no snapshot transfer to node %d" % first)
            time.sleep(0.02)
        c.server(first).pause()
        try:
            c.server(second)._spawn()
            c.server(second)._open_channel()
            self.assertIsNone(c.server(second)._wait_serving(h.START_TIMEOUT_S))
            bound = time.monotonic() + CATCH_UP_BOUND_S
            while not leader_log.log_lines("too many transfers", True):
                self.assertLess(time.monotonic(), bound, "node %d was never refused" % second)
                time.sleep(0.05)
        finally:
            c.server(first).resume()
        for n in laggers:
            got, _, last = _wait_local_read(c.server(n), keys[0], top, CATCH_UP_BOUND_S)
            self.assertIsNotNone(got, "node %d: no LOCAL read at index %d: %s" % (n, top, last))
            _read_all(self, c.stub(n), latest, LOCAL, use_min_index=True,
                      what="rows on node %d after a bounded transfer" % n)
        log = c.server(leader).log_lines("msg=\"snapshot ", True)
        open_now, most = set(), 0
        for line in log:
            to = re.search(r"\bto=(\d+)", line)
            if to is None:
                continue
            if 'msg="snapshot needed"' in line:
                open_now.add(to.group(1))
            elif re.search(r'msg="snapshot (sent|send failed|read failed|capture failed)"', line):
                open_now.discard(to.group(1))
            most = max(most, len(open_now))
        refused = [line for line in log if "too many transfers" in line]
        sent = {re.search(r"\bto=(\d+)", line).group(1) for line in log
                if 'msg="snapshot sent"' in line}
        sys.stderr.write("\n  %d refusals, snapshots sent to %s\n" % (len(refused), sorted(sent)))
        self.assertEqual(most, 1, "two transfers at once with --snapshot-sends-max 1")
        self.assertTrue(refused, "no transfer was refused while another ran")
        self.assertEqual(sent, {str(n) for n in laggers})

    def test_snapshot_receive_abandoned(self):
        """A follower whose snapshot sender stops mid-transfer spools the chunks to
        <data dir>/snap-recv/g1-<transfer>.part, deletes that file after --snapshot-recv-idle-ms
        (logged, slotd_snapshot_recv_abandoned_total 0 -> 1), and a fresh transfer from the new
        leader then installs every row and leaves no spool file."""
        metrics = h.free_ports(3)
        c = self.new_cluster(size=3, replicas=3, slot_groups=1,
                             extra_args=["--compact-entries", "50", "--compact-tail", "5",
                                         "--snapshot-chunk-bytes", "256",
                                         "--snapshot-recv-idle-ms", str(ABANDON_IDLE_MS)],
                             node_args={n: ["--metrics-listen", "127.0.0.1:%d" % metrics[n - 1]]
                                        for n in (1, 2, 3)})
        route = c.wait_leaders()
        leader = c.leaders(route)[1]
        lagger, other = sorted(n for n in c.node_ids if n != leader)
        self.assertIsNone(c.stop(lagger))
        keys = c.keys_by_group("abandon", self.rng, per_group=ABANDON_KEYS)[1]
        latest = self._put_all(c, leader, keys, b"abandon/")
        top = max(v for _, v, _ in latest.values())
        needed = 'msg="snapshot needed" node=%d group=1 to=%d ' % (leader, lagger)
        before = len(c.server(leader).log_lines(needed))
        c.server(lagger)._spawn()
        c.server(lagger)._open_channel()
        end = time.monotonic() + CATCH_UP_BOUND_S
        while len(c.server(leader).log_lines(needed)) == before and time.monotonic() < end:
            time.sleep(0.005)
        time.sleep(ABANDON_INTO_S)  # some chunks staged on the lagger
        c.pause(other)   # so no new leader starts a fresh transfer before the abandonment
        c.pause(leader)  # the sender stops mid-transfer
        paused_at = time.monotonic()
        self.assertFalse(c.server(lagger).log_lines('msg="snapshot received"', True),
                         "the transfer ended before the sender was stopped")
        spool = c.server(lagger).data_dir / "snap-recv"
        parts = sorted(p.name for p in spool.glob("g1-*.part"))
        self.assertEqual(len(parts), 1, "no spool file of the transfer in %s" % spool)
        self.assertEqual(_abandoned_total(metrics[lagger - 1]), 0)
        abandoned = []
        while not abandoned and time.monotonic() < paused_at + ABANDON_BOUND_S:
            abandoned = c.server(lagger).log_lines('msg="snapshot receive abandoned"', True)
            time.sleep(0.02)
        took = time.monotonic() - paused_at
        self.assertTrue(abandoned, "node %d did not abandon the stale receive within %.1f s"
                        % (lagger, ABANDON_BOUND_S))
        d = dict(re.findall(r"(\w+)=(\d+)", abandoned[0]))
        sys.stderr.write("\n  abandoned after %.1f s: %s\n" % (took, abandoned[0]))
        self.assertEqual((d["group"], d["from"]), ("1", str(leader)))
        self.assertGreater(int(d["bytes"]), 0)
        self.assertGreaterEqual(took, ABANDON_IDLE_MS / 1000.0 - 0.5)
        self.assertFalse((spool / parts[0]).exists(), "the abandoned spool file is still there")
        self.assertEqual(_abandoned_total(metrics[lagger - 1]), 1)
        c.resume(other)  # elected (the lagger's log is behind); it sends a fresh snapshot
        self.assertIsNone(c.server(lagger)._wait_serving(h.START_TIMEOUT_S))
        got, _, last = _wait_local_read(c.server(lagger), keys[0], top, CATCH_UP_BOUND_S)
        self.assertIsNotNone(got, "node %d: no LOCAL read at index %d: %s" % (lagger, top, last))
        _read_all(self, c.stub(lagger), latest, LOCAL, use_min_index=True,
                  what="rows on node %d after the abandoned transfer" % lagger)
        self.assertTrue([line for line in c.server(lagger).log_lines(
            'msg="snapshot received"', True) if "from=%d " % other in line],
            "no fresh snapshot from node %d" % other)
        self.assertEqual(sorted(p.name for p in spool.iterdir()), [],
                         "spool files left after the install")
        c.resume(leader)

    def test_snapshot_receive_refused_without_disk_space(self):
        """A follower whose data dir has less free space than a snapshot receive needs (the
        spool file, its install into LevelDB and 64 MiB kept free) refuses every chunk with an
        error naming the free and needed bytes (logged on the follower), keeps no spool file,
        stays up, and catches up by snapshot once the space is there. The data dir is put on a
        48 MiB tmpfs for the refusal (root only: the test is skipped when it cannot mount)."""
        c = self.new_cluster(size=3, replicas=3, slot_groups=1,
                             extra_args=["--compact-entries", "50", "--compact-tail", "5"])
        route = c.wait_leaders()
        leader = c.leaders(route)[1]
        lagger = max(n for n in c.node_ids if n != leader)
        self.assertIsNone(c.stop(lagger))
        data_dir = c.server(lagger).data_dir
        # The node's files as they were at the stop go onto the small file system; unmounting
        # shows the untouched originals again.
        saved = data_dir.with_name(data_dir.name + ".saved")
        shutil.copytree(data_dir, saved, symlinks=True)
        probe = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=48m", "tmpfs", str(data_dir)],
                               capture_output=True, text=True)
        if probe.returncode != 0:
            self.skipTest("cannot mount a tmpfs over the data dir: %s" % probe.stderr.strip())
        mounted = [True]

        def unmount():
            if mounted[0]:
                subprocess.run(["umount", "-l", str(data_dir)], check=False)
                mounted[0] = False
        self.addCleanup(unmount)
        shutil.copytree(saved, data_dir, symlinks=True, dirs_exist_ok=True)
        keys = c.keys_by_group("nospace", self.rng, per_group=DISKFULL_KEYS)[1]
        latest = self._put_all(c, leader, keys, b"nospace/")
        top = max(v for _, v, _ in latest.values())
        c.restart(lagger)
        s = c.server(lagger)
        refused = []
        end = time.monotonic() + CATCH_UP_BOUND_S
        while not refused and time.monotonic() < end:
            refused = [line for line in s.log_lines('msg="snapshot chunk refused"', True)
                       if "not enough free space" in line]
            time.sleep(0.05)
        self.assertTrue(refused, "node %d refused no chunk for want of space\n%s"
                        % (lagger, s.log_tail()))
        sys.stderr.write("\n  refused: %s\n" % refused[0][:300])
        m = re.search(r"(\d+) bytes free in the data dir, (\d+) needed", refused[0])
        self.assertIsNotNone(m, refused[0])
        self.assertLess(int(m.group(1)), int(m.group(2)))
        self.assertGreaterEqual(int(m.group(2)), 64 << 20)
        self.assertIn("group=1 from=%d " % leader, refused[0])
        time.sleep(0.5)  # raft asks again meanwhile; each try is refused the same way
        self.assertEqual(sorted(p.name for p in (data_dir / "snap-recv").iterdir()), [],
                         "spool files left after a refused receive")
        self.assertFalse(s.log_lines('msg="snapshot received"', True))
        self.assertIsNone(s.proc.poll(), "node %d stopped" % lagger)
        self.assertIsNone(c.stop(lagger))
        unmount()
        c.restart(lagger)
        got, _, last = _wait_local_read(c.server(lagger), keys[0], top, CATCH_UP_BOUND_S)
        self.assertIsNotNone(got, "node %d: no LOCAL read at index %d: %s" % (lagger, top, last))
        _read_all(self, c.stub(lagger), latest, LOCAL, use_min_index=True,
                  what="rows on node %d once the space was there" % lagger)

    def _put_all(self, c, leader, keys, request_prefix):
        """Puts each key of group 1 (value BOUND_VALUE_BYTES long) through leader,
        BOUND_IN_FLIGHT at a time, each settled (retried with its request id) until
        SNAP_WRITE_BOUND_S; returns {key: (value, version, 1)}."""
        latest = {}
        deadline = time.monotonic() + SNAP_WRITE_BOUND_S
        for start in range(0, len(keys), BOUND_IN_FLIGHT):
            batch = []
            for key in keys[start:start + BOUND_IN_FLIGHT]:
                req = pb.ProposeRequest(request_id=request_prefix + key, put=pb.PutCommand(
                    key=key, value=_value_for(key).ljust(BOUND_VALUE_BYTES, b"x")))
                batch.append((req, c.stub(leader).Propose.future(req, timeout=WRITE_TIMEOUT_S)))
            for req, future in batch:
                resp = self._settle(c, leader, req, future, deadline)
                latest[req.put.key] = (req.put.value, resp.put.version, 1)
        return latest

    def _settle(self, c, via, req, future, deadline):
        """The result of a write future; on an unknown-outcome code the same request (same
        request id, so the write applies once) is retried until deadline."""
        try:
            return future.result()
        except grpc.RpcError as err:
            last = err
        while time.monotonic() < deadline:
            if last.code() not in h.UNKNOWN_OUTCOME_CODES:
                self.fail("write %r via node %d: %s %s" % (req.put.key, via, last.code(),
                                                           last.details()))
            time.sleep(PROBE_POLL_S)
            try:
                return c.stub(via).Propose(req, timeout=WRITE_TIMEOUT_S)
            except grpc.RpcError as err:
                last = err
        self.fail("write %r via node %d not acknowledged within %.0f s: %s"
                  % (req.put.key, via, SNAP_WRITE_BOUND_S, last.code()))

    def test_minority_answers_unavailable_before_deadline(self):
        c = self.new_cluster(size=3)
        route = c.wait_leaders()
        lone = c.busiest_leader(route)
        others = [n for n in c.node_ids if n != lone]
        keys = {g: ks[0] for g, ks in c.keys_by_group("minority", self.rng).items()}
        for node_id in others:
            c.pause(node_id)
        t_pause = time.monotonic()
        done = {}
        started = {}

        def call(kind, group_id, future, t0):
            future.add_done_callback(lambda f: done.setdefault((kind, group_id),
                                                               time.monotonic() - t0))
            return (kind, group_id, future)

        calls = []
        for group_id, key in keys.items():
            t0 = time.monotonic()
            calls.append(call("write", group_id, c.stub(lone).Propose.future(
                pb.ProposeRequest(put=pb.PutCommand(key=key, value=b"minority")),
                timeout=MINORITY_DEADLINE_S), t0))
            t0 = time.monotonic()
            started[("read", group_id)] = t0
            calls.append(call("read", group_id, c.stub(lone).Read.future(
                pb.ReadRequest(consistency=LIN, get=pb.GetQuery(key=key)),
                timeout=MINORITY_DEADLINE_S), t0))
        for _, _, future in calls:
            future.exception()  # waits for the answer (or the client deadline)
        settle = time.monotonic() + 1.0  # done callbacks run on gRPC's thread, maybe later
        while len(done) < len(calls) and time.monotonic() < settle:
            time.sleep(0.01)
        bad = []
        seen = {}
        for kind, group_id, future in calls:
            err = future.exception()
            name = "%s %s" % (kind, _error_name(err) if err is not None else "OK")
            seen[name] = seen.get(name, 0) + 1
            what = "%s g%d (leader was %d)" % (kind, group_id, c.leaders(route)[group_id])
            if err is None:
                # A Get may be answered under the leader's lease, which outlives the quorum by
                # at most LEASE_S: no other leader can exist before it ends. Later it must fail.
                since = started.get((kind, group_id), t_pause) - t_pause
                if kind != "read" or since >= LEASE_S:
                    bad.append("%s succeeded without a quorum (%.2f s after the pause)"
                               % (what, since))
                continue
            detail = h.error_detail(err)
            elapsed = done.get((kind, group_id), MINORITY_DEADLINE_S)
            if err.code() != UNAVAILABLE:
                hint = detail.leader_hint if detail is not None else None
                bad.append("%s: %s after %.2f s%s" % (
                    what, _error_name(err), elapsed,
                    " (hint node %d term %d)" % (hint.node_id, hint.term) if hint else ""))
            elif detail is None or detail.code not in NO_QUORUM_DETAILS:
                bad.append("%s: UNAVAILABLE with detail %s" % (
                    what, pb.ErrorCode.Name(detail.code) if detail else None))
            elif elapsed >= MINORITY_DEADLINE_S:
                bad.append("%s: answered after %.2f s" % (what, elapsed))
        # Well past any lease: a linearizable read of every group must fail now.
        for group_id, key in keys.items():
            try:
                c.stub(lone).Read(pb.ReadRequest(consistency=LIN, get=pb.GetQuery(key=key)),
                                  timeout=MINORITY_DEADLINE_S)
                bad.append("read g%d succeeded %.2f s after the pause, past the lease"
                           % (group_id, time.monotonic() - t_pause))
            except grpc.RpcError as err:
                if err.code() != UNAVAILABLE:
                    bad.append("read g%d after the lease: %s" % (group_id, _error_name(err)))
        slowest = max(done.values()) if done else float("nan")
        # Its groups lose their leaders (check-quorum, election timeouts): not SERVING.
        not_serving = _wait_health(c.server(lone), False, HEALTH_BOUND_S)
        # ...while "liveness" stays SERVING: the process serves calls (a liveness probe must not
        # restart it for having lost its peers).
        live = c.server(lone).health.Check(h.health_pb2.HealthCheckRequest(service="liveness"),
                                           timeout=5)
        self.assertEqual(live.status, h.health_pb2.HealthCheckResponse.SERVING)
        sys.stderr.write("\n  node %d alone: %d calls answered, slowest after %.2f s: %s\n"
                         % (lone, len(done), slowest, seen))

        for node_id in others:
            c.resume(node_id)
        t0 = time.monotonic()
        probes = probe_writes(c, [lone], c.group_ids, t0, RECOVER_BOUND_S,
                              "%d/minority" % h.SEED)
        stuck = [g for g in c.group_ids if probes.get(g) is None]
        serving_again = _wait_health(c.server(lone), True, HEALTH_BOUND_S)
        self.assertEqual(bad, [], "without a quorum, node %d must answer UNAVAILABLE "
                         "(NO_LEADER or UNKNOWN_OUTCOME) before the %.0f s deadline"
                         % (lone, MINORITY_DEADLINE_S))
        self.assertEqual(stuck, [], "groups not writable %.0f s after SIGCONT"
                         % RECOVER_BOUND_S)
        self.assertIsNotNone(not_serving, "node %d still SERVING %.0f s after losing its quorum"
                             % (lone, HEALTH_BOUND_S))
        self.assertIsNotNone(serving_again, "node %d not SERVING %.0f s after its peers resumed"
                             % (lone, HEALTH_BOUND_S))
        sys.stderr.write("  NOT_SERVING %.2f s after the calls; writes accepted again %.2f s "
                         "after SIGCONT\n" % (not_serving, max(p[0] for p in probes.values())))

    def test_sigterm_of_leader_transfers_leadership(self):
        c = self.new_cluster(size=3)
        route = c.wait_leaders()
        leader = c.busiest_leader(route)
        led = sorted(g for g, l in c.leaders(route).items() if l == leader)
        survivors = [n for n in c.node_ids if n != leader]
        t0 = time.monotonic()
        problem = c.stop(leader)
        t_exit = time.monotonic()
        self.assertIsNone(problem, "node %d on SIGTERM" % leader)
        probes = probe_writes(c, survivors, led, t_exit, FAILOVER_BOUND_S,
                              "%d/sigterm" % h.SEED)
        lines = c.server(leader).log_lines('msg="leadership transferred"', current_run_only=True)
        ms = {g: probes[g][0] * 1000 if probes.get(g) else None for g in led}
        sys.stderr.write("\n  SIGTERM node %d (leader of groups %s): exit after %.2f s, "
                         "%d 'leadership transferred' lines; ms from exit to a write: %s\n"
                         % (leader, led, t_exit - t0, len(lines),
                            " ".join("g%d=%s" % (g, "%.0f" % v if v is not None else "none")
                                     for g, v in ms.items())))
        slow = {g: v for g, v in ms.items() if v is None or v > SIGTERM_FAILOVER_S * 1000}
        self.assertEqual(slow, {}, "groups of node %d not writable within %.1f s of its exit"
                         % (leader, SIGTERM_FAILOVER_S))
        self.assertTrue(lines, "no msg=\"leadership transferred\" line in node %d's log" % leader)
        after = c.wait_leaders(via=survivors[0], exclude={leader}, timeout=SIGTERM_FAILOVER_S)
        self.assertTrue(all(l in survivors for l in c.leaders(after).values()))


if __name__ == "__main__":
    unittest.main()
