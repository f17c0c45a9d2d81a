#!/usr/bin/env bash
# The whole benchmark in one command: spotguard side by side with awscli,
# zstd | awscli and rclone against the Ceph gateway on loopback, with the
# machine's own limits measured in the same run; regenerates bench/RESULTS.md
# and the plots in bench/results/.
#
#   bench/run.sh [--quick] [--data-only]
#
# --quick (or BENCH_QUICK=1) shrinks the data sets (64 MiB / 256 MiB / 50 MiB
# instead of 1 GiB / 4 GiB / ~450 MiB) and the repetitions, for a run of a few
# minutes. BENCH_SECTIONS=REGEX runs only the sections whose file name matches
# (a development aid: RESULTS.md then says which sections are stale).
# BENCH_DATA_DIR (default /var/tmp/spotguard-bench-data) caches the data sets
# between runs; --data-only only makes them. See bench/README.md.
set -euo pipefail
cd "$(dirname "$0")/.."
# Debian's python3 (with python3-torch) and awscli, not a user's pyenv shims.
export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin
# "." decimals for the arithmetic on timings, and one file-name sort order.
export LC_ALL=C

BENCH_QUICK=${BENCH_QUICK:-0}
data_only=0
for arg in "$@"; do
  case $arg in
    --quick) BENCH_QUICK=1 ;;
    --data-only) data_only=1 ;;
    -h|--help) sed -n '2,16p' "$0"; exit 0 ;;
    *) echo "usage: bench/run.sh [--quick] [--data-only]" >&2; exit 2 ;;
  esac
done
export BENCH_QUICK
started_at=$(date -u '+%Y-%m-%d %H:%M UTC')
t_start=$SECONDS

bash scripts/install-deps.sh bench >&2

export BUILD="$PWD/build/release"
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DSPOTGUARD_BUILD_TESTS=OFF \
  -DSPOTGUARD_BUILD_BENCH=ON >&2
cmake --build "$BUILD" -j "$(nproc)" >&2
export SG="$BUILD/agent/spotguard"

# shellcheck source=bench/gateway.sh
. bench/gateway.sh
export OUT="$PWD/bench/results"
export LIMITS="$OUT/limits.env"
export RUN_ID
RUN_ID="bench-$(date +%s)-$$"
bench_cleanup_extra() {
  /usr/bin/aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 rm --recursive --only-show-errors \
    "s3://$BUCKET/$RUN_ID/" > /dev/null 2>&1
}

# --- data sets (cached; a stamp file next to each holds how it was made) ---
size_class=$([ "$BENCH_QUICK" = 1 ] && echo quick || echo full)
made_note=" (cached)"
export DATA="${BENCH_DATA_DIR:-/var/tmp/spotguard-bench-data}/$size_class"
mkdir -p "$DATA"
make_set() {
  local name=$1
  shift
  local want gen
  gen=$(sha256sum bench/make_checkpoint.py | cut -c1-12)
  want="make_checkpoint.py $* (generator $gen)"
  if [ -f "$DATA/$name.done" ] && [ "$(cat "$DATA/$name.done")" = "$want" ] && [ -d "$DATA/$name" ]; then
    echo "bench: data set $name cached in $DATA" >&2
    return
  fi
  echo "bench: making data set $name: $want" >&2
  rm -rf "${DATA:?}/$name" "$DATA/$name.done" "$DATA/$name.log"
  python3 bench/make_checkpoint.py "$DATA/$name" "$@" | tee "$DATA/$name.log" >&2
  echo "$want" > "$DATA/$name.done"
  made_note=" (made in this run)"
}
if [ "$BENCH_QUICK" = 1 ]; then
  make_set torch-1g --target-mib 64 --steps 30
  make_set torch-4g --target-mib 256 --steps 20
  make_set small-files --target-mib 50 --steps 30 --layout shards
else
  make_set torch-1g --target-mib 1024 --steps 30
  make_set torch-4g --target-mib 4096 --steps 20
  make_set small-files --target-mib 450 --steps 30 --layout shards
fi
# Every section compares against these (relative name and SHA-256 per file).
for set in torch-1g torch-4g small-files; do
  if [ ! -f "$DATA/$set.sha256" ] || [ "$DATA/$set.done" -nt "$DATA/$set.sha256" ]; then
    (cd "$DATA/$set" && find . -type f -print0 | sort -z | xargs -0 sha256sum) > "$DATA/$set.sha256"
  fi
done

if [ "$data_only" = 1 ]; then
  echo "bench: data sets ready in $DATA" >&2
  exit 0
fi

