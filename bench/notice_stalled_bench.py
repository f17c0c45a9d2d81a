#!/usr/bin/env python3
"""Spot notices while the store does not answer, for
bench/sections/08-notice-stalled.sh.

    notice_stalled_bench.py --sg BIN --work DIR --store s3://BUCKET/PREFIX
                            --endpoint URL --answers N --never N --tsv OUT.tsv

Each trial runs the real agent (`spotguard run`, JSON logs) against the IMDS
simulator (tests/tools/imds_sim.py) and, through tests/tools/fault_proxy.py
(one per trial), the S3 gateway, supervising examples/simple_trainer.py
(0.02 s steps, a checkpoint every 20 steps and on SIGUSR1). Once the agent
has committed its first snapshot, the trial freezes the store (`freeze_match`
on the next lease renewal: from then on every S3 request is held, neither
forwarded nor answered), waits until the proxy holds a request, waits a random
part of the poll interval (so the notice falls anywhere in the agent's poll
cycle) and posts a spot interruption notice to the simulator. Two kinds:

  answers  notice in 120 s; the store stays frozen until --hold seconds after
           the agent logged the notice, then the proxy is released (the held
           requests land late, in order) and the trial waits for the agent's
           exit: 75 expected (the final snapshot committed).
  never    notice in 30 s; the store never answers. The agent must give up on
           the final upload 10 s before the deadline, stop the trainer and
           exit 74 (not committed). The proxy is killed afterwards, so the held
           requests never land.

Times, all on one wall clock (same machine):

  t_post     just before the POST that sets the notice        (this script)
  deadline   the notice's time, as the simulator answered it (whole seconds)
  t_detect   "INTERRUPTION NOTICE ... (read X.Xs after it was posted)" (agent)
  t_release  just before POST /_proxy/release                  (this script)
  t_commit   the first "snapshot ... committed" after t_detect (agent)
  t_giveup   "... did not finish before the deadline ..."      (agent)
  t_stopped  "the trainer stopped"                             (agent)
  t_gone     the trainer's process seen gone or a zombie       (this script, 20 ms polls)
  t_exit     the agent's process seen exited                   (this script, 20 ms polls)

Every column *_s is seconds from t_post; read_after_s is the agent's own
figure (from deadline - 120 s, or - 30 s, the notice's posting time by its
own definition). The proxy's held-request counts when the notice was posted,
when the script saw the notice line and just before the release show the
store was frozen throughout.
Everything of the trial's job is deleted from the store afterwards (straight
from the gateway, not through the proxy). One TSV row per trial.
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
import types
import urllib.request

from notice_bench import Imds, agent_env, delete_prefix, kill_if, parse_time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
PY = sys.executable
COLUMNS = ["trial", "kind", "in_s", "wait_before_s", "held_at_post", "held_at_detect",
           "held_at_release",
           "detect_s", "read_after_s", "deadline_s", "release_s", "commit_s", "giveup_s",
           "trainer_stopped_s", "trainer_gone_s", "exit_s", "exit_code",
           "agent_notice_to_commit_s"]
NAN = float("nan")


def fail(msg):
    print("notice_stalled_bench: " + msg, file=sys.stderr)
    sys.exit(1)


def http(method, url, body=None, timeout=10):
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=timeout) as r:
        return json.loads(r.read() or b"{}")


class Proxy:
    """tests/tools/fault_proxy.py in front of the gateway."""

    def __init__(self, work, upstream):
        port_file = os.path.join(work, "proxy.port")
        host = re.sub(r"^[a-z]+://", "", upstream).rstrip("/")
        self.proc = subprocess.Popen(
            [PY, os.path.join(ROOT, "tests/tools/fault_proxy.py"), "--upstream", host,
             "--port", "0", "--port-file", port_file], stdout=subprocess.DEVNULL,
            stderr=open(os.path.join(work, "proxy.log"), "w"))
        for _ in range(100):
            if os.path.exists(port_file):
                break
            time.sleep(0.1)
        else:
            fail("the fault proxy did not start")
        self.endpoint = "http://127.0.0.1:" + open(port_file).read().strip()

    def control(self, method, path, body=None, timeout=10):
        return http(method, self.endpoint + path, body, timeout)

    def stop(self):
        self.proc.kill()
        self.proc.wait(10)


def trainer_pid(agent_pid):
    """The simple_trainer.py child of the agent, or None."""
    try:
        children = open("/proc/%d/task/%d/children" % (agent_pid, agent_pid)).read().split()
    except OSError:
        return None
    for c in children:
        try:
            if b"simple_trainer.py" in open("/proc/%s/cmdline" % c, "rb").read():
                return int(c)
        except OSError:
            pass
    return None


def gone(pid):
    try:
        state = open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return True
    return state in ("Z", "X")


def log_records(path):
    out = []
    for line in open(path, errors="replace"):
        if '"[trainer ' in line:
            continue
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and "time" in rec:
            out.append((parse_time(rec["time"]), rec.get("msg", "")))
    return out


class LogTail:
    """Reads the agent's log as it grows (it also carries the trainer's output,
    50 lines a second), remembering which needles have appeared."""

    def __init__(self, path):
        self.path, self.offset, self.rest, self.seen = path, 0, "", set()

    def has(self, needle):
        if needle in self.seen:
            return True
        with open(self.path, errors="replace") as f:
            f.seek(self.offset)
            chunk = f.read()
            self.offset = f.tell()
        lines = (self.rest + chunk).split("\n")
        self.rest = lines.pop()
        for line in lines:
            if '"[trainer ' in line:
                continue
            for n in (" committed", "INTERRUPTION NOTICE"):
                if n in line:
                    self.seen.add(n)
        return needle in self.seen


def wait_log(tail, needle, agent, limit, what):
    t0 = time.time()
    while not tail.has(needle):
        if agent.poll() is not None:
            fail("%s: the agent exited %d first; see %s" % (what, agent.returncode, tail.path))
        if time.time() - t0 > limit:
            fail("%s: not within %ds; see %s" % (what, limit, tail.path))
        time.sleep(0.02)


def run_trial(args, imds, n, kind):
    job = "stalled-%s-%02d" % (kind, n)
    tdir = os.path.join(args.work, job)
    shutil.rmtree(tdir, ignore_errors=True)
    os.makedirs(tdir)
    in_s = 120 if kind == "answers" else 30
    proxy = Proxy(tdir, args.endpoint)
    config = {
        "job": job,
        "store": args.store,
        "preset": "generic",
        "patterns": ["step_*.ckpt"],
        "checkpoint_signal": "SIGUSR1",
        # The trainer renames finished files into place: a short settle time.
        "settle_time": "300ms",
        # Snapshots every second, each with a lease renewal before its commit:
        # the freeze engages within about a second of being armed.
        "upload_interval": "1s",
        "stop_grace": "5s",
        "command": [PY, os.path.join(ROOT, "examples/simple_trainer.py"), "--out",
                    "{checkpoint_dir}", "--steps", "10000000", "--step-seconds", "0.02",
                    "--checkpoint-every", "20"],
    }
    cfg_path = os.path.join(tdir, "config.json")
    with open(cfg_path, "w") as f:
        json.dump(config, f, indent=2)
    log_path = os.path.join(tdir, "agent.log")
    env = agent_env(types.SimpleNamespace(endpoint=proxy.endpoint))
    with open(log_path, "w") as log:
        agent = subprocess.Popen([args.sg, "run", "-c", cfg_path, "--checkpoint-dir",
                                  os.path.join(tdir, "ckpt"), "--imds-endpoint", imds.endpoint],
                                 env=env, stdout=log, stderr=log)
    trainer = None
    row = {c: NAN for c in COLUMNS}
    row["held_at_release"] = ""
    row.update({"trial": n, "kind": kind, "in_s": in_s})
    try:
        tail = LogTail(log_path)
        wait_log(tail, " committed", agent, 60, job + ": the first commit")
        trainer = trainer_pid(agent.pid)
        if trainer is None:
            fail("%s: no trainer process under the agent" % job)
        proxy.control("POST", "/_proxy/config", {"freeze_match": "PUT [^ ]*/lease"})
        t0 = time.time()
        while True:
            stats = proxy.control("GET", "/_proxy/stats")
            if stats["frozen"] and stats["held"] > 0:
                break
            if agent.poll() is not None or time.time() - t0 > 60:
                fail("%s: the store never froze; see %s" % (job, log_path))
            time.sleep(0.05)
        row["wait_before_s"] = random.uniform(0, args.poll)
        time.sleep(row["wait_before_s"])
        row["held_at_post"] = proxy.control("GET", "/_proxy/stats")["held"]
        t_post = time.time()
        answer = imds.control("POST", "/_sim/spot-notice",
                              {"action": "terminate", "in_seconds": in_s})
        deadline = parse_time(json.loads(answer)["time"].replace("Z", ".0Z"))
        row["deadline_s"] = deadline - t_post
        seen = None
        t_gone = None
        released = False
        while agent.poll() is None:
            now = time.time()
            if now - t_post > args.timeout:
                fail("%s: the agent did not exit within %ds of the notice; see %s"
                     % (job, args.timeout, log_path))
            if t_gone is None and gone(trainer):
                t_gone = now
            if seen is None and tail.has("INTERRUPTION NOTICE"):
                seen = now
                stats = proxy.control("GET", "/_proxy/stats")
                row["held_at_detect"] = stats["held"] if stats["frozen"] else 0
            if kind == "answers" and seen is not None and not released \
                    and now >= seen + args.hold:
                row["held_at_release"] = proxy.control("GET", "/_proxy/stats")["held"]
                row["release_s"] = time.time() - t_post
                released = True
                proxy.control("POST", "/_proxy/release", timeout=300)
            time.sleep(0.02)
        t_exit = time.time()
        if t_gone is None and gone(trainer):
            t_gone = t_exit
        row["exit_s"] = t_exit - t_post
        row["trainer_gone_s"] = (t_gone - t_post) if t_gone else NAN
        row["exit_code"] = agent.returncode
    finally:
        if agent.poll() is None:  # a failed trial: stop the agent and its trainer
            agent.terminate()
            try:
                agent.wait(30)
            except subprocess.TimeoutExpired:
                agent.kill()
                agent.wait()
        if trainer is not None:
            kill_if(trainer, "simple_trainer.py")
        proxy.stop()
        imds.control("DELETE", "/_sim/spot-notice")

    recs = log_records(log_path)
    t_detect = None
    for t, msg in recs:
        if t_detect is None and msg.startswith("INTERRUPTION NOTICE"):
            t_detect = t
            m = re.search(r"\(read ([0-9.]+)s after it was posted\)", msg)
            row["read_after_s"] = float(m.group(1)) if m else NAN
        elif t_detect is None:
            continue
        elif re.match(r"snapshot \S+ committed", msg) and row["commit_s"] != row["commit_s"]:
            row["commit_s"] = t - t_post
        elif "did not finish before the deadline" in msg:
            row["giveup_s"] = t - t_post
        elif msg.startswith("the trainer stopped"):
            row["trainer_stopped_s"] = t - t_post
        elif msg.startswith("interrupted:"):
            m = re.search(r"in ([0-9.]+)s from the notice", msg)
            if m and re.match(r"interrupted: snapshot \S+ committed", msg):
                row["agent_notice_to_commit_s"] = float(m.group(1))
    if t_detect is None:
        fail("%s: no INTERRUPTION NOTICE line; see %s" % (job, log_path))
    row["detect_s"] = t_detect - t_post
    want = 75 if kind == "answers" else 74
    if row["exit_code"] != want:
        fail("%s: the agent exited %d, expected %d; see %s"
             % (job, row["exit_code"], want, log_path))
    if kind == "answers" and row["commit_s"] != row["commit_s"]:
        fail("%s: exited 75 but logged no commit after the notice; see %s" % (job, log_path))
    direct = types.SimpleNamespace(endpoint=args.endpoint)
    delete_prefix(direct, args.store + "/" + job)
    if not args.keep:
        shutil.rmtree(tdir)
    return row


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--endpoint", required=True, help="the gateway (the proxy goes in front)")
    ap.add_argument("--answers", type=int, default=10,
                    help="trials whose store answers again after the detection")
    ap.add_argument("--never", type=int, default=3, help="trials whose store never answers")
    ap.add_argument("--hold", type=float, default=5.0,
                    help="seconds the store stays frozen after the agent logged the notice")
    ap.add_argument("--poll", type=float, default=2.0, help="imds.poll_interval (default 2 s)")
    ap.add_argument("--timeout", type=int, default=200)
    ap.add_argument("--keep", action="store_true", help="keep each trial's directory")
    ap.add_argument("--tsv", required=True)
    args = ap.parse_args()
    os.makedirs(args.work, exist_ok=True)
    imds = Imds(args.work)
    try:
        with open(args.tsv, "w") as out:
            out.write("\t".join(COLUMNS) + "\n")
            plan = [(n, "answers") for n in range(1, args.answers + 1)]
            plan += [(n, "never") for n in range(1, args.never + 1)]
            for n, kind in plan:
                row = run_trial(args, imds, n, kind)
                out.write("\t".join(("%.3f" % row[c]) if isinstance(row[c], float)
                                    else str(row[c]) for c in COLUMNS) + "\n")
                out.flush()
                print("notice_stalled_bench: %s trial %d: detect %.2fs (agent: read %.1fs after) "
                      "commit %.2fs trainer stopped %.2fs exit %.2fs code %d"
                      % (kind, n, row["detect_s"], row["read_after_s"], row["commit_s"],
                         row["trainer_stopped_s"], row["exit_s"], row["exit_code"]),
                      file=sys.stderr)
    finally:
        imds.stop()
        delete_prefix(types.SimpleNamespace(endpoint=args.endpoint), args.store, check=False)


if __name__ == "__main__":
    main()
