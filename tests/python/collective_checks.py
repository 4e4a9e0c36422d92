"""Per-rank checks of every collective on tidegate against Gloo (run by test_collectives.py).

Every check runs the same collective on the same inputs on a tidegate group and on a Gloo group
and requires (1) the results to agree: bit for bit where the inputs make every reduction order
exact (small integer values), within the dtype's rounding otherwise, and (2) tidegate's result
to be bitwise identical on every rank. A check returns None when it passes, else a message.
``CHECKS`` lists them all, in the order every rank runs them.
"""

import datetime
import functools

import torch
import torch.distributed as dist

from harness import init_groups

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "int32": torch.int32,
    "int64": torch.int64,
    "uint8": torch.uint8,
}
OPS = {
    "sum": dist.ReduceOp.SUM,
    "avg": dist.ReduceOp.AVG,
    "product": dist.ReduceOp.PRODUCT,
    "min": dist.ReduceOp.MIN,
    "max": dist.ReduceOp.MAX,
}
# Rounding of one reduction of random values in the dtype, relative.
TOLERANCE = {torch.float32: 1e-5, torch.float64: 1e-12, torch.float16: 4e-3,
             torch.bfloat16: 3e-2}


class Groups:
    """The groups every check uses: `tg` (tidegate, the default group) and `gloo`."""

    def __init__(self, gloo):
        self.tg = dist.group.WORLD
        self.gloo = gloo
        self.rank = dist.get_rank()
        self.size = dist.get_world_size()


def exact_values(dtype, shape, rank, salt, op=None):
    """Small integers whose sums, products, minima and maxima are exact in every dtype."""
    generator = torch.Generator().manual_seed(1000 * salt + rank)
    if op == "product":
        values = torch.randint(1, 3, shape, generator=generator)  # 1 or 2: at most 2^size
    elif dtype == torch.uint8:
        values = torch.randint(0, 9, shape, generator=generator)
    else:
        values = torch.randint(-8, 9, shape, generator=generator)
    return values.to(dtype)


def random_values(dtype, shape, rank, salt):
    generator = torch.Generator().manual_seed(1000 * salt + rank)
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(dtype)


def same_on_every_rank(groups, tensor):
    """None if `tensor` is bitwise identical on every rank (compared over Gloo)."""
    raw = tensor.detach().contiguous().reshape(-1).view(torch.uint8)
    gathered = [torch.empty_like(raw) for _ in range(groups.size)]
    dist.all_gather(gathered, raw, group=groups.gloo)
    differing = [r for r, g in enumerate(gathered) if not torch.equal(g, gathered[0])]
    return None if not differing else f"result differs from rank 0's on ranks {differing}"


def compare(groups, got, want, exact=True, same_everywhere=True):
    """None if `got` (tidegate) matches `want` (Gloo) and, when the collective gives every rank
    the same result, is bitwise identical across ranks. Collective: every rank calls it."""
    problem = None
    if got.dtype != want.dtype or got.shape != want.shape:
        problem = f"got {got.dtype}{list(got.shape)}, Gloo gave {want.dtype}{list(want.shape)}"
    elif exact and not torch.equal(got, want):
        diff = (got.double() - want.double()).abs().max().item()
        problem = f"differs from Gloo's result (max abs difference {diff})"
    elif not exact:
        tol = TOLERANCE[got.dtype]
        if not torch.allclose(got.double(), want.double(), rtol=tol, atol=tol):
            diff = (got.double() - want.double()).abs().max().item()
            problem = f"differs from Gloo's result beyond {tol} (max abs difference {diff})"
    if same_everywhere:
        # Always run: the comparison is a collective even when this rank already failed.
        across = same_on_every_rank(groups, got)
        problem = problem or across
    return problem


