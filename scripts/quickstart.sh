#!/usr/bin/env bash
# First contact on a fresh Debian 12 machine: installs what is needed, builds
# spotguard (optimised, no sanitizers) and shows what it can do.
#
# `spotguard run` is not built yet in this version, so for now this stops at
# the help text; once it exists this script runs the bundled example trainer
# against a local file:// store and injects an interruption.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh

build=${SPOTGUARD_BUILD_DIR:-build/release}
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DSPOTGUARD_BUILD_TESTS=OFF -DSPOTGUARD_BUILD_BENCH=OFF
cmake --build "$build" -j "$(nproc)" --target spotguard

echo
"$build/agent/spotguard" --version
"$build/agent/spotguard" --help
