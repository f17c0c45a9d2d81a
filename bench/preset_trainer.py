#!/usr/bin/env python3
"""The trainer of bench/sections/09-notice-presets.sh: one framework's on-disk
checkpoint format and one way of reacting to the end of the instance.

    preset_trainer.py --preset P --dir DIR --mib N --behaviour B --times FILE
                      --control DIR [--seed-only STEP]

It "trains" in steps of 0.05 s (one step number each) and saves a checkpoint
of N MiB of random bytes (incompressible, like trained weights to within
a few per cent) in the preset's format, as the framework writes it (names,
order, in place or renamed; the format knowledge of tests/tools/writers/):

  caffe        snap_iter_S.caffemodel then snap_iter_S.solverstate, in place
  pytorch      step_S.pt, a torch.save zip, in place
  lightning    epoch=0-step=S.ckpt (torch.save zip) in place; the previous one
               deleted after it (ModelCheckpoint's defaults: save_top_k=1)
  huggingface  checkpoint-S/: config.json, model.safetensors (a third),
               training_args.bin, optimizer.pt (two thirds), scheduler.pt,
               rng_state.pth, trainer_state.json last, each in place
  tensorflow   ckpt-S: the shard under ckpt-S_temp/, renamed, the .index
               through a temporary, then the `checkpoint` state file replaced
  dcp          step_S/__0_0.distcp and __1_0.distcp (two ranks, half each),
               then .metadata.tmp renamed to .metadata
  generic      step_S.bin, one raw file, in place

A save happens when DIR/../control/save appears (a periodic save; the file is
removed), and as --behaviour says:

  default       the framework's own default: caffe snapshots on SIGHUP and
                dies on SIGTERM (Caffe's SignalHandler handles SIGINT and
                SIGHUP only); lightning finishes the step and exits 1 without
                saving (Lightning 2.x catches SIGTERM and raises
                SIGTERMException after the batch; ModelCheckpoint does not
                save on it); every other one dies at once on SIGTERM (plain
                PyTorch, the transformers Trainer, Keras and DCP install no
                SIGTERM handler)
  term-save     a SIGTERM handler the user added (or Lightning's opt-in
                OnExceptionCheckpoint): finish the step, save, exit 0
  notice-file   checks SPOTGUARD_NOTICE_FILE every step; when it appears,
                saves once and trains on; SIGTERM as by default

Every event goes to --times as a JSON line with a wall-clock time:
  {"event": "ready", "t", "pid"}, {"event": "signal", "t", "name"},
  {"event": "notice-file", "t"}, {"event": "saved", "t", "t_start", "step",
  "why", "bytes"}, {"event": "exit", "t", "code"}
--seed-only STEP writes one checkpoint of step STEP and exits (no events).
"""
import argparse
import json
import os
import re
import shutil
import signal
import sys
import time
import zipfile

MIB = 1 << 20
CHUNK = 8 * MIB


def note(path, **fields):
    with open(path, "a") as f:
        f.write(json.dumps(fields) + "\n")


