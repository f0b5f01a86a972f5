#!/usr/bin/env bash
# scripts/bench/watch-etcd.sh - watch fan-out, slotd against etcd 3.4 in the same run: put/s with
# 0, 1 and 100 watch streams attached and the events/s delivered to them (slotbench --watchers
# drives slotd's Metadata/Watch and etcd's Watch/Watch), one node each, runs alternating.
set -euo pipefail
cd "$(dirname "$0")/../.."
BENCH_NAME=watch-etcd
# shellcheck source=scripts/bench/lib.sh
. scripts/bench/lib.sh

usage() {
  cat <<'EOF'
usage: scripts/bench/watch-etcd.sh [--rounds R] [--duration S] [--warmup S] [--watchers LIST]
                                   [--build DIR] [--slotd BIN] [--slotbench BIN]
  --rounds R       rounds per watcher count, each runs slotd then etcd (1..20, default 3)
  --duration S     measured seconds per run (1..600, default 10)
  --warmup S       unmeasured seconds before each run (0..60, default 2)
  --watchers LIST  watcher counts, comma separated, each 0..1000 (default 0,1,100)
  --build DIR      build dir holding bin/slotd and bin/slotbench (default build)
  --slotd BIN      the slotd binary (default DIR/bin/slotd)
  --slotbench BIN  the slotbench binary, with --watchers (default DIR/bin/slotbench)
Environment: ETCD (etcd binary, default etcd on PATH; etcd-server is installed with apt-get
when missing).
EOF
}

ROUNDS=3
DURATION=10
WARMUP=2
WATCHERS=0,1,100
BUILD=build
SLOTD=
SLOTBENCH=
ETCD=${ETCD:-etcd}
CONCURRENCY=64
KEYS=10000
READY_TRIES=60 # x 0.5 s per readiness check
STOP_TRIES=100 # x 0.1 s after SIGTERM, then SIGKILL
RUN_SLACK_S=60 # a slotbench run is killed after warmup + duration + this
ETCD_QUOTA=$((8 * 1024 * 1024 * 1024)) # etcd's largest recommended backend; never the limit

while (($#)); do
  case $1 in
    --rounds | --duration | --warmup | --watchers | --build | --slotd | --slotbench)
      (($# >= 2)) || die "$1 needs a value"
      case $1 in
        --rounds) ROUNDS=$2 ;;
        --duration) DURATION=$2 ;;
        --warmup) WARMUP=$2 ;;
        --watchers) WATCHERS=$2 ;;
        --build) BUILD=$2 ;;
        --slotd) SLOTD=$2 ;;
        --slotbench) SLOTBENCH=$2 ;;
      esac
      shift 2
      ;;
    -h | --help) usage; exit 0 ;;
    *) usage >&2; die "unknown argument '$1'" ;;
  esac
done
SLOTD=${SLOTD:-$BUILD/bin/slotd}
SLOTBENCH=${SLOTBENCH:-$BUILD/bin/slotbench}

