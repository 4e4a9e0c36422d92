"""Multi-process jobs on localhost for the backend's tests.

``run_ranks(target, world_size, ...)`` starts one process per rank (multiprocessing's spawn,
so each imports torch afresh, as under torchrun), sets the variables ``init_process_group``
reads, calls ``target(rank, world_size, *args)`` in each, and returns the ranks' return values
in rank order. A rank that raises, dies or outlives the job's deadline fails the job with every
rank's story; stragglers are killed, so a hang costs the deadline, never the suite.
"""

import datetime
import multiprocessing
import os
import pickle
import queue
import socket
import sys
import time
import traceback

import torch.distributed as dist

# The group timeout the tests run under: long enough for a loaded 2-core machine, short enough
# that a hang ends well inside the job deadline.
GROUP_TIMEOUT = datetime.timedelta(seconds=60)


class JobFailed(AssertionError):
    """A rank raised, died or timed out; the message tells each rank's outcome."""


def free_port():
    """A TCP port nothing listens on now (the job's store binds it moments later)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def init_groups(backend="tidegate", timeout=GROUP_TIMEOUT):
    """Initialise the default group on `backend` and return a gloo group of all ranks."""
    dist.init_process_group(backend, timeout=timeout)
    return dist.new_group(backend="gloo", timeout=timeout)


def _entry(target, rank, world_size, port, env, args, results):
    os.environ.update({"MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(port),
                       "RANK": str(rank), "WORLD_SIZE": str(world_size),
                       "LOCAL_RANK": str(rank), "LOCAL_WORLD_SIZE": str(world_size)})
    os.environ.update(env)
    try:
        import torch

        import tidegate.torch  # noqa: F401  (registers the backend)

        # Ranks share two cores: one compute thread each keeps them from starving each other.
        torch.set_num_threads(1)

        value = target(rank, world_size, *args)
        # Plain pickle copies tensors into the bytes; multiprocessing's own pickler would share
        # them through file descriptors that vanish when this process exits.
        results.put((rank, "ok", pickle.dumps(value)))
    except BaseException:  # noqa: B902 - everything a rank raises is the test's business
        results.put((rank, "raised", traceback.format_exc()))
    finally:
        if dist.is_initialized():
            try:
                dist.destroy_process_group()
            except Exception:  # noqa: BLE001 - the outcome is already reported
                pass
        # Tearing down the interpreter after torch (and dynamo, which DDP imports) takes tens
        # of seconds on a loaded machine: flush the result and leave at once.
        results.close()
        results.join_thread()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(0)


def run_ranks(target, world_size, args=(), timeout=180.0, env=None, may_die=()):
    """Run `target` on `world_size` local ranks; return their values in rank order.

    `env` adds environment variables for every rank. Ranks in `may_die` may end without a
    result (a test that kills them); their value is None.
    """
    ctx = multiprocessing.get_context("spawn")
    results = ctx.Queue()
    port = free_port()
    processes = [
        ctx.Process(target=_entry, args=(target, rank, world_size, port, dict(env or {}),
                                         tuple(args), results), daemon=True)
        for rank in range(world_size)
    ]
    for p in processes:
        p.start()
    outcomes = {}
    deadline = time.monotonic() + timeout
    expected = set(range(world_size)) - set(may_die)
    while not expected.issubset(outcomes) and time.monotonic() < deadline:
        try:
            rank, status, value = results.get(timeout=0.5)
            outcomes[rank] = (status, value)
        except queue.Empty:
            if all(not p.is_alive() for p in processes):
                # Everyone is gone: drain what is left, then stop waiting.
                try:
                    while True:
                        rank, status, value = results.get(timeout=0.5)
                        outcomes[rank] = (status, value)
                except queue.Empty:
                    break
    for p in processes:
        p.join(timeout=max(1.0, deadline - time.monotonic()))
    for p in processes:
        if p.is_alive():
            p.kill()
            p.join()
    problems = []
    for rank in sorted(expected):
        if rank not in outcomes:
            code = processes[rank].exitcode
            problems.append(f"rank {rank}: no result (exit code {code}; killed at the deadline "
                            f"of {timeout:.0f} s if None or negative)")
        elif outcomes[rank][0] != "ok":
            problems.append(f"rank {rank} raised:\n{outcomes[rank][1]}")
    if problems:
        raise JobFailed("\n".join(problems))
    return [pickle.loads(outcomes[rank][1]) if rank in outcomes else None
            for rank in range(world_size)]
