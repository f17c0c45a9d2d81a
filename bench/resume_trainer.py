#!/usr/bin/env python3
"""The trainer of bench section 14 (time to resume): loads its checkpoint the
way a trainer does (reads every file under the checkpoint dir once), then
records the time of its first step and exits 0, which completes the job.

    resume_trainer.py CHECKPOINT_DIR FIRST_STEP_FILE
"""
import os, sys, time


def main():
    ckpt, out = sys.argv[1], sys.argv[2]
    started = time.time()
    loaded = 0
    for root, _, files in os.walk(ckpt):
        for name in files:
            with open(os.path.join(root, name), "rb") as f:
                while True:
                    chunk = f.read(8 << 20)
                    if not chunk:
                        break
                    loaded += len(chunk)
    with open(out, "w") as f:
        f.write(f"{started:.6f} {time.time():.6f} {loaded}\n")


if __name__ == "__main__":
    main()
