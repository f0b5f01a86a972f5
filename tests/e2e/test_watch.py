"""test_watch.py - e2e tests of Metadata/Watch: every acked change once and in per-key order, resume,
COMPACTED, progress, slow watchers, bad requests, typed watches (a channel's subscribers, a
channel's rows, a user's rows; locally and through a follower over Peer/WatchPoll); a 4-node
cluster across kill -9 of a group leader and of the node the watcher is connected to."""
import os
import queue
import random
import sys
import threading
import time
import unittest

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb, pb_grpc  # noqa: E402

PUT = pb.WATCH_EVENT_TYPE_PUT
DELETE = pb.WATCH_EVENT_TYPE_DELETE
INVALID = grpc.StatusCode.INVALID_ARGUMENT
WAIT_S = 15  # bound for every wait on events


class Watcher:
    """One watch followed on a thread: messages into a queue; with addresses, it resumes on the
    next address (from the positions of the last message) when a stream breaks, like a client
    library would."""

    def __init__(self, addresses, prefix=b"", key=b"", resume=None, resume_on_error=False,
                 **kwargs):
        self.addresses = list(addresses)
        self.request = dict(prefix=prefix, key=key, **kwargs)
        self.positions = dict(resume or {})
        self.resume_on_error = resume_on_error
        self.messages = queue.Queue()
        self.events = []  # every event received, in order
        self.errors = []  # (code, details, ErrorDetail) of every stream end
        self.resumes = 0
        self.lock = threading.Lock()
        self.stopped = threading.Event()
        self.call = None
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _request(self):
        resume = [pb.WatchPosition(group_id=g, index=i) for g, i in sorted(self.positions.items())]
        return pb.WatchRequest(resume=resume, **self.request)

    def _run(self):
        at = 0
        while not self.stopped.is_set():
            channel = grpc.insecure_channel(self.addresses[at % len(self.addresses)])
            try:
                stub = pb_grpc.MetadataStub(channel)
                with self.lock:
                    self.call = stub.Watch(self._request(), timeout=120)
                for msg in self.call:
                    with self.lock:
                        self.events.extend(msg.events)
                        for p in msg.positions:
                            self.positions[p.group_id] = p.index
                    self.messages.put(msg)
                self.errors.append((grpc.StatusCode.OK, "", None))
                return
            except grpc.RpcError as err:
                if err.code() == grpc.StatusCode.CANCELLED and self.stopped.is_set():
                    return
                self.errors.append((err.code(), err.details(), h.error_detail(err)))
                self.messages.put(err)
                if not self.resume_on_error:
                    return
                self.resumes += 1
                at += 1
                time.sleep(0.2)
            finally:
                channel.close()

    def next_message(self, timeout=WAIT_S):
        msg = self.messages.get(timeout=timeout)
        if isinstance(msg, grpc.RpcError):
            raise msg
        return msg

    def wait_created(self):
        msg = self.next_message()
        assert msg.created, msg
        return msg

    def wait_end(self, timeout=WAIT_S):
        self.thread.join(timeout)
        assert not self.thread.is_alive(), "the watch did not end"
        return self.errors[-1]

    def wait_for(self, predicate, what, timeout=WAIT_S):
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            with self.lock:
                if predicate(self.events):
                    return list(self.events)
            time.sleep(0.05)
        with self.lock:
            raise AssertionError("%s: not seen within %ss (%d events)"
                                 % (what, timeout, len(self.events)))

    def stop(self):
        self.stopped.set()
        with self.lock:
            if self.call is not None:
                self.call.cancel()
        self.thread.join(10)


def check_history(test, events, acked):
    """events: every event a watch delivered; acked: [(key, index, value or None for a delete)].
    Every acked change is there exactly once, no change is there twice, and each key's changes
    are in index order."""
    seen = {}
    for e in events:
        ident = (e.group_id, e.index, e.key)
        test.assertNotIn(ident, seen, "event delivered twice: %r" % (ident,))
        seen[ident] = e
    by_key_index = {(e.key, e.index): e for e in events}
    for key, index, value in acked:
        e = by_key_index.get((key, index))
        test.assertIsNotNone(e, "acked change %r at %d not delivered" % (key, index))
        if value is None:
            test.assertEqual(e.type, DELETE)
        else:
            test.assertEqual((e.type, e.value, e.version), (PUT, value, index))
    last = {}
    for e in events:
        test.assertGreater(e.index, last.get(e.key, 0), "key %r out of order" % e.key)
        last[e.key] = e.index


