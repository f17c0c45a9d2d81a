#!/usr/bin/env bash
# Section 14 of bench/run.sh: time to resume on a replacement instance, from
# `spotguard run` starting on an empty disk to the trainer's first step, with
# the restore broken out (bench/resume_bench.py). The torch sets, 2 trials
# each (1 with --quick; RESUME_TRIALS overrides). Writes $OUT/14-resume.md
# and 14-resume.tsv.
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${BUCKET:?}" "${RUN_ID:?}" "${DATA:?}"
: "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."

trials=2
if [ "${BENCH_QUICK:-0}" = 1 ]; then trials=1; fi
trials=${RESUME_TRIALS:-$trials}
sets=()
for s in torch-1g torch-4g; do
  if [ -d "$DATA/$s" ]; then sets+=(--set "$s=$DATA/$s"); fi
done
load_before=$(cut -d' ' -f1 /proc/loadavg)

python3 bench/resume_bench.py --sg "$SG" --work "$WORK/resume" \
  --store "s3://$BUCKET/$RUN_ID/resume" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" \
  --trials "$trials" "${sets[@]}" --tsv "$OUT/14-resume.tsv"
/usr/bin/aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 rm --recursive --only-show-errors \
  "s3://$BUCKET/$RUN_ID/resume/" > /dev/null

python3 bench/resume_report.py "$OUT/14-resume.tsv" --md "$OUT/14-resume.md" \
  --load-before "$load_before" --load-after "$(cut -d' ' -f1 /proc/loadavg)"
echo "14-resume: $trials trials per set; $OUT/14-resume.md" >&2