def gloo_allreduce(groups, tensor, op_name):
    """Gloo's allreduce; AVG (which Gloo lacks) as SUM divided by the group size."""
    result = tensor.clone()
    op = dist.ReduceOp.SUM if op_name == "avg" else OPS[op_name]
    dist.all_reduce(result, op=op, group=groups.gloo)
    if op_name == "avg":
        if result.is_floating_point():
            result = result / groups.size
        else:
            result = torch.div(result, groups.size, rounding_mode="trunc")  # C's division
    return result.to(tensor.dtype)


# ------------------------------------------------------------------------------------------
# The checks. Each takes the Groups and returns None or a message.
# ------------------------------------------------------------------------------------------


def check_allreduce(groups, dtype, op_name):
    data = exact_values(dtype, (37, 5), groups.rank, 1, op_name)
    got = data.clone()
    dist.all_reduce(got, op=OPS[op_name], group=groups.tg)
    return compare(groups, got, gloo_allreduce(groups, data, op_name))


def check_allreduce_random(groups, dtype):
    data = random_values(dtype, (1000,), groups.rank, 2)
    got = data.clone()
    dist.all_reduce(got, group=groups.tg)
    return compare(groups, got, gloo_allreduce(groups, data, "sum"), exact=False)


def check_allreduce_large(groups):
    # 16 MiB: several pipelined segments per ring step.
    data = random_values(torch.float32, (4 << 20,), groups.rank, 3)
    got = data.clone()
    dist.all_reduce(got, group=groups.tg)
    return compare(groups, got, gloo_allreduce(groups, data, "sum"), exact=False)


def check_allreduce_coalesced(groups, dtype):
    tensors = [exact_values(dtype, shape, groups.rank, 4 + i) for i, shape in
               enumerate([(3,), (4, 5), (1,), (0,), (2, 2, 2)])]
    got = [t.clone() for t in tensors]
    dist.all_reduce_coalesced(got, group=groups.tg)
    problems = [compare(groups, g, gloo_allreduce(groups, t, "sum")) for g, t in zip(got, tensors)]
    return next((p for p in problems if p), None)


def check_all_gather(groups, dtype):
    data = exact_values(dtype, (6, 3), groups.rank, 5)
    got = [torch.empty_like(data) for _ in range(groups.size)]
    want = [torch.empty_like(data) for _ in range(groups.size)]
    dist.all_gather(got, data, group=groups.tg)
    dist.all_gather(want, data, group=groups.gloo)
    return compare(groups, torch.stack(got), torch.stack(want))


def check_all_gather_into_tensor(groups, dtype):
    data = exact_values(dtype, (11,), groups.rank, 6)
    got = torch.empty(groups.size * 11, dtype=dtype)
    want = torch.empty_like(got)
    dist.all_gather_into_tensor(got, data, group=groups.tg)
    dist.all_gather_into_tensor(want, data, group=groups.gloo)
    return compare(groups, got, want)


def reduce_scatter_reference(groups, inputs):
    """Gloo's allreduce of the inputs laid end to end, this rank's block of it."""
    total = torch.cat([t.reshape(-1) for t in inputs])
    dist.all_reduce(total, group=groups.gloo)
    return total.chunk(groups.size)[groups.rank].reshape(inputs[0].shape)


def check_reduce_scatter(groups, dtype):
    inputs = [exact_values(dtype, (4, 2), groups.rank, 7 + r) for r in range(groups.size)]
    got = torch.empty((4, 2), dtype=dtype)
    dist.reduce_scatter(got, [t.clone() for t in inputs], group=groups.tg)
    return compare(groups, got, reduce_scatter_reference(groups, inputs), same_everywhere=False)


def check_reduce_scatter_tensor(groups, dtype):
    data = exact_values(dtype, (groups.size * 9,), groups.rank, 8)
    got = torch.empty(9, dtype=dtype)
    dist.reduce_scatter_tensor(got, data.clone(), group=groups.tg)
    want = reduce_scatter_reference(groups, list(data.chunk(groups.size)))
    return compare(groups, got, want, same_everywhere=False)


