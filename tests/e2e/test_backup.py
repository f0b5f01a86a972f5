# test_backup.py - Admin.Backup and slotctl backup save|verify|inspect on a 3-node cluster.
"""One 3-node cluster with 8 slot groups, loaded with 20,000 keys and typed rows (users with
devices, channels with subscribers) through all three nodes at once. `slotctl backup save`
through node 2 while writers keep putting keys: the file verifies, every preloaded key and typed
row is in it with its value, every key a writer had acknowledged is in it exactly when its
applied index is at or below its group's applied index in the header (one consistent cut per
group), keys written after the save are absent, and every group node 2 follows was read there. A byte
flipped inside a rows record fails `backup verify` (exit 5) naming that record and its group;
`backup inspect --json` shows the cluster id, the route revision and the hash-slot table the
route has. `backup save` onto an existing file is refused and leaves the file as it was.
`slotd restore` onto a non-empty data dir, or with --peers that are not the backup's nodes,
exits 2 and writes nothing; restored into three new data dirs, a new cluster starts normally
and serves every key of the backup with its value through every node, none written after the
backup's positions, the user rows and a channel's subscribers, under a new cluster id with
the same hash-slot table, and takes new writes. Admin.SetBackupPlan refuses each bad field
(INVALID_ARGUMENT naming it and its limit, the state unchanged); a good plan shows in every node's
ClusterState, delete removes it. A plan with a 5 s interval writes backup files on the lowest-id active
data node and keeps only `retention` of them; forged and stale run reports change nothing; a
cluster restored from a plan run's file (its controller state carries the plan's runs) starts
with no backup plan (ClusterState has no "backup", `backup plan show` says so).

slotctl is ``$SLOTCTL_BIN`` when set, else ``slotctl`` next to the slotd binary the harness uses."""

import json
import os
import shutil
import struct
import subprocess
import sys
import threading
import time
import unittest
import urllib.request
import zlib

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd.v1 import admin_pb2  # noqa: E402
from slotd.v1 import metadata_pb2 as pb  # noqa: E402

SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))
N_KEYS = 20000
N_USERS = 400
N_CHANNELS = 40
SUBSCRIBERS = 10
IN_FLIGHT = 256
SAVE_TIMEOUT_S = 60.0

REC_HEADER, REC_CONTROLLER, REC_GROUP_BEGIN, REC_ROWS, REC_GROUP_END, REC_TRAILER = range(1, 7)
TABLE_KV, TABLE_USER = 1, 5


