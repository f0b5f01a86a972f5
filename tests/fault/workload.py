# workload.py - concurrent random put/get/cas/delete clients against a slotd cluster, recording a history.
"""Client threads for fault tests.

Each of ``clients`` threads keeps one operation in flight over ``keys`` (a small key space),
choosing the op kind and the target node at random per op. The target is drawn from
``Workload.targets`` (node ids the fault schedule believes are up; it removes a node before
killing or pausing it), so ops still race with every fault but few are sent to a node known to be
down. Every op is recorded as a ``lincheck.Op`` with time.monotonic() invoke/complete times:

    success                      -> output recorded
    write failing with a definite code (INVALID_ARGUMENT, FAILED_PRECONDITION, RESOURCE_EXHAUSTED,
    ABORTED, NOT_FOUND, UNIMPLEMENTED; detail not UNKNOWN_OUTCOME/NO_LEADER), or a NO_LEADER
    whose message says "the request was not sent" (a forward gRPC could connect nowhere: the
    checker holds slotd to that claim)                                          -> dropped
    any other write failure (UNAVAILABLE incl. NO_LEADER/UNKNOWN_OUTCOME, DEADLINE_EXCEEDED,
    UNKNOWN, INTERNAL, ...)      -> the same request (same request id) is retried through random
                                    targets for up to SETTLE_BOUND_S; the first answer is the
                                    op's output (server dedupe returns the first result), its
                                    arrival the op's complete time; still unanswered -> maybe op
    failed read                  -> dropped (reads have no effect)

Bounded by ops_max per client and by the caller's stop().
"""

import os
import random
import sys
import threading
import time

import grpc

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402
from lincheck import Op  # noqa: E402

DEFINITE_CODES = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.FAILED_PRECONDITION,
    grpc.StatusCode.RESOURCE_EXHAUSTED,
    grpc.StatusCode.ABORTED,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.UNIMPLEMENTED,
})
UNKNOWN_DETAILS = frozenset({pb.ERROR_CODE_UNKNOWN_OUTCOME, pb.ERROR_CODE_NO_LEADER})
# service/node/api.c's answer to a forward that gRPC failed before it had a connection.
NOT_SENT_TEXT = "the request was not sent"

OP_TIMEOUT_S = 1.0
OPS_MAX_PER_CLIENT = 400
FAIL_BACKOFF_S = 0.05
SETTLE_BOUND_S = 8.0         # an unknown-outcome write is retried (same request id) this long
THINK_S = 0.005
MIX = (("put", 35), ("get", 35), ("cas", 20), ("delete", 10))


def error_name(err):
    try:
        detail = h.error_detail(err)
    except AssertionError:
        detail = None
    name = err.code().name
    return name + "/" + pb.ErrorCode.Name(detail.code) if detail is not None else name


def write_failure_is_definite(err):
    """True when the failed write certainly did not happen (dropped from the history)."""
    try:
        detail = h.error_detail(err)
    except AssertionError:
        return False
    if err.code() == grpc.StatusCode.UNAVAILABLE:
        return (detail is not None and detail.code == pb.ERROR_CODE_NO_LEADER and
                NOT_SENT_TEXT in (err.details() or ""))
    if err.code() not in DEFINITE_CODES:
        return False
    return detail is None or detail.code not in UNKNOWN_DETAILS


