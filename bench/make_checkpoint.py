#!/usr/bin/env python3
"""Writes realistic training checkpoints for the benchmarks (bench/run.sh).

    make_checkpoint.py OUT_DIR [--target-mib N | --params-millions M] [--steps S]
                       [--layout torch|shards] [--batch B]

Trains an MLP (GELU, square hidden layers) with Adam (lr 1e-4) for S real
steps of batch B (default 8: Debian's CPU-only torch uses a generic BLAS, so
large batches are slow) on a fixed synthetic training set (labels from a
random "teacher"), so the loss falls and the weights and the optimizer moments
are those of a model that is learning; then saves it. It prints the mean loss
of the first and of the last 5 steps.

--layout torch (default), what single-process trainers write with torch.save:
  OUT_DIR/checkpoint.pt    {"model": fp32 state dict, "optimizer": Adam state, "step": S}
  OUT_DIR/model_bf16.pt    the same weights as bfloat16 (an inference copy)
  about 14 bytes per parameter (4 fp32 weights, 8 Adam moments, 2 bf16).

--layout shards, a sharded checkpoint of many small files (as distributed
checkpointing writes): the fp32 weights and both Adam moments, laid end to
end and cut into pieces of 16 KiB to 1 MiB (log-uniform, fixed seed), each
piece a torch.save file OUT_DIR/rank_R/shard_NNNNN.pt holding a copy of its
tensor slice, plus OUT_DIR/index.json naming them. About 12 bytes per parameter.

--target-mib sizes the model so the files add up to about N MiB; without it,
--params-millions gives the model size (default 80, about 1 GiB with torch).
"""
import argparse
import json
import math
import os
import random
import time

import torch

BYTES_PER_PARAM = {"torch": 14, "shards": 12}


def shape_for(params):
    """Hidden layers and width for about `params` parameters in square layers."""
    layers = max(2, math.ceil(params / (4096 * 4096)))
    width = max(64, int(math.sqrt(params / layers)) // 64 * 64)
    return layers, width


def train(layers, width, steps, batch):
    blocks = []
    for _ in range(layers):
        blocks += [torch.nn.Linear(width, width), torch.nn.GELU()]
    model = torch.nn.Sequential(*blocks, torch.nn.Linear(width, 16))
    # A fixed training set of 64 examples labelled by a random teacher: small
    # enough that a few dozen steps visibly lower the loss.
    teacher = torch.randn(width, 16) / math.sqrt(width)
    xs = torch.randn(64, width)
    ys = (xs @ teacher).argmax(dim=1)
    opt = torch.optim.Adam(model.parameters(), lr=1e-4)
    losses = []
    for step in range(steps):
        i = step * batch % len(xs)
        x, y = xs[i:i + batch], ys[i:i + batch]
        loss = torch.nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    k = min(5, len(losses))
    return model, opt, sum(losses[:k]) / k, sum(losses[-k:]) / k


def write_torch(out_dir, model, opt, steps):
    torch.save({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": steps},
               os.path.join(out_dir, "checkpoint.pt"))
    bf16 = {k: v.to(torch.bfloat16) for k, v in model.state_dict().items()}
    torch.save(bf16, os.path.join(out_dir, "model_bf16.pt"))


def write_shards(out_dir, model, opt):
    params = list(model.parameters())
    pieces = [p.detach().reshape(-1) for p in params]
    for kind in ("exp_avg", "exp_avg_sq"):
        pieces += [opt.state[p][kind].reshape(-1) for p in params]
    flat = torch.cat(pieces)
    rng = random.Random(0)
    index = []
    pos = 0
    ranks = 8
    while pos < flat.numel():
        size = int(math.exp(rng.uniform(math.log(16 << 10), math.log(1 << 20))))
        count = min(max(1, size // 4), flat.numel() - pos)
        rank = len(index) % ranks
        name = f"rank_{rank}/shard_{len(index):05d}.pt"
        os.makedirs(os.path.join(out_dir, f"rank_{rank}"), exist_ok=True)
        # clone(): saving a view would save the whole underlying storage.
        torch.save({"offset": pos, "tensor": flat[pos:pos + count].clone()},
                   os.path.join(out_dir, name))
        index.append({"file": name, "offset": pos, "numel": count})
        pos += count
    with open(os.path.join(out_dir, "index.json"), "w", encoding="utf-8") as f:
        json.dump({"dtype": "float32", "numel": flat.numel(), "shards": index}, f)
    return len(index)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_dir")
    ap.add_argument("--params-millions", type=float, default=80.0)
    ap.add_argument("--target-mib", type=float, default=None)
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--layout", choices=("torch", "shards"), default="torch")
    ap.add_argument("--batch", type=int, default=8)
    args = ap.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(os.cpu_count() or 1)

    if args.target_mib is not None:
        params = args.target_mib * (1 << 20) / BYTES_PER_PARAM[args.layout]
    else:
        params = args.params_millions * 1e6
    layers, width = shape_for(params)
    t0 = time.monotonic()
    model, opt, first, last = train(layers, width, args.steps, args.batch)
    trained = time.monotonic() - t0
    os.makedirs(args.out_dir, exist_ok=True)
    if args.layout == "torch":
        write_torch(args.out_dir, model, opt, args.steps)
        files = 2
    else:
        files = write_shards(args.out_dir, model, opt) + 1
    total = sum(p.numel() for p in model.parameters())
    print(f"make_checkpoint: {args.layout}: {total / 1e6:.1f}M parameters ({layers} hidden layers of "
          f"{width}), {args.steps} Adam steps in {trained:.0f} s, loss {first:.2f} -> {last:.2f}, "
          f"{files} files")


if __name__ == "__main__":
    main()
