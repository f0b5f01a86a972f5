# schedule.py - randomized fault schedules (kill -9, SIGSTOP/SIGCONT) and the run that checks a history.
"""One fault run: start the workload on a SlotdCluster, inject a seeded random sequence of faults,
heal everything, probe every group, read every key once more, check the history with lincheck and
compare replicas. Used by test_faults.py, test_partitions.py and torture.py.

Fault kinds (each round runs every kind of the run once, in a seeded random order):
    kill_random          kill -9 of a random node, restart after a hold
    kill_leader          kill -9 of the node leading the most groups, restart after a hold;
                         measures ms until each of its groups acknowledges a write
    pause_one            SIGSTOP one random node, SIGCONT after a hold
    pause_two            SIGSTOP two nodes (the third is a minority), SIGCONT after a hold
    kill_controller_leader  kill -9 of the controller (group 0) leader, restart after a hold;
                         measures ms until a controller write (a NOOP JoinNode) is acknowledged
                         through a survivor
Network kinds (need a faultnet.FaultCluster: the fault build's peer filter):
    partition_one        a random node cut off from the others both ways (1/2 split), healed
                         after a hold
    partition_leader     the node leading the most groups cut off both ways; measures ms until
                         each of its groups acknowledges a write through the majority side
    partition_one_way    a random node's messages to the others are lost while theirs reach it,
                         or the reverse (seeded coin)
    net_flaky            every node loses 10% of its raft messages and peer calls and paces
                         Raft batches by 15-45 ms, for the hold
"""

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload as wl  # noqa: E402
from workload import h  # noqa: E402
import lincheck  # noqa: E402

KINDS = ("kill_random", "kill_leader", "pause_one", "pause_two", "kill_controller_leader")
NET_KINDS = ("partition_one", "partition_leader", "partition_one_way", "net_flaky")
FLAKY_SPEC = "drop=0.1,delay_ms=30"
HOLD_S = (0.4, 1.2)          # how long a fault lasts
GAP_S = (0.3, 0.8)           # healthy time between faults
WARMUP_S = 0.5
HEAL_WRITE_BOUND_S = 15.0    # every group takes a write within this after healing
PROBE_BOUND_S = 15.0
OPS_PER_ROUND = 3000         # per client; a round of 4 faults lasts about 5-10 s (ops are time-bound)
OPS_BASE = 2000


class RunStats:
    def __init__(self, kinds=KINDS):
        self.faults = {k: 0 for k in kinds}
        self.leader_kill_ms = []       # per group whose leader was killed: ms to first ack
        self.leader_partition_ms = []  # per group whose leader was cut off: ms to first ack
        self.controller_kill_ms = []   # controller leader killed: ms to a controller write
        self.log = []                 # (t, text)
        self.problems = []

    def note(self, t0, text):
        self.log.append((time.monotonic() - t0, text))


def _hold(rng, bounds):
    time.sleep(rng.uniform(*bounds))


def _leader_unavailability(cluster, work, stats, victim, led, survivors, seed, rng, what, sink):
    """Probes every group led by victim through survivors; appends ms to the first ack to sink."""
    probes = wl.probe_groups(cluster, survivors, led, PROBE_BOUND_S,
                             "probe/%s/%.3f" % (seed, time.monotonic()), rng)
    for g in led:
        secs, resp = probes.get(g, (None, "no probe"))
        if secs is None:
            stats.problems.append("group %d: no write acknowledged %.0f s after %s of its leader "
                                  "node %d (%s)" % (g, PROBE_BOUND_S, what, victim, resp))
        else:
            sink.append(secs * 1000.0)
            wl_note_index(work, resp)


