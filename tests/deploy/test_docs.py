# test_docs.py - README.md's API lists against api/*.proto, and the docs' slotctl mcp tool names against slotctl.
"""Docs drift, without a build for the proto part: README.md's Metadata table names exactly the
rpcs of `service Metadata`; its `slotd.v1.Admin` paragraph names only rpcs `service Admin` has
(a name the proto lost fails); the tool table of clients/slotctl/README.md names exactly the tools
`slotctl mcp` lists for an admin with the feature on (read from slotctl_mcp.c's tool table)."""

import os
import re
import unittest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


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
        tools = set(re.findall(r'^    \{"(\w+)",', table, re.M))
        self.assertIn("transfer_leader", tools)
        doc = read("clients", "slotctl", "README.md").split("## `slotctl mcp`", 1)[1]
        documented = set(re.findall(r"^\| `(\w+)` \|", doc, re.M))
        self.assertEqual(documented, tools)


if __name__ == "__main__":
    unittest.main()
