#!/usr/bin/env bash
# scripts/deps.sh - installs the Debian packages slotd needs; idempotent, quiet when all present.
set -euo pipefail

pkgs=(build-essential cmake pkg-config
      libgrpc-dev grpc-proto libprotobuf-dev protobuf-compiler protobuf-c-compiler libprotobuf-c-dev
      libuv1-dev libleveldb-dev libsnappy-dev libcunit1-dev libjansson-dev libmicrohttpd-dev libsodium-dev
      zlib1g-dev python3-grpcio python3-grpc-tools python3-protobuf python3-yaml python3-prometheus-client openssl
      prometheus)  # prometheus: only for promtool (tests/deploy); its service is kept off

missing=()
for p in "${pkgs[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
  sudo=sudo
else
  sudo=
fi
echo "deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# apt's package lists may be missing or stale on a fresh machine.
if ! $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >/tmp/slotd-deps.log 2>&1; then
  $sudo apt-get update -q >>/tmp/slotd-deps.log 2>&1
  $sudo apt-get install -y -q --no-install-recommends "${missing[@]}" >>/tmp/slotd-deps.log 2>&1 || {
    tail -n 30 /tmp/slotd-deps.log >&2
    echo "deps: apt-get install failed (log: /tmp/slotd-deps.log)" >&2
    exit 1
  }
fi
# Debian's prometheus package enables (and where a service manager runs, starts) a Prometheus
# server; slotd needs only its promtool, so the service is stopped and disabled again.
if printf '%s\n' "${missing[@]}" | grep -qx prometheus; then
  if [ -d /run/systemd/system ]; then
    $sudo systemctl disable --now prometheus.service >>/tmp/slotd-deps.log 2>&1 || true
  else
    $sudo invoke-rc.d prometheus stop >>/tmp/slotd-deps.log 2>&1 || true
    $sudo rm -f /etc/systemd/system/multi-user.target.wants/prometheus.service
  fi
fi
