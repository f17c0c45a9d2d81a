#!/usr/bin/env python3
"""A dependency-free trainer for trying spotguard: it "trains" by updating a
small vector of weights step by step, and follows the contract a real trainer
should follow under spotguard:

  * checkpoints are written atomically: to a temporary name in the same
    directory, fsynced, then renamed to step_<N>.ckpt (spotguard's pytorch and
    generic presets take files that are renamed in);
  * SIGUSR1 means "checkpoint now" (set checkpoint_signal: SIGUSR1); the
    checkpoint is written at the next step boundary;
  * SIGTERM stops it at once (the default action), as it stops most
    trainers; the newest checkpoint is the resume point. With
    --save-on-sigterm it saves a checkpoint first (the Lightning and Hugging
    Face convention);
  * with --save-on-notice it watches SPOTGUARD_NOTICE_FILE and saves a
    checkpoint once when the file appears (for checkpoint_signal: none);
  * --resume PATH (or SPOTGUARD_RESUME_FROM) continues from a checkpoint;
  * it exits 0 after --steps steps (the job is complete);
  * with --hold-at STEP --hold-file PATH it trains on past STEP only while
    PATH exists, or one step at a time when asked for a checkpoint: a
    rehearsal can interrupt it at a known step, however loaded the machine.

    simple_trainer.py --out DIR [--steps 200] [--step-seconds 0.05]
                      [--checkpoint-every 25] [--resume PATH]
                      [--fail-at STEP [--fail-attempts N]]
                      [--save-on-notice] [--save-on-sigterm]
                      [--hold-at STEP --hold-file PATH]

Each checkpoint is JSON: {"step": N, "weights": [...], "history": sha}. A
progress line per step goes to stdout ("step N loss X").
"""
import argparse
import hashlib
import json
import os
import signal
import sys
import time

checkpoint_requested = False
stop_requested = False


def on_usr1(signum, frame):
    global checkpoint_requested
    checkpoint_requested = True


def on_term(signum, frame):
    global stop_requested
    stop_requested = True


def save(out_dir, step, weights, history):
    os.makedirs(out_dir, exist_ok=True)
    final = os.path.join(out_dir, f"step_{step:06d}.ckpt")
    tmp = os.path.join(out_dir, f".tmp-step_{step:06d}.ckpt")
    with open(tmp, "w") as f:
        json.dump({"step": step, "weights": weights, "history": history}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    print(f"checkpoint {final}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--step-seconds", type=float, default=0.05)
    ap.add_argument("--checkpoint-every", type=int, default=25)
    ap.add_argument("--resume", default=os.environ.get("SPOTGUARD_RESUME_FROM", ""))
    ap.add_argument("--fail-at", type=int, default=-1, help="exit 1 at this step (crash test)")
    ap.add_argument("--fail-attempts", type=int, default=1_000_000,
                    help="only fail while SPOTGUARD_ATTEMPT is at most this")
    ap.add_argument("--save-on-notice", action="store_true",
                    help="save once when SPOTGUARD_NOTICE_FILE appears")
    ap.add_argument("--save-on-sigterm", action="store_true",
                    help="save a checkpoint on SIGTERM, then exit")
    ap.add_argument("--hold-at", type=int, default=-1,
                    help="from this step on, train only while --hold-file exists")
    ap.add_argument("--hold-file", default="")
    args = ap.parse_args()
    signal.signal(signal.SIGUSR1, on_usr1)
    if args.save_on_sigterm:
        signal.signal(signal.SIGTERM, on_term)
    notice_file = os.environ.get("SPOTGUARD_NOTICE_FILE", "") if args.save_on_notice else ""
    notice_seen = False

    step, weights, history = 0, [0.0] * 8, hashlib.sha256(b"start").hexdigest()
    if args.resume:
        path = args.resume
        if os.path.isdir(path):
            names = sorted(n for n in os.listdir(path) if n.startswith("step_"))
            path = os.path.join(path, names[-1]) if names else ""
        if path:
            with open(path) as f:
                state = json.load(f)
            step, weights, history = state["step"], state["weights"], state["history"]
            print(f"resumed from {path} at step {step}", flush=True)

    global checkpoint_requested
    while step < args.steps:
        if stop_requested:
            save(args.out, step, weights, history)
            print("saved on SIGTERM", flush=True)
            sys.exit(0)
        if notice_file and not notice_seen and os.path.exists(notice_file):
            notice_seen = True
            checkpoint_requested = True
            print("interruption notice seen", flush=True)
        held = (0 <= args.hold_at <= step and not checkpoint_requested
                and not os.path.exists(args.hold_file))
        if held:
            time.sleep(0.02)
            continue
        time.sleep(args.step_seconds)
        step += 1
        weights = [w + 0.01 * ((step * (i + 1)) % 7 - 3) for i, w in enumerate(weights)]
        history = hashlib.sha256(f"{history}:{step}".encode()).hexdigest()
        print(f"step {step} loss {1.0 / step:.5f}", flush=True)
        attempt = int(os.environ.get("SPOTGUARD_ATTEMPT", "1") or "1")
        if step == args.fail_at and attempt <= args.fail_attempts:
            print("simulated crash", flush=True)
            sys.exit(1)
        if checkpoint_requested or step % args.checkpoint_every == 0:
            checkpoint_requested = False
            save(args.out, step, weights, history)
    save(args.out, step, weights, history)
    print("training complete", flush=True)


if __name__ == "__main__":
    main()
