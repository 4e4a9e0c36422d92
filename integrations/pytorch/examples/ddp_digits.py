"""A plain DDP training script: a small MLP on scikit-learn's digits.

Nothing in it is specific to tidegate but the default backend name; it does not even import
tidegate (torch.distributed finds the backend through the package's entry point). Run it:

    torchrun --nproc-per-node 4 ddp_digits.py                    # tidegate
    torchrun --nproc-per-node 4 ddp_digits.py --backend gloo     # the same on Gloo
    mpirun -np 4 python -m tidegate.torch ddp_digits.py          # mpirun: the launcher's ranks

Each rank prints its final loss, the test accuracy and a digest of its parameters (the same on
every rank when the gradients were synchronised bit for bit).
"""

import argparse
import hashlib

import torch
import torch.distributed as dist
from sklearn.datasets import load_digits
from torch import nn
from torch.nn.parallel import DistributedDataParallel
from torch.utils.data import DataLoader, DistributedSampler, TensorDataset


def parse_args():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="tidegate")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=0.05)
    return parser.parse_args()


def datasets():
    digits = load_digits()
    x = torch.tensor(digits.data, dtype=torch.float32) / 16.0
    y = torch.tensor(digits.target, dtype=torch.int64)
    split = int(0.8 * len(x))
    return TensorDataset(x[:split], y[:split]), TensorDataset(x[split:], y[split:])


def main():
    args = parse_args()
    dist.init_process_group(backend=args.backend)
    rank, world_size = dist.get_rank(), dist.get_world_size()
    torch.manual_seed(0)
    model = DistributedDataParallel(nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10)))
    train, test = datasets()
    sampler = DistributedSampler(train, shuffle=True, seed=0, drop_last=True)
    loader = DataLoader(train, batch_size=args.batch_size, sampler=sampler)
    optimizer = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
    for epoch in range(args.epochs):
        sampler.set_epoch(epoch)
        for x, y in loader:
            optimizer.zero_grad()
            loss = nn.functional.cross_entropy(model(x), y)
            loss.backward()
            optimizer.step()
    with torch.no_grad():
        x, y = test.tensors
        accuracy = (model(x).argmax(dim=1) == y).float().mean().item()
    digest = hashlib.sha256(
        b"".join(p.detach().numpy().tobytes() for p in model.parameters())).hexdigest()[:16]
    print(f"rank {rank}/{world_size} backend={dist.get_backend()} loss={loss.item():.4f} "
          f"accuracy={accuracy:.3f} params_sha256={digest}", flush=True)
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
