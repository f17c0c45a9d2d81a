#!/usr/bin/env python3
"""Turns the upload/restore measurements of bench/sections/02-upload.sh and
03-restore.sh into a Markdown table (medians, fraction of the machine's
bound, a flag where spotguard is slower than an alternative) and a gnuplot
bar chart.

    report.py upload|restore TSV LIMITS_ENV OUT_MD OUT_PNG

TSV columns (tab-separated, with a header line): set tool label compress
fsync rep raw_bytes stored_bytes wall cpu. Appends to OUT_MD.
"""
import csv
import os
import statistics
import subprocess
import sys

SETS = ["torch-1g", "torch-4g", "small-files"]


def read_limits(path):
    limits = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.strip()
            if "=" in line and not line.startswith("#"):
                k, v = line.split("=", 1)
                limits[k] = float(v)
    return limits


def bound(kind, row, limits):
    """The slowest stage the row's bytes pass through, in raw MB/s, and its name."""
    raw, stored = row["raw"], max(row["stored"], 1)
    stages = []
    if kind == "upload":
        key = "READ_MBPS_" + row["set"].replace("-", "_")
        stages.append(("read", limits.get(key, limits["READ_MBPS"])))
        stages.append(("PUT", limits["PUT_MBPS"] * raw / stored))
        if row["compress"]:
            stages.append(("zstd", limits["ZSTD_ALL_MBPS"]))
    else:
        stages.append(("GET", limits["GET_MBPS"] * raw / stored))
        if row["compress"]:
            stages.append(("unzstd", limits["ZSTD_DEC_ALL_MBPS"]))
        if row["fsync"]:
            stages.append(("write+fsync", limits["WRITE_SYNC_MBPS"]))
        else:
            stages.append(("write", limits["WRITE_MBPS"]))
    name, value = min(stages, key=lambda s: s[1])
    return value, name


def load(tsv):
    groups = {}
    with open(tsv, encoding="utf-8") as f:
        for r in csv.DictReader(f, delimiter="\t"):
            key = (r["set"], r["tool"])
            g = groups.setdefault(key, {
                "set": r["set"], "tool": r["tool"], "label": r["label"],
                "compress": r["compress"] == "1", "fsync": r["fsync"] == "1",
                "raw": int(r["raw_bytes"]), "stored": [], "wall": [], "cpu": [], "rss": []})
            g["stored"].append(int(r["stored_bytes"]))
            g["wall"].append(float(r["wall"]))
            g["cpu"].append(float(r["cpu"]))
            if r.get("rss_kb"):
                g["rss"].append(int(r["rss_kb"]))
    rows = []
    for g in groups.values():
        g["runs"] = len(g["wall"])
        g["stored"] = int(statistics.median(g["stored"]))
        g["wall_all"] = g["wall"]
        g["wall"] = statistics.median(g["wall"])
        g["cpu"] = statistics.median(g["cpu"])
        g["rss"] = max(g["rss"]) if g["rss"] else None  # the highest of the runs
        g["mbps"] = g["raw"] / g["wall"] / 1e6 if g["wall"] > 0 else 0.0
        rows.append(g)
    order = {s: i for i, s in enumerate(SETS)}
    tools = []
    for g in rows:
        if g["tool"] not in tools:
            tools.append(g["tool"])
    rows.sort(key=lambda g: (order.get(g["set"], 99), tools.index(g["tool"])))
    return rows, tools


