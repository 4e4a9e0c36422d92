"""An unchanged DDP script (integrations/pytorch/examples/ddp_digits.py, which does not import
tidegate) trains on backend "tidegate" under torchrun and under mpirun, 4 ranks each."""

import os
import re
import shutil
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from harness import free_port
from tidegate.torch import adopt_launcher_environment

SCRIPT = Path(__file__).resolve().parents[2] / "integrations" / "pytorch" / "examples" / \
    "ddp_digits.py"
RESULT = re.compile(r"rank (\d+)/(\d+) backend=(\S+) loss=\S+ accuracy=(\S+) "
                    r"params_sha256=([0-9a-f]{16})")


def check_ranks_agree(completed, world_size):
    """Every rank reported training on tidegate, learnt, and holds the same parameters."""
    output = completed.stdout + completed.stderr
    assert completed.returncode == 0, output[-4000:]
    results = {int(m.group(1)): m for m in RESULT.finditer(completed.stdout)}
    assert sorted(results) == list(range(world_size)), output[-4000:]
    for match in results.values():
        assert match.group(2) == str(world_size) and match.group(3) == "tidegate", match.group(0)
        assert float(match.group(4)) > 0.7, match.group(0)
    assert len({m.group(5) for m in results.values()}) == 1, "parameters differ between ranks"


def single_thread_env():
    # Four ranks on a small machine: one compute thread each.
    return dict(os.environ, OMP_NUM_THREADS="1")


def test_entry_point_is_registered():
    names = [e.name for e in entry_points(group="torch.distributed.backends")]
    assert "tidegate" in names


def test_torchrun_runs_the_unchanged_script():
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "4",
               "--master-port", str(free_port()), str(SCRIPT), "--epochs", "2"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300,
                               env=single_thread_env())
    check_ranks_agree(completed, 4)


def test_mpirun_runs_the_unchanged_script():
    mpirun = shutil.which("mpirun")
    if mpirun is None:
        pytest.skip("mpirun is not installed (./run.sh setup installs Open MPI)")
    env = single_thread_env()
    env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
               MASTER_PORT=str(free_port()))
    command = [mpirun, "-np", "4", "--oversubscribe", "--bind-to", "none",
               "-x", "MASTER_PORT", "-x", "OMP_NUM_THREADS",
               sys.executable, "-m", "tidegate.torch", str(SCRIPT), "--epochs", "2"]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300, env=env)
    check_ranks_agree(completed, 4)


def test_launcher_variables_become_torch_variables():
    env = {"OMPI_COMM_WORLD_RANK": "3", "OMPI_COMM_WORLD_SIZE": "4",
           "OMPI_COMM_WORLD_LOCAL_RANK": "1", "OMPI_COMM_WORLD_LOCAL_SIZE": "2"}
    assert adopt_launcher_environment(env) == "OMPI_COMM_WORLD_RANK"
    assert (env["RANK"], env["WORLD_SIZE"], env["LOCAL_RANK"], env["LOCAL_WORLD_SIZE"]) == \
        ("3", "4", "1", "2")
    assert "MASTER_ADDR" not in env, "a multi-node job must name its rendezvous host"


def test_single_node_launch_defaults_the_rendezvous_address():
    env = {"SLURM_PROCID": "0", "SLURM_NTASKS": "2", "SLURM_NTASKS_PER_NODE": "2"}
    adopt_launcher_environment(env)
    assert (env["MASTER_ADDR"], env["MASTER_PORT"]) == ("127.0.0.1", "29500")


def test_torchrun_variables_win():
    env = {"RANK": "0", "WORLD_SIZE": "1", "OMPI_COMM_WORLD_RANK": "5",
           "OMPI_COMM_WORLD_SIZE": "8"}
    assert adopt_launcher_environment(env) is None
    assert env["RANK"] == "0"
