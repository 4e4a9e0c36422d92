"""Per-rank training jobs for test_hooks.py and test_wait_free.py: the digits MLP of
ddp_training.py under DDP with comm hooks (tidegate's and PyTorch's), a checkpoint restored in
a new process group, and WaitFreeDataParallel."""

import copy

import torch
import torch.distributed as dist
from torch import nn
from torch.distributed.algorithms.ddp_comm_hooks import default_hooks
from torch.distributed.algorithms.ddp_comm_hooks import powerSGD_hook as powersgd
from torch.nn.parallel import DistributedDataParallel

import tidegate.torch
from ddp_training import BATCH, EPOCHS, LEARNING_RATE, digits, flat_parameters, make_model
from harness import GROUP_TIMEOUT
from tidegate.torch import hooks

# The first TRAIN digits train (sharded over the ranks), the remaining 297 measure accuracy.
TRAIN = 1500


def _data(rank, size):
    x, y = digits()
    return (x[:TRAIN][rank::size], y[:TRAIN][rank::size]), (x[TRAIN:], y[TRAIN:])


def accuracy(model, test):
    x, y = test
    with torch.no_grad():
        return (model(x).argmax(dim=1) == y).float().mean().item() * 100.0


def steps_per_epoch(size):
    return (TRAIN // size) // BATCH


def run_steps(model, optimizer, shard, start, stop, before_step=None):
    """Steps start..stop-1 of the schedule: step s trains on batch s mod steps_per_epoch."""
    xs, ys = shard
    per_epoch = len(xs) // BATCH
    for step in range(start, stop):
        batch = slice((step % per_epoch) * BATCH, (step % per_epoch + 1) * BATCH)
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(xs[batch]), ys[batch]).backward()
        if before_step is not None:
            before_step()
        optimizer.step()


def new_tidegate_group():
    """A group of every rank with a communicator of its own (so, no residuals yet)."""
    return dist.new_group(backend="tidegate", timeout=GROUP_TIMEOUT)


def ddp_with_hook(group, hook, module=None):
    """(DDP model, optimizer, hook state). hook: None (dense), ("torch", "fp16"),
    ("torch", "powersgd"), or ("tidegate", codec, error_feedback[, allowed])."""
    model = DistributedDataParallel(module if module is not None else make_model(),
                                    process_group=group)
    state = None
    if hook == ("torch", "fp16"):
        model.register_comm_hook(group, default_hooks.fp16_compress_hook)
    elif hook == ("torch", "powersgd"):
        state = powersgd.PowerSGDState(process_group=group, matrix_approximation_rank=2,
                                       start_powerSGD_iter=3, random_seed=0)
        model.register_comm_hook(state, powersgd.powerSGD_hook)
    elif hook is not None:
        _, codec, error_feedback, *allowed = hook
        state = hooks.CompressionState(group, codec=codec, error_feedback=error_feedback,
                                       allowed=allowed[0] if allowed else None)
        model.register_comm_hook(state, hooks.compressed_allreduce_hook)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    return model, optimizer, state


def hook_accuracies(rank, world_size, configs, epochs):
    """{name: (final parameters, test accuracy, hook layout resets)} for each (name, hook) of
    `configs`, each trained `epochs` epochs on a fresh tidegate group."""
    dist.init_process_group("tidegate", timeout=GROUP_TIMEOUT)
    shard, test = _data(rank, world_size)
    results = {}
    for name, hook in configs:
        model, optimizer, state = ddp_with_hook(new_tidegate_group(), hook)
        run_steps(model, optimizer, shard, 0, epochs * steps_per_epoch(world_size))
        resets = getattr(state, "layout_resets", None)
        results[name] = (flat_parameters(model.module), accuracy(model.module, test), resets)
    return results


