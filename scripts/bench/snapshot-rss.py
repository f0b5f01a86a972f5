#!/usr/bin/python3
"""snapshot-rss.py - the leader's and the follower's memory while one slot group's snapshot moves.

Three nodes, one slot group. A follower is stopped, MIB MiB of rows are written (16 KiB values)
so the leader compacts its log past it, the follower is restarted and catches up by a snapshot.
Samples the leader's and the restarted follower's VmRSS and RssAnon (/proc) every 20 ms from the
restart (the follower from its exec, before it serves) until the follower logs 'snapshot
installed'; prints for each the values before (the follower: its first sample, 0 when taken
before the exec), the peaks, the differences and the seconds taken.

Usage: SLOTD_BIN=path/to/slotd scripts/bench/snapshot-rss.py [--mib 200] [--chunk-bytes N]
(--chunk-bytes passes --snapshot-chunk-bytes; leave it out for a binary without the flag)."""

import argparse
import os
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "tests", "e2e"))
import slotd_harness as h  # noqa: E402
from slotd_harness import pb  # noqa: E402

VALUE_BYTES = 16384
IN_FLIGHT = 32


def rss_kib(pid):
    """(VmRSS, RssAnon) in KiB: RssAnon leaves out the pages of LevelDB's mmap'ed table files."""
    got = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            if line.startswith(("VmRSS:", "RssAnon:")):
                got[line.split(":")[0]] = int(line.split()[1])
    return got.get("VmRSS", 0), got.get("RssAnon", 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--mib", type=int, default=200)
    ap.add_argument("--chunk-bytes", type=int, default=0)
    a = ap.parse_args()
    extra = ["--compact-entries", "1000", "--compact-tail", "100"]
    if a.chunk_bytes:
        extra += ["--snapshot-chunk-bytes", str(a.chunk_bytes)]
    work = tempfile.mkdtemp(prefix="snapshot-rss-")
    c = h.SlotdCluster(work, size=3, slot_groups=1, extra_args=extra).start()
    try:
        leader = c.leaders(c.wait_leaders())[1]
        lagger = max(n for n in c.node_ids if n != leader)
        c.stop(lagger)
        c.wait_leaders(via=leader, exclude={lagger})
        n = a.mib * 1024 * 1024 // VALUE_BYTES
        stub = c.stub(leader)
        t0 = time.monotonic()
        for start in range(0, n, IN_FLIGHT):
            fs = [stub.Propose.future(pb.ProposeRequest(
                request_id=b"rss/%08d" % i,
                put=pb.PutCommand(key=b"rss/%08d" % i, value=os.urandom(VALUE_BYTES // 2).hex()
                                  .encode())), timeout=30)
                  for i in range(start, min(n, start + IN_FLIGHT))]
            for f in fs:
                f.result()
        sys.stderr.write("wrote %d rows of %d bytes in %.1f s\n"
                         % (n, VALUE_BYTES, time.monotonic() - t0))
        pid = c.server(leader).proc.pid
        before = rss_kib(pid)
        follower = c.server(lagger)
        follower._spawn()  # no wait for SERVING: the transfer may start before
        follower._open_channel()
        fpid = follower.proc.pid
        fbefore = rss_kib(fpid)
        peak, fpeak, t0 = before, fbefore, time.monotonic()
        while not follower.log_lines('msg="snapshot installed"', True):
            now, fnow = rss_kib(pid), rss_kib(fpid)
            peak = (max(peak[0], now[0]), max(peak[1], now[1]))
            fpeak = (max(fpeak[0], fnow[0]), max(fpeak[1], fnow[1]))
            if time.monotonic() - t0 > 600:
                raise SystemExit("no snapshot installed within 600 s")
            time.sleep(0.02)
        print("leader VmRSS before %d MiB, peak while sending %d MiB (+%d MiB); RssAnon %d -> %d "
              "MiB (+%d MiB); %.1f s; %s"
              % (before[0] // 1024, peak[0] // 1024, (peak[0] - before[0]) // 1024,
                 before[1] // 1024, peak[1] // 1024, (peak[1] - before[1]) // 1024,
                 time.monotonic() - t0,
                 (c.server(leader).log_lines('msg="snapshot sent"', True) or ["(no 'sent' line)"])
                 [-1].split("msg=")[-1]))
        # The first sample is taken right after the spawn: 0 when the exec had not happened yet.
        print("follower VmRSS first sample %d MiB, peak while receiving and installing %d MiB "
              "(+%d MiB); RssAnon %d -> %d MiB (+%d MiB)"
              % (fbefore[0] // 1024, fpeak[0] // 1024, (fpeak[0] - fbefore[0]) // 1024,
                 fbefore[1] // 1024, fpeak[1] // 1024, (fpeak[1] - fbefore[1]) // 1024))
    finally:
        for s in c.servers.values():
            if s.running():
                s.stop()


if __name__ == "__main__":
    main()
