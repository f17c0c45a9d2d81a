#!/usr/bin/env bash
# Section 10 of bench/run.sh: peak memory. Peak RSS (ru_maxrss, from
# /usr/bin/time's %M) of `spotguard snapshot --dir` and `spotguard restore`
# through the S3 gateway and a file:// store, beside what users run instead
# (zstd -T0 -1 / zstd -d, tar | zstd, aws s3 cp, rclone copy), on three data
# sets this section makes itself (a random file, a mostly-zero file, many small
# files); spotguard also with glibc's MALLOC_ARENA_MAX=2 and with
# MALLOC_MMAP_THRESHOLD_=1048576, each spotguard run MEMORY_REPS times
# (default 2; 1 with --quick). Writes $OUT/10-memory.md and
# $OUT/10-memory.tsv (one row per run). BENCH_NOTE, when set, is a paragraph
# the fragment carries (e.g. that the section was run on its own).
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${BUCKET:?}" "${RUN_ID:?}" "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_rclone_env
export SPOTGUARD_ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT SPOTGUARD_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export SPOTGUARD_LOG_LEVEL=warn
load_before=$(cut -d' ' -f1 /proc/loadavg)

mib=1024      # size of the two single-file sets
files=2000    # files in the small-files set
reps=2        # runs of each spotguard row (the peak depends on thread interleaving)
if [ "${BENCH_QUICK:-0}" = 1 ]; then mib=128 files=200 reps=1; fi
reps=${MEMORY_REPS:-$reps}
mem="$WORK/memory"
rm -rf "$mem"
mkdir -p "$mem/sets" "$mem/out"
s3="s3://$BUCKET/$RUN_ID/memory"
file_store="file://$mem/store"

bench_log "memory: making the data sets ($mib MiB files, $files small files)"
python3 bench/memory_data.py --dir "$mem/sets" --mib "$mib" --files "$files"
sets=(random zeros small)
for set in "${sets[@]}"; do bench_tree_sums "$mem/sets/$set" "$mem/$set.sha256"; done

tsv="$OUT/10-memory.tsv"
printf 'set\ttool\top\tstore\tmalloc\trep\tpeak_kib\twall_s\traw_bytes\n' > "$tsv"
# run SET TOOL OP STORE MALLOC CMD...: peak RSS (KiB) and wall time of CMD.
# For a pipeline run through bash -c, %M is the largest of the processes (the
# children's ru_maxrss is a maximum, not a sum).
rep=1
run() {
  local set=$1 tool=$2 op=$3 store=$4 malloc=$5 envs=()
  shift 5
  case $malloc in
    arena2) envs=(MALLOC_ARENA_MAX=2) ;;
    mmap1m) envs=(MALLOC_MMAP_THRESHOLD_=1048576) ;;
  esac
  bench_log "memory: $set $tool $op $store $malloc"
  /usr/bin/time -f '%M %e' -o "$WORK/.mem" env "${envs[@]}" "$@" > /dev/null
  printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$tool" "$op" "$store" "$malloc" "$rep" \
    "$(cut -d' ' -f1 "$WORK/.mem")" "$(cut -d' ' -f2 "$WORK/.mem")" \
    "$(bench_dir_bytes "$mem/sets/$set")" >> "$tsv"
}
fresh_out() { rm -rf "$mem/out"; mkdir -p "$mem/out"; }
# (restore leaves its record of what it restored beside the files)
check_out() { rm -f "$mem/out/.spotguard-restored.json"; bench_same_tree "$mem/$1.sha256" "$mem/out"; }

# The program and its libraries: `spotguard ls` of an empty file:// store
# (made first: `ls` of a store that does not exist exits 2, and time(1) then
# puts "Command exited with non-zero status" before the figure).
mkdir -p "$mem/empty"
/usr/bin/time -f '%M' -o "$WORK/.mem" "$SG" ls --job none --store "file://$mem/empty" > /dev/null 2>&1 || true
baseline_kib=$(tail -n 1 "$WORK/.mem")

n=0
for set in "${sets[@]}"; do
  src="$mem/sets/$set"
  bench_warm "$src"
  for rep in $(seq "$reps"); do
    for malloc in default arena2 mmap1m; do
      for store in s3 file; do
        n=$((n + 1))
        job="mem-$set-$malloc-$rep"
        url=$([ "$store" = s3 ] && echo "$s3" || echo "$file_store")
        run "$set" spotguard snapshot "$store" "$malloc" "$SG" snapshot --job "$job" --store "$url" --dir "$src"
        fresh_out
        run "$set" spotguard restore "$store" "$malloc" "$SG" restore --job "$job" --store "$url" --to "$mem/out"
        check_out "$set"
      done
    done
    bench_s3_rm "$RUN_ID/memory" 0
    rm -rf "$mem/store"
  done
  rep=1

  # What users run instead (default malloc settings).
  fresh_out
  if [ "$set" = small ]; then
    # shellcheck disable=SC2016  # $1 and $2 are the inner bash's arguments
    run "$set" "tar | zstd -T0 -1" compress local default \
      bash -c 'tar -C "$1" -cf - . | zstd -q -T0 -1 -o "$2"' _ "$src" "$mem/set.tar.zst"
    # shellcheck disable=SC2016
    run "$set" "zstd -d | tar -x" decompress local default \
      bash -c 'zstd -q -d -c "$1" | tar -C "$2" -xf -' _ "$mem/set.tar.zst" "$mem/out"
    check_out "$set"
    fresh_out
    run "$set" "aws s3 cp --recursive" upload s3 default \
      "$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --recursive --only-show-errors "$src/" "$s3/aws/"
    run "$set" "aws s3 cp --recursive" download s3 default \
      "$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --recursive --only-show-errors "$s3/aws/" "$mem/out/"
  else
    run "$set" "zstd -T0 -1" compress local default zstd -q -T0 -1 -f "$src/blob.bin" -o "$mem/blob.zst"
    mkdir -p "$mem/out"
    run "$set" "zstd -d" decompress local default zstd -q -d -f "$mem/blob.zst" -o "$mem/out/blob.bin"
    check_out "$set"
    fresh_out
    run "$set" "aws s3 cp" upload s3 default \
      "$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --only-show-errors "$src/blob.bin" "$s3/aws/blob.bin"
    run "$set" "aws s3 cp" download s3 default \
      "$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --only-show-errors "$s3/aws/blob.bin" "$mem/out/blob.bin"
  fi
  check_out "$set"
  rm -f "$mem/set.tar.zst" "$mem/blob.zst"
  fresh_out
  run "$set" "rclone copy" upload s3 default env -u AWS_CA_BUNDLE rclone copy -q "$src" "sg:$BUCKET/$RUN_ID/memory/rclone/"
  run "$set" "rclone copy" download s3 default env -u AWS_CA_BUNDLE rclone copy -q "sg:$BUCKET/$RUN_ID/memory/rclone/" "$mem/out/"
  check_out "$set"
  fresh_out
  bench_s3_rm "$RUN_ID/memory" 0
done
rm -rf "$mem"

python3 bench/memory_report.py "$tsv" --md "$OUT/10-memory.md" --baseline-kib "$baseline_kib" \
  --mib "$mib" --files "$files" --reps "$reps" --cores "$(nproc)" \
  --load-before "$load_before" --load-after "$(cut -d' ' -f1 /proc/loadavg)" --note "${BENCH_NOTE:-}"
echo "10-memory: $n spotguard snapshot/restore pairs; $OUT/10-memory.md" >&2
