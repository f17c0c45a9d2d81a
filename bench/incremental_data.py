"""Checkpoint series for bench section 11 (incremental snapshots), made with
Debian's python3-torch: N consecutive checkpoints of one training run, each
in OUT/<set>/step-NN/, written the way trainers write them (torch.save of
state dicts, a small trainer_state.json). Training is simulated: every step
moves each trainable tensor and its Adam moments by a small random update,
so what changes between checkpoints is exactly what a real run changes.

  /usr/bin/python3 bench/incremental_data.py OUT SET STEPS SCALE

SET is one of:
  lora          a frozen base model (base_model.pt, re-saved every step as
                trainers that save the whole model do) and LoRA adapters
                with their optimizer state (adapter.pt)
  lora-onefile  the same model saved as one state dict (base and adapter
                tensors of each layer interleaved, as model.state_dict()
                orders them): shows what 8 MiB frames can and cannot share
  frozen-emb    a model whose embedding table is frozen and whose layers
                train (model.pt, embedding first), and the optimizer state of
                the trainable part (optimizer.pt)
  full          a full fine-tune: every tensor and its optimizer state change
SCALE multiplies the sizes (1.0: a base of about 256 MiB).
"""
import json
import os
import sys

import torch


def tensor(gen, *shape):
    return torch.randn(*shape, generator=gen) * 0.02


def step_update(gen, tensors, scale=1e-3):
    for t in tensors.values():
        t.add_(torch.randn(t.shape, generator=gen) * scale)


def adam_state(gen, params):
    return {k: {"exp_avg": tensor(gen, *v.shape) * 0.1, "exp_avg_sq": tensor(gen, *v.shape).abs() * 0.01}
            for k, v in params.items()}


def main():
    out, which, steps, scale = sys.argv[1], sys.argv[2], int(sys.argv[3]), float(sys.argv[4])
    gen = torch.Generator().manual_seed(21)
    d = 1024
    layers = max(1, int(round(64 * scale)))  # 64 layers of 1024x1024 fp32 = 256 MiB
    root = os.path.join(out, which)
    os.makedirs(root, exist_ok=True)

    if which in ("lora", "lora-onefile"):
        base = {f"layers.{i}.weight": tensor(gen, d, d) for i in range(layers)}
        # Rank 8 on every fourth matrix (the attention q and v of a block of
        # q, k, v, o and MLP matrices, roughly): about 0.4% of the base.
        rank = 8
        adapter = {}
        for i in range(0, layers, 4):
            adapter[f"layers.{i}.lora_A"] = tensor(gen, rank, d)
            adapter[f"layers.{i}.lora_B"] = torch.zeros(d, rank)
        opt = adam_state(gen, adapter)
        trainable = {**adapter, **{f"{k}.{m}": v for k, s in opt.items() for m, v in s.items()}}
    elif which == "frozen-emb":
        vocab = max(1024, int(32000 * scale))
        emb = {"embed.weight": tensor(gen, vocab, d)}  # ~125 MiB at scale 1
        body = {f"layers.{i}.weight": tensor(gen, d, d) for i in range(layers // 4)}
        opt = adam_state(gen, body)
        trainable = {**body, **{f"{k}.{m}": v for k, s in opt.items() for m, v in s.items()}}
    elif which == "full":
        body = {f"layers.{i}.weight": tensor(gen, d, d) for i in range(layers // 4)}
        opt = adam_state(gen, body)
        trainable = {**body, **{f"{k}.{m}": v for k, s in opt.items() for m, v in s.items()}}
    else:
        sys.exit(f"unknown set {which}")

    for step in range(1, steps + 1):
        step_update(gen, trainable)
        d_out = os.path.join(root, f"step-{step:02d}")
        os.makedirs(d_out, exist_ok=True)
        if which == "lora":
            torch.save(base, os.path.join(d_out, "base_model.pt"))
            torch.save({"adapter": adapter, "optimizer": opt}, os.path.join(d_out, "adapter.pt"))
        elif which == "lora-onefile":
            state = {}
            for i in range(layers):
                state[f"layers.{i}.weight"] = base[f"layers.{i}.weight"]
                if f"layers.{i}.lora_A" in adapter:
                    state[f"layers.{i}.lora_A"] = adapter[f"layers.{i}.lora_A"]
                    state[f"layers.{i}.lora_B"] = adapter[f"layers.{i}.lora_B"]
            torch.save(state, os.path.join(d_out, "model.pt"))
            torch.save(opt, os.path.join(d_out, "optimizer.pt"))
        elif which == "frozen-emb":
            torch.save({**emb, **body}, os.path.join(d_out, "model.pt"))
            torch.save(opt, os.path.join(d_out, "optimizer.pt"))
        else:
            torch.save(body, os.path.join(d_out, "model.pt"))
            torch.save(opt, os.path.join(d_out, "optimizer.pt"))
        with open(os.path.join(d_out, "trainer_state.json"), "w") as f:
            json.dump({"global_step": step * 100, "set": which}, f)


if __name__ == "__main__":
    main()
