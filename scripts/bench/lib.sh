# scripts/bench/lib.sh - sourced by the bench scripts: etcd install, stopping processes, free ports.
# shellcheck shell=bash
# The caller defines log and die first. stop_pids and bench_cleanup read STOP_TRIES (x 0.1 s
# after SIGTERM, then SIGKILL); bench_cleanup also reads the caller's pids array and dir;
# bench_etcd_install reads ETCD, bench_free_ports PY.
# shellcheck disable=SC2154

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
