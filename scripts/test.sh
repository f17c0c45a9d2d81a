#!/usr/bin/env bash
# The test suite on a fresh Debian 12 machine: installs what is needed (the
# `test` profile of scripts/install-deps.sh), builds with AddressSanitizer and
# UndefinedBehaviorSanitizer, starts the test services (a Ceph RADOS Gateway
# on loopback, unless SPOTGUARD_TEST_S3_* names one already), runs the CTest
# tests and stops the services again, also when something fails. Extra
# arguments go to ctest, e.g. `scripts/test.sh -R Conformance`.
#
# Two tiers (docs/testing.md, "Tiers"): by default every test but those
# labelled `full` (ctest -LE full), which covers every behaviour; `--full`
# adds the slowest release checks: the package build and the Debian 12 root
# (debootstrap), the boot rehearsal, the crash and fencing trials, and the
# libFuzzer targets in a clang build of their own.
#
# Options, before the ctest arguments:
#   --full  the release tier as well (the tests labelled `full`, the fuzz
#           build and fuzzing); combine with ctest arguments to select among
#           them, e.g. `--full -L package`.
#   --long  the long variants of the reliability tests: more crash trials,
#           more injected faults, longer fuzzing.
#   --unit  only the tests labelled `unit` (the same as `-L unit`): builds
#           only what they run (target tests_unit), starts no S3 gateway and
#           skips the fuzz build. Unit tests need no service.
set -euo pipefail
cd "$(dirname "$0")/.."

export SPOTGUARD_LONG_TESTS=0
full=0
ctest_args=()
while [ $# -gt 0 ]; do
  case "$1" in
    --full) full=1 ;;
    --long) SPOTGUARD_LONG_TESTS=1 ;;
    --unit) ctest_args+=(-L unit) ;;
    *) break ;;
  esac
  shift
done
ctest_args+=("$@")

# Unit only: every label the ctest arguments select is `unit`
# (`-L unit`, `-Lunit`, `--label-regex unit`, `--label-regex=unit`).
labels=()
for ((i = 0; i < ${#ctest_args[@]}; i++)); do
  case "${ctest_args[i]}" in
    -L | --label-regex) labels+=("${ctest_args[i + 1]:-}") ;;
    -L?*) labels+=("${ctest_args[i]#-L}") ;;
    --label-regex=*) labels+=("${ctest_args[i]#--label-regex=}") ;;
  esac
