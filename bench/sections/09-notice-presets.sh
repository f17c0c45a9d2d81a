#!/usr/bin/env bash
# Section 09 of bench/run.sh: notice to commit with each preset's default
# settings. For caffe, pytorch, lightning, huggingface, tensorflow, dcp and
# generic, trials of the real agent with only job, store, endpoint,
# checkpoint_dir, preset and command set, the IMDS simulator and the S3
# gateway, supervising bench/preset_trainer.py, which writes the preset's
# on-disk format and reacts as the framework does by default, or saves on
# SIGTERM, or answers SPOTGUARD_NOTICE_FILE (bench/notice_presets_bench.py).
# 5 trials per preset and behaviour (2 with --quick; NOTICE_PRESETS_TRIALS
# overrides), 128 MiB checkpoints (64 MiB with --quick). Writes
# $OUT/09-notice-presets.md and 09-notice-presets.tsv (one row per trial).
# BENCH_NOTE, when set, is a paragraph the fragment carries (e.g. that the
# section was run on its own).
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${BUCKET:?}" "${RUN_ID:?}"
: "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."

trials=5 mib=128
if [ "${BENCH_QUICK:-0}" = 1 ]; then trials=2 mib=64; fi
trials=${NOTICE_PRESETS_TRIALS:-$trials}
load_before=$(cut -d' ' -f1 /proc/loadavg)

python3 bench/notice_presets_bench.py --sg "$SG" --work "$WORK/notice-presets" \
  --store "s3://$BUCKET/$RUN_ID/notice-presets" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" \
  --mib "$mib" --trials "$trials" --tsv "$OUT/09-notice-presets.tsv"

python3 bench/notice_presets_report.py "$OUT/09-notice-presets.tsv" \
  --md "$OUT/09-notice-presets.md" --mib "$mib" \
  --load-before "$load_before" --load-after "$(cut -d' ' -f1 /proc/loadavg)" \
  --note "${BENCH_NOTE:-}"
echo "09-notice-presets: $trials trials per preset and behaviour; $OUT/09-notice-presets.md" >&2
