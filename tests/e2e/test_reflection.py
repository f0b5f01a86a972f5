# test_reflection.py - server reflection against a real slotd: a client that knows no slotd .proto
# lists services, fetches descriptors, and calls Propose/Read with message classes built from them.
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import unittest

import grpc
from google.protobuf import descriptor_pb2, descriptor_pool, message_factory

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import slotd_harness as h  # noqa: E402

V1 = "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo"
V1ALPHA = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo"
REFLECTION_PROTO = "/usr/share/grpc-proto/grpc/reflection/v1/reflection.proto"
EXPECTED_SERVICES = {
    "slotd.v1.Metadata",
    "slotd.v1.Admin",
    "grpc.health.v1.Health",
    "grpc.reflection.v1.ServerReflection",
    "grpc.reflection.v1alpha.ServerReflection",
}
NOT_FOUND = grpc.StatusCode.NOT_FOUND.value[0]
FETCH_ROUNDS_MAX = 16  # file_by_filename rounds to resolve missing imports


def _load_reflection_stubs(tmp):
    """Generates the reflection messages from grpc-proto's v1 reflection.proto (staged as a
    top-level file: generated modules cannot live under Python's grpc package)."""
    shutil.copy(REFLECTION_PROTO, os.path.join(tmp, "reflection_v1.proto"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I", tmp,
                    "--python_out=" + tmp, "reflection_v1.proto"], check=True)
    sys.path.insert(0, tmp)
    import reflection_v1_pb2  # noqa: E402
    return reflection_v1_pb2


def _message_class(pool, full_name):
    desc = pool.FindMessageTypeByName(full_name)
    if hasattr(message_factory, "GetMessageClass"):  # protobuf >= 4.22
        return message_factory.GetMessageClass(desc)
    return message_factory.MessageFactory(pool).GetPrototype(desc)


