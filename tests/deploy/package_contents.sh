#!/usr/bin/env bash
# The packages' contents, in the default tier (docs/testing.md, "Tiers"):
# the .deb and the .rpm packed by cpack from the test build itself (no
# portable build, no compile: its binary and man page are already built),
# then inspected: every file in both (binary, unit, man page, docs, example
# config, LICENSE), the man page lists the subcommands, the packaged binary
# runs, and the license (package_files.sh). What only the portable build
# shows (NEEDED libraries, glibc versions, the exact Depends and Requires,
# dpkg -i in a Debian 12 root, the boot rehearsal) is in the `full` tier
# (portability_checks.sh, boot_rehearsal.sh, on scripts/package.sh's packages).
#   package_contents.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "package_contents: FAIL: $*" >&2; exit 1; }

# gzip for the .rpm here: xz of the large sanitizer binary takes minutes, and
# the payload's compression is checked on the real packages (portability_checks.sh).
for generator in DEB RPM; do
  (cd "$build" && cpack -G "$generator" -B "$work/out" -D CPACK_RPM_COMPRESSION_TYPE=gzip) \
    > "$work/cpack-$generator.log" 2>&1 || { cat "$work/cpack-$generator.log"; fail "cpack -G $generator"; }
done
deb=$(find "$work/out" -maxdepth 1 -name 'spotguard_*.deb')
rpm=$(find "$work/out" -maxdepth 1 -name 'spotguard-*.rpm')
{ [ -n "$deb" ] && [ -n "$rpm" ]; } || fail "cpack made no .deb or no .rpm: $(ls "$work/out")"

dpkg-deb -x "$deb" "$work/root"
zcat "$work/root/usr/share/man/man1/spotguard.1.gz" | grep -q 'drill' || fail "the man page lacks the subcommands"
"$work/root/usr/bin/spotguard" --version | grep -q '^spotguard ' || fail "the packaged binary does not run"
cmp -s "$work/root/usr/lib/systemd/system/spotguard@.service" "$src/scripts/spotguard@.service" ||
  fail "the packaged unit differs from scripts/spotguard@.service"
echo "ok: $(basename "$deb") and $(basename "$rpm"): the man page, the binary and the unit"
bash "$src/tests/deploy/package_files.sh" "$src" "$deb" "$rpm"
echo "package_contents: 2 passed, 0 failed"
