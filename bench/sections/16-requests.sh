#!/usr/bin/env bash
# Section 16 of bench/run.sh: store requests per commit and per start, by
# kind, single node and a group of 2 (issue 34, item 7). Runs
# $BUILD/bench/request_count_bench, which drives the agent's own code
# (snapshot writer, lease, fence, restore at start, retention, group records,
# part restore) against a file:// store behind a counting ObjectStore and
# maps each call to the S3 requests S3Store makes for it (see the program's
# header). No gateway and no data set: the counts do not depend on either.
# REQUESTS_BASELINE=PATH adds the counts of another build's program (JSON
# from `request_count_bench --json` of an older commit), labelled
# REQUESTS_BASELINE_LABEL. Writes $OUT/16-requests.md and 16-requests.json.
set -euo pipefail
: "${BUILD:?}" "${OUT:?}"
cd "$(dirname "$0")/../.."
mkdir -p "$OUT"

"$BUILD/bench/request_count_bench" --json > "$OUT/16-requests.json"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if ! git diff --quiet HEAD -- agent common bench/request_count_bench.cc 2>/dev/null; then
  commit="$commit + uncommitted changes"
fi
python3 - "$OUT/16-requests.json" "$commit" "$(date -u '+%Y-%m-%d')" \
  "${REQUESTS_BASELINE:-}" "${REQUESTS_BASELINE_LABEL:-baseline}" > "$OUT/16-requests.md" <<'PY'
import json, sys
path, commit, day, baseline, baseline_label = sys.argv[1:6]
phases = json.load(open(path))
kinds = ["PUT", "GET", "HEAD", "LIST", "DELETE", "CreateMultipartUpload", "UploadPart",
         "CompleteMultipartUpload", "ListMultipartUploads"]
short = {"CreateMultipartUpload": "MPU create", "UploadPart": "MPU part",
         "CompleteMultipartUpload": "MPU complete", "ListMultipartUploads": "list uploads"}
print("## 16. Store requests per commit and per start")
print()
print(f"Measured by `bench/sections/16-requests.sh` on {day} at commit {commit}:")
print("`bench/request_count_bench` runs the agent's own code for each phase against a `file://`")
print("store behind a counting `ObjectStore`, and counts each call as the S3 request(s) `S3Store`")
print("sends for it (a writer: one PUT under 8 MiB, else create + a part per 8 MiB + complete; a")
print("list: one request a page). Retries are not counted. The checkpoint is 48 MiB in 3 files")
print("(40 MiB + 8 MiB + a small JSON); the incremental one changes 1 MiB of it (2%). What each")
print("phase runs is in its row; a group node's heartbeats (member records, plan and round")
print("listings, the lease) are per minute, not per commit: section 13 and")
print("docs/multi-node.md, \"Cost in S3 requests\".")
print()
def table(rows, label=None):
    head = "| phase | " + " | ".join(short.get(k, k) for k in kinds) + " | total |"
    print(head)
    print("| --- |" + " ---: |" * (len(kinds) + 1))
    for p in rows:
        c = p["counts"]
        name = p["phase"] if label is None else f'{p["phase"]} ({label})'
        print(f"| {name} | " + " | ".join(str(c.get(k, 0)) for k in kinds) + f' | {p["total"]} |')
    other = sorted({k for p in rows for k in p["counts"]} - set(kinds))
    if other:
        print()
        print("Other kinds: " + ", ".join(other))
table(phases)
print()
print("What each phase runs:")
print()
for p in phases:
    print(f'- {p["phase"]}: {p["runs"]}.')
if baseline:
    print()
    print(f"The same phases at {baseline_label}:")
    print()
    table(json.load(open(baseline)), baseline_label)
PY
echo "16-requests: $OUT/16-requests.md" >&2
