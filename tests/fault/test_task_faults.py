# test_task_faults.py - kill -9 each participant of a replica move at each phase, under writes.
"""Replica moves (controller tasks, service/runtime/task.c) with a participant killed mid-phase.

A 4-node fault-build cluster (every node a controller voter, 3 replicas per slot group, so each
group has one node outside it to move to) with a small --task-phase-timeout-ms. Each case picks
a group G whose four roles fall on four distinct nodes: the target T (the node outside G), the
group leader L (the executor), the controller leader C (a peer of G, not its leader) and the
source S (the remaining peer). It starts a sequential writer (request ids, retries, every
acknowledged value recorded) and the checked workload on keys of G, creates MoveReplica(G, S, T)
and kills one role at one phase:

  target, source, controller leader   TaskStatus polled every POLL_S until the task is at the
                                      phase, then kill -9
  group leader                        restarted first with SLOTD_CRASH_AT armed, so it exits
                                      (status 86) at the crash point: task_before_advance (the
                                      phase proven, not reported) at hit phase+1, or
                                      task_after_conf_change (a membership change proposed, not
                                      committed) at hit 1/2/3 for add_learner/promote/remove_source

The victim is restarted after DOWN_S. The task must be done within TASK_DONE_S; a failed one must
show last_error with the desired peers unchanged, and is retried (Admin.RetryTask) until done.
After each case: every acknowledged key reads back its last value (LINEARIZABLE), the desired
peers are the initial ones minus S plus T (config epoch + 1) and equal the raft voters of the
executor's proof of the last phase (no learners, leader not S: no API shows a group's live raft
membership, Peer.GroupStatus and RouteSnapshot list the desired peers), S drops its replica, T
hosts one, every group is led by its preferred leader again and every node answers reads of G
(bounded waits: settle_and_check's final reads are not retried, and reads meeting a leadership
handover or a node that does not know the leader yet fail with NO_LEADER), and
schedule.settle_and_check passes (every group writable, history linearizable, replicas
identical, one owner per hash slot).

test_target_down_past_the_phase_timeout_fails_and_retries keeps the target down at catch_up
until the executor fails the task, so the failed -> RetryTask -> done path runs every time.
"""

import json
import os
import random
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultnet  # noqa: E402
import lincheck  # noqa: E402
import schedule  # noqa: E402
import workload as wl  # noqa: E402
from workload import h  # noqa: E402
from slotd.v1 import admin_pb2, metadata_pb2  # noqa: E402

SEED = int(os.environ.get("SLOTD_FAULT_SEED", "0")) or random.randrange(1, 1 << 31)

NODES = 4
SLOT_GROUPS = 4
PHASE_TIMEOUT_MS = 8000     # --task-phase-timeout-ms: a stuck phase fails the task quickly
PHASES = ("add_learner", "catch_up", "promote", "remove_source")
# task_after_conf_change hits of the executor: the membership change each phase proposes.
CONF_CHANGE_HIT = {"add_learner": 1, "promote": 2, "remove_source": 3}
POLL_S = 0.01               # TaskStatus polling while waiting for the phase to kill at
PHASE_REACH_S = 20.0        # the task reaches the phase to kill at within this
DOWN_S = 1.0                # the victim stays down this long
TASK_DONE_S = 60.0          # a task is done (or failed) within this after the kill
RETRIES_MAX = 2             # RetryTask calls per case
RETRY_S = 10.0              # one RetryTask is accepted within this
WARMUP_S = 0.3              # writes before the task is created
OPS_MAX = 100000            # per workload client: more than a case can use (ops are time-bound)
CRASH_BOUND_S = 30.0        # the armed executor reaches its crash point within this
CONVERGE_S = 20.0           # leaders, voters, dropped replicas: bounded waits
WRITER_KEYS = 16
WORKLOAD_KEYS = 6
WORKLOAD_CLIENTS = 3
RPC_S = 3.0


# ---- small RPC helpers --------------------------------------------------------------------------