def inject_net(cluster, work, rng, kind, stats, t0, seed):
    """The network kinds (cluster is a faultnet.FaultCluster). Clients keep every target: the
    peer filter does not touch client traffic."""
    nodes = list(cluster.node_ids)
    if kind == "partition_one":
        victim = rng.choice(nodes)
        cluster.isolate(victim)
        stats.note(t0, "partition: node %d alone (%s)" % (victim, cluster.describe_net()))
    elif kind == "partition_leader":
        route = cluster.wait_leaders()
        victim = cluster.busiest_leader(route)
        led = sorted(g for g, l in cluster.leaders(route).items() if l == victim)
        cluster.isolate(victim)
        stats.note(t0, "partition: busiest leader node %d alone (groups %s)" % (victim, led))
        _leader_unavailability(cluster, work, stats, victim, led,
                               [n for n in nodes if n != victim], seed, rng, "partition",
                               stats.leader_partition_ms)
        stats.note(t0, "groups of node %d writable on the majority side" % victim)
    elif kind == "partition_one_way":
        victim = rng.choice(nodes)
        others = [n for n in nodes if n != victim]
        if rng.random() < 0.5:
            cluster.one_way(victim, others)
        else:
            for o in others:
                cluster.one_way(o, [victim], apply=False)
            cluster.one_way(victim, [])
        stats.note(t0, "one-way partition: %s" % cluster.describe_net())
    elif kind == "net_flaky":
        cluster.flaky(FLAKY_SPEC)
        stats.note(t0, "flaky network on every node: %s" % FLAKY_SPEC)
    else:
        raise ValueError(kind)
    _hold(rng, HOLD_S)
    cluster.heal_net()
    stats.note(t0, "network healed")
    stats.faults[kind] += 1


def _admin_join_noop(cluster, node, via, no_forward, timeout=2.0):
    """A controller write that changes nothing (JoinNode of an existing node, same address)."""
    from slotd.v1 import admin_pb2
    req = admin_pb2.JoinNodeRequest(node_id=node, address=cluster.peer_addr(node),
                                    no_forward=no_forward)
    raw = h.raw_unary(cluster.server(via).channel, "/slotd.v1.Admin/JoinNode",
                      req.SerializeToString(), timeout=timeout)
    return admin_pb2.AdminWriteResponse.FromString(raw)


def controller_leader(cluster, bound_s=PROBE_BOUND_S):
    """The controller leader: the one node that accepts a controller write with no_forward."""
    deadline = time.monotonic() + bound_s
    while time.monotonic() < deadline:
        for n in cluster.node_ids:
            if not cluster.server(n).running():
                continue
            try:
                _admin_join_noop(cluster, n, n, True)
                return n
            except h.grpc.RpcError:
                pass
        time.sleep(0.1)
    return None


def inject(cluster, work, rng, kind, stats, t0, seed):
    if kind in NET_KINDS:
        return inject_net(cluster, work, rng, kind, stats, t0, seed)
    nodes = list(cluster.node_ids)
    if kind == "kill_random":
        victim = rng.choice(nodes)
        work.set_targets([n for n in nodes if n != victim])
        report = cluster.kill(victim)
        stats.note(t0, "kill -9 node %d" % victim)
        if report:
            stats.problems.append("node %d sanitizer report: %s" % (victim, report))
        _hold(rng, HOLD_S)
        cluster.restart(victim)
        stats.note(t0, "restarted node %d" % victim)
        work.set_targets(nodes)
    elif kind == "kill_leader":
        route = cluster.wait_leaders()
        victim = cluster.busiest_leader(route)
        led = sorted(g for g, l in cluster.leaders(route).items() if l == victim)
        survivors = [n for n in nodes if n != victim]
        work.set_targets(survivors)
        report = cluster.kill(victim)
        stats.note(t0, "kill -9 busiest leader node %d (groups %s)" % (victim, led))
        if report:
            stats.problems.append("node %d sanitizer report: %s" % (victim, report))
        _leader_unavailability(cluster, work, stats, victim, led, survivors, seed, rng,
                               "kill -9", stats.leader_kill_ms)
        stats.note(t0, "groups of node %d writable again" % victim)
        _hold(rng, HOLD_S)
        cluster.restart(victim)
        stats.note(t0, "restarted node %d" % victim)
        work.set_targets(nodes)
    elif kind == "kill_controller_leader":
        victim = controller_leader(cluster)
        if victim is None:
            stats.problems.append("no controller leader within %.0f s" % PROBE_BOUND_S)
            stats.faults[kind] += 1
            return
        survivors = [n for n in nodes if n != victim]
        work.set_targets(survivors)
        report = cluster.kill(victim)
        start = time.monotonic()
        stats.note(t0, "kill -9 controller leader node %d" % victim)
        if report:
            stats.problems.append("node %d sanitizer report: %s" % (victim, report))
        acked = None
        while acked is None and time.monotonic() - start < PROBE_BOUND_S:
            try:
                _admin_join_noop(cluster, survivors[0], rng.choice(survivors), False)
                acked = (time.monotonic() - start) * 1000.0
            except h.grpc.RpcError:
                time.sleep(0.05)
        if acked is None:
            stats.problems.append("no controller write acknowledged %.0f s after kill -9 of "
                                  "the controller leader node %d" % (PROBE_BOUND_S, victim))
        else:
            stats.controller_kill_ms.append(acked)
            stats.note(t0, "controller writable again after %.0f ms" % acked)
        _hold(rng, HOLD_S)
        cluster.restart(victim)
        stats.note(t0, "restarted node %d" % victim)
        work.set_targets(nodes)
    elif kind == "pause_one":
        victim = rng.choice(nodes)
        work.set_targets([n for n in nodes if n != victim])
        cluster.pause(victim)
        stats.note(t0, "SIGSTOP node %d" % victim)
        _hold(rng, HOLD_S)
        cluster.resume(victim)
        stats.note(t0, "SIGCONT node %d" % victim)
        work.set_targets(nodes)
    elif kind == "pause_two":
        victims = rng.sample(nodes, 2)
        lone = [n for n in nodes if n not in victims]
        # the lone node gets the traffic: it has no quorum, so writes are unknown/unavailable
        work.set_targets(lone)
        for v in victims:
            cluster.pause(v)
        stats.note(t0, "SIGSTOP nodes %s (node %s alone)" % (victims, lone))
        _hold(rng, HOLD_S)
        for v in victims:
            cluster.resume(v)
        stats.note(t0, "SIGCONT nodes %s" % victims)
        work.set_targets(nodes)
    else:
        raise ValueError(kind)
    stats.faults[kind] += 1


