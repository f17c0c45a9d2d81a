#!/usr/bin/env bash
# Section 11: incremental snapshots (frame reuse, docs/design.md §4). Ten
# consecutive checkpoints of a training run (bench/incremental_data.py) are
# snapshotted in order by spotguard with reuse on and off, `aws s3 sync` and
# `rclone copy --checksum` (taking turns at each step), each into a prefix
# of its own; before each
# snapshot the step's files are touched, as a trainer that just wrote them
# leaves them. Recorded per snapshot: wall time and bytes uploaded; per run:
# bytes stored after the 10 snapshots. Each set's objects are deleted after
# its run (the gateway keeps everything in RAM).
set -euo pipefail
# shellcheck source=bench/lib.sh
. bench/lib.sh
bench_rclone_env
export SPOTGUARD_ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT SPOTGUARD_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
export SPOTGUARD_LOG_LEVEL=warn SPOTGUARD_KEEP=100

steps=${BENCH_INC_STEPS:-10}
scale=0.75  # a LoRA base of 192 MiB; the gateway holds 10 snapshots per tool in RAM
[ "$BENCH_QUICK" = 1 ] && scale=0.25
sets=${BENCH_INC_SETS:-lora frozen-emb full lora-onefile}
data="$DATA/incremental-$scale"
gen_hash=$(sha256sum bench/incremental_data.py | cut -c1-16)
for set in $sets; do
  if [ "$(cat "$data/$set.done" 2>/dev/null)" != "$gen_hash $steps" ]; then
    bench_log "making incremental data set $set (scale $scale)"
    rm -rf "${data:?}/$set"
    /usr/bin/python3 bench/incremental_data.py "$data" "$set" "$steps" "$scale"
    echo "$gen_hash $steps" > "$data/$set.done"
  fi
done

tsv="$OUT/incremental.tsv"
printf 'set\ttool\tstep\traw_bytes\tuploaded_bytes\twall\n' > "$tsv"
stored_tsv="$OUT/incremental-stored.tsv"
printf 'set\ttool\tstored_bytes\n' > "$stored_tsv"

# Bytes of the files that an `aws s3 sync` / `rclone -v` log says it sent.
sent_bytes() {  # dir log kind
  local dir=$1 log=$2 kind=$3
  if [ "$kind" = aws ]; then
    sed -n 's/^upload: \(.*\) to s3:.*/\1/p' "$log"
  else
    sed -n 's/.*INFO  : \(.*\): Copied (.*/\1/p' "$log" | sed "s|^|$dir/|"
  fi | while read -r f; do stat -c %s "$f"; done | awk '{s += $1} END {printf "%.0f\n", s}'
}

snapshot_one() {  # set tool step: one snapshot of the step by the tool, a row of $tsv
  local set=$1 tool=$2 step=$3 prefix="$RUN_ID/inc-$1-$2" dir raw up
  dir="$data/$set/$(printf 'step-%02d' "$step")"
  raw=$(bench_dir_bytes "$dir")
  find "$dir" -type f -exec touch {} +
  bench_warm "$dir"
  case $tool in
    spotguard | spotguard-noreuse)
      export SPOTGUARD_REUSE=on
      [ "$tool" = spotguard-noreuse ] && SPOTGUARD_REUSE=off
      bench_timed "$SG" snapshot --job "$set" --store "s3://$BUCKET/$prefix" --dir "$dir"
      up=$("$SG" ls --json --job "$set" --store "s3://$BUCKET/$prefix" | jq '.[0].new_stored_size')
      ;;
    spotguard-baseline)
      # BENCH_INC_BASELINE=path: a spotguard built before frame reuse (format 1, no
      # per-frame digests), the "today" of the full fine-tune's 3% bound.
      bench_timed "$BENCH_INC_BASELINE" snapshot --job "$set" --store "s3://$BUCKET/$prefix" --dir "$dir"
      up=$("$BENCH_INC_BASELINE" ls --json --job "$set" --store "s3://$BUCKET/$prefix" |
        jq '.[0].stored_size')
      ;;
    aws)
      # shellcheck disable=SC2016  # the inner bash expands its own arguments
      bench_timed bash -c '"$0" --endpoint-url "$1" s3 sync --no-progress "$2" "$3" > "$4"' \
        "$AWS_BIN" "$SPOTGUARD_TEST_S3_ENDPOINT" "$dir" "s3://$BUCKET/$prefix/" "$WORK/sync.log"
      up=$(sent_bytes "$dir" "$WORK/sync.log" aws)
      ;;
    rclone)
      # shellcheck disable=SC2016  # the inner bash expands its own arguments
      bench_timed bash -c 'env -u AWS_CA_BUNDLE rclone copy --checksum -v --stats 0 "$0" "$1" 2> "$2"' \
        "$dir" "sg:$BUCKET/$prefix/" "$WORK/sync.log"
      up=$(sent_bytes "$dir" "$WORK/sync.log" rclone)
      ;;
  esac
  bench_log "incremental $set $tool step $step: $up of $raw bytes in ${TIMED_WALL}s"
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$set" "$tool" "$step" "$raw" "$up" "$TIMED_WALL" >> "$tsv"
}

