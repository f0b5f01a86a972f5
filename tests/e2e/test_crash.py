# test_crash.py - restarts on the same data directory: clean SIGTERM, and kill -9 under write load.
import os
import random
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

WRITERS = 8
LOAD_S_MAX = 3.0           # each round's load stops after this long ...
OPS_MAX = 20000            # ... or after this many writes in total
KILL_AFTER_S = 1.2         # kill -9 this long into the load (or at half the op budget)
INJECT_EVERY = 50          # every 50th write carries a 65-byte request id: a definite failure
WRITE_TIMEOUT_S = 3.0
VERIFY_IN_FLIGHT = 64
CRASH_ROUNDS = 2


def _value_for(key):
    return b"value-of-" + key


class Ledger:
    """What the writers learned: acknowledged, definitely failed, and unknown-outcome writes."""

    def __init__(self):
        self.lock = threading.Lock()
        self.acked = {}     # key -> (value, version, group_id)
        self.failed = {}    # key -> grpc.StatusCode
        self.unknown = set()
        self.injected_rejected = 0
        self.problems = []  # contract violations seen by writers

    def writes(self):
        with self.lock:
            return len(self.acked) + len(self.failed) + len(self.unknown)


def _writer(channel, round_no, writer_no, ops_max, deadline, killed, ledger):
    stub = h.pb_grpc.MetadataStub(channel)
    for i in range(ops_max):
        if time.monotonic() >= deadline:
            return
        key = b"crash/r%d/w%d/%06d" % (round_no, writer_no, i)
        inject = i % INJECT_EVERY == 3
        request_id = b"r" * (h.REQUEST_ID_BYTES_MAX + 1) if inject else b"rid/" + key
        req = pb.ProposeRequest(request_id=request_id,
                                put=pb.PutCommand(key=key, value=_value_for(key)))
        try:
            resp = stub.Propose(req, timeout=WRITE_TIMEOUT_S)
        except grpc.RpcError as err:
            with ledger.lock:
                if err.code() in h.UNKNOWN_OUTCOME_CODES:
                    ledger.unknown.add(key)
                else:
                    ledger.failed[key] = err.code()
                    if inject and err.code() == grpc.StatusCode.INVALID_ARGUMENT:
                        ledger.injected_rejected += 1
            if killed.is_set():
                return
            continue
        with ledger.lock:
            if inject:
                ledger.problems.append("write %r with a 65-byte request id was acknowledged" % key)
            elif resp.put.version != resp.applied_index or resp.applied_index == 0:
                ledger.problems.append("write %r: version %d, applied_index %d"
                                       % (key, resp.put.version, resp.applied_index))
            ledger.acked[key] = (_value_for(key), resp.put.version, resp.group_id)


