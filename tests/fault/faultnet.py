# faultnet.py - fault-build clusters: per-node fault environment, partitions, crash points.
"""Cluster control for the fault build (service/fault, cmake -DSLOTD_FAULT=ON).

Partitions use the fault build's in-process peer filter, not network namespaces: every node
re-reads its own file ``<workdir>/<node>.net`` (SLOTD_FAULT_NET_FILE) every POLL_MS and drops
what it would send to a node listed there as ``block=N`` (raft messages silently; forwarded
requests, status polls and snapshot chunks fail with UNAVAILABLE). Node X is cut off from Y in
one direction when X's file blocks Y; in both when each blocks the other. Clients are not
filtered: they still reach every node, so an isolated leader can be asked for reads.

The binary is ``$SLOTD_FAULT_BIN``; fault tests skip with the reason when it is unset or is
not a fault build (they fail instead when SLOTD_FAULT_REQUIRED=1, as scripts/test.sh sets).
"""

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "e2e"))
import slotd_harness as h  # noqa: E402

FAULT_BIN = os.environ.get("SLOTD_FAULT_BIN", "")
CRASH_EXIT_STATUS = 86          # FAULT_CRASH_EXIT_STATUS in service/fault/fault.h
POLL_MS = 20                    # SLOTD_FAULT_NET_POLL_MS given to every node
APPLY_WAIT_S = 0.15             # > several polls: a written net file is in force after this
CRASH_POINTS = ("loop_before_log_sync", "loop_after_log_sync", "apply_after_fsm_commit", "snapshot_after_fsm_rows",
                "snapshot_mid_install")


def fault_bin_problem():
    """None when SLOTD_FAULT_BIN names a fault build of slotd, else why not (a skip reason)."""
    if not FAULT_BIN:
        return "SLOTD_FAULT_BIN is not set (build with -DSLOTD_FAULT=ON, see tests/fault/README.md)"
    if not Path(FAULT_BIN).exists():
        return "SLOTD_FAULT_BIN=%s does not exist" % FAULT_BIN
    try:
        blob = Path(FAULT_BIN).read_bytes()
    except OSError as err:
        return "SLOTD_FAULT_BIN=%s: %s" % (FAULT_BIN, err)
    if b"fault_crash_point_hit" not in blob and b"SLOTD_CRASH_AT" not in blob:
        return "SLOTD_FAULT_BIN=%s is not a fault build (no SLOTD_CRASH_AT in it)" % FAULT_BIN
    return None


class FaultServer(h.SlotdServer):
    """A SlotdServer running SLOTD_FAULT_BIN with its own fault environment.

    env: variables for every start; env_once: for the next start only (e.g. SLOTD_CRASH_AT, so
    the restart after the crash runs without it)."""

    def __init__(self, workdir, name, slot_groups=None, env=None):
        super().__init__(workdir, name=name, slot_groups=slot_groups)
        self.net_file = Path(workdir) / (name + ".net")
        self.net_file.write_text("")
        self.env = {"SLOTD_FAULT_NET_FILE": str(self.net_file),
                    "SLOTD_FAULT_NET_POLL_MS": str(POLL_MS)}
        self.env.update(env or {})
        self.env_once = {}

    def _spawn(self):
        # Same as SlotdServer._spawn, with the fault binary and environment.
        cmd = [FAULT_BIN, "--listen", self.addr, "--data-dir", str(self.data_dir)]
        if "--peer-listen" not in self.extra_args:
            cmd += ["--peer-listen", self.peer_addr]
        if self.slot_groups is not None:
            cmd += ["--slot-groups", str(self.slot_groups)]
        cmd += self.default_args() + self.extra_args
        env = dict(os.environ)
        env.update(self.env)
        env.update(self.env_once)
        shown = " ".join("%s=%s" % kv for kv in sorted(self.env_once.items()))
        self.env_once = {}
        with open(self.log_path, "ab") as log:
            log.write(b"=== harness: start %d: %s %s\n"
                      % (self.starts + 1, shown.encode(), " ".join(cmd).encode()))
            log.flush()
            self._log_offset = log.tell()
            self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log,
                                         stderr=subprocess.STDOUT, cwd=str(self.data_dir.parent),
                                         env=env, preexec_fn=h._die_with_parent)
        self.starts += 1

    def set_net(self, spec):
        """Replaces this node's network faults (atomic rename; in force within POLL_MS)."""
        tmp = self.net_file.with_suffix(".tmp")
        tmp.write_text(spec + "\n")
        os.replace(tmp, self.net_file)

    def wait_exit(self, timeout):
        """The exit status once the process exits within timeout, else None. Reaps it."""
        try:
            status = self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            return None
        self.proc = None
        self.paused = False
        self._close_channel()
        return status


