"""test_migration.py - hash-slot migration (Admin.MigrateHashSlots) on a 5-node cluster under a
steady write load: no acknowledged write lost or applied twice, reads never see a moving slot
empty, the hash-slot table changes once per migration, bad requests change nothing, and while the
cluster state's hash_slot_migration feature is off every node refuses (Admin.SetFeature turns it
on for all; --enable-hash-slot-migration 1 on the bootstrapping nodes seeds it on)."""
import random
import sys
import threading
import time
import unittest

import grpc

import slotd_harness as h
import test_controller as tc
from slotd.v1 import admin_pb2, metadata_pb2

TASK_WAIT_S = 90
FLAG = ["--enable-hash-slot-migration", "1"]


def task_status(server, task_id):
    raw = h.raw_unary(server.channel, "/slotd.v1.Metadata/TaskStatus",
                      metadata_pb2.TaskStatusRequest(task_id=task_id).SerializeToString())
    return metadata_pb2.TaskStatusResponse.FromString(raw).task


def keys_in_slot(slot, n, prefix, rng):
    keys = []
    while len(keys) < n:
        key = h.unique_key(prefix, rng)
        if h.hash_slot(key) == slot:
            keys.append(key)
    return keys


def owner_of(state, slot):
    for r in state["hash_slot_table"]["ranges"]:
        if r["first"] <= slot <= r["last"]:
            return r["group"]
    return None


class Load:
    """Writers put keys of the moving slots (and one other slot) through random nodes with
    request ids, retrying the same request until answered; a reader checks that preloaded keys
    never read as absent. Records acknowledged values, error codes and the longest stretch of
    time one write kept failing.

    Both writers write the same keys, so the order in which their answers arrive says nothing
    about the order the writes applied in (a write whose first attempt timed out but applied
    may be acknowledged by its retry after a later write). acked keeps, per key and group, the
    acknowledged write with the highest applied index: the order the group applied them in."""

    def __init__(self, servers, keys, preloaded, seed):
        self.servers = servers
        self.keys = keys
        self.preloaded = preloaded  # key -> value, never deleted
        self.rng = random.Random(seed)
        self.acked = {}  # key -> {group id: (value, applied index)}
        self.mu = threading.Lock()
        self.errors = {}
        self.longest_retry_s = 0.0
        self.unresolved = 0
        self.absent_reads = []
        self.reads_ok = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self.write, args=(w,), daemon=True)
                        for w in range(2)]
        self.threads.append(threading.Thread(target=self.read, daemon=True))

    def live(self):
        return [s for s in self.servers if s.running() and s.stub is not None]

    def write(self, w):
        n = 0
        rng = random.Random(self.rng.random())
        while not self.stop.is_set() and n < 20000:
            key = self.keys[rng.randrange(len(self.keys))]
            value = b"w%d-%d" % (w, n)
            req = metadata_pb2.ProposeRequest(request_id=b"mig-w%d-%d" % (w, n),
                                              put=metadata_pb2.PutCommand(key=key, value=value))
            start = time.monotonic()
            while time.monotonic() - start < 20:
                try:
                    resp = rng.choice(self.live()).stub.Propose(req, timeout=3)
                    with self.mu:
                        by_group = self.acked.setdefault(key, {})
                        seen = by_group.get(resp.group_id)
                        if seen is None or resp.applied_index > seen[1]:
                            by_group[resp.group_id] = (value, resp.applied_index)
                    break
                except grpc.RpcError as err:
                    self.errors[err.code().name] = self.errors.get(err.code().name, 0) + 1
                    time.sleep(0.02)
            else:
                self.unresolved += 1
            self.longest_retry_s = max(self.longest_retry_s, time.monotonic() - start)
            n += 1
            time.sleep(0.003)

    def read(self):
        keys = list(self.preloaded)
        rng = random.Random(self.rng.random())
        while not self.stop.is_set():
            key = keys[rng.randrange(len(keys))]
            try:
                resp = h.get(rng.choice(self.live()).stub, key, timeout=3)
            except grpc.RpcError:
                time.sleep(0.02)
                continue
            if not resp.get.found:
                self.absent_reads.append((key, h.hash_slot(key), resp.group_id,
                                          resp.applied_index))
            else:
                self.reads_ok += 1
            time.sleep(0.005)

    def start(self):
        for t in self.threads:
            t.start()
        return self

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(30)