def admin(server, method, request, timeout=RPC_S):
    raw = h.raw_unary(server.channel, "/slotd.v1.Admin/" + method, request.SerializeToString(),
                      timeout=timeout)
    return admin_pb2.AdminWriteResponse.FromString(raw)


def cluster_state(server):
    raw = h.raw_unary(server.channel, "/slotd.v1.Admin/ClusterState",
                      admin_pb2.ClusterStateRequest().SerializeToString(), timeout=RPC_S)
    resp = admin_pb2.ClusterStateResponse.FromString(raw)
    return json.loads(resp.state_json)


def task_status(server, task_id):
    raw = h.raw_unary(server.channel, "/slotd.v1.Metadata/TaskStatus",
                      metadata_pb2.TaskStatusRequest(task_id=task_id).SerializeToString(),
                      timeout=RPC_S)
    return metadata_pb2.TaskStatusResponse.FromString(raw).task


def _varint(buf, i):
    out, shift = 0, 0
    while True:
        b = buf[i]
        i += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, i
        shift += 7
        if shift > 63:
            raise ValueError("varint longer than 10 bytes")


def _fields(buf):
    """(field number, value) of a protobuf message: int for varints, bytes for length-delimited."""
    i = 0
    while i < len(buf):
        tag, i = _varint(buf, i)
        field, wire = tag >> 3, tag & 7
        if wire == 0:
            value, i = _varint(buf, i)
        elif wire == 2:
            n, i = _varint(buf, i)
            value, i = bytes(buf[i:i + n]), i + n
        else:
            raise ValueError("field %d: wire type %d not expected here" % (field, wire))
        yield field, value


def _ids(value):
    """A repeated uint64 field's entry: packed (bytes) or one varint."""
    if isinstance(value, int):
        return [value]
    out, i = [], 0
    while i < len(value):
        v, i = _varint(value, i)
        out.append(v)
    return out


def group_status(server):
    """Peer.GroupStatus of one node (slotd.internal.v1, decoded by hand: the harness generates
    only the public protos): {group_id: {"leader", "voters", "learners", "commit"}} for the
    groups it hosts."""
    raw = server.peer_call("/slotd.internal.v1.Peer/GroupStatus", b"", timeout=RPC_S)
    groups = {}
    for field, value in _fields(raw):
        if field != 2:
            continue
        g = {"group": 0, "leader": 0, "voters": [], "learners": [], "commit": 0}
        for f, v in _fields(value):
            if f == 1:
                g["group"] = v
            elif f == 2:
                g["leader"] = v
            elif f == 4:
                g["voters"] += _ids(v)
            elif f == 5:
                g["learners"] += _ids(v)
            elif f == 6:
                g["commit"] = v
        groups[g["group"]] = g
    return groups


