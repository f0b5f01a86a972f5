# test_metrics.py - slotd's Prometheus /metrics: exposition parses, counters move with traffic,
# per-group raft gauges, histograms, 404 elsewhere, a busy metrics port is not fatal.
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
import unittest
import urllib.error
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

SEED = h.SEED
SCRAPE_TIMEOUT_S = 5
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
PROPOSE = "slotd.v1.Metadata/Propose"
READ = "slotd.v1.Metadata/Read"
HISTOGRAMS = ("slotd_grpc_request_duration_seconds", "slotd_raftlog_batch_entries",
              "slotd_raftlog_write_seconds", "slotd_apply_batch_entries")
PER_GROUP = ("slotd_raft_term", "slotd_raft_commit_index", "slotd_raft_applied_index",
             "slotd_raft_is_leader", "slotd_raft_leader_changes_total", "slotd_group_has_leader")


def http_get(port, path):
    """(status, content type, body text) of GET http://127.0.0.1:port/path."""
    url = "http://127.0.0.1:%d%s" % (port, path)
    try:
        with urllib.request.urlopen(url, timeout=SCRAPE_TIMEOUT_S) as resp:
            return resp.status, resp.headers.get("Content-Type"), resp.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.headers.get("Content-Type"), err.read().decode()


class Scrape:
    """One /metrics body, parsed by prometheus_client and checked line by line."""

    def __init__(self, test, text):
        self.text = text
        self.types = {}    # family name as written in # TYPE -> type
        self.samples = {}  # (sample name, sorted label items) -> value
        for family in text_string_to_metric_families(text):  # raises on a malformed line
            for sample in family.samples:
                key = (sample.name, tuple(sorted(sample.labels.items())))
                test.assertNotIn(key, self.samples, "duplicate sample %s" % (key,))
                self.samples[key] = sample.value
        seen_samples = set()
        for line in text.splitlines():
            test.assertTrue(line, "empty line in the exposition")
            if line.startswith("# TYPE "):
                _, _, name, kind = line.split(" ")
                test.assertNotIn(name, self.types, "two TYPE lines for %s" % name)
                test.assertNotIn(name, seen_samples, "TYPE of %s after its samples" % name)
                self.types[name] = kind
            elif not line.startswith("#"):
                seen_samples.add(line.split("{")[0].split(" ")[0])
        test.assertTrue(text.endswith("\n"))

    def value(self, name, **labels):
        return self.samples.get((name, tuple(sorted(labels.items()))))

    def series(self, name):
        """{labels dict as sorted tuple: value} of every sample called name."""
        return {labels: v for (n, labels), v in self.samples.items() if n == name}

    def total(self, name, **match):
        return sum(v for labels, v in self.series(name).items()
                   if all(dict(labels).get(k) == w for k, w in match.items()))


