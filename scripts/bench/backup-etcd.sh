#!/usr/bin/env bash
# scripts/bench/backup-etcd.sh - backup and restore MB/s of slotd vs etcd 3.4 on the same keyspace.
# One slotd node and one etcd member on the same disk, both loaded by slotbench with the same keys
# (SIZE_MB of key + value bytes: 64-byte keys, VALUE_SIZE-byte values); then, ROUNDS times,
# alternating: `slotctl backup save` vs `etcdctl snapshot save`, and `slotd restore` vs
# `etcdctl snapshot restore` (etcd 3.4's restore; etcdutl came with 3.5) into new data dirs.
# slotd's RSS is sampled every 20 ms while its backup runs (peak, and before). Prints every run
# and a markdown table of the medians (BENCHMARKS.md "Backup and restore"). Not part of make test.
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_NAME=backup-etcd
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
SIZE_MB=${SIZE_MB:-1024}
VALUE_SIZE=${VALUE_SIZE:-1024}
ROUNDS=${ROUNDS:-3}
ETCD=${ETCD:-etcd}
ETCDCTL=${ETCDCTL:-etcdctl}
ETCD_QUOTA=$((8 * 1024 * 1024 * 1024))

bench_range SIZE_MB 1 8192
bench_range VALUE_SIZE 16 65536
bench_range ROUNDS 1 10
bench_built slotd slotctl slotbench
command -v "$ETCD" >/dev/null && command -v "$ETCDCTL" >/dev/null ||
  die "etcd and etcdctl needed: apt-get install etcd-server etcd-client"
KEYS=$((SIZE_MB * 1024 * 1024 / (64 + VALUE_SIZE)))

