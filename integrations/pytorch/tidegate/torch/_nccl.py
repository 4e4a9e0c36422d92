"""Which NCCL tidegate's NCCL transport uses inside a torch process.

libtidegate (built with NCCL) needs ``libnccl.so.2`` by its soname. ``import torch`` has
already loaded the NCCL that torch ships (nvidia-nccl-cu*, 2.30.x for torch 2.x on CUDA 13)
by the time ``tidegate.torch`` loads libtidegate, and the dynamic linker binds a soname to the
copy already loaded: tidegate's transport uses torch's NCCL, not the system's (2.28.x).
That is deliberate: two NCCLs in one process would each keep their own globals (environment,
proxy threads, shared-memory names), and NCCL 2.x keeps its ABI across minor versions, so a
tidegate compiled against 2.28's headers runs on 2.30.
"""


def loaded_nccl_libraries(maps_path="/proc/self/maps"):
    """Paths of the NCCL libraries mapped into this process (normally exactly one)."""
    paths = set()
    with open(maps_path, encoding="utf-8") as maps:
        for line in maps:
            fields = line.split()
            if len(fields) >= 6 and "/libnccl" in fields[-1]:
                paths.add(fields[-1])
    return sorted(paths)
