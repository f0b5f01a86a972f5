# test_c_client.py - libslotd as a C program outside the tree sees it: installed, built with pkg-config.
"""The C client from an installed tree, against one real node.

* ``make install PREFIX=<tmp>`` (the build dir of ``$SLOTD_BIN``) installs slotd/client.h,
  libslotd.a, libslotd.so.1 (soname, symbols at version SLOTD_1.0), slotd.pc, slotctl and slotd.
* clients/c/examples/example.c (the program of docs/c-client.md) is compiled with nothing but
  ``cc example.c $(pkg-config --cflags --libs slotd)`` (PKG_CONFIG_PATH into the prefix) and run
  against the node: put, get, cas, range and delete print what the node answered, and the
  installed slotctl reads the CAS's value back.
* The same program against a port nobody listens on exits 1 with the error object's sentence
  (call, gRPC status, node, attempts); docs/c-client.md shows the program verbatim.
"""

import os
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import slotd_harness as h  # noqa: E402

BUILD_DIR = h.SLOTD_BIN.parent.parent
EXAMPLE = h.REPO / "clients" / "c" / "examples" / "example.c"
CC = os.environ.get("CC", "cc")
STEP_TIMEOUT_S = 120


def run(cmd, env=None, timeout=STEP_TIMEOUT_S):
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout)


@unittest.skipUnless(shutil.which(CC) and shutil.which("pkg-config"), "needs cc and pkg-config")
class CClientInstalledTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.prefix = Path(tempfile.mkdtemp(prefix="slotd-prefix-"))
        done = run(["make", "-C", str(h.REPO), "install", "BUILD=%s" % BUILD_DIR,
                    "PREFIX=%s" % cls.prefix])
        if done.returncode != 0:
            raise AssertionError("make install failed:\n%s%s" % (done.stdout, done.stderr))
        cls.env = dict(os.environ, PKG_CONFIG_PATH=str(cls.prefix / "lib" / "pkgconfig"),
                       LD_LIBRARY_PATH=str(cls.prefix / "lib"))
        flags = run(["pkg-config", "--cflags", "--libs", "slotd"], env=cls.env)
        if flags.returncode != 0:
            raise AssertionError("pkg-config slotd: %s" % flags.stderr)
        cls.example = cls.prefix / "example"
        built = run([CC, "-o", str(cls.example), str(EXAMPLE)] + flags.stdout.split(), env=cls.env)
        if built.returncode != 0:
            raise AssertionError("example does not build from the installed tree:\n%s"
                                 % built.stderr)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.prefix, ignore_errors=True)
        super().tearDownClass()

    def test_installed_tree(self):
        for rel in ("include/slotd/client.h", "lib/libslotd.a", "lib/libslotd.so.1",
                    "lib/pkgconfig/slotd.pc", "bin/slotctl", "bin/slotd"):
            self.assertTrue((self.prefix / rel).exists(), rel)
        self.assertEqual(os.readlink(self.prefix / "lib" / "libslotd.so"), "libslotd.so.1")
        dyn = run(["readelf", "-d", "-W", str(self.prefix / "lib" / "libslotd.so.1")])
        self.assertIn("Library soname: [libslotd.so.1]", dyn.stdout)
        syms = run(["readelf", "--dyn-syms", "-W", str(self.prefix / "lib" / "libslotd.so.1")])
        exported = [line.split()[-1] for line in syms.stdout.splitlines()
                    if " GLOBAL " in line and " UND " not in line and " FUNC " in line]
        self.assertIn("slotd_client_put@@SLOTD_1.0", exported)
        self.assertEqual([s for s in exported if not s.endswith("@@SLOTD_1.0")], [])
        self.assertEqual([s for s in exported if not s.startswith("slotd_")], [])
        self.assertEqual([s for s in exported if s.startswith("slotd__")], [])
        # the example links the shared library of the prefix, not one of the build tree
        ldd = run(["ldd", str(self.example)], env=self.env)
        self.assertIn(str(self.prefix / "lib" / "libslotd.so.1"), ldd.stdout)

    def test_example_against_a_node(self):
        prefix = h.unique_key("cex/").decode()
        got = run([str(self.example), self.server.addr, prefix], env=self.env, timeout=30)
        self.assertEqual(got.returncode, 0, got.stderr)
        lines = got.stdout.splitlines()
        self.assertEqual(len(lines), 7, got.stdout)
        for i in range(3):
            self.assertRegex(lines[i], r"^put %s%d version \d+ group \d+$" % (prefix, i))
        self.assertRegex(lines[3], r"^get %s0 = value-0 \(version (\d+)\)$" % prefix)
        version = int(lines[3].rsplit(" ", 1)[1].rstrip(")"))
        self.assertEqual(lines[4], "cas %s0 version %d -> %d" % (prefix, version, version + 1))
        self.assertEqual(lines[5], "range %s* holds 3 keys" % prefix)
        self.assertEqual(lines[6], "delete %s2 deleted" % prefix)
        # what the example wrote, read by the installed slotctl
        back = run([str(self.prefix / "bin" / "slotctl"), "--endpoints", self.server.addr, "get",
                    prefix + "0"], env=self.env, timeout=30)
        self.assertEqual(back.returncode, 0, back.stderr)
        self.assertIn("VALUE    bumped", back.stdout)
        gone = run([str(self.prefix / "bin" / "slotctl"), "--endpoints", self.server.addr, "get",
                    prefix + "2"], env=self.env, timeout=30)
        self.assertNotEqual(gone.returncode, 0)

    def test_example_unreachable(self):
        got = run([str(self.example), "127.0.0.1:1", "cex/"], env=self.env, timeout=60)
        self.assertEqual(got.returncode, 1, got.stderr)
        self.assertEqual(got.stdout, "")
        self.assertRegex(got.stderr, r"^example: put: UNAVAILABLE: .*\[127\.0\.0\.1:1, 3 attempts\]\n$")

    def test_doc_shows_the_example(self):
        """docs/c-client.md carries example.c verbatim, so the page cannot drift from the file
        the build compiles."""
        doc = (h.REPO / "docs" / "c-client.md").read_text()
        start = doc.index("## The example")
        block = doc[doc.index("```c\n", start) + len("```c\n"):]
        block = block[:block.index("```\n")]
        self.assertEqual(block, EXAMPLE.read_text())

    def test_example_usage(self):
        got = run([str(self.example)], env=self.env, timeout=10)
        self.assertEqual(got.returncode, 2)
        self.assertIn("usage: example ENDPOINTS PREFIX", got.stderr)


if __name__ == "__main__":
    unittest.main()
