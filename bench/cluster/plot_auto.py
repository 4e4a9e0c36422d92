#!/usr/bin/env python3
"""Summarise and plot tidegate-bench --codec auto runs (JSON lines from --json).

    python3 bench/cluster/plot_auto.py OUT.png LABEL=run.json[,run2.json,...] [LABEL=...]

For each run (one link rate) prints, per size: tidegate's dense choice, auto (and what it
picked), each forced codec, MPI_Allreduce, auto over the fastest forced choice (dense
included) and auto over dense; and plots time per size, one panel per link, on log axes.
Several runs of one link (comma-separated) print a table per run, then one of the ratios of
every run and their median; the plot shows each row's median time over the runs.
"""
import json
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    rows = [json.loads(line) for line in open(path) if line.strip()]
    sizes = {}
    for r in rows:
        entry = sizes.setdefault(r["bytes"], {})
        entry[r.get("codec", "dense")] = r
    return sizes


def human(b):
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if b >= scale:
            return f"{b // scale} {unit}"
    return f"{b} B"


def summarise(label, sizes):
    print(f"\n#### {label}\n")
    codecs = [c for c in next(iter(sizes.values())) if c not in ("dense", "auto")]
    head = ["size", "dense (ms)", "auto (ms)", "auto's pick"] + [f"{c} (ms)" for c in codecs]
    head += ["MPI (ms)", "auto / fastest forced", "auto / dense", "MPI / auto"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in sorted(sizes):
        s = sizes[b]
        dense, auto = s["dense"]["time_us"], s["auto"]["time_us"]
        forced = [dense] + [s[c]["time_us"] for c in codecs]
        mpi = s["dense"].get("baseline_time_us")
        pick = s["auto"]["algo"].split("=", 1)[-1]
        cells = [human(b), f"{dense / 1e3:.2f}", f"{auto / 1e3:.2f}", f"`{pick}`"]
        cells += [f"{s[c]['time_us'] / 1e3:.2f}" for c in codecs]
        cells += [f"{mpi / 1e3:.2f}" if mpi else "-", f"{auto / min(forced):.2f}",
                  f"{auto / dense:.2f}", f"{mpi / auto:.1f}" if mpi else "-"]
        print("| " + " | ".join(cells) + " |")


def ratios(s):
    """auto / fastest forced, auto / dense and MPI / auto of one size of one run."""
    dense, auto = s["dense"]["time_us"], s["auto"]["time_us"]
    forced = [s[c]["time_us"] for c in s if c != "auto"]
    mpi = s["dense"].get("baseline_time_us")
    return auto / min(forced), auto / dense, (mpi / auto if mpi else float("nan"))


def summarise_runs(label, runs):
    print(f"\n#### {label}: {len(runs)} runs\n")
    head = ["size", "auto's picks", "auto / fastest forced (runs)", "median",
            "auto / dense (runs)", "median", "MPI / auto (median)"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for b in sorted(runs[0]):
        per_run = [ratios(r[b]) for r in runs if b in r]
        picks = sorted({r[b]["auto"]["algo"].split("=", 1)[-1] for r in runs if b in r})
        fastest = [x[0] for x in per_run]
        dense = [x[1] for x in per_run]
        cells = [human(b), ", ".join(f"`{p}`" for p in picks),
                 ", ".join(f"{x:.2f}" for x in fastest), f"**{statistics.median(fastest):.2f}**",
                 ", ".join(f"{x:.2f}" for x in dense), f"**{statistics.median(dense):.2f}**",
                 f"{statistics.median(x[2] for x in per_run):.1f}"]
        print("| " + " | ".join(cells) + " |")


def median_run(runs):
    """One run's shape whose every time is the median over the runs."""
    merged = {}
    for b in runs[0]:
        merged[b] = {}
        for codec, row in runs[0][b].items():
            row = dict(row)
            for key in ("time_us", "baseline_time_us"):
                values = [r[b][codec][key] for r in runs if b in r and key in r[b][codec]]
                if values:
                    row[key] = statistics.median(values)
            merged[b][codec] = row
    return merged


def main():
    out, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    fig, axes = plt.subplots(1, len(runs), figsize=(6 * len(runs), 4.5), squeeze=False)
    for ax, (label, paths) in zip(axes[0], runs):
        loaded = [load(path) for path in paths.split(",")]
        for i, sizes in enumerate(loaded):
            summarise(label if len(loaded) == 1 else f"{label}, run {i + 1}", sizes)
        if len(loaded) > 1:
            summarise_runs(label, loaded)
        sizes = median_run(loaded)
        xs = sorted(sizes)
        for codec in next(iter(sizes.values())):
            style = {"auto": dict(color="black", lw=2.5, marker="o"),
                     "dense": dict(color="tab:blue", lw=1.5, marker="s")}.get(codec, dict(lw=1, ls="--", marker="."))
            ax.plot(xs, [sizes[b][codec]["time_us"] / 1e3 for b in xs], label=codec, **style)
        ax.plot(xs, [sizes[b]["dense"]["baseline_time_us"] / 1e3 for b in xs], label="MPI_Allreduce",
                color="tab:red", lw=1, marker="x")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tensor size (bytes, float32)")
        ax.set_ylabel("time (ms, median of slowest rank)" if len(loaded) == 1 else
                      f"time (ms, median over {len(loaded)} runs)")
        ax.set_title(f"4 ranks, {label}")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
