#!/usr/bin/env bash
# Builds the packages from a clean checkout: the portable release binary
# (SPOTGUARD_PORTABLE=ON: spdlog, fmt, pugixml, zstd, libstdc++ and libgcc
# inside; glibc >= 2.34, libcurl 4 and OpenSSL 3 from the system), its man
# page, and from them
#   OUT/spotguard_VERSION_amd64.deb        Debian 12, Ubuntu 22.04 and 24.04
#   OUT/spotguard-VERSION-1.x86_64.rpm     Amazon Linux 2023
# OUT is build/package unless given. Incremental: a second run rebuilds only
# what changed. SPOTGUARD_PACKAGE_BUILD_DIR (build/portable) is the CMake
# build dir; SPOTGUARD_JOBS the parallel compile jobs (nproc).
#   scripts/package.sh [OUT]
set -euo pipefail
cd "$(dirname "$0")/.."
src=$PWD
out=${1:-build/package}
build=${SPOTGUARD_PACKAGE_BUILD_DIR:-build/portable}
jobs=${SPOTGUARD_JOBS:-$(nproc)}

if [ "${SPOTGUARD_SKIP_DEPS:-0}" != 1 ]; then
  bash scripts/install-deps.sh test
fi
# Unity batches (SPOTGUARD_UNITY_BUILD, CMakeLists.txt): on a fresh clone this
# whole build runs inside the test suite (CTest test package_build).
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOTGUARD_PORTABLE=ON \
  -DSPOTGUARD_BUILD_TESTS=OFF -DSPOTGUARD_BUILD_BENCH=OFF -DSPOTGUARD_UNITY_BUILD=ON > /dev/null
cmake --build "$build" -j "$jobs" --target spotguard manpage
mkdir -p "$out"
out=$(cd "$out" && pwd)
rm -f "$out"/spotguard[-_]*.deb "$out"/spotguard-*.rpm
# One cpack run per generator: each leaves its package in OUT.
for generator in DEB RPM; do
  if ! (cd "$build" && cpack -G "$generator" -B "$out" > "$out/cpack-$generator.log" 2>&1); then
    cat "$out/cpack-$generator.log" >&2
    echo "package.sh: cpack -G $generator failed" >&2
    exit 1
  fi
done
rm -rf "$out/_CPack_Packages"
deb=$(find "$out" -maxdepth 1 -name 'spotguard_*.deb')
rpm=$(find "$out" -maxdepth 1 -name 'spotguard-*.rpm')
if [ -z "$deb" ] || [ -z "$rpm" ]; then
  echo "package.sh: a package is missing in $out" >&2
  exit 1
fi
echo "package.sh: built from $src"
echo "$deb"
echo "$rpm"
