#!/usr/bin/python3
# example_client.py - smallest slotd client: one Put, one linearizable Get, printed.
import argparse, os, sys
import grpc
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from slotd_harness import pb, pb_grpc  # generates the stubs into tests/e2e/_gen/ on first use

ap = argparse.ArgumentParser(description="put a key into slotd, then read it back")
ap.add_argument("--addr", default="127.0.0.1:7700")
ap.add_argument("--key", default="hello")
ap.add_argument("--value", default="world")
args = ap.parse_args()
key, value = args.key.encode(), args.value.encode()
with grpc.insecure_channel(args.addr) as channel:
    stub = pb_grpc.MetadataStub(channel)
    w = stub.Propose(pb.ProposeRequest(put=pb.PutCommand(key=key, value=value)), timeout=5)
    print("put %s: group %d, applied index %d, version %d"
          % (args.key, w.group_id, w.applied_index, w.put.version))
    r = stub.Read(pb.ReadRequest(consistency=pb.CONSISTENCY_LINEARIZABLE,
                                 get=pb.GetQuery(key=key)), timeout=5)
    print("get %s: found=%s value=%r version %d"
          % (args.key, r.get.found, r.get.value.decode(), r.get.version))