class MetricsTest(h.SlotdTestCase):
    """One server with --metrics-listen on a free port for the whole class."""

    @classmethod
    def setUpClass(cls):
        cls.metrics_port = h.free_port()
        cls.server = cls.new_class_server(
            extra_args=["--metrics-listen", "127.0.0.1:%d" % cls.metrics_port])
        cls.stub = cls.server.stub
        cls.table = list(cls.server.route().hash_slot_table)
        cls.groups = sorted(set(cls.table))

    def setUp(self):
        self.rng = random.Random("%d/%s" % (SEED, self.id()))

    def scrape(self):
        status, ctype, body = http_get(self.metrics_port, "/metrics")
        self.assertEqual(status, 200)
        self.assertEqual(ctype, CONTENT_TYPE)
        return Scrape(self, body)

    def test_exposition_types_and_help(self):
        s = self.scrape()
        want = {"slotd_grpc_requests_total": "counter",
                "slotd_grpc_request_duration_seconds": "histogram",
                "slotd_grpc_stream_frames_total": "counter",
                "slotd_raft_term": "gauge", "slotd_raft_commit_index": "gauge",
                "slotd_raft_applied_index": "gauge", "slotd_raft_is_leader": "gauge",
                "slotd_raft_leader_changes_total": "counter",
                "slotd_proposal_queue_depth": "gauge",
                "slotd_raftlog_batch_entries": "histogram",
                "slotd_raftlog_write_seconds": "histogram",
                "slotd_apply_batch_entries": "histogram",
                "slotd_snapshot_bytes_total": "counter",
                "slotd_snapshot_recv_abandoned_total": "counter",
                "slotd_propose_stream_inflight_peak": "gauge",
                "slotd_raft_dropped_messages_total": "counter",
                "slotd_route_revision": "gauge",
                "slotd_controller_revision": "gauge",
                "slotd_controller_tasks": "gauge",
                "slotd_preferred_leader_decisions_total": "counter",
                "slotd_read_local_total": "counter",
                "slotd_read_lease_total": "counter",
                "slotd_lease_expiries_total": "counter",
                "slotd_build_info": "gauge",
                "process_cpu_seconds_total": "counter",
                "process_resident_memory_bytes": "gauge",
                "process_start_time_seconds": "gauge", "process_open_fds": "gauge",
                "process_max_fds": "gauge",
                "slotd_data_dir_available_bytes": "gauge", "slotd_data_dir_size_bytes": "gauge",
                "slotd_group_has_leader": "gauge", "slotd_store_bytes": "gauge",
                "slotd_forward_total": "counter", "slotd_grpc_streams_total": "counter",
                "slotd_repair_moves_total": "counter", "slotd_groups_without_quorum": "gauge",
                "slotd_backup_runs_total": "counter",
                "slotd_backup_last_success_timestamp_seconds": "gauge",
                "slotd_backup_last_bytes": "gauge",
                "slotd_backup_plan_interval_seconds": "gauge",
                "slotd_backup_plan_last_success_timestamp_seconds": "gauge",
                "slotd_backup_plan_last_bytes": "gauge", "slotd_balance_moves_total": "counter"}
        for name, kind in want.items():
            self.assertEqual(s.types.get(name), kind, name)
            self.assertIn("# HELP %s " % name, s.text)
        self.assertEqual(set(s.types), set(want), "unexpected families")
        for queue in ("client", "peer"):
            self.assertIsNotNone(s.value("slotd_proposal_queue_depth", queue=queue), queue)
        for direction in ("sent", "received"):
            self.assertEqual(s.value("slotd_snapshot_bytes_total", direction=direction), 0)
        self.assertEqual(s.value("slotd_route_revision"), 1)

    def test_store_bytes_per_database(self):
        """slotd_store_bytes{db} is the size of the files of each LevelDB database, read at the
        scrape: between two listings of the directory taken around it, and it grows with writes."""
        def files_bytes(db):
            d = self.server.data_dir / db
            return sum(p.stat().st_size for p in d.iterdir() if p.is_file())
        for _ in range(3):
            h.put(self.stub, h.unique_key(b"storebytes", self.rng), b"x" * 65536)
        for db in ("fsm", "raftlog"):
            low = files_bytes(db)
            got = self.scrape().value("slotd_store_bytes", db=db)
            high = files_bytes(db)
            self.assertIsNotNone(got, db)
            self.assertGreater(got, 65536, db)  # the values are in the log and the rows
            self.assertLessEqual(min(low, high), got, db)
            self.assertLessEqual(got, max(low, high) * 2, db)
        before = self.scrape().value("slotd_store_bytes", db="raftlog")
        for _ in range(4):
            h.put(self.stub, h.unique_key(b"storebytes", self.rng), b"y" * 65536)
        self.assertGreater(self.scrape().value("slotd_store_bytes", db="raftlog"), before)

    def test_finished_backup_stream_counted(self):
        """slotd_grpc_streams_total: a server stream's OK series is there at 0 before any ends,
        and one Admin.Backup stream run to its end by `slotctl backup save` adds 1."""
        backup = "slotd.v1.Admin/Backup"
        before = self.scrape()
        self.assertIsNotNone(before.value("slotd_grpc_streams_total",
                                          method="slotd.v1.Metadata/Watch", code="OK"))
        ok = before.value("slotd_grpc_streams_total", method=backup, code="OK")
        self.assertIsNotNone(ok)
        slotctl = str(h.SLOTD_BIN.parent / "slotctl")
        path = os.path.join(tempfile.mkdtemp(prefix="slotd-e2e-backup-"), "b.backup")
        r = subprocess.run([slotctl, "--endpoints", self.server.addr, "backup", "save", path],
                           capture_output=True, text=True, timeout=60)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(self.scrape().value("slotd_grpc_streams_total", method=backup, code="OK"),
                         ok + 1)
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    def test_serializable_reads_on_the_call_thread(self):
        """LOCAL reads are answered on the gRPC thread (read_local.c) with the written value and
        an applied index covering the write; linearizable reads do not take that path."""
        key = h.unique_key(b"readlocal", self.rng)
        put = h.put(self.stub, key, b"v1")
        before = self.scrape().value("slotd_read_local_total", outcome="served") or 0
        for _ in range(20):
            r = h.get(self.stub, key, consistency=pb.CONSISTENCY_LOCAL,
                      min_applied_index=put.applied_index)
            self.assertTrue(r.get.found)
            self.assertEqual(r.get.value, b"v1")
            self.assertGreaterEqual(r.applied_index, put.applied_index)
            self.assertGreaterEqual(r.term, 1)
        r = h.get(self.stub, h.unique_key(b"readlocal-absent", self.rng),
                  consistency=pb.CONSISTENCY_LOCAL)
        self.assertFalse(r.get.found)
        mid = self.scrape().value("slotd_read_local_total", outcome="served")
        self.assertEqual(mid - before, 21)
        lease0 = self.scrape().value("slotd_read_lease_total", outcome="served") or 0
        for _ in range(5):
            self.assertEqual(h.get(self.stub, key).get.value, b"v1")  # linearizable
        self.assertEqual(self.scrape().value("slotd_read_local_total", outcome="served"), mid)
        # one voter: its lease holds as soon as it committed in its term, so every linearizable
        # Get was answered on the gRPC thread, not through a ReadIndex round
        self.assertEqual(self.scrape().value("slotd_read_lease_total", outcome="served") - lease0,
                         5)

    def test_per_group_raft_gauges(self):
        h.put(self.stub, h.unique_key(b"pergroup", self.rng), b"v")
        s = self.scrape()
        for name in PER_GROUP:
            groups = sorted(int(dict(labels)["group"]) for labels in s.series(name))
            # group 0 is the controller group (this single node is its only voter)
            self.assertEqual(groups, [0] + self.groups, name)
        for g in self.groups:
            label = str(g)
            self.assertEqual(s.value("slotd_raft_is_leader", group=label), 1, "single node leads")
            self.assertEqual(s.value("slotd_group_has_leader", group=label), 1)
            self.assertGreaterEqual(s.value("slotd_raft_term", group=label), 1)
            self.assertGreaterEqual(s.value("slotd_raft_leader_changes_total", group=label), 1)
            commit = s.value("slotd_raft_commit_index", group=label)
            applied = s.value("slotd_raft_applied_index", group=label)
            self.assertGreaterEqual(commit, 1)
            self.assertLessEqual(applied, commit, "group %d applied beyond commit" % g)
        # Writes to one group move its commit and applied index.
        group = self.groups[0]
        key = h.key_in_group(self.table, group, "gauge", self.rng)
        resp = h.put(self.stub, key, b"v")
        # The reply is sent by the apply stage; the gauges are set by the loop right after it,
        # so a scrape may briefly lag the reply: poll (bounded).
        deadline = time.monotonic() + 5.0
        while True:
            s = self.scrape()
            commit = s.value("slotd_raft_commit_index", group=str(group))
            applied = s.value("slotd_raft_applied_index", group=str(group))
            if (commit >= resp.applied_index and applied >= resp.applied_index) or \
                    time.monotonic() > deadline:
                break
            time.sleep(0.02)
        self.assertGreaterEqual(commit, resp.applied_index)
        self.assertGreaterEqual(applied, resp.applied_index)

    def test_counters_move_with_traffic(self):
        before = self.scrape()
        n = 12
        keys = [h.unique_key(b"traffic/%d" % i, self.rng) for i in range(n)]
        for key in keys:
            h.put(self.stub, key, b"value")
        for key in keys:
            self.assertTrue(h.get(self.stub, key).get.found)
        absent = h.get(self.stub, h.unique_key(b"absent", self.rng))
        self.assertFalse(absent.get.found)
        # An invalid request: INVALID_ARGUMENT is counted under its code.
        self.assertRpcError(lambda: self.stub.Propose(pb.ProposeRequest(), timeout=10),
                            h.grpc.StatusCode.INVALID_ARGUMENT)
        after = self.scrape()

        def delta(name, **labels):
            return (after.value(name, **labels) or 0) - (before.value(name, **labels) or 0)

        self.assertEqual(delta("slotd_grpc_requests_total", method=PROPOSE, code="OK"), n)
        self.assertEqual(delta("slotd_grpc_requests_total", method=READ, code="OK"), n + 1)
        self.assertEqual(delta("slotd_grpc_requests_total", method=PROPOSE,
                               code="INVALID_ARGUMENT"), 1)
        self.assertEqual(delta("slotd_grpc_request_duration_seconds_count", method=PROPOSE), n + 1)
        self.assertEqual(delta("slotd_grpc_request_duration_seconds_count", method=READ), n + 1)
        self.assertGreater(delta("slotd_grpc_request_duration_seconds_sum", method=PROPOSE), 0)
        self.assertGreaterEqual(delta("slotd_raftlog_batch_entries_sum"), n)
        self.assertGreaterEqual(delta("slotd_raftlog_batch_entries_count"), 1)
        self.assertGreaterEqual(delta("slotd_raftlog_write_seconds_count", sync="true"), 1)
        self.assertGreaterEqual(delta("slotd_apply_batch_entries_sum"), n)
        self.assertEqual(after.total("slotd_proposal_queue_depth"), 0, "idle queues")

    def test_histograms_have_buckets_sum_count(self):
        h.put(self.stub, h.unique_key(b"hist", self.rng), b"v")
        h.get(self.stub, h.unique_key(b"hist", self.rng))
        s = self.scrape()
        for name in HISTOGRAMS:
            counts = s.series(name + "_count")
            self.assertTrue(counts, "%s has no series" % name)
            for labels, count in counts.items():
                base = dict(labels)
                self.assertIsNotNone(s.value(name + "_sum", **base), name)
                buckets = sorted(
                    ((float(dict(l)["le"]), v) for l, v in s.series(name + "_bucket").items()
                     if {k: w for k, w in l if k != "le"} == base))
                self.assertGreaterEqual(len(buckets), 2, name)
                self.assertEqual(buckets[-1][0], float("inf"), "%s: last bucket is +Inf" % name)
                self.assertEqual(buckets[-1][1], count, "%s %s: +Inf bucket != _count"
                                 % (name, base))
                values = [v for _, v in buckets]
                self.assertEqual(values, sorted(values), "%s buckets are not cumulative" % name)
        self.assertGreater(s.value("slotd_grpc_request_duration_seconds_count", method=PROPOSE), 0)

    def test_other_paths_are_404(self):
        for path in ("/", "/metric", "/metrics/x", "/favicon.ico"):
            status, _, _ = http_get(self.metrics_port, path)
            self.assertEqual(status, 404, path)

    def test_busy_metrics_port_is_a_warning(self):
        """A second slotd asked for the same metrics port logs a warning and serves gRPC."""
        other = self.new_server(extra_args=["--metrics-listen",
                                            "127.0.0.1:%d" % self.metrics_port])
        other.start()
        key = h.unique_key(b"busy", self.rng)
        h.put(other.stub, key, b"v")
        self.assertTrue(h.get(other.stub, key).get.found)
        log = other.log_text(current_run_only=True)
        self.assertIn('level=warn component=main msg="metrics listener not started"', log)
        # The first server still answers the scrape.
        self.scrape()

    def test_disabled_with_empty_listen(self):
        server = self.new_server(extra_args=["--metrics-listen", ""])
        server.start()
        log = server.log_text(current_run_only=True)
        self.assertNotIn("metrics serving", log)
        self.assertNotIn("metrics listener not started", log)


