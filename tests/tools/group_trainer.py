#!/usr/bin/env python3
"""A stand-in for one node of a multi-node trainer (no torch; stdlib only).

Each node counts steps and writes step_<step>.pt into its own checkpoint dir
every --save-every steps, holding its rank and a running sum that depends on
every step before it, so a resumed run ends with the same sums as an
uninterrupted one. The ranks of a real job agree on the step to save at (an
all-reduce); this one stands in for that by saving, when asked (SIGUSR1 or
the notice file), at the next multiple of --save-every, which every node
reaches. --steps N: exit 0 after step N, writing final.txt.
"""
import argparse, os, signal, sys, time

ap = argparse.ArgumentParser()
ap.add_argument("--steps", type=int, default=40)
ap.add_argument("--save-every", type=int, default=5)
ap.add_argument("--step-seconds", type=float, default=0.1)
ap.add_argument("--fail-at", type=int, default=-1, help="exit 3 at this step (rank given by --fail-rank)")
ap.add_argument("--fail-rank", type=int, default=0)
ap.add_argument("--fail-once-file", default="",
                help="fail only if this file is absent, and create it (one crash in all)")
ap.add_argument("--pad-mib", type=int, default=0,
                help="each checkpoint also holds this many MiB of incompressible bytes")
ap.add_argument("--api-key", default="",
                help="ignored: a secret in the command line, which no record may hold")
args = ap.parse_args()

rank = int(os.environ["SPOTGUARD_NODE_RANK"])
nnodes = int(os.environ["SPOTGUARD_NNODES"])
ckpt = os.environ["SPOTGUARD_CHECKPOINT_DIR"]
notice = os.environ.get("SPOTGUARD_NOTICE_FILE", "")
resume = os.environ.get("SPOTGUARD_RESUME_FROM", "")
asked = False

def on_usr1(signo, frame):
    global asked
    asked = True

signal.signal(signal.SIGUSR1, on_usr1)

step, total = 0, 0
if resume:
    with open(resume, "rb") as f:
        r, step, total = (int(x) for x in f.readline().split())
    if r != rank:
        print(f"rank {rank} was given rank {r}'s checkpoint", file=sys.stderr)
        sys.exit(4)
print(f"rank {rank} of {nnodes} starts at step {step} "
      f"(master {os.environ.get('MASTER_ADDR')}:{os.environ.get('MASTER_PORT')})", flush=True)

def save(at):
    tmp = os.path.join(ckpt, f".tmp_{at}")
    with open(tmp, "w") as f:
        f.write(f"{rank} {at} {total}\n")
    if args.pad_mib:
        # Padding after the first line: the resume reads that line only.
        with open(tmp, "ab") as f:
            for i in range(args.pad_mib):
                f.write(os.urandom(1 << 20))
    os.rename(tmp, os.path.join(ckpt, f"step_{at}.pt"))
    print(f"rank {rank} saved step {at}", flush=True)

while step < args.steps:
    step += 1
    total = (total * 31 + step * (rank + 1)) % 1000000007
    if step == args.fail_at and rank == args.fail_rank:
        if not (args.fail_once_file and os.path.exists(args.fail_once_file)):
            if args.fail_once_file:
                open(args.fail_once_file, "w").close()
            print(f"rank {rank} fails at step {step}", flush=True)
            sys.exit(3)
    if notice and os.path.exists(notice):
        asked = True
    if step % args.save_every == 0:
        save(step)
        asked = False
    time.sleep(args.step_seconds)
with open(os.path.join(ckpt, "final.txt"), "w") as f:
    f.write(f"{rank} {step} {total}\n")
if step % args.save_every != 0:
    save(step)
print(f"rank {rank} done at step {step}", flush=True)
