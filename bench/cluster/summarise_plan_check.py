#!/usr/bin/env python3
"""Summarise a run_plan_check.sh output folder as Markdown, and check the probe issue's goals:
the probe's bandwidth within 15% of the shaped link rate (when shaped), --transport auto within
10% of the fastest forced (transport, algorithm) at every size, and the probe under 1 s.
Exit status 0 when every goal holds, 1 otherwise (the summary says which failed)."""
import argparse
import json
import pathlib
import re
import sys


def link_GBps(rate):
    m = re.fullmatch(r"(\d+)(k|m|g)?bit", rate)
    if not m:
        return None
    scale = {"k": 1e3, "m": 1e6, "g": 1e9, None: 1}[m.group(2)]
    return int(m.group(1)) * scale / 8 / 1e9


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--rate", default="none")
    parser.add_argument("folder")
    args = parser.parse_args()
    folder = pathlib.Path(args.folder)
    info = json.loads((folder / "info.json").read_text())
    rows = [json.loads(line) for line in (folder / "bench.jsonl").read_text().splitlines() if line]
    failures = []
    out = [f"### {info['ranks']} ranks, links {args.rate}, transports {info['communicator_transports']}",
           "", f"Probe ({info['probe_source']}, {info['probe_ms']:.0f} ms; local reduction "
           f"{info['reduce_GBps']:.2f} GB/s):", "",
           "| transport | alpha (us) | bandwidth (GB/s) | vs link |", "|---|---|---|---|"]
    rate = link_GBps(args.rate)
    for name, fig in info["probe"].items():
        versus = f"{fig['bandwidth_GBps'] / rate:.2f}" if rate else "-"
        out.append(f"| {name} | {fig['alpha_us']:.1f} | {fig['bandwidth_GBps']:.4f} | {versus} |")
        if rate and abs(fig["bandwidth_GBps"] / rate - 1) > 0.15:
            failures.append(f"{name} probe bandwidth {fig['bandwidth_GBps']:.4f} GB/s is not within 15% of {rate:.4f}")
    out += ["", "Plan for allreduce on host memory (tidegate-info's table; `--json` has every collective):", "",
            "| sizes (B) | choice | predicted (us) | runner-up |", "|---|---|---|---|"]
    for entry in info["plan"]:
        if entry["collective"] != "allreduce" or entry["memory"] != "host":
            continue
        top = f"{entry['max_bytes']}" if entry["max_bytes"] is not None else "inf"
        runner = entry["ranked"][1] if len(entry["ranked"]) > 1 else None
        runner_text = f"{runner['transport']}/{runner['algorithm']}" if runner else "-"
        out.append(f"| {entry['min_bytes']}..{top} | {entry['transport']}/{entry['algorithm']} | "
                   f"{entry['predicted_us']:.0f} | {runner_text} |")
    if info["probe_ms"] >= 1000:
        failures.append(f"probe took {info['probe_ms']:.0f} ms (goal: under 1000)")
    # auto/fastest compares two timed loops of the same run; when auto picked the fastest choice
    # itself, their difference is the machine's noise. "choice/fastest" compares auto's choice,
    # forced, with the fastest forced choice (both in the forced loop): the plan's own error.
    out += ["", "| size | auto ran | auto (us) | fastest forced | its time (us) | auto/fastest | auto's choice forced/fastest |",
            "|---|---|---|---|---|---|---|"]
    for row in rows:
        ratio = row.get("auto_vs_best")
        if ratio is None:
            out.append(f"| {row['bytes']} | {row['algo']} | {row['time_us']:.1f} | - | - | - | - |")
            continue
        best = row["choices"][row["best_choice"]]
        chosen = row["algo"].split("->")[-1]
        quality = row["choices"].get(chosen, float("nan")) / best
        out.append(f"| {row['bytes']} | {row['algo']} | {row['time_us']:.1f} | {row['best_choice']} | "
                   f"{best:.1f} | {ratio:.3f} | {quality:.3f} |")
        if ratio > 1.10:
            failures.append(f"{row['bytes']} B: auto is {ratio:.3f}x the fastest forced choice")
        if row.get("wrong") not in (0, "0"):
            failures.append(f"{row['bytes']} B: {row.get('wrong')} wrong elements")
    out.append("")
    out.append("Goals: " + ("all met" if not failures else "NOT met: " + "; ".join(failures)))
    text = "\n".join(out) + "\n"
    (folder / "summary.md").write_text(text)
    sys.stdout.write(text)
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
