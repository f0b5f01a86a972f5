# test_slotctl.py - slotctl and libslotd against a real single node and a 3-node cluster.
"""slotctl end to end: put/get/delete/cas round trips (human and --json output), exit codes,
route/cluster/health views, the bench alias, get --prefix paging, txn from stdin, watch with
resume tokens (and across a kill -9 of the node it streams from), leases (grant, put --lease,
keepalive, revoke, each routed straight to its group's leader; a short lease expiring), and a
long-lived libslotd client (cclient_write_loop) that keeps writing while the leader of its key's
group is SIGTERMed.

slotctl is ``$SLOTCTL_BIN`` when set, else ``slotctl`` next to the slotd binary the harness uses;
cclient_write_loop likewise (``$CCLIENT_WRITE_LOOP_BIN``)."""

import json
import os
import re
import subprocess
import sys
import time
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402

BIN_DIR = h.SLOTD_BIN.parent
SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(BIN_DIR / "slotctl"))
WRITE_LOOP_BIN = os.environ.get("CCLIENT_WRITE_LOOP_BIN", str(BIN_DIR / "cclient_write_loop"))
RUN_TIMEOUT_S = 30.0
LOOP_WRITES = 60
LOOP_INTERVAL_MS = 40
LOOP_DEADLINE_MS = 2000
LOOP_MAX_RETRIES = 10
LOOP_TIMEOUT_S = 120.0
STOP_AFTER_WRITES = 10
# Lease expiry: a short TTL, and how long past it the key may linger (the leader's expiry
# check and the replicated delete), polled every LEASE_POLL_S.
LEASE_TTL_S = 2
LEASE_EXPIRY_SLACK_S = 6.0
LEASE_POLL_S = 0.2


def slotctl(endpoints, *args, json_out=False, timeout=RUN_TIMEOUT_S):
    """Runs slotctl; returns (exit code, stdout, stderr)."""
    cmd = [SLOTCTL_BIN, "--endpoints", endpoints] + (["--json"] if json_out else []) + list(args)
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    return proc.returncode, proc.stdout, proc.stderr


def wait_key_gone(endpoints, key, timeout):
    """Polls slotctl get until key is absent (exit 1); returns the seconds it took, or None."""
    start = time.monotonic()
    while time.monotonic() - start < timeout:
        if slotctl(endpoints, "get", key)[0] == 1:
            return time.monotonic() - start
        time.sleep(LEASE_POLL_S)
    return None


def slotctl_json(endpoints, *args):
    code, out, err = slotctl(endpoints, *args, json_out=True)
    lines = out.strip().splitlines()
    if len(lines) != 1:
        raise AssertionError("want one JSON line, got %r (stderr %r)" % (out, err))
    return code, json.loads(lines[0]), err