class ReflectionTest(h.SlotdTestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="slotd-refl-")
        cls.rpb = _load_reflection_stubs(cls.tmp)
        cls.server = cls.new_class_server()

    @classmethod
    def tearDownClass(cls):
        super().tearDownClass()
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def session(self, requests, path=V1):
        """Sends every request on one stream and returns the responses in order."""
        stream = self.server.channel.stream_stream(
            path, request_serializer=self.rpb.ServerReflectionRequest.SerializeToString,
            response_deserializer=self.rpb.ServerReflectionResponse.FromString)
        responses = list(stream(iter(requests), timeout=h.RPC_TIMEOUT_S))
        self.assertEqual(len(responses), len(requests))
        return responses

    def req(self, **kwargs):
        return self.rpb.ServerReflectionRequest(**kwargs)

    def files_of(self, resp):
        self.assertEqual(resp.WhichOneof("message_response"), "file_descriptor_response",
                         str(resp))
        return [descriptor_pb2.FileDescriptorProto.FromString(b)
                for b in resp.file_descriptor_response.file_descriptor_proto]

    def test_list_services_v1_and_v1alpha(self):
        for path in (V1, V1ALPHA):
            with self.subTest(path=path):
                (resp,) = self.session([self.req(list_services="")], path)
                names = {s.name for s in resp.list_services_response.service}
                self.assertEqual(names, EXPECTED_SERVICES)

    def test_errors_do_not_end_the_stream(self):
        ext = self.rpb.ExtensionRequest(containing_type="slotd.v1.ProposeRequest",
                                        extension_number=100)
        resps = self.session([
            self.req(file_containing_symbol="slotd.v1.NoSuchThing"),
            self.req(file_by_filename="no/such.proto"),
            self.req(file_containing_extension=ext),
            self.req(all_extension_numbers_of_type="slotd.v1.ProposeRequest"),
            self.req(file_by_filename="slotd/internal/v1/log.proto"),
        ])
        for resp in resps[:3]:
            self.assertEqual(resp.WhichOneof("message_response"), "error_response")
            self.assertEqual(resp.error_response.error_code, NOT_FOUND)
        self.assertEqual(resps[3].all_extension_numbers_response.base_type_name,
                         "slotd.v1.ProposeRequest")
        self.assertEqual(list(resps[3].all_extension_numbers_response.extension_number), [])
        self.assertEqual([f.name for f in self.files_of(resps[4])],
                         ["slotd/internal/v1/log.proto", "slotd/v1/metadata.proto"])

    def reflected_pool(self, path):
        """A descriptor pool holding only what reflection returned for slotd.v1.Metadata, with
        missing imports fetched by file name as grpcurl does."""
        (resp,) = self.session([self.req(file_containing_symbol="slotd.v1.Metadata")], path)
        files = {f.name: f for f in self.files_of(resp)}
        self.assertIn("slotd/v1/metadata.proto", files)
        pool = descriptor_pool.DescriptorPool()
        added = set()
        for _ in range(FETCH_ROUNDS_MAX):
            progress = False
            for name, fdp in sorted(files.items()):
                if name not in added and all(d in added for d in fdp.dependency):
                    pool.Add(fdp)
                    added.add(name)
                    progress = True
            missing = {d for f in files.values() for d in f.dependency if d not in files}
            for dep in sorted(missing):
                (more,) = self.session([self.req(file_by_filename=dep)], path)
                files.update({f.name: f for f in self.files_of(more)})
                progress = True
            if not progress:
                break
        self.assertEqual(added, set(files), "unresolvable imports")
        return pool

    def check_reflection_only_calls(self, path):
        pool = self.reflected_pool(path)
        service = pool.FindServiceByName("slotd.v1.Metadata")
        methods = {m.name: m for m in service.methods}
        self.assertLessEqual({"Propose", "Read", "RouteSnapshot", "TaskStatus"}, set(methods))
        # "describe": the method signatures come from the reflected descriptors.
        propose, read = methods["Propose"], methods["Read"]
        self.assertEqual(propose.input_type.full_name, "slotd.v1.ProposeRequest")
        self.assertEqual(read.output_type.full_name, "slotd.v1.ReadResponse")
        self.assertFalse(propose.client_streaming or propose.server_streaming)
        self.assertIn("put", propose.input_type.fields_by_name)

        propose_req = _message_class(pool, propose.input_type.full_name)
        propose_resp = _message_class(pool, propose.output_type.full_name)
        read_req = _message_class(pool, read.input_type.full_name)
        read_resp = _message_class(pool, read.output_type.full_name)
        call = lambda m, rq, rs: self.server.channel.unary_unary(  # noqa: E731
            "/%s/%s" % (service.full_name, m.name), request_serializer=rq.SerializeToString,
            response_deserializer=rs.FromString)

        key = h.unique_key(b"refl")
        value = b"reflected value " + key
        req = propose_req()
        req.put.key = key
        req.put.value = value
        resp = call(propose, propose_req, propose_resp)(req, timeout=h.RPC_TIMEOUT_S)
        self.assertEqual(resp.WhichOneof("result"), "put")
        self.assertGreater(resp.put.version, 0)

        rreq = read_req()
        rreq.get.key = key
        rresp = call(read, read_req, read_resp)(rreq, timeout=h.RPC_TIMEOUT_S)
        self.assertEqual(rresp.WhichOneof("result"), "get")
        self.assertTrue(rresp.get.found)
        self.assertEqual(rresp.get.value, value)
        self.assertEqual(rresp.get.version, resp.put.version)

    def test_reflection_only_client_v1(self):
        self.check_reflection_only_calls(V1)

    def test_reflection_only_client_v1alpha(self):
        self.check_reflection_only_calls(V1ALPHA)

    def test_shutdown_with_open_streams(self):
        """SIGTERM while reflection streams are open: they end, slotd exits 0 (and, in a
        sanitizer build, reports nothing)."""
        server = self.new_server().start()
        channel = h.open_channel(server.addr)
        gate = threading.Event()

        def requests():
            yield self.req(list_services="")
            gate.wait(h.STOP_TIMEOUT_S)  # keeps the stream open, idle, until the test ends

        streams = []
        try:
            for path in (V1, V1ALPHA):
                call = channel.stream_stream(
                    path, request_serializer=self.rpb.ServerReflectionRequest.SerializeToString,
                    response_deserializer=self.rpb.ServerReflectionResponse.FromString)
                responses = call(requests(), timeout=4 * h.STOP_TIMEOUT_S)
                first = next(responses)
                self.assertEqual(first.WhichOneof("message_response"), "list_services_response")
                streams.append(responses)
            self.assertIsNone(server.stop())
            for responses in streams:
                with self.assertRaises(grpc.RpcError) as ctx:
                    next(responses)
                self.assertIn(ctx.exception.code(),
                              (grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.CANCELLED))
        finally:
            gate.set()
            channel.close()


if __name__ == "__main__":
    unittest.main()