# --- sections ---
mkdir -p "$OUT"
if [ -z "${BENCH_SECTIONS:-}" ]; then
  rm -f "$OUT"/*.md "$OUT"/*.tsv "$OUT"/*.png "$OUT"/*.env
fi
ran=()
declare -A took load_before load_after
loadavg() { cut -d' ' -f1 /proc/loadavg; }
for section in bench/sections/*.sh; do
  name=$(basename "$section" .sh)
  if [ -n "${BENCH_SECTIONS:-}" ] && ! [[ $name =~ $BENCH_SECTIONS ]]; then continue; fi
  echo "bench: === section $name ===" >&2
  t0=$SECONDS
  load_before[$name]=$(loadavg)
  if ! bash "$section"; then
    echo "bench: section $name failed" >&2
    exit 1
  fi
  [ -f "$OUT/$name.md" ] || { echo "bench: section $name wrote no $OUT/$name.md" >&2; exit 1; }
  took[$name]=$((SECONDS - t0))
  load_after[$name]=$(loadavg)
  ran+=("$name")
done

# --- bench/RESULTS.md ---
version_of() { "$@" 2>&1 | head -1 || true; }
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- . ':!bench/results' ':!bench/RESULTS.md' 2>/dev/null; then
  commit="$commit + uncommitted changes"
fi
disk_src=$(findmnt -no SOURCE,FSTYPE -T "$DATA" | head -1)
disk_dev=$(findmnt -no SOURCE -T "$DATA" | head -1)
disk_info=$(lsblk -dno SIZE,ROTA "$disk_dev" 2>/dev/null | awk '{printf "%s, %s", $1, ($2 == 1 ? "reported rotational" : "reported non-rotational")}' || true)
ceph_version=$(radosgw --version 2>/dev/null | head -1 || true)
torch_version=$(python3 -c 'import torch; print(torch.__version__)' 2>/dev/null || echo none)
mode=$([ "$BENCH_QUICK" = 1 ] && echo ' --quick' || echo '')
results=bench/RESULTS.md
{
  echo "# Benchmark results"
  echo
  echo "Generated by \`bench/run.sh$mode\` on $started_at from commit $commit;"
  echo "the whole run (build, data sets$made_note, sections) took $(( (SECONDS - t_start) / 60 )) min $(( (SECONDS - t_start) % 60 )) s."
  echo "Do not edit: rerun \`bench/run.sh\` to regenerate this file and \`bench/results/\`."
  if [ "$BENCH_QUICK" = 1 ]; then
    echo
    echo "**Quick run**: data sets scaled down (64 MiB / 256 MiB / 50 MiB) and one repetition; the figures show"
    echo "the method works, not what the tools do on full-size checkpoints."
  fi
  if [ -n "${BENCH_SECTIONS:-}" ]; then
    echo
    echo "**Partial run**: only ${ran[*]} were regenerated; any other section below is from an earlier run."
  fi
  echo
  echo "Every tool runs against the same single-node Ceph RADOS Gateway (memstore OSD, in RAM) on loopback,"
  echo "on the same cores as the client, so the gateway's CPU use is part of every figure: these are"
  echo "side-by-side comparisons on one machine, not predictions of EC2-to-S3 rates."
  echo "How the data sets are made, the tools' settings and what each \"bound\" is: [bench/README.md](README.md)."
  echo
  echo "## Machine and versions"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| CPU | $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ *//') |"
  echo "| cores | $(nproc) |"
  echo "| RAM | $(awk '/MemTotal/ {printf "%.1f GiB", $2 / 1048576}' /proc/meminfo) |"
  echo "| kernel | $(uname -sr) |"
  echo "| disk (data sets, scratch) | $disk_src, $disk_info |"
  echo "| OS | $(. /etc/os-release && echo "$PRETTY_NAME") |"
  echo "| gcc | $(version_of gcc --version) |"
  echo "| spotguard | $(version_of "$SG" --version) (Release) |"
  echo "| awscli | $(version_of /usr/bin/aws --version) |"
  echo "| rclone | $(version_of rclone version) |"
  echo "| zstd | $(version_of zstd --version) |"
  echo "| curl | $(version_of curl --version) |"
  echo "| Ceph (radosgw) | $ceph_version |"
  echo "| torch | $torch_version |"
  echo "| gnuplot | $(version_of gnuplot --version) |"
  echo
  echo "Data sets (in \`$DATA\`):"
  echo
  for set in torch-1g torch-4g small-files; do
    printf -- '- **%s**: %s files, %s bytes. %s\n' "$set" "$(find "$DATA/$set" -type f | wc -l)" \
      "$(find "$DATA/$set" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f", s}')" \
      "$(sed 's/^make_checkpoint: //' "$DATA/$set.log" 2>/dev/null || true)"
  done
  echo
  echo "Sections, with the 1-minute load average before and after each (2 cores; anything well above"
  echo "the section's own use means something else ran on the machine at the same time):"
  echo
  echo "| section | seconds | load before | load after |"
  echo "| --- | ---: | ---: | ---: |"
  for n in "${ran[@]}"; do
    printf '| %s | %s | %s | %s |\n' "$n" "${took[$n]}" "${load_before[$n]}" "${load_after[$n]}"
  done
  for fragment in "$OUT"/[0-9][0-9]-*.md; do
    [ -f "$fragment" ] || continue
    name=$(basename "$fragment" .md)
    echo
    sed "s#($OUT/#(results/#g" "$fragment"
    # Plots of this section that the fragment does not show already.
    for png in "$OUT/$name"*.png; do
      [ -f "$png" ] || continue
      grep -q "$(basename "$png")" "$fragment" || printf '\n![%s](results/%s)\n' "$(basename "$png" .png)" "$(basename "$png")"
    done
    if [ -f "bench/analysis/$name.md" ]; then
      echo
      cat "bench/analysis/$name.md"
    fi
  done
} > "$results"
echo "bench: wrote $results ($(( SECONDS - t_start )) s in all)" >&2
