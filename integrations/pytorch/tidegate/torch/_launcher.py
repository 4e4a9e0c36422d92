"""Rank variables for ``init_process_group`` under launchers other than torchrun."""

import os

# (rank, size, local rank, local size) variables of each launcher tidegate knows.
_LAUNCHERS = (
    ("OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE", "OMPI_COMM_WORLD_LOCAL_RANK",
     "OMPI_COMM_WORLD_LOCAL_SIZE"),
    ("PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "MPI_LOCALNRANKS"),
    ("SLURM_PROCID", "SLURM_NTASKS", "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"),
)

# torchrun's default rendezvous port, used for single-node jobs that name none.
_DEFAULT_PORT = "29500"


def adopt_launcher_environment(environ=None):
    """Set RANK, WORLD_SIZE, LOCAL_RANK and LOCAL_WORLD_SIZE from mpirun's or srun's variables.

    Only when RANK is unset (torchrun and explicit settings win) and a known launcher's
    variables are present. When every rank runs on this node, MASTER_ADDR and MASTER_PORT
    default to 127.0.0.1 and 29500; a multi-node job must export them (``mpirun -x``).
    Returns the name of the launcher variable the rank came from, or None.
    """
    env = os.environ if environ is None else environ
    if "RANK" in env:
        return None
    for rank, size, local_rank, local_size in _LAUNCHERS:
        if rank not in env or size not in env:
            continue
        env["RANK"] = env[rank]
        env["WORLD_SIZE"] = env[size]
        if local_rank in env:
            env["LOCAL_RANK"] = env[local_rank]
        if local_size in env:
            env["LOCAL_WORLD_SIZE"] = env[local_size]
        if env.get(local_size) == env[size]:
            env.setdefault("MASTER_ADDR", "127.0.0.1")
            env.setdefault("MASTER_PORT", _DEFAULT_PORT)
        return rank
    return None
