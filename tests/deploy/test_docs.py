# test_docs.py - README.md's API lists against api/*.proto, and the docs' slotctl mcp tool names against slotctl.
"""Docs drift, without a build for the proto part: README.md's Metadata table names exactly the
rpcs of `service Metadata`; its `slotd.v1.Admin` paragraph names only rpcs `service Admin` has
(a name the proto lost fails); the tool table of clients/slotctl/README.md names exactly the tools
`slotctl mcp` lists for an admin with the feature on (read from slotctl_mcp.c's tool table)."""

import os
import re
import shutil
import socket
import subprocess
import tempfile
import time
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
SLOTD_BIN = os.environ.get("SLOTD_BIN", os.path.join(REPO, "build", "bin", "slotd"))
SERVE_WAIT_S = 20


def read(*parts):
    with open(os.path.join(REPO, *parts)) as f:
        return f.read()


def service_rpcs(proto, service):
    text = read("api", "slotd", "v1", proto)
    body = re.search(r"^service %s \{(.*?)^\}" % service, text, re.M | re.S).group(1)
    return set(re.findall(r"^\s*rpc (\w+)\(", body, re.M))


class ReadmeApiTest(unittest.TestCase):

    def test_metadata_table_is_the_service(self):
        section = read("README.md").split("## The API", 1)[1].split("\n## ", 1)[0]
        table = set(re.findall(r"^\| `(\w+)` \|", section, re.M))
        self.assertEqual(table, service_rpcs("metadata.proto", "Metadata"))

    def test_admin_paragraph_names_real_methods(self):
        section = read("README.md").split("## The API", 1)[1].split("\n## ", 1)[0]
        para = section.split("`slotd.v1.Admin`", 1)[1].split("\n\n", 1)[0]
        named = set(re.findall(r"`([A-Z]\w+)`", para))
        rpcs = service_rpcs("admin.proto", "Admin")
        self.assertGreaterEqual(len(named), 15)
        self.assertEqual(named - rpcs, set(), "README.md names Admin methods the proto lacks")

    def test_mcp_tool_table_is_slotctls(self):
        source = read("clients", "slotctl", "slotctl_mcp.c")
        table = source.split("static const struct mcp_tool mcp_tools[] = {", 1)[1].split("};")[0]
        # rows are {"name", ...} or MCP_READ_TOOL("name", ...) (the read-only no-argument tools)
        tools = set(re.findall(r'^    (?:\{|MCP_READ_TOOL\(\s*)"(\w+)",', table, re.M))
        self.assertIn("transfer_leader", tools)
        doc = read("clients", "slotctl", "README.md").split("## `slotctl mcp`", 1)[1]
        documented = set(re.findall(r"^\| `(\w+)` \|", doc, re.M))
        self.assertEqual(documented, tools)


@unittest.skipUnless(os.access(SLOTD_BIN, os.X_OK), "no slotd build")
class ReadmeFirstWriteTest(unittest.TestCase):
    """README.md's "First write and read" block, run as printed against a fresh `make run`
    node (its defaults: 8 slot groups): the output is the block's comment lines, index and
    version included."""

    def test_example_output_matches(self):
        section = read("README.md").split("## First write and read", 1)[1].split("\n## ", 1)[0]
        block = section.split("```sh\n", 1)[1].split("```", 1)[0].splitlines()
        command = [l for l in block if l.startswith("/usr/bin/python3 tests/e2e/example_client.py")]
        want = [l[2:] for l in block if l.startswith("# ")]
        self.assertEqual(len(command), 1, block)
        self.assertEqual(len(want), 2, block)
        work = tempfile.mkdtemp(prefix="slotd-readme-")
        self.addCleanup(shutil.rmtree, work, ignore_errors=True)
        ports = []
        for _ in range(2):  # a real peer port: bootstrap records it as the node's address
            with socket.socket() as s:
                s.bind(("127.0.0.1", 0))
                ports.append(s.getsockname()[1])
        port = ports[0]
        proc = subprocess.Popen([SLOTD_BIN, "--data-dir", os.path.join(work, "data"),
                                 "--listen", "127.0.0.1:%d" % port,
                                 "--peer-listen", "127.0.0.1:%d" % ports[1],
                                 "--metrics-listen", ""], stdin=subprocess.DEVNULL,
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            args = command[0].split()[2:]
            args[args.index("--addr") + 1] = "127.0.0.1:%d" % port
            deadline = time.monotonic() + SERVE_WAIT_S
            while True:  # the first put waits for the groups' leaders: retry until it answers
                r = subprocess.run(["/usr/bin/python3", os.path.join(REPO, "tests", "e2e",
                                                                     "example_client.py")] + args,
                                   capture_output=True, text=True, timeout=60,
                                   env=dict(os.environ, GRPC_ENABLE_FORK_SUPPORT="false"))
                if r.returncode == 0 or time.monotonic() > deadline:
                    break
                time.sleep(0.2)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.splitlines(), want)
        finally:
            proc.terminate()
            proc.wait(timeout=20)


if __name__ == "__main__":
    unittest.main()
