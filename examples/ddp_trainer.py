#!/usr/bin/env python3
"""A multi-node data-parallel trainer for spotguard's multi-node jobs
(docs/multi-node.md), started by torchrun with the gloo backend on CPU
(Debian's python3-torch, torch 1.13):

  torchrun --nnodes 2 --node_rank R --master_addr A --master_port P \
           --nproc_per_node K --redirects 1 --tee 1 \
      examples/ddp_trainer.py [--steps 200] [--seed 0] [--save-every 50]
                              [--ckpt-dir DIR] [--resume STEPDIR] [--final FILE]

What it shows:
  * Sharded state, as FSDP/ZeRO keep it. Every rank computes the gradient of
    the whole model on its own batch; the gradients are averaged with one
    all-reduce. The flattened parameter vector is cut into world_size equal
    slices; rank r owns slice r: it alone holds the Adam moments of that slice,
    updates it, and saves it. An all-gather of the slices rebuilds the full
    parameters on every rank after each step and after a resume.
  * Determinism. The initial model comes from --seed; the batch of (step,
    rank) is a pure function of (seed, step, rank); the arithmetic runs on one
    thread. A run interrupted at any saved step and resumed is bit-identical
    to an uninterrupted one with the same seed and the same world size.
  * Saving on request at one step on every rank. A rank asked for a
    checkpoint (SIGUSR1, or the file named by SPOTGUARD_NOTICE_FILE exists)
    only raises a flag; after every step the ranks all-reduce the flag with
    MAX, so all of them save the same step even when only one node was asked.
    They also save every --save-every steps.
  * No shared filesystem. Each rank writes its shard into its own node's
    --ckpt-dir (default $SPOTGUARD_CHECKPOINT_DIR).

Checkpoint layout (one directory per saved step, on every node):

  <ckpt_dir>/step_<N>/shard_<rank>.pt   this node's ranks only; torch.save of
        {"step", "rank", "world_size", "nnodes", "seed", "numel",
         "params" (the rank's slice), "exp_avg", "exp_avg_sq"};
        written to ".shard_<rank>.pt.tmp", fsynced, renamed.
  <ckpt_dir>/step_<N>/node_<node_rank>.json   written by the node's local
        rank 0 after a barrier that every rank of every node reaches only
        once its shard is renamed in; lists this node's shard files with
        their sizes and SHA-256 (temporary name, fsync, rename).
  <ckpt_dir>/step_<N>/.metadata   on the node of global rank 0 only, JSON,
        written last (temporary name ".metadata.tmp", fsync, rename) after a
        second barrier that follows every node's node_<R>.json.

A save into an existing step_<N> (a run that went back to an older snapshot
passes step N again) first removes that directory's markers, then a barrier,
so a marker never describes the shards of another save.

"Complete": on any node, step_<N> is complete when node_<node_rank>.json is
there (its shards are all renamed in, and so is every other node's shard of
step N); on global rank 0's node, step_<N> is complete when .metadata is there
(every node had written its node_<R>.json). Nothing is written into step_<N>
after .metadata, so the dcp preset's rule (".metadata present and no file newer
than it") holds on rank 0's node. torch 1.13 has no torch.distributed.checkpoint,
hence this layout rather than DCP's.

Resume: --resume STEPDIR (or $SPOTGUARD_RESUME_FROM), a step directory on this
node holding this node's shards (the node keeps its node rank; the world size
must be the one that saved). Every rank loads its own shard; the ranks check
that they all resume the same step; an all-gather rebuilds the parameters.

Test hooks: --pause-at S makes every rank wait after step S until a
checkpoint is requested, save it, and then idle until it is terminated, so a
test can interrupt a run at a chosen step without a race. It may be given
more than once. With --pause-once-dir D, a pause at S happens only while
D/paused_S does not exist when the rank starts; rank 0 creates that file when
it pauses, so a later run that passes step S again (after a resume from an
earlier step) goes on.

At the end rank 0 writes the parameters to --final (default
<ckpt_dir>/final_model.pt), their SHA-256 to <final>.sha256, and prints
"final sha256 <hex>". Rank 0 prints "step <N> loss <x>" after every step.
SIGTERM ends a rank at once (default action); the process group has a
timeout, so the ranks of other nodes do not wait in a collective forever.
"""
import argparse
import datetime
import hashlib
import json
import os
import signal
import sys
import time