class Saver:
    def __init__(self, preset, out, mib):
        self.preset, self.out, self.size = preset, out, mib * MIB
        self.blob = os.urandom(self.size)

    def data(self, step, size):
        """size bytes of the random blob with the step stamped at the front."""
        tag = ("step %d\n" % step).encode()
        return memoryview(tag + self.blob[len(tag):size])

    def put(self, path, payload):
        """open, write in 8 MiB pieces, close: how serializers write in place."""
        with open(path, "wb") as f:
            for i in range(0, len(payload), CHUNK):
                f.write(payload[i:i + CHUNK])
        return len(payload)

    def torch_zip(self, path, step, size):
        """A torch.save archive: data.pkl plus one tensor storage, stored."""
        with zipfile.ZipFile(path, "w", zipfile.ZIP_STORED) as z:
            z.writestr("archive/data.pkl", b"\x80\x02}q\x00X\x04\x00\x00\x00stepq\x01K%d." % (step % 256))
            with z.open("archive/data/0", "w", force_zip64=True) as f:
                d = self.data(step, size)
                for i in range(0, len(d), CHUNK):
                    f.write(d[i:i + CHUNK])
            z.writestr("archive/version", b"3\n")
        return os.path.getsize(path)

    def save(self, step):
        """Writes the checkpoint of `step`; returns its bytes."""
        o, n, p = self.out, self.size, self.preset
        if p == "caffe":
            a = self.put(os.path.join(o, "snap_iter_%d.caffemodel" % step), self.data(step, n // 2))
            return a + self.put(os.path.join(o, "snap_iter_%d.solverstate" % step),
                                self.data(step + 1, n - n // 2))
        if p == "pytorch":
            return self.torch_zip(os.path.join(o, "step_%d.pt" % step), step, n)
        if p == "lightning":
            old = [f for f in os.listdir(o) if f.endswith(".ckpt")]
            b = self.torch_zip(os.path.join(o, "epoch=0-step=%d.ckpt" % step), step, n)
            for f in old:
                os.remove(os.path.join(o, f))
            return b
        if p == "huggingface":
            return self.save_hf(step)
        if p == "tensorflow":
            return self.save_tf(step)
        if p == "dcp":
            d = os.path.join(o, "step_%d" % step)
            os.makedirs(d, exist_ok=True)
            b = self.put(os.path.join(d, "__0_0.distcp"), self.data(step, n // 2))
            b += self.put(os.path.join(d, "__1_0.distcp"), self.data(step + 1, n - n // 2))
            b += self.put(os.path.join(d, ".metadata.tmp"), b"dcp metadata %d\n" % step)
            os.rename(os.path.join(d, ".metadata.tmp"), os.path.join(d, ".metadata"))
            return b
        if p == "generic":
            return self.put(os.path.join(o, "step_%d.bin" % step), self.data(step, n))
        raise SystemExit("unknown preset " + p)

    def save_hf(self, step):
        d = os.path.join(self.out, "checkpoint-%d" % step)
        os.makedirs(d, exist_ok=True)
        model = self.size // 3 // 4 * 4
        header = json.dumps({"weight": {"dtype": "F32", "shape": [model // 4],
                                        "data_offsets": [0, model]}}).encode()
        header += b" " * (-len(header) % 8)
        b = self.put(os.path.join(d, "config.json"), b'{"model_type": "toy"}')
        b += self.put(os.path.join(d, "model.safetensors"),
                      len(header).to_bytes(8, "little") + header + self.data(step, model).tobytes())
        b += self.put(os.path.join(d, "training_args.bin"), b"args" * 128)
        b += self.torch_zip(os.path.join(d, "optimizer.pt"), step, self.size - model)
        b += self.put(os.path.join(d, "scheduler.pt"), b"sched" * 50)
        b += self.put(os.path.join(d, "rng_state.pth"), b"rng" * 300)
        b += self.put(os.path.join(d, "trainer_state.json"),
                      json.dumps({"global_step": step, "log_history": []}).encode())
        return b

    def save_tf(self, step):
        o = self.out
        prefix = "ckpt-%d" % step
        tmp = os.path.join(o, prefix + "_temp")
        os.makedirs(tmp, exist_ok=True)
        part = os.path.join(tmp, "part-00000-of-00001")
        b = self.put(part + ".data-00000-of-00001", self.data(step, self.size))
        self.put(part + ".index", b"part index" * 30)
        os.rename(part + ".data-00000-of-00001", os.path.join(o, prefix + ".data-00000-of-00001"))
        tmp_index = os.path.join(o, "%s.index.tempstate%d" % (prefix, time.monotonic_ns()))
        b += self.put(tmp_index, b"merged index" * 60)
        os.rename(tmp_index, os.path.join(o, prefix + ".index"))
        shutil.rmtree(tmp)
        kept = sorted((int(m.group(1)) for f in os.listdir(o)
                       for m in [re.fullmatch(r"ckpt-(\d+)\.index", f)] if m))
        lines = ['model_checkpoint_path: "%s"' % prefix]
        lines += ['all_model_checkpoint_paths: "ckpt-%d"' % k for k in kept]
        state_tmp = os.path.join(o, "checkpoint.tmp%x" % time.monotonic_ns())
        with open(state_tmp, "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(state_tmp, os.path.join(o, "checkpoint"))
        return b


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--preset", required=True)
    ap.add_argument("--dir", required=True)
    ap.add_argument("--mib", type=int, required=True)
    ap.add_argument("--behaviour", choices=["default", "term-save", "notice-file"], default="default")
    ap.add_argument("--times")
    ap.add_argument("--control")
    ap.add_argument("--seed-only", type=int)
    ap.add_argument("--step-seconds", type=float, default=0.05)
    args = ap.parse_args()
    os.makedirs(args.dir, exist_ok=True)
    saver = Saver(args.preset, args.dir, args.mib)
    if args.seed_only is not None:
        saver.save(args.seed_only)
        return
    times = args.times
    pending = []  # signals to act on at the next step boundary

    def on_signal(signum, frame):
        name = signal.Signals(signum).name
        note(times, event="signal", t=time.time(), name=name)
        dies = signum == signal.SIGTERM and (
            args.behaviour != "term-save" and not (args.preset == "lightning"
                                                  and args.behaviour == "default"))
        if dies:  # the default action, as a process without a handler gets it
            note(times, event="exit", t=time.time(), code=-signum)
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)
        pending.append(name)

    signal.signal(signal.SIGTERM, on_signal)
    if args.preset == "caffe":
        signal.signal(signal.SIGHUP, on_signal)
    notice_file = os.environ.get("SPOTGUARD_NOTICE_FILE", "")
    answered = False
    note(times, event="ready", t=time.time(), pid=os.getpid())
    step = 101

    def save(why):
        start = time.time()
        b = saver.save(step)
        note(times, event="saved", t=time.time(), t_start=start, step=step, why=why, bytes=b)

    while True:
        time.sleep(args.step_seconds)
        step += 1
        ctl = os.path.join(args.control, "save")
        if os.path.exists(ctl):
            os.remove(ctl)
            save("periodic")
        if args.behaviour == "notice-file" and not answered and notice_file \
                and os.path.exists(notice_file):
            answered = True
            note(times, event="notice-file", t=time.time())
            save("notice-file")
        while pending:
            name = pending.pop(0)
            if name == "SIGHUP":
                save("SIGHUP")
            elif name == "SIGTERM":
                code = 0
                if args.behaviour == "term-save":
                    save("SIGTERM")
                else:
                    code = 1  # lightning: SIGTERMException, no checkpoint
                note(times, event="exit", t=time.time(), code=code)
                sys.exit(code)


if __name__ == "__main__":
    main()
