#!/usr/bin/env bash
# scripts/bench/balance-put.sh - durable put/s on 3 nodes steady, then while the balancer moves replicas onto 2 joined nodes.
# One run: nodes 1-3 (--balance 1, paused with slotctl balance off) loaded with KEYS keys; steady
# put/s for DURATION s; nodes 4 and 5 join (--balance 1); slotctl balance on and put/s for
# DURATION s again while the moves run; slotd_balance_moves_total (summed over the 5 nodes) read
# before and after that window; then waits (at most SETTLE_S) until balance status says balanced
# and every planned move has ended. slotbench does not retry: a put refused while a group's
# leader moves counts as an error (the codes are printed).
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_NAME=bench-balance
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
DURATION=${DURATION:-20}
CONCURRENCY=${CONCURRENCY:-64}
KEYS=${KEYS:-10000}
MAX_MOVES=${MAX_MOVES:-2}
SETTLE_S=${SETTLE_S:-180}
READY_TRIES=80 # x 0.5 s
STOP_TRIES=100 # x 0.1 s after SIGTERM, then SIGKILL

bench_range DURATION 1 600 s
bench_range CONCURRENCY 1 4096
bench_range KEYS 1 10000000
bench_range MAX_MOVES 1 64
bench_range SETTLE_S 1 3600 s
bench_built slotd slotbench slotctl

bench_setup bench-balance

# 5 client, 5 peer and 5 metrics ports: ports[n-1], ports[n+4], ports[n+9] for node n.
read -r -a ports <<<"$(bench_free_ports 15)"
peers=""
for n in 1 2 3; do peers+="${peers:+,}$n=127.0.0.1:${ports[n+4]}"; done
addr() { echo "127.0.0.1:${ports[$1-1]}"; }
ep3="$(addr 1),$(addr 2),$(addr 3)"
ep5="$ep3,$(addr 4),$(addr 5)"
start_node() { # start_node N ARGS...: slotd node N in the background, its pid in pids
  local n=$1
  shift
  "$bin"/slotd --node-id "$n" --listen "$(addr "$n")" --peer-listen 127.0.0.1:"${ports[n+4]}" \
    --metrics-listen 127.0.0.1:"${ports[n+9]}" --data-dir "$dir/data$n" --balance 1 \
    --balance-max-moves "$MAX_MOVES" "$@" >"$dir/slotd$n.log" 2>&1 &
  pids+=($!)
}

# slotd_balance_moves_total{result=R} summed over every node's /metrics: "planned done failed".
moves() {
  $PY - "${ports[@]:10:5}" <<'PYEOF'
import re, sys, urllib.request
tot = {"planned": 0, "done": 0, "failed": 0}
for port in sys.argv[1:]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=2.0) as r:
            text = r.read().decode()
    except OSError:
        continue  # node 4 or 5 not started yet
    for m in re.finditer(r'^slotd_balance_moves_total\{result="(\w+)"\} (\d+)', text, re.M):
        tot[m.group(1)] = tot.get(m.group(1), 0) + int(m.group(2))
print(tot["planned"], tot["done"], tot["failed"])
PYEOF
}

# balance_status_is WANT: slotctl balance status --json says WANT ("plan": paused with a plan
# of at least one move, "balanced": balanced with no move left).
balance_status_is() {
  "$bin"/slotctl --endpoints "$ep5" --json balance status 2>/dev/null | $PY -c '
import json, sys
j, want = json.load(sys.stdin), sys.argv[1]
if want == "plan":
    sys.exit(0 if j.get("paused") and j.get("moves") else 1)
sys.exit(0 if j.get("balanced") and not j.get("moves") else 1)' "$1"
}

# Every group has a leader node 1 knows of: a route-aware read run sends all calls direct.
leaders_known() {
  "$bin"/slotbench --endpoints "$ep3" --keys "$KEYS" --route-aware --op get --concurrency 4 \
    --ops 400 --duration 5 --json 2>/dev/null | $PY -c '
import json, sys
r = json.load(sys.stdin)["run"]
sys.exit(0 if r["errors_total"] == 0 and r["fallback"] == 0 and r["direct"] > 0 else 1)'
}

put_run() { # put_run OUT: DURATION s of route-aware durable puts through nodes 1-3
  "$bin"/slotbench --endpoints "$ep3" --keys "$KEYS" --key-size 64 --value-size 256 --route-aware \
    --op put --concurrency "$CONCURRENCY" --duration "$DURATION" --json >"$1"
}

