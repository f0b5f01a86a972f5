#!/usr/bin/python3
# grpcurl_lite.py - the `grpcurl -plaintext -d BODY ADDRESS slotd.v1.Metadata/METHOD` calls of
# docs/api.md made with Python gRPC, for machines without grpcurl (test_docs_scenario.py puts it
# on PATH as `grpcurl`): the JSON body (or `-d @`: stdin) is sent as the method's request and the
# answer printed as JSON, as grpcurl prints it; a failed call prints its code and message to
# stderr and exits 1.
import os
import sys

import grpc
from google.protobuf import json_format

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slotd_harness import pb, pb_grpc  # noqa: E402

USAGE = "usage: grpcurl -plaintext -d BODY|@ HOST:PORT slotd.v1.Metadata/Propose|Read"
TIMEOUT_S = 10
REQUESTS = {"Propose": pb.ProposeRequest, "Read": pb.ReadRequest}


def main(argv):
    if len(argv) != 5 or argv[0] != "-plaintext" or argv[1] != "-d":
        print(USAGE, file=sys.stderr)
        return 2
    body, address, full = argv[2], argv[3], argv[4]
    service, _, method = full.partition("/")
    if service != "slotd.v1.Metadata" or method not in REQUESTS:
        print("grpcurl_lite: only slotd.v1.Metadata/Propose and /Read", file=sys.stderr)
        return 2
    if body == "@":
        body = sys.stdin.read()
    request = json_format.Parse(body, REQUESTS[method]())
    with grpc.insecure_channel(address) as channel:
        try:
            response = getattr(pb_grpc.MetadataStub(channel), method)(request, timeout=TIMEOUT_S)
        except grpc.RpcError as err:
            print("ERROR:\n  Code: %s\n  Message: %s" % (err.code().name, err.details()),
                  file=sys.stderr)
            return 1
    print(json_format.MessageToJson(response, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