def checkpoint_continuation(rank, world_size, codec, saved_at, more):
    """Trains `saved_at` steps with the tidegate hook (codec with EF), checkpoints model,
    optimizer and hook state, and continues `more` steps (A); then, each in a new process
    group, restores the checkpoint and continues `more` steps, with the hook state (B) and
    without it (C: what forgetting the residuals gives)."""
    dist.init_process_group("tidegate", timeout=GROUP_TIMEOUT)
    shard, _ = _data(rank, world_size)
    hook = ("tidegate", codec, True)
    model, optimizer, state = ddp_with_hook(dist.group.WORLD, hook)
    run_steps(model, optimizer, shard, 0, saved_at)
    checkpoint = {"model": copy.deepcopy(model.module.state_dict()),
                  "optimizer": copy.deepcopy(optimizer.state_dict()),
                  "hook": state.state_dict()}
    run_steps(model, optimizer, shard, saved_at, saved_at + more)
    results = {"A": flat_parameters(model.module)}
    for name, restore_hook in (("B", True), ("C", False)):
        module = make_model()
        module.load_state_dict(checkpoint["model"])
        model, optimizer, state = ddp_with_hook(new_tidegate_group(), hook, module)
        optimizer.load_state_dict(checkpoint["optimizer"])
        if restore_hook:
            state.load_state_dict(checkpoint["hook"])
        run_steps(model, optimizer, shard, saved_at, saved_at + more)
        results[name] = flat_parameters(model.module)
    results["residual_bytes"] = len(checkpoint["hook"]["residuals"])
    return results


class ReversedRegistration(nn.Module):
    """Registers its layers in the opposite order of use, and one that forward never uses."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(1)
        self.unused = nn.Linear(4, 4)
        self.second = nn.Linear(32, 10)
        self.first = nn.Linear(64, 32)

    def forward(self, x):
        return self.second(torch.relu(self.first(x)))


def wait_free_against_ddp(rank, world_size):
    """WaitFreeDataParallel (dense) and DDP (dense, on another tidegate group) trained alike:
    {name: (parameters, accuracy)}, plus the priorities and session statistics of a model
    whose registration order differs from its forward order."""
    dist.init_process_group("tidegate", timeout=GROUP_TIMEOUT)
    shard, test = _data(rank, world_size)
    steps = EPOCHS * steps_per_epoch(world_size)
    results = {}

    model = tidegate.torch.WaitFreeDataParallel(make_model())
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
    run_steps(model, optimizer, shard, 0, steps, before_step=model.synchronize)
    results["wait_free"] = (flat_parameters(model.module), accuracy(model.module, test))
    model.close()

    model, optimizer, _ = ddp_with_hook(new_tidegate_group(), None)
    run_steps(model, optimizer, shard, 0, steps)
    results["ddp"] = (flat_parameters(model.module), accuracy(model.module, test))

    group = new_tidegate_group()
    model = tidegate.torch.WaitFreeDataParallel(ReversedRegistration(), process_group=group)
    optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE)
    run_steps(model, optimizer, shard, 0, 3, before_step=model.synchronize)
    model.synchronize()
    results["priorities"] = model.priorities()
    results["stats"] = model.last_stats
    results["unused_grad"] = model.module.unused.weight.grad.clone()
    # The group's shutdown closes the session the wrapper still holds.
    dist.destroy_process_group(group)
    try:
        model.synchronize()
        results["after_group_destroyed"] = "synchronize() still worked"
    except RuntimeError as error:
        results["after_group_destroyed"] = str(error)
    return results


def hook_on_gloo(rank, world_size):
    """True when a CompressionState on a Gloo group is refused with a message naming it."""
    dist.init_process_group("gloo", timeout=GROUP_TIMEOUT)
    try:
        hooks.CompressionState(codec="fp16")
    except ValueError as error:
        return "tidegate" in str(error) and "gloo" in str(error)
    return False


def wait_free_accuracies(rank, world_size, codecs, epochs):
    """{codec: (parameters, accuracy)} of WaitFreeDataParallel trained `epochs` epochs with
    each codec (None: dense), each on a fresh tidegate group (so fresh residuals)."""
    dist.init_process_group("tidegate", timeout=GROUP_TIMEOUT)
    shard, test = _data(rank, world_size)
    results = {}
    for codec in codecs:
        model = tidegate.torch.WaitFreeDataParallel(make_model(), new_tidegate_group(),
                                                    codec=codec)
        optimizer = torch.optim.SGD(model.parameters(), lr=LEARNING_RATE, momentum=0.9)
        run_steps(model, optimizer, shard, 0, epochs * steps_per_epoch(world_size),
                  before_step=model.synchronize)
        results[codec] = (flat_parameters(model.module), accuracy(model.module, test))
        model.close()
    return results