def wl_note_index(work, resp):
    """Records a probe write's applied index as seen (for the replica comparison)."""
    with work.lock:
        if resp.applied_index > work.max_applied.get(resp.group_id, 0):
            work.max_applied[resp.group_id] = resp.applied_index


def heal(cluster, work):
    if hasattr(cluster, "heal_net"):
        cluster.heal_net()
    for n in cluster.node_ids:
        s = cluster.server(n)
        if s.paused:
            cluster.resume(n)
        if not s.running():
            cluster.restart(n)
    work.set_targets(cluster.node_ids)


class RunResult:
    def __init__(self, kinds=KINDS):
        self.stats = RunStats(kinds)
        self.report = None          # lincheck.Report
        self.history = []
        self.replica_problems = []
        self.heal_problems = []
        self.errors = {}
        self.duplicates = []
        self.seconds = 0.0
        self.busy_at_heal = 0       # clients still issuing ops when every fault was healed

    def problems(self):
        out = list(self.stats.problems) + self.heal_problems + self.replica_problems
        if self.duplicates:
            out.append("applied indexes acknowledged twice: %s" % self.duplicates[:5])
        if self.report is not None and self.report.violations:
            out.append("linearizability violations on keys %s"
                       % [lincheck._show(k) for k in self.report.violations])
        if self.report is not None and self.report.unknown_keys():
            out.append("checker ran out of budget on keys %s"
                       % [lincheck._show(k) for k in self.report.unknown_keys()])
        return out


def run(cluster, seed, rounds=1, keys=8, clients=6, ops_max=None,
        check_budget_s=lincheck.TIME_BUDGET_S, kinds=KINDS):
    """One full run on a started cluster. Returns a RunResult (never raises on a finding).
    ops_max bounds each client's ops (default: enough to keep them busy through every round).
    kinds: the fault kinds of each round (NET_KINDS need a faultnet.FaultCluster)."""
    if ops_max is None:
        ops_max = OPS_PER_ROUND * rounds + OPS_BASE
    rng = random.Random("schedule/%s" % seed)
    result = RunResult(kinds)
    t0 = time.monotonic()
    key_list = [b"lin/%s/k%d" % (str(seed).encode(), i) for i in range(keys)]
    work = wl.Workload(cluster, key_list, seed, clients=clients, ops_max=ops_max).start()
    try:
        time.sleep(WARMUP_S)
        for r in range(rounds):
            order = list(kinds)
            rng.shuffle(order)
            for kind in order:
                inject(cluster, work, rng, kind, result.stats, t0, seed)
                _hold(rng, GAP_S)
        heal(cluster, work)
        result.stats.note(t0, "healed")
        settle_and_check(cluster, work, key_list, result, seed, rng, t0, check_budget_s)
    finally:
        work.stop()  # a no-op after settle_and_check; stops the clients if a fault raised
    result.seconds = time.monotonic() - t0
    return result