def check_broadcast(groups, dtype):
    root = groups.size - 1
    data = exact_values(dtype, (7, 7), groups.rank, 9)
    got, want = data.clone(), data.clone()
    dist.broadcast(got, src=root, group=groups.tg)
    dist.broadcast(want, src=root, group=groups.gloo)
    return compare(groups, got, want)


def check_all_to_all_single(groups, dtype):
    data = exact_values(dtype, (groups.size * 3, 2), groups.rank, 10)
    got, want = torch.empty_like(data), torch.empty_like(data)
    dist.all_to_all_single(got, data, group=groups.tg)
    dist.all_to_all_single(want, data, group=groups.gloo)
    return compare(groups, got, want, same_everywhere=False)


def check_all_to_all_single_uneven(groups):
    # Rank r sends p + 1 rows to rank p, so receives r + 1 rows from everyone.
    send_splits = [p + 1 for p in range(groups.size)]
    recv_splits = [groups.rank + 1] * groups.size
    data = exact_values(torch.float32, (sum(send_splits), 3), groups.rank, 11)
    got = torch.empty((sum(recv_splits), 3))
    want = torch.empty_like(got)
    dist.all_to_all_single(got, data, recv_splits, send_splits, group=groups.tg)
    dist.all_to_all_single(want, data, recv_splits, send_splits, group=groups.gloo)
    return compare(groups, got, want, same_everywhere=False)


def check_all_to_all_list(groups):
    inputs = [exact_values(torch.int64, (p + 2,), groups.rank, 12) for p in range(groups.size)]
    got = [torch.empty(groups.rank + 2, dtype=torch.int64) for _ in range(groups.size)]
    dist.all_to_all(got, inputs, group=groups.tg)
    # Gloo has no list all-to-all: the reference is every rank's inputs, gathered over Gloo.
    everyone = [None] * groups.size
    dist.all_gather_object(everyone, inputs, group=groups.gloo)
    for p in range(groups.size):
        if not torch.equal(got[p], everyone[p][groups.rank]):
            return f"the block from rank {p} differs from what rank {p} sent"
    return None


def check_reduce(groups):
    root = 1 % groups.size
    data = exact_values(torch.float32, (13,), groups.rank, 13)
    got, want = data.clone(), data.clone()
    dist.reduce(got, dst=root, group=groups.tg)
    dist.reduce(want, dst=root, group=groups.gloo)
    if groups.rank == root:
        return None if torch.equal(got, want) else "root's result differs from Gloo's"
    return None if torch.equal(got, data) else "a non-root rank's tensor changed"


def check_gather(groups):
    root = groups.size - 1
    data = exact_values(torch.int32, (5,), groups.rank, 14)
    got = [torch.empty_like(data) for _ in range(groups.size)] if groups.rank == root else None
    want = [torch.empty_like(data) for _ in range(groups.size)] if groups.rank == root else None
    dist.gather(data, got, dst=root, group=groups.tg)
    dist.gather(data, want, dst=root, group=groups.gloo)
    if groups.rank == root and not torch.equal(torch.stack(got), torch.stack(want)):
        return "root's result differs from Gloo's"
    return None


def check_scatter(groups):
    root = 0
    chunks = ([exact_values(torch.float64, (3, 2), r, 15) for r in range(groups.size)]
              if groups.rank == root else None)
    got, want = torch.empty((3, 2), dtype=torch.float64), torch.empty((3, 2), dtype=torch.float64)
    dist.scatter(got, chunks, src=root, group=groups.tg)
    dist.scatter(want, chunks, src=root, group=groups.gloo)
    return None if torch.equal(got, want) else "differs from Gloo's result"


def check_barrier(groups):
    dist.barrier(group=groups.tg)
    return None


