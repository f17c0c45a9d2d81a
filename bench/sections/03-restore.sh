#!/usr/bin/env bash
# Section 3: restoring each data set into an empty directory with spotguard
# restore, aws s3 cp --recursive + zstd -d, aws s3 cp --recursive (raw files)
# and rclone copy; every restore is checked file for file (SHA-256) against
# the source, and the page cache is dropped before each. What a tool restores
# is first uploaded by that tool (not timed). spotguard's snapshot and the raw
# files are stored side by side and their restores alternate; the zstd'ed
# upload comes after both are deleted, to keep the gateway's RAM use below
# two copies of a data set.
set -euo pipefail
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_rclone_env
export SPOTGUARD_ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT SPOTGUARD_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export SPOTGUARD_LOG_LEVEL=warn

tsv="$OUT/restore.tsv"
printf 'set\ttool\tlabel\tcompress\tfsync\trep\traw_bytes\tstored_bytes\twall\tcpu\trss_kb\n' > "$tsv"
aws_s3=("$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3)

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
# What a user would script to get the zstd'ed files back: download them all,
# then decompress each (or stream the one tar.zst into tar).
cat > "$WORK/zstd-down.sh" <<'EOF'
set -euo pipefail
src=$1 dir=$2 mode=$3
mkdir -p "$dir"
if [ "$mode" = tar ]; then
  /usr/bin/aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp "$src/checkpoint.tar.zst" - --only-show-errors |
    zstd -q -d -c | tar -C "$dir" -xf -
else
  /usr/bin/aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --recursive --only-show-errors "$src/" "$dir/"
  find "$dir" -name '*.zst' -print0 | xargs -0 zstd -q -d --rm
fi
EOF

dest="$WORK/restore"
measure() {  # set tool label compress fsync rep raw stored command...
  local set=$1 tool=$2 label=$3 compress=$4 fsync=$5 rep=$6 raw=$7 stored=$8
  shift 8
  rm -rf "$dest"
  mkdir -p "$dest"
  bench_drop_caches
  bench_log "restore $set rep $rep: $tool"
  bench_timed "$@"
  bench_same_tree "$DATA/$set.sha256" "$dest"
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$tool" "$label" "$compress" "$fsync" "$rep" "$raw" \
    "$stored" "$TIMED_WALL" "$TIMED_CPU" "$TIMED_RSS_KB" >> "$tsv"
  rm -rf "$dest"
}

# More runs than the other sections (4, 5 of torch-4g; 1 with --quick): the
# runs are short, and this machine's page cache and loopback move one run's
# time by a fifth, so a median of 2-3 decides nothing.
restore_reps() {
  if [ "${BENCH_QUICK:-0}" = 1 ]; then
    echo 1
  elif [ "$1" = torch-4g ]; then
    echo "${BENCH_REPS_4G:-5}"
  else
    echo "${BENCH_REPS:-4}"
  fi
}

for set in $(bench_sets); do
  raw=$(bench_dir_bytes "$DATA/$set")
  reps=$(restore_reps "$set")
  mode=files
  zlabel='aws s3 cp --recursive + zstd -d'
  if [ "$set" = small-files ]; then
    mode=tar
    zlabel='aws s3 cp - \| zstd -d \| tar -x'
  fi
  p="$RUN_ID/restore-$set"

  # spotguard's snapshot and the raw files are stored together (1.8 copies of
  # the set, within the gateway's RAM), so the runs of spotguard, awscli and
  # rclone take turns: a slow minute of the machine falls on all three.
  sg_stored=0 raw_stored=0
  if bench_tool_on spotguard; then
    bench_log "restore $set: uploading with spotguard (not timed)"
    "$SG" snapshot --job "$set" --store "s3://$BUCKET/$p-sg" --dir "$DATA/$set" > /dev/null
    sg_stored=$(bench_stored_bytes "$p-sg")
  fi
  if bench_tool_on aws || bench_tool_on rclone; then
    bench_log "restore $set: uploading the raw files with aws (not timed)"
    "${aws_s3[@]}" cp --recursive --only-show-errors "$DATA/$set" "s3://$BUCKET/$p-raw/"
    raw_stored=$(bench_stored_bytes "$p-raw")
  fi
  # The order reverses every rep (spotguard, aws, rclone; then rclone, aws,
  # spotguard; ...): on this VM a run right after another tool's run costs
  # more system time than one right after its own (bench/analysis/
  # 03-restore.md), and this way spotguard and rclone each follow aws
  # within a rep and themselves across reps, never each other.
  for rep in $(seq 1 "$reps"); do
    order=(spotguard aws rclone)
    if [ $((rep % 2)) = 0 ]; then order=(rclone aws spotguard); fi
    for tool in "${order[@]}"; do
      bench_tool_on "$tool" || continue
      case $tool in
        spotguard)
          measure "$set" spotguard "spotguard restore" 1 1 "$rep" "$raw" "$sg_stored" \
            "$SG" restore --job "$set" --store "s3://$BUCKET/$p-sg" --to "$dest" ;;
        aws)
          measure "$set" aws "aws s3 cp --recursive (raw files)" 0 0 "$rep" "$raw" "$raw_stored" \
            "${aws_s3[@]}" cp --recursive --only-show-errors "s3://$BUCKET/$p-raw/" "$dest/" ;;
        rclone)
          measure "$set" rclone "rclone copy (raw files)" 0 0 "$rep" "$raw" "$raw_stored" \
            env -u AWS_CA_BUNDLE rclone copy -q "sg:$BUCKET/$p-raw/" "$dest/" ;;
      esac
    done
  done
  if bench_tool_on spotguard; then bench_s3_rm "$p-sg" "$sg_stored"; fi
  if bench_tool_on aws || bench_tool_on rclone; then bench_s3_rm "$p-raw" "$raw_stored"; fi

  if bench_tool_on zstd-aws; then
    bench_log "restore $set: uploading with zstd + aws (not timed)"
    bash "$WORK/zstd-up.sh" "$DATA/$set" "s3://$BUCKET/$p-zaws" "$mode"
    stored=$(bench_stored_bytes "$p-zaws")
    for rep in $(seq 1 "$reps"); do
      measure "$set" zstd-aws "$zlabel" 1 0 "$rep" "$raw" "$stored" \
        bash "$WORK/zstd-down.sh" "s3://$BUCKET/$p-zaws" "$dest" "$mode"
    done
    bench_s3_rm "$p-zaws" "$stored"
  fi
