#!/usr/bin/env bash
# scripts/test.sh - runs slotd's test stages (all by default, or the ones named) and prints a summary.
# Stages: gen unit sim sim-bugs e2e fault deploy asan tsan. Each stage's output goes to the
# terminal; the last line reads "N passed, N failed" over stages. When e2e runs with sim and/or
# sim-bugs, those two run beside it at nice 10 (one core of deterministic simulation while the e2e
# suites mostly wait on timers): each of the three buffers its output to a file, printed in stage
# order once all have finished, with the same "=== stage NAME: ok (N s)" lines (N: that stage's
# own wall time). Once the simulation is done, the same niced job compiles the fault, ASan and TSan
# builds (one compile at a time) until e2e ends, so those stages mostly find their build done.
# SERIAL=1 runs every stage alone, in order.
set -uo pipefail
cd "$(dirname "$0")/.."
BUILD=${BUILD:-build}
ASAN=${ASAN:-build-asan}
TSAN=${TSAN:-build-tsan}
FAULT_BUILD=${FAULT_BUILD:-build-fault}
JOBS=${JOBS:-$(nproc 2>/dev/null || echo 2)}
SIM_SEEDS=${SIM_SEEDS:-500}
SIM_STEPS=${SIM_STEPS:-10000}
ASAN_SIM_SEEDS=${ASAN_SIM_SEEDS:-60}
PY=/usr/bin/python3
# The Python suites start processes (slotd, openssl, node) while gRPC channels are open; gRPC's
# fork handlers would wait for its thread pool to idle before every fork (and can stall there).
export GRPC_ENABLE_FORK_SUPPORT=false

SERIAL=${SERIAL:-0}

passed=0
failed=0
failed_names=()

result() { # name rc seconds: counts one finished stage and prints its last line
  if [ "$2" -eq 0 ]; then
    passed=$((passed + 1))
    echo "=== stage $1: ok ($3 s)"
  else
    failed=$((failed + 1))
    failed_names+=("$1")
    echo "=== stage $1: FAILED ($3 s)"
  fi
}

stage() { # name cmd...
  local name=$1
  shift
  echo "=== stage $name"
  local t0=$SECONDS
  "$@"
  result "$name" $? $((SECONDS - t0))
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

# The e2e modules run in E2E_JOBS worker processes (tests/e2e/run_parallel.py: longest first, the
# modules that share a folder of the tree one after another); they mostly wait on timers.
E2E_JOBS=${E2E_JOBS:-3}
st_e2e() {
  SLOTD_BIN="$PWD/$BUILD/bin/slotd" "$PY" tests/e2e/run_parallel.py -j "$E2E_JOBS"
}

# build_tree DIR JOBS TYPE OPTION [TARGET]: configures DIR once (CMAKE_BUILD_TYPE=TYPE, -DOPTION=ON),
# then builds it (only TARGET when given) with JOBS jobs, quietly.
build_tree() {
  [ -f "$1/Makefile" ] ||
    cmake -S . -B "$1" -DCMAKE_BUILD_TYPE="$3" -D"$4"=ON >/dev/null || return 1
  cmake --build "$1" -j "$2" ${5:+--target "$5"} -- --no-print-directory >/dev/null
}

# The fault stage also builds slotd with crash points, the peer-network filter and the unsafe-read
# switch (-DSLOTD_FAULT=ON, service/fault/README.md) into $FAULT_BUILD.
build_fault() { build_tree "$FAULT_BUILD" "$1" RelWithDebInfo SLOTD_FAULT slotd; }
st_fault() {
  build_fault "$JOBS" || return 1
  SLOTD_FAULT_REQUIRED=1 SLOTD_BIN="$PWD/$BUILD/bin/slotd" SLOTD_FAULT_BIN="$PWD/$FAULT_BUILD/bin/slotd" \
    "$PY" -m unittest discover -s tests/fault -p 'test_*.py' -v
}

st_deploy() {
  SLOTD_BIN="$PWD/$BUILD/bin/slotd" "$PY" -m unittest discover -s tests/deploy -v
}

build_asan() { build_tree "$ASAN" "$1" Debug SLOTD_SANITIZE; }
st_asan() {
  build_asan "$JOBS" || return 1
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  ctest --test-dir "$ASAN" --output-on-failure -L unit -j "$JOBS" || return 1
  if [ -x "$ASAN"/bin/raft-sim ]; then
    "$ASAN"/bin/raft-sim --seeds "$ASAN_SIM_SEEDS" --steps "$SIM_STEPS" || return 1
  fi
  # The real server under the sanitizers (leaks show up as exit codes and log markers), on the
  # suites that drive the most server code; the full e2e suite runs on the normal build above.
  ASAN_OPTIONS=detect_leaks=1 SLOTD_BIN="$PWD/$ASAN/bin/slotd" "$PY" tests/e2e/run_parallel.py -j 2 \
    test_single_node test_cluster test_meta test_crash test_tasks test_migration || return 1
}

# ThreadSanitizer (tests/tsan/README.md): the unit suites and a 3-node smoke with a leader kill,
# built into $TSAN. Any report fails it: halt_on_error + exitcode, and the smoke greps node logs.
build_tsan() { build_tree "$TSAN" "$1" RelWithDebInfo SLOTD_TSAN; }
st_tsan() {
  build_tsan "$JOBS" || return 1
  local -x TSAN_OPTIONS="halt_on_error=1 exitcode=66 ignore_noninstrumented_modules=1"
  TSAN_OPTIONS+=" second_deadlock_stack=1 suppressions=$PWD/tests/tsan/suppressions.txt"
  ctest --test-dir "$TSAN" --output-on-failure -L unit -j "$JOBS" || return 1
  SLOTD_BIN="$PWD/$TSAN/bin/slotd" "$PY" tests/tsan/smoke.py
}

# The stage's function, or nothing when the stage has nothing to run here.
stage_fn() {
  case $1 in
    gen) echo st_gen ;;
    unit) echo st_unit ;;
    sim) [ -x "$BUILD"/bin/raft-sim ] && echo st_sim ;;
    sim-bugs) [ -x tests/sim/bugs.sh ] && echo st_sim_bugs ;;
    e2e) ls tests/e2e/test_*.py >/dev/null 2>&1 && echo st_e2e ;;
    fault) ls tests/fault/test_*.py >/dev/null 2>&1 && echo st_fault ;;
    deploy) ls tests/deploy/test_*.py >/dev/null 2>&1 && echo st_deploy ;;
    asan) echo st_asan ;;
    tsan) echo st_tsan ;;
    *) return 2 ;;
  esac
  return 0
}