class MigrationTest(tc.ControllerClusterCase):

    def start_nodes(self, without_flag=()):
        """The 5-node cluster, started with --enable-hash-slot-migration 1 on every node but those
        listed (it seeds the replicated switch when the controller voters bootstrap)."""
        orig = h.SlotdServer.launch

        def launch(server):
            name = int(server.name[1:])
            if name not in without_flag:
                server.extra_args = list(server.extra_args) + FLAG
            return orig(server)
        h.SlotdServer.launch = launch
        try:
            self.start_cluster()
        finally:
            h.SlotdServer.launch = orig
        tc.wait_for("converged", self.converged)

    def state(self):
        return tc.cluster_state(self.nodes[1])[1]

    def migrate(self, slots, to_group, via=1):
        return tc.admin_call(self.nodes[via], "MigrateHashSlots",
                             admin_pb2.MigrateHashSlotsRequest(hash_slots=slots,
                                                               to_group=to_group),
                             admin_pb2.AdminWriteResponse)

    def wait_task(self, task_id):
        phases = []

        def check():
            t = task_status(self.nodes[1], task_id)
            if not phases or phases[-1] != t.phase:
                phases.append(t.phase)
            if t.status == "failed":
                raise AssertionError("task %d failed in %s: %s" % (task_id, t.phase,
                                                                    t.last_error))
            return t if t.status == "done" else None
        t = tc.wait_for("task %d done" % task_id, check, timeout=TASK_WAIT_S)
        return t, phases

    def routes_agree(self, slots, group):
        """True when every running node routes every slot to group."""
        for s in self.nodes.values():
            if not s.running():
                continue
            table = list(tc.route(s).hash_slot_table)
            if any(table[slot] != group for slot in slots):
                return False
        return True

    def test_migrate_under_writes(self):
        self.start_nodes(without_flag=(1, 2, 3, 4, 5))
        rng = random.Random(11)
        state = self.state()
        version0 = state["hash_slot_table"]["version"]
        # Two migrations: two slots inside group 1's range to group 3, then the last slot (255,
        # the end of the keyspace) from group 8 to group 1.
        plans = [([5, 6], 3), ([255], 1)]
        for slots, _ in plans:
            self.assertNotEqual(owner_of(state, slots[0]), None)
        all_slots = [s for slots, _ in plans for s in slots]
        # Preload: rows in every moving slot, one of them written with a request id that is
        # re-sent after the move (the target must answer it from the copied dedupe record).
        preloaded = {}
        for slot in all_slots:
            for key in keys_in_slot(slot, 40, "pre", rng):
                value = b"pre-" + key
                h.put_retrying(self.nodes[1].stub, key, value, b"pre-" + key)
                preloaded[key] = value
        dedupe_key = keys_in_slot(5, 1, "dedupe", rng)[0]
        first = h.put_retrying(self.nodes[1].stub, dedupe_key, b"first", b"dedupe-rid")
        h.put_retrying(self.nodes[1].stub, dedupe_key, b"second", b"dedupe-rid-2")
        other = keys_in_slot(100, 4, "other", rng)
        moving = [k for slot in all_slots for k in keys_in_slot(slot, 6, "mv", rng)]
        load = Load(list(self.nodes.values()), moving + other, preloaded, seed=5).start()
        try:
            time.sleep(1.0)
            # The switch is off in the cluster state: refused through a voter and through a
            # mirror, and nothing changes; SetFeature through the mirror turns it on for all.
            rev = tc.cluster_state(self.nodes[1])[0].revision
            for via in (1, 5):
                with self.assertRaises(grpc.RpcError) as cm:
                    self.migrate([5], 3, via=via)
                self.assertEqual(cm.exception.code(), grpc.StatusCode.FAILED_PRECONDITION)
                self.assertIn("hash-slot migration is off in the cluster state",
                              cm.exception.details())
            self.assertEqual(tc.cluster_state(self.nodes[1])[0].revision, rev)
            on = tc.admin_call(self.nodes[5], "SetFeature", admin_pb2.SetFeatureRequest(
                name="hash_slot_migration", enabled=True), admin_pb2.AdminWriteResponse)
            self.assertEqual(on.outcome, admin_pb2.OUTCOME_CHANGED)
            for n, (slots, to_group) in enumerate(plans):
                before = self.state()
                source = owner_of(before, slots[0])
                resp = self.migrate(slots, to_group)
                self.assertEqual(resp.outcome, admin_pb2.OUTCOME_CHANGED)
                t, phases = self.wait_task(resp.task_id)
                sys.stderr.write("\n  migration %s: group %d -> %d, phases %s, rows bytes %d\n"
                                 % (slots, source, to_group, phases, t.bytes_total))
                self.assertEqual(t.kind, "hash_slot_migration")
                self.assertEqual(t.group_id, source)
                self.assertEqual(t.to_group, to_group)
                self.assertEqual(list(t.hash_slots), slots)
                self.assertGreater(t.bytes_total, 0)
                after = self.state()
                self.assertEqual(after["hash_slot_table"]["version"], before["hash_slot_table"]["version"] + 1,
                                 "the table changes exactly once per migration")
                for slot in slots:
                    self.assertEqual(owner_of(after, slot), to_group)
                tc.wait_for("every node routes %s to group %d" % (slots, to_group),
                            lambda: self.routes_agree(slots, to_group))
                time.sleep(1.0)  # writes keep flowing on the new owner
        finally:
            load.finish()
        sys.stderr.write("  load: %d keys acked, errors %s, longest retry %.2f s, reads ok %d\n"
                         % (len(load.acked), load.errors, load.longest_retry_s, load.reads_ok))
        self.assertEqual(load.unresolved, 0, "a write stayed unanswered for 20 s")
        self.assertEqual(load.absent_reads, [], "a preloaded key read as absent")
        self.assertLess(load.longest_retry_s, 10.0, "writes to a moving slot stalled too long")
        self.assertEqual(self.state()["hash_slot_table"]["version"], version0 + len(plans))
        # Every acknowledged write reads back with its last value, from the new owner. A key
        # changes group at most once here, and the new owner applies its writes after every write
        # the old owner applied (the fence): the last value is the new owner's last one when it
        # acknowledged any, else the old owner's.
        final = self.state()
        for key, by_group in load.acked.items():
            owner = owner_of(final, h.hash_slot(key))
            self.assertLessEqual(len(by_group), 2, (key, by_group))
            value = by_group[owner][0] if owner in by_group else next(iter(by_group.values()))[0]
            resp = h.get(self.nodes[1].stub, key)
            self.assertTrue(resp.get.found, key)
            self.assertEqual(resp.get.value, value, key)
            self.assertEqual(resp.group_id, owner_of(final, h.hash_slot(key)), key)
        for key, value in preloaded.items():
            self.assertEqual(h.get(self.nodes[2].stub, key).get.value, value, key)
        # The retried request id is answered from the copied dedupe record: same index, and
        # the later value stays.
        again = h.put_retrying(self.nodes[1].stub, dedupe_key, b"first", b"dedupe-rid")
        self.assertEqual(again.applied_index, first.applied_index)
        self.assertEqual(h.get(self.nodes[1].stub, dedupe_key).get.value, b"second")

    def test_bad_requests_change_nothing(self):
        self.start_nodes()
        self.assertTrue(self.state()["features"]["hash_slot_migration"])  # seeded at bootstrap
        rev = tc.cluster_state(self.nodes[1])[0].revision
        cases = [
            ([], 2, grpc.StatusCode.INVALID_ARGUMENT, "hash_slots"),
            ([256], 2, grpc.StatusCode.INVALID_ARGUMENT, "hash_slots[0]: 256 not in 0..255"),
            ([3, 3], 2, grpc.StatusCode.INVALID_ARGUMENT, "given twice"),
            ([3], 0, grpc.StatusCode.INVALID_ARGUMENT, "to_group"),
            ([3], 65, grpc.StatusCode.INVALID_ARGUMENT, "to_group"),
            ([3], 9, grpc.StatusCode.INVALID_ARGUMENT, "to_group: 9 does not exist"),
            ([3], 1, grpc.StatusCode.INVALID_ARGUMENT, "already owned"),
            ([31, 32], 5, grpc.StatusCode.INVALID_ARGUMENT, "owned by groups 1 and 2"),
        ]
        for slots, to_group, code, words in cases:
            with self.assertRaises(grpc.RpcError, msg=(slots, to_group)) as cm:
                self.migrate(slots, to_group)
            self.assertEqual(cm.exception.code(), code, (slots, to_group,
                                                         cm.exception.details()))
            self.assertIn(words, cm.exception.details(), (slots, to_group))
        self.assertEqual(tc.cluster_state(self.nodes[1])[0].revision, rev)
        raw = h.raw_unary(self.nodes[1].channel, "/slotd.v1.Metadata/TaskStatus",
                          metadata_pb2.TaskStatusRequest(task_id=0).SerializeToString())
        self.assertEqual(list(metadata_pb2.TaskStatusResponse.FromString(raw).tasks), [])


if __name__ == "__main__":
    unittest.main()
