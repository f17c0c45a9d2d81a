#!/usr/bin/env python3
"""A real PyTorch trainer (Debian's python3-torch) following spotguard's
contract, for the `pytorch` preset:

  * every --checkpoint-every steps, and at the next step after SIGUSR1, it saves
    {"model", "optimizer" (Adam), "step"} with torch.save to a temporary name
    in --out, fsyncs it and renames it to step_<N>.pt: the pytorch preset
    takes files that are renamed in (or closed and left alone);
  * --resume PATH (spotguard passes it through resume_args, or the trainer
    reads SPOTGUARD_RESUME_FROM) restores model and optimizer and continues
    at the saved step;
  * it exits 0 after --steps steps.

    torch_trainer.py --out DIR [--steps 300] [--width 256] [--checkpoint-every 50]
                     [--resume PATH]

A spotguard config for it:
  {"preset": "pytorch", "checkpoint_signal": "SIGUSR1",
   "command": ["python3", "examples/torch_trainer.py", "--out", "{checkpoint_dir}"],
   "resume_args": ["--resume", "{resume}"]}
"""
import argparse
import os
import signal

import torch

checkpoint_requested = False


def on_usr1(signum, frame):
    global checkpoint_requested
    checkpoint_requested = True


def save(out_dir, step, model, opt):
    os.makedirs(out_dir, exist_ok=True)
    final = os.path.join(out_dir, f"step_{step}.pt")
    tmp = os.path.join(out_dir, f".step_{step}.pt.tmp")
    with open(tmp, "wb") as f:
        torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step}, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    print(f"checkpoint {final}", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--width", type=int, default=256)
    ap.add_argument("--checkpoint-every", type=int, default=50)
    ap.add_argument("--resume", default=os.environ.get("SPOTGUARD_RESUME_FROM", ""))
    args = ap.parse_args()
    signal.signal(signal.SIGUSR1, on_usr1)
    torch.manual_seed(0)
    torch.set_num_threads(1)

    model = torch.nn.Sequential(torch.nn.Linear(16, args.width), torch.nn.ReLU(),
                                torch.nn.Linear(args.width, 1))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    step = 0
    if args.resume:
        state = torch.load(args.resume)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
        print(f"resumed from {args.resume} at step {step}", flush=True)

    # A fixed regression task, so the loss goes down across restarts.
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(512, 16, generator=gen)
    y = x.sum(dim=1, keepdim=True).sin()
    global checkpoint_requested
    saved = step
    while step < args.steps:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        if step % 10 == 0:
            print(f"step {step} loss {loss.item():.5f}", flush=True)
        if checkpoint_requested or step % args.checkpoint_every == 0:
            checkpoint_requested = False
            save(args.out, step, model, opt)
            saved = step
    if saved != step:
        save(args.out, step, model, opt)
    print("training complete", flush=True)


if __name__ == "__main__":
    main()
