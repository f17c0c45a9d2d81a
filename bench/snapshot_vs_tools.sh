#!/usr/bin/env bash
# `spotguard snapshot` / `restore` of a ~1 GiB checkpoint of real trained
# weights (fp32 model + Adam state, and a bf16 copy, made with Debian's
# python3-torch) against what users do otherwise, in one run, against the same
# S3 gateway:
#   aws s3 cp          the raw files up and down
#   zstd -T0 | aws     each file compressed by the zstd command, streamed up;
#                      down: aws s3 cp - | zstd -d
# and spotguard at zstd levels 1, 3 and 6 (to choose the default level).
# Prints a markdown table of stored bytes, wall time and CPU time (user+sys of
# the client processes; the gateway's CPU is not counted).
set -euo pipefail
cd "$(dirname "$0")/.."

build=${SPOTGUARD_BUILD_DIR:-build/release}
bash scripts/install-deps.sh >&2
if ! /usr/bin/python3 -c 'import torch' 2>/dev/null; then
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends python3-torch >&2
fi
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOTGUARD_BUILD_TESTS=OFF -DSPOTGUARD_BUILD_BENCH=OFF >&2
cmake --build "$build" -j "$(nproc)" --target spotguard >&2
sg="$PWD/$build/agent/spotguard"

# shellcheck source=bench/gateway.sh
. bench/gateway.sh
export SPOTGUARD_ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT
export SPOTGUARD_LOG_LEVEL=warn
bucket=$SPOTGUARD_TEST_S3_BUCKET
run_id=bench-$(date +%s)

echo "bench: training a model to checkpoint" >&2
/usr/bin/python3 bench/make_checkpoint.py "$work/ckpt" >&2
raw=$(du -cb "$work"/ckpt/* | tail -1 | cut -f1)
files=$(find "$work/ckpt" -maxdepth 1 -type f -printf '%f ' | sort)

# Runs a command, prints "wall cpu" seconds (cpu = user + sys of it and its children).
timed() {
  /usr/bin/time -f '%e %U %S' -o "$work/time" "$@" > /dev/null
  awk '{printf "%.2f %.2f\n", $1, $2 + $3}' "$work/time"
}
same_tree() {
  for f in $files; do cmp -s "$work/ckpt/$f" "$1/$f" || { echo "bench: $1/$f differs" >&2; exit 1; }; done
}

rows=()
for level in 1 3 6; do
  job="$run_id-l$level"
  read -r up_wall up_cpu < <(SPOTGUARD_COMPRESSION_LEVEL=$level timed "$sg" snapshot --job "$job" \
    --store "s3://$bucket/bench" --dir "$work/ckpt")
  stored=$("$sg" ls --job "$job" --store "s3://$bucket/bench" --json |
    /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["stored_size"])')
  read -r down_wall down_cpu < <(timed "$sg" restore --job "$job" --store "s3://$bucket/bench" \
    --to "$work/back-sg")
  same_tree "$work/back-sg"
  rm -rf "$work/back-sg"
  rows+=("spotguard (zstd -$level, auto shuffle)|$stored|$up_wall|$up_cpu|$down_wall|$down_cpu")
  aws_s3 rm --recursive "s3://$bucket/bench/$job/"
done

aws_cmd=(aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp --recursive --only-show-errors)
read -r up_wall up_cpu < <(timed "${aws_cmd[@]}" "$work/ckpt" "s3://$bucket/$run_id-raw/")
read -r down_wall down_cpu < <(timed "${aws_cmd[@]}" "s3://$bucket/$run_id-raw/" "$work/back-raw")
same_tree "$work/back-raw"
rows+=("aws s3 cp (raw files)|$raw|$up_wall|$up_cpu|$down_wall|$down_cpu")
aws_s3 rm --recursive "s3://$bucket/$run_id-raw/"
rm -rf "$work/back-raw"

cat > "$work/zup.sh" <<SCRIPT
set -euo pipefail
for f in $files; do
  zstd -T0 -3 -q -c "$work/ckpt/\$f" | aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp - "s3://$bucket/$run_id-zstd/\$f.zst" --only-show-errors
done
SCRIPT
cat > "$work/zdown.sh" <<SCRIPT
set -euo pipefail
mkdir -p "$work/back-zstd"
for f in $files; do
  aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 cp "s3://$bucket/$run_id-zstd/\$f.zst" - --only-show-errors | zstd -d -q -o "$work/back-zstd/\$f"
done
SCRIPT
read -r up_wall up_cpu < <(timed bash "$work/zup.sh")
zstored=$(aws --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" s3 ls --recursive "s3://$bucket/$run_id-zstd/" | awk '{s += $3} END {print s}')
read -r down_wall down_cpu < <(timed bash "$work/zdown.sh")
same_tree "$work/back-zstd"
rows+=("zstd -T0 -3, then aws s3 cp -|$zstored|$up_wall|$up_cpu|$down_wall|$down_cpu")
aws_s3 rm --recursive "s3://$bucket/$run_id-zstd/"

echo "checkpoint: $files($raw bytes)"
echo
echo "| method | stored MiB | stored % | up wall s | up CPU s | down wall s | down CPU s |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for r in "${rows[@]}"; do
  IFS='|' read -r name stored uw uc dw dc <<< "$r"
  printf '| %s | %.1f | %.1f | %s | %s | %s | %s |\n' "$name" "$(echo "$stored / 1048576" | bc -l)" \
    "$(echo "100 * $stored / $raw" | bc -l)" "$uw" "$uc" "$dw" "$dc"
done
