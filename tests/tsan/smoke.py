#!/usr/bin/python3
# smoke.py - ThreadSanitizer smoke: 3 TSan-built nodes, put/get load with watchers, a leader kill -9, a restart.
"""Multi-node ThreadSanitizer smoke for `make tsan` (tests/tsan/README.md).

Starts 3 slotd nodes from $SLOTD_BIN (default build-tsan/bin/slotd) on loopback with the e2e
harness (tests/e2e/slotd_harness.py), runs LOAD_S seconds of puts and linearizable gets from
WORKERS threads through every live node while /metrics is scraped and one Watch per node streams
the load's changes (the apply stage feeding watch histories, the watch thread, stream sends from
several threads) and one thread drives Metadata/ProposeStream calls of STREAM_ITEMS puts each
through a live node (bidi frames read on the gRPC thread, items finished on the apply path,
results coalesced into response messages), kills -9 the node leading the
most groups KILL_AT_S seconds in, keeps the load going, restarts the killed node (its groups
compacted past its log meanwhile, so it catches up by snapshot) and waits until it has applied as
far as every leader, then stops every node with SIGTERM.

It fails when a node's log holds "WARNING: ThreadSanitizer" or another sanitizer marker, a node
exits non-zero on SIGTERM (TSan's exitcode), the load made too little progress before or after
the kill, the ProposeStream calls answered fewer than MIN_STREAM_OK puts or an id twice, the restarted node does not catch up, or a key's final value is not one its writer
could have left. Every loop is bounded in count and time. Exit status 0 = pass.
"""

import os
import random
import shutil
import sys
import tempfile
import threading
import time
import urllib.request
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent.parent
os.environ.setdefault("SLOTD_BIN", str(REPO / "build-tsan" / "bin" / "slotd"))
# The servers inherit these; make tsan / scripts/test.sh set the same (tests/tsan/README.md).
os.environ.setdefault(
    "TSAN_OPTIONS",
    "halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1 second_deadlock_stack=1 "
    "suppressions=%s" % (REPO / "tests" / "tsan" / "suppressions.txt"))
sys.path.insert(0, str(REPO / "tests" / "e2e"))

import grpc  # noqa: E402

import slotd_harness as h  # noqa: E402

NODES = 3
SLOT_GROUPS = 4
WORKERS = 4
LOAD_S = 10.0
KILL_AT_S = 3.5
OPS_PER_WORKER_MAX = 20000
KEYS_PER_WORKER = 16
RPC_TIMEOUT_S = 2.0
START_TIMEOUT_S = 90.0      # TSan builds start several times slower
RESTART_TIMEOUT_S = 60.0
MIN_OK_BEFORE_KILL = 20     # acknowledged puts and gets, all workers together
MIN_OK_AFTER_KILL = 20
STREAM_ITEMS = 300          # puts per ProposeStream call, in messages of STREAM_ITEMS_PER_MSG
STREAM_ITEMS_PER_MSG = 50
STREAM_ROUNDS_MAX = 8
STREAM_TIMEOUT_S = 8.0
MIN_STREAM_OK = 200         # puts answered OK over every stream
TSAN_MARKERS = ("WARNING: ThreadSanitizer", "ThreadSanitizer: reported",
                "ThreadSanitizer:DEADLYSIGNAL", "ThreadSanitizer: CHECK failed")
# Small compaction bounds, so the groups compact past the killed node's log during the load.
NODE_ARGS = ["--compact-entries", "50", "--compact-tail", "10"]


class Load:
    """Shared state of the load threads (counters under mu)."""

    def __init__(self, cluster):
        self.cluster = cluster
        self.mu = threading.Lock()
        self.dead = set()           # node ids not to call (killed)
        self.kill_time = None       # time.monotonic() of the kill
        self.ok_before = self.ok_after = 0
        self.errors = {}            # status code name -> count
        self.stop = threading.Event()

    def targets(self):
        with self.mu:
            return [n for n in self.cluster.node_ids if n not in self.dead]

    def count(self, ok, code=None):
        with self.mu:
            if ok and self.kill_time is None:
                self.ok_before += 1
            elif ok:
                self.ok_after += 1
            else:
                self.errors[code] = self.errors.get(code, 0) + 1


