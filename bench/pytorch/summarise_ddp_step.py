#!/usr/bin/env python3
"""Medians over repeated jobs of bench/pytorch/run_ddp_step.sh: per rate and configuration, the
step time, each job's step time, the median of the per-job speed ratios to Gloo, and the largest
parameter differences across ranks and from the Gloo run. Reads DIR/ddp_<rate>_<job>.json.

    bench/pytorch/summarise_ddp_step.py DIR      # e.g. bench/results/ddp_step
"""
import collections
import glob
import json
import os
import re
import statistics
import sys

NAMES = {
    "gloo": "DDP on Gloo",
    "tidegate": "DDP on tidegate",
    "tidegate+topk:ratio=0.01": "DDP on tidegate + `compressed_allreduce_hook`, topk:ratio=0.01, EF",
    "wait_free": "`WaitFreeDataParallel` (dense)",
    "local": "no synchronisation (compute alone)",
}


def main():
    rows = collections.defaultdict(list)  # (rate, config) -> rows, in file order
    configs = []
    for path in sorted(glob.glob(os.path.join(sys.argv[1], "ddp_*.json"))):
        match = re.match(r"ddp_(.+)_\d+\.json$", os.path.basename(path))
        if not match:
            continue
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                rows[(match.group(1), row["config"])].append(row)
                if row["config"] not in configs:
                    configs.append(row["config"])
    if not rows:
        sys.exit(f"no ddp_*.json rows in {sys.argv[1]}")
    rates = sorted({rate for rate, _ in rows}, key=lambda r: int(re.sub(r"\D", "", r) or 0))
    for rate in rates:
        jobs = len(rows[(rate, configs[0])])
        print(f"\n#### {rate.replace('gbit', ' Gbit/s')} ({jobs} runs)\n")
        print("| configuration | step (ms), median | each run (ms) | speed vs Gloo, median of "
              "per-run ratios | max param diff across ranks | max param diff vs Gloo |")
        print("|---|---|---|---|---|---|")
        for config in configs:
            r = rows[(rate, config)]
            print(f"| {NAMES.get(config, config)} | {statistics.median(x['step_ms'] for x in r):.1f} "
                  f"| {', '.join(str(x['step_ms']) for x in r)} "
                  f"| {statistics.median(x['speedup_vs_gloo'] for x in r):.2f}x "
                  f"| {max(x['max_param_diff_across_ranks'] for x in r):.3g} "
                  f"| {max(x['max_param_diff_vs_first'] for x in r):.3g} |")


if __name__ == "__main__":
    main()