class SlotctlChecks:
    """Checks shared by the single-node and cluster classes (self.endpoints set by setUpClass)."""

    def key(self, prefix):
        return h.unique_key("slotctl/" + prefix).decode()

    def test_put_get_delete_round_trip(self):
        key = self.key("rt")
        code, out, err = slotctl(self.endpoints, "put", key, "hello world")
        self.assertEqual(code, 0, err)
        self.assertIn("OK  version", out)
        code, out, err = slotctl(self.endpoints, "get", key)
        self.assertEqual(code, 0, err)
        self.assertIn("VALUE    hello world", out)
        code, j, err = slotctl_json(self.endpoints, "get", key)
        self.assertEqual(code, 0, err)
        self.assertTrue(j["found"])
        self.assertEqual(j["value"], "hello world")
        self.assertEqual(j["group_id"], self.table[h.hash_slot(key.encode())])
        version = j["version"]
        for consistency in ("leader-local", "local"):
            code, j2, err = slotctl_json(self.endpoints, "get", key, "--consistency", consistency)
            self.assertEqual((code, j2["value"], j2["version"]), (0, "hello world", version), err)
        code, j, err = slotctl_json(self.endpoints, "delete", key)
        self.assertEqual(code, 0, err)
        self.assertTrue(j["deleted"])
        self.assertEqual(j["prev_version"], version)
        self.assertEqual(len(j["request_id"]), 32)  # 16 random bytes, hex
        code, j, err = slotctl_json(self.endpoints, "get", key)
        self.assertEqual(code, 1)
        self.assertFalse(j["found"])

    def test_json_put_fields(self):
        key = self.key("json")
        code, j, err = slotctl_json(self.endpoints, "put", key, "v1")
        self.assertEqual(code, 0, err)
        self.assertEqual(j["command"], "put")
        self.assertTrue(j["ok"])
        self.assertEqual(j["key"], key)
        self.assertEqual(j["prev_version"], 0)
        self.assertEqual(j["version"], j["applied_index"])
        self.assertFalse(j["deduplicated"])
        # sent straight to the leader: one attempt, no forwarding
        self.assertEqual(j["attempts"], 1)

    def test_cas_round_trip_and_mismatch_exit_3(self):
        key = self.key("cas")
        code, j, err = slotctl_json(self.endpoints, "cas", key, "0", "first")
        self.assertEqual(code, 0, err)
        self.assertTrue(j["succeeded"])
        version = j["version"]
        code, j, err = slotctl_json(self.endpoints, "cas", key, str(version + 1000), "nope")
        self.assertEqual(code, 3, err)
        self.assertFalse(j["succeeded"])
        self.assertEqual(j["version"], version)
        self.assertEqual(j["current_value"], "first")
        code, out, err = slotctl(self.endpoints, "cas", key, "0", "again")
        self.assertEqual(code, 3)
        self.assertIn("version mismatch", err)
        code, j, err = slotctl_json(self.endpoints, "cas", key, str(version), "second")
        self.assertEqual(code, 0, err)
        code, j, err = slotctl_json(self.endpoints, "cas", "--delete", key, str(j["version"]))
        self.assertEqual(code, 0, err)
        self.assertEqual(slotctl(self.endpoints, "get", key)[0], 1)

    def test_missing_key_exit_1(self):
        code, out, err = slotctl(self.endpoints, "get", self.key("missing"))
        self.assertEqual(code, 1)
        self.assertIn("not found", err)
        self.assertEqual(out, "")

    def test_empty_key_exit_5_names_field(self):
        code, out, err = slotctl(self.endpoints, "put", "", "v")
        self.assertEqual(code, 5, err)
        self.assertIn("put.key", err)
        code, j, err = slotctl_json(self.endpoints, "get", "")
        self.assertEqual(code, 5, err)
        self.assertFalse(j["ok"])
        self.assertEqual(j["status"]["grpc_status"], "INVALID_ARGUMENT")
        self.assertEqual(j["status"]["detail"]["code"], "INVALID_FIELD")
        self.assertEqual(j["status"]["detail"]["field"], "get.key")
        self.assertIn("get.key", j["message"])

    def test_usage_exit_2(self):
        for args in (["frob"], ["put", "k"], ["cas", "k", "x", "v"], ["get", "k", "--consistency",
                                                                      "eventual"], []):
            code, out, err = slotctl(self.endpoints, *args)
            self.assertEqual(code, 2, "%s: %s" % (args, err))
            self.assertIn("usage: slotctl", err)
        proc = subprocess.run([SLOTCTL_BIN, "--help"], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        code, out = proc.returncode, proc.stdout
        self.assertEqual(code, 0)
        self.assertIn("exit codes:", out)
        self.assertIn("  3  failed precondition", out)

    def test_route_cluster_health(self):
        code, j, err = slotctl_json(self.endpoints, "route")
        self.assertEqual(code, 0, err)
        self.assertEqual(j["hash_slot_table"], self.table)
        self.assertEqual(sorted(g["group_id"] for g in j["groups"]), self.group_ids)
        self.assertEqual(sum(g["hash_slots"] for g in j["groups"]), h.HASH_SLOTS)
        self.assertEqual(len(j["nodes"]), self.node_count)
        code, out, err = slotctl(self.endpoints, "route")
        self.assertEqual(code, 0, err)
        self.assertIn("HASH SLOTS", out)
        self.assertIn("0-", out)
        code, out, err = slotctl(self.endpoints, "cluster")
        self.assertEqual(code, 0, err)
        for section in ("NODES", "GROUPS", "HASH SLOTS", "TASKS"):
            self.assertIn(section, out)
        code, j, err = slotctl_json(self.endpoints, "cluster")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(j["state"]["nodes"]), self.node_count)
        peers = {g["id"]: g["desired_peers"] for g in j["state"]["groups"]}
        self.assertEqual(sorted(peers), self.group_ids)
        self.assertTrue(all(o["leader"] in peers[o["group_id"]] for o in j["observed_leaders"]))
        code, j, err = slotctl_json(self.endpoints, "health")
        self.assertEqual(code, 0, err)
        self.assertEqual(len(j["nodes"]), self.node_count)
        self.assertTrue(all(n["status"] == "SERVING" for n in j["nodes"]))

    def test_bench_alias_runs_slotbench(self):
        proc = subprocess.run([SLOTCTL_BIN, "bench", "--help"], capture_output=True, text=True,
                              timeout=RUN_TIMEOUT_S)
        self.assertEqual(proc.returncode, 0, proc.stderr)
        self.assertIn("usage: slotbench", proc.stdout + proc.stderr)


    # ---- get --prefix, txn, watch ----

    def test_get_prefix_pages_every_group(self):
        """get --prefix returns every key under the prefix once, across all groups (one page
        merged from all of them); --limit stops early with more true; --keys-only and
        --count-only print what they say."""
        prefix = self.key("range") + "/"
        keys = set()
        for g in self.group_ids:
            for i in range(3):
                k = h.key_in_group(self.table, g, prefix + "g%d" % g).decode()
                code, out, err = slotctl(self.endpoints, "put", k, "v-" + k[-4:])
                self.assertEqual(code, 0, err)
                keys.add(k)
        code, j, err = slotctl_json(self.endpoints, "get", "--prefix", prefix)
        self.assertEqual(code, 0, err)
        got = [e["key"] for e in j["entries"]]
        self.assertEqual(sorted(got), sorted(keys))  # every key once
        self.assertEqual(j["count"], len(keys))
        self.assertFalse(j["more"])
        self.assertEqual(j["pages"], 1)  # one page of 1000, merged from every group
        self.assertTrue(all(e["value"] == "v-" + e["key"][-4:] for e in j["entries"]))
        code, j, err = slotctl_json(self.endpoints, "get", "--prefix", prefix, "--limit", "5")
        self.assertEqual(code, 0, err)
        self.assertEqual((j["count"], len(j["entries"]), j["more"]), (5, 5, True))
        code, out, err = slotctl(self.endpoints, "get", "--prefix", prefix, "--count-only")
        self.assertEqual((code, out.strip()), (0, str(len(keys))), err)
        code, out, err = slotctl(self.endpoints, "get", "--prefix", prefix, "--keys-only")
        self.assertEqual(code, 0, err)
        self.assertEqual(sorted(out.split()), sorted(keys))
        code, out, err = slotctl(self.endpoints, "get", "k", "--prefix", prefix)
        self.assertEqual(code, 2, err)
        self.assertIn("give KEY or --prefix P", err)

    def test_txn_success_failure_and_cross_group(self):
        """txn from stdin: the success branch when the compares hold (exit 0), the failure
        branch otherwise (exit 3, nothing of the success branch written); keys in two groups
        are refused (exit 5, the message names both groups) and change nothing."""
        g = self.group_ids[0]
        k1 = h.key_in_group(self.table, g, self.key("txn1")).decode()
        k2 = h.key_in_group(self.table, g, self.key("txn2")).decode()
        self.assertEqual(slotctl(self.endpoints, "put", k1, "v1")[0], 0)
        text = 'value("%s") = "v1"\nabsent("%s")\n\nput %s "two words"\nget %s\n\nget %s\n' % (
            k1, k2, k2, k1, k1)

        def txn(body, json_out=False):
            cmd = [SLOTCTL_BIN, "--endpoints", self.endpoints] + (["--json"] if json_out else []) + ["txn"]
            proc = subprocess.run(cmd, input=body, capture_output=True, text=True,
                                  timeout=RUN_TIMEOUT_S)
            return proc.returncode, proc.stdout, proc.stderr

        code, out, err = txn(text)
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines()[0], "SUCCESS")
        self.assertIn("version", out.splitlines()[2])
        self.assertTrue(out.splitlines()[2].endswith(" v1"), out)
        code, j, err = slotctl_json(self.endpoints, "get", k2)
        self.assertEqual((code, j["value"]), (0, "two words"), err)
        version = j["version"]
        # Now k2 exists: the failure branch runs, the success branch's put is not applied.
        code, out, err = txn(text, json_out=True)
        self.assertEqual(code, 3, err)
        r = json.loads(out)
        self.assertFalse(r["succeeded"])
        self.assertEqual([(x["op"], x["value"]) for x in r["results"]], [("get", "v1")])
        code, j, err = slotctl_json(self.endpoints, "get", k2)
        self.assertEqual((j["value"], j["version"]), ("two words", version))
        if len(self.group_ids) > 1:
            other = h.key_in_group(self.table, self.group_ids[1], self.key("txn3")).decode()
            code, out, err = txn("\nput %s a\nput %s b\n" % (k1, other))
            self.assertEqual(code, 5, err)
            self.assertIn("different slot groups", err)
            self.assertEqual(slotctl(self.endpoints, "get", other)[0], 1)  # not written
            code, j, err = slotctl_json(self.endpoints, "get", k1)
            self.assertEqual(j["value"], "v1")
        code, out, err = txn('value("%s") ~ "x"\n' % k1)
        self.assertEqual(code, 2, err)
        self.assertIn("line 1: compare operator", err)

    def test_watch_count_then_resume_without_gap_or_duplicate(self):
        """A watch's RESUME token continues exactly after what it printed: the changes made
        between two watches are all seen by the second (puts and a delete, in order), none
        twice, and a third watch from the second's token sees nothing."""
        prefix = self.key("watch") + "/"
        code, out, err = slotctl(self.endpoints, "watch", "--prefix", prefix, "--timeout", "1")
        self.assertEqual(code, 0, err)
        token = out.split()[-1]
        self.assertEqual(out.split()[0], "RESUME")
        keys = [h.key_in_group(self.table, g, prefix).decode() for g in self.group_ids]
        for k in keys:
            self.assertEqual(slotctl(self.endpoints, "put", k, "a")[0], 0)
        self.assertEqual(slotctl(self.endpoints, "put", keys[0], "b")[0], 0)
        self.assertEqual(slotctl(self.endpoints, "delete", keys[0])[0], 0)
        want = len(keys) + 2
        code, out, err = slotctl(self.endpoints, "--json", "watch", "--prefix", prefix,
                                 "--resume", token, "--count", str(want), "--timeout", "20")
        self.assertEqual(code, 0, err)
        lines = [json.loads(x) for x in out.splitlines()]
        events, result = lines[:-1], lines[-1]
        self.assertEqual(result["events"], want)
        self.assertEqual(sorted((e["key"], e["type"], e.get("value")) for e in events),
                         sorted([(k, "put", "a") for k in keys] +
                                [(keys[0], "put", "b"), (keys[0], "delete", None)]))
        first = [(e["type"], e.get("value")) for e in events if e["key"] == keys[0]]
        self.assertEqual(first, [("put", "a"), ("put", "b"), ("delete", None)])  # key order
        code, out, err = slotctl(self.endpoints, "watch", "--prefix", prefix, "--resume",
                                 result["resume"], "--timeout", "1")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), ["RESUME " + result["resume"]])
        code, out, err = slotctl(self.endpoints, "watch", "--prefix", prefix, "--resume", "1:x")
        self.assertEqual(code, 2, err)
        self.assertIn("--resume", err)


    def test_watch_subscribers(self):
        """watch --subscribers prints the channel's subscriber changes only (an add per uid, a
        removal), resuming from a token taken before the changes."""
        cid = self.key("wsub")[-14:]
        code, out, err = slotctl(self.endpoints, "watch", "--subscribers", cid, "--timeout", "1")
        self.assertEqual(code, 0, err)
        token = out.split()[-1]
        self.assertEqual(len(token.split(",")), 1)  # one group: the one of the channel id
        stub = (self.server.stub if self.node_count == 1 else self.cluster.stub(1))
        stub.Propose(h.pb.ProposeRequest(create_channel=h.pb.CreateChannelCommand(
            channel_id=cid, channel_type=2)), timeout=5)
        stub.Propose(h.pb.ProposeRequest(add_subscribers=h.pb.SubscribersCommand(
            channel_id=cid, channel_type=2, uids=["ann", "bo"])), timeout=5)
        stub.Propose(h.pb.ProposeRequest(add_allowlist=h.pb.ChannelListCommand(
            channel_id=cid, channel_type=2, uids=["cy"])), timeout=5)
        stub.Propose(h.pb.ProposeRequest(remove_subscribers=h.pb.SubscribersCommand(
            channel_id=cid, channel_type=2, expected_version=1, uids=["ann"])), timeout=5)
        code, out, err = slotctl(self.endpoints, "watch", "--subscribers", cid, "--resume", token,
                                 "--count", "3", "--timeout", "20")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines()[:3], ["PUT channel_member subscribers ann",
                                                "PUT channel_member subscribers bo",
                                                "DELETE channel_member subscribers ann"])
        code, out, err = slotctl(self.endpoints, "watch", "--subscribers", cid, "--prefix", "x")
        self.assertEqual(code, 2, err)


    # ---- leases ----

    def test_lease_grant_put_keepalive_revoke(self):
        """lease grant prints the id in decimal and hex (its hash slot is the key's); put
        --lease attaches keys of that hash slot (one of another hash slot is refused, exit 3,
        nothing written); keepalive counts them; revoke deletes them; afterwards keepalive and
        revoke exit 1 (no such lease)."""
        key = self.key("lease")
        code, out, err = slotctl(self.endpoints, "lease", "grant", key, "60")
        self.assertEqual(code, 0, err)
        m = re.fullmatch(r"lease (\d+) \(0x([0-9a-f]+)\) ttl 60s  hash slot (\d+)  group (\d+)\n",
                         out)
        self.assertIsNotNone(m, out)
        lease = int(m.group(1))
        self.assertEqual(int(m.group(2), 16), lease)
        self.assertEqual(lease >> 48, h.hash_slot(key.encode()))
        self.assertEqual(int(m.group(3)), lease >> 48)
        self.assertEqual(int(m.group(4)), self.table[lease >> 48])
        self.assertEqual(slotctl(self.endpoints, "get", key)[0], 1)  # the grant writes no key
        code, out, err = slotctl(self.endpoints, "put", key, "v", "--lease", hex(lease))
        self.assertEqual(code, 0, err)
        self.assertIn("lease %d (%#x)" % (lease, lease), out)
        sibling = key + "/2"
        while h.hash_slot(sibling.encode()) != lease >> 48:
            sibling += "x"
        code, j, err = slotctl_json(self.endpoints, "put", sibling, "w", "--lease", str(lease))
        self.assertEqual((code, j["lease"]), (0, lease), err)
        other = key + "/o"
        while h.hash_slot(other.encode()) == lease >> 48:
            other += "x"
        code, out, err = slotctl(self.endpoints, "put", other, "no", "--lease", str(lease))
        self.assertEqual(code, 3, err)
        self.assertIn("FAILED_PRECONDITION", err)
        self.assertEqual(len(err.strip().splitlines()), 1, err)
        self.assertEqual(slotctl(self.endpoints, "get", other)[0], 1)  # nothing written
        code, out, err = slotctl(self.endpoints, "lease", "keepalive", str(lease))
        self.assertEqual(code, 0, err)
        self.assertEqual(out, "lease %d (%#x) ttl 60s  keys 2\n" % (lease, lease))
        code, j, err = slotctl_json(self.endpoints, "lease", "revoke", hex(lease))
        self.assertEqual(code, 0, err)
        self.assertEqual((j["command"], j["id"], j["id_hex"], j["keys_deleted"]),
                         ("lease revoke", lease, hex(lease), 2))
        for k in (key, sibling):
            self.assertEqual(slotctl(self.endpoints, "get", k)[0], 1, k)
        for sub in ("keepalive", "revoke"):
            code, out, err = slotctl(self.endpoints, "lease", sub, str(lease))
            self.assertEqual(code, 1, "%s: %s" % (sub, err))
            self.assertIn("NOT_FOUND", err)
        code, out, err = slotctl(self.endpoints, "lease", "revoke", hex(1 << 48))
        self.assertEqual(code, 5, err)  # sequence 0: refused before any call
        self.assertIn("lease_revoke.id", err)
        code, out, err = slotctl(self.endpoints, "lease", "grant", key, "0")
        self.assertEqual(code, 2, err)
        self.assertIn("TTL '0'", err)


