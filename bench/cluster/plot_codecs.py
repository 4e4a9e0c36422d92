#!/usr/bin/env python3
"""Summarise and plot tidegate-bench --codec runs: every codec against MPI_Allreduce.

    python3 bench/cluster/plot_codecs.py OUT.png LABEL=run.json [LABEL=run.json ...]

Each run is the --json of one tidegate-bench job on one link rate (JSON lines: a dense row per
size, then a row per codec, each with the MPI_Allreduce time measured on the same buffers in
the same job). Prints, per run, a markdown table of times and speed-ups over MPI_Allreduce
(MPI's time over the row's) with the wrong-value count, and plots the speed-up against size:
one line per codec and one for tidegate's dense allreduce, one panel per run.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401
from plot_auto import human  # noqa: E402  (the same folder: sizes written the same way)


def load(path):
    """{bytes: {codec: row}} from a JSON-lines file; codec "dense" for the dense rows."""
    sizes = {}
    for line in open(path):
        if line.strip():
            row = json.loads(line)
            sizes.setdefault(row["bytes"], {})[row.get("codec", "dense")] = row
    return sizes


def speedup(row):
    mpi = row.get("baseline_time_us")
    return mpi / row["time_us"] if mpi and row["time_us"] > 0 else None


def codecs_of(sizes):
    """Every row name in the order of the first size's rows, dense first."""
    names = []
    for b in sorted(sizes):
        for name in sizes[b]:
            if name not in names:
                names.append(name)
    return ["dense"] + [n for n in names if n != "dense"]


def summarise(label, sizes):
    print(f"\n#### {label}\n")
    names = codecs_of(sizes)
    print("| size | MPI (ms) | " + " | ".join(f"{n}: ms (x MPI)" for n in names) + " | wrong |")
    print("|" + "---|" * (len(names) + 3))
    for b in sorted(sizes):
        rows = sizes[b]
        mpi = rows["dense"].get("baseline_time_us")
        cells = [human(b), f"{mpi / 1e3:.2f}" if mpi else "-"]
        wrong = 0
        for n in names:
            r = rows.get(n)
            if r is None:
                cells.append("-")
                continue
            wrong += r.get("wrong", 0)
            s = speedup(r)
            cells.append(f"{r['time_us'] / 1e3:.2f} ({s:.2f}x)" if s else f"{r['time_us'] / 1e3:.2f}")
        cells.append(str(wrong))
        print("| " + " | ".join(cells) + " |")


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    out, runs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    fig, axes = plt.subplots(1, len(runs), figsize=(5.2 * len(runs) + 1.8, 4.8), squeeze=False)
    colours = plt.get_cmap("tab20").colors
    markers = "o^vsD<>ph*Xd"
    for ax, (label, path) in zip(axes[0], runs):
        sizes = load(path)
        summarise(label, sizes)
        xs = sorted(sizes)
        for k, name in enumerate(codecs_of(sizes)):
            points = [(b, speedup(sizes[b][name])) for b in xs if name in sizes[b]]
            points = [(b, s) for b, s in points if s]
            if name == "dense":
                style = dict(color="black", lw=2.5, marker="s")
            else:  # a colour and a marker of its own: twelve codecs outrun one colour cycle
                style = dict(color=colours[(2 * k) % 20 if k < 10 else (2 * k + 1) % 20], lw=1.2,
                             marker=markers[k % len(markers)], ms=4)
            ax.plot([p[0] for p in points], [p[1] for p in points],
                    label="tidegate dense" if name == "dense" else name, **style)
        ax.axhline(1.0, color="tab:red", lw=1, ls=":", label="MPI_Allreduce")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        plain = matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:g}")  # "4", not "4 x 10^0"
        ax.yaxis.set_major_formatter(plain)
        ax.yaxis.set_minor_formatter(plain)
        ax.set_xlabel("tensor size (bytes, float32)")
        ax.set_ylabel("speed-up over MPI_Allreduce (same run)")
        ax.set_title(f"4 ranks, {label}")
        ax.grid(True, which="both", alpha=0.3)
    # Every panel has the same lines: one legend, outside the last panel.
    axes[0][-1].legend(fontsize=7, loc="center left", bbox_to_anchor=(1.02, 0.5))
    fig.tight_layout()
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
