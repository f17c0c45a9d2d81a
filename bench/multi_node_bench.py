#!/usr/bin/env python3
"""Section 13 of bench/run.sh: a 3-node job's notice-to-group-commit and its
time to resume after a replacement joins, broken into phases.

Each trial runs three agents of the real binary (`nodes: 3`), each with its
own IMDS simulator (own instance id) and checkpoint dir, against the S3
gateway, supervising tests/tools/group_trainer.py with --pad-mib MiB of
incompressible bytes in every checkpoint. Once a group snapshot exists, a
spot notice (120 s) is posted to node 2; node 2 must exit 75; then a fourth
agent with an empty disk joins and the group resumes. The phases come from
the agents' own log lines (their UTC timestamps, one clock: one machine).

    multi_node_bench.py --sg BIN --work DIR --store s3://B/P --endpoint URL
                        [--trials N] [--mib M] --tsv OUT.tsv
"""
import argparse, json, os, re, shutil, signal, subprocess, sys, time, urllib.request

from agent_run import stamp_of, start_imds

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)


def first(path, pattern, after=0.0):
    """The time of the first line of `path` matching `pattern` at or after `after`."""
    rx = re.compile(pattern)
    with open(path, errors="replace") as f:
        for line in f:
            t = stamp_of(line)
            if t is not None and t >= after and rx.search(line):
                return t
    return None


def control(endpoint, path, body):
    req = urllib.request.Request(endpoint + path, data=json.dumps(body).encode(), method="POST")
    urllib.request.urlopen(req, timeout=10).read()


def start_imds_for(work, n):
    p, endpoint = start_imds(work, f"imds{n}")
    control(endpoint, "/_sim/identity", {"instanceId": f"i-bench{n}"})
    return p, endpoint


def trial(args, t, store):
    work = os.path.join(args.work, f"trial{t}")
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    sims, agents = {}, {}
    env = dict(os.environ, SPOTGUARD_CONFIG="", SPOTGUARD_LOG_LEVEL="info")

    def start(n):
        sims[n] = start_imds_for(work, n)
        ckpt = os.path.join(work, f"n{n}", "ckpt")
        os.makedirs(ckpt)
        cfg = {"job": "bench", "store": store, "endpoint": args.endpoint, "checkpoint_dir": ckpt,
               "preset": "pytorch", "checkpoint_signal": "SIGUSR1", "settle_time": "500ms",
               "upload_interval": "10s",
               "nodes": 3,
               "group": {"address": "127.0.0.1", "heartbeat": "2s", "timeout": "10s"},
               "lease": {"heartbeat": "2s", "timeout": "6s"},
               "imds": {"endpoint": sims[n][1], "poll_interval": "1s"},
               "command": [sys.executable, os.path.join(ROOT, "tests/tools/group_trainer.py"),
                           "--steps", "100000", "--save-every", "20", "--step-seconds", "0.05",
                           "--pad-mib", str(args.mib)]}
        path = os.path.join(work, f"n{n}.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        log = open(os.path.join(work, f"n{n}.log"), "w")
        agents[n] = (subprocess.Popen([args.sg, "run", "-c", path], stdout=log,
                                      stderr=subprocess.STDOUT, env=env), log)

    try:
        for n in (1, 2, 3):
            start(n)
        logs = {n: os.path.join(work, f"n{n}.log") for n in (1, 2, 3, 4)}
        deadline = time.time() + 300
        while time.time() < deadline:
            if any(first(logs[n], "committed group snapshot") for n in (1, 2, 3)):
                break
            time.sleep(0.2)
        else:
            raise RuntimeError("no group snapshot within 300 s")
        t_notice = time.time()
        control(sims[2][1], "/_sim/spot-notice", {"action": "terminate", "in_seconds": 120})
        code = agents[2][0].wait(timeout=200)
        t_exit = time.time()
        if code != 75:
            raise RuntimeError(f"node 2 exited {code}, not 75")
        row = {"trial": t, "mib_per_node": args.mib}
        row["detect"] = first(logs[2], "interruption notice: ending round", t_notice) - t_notice
        asked = [first(logs[n], r"round \d+ ends: notice", t_notice) for n in (1, 3)]
        row["others_asked"] = max(asked) - t_notice
        parts = [first(logs[n], r"part of step \d+ is stored", t_notice) for n in (1, 2, 3)]
        row["parts_stored"] = max(parts) - t_notice
        commits = [first(logs[n], "committed group snapshot", t_notice) for n in (1, 2, 3)]
        row["group_commit"] = min(c for c in commits if c) - t_notice
        answers = [first(logs[n], r"answers round \d+'s request", t_notice) for n in (1, 2, 3)]
        row["answer_named"] = min(a for a in answers if a) - t_notice
        row["noticed_exit"] = t_exit - t_notice

        t_join = time.time()
        start(4)
        deadline = time.time() + 300
        while time.time() < deadline and not first(logs[4], "starts at step", t_join):
            time.sleep(0.1)
        planned = [first(logs[n], r"round \d+ planned", t_join) for n in (1, 3, 4)]
        row["plan"] = min(p for p in planned if p) - t_join
        row["restored"] = first(logs[4], "restored rank", t_join) - t_join
        row["trainer_started"] = first(logs[4], r"round \d+: rank", t_join) - t_join
        row["first_step"] = first(logs[4], "starts at step", t_join) - t_join
        return row
    finally:
        for n, (p, log) in agents.items():
            if p.poll() is None:
                p.send_signal(signal.SIGKILL)
                p.wait()
            log.close()
        for p, _ in sims.values():
            p.kill()
            p.wait()


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--mib", type=int, default=64)
    ap.add_argument("--tsv", required=True)
    args = ap.parse_args()
    cols = ["trial", "mib_per_node", "detect", "others_asked", "parts_stored", "group_commit",
            "answer_named", "noticed_exit", "plan", "restored", "trainer_started", "first_step"]
    with open(args.tsv, "w") as out:
        out.write("\t".join(cols) + "\n")
        for t in range(1, args.trials + 1):
            row = trial(args, t, f"{args.store}/trial{t}")
            out.write("\t".join(f"{row[c]:.2f}" if isinstance(row[c], float) else str(row[c])
                                for c in cols) + "\n")
            out.flush()
            print(f"multi-node trial {t}: " + ", ".join(
                f"{c} {row[c]:.2f}" for c in cols[2:]), file=sys.stderr)


if __name__ == "__main__":
    main()
