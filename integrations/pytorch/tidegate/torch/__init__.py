"""The torch.distributed backend ``"tidegate"``.

Usage, in an otherwise unchanged training script::

    import tidegate.torch  # optional once the package is installed (entry point)
    torch.distributed.init_process_group(backend="tidegate")

Importing this module registers the backend for CPU and CUDA tensors. Each process group
(the default one and every ``new_group``) gets its own tidegate communicator, which
rendezvouses through the group's c10d store. The group's timeout becomes tidegate's
``TIDEGATE_TIMEOUT_MS`` unless that variable is set in the environment; every other
``TIDEGATE_*`` variable applies as documented in the README.

Under ``mpirun`` or ``srun`` without torchrun, importing this module also maps the launcher's
rank variables to the ones ``init_process_group`` reads (see :func:`adopt_launcher_environment`);
``python -m tidegate.torch script.py`` does the same for a script that does not import it.
"""

import os

import torch  # noqa: F401  (loads libtorch, and with it torch's NCCL, before libtidegate)
import torch.distributed as dist

from . import _C, hooks
from ._launcher import adopt_launcher_environment
from ._nccl import loaded_nccl_libraries
from .wait_free import WaitFreeDataParallel

__all__ = [
    "BACKEND_NAME",
    "WaitFreeDataParallel",
    "adopt_launcher_environment",
    "hooks",
    "library_version",
    "loaded_nccl_libraries",
    "register",
]

BACKEND_NAME = "tidegate"


def library_version():
    """Version string of the libtidegate the backend is linked against."""
    return _C.library_version()


def _milliseconds(timeout):
    return max(1, int(timeout.total_seconds() * 1000))


def _create_backend(store, rank, world_size, timeout):
    """torch.distributed's creator hook: one tidegate communicator per process group."""
    settings = []
    if "TIDEGATE_TIMEOUT_MS" not in os.environ:
        settings.append(("TIDEGATE_TIMEOUT_MS", str(_milliseconds(timeout))))
    return _C.create_backend(store, rank, world_size, _milliseconds(timeout), settings)


_registered = False


def register():
    """Register the backend with torch.distributed (idempotent).

    Called on import, and by torch.distributed through the ``torch.distributed.backends``
    entry point when a script asks for ``backend="tidegate"`` without importing this module.
    """
    global _registered
    if _registered:
        return
    dist.Backend.register_backend(BACKEND_NAME, _create_backend, devices=["cpu", "cuda"])
    _registered = True


adopt_launcher_environment()
register()
