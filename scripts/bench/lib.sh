# scripts/bench/lib.sh - sourced by the bench scripts: variable checks, etcd install, stopping processes, free ports.
# shellcheck shell=bash
# The caller sets BENCH_NAME (the log prefix) and sources it from the repo root; it sets BUILD
# (default build), bin=$BUILD/bin and PY, and defines log and die. bench_built reads bin and BUILD. stop_pids and bench_cleanup read STOP_TRIES (x 0.1 s
# after SIGTERM, then SIGKILL); bench_cleanup also reads the caller's pids array and dir;
# bench_etcd_install reads ETCD, bench_free_ports PY.
# wait_for reads READY_TRIES and dir; slotd_serving and etcd_healthy PY.
# shellcheck disable=SC2154

BUILD=${BUILD:-build}
bin=$BUILD/bin
PY=/usr/bin/python3
log() { echo "$BENCH_NAME: $*" >&2; }
die() { log "$*"; exit 1; }

# bench_whole VAR [LABEL]: dies unless $VAR is a whole number; LABEL (default VAR) names it.
bench_whole() {
  [[ ${!1} =~ ^[0-9]+$ ]] || die "${2:-$1} must be a whole number (got '${!1}')"
}

# bench_range VAR MIN MAX [UNIT [LABEL]]: bench_whole, then dies unless MIN <= $VAR <= MAX.
bench_range() {
  local label=${5:-$1}
  bench_whole "$1" "$label"
  ((${!1} >= $2 && ${!1} <= $3)) || die "$label must be $2..$3${4:+ $4} (got ${!1})"
}

# bench_built NAME...: dies unless every $bin/NAME is an executable.
bench_built() {
  local b
  for b in "$@"; do
    [[ -x $bin/$b ]] || die "$bin/$b not built (BUILD=$BUILD)"
  done
}

# etcd-server from Debian (apt-get, as root or with sudo) when there is no "$ETCD" yet.
bench_etcd_install() {
  command -v "$ETCD" >/dev/null 2>&1 && return 0
  log "installing etcd-server (apt-get)"
  local sudo=()
  [[ $(id -u) == 0 ]] || sudo=(sudo)
  export DEBIAN_FRONTEND=noninteractive
  if ! "${sudo[@]}" apt-get install -y -qq etcd-server >/dev/null 2>&1; then
    "${sudo[@]}" apt-get update -qq >/dev/null 2>&1 || true
    "${sudo[@]}" apt-get install -y -qq etcd-server >/dev/null 2>&1 ||
      die "apt-get install etcd-server failed"
  fi
  command -v "$ETCD" >/dev/null 2>&1 || die "etcd not found after installing etcd-server"
}

# Stops every pid in "$@": SIGTERM to all, then per pid up to STOP_TRIES x 0.1 s, then SIGKILL.
stop_pids() {
  local pid
  for pid in "$@"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "$@"; do
    for _ in $(seq "$STOP_TRIES"); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
  done
}

# bench_setup NAME: the run's folder dir=/tmp/NAME.XXXXXX (with dir/res), an empty pids array,
# and the traps: bench_cleanup on exit, exit 130 on INT and TERM.
bench_setup() {
  dir=$(mktemp -d "/tmp/$1.XXXXXX")
  mkdir -p "$dir/res"
  pids=()
  trap bench_cleanup EXIT
  trap 'exit 130' INT TERM
}

# The EXIT trap: stops every process in pids and removes dir.
bench_cleanup() {
  if ((${#pids[@]})); then stop_pids "${pids[@]}"; fi
  rm -rf "$dir"
}

# Prints N free loopback TCP ports, separated by spaces.
bench_free_ports() {
  "$PY" -c '
import socket, sys
socks = [socket.socket() for _ in range(int(sys.argv[1]))]
for s in socks: s.bind(("127.0.0.1", 0))
print(" ".join(str(s.getsockname()[1]) for s in socks))' "$1"
}

# slotd: grpc.health.v1.Health/Check answers SERVING (bytes 08 01) on every address.
slotd_serving() {
  $PY - "$@" <<'PYEOF' 2>/dev/null
import sys, grpc
for addr in sys.argv[1:]:
    with grpc.insecure_channel(addr) as ch:
        try:
            if ch.unary_unary("/grpc.health.v1.Health/Check")(b"", timeout=1.0) != b"\x08\x01":
                sys.exit(1)
        except grpc.RpcError:
            sys.exit(1)
PYEOF
}

# etcd: GET /health says {"health":"true"} on every member (a leader exists, a read went through).
etcd_healthy() {
  $PY - "$@" <<'PYEOF' 2>/dev/null
import json, sys, urllib.request
for addr in sys.argv[1:]:
    try:
        with urllib.request.urlopen(f"http://{addr}/health", timeout=1.0) as r:
            if json.load(r).get("health") != "true":
                sys.exit(1)
    except Exception:
        sys.exit(1)
PYEOF
}

# wait_for WHAT CMD...: retries CMD every 0.5 s, READY_TRIES times; dies with the logs.
wait_for() {
  local what=$1
  shift
  for _ in $(seq "$READY_TRIES"); do
    "$@" && return 0
    sleep 0.5
  done
  log "$what not ready after $((READY_TRIES / 2)) s; logs:"
  tail -n 20 "$dir"/*.log >&2
  exit 1
}

# cpu_ticks PIDS...: user+system clock ticks the pids have used so far (utime and stime, the
# 12th and 13th fields after the parenthesised command name of /proc/PID/stat).
cpu_ticks() {
  local t=0 p
  for p in "$@"; do t=$((t + $(sed 's/.*) //' "/proc/$p/stat" | awk '{print $12 + $13}'))); done
  echo "$t"
}

# bench_populate_check NAME JSON TARGET: dies unless the slotbench --populate run whose --json
# output is JSON wrote every key without an error (NAME: the script, for the message).
bench_populate_check() {
  "$PY" - "$2" "$3" "$1" <<'PYEOF' || die "populating $3 incomplete"
import json, sys
r = json.load(open(sys.argv[1]))
if r["populated_keys"] != r["keys"] or r["populate"]["errors_total"]:
    sys.exit("%s: %s populate wrote %d of %d keys, %d errors"
             % (sys.argv[3], sys.argv[2], r["populated_keys"], r["keys"], r["populate"]["errors_total"]))
PYEOF
}
