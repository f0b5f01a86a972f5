#!/usr/bin/env bash
# scripts/bench/compare-etcd.sh - slotd against etcd on this machine, same client (slotbench),
# same durability, same key space: put and linearizable get at 1/16/64/256 in flight on one node,
# 16/64/256 on three nodes, runs alternating between the two, medians and slotd/etcd ratios.
# First the echo ceiling: `slotd --echo-only 1` (service/rpc/echo.c, no runtime) driven by
# `slotbench --target echo` at 1/16/64/256 in flight; every slotd row states slotd/echo at its
# in-flight count. Durable puts at 64 and 256 in flight are also run as items of one
# Metadata/ProposeStream call per connection (`slotbench --stream`; on three nodes one stream per
# leader, --route-aware) in the same rounds: the "put (stream)" rows, against the same etcd runs.
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_NAME=compare-etcd
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh
ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-5}
WARMUP=${WARMUP:-1}
ETCD=${ETCD:-etcd}
KEYS=10000
READY_TRIES=60   # x 0.5 s per readiness check
STOP_TRIES=100   # x 0.1 s after SIGTERM, then SIGKILL
ETCD_QUOTA=$((8 * 1024 * 1024 * 1024)) # etcd's largest recommended backend; never the limit here

bench_range ROUNDS 1 20
bench_range DURATION 1 600 s
bench_range WARMUP 0 60 s
bench_built slotd slotbench

bench_etcd_install

bench_setup compare-etcd # every data dir lives in $dir: same disk for both

# Free loopback ports: slotd client 0..2, etcd client 3..5 and peer 6..8, slotd peer 9..11, echo 12.
read -r -a ports <<<"$(bench_free_ports 13)"

# --- starting and waiting -------------------------------------------------------------------

# start_slotd N: N slotd nodes, client ports ports[0..N-1], peer ports ports[9..] (single node
# without --peers).
# Sets slotd_pids, slotd_eps (comma list), slotd_addrs (array).
start_slotd() {
  local n=$1 i peers=""
  slotd_pids=() slotd_addrs=()
  for i in $(seq "$n"); do
    slotd_addrs+=("127.0.0.1:${ports[i - 1]}")
    peers+="${peers:+,}$i=127.0.0.1:${ports[i + 8]}"
  done
  slotd_eps=$(IFS=,; echo "${slotd_addrs[*]}")
  for i in $(seq "$n"); do
    local args=(--node-id "$i" --listen "${slotd_addrs[i - 1]}"
      --peer-listen "127.0.0.1:${ports[i + 8]}" --data-dir "$dir/slotd-${n}n-$i")
    ((n > 1)) && args+=(--peers "$peers")
    "$bin"/slotd "${args[@]}" >"$dir/slotd-${n}n-$i.log" 2>&1 &
    pids+=($!) slotd_pids+=($!)
  done
}

# start_echo: slotd --echo-only 1 on ports[12]. Sets echo_pids, echo_eps.
start_echo() {
  echo_eps="127.0.0.1:${ports[12]}"
  "$bin"/slotd --echo-only 1 --listen "$echo_eps" >"$dir/echo.log" 2>&1 &
  pids+=($!) echo_pids=($!)
}

# start_etcd N: N etcd members; client ports ports[3..], peer ports ports[6..].
# Sets etcd_pids, etcd_eps (comma list), etcd_addrs (array).
start_etcd() {
  local n=$1 i cluster=""
  etcd_pids=() etcd_addrs=()
  for i in $(seq "$n"); do
    etcd_addrs+=("127.0.0.1:${ports[i + 2]}")
    cluster+="${cluster:+,}e$i=http://127.0.0.1:${ports[i + 5]}"
  done
  etcd_eps=$(IFS=,; echo "${etcd_addrs[*]}")
  for i in $(seq "$n"); do
    "$ETCD" --name "e$i" --data-dir "$dir/etcd-${n}n-$i" \
      --listen-client-urls "http://${etcd_addrs[i - 1]}" \
      --advertise-client-urls "http://${etcd_addrs[i - 1]}" \
      --listen-peer-urls "http://127.0.0.1:${ports[i + 5]}" \
      --initial-advertise-peer-urls "http://127.0.0.1:${ports[i + 5]}" \
      --initial-cluster "$cluster" --initial-cluster-state new \
      --initial-cluster-token "compare-etcd-${n}n" \
      --quota-backend-bytes "$ETCD_QUOTA" \
      --logger zap --log-outputs stderr --log-level warn \
      >"$dir/etcd-${n}n-$i.log" 2>&1 &
    pids+=($!) etcd_pids+=($!)
  done
}