def main():
    kind, tsv, limits_path, out_md, out_png = sys.argv[1:6]
    limits = read_limits(limits_path)
    rows, tools = load(tsv)
    slower = []
    compared = False
    lines = ["| data set | tool | runs | wall s | CPU s | CPU s/GB | peak RSS MiB | stored MiB | stored % | MB/s | bound MB/s (stage) | % of bound | |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- |"]
    for g in rows:
        b, stage = bound(kind, g, limits)
        g["bound"] = b
        flag = ""
        if g["tool"] == "spotguard":
            others = [o for o in rows if o["set"] == g["set"] and o["tool"] != "spotguard"]
            faster = [o for o in others if o["wall"] < g["wall"]]
            compared = compared or bool(others)
            if faster:
                best = min(faster, key=lambda o: o["wall"])
                ratio = g["wall"] / best["wall"]
                flag = f"**slower than {best['label']}** (x{ratio:.2f})"
                if ratio < 1.05:
                    flag += ", within 5%: as large as run-to-run noise here"
                slower.append((g, best))
            elif others:
                nxt = min(others, key=lambda o: o["wall"])
                flag = f"fastest; next {nxt['label']} x{nxt['wall'] / g['wall']:.2f}"
        walls = "" if g["runs"] == 1 else " (" + ", ".join(f"{w:.2f}" for w in g["wall_all"]) + ")"
        lines.append(
            f"| {g['set']} | {g['label']} | {g['runs']} | {g['wall']:.2f}{walls} | {g['cpu']:.2f} | "
            f"{g['cpu'] / (g['raw'] / 1e9):.2f} | "
            f"{'' if g['rss'] is None else format(g['rss'] / 1024, '.0f')} | "
            f"{g['stored'] / 2**20:.1f} | {100 * g['stored'] / g['raw']:.1f} | {g['mbps']:.0f} | "
            f"{b:.0f} ({stage}) | {100 * g['mbps'] / b:.0f}% | {flag} |")
    with open(out_md, "a", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n\n")
        if slower:
            f.write("Rows where spotguard is slower than an alternative (see the explanation below the plot):\n\n")
            for g, best in slower:
                f.write(f"- {g['set']}: spotguard {g['wall']:.2f} s vs {best['label']} {best['wall']:.2f} s; "
                        f"spotguard used {g['cpu']:.2f} CPU s vs {best['cpu']:.2f}, stored "
                        f"{100 * g['stored'] / g['raw']:.0f}% vs {100 * best['stored'] / best['raw']:.0f}%.\n")
        elif compared:
            f.write("spotguard is the fastest tool on every data set in this run.\n")
        else:
            f.write("No alternative to spotguard was measured in this run (BENCH_TOOLS).\n")
        f.write("\n")
    plot(kind, rows, tools, out_png)


def plot(kind, rows, tools, out_png):
    sets = [s for s in SETS if any(g["set"] == s for g in rows)]
    legend = {"spotguard": f"spotguard {kind if kind == 'restore' else 'snapshot'}",
              "aws": "aws s3 cp --recursive", "rclone": "rclone copy",
              "zstd-aws": "zstd -1 + aws s3 cp" if kind == "upload" else "aws s3 cp + zstd -d"}
    labels = {t: legend.get(t, t) for t in tools}
    dat = out_png[:-4] + ".dat"
    with open(dat, "w", encoding="utf-8") as f:
        f.write("set\t" + "\t".join(f'"{labels[t]}"' for t in tools) + "\t\"bound (raw tools)\"\n")
        for s in sets:
            vals = []
            for t in tools:
                g = [x for x in rows if x["set"] == s and x["tool"] == t]
                vals.append(f"{g[0]['mbps']:.1f}" if g else "0")
            raw_bounds = [x["bound"] for x in rows if x["set"] == s and not x["compress"]]
            vals.append(f"{min(raw_bounds):.1f}" if raw_bounds else "0")
            f.write(s + "\t" + "\t".join(vals) + "\n")
    title = "Snapshot upload" if kind == "upload" else "Restore"
    script = f"""
set terminal pngcairo size 900,480 font ',10'
set output '{out_png}'
set title '{title}: raw checkpoint MB/s per tool (higher is better)'
set style data histograms
set style histogram clustered gap 1
set style fill solid 0.85 border -1
set boxwidth 0.9
set ylabel 'MB/s of checkpoint bytes'
set yrange [0:*]
set grid ytics
set key outside right top
set xtics nomirror
plot for [i=2:{len(tools) + 1}] '{dat}' using i:xtic(1) title columnheader(i), \\
     '{dat}' using {len(tools) + 2} title columnheader({len(tools) + 2}) lc rgb '#b0b0b0'
"""
    subprocess.run(["gnuplot"], input=script, text=True, check=True)
    os.remove(dat)


if __name__ == "__main__":
    main()
