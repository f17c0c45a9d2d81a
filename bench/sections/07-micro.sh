#!/usr/bin/env bash
# Section 07 of bench/run.sh: Google Benchmark micro-benchmarks
# (bench/micro_bench.cc) of SigV4 signing, SHA-256, MD5 (Content-MD5),
# shuffle/unshuffle and one 8 MiB frame's compress/decompress at level 1, on
# 8 MiB of the real checkpoint; references: `openssl speed` for the hashes and
# libzstd's one-shot calls (in micro_bench) for frames. Writes $OUT/07-micro.md
# and 07-micro.json.
set -euo pipefail
: "${BUILD:?}" "${WORK:?}" "${OUT:?}" "${DATA:?}"
cd "$(dirname "$0")/../.."

cmake --build "$BUILD" --target micro_bench -j 2 >&2
mkdir -p "$WORK/micro"
min_time=0.5
if [ "${BENCH_QUICK:-0}" = 1 ]; then min_time=0.1; fi
data=$DATA/torch-1g/checkpoint.pt
[ -f "$data" ] || { echo "07-micro: $data is missing" >&2; exit 1; }

SG_MICRO_DATA=$data "$BUILD/bench/micro_bench" --benchmark_format=json \
  --benchmark_min_time="$min_time" --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true > "$OUT/07-micro.json"

# References for the hashes: OpenSSL's own loop over 8 MiB blocks (what
# spotguard calls, through EVP), in CPU time like Google Benchmark's figures.
openssl speed -evp sha256 -bytes 8388608 -seconds 1 2> /dev/null | grep -E '^sha256' > "$WORK/micro/openssl-sha256" || true
openssl speed -evp md5 -bytes 8388608 -seconds 1 2> /dev/null | grep -E '^md5' > "$WORK/micro/openssl-md5" || true

python3 bench/micro_report.py "$OUT/07-micro.json" --openssl-sha256 "$WORK/micro/openssl-sha256" \
  --openssl-md5 "$WORK/micro/openssl-md5" --md "$OUT/07-micro.md"
echo "07-micro: $OUT/07-micro.md" >&2