for n in 1 2 3; do start_node "$n" --peers "$peers" --bootstrap-expect 3; done
wait_for "nodes 1-3 serving" slotd_serving "$(addr 1)" "$(addr 2)" "$(addr 3)"
wait_for "a leader for every group" leaders_known
"$bin"/slotctl --endpoints "$ep3" balance off >/dev/null || die "slotctl balance off failed"
log "populating $KEYS keys"
"$bin"/slotbench --endpoints "$ep3" --keys "$KEYS" --key-size 64 --value-size 256 --route-aware \
  --op put --concurrency 64 --duration 1 --populate --json >"$dir/populate.json"
bench_populate_check bench-balance "$dir/populate.json" "3 nodes"

log "steady: ${DURATION}s of puts at $CONCURRENCY in flight on 3 nodes"
put_run "$dir/steady.json"

for n in 4 5; do start_node "$n" --join 127.0.0.1:"${ports[5]}"; done
wait_for "nodes 4 and 5 serving" slotd_serving "$(addr 4)" "$(addr 5)"
wait_for "a paused plan moving replicas to nodes 4 and 5" balance_status_is plan
read -r p0 d0 f0 <<<"$(moves)"
"$bin"/slotctl --endpoints "$ep5" balance on >/dev/null || die "slotctl balance on failed"
t_on=$(date +%s.%N)
log "during balance: ${DURATION}s of puts at $CONCURRENCY in flight"
put_run "$dir/during.json"
read -r p1 d1 f1 <<<"$(moves)"
balanced_s=""
while :; do
  now=$(date +%s.%N)
  read -r pn dn fn <<<"$(moves)"
  if ((dn + fn >= pn)) && balance_status_is balanced; then balanced_s=$($PY -c "print('%.1f' % ($now - $t_on))"); break; fi
  $PY -c "import sys; sys.exit(0 if $now - $t_on < $SETTLE_S else 1)" || break
  sleep 0.5
done
read -r p2 d2 f2 <<<"$(moves)"

echo "# slotd 3 nodes on loopback + 2 joined, $(nproc) cores (shared machine), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# command: scripts/bench/balance-put.sh (DURATION=$DURATION CONCURRENCY=$CONCURRENCY KEYS=$KEYS MAX_MOVES=$MAX_MOVES BUILD=$BUILD)"
$PY - "$dir" "$p0" "$d0" "$f0" "$p1" "$d1" "$f1" "$p2" "$d2" "$f2" "${balanced_s:-}" "$SETTLE_S" <<'PYEOF'
import json, sys
d = sys.argv[1]
p0, d0, f0, p1, d1, f1, p2, d2, f2 = map(int, sys.argv[2:11])
balanced, settle = sys.argv[11], sys.argv[12]
runs = {k: json.load(open(f"{d}/{k}.json"))["run"] for k in ("steady", "during")}
print("| put (durable), route-aware | ops/s | p50 ms | p99 ms | errors | balance moves planned / done / failed in the window |")
print("|---|---|---|---|---|---|")
for k, label, mv in (("steady", "steady, 3 nodes, balancer paused", "-"),
                     ("during", "during balance (3 -> 5 nodes)",
                      f"{p1 - p0} / {d1 - d0} / {f1 - f0}")):
    r = runs[k]
    print(f"| {label} | {r['ops_per_s']:.0f} | {r['latency_us']['p50'] / 1000:.2f} | "
          f"{r['latency_us']['p99'] / 1000:.2f} | {r['errors_total']} | {mv} |")
ratio = runs["during"]["ops_per_s"] / runs["steady"]["ops_per_s"]
print(f"during/steady put/s: {ratio:.2f}")
for k in ("steady", "during"):
    r = runs[k]
    if r["errors_total"]:
        print(f"{k} errors (not retried by slotbench): {json.dumps(r['errors'])} "
              f"details {json.dumps(r['error_details'])}")
print("balanced (status balanced, every planned move ended) %s after balance on; moves planned / done / failed in all: %d / %d / %d"
      % (f"{balanced} s" if balanced else f"NOT within {settle} s", p2 - p0, d2 - d0, f2 - f0))
if p1 == p0:
    sys.exit("bench-balance: no balance move was planned during the measured window")
PYEOF
