#!/usr/bin/env bash
# First contact on a fresh Debian 12 machine: installs what is needed, builds
# spotguard, and runs `spotguard drill` on the bundled example trainer with a
# local file:// store: the job runs, a spot interruption notice arrives after
# 15 seconds, spotguard gets a fresh checkpoint into the store and stops the
# trainer, a "replacement instance" restores it and resumes. The report at the
# end says what survived. Takes about a minute after the build.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

build=${SPOTGUARD_BUILD_DIR:-build/release}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DSPOTGUARD_BUILD_TESTS=OFF -DSPOTGUARD_BUILD_BENCH=OFF
cmake --build "$build" -j "$(nproc)" --target spotguard

echo
"$build/agent/spotguard" --version
SPOTGUARD_LOG_LEVEL=${SPOTGUARD_LOG_LEVEL:-warn} \
  "$build/agent/spotguard" drill --after 15s -c examples/drill.json