SUBSCRIBERS = pb.TYPED_WATCH_KIND_SUBSCRIBERS
CHANNEL = pb.TYPED_WATCH_KIND_CHANNEL
USER = pb.TYPED_WATCH_KIND_USER


def member_key(channel_id, list_no, uid):
    """The primary key of a CHANNEL_MEMBER row as a typed event carries it."""
    return bytes([len(channel_id)]) + channel_id + bytes([2, list_no]) + uid  # channel_type 2


def typed_scenario(test, stub, watch):
    """Typed watches through watch(**kwargs) -> Watcher: SUBSCRIBERS of a channel sees exactly
    its subscriber changes (an add per new uid, a delete per uid removed, nothing for a uid that
    never was a member, nothing of another channel, of its allowlist or of a key-value key with
    the same bytes), CHANNEL also its channel row and allowlist, USER a user's row."""
    cid = h.unique_key("ch").decode()[-14:]
    other = cid[:-1] + ("x" if cid[-1] != "x" else "y")
    uid = "u-" + cid
    subs = watch(typed=pb.TypedWatch(kind=SUBSCRIBERS, id=cid))
    chan = watch(typed=pb.TypedWatch(kind=CHANNEL, id=cid))
    user = watch(typed=pb.TypedWatch(kind=USER, id=uid))
    for w in (subs, chan, user):
        created = w.wait_created()
        test.assertEqual(len(created.positions), 1)  # the one group owning the id's hash slot

    def propose(**command):
        return stub.Propose(pb.ProposeRequest(**command), timeout=h.RPC_TIMEOUT_S)

    for c in (cid, other):
        propose(create_channel=pb.CreateChannelCommand(channel_id=c, channel_type=2))
    propose(add_subscribers=pb.SubscribersCommand(channel_id=cid, channel_type=2,
                                                  uids=["a", "b"]))
    propose(add_subscribers=pb.SubscribersCommand(channel_id=other, channel_type=2, uids=["a"]))
    propose(add_allowlist=pb.ChannelListCommand(channel_id=cid, channel_type=2, uids=["c"]))
    propose(remove_subscribers=pb.SubscribersCommand(channel_id=cid, channel_type=2,
                                                     expected_version=1, uids=["a", "never"]))
    h.put(stub, cid.encode(), b"a key-value key")
    r = propose(create_user=pb.CreateUserCommand(user=pb.User(uid=uid, token="t")))
    events = subs.wait_for(lambda ev: len(ev) >= 3, "three subscriber changes")
    user_events = user.wait_for(lambda ev: len(ev) >= 1, "the user row")
    chan.wait_for(lambda ev: len(ev) >= 7, "the channel's rows")
    time.sleep(0.3)
    events = subs.wait_for(lambda ev: True, "")
    table = pb.TYPED_TABLE_CHANNEL_MEMBER
    got = [(e.type, e.table, e.key) for e in events]
    test.assertEqual(got, [(PUT, table, member_key(cid.encode(), 1, b"a")),
                           (PUT, table, member_key(cid.encode(), 1, b"b")),
                           (DELETE, table, member_key(cid.encode(), 1, b"a"))])
    chan_events = chan.wait_for(lambda ev: True, "")
    tables = [e.table for e in chan_events]
    test.assertEqual(tables.count(pb.TYPED_TABLE_CHANNEL_MEMBER), 4)  # a, b, allowlist c, -a
    test.assertIn(member_key(cid.encode(), 2, b"c"), [e.key for e in chan_events])
    rows = [pb.Channel.FromString(e.value) for e in chan_events
            if e.table == pb.TYPED_TABLE_CHANNEL]
    test.assertEqual(rows[0].channel_id, cid)
    test.assertEqual(rows[-1].subscriber_count, 1)  # after the removal
    test.assertTrue(all(e.key.startswith(bytes([len(cid)]) + cid.encode()) or e.key == cid.encode()
                        for e in chan_events))
    user_events = user.wait_for(lambda ev: True, "")
    test.assertEqual([(e.table, e.key, e.index) for e in user_events],
                     [(pb.TYPED_TABLE_USER, uid.encode(), r.applied_index)])
    test.assertEqual(pb.User.FromString(user_events[0].value).token, "t")


class WatchSingleNodeTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.cluster = cls.new_class_cluster(size=1)
        cls.stub = cls.cluster.stub(1)
        cls.address = cls.cluster.servers[1].addr

    def watch(self, **kwargs):
        w = Watcher([self.address], **kwargs)
        self.addCleanup(w.stop)
        return w

    def test_prefix_sees_every_put_and_delete_once_in_order(self):
        w = self.watch(prefix=b"p1/")
        created = w.wait_created()
        groups = {p.group_id for p in created.positions}
        self.assertEqual(groups, {g.group_id for g in self.cluster.route().groups})
        acked = []
        keys = [b"p1/%d" % i for i in range(40)]
        for i, key in enumerate(keys):
            r = h.put(self.stub, key, b"v%d" % i)
            acked.append((key, r.applied_index, b"v%d" % i))
        for key in keys[:10]:
            r = h.put(self.stub, key, b"again")
            acked.append((key, r.applied_index, b"again"))
            r = h.delete(self.stub, key)
            acked.append((key, r.applied_index, None))
        h.put(self.stub, b"other/1", b"x")  # outside the prefix
        events = w.wait_for(lambda ev: len(ev) >= len(acked), "every change")
        time.sleep(0.3)
        events = w.wait_for(lambda ev: True, "")
        self.assertEqual(len(events), len(acked), [e.key for e in events])
        check_history(self, events, acked)
        self.assertTrue(all(e.key.startswith(b"p1/") for e in events))

    def test_key_watch_keys_only_and_txn(self):
        w = self.watch(key=b"k2/a", keys_only=True)
        w.wait_created()
        h.put(self.stub, b"k2/ab", b"not me")
        r1 = h.put(self.stub, b"k2/a", b"one")
        txn = pb.TxnCommand(success=[pb.TxnOp(put=pb.PutCommand(key=b"k2/a", value=b"two"))])
        r2 = self.stub.Propose(pb.ProposeRequest(txn=txn), timeout=h.RPC_TIMEOUT_S)
        # a txn refused by its compare changes nothing and makes no event
        txn = pb.TxnCommand(compares=[pb.TxnCompare(key=b"k2/a", target=pb.TXN_TARGET_ABSENT)],
                            failure=[pb.TxnOp(get=pb.GetQuery(key=b"k2/a"))])
        self.stub.Propose(pb.ProposeRequest(txn=txn), timeout=h.RPC_TIMEOUT_S)
        events = w.wait_for(lambda ev: len(ev) >= 2, "two puts")
        time.sleep(0.3)
        events = w.wait_for(lambda ev: True, "")
        self.assertEqual([(e.key, e.index, e.value) for e in events],
                         [(b"k2/a", r1.applied_index, b""), (b"k2/a", r2.applied_index, b"")])

    def test_resume_continues_without_gaps_or_duplicates(self):
        w = self.watch(prefix=b"r3/")
        w.wait_created()
        first = [h.put(self.stub, b"r3/%d" % i, b"a").applied_index for i in range(10)]
        w.wait_for(lambda ev: len(ev) >= 10, "the first ten")
        w.stop()
        positions = dict(w.positions)
        acked = [(b"r3/x%d" % i, h.put(self.stub, b"r3/x%d" % i, b"b").applied_index, b"b")
                 for i in range(10)]
        w2 = self.watch(prefix=b"r3/", resume=positions)
        w2.wait_created()
        events = w2.wait_for(lambda ev: len(ev) >= 10, "the ten after the resume")
        time.sleep(0.3)
        events = w2.wait_for(lambda ev: True, "")
        self.assertEqual(len(events), 10)
        check_history(self, events, acked)
        self.assertFalse({e.index for e in events} & set(first))

    def test_progress_notifications(self):
        w = self.watch(prefix=b"idle4/", progress_interval_ms=200)
        created = w.wait_created()
        h.put(self.stub, b"elsewhere4", b"x")
        t0 = time.monotonic()
        msg = w.next_message(timeout=5)
        self.assertTrue(msg.progress, msg)
        self.assertLess(time.monotonic() - t0, 3)
        self.assertEqual(len(msg.events), 0)
        before = {p.group_id: p.index for p in created.positions}
        after = {p.group_id: p.index for p in msg.positions}
        self.assertEqual(set(before), set(after))
        self.assertTrue(all(after[g] >= before[g] for g in before))

    def test_bad_requests(self):
        cases = [
            (pb.WatchRequest(key=b"a", prefix=b"b"), "prefix"),
            (pb.WatchRequest(key=b"k" * 1025), "key"),
            (pb.WatchRequest(prefix=b"k" * 1025), "prefix"),
            (pb.WatchRequest(progress_interval_ms=5), "progress_interval_ms"),
            (pb.WatchRequest(resume=[pb.WatchPosition(group_id=999, index=1)]),
             "resume.group_id"),
            (pb.WatchRequest(resume=[pb.WatchPosition(group_id=1, index=1),
                                     pb.WatchPosition(group_id=1, index=2)]), "resume.group_id"),
        ]
        for req, field in cases:
            with self.assertRaises(grpc.RpcError) as cm:
                list(self.stub.Watch(req, timeout=5))
            self.assertEqual(cm.exception.code(), INVALID, cm.exception.details())
            d = h.error_detail(cm.exception)
            self.assertEqual((d.code, d.field), (pb.ERROR_CODE_INVALID_FIELD, field))
        typed = [
            (pb.WatchRequest(prefix=b"p", typed=pb.TypedWatch(kind=USER, id="u")), "typed"),
            (pb.WatchRequest(typed=pb.TypedWatch(id="u")), "typed.kind"),
            (pb.WatchRequest(typed=pb.TypedWatch(kind=7, id="u")), "typed.kind"),
            (pb.WatchRequest(typed=pb.TypedWatch(kind=USER)), "typed.id"),
            (pb.WatchRequest(typed=pb.TypedWatch(kind=USER, id="u" * 65)), "typed.id"),
            (pb.WatchRequest(typed=pb.TypedWatch(kind=CHANNEL, id="c" * 129)), "typed.id"),
        ]
        for req, field in typed:
            with self.assertRaises(grpc.RpcError) as cm:
                list(self.stub.Watch(req, timeout=5))
            self.assertEqual(cm.exception.code(), INVALID, cm.exception.details())
            self.assertEqual(h.error_detail(cm.exception).field, field)
        # a malformed request body
        call = self.cluster.servers[1].channel.unary_stream(
            "/slotd.v1.Metadata/Watch", request_serializer=None, response_deserializer=None)
        with self.assertRaises(grpc.RpcError) as cm:
            list(call(b"\xff\xff\xff", timeout=5))
        self.assertEqual(cm.exception.code(), INVALID)

    def test_typed_watches(self):
        typed_scenario(self, self.stub, self.watch)

    def test_slow_watcher_is_cut_off_and_writes_keep_going(self):
        # a stream nobody reads: the server's queue for it fills and the stream ends
        channel = grpc.insecure_channel(self.address, options=[
            ("grpc.max_receive_message_length", 64 << 20)])
        self.addCleanup(channel.close)
        call = pb_grpc.MetadataStub(channel).Watch(pb.WatchRequest(prefix=b"slow5/"), timeout=120)
        first = next(call)
        self.assertTrue(first.created)
        value = b"v" * 16000
        t0 = time.monotonic()
        stubs = [self.stub]
        n = 0
        while n < 1200:  # about 19 MB of changes: beyond the stream's bound and gRPC's windows
            h.put(stubs[0], b"slow5/%d" % n, value)
            n += 1
        elapsed = time.monotonic() - t0
        self.assertLess(elapsed, 60, "writes slowed down by a stalled watcher")
        codes = []
        try:
            for _ in call:
                pass
        except grpc.RpcError as err:
            codes.append((err.code(), h.error_detail(err).code, err.details()))
        self.assertEqual(len(codes), 1, "the stalled stream was not cut off")
        self.assertEqual(codes[0][:2], (grpc.StatusCode.RESOURCE_EXHAUSTED,
                                         pb.ERROR_CODE_QUEUE_FULL), codes[0])


