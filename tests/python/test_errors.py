"""Errors on backend "tidegate" surface as Python exceptions carrying tidegate's message, on
every rank, without hangs (4 local ranks, one job)."""

import pytest

import error_scenarios
from harness import run_ranks

WORLD_SIZE = 4
_job = []


@pytest.fixture(scope="module")
def outcomes():
    if not _job:
        _job.extend(run_ranks(error_scenarios.run_all, WORLD_SIZE, timeout=240))
    return _job


@pytest.mark.parametrize("call", ["send", "recv", "isend"])
def test_point_to_point_is_refused_with_the_reason(outcomes, call):
    for rank, result in enumerate(outcomes):
        seen = result["point_to_point"][call]
        assert seen["type"] == "NotImplementedError", f"rank {rank}: {seen}"
        assert "no point-to-point operations" in seen["message"], f"rank {rank}: {seen}"


def test_wait_with_timeout_raises_and_the_collective_still_completes(outcomes):
    seen = outcomes[0]["wait_with_timeout"]
    assert seen["type"] == "DistBackendError", seen
    assert "timeout" in seen["message"] and "Work.wait" in seen["message"], seen
    assert seen["seconds"] < error_scenarios.LATE_BY_S, seen
    for rank, result in enumerate(outcomes):
        assert result["wait_with_timeout"]["value"] == [4.0] * 4, f"rank {rank}"


def test_shape_mismatch_names_the_ranks_on_every_rank(outcomes):
    for rank, result in enumerate(outcomes):
        seen = result["shape_mismatch"]
        assert seen["type"] == "DistBackendError", f"rank {rank}: {seen}"
        message = seen["message"]
        assert "mismatch" in message, f"rank {rank}: {message}"
        assert f"rank {error_scenarios.LATE_RANK}" in message, f"rank {rank}: {message}"
        assert "count" in message, f"rank {rank}: {message}"
        assert seen["seconds"] < 20, f"rank {rank} took {seen['seconds']:.1f} s"


def test_a_failed_group_refuses_later_collectives_at_once(outcomes):
    for rank, result in enumerate(outcomes):
        later = result["shape_mismatch"]["later"]
        assert later["type"] == "DistBackendError", f"rank {rank}: {later}"
        assert later["seconds"] < 5, f"rank {rank}: {later}"


def test_default_group_survives(outcomes):
    for rank, result in enumerate(outcomes):
        assert result["default_group_after"] == [4.0, 4.0], f"rank {rank}"
