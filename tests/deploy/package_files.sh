#!/usr/bin/env bash
# The files of both packages and their license (issue 37), for
# package_contents.sh and portability_checks.sh: the binary, the unit, the
# man page, the docs, the example config, LICENSE and the copyright file are
# in the .deb and the .rpm; the .rpm's header says Apache-2.0 (`rpm -qpi`),
# the .deb's copyright file names it, both carry LICENSE byte-identical to
# the repository's, and the man page names it.
#   package_files.sh SOURCE_DIR DEB RPM
set -euo pipefail
src=$1 deb=$2 rpm=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() { echo "package_files: FAIL: $*" >&2; exit 1; }

deb_files=$(dpkg-deb -c "$deb" | awk '{print $NF}' | sed 's|^\./|/|')
rpm_files=$(rpm -qpl "$rpm" 2> /dev/null)
for f in /usr/bin/spotguard /usr/lib/systemd/system/spotguard@.service /usr/share/man/man1/spotguard.1.gz \
         /usr/share/doc/spotguard/spotguard.example.json /usr/share/doc/spotguard/README.md \
         /usr/share/doc/spotguard/LICENSE /usr/share/doc/spotguard/copyright; do
  grep -qx "$f" <<< "$deb_files" || fail "$f is not in the .deb"
  grep -qx "$f" <<< "$rpm_files" || fail "$f is not in the .rpm"
done

info=$(rpm -qpi "$rpm" 2> /dev/null)
grep -qx 'License     : Apache-2.0' <<< "$info" || fail "rpm -qpi does not show License: Apache-2.0:
$(grep -i license <<< "$info")"
dpkg-deb -x "$deb" "$work/deb"
copyright=$work/deb/usr/share/doc/spotguard/copyright
[ -f "$copyright" ] || fail "the .deb has no /usr/share/doc/spotguard/copyright"
grep -qx 'License: Apache-2.0' "$copyright" || fail "the .deb's copyright file does not name Apache-2.0"
cmp -s "$work/deb/usr/share/doc/spotguard/LICENSE" "$src/LICENSE" || fail "the .deb's LICENSE differs from the repository's"
(cd "$work" && mkdir rpm && cd rpm && rpm2cpio "$rpm" | cpio -idm --quiet ./usr/share/doc/spotguard/LICENSE)
cmp -s "$work/rpm/usr/share/doc/spotguard/LICENSE" "$src/LICENSE" || fail "the .rpm's LICENSE differs from the repository's"
zcat "$work/deb/usr/share/man/man1/spotguard.1.gz" | grep -q 'Apache License, Version 2.0' ||
  fail "the man page does not name the license"
echo "ok: every file in both; .rpm License: Apache-2.0; .deb copyright file names Apache-2.0; LICENSE in both; man page names it"
