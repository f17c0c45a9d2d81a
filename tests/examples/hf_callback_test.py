#!/usr/bin/env python3
"""examples/recipes/hf_callback.py against a stand-in of the Hugging Face
TrainerCallback interface (transformers is not installable on the test
machine). The stand-in Trainer runs the loop as transformers' does: after
each optimizer step global_step counts it, the callback handler calls
on_step_end (a callback's returned control replaces the one passed in), then
a save happens when control.should_save is set: checkpoint-<global_step>/
with trainer_state.json, and the handler's on_save clears should_save.
Real signals, a real notice file."""
import dataclasses
import json
import os
import signal
import tempfile
import unittest

from recipe_support import install_module, post_notice


class TrainerCallback:  # transformers' hooks; each returns None or a control
    def on_step_end(self, args, state, control, **kwargs):
        return None


@dataclasses.dataclass
class TrainerControl:
    should_save: bool = False


@dataclasses.dataclass
class TrainerState:
    global_step: int = 0


install_module("transformers", TrainerCallback=TrainerCallback)
from hf_callback import SpotguardCallback  # noqa: E402


class StandInTrainer:
    def __init__(self, output_dir, callbacks, save_steps):
        self.output_dir = output_dir
        self.callbacks = callbacks
        self.save_steps = save_steps
        self.state = TrainerState()
        self.control = TrainerControl()
        self.saved = []

    def call_event(self, event):
        for cb in self.callbacks:
            result = getattr(cb, event)(None, self.state, self.control)
            if result is not None:
                self.control = result

    def train(self, steps, before_step):
        for _ in range(steps):
            before_step(self.state.global_step)
            self.state.global_step += 1
            if self.state.global_step % self.save_steps == 0:  # DefaultFlowCallback
                self.control.should_save = True
            self.call_event("on_step_end")
            if self.control.should_save:
                ckpt = os.path.join(self.output_dir, f"checkpoint-{self.state.global_step}")
                os.makedirs(ckpt)
                with open(os.path.join(ckpt, "trainer_state.json"), "w") as f:
                    json.dump(dataclasses.asdict(self.state), f)
                self.saved.append(os.path.basename(ckpt))
                self.control.should_save = False  # CallbackHandler.on_save


class HfCallbackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.notice = os.path.join(self.dir.name, "notice.json")
        os.environ["SPOTGUARD_NOTICE_FILE"] = self.notice

    def tearDown(self):
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        self.dir.cleanup()

    def test_the_trainer_saves_at_the_step_of_each_request_and_on_schedule(self):
        callback = SpotguardCallback()  # SPOTGUARD_NOTICE_FILE, SIGUSR1
        self.assertIsInstance(callback, TrainerCallback)
        trainer = StandInTrainer(self.dir.name, [callback], save_steps=10)

        def before_step(step):
            if step == 3:
                os.kill(os.getpid(), signal.SIGUSR1)
            if step == 5:
                post_notice(self.notice)
            if step == 12:
                os.kill(os.getpid(), signal.SIGUSR1)

        trainer.train(20, before_step)
        self.assertEqual(trainer.saved, ["checkpoint-4", "checkpoint-6", "checkpoint-10",
                                         "checkpoint-13", "checkpoint-20"])
        self.assertEqual(callback.asked_at, [4, 6, 13])  # the notice answered once
        with open(os.path.join(self.dir.name, "checkpoint-6", "trainer_state.json")) as f:
            self.assertEqual(json.load(f)["global_step"], 6)

    def test_no_request_leaves_the_schedule_alone(self):
        trainer = StandInTrainer(self.dir.name, [SpotguardCallback()], save_steps=4)
        trainer.train(9, lambda step: None)
        self.assertEqual(trainer.saved, ["checkpoint-4", "checkpoint-8"])


if __name__ == "__main__":
    unittest.main()
