# test_metadata_model.py - issue 23's typed metadata model on one 3-node cluster: channels keyed
# by (channel_id, channel_type), deletes that remove exactly what they say (read back on every
# node), a bulk subscriber add that is all or nothing across a kill -9 of its group leader, and
# stale fences refused with nothing changed.
import os
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

LIN = pb.CONSISTENCY_LINEARIZABLE
LOCAL = pb.CONSISTENCY_LOCAL
BULK = 1000            # SLOT_BATCH_UIDS_MAX: one add_subscribers command
GROUP, PERSON = 2, 1   # channel types


def propose(stub, **command):
    return stub.Propose(pb.ProposeRequest(**command), timeout=h.RPC_TIMEOUT_S)


def read(stub, consistency=LIN, min_applied_index=0, **query):
    return stub.Read(pb.ReadRequest(consistency=consistency, min_applied_index=min_applied_index,
                                    **query), timeout=h.RPC_TIMEOUT_S)


def members(stub, channel, ctype, consistency=LIN, min_index=0):
    """Every subscriber uid of (channel, ctype), paged."""
    uids, cursor = [], b""
    while True:
        page = read(stub, consistency, min_index, list_members=pb.ListMembersQuery(
            channel_id=channel, channel_type=ctype, list=pb.MEMBER_LIST_SUBSCRIBERS,
            cursor=cursor, limit=1000)).list_members
        uids += list(page.uids)
        cursor = page.next_cursor
        if not cursor:
            return uids


