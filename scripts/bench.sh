#!/usr/bin/env bash
# scripts/bench.sh - `make bench-single`: single-node slotd, durable Propose/s and linearizable Get/s at
# 1, 16, 64 and 256 in flight, ROUNDS rounds each, medians with p50/p99 (slotbench, C gRPC client).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONCS=${CONCS:-"1 16 64 256"}

READY_TRIES=60 # x 0.5 s until slotd serves
STOP_TRIES=100 # x 0.1 s after SIGTERM, then SIGKILL

bench_built slotd slotbench

port=$(bench_free_ports 1)
bench_setup slotd-bench
"$bin"/slotd --listen 127.0.0.1:"$port" --data-dir "$dir/data" >"$dir/slotd.log" 2>&1 &
pids+=($!)
wait_for slotd slotd_serving 127.0.0.1:"$port"

common=(--endpoints 127.0.0.1:"$port" --keys 10000 --key-size 64 --value-size 256 --json)
"$bin"/slotbench "${common[@]}" --op put --concurrency 64 --duration 1 --populate >/dev/null

echo "# slotd single node, $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds, medians"
echo "# command: make bench-single ROUNDS=$ROUNDS DURATION=$DURATION"
for op in put get; do
  for c in $CONCS; do
    for r in $(seq "$ROUNDS"); do
      "$bin"/slotbench "${common[@]}" --op "$op" --concurrency "$c" --duration "$DURATION"
      echo
    done >"$dir/$op-$c.json"
  done
done
$PY - "$dir" $CONCS <<'PYEOF'
import json, statistics, sys
d, concs = sys.argv[1], sys.argv[2:]
print("| op | in flight | ops/s (median) | p50 ms | p99 ms | errors | client CPU % |")
print("|---|---|---|---|---|---|---|")
for op in ("put", "get"):
    for c in concs:
        runs = [json.loads(l)["run"] for l in open(f"{d}/{op}-{c}.json") if l.strip()]
        med = lambda f: statistics.median(f(r) for r in runs)
        name = "Propose (put, durable)" if op == "put" else "Read (get, linearizable)"
        print(f"| {name} | {c} | {med(lambda r: r['ops_per_s']):.0f} | "
              f"{med(lambda r: r['latency_us']['p50'])/1000:.2f} | "
              f"{med(lambda r: r['latency_us']['p99'])/1000:.2f} | "
              f"{sum(r['errors_total'] for r in runs)} | {med(lambda r: r['client_cpu_pct']):.0f} |")
PYEOF
