# test_mcp.py - `slotctl mcp` (the operations MCP server) driven over stdio with scripted JSON-RPC.
"""`slotctl mcp` against one real 3-node cluster started with --auth 1 (shared by the module):
each test runs the server as a child process, writes newline-delimited JSON-RPC 2.0 messages on
its stdin and reads one answer a line from its stdout. Users: root (built in), ``boss`` (role
``admins``: the admin permission) and ``viewer`` (role ``readers``: read on every key, not
admin).

- The protocol: initialize (protocol version, serverInfo), ping, a notification answered by
  nothing, a parse error, an invalid request, an unknown method, an unknown tool, arguments that
  are unknown or out of range (-32602 naming the field and the limit), a line over the 1 MiB bound.
- Read-only tools on live data: cluster_status (3 nodes), routes, node_health (3 SERVING),
  group_health (every group led, three replicas each, healthy), tasks, features, recent_errors (the PERMISSION_DENIED AuthList calls the
  viewer's gate checks caused, from the nodes' /metrics).
- The gate of the mutating tools, asked live at each call: with feature operations_mcp off they
  are not listed and transfer_leader is refused even for boss; with it on, viewer is still refused
  (not an admin), boss sees them and transfer_leader answers the task it created (which then
  finishes; abort_task on it is then refused by the controller, the task not running); a stale expected_revision is refused by the server; off again, boss is refused again.
  Every refusal leaves the cluster state's revision and tasks unchanged. SetFeature itself is
  refused for viewer (PERMISSION_DENIED) and for an unknown name (INVALID_ARGUMENT naming the
  known features) without changing anything.

slotctl is ``$SLOTCTL_BIN`` when set, else ``slotctl`` next to ``$SLOTD_BIN``."""

import json
import os
import subprocess
import sys
import tempfile
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd.v1 import admin_pb2, admin_pb2_grpc  # noqa: E402
from test_security import ROOT_PASSWORD, AuthCluster, bearer  # noqa: E402

SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))
MCP_TIMEOUT_S = 120  # one scripted session
TASK_WAIT_S = 30
MUTATING = {"transfer_leader", "move_replica", "drain_node", "abort_task"}
READ_ONLY = {"cluster_status", "controller_status", "routes", "node_health", "group_health",
             "tasks", "features", "recent_errors"}


def request(msg_id, method, params=None):
    m = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        m["params"] = params
    return json.dumps(m)


def call(msg_id, tool, arguments=None):
    params = {"name": tool}
    if arguments is not None:
        params["arguments"] = arguments
    return request(msg_id, "tools/call", params)


