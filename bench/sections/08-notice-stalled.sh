#!/usr/bin/env bash
# Section 08 of bench/run.sh: spot notices while the store does not answer.
# 20 trials (10 with --quick) whose store freezes before the notice and
# answers again after the agent read it, and 3 whose store never answers, of
# the real agent, the IMDS simulator and the S3 gateway behind
# tests/tools/fault_proxy.py (bench/notice_stalled_bench.py); writes
# $OUT/08-notice-stalled.md and 08-notice-stalled.tsv (one row per trial).
# BENCH_NOTE, when set, is a paragraph the fragment carries (e.g. that the
# section was run on its own).
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${BUCKET:?}" "${RUN_ID:?}"
: "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."

answers=20
if [ "${BENCH_QUICK:-0}" = 1 ]; then answers=10; fi
never=3
poll=2   # imds.poll_interval's default, left as it is
hold=5   # seconds the store stays frozen after the agent logged the notice
load_before=$(cut -d' ' -f1 /proc/loadavg)

python3 bench/notice_stalled_bench.py --sg "$SG" --work "$WORK/notice-stalled" \
  --store "s3://$BUCKET/$RUN_ID/notice-stalled" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" \
  --answers "$answers" --never "$never" --hold "$hold" --poll "$poll" \
  --tsv "$OUT/08-notice-stalled.tsv"

python3 bench/notice_stalled_report.py "$OUT/08-notice-stalled.tsv" \
  --md "$OUT/08-notice-stalled.md" --poll-s "$poll" --hold-s "$hold" \
  --load-before "$load_before" --load-after "$(cut -d' ' -f1 /proc/loadavg)" \
  --note "${BENCH_NOTE:-}"
echo "08-notice-stalled: $answers + $never trials; $OUT/08-notice-stalled.md" >&2
