"""DDP on backend "tidegate": the same training as on Gloo, with and without PyTorch's comm
hooks (fp16 compression, PowerSGD), and a rank that dies mid-training."""

import pytest
import torch

import ddp_training
from harness import run_ranks

WORLD_SIZE = 4
# float32 sums in a different order differ in the last bits; over a short training run those
# differences stay far below this.
FLOAT32_TOLERANCE = 1e-4
_runs = []


@pytest.fixture(scope="module")
def runs():
    """Per-rank {(backend, hook): (parameters, losses)} of one 4-rank job."""
    if not _runs:
        _runs.extend(run_ranks(ddp_training.train_on_both_backends, WORLD_SIZE, timeout=300))
    return _runs


@pytest.mark.parametrize("hook", [None, "fp16", "powersgd"])
def test_parameters_bitwise_identical_across_ranks(runs, hook):
    first = runs[0][("tidegate", hook)][0]
    for rank, run in enumerate(runs):
        assert torch.equal(run[("tidegate", hook)][0], first), f"rank {rank} differs from rank 0"


def test_training_matches_gloo_within_float32_reduction_order(runs):
    tidegate, _ = runs[0][("tidegate", None)]
    gloo, _ = runs[0][("gloo", None)]
    difference = (tidegate - gloo).abs().max().item()
    assert difference <= FLOAT32_TOLERANCE, f"max parameter difference {difference}"


@pytest.mark.parametrize("hook,tolerance", [("fp16", 1e-2), ("powersgd.short", FLOAT32_TOLERANCE),
                                            ("powersgd", 5e-2)])
def test_hooks_match_gloo(runs, hook, tolerance):
    # The hooks' own rounding (fp16 casts; PowerSGD's low-rank approximation and
    # orthogonalisation) amplifies reduction-order differences over a run, hence the looser
    # tolerances of the full runs; both backends run the same hook code.
    tidegate, _ = runs[0][("tidegate", hook)]
    gloo, _ = runs[0][("gloo", hook)]
    difference = (tidegate - gloo).abs().max().item()
    assert difference <= tolerance, f"max parameter difference {difference}"


@pytest.mark.parametrize("hook", [None, "fp16", "powersgd"])
def test_training_learns(runs, hook):
    losses = runs[0][("tidegate", hook)][1]
    assert losses[-1] < 0.5 * losses[0], f"per-epoch losses {losses}"


def test_killed_rank_makes_the_others_raise_within_the_timeout():
    timeout_s = 30
    victim = 2
    outcomes = run_ranks(ddp_training.train_until_a_rank_dies, 3, args=(victim, 5, timeout_s),
                         timeout=120, may_die=(victim,))
    for rank, outcome in enumerate(outcomes):
        if rank == victim:
            continue
        assert outcome["type"] is not None, f"rank {rank}: {outcome['message']}"
        assert outcome["seconds"] < timeout_s, f"rank {rank} took {outcome['seconds']:.1f} s"
        assert "tidegate" in outcome["message"], f"rank {rank}: {outcome['message']}"
