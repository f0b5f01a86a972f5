"""slotd --echo-only 1, the echo ceiling: the request bytes come back, nothing else is served."""
import json
import os
import signal
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

import grpc

import slotd_harness as h

SLOTBENCH_BIN = os.environ.get("SLOTBENCH_BIN", str(h.SLOTD_BIN.parent / "slotbench"))
ECHO = "/slotd.bench.v1.Echo/Echo"
START_S = 10  # the port answers within this


class EchoOnlyTest(unittest.TestCase):
    """One echo-only process for the class."""

    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.data_dir = Path(cls.tmp.name) / "data"
        cls.addr = "127.0.0.1:%d" % h.free_port()
        cls.log = open(Path(cls.tmp.name) / "echo.log", "wb")
        cls.proc = subprocess.Popen(
            [str(h.SLOTD_BIN), "--echo-only", "1", "--listen", cls.addr, "--data-dir",
             str(cls.data_dir), "--max-request-bytes", "2048"],
            stdout=cls.log, stderr=subprocess.STDOUT)
        cls.channel = h.open_channel(cls.addr)
        deadline = time.monotonic() + START_S
        while True:
            try:
                h.raw_unary(cls.channel, ECHO, b"x", timeout=1.0)
                break
            except grpc.RpcError:
                if time.monotonic() > deadline or cls.proc.poll() is not None:
                    cls.tearDownClass()
                    raise
                time.sleep(0.1)

    @classmethod
    def tearDownClass(cls):
        cls.channel.close()
        if cls.proc.poll() is None:
            cls.proc.kill()
            cls.proc.wait(10)
        cls.log.close()
        cls.tmp.cleanup()

    def test_bytes_come_back(self):
        for payload in (b"", b"hello", bytes(range(256)) * 8):
            self.assertEqual(h.raw_unary(self.channel, ECHO, payload), payload)

    def test_request_limit_still_applies(self):
        with self.assertRaises(grpc.RpcError) as cm:
            h.raw_unary(self.channel, ECHO, b"y" * 2049)
        self.assertEqual(cm.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertIn("2048", cm.exception.details())

    def test_no_runtime_behind_it(self):
        with self.assertRaises(grpc.RpcError) as cm:
            h.raw_unary(self.channel, "/slotd.v1.Metadata/Read", b"")
        self.assertEqual(cm.exception.code(), grpc.StatusCode.UNIMPLEMENTED)
        self.assertFalse(self.data_dir.exists())
        # health answers SERVING (bytes 08 01), as on a normal node
        self.assertEqual(h.raw_unary(self.channel, "/grpc.health.v1.Health/Check", b""),
                         b"\x08\x01")

    def test_slotbench_echo_target(self):
        out = subprocess.run(
            [SLOTBENCH_BIN, "--target", "echo", "--endpoints", self.addr, "--op", "mixed",
             "--read-op", "get-local", "--concurrency", "8", "--ops", "400", "--duration", "10",
             "--json"], capture_output=True, timeout=30, check=True)
        r = json.loads(out.stdout)
        self.assertEqual(r["target"], "echo")
        self.assertEqual(r["run"]["errors_total"], 0)
        self.assertEqual(r["run"]["ok"], 400)
        self.assertEqual(r["run"]["reads"] + r["run"]["writes"], 400)
        self.assertGreater(r["run"]["reads"], 0)
        self.assertGreater(r["run"]["writes"], 0)

    def test_slotbench_refuses_route_aware(self):
        p = subprocess.run([SLOTBENCH_BIN, "--target", "echo", "--route-aware"],
                           capture_output=True, timeout=10)
        self.assertEqual(p.returncode, 2)
        self.assertIn(b"--route-aware: slotd only", p.stderr)

    def test_zz_sigterm_exits_zero(self):
        # last (zz): the class's process ends here
        self.proc.send_signal(signal.SIGTERM)
        self.assertEqual(self.proc.wait(10), 0)


if __name__ == "__main__":
    unittest.main()
