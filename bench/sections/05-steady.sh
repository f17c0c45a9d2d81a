#!/usr/bin/env bash
# Section 05 of bench/run.sh: steady-state cost. `spotguard run` with default
# settings supervises an idle trainer for 5 minutes (30 s with --quick); see
# bench/steady_bench.py for what is counted and how. Writes $OUT/05-steady.md
# and 05-steady.json.
set -euo pipefail
: "${SG:?}" "${WORK:?}" "${OUT:?}" "${BUCKET:?}" "${RUN_ID:?}" "${SPOTGUARD_TEST_S3_ENDPOINT:?}"
cd "$(dirname "$0")/../.."

seconds=300
if [ "${BENCH_QUICK:-0}" = 1 ]; then seconds=30; fi
python3 bench/steady_bench.py --sg "$SG" --work "$WORK" --store "s3://$BUCKET/$RUN_ID/steady" \
  --endpoint "$SPOTGUARD_TEST_S3_ENDPOINT" --seconds "$seconds" --json "$OUT/05-steady.json"

python3 - "$OUT/05-steady.json" "$OUT/05-steady.md" <<'PY'
import json, os, sys
r = json.load(open(sys.argv[1]))
methods = ", ".join("%s %d" % kv for kv in sorted(r["s3_by_method"].items())) or "none"
win = r["seconds"]
lines = [
    "## Steady-state cost (idle trainer, %.0f s)" % win,
    "",
    "Measured by `bench/sections/05-steady.sh` (`bench/steady_bench.py`): the Release "
    "`spotguard run` with default settings (preset pytorch, IMDS poll every 2 s, lease "
    "heartbeat 30 s, upload interval 5 min) supervising `sleep infinity` (writes no "
    "checkpoint), against the IMDS simulator and the S3 gateway. The window starts once "
    "the trainer runs. CPU is utime+stime of the agent process (all threads) from "
    "/proc/PID/stat, counted in clock ticks (%d ms), peak RSS is VmHWM; IMDS requests are those the simulator logged; "
    "S3 requests are counted by a pass-through proxy in front of the gateway (it forwards "
    "every request unchanged, so signatures hold)." % (1000 // os.sysconf("SC_CLK_TCK")),
    "",
    "What this shows: what the agent costs a training machine while nothing happens.",
    "",
    "| figure | value | bound | fraction of bound |",
    "| --- | --- | --- | --- |",
    "| agent CPU | %.2f s in %.0f s | one core (%.0f s) | %.5f |"
    % (r["cpu_s"], win, win, r["cpu_fraction_of_core"]),
    "| peak RSS (VmHWM) | %.1f MiB | — | — |" % (r["hwm_kib"] / 1024),
    "| IMDS requests | %.1f /min (%d) | 120 /min (a poll every 2 s reads 4 paths: spot "
    "instance-action, ASG target-lifecycle-state, rebalance, scheduled events) | %.2f |"
    % (r["imds_per_min"], r["imds_requests"], r["imds_per_min"] / 120),
    "| S3 requests | %.2f /min (%d: %s) | 2 /min (one lease renewal per 30 s heartbeat) | %.2f |"
    % (r["s3_per_min"], r["s3_requests"], methods, r["s3_per_min"] / 2),
    "",
    "Startup (agent start → trainer started, not in the window): %.2f s, %.2f s CPU, "
    "%d S3 and %d IMDS requests. %d threads at the end; RSS at the end %.1f MiB."
    % (r["startup_s"], r["startup_cpu_s"], r["startup_s3_requests"],
       r["startup_imds_requests"], r["threads"], r["rss_kib"] / 1024),
    "",
]
open(sys.argv[2], "w").write("\n".join(lines))
PY
echo "05-steady: $OUT/05-steady.md" >&2