class WatchCompactedTest(h.SlotdTestCase):
    def test_resume_behind_the_history_is_compacted(self):
        cluster = self.new_cluster(size=1, extra_args=["--watch-history-bytes", "8192"])
        stub = cluster.stub(1)
        address = cluster.servers[1].addr
        w = Watcher([address], prefix=b"c6/")
        self.addCleanup(w.stop)
        created = w.wait_created()
        w.stop()
        start = {p.group_id: p.index for p in created.positions}
        for i in range(400):  # ~ 400 x 200 bytes over 8 groups: more than 8 KiB per group
            h.put(stub, b"c6/%d" % i, b"x" * 200)
        w2 = Watcher([address], prefix=b"c6/", resume=start)
        code, details, detail = w2.wait_end()
        self.assertEqual(code, grpc.StatusCode.OUT_OF_RANGE, details)
        self.assertEqual(detail.code, pb.ERROR_CODE_COMPACTED)
        self.assertIn(detail.compacted.group_id, start)
        self.assertGreater(detail.compacted.index, start[detail.compacted.group_id])
        # resuming at the oldest position named works
        w3 = Watcher([address], prefix=b"c6/", resume={detail.compacted.group_id:
                                                       detail.compacted.index})
        self.addCleanup(w3.stop)
        w3.wait_created()