class RestartTest(h.SlotdTestCase):

    def setUp(self):
        self.rng = random.Random("%d/%s" % (h.SEED, self.id()))

    def next_writes_move_forward(self, server, table, max_version_by_group):
        """After a restart a new write in each group gets a version above every earlier one."""
        for group_id in sorted(set(table)):
            key = h.key_in_group(table, group_id, "after-restart", self.rng)
            resp = h.put(server.stub, key, b"after")
            self.assertEqual(resp.group_id, group_id)
            self.assertGreater(resp.put.version, max_version_by_group.get(group_id, 0),
                               "group %d reused an applied index after restart" % group_id)

    def test_sigterm_restart_keeps_data(self):
        server = self.new_server().start()
        route = server.route()
        table = list(route.hash_slot_table)
        keys = []
        for group_id in sorted(set(table)):
            group_keys = [h.key_in_group(table, group_id, "persist", self.rng) for _ in range(4)]
            for n, key in enumerate(group_keys):
                h.put(server.stub, key, b"first %d" % n)
            h.put(server.stub, group_keys[0], b"overwritten")
            self.assertTrue(h.delete(server.stub, group_keys[1]).delete.deleted)
            made = h.put(server.stub, group_keys[2], b"before cas")
            self.assertTrue(h.cas(server.stub, group_keys[2], made.put.version,
                                  b"after cas").compare_and_set.succeeded)
            keys += group_keys
        before = {k: h.get(server.stub, k) for k in keys}
        max_version = {}
        for resp in before.values():
            max_version[resp.group_id] = max(max_version.get(resp.group_id, 0), resp.get.version)

        self.assertIsNone(server.stop(), "slotd must exit 0 on SIGTERM")
        server.start()

        for key, old in before.items():
            new = h.get(server.stub, key)
            self.assertEqual((new.get.found, new.get.value, new.get.version),
                             (old.get.found, old.get.value, old.get.version), "key %r" % key)
            self.assertEqual(new.group_id, old.group_id)
        self.assertEqual(sum(r.get.found for r in before.values()), 3 * len(set(table)))
        again = server.route()
        self.assertEqual(list(again.hash_slot_table), table)
        terms = {g.group_id: g.leader_term for g in route.groups}
        for group in again.groups:
            self.assertEqual(group.leader, 1)
            self.assertGreaterEqual(group.leader_term, terms[group.group_id],
                                    "group %d term went backwards" % group.group_id)
        self.next_writes_move_forward(server, table, max_version)

    def test_kill9_under_write_load(self):
        server = self.new_server().start()
        table = list(server.route().hash_slot_table)
        ledger = Ledger()
        for round_no in range(1, CRASH_ROUNDS + 1):
            self.load_and_kill(server, round_no, ledger)
            server.start()
            self.verify(server, ledger, round_no)
            max_version = {}
            for _, version, group_id in ledger.acked.values():
                max_version[group_id] = max(max_version.get(group_id, 0), version)
            self.next_writes_move_forward(server, table, max_version)
        self.assertEqual(ledger.problems, [])

    def load_and_kill(self, server, round_no, ledger):
        killed = threading.Event()
        channel = grpc.insecure_channel(server.addr, options=[("grpc.enable_retries", 0),
                                                              ("grpc.use_local_subchannel_pool", 1)])
        writes_before = ledger.writes()
        t0 = time.monotonic()
        threads = [threading.Thread(target=_writer, daemon=True,
                                    args=(channel, round_no, n, OPS_MAX // WRITERS,
                                          t0 + LOAD_S_MAX, killed, ledger))
                   for n in range(WRITERS)]
        for thread in threads:
            thread.start()
        while (time.monotonic() - t0 < KILL_AFTER_S
               and ledger.writes() - writes_before < OPS_MAX // 2):
            time.sleep(0.02)
        alive = sum(t.is_alive() for t in threads)
        report = server.kill()
        killed.set()
        kill_s = time.monotonic() - t0
        for thread in threads:
            thread.join(WRITE_TIMEOUT_S + 5)
        stuck = sum(t.is_alive() for t in threads)
        channel.close()
        self.assertIsNone(report, "sanitizer report before kill -9")
        self.assertEqual(stuck, 0, "writers still blocked after the kill")
        self.assertEqual(alive, WRITERS, "writers had finished before kill -9: not mid-load")
        with ledger.lock:
            acked = sum(1 for k in ledger.acked if k.startswith(b"crash/r%d/" % round_no))
            unknown = sum(1 for k in ledger.unknown if k.startswith(b"crash/r%d/" % round_no))
        sys.stderr.write("\n  round %d: kill -9 after %.2f s: %d acknowledged (%.0f/s), "
                         "%d unknown outcome, %d definite failures so far\n"
                         % (round_no, kill_s, acked, acked / kill_s, unknown, len(ledger.failed)))
        self.assertGreater(acked, 0, "no write was acknowledged before the kill")
        self.assertGreater(ledger.injected_rejected, 0, "no injected bad write was rejected")

    def verify(self, server, ledger, round_no):
        """Every acknowledged key reads back with its value and version; no failed write appears;
        an unknown-outcome write, if present, holds exactly its value."""
        checks = [(k, "acked") for k in ledger.acked]
        checks += [(k, "failed") for k in ledger.failed]
        checks += [(k, "unknown") for k in ledger.unknown]
        lost, wrong, resurrected, garbled = [], [], [], []
        t0 = time.monotonic()
        for start in range(0, len(checks), VERIFY_IN_FLIGHT):
            batch = checks[start:start + VERIFY_IN_FLIGHT]
            futures = [server.stub.Read.future(pb.ReadRequest(get=pb.GetQuery(key=k)), timeout=10)
                       for k, _ in batch]
            for (key, kind), future in zip(batch, futures):
                got = future.result().get
                if kind == "acked":
                    value, version, _ = ledger.acked[key]
                    if not got.found:
                        lost.append(key)
                    elif (got.value, got.version) != (value, version):
                        wrong.append((key, got.value[:40], got.version, version))
                elif kind == "failed" and got.found:
                    resurrected.append((key, ledger.failed[key]))
                elif kind == "unknown" and got.found and got.value != _value_for(key):
                    garbled.append(key)
        sys.stderr.write("  round %d: verified %d keys in %.1f s after restart\n"
                         % (round_no, len(checks), time.monotonic() - t0))
        self.assertEqual(lost[:10], [], "%d acknowledged writes lost" % len(lost))
        self.assertEqual(wrong[:10], [], "%d acknowledged writes read back wrong" % len(wrong))
        self.assertEqual(resurrected[:10], [],
                         "%d definitely failed writes were applied" % len(resurrected))
        self.assertEqual(garbled[:10], [], "%d unknown-outcome writes hold another value"
                         % len(garbled))


if __name__ == "__main__":
    unittest.main()
