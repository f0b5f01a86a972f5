#!/usr/bin/env bash
# scripts/gen.sh - regenerates gen/ (protoc-c C code) from api/ and the system .proto files.
# Usage: scripts/gen.sh [OUTDIR]   (default: gen/; `make test` generates into a temp dir and diffs)
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-gen}
mkdir -p "$out"
# Our own sources, plus the well-known and gRPC files we serve (any, health, reflection).
ours=$(cd api && find . -name '*.proto' | sed 's|^\./||' | LC_ALL=C sort)
protoc-c -Iapi -I/usr/include --c_out="$out" $ours google/protobuf/any.proto
protoc-c -I/usr/share/grpc-proto --c_out="$out" grpc/health/v1/health.proto
# Server reflection: v1 only; v1alpha has the same messages on the wire (service/rpc/reflection.c).
protoc-c -I/usr/share/grpc-proto --c_out="$out" grpc/reflection/v1/reflection.proto
