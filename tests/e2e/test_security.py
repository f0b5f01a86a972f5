# test_security.py - trust-boundary checks on real processes: a port slotd serves is its own.
import os
import subprocess
import sys
import tempfile
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402

EXIT_WITHIN_S = 3.0


class BoundPortTest(unittest.TestCase):
    """A second slotd on a port another slotd serves exits at once (exit != 0, one line naming the
    port and the error) and touches no data directory; the first keeps serving every request."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory(prefix="slotd-security-")
        cls.first = h.SlotdServer(cls.tmp.name, name="first").start()

    @classmethod
    def tearDownClass(cls):
        problem = cls.first.stop()
        cls.tmp.cleanup()
        if problem:
            raise AssertionError("first slotd: %s" % problem)

    def test_second_slotd_on_bound_port_exits(self):
        key = h.unique_key("bound-port")
        h.put(self.first.stub, key, b"first")
        second_dir = os.path.join(self.tmp.name, "second-data")
        t0 = time.monotonic()
        proc = subprocess.run([str(h.SLOTD_BIN), "--listen", self.first.addr, "--data-dir",
                               second_dir], stdin=subprocess.DEVNULL, capture_output=True,
                              timeout=EXIT_WITHIN_S + 10)
        took = time.monotonic() - t0
        self.assertNotEqual(proc.returncode, 0)
        self.assertLess(took, EXIT_WITHIN_S)
        lines = [ln for ln in proc.stderr.decode().splitlines() if ln.strip()]
        self.assertEqual(len(lines), 1, lines)
        self.assertIn("--listen", lines[0])
        self.assertIn(str(self.first.port), lines[0])
        self.assertIn("Address already in use", lines[0])
        self.assertFalse(os.path.exists(second_dir), "the second slotd created its data dir")
        # Every read still reaches the first process and its data (no shared port).
        for _ in range(10):
            resp = h.get(self.first.stub, key)
            self.assertTrue(resp.get.found)
            self.assertEqual(resp.get.value, b"first")


if __name__ == "__main__":
    unittest.main()