class WatchTypedClusterTest(h.SlotdTestCase):
    def test_typed_watch_through_a_follower(self):
        """The typed scenario watched through a node that does not lead the id's group: its
        polls go to the leader's history over Peer/WatchPoll."""
        cluster = self.new_cluster(size=3)
        route = cluster.wait_leaders()
        leaders = h.SlotdCluster.leaders(route)
        watched = []

        def watch(**kwargs):
            group = route.hash_slot_table[h.hash_slot(kwargs["typed"].id.encode())]
            via = next(n for n in cluster.node_ids if n != leaders[group])
            watched.append((group, via))
            w = Watcher([cluster.servers[via].addr], **kwargs)
            self.addCleanup(w.stop)
            return w

        typed_scenario(self, cluster.stub(1), watch)
        self.assertTrue(all(via != leaders[g] for g, via in watched))


class WatchClusterTest(h.SlotdTestCase):
    def test_every_acked_change_once_across_kills(self):
        # 4 nodes, 3 replicas per group: every node hosts only some groups, so a watch also
        # polls other nodes' histories (Peer/WatchPoll)
        cluster = self.new_cluster(size=4, replicas=3)
        route = cluster.wait_leaders()
        self.assertTrue(any(2 not in g.voters for g in route.groups))
        addresses = {n: cluster.servers[n].addr for n in cluster.node_ids}
        # the watcher starts on node 1 and resumes on node 2, then 3
        w = Watcher([addresses[1], addresses[2], addresses[3]], prefix=b"w7/",
                    resume_on_error=True)
        self.addCleanup(w.stop)
        w.wait_created()
        acked, lock, stop = [], threading.Lock(), threading.Event()
        rng = random.Random(7)

        def writer(wid):
            # node 1 is killed; writes go through the others (own channels: a killed node's
            # harness stub is gone)
            channels = [h.open_channel(addresses[n]) for n in (2, 3)]
            stubs = [pb_grpc.MetadataStub(c) for c in channels]
            i = 0
            while not stop.is_set() and i < 400:
                key = b"w7/%d/%d" % (wid, rng.randrange(20))
                stub = stubs[i % 2]
                try:
                    if i % 5 == 4:
                        r = h.delete(stub, key, request_id=b"d%d-%d" % (wid, i), timeout=3)
                        value = None
                    else:
                        value = b"%d-%d" % (wid, i)
                        r = h.put(stub, key, value, request_id=b"p%d-%d" % (wid, i), timeout=3)
                    if value is not None or r.delete.deleted:
                        with lock:
                            acked.append((key, r.applied_index, value))
                except grpc.RpcError:
                    pass  # not acked: may or may not be in the history
                i += 1
                time.sleep(0.01)
            for c in channels:
                c.close()

        writers = [threading.Thread(target=writer, args=(k,)) for k in range(3)]
        for t in writers:
            t.start()
        time.sleep(1.5)
        # kill -9 of a group leader that is not the watcher's node
        leaders = [g.leader for g in route.groups if g.leader not in (1, 2)]
        victim = leaders[0] if leaders else 2
        cluster.kill(victim)
        time.sleep(2.0)
        cluster.restart(victim)
        time.sleep(1.0)
        # kill -9 of the node the watcher is connected to: it resumes on node 2
        cluster.kill(1)
        time.sleep(2.0)
        stop.set()
        for t in writers:
            t.join(30)
        with lock:
            expect = list(acked)
        self.assertGreater(len(expect), 100)
        want = {(k, i) for k, i, _ in expect}
        w.wait_for(lambda ev: want <= {(e.key, e.index) for e in ev}, "every acked change",
                   timeout=30)
        time.sleep(0.5)
        w.stop()
        self.assertGreaterEqual(w.resumes, 1)
        check_history(self, w.events, expect)
        print("\n  watch: %d acked changes, %d events, %d resumes, killed node %d then node 1"
              % (len(expect), len(w.events), w.resumes, victim), file=sys.stderr)


if __name__ == "__main__":
    unittest.main()
