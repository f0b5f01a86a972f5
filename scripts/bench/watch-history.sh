#!/bin/bash
# scripts/bench/watch-history.sh - put/s with the watch history on (default 4 MiB) vs off (0), one node, alternating rounds.
# Usage: scripts/bench/watch-history.sh [ROUNDS]   (needs build/bin/slotd, slotctl, slotbench)
set -euo pipefail
cd "$(dirname "$0")/../.."
rounds=${1:-3}
pid=
dir=
cleanup() {
  [ -n "$pid" ] && kill "$pid" 2>/dev/null && wait "$pid" 2>/dev/null
  [ -n "$dir" ] && rm -rf "$dir"
  return 0
}
trap cleanup EXIT
for round in $(seq "$rounds"); do
  for hist in 4194304 0; do
    dir=$(mktemp -d)
    port=$((18000 + RANDOM % 1000))
    build/bin/slotd --listen 127.0.0.1:$port --data-dir "$dir" --metrics-listen "" \
      --watch-history-bytes $hist >"$dir/log" 2>&1 &
    pid=$!
    for _ in $(seq 50); do
      build/bin/slotctl --endpoints 127.0.0.1:$port health >/dev/null 2>&1 && break
      sleep 0.2
    done
    r=$(build/bin/slotbench --endpoints 127.0.0.1:$port --op put --concurrency 64 --duration 5 \
      --warmup 1 --json | /usr/bin/python3 -c \
      'import json,sys; d=json.load(sys.stdin)["run"]; print(int(d["ops_per_s"]), int(d["latency_us"]["p99"]))')
    echo "round $round watch-history-bytes=$hist put/s p99_us: $r"
    cleanup
    pid=
    dir=
  done
done