# SIGUSR1 is caught before torch is imported (a second or more): a request
# that arrives while the worker starts is kept, instead of Python's default
# action for SIGUSR1, which ends the process.
_usr1 = [False]
signal.signal(signal.SIGUSR1, lambda signum, frame: _usr1.__setitem__(0, True))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

IN_FEATURES = 64
OUT_FEATURES = 8
BATCH = 32
LR = 1e-3
BETAS = (0.9, 0.999)
EPS = 1e-8

class Requests:
    """A checkpoint request of this rank: SIGUSR1 since the last save, or a
    notice file not yet answered (one save per appearance of the file)."""

    def __init__(self, notice_file):
        self.notice_file = notice_file
        self.notice_answered = False

    def pending(self):
        notice = bool(self.notice_file) and os.path.exists(self.notice_file)
        if not notice:
            self.notice_answered = False
        return _usr1[0] or (notice and not self.notice_answered)

    def taken(self):
        """Called just before a save: what was asked so far is answered."""
        _usr1[0] = False
        if self.notice_file and os.path.exists(self.notice_file):
            self.notice_answered = True


def parse_args():
    ap = argparse.ArgumentParser(description="multi-node sharded trainer (torchrun, gloo)")
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--width", type=int, default=512)
    ap.add_argument("--save-every", type=int, default=50, help="0 = only on request")
    ap.add_argument("--ckpt-dir", default=os.environ.get("SPOTGUARD_CHECKPOINT_DIR", ""))
    ap.add_argument("--resume", default=os.environ.get("SPOTGUARD_RESUME_FROM", ""))
    ap.add_argument("--final", default="")
    ap.add_argument("--pause-at", type=int, action="append", default=[],
                    help="test hook, may be repeated (see the module's doc)")
    ap.add_argument("--pause-once-dir", default="",
                    help="test hook: pause at a step only while <dir>/paused_<step> is absent")
    ap.add_argument("--timeout", type=float, default=30.0,
                    help="seconds a collective may wait for a peer")
    args = ap.parse_args()
    if not args.ckpt_dir:
        ap.error("--ckpt-dir or SPOTGUARD_CHECKPOINT_DIR is required")
    if args.steps < 0 or args.save_every < 0:
        ap.error("--steps and --save-every must not be negative")
    return args


def build_model(seed, width):
    torch.manual_seed(seed)
    return torch.nn.Sequential(
        torch.nn.Linear(IN_FEATURES, width), torch.nn.ReLU(),
        torch.nn.Linear(width, width), torch.nn.ReLU(),
        torch.nn.Linear(width, OUT_FEATURES))


def teacher(seed):
    gen = torch.Generator().manual_seed(seed + 7919)
    return torch.randn(IN_FEATURES, OUT_FEATURES, generator=gen)


def batch(seed, step, rank, w_teacher):
    """The batch of `rank` at `step`: a pure function of (seed, step, rank)."""
    gen = torch.Generator().manual_seed(((seed * 1000003 + step) * 1009 + rank) % (1 << 62))
    x = torch.randn(BATCH, IN_FEATURES, generator=gen)
    return x, torch.sin(x @ w_teacher)