done
unit_only=0
if [ ${#labels[@]} -gt 0 ]; then
  unit_only=1
  for l in "${labels[@]}"; do [ "$l" = unit ] || unit_only=0; done
fi

# Each phase's wall time, printed at the end (docs/testing.md records them).
phases=()
phase_start=$SECONDS
phase_done() {
  phases+=("$1 $((SECONDS - phase_start)) s")
  phase_start=$SECONDS
}
print_phases() {
  [ ${#phases[@]} -gt 0 ] || return 0
  local joined
  joined=$(IFS=','; echo "${phases[*]}")
  echo "test.sh: time by phase: ${joined//,/, }; total ${SECONDS} s" >&2
}

bash scripts/install-deps.sh test
phase_done install

build=${SPOTGUARD_TEST_BUILD_DIR:-build/test}
jobs=$(nproc)
# A fresh build dir (CI's) compiles the common and agent libraries in unity
# batches (SPOTGUARD_UNITY_BUILD, CMakeLists.txt), the quicker way through a
# whole build; an existing one keeps what it was configured with, so the
# edit-compile loop of `--unit` still recompiles one file per edit.
# It also keeps line tables only (-g1: file:line in the sanitizers' reports,
# no variable info), which compiles and links about a tenth quicker, and
# precompiles the headers every batch includes (SPOTGUARD_PCH).
unity=()
[ -f "$build/CMakeCache.txt" ] || unity=(-DSPOTGUARD_UNITY_BUILD=ON -DSPOTGUARD_PCH=ON -DCMAKE_CXX_FLAGS_DEBUG=-g1)
# The Google Benchmark programs (bench/) are compiled in the release tier
# only: no test runs them, and bench/run.sh builds its own Release copy.
bench=OFF
[ "$full" = 1 ] && bench=ON
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Debug -DSPOTGUARD_SANITIZE=ON -DSPOTGUARD_BUILD_BENCH=$bench \
  "${unity[@]}"
if [ "$unit_only" = 1 ]; then
  cmake --build "$build" -j "$jobs" --target tests_unit
else
  cmake --build "$build" -j "$jobs"
fi
phase_done build

started_s3=0
cleanup() {
  print_phases
  if [ "$started_s3" = 1 ]; then
    bash scripts/s3-server.sh stop || echo "test.sh: stopping the S3 gateway failed" >&2
  fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

if [ "$unit_only" = 1 ]; then
  echo "test.sh: unit tests only; no S3 gateway, no fuzz build" >&2
elif [ -z "${SPOTGUARD_TEST_S3_ENDPOINT:-}" ]; then
  started_s3=1
  exports=$(bash scripts/s3-server.sh start)
  phase_done "S3 gateway start"
  eval "$exports"
else
  echo "test.sh: using the S3 gateway at $SPOTGUARD_TEST_S3_ENDPOINT" >&2
fi

# Reliability tests write their trial counts here; the table is printed at
# the end (scripts/reliability-report.py --update docs/reliability.md keeps it).
export SPOTGUARD_RELIABILITY_DIR="$PWD/$build/reliability"
rm -rf "$SPOTGUARD_RELIABILITY_DIR"

# libFuzzer targets (tests/fuzz) in a clang build of their own: each fuzzes
# for 20 s from a copy of its seed corpus (300 s with --long), two at a time;
# a crash fails the run and prints the reproducer's path. Run with --full and
# no ctest arguments, or with `--full -L fuzz`. Their build runs while the
# CTest tests do, at the lowest CPU priority (most e2e tests wait on processes
# and the network, not on the CPU), with the libraries in unity batches; its
# output goes to $build/fuzz-build.log.
fuzz=0
if [ "$full" = 1 ] && [ "$unit_only" = 0 ] &&
  { [ ${#ctest_args[@]} -eq 0 ] || [[ " ${ctest_args[*]} " == *" fuzz "* ]]; }; then
  fuzz=1
  fuzz_build=${SPOTGUARD_FUZZ_BUILD_DIR:-build/fuzz}
  fuzz_log=$build/fuzz-build.log
  (CC=clang CXX=clang++ cmake -S . -B "$fuzz_build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DSPOTGUARD_FUZZ=ON \
    -DSPOTGUARD_UNITY_BUILD=ON &&
    nice -n 19 cmake --build "$fuzz_build" -j "$jobs" --target fuzz_targets) > "$fuzz_log" 2>&1 &
  fuzz_pid=$!
fi

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# The default tier leaves out the tests labelled `full`.
tier=()
[ "$full" = 1 ] || tier=(-LE full)
# A fresh build dir has no record of the tests' durations, and CTest would
# start them in the order they were declared, the longest possibly last. The
# durations of a recorded run (tests/ctest_costs.txt) make it start the
# longest first (docs/testing.md, "Parallel runs").
costs="$build/Testing/Temporary/CTestCostData.txt"
if [ ! -f "$costs" ]; then
  mkdir -p "$(dirname "$costs")"
  cp tests/ctest_costs.txt "$costs"
fi
ctest_rc=0
# Two CTest slots per core: most e2e tests wait on processes, the network
# or the gateway; the tests that keep a core busy take two slots each
# (PROCESSORS 2, tests/CMakeLists.txt; docs/testing.md, "Parallel runs").
ctest --test-dir "$build" --output-on-failure -j "$((jobs * 2))" "${tier[@]}" "${ctest_args[@]}" ||
  ctest_rc=$?
phase_done ctest

if [ "$fuzz" = 1 ]; then
  if ! wait "$fuzz_pid"; then
    tail -n 60 "$fuzz_log" >&2
    echo "test.sh: building the fuzz targets failed (all of it in $fuzz_log)" >&2
    exit 1
  fi
  if [ "$ctest_rc" = 0 ]; then
    ctest --test-dir "$fuzz_build" --output-on-failure -L fuzz -j 2
  fi
fi
[ "$ctest_rc" = 0 ] || exit "$ctest_rc"

if compgen -G "$SPOTGUARD_RELIABILITY_DIR/*.json" > /dev/null; then
  python3 scripts/reliability-report.py "$SPOTGUARD_RELIABILITY_DIR"
fi