class McpTest(h.SlotdTestCase):

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls._class_workdir = tempfile.mkdtemp(prefix="slotd-e2e-")
        cls._class_servers = []
        work = cls._class_workdir
        pw = os.path.join(work, "root.password")
        with open(pw, "w") as f:
            f.write(ROOT_PASSWORD + "\n")
        metrics = h.free_ports(3)
        cls.metrics_urls = ",".join("http://127.0.0.1:%d/metrics" % p for p in metrics)
        cls.cluster = AuthCluster(work, name="mcp", size=3,
                                  extra_args=["--auth", "1", "--root-password-file", pw],
                                  node_args={n: ["--metrics-listen", "127.0.0.1:%d" % metrics[n - 1]]
                                             for n in (1, 2, 3)})
        cls._class_servers.extend(cls.cluster.servers.values())
        try:
            cls.cluster.start()
        except BaseException:
            for server in cls.cluster.servers.values():
                server.kill()
            raise
        cls.root = bearer(cls.cluster.root_token)
        for op, name, perm in [(admin_pb2.ROLE_OP_ADD, "admins", None),
                               (admin_pb2.ROLE_OP_GRANT, "admins", ("admin", "readwrite", "")),
                               (admin_pb2.ROLE_OP_ADD, "readers", None),
                               (admin_pb2.ROLE_OP_GRANT, "readers", ("key_prefix", "read", ""))]:
            req = admin_pb2.RoleWriteRequest(op=op, name=name)
            if perm:
                req.permission.type, req.permission.access, req.permission.value = perm
            cls.admin(1).RoleWrite(req, timeout=h.RPC_TIMEOUT_S, metadata=cls.root)
        cls.password_files = {}
        for user, role in (("boss", "admins"), ("viewer", "readers")):
            password = user + " password"
            path = os.path.join(work, user + ".password")
            with open(path, "w") as f:
                f.write(password + "\n")
            cls.password_files[user] = path
            for op, kw in ((admin_pb2.USER_OP_ADD, {"password": password}),
                           (admin_pb2.USER_OP_GRANT_ROLE, {"role": role})):
                cls.admin(1).UserWrite(admin_pb2.UserWriteRequest(op=op, name=user, **kw),
                                       timeout=h.RPC_TIMEOUT_S, metadata=cls.root)
        cls.password_files["root"] = pw

    @classmethod
    def admin(cls, node_id):
        return admin_pb2_grpc.AdminStub(cls.cluster.server(node_id).channel)

    def state(self):
        resp = self.admin(1).ClusterState(admin_pb2.ClusterStateRequest(),
                                          timeout=h.RPC_TIMEOUT_S, metadata=self.root)
        return json.loads(resp.state_json)

    def set_feature(self, enabled):
        self.admin(2).SetFeature(admin_pb2.SetFeatureRequest(name="operations_mcp",
                                                             enabled=enabled),
                                 timeout=h.RPC_TIMEOUT_S, metadata=self.root)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # node 1 (the one slotctl asks first) has applied it
            if self.state()["features"].get("operations_mcp", False) == enabled:
                return
            time.sleep(0.05)
        self.fail("node 1 never saw operations_mcp=%s" % enabled)

    def mcp(self, user, *lines):
        """Runs `slotctl mcp` as user (None: no credentials) with lines on stdin; answers by id
        (id null ones under None, in a list)."""
        cmd = [SLOTCTL_BIN, "--endpoints", ",".join(self.cluster.addr(n) for n in (1, 2, 3)),
               "--deadline-ms", "3000"]
        if user:
            cmd += ["--user", user, "--password-file", self.password_files[user]]
        cmd += ["mcp", "--metrics", self.metrics_urls]
        proc = subprocess.run(cmd, input="".join(line + "\n" for line in lines),
                              capture_output=True, text=True, timeout=MCP_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        answers = {None: []}
        for line in proc.stdout.splitlines():
            m = json.loads(line)
            self.assertEqual(m["jsonrpc"], "2.0", line)
            if m["id"] is None:
                answers[None].append(m)
            else:
                answers[m["id"]] = m
        return answers

    def tool_names(self, answer):
        return {t["name"] for t in answer["result"]["tools"]}

    def assertRefused(self, answer, needle):
        result = answer["result"]
        self.assertTrue(result["isError"], answer)
        self.assertTrue(result["structuredContent"]["refused"], answer)
        self.assertIn(needle, result["structuredContent"]["reason"])

    def assertUnchanged(self, before):
        """Nothing a refused call could have done happened: the same tasks, features, nodes and
        groups (the nodes' liveness reports, which move on their own, are not compared)."""
        after = self.state()
        for part in ("tasks", "features", "nodes", "groups", "hash_slot_table"):
            self.assertEqual(after[part], before[part], part)

    def test_protocol(self):
        big = json.dumps({"jsonrpc": "2.0", "id": 99, "method": "ping",
                          "params": {"pad": "x" * (1 << 20)}})
        a = self.mcp(None,
                     request(1, "initialize", {"protocolVersion": "2025-03-26", "capabilities": {},
                                               "clientInfo": {"name": "test", "version": "1"}}),
                     json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                     request(2, "ping"),
                     "this is not json",
                     json.dumps({"jsonrpc": "1.0", "id": 3, "method": "ping"}),
                     request(4, "resources/list"),
                     call(5, "warp_drive"),
                     call(6, "tasks", {"colour": "red"}),
                     call(7, "transfer_leader", {"group": 0, "to_node": 1}),
                     call(8, "transfer_leader", {"group": 1}),
                     call(9, "tasks", {"task_id": "seven"}),
                     big,
                     request(10, "ping"))
        init = a[1]["result"]
        self.assertEqual(init["protocolVersion"], "2025-03-26")
        self.assertEqual(init["serverInfo"]["name"], "slotctl-mcp")
        self.assertIn("tools", init["capabilities"])
        self.assertEqual(a[2]["result"], {})
        self.assertEqual(a[10]["result"], {})  # still answering after the long line
        self.assertNotIn(99, a)
        nulls = sorted(m["error"]["code"] for m in a[None])
        self.assertEqual(nulls, [-32700, -32600], a[None])  # the bad JSON, the long line
        self.assertEqual(a[3]["error"]["code"], -32600)
        self.assertEqual(a[4]["error"]["code"], -32601)
        self.assertIn("resources/list", a[4]["error"]["message"])
        self.assertEqual(a[5]["error"]["code"], -32602)
        self.assertIn("unknown tool warp_drive", a[5]["error"]["message"])
        self.assertIn("colour is not an argument", a[6]["error"]["message"])
        self.assertEqual(a[7]["error"]["data"], {"field": "group", "limit": 4096})
        self.assertIn("group must be an integer in 1..4096", a[7]["error"]["message"])
        self.assertEqual(a[8]["error"]["data"]["field"], "to_node")
        self.assertIn("to_node is required", a[8]["error"]["message"])
        self.assertEqual(a[9]["error"]["data"]["field"], "task_id")

    def test_read_only_tools(self):
        # viewer may list the tools (the read-only ones) but not read the cluster state
        v = self.mcp("viewer", request(1, "tools/list"), call(2, "cluster_status"))
        self.assertEqual(self.tool_names(v[1]), READ_ONLY)
        self.assertTrue(v[2]["result"]["isError"], v[2])
        self.assertIn("PERMISSION_DENIED", v[2]["result"]["content"][0]["text"])
        a = self.mcp("boss", request(1, "tools/list"), call(2, "cluster_status"),
                     call(3, "routes"), call(4, "node_health"), call(5, "tasks", {"active": True}),
                     call(6, "features"), call(7, "controller_status"), call(8, "group_health"))
        self.assertEqual(self.tool_names(a[1]), READ_ONLY)  # operations_mcp is off
        for i in (2, 3, 4, 5, 6, 7, 8):
            self.assertIn("structuredContent", a[i]["result"], a[i])
            self.assertEqual(json.loads(a[i]["result"]["content"][0]["text"]),
                             a[i]["result"]["structuredContent"])
        cluster = a[2]["result"]["structuredContent"]
        self.assertFalse(a[2]["result"]["isError"], a[2])
        self.assertEqual(sorted(n["id"] for n in cluster["state"]["nodes"]), [1, 2, 3])
        self.assertFalse(a[3]["result"]["isError"], a[3])
        health = a[4]["result"]["structuredContent"]
        self.assertEqual([n["status"] for n in health["nodes"]], ["SERVING"] * 3, health)
        self.assertFalse(a[5]["result"]["isError"], a[5])
        self.assertIn("features", a[6]["result"]["structuredContent"])
        groups = a[8]["result"]["structuredContent"]
        self.assertFalse(a[8]["result"]["isError"], a[8])
        self.assertEqual(sorted(g["group_id"] for g in groups["groups"]), self.cluster.group_ids)
        self.assertEqual((groups["healthy"], groups["groups_without_leader"]), (True, []))
        for g in groups["groups"]:
            self.assertIn(g["leader"], (1, 2, 3))
            self.assertEqual(sorted(rep["node_id"] for rep in g["replicas"]), [1, 2, 3])
            self.assertGreaterEqual(g["apply_lag"], 0)
        # viewer's gate check (tools/list) was refused by Admin.AuthList: the nodes count it.
        b = self.mcp(None, call(1, "recent_errors"))
        errors = b[1]["result"]["structuredContent"]
        self.assertFalse(b[1]["result"]["isError"], errors)
        self.assertEqual(len(errors["nodes"]), 3)
        denied = [s for n in errors["nodes"] for s in n["errors"]
                  if 'code="PERMISSION_DENIED"' in s["labels"] and "AuthList" in s["labels"]]
        self.assertTrue(denied, errors)
        self.assertTrue(all(s["metric"] == "slotd_grpc_requests_total" and s["value"] >= 1
                            for s in denied))

    def test_mutating_gate(self):
        before = self.state()
        self.assertFalse(before["features"].get("operations_mcp", False))
        # off: not listed, refused even for an admin; nothing changed
        a = self.mcp("boss", request(1, "tools/list"),
                     call(2, "transfer_leader", {"group": 1, "to_node": 2}),
                     call(3, "drain_node", {"node": 3}))
        self.assertEqual(self.tool_names(a[1]), READ_ONLY)
        self.assertRefused(a[2], "feature operations_mcp is off")
        self.assertRefused(a[3], "feature operations_mcp is off")
        self.assertUnchanged(before)
        # no credentials: refused before anything is asked
        a = self.mcp(None, call(1, "drain_node", {"node": 3}))
        self.assertRefused(a[1], "need an admin user")
        # SetFeature forged by a non-admin or with an unknown name changes nothing
        for name, md, code, needle in (
                ("operations_mcp", None, grpc.StatusCode.PERMISSION_DENIED, ""),
                ("operations_mcpx", self.root, grpc.StatusCode.INVALID_ARGUMENT,
                 "known: hash_slot_migration, operations_mcp")):
            if md is None:
                token = self.admin(1).Authenticate(admin_pb2.AuthenticateRequest(
                    user="viewer", password="viewer password"), timeout=h.RPC_TIMEOUT_S).token
                md = bearer(token)
            with self.assertRaises(grpc.RpcError) as ctx:
                self.admin(3).SetFeature(admin_pb2.SetFeatureRequest(name=name, enabled=True),
                                         timeout=h.RPC_TIMEOUT_S, metadata=md)
            self.assertEqual(ctx.exception.code(), code, ctx.exception.details())
            self.assertIn(needle, ctx.exception.details())
        self.assertUnchanged(before)
        # on: viewer is still refused (not an admin)
        self.set_feature(True)
        before = self.state()
        a = self.mcp("viewer", request(1, "tools/list"),
                     call(2, "transfer_leader", {"group": 1, "to_node": 2}))
        self.assertEqual(self.tool_names(a[1]), READ_ONLY)
        self.assertRefused(a[2], "user viewer is not an admin")
        self.assertUnchanged(before)
        # boss: listed, and transfer_leader answers the task it created
        route = self.cluster.route(via=1)
        group = route.groups[0]
        target = next(n for n in group.voters if n != group.leader)
        stale = before["revision"] - 1
        a = self.mcp("boss", request(1, "tools/list"),
                     call(2, "transfer_leader", {"group": group.group_id, "to_node": target,
                                                 "expected_revision": stale}),
                     call(3, "transfer_leader", {"group": group.group_id, "to_node": target}))
        self.assertEqual(self.tool_names(a[1]), READ_ONLY | MUTATING)
        stale_result = a[2]["result"]
        self.assertTrue(stale_result["isError"], stale_result)
        self.assertFalse(stale_result["structuredContent"].get("ok", False), stale_result)
        made = a[3]["result"]
        self.assertFalse(made["isError"], made)
        task_id = made["structuredContent"]["task_id"]
        self.assertGreater(task_id, 0)
        after = self.state()
        self.assertEqual([t["id"] for t in after["tasks"] if t["id"] not in
                          {t["id"] for t in before["tasks"]}], [task_id])
        deadline = time.monotonic() + TASK_WAIT_S
        status = None
        while time.monotonic() < deadline:
            b = self.mcp("boss", call(1, "tasks", {"task_id": task_id}))
            status = b[1]["result"]["structuredContent"]["task"]["status"]
            if status in ("done", "failed"):
                break
            time.sleep(0.3)
        self.assertEqual(status, "done")
        # abort_task reaches Admin.AbortTask, whose apply refuses a task that is not running
        done = self.state()
        a = self.mcp("boss", call(1, "abort_task", {"task_id": task_id}),
                     call(2, "abort_task", {}))
        refused = a[1]["result"]
        self.assertTrue(refused["isError"], refused)
        self.assertIn("task %d is done, only a running task can be aborted" % task_id,
                      refused["structuredContent"]["message"])
        self.assertEqual(a[2]["error"]["data"]["field"], "task_id")
        self.assertUnchanged(done)
        # off again: boss is refused again, nothing changed
        self.set_feature(False)
        before = self.state()
        a = self.mcp("boss", call(1, "move_replica", {"group": 1, "from_node": 1, "to_node": 2}))
        self.assertRefused(a[1], "feature operations_mcp is off")
        self.assertUnchanged(before)


if __name__ == "__main__":
    unittest.main()
