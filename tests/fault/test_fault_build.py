# test_fault_build.py - the fault build's own switches: bad settings, drop, delay, a bad net file.
import os
import statistics
import subprocess
import sys
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import faultnet  # noqa: E402
from workload import h  # noqa: E402

DELAY_MS = 200
WRITES = 8


def _run_with_env(env, timeout=10):
    full = dict(os.environ)
    full.update(env)
    return subprocess.run([faultnet.FAULT_BIN, "--help"], env=full, capture_output=True,
                          text=True, timeout=timeout)


class FaultSettingsTest(faultnet.FaultTestCase):
    """A wrong fault variable stops the process at load with status 2 and a sentence naming it;
    valid ones do not."""

    def test_bad_settings_stop_the_process(self):
        cases = [({"SLOTD_FAULT_NET": "drop=2"}, "SLOTD_FAULT_NET", "out of range"),
                 ({"SLOTD_FAULT_NET": "block=64"}, "SLOTD_FAULT_NET", "out of range"),
                 ({"SLOTD_FAULT_NET": "delay_ms=x"}, "SLOTD_FAULT_NET", "not a number"),
                 ({"SLOTD_FAULT_NET": "loss=0.1"}, "SLOTD_FAULT_NET", "unknown key"),
                 ({"SLOTD_CRASH_AT": "loop_after_log_sync:0"}, "SLOTD_CRASH_AT", "out of range"),
                 ({"SLOTD_CRASH_AT": ":3"}, "SLOTD_CRASH_AT", "invalid"),
                 ({"SLOTD_FAULT_NET_POLL_MS": "1"}, "SLOTD_FAULT_NET_POLL_MS", "5..10000")]
        for env, name, words in cases:
            proc = _run_with_env(env)
            self.assertEqual(proc.returncode, 2, "%s: %s" % (env, proc.stderr))
            self.assertIn("fault: " + name, proc.stderr)
            self.assertIn(words, proc.stderr)

    def test_good_settings_are_accepted(self):
        proc = _run_with_env({"SLOTD_FAULT_NET": "drop=0.05, delay_ms=20 block=3 # comment",
                              "SLOTD_CRASH_AT": "apply_after_fsm_commit:7"})
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("crash point apply_after_fsm_commit armed for hit 7", proc.stderr)


class PeerNetworkTest(faultnet.FaultTestCase):
    """drop=1 on every node stops every write (no message between nodes), healing restores them;
    delay_ms slows writes down; a net file with a bad token is refused and the faults in force
    stay."""

    def _write_ms(self, c, key, n):
        out = []
        for i in range(n):
            t0 = time.monotonic()
            h.put(c.stub(1), key, b"v%d" % i, timeout=5)
            out.append((time.monotonic() - t0) * 1000)
        return out

    def test_drop_delay_and_bad_file(self):
        c = self.new_fault_cluster(size=3, slot_groups=1)
        route = c.wait_leaders()
        key = h.key_in_group(c.table, 1, "net")
        fast = self._write_ms(c, key, WRITES)
        c.flaky("delay_ms=%d" % DELAY_MS)
        slow = self._write_ms(c, key, WRITES)
        sys.stderr.write("\n  write ms: median %.1f normal, %.1f with delay_ms=%d\n"
                         % (statistics.median(fast), statistics.median(slow), DELAY_MS))
        self.assertGreater(statistics.median(slow), DELAY_MS / 4)
        self.assertGreater(statistics.median(slow), 3 * statistics.median(fast))

        c.flaky("drop=1")
        with self.assertRaises(grpc.RpcError):
            # commits need the other nodes: nothing reaches them (bounded by the RPC timeouts)
            for i in range(3):
                h.put(c.stub(c.leaders(route)[1]), key, b"lost%d" % i, timeout=2)
        c.heal_net()
        resp = None
        deadline = time.monotonic() + 15
        while resp is None and time.monotonic() < deadline:
            try:
                resp = h.put(c.stub(1), key, b"after", timeout=2)
            except grpc.RpcError:
                time.sleep(0.1)
        self.assertIsNotNone(resp, "no write within 15 s after healing")

        c.isolate(3)
        self.assertTrue(c.server(3).log_lines("blocked=0x6", True), c.server(3).log_tail())
        c.server(3).set_net("block=1,block=nine")
        time.sleep(faultnet.APPLY_WAIT_S)
        self.assertTrue(c.server(3).log_lines("keeping the previous network faults", True))
        lines = c.server(3).log_lines("fault: network faults now", True)
        self.assertIn("blocked=0x6", lines[-1])
        c.heal_net()


if __name__ == "__main__":
    unittest.main()
