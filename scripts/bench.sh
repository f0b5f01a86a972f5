#!/usr/bin/env bash
# scripts/bench.sh - `make bench-single`: single-node slotd, durable Propose/s and linearizable Get/s at
# 1, 16, 64 and 256 in flight, ROUNDS rounds each, medians with p50/p99 (slotbench, C gRPC client).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONCS=${CONCS:-"1 16 64 256"}
PY=/usr/bin/python3
bin=$BUILD/bin

port=$($PY -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
dir=$(mktemp -d /tmp/slotd-bench.XXXXXX)
"$bin"/slotd --listen 127.0.0.1:"$port" --data-dir "$dir/data" >"$dir/slotd.log" 2>&1 &
pid=$!
cleanup() { kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; rm -rf "$dir"; }
trap cleanup EXIT

# Wait (bounded) until grpc.health.v1.Health/Check answers SERVING (bytes 08 01).
ready=0
for _ in $(seq 60); do
  if $PY -c 'import sys, grpc
ch = grpc.insecure_channel(sys.argv[1])
try:
    sys.exit(ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=1.0) != b"\x08\x01")
except grpc.RpcError:
    sys.exit(1)' 127.0.0.1:"$port" 2>/dev/null; then ready=1; break; fi
  sleep 0.5
done
if [[ $ready != 1 ]]; then
  echo "bench: slotd not serving after 30 s; log:" >&2
  tail -n 20 "$dir/slotd.log" >&2
  exit 1
fi

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
