#!/usr/bin/env python3
"""Writes checkpoints the way PyTorch Lightning's ModelCheckpoint does.

Real behaviour mimicked (lightning.pytorch.callbacks.ModelCheckpoint,
lightning.fabric.utilities.cloud_io._atomic_save):
- top-k files are named "epoch={epoch}-step={step}.ckpt" (the default
  filename "{epoch}-{step}" with auto_insert_metric_name);
- a save serializes the whole checkpoint into memory and then writes it to the
  final path in place (open "wb", write, close); releases before 1.0 wrote
  "<path>.part" and renamed it (--legacy-part);
- only improving steps are saved as top-k (--improving); with save_top_k=K the
  worst older top-k files are deleted after the new one is written;
- save_last=True then writes "last.ckpt" as a full second save after the
  top-k one; save_last="link" instead replaces last.ckpt with a relative
  symlink to the top-k file just saved (and makes a full save when no top-k
  file was saved).

Hold points: mid-topk-S, after-topk-S, mid-last-S, after-S; with
--legacy-part also part-written-topk-S and part-written-last-S (the ".part"
file complete, not yet renamed).
"""

import os

import writer_common as wc


def save(path, data, args, holds, label):
    if args.legacy_part:
        wc.write_file(path + ".part", data, args, holds, "mid-" + label)
        holds.at("part-written-" + label)
        os.replace(path + ".part", path)
    else:
        wc.write_file(path, data, args, holds, "mid-" + label)


def main():
    p = wc.parser(__doc__)
    p.add_argument("--steps", required=True)
    p.add_argument("--steps-per-epoch", type=int, default=100)
    p.add_argument("--improving", help="steps whose metric improved (default: all)")
    p.add_argument("--top-k", type=int, default=1)
    p.add_argument("--save-last", choices=["true", "link", "false"], default="true")
    p.add_argument("--legacy-part", action="store_true")
    args = p.parse_args()
    holds = wc.Holds(args)
    all_steps = wc.steps(args.steps)
    improving = set(wc.steps(args.improving)) if args.improving else set(all_steps)
    topk = []  # oldest first; every save improved, so the oldest is the worst
    os.makedirs(args.dir, exist_ok=True)
    last = os.path.join(args.dir, "last.ckpt")
    for step in all_steps:
        data = wc.payload("step%d" % step, args.size)
        saved = None
        if step in improving:
            # global_step counts finished steps: step 100 ends epoch 0.
            name = "epoch=%d-step=%d.ckpt" % ((step - 1) // args.steps_per_epoch, step)
            save(os.path.join(args.dir, name), data, args, holds, "topk-%d" % step)
            topk.append(name)
            while len(topk) > args.top_k:
                os.remove(os.path.join(args.dir, topk.pop(0)))
            saved = name
            holds.at("after-topk-%d" % step)
        if args.save_last == "link" and saved:
            if os.path.lexists(last):
                os.remove(last)
            os.symlink(saved, last)
        elif args.save_last != "false":
            if os.path.islink(last):
                os.remove(last)
            save(last, data, args, holds, "last-%d" % step)
        holds.at("after-%d" % step)
    holds.done()


if __name__ == "__main__":
    main()
