#!/usr/bin/env python3
"""examples/recipes/torch_loop.py with real torch (Debian's python3-torch)
and real signals, run as spotguard runs a trainer: SIGUSR1 (the
checkpoint_signal) and the notice file each get a step_<N>.pt saved at the
next step, the notice only once, the checkpoint holds model, optimizer and
step, and a run resumed from it continues at that step.
Waits are deadlines that only catch a hang."""
import os
import select
import signal
import subprocess
import sys
import tempfile
import unittest

import torch

from recipe_support import RECIPES, post_notice

LOOP = os.path.join(RECIPES, "torch_loop.py")


class Trainer:
    def __init__(self, args, env):
        self.proc = subprocess.Popen([sys.executable, LOOP] + args, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True, env=env)
        self.lines = []

    def next_line(self, timeout=60):
        ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
        if not ready:
            raise AssertionError(f"no output within {timeout} s; so far: {self.lines}")
        line = self.proc.stdout.readline().strip()
        self.lines.append(line)
        return line

    def stop(self):
        if self.proc.poll() is None:
            self.proc.kill()
        self.proc.wait()
        self.proc.stdout.close()


class TorchRecipeTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.out = os.path.join(self.dir.name, "ckpt")
        self.notice = os.path.join(self.dir.name, "notice.json")
        self.env = dict(os.environ, SPOTGUARD_NOTICE_FILE=self.notice, SPOTGUARD_RESUME_FROM="")

    def tearDown(self):
        self.dir.cleanup()

    def saved(self, line, why):
        self.assertRegex(line, rf"^checkpoint {self.out}/step_\d+\.pt \({why}\)$")
        path = line.split()[1]
        step = torch.load(path)["step"]
        self.assertEqual(os.path.basename(path), f"step_{step}.pt")
        return path, step

    def test_a_signal_and_the_notice_file_each_get_a_checkpoint(self):
        t = Trainer(["--out", self.out, "--steps", "1000000", "--step-seconds", "0.01"], self.env)
        try:
            self.assertEqual(t.next_line(), "training from step 0")  # handler installed
            t.proc.send_signal(signal.SIGUSR1)
            _, first = self.saved(t.next_line(), "signal")
            post_notice(self.notice)
            path, second = self.saved(t.next_line(), "notice")
            self.assertGreater(second, first)
            t.proc.send_signal(signal.SIGUSR1)  # the notice file stays: answered once
            _, third = self.saved(t.next_line(), "signal")
            self.assertGreater(third, second)
        finally:
            t.stop()
        self.assertFalse([n for n in os.listdir(self.out) if n.endswith(".tmp")])
        state = torch.load(path)
        self.assertEqual(set(state), {"model", "optimizer", "step"})

        # Resumed as spotguard resumes it: SPOTGUARD_RESUME_FROM.
        env = dict(self.env, SPOTGUARD_RESUME_FROM=path)
        os.remove(self.notice)
        t = Trainer(["--out", self.out, "--steps", str(second + 3)], env)
        try:
            self.assertEqual(t.next_line(), f"resumed from {path} at step {second}")
            self.assertEqual(t.next_line(), f"training from step {second}")
            self.assertEqual(t.next_line(), f"done at step {second + 3}")
            self.assertEqual(t.proc.wait(timeout=60), 0)
        finally:
            t.stop()

    def test_save_every_saves_on_schedule_too(self):
        t = Trainer(["--out", self.out, "--steps", "10", "--save-every", "4"], self.env)
        try:
            self.assertEqual(t.next_line(), "training from step 0")
            self.assertEqual(t.next_line(), f"checkpoint {self.out}/step_4.pt (periodic)")
            self.assertEqual(t.next_line(), f"checkpoint {self.out}/step_8.pt (periodic)")
            self.assertEqual(t.next_line(), "done at step 10")
        finally:
            t.stop()

    def test_without_spotguard_nothing_is_saved(self):
        env = dict(self.env)
        del env["SPOTGUARD_NOTICE_FILE"]
        t = Trainer(["--out", self.out, "--steps", "20"], env)
        try:
            self.assertEqual(t.next_line(), "training from step 0")
            self.assertEqual(t.next_line(), "done at step 20")
            self.assertEqual(t.proc.wait(timeout=60), 0)
        finally:
            t.stop()
        self.assertFalse(os.path.exists(self.out))


if __name__ == "__main__":
    unittest.main()