def slotctl(endpoints, *args, json_out=False, timeout=SAVE_TIMEOUT_S):
    cmd = [SLOTCTL_BIN, "--endpoints", endpoints] + (["--json"] if json_out else [])
    proc = subprocess.run(cmd + [str(a) for a in args], capture_output=True, text=True,
                          timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def h_controller_command(command):
    """slotd.internal.v1.ControllerCommandRequest {command} (field 1, bytes)."""
    n, size = len(command), b""
    while True:
        byte = n & 0x7F
        n >>= 7
        size += bytes([byte | (0x80 if n else 0)])
        if not n:
            return b"\x0a" + size + command


def read_backup(path):
    """The file's records, parsed here independently of the C reader: header fields, per group
    rows {key: value}, and each record's (seq, type, group, offset, length)."""
    with open(path, "rb") as fh:
        data = fh.read()
    off, seq, group = 0, 0, None
    out = {"records": [], "groups": {}, "rows": {}}
    while off < len(data):
        rtype, ver, _, rseq, length, crc = struct.unpack_from(">BBHIII", data, off)
        payload = data[off + 16:off + 16 + length]
        assert ver == 1 and rseq == seq, (ver, rseq, seq)
        assert zlib.crc32(data[off:off + 12] + payload) == crc, "record %d crc" % seq
        if rtype == REC_HEADER:
            assert payload[:8] == b"SLOTDBK\n"
            _, created, revision, ctl_index, idl = struct.unpack_from(">IQQQH", payload, 8)
            p = 38
            out["cluster_id"] = payload[p:p + idl].decode()
            p += idl
            out["table"] = list(struct.unpack_from(">256I", payload, p))
            p += 1024
            (n,) = struct.unpack_from(">I", payload, p)
            p += 4
            for i in range(n):
                g, applied, node = struct.unpack_from(">IQQ", payload, p + 20 * i)
                out["groups"][g] = {"applied_index": applied, "source_node": node}
            out["route_revision"] = revision
        elif rtype == REC_CONTROLLER:
            out["controller"] = out.get("controller", b"") + payload
        elif rtype == REC_GROUP_BEGIN:
            (group,) = struct.unpack_from(">I", payload, 0)
            out["rows"][group] = {}
        elif rtype == REC_ROWS:
            g, n = struct.unpack_from(">II", payload, 0)
            assert g == group
            p = 8
            for _ in range(n):
                kl, vl = struct.unpack_from(">HI", payload, p)
                p += 6
                out["rows"][g][payload[p:p + kl]] = payload[p + kl:p + kl + vl]
                p += kl + vl
        out["records"].append((seq, rtype, group if rtype in (REC_ROWS, REC_GROUP_END) else None,
                               off, length))
        if rtype == REC_GROUP_END:
            group = None
        off += 16 + length
        seq += 1
    return out


def kv_key(key):
    return struct.pack(">HB", h.hash_slot(key), TABLE_KV) + key


def user_key(uid):
    return struct.pack(">HB", h.hash_slot(uid.encode()), TABLE_USER) + uid.encode()


def retrying(fn, bound_s=15.0, again=(grpc.StatusCode.UNAVAILABLE,
                                     grpc.StatusCode.FAILED_PRECONDITION)):
    """fn(), asked again while it fails UNAVAILABLE (a group between leaders) or
    FAILED_PRECONDITION (NOT_LEADER: the leader moved as the call was served, e.g. to its
    preferred node after a start; nothing was applied) until bound_s."""
    deadline = time.monotonic() + bound_s
    while True:
        try:
            return fn()
        except grpc.RpcError as err:
            if err.code() not in again or time.monotonic() > deadline:
                raise
            time.sleep(0.05)


def call_all(stubs, method, reqs, bound_s=15.0, again=(grpc.StatusCode.UNAVAILABLE,)):
    """Every request through stubs (round robin), IN_FLIGHT at a time; a call answered
    UNAVAILABLE is made again until bound_s (the requests here are idempotent: creates of new
    rows answer the same row, gets and puts of fixed values). Returns the responses in order."""
    out, futures = [None] * len(reqs), {}
    deadline = time.monotonic() + bound_s

    def start(j):
        return getattr(stubs[j % len(stubs)], method).future(reqs[j], timeout=30)

    def settle(j, fut):
        while True:
            try:
                out[j] = fut.result()
                return
            except grpc.RpcError as err:
                if err.code() not in again or time.monotonic() > deadline:
                    raise
                time.sleep(0.05)
                fut = start(j)

    for i in range(len(reqs)):
        futures[i] = start(i)
        if len(futures) >= IN_FLIGHT:
            for j in list(futures)[:IN_FLIGHT // 2]:
                settle(j, futures.pop(j))
    for j, fut in futures.items():
        settle(j, fut)
    return out


def propose_all(stubs, requests):
    return call_all(stubs, "Propose", requests)


def restore(path, data_dir, node_id, peers):
    proc = subprocess.run([str(h.SLOTD_BIN), "restore", "--from", path, "--data-dir",
                           str(data_dir), "--node-id", str(node_id), "--peers", peers],
                          capture_output=True, text=True, timeout=SAVE_TIMEOUT_S)
    return proc.returncode, proc.stdout, proc.stderr


def read_all(stubs, keys):
    """LINEARIZABLE gets of keys (see call_all); a get that met a leader change as it was served
    (NOT_LEADER naming the new leader) is asked again too."""
    return call_all(stubs, "Read", [pb.ReadRequest(get=pb.GetQuery(key=k)) for k in keys],
                    again=(grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.FAILED_PRECONDITION))


def cluster_state(server):
    call = server.channel.unary_unary(
        "/slotd.v1.Admin/ClusterState",
        request_serializer=admin_pb2.ClusterStateRequest.SerializeToString,
        response_deserializer=admin_pb2.ClusterStateResponse.FromString)
    return json.loads(call(admin_pb2.ClusterStateRequest(), timeout=h.RPC_TIMEOUT_S).state_json)


def cluster_id(server):
    return cluster_state(server)["cluster_id"]


class RestoredCluster(h.SlotdCluster):
    """A SlotdCluster started on data dirs `slotd restore` built, on the ports chosen before."""

    def start_restored(self, timeout=h.START_TIMEOUT_S):
        for server in self.servers.values():
            server.launch()
        problem = self._wait_all_serving(timeout)
        if problem is not None:
            raise h.ServerError("restored cluster did not start: %s\n%s" % (
                problem, "\n".join(s.log_tail(12) for s in self.servers.values())))
        self.wait_leaders(timeout=timeout)
        self.wait_client_addresses(timeout=timeout)
        return self


class Writer(threading.Thread):
    """Puts keys late/<n>/<i> until stopped; records (key, value, group, applied index) of each
    acknowledged put."""

    def __init__(self, stub, n):
        super().__init__(daemon=True)
        self.stub, self.n = stub, n
        self.acked = []
        self.stop_flag = threading.Event()
        self.error = None

    def run(self):
        i = 0
        while not self.stop_flag.is_set():
            key = b"late/%d/%06d" % (self.n, i)
            value = b"w%d-%d" % (self.n, i)
            i += 1
            try:
                r = h.put(self.stub, key, value)
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.UNAVAILABLE:
                    continue  # outcome not known: the key is not checked
                self.error = err
                return
            self.acked.append((key, value, r.group_id, r.applied_index))


class BackupTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.metrics_port = h.free_port()
        cls.cluster = cls.new_class_cluster(size=3, slot_groups=8, node_args={
            2: ["--metrics-listen", "127.0.0.1:%d" % cls.metrics_port]})
        cls.workdir = cls._class_workdir
        stubs = [cls.cluster.stub(n) for n in cls.cluster.node_ids]
        t0 = time.monotonic()
        cls.keys = {b"pre/%06d" % i: b"value-%d-" % i + b"x" * (i % 64) for i in range(N_KEYS)}
        reqs = [pb.ProposeRequest(put=pb.PutCommand(key=k, value=v)) for k, v in cls.keys.items()]
        cls.users = ["u%04d" % i for i in range(N_USERS)]
        reqs += [pb.ProposeRequest(create_user=pb.CreateUserCommand(
            user=pb.User(uid=u, token="tok-" + u))) for u in cls.users]
        reqs += [pb.ProposeRequest(put_device=pb.PutDeviceCommand(
            device=pb.Device(uid=u, device_flag=1, token="dev-" + u))) for u in cls.users[:100]]
        cls.channels = ["ch%03d" % i for i in range(N_CHANNELS)]
        reqs += [pb.ProposeRequest(create_channel=pb.CreateChannelCommand(
            channel_id=c, channel_type=2)) for c in cls.channels]
        propose_all(stubs, reqs)
        subs = [pb.ProposeRequest(add_subscribers=pb.SubscribersCommand(
            channel_id=c, channel_type=2, uids=cls.users[i:i + SUBSCRIBERS]))
            for i, c in enumerate(cls.channels)]
        propose_all(stubs, subs)
        print("\nloaded %d keys, %d users, %d channels in %.1f s"
              % (N_KEYS, N_USERS, N_CHANNELS, time.monotonic() - t0), file=sys.stderr)

        # the save runs through node 2 while two writers put keys through nodes 1 and 3
        cls.path = os.path.join(cls.workdir, "cluster.bak")
        writers = [Writer(cls.cluster.stub(1), 1), Writer(cls.cluster.stub(3), 3)]
        for w in writers:
            w.start()
        time.sleep(0.3)
        t0 = time.monotonic()
        cls.save_wall = time.time()
        cls.save = slotctl(cls.cluster.addr(2), "backup", "save", cls.path, json_out=True)
        cls.save_s = time.monotonic() - t0
        # the route the save saw (the plan tests change the controller revision later)
        cls.route_at_save = cls.cluster.route(via=1)
        for w in writers:
            w.stop_flag.set()
        for w in writers:
            w.join(10)
        cls.writers = writers
        # written after the save returned: none of these may be in the file
        cls.after = [b"after/%03d" % i for i in range(50)]
        propose_all(stubs, [pb.ProposeRequest(put=pb.PutCommand(key=k, value=b"a"))
                            for k in cls.after])

    def test_save_is_one_consistent_cut_per_group(self):
        code, out, err = self.save
        self.assertEqual(code, 0, err)
        summary = json.loads(out.strip().splitlines()[-1])
        self.assertTrue(summary["ok"])
        print("backup save: %.2f s, %d bytes, %d rows" % (self.save_s, summary["bytes"],
                                                         summary["rows"]), file=sys.stderr)
        self.assertIn("groups 8/8 done", err)
        for w in self.writers:
            self.assertIsNone(w.error)
            self.assertGreater(len(w.acked), 0)
        f = read_backup(self.path)
        self.assertEqual(sorted(f["groups"]), list(range(1, 9)))
        # Every node hosts every group: node 2 reads the groups it follows itself; the ones it
        # led at the save are read from a follower elsewhere (BackupFromOtherReplicasTest).
        led = {g.group_id for g in self.route_at_save.groups if g.leader == 2}
        for gid, info in f["groups"].items():
            self.assertIn(info["source_node"], (1, 2, 3), gid)
            if gid not in led:
                self.assertEqual(info["source_node"], 2, gid)
        self.assertEqual(len(summary["groups"]), 8)
        rows = {}
        for g, grows in f["rows"].items():
            self.assertEqual(len(grows), summary["groups"][g - 1]["rows"])
            for k, v in grows.items():
                if k[:2] != b"\xff\xff":  # a row lives in the group of its hash slot
                    self.assertEqual(f["table"][struct.unpack(">H", k[:2])[0]], g)
                rows[k] = v
        missing = [k for k in self.keys if kv_key(k) not in rows]
        self.assertEqual(missing, [])
        wrong = [k for k, v in self.keys.items() if rows[kv_key(k)][9:] != v]
        self.assertEqual(wrong, [])
        for u in self.users:
            user = pb.User.FromString(rows[user_key(u)][1:])
            self.assertEqual((user.uid, user.token), (u, "tok-" + u))
        # a concurrent write is in the file exactly when its group had applied it at the cut
        inside = outside = 0
        for w in self.writers:
            for key, value, group, index in w.acked:
                want = index <= f["groups"][group]["applied_index"]
                got = rows.get(kv_key(key))
                self.assertEqual(got is not None, want, (key, group, index))
                if want:
                    self.assertEqual(got[9:], value)
                    inside += 1
                else:
                    outside += 1
        print("concurrent writes: %d in the backup, %d after it" % (inside, outside),
              file=sys.stderr)
        self.assertGreater(inside, 0)
        self.assertEqual([k for k in self.after if kv_key(k) in rows], [])
        # node 2's metrics: one run ok, its size, when it ended
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        samples = dict(line.rsplit(" ", 1) for line in text.splitlines()
                       if line.startswith("slotd_backup_"))
        self.assertEqual(samples['slotd_backup_runs_total{result="ok"}'], "1")
        self.assertEqual(samples['slotd_backup_runs_total{result="failed"}'], "0")
        self.assertEqual(int(samples["slotd_backup_last_bytes"]), summary["bytes"])
        done = int(samples["slotd_backup_last_success_timestamp_seconds"])
        self.assertTrue(self.save_wall - 1 <= done <= time.time() + 1, done)

    def test_verify_and_inspect(self):
        code, out, err = slotctl("127.0.0.1:1", "backup", "verify", self.path, json_out=True)
        self.assertEqual(code, 0, err)
        v = json.loads(out)
        code, out, err = slotctl("127.0.0.1:1", "backup", "inspect", self.path, json_out=True)
        self.assertEqual(code, 0, err)
        i = json.loads(out)
        self.assertEqual(v["rows"], i["rows"])
        self.assertEqual(sum(g["rows"] for g in i["groups"]), i["rows"])
        self.assertGreater(i["rows"], N_KEYS + N_USERS)
        route = self.route_at_save
        self.assertEqual(i["route_revision"], route.route_revision)
        self.assertEqual(i["hash_slot_table"], list(route.hash_slot_table))
        call = self.cluster.servers[1].channel.unary_unary(
            "/slotd.v1.Admin/ClusterState",
            request_serializer=admin_pb2.ClusterStateRequest.SerializeToString,
            response_deserializer=admin_pb2.ClusterStateResponse.FromString)
        state = json.loads(call(admin_pb2.ClusterStateRequest(), timeout=h.RPC_TIMEOUT_S)
                           .state_json)
        self.assertEqual(i["cluster_id"], state["cluster_id"])
        self.assertEqual(i["format_version"], 1)
        code, out, err = slotctl("127.0.0.1:1", "backup", "inspect", self.path)
        self.assertEqual(code, 0, err)
        self.assertIn("hash-slot table:", out)

    def test_flipped_byte_fails_naming_the_record(self):
        f = read_backup(self.path)
        seq, _, group, off, length = [r for r in f["records"]
                                      if r[1] == REC_ROWS and r[2] == 5][0]
        bad = os.path.join(self.workdir, "flipped.bak")
        shutil.copyfile(self.path, bad)
        with open(bad, "r+b") as fh:
            fh.seek(off + 16 + length // 2)
            b = fh.read(1)
            fh.seek(off + 16 + length // 2)
            fh.write(bytes([b[0] ^ 0x20]))
        code, out, err = slotctl("127.0.0.1:1", "backup", "verify", bad)
        self.assertEqual(code, 5, err)
        self.assertIn("record %d (rows, group 5) at byte %d: checksum mismatch" % (seq, off), err)
        code, out, err = slotctl("127.0.0.1:1", "backup", "verify", bad, json_out=True)
        self.assertEqual(code, 5)
        self.assertFalse(json.loads(out)["ok"])
        # the file cut short fails too
        with open(bad, "r+b") as fh:
            fh.truncate(off + 10)
        code, out, err = slotctl("127.0.0.1:1", "backup", "verify", bad)
        self.assertEqual(code, 5, err)
        self.assertIn("record %d" % seq, err)

    def test_restore_into_a_new_cluster(self):
        """slotd restore on three new data dirs, then a normal start: exactly the backup."""
        f = read_backup(self.path)
        c = RestoredCluster(self.workdir, name="restored", size=3, slot_groups=8)
        self._class_servers.extend(c.servers.values())
        c._configure(h.free_ports(6))
        # a non-empty data dir is refused and left as it was
        busy = c.servers[1].data_dir
        busy.mkdir(parents=True)
        (busy / "keep.txt").write_text("x")
        code, out, err = restore(self.path, busy, 1, c.peers_flag())
        self.assertEqual(code, 2, err)
        self.assertIn("is not empty", err)
        self.assertEqual(sorted(p.name for p in busy.iterdir()), ["keep.txt"])
        shutil.rmtree(busy)
        # peers that are not the backup's nodes are refused
        code, out, err = restore(self.path, busy, 1, "1=127.0.0.1:1,7=127.0.0.1:2")
        self.assertEqual(code, 2, err)
        self.assertIn("--peers", err)
        shutil.rmtree(busy, ignore_errors=True)
        t0 = time.monotonic()
        for n in c.node_ids:
            code, out, err = restore(self.path, c.servers[n].data_dir, n, c.peers_flag())
            self.assertEqual(code, 0, err)
            self.assertIn("8 slot groups", out)
        print("restore of 3 nodes: %.2f s" % (time.monotonic() - t0), file=sys.stderr)
        c.start_restored()
        stubs = [c.stub(n) for n in c.node_ids]
        # every key of the backup, with its value, through every node
        kv = {}
        for grows in f["rows"].values():
            for k, v in grows.items():
                if k[2:3] == bytes([TABLE_KV]) and k[:2] != b"\xff\xff":
                    kv[k[3:]] = v[9:] if v[0] == 1 else v[17:]
        self.assertGreater(len(kv), N_KEYS)
        keys = sorted(kv)
        got = read_all(stubs, keys)
        self.assertEqual([k for k, r in zip(keys, got) if not r.get.found], [])
        self.assertEqual([k for k, r in zip(keys, got) if r.get.value != kv[k]], [])
        # keys written after the backup's positions are absent
        later = [k for w in self.writers for k, _, g, i in w.acked
                 if i > f["groups"][g]["applied_index"]] + self.after
        self.assertEqual([k for k, r in zip(later, read_all(stubs, later)) if r.get.found], [])
        # typed rows: users and a channel's subscribers
        for u in self.users[::40]:
            r = retrying(lambda: stubs[0].Read(pb.ReadRequest(get_user=pb.GetUserQuery(uid=u)),
                                               timeout=h.RPC_TIMEOUT_S)).get_user
            self.assertTrue(r.found, u)
            self.assertEqual(r.user.token, "tok-" + u)
        r = retrying(lambda: stubs[1].Read(pb.ReadRequest(list_members=pb.ListMembersQuery(
            channel_id=self.channels[3], channel_type=2, list=1)), timeout=h.RPC_TIMEOUT_S))
        self.assertEqual(sorted(r.list_members.uids), self.users[3:3 + SUBSCRIBERS])
        # a new cluster: another id, the same hash-slot table; and it takes writes
        route = c.route(via=2)
        self.assertEqual(list(route.hash_slot_table), f["table"])
        self.assertNotEqual(cluster_id(c.servers[1]), f["cluster_id"])
        r = retrying(lambda: h.put(stubs[2], b"pre/000001", b"new"))
        self.assertGreater(r.applied_index, f["groups"][r.group_id]["applied_index"])
        self.assertEqual(retrying(lambda: h.get(stubs[0], b"pre/000001")).get.value, b"new")

    def test_save_onto_existing_file_refused(self):
        with open(self.path, "rb") as fh:
            before = fh.read()
        code, out, err = slotctl(self.cluster.addr(1), "backup", "save", self.path)
        self.assertNotEqual(code, 0)
        self.assertIn("exists", err)
        with open(self.path, "rb") as fh:
            self.assertEqual(fh.read(), before)
        self.assertFalse(os.path.exists(self.path + ".part"))

    def admin_call(self, n, method, req, resp=admin_pb2.AdminWriteResponse):
        call = self.cluster.server(n).channel.unary_unary(
            "/slotd.v1.Admin/" + method, request_serializer=req.SerializeToString,
            response_deserializer=resp.FromString)
        return call(req, timeout=h.RPC_TIMEOUT_S)

    def state(self, n):
        r = self.admin_call(n, "ClusterState", admin_pb2.ClusterStateRequest(),
                            admin_pb2.ClusterStateResponse)
        return json.loads(r.state_json)

    def metrics_samples(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        with urllib.request.urlopen(url, timeout=5) as resp:
            text = resp.read().decode()
        return dict(line.rsplit(" ", 1) for line in text.splitlines()
                    if line and not line.startswith("#"))

    def test_backup_plan_runs_and_keeps_retention(self):
        """A plan with a 5 s interval and retention 1: the controller leader starts a run every
        interval on a node hosting every group, which writes slotd-backup-<run>.bak (FILE.part,
        fsync, rename) and reports it; after two successful runs only the newest file is left
        and it verifies. A run report signed as another node is refused; one for a stale run
        is a noop; neither changes the plan's state."""
        dest = os.path.join(self.workdir, "plan-runs")
        t0 = time.monotonic()
        r = self.admin_call(1, "SetBackupPlan", admin_pb2.SetBackupPlanRequest(
            interval_s=5, destination=dest, retention=1))
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        deadline = time.monotonic() + 40
        while True:
            plan = self.state(1).get("backup", {})
            if plan.get("last_success_run", 0) >= 2 and plan.get("last_success_run", 0) > \
                    plan.get("last_failure_run", 0):
                break
            self.assertLess(time.monotonic(), deadline, "runs did not succeed: %r" % plan)
            time.sleep(0.2)
        print("\ntwo plan runs in %.1f s" % (time.monotonic() - t0), file=sys.stderr)
        # node 2 exports the replicated plan: its interval, the last success's time and size
        samples = self.metrics_samples()
        self.assertEqual(samples["slotd_backup_plan_interval_seconds"], "5")
        self.assertGreaterEqual(int(samples["slotd_backup_plan_last_success_timestamp_seconds"]),
                                plan["last_success_ms"] // 1000)
        self.assertGreater(int(samples["slotd_backup_plan_last_bytes"]), 1 << 20)
        self.assertEqual(self.admin_call(2, "SetBackupPlan", admin_pb2.SetBackupPlanRequest(
            delete=True)).outcome, admin_pb2.OUTCOME_CHANGED)
        self.assertGreater(plan["last_success_bytes"], 1 << 20)
        self.assertEqual(plan["last_error"], "")
        # a run still writing when the plan was deleted finishes and prunes: wait for it
        deadline = time.monotonic() + 15
        while True:
            names = sorted(os.listdir(dest))
            if len(names) == 1 and not any(n.endswith(".part") for n in names):
                break
            self.assertLess(time.monotonic(), deadline, "left in %s: %r" % (dest, names))
            time.sleep(0.1)
        last = self.state(1)["backup"]["last_success_run"]
        deadline = time.monotonic() + 5
        while self.metrics_samples()["slotd_backup_plan_interval_seconds"] != "0":
            self.assertLess(time.monotonic(), deadline, "node 2 still exports the plan")
            time.sleep(0.1)
        self.assertEqual(names, ["slotd-backup-%020d.bak" % last])
        for name in names:
            code, out, err = slotctl(self.cluster.addr(1), "backup", "verify",
                                     os.path.join(dest, name))
            self.assertEqual(code, 0, err)
        # forged and stale run reports change nothing
        before = self.state(1)["backup"]
        run_node = before["run_node"]
        report = {"op": "backup_run_report", "run": before["run_id"], "node": run_node,
                  "ok": True, "bytes": 1, "now_ms": int(time.time() * 1000)}
        other = run_node % 3 + 1
        with self.assertRaises(grpc.RpcError) as cm:
            self.cluster.server(run_node).peer_call(
                "/slotd.internal.v1.Peer/ControllerCommand",
                h_controller_command(json.dumps(report).encode()), node=other)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("reports only its own run", cm.exception.details())
        report["run"] = before["run_id"] + 100
        raw = self.cluster.server(other).peer_call(
            "/slotd.internal.v1.Peer/ControllerCommand",
            h_controller_command(json.dumps(report).encode()), node=run_node)
        self.assertEqual(admin_pb2.AdminWriteResponse.FromString(raw).outcome,
                         admin_pb2.OUTCOME_NOOP)
        start = {"op": "backup_run_start", "run": before["run_id"] + 1, "node": run_node,
                 "now_ms": int(time.time() * 1000)}
        with self.assertRaises(grpc.RpcError) as cm:
            self.cluster.server(1).peer_call("/slotd.internal.v1.Peer/ControllerCommand",
                                             h_controller_command(json.dumps(start).encode()))
        self.assertIn("is not one nodes send", cm.exception.details())
        self.assertEqual(self.state(1)["backup"], before)
        # a plan run's file carries the plan's state; a cluster restored from it has no plan
        plan_file = os.path.join(dest, names[0])
        in_file = json.loads(read_backup(plan_file)["controller"])["backup"]
        self.assertGreater(in_file["run_id"], 0)
        c = RestoredCluster(self.workdir, name="restored-plan", size=3, slot_groups=8)
        self._class_servers.extend(c.servers.values())
        c._configure(h.free_ports(6))
        t0 = time.monotonic()
        for n in c.node_ids:
            code, out, err = restore(plan_file, c.servers[n].data_dir, n, c.peers_flag())
            self.assertEqual(code, 0, err)
        c.start_restored()
        for n in c.node_ids:
            self.assertNotIn("backup", cluster_state(c.servers[n]))
        code, out, err = slotctl(c.addr(1), "backup", "plan", "show")
        self.assertEqual(code, 0, err)
        self.assertIn("no backup plan", out)
        print("restore of a plan run's file without its plan: %.1f s" % (time.monotonic() - t0),
              file=sys.stderr)
        for server in c.servers.values():
            server.stop()

    def test_set_backup_plan_checks_every_field(self):
        """Admin.SetBackupPlan: each bad value is INVALID_ARGUMENT naming the field and its limit
        and leaves the cluster state as it was; a good plan shows in ClusterState's "backup" on
        every node, the same plan again is a noop, delete removes it."""
        dest = os.path.join(self.workdir, "plan-check")
        bad = [
            (dict(interval_s=4, destination=dest, retention=2), "interval_s: 4 not in 5..2592000"),
            (dict(interval_s=2592001, destination=dest, retention=2), "interval_s: 2592001"),
            (dict(interval_s=60, destination=dest, retention=0), "retention: 0 not in 1..1000"),
            (dict(interval_s=60, destination=dest, retention=1001), "retention: 1001"),
            (dict(interval_s=60, destination="rel/dir", retention=2), "must be an absolute path"),
            (dict(interval_s=60, destination=dest + "/../x", retention=2), ". or .. component"),
            (dict(interval_s=60, destination="/" + "a" * 300, retention=2), "destination: "),
            (dict(delete=True, retention=2), "delete: interval_s, destination and retention"),
        ]
        before = self.state(1)
        for fields, want in bad:
            with self.subTest(fields=fields):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.admin_call(2, "SetBackupPlan", admin_pb2.SetBackupPlanRequest(**fields))
                self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
                self.assertIn(want, cm.exception.details())
        after = self.state(1)
        self.assertEqual(after["revision"], before["revision"])
        self.assertEqual(after.get("backup"), before.get("backup"))
        req = admin_pb2.SetBackupPlanRequest(interval_s=3600, destination=dest, retention=2)
        r = self.admin_call(3, "SetBackupPlan", req)
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        deadline = time.monotonic() + 10
        for n in self.cluster.node_ids:
            while self.state(n).get("backup", {}).get("set") is not True:
                self.assertLess(time.monotonic(), deadline, "node %d never saw the plan" % n)
                time.sleep(0.05)
            plan = self.state(n)["backup"]
            self.assertEqual((plan["interval_s"], plan["destination"], plan["retention"]),
                             (3600, dest, 2))
        self.assertEqual(self.admin_call(1, "SetBackupPlan", req).outcome,
                         admin_pb2.OUTCOME_NOOP)
        r = self.admin_call(1, "SetBackupPlan", admin_pb2.SetBackupPlanRequest(delete=True))
        self.assertEqual(r.outcome, admin_pb2.OUTCOME_CHANGED)
        deadline = time.monotonic() + 10
        while self.state(2).get("backup", {}).get("set"):
            self.assertLess(time.monotonic(), deadline, "node 2 never saw the delete")
            time.sleep(0.05)
        self.assertEqual(self.admin_call(2, "SetBackupPlan", admin_pb2.SetBackupPlanRequest(
            delete=True)).outcome, admin_pb2.OUTCOME_NOOP)
        # the same through slotctl backup plan set|show|delete
        ep = self.cluster.addr(3)
        code, out, err = slotctl(ep, "backup", "plan", "set", 4, dest, 2)
        self.assertNotEqual(code, 0)
        self.assertIn("interval_s: 4 not in 5..2592000", err)
        code, out, err = slotctl(ep, "backup", "plan", "set", 7200, dest, 3, json_out=True)
        self.assertEqual(code, 0, err)
        self.assertEqual(json.loads(out)["outcome"], "CHANGED")
        code, out, err = slotctl(ep, "backup", "plan", "show", json_out=True)
        self.assertEqual(code, 0, err)
        plan = json.loads(out)["plan"]
        self.assertEqual((plan["interval_s"], plan["destination"], plan["retention"]),
                         (7200, dest, 3))
        code, out, err = slotctl(ep, "backup", "plan", "show")
        self.assertIn("every 7200 s into %s, keeping 3 files" % dest, out)
        code, out, err = slotctl(ep, "backup", "plan", "delete")
        self.assertEqual(code, 0, err)
        # node 3 forwarded the delete to the controller leader, which answered once a quorum had
        # it: node 3's own copy of the state may apply it a moment later
        deadline = time.monotonic() + 5
        while True:
            code, out, err = slotctl(ep, "backup", "plan", "show")
            if "no backup plan" in out or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        self.assertIn("no backup plan", out)


def _varint(n):
    out = b""
    while True:
        byte = n & 0x7F
        n >>= 7
        out += bytes([byte | (0x80 if n else 0)])
        if not n:
            return out


def _u(field, v):
    return _varint(field << 3) + _varint(v)


PEER_BACKUP = "/slotd.internal.v1.Peer/Backup"
N_KEYS_R2 = 2000


class BackupFromOtherReplicasTest(h.SlotdTestCase):
    """3 nodes, 8 slot groups of 2 replicas: no node hosts every group. `slotctl backup save`
    through node 1 reads each group from one replica, a follower first: node 1's own where it is
    one, else another node's through Peer/BackupOpen, BackupRead and BackupClose. The file
    verifies, every group is in it with every key written (and nothing else of the KV table),
    each group's source node is a replica of it and not its leader, node 1's log counts the
    groups read elsewhere, and every session opened was closed. The Peer/Backup* calls need a
    node's proof; another node's session is refused (PERMISSION_DENIED), an unknown one
    (NOT_FOUND), a page out of order (FAILED_PRECONDITION), bad group ids (INVALID_ARGUMENT
    naming group_ids); on the client port they are UNIMPLEMENTED."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3, slot_groups=8, replicas=2)
        stubs = [cls.cluster.stub(n) for n in cls.cluster.node_ids]
        cls.keys = {b"r2/%05d" % i: b"v%d" % i for i in range(N_KEYS_R2)}
        propose_all(stubs, [pb.ProposeRequest(put=pb.PutCommand(key=k, value=v))
                            for k, v in cls.keys.items()])
        cls.path = os.path.join(cls._class_workdir, "r2.bak")
        cls.route_before = cls.cluster.route(via=1)
        cls.save = slotctl(cls.cluster.addr(1), "backup", "save", cls.path, json_out=True)
        cls.route_after = cls.cluster.route(via=1)

    def test_groups_read_from_followers_elsewhere(self):
        code, out, err = self.save
        self.assertEqual(code, 0, err)
        code, out, err = slotctl("127.0.0.1:1", "backup", "verify", self.path, json_out=True)
        self.assertEqual(code, 0, err)
        f = read_backup(self.path)
        self.assertEqual(sorted(f["groups"]), list(range(1, 9)))
        before = {g.group_id: g for g in self.route_before.groups}
        after = {g.group_id: g for g in self.route_after.groups}
        remote = 0
        for gid, info in f["groups"].items():
            voters = set(before[gid].voters)
            self.assertIn(info["source_node"], voters, gid)
            if before[gid].leader == after[gid].leader != 0:  # no leader change meanwhile
                self.assertNotEqual(info["source_node"], before[gid].leader, gid)
            remote += info["source_node"] != 1
            self.assertGreater(info["applied_index"], 0, gid)
        self.assertGreater(remote, 0, "every group was read on node 1")
        kv = {}
        for g, rows in f["rows"].items():
            for k, v in rows.items():
                if len(k) > 3 and k[2] == TABLE_KV:
                    kv[k[3:]] = (g, v)
        self.assertEqual(set(kv), set(self.keys))
        for k, v in self.keys.items():
            g, stored = kv[k]
            self.assertEqual(self.route_before.hash_slot_table[h.hash_slot(k)], g, k)
            self.assertEqual(stored[-len(v):], v, k)
        log1 = self.cluster.server(1).log_text()
        self.assertIn("groups_remote=%d " % remote, log1)
        opened = sum(self.cluster.server(n).log_text().count("backup session opened")
                     for n in (2, 3))
        closed = sum(self.cluster.server(n).log_text().count("backup session closed")
                     for n in (2, 3))
        self.assertGreater(opened, 0)
        self.assertEqual(opened, closed)

    def test_peer_backup_calls_checked(self):
        node2 = self.cluster.server(2)
        g = [r.group_id for r in self.route_before.groups if 2 in r.voters][0]
        open_req = _u(1, g)
        with self.assertRaises(grpc.RpcError) as ctx:  # no proof
            h.raw_unary(node2.peer_channel, PEER_BACKUP + "Open", open_req)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNAUTHENTICATED)
        for path in ("Open", "Read", "Close"):  # not on the client port, even with a proof
            p = PEER_BACKUP + path
            with self.assertRaises(grpc.RpcError) as ctx:
                h.raw_unary(node2.channel, p, open_req,
                            metadata=[(h.PROOF_HEADER, h.peer_proof(p, open_req, 1, 2))])
            self.assertEqual(ctx.exception.code(), grpc.StatusCode.UNIMPLEMENTED, p)
        for bad, needle in ((b"", "group_ids: 0 ids"), (_u(1, 65), "group_ids[0]: 65 not in")):
            with self.assertRaises(grpc.RpcError) as ctx:
                node2.peer_call(PEER_BACKUP + "Open", bad, node=1)
            self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
            self.assertIn(needle, ctx.exception.details())
        raw = node2.peer_call(PEER_BACKUP + "Open", open_req, node=1)
        self.assertEqual(raw[:1], b"\x08")  # BackupOpenResponse.session_id
        session, n = 0, 1
        shift = 0
        while True:
            session |= (raw[n] & 0x7F) << shift
            shift += 7
            n += 1
            if not raw[n - 1] & 0x80:
                break
        read = _u(1, session) + _u(2, g)
        with self.assertRaises(grpc.RpcError) as ctx:  # node 3 may not read node 1's session
            node2.peer_call(PEER_BACKUP + "Read", read, node=3)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.PERMISSION_DENIED)
        with self.assertRaises(grpc.RpcError) as ctx:  # page 1 before page 0
            node2.peer_call(PEER_BACKUP + "Read", read + _u(3, 1), node=1)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
        self.assertIn("expects page 0", ctx.exception.details())
        page = node2.peer_call(PEER_BACKUP + "Read", read, node=1)
        self.assertIn(b"r2/", page)
        node2.peer_call(PEER_BACKUP + "Close", _u(1, session), node=1)
        with self.assertRaises(grpc.RpcError) as ctx:
            node2.peer_call(PEER_BACKUP + "Read", read, node=1)
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.NOT_FOUND)
        self.assertIn("no backup session %d" % session, ctx.exception.details())


if __name__ == "__main__":
    unittest.main()
