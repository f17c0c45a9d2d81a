"""Shared by the checkpoint writer scripts in this directory (standard library only).

The writers mimic, with small files, the order and the names in which real
training frameworks write their checkpoints, so that the detection tests see
the same sequence of creates, writes, closes and renames that a real trainer
produces. Each script documents which framework behaviour it mimics.

Tests steer a writer through hold points: with `--control DIR --hold NAME`,
the writer creates DIR/at-NAME when it reaches NAME and waits there until
DIR/go-NAME exists. At a "mid-..." hold the file being written is open and
partly written. A writer that finishes creates DIR/done.
"""

import argparse
import os
import sys
import time


def parser(description):
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--dir", required=True, help="the checkpoint directory")
    p.add_argument("--control", help="directory for hold-point files")
    p.add_argument("--hold", action="append", default=[], help="hold point to stop at")
    p.add_argument("--size", type=int, default=64 * 1024, help="bytes per large file")
    p.add_argument("--chunk", type=int, default=16 * 1024, help="bytes per write(2)")
    p.add_argument("--chunk-delay", type=float, default=0.0, help="seconds between writes")
    return p


class Holds:
    def __init__(self, args):
        self.dir = args.control
        self.names = set(args.hold)
        if self.names and not self.dir:
            sys.exit("--hold needs --control")

    def at(self, name):
        if name not in self.names:
            return
        with open(os.path.join(self.dir, "at-" + name), "w"):
            pass
        go = os.path.join(self.dir, "go-" + name)
        deadline = time.monotonic() + 120
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                sys.exit("hold %s was never released" % name)
            time.sleep(0.005)

    def done(self):
        if self.dir:
            with open(os.path.join(self.dir, "done"), "w"):
                pass


def payload(tag, size):
    """Deterministic bytes for `tag`: "<tag>|" repeated, cut to `size`."""
    unit = (tag + "|").encode()
    return (unit * (size // len(unit) + 1))[:size]


def write_chunks(f, data, args, holds=None, mid_hold=None):
    """Writes `data` in chunks, flushing each to the kernel. After the first
    chunk, waits at `mid_hold` with the file open and partly written."""
    step = max(1, args.chunk)
    for start in range(0, max(1, len(data)), step):
        f.write(data[start:start + step])
        f.flush()
        if start == 0 and mid_hold and holds:
            holds.at(mid_hold)
        if args.chunk_delay:
            time.sleep(args.chunk_delay)


def write_file(path, data, args, holds=None, mid_hold=None, mode="wb"):
    """open(path, mode) -> chunked writes -> close, like most serializers."""
    with open(path, mode) as f:
        write_chunks(f, data, args, holds, mid_hold)


def steps(text):
    return [int(s) for s in text.split(",") if s]
