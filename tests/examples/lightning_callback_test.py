#!/usr/bin/env python3
"""examples/recipes/lightning_callback.py against a stand-in of Lightning's
Callback interface (Lightning is not installable on the test machine): a
stand-in Trainer calls on_train_batch_end after every batch, with
global_step already counting that batch's optimizer step, as Lightning's
loop does, and its save_checkpoint writes the file. Real signals, a real
notice file."""
import os
import signal
import sys
import tempfile
import unittest

from recipe_support import install_module, post_notice


class Callback:  # the hooks Lightning calls; a subclass overrides what it needs
    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        pass


class StandInTrainer:
    def __init__(self, callbacks, batches_per_epoch):
        self.callbacks = callbacks
        self.batches_per_epoch = batches_per_epoch
        self.current_epoch = 0
        self.global_step = 0
        self.saved = []

    def save_checkpoint(self, filepath):
        with open(filepath, "w") as f:
            f.write(f"step {self.global_step}\n")
        self.saved.append(os.path.basename(filepath))

    def fit(self, epochs, before_batch):
        for self.current_epoch in range(epochs):
            for batch_idx in range(self.batches_per_epoch):
                before_batch(self.global_step)
                self.global_step += 1  # the batch's optimizer step
                for cb in self.callbacks:
                    cb.on_train_batch_end(self, None, {"loss": 0.0}, batch_idx, batch_idx)


class LightningCallbackTest(unittest.TestCase):
    def setUp(self):
        self.dir = tempfile.TemporaryDirectory()
        self.notice = os.path.join(self.dir.name, "notice.json")
        os.environ["SPOTGUARD_NOTICE_FILE"] = self.notice
        os.environ["SPOTGUARD_CHECKPOINT_DIR"] = self.dir.name

    def tearDown(self):
        signal.signal(signal.SIGUSR1, signal.SIG_DFL)
        self.dir.cleanup()

    def run_fit(self, module_name):
        for name in list(sys.modules):
            if name.split(".")[0] in ("lightning", "pytorch_lightning", "lightning_callback"):
                del sys.modules[name]
        install_module(module_name, Callback=Callback)
        from lightning_callback import SpotguardCallback
        callback = SpotguardCallback()  # SPOTGUARD_NOTICE_FILE, SIGUSR1, SPOTGUARD_CHECKPOINT_DIR
        self.assertIsInstance(callback, Callback)
        trainer = StandInTrainer([callback], batches_per_epoch=5)

        def before_batch(step):
            if step == 2:
                os.kill(os.getpid(), signal.SIGUSR1)  # a checkpoint_signal
            if step == 6:
                post_notice(self.notice)               # the spot notice
            if step == 8:
                os.kill(os.getpid(), signal.SIGUSR1)

        trainer.fit(epochs=2, before_batch=before_batch)
        return callback, trainer

    def test_saves_once_per_signal_and_once_for_the_notice(self):
        callback, trainer = self.run_fit("lightning.pytorch.callbacks")
        # Each request answered at the end of the batch it arrived in; the
        # notice once, though the file stays.
        expected = ["epoch=0-step=3.ckpt", "epoch=1-step=7.ckpt", "epoch=1-step=9.ckpt"]
        self.assertEqual(trainer.saved, expected)
        self.assertEqual(callback.saved, [os.path.join(self.dir.name, n) for n in expected])
        self.assertTrue(all(os.path.exists(p) for p in callback.saved))

    def test_pytorch_lightning_1x_is_used_when_lightning_2_is_missing(self):
        callback, trainer = self.run_fit("pytorch_lightning.callbacks")
        self.assertEqual(len(trainer.saved), 3)

    def test_nothing_is_saved_without_a_request(self):
        install_module("lightning.pytorch.callbacks", Callback=Callback)
        from lightning_callback import SpotguardCallback
        trainer = StandInTrainer([SpotguardCallback()], batches_per_epoch=4)
        trainer.fit(epochs=1, before_batch=lambda step: None)
        self.assertEqual(trainer.saved, [])


if __name__ == "__main__":
    unittest.main()
