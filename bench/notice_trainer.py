#!/usr/bin/env python3
"""The trainer of the notice-to-commit benchmark (bench/sections/04-notice.sh).

    notice_trainer.py --out DIR --source FILE --times FILE [--step-seconds 0.1]

It "trains" in steps of --step-seconds and checkpoints only when asked:
SIGUSR1 (checkpoint_signal) makes it write a checkpoint at the next step
boundary, the way a real trainer finishes its step first. The checkpoint is
a copy of --source (a real torch.save file), written the way torch users do
it safely: to a hidden temporary name in DIR, fsynced, then renamed to
step_<N>.pt. SIGTERM ends it (the default action).

Every event is appended to --times as a JSON line with a wall-clock time
(time.time(), the clock the agent's log uses):
    {"event": "ready", "t": ..., "pid": ...}
    {"event": "signal", "t": ...}            SIGUSR1 arrived
    {"event": "written", "t": ..., "path": ..., "bytes": N, "t_start": ...}
"""
import argparse
import json
import os
import shutil
import signal
import time

requested = []


def on_usr1(signum, frame):
    requested.append(time.time())


def note(times_path, **fields):
    with open(times_path, "a") as f:
        f.write(json.dumps(fields) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--times", required=True)
    ap.add_argument("--step-seconds", type=float, default=0.1)
    args = ap.parse_args()
    signal.signal(signal.SIGUSR1, on_usr1)
    os.makedirs(args.out, exist_ok=True)
    note(args.times, event="ready", t=time.time(), pid=os.getpid())
    step = 0
    while True:
        time.sleep(args.step_seconds)
        step += 1
        if not requested:
            continue
        note(args.times, event="signal", t=requested.pop(0))
        start = time.time()
        final = os.path.join(args.out, "step_%06d.pt" % step)
        tmp = os.path.join(args.out, ".tmp-step_%06d.pt" % step)
        with open(args.source, "rb") as src, open(tmp, "wb") as dst:
            shutil.copyfileobj(src, dst, 8 << 20)
            dst.flush()
            os.fsync(dst.fileno())
        os.rename(tmp, final)
        note(args.times, event="written", t=time.time(), t_start=start, path=final,
             bytes=os.path.getsize(final))
        print("checkpoint %s" % final, flush=True)


if __name__ == "__main__":
    main()
