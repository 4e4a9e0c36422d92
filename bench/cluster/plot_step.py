#!/usr/bin/env python3
"""Summarise and plot tidegate-bench --step runs (JSON lines from --json).

    python3 bench/cluster/plot_step.py OUT.png LABEL=run.json [LABEL=run.json ...] \
        [--timeline LABEL:MODEL[:CODEC]]

Each file holds the rows of one link (LABEL, e.g. "10 Gbit"), for any number of profiles and
codecs. Prints, per link, a markdown table of every profile x codec x mode (step, compute,
communication alone, ideal = max of the two, exposed communication, step over ideal, speed-up
over no overlap, the first-needed gradient's ready-to-done time over its stand-alone
allreduce), and plots:
  top: per link, the step time of each mode per profile and codec, with the ideal (black bar)
       and the compute (dotted bar) marked;
  bottom: one measured step of ddp and of session for --timeline (default: the first link,
       profile and codec), each op from handed over to done, over the compute phases.
"""
import json
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

MODES = ["noverlap", "ddp", "session", "session-fifo"]
COLOURS = {"noverlap": "tab:gray", "ddp": "tab:orange", "session": "tab:blue",
           "session-fifo": "tab:cyan"}


def load(path):
    """{(model, codec): {mode: row}} in file order."""
    runs = {}
    for line in open(path):
        if line.strip():
            r = json.loads(line)
            runs.setdefault((r["step"]["model"], r["codec"]), {})[r["mode"]] = r
    return runs


def summarise(label, runs):
    print(f"\n#### {label}\n")
    head = ["profile", "codec", "mode", "step (ms)", "compute (ms)", "comm alone (ms)",
            "ideal (ms)", "exposed (ms)", "step / ideal", "vs no overlap", "first grad / alone"]
    print("| " + " | ".join(head) + " |")
    print("|" + "---|" * len(head))
    for (model, codec), modes in runs.items():
        for mode, r in modes.items():
            first = r["first_needed"]
            speedup = r["speedup_vs_noverlap"]
            cells = [model, codec, mode, f"{r['step_ms']:.1f}", f"{r['compute_ms']:.1f}",
                     f"{r['comm_alone_ms']:.1f}", f"{r['ideal_ms']:.1f}", f"{r['exposed_ms']:.1f}",
                     f"{r['step_over_ideal']:.2f}", f"{speedup:.2f}x" if speedup else "-",
                     f"{first['ready_to_done_ms'] / first['alone_ms']:.2f}" if first["alone_ms"] else "-"]
            print("| " + " | ".join(cells) + " |")


def plot_bars(ax, label, runs):
    groups = list(runs.items())
    present = [m for m in MODES if any(m in modes for _, modes in groups)]
    width = 0.8 / len(present)
    for g, ((model, codec), modes) in enumerate(groups):
        for m, mode in enumerate(present):
            if mode not in modes:
                continue
            r = modes[mode]
            x = g + (m - (len(present) - 1) / 2) * width
            ax.bar(x, r["step_ms"], width * 0.9, color=COLOURS[mode], label=mode if g == 0 else None)
            ax.hlines(r["ideal_ms"], x - width / 2, x + width / 2, color="black", lw=2,
                      label="ideal max(compute, comm)" if g == 0 and m == 0 else None)
            ax.hlines(r["compute_ms"], x - width / 2, x + width / 2, color="black", lw=1, ls=":",
                      label="compute" if g == 0 and m == 0 else None)
    ax.set_xticks(range(len(groups)))
    ax.set_xticklabels([f"{model}\n{codec}" for model, codec in runs], fontsize=8)
    ax.set_ylabel("step time (ms, median of slowest rank)")
    ranks = groups[0][1][next(iter(groups[0][1]))]["step"]["ranks"]
    ax.set_title(f"{ranks} ranks, {label}")
    ax.grid(True, axis="y", alpha=0.3)
    ax.legend(fontsize=7)


def plot_timeline(ax, row, title):
    tl = row["timeline"]
    ax.axvspan(0, tl["forward_end_ms"], color="tab:green", alpha=0.12, label="forward")
    ax.axvspan(tl["forward_end_ms"], tl["backward_end_ms"], color="tab:red", alpha=0.12,
               label="backward")
    ax.axvspan(tl["step_end_ms"], tl["next_forward_end_ms"], color="tab:green", alpha=0.06,
               label="next forward")
    ax.axvline(tl["step_end_ms"], color="black", lw=1, ls="--", label="step end")
    units = tl["units"]
    for i, u in enumerate(units):
        ax.plot([u["ready_ms"], u["done_ms"]], [i, i], color=COLOURS[row["mode"]], lw=1.5)
        ax.plot([u["done_ms"]], [i], marker="|", color="black", ms=4)
    ax.set_ylim(len(units), -1)
    ax.set_xlabel("ms from the step's start (rank 0)")
    ax.set_ylabel("op (tensor or bucket), in order handed over")
    ax.set_title(title, fontsize=9)
    ax.grid(True, axis="x", alpha=0.3)
    ax.legend(fontsize=7, loc="lower right")


def main():
    args = sys.argv[1:]
    timeline = None
    if "--timeline" in args:
        i = args.index("--timeline")
        timeline = args[i + 1].split(":", 2)  # a codec spec may hold ":"
        del args[i:i + 2]
    out, labelled = args[0], [a.split("=", 1) for a in args[1:]]
    loaded = [(label, load(path)) for label, path in labelled]
    for label, runs in loaded:
        summarise(label, runs)

    fig = plt.figure(figsize=(max(6 * len(loaded), 12), 10))
    top, bottom = fig.subfigures(2, 1)
    for ax, (label, runs) in zip(top.subplots(1, len(loaded), squeeze=False)[0], loaded):
        plot_bars(ax, label, runs)

    label, runs = loaded[0]
    key = next(iter(runs))
    if timeline:
        label, runs = next((lr for lr in loaded if lr[0] == timeline[0]), loaded[0])
        codec = timeline[2] if len(timeline) > 2 else "dense"
        key = (timeline[1], codec) if len(timeline) > 1 else key
    modes = runs[key]
    panels = [m for m in ("ddp", "session") if m in modes]
    for ax, mode in zip(bottom.subplots(1, len(panels), squeeze=False)[0], panels):
        r = modes[mode]
        plot_timeline(ax, r, f"{label}, {key[0]} {key[1]}: {mode}, step {r['step_ms']:.1f} ms\n"
                             f"first-needed gradient done {r['first_needed']['ready_to_done_ms']:.1f} ms "
                             f"after ready (median)")
    fig.savefig(out, dpi=110)


if __name__ == "__main__":
    main()
