#!/usr/bin/env python3
"""Turns the trials of bench/notice_bench.py into the Markdown fragment of
bench/sections/04-notice.sh and the data file of its stacked-bar plot.

    notice_report.py TSV --md OUT.md --plot-data OUT.dat --put-mbps X --zstd-all-mbps Y
                     --poll-s 2 --settle-s 1 --notice-s 120 [--quick]

MB/s are 10^6 bytes per second, as in the LIMITS file.
"""
import argparse
import csv
import statistics


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--md", required=True)
    ap.add_argument("--plot-data", required=True)
    ap.add_argument("--put-mbps", type=float, required=True)
    ap.add_argument("--zstd-all-mbps", type=float, required=True)
    ap.add_argument("--poll-s", type=float, required=True)
    ap.add_argument("--settle-s", type=float, required=True)
    ap.add_argument("--notice-s", type=float, required=True)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--source-name", default="checkpoint.pt")
    args = ap.parse_args()
    every = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    rows = [r for r in every if r["kind"] == "full"]
    small = [r for r in every if r["kind"] == "small"]
    if not rows:
        raise SystemExit("notice_report: no trials in " + args.tsv)
    col = lambda name: [float(r[name]) for r in rows]
    n = len(rows)
    raw = statistics.median(col("raw_bytes"))
    stored = statistics.median(col("stored_bytes"))

    with open(args.plot_data, "w") as f:
        for r in rows:
            f.write("%s\t%s\t%s\t%s\t%s\n" % (r["trial"], r["detect_s"], r["write_s"],
                                              r["settle_s"], r["upload_s"]))

    # Lower bounds on each phase (time it cannot take less than), and the
    # fraction bound / measured (1.0 = at the bound).
    upload_bound = max(stored / (args.put_mbps * 1e6), raw / (args.zstd_all_mbps * 1e6))
    write_med = statistics.median(col("write_s"))
    phases = [
        ("detection (notice set → agent logs it)", "detect_s", args.poll_s / 2,
         "poll interval / 2 = %.1f s (expected wait for the next poll; max %.0f s)"
         % (args.poll_s / 2, args.poll_s)),
        ("checkpoint write (signal → file renamed; the trainer's work)", "write_s", None,
         "the trainer's own write, not spotguard's"),
        ("settle (file renamed → agent takes it)", "settle_s", args.settle_s,
         "settle_time = %.1f s" % args.settle_s),
        ("upload (capture, compress, PUT, manifest commit)", "upload_s", upload_bound,
         "max(stored / PUT_MBPS, raw / ZSTD_ALL_MBPS) = %.2f s" % upload_bound),
    ]
    total_bound = args.poll_s / 2 + write_med + args.settle_s + upload_bound
    lines = [
        "## Notice to commit (%d trials)" % n,
        "",
        "Measured by `bench/sections/04-notice.sh` (`bench/notice_bench.py`): the Release "
        "`spotguard run` with `--log-format json`, the IMDS simulator, the S3 gateway, and "
        "`bench/notice_trainer.py`, which checkpoints on SIGUSR1 by copying `%s` (%.0f MB, "
        "real fp32 weights + Adam state) to a temporary name and renaming it. Config: preset "
        "pytorch, `checkpoint_signal: SIGUSR1`, `settle_time: %.0fs` (a trainer that renames "
        "finished files into place, as docs/config.md advises; the preset default of 10 s "
        "would add 9 s to every figure below), `imds.poll_interval` at its default %.0f s, "
        "compression defaults. Each trial posts a terminate notice (%d s) at a random point of "
        "the poll cycle and ends when the agent exits 75; phase times come from the agent's "
        "log, the trainer's own timestamps and the time of the POST, all on one clock, and "
        "every trial checks with `spotguard ls` that the snapshot is in the store."
        % (args.source_name, raw / 1e6, args.settle_s, args.poll_s, args.notice_s),
        "",
        "What this shows: how much of the %d s notice a checkpoint-on-signal job spends "
        "before its final snapshot is committed, and where it goes." % args.notice_s,
        "",
        "| phase | median s | max s | bound | bound / median |",
        "| --- | --- | --- | --- | --- |",
    ]
    far = []
    for label, key, bound, why in phases:
        v = col(key)
        med = statistics.median(v)
        frac = ("%.2f" % (bound / med)) if bound and med > 0 else "—"
        if bound and med > 0 and bound / med < 0.5:
            frac += " ⚠"
            far.append(key)
        lines.append("| %s | %.2f | %.2f | %s | %s |" % (label, med, max(v), why, frac))
    tot = col("total_s")
    lines.append("| **total (notice → committed)** | **%.2f** | **%.2f** | sum of the above = "
                 "%.2f s | %.2f |" % (statistics.median(tot), max(tot), total_bound,
                                      total_bound / statistics.median(tot)))
    up = col("upload_s")
    lines += [
        "",
        "Stored %.0f MB of %.0f MB raw (ratio %.2f). Upload rate of the final snapshot: "
        "median %.0f MB/s of raw data, %.0f MB/s stored; %.0f%% of PUT_MBPS (%.0f MB/s) for "
        "the stored bytes. The total is %.1f%% (median) and %.1f%% (max) of the %d s notice. "
        "The agent's own `notice_to_commit_seconds` (from its detection, so without the "
        "detection phase) has median %.2f s."
        % (stored / 1e6, raw / 1e6, raw / stored, raw / 1e6 / statistics.median(up),
           stored / 1e6 / statistics.median(up),
           100 * stored / 1e6 / statistics.median(up) / args.put_mbps, args.put_mbps,
           100 * statistics.median(tot) / args.notice_s, 100 * max(tot) / args.notice_s,
           args.notice_s, statistics.median(col("agent_notice_to_commit_s"))),
        "",
    ]
    up_med = statistics.median(up)
    cpu_med = statistics.median(col("agent_cpu_s"))
    fixed = statistics.median([float(r["upload_s"]) for r in small]) if small else None
    if fixed is not None:
        lines += [
            "Fixed cost of a snapshot: with a 4 KiB checkpoint (%d trials) the upload phase "
            "takes %.2f s (median), %.0f%% of the full-size median. Agent CPU from the notice to "
            "its exit (full size): median %.2f s, i.e. %.0f%% of the %d cores over the upload "
            "phase." % (len(small), fixed, 100 * fixed / up_med, cpu_med,
                        100 * cpu_med / (up_med * args.cores), args.cores),
            "",
        ]
    if "upload_s" in far:
        text = ("⚠ The upload phase takes more than twice its bound, which counts only moving "
                "the bytes (compression and PUT at the limits section's rates). ")
        if fixed is not None and fixed >= 0.5 * up_med:
            text += (
                "Most of it is the fixed cost measured above: the steps that make a snapshot "
                "safe, each a sequential round trip or pass: listing and claiming a snapshot "
                "number (create-only PUT), hard-linking the checkpoint into staging, sampling "
                "each file to choose the codec, re-checking the capture and renewing the lease "
                "before the commit (fencing), the manifest PUT, and the `latest` hint PUT "
                "after it (the agent logs the commit once that is written). What would shorten "
                "it: claim the number and renew the lease while the data uploads rather than "
                "before and after it, and report the commit as soon as the manifest is written.")
        else:
            rate = stored / 1e6 / max(up_med - (fixed or 0), 1e-9)
            text += (
                "The fixed cost measured above is a small part; the rest moves the bytes at "
                "%.0f MB/s stored (%.0f%% of PUT_MBPS). " % (rate, 100 * rate / args.put_mbps))
            if cpu_med < 0.5 * up_med * args.cores:
                text += (
                    "The agent's CPU use shows it was mostly waiting for the store's answers, "
                    "not computing (it keeps 8 parts in flight). Here the S3 gateway runs on "
                    "the same cores as the agent and whatever else the machine runs, so the "
                    "rate it accepts varies with that load and can be far below PUT_MBPS, "
                    "measured at another moment; against S3 the store's side runs elsewhere. "
                    "If the gap remains on a quiet machine, compare this phase's rate with "
                    "`spotguard snapshot` of the torch-1g files in the upload section: a gap "
                    "between the two would be the notice path's own (capture, codec choice, "
                    "lease renewal), not the store's.")
            else:
                text += (
                    "The agent's CPU was busy most of the phase: compression (shuffle + zstd), "
                    "SHA-256 of each file and MD5 of each part compete with the gateway for "
                    "the same cores. What would help: a lower-cost codec setting for the final "
                    "snapshot under a notice (level 1, shuffle only where it pays), and not "
                    "hashing twice (the part MD5s and the file SHA-256 in one pass).")
        lines += [text, ""]
    if "detect_s" in far:
        lines += [
            "⚠ Detection is slower than half the poll interval: each poll reads four IMDS "
            "paths one after another, and the notice is only acted on when the poll that "
            "sees it ends. A shorter `imds.poll_interval` trades IMDS requests (section 05) "
            "for detection time.",
            "",
        ]
    lines += [
        "![notice-to-commit breakdown per trial](04-notice.png)",
        "",
    ]
    with open(args.md, "w") as f:
        f.write("\n".join(lines))


if __name__ == "__main__":
    main()