def worker(load, index, deadline, channels, outcome):
    """Puts and gets on this worker's own keys; records what each key may hold at the end: the
    last acknowledged value (None: none yet) or any value whose put failed, since a put with an
    unknown outcome may still apply later (it overlaps everything after it)."""
    rng = random.Random(h.SEED + index)
    keys = [h.unique_key("tsan/w%d" % index, rng) for _ in range(KEYS_PER_WORKER)]
    acked = {k: None for k in keys}
    unknown = {k: set() for k in keys}
    stubs = {n: h.pb_grpc.MetadataStub(ch) for n, ch in channels.items()}
    for op in range(OPS_PER_WORKER_MAX):
        if time.monotonic() >= deadline or load.stop.is_set():
            break
        stub = stubs[rng.choice(load.targets())]
        key = rng.choice(keys)
        value = None
        try:
            if rng.random() < 0.6:
                value = b"w%d-op%d" % (index, op)
                h.put(stub, key, value, timeout=RPC_TIMEOUT_S)
                acked[key] = value
            else:
                h.get(stub, key, timeout=RPC_TIMEOUT_S)
            load.count(True)
        except grpc.RpcError as err:
            code = err.code()
            load.count(False, code.name if code else "NONE")
            if value is not None:
                unknown[key].add(value)
            if code in (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.RESOURCE_EXHAUSTED):
                time.sleep(0.02)
    outcome[index] = {k: unknown[k] | {acked[k]} for k in keys}


def streamer(load, channels, deadline, out):
    """ProposeStream calls through a live node each, one every LOAD_S / STREAM_ROUNDS_MAX: every
    call sends STREAM_ITEMS puts and reads every result. Counts results by code in out, an id
    answered twice or never asked in out["bad"], and how each call ended in out["ends"]."""
    rng = random.Random(h.SEED + 1000)
    stubs = {n: h.pb_grpc.MetadataStub(ch) for n, ch in channels.items()}
    start = time.monotonic()
    pace = (deadline - start) / STREAM_ROUNDS_MAX  # spread over the load, the kill included
    for rnd in range(STREAM_ROUNDS_MAX):
        load.stop.wait(max(0.0, start + rnd * pace - time.monotonic()))
        if time.monotonic() >= deadline or load.stop.is_set():
            break
        prefix = h.unique_key("tsan/s%d" % rnd, rng)
        msgs = [h.pb.ProposeStreamRequest(items=[
            h.pb.ProposeStreamItem(id=i, request=h.pb.ProposeRequest(put=h.pb.PutCommand(
                key=b"%s/%d" % (prefix, i), value=b"s%d-%d" % (rnd, i))))
            for i in range(b, b + STREAM_ITEMS_PER_MSG)])
            for b in range(0, STREAM_ITEMS, STREAM_ITEMS_PER_MSG)]
        seen = set()
        end = "OK"
        try:
            call = stubs[rng.choice(load.targets())].ProposeStream(iter(msgs),
                                                                   timeout=STREAM_TIMEOUT_S)
            for resp in call:
                for r in resp.results:
                    out["bad"] += r.id in seen or r.id >= STREAM_ITEMS
                    seen.add(r.id)
                    out["ok" if r.code == 0 else "failed"] += 1
                out["messages"] += 1
        except grpc.RpcError as err:
            end = err.code().name if err.code() else "NONE"
            time.sleep(0.05)
        out["ends"][end] = out["ends"].get(end, 0) + 1


def scraper(load, ports, deadline):
    """GET /metrics of every live node about once a second (the HTTP threads read the series)."""
    rounds = 0
    while time.monotonic() < deadline and not load.stop.is_set() and rounds < 100:
        for n in load.targets():
            try:
                url = "http://127.0.0.1:%d/metrics" % ports[n]
                with urllib.request.urlopen(url, timeout=2) as r:
                    r.read()
            except OSError:
                pass  # a node being killed, or slow under TSan: the load is what is checked
        rounds += 1
        load.stop.wait(1.0)


def watcher(load, channel, deadline, seen):
    """One Watch on the load's prefix until the deadline or its node dies: the (group, index, key)
    of every event it got, counted once each (a repeat is a failure)."""
    stub = h.pb_grpc.MetadataStub(channel)
    try:
        call = stub.Watch(h.pb.WatchRequest(prefix=b"tsan/", keys_only=True),
                          timeout=max(1.0, deadline - time.monotonic()))
        for msg in call:
            for e in msg.events:
                ident = (e.group_id, e.index, e.key)
                seen["dup"] += ident in seen["ids"]
                seen["ids"].add(ident)
            if load.stop.is_set():
                call.cancel()
                break
    except grpc.RpcError as err:
        seen["end"] = err.code().name if err.code() else "NONE"


