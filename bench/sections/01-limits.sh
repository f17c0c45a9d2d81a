#!/usr/bin/env bash
# Section 1: what this machine allows, measured in the same run as the tools:
# reading the data sets (cold and warm page cache), writing (page cache and
# fsync'd), zstd level 1 on all cores (compress, decompress), and a single
# large PUT and GET with curl to the same gateway (and, for comparison, the
# same object through spotguard's transfer engine, bench/s3_transfer_bench). Writes $LIMITS (shell
# KEY=value lines the other sections source) and $OUT/01-limits.md.
# shellcheck disable=SC2016  # the bash -c '...' scripts expand their own arguments
set -euo pipefail
# shellcheck source=bench/lib.sh
. bench/lib.sh

cores=$(nproc)
tries=$([ "$BENCH_QUICK" = 1 ] && echo 2 || echo 3)
tsv="$OUT/limits.tsv"
printf 'what\tbytes\tseconds\tMBps\n' > "$tsv"
# best (shortest) of the tries of a command, bytes moved -> a row and MB/s
best_rate() {
  local what=$1 bytes=$2 best="" i
  shift 2
  for i in $(seq 1 "$tries"); do
    bench_timed "$@"
    if [ -z "$best" ] || awk "BEGIN {exit !($TIMED_WALL < $best)}"; then best=$TIMED_WALL; fi
    : "$i"
  done
  RATE=$(bench_calc "$bytes / ($best > 0 ? $best : 0.001) / 1e6")
  printf '%s\t%s\t%s\t%.1f\n' "$what" "$bytes" "$best" "$RATE" >> "$tsv"
}
cat_dir() { find "$1" -type f -print0 | xargs -0 cat; }
export -f cat_dir

# Reading the files of each data set: cold (page cache dropped before each
# try) and warm (from the page cache).
declare -A read_cold read_warm
for set in $(bench_sets); do
  bytes=$(bench_dir_bytes "$DATA/$set")
  best=""
  for _ in $(seq 1 "$tries"); do
    bench_drop_caches
    bench_timed bash -c 'cat_dir "$1"' _ "$DATA/$set"
    if [ -z "$best" ] || awk "BEGIN {exit !($TIMED_WALL < $best)}"; then best=$TIMED_WALL; fi
  done
  read_cold[$set]=$(bench_calc "$bytes / $best / 1e6")
  printf 'read cold %s\t%s\t%s\t%.1f\n' "$set" "$bytes" "$best" "${read_cold[$set]}" >> "$tsv"
  bench_warm "$DATA/$set"
  best_rate "read warm $set" "$bytes" bash -c 'cat_dir "$1"' _ "$DATA/$set"
  read_warm[$set]=$RATE
done

# Writing: 1 GiB (quick: 256 MiB) of zeros with dd, into the page cache
# (what tools that do not fsync see) and with fdatasync at the end (what a
# durable restore sees).
wmib=$([ "$BENCH_QUICK" = 1 ] && echo 256 || echo 1024)
wbytes=$((wmib << 20))
best_rate "write page cache" "$wbytes" dd if=/dev/zero of="$WORK/w" bs=8M count=$((wmib / 8)) status=none
write_cache=$RATE
rm -f "$WORK/w"
best_rate "write + fdatasync" "$wbytes" dd if=/dev/zero of="$WORK/w" bs=8M count=$((wmib / 8)) conv=fdatasync status=none
write_sync=$RATE
rm -f "$WORK/w"

# zstd -1 (spotguard's default level) on the fp32/bf16 checkpoint files, in
# memory: compress with -T0 (all cores) and -T1; decompress $cores pieces at
# once (a zstd frame decompresses on one core; spotguard decompresses its
# 8 MiB frames on all cores), all from the page cache to /dev/null.
cat_dir "$DATA/torch-1g" > "$WORK/zsample"
zbytes=$(stat -c %s "$WORK/zsample")
best_rate "zstd -1 -T0 compress" "$zbytes" zstd -q -1 -T0 -c "$WORK/zsample"
zstd_all=$RATE
best_rate "zstd -1 -T1 compress" "$zbytes" zstd -q -1 -T1 -c "$WORK/zsample"
zstd_one=$RATE
split -n "$cores" -d "$WORK/zsample" "$WORK/zpiece."
for p in "$WORK"/zpiece.*; do zstd -q -1 -T0 --rm "$p"; done
zstored=$(cat "$WORK"/zpiece.*.zst | wc -c)
dec_all() { for p in "$1"/zpiece.*.zst; do zstd -q -d -c "$p" > /dev/null & done; wait; }
export -f dec_all
best_rate "zstd -d, $cores at once" "$zbytes" bash -c 'dec_all "$1"' _ "$WORK"
zstd_dec_all=$RATE
best_rate "zstd -d, one" "$zbytes" bash -c 'cat "$1"/zpiece.*.zst | zstd -q -d -c' _ "$WORK"
zstd_dec_one=$RATE
rm -f "$WORK/zsample" "$WORK"/zpiece.*

