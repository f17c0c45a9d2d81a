#!/usr/bin/env bash
# Section 13 of bench/run.sh: a 3-node job's notice to group commit and its
# time to resume after a replacement joins, in phases
# (bench/multi_node_bench.py). 3 trials of 64 MiB per node (1 trial of 16 MiB
# with --quick; MULTI_NODE_TRIALS overrides). Writes $OUT/13-multi-node.md
# and 13-multi-node.tsv.
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${BUCKET:?}" "${RUN_ID:?}"
: "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."

trials=3 mib=64
if [ "${BENCH_QUICK:-0}" = 1 ]; then trials=1 mib=16; fi
trials=${MULTI_NODE_TRIALS:-$trials}
load_before=$(cut -d' ' -f1 /proc/loadavg)

python3 bench/multi_node_bench.py --sg "$SG" --work "$WORK/multi-node" \
  --store "s3://$BUCKET/$RUN_ID/multi-node" --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" \
  --trials "$trials" --mib "$mib" --tsv "$OUT/13-multi-node.tsv"

python3 bench/multi_node_report.py "$OUT/13-multi-node.tsv" --md "$OUT/13-multi-node.md" \
  --load-before "$load_before" --load-after "$(cut -d' ' -f1 /proc/loadavg)"
echo "13-multi-node: $trials trials; $OUT/13-multi-node.md" >&2
