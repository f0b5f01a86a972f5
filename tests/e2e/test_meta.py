# test_meta.py - the typed metadata domain through real slotd processes: a realistic flow on a
# 3-node cluster read back from every node, bad inputs, and every docs/api.md example.
import json
import os
import re
import sys
import unittest

import grpc
from google.protobuf import json_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

LIN = pb.CONSISTENCY_LINEARIZABLE
LOCAL = pb.CONSISTENCY_LOCAL
ABORTED = grpc.StatusCode.ABORTED
INVALID = grpc.StatusCode.INVALID_ARGUMENT

SUBSCRIBERS = 2500
BATCH_UIDS_MAX = 1000
PAGE_MAX = 1000
CONVERSATIONS = 7
DOCS = h.REPO / "docs" / "api.md"
SNAP_COMPACT_ENTRIES = 200   # compaction settings that make a restarted follower need a snapshot
SNAP_COMPACT_TAIL = 20
SNAP_WRITES = 150            # x2 entries (300 > 200 + 20)
SNAP_EVENTS_KEPT = 10
# grpcurl -plaintext -d '<json>' 127.0.0.1:7700 slotd.v1.Metadata/<method>
GRPCURL_RE = re.compile(
    r"grpcurl -plaintext -d '(?P<body>[^']*)' 127\.0\.0\.1:7700 slotd\.v1\.Metadata/"
    r"(?P<method>Propose|Read)")


def propose(stub, **command):
    return stub.Propose(pb.ProposeRequest(**command), timeout=h.RPC_TIMEOUT_S)


def read(stub, consistency=LIN, min_applied_index=0, **query):
    return stub.Read(pb.ReadRequest(consistency=consistency, min_applied_index=min_applied_index,
                                    **query), timeout=h.RPC_TIMEOUT_S)


def typed_alternatives(message_class, oneof):
    """Names of the typed alternatives (field numbers 20..99) of a oneof."""
    return {f.name for f in message_class.DESCRIPTOR.oneofs_by_name[oneof].fields
            if 20 <= f.number <= 99}


