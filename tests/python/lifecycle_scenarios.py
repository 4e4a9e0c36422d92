"""Per-rank scenarios about a tidegate group's life (run by test_lifecycle.py): its timeout,
abort, and re-initialisation on a store that outlives the group."""

import datetime
import time

import torch
import torch.distributed as dist

from harness import GROUP_TIMEOUT

SHORT_TIMEOUT_S = 3
SECRET_MISMATCH_TIMEOUT_S = 8


def _failure(call):
    start = time.monotonic()
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return {"type": type(error).__name__, "message": str(error),
                "seconds": time.monotonic() - start}
    return {"type": None, "message": "", "seconds": time.monotonic() - start}


def backend_of(group):
    return group._get_backend(torch.device("cpu"))


def group_timeout_becomes_tidegate_deadline(gloo):
    """Rank 1 never joins rank 0's allreduce on a group with a 3 s timeout: rank 0 fails with
    tidegate's TIMEOUT after about 3 s (not the suite's 60 s)."""
    group = dist.new_group(backend="tidegate",
                           timeout=datetime.timedelta(seconds=SHORT_TIMEOUT_S))
    seen = {"options_timeout_s": backend_of(group).options._timeout.total_seconds(),
            "name": backend_of(group).name()}
    if dist.get_rank() == 0:
        seen.update(_failure(lambda: dist.all_reduce(torch.ones(8), group=group)))
    dist.barrier(group=gloo)
    dist.destroy_process_group(group)
    return seen


def abort_fails_pending_work_here_and_on_peers(gloo):
    group = dist.new_group(backend="tidegate", timeout=GROUP_TIMEOUT)
    # Creation returns on one rank while another may still be finishing it: abort only once
    # every rank is through.
    dist.barrier(group=gloo)
    seen = {}
    if dist.get_rank() == 0:
        work = dist.all_reduce(torch.ones(8), group=group, async_op=True)
        backend_of(group).abort()
        seen["pending"] = _failure(work.wait)
        seen["after"] = _failure(lambda: dist.all_reduce(torch.ones(8), group=group))
        dist.barrier(group=gloo)
    else:
        dist.barrier(group=gloo)  # rank 0 has aborted by now
        seen["peer"] = _failure(lambda: dist.all_reduce(torch.ones(8), group=group))
    dist.destroy_process_group(group)
    return seen


def run_all(rank, world_size):
    dist.init_process_group("tidegate", timeout=GROUP_TIMEOUT)
    gloo = dist.new_group(backend="gloo", timeout=GROUP_TIMEOUT)
    outcomes = {
        "timeout": group_timeout_becomes_tidegate_deadline(gloo),
        "abort": abort_fails_pending_work_here_and_on_peers(gloo),
    }
    dist.barrier(group=gloo)
    return outcomes


def reinitialise_on_one_store(rank, world_size, port):
    """init, allreduce, destroy, twice, on one TCPStore (as torchrun's agent store outlives a
    group): the second communicator must not read the first one's rendezvous keys."""
    store = dist.TCPStore("127.0.0.1", port, world_size, is_master=rank == 0,
                          timeout=GROUP_TIMEOUT)
    sums = []
    for round_ in range(2):
        if round_ == 1 and rank == 0:
            time.sleep(1.0)  # the others reach the store first, where the old keys still are
        dist.init_process_group("tidegate", store=store, rank=rank, world_size=world_size,
                                timeout=GROUP_TIMEOUT)
        t = torch.full((4,), float(rank + 10 * round_))
        dist.all_reduce(t)
        sums.append(t[0].item())
        dist.destroy_process_group()
    return sums


def with_job_secret(rank, world_size, mismatched):
    """Every rank sets TIDEGATE_SECRET (rank 1 a different one when `mismatched`), then creates
    the group and allreduces: tidegate authenticates its data connections with it."""
    import os

    secret = "job-secret-0123456789abcdef"
    os.environ["TIDEGATE_SECRET"] = secret + ("-other" if mismatched and rank == 1 else "")
    start = time.monotonic()
    try:
        # A mismatch shows only when the group's timeout passes: keep that short.
        timeout = datetime.timedelta(seconds=SECRET_MISMATCH_TIMEOUT_S if mismatched else 60)
        dist.init_process_group("tidegate", timeout=timeout)
        t = torch.ones(3)
        dist.all_reduce(t)
        return {"type": None, "value": t.tolist(), "seconds": time.monotonic() - start}
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return {"type": type(error).__name__, "message": str(error),
                "seconds": time.monotonic() - start}
