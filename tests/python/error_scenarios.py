"""Per-rank error scenarios on backend "tidegate" (run by test_errors.py).

Each scenario returns what this rank saw: the exception's type and message, and how long the
call took. They run in one job, in this order; the default group must survive them all.
"""

import datetime
import time

import torch
import torch.distributed as dist

from harness import GROUP_TIMEOUT, init_groups

LATE_RANK = 1
LATE_BY_S = 2.0


def _outcome(call):
    start = time.monotonic()
    try:
        call()
    except Exception as error:  # noqa: BLE001 - the test inspects it
        return {"type": type(error).__name__, "message": str(error),
                "seconds": time.monotonic() - start}
    return {"type": None, "message": "", "seconds": time.monotonic() - start}


def point_to_point(groups_gloo):
    """send, recv and isend are refused with a message that says why."""
    rank = dist.get_rank()
    peer = (rank + 1) % dist.get_world_size()
    t = torch.zeros(3)
    return {
        "send": _outcome(lambda: dist.send(t, peer)),
        "recv": _outcome(lambda: dist.recv(t, peer)),
        "isend": _outcome(lambda: dist.isend(t, peer)),
    }


def wait_with_timeout(groups_gloo):
    """Rank 0 waits 0.3 s for an allreduce that LATE_RANK joins after 2 s: the wait raises and
    the collective still completes."""
    rank = dist.get_rank()
    dist.barrier(group=groups_gloo)
    if rank == LATE_RANK:
        time.sleep(LATE_BY_S)
    t = torch.ones(4)
    work = dist.all_reduce(t, async_op=True)
    seen = {"type": None, "message": "", "seconds": 0.0}
    if rank == 0:
        seen = _outcome(lambda: work.wait(timeout=datetime.timedelta(milliseconds=300)))
    work.wait()
    seen["value"] = t.tolist()
    return seen


def shape_mismatch(groups_gloo):
    """LATE_RANK allreduces 12 elements, the others 10, on a group of all ranks."""
    group = dist.new_group(backend="tidegate", timeout=GROUP_TIMEOUT)
    # Every rank finishes creating the group before any posts: otherwise a fast rank's mismatch
    # (and the abort it sends) can reach a rank still in the group's end-of-creation barrier,
    # which then fails new_group itself (a known race, noted for the library) instead of the
    # all_reduce this scenario is about.
    dist.barrier(group=groups_gloo)
    count = 12 if dist.get_rank() == LATE_RANK else 10
    seen = _outcome(lambda: dist.all_reduce(torch.ones(count), group=group))
    # The group failed; a collective posted on it now fails at once with the same cause.
    seen["later"] = _outcome(lambda: dist.all_reduce(torch.ones(10), group=group))
    dist.destroy_process_group(group)
    return seen


def run_all(rank, world_size):
    gloo = init_groups()
    outcomes = {}
    for name, scenario in [("point_to_point", point_to_point),
                           ("wait_with_timeout", wait_with_timeout),
                           ("shape_mismatch", shape_mismatch)]:
        outcomes[name] = scenario(gloo)
        dist.barrier(group=gloo)
    # The default group is unharmed by all of it.
    t = torch.ones(2)
    dist.all_reduce(t)
    outcomes["default_group_after"] = t.tolist()
    return outcomes
