# test_flags.py - slotd's and slotctl's command line as an operator meets it: bad flags, versions, log lines.
"""The real binaries, no cluster: a bad or unknown flag or a bad value prints one line naming it
with the hint `slotd --help` and exits 2, creating no data directory; `slotd --version` and
`slotctl --version` print `git describe`; an unknown SLOTD_* variable logs a warning naming the
nearest known one and slotd serves anyway; every log line starts with an RFC 3339 UTC timestamp
and a level (text), or is one JSON object with them (`--log-format json`); `--log-level warn`
drops the info lines. About 2 s."""

import json
import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SLOTD_BIN = Path(os.environ.get("SLOTD_BIN", ROOT / "build" / "bin" / "slotd"))
SLOTCTL_BIN = Path(os.environ.get("SLOTCTL_BIN", SLOTD_BIN.parent / "slotctl"))
RFC3339_UTC = r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z"
TEXT_LINE = re.compile(r"^ts=" + RFC3339_UTC + r" level=(debug|info|warn|error) component=\S+ ")
SERVING_WAIT_S = 20


def run(*args, env=None):
    return subprocess.run([str(a) for a in args], capture_output=True, text=True, timeout=30,
                          env=env, cwd=tempfile.gettempdir())


@unittest.skipUnless(SLOTD_BIN.exists(), "no slotd build at %s" % SLOTD_BIN)
class FlagsTest(unittest.TestCase):

    def setUp(self):
        self.work = Path(tempfile.mkdtemp(prefix="slotd-flags-"))
        self.addCleanup(shutil.rmtree, self.work, ignore_errors=True)

    def assertOneLineRefusal(self, args, needles):
        data = self.work / "data-refused"
        r = run(SLOTD_BIN, "--data-dir", data, *args)
        self.assertEqual(r.returncode, 2, (args, r.stderr))
        lines = r.stderr.splitlines()
        self.assertEqual(len(lines), 1, (args, r.stderr))
        self.assertTrue(lines[0].startswith("slotd: "), lines)
        for needle in list(needles) + ["(see slotd --help)"]:
            self.assertIn(needle, lines[0])
        self.assertEqual(r.stdout, "")
        self.assertFalse(data.exists(), "a refused command line created the data directory")

    def test_bad_flags_one_line_exit_2(self):
        cases = [(["--bogus"], ["'--bogus'"]),
                 (["--listen"], ["--listen", "missing value"]),
                 (["--slot-groups", "0"], ["--slot-groups"]),
                 (["--slot-groups", "many"], ["--slot-groups"]),
                 (["--log-level", "loud"], ["--log-level", '"loud"', "debug, info, warn or error"]),
                 (["--log-format", "yaml"], ["--log-format", '"yaml"', "text or json"])]
        for args, needles in cases:
            with self.subTest(args=args):
                self.assertOneLineRefusal(args, needles)

    def test_versions(self):
        describe = subprocess.run(["git", "-C", str(ROOT), "describe", "--tags", "--always"],
                                  capture_output=True, text=True)
        for binary, name in ((SLOTD_BIN, "slotd"), (SLOTCTL_BIN, "slotctl")):
            with self.subTest(binary=name):
                r = run(binary, "--version")
                self.assertEqual(r.returncode, 0, r.stderr)
                m = re.fullmatch(name + r" (\S+)\n", r.stdout)
                self.assertIsNotNone(m, r.stdout)
                if describe.returncode == 0:  # built from this checkout: its describe
                    self.assertNotEqual(m.group(1), "unknown")

    def serve(self, *args, env_extra=None):
        """Starts slotd on a free client port until that port accepts a connection (and, unless
        --log-level is given, until it logged "slotd serving"), then stops it; its output lines."""
        env = dict(os.environ)
        env.update(env_extra or {})
        log = self.work / ("slotd-%d.log" % len(list(self.work.iterdir())))
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        with open(log, "wb") as out:
            proc = subprocess.Popen([str(SLOTD_BIN), "--data-dir", str(self.work / "data"),
                                     "--listen", "127.0.0.1:%d" % self.port,
                                     "--peer-listen", "127.0.0.1:0", "--metrics-listen", ""]
                                    + list(args), stdin=subprocess.DEVNULL, stdout=out,
                                    stderr=subprocess.STDOUT, env=env)
        try:
            deadline = time.monotonic() + SERVING_WAIT_S
            while time.monotonic() < deadline:
                self.assertIsNone(proc.poll(), log.read_text())
                with socket.socket() as c:
                    if c.connect_ex(("127.0.0.1", self.port)) == 0 and (
                            "--log-level" in args or "slotd serving" in log.read_text()):
                        break
                time.sleep(0.05)
            else:
                self.fail("slotd did not serve: " + log.read_text())
        finally:
            proc.terminate()
            proc.wait(timeout=20)
        shutil.rmtree(self.work / "data", ignore_errors=True)
        return log.read_text().splitlines()

    def test_unknown_env_warns_with_nearest_and_text_lines(self):
        lines = self.serve(env_extra={"SLOTD_SLOT_GRUPS": "4"})
        warned = [ln for ln in lines if "SLOTD_SLOT_GRUPS" in ln]
        self.assertEqual(len(warned), 1, lines)
        self.assertIn("level=warn component=config", warned[0])
        self.assertIn("nearest=SLOTD_SLOT_GROUPS", warned[0])
        for line in lines:
            self.assertRegex(line, TEXT_LINE)
        self.assertTrue(any(" level=info " in ln for ln in lines))

    def test_json_lines(self):
        lines = self.serve("--log-format", "json", env_extra={"SLOTD_LISTN": "x"})
        objects = [json.loads(ln) for ln in lines]  # every line is one JSON object
        for o in objects:
            self.assertEqual(list(o)[:3], ["ts", "level", "component"], o)
            self.assertRegex(o["ts"], "^" + RFC3339_UTC + "$")
            self.assertIn(o["level"], ("debug", "info", "warn", "error"))
        warned = [o for o in objects if "SLOTD_LISTN" in o.get("msg", "")]
        self.assertEqual(len(warned), 1, objects)
        self.assertEqual((warned[0]["level"], warned[0]["nearest"]), ("warn", "SLOTD_LISTEN"))
        serving = [o for o in objects if o.get("msg") == "slotd serving"]
        self.assertEqual(len(serving), 1)
        self.assertEqual(serving[0]["listen"], "127.0.0.1:%d" % self.port)
        self.assertEqual(serving[0]["port"], str(self.port))

    def test_log_level_warn_drops_info(self):
        lines = self.serve("--log-level", "warn", env_extra={"SLOTD_LISTN": "x"})
        self.assertTrue(lines, "the warning is still logged")
        for line in lines:
            self.assertRegex(line, TEXT_LINE)
            self.assertNotIn(" level=info ", line)

    def test_slotctl_version_and_bad_flag(self):
        r = run(SLOTCTL_BIN, "--bogus-flag", "route")
        self.assertEqual(r.returncode, 2)
        self.assertIn("--bogus-flag", r.stderr.splitlines()[0])


if __name__ == "__main__":
    unittest.main()
