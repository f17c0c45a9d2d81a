#!/usr/bin/env python3
"""Writes the fragment of bench/sections/10-memory.sh from its TSV.

    memory_report.py 10-memory.tsv --md OUT.md --baseline-kib K --mib N --files M
                     --cores C [--load-before L --load-after L] [--note TEXT]

The documented bounds (docs/format.md "Memory", docs/s3.md "Transfers") are
for the buffers; a row is within its bound when its peak RSS is at most the
bound plus the baseline (the RSS of `spotguard ls` on an empty store: the
program, its libraries and their start-up allocations).
"""
import argparse
import csv
import statistics

SET_NAMES = {
    "random": "random file",
    "zeros": "mostly-zero file",
    "small": "small files",
}
MALLOCS = ["default", "arena2", "mmap1m"]
MALLOC_TEXT = {"default": "as shipped", "arena2": "`MALLOC_ARENA_MAX=2`",
               "mmap1m": "`MALLOC_MMAP_THRESHOLD_=1048576`"}
# Buffers, MiB: writing, 2 x threads frames of 8 MiB raw plus their compressed
# form (up to 8 MiB more), plus the S3 writer's 8 parts of 8 MiB and the part
# being filled (docs/format.md: "with 2 cores ... about 136 MiB"), plus what
# the shared buffer pool may keep idle between users (64 MiB); reading,
# 26 MiB per worker (a 16 MiB range, an 8 MiB decompressed frame, a 128 KiB
# piece, 1 MiB read back), two workers per core from 4 to 8 (docs/format.md:
# "208 MiB with 8 workers").
def bound_mib(op, cores):
    if op == "snapshot":
        return 2 * cores * 16 + 64 + 8 + 64
    return 26 * min(8, max(4, 2 * cores))