dir=$(mktemp -d /tmp/backup-etcd.XXXXXX)
pids=()
cleanup() {
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

read -r sport speer eport epeer <<<"$(bench_free_ports 4)"
saddr=127.0.0.1:$sport eaddr=127.0.0.1:$eport

"$bin"/slotd --node-id 1 --listen "$saddr" --peer-listen "127.0.0.1:$speer" --metrics-listen "" \
  --data-dir "$dir/slotd" >"$dir/slotd.log" 2>&1 &
spid=$!
pids+=("$spid")
"$ETCD" --name e1 --data-dir "$dir/etcd" --listen-client-urls "http://$eaddr" \
  --advertise-client-urls "http://$eaddr" --listen-peer-urls "http://127.0.0.1:$epeer" \
  --initial-advertise-peer-urls "http://127.0.0.1:$epeer" --initial-cluster "e1=http://127.0.0.1:$epeer" \
  --quota-backend-bytes "$ETCD_QUOTA" --logger zap --log-outputs stderr --log-level warn \
  >"$dir/etcd.log" 2>&1 &
pids+=($!)

ready() { # TARGET ENDPOINT: 2000 puts over 2000 keys (every group of slotd) without an error
  "$bin"/slotbench --target "$1" --endpoints "$2" --keys 2000 --op put --ops 2000 --duration 5 \
    --json 2>/dev/null | $PY -c 'import json, sys
r = json.load(sys.stdin)["run"]
sys.exit(0 if r["errors_total"] == 0 and r["ok"] > 0 else 1)' 2>/dev/null
}
for t in "slotd $saddr" "etcd $eaddr"; do
  for i in $(seq 60); do ready $t && break; sleep 0.5; ((i < 60)) || die "$t not ready"; done
done

populate() { # TARGET ENDPOINT
  log "populating $1: $KEYS keys of 64 + $VALUE_SIZE bytes"
  local t0=$SECONDS
  "$bin"/slotbench --target "$1" --endpoints "$2" --keys "$KEYS" --key-size 64 \
    --value-size "$VALUE_SIZE" --op put --concurrency ${POPULATE_INFLIGHT:-64} --duration 1 --ops 1 --populate \
    --deadline-ms 30000 --json >"$dir/populate-$1.json" 2>"$dir/populate-$1.err" ||
    { cat "$dir/populate-$1.err" >&2; die "populating $1 failed"; }
  $PY - "$dir/populate-$1.json" "$1" <<'PYEOF' || die "populating $1 incomplete"
import json, sys
r = json.load(open(sys.argv[1]))
if r["populated_keys"] != r["keys"] or r["populate"]["errors_total"]:
    sys.exit("%s: wrote %d of %d keys, %d errors: %s" % (
        sys.argv[2], r["populated_keys"], r["keys"], r["populate"]["errors_total"],
        {k: v for k, v in r["populate"].items() if k.startswith("error")}))
PYEOF
  log "populated $1 in $((SECONDS - t0)) s"
}
populate slotd "$saddr"
populate etcd "$eaddr"

now() { date +%s.%N; }
# rss_kb: slotd's VmRSS and RssAnon (kB). VmRSS counts the pages of LevelDB's mmapped table files
# a scan touches (RssFile: page cache, shared, reclaimable); RssAnon is the process's own memory.
rss_kb() { awk '/^VmRSS:/ {r = $2} /^RssAnon:/ {a = $2} END {print r, a}' "/proc/$spid/status"; }
# sample_rss OUT: the largest VmRSS and RssAnon of slotd until the file OUT.stop exists
sample_rss() {
  local max=0 amax=0 r a
  while [[ ! -e $1.stop ]]; do
    read -r r a <<<"$(rss_kb)"
    ((r > max)) && max=$r
    ((a > amax)) && amax=$a
    sleep 0.02
  done
  echo "$max $amax" >"$1"
}

results=$dir/results.txt
: >"$results"
for round in $(seq "$ROUNDS"); do
  # slotd backup
  rm -f "$dir/s.bak" "$dir/rss" "$dir/rss.stop"
  before=$(rss_kb | tr ' ' ,)
  sample_rss "$dir/rss" &
  sampler=$!
  t0=$(now)
  "$bin"/slotctl --endpoints "$saddr" backup save "$dir/s.bak" >"$dir/save.out" 2>"$dir/save.err" ||
    { cat "$dir/save.err" >&2; die "slotctl backup save failed"; }
  t1=$(now)
  touch "$dir/rss.stop"
  wait "$sampler"
  sbytes=$(stat -c %s "$dir/s.bak")
  echo "slotd backup $round $t0 $t1 $sbytes $before $(tr ' ' , <"$dir/rss")" >>"$results"
  # etcd snapshot save
  rm -f "$dir/e.db"
  t0=$(now)
  "$ETCDCTL" --endpoints "$eaddr" snapshot save "$dir/e.db" >/dev/null 2>"$dir/esave.err" ||
    { cat "$dir/esave.err" >&2; die "etcdctl snapshot save failed"; }
  t1=$(now)
  echo "etcd backup $round $t0 $t1 $(stat -c %s "$dir/e.db") 0,0 0,0" >>"$results"
  # slotd restore
  rm -rf "$dir/srest"
  t0=$(now)
  "$bin"/slotd restore --from "$dir/s.bak" --data-dir "$dir/srest" --node-id 1 >/dev/null ||
    die "slotd restore failed"
  t1=$(now)
  echo "slotd restore $round $t0 $t1 $sbytes 0,0 0,0" >>"$results"
  # etcd restore (3.4: etcdctl snapshot restore)
  rm -rf "$dir/erest"
  t0=$(now)
  ETCDCTL_API=3 "$ETCDCTL" snapshot restore "$dir/e.db" --data-dir "$dir/erest" \
    >/dev/null 2>"$dir/erest.err" || { cat "$dir/erest.err" >&2; die "etcdctl snapshot restore failed"; }
  t1=$(now)
  echo "etcd restore $round $t0 $t1 $(stat -c %s "$dir/e.db") 0,0 0,0" >>"$results"
done

grep -o 'snapshot_us=[0-9]*' "$dir/slotd.log" | tr '\n' ' ' | sed 's/^/slotd backup done lines: /' >&2
echo >&2
$PY - "$results" "$KEYS" "$VALUE_SIZE" "$SIZE_MB" <<'PYEOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
keys, value, size_mb = int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
logical = keys * (64 + value) / 2**20
print("keyspace: %d keys x (64 + %d) bytes = %.0f MiB of keys and values" % (keys, value, logical))
print("\nevery run (system what round seconds file_MiB MiB/s of file, MiB/s of keyspace)")
by = {}
for sysname, what, rnd, t0, t1, size, before, peak in rows:
    s = float(t1) - float(t0)
    mib = int(size) / 2**20
    by.setdefault((sysname, what), []).append(
        (s, mib, [int(x) for x in before.split(",")], [int(x) for x in peak.split(",")]))
    print("  %-5s %-7s %s  %7.2f s  %7.1f MiB  %7.1f MiB/s  %7.1f MiB/s" % (
        sysname, what, rnd, s, mib, mib / s, logical / s))
print("\n| | slotd | etcd 3.4 | slotd/etcd |\n|---|---|---|---|")
for what in ("backup", "restore"):
    med = {}
    for sysname in ("slotd", "etcd"):
        runs = by[(sysname, what)]
        med[sysname] = statistics.median(logical / r[0] for r in runs)
    print("| %s, MiB/s of keyspace (median of %d) | %.0f | %.0f | %.2f |" % (
        what, len(by[("slotd", what)]), med["slotd"], med["etcd"], med["slotd"] / med["etcd"]))
for sysname in ("slotd", "etcd"):
    print("| backup file size, MiB (%s) | %s |" % (sysname, " / ".join(
        "%.0f" % r[1] for r in by[(sysname, "backup")])))
runs = by[("slotd", "backup")]
fmt = lambda xs: " / ".join("%.0f" % (x / 1024) for x in xs)
print("\nslotd during each backup: VmRSS peak %s MiB (before %s); RssAnon peak %s MiB (before %s)"
      % (fmt(r[3][0] for r in runs), fmt(r[2][0] for r in runs), fmt(r[3][1] for r in runs),
         fmt(r[2][1] for r in runs)))
PYEOF
