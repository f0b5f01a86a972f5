#!/usr/bin/python3
"""range-latency.py - latency of reading 1,000 keys under a prefix: slotd (Read range pages until
more is false) against etcd 3.4 (one KV.Range over [prefix, prefix_end)), one node each on this
machine, same client (Python grpcio, one call in flight), rounds alternating between the two.

Usage: scripts/bench/range-latency.py [--rounds 3] [--ranges 200] [--keys 1000] [--others 9000]
Needs build/bin/slotd and etcd (etcd-server; installed with apt-get when missing). Prints one line
per round and target, then the medians over all rounds and the slotd/etcd ratio."""

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
PUT_BATCH = 64  # puts in flight while populating
PREFIX = b"range/"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def etcd_stubs(workdir):
    """Generates Python stubs for clients/bench/proto/etcd_rpc.proto into workdir; returns
    (messages module, KVStub)."""
    src = os.path.join(REPO, "clients", "bench", "proto")
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + src,
                    "--python_out=" + workdir, "--grpc_python_out=" + workdir,
                    "etcd_rpc.proto"], check=True)
    sys.path.insert(0, workdir)
    import etcd_rpc_pb2  # noqa: E402
    import etcd_rpc_pb2_grpc  # noqa: E402
    return etcd_rpc_pb2, etcd_rpc_pb2_grpc.KVStub


def wait_ready(fn, what):
    deadline = time.monotonic() + READY_S
    while True:
        try:
            fn()
            return
        except grpc.RpcError:
            if time.monotonic() > deadline:
                raise SystemExit("range-latency: %s not ready after %.0f s" % (what, READY_S))
            time.sleep(0.2)


def populate(put, keys, others):
    """Puts keys under PREFIX and others outside it, PUT_BATCH in flight."""
    names = [PREFIX + b"%06d" % i for i in range(keys)] + [b"other/%06d" % i for i in range(others)]
    for i in range(0, len(names), PUT_BATCH):
        for f in [put(k, b"v" * 64) for k in names[i:i + PUT_BATCH]]:
            f.result()


def slotd_range(stub):
    """Every key under PREFIX, page after page (linearizable); returns (entries, pages)."""
    cursor, n, pages = b"", 0, 0
    while True:
        r = stub.Read(pb.ReadRequest(range=pb.RangeQuery(prefix=PREFIX, limit=1000, cursor=cursor)),
                      timeout=10).range
        n += len(r.entries)
        pages += 1
        if not r.more:
            return n, pages
        cursor = r.cursor


def measure(fn, count):
    lat = []
    for _ in range(count):
        t0 = time.perf_counter()
        fn()
        lat.append((time.perf_counter() - t0) * 1e6)
    lat.sort()
    return statistics.median(lat), lat[int(len(lat) * 0.99) - 1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--ranges", type=int, default=200)
    ap.add_argument("--keys", type=int, default=1000)
    ap.add_argument("--others", type=int, default=9000)
    a = ap.parse_args()
    if not (1 <= a.rounds <= 20 and 1 <= a.ranges <= 100000 and 1 <= a.keys <= 100000 and
            0 <= a.others <= 1000000):
        ap.error("--rounds 1..20, --ranges 1..100000, --keys 1..100000, --others 0..1000000")
    slotd_bin = os.path.join(REPO, "build", "bin", "slotd")
    if not os.access(slotd_bin, os.X_OK):
        raise SystemExit("range-latency: %s not built" % slotd_bin)
    if shutil.which("etcd") is None:
        subprocess.run(["apt-get", "install", "-y", "-qq", "etcd-server"], check=True,
                        env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"),
                        stdout=subprocess.DEVNULL)
    work = tempfile.mkdtemp(prefix="range-latency.")
    procs = []
    try:
        etcd_pb, KVStub = etcd_stubs(work)
        sp, ep, epp = free_port(), free_port(), free_port()
        procs.append(subprocess.Popen(
            [slotd_bin, "--listen", "127.0.0.1:%d" % sp, "--data-dir", work + "/slotd",
             "--metrics-listen", ""], stdout=open(work + "/slotd.log", "w"),
            stderr=subprocess.STDOUT))
        procs.append(subprocess.Popen(
            ["etcd", "--data-dir", work + "/etcd", "--listen-client-urls",
             "http://127.0.0.1:%d" % ep, "--advertise-client-urls", "http://127.0.0.1:%d" % ep,
             "--listen-peer-urls", "http://127.0.0.1:%d" % epp, "--initial-advertise-peer-urls",
             "http://127.0.0.1:%d" % epp, "--initial-cluster", "default=http://127.0.0.1:%d" % epp],
            stdout=open(work + "/etcd.log", "w"), stderr=subprocess.STDOUT))
        slotd = pb_grpc.MetadataStub(grpc.insecure_channel("127.0.0.1:%d" % sp))
        etcd = KVStub(grpc.insecure_channel("127.0.0.1:%d" % ep))
        wait_ready(lambda: slotd.Read(pb.ReadRequest(get=pb.GetQuery(key=b"x")), timeout=2),
                   "slotd")
        wait_ready(lambda: etcd.Range(etcd_pb.RangeRequest(key=b"x"), timeout=2), "etcd")
        populate(lambda k, v: slotd.Propose.future(
            pb.ProposeRequest(put=pb.PutCommand(key=k, value=v)), timeout=10), a.keys, a.others)
        populate(lambda k, v: etcd.Put.future(etcd_pb.PutRequest(key=k, value=v), timeout=10),
                 a.keys, a.others)
        end = PREFIX[:-1] + bytes([PREFIX[-1] + 1])
        n, pages = slotd_range(slotd)
        got = len(etcd.Range(etcd_pb.RangeRequest(key=PREFIX, range_end=end), timeout=10).kvs)
        if n != a.keys or got != a.keys:
            raise SystemExit("range-latency: slotd returned %d keys, etcd %d, want %d"
                             % (n, got, a.keys))
        print("range-latency: %d keys under %r among %d, slotd %d pages per range (one per "
              "slot group run), %d ranges per round and target, one in flight"
              % (a.keys, PREFIX.decode(), a.keys + a.others, pages, a.ranges))

        def etcd_range():
            etcd.Range(etcd_pb.RangeRequest(key=PREFIX, range_end=end), timeout=10)

        med = {"slotd": [], "etcd": []}
        for rnd in range(1, a.rounds + 1):
            for name, fn in (("slotd", lambda: slotd_range(slotd)), ("etcd", etcd_range)):
                m, p99 = measure(fn, a.ranges)
                med[name].append(m)
                print("round %d %-5s median %7.0f us  p99 %7.0f us" % (rnd, name, m, p99))
        ms, me = statistics.median(med["slotd"]), statistics.median(med["etcd"])
        print("median of round medians: slotd %.0f us, etcd %.0f us, slotd/etcd %.2f"
              % (ms, me, ms / me))
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(10)
            except subprocess.TimeoutExpired:
                p.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
