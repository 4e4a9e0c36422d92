"""DDP training of a small MLP on scikit-learn's digits, per rank (run by test_ddp.py)."""

import datetime
import os
import signal
import time

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel

from harness import init_groups

EPOCHS = 4
BATCH = 16
LEARNING_RATE = 0.05


def digits():
    """The 1797 8x8 digits (bundled with scikit-learn, no download), scaled to [0, 1]."""
    data = load_digits()
    return (torch.tensor(data.data, dtype=torch.float32) / 16.0,
            torch.tensor(data.target, dtype=torch.int64))


def make_model():
    torch.manual_seed(0)  # the same initial weights on every rank and for every backend
    return nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 10))


def flat_parameters(model):
    return torch.cat([p.detach().reshape(-1) for p in model.parameters()])


def train(group, hook=None, stop_after_steps=None, on_step=None):
    """Train a fresh DDP model on `group`; return (final parameters, per-epoch mean losses).

    `hook` names a PyTorch comm hook: None, "fp16" or "powersgd". Each rank trains on its own
    shard, every rank the same number of steps.
    """
    x, y = digits()
    rank, size = dist.get_rank(group), dist.get_world_size(group)
    xs, ys = x[rank::size], y[rank::size]
    steps_per_epoch = (len(x) // size) // BATCH
    model = DistributedDataParallel(make_model(), process_group=group)
    if hook == "fp16":
        model.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif hook == "powersgd":
        state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                       start_powerSGD_iter=3, random_seed=0)
        model.register_comm_hook(state, powersgd.powerSGD_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    losses = []
    step = 0
    for _ in range(EPOCHS):
        total = 0.0
        for i in range(steps_per_epoch):
            if on_step is not None:
                on_step(step)
            batch = slice(i * BATCH, (i + 1) * BATCH)
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(xs[batch]), ys[batch])
            loss.backward()
            optimizer.step()
            total += loss.item()
            step += 1
            if stop_after_steps is not None and step >= stop_after_steps:
                return flat_parameters(model.module), losses
        losses.append(total / steps_per_epoch)
    return flat_parameters(model.module), losses


def train_on_both_backends(rank, world_size):
    """{(backend, hook): (parameters, losses)} for tidegate and Gloo, without and with hooks."""
    gloo = init_groups()
    runs = {}
    for hook in (None, "fp16", "powersgd"):
        for name, group in (("tidegate", dist.group.WORLD), ("gloo", gloo)):
            runs[(name, hook)] = train(group, hook)
    # PowerSGD's orthogonalisation amplifies reduction-order differences over a long run; its
    # first steps (two compressed ones) show agreement at float32 precision.
    for name, group in (("tidegate", dist.group.WORLD), ("gloo", gloo)):
        runs[(name, "powersgd.short")] = train(group, "powersgd", stop_after_steps=5)
    return runs


def train_until_a_rank_dies(rank, world_size, victim, fatal_step, timeout_s):
    """The victim kills itself (SIGKILL) at `fatal_step`; the others report what they saw."""
    dist.init_process_group("tidegate", timeout=datetime.timedelta(seconds=timeout_s))
    last_step_started = [time.monotonic()]

    def on_step(step):
        if rank == victim and step == fatal_step:
            os.kill(os.getpid(), signal.SIGKILL)
        last_step_started[0] = time.monotonic()

    try:
        train(dist.group.WORLD, on_step=on_step)
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return {"type": type(error).__name__, "message": str(error),
                "seconds": time.monotonic() - last_step_started[0]}
    return {"type": None, "message": "training finished although a rank died", "seconds": 0}

