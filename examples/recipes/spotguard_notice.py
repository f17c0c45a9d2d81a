"""Answering spotguard's checkpoint requests from a training loop (Python
standard library only; the recipes for PyTorch, Lightning and the Hugging
Face Trainer build on it).

spotguard asks the trainer for a fresh checkpoint in two ways (docs/agent.md):

  * on a spot notice it writes the notice as JSON to the file named by
    SPOTGUARD_NOTICE_FILE (a file that appears once; it is never removed
    while the trainer runs);
  * it sends `checkpoint_signal` (e.g. SIGUSR1) on a notice, on SIGTERM, and
    every `checkpoint_interval` when that is set.

A request only raises a flag here: the loop saves at its next step boundary,
where the model and optimizer are consistent, never inside a signal handler.

    requests = CheckpointRequests()          # SPOTGUARD_NOTICE_FILE, SIGUSR1
    for step in range(start, steps):
        train_one_step()
        if requests.due():
            save(step)                       # atomically: temp name, fsync, rename

`due()` is true ("signal" or "notice") once for the signals received since
the last call, and once for the notice file when it first appears; it costs
one stat() per call.
"""
import json
import os
import signal as signal_module


class CheckpointRequests:
    """The checkpoint requests a trainer under spotguard receives.

    notice_file: the path spotguard writes the notice to; by default the
        SPOTGUARD_NOTICE_FILE environment variable (none outside spotguard).
    signal: the signal the config names as `checkpoint_signal` (a number or
        a signal.Signals), or None to install no handler. SIGUSR1 by default.
    """

    def __init__(self, notice_file=None, signal=signal_module.SIGUSR1):
        if notice_file is None:
            notice_file = os.environ.get("SPOTGUARD_NOTICE_FILE", "")
        self.notice_file = notice_file
        self.notice = None  # the notice's JSON once it was seen
        self._signalled = False
        self._notice_answered = False
        if signal is not None:
            signal_module.signal(signal, self._on_signal)

    def _on_signal(self, signum, frame):
        self._signalled = True

    def notice_seen(self):
        """True once the notice file exists (a spot notice: the instance goes)."""
        if self.notice is None and self.notice_file and os.path.exists(self.notice_file):
            try:
                with open(self.notice_file) as f:
                    self.notice = json.load(f)
            except (OSError, ValueError):
                self.notice = {}  # being written: it exists, that is the notice
        return self.notice is not None

    def due(self):
        """The reason a checkpoint is due, asked for since the last call:
        "notice" (the notice file appeared), "signal", or "" (none: false)."""
        reason = ""
        if self._signalled:
            self._signalled = False
            reason = "signal"
        if not self._notice_answered and self.notice_seen():
            self._notice_answered = True
            reason = "notice"
        return reason
