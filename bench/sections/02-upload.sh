#!/usr/bin/env bash
# Section 2: uploading each data set with spotguard snapshot, aws s3 cp
# --recursive, zstd -T0 -1 | aws s3 cp - and rclone copy, one after the other
# in each repetition; wall time, CPU of the client processes, bytes stored.
# Each tool's objects are deleted right after it is measured (the gateway
# keeps everything in RAM).
set -euo pipefail
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_rclone_env
export SPOTGUARD_ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT SPOTGUARD_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export SPOTGUARD_LOG_LEVEL=warn

tsv="$OUT/upload.tsv"
printf 'set\ttool\tlabel\tcompress\tfsync\trep\traw_bytes\tstored_bytes\twall\tcpu\trss_kb\n' > "$tsv"

# The compressing alternative a user would script: each file through zstd into
# `aws s3 cp -`; for the many-small-files set one tar stream instead (one
# awscli start, about half a second of Python, per file would dominate).
cat > "$WORK/zstd-up.sh" <<'EOF'
set -euo pipefail
dir=$1 dest=$2 mode=$3
if [ "$mode" = tar ]; then
  tar -C "$dir" -cf - . | zstd -q -T0 -1 -c | /usr/bin/aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" \
    s3 cp - "$dest/checkpoint.tar.zst" --only-show-errors
else
  (cd "$dir" && find . -type f -printf '%P\n') | while read -r f; do
    zstd -q -T0 -1 -c "$dir/$f" | /usr/bin/aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" \
      s3 cp - "$dest/$f.zst" --only-show-errors
  done
fi
EOF

measure() {  # set tool label compress rep prefix raw command...
  local set=$1 tool=$2 label=$3 compress=$4 rep=$5 prefix=$6 raw=$7 stored
  shift 7
  bench_tool_on "$tool" || return 0
  bench_warm "$DATA/$set"
  bench_log "upload $set rep $rep: $tool"
  bench_timed "$@"
  stored=$(bench_stored_bytes "$prefix")
  [ "$stored" -gt 0 ] || { bench_log "$tool stored nothing under $prefix"; exit 1; }
  printf '%s\t%s\t%s\t%s\t0\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$tool" "$label" "$compress" "$rep" "$raw" \
    "$stored" "$TIMED_WALL" "$TIMED_CPU" "$TIMED_RSS_KB" >> "$tsv"
  bench_s3_rm "$prefix" "$stored"
}

for set in $(bench_sets); do
  raw=$(bench_dir_bytes "$DATA/$set")
  mode=files
  zlabel='zstd -T0 -1 \| aws s3 cp - (per file)'
  if [ "$set" = small-files ]; then
    mode=tar
    zlabel='tar \| zstd -T0 -1 \| aws s3 cp -'
  fi
  for rep in $(seq 1 "$(bench_reps "$set")"); do
    p="$RUN_ID/up-$set-$rep"
    measure "$set" spotguard "spotguard snapshot" 1 "$rep" "$p-sg" "$raw" \
      "$SG" snapshot --job "$set" --store "s3://$BUCKET/$p-sg" --dir "$DATA/$set"
    measure "$set" aws "aws s3 cp --recursive" 0 "$rep" "$p-aws" "$raw" \
      "$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --recursive --only-show-errors \
      "$DATA/$set" "s3://$BUCKET/$p-aws/"
    measure "$set" zstd-aws "$zlabel" 1 "$rep" "$p-zaws" "$raw" \
      bash "$WORK/zstd-up.sh" "$DATA/$set" "s3://$BUCKET/$p-zaws" "$mode"
    measure "$set" rclone "rclone copy" 0 "$rep" "$p-rclone" "$raw" \
      env -u AWS_CA_BUNDLE rclone copy -q "$DATA/$set" "sg:$BUCKET/$p-rclone/"
  done
done

# shellcheck source=/dev/null
. "$LIMITS"
md="$OUT/02-upload.md"
{
  echo "## 2. Snapshot upload: spotguard vs awscli, zstd + awscli, rclone"
  echo
  echo "Measured by \`bench/sections/02-upload.sh\`: each data set is uploaded by each tool in turn (order: spotguard, aws,"
  echo "zstd + aws, rclone) in every repetition, starting from a warm page cache (a trainer has just written the files);"
  echo "each tool's objects are deleted after it. Wall and CPU (user + system of the client processes, not the gateway's)"
  echo "are medians over the runs (each run's wall time in brackets). Stored is what the tool left in the bucket"
  echo "(spotguard: each file as zstd frames, plus its small claim, manifest and latest objects). MB/s is checkpoint (raw) bytes per wall second; the bound is"
  echo "the slowest stage of the machine those bytes must pass (section 1), and % of bound is how close the tool came."
  echo "Settings: defaults as a user runs them: spotguard compression level 1, auto byte-shuffle, all cores, 8 MiB parts,"
  echo "8 in flight; awscli 8 MiB parts, 10 concurrent requests; rclone 4 transfers, 5 MiB chunks, 4 per file, MD5 of"
  echo "each file computed before a multipart upload; zstd CLI at level 1 with all cores (same level as spotguard)."
  echo
} > "$md"
python3 bench/report.py upload "$tsv" "$LIMITS" "$md" "$OUT/02-upload.png"