class FaultCluster(h.SlotdCluster):
    """SlotdCluster of FaultServer nodes; env applies to every node (e.g. unsafe reads)."""

    def __init__(self, workdir, env=None, **kwargs):
        super().__init__(workdir, **kwargs)
        name = kwargs.get("name", "cluster")
        self.servers = {n: FaultServer(workdir, "%s-node%d" % (name, n),
                                       slot_groups=kwargs.get("slot_groups"), env=env)
                        for n in self.node_ids}
        self.net = {n: set() for n in self.node_ids}   # node -> nodes it does not send to
        self.net_extra = ""                             # drop/delay for every node

    # -- partitions --

    def _publish(self):
        for n in self.node_ids:
            spec = ",".join(["block=%d" % b for b in sorted(self.net[n])] +
                            ([self.net_extra] if self.net_extra else []))
            self.servers[n].set_net(spec)
        time.sleep(APPLY_WAIT_S)

    def cut(self, src, dst):
        """src's messages to dst are lost from now on (one way)."""
        self.net[src].add(dst)

    def isolate(self, node, apply=True):
        """node and every other node cannot reach each other (both ways)."""
        for other in self.node_ids:
            if other != node:
                self.cut(node, other)
                self.cut(other, node)
        if apply:
            self._publish()

    def split(self, side_a, apply=True):
        """Nodes in side_a and the rest cannot reach each other (both ways)."""
        side_b = [n for n in self.node_ids if n not in side_a]
        for a in side_a:
            for b in side_b:
                self.cut(a, b)
                self.cut(b, a)
        if apply:
            self._publish()

    def one_way(self, src, dst_nodes, apply=True):
        """src's messages to each of dst_nodes are lost; theirs to src still arrive."""
        for d in dst_nodes:
            self.cut(src, d)
        if apply:
            self._publish()

    def flaky(self, spec):
        """drop/delay (a fault_net_parse spec without block=) on every node."""
        self.net_extra = spec
        self._publish()

    def heal_net(self):
        self.net = {n: set() for n in self.node_ids}
        self.net_extra = ""
        self._publish()

    def wait_net(self, timeout=5.0):
        """Returns once every running node logged the faults published last as in force
        ("fault: network faults now ... blocked=0x<mask>"); fails after timeout. Use it when a
        test needs the cut in force, not just likely (_publish waits APPLY_WAIT_S only)."""
        deadline = time.monotonic() + timeout
        while True:
            behind = []
            for n in self.node_ids:
                server = self.servers[n]
                if not server.running():
                    continue
                mask = "blocked=0x%x" % sum(1 << b for b in self.net[n])
                lines = server.log_lines("fault: network faults now", current_run_only=True)
                if not lines or not lines[-1].rstrip().endswith(mask):
                    behind.append(n)
            if not behind:
                return
            if time.monotonic() >= deadline:
                raise AssertionError("nodes %s did not log their network faults (%s) within "
                                     "%.0f s" % (behind, self.describe_net(), timeout))
            time.sleep(0.02)

    def describe_net(self):
        cuts = ["%d->%d" % (s, d) for s in self.node_ids for d in sorted(self.net[s])]
        return "cut %s%s" % (",".join(cuts) or "none",
                             (" " + self.net_extra) if self.net_extra else "")


class FaultTestCase(h.SlotdTestCase):
    """SlotdTestCase that skips without a fault build and makes FaultClusters."""

    def setUp(self):
        problem = fault_bin_problem()
        if problem and os.environ.get("SLOTD_FAULT_REQUIRED") == "1":
            self.fail(problem + " (SLOTD_FAULT_REQUIRED=1)")
        if problem:
            self.skipTest(problem)

    def new_fault_cluster(self, env=None, crash_at=None, **kwargs):
        """A started FaultCluster living for one test. env: for every node and start;
        crash_at: {node_id: "name[:n]"} as SLOTD_CRASH_AT for that node's first start only."""
        if getattr(self, "_workdir", None) is None:
            self._workdir = tempfile.mkdtemp(prefix="slotd-fault-")
            self._servers = []
        cluster = FaultCluster(self._workdir, env=env, name="c%d" % len(self._servers), **kwargs)
        for node, spec in (crash_at or {}).items():
            cluster.server(node).env_once["SLOTD_CRASH_AT"] = spec
        self._servers.extend(cluster.servers.values())
        return cluster.start()
