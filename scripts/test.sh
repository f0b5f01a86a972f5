#!/usr/bin/env bash
# scripts/test.sh - runs slotd's test stages (all by default, or the ones named) and prints a summary.
# Stages: gen unit sim sim-bugs e2e fault deploy asan. Each stage's output goes to the terminal; the last line
# reads "N passed, N failed" over stages.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN=${ASAN:-build-asan}
FAULT_BUILD=${FAULT_BUILD:-build-fault}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
SIM_SEEDS=${SIM_SEEDS:-500}
SIM_STEPS=${SIM_STEPS:-10000}
ASAN_SIM_SEEDS=${ASAN_SIM_SEEDS:-60}
PY=/usr/bin/python3
# The Python suites start processes (slotd, openssl, node) while gRPC channels are open; gRPC's
# fork handlers would wait for its thread pool to idle before every fork (and can stall there).
export GRPC_ENABLE_FORK_SUPPORT=false

passed=0
failed=0
failed_names=()

stage() { # name cmd...
  local name=$1
  shift
  echo "=== stage $name"
  local t0=$SECONDS
  if "$@"; then
    passed=$((passed + 1))
    echo "=== stage $name: ok ($((SECONDS - t0)) s)"
  else
    failed=$((failed + 1))
    failed_names+=("$name")
    echo "=== stage $name: FAILED ($((SECONDS - t0)) s)"
  fi
}

st_gen() {
  local tmp
  tmp=$(mktemp -d)
  scripts/gen.sh "$tmp" && cp gen/CMakeLists.txt gen/README.md "$tmp"/ &&
    diff -r gen "$tmp" >/dev/null
  local rc=$?
  [ $rc -eq 0 ] || { diff -r gen "$tmp" | head -n 20; echo "gen/ is stale: run make gen"; }
  rm -rf "$tmp"
  return $rc
}

st_unit() {
  ctest --test-dir "$BUILD" --output-on-failure -L unit -j "$JOBS"
}

st_sim() {
  "$BUILD"/bin/raft-sim --seeds "$SIM_SEEDS" --steps "$SIM_STEPS"
}

st_sim_bugs() {
  tests/sim/bugs.sh "$BUILD"
}

st_e2e() {
  SLOTD_BIN="$PWD/$BUILD/bin/slotd" "$PY" -m unittest discover -s tests/e2e -p 'test_*.py' -v
}

# The fault stage also builds slotd with crash points, the peer-network filter and the unsafe-read
# switch (-DSLOTD_FAULT=ON, service/fault/README.md) into $FAULT_BUILD.
st_fault() {
  [ -f "$FAULT_BUILD/CMakeCache.txt" ] ||
    cmake -S . -B "$FAULT_BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLOTD_FAULT=ON >/dev/null || return 1
  cmake --build "$FAULT_BUILD" -j "$JOBS" --target slotd -- --no-print-directory >/dev/null || return 1
  SLOTD_FAULT_REQUIRED=1 SLOTD_BIN="$PWD/$BUILD/bin/slotd" SLOTD_FAULT_BIN="$PWD/$FAULT_BUILD/bin/slotd" \
    "$PY" -m unittest discover -s tests/fault -p 'test_*.py' -v
}

st_deploy() {
  SLOTD_BIN="$PWD/$BUILD/bin/slotd" "$PY" -m unittest discover -s tests/deploy -v
}

st_asan() {
  [ -f "$ASAN/CMakeCache.txt" ] ||
    cmake -S . -B "$ASAN" -DCMAKE_BUILD_TYPE=Debug -DSLOTD_SANITIZE=ON >/dev/null || return 1
  cmake --build "$ASAN" -j "$JOBS" -- --no-print-directory >/dev/null || return 1
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir "$ASAN" --output-on-failure -L unit -j "$JOBS" || return 1
  if [ -x "$ASAN"/bin/raft-sim ]; then
    "$ASAN"/bin/raft-sim --seeds "$ASAN_SIM_SEEDS" --steps "$SIM_STEPS" || return 1
  fi
  # The real server under the sanitizers (leaks show up as exit codes and log markers), on the
  # suites that drive the most server code; the full e2e suite runs on the normal build above.
  (cd tests/e2e && ASAN_OPTIONS=detect_leaks=1 SLOTD_BIN="$PWD/../../$ASAN/bin/slotd" \
    "$PY" -m unittest test_single_node test_cluster test_meta test_crash test_tasks test_migration) || return 1
}

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(gen unit sim sim-bugs e2e fault deploy asan)
for s in "${want[@]}"; do
  case $s in
    gen) stage gen st_gen ;;
    unit) stage unit st_unit ;;
    sim) [ -x "$BUILD"/bin/raft-sim ] && stage sim st_sim ;;
    sim-bugs) [ -x tests/sim/bugs.sh ] && stage sim-bugs st_sim_bugs ;;
    e2e) ls tests/e2e/test_*.py >/dev/null 2>&1 && stage e2e st_e2e ;;
    fault) ls tests/fault/test_*.py >/dev/null 2>&1 && stage fault st_fault ;;
    deploy) ls tests/deploy/test_*.py >/dev/null 2>&1 && stage deploy st_deploy ;;
    asan) stage asan st_asan ;;
    *) echo "unknown stage $s"; exit 2 ;;
  esac
done
echo
[ $failed -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "stages: $passed passed, $failed failed"
[ $failed -eq 0 ]
