"""The installed package: it carries its own libtidegate, binds to torch's NCCL, and runs CUDA
tensors where the build can (skipped without a GPU)."""

import ctypes
import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import tidegate
import tidegate.torch
from harness import run_ranks

PACKAGE = Path(tidegate.__file__).resolve().parent


def run_python(code):
    """Run `code` in a fresh interpreter and return what it printed as JSON."""
    completed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                               timeout=120, check=True)
    return json.loads(completed.stdout.strip().splitlines()[-1])


def mapped(name):
    with open("/proc/self/maps", encoding="utf-8") as maps:
        return sorted({line.split()[-1] for line in maps if name in line.split()[-1]})


def test_the_package_loads_its_own_libtidegate():
    shipped = PACKAGE / "lib" / "libtidegate.so.0"
    assert shipped.is_file()
    assert mapped("libtidegate") == [str(shipped)], "libtidegate came from elsewhere"
    assert tidegate.torch.library_version() == tidegate.__version__


def test_the_extension_finds_libtidegate_through_its_rpath():
    readelf = shutil.which("readelf")
    if readelf is None:
        pytest.skip("readelf (binutils) is not installed")
    extension = next((PACKAGE / "torch").glob("_C*.so"))
    dynamic = subprocess.run([readelf, "-d", str(extension)], capture_output=True, text=True,
                             check=True).stdout
    assert "$ORIGIN/../lib" in dynamic
    assert "[libtidegate.so.0]" in dynamic


def test_one_nccl_in_the_process_and_it_is_torchs():
    # In a fresh interpreter: what `import torch` loaded, then what `import tidegate.torch` adds.
    seen = run_python(
        "import json, torch\n"
        "from tidegate.torch import loaded_nccl_libraries as nccl\n"
        "before = nccl()\n"
        "import tidegate.torch\n"
        "print(json.dumps({'before': before, 'after': nccl()}))\n")
    assert len(seen["after"]) <= 1, f"two NCCLs in one process: {seen['after']}"
    if seen["before"]:
        assert seen["after"] == seen["before"], "libtidegate brought a second NCCL"
    libtidegate = PACKAGE / "lib" / "libtidegate.so.0"
    readelf = shutil.which("readelf")
    if readelf is not None and "libnccl.so.2" in subprocess.run(
            [readelf, "-d", str(libtidegate)], capture_output=True, text=True).stdout:
        # This build has the NCCL transport: it must be bound to the NCCL torch loaded.
        assert seen["after"], "libtidegate needs libnccl.so.2 but none is mapped"
        version = ctypes.c_int(0)
        assert ctypes.CDLL(seen["after"][0]).ncclGetVersion(ctypes.byref(version)) == 0
        assert version.value >= 22800, version.value


def allreduce_on_cuda(rank, world_size):
    from harness import init_groups

    init_groups()
    torch.cuda.set_device(rank % torch.cuda.device_count())
    t = torch.full((1000,), float(rank + 1), device="cuda")
    try:
        torch.distributed.all_reduce(t)
    except NotImplementedError as error:
        return {"unsupported": str(error)}
    torch.cuda.synchronize()
    return {"value": t.cpu().tolist()[:3]}


def test_cuda_tensors():
    if not torch.cuda.is_available():
        pytest.skip("no CUDA device: the CUDA path of the backend is compiled but not run here")
    results = run_ranks(allreduce_on_cuda, 2, timeout=180)
    if "unsupported" in results[0]:
        # The backend hands tidegate device pointers; this build's transports refuse them.
        assert "CUDA" in results[0]["unsupported"], results[0]
        pytest.skip("this libtidegate moves host memory only: " + results[0]["unsupported"])
    assert results[0]["value"] == [3.0, 3.0, 3.0] == results[1]["value"]
