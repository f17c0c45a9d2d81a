#!/usr/bin/env python3
"""Recipe: a plain PyTorch training loop that answers spotguard.

Copy `save_checkpoint`, `resume_path` and spotguard_notice.py into your
trainer; the loop in main() shows where they go. The checkpoint is
step_<N>.pt, written to a temporary name, fsynced and renamed, so the
`pytorch` preset takes it only when whole (docs/checkpoints.md).

A config for it (`checkpoint_signal` is what CheckpointRequests listens to):
  {"preset": "pytorch", "checkpoint_signal": "SIGUSR1",
   "command": ["python3", "torch_loop.py", "--out", "{checkpoint_dir}"],
   "resume_args": ["--resume", "{resume}"]}

    torch_loop.py --out DIR [--steps 1000] [--save-every 0] [--step-seconds 0] [--resume PATH]

--save-every N also saves every N steps, as most training loops do; 0 saves
only when asked. --step-seconds stands in for a real model's step time.
"""
import argparse
import os
import sys
import time

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spotguard_notice import CheckpointRequests  # noqa: E402


def save_checkpoint(out_dir, step, state):
    """Saves `state` as out_dir/step_<step>.pt atomically; returns its path."""
    os.makedirs(out_dir, exist_ok=True)
    final = os.path.join(out_dir, f"step_{step}.pt")
    tmp = os.path.join(out_dir, f".step_{step}.pt.tmp")
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, final)
    return final


def resume_path(flag_value=""):
    """The checkpoint to resume from: --resume, else SPOTGUARD_RESUME_FROM
    (empty on a fresh start)."""
    return flag_value or os.environ.get("SPOTGUARD_RESUME_FROM", "")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--save-every", type=int, default=0)
    ap.add_argument("--step-seconds", type=float, default=0.0)
    ap.add_argument("--resume", default="")
    args = ap.parse_args()

    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = torch.nn.Linear(8, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.01)
    step = 0
    path = resume_path(args.resume)
    if path:
        state = torch.load(path)
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        step = state["step"]
        print(f"resumed from {path} at step {step}", flush=True)

    requests = CheckpointRequests()  # before the first step: no request is missed
    print(f"training from step {step}", flush=True)
    x = torch.randn(64, 8, generator=torch.Generator().manual_seed(1))
    y = x.sum(dim=1, keepdim=True)
    while step < args.steps:
        loss = torch.nn.functional.mse_loss(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        step += 1
        why = requests.due() or (args.save_every and step % args.save_every == 0 and "periodic")
        if why:
            saved = save_checkpoint(args.out, step, {"model": model.state_dict(),
                                                     "optimizer": opt.state_dict(), "step": step})
            print(f"checkpoint {saved} ({why})", flush=True)
        time.sleep(args.step_seconds)
    print(f"done at step {step}", flush=True)


if __name__ == "__main__":
    main()