# The tools take turns at every step, each step starting with the next one,
# so a change in the machine's load falls on all of them alike.
for set in $sets; do
  tools=""
  for tool in spotguard spotguard-noreuse spotguard-baseline aws rclone; do
    if [ "$tool" = spotguard-baseline ] && { [ "$set" != full ] || [ -z "${BENCH_INC_BASELINE:-}" ]; }; then
      continue
    fi
    if bench_tool_on "${tool%%-*}" && { [ "$set" != lora-onefile ] || [ "$tool" = spotguard ]; }; then
      tools="$tools $tool"
    fi
  done
  for step in $(seq 1 "$steps"); do
    # Each step starts with the next tool: no tool always goes first.
    read -r -a order <<<"$tools"
    for i in "${!order[@]}"; do
      snapshot_one "$set" "${order[$(((i + step) % ${#order[@]}))]}" "$step"
    done
  done
  for tool in $tools; do
    prefix="$RUN_ID/inc-$set-$tool"
    stored=$(bench_stored_bytes "$prefix")
    printf '%s\t%s\t%s\n' "$set" "$tool" "$stored" >> "$stored_tsv"
    bench_s3_rm "$prefix" "$stored"
  done
done

# Notice to commit through the agent: steps 1-9 stored, the agent restores
# step 9, a spot notice arrives, the trainer saves step 10 and the agent
# commits it (bench/incremental_notice.py), with reuse on and off.
notice_tsv="$OUT/incremental-notice.tsv"
rm -f "$notice_tsv"
if bench_tool_on spotguard; then
  for set in $sets; do
    [ "$set" = lora-onefile ] && continue
    bench_log "incremental $set: notice to commit through the agent"
    /usr/bin/python3 bench/incremental_notice.py --sg "$SG" --store "s3://$BUCKET/$RUN_ID/inc-notice" \
      --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" --data "$data" --set "$set" --steps "$steps" \
      --work "$WORK/inc-notice" --tsv "$notice_tsv"
    bench_s3_rm "$RUN_ID/inc-notice" $((2 << 30))  # up to 9 whole snapshots with reuse off: wait for the GC
  done
fi

/usr/bin/python3 - "$tsv" "$stored_tsv" "$steps" "$scale" "$notice_tsv" > "$OUT/11-incremental.md" <<'PY'
import csv, os, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
stored = {(r["set"], r["tool"]): int(r["stored_bytes"]) for r in csv.DictReader(open(sys.argv[2]), delimiter="\t")}
steps, scale = int(sys.argv[3]), sys.argv[4]
label = {"spotguard": "spotguard (reuse on)", "spotguard-noreuse": "spotguard (reuse off)",
         "spotguard-baseline": "spotguard before reuse (format 1)",
         "aws": "aws s3 sync", "rclone": "rclone copy --checksum"}
