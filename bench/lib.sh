# Helpers for the bench/sections/*.sh scripts (sourced; bench/run.sh sets the
# environment they use: SG BUILD WORK OUT DATA BENCH_QUICK BUCKET RUN_ID LIMITS
# and the SPOTGUARD_TEST_S3_* / AWS_* variables).
# shellcheck shell=bash
# shellcheck disable=SC2034  # the variables set here are read by the sections

# Debian's awscli (the one install-deps.sh installs), never a pyenv shim.
AWS_BIN=/usr/bin/aws

bench_log() { echo "bench: $*" >&2; }

# The data sets present, in a fixed order.
bench_sets() {
  local s
  for s in torch-1g torch-4g small-files; do
    if [ -d "$DATA/$s" ]; then echo "$s"; fi
  done
}

# Bytes in all files under a directory.
bench_dir_bytes() { find "$1" -type f -printf '%s\n' | awk '{s += $1} END {printf "%.0f\n", s}'; }
bench_dir_files() { find "$1" -type f | wc -l; }

# Empties the page cache (needs root); warns when it cannot.
BENCH_CACHE_DROPPED=1
bench_drop_caches() {
  sync
  if ! { echo 3 > /proc/sys/vm/drop_caches; } 2>/dev/null; then
    bench_log "WARNING: cannot drop the page cache (not root?); cold figures are not cold"
    BENCH_CACHE_DROPPED=0
  fi
}

# Reads every file of a directory once, so it is in the page cache.
bench_warm() { find "$1" -type f -print0 | xargs -0 cat > /dev/null; }

# bench_timed CMD...: runs CMD (stdout to /dev/null) and sets TIMED_WALL (s,
# from bash's microsecond clock; /usr/bin/time's %e has 10 ms steps),
# TIMED_CPU (user + system s of CMD and every child it waited for) and
# TIMED_RSS_KB (the peak resident set of CMD, or of its largest child).
bench_timed() {
  local t0=$EPOCHREALTIME t1
  /usr/bin/time -f '%U %S %M' -o "$WORK/.time" "$@" > /dev/null
  t1=$EPOCHREALTIME
  TIMED_WALL=$(awk -v a="$t0" -v b="$t1" 'BEGIN {printf "%.3f", b - a}')
  TIMED_CPU=$(awk '{printf "%.3f", $1 + $2}' "$WORK/.time")
  TIMED_RSS_KB=$(awk '{print $3}' "$WORK/.time")
}

# awk arithmetic: bench_calc 'expr' -> value
bench_calc() { awk "BEGIN {print $1}"; }

bench_aws() { "$AWS_BIN" --endpoint-url "$SPOTGUARD_TEST_S3_ENDPOINT" "$@"; }

# Total bytes stored under s3://$BUCKET/PREFIX/ (0 when empty).
bench_stored_bytes() {
  bench_aws s3 ls --recursive "s3://$BUCKET/$1/" | awk '{s += $3} END {printf "%.0f\n", s}'
}

# Deletes everything under s3://$BUCKET/PREFIX/. With a second argument (bytes
# just deleted) above 1 GiB, waits for the gateway's garbage collector (every
# 10 s) to hand the memory of the deleted parts back to its in-RAM store.
bench_s3_rm() {
  bench_aws s3 rm --recursive --only-show-errors "s3://$BUCKET/$1/"
  if [ "${2:-0}" -gt $((1 << 30)) ]; then sleep 25; fi
}

# An rclone remote "sg:" for the gateway, from the environment only (no
# config file holding the keys). Run rclone under `env -u AWS_CA_BUNDLE`: with
# that variable set (some machines set it for awscli), rclone 1.60's S3
# backend fails to start (LoadCustomCABundleError), even for http endpoints.
bench_rclone_env() {
  export RCLONE_CONFIG_SG_TYPE=s3 RCLONE_CONFIG_SG_PROVIDER=Ceph RCLONE_CONFIG_SG_ENV_AUTH=false
  export RCLONE_CONFIG_SG_ACCESS_KEY_ID=$SPOTGUARD_TEST_S3_ACCESS_KEY
  export RCLONE_CONFIG_SG_SECRET_ACCESS_KEY=$SPOTGUARD_TEST_S3_SECRET_KEY
  export RCLONE_CONFIG_SG_ENDPOINT=$SPOTGUARD_TEST_S3_ENDPOINT
  export RCLONE_CONFIG_SG_REGION=${SPOTGUARD_TEST_S3_REGION:-us-east-1}
  export RCLONE_CONFIG=/dev/null
}

# Writes "name  sha256" lines of every file under DIR (relative names, sorted)
# to FILE; bench_same_tree FILE DIR checks DIR against them, file for file.
# spotguard restore's own marker (.spotguard-restored.json, docs/design.md §7)
# is not part of the checkpoint.
bench_tree_sums() {
  (cd "$1" && find . -type f ! -name .spotguard-restored.json -print0 | sort -z | xargs -0 sha256sum) > "$2"
}
bench_same_tree() {
  local got
  got=$(mktemp "$WORK/sums.XXXXXX")
  bench_tree_sums "$2" "$got"
  if ! cmp -s "$1" "$got"; then
    bench_log "$2 is not identical to the source:"
    diff "$1" "$got" | head -5 >&2
    return 1
  fi
  rm -f "$got"
}

# Repetitions for a data set: BENCH_REPS_4G (default 3) for the 4 GiB set,
# BENCH_REPS (default 2) for the others; 1 with --quick.
bench_reps() {
  # torch-4g: 3 runs (1 with --quick), its median against the others' (this machine's page cache and
  # loopback vary by a third from one run to the next); the other sets 2.
  if [ "$1" = torch-4g ]; then
    echo "${BENCH_REPS_4G:-$([ "$BENCH_QUICK" = 1 ] && echo 1 || echo 3)}"
  else
    echo "${BENCH_REPS:-$([ "$BENCH_QUICK" = 1 ] && echo 1 || echo 2)}"
  fi
}

# BENCH_TOOLS=REGEX (a development aid) limits the upload and restore
# sections to the tools whose id (spotguard, aws, zstd-aws, rclone) matches.
bench_tool_on() { [ -z "${BENCH_TOOLS:-}" ] || [[ $1 =~ $BENCH_TOOLS ]]; }