def check_bytes_for_other_dtypes(groups):
    # bool and int8 have no tidegate dtype: data movement carries their bytes.
    flags = torch.tensor([True, False, groups.rank % 2 == 0])
    dist.broadcast(flags, src=0, group=groups.tg)
    if not torch.equal(flags, torch.tensor([True, False, True])):
        return f"broadcast of bool gave {flags}"
    small = torch.full((3,), groups.rank - 2, dtype=torch.int8)
    gathered = [torch.empty_like(small) for _ in range(groups.size)]
    dist.all_gather(gathered, small, group=groups.tg)
    if [int(g[0]) for g in gathered] != [r - 2 for r in range(groups.size)]:
        return f"all_gather of int8 gave {gathered}"
    return None


def check_reduction_of_bool_is_refused(groups):
    try:
        dist.all_reduce(torch.tensor([True]), group=groups.tg)
    except TypeError as error:
        return None if "cannot reduce" in str(error) else f"unclear message: {error}"
    return "allreduce of a bool tensor was accepted"


def check_bitwise_op_is_refused(groups):
    try:
        dist.all_reduce(torch.ones(2, dtype=torch.int32), op=dist.ReduceOp.BAND, group=groups.tg)
    except ValueError as error:
        return None if "does not support the reduce op" in str(error) else f"unclear: {error}"
    return "allreduce with BAND was accepted"


def check_several_tensors_are_refused(groups):
    # The process-group API still takes lists (one tensor per device); tidegate drives one.
    try:
        groups.tg.allreduce([torch.ones(2), torch.ones(2)])
    except ValueError as error:
        return None if "one device per process" in str(error) else f"unclear: {error}"
    return "allreduce of two tensors in one call was accepted"


def check_non_contiguous(groups):
    # Strided tensors are staged through contiguous buffers and copied back.
    base = exact_values(torch.float32, (6, 8), groups.rank, 16)
    transposed = base.clone().t()
    dist.all_reduce(transposed, group=groups.tg)
    columns = base.clone()[:, ::2]
    dist.broadcast(columns, src=0, group=groups.tg)
    outputs = [torch.empty(8, 6).t() for _ in range(groups.size)]
    dist.all_gather(outputs, base, group=groups.tg)
    scattered = torch.empty(6, 2)[:, 1]
    dist.reduce_scatter_tensor(scattered, base.clone().reshape(-1)[:6 * groups.size],
                               group=groups.tg)

    reduced = gloo_allreduce(groups, base, "sum")
    broadcast = base.clone()[:, ::2].contiguous()
    dist.broadcast(broadcast, src=0, group=groups.gloo)
    gathered = [torch.empty(6, 8) for _ in range(groups.size)]
    dist.all_gather(gathered, base, group=groups.gloo)
    problems = {
        "allreduce of a transposed tensor": not torch.equal(transposed, reduced.t()),
        "broadcast into a strided slice": not torch.equal(columns, broadcast),
        "all_gather into transposed outputs":
            any(not torch.equal(o, g) for o, g in zip(outputs, gathered)),
        "reduce_scatter_tensor into a strided output": not torch.equal(
            scattered, reduced.reshape(-1)[:6 * groups.size].chunk(groups.size)[groups.rank]),
    }
    failed = [what for what, bad in problems.items() if bad]
    return None if not failed else "differs from Gloo's result: " + ", ".join(failed)


def check_async_work_and_futures(groups):
    # Several collectives in flight at once, completed through wait() and through futures.
    tensors = [exact_values(torch.float32, (1000 * (i + 1),), groups.rank, 20 + i)
               for i in range(8)]
    results = [t.clone() for t in tensors]
    works = [dist.all_reduce(t, group=groups.tg, async_op=True) for t in results]
    futures = [w.get_future().then(lambda f: f.value()[0] * 2) for w in works[:4]]
    for w in works[4:]:
        w.wait()
    doubled = [f.wait() for f in futures]
    completed = [w.is_completed() for w in works]
    wanted = [gloo_allreduce(groups, t, "sum") for t in tensors]
    wrong = [i for i in range(4) if not torch.equal(doubled[i], wanted[i] * 2)]
    wrong += [i for i in range(4, 8) if not torch.equal(results[i], wanted[i])]
    if not all(completed):
        return f"works not completed after wait: {[i for i, c in enumerate(completed) if not c]}"
    return None if not wrong else f"wrong results for collectives {wrong}"


