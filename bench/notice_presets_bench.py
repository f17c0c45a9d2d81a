#!/usr/bin/env python3
"""Notice-to-commit with each preset's default settings, for
bench/sections/09-notice-presets.sh.

    notice_presets_bench.py --sg BIN --work DIR --store s3://BUCKET/PREFIX
        --endpoint URL --mib N --trials N --tsv OUT.tsv [--presets a,b]

For each preset and each trainer behaviour (bench/preset_trainer.py: the
framework's default, a SIGTERM handler that saves, an answer to
SPOTGUARD_NOTICE_FILE; caffe only its default, a snapshot on SIGHUP), N
trials of the Release `spotguard run` with the preset and nothing else set
(job, store, endpoint, checkpoint_dir, command: every other key, settle_time,
checkpoint_signal, stop_grace, imds.poll_interval and upload_interval
included, at its default), the IMDS simulator and the S3 gateway:

1. the checkpoint dir gets a checkpoint of step 100, dated a minute back
   (what the job had saved before the agent started), and the agent starts;
2. once it committed step 100 (its first upload), the trainer makes a
   periodic save (step ~1xx), which upload_interval (5 min) leaves local;
3. 0.5-2.5 s later the trial posts a terminate notice (120 s) and waits for
   the agent's exit.

It records detection, when the trainer got SIGTERM / SIGHUP / saw the notice
file, its fresh save, every commit after the notice, the exit code, and
which step the store's newest snapshot holds (`spotguard ls --json`): the
fresh save, the periodic one (older), or step 100. One TSV row per trial.
"""
import argparse
import json
import os
import random
import re
import shutil
import subprocess
import sys
import time

from notice_bench import Imds, agent_env, delete_prefix, kill_if, parse_time

HERE = os.path.dirname(os.path.abspath(__file__))
PY = sys.executable
PRESETS = ["caffe", "pytorch", "lightning", "huggingface", "tensorflow", "dcp", "generic"]
COLUMNS = ["preset", "behaviour", "trial", "detect_s", "window_s", "ask_s", "sigterm_s",
           "fresh_step", "fresh_written_s", "fresh_commit_s", "last_commit_s", "commits",
           "periodic_step", "stored_step", "outcome", "exit_code", "agent_total_s",
           "trainer_exit", "bytes"]


def fail(msg):
    print("notice_presets_bench: " + msg, file=sys.stderr)
    sys.exit(1)


def events(path):
    if not os.path.exists(path):
        return []
    out = []
    for line in open(path):
        try:
            out.append(json.loads(line))
        except ValueError:
            pass  # a line being written
    return out


