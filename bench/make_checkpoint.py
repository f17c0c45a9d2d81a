#!/usr/bin/env python3
"""Writes a realistic training checkpoint for the snapshot benchmark.

    make_checkpoint.py OUT_DIR [--params-millions 90] [--steps 3]

Trains a small MLP with Adam for a few steps on random data (so the weights
have moved and the optimizer state is non-zero), then saves what training
scripts save with torch.save:
  OUT_DIR/checkpoint.pt       {"model": fp32 state dict, "optimizer": Adam state, "step": N}
  OUT_DIR/model_bf16.pt       the same weights as bfloat16 (an inference copy)
With the default size the two files together are about 1 GiB.
"""
import argparse
import os

import torch


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--params-millions", type=float, default=80.0)
    ap.add_argument("--steps", type=int, default=3)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)

    width = 4096
    layers = max(1, int(args.params_millions * 1e6 / (width * width)))
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(width, 16))
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    for step in range(args.steps):
        x = torch.randn(32, width)
        y = torch.randint(0, 16, (32,))
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()

    os.makedirs(args.out_dir, exist_ok=True)
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": args.steps},
               os.path.join(args.out_dir, "checkpoint.pt"))
    bf16 = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    torch.save(bf16, os.path.join(args.out_dir, "model_bf16.pt"))
    params = sum(p.numel() for p in model.parameters())
    print(f"make_checkpoint: {params / 1e6:.1f}M parameters, {layers} hidden layers")


if __name__ == "__main__":
    main()
