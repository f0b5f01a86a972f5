#!/usr/bin/env bash
# tests/sim/bugs.sh - builds slotd_raft once per injected bug and shows that raft-sim catches each.
# usage: tests/sim/bugs.sh BUILD_DIR   (bug builds go to <parent of BUILD_DIR>/build-bug-<name>)
# Prints one line per bug ("bug X: caught at seed N (violation: ...)" or "bug X: MISSED") and
# exits non-zero if any bug is missed, is caught as something else than its expected violation
# (EXPECT below; for COMMIT_PREV_TERM the invariant raft_check_invariants must name), or fails to
# build.
set -uo pipefail
if [ $# -ne 1 ]; then
  echo "usage: $0 BUILD_DIR" >&2
  exit 2
fi
REPO=$(cd "$(dirname "$0")/../.." && pwd)
BUILD_DIR=$1
case $BUILD_DIR in /*) ;; *) BUILD_DIR=$PWD/$BUILD_DIR ;; esac
PARENT=$(dirname "$BUILD_DIR")
JOBS=${JOBS:-2}
BUG_SEEDS=${BUG_SEEDS:-2000} # bound on seeds tried per bug
BUG_STEPS=${BUG_STEPS:-4000} # virtual ms per seed
BUGS=(COMMIT_PREV_TERM VOTE_NO_LOG_CHECK READ_BEFORE_COMMIT LEASE_EXPIRED)
# What the first violation must say (extended regex over the FAIL line). raft_check_invariants
# failures read "invariant NAME broken on node N group G term T index I: ...".
INVARIANT_RE='raft_check_invariants: invariant [a-z_]+ broken on node [0-9]+ group [0-9]+ term [0-9]+ index [0-9]+: '
declare -A EXPECT=(
  [COMMIT_PREV_TERM]="${INVARIANT_RE/\[a-z_\]+/leader_commit_in_term}"
  [VOTE_NO_LOG_CHECK]='leader completeness|state machine safety'
  [READ_BEFORE_COMMIT]='linearizability'
  [LEASE_EXPIRED]='linearizability'
)

missed=0
for bug in "${BUGS[@]}"; do
  dir=$PARENT/build-bug-$(echo "$bug" | tr 'A-Z_' 'a-z-')
  log=$dir/bugs-build.log
  mkdir -p "$dir"
  if ! cmake -S "$REPO" -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSLOTD_RAFT_BUG="$bug" \
    >"$log" 2>&1 || ! cmake --build "$dir" --target raft-sim -j "$JOBS" >>"$log" 2>&1; then
    echo "bug $bug: BUILD FAILED (see $log)"
    missed=$((missed + 1))
    continue
  fi
  t0=$SECONDS
  out=$("$dir/bin/raft-sim" --seeds "$BUG_SEEDS" --steps "$BUG_STEPS" 2>&1)
  rc=$?
  fail_line=$(printf '%s\n' "$out" | grep -m1 '^FAIL seed ' || true)
  if [ $rc -eq 1 ] && [ -n "$fail_line" ]; then
    seed=$(printf '%s\n' "$fail_line" | sed -E 's/^FAIL seed ([0-9]+).*/\1/')
    violation=$(printf '%s\n' "$fail_line" | sed -E 's/^FAIL seed [0-9]+ \([^)]*\): (t=[0-9]+ ms: )?//')
    if printf '%s\n' "$fail_line" | grep -Eq "${EXPECT[$bug]}"; then
      echo "bug $bug: caught at seed $seed in $((SECONDS - t0)) s (violation: $violation)"
    else
      echo "bug $bug: caught at seed $seed but not as /${EXPECT[$bug]}/ (violation: $violation)"
      missed=$((missed + 1))
    fi
    printf '%s\n' "$out" | grep -m1 '^replay: ' | sed 's/^/  /'
  else
    echo "bug $bug: MISSED ($BUG_SEEDS seeds x $BUG_STEPS steps, rc=$rc)"
    missed=$((missed + 1))
  fi
done
[ $missed -eq 0 ]
