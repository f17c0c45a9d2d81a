#!/usr/bin/env bash
# Section 06 of bench/run.sh: compression of the real checkpoint files
# ($DATA/torch-1g) with spotguard's codec (bench/compression_bench.cc: 8 MiB
# frames, zstd levels 1/3/6, shuffle off/on, 1 thread and all cores) and with
# the zstd command at the same levels (-T1 and -T0) as the reference. Writes
# $OUT/06-compression.md, 06-compression.tsv and 06-compression.png.
set -euo pipefail
: "${BUILD:?}" "${WORK:?}" "${OUT:?}" "${DATA:?}" "${LIMITS:?}"
cd "$(dirname "$0")/../.."
# shellcheck source=/dev/null
. "$LIMITS"
: "${ZSTD_ALL_MBPS:?}" "${ZSTD_DEC_ALL_MBPS:?}" "${CORES:?}"

cmake --build "$BUILD" --target compression_bench -j 2 >&2
mapfile -t files < <(find "$DATA/torch-1g" -maxdepth 1 -type f | sort)
[ "${#files[@]}" -gt 0 ] || { echo "06-compression: no files in $DATA/torch-1g" >&2; exit 1; }
mkdir -p "$WORK/compression"
raw_tsv=$WORK/compression/spotguard.tsv
cat "${files[@]}" > /dev/null  # page cache, for the zstd command too

# Best of $reps runs of everything: the machine may be shared, so the two
# tools are measured back to back for each level and thread count, and the
# whole sweep is repeated $reps times (load that comes and goes hits both).
reps=2
if [ "${BENCH_QUICK:-0}" = 1 ]; then reps=3; fi
cli_tsv=$WORK/compression/cli.tsv
: > "$raw_tsv"
: > "$cli_tsv"
now_ns() { date +%s%N; }
secs() { awk -v x="$1" 'BEGIN{printf "%.4f", x/1e9}'; }
for ((rep = 0; rep < reps; rep++)); do
  for level in 1 3 6; do
    for threads in 1 "$CORES"; do
      "$BUILD/bench/compression_bench" --levels "$level" --threads "$threads" "${files[@]}" >> "$raw_tsv"
      # The zstd command: each file compressed to a scratch file and
      # decompressed to another (both in page cache, as spotguard's restore
      # writes its files), checked against the original.
      t=$([ "$threads" = 1 ] && echo 1 || echo 0)
      for f in "${files[@]}"; do
        z=$WORK/compression/$(basename "$f").zst
        back=$WORK/compression/$(basename "$f").back
        a=$(now_ns); zstd -q -f "-$level" "-T$t" "$f" -o "$z"; b=$(now_ns)
        zstd -q -f -d "$z" -o "$back"; c=$(now_ns)
        cmp -s "$f" "$back" || { echo "06-compression: zstd round trip of $f differs" >&2; exit 1; }
        printf '%s\tzstd-cli\t%s\t%s\t%s\t%s\t%s\t%s\t-\n' "$(basename "$f")" "$level" "$threads" \
          "$(stat -c %s "$f")" "$(stat -c %s "$z")" "$(secs $((b - a)))" "$(secs $((c - b)))" >> "$cli_tsv"
        rm -f "$z" "$back"
      done
    done
  done
done

python3 bench/compression_report.py "$raw_tsv" "$cli_tsv" --cores "$CORES" \
  --zstd-all-mbps "$ZSTD_ALL_MBPS" --zstd-dec-all-mbps "$ZSTD_DEC_ALL_MBPS" \
  --tsv "$OUT/06-compression.tsv" --md "$OUT/06-compression.md" \
  --plot-data "$WORK/compression/plot.dat"

gnuplot <<GP
set terminal pngcairo size 900,560 font ",10"
set output "$OUT/06-compression.png"
set title "Compression of the checkpoint files: ratio vs speed (label: zstd level; s = shuffle on)"
set xlabel "compression MB/s (raw bytes, 10^6)"
set ylabel "ratio (raw / stored)"
set logscale x
set grid
set key outside right top
set datafile separator "\t"
plot "$WORK/compression/plot.dat" using (\$5==1 && strcol(2) eq "spotguard" ? \$3 : NaN):4 \
       with points pt 7 ps 1.3 lc rgb "#4477aa" title "spotguard, 1 thread", \
     "" using (\$5>1 && strcol(2) eq "spotguard" ? \$3 : NaN):4 with points pt 5 ps 1.3 lc rgb "#228833" title "spotguard, all cores", \
     "" using (\$5==1 && strcol(2) eq "zstd-cli" ? \$3 : NaN):4 with points pt 6 ps 1.3 lc rgb "#aa3377" title "zstd -T1", \
     "" using (\$5>1 && strcol(2) eq "zstd-cli" ? \$3 : NaN):4 with points pt 4 ps 1.3 lc rgb "#ee6677" title "zstd -T0", \
     "" using 3:4:1 with labels offset char 0,0.9 font ",8" notitle
GP
echo "06-compression: $OUT/06-compression.md" >&2
