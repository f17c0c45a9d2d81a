#!/usr/bin/env python3
"""Section 14 of bench/run.sh: time to resume on a replacement instance, from
`spotguard run` starting on an empty disk to the trainer's first step, with
the restore broken out.

For each data set and trial, the set is stored with `spotguard snapshot` as
a job of its own (not timed). The trial then starts an IMDS simulator and `spotguard run` on an
empty checkpoint dir with the page cache dropped; the agent takes the lease,
restores the newest snapshot and starts bench/resume_trainer.py, which reads
every restored file (a trainer loading its checkpoint) and writes the time of
its first step. The phases come from the agent's own log lines (their UTC
timestamps; one machine, one clock) and the trainer's file.

    resume_bench.py --sg BIN --work DIR --store s3://B/P --endpoint URL
                    --set NAME=DIR [--set ...] [--trials N] --tsv OUT.tsv
"""
import argparse, json, os, re, shutil, subprocess, sys, time

from agent_run import stamp_of, start_imds

HERE = os.path.dirname(os.path.abspath(__file__))
RESTORED = re.compile(r"restored snapshot \S+ \(.*\) in ([0-9.]+) s")


def find(path, rx):
    """(time, match) of the first line of `path` matching `rx`."""
    with open(path, errors="replace") as f:
        for line in f:
            m = rx.search(line)
            t = stamp_of(line)
            if m and t is not None:
                return t, m
    raise RuntimeError(f"no line matching {rx.pattern!r} in {path}")


def dir_bytes(path):
    return sum(os.path.getsize(os.path.join(r, f)) for r, _, fs in os.walk(path) for f in fs)


def drop_caches():
    subprocess.run(["sync"], check=True)
    try:
        with open("/proc/sys/vm/drop_caches", "w") as f:
            f.write("3\n")
    except OSError:
        print("resume_bench: WARNING: cannot drop the page cache", file=sys.stderr)


def trial(args, name, job, t):
    work = os.path.join(args.work, f"{name}-{t}")
    shutil.rmtree(work, ignore_errors=True)
    ckpt = os.path.join(work, "ckpt")
    os.makedirs(ckpt)
    first_step = os.path.join(work, "first-step")
    sim, imds = start_imds(work)
    try:
        cfg = {"job": job, "store": args.store, "endpoint": args.endpoint,
               "checkpoint_dir": ckpt, "preset": "generic",
               "imds": {"endpoint": imds},
               "command": [sys.executable, os.path.join(HERE, "resume_trainer.py"), ckpt,
                           first_step]}
        path = os.path.join(work, "agent.json")
        with open(path, "w") as f:
            json.dump(cfg, f)
        log_path = os.path.join(work, "agent.log")
        env = dict(os.environ, SPOTGUARD_CONFIG="", SPOTGUARD_LOG_LEVEL="info")
        env.pop("AWS_EC2_METADATA_DISABLED", None)  # set by bench/gateway.sh for awscli
        drop_caches()
        with open(log_path, "w") as log:
            t0 = time.time()
            code = subprocess.run([args.sg, "run", "-c", path], stdout=log,
                                  stderr=subprocess.STDOUT, env=env, timeout=900).returncode
        if code != 0:
            raise RuntimeError(f"spotguard run exited {code}; see {log_path}")
        restored_at, m = find(log_path, RESTORED)
        restore_s = float(m.group(1))
        trainer_at, _ = find(log_path, re.compile(r"started the trainer"))
        with open(first_step) as f:
            loaded_from, stepped_at, loaded = f.read().split()
        return {"set": name, "trial": t, "loaded_bytes": int(loaded),
                "to_restore": restored_at - restore_s - t0, "restore": restore_s,
                "to_trainer": trainer_at - restored_at,
                "load": float(stepped_at) - float(loaded_from),
                "total": float(stepped_at) - t0}
    finally:
        sim.kill()
        sim.wait()
        shutil.rmtree(ckpt, ignore_errors=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sg", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--store", required=True)
    ap.add_argument("--endpoint", required=True)
    ap.add_argument("--set", action="append", required=True, help="NAME=DIR")
    ap.add_argument("--trials", type=int, default=2)
    ap.add_argument("--tsv", required=True)
    args = ap.parse_args()
    cols = ["set", "trial", "loaded_bytes", "to_restore", "restore", "to_trainer", "load", "total"]
    env = dict(os.environ, SPOTGUARD_LOG_LEVEL="warn")
    with open(args.tsv, "w") as out:
        out.write("\t".join(cols) + "\n")
        for spec in args.set:
            name, src = spec.split("=", 1)
            for t in range(1, args.trials + 1):
                # A job of its own per trial: the first trial's job is complete
                # once its trainer exits 0, and a complete job restores nothing.
                job = f"resume-{name}-{t}"
                subprocess.run([args.sg, "snapshot", "--job", job, "--store", args.store,
                                "--endpoint", args.endpoint, "--dir", src],
                               check=True, stdout=subprocess.DEVNULL, env=env)
                try:
                    row = trial(args, name, job, t)
                finally:
                    # The gateway keeps every object in RAM: each trial's job
                    # goes before the next is stored, and a large one is given
                    # the time its garbage collector needs (as bench_s3_rm).
                    subprocess.run(["/usr/bin/aws", "--endpoint-url", args.endpoint, "s3", "rm",
                                    "--recursive", "--only-show-errors", f"{args.store}/{job}/"],
                                   stdout=subprocess.DEVNULL)
                    if dir_bytes(src) > (1 << 30):
                        time.sleep(25)
                out.write("\t".join(f"{row[c]:.3f}" if isinstance(row[c], float) else str(row[c])
                                    for c in cols) + "\n")
                out.flush()
                print(f"resume {name} trial {t}: " + ", ".join(
                    f"{c} {row[c]:.2f}" for c in cols[3:]), file=sys.stderr)


if __name__ == "__main__":
    main()
