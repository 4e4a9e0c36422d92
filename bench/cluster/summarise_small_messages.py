#!/usr/bin/env python3
"""Medians over the repeats of run_small_messages.sh: per rate, variant and size, tidegate's
time, MPI_Allreduce's time in the same runs, and tidegate's speed relative to MPI (MPI's time
over tidegate's, computed per run, then the median of those ratios: above 1, tidegate is
faster); the same for the forced mpi/native choice.

    bench/cluster/summarise_small_messages.py DIR
"""
import glob
import json
import os
import re
import statistics
import sys


def load(directory):
    rows = {}  # (rate, variant, size) -> list of (tidegate, mpi, native or None, algo)
    for path in sorted(glob.glob(os.path.join(directory, "small_*.json"))):
        match = re.match(r"small_(.+)_(default|handover|noprediction)_(\d+)\.json$", os.path.basename(path))
        if not match:
            continue
        rate, variant = match.group(1), match.group(2)
        with open(path) as f:
            for line in f:
                row = json.loads(line)
                if row.get("wrong", 0) != 0:
                    sys.exit(f"{path}: {row['bytes']} B has wrong results")
                native = row.get("choices", {}).get("mpi/native")
                rows.setdefault((rate, variant, row["bytes"]), []).append(
                    (row["time_us"], row["baseline_time_us"], native, row["algo"]))
    return rows


def size_text(size):
    return f"{size // 1024} KiB" if size >= 1024 else f"{size} B"


def main():
    rows = load(sys.argv[1])
    if not rows:
        sys.exit(f"no small_*.json rows in {sys.argv[1]}")
    rates = sorted({k[0] for k in rows}, key=lambda r: ("none" in r, r))
    for rate in rates:
        for variant in ("default", "handover", "noprediction"):
            sizes = sorted(k[2] for k in rows if k[0] == rate and k[1] == variant)
            if not sizes:
                continue
            runs = len(rows[(rate, variant, sizes[0])])
            label = "unshaped" if rate == "none" else rate
            extra = {"default": "", "handover": ", TIDEGATE_CALLER_RUNS=0",
                     "noprediction": ", TIDEGATE_NATIVE_PREDICTION=off"}[variant]
            print(f"\n#### {label}{extra} ({runs} runs)\n")
            print("| size | tidegate (us) | MPI_Allreduce (us) | tidegate speed vs MPI | "
                  "mpi/native forced (us) | native speed vs MPI direct | plan |")
            print("|---|---|---|---|---|---|---|")
            for size in sizes:
                r = rows[(rate, variant, size)]
                ours = statistics.median(x[0] for x in r)
                mpi = statistics.median(x[1] for x in r)
                speed = statistics.median(x[1] / x[0] for x in r)
                natives = [(x[2], x[1]) for x in r if x[2]]
                native = f"{statistics.median(n for n, _ in natives):.1f}" if natives else "-"
                native_speed = (f"{statistics.median(m / n for n, m in natives):.2f}x"
                                if natives else "-")
                algos = sorted({x[3] for x in r})
                print(f"| {size_text(size)} | {ours:.1f} | {mpi:.1f} | {speed:.2f}x | {native} | "
                      f"{native_speed} | {', '.join(algos)} |")


if __name__ == "__main__":
    main()