# Background stages: NAME.out gets the output, NAME.rc "rc seconds" (the stage's own wall time).
bg_dir=
bg_pids=()
bg_run() { # name fn: runs in the caller's process
  local t0=$SECONDS
  "$2" >"$bg_dir/$1.out" 2>&1
  echo "$? $((SECONDS - t0))" >"$bg_dir/$1.rc"
}
bg_print() { # name: as if it had run in the foreground
  local rc secs
  echo "=== stage $1"
  cat "$bg_dir/$1.out"
  if ! read -r rc secs <"$bg_dir/$1.rc" 2>/dev/null; then
    rc=1 secs=0
    echo "(no result: the stage died)"
  fi
  result "$1" "$rc" "$secs"
}
# Ctrl-C / SIGTERM: background stages ignore SIGINT (no job control), so stop their process trees.
kill_tree() {
  local p c
  for p in "$@"; do
    for c in $(pgrep -P "$p" 2>/dev/null); do kill_tree "$c"; done
    kill -TERM "$p" 2>/dev/null
  done
}
on_signal() {
  [ ${#bg_pids[@]} -eq 0 ] || kill_tree "${bg_pids[@]}"
  [ -z "$bg_dir" ] || rm -rf "$bg_dir"
  exit 130
}
trap on_signal INT TERM

want=("$@")
[ ${#want[@]} -gt 0 ] || want=(gen unit sim sim-bugs e2e fault deploy asan tsan)
for s in "${want[@]}"; do
  stage_fn "$s" >/dev/null || { echo "unknown stage $s"; exit 2; }
done
wanted() { local w; for w in "${want[@]}"; do [ "$w" = "$1" ] && return 0; done; return 1; }

# The side-by-side group, run where e2e is in the list: e2e, and beside it whichever of sim and
# sim-bugs is wanted, one after the other (about one core of simulation, at nice 10).
side=()
if [ "$SERIAL" != 1 ] && [ -n "$(stage_fn e2e)" ] && wanted e2e; then
  for s in sim sim-bugs; do
    if [ -n "$(stage_fn "$s")" ] && wanted "$s"; then side+=("$s"); fi
  done
fi
in_side() { local x; for x in "${side[@]}"; do [ "$x" = "$1" ] && return 0; done; return 1; }

run_side_by_side() {
  bg_dir=$(mktemp -d)
  echo "=== stages ${side[*]} e2e: side by side (their output follows when all have finished)"
  # niced: the simulation takes the CPU the e2e processes leave idle, not what they need
  # Once the simulation is done, the same niced job compiles the builds of the later stages
  # (one job at a time): each stage then finds its build up to date. Not a stage: a failed
  # build here is built again, and reported, by its own stage.
  (
    renice -n 10 -p "$BASHPID" >/dev/null
    for x in "${side[@]}"; do bg_run "$x" "$(stage_fn "$x")"; done
    for x in fault asan tsan; do
      if wanted "$x"; then "build_$x" 1 >"$bg_dir/build-$x.out" 2>&1; fi
    done
  ) &
  local side_pid=$!
  bg_pids+=($side_pid)
  (bg_run e2e st_e2e) &
  bg_pids+=($!)
  wait "${bg_pids[1]}"
  # e2e is done: a build still compiling at one job is stopped (its stage finishes it with all
  # cores); the simulation, if still running, is waited for.
  local x done=1
  for x in "${side[@]}"; do [ -f "$bg_dir/$x.rc" ] || done=0; done
  [ $done -eq 0 ] || kill_tree "$side_pid"
  wait "$side_pid"
  bg_pids=()
  for x in "${want[@]}"; do
    if in_side "$x" || [ "$x" = e2e ]; then bg_print "$x"; fi
  done
  rm -rf "$bg_dir"
  bg_dir=
}

for s in "${want[@]}"; do
  fn=$(stage_fn "$s")
  [ -n "$fn" ] || continue
  if [ ${#side[@]} -gt 0 ] && in_side "$s"; then
    continue # runs beside e2e
  elif [ ${#side[@]} -gt 0 ] && [ "$s" = e2e ]; then
    run_side_by_side
  else
    stage "$s" "$fn"
  fi
done
echo
[ $failed -eq 0 ] || echo "failed stages: ${failed_names[*]}"
echo "stages: $passed passed, $failed failed"
[ $failed -eq 0 ]
