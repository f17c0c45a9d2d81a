#!/usr/bin/env python3
"""Writes checkpoints the way the Hugging Face transformers Trainer does.

Real behaviour mimicked (transformers.Trainer._save_checkpoint):
- each save goes to "<output_dir>/checkpoint-<global_step>/";
- inside it, in this order: the model (config.json, model.safetensors),
  training_args.bin, optimizer.pt, scheduler.pt, rng_state.pth, and last
  trainer_state.json (current releases); releases before about 4.30 wrote
  trainer_state.json before rng_state.pth (--order legacy);
- every file is written in place with open/write/close;
- transformers 4.36-4.37 wrote into "tmp-checkpoint-<step>/" and renamed the
  directory to "checkpoint-<step>/" at the end (--staging-rename);
- save_total_limit deletes the oldest checkpoint-* directories (rmtree)
  after a save (--save-total-limit).

Hold points: mid-model-S, before-state-S (all but trainer_state.json written,
current order), after-state-S (legacy order: trainer_state.json written,
rng_state.pth not yet), before-rename-S, after-S.
"""

import json
import os
import re
import shutil

import writer_common as wc


def main():
    p = wc.parser(__doc__)
    p.add_argument("--steps", required=True)
    p.add_argument("--order", choices=["current", "legacy"], default="current")
    p.add_argument("--staging-rename", action="store_true")
    p.add_argument("--save-total-limit", type=int, default=0)
    args = p.parse_args()
    holds = wc.Holds(args)
    os.makedirs(args.dir, exist_ok=True)
    for step in wc.steps(args.steps):
        final = os.path.join(args.dir, "checkpoint-%d" % step)
        out = os.path.join(args.dir, "tmp-checkpoint-%d" % step) if args.staging_rename else final
        os.makedirs(out, exist_ok=True)
        tag = "step%d" % step

        def put(name, data, mid=None):
            wc.write_file(os.path.join(out, name), data, args, holds, mid)

        def trainer_state():
            put("trainer_state.json",
                json.dumps({"global_step": step, "epoch": step / 100.0,
                            "log_history": []}, indent=2).encode())

        put("config.json", json.dumps({"model_type": "toy"}).encode())
        put("model.safetensors", wc.payload("model-" + tag, args.size), "mid-model-%d" % step)
        put("training_args.bin", wc.payload("args", 512))
        put("optimizer.pt", wc.payload("optim-" + tag, args.size * 2))
        put("scheduler.pt", wc.payload("sched-" + tag, 256))
        if args.order == "current":
            put("rng_state.pth", wc.payload("rng-" + tag, 1024))
            holds.at("before-state-%d" % step)
            trainer_state()
        else:
            trainer_state()
            holds.at("after-state-%d" % step)
            put("rng_state.pth", wc.payload("rng-" + tag, 1024), "mid-rng-%d" % step)
        if args.staging_rename:
            holds.at("before-rename-%d" % step)
            os.rename(out, final)
        if args.save_total_limit > 0:
            found = sorted(
                (int(m.group(1)), name) for name in os.listdir(args.dir)
                for m in [re.fullmatch(r"checkpoint-(\d+)", name)] if m)
            for _, name in found[:-args.save_total_limit]:
                shutil.rmtree(os.path.join(args.dir, name))
        holds.at("after-%d" % step)
    holds.done()


if __name__ == "__main__":
    main()
