"""Recipe: a PyTorch Lightning callback that answers spotguard.

    from lightning_callback import SpotguardCallback
    trainer = lightning.Trainer(callbacks=[SpotguardCallback()], ...)
    trainer.fit(model, ckpt_path=os.environ.get("SPOTGUARD_RESUME_FROM") or None)

After each training batch it checks for a checkpoint request (the notice file
or `checkpoint_signal`, spotguard_notice.py) and, when one came, saves
`epoch=E-step=N.ckpt` into the checkpoint dir with trainer.save_checkpoint,
the name the `lightning` preset reads the step from (docs/checkpoints.md).
trainer.save_checkpoint runs on every rank (the checkpoint is written by
rank 0); all ranks see the same notice file and signal.

A config for it:
  {"preset": "lightning", "checkpoint_signal": "SIGUSR1",
   "command": ["python3", "train.py"]}
(train.py reads SPOTGUARD_CHECKPOINT_DIR and SPOTGUARD_RESUME_FROM.)

Lightning is imported as `lightning.pytorch` (2.x) or `pytorch_lightning`
(1.x). Tested against a stand-in of the Callback interface
(tests/examples/lightning_callback_test.py): Lightning is not installable on
the test machine.
"""
import os
import sys

try:
    from lightning.pytorch.callbacks import Callback
except ImportError:
    from pytorch_lightning.callbacks import Callback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spotguard_notice import CheckpointRequests  # noqa: E402


class SpotguardCallback(Callback):
    """Saves a checkpoint at the next batch end after spotguard asks for one.

    dirpath: where to save; SPOTGUARD_CHECKPOINT_DIR by default.
    requests: a CheckpointRequests (SPOTGUARD_NOTICE_FILE and SIGUSR1 by default).
    """

    def __init__(self, dirpath=None, requests=None):
        super().__init__()
        self.dirpath = dirpath or os.environ.get("SPOTGUARD_CHECKPOINT_DIR", ".")
        self.requests = requests if requests is not None else CheckpointRequests()
        self.saved = []  # the paths saved in answer, in order

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):
        if not self.requests.due():
            return
        path = os.path.join(self.dirpath,
                            f"epoch={trainer.current_epoch}-step={trainer.global_step}.ckpt")
        trainer.save_checkpoint(path)
        self.saved.append(path)