done

# shellcheck source=/dev/null
. "$LIMITS"
md="$OUT/03-restore.md"
{
  echo "## 3. Restore: spotguard vs awscli + zstd, awscli, rclone"
  echo
  echo "Measured by \`bench/sections/03-restore.sh\`: each tool restores what it uploaded itself (the upload is not timed; awscli"
  echo "and rclone share one upload of the raw files) into an empty directory, page cache dropped before each restore, and"
  echo "the runs of spotguard, awscli and rclone alternate (rep 1 of each, then rep 2, ...; the zstd pipeline's runs follow),"
  echo "so a slow spell of the machine falls on all of them. Their order reverses every rep (spotguard, awscli, rclone; then"
  echo "rclone, awscli, spotguard; ...): on this VM a run right after another tool's run costs more system time than one"
  echo "right after its own, and so spotguard and rclone each follow awscli, or themselves, never each other."
  echo "spotguard, awscli and rclone have 4 runs (torch-4g 5),"
  echo "more than the other sections, because a run here is a few seconds and this machine moves such a run by a fifth;"
  echo "every restored file is compared with the source by SHA-256 (a mismatch fails the run). Wall and CPU are medians"
  echo "(each run's wall time in brackets); MB/s is checkpoint bytes per wall second. spotguard fsyncs each restored file"
  echo "and its directory, so its bound uses the fsync'd write rate; the other tools leave their writes in the page cache."
  echo "Settings: defaults (spotguard two workers per core, 4 to 8, each with one ranged GET of 8 or 16 MiB in flight that it decodes, hashes and writes in 64 KiB pieces into files allocated up front; awscli 10 concurrent"
  echo "requests; rclone 4 transfers; the zstd CLI decompresses one file at a time, single-threaded, as zstd always does)."
  echo
} > "$md"
python3 bench/report.py restore "$tsv" "$LIMITS" "$md" "$OUT/03-restore.png"
