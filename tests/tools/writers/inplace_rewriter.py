#!/usr/bin/env python3
"""Rewrites one file in place, over and over, as trainers that overwrite a fixed
checkpoint name do (torch.save to "last.pt", Caffe re-snapshotting the same
iteration, numpy.save to a fixed name): the same inode is opened for writing
and its bytes are replaced while anyone else may be reading it.

Version K of the file is wc.payload("vK", size): "vK|" repeated. Version 0 is
written (created) first; then versions 1, 2, ... are written over it in
place (open "r+b" at offset 0, same size, so size and inode never change;
or "wb" with --truncate). After a version is complete and closed, its number
is appended to --log (flushed and fsynced), so a reader can tell which
versions were ever finished. Stops after --versions, or when --stop-file
exists.

Hold points: before-rewrite-K (version K-1 complete), mid-rewrite-K (version
K partly written over K-1).
"""

import os
import time

import writer_common as wc


def main():
    p = wc.parser(__doc__)
    p.add_argument("--file", required=True, help="file name inside --dir")
    p.add_argument("--versions", type=int, default=0, help="0: until --stop-file exists")
    p.add_argument("--stop-file")
    p.add_argument("--pause", type=float, default=0.0, help="seconds between versions")
    p.add_argument("--truncate", action="store_true")
    p.add_argument("--log", required=True)
    args = p.parse_args()
    holds = wc.Holds(args)
    path = os.path.join(args.dir, args.file)
    log = open(args.log, "a")

    def finished(k):
        log.write("%d\n" % k)
        log.flush()
        os.fsync(log.fileno())

    wc.write_file(path, wc.payload("v0", args.size), args)
    finished(0)
    k = 1
    while args.versions == 0 or k <= args.versions:
        if args.stop_file and os.path.exists(args.stop_file):
            break
        holds.at("before-rewrite-%d" % k)
        with open(path, "wb" if args.truncate else "r+b") as f:
            wc.write_chunks(f, wc.payload("v%d" % k, args.size), args, holds,
                            "mid-rewrite-%d" % k)
        finished(k)
        k += 1
        if args.pause:
            time.sleep(args.pause)
    holds.done()


if __name__ == "__main__":
    main()