class MetricsClusterTest(h.SlotdTestCase):
    """Three nodes, each with its own metrics port: every node reports every group it hosts, and
    each group has exactly one leader across the nodes."""

    def test_cluster_gauges(self):
        ports = h.free_ports(3)
        self._workdir = self._workdir or tempfile.mkdtemp(prefix="slotd-e2e-")
        cluster = h.SlotdCluster(self._workdir, name="m0")
        self._servers.extend(cluster.servers.values())
        configure = cluster._configure

        def with_metrics(grpc_ports):
            configure(grpc_ports)
            for node_id, port in zip(cluster.node_ids, ports):
                cluster.servers[node_id].extra_args += ["--metrics-listen",
                                                        "127.0.0.1:%d" % port]
        cluster._configure = with_metrics
        cluster.start()
        route = cluster.wait_leaders()
        leaders = h.SlotdCluster.leaders(route)
        for group_id, leader in leaders.items():
            key = h.key_in_group(cluster.table, group_id, "cluster", random.Random(SEED))
            h.put(cluster.stub(leader), key, b"v")
        scrapes = {}
        for node_id, port in zip(cluster.node_ids, ports):
            status, _, body = http_get(port, "/metrics")
            self.assertEqual(status, 200)
            scrapes[node_id] = Scrape(self, body)
        for group_id in cluster.group_ids:
            led = 0
            for node_id in cluster.voters(group_id):
                s = scrapes[node_id]
                is_leader = s.value("slotd_raft_is_leader", group=str(group_id))
                self.assertIsNotNone(is_leader, "node %d group %d" % (node_id, group_id))
                led += is_leader
                self.assertGreaterEqual(s.value("slotd_raft_commit_index", group=str(group_id)),
                                        1)
            self.assertLessEqual(led, 1, "group %d has %d leaders" % (group_id, led))
            # every voter knows the group's leader once the route shows one
            for node_id in cluster.voters(group_id):
                self.assertEqual(scrapes[node_id].value("slotd_group_has_leader",
                                                        group=str(group_id)), 1,
                                 "node %d group %d" % (node_id, group_id))
        # A put sent to a follower is forwarded to the leader: counted ok on the follower only.
        group_id = cluster.group_ids[0]
        follower = next(n for n in cluster.voters(group_id) if n != leaders[group_id])
        port_of = dict(zip(cluster.node_ids, ports))

        def forwards(node_id, outcome):
            status, _, body = http_get(port_of[node_id], "/metrics")
            self.assertEqual(status, 200)
            return Scrape(self, body).value("slotd_forward_total", method=PROPOSE,
                                            outcome=outcome)
        before = forwards(follower, "ok")
        leader_before = forwards(leaders[group_id], "ok")
        key = h.key_in_group(cluster.table, group_id, "forward", random.Random(SEED))
        h.put(cluster.stub(follower), key, b"forwarded")
        self.assertEqual(forwards(follower, "ok"), before + 1)
        self.assertEqual(forwards(leaders[group_id], "ok"), leader_before)
        for outcome in ("error", "not_sent", "no_answer", "silent_leader"):
            self.assertIsNotNone(forwards(follower, outcome), outcome)
        # Raft traffic between nodes goes through the Peer/RaftStream frames each node accepts.
        raft_frames = sum(s.value("slotd_grpc_stream_frames_total",
                                  method="slotd.internal.v1.Peer/RaftStream",
                                  result="accepted") or 0
                          for s in scrapes.values())
        self.assertGreater(raft_frames, 0)


if __name__ == "__main__":
    unittest.main()
