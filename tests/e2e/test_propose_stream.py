# test_propose_stream.py - Metadata/ProposeStream: many Proposes on one bidi call, per-item errors.
import os
import re
import sys
import unittest
import urllib.request

import grpc

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb, status_pb2  # noqa: E402

PATH = "/slotd.v1.Metadata/ProposeStream"
ITEMS_MAX = 1024  # NODE_PROPOSE_STREAM_ITEMS_MAX
INFLIGHT_MAX = 4096  # NODE_PROPOSE_STREAM_INFLIGHT_MAX
KEY_BYTES_MAX = 1024  # slot_validate_propose's key bound


def item_detail(result):
    """The slotd.v1.ErrorDetail of a failed result's details (a packed google.rpc.Status)."""
    status = status_pb2.Status.FromString(result.details)
    assert status.code == result.code, (status.code, result.code)
    return pb.ErrorDetail.FromString(status.details[0].value)


class ProposeStreamTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        # Past the stream in-flight bound (4096), so the per-group bound does not refuse items.
        cls.metrics_port = h.free_port()
        cls.server = cls.new_class_server(
            slot_groups=2, extra_args=["--group-proposals-max", "8192", "--metrics-listen",
                                       "127.0.0.1:%d" % cls.metrics_port])
        cls.stub = cls.server.stub

    def stream(self, messages, timeout=30):
        """Sends messages (lists of (id, ProposeRequest)); returns {id: result}."""
        reqs = (pb.ProposeStreamRequest(items=[pb.ProposeStreamItem(id=i, request=r)
                                               for i, r in m]) for m in messages)
        results = {}
        for resp in self.stub.ProposeStream(reqs, timeout=timeout):
            for r in resp.results:
                self.assertNotIn(r.id, results)
                results[r.id] = r
        return results

    def stream_peak(self):
        url = "http://127.0.0.1:%d/metrics" % self.metrics_port
        body = urllib.request.urlopen(url, timeout=5).read().decode()
        m = re.search(r"^slotd_propose_stream_inflight_peak (\d+)$", body, re.M)
        self.assertIsNotNone(m, "slotd_propose_stream_inflight_peak not exported")
        return int(m.group(1))

    def assertAbsent(self, key):
        self.assertFalse(h.get(self.stub, key).get.found, key)

    def test_2000_puts_one_stream(self):
        """2,000 puts in 20 messages on one call: every result OK and every key reads back."""
        keys = {i: b"ps/many/%05d" % i for i in range(2000)}
        msgs = [[(i, pb.ProposeRequest(put=pb.PutCommand(key=keys[i], value=b"v%d" % i)))
                 for i in range(b, b + 100)] for b in range(0, 2000, 100)]
        results = self.stream(msgs)
        self.assertEqual(sorted(results), list(range(2000)))
        for i, r in results.items():
            self.assertEqual(r.code, 0, r.message)
            self.assertTrue(r.response.put.version >= 1)
        for i in range(0, 2000, 7):
            got = h.get(self.stub, keys[i]).get
            self.assertTrue(got.found)
            self.assertEqual(got.value, b"v%d" % i)

    def test_bad_items_fail_alone(self):
        """An oversized key and an item with no command get their own error naming the field and
        limit, the good items around them commit, nothing of the bad ones is stored."""
        big = b"ps/big/" + b"x" * (KEY_BYTES_MAX + 10)
        items = [(1, pb.ProposeRequest(put=pb.PutCommand(key=b"ps/good/1", value=b"a"))),
                 (2, pb.ProposeRequest(put=pb.PutCommand(key=big, value=b"b"))),
                 (3, pb.ProposeRequest()),
                 (4, pb.ProposeRequest(put=pb.PutCommand(key=b"ps/good/4", value=b"d")))]
        results = self.stream([items])
        self.assertEqual(results[1].code, 0, results[1].message)
        self.assertEqual(results[4].code, 0, results[4].message)
        self.assertEqual(results[2].code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
        d = item_detail(results[2])
        self.assertEqual(d.code, pb.ERROR_CODE_INVALID_FIELD)
        self.assertIn("key", d.field)
        self.assertEqual(d.limit, KEY_BYTES_MAX)
        self.assertEqual(results[3].code, grpc.StatusCode.INVALID_ARGUMENT.value[0])
        self.assertEqual(h.get(self.stub, b"ps/good/4").get.value, b"d")
        self.assertAbsent(big[:KEY_BYTES_MAX])

    def test_too_many_items_ends_stream(self):
        """A message of ITEMS_MAX + 1 items ends the stream INVALID_ARGUMENT naming items and its
        limit; nothing of it is stored."""
        keys = [b"ps/over/%05d" % i for i in range(ITEMS_MAX + 1)]
        msg = [(i, pb.ProposeRequest(put=pb.PutCommand(key=k, value=b"v")))
               for i, k in enumerate(keys)]
        with self.assertRaises(grpc.RpcError) as ctx:
            self.stream([msg])
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        d = h.error_detail(ctx.exception)
        self.assertEqual(d.field, "items")
        self.assertEqual(d.limit, ITEMS_MAX)
        for k in keys[::97]:
            self.assertAbsent(k)

    def test_malformed_frame(self):
        """Bytes that do not decode as ProposeStreamRequest end the stream INVALID_ARGUMENT."""
        call = self.server.channel.stream_stream(PATH, request_serializer=None,
                                                 response_deserializer=None)
        with self.assertRaises(grpc.RpcError) as ctx:
            list(call(iter([b"\x0a\xff\xff\xff\xff\x0f"]), timeout=10))
        self.assertEqual(ctx.exception.code(), grpc.StatusCode.INVALID_ARGUMENT)
        self.assertEqual(h.error_detail(ctx.exception).field, "request")

    def test_unread_results_are_held(self):
        """A client that queues 12 x 1024 items (three times the in-flight bound) at once gets
        every result, and the server never had more than the bound in flight on the stream (it
        stops reading: HTTP/2 flow control holds the client)."""
        keys = {i: b"ps/held/%05d" % i for i in range(12 * ITEMS_MAX)}
        msgs = [[(i, pb.ProposeRequest(put=pb.PutCommand(key=keys[i], value=b"h")))
                 for i in range(b, b + ITEMS_MAX)] for b in range(0, len(keys), ITEMS_MAX)]
        results = self.stream(msgs, timeout=60)
        self.assertEqual(len(results), len(keys))
        bad = [(r.code, r.message) for r in results.values() if r.code != 0]
        self.assertEqual(bad[:3], [])
        peak = self.stream_peak()
        self.assertLessEqual(peak, INFLIGHT_MAX)
        self.assertGreaterEqual(peak, ITEMS_MAX)  # the bound was actually approached


    def test_cancel_with_items_in_flight(self):
        """A client that cancels its stream while thousands of items are in flight: the submitted
        items still complete in raft (results dropped), the server stays up and serves the next
        stream; the harness's exit-status and sanitizer checks at stop see no leak or crash."""
        msgs = [[(i, pb.ProposeRequest(put=pb.PutCommand(key=b"ps/cancel/%05d" % i, value=b"c")))
                 for i in range(b, b + ITEMS_MAX)] for b in range(0, 4 * ITEMS_MAX, ITEMS_MAX)]
        reqs = (pb.ProposeStreamRequest(items=[pb.ProposeStreamItem(id=i, request=r)
                                               for i, r in m]) for m in msgs)
        call = self.stub.ProposeStream(reqs, timeout=30)
        first = next(call)
        self.assertGreater(len(first.results), 0)
        call.cancel()
        results = self.stream([[(1, pb.ProposeRequest(put=pb.PutCommand(key=b"ps/after",
                                                                          value=b"a")))]])
        self.assertEqual(results[1].code, 0, results[1].message)
        self.assertEqual(h.get(self.stub, b"ps/after").get.value, b"a")

if __name__ == "__main__":
    unittest.main()
