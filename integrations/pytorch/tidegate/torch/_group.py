"""The tidegate backend object behind a torch.distributed process group."""

import torch
import torch.distributed as dist


def tidegate_backend(process_group, what):
    """The ``_C`` backend of `process_group` (None: the default group) for `what`.

    Raises ValueError when the group runs on another backend: tidegate's own operations
    (compressed allreduce, gradient sessions) need tidegate's communicator.
    """
    group = process_group
    if group is None:
        if not dist.is_initialized():
            raise RuntimeError(f"{what} needs torch.distributed.init_process_group() first")
        group = dist.distributed_c10d._get_default_group()
    name = dist.get_backend(group)
    if name != "tidegate":
        raise ValueError(
            f"{what} needs a process group on backend \"tidegate\", got one on {name!r}: "
            "init_process_group(backend=\"tidegate\") or new_group(backend=\"tidegate\")"
        )
    return group._get_backend(torch.device("cpu"))
