#!/usr/bin/env python3
"""Notice to commit through the agent for bench section 11 (incremental
snapshots): what frame reuse saves inside a two-minute notice.

For one data set of bench/incremental_data.py (OUT/<set>/step-01 ... step-NN),
with reuse on and off:
  1. steps 1 .. N-1 are stored with `spotguard snapshot` (not timed), as the
     periodic snapshots of a run;
  2. `spotguard run` starts on an empty checkpoint dir (an IMDS simulator,
     `checkpoint_signal: none`): it restores step N-1 and starts the trainer
     below, which waits for SPOTGUARD_NOTICE_FILE;
  3. a spot notice is posted; the trainer answers by saving step N (its
     files written into a hidden directory renamed to step_N, as trainers
     save), and the agent commits it and exits 75.
The agent's own figure is recorded ("interrupted: snapshot ... committed in
X s from the notice"), with the new stored bytes of that snapshot.

    incremental_notice.py --sg BIN --store s3://B/P --endpoint URL --data DIR
                          --set NAME --steps N --work DIR --tsv OUT.tsv
    incremental_notice.py --trainer CKPT_DIR SOURCE_DIR   (the trainer)
"""
import argparse, json, os, re, shutil, subprocess, sys, time, urllib.request

from agent_run import start_imds

COMMITTED = re.compile(r"interrupted: snapshot \S+ committed in ([0-9.]+)s from the notice")


def trainer(ckpt, source):
    """Waits for the notice file, then saves `source`'s files as one
    checkpoint: a hidden directory renamed to ckpt/step_N (the generic
    preset takes the files below a directory named for a step as one
    checkpoint, docs/checkpoints.md)."""
    notice = os.environ["SPOTGUARD_NOTICE_FILE"]
    while not os.path.exists(notice):
        time.sleep(0.05)
    step = int(os.path.basename(source.rstrip("/")).split("-")[-1])
    tmp = os.path.join(ckpt, f".tmp-step_{step}")
    os.makedirs(tmp)
    for name in sorted(os.listdir(source)):
        shutil.copyfile(os.path.join(source, name), os.path.join(tmp, name))
        with open(os.path.join(tmp, name), "rb+") as f:
            os.fsync(f.fileno())
    os.rename(tmp, os.path.join(ckpt, f"step_{step}"))
    print("saved", source, flush=True)
    while True:
        time.sleep(1)  # until the agent stops it


def wait_for(path, text, seconds):
    deadline = time.time() + seconds
    while time.time() < deadline:
        with open(path, errors="replace") as f:
            if text in f.read():
                return
        time.sleep(0.1)
    raise RuntimeError(f"no {text!r} in {path} within {seconds} s")


def run(args, reuse):
    job = f"{args.set}-notice-{reuse}"
    env = dict(os.environ, SPOTGUARD_CONFIG="", SPOTGUARD_REUSE=reuse, SPOTGUARD_LOG_LEVEL="warn")
    # bench/gateway.sh keeps awscli off the metadata service; the agent must
    # read the simulator's notice.
    env.pop("AWS_EC2_METADATA_DISABLED", None)
    steps = [os.path.join(args.data, args.set, f"step-{k:02d}") for k in range(1, args.steps + 1)]
    for d in steps[:-1]:
        subprocess.run([args.sg, "snapshot", "--job", job, "--store", args.store,
                        "--endpoint", args.endpoint, "--dir", d],
                       check=True, stdout=subprocess.DEVNULL, env=env)
    work = os.path.join(args.work, job)
    shutil.rmtree(work, ignore_errors=True)
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt)
    sim, imds = start_imds(work)
    log_path = os.path.join(work, "agent.log")
    try:
        cfg = {"job": job, "store": args.store, "endpoint": args.endpoint, "checkpoint_dir": ckpt,
               "preset": "generic", "checkpoint_signal": "none", "reuse": reuse,
               "imds": {"endpoint": imds, "poll_interval": "1s"},
               "command": [sys.executable, os.path.abspath(__file__), "--trainer", ckpt, steps[-1]]}
        cfg_path = os.path.join(work, "agent.json")
        with open(cfg_path, "w") as f:
            json.dump(cfg, f)
        env["SPOTGUARD_LOG_LEVEL"] = "info"
        with open(log_path, "w") as log:
            agent = subprocess.Popen([args.sg, "run", "-c", cfg_path], stdout=log,
                                     stderr=subprocess.STDOUT, env=env)
            try:
                wait_for(log_path, "started the trainer", 600)
                req = urllib.request.Request(
                    imds + "/_sim/spot-notice",
                    data=json.dumps({"action": "terminate", "in_seconds": 120}).encode(),
                    method="POST")
                urllib.request.urlopen(req, timeout=10).read()
                code = agent.wait(timeout=200)
            finally:
                if agent.poll() is None:
                    agent.kill()
                    agent.wait()
        if code != 75:
            raise RuntimeError(f"the agent exited {code}, not 75; see {log_path}")
        with open(log_path, errors="replace") as f:
            m = COMMITTED.search(f.read())
        if not m:
            raise RuntimeError(f"no commit after the notice in {log_path}")
        ls = subprocess.run([args.sg, "ls", "--json", "--job", job, "--store", args.store,
                             "--endpoint", args.endpoint], check=True, capture_output=True,
                            env=env, text=True)
        newest = json.loads(ls.stdout)[0]
        return {"set": args.set, "reuse": reuse, "notice_to_commit": float(m.group(1)),
                "new_stored": int(newest["new_stored_size"]),
                "stored": int(newest["stored_size"])}
    finally:
        sim.kill()
        sim.wait()


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--trainer":
        trainer(sys.argv[2], sys.argv[3])
        return
    ap = argparse.ArgumentParser()
    for a in ("--sg", "--store", "--endpoint", "--data", "--set", "--work", "--tsv"):
        ap.add_argument(a, required=True)
    ap.add_argument("--steps", type=int, default=10)
    args = ap.parse_args()
    new = not os.path.exists(args.tsv)
    with open(args.tsv, "a") as out:
        if new:
            out.write("set\treuse\tnotice_to_commit\tnew_stored\tstored\n")
        for reuse in ("on", "off"):
            row = run(args, reuse)
            out.write(f"{row['set']}\t{reuse}\t{row['notice_to_commit']:.2f}\t{row['new_stored']}\t"
                      f"{row['stored']}\n")
            out.flush()
            print(f"incremental notice {args.set} reuse {reuse}: committed in "
                  f"{row['notice_to_commit']:.2f} s, {row['new_stored']} new of {row['stored']} "
                  "stored bytes", file=sys.stderr)


if __name__ == "__main__":
    main()