def wait_for(what, fn, timeout, interval=0.1):
    """Polls fn() (RPC errors count as "not yet") until truthy (returned) or AssertionError."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            last = fn()
            if last:
                return last
        except grpc.RpcError as err:
            last = "%s: %s" % (err.code().name, err.details())
        if time.monotonic() >= deadline:
            raise AssertionError("%s: not within %.0f s (last: %r)" % (what, timeout, last))
        time.sleep(interval)


# ---- the sequential writer ----------------------------------------------------------------------

class Writer:
    """Puts unique values to keys of one group, one at a time, through random live nodes; a failed
    put is retried with the same request id (the server's dedupe answers a retry of an applied
    request with its first result) for up to RETRY_S. Records the last acknowledged value of each
    key, and the values written after it whose outcome stayed unknown (the key may hold one)."""

    RETRY_S = 10.0

    def __init__(self, cluster, keys, tag):
        self.cluster = cluster
        self.keys = list(keys)
        self.tag = tag
        self.acked = {}          # key -> last acknowledged value
        self.maybe = {}          # key -> values written after it, outcome unknown
        self.n_acked = 0
        self.errors = {}
        self.targets = list(cluster.node_ids)
        self.lock = threading.Lock()
        self.stop = threading.Event()
        self.rng = random.Random(tag)
        self.thread = threading.Thread(target=self.run, daemon=True, name="writer-" + tag)

    def set_targets(self, node_ids):
        with self.lock:
            self.targets = list(node_ids)

    def put_once(self, req):
        with self.lock:
            targets = list(self.targets)
        server = self.cluster.server(self.rng.choice(targets))
        if not server.running() or server.channel is None:
            raise ConnectionError("node down")
        h.raw_unary(server.channel, "/slotd.v1.Metadata/Propose", req.SerializeToString(),
                    timeout=1.0)

    def run(self):
        for n in range(100000):
            if self.stop.is_set():
                return
            key = self.keys[n % len(self.keys)]
            value = b"%s-%d" % (self.tag.encode(), n)
            req = metadata_pb2.ProposeRequest(request_id=b"%s/w%d" % (self.tag.encode(), n),
                                              put=metadata_pb2.PutCommand(key=key, value=value))
            deadline = time.monotonic() + self.RETRY_S
            acked = False
            while not acked and time.monotonic() < deadline:
                try:
                    self.put_once(req)
                    acked = True
                except (grpc.RpcError, ConnectionError, ValueError) as err:
                    name = err.code().name if isinstance(err, grpc.RpcError) else "CLOSED"
                    with self.lock:
                        self.errors[name] = self.errors.get(name, 0) + 1
                    time.sleep(0.05)
            with self.lock:
                if acked:
                    self.acked[key] = value
                    self.maybe[key] = []
                    self.n_acked += 1
                else:
                    self.maybe.setdefault(key, []).append(value)
            time.sleep(0.01)

    def start(self):
        self.thread.start()
        return self

    def finish(self):
        self.stop.set()
        self.thread.join(self.RETRY_S + 5)
        return not self.thread.is_alive()


# ---- the test -----------------------------------------------------------------------------------

class TaskFaultTest(faultnet.FaultTestCase):
    """One 4-node cluster per test; each test runs its cases one after the other on it (the
    replicas move on with every case)."""

    maxDiff = None

    def start(self):
        sys.stderr.write("\n  SLOTD_FAULT_SEED=%d\n" % SEED)
        self.c = self.new_fault_cluster(size=NODES, replicas=3, slot_groups=SLOT_GROUPS,
                                        extra_args=["--task-phase-timeout-ms",
                                                    str(PHASE_TIMEOUT_MS)])
        self.rng = random.Random("tasks/%s/%d" % (self._testMethodName, SEED))
        self.n_case = 0
        self.lines = []

    # -- views of the cluster --

    def live(self, exclude=()):
        return [n for n in self.c.node_ids if self.c.server(n).running() and n not in exclude]

    def any_call(self, fn, exclude=()):
        """fn(server) through the live nodes in turn; the first answer, else the last error."""
        last = None
        for n in self.live(exclude):
            try:
                return fn(self.c.server(n))
            except grpc.RpcError as err:
                last = err
        raise last if last is not None else AssertionError("no live node")

    def state(self, via=None):
        if via is not None:
            return cluster_state(self.c.server(via))
        return self.any_call(cluster_state)

    def group(self, gid, via=None):
        return [g for g in self.state(via)["groups"] if g["id"] == gid][0]

    def task(self, task_id, via=None):
        if via is not None:
            return task_status(self.c.server(via), task_id)
        return self.any_call(lambda s: task_status(s, task_id))

    def leaders(self):
        return {g.group_id: g.leader for g in self.c.route(self.live()[0]).groups}

    # -- choosing a case --

    def pick(self, armed):
        """(group, leader, source, target, controller leader) with four distinct nodes, the
        group led by its preferred leader when the leader is the victim (it must lead again
        after its armed restart). Waits for such a group; AssertionError with the reason."""
        def candidates():
            ctl = schedule.controller_leader(self.c, bound_s=5.0)
            if ctl is None:
                return None
            state = self.state(ctl)
            leaders = self.leaders()
            out = []
            for g in state["groups"]:
                peers = g["desired_peers"]
                lead = leaders.get(g["id"], 0)
                if ctl not in peers or lead in (0, ctl) or lead not in peers:
                    continue
                if armed and lead != g["preferred_leader"]:
                    continue
                source = [p for p in peers if p not in (lead, ctl)][0]
                target = [n for n in self.c.node_ids if n not in peers][0]
                if any(t["group"] == g["id"] and t["status"] in ("running", "pending", "failed")
                       for t in state["tasks"]):
                    continue
                out.append((g["id"], lead, source, target, ctl))
            return out or None
        found = wait_for("a group whose leader, source, target and the controller leader are "
                         "four distinct nodes%s" % (" (led by its preferred leader)"
                                                     if armed else ""),
                         candidates, CONVERGE_S, interval=0.3)
        return found[self.n_case % len(found)]

    # -- one case --

    def run_case(self, role, phase, crash_point=None, hold_down=False):
        """Moves a replica and kills `role` at `phase` (crash_point: the group leader is armed
        with it instead of being killed; hold_down: the victim stays down until the task has
        failed, then comes back and the task is retried). Prints one line; asserts everything
        the module docstring lists. Returns the outcome."""
        t_case = time.monotonic()
        pi = PHASES.index(phase)
        armed = crash_point is not None
        gid, lead, source, target, ctl = self.pick(armed)
        victim = {"target": target, "source": source, "group_leader": lead,
                  "controller_leader": ctl}[role]
        before = self.group(gid, ctl)
        arm_s = 0.0
        if armed:
            hit = pi + 1 if crash_point == "task_before_advance" else CONF_CHANGE_HIT[phase]
            self.arm(victim, gid, "%s:%d" % (crash_point, hit))
            arm_s = time.monotonic() - t_case
        tag = "t%d-%s-%s" % (self.n_case, role, phase)
        table = self.c.table
        keys = [h.key_in_group(table, gid, "%s/w" % tag, self.rng) for _ in range(WRITER_KEYS)]
        wkeys = [h.key_in_group(table, gid, "%s/lin" % tag, self.rng)
                 for _ in range(WORKLOAD_KEYS)]
        writer = Writer(self.c, keys, "%d-%s" % (SEED, tag)).start()
        work = wl.Workload(self.c, wkeys, "%d-%s" % (SEED, tag), clients=WORKLOAD_CLIENTS,
                           ops_max=OPS_MAX).start()
        t0 = time.monotonic()
        result = schedule.RunResult(kinds=())
        try:
            time.sleep(WARMUP_S)
            task_id = self.create_move(gid, source, target, via=ctl)
            if armed:
                self.wait_crash(victim, crash_point)
            else:
                self.wait_phase(task_id, pi, via=ctl if victim != ctl else source)
            writer.set_targets(self.live(exclude=(victim,)))
            work.set_targets(self.live(exclude=(victim,)))
            report = self.c.kill(victim)
            self.assertIsNone(report, "node %d sanitizer report: %s" % (victim, report))
            at = self.task(task_id)
            moved_on = ""
            if armed:  # the crash point stops the executor before the phase is reported
                self.assertEqual((at.phase_index, at.phase), (pi, phase),
                                 "node %d crashed at %s:%d during the wrong phase"
                                 % (victim, crash_point, hit))
            elif at.phase_index != pi:  # the executor reported it between the poll and the kill
                moved_on = " (at %s as the kill landed)" % at.phase
            if hold_down:
                self.wait_task(task_id, ("failed",), PHASE_TIMEOUT_MS / 1000.0 + TASK_DONE_S)
            else:
                time.sleep(DOWN_S)
            self.c.restart(victim)
            writer.set_targets(self.c.node_ids)
            work.set_targets(self.c.node_ids)
            outcome = self.finish_task(task_id, gid, before)
            task_s = time.monotonic() - t0
            self.assertTrue(writer.finish(), "the writer is stuck")
            self.check_after(task_id, gid, before, source, target, writer)
            settled_s = self.wait_preferred_leaders()
            routed_ms = self.wait_routed(wkeys[0])
            schedule.settle_and_check(self.c, work, wkeys, result, SEED, self.rng, t0)
        finally:
            writer.finish()
            work.stop()
        problems = result.problems()
        if problems:
            path = "/tmp/slotd-lincheck-history-tasks-%s-%d.json" % (tag, SEED)
            lincheck.save_history(result.history, path)
            problems.append("history saved to %s; now: %s" % (path, self.diagnose(gid, wkeys[0])))
        self.assertEqual(problems, [], "%s: end-of-run checks" % tag)
        line = ("%-13s victim %-17s node %d (%s)%s, group %d %d->%d: %s, %.1f s (armed restart "
                "%.1f s, task %.1f s, leaders back on the preferred ones %.1f s); writer %d acked "
                "(errors %s); %d ops linearizable; every node routes the group %.0f ms after"
                % (phase, role, victim, crash_point or "kill -9", moved_on, gid, source, target,
                   outcome, time.monotonic() - t_case, arm_s, task_s, settled_s, writer.n_acked,
                   writer.errors, result.report.ops, routed_ms))
        self.lines.append(line)
        sys.stderr.write("  " + line + "\n")
        self.n_case += 1
        return outcome

    def arm(self, node, gid, spec):
        """Restarts node (SIGTERM) with SLOTD_CRASH_AT=spec and waits until it leads gid again
        (it is gid's preferred leader: the controller's convergence hands leadership back)."""
        self.assertIsNone(self.c.stop(node))
        self.c.server(node).env_once["SLOTD_CRASH_AT"] = spec
        self.c.restart(node)
        self.assertTrue(self.c.server(node).log_lines("armed", True), "not armed: %s" % spec)
        wait_for("node %d leads group %d again after its armed restart" % (node, gid),
                 lambda: self.leaders().get(gid) == node, CONVERGE_S)

    def create_move(self, gid, source, target, via):
        req = admin_pb2.MoveReplicaRequest(group_id=gid, from_node=source, to_node=target)
        resp = wait_for("MoveReplica accepted", lambda: admin(self.c.server(via), "MoveReplica",
                                                               req), 10)
        self.assertEqual(resp.outcome, admin_pb2.OUTCOME_CHANGED)
        self.assertGreater(resp.task_id, 0)
        return resp.task_id

    def wait_phase(self, task_id, pi, via):
        """Polls TaskStatus until the task is running at phase index pi; fails when it is past."""
        deadline = time.monotonic() + PHASE_REACH_S
        seen = []
        while time.monotonic() < deadline:
            try:
                t = self.task(task_id, via)
            except grpc.RpcError:
                time.sleep(POLL_S)
                continue
            if not seen or seen[-1] != (t.phase, t.status):
                seen.append((t.phase, t.status))
            if t.status == "running" and t.phase_index == pi:
                return
            if t.status != "running" or t.phase_index > pi:
                self.fail("task %d went past phase %s before the kill (seen %s)"
                          % (task_id, PHASES[pi], seen))
            time.sleep(POLL_S)
        self.fail("task %d not at phase %s within %.0f s (seen %s)"
                  % (task_id, PHASES[pi], PHASE_REACH_S, seen))

    def wait_crash(self, node, point):
        server = self.c.server(node)
        status = server.wait_exit(CRASH_BOUND_S)
        self.assertIsNotNone(status, "node %d did not reach crash point %s within %.0f s"
                             % (node, point, CRASH_BOUND_S))
        self.assertEqual(status, faultnet.CRASH_EXIT_STATUS, "node %d exited with %d, not at the "
                         "crash point\n%s" % (node, status, server.log_tail()))
        self.assertTrue(server.log_lines("fault: crash point %s hit" % point, True),
                        server.log_tail())

    def wait_task(self, task_id, statuses, timeout, attempt=1):
        """The task once a node shows it in one of statuses at attempt `attempt` or later (a
        node may show the previous attempt for a moment after a RetryTask)."""
        def check():
            t = self.task(task_id)
            return t if t.status in statuses and t.attempt >= attempt else None
        return wait_for("task %d %s" % (task_id, "/".join(statuses)), check, timeout,
                        interval=0.2)

    def finish_task(self, task_id, gid, before):
        """Waits until the task is done; a failed task must show last_error with the desired
        peers and config epoch unchanged, and is retried (at most RETRIES_MAX times). Returns
        the outcome ("done", "failed at P (error)->retried->done", ...)."""
        outcome = []
        attempt = 1
        for _ in range(RETRIES_MAX + 1):
            t = self.wait_task(task_id, ("done", "failed"), TASK_DONE_S, attempt)
            if t.status == "done":
                outcome.append("done")
                return "->".join(outcome)
            self.assertTrue(t.last_error, "failed task %d shows no last_error" % task_id)
            now = self.group(gid)
            self.assertEqual((now["desired_peers"], now["config_epoch"]),
                             (before["desired_peers"], before["config_epoch"]),
                             "task %d failed at %s but the group's membership changed"
                             % (task_id, t.phase))
            outcome.append("failed at %s (%s)" % (t.phase, t.last_error))
            outcome.append(self.retry(task_id, t.attempt))
            attempt = t.attempt + 1
        self.fail("task %d: %s, not done after %d retries" % (task_id, outcome, RETRIES_MAX))

    def retry(self, task_id, attempt):
        """Admin.RetryTask through one live node per try, for up to RETRY_S. A try that fails
        (e.g. DEADLINE_EXCEEDED) may still have been applied: the task's attempt then moved
        past `attempt`, and the next try would be refused ("only a failed task can be
        retried"), so the task is read after every failed try. Returns "retried" or
        "retried (answers: ...)" naming the errors of the failed tries."""
        errors = []
        deadline = time.monotonic() + RETRY_S
        for n in range(100):
            node = self.live()[n % len(self.live())]
            try:
                r = admin(self.c.server(node), "RetryTask",
                          admin_pb2.RetryTaskRequest(task_id=task_id))
                self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
                break
            except grpc.RpcError as err:
                errors.append("node %d: %s: %s" % (node, err.code().name, err.details()))
            try:
                if self.task(task_id).attempt > attempt:
                    break
            except grpc.RpcError:
                pass
            if time.monotonic() >= deadline:
                self.fail("task %d: RetryTask not accepted within %.0f s: %s"
                          % (task_id, RETRY_S, errors))
            time.sleep(0.2)
        return "retried (answers: %s)" % "; ".join(errors) if errors else "retried"

    def check_after(self, task_id, gid, before, source, target, writer):
        """The move's result: desired peers, the executor's proof of the last phase (the only
        view of the group's raft membership the API gives: Peer.GroupStatus and RouteSnapshot
        list the desired peers as voters), the source's replica gone, the target's there, and
        every acknowledged write readable with its last value."""
        want = sorted([p for p in before["desired_peers"] if p != source] + [target])

        def shows_done(state):  # the node asked may apply the last advance a moment later
            return any(t["id"] == task_id and t["status"] == "done" for t in state["tasks"])
        state = wait_for("the cluster state shows task %d done" % task_id,
                         lambda: (lambda st: st if shows_done(st) else None)(self.state()),
                         CONVERGE_S)
        after = [g for g in state["groups"] if g["id"] == gid][0]
        self.assertEqual(sorted(after["desired_peers"]), want)
        self.assertEqual(after["config_epoch"], before["config_epoch"] + 1)
        proof = [t for t in state["tasks"] if t["id"] == task_id][0]["proof"]
        self.assertEqual((sorted(proof["voters"]), proof["learners"]), (want, []),
                         "task %d: raft membership at the last phase" % task_id)
        self.assertIn(proof["leader"], [p for p in want if p != source])
        wait_for("node %d dropped its replica of group %d" % (source, gid),
                 lambda: gid not in group_status(self.c.server(source)), CONVERGE_S)
        self.assertIn(gid, group_status(self.c.server(target)), "target hosts no replica")
        for key, value in writer.acked.items():
            resp = wait_for("read of %r" % key,
                            lambda: self.any_call(lambda s: s.stub.Read(
                                metadata_pb2.ReadRequest(get=metadata_pb2.GetQuery(key=key)),
                                timeout=RPC_S)), 10)
            allowed = [value] + writer.maybe.get(key, [])
            self.assertTrue(resp.get.found, "acknowledged key %r is gone" % key)
            self.assertIn(resp.get.value, allowed, "key %r: last acknowledged %r" % (key, value))
        self.assertGreater(writer.n_acked, 0, "no write acknowledged during the move")

    def wait_preferred_leaders(self):
        """Seconds until every group is led by its preferred leader. After a restart the
        controller's convergence hands leadership back to it (10 s cooldown per group), and a
        read that meets a leadership transfer fails with NO_LEADER: settle_and_check's final
        reads are not retried, so they start once no transfer is due (bounded by CONVERGE_S)."""
        t0 = time.monotonic()

        def settled():
            preferred = {g["id"]: g["preferred_leader"] for g in self.state()["groups"]}
            return self.leaders() == preferred
        wait_for("every group led by its preferred leader", settled, CONVERGE_S, interval=0.2)
        return time.monotonic() - t0

    def wait_routed(self, key):
        """ms until every node answers a LINEARIZABLE read of key. A node that has just
        restarted, opened a replica for a move or dropped one answers NO_LEADER ("group N: no
        leader known") until it learns the group's leader; settle_and_check's final reads are
        not retried, so they start once this holds (bounded by CONVERGE_S)."""
        t0 = time.monotonic()

        def all_answer():
            for n in self.c.node_ids:
                self.c.server(n).stub.Read(metadata_pb2.ReadRequest(
                    get=metadata_pb2.GetQuery(key=key)), timeout=RPC_S)
            return True
        wait_for("every node routes reads of %r" % key, all_answer, CONVERGE_S, interval=0.05)
        return (time.monotonic() - t0) * 1000.0

    def diagnose(self, gid, key):
        """What every live node says about group gid now: its route (leader, voters), its own
        replica (GroupStatus) and a LINEARIZABLE read of key through it."""
        out = []
        for n in self.live():
            server = self.c.server(n)
            try:
                route = {r.group_id: (r.leader, list(r.voters)) for r in server.route().groups}
                own = group_status(server).get(gid)
                server.stub.Read(metadata_pb2.ReadRequest(get=metadata_pb2.GetQuery(key=key)),
                                 timeout=RPC_S)
                out.append("node %d: route %s, replica %s, read ok" % (n, route.get(gid), own))
            except grpc.RpcError as err:
                out.append("node %d: %s: %s" % (n, err.code().name, err.details()))
        return "; ".join(out)

    def summary(self):
        sys.stderr.write("  %s: %d cases\n" % (self._testMethodName, len(self.lines)))

    # -- the cases --

    def _role_at_each_phase(self, role, crash_point=None, phases=PHASES):
        self.start()
        for phase in phases:
            self.run_case(role, phase, crash_point)
        self.summary()

    def test_kill_target_at_each_phase(self):
        self._role_at_each_phase("target")

    def test_kill_source_at_each_phase(self):
        self._role_at_each_phase("source")

    def test_kill_controller_leader_at_each_phase(self):
        self._role_at_each_phase("controller_leader")

    def test_group_leader_crashes_before_each_advance(self):
        """The executor dies with the phase proven and not reported (task_before_advance)."""
        self._role_at_each_phase("group_leader", "task_before_advance")

    def test_group_leader_crashes_after_each_conf_change(self):
        """The executor dies right after proposing the phase's membership change
        (task_after_conf_change); catch_up proposes none."""
        self._role_at_each_phase("group_leader", "task_after_conf_change",
                                 phases=tuple(CONF_CHANGE_HIT))


    def test_target_down_past_the_phase_timeout_fails_and_retries(self):
        """The target dies at catch_up and stays down: the executor fails the task after the
        phase timeout (status failed, last_error, membership unchanged); the target comes back,
        RetryTask runs it again and it completes."""
        self.start()
        outcome = self.run_case("target", "catch_up", hold_down=True)
        self.assertTrue(outcome.startswith("failed at catch_up"), outcome)
        self.assertTrue(outcome.endswith("->done") and "retried" in outcome, outcome)
        self.summary()


if __name__ == "__main__":
    unittest.main()
