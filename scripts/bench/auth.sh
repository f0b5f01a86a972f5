#!/usr/bin/env bash
# scripts/bench/auth.sh - put/s on one node, --auth 1 (token per call) vs --auth 0, medians.
# Same client (slotbench), both servers up at once, runs alternating, medians side by side.
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_NAME=bench-auth
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
ROUNDS=${ROUNDS:-5}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
CONCURRENCY=${CONCURRENCY:-64}
READY_TRIES=100 # x 0.1 s
STOP_TRIES=100  # x 0.1 s after SIGTERM, then SIGKILL

bench_range ROUNDS 1 20
bench_range DURATION 1 600 s
bench_whole WARMUP
bench_range CONCURRENCY 1 4096
bench_built slotd slotbench

bench_setup bench-auth

read -r port_off port_on peer_off peer_on <<<"$(bench_free_ports 4)"

printf 'bench root password\n' >"$dir/root.password"
"$bin"/slotd --listen 127.0.0.1:$port_off --peer-listen 127.0.0.1:$peer_off \
  --data-dir "$dir/off" --metrics-listen "" \
  >"$dir/off.log" 2>&1 &
pids+=($!)
"$bin"/slotd --listen 127.0.0.1:$port_on --peer-listen 127.0.0.1:$peer_on \
  --data-dir "$dir/on" --metrics-listen "" --auth 1 \
  --root-password-file "$dir/root.password" >"$dir/on.log" 2>&1 &
pids+=($!)

# A root token from the --auth node once it serves (the Python client, clients/python).
for _ in $(seq $READY_TRIES); do
  if $PY - 127.0.0.1:$port_on "$dir/root.password" >"$dir/token" 2>/dev/null <<'PYEOF'; then break; fi
import sys
sys.path.insert(0, "clients/python")
from slotd_client import client
c = client.Client(sys.argv[1], deadline=1.0)
print(c.authenticate("root", open(sys.argv[2]).read().strip()).token)
c.put(b"bench-auth-ready", b"1")
PYEOF
  sleep 0.1
done
[[ -s $dir/token ]] || die "no token from the --auth node: $(tail -3 "$dir/on.log")"

run() { # run MODE PORT PID N [slotbench args]: one measured run into $dir/MODE.N.json, and the
  # server's CPU ticks over warm-up and run into $dir/MODE.N.cpu
  local mode=$1 port=$2 pid=$3 n=$4 t0
  shift 4
  t0=$(cpu_ticks "$pid")
  "$bin"/slotbench --endpoints 127.0.0.1:$port --op put --concurrency "$CONCURRENCY" \
    --duration "$DURATION" --warmup "$WARMUP" --keys 10000 --json "$@" >"$dir/$mode.$n.json" ||
    die "slotbench $mode failed"
  echo $(($(cpu_ticks "$pid") - t0)) >"$dir/$mode.$n.cpu"
}

for n in $(seq "$ROUNDS"); do
  log "round $n/$ROUNDS"
  run off "$port_off" "${pids[0]}" "$n"
  run on "$port_on" "${pids[1]}" "$n" --token-file "$dir/token"
done

$PY - "$dir" "$ROUNDS" "$CONCURRENCY" "$(getconf CLK_TCK)" "$WARMUP" <<'PYEOF'
import json, statistics, sys
d, rounds, conc, hz, warmup = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4]), float(sys.argv[5])
rows = {}
for mode in ("off", "on"):
    runs = [json.load(open("%s/%s.%d.json" % (d, mode, n)))["run"] for n in range(1, rounds + 1)]
    cpu = [int(open("%s/%s.%d.cpu" % (d, mode, n)).read()) for n in range(1, rounds + 1)]
    # server CPU per put: ticks over warm-up and run, divided by the calls of both (warm-up
    # calls counted at the run's rate)
    us_per_op = [c * 1e6 / hz / (r["ops_per_s"] * (r["elapsed_s"] + warmup))
                 for c, r in zip(cpu, runs)]
    rows[mode] = {
        "cpu": statistics.median(us_per_op),
        "ops": statistics.median(r["ops_per_s"] for r in runs),
        "p50": statistics.median(r["latency_us"]["p50"] for r in runs) / 1000,
        "p99": statistics.median(r["latency_us"]["p99"] for r in runs) / 1000,
        "errors": sum(r["errors_total"] for r in runs),
        "all": " / ".join("%.0f" % r["ops_per_s"] for r in runs),
    }
print("| --auth | op | in flight | put/s (median of %d) | p50 ms | p99 ms | server CPU us/put | errors | every run put/s |"
      % rounds)
print("|---|---|---|---|---|---|---|---|---|")
for mode, label in (("off", "0 (no token)"), ("on", "1 (token per call)")):
    r = rows[mode]
    print("| %s | put (durable) | %s | %.0f | %.2f | %.2f | %.1f | %d | %s |"
          % (label, conc, r["ops"], r["p50"], r["p99"], r["cpu"], r["errors"], r["all"]))
cost = 1 - rows["on"]["ops"] / rows["off"]["ops"]
cpu = rows["on"]["cpu"] / rows["off"]["cpu"] - 1
print("\nauth cost: %.1f %% of put/s (the target is < 10 %%); server CPU per put %+.1f %%"
      % (cost * 100, cpu * 100))
PYEOF
