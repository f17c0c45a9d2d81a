#!/usr/bin/env python3
"""A trainer for the crash trials: every --every seconds it takes one step
and writes step_<N>.ckpt atomically (temporary name, fsync, rename), creating
--out again if it was deleted. The bytes of step N are fixed by N alone, so a
test can tell whether a restored file is exactly what the trainer wrote:

    b"spotguard-crash-trainer step=<N>\\n" followed by
    SHA-256("<N>:0") SHA-256("<N>:1") ... (raw digests) up to --mib MiB

    crash_trainer.py --out DIR [--mib 3] [--every 0.3] [--resume PATH]

--resume (a checkpoint file, or a directory holding them) continues from the
step in its header and prints "resumed from PATH at step N".
"""
import argparse
import hashlib
import os
import sys
import time


def checkpoint_bytes(step, size):
    out = bytearray(f"spotguard-crash-trainer step={step}\n".encode())
    i = 0
    while len(out) < size:
        out += hashlib.sha256(f"{step}:{i}".encode()).digest()
        i += 1
    return bytes(out[:size])


def save(out_dir, step, size):
    os.makedirs(out_dir, exist_ok=True)
    final = os.path.join(out_dir, f"step_{step:06d}.ckpt")
    tmp = os.path.join(out_dir, f".tmp-step_{step:06d}.ckpt")
    with open(tmp, "wb") as f:
        f.write(checkpoint_bytes(step, size))
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    print(f"checkpoint {final}", flush=True)


def resume_step(path):
    if os.path.isdir(path):
        names = sorted(n for n in os.listdir(path) if n.startswith("step_"))
        if not names:
            return 0, path
        path = os.path.join(path, names[-1])
    with open(path, "rb") as f:
        header = f.readline().decode()
    prefix = "spotguard-crash-trainer step="
    if not header.startswith(prefix):
        sys.exit(f"{path} is not a crash-trainer checkpoint")
    step = int(header[len(prefix):])
    if open(path, "rb").read() != checkpoint_bytes(step, os.path.getsize(path)):
        sys.exit(f"{path} is damaged")
    return step, path


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--mib", type=float, default=3)
    ap.add_argument("--every", type=float, default=0.3)
    ap.add_argument("--resume", default=os.environ.get("SPOTGUARD_RESUME_FROM", ""))
    args = ap.parse_args()
    size = int(args.mib * (1 << 20))
    step = 0
    if args.resume:
        step, path = resume_step(args.resume)
        print(f"resumed from {path} at step {step}", flush=True)
    while True:
        time.sleep(args.every)
        step += 1
        save(args.out, step, size)


if __name__ == "__main__":
    main()