bench_range ROUNDS 1 20 "" --rounds
bench_range DURATION 1 600 s --duration
bench_range WARMUP 0 60 s --warmup
IFS=, read -r -a watcher_counts <<<"$WATCHERS"
((${#watcher_counts[@]} >= 1 && ${#watcher_counts[@]} <= 10)) || die "--watchers: 1..10 counts"
for w in "${watcher_counts[@]}"; do
  [[ $w =~ ^[0-9]+$ ]] && ((w <= 1000)) || die "--watchers: '$w' is not a count in 0..1000"
done
[[ -x $SLOTD ]] || die "$SLOTD not built (--build DIR or --slotd BIN)"
[[ -x $SLOTBENCH ]] || die "$SLOTBENCH not built (--build DIR or --slotbench BIN)"
"$SLOTBENCH" --help | grep -q -- '--watchers' || die "$SLOTBENCH has no --watchers (rebuild it)"

bench_etcd_install

bench_setup watch-etcd # both data dirs live in $dir: same disk for both

# Free loopback ports: slotd client and peer, etcd client and peer.
read -r -a ports <<<"$(bench_free_ports 4)"
slotd_ep="127.0.0.1:${ports[0]}"
etcd_ep="127.0.0.1:${ports[2]}"

# --- starting and waiting -------------------------------------------------------------------

"$SLOTD" --node-id 1 --listen "$slotd_ep" --peer-listen "127.0.0.1:${ports[1]}" \
  --data-dir "$dir/slotd" >"$dir/slotd.log" 2>&1 &
pids+=($!) slotd_pids=($!)
"$ETCD" --name e1 --data-dir "$dir/etcd" \
  --listen-client-urls "http://$etcd_ep" --advertise-client-urls "http://$etcd_ep" \
  --listen-peer-urls "http://127.0.0.1:${ports[3]}" \
  --initial-advertise-peer-urls "http://127.0.0.1:${ports[3]}" \
  --initial-cluster "e1=http://127.0.0.1:${ports[3]}" --initial-cluster-state new \
  --initial-cluster-token watch-etcd --quota-backend-bytes "$ETCD_QUOTA" \
  --logger zap --log-outputs stderr --log-level warn >"$dir/etcd.log" 2>&1 &
pids+=($!) etcd_pids=($!)

# bench TARGET ENDPOINT OUT [slotbench args]: one slotbench run, bounded, JSON into OUT.
bench() {
  local target=$1 ep=$2 out=$3
  shift 3
  timeout --kill-after=5 $((WARMUP + DURATION + RUN_SLACK_S)) \
    "$SLOTBENCH" --target "$target" --endpoints "$ep" --keys $KEYS --key-size 64 \
    --value-size 256 --op put --concurrency $CONCURRENCY --json "$@" >"$out" 2>"$dir/run.err" || {
    cat "$dir/run.err" >&2
    die "slotbench failed: $target $*"
  }
}

# populate TARGET ENDPOINT: every key written once (same store shape for both), checked.
populate() {
  bench "$1" "$2" "$dir/populate.json" --duration 1 --populate
  bench_populate_check watch-etcd "$dir/populate.json" "$1"
}

# run_one TARGET ENDPOINT W: one measured run appended to res/wW-TARGET.json, and the server's
# CPU ticks over warmup and run to the .cpu file beside it.
run_one() {
  local target=$1 ep=$2 w=$3 base t0
  local -n server_pids="${target}_pids"
  base="$dir/res/w$w-$target"
  t0=$(cpu_ticks "${server_pids[@]}")
  bench "$target" "$ep" "$dir/one.json" --watchers "$w" --duration "$DURATION" --warmup "$WARMUP"
  echo $(($(cpu_ticks "${server_pids[@]}") - t0)) >>"$base.cpu"
  cat "$dir/one.json" >>"$base.json"
}

log "starting one slotd node and one etcd member (data in $dir)"
wait_for "slotd" slotd_serving "$slotd_ep"
wait_for "etcd" etcd_healthy "$etcd_ep"
populate slotd "$slotd_ep"
populate etcd "$etcd_ep"
etcd_version=$("$ETCD" --version 2>/dev/null | sed -n 's/^etcd Version: //p')

for w in "${watcher_counts[@]}"; do
  log "$w watcher(s): $ROUNDS round(s) of slotd then etcd"
  for r in $(seq "$ROUNDS"); do
    run_one slotd "$slotd_ep" "$w"
    run_one etcd "$etcd_ep" "$w"
    log "  round $r done"
  done
done

echo "# watch fan-out: slotd vs etcd ${etcd_version:-?}, one node each, loopback, $(nproc) cores;" \
  "slotbench --op put --concurrency $CONCURRENCY --watchers W (streams on the prefix 'key-'," \
  "one connection, one client thread + one watch thread)"
echo "# command: scripts/bench/watch-etcd.sh --rounds $ROUNDS --duration $DURATION" \
  "--warmup $WARMUP --watchers $WATCHERS; ${DURATION}s per run (+${WARMUP}s warm-up)," \
  "runs alternate slotd, etcd; medians over the rounds"
echo "# $KEYS keys x 64 B, values 256 B, populated first; both fsync before acknowledging a put;" \
  "load average at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "# events/s: events received by all watchers together in the measured window;" \
  "delivered = events/s / (put/s x W) (1.00: every watcher saw every put); cut off: streams" \
  "that ended before the run did, over all rounds; server CPU: % of one core over warm-up + run"
echo
$PY - "$dir/res" "$DURATION" "$WARMUP" "$(getconf CLK_TCK)" "${watcher_counts[@]}" <<'PYEOF'
import json, statistics, sys
d, run_s, warm_s, hz = sys.argv[1], float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
counts = [int(x) for x in sys.argv[5:]]

def load(w, target):
    dec = json.JSONDecoder()
    text = open(f"{d}/w{w}-{target}.json").read()
    runs, i = [], 0
    while True:
        while i < len(text) and text[i].isspace():
            i += 1
        if i >= len(text):
            break
        obj, i = dec.raw_decode(text, i)
        runs.append(obj)
    ticks = [int(l) for l in open(f"{d}/w{w}-{target}.cpu") if l.strip()]
    for r, t in zip(runs, ticks):
        r["server_cpu_pct"] = 100.0 * t / hz / (run_s + warm_s)
    return runs

def med(xs):
    return statistics.median(xs) if xs else float("nan")

def ratio(a, b):
    return f"{a / b:.2f}" if b > 0 else "-"

print("| W | target | put/s | events/s delivered | per watcher events/s | delivered "
      "| put/s slotd/etcd | events/s slotd/etcd | cut off (status) | put errors "
      "| client CPU % | server CPU % |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
notes = []
for w in counts:
    rows = {t: load(w, t) for t in ("slotd", "etcd")}
    m = {}
    for t, runs in rows.items():
        m[t] = {
            "put": med([r["run"]["ops_per_s"] for r in runs]),
            "ev": med([r["watch"]["events_per_s"] if w else 0.0 for r in runs]),
            "pw": med([r["watch"]["events_per_s_per_watcher_median"] if w else 0.0 for r in runs]),
        }
    for t, runs in rows.items():
        put, ev, pw = m[t]["put"], m[t]["ev"], m[t]["pw"]
        cut, by = 0, {}
        for r in runs:
            if not w:
                continue
            x = r["watch"]
            cut += x["ended_early"]
            for k, v in x["ended_by_status"].items():
                by[k] = by.get(k, 0) + v
            if x["etcd_canceled"]:
                by["etcd canceled"] = by.get("etcd canceled", 0) + x["etcd_canceled"]
            if x["ended_early"]:
                notes.append(f"W={w} {t}: {x['ended_early']} of {x['watchers']} streams ended "
                             f"early, first {x['first_end_s']:.2f} s into the run: "
                             f"{x['first_end_error']}")
        cut_s = f"{cut}" + (" (" + ", ".join(f"{k} {v}" for k, v in sorted(by.items())) + ")"
                            if by else "")
        delivered = f"{ev / (put * w):.2f}" if w and put > 0 else "-"
        other = "etcd" if t == "slotd" else None
        put_ratio = ratio(put, m["etcd"]["put"]) if other else "-"
        ev_ratio = ratio(ev, m["etcd"]["ev"]) if other and w else "-"
        errs = sum(r["run"]["errors_total"] for r in runs)
        ccpu = med([r["run"]["client_cpu_pct"] for r in runs])
        scpu = med([r["server_cpu_pct"] for r in runs])
        print(f"| {w} | {t} | {put:.0f} | {ev:.0f} | {pw:.0f} | {delivered} | {put_ratio} "
              f"| {ev_ratio} | {cut_s if w else '-'} | {errs} | {ccpu:.0f} | {scpu:.0f} |")
print()
for n in notes:
    print(f"- {n}")
summary = []
for w in counts:
    s, e = load(w, "slotd"), load(w, "etcd")
    sp, ep = med([r["run"]["ops_per_s"] for r in s]), med([r["run"]["ops_per_s"] for r in e])
    item = f"put_w{w}={ratio(sp, ep)}"
    if w:
        se = med([r["watch"]["events_per_s"] for r in s])
        ee = med([r["watch"]["events_per_s"] for r in e])
        item += f" events_w{w}={ratio(se, ee)}"
    summary.append(item)
print("ratio slotd/etcd " + " ".join(summary))
PYEOF