class Workload:
    def __init__(self, cluster, keys, seed, clients=6, ops_max=OPS_MAX_PER_CLIENT,
                 op_timeout=OP_TIMEOUT_S, consistency=pb.CONSISTENCY_LINEARIZABLE):
        self.cluster = cluster
        self.keys = list(keys)
        self.seed = seed
        self.clients = clients
        self.ops_max = ops_max
        self.op_timeout = op_timeout
        self.consistency = consistency
        self.targets = list(cluster.node_ids)
        self.lock = threading.Lock()
        self.history = []
        self.errors = {}            # "CODE/DETAIL" -> count
        self.max_applied = {}       # group_id -> highest applied index seen in any response
        self.acked_indexes = {}     # (group_id, applied_index) -> op id (writes)
        self.duplicates = []        # acknowledged writes sharing a (group, index)
        self.definite_failures = [] # (request, error name, node): writes dropped as not applied
        self._stop = threading.Event()
        self._local = threading.local()
        self._threads = []
        self._next_id = 0
        self._kinds = [k for k, w in MIX for _ in range(w)]

    # -- control --

    def start(self):
        for c in range(self.clients):
            t = threading.Thread(target=self._client, args=(c,), daemon=True,
                                 name="lin-client-%d" % c)
            self._threads.append(t)
            t.start()
        return self

    def stop(self, timeout=None):
        """Stops the clients; returns False if one is still running after timeout."""
        self._stop.set()
        limit = (timeout if timeout is not None else SETTLE_BOUND_S + self.op_timeout + 5)
        deadline = time.monotonic() + limit
        for t in self._threads:
            t.join(max(0.0, deadline - time.monotonic()))
        return not any(t.is_alive() for t in self._threads)

    def clients_running(self):
        return sum(1 for t in self._threads if t.is_alive())

    def set_targets(self, node_ids):
        with self.lock:
            self.targets = list(node_ids)

    def ops_done(self):
        with self.lock:
            return len(self.history)

    # -- recording --

    def record(self, op, group_id=None, index=None, write=False):
        with self.lock:
            op.id = self._next_id
            self._next_id += 1
            self.history.append(op)
            if group_id and index:
                if index > self.max_applied.get(group_id, 0):
                    self.max_applied[group_id] = index
                if write:
                    other = self.acked_indexes.setdefault((group_id, index), op.id)
                    if other != op.id:
                        self.duplicates.append((group_id, index, other, op.id))

    def note_error(self, err):
        name = error_name(err)
        with self.lock:
            self.errors[name] = self.errors.get(name, 0) + 1

    # -- one client --

    def _client(self, c):
        rng = random.Random("%s/client%d" % (self.seed, c))
        channels = {n: h.open_channel(self.cluster.addr(n)) for n in self.cluster.node_ids}
        stubs = {n: h.pb_grpc.MetadataStub(ch) for n, ch in channels.items()}
        self._local.stubs = stubs
        seen = {}   # key -> last version this client observed
        try:
            for seq in range(self.ops_max):
                if self._stop.is_set():
                    return
                with self.lock:
                    targets = list(self.targets)
                if not targets:
                    time.sleep(FAIL_BACKOFF_S)
                    continue
                node = rng.choice(targets)
                key = rng.choice(self.keys)
                kind = rng.choice(self._kinds)
                ok = self.one_op(stubs[node], node, c, seq, key, kind, rng, seen)
                time.sleep(THINK_S if ok else FAIL_BACKOFF_S)
        finally:
            for ch in channels.values():
                ch.close()

    def one_op(self, stub, node, c, seq, key, kind, rng, seen):
        value = b"c%d-%d" % (c, seq)
        note = "node%d" % node
        if kind == "get":
            t0 = time.monotonic()
            try:
                resp = stub.Read(pb.ReadRequest(consistency=self.consistency,
                                                get=pb.GetQuery(key=key)), timeout=self.op_timeout)
            except grpc.RpcError as err:
                self.note_error(err)
                return False
            t1 = time.monotonic()
            g = resp.get
            if g.found:
                seen[key] = g.version
            self.record(Op("get", key, {}, {"found": g.found, "value": g.value if g.found else None,
                                            "version": g.version}, t0, t1, c, note=note),
                        resp.group_id, resp.applied_index)
            return True
        if kind == "put":
            req = pb.ProposeRequest(put=pb.PutCommand(key=key, value=value))
            inp = {"value": value}
        elif kind == "delete":
            req = pb.ProposeRequest(delete=pb.DeleteCommand(key=key))
            inp = {}
        else:
            r = rng.random()
            expected = seen.get(key, 0) if r < 0.7 else (0 if r < 0.85 else rng.randint(1, 50))
            req = pb.ProposeRequest(compare_and_set=pb.CompareAndSetCommand(
                key=key, expected_version=expected, value=value))
            inp = {"expected": expected, "value": value}
        req.request_id = b"%s/c%d/%d" % (str(self.seed).encode()[:32], c, seq)
        t0 = time.monotonic()
        try:
            resp = stub.Propose(req, timeout=self.op_timeout)
        except grpc.RpcError as err:
            self.note_error(err)
            if write_failure_is_definite(err):
                with self.lock:
                    self.definite_failures.append((req, error_name(err), node))
                return False
            resp = self._settle(req, rng, t0, err)
            if resp is None:
                self.record(Op(kind, key, inp, None, t0, None, c,
                               note="%s %s" % (note, error_name(err))))
                return False
            note += " settled"
        t1 = time.monotonic()
        if kind == "put":
            out = {"version": resp.put.version, "prev_version": resp.put.prev_version}
            seen[key] = resp.put.version
        elif kind == "delete":
            out = {"deleted": resp.delete.deleted, "prev_version": resp.delete.prev_version,
                   "index": resp.applied_index}
            seen.pop(key, None)
        else:
            res = resp.compare_and_set
            out = {"ok": res.succeeded, "version": res.version, "index": resp.applied_index}
            seen[key] = res.version
        self.record(Op(kind, key, inp, out, t0, t1, c, note=note), resp.group_id,
                    resp.applied_index, write=True)
        return True

    def _settle(self, req, rng, t0, err):
        """Retries a write whose outcome is unknown with the same request id (the server's
        dedupe returns the first result if it applied) through random targets, until answered or
        SETTLE_BOUND_S after t0. Returns the response, or None (outcome stays unknown)."""
        while time.monotonic() - t0 < SETTLE_BOUND_S:
            time.sleep(FAIL_BACKOFF_S)
            with self.lock:
                targets = list(self.targets)
            if not targets:
                continue
            node = rng.choice(targets)
            try:
                return self._stubs_of_thread()[node].Propose(req, timeout=self.op_timeout)
            except grpc.RpcError as err:
                self.note_error(err)
        return None

    def _stubs_of_thread(self):
        return self._local.stubs

    # -- extra reads recorded into the same history --

    def final_reads(self, via_nodes, timeout=5.0, attempts=3):
        """One LINEARIZABLE read of every key (through via_nodes in turn), recorded. A read
        refused with NO_LEADER / NOT_LEADER (a definite, retriable answer: a leadership transfer
        to the preferred leader can be under way right after healing) is sent again, at most
        `attempts` reads in all; a refused read has no effect, so only the answered one is
        recorded. Returns the keys whose read failed, with the last error."""
        failed = []
        for i, key in enumerate(self.keys):
            node = via_nodes[i % len(via_nodes)]
            resp, last = None, None
            for attempt in range(attempts):
                t0 = time.monotonic()
                try:
                    resp = self.cluster.stub(node).Read(pb.ReadRequest(get=pb.GetQuery(key=key)),
                                                        timeout=timeout)
                    break
                except grpc.RpcError as err:
                    name = error_name(err)
                    last = "%s via node %d: %s (read %d of %d)" % (name, node, err.details(),
                                                                  attempt + 1, attempts)
                    if not name.endswith(("/ERROR_CODE_NO_LEADER", "/ERROR_CODE_NOT_LEADER")):
                        break
                    time.sleep(0.1 * (attempt + 1))
            if resp is None:
                failed.append((key, last))
                continue
            t1 = time.monotonic()
            g = resp.get
            self.record(Op("get", key, {}, {"found": g.found, "value": g.value if g.found else None,
                                            "version": g.version}, t0, t1, -1, note="final"),
                        resp.group_id, resp.applied_index)
        return failed


