#!/usr/bin/env bash
# The packages scripts/package.sh built, checked for what lets them install
# on Debian 12, Ubuntu 22.04/24.04 and Amazon Linux 2023:
#   1. the packaged binary: NEEDED only glibc's libraries, libcurl.so.4,
#      libssl.so.3 and libcrypto.so.3, no GLIBC symbol version above 2.34
#      (and the sanitizer test build's binary, which breaks both rules, is
#      reported: the check can fail);
#   2. the .deb's Depends and the .rpm's Requires, exactly, and their files;
#      the .rpm against stand-ins for Amazon Linux 2023's glibc, libcurl-minimal
#      and openssl-libs, with rpm's own dependency check; the license
#      (package_files.sh: `rpm -qpi` shows Apache-2.0, the .deb's copyright file);
#   3. a minimal Debian 12 root (debootstrap --variant=minbase, plus libcurl4
#      and libssl3 from apt inside it, nothing else), cached under the build
#      dir keyed by suite, mirror and package list: `dpkg -i` of the .deb,
#      `spotguard --version`, and a file:// snapshot and restore round trip
#      inside it (chroot) with the restored bytes compared;
#   4. a bare root with nothing but the dynamic loader, libc and the libcurl/
#      OpenSSL libraries (with their own dependencies) from that Debian root:
#      the binary runs there, so it needs no libstdc++, libgcc_s, fmt, spdlog,
#      pugixml of the system.
# No archive reachable for debootstrap is a failure, never a skip.
#   portability_checks.sh BUILD_DIR PACKAGE_DIR TEST_BUILD_BINARY
set -euo pipefail
build=$1 pkgdir=$(cd "$2" && pwd) test_bin=$3
work=$(mktemp -d)
root=
cleanup() {
  set +e
  if [ -n "$root" ]; then
    mountpoint -q "$root/proc" && umount "$root/proc"
    chroot "$root" dpkg --purge spotguard > /dev/null 2>&1
    rm -rf "$root/tmp/portability"
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() { echo "portability_checks: FAIL: $*" >&2; exit 1; }
started=$(date +%s)

deb=$(find "$pkgdir" -maxdepth 1 -name 'spotguard_*_amd64.deb' | head -n 1)
rpm=$(find "$pkgdir" -maxdepth 1 -name 'spotguard-*.x86_64.rpm' | head -n 1)
[ -n "$deb" ] || fail "no .deb in $pkgdir (scripts/package.sh builds it)"
[ -n "$rpm" ] || fail "no .rpm in $pkgdir (scripts/package.sh builds it)"

# inspect_binary FILE: prints every problem, exits non-zero if there is one.
allowed_needed='^(libc\.so\.6|libm\.so\.6|libpthread\.so\.0|libdl\.so\.2|librt\.so\.1|ld-linux-x86-64\.so\.2|libcurl\.so\.4|libssl\.so\.3|libcrypto\.so\.3)$'
max_glibc=2.34
inspect_binary() {
  local file=$1 problems=0 lib v
  while read -r lib; do
    if ! [[ $lib =~ $allowed_needed ]]; then
      echo "  NEEDED $lib is not one of glibc's libraries, libcurl.so.4, libssl.so.3, libcrypto.so.3"
      problems=1
    fi
  done < <(readelf -d "$file" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p')
  while read -r v; do
    if [ "$(printf '%s\n%s\n' "$v" "$max_glibc" | sort -V | tail -n 1)" != "$max_glibc" ]; then
      echo "  GLIBC_$v is above GLIBC_$max_glibc: $(objdump -T "$file" | grep -F "(GLIBC_$v)" | awk '{print $NF}' | sort -u | tr '\n' ' ')"
      problems=1
    fi
  done < <(objdump -T "$file" | grep -o 'GLIBC_[0-9][0-9.]*' | sed 's/GLIBC_//' | sort -uV)
  return $problems
}

echo "== the packaged binary"
dpkg-deb -x "$deb" "$work/deb"
bin=$work/deb/usr/bin/spotguard
report=$(inspect_binary "$bin") || fail "the packaged binary is not portable:
$report"
needed=$(readelf -d "$bin" | sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' | tr '\n' ' ')
highest=$(objdump -T "$bin" | grep -o 'GLIBC_[0-9][0-9.]*' | sort -uV | tail -n 1)
echo "ok: $(stat -c %s "$bin") bytes; NEEDED: $needed; highest symbol version: $highest"
if bad=$(inspect_binary "$test_bin"); then
  fail "the sanitizer test build's binary passed the inspection: the check cannot fail"
fi
echo "ok: the sanitizer test build's binary is reported: $(grep -c '' <<< "$bad") problems, e.g. $(head -n 1 <<< "$bad" | sed "s/^ *//")"

echo "== package metadata"
depends=$(dpkg-deb -f "$deb" Depends)
[ "$depends" = "libc6 (>= 2.34), libcurl4, libssl3" ] || fail ".deb Depends: $depends"
expected_requires=$(printf '%s\n' 'glibc >= 2.34' 'libcurl' 'openssl-libs >= 3' \
  'rpmlib(CompressedFileNames) <= 3.0.4-1' 'rpmlib(FileDigests) <= 4.6.0-1' \
  'rpmlib(PayloadFilesHavePrefix) <= 4.0-1' 'rpmlib(PayloadIsXz) <= 5.2-1' | sort)
requires=$(rpm -qpR "$rpm" 2> /dev/null | sed 's/ *$//' | sort)
[ "$requires" = "$expected_requires" ] || fail ".rpm Requires differ:
$(diff <(echo "$expected_requires") <(echo "$requires"))"
[ "$(rpm -qp --qf '%{ARCH}' "$rpm" 2> /dev/null)" = x86_64 ] || fail "the .rpm is not x86_64"
rpm_files=$(rpm -qpl "$rpm" 2> /dev/null)
# The .rpm must not claim directories of the system's own packages.
for d in /usr /usr/bin /usr/lib/systemd /usr/lib/systemd/system /usr/share/man/man1; do
  if grep -qx "$d" <<< "$rpm_files"; then fail "the .rpm owns $d"; fi
done
(cd "$work" && rpm2cpio "$rpm" | cpio -idm --quiet)
# rpmbuild strips the binary once more, so the bytes differ from the .deb's;
# the .rpm's binary gets the same inspection.
report=$(inspect_binary "$work/usr/bin/spotguard") || fail "the .rpm's binary is not portable:
$report"
[ "$("$work/usr/bin/spotguard" --version)" = "$("$bin" --version)" ] || fail "the .deb and the .rpm carry different versions"
bash "$(dirname "$0")/package_files.sh" "$(cd "$(dirname "$0")/../.." && pwd)" "$deb" "$rpm"
echo "ok: .deb Depends: $depends"
echo "ok: .rpm Requires: $(grep -v '^rpmlib' <<< "$requires" | paste -sd, | sed 's/,/, /g') (and rpmlib features)"

echo "== the .rpm's Requires against Amazon Linux 2023's packages"
# rpm's own resolver, with empty stand-ins carrying the names, epochs and
# versions AL2023 ships: glibc 2.34, libcurl-minimal 8.5.0 (which provides
# libcurl), openssl-libs 1:3.0.8 (an epoch the Requires do not name). The
# same without glibc must fail.
stub() {  # stub NAME EPOCH VERSION [PROVIDES]
  {
    echo "Name: $1"
    [ -z "$2" ] || echo "Epoch: $2"
    printf '%s\n' "Version: $3" "Release: 1.amzn2023" "Summary: stand-in" "License: none" "BuildArch: x86_64"
    [ -z "${4:-}" ] || echo "Provides: $4"
    printf '%s\n' "%description" "stand-in" "%files"
  } > "$work/$1.spec"
  rpmbuild -bb --define "_topdir $work/rpmbuild" --define "_build_id_links none" "$work/$1.spec" \
    > "$work/rpmbuild.log" 2>&1 || { cat "$work/rpmbuild.log"; fail "rpmbuild of the $1 stand-in"; }
}
stub glibc "" 2.34
stub libcurl-minimal "" 8.5.0 "libcurl = 8.5.0-1.amzn2023"
stub openssl-libs 1 3.0.8
stubs=("$work"/rpmbuild/RPMS/x86_64/*.rpm)
rpm --dbpath "$work/al2023-db" --initdb
rpm --dbpath "$work/al2023-db" --justdb --nodeps -i "${stubs[@]}" 2> /dev/null
rpm --dbpath "$work/al2023-db" --test -i "$rpm" > "$work/rpm-test.log" 2>&1 ||
  fail "the .rpm's Requires are not met by AL2023's packages: $(cat "$work/rpm-test.log")"
rpm --dbpath "$work/al2023-db" --justdb --nodeps -e glibc
if rpm --dbpath "$work/al2023-db" --test -i "$rpm" > "$work/rpm-test.log" 2>&1; then
  fail "the .rpm installs without glibc: its Requires are not checked"
fi
grep -q "glibc >= 2.34 is needed" "$work/rpm-test.log" || fail "unexpected: $(cat "$work/rpm-test.log")"
echo "ok: rpm --test -i resolves them against glibc 2.34, libcurl-minimal 8.5.0, openssl-libs 1:3.0.8; without glibc it fails"

echo "== Debian 12 root (debootstrap minbase + libcurl4 libssl3)"
# The mirror apt uses on this machine (or SPOTGUARD_DEBIAN_MIRROR).
mirror=${SPOTGUARD_DEBIAN_MIRROR:-}
if [ -z "$mirror" ]; then
  mirror=$(sed -n 's/^URIs: *\([^ ]*\).*/\1/p' /etc/apt/sources.list.d/*.sources 2> /dev/null | grep -v security | head -n 1 || true)
fi
if [ -z "$mirror" ] && [ -f /etc/apt/sources.list ]; then
  mirror=$(awk '$1 == "deb" && $3 ~ /^bookworm$/ {print $2; exit}' /etc/apt/sources.list)
fi
[ -n "$mirror" ] || fail "no Debian mirror in /etc/apt/sources.list or sources.list.d"
extra="libcurl4 libssl3"
key=$(printf 'bookworm minbase %s %s v1' "$mirror" "$extra" | sha256sum | cut -c1-12)
cache=${SPOTGUARD_CHROOT_CACHE:-$build/chroots}
root_ready=$cache/bookworm-minbase-$key
if [ ! -f "$root_ready/.spotguard-root-complete" ]; then
  new=$root_ready.new
  if grep -q " $new" /proc/mounts; then fail "$new has something mounted; not touching it"; fi
  rm -rf "$new"
  mkdir -p "$cache"
  echo "building $root_ready from $mirror (the first time takes a few minutes)"
  t0=$(date +%s)
  if ! debootstrap --variant=minbase bookworm "$new" "$mirror" > "$cache/debootstrap-$key.log" 2>&1; then
    tail -n 20 "$cache/debootstrap-$key.log" >&2
    fail "debootstrap could not build a Debian 12 root from $mirror (log: $cache/debootstrap-$key.log); this check cannot run without an archive"
  fi
  cp /etc/resolv.conf "$new/etc/resolv.conf"
  # shellcheck disable=SC2086  # $extra is a list of package names
  if ! chroot "$new" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin DEBIAN_FRONTEND=noninteractive \
      sh -c "apt-get update -q && apt-get install -y -q --no-install-recommends $extra && apt-get clean" \
      > "$cache/apt-$key.log" 2>&1; then
    tail -n 20 "$cache/apt-$key.log" >&2
    fail "apt-get in the Debian 12 root could not install $extra from $mirror"
  fi
  touch "$new/.spotguard-root-complete"
  mv "$new" "$root_ready"
  echo "built in $(( $(date +%s) - t0 )) s"
else
  echo "cached: $root_ready"
fi
root=$root_ready
for lib in libfmt libspdlog libpugixml; do
  if compgen -G "$root/usr/lib/x86_64-linux-gnu/$lib*" > /dev/null; then fail "the Debian root has $lib"; fi
done
chroot "$root" dpkg --purge spotguard > /dev/null 2>&1 || true
cp "$deb" "$root/tmp/spotguard.deb"
chroot "$root" dpkg -i /tmp/spotguard.deb > "$work/dpkg.log" 2>&1 || { cat "$work/dpkg.log"; fail "dpkg -i in the Debian 12 root"; }
rm -f "$root/tmp/spotguard.deb"
mount -t proc proc "$root/proc"
in_root() { chroot "$root" /usr/bin/env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root "$@"; }
version=$(in_root spotguard --version) || fail "spotguard --version in the Debian 12 root"
[[ $version == "spotguard "* ]] || fail "spotguard --version printed: $version"
echo "ok: dpkg -i installed it; $version"

t=$root/tmp/portability
rm -rf "$t"
mkdir -p "$t/data/sub"
head -c 5000000 /dev/urandom > "$t/data/model.bin"
head -c 70000 /dev/urandom > "$t/data/sub/optimizer.bin"
printf 'step 1200\n' > "$t/data/sub/meta.txt"
: > "$t/data/empty.txt"
in_root spotguard snapshot --job portability --store file:///tmp/portability/store \
  --dir /tmp/portability/data > "$work/snapshot.log" 2>&1 || { cat "$work/snapshot.log"; fail "snapshot in the Debian 12 root"; }
in_root spotguard restore --job portability --store file:///tmp/portability/store \
  --to /tmp/portability/restored > "$work/restore.log" 2>&1 || { cat "$work/restore.log"; fail "restore in the Debian 12 root"; }
restored=$t/restored
[ -f "$restored/model.bin" ] || restored=$t/restored/data
# The restore marker (.spotguard-restored.json) is spotguard's own file.
diff -r --exclude='.spotguard*' "$t/data" "$restored" || fail "the restored files differ from the originals"
echo "ok: file:// snapshot and restore in the root: 4 files, $(du -sb "$t/data" | cut -f1) bytes, identical"

echo "== bare root: the loader, libc, libcurl and OpenSSL only"
bare=$work/bare
mkdir -p "$bare/usr/lib64" "$bare/usr/lib/x86_64-linux-gnu" "$bare/usr/bin" "$bare/tmp"
ln -s usr/lib "$bare/lib"
ln -s usr/lib64 "$bare/lib64"
cp "$bin" "$bare/usr/bin/spotguard"
cp -L "$root/lib64/ld-linux-x86-64.so.2" "$bare/usr/lib64/"
# glibc's libc and libm; libcurl, libssl and libcrypto with everything they
# load themselves, as the Debian root's loader resolves them.
libs="/lib/x86_64-linux-gnu/libc.so.6 /lib/x86_64-linux-gnu/libm.so.6 /usr/lib/x86_64-linux-gnu/libcurl.so.4
      /usr/lib/x86_64-linux-gnu/libssl.so.3 /usr/lib/x86_64-linux-gnu/libcrypto.so.3"
libs="$libs $(in_root /lib64/ld-linux-x86-64.so.2 --list /usr/lib/x86_64-linux-gnu/libcurl.so.4 |
              awk '$2 == "=>" {print $3}')"
for lib in $libs; do
  cp -L "$root$lib" "$bare/usr/lib/x86_64-linux-gnu/"
done
for lib in libstdc++ libgcc_s libfmt libspdlog libpugixml; do
  if compgen -G "$bare/usr/lib/x86_64-linux-gnu/$lib*" > /dev/null; then fail "the bare root has $lib"; fi
done
bare_version=$(chroot "$bare" /usr/bin/spotguard --version 2>&1) || fail "spotguard does not run in the bare root: $bare_version"
cp -a "$t/data" "$bare/tmp/data"
if ! { chroot "$bare" /usr/bin/spotguard snapshot --job bare --store file:///tmp/store --dir /tmp/data &&
        chroot "$bare" /usr/bin/spotguard restore --job bare --store file:///tmp/store --to /tmp/restored; } \
     > "$work/bare.log" 2>&1; then
  cat "$work/bare.log"
  fail "snapshot and restore in the bare root"
fi
diff -r --exclude=".spotguard*" "$bare/tmp/data" "$bare/tmp/restored" > /dev/null || fail "the bare root's restore differs from the original"
echo "ok: runs with $(find "$bare/usr/lib" -type f | wc -l) libraries (no libstdc++, libgcc_s, fmt, spdlog, pugixml): $bare_version; snapshot and restore identical"

echo "portability_checks: 5 passed, 0 failed ($(( $(date +%s) - started )) s)"