class Sharded:
    """The flat parameter vector cut into world_size equal slices (padded);
    this rank's slice with its Adam moments."""

    def __init__(self, model, rank, world):
        self.params = list(model.parameters())
        self.numel = sum(p.numel() for p in self.params)
        self.chunk = -(-self.numel // world)
        self.rank, self.world = rank, world
        flat = torch.zeros(self.chunk * world)
        flat[:self.numel] = torch.nn.utils.parameters_to_vector(self.params).detach()
        self.mine = flat[rank * self.chunk:(rank + 1) * self.chunk].clone()
        self.exp_avg = torch.zeros(self.chunk)
        self.exp_avg_sq = torch.zeros(self.chunk)

    def flat_grad(self):
        flat = torch.zeros(self.chunk * self.world)
        flat[:self.numel] = torch.cat([p.grad.reshape(-1) for p in self.params])
        return flat

    def adam_step(self, grad_slice, t):
        b1, b2 = BETAS
        self.exp_avg.mul_(b1).add_(grad_slice, alpha=1 - b1)
        self.exp_avg_sq.mul_(b2).addcmul_(grad_slice, grad_slice, value=1 - b2)
        denom = (self.exp_avg_sq / (1 - b2 ** t)).sqrt_().add_(EPS)
        self.mine.addcdiv_(self.exp_avg, denom, value=-LR / (1 - b1 ** t))

    def gather(self):
        """Every rank's slice to every rank; copies them into the model."""
        parts = [torch.empty(self.chunk) for _ in range(self.world)]
        dist.all_gather(parts, self.mine)
        flat = torch.cat(parts)[:self.numel]
        with torch.no_grad():
            torch.nn.utils.vector_to_parameters(flat, self.params)
        return flat


def write_atomically(path, write):
    tmp = os.path.join(os.path.dirname(path), "." + os.path.basename(path) + ".tmp")
    with open(tmp, "wb") as f:
        write(f)
        f.flush()
        os.fsync(f.fileno())
    os.rename(tmp, path)


def fsync_dir(path):
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def save(args, topo, shard, step):
    rank, node_rank, local_rank = topo["rank"], topo["node_rank"], topo["local_rank"]
    step_dir = os.path.join(args.ckpt_dir, f"step_{step}")
    os.makedirs(step_dir, exist_ok=True)
    # A run that went back to an older snapshot passes this step again: the
    # markers of the earlier save go before any shard of this one lands.
    if local_rank == 0:
        for stale in (f"node_{node_rank}.json", ".metadata"):
            try:
                os.remove(os.path.join(step_dir, stale))
            except FileNotFoundError:
                pass
    dist.barrier()  # no marker describes the shards about to be replaced
    state = {"step": step, "rank": rank, "world_size": topo["world"], "nnodes": topo["nnodes"],
             "seed": args.seed, "numel": shard.numel, "params": shard.mine,
             "exp_avg": shard.exp_avg, "exp_avg_sq": shard.exp_avg_sq}
    write_atomically(os.path.join(step_dir, f"shard_{rank}.pt"), lambda f: torch.save(state, f))
    dist.barrier()  # every shard of every node is renamed in
    if local_rank == 0:
        first = node_rank * topo["local_world"]
        names = [f"shard_{r}.pt" for r in range(first, first + topo["local_world"])]
        node = {"step": step, "node_rank": node_rank, "nnodes": topo["nnodes"],
                "world_size": topo["world"],
                "shards": [{"name": n, "size": os.path.getsize(os.path.join(step_dir, n)),
                            "sha256": sha256_file(os.path.join(step_dir, n))} for n in names]}
        write_atomically(os.path.join(step_dir, f"node_{node_rank}.json"),
                         lambda f: f.write(json.dumps(node, indent=1).encode()))
        fsync_dir(step_dir)
    dist.barrier()  # every node's node_<R>.json is there
    if rank == 0:
        meta = {"format": "spotguard-ddp-example 1", "step": step, "seed": args.seed,
                "width": args.width, "world_size": topo["world"], "nnodes": topo["nnodes"],
                "nproc_per_node": topo["local_world"], "numel": shard.numel,
                "shard_of_rank": {str(r): f"shard_{r}.pt" for r in range(topo["world"])}}
        write_atomically(os.path.join(step_dir, ".metadata"),
                         lambda f: f.write(json.dumps(meta, indent=1).encode()))
        fsync_dir(step_dir)
        print(f"saved step {step} {step_dir}", flush=True)


def load(args, topo, shard):
    """This rank's shard of --resume; returns the step every rank agrees on."""
    rank = topo["rank"]
    marker = os.path.join(args.resume, f"node_{topo['node_rank']}.json")
    path = os.path.join(args.resume, f"shard_{rank}.pt")
    problem = ""
    if not os.path.isfile(marker):
        problem = f"{args.resume} is not a complete step directory of node {topo['node_rank']}: {marker} is missing"
    elif not os.path.isfile(path):
        problem = f"{args.resume} holds no shard of rank {rank}: {path} is missing"
    else:
        try:
            state = torch.load(path)
        except Exception as e:  # a damaged file: refused below, on every rank
            state, problem = None, f"{path} cannot be read: {e}"
    keys = {"step", "rank", "world_size", "seed", "numel", "params", "exp_avg", "exp_avg_sq"}
    if not problem and not (isinstance(state, dict) and keys <= state.keys()):
        problem = f"{path} is not a shard of this trainer (no {sorted(keys)})"
    if not problem:
        if state["world_size"] != topo["world"] or state["rank"] != rank:
            problem = (f"{path} was saved by rank {state['rank']} of {state['world_size']}, "
                       f"this is rank {rank} of {topo['world']}")
        elif state["numel"] != shard.numel or state["params"].numel() != shard.chunk:
            problem = f"{path} holds {state['numel']} parameters, the model has {shard.numel} (other --width?)"
        elif state["seed"] != args.seed:
            problem = f"{path} was saved with --seed {state['seed']}, this run has --seed {args.seed}"
    step = -1 if problem else int(state["step"])
    # Every rank learns whether all of them could load, and the same step.
    lo_hi = torch.tensor([-step, step], dtype=torch.int64)
    dist.all_reduce(lo_hi, op=dist.ReduceOp.MAX)
    if problem:
        sys.exit(f"ddp_trainer: rank {rank}: cannot resume: {problem}")
    if -lo_hi[0] != lo_hi[1]:
        sys.exit(f"ddp_trainer: rank {rank}: cannot resume: the ranks' shards are of different "
                 f"steps (this one {step}; from {-int(lo_hi[0])} to {int(lo_hi[1])}) or a rank failed")
    shard.mine.copy_(state["params"])
    shard.exp_avg.copy_(state["exp_avg"])
    shard.exp_avg_sq.copy_(state["exp_avg_sq"])
    return step


def agree(flag):
    """True on every rank when any rank says True."""
    t = torch.tensor([1 if flag else 0], dtype=torch.int32)
    dist.all_reduce(t, op=dist.ReduceOp.MAX)
    return bool(t.item())


def pause(args, topo, shard, step, requests):
    """Test hook: wait for a checkpoint request, save it, idle until killed."""
    if topo["rank"] == 0:
        if args.pause_once_dir:
            os.makedirs(args.pause_once_dir, exist_ok=True)
            open(os.path.join(args.pause_once_dir, f"paused_{step}"), "w").close()
        print(f"paused at step {step}", flush=True)
    while not agree(requests.pending()):
        time.sleep(0.02)
    requests.taken()
    save(args, topo, shard, step)
    if topo["rank"] == 0:
        print(f"idle after step {step}", flush=True)
    while True:
        time.sleep(1)


def finish(args, flat):
    final = args.final or os.path.join(args.ckpt_dir, "final_model.pt")
    digest = hashlib.sha256(flat.detach().numpy().tobytes()).hexdigest()
    os.makedirs(os.path.dirname(os.path.abspath(final)), exist_ok=True)
    write_atomically(final, lambda f: torch.save({"flat_params": flat.detach().clone()}, f))
    write_atomically(final + ".sha256", lambda f: f.write((digest + "\n").encode()))
    print(f"final sha256 {digest}", flush=True)


def main():
    args = parse_args()
    requests = Requests(os.environ.get("SPOTGUARD_NOTICE_FILE", ""))
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    dist.init_process_group("gloo", timeout=datetime.timedelta(seconds=args.timeout))
    topo = {"rank": dist.get_rank(), "world": dist.get_world_size(),
            "local_rank": int(os.environ.get("LOCAL_RANK", "0")),
            "local_world": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
            "node_rank": int(os.environ.get("GROUP_RANK", "0"))}
    topo["nnodes"] = topo["world"] // topo["local_world"]
    if topo["rank"] != topo["node_rank"] * topo["local_world"] + topo["local_rank"]:
        sys.exit("ddp_trainer: ranks must be laid out node by node (static rendezvous)")
    print(f"rank {topo['rank']} node {topo['node_rank']} pid {os.getpid()}", flush=True)

    model = build_model(args.seed, args.width)
    shard = Sharded(model, topo["rank"], topo["world"])
    w_teacher = teacher(args.seed)
    pauses = {s for s in args.pause_at
              if not (args.pause_once_dir and
                      os.path.exists(os.path.join(args.pause_once_dir, f"paused_{s}")))}
    step = 0
    if args.resume:
        step = load(args, topo, shard)
        if topo["rank"] == 0:
            print(f"resumed from {args.resume} at step {step}", flush=True)
    flat = shard.gather()

    while step < args.steps:
        x, y = batch(args.seed, step, topo["rank"], w_teacher)
        for p in shard.params:
            p.grad = None
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        grad = shard.flat_grad()
        dist.all_reduce(grad)
        grad.div_(topo["world"])
        step += 1
        r = topo["rank"]
        shard.adam_step(grad[r * shard.chunk:(r + 1) * shard.chunk], step)
        flat = shard.gather()
        if topo["rank"] == 0:
            print(f"step {step} loss {loss.item():.6f}", flush=True)
        if step in pauses:
            pause(args, topo, shard, step, requests)
        scheduled = args.save_every > 0 and step % args.save_every == 0
        if agree(requests.pending()) or scheduled:
            requests.taken()
            save(args, topo, shard, step)

    if topo["rank"] == 0:
        finish(args, flat)
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