# SHA-256 on one core (OpenSSL, 8 MiB blocks): spotguard hashes every file in
# order on one thread on upload and restore. Comparison only, not a bound.
sha_secs=$([ "$BENCH_QUICK" = 1 ] && echo 1 || echo 3)
sha256=$(openssl speed -seconds "$sha_secs" -bytes 8388608 -evp sha256 2>/dev/null |
  awk '$1 == "sha256" {sub(/k$/, "", $2); printf "%.1f", $2 * 1000 / 1e6}')
printf 'SHA-256 one thread (openssl speed)\t\t\t%s\n' "$sha256" >> "$tsv"

# One large PUT and GET with curl (SigV4, unsigned payload, one connection)
# of random bytes: the gateway's rate for a single stream on these cores.
smib=$([ "$BENCH_QUICK" = 1 ] && echo 128 || echo 1024)
sbytes=$((smib << 20))
head -c "$sbytes" /dev/urandom > "$WORK/put"
url="$SPOTGUARD_TEST_S3_ENDPOINT/$BUCKET/$RUN_ID/limits/put"
curl_s3() {
  curl -sS -f --aws-sigv4 "aws:amz:${SPOTGUARD_TEST_S3_REGION:-us-east-1}:s3" \
    --user "$SPOTGUARD_TEST_S3_ACCESS_KEY:$SPOTGUARD_TEST_S3_SECRET_KEY" \
    -H "x-amz-content-sha256: UNSIGNED-PAYLOAD" "$@"
}
export -f curl_s3
best_rate "PUT (curl, one request)" "$sbytes" bash -c 'curl_s3 -T "$1" "$2"' _ "$WORK/put" "$url"
put=$RATE
best_rate "GET (curl, one request)" "$sbytes" bash -c 'curl_s3 -o /dev/null "$1"' _ "$url"
get=$RATE
curl_s3 -o "$WORK/got" "$url"
cmp -s "$WORK/put" "$WORK/got" || { bench_log "GET returned other bytes than PUT"; exit 1; }
curl_s3 -X DELETE "$url" > /dev/null
rm -f "$WORK/got"

# For comparison (not a bound): the same object through spotguard's transfer
# engine, 8 parts of 8 MiB in flight, so several connections at once.
engine_put="" engine_get=""
for _ in $(seq 1 "$tries"); do
  line=$("$BUILD/bench/s3_transfer_bench" "$WORK/put" "$RUN_ID/limits/engine" 8)
  cmp -s "$WORK/put" "$WORK/put.back" || { bench_log "s3_transfer_bench returned other bytes"; exit 1; }
  read -r up down < <(python3 -c 'import json, sys; d = json.loads(sys.argv[1]); print(d["upload_s"], d["download_s"])' "$line")
  if [ -z "$engine_put" ] || awk "BEGIN {exit !($up < $engine_put)}"; then engine_put=$up; fi
  if [ -z "$engine_get" ] || awk "BEGIN {exit !($down < $engine_get)}"; then engine_get=$down; fi
done
curl_s3 -X DELETE "$SPOTGUARD_TEST_S3_ENDPOINT/$BUCKET/$RUN_ID/limits/engine" > /dev/null
engine_put=$(bench_calc "$sbytes / $engine_put / 1e6")
engine_get=$(bench_calc "$sbytes / $engine_get / 1e6")
printf 'PUT (spotguard engine, 8 parts in flight)\t%s\t\t%.1f\n' "$sbytes" "$engine_put" >> "$tsv"
printf 'GET (spotguard engine, 8 ranges in flight)\t%s\t\t%.1f\n' "$sbytes" "$engine_get" >> "$tsv"
rm -f "$WORK/put" "$WORK/put.back"

