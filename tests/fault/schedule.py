# schedule.py - randomized fault schedules (kill -9, SIGSTOP/SIGCONT) and the run that checks a history.
"""One fault run: start the workload on a SlotdCluster, inject a seeded random sequence of faults,
heal everything, probe every group, read every key once more, check the history with lincheck and
compare replicas. Used by test_faults.py and torture.py.

Fault kinds (each round runs every kind once, in a seeded random order):
    kill_random          kill -9 of a random node, restart after a hold
    kill_leader          kill -9 of the node leading the most groups, restart after a hold;
                         measures ms until each of its groups acknowledges a write
    pause_one            SIGSTOP one random node, SIGCONT after a hold
    pause_two            SIGSTOP two nodes (the third is a minority), SIGCONT after a hold
"""

import os
import random
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import workload as wl  # noqa: E402
from workload import h  # noqa: E402
import lincheck  # noqa: E402

KINDS = ("kill_random", "kill_leader", "pause_one", "pause_two")
HOLD_S = (0.4, 1.2)          # how long a fault lasts
GAP_S = (0.3, 0.8)           # healthy time between faults
WARMUP_S = 0.5
HEAL_WRITE_BOUND_S = 15.0    # every group takes a write within this after healing
PROBE_BOUND_S = 15.0
OPS_PER_ROUND = 3000         # per client; a round of 4 faults lasts about 5-10 s (ops are time-bound)
OPS_BASE = 2000


class RunStats:
    def __init__(self):
        self.faults = {k: 0 for k in KINDS}
        self.leader_kill_ms = []      # per group whose leader was killed: ms to first ack
        self.log = []                 # (t, text)
        self.problems = []

    def note(self, t0, text):
        self.log.append((time.monotonic() - t0, text))


def _hold(rng, bounds):
    time.sleep(rng.uniform(*bounds))


def inject(cluster, work, rng, kind, stats, t0, seed):
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
        probes = wl.probe_groups(cluster, survivors, led, PROBE_BOUND_S,
                                 "probe/%s/%.3f" % (seed, time.monotonic()), rng)
        for g in led:
            secs, what = probes.get(g, (None, "no probe"))
            if secs is None:
                stats.problems.append("group %d: no write acknowledged %.0f s after kill -9 of "
                                      "its leader node %d (%s)" % (g, PROBE_BOUND_S, victim, what))
            else:
                stats.leader_kill_ms.append(secs * 1000.0)
                wl_note_index(work, what)
        stats.note(t0, "groups of node %d writable again" % victim)
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
    for n in cluster.node_ids:
        s = cluster.server(n)
        if s.paused:
            cluster.resume(n)
        if not s.running():
            cluster.restart(n)
    work.set_targets(cluster.node_ids)


class RunResult:
    def __init__(self):
        self.stats = RunStats()
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
        check_budget_s=lincheck.TIME_BUDGET_S):
    """One full run on a started cluster. Returns a RunResult (never raises on a finding).
    ops_max bounds each client's ops (default: enough to keep them busy through every round)."""
    if ops_max is None:
        ops_max = OPS_PER_ROUND * rounds + OPS_BASE
    rng = random.Random("schedule/%s" % seed)
    result = RunResult()
    t0 = time.monotonic()
    key_list = [b"lin/%s/k%d" % (str(seed).encode(), i) for i in range(keys)]
    work = wl.Workload(cluster, key_list, seed, clients=clients, ops_max=ops_max).start()
    try:
        time.sleep(WARMUP_S)
        for r in range(rounds):
            kinds = list(KINDS)
            rng.shuffle(kinds)
            for kind in kinds:
                inject(cluster, work, rng, kind, result.stats, t0, seed)
                _hold(rng, GAP_S)
        heal(cluster, work)
        result.stats.note(t0, "healed")
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
    result.history = list(work.history)
    result.errors = dict(work.errors)
    result.duplicates = list(work.duplicates)
    result.report = lincheck.check(result.history, time_budget_s=check_budget_s)
    result.seconds = time.monotonic() - t0
    return result