def put_until_acked(stub, key, value, request_id, bound_s):
    """Puts with one request id through stub until answered: (invoke time, response) or
    (invoke time, None) after bound_s. Retries reuse the request id (the server dedupes)."""
    t0 = time.monotonic()
    req = pb.ProposeRequest(request_id=request_id, put=pb.PutCommand(key=key, value=value))
    while time.monotonic() - t0 < bound_s:
        try:
            return t0, stub.Propose(req, timeout=1.0)
        except grpc.RpcError:
            time.sleep(0.05)
    return t0, None


def probe_write(stub, key, bound_s, rpc_timeout=1.0, poll_s=0.02):
    """Puts key through stub until acknowledged: (seconds, response) or (None, last error)."""
    t0 = time.monotonic()
    last = None
    n = 0
    while time.monotonic() - t0 < bound_s:
        n += 1
        try:
            resp = stub.Propose(pb.ProposeRequest(put=pb.PutCommand(key=key, value=b"probe%d" % n)),
                                timeout=rpc_timeout)
            return time.monotonic() - t0, resp
        except grpc.RpcError as err:
            last = error_name(err)
            time.sleep(poll_s)
    return None, last


def probe_groups(cluster, via_nodes, group_ids, bound_s, prefix, rng):
    """In parallel per group: seconds until a write to a fresh key of the group is acknowledged
    through via_nodes[g % len]. Returns {group_id: (seconds or None, response or last error)}."""
    out = {}
    keys = {g: h.key_in_group(cluster.table, g, "%s/g%d" % (prefix, g), rng) for g in group_ids}

    def run(g):
        out[g] = probe_write(cluster.stub(via_nodes[g % len(via_nodes)]), keys[g], bound_s)

    threads = [threading.Thread(target=run, args=(g,), daemon=True) for g in group_ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join(bound_s + 5)
    return out


def replica_divergence(cluster, keys, max_applied, timeout=5.0):
    """Reads every key with CONSISTENCY_LOCAL and min_applied_index = the highest applied index
    seen for its group on every voter of the group (from RouteSnapshot) and compares (found,
    value, version). Returns a list of problems (empty when all replicas agree)."""
    route = cluster.route(cluster.live_ids()[0])
    voters = {g.group_id: list(g.voters) for g in route.groups}
    table = list(route.hash_slot_table)
    problems = []
    for key in keys:
        group_id = table[h.hash_slot(key)]
        seen = {}
        for node in voters[group_id]:
            try:
                resp = cluster.stub(node).Read(pb.ReadRequest(
                    consistency=pb.CONSISTENCY_LOCAL, get=pb.GetQuery(key=key),
                    min_applied_index=max_applied.get(group_id, 0)), timeout=timeout)
            except grpc.RpcError as err:
                problems.append("%r g%d node %d: %s" % (key, group_id, node, error_name(err)))
                continue
            g = resp.get
            seen[node] = (g.found, g.value if g.found else b"", g.version)
        if len(set(seen.values())) > 1:
            problems.append("%r g%d replicas differ: %s" % (key, group_id, seen))
    return problems
