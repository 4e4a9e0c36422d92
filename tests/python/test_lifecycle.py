"""A tidegate group's life on 2 local ranks: the group's timeout is tidegate's deadline, abort
fails pending work everywhere, and a store that outlives a group can host the next one."""

import pytest

import lifecycle_scenarios
from harness import free_port, run_ranks

_job = []


@pytest.fixture(scope="module")
def outcomes():
    if not _job:
        _job.extend(run_ranks(lifecycle_scenarios.run_all, 2, timeout=180))
    return _job


def test_group_timeout_becomes_tidegates_deadline(outcomes):
    seen = outcomes[0]["timeout"]
    assert seen["name"] == "tidegate"
    assert seen["options_timeout_s"] == lifecycle_scenarios.SHORT_TIMEOUT_S
    assert seen["type"] == "DistBackendError", seen
    assert "timeout" in seen["message"], seen
    # Raised by tidegate's own deadline: after the group's 3 s, well before the suite's 60 s.
    assert lifecycle_scenarios.SHORT_TIMEOUT_S - 0.5 <= seen["seconds"] < 20, seen


def test_abort_fails_pending_and_later_work(outcomes):
    rank0 = outcomes[0]["abort"]
    assert rank0["pending"]["type"] == "DistBackendError", rank0
    assert "abort" in rank0["pending"]["message"], rank0
    assert rank0["after"]["type"] == "DistBackendError", rank0
    assert "aborted" in rank0["after"]["message"], rank0


def test_abort_reaches_the_peer(outcomes):
    peer = outcomes[1]["abort"]["peer"]
    assert peer["type"] == "DistBackendError", peer
    assert peer["seconds"] < 20, peer


def test_reinitialisation_on_the_same_store():
    sums = run_ranks(lifecycle_scenarios.reinitialise_on_one_store, 2, args=(free_port(),),
                     timeout=180)
    assert sums == [[1.0, 21.0], [1.0, 21.0]]


def test_a_configured_job_secret_is_used():
    outcomes = run_ranks(lifecycle_scenarios.with_job_secret, 2, args=(False,), timeout=120)
    assert [o["value"] for o in outcomes] == [[2.0] * 3] * 2, outcomes


def test_ranks_with_different_secrets_fail_to_connect():
    # Every rank fails, within the group's timeout (plus start-up). libtidegate logs the
    # authentication failure ("its job secret differs from ours") but reports "no transport could
    # start" once the timeout has passed: the reason is in the log, not yet in the exception.
    outcomes = run_ranks(lifecycle_scenarios.with_job_secret, 2, args=(True,), timeout=120)
    for rank, seen in enumerate(outcomes):
        assert seen["type"] == "DistBackendError", f"rank {rank}: {seen}"
        assert "process group creation" in seen["message"], f"rank {rank}: {seen}"
        assert seen["seconds"] < lifecycle_scenarios.SECRET_MISMATCH_TIMEOUT_S + 15, \
            f"rank {rank}: {seen}"