# slotd with 3 nodes: every group's leader is known once a route-aware read run sends all calls
# direct and none fails.
slotd_leaders_known() {
  "$bin"/slotbench --endpoints "$slotd_eps" --keys $KEYS --route-aware --op get --concurrency 4 \
    --ops 400 --duration 5 --json 2>/dev/null | $PY -c '
import json, sys
r = json.load(sys.stdin)["run"]
sys.exit(0 if r["errors_total"] == 0 and r["fallback"] == 0 and r["direct"] > 0 else 1)'
}

# populate TARGET ENDPOINTS [extra slotbench args]: every key written once, checked.
populate() {
  local target=$1 eps=$2
  shift 2
  "$bin"/slotbench --target "$target" --endpoints "$eps" --keys $KEYS --key-size 64 \
    --value-size 256 --op put --concurrency 64 --duration 1 --populate --json "$@" \
    >"$dir/populate.json" 2>"$dir/populate.err" || {
    cat "$dir/populate.err" >&2
    die "populating $target failed"
  }
  bench_populate_check compare-etcd "$dir/populate.json" "$target"
}

# ctx_switches PIDS...: context switches (voluntary + involuntary) of every thread of the pids so
# far; a thread that ended meanwhile takes its count with it.
ctx_switches() {
  cat $(printf '/proc/%s/task/*/status ' "$@") 2>/dev/null |
    awk '/^(non)?voluntary_ctxt_switches:/ { n += $2 } END { print n + 0 }'
}

# idle_cpu SECONDS PIDS...: CPU the pids used while nothing loaded them, in % of one core.
idle_cpu() {
  local secs=$1 t0
  shift
  t0=$(cpu_ticks "$@")
  sleep "$secs"
  awk -v d=$(($(cpu_ticks "$@") - t0)) -v hz="$(getconf CLK_TCK)" -v s="$secs" \
    'BEGIN { printf "%.0f\n", 100 * d / hz / s }'
}

# --- measuring ------------------------------------------------------------------------------

# run_one FILE TARGET ENDPOINTS OP CONC [extra]: one measured slotbench run appended to FILE;
# the server CPU it took (ticks over warm-up and run, all of the target's processes) to FILE.cpu,
# and the context switches of those processes' threads to FILE.cs.
run_one() {
  local file=$1 target=$2 eps=$3 op=$4 conc=$5 t0 cs0
  shift 5
  local -n server_pids="${target}_pids"
  t0=$(cpu_ticks "${server_pids[@]}")
  cs0=$(ctx_switches "${server_pids[@]}")
  "$bin"/slotbench --target "$target" --endpoints "$eps" --keys $KEYS --key-size 64 \
    --value-size 256 --op "$op" --concurrency "$conc" --duration "$DURATION" \
    --warmup "$WARMUP" --json "$@" >>"$file" 2>"$dir/run.err" || {
    cat "$dir/run.err" >&2
    die "slotbench failed: $target $op at $conc in flight"
  }
  echo >>"$file"
  echo $(($(cpu_ticks "${server_pids[@]}") - t0)) >>"$file.cpu"
  echo $(($(ctx_switches "${server_pids[@]}") - cs0)) >>"$file.cs"
}

# Puts at these in-flight counts also run on ProposeStream (slotbench --stream) in each round.
STREAM_CONCS=" 64 256 "

# scenario NODES OP CONC: ROUNDS rounds; in each the systems run one after the other (A B A B).
scenario() {
  local nodes=$1 op=$2 conc=$3 base stream=0
  base="$dir/res/${op}_c${conc}_${nodes}n"
  [[ $op == put && $STREAM_CONCS == *" $conc "* ]] && stream=1
  log "${nodes}n $op at $conc in flight ($ROUNDS rounds)"
  for _ in $(seq "$ROUNDS"); do
    run_one "$base-etcd.json" etcd "$etcd_eps" "$op" "$conc"
    if ((nodes == 1)); then
      run_one "$base-slotd.json" slotd "$slotd_eps" "$op" "$conc"
      if ((stream)); then
        run_one "$base-slotd-stream.json" slotd "$slotd_eps" "$op" "$conc" --stream
      fi
    else
      run_one "$base-slotd-ra.json" slotd "$slotd_eps" "$op" "$conc" --route-aware
      run_one "$base-slotd-rr.json" slotd "$slotd_eps" "$op" "$conc"
      if ((stream)); then
        run_one "$base-slotd-stream.json" slotd "$slotd_eps" "$op" "$conc" --route-aware --stream
      fi
    fi
  done
}

# echo_scenario CONC: ROUNDS runs of the echo ceiling (a serializable read's request bytes).
echo_scenario() {
  local conc=$1
  log "echo ceiling at $conc in flight ($ROUNDS rounds)"
  for _ in $(seq "$ROUNDS"); do
    run_one "$dir/res/echo_c${conc}_1n-echo.json" echo "$echo_eps" get-local "$conc"
  done
}

etcd_version=$("$ETCD" --version 2>/dev/null | sed -n 's/^etcd Version: //p')

