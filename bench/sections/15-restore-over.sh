#!/usr/bin/env bash
# Section 15 of bench/run.sh: restoring many small files into an absent dir
# (fresh) and again into the dir an earlier restore of them made (over it:
# every entry is looked up in that restore's marker, docs/design.md §7). 100k
# files of 512 B-1.5 KiB (random bytes) in 100 dirs (10k with --quick;
# RESTORE_OVER_FILES overrides), one snapshot in a file:// store under $WORK
# (the placement's cost, not a store's), restored BENCH_REPS times each way
# (default 2, 1 with --quick) and checked file for file. BENCH_SG_BASELINE=PATH
# adds the same runs of another spotguard binary (a Release build of an older
# commit), labelled BENCH_SG_BASELINE_LABEL. Writes $OUT/15-restore-over.md
# and 15-restore-over.tsv.
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}"
cd "$(dirname "$0")/../.."
# shellcheck source=bench/lib.sh
. bench/lib.sh
export SPOTGUARD_CONFIG=

quick=${BENCH_QUICK:-0}
files=${RESTORE_OVER_FILES:-$([ "$quick" = 1 ] && echo 10000 || echo 100000)}
reps=${BENCH_REPS:-$([ "$quick" = 1 ] && echo 1 || echo 2)}
base=$WORK/restore-over
store="file://$base/store"
rm -rf "$base"
mkdir -p "$base" "$OUT"
work_fs=$(findmnt -no FSTYPE -T "$base" | head -1)
load_before=$(cut -d' ' -f1 /proc/loadavg)

python3 - "$base/src" "$files" <<'PY'
import os, random, sys
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(15)
for i in range(n):
    d = os.path.join(root, f"shard_{i % 100:03d}")
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, f"part_{i:06d}.bin"), "wb") as f:
        f.write(rng.randbytes(512 + rng.randrange(1024)))
PY
bytes=$(bench_dir_bytes "$base/src")
bench_tree_sums "$base/src" "$base/src.sha256"
"$SG" snapshot --dir "$base/src" --job over --store "$store" > /dev/null

binaries=("this build=$SG")
if [ -n "${BENCH_SG_BASELINE:-}" ]; then
  binaries=("${BENCH_SG_BASELINE_LABEL:-baseline}=$BENCH_SG_BASELINE" "${binaries[@]}")
fi
tsv="$OUT/15-restore-over.tsv"
printf 'binary\trep\tkind\twall_s\tcpu_s\trss_kb\n' > "$tsv"
for entry in "${binaries[@]}"; do
  label=${entry%%=*}
  bin=${entry#*=}
  for rep in $(seq 1 "$reps"); do
    target="$base/restored"
    rm -rf "$target"
    for kind in fresh over; do
      bench_log "15-restore-over: $label, rep $rep, $kind ($files files)"
      bench_timed "$bin" restore --to "$target" --job over --store "$store"
      printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$label" "$rep" "$kind" "$TIMED_WALL" "$TIMED_CPU" \
        "$TIMED_RSS_KB" >> "$tsv"
      bench_same_tree "$base/src.sha256" "$target"
    done
  done
done
rm -rf "$base"

# The median (mean of the middle two for an even count) of a column of rows.
median() {
  sort -g | awk '{v[NR] = $1} END {if (NR % 2) print v[(NR + 1) / 2]; else printf "%.3f\n", (v[NR / 2] + v[NR / 2 + 1]) / 2}'
}
{
  echo "## 15. Restore over an earlier restore: $files small files"
  echo
  echo "Measured by \`bench/sections/15-restore-over.sh\`: $files files of 512 B-1.5 KiB of random"
  echo "bytes ($(awk -v b="$bytes" 'BEGIN {printf "%.1f", b / 1e6}') MB) in 100 directories, one snapshot in a \`file://\` store"
  echo "in the same scratch dir ($work_fs; so the figures are restore's own work, not a store's), then $reps time(s)"
  echo "each: \`spotguard restore --to\` an absent directory (**fresh**), and again into the directory"
  echo "that restore made (**over**: every entry of it is looked up in the earlier restore's marker,"
  echo "carried or replaced, and the old contents settled; docs/design.md §7). Every restore checked"
  echo "file for file (SHA-256). Wall and CPU (user + system) seconds, median of the runs; peak RSS"
  echo "the largest. 1-minute load average before / after: $load_before / $(cut -d' ' -f1 /proc/loadavg)"
  echo "(2 cores)."
  echo
  echo "| spotguard | fresh wall (s) | fresh CPU (s) | over wall (s) | over CPU (s) | over / fresh (wall) | peak RSS over (MiB) |"
  echo "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"
  for entry in "${binaries[@]}"; do
    label=${entry%%=*}
    col() { awk -F'\t' -v l="$label" -v k="$1" -v c="$2" '$1 == l && $3 == k {print $c}' "$tsv"; }
    fw=$(col fresh 4 | median)
    fc=$(col fresh 5 | median)
    ow=$(col over 4 | median)
    oc=$(col over 5 | median)
    rss=$(col over 6 | sort -g | tail -1)
    printf '| %s | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f |\n' "$label" "$fw" "$fc" "$ow" "$oc" \
      "$(bench_calc "$ow / $fw")" "$(bench_calc "$rss / 1024")"
  done
} > "$OUT/15-restore-over.md"
echo "15-restore-over: $files files, $reps rep(s); $OUT/15-restore-over.md" >&2
