"""DDP training-step time of one model on every synchronisation PyTorch users pick from, per
rank, side by side in one job (issue 12): DDP on Gloo, DDP on tidegate, DDP on tidegate with
tidegate's compressed-allreduce hook, and tidegate's WaitFreeDataParallel.

Run by bench/pytorch/run_ddp_step.sh (one rank per network namespace of the emulated cluster,
launched by mpirun); also runs under torchrun. Ranks meet through the c10d TCPStore of
MASTER_ADDR:MASTER_PORT (torchrun's variables, or mpirun's adopted by tidegate.torch).

The model is a multi-layer perceptron whose gradients are large against its compute (the
regime where the link decides the step), on random data; every configuration starts from the
same weights and sees the same batches. "local" runs the model with no synchronisation at all:
the compute alone, the lower bound of every step (its parameters differ across ranks). A step is zero_grad, forward, backward (DDP overlaps its
bucket allreduces with it), synchronize for WaitFreeDataParallel, and the optimizer step. Time:
per step, the slowest rank's; the row is the median over the timed steps. Rank 0 prints one
JSON object per configuration (--json FILE also writes them) with the step time, its ratio to
Gloo's, and the largest difference of the final parameters from Gloo's run (dense runs sum in
another order, so a float32-rounding difference, not zero) and between ranks (must be 0).
"""

import argparse
import datetime
import json
import os
import statistics
import time

import torch
import torch.distributed as dist
from torch import nn
from torch.nn.parallel import DistributedDataParallel

import tidegate.torch
from tidegate.torch import adopt_launcher_environment, hooks

TIMEOUT = datetime.timedelta(seconds=120)


def make_model(width, depth):
    torch.manual_seed(0)  # the same initial weights on every rank and in every configuration
    layers = [nn.Linear(1024, width), nn.ReLU()]
    for _ in range(depth - 2):
        layers += [nn.Linear(width, width), nn.ReLU()]
    layers.append(nn.Linear(width, 100))
    return nn.Sequential(*layers)


def batches(rank, steps, batch):
    generator = torch.Generator().manual_seed(1000 + rank)
    return [(torch.randn(batch, 1024, generator=generator),
             torch.randint(0, 100, (batch,), generator=generator)) for _ in range(steps)]


class Local(nn.Module):
    """The model with no synchronisation at all: the compute alone, a step's lower bound."""

    def __init__(self, module):
        super().__init__()
        self.module = module

    def forward(self, x):
        return self.module(x)


def wrap(config, model, group):
    """(model, synchronize or None) for one configuration."""
    if config == "local":
        return Local(model), None
    if config == "wait_free":
        wrapped = tidegate.torch.WaitFreeDataParallel(model, process_group=group)
        return wrapped, wrapped.synchronize
    wrapped = DistributedDataParallel(model, process_group=group)
    if config.startswith("tidegate+"):
        state = hooks.CompressionState(group, codec=config.split("+", 1)[1], error_feedback=True)
        wrapped.register_comm_hook(state, hooks.compressed_allreduce_hook)
    return wrapped, None


def run(config, group, args, data):
    model, synchronize = wrap(config, make_model(args.width, args.depth), group)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    seconds = []
    for x, y in data:
        start = time.perf_counter()
        optimizer.zero_grad()
        nn.functional.cross_entropy(model(x), y).backward()
        if synchronize is not None:
            synchronize()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    module = model.module
    if hasattr(model, "close"):
        model.close()
    params = torch.cat([p.detach().reshape(-1) for p in module.parameters()])
    return seconds[args.warmup:], params


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--width", type=int, default=2048)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--batch", type=int, default=32)
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=6, help="timed steps")
    parser.add_argument("--configs",
                        default="gloo,tidegate,tidegate+topk:ratio=0.01,wait_free,local")
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    for config in args.configs.split(","):
        if config not in ("gloo", "tidegate", "wait_free", "local") and \
                not config.startswith("tidegate+"):
            parser.error(f"unknown configuration {config!r}: gloo, tidegate, tidegate+CODEC, "
                         "wait_free or local")
    adopt_launcher_environment()  # mpirun's rank variables as torch's, unless torchrun set them
    rank = int(os.environ["RANK"])
    size = int(os.environ["WORLD_SIZE"])
    torch.set_num_threads(1)  # four ranks share two cores: one compute thread each
    dist.init_process_group("gloo", rank=rank, world_size=size, timeout=TIMEOUT,
                            init_method="env://")
    tidegate_group = dist.new_group(backend="tidegate", timeout=TIMEOUT)
    data = batches(rank, args.warmup + args.steps, args.batch)
    params_mb = sum(p.numel() for p in make_model(args.width, args.depth).parameters()) * 4 / 2**20
    rows, reference = [], None
    for config in args.configs.split(","):
        group = dist.group.WORLD if config == "gloo" else tidegate_group
        dist.barrier()  # Gloo's, so that every configuration starts together
        seconds, params = run(config, group, args, data)
        # Slowest rank per step, and the parameters of every rank, over Gloo (not timed).
        times = [torch.tensor(seconds, dtype=torch.float64) for _ in range(size)]
        dist.all_gather(times, torch.tensor(seconds, dtype=torch.float64))
        slowest = torch.stack(times).max(dim=0).values.tolist()
        gathered = [torch.empty_like(params) for _ in range(size)]
        dist.all_gather(gathered, params)
        across_ranks = max((g - gathered[0]).abs().max().item() for g in gathered)
        if reference is None:
            reference = gathered[0]
        rows.append({"config": config, "ranks": size, "gradient_MiB": round(params_mb, 1),
                     "batch": args.batch, "timed_steps": args.steps,
                     "step_ms": round(statistics.median(slowest) * 1e3, 1),
                     "steps_ms": [round(s * 1e3, 1) for s in slowest],
                     "max_param_diff_across_ranks": across_ranks,
                     "max_param_diff_vs_first": (gathered[0] - reference).abs().max().item()})
    if rank == 0:
        base = rows[0]["step_ms"]
        out = open(args.json, "w") if args.json else None
        for row in rows:
            row["speedup_vs_" + rows[0]["config"]] = round(base / row["step_ms"], 3)
            line = json.dumps(row)
            print(line, flush=True)
            if out:
                out.write(line + "\n")
        if out:
            out.close()
    dist.destroy_process_group(tidegate_group)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
