#!/usr/bin/env python3
"""Runs one libFuzzer target for a while and writes its reliability record.

The seed corpus in the repository is copied into a working corpus in the
build dir, so new inputs and crash artifacts never land in the repository.
Time per target: --seconds, else SPOTGUARD_FUZZ_SECONDS, else 300 s when
SPOTGUARD_LONG_TESTS=1 (scripts/test.sh --long), else 20 s.

Exit status: 0 when libFuzzer ran to its time limit without finding
anything; 1 with the reproducer's path otherwise. The record
(<SPOTGUARD_RELIABILITY_DIR>/<name>.json, the fields of
tests/support/reliability_record.h) holds the executions as trials and the
coverage reached as detail.
"""
import argparse
import glob
import json
import os
import re
import shutil
import subprocess
import sys


def seconds_to_run(explicit):
    if explicit:
        return explicit
    if os.environ.get("SPOTGUARD_FUZZ_SECONDS"):
        return int(os.environ["SPOTGUARD_FUZZ_SECONDS"])
    return 300 if os.environ.get("SPOTGUARD_LONG_TESTS") == "1" else 20


def write_record(name, record):
    out_dir = os.environ.get("SPOTGUARD_RELIABILITY_DIR")
    if not out_dir:
        return
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(record, f, indent=2)
        f.write("\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--seeds", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--dict", default="")
    ap.add_argument("--seconds", type=int, default=0)
    args = ap.parse_args()

    seconds = seconds_to_run(args.seconds)
    corpus = os.path.join(args.work, "corpus")
    artifacts = os.path.join(args.work, "artifacts")
    shutil.rmtree(artifacts, ignore_errors=True)
    os.makedirs(corpus, exist_ok=True)
    os.makedirs(artifacts, exist_ok=True)
    seeds = sorted(glob.glob(os.path.join(args.seeds, "*")))
    if not seeds:
        print(f"run_fuzz: no seeds in {args.seeds}", file=sys.stderr)
        return 1
    for s in seeds:
        shutil.copy(s, corpus)

    cmd = [args.target, f"-max_total_time={seconds}", "-print_final_stats=1",
           "-timeout=10", "-rss_limit_mb=2048", "-max_len=65536",
           f"-artifact_prefix={artifacts}/"]
    if args.dict:
        cmd.append(f"-dict={args.dict}")
    cmd.append(corpus)
    env = dict(os.environ)
    # Leaks are findings too; abort so that libFuzzer saves the input.
    env.setdefault("ASAN_OPTIONS", "detect_leaks=1:abort_on_error=1")
    env.setdefault("UBSAN_OPTIONS", "print_stacktrace=1:halt_on_error=1")
    print("run_fuzz: " + " ".join(cmd), flush=True)
    proc = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          errors="replace", env=env)
    out = proc.stdout
    found = sorted(glob.glob(os.path.join(artifacts, "*")))

    execs = 0
    m = re.findall(r"stat::number_of_executed_units:\s*(\d+)", out)
    if m:
        execs = int(m[-1])
    status = re.findall(r"^#(\d+)\s+\w+\s+cov: (\d+) ft: (\d+) corp: (\d+)", out, re.M)
    cov = ft = corp = 0
    if status:
        cov, ft, corp = int(status[-1][1]), int(status[-1][2]), int(status[-1][3])
        execs = max(execs, int(status[-1][0]))

    ok = proc.returncode == 0 and not found and execs > 0
    detail = (f"{seconds} s, {execs} executions, coverage {cov} edges, {ft} features, "
              f"corpus {len(seeds)} seeds -> {corp} inputs, crashes {len(found) if not ok else 0}")
    record = {
        "test": args.name, "area": "fuzz",
        "faults": "libFuzzer-generated inputs (ASan/UBSan, property checks)",
        "trials": execs, "faults_injected": execs,
        "committed": 0, "restored": 0, "lost": 0,
        "detail": detail if ok else detail + "; FAILED: " + (", ".join(found) or f"exit {proc.returncode}"),
    }
    write_record(args.name, record)
    if ok:
        print(f"run_fuzz: {args.name}: {detail}")
        return 0
    # The tail of libFuzzer's output holds the sanitizer report or property message.
    print(out[-12000:])
    print(f"run_fuzz: {args.name} FAILED (exit {proc.returncode}); reproducer(s): "
          + (" ".join(found) or "none saved"), file=sys.stderr)
    if found:
        print(f"run_fuzz: reproduce with: {args.target} {found[0]}", file=sys.stderr)
    return 1


if __name__ == "__main__":
    sys.exit(main())
