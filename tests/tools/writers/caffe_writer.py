#!/usr/bin/env python3
"""Writes checkpoints the way Caffe's Solver::Snapshot() does.

Real behaviour mimicked (BVLC/caffe src/caffe/solver.cpp, sgd_solver.cpp):
- file names come from SnapshotFilename(): "<snapshot_prefix>_iter_<N>" plus
  ".caffemodel" and ".solverstate" (snapshot_format BINARYPROTO, the default)
  or ".caffemodel.h5" and ".solverstate.h5" (snapshot_format HDF5); the prefix
  may name a subdirectory ("snapshots/net");
- the model is written first (SnapshotToBinaryProto / SnapshotToHDF5), then the
  solver state (SnapshotSolverState), which names the model it belongs to;
- both are written in place: an ofstream opened with truncation (or
  H5Fcreate with H5F_ACC_TRUNC), no temporary name, no rename. A second
  snapshot of the same iteration (SIGHUP, then the scheduled one) truncates
  and rewrites both files in the same order.

Hold points: mid-model-N, after-model-N, mid-state-N, after-state-N; when
iteration N is snapshotted again, the k-th repeat's points end in "-N-k"
(after-model-100-1).
"""

import os

import writer_common as wc


def main():
    p = wc.parser(__doc__)
    p.add_argument("--prefix", default="snap", help="snapshot_prefix, relative to --dir")
    p.add_argument("--iters", required=True, help="iterations to snapshot, e.g. 100,200")
    p.add_argument("--format", choices=["binaryproto", "hdf5"], default="binaryproto")
    args = p.parse_args()
    holds = wc.Holds(args)
    ext = ".h5" if args.format == "hdf5" else ""
    base = os.path.join(args.dir, args.prefix)
    os.makedirs(os.path.dirname(base), exist_ok=True)
    seen = {}
    for round_no, n in enumerate(wc.steps(args.iters)):
        repeat = seen.get(n, 0)
        seen[n] = repeat + 1
        label = "%d" % n if repeat == 0 else "%d-%d" % (n, repeat)
        model = "%s_iter_%d.caffemodel%s" % (base, n, ext)
        state = "%s_iter_%d.solverstate%s" % (base, n, ext)
        tag = "iter%d-round%d" % (n, round_no)
        wc.write_file(model, wc.payload("model-" + tag, args.size), args, holds,
                      "mid-model-" + label)
        holds.at("after-model-" + label)
        wc.write_file(state, wc.payload("state-" + tag, args.size // 4), args, holds,
                      "mid-state-" + label)
        holds.at("after-state-" + label)
    holds.done()


if __name__ == "__main__":
    main()
