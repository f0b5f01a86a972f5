#!/usr/bin/env bash
# scripts/bench_cluster.sh - 3-node slotd on loopback: Propose/s and linearizable Get/s at 16, 64
# and 256 in flight, sent direct to each group's leader (slotbench --route-aware) vs round robin
# over all nodes (followers forward), ROUNDS rounds each, medians with p50/p99; then the balance
# row (scripts/bench/balance-put.sh: put/s steady vs during a 3 -> 5 balance, BALANCE=0 skips).
set -euo pipefail
cd "$(dirname "$0")/.."
BENCH_NAME=bench_cluster
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
CONCS=${CONCS:-"16 64 256"}
NODES=3
READY_TRIES=60 # x 0.5 s: every node serving, then every group's leader known
STOP_TRIES=100 # x 0.1 s after SIGTERM, then SIGKILL

bench_built slotd slotbench

read -r -a ports <<<"$(bench_free_ports 6)"
bench_setup slotd-bench-cluster

peers=""
endpoints=""
addrs=()
for n in $(seq $NODES); do
  addrs+=("127.0.0.1:${ports[n-1]}")
  peers+="${peers:+,}$n=127.0.0.1:${ports[n+2]}"
  endpoints+="${endpoints:+,}127.0.0.1:${ports[n-1]}"
done
for n in $(seq $NODES); do
  "$bin"/slotd --node-id "$n" --listen 127.0.0.1:"${ports[n-1]}" \
    --peer-listen 127.0.0.1:"${ports[n+2]}" --data-dir "$dir/data$n" \
    --peers "$peers" >"$dir/slotd$n.log" 2>&1 &
  pids+=($!)
done

wait_for "slotd nodes" slotd_serving "${addrs[@]}"

common=(--endpoints "$endpoints" --keys 10000 --key-size 64 --value-size 256 --json)
# Every group has a leader the first node knows of once a route-aware read run sends all of its
# calls direct and none fails.
leaders_known() {
  "$bin"/slotbench "${common[@]}" --route-aware --op get --concurrency 4 --ops 400 \
    --duration 5 2>/dev/null | $PY -c '
import json, sys
r = json.load(sys.stdin)["run"]
sys.exit(0 if r["errors_total"] == 0 and r["fallback"] == 0 and r["direct"] > 0 else 1)'
}
wait_for "a leader for every group" leaders_known
"$bin"/slotbench "${common[@]}" --route-aware --op put --concurrency 64 --duration 1 --populate \
  | $PY -c '
import json, sys
r = json.load(sys.stdin)
if r["populated_keys"] != r["keys"]:
    sys.exit("bench_cluster: populate wrote %d of %d keys" % (r["populated_keys"], r["keys"]))'

echo "# slotd $NODES nodes on loopback, $(nproc) cores, ${DURATION}s per run, $ROUNDS rounds, medians"
echo "# command: scripts/bench_cluster.sh (ROUNDS=$ROUNDS DURATION=$DURATION BUILD=$BUILD)"
read -r -a concs <<<"$CONCS"
for op in put get; do
  for c in "${concs[@]}"; do
    for _ in $(seq "$ROUNDS"); do
      # the two modes alternate so that drift on a shared machine hits both alike
      "$bin"/slotbench "${common[@]}" --route-aware --op "$op" --concurrency "$c" \
        --duration "$DURATION" >>"$dir/$op-$c-direct.json"
      "$bin"/slotbench "${common[@]}" --op "$op" --concurrency "$c" \
        --duration "$DURATION" >>"$dir/$op-$c-forward.json"
    done
  done
done
$PY - "$dir" "${concs[@]}" <<'PYEOF'
import json, statistics, sys
d, concs = sys.argv[1], sys.argv[2:]
print("| op | in flight | mode | ops/s (median) | p50 ms | p99 ms | errors | direct % |")
print("|---|---|---|---|---|---|---|---|")
for op in ("put", "get"):
    for c in concs:
        for mode, name in (("direct", "direct to leaders"), ("forward", "through forwarding")):
            runs = [json.loads(l)["run"] for l in open(f"{d}/{op}-{c}-{mode}.json") if l.strip()]
            med = lambda f: statistics.median(f(r) for r in runs)
            sent = sum(r["direct"] + r["fallback"] for r in runs)
            direct = (f"{100.0 * sum(r['direct'] for r in runs) / sent:.1f}"
                      if mode == "direct" and sent else "-")
            label = "put (durable)" if op == "put" else "get (linearizable)"
            print(f"| {label} | {c} | {name} | {med(lambda r: r['ops_per_s']):.0f} | "
                  f"{med(lambda r: r['latency_us']['p50'])/1000:.2f} | "
                  f"{med(lambda r: r['latency_us']['p99'])/1000:.2f} | "
                  f"{sum(r['errors_total'] for r in runs)} | {direct} |")
PYEOF
# The balance row (BALANCE=0 skips it): this cluster stops first, then
# scripts/bench/balance-put.sh measures steady put/s on 3 nodes and put/s while the balancer
# moves replicas onto 2 joined nodes, in one run.
if [[ ${BALANCE:-1} != 0 ]]; then
  bench_cleanup
  pids=()
  trap - EXIT
  BUILD=$BUILD DURATION=${BALANCE_DURATION:-20} scripts/bench/balance-put.sh
fi
