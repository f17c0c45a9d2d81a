#!/usr/bin/env python3
"""Writes section 11's fragment of bench/RESULTS.md from multi_node_bench.py's TSV.

    multi_node_report.py TSV --md OUT.md [--load-before L --load-after L]
"""
import argparse, csv, statistics

PHASES = [
    ("detect", "notice posted -> the noticed agent reads it and ends the round"),
    ("others_asked", "-> the last other node reads the round's end and asks its trainer"),
    ("parts_stored", "-> the last node's part of the answering step is stored"),
    ("group_commit", "-> the coordinator commits the first group snapshot after the notice"),
    ("answer_named", "-> the coordinator names the group snapshot that answers the request"),
    ("noticed_exit", "-> the noticed agent has stopped its trainer and exited 75"),
]
RESUME = [
    ("plan", "replacement started -> the coordinator writes the next round's plan"),
    ("restored", "-> the replacement has restored its rank's part"),
    ("trainer_started", "-> its trainer is started with the round's placement"),
    ("first_step", "-> the trainer runs its first step"),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--md", required=True)
    ap.add_argument("--load-before", default="?")
    ap.add_argument("--load-after", default="?")
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    mib = rows[0]["mib_per_node"] if rows else "?"

    def table(phases):
        out = ["| since the start, s | median | min | max |", "| --- | ---: | ---: | ---: |"]
        for key, what in phases:
            v = [float(r[key]) for r in rows]
            out.append(f"| {what} | {statistics.median(v):.2f} | {min(v):.2f} | {max(v):.2f} |")
        return "\n".join(out)

    text = f"""## 13. Multi-node: notice to group commit, and time to resume

Three agents of one job (`nodes: 3`) on this machine, each with its own IMDS
simulator and checkpoint dir, against the gateway; the trainer is
`tests/tools/group_trainer.py` with {mib} MiB of incompressible bytes in each
node's checkpoint, saving every 20 steps of 50 ms (so the answer to a notice is
at most 1 s of training away). {len(rows)} trials; `group.heartbeat` 2 s,
`imds.poll_interval` 1 s. Load average {args.load_before} before, {args.load_after} after.
Every phase is measured from the notice's posting (first table) or from the
replacement agent's start (second), by the agents' own log lines.

**Notice to group commit** (every node's part of one step stored, then one
create-only commit):

{table(PHASES)}

**Time to resume** after a replacement with an empty disk joins:

{table(RESUME)}

S3 requests per node per minute while training, at the defaults
(`group.heartbeat` 10 s, the round read every 2 s): docs/multi-node.md, "Cost in S3 requests".
"""
    with open(args.md, "w") as f:
        f.write(text)


if __name__ == "__main__":
    main()
