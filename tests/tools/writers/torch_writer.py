#!/usr/bin/env python3
"""Writes checkpoints the way PyTorch training scripts save them.

Real behaviour mimicked:
- torch.save(obj, path) opens `path` for writing and streams the zip archive
  into it in place (no temporary name), then closes it (style "inplace");
- the common safe pattern torch.save(obj, path + ".tmp"); os.replace(tmp, path)
  (style "rename"), which leaves a complete file under a temporary name for a
  moment and then renames it into place;
- scripts that close the file and open it again to append (metadata, a
  second object), so a close is not yet the end (style "reopen");
- names from a format such as "step_{step}.pt", "model_iter_{step}.pth",
  "epoch={epoch}-step={step}.pt", or a fixed "last.pt" rewritten each time.

Hold points: mid-S (file open, partly written), before-rename-S (temporary
file complete), reopen-gap-S (closed once, to be reopened), after-S.
"""

import os
import time

import writer_common as wc


def main():
    p = wc.parser(__doc__)
    p.add_argument("--steps", required=True)
    p.add_argument("--name", default="step_{step}.pt", help="format with {step} and {epoch}")
    p.add_argument("--steps-per-epoch", type=int, default=100)
    p.add_argument("--style", choices=["inplace", "rename", "reopen"], default="inplace")
    p.add_argument("--gap", type=float, default=0.0, help="reopen: seconds between close and reopen")
    args = p.parse_args()
    holds = wc.Holds(args)
    for step in wc.steps(args.steps):
        rel = args.name.format(step=step, epoch=step // args.steps_per_epoch)
        path = os.path.join(args.dir, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        data = wc.payload("step%d" % step, args.size)
        if args.style == "inplace":
            wc.write_file(path, data, args, holds, "mid-%d" % step)
        elif args.style == "rename":
            tmp = path + ".tmp"
            wc.write_file(tmp, data, args, holds, "mid-%d" % step)
            holds.at("before-rename-%d" % step)
            os.replace(tmp, path)
        else:
            half = len(data) // 2
            wc.write_file(path, data[:half], args, holds, "mid-%d" % step)
            holds.at("reopen-gap-%d" % step)
            time.sleep(args.gap)
            wc.write_file(path, data[half:], args, mode="ab")
        holds.at("after-%d" % step)
    holds.done()


if __name__ == "__main__":
    main()