def log_lines(path):
    for line in open(path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        yield parse_time(rec["time"]), rec.get("msg", "")


def wait_for(cond, timeout, what, agent, log_path):
    deadline = time.time() + timeout
    while True:
        got = cond()
        if got:
            return got
        if agent.poll() is not None:
            fail("%s: the agent exited %d first; see %s" % (what, agent.returncode, log_path))
        if time.time() > deadline:
            fail("%s: not within %ds; see %s" % (what, timeout, log_path))
        time.sleep(0.05)


def run_trial(args, imds, preset, behaviour, n):
    job = "np-%s-%s-%02d" % (preset, behaviour, n)
    tdir = os.path.join(args.work, job)
    shutil.rmtree(tdir, ignore_errors=True)
    ckpt, control = os.path.join(tdir, "ckpt"), os.path.join(tdir, "control")
    os.makedirs(control)
    times = os.path.join(tdir, "trainer-times.jsonl")
    trainer = [PY, os.path.join(HERE, "preset_trainer.py"), "--preset", preset, "--dir", ckpt,
               "--mib", str(args.mib)]
    subprocess.run(trainer + ["--seed-only", "100"], check=True)
    old = time.time() - 60
    for root, dirs, files in os.walk(ckpt):
        for name in dirs + files:
            os.utime(os.path.join(root, name), (old, old))
    config = {"job": job, "store": args.store, "preset": preset,
              "command": trainer + ["--behaviour", behaviour, "--times", times,
                                    "--control", control]}
    cfg_path = os.path.join(tdir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f, indent=2)
    log_path = os.path.join(tdir, "agent.log")
    with open(log_path, "w") as log:
        agent = subprocess.Popen([args.sg, "run", "-c", cfg_path, "--checkpoint-dir", ckpt,
                                  "--imds-endpoint", imds.endpoint],
                                 env=agent_env(args), stdout=log, stderr=log)
    try:
        wait_for(lambda: any(e["event"] == "ready" for e in events(times)), 60,
                 job + ": the trainer's start", agent, log_path)
        wait_for(lambda: any(re.match(r"snapshot \S+ committed: .*\(step 100\)", m)
                             for _, m in log_lines(log_path)), 90,
                 job + ": the commit of step 100", agent, log_path)
        open(os.path.join(control, "save"), "w").close()
        periodic = wait_for(lambda: [e for e in events(times) if e.get("why") == "periodic"], 60,
                            job + ": the periodic save", agent, log_path)[0]
        time.sleep(random.uniform(0.5, 2.5))
        t_notice = time.time()
        imds.control("POST", "/_sim/spot-notice", {"action": "terminate", "in_seconds": 120})
        deadline = t_notice + args.timeout
        while agent.poll() is None:
            if time.time() > deadline:
                fail("%s: the agent did not exit within %ds; see %s" % (job, args.timeout, log_path))
            time.sleep(0.05)
        code = agent.returncode
    finally:
        if agent.poll() is None:  # a failed trial: stop the agent, then its trainer
            agent.terminate()
            try:
                agent.wait(20)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        for e in events(times):
            if e["event"] == "ready":
                kill_if(e["pid"], "preset_trainer.py")
        imds.control("DELETE", "/_sim/spot-notice")

    marks, commits, agent_total = {}, [], None
    for t, msg in log_lines(log_path):
        if msg.startswith("INTERRUPTION NOTICE"):
            marks.setdefault("detect", t)
        elif "waiting up to" in msg and "detect" in marks:
            m = re.search(r"waiting up to ([0-9.]+)s", msg)
            marks.setdefault("window", float(m.group(1)))
        elif msg.startswith("asking the trainer for a checkpoint"):
            marks.setdefault("ask", t)
        elif t >= t_notice - 0.01 and re.match(r"snapshot \S+ committed", msg):
            m = re.search(r"\(step (\d+|-)\)", msg)
            commits.append((t, int(m.group(1)) if m and m.group(1) != "-" else None))
        elif msg.startswith("interrupted:"):
            m = re.search(r"in ([0-9.]+)s from the notice", msg)
            agent_total = float(m.group(1)) if m else None
    if "detect" not in marks:
        fail("%s: no INTERRUPTION NOTICE line; see %s" % (job, log_path))
    ev = events(times)
    fresh = [e for e in ev if e["event"] == "saved" and e["why"] != "periodic"]
    sigterm = [e["t"] for e in ev if e["event"] == "signal" and e["name"] == "SIGTERM"]
    notice_seen = [e["t"] for e in ev if e["event"] == "notice-file"]
    exits = [e for e in ev if e["event"] == "exit"]
    ask = marks.get("ask") or (notice_seen[0] if notice_seen else None)
    fresh_step = fresh[0]["step"] if fresh else None
    fresh_commit = [t for t, s in commits if fresh_step is not None and s == fresh_step]

    listing = subprocess.run([args.sg, "ls", "--job", job, "--store", args.store, "--json"],
                             env=agent_env(args), capture_output=True, text=True, check=True)
    rows = json.loads(listing.stdout)
    stored = rows[0]["step"] if rows else None
    if fresh_step is not None and stored == fresh_step:
        outcome = "fresh"
    elif stored == periodic["step"]:
        outcome = "periodic (older)"
    elif stored == 100:
        outcome = "step 100 (oldest)"
    else:
        outcome = "other: %s" % stored
    delete_prefix(args, args.store + "/" + job)
    shutil.rmtree(tdir)

    def since(t):
        return "%.3f" % (t - t_notice) if t is not None else ""

    return {
        "preset": preset, "behaviour": behaviour, "trial": n,
        "detect_s": since(marks["detect"]),
        "window_s": "%.1f" % marks["window"] if "window" in marks else "",
        "ask_s": since(ask), "sigterm_s": since(sigterm[0] if sigterm else None),
        "fresh_step": fresh_step if fresh_step is not None else "",
        "fresh_written_s": since(fresh[0]["t"] if fresh else None),
        "fresh_commit_s": since(fresh_commit[0] if fresh_commit else None),
        "last_commit_s": since(commits[-1][0] if commits else None),
        "commits": ",".join(str(s) for _, s in commits),
        "periodic_step": periodic["step"], "stored_step": stored if stored is not None else "",
        "outcome": outcome, "exit_code": code,
        "agent_total_s": "%.1f" % agent_total if agent_total is not None else "",
        "trainer_exit": exits[0]["code"] if exits else "",
        "bytes": fresh[0]["bytes"] if fresh else periodic["bytes"],
    }


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--mib", type=int, default=128)
    ap.add_argument("--trials", type=int, default=5)
    ap.add_argument("--presets", default=",".join(PRESETS))
    ap.add_argument("--behaviours", default="default,term-save,notice-file")
    ap.add_argument("--timeout", type=int, default=150)
    ap.add_argument("--tsv", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    imds = Imds(args.work)
    plan = []
    for preset in args.presets.split(","):
        for behaviour in args.behaviours.split(","):
            if preset == "caffe" and behaviour != "default":
                continue  # caffe's default checkpoint_signal (SIGHUP) is its answer
            plan += [(preset, behaviour, n) for n in range(1, args.trials + 1)]
    try:
        with open(args.tsv, "w") as out:
            out.write("\t".join(COLUMNS) + "\n")
            for preset, behaviour, n in plan:
                row = run_trial(args, imds, preset, behaviour, n)
                out.write("\t".join(str(row[c]) for c in COLUMNS) + "\n")
                out.flush()
                print("notice_presets_bench: %s %s %d: detect %s, SIGTERM %s, fresh %s written %s "
                      "committed %s, last commit %s, stored %s (%s), exit %s"
                      % (preset, behaviour, n, row["detect_s"], row["sigterm_s"],
                         row["fresh_step"], row["fresh_written_s"], row["fresh_commit_s"],
                         row["last_commit_s"], row["stored_step"], row["outcome"],
                         row["exit_code"]), file=sys.stderr)
    finally:
        imds.stop()
        delete_prefix(args, args.store, check=False)


if __name__ == "__main__":
    main()
