#!/usr/bin/python3
"""typed-meta.py - typed metadata on one slotd node: join_channel writes/s (one user joining
--memberships channels, --inflight at once), add_subscribers of 100 uids per command writes/s
(--channels channels, one add each), and list_conversations latency for that user with
--memberships memberships (first page of 100 and of 1000, and a walk of every page of 100).

Usage: scripts/bench/typed-meta.py [--runs 3] [--memberships 10000] [--channels 300]
         [--inflight 32] [--lists 200] [--slotd build/bin/slotd]
A fresh node (temp data dir) per run; prints one line per run and the medians over runs. The
client is Python grpcio (futures, --inflight in flight): on a shared 2-core machine it competes
with the server for CPU, so the write rates are a floor, not slotd's ceiling."""

import argparse
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time

import grpc

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, os.path.join(REPO, "clients", "python"))
from slotd_client import pb, pb_grpc  # noqa: E402

READY_S = 30.0
RPC_TIMEOUT_S = 30.0
UIDS_PER_ADD = 100
GROUP = 2  # channel type
USER = "bench-user"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start(slotd_bin, work):
    port = free_port()
    proc = subprocess.Popen([slotd_bin, "--listen", "127.0.0.1:%d" % port, "--data-dir",
                             work + "/data", "--metrics-listen", ""],
                            stdout=open(work + "/slotd.log", "w"), stderr=subprocess.STDOUT)
    stub = pb_grpc.MetadataStub(grpc.insecure_channel("127.0.0.1:%d" % port))
    deadline = time.monotonic() + READY_S
    while True:
        try:
            stub.Read(pb.ReadRequest(get=pb.GetQuery(key=b"x")), timeout=2)
            return proc, stub
        except grpc.RpcError:
            if time.monotonic() > deadline or proc.poll() is not None:
                proc.kill()
                raise SystemExit("typed-meta: slotd not ready (see %s/slotd.log)" % work)
            time.sleep(0.1)


def pipelined(stub, requests, inflight):
    """Sends every ProposeRequest with at most inflight outstanding; returns the seconds taken."""
    pending = []
    t0 = time.monotonic()
    for req in requests:
        if len(pending) >= inflight:
            pending.pop(0).result()
        pending.append(stub.Propose.future(req, timeout=RPC_TIMEOUT_S))
    for f in pending:
        f.result()
    return time.monotonic() - t0


def list_us(stub, limit, count):
    """Median latency (us) of list_conversations' first page of `limit`."""
    times = []
    req = pb.ReadRequest(list_conversations=pb.ListConversationsQuery(uid=USER, limit=limit))
    for _ in range(count):
        t0 = time.perf_counter()
        r = stub.Read(req, timeout=RPC_TIMEOUT_S)
        times.append((time.perf_counter() - t0) * 1e6)
        if len(r.list_conversations.conversations) != limit:
            raise SystemExit("typed-meta: a page of %d held %d" % (
                limit, len(r.list_conversations.conversations)))
    return statistics.median(times)


def walk_ms(stub, want):
    """Milliseconds to list every conversation in pages of 100; checks the count."""
    t0 = time.perf_counter()
    cursor, n = b"", 0
    while True:
        page = stub.Read(pb.ReadRequest(list_conversations=pb.ListConversationsQuery(
            uid=USER, limit=100, cursor=cursor)), timeout=RPC_TIMEOUT_S).list_conversations
        n += len(page.conversations)
        cursor = page.next_cursor
        if not cursor:
            break
    if n != want:
        raise SystemExit("typed-meta: listed %d conversations, want %d" % (n, want))
    return (time.perf_counter() - t0) * 1e3


def one_run(args):
    work = tempfile.mkdtemp(prefix="typed-meta-")
    proc, stub = start(args.slotd, work)
    try:
        joins = (pb.ProposeRequest(join_channel=pb.JoinChannelCommand(
            uid=USER, channel_id="bench-conv-%05d" % i, channel_type=GROUP, join_seq=1,
            activated_at_ms=1700000000000 + i)) for i in range(args.memberships))
        join_s = pipelined(stub, joins, args.inflight)
        creates = (pb.ProposeRequest(create_channel=pb.CreateChannelCommand(
            channel_id="bench-ch-%04d" % c, channel_type=GROUP)) for c in range(args.channels))
        pipelined(stub, creates, args.inflight)
        adds = (pb.ProposeRequest(add_subscribers=pb.SubscribersCommand(
            channel_id="bench-ch-%04d" % c, channel_type=GROUP, expected_version=0,
            uids=["u-%04d-%03d" % (c, i) for i in range(UIDS_PER_ADD)]))
            for c in range(args.channels))
        add_s = pipelined(stub, adds, args.inflight)
        return {"join/s": args.memberships / join_s, "add100/s": args.channels / add_s,
                "list100 us": list_us(stub, 100, args.lists),
                "list1000 us": list_us(stub, 1000, max(args.lists // 10, 3)),
                "walk100 ms": walk_ms(stub, args.memberships)}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--memberships", type=int, default=10000)
    ap.add_argument("--channels", type=int, default=300)
    ap.add_argument("--inflight", type=int, default=32)
    ap.add_argument("--lists", type=int, default=200)
    ap.add_argument("--slotd", default=os.path.join(REPO, "build", "bin", "slotd"))
    args = ap.parse_args()
    if not (1 <= args.runs <= 20 and 100 <= args.memberships <= 100000 and
            1 <= args.channels <= 10000 and 1 <= args.inflight <= 256 and 3 <= args.lists <= 10000):
        raise SystemExit("typed-meta: --runs 1..20, --memberships 100..100000, --channels "
                         "1..10000, --inflight 1..256, --lists 3..10000")
    results = []
    for run in range(args.runs):
        r = one_run(args)
        results.append(r)
        print("run %d: " % (run + 1) + ", ".join("%s %.0f" % kv for kv in r.items()), flush=True)
    print("median of %d runs: " % args.runs + ", ".join(
        "%s %.0f" % (k, statistics.median(r[k] for r in results)) for k in results[0]))


if __name__ == "__main__":
    main()
