#!/usr/bin/env python3
"""The data sets of bench/sections/10-memory.sh.

    memory_data.py --dir DIR --mib N --files M

DIR/random/blob.bin   N MiB of random bytes (incompressible)
DIR/zeros/blob.bin    N MiB of zeros with 1 MiB of random bytes at the start of
                      every 32 MiB (about 3 % random): compresses to a few
                      per cent, and its zero runs make frames of a few hundred
                      stored bytes each, the case where a ranged read of 8 MiB
                      stored bytes once decoded gigabytes
DIR/small/rank_R/shard_K.bin   M random files of 16 KiB-1 MiB (log-uniform, fixed
                      seed), in 8 directories
All written with real zeros (no holes), closed, not fsynced.
"""
import argparse
import math
import os
import random

MIB = 1 << 20


def write_random(path, mib):
    with open(path, "wb") as f:
        for _ in range(mib // 8):
            f.write(os.urandom(8 * MIB))
        f.write(os.urandom((mib % 8) * MIB))


def write_zeros(path, mib):
    zeros = bytes(31 * MIB)
    with open(path, "wb") as f:
        left = mib
        while left > 0:
            f.write(os.urandom(MIB))
            n = min(31, left - 1)
            f.write(zeros[:n * MIB])
            left -= 1 + n


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mib", type=int, required=True)
    ap.add_argument("--files", type=int, required=True)
    args = ap.parse_args()
    for name in ("random", "zeros", "small"):
        os.makedirs(os.path.join(args.dir, name), exist_ok=True)
    write_random(os.path.join(args.dir, "random", "blob.bin"), args.mib)
    write_zeros(os.path.join(args.dir, "zeros", "blob.bin"), args.mib)
    rng = random.Random(16)
    total = 0
    for k in range(args.files):
        size = int(math.exp(rng.uniform(math.log(16 << 10), math.log(MIB))))
        d = os.path.join(args.dir, "small", "rank_%d" % (k % 8))
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "shard_%05d.bin" % k), "wb") as f:
            f.write(os.urandom(size))
        total += size
    print("memory_data: %d MiB random, %d MiB mostly zeros, %d small files (%d bytes)"
          % (args.mib, args.mib, args.files, total))


if __name__ == "__main__":
    main()
