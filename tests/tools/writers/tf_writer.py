#!/usr/bin/env python3
"""Writes checkpoints the way TensorFlow's tf.train.Checkpoint / CheckpointManager do.

Real behaviour mimicked (tensorflow/python/checkpoint, training/saving
functional_saver.py, checkpoint_management.py, core/util/tensor_bundle):
- save number N goes to the prefix "<dir>/ckpt-N" ("model.ckpt-<global_step>"
  for tf.compat.v1.train.Saver: --name model.ckpt);
- the shards are first written under a temporary directory
  "<prefix>_temp/part-SSSSS-of-TTTTT.{index,data-00000-of-00001}", then
  MergeV2Checkpoints renames the data files to "<prefix>.data-SSSSS-of-TTTTT"
  and writes the merged "<prefix>.index" (through a "<prefix>.index.tempstate..."
  temporary that is renamed into place), and removes the temporary directory;
- CheckpointManager then deletes checkpoints beyond max_to_keep and rewrites
  the "checkpoint" state file (a CheckpointState text proto:
  model_checkpoint_path, all_model_checkpoint_paths, timestamps) atomically:
  written to "checkpoint.tmp<hex>" and renamed over "checkpoint";
- the paths in "checkpoint" are relative (CheckpointManager) or absolute
  (tf.compat.v1 Saver's default): --absolute-paths.

Hold points: mid-data-N, after-temp-N, before-state-N, after-N.
"""

import os
import shutil
import time
import uuid

import writer_common as wc


def main():
    p = wc.parser(__doc__)
    p.add_argument("--saves", required=True, help="save numbers, e.g. 1,2,3")
    p.add_argument("--name", default="ckpt")
    p.add_argument("--shards", type=int, default=1)
    p.add_argument("--max-to-keep", type=int, default=5)
    p.add_argument("--absolute-paths", action="store_true")
    args = p.parse_args()
    holds = wc.Holds(args)
    os.makedirs(args.dir, exist_ok=True)
    kept = []
    for n in wc.steps(args.saves):
        prefix = "%s-%d" % (args.name, n)
        base = os.path.join(args.dir, prefix)
        tmpdir = base + "_temp"
        os.makedirs(tmpdir, exist_ok=True)
        total = args.shards
        for s in range(total):
            part = os.path.join(tmpdir, "part-%05d-of-%05d" % (s, total))
            data = wc.payload("%s-shard%d" % (prefix, s), args.size)
            wc.write_file(part + ".data-00000-of-00001", data, args, holds,
                          "mid-data-%d" % n if s == 0 else None)
            wc.write_file(part + ".index", wc.payload("%s-part-index%d" % (prefix, s), 300), args)
        holds.at("after-temp-%d" % n)
        for s in range(total):
            part = os.path.join(tmpdir, "part-%05d-of-%05d" % (s, total))
            os.rename(part + ".data-00000-of-00001", "%s.data-%05d-of-%05d" % (base, s, total))
        tmp_index = "%s.index.tempstate%d" % (base, time.monotonic_ns())
        wc.write_file(tmp_index, wc.payload(prefix + "-index", 700), args)
        os.rename(tmp_index, base + ".index")
        shutil.rmtree(tmpdir)
        kept.append((prefix, time.time()))
        while len(kept) > args.max_to_keep:
            old, _ = kept.pop(0)
            for name in os.listdir(args.dir):
                if name.startswith(old + ".index") or name.startswith(old + ".data-"):
                    os.remove(os.path.join(args.dir, name))
        holds.at("before-state-%d" % n)

        def path_of(name):
            return os.path.join(os.path.abspath(args.dir), name) if args.absolute_paths else name

        lines = ['model_checkpoint_path: "%s"' % path_of(prefix)]
        lines += ['all_model_checkpoint_paths: "%s"' % path_of(k) for k, _ in kept]
        lines += ["all_model_checkpoint_timestamps: %f" % t for _, t in kept]
        lines += ["last_preserved_timestamp: %f" % kept[0][1]]
        state_tmp = os.path.join(args.dir, "checkpoint.tmp" + uuid.uuid4().hex)
        with open(state_tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(state_tmp, os.path.join(args.dir, "checkpoint"))
        holds.at("after-%d" % n)
    holds.done()


if __name__ == "__main__":
    main()
