#!/usr/bin/env python3
"""examples/ddp_trainer.py alone, with two "nodes" on this machine: two
torchrun launchers (--nnodes 2, --nproc_per_node 2), each with its own
checkpoint directory, master 127.0.0.1.

  A. uninterrupted to STEPS: the reference parameter hash;
  B. the same run, held at step PAUSE (--pause-at) until the test sends
     SIGUSR1 to the workers of node 1 only: every rank must save that step
     (the flag is all-reduced), on its own node; then both launchers are
     terminated;
  C. each node resumed from its own step_PAUSE directory, to STEPS: the final
     parameter hash must equal A's, bit for bit.

Each node's directory must hold only its own ranks' shards; .metadata only
on node 0. With SPOTGUARD_LONG_TESTS=1 also: the notice file requests a save,
and a resume from two different steps is refused on every rank.

Nothing here waits for time to pass to decide: the test waits for the
trainer's own lines ("paused at step", "idle after step") and for exits.
Exit 77 (CTest SKIP_RETURN_CODE) when this python has no torch.
"""
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

try:
    import torch  # noqa: F401  (only to know whether the trainer can run)
except ImportError:
    print(f"SKIP: {sys.executable} has no torch (Debian: apt-get install python3-torch)")
    sys.exit(77)

HERE = os.path.dirname(os.path.abspath(__file__))
TRAINER = os.path.join(HERE, "..", "..", "examples", "ddp_trainer.py")
STEPS = 60
PAUSE = 30
SAVE_EVERY = 25
NPROC = 2
NNODES = 2
DEADLINE = 120  # a safety net against a hang, never a verdict


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Node:
    """One torchrun launcher and the lines it prints."""

    def __init__(self, root, run, node_rank, port, extra, env=None):
        self.node_rank = node_rank
        self.lines = []
        self.cond = threading.Condition()
        cmd = [sys.executable, "-m", "torch.distributed.run", "--nnodes", str(NNODES),
               "--node_rank", str(node_rank), "--master_addr", "127.0.0.1",
               "--master_port", str(port), "--nproc_per_node", str(NPROC),
               "--redirects", "1", "--tee", "1",
               "--log_dir", os.path.join(root, f"logs-{run}-{node_rank}"),
               TRAINER, "--steps", str(STEPS), "--save-every", str(SAVE_EVERY),
               # A loaded machine may take long to import torch in four
               # workers at once; the peers' wait must not end the run.
               "--timeout", "120"] + extra
        full_env = dict(os.environ, **(env or {}))
        full_env.pop("SPOTGUARD_RESUME_FROM", None)
        full_env.pop("SPOTGUARD_CHECKPOINT_DIR", None)
        if "SPOTGUARD_NOTICE_FILE" not in (env or {}):
            full_env.pop("SPOTGUARD_NOTICE_FILE", None)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                     text=True, start_new_session=True, env=full_env)
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            with self.cond:
                self.lines.append(line.rstrip("\n"))
                self.cond.notify_all()
        with self.cond:
            self.lines.append(None)  # end of output
            self.cond.notify_all()

    def wait_line(self, text):
        end = time.monotonic() + DEADLINE
        with self.cond:
            while True:
                for line in self.lines:
                    if line is not None and text in line:
                        return line
                if None in self.lines:
                    fail(f"node {self.node_rank} ended without printing {text!r}", self)
                if not self.cond.wait(timeout=max(0.0, end - time.monotonic())):
                    fail(f"node {self.node_rank}: no {text!r} within {DEADLINE} s", self)

    def worker_pids(self):
        pids = []
        with self.cond:
            for line in self.lines:
                if line and f" node {self.node_rank} pid " in line:
                    pids.append(int(line.split(" pid ")[1]))
        return pids

    def wait_exit(self):
        try:
            return self.proc.wait(timeout=DEADLINE)
        except subprocess.TimeoutExpired:
            fail(f"node {self.node_rank} still running after {DEADLINE} s", self)

    def output(self):
        with self.cond:
            return "\n".join(line for line in self.lines if line is not None)

    def kill(self):
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()


NODES = []


def fail(message, node=None):
    print(f"FAIL: {message}")
    for n in NODES:
        if node is None or n is node:
            print(f"--- output of node {n.node_rank} ---\n{n.output()}")
    for n in NODES:
        n.kill()
    sys.exit(1)


def start_pair(root, run, per_node_extra, env_of=lambda r: None):
    port = free_port()
    pair = [Node(root, run, r, port, per_node_extra(r), env_of(r)) for r in range(NNODES)]
    NODES.extend(pair)
    return pair


