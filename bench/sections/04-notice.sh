#!/usr/bin/env bash
# Section 04 of bench/run.sh: notice to commit. 20 trials (5 with --quick) of
# the real agent, the IMDS simulator, the S3 gateway and a trainer that
# checkpoints on SIGUSR1 (bench/notice_bench.py); writes $OUT/04-notice.md,
# 04-notice.tsv (one row per trial) and 04-notice.png (stacked bars per trial).
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${DATA:?}" "${BUCKET:?}" "${RUN_ID:?}" "${LIMITS:?}"
: "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."
# shellcheck source=/dev/null
. "$LIMITS"
: "${PUT_MBPS:?}" "${ZSTD_ALL_MBPS:?}" "${CORES:?}"

trials=20
if [ "${BENCH_QUICK:-0}" = 1 ]; then trials=5; fi
source_file=$DATA/torch-1g/checkpoint.pt
[ -f "$source_file" ] || { echo "04-notice: $source_file is missing" >&2; exit 1; }
settle=1   # seconds; see the fragment for why
poll=2     # imds.poll_interval's default, left as it is

python3 bench/notice_bench.py --sg "$SG" --source "$source_file" --work "$WORK/notice" \
  --store "s3://$BUCKET/$RUN_ID/notice" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" \
  --trials "$trials" --settle-time "${settle}s" --tsv "$OUT/04-notice.tsv"

python3 bench/notice_report.py "$OUT/04-notice.tsv" --md "$OUT/04-notice.md" \
  --plot-data "$WORK/notice/plot.dat" --put-mbps "$PUT_MBPS" --zstd-all-mbps "$ZSTD_ALL_MBPS" \
  --poll-s "$poll" --settle-s "$settle" --notice-s 120 --cores "$CORES"

gnuplot <<GP
set terminal pngcairo size 900,500 font ",10"
set output "$OUT/04-notice.png"
set title "Notice to commit, per trial (spot notice → snapshot committed)"
set xlabel "trial"
set ylabel "seconds"
set key outside right top
set style data histograms
set style histogram rowstacked
set style fill solid 0.85 border -1
set boxwidth 0.75
set xrange [-0.6:$trials - 0.4]
set yrange [0:*]
set datafile separator "\t"
plot "$WORK/notice/plot.dat" using 2:xtic(1) title "detection" lc rgb "#4477aa", \
     "" using 3 title "checkpoint write (trainer)" lc rgb "#ccbb44", \
     "" using 4 title "settle" lc rgb "#aa3377", \
     "" using 5 title "upload + commit" lc rgb "#228833"
GP
echo "04-notice: $trials trials; $OUT/04-notice.md" >&2
