# test_slotctl_tasks.py - slotctl's task commands against a real 5-node cluster.
"""slotctl's task commands on the 5-node cluster of test_controller.ControllerClusterCase (3
controller voters + 2 joined data nodes): `move-replica --wait --json` (the task is done and the
group's desired peers changed, seen through `slotctl cluster --json`), `task status ID --json`,
`task status ID --watch` following a live move (one line per change on a non-tty, exit 0),
`drain --node 5 --wait`, the task table and `--active`, `task status` of an unknown id (exit 1),
a move that fails (target killed: `--wait` and `--watch` exit 8) and `retry --task --wait`,
`migrate-slots` while the cluster feature hash_slot_migration is off (exit 3, the message says
how to turn it on) and its usage errors (exit 2), `feature list` / `feature set` (the switch in
the replicated cluster state, seen through another node); and a hash slot migration with `--wait`
on a cluster bootstrapped with --enable-hash-slot-migration 1 (which seeds the feature on).

slotctl is ``$SLOTCTL_BIN`` when set, else ``slotctl`` next to the slotd binary the harness uses
(``$SLOTD_BIN``)."""

import json
import os
import re
import subprocess
import sys
import unittest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
import test_controller as tc  # noqa: E402

SLOTCTL_BIN = os.environ.get("SLOTCTL_BIN", str(h.SLOTD_BIN.parent / "slotctl"))
TASK_WAIT_S = 60      # --wait / --timeout for one task
RUN_TIMEOUT_S = 100   # a slotctl process (its own --wait bound plus margin)
EXIT_PRECONDITION = 3
EXIT_NOT_FOUND = 1
EXIT_USAGE = 2
EXIT_TASK_FAILED = 8


def slotctl(endpoints, *args, json_out=False):
    cmd = [SLOTCTL_BIN, "--endpoints", endpoints, "--deadline-ms", "3000"]
    cmd += (["--json"] if json_out else []) + [str(a) for a in args]
    proc = subprocess.run(cmd, capture_output=True, text=True, timeout=RUN_TIMEOUT_S)
    return proc.returncode, proc.stdout, proc.stderr


def slotctl_json_lines(endpoints, *args):
    """(exit code, every stdout line parsed as JSON, stderr)."""
    code, out, err = slotctl(endpoints, *args, json_out=True)
    lines = [json.loads(line) for line in out.strip().splitlines()]
    if not lines:
        raise AssertionError("no JSON on stdout (exit %d, stderr %r)" % (code, err))
    return code, lines, err


