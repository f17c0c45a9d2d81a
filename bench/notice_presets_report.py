#!/usr/bin/env python3
"""Writes the fragment of bench/sections/09-notice-presets.sh from its TSV.

    notice_presets_report.py 09-notice-presets.tsv --md OUT.md --mib N
        [--load-before L --load-after L] [--note TEXT]
"""
import argparse
import csv
import statistics

PRESETS = ["caffe", "pytorch", "lightning", "huggingface", "tensorflow", "dcp", "generic"]
BEHAVIOURS = ["default", "term-save", "notice-file"]
DEFAULT_TEXT = {
    "caffe": "snapshots on SIGHUP (the preset's default `checkpoint_signal`), dies on SIGTERM",
    "pytorch": "a plain PyTorch loop: no SIGTERM handler, dies at once",
    "lightning": "Lightning 2.x: catches SIGTERM, ends `fit()` after the batch with "
                 "`SIGTERMException` (exit 1), no checkpoint",
    "huggingface": "the transformers Trainer installs no SIGTERM handler: dies at once",
    "tensorflow": "Keras `fit()` installs no SIGTERM handler: dies at once",
    "dcp": "torch.distributed.checkpoint under a plain loop: dies at once",
    "generic": "no handler: dies at once",
}
BEHAVIOUR_TEXT = {
    "default": "framework default",
    "term-save": "saves on SIGTERM",
    "notice-file": "answers the notice file",
}
SETTLE = {"pytorch": "10 s", "lightning": "10 s", "generic": "10 s"}


def floats(rows, key):
    return [float(r[key]) for r in rows if r[key] != ""]


def med_max(values):
    if not values:
        return "-"
    return "%.1f / %.1f" % (statistics.median(values), max(values))


def med(values):
    return "%.1f" % statistics.median(values) if values else "-"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("tsv")
    ap.add_argument("--md", required=True)
    ap.add_argument("--mib", type=int, required=True)
    ap.add_argument("--load-before", default="?")
    ap.add_argument("--load-after", default="?")
    ap.add_argument("--note", default="")
    args = ap.parse_args()
    rows = list(csv.DictReader(open(args.tsv), delimiter="\t"))
    trials = max((int(r["trial"]) for r in rows), default=0)

    out = ["## Notice to commit with each preset's default settings (%d trials each)" % trials, ""]
    out.append(
        "Measured by `bench/sections/09-notice-presets.sh` (`bench/notice_presets_bench.py`, "
        "`bench/preset_trainer.py`): the Release `spotguard run` with JSON logs, the IMDS "
        "simulator and the S3 gateway, configured with only `job`, `store`, `endpoint`, "
        "`checkpoint_dir`, `preset` and `command`: every other key at its default "
        "(`checkpoint_signal` none, SIGHUP for caffe; `settle_time` 10 s for pytorch, lightning "
        "and generic, 2 s for the others, 1 s once the job is ending; `stop_grace` 60 s; "
        "`imds.poll_interval` 2 s; `upload_interval` 5 min). The trainer writes checkpoints "
        "of %d MiB of random bytes in the preset's on-disk format, the way the framework "
        "writes them (names, order, in place or renamed: see `bench/preset_trainer.py`). "
        "Each trial: the checkpoint dir holds step 100, dated a minute back; the agent "
        "starts and commits it; the trainer then makes a periodic save (step 1xx), which "
        "`upload_interval` leaves local; 0.5-2.5 s later a terminate notice (120 s) is posted "
        "to the simulator and the trial waits for the agent's exit. Three trainer "
        "behaviours: **framework default** (per preset below), **saves on SIGTERM** (a "
        "handler the user added: finish the step, save, exit 0) and **answers the notice "
        "file** (checks `SPOTGUARD_NOTICE_FILE` every 0.05 s step, saves once, trains on; "
        "SIGTERM as by default). Times are seconds from the POST, on one clock; "
        "*notice → commit* is the last commit before the exit, *fresh* the commit of the "
        "checkpoint the trainer saved in answer (to SIGHUP, SIGTERM or the notice file); "
        "*stored* is the step `spotguard ls` lists as newest afterwards." % args.mib)
    out.append("")
    if args.note:
        out += [args.note, ""]
    out.append("1-minute load average before / after this section: %s / %s (2 cores)."
               % (args.load_before, args.load_after))
    out.append("")
    summary = []
    for preset in PRESETS:
        prow = [r for r in rows if r["preset"] == preset]
        if not prow:
            continue
        out.append("### %s (settle %s; default behaviour: %s)"
                   % (preset, SETTLE.get(preset, "2 s"), DEFAULT_TEXT[preset]))
        out.append("")
        out.append("| trainer | trials | detection | agent waits | SIGTERM at | fresh save written "
                   "| notice → commit, median / max | fresh committed, median / max | stored "
                   "| saved step = stored step | exit codes |")
        out.append("| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: | --- |")
        for b in BEHAVIOURS:
            br = [r for r in prow if r["behaviour"] == b]
            if not br:
                continue
            outcomes = {}
            for r in br:
                outcomes[r["outcome"]] = outcomes.get(r["outcome"], 0) + 1
            saved = [r for r in br if r["fresh_step"] != ""]
            same = sum(1 for r in saved if r["fresh_step"] == r["stored_step"])
            codes = {}
            for r in br:
                codes[r["exit_code"]] = codes.get(r["exit_code"], 0) + 1
            nc = floats(br, "last_commit_s")
            fc = floats(br, "fresh_commit_s")
            out.append("| %s | %d | %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
                BEHAVIOUR_TEXT[b] if not (preset == "caffe" and b == "default")
                else "framework default (SIGHUP)",
                len(br), med(floats(br, "detect_s")), med(floats(br, "window_s")),
                med(floats(br, "sigterm_s")), med(floats(br, "fresh_written_s")),
                med_max(nc), med_max(fc),
                ", ".join("%s %d" % kv for kv in sorted(outcomes.items())),
                "%d of %d" % (same, len(saved)) if saved else "no save",
                ", ".join("%s x%d" % kv for kv in sorted(codes.items()))))
            summary.append((preset, b, nc, outcomes))
        out.append("")
    out.append("Columns are medians over the trials unless marked. *Agent waits*: the window the "
               "agent logged for the trainer's answer (a quarter of the budget without a "
               "`checkpoint_signal`, the whole budget with one). Per-trial rows, including "
               "which snapshots were committed after the notice, are in "
               "`bench/results/09-notice-presets.tsv`.")
    with open(args.md, "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
