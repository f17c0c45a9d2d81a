#!/usr/bin/env bash
# Installs every build, test and service dependency of spotguard from Debian 12's
# packages. Non-interactive and idempotent: safe to run again on a machine that
# already has everything.
set -euo pipefail

packages=(
  # toolchain
  build-essential cmake pkg-config git ca-certificates clang-format bsdutils
  # libraries (each wrapped in one place under common/)
  libcurl4-openssl-dev libssl-dev nlohmann-json3-dev libspdlog-dev libfmt-dev
  libzstd-dev libpugixml-dev libcli11-dev libxxhash-dev
  # tests and benches
  libgtest-dev libgmock-dev libbenchmark-dev python3 zstd xxhash curl procps openssl time bc
  # real S3 for integration tests: a single-node Ceph RADOS Gateway
  ceph-mon ceph-osd radosgw ceph-common
  # cross-checks and side-by-side benchmarks (bench/run.sh), with plots
  python3-botocore awscli rclone gnuplot-nox
  # reliability tests: fuzzing (clang's libFuzzer and sanitizer runtimes),
  # clock skew, network namespaces with packet loss
  clang libclang-rt-14-dev libfaketime faketime iproute2 iptables
  # the PyTorch example trainer and its end-to-end test
  python3-torch
  # `spotguard report --html` checked in headless Chromium; the metrics file
  # checked with promtool (from the prometheus package)
  chromium prometheus
  # packaging and deployment checks: man page, Debian package, unit, scripts;
  # the RPM package (rpmbuild; rpm2cpio and cpio unpack it), the Debian 12 root for the
  # portability check (debootstrap), startup timing (hyperfine)
  help2man dpkg-dev systemd shellcheck rpm rpm2cpio cpio debootstrap hyperfine
)

# The CloudFormation check runs on Node.js; the machine image may bring its own.
if ! command -v node > /dev/null || ! command -v npm > /dev/null; then
  packages+=(nodejs npm)
fi

missing=()
for p in "${packages[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q 'install ok installed'; then
    missing+=("$p")
  fi
done

if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#packages[@]} packages already installed"
  exit 0
fi

sudo_cmd=()
if [ "$(id -u)" -ne 0 ]; then
  sudo_cmd=(sudo)
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
"${sudo_cmd[@]}" apt-get update -q
"${sudo_cmd[@]}" apt-get install -y -q --no-install-recommends "${missing[@]}"
