#!/usr/bin/env python3
"""Notice-to-commit trials for bench/sections/04-notice.sh.

    notice_bench.py --sg BIN --source FILE --work DIR --store s3://BUCKET/PREFIX
                    --endpoint URL --trials N --tsv OUT.tsv

Each trial runs the real agent (`spotguard run`, JSON logs) against the IMDS
simulator (tests/tools/imds_sim.py) and the S3 gateway, supervising
bench/notice_trainer.py, which checkpoints (a copy of --source, written to a
temporary name and renamed) when it gets SIGUSR1. Once the trainer runs, and
after a random pause so the notice falls anywhere in the agent's poll cycle,
the trial posts a spot interruption notice (terminate in 120 s) to the
simulator and waits for the agent to exit 75 (interrupted after the final
snapshot committed). The phases come from timestamps on one clock (all
wall-clock, same machine):

  t_notice   just before the POST that sets the notice     (this script)
  t_detect   "INTERRUPTION NOTICE" log line                (agent)
  t_signal   "asking the trainer for a checkpoint"         (agent)
  t_written  the checkpoint renamed into place             (trainer)
  t_seen     "the trainer wrote checkpoint"                (agent: settled)
  t_commit   "snapshot ... committed"                      (agent: manifest written)

  detect = t_detect - t_notice; write = t_written - t_signal;
  settle = t_seen - t_written; upload = t_commit - t_seen;
  total = t_commit - t_notice (checkpoint wait = write + settle).

After the N trials, --small-trials more (default 3) run the same way with a
4 KiB checkpoint (a zip holding the first 4 KiB of --source): their upload phase is the
fixed cost of a snapshot, whatever its size. Every trial also records the
agent's CPU time (utime+stime, /proc/PID/stat) from the notice to its exit.

The trial also checks the store: `spotguard ls --json` must list the
snapshot with the trainer's step and the logged stored size. Every object of
the trial's job is deleted afterwards. One TSV row per trial.
"""
import argparse
import datetime
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.request
import zipfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
COLUMNS = ["trial", "kind", "detect_s", "write_s", "settle_s", "upload_s", "total_s",
           "raw_bytes", "stored_bytes", "agent_notice_to_commit_s", "agent_cpu_s"]


def fail(msg):
    print("notice_bench: " + msg, file=sys.stderr)
    sys.exit(1)


def parse_time(s):
    # 2026-11-22T08:22:00.123Z
    return datetime.datetime.strptime(s, "%Y-%m-%dT%H:%M:%S.%fZ").replace(
        tzinfo=datetime.timezone.utc).timestamp()


