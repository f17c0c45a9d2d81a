#!/usr/bin/env bash
# First contact on a fresh Debian 12 machine: installs only what it runs (the
# `build` profile of scripts/install-deps.sh, and python3 for the example
# trainer), builds the one binary it runs (Release, the libraries in unity
# batches), and runs `spotguard drill` on the bundled example trainer with a
# local file:// store: the job runs, a spot interruption notice arrives after
# 15 seconds, spotguard gets a fresh checkpoint into the store and stops the
# trainer, a "replacement instance" restores it and resumes. The report at the
# end says what survived, then the time each phase took (README.md, "What the
# quickstart shows", has the figures measured for a fresh build).
#   SPOTGUARD_BUILD_DIR  the build dir (build/quickstart)
set -euo pipefail
cd "$(dirname "$0")/.."

phase_start=$SECONDS
phases=()
end_phase() {  # end_phase NAME: records how long the phase since the last one took
  phases+=("$(printf '  %-22s %4d s' "$1" $((SECONDS - phase_start)))")
  phase_start=$SECONDS
}

# The drill's trainer (examples/simple_trainer.py) needs python3 and its
# standard library, nothing else.
bash scripts/install-deps.sh build python3
end_phase install

build=${SPOTGUARD_BUILD_DIR:-build/quickstart}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOTGUARD_UNITY_BUILD=ON \
  -DSPOTGUARD_BUILD_TESTS=OFF -DSPOTGUARD_BUILD_BENCH=OFF
cmake --build "$build" -j "$(nproc)" --target spotguard
end_phase configure+build

echo
"$build/agent/spotguard" --version
SPOTGUARD_LOG_LEVEL=${SPOTGUARD_LOG_LEVEL:-warn} \
  "$build/agent/spotguard" drill --after 15s -c examples/drill.json
end_phase drill

echo
echo "quickstart phases:"
printf '%s\n' "${phases[@]}"