class TestSlotctlSingleNode(SlotctlChecks, h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.endpoints = cls.server.addr
        route = cls.server.route()
        cls.table = list(route.hash_slot_table)
        cls.group_ids = sorted(g.group_id for g in route.groups)
        cls.node_count = 1

    def test_unreachable_exit_4(self):
        port = h.free_port()
        code, out, err = slotctl("127.0.0.1:%d" % port, "--deadline-ms", "500", "--max-retries",
                                 "1", "get", "k")
        self.assertEqual(code, 4, err)
        self.assertIn("UNAVAILABLE", err)

    def test_endpoint_failover(self):
        """A dead first endpoint is skipped: the route comes from the next one."""
        dead = "127.0.0.1:%d" % h.free_port()
        key = self.key("failover")
        code, j, err = slotctl_json(dead + "," + self.endpoints, "put", key, "x")
        self.assertEqual(code, 0, err)
        code, j, err = slotctl_json(dead + "," + self.endpoints, "route")
        self.assertEqual(code, 0, err)
        self.assertEqual(j["source"], self.endpoints)


class TestSlotctlTyped(h.SlotdTestCase):
    """The typed metadata commands (user, device, channel, member, conversation, cmd, runtime,
    plugin, event) against one node shared by the class; every id is fresh per test."""

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()
        cls.endpoints = cls.server.addr
        deadline = time.monotonic() + 10  # every group led, so calls go straight to leaders
        while any(g.leader == 0 for g in cls.server.route().groups):
            if time.monotonic() > deadline:
                raise AssertionError("groups without a leader: %s" % cls.server.route())
            time.sleep(0.05)

    def uid(self, prefix):
        return h.unique_key(prefix).decode().replace("/", "-")

    def ok(self, *args):
        code, out, err = slotctl(self.endpoints, *args)
        self.assertEqual(code, 0, "%s: %s" % (args, err))
        return out

    def ok_json(self, *args):
        code, j, err = slotctl_json(self.endpoints, *args)
        self.assertEqual(code, 0, "%s: %s" % (args, err))
        self.assertTrue(j["ok"])
        return j

    def test_user_and_device(self):
        uid = self.uid("u")
        out = self.ok("user", "create", uid, "--token", "t1", "--device-flag", "1")
        self.assertIn("OK  changed yes", out)
        self.assertRegex(out, r"UID\s+TOKEN\s+DEVICE_FLAG\s+DEVICE_LEVEL\n%s\s+t1\s+1\s+0" % uid)
        self.ok("user", "update", uid, "--token", "t2", "--system", "on")
        j = self.ok_json("user", "get", uid)
        self.assertEqual((j["found"], j["user"]["token"]), (True, "t2"))
        self.assertIn(uid, self.ok_json("user", "list", "--meta")["entries"])
        self.ok("device", "put", uid, "1", "--token", "apns", "--device-level", "2")
        self.ok("device", "put", uid, "2")
        j = self.ok_json("device", "list", uid)
        self.assertEqual([(d["device_flag"], d["token"]) for d in j["entries"]],
                         [(1, "apns"), (2, "")])
        j = self.ok_json("device", "delete", uid, "2")
        self.assertEqual((j["changed"], j["device"]["device_flag"]), (True, 2))
        out = self.ok("user", "delete", uid, "--meta")
        self.assertIn("removed user %s: devices 1, memberships 0, cmd bindings 0, plugin "
                      "binding no, system uid yes  (1 command)" % uid, out)
        code, out, err = slotctl(self.endpoints, "user", "get", uid)
        self.assertEqual((code, out), (1, ""), err)
        self.assertIn("not found", err)
        self.assertNotIn(uid, self.ok_json("user", "list", "--meta")["entries"])

    def test_channel_and_members(self):
        ch = self.uid("ch")
        j = self.ok_json("channel", "create", ch, "--type", "2", "--flags", "large")
        self.assertEqual((j["channel"]["channel_type"], j["channel"]["flags"]), (2, "large"))
        self.ok("channel", "create", ch, "--type", "3")  # same id, another type
        self.assertIn("ban,send_ban", self.ok("channel", "flags", ch, "--type", "2", "--flags",
                                              "ban,send_ban"))
        j = self.ok_json("channel", "list", "--prefix", ch)
        self.assertEqual([(c["channel_id"], c["channel_type"]) for c in j["entries"]],
                         [(ch, 2), (ch, 3)])
        uids = ["m%03d" % i for i in range(300)]
        j = self.ok_json("member", "add", ch, "--type", "2", *uids)
        self.assertEqual((j["members_changed"], j["subscriber_count"]), (300, 300))
        self.ok("member", "add", ch, "--type", "2", "--list", "deny", "spammer")
        self.ok("member", "remove", ch, "--type", "2", "m000")
        j = self.ok_json("member", "list", ch, "--type", "2", "--limit", "250")
        self.assertEqual((j["count"], j["more"], j["entries"][0]), (250, True, "m001"))
        self.assertEqual(self.ok_json("member", "list", ch, "--type", "2")["count"], 299)
        self.assertIn("is in the denylist",
                      self.ok("member", "check", ch, "--type", "2", "spammer", "--list", "deny"))
        code, out, err = slotctl(self.endpoints, "member", "check", ch, "--type", "3", "m001")
        self.assertEqual(code, 1, err)  # the type-3 channel has no subscribers
        j = self.ok_json("channel", "delete", ch, "--type", "2")
        self.assertEqual((j["removed"], j["subscribers"], j["denylist"], j["commands"]),
                         (True, 299, 1, 1))
        code, _, err = slotctl(self.endpoints, "channel", "get", ch, "--type", "2")
        self.assertEqual(code, 1, err)
        self.assertIn(ch, self.ok("channel", "get", ch, "--type", "3"))

    def test_conversation_and_cmd(self):
        uid, ch = self.uid("u"), self.uid("ch")
        self.ok("channel", "create", ch, "--type", "2")
        self.ok("conversation", "join", uid, ch, "--type", "2", "--at-ms", "1000")
        self.ok("conversation", "read", uid, ch, "--type", "2", "--seq", "42")
        self.ok("conversation", "hide", uid, ch, "--type", "2", "--seq", "40")
        j = self.ok_json("conversation", "activate", uid, ch, "--type", "2", "--at-ms", "2000")
        self.assertEqual((j["membership"]["read_seq"], j["membership"]["activated_at_ms"],
                          j["membership"]["hidden"]), (42, 2000, False))
        out = self.ok("conversation", "list", uid)
        self.assertRegex(out, r"%s\s+%s\s+2\s+0\s+42\s+40\s+2000\s+no\s+no" % (uid, ch))
        self.ok("cmd", "bind", uid, ch, "--type", "2", "--seq", "5")
        j = self.ok_json("cmd", "ack", uid, ch, "--type", "2", "--seq", "9")
        self.assertEqual((j["cmd_binding"]["start_seq"], j["cmd_binding"]["ack_seq"]), (5, 9))
        self.assertTrue(self.ok_json("cmd", "unbind", uid, ch, "--type", "2")["cmd_binding"]
                        ["unbound"])
        j = self.ok_json("conversation", "leave", uid, ch, "--type", "2")
        self.assertTrue(j["membership"]["left"])

    def test_runtime_plugin_event(self):
        uid, ch = self.uid("u"), self.uid("ch")
        self.ok("channel", "create", ch, "--type", "2")
        meta = ["--leader", "1", "--replicas", "1", "--isr", "1", "--channel-epoch", "1",
                "--leader-epoch", "1", "--write-fence", "1", "--min-isr", "1", "--status",
                "active", "--features", "1"]
        self.ok("runtime", "set", ch, "--type", "2", *meta)
        j = self.ok_json("runtime", "get", ch, "--type", "2")
        r = j["runtime_meta"]
        self.assertEqual((r["channel_id"], r["leader"], r["replicas"], r["status"]),
                         (ch, 1, [1], "active"))
        code, out, err = slotctl(self.endpoints, "--max-retries", "0", "runtime", "set", ch,
                                 "--type", "2", *meta)  # fenced on epochs 0: stale now
        self.assertNotEqual(code, 0)
        self.assertIn("channel_epoch", err)
        self.assertEqual(self.ok_json("runtime", "get", ch, "--type", "2")["runtime_meta"], r)
        self.ok("plugin", "bind", uid, "p-7")
        self.assertRegex(self.ok("plugin", "get", uid), r"%s\s+p-7" % uid)
        self.assertTrue(self.ok_json("plugin", "unbind", uid)["changed"])
        self.assertEqual(slotctl(self.endpoints, "plugin", "get", uid)[0], 1)
        j = self.ok_json("event", "append", ch, "--type", "2", "msg.revoke", "--message-seq", "7",
                         "--payload", "hello")
        self.assertEqual(j["event_seq"], 1)
        j = self.ok_json("event", "list", ch, "--type", "2")
        self.assertEqual([(e["event_seq"], e["message_seq"], e["event_type"], e["payload"])
                          for e in j["entries"]], [(1, 7, "msg.revoke", "hello")])

    def test_bad_input_names_the_flag_or_field(self):
        ch = self.uid("ch")
        for args, needle in [
                (["channel", "get", ch], "channel get: --type: required"),
                (["channel", "create", ch, "--type", "0"], "--type: '0' is not a channel type"),
                (["channel", "create", ch, "--type", "2", "--flags", "loud"], "--flags: 'loud'"),
                (["device", "put", "u", "999"], "DEVICE_FLAG '999'"),
                (["member", "add", ch, "--type", "2", "--colour", "red"], "--colour: unknown"),
                (["member", "add", ch, "--type", "2"] + ["u%d" % i for i in range(1001)],
                 "more than 1000 uids")]:
            code, out, err = slotctl(self.endpoints, *args)
            self.assertEqual(code, 2, (args, err))
            self.assertEqual(len(err.strip().splitlines()), 1, err)
            self.assertIn(needle, err)
        code, j, err = slotctl_json(self.endpoints, "user", "create", "")
        self.assertEqual((code, j["ok"], j["status"].get("detail", {}).get("field")),
                         (5, False, "create_user.user.uid"), j)
        self.assertEqual(slotctl(self.endpoints, "channel", "list", "--prefix", ch)[1].strip(),
                         "CHANNEL  TYPE  FLAGS  SUBSCRIBERS  SUBSCRIBER_VERSION  EVENT_CAPACITY"
                         "  EVENT_NEXT_SEQ")  # nothing was created


class TestSlotctlCluster(SlotctlChecks, h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)
        cls.endpoints = ",".join(cls.cluster.addr(n) for n in cls.cluster.node_ids)
        cls.table = cls.cluster.table
        cls.group_ids = cls.cluster.group_ids
        cls.node_count = 3

    def test_writes_go_straight_to_leaders(self):
        """A key of every group, written via one endpoint only: each lands on its group's
        leader in one attempt (the client routes; the server never forwards)."""
        route = self.cluster.route()
        leaders = h.SlotdCluster.leaders(route)
        one = self.cluster.addr(self.cluster.node_ids[0])
        for group_id, keys in self.cluster.keys_by_group("direct").items():
            code, j, err = slotctl_json(one, "put", keys[0].decode(), "v")
            self.assertEqual(code, 0, err)
            self.assertEqual(j["group_id"], group_id)
            self.assertEqual(j["attempts"], 1, "group %d leader %d" % (group_id, leaders[group_id]))


    def test_lease_calls_go_straight_to_leaders_and_expire(self):
        """Through one endpoint, a lease in every group: grant (routed by its key) and
        keepalive and revoke (routed by the id's hash slot) reach the group's leader in one
        attempt. A key on a 2 s lease outlives the TTL while keepalive --count runs, then is
        deleted within a few seconds once the keep-alives stop."""
        one = self.cluster.addr(self.cluster.node_ids[0])
        key = self.key("lexp")
        code, j, err = slotctl_json(one, "lease", "grant", key, str(LEASE_TTL_S))
        self.assertEqual(code, 0, err)
        expiring = j["id"]
        self.assertEqual(slotctl(one, "put", key, "v", "--lease", str(expiring))[0], 0)
        for group_id, keys in self.cluster.keys_by_group("lroute").items():
            code, j, err = slotctl_json(one, "lease", "grant", keys[0].decode(), "60")
            self.assertEqual((code, j["group_id"], j["attempts"]), (0, group_id, 1), err)
            for sub in ("keepalive", "revoke"):
                code, j2, err = slotctl_json(one, "lease", sub, j["id_hex"])
                self.assertEqual((code, j2["group_id"], j2["attempts"]), (0, group_id, 1),
                                 "%s group %d: %s" % (sub, group_id, err))
        code, out, err = slotctl(one, "lease", "keepalive", str(expiring), "--count", "3",
                                 "--interval", "1")
        self.assertEqual(code, 0, err)
        self.assertEqual(out.splitlines(), ["lease %d (%#x) ttl %ds  keys 1"
                                            % (expiring, expiring, LEASE_TTL_S)] * 3)
        code, j, err = slotctl_json(self.endpoints, "get", key)
        self.assertEqual((code, j["value"]), (0, "v"), err)  # kept alive past its TTL
        took = wait_key_gone(self.endpoints, key, LEASE_TTL_S + LEASE_EXPIRY_SLACK_S)
        self.assertIsNotNone(took, "key on an expired lease still there")
        code, out, err = slotctl(one, "lease", "keepalive", str(expiring))
        self.assertEqual(code, 1, err)

    def test_watch_resumes_across_kill_of_its_node(self):
        """libslotd's watch (slotctl watch) keeps going when the node it streams from is
        killed (-9): it resumes on the next endpoint from its positions, so every acked put is
        printed exactly once, in per-key order. The node is restarted after (shared cluster)."""
        victim = self.cluster.node_ids[0]
        order = [victim] + [n for n in self.cluster.node_ids if n != victim]
        endpoints = ",".join(self.cluster.addr(n) for n in order)
        others = ",".join(self.cluster.addr(n) for n in order[1:])
        prefix = self.key("watchkill") + "/"
        code, out, err = slotctl(endpoints, "watch", "--prefix", prefix, "--timeout", "1")
        self.assertEqual(code, 0, err)
        token = out.split()[-1]
        keys = [h.key_in_group(self.table, g, prefix).decode() for g in self.group_ids]
        rounds = 4
        proc = subprocess.Popen([SLOTCTL_BIN, "--endpoints", endpoints, "--json", "watch",
                                 "--prefix", prefix, "--resume", token, "--count",
                                 str(rounds * len(keys)), "--timeout", "90"],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        acked = []
        try:
            for r in range(rounds):
                if r == rounds // 2:
                    self.cluster.kill(victim)
                for k in keys:
                    code, j, err = slotctl_json(others, "--max-retries", "20", "put", k,
                                                "r%d" % r)
                    self.assertEqual(code, 0, err)
                    acked.append((k, "r%d" % r))
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
            self.cluster.restart(victim)
        self.assertEqual(proc.returncode, 0, err)
        lines = [json.loads(x) for x in out.splitlines()]
        seen = [(e["key"], e["value"]) for e in lines[:-1]]
        self.assertEqual(sorted(seen), sorted(acked))  # every acked put, once
        for k in keys:
            self.assertEqual([v for kk, v in seen if kk == k], ["r%d" % r for r in range(rounds)])
        self.assertGreaterEqual(lines[-1]["resumes"], 1)


class TestClientFollowsLeaderChange(h.SlotdTestCase):
    """One libslotd client writes a key LOOP_WRITES times while the leader of the key's group is
    SIGTERMed: every write must succeed (redirects and request-id retries hide the change)."""

    def test_writes_survive_leader_sigterm(self):
        cluster = self.new_cluster(size=3)
        route = cluster.route()
        endpoints = ",".join(cluster.addr(n) for n in cluster.node_ids)
        group_id = 1
        key = h.key_in_group(cluster.table, group_id, "slotctl/loop").decode()
        leader = h.SlotdCluster.leaders(route)[group_id]
        proc = subprocess.Popen([WRITE_LOOP_BIN, endpoints, key, str(LOOP_WRITES),
                                 str(LOOP_INTERVAL_MS), str(LOOP_DEADLINE_MS),
                                 str(LOOP_MAX_RETRIES)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        results = []
        stopped = False
        deadline = time.monotonic() + LOOP_TIMEOUT_S
        try:
            for line in proc.stdout:
                results.append(json.loads(line))
                if len(results) == STOP_AFTER_WRITES and not stopped:
                    problem = cluster.stop(leader)
                    self.assertIsNone(problem, problem)
                    stopped = True
                self.assertLess(time.monotonic(), deadline, "write loop too slow")
            proc.wait(timeout=LOOP_TIMEOUT_S)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        stderr = proc.stderr.read()
        proc.stderr.close()
        proc.stdout.close()
        self.assertTrue(stopped)
        self.assertEqual(len(results), LOOP_WRITES, stderr)
        failed = [r for r in results if r["rc"] != 0]
        self.assertEqual(failed, [], stderr)
        self.assertEqual(proc.returncode, 0, stderr)
        versions = [r["version"] for r in results]
        self.assertEqual(versions, sorted(versions))
        old = cluster.addr(leader)
        after = results[STOP_AFTER_WRITES + 1:]
        self.assertTrue(all(r["address"] != old for r in after), after)
        self.assertTrue(all(r["group_id"] == group_id for r in results))
        # the last write is what the survivors serve
        live = ",".join(cluster.addr(n) for n in cluster.live_ids())
        code, j, err = slotctl_json(live, "get", key)
        self.assertEqual(code, 0, err)
        self.assertEqual(j["value"], str(LOOP_WRITES - 1))
        sys.stderr.write("\n[leader change] attempts per write after SIGTERM: %s\n"
                         % [r["attempts"] for r in results[STOP_AFTER_WRITES:STOP_AFTER_WRITES + 5]])


if __name__ == "__main__":
    unittest.main()