def check_subgroups(groups):
    # Two groups that share ranks, used concurrently: each has its own communicator and keys.
    halves = [list(range(0, groups.size, 2)), list(range(1, groups.size, 2))]
    if groups.size == 2:
        halves = [[0, 1], [0, 1]]
    first = dist.new_group(halves[0], backend="tidegate", timeout=datetime.timedelta(seconds=60))
    second = dist.new_group(halves[1], backend="tidegate", timeout=datetime.timedelta(seconds=60))
    mine = [g for g, ranks in zip((first, second), halves) if groups.rank in ranks]
    works = []
    for i, group in enumerate(mine):
        t = torch.full((5,), float(groups.rank + 10 * i))
        works.append((t, group, dist.all_reduce(t, group=group, async_op=True)))
    for t, group, work in works:
        work.wait()
        members = dist.get_process_group_ranks(group)
        i = mine.index(group)
        want = float(sum(r + 10 * i for r in members))
        if not torch.equal(t, torch.full((5,), want)):
            return f"group {members}: got {t.tolist()}, want {want}"
    for group in (first, second):
        dist.destroy_process_group(group)
    return None


def _checks():
    checks = []
    for dtype_name, dtype in DTYPES.items():
        for op_name in OPS:
            checks.append((f"allreduce.{op_name}.{dtype_name}",
                           functools.partial(check_allreduce, dtype=dtype, op_name=op_name)))
        for name, fn in [("allreduce_coalesced", check_allreduce_coalesced),
                         ("all_gather", check_all_gather),
                         ("all_gather_into_tensor", check_all_gather_into_tensor),
                         ("reduce_scatter", check_reduce_scatter),
                         ("reduce_scatter_tensor", check_reduce_scatter_tensor),
                         ("broadcast", check_broadcast),
                         ("all_to_all_single", check_all_to_all_single)]:
            checks.append((f"{name}.{dtype_name}", functools.partial(fn, dtype=dtype)))
        if dtype.is_floating_point:
            checks.append((f"allreduce.sum.random.{dtype_name}",
                           functools.partial(check_allreduce_random, dtype=dtype)))
    checks += [
        ("allreduce.large", check_allreduce_large),
        ("all_to_all_single.uneven", check_all_to_all_single_uneven),
        ("all_to_all.list", check_all_to_all_list),
        ("reduce", check_reduce),
        ("gather", check_gather),
        ("scatter", check_scatter),
        ("barrier", check_barrier),
        ("bytes_for_other_dtypes", check_bytes_for_other_dtypes),
        ("reduction_of_bool_is_refused", check_reduction_of_bool_is_refused),
        ("bitwise_op_is_refused", check_bitwise_op_is_refused),
        ("several_tensors_are_refused", check_several_tensors_are_refused),
        ("non_contiguous", check_non_contiguous),
        ("async_work_and_futures", check_async_work_and_futures),
        ("subgroups", check_subgroups),
    ]
    return checks


CHECKS = _checks()


def run_all(rank, world_size):
    """Every check on this rank: {check name: None or a message}."""
    gloo = init_groups()
    groups = Groups(gloo)
    outcomes = {}
    for name, check in CHECKS:
        try:
            outcomes[name] = check(groups)
        except Exception as error:  # noqa: BLE001 - reported per check
            outcomes[name] = f"raised {type(error).__name__}: {error}"
        # A failed collective can leave ranks at different points: meet again on Gloo.
        dist.barrier(group=gloo)
    return outcomes