# Single node.
log "single node: starting the echo ceiling, etcd and slotd"
start_echo
start_etcd 1
start_slotd 1
wait_for "slotd --echo-only" slotd_serving "$echo_eps"
wait_for "etcd (1 member)" etcd_healthy "${etcd_addrs[@]}"
wait_for "slotd (1 node)" slotd_serving "${slotd_addrs[@]}"
for c in 1 16 64 256; do echo_scenario "$c"; done
populate etcd "$etcd_eps"
populate slotd "$slotd_eps"
idle_1n_etcd=$(idle_cpu 2 "${etcd_pids[@]}")
idle_1n_slotd=$(idle_cpu 2 "${slotd_pids[@]}")
for op in put get; do
  for c in 1 16 64 256; do scenario 1 "$op" "$c"; done
done
# The ceiling of the request path: a local (serializable) read does no raft or disk work.
scenario 1 get-local 256
stop_pids "${echo_pids[@]}" "${etcd_pids[@]}" "${slotd_pids[@]}"
pids=()

# Three nodes.
log "three nodes: starting 3 etcd members and 3 slotd nodes"
start_etcd 3
start_slotd 3
wait_for "etcd (3 members)" etcd_healthy "${etcd_addrs[@]}"
wait_for "slotd (3 nodes)" slotd_serving "${slotd_addrs[@]}"
wait_for "slotd group leaders" slotd_leaders_known
populate etcd "$etcd_eps"
populate slotd "$slotd_eps" --route-aware
idle_3n_etcd=$(idle_cpu 2 "${etcd_pids[@]}")
idle_3n_slotd=$(idle_cpu 2 "${slotd_pids[@]}")
for op in put get; do
  for c in 16 64 256; do scenario 3 "$op" "$c"; done
done
stop_pids "${etcd_pids[@]}" "${slotd_pids[@]}"
pids=()

echo "# slotd vs etcd ${etcd_version:-?}, slotbench for both, loopback, $(nproc) cores," \
  "${DURATION}s per run (+${WARMUP}s warm-up), $ROUNDS round(s), medians"
echo "# command: ROUNDS=$ROUNDS DURATION=$DURATION WARMUP=$WARMUP BUILD=$BUILD" \
  "scripts/bench/compare-etcd.sh"
echo "# $KEYS keys x 64 B, values 256 B, populated first; both fsync before acknowledging a put;" \
  "data dirs under /tmp; load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# idle CPU of the system not being measured (% of one core): 1 node slotd $idle_1n_slotd," \
  "etcd $idle_1n_etcd; 3 nodes slotd $idle_3n_slotd, etcd $idle_3n_etcd"
echo "# server CPU per request: CPU of all the system's processes over warm-up and run, divided by" \
  "ops/s x (warm-up + run) s; the get-local row is a serializable read (no raft, no disk)"
echo "# server ctx switches per request: voluntary + involuntary context switches of every thread" \
  "of the system's processes over warm-up and run, divided the same way (each thread hand-off" \
  "costs at least one)"
echo "# put (stream): the same durable puts as items of Metadata/ProposeStream (slotbench" \
  "--stream: one bidi call per connection, 3 nodes one per group leader with --route-aware;" \
  "each loop turn sends what is ready in one message), against the same etcd (unary) runs"
echo "# echo ceiling: slotd --echo-only 1 (rpc layer only, reply on the gRPC thread) loaded by" \
  "slotbench --target echo with a serializable read's bytes; slotd/echo divides each slotd row" \
  "by the echo median at the same in-flight count (measured on one node, also for 3-node rows)"
echo
$PY - "$dir/res" "$DURATION" "$WARMUP" "$(getconf CLK_TCK)" <<'PYEOF'
import json, statistics, sys
d, run_s, warm_s, hz = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])

def load(name):
    with open(f"{d}/{name}.json") as f:
        runs = [json.loads(l)["run"] for l in f if l.strip()]
    with open(f"{d}/{name}.json.cpu") as f:
        ticks = [int(l) for l in f if l.strip()]
    with open(f"{d}/{name}.json.cs") as f:
        switches = [int(l) for l in f if l.strip()]
    for r, t, cs in zip(runs, ticks, switches):
        ops = r["ops_per_s"] * (run_s + warm_s)
        r["server_cpu_us"] = t / hz * 1e6 / ops if ops > 0 else float("nan")
        r["server_cs"] = cs / ops if ops > 0 else float("nan")
    return runs

def med(runs, f):
    return statistics.median(f(r) for r in runs)

def ratio(a, b):
    return a / b if b > 0 else float("nan")

rows = [(1, op, c, "slotd", "-") for op in ("put", "get") for c in (1, 16, 64, 256)]
rows += [(1, "get-local", 256, "slotd", "-")]
rows += [(3, op, c, v, m) for op in ("put", "get") for c in (16, 64, 256)
         for v, m in (("slotd-ra", "route-aware"), ("slotd-rr", "round robin"))]