class MetaClusterTest(h.SlotdTestCase):
    """One 3-node cluster for the class; each test uses its own uids and channel ids."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)

    def stubs(self):
        return [self.cluster.stub(n) for n in self.cluster.node_ids]

    def read_everywhere(self, last_write, **query):
        """The query's result from every node, LOCAL (waiting for last_write's applied index of
        its group) and LINEARIZABLE; asserts they are equal and returns one."""
        results = []
        for stub in self.stubs():
            local = read(stub, LOCAL, last_write.applied_index, **query)
            self.assertEqual(local.group_id, last_write.group_id)
            self.assertGreaterEqual(local.applied_index, last_write.applied_index)
            lin = read(stub, LIN, **query)
            field = local.WhichOneof("result")
            self.assertEqual(field, lin.WhichOneof("result"))
            results += [getattr(local, field), getattr(lin, field)]
        for r in results[1:]:
            self.assertEqual(r, results[0])
        return results[0]

    def test_realistic_flow(self):
        stub = self.cluster.stub(1)
        # Users and devices.
        users = ["flow-user-%d" % i for i in range(5)]
        for i, uid in enumerate(users):
            r = propose(stub, create_user=pb.CreateUserCommand(
                user=pb.User(uid=uid, token="tok-%d" % i, device_flag=1, device_level=1)))
            self.assertTrue(r.create_user.changed)
            r = propose(stub, put_device=pb.PutDeviceCommand(
                device=pb.Device(uid=uid, device_flag=1, token="app-%d" % i, device_level=1)))
            self.assertTrue(r.put_device.created)
        again = propose(stub, create_user=pb.CreateUserCommand(
            user=pb.User(uid=users[0], token="other")))
        self.assertFalse(again.create_user.changed)
        self.assertEqual(again.create_user.user.token, "tok-0")
        user_write = propose(stub, update_user=pb.UpdateUserCommand(
            user=pb.User(uid=users[0], token="tok-0b", device_flag=1, device_level=2)))

        # A channel with 2,500 subscribers in bounded, fenced batches.
        channel = "flow-room"
        r = propose(stub, create_channel=pb.CreateChannelCommand(
            channel_id=channel, channel_type=2, flags=pb.ChannelFlags(large=True)))
        self.assertTrue(r.create_channel.changed)
        subscribers = ["flow-sub-%05d" % i for i in range(SUBSCRIBERS)]
        version = 0
        for start in range(0, SUBSCRIBERS, BATCH_UIDS_MAX):
            batch = subscribers[start:start + BATCH_UIDS_MAX]
            chan_write = propose(stub, add_subscribers=pb.SubscribersCommand(
                channel_id=channel, channel_type=2, expected_version=version, uids=batch))
            res = chan_write.add_subscribers
            self.assertEqual(res.changed, len(batch))
            self.assertEqual(res.subscriber_version, version + 1)
            version = res.subscriber_version
        self.assertEqual(chan_write.add_subscribers.subscriber_count, SUBSCRIBERS)
        # A stale version: ABORTED with the current version, nothing changes.
        for stub_n in self.stubs():
            err, detail = self.assertRpcError(
                lambda: propose(stub_n, add_subscribers=pb.SubscribersCommand(
                    channel_id=channel, channel_type=2, expected_version=0, uids=["flow-late"])),
                ABORTED, detail_code=pb.ERROR_CODE_STALE_FENCE)
            self.assertEqual(detail.current_version, version)
        # Re-adding present uids changes nothing but is accepted at the current version.
        r = propose(stub, add_subscribers=pb.SubscribersCommand(
            channel_id=channel, channel_type=2, expected_version=version, uids=subscribers[:10]))
        self.assertEqual(r.add_subscribers.changed, 0)
        self.assertEqual(r.add_subscribers.subscriber_version, version)

        # Memberships: alice joins CONVERSATIONS channels activated at 1000, 2000, ...
        uid = users[0]
        chans = ["flow-conv-%d" % i for i in range(CONVERSATIONS)]
        for i, ch in enumerate(chans):
            r = propose(stub, join_channel=pb.JoinChannelCommand(
                uid=uid, channel_id=ch, channel_type=2, join_seq=1, activated_at_ms=1000 * (i + 1)))
            self.assertTrue(r.join_channel.changed)
        # Read sequence: advances, a regression is ignored.
        r = propose(stub, mark_read=pb.MarkReadCommand(uid=uid, channel_id=chans[0], channel_type=2, read_seq=10))
        self.assertTrue(r.mark_read.changed)
        r = propose(stub, mark_read=pb.MarkReadCommand(uid=uid, channel_id=chans[0], channel_type=2, read_seq=5))
        self.assertFalse(r.mark_read.changed)
        self.assertEqual(r.mark_read.membership.read_seq, 10)
        # Hide a conversation: it leaves the list; a lower hide-through is ignored.
        hidden = chans[2]
        r = propose(stub, hide_conversation=pb.HideConversationCommand(
            uid=uid, channel_id=hidden, channel_type=2, hide_through_seq=20))
        self.assertTrue(r.hide_conversation.membership.hidden)
        r = propose(stub, hide_conversation=pb.HideConversationCommand(
            uid=uid, channel_id=hidden, channel_type=2, hide_through_seq=15))
        self.assertFalse(r.hide_conversation.changed)
        self.assertEqual(r.hide_conversation.membership.hide_through_seq, 20)
        page = read(stub, list_conversations=pb.ListConversationsQuery(uid=uid)).list_conversations
        self.assertEqual([m.channel_id for m in page.conversations],
                         [c for c in reversed(chans) if c != hidden])
        # Re-activate it as the newest: it comes back first, hide-through kept.
        member_write = propose(stub, activate_conversation=pb.ActivateConversationCommand(
            uid=uid, channel_id=hidden, channel_type=2, activated_at_ms=99000))
        self.assertTrue(member_write.activate_conversation.changed)
        self.assertFalse(member_write.activate_conversation.membership.hidden)
        self.assertEqual(member_write.activate_conversation.membership.hide_through_seq, 20)
        expected_order = [hidden] + [c for c in reversed(chans) if c != hidden]

        # Runtime meta: create, then a stale update (ABORTED with the current values) and a
        # current one (accepted).
        meta = pb.ChannelRuntimeMeta(leader=1, replicas=[1, 2, 3], isr=[1, 2, 3], channel_epoch=1,
                                     leader_epoch=1, write_fence=1, retention_through_seq=10)
        propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(channel_id=channel, channel_type=2,
                                                                      meta=meta))
        newer = pb.ChannelRuntimeMeta(leader=2, replicas=[1, 2, 3], isr=[2, 3], channel_epoch=1,
                                      leader_epoch=2, write_fence=2, retention_through_seq=5)
        for stub_n in self.stubs():  # the leader answers, or a node forwards its answer
            err, detail = self.assertRpcError(
                lambda: propose(stub_n, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
                    channel_id=channel, channel_type=2, expected_channel_epoch=0, expected_leader_epoch=0,
                    expected_leader=0, meta=newer)),
                ABORTED, detail_code=pb.ERROR_CODE_STALE_FENCE)
            self.assertTrue(detail.HasField("current_runtime_meta"))
            self.assertEqual(detail.current_runtime_meta, meta)
        meta_write = propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
            channel_id=channel, channel_type=2, expected_channel_epoch=1, expected_leader_epoch=1,
            expected_leader=1, meta=newer))
        res = meta_write.update_runtime_meta
        self.assertTrue(res.changed)
        self.assertFalse(res.retention_advanced)  # 5 < 10: retention keeps 10
        self.assertEqual(res.meta.retention_through_seq, 10)

        # Every node serves the same results (LOCAL after the write, and LINEARIZABLE).
        got = self.read_everywhere(meta_write, get_channel=pb.GetChannelQuery(channel_id=channel, channel_type=2))
        self.assertEqual(got.channel.subscriber_count, SUBSCRIBERS)
        self.assertEqual(got.channel.subscriber_version, version)
        self.assertTrue(got.channel.flags.large)
        got = self.read_everywhere(meta_write,
                                   get_runtime_meta=pb.GetRuntimeMetaQuery(channel_id=channel, channel_type=2))
        self.assertEqual(got.meta.leader, 2)
        self.assertEqual(list(got.meta.isr), [2, 3])
        self.assertEqual(got.meta.retention_through_seq, 10)
        got = self.read_everywhere(user_write, get_user=pb.GetUserQuery(uid=uid))
        self.assertEqual(got.user.token, "tok-0b")
        got = self.read_everywhere(member_write, get_membership=pb.GetMembershipQuery(
            uid=uid, channel_id=chans[0], channel_type=2))
        self.assertEqual(got.membership.read_seq, 10)
        got = self.read_everywhere(meta_write, check_member=pb.CheckMemberQuery(
            channel_id=channel, channel_type=2, list=pb.MEMBER_LIST_SUBSCRIBERS, uid=subscribers[1234]))
        self.assertTrue(got.member)
        # The user's conversations, newest activation first, in pages of 2, from every node.
        for stub_n in self.stubs():
            for consistency in (LOCAL, LIN):
                listed, cursor = [], b""
                for _ in range(CONVERSATIONS):
                    page = read(stub_n, consistency,
                                member_write.applied_index if consistency == LOCAL else 0,
                                list_conversations=pb.ListConversationsQuery(
                                    uid=uid, cursor=cursor, limit=2)).list_conversations
                    self.assertLessEqual(len(page.conversations), 2)
                    listed += [m.channel_id for m in page.conversations]
                    cursor = page.next_cursor
                    if not cursor:
                        break
                self.assertEqual(listed, expected_order)
        # All 2,500 subscribers, in pages of PAGE_MAX, from every node.
        for stub_n in self.stubs():
            listed, cursor = [], b""
            for _ in range(SUBSCRIBERS // PAGE_MAX + 2):
                page = read(stub_n, LOCAL, meta_write.applied_index,
                            list_members=pb.ListMembersQuery(
                                channel_id=channel, channel_type=2, list=pb.MEMBER_LIST_SUBSCRIBERS,
                                cursor=cursor, limit=PAGE_MAX)).list_members
                listed += list(page.uids)
                cursor = page.next_cursor
                if not cursor:
                    break
            self.assertEqual(listed, sorted(subscribers))

    def test_bad_inputs_change_nothing(self):
        stub = self.cluster.stub(2)
        channel = "bad-room"
        propose(stub, create_channel=pb.CreateChannelCommand(channel_id=channel, channel_type=2))
        w = propose(stub, add_subscribers=pb.SubscribersCommand(
            channel_id=channel, channel_type=2, expected_version=0, uids=["a", "b"]))
        before = read(stub, get_channel=pb.GetChannelQuery(channel_id=channel, channel_type=2)).get_channel
        too_many = ["u%d" % i for i in range(BATCH_UIDS_MAX + 1)]
        err, _ = self.assertRpcError(
            lambda: propose(stub, add_subscribers=pb.SubscribersCommand(
                channel_id=channel, channel_type=2, expected_version=1, uids=too_many)),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="add_subscribers.uids",
            limit=BATCH_UIDS_MAX)
        self.assertIn("1001 entries", err.details())
        self.assertRpcError(
            lambda: propose(stub, add_subscribers=pb.SubscribersCommand(
                channel_id=channel, channel_type=2, expected_version=1, uids=["x" * 65])),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="add_subscribers.uids", limit=64)
        self.assertRpcError(
            lambda: propose(stub, create_channel=pb.CreateChannelCommand(
                channel_id="c" * 129, channel_type=2)),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="create_channel.channel_id", limit=128)
        self.assertRpcError(
            lambda: propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
                channel_id=channel, channel_type=2, meta=pb.ChannelRuntimeMeta(replicas=[1], isr=[2]))),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="update_runtime_meta.meta.isr")
        self.assertRpcError(
            lambda: propose(stub, put_migration_task=pb.PutMigrationTaskCommand(
                task=pb.ChannelMigrationTask(channel_id=channel, channel_type=2, task_id=1, status=17))),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="put_migration_task.task.status")
        self.assertRpcError(
            lambda: read(stub, list_members=pb.ListMembersQuery(channel_id=channel, channel_type=2, list=9)),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="list_members.list")
        self.assertRpcError(
            lambda: read(stub, list_members=pb.ListMembersQuery(
                channel_id=channel, channel_type=2, list=pb.MEMBER_LIST_SUBSCRIBERS, cursor=b"\x01forged")),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="list_members.cursor")
        self.assertRpcError(
            lambda: read(stub, list_members=pb.ListMembersQuery(
                channel_id=channel, channel_type=2, list=pb.MEMBER_LIST_SUBSCRIBERS, limit=PAGE_MAX + 1)),
            INVALID, pb.ERROR_CODE_INVALID_FIELD, field="list_members.limit", limit=PAGE_MAX)
        self.assertRpcError(
            lambda: propose(stub, mark_read=pb.MarkReadCommand(
                uid="nobody", channel_id=channel, channel_type=2, read_seq=1)),
            grpc.StatusCode.NOT_FOUND, pb.ERROR_CODE_NOT_FOUND)
        # Nothing changed, on any node.
        for stub_n in self.stubs():
            after = read(stub_n, LOCAL, w.applied_index,
                         get_channel=pb.GetChannelQuery(channel_id=channel, channel_type=2)).get_channel
            self.assertEqual(after, before)
            page = read(stub_n, LOCAL, w.applied_index, list_members=pb.ListMembersQuery(
                channel_id=channel, channel_type=2, list=pb.MEMBER_LIST_SUBSCRIBERS)).list_members
            self.assertEqual(list(page.uids), ["a", "b"])

    def test_dedupe_typed(self):
        stub = self.cluster.stub(3)
        channel = "dedupe-room"
        propose(stub, create_channel=pb.CreateChannelCommand(channel_id=channel, channel_type=2))
        cmd = pb.SubscribersCommand(channel_id=channel, channel_type=2, expected_version=0, uids=["a", "b", "c"])
        first = propose(stub, request_id=b"meta-rid-1", add_subscribers=cmd)
        retry = propose(stub, request_id=b"meta-rid-1", add_subscribers=cmd)
        self.assertFalse(first.deduplicated)
        self.assertTrue(retry.deduplicated)
        self.assertEqual(retry.add_subscribers, first.add_subscribers)
        self.assertEqual(retry.applied_index, first.applied_index)
        got = read(stub, get_channel=pb.GetChannelQuery(channel_id=channel, channel_type=2)).get_channel
        self.assertEqual(got.channel.subscriber_count, 3)
        self.assertEqual(got.channel.subscriber_version, 1)


class MetaSnapshotTest(h.SlotdTestCase):
    """Typed rows live under their hash slot, so a follower that missed compacted entries gets
    them in a snapshot of the hash-slot ranges."""

    def test_typed_rows_travel_in_snapshots(self):
        c = self.new_cluster(size=3, slot_groups=1,
                             extra_args=["--compact-entries", SNAP_COMPACT_ENTRIES,
                                         "--compact-tail", SNAP_COMPACT_TAIL])
        leader = c.leaders(c.wait_leaders())[1]
        victim = max(n for n in c.node_ids if n != leader)
        others = [n for n in c.node_ids if n != victim]
        c.stop(victim)
        stub = c.stub(others[0])
        channel = "snap-room"
        propose(stub, create_channel=pb.CreateChannelCommand(channel_id=channel, channel_type=2,
                                                             event_capacity=SNAP_EVENTS_KEPT))
        version = 0
        for i in range(SNAP_WRITES):
            if i % 2 == 0:
                last = propose(stub, add_subscribers=pb.SubscribersCommand(
                    channel_id=channel, channel_type=2, expected_version=version, uids=["s%04d" % i]))
                version = last.add_subscribers.subscriber_version
            else:
                last = propose(stub, append_event=pb.AppendEventCommand(
                    channel_id=channel, channel_type=2, message_seq=i, event_type="edit"))
            propose(stub, join_channel=pb.JoinChannelCommand(
                uid="snap-user", channel_id="snap-c%04d" % i, channel_type=2, activated_at_ms=i + 1))
        last = propose(stub, mark_read=pb.MarkReadCommand(uid="snap-user", channel_id="snap-c0000", channel_type=2,
                                                          read_seq=7))
        c.restart(victim)
        want_channel = read(stub, get_channel=pb.GetChannelQuery(channel_id=channel, channel_type=2)).get_channel
        want_events = read(stub, list_events=pb.ListEventsQuery(channel_id=channel, channel_type=2)).list_events
        want_conv = read(stub, list_conversations=pb.ListConversationsQuery(
            uid="snap-user", limit=PAGE_MAX)).list_conversations
        self.assertEqual(want_channel.channel.subscriber_count, SNAP_WRITES // 2)
        self.assertEqual(len(want_events.events), SNAP_EVENTS_KEPT)
        self.assertEqual(len(want_conv.conversations), SNAP_WRITES)
        got = c.stub(victim)
        self.assertEqual(read(got, LOCAL, last.applied_index,
                              get_channel=pb.GetChannelQuery(channel_id=channel, channel_type=2)).get_channel,
                         want_channel)
        self.assertEqual(read(got, LOCAL, last.applied_index,
                              list_events=pb.ListEventsQuery(channel_id=channel, channel_type=2)).list_events,
                         want_events)
        self.assertEqual(read(got, LOCAL, last.applied_index,
                              list_conversations=pb.ListConversationsQuery(
                                  uid="snap-user", limit=PAGE_MAX)).list_conversations,
                         want_conv)
        lines = c.server(victim).log_lines('msg="snapshot installed"', current_run_only=True)
        self.assertTrue(lines, "node %d caught up without a snapshot" % victim)


class MetaDocsTest(h.SlotdTestCase):
    """Every JSON body of docs/api.md parses into its request type; all are sent, in order, to a
    fresh single-node server and succeed."""

    @classmethod
    def setUpClass(cls):
        cls.server = cls.new_class_server()

    def examples(self):
        text = DOCS.read_text()
        found = []
        for m in GRPCURL_RE.finditer(text):
            body = m.group("body")
            json.loads(body)  # plain JSON first: a clearer error than json_format's
            request = pb.ProposeRequest() if m.group("method") == "Propose" else pb.ReadRequest()
            json_format.Parse(body, request)
            found.append((m.group("method"), request))
        # Every grpcurl line with a JSON body on the page was matched (none is mistyped); a body
        # from stdin (-d @, the IM scenario) is run by test_docs_scenario.py.
        self.assertEqual(len(found), text.count("grpcurl -plaintext -d '"))
        return found

    def test_every_alternative_documented(self):
        found = self.examples()
        proposed = {r.WhichOneof("command") for m, r in found if m == "Propose"}
        queried = {r.WhichOneof("query") for m, r in found if m == "Read"}
        self.assertEqual(typed_alternatives(pb.ProposeRequest, "command") - proposed, set())
        self.assertEqual(typed_alternatives(pb.ReadRequest, "query") - queried, set())

    def test_examples_run(self):
        stub = self.server.stub
        for method, request in self.examples():
            call = stub.Propose if method == "Propose" else stub.Read
            try:
                call(request, timeout=h.RPC_TIMEOUT_S)
            except grpc.RpcError as e:
                self.fail("%s %s: %s %s" % (method, json_format.MessageToJson(request, indent=None),
                                           e.code(), e.details()))
        # The example plugin query names alice's hash slot.
        self.assertEqual(h.hash_slot(b"alice"), 71)


if __name__ == "__main__":
    unittest.main()