class SlotctlTaskTest(tc.ControllerClusterCase):

    def endpoints(self, ids=(1, 2, 3, 4, 5)):
        return ",".join(self.nodes[i].addr for i in ids)

    def state(self):
        code, lines, err = slotctl_json_lines(self.endpoints(), "cluster")
        self.assertIn(code, (0, 4), err)  # 4: state printed, observed leaders unknown
        return lines[-1]["state"]

    def group(self, gid):
        return [g for g in self.state()["groups"] if g["id"] == gid][0]

    def move_args(self, gid):
        """(from, to) of a replica move of group gid: a non-leader peer to a non-peer."""
        peers = self.group(gid)["desired_peers"]
        leader = {r.group_id: r.leader for r in tc.route(self.nodes[1]).groups}[gid]
        source = [p for p in peers if p != leader][0]
        target = [n for n in (1, 2, 3, 4, 5) if n not in peers][0]
        return source, target

    def test_move_watch_drain_and_status(self):
        self.start_cluster()
        tc.wait_for("converged", self.converged)
        eps = self.endpoints()

        # move-replica --wait --json: progress events, then the final object.
        before = self.group(1)
        source, target = self.move_args(1)
        code, lines, err = slotctl_json_lines(eps, "move-replica", "--group", 1, "--from", source,
                                              "--to", target, "--wait", TASK_WAIT_S)
        final = lines[-1]
        self.assertEqual((code, final["exit_code"], final["ok"]), (0, 0, True), (lines, err))
        self.assertEqual((final["command"], final["outcome"]), ("move-replica", "CHANGED"))
        task_id = final["task_id"]
        self.assertGreater(task_id, 0)
        self.assertEqual(final["task"]["status"], "done")
        self.assertEqual(final["task"]["kind"], "replica_move")
        self.assertEqual((final["task"]["source_node"], final["task"]["target_node"]),
                         (source, target))
        self.assertTrue(all(e["event"] == "task" and e["task"]["task_id"] == task_id
                            for e in lines[:-1]), lines)
        after = self.group(1)
        self.assertEqual(sorted(after["desired_peers"]),
                         sorted([p for p in before["desired_peers"] if p != source] + [target]))
        self.assertEqual(after["config_epoch"], before["config_epoch"] + 1)

        # task status ID --json, and the human view of the same task.
        code, lines, err = slotctl_json_lines(eps, "task", "status", task_id)
        self.assertEqual(code, 0, err)
        self.assertEqual(len(lines), 1)
        t = lines[0]["task"]
        self.assertEqual((t["task_id"], t["kind"], t["status"], t["phase"]),
                         (task_id, "replica_move", "done", "done"))
        self.assertEqual(t["group_id"], 1)
        code, out, err = slotctl(eps, "task", "status", task_id)
        self.assertEqual(code, 0, err)
        self.assertIn("task %d  replica_move  done" % task_id, out)
        self.assertIn("  source node   %d\n" % source, out)

        # task status ID --watch follows a live move: one line per change (stdout is a pipe),
        # then "task N done after S s".
        source2, target2 = self.move_args(2)
        code, out, err = slotctl(eps, "move-replica", "--group", 2, "--from", source2,
                                 "--to", target2)
        self.assertEqual(code, 0, err)
        m = re.search(r"^CHANGED  task (\d+): move group 2's replica from node %d to node %d  "
                      r"revision \d+" % (source2, target2), out, re.M)
        self.assertIsNotNone(m, out)
        watched = int(m.group(1))
        code, out, err = slotctl(eps, "task", "status", watched, "--watch", "--interval-ms", 100,
                                 "--timeout", TASK_WAIT_S)
        lines = out.strip().splitlines()
        self.assertEqual(code, 0, (out, err))
        self.assertRegex(lines[-1], r"^task %d done after \d+\.\d s$" % watched)
        changes = lines[:-1]
        self.assertGreaterEqual(len(changes), 1, out)
        self.assertTrue(all(line.startswith("task %d replica_move  " % watched)
                            for line in changes), out)
        self.assertEqual(len(changes), len(set(changes)), "a line per change only: %s" % out)
        self.assertIn("  done  phase done", changes[-1])
        self.assertNotIn("\r", out)  # no redrawing on a non-tty
        for line in changes:  # a bar only in catch_up, and well-formed
            if "[" in line:
                self.assertIn("phase catch_up", line)
                self.assertRegex(line, r"\[[#.]{12}\] \d{1,3}%  ")
        print("\n  watched task %d: %d lines" % (watched, len(changes)))

        # drain --node 5 --wait: every replica moves off node 5, which ends removed.
        code, out, err = slotctl(eps, "drain", "--node", 5, "--wait", TASK_WAIT_S)
        self.assertEqual(code, 0, (out, err))
        m = re.search(r"^CHANGED  task (\d+): drain node 5  revision", out, re.M)
        self.assertIsNotNone(m, out)
        drain_id = int(m.group(1))
        self.assertRegex(out, r"(?m)^task %d done after \d+\.\d s$" % drain_id)
        state = self.state()
        node5 = [n for n in state["nodes"] if n["id"] == 5][0]
        self.assertEqual(node5["join_state"], "removed")
        self.assertFalse(any(5 in g["desired_peers"] for g in state["groups"]))

        # The task table lists every kept task; --active lists none now.
        eps4 = self.endpoints((1, 2, 3, 4))
        code, out, err = slotctl(eps4, "task", "status")
        self.assertEqual(code, 0, err)
        self.assertRegex(out.splitlines()[0],
                         r"^\s+ID  KIND\s+STATUS\s+PHASE\s+ATTEMPT\s+GROUP\s+SOURCE\s+TARGET\s+"
                         r"PROGRESS\s+LAST_ERROR$")
        rows = {int(line.split()[0]): line.split() for line in out.splitlines()[1:]}
        for tid, kind in ((task_id, "replica_move"), (watched, "replica_move"),
                          (drain_id, "node_drain")):
            self.assertEqual(rows[tid][1:3], [kind, "done"], out)
        code, lines, err = slotctl_json_lines(eps4, "task", "status")
        self.assertEqual(code, 0, err)
        ids = [t["task_id"] for t in lines[0]["tasks"]]
        self.assertEqual(ids, sorted(ids), "oldest first")
        self.assertTrue({task_id, watched, drain_id} <= set(ids))
        code, lines, err = slotctl_json_lines(eps4, "task", "status", "--active")
        self.assertEqual((code, lines[0]["tasks"]), (0, []), err)
        code, out, err = slotctl(eps4, "task", "status", "--active")
        self.assertEqual((code, out), (0, "no active tasks\n"), err)

        # An unknown task id: exit 1 with the server's sentence.
        code, out, err = slotctl(eps4, "task", "status", 99999)
        self.assertEqual(code, EXIT_NOT_FOUND, (out, err))
        self.assertIn("task status 99999: NOT_FOUND", err)

        # migrate-slots while the cluster feature is off: exit 3, says how to turn it on.
        code, out, err = slotctl(eps4, "migrate-slots", "--slots", "3,7,10-12", "--to-group", 2)
        self.assertEqual(code, EXIT_PRECONDITION, (out, err))
        self.assertIn("FAILED_PRECONDITION", err)
        self.assertIn("hash-slot migration is off in the cluster state", err)
        self.assertIn("slotctl feature set hash_slot_migration on", err)
        code, lines, err = slotctl_json_lines(eps4, "migrate-slots", "--slots", "3",
                                              "--to-group", 2)
        self.assertEqual((code, lines[-1]["exit_code"], lines[-1]["ok"]),
                         (EXIT_PRECONDITION, EXIT_PRECONDITION, False))
        self.assertIn("slotctl feature set hash_slot_migration on", lines[-1]["message"])
        # feature list / set: the switch lives in the cluster state, seen through node 5.
        eps5 = self.endpoints([5])
        code, out, err = slotctl(eps5, "feature", "list")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"(?m)^hash_slot_migration +off$")
        code, out, err = slotctl(eps4, "feature", "set", "hash_slot_migration", "on")
        self.assertEqual(code, 0, err)
        self.assertRegex(out, r"(?m)^CHANGED  feature hash_slot_migration on  revision")
        code, lines, err = slotctl_json_lines(eps4, "feature", "set", "hash_slot_migration",
                                              "on")
        self.assertEqual((code, lines[-1]["outcome"]), (0, "NOOP"), (lines, err))
        tc.wait_for("feature on at node 5", lambda: slotctl_json_lines(
            eps5, "feature", "list")[1][-1]["features"]["hash_slot_migration"] is True)
        code, out, err = slotctl(eps4, "feature", "set", "hash_slot_migration", "off")
        self.assertEqual(code, 0, err)
        code, out, err = slotctl(eps4, "feature", "set", "warp_drive", "on")
        self.assertNotEqual(code, 0, (out, err))
        self.assertIn("warp_drive", err)
        code, out, err = slotctl(eps4, "feature", "set", "hash_slot_migration", "maybe")
        self.assertEqual(code, EXIT_USAGE, (out, err))
        self.assertIn("feature set NAME on|off", err)
        # Bad lists never reach a server: usage errors naming the value.
        for slots, what in (("3,300", "hash slot 300 is out of range 0..255"),
                            ("3,7,5-8", "hash slot 7 given twice")):
            code, out, err = slotctl(eps4, "migrate-slots", "--slots", slots, "--to-group", 2)
            self.assertEqual(code, EXIT_USAGE, (out, err))
            self.assertIn(what, err)

    def test_failed_task_exit_8_then_retry(self):
        self.start_cluster(extra_args=["--task-phase-timeout-ms", "4000"])
        tc.wait_for("converged", self.converged)
        g = self.group(4)
        target = [n for n in (1, 2, 3, 4, 5) if n not in g["desired_peers"]][0]
        source = [p for p in g["desired_peers"] if p != target][0]
        self.nodes[target].kill()  # the learner can never catch up: the task fails
        live = self.endpoints([i for i in (1, 2, 3, 4, 5) if i != target])
        code, out, err = slotctl(live, "move-replica", "--group", 4, "--from", source,
                                 "--to", target, "--wait", 40)
        self.assertEqual(code, EXIT_TASK_FAILED, (out, err))
        m = re.search(r"task (\d+) \(replica_move\) failed in phase (\w+), attempt 1: (.+); "
                      r"fix the cause and run `slotctl retry --task (\d+)`", err)
        self.assertIsNotNone(m, err)
        task_id = int(m.group(1))
        self.assertEqual(int(m.group(4)), task_id)
        self.assertTrue(m.group(3).strip())
        code, lines, err = slotctl_json_lines(live, "task", "status", task_id, "--watch",
                                              "--timeout", 5)
        self.assertEqual((code, lines[-1]["exit_code"], lines[-1]["error"]),
                         (EXIT_TASK_FAILED, EXIT_TASK_FAILED, "task failed"), (lines, err))
        self.assertEqual(self.group(4)["desired_peers"], g["desired_peers"])
        # The target is back: retry --wait follows the same task (attempt 2) to done, and is
        # not fooled by an answer still showing the failed attempt.
        self.nodes[target].start()
        code, out, err = slotctl(self.endpoints(), "retry", "--task", task_id, "--wait",
                                 TASK_WAIT_S)
        self.assertEqual(code, 0, (out, err))
        self.assertRegex(out, r"(?m)^CHANGED  task %d: retry task %d  revision" % (task_id,
                                                                                 task_id))
        self.assertRegex(out, r"(?m)^task %d done after" % task_id)
        self.assertNotIn("failed", out)
        code, lines, err = slotctl_json_lines(self.endpoints(), "task", "status", task_id)
        self.assertEqual((lines[0]["task"]["status"], lines[0]["task"]["attempt"]), ("done", 2))
        self.assertIn(target, self.group(4)["desired_peers"])

    def test_hash_slot_migration_when_enabled(self):
        self.start_cluster(extra_args=["--enable-hash-slot-migration", "1"])
        tc.wait_for("converged", self.converged)
        eps = self.endpoints()
        table = list(tc.route(self.nodes[1]).hash_slot_table)
        slots = [s for s, g in enumerate(table) if g == 1][:3]
        code, lines, err = slotctl_json_lines(
            eps, "migrate-slots", "--slots", ",".join(map(str, slots)), "--to-group", 2,
            "--wait", TASK_WAIT_S)
        final = lines[-1]
        self.assertEqual((code, final["exit_code"]), (0, 0), (lines, err))
        t = final["task"]
        self.assertEqual((t["kind"], t["status"], t["to_group"], t["hash_slots"]),
                         ("hash_slot_migration", "done", 2, slots))
        tc.wait_for("route moved the slots", lambda: all(
            tc.route(self.nodes[3]).hash_slot_table[s] == 2 for s in slots))


if __name__ == "__main__":
    unittest.main()
