#!/usr/bin/env bash
# The packages' contents, in the default tier (docs/testing.md, "Tiers"):
# the .deb and the .rpm packed by cpack from the test build itself (no
# portable build, no compile: its binary and man page are already built),
# then inspected: every file in both (binary, unit, man page, docs, example
# config, LICENSE), the man page lists the subcommands, the packaged binary
# runs, and the license (license_check.sh). What only the portable build
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

deb_files=$(dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|')
rpm_files=$(rpm -qpl "$rpm" 2> /dev/null)
for f in /usr/bin/spotguard /usr/lib/systemd/system/spotguard@.service /usr/share/man/man1/spotguard.1.gz \
         /usr/share/doc/spotguard/spotguard.example.json /usr/share/doc/spotguard/README.md \
         /usr/share/doc/spotguard/LICENSE /usr/share/doc/spotguard/copyright; do
  grep -qx "$f" <<< "$deb_files" || fail "$f is not in the .deb"
  grep -qx "$f" <<< "$rpm_files" || fail "$f is not in the .rpm"
done
dpkg-deb -x "$deb" "$work/root"
zcat "$work/root/usr/share/man/man1/spotguard.1.gz" | grep -q 'drill' || fail "the man page lacks the subcommands"
"$work/root/usr/bin/spotguard" --version | grep -q '^spotguard ' || fail "the packaged binary does not run"
cmp -s "$work/root/usr/lib/systemd/system/spotguard@.service" "$src/scripts/spotguard@.service" ||
  fail "the packaged unit differs from scripts/spotguard@.service"
echo "ok: $(basename "$deb") and $(basename "$rpm"): every file in both; the man page and the binary work"
bash "$src/tests/deploy/license_check.sh" "$src" "$deb" "$rpm"
echo "package_contents: 2 passed, 0 failed"
