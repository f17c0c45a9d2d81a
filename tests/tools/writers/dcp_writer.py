#!/usr/bin/env python3
"""Writes checkpoints the way torch.distributed.checkpoint (DCP) does.

Real behaviour mimicked (torch/distributed/checkpoint/filesystem.py,
FileSystemWriter):
- dcp.save(state, checkpoint_id=DIR) writes into DIR; every rank writes its
  shards as "__<rank>_<n>.distcp" in place (open "wb", write, close);
- after all ranks are done, the coordinator's finish() writes the global
  metadata to ".metadata.tmp" and renames it to ".metadata" (earlier
  releases wrote ".metadata" directly: --legacy-metadata). ".metadata" is
  the last file to appear;
- saving again to the same DIR (a fixed "latest" id, overwrite=True)
  rewrites the shards in place first and replaces ".metadata" last.

Hold points: mid-shard-D, after-shards-D, before-rename-D, after-D (D is the
directory name; R the round for repeated saves: mid-shard-D-R etc. when the
same directory is saved again).
"""

import os
import threading

import writer_common as wc


def main():
    p = wc.parser(__doc__)
    p.add_argument("--dirs", required=True, help="checkpoint ids, e.g. step_100,step_200")
    p.add_argument("--ranks", type=int, default=2)
    p.add_argument("--files-per-rank", type=int, default=1)
    p.add_argument("--legacy-metadata", action="store_true")
    args = p.parse_args()
    holds = wc.Holds(args)
    seen = {}
    for name in [d for d in args.dirs.split(",") if d]:
        round_no = seen.get(name, 0)
        seen[name] = round_no + 1
        label = name if round_no == 0 else "%s-%d" % (name, round_no)
        out = os.path.join(args.dir, name)
        os.makedirs(out, exist_ok=True)

        def rank_writes(rank):
            for n in range(args.files_per_rank):
                data = wc.payload("%s-r%d-%d-round%d" % (name, rank, n, round_no), args.size)
                mid = "mid-shard-" + label if rank == 0 and n == 0 else None
                wc.write_file(os.path.join(out, "__%d_%d.distcp" % (rank, n)), data, args,
                              holds, mid)

        threads = [threading.Thread(target=rank_writes, args=(r,)) for r in range(args.ranks)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        holds.at("after-shards-" + label)
        meta = wc.payload("metadata-%s-round%d" % (name, round_no), 2048)
        if args.legacy_metadata:
            wc.write_file(os.path.join(out, ".metadata"), meta, args)
        else:
            tmp = os.path.join(out, ".metadata.tmp")
            wc.write_file(tmp, meta, args)
            holds.at("before-rename-" + label)
            os.rename(tmp, os.path.join(out, ".metadata"))
        holds.at("after-" + label)
    holds.done()


if __name__ == "__main__":
    main()
