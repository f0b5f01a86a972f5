#!/usr/bin/env bash
# scripts/deps.sh - installs the Debian packages slotd needs; idempotent, quiet when all present.
set -euo pipefail

pkgs=(build-essential cmake pkg-config
      libgrpc-dev grpc-proto libprotobuf-dev protobuf-compiler protobuf-c-compiler libprotobuf-c-dev
      libuv1-dev libleveldb-dev libsnappy-dev libcunit1-dev libjansson-dev libmicrohttpd-dev libsodium-dev
      zlib1g-dev python3-grpcio python3-grpc-tools python3-protobuf python3-yaml python3-prometheus-client openssl)

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