def finish_pair(pair, what):
    for n in pair:
        rc = n.wait_exit()
        if rc != 0:
            fail(f"{what}: node {n.node_rank} exited {rc}", n)
    # Rank 0 (on node 0) prints the hash of the final parameters.
    return pair[0].wait_line("final sha256 ").split("final sha256 ")[1].strip()


def ckpt(root, run, r):
    return os.path.join(root, f"{run}-node{r}")


def check_layout(root, run, steps):
    """Each node's step dirs hold its own ranks' shards, complete."""
    for r in range(NNODES):
        mine = {f"shard_{g}.pt" for g in range(r * NPROC, (r + 1) * NPROC)}
        for step in steps:
            d = os.path.join(ckpt(root, run, r), f"step_{step}")
            if not os.path.isdir(d):
                fail(f"{run}: node {r} has no {d}")
            want = mine | {f"node_{r}.json"} | ({".metadata"} if r == 0 else set())
            have = set(os.listdir(d))
            if have != want:
                fail(f"{run}: {d} holds {sorted(have)}, want {sorted(want)}")


def main():
    root = tempfile.mkdtemp(prefix="ddp-trainer-test-")
    try:
        # A: uninterrupted.
        pair = start_pair(root, "a", lambda r: ["--ckpt-dir", ckpt(root, "a", r)])
        reference = finish_pair(pair, "uninterrupted run")
        check_layout(root, "a", [25, 50])
        print(f"ok: uninterrupted run, final sha256 {reference}")

        # B: held at PAUSE; SIGUSR1 to node 1's workers only.
        pair = start_pair(root, "b", lambda r: ["--ckpt-dir", ckpt(root, "b", r),
                                                 "--pause-at", str(PAUSE)])
        pair[0].wait_line(f"paused at step {PAUSE}")
        workers = pair[1].worker_pids()
        if len(workers) != NPROC:
            fail(f"node 1 printed {len(workers)} worker pids, want {NPROC}", pair[1])
        for pid in workers:
            os.kill(pid, signal.SIGUSR1)
        pair[0].wait_line(f"idle after step {PAUSE}")
        check_layout(root, "b", [25, PAUSE])
        for n in pair:
            n.proc.send_signal(signal.SIGTERM)
        for n in pair:
            n.wait_exit()
            for pid in n.worker_pids():
                try:
                    os.kill(pid, 0)
                    fail(f"worker {pid} of node {n.node_rank} outlived its launcher", n)
                except ProcessLookupError:
                    pass
        if os.path.exists(os.path.join(ckpt(root, "b", 0), "final_model.pt")):
            fail("the interrupted run finished")
        print(f"ok: SIGUSR1 to node 1 saved step {PAUSE} on both nodes; launchers terminated")

        # C: each node resumes from its own step dir.
        pair = start_pair(root, "b", lambda r: [
            "--ckpt-dir", ckpt(root, "b", r),
            "--resume", os.path.join(ckpt(root, "b", r), f"step_{PAUSE}")])
        pair[0].wait_line(f"at step {PAUSE}")
        resumed = finish_pair(pair, "resumed run")
        if resumed != reference:
            fail(f"resumed run's final sha256 {resumed} != uninterrupted {reference}")
        check_layout(root, "b", [25, PAUSE, 50])
        print("ok: interrupted + resumed run is bit-identical to the uninterrupted one")

        if os.environ.get("SPOTGUARD_LONG_TESTS") == "1":
            long_checks(root)
    finally:
        for n in NODES:
            n.kill()
        shutil.rmtree(root, ignore_errors=True)
    print("PASS")


def long_checks(root):
    # The notice file of node 0 alone requests a save at the paused step.
    notice = os.path.join(root, "notice")
    pair = start_pair(root, "d", lambda r: ["--ckpt-dir", ckpt(root, "d", r),
                                             "--pause-at", "10"],
                      lambda r: {"SPOTGUARD_NOTICE_FILE": notice if r == 0 else
                                 os.path.join(root, "no-notice")})
    pair[0].wait_line("paused at step 10")
    with open(notice, "w"):
        pass
    pair[0].wait_line("idle after step 10")
    check_layout(root, "d", [10])
    for n in pair:
        n.kill()
    print("ok: the notice file of node 0 saved step 10 on both nodes")

    # Nodes resumed from different steps: refused on every rank.
    pair = start_pair(root, "d", lambda r: [
        "--ckpt-dir", ckpt(root, "d", r),
        "--resume", os.path.join(ckpt(root, "b", r), f"step_{25 if r == 0 else PAUSE}")])
    for n in pair:
        if n.wait_exit() == 0:
            fail(f"node {n.node_rank} resumed from mismatched steps", n)
        n.wait_line("shards are of different steps")
    print("ok: a resume from different steps is refused")


if __name__ == "__main__":
    main()