def settle_and_check(cluster, work, key_list, result, seed, rng, t0,
                     check_budget_s=lincheck.TIME_BUDGET_S):
    """After healing: every group takes a write within HEAL_WRITE_BOUND_S, the clients stop, every
    key is read once more (LINEARIZABLE), replicas are compared and the history is checked; all
    findings go into result."""
    try:
        route = cluster.wait_leaders(timeout=HEAL_WRITE_BOUND_S)
        probes = wl.probe_groups(cluster, list(cluster.node_ids), cluster.group_ids,
                                 HEAL_WRITE_BOUND_S, "heal/%s" % seed, rng)
        for g in cluster.group_ids:
            secs, what = probes.get(g, (None, "no probe"))
            if secs is None:
                result.heal_problems.append("group %d: no write within %.0f s after healing (%s)"
                                            % (g, HEAL_WRITE_BOUND_S, what))
            else:
                wl_note_index(work, what)
        result.stats.note(t0, "every group writable (%s)" % h.route_summary(route))
    finally:
        result.busy_at_heal = work.clients_running()
        if not work.stop():
            result.heal_problems.append("a workload client is stuck")
    failed = work.final_reads(cluster.node_ids)
    result.heal_problems += ["final read of %r: %s" % f for f in failed]
    result.replica_problems = wl.replica_divergence(cluster, key_list, work.max_applied)
    result.heal_problems += route_ownership_problems(cluster)
    result.history = list(work.history)
    result.errors = dict(work.errors)
    result.duplicates = list(work.duplicates)
    result.report = lincheck.check(result.history, time_budget_s=check_budget_s)
    if result.report.violations:
        result.heal_problems += applied_definite_failures(cluster, work,
                                                          set(result.report.violations))


def route_ownership_problems(cluster):
    """Every hash slot has exactly one owning group per route revision: each node's
    RouteSnapshot maps all 256 hash slots to groups it lists, and nodes that show the same
    route_revision show the same table."""
    problems, tables = [], {}
    for n in cluster.node_ids:
        server = cluster.server(n)
        if not server.running():
            continue
        try:
            r = server.route()
        except h.grpc.RpcError as err:
            problems.append("node %d: RouteSnapshot failed: %s" % (n, err.code()))
            continue
        table = list(r.hash_slot_table)
        listed = {g.group_id for g in r.groups}
        if len(table) != 256 or any(g not in listed for g in table):
            problems.append("node %d: route revision %d does not map every hash slot to a listed "
                            "group: %s" % (n, r.route_revision, table))
            continue
        first = tables.setdefault(r.route_revision, (n, table))
        if first[1] != table:
            diff = [s for s in range(256) if first[1][s] != table[s]]
            problems.append("route revision %d: nodes %d and %d disagree on the owner of hash "
                            "slots %s" % (r.route_revision, first[0], n, diff[:16]))
    return problems


def applied_definite_failures(cluster, work, keys):
    """Diagnosis after a violation: re-sends every write of keys that failed with a definite
    error (and was left out of the history as not applied) with its request id. The server's
    dedupe answers a request it already applied with the first result, whose index is below the
    highest index the run saw; a fresh apply gets a higher one. Returns the writes proven applied
    although reported as failed (this changes the cluster: call it only after every check)."""
    out = []
    route = cluster.route()
    table = list(route.hash_slot_table)
    for req, err_name, node in list(work.definite_failures):
        key = getattr(req, req.WhichOneof("command")).key
        if key not in keys:
            continue
        seen = work.max_applied.get(table[h.hash_slot(key)], 0)
        try:
            resp = cluster.stub(cluster.node_ids[0]).Propose(req, timeout=5)
        except Exception as err:  # noqa: BLE001 - a diagnosis never raises
            out.append("re-send of %s %r (first answer %s via node %d) failed: %s"
                       % (req.WhichOneof("command"), key, err_name, node, err))
            continue
        if resp.applied_index <= seen:
            out.append("%s of %r (request id %r) answered %s via node %d but was applied at "
                       "index %d" % (req.WhichOneof("command"), key, req.request_id, err_name,
                                     node, resp.applied_index))
    return out
