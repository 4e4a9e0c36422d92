"""Every collective and dtype on backend "tidegate" against Gloo, on 2 and 4 local ranks.

One job per group size runs every check of collective_checks.py on every rank (starting
processes costs more than the checks); each check is reported as its own test.
"""

import pytest

import collective_checks
from harness import run_ranks

CHECK_NAMES = [name for name, _ in collective_checks.CHECKS]
_jobs = {}


@pytest.fixture(scope="module", params=[2, 4], ids=lambda n: f"{n}ranks")
def outcomes(request):
    """Per-rank {check: None or message} of one job of request.param ranks."""
    world_size = request.param
    if world_size not in _jobs:
        _jobs[world_size] = run_ranks(collective_checks.run_all, world_size, timeout=300)
    return _jobs[world_size]


@pytest.mark.parametrize("check", CHECK_NAMES)
def test_collective(outcomes, check):
    failures = {rank: result[check] for rank, result in enumerate(outcomes) if result[check]}
    assert not failures, "\n".join(f"rank {r}: {m}" for r, m in failures.items())