# ProposeStream puts (slotbench --stream), against the same etcd runs as the unary puts.
rows += [(n, "put", c, "slotd-stream", m) for n, m in ((1, "stream"), (3, "route-aware stream"))
         for c in (64, 256)]
print("| nodes | op | in flight | slotd client | slotd ops/s | etcd ops/s | slotd/etcd | slotd/echo "
      "| slotd p50 ms | etcd p50 ms | slotd p99 ms | etcd p99 ms | errors slotd/etcd "
      "| client CPU % slotd/etcd | server CPU us/op slotd/etcd | server ctx switches/op slotd/etcd |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
echo = {}
for c in (1, 16, 64, 256):
    x = load(f"echo_c{c}_1n-echo")
    echo[c] = med(x, lambda r: r["ops_per_s"])
    p = lambda runs, k: med(runs, lambda r: r["latency_us"][k]) / 1000
    print(f"| 1 | echo ceiling | {c} | - | {echo[c]:.0f} | - | - | 1.00 "
          f"| {p(x, 'p50'):.2f} | - | {p(x, 'p99'):.2f} | - "
          f"| {sum(r['errors_total'] for r in x)}/- "
          f"| {med(x, lambda r: r['client_cpu_pct']):.0f}/- "
          f"| {med(x, lambda r: r['server_cpu_us']):.0f}/- "
          f"| {med(x, lambda r: r['server_cs']):.2f}/- |")
summary = {}
p99_rows = []  # (row name, slotd p99 <= etcd p99) for the rows the targets use
for nodes, op, c, var, mode in rows:
    base = f"{op}_c{c}_{nodes}n"
    s, e = load(f"{base}-{var}"), load(f"{base}-etcd")
    s_ops, e_ops = med(s, lambda r: r["ops_per_s"]), med(e, lambda r: r["ops_per_s"])
    q = ratio(s_ops, e_ops)
    p = lambda runs, k: med(runs, lambda r: r["latency_us"][k]) / 1000
    if var in ("slotd", "slotd-ra", "slotd-stream"):
        key = base.replace("put_", "put_stream_", 1) if var == "slotd-stream" else base
        summary[key] = q
        p99_rows.append((key, p(s, "p99") <= p(e, "p99")))
    errs = lambda runs: sum(r["errors_total"] for r in runs)
    cpu = lambda runs: med(runs, lambda r: r["client_cpu_pct"])
    scpu = lambda runs: med(runs, lambda r: r["server_cpu_us"])
    scs = lambda runs: med(runs, lambda r: r["server_cs"])
    label = {"put": "put (durable)", "get": "get (linearizable)",
             "get-local": "get (serializable)"}[op]
    if var == "slotd-stream":
        label = "put (stream)"
    print(f"| {nodes} | {label} | {c} | {mode} | {s_ops:.0f} | {e_ops:.0f} | {q:.2f} "
          f"| {ratio(s_ops, echo[c]):.2f} "
          f"| {p(s, 'p50'):.2f} | {p(e, 'p50'):.2f} | {p(s, 'p99'):.2f} | {p(e, 'p99'):.2f} "
          f"| {errs(s)}/{errs(e)} | {cpu(s):.0f}/{cpu(e):.0f} | {scpu(s):.0f}/{scpu(e):.0f} "
          f"| {scs(s):.2f}/{scs(e):.2f} |")
print()
# Issue 9's targets: put >= 2x etcd at 64 and 256 in flight (1 and 3 nodes), linearizable get >= 2x
# at 256, slotd p99 <= etcd p99 on every row (3 nodes: the route-aware rows). The put_stream_*
# entries are the same puts on ProposeStream (issue 22), listed beside the unary ones.
want = ["put_c64_1n", "put_c256_1n", "put_c64_3n", "put_c256_3n", "get_c256_1n", "get_c256_3n",
        "put_stream_c64_1n", "put_stream_c256_1n", "put_stream_c64_3n", "put_stream_c256_3n"]
print("targets (>= 2.00): " + " ".join(
    f"{k}={summary[k]:.2f}:{'met' if summary[k] >= 2.0 else 'not met'}" for k in want))
late = [b for b, ok in p99_rows if not ok]
print(f"targets (p99 <= etcd): {len(p99_rows) - len(late)} of {len(p99_rows)} rows"
      + (": not met at " + " ".join(late) if late else ""))
print("ratio " + " ".join(f"{k}={summary[k]:.2f}" for k in
                          ("put_c256_1n", "get_c256_1n", "put_c256_3n", "get_c256_3n")))
print("echo ceiling ops/s " + " ".join(f"c{c}={echo[c]:.0f}" for c in (1, 16, 64, 256)))
PYEOF
