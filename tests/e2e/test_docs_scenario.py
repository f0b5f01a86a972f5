# test_docs_scenario.py - runs docs/api.md's IM scenario ("An IM scenario, end to end") block by
# block against one fresh node: the grpcurl block with bash (grpcurl where installed, else
# grpcurl_lite.py under that name), the slotctl block with bash and the built slotctl on PATH
# ($SLOTCTL_BIN, else next to the slotd binary), the Python block from slotd_client installed with pip into a
# temporary venv with system site packages, the Node block from the `npm pack` tarball installed
# into a temporary directory without SLOTD_API_DIR.
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest
from pathlib import Path

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402

DOCS = h.REPO / "docs" / "api.md"
SECTION = "## An IM scenario, end to end"
DOC_ADDRESS = "127.0.0.1:7700"
STEP_TIMEOUT_S = 120
EXPECTED = ["added 500", "conversation team-1 42", "disbanded 500"]


def scenario_blocks():
    """{language: code} of the scenario section's fenced blocks, and the expected output."""
    text = DOCS.read_text()
    start = text.index(SECTION)
    end = text.find("\n## ", start + len(SECTION))
    section = text[start:end if end >= 0 else len(text)]
    blocks = {}
    for m in re.finditer(r"```(\w*)\n(.*?)```", section, re.S):
        language = m.group(1) or "output"
        if language == "sh" and re.search(r"^slotctl ", m.group(2), re.M):
            language = "slotctl"  # the shell block made of slotctl commands
        blocks.setdefault(language, m.group(2))
    return blocks


def run(cmd, **kwargs):
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=STEP_TIMEOUT_S, **kwargs)
    if proc.returncode != 0:
        raise AssertionError("%s: exit %d\n%s\n%s" % (cmd, proc.returncode, proc.stdout,
                                                     proc.stderr))
    return proc.stdout


class DocsScenarioTest(h.SlotdTestCase):
    """One node for the class; the blocks run in the page's order (each disbands its channel)."""

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.tmp = Path(tempfile.mkdtemp(prefix="slotd-docs-"))
        cls.blocks = scenario_blocks()

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)
        super().tearDownClass()

    def code(self, language):
        return self.blocks[language].replace(DOC_ADDRESS, self.server.addr)

    def env(self):
        env = dict(os.environ)
        env.pop("SLOTD_API_DIR", None)
        env.pop("PYTHONPATH", None)
        return env

    def test_block_output_is_documented(self):
        self.assertEqual(self.blocks["output"].split("\n")[:3], EXPECTED)
        self.assertEqual(set(self.blocks), {"sh", "slotctl", "python", "js", "output"})

    def test_a_grpcurl(self):
        bin_dir = self.tmp / "bin"
        bin_dir.mkdir(exist_ok=True)
        if shutil.which("grpcurl") is None:  # the same calls, made with Python gRPC
            (bin_dir / "grpcurl").symlink_to(Path(__file__).resolve().parent / "grpcurl_lite.py")
        env = self.env()
        env["PATH"] = "%s:%s" % (bin_dir, env.get("PATH", ""))
        out = run(["bash", "-e", "-o", "pipefail", "-c", self.code("sh")], env=env)
        self.assertIn('"changed": 500', out)
        self.assertRegex(out, r'"channelId": "team-1",[^}]*"readSeq": "42"')
        self.assertRegex(out, r'"deleteChannel": \{\s*"removed": true,\s*"subscribers": 500')

    def test_a_slotctl(self):
        slotctl = Path(os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl")))
        env = self.env()
        env["PATH"] = "%s:%s" % (slotctl.resolve().parent, env.get("PATH", ""))
        out = run(["bash", "-e", "-o", "pipefail", "-c", self.code("slotctl")], env=env)
        self.assertIn("subscribers changed 500", out)
        self.assertRegex(out, r"\nalice\s+team-1\s+2\s+0\s+42\s+0\s+1700000000000\s+no\s+no\n")
        self.assertIn("removed channel team-1 (type 2): subscribers 500,", out)

    def test_b_python_package(self):
        venv = self.tmp / "venv"
        run(["/usr/bin/python3", "-m", "venv", "--system-site-packages", str(venv)])
        run([str(venv / "bin" / "pip"), "install", "--no-index", "--no-deps", "--quiet",
             str(h.REPO / "clients" / "python")], env=self.env())
        script = self.tmp / "scenario.py"
        script.write_text(self.code("python"))
        out = run([str(venv / "bin" / "python"), str(script)], env=self.env(), cwd=self.tmp)
        self.assertEqual(out.splitlines(), EXPECTED)
        where = run([str(venv / "bin" / "python"), "-c",
                     "import slotd_client; print(slotd_client.__file__)"], cwd=self.tmp)
        self.assertTrue(where.startswith(str(venv)), where)  # the installed copy, not the repo's

    def test_c_node_package(self):
        if shutil.which("npm") is None:
            self.skipTest("npm is not installed")
        pack = self.tmp / "pack"
        app = self.tmp / "app"
        pack.mkdir()
        app.mkdir()
        out = run(["npm", "pack", "--silent", "--pack-destination", str(pack)],
                  cwd=h.REPO / "clients" / "node")
        tarball = pack / out.strip().splitlines()[-1]
        (app / "package.json").write_text('{"name": "scenario", "version": "1.0.0"}\n')
        run(["npm", "install", "--prefer-offline", "--no-audit", "--no-fund", "--silent",
             str(tarball)], cwd=app)
        (app / "scenario.js").write_text(self.code("js"))
        out = run(["node", "scenario.js"], cwd=app, env=self.env())
        self.assertEqual(out.splitlines(), EXPECTED)
        self.assertTrue((app / "node_modules" / "slotd-client" / "proto" / "slotd" / "v1" /
                         "metadata.proto").exists())
        self.assertTrue((app / "node_modules" / "slotd-client" / "index.d.ts").exists())


if __name__ == "__main__":
    unittest.main()