class MetadataModelTest(h.SlotdTestCase):
    """One 3-node cluster for the class; each test uses its own uids and channel ids."""

    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=3)

    def live_stubs(self):
        return [self.cluster.stub(n) for n in self.cluster.live_ids()]

    def test_channel_type_isolation(self):
        stub = self.cluster.stub(1)
        for ctype in (PERSON, GROUP):
            r = propose(stub, create_channel=pb.CreateChannelCommand(channel_id="iso",
                                                                     channel_type=ctype))
            self.assertTrue(r.create_channel.changed)  # another type is another channel
        propose(stub, add_subscribers=pb.SubscribersCommand(
            channel_id="iso", channel_type=GROUP, uids=["a", "b"]))
        w = propose(stub, append_event=pb.AppendEventCommand(
            channel_id="iso", channel_type=GROUP, message_seq=1, event_type="t"))
        for s in self.live_stubs():
            person = read(s, LOCAL, w.applied_index,
                          get_channel=pb.GetChannelQuery(channel_id="iso", channel_type=PERSON))
            self.assertEqual(person.get_channel.channel.subscriber_count, 0)
            self.assertEqual(members(s, "iso", PERSON, LOCAL, w.applied_index), [])
            self.assertEqual(members(s, "iso", GROUP, LOCAL, w.applied_index), ["a", "b"])
            ev = read(s, LOCAL, w.applied_index, list_events=pb.ListEventsQuery(
                channel_id="iso", channel_type=PERSON)).list_events
            self.assertEqual(len(ev.events), 0)
        self.assertRpcError(
            lambda: propose(stub, add_subscribers=pb.SubscribersCommand(
                channel_id="iso", uids=["c"])),
            grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_CODE_INVALID_FIELD,
            field="add_subscribers.channel_type", limit=255)

    def test_deletes_remove_exactly_what_they_say(self):
        stub = self.cluster.stub(2)
        uid, keep = "del-user", "del-keep"
        for u in (uid, keep):
            propose(stub, create_user=pb.CreateUserCommand(user=pb.User(uid=u, token="t")))
        for flag in (1, 2):
            propose(stub, put_device=pb.PutDeviceCommand(device=pb.Device(uid=uid,
                                                                          device_flag=flag)))
        for i, ch in enumerate(["del-c1", "del-c2"]):
            propose(stub, join_channel=pb.JoinChannelCommand(
                uid=uid, channel_id=ch, channel_type=GROUP, join_seq=1, activated_at_ms=i + 1))
        propose(stub, bind_cmd=pb.BindCmdCommand(uid=uid, channel_id="del-cmd",
                                                 channel_type=GROUP))
        propose(stub, bind_plugin=pb.BindPluginCommand(uid=uid, plugin_no="p-del"))
        propose(stub, set_system_uid=pb.SetSystemUidCommand(uid=uid, system=True))
        r = propose(stub, remove_device=pb.RemoveDeviceCommand(uid=uid, device_flag=2))
        self.assertTrue(r.remove_device.removed)
        self.assertEqual(r.remove_device.device.device_flag, 2)
        r = propose(stub, delete_user=pb.DeleteUserCommand(uid=uid))
        res = r.delete_user
        self.assertEqual((res.removed, res.devices, res.memberships, res.cmd_bindings,
                          res.plugin_binding, res.system_uid, res.more),
                         (True, 1, 2, 1, True, True, False))
        user_write = r
        # A channel of two types; only GROUP is deleted.
        ch = "del-room"
        for ctype in (PERSON, GROUP):
            propose(stub, create_channel=pb.CreateChannelCommand(channel_id=ch,
                                                                 channel_type=ctype))
            propose(stub, add_subscribers=pb.SubscribersCommand(
                channel_id=ch, channel_type=ctype, uids=["x", "y", "z"]))
        propose(stub, add_allowlist=pb.ChannelListCommand(channel_id=ch, channel_type=GROUP,
                                                          uids=["x"]))
        propose(stub, append_event=pb.AppendEventCommand(channel_id=ch, channel_type=GROUP,
                                                         message_seq=1, event_type="t"))
        propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
            channel_id=ch, channel_type=GROUP, meta=pb.ChannelRuntimeMeta(leader=1, replicas=[1])))
        r = propose(stub, delete_channel=pb.DeleteChannelCommand(channel_id=ch,
                                                                 channel_type=GROUP))
        res = r.delete_channel
        self.assertEqual((res.removed, res.subscribers, res.allowlist, res.denylist,
                          res.runtime_meta, res.events, res.more),
                         (True, 3, 1, 0, True, 1, False))
        chan_write = r
        for s in self.live_stubs():  # gets and listings on every node, followers included
            u = lambda **q: read(s, LOCAL, user_write.applied_index, **q)  # noqa: E731
            self.assertFalse(u(get_user=pb.GetUserQuery(uid=uid)).get_user.found)
            self.assertTrue(read(s, get_user=pb.GetUserQuery(uid=keep)).get_user.found)
            self.assertFalse(u(get_device=pb.GetDeviceQuery(uid=uid, device_flag=1))
                             .get_device.found)
            self.assertFalse(u(is_system_uid=pb.IsSystemUidQuery(uid=uid)).is_system_uid.system)
            self.assertFalse(u(get_plugin_binding=pb.GetPluginBindingQuery(uid=uid))
                             .get_plugin_binding.found)
            self.assertFalse(u(get_cmd_binding=pb.GetCmdBindingQuery(
                uid=uid, channel_id="del-cmd", channel_type=GROUP)).get_cmd_binding.found)
            self.assertEqual(list(u(list_conversations=pb.ListConversationsQuery(uid=uid))
                                  .list_conversations.conversations), [])
            c = lambda **q: read(s, LOCAL, chan_write.applied_index, **q)  # noqa: E731
            self.assertFalse(c(get_channel=pb.GetChannelQuery(channel_id=ch, channel_type=GROUP))
                             .get_channel.found)
            self.assertFalse(c(get_runtime_meta=pb.GetRuntimeMetaQuery(
                channel_id=ch, channel_type=GROUP)).get_runtime_meta.found)
            self.assertEqual(members(s, ch, GROUP, LOCAL, chan_write.applied_index), [])
            self.assertEqual(len(c(list_events=pb.ListEventsQuery(
                channel_id=ch, channel_type=GROUP)).list_events.events), 0)
            self.assertEqual(members(s, ch, PERSON, LOCAL, chan_write.applied_index),
                             ["x", "y", "z"])
        self.assertRpcError(
            lambda: propose(stub, delete_channel=pb.DeleteChannelCommand(channel_id=ch,
                                                                         channel_type=GROUP)),
            grpc.StatusCode.NOT_FOUND, pb.ERROR_CODE_NOT_FOUND)

    def test_listings_page_across_groups(self):
        """Listings page with cursors on every node: one owner's rows from its group, spanning
        listings merged from every group in hash-slot order; bad input names field and limit."""
        stub = self.cluster.stub(1)
        route = self.cluster.wait_leaders()
        for flag in (3, 1, 2):
            propose(stub, put_device=pb.PutDeviceCommand(device=pb.Device(
                uid="lst-user", device_flag=flag, token="t%d" % flag)))
        for i in range(24):
            propose(stub, set_system_uid=pb.SetSystemUidCommand(uid="lst-sys-%02d" % i,
                                                                system=True))
            propose(stub, create_channel=pb.CreateChannelCommand(
                channel_id="lst-ch-%02d" % i, channel_type=GROUP if i % 2 else PERSON))
            propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
                channel_id="lst-ch-%02d" % i, channel_type=GROUP if i % 2 else PERSON,
                meta=pb.ChannelRuntimeMeta(leader=901 if i % 3 == 0 else 902,
                                           replicas=[901, 902])))
            propose(stub, put_migration_task=pb.PutMigrationTaskCommand(task=pb.ChannelMigrationTask(
                channel_id="lst-ch-%02d" % i, channel_type=GROUP if i % 2 else PERSON, task_id=1,
                source_node=901, target_node=902,
                status=pb.MIGRATION_STATUS_RUNNING if i % 4 == 0 else pb.MIGRATION_STATUS_DONE)))
        propose(stub, create_channel=pb.CreateChannelCommand(channel_id="lst-ev", channel_type=GROUP))
        for i in range(1, 8):
            propose(stub, append_event=pb.AppendEventCommand(
                channel_id="lst-ev", channel_type=GROUP, message_seq=i, event_type="m"))
        groups = {route.hash_slot_table[h.hash_slot(("lst-ch-%02d" % i).encode())]
                  for i in range(24)}
        self.assertGreater(len(groups), 1)  # the spanning listings cross groups

        def pages(s, field, limit, **q):
            """(entries, number of pages) of listing `field` through node stub s."""
            out, cursor, n = [], b"", 0
            while True:
                query = getattr(pb, {"list_devices": "ListDevicesQuery",
                                     "list_system_uids": "ListSystemUidsQuery",
                                     "list_channels": "ListChannelsQuery",
                                     "list_runtime_meta": "ListRuntimeMetaQuery",
                                     "list_migration_tasks": "ListMigrationTasksQuery",
                                     "list_events": "ListEventsQuery"}[field])
                r = getattr(read(s, **{field: query(cursor=cursor, limit=limit, **q)}), field)
                entries = list(getattr(r, r.DESCRIPTOR.fields_by_number[1].name))
                self.assertLessEqual(len(entries), limit)
                out += entries
                n += 1
                cursor = r.next_cursor
                if not cursor:
                    return out, n

        def slot_of(channel_id):
            return h.hash_slot(channel_id.encode())

        for s in self.live_stubs():
            devices, n = pages(s, "list_devices", 2, uid="lst-user")
            self.assertEqual([d.device_flag for d in devices], [1, 2, 3])
            self.assertEqual(n, 2)
            uids = [u for u in pages(s, "list_system_uids", 7)[0] if u.startswith("lst-sys-")]
            self.assertEqual(sorted(uids), ["lst-sys-%02d" % i for i in range(24)])
            self.assertEqual(uids, sorted(uids, key=lambda u: (slot_of(u), u)))
            chans, _ = pages(s, "list_channels", 5, id_prefix="lst-ch-", channel_type=GROUP)
            self.assertEqual(sorted(c.channel_id for c in chans),
                             ["lst-ch-%02d" % i for i in range(1, 24, 2)])
            self.assertTrue(all(c.channel_type == GROUP for c in chans))
            self.assertEqual([slot_of(c.channel_id) for c in chans],
                             sorted(slot_of(c.channel_id) for c in chans))
            metas, _ = pages(s, "list_runtime_meta", 3, leader=901)
            self.assertEqual(sorted(m.channel_id for m in metas if m.channel_id.startswith("lst-")),
                             ["lst-ch-%02d" % i for i in range(0, 24, 3)])
            self.assertTrue(all(m.meta.leader == 901 for m in metas))
            tasks, _ = pages(s, "list_migration_tasks", 2, status=pb.MIGRATION_STATUS_RUNNING)
            self.assertEqual(sorted(t.channel_id for t in tasks if t.channel_id.startswith("lst-")),
                             ["lst-ch-%02d" % i for i in range(0, 24, 4)])
            events, _ = pages(s, "list_events", 2, channel_id="lst-ev", channel_type=GROUP,
                              after_seq=4)
            self.assertEqual([e.event_seq for e in events], [7, 6, 5])
        # Bad input: INVALID_ARGUMENT naming the field and its limit; nothing stored changes.
        before = pages(stub, "list_channels", 1000, id_prefix="lst-ch-")[0]
        self.assertRpcError(lambda: read(stub, list_channels=pb.ListChannelsQuery(limit=1001)),
                            grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_CODE_INVALID_FIELD,
                            field="list_channels.limit", limit=1000)
        self.assertRpcError(lambda: read(stub, list_channels=pb.ListChannelsQuery(channel_type=256)),
                            grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_CODE_INVALID_FIELD,
                            field="list_channels.channel_type", limit=255)
        other = read(stub, list_devices=pb.ListDevicesQuery(uid="lst-user", limit=1)).list_devices
        self.assertRpcError(  # one owner's cursor is no spanning listing's
            lambda: read(stub, list_system_uids=pb.ListSystemUidsQuery(cursor=other.next_cursor)),
            grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_CODE_INVALID_FIELD,
            field="list_system_uids.cursor")
        self.assertRpcError(
            lambda: read(stub, list_migration_tasks=pb.ListMigrationTasksQuery(status=9)),
            grpc.StatusCode.INVALID_ARGUMENT, pb.ERROR_CODE_INVALID_FIELD,
            field="list_migration_tasks.status", limit=4)
        self.assertEqual(pages(stub, "list_channels", 1000, id_prefix="lst-ch-")[0], before)

    def test_stale_fences_refused(self):
        stub = self.cluster.stub(3)
        ch = "fence-room"
        propose(stub, create_channel=pb.CreateChannelCommand(channel_id=ch, channel_type=GROUP))
        meta = pb.ChannelRuntimeMeta(leader=1, replicas=[1, 2], channel_epoch=1, leader_epoch=1,
                                     write_fence=5, lease_until_ms=1000,
                                     status=pb.CHANNEL_STATUS_ACTIVE)
        w = propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
            channel_id=ch, channel_type=GROUP, meta=meta))

        def backwards(**fields):
            """update_runtime_meta at the current epochs with fields moved back: refused."""
            older = pb.ChannelRuntimeMeta()
            older.CopyFrom(meta)
            for name, value in fields.items():
                setattr(older, name, value)
            err, _ = self.assertRpcError(
                lambda: propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
                    channel_id=ch, channel_type=GROUP, expected_channel_epoch=1,
                    expected_leader_epoch=1, expected_leader=1, meta=older)),
                grpc.StatusCode.FAILED_PRECONDITION)
            return err.details()

        details = backwards(write_fence=4)
        self.assertIn("write_fence", details)
        self.assertIn("4, current 5", details)
        self.assertIn("1, current 2", backwards(status=pb.CHANNEL_STATUS_CREATING))
        self.assertIn("999, current 1000", backwards(lease_until_ms=999))
        self.assertRpcError(  # the compare-and-set expectation: ABORTED as before
            lambda: propose(stub, update_runtime_meta=pb.UpdateRuntimeMetaCommand(
                channel_id=ch, channel_type=GROUP, meta=meta)),
            grpc.StatusCode.ABORTED, pb.ERROR_CODE_STALE_FENCE)
        for s in self.live_stubs():
            got = read(s, LOCAL, w.applied_index, get_runtime_meta=pb.GetRuntimeMetaQuery(
                channel_id=ch, channel_type=GROUP)).get_runtime_meta
            self.assertEqual(got.meta, meta)  # nothing changed

    def test_zz_bulk_add_is_atomic_across_a_leader_kill(self):
        """1,000 uids in one add_subscribers while the channel's group leader is killed: the
        channel has all of them or none, on every live node, and its count agrees."""
        c = self.cluster
        ch = "bulk-room"
        stub = c.stub(c.live_ids()[0])
        propose(stub, create_channel=pb.CreateChannelCommand(channel_id=ch, channel_type=GROUP))
        route = c.wait_leaders()
        group = route.hash_slot_table[h.hash_slot(ch.encode())]
        leader = c.leaders(route)[group]
        via = [n for n in c.live_ids() if n != leader][0]
        uids = ["bulk-%04d" % i for i in range(BULK)]
        outcome = {}

        def add():
            try:
                outcome["r"] = c.stub(via).Propose(pb.ProposeRequest(
                    request_id=b"bulk-1", add_subscribers=pb.SubscribersCommand(
                        channel_id=ch, channel_type=GROUP, uids=uids)), timeout=10)
            except grpc.RpcError as err:
                outcome["err"] = err.code()

        t = threading.Thread(target=add)
        t.start()
        time.sleep(0.005)
        c.kill(leader)
        t.join()
        try:
            c.wait_leaders(via=via, exclude=(leader,))
            want = None
            for n in c.live_ids():
                s = c.stub(n)
                got = read(s, get_channel=pb.GetChannelQuery(channel_id=ch, channel_type=GROUP))
                count = got.get_channel.channel.subscriber_count
                listed = members(s, ch, GROUP)
                self.assertIn(count, (0, BULK), "node %d: a partial bulk add" % n)
                self.assertEqual(len(listed), count)
                self.assertEqual(listed, sorted(uids) if count else [])
                want = count if want is None else want
                self.assertEqual(count, want, "nodes disagree")
            if "r" in outcome:  # acknowledged: it must have applied
                self.assertEqual(want, BULK)
        finally:
            c.restart(leader)


if __name__ == "__main__":
    unittest.main()