def wait_caught_up(cluster, node, timeout):
    """True once node's own replica of every group it is a voter of has applied as far as the
    group's leader reported (its route shows both; the load has stopped). Bounded by timeout."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            route = cluster.route(via=node, timeout=RPC_TIMEOUT_S)
        except grpc.RpcError:
            time.sleep(0.2)
            continue
        behind = 0
        for g in route.groups:
            if node not in g.voters:
                continue
            applied = {r.node_id: r.applied_index for r in g.replicas}
            if g.leader == 0 or applied.get(node, 0) < applied.get(g.leader, 1):
                behind += 1
        if behind == 0:
            return True
        time.sleep(0.2)
    return False


def reports(cluster):
    """Lines of every node's log (all runs) that carry a sanitizer marker."""
    found = []
    for n, server in sorted(cluster.servers.items()):
        for line in server.log_text().splitlines():
            if any(m in line for m in TSAN_MARKERS + h.SANITIZER_MARKERS):
                found.append("node %d: %s" % (n, line))
    return found


def check_values(cluster, outcome, via):
    """Every key's final linearizable value is one its writer could have left."""
    stub = cluster.stub(via)
    bad = []
    for index, possible in sorted(outcome.items()):
        for key, values in possible.items():
            for attempt in range(20):
                try:
                    resp = h.get(stub, key, timeout=RPC_TIMEOUT_S * 2)
                    break
                except grpc.RpcError as err:
                    if attempt == 19 or err.code() != grpc.StatusCode.UNAVAILABLE:
                        raise
                    time.sleep(0.2)
            got = resp.get.value if resp.get.found else None
            if got not in values:
                bad.append("%r = %r, expected one of %r" % (key, got, sorted(map(repr, values))))
    return bad