def mib(kib):
    return int(kib) / 1024.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--md", required=True)
    ap.add_argument("--baseline-kib", type=int, required=True)
    ap.add_argument("--mib", type=int, required=True)
    ap.add_argument("--files", type=int, required=True)
    ap.add_argument("--cores", type=int, required=True)
    ap.add_argument("--reps", type=int, default=1)
    ap.add_argument("--load-before", default="?")
    ap.add_argument("--load-after", default="?")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    base = mib(args.baseline_kib)
    sizes = {r["set"]: int(r["raw_bytes"]) for r in rows}

    out = ["## Memory: peak RSS of spotguard snapshot and restore vs zstd, awscli, rclone", ""]
    out.append(
        "Measured by `bench/sections/10-memory.sh`: peak RSS (`ru_maxrss`, `/usr/bin/time -f %%M`) "
        "of each command (each spotguard row %d time(s): the highest peak is shown, and the "
        "lowest beside it when they differ; the others once), on three data sets the section makes "
        "(`bench/memory_data.py`): a **random file** of %d MiB (incompressible), a "
        "**mostly-zero file** of %d MiB (1 MiB of random bytes at the start of every 32 MiB, "
        "zeros between: the case that decoded gigabytes in one read before commit cdd0c8b), and "
        "**small files**: %d random files of 16 KiB-1 MiB (log-uniform) in 8 directories. "
        "`spotguard snapshot --dir` then `spotguard restore --to` (Release, default settings: "
        "level 1, all %d cores, 8 MiB parts, 8 in flight) through the S3 gateway and through a "
        "`file://` store, each as shipped (since commit 583ed76 spotguard sets glibc's mmap "
        "threshold to 1 MiB at start, unless `MALLOC_MMAP_THRESHOLD_` is set), with "
        "`MALLOC_ARENA_MAX=2` and with `MALLOC_MMAP_THRESHOLD_=1048576`; each restore is "
        "checked file for file (SHA-256). "
        "The others with default settings: `zstd -T0 -1` / `zstd -d` file to file (for the "
        "small files `tar | zstd -T0 -1` and `zstd -d | tar -x`), `aws s3 cp` (`--recursive` "
        "for the small files) and `rclone copy` up and down. For a pipeline the figure is its "
        "largest process (a child's `ru_maxrss` is a maximum, not a sum). Page cache is not "
        "counted in RSS, so the figures are the tools' own memory."
        % (args.reps, args.mib, args.mib, args.files, args.cores))
    out.append("")
    if args.note:
        out += [args.note, ""]
    out.append("1-minute load average before / after this section: %s / %s (%d cores)."
               % (args.load_before, args.load_after, args.cores))
    out.append("")
    out.append(
        "**Bound**: the documented buffers plus the baseline, %.1f MiB (the RSS of `spotguard ls` "
        "on an empty store: the program, its libraries and their start-up allocations). "
        "Snapshot: docs/format.md \"Memory\" gives 2 x threads frames being compressed (8 MiB "
        "raw plus their compressed form, up to 8 MiB more) plus the S3 writer's parts in flight "
        "(docs/s3.md \"Transfers\": 8 x 8 MiB) and the part being filled, \"with 2 cores "
        "about 136 MiB\": %d MiB; the same "
        "figure is used for `file://` (the documents give none of its own). Restore: 26 MiB per "
        "worker, two workers per core from 4 to 8 (%d MiB here), whatever the compression ratio or "
        "the number of files." % (base, bound_mib("snapshot", args.cores), bound_mib("restore", args.cores)))
    out.append("")
    out.append("### spotguard (peak RSS, MiB; highest of the runs, lowest in brackets)")
    out.append("")
    out.append("| data set | command | store | as shipped | `MALLOC_ARENA_MAX=2` | "
               "`MALLOC_MMAP_THRESHOLD_=1048576` | bound | within bound (as shipped / arena 2 / mmap 1 MiB) | "
               "wall s (defaults, median) |")
    out.append("| --- | --- | --- | ---: | ---: | ---: | ---: | --- | ---: |")
    sg = {}
    for r in rows:
        if r["tool"] == "spotguard":
            sg.setdefault((r["set"], r["op"], r["store"], r["malloc"]), []).append(r)
    verdicts = []
    for s in ("random", "zeros", "small"):
        for op in ("snapshot", "restore"):
            for store in ("s3", "file"):
                cells = [sg.get((s, op, store, m)) for m in MALLOCS]
                if not any(cells):
                    continue
                bound = bound_mib(op, args.cores) + base
                peaks = [max(mib(r["peak_kib"]) for r in c) if c else None for c in cells]
                lows = [min(mib(r["peak_kib"]) for r in c) if c else None for c in cells]
                oks = [p is not None and p <= bound for p in peaks]
                within = oks[0]
                verdicts.append((s, op, store, within, peaks[0]))

                def cell(hi, lo):
                    if hi is None:
                        return "-"
                    return "%.1f" % hi if hi - lo < 0.05 else "%.1f (%.1f)" % (hi, lo)
                out.append("| %s | %s | %s | %s | %.0f | %s | %.2f |" % (
                    SET_NAMES[s], op, "S3" if store == "s3" else "file://",
                    " | ".join(cell(h, l) for h, l in zip(peaks, lows)),
                    bound, " / ".join("yes" if ok else "**no**" for ok in oks),
                    statistics.median(float(r["wall_s"]) for r in cells[0])
                    if cells[0] else float("nan")))
    out.append("")
    out.append("### What users run instead (peak RSS, MiB; glibc defaults)")
    out.append("")
    out.append("| data set | tool | operation | peak RSS | wall s |")
    out.append("| --- | --- | --- | ---: | ---: |")
    for s in ("random", "zeros", "small"):
        for r in rows:
            if r["set"] != s or r["tool"] == "spotguard":
                continue
            out.append("| %s | %s | %s | %.1f | %.2f |" % (
                SET_NAMES[s], r["tool"].replace("|", "\\|"), r["op"], mib(r["peak_kib"]),
                float(r["wall_s"])))
    out.append("")
    outside = [v for v in verdicts if not v[3]]
    out.append("Data set sizes (bytes): %s. Within bound as shipped: %d of %d "
               "spotguard rows%s." % (
        ", ".join("%s %d" % (SET_NAMES[k], sizes[k]) for k in ("random", "zeros", "small")
                  if k in sizes),
        len(verdicts) - len(outside), len(verdicts),
        "" if not outside else "; outside: " + ", ".join(
            "%s %s %s" % (SET_NAMES[s], op, st) for s, op, st, _, _ in outside)))
    with open(args.md, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
