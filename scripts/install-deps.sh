#!/usr/bin/env bash
# Installs spotguard's dependencies from Debian 12's packages, by profile:
#   build  the compiler, CMake and the libraries: enough to build the
#          spotguard binary (scripts/quickstart.sh installs only this)
#   test   build, plus what the test suite uses: GoogleTest, Google Benchmark
#          (the test build builds the benches too), the Ceph gateway, clang
#          and libFuzzer, torch, awscli, packaging and deployment tools
#          (scripts/test.sh)
#   bench  test, plus what bench/run.sh compares against and plots with:
#          rclone, gnuplot, hyperfine (bench/run.sh)
# Packages named after the profile are installed too
# (`install-deps.sh build python3`). Non-interactive and idempotent: safe to
# run again on a machine that already has everything.
#   install-deps.sh [build|test|bench] [PACKAGE...]     (default: test)
set -euo pipefail

profile=${1:-test}
[ $# -eq 0 ] || shift

build_packages=(
  # toolchain
  build-essential cmake pkg-config
  # libraries (each wrapped in one place under common/)
  libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libzstd-dev libpugixml-dev libcli11-dev libxxhash-dev
)
test_packages=(
  git ca-certificates clang-format bsdutils
  # the test runners and benches (built by the test build), tools the tests call
  libgtest-dev libgmock-dev libbenchmark-dev python3 zstd xxhash curl procps openssl time bc
  # scripts/restore-by-hand.sh's tools (its test restores with aws, jq and
  # zstd); `file`, which cpack's Debian generator needs for dpkg-shlibdeps
  jq file
  # real S3 for integration tests: a single-node Ceph RADOS Gateway; awscli
  # and botocore for the cross-checks against the stock tools
  ceph-mon ceph-osd radosgw ceph-common python3-botocore awscli
  # reliability tests: fuzzing (clang's libFuzzer and sanitizer runtimes),
  # clock skew, network namespaces with packet loss
  clang libclang-rt-14-dev libfaketime faketime iproute2 iptables
  # the PyTorch example trainers and their tests
  python3-torch
  # `spotguard report --html` checked in headless Chromium; the metrics file
  # checked with promtool (from the prometheus package)
  chromium prometheus
  # packaging and deployment checks: man page, Debian package, unit, scripts;
  # the RPM package (rpmbuild; rpm2cpio and cpio unpack it), the Debian 12 root
  # for the portability check (debootstrap)
  help2man dpkg-dev systemd shellcheck rpm rpm2cpio cpio debootstrap
)
bench_packages=(
  # side-by-side benchmarks (bench/run.sh), with plots; startup timing
  rclone gnuplot-nox hyperfine
)

case "$profile" in
  build) packages=("${build_packages[@]}") ;;
  test) packages=("${build_packages[@]}" "${test_packages[@]}") ;;
  bench) packages=("${build_packages[@]}" "${test_packages[@]}" "${bench_packages[@]}") ;;
  *)
    echo "install-deps: unknown profile \"$profile\" (expected build, test or bench)" >&2
    exit 2
    ;;
esac
packages+=("$@")

# The CloudFormation and Kubernetes checks run on Node.js; the machine image
# may bring its own.
if [ "$profile" != build ] && { ! command -v node > /dev/null || ! command -v npm > /dev/null; }; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages of profile $profile already installed"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

echo "install-deps: installing (profile $profile) ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