class Imds:
    def __init__(self, work):
        port_file = os.path.join(work, "imds.port")
        self.proc = subprocess.Popen(
            [PY, os.path.join(ROOT, "tests/tools/imds_sim.py"), "--port", "0",
             "--port-file", port_file], stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(work, "imds.log"), "w"))
        for _ in range(100):
            if os.path.exists(port_file) and open(port_file).read().strip():
                break
            time.sleep(0.1)
        else:
            fail("the IMDS simulator did not start")
        self.endpoint = "http://127.0.0.1:" + open(port_file).read().strip()

    def control(self, method, path, body=None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.endpoint + path, data=data, method=method,
                                     headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(req, timeout=10) as r:
            return r.read()

    def stop(self):
        self.proc.terminate()
        self.proc.wait(10)


def agent_env(args):
    env = dict(os.environ)
    # The bench environment switches IMDS off for awscli; the agent must use the simulator.
    for name in ("AWS_EC2_METADATA_DISABLED", "AWS_EC2_METADATA_SERVICE_ENDPOINT"):
        env.pop(name, None)
    env.update({"SPOTGUARD_CONFIG": "", "SPOTGUARD_LOG_FORMAT": "json",
                "SPOTGUARD_LOG_LEVEL": "info", "SPOTGUARD_ENDPOINT": args.endpoint})
    return env


def delete_prefix(args, prefix, check=True):
    subprocess.run(["aws", "--endpoint-url", args.endpoint, "s3", "rm", "--recursive",
                    "--only-show-errors", prefix + "/"], check=check)


def cpu_seconds(pid):
    """utime + stime of the process, all its threads (live and ended)."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def kill_if(pid, needle):
    """SIGKILL pid if it is still the process whose command line holds needle."""
    try:
        with open("/proc/%d/cmdline" % pid, "rb") as f:
            if needle.encode() in f.read():
                os.kill(pid, signal.SIGKILL)
    except OSError:
        pass


def run_trial(args, imds, n, source, kind):
    job = "notice-%s-%02d" % (kind, n)
    tdir = os.path.join(args.work, job)
    shutil.rmtree(tdir, ignore_errors=True)
    os.makedirs(tdir)
    ckpt = os.path.join(tdir, "ckpt")
    times = os.path.join(tdir, "trainer-times.jsonl")
    config = {
        "job": job,
        "store": args.store,
        "preset": "pytorch",
        # A trainer that checkpoints on signal and renames finished files into
        # place: the settle time a user would set for it (docs/config.md says
        # to lower it for such trainers); the preset's default is 10 s.
        "settle_time": args.settle_time,
        "checkpoint_signal": "SIGUSR1",
        "stop_grace": "10s",
        "command": [PY, os.path.join(HERE, "notice_trainer.py"), "--out", "{checkpoint_dir}",
                    "--source", source, "--times", times],
    }
    cfg_path = os.path.join(tdir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f, indent=2)
    log_path = os.path.join(tdir, "agent.log")
    with open(log_path, "w") as log:
        agent = subprocess.Popen([args.sg, "run", "-c", cfg_path, "--checkpoint-dir", ckpt,
                                  "--imds-endpoint", imds.endpoint],
                                 env=agent_env(args), stdout=log, stderr=log)
    try:
        deadline = time.time() + 60
        while not (os.path.exists(times) and "ready" in open(times).read()):
            if agent.poll() is not None or time.time() > deadline:
                fail("%s: the trainer did not start; see %s" % (job, log_path))
            time.sleep(0.05)
        time.sleep(random.uniform(0.5, 2.5))
        cpu_before = cpu_seconds(agent.pid)
        t_notice = time.time()
        imds.control("POST", "/_sim/spot-notice", {"action": "terminate", "in_seconds": 120})
        while "INTERRUPTION NOTICE" not in open(log_path).read():
            if agent.poll() is not None or time.time() - t_notice > 30:
                fail("%s: the agent did not see the notice within 30s; see %s" % (job, log_path))
            time.sleep(0.05)
        # The agent's CPU from the notice on, sampled until it exits (the last
        # sample is at most 20 ms before its end).
        cpu_after = cpu_before
        while agent.poll() is None:
            if time.time() - t_notice > args.timeout:
                fail("%s: the agent did not exit within %ds; see %s" % (job, args.timeout, log_path))
            sample = cpu_seconds(agent.pid)
            if sample is not None:
                cpu_after = sample
            time.sleep(0.02)
        code = agent.returncode
    finally:
        if agent.poll() is None:  # a failed trial: stop the agent, then make sure
            agent.terminate()     # its trainer is gone too
            try:
                agent.wait(20)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
            if os.path.exists(times):
                for line in open(times):
                    rec = json.loads(line)
                    if rec.get("event") == "ready":
                        kill_if(rec["pid"], "notice_trainer.py")
        imds.control("DELETE", "/_sim/spot-notice")
    if code != 75:
        fail("%s: the agent exited %d, not 75 (interrupted, final snapshot committed); see %s"
             % (job, code, log_path))

    marks = {}
    stored = None
    agent_total = None
    for line in open(log_path):
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        msg, t = rec.get("msg", ""), parse_time(rec["time"])
        if msg.startswith("INTERRUPTION NOTICE"):
            marks.setdefault("detect", t)
        elif msg.startswith("asking the trainer for a checkpoint"):
            marks.setdefault("signal", t)
        elif msg.startswith("the trainer wrote checkpoint"):
            marks.setdefault("seen", t)
        elif re.match(r"snapshot \S+ committed", msg) and "seen" in marks:
            marks.setdefault("commit", t)
            stored = int(re.search(r"(\d+) bytes stored", msg).group(1))
        elif msg.startswith("interrupted:"):
            m = re.search(r"in ([0-9.]+)s from the notice", msg)
            agent_total = float(m.group(1)) if m else None
    missing = [k for k in ("detect", "signal", "seen", "commit") if k not in marks]
    if missing:
        fail("%s: no log line for %s; see %s" % (job, ", ".join(missing), log_path))
    written = [json.loads(l) for l in open(times) if '"written"' in l]
    if len(written) != 1:
        fail("%s: the trainer wrote %d checkpoints, expected 1" % (job, len(written)))
    w = written[0]
    step = int(re.search(r"step_(\d+)\.pt$", w["path"]).group(1))

    listing = subprocess.run([args.sg, "ls", "--job", job, "--store", args.store, "--json"],
                             env=agent_env(args), capture_output=True, text=True, check=True)
    rows = json.loads(listing.stdout)
    if not rows or rows[0]["step"] != step or rows[0]["stored_size"] != stored \
            or rows[0]["size"] != w["bytes"]:
        fail("%s: the store does not hold the snapshot the log reports: %s" % (job, rows))
    delete_prefix(args, args.store + "/" + job)
    shutil.rmtree(tdir)

    row = {
        "trial": n,
        "kind": kind,
        "detect_s": marks["detect"] - t_notice,
        "write_s": w["t"] - marks["signal"],
        "settle_s": marks["seen"] - w["t"],
        "upload_s": marks["commit"] - marks["seen"],
        "total_s": marks["commit"] - t_notice,
        "raw_bytes": w["bytes"],
        "stored_bytes": stored,
        "agent_notice_to_commit_s": agent_total if agent_total is not None else float("nan"),
        "agent_cpu_s": cpu_after - cpu_before,
    }
    if row["detect_s"] < -0.01:
        fail("%s: the agent saw the notice %.3fs before it was set" % (job, -row["detect_s"]))
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--trials", type=int, default=20)
    ap.add_argument("--small-trials", type=int, default=3,
                    help="extra trials with a 4 KiB checkpoint: the fixed cost per snapshot")
    ap.add_argument("--settle-time", default="1s")
    ap.add_argument("--timeout", type=int, default=300)
    ap.add_argument("--tsv", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    imds = Imds(args.work)
    try:
        with open(args.tsv, "w") as out:
            out.write("\t".join(COLUMNS) + "\n")
            # A whole zip (the pytorch preset checks for the end-of-central-
            # directory record, as torch.save files have) of 4 KiB of the source.
            small = os.path.join(args.work, "small.pt")
            with open(args.source, "rb") as src:
                head = src.read(4096)
            with zipfile.ZipFile(small, "w", zipfile.ZIP_STORED) as z:
                z.writestr("archive/data.pkl", head)
            plan = [(n, args.source, "full") for n in range(1, args.trials + 1)]
            plan += [(n, small, "small") for n in range(1, args.small_trials + 1)]
            for n, source, kind in plan:
                row = run_trial(args, imds, n, source, kind)
                out.write("\t".join(("%.3f" % row[c]) if isinstance(row[c], float)
                                    else str(row[c]) for c in COLUMNS) + "\n")
                out.flush()
                print("notice_bench: %s trial %d: detect %.2fs write %.2fs settle %.2fs upload "
                      "%.2fs total %.2fs" % (kind, n, row["detect_s"], row["write_s"],
                                             row["settle_s"], row["upload_s"], row["total_s"]),
                      file=sys.stderr)
    finally:
        imds.stop()
        delete_prefix(args, args.store, check=False)  # what a failed trial left


if __name__ == "__main__":
    main()
