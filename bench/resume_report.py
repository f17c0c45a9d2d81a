#!/usr/bin/env python3
"""Writes section 14's fragment of bench/RESULTS.md from resume_bench.py's TSV.

    resume_report.py TSV --md OUT.md [--load-before L --load-after L]
"""
import argparse, csv, statistics

PHASES = [
    ("to_restore", "`spotguard run` started -> restore starts (config, host lock, lease, fence, history)"),
    ("restore", "restore (fetch, decode, check, write, fsync, swap into place)"),
    ("to_trainer", "restored -> the trainer is started"),
    ("load", "the trainer reads its checkpoint (page cache: what restore wrote)"),
    ("total", "**time to resume**: `spotguard run` started -> the trainer's first step"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--md", required=True)
    ap.add_argument("--load-before", default="?")
    ap.add_argument("--load-after", default="?")
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    sets = list(dict.fromkeys(r["set"] for r in rows))
    head = "| phase | " + " | ".join(f"{s} (s, median; runs)" for s in sets) + " |"
    lines = [head, "| --- |" + " ---: |" * len(sets)]
    for key, what in PHASES:
        cells = []
        for s in sets:
            v = [float(r[key]) for r in rows if r["set"] == s]
            cells.append(f"{statistics.median(v):.2f} ({', '.join(f'{x:.2f}' for x in v)})")
        lines.append(f"| {what} | " + " | ".join(cells) + " |")
    mbs = []
    for s in sets:
        v = [r for r in rows if r["set"] == s]
        rate = statistics.median(int(r["loaded_bytes"]) / float(r["restore"]) / 1e6 for r in v)
        mbs.append(f"{s}: {rate:.0f} MB/s")
    text = f"""## 14. Time to resume (single node)

Measured by `bench/sections/14-resume.sh` (`bench/resume_bench.py`): what a
replacement instance waits for. Each trial stores the data set with `spotguard
snapshot` as a job of its own (not timed), drops the page cache and starts
`spotguard run` on an empty checkpoint dir (an IMDS simulator, the gateway on
loopback); the agent restores the snapshot and starts `bench/resume_trainer.py`,
which reads every file of its checkpoint and records its first step. Phases
from the agent's log lines and the trainer's record. Load average
{args.load_before} before, {args.load_after} after.

{chr(10).join(lines)}

Restore rate (checkpoint bytes over the restore phase, median): {'; '.join(mbs)}.
"""
    with open(args.md, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