MB = 1e6
print("## 11. Incremental snapshots: frame reuse vs aws s3 sync and rclone\n")
print("Measured by `bench/sections/11-incremental.sh`: ten consecutive checkpoints of a simulated training run")
print(f"(`bench/incremental_data.py`, Debian's python3-torch, scale {scale}) are snapshotted in order by each tool, each")
print("into its own prefix, the step's files touched first as a trainer leaves them. *Uploaded* is what a snapshot")
print("after the first sent (median of snapshots 2-10; spotguard: the stored bytes of its new frames, from")
print("`spotguard ls --json`; aws/rclone: the files their logs say they copied); *time* is the median wall time of")
print("snapshots 2-10, i.e. notice-to-commit when the checkpoint is already on disk; *stored* is what the prefix")
print("holds after the 10 snapshots. aws s3 sync and rclone overwrite one copy: they keep only the newest")
print("checkpoint, where spotguard keeps 10 restorable snapshots.\n")
print("| set | checkpoint | tool | first snapshot uploaded | uploaded per snapshot after the first | % of first | time after the first | stored after 10 |")
print("| --- | ---: | --- | ---: | ---: | ---: | ---: | ---: |")
summary = {}
for s in ["lora", "frozen-emb", "full", "lora-onefile"]:
    for t in ["spotguard", "spotguard-noreuse", "spotguard-baseline", "aws", "rclone"]:
        rs = [r for r in rows if r["set"] == s and r["tool"] == t]
        if not rs:
            continue
        first = int(rs[0]["uploaded_bytes"])
        later = [int(r["uploaded_bytes"]) for r in rs[1:]]
        up = statistics.median(later)
        wall = statistics.median(float(r["wall"]) for r in rs[1:])
        raw = int(rs[0]["raw_bytes"])
        summary[(s, t)] = (first, up, wall, stored.get((s, t), 0))
        pct = 100.0 * up / first if first else 0
        print(f"| {s} | {raw / MB:.0f} MB | {label[t]} | {first / MB:.1f} MB | {up / MB:.2f} MB | {pct:.1f}% | "
              f"{wall:.2f} s | {stored.get((s, t), 0) / 1e9:.3f} GB |")
print()
if ("lora", "spotguard") in summary:
    f, u, _, _ = summary[("lora", "spotguard")]
    print(f"- LoRA-style set, spotguard: a snapshot after the first uploads {100 * u / f:.2f}% of the first "
          f"(bound: 5%): **{'met' if u <= 0.05 * f else 'NOT met'}**.")
for other, what in [("spotguard-noreuse", "reuse on vs off"),
                    ("spotguard-baseline", "reuse on vs spotguard before reuse")]:
    if ("full", "spotguard") not in summary or ("full", other) not in summary:
        continue
    _, _, w_on, s_on = summary[("full", "spotguard")]
    _, _, w_o, s_o = summary[("full", other)]
    print(f"- Full fine-tune, spotguard {what}: time {w_on:.2f} s vs {w_o:.2f} s "
          f"({100 * (w_on / w_o - 1):+.1f}%), stored {s_on / 1e9:.3f} GB vs {s_o / 1e9:.3f} GB "
          f"({100 * (s_on / s_o - 1):+.1f}%); bound: within 3%.")
notice = list(csv.DictReader(open(sys.argv[5]), delimiter="\t")) if os.path.exists(sys.argv[5]) else []
if notice:
    print("\n**Notice to commit through the agent** (`bench/incremental_notice.py`): steps 1-"
          f"{steps - 1} are stored, `spotguard run` restores step {steps - 1} on an empty disk, a spot notice"
          f" is posted, the trainer answers `SPOTGUARD_NOTICE_FILE` by saving step {steps} and the agent commits it;"
          " the time is the agent's own (from the notice's posting to the manifest's commit), one run each.\n")
    print("| set | reuse | notice to commit | new bytes stored | snapshot stored |")
    print("| --- | --- | ---: | ---: | ---: |")
    for r in notice:
        print(f"| {r['set']} | {r['reuse']} | {float(r['notice_to_commit']):.2f} s | "
              f"{int(r['new_stored']) / MB:.1f} MB | {int(r['stored']) / MB:.1f} MB |")
print("\nEvery restore of these snapshots is byte-identical (checked by the restore tests and the section's own")
print("restore of the last LoRA snapshot, below).")
PY

# The last LoRA snapshot restores byte-identical (references included).
if bench_tool_on spotguard; then
  last="$data/lora/step-$(printf '%02d' "$steps")"
  p="$RUN_ID/inc-check"
  for step in 1 $steps; do
    "$SG" snapshot --job lora --store "s3://$BUCKET/$p" --dir "$data/lora/$(printf 'step-%02d' "$step")" > /dev/null
  done
  rm -rf "$WORK/inc-restored"
  "$SG" restore --job lora --store "s3://$BUCKET/$p" --to "$WORK/inc-restored" > /dev/null
  bench_tree_sums "$last" "$WORK/inc.sums"
  rm -f "$WORK/inc-restored/.spotguard-restored.json"
  bench_same_tree "$WORK/inc.sums" "$WORK/inc-restored"
  echo "- Restore of the 10th LoRA snapshot (made of references to the first): byte-identical." >> "$OUT/11-incremental.md"
  bench_s3_rm "$p"
fi
