# test_c_propose_stream.py - the ProposeStream clients against real nodes: libslotd's stream API
# (cclient_propose_stream) and slotbench --stream, on one node and on three (route-aware).
import json
import os
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402

BIN_DIR = h.SLOTD_BIN.parent
PSTREAM_BIN = os.environ.get("CCLIENT_PROPOSE_STREAM_BIN", str(BIN_DIR / "cclient_propose_stream"))
SLOTBENCH_BIN = os.environ.get("SLOTBENCH_BIN", str(BIN_DIR / "slotbench"))
RUN_TIMEOUT_S = 60.0
KEY_BYTES_MAX = 1024  # slot_validate_propose's key bound


def run_json(*args):
    p = subprocess.run([str(a) for a in args], capture_output=True, text=True,
                       timeout=RUN_TIMEOUT_S)
    if p.returncode != 0:
        raise AssertionError("%s exited %d: %s" % (args[0], p.returncode, p.stderr))
    return json.loads(p.stdout)


class CClientProposeStreamTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server(slot_groups=2)
        cls.stub = cls.server.stub

    def test_libslotd_round_trip(self):
        """3,000 puts through libslotd's stream with at most 256 outstanding: the bound is hit
        (EEXHAUSTED, then a result is taken), every id comes back once OK with its version, the
        half-close ends the call OK, and the values read back."""
        r = run_json(PSTREAM_BIN, self.server.addr, 3000, 256, "cps/rt/")
        self.assertEqual(r["ok"], 3000, r)
        self.assertEqual((r["failed"], r["duplicate"], r["unknown"], r["lost"]), (0, 0, 0, 0), r)
        self.assertEqual(r["end"], "ok", r)
        self.assertGreater(r["exhausted"], 0, r)
        for i in range(0, 3000, 97):
            got = h.get(self.stub, b"cps/rt/%d" % i).get
            self.assertTrue(got.found, i)
            self.assertEqual(got.value, b"v%d" % i)

    def test_libslotd_bad_items_fail_alone(self):
        """Keys past the server's bound: each item fails INVALID_ARGUMENT on its own (the result's
        error names put.key; such a key cannot be stored or read), the call still ends OK after
        the half-close."""
        prefix = "cps/big/" + "x" * (KEY_BYTES_MAX + 1)
        r = run_json(PSTREAM_BIN, self.server.addr, 20, 0, prefix)
        self.assertEqual((r["ok"], r["failed"], r["einval"], r["lost"]), (0, 20, 20, 0), r)
        self.assertEqual(r["end"], "ok", r)
        self.assertIn("put.key", r["first_error"])

    def test_slotbench_stream(self):
        """slotbench --stream --populate writes every key once on the stream, then a measured
        run of 3,000 puts: no errors, items coalesced (fewer messages than items)."""
        r = run_json(SLOTBENCH_BIN, "--endpoints", self.server.addr, "--stream", "--op", "put",
                     "--keys", 500, "--populate", "--ops", 3000, "--duration", 30,
                     "--concurrency", 128, "--json")
        self.assertTrue(r["stream"])
        self.assertEqual(r["populated_keys"], 500, r["populate"])
        self.assertEqual(r["populate"]["errors_total"], 0, r["populate"])
        run = r["run"]
        self.assertEqual(run["errors_total"], 0, run)
        self.assertEqual(run["ok"], 3000, run)
        self.assertGreaterEqual(run["stream_items_sent"], 3000)
        self.assertLess(run["stream_messages_sent"], run["stream_items_sent"])
        self.assertEqual(run["streams_opened"], 1)
        key = b"key-" + b"0" * 57 + b"499"  # --key-size 64: "key-" + the index padded
        self.assertTrue(h.get(self.stub, key).get.found)


class SlotbenchStreamClusterTest(h.SlotdTestCase):
    def test_route_aware_stream(self):
        """Three nodes: slotbench --stream --route-aware sends every item to its group's leader
        with no_forward, one stream per leader: all direct, no NOT_LEADER, no errors."""
        cluster = self.new_cluster(size=3, slot_groups=6)
        eps = ",".join(cluster.addr(i) for i in (1, 2, 3))
        r = run_json(SLOTBENCH_BIN, "--endpoints", eps, "--stream", "--route-aware", "--op",
                     "put", "--keys", 1000, "--ops", 2000, "--duration", 30, "--concurrency", 64,
                     "--json")
        run = r["run"]
        self.assertEqual(run["errors_total"], 0, run)
        self.assertEqual(run["ok"], 2000, run)
        self.assertEqual((run["direct"], run["fallback"]), (2000, 0), run)
        self.assertGreaterEqual(run["streams_opened"], 2)  # the groups' leaders spread
        self.assertEqual(r["route_fetch_failures"], 0)


if __name__ == "__main__":
    unittest.main()
