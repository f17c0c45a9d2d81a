"""Recipe: a Hugging Face Trainer callback that answers spotguard.

    from hf_callback import SpotguardCallback
    args = TrainingArguments(output_dir=os.environ["SPOTGUARD_CHECKPOINT_DIR"], ...)
    trainer = Trainer(model, args, callbacks=[SpotguardCallback()], ...)
    trainer.train(resume_from_checkpoint=os.environ.get("SPOTGUARD_RESUME_FROM") or None)

After each optimizer step it checks for a checkpoint request (the notice file
or `checkpoint_signal`, spotguard_notice.py) and, when one came, sets
`control.should_save`: the Trainer then saves `checkpoint-<global_step>/` in
output_dir the way it saves on schedule (model, optimizer, scheduler, RNG
state, trainer_state.json), which the `huggingface` preset takes once
trainer_state.json is settled (docs/checkpoints.md). On_step_end runs on
every rank, and all ranks see the same notice file and signal, so they save
together.

A config for it:
  {"preset": "huggingface", "checkpoint_signal": "SIGUSR1",
   "command": ["python3", "train.py"]}

Tested against a stand-in of the TrainerCallback interface
(tests/examples/hf_callback_test.py): transformers is not installable on the
test machine.
"""
import os
import sys

from transformers import TrainerCallback

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from spotguard_notice import CheckpointRequests  # noqa: E402


class SpotguardCallback(TrainerCallback):
    """Asks the Trainer to save at the step after spotguard asks for a checkpoint.

    requests: a CheckpointRequests (SPOTGUARD_NOTICE_FILE and SIGUSR1 by default).
    """

    def __init__(self, requests=None):
        self.requests = requests if requests is not None else CheckpointRequests()
        self.asked_at = []  # the global steps a save was asked for, in order

    def on_step_end(self, args, state, control, **kwargs):
        if self.requests.due():
            control.should_save = True
            self.asked_at.append(state.global_step)
        return control