def run(cluster, metrics_ports):
    t0 = time.monotonic()
    cluster.start(timeout=START_TIMEOUT_S)
    print("tsan smoke: %d nodes serving, every group led, after %.1f s"
          % (NODES, time.monotonic() - t0), flush=True)
    load = Load(cluster)
    problems = []
    channels = []
    try:
        outcome = {}
        start = time.monotonic()
        deadline = start + LOAD_S
        threads = []
        for i in range(WORKERS):
            chans = {n: h.open_channel(cluster.addr(n)) for n in cluster.node_ids}
            channels.extend(chans.values())
            threads.append(threading.Thread(target=worker, args=(load, i, deadline, chans, outcome),
                                            daemon=True))
        threads.append(threading.Thread(target=scraper, args=(load, metrics_ports, deadline),
                                        daemon=True))
        streams = {"ok": 0, "failed": 0, "bad": 0, "messages": 0, "ends": {}}
        chans = {n: h.open_channel(cluster.addr(n)) for n in cluster.node_ids}
        channels.extend(chans.values())
        threads.append(threading.Thread(target=streamer, args=(load, chans, deadline, streams),
                                        daemon=True))
        watches = {}
        for n in cluster.node_ids:
            ch = h.open_channel(cluster.addr(n))
            channels.append(ch)
            watches[n] = {"ids": set(), "dup": 0, "end": None}
            threads.append(threading.Thread(target=watcher, args=(load, ch, deadline, watches[n]),
                                            daemon=True))
        for t in threads:
            t.start()
        load.stop.wait(KILL_AT_S)
        route = cluster.route(timeout=RPC_TIMEOUT_S * 2)
        victim = cluster.busiest_leader(route)
        led = sorted(g for g, n in cluster.leaders(route).items() if n == victim)
        with load.mu:
            load.dead.add(victim)
            load.kill_time = time.monotonic()
        cluster.kill(victim)
        print("tsan smoke: killed node %d (kill -9) at %.1f s; it led groups %s"
              % (victim, load.kill_time - start, led), flush=True)
        for t in threads:
            t.join(timeout=LOAD_S + 3 * RPC_TIMEOUT_S)
        load.stop.set()
        if any(t.is_alive() for t in threads):
            problems.append("a load thread did not finish within its bound")
        print("tsan smoke: load ok before kill %d, after kill %d, errors %s"
              % (load.ok_before, load.ok_after, dict(sorted(load.errors.items()))), flush=True)
        print("tsan smoke: watch events per node %s, ends %s"
              % ({n: len(w["ids"]) for n, w in watches.items()},
                 {n: w["end"] for n, w in watches.items()}), flush=True)
        print("tsan smoke: ProposeStream results ok %d, failed %d, in %d messages, calls ended %s"
              % (streams["ok"], streams["failed"], streams["messages"],
                 dict(sorted(streams["ends"].items()))), flush=True)
        if streams["bad"]:
            problems.append("ProposeStream answered %d ids twice or unasked" % streams["bad"])
        if streams["ok"] < MIN_STREAM_OK:
            problems.append("ProposeStream answered only %d puts OK (want >= %d)"
                            % (streams["ok"], MIN_STREAM_OK))
        for n, w in watches.items():
            if w["dup"]:
                problems.append("node %d's watch delivered %d events twice" % (n, w["dup"]))
            if n != victim and len(w["ids"]) < MIN_OK_BEFORE_KILL:
                problems.append("node %d's watch got only %d events" % (n, len(w["ids"])))
        if load.ok_before < MIN_OK_BEFORE_KILL:
            problems.append("only %d calls succeeded before the kill (want >= %d)"
                            % (load.ok_before, MIN_OK_BEFORE_KILL))
        if load.ok_after < MIN_OK_AFTER_KILL:
            problems.append("only %d calls succeeded after the kill (want >= %d)"
                            % (load.ok_after, MIN_OK_AFTER_KILL))
        t1 = time.monotonic()
        cluster.restart(victim, timeout=RESTART_TIMEOUT_S)
        cluster.wait_leaders(via=victim, timeout=RESTART_TIMEOUT_S)
        caught_up = wait_caught_up(cluster, victim, RESTART_TIMEOUT_S)
        installs = cluster.server(victim).log_lines('msg="snapshot installed"', True)
        print("tsan smoke: node %d restarted, %s after %.1f s; snapshots installed there: %d"
              % (victim, "caught up with every leader" if caught_up else "NOT caught up",
                 time.monotonic() - t1, len(installs)), flush=True)
        if not caught_up:
            problems.append("node %d did not catch up within %.0f s of its restart"
                            % (victim, RESTART_TIMEOUT_S))
        bad = check_values(cluster, outcome, via=victim)
        problems += ["value check: " + b for b in bad[:10]]
    finally:
        load.stop.set()
        for ch in channels:
            ch.close()
        for n in cluster.node_ids:
            problem = cluster.stop(n)
            if problem:
                problems.append("node %d: %s" % (n, problem))
    return problems


def main():
    if not Path(os.environ["SLOTD_BIN"]).exists():
        print("tsan smoke: %s does not exist (make tsan builds it)" % os.environ["SLOTD_BIN"])
        return 1
    workdir = tempfile.mkdtemp(prefix="slotd-tsan-")
    print("tsan smoke: SLOTD_BIN=%s seed=%d workdir=%s"
          % (os.environ["SLOTD_BIN"], h.SEED, workdir), flush=True)
    t0 = time.monotonic()
    metrics_ports = dict(zip(range(1, NODES + 1), h.free_ports(NODES)))
    node_args = {n: ["--metrics-listen", "127.0.0.1:%d" % p] for n, p in metrics_ports.items()}
    cluster = h.SlotdCluster(workdir, size=NODES, name="tsan", slot_groups=SLOT_GROUPS,
                             extra_args=NODE_ARGS, node_args=node_args)
    try:
        problems = run(cluster, metrics_ports)
    except Exception as err:  # noqa: BLE001 - any failure keeps the logs and says why
        problems = ["%s: %s" % (type(err).__name__, err)]
        for n in cluster.node_ids:
            cluster.kill(n)
    problems += reports(cluster)
    if problems:
        print("tsan smoke: FAILED after %.1f s (replay: SLOTD_E2E_SEED=%d %s):"
              % (time.monotonic() - t0, h.SEED, " ".join(sys.argv)))
        for p in problems:
            print("  " + p)
        for server in cluster.servers.values():
            print(server.log_tail(20))
        print("tsan smoke: logs kept in %s" % workdir)
        return 1
    print("tsan smoke: ok after %.1f s, no ThreadSanitizer report in %d node logs"
          % (time.monotonic() - t0, NODES))
    shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