{
  echo "CORES=$cores"
  echo "READ_MBPS=${read_warm[torch-1g]}"
  echo "READ_COLD_MBPS=${read_cold[torch-1g]}"
  for set in $(bench_sets); do
    echo "READ_MBPS_${set//-/_}=${read_warm[$set]}"
    echo "READ_COLD_MBPS_${set//-/_}=${read_cold[$set]}"
  done
  echo "WRITE_MBPS=$write_cache"
  echo "WRITE_SYNC_MBPS=$write_sync"
  echo "ZSTD_ALL_MBPS=$zstd_all"
  echo "ZSTD_1T_MBPS=$zstd_one"
  echo "ZSTD_DEC_ALL_MBPS=$zstd_dec_all"
  echo "ZSTD_DEC_1T_MBPS=$zstd_dec_one"
  echo "SHA256_MBPS=$sha256"
  echo "ZSTD_RATIO=$(bench_calc "$zbytes / $zstored")"
  echo "PUT_MBPS=$put"
  echo "GET_MBPS=$get"
} > "$LIMITS"

{
  echo "## 1. Physical limits of this machine (same run)"
  echo
  echo "Measured by \`bench/sections/01-limits.sh\` just before the tools, best of $tries tries each."
  echo "Reads: \`cat\` of every file of a data set to /dev/null, cold (page cache dropped before each try$([ "$BENCH_CACHE_DROPPED" = 1 ] || echo ': **could not drop it, not root**')) and warm."
  echo "Writes: \`dd bs=8M\` of $wmib MiB into \`\$WORK\`'s file system, without and with fdatasync."
  echo "zstd: the CLI at level 1 (spotguard's default) on the torch-1g files ($((zbytes >> 20)) MiB) from the page cache to /dev/null;"
  echo "decompression of $cores pieces at once (one zstd frame decompresses on one core)."
  echo "S3: one PUT and one GET of $smib MiB of random bytes with \`curl --aws-sigv4\` (one connection, unsigned payload) to the same gateway;"
  echo "the gateway runs on the same $cores cores as the client. MB = 10^6 bytes."
  echo
  echo "| limit | MB/s | used as the bound for |"
  echo "| --- | ---: | --- |"
  for set in $(bench_sets); do
    printf '| read %s, cold | %.0f | |\n' "$set" "${read_cold[$set]}"
    printf '| read %s, warm | %.0f | uploads of %s (read) |\n' "$set" "${read_warm[$set]}" "$set"
  done
  printf '| write, page cache | %.0f | restores by tools that do not fsync |\n' "$write_cache"
  printf '| write + fdatasync | %.0f | restores by spotguard (fsyncs every file) |\n' "$write_sync"
  printf '| zstd -1 compress, all %s cores | %.0f | compressing uploads |\n' "$cores" "$zstd_all"
  printf '| zstd -1 compress, 1 thread | %.0f | |\n' "$zstd_one"
  printf '| zstd decompress, %s at once | %.0f | decompressing restores |\n' "$cores" "$zstd_dec_all"
  printf '| zstd decompress, 1 stream | %.0f | |\n' "$zstd_dec_one"
  printf '| SHA-256, one thread (openssl speed, 8 MiB blocks) | %.0f | (comparison only) |\n' "$sha256"
  printf '| S3 PUT, one %s MiB request (curl) | %.0f | uploads (bytes sent) |\n' "$smib" "$put"
  printf '| S3 GET, one %s MiB request (curl) | %.0f | restores (bytes fetched) |\n' "$smib" "$get"
  printf '| S3 PUT, same object, spotguard engine, 8 x 8 MiB parts in flight | %.0f | (comparison only) |\n' "$engine_put"
  printf '| S3 GET, same object, spotguard engine, 8 x 8 MiB ranges in flight | %.0f | (comparison only) |\n' "$engine_get"
  echo
  printf 'zstd -1 made the torch-1g bytes %.2fx smaller (plain zstd, no byte shuffling).\n' \
    "$(bench_calc "$zbytes / $zstored")"
  echo "The bound of a row below is the slowest stage its bytes must pass through, in raw (uncompressed) MB/s:"
  echo "upload min(read, PUT x raw/stored) for raw tools, and additionally zstd compress for compressing ones;"
  echo "restore min(GET x raw/stored, write) and additionally zstd decompress. These bounds assume the stages overlap perfectly;"
  echo "on $cores cores that the gateway shares, they are optimistic. The S3 bounds are one connection's rate; tools that send"
  echo "parts in parallel can beat them (compare the engine rows above), so a transfer-bound row can exceed 100%."
} > "$OUT/01-limits.md"
bench_log "limits: $(tr '\n' ' ' < "$LIMITS")"
