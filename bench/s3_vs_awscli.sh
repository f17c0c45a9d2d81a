#!/usr/bin/env bash
# 1 GiB (BENCH_SIZE_MIB) of incompressible data up to S3 and back, through
# spotguard's transfer engine and through `aws s3 cp` (Debian's awscli),
# against the same gateway in one run. Starts the Ceph gateway of
# scripts/s3-server.sh unless SPOTGUARD_TEST_S3_* names one. Prints a
# markdown table for bench/RESULTS.md.
set -euo pipefail
cd "$(dirname "$0")/.."

size_mib=${BENCH_SIZE_MIB:-1024}
reps=${BENCH_REPS:-3}
build=${SPOTGUARD_BUILD_DIR:-build/release}

bash scripts/install-deps.sh >&2
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DSPOTGUARD_BUILD_TESTS=OFF -DSPOTGUARD_BUILD_BENCH=ON >&2
cmake --build "$build" -j "$(nproc)" --target s3_transfer_bench >&2

# shellcheck source=bench/gateway.sh
. bench/gateway.sh

echo "bench: writing ${size_mib} MiB of random data" >&2
head -c "$((size_mib << 20))" /dev/urandom > "$work/data"
want=$(sha256sum < "$work/data" | cut -d' ' -f1)
check() {
  local got
  got=$(sha256sum < "$1" | cut -d' ' -f1)
  [ "$got" = "$want" ] || { echo "bench: $1 differs from the source" >&2; exit 1; }
}
secs() { python3 -c "import sys; print(f'{float(sys.argv[1]):.2f}')" "$1"; }
now() { date +%s.%N; }
elapsed() { python3 -c "import sys; print(float(sys.argv[2]) - float(sys.argv[1]))" "$1" "$2"; }

rows=()
for rep in $(seq 1 "$reps"); do
  key="bench/$(date +%s%N)"
  line=$("$build/bench/s3_transfer_bench" "$work/data" "$key-sg" 8)
  check "$work/data.back"
  up=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['upload_s'])" "$line")
  down=$(python3 -c "import json,sys; print(json.loads(sys.argv[1])['download_s'])" "$line")
  rows+=("spotguard $rep $up $down")
  aws_s3 rm "s3://$SPOTGUARD_TEST_S3_BUCKET/$key-sg"

  t0=$(now); aws_s3 cp "$work/data" "s3://$SPOTGUARD_TEST_S3_BUCKET/$key-aws"; t1=$(now)
  aws_s3 cp "s3://$SPOTGUARD_TEST_S3_BUCKET/$key-aws" "$work/aws.back"; t2=$(now)
  check "$work/aws.back"
  rows+=("awscli $rep $(elapsed "$t0" "$t1") $(elapsed "$t1" "$t2")")
  aws_s3 rm "s3://$SPOTGUARD_TEST_S3_BUCKET/$key-aws"
  rm -f "$work/aws.back" "$work/data.back"
done

echo "| tool | run | upload s | upload MiB/s | download s | download MiB/s |"
echo "| --- | --- | --- | --- | --- | --- |"
for r in "${rows[@]}"; do
  read -r tool rep up down <<< "$r"
  printf '| %s | %s | %s | %s | %s | %s |\n' "$tool" "$rep" "$(secs "$up")" \
    "$(secs "$(python3 -c "print($size_mib / $up)")")" "$(secs "$down")" \
    "$(secs "$(python3 -c "print($size_mib / $down)")")"
done
