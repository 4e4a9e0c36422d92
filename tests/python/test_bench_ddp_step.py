"""bench/pytorch/ddp_step_bench.py (the DDP step benchmark of bench/RESULTS.md (h)) on a tiny
model under torchrun: one row per configuration, every synchronised configuration leaves every
rank with the same parameters, dense tidegate ends within float32 rounding of Gloo, and the
compressed hook ends near it."""

import json
import subprocess
import sys
from pathlib import Path

from harness import free_port
from test_launchers import single_thread_env

BENCH = Path(__file__).resolve().parents[2] / "bench" / "pytorch" / "ddp_step_bench.py"


def test_every_configuration_runs_and_synchronised_ones_agree(tmp_path):
    out = tmp_path / "rows.json"
    command = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
               "--master-port", str(free_port()), str(BENCH), "--width", "64", "--depth", "3",
               "--batch", "8", "--warmup", "1", "--steps", "2", "--json", str(out)]
    completed = subprocess.run(command, capture_output=True, text=True, timeout=300,
                               env=single_thread_env())
    assert completed.returncode == 0, (completed.stdout + completed.stderr)[-4000:]
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["config"] for r in rows] == \
        ["gloo", "tidegate", "tidegate+topk:ratio=0.01", "wait_free", "local"]
    for row in rows:
        assert row["ranks"] == 2 and row["timed_steps"] == 2 and len(row["steps_ms"]) == 2
        assert row["step_ms"] > 0 and row["speedup_vs_gloo"] > 0
    by_name = {r["config"]: r for r in rows}
    for name in ("gloo", "tidegate", "tidegate+topk:ratio=0.01", "wait_free"):
        assert by_name[name]["max_param_diff_across_ranks"] == 0.0, name
    # Dense runs differ from Gloo's only by summation order; a 1% top-k step moves less.
    assert by_name["tidegate"]["max_param_diff_vs_first"] < 1e-5
    assert by_name["wait_free"]["max_param_diff_vs_first"] < 1e-5
    assert 0 < by_name["tidegate+topk:ratio=0.01"]["max_param_diff_vs_first"] < 0.1
    # The unsynchronised lower bound really is unsynchronised: its ranks drift apart.
    assert by_name["local"]["max_param_diff_across_ranks"] > 0


def test_an_unknown_configuration_is_refused_before_anything_runs():
    # A misspelt name used to run as dense DDP on tidegate under that name.
    completed = subprocess.run([sys.executable, str(BENCH), "--configs", "gloo,topk_hook"],
                               capture_output=True, text=True, timeout=120)
    assert completed.returncode == 2, completed.stdout + completed.stderr
    assert "unknown configuration 'topk_hook'" in completed.stderr
